/* trainer.c — one rank of a data-parallel job, the way DDP trains.
 *
 * Per step: gather this rank's batch from its DistributedSampler shard,
 * forward/backward, divide gradients by the world size and all-reduce them
 * bucket by bucket (command flags riding in the last bucket), apply the
 * optimizer, report. Commands (checkpoint, stop) are acted on only at the
 * step where the all-reduced flags say so, which is the same step on every
 * rank — a rank never stops alone, so nobody is left waiting in a
 * collective. See DESIGN.md "Commands take effect at the same step".
 */
#include "trainer.h"

#include <inttypes.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bucket.h"
#include "ckpt.h"
#include "comm.h"
#include "dataset.h"
#include "model.h"
#include "optim.h"
#include "sampler.h"

#define VERSION_STR "0.1.0"
/* Indices sent in a shard message; the rest are summarised by count. */
#define SHARD_IDX_MAX (1 << 20)

/* Command flags in the floats just before grads[0] (MODEL_GRAD_PAD):
 * each rank adds its own view; the sums decide. */
enum { FL_CKPT_ID = 0, FL_CKPT_PENDING, FL_STOP, FL_COUNT };

typedef struct {
    const TrainerArgs *a;
    const WorkerIdentity *id;
    Uplink *up;
    Dataset ds;
    Mlp m;
    Optim o;
    Comm *comm;
    Bucket buckets[BUCKET_MAX];
    int nb;
    int64_t coll_seq;
    float *xb;
    int32_t *yb;
    int64_t *idx;
    int64_t step, epoch, samples, pos_in_epoch;
    /* command agreement */
    int64_t ckpt_seen, ckpt_acted;   /* ckpt_acted is agreed by all ranks */
    bool stop_seen;
    int64_t last_ckpt_step;
    char stop_reason[96];
    char err[512];
} Trainer;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void send_phase(Trainer *t, Phase p, const char *detail)
{
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
    return dataset_make_synthetic(&t->ds, n, in, classes, a->seed, t->err, sizeof t->err);
}

static void send_hello(Trainer *t, const SamplerConfig *sc)
{
    Msg m;
    msg_init(&m, MSG_HELLO);
    MsgHello *h = &m.u.hello;
    h->local_rank = t->id->local_rank;
    h->world = t->id->world;
    h->local_world = t->id->local_world;
    h->pid = getpid();
    gethostname(h->host, sizeof h->host - 1);
    snprintf(h->device, sizeof h->device, "cpu");
    snprintf(h->backend, sizeof h->backend, "gloo");
    snprintf(h->version, sizeof h->version, "ddptop " VERSION_STR " %s", comm_version("gloo"));
    snprintf(h->dataset, sizeof h->dataset, "%s", t->ds.name);
    snprintf(h->model, sizeof h->model, "%s", t->a->model);
    h->params = (int64_t)t->m.n_params;
    h->batch_size = t->a->batch_size;
    int64_t ns = sampler_num_samples(sc);
    h->steps_per_epoch = (ns + t->a->batch_size - 1) / t->a->batch_size;
    h->max_steps = h->steps_per_epoch * t->a->epochs;
    if (t->a->steps && t->a->steps < h->max_steps) h->max_steps = t->a->steps;
    h->dataset_size = t->ds.n;
    uplink_send_important(t->up, &m);
}

static void send_shard(Trainer *t, const SamplerConfig *sc, int64_t n)
{
    Msg m;
    msg_init(&m, MSG_SHARD);
    MsgShard *s = &m.u.shard;
    s->epoch = t->epoch;
    s->seed = (int64_t)sc->seed;
    s->shuffle = sc->shuffle;
    s->drop_last = sc->drop_last;
    s->dataset_size = sc->size;
    s->num_samples = n;
    s->total_size = sampler_total_size(sc);
    s->padding = sampler_padding(sc);
    s->n_idx = (uint32_t)(n < SHARD_IDX_MAX ? n : SHARD_IDX_MAX);
    s->idx = t->idx;   /* borrowed: not freed by us through msg_done */
    uplink_send(t->up, &m);
}

static void send_coll(Trainer *t, const char *op, int bucket, int64_t bytes,
                      int64_t enq, int64_t start, int64_t done)
{
    Msg m;
    msg_init(&m, MSG_COLL);
    MsgColl *c = &m.u.coll;
    c->seq = ++t->coll_seq;
    snprintf(c->op, sizeof c->op, "%s", op);
    c->bucket = bucket;
    c->step = t->step;
    c->bytes = bytes;
    c->enq_ns = enq;
    c->start_ns = start;
    c->done_ns = done;
    double dt = (double)(done - start);
    int w = t->id->world;
    /* nccl-tests: algbw = bytes / time; busbw = algbw * 2(n-1)/n for all-reduce. */
    c->algbw_gbs = dt > 0 ? bytes / dt : 0;
    c->busbw_gbs = !strcmp(op, "allreduce") ? c->algbw_gbs * 2.0 * (w - 1) / w : c->algbw_gbs;
    uplink_send(t->up, &m);
}

/* Drain commands from ddptop into this rank's local view. */
static void poll_commands(Trainer *t)
{
    MsgCmd c;
    int rc;
    while ((rc = uplink_next_cmd(t->up, &c)) == 1) {
        if (!strcmp(c.op, "ckpt")) {
            if (c.id > t->ckpt_seen) t->ckpt_seen = c.id;
        } else if (!strcmp(c.op, "stop")) {
            t->stop_seen = true;
        }
    }
}

static int write_ckpt(Trainer *t, const char *why)
{
    if (t->id->rank != 0 || t->last_ckpt_step == t->step) return 0;
    send_phase(t, PHASE_CHECKPOINT, why);
    CkptMeta meta = {.step = t->step, .epoch = t->epoch, .seed = t->a->seed,
                     .world = t->id->world, .sampler_pos = t->pos_in_epoch,
                     .model_spec = t->a->model};
    char path[512], err[512];
    int64_t bytes = 0;
    double t0 = now_ms();
    int rc = ckpt_write(t->a->ckpt_dir, &meta, &t->m, &t->o, path, sizeof path, &bytes,
                        err, sizeof err);
    Msg m;
    msg_init(&m, MSG_CKPT);
    m.u.ckpt.step = t->step;
    m.u.ckpt.epoch = t->epoch;
    m.u.ckpt.ok = rc == 0;
    m.u.ckpt.ms = now_ms() - t0;
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
    send_phase(t, PHASE_TRAIN, NULL);
    return 0;
}

/* One optimizer step on the batch in t->xb/t->yb. Returns 0 or -1 (t->err). */
static int train_step(Trainer *t, int bs, bool *do_ckpt, bool *do_stop)
{
    MsgStep s;
    memset(&s, 0, sizeof s);
    double t0 = now_ms();
    double loss = mlp_forward_backward(&t->m, t->xb, t->yb, bs, NULL, NULL, &s.fwd_ms, &s.bwd_ms);

    /* Flags ride just before grads[0], i.e. at the front of the last bucket. */
    float *fl = t->m.grads - FL_COUNT;
    bool pending = t->ckpt_seen > t->ckpt_acted;
    fl[FL_CKPT_ID] = pending ? (float)t->ckpt_seen : 0.0f;
    fl[FL_CKPT_PENDING] = pending ? 1.0f : 0.0f;
    fl[FL_STOP] = t->stop_seen ? 1.0f : 0.0f;

    const float inv_w = 1.0f / (float)t->id->world;
    double comm_ms = 0;
    for (int b = 0; b < t->nb; b++) {
        Bucket *bk = &t->buckets[b];
        float *g = t->m.grads + bk->offset;
        /* DDP divides each gradient by the world size as it enters the bucket. */
        for (size_t i = 0; i < bk->numel; i++) g[i] *= inv_w;
        float *base = g;
        size_t n = bk->numel;
        if (bk->offset == 0) { base -= FL_COUNT; n += FL_COUNT; }
        int64_t enq = proto_now_ns();
        int64_t start = enq;
        if (comm_allreduce_sum_f32(t->comm, base, n, (uint32_t)b, t->err, sizeof t->err)) return -1;
        int64_t done = proto_now_ns();
        comm_ms += (done - start) / 1e6;
        send_coll(t, "allreduce", b, (int64_t)(n * sizeof(float)), enq, start, done);
    }

    double t1 = now_ms();
    optim_step(&t->o, t->m.params, t->m.grads, t->a->optim.lr);
    s.opt_ms = now_ms() - t1;

    t->step++;
    t->samples += bs;
    s.epoch = t->epoch;
    s.step = t->step;
    s.loss = loss;
    s.lr = t->a->optim.lr;
    s.samples = t->samples;
    s.comm_ms = comm_ms;
    s.exposed_ms = comm_ms;   /* synchronous buckets: all of it is waited for */
    s.step_ms = now_ms() - t0;
    s.drops = uplink_drops(t->up);
    Msg m;
    msg_init(&m, MSG_STEP);
    m.u.step = s;
    uplink_send(t->up, &m);

    /* The reduced flags are identical on every rank: decide together. */
    if (fl[FL_CKPT_PENDING] > 0.5f) {
        /* Ranks that saw the request proposed its id; agree on the ceiling of
         * their mean so every rank stores the same acted id (exact in float). */
        double id = ceil((double)fl[FL_CKPT_ID] / (double)fl[FL_CKPT_PENDING] - 1e-6);
        if (id > t->ckpt_acted) t->ckpt_acted = (int64_t)id;
        *do_ckpt = true;
    }
    if (fl[FL_STOP] > 0.5f) *do_stop = true;
    return 0;
}

static int train(Trainer *t)
{
    const TrainerArgs *a = t->a;
    SamplerConfig sc = {.size = t->ds.n, .world = t->id->world, .rank = t->id->rank,
                        .seed = a->seed, .shuffle = a->shuffle, .drop_last = a->drop_last};
    int64_t ns = sampler_num_samples(&sc);
    t->idx = malloc((size_t)(ns > 0 ? ns : 1) * sizeof *t->idx);
    if (!t->idx) { snprintf(t->err, sizeof t->err, "out of memory for sampler indices"); return -1; }
    if (ns == 0) {
        snprintf(t->err, sizeof t->err, "rank %d has no samples: dataset of %" PRId64 " over world size %d%s",
                 t->id->rank, t->ds.n, t->id->world, a->drop_last ? " with --drop-last" : "");
        return -1;
    }
    bool stop = false;
    for (int64_t e = 0; e < a->epochs && !stop; e++) {
        t->epoch = e;
        /* set_epoch: a new permutation every epoch. */
        if (sampler_indices(&sc, t->epoch, t->idx, t->err, sizeof t->err)) return -1;
        send_shard(t, &sc, ns);
        t->pos_in_epoch = 0;
        for (int64_t off = 0; off < ns && !stop; off += a->batch_size) {
            int bs = (int)(ns - off < a->batch_size ? ns - off : a->batch_size);
            int dim = t->ds.dim;
            for (int i = 0; i < bs; i++) {
                int64_t k = t->idx[off + i];
                memcpy(t->xb + (size_t)i * dim, t->ds.x + (size_t)k * dim, (size_t)dim * sizeof(float));
                t->yb[i] = t->ds.y[k];
            }
            poll_commands(t);
            bool do_ckpt = false, do_stop = false;
            if (train_step(t, bs, &do_ckpt, &do_stop)) return -1;
            t->pos_in_epoch = off + bs;
            if (do_ckpt) write_ckpt(t, "requested");
            else if (a->ckpt_every && t->step % a->ckpt_every == 0) write_ckpt(t, "periodic");
            if (do_stop) {
                snprintf(t->stop_reason, sizeof t->stop_reason, "stop requested by ddptop");
                stop = true;
            } else if (a->steps && t->step >= a->steps) {
                snprintf(t->stop_reason, sizeof t->stop_reason, "reached --steps %" PRId64, a->steps);
                stop = true;
            }
        }
    }
    if (!stop) snprintf(t->stop_reason, sizeof t->stop_reason, "finished %" PRId64 " epochs", a->epochs);
    return 0;
}

int trainer_run(const TrainerArgs *a, const WorkerIdentity *id, Uplink *up)
{
    Trainer tr;
    memset(&tr, 0, sizeof tr);
    Trainer *t = &tr;
    t->a = a;
    t->id = id;
    t->up = up;
    t->last_ckpt_step = -1;
    int status = 0;

    send_phase(t, PHASE_INIT, NULL);
    if (load_data(t)) { status = fail(t, 2); goto out; }
    if (mlp_init(&t->m, a->dims, a->n_linear, (int)a->batch_size, t->err, sizeof t->err)) {
        status = fail(t, 2);
        goto out;
    }
    mlp_reset_params(&t->m, a->seed);
    if (a->init_from[0] && ckpt_load_model(a->init_from, &t->m, t->err, sizeof t->err)) {
        status = fail(t, 2);
        goto out;
    }
    if (optim_init(&t->o, &a->optim, t->m.n_params, t->err, sizeof t->err)) { status = fail(t, 2); goto out; }
    t->xb = malloc((size_t)a->batch_size * t->ds.dim * sizeof(float));
    t->yb = malloc((size_t)a->batch_size * sizeof(int32_t));
    if (!t->xb || !t->yb) { snprintf(t->err, sizeof t->err, "out of memory for a batch"); status = fail(t, 1); goto out; }
    t->nb = bucket_assign(&t->m, a->bucket_cap_mb, BUCKET_FIRST_CAP_BYTES, t->buckets);

    SamplerConfig sc = {.size = t->ds.n, .world = id->world, .rank = id->rank,
                        .seed = a->seed, .shuffle = a->shuffle, .drop_last = a->drop_last};
    if (sampler_check(&sc, t->err, sizeof t->err)) { status = fail(t, 2); goto out; }
    send_hello(t, &sc);

    send_phase(t, PHASE_RENDEZVOUS, NULL);
    CommStore store = {.ctx = up, .set = uplink_store_set, .get = uplink_store_get};
    char prefix[128];
    snprintf(prefix, sizeof prefix, "%s/gloo", id->job_id);
    CommConfig cc = {.backend = "gloo", .rank = id->rank, .world = id->world,
                     .host = id->master_addr[0] ? id->master_addr : "127.0.0.1",
                     .prefix = prefix, .timeout_ms = (int64_t)(a->timeout_s * 1000), .store = &store};
    if (comm_new(&t->comm, &cc, t->err, sizeof t->err)) { status = fail(t, 1); goto out; }

    /* DDP: rank 0's parameters everywhere before the first step. */
    send_phase(t, PHASE_BROADCAST, NULL);
    int64_t b0 = proto_now_ns();
    if (comm_broadcast_f32(t->comm, t->m.params, t->m.n_params, 0, t->err, sizeof t->err)) {
        status = fail(t, 1);
        goto out;
    }
    send_coll(t, "broadcast", -1, (int64_t)(t->m.n_params * sizeof(float)), b0, b0, proto_now_ns());

    send_phase(t, PHASE_TRAIN, NULL);
    if (train(t)) { status = fail(t, 1); goto out; }

    send_log(t, "info", "stopping after step %" PRId64 ": %s", t->step, t->stop_reason);
    if (a->final_ckpt && t->step > 0) write_ckpt(t, "final");
    send_phase(t, PHASE_STOPPING, t->stop_reason);
    /* Nobody destroys the communicator while a peer may still use it. */
    if (comm_barrier(t->comm, t->err, sizeof t->err)) { status = fail(t, 1); goto out; }
    send_phase(t, PHASE_DESTROYING, NULL);
    comm_free(&t->comm);
    send_phase(t, PHASE_DESTROYED, NULL);
    Msg m;
    msg_init(&m, MSG_BYE);
    m.u.bye.status = 0;
    m.u.bye.step = t->step;
    uplink_send_important(up, &m);
out:
    comm_free(&t->comm);
    free(t->idx);
    free(t->xb);
    free(t->yb);
    optim_done(&t->o);
    mlp_done(&t->m);
    dataset_done(&t->ds);
    return status;
}
