/* compute_cpu.c — the compute face on the CPU: model.c and optim.c on the
 * host Mlp and Optim, each bucket handed to the communication thread
 * (reducer.c) from backward's hook, so its all-reduce overlaps the rest of
 * backward. Main thread; the all-reduces run on the reducer's.
 */
#include "train/compute.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "train/report.h"
#include "train/state.h"
#include "train/step.h"

/* --precision: the host Mlp computes in it (model.c keeps the rounded
 * weight copy); --grad-dtype bf16: the buckets' bf16 copies, sized once. */
static int cpu_setup(Trainer *t)
{
    if (mlp_set_precision(&t->m, t->a->precision, t->err, sizeof t->err)) return -1;
    if (t->a->grad_dtype != COMM_BF16) return 0;
    t->wire = malloc(t->m.n_params * sizeof *t->wire);
    if (!t->wire) {
        snprintf(t->err, sizeof t->err, "out of memory for the bf16 gradient buckets (%zu elements)", t->m.n_params);
        return -1;
    }
    return 0;
}

static void cpu_free(Trainer *t)
{
    free(t->wire);
    t->wire = NULL;
}

static void cpu_device_name(const Trainer *t, char *buf, size_t n)
{
    (void)t;
    snprintf(buf, n, "cpu");
}

static void *cpu_stream(Trainer *t)
{
    (void)t;
    return NULL;
}

static float *cpu_params(Trainer *t) { return t->m.params; }

static float *cpu_grads(Trainer *t) { return t->m.grads; }

static int cpu_pad_write(Trainer *t, const float *v, int n)
{
    memcpy(t->m.grads - n, v, (size_t)n * sizeof(float));
    return 0;
}

static int cpu_pad_read(Trainer *t, float *v, int n)
{
    memcpy(v, t->m.grads - n, (size_t)n * sizeof(float));
    return 0;
}

static int cpu_load_batch(Trainer *t, const int64_t *idx, int n)
{
    const int dim = t->ds.dim;
    for (int i = 0; i < n; i++) {
        int64_t j = idx[i];
        memcpy(t->xb + (size_t)i * dim, t->ds.x + (size_t)j * dim, (size_t)dim * sizeof(float));
        t->yb[i] = t->ds.y[j];
    }
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
    const bool bf16 = t->a->grad_dtype == COMM_BF16;
    if (bf16) {
        /* bf16_compress_hook: the 1/K of --grad-accum in FP32 (where the
         * user's loss / K puts it), then the cast, then / world in bf16 */
        op.dtype = COMM_BF16;
        op.wire = t->wire + bk->offset;
        op.scale = (float)(1.0 / t->micro);
        op.div = t->id->world;
    }
    if (bk->offset == 0) {
        /* The last bucket carries the command flags, never scaled (under
         * bf16 they follow it in FP32, below). The step's loss is known by
         * now (forward came first): a NaN or inf one is this rank's flag in
         * the same all-reduce. */
        step_flag_loss(t, t->m.grads - FL_COUNT, (t->loss_before_last + t->m.loss) / t->micro);
        if (!bf16) {
            op.buf -= FL_COUNT;
            op.n += FL_COUNT;
            op.scale_from = FL_COUNT;
        }
    }
    /* The last bucket is waited for at once: leave the communication
     * thread asleep and let the main thread run it if it is idle. */
    int64_t id = reducer_submit(t->red, &op, tensor != 0, t->err, sizeof t->err);
    if (id < 0) {
        t->hook_failed = true;
        return;
    }
    t->bucket_op[t->n_submitted++] = id;
    if (bf16 && bk->offset == 0) {
        RedOp fl;
        memset(&fl, 0, sizeof fl);
        fl.kind = RED_ALLREDUCE;
        fl.buf = t->m.grads - FL_COUNT;
        fl.n = FL_COUNT;
        fl.tag = TAG_STEP_FLAGS;
        fl.scale = 1.0f;
        fl.bucket = -1;
        t->flags_op = reducer_submit(t->red, &fl, false, t->err, sizeof t->err);
        if (t->flags_op < 0) t->hook_failed = true;
    }
}

static int cpu_forward_backward(Trainer *t, int k, int micro, int n, MsgStep *s, double *loss_sum)
{
    bool last = k == micro - 1;
    t->add_acc = last && micro > 1;
    if (last) t->flags_op = 0;
    t->loss_before_last = *loss_sum;
    t->micro = micro;
    /* The weights moved since the last step (optimizer, broadcast, resume):
     * TF32/BF16 round their copy once, for every micro-batch of the step. */
    if (k == 0) mlp_params_changed(&t->m);
    double f = 0, b = 0;
    double loss = mlp_forward_backward(&t->m, t->xb, t->yb, n, last ? on_grad_ready : NULL, t, &f, &b);
    s->fwd_ms += f;
    s->bwd_ms += b;
    *loss_sum += loss;
    if (!last) {
        /* DDP's no_sync: keep the micro-batch's gradients locally. */
        const float *gr = t->m.grads;
        if (k == 0)
            memcpy(t->acc, gr, t->m.n_params * sizeof(float));
        else
            for (size_t i = 0; i < t->m.n_params; i++) t->acc[i] = t->acc[i] + gr[i];
    }
    return 0;
}

static int cpu_finish_step(Trainer *t, double lr, float *flags, MsgStep *s, double *loss_sum, double *comm_ms)
{
    (void)loss_sum; /* every micro-batch's loss is known after its forward */
    double w0 = mono_ms_f();
    int64_t last = t->flags_op > 0 ? t->flags_op : t->n_submitted > 0 ? t->bucket_op[t->n_submitted - 1] : 0;
    if (last > 0 && reducer_wait(t->red, last, report_wait_cb, t, PUMP_MS, t->err, sizeof t->err)) return -1;
    if (t->hook_failed) return -1;
    if (t->n_submitted != t->nb) {
        snprintf(t->err, sizeof t->err, "the model rejected a batch at step %" PRId64 " (bad label or size)",
                 t->step + 1);
        return -1;
    }
    s->exposed_ms = mono_ms_f() - w0;
    *comm_ms = 0;
    for (int i = 0; i < t->n_submitted; i++) {
        const RedOp *op = reducer_op(t->red, t->bucket_op[i]);
        if (op) *comm_ms += (op->done_ns - op->start_ns) / 1e6;
    }
    cpu_pad_read(t, flags, FL_COUNT);
    double t1 = mono_ms_f();
    optim_step(&t->o, t->m.params, t->m.grads, lr);
    s->opt_ms = mono_ms_f() - t1;
    return 0;
}

static const RedOp *cpu_bucket_coll(Trainer *t, int i, RedOp *scratch)
{
    (void)scratch;
    return reducer_op(t->red, t->bucket_op[i]);
}

static void cpu_step_mem(Trainer *t, double now_ms, int64_t *used, int64_t *total)
{
    (void)t, (void)now_ms;
    *used = *total = 0;
}

/* In batches of the training batch size, through xb and yb. */
static int cpu_evaluate(Trainer *t, int64_t *correct, int64_t *total, double *loss, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    const int W = t->id->world, dim = t->eval_ds.dim;
    int64_t i = t->id->rank;
    mlp_params_changed(&t->m);
    while (i < t->eval_ds.n) {
        int b = 0;
        for (; b < t->m.max_batch && i < t->eval_ds.n; b++, i += W) {
            memcpy(t->xb + (size_t)b * dim, t->eval_ds.x + (size_t)i * dim, (size_t)dim * sizeof(float));
            t->yb[b] = t->eval_ds.y[i];
        }
        int64_t c = mlp_evaluate(&t->m, t->xb, t->yb, b, loss);
        if (c < 0) return -1;
        *correct += c;
        *total += b;
    }
    return 0;
}

static int cpu_sync_host(Trainer *t, char *err, size_t errlen)
{
    (void)t, (void)err, (void)errlen;
    return 0;
}

static void cpu_log_memory(Trainer *t, const char *when) { (void)t, (void)when; }

const ComputeOps compute_cpu = {
    .comm_device = NULL,
    .own_coll_seq = false,
    .loss_in_step_flags = true,
    .setup = cpu_setup,
    .free = cpu_free,
    .device_name = cpu_device_name,
    .stream = cpu_stream,
    .params = cpu_params,
    .grads = cpu_grads,
    .pad_write = cpu_pad_write,
    .pad_read = cpu_pad_read,
    .load_batch = cpu_load_batch,
    .forward_backward = cpu_forward_backward,
    .finish_step = cpu_finish_step,
    .bucket_coll = cpu_bucket_coll,
    .step_mem = cpu_step_mem,
    .evaluate = cpu_evaluate,
    .sync_host = cpu_sync_host,
    .log_memory = cpu_log_memory,
};
