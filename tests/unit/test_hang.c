/* test_hang.c — the hang verdict for the situations users meet: a killed
 * rank, a SIGSTOPped rank, an unsafe stop (ranks in different collectives),
 * a stuck network, and no hang at all. */
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "check.h"
#include "model/hang.h"
#include "launch/procstat.h"

#define S 1000000000LL

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
    CHECK(strstr(h.verdict, "rank 1, which exited (signal 9 (Killed)) after step 811") != NULL, "verdict: %s", h.verdict);
    TEST_END();

    TEST_BEGIN("stopped_rank_is_named");
    for (int k = 0; k < 4; k++) rank(&r[k], k, 811, 812, "allreduce", now - 31 * S);
    r[2].inflight_seq = -1;
    r[2].proc_state = 'T';
    r[2].last_step = 811;
    CHECK(hang_analyze(r, 4, now, 10 * S, &h) == 1, "hang expected");
    CHECK(strstr(h.verdict, "ranks 0,1,3 wait") && strstr(h.verdict, "rank 2, which is stopped (SIGSTOP) after step 811"),
          "verdict: %s", h.verdict);
    CHECK(h.waited_ms >= 31000, "waited %lld ms", (long long)h.waited_ms);
    TEST_END();

    TEST_BEGIN("unsafe_stop_is_a_mismatch");
    rank(&r[0], 0, 100, 101, "barrier", now - 15 * S);
    rank(&r[1], 1, 101, 102, "allreduce", now - 14 * S);
    r[0].phase = PHASE_STOPPING;
    CHECK(hang_analyze(r, 2, now, 10 * S, &h) == 1 && h.mismatch, "mismatch expected");
    CHECK(h.n_waiting == 1 && h.n_missing == 1, "waiting %d missing %d", h.n_waiting, h.n_missing);
    CHECK(strstr(h.verdict, "instead") != NULL, "verdict names the other collective: %s", h.verdict);
    TEST_END();

    TEST_BEGIN("a_stuck_rank_says_where_it_sleeps");
    for (int k = 0; k < 2; k++) rank(&r[k], k, 40, 41, "allreduce", now - 12 * S);
    r[1].inflight_seq = -1;
    snprintf(r[1].wchan, sizeof r[1].wchan, "futex_wait_queue");
    CHECK(hang_analyze(r, 2, now, 10 * S, &h) == 1, "hang expected");
    CHECK(strstr(h.verdict, "rank 1, which stopped stepping after step 40 (sleeping in futex_wait_queue"),
          "verdict: %s", h.verdict);
    TEST_END();

    TEST_BEGIN("everyone_inside_means_the_collective_is_stuck");
    for (int k = 0; k < 2; k++) rank(&r[k], k, 5, 6, "allreduce", now - 20 * S);
    CHECK(hang_analyze(r, 2, now, 10 * S, &h) == 1, "hang expected");
    CHECK(h.n_missing == 0 && strstr(h.verdict, "every rank is inside it"), "verdict: %s", h.verdict);
    TEST_END();

    TEST_BEGIN("rank_ranges_compact");
    int ranks[] = {0, 1, 2, 5, 7, 8, 9, 10};
    char buf[64];
    hang_format_ranks(ranks, 8, buf, sizeof buf);
    CHECK(!strcmp(buf, "0-2,5,7-10"), "got %s", buf);
    int two[] = {3, 4};
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
