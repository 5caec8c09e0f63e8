/* bench_model.c — the frontend's cost per message after its decode: what
 * ddptop's receive loop does with each of a rank's telemetry messages
 * (tui/run/inbox.c run_take_msgs, take_burst's work after decoding: the
 * sender check, the viewers' snapshot, the job model), on a Job and a
 * Viewers built as `ddptop listen` builds them, fed the stream
 * tests/tools/tool_load.c's simulated ranks send. Not part of the test
 * suite; `make bench-model` runs it under callgrind (tests/bench_model.sh:
 * instructions per message, deterministic where wall-clock time on a
 * shared VM is not; docs/BENCHMARKS.md).
 *
 *   bench_model [-r RANKS] [-w WARMUP_STEPS] [-s STEPS] [-b BUCKETS]
 *
 * Each rank says hello (on ctl, routing id "rank-R") and phase train, then
 * steps 100 times a second on a shared schedule: per step a `coll` per
 * bucket and a `step`, a `beat` a second, its
 * telemetry arriving as one burst every 50 ms (tool_load's grid flushes),
 * the ranks' bursts read one after the other 2 us apart. Every message is
 * encoded and decoded (codec_decode) as the wire would bring it, outside
 * the functions measured: bm_feed_burst hands a rank's decoded burst to
 * run_take_msgs, and bm_measure runs the STEPS after the WARMUP_STEPS
 * (callgrind --toggle-collect=bm_measure counts those alone). The clock is
 * the schedule's, not the machine's, so every run does the same work.
 *
 * Prints the messages fed, wall ns per message over the measured steps
 * (the encoding and decoding included: a rough look without valgrind,
 * noisy on a shared machine) and a digest of what the job model shows at
 * the end (figures, rings, series, collectives, through job.h only): a
 * change to the per-message path must leave it as it was. Single-threaded.
 */
#include "base/clock.h"
#include "base/usage.h"
#include "model/job.h"
#include "run/internal.h"
#include "wire/codec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WHO       "bench_model"
#define SEE       "bench_model -r RANKS -w WARMUP_STEPS -s STEPS -b BUCKETS"
#define MAX_BURST (5 * (16 + 1) + 1) /* a flush: 5 steps of 16 buckets, a beat */
#define RATE      100                /* steps a second, every rank */
#define FLUSH_NS  50000000LL
#define READ_NS   2000LL /* between two ranks' bursts in one drain */
#define PID       4242   /* the process the ranks claim (tool_load: one for all) */

typedef struct {
    Run run;
    int world, buckets;
    int64_t mono0, wall0;      /* the schedule's time 0 on both clocks */
    int64_t *seq;              /* [world] last collective sent */
    CodecBuf buf;              /* a frame being encoded */
    CodecBuf frame[MAX_BURST]; /* a burst's frames, each as the wire brings it */
    Msg msg[MAX_BURST];        /* and decoded */
    int n;
    uint64_t n_step, n_coll, n_beat, n_other;
} Feed;

static void die(const char *what, const char *err)
{
    fprintf(stderr, WHO ": %s: %s\n", what, err);
    exit(1);
}

/* m as the wire brings it: encoded, then decoded into *out (the frame in
 * b->buf). */
static void wire(Feed *b, Msg *m, Msg *out)
{
    char err[160];
    if (codec_encode(m, &b->buf, err, sizeof err)) die("encode", err);
    if (codec_decode(b->buf.data, b->buf.len, out, err, sizeof err)) die("decode", err);
}

/* m onto the burst being gathered: its own frame, decoded. */
static void gather(Feed *b, Msg *m)
{
    char err[160];
    if (b->n == MAX_BURST) die("burst", "too many messages");
    CodecBuf *f = &b->frame[b->n];
    if (codec_encode(m, f, err, sizeof err)) die("encode", err);
    if (codec_decode(f->data, f->len, &b->msg[b->n], err, sizeof err)) die("decode", err);
    b->n++;
}

static void take(Feed *b, const void *ident, size_t ident_len, Msg *m, int64_t mono, int64_t wall)
{
    if (run_take_msg(&b->run, ident, ident_len, PID, b->buf.data, b->buf.len, m, mono, wall))
        die("run_take_msg", "a message was refused");
}

/* A rank's burst, as take_burst takes it once decoded; never inlined, so
 * callgrind has it to count. */
__attribute__((noipa)) static void bm_feed_burst(Feed *b, int64_t mono, int64_t wall)
{
    const void *frames[MAX_BURST];
    size_t lens[MAX_BURST];
    for (int k = 0; k < b->n; k++) {
        frames[k] = b->frame[k].data;
        lens[k] = b->frame[k].len;
    }
    if (run_take_msgs(&b->run, PID, frames, lens, b->msg, b->n, mono, wall))
        die("run_take_msgs", "a message was refused");
    for (int k = 0; k < b->n; k++) msg_done(&b->msg[k]);
    b->n = 0;
}

/* What tool_load's rank k sends at step s, stamped t_ns (its wall clock). */
static void coll_msg(Feed *b, int k, int bucket, int64_t s, int64_t t_ns, Msg *c)
{
    msg_init(c, MSG_COLL);
    c->rank = k;
    c->t_ns = t_ns;
    c->u.coll.seq = ++b->seq[k];
    snprintf(c->u.coll.op, sizeof c->u.coll.op, "allreduce");
    c->u.coll.bucket = bucket;
    c->u.coll.step = s;
    c->u.coll.bytes = 1 << 20;
    c->u.coll.enq_ns = t_ns - 3000000;
    c->u.coll.start_ns = t_ns - 2500000;
    c->u.coll.done_ns = t_ns - 500000;
    c->u.coll.algbw_gbs = (double)c->u.coll.bytes / 2e6;
    c->u.coll.busbw_gbs = c->u.coll.algbw_gbs * 2.0 * (b->world - 1) / b->world;
}

static void step_msg(int k, int64_t s, int64_t t_ns, Msg *m)
{
    msg_init(m, MSG_STEP);
    m->rank = k;
    m->t_ns = t_ns;
    MsgStep *st = &m->u.step;
    st->epoch = (s - 1) / 1000;
    st->step = s;
    st->loss = 0.3 + 2.0 * exp(-(double)s / 3000.0) + 0.001 * (k % 7);
    st->lr = 1e-3;
    st->samples = s * 64;
    st->step_ms = 1000.0 / RATE * 0.9;
    st->fwd_ms = st->step_ms * 0.3;
    st->bwd_ms = st->step_ms * 0.5;
    st->opt_ms = st->step_ms * 0.05;
    st->comm_ms = 2.0;
    st->exposed_ms = 0.5;
}

/* The flushes that carry steps from+1..to (to - from a multiple of the
 * 5 steps a flush carries): each rank's burst in turn. */
__attribute__((noipa)) static void bm_steps(Feed *b, int64_t from, int64_t to)
{
    const int64_t period = 1000000000LL / RATE, per_flush = FLUSH_NS / period;
    for (int64_t first = from + 1; first <= to; first += per_flush) {
        int64_t flush = (first - 1) / per_flush + 1; /* flush n carries steps up to n * per_flush */
        int64_t due = flush * FLUSH_NS;              /* since time 0 */
        bool beat = due % 1000000000LL == 0;
        for (int k = 0; k < b->world; k++) {
            int64_t mono = b->mono0 + due + k * READ_NS, wall = b->wall0 + due + k * READ_NS;
            Msg m;
            for (int64_t s = first; s < first + per_flush; s++) {
                int64_t t_ns = b->wall0 + s * period;
                for (int bk = 0; bk < b->buckets; bk++) {
                    coll_msg(b, k, bk, s, t_ns, &m);
                    gather(b, &m);
                    b->n_coll++;
                }
                step_msg(k, s, t_ns, &m);
                gather(b, &m);
                b->n_step++;
            }
            if (beat) {
                msg_init(&m, MSG_BEAT);
                m.rank = k;
                m.t_ns = b->wall0 + due;
                m.u.beat.step = first + per_flush - 1;
                m.u.beat.phase = PHASE_TRAIN;
                gather(b, &m);
                b->n_beat++;
            }
            bm_feed_burst(b, mono, wall);
        }
    }
}

/* The steps callgrind counts (--toggle-collect=bm_measure). */
__attribute__((noipa)) static void bm_measure(Feed *b, int64_t from, int64_t to) { bm_steps(b, from, to); }

/* Hello on ctl, phase train on tel: as tool_load starts its ranks. */
static void start_ranks(Feed *b)
{
    for (int k = 0; k < b->world; k++) {
        Msg m, d;
        char ident[32];
        int n = snprintf(ident, sizeof ident, "rank-%d", k);
        msg_init(&m, MSG_HELLO);
        m.rank = k;
        m.t_ns = b->wall0;
        MsgHello *h = &m.u.hello;
        h->local_rank = k;
        h->world = b->world;
        h->local_world = b->world;
        h->pid = PID;
        snprintf(h->host, sizeof h->host, "bench-host");
        snprintf(h->device, sizeof h->device, "cpu");
        snprintf(h->backend, sizeof h->backend, "gloo");
        snprintf(h->version, sizeof h->version, "bench_model");
        snprintf(h->dataset, sizeof h->dataset, "synthetic");
        snprintf(h->model, sizeof h->model, "mlp:784,256,10");
        h->params = 203530;
        h->batch_size = 64;
        h->steps_per_epoch = 1000;
        h->dataset_size = 64000LL * b->world;
        wire(b, &m, &d);
        take(b, ident, (size_t)n, &d, b->mono0 - 300000000, b->wall0 - 300000000);
        msg_done(&d);
        b->n_other++;
    }
    for (int k = 0; k < b->world; k++) {
        Msg m, d;
        msg_init(&m, MSG_PHASE);
        m.rank = k;
        m.t_ns = b->wall0;
        m.u.phase.phase = PHASE_TRAIN;
        wire(b, &m, &d);
        take(b, NULL, 0, &d, b->mono0 - 1000000, b->wall0 - 1000000);
        msg_done(&d);
        b->n_other++;
    }
}

/* ---- the digest: what the model shows, through job.h alone ---- */

static uint64_t H = 14695981039346656037ull; /* FNV-1a */

static void mix(const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) H = (H ^ c[i]) * 1099511628211ull;
}
static void mix_i(int64_t v) { mix(&v, sizeof v); }
static void mix_d(double v) { mix(&v, sizeof v); }
static void mix_s(const char *s) { mix(s, strlen(s) + 1); }

static void mix_series(const Series *s)
{
    mix_i(s->first);
    mix_i(s->stride);
    mix_i(s->len);
    for (int i = 0; i < s->len; i++) {
        const SeriesBin *x = &s->bin[i];
        mix_d(x->sum);
        mix_d(x->min);
        mix_d(x->max);
        mix_i(x->n);
        mix_i(x->n_bad);
    }
}

static void mix_coll(const MsgColl *c)
{
    mix_i(c->seq);
    mix_s(c->op);
    mix_i(c->bucket);
    mix_i(c->step);
    mix_i(c->bytes);
    mix_i(c->enq_ns);
    mix_i(c->start_ns);
    mix_i(c->done_ns);
    mix_d(c->algbw_gbs);
    mix_d(c->busbw_gbs);
}

static uint64_t digest(const Job *j, int64_t now)
{
    H = 14695981039346656037ull;
    mix_i(j->step);
    mix_i(j->epoch);
    mix_d(j->samples_per_s);
    mix_i((int64_t)j->drops);
    mix_i((int64_t)j->bad_frames);
    mix_i((int64_t)j->version);
    mix_i((int64_t)j->ev_total);
    mix_i(j->n_stepped);
    mix_i(j->nodes);
    mix_i(j->state);
    mix_series(&j->loss_all);
    for (int i = 0; i < j->world; i++) {
        const JobRank *r = &j->ranks[i];
        mix_i(r->state);
        mix_i(r->phase);
        mix_i(r->last_msg_ns);
        mix_i(r->last.step);
        mix_d(r->last.loss);
        mix_i(r->last.samples);
        mix_i(r->have_coll);
        mix_i(r->beat_ns);
        mix_d(job_rank_samples_per_s(r, now));
        mix_d(job_rank_samples_per_s(r, now + 3000000000LL)); /* gone quiet */
        mix_d(job_rank_allreduce_ms(r));
        mix_series(&r->loss_hist);
        mix_i(r->ring_len);
        for (int k = 0; k < r->ring_len; k++) {
            const JobStepRec *s = job_rank_step_at(r, k);
            mix_i(s->step);
            mix_i(s->epoch);
            mix_d(s->loss);
            mix_d(s->step_ms);
            mix_d(s->comm_ms);
            mix_d(s->exposed_ms);
            mix_i(s->samples);
            mix_i(s->t_ns);
        }
        mix_i(r->colls_len);
        for (int k = 0; k < r->colls_len; k++) {
            const JobCollRec *c = job_rank_coll_at(r, k);
            mix_coll(&c->c);
            mix_d(c->ms);
            mix_d(c->wait_ms);
        }
        mix_i(r->lints);
    }
    mix_i(j->n_buckets);
    for (int k = 0; k < JOB_MAX_BUCKETS; k++) {
        const JobBucket *bk = &j->buckets[k];
        JobCollTimes tm;
        mix_i(job_bucket_times(j, k, &tm));
        mix_i(bk->used);
        mix_i(bk->bytes);
        mix_series(&bk->ms);
        mix_d(tm.xfer_ms);
        mix_d(tm.wait_ms);
        mix_d(tm.algbw_gbs);
        mix_d(tm.busbw_gbs);
        mix_i(bk->last_step);
    }
    const JobColl *cs[JOB_COLL_RING];
    int n = job_colls_recent(j, cs, JOB_COLL_RING);
    mix_i(n);
    for (int k = 0; k < n; k++) {
        const JobColl *c = cs[k];
        mix_i(c->seq);
        mix_s(c->op);
        mix_i(c->bucket);
        mix_i(c->step);
        mix_i(c->bytes);
        mix_i(c->arrived);
        mix_i(c->done);
        mix_i(c->first_ns);
        mix_i(c->last_ns);
        mix_i(c->prev_last_ns);
        mix_i(c->first_rank);
        mix_i(c->last_rank);
        mix_i(c->op_rank);
        mix_i(c->in_first_ns);
        mix_i(c->in_last_ns);
        mix_i(c->done_last_ns);
        mix_i(c->count);
        mix_i(c->odd_rank);
        for (int r = 0; r < j->world; r++) mix_i(job_coll_arrived(j, c, r));
    }
    JobStat st[JOB_METRIC__COUNT];
    job_rank_stats(j, now, st);
    for (int k = 0; k < JOB_METRIC__COUNT; k++) {
        mix_i(st[k].n);
        mix_d(st[k].min);
        mix_d(st[k].median);
        mix_d(st[k].max);
    }
    double fr[5];
    if (job_comm_share(j, &fr[0], &fr[1], &fr[2], &fr[3], &fr[4]))
        for (int k = 0; k < 5; k++) mix_d(fr[k]);
    return H;
}

static bool arg_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || !*s || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

int main(int argc, char **argv)
{
    long world = 64, warm = 300, steps = 100, buckets = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long *to = !strcmp(a, "-r")   ? &world
                   : !strcmp(a, "-w") ? &warm
                   : !strcmp(a, "-s") ? &steps
                   : !strcmp(a, "-b") ? &buckets
                                      : NULL;
        long hi = to == &world ? JOB_MAX_RANKS : to == &buckets ? 16 : 10000000;
        if (!to) return usage_fail(WHO, SEE, "unknown option %s", a);
        if (!arg_int(v, to == &world || to == &steps ? 1 : 0, hi, to))
            return usage_fail(WHO, SEE, "%s needs a number in range", a);
        i++;
    }
    if (warm % 5 || steps % 5) return usage_fail(WHO, SEE, "%s", "steps come 5 a flush: -w and -s in fives");
    Feed b;
    memset(&b, 0, sizeof b);
    b.world = (int)world;
    b.buckets = (int)buckets;
    for (int k = 0; k < MAX_BURST; k++) codec_buf_init(&b.frame[k]);
    b.mono0 = 1000000000000LL;       /* a monotonic clock's time 0 of the schedule, 1000 s after boot */
    b.wall0 = 1796256000000000000LL; /* 2026-12-03 00:00 UTC */
    b.seq = calloc((size_t)world, sizeof *b.seq);
    codec_buf_init(&b.buf);
    Run *r = &b.run;
    r->external = true; /* `ddptop listen`, as make bench-tui runs it */
    r->job = job_new(b.world, b.mono0 - 400000000);
    r->viewers = viewers_new(b.world);
    r->rk = calloc((size_t)world, sizeof *r->rk);
    if (!b.seq || !r->job || !r->viewers || !r->rk) die("setup", "out of memory");
    start_ranks(&b);
    bm_steps(&b, 0, warm);
    uint64_t s0 = b.n_step, c0 = b.n_coll, e0 = b.n_beat;
    int64_t t0 = mono_ns();
    bm_measure(&b, warm, warm + steps);
    int64_t t1 = mono_ns();
    uint64_t ns = b.n_step - s0, nc = b.n_coll - c0, ne = b.n_beat - e0, msgs = ns + nc + ne;
    int64_t end = b.mono0 + (warm + steps) * (1000000000LL / RATE) + 60000000;
    /* one line, its fields name=value (tests/bench_model.sh reads them) */
    printf("bench_model: ranks=%ld buckets=%ld warmup=%ld steps=%ld measured: step=%llu coll=%llu beat=%llu "
           "wall_ns_per_msg=%.0f digest=%016llx\n",
           world, buckets, warm, steps, (unsigned long long)ns, (unsigned long long)nc, (unsigned long long)ne,
           msgs ? (double)(t1 - t0) / (double)msgs : 0.0, (unsigned long long)digest(r->job, end));
    viewers_free(&r->viewers);
    job_free(&r->job);
    free(r->rk);
    free(b.seq);
    codec_buf_done(&b.buf);
    for (int k = 0; k < MAX_BURST; k++) codec_buf_done(&b.frame[k]);
    return 0;
}
