/* test_summary.c — a big job read at once (job_summary, job_stats.c): each
 * rank's cell for the rank map (the stalled rank the others wait for, the
 * silent, behind and slow ones, the waiting, the healthy, the ended and
 * the not started), the ranks that stand out moved to the front worst
 * first with the others in their order, and the lines naming them. 1024
 * ranks, messages built by hand; no terminal.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "model/job.h"

#define MS   1000000LL
#define SEC  1000000000LL
#define T0   (1000 * SEC)
#define WALL (1700000000LL * SEC)
#define N    1024

/* monotonic t and its wall clock move together */
static void put(Job *j, Msg *m, int rank, int64_t t)
{
    m->rank = rank;
    m->t_ns = WALL + t;
    job_apply(j, m, t, WALL + t);
}

static void hello(Job *j, int r, int64_t t)
{
    Msg m;
    job_rank_started(j, r, 5000 + r, t);
    msg_init(&m, MSG_HELLO);
    m.u.hello.world = j->world;
    m.u.hello.pid = 5000 + r;
    snprintf(m.u.hello.host, sizeof m.u.hello.host, "node%d", r / 8);
    put(j, &m, r, t);
    msg_init(&m, MSG_PHASE);
    m.u.phase.phase = PHASE_TRAIN;
    put(j, &m, r, t);
}

static void step(Job *j, int r, int64_t s, double step_ms, int64_t t)
{
    Msg m;
    msg_init(&m, MSG_COLL);
    m.u.coll.seq = s;
    snprintf(m.u.coll.op, sizeof m.u.coll.op, "allreduce");
    m.u.coll.bucket = 0;
    m.u.coll.step = s;
    m.u.coll.bytes = 1 << 20;
    m.u.coll.enq_ns = m.u.coll.start_ns = WALL + t - 3 * MS;
    m.u.coll.done_ns = WALL + t;
    put(j, &m, r, t);
    msg_init(&m, MSG_STEP);
    m.u.step.step = s;
    m.u.step.loss = 2.0;
    m.u.step.samples = 32 * s;
    m.u.step.step_ms = step_ms;
    m.u.step.comm_ms = 3;
    put(j, &m, r, t);
}

/* A beat: inside collective seq since `since` (monotonic), or in none. */
static void beat(Job *j, int r, int64_t last_step, int64_t seq, int64_t since, int64_t t)
{
    Msg m;
    msg_init(&m, MSG_BEAT);
    m.u.beat.step = last_step;
    m.u.beat.phase = PHASE_TRAIN;
    m.u.beat.coll_seq = seq;
    if (seq >= 0) {
        snprintf(m.u.beat.coll_op, sizeof m.u.beat.coll_op, "allreduce");
        m.u.beat.coll_since_ns = WALL + since;
    }
    put(j, &m, r, t);
}

/* N ranks, 10 steps each at 10 ms; returns the time after them. */
static Job *trained(int64_t *t)
{
    Job *j = job_new(N, T0);
    *t = T0;
    for (int r = 0; r < N; r++) hello(j, r, *t += 1000);
    for (int s = 1; s <= 10; s++) {
        *t += 100 * MS;
        for (int r = 0; r < N; r++) step(j, r, s, 10.0, *t + r * 1000);
    }
    *t += 10 * MS;
    return j;
}

static void test_stalled_named(void)
{
    TEST_BEGIN("1024_ranks_one_stalled_named_first");
    int64_t t;
    Job *j = trained(&t);
    uint8_t *cell = malloc(N);
    int *order = malloc(N * sizeof *order);
    JobSummary s;
    /* everybody healthy after 10 steps */
    job_summary(j, t, WALL + t, &s, cell);
    CHECK(s.count[JOB_CELL_OK] == N && s.odd == 0 && s.wait_seq < 0 && s.first_stalled < 0,
          "healthy job: ok %d odd %d wait #%lld", s.count[JOB_CELL_OK], s.odd, (long long)s.wait_seq);
    /* rank 517 stops; the others enter all-reduce #11 and say so */
    int64_t enq = t;
    for (int r = 0; r < N; r++)
        if (r != 517) beat(j, r, 10, 11, enq, t + r * 1000);
    beat(j, 517, 10, -1, 0, t + 517 * 1000);
    /* half a second in: a collective that young is no news */
    job_summary(j, t + 500 * MS, WALL + t + 500 * MS, &s, cell);
    CHECK(s.first_stalled < 0 && s.wait_seq < 0 && s.count[JOB_CELL_OK] == N, "too early: stalled %d, ok %d",
          s.first_stalled, s.count[JOB_CELL_OK]);
    /* 2.5 s in */
    int64_t now = t + 2500 * MS;
    beat(j, 517, 10, -1, 0, now - 100 * MS);
    job_summary(j, now, WALL + now, &s, cell);
    CHECK(cell[517] == JOB_CELL_STALLED && s.first_stalled == 517 && s.count[JOB_CELL_STALLED] == 1,
          "rank 517 not stalled: cell %d, first %d", cell[517], s.first_stalled);
    CHECK(s.count[JOB_CELL_WAITING] == N - 1 && s.odd == 1, "waiting %d odd %d", s.count[JOB_CELL_WAITING], s.odd);
    CHECK(s.wait_seq == 11 && s.wait_in == N - 1 && strcmp(s.wait_op, "allreduce") == 0 && s.wait_s > 2.4 &&
              s.wait_s < 2.6,
          "held up: #%lld %s in %d for %.2fs", (long long)s.wait_seq, s.wait_op, s.wait_in, s.wait_s);
    char text[160];
    job_summary_text(j, &s, cell, 517, now, WALL + now, text, sizeof text);
    CHECK(strcmp(text, "r517 stalled: 1023 ranks wait for it in allreduce #11 for 2s") == 0, "text '%s'", text);
    job_summary_text(j, &s, cell, 3, now, WALL + now, text, sizeof text);
    CHECK(strcmp(text, "r3 in allreduce #11 for 2s") == 0, "waiting text '%s'", text);
    /* moved to the front of the rank order; the others keep it */
    for (int i = 0; i < N; i++) order[i] = i;
    int moved = job_summary_order(j, &s, cell, now, order);
    CHECK(moved == 1 && order[0] == 517 && order[1] == 0 && order[517] == 516 && order[518] == 518,
          "order: moved %d, %d %d .. %d %d", moved, order[0], order[1], order[517], order[518]);
    /* silent too (5.6 s since its beat): still the stalled one, and the line says so */
    now = t + 8 * SEC;
    for (int r = 0; r < N; r++)
        if (r != 517) beat(j, r, 10, 11, enq, now - 200 * MS);
    job_summary(j, now, WALL + now, &s, cell);
    job_summary_text(j, &s, cell, 517, now, WALL + now, text, sizeof text);
    CHECK(cell[517] == JOB_CELL_STALLED &&
              strcmp(text, "r517 silent 6s: 1023 ranks wait for it in allreduce #11 for 8s") == 0,
          "silent stalled: cell %d '%s'", cell[517], text);
    free(cell);
    free(order);
    job_free(&j);
    TEST_END();
}

static void test_dropped_report_not_stalled(void)
{
    TEST_BEGIN("a_rank_past_the_collective_is_not_stalled");
    int64_t t;
    Job *j = trained(&t);
    uint8_t *cell = malloc(N);
    JobSummary s;
    /* step 11: rank 9's report of all-reduce #11 was dropped, yet it has
     * done #12 since; everybody else reported both */
    for (int s11 = 11; s11 <= 12; s11++) {
        t += 100 * MS;
        for (int r = 0; r < N; r++)
            if (!(r == 9 && s11 == 11)) step(j, r, s11, 10.0, t);
    }
    int64_t now = t + 3 * SEC;
    for (int r = 0; r < N; r++) beat(j, r, 12, -1, 0, now - 100 * MS);
    job_summary(j, now, WALL + now, &s, cell);
    CHECK(cell[9] == JOB_CELL_OK && s.first_stalled < 0 && s.wait_seq < 0, "rank 9: cell %d, stalled %d, wait #%lld",
          cell[9], s.first_stalled, (long long)s.wait_seq);
    free(cell);
    job_free(&j);
    TEST_END();
}

static void test_backlog_not_stalled(void)
{
    TEST_BEGIN("a_rank_ddptop_is_behind_on_is_not_stalled_until_caught_up");
    int64_t t;
    Job *j = trained(&t);
    uint8_t *cell = malloc(N);
    JobSummary s;
    /* the others enter all-reduce #11 and beat from inside it */
    int64_t enq = t;
    int64_t now = t + 3 * SEC;
    for (int r = 0; r < N; r++)
        if (r != 517) beat(j, r, 10, 11, enq, now - 100 * MS);
    /* rank 517's telemetry is queued behind a backlog: what arrives now it
     * sent 2.5 s ago, before the others entered #11 */
    Msg m;
    msg_init(&m, MSG_BEAT);
    m.u.beat.step = 10;
    m.u.beat.phase = PHASE_TRAIN;
    m.u.beat.coll_seq = -1;
    m.rank = 517;
    m.t_ns = WALL + enq - 10 * MS;
    job_apply(j, &m, now - 50 * MS, WALL + now - 50 * MS);
    job_summary(j, now, WALL + now, &s, cell);
    CHECK(cell[517] != JOB_CELL_STALLED && s.first_stalled < 0 && s.wait_seq < 0,
          "blamed while being caught up on: cell %d, stalled %d, wait #%lld", cell[517], s.first_stalled,
          (long long)s.wait_seq);
    /* caught up, and nothing newer came for a second and more: it stopped */
    now += 1200 * MS;
    for (int r = 0; r < N; r++)
        if (r != 517) beat(j, r, 10, 11, enq, now - 100 * MS);
    job_summary(j, now, WALL + now, &s, cell);
    CHECK(cell[517] == JOB_CELL_STALLED && s.first_stalled == 517 && s.wait_seq == 11,
          "not stalled once caught up: cell %d, stalled %d, wait #%lld", cell[517], s.first_stalled,
          (long long)s.wait_seq);
    free(cell);
    job_free(&j);
    TEST_END();
}

static void test_cells_and_order(void)
{
    TEST_BEGIN("cells_worst_first_within_a_cell_the_worst_first");
    int64_t t;
    Job *j = trained(&t);
    uint8_t *cell = malloc(N);
    int *order = malloc(N * sizeof *order);
    JobSummary s;
    /* two more steps for most ranks; 40 and 41 fall silent (40 first), 60 and 61 are slow, 70 says bye and exits
     * 0. (A live rank whose step reports lag is not "behind" in a DDP job: its all-reduces say it kept up.) */
    for (int s11 = 11; s11 <= 14; s11++) {
        t += 100 * MS;
        for (int r = 0; r < N; r++) {
            if (r == 70) continue;
            step(j, r, s11, r == 60 ? 25.0 : r == 61 ? 40.0 : 10.0, t);
        }
    }
    Msg m;
    msg_init(&m, MSG_BYE);
    put(j, &m, 70, t);
    job_rank_exited(j, 70, 5070, 0, NULL, t, WALL + t);
    /* rank 1000 failed, rank 1001 never said hello (a fresh job would have) */
    job_rank_exited(j, 1000, 5000 + 1000, 9, NULL, t, WALL + t);
    int64_t now = t + JOB_STALE_NS + 3 * SEC;
    for (int r = 0; r < N; r++)
        if (r != 1000 && r != 70 && r != 40 && r != 41) beat(j, r, 14, -1, 0, now - 10 * MS);
    beat(j, 40, 14, -1, 0, now - JOB_STALE_NS - 2 * SEC);
    beat(j, 41, 14, -1, 0, now - JOB_STALE_NS - 1 * SEC);
    job_summary(j, now, WALL + now, &s, cell);
    CHECK(cell[1000] == JOB_CELL_FAILED && cell[40] == JOB_CELL_SILENT && cell[41] == JOB_CELL_SILENT &&
              cell[60] == JOB_CELL_SLOW && cell[61] == JOB_CELL_SLOW && cell[70] == JOB_CELL_DONE &&
              cell[0] == JOB_CELL_OK,
          "cells: 1000:%d 40:%d 41:%d 60:%d 61:%d 70:%d 0:%d", cell[1000], cell[40], cell[41], cell[60], cell[61],
          cell[70], cell[0]);
    CHECK(s.odd == 5 && s.count[JOB_CELL_OK] == N - 6 && s.count[JOB_CELL_DONE] == 1, "odd %d ok %d", s.odd,
          s.count[JOB_CELL_OK]);
    /* failed, then the longest silent, then the slowest; the rest by the given order (reversed here) */
    for (int i = 0; i < N; i++) order[i] = N - 1 - i;
    job_summary_order(j, &s, cell, now, order);
    CHECK(order[0] == 1000 && order[1] == 40 && order[2] == 41 && order[3] == 61 && order[4] == 60 &&
              order[5] == 1023 && order[N - 1] == 0,
          "order %d %d %d %d %d | %d .. %d", order[0], order[1], order[2], order[3], order[4], order[5], order[N - 1]);
    char text[160];
    job_summary_text(j, &s, cell, 40, now, WALL + now, text, sizeof text);
    CHECK(strcmp(text, "r40 silent 7s") == 0, "silent text '%s'", text);
    job_summary_text(j, &s, cell, 0, now, WALL + now, text, sizeof text);
    CHECK(strcmp(text, "r0 healthy") == 0, "healthy text '%s'", text);
    CHECK(strcmp(job_cell_name(JOB_CELL_STALLED), "stalled") == 0 && strcmp(job_cell_name(JOB_CELL__COUNT), "?") == 0,
          "cell names");
    free(cell);
    free(order);
    job_free(&j);
    TEST_END();
}

static void test_not_started(void)
{
    TEST_BEGIN("ranks_not_started_yet");
    Job *j = job_new(64, T0);
    uint8_t cell[64];
    JobSummary s;
    hello(j, 0, T0 + MS);
    job_summary(j, T0 + 2 * MS, WALL + T0 + 2 * MS, &s, cell);
    CHECK(cell[0] == JOB_CELL_OK && cell[1] == JOB_CELL_PENDING && s.count[JOB_CELL_PENDING] == 63 && s.odd == 0,
          "pending: cell0 %d cell1 %d pending %d odd %d", cell[0], cell[1], s.count[JOB_CELL_PENDING], s.odd);
    job_free(&j);
    TEST_END();
}

static void test_last_in(void)
{
    TEST_BEGIN("the_rank_last_in_most_often");
    int64_t t;
    Job *j = trained(&t);
    int rank, times, of;
    double late;
    /* arrivals 1 us apart: a spread, but no rank clearly last */
    job_colls_last_in(j, &rank, &times, &of, &late);
    CHECK(rank == -1 && times == 0 && of == 10, "no straggler yet: r%d %d of %d", rank, times, of);
    /* then rank 77 comes 2 ms after everybody else, 6 times */
    for (int s = 11; s <= 16; s++) {
        t += 100 * MS;
        for (int r = 0; r < N; r++) step(j, r, s, 10.0, r == 77 ? t + 2 * MS : t);
    }
    job_colls_last_in(j, &rank, &times, &of, &late);
    CHECK(rank == 77 && times == 6 && of == 16 && late > 1.99 && late < 2.01, "straggler r%d %d of %d, %.3f ms", rank,
          times, of, late);
    job_free(&j);
    TEST_END();
}

int main(void)
{
    test_stalled_named();
    test_dropped_report_not_stalled();
    test_backlog_not_stalled();
    test_cells_and_order();
    test_not_started();
    test_last_in();
    CHECK_EXIT();
}
