/* bench_frame.c — what a frame of the ncurses screen costs: a Job of N ranks
 * fed the messages tool_load.c's simulated ranks send (a hello each, phase
 * train, per step a coll per bucket and a step, a beat a second, on the
 * worker's 50 ms flushes), drawn through the real view (view_tui_draw_at)
 * on a pseudo-terminal of COLSxROWS with TERM=xterm-256color in C.UTF-8
 * (--term, --locale; --mono 1: NO_COLOR), a
 * frame every 100 ms of the job's time (ddptop's pace), every rank a few
 * steps further each frame. `make bench-frame` runs it at 64, 256 and 1024
 * ranks, natively and under callgrind (tests/bench_frame.sh;
 * docs/BENCHMARKS.md).
 *
 *   bench_frame [--ranks N] [--frames K] [--warmup-s S] [--cols C] [--rows R]
 *               [--rate STEPS_PER_S] [--buckets B] [--tty-out FILE] [--marks 0|1]
 *               [--term TERM] [--locale LOCALE] [--mono 0|1]
 *
 * Every clock is the job's own (no clock is read but the CPU time), so two
 * runs, or two builds, draw the same frames: callgrind's counts repeat, and
 * the bytes written to the terminal (counted and hashed by a child reading
 * the pty) must be the same for a build that only made drawing cheaper.
 * The measured frames go through bench_frame_draw (callgrind's
 * --toggle-collect); the warm-up and the first (full) frame do not.
 * Prints one line: frames, CPU per frame (process CPU time, noisy), the
 * terminal's bytes and their FNV-1a hash (--tty-out: the bytes themselves,
 * e.g. for `cat` in a terminal of that size; --marks 1 ends each measured
 * frame's bytes with an OSC that sets the window title, so a copy can be
 * cut into frames: tests/bench_frame_screens.py compares two builds' copies
 * screen by screen). Bad options: one line, exit 2.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "model/job.h"
#include "screen/draw.h"
#include "view/view.h"
#include "wire/protocol.h"

#define MS       1000000LL
#define SEC      1000000000LL
#define FLUSH_NS (50 * MS)
#define T0_MONO  (1000 * SEC)
#define T0_WALL  (1764720000LL * SEC) /* 2025-12-03 00:00 UTC: events' times */

static struct {
    int world, frames, cols, rows, buckets;
    double warmup_s, rate;
    const char *tty_out; /* a copy of the terminal's bytes */
    bool marks;          /* a title-setting OSC after each frame: where to cut the copy */
    const char *term, *locale;
    bool mono;
} B = { .world = 64,
        .frames = 50,
        .cols = 200,
        .rows = 60,
        .buckets = 1,
        .warmup_s = 3,
        .rate = 100,
        .term = "xterm-256color",
        .locale = "C.UTF-8" };

static struct {
    Job *j;
    int64_t step;      /* steps every rank has sent */
    int64_t seq;       /* collectives every rank has sent */
    int64_t flush;     /* flushes done */
    int64_t next_beat; /* job time of the next beats, ns */
} S;

static int usage(const char *what)
{
    fprintf(stderr,
            "bench_frame: %s (usage: bench_frame [--ranks N] [--frames K] [--warmup-s S] [--cols C] [--rows R] "
            "[--rate STEPS_PER_S] [--buckets B] [--tty-out FILE] [--marks 0|1] [--term TERM] [--locale LOCALE] "
            "[--mono 0|1])\n",
            what);
    return 2;
}

static bool num(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = s ? strtod(s, &end) : 0;
    if (!s || !*s || *end || errno || !(v >= lo && v <= hi)) return false;
    *out = v;
    return true;
}

static void apply(Msg *m, int rank, int64_t at)
{
    m->rank = rank;
    if (!m->t_ns) m->t_ns = T0_WALL + (at - T0_MONO);
    job_apply(S.j, m, at, T0_WALL + (at - T0_MONO));
}

/* What tool_load's rank r sends for step s (stamped at t, job time),
 * arriving at `at`. */
static void step_msgs(int r, int64_t s, int64_t seq0, int64_t t, int64_t at)
{
    int64_t wall = T0_WALL + (t - T0_MONO);
    Msg m;
    for (int b = 0; b < B.buckets; b++) {
        msg_init(&m, MSG_COLL);
        m.t_ns = wall;
        MsgColl *c = &m.u.coll;
        c->seq = seq0 + b + 1;
        snprintf(c->op, sizeof c->op, "allreduce");
        c->bucket = b;
        c->step = s;
        c->bytes = 1 << 20;
        c->enq_ns = wall - 3 * MS;
        c->start_ns = wall - 5 * MS / 2;
        c->done_ns = wall - MS / 2;
        c->algbw_gbs = (double)c->bytes / 2e6;
        c->busbw_gbs = c->algbw_gbs * 2.0 * (B.world - 1) / B.world;
        apply(&m, r, at);
    }
    msg_init(&m, MSG_STEP);
    m.t_ns = wall;
    MsgStep *st = &m.u.step;
    st->epoch = (s - 1) / 1000;
    st->step = s;
    st->loss = 0.3 + 2.0 * exp(-(double)s / 3000.0) + 0.001 * (r % 7);
    st->lr = 1e-3;
    st->samples = s * 64;
    st->step_ms = 1000.0 / B.rate * 0.9;
    st->fwd_ms = st->step_ms * 0.3;
    st->bwd_ms = st->step_ms * 0.5;
    st->opt_ms = st->step_ms * 0.05;
    st->comm_ms = 2.0;
    st->exposed_ms = 0.5;
    apply(&m, r, at);
}

/* One 50 ms flush: every rank's steps of the last 50 ms (and a beat once a
 * second) arrive at the flush's mark, rank after rank, 2 us apart. */
static void flush_all(void)
{
    S.flush++;
    int64_t mark = T0_MONO + S.flush * FLUSH_NS;
    int64_t upto = (int64_t)((double)(S.flush * FLUSH_NS) / 1e9 * B.rate);
    bool beat = mark >= S.next_beat;
    for (int r = 0; r < B.world; r++) {
        int64_t at = mark + r * 2000;
        for (int64_t s = S.step + 1; s <= upto; s++)
            step_msgs(r, s, S.seq + (s - S.step - 1) * B.buckets, T0_MONO + (int64_t)((double)s / B.rate * 1e9), at);
        if (beat) {
            Msg m;
            msg_init(&m, MSG_BEAT);
            m.u.beat.step = upto;
            m.u.beat.phase = PHASE_TRAIN;
            apply(&m, r, at);
        }
    }
    if (beat) S.next_beat += SEC;
    S.seq += (upto - S.step) * B.buckets;
    S.step = upto;
}

static void start_job(void)
{
    S.j = job_new(B.world, T0_MONO);
    if (!S.j) exit(1);
    S.next_beat = T0_MONO + SEC;
    for (int r = 0; r < B.world; r++) {
        Msg m;
        msg_init(&m, MSG_HELLO);
        MsgHello *h = &m.u.hello;
        h->local_rank = r;
        h->world = B.world;
        h->local_world = B.world;
        h->pid = 40000 + r / 32; /* tool_load: a process holds many ranks */
        snprintf(h->host, sizeof h->host, "bench-host");
        snprintf(h->device, sizeof h->device, "cpu");
        snprintf(h->backend, sizeof h->backend, "gloo");
        snprintf(h->version, sizeof h->version, "tool_load (burst wire)");
        snprintf(h->dataset, sizeof h->dataset, "synthetic");
        snprintf(h->model, sizeof h->model, "mlp:784,256,10");
        h->params = 203530;
        h->batch_size = 64;
        h->steps_per_epoch = 1000;
        h->dataset_size = 64000LL * B.world;
        apply(&m, r, T0_MONO + r * 1000);
    }
    for (int r = 0; r < B.world; r++) {
        Msg m;
        msg_init(&m, MSG_PHASE);
        m.u.phase.phase = PHASE_TRAIN;
        apply(&m, r, T0_MONO + 300 * MS + r * 1000);
    }
}

/* The pty's far end: every byte ncurses writes, counted and hashed; the
 * figures go back through a pipe when the terminal closes. */
static pid_t reader(int master, int slave, int *pipe_rd)
{
    int p[2];
    if (pipe(p)) return -1;
    pid_t pid = fork();
    if (pid != 0) {
        close(p[1]);
        *pipe_rd = p[0];
        return pid;
    }
    close(p[0]);
    close(slave);
    unsigned long long n = 0, h = 1469598103934665603ULL;
    unsigned char buf[65536];
    FILE *copy = B.tty_out ? fopen(B.tty_out, "w") : NULL;
    for (;;) {
        ssize_t k = read(master, buf, sizeof buf);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break; /* EIO: every slave descriptor closed */
        if (copy) fwrite(buf, 1, (size_t)k, copy);
        for (ssize_t i = 0; i < k; i++) h = (h ^ buf[i]) * 1099511628211ULL;
        n += (unsigned long long)k;
    }
    if (copy) fclose(copy);
    char out[64];
    int len = snprintf(out, sizeof out, "%llu %016llx", n, h);
    if (write(p[1], out, (size_t)len) < 0) _exit(1);
    _exit(0);
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The frames measured: callgrind --toggle-collect=bench_frame_draw. */
__attribute__((noinline)) void bench_frame_draw(ViewTui *v, const Job *j, int64_t now_ns, int64_t wall_ns);
__attribute__((noinline)) void bench_frame_draw(ViewTui *v, const Job *j, int64_t now_ns, int64_t wall_ns)
{
    view_tui_draw_at(v, j, now_ns, wall_ns, NULL);
}

int main(int argc, char **argv)
{
    double v;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!val) return usage("an option needs a value");
        i++;
        if (!strcmp(a, "--ranks") && num(val, 1, JOB_MAX_RANKS, &v))
            B.world = (int)v;
        else if (!strcmp(a, "--frames") && num(val, 1, 100000, &v))
            B.frames = (int)v;
        else if (!strcmp(a, "--warmup-s") && num(val, 0, 3600, &v))
            B.warmup_s = v;
        else if (!strcmp(a, "--cols") && num(val, DRAW_MIN_W, 1000, &v))
            B.cols = (int)v;
        else if (!strcmp(a, "--rows") && num(val, DRAW_MIN_H, 1000, &v))
            B.rows = (int)v;
        else if (!strcmp(a, "--rate") && num(val, 10, 10000, &v))
            B.rate = v;
        else if (!strcmp(a, "--buckets") && num(val, 1, 16, &v))
            B.buckets = (int)v;
        else if (!strcmp(a, "--tty-out"))
            B.tty_out = val;
        else if (!strcmp(a, "--marks") && num(val, 0, 1, &v))
            B.marks = v > 0;
        else if (!strcmp(a, "--term"))
            B.term = val;
        else if (!strcmp(a, "--locale"))
            B.locale = val;
        else if (!strcmp(a, "--mono") && num(val, 0, 1, &v))
            B.mono = v > 0;
        else
            return usage("bad option or value");
    }
    /* the terminal of make bench-tui's tmux pane */
    setenv("TERM", B.term, 1);
    unsetenv("LINES");
    unsetenv("COLUMNS");
    if (B.mono)
        setenv("NO_COLOR", "1", 1);
    else
        unsetenv("NO_COLOR");
    setenv("TZ", "UTC", 1);
    tzset();
    if (!setlocale(LC_ALL, B.locale)) return usage("no such locale");
    setlocale(LC_NUMERIC, "C");

    int master = posix_openpt(O_RDWR | O_NOCTTY);
    if (master < 0 || grantpt(master) || unlockpt(master)) return usage("no pseudo-terminal");
    int slave = open(ptsname(master), O_RDWR | O_NOCTTY);
    struct winsize ws = { .ws_row = (unsigned short)B.rows, .ws_col = (unsigned short)B.cols };
    if (slave < 0 || ioctl(slave, TIOCSWINSZ, &ws)) return usage("no pseudo-terminal");
    int pipe_rd = -1;
    pid_t rd = reader(master, slave, &pipe_rd);
    if (rd < 0) return 1;
    close(master);
    /* the view draws on stdin/stdout when they are a terminal: the pty's */
    fflush(stdout);
    int out = dup(STDOUT_FILENO);
    FILE *report = out >= 0 ? fdopen(out, "w") : NULL;
    if (!report || dup2(slave, STDIN_FILENO) < 0 || dup2(slave, STDOUT_FILENO) < 0) return 1;
    close(slave);

    start_job();
    int64_t warm = (int64_t)(B.warmup_s * 1e9) / FLUSH_NS;
    for (int64_t f = 0; f < warm; f++) flush_all();
    ViewTui *view;
    char err[256];
    if (view_tui_open(&view, B.world, err, sizeof err)) {
        fprintf(stderr, "bench_frame: %s\n", err);
        return 1;
    }
    /* ddptop draws a frame 5-10 ms after the flush that woke it */
    int64_t now = T0_MONO + S.flush * FLUSH_NS + 8 * MS;
    view_tui_draw_at(view, S.j, now, T0_WALL + (now - T0_MONO), NULL); /* the first, full frame */
    double cpu = 0;
    for (int f = 0; f < B.frames; f++) {
        flush_all();
        flush_all();
        now = T0_MONO + S.flush * FLUSH_NS + 8 * MS;
        double c0 = cpu_s();
        bench_frame_draw(view, S.j, now, T0_WALL + (now - T0_MONO));
        cpu += cpu_s() - c0;
        /* invisible on screen: a terminal only retitles the window */
        if (B.marks && write(STDOUT_FILENO, "\033]2;bench-frame\007", 16) != 16) return 1;
    }
    view_tui_close(&view);
    fflush(stdout);
    close(STDIN_FILENO);
    close(STDOUT_FILENO);
    /* anything else still open on the pty (TERM=linux: ncurses's GPM mouse
     * keeps one) would keep the reader waiting for its end */
    for (int fd = 3; fd < 1024; fd++)
        if (fd != pipe_rd && isatty(fd)) close(fd);
    char got[64] = "";
    ssize_t k = read(pipe_rd, got, sizeof got - 1);
    got[k > 0 ? k : 0] = '\0';
    waitpid(rd, NULL, 0);
    unsigned long long bytes = 0;
    char hash[32] = "?";
    if (sscanf(got, "%llu %31s", &bytes, hash) != 2) fprintf(stderr, "bench_frame: the pty reader said nothing\n");
    fprintf(report,
            "bench_frame: %d ranks, %dx%d, %d frames (+1 full) after %.1f s at %.0f steps/s: %.1f us CPU a frame; "
            "terminal %llu bytes, fnv1a %s\n",
            B.world, B.cols, B.rows, B.frames, B.warmup_s, B.rate, cpu / B.frames * 1e6, bytes, hash);
    fclose(report);
    job_free(&S.j);
    return 0;
}
