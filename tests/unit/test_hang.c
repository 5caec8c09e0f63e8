/* test_hang.c — the hang verdict for the situations users meet: a killed
 * rank, a SIGSTOPped rank, an unsafe stop (ranks in different collectives),
 * a stuck network, and no hang at all; and the snapshot the job model
 * gives it. */
#include <signal.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "model/hang.h"
#include "launch/procstat.h"

#define S 1000000000LL

/* Does s start with prefix? */
static bool starts(const char *s, const char *prefix) { return !strncmp(s, prefix, strlen(prefix)); }

static void rank(HangRank *r, int k, int64_t step, int64_t seq, const char *op, int64_t since)
{
    memset(r, 0, sizeof *r);
    r->rank = k;
    r->started = true;
    r->proc_state = 'S';
    r->phase = PHASE_TRAIN;
    r->last_step = step;
    r->inflight_seq = seq;
    snprintf(r->inflight_op, sizeof r->inflight_op, "%s", op);
    r->inflight_since_ns = since;
    r->inflight_bucket = -1;
}

/* A job of world ranks that said hello and reported step `step`. */
static Job *stepped_job(int world, int64_t step, int64_t *t, int64_t wall)
{
    Job *j = job_new(world, *t);
    Msg m;
    for (int k = 0; k < world; k++) {
        msg_init(&m, MSG_HELLO);
        m.rank = k;
        m.u.hello.world = world;
        job_apply(j, &m, *t += S / 10, wall);
        msg_init(&m, MSG_STEP);
        m.rank = k;
        m.u.step.step = step;
        job_apply(j, &m, *t += S / 10, wall);
    }
    return j;
}

int main(void)
{
    HangReport h;
    HangRank r[4];
    int64_t now = 1000 * S;

    TEST_BEGIN("no_hang_when_waits_are_short");
    for (int k = 0; k < 4; k++) rank(&r[k], k, 811, 812, "allreduce", now - S);
    CHECK(hang_analyze(r, 4, now, 10 * S, &h) == 0 && !h.hung, "1 s in a collective is no hang");
    TEST_END();

    TEST_BEGIN("killed_rank_is_named");
    for (int k = 0; k < 4; k++) rank(&r[k], k, 811, 812, "allreduce", now - 12 * S);
    r[1].exited = true;
    r[1].inflight_seq = -1;
    snprintf(r[1].how_ended, sizeof r[1].how_ended, "signal 9 (Killed)");
    CHECK(hang_analyze(r, 4, now, 10 * S, &h) == 1, "hang expected");
    CHECK(h.seq == 812 && h.n_waiting == 3 && h.n_missing == 1 && h.missing[0] == 1, "seq %lld waiting %d missing %d",
          (long long)h.seq, h.n_waiting, h.n_missing);
    CHECK(strstr(h.verdict, "ranks 0,2,3 wait in all-reduce #812") != NULL, "verdict: %s", h.verdict);
    CHECK(strstr(h.verdict, "rank 1, which exited (signal 9 (Killed)) after step 811") != NULL, "verdict: %s",
          h.verdict);
    TEST_END();

    TEST_BEGIN("stopped_rank_is_named");
    for (int k = 0; k < 4; k++) rank(&r[k], k, 811, 812, "allreduce", now - 31 * S);
    r[2].inflight_seq = -1;
    r[2].proc_state = 'T';
    r[2].last_step = 811;
    CHECK(hang_analyze(r, 4, now, 10 * S, &h) == 1, "hang expected");
    CHECK(strstr(h.verdict, "ranks 0,1,3 wait") &&
              strstr(h.verdict, "rank 2, which is stopped (SIGSTOP) after step 811"),
          "verdict: %s", h.verdict);
    CHECK(h.waited_ms >= 31000, "waited %lld ms", (long long)h.waited_ms);
    TEST_END();

    TEST_BEGIN("unsafe_stop_is_a_mismatch");
    /* rank 0 left the loop and waits in its final barrier, entered before
     * rank 1's all-reduce: the barrier is the older wait, yet rank 0 is the
     * cause, not rank 1 */
    rank(&r[0], 0, 100, 101, "barrier", now - 15 * S);
    rank(&r[1], 1, 101, 102, "allreduce", now - 14 * S);
    r[0].phase = PHASE_STOPPING;
    CHECK(hang_analyze(r, 2, now, 10 * S, &h) == 1 && h.mismatch, "mismatch expected");
    CHECK(h.n_waiting == 1 && h.n_missing == 1 && h.left == 0 && h.seq == 102, "waiting %d missing %d left %d seq %lld",
          h.n_waiting, h.n_missing, h.left, (long long)h.seq);
    CHECK(starts(h.verdict, "rank 0 left the training loop after step 100 and waits in barrier #101; rank 1 waits in "
                            "all-reduce #102 (14.0 s) for it"),
          "verdict: %s", h.verdict);
    CHECK(!h.alone, "a rank in its final barrier is not 'finished': %s", h.verdict);
    /* four ranks, rank 1's unsafe stop, the same collective number */
    for (int k = 0; k < 4; k++) rank(&r[k], k, 40, 41, "allreduce", now - 12 * S);
    r[1].phase = PHASE_DESTROYING;
    snprintf(r[1].inflight_op, sizeof r[1].inflight_op, "barrier");
    r[1].inflight_since_ns = now - 13 * S;
    snprintf(r[1].stop_reason, sizeof r[1].stop_reason, "unsafe stop (fault): rank 1 stops alone, no agreement");
    r[0].inflight_bucket = r[2].inflight_bucket = r[3].inflight_bucket = 0;
    CHECK(hang_analyze(r, 4, now, 10 * S, &h) == 1 && h.left == 1 && h.missing[0] == 1, "left %d", h.left);
    CHECK(starts(h.verdict,
                 "rank 1 left the training loop (unsafe stop) after step 40 and waits in barrier #41; ranks 0,2,3 "
                 "wait in all-reduce #41 (bucket 0, 12.0 s) for it"),
          "verdict: %s", h.verdict);
    CHECK(!strstr(h.verdict, "for rank 0") && !strstr(h.verdict, "stopped stepping"), "blames another: %s", h.verdict);
    TEST_END();

    TEST_BEGIN("a_silent_adapter_rank_is_in_no_collective_and_a_stopped_one_stays_stopped");
    /* rank 1 (the torch adapter's, beating from its own thread) claims
     * all-reduce #40, which completed before it went quiet 6 s ago; rank 0
     * waits in #41. Its claim is old news: no desync, rank 1 silent */
    for (int k = 0; k < 2; k++) {
        rank(&r[k], k, 40, 41, "allreduce", now - 12 * S);
        r[k].python = true;
        snprintf(r[k].where, sizeof r[k].where, "t.py:%d in main", 10 + k);
    }
    r[1].inflight_seq = 40;
    r[1].silent_ns = 6 * S;
    CHECK(hang_rank_silent(&r[1]) && !hang_rank_silent(&r[0]), "silence");
    CHECK(hang_analyze(r, 2, now, 10 * S, &h) == 1 && !h.mismatch && h.missing_silent && h.missing[0] == 1,
          "mismatch %d silent %d: %s", h.mismatch, h.missing_silent, h.verdict);
    CHECK(strstr(h.verdict, "rank 1, which has been silent for 6 s after step 40 (its heartbeat thread cannot run: "
                            "the process is blocked in native code holding Python's GIL?), last heard at t.py:11 in main"),
          "verdict: %s", h.verdict);
    /* late (3 s), not yet silent: no verdict until the next looks tell */
    r[1].silent_ns = 3 * S;
    CHECK(hang_analyze(r, 2, now, 10 * S, &h) == 0 && h.late == 1, "late %d: %s", h.late, h.verdict);
    /* stopped (SIGSTOP) or gone: not silent, as before */
    r[1].silent_ns = 6 * S;
    r[1].proc_state = 'T';
    CHECK(!hang_rank_silent(&r[1]), "a stopped rank is stopped, not silent");
    r[1].proc_state = 0;
    CHECK(!hang_rank_silent(&r[1]), "a rank whose process ddptop cannot see is not silent");
    r[1].proc_state = 'S';
    r[1].python = false;
    CHECK(!hang_rank_silent(&r[1]), "the C worker beats from its training thread: never silent");
    TEST_END();

    TEST_BEGIN("a_stuck_rank_says_where_it_sleeps");
    for (int k = 0; k < 2; k++) rank(&r[k], k, 40, 41, "allreduce", now - 12 * S);
    r[1].inflight_seq = -1;
    snprintf(r[1].wchan, sizeof r[1].wchan, "futex_wait_queue");
    CHECK(hang_analyze(r, 2, now, 10 * S, &h) == 1, "hang expected");
    CHECK(strstr(h.verdict, "rank 1, which stopped stepping after step 40 (sleeping in futex_wait_queue"),
          "verdict: %s", h.verdict);
    TEST_END();

    TEST_BEGIN("no_verdict_on_a_rank_ddptop_is_behind_on");
    {
        /* rank 1 left the loop and waits in its barrier (5 s); rank 0 trains
         * on, but what ddptop reads of it now it sent 6 s ago (a backlog):
         * it is not known to have stopped, and no verdict blames it */
        rank(&r[0], 0, 23651, -1, "", 0);
        rank(&r[1], 1, 23875, 23923, "barrier", now - 5 * S);
        r[1].phase = PHASE_STOPPING;
        r[1].sent_ns = now - S / 2;
        r[0].sent_ns = now - 6 * S;
        r[0].silent_ns = S / 10;
        CHECK(hang_analyze(r, 2, now, 2 * S, &h) == 0 && !h.hung && h.catching_up == 0,
              "a verdict on a rank still being read: catching_up %d, %s", h.catching_up, h.verdict);
        /* caught up: the last of it came 1.5 s ago, and nothing since */
        r[0].silent_ns = 3 * S / 2;
        CHECK(hang_analyze(r, 2, now, 2 * S, &h) == 1 && h.catching_up == -1 &&
                  strstr(h.verdict, "rank 0, which stopped stepping after step 23651"),
              "no verdict once caught up: %s", h.verdict);
        /* a rank that beats from elsewhere (newer than the wait) is judged at once */
        r[0].silent_ns = S / 10;
        r[0].sent_ns = now - S / 10;
        CHECK(hang_analyze(r, 2, now, 2 * S, &h) == 1, "a beating rank held back: %s", h.verdict);
    }
    TEST_END();

    TEST_BEGIN("a_python_rank_is_named_by_its_line");
    for (int k = 0; k < 4; k++) rank(&r[k], k, 8411, 8412, "allreduce", now - 18 * S);
    for (int k = 0; k < 4; k++) r[k].inflight_bucket = 0; /* DDP's first gradient bucket */
    r[1].inflight_seq = r[1].inflight_bucket = -1;
    snprintf(r[1].where, sizeof r[1].where, "train.py:61 in save_checkpoint");
    CHECK(hang_analyze(r, 4, now, 10 * S, &h) == 1 && h.bucket == 0, "hang in bucket 0 expected");
    CHECK(strstr(h.verdict, "ranks 0,2,3 wait in all-reduce #8412 (bucket 0, 18.0 s) for rank 1, which is at "
                            "train.py:61 in save_checkpoint (after step 8411, sleeping, phase train)"),
          "verdict: %s", h.verdict);
    r[1].proc_state = 'T'; /* SIGSTOP: where it was when it stopped */
    CHECK(hang_analyze(r, 4, now, 10 * S, &h) == 1 &&
              strstr(h.verdict, "rank 1, which is stopped (SIGSTOP) at train.py:61 in save_checkpoint after step 8411"),
          "verdict: %s", h.verdict);
    r[1].proc_state = 'S';
    /* elsewhere (the same number, another op: a desync; a number two or more
     * ahead of the others' cannot be, see a_beat_older_...): the line says
     * where that call is */
    r[1].inflight_seq = 8412;
    snprintf(r[1].inflight_op, sizeof r[1].inflight_op, "barrier");
    CHECK(hang_analyze(r, 4, now, 10 * S, &h) == 1 && h.mismatch &&
              strstr(h.verdict, "which waits in barrier #8412 instead, at train.py:61 in save_checkpoint"),
          "verdict: %s", h.verdict);
    TEST_END();

    TEST_BEGIN("alone_in_a_collective_the_others_finished");
    /* rank 0 in a barrier under `if rank == 0:`; rank 1 destroyed and left */
    rank(&r[0], 0, 20, 41, "barrier", now - 12 * S);
    snprintf(r[0].where, sizeof r[0].where, "ddp_shutdown_hang.py:32 in main");
    rank(&r[1], 1, 20, -1, "", 0);
    r[1].exited = r[1].finished = true;
    snprintf(r[1].how_ended, sizeof r[1].how_ended, "exit 0");
    CHECK(hang_analyze(r, 2, now, 10 * S, &h) == 1 && h.alone, "alone expected: %s", h.verdict);
    CHECK(strstr(h.verdict, "rank 0 waits in barrier #41 (12.0 s) at ddp_shutdown_hang.py:32 in main for rank 1, "
                            "which exited (exit 0) after step 20") &&
              strstr(h.verdict, "every other rank has finished") && strstr(h.verdict, "`if rank == 0:`"),
          "verdict: %s", h.verdict);
    /* a rank that crashed has not finished: no such hint */
    r[1].finished = false;
    snprintf(r[1].how_ended, sizeof r[1].how_ended, "signal 9 (Killed)");
    CHECK(hang_analyze(r, 2, now, 10 * S, &h) == 1 && !h.alone && !strstr(h.verdict, "if rank == 0"), "verdict: %s",
          h.verdict);
    /* nor one that is still training */
    r[1].exited = false;
    r[1].proc_state = 'R';
    CHECK(hang_analyze(r, 2, now, 10 * S, &h) == 1 && !h.alone, "verdict: %s", h.verdict);
    TEST_END();

    TEST_BEGIN("everyone_inside_means_the_collective_is_stuck");
    for (int k = 0; k < 2; k++) rank(&r[k], k, 5, 6, "allreduce", now - 20 * S);
    CHECK(hang_analyze(r, 2, now, 10 * S, &h) == 1, "hang expected");
    CHECK(h.n_missing == 0 && strstr(h.verdict, "every rank is inside it"), "verdict: %s", h.verdict);
    TEST_END();

    TEST_BEGIN("snapshot_from_the_job_model");
    {
        /* ranks 0-2 beat in all-reduce #11; rank 1's #11 then completed (old
         * news), rank 2 then exited (no longer waiting); rank 3 never spoke */
        int64_t t = 100 * S, wall = 1700000000LL * S;
        Job *j = job_new(4, t);
        Msg m;
        for (int k = 0; k < 3; k++) {
            msg_init(&m, MSG_HELLO);
            m.rank = k;
            m.u.hello.world = 4;
            m.u.hello.pid = 100 + k;
            job_apply(j, &m, t += S / 10, wall);
            msg_init(&m, MSG_BEAT);
            m.rank = k;
            m.u.beat.step = 7;
            m.u.beat.coll_seq = 11;
            snprintf(m.u.beat.coll_op, sizeof m.u.beat.coll_op, "allreduce");
            m.u.beat.coll_since_ns = wall;
            m.u.beat.coll_bucket = 2;
            job_apply(j, &m, t += S / 10, wall);
        }
        msg_init(&m, MSG_COLL);
        m.rank = 1;
        m.u.coll.seq = 11;
        snprintf(m.u.coll.op, sizeof m.u.coll.op, "allreduce");
        job_apply(j, &m, t += S / 10, wall);
        job_rank_exited(j, 2, 102, W_EXITCODE(0, 9), NULL, t += S / 10, wall);
        HangRank snap[4];
        hang_snapshot(j, t + 2 * S, snap, 4);
        CHECK(snap[0].started && snap[0].inflight_seq == 11 && !strcmp(snap[0].inflight_op, "allreduce") &&
                  snap[0].inflight_since_ns == wall && snap[0].inflight_bucket == 2 &&
                  snap[0].silent_ns == 2 * S + 6 * S / 10,
              "rank 0: seq %lld silent %lld", (long long)snap[0].inflight_seq, (long long)snap[0].silent_ns);
        CHECK(snap[1].inflight_seq == -1, "rank 1's completed collective still in flight");
        CHECK(snap[2].exited && snap[2].inflight_seq == -1 && strstr(snap[2].how_ended, "signal 9"),
              "rank 2: exited %d seq %lld how '%s'", snap[2].exited, (long long)snap[2].inflight_seq,
              snap[2].how_ended);
        CHECK(!snap[3].started && snap[3].inflight_seq == -1 && snap[3].inflight_bucket == -1 &&
                  snap[3].proc_state == 0,
              "rank 3");
        /* the live rule and the snapshot agree */
        for (int k = 0; k < 4; k++)
            CHECK(job_rank_in_flight(&j->ranks[k], wall + 20 * S, NULL, NULL) == (snap[k].inflight_seq >= 0),
                  "rank %d: in flight and snapshot disagree", k);
        CHECK(hang_analyze(snap, 4, wall + 20 * S, 10 * S, &h) == 1 && h.n_waiting == 1 && h.waiting[0] == 0,
              "verdict: %s", h.verdict);
        CHECK(!snap[0].where[0] && !snap[0].finished, "a C rank has no line: '%s'", snap[0].where);
        /* a Python rank's newest beat names its line; a clean exit is finished */
        msg_init(&m, MSG_BEAT);
        m.rank = 1;
        m.u.beat.step = 8;
        snprintf(m.u.beat.where, sizeof m.u.beat.where, "train.py:61 save_checkpoint");
        job_apply(j, &m, t += S / 10, wall);
        msg_init(&m, MSG_BYE);
        m.rank = 0;
        job_apply(j, &m, t += S / 10, wall);
        job_rank_exited(j, 0, 100, W_EXITCODE(0, 0), NULL, t += S / 10, wall);
        hang_snapshot(j, t, snap, 4);
        CHECK(!strcmp(snap[1].where, "train.py:61 in save_checkpoint"), "rank 1 where '%s'", snap[1].where);
        CHECK(snap[0].finished && !snap[1].finished && !snap[2].finished, "finished %d %d %d", snap[0].finished,
              snap[1].finished, snap[2].finished);
        job_free(&j);
    }
    TEST_END();

    TEST_BEGIN("one_hang_one_event_and_the_stalled_rank_is_blamed");
    {
        /* rank 1 of 4 stops after step 10; ranks 0,2,3 wait in all-reduce #12.
         * Each second's look at the same hang rewrites its one event; the
         * ladder then SIGTERMs rank 0 first: the verdict names rank 1. */
        int64_t t = 100 * S, wall = 1700000000LL * S;
        Job *j = stepped_job(4, 10, &t, wall);
        HangRank snap[4];
        for (int k = 0; k < 4; k++) rank(&snap[k], k, 10, k == 1 ? -1 : 12, "allreduce", wall - 3 * S);
        HangReport rep;
        CHECK(hang_analyze(snap, 4, wall, 2 * S, &rep) == 1, "hang expected");
        uint64_t before = j->ev_total;
        CHECK(hang_note(j, &rep, t += S, wall), "a new hang is new");
        CHECK(hang_analyze(snap, 4, wall + 5 * S, 2 * S, &rep) == 1, "still hung");
        CHECK(!hang_note(j, &rep, t += S, wall + 5 * S), "the same hang, longer, is not new");
        CHECK(j->ev_total == before + 1, "%llu events for one hang", (unsigned long long)(j->ev_total - before));
        const JobEvent *e = job_event_at(j, 0);
        /* the cause first: the rank that stopped, then who waits for it */
        CHECK(e && !strcmp(e->text, "hang: rank 1 stopped stepping after step 10 (sleeping, phase train); ranks 0,2,3 "
                                    "wait in all-reduce #12 (8.0 s) for it"),
              "event: %s", e ? e->text : "");
        for (int k = 0; k < 4; k++)
            job_rank_exited(j, k, 100 + k, W_EXITCODE(0, SIGTERM), "SIGTERM by ddptop", t += S / 10, wall);
        char v[512];
        job_verdict(j, v, sizeof v);
        CHECK(!strcmp(v, "job failed: rank 1 stalled at step 10 (ranks 0,2,3 waited for it in all-reduce #12); "
                         "ranks 0-3 were stopped by ddptop (SIGTERM)"),
              "verdict: %s", v);
        job_free(&j);
    }
    TEST_END();

    TEST_BEGIN("a_beat_older_than_the_others_progress_is_no_wait");
    {
        /* rank 1 was SIGSTOPped a second after its last beat, which was
         * inside all-reduce #509; rank 0 has since finished #509 and #510
         * (with rank 1) and waits in #511. Rank 1's claim is older, so taken
         * at its word it was the oldest wait and the verdict blamed rank 0. */
        int64_t wall = 1700000000LL * S;
        HangRank snap[2];
        rank(&snap[0], 0, 10, 511, "allreduce", wall - 5 * S);
        rank(&snap[1], 1, 9, 509, "allreduce", wall - 6 * S);
        snap[1].proc_state = 'T';
        HangReport rep;
        CHECK(hang_analyze(snap, 2, wall, 2 * S, &rep) == 1, "hang expected");
        CHECK(rep.seq == 511 && rep.n_waiting == 1 && rep.waiting[0] == 0 && rep.n_missing == 1 && rep.missing[0] == 1,
              "seq %lld waiting %d (%d) missing %d (%d): %s", (long long)rep.seq, rep.n_waiting, rep.waiting[0],
              rep.n_missing, rep.missing[0], rep.verdict);
        CHECK(strstr(rep.verdict, "rank 0 waits in all-reduce #511") && strstr(rep.verdict, "rank 1, which is stopped"),
              "verdict: %s", rep.verdict);
        CHECK(snap[1].inflight_seq == 509, "the caller's snapshot changed");
        /* not stopped, silent in Python: still not "waits in #509 instead" */
        snap[1].proc_state = 'S';
        CHECK(hang_analyze(snap, 2, wall, 2 * S, &rep) == 1 && !strstr(rep.verdict, "#509"), "verdict: %s",
              rep.verdict);
        /* one behind is no contradiction: rank 1 may still be leaving #510 as rank 0 enters #511 */
        rank(&snap[1], 1, 9, 510, "allreduce", wall - 6 * S);
        CHECK(hang_analyze(snap, 2, wall, 2 * S, &rep) == 1 && rep.seq == 510, "seq %lld: %s", (long long)rep.seq,
              rep.verdict);
    }
    TEST_END();

    TEST_BEGIN("a_waiting_rank_that_ends_first_is_not_blamed");
    {
        /* rank 1 of 4 stalls; ranks 0,2,3 wait in all-reduce #12. The ladder
         * (or its own timeout) ends rank 2 first, and the next look at the
         * same hang sees it outside the collective: the hang still names
         * rank 1 alone, its event keeps what it said, the verdict blames 1. */
        int64_t t = 100 * S, wall = 1700000000LL * S;
        Job *j = stepped_job(4, 10, &t, wall);
        HangRank snap[4];
        for (int k = 0; k < 4; k++) rank(&snap[k], k, 10, k == 1 ? -1 : 12, "allreduce", wall - 3 * S);
        HangReport rep;
        CHECK(hang_analyze(snap, 4, wall, 2 * S, &rep) == 1, "hang expected");
        CHECK(hang_note(j, &rep, t += S, wall), "a new hang is new");
        job_rank_exited(j, 2, 102, W_EXITCODE(0, SIGTERM), "SIGTERM by ddptop", t += S / 10, wall);
        hang_snapshot(j, t, snap, 4);
        for (int k = 0; k < 4; k++)
            if (k != 2) rank(&snap[k], k, 10, k == 1 ? -1 : 12, "allreduce", wall - 3 * S);
        CHECK(snap[2].exited && snap[2].inflight_seq < 0, "rank 2 exited, outside the collective");
        CHECK(hang_analyze(snap, 4, wall + S, 2 * S, &rep) == 1 && rep.n_missing == 2, "missing %d: %s",
              rep.n_missing, rep.verdict);
        CHECK(!hang_note(j, &rep, t += S, wall + S), "the same hang");
        CHECK(j->hang.n_missing == 1 && j->hang.missing[0] == 1, "missing %d, first %d", j->hang.n_missing,
              j->hang.missing[0]);
        const JobEvent *e = job_event_nth(j, j->hang.ev);
        CHECK(e && strstr(e->text, "hang: rank 1 stopped stepping after step 10") &&
                  strstr(e->text, "; ranks 0,2,3 wait in all-reduce #12"),
              "event: %s", e ? e->text : "");
        for (int k = 0; k < 4; k++)
            if (k != 2) job_rank_exited(j, k, 100 + k, W_EXITCODE(0, SIGTERM), "SIGTERM by ddptop", t += S / 10, wall);
        char v[512];
        job_verdict(j, v, sizeof v);
        CHECK(!strcmp(v, "job failed: rank 1 stalled at step 10 (ranks 0,2,3 waited for it in all-reduce #12); "
                         "ranks 0-3 were stopped by ddptop (SIGTERM)"),
              "verdict: %s", v);
        job_free(&j);
    }
    TEST_END();

    TEST_BEGIN("an_unsafe_stop_is_blamed_on_the_rank_that_left");
    {
        /* rank 1 of 2 left after step 10 (unsafe stop) and waits in barrier
         * #11; rank 0 waits in all-reduce #11; the ladder SIGTERMs both */
        int64_t t = 100 * S, wall = 1700000000LL * S;
        Job *j = stepped_job(2, 10, &t, wall);
        Msg m;
        msg_init(&m, MSG_PHASE);
        m.rank = 1;
        m.u.phase.phase = PHASE_DESTROYING;
        snprintf(m.u.phase.detail, sizeof m.u.phase.detail, "unsafe stop (fault): rank 1 stops alone, no agreement");
        job_apply(j, &m, t += S / 10, wall);
        HangRank snap[2];
        hang_snapshot(j, t, snap, 2);
        CHECK(strstr(snap[1].stop_reason, "unsafe stop") != NULL, "stop reason '%s'", snap[1].stop_reason);
        rank(&snap[0], 0, 10, 11, "allreduce", wall - 3 * S);
        rank(&snap[1], 1, 10, 11, "barrier", wall - 4 * S);
        snap[1].phase = PHASE_DESTROYING;
        snprintf(snap[1].stop_reason, sizeof snap[1].stop_reason, "unsafe stop (fault)");
        HangReport rep;
        CHECK(hang_analyze(snap, 2, wall, 2 * S, &rep) == 1 && rep.left == 1, "left %d: %s", rep.left, rep.verdict);
        hang_note(j, &rep, t += S, wall);
        for (int k = 0; k < 2; k++)
            job_rank_exited(j, k, 100 + k, W_EXITCODE(0, SIGTERM), "SIGTERM by ddptop", t += S / 10, wall);
        char v[512];
        job_verdict(j, v, sizeof v);
        CHECK(!strcmp(v, "job failed: rank 1 left the training loop (unsafe stop) after step 10 (rank 0 waited for "
                         "it in all-reduce #11); ranks 0,1 were stopped by ddptop (SIGTERM)"),
              "verdict: %s", v);
        job_free(&j);
    }
    TEST_END();

    TEST_BEGIN("a_hang_that_resolved_is_not_blamed");
    {
        int64_t t = 100 * S, wall = 1700000000LL * S;
        Job *j = stepped_job(2, 10, &t, wall);
        Msg m;
        HangRank snap[2];
        rank(&snap[0], 0, 10, 12, "allreduce", wall - 3 * S);
        rank(&snap[1], 1, 10, -1, "allreduce", 0);
        HangReport rep;
        hang_analyze(snap, 2, wall, 2 * S, &rep);
        hang_note(j, &rep, t += S, wall);
        msg_init(&m, MSG_STEP); /* rank 1 goes on (SIGCONT): the hang is over */
        m.rank = 1;
        m.u.step.step = 11;
        job_apply(j, &m, t += S, wall);
        job_rank_exited(j, 0, 100, W_EXITCODE(0, 9), NULL, t += S, wall);
        char v[512];
        job_verdict(j, v, sizeof v);
        CHECK(strstr(v, "job failed: rank 0 signal 9") == v, "verdict: %s", v);
        job_free(&j);
    }
    TEST_END();

    TEST_BEGIN("rank_ranges_compact");
    int ranks[] = { 0, 1, 2, 5, 7, 8, 9, 10 };
    char buf[64];
    hang_format_ranks(ranks, 8, buf, sizeof buf);
    CHECK(!strcmp(buf, "0-2,5,7-10"), "got %s", buf);
    int two[] = { 3, 4 };
    hang_format_ranks(two, 2, buf, sizeof buf);
    CHECK(!strcmp(buf, "3,4"), "got %s", buf);
    TEST_END();

    TEST_BEGIN("procstat_reads_this_process");
    ProcStat ps;
    CHECK(procstat_read(getpid(), &ps) == 0 && ps.state == 'R', "state %c", ps.state ? ps.state : '?');
    CHECK(procstat_read(999999999, &ps) == -1, "a missing pid is an error");
    TEST_END();

    CHECK_EXIT();
}
