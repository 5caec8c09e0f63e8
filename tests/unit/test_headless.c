/* test_headless.c — the headless printer as a log reader sees it: progress
 * lines once a second, event lines, JSON lines (escaping included) and the
 * summary verdicts, for scripted jobs written to a temporary file.
 * The ncurses screen is tested in tmux by the end-to-end tests.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/wait.h>

#include "check.h"
#include "view/view.h"

#define MS  1000000LL
#define SEC 1000000000LL

static char out_buf[1 << 20];

/* The jobs start at T0 (monotonic); wall time, which only stamps events,
 * stands still. */
#define T0   (1000 * SEC)
#define WALL (1700000000LL * SEC)

/* Everything written to f so far, as one string. */
static const char *slurp(FILE *f)
{
    fflush(f);
    rewind(f);
    size_t n = fread(out_buf, 1, sizeof out_buf - 1, f);
    out_buf[n] = '\0';
    return out_buf;
}

static int count_lines_with(const char *text, const char *prefix, const char *needle)
{
    int n = 0;
    for (const char *p = text; *p;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char line[4096];
        size_t c = len < sizeof line - 1 ? len : sizeof line - 1;
        memcpy(line, p, c);
        line[c] = '\0';
        if ((!prefix || strncmp(line, prefix, strlen(prefix)) == 0) && (!needle || strstr(line, needle))) n++;
        p += len + (e ? 1 : 0);
    }
    return n;
}

/* The line that contains needle (copied into a static buffer), or "". */
static const char *line_with(const char *text, const char *needle)
{
    static char line[4096];
    const char *hit = strstr(text, needle);
    line[0] = '\0';
    if (!hit) return line;
    const char *s = hit;
    while (s > text && s[-1] != '\n') s--;
    const char *e = strchr(hit, '\n');
    size_t len = e ? (size_t)(e - s) : strlen(s);
    if (len >= sizeof line) len = sizeof line - 1;
    memcpy(line, s, len);
    line[len] = '\0';
    return line;
}

static void apply(Job *j, Msg *m, int rank, int64_t t)
{
    m->rank = rank;
    job_apply(j, m, t, WALL);
}

/* A world-rank job that trains `steps` steps at 10 steps/s, ticking the
 * printer every 100 ms of job time; returns the job time reached. */
static int64_t scripted_job(Job *j, ViewHeadless *h, int steps)
{
    int64_t t = j->start_ns;
    Msg m;
    for (int r = 0; r < j->world; r++) {
        job_rank_started(j, r, 2000 + r, t);
        msg_init(&m, MSG_HELLO);
        m.u.hello.pid = 2000 + r;
        m.u.hello.world = j->world;
        snprintf(m.u.hello.host, sizeof m.u.hello.host, "box");
        snprintf(m.u.hello.device, sizeof m.u.hello.device, "cpu");
        snprintf(m.u.hello.backend, sizeof m.u.hello.backend, "gloo");
        snprintf(m.u.hello.model, sizeof m.u.hello.model, "mlp:784,256,256,10");
        m.u.hello.batch_size = 64;
        m.u.hello.max_steps = 100;
        apply(j, &m, r, t += MS);
        msg_init(&m, MSG_PHASE);
        m.u.phase.phase = PHASE_TRAIN;
        apply(j, &m, r, t += MS);
    }
    view_headless_tick(h, j, t);
    for (int s = 1; s <= steps; s++) {
        t += 100 * MS;
        for (int r = 0; r < j->world; r++) {
            msg_init(&m, MSG_STEP);
            m.u.step.step = s;
            m.u.step.loss = 1.0 - 0.01 * s + 0.01 * r;
            m.u.step.samples = 64LL * s;
            m.u.step.comm_ms = 1.25;
            apply(j, &m, r, t);
        }
        view_headless_tick(h, j, t);
    }
    return t;
}

static void finish_clean(Job *j, ViewHeadless *h, int64_t *t)
{
    Msg m;
    for (int r = 0; r < j->world; r++) {
        msg_init(&m, MSG_PHASE);
        m.u.phase.phase = PHASE_DESTROYED;
        apply(j, &m, r, *t += MS);
        msg_init(&m, MSG_BYE);
        apply(j, &m, r, *t += MS);
        job_rank_exited(j, r, 2000 + r, W_EXITCODE(0, 0), NULL, *t += MS, WALL);
    }
    view_headless_tick(h, j, *t);
}

static void test_text_progress_and_events(void)
{
    TEST_BEGIN("headless_text_progress_events_summary");
    FILE *f = tmpfile();
    Job *j = job_new(2, T0);
    ViewHeadless h;
    view_headless_init(&h, f, false);
    int64_t t = scripted_job(j, &h, 30);
    finish_clean(j, &h, &t);
    view_headless_summary(&h, j, t);
    const char *out = slurp(f);

    /* 3 s of training ticked every 100 ms: one progress line per second */
    int progress = count_lines_with(out, "[", "] epoch 0 step ");
    CHECK(progress >= 3 && progress <= 4, "%d progress lines, want 3-4:\n%s", progress, out);
    const char *l = line_with(out, "step 21/100");
    const char *want = "[   2.1s] epoch 0 step 21/100  loss 0.7950 (r0 0.79 r1 0.80)  ";
    CHECK(strncmp(l, want, strlen(want)) == 0, "progress line: '%s'", l);
    CHECK(strstr(l, " samples/s  allreduce 1.2 ms  drops 0") != NULL, "progress tail: '%s'", l);
    double rate = 0;
    const char *sp = strstr(l, ")  ");
    if (sp) rate = atof(sp + 3);
    CHECK(fabs(rate - 1280) < 80, "samples/s %.0f in '%s', want ~1280", rate, l);

    CHECK(count_lines_with(out, "[   0.0s] r1 rank 1 hello pid 2001 on box (cpu, gloo)", NULL) == 1,
          "hello event line:\n%s", out);
    CHECK(strstr(out, "[   0.0s] r0 rank 0: train\n") != NULL, "phase event line:\n%s", out);
    CHECK(count_lines_with(out, "rank 0: exit 0, step 30, loss 0.7000, phase destroyed", NULL) == 1,
          "rank 0 summary line:\n%s", out);
    CHECK(count_lines_with(out, "rank 1: exit 0, step 30, loss 0.7100, phase destroyed", NULL) == 1,
          "rank 1 summary line:\n%s", out);
    size_t n = strlen(out);
    CHECK(n > 40 && strcmp(out + n - strlen("job done: all 2 ranks ended cleanly\n"),
                           "job done: all 2 ranks ended cleanly\n") == 0,
          "last line is not the verdict:\n%s", out);
    /* no progress after the job is over; events are not printed twice */
    CHECK(count_lines_with(out, NULL, "ended: exit 0") == 2, "exit events printed %d times",
          count_lines_with(out, NULL, "ended: exit 0"));
    job_free(&j);
    fclose(f);
    TEST_END();
}

static void test_text_failed_and_sanitised(void)
{
    TEST_BEGIN("headless_text_failure_verdict");
    FILE *f = tmpfile();
    Job *j = job_new(2, T0);
    ViewHeadless h;
    view_headless_init(&h, f, false);
    int64_t t = scripted_job(j, &h, 57);
    Msg m;
    msg_init(&m, MSG_LOG);
    snprintf(m.u.log.level, sizeof m.u.log.level, "warn");
    snprintf(m.u.log.text, sizeof m.u.log.text, "two\nlines\x1b[2J bad\xff");
    apply(j, &m, 1, t += MS);
    job_event(j, t, WALL, -1, EV_INFO, "sending SIGKILL to rank 1");
    job_rank_exited(j, 1, 2001, W_EXITCODE(0, SIGKILL), NULL, t += MS, WALL);
    view_headless_tick(&h, j, t);
    job_rank_exited(j, 0, 2000, W_EXITCODE(1, 0), NULL, t += MS, WALL);
    view_headless_summary(&h, j, t);
    const char *out = slurp(f);
    CHECK(strstr(out, "rank 0 (pid 2000) ended") == NULL, "the summary printed pending events:\n%s", out);
    CHECK(count_lines_with(out, "[", "] r1 warning: two lines?[2J bad?") == 1, "log line not one clean line:\n%s", out);
    CHECK(strchr(out, '\x1b') == NULL, "escape byte reached the output");
    CHECK(count_lines_with(out, "[", "] ddptop sending SIGKILL to rank 1") == 1, "ddptop's own event:\n%s", out);
    CHECK(count_lines_with(out, "[", "] r1 error: rank 1 (pid 2001) ended: signal 9 (Killed) at step 57") == 1,
          "exit event line:\n%s", out);
    CHECK(count_lines_with(out, "rank 1: signal 9 (Killed), step 57, loss", NULL) == 1, "rank 1 summary:\n%s", out);
    CHECK(count_lines_with(out, "job failed: rank 1 signal 9 (Killed) at step 57", NULL) == 1, "verdict:\n%s", out);
    job_free(&j);
    fclose(f);
    TEST_END();
}

static void test_text_many_ranks(void)
{
    TEST_BEGIN("headless_many_ranks_min_max");
    FILE *f = tmpfile();
    Job *j = job_new(8, T0);
    ViewHeadless h;
    view_headless_init(&h, f, false);
    scripted_job(j, &h, 12);
    const char *out = slurp(f);
    const char *l = line_with(out, "step 11/100");
    CHECK(strstr(l, "loss 0.9250 (min r0 0.89, max r7 0.96)  ") != NULL, "min/max form: '%s'", l);
    CHECK(strstr(l, "r3 ") == NULL, "lists every rank: '%s'", l);
    job_free(&j);
    fclose(f);
    TEST_END();
}

/* A cheap structural check of one JSON line: balanced braces and brackets
 * outside strings, only known escapes, no raw control characters. */
static bool json_line_ok(const char *s, size_t len)
{
    int depth = 0;
    bool in_str = false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20) return false;
        if (in_str) {
            if (c == '\\') {
                i++;
                if (i >= len || !strchr("\"\\/bfnrtu", s[i])) return false;
            } else if (c == '"') {
                in_str = false;
            }
            continue;
        }
        if (c == '"')
            in_str = true;
        else if (c == '{' || c == '[')
            depth++;
        else if (c == '}' || c == ']')
            depth--;
        if (depth < 0) return false;
    }
    return depth == 0 && !in_str && len > 1 && s[0] == '{' && s[len - 1] == '}';
}

static void test_json(void)
{
    TEST_BEGIN("headless_json_lines_and_escaping");
    FILE *f = tmpfile();
    Job *j = job_new(2, T0);
    ViewHeadless h;
    view_headless_init(&h, f, true);
    int64_t t = scripted_job(j, &h, 15);
    Msg m;
    msg_init(&m, MSG_LOG);
    snprintf(m.u.log.level, sizeof m.u.log.level, "error");
    snprintf(m.u.log.text, sizeof m.u.log.text, "he said \"hi\"\nback\\slash\ttab\x01 caf\xc3\xa9 bad\xff!");
    apply(j, &m, 1, t += MS);
    msg_init(&m, MSG_STEP); /* a diverged loss */
    m.u.step.step = 16;
    m.u.step.loss = NAN;
    apply(j, &m, 0, t += 2 * SEC);
    view_headless_tick(&h, j, t);
    finish_clean(j, &h, &t);
    view_headless_summary(&h, j, t);
    const char *out = slurp(f);

    int lines = 0, bad = 0;
    for (const char *p = out; *p;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        lines++;
        if (!json_line_ok(p, len)) {
            bad++;
            printf("  bad JSON line: %.*s\n", (int)len, p);
        }
        p += len + (e ? 1 : 0);
    }
    CHECK(lines > 5 && bad == 0, "%d of %d lines are not JSON objects", bad, lines);
    const char *l = line_with(out, "he said");
    CHECK(strstr(l, "\"k\":\"event\"") && strstr(l, "\"r\":1,\"level\":\"error\"") &&
              strstr(l, "\"text\":\"he said \\\"hi\\\"\\nback\\\\slash\\ttab\\u0001 caf\xc3\xa9 bad\\ufffd!\"}"),
          "escaped event: %s", l);
    l = line_with(out, "\"k\":\"progress\"");
    CHECK(strncmp(l, "{\"k\":\"progress\",\"t\":", 20) == 0 && strstr(l, "\"epoch\":0,\"step\":") &&
              strstr(l, "\"loss\":[0.") && strstr(l, "\"samples_per_s\":") && strstr(l, "\"drops\":0"),
          "progress object: %s", l);
    CHECK(count_lines_with(out, NULL, "\"loss\":[null,") >= 1, "NaN loss is not null:\n%s", out);
    CHECK(strstr(out, "nan") == NULL && strstr(out, "NaN") == NULL, "NaN leaked into JSON");
    CHECK(strstr(out, "\"text\":\"rank 0 hello pid 2000 on box (cpu, gloo)\"") != NULL, "hello event:\n%s", out);
    l = line_with(out, "\"k\":\"summary\"");
    CHECK(strstr(l, "\"ok\":true") && strstr(l, "\"verdict\":\"job done: all 2 ranks ended cleanly\"") &&
              strstr(l, "{\"r\":1,\"state\":\"exited\",\"how\":\"exit 0\",\"step\":15,"),
          "summary: %s", l);
    job_free(&j);
    fclose(f);
    TEST_END();
}

static void test_json_failed_summary(void)
{
    TEST_BEGIN("headless_json_failed_summary");
    FILE *f = tmpfile();
    Job *j = job_new(2, T0);
    ViewHeadless h;
    view_headless_init(&h, f, true);
    int64_t t = scripted_job(j, &h, 5);
    job_rank_exited(j, 0, 2000, W_EXITCODE(0, 0), NULL, t += MS, WALL); /* no bye */
    job_rank_exited(j, 1, 2001, W_EXITCODE(0, SIGTERM), "SIGTERM by ddptop", t += MS, WALL);
    view_headless_summary(&h, j, t);
    const char *l = line_with(slurp(f), "\"k\":\"summary\"");
    CHECK(strstr(l, "\"state\":\"FAILED\",\"ok\":false") && strstr(l, "\"how\":\"exit 0 without bye\"") &&
              strstr(l, "\"verdict\":\"job failed: rank 0 exit 0 without bye at step 5; rank 1 was stopped by ddptop "
                        "(SIGTERM)\""),
          "failed summary: %s", l);
    job_free(&j);
    fclose(f);
    TEST_END();
}

static void test_events_lost(void)
{
    TEST_BEGIN("headless_reports_lost_events");
    FILE *f = tmpfile();
    Job *j = job_new(1, T0);
    ViewHeadless h;
    view_headless_init(&h, f, false);
    for (int i = 0; i < JOB_EVENTS + 10; i++) job_event(j, j->start_ns, WALL, 0, EV_INFO, "e%d", i);
    view_headless_tick(&h, j, j->start_ns);
    const char *out = slurp(f);
    CHECK(count_lines_with(out, "[", "ddptop 10 events lost") == 1, "lost-events line:\n%.300s", out);
    CHECK(count_lines_with(out, "[", "] r0 e") == JOB_EVENTS, "%d event lines", count_lines_with(out, "[", "] r0 e"));
    CHECK(strstr(out, "] r0 e9\n") == NULL && strstr(out, "] r0 e10\n"), "wrong events kept");
    CHECK(h.ev_printed == j->ev_total, "ev_printed %llu", (unsigned long long)h.ev_printed);
    job_free(&j);
    fclose(f);
    TEST_END();
}

static void test_evals_printed(void)
{
    TEST_BEGIN("headless_prints_evals_once");
    for (int json = 0; json <= 1; json++) {
        FILE *f = tmpfile();
        Job *j = job_new(2, T0);
        ViewHeadless h;
        view_headless_init(&h, f, json);
        int64_t t = scripted_job(j, &h, 3);
        Msg m;
        for (int r = 0; r < 2; r++) { /* every rank sends the same eval */
            msg_init(&m, MSG_EVAL);
            m.u.eval.epoch = 0;
            m.u.eval.step = 3;
            m.u.eval.accuracy = 0.8125;
            m.u.eval.loss = 0.5;
            m.u.eval.correct = 8125;
            m.u.eval.total = 10000;
            apply(j, &m, r, t += MS);
        }
        view_headless_tick(&h, j, t);
        view_headless_tick(&h, j, t + MS);
        const char *out = slurp(f);
        if (json)
            CHECK(count_lines_with(out, "{\"k\":\"eval\"",
                                   "\"epoch\":0,\"step\":3,\"accuracy\":0.8125,\"loss\":0.5,"
                                   "\"correct\":8125,\"total\":10000}") == 1,
                  "JSON eval line:\n%s", out);
        else
            CHECK(count_lines_with(out, "[",
                                   "eval after epoch 0 (step 3): accuracy 81.25% (8125/10000), loss 0.5000") == 1,
                  "text eval line:\n%s", out);
        job_free(&j);
        fclose(f);
    }
    TEST_END();
}

/* A viewer that leaves mid-run prints a summary: rank 1's burst of steps
 * 691..702 is still on its way, rank 0's has come; the summary shows both
 * within a step of each other, not 702 and 690. */
static void test_summary_mid_run(void)
{
    TEST_BEGIN("summary_mid_run_is_not_a_burst");
    Job *j = job_new(2, T0);
    FILE *f = tmpfile();
    ViewHeadless h;
    view_headless_init(&h, f, true);
    int64_t t = scripted_job(j, &h, 690);
    Msg m;
    for (int s = 691; s <= 702; s++) {
        msg_init(&m, MSG_STEP);
        m.u.step.step = s;
        m.u.step.samples = 64LL * s;
        apply(j, &m, 0, t += MS);
    }
    view_headless_summary(&h, j, t + 20 * MS);
    const char *out = slurp(f);
    CHECK(strstr(out, "{\"r\":0,\"state\":\"alive\",\"how\":\"still running\",\"step\":702") &&
              strstr(out, "{\"r\":1,\"state\":\"alive\",\"how\":\"still running\",\"step\":701"),
          "summary:\n%s", line_with(out, "\"k\":\"summary\""));
    CHECK(strstr(out, "\"step\":701,\"epoch\":0,\"ckpts\""), "the job's agreed step:\n%s",
          line_with(out, "\"k\":\"summary\""));
    fclose(f);
    job_free(&j);
    TEST_END();
}

int main(void)
{
    test_text_progress_and_events();
    test_text_failed_and_sanitised();
    test_text_many_ranks();
    test_json();
    test_json_failed_summary();
    test_events_lost();
    test_evals_printed();
    test_summary_mid_run();
    CHECK_EXIT();
}
