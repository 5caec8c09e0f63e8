/* report.c — the trainer's messages to ddptop (report.h).
 *
 * The uplink is main-thread only, so timings recorded by the communication
 * thread are reported from here after each step. Main thread.
 */
#include "train/report.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "train/state.h"

#define VERSION_STR   "0.1.0"
/* Indices sent in a shard message; the rest are summarised by count. */
#define SHARD_IDX_MAX (1 << 20)

void report_phase(Trainer *t, Phase p, const char *detail)
{
    t->phase = p;
    Msg m;
    msg_init(&m, MSG_PHASE);
    m.u.phase.phase = p;
    if (detail) snprintf(m.u.phase.detail, sizeof m.u.phase.detail, "%.*s", (int)sizeof m.u.phase.detail - 1, detail);
    uplink_send_important(t->up, &m);
}

void report_log(Trainer *t, const char *level, const char *fmt, ...)
{
    Msg m;
    msg_init(&m, MSG_LOG);
    snprintf(m.u.log.level, sizeof m.u.log.level, "%s", level);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m.u.log.text, sizeof m.u.log.text, fmt, ap);
    va_end(ap);
    uplink_send_important(t->up, &m);
}

static void send_bye(Trainer *t, int status)
{
    Msg m;
    msg_init(&m, MSG_BYE);
    m.u.bye.status = status;
    m.u.bye.step = t->step;
    uplink_send_important(t->up, &m);
}

int report_fail(Trainer *t, int status)
{
    fprintf(stderr, "ddptop-worker rank %d: %s\n", t->id->rank, t->err);
    report_phase(t, PHASE_ERROR, t->err);
    send_bye(t, status);
    return status;
}

void report_bye(Trainer *t) { send_bye(t, 0); }

/* ddptop stopped: training goes on (telemetry that finds no room is
 * dropped and counted); said once per stop, and again when it is back so
 * the screen shows what it missed. ddptop gone: every rank raises the stop
 * flag (command agreement), so they stop at one step and rank 0 writes
 * the final checkpoint, as a clean stop does. A rank that has not left
 * FRONT_GONE_GRACE_MS later is stuck in a collective that will not end
 * (or is before the rendezvous, with nothing to save): _exit, since an
 * orderly teardown could wait on peers for the whole --timeout. */
void report_check_ddptop(Trainer *t)
{
    char why[128];
    UplinkFront f = uplink_front(t->up, why, sizeof why);
    if (f == UPLINK_FRONT_STOPPED && !t->front_stopped) {
        t->front_stopped = true;
        t->drops_at_stop = uplink_drops(t->up);
        fprintf(stderr, "ddptop-worker rank %d: %s: training on, telemetry that finds no room is dropped\n",
                t->id->rank, why);
    } else if (f == UPLINK_FRONT_OK && t->front_stopped) {
        t->front_stopped = false;
        t->back_unsaid = true;
        t->back_tries = 0;
        fprintf(stderr, "ddptop-worker rank %d: ddptop is back after about %.1f s stopped\n", t->id->rank,
                (double)uplink_stopped_ms(t->up) / 1e3);
    }
    /* The catch-up line goes behind a backlog ddptop is still draining: a
     * try a beat until it finds room (a few at most). */
    if (f == UPLINK_FRONT_OK && t->back_unsaid && mono_ms_f() - t->back_tried_ms >= BEAT_MS) {
        t->back_tried_ms = mono_ms_f();
        Msg m;
        msg_init(&m, MSG_LOG);
        snprintf(m.u.log.level, sizeof m.u.log.level, "info");
        snprintf(m.u.log.text, sizeof m.u.log.text,
                 "rank %d trained on while ddptop was stopped (about %.1f s in all): %" PRIu64
                 " telemetry messages dropped meanwhile",
                 t->id->rank, (double)uplink_stopped_ms(t->up) / 1e3, uplink_drops(t->up) - t->drops_at_stop);
        if (uplink_send_important(t->up, &m) == 0 || ++t->back_tries >= 30) t->back_unsaid = false;
    }
    if (f != UPLINK_FRONT_GONE) return;
    double now = mono_ms_f();
    if (!t->front_gone) {
        t->front_gone = true;
        t->front_gone_ms = now;
        t->stop_seen = true;
        if (t->red) {
            fprintf(stderr, "ddptop-worker rank %d: %s: stopping at the next step the ranks agree on%s\n", t->id->rank,
                    why, t->a->final_ckpt && t->id->rank == 0 ? ", with a final checkpoint" : "");
            return;
        }
    } else if (now - t->front_gone_ms < FRONT_GONE_GRACE_MS) {
        return;
    }
    fprintf(stderr, "ddptop-worker rank %d: %s%s; exiting\n", t->id->rank, why,
            t->red ? ", and the collectives did not finish" : "");
    _exit(1);
}

/* Heartbeat: the step, the phase, and the collective in flight, if any. A
 * rank whose in-flight collective stays put names itself as the one that
 * waits (or is waited for). */
void report_beat(Trainer *t)
{
    t->last_beat_ms = mono_ms_f();
    report_check_ddptop(t);
    if (!t->a->telemetry) return;
    Msg m;
    msg_init(&m, MSG_BEAT);
    MsgBeat *b = &m.u.beat;
    b->step = t->step;
    b->phase = t->phase;
    b->coll_seq = -1;
    int64_t id, since;
    RedKind kind;
    int bucket;
    if (t->red && reducer_in_flight(t->red, &id, &kind, &since, &bucket)) {
        b->coll_seq = id;
        b->coll_bucket = bucket;
        snprintf(b->coll_op, sizeof b->coll_op, "%s", reducer_kind_name(kind));
        b->coll_since_ns = since;
    }
    uplink_send(t->up, &m);
    /* A beat may be all there is for a while (a long wait): out it goes,
     * with the steps queued before it. */
    uplink_flush(t->up);
}

void report_maybe_beat(Trainer *t)
{
    if (mono_ms_f() - t->last_beat_ms >= BEAT_MS) report_beat(t);
}

void report_wait_cb(void *ctx)
{
    Trainer *t = ctx;
    if (mono_ms_f() - t->last_beat_ms >= BEAT_MS)
        report_beat(t);
    else
        uplink_flush(t->up);
}

void report_hello(Trainer *t, int64_t steps_per_epoch, int64_t planned_steps)
{
    Msg m;
    msg_init(&m, MSG_HELLO);
    MsgHello *h = &m.u.hello;
    h->local_rank = t->id->local_rank;
    h->world = t->id->world;
    h->local_world = t->id->local_world;
    h->pid = getpid();
    snprintf(h->host, sizeof h->host, "%s", t->id->host);
    t->ops->device_name(t, h->device, sizeof h->device);
    snprintf(h->backend, sizeof h->backend, "%s", t->id->backend);
    snprintf(h->precision, sizeof h->precision, "%s", precision_name(t->a->precision));
    snprintf(h->grad_dtype, sizeof h->grad_dtype, "%s", comm_dtype_name(t->a->grad_dtype));
    snprintf(h->version, sizeof h->version, "ddptop " VERSION_STR " %s", comm_version(t->id->backend));
    snprintf(h->dataset, sizeof h->dataset, "%s", t->ds.name);
    snprintf(h->model, sizeof h->model, "%s", t->a->model);
    h->params = (int64_t)t->m.n_params;
    h->batch_size = t->a->batch_size;
    h->steps_per_epoch = steps_per_epoch;
    h->max_steps = planned_steps;
    h->dataset_size = t->ds.n;
    uplink_send_important(t->up, &m);
}

void report_shard(Trainer *t, const SamplerConfig *sc)
{
    if (!t->a->telemetry) return;
    Msg m;
    msg_init(&m, MSG_SHARD);
    MsgShard *s = &m.u.shard;
    s->epoch = t->epoch;
    s->seed = (int64_t)sc->seed;
    s->shuffle = sc->shuffle;
    s->drop_last = sc->drop_last;
    s->dataset_size = sc->size;
    s->num_samples = t->ns;
    s->total_size = sampler_total_size(sc);
    s->padding = sampler_padding(sc);
    s->n_idx = (uint32_t)(t->ns < SHARD_IDX_MAX ? t->ns : SHARD_IDX_MAX);
    s->idx = t->idx; /* borrowed: not freed by us through msg_done */
    uplink_send(t->up, &m);
}

void report_coll(Trainer *t, const RedOp *op, int64_t step)
{
    if (!t->a->telemetry || !op) return;
    Msg m;
    msg_init(&m, MSG_COLL);
    MsgColl *c = &m.u.coll;
    /* submission order: the same call has the same seq on every rank (on
     * the GPU, buckets bypass the reducer: the trainer counts them all) */
    c->seq = t->ops->own_coll_seq ? ++t->coll_seq : op->id;
    snprintf(c->op, sizeof c->op, "%s", reducer_kind_name(op->kind));
    c->bucket = op->bucket;
    c->step = step;
    c->bytes = (int64_t)(op->n * comm_dtype_size(op->dtype)); /* bf16 buckets: 2 bytes an element */
    c->enq_ns = op->enq_ns;
    c->start_ns = op->start_ns;
    c->done_ns = op->done_ns;
    /* the shape, in torch's dtype names as the adapter sends them: a
     * barrier carries nothing */
    c->count = op->kind == RED_BARRIER ? 0 : (int64_t)op->n;
    if (op->kind != RED_BARRIER) snprintf(c->dtype, sizeof c->dtype, "%s", op->dtype == COMM_BF16 ? "bfloat16" : "float32");
    double dt = (double)(op->done_ns - op->start_ns);
    int w = t->id->world;
    /* nccl-tests: algbw = bytes / time; busbw = algbw * 2(n-1)/n for
     * all-reduce, = algbw for broadcast; a barrier moves no payload. */
    c->algbw_gbs = dt > 0 && op->kind != RED_BARRIER ? c->bytes / dt : 0;
    c->busbw_gbs = op->kind == RED_ALLREDUCE ? c->algbw_gbs * 2.0 * (w - 1) / w : c->algbw_gbs;
    uplink_send(t->up, &m);
}

void report_step(Trainer *t, const MsgStep *sp, int64_t u, double loss, double lr, double comm_ms, double t0,
                 double data_ms)
{
    MsgStep s = *sp;
    t->step++;
    t->samples += u;
    s.epoch = t->epoch;
    s.step = t->step;
    s.loss = loss;
    s.lr = lr;
    s.samples = t->samples;
    s.comm_ms = comm_ms;
    s.exposed_ms = s.exposed_ms < comm_ms ? s.exposed_ms : comm_ms;
    double end = mono_ms_f();
    s.step_ms = end - t0;
    s.drops = uplink_drops(t->up);
    t->ops->step_mem(t, end, &s.dev_mem, &s.dev_mem_total);
    if (t->first_step == 0) {
        t->first_step = t->step;
        t->first_step_end_ms = end;
        t->first_step_unix_ns = proto_now_ns();
        t->tel_ns_at_first = uplink_cost_ns(t->up);
    } else {
        t->sum_data_ms += data_ms;
        t->sum_compute_ms += s.fwd_ms + s.bwd_ms;
        t->sum_exposed_ms += s.exposed_ms;
        t->sum_comm_ms += comm_ms;
        t->sum_opt_ms += s.opt_ms;
        t->sum_step_ms += s.step_ms;
        t->sum_epoch_ms += t->pend_epoch_ms;
        t->sum_eval_ms += t->pend_eval_ms;
    }
    t->pend_epoch_ms = t->pend_eval_ms = 0;
    t->last_step_end_ms = end;
    if (t->a->telemetry) {
        Msg m;
        msg_init(&m, MSG_STEP);
        m.u.step = s;
        uplink_send(t->up, &m);
    }
}

void report_ckpt(Trainer *t, int rc, double ms, int64_t bytes, const char *path, const char *err)
{
    Msg m;
    msg_init(&m, MSG_CKPT);
    m.u.ckpt.step = t->step;
    m.u.ckpt.epoch = t->epoch;
    m.u.ckpt.ok = rc == 0;
    m.u.ckpt.ms = ms;
    m.u.ckpt.bytes = bytes;
    if (rc == 0) {
        char abs[PROTO_STR_LONG];
        if (!realpath(path, abs)) snprintf(abs, sizeof abs, "%s", path);
        snprintf(m.u.ckpt.path, sizeof m.u.ckpt.path, "%s", abs);
    } else {
        snprintf(m.u.ckpt.error, sizeof m.u.ckpt.error, "%.*s", (int)sizeof m.u.ckpt.error - 1, err);
    }
    uplink_send_important(t->up, &m);
}

void report_eval(Trainer *t, const float *sums)
{
    Msg m;
    msg_init(&m, MSG_EVAL);
    MsgEval *e = &m.u.eval;
    e->epoch = t->epoch;
    e->step = t->step;
    e->correct = (int64_t)sums[0];
    e->total = (int64_t)sums[1];
    e->accuracy = (double)sums[0] / (double)sums[1];
    e->loss = (double)sums[2] / (double)sums[1];
    /* ddptop's job model turns it into the event line users read. */
    uplink_send_important(t->up, &m);
}

/* In the order the all-reduces start, e.g. "gradient buckets (first 1 MB,
 * then 25 MB): [4.bias 4.weight ...] 1077288 B". */
void report_buckets(Trainer *t)
{
    char s[PROTO_STR_LONG];
    size_t at =
        (size_t)snprintf(s, sizeof s, "gradient buckets (first %g MB, then %g MB):", BUCKET_FIRST_CAP_BYTES / 1048576.0,
                         t->a->bucket_cap_mb);
    for (int b = 0; b < t->nb && at < sizeof s; b++) {
        const Bucket *bk = &t->buckets[b];
        for (int k = bk->first_tensor; k >= bk->last_tensor && at < sizeof s; k--)
            at += (size_t)snprintf(s + at, sizeof s - at, "%s%s", k == bk->first_tensor ? " [" : " ",
                                   t->m.tensors[k].name);
        if (at < sizeof s) at += (size_t)snprintf(s + at, sizeof s - at, "] %zu B", bk->numel * sizeof(float));
    }
    report_log(t, "info", "%s", s);
}

void report_throughput(Trainer *t)
{
    int64_t n = t->step - t->first_step;
    if (t->first_step == 0) return;
    double secs = (t->last_step_end_ms - t->first_step_end_ms) / 1e3;
    double per = n > 0 ? 1.0 / (double)n : 0;
    report_log(t, "info",
               "throughput: %" PRId64 " steps in %.3f s after the first (%.1f steps/s); first step done at unix %.6f; "
               "per step: data %.3f ms, compute %.3f ms, comm %.3f ms (exposed %.3f), optimizer %.3f ms, step %.3f ms, "
               "telemetry %.4f ms; between steps %.3f ms (evaluation %.3f, new shards %.3f)",
               n, secs, secs > 0 ? n / secs : 0.0, t->first_step_unix_ns / 1e9, t->sum_data_ms * per,
               t->sum_compute_ms * per, t->sum_comm_ms * per, t->sum_exposed_ms * per, t->sum_opt_ms * per,
               t->sum_step_ms * per, (uplink_cost_ns(t->up) - t->tel_ns_at_first) / 1e6 * per,
               (t->last_step_end_ms - t->first_step_end_ms - t->sum_step_ms) * per, t->sum_eval_ms * per,
               t->sum_epoch_ms * per);
}
