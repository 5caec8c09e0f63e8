/* tool_load.c — a load generator: many ranks from one process, on the real
 * wire, for `make bench-tui` and screen tests at 256 and 1024 ranks.
 *
 *   tool_load CTL_ENDPOINT --ranks N [--first R] [--count K] [--rate S]
 *             [--buckets B] [--secs T] [--start UNIX_S] [--wire burst|single]
 *             [--flush spread|grid] [--tel stream|zmq] [--stall R@S]
 *
 * Ranks first..first+count-1 of a world of N (default all of them) each get
 * their own ctl DEALER (routing id "rank-R", a hello claiming this process,
 * as ddptop's trust checks demand on ipc) and their own tel PUSH (as a
 * worker has: the frontend receives from one connection per rank). Point it
 * at `ddptop listen ipc://DIR/ctl` (tel at DIR/tel). Every rank steps S
 * times a second on a shared schedule (the ranks of a DDP job step
 * together; --start gives several processes the same time 0, wall clock,
 * default now), each step a `coll` per bucket (B, default 1) and a `step`, a
 * `beat` a second; a rank's telemetry leaves every 50 ms:
 *   --flush grid    every rank at the same 50 ms marks of the wall clock, as
 *                   the worker flushes (workers/link/uplink.c; default)
 *   --flush spread  the ranks' flushes spread over those 50 ms (ranks out of
 *                   step, or clocks apart): the frontend's worst case
 *   --wire burst   one burst frame per rank and flush (today's worker)
 *   --wire single  one frame per message, all handed to ZeroMQ at the flush
 *                  (the worker before bursts), for the side-by-side figure
 *   --tel stream   telemetry over ddptop's telemetry stream (net/tstream.h)
 *                  where it offers one, as the worker sends (default)
 *   --tel zmq      over ZeroMQ's tel PUSH (the worker before the stream)
 * A full queue drops and counts, as a worker does (step.drops). What ddptop
 * sends down a rank's stream (a ping a second) is read once a second.
 * --stall R@S: from S seconds (after time 0) on rank R stops stepping outside any
 * collective while the others wait inside the next all-reduce (their beats
 * say so): a hang ddptop must pin on rank R.
 * After T seconds (default: until SIGINT/SIGTERM or a stop from ddptop)
 * every rank sends phase destroyed and bye 0, and the tool exits 0; it
 * prints "load: ranks A-B, M messages, F frames, D dropped".
 * Bad options: one line, exit 2. Single-threaded.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "base/clock.h"
#include "net/curve.h"
#include "net/tstream.h"
#include "net/zsock.h"
#include "wire/codec.h"
#include "wire/protocol.h"

#define FLUSH_MS    50
#define MAX_BUCKETS 16
#define MAX_RANKS   4096

typedef struct {
    int r;
    void *ctl, *tel;
    TStream *ts; /* the telemetry stream (--tel stream), else tel */
    CodecBuf out;   /* burst: the burst being built; single: [u32 len][frame]... */
    uint32_t n_out; /* messages waiting */
    int64_t next_flush_ns;
    int64_t step; /* last step sent */
    int64_t seq;  /* last collective sent */
    uint64_t drops;
    bool stop; /* ddptop asked for a stop */
} Rank;

static struct {
    int world, first, count, buckets;
    double rate, secs, start_s;
    bool single;
    bool spread;
    bool zmq_tel;
    int stall_rank;
    double stall_s;
    void *zctx;
    Rank *rk;
    CodecBuf buf;
    uint64_t msgs, frames, drops;
} L = { .buckets = 1, .rate = 100, .stall_rank = -1 };

static volatile sig_atomic_t stop_sig;
static void on_stop(int sig) { stop_sig = sig; }

static int usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "tool_load: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (usage: tool_load CTL_ENDPOINT --ranks N [--first R] [--count K] [--rate S] [--buckets B] "
                    "[--secs T] [--start UNIX_S] [--wire burst|single] [--flush spread|grid] [--tel stream|zmq] "
                    "[--stall R@S])\n");
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

/* Queue one message of rank k (stamped now) for its next flush. */
static void queue(Rank *k, Msg *m)
{
    char err[160];
    m->rank = k->r;
    if (!m->t_ns) m->t_ns = proto_now_ns();
    if (codec_encode(m, &L.buf, err, sizeof err)) {
        fprintf(stderr, "tool_load: encode: %s\n", err);
        exit(1);
    }
    L.msgs++;
    if (!L.single) {
        if (!k->n_out && codec_burst_begin(&k->out, k->r, err, sizeof err)) exit(1);
        if (codec_burst_add(&k->out, L.buf.data, L.buf.len, err, sizeof err)) {
            k->drops++; /* a full burst (never at these rates) */
            return;
        }
    } else {
        uint32_t n = (uint32_t)L.buf.len;
        if (k->out.cap < k->out.len + 4 + n) {
            size_t cap = k->out.cap ? k->out.cap * 2 : 8192;
            while (cap < k->out.len + 4 + n) cap *= 2;
            k->out.data = realloc(k->out.data, cap);
            if (!k->out.data) exit(1);
            k->out.cap = cap;
        }
        memcpy(k->out.data + k->out.len, &n, 4);
        memcpy(k->out.data + k->out.len + 4, L.buf.data, n);
        k->out.len += 4 + n;
    }
    k->n_out++;
}

static bool send_tel(Rank *k, const void *p, size_t n)
{
    if (k->ts) {
        if (tsc_send(k->ts, p, n)) return false;
        L.frames++;
        return true;
    }
    for (;;) {
        if (zmq_send(k->tel, p, n, ZMQ_DONTWAIT) >= 0) {
            L.frames++;
            return true;
        }
        if (errno != EINTR) return false;
    }
}

static void flush(Rank *k)
{
    if (k->ts) tsc_flush(k->ts); /* what the stream did not take at the last flush */
    if (!k->n_out) return;
    if (!L.single) {
        codec_burst_finish(&k->out, proto_now_ns());
        if (!send_tel(k, k->out.data, k->out.len)) k->drops += k->n_out;
    } else {
        for (size_t at = 0; at + 4 <= k->out.len;) {
            uint32_t n;
            memcpy(&n, k->out.data + at, 4);
            if (!send_tel(k, k->out.data + at + 4, n)) k->drops++;
            at += 4 + n;
        }
    }
    codec_buf_reset(&k->out);
    k->n_out = 0;
}

/* A frame ddptop sent down a rank's stream (its pings): read and dropped,
 * as a worker reads them; a stop there ends the run too. */
static void on_down(void *ctx, const uint8_t *frame, size_t len)
{
    Rank *k = ctx;
    Msg m;
    char err[160];
    if (codec_decode(frame, len, &m, err, sizeof err) == 0 && m.kind == MSG_CMD && !strcmp(m.u.cmd.op, "stop"))
        k->stop = true;
    msg_done(&m);
}

/* Commands from ddptop: a stop ends the run; pings need no answer. */
static void read_ctl(Rank *k)
{
    char err[160];
    Msg m;
    while (zs_recv(k->ctl, &m, ZMQ_DONTWAIT, err, sizeof err) == 0) {
        if (m.kind == MSG_CMD && !strcmp(m.u.cmd.op, "stop")) k->stop = true;
        msg_done(&m);
    }
}

static void send_ctl(Rank *k, Msg *m)
{
    char err[160];
    m->rank = k->r;
    m->t_ns = proto_now_ns();
    if (zs_send(k->ctl, m, &L.buf, 0, err, sizeof err)) fprintf(stderr, "tool_load: rank %d: %s\n", k->r, err);
}

static void step_msgs(Rank *k, int64_t t_ns)
{
    int64_t s = ++k->step;
    for (int b = 0; b < L.buckets; b++) {
        Msg c;
        msg_init(&c, MSG_COLL);
        c.t_ns = t_ns;
        c.u.coll.seq = ++k->seq;
        snprintf(c.u.coll.op, sizeof c.u.coll.op, "allreduce");
        c.u.coll.bucket = b;
        c.u.coll.step = s;
        c.u.coll.bytes = 1 << 20;
        c.u.coll.enq_ns = t_ns - 3000000;
        c.u.coll.start_ns = t_ns - 2500000;
        c.u.coll.done_ns = t_ns - 500000;
        c.u.coll.algbw_gbs = (double)c.u.coll.bytes / 2e6;
        c.u.coll.busbw_gbs = c.u.coll.algbw_gbs * 2.0 * (L.world - 1) / L.world;
        queue(k, &c);
    }
    Msg m;
    msg_init(&m, MSG_STEP);
    m.t_ns = t_ns;
    MsgStep *st = &m.u.step;
    st->epoch = (s - 1) / 1000;
    st->step = s;
    st->loss = 0.3 + 2.0 * exp(-(double)s / 3000.0) + 0.001 * (k->r % 7);
    st->lr = 1e-3;
    st->samples = s * 64;
    st->step_ms = 1000.0 / L.rate * 0.9;
    st->fwd_ms = st->step_ms * 0.3;
    st->bwd_ms = st->step_ms * 0.5;
    st->opt_ms = st->step_ms * 0.05;
    st->comm_ms = 2.0;
    st->exposed_ms = 0.5;
    st->drops = k->drops;
    queue(k, &m);
}

static void beat(Rank *k, bool waiting, int64_t since_ns)
{
    Msg m;
    msg_init(&m, MSG_BEAT);
    m.u.beat.step = k->step;
    m.u.beat.phase = PHASE_TRAIN;
    if (waiting) {
        m.u.beat.coll_seq = k->seq + 1;
        snprintf(m.u.beat.coll_op, sizeof m.u.beat.coll_op, "allreduce");
        m.u.beat.coll_since_ns = since_ns;
    }
    queue(k, &m);
}

static int open_rank(Rank *k, const char *ctl_ep, const char *tel_ep)
{
    char id[32];
    int n = snprintf(id, sizeof id, "rank-%d", k->r);
    int hwm = 100000, zero = 0;
    k->ctl = zmq_socket(L.zctx, ZMQ_DEALER);
    k->tel = zmq_socket(L.zctx, ZMQ_PUSH);
    if (!k->ctl || !k->tel) return -1;
    zmq_setsockopt(k->ctl, ZMQ_ROUTING_ID, id, (size_t)n);
    zmq_setsockopt(k->ctl, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(k->tel, ZMQ_SNDHWM, &hwm, sizeof hwm);
    int linger = 2000;
    zmq_setsockopt(k->tel, ZMQ_LINGER, &linger, sizeof linger);
    char path[300];
    if (!L.zmq_tel && !tstream_path(tel_ep, path, sizeof path) && tsc_open(&k->ts, path) == 0)
        return zmq_connect(k->ctl, ctl_ep) ? -1 : 0;
    if (zmq_connect(k->ctl, ctl_ep) || zmq_connect(k->tel, tel_ep)) return -1;
    return 0;
}

static void hello(Rank *k)
{
    Msg m;
    msg_init(&m, MSG_HELLO);
    MsgHello *h = &m.u.hello;
    h->local_rank = k->r;
    h->world = L.world;
    h->local_world = L.world;
    h->pid = getpid();
    gethostname(h->host, sizeof h->host - 1);
    snprintf(h->device, sizeof h->device, "cpu");
    snprintf(h->backend, sizeof h->backend, "gloo");
    snprintf(h->version, sizeof h->version, "tool_load (%s wire)", L.single ? "single" : "burst");
    snprintf(h->dataset, sizeof h->dataset, "synthetic");
    snprintf(h->model, sizeof h->model, "mlp:784,256,10");
    h->params = 203530;
    h->batch_size = 64;
    h->steps_per_epoch = 1000;
    h->dataset_size = 64000 * L.world;
    send_ctl(k, &m);
}

static void phase(Rank *k, Phase p)
{
    Msg m;
    msg_init(&m, MSG_PHASE);
    m.u.phase.phase = p;
    queue(k, &m);
    flush(k);
}

int main(int argc, char **argv)
{
    const char *ctl_ep = NULL;
    double v;
    L.count = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (a[0] != '-') {
            if (ctl_ep) return usage("unexpected argument \"%s\"", a);
            ctl_ep = a;
            continue;
        }
        if (!val) return usage("%s needs a value", a);
        i++;
        if (!strcmp(a, "--ranks") && num(val, 1, MAX_RANKS, &v))
            L.world = (int)v;
        else if (!strcmp(a, "--first") && num(val, 0, MAX_RANKS - 1, &v))
            L.first = (int)v;
        else if (!strcmp(a, "--count") && num(val, 1, MAX_RANKS, &v))
            L.count = (int)v;
        else if (!strcmp(a, "--rate") && num(val, 0.1, 10000, &v))
            L.rate = v;
        else if (!strcmp(a, "--buckets") && num(val, 0, MAX_BUCKETS, &v))
            L.buckets = (int)v;
        else if (!strcmp(a, "--secs") && num(val, 0, 1e7, &v))
            L.secs = v;
        else if (!strcmp(a, "--start") && num(val, 1, 1e10, &v))
            L.start_s = v;
        else if (!strcmp(a, "--wire") && (!strcmp(val, "burst") || !strcmp(val, "single")))
            L.single = !strcmp(val, "single");
        else if (!strcmp(a, "--flush") && (!strcmp(val, "spread") || !strcmp(val, "grid")))
            L.spread = !strcmp(val, "spread");
        else if (!strcmp(a, "--tel") && (!strcmp(val, "stream") || !strcmp(val, "zmq")))
            L.zmq_tel = !strcmp(val, "zmq");
        else if (!strcmp(a, "--stall")) {
            char *at = strchr(val, '@');
            char r[16];
            if (!at || at - val >= (long)sizeof r) return usage("--stall \"%s\": expected RANK@SECONDS", val);
            memcpy(r, val, (size_t)(at - val));
            r[at - val] = 0;
            if (!num(r, 0, MAX_RANKS - 1, &v)) return usage("--stall \"%s\": expected RANK@SECONDS", val);
            L.stall_rank = (int)v;
            if (!num(at + 1, 0, 1e7, &L.stall_s)) return usage("--stall \"%s\": expected RANK@SECONDS", val);
        } else
            return usage("bad option or value: %s", a);
    }
    if (!ctl_ep) return usage("%s", "no CTL_ENDPOINT");
    if (!L.world) return usage("%s", "--ranks is required");
    if (L.count < 0) L.count = L.world - L.first;
    if (L.first + L.count > L.world) return usage("%s", "--first + --count exceeds --ranks");
    char tel_ep[512];
    if (keys_tel_endpoint(ctl_ep, tel_ep, sizeof tel_ep))
        return usage("\"%s\": expected ipc://PATH or tcp://HOST:PORT", ctl_ep);

    signal(SIGINT, on_stop);
    signal(SIGTERM, on_stop);
    L.zctx = zmq_ctx_new();
    zmq_ctx_set(L.zctx, ZMQ_MAX_SOCKETS, 2 * L.count + 16);
    L.rk = calloc((size_t)L.count, sizeof *L.rk);
    if (!L.zctx || !L.rk) return 1;
    codec_buf_init(&L.buf);
    int64_t start = mono_ns();
    /* the next 50 ms mark of the wall clock, on the monotonic clock */
    int64_t flush_ns = (int64_t)FLUSH_MS * 1000000, wall = proto_now_ns();
    int64_t mark = start + (flush_ns - wall % flush_ns);
    for (int i = 0; i < L.count; i++) {
        Rank *k = &L.rk[i];
        k->r = L.first + i;
        codec_buf_init(&k->out);
        if (open_rank(k, ctl_ep, tel_ep)) {
            fprintf(stderr, "tool_load: rank %d: %s\n", k->r, zmq_strerror(errno));
            return 1;
        }
        hello(k);
        /* grid: all at the wall clock's marks; spread: over the 50 ms */
        k->next_flush_ns = L.spread ? start + flush_ns * i / L.count : mark;
    }
    /* telemetry sent before the connection is up is lost: give ipc a moment */
    struct timespec pause = { 0, 300 * 1000000 };
    nanosleep(&pause, NULL);
    for (int i = 0; i < L.count; i++) phase(&L.rk[i], PHASE_TRAIN);

    /* the shared schedule: --start (wall clock) for every process of the job, else now */
    int64_t t0_wall = L.start_s > 0 ? (int64_t)(L.start_s * 1e9) : proto_now_ns();
    int64_t t0 = mono_ns() + (t0_wall - proto_now_ns());
    while (!stop_sig && mono_ns() < t0) {
        struct timespec ts = { 0, 10 * 1000000 };
        nanosleep(&ts, NULL);
    }
    int64_t period = (int64_t)(1e9 / L.rate);
    int64_t done = 0; /* steps every rank has sent */
    int64_t next_beat = t0 + 1000000000;
    bool stalled = false;
    int64_t stall_wall = 0;
    bool any_stop = false;
    int turn = 0; /* the rank whose flush comes next */
    while (!stop_sig && !any_stop && (L.secs <= 0 || mono_ns() - t0 < (int64_t)(L.secs * 1e9))) {
        int64_t now = mono_ns();
        if (L.stall_rank >= 0 && !stalled && now - t0 >= (int64_t)(L.stall_s * 1e9)) {
            stalled = true;
            stall_wall = proto_now_ns();
        }
        /* steps due by now, all ranks alike (on the shared schedule) */
        int64_t due = (now - t0) / period;
        for (; !stalled && done < due; done++) {
            int64_t t_ns = t0_wall + (done + 1) * period;
            for (int i = 0; i < L.count; i++) step_msgs(&L.rk[i], t_ns);
        }
        if (now >= next_beat) {
            next_beat += 1000000000;
            for (int i = 0; i < L.count; i++) {
                beat(&L.rk[i], stalled && L.rk[i].r != L.stall_rank, stall_wall);
                /* ddptop pings a rank a second down its stream and falls
                 * back to ctl for a rank that does not read it: read, as a
                 * worker does, or ddptop's ZeroMQ pipes would be measured */
                if (L.rk[i].ts) tsc_read(L.rk[i].ts, on_down, &L.rk[i]);
            }
        }
        /* the ranks flush in turn (their times are spread in rank order):
         * from the next one due, as many as are due; then sleep at least
         * 1 ms, so a wake-up serves several ranks */
        while (L.rk[turn].next_flush_ns <= now) {
            Rank *k = &L.rk[turn];
            flush(k);
            k->next_flush_ns += (int64_t)FLUSH_MS * 1000000;
            if (turn % 64 == 0) read_ctl(k);
            any_stop |= k->stop;
            turn = (turn + 1) % L.count;
        }
        int64_t next = t0 + (done + 1) * period;
        if (L.rk[turn].next_flush_ns < next) next = L.rk[turn].next_flush_ns;
        if (next < now + 1000000) next = now + 1000000;
        int64_t wait = next - mono_ns();
        if (wait > 0) {
            struct timespec ts = { wait / 1000000000, wait % 1000000000 };
            nanosleep(&ts, NULL);
        }
    }
    for (int i = 0; i < L.count; i++) {
        Rank *k = &L.rk[i];
        flush(k);
        phase(k, PHASE_DESTROYED);
        Msg m;
        msg_init(&m, MSG_BYE);
        m.u.bye.step = k->step;
        queue(k, &m);
        flush(k);
        L.drops += k->drops;
    }
    printf("load: ranks %d-%d, %llu messages, %llu frames, %llu dropped\n", L.first, L.first + L.count - 1,
           (unsigned long long)L.msgs, (unsigned long long)L.frames, (unsigned long long)L.drops);
    fflush(stdout);
    for (int i = 0; i < L.count; i++) {
        tsc_close(&L.rk[i].ts, 2000);
        zmq_close(L.rk[i].ctl);
        zmq_close(L.rk[i].tel);
        codec_buf_done(&L.rk[i].out);
    }
    zmq_ctx_term(L.zctx);
    codec_buf_done(&L.buf);
    free(L.rk);
    return 0;
}
