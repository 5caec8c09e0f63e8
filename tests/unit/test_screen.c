/* test_screen.c — the screen drawn into a canvas, read as text: every
 * panel at 80x24, 120x40 and 200x60, the too-small message, ASCII without
 * UTF-8, a 256-rank job's summaries, zoom, hide, help, the quit question,
 * a rank's detail, sorting, the log scale, mouse clicks; and what each key
 * asks of the run loop. No terminal: the ncurses view only copies these
 * cells (tested in tmux by tests/t_tui*.sh).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <stdlib.h>
#include <time.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "check.h"
#include "screen/draw.h"
#include "screen/numfmt.h"
#include "screen/plot.h"

#define MS   1000000LL
#define SEC  1000000000LL
#define WALL (1700000000LL * SEC)
#define T0   (1000 * SEC) /* a job's start, monotonic */

static char text[200 * 1024];

/* The canvas as lines of UTF-8. */
static const char *dump(const Canvas *cv)
{
    size_t len = 0;
    for (int y = 0; y < cv->h; y++) {
        char row[2048];
        canvas_row_text(cv, y, row, sizeof row);
        size_t k = strlen(row);
        if (len + k + 2 > sizeof text) break;
        memcpy(text + len, row, k);
        len += k;
        text[len++] = '\n';
    }
    text[len] = '\0';
    return text;
}

static const char *line_with(const char *t, const char *needle)
{
    static char line[2048];
    const char *hit = strstr(t, needle);
    line[0] = '\0';
    if (!hit) return line;
    const char *s = hit;
    while (s > t && s[-1] != '\n') s--;
    const char *e = strchr(hit, '\n');
    size_t n = e ? (size_t)(e - s) : strlen(s);
    if (n >= sizeof line) n = sizeof line - 1;
    memcpy(line, s, n);
    line[n] = '\0';
    return line;
}

static void apply(Job *j, Msg *m, int rank, int64_t t)
{
    m->rank = rank;
    job_apply(j, m, t, WALL);
}

/* A job of `world` ranks that trained `steps` steps with collectives, a
 * shard, an eval and a checkpoint; returns its time. */
static int64_t scripted(Job *j, int steps)
{
    int64_t t = j->start_ns;
    Msg m;
    for (int r = 0; r < j->world; r++) {
        job_rank_started(j, r, 4000 + r, t);
        msg_init(&m, MSG_HELLO);
        m.u.hello.pid = 4000 + r;
        m.u.hello.world = j->world;
        snprintf(m.u.hello.host, sizeof m.u.hello.host, "node%d", r % 4);
        snprintf(m.u.hello.device, sizeof m.u.hello.device, "cpu");
        snprintf(m.u.hello.backend, sizeof m.u.hello.backend, "gloo");
        snprintf(m.u.hello.dataset, sizeof m.u.hello.dataset, "synthetic");
        snprintf(m.u.hello.model, sizeof m.u.hello.model, "mlp:64,128,10");
        m.u.hello.params = 9610;
        m.u.hello.batch_size = 32;
        m.u.hello.max_steps = 1000;
        m.u.hello.dataset_size = 10;
        apply(j, &m, r, t += MS);
        msg_init(&m, MSG_PHASE);
        m.u.phase.phase = PHASE_TRAIN;
        apply(j, &m, r, t += MS);
        /* N = 10 over the world, with padding */
        int64_t idx[64];
        int n = (10 + j->world - 1) / j->world;
        for (int k = 0; k < n && k < 64; k++) idx[k] = (r + (int64_t)k * j->world) % 10;
        msg_init(&m, MSG_SHARD);
        m.u.shard.epoch = 0;
        m.u.shard.shuffle = true;
        m.u.shard.dataset_size = 10;
        m.u.shard.num_samples = n;
        m.u.shard.total_size = (int64_t)n * j->world;
        m.u.shard.padding = (int64_t)n * j->world - 10;
        m.u.shard.n_idx = (uint32_t)(n < 64 ? n : 64);
        m.u.shard.idx = idx;
        apply(j, &m, r, t += MS);
    }
    int64_t seq = 0;
    for (int s = 1; s <= steps; s++) {
        t += 20 * MS;
        seq++;
        for (int r = 0; r < j->world; r++) {
            msg_init(&m, MSG_COLL);
            m.u.coll.seq = seq;
            snprintf(m.u.coll.op, sizeof m.u.coll.op, "allreduce");
            m.u.coll.bucket = 0;
            m.u.coll.step = s;
            m.u.coll.bytes = 1 << 20;
            m.u.coll.enq_ns = WALL + s * 20 * MS + (r == 1 ? 2 * MS : 0); /* rank 1 comes 2 ms late */
            m.u.coll.start_ns = m.u.coll.enq_ns;
            m.u.coll.done_ns = WALL + s * 20 * MS + 3 * MS;
            m.u.coll.algbw_gbs = 0.5;
            m.u.coll.busbw_gbs = 0.75;
            apply(j, &m, r, t);
            msg_init(&m, MSG_STEP);
            m.u.step.step = s;
            m.u.step.loss = 2.0 * exp(-s / 30.0) + 0.1 + 0.01 * r;
            m.u.step.samples = 32LL * s;
            m.u.step.step_ms = r == 3 && j->world > 3 ? 40 : 10;
            m.u.step.comm_ms = 3;
            m.u.step.exposed_ms = 1;
            apply(j, &m, r, t);
        }
    }
    msg_init(&m, MSG_EVAL);
    m.u.eval.step = steps / 2;
    m.u.eval.accuracy = 0.625;
    apply(j, &m, 0, t += MS);
    msg_init(&m, MSG_CKPT);
    m.u.ckpt.ok = true;
    m.u.ckpt.step = steps;
    m.u.ckpt.ms = 41;
    m.u.ckpt.bytes = 2000000;
    snprintf(m.u.ckpt.path, sizeof m.u.ckpt.path, "/ck/step-%08d", steps);
    apply(j, &m, 0, t += MS);
    return t;
}

static const char *render(Canvas *cv, Ui *u, const Job *j, int w, int h, bool utf8, bool color, int64_t t)
{
    canvas_done(cv);
    canvas_init(cv, utf8);
    canvas_reset(cv, w, h);
    draw_screen(cv, u, j, t, WALL + 60 * SEC, NULL, color);
    return dump(cv);
}

static void test_panels_120x40(void)
{
    TEST_BEGIN("panels_at_120x40");
    Job *j = job_new(4, T0);
    int64_t t = scripted(j, 60);
    Ui u;
    ui_init(&u, 4);
    Canvas cv;
    canvas_init(&cv, true);
    const char *s = render(&cv, &u, j, 120, 40, true, true, t);
    CHECK(strstr(s, " ddptop  RUNNING ") && strstr(s, "4/4 ranks") && strstr(s, "step 60/1000"), "title:\n%s", s);
    CHECK(strstr(s, "world 4 on 4 nodes") && strstr(s, "mlp:64,128,10 (9.61k params)"), "header");
    const char *rules[] = { "─ 2 ranks", "─ 3 loss", "─ 4 all-reduce", "─ 5 sampler", "─ 6 events" };
    for (int i = 0; i < 5; i++) CHECK(strstr(s, rules[i]), "no '%s'", rules[i]);
    CHECK(strstr(line_with(s, "node3 "), "slow 4.0x median"), "slow rank row: '%s'", line_with(s, "node3 "));
    CHECK(strstr(s, "▼62.5%"), "eval mark");
    CHECK(strstr(s, "last in r1 +2.00 ms"), "straggler:\n%s", s);
    /* in at 0 and 2 ms, all done at 3: the transfer is 1 ms and the bandwidth
     * 1 MiB / 1 ms (not the ranks' 0.5 GB/s, a ratio with the waiting in it) */
    CHECK(strstr(s, "b0   1.05MB xfer    1.00 ms wait    2.00 ms  algbw   1.05 busbw   1.57 GB/s"), "bucket row:\n%s", s);
    CHECK(strstr(s, " xfer    1.00 ms  algbw 1.05 busbw 1.57 GB/s  last in r1 +2.00 ms (wait 2.00 ms)"),
          "collective row:\n%s", s);
    CHECK(strstr(s, "hidden behind backward 67%"), "comm share");
    CHECK(strstr(s, "padding 2") && strstr(s, "▚"), "padding duplicates in the sampler");
    CHECK(strstr(s, "checkpoint step 60 written by rank 0 in 41 ms (2.0 MB) -> /ck/step-00000060"), "ckpt event");
    CHECK(u.rect[PANEL_RANKS].w == 120 && u.list_rows == 4, "rect/list rows: %d %d", u.rect[PANEL_RANKS].w,
          u.list_rows);
    /* every row is exactly the width */
    for (int y = 0; y < cv.h; y++) {
        int cols = 0;
        for (int x = 0; x < cv.w; x++) cols++;
        CHECK(cols == 120, "row %d", y);
    }
    canvas_done(&cv);
    ui_done(&u);
    job_free(&j);
    TEST_END();
}

/* The loss title's "now" is the newest loss, not the newest bin's mean:
 * after 2000 steps a bin holds several. */
static void test_loss_now(void)
{
    TEST_BEGIN("loss_now_is_the_latest_value");
    Job *j = job_new(1, T0);
    int64_t t = j->start_ns;
    Msg m;
    msg_init(&m, MSG_HELLO);
    apply(j, &m, 0, t += MS);
    for (int s = 1; s <= 2000; s++) {
        msg_init(&m, MSG_STEP);
        m.u.step.step = s;
        m.u.step.loss = s / 1000.0;
        apply(j, &m, 0, t += MS);
    }
    CHECK(j->loss_all.stride > 1, "bins of one step: the test proves nothing");
    Ui u;
    ui_init(&u, 1);
    Canvas cv;
    canvas_init(&cv, true);
    const char *s = render(&cv, &u, j, 120, 40, true, true, t);
    CHECK(strstr(s, "now 2.0000"), "loss title:\n%s", line_with(s, "─ 3 loss"));
    canvas_done(&cv);
    ui_done(&u);
    job_free(&j);
    TEST_END();
}

/* -n 1: an all-reduce of one rank moves nothing; no bandwidth is shown. */
static void test_one_rank_bandwidth(void)
{
    TEST_BEGIN("one_rank_shows_no_bandwidth");
    Job *j = job_new(1, T0);
    int64_t t = scripted(j, 20);
    Ui u;
    ui_init(&u, 1);
    Canvas cv;
    canvas_init(&cv, true);
    const char *s = render(&cv, &u, j, 120, 40, true, true, t);
    CHECK(strstr(s, "bandwidth n/a (1 rank)") && !strstr(s, "algbw"), "all-reduce panel:\n%s", s);
    u.overlay = UI_DETAIL;
    u.detail_rank = 0;
    s = render(&cv, &u, j, 120, 40, true, true, t);
    CHECK(strstr(s, "    n/a     n/a") && !strstr(s, "0.50"), "rank detail:\n%s", s);
    canvas_done(&cv);
    ui_done(&u);
    job_free(&j);
    TEST_END();
}

/* A rank's detail shows its own wait for the last rank in and the
 * collective's transfer-derived algbw/busbw (nccl-tests' definitions, as the
 * all-reduce panel's), not the rank's bytes / time taken (its waiting read
 * as slow transfer): rank 0 starts 2 ms before rank 1, both are done 1 ms
 * after rank 1 came: 1 MiB in 1 ms is 1.05 GB/s, busbw x 2(n-1)/n = 1.05;
 * the ranks' own reports said 0.50 and 0.75. A collective not every rank
 * completed has no transfer yet. */
static void test_detail_bandwidth(void)
{
    TEST_BEGIN("rank_detail_bandwidth_from_the_transfer");
    Job *j = job_new(2, T0);
    int64_t t = scripted(j, 20);
    Msg m;
    msg_init(&m, MSG_COLL);
    m.u.coll.seq = 21;
    snprintf(m.u.coll.op, sizeof m.u.coll.op, "allreduce");
    m.u.coll.bucket = 0;
    m.u.coll.step = 21;
    m.u.coll.bytes = 1 << 20;
    m.u.coll.enq_ns = m.u.coll.start_ns = WALL + 21 * 20 * MS;
    m.u.coll.done_ns = m.u.coll.start_ns + 3 * MS;
    apply(j, &m, 0, t += MS);
    Ui u;
    ui_init(&u, 2);
    Canvas cv;
    canvas_init(&cv, true);
    u.overlay = UI_DETAIL;
    u.detail_rank = 0;
    const char *s = render(&cv, &u, j, 120, 40, true, true, t);
    CHECK(strstr(s, "TOOK_MS  WAIT_MS  XFER_MS   ALGBW   BUSBW QUEUED_MS"), "header:\n%s", s);
    const char *row = line_with(s, "    20 allreduce");
    CHECK(strstr(row, "3.000    2.000    1.000    1.05    1.05     0.000"), "rank 0's row: '%s'\n%s", row, s);
    row = line_with(s, "    21 allreduce");
    CHECK(strstr(row, "3.000        -        -       -       -"), "unfinished row: '%s'", row);
    const char *tab = strstr(s, "SEQ OP"), *logs = strstr(s, "last log lines");
    CHECK(tab && logs && !memmem(tab, (size_t)(logs - tab), "0.50", 4) && !memmem(tab, (size_t)(logs - tab), "0.75", 4),
          "a rank's own bandwidth shown:\n%s", s);
    u.detail_rank = 1; /* the late rank waited for nobody; the same transfer */
    s = render(&cv, &u, j, 120, 40, true, true, t);
    row = line_with(s, "    20 allreduce");
    CHECK(strstr(row, "1.000    0.000    1.000    1.05    1.05     0.000"), "rank 1's row: '%s'", row);
    canvas_done(&cv);
    ui_done(&u);
    job_free(&j);
    TEST_END();
}

/* A collective every rank entered and only some finished is in flight,
 * then never completed once the ranks are gone, never "0.00 ms" as if
 * done; comm a step waited for beyond what comm took hides nothing, never
 * "-0%". */
static void test_coll_unfinished(void)
{
    TEST_BEGIN("all_in_but_unfinished_collective");
    Job *j = job_new(2, T0);
    int64_t t = scripted(j, 5);
    Ui u;
    ui_init(&u, 2);
    Canvas cv;
    canvas_init(&cv, true);
    Msg m;
    for (int r = 0; r < 2; r++) {
        msg_init(&m, MSG_BEAT);
        m.u.beat.step = 5;
        m.u.beat.coll_seq = 6;
        snprintf(m.u.beat.coll_op, sizeof m.u.beat.coll_op, "allreduce");
        m.u.beat.coll_since_ns = WALL + 55 * SEC;
        apply(j, &m, r, t += MS);
        msg_init(&m, MSG_STEP);
        m.u.step.step = 5;
        m.u.step.step_ms = 10;
        m.u.step.comm_ms = 3;
        m.u.step.exposed_ms = 3.004;
        apply(j, &m, r, t += MS);
    }
    msg_init(&m, MSG_COLL);
    m.u.coll.seq = 6;
    snprintf(m.u.coll.op, sizeof m.u.coll.op, "allreduce");
    m.u.coll.step = 6;
    m.u.coll.bytes = 4096;
    m.u.coll.start_ns = m.u.coll.enq_ns = WALL + 55 * SEC;
    m.u.coll.done_ns = WALL + 55 * SEC + MS;
    apply(j, &m, 0, t += MS);
    const char *s = render(&cv, &u, j, 120, 40, true, true, t);
    CHECK(strstr(s, "#6      allreduce     step 6      all in, 1/2 done, in flight 5.0s"), "in flight:\n%s", s);
    CHECK(strstr(s, "hidden behind backward 0%") && !strstr(s, "-0%"), "comm share:\n%s", s);
    job_rank_exited(j, 0, 4000, W_EXITCODE(1, 0), NULL, t += MS, WALL);
    job_rank_exited(j, 1, 4001, W_EXITCODE(0, 9), NULL, t += MS, WALL);
    s = render(&cv, &u, j, 120, 40, true, true, t);
    CHECK(strstr(s, "#6      allreduce     step 6      all in, 1/2 done, never completed") && !strstr(s, "0.00 ms"),
          "never completed:\n%s", s);
    canvas_done(&cv);
    ui_done(&u);
    job_free(&j);
    TEST_END();
}

static void test_sizes(void)
{
    TEST_BEGIN("80x24_200x60_and_too_small");
    Job *j = job_new(2, T0);
    int64_t t = scripted(j, 40);
    Ui u;
    ui_init(&u, 2);
    Canvas cv;
    canvas_init(&cv, true);
    const char *s = render(&cv, &u, j, 80, 24, true, true, t);
    const char *rules[] = { "─ 2 ranks", "─ 3 loss", "─ 4 all-reduce", "─ 5 sampler", "─ 6 events" };
    for (int i = 0; i < 5; i++) CHECK(strstr(s, rules[i]), "80x24: no '%s':\n%s", rules[i], s);
    CHECK(strstr(s, "c ckpt  d destroy"), "no keys line at 80x24");
    s = render(&cv, &u, j, 200, 60, true, true, t);
    CHECK(strstr(line_with(s, "─ 2 ranks"), "│─ 4 all-reduce"), "no two columns at 200x60:\n%s", s);
    CHECK(strstr(s, "HOST") && strstr(s, "EPOCH") && strstr(s, "PID"), "wide table lacks columns:\n%s", s);
    s = render(&cv, &u, j, 59, 30, true, true, t);
    CHECK(strstr(s, "terminal too small: need 60x12, have 59x30") && !strstr(s, "ranks"), "59x30:\n%s", s);
    s = render(&cv, &u, j, 100, 11, true, true, t);
    CHECK(strstr(s, "terminal too small"), "100x11 drawn");
    s = render(&cv, &u, j, 60, 12, true, true, t);
    CHECK(!strstr(s, "too small") && strstr(s, "─ 2 ranks") && strstr(s, "RANK"), "60x12:\n%s", s);
    s = render(&cv, &u, j, 1, 1, true, true, t); /* nothing crashes at absurd sizes */
    s = render(&cv, &u, j, 0, 0, true, true, t);
    canvas_done(&cv);
    ui_done(&u);
    job_free(&j);
    TEST_END();
}

static void test_ascii(void)
{
    TEST_BEGIN("ascii_without_utf8_digits_without_colour");
    Job *j = job_new(2, T0);
    int64_t t = scripted(j, 40);
    Msg m;
    msg_init(&m, MSG_LOG);
    snprintf(m.u.log.text, sizeof m.u.log.text, "caf\xc3\xa9 \xe2\x9c\x93 \x1b[31mred"); /* UTF-8 and an escape */
    apply(j, &m, 1, t += MS);
    Ui u;
    ui_init(&u, 2);
    Canvas cv;
    canvas_init(&cv, false);
    render(&cv, &u, j, 120, 40, false, false, t);
    int bad = 0;
    for (int i = 0; i < cv.w * cv.h; i++)
        bad += cv.cells[i].ch > 0x7e || (cv.cells[i].ch < 0x20 && cv.cells[i].ch != 0);
    CHECK(bad == 0, "%d cells outside printable ASCII", bad);
    const char *s = dump(&cv);
    CHECK(strstr(s, "- 2 ranks") && strstr(s, "0=r0 1=r1"), "ASCII rules and chart legend:\n%s", s);
    CHECK(strstr(s, "caf?? ??? ?[31mred"), "log text not made safe: '%s'", line_with(s, "caf"));
    /* UTF-8 but no colour: ranks' lines drawn with their digits, not braille */
    s = render(&cv, &u, j, 120, 40, true, false, t);
    const char *plot = line_with(s, " │");
    CHECK(strpbrk(plot, "01") != NULL, "no digit lines without colour: '%s'", plot);
    s = render(&cv, &u, j, 120, 40, true, true, t);
    CHECK(strstr(s, "\xe2\xa0") || strstr(s, "\xe2\xa1") || strstr(s, "\xe2\xa3"), "no braille with colour");
    canvas_done(&cv);
    ui_done(&u);
    job_free(&j);
    TEST_END();
}

static void test_many_ranks(void)
{
    TEST_BEGIN("256_ranks_summary_outliers_scroll");
    Job *j = job_new(256, T0);
    int64_t t = scripted(j, 12);
    Msg m;
    msg_init(&m, MSG_STEP); /* rank 200 diverges */
    m.u.step.step = 13;
    m.u.step.loss = NAN;
    m.u.step.step_ms = 10;
    apply(j, &m, 200, t += MS);
    Ui u;
    ui_init(&u, 256);
    Canvas cv;
    canvas_init(&cv, true);
    const char *s = render(&cv, &u, j, 120, 40, true, true, t);
    CHECK(strstr(s, "·   min ") && strstr(s, "·   med ") && strstr(s, "·   max "), "no summary rows:\n%s", s);
    CHECK(strstr(line_with(s, "·   med "), "256 ranks"), "median row");
    CHECK(strstr(line_with(s, "·   max "), "step_ms r3"), "max row does not name rank 3: '%s'",
          line_with(s, "·   max "));
    CHECK(strstr(line_with(s, "outliers: "), "r200 loss nan | r3 step 40.0 ms (4.0x median)"), "outliers: '%s'",
          line_with(s, "outliers: "));
    CHECK(strstr(s, " 1-") && strstr(s, " of 256 "), "no list position");
    CHECK(strstr(s, "mean min/max of ranks"), "loss chart not in band mode");
    CHECK(strstr(s, "colour = rank mod 8"), "sampler legend");
    ViewAction a = ui_key(&u, UI_KEY_END, j, true);
    s = render(&cv, &u, j, 120, 40, true, true, t);
    CHECK(a == VIEW_ACT_REDRAW && u.sel == 255 && strstr(s, "▶   255 node3"), "End did not reach rank 255:\n%s", s);
    CHECK(strstr(s, " of 256 ") && u.ranks_top + u.list_rows == 256, "list not at its end");
    for (int i = 0; i < 6; i++) ui_key(&u, 's', j, true);
    s = render(&cv, &u, j, 120, 40, true, true, t);
    CHECK(u.sort == JOB_SORT_HEALTH && u.order[0] == 200 && u.order[1] == 3 && u.sel == 200 && u.ranks_top == 0,
          "health order: %d %d sel %d", u.order[0], u.order[1], u.sel);
    CHECK(strstr(s, "sorted by health"), "rule does not say the order");
    /* the rows' notes take the summary's statistics (job_outliers_stats):
     * the same outliers as job_outliers computing its own */
    JobOutlier o1[256], o2[256];
    JobStat st[JOB_METRIC__COUNT];
    job_rank_stats(j, t, st);
    int n1 = job_outliers(j, t, WALL, o1, 256), n2 = job_outliers_stats(j, st, t, WALL, o2, 256);
    bool same = n1 == n2 && n1 == 2;
    for (int i = 0; same && i < n1; i++)
        same = o1[i].rank == o2[i].rank && o1[i].kind == o2[i].kind && !strcmp(o1[i].text, o2[i].text) &&
               !strcmp(o1[i].brief, o2[i].brief);
    CHECK(same, "outliers from the stats differ");
    canvas_done(&cv);
    ui_done(&u);
    job_free(&j);
    TEST_END();
}

static void test_keys(void)
{
    TEST_BEGIN("keys_actions_and_screens");
    Job *j = job_new(4, T0);
    int64_t t = scripted(j, 30);
    Ui u;
    ui_init(&u, 4);
    Canvas cv;
    canvas_init(&cv, true);
    CHECK(ui_key(&u, 'c', j, true) == VIEW_ACT_CKPT && ui_key(&u, 'd', j, true) == VIEW_ACT_DESTROY &&
              ui_key(&u, 'p', j, true) == VIEW_ACT_PAUSE,
          "job keys");
    CHECK(ui_key(&u, 'z', j, true) == VIEW_ACT_NONE, "unknown key did something");
    /* q asks while training, only y/q confirm */
    CHECK(ui_key(&u, 'q', j, true) == VIEW_ACT_REDRAW && u.overlay == UI_CONFIRM_QUIT, "q did not ask");
    const char *s = render(&cv, &u, j, 120, 40, true, true, t);
    CHECK(strstr(s, "Quit now?") && strstr(s, "keep training"), "no quit question");
    CHECK(ui_key(&u, 'n', j, true) == VIEW_ACT_REDRAW && u.overlay == UI_NO_OVERLAY, "n did not cancel");
    s = render(&cv, &u, j, 120, 40, true, true, t);
    CHECK(strstr(s, "quit cancelled: training goes on"), "no cancel note");
    ui_key(&u, 'q', j, true);
    CHECK(ui_key(&u, 'y', j, true) == VIEW_ACT_QUIT, "y did not quit");
    CHECK(ui_key(&u, 'q', j, false) == VIEW_ACT_QUIT, "q after the job asked");
    /* help lists every key; any key closes it */
    ui_key(&u, '?', j, true);
    s = render(&cv, &u, j, 120, 40, true, true, t);
    const char *need[] = { "checkpoint now", "destroy cleanly",  "pause / resume", "quit (asks", "Tab",         "Enter",
                           "zoom a panel",   "hide the focused", "log scale",      "sort ranks", "mouse on/off" };
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) CHECK(strstr(s, need[i]), "help lacks '%s'", need[i]);
    CHECK(ui_key(&u, 'c', j, true) == VIEW_ACT_REDRAW && u.overlay == UI_NO_OVERLAY, "a key in the help acted");
    /* zoom 3: the loss chart alone; 3 again or Esc: all */
    ui_key(&u, '3', j, true);
    s = render(&cv, &u, j, 120, 40, true, true, t);
    CHECK(strstr(s, "─ 3 loss") && !strstr(s, "─ 2 ranks") && u.rect[PANEL_LOSS].h == 37, "zoom 3: h %d",
          u.rect[PANEL_LOSS].h);
    ui_key(&u, UI_KEY_ESC, j, true);
    s = render(&cv, &u, j, 120, 40, true, true, t);
    CHECK(strstr(s, "─ 2 ranks") && strstr(s, "─ 3 loss"), "Esc did not unzoom");
    ui_key(&u, '1', j, true);
    s = render(&cv, &u, j, 120, 40, true, true, t);
    CHECK(strstr(s, "─ 1 header") && strstr(s, "nodes") && strstr(s, "node0") && strstr(s, "steps/epoch"),
          "zoomed header:\n%s", s);
    ui_key(&u, '1', j, true);
    /* Tab to the loss chart, h hides it, H shows all */
    CHECK(u.focus == PANEL_HEADER, "focus after zoom 1");
    ui_key(&u, UI_KEY_TAB, j, true);
    ui_key(&u, UI_KEY_TAB, j, true);
    CHECK(u.focus == PANEL_LOSS, "Tab: focus %d", (int)u.focus);
    ui_key(&u, 'h', j, true);
    s = render(&cv, &u, j, 120, 40, true, true, t);
    CHECK(!strstr(s, "─ 3 loss") && strstr(s, "panel 3 loss hidden") && u.focus != PANEL_LOSS, "h:\n%s", s);
    ui_key(&u, 'H', j, true);
    s = render(&cv, &u, j, 120, 40, true, true, t);
    CHECK(strstr(s, "─ 3 loss"), "H did not show the loss chart");
    /* l: log scale in the chart's title */
    ui_key(&u, 'l', j, true);
    s = render(&cv, &u, j, 120, 40, true, true, t);
    CHECK(strstr(s, "3 loss  log "), "l: no log scale");
    /* s / S: the order and its direction, on the table head; the arrow
     * means the same in every column: ▲ smallest first, ▼ largest first */
    s = render(&cv, &u, j, 120, 40, true, true, t);
    CHECK(u.sort == JOB_SORT_RANK && strstr(s, "RANK▲") && strstr(s, "sorted by rank ▲"), "by rank: ascending\n%s", s);
    ui_key(&u, 's', j, true);
    s = render(&cv, &u, j, 120, 40, true, true, t);
    CHECK(u.sort == JOB_SORT_STEP && strstr(s, "STEP▲"), "by step (furthest behind first): ascending");
    ui_key(&u, 's', j, true);
    s = render(&cv, &u, j, 120, 40, true, true, t);
    CHECK(u.sort == JOB_SORT_LOSS && strstr(s, "LOSS▼"), "by loss (highest first): descending");
    ui_key(&u, 's', j, true);
    s = render(&cv, &u, j, 120, 40, true, true, t);
    CHECK(u.sort == JOB_SORT_STEP_MS && u.order[0] == 3 && strstr(s, "STEP_MS▼") && strstr(s, "sorted by step ms"),
          "sorted by step ms: first %d", u.order[0]);
    ui_key(&u, 'S', j, true);
    s = render(&cv, &u, j, 120, 40, true, true, t);
    CHECK(u.order[3] == 3 && strstr(s, "STEP_MS▲"), "reversed");
    ui_key(&u, 's', j, true);
    ui_key(&u, 's', j, true);
    ui_key(&u, 's', j, true);
    ui_key(&u, 's', j, true);
    ui_key(&u, 'S', j, true);
    CHECK(u.sort == JOB_SORT_RANK && !u.sort_desc, "sort did not wrap to rank: %d", (int)u.sort);
    /* Down selects rank 1, Enter opens its detail, Up browses, Esc closes */
    render(&cv, &u, j, 120, 40, true, true, t);
    u.focus = PANEL_RANKS;
    ui_key(&u, UI_KEY_DOWN, j, true);
    CHECK(u.sel == 1, "Down: sel %d", u.sel);
    ui_key(&u, UI_KEY_ENTER, j, true);
    s = render(&cv, &u, j, 120, 40, true, true, t);
    CHECK(u.overlay == UI_DETAIL && strstr(s, "rank 1  Esc closes") && strstr(s, "host node1  pid 4001"), "detail:\n%s",
          s);
    CHECK(strstr(s, "SEQ OP") && strstr(s, "phases: train") && strstr(s, "shard: epoch 0"), "detail sections");
    ui_key(&u, UI_KEY_UP, j, true);
    s = render(&cv, &u, j, 120, 40, true, true, t);
    CHECK(strstr(s, "rank 0  Esc closes"), "Up in the detail");
    ui_key(&u, UI_KEY_ESC, j, true);
    CHECK(u.overlay == UI_NO_OVERLAY, "Esc kept the detail");
    /* mouse: a click on rank 2's row selects it, a double click opens it */
    s = render(&cv, &u, j, 120, 40, true, true, t);
    int y2 = u.list_y + 2;
    CHECK(ui_mouse(&u, UI_MOUSE_CLICK, 10, y2, j) == VIEW_ACT_REDRAW && u.sel == 2 && u.focus == PANEL_RANKS,
          "click: sel %d", u.sel);
    ui_mouse(&u, UI_MOUSE_DOUBLE, 10, u.list_y + 3, j);
    CHECK(u.overlay == UI_DETAIL && u.detail_rank == 3, "double click: overlay %d rank %d", (int)u.overlay,
          u.detail_rank);
    ui_key(&u, UI_KEY_ESC, j, true);
    render(&cv, &u, j, 120, 40, true, true, t);
    const UiRect *ev = &u.rect[PANEL_EVENTS];
    ui_mouse(&u, UI_MOUSE_CLICK, ev->x + 1, ev->y + 1, j);
    CHECK(u.focus == PANEL_EVENTS, "click did not focus the events");
    CHECK(ui_key(&u, 'm', j, true) == VIEW_ACT_REDRAW && !u.mouse, "m did not turn the mouse off");
    canvas_done(&cv);
    ui_done(&u);
    job_free(&j);
    TEST_END();
}

static void test_states(void)
{
    TEST_BEGIN("paused_failed_stale_hung_rows");
    Job *j = job_new(4, T0);
    int64_t t = scripted(j, 20);
    Ui u;
    ui_init(&u, 4);
    Canvas cv;
    canvas_init(&cv, true);
    job_set_pause_wanted(j, true);
    const char *s = render(&cv, &u, j, 120, 40, true, true, t);
    CHECK(strstr(s, " PAUSING "), "no PAUSING while ranks have not paused");
    Msg m;
    for (int r = 0; r < 4; r++) {
        msg_init(&m, MSG_PHASE);
        m.u.phase.phase = PHASE_PAUSED;
        apply(j, &m, r, t += MS);
    }
    s = render(&cv, &u, j, 120, 40, true, true, t);
    CHECK(strstr(s, " PAUSED ") && strstr(s, "paused after step 20") && strstr(s, "p resume"), "paused:\n%s", s);
    CHECK(strstr(s, " 0 samples/s  eta paused "), "paused title: %.120s", s);
    /* rank 1 dies, rank 2 goes silent, rank 0 sits in a collective */
    job_rank_exited(j, 1, 4001, W_EXITCODE(0, 9), NULL, t += MS, WALL);
    msg_init(&m, MSG_BEAT);
    m.u.beat.step = 20;
    m.u.beat.coll_seq = 21;
    snprintf(m.u.beat.coll_op, sizeof m.u.beat.coll_op, "allreduce");
    m.u.beat.coll_since_ns = WALL + 55 * SEC;
    apply(j, &m, 0, t + 5 * SEC);
    apply(j, &m, 3, t + 5 * SEC);
    s = render(&cv, &u, j, 120, 40, true, true, t + 7 * SEC);
    CHECK(strstr(line_with(s, " node1 "), "FAILED signal 9"), "failed row: '%s'", line_with(s, " node1 "));
    CHECK(strstr(line_with(s, " node2 "), "STALE 7s"), "stale row: '%s'", line_with(s, " node2 "));
    CHECK(strstr(line_with(s, " node0 "), "in allreduce #21 for 5s"), "hung row: '%s'", line_with(s, " node0 "));
    CHECK(strstr(s, "2/4 in, waiting 5.0s for r1 r2"), "collective waiting:\n%s", s);
    CHECK(strstr(s, " FAILED "), "title state");
    /* the styles that make those rows stand out */
    int y = -1;
    for (int k = 0; k < cv.h && y < 0; k++) {
        char row[2048];
        canvas_row_text(&cv, k, row, sizeof row);
        if (strstr(row, " node1 ")) y = k;
    }
    CHECK(y >= 0 && canvas_at(&cv, y, 5)->style == ST_ROW_ERR, "failed row not in the error style");
    canvas_done(&cv);
    ui_done(&u);
    job_free(&j);
    TEST_END();
}

static void test_canvas(void)
{
    TEST_BEGIN("canvas_clips_and_measures");
    Canvas cv;
    canvas_init(&cv, true);
    canvas_reset(&cv, 10, 2);
    CHECK(canvas_put(&cv, 0, 7, 100, ST_BOLD, "abcdef") == 3, "not clipped at the edge");
    /* text cut at the edge loses whole words and says so */
    Canvas wide;
    canvas_init(&wide, true);
    canvas_reset(&wide, 40, 4);
    char r2[160];
    canvas_put(&wide, 0, 0, 14, ST_NORMAL, "waiting for hello");
    canvas_row_text(&wide, 0, r2, sizeof r2);
    CHECK(strncmp(r2, "waiting for\xe2\x80\xa6 ", 15) == 0, "cut word: '%s'", r2);
    canvas_put(&wide, 1, 0, 8, ST_NORMAL, "eta 00:12:34");
    canvas_row_text(&wide, 1, r2, sizeof r2);
    CHECK(strncmp(r2, "eta\xe2\x80\xa6 ", 7) == 0, "cut number: '%s'", r2);
    CHECK(canvas_put(&wide, 2, 0, 5, ST_NORMAL,
                     "\xe2\x94\x80\xe2\x94\x80\xe2\x94\x80\xe2\x94\x80\xe2\x94\x80\xe2\x94\x80") == 5,
          "a rule cut plainly");
    canvas_row_text(&wide, 2, r2, sizeof r2);
    CHECK(strstr(r2, "\xe2\x80\xa6") == NULL, "an ellipsis on a rule: '%s'", r2);
    canvas_put(&wide, 3, 0, 40, ST_NORMAL, "fits exactly");
    canvas_row_text(&wide, 3, r2, sizeof r2);
    CHECK(strncmp(r2, "fits exactly ", 13) == 0, "uncut text changed: '%s'", r2);
    canvas_done(&wide);
    CHECK(canvas_put(&cv, 1, 0, 10, ST_NORMAL, "日本語です") == 10 && canvas_at(&cv, 1, 1)->ch == 0, "wide characters");
    CHECK(canvas_put(&cv, 1, 9, 10, ST_NORMAL, "日") == 0, "half a wide character written");
    CHECK(canvas_put(&cv, 5, 0, 10, ST_NORMAL, "x") == 0 && canvas_put(&cv, 0, -1, 10, ST_NORMAL, "x") == 0,
          "outside the canvas");
    CHECK(canvas_text_width(&cv, "a\xcc\x81") == 1, "combining mark counted");
    char row[64];
    canvas_row_text(&cv, 0, row, sizeof row);
    CHECK(strcmp(row, "       ab\xe2\x80\xa6") == 0, "row text '%s'", row);
    canvas_done(&cv);
    TEST_END();
}

/* The canvas's memo of decoded characters and its rules (canvas_repeat)
 * change no cell: text put into a canvas whose memo is warm from thousands
 * of puts before is cell for cell what a fresh canvas makes of it, invalid,
 * cut, wide and combining sequences included; a rule is cell for cell a put
 * per column, at and past the edges. */
static bool same_cells(const Canvas *a, const Canvas *b, int n)
{
    for (int i = 0; i < n; i++)
        if (a->cells[i].ch != b->cells[i].ch || a->cells[i].style != b->cells[i].style) return false;
    return true;
}

static void test_canvas_memo(void)
{
    TEST_BEGIN("canvas_memo_and_rules_change_no_cell");
    static const char *pieces[] = {
        "\xe2\x94\x80", "\xe2\x94\x82", "\xe2\x80\xa6", "\xe2\x96\x81", "\xe2\x96\x88", "\xc3\xa9", "\xce\xbb",
        "\xe6\x97\xa5", "\xf0\x9f\x98\x80", "\xcc\x81", "\xe2\x94", "\xe2\x94\x41", "\xe0\x80\x80", "\xed\xa0\x80",
        "\xf4\x90\x80\x80", "\xc0\xaf", "\xc2", "\xff", "\x01", "\t", "a", "7", " ", "word", "\xef\xbf\xbd",
        "\xe2\x80\x8b", "\xf0\x9f\x87\xa9",
    };
    const int np = (int)(sizeof pieces / sizeof pieces[0]);
    Canvas warm;
    canvas_init(&warm, true);
    canvas_reset(&warm, 24, 1);
    uint32_t seed = 12345;
    int diffs = 0, cases = 0, hits_possible = 0;
    for (int n = 0; n < 20000; n++) {
        char s[64] = "";
        int k = 1 + (int)((seed = seed * 1103515245u + 12345u) >> 16) % 6;
        for (int i = 0; i < k; i++) strcat(s, pieces[((seed = seed * 1103515245u + 12345u) >> 16) % (unsigned)np]);
        int x = (int)((seed = seed * 1103515245u + 12345u) >> 16) % 26 - 1;
        int maxw = (int)((seed = seed * 1103515245u + 12345u) >> 16) % 12;
        /* the warm canvas keeps its memo across puts; only the cells are blanked */
        for (int i = 0; i < warm.w; i++) warm.cells[i] = (Cell){ .ch = ' ', .style = ST_NORMAL };
        Canvas cold;
        canvas_init(&cold, true);
        canvas_reset(&cold, 24, 1);
        int a = canvas_put(&warm, 0, x, maxw, ST_BOLD, s), b = canvas_put(&cold, 0, x, maxw, ST_BOLD, s);
        if (a != b || !same_cells(&warm, &cold, 24)) diffs++;
        if (canvas_text_width(&warm, s) != canvas_text_width(&cold, s)) diffs++;
        cases++;
        canvas_done(&cold);
    }
    for (int i = 0; i < CANVAS_GLYPHS; i++) hits_possible += warm.glyph[i].len > 0;
    CHECK(diffs == 0, "%d of %d puts differ from a fresh canvas's", diffs, cases);
    CHECK(hits_possible > 0, "the memo kept nothing");
    canvas_done(&warm);

    static const char *rules[] = { "\xe2\x94\x80", "-", "\xe6\x97\xa5", "", "ab", "\xcc\x81", "\xe2\x94", "word" };
    int bad = 0;
    for (int r = 0; r < (int)(sizeof rules / sizeof rules[0]); r++)
        for (int x = -3; x <= 12; x++)
            for (int n = -1; n <= 14; n++)
                for (int y = -1; y <= 1; y++) {
                    Canvas a, b;
                    canvas_init(&a, true);
                    canvas_init(&b, true);
                    canvas_reset(&a, 10, 1);
                    canvas_reset(&b, 10, 1);
                    int cols = canvas_repeat(&a, y, x, n, ST_RULE, rules[r]), want = 0;
                    for (int i = 0; i < n; i++) want += canvas_put(&b, y, x + i, 1, ST_RULE, rules[r]);
                    if (cols != want || !same_cells(&a, &b, 10)) bad++;
                    canvas_done(&a);
                    canvas_done(&b);
                }
    CHECK(bad == 0, "%d rules differ from a put per column", bad);
    /* the view compares a row with the last frame's by its bytes: every way
     * of writing a cell leaves its spare bytes 0 */
    Canvas z;
    canvas_init(&z, true);
    canvas_reset(&z, 30, 2);
    canvas_put(&z, 0, 0, 30, ST_BOLD, "\xe6\x97\xa5 waiting for hello, a longer text");
    canvas_fill(&z, 1, 2, 5, ST_SEL);
    canvas_restyle(&z, 1, 0, 30, ST_WARN);
    canvas_repeat(&z, 1, 10, 8, ST_RULE, "\xe2\x94\x80");
    canvas_set(&z, 1, 29, 'x', ST_OK);
    int spare = 0;
    for (int i = 0; i < z.w * z.h; i++) spare += z.cells[i].zero_[0] | z.cells[i].zero_[1] | z.cells[i].zero_[2];
    CHECK(spare == 0, "a cell's spare bytes are not 0");
    canvas_done(&z);
    TEST_END();
}

/* numfmt writes what printf writes: every %.*f and %lld byte for byte, the
 * return value too, for values near rounding ties, negative zero, huge
 * values, non-finite ones and buffers too short for the text. */
static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void test_numfmt(void)
{
    TEST_BEGIN("numfmt_writes_what_printf_writes");
    uint64_t seed = 88172645463325252ULL;
    int bad = 0, cases = 0;
    // clang-format off
    static const double fixed[] = { 0.0, -0.0, 0.5, 1.5, 2.5, -2.5, 0.125, 0.375, 1.0005, 2.675, 1e-7, -1e-7,
                                    0.05, 0.15, 0.25, 0.35, 9.995, 99.995, 999999999.4, 1e9, 1e15, 1e300, -1e300,
                                    123456.789, 4.35, 0.045, NAN, INFINITY, -INFINITY, 5e-324, 1.7976931348623157e308 };
    // clang-format on
    for (int n = 0; n < 400000; n++) {
        double x;
        int kind = n % 4;
        uint64_t r = rng_next(&seed);
        if (n < (int)(sizeof fixed / sizeof fixed[0]) * 10)
            x = fixed[n / 10];
        else if (kind == 0) /* any magnitude a frame shows */
            x = ((double)(r >> 11) / 9007199254740992.0 - 0.5) * pow(10, (int)(r % 13) - 4);
        else if (kind == 1) /* exactly on a tie of some decimal: k + 0.5 over a power of ten */
            x = ((double)(r % 2000000) + 0.5) / pow(10, (int)(r >> 40) % 7);
        else if (kind == 2) /* an ulp either side of such a tie */
            x = nextafter(((double)(r % 200000) + 0.5) / pow(10, (int)(r >> 40) % 5), (r >> 63) ? INFINITY : -INFINITY);
        else { /* any bit pattern */
            memcpy(&x, &r, sizeof x);
        }
        int d = n % 10;
        size_t sizes[] = { 48, 1 + (size_t)(r >> 58) % 8 };
        for (int k = 0; k < 2; k++) {
            char a[64], b[64];
            memset(a, 'x', sizeof a);
            memset(b, 'x', sizeof b);
            int ra = numfmt_fixed(a, sizes[k], x, d), rb = snprintf(b, sizes[k], "%.*f", d, x);
            if (ra != rb || memcmp(a, b, sizeof a)) {
                if (bad++ < 5) printf("  %.17g %%.%df: '%s' (%d) against '%s' (%d)\n", x, d, a, ra, b, rb);
            }
            cases++;
        }
        long long v = (long long)r;
        if (kind == 1) v = (long long)(r % 100000) - 50000;
        if (n == 1) v = LLONG_MIN;
        if (n == 2) v = LLONG_MAX;
        if (n == 3) v = 0;
        char a[32], b[32];
        memset(a, 'x', sizeof a);
        memset(b, 'x', sizeof b);
        size_t sz = n % 3 ? sizeof a : (size_t)(r >> 59);
        int ra = numfmt_int(a, sz, v), rb = snprintf(b, sz, "%lld", v);
        if (ra != rb || memcmp(a, b, sizeof a)) {
            if (bad++ < 5) printf("  %lld: '%s' against '%s'\n", v, a, b);
        }
        cases++;
    }
    CHECK(bad == 0, "%d of %d numbers written otherwise than printf", bad, cases);
    TEST_END();
}

/* A sparkline written cell by cell (draw_spark_put) is the text draw_spark
 * makes, put: the same cells and columns for every width, cut, edge and
 * non-finite value, in UTF-8 and in ASCII. */
static void test_spark_put(void)
{
    TEST_BEGIN("sparkline_cells_are_its_text_put");
    static const Glyphs g8 = { .spark = { "\u2581", "\u2582", "\u2583", "\u2584", "\u2585", "\u2586", "\u2587",
                                          "\u2588" } };
    static const Glyphs ga = { .spark = { "_", ".", ",", "-", "~", "=", "*", "#" } };
    uint64_t seed = 1234567;
    int bad = 0, cases = 0;
    for (int n = 0; n < 20000; n++) {
        bool utf8 = n % 2;
        Canvas a, b;
        canvas_init(&a, utf8);
        canvas_init(&b, utf8);
        canvas_reset(&a, 30, 2);
        canvas_reset(&b, 30, 2);
        DrawCtx da = { .cv = &a, .g = utf8 ? &g8 : &ga }, db = { .cv = &b, .g = utf8 ? &g8 : &ga };
        int k = (int)(rng_next(&seed) % 40);
        double v[40];
        bool blank[40];
        for (int i = 0; i < k; i++) {
            uint64_t r = rng_next(&seed);
            v[i] = r % 9 == 0 ? NAN : r % 11 == 0 ? INFINITY : (double)(r % 1000) / (r % 3 ? 7.0 : 1e9);
            blank[i] = r % 2;
        }
        if (n % 7 == 0)
            for (int i = 0; i < k; i++) v[i] = 3.0; /* flat */
        int y = (int)(rng_next(&seed) % 4) - 1, x = (int)(rng_next(&seed) % 34) - 2;
        int maxw = (int)(rng_next(&seed) % 45) - 2;
        bool zero = rng_next(&seed) % 2;
        const bool *bl = n % 3 ? blank : NULL;
        char text[4 * DRAW_SPARK_MAX + 1] = "";
        if (k > 0) draw_spark(&db, v, bl, k, zero, text, sizeof text);
        int ca = draw_spark_put(&da, y, x, maxw, ST_SERIES(3), v, bl, k, zero);
        int cb = canvas_put(&b, y, x, maxw, ST_SERIES(3), text);
        if (ca != cb || !same_cells(&a, &b, 60)) bad++;
        cases++;
        canvas_done(&a);
        canvas_done(&b);
    }
    CHECK(bad == 0, "%d of %d sparklines differ from their text put", bad, cases);
    TEST_END();
}

/* A path (plot_path) sets the dots, styles and glyphs that plot_line from
 * each point to the next sets (a dot for a first point), for points on and
 * off the plot, repeated, not finite, in braille and in glyph mode. */
static void test_plot_path(void)
{
    TEST_BEGIN("plot_path_dots_are_plot_lines");
    uint64_t seed = 99991;
    int bad = 0;
    for (int n = 0; n < 3000; n++) {
        bool braille = n % 2;
        Canvas ca, cb;
        canvas_init(&ca, true);
        canvas_init(&cb, true);
        canvas_reset(&ca, 20, 6);
        canvas_reset(&cb, 20, 6);
        Plot pa, pb;
        plot_begin(&pa, &ca, 1, 1, 18, 5, braille);
        plot_begin(&pb, &cb, 1, 1, 18, 5, braille);
        int k = (int)(rng_next(&seed) % 30);
        double x[30], y[30];
        for (int i = 0; i < k; i++) {
            uint64_t r = rng_next(&seed);
            x[i] = r % 13 == 0 ? NAN : (double)(r % 500) / 10.0 - 5.0;
            y[i] = r % 17 == 0 ? INFINITY : (double)((r >> 20) % 300) / 10.0 - 4.0;
            if (i > 0 && r % 5 == 0) x[i] = x[i - 1], y[i] = y[i - 1] + 0.1; /* the same dot again */
        }
        /* another layer underneath, so a style and glyph taken over shows */
        plot_line(&pa, 0, 0, 40, 20, ST_BAND, PLOT_BAND, ':');
        plot_line(&pb, 0, 0, 40, 20, ST_BAND, PLOT_BAND, ':');
        plot_path(&pa, x, y, k, ST_MEAN, PLOT_MEAN, '*');
        /* the reference: plot_series as it was, a line from the last point */
        double px = NAN, py = NAN;
        for (int i = 0; i < k; i++) {
            if (isfinite(px))
                plot_line(&pb, px, py, x[i], y[i], ST_MEAN, PLOT_MEAN, '*');
            else
                plot_line(&pb, x[i], y[i], x[i], y[i], ST_MEAN, PLOT_MEAN, '*');
            px = isfinite(y[i]) ? x[i] : NAN;
            py = y[i];
        }
        plot_end(&pa);
        plot_end(&pb);
        if (!same_cells(&ca, &cb, 20 * 6)) bad++;
        canvas_done(&ca);
        canvas_done(&cb);
    }
    CHECK(bad == 0, "%d of 3000 paths differ from their lines", bad);
    TEST_END();
}

/* The events panel keeps the text of the seconds it formatted: events of
 * different seconds that share a memo slot (16 s apart) and of the same
 * second each show their own time, frame after frame. */
static void test_event_times(void)
{
    TEST_BEGIN("event_times_memo_never_shows_another_second");
    Job *j = job_new(2, T0);
    int64_t t0 = (WALL / SEC / 86400) * 86400 * SEC; /* 00:00:00 UTC that day */
    job_event(j, T0, t0 + 1 * SEC, 0, EV_INFO, "first");
    job_event(j, T0, t0 + 17 * SEC, 0, EV_INFO, "second");
    job_event(j, T0, t0 + 33 * SEC + 999 * MS, 1, EV_INFO, "third");
    job_event(j, T0, t0 + 17 * SEC + 500 * MS, 1, EV_INFO, "fourth");
    bool ok = true;
    for (int frame = 0; frame < 3; frame++) {
        Canvas cv;
        canvas_init(&cv, true);
        canvas_reset(&cv, 80, 24);
        Ui u;
        ui_init(&u, 2);
        u.zoom = PANEL_EVENTS;
        draw_screen(&cv, &u, j, T0 + SEC, t0 + 40 * SEC, NULL, true);
        const char *t = dump(&cv);
        ok &= strstr(line_with(t, "first"), "00:00:01 r0 first") != NULL;
        ok &= strstr(line_with(t, "second"), "00:00:17 r0 second") != NULL;
        ok &= strstr(line_with(t, "third"), "00:00:33 r1 third") != NULL;
        ok &= strstr(line_with(t, "fourth"), "00:00:17 r1 fourth") != NULL;
        if (!ok) printf("%s", t);
        ui_done(&u);
        canvas_done(&cv);
        if (!ok) break;
    }
    CHECK(ok, "an event shows another second's time");
    job_free(&j);
    TEST_END();
}

/* Full words: an error event longer than the panel is wide wraps under
 * its time, every word kept, a row ending at a word's end; an info event
 * stays one row (cut at the edge). */
/* Folded events on the panel: a checkpoint every epoch is one row with its
 * count before the newest text ("×30", "x30" without UTF-8), a warning said
 * before the flood still shows; the rank's detail shows its rows folded. */
static void test_event_fold_rows(void)
{
    TEST_BEGIN("repeated_events_fold_into_one_row_with_a_count");
    Job *j = job_new(2, T0);
    int64_t t = T0;
    job_event(j, t, WALL, 1, EV_WARN, "rank 1: the sampler repeats epoch 0's order (set_epoch not called?)");
    for (int ep = 1; ep <= 30; ep++) {
        job_event(j, t += SEC, WALL, 0, EV_INFO, "rank 0: train -> checkpoint (periodic)");
        job_event(j, t, WALL, 0, EV_INFO, "checkpoint step %d written by rank 0 in 3 ms (1.1 MB) -> /ck/step-%08d",
                  ep * 8, ep * 8);
        job_event(j, t, WALL, 0, EV_INFO, "rank 0: checkpoint -> train");
    }
    Canvas cv;
    canvas_init(&cv, true);
    Ui u;
    ui_init(&u, 2);
    const char *s = render(&cv, &u, j, 120, 40, true, true, t);
    const char *rows[3] = { "r0 \xc3\x97" "30 rank 0: train -> checkpoint (periodic)",
                            "r0 \xc3\x97" "30 checkpoint step 240 written by rank 0",
                            "r0 \xc3\x97" "30 rank 0: checkpoint -> train" };
    for (int i = 0; i < 3; i++) CHECK(strstr(s, rows[i]), "no row '%s':\n%s", rows[i], s);
    CHECK(!strstr(s, "step 232 written") && strstr(s, "r1 rank 1: the sampler repeats"), "events:\n%s", s);
    s = render(&cv, &u, j, 120, 40, false, false, t);
    CHECK(strstr(s, "r0 x30 checkpoint step 240 written"), "ASCII:\n%s", s);
    u.overlay = UI_DETAIL;
    u.detail_rank = 0;
    s = render(&cv, &u, j, 120, 40, true, true, t);
    CHECK(strstr(s, "\xc3\x97" "30 checkpoint step 240") && !strstr(s, "step 232 written"), "rank detail:\n%s", s);
    ui_done(&u);
    canvas_done(&cv);
    job_free(&j);
    TEST_END();
}

static void test_event_wrap(void)
{
    TEST_BEGIN("a_long_verdict_wraps_whole_at_80_columns");
    Job *j = job_new(2, T0);
    const char *v = "hang: rank 0 alone in barrier #22 at ddp_shutdown_hang.py:40 in main: every other rank had "
                    "finished (rank 1 after step 20), so only rank 0 reaches it (code under `if rank == 0:`?); call "
                    "it on every rank";
    job_event(j, T0, WALL, -1, EV_ERROR, "%s", v);
    job_event(j, T0, WALL, 0, EV_INFO, "an info line %s", v);
    Canvas cv;
    canvas_init(&cv, true);
    canvas_reset(&cv, 80, 24);
    Ui u;
    ui_init(&u, 2);
    u.zoom = PANEL_EVENTS;
    draw_screen(&cv, &u, j, T0 + SEC, WALL + SEC, NULL, true);
    const char *t = dump(&cv);
    /* the rows from the hang's first to the info line, joined, hold it whole */
    const char *a = strstr(t, "ddptop hang: "), *b = strstr(t, "r0 an info line");
    char joined[4096] = "";
    size_t n = 0;
    int rows = 0;
    for (const char *p = a; a && b && p < b && n < sizeof joined - 1; p++) {
        if (*p == '\n') rows++;
        if (*p == '\n' || (*p == ' ' && n && joined[n - 1] == ' ')) {
            if (n && joined[n - 1] != ' ') joined[n++] = ' ';
            continue;
        }
        joined[n++] = *p;
    }
    joined[n] = '\0';
    CHECK(a && b && strstr(joined, v + 6) && rows >= 3, "%d rows: '%s'\n%s", rows, joined, t);
    bool space_first = false; /* a continuation row: 16 columns in, then a word, never a space */
    for (const char *p = t; (p = strstr(p, "\n                 ")); p++) {
        const char *q = p + 17;
        while (*q == ' ') q++;
        if (*q && *q != '\n') space_first = true;
    }
    CHECK(!space_first, "a wrapped row begins with a space:\n%s", t);
    const char *info = strstr(t, "r0 an info line"); /* its row cut at the edge, nothing under it */
    CHECK(info && !strstr(info, "ddp_shutdown_hang.py:40") && !strstr(info, "\n                every"),
          "the info line wrapped too:\n%s", t);
    ui_done(&u);
    canvas_done(&cv);
    job_free(&j);
    TEST_END();
}

/* A Python rank's line on its row and detail, a lint on the rows, and the
 * w page: asked by the key, filled by the run loop, scrolled, closed. */
static void test_python_rank(void)
{
    TEST_BEGIN("python_line_lints_and_stacks_page");
    Job *j = job_new(4, T0);
    int64_t t = scripted(j, 30);
    Msg m;
    msg_init(&m, MSG_BEAT);
    m.u.beat.step = 30;
    m.u.beat.phase = PHASE_TRAIN;
    snprintf(m.u.beat.where, sizeof m.u.beat.where, "train.py:57 save_checkpoint");
    apply(j, &m, 1, t += MS);
    msg_init(&m, MSG_BEAT); /* rank 2: ddptop's C trainer, no line */
    m.u.beat.step = 30;
    apply(j, &m, 2, t);
    Ui u;
    ui_init(&u, 4);
    Canvas cv;
    canvas_init(&cv, true);
    const char *s = render(&cv, &u, j, 120, 40, true, true, t);
    CHECK(strstr(line_with(s, "node1"), "at train.py:57 in save_checkpoint"), "rank 1's row: %s",
          line_with(s, "node1"));
    CHECK(!strstr(line_with(s, "node2"), " at "), "a C rank's row has a line: %s", line_with(s, "node2"));
    /* a lint on a rank's row; a slow rank (3) says so first */
    j->ranks[2].lints |= JOB_LINT_SET_EPOCH;
    j->ranks[3].lints |= JOB_LINT_SET_EPOCH;
    s = render(&cv, &u, j, 120, 40, true, true, t);
    CHECK(strstr(line_with(s, "node2"), "set_epoch not called?"), "rank 2's row: %s", line_with(s, "node2"));
    CHECK(strstr(line_with(s, "node3"), "slow 4.0x median"), "rank 3's row: %s", line_with(s, "node3"));
    /* the detail says where, and how to see the stacks */
    u.sel = 1;
    CHECK(ui_key(&u, UI_KEY_ENTER, j, true) == VIEW_ACT_REDRAW && u.overlay == UI_DETAIL, "no detail");
    s = render(&cv, &u, j, 120, 40, true, true, t);
    CHECK(strstr(s, "python: rank 1 at train.py:57 in save_checkpoint") && strstr(s, "w: every thread's stack"),
          "detail lacks the line");
    /* w (from the detail too) asks for the rank's stacks */
    CHECK(ui_key(&u, 'w', j, true) == VIEW_ACT_STACK && u.stack_rank == 1, "w: stack rank %d", u.stack_rank);
    ui_stack_show(&u, 1, "asking rank 1 (pid 4001) ...", "");
    s = render(&cv, &u, j, 120, 40, true, true, t);
    CHECK(u.overlay == UI_STACK && strstr(s, "rank 1 Python stacks") && strstr(s, "asking rank 1"), "no waiting page");
    char dump[8192];
    size_t o = (size_t)snprintf(dump, sizeof dump, "Current thread 0x00007f (most recent call first):\n");
    for (int i = 0; i < 60; i++)
        o += (size_t)snprintf(dump + o, sizeof dump - o, "  File \"train.py\", line %d in f%d\n", 100 + i, i);
    ui_stack_show(&u, 1, "rank 1 (pid 4001) at 12:00:01: 1 thread", dump);
    s = render(&cv, &u, j, 120, 40, true, true, t);
    CHECK(strstr(s, "Current thread 0x00007f") && strstr(s, "line 100 in f0") && strstr(s, "lines 1-"),
          "no stack shown:\n%s", s);
    CHECK(u.stack_lines == 61 && u.stack_rows > 10 && u.stack_rows < 61, "lines %d rows %d", u.stack_lines,
          u.stack_rows);
    ui_key(&u, UI_KEY_END, j, true);
    s = render(&cv, &u, j, 120, 40, true, true, t);
    CHECK(strstr(s, "line 159 in f59") && !strstr(s, "line 100 in f0"), "End did not scroll to the last frame");
    ui_key(&u, UI_KEY_HOME, j, true);
    CHECK(u.stack_top == 0, "Home: top %d", u.stack_top);
    CHECK(ui_key(&u, 'w', j, true) == VIEW_ACT_STACK && u.stack_rank == 1, "w on the page: rank %d", u.stack_rank);
    CHECK(ui_key(&u, UI_KEY_ESC, j, true) == VIEW_ACT_REDRAW && u.overlay == UI_NO_OVERLAY, "Esc kept the page");
    /* the key is on the live key line, not on a replay's, where it says why */
    u.overlay = UI_NO_OVERLAY;
    s = render(&cv, &u, j, 140, 40, true, true, t);
    CHECK(strstr(s, "w stack"), "key line lacks w");
    u.keys_mode = KEYS_REPLAY;
    CHECK(ui_key(&u, 'w', j, true) == VIEW_ACT_REDRAW && strstr(u.note, "only on the job's own screen"),
          "replay w: '%s'", u.note);
    canvas_done(&cv);
    ui_done(&u);
    job_free(&j);
    TEST_END();
}

/* Above 32 ranks the ranks panel opens with the rank map; up to 32 it is
 * the plain table (those screens are unchanged by the map). */
static void test_rank_map(void)
{
    TEST_BEGIN("rank_map_above_32_ranks_cells_legend_more_line");
    Canvas cv;
    canvas_init(&cv, true);
    Ui u;
    /* 32 ranks: no map, no "+N more" line */
    Job *j = job_new(32, T0);
    int64_t t = scripted(j, 12);
    ui_init(&u, 32);
    const char *s = render(&cv, &u, j, 80, 24, true, true, t);
    CHECK(!strstr(s, "32 ranks: ") && !strstr(s, " more healthy rank") && !strstr(s, "odd ones first") &&
              !strstr(s, "last in most often"),
          "32 ranks drew a big job's screen:\n%s", s);
    ui_done(&u);
    job_free(&j);
    /* 1024 ranks, rank 700 silent: one `?` cell among `·` cells */
    j = job_new(1024, T0);
    t = scripted(j, 12);
    Msg m;
    for (int k = 1; k <= 7; k++)
        for (int r = 0; r < 1024; r++) {
            if (r == 700) continue;
            msg_init(&m, MSG_BEAT);
            m.u.beat.step = 12;
            m.u.beat.phase = PHASE_TRAIN;
            m.u.beat.coll_seq = -1;
            apply(j, &m, r, t + k * SEC);
        }
    t += 7 * SEC + MS;
    ui_init(&u, 1024);
    s = render(&cv, &u, j, 200, 60, true, true, t);
    CHECK(strstr(s, "1024 ranks: ? silent 1: r700  s slow 1: r3  · healthy 1022"), "legend:\n%s", s);
    /* a cell a rank at 200x60 (120 columns on the left): rank 700 is row 5, column 100 */
    const char *legend = strstr(s, "1024 ranks: ");
    const char *row = legend ? strchr(legend, '\n') : NULL;
    for (int k = 0; k < 5 && row; k++) row = strchr(row + 1, '\n');
    CHECK(row && strncmp(row + 1 + 100 * strlen("·"), "?", 1) == 0, "rank 700's cell is not a '?':\n%s", s);
    CHECK(strstr(line_with(s, "outliers: "), "outliers: r700 silent 7s | r3 step 40.0 ms (4.0x median)"),
          "outliers: '%s'", line_with(s, "outliers: "));
    int below = -1;
    sscanf(line_with(s, " more healthy ranks"), "  +%d more", &below);
    CHECK(strstr(s, "sorted by rank ▲, odd ones first") && below > 0 && u.ranks_top + u.list_rows + below == 1024,
          "no odd-first title or '+N more' line (%d below, %d listed):\n%s", below, u.list_rows, s);
    CHECK(u.order[0] == 700 && u.order[1] == 3 && u.order[2] == 0, "order %d %d %d", u.order[0], u.order[1],
          u.order[2]);
    CHECK(strstr(s, "last in most often r1: 12 of the last 12 collectives, 2.00 ms after the others"),
          "no persistent straggler line:\n%s", s);
    /* a click on rank 500's cell (row 4, column 20 of the map) selects it and the list follows;
     * a double click opens its detail */
    ui_mouse(&u, UI_MOUSE_CLICK, u.map_x + 20, u.map_y + 4, j);
    s = render(&cv, &u, j, 200, 60, true, true, t);
    CHECK(u.sel == 500 && strstr(s, "▶   500 node0"), "a click on the map did not select rank 500 (sel %d):\n%s", u.sel,
          s);
    ui_mouse(&u, UI_MOUSE_DOUBLE, u.map_x + 21, u.map_y + 4, j);
    s = render(&cv, &u, j, 200, 60, true, true, t);
    CHECK(u.overlay == UI_DETAIL && u.detail_rank == 501 && strstr(s, "─ rank 501 "), "double click: detail %d",
          u.detail_rank);
    ui_key(&u, UI_KEY_ESC, j, true);
    /* 80x24: several ranks a cell, still named; ASCII glyphs without UTF-8 */
    s = render(&cv, &u, j, 80, 24, false, true, t);
    CHECK(strstr(s, "1024 ranks, a cell = ") && strstr(s, "(the worst shown): ? silent 1: r700  s slow 1: r3"),
          "80x24 legend:\n%s", s);
    CHECK(strstr(s, "..") && !strstr(s, "·"), "ASCII cells:\n%s", s);
    /* End reaches the last rank and the "+N more" line goes */
    ui_key(&u, UI_KEY_END, j, true);
    s = render(&cv, &u, j, 200, 60, true, true, t);
    CHECK(u.sel == 1023 && strstr(s, "▶  1023 node3") && !strstr(s, " more healthy rank"), "End:\n%s", s);
    canvas_done(&cv);
    ui_done(&u);
    job_free(&j);
    TEST_END();
}

/* The ? box's inside as drawn: found by its title on the top border (drawn
 * two columns in), each inside line (border and padding off) put at
 * lines[top + i]; returns the box's inside rows, 0 no box. */
static int help_box(const Canvas *cv, const char *title, int top, char (*lines)[256], int max)
{
    char want[128], row[2048];
    snprintf(want, sizeof want, " %s ", title);
    for (int y = 0; y + 1 < cv->h; y++) {
        canvas_row_text(cv, y, row, sizeof row);
        const char *hit = strstr(row, want);
        if (!hit) continue;
        int x0 = -2; /* the title's column, less two */
        for (const char *s = row; s < hit; s++) x0 += (*s & 0xC0) != 0x80;
        uint32_t bar = canvas_at(cv, y + 1, x0)->ch;
        if (bar != 0x2502 && bar != '|') continue;
        int right = x0 + 1;
        while (right < cv->w && canvas_at(cv, y + 1, right)->ch != bar) right++;
        int n = 0;
        for (int r = y + 1; r < cv->h && canvas_at(cv, r, x0)->ch == bar && top + n < max; r++, n++) {
            char *l = lines[top + n];
            int k = 0;
            for (int x = x0 + 2; x < right - 1 && k < 255; x++) {
                uint32_t ch = canvas_at(cv, r, x)->ch;
                l[k++] = ch >= 32 && ch < 127 ? (char)ch : ch ? '?' : ' ';
            }
            l[k] = '\0';
        }
        return n;
    }
    return 0;
}

/* s with every run of spaces one space, ends trimmed, into out[n]. */
static void collapse(const char *s, char *out, size_t n)
{
    size_t k = 0;
    for (; *s && k + 1 < n; s++)
        if (*s != ' ' || (k && out[k - 1] != ' ')) out[k++] = *s;
    while (k && out[k - 1] == ' ') k--;
    out[k] = '\0';
}

/* ? in every mode and at every size: each row of the mode's key table is
 * in the box, its keys and its whole line (wrapped or not), on one page
 * when the rows fit (side by side when only the width has room), else
 * page by page with PgDn, a mark on the border saying there is more. */
static void test_help_every_key(void)
{
    TEST_BEGIN("help_shows_every_key");
    Job *j = job_new(2, T0);
    int64_t t = scripted(j, 10);
    static const struct {
        int w, h;
        int one_page; /* 1 everything at once, 0 it scrolls; 2 at once while the rows fit the height (a key
                         added to a table of h - 2 rows may make it scroll, never cut it) */
    } sizes[] = { { 80, 24, 2 }, { 200, 60, 1 }, { 160, 20, 1 }, { 120, 40, 1 },
                  { 60, 15, 0 }, { 60, 12, 0 },  { 80, 14, 0 } };
    static char lines[512][256];
    static char joined[512 * 257], need[512];
    for (int m = 0; m < KEYS__MODES; m++) {
        const KeyRow *rows[64];
        int nrows = keys_help((KeysMode)m, rows, 64);
        for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
            int w = sizes[z].w, h = sizes[z].h;
            Ui u;
            ui_init(&u, 2);
            u.keys_mode = (KeysMode)m;
            Canvas cv;
            canvas_init(&cv, true);
            ui_key(&u, '?', j, true);
            int total = 0, pages = 0, box_h = 0;
            bool marked_below = false, marked_above = false;
            for (;;) {
                render(&cv, &u, j, w, h, true, true, t);
                int n = help_box(&cv, keys_help_title((KeysMode)m), u.help_top, lines, 512);
                if (!n) break;
                box_h = n;
                total = u.help_top + n > total ? u.help_top + n : total;
                pages++;
                const char *s = dump(&cv);
                marked_below |= strstr(s, "more (Down, PgDn)") != NULL;
                marked_above |= strstr(s, "more (Up, PgUp)") != NULL;
                if (u.help_top + u.help_rows >= u.help_lines || pages > 40) break;
                int before = u.help_top;
                CHECK(ui_key(&u, UI_KEY_PGDN, j, true) == VIEW_ACT_REDRAW && u.overlay == UI_HELP,
                      "PgDn closed the help (mode %d, %dx%d)", m, w, h);
                render(&cv, &u, j, w, h, true, true, t);
                if (u.help_top <= before) {
                    CHECK(0, "PgDn did not scroll (mode %d, %dx%d)", m, w, h);
                    break;
                }
            }
            CHECK(box_h > 0, "no help box (mode %d, %dx%d)", m, w, h);
            CHECK(box_h <= h - 2, "box of %d rows at %dx%d", box_h, w, h);
            size_t len = 0;
            for (int i = 0; i < total; i++) {
                char c[257];
                collapse(lines[i], c, sizeof c);
                len += (size_t)snprintf(joined + len, sizeof joined - len, "%s ", c);
            }
            for (int r = 0; r < nrows; r++) {
                char raw[512];
                snprintf(raw, sizeof raw, "%s %s", rows[r]->keys, rows[r]->help);
                collapse(raw, need, sizeof need);
                CHECK(strstr(joined, need), "mode %d, %dx%d: help lacks '%s'", m, w, h, need);
            }
            if (sizes[z].one_page == 1 || (sizes[z].one_page == 2 && nrows <= h - 2))
                CHECK(pages == 1 && !marked_below && !marked_above, "mode %d, %dx%d: %d pages", m, w, h, pages);
            else if (m == KEYS_LIVE)
                CHECK(pages > 1 && marked_below && marked_above, "mode %d, %dx%d: %d pages, marks %d %d", m, w, h,
                      pages, marked_below, marked_above);
            /* Up scrolls back, Home to the top; any other key closes */
            ui_key(&u, UI_KEY_UP, j, true);
            ui_key(&u, UI_KEY_HOME, j, true);
            CHECK(u.overlay == UI_HELP && u.help_top == 0, "Up/Home closed the help or did not scroll to the top");
            CHECK(ui_key(&u, 'x', j, true) == VIEW_ACT_REDRAW && u.overlay == UI_NO_OVERLAY, "x did not close it");
            canvas_done(&cv);
            ui_done(&u);
        }
    }
    /* 160x20: 22 live rows in 18: two columns side by side */
    {
        Ui u;
        ui_init(&u, 2);
        Canvas cv;
        canvas_init(&cv, true);
        ui_key(&u, '?', j, true);
        const char *s = render(&cv, &u, j, 160, 20, true, true, t);
        CHECK(strstr(line_with(s, "checkpoint now"), "select a rank"), "160x20: not two columns:\n%s", s);
        /* without UTF-8 the marks are ASCII */
        s = render(&cv, &u, j, 60, 15, false, false, t);
        CHECK(strstr(s, "more (Down, PgDn)") && strstr(line_with(s, "more (Down, PgDn)"), "- v "),
              "no ASCII mark below:\n%s", s);
        canvas_done(&cv);
        ui_done(&u);
    }
    job_free(&j);
    TEST_END();
}

int main(void)
{
    if (!setlocale(LC_ALL, "C.UTF-8")) setlocale(LC_ALL, "");
    setlocale(LC_NUMERIC, "C");
    setenv("TZ", "UTC", 1); /* the events' times */
    tzset();
    test_canvas();
    test_canvas_memo();
    test_numfmt();
    test_spark_put();
    test_event_times();
    test_event_wrap();
    test_event_fold_rows();
    test_plot_path();
    test_panels_120x40();
    test_loss_now();
    test_one_rank_bandwidth();
    test_detail_bandwidth();
    test_coll_unfinished();
    test_sizes();
    test_ascii();
    test_many_ranks();
    test_keys();
    test_help_every_key();
    test_states();
    test_python_rank();
    test_rank_map();
    CHECK_EXIT();
}
