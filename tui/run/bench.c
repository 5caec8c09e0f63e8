/* bench.c — step-to-screen measurement. See bench.h.
 *
 * Each step message's arrival is remembered until the next frame reaches
 * the terminal; then arrival->screen and send->screen ("t" of the message,
 * the worker's wall clock, same host) go into 0.1 ms histograms. CPU is
 * getrusage(RUSAGE_SELF) over the window. Main thread.
 */
#include "base/clock.h"
#include "base/err.h"
#include "base/json.h"
#include "run/bench.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define BINS    50000 /* 0.1 ms each: up to 5 s */
#define PENDING (1 << 16)

struct Bench {
    char path[512];
    int world;
    int64_t warmup_ns, window_ns;
    int64_t t0; /* monotonic start of the run */
    bool measuring, written;
    int64_t w_start; /* monotonic start of the window */
    double cpu_start;
    int64_t arr[PENDING], sent[PENDING];
    int pending;
    uint64_t overflow;
    uint32_t *h_arr, *h_sent;
    uint64_t steps, msgs, frames, gaps;
    int64_t *last_step; /* [world] for gaps */
    double max_arr, max_sent, draw_sum, draw_max;
    int64_t last_frame;            /* monotonic end of the previous frame */
    double gap_max;                /* longest time between two frames, ms */
    uint64_t slow_gaps;            /* frame gaps over 100 ms */
    uint64_t drops0;               /* job drops when the window opened */
    int64_t stall_at_ns, stall_ns; /* DDPTOP_BENCH_STALL (0: none, or done) */
};

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

/* Resident memory now (VmRSS), kB; 0 when /proc cannot say. */
static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, rss = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2) rss = 0;
        fclose(f);
    }
    return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

static double env_s(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? strtod(v, NULL) : 0;
}

int bench_from_env(int world, Bench **out, char *err, size_t errlen)
{
    const char *path = getenv("DDPTOP_BENCH_OUT");
    *out = NULL;
    if (!path || !*path) return ERR_OK;
    Bench *b = calloc(1, sizeof *b);
    if (b) {
        b->h_arr = calloc(BINS, sizeof *b->h_arr);
        b->h_sent = calloc(BINS, sizeof *b->h_sent);
        b->last_step = calloc((size_t)world, sizeof *b->last_step);
    }
    if (!b || !b->h_arr || !b->h_sent || !b->last_step) {
        bench_free(&b);
        return err_set(err, errlen, "bench: out of memory");
    }
    snprintf(b->path, sizeof b->path, "%s", path);
    b->world = world;
    b->warmup_ns = (int64_t)(env_s("DDPTOP_BENCH_WARMUP") * 1e9);
    b->window_ns = (int64_t)(env_s("DDPTOP_BENCH_SECS") * 1e9);
    b->t0 = mono_ns();
    const char *stall = getenv("DDPTOP_BENCH_STALL");
    double at, secs;
    char end;
    if (stall && *stall) {
        if (sscanf(stall, "%lf:%lf%c", &at, &secs, &end) != 2 || !(at >= 0) || !(secs > 0) || secs > 3600) {
            bench_free(&b);
            return err_setv(ERR_USAGE, err, errlen, "DDPTOP_BENCH_STALL=\"%.40s\": expected AT_SECONDS:SECONDS", stall);
        }
        b->stall_at_ns = (int64_t)(at * 1e9);
        b->stall_ns = (int64_t)(secs * 1e9);
    }
    *out = b;
    return ERR_OK;
}

void bench_tick(Bench *b)
{
    if (!b || !b->stall_ns || mono_ns() - b->t0 < b->stall_at_ns) return;
    struct timespec ts = { (time_t)(b->stall_ns / 1000000000), (long)(b->stall_ns % 1000000000) };
    while (nanosleep(&ts, &ts) && errno == EINTR) {}
    b->stall_ns = 0;
}

static void open_window(Bench *b, const Job *j, int64_t now)
{
    b->measuring = true;
    b->w_start = now;
    b->cpu_start = cpu_s();
    b->drops0 = j ? j->drops : 0;
}

void bench_on_msg(Bench *b, const Msg *m, int64_t arrived_ns)
{
    if (!b || b->written) return;
    if (m->kind == MSG_STEP && m->rank >= 0 && m->rank < b->world) {
        /* a step number skipped is a step lost on the way (or dropped) */
        int64_t *last = &b->last_step[m->rank];
        if (b->measuring && *last > 0 && m->u.step.step > *last + 1) b->gaps += (uint64_t)(m->u.step.step - *last - 1);
        if (m->u.step.step > *last) *last = m->u.step.step;
    }
    if (!b->measuring) return;
    b->msgs++;
    if (m->kind != MSG_STEP) return;
    b->steps++;
    if (b->pending == PENDING) {
        b->overflow++;
        return;
    }
    b->arr[b->pending] = arrived_ns;
    b->sent[b->pending] = m->t_ns;
    b->pending++;
}

static void hist_add(uint32_t *h, double ms)
{
    int bin = ms < 0 ? 0 : (int)(ms * 10);
    h[bin < BINS ? bin : BINS - 1]++;
}

static double pct(const uint32_t *h, double p)
{
    uint64_t total = 0, acc = 0;
    for (int i = 0; i < BINS; i++) total += h[i];
    if (total == 0) return 0;
    uint64_t want = (uint64_t)((double)total * p / 100.0 + 0.5);
    if (want < 1) want = 1;
    for (int i = 0; i < BINS; i++) {
        acc += h[i];
        if (acc >= want) return (i + 1) / 10.0; /* the bin's upper edge: never flattering */
    }
    return BINS / 10.0;
}

/* Percentiles of one histogram and its maximum, as an object. */
static void put_latency(Json *w, const char *key, const uint32_t *h, double max)
{
    json_key(w, key);
    json_obj(w);
    json_kv_fixed(w, "p50", pct(h, 50), 1);
    json_kv_fixed(w, "p99", pct(h, 99), 1);
    json_kv_fixed(w, "max", max, 1);
    json_obj_end(w);
}

static void write_result(Bench *b, const Job *j, int64_t now)
{
    b->written = true;
    double wall = b->measuring ? (double)(now - b->w_start) / 1e9 : 0;
    double cpu = b->measuring ? cpu_s() - b->cpu_start : 0;
    FILE *f = fopen(b->path, "w");
    if (!f) return;
    /* spaced as json.dumps writes it: scripts and people both read it */
    Json w;
    json_init_file(&w, f);
    w.spaced = true;
    json_obj(&w);
    json_kv_fixed(&w, "window_s", wall, 3);
    json_kv_fixed(&w, "cpu_s", cpu, 3);
    json_kv_fixed(&w, "cpu_pct_of_one_core", wall > 0 ? 100.0 * cpu / wall : 0.0, 2);
    json_kv_uint(&w, "msgs", b->msgs);
    json_kv_fixed(&w, "cpu_us_per_msg", b->msgs ? 1e6 * cpu / (double)b->msgs : 0.0, 3);
    json_kv_int(&w, "rss_kb", rss_kb());
    json_kv_uint(&w, "steps", b->steps);
    json_kv_fixed(&w, "steps_per_s", wall > 0 ? (double)b->steps / wall : 0.0, 1);
    json_kv_uint(&w, "frames", b->frames);
    json_kv_fixed(&w, "fps", wall > 0 ? (double)b->frames / wall : 0.0, 1);
    json_kv_fixed(&w, "draw_ms_mean", b->frames ? b->draw_sum / (double)b->frames : 0.0, 3);
    json_kv_fixed(&w, "draw_ms_max", b->draw_max, 3);
    json_kv_fixed(&w, "frame_gap_ms_max", b->gap_max, 1);
    json_kv_uint(&w, "frame_gaps_over_100ms", b->slow_gaps);
    put_latency(&w, "arrival_to_screen_ms", b->h_arr, b->max_arr);
    put_latency(&w, "send_to_screen_ms", b->h_sent, b->max_sent);
    json_kv_uint(&w, "step_gaps", b->gaps);
    json_kv_uint(&w, "worker_drops", j->drops - b->drops0);
    json_kv_uint(&w, "bad_frames", j->bad_frames);
    json_kv_uint(&w, "pending_overflow", b->overflow);
    json_kv_int(&w, "world", b->world);
    json_obj_end(&w);
    json_text(&w, "\n");
    fclose(f);
}

void bench_on_frame(Bench *b, int64_t draw_start_ns, const Job *j)
{
    if (!b || b->written) return;
    int64_t now = mono_ns();
    if (!b->measuring) {
        if (now - b->t0 >= b->warmup_ns) open_window(b, j, now);
        b->pending = 0; /* steps from the warm-up do not count */
        return;
    }
    int64_t wall = wall_ns();
    double dms = (double)(now - draw_start_ns) / 1e6;
    if (b->last_frame > 0) {
        double gap = (double)(now - b->last_frame) / 1e6;
        if (gap > b->gap_max) b->gap_max = gap;
        b->slow_gaps += gap > 100;
    }
    b->last_frame = now;
    b->frames++;
    b->draw_sum += dms;
    if (dms > b->draw_max) b->draw_max = dms;
    for (int i = 0; i < b->pending; i++) {
        double a = (double)(now - b->arr[i]) / 1e6;
        hist_add(b->h_arr, a);
        if (a > b->max_arr) b->max_arr = a;
        if (b->sent[i] > 0) {
            double s = (double)(wall - b->sent[i]) / 1e6;
            hist_add(b->h_sent, s);
            if (s > b->max_sent) b->max_sent = s;
        }
    }
    b->pending = 0;
    if (b->window_ns > 0 && now - b->w_start >= b->window_ns) write_result(b, j, now);
}

void bench_finish(Bench *b, const Job *j)
{
    if (b && !b->written) write_result(b, j, mono_ns());
}

void bench_free(Bench **pb)
{
    if (!pb || !*pb) return;
    free((*pb)->h_arr);
    free((*pb)->h_sent);
    free((*pb)->last_step);
    free(*pb);
    *pb = NULL;
}
