/* trainer.c — one rank of a data-parallel job, the way DDP trains.
 *
 * Per optimizer step: gather this rank's micro-batches from its
 * DistributedSampler shard; forward/backward each (gradients accumulated
 * locally, DDP's no_sync, except on the last); during the last backward,
 * every gradient bucket is handed to the communication thread (reducer.c)
 * the moment its last tensor is final, so its all-reduce overlaps the rest
 * of backward; command flags ride in the last bucket; wait for the buckets,
 * apply the optimizer at the schedule's learning rate, report. Commands
 * (checkpoint, stop, pause/resume) are acted on only at the step where the
 * all-reduced flags say so, which is the same step on every rank — a rank
 * never stops or pauses alone, so nobody is left waiting in a collective.
 * See DESIGN.md "Commands take effect at the same step" and
 * docs/DECISIONS.md "Command agreement".
 *
 * With --device cuda (docs/GPU.md) the same loop drives cuda_mlp.h: the
 * host Mlp and Optim stay as the layout and as the copies that checkpoints
 * are written from and resumed into; each bucket's all-reduce is started
 * from backward's "gradient ready" events on the main thread
 * (comm_allreduce_sum_f32_start: NCCL queues it on its own stream, Gloo
 * stages it through host memory and returns when done), the optimizer
 * waits for them on the GPU, and the host waits once per step, in
 * cuda_mlp_finish_step. One-off collectives still go through the reducer,
 * with small host values carried in the pad before grads[0] (NCCL needs
 * device memory).
 *
 * Teaching faults (fault.h, docs/TRAINING.md "Teaching faults") break this
 * on purpose, at a few hook points: before a step (kill, stall, slow), at
 * an epoch's start (skip-set-epoch), after a step (unsafe-stop: a rank
 * stops without the flags) and at shutdown (no-barrier). Each says its
 * sentence once, as a warn log, when it fires. Without faults the hooks
 * cost one test of a counter.
 *
 * Threads: everything here runs on the main thread, except the collectives
 * (reducer.c). The uplink is main-thread only, so timings recorded by the
 * communication thread are reported from here after each step.
 */
#include "train/trainer.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ddp/bucket.h"
#include "ckpt/ckpt.h"
#include "comm/comm.h"
#include "cuda/cuda_mlp.h"
#include "data/dataset.h"
#include "wire/fault.h"
#include "cuda/gpu.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "ddp/reducer.h"
#include "wire/sampler.h"
#include "nn/schedule.h"
#include "base/clock.h"

#define VERSION_STR "0.1.0"
/* Indices sent in a shard message; the rest are summarised by count. */
#define SHARD_IDX_MAX (1 << 20)
/* How often a rank polls commands and agrees with the others while paused. */
#define PAUSE_ROUND_MS 20
#define BEAT_MS 1000
/* All-reduce tags of the collectives that are not gradient buckets (bucket
 * b uses tag b; BUCKET_MAX is far below these). */
#define TAG_PAUSE_FLAGS 0x70000001u
#define TAG_EVAL 0x70000002u

/* Command flags in the floats just before grads[0] (MODEL_GRAD_PAD): each
 * rank adds its own view; the sums decide. The same layout travels alone in
 * the flags-only all-reduce of a paused round. */
enum { FL_CKPT_ID = 0, FL_CKPT_PENDING, FL_STOP, FL_PAUSE, FL_COUNT };

/* What the reduced flags of a step (or a paused round) ask for. */
typedef struct {
    bool ckpt, stop, pause;
} Agreed;

typedef struct {
    const TrainerArgs *a;
    const WorkerIdentity *id;
    Uplink *up;
    Dataset ds, eval_ds;
    bool eval_loaded, eval_off;
    Mlp m;
    Optim o;
    Schedule sched;
    uint64_t seed;              /* the run's seed (a checkpoint's when resuming) */
    Comm *comm;
    Reducer *red;
    Bucket buckets[BUCKET_MAX];
    int nb;
    int tensor_bucket[2 * MODEL_MAX_LINEAR];
    /* the step in progress: buckets handed to the reducer */
    int64_t bucket_op[BUCKET_MAX];
    int n_submitted;
    float bucket_scale;         /* 1 / (micro-batches * world) */
    bool add_acc;               /* hook adds the accumulated micro-batch grads */
    float *acc;                 /* [n_params], --grad-accum > 1 */
    bool hook_failed;
    float flags_pause[FL_COUNT];
    float *xb;
    int32_t *yb;
    int64_t *idx;
    int64_t ns;                 /* samples per rank per epoch */
    int64_t step, epoch, samples, pos_in_epoch;
    bool resumed;
    int64_t resume_dataset_size;
    double last_lr;
    /* command agreement */
    int64_t ckpt_seen, ckpt_acted;   /* ckpt_acted is agreed by all ranks */
    bool stop_seen;
    int64_t pause_seen, resume_seen; /* paused is wanted while pause_seen > resume_seen */
    int64_t last_ckpt_step;
    char stop_reason[96];
    Phase phase;
    double last_beat_ms;
    /* throughput and the breakdown of a step, after the first */
    double first_step_end_ms;
    int64_t first_step_unix_ns, first_step;
    double sum_data_ms, sum_compute_ms, sum_exposed_ms, sum_comm_ms, sum_opt_ms, sum_step_ms;
    /* Between two steps (after the first): new shards (sampler + shard
     * message) and evaluations; pend_* until the next step ends. */
    double sum_epoch_ms, sum_eval_ms, pend_epoch_ms, pend_eval_ms;
    int64_t mem_used, mem_total;    /* GPU: last gpu_mem_info, for step messages */
    double mem_at_ms;
    int64_t tel_ns_at_first;
    double last_step_end_ms;
    /* --device cuda: the model on the GPU; NULL on the CPU */
    CudaMlp *g;
    int gpu;                    /* the device index */
    bool data_on_gpu;           /* dataset uploaded: batches gathered there */
    int64_t tickets[BUCKET_MAX];/* the step's bucket all-reduces (comm_timing) */
    int64_t coll_seq;           /* seq of coll messages on the GPU path */
    /* teaching faults: --fault, then live ones from ddptop */
    FaultPlan faults;
    bool fault_said[FAULT_MAX];
    char err[512];
} Trainer;

static void send_phase(Trainer *t, Phase p, const char *detail)
{
    t->phase = p;
    Msg m;
    msg_init(&m, MSG_PHASE);
    m.u.phase.phase = p;
    if (detail) snprintf(m.u.phase.detail, sizeof m.u.phase.detail, "%.*s", (int)sizeof m.u.phase.detail - 1, detail);
    uplink_send_important(t->up, &m);
}

static void send_log(Trainer *t, const char *level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void send_log(Trainer *t, const char *level, const char *fmt, ...)
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

/* Report a failure: on stderr (the rank's log), as an error phase, and bye. */
static int fail(Trainer *t, int status)
{
    fprintf(stderr, "ddptop-worker rank %d: %s\n", t->id->rank, t->err);
    send_phase(t, PHASE_ERROR, t->err);
    Msg m;
    msg_init(&m, MSG_BYE);
    m.u.bye.status = status;
    m.u.bye.step = t->step;
    uplink_send_important(t->up, &m);
    return status;
}

/* ddptop's heartbeat (uplink.h): silent past DDPTOP_PING_TIMEOUT after its
 * first ping, it is gone or stuck, and this rank leaves at once: the main
 * thread may be inside a collective, and an orderly teardown could wait on
 * peers for the whole --timeout. */
static void check_ddptop(Trainer *t)
{
    int64_t silent = uplink_ddptop_silent_ms(t->up);
    if (!silent) return;
    fprintf(stderr, "ddptop-worker rank %d: nothing from ddptop for %.1f s (DDPTOP_PING_TIMEOUT): "
            "it is gone or stuck; exiting\n", t->id->rank, silent / 1e3);
    _exit(1);
}

/* Heartbeat: the step, the phase, and the collective in flight, if any. A
 * rank whose in-flight collective stays put names itself as the one that
 * waits (or is waited for). */
static void send_beat(Trainer *t)
{
    t->last_beat_ms = mono_ms_f();
    check_ddptop(t);
    if (!t->a->telemetry) return;
    Msg m;
    msg_init(&m, MSG_BEAT);
    MsgBeat *b = &m.u.beat;
    b->step = t->step;
    b->phase = t->phase;
    b->coll_seq = -1;
    int64_t id, since;
    RedKind kind;
    if (t->red && reducer_in_flight(t->red, &id, &kind, &since)) {
        b->coll_seq = id;
        snprintf(b->coll_op, sizeof b->coll_op, "%s", reducer_kind_name(kind));
        b->coll_since_ns = since;
    }
    uplink_send(t->up, &m);
    /* A beat may be all there is for a while (a long wait): out it goes,
     * with the steps queued before it. */
    uplink_flush(t->up);
}

static void maybe_beat(Trainer *t)
{
    if (mono_ms_f() - t->last_beat_ms >= BEAT_MS) send_beat(t);
}

static void beat_cb(void *ctx) { send_beat(ctx); }

static int load_data(Trainer *t)
{
    const TrainerArgs *a = t->a;
    int in = a->dims[0], classes = a->dims[a->n_linear];
    bool fm = !strcmp(a->dataset, "fashion-mnist");
    if (!strcmp(a->dataset, "auto"))
        fm = dataset_fashion_mnist_present(a->data_dir) && in == 784 && classes == 10;
    if (fm) {
        if (in != 784 || classes != 10) {
            snprintf(t->err, sizeof t->err,
                     "--model %s does not fit fashion-mnist (784 inputs, 10 classes)", a->model);
            return -1;
        }
        return dataset_load_fashion_mnist(&t->ds, a->data_dir, true, a->limit, t->err, sizeof t->err);
    }
    int64_t n = a->limit ? a->limit : a->synthetic_size;
    return dataset_make_synthetic(&t->ds, n, in, classes, t->seed, t->err, sizeof t->err);
}

/* The evaluation set, loaded at the first evaluation so that it costs
 * nothing before the first step: Fashion-MNIST's t10k files, or for the
 * synthetic set another draw from the same class prototypes (same seed:
 * the prototypes are drawn first; labels and noise come out differently
 * because the set is smaller). */
static int load_eval(Trainer *t, char *err, size_t errlen)
{
    const TrainerArgs *a = t->a;
    if (!strcmp(t->ds.name, "fashion-mnist"))
        return dataset_load_fashion_mnist(&t->eval_ds, a->data_dir, false, a->eval_limit, err, errlen);
    int64_t n = a->eval_limit ? a->eval_limit : (t->ds.n + 7) / 8;
    if (n == t->ds.n && n > 1) n--;   /* never the training set itself */
    return dataset_make_synthetic(&t->eval_ds, n, t->ds.dim, t->ds.classes, t->seed, err, errlen);
}

static int64_t batches_per_epoch(const Trainer *t)
{
    return (t->ns + t->a->batch_size - 1) / t->a->batch_size;
}

static int64_t steps_per_epoch(const Trainer *t)
{
    return (batches_per_epoch(t) + t->a->grad_accum - 1) / t->a->grad_accum;
}

/* Optimizer steps the run will take in all (the cosine schedule's T). */
static int64_t planned_steps(const Trainer *t)
{
    int64_t s = steps_per_epoch(t) * t->a->epochs;
    if (t->a->steps && t->a->steps < s) s = t->a->steps;
    return s;
}

static void send_hello(Trainer *t)
{
    Msg m;
    msg_init(&m, MSG_HELLO);
    MsgHello *h = &m.u.hello;
    h->local_rank = t->id->local_rank;
    h->world = t->id->world;
    h->local_world = t->id->local_world;
    h->pid = getpid();
    snprintf(h->host, sizeof h->host, "%s", t->id->host);
    if (t->g) snprintf(h->device, sizeof h->device, "cuda:%d", t->gpu);
    else snprintf(h->device, sizeof h->device, "cpu");
    snprintf(h->backend, sizeof h->backend, "%s", t->id->backend);
    snprintf(h->version, sizeof h->version, "ddptop " VERSION_STR " %s", comm_version(t->id->backend));
    snprintf(h->dataset, sizeof h->dataset, "%s", t->ds.name);
    snprintf(h->model, sizeof h->model, "%s", t->a->model);
    h->params = (int64_t)t->m.n_params;
    h->batch_size = t->a->batch_size;
    h->steps_per_epoch = steps_per_epoch(t);
    h->max_steps = planned_steps(t);
    h->dataset_size = t->ds.n;
    uplink_send_important(t->up, &m);
}

static void send_shard(Trainer *t, const SamplerConfig *sc)
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
    s->idx = t->idx;   /* borrowed: not freed by us through msg_done */
    uplink_send(t->up, &m);
}

static void send_coll(Trainer *t, const RedOp *op, int64_t step)
{
    if (!t->a->telemetry || !op) return;
    Msg m;
    msg_init(&m, MSG_COLL);
    MsgColl *c = &m.u.coll;
    /* submission order: the same call has the same seq on every rank (on
     * the GPU, buckets bypass the reducer: the trainer counts them all) */
    c->seq = t->g ? ++t->coll_seq : op->id;
    snprintf(c->op, sizeof c->op, "%s", reducer_kind_name(op->kind));
    c->bucket = op->bucket;
    c->step = step;
    c->bytes = (int64_t)(op->n * sizeof(float));
    c->enq_ns = op->enq_ns;
    c->start_ns = op->start_ns;
    c->done_ns = op->done_ns;
    double dt = (double)(op->done_ns - op->start_ns);
    int w = t->id->world;
    /* nccl-tests: algbw = bytes / time; busbw = algbw * 2(n-1)/n for
     * all-reduce, = algbw for broadcast; a barrier moves no payload. */
    c->algbw_gbs = dt > 0 && op->kind != RED_BARRIER ? c->bytes / dt : 0;
    c->busbw_gbs = op->kind == RED_ALLREDUCE ? c->algbw_gbs * 2.0 * (w - 1) / w : c->algbw_gbs;
    uplink_send(t->up, &m);
}

/* A one-off collective through the reducer, reported as a coll message. */
static int collective(Trainer *t, RedOp *op)
{
    int rc = reducer_run(t->red, op, beat_cb, t, BEAT_MS, t->err, sizeof t->err);
    if (rc == 0) send_coll(t, op, t->step);
    return rc;
}

/* A fault fires: its sentence, once, on stderr and as a warn log. A fault
 * of every rank is said by rank 0 alone (the others would repeat it). */
static void fault_fired(Trainer *t, const Fault *f)
{
    int i = (int)(f - t->faults.f);
    if (t->fault_said[i]) return;
    t->fault_said[i] = true;
    char s[PROTO_STR_LONG];
    fault_explain(f, s, sizeof s);
    fprintf(stderr, "ddptop-worker rank %d: %s\n", t->id->rank, s);
    if (f->rank >= 0 || t->id->rank == 0) send_log(t, "warn", "%s", s);
}

/* A live fault replaces one of the same kind for the same ranks (a new
 * slow:R:MS changes the delay), else joins the plan. */
static void add_fault(Trainer *t, const Fault *f)
{
    for (int i = 0; i < t->faults.n; i++)
        if (t->faults.f[i].kind == f->kind && t->faults.f[i].rank == f->rank) {
            t->faults.f[i] = *f;
            t->fault_said[i] = false;
            return;
        }
    if (t->faults.n == FAULT_MAX) {
        send_log(t, "warn", "fault %s ignored: at most %d faults", fault_name(f->kind), FAULT_MAX);
        return;
    }
    fault_add(&t->faults, f);
}

/* Drain commands from ddptop into this rank's local view. */
static void poll_commands(Trainer *t)
{
    MsgCmd c;
    while (uplink_next_cmd(t->up, &c) == 1) {
        if (!strcmp(c.op, "ckpt")) {
            if (c.id > t->ckpt_seen) t->ckpt_seen = c.id;
        } else if (!strcmp(c.op, "stop")) {
            t->stop_seen = true;
        } else if (!strcmp(c.op, "pause")) {
            if (c.id > t->pause_seen) t->pause_seen = c.id;
        } else if (!strcmp(c.op, "resume")) {
            if (c.id > t->resume_seen) t->resume_seen = c.id;
        } else if (!strcmp(c.op, "fault")) {
            Fault f;
            if (fault_unpack(c.arg, &f) == 0 && (f.rank < 0 || f.rank == t->id->rank)) add_fault(t, &f);
        }
    }
}

/* This rank's view of the commands, as flags to be summed over ranks. */
static void put_flags(const Trainer *t, float *fl)
{
    bool pending = t->ckpt_seen > t->ckpt_acted;
    fl[FL_CKPT_ID] = pending ? (float)t->ckpt_seen : 0.0f;
    fl[FL_CKPT_PENDING] = pending ? 1.0f : 0.0f;
    fl[FL_STOP] = t->stop_seen ? 1.0f : 0.0f;
    fl[FL_PAUSE] = t->pause_seen > t->resume_seen ? 1.0f : 0.0f;
}

/* The reduced flags are identical on every rank: decide together. */
static Agreed agree(Trainer *t, const float *fl)
{
    Agreed g = {false, false, false};
    if (fl[FL_CKPT_PENDING] > 0.5f) {
        /* Ranks that saw the request proposed its id; agree on the ceiling of
         * their mean so every rank stores the same acted id (exact in float). */
        double id = ceil((double)fl[FL_CKPT_ID] / (double)fl[FL_CKPT_PENDING] - 1e-6);
        if (id > t->ckpt_acted) t->ckpt_acted = (int64_t)id;
        g.ckpt = true;
    }
    g.stop = fl[FL_STOP] > 0.5f;
    g.pause = fl[FL_PAUSE] > 0.5f;
    return g;
}

/* Rank 0 writes a checkpoint of this step, then reports phase `after`
 * (with `after_detail`, may be NULL). */
static int write_ckpt(Trainer *t, const char *why, Phase after, const char *after_detail)
{
    if (t->id->rank != 0 || t->last_ckpt_step == t->step) return 0;
    send_phase(t, PHASE_CHECKPOINT, why);
    const TrainerArgs *a = t->a;
    CkptMeta meta;
    memset(&meta, 0, sizeof meta);
    meta.step = t->step;
    meta.epoch = t->epoch;
    meta.sampler_pos = t->pos_in_epoch;
    meta.samples = t->samples;
    meta.seed = t->seed;
    meta.world = t->id->world;
    snprintf(meta.model_spec, sizeof meta.model_spec, "%s", a->model);
    snprintf(meta.dataset, sizeof meta.dataset, "%s", t->ds.name);
    meta.dataset_size = t->ds.n;
    meta.batch_size = a->batch_size;
    meta.grad_accum = a->grad_accum;
    meta.shuffle = a->shuffle;
    meta.drop_last = a->drop_last;
    meta.sched = t->sched;
    meta.last_lr = t->last_lr;
    char path[512], err[512];
    int64_t bytes = 0;
    double t0 = mono_ms_f();
    int rc = 0;
    /* On the GPU the host copies are brought up to date first. */
    if (t->g && (cuda_mlp_get_params(t->g, t->m.params, err, sizeof err) ||
                 cuda_mlp_get_optim(t->g, &t->o, err, sizeof err)))
        rc = -1;
    if (rc == 0) rc = ckpt_write(a->ckpt_dir, &meta, &t->m, &t->o, (int)a->keep_last, path, sizeof path, &bytes,
                        err, sizeof err);
    Msg m;
    msg_init(&m, MSG_CKPT);
    m.u.ckpt.step = t->step;
    m.u.ckpt.epoch = t->epoch;
    m.u.ckpt.ok = rc == 0;
    m.u.ckpt.ms = mono_ms_f() - t0;
    m.u.ckpt.bytes = bytes;
    if (rc == 0) {
        char abs[PROTO_STR_LONG];
        if (!realpath(path, abs)) snprintf(abs, sizeof abs, "%s", path);
        snprintf(m.u.ckpt.path, sizeof m.u.ckpt.path, "%s", abs);
        t->last_ckpt_step = t->step;
    } else {
        snprintf(m.u.ckpt.error, sizeof m.u.ckpt.error, "%.*s", (int)sizeof m.u.ckpt.error - 1, err);
        fprintf(stderr, "ddptop-worker rank 0: checkpoint failed: %s\n", err);
    }
    uplink_send_important(t->up, &m);
    /* A failed checkpoint is reported, not fatal: training goes on and the
     * earlier checkpoints are untouched. */
    send_phase(t, after, after_detail);
    return 0;
}

/* Backward hook: tensor `tensor` has its final gradient for this
 * micro-batch. Adds the accumulated micro-batches, and hands the bucket to
 * the communication thread when this was its last tensor. */
static void on_grad_ready(void *ctx, int tensor)
{
    Trainer *t = ctx;
    const ModelTensor *mt = &t->m.tensors[tensor];
    if (t->add_acc) {
        float *g = t->m.grads + mt->offset;
        const float *acc = t->acc + mt->offset;
        for (size_t i = 0; i < mt->numel; i++) g[i] = acc[i] + g[i];
    }
    int b = t->tensor_bucket[tensor];
    const Bucket *bk = &t->buckets[b];
    if (tensor != bk->last_tensor || t->hook_failed) return;
    RedOp op;
    memset(&op, 0, sizeof op);
    op.kind = RED_ALLREDUCE;
    op.buf = t->m.grads + bk->offset;
    op.n = bk->numel;
    op.tag = (uint32_t)b;
    op.scale = t->bucket_scale;
    op.bucket = b;
    if (bk->offset == 0) {
        /* The last bucket carries the command flags, never scaled. */
        op.buf -= FL_COUNT;
        op.n += FL_COUNT;
        op.scale_from = FL_COUNT;
    }
    /* The last bucket is waited for at once: leave the communication
     * thread asleep and let the main thread run it if it is idle. */
    int64_t id = reducer_submit(t->red, &op, tensor != 0, t->err, sizeof t->err);
    if (id < 0) {
        t->hook_failed = true;
        return;
    }
    t->bucket_op[t->n_submitted++] = id;
}

/* The end of a step, either device: counters, the throughput sums and the
 * step message (s has its timings; comm_ms and exposed_ms are capped here). */
static void step_done(Trainer *t, MsgStep *sp, int64_t u, double loss, double lr, double comm_ms, double t0,
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
    if (t->g) {
        /* GPU memory in use: cudaMemGetInfo at most once a second */
        if (end - t->mem_at_ms >= 1000 || t->mem_at_ms == 0) {
            char e[160];
            if (gpu_mem_info(&t->mem_used, &t->mem_total, e, sizeof e)) t->mem_used = t->mem_total = 0;
            t->mem_at_ms = end;
        }
        s.dev_mem = t->mem_used;
        s.dev_mem_total = t->mem_total;
    }
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

/* One optimizer step from sample `off` of the rank's shard: up to
 * --grad-accum micro-batches. *used gets the samples consumed, *g what the
 * ranks agreed. Returns 0 or -1 (t->err). */
static int train_step(Trainer *t, int64_t off, int64_t *used, Agreed *g)
{
    const TrainerArgs *a = t->a;
    const int64_t bs = a->batch_size;
    int64_t left_batches = (t->ns - off + bs - 1) / bs;
    int micro = (int)(left_batches < a->grad_accum ? left_batches : a->grad_accum);
    MsgStep s;
    memset(&s, 0, sizeof s);
    double t0 = mono_ms_f(), data_ms = 0;

    /* Flags ride just before grads[0], i.e. at the front of the last bucket. */
    float *fl = t->m.grads - FL_COUNT;
    put_flags(t, fl);
    t->bucket_scale = (float)(1.0 / ((double)micro * (double)t->id->world));
    t->n_submitted = 0;
    t->hook_failed = false;
    double loss_sum = 0;
    int64_t u = 0;
    const int dim = t->ds.dim;
    for (int k = 0; k < micro; k++) {
        double d0 = mono_ms_f();
        int bk = (int)(t->ns - (off + u) < bs ? t->ns - (off + u) : bs);
        for (int i = 0; i < bk; i++) {
            int64_t j = t->idx[off + u + i];
            memcpy(t->xb + (size_t)i * dim, t->ds.x + (size_t)j * dim, (size_t)dim * sizeof(float));
            t->yb[i] = t->ds.y[j];
        }
        data_ms += mono_ms_f() - d0;
        bool last = k == micro - 1;
        t->add_acc = last && micro > 1;
        double f = 0, b = 0;
        double loss = mlp_forward_backward(&t->m, t->xb, t->yb, bk, last ? on_grad_ready : NULL, t, &f, &b);
        s.fwd_ms += f;
        s.bwd_ms += b;
        loss_sum += loss;
        u += bk;
        if (!last) {
            /* DDP's no_sync: keep the micro-batch's gradients locally. */
            const float *gr = t->m.grads;
            if (k == 0) memcpy(t->acc, gr, t->m.n_params * sizeof(float));
            else for (size_t i = 0; i < t->m.n_params; i++) t->acc[i] = t->acc[i] + gr[i];
        }
    }
    double w0 = mono_ms_f();
    if (t->n_submitted > 0 &&
        reducer_wait(t->red, t->bucket_op[t->n_submitted - 1], beat_cb, t, BEAT_MS, t->err, sizeof t->err))
        return -1;
    if (t->hook_failed) return -1;
    if (t->n_submitted != t->nb) {
        snprintf(t->err, sizeof t->err, "the model rejected a batch at step %" PRId64 " (bad label or size)",
                 t->step + 1);
        return -1;
    }
    s.exposed_ms = mono_ms_f() - w0;
    double comm_ms = 0;
    for (int i = 0; i < t->n_submitted; i++) {
        const RedOp *op = reducer_op(t->red, t->bucket_op[i]);
        if (op) comm_ms += (op->done_ns - op->start_ns) / 1e6;
    }
    *g = agree(t, fl);

    double lr = schedule_lr(&t->sched, t->step);
    double t1 = mono_ms_f();
    optim_step(&t->o, t->m.params, t->m.grads, lr);
    s.opt_ms = mono_ms_f() - t1;
    t->last_lr = lr;

    step_done(t, &s, u, loss_sum / micro, lr, comm_ms, t0, data_ms);
    *used = u;
    if (a->telemetry)
        for (int i = 0; i < t->n_submitted; i++) send_coll(t, reducer_op(t->red, t->bucket_op[i]), t->step);
    return 0;
}

/* --device cuda: a bucket's last tensor is queued; start its all-reduce
 * once its `ready` event has completed (NCCL: queued on its own stream,
 * overlapping the rest of backward; Gloo: staged through host memory now,
 * backward queued on afterwards). Flags ride in front of the last bucket;
 * the 1/(micro-batches * world) scale was applied by backward. */
static void on_grad_ready_gpu(void *ctx, int tensor, void *ready)
{
    Trainer *t = ctx;
    int b = t->tensor_bucket[tensor];
    const Bucket *bk = &t->buckets[b];
    if (tensor != bk->last_tensor || t->hook_failed) return;
    float *buf = cuda_mlp_grads(t->g) + bk->offset;
    size_t n = bk->numel;
    if (bk->offset == 0) {
        buf -= FL_COUNT;
        n += FL_COUNT;
    }
    if (comm_allreduce_sum_f32_start(t->comm, buf, n, (uint32_t)b, ready, &t->tickets[t->n_submitted],
                                     t->err, sizeof t->err)) {
        t->hook_failed = true;
        return;
    }
    t->bucket_op[t->n_submitted++] = b;   /* on the GPU: the bucket of each ticket */
}

/* train_step on the GPU: the same step, queued on the compute stream; the
 * host waits once, in cuda_mlp_finish_step (heartbeats meanwhile; past
 * --timeout the communicator is aborted: a collective is stuck). With
 * --grad-accum > 1 each earlier micro-batch's loss costs one more wait. */
static int train_step_gpu(Trainer *t, int64_t off, int64_t *used, Agreed *g)
{
    const TrainerArgs *a = t->a;
    const int64_t bs = a->batch_size;
    int64_t left_batches = (t->ns - off + bs - 1) / bs;
    int micro = (int)(left_batches < a->grad_accum ? left_batches : a->grad_accum);
    MsgStep s;
    memset(&s, 0, sizeof s);
    double t0 = mono_ms_f(), data_ms = 0;
    char *err = t->err;
    const size_t el = sizeof t->err;

    float fl[FL_COUNT];
    put_flags(t, fl);
    if (cuda_mlp_write_pad(t->g, fl, FL_COUNT, err, el)) return -1;
    float scale = (float)(1.0 / ((double)micro * (double)t->id->world));
    t->n_submitted = 0;
    t->hook_failed = false;
    double loss_sum = 0, loss = 0;
    int64_t u = 0;
    const int dim = t->ds.dim;
    CudaMlpTimes tm;
    for (int k = 0; k < micro; k++) {
        double d0 = mono_ms_f();
        int bk = (int)(t->ns - (off + u) < bs ? t->ns - (off + u) : bs);
        if (t->data_on_gpu) {
            if (cuda_mlp_gather_batch(t->g, t->idx + off + u, bk, err, el)) return -1;
        } else {
            float *x;
            int32_t *y;
            if (cuda_mlp_host_batch(t->g, &x, &y, err, el)) return -1;
            for (int i = 0; i < bk; i++) {
                int64_t j = t->idx[off + u + i];
                memcpy(x + (size_t)i * dim, t->ds.x + (size_t)j * dim, (size_t)dim * sizeof(float));
                y[i] = t->ds.y[j];
            }
            if (cuda_mlp_load_batch(t->g, x, y, bk, err, el)) return -1;
        }
        data_ms += mono_ms_f() - d0;
        bool last = k == micro - 1;
        if (cuda_mlp_forward_backward(t->g, scale, k > 0, last ? on_grad_ready_gpu : NULL, t, err, el) ||
            t->hook_failed)
            return -1;
        u += bk;
        if (!last) {
            if (cuda_mlp_finish_step(t->g, 0, &loss, NULL, 0, &tm, err, el)) return -1;
            loss_sum += loss;
            s.fwd_ms += tm.fwd_ms;
            s.bwd_ms += tm.bwd_ms;
        }
    }
    if (t->n_submitted != t->nb) {
        snprintf(err, el, "step %" PRId64 ": %d of %d gradient buckets were all-reduced", t->step + 1,
                 t->n_submitted, t->nb);
        return -1;
    }
    double lr = schedule_lr(&t->sched, t->step);
    if (comm_join(t->comm, err, el) || cuda_mlp_optim_step(t->g, lr, err, el)) return -1;
    float red[FL_COUNT];
    double w0 = mono_ms_f();
    int rc;
    while ((rc = cuda_mlp_finish_step(t->g, BEAT_MS, &loss, red, FL_COUNT, &tm, err, el)) == 1) {
        send_beat(t);
        if (mono_ms_f() - w0 > a->timeout_s * 1e3) {
            comm_abort(t->comm);
            snprintf(err, el, "step %" PRId64 ": the gradient all-reduce did not finish within --timeout %g s "
                     "(a rank is gone or stuck): communicator aborted", t->step + 1, a->timeout_s);
            return -1;
        }
    }
    if (rc) return -1;
    loss_sum += loss;
    s.fwd_ms += tm.fwd_ms;
    s.bwd_ms += tm.bwd_ms;
    s.opt_ms = tm.opt_ms;
    CommTiming ct[BUCKET_MAX];
    double comm_ms = 0;
    for (int i = 0; i < t->n_submitted; i++) {
        int r = comm_timing(t->comm, t->tickets[i], &ct[i], err, el);
        if (r < 0) return -1;
        if (r == 1) ct[i].start_ns = ct[i].done_ns = 0;
        comm_ms += (ct[i].done_ns - ct[i].start_ns) / 1e6;
    }
    /* NCCL: what the optimizer waited for after backward. Gloo on CUDA ran
     * each bucket inside backward's hook, none of it hidden. */
    s.exposed_ms = !strcmp(t->id->backend, "nccl") ? tm.comm_wait_ms : comm_ms;
    *g = agree(t, red);
    t->last_lr = lr;
    step_done(t, &s, u, loss_sum / micro, lr, comm_ms, t0, data_ms);
    *used = u;
    if (a->telemetry)
        for (int i = 0; i < t->n_submitted; i++) {
            RedOp op;
            memset(&op, 0, sizeof op);
            op.kind = RED_ALLREDUCE;
            const Bucket *bk = &t->buckets[t->bucket_op[i]];
            op.n = bk->numel + (bk->offset == 0 ? FL_COUNT : 0);
            op.bucket = (int)t->bucket_op[i];
            op.enq_ns = op.start_ns = ct[i].start_ns;
            op.done_ns = ct[i].done_ns;
            send_coll(t, &op, t->step);
        }
    return 0;
}

/* A one-off sum of n host floats (n <= FL_COUNT) over the ranks, through
 * the reducer; `report` sends it as a coll message. On the GPU the values
 * travel in the pad before grads[0], since NCCL reduces device memory. */
static int small_allreduce(Trainer *t, float *v, int n, uint32_t tag, bool report)
{
    RedOp op;
    memset(&op, 0, sizeof op);
    op.kind = RED_ALLREDUCE;
    op.buf = v;
    op.n = (size_t)n;
    op.tag = tag;
    op.scale = 1.0f;
    op.bucket = -1;
    if (t->g) {
        if (cuda_mlp_write_pad(t->g, v, n, t->err, sizeof t->err)) return -1;
        op.buf = cuda_mlp_grads(t->g) - n;
    }
    int rc = report ? collective(t, &op) : reducer_run(t->red, &op, beat_cb, t, BEAT_MS, t->err, sizeof t->err);
    if (rc) return -1;
    if (t->g && cuda_mlp_finish_step(t->g, 0, NULL, v, n, NULL, t->err, sizeof t->err)) return -1;
    return 0;
}

/* Accuracy and loss on the evaluation set, split over the ranks without
 * padding (rank r takes samples r, r+W, ...), counts all-reduced: every
 * rank ends with the job's numbers; rank 0 reports them. A rank that cannot
 * load the set says so in the all-reduce, and every rank turns evaluation
 * off together. */
static int run_eval(Trainer *t)
{
    char err[512] = "";
    float red[4] = {0, 0, 0, 0};   /* correct, total, loss sum, ranks that failed */
    if (!t->eval_loaded) {
        if (load_eval(t, err, sizeof err)) red[3] = 1;
        else t->eval_loaded = true;
    }
    if (t->eval_loaded) {
        const int W = t->id->world, dim = t->eval_ds.dim;
        int64_t correct = 0, total = 0;
        double loss = 0;
        int64_t i = t->id->rank;
        if (t->g) {
            /* This rank's rows, gathered once, evaluated on the GPU. */
            int64_t n = (t->eval_ds.n - i + W - 1) / W;
            float *x = malloc((size_t)(n > 0 ? n : 1) * dim * sizeof(float));
            int32_t *y = malloc((size_t)(n > 0 ? n : 1) * sizeof(int32_t));
            if (x && y) {
                for (int64_t k = 0; k < n; k++, i += W) {
                    memcpy(x + (size_t)k * dim, t->eval_ds.x + (size_t)i * dim, (size_t)dim * sizeof(float));
                    y[k] = t->eval_ds.y[i];
                }
                if (cuda_mlp_evaluate(t->g, x, y, n, &correct, &loss, err, sizeof err)) red[3] = 1;
                else total = n;
            } else {
                snprintf(err, sizeof err, "out of memory for the evaluation set");
                red[3] = 1;
            }
            free(x);
            free(y);
            i = t->eval_ds.n;   /* done: skip the CPU loop */
        }
        while (i < t->eval_ds.n) {
            int b = 0;
            for (; b < t->m.max_batch && i < t->eval_ds.n; b++, i += W) {
                memcpy(t->xb + (size_t)b * dim, t->eval_ds.x + (size_t)i * dim, (size_t)dim * sizeof(float));
                t->yb[b] = t->eval_ds.y[i];
            }
            int64_t c = mlp_evaluate(&t->m, t->xb, t->yb, b, &loss);
            if (c < 0) { red[3] = 1; break; }
            correct += c;
            total += b;
        }
        red[0] = (float)correct;
        red[1] = (float)total;
        red[2] = (float)loss;
    }
    if (small_allreduce(t, red, 4, TAG_EVAL, true)) return -1;
    if (red[3] > 0.5f) {
        t->eval_off = true;
        if (err[0]) fprintf(stderr, "ddptop-worker rank %d: evaluation off: %s\n", t->id->rank, err);
        if (t->id->rank == 0)
            send_log(t, "warn", "evaluation turned off: %s", err[0] ? err : "another rank could not load the test set");
        return 0;
    }
    if (t->id->rank == 0 && red[1] > 0) {
        Msg m;
        msg_init(&m, MSG_EVAL);
        MsgEval *e = &m.u.eval;
        e->epoch = t->epoch;
        e->step = t->step;
        e->correct = (int64_t)red[0];
        e->total = (int64_t)red[1];
        e->accuracy = (double)red[0] / (double)red[1];
        e->loss = (double)red[2] / (double)red[1];
        /* ddptop's job model turns it into the event line users read. */
        uplink_send_important(t->up, &m);
    }
    return 0;
}

/* Paused after an agreed step: every PAUSE_ROUND_MS, poll commands and
 * all-reduce the flags alone, so every rank leaves the pause at the same
 * round — on resume, on stop (*stop set) — and a checkpoint asked for
 * meanwhile is written at that round. No collective waits longer than a
 * round, so a long pause never meets the collective timeout. */
static int pause_loop(Trainer *t, bool *stop)
{
    char detail[64];
    snprintf(detail, sizeof detail, "paused after step %" PRId64, t->step);
    send_phase(t, PHASE_PAUSED, detail);
    for (;;) {
        struct timespec ts = {0, PAUSE_ROUND_MS * 1000000L};
        nanosleep(&ts, NULL);
        poll_commands(t);
        put_flags(t, t->flags_pause);
        if (small_allreduce(t, t->flags_pause, FL_COUNT, TAG_PAUSE_FLAGS, false)) return -1;
        Agreed g = agree(t, t->flags_pause);
        /* back to paused after it: what comes next (train, stopping) says so itself */
        if (g.ckpt) write_ckpt(t, "requested while paused", PHASE_PAUSED, detail);
        if (g.stop) {
            *stop = true;
            return 0;
        }
        if (!g.pause) {
            send_phase(t, PHASE_TRAIN, "resumed");
            return 0;
        }
        maybe_beat(t);
    }
}

/* The bucket layout, in the order the all-reduces start, e.g.
 * "gradient buckets (first 1 MB, then 25 MB): [4.bias 4.weight ...] 1077288 B". */
static void log_buckets(Trainer *t)
{
    char s[PROTO_STR_LONG];
    size_t at = (size_t)snprintf(s, sizeof s, "gradient buckets (first %g MB, then %g MB):",
                                 BUCKET_FIRST_CAP_BYTES / 1048576.0, t->a->bucket_cap_mb);
    for (int b = 0; b < t->nb && at < sizeof s; b++) {
        const Bucket *bk = &t->buckets[b];
        for (int k = bk->first_tensor; k >= bk->last_tensor && at < sizeof s; k--)
            at += (size_t)snprintf(s + at, sizeof s - at, "%s%s", k == bk->first_tensor ? " [" : " ",
                                   t->m.tensors[k].name);
        if (at < sizeof s) at += (size_t)snprintf(s + at, sizeof s - at, "] %zu B", bk->numel * sizeof(float));
    }
    send_log(t, "info", "%s", s);
}

static void log_throughput(Trainer *t)
{
    int64_t n = t->step - t->first_step;
    if (t->first_step == 0) return;
    double secs = (t->last_step_end_ms - t->first_step_end_ms) / 1e3;
    double per = n > 0 ? 1.0 / (double)n : 0;
    send_log(t, "info",
             "throughput: %" PRId64 " steps in %.3f s after the first (%.1f steps/s); first step done at unix %.6f; "
             "per step: data %.3f ms, compute %.3f ms, comm %.3f ms (exposed %.3f), optimizer %.3f ms, step %.3f ms, "
             "telemetry %.4f ms; between steps %.3f ms (evaluation %.3f, new shards %.3f)",
             n, secs, secs > 0 ? n / secs : 0.0, t->first_step_unix_ns / 1e9, t->sum_data_ms * per,
             t->sum_compute_ms * per, t->sum_comm_ms * per, t->sum_exposed_ms * per, t->sum_opt_ms * per,
             t->sum_step_ms * per, (uplink_cost_ns(t->up) - t->tel_ns_at_first) / 1e6 * per,
             (t->last_step_end_ms - t->first_step_end_ms - t->sum_step_ms) * per, t->sum_eval_ms * per,
             t->sum_epoch_ms * per);
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) && errno == EINTR) {}
}

/* Faults that act before a step: kill and stall once this rank has done
 * S steps, slow before every step. */
static void faults_before_step(Trainer *t)
{
    const int r = t->id->rank;
    const Fault *f = fault_find(&t->faults, FAULT_KILL, r);
    if (f && t->step >= f->step) {
        fault_fired(t, f);
        uplink_flush(t->up);
        /* SIGKILL leaves ZeroMQ's I/O thread no time: let it send the sentence first. */
        sleep_ms(200);
        raise(SIGKILL);
    }
    f = fault_find(&t->faults, FAULT_STALL, r);
    if (f && t->step >= f->step) {
        fault_fired(t, f);
        uplink_flush(t->up);
        /* Alive, sockets open, answering nothing: the peers wait in their
         * next all-reduce. ddptop's pings are still read, so its heartbeat
         * does not end the lesson; its stop ladder or death does. */
        for (;;) {
            sleep_ms(200);
            check_ddptop(t);
        }
    }
    f = fault_find(&t->faults, FAULT_SLOW, r);
    if (f) {
        fault_fired(t, f);
        sleep_ms(f->ms);
    }
}

/* unsafe-stop: stop alone after step S + rank, without the flags, as a
 * script that breaks out of its loop on a local condition does. */
static bool unsafe_stop(Trainer *t)
{
    const Fault *f = fault_find(&t->faults, FAULT_UNSAFE_STOP, t->id->rank);
    if (!f || t->step < f->step + t->id->rank) return false;
    fault_fired(t, f);
    snprintf(t->stop_reason, sizeof t->stop_reason, "unsafe stop (fault): rank %d stops alone, no agreement",
             t->id->rank);
    return true;
}

static int train(Trainer *t)
{
    const TrainerArgs *a = t->a;
    SamplerConfig sc = {.size = t->ds.n, .world = t->id->world, .rank = t->id->rank,
                        .seed = t->seed, .shuffle = a->shuffle, .drop_last = a->drop_last};
    int64_t e0 = 0, pos0 = 0;
    if (t->resumed) {
        e0 = t->epoch;
        pos0 = t->pos_in_epoch;
        if (pos0 >= t->ns) { e0++; pos0 = 0; }   /* saved at the end of an epoch */
    }
    bool stop = false;
    if (a->steps && t->step >= a->steps) {
        snprintf(t->stop_reason, sizeof t->stop_reason, "reached --steps %" PRId64 " (nothing left after the checkpoint)", a->steps);
        return 0;
    }
    for (int64_t e = e0; e < a->epochs && !stop; e++) {
        t->epoch = e;
        /* set_epoch: a new permutation every epoch (the fault forgets it). */
        int64_t order = e;
        const Fault *sk = t->faults.n ? fault_find(&t->faults, FAULT_SKIP_SET_EPOCH, t->id->rank) : NULL;
        if (sk && e > 0) {
            order = 0;
            fault_fired(t, sk);
        }
        double e_t0 = mono_ms_f();
        if (sampler_indices(&sc, order, t->idx, t->err, sizeof t->err)) return -1;
        send_shard(t, &sc);
        t->pend_epoch_ms += mono_ms_f() - e_t0;
        int64_t off = e == e0 ? pos0 : 0;
        t->pos_in_epoch = off;
        while (off < t->ns && !stop) {
            poll_commands(t);
            if (t->faults.n) faults_before_step(t);
            int64_t used = 0;
            Agreed g;
            if ((t->g ? train_step_gpu(t, off, &used, &g) : train_step(t, off, &used, &g))) return -1;
            off += used;
            t->pos_in_epoch = off;
            /* End of an epoch: evaluate before any checkpoint, so that a run
             * resumed from a checkpoint taken here does not evaluate again. */
            if (off >= t->ns && a->eval_every && !t->eval_off && (e + 1) % a->eval_every == 0) {
                double v0 = mono_ms_f();
                if (run_eval(t)) return -1;
                t->pend_eval_ms += mono_ms_f() - v0;
            }
            if (g.ckpt) write_ckpt(t, "requested", PHASE_TRAIN, NULL);
            else if (a->ckpt_every && t->step % a->ckpt_every == 0) write_ckpt(t, "periodic", PHASE_TRAIN, NULL);
            if (g.stop) {
                snprintf(t->stop_reason, sizeof t->stop_reason, "stop requested by ddptop");
                stop = true;
            } else if (a->steps && t->step >= a->steps) {
                snprintf(t->stop_reason, sizeof t->stop_reason, "reached --steps %" PRId64, a->steps);
                stop = true;
            } else if (t->faults.n && unsafe_stop(t)) {
                stop = true;
            } else if (g.pause) {
                if (pause_loop(t, &stop)) return -1;
                if (stop) snprintf(t->stop_reason, sizeof t->stop_reason, "stop requested by ddptop (while paused)");
            }
            maybe_beat(t);
        }
    }
    if (!stop) snprintf(t->stop_reason, sizeof t->stop_reason, "finished %" PRId64 " epochs", a->epochs);
    return 0;
}

/* --resume: weights, optimizer state and position from a checkpoint. The
 * position (and the seed that orders the data) is the checkpoint's; the
 * hyper-parameters are this run's, and differences are said once. */
static int resume_from(Trainer *t, int *status)
{
    const TrainerArgs *a = t->a;
    char dir[4096], note[512];
    CkptMeta meta;
    *status = 2;
    if (ckpt_resolve(a->resume, dir, sizeof dir, t->err, sizeof t->err)) return -1;
    if (ckpt_load(dir, &t->m, &t->o, &meta, t->id->world, note, sizeof note, t->err, sizeof t->err))
        return -1;
    t->resumed = true;
    t->step = meta.step;
    t->epoch = meta.epoch;
    t->pos_in_epoch = meta.sampler_pos;
    t->samples = meta.samples;
    t->last_lr = meta.last_lr;
    t->last_ckpt_step = meta.step;
    t->resume_dataset_size = meta.dataset_size;
    if (meta.seed != a->seed) {
        t->seed = meta.seed;
        if (t->id->rank == 0)
            send_log(t, "warn", "resume: using the checkpoint's seed %" PRIu64 " for the data (--seed %" PRIu64 " ignored)",
                     meta.seed, a->seed);
    }
    if (t->id->rank == 0) {
        if (note[0]) send_log(t, "warn", "resume: %s", note);
        if (meta.batch_size != a->batch_size || meta.grad_accum != a->grad_accum)
            send_log(t, "warn", "resume: saved with --batch-size %" PRId64 " --grad-accum %" PRId64
                     ", this run uses %" PRId64 " and %" PRId64 ": it goes on from the same sample, not bit for bit",
                     meta.batch_size, meta.grad_accum, a->batch_size, a->grad_accum);
        if (meta.sched.base_lr != a->optim.lr || meta.sched.kind != a->lr_schedule ||
            meta.sched.warmup_steps != a->warmup_steps)
            send_log(t, "warn", "resume: the learning-rate settings differ from the checkpoint's (this run's apply)");
        send_log(t, "info", "resuming from %s at step %" PRId64 " (epoch %" PRId64 ", sample %" PRId64 " of the epoch)",
                 dir, meta.step, meta.epoch, meta.sampler_pos);
    }
    *status = 0;
    return 0;
}

/* --device cuda: this rank's GPU (LOCAL_RANK modulo the GPUs here; NCCL
 * refuses two ranks on one, Gloo shares it), the model there with the host
 * weights (and optimizer state when resuming), the dataset uploaded when it
 * fits. Before the hello, so that it names the device. */
static int gpu_setup(Trainer *t)
{
    const TrainerArgs *a = t->a;
    char *err = t->err;
    const size_t el = sizeof t->err;
    int n = 0;
    if (gpu_count(&n, err, el) || gpu_use(t->id->local_rank % n, err, el)) return -1;
    t->gpu = t->id->local_rank % n;
    if (cuda_mlp_new(&t->g, &t->m, &a->optim, (int)a->batch_size, err, el) ||
        cuda_mlp_set_params(t->g, t->m.params, err, el) ||
        (t->resumed && cuda_mlp_set_optim(t->g, &t->o, err, el)))
        return -1;
    int rc = cuda_mlp_upload_dataset(t->g, t->ds.x, t->ds.y, t->ds.n, err, el);
    if (rc < 0) return -1;
    t->data_on_gpu = rc == 0;
    return 0;
}

/* GPU memory, for the log: the model's and the device's in use (the
 * protocol's step message has no field for it). */
static void log_gpu_memory(Trainer *t, const char *when)
{
    char desc[160] = "", e[256];
    int64_t used = 0, total = 0;
    if (gpu_describe(t->gpu, desc, sizeof desc, e, sizeof e)) snprintf(desc, sizeof desc, "?");
    if (gpu_mem_info(&used, &total, e, sizeof e)) used = total = 0;
    send_log(t, "info", "rank %d %s: cuda:%d (%s), %s; this rank's model %.1f MiB%s; device memory in use %.2f of %.2f GiB",
             t->id->rank, when, t->gpu, desc, t->id->backend, cuda_mlp_bytes(t->g) / 1048576.0,
             t->data_on_gpu ? " with the dataset" : ", batches from pinned host memory", used / 1073741824.0,
             total / 1073741824.0);
}

int trainer_run(const TrainerArgs *a, const WorkerIdentity *id, Uplink *up)
{
    Trainer tr;
    memset(&tr, 0, sizeof tr);
    Trainer *t = &tr;
    t->a = a;
    t->id = id;
    t->up = up;
    t->seed = a->seed;
    t->last_ckpt_step = -1;
    t->last_beat_ms = mono_ms_f();
    t->faults = a->faults;
    int status = 0;

    send_phase(t, PHASE_INIT, NULL);
    if (mlp_init(&t->m, a->dims, a->n_linear, (int)a->batch_size, t->err, sizeof t->err)) {
        status = fail(t, 2);
        goto out;
    }
    if (optim_init(&t->o, &a->optim, t->m.n_params, t->err, sizeof t->err)) { status = fail(t, 2); goto out; }
    if (a->resume[0]) {
        int st;
        if (resume_from(t, &st)) { status = fail(t, st); goto out; }
    } else {
        mlp_reset_params(&t->m, a->seed);
        if (a->init_from[0] && ckpt_load_model(a->init_from, &t->m, t->err, sizeof t->err)) {
            status = fail(t, 2);
            goto out;
        }
    }
    if (load_data(t)) { status = fail(t, 2); goto out; }
    SamplerConfig sc = {.size = t->ds.n, .world = id->world, .rank = id->rank,
                        .seed = t->seed, .shuffle = a->shuffle, .drop_last = a->drop_last};
    if (sampler_check(&sc, t->err, sizeof t->err)) { status = fail(t, 2); goto out; }
    t->ns = sampler_num_samples(&sc);
    if (t->ns == 0) {
        snprintf(t->err, sizeof t->err, "rank %d has no samples: dataset of %" PRId64 " over world size %d%s",
                 id->rank, t->ds.n, id->world, a->drop_last ? " with --drop-last" : "");
        status = fail(t, 2);
        goto out;
    }
    t->xb = malloc((size_t)a->batch_size * t->ds.dim * sizeof(float));
    t->yb = malloc((size_t)a->batch_size * sizeof(int32_t));
    t->idx = malloc((size_t)t->ns * sizeof *t->idx);
    if (a->grad_accum > 1) t->acc = malloc(t->m.n_params * sizeof(float));
    if (!t->xb || !t->yb || !t->idx || (a->grad_accum > 1 && !t->acc)) {
        snprintf(t->err, sizeof t->err, "out of memory for a batch");
        status = fail(t, 1);
        goto out;
    }
    t->sched = (Schedule){.kind = a->lr_schedule, .base_lr = a->optim.lr,
                          .warmup_steps = a->warmup_steps, .total_steps = planned_steps(t)};
    if (t->resumed && t->id->rank == 0 && t->ds.n != t->resume_dataset_size)
        send_log(t, "warn", "resume: the checkpoint was taken on %" PRId64 " samples, this dataset has %" PRId64
                 ": the data order differs from the interrupted run's", t->resume_dataset_size, t->ds.n);
    t->nb = bucket_assign(&t->m, a->bucket_cap_mb, BUCKET_FIRST_CAP_BYTES, t->buckets);
    for (int b = 0; b < t->nb; b++)
        for (int k = t->buckets[b].last_tensor; k <= t->buckets[b].first_tensor; k++) t->tensor_bucket[k] = b;
    if (!strcmp(id->device, "cuda") && gpu_setup(t)) { status = fail(t, 1); goto out; }
    send_hello(t);
    if (id->rank == 0) log_buckets(t);
    if (t->g) log_gpu_memory(t, "ready");

    send_phase(t, PHASE_RENDEZVOUS, NULL);
    CommStore store = {.ctx = up, .set = uplink_store_set, .get = uplink_store_get};
    char prefix[128];
    snprintf(prefix, sizeof prefix, "%s/%s", id->job_id, id->backend);
    CommConfig cc = {.backend = id->backend, .rank = id->rank, .world = id->world,
                     .host = id->gloo_host[0] ? id->gloo_host : "127.0.0.1",
                     .prefix = prefix, .timeout_ms = (int64_t)(a->timeout_s * 1000), .store = &store,
                     .device = t->g ? "cuda" : NULL, .stream = t->g ? cuda_mlp_stream(t->g) : NULL};
    if (comm_new(&t->comm, &cc, t->err, sizeof t->err)) { status = fail(t, 1); goto out; }
    if (id->rank == 0 && id->world > 1) send_log(t, "info", "collectives: %s", comm_describe(t->comm));
    if (reducer_new(&t->red, t->comm, t->err, sizeof t->err)) { status = fail(t, 1); goto out; }

    /* DDP: rank 0's parameters everywhere before the first step. */
    send_phase(t, PHASE_BROADCAST, NULL);
    RedOp op;
    memset(&op, 0, sizeof op);
    op.kind = RED_BROADCAST;
    op.buf = t->g ? cuda_mlp_params(t->g) : t->m.params;
    op.n = t->m.n_params;
    op.root = 0;
    op.scale = 1.0f;
    op.bucket = -1;
    if (collective(t, &op)) { status = fail(t, 1); goto out; }

    send_phase(t, PHASE_TRAIN, NULL);
    if (train(t)) { status = fail(t, 1); goto out; }

    log_throughput(t);
    if (t->g) log_gpu_memory(t, "at the end");
    send_log(t, "info", "stopping after step %" PRId64 ": %s", t->step, t->stop_reason);
    if (a->final_ckpt && t->step > 0) write_ckpt(t, "final", PHASE_TRAIN, NULL);
    send_phase(t, PHASE_STOPPING, t->stop_reason);
    /* Nobody destroys the communicator while a peer may still use it
     * (unless the no-barrier fault shows why). */
    const Fault *nb = t->faults.n ? fault_find(&t->faults, FAULT_NO_BARRIER, id->rank) : NULL;
    if (nb) {
        fault_fired(t, nb);
    } else {
        memset(&op, 0, sizeof op);
        op.kind = RED_BARRIER;
        op.scale = 1.0f;
        op.bucket = -1;
        if (collective(t, &op)) { status = fail(t, 1); goto out; }
    }
    send_phase(t, PHASE_DESTROYING, NULL);
    reducer_free(&t->red);
    if (comm_destroy(&t->comm, t->err, sizeof t->err)) { status = fail(t, 1); goto out; }
    cuda_mlp_free(&t->g);
    send_phase(t, PHASE_DESTROYED, NULL);
    Msg m;
    msg_init(&m, MSG_BYE);
    m.u.bye.status = 0;
    m.u.bye.step = t->step;
    uplink_send_important(up, &m);
out:
    reducer_free(&t->red);
    comm_free(&t->comm);
    cuda_mlp_free(&t->g);
    free(t->idx);
    free(t->xb);
    free(t->yb);
    free(t->acc);
    optim_done(&t->o);
    mlp_done(&t->m);
    dataset_done(&t->ds);
    dataset_done(&t->eval_ds);
    return status;
}
