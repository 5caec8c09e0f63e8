/* test_diagnosis.c — the job's one diagnosis (job_diagnosis.c) from the
 * messages real torch jobs send when they go wrong, as the scenario runs of
 * issue 30 recorded them: a desync, a collective under `if rank == 0:`
 * (failed at once by Gloo, or hung until the timeout), a rank's own
 * exception before its peer's "Connection closed", a SIGKILLed rank, a
 * rank blocked in Python, uneven inputs. Each checks the culprit, the kind,
 * the user's line, that the live line and the final verdict say the same,
 * and that the order in which consequences arrive changes nothing. */
#include <signal.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>

#include "check.h"
#include "model/hang.h"

#define S    1000000000LL
#define WALL (1700000000LL * S)

static const char *const CLOSED = "RuntimeError: [./gloo/transport/tcp/pair.cc:598] Connection closed by peer "
                                  "[127.0.0.1]:44982";
static const char *const TIMEOUT = "RuntimeError: [./gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting "
                                   "20000ms for recv operation to complete";

typedef struct {
    Job *j;
    int64_t t; /* monotonic */
} Run;

static Run start(int world, int64_t steps)
{
    Run r = { job_new(world, 100 * S), 100 * S };
    Msg m;
    for (int k = 0; k < world; k++) {
        msg_init(&m, MSG_HELLO);
        m.rank = k;
        m.u.hello.world = world;
        job_apply(r.j, &m, r.t += S / 100, WALL);
        msg_init(&m, MSG_PHASE);
        m.rank = k;
        m.u.phase.phase = PHASE_TRAIN;
        job_apply(r.j, &m, r.t += S / 100, WALL);
    }
    for (int64_t s = 1; s <= steps; s++)
        for (int k = 0; k < world; k++) {
            msg_init(&m, MSG_STEP);
            m.rank = k;
            m.u.step.step = s;
            job_apply(r.j, &m, r.t += S / 100, WALL);
        }
    return r;
}

static void phase(Run *r, int k, Phase p, const char *detail)
{
    Msg m;
    msg_init(&m, MSG_PHASE);
    m.rank = k;
    m.u.phase.phase = p;
    if (detail) snprintf(m.u.phase.detail, sizeof m.u.phase.detail, "%s", detail);
    job_apply(r->j, &m, r->t += S / 100, WALL);
}

static void step(Run *r, int k, int64_t s)
{
    Msg m;
    msg_init(&m, MSG_STEP);
    m.rank = k;
    m.u.step.step = s;
    job_apply(r->j, &m, r->t += S / 100, WALL);
}

/* A beat: in collective (seq, op) since `since` (seq -1: in none), at where. */
static void beat(Run *r, int k, int64_t seq, const char *op, int64_t since, const char *where)
{
    Msg m;
    msg_init(&m, MSG_BEAT);
    m.rank = k;
    m.u.beat.coll_seq = seq;
    m.u.beat.coll_bucket = -1;
    snprintf(m.u.beat.coll_op, sizeof m.u.beat.coll_op, "%s", op);
    m.u.beat.coll_since_ns = since;
    snprintf(m.u.beat.where, sizeof m.u.beat.where, "%s", where);
    job_apply(r->j, &m, r->t += S / 100, WALL);
}

static void log_err(Run *r, int k, const char *text)
{
    Msg m;
    msg_init(&m, MSG_LOG);
    m.rank = k;
    snprintf(m.u.log.level, sizeof m.u.log.level, "error");
    snprintf(m.u.log.text, sizeof m.u.log.text, "%s", text);
    job_apply(r->j, &m, r->t += S / 100, WALL);
}

/* The adapter's error: the phase, then the traceback's lines (runner.py). */
static void raise_(Run *r, int k, const char *error, const char *user, const char *lib)
{
    phase(r, k, PHASE_ERROR, error);
    log_err(r, k, "Traceback (most recent call last)");
    log_err(r, k, "/home/u/job/train.py:40 in <module>: main()");
    log_err(r, k, user);
    if (lib) log_err(r, k, lib);
    log_err(r, k, error);
}

static void bye_exit(Run *r, int k, int code)
{
    Msg m;
    msg_init(&m, MSG_BYE);
    m.rank = k;
    m.u.bye.status = code;
    job_apply(r->j, &m, r->t += S / 100, WALL);
    job_rank_exited(r->j, k, 100 + k, W_EXITCODE(code, 0), NULL, r->t += S / 100, WALL);
}

/* The live watch's look at wall time `at`: the hang it reports, noted. */
static bool watch(Run *r, int64_t at)
{
    HangRank snap[8];
    HangReport rep;
    hang_snapshot(r->j, r->t, snap, r->j->world);
    for (int k = 0; k < r->j->world; k++) {
        snap[k].proc_state = 'S';
        if (hang_rank_silent(&snap[k])) job_note_silent(r->j, k, r->t, at); /* as run/hangwatch.c does */
    }
    if (!hang_analyze(snap, r->j->world, at, 3 * S, &rep)) return false;
    hang_note(r->j, &rep, r->t += S / 100, at);
    return true;
}

/* The newest "hang: " event's text after the prefix, "" none. */
static const char *hang_line(const Job *j)
{
    for (int i = 0; job_event_at(j, i); i++)
        if (!strncmp(job_event_at(j, i)->text, "hang: ", 6)) return job_event_at(j, i)->text + 6;
    return "";
}

static bool starts(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }

/* Rank 0 evaluates through DDP alone: broadcast #45 in validate while rank 1
 * all-reduces #45; both time out later. first_wait picks which rank entered
 * first (the analysis then sees another "best" wait), first_fail which one
 * times out first: neither may change the diagnosis. */
static void desync(int first_wait, int first_fail, char *out, size_t len)
{
    Run r = start(2, 21);
    beat(&r, 0, 45, "broadcast", WALL - (first_wait == 0 ? 5 : 4) * S, "eval.py:14 validate");
    beat(&r, 1, 45, "allreduce", WALL - (first_wait == 1 ? 5 : 4) * S, "eval.py:22 <module>");
    CHECK(watch(&r, WALL), "no hang seen");
    JobDiagnosis d;
    job_diagnose(r.j, &d);
    CHECK(d.kind == DIAG_DESYNC && d.rank == 0 && !strcmp(d.where, "eval.py:14 in validate"),
          "live: %s rank %d at '%s'", job_diag_kind_name(d.kind), d.rank, d.where);
    CHECK(!strcmp(hang_line(r.j), d.text), "the live line is not the diagnosis: '%s' vs '%s'", hang_line(r.j), d.text);
    CHECK(job_diag_is_culprit(r.j, 0) && !job_diag_is_culprit(r.j, 1), "the `!` is not on rank 0");
    int a = first_fail, b = 1 - first_fail;
    phase(&r, a, PHASE_ERROR, TIMEOUT);
    bye_exit(&r, a, 1);
    phase(&r, b, PHASE_ERROR, TIMEOUT);
    bye_exit(&r, b, 1);
    job_verdict(r.j, out, len);
    job_free(&r.j);
}

int main(void)
{
    TEST_BEGIN("a_desync_is_named_with_both_lines_live_and_final_on_every_run");
    {
        char v[4][2048];
        for (int i = 0; i < 4; i++) desync(i & 1, i >> 1, v[i], sizeof v[i]);
        CHECK(starts(v[0], "job failed: desync: rank 0 in broadcast #45 at eval.py:14 in validate while rank 1 is in "
                           "all-reduce #45 at eval.py:22 in <module>: the ranks call collectives in different orders"),
              "verdict: %s", v[0]);
        CHECK(strstr(v[0], "ranks 0,1 ended: exit 1 after \"Timed out waiting 20000ms for recv operation to complete\" "
                           "(a consequence)") &&
                  !strstr(v[0], "stalled"),
              "verdict: %s", v[0]);
        for (int i = 1; i < 4; i++) {
            /* the consequences' order may differ; the cause may not */
            const char *cut = strstr(v[i], "; rank");
            CHECK(cut && !strncmp(v[i], v[0], (size_t)(cut - v[i])), "run %d differs:\n%s\n%s", i, v[i], v[0]);
        }
    }
    TEST_END();

    TEST_BEGIN("a_barrier_under_if_rank_0_that_gloo_fails_at_once_is_alone_not_uneven");
    {
        /* both ran 40 steps; rank 1 destroys its group and exits; rank 0's
         * barrier then fails with "Connection closed by peer" before any hang */
        Run r = start(2, 40);
        phase(&r, 1, PHASE_DESTROYED, NULL);
        bye_exit(&r, 1, 0);
        raise_(&r, 0, CLOSED, "/home/u/job/train.py:12 in main: dist.barrier()  # BUG",
               "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py:3152 in barrier: work.wait()");
        bye_exit(&r, 0, 1);
        JobDiagnosis d;
        job_diagnose(r.j, &d);
        CHECK(d.kind == DIAG_ALONE && d.rank == 0 && !strcmp(d.where, "train.py:12 in main"), "%s rank %d at '%s'",
              job_diag_kind_name(d.kind), d.rank, d.where);
        char v[2048];
        job_verdict(r.j, v, sizeof v);
        CHECK(starts(v, "job failed: rank 0 called barrier at train.py:12 in main after step 40, which no other rank "
                        "reached: rank 1 had finished after step 40") &&
                  strstr(v, "(a consequence)") && !strstr(v, "uneven") && !strstr(v, "stalled"),
              "verdict: %s", v);
        job_free(&r.j);
    }
    TEST_END();

    TEST_BEGIN("a_rank_that_trains_on_after_the_other_finished_is_uneven_inputs");
    {
        /* rank 1 finished after 20 steps, rank 0 went on: its backward's
         * all-reduce (DDP's, not the user's) lost its peer */
        Run r = start(2, 20);
        phase(&r, 1, PHASE_DESTROYED, NULL);
        bye_exit(&r, 1, 0);
        raise_(&r, 0, CLOSED, "/home/u/job/train.py:9 in main: loss.backward()",
               "/usr/lib/python3/dist-packages/torch/_tensor.py:488 in backward: torch.autograd.backward(");
        bye_exit(&r, 0, 1);
        JobDiagnosis d;
        job_diagnose(r.j, &d);
        CHECK(d.kind == DIAG_UNEVEN, "kind %s: %s", job_diag_kind_name(d.kind), d.text);
        job_free(&r.j);
    }
    TEST_END();

    TEST_BEGIN("no_sync_windows_that_differ_end_as_uneven_steps_at_the_users_backward");
    {
        /* rank 0 syncs every 2nd micro-batch, rank 1 every 3rd: as many
         * batches, but rank 1 finished after 8 synced steps while rank 0
         * went into its 9th, whose all-reduce lost its peer; the steps'
         * counts agree (8 and 8), so the verdict says where rank 0 was and
         * that the ranks' synced steps differ, never the peer's closed
         * link as the cause */
        Run r = start(2, 8);
        phase(&r, 1, PHASE_DESTROYED, NULL);
        bye_exit(&r, 1, 0);
        raise_(&r, 0, CLOSED, "/home/u/job/train.py:21 in accumulate: model(x).square().mean().backward()",
               "/usr/lib/python3/dist-packages/torch/_tensor.py:488 in backward: torch.autograd.backward(");
        bye_exit(&r, 0, 1);
        JobDiagnosis d;
        job_diagnose(r.j, &d);
        CHECK(d.kind == DIAG_UNEVEN && d.rank == 0 && !strcmp(d.where, "train.py:21 in accumulate"),
              "%s rank %d at '%s'", job_diag_kind_name(d.kind), d.rank, d.where);
        char v[2048];
        job_verdict(r.j, v, sizeof v);
        CHECK(starts(v, "job failed: rank 1 had finished after step 8 while rank 0 trained on: its next collective "
                        "at train.py:21 in accumulate had no partner; the ranks ran different numbers of steps "
                        "(uneven inputs, or no_sync() windows that differ by rank: Join)") &&
                  strstr(v, "\"Connection closed by peer\" (a consequence)"),
              "verdict: %s", v);
        job_free(&r.j);
    }
    TEST_END();

    TEST_BEGIN("a_finished_rank_slow_to_exit_after_its_peer_failed_is_no_cause");
    {
        /* the same no_sync ending on a loaded machine: rank 1 said bye,
         * rank 0's all-reduce lost its peer and rank 0 exited 1, and only
         * then was rank 1's process seen not to have exited (--hang-after
         * 3: its interpreter was slow to end); it exits 0 by itself. The
         * failure's cause (the uneven steps) stays the verdict; a linger
         * noted first would be the cause (t_py_exit_hang's) */
        Run r = start(2, 8);
        phase(&r, 1, PHASE_DESTROYED, NULL);
        Msg m;
        msg_init(&m, MSG_BYE);
        m.rank = 1;
        m.u.bye.status = 0;
        job_apply(r.j, &m, r.t += S / 100, WALL);
        raise_(&r, 0, CLOSED, "/home/u/job/train.py:21 in accumulate: model(x).square().mean().backward()",
               "/usr/lib/python3/dist-packages/torch/_tensor.py:488 in backward: torch.autograd.backward(");
        bye_exit(&r, 0, 1);
        CHECK(job_note_linger(r.j, 1, r.t += 3 * S, WALL + 3 * S, 3.0, ""), "no linger noted");
        job_rank_exited(r.j, 1, 101, W_EXITCODE(0, 0), NULL, r.t += S, WALL + 4 * S);
        JobDiagnosis d;
        job_diagnose(r.j, &d);
        CHECK(d.kind == DIAG_UNEVEN && d.rank == 0 && !strcmp(d.where, "train.py:21 in accumulate"),
              "%s rank %d at '%s': %s", job_diag_kind_name(d.kind), d.rank, d.where, d.text);
        job_free(&r.j);
    }
    TEST_END();

    TEST_BEGIN("a_ranks_own_exception_comes_before_its_peers_connection_closed");
    {
        for (int order = 0; order < 2; order++) {
            Run r = start(2, 10);
            if (order == 0) phase(&r, 0, PHASE_ERROR, CLOSED); /* the consequence arrives first */
            raise_(&r, 1, "ValueError: bad batch 10", "/home/u/job/train.py:10 in main: raise ValueError(\"bad\")",
                   NULL);

            if (order == 1) phase(&r, 0, PHASE_ERROR, CLOSED);
            bye_exit(&r, 0, 1);
            bye_exit(&r, 1, 1);
            char v[2048];
            job_verdict(r.j, v, sizeof v);
            CHECK(starts(v, "job failed: rank 1 raised at train.py:10 in main at step 10: ValueError: bad batch 10") &&
                      strstr(v, "rank 0 ended: exit 1 after \"Connection closed by peer\" (a consequence)"),
                  "order %d: %s", order, v);
            CHECK(job_diag_is_culprit(r.j, 1), "the `!` is not on rank 1");
            job_free(&r.j);
        }
    }
    TEST_END();

    TEST_BEGIN("a_killed_rank_is_the_cause_not_the_peer_it_left");
    {
        Run r = start(2, 10);
        beat(&r, 1, -1, "", 0, "train.py:11 main");
        phase(&r, 0, PHASE_ERROR, "RuntimeError: [../pair.cc:598] Connection reset by peer");
        bye_exit(&r, 0, 1);
        job_rank_exited(r.j, 1, 101, W_EXITCODE(0, SIGKILL), NULL, r.t += S / 100, WALL);
        char v[2048];
        job_verdict(r.j, v, sizeof v);
        CHECK(!strcmp(v, "job failed: rank 1 signal 9 (Killed) at step 10, last seen at train.py:11 in main; rank 0 "
                         "ended: exit 1 after \"Connection reset by peer\" (a consequence)"),
              "verdict: %s", v);
        job_free(&r.j);
    }
    TEST_END();

    TEST_BEGIN("a_barrier_only_rank_0_reaches_hangs_and_the_timeout_is_a_consequence");
    {
        /* examples/ddp_shutdown_hang.py: rank 1 destroyed its group and
         * works on (alive, finished); rank 0 waits in barrier #22 */
        Run r = start(2, 20);
        phase(&r, 1, PHASE_DESTROYED, NULL);
        beat(&r, 1, -1, "", 0, "ddp_shutdown_hang.py:44 main");
        beat(&r, 0, 22, "barrier", WALL - 4 * S, "ddp_shutdown_hang.py:40 main");
        CHECK(watch(&r, WALL), "no hang seen");
        JobDiagnosis d;
        job_diagnose(r.j, &d);
        CHECK(d.kind == DIAG_ALONE && d.rank == 0 && !strcmp(d.where, "ddp_shutdown_hang.py:40 in main"),
              "%s rank %d at '%s'", job_diag_kind_name(d.kind), d.rank, d.where);
        CHECK(starts(hang_line(r.j), "rank 0 alone in barrier #22 at ddp_shutdown_hang.py:40 in main: every other rank "
                                     "had finished (rank 1 after step 20)"),
              "live: %s", hang_line(r.j));
        phase(&r, 0, PHASE_ERROR, TIMEOUT);
        bye_exit(&r, 0, 1);
        bye_exit(&r, 1, 0);
        char v[2048];
        job_verdict(r.j, v, sizeof v);
        CHECK(starts(v, "job failed: rank 0 alone in barrier #22 at ddp_shutdown_hang.py:40 in main") &&
                  strstr(v, "(a consequence)") && !strstr(v, "rank 1 stalled"),
              "verdict: %s", v);
        job_free(&r.j);
    }
    TEST_END();

    TEST_BEGIN("a_rank_blocked_in_python_is_stalled_at_its_line");
    {
        Run r = start(2, 10);
        beat(&r, 1, -1, "", 0, "q.py:12 <module>");
        beat(&r, 0, 12, "allreduce", WALL - 4 * S, "q.py:14 <module>");
        CHECK(watch(&r, WALL), "no hang seen");
        CHECK(job_diag_is_culprit(r.j, 1) && !job_diag_is_culprit(r.j, 0), "the `!` is not on rank 1");
        job_rank_exited(r.j, 0, 100, W_EXITCODE(0, SIGTERM), "SIGTERM by ddptop", r.t += S / 100, WALL);
        job_rank_exited(r.j, 1, 101, W_EXITCODE(0, SIGTERM), "SIGTERM by ddptop", r.t += S / 100, WALL);
        char v[2048];
        job_verdict(r.j, v, sizeof v);
        CHECK(!strcmp(v, "job failed: rank 1 stalled at step 10 at q.py:12 in <module> (rank 0 waited for it in "
                         "all-reduce #12); ranks 0,1 were stopped by ddptop (SIGTERM)"),
              "verdict: %s", v);
        job_free(&r.j);
    }
    TEST_END();

    TEST_BEGIN("a_stalled_rank_that_d_stops_cleanly_stays_the_cause");
    {
        /* rank 1 stalls; d stops it cleanly while rank 0 still waits: the
         * next look sees rank 0 alone (rank 1 finished), ddptop's doing */
        Run r = start(2, 10);
        beat(&r, 1, -1, "", 0, "q.py:12 <module>");
        beat(&r, 0, 12, "allreduce", WALL - 4 * S, "q.py:14 <module>");
        CHECK(watch(&r, WALL), "no hang seen");
        job_set_stopping(r.j);
        phase(&r, 1, PHASE_DESTROYED, NULL);
        bye_exit(&r, 1, 0);
        CHECK(watch(&r, WALL + S), "the hang went");
        JobDiagnosis d;
        job_diagnose(r.j, &d);
        CHECK(d.kind == DIAG_STOPPED && d.rank == 1, "%s rank %d: %s", job_diag_kind_name(d.kind), d.rank, d.text);
        job_free(&r.j);
    }
    TEST_END();

    TEST_BEGIN("a_line_outside_the_users_code_is_not_named");
    {
        /* a rank spinning on os.path.exists: its beat names the frozen
         * stdlib module (the adapter's innermost frame); no line is better */
        Run r = start(2, 10);
        beat(&r, 1, -1, "", 0, "<frozen genericpath>:19 exists");
        beat(&r, 0, 12, "allreduce", WALL - 4 * S, "spin.py:14 <module>");
        CHECK(watch(&r, WALL), "no hang seen");
        JobDiagnosis d;
        job_diagnose(r.j, &d);
        CHECK(d.kind == DIAG_STOPPED && d.rank == 1 && !d.where[0], "%s rank %d at '%s'", job_diag_kind_name(d.kind),
              d.rank, d.where);
        job_rank_exited(r.j, 1, 101, W_EXITCODE(0, SIGTERM), "SIGTERM by ddptop", r.t += S / 100, WALL);
        char v[2048];
        job_verdict(r.j, v, sizeof v);
        CHECK(starts(v, "job failed: rank 1 stalled at step 10 (rank 0 waited for it in all-reduce #12)"), "verdict: %s",
              v);
        job_free(&r.j);
    }
    TEST_END();

    TEST_BEGIN("a_desync_without_a_hang_comes_before_the_abort_it_causes");
    {
        /* rank 1 all-reduces #6 where rank 0 broadcasts: Gloo pairs them
         * and the smaller side aborts (SIGABRT), no hang in between */
        Run r = start(2, 0);
        const char *ops[2] = { "broadcast", "allreduce" };
        for (int k = 1; k >= 0; k--) {
            Msg m;
            msg_init(&m, MSG_COLL);
            m.rank = k;
            m.u.coll.seq = 6;
            snprintf(m.u.coll.op, sizeof m.u.coll.op, "%s", ops[k]);
            job_apply(r.j, &m, r.t += S / 100, WALL);
        }
        job_rank_exited(r.j, 0, 100, W_EXITCODE(0, SIGABRT), NULL, r.t += S / 100, WALL);
        phase(&r, 1, PHASE_ERROR, "RuntimeError: [../pair.cc:598] Connection reset by peer");
        bye_exit(&r, 1, 1);
        char v[2048];
        job_verdict(r.j, v, sizeof v);
        CHECK(starts(v, "job failed: desync: rank 0 called broadcast #6 where rank 1 called all-reduce: the ranks") &&
                  strstr(v, "; rank 0 ended: signal 6 (Aborted)"),
              "verdict: %s", v);
        job_free(&r.j);
    }
    TEST_END();

    TEST_BEGIN("an_exception_that_reads_like_a_frame_is_no_frame");
    {
        Run r = start(2, 3);
        raise_(&r, 1, "ValueError: 3 in 4 batches were bad", "/home/u/job/train.py:10 in main: check()", NULL);
        bye_exit(&r, 1, 1);
        JobDiagnosis d;
        job_diagnose(r.j, &d);
        CHECK(d.kind == DIAG_EXCEPTION && !strcmp(d.where, "train.py:10 in main"), "%s at '%s'",
              job_diag_kind_name(d.kind), d.where);
        job_free(&r.j);
    }
    TEST_END();

    TEST_BEGIN("a_silent_rank_is_never_alone_in_its_stale_collective");
    {
        /* rank 0's last beat was inside all-reduce #7 (sent as it began);
         * the all-reduce completed, then rank 0 blocked in native code
         * holding the GIL: no beat, no coll since. Rank 1 finished. Its
         * claim is old news: no "alone", and once silent (JOB_SILENT_NS) the
         * diagnosis names the silence and the line last heard */
        Run r = start(2, 5);
        beat(&r, 0, 7, "allreduce", WALL - S, "s.py:12 main");
        r.t += 3 * S; /* late, not yet silent: no verdict (nor the alone lint) either way */
        phase(&r, 1, PHASE_DESTROYED, NULL);
        bye_exit(&r, 1, 0);
        CHECK(!watch(&r, WALL + 3 * S), "a verdict leaned on a late beat: %s", hang_line(r.j));
        r.t += 4 * S;
        CHECK(!watch(&r, WALL + 7 * S), "a silent rank's stale collective made a hang: %s", hang_line(r.j));
        JobDiagnosis d;
        job_diagnose(r.j, &d);
        CHECK(d.kind == DIAG_SILENT && d.rank == 0 && !strcmp(d.where, "s.py:12 in main"), "%s rank %d at '%s': %s",
              job_diag_kind_name(d.kind), d.rank, d.where, d.text);
        CHECK(starts(d.text, "rank 0 has been silent for 7 s after step 5 (its heartbeat thread cannot run: the "
                             "process is blocked in native code holding Python's GIL?), last heard at s.py:12 in main"),
              "live: %s", d.text);
        CHECK(job_diag_is_culprit(r.j, 0), "the `!` is not on rank 0");
        for (int i = 0; job_event_at(r.j, i); i++)
            CHECK(!strstr(job_event_at(r.j, i)->text, "alone"), "event: %s", job_event_at(r.j, i)->text);
        job_rank_exited(r.j, 0, 100, W_EXITCODE(0, SIGTERM), "SIGTERM by ddptop", r.t += S / 100, WALL + 8 * S);
        char v[2048];
        job_verdict(r.j, v, sizeof v);
        CHECK(starts(v, "job failed: rank 0 went silent after step 5, for 7 s until it ended (its heartbeat thread "
                        "could not run: the process was blocked in native code holding Python's GIL?), last heard "
                        "at s.py:12 in main") &&
                  !strstr(v, "alone") && !strstr(v, " is at "),
              "verdict: %s", v);
        job_free(&r.j);
    }
    TEST_END();

    TEST_BEGIN("a_silent_rank_another_waits_for_is_named_silent_not_a_desync");
    {
        /* the same silence while rank 1 waits in all-reduce #8, beating:
         * rank 0's claim (#7) is no desync; the hang names the silence, the
         * final verdict says it in the past tense, rank 1's timeout is a
         * consequence */
        Run r = start(2, 5);
        beat(&r, 0, 7, "allreduce", WALL - S, "s.py:12 main");
        for (int i = 0; i <= 3; i++) {
            r.t += S;
            beat(&r, 1, 8, "allreduce", WALL, "s.py:15 main");
        }
        CHECK(!watch(&r, WALL + 4 * S), "a verdict leaned on a late beat: %s", hang_line(r.j));
        for (int i = 0; i < 3; i++) {
            r.t += S;
            beat(&r, 1, 8, "allreduce", WALL, "s.py:15 main");
        }
        CHECK(watch(&r, WALL + 7 * S), "no hang seen");
        JobDiagnosis d;
        job_diagnose(r.j, &d);
        CHECK(d.kind == DIAG_SILENT && d.rank == 0 && !strcmp(d.where, "s.py:12 in main"), "%s rank %d at '%s': %s",
              job_diag_kind_name(d.kind), d.rank, d.where, d.text);
        CHECK(starts(hang_line(r.j), "rank 0 has been silent for 7 s after step 5 (its heartbeat thread cannot run: "
                                     "the process is blocked in native code holding Python's GIL?), last heard at "
                                     "s.py:12 in main; rank 1 waits in all-reduce #8 (7.0 s) at s.py:15 in main for it"),
              "live: %s", hang_line(r.j));
        phase(&r, 1, PHASE_ERROR, TIMEOUT);
        bye_exit(&r, 1, 1);
        job_rank_exited(r.j, 0, 100, W_EXITCODE(0, SIGTERM), "SIGTERM by ddptop", r.t += S / 100, WALL + 9 * S);
        char v[2048];
        job_verdict(r.j, v, sizeof v);
        CHECK(starts(v, "job failed: rank 0 went silent after step 5 (its heartbeat thread could not run: the process "
                        "was blocked in native code holding Python's GIL?), last heard at s.py:12 in main (rank 1 "
                        "waited for it in all-reduce #8)") &&
                  strstr(v, "rank 1 ended: exit 1 after \"Timed out waiting 20000ms for recv operation to complete\" "
                            "(a consequence)") &&
                  !strstr(v, "desync"),
              "verdict: %s", v);
        job_free(&r.j);
    }
    TEST_END();

    TEST_BEGIN("a_desync_found_while_the_ranks_beat_outranks_a_later_silence");
    {
        Run r = start(2, 21);
        beat(&r, 0, 45, "broadcast", WALL - 4 * S, "eval.py:14 validate");
        beat(&r, 1, 45, "allreduce", WALL - 4 * S, "eval.py:22 <module>");
        CHECK(watch(&r, WALL), "no hang seen");
        for (int i = 0; i < 7; i++) { /* rank 0 goes silent, rank 1 beats on */
            r.t += S;
            beat(&r, 1, 45, "allreduce", WALL - 4 * S, "eval.py:22 <module>");
            watch(&r, WALL + (i + 1) * S);
        }
        JobDiagnosis d;
        job_diagnose(r.j, &d);
        CHECK(d.kind == DIAG_DESYNC && d.rank == 0, "%s rank %d: %s", job_diag_kind_name(d.kind), d.rank, d.text);
        job_free(&r.j);
    }
    TEST_END();

    TEST_BEGIN("a_finished_silent_rank_is_a_linger_last_heard_at_its_line");
    {
        /* rank 0 destroyed its group and said bye 0, then its process
         * blocked holding the GIL (a ProcessGroup's destructor joining a
         * thread that waits for it): a linger, whose words say it is silent
         * and where it was last heard, not that it "is at" that line */
        Run r = start(2, 5);
        beat(&r, 0, -1, "", 0, "s.py:30 main");
        phase(&r, 0, PHASE_DESTROYED, NULL);
        Msg m;
        msg_init(&m, MSG_BYE);
        m.rank = 0;
        job_apply(r.j, &m, r.t += S / 100, WALL);
        bye_exit(&r, 1, 0);
        r.t += 6 * S;
        watch(&r, WALL + 6 * S);
        CHECK(job_note_linger(r.j, 0, r.t, WALL + 6 * S, 6.0, "futex_wait_queue"), "no linger noted");
        JobDiagnosis d;
        job_diagnose(r.j, &d);
        CHECK(d.kind == DIAG_LINGER && d.rank == 0 &&
                  strstr(d.text, "but its process did not exit: it has been silent for 6 s (its heartbeat thread "
                                 "cannot run: the process is blocked in native code holding Python's GIL?), last "
                                 "heard at s.py:30 in main") &&
                  !strstr(d.text, "it is at"),
              "%s rank %d: %s", job_diag_kind_name(d.kind), d.rank, d.text);
        job_free(&r.j);
    }
    TEST_END();

    TEST_BEGIN("a_quiet_c_worker_rank_is_not_silent");
    {
        /* the built-in C worker beats from its training thread: a quiet
         * rank of it (a long step) is no silence, its beat taken as ever */
        Run r = start(2, 5);
        beat(&r, 0, 7, "allreduce", WALL - S, "");
        phase(&r, 1, PHASE_DESTROYED, NULL);
        bye_exit(&r, 1, 0);
        r.t += 7 * S;
        CHECK(watch(&r, WALL + 7 * S), "no hang seen");
        JobDiagnosis d;
        job_diagnose(r.j, &d);
        CHECK(d.kind == DIAG_ALONE && d.rank == 0, "%s rank %d: %s", job_diag_kind_name(d.kind), d.rank, d.text);
        job_free(&r.j);
    }
    TEST_END();

    TEST_BEGIN("a_clean_job_has_no_diagnosis");
    {
        Run r = start(2, 5);
        for (int k = 0; k < 2; k++) bye_exit(&r, k, 0);
        JobDiagnosis d;
        job_diagnose(r.j, &d);
        CHECK(d.kind == DIAG_NONE && d.rank == -1, "kind %s", job_diag_kind_name(d.kind));
        job_free(&r.j);
    }
    TEST_END();
    (void)step;
    CHECK_EXIT();
}
