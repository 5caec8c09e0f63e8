/* compute_cuda.c — the compute face on a CUDA GPU (--device cuda,
 * docs/GPU.md): cuda_mlp.h does the step on the compute stream. The host
 * Mlp and Optim stay as the layout and as the copies that checkpoints are
 * written from and resumed into; each bucket's all-reduce is started from
 * backward's "gradient ready" events (comm_allreduce_sum_f32_start: NCCL
 * queues it on its own stream, Gloo stages it through host memory and
 * returns when done), the optimizer waits for them on the GPU, and the
 * host waits once per step, in cuda_mlp_finish_step. One-off collectives
 * still go through the reducer, with small host values carried in the pad
 * before grads[0] (NCCL needs device memory). --precision, --gpu-fuse and
 * --cuda-graph are cuda_mlp's options; with --grad-dtype bf16 the model
 * casts each bucket to bf16 (divided by the world size in bf16, DDP's
 * bf16_compress_hook) before its hook, the bucket is all-reduced in bf16
 * and the optimizer step casts it back; the command flags in front of the
 * first bucket stay FP32 and get their own small all-reduce, queued right
 * after the last bucket's. Plain C over cuda_mlp.h and gpu.h (their
 * stand-ins in a build without CUDA). Main thread.
 */
#include "train/compute.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "cuda/gpu.h"
#include "train/report.h"
#include "train/state.h"

/* --grad-dtype bf16: each bucket's gradients cast (and divided by the
 * world size) in bf16 right after its last tensor, the flags not. */
static int cuda_bf16_buckets(Trainer *t)
{
    CudaMlpBf16Range r[BUCKET_MAX];
    for (int b = 0; b < t->nb; b++) {
        r[b].offset = t->buckets[b].offset;
        r[b].n = t->buckets[b].numel;
        r[b].after_tensor = t->buckets[b].last_tensor;
    }
    return cuda_mlp_set_bf16_grads(t->g, r, t->nb, (float)t->id->world, t->err, sizeof t->err);
}

/* This rank's GPU (LOCAL_RANK modulo the GPUs here; NCCL refuses two ranks
 * on one, Gloo shares it), the model there with the host weights (and
 * optimizer state when resuming), the dataset uploaded when it fits. */
static int cuda_setup(Trainer *t)
{
    const TrainerArgs *a = t->a;
    char *err = t->err;
    const size_t el = sizeof t->err;
    int n = 0;
    if (gpu_count(&n, err, el) || gpu_use(t->id->local_rank % n, err, el)) return -1;
    t->gpu = t->id->local_rank % n;
    CudaMlpOptions mo = { .precision = a->precision, .fuse = a->gpu_fuse, .graph = a->cuda_graph };
    if (cuda_mlp_new_with(&t->g, &t->m, &a->optim, (int)a->batch_size, &mo, err, el) ||
        cuda_mlp_set_params(t->g, t->m.params, err, el) || (t->resumed && cuda_mlp_set_optim(t->g, &t->o, err, el)))
        return -1;
    if (a->grad_dtype == COMM_BF16 && cuda_bf16_buckets(t)) return -1;
    int rc = cuda_mlp_upload_dataset(t->g, t->ds.x, t->ds.y, t->ds.n, err, el);
    if (rc < 0) return -1;
    t->data_on_gpu = rc == 0;
    return 0;
}

static void cuda_free(Trainer *t) { cuda_mlp_free(&t->g); }

static void cuda_device_name(const Trainer *t, char *buf, size_t n) { snprintf(buf, n, "cuda:%d", t->gpu); }

static void *cuda_stream(Trainer *t) { return cuda_mlp_stream(t->g); }

static float *cuda_params(Trainer *t) { return cuda_mlp_params(t->g); }

static float *cuda_grads(Trainer *t) { return cuda_mlp_grads(t->g); }

static int cuda_pad_write(Trainer *t, const float *v, int n)
{
    return cuda_mlp_write_pad(t->g, v, n, t->err, sizeof t->err);
}

static int cuda_pad_read(Trainer *t, float *v, int n)
{
    return cuda_mlp_finish_step(t->g, 0, NULL, v, n, NULL, t->err, sizeof t->err);
}

/* Gathered on the device when the dataset is there, else through the
 * pinned staging buffer. */
static int cuda_load_batch(Trainer *t, const int64_t *idx, int n)
{
    char *err = t->err;
    const size_t el = sizeof t->err;
    if (t->data_on_gpu) return cuda_mlp_gather_batch(t->g, idx, n, err, el);
    const int dim = t->ds.dim;
    float *x;
    int32_t *y;
    if (cuda_mlp_host_batch(t->g, &x, &y, err, el)) return -1;
    for (int i = 0; i < n; i++) {
        int64_t j = idx[i];
        memcpy(x + (size_t)i * dim, t->ds.x + (size_t)j * dim, (size_t)dim * sizeof(float));
        y[i] = t->ds.y[j];
    }
    return cuda_mlp_load_batch(t->g, x, y, n, err, el);
}

/* A bucket's last tensor is queued: start its all-reduce once its `ready`
 * event has completed (NCCL: queued on its own stream, overlapping the
 * rest of backward; Gloo: staged through host memory now, backward queued
 * on afterwards). Flags ride in front of the last bucket; the
 * 1/(micro-batches * world) scale was applied by backward. */
static void on_grad_ready(void *ctx, int tensor, void *ready)
{
    Trainer *t = ctx;
    int b = t->tensor_bucket[tensor];
    const Bucket *bk = &t->buckets[b];
    if (tensor != bk->last_tensor || t->hook_failed) return;
    int64_t *ticket = &t->tickets[t->n_submitted];
    int rc;
    if (t->a->grad_dtype == COMM_BF16) {
        /* ready: after the model's cast of this bucket into its bf16 copy */
        rc = comm_allreduce_sum_bf16_start(t->comm, cuda_mlp_grads_bf16(t->g) + bk->offset, bk->numel, (uint32_t)b,
                                           ready, ticket, t->err, sizeof t->err);
        /* the flags are counts and rank sums, which bf16 cannot carry */
        if (rc == 0 && bk->offset == 0) {
            rc = comm_allreduce_sum_f32_start(t->comm, cuda_mlp_grads(t->g) - FL_COUNT, FL_COUNT, TAG_STEP_FLAGS, ready,
                                              &t->pad_ticket, t->err, sizeof t->err);
            t->pad_submitted = rc == 0;
        }
    } else {
        float *buf = cuda_mlp_grads(t->g) + bk->offset;
        size_t n = bk->numel;
        if (bk->offset == 0) {
            buf -= FL_COUNT;
            n += FL_COUNT;
        }
        rc = comm_allreduce_sum_f32_start(t->comm, buf, n, (uint32_t)b, ready, ticket, t->err, sizeof t->err);
    }
    if (rc) {
        t->hook_failed = true;
        return;
    }
    t->bucket_op[t->n_submitted++] = b; /* on the GPU: the bucket of each ticket */
}

/* Queued; with --grad-accum > 1 each earlier micro-batch's loss costs one
 * wait. */
static int cuda_forward_backward(Trainer *t, int k, int micro, int n, MsgStep *s, double *loss_sum)
{
    (void)n;
    char *err = t->err;
    const size_t el = sizeof t->err;
    bool last = k == micro - 1;
    /* bf16 gradients are divided by the world size after their cast, in
     * bf16 (bf16_compress_hook): backward scales by the micro-batches only. */
    float scale = t->a->grad_dtype == COMM_BF16 ? (float)(1.0 / (double)micro) : t->bucket_scale;
    if (last) t->pad_submitted = false;
    if (cuda_mlp_forward_backward(t->g, scale, k > 0, last ? on_grad_ready : NULL, t, err, el) || t->hook_failed)
        return -1;
    if (!last) {
        double loss = 0;
        CudaMlpTimes tm;
        if (cuda_mlp_finish_step(t->g, 0, &loss, NULL, 0, &tm, err, el)) return -1;
        *loss_sum += loss;
        s->fwd_ms += tm.fwd_ms;
        s->bwd_ms += tm.bwd_ms;
    }
    return 0;
}

/* The host waits once, in cuda_mlp_finish_step (heartbeats meanwhile;
 * past --timeout the communicator is aborted: a collective is stuck). */
static int cuda_finish_step(Trainer *t, double lr, float *flags, MsgStep *s, double *loss_sum, double *comm_ms)
{
    const TrainerArgs *a = t->a;
    char *err = t->err;
    const size_t el = sizeof t->err;
    if (t->n_submitted != t->nb || (a->grad_dtype == COMM_BF16 && !t->pad_submitted)) {
        snprintf(err, el, "step %" PRId64 ": %d of %d gradient buckets were all-reduced%s", t->step + 1, t->n_submitted,
                 t->nb, a->grad_dtype == COMM_BF16 && !t->pad_submitted ? ", the flags not" : "");
        return -1;
    }
    if (comm_join(t->comm, err, el) || cuda_mlp_optim_step(t->g, lr, err, el)) return -1;
    double loss = 0;
    CudaMlpTimes tm;
    double w0 = mono_ms_f();
    int rc;
    while ((rc = cuda_mlp_finish_step(t->g, PUMP_MS, &loss, flags, FL_COUNT, &tm, err, el)) == 1) {
        report_wait_cb(t);
        if (mono_ms_f() - w0 > a->timeout_s * 1e3) {
            comm_abort(t->comm);
            snprintf(err, el,
                     "step %" PRId64 ": the gradient all-reduce did not finish within --timeout %g s "
                     "(a rank is gone or stuck): communicator aborted",
                     t->step + 1, a->timeout_s);
            return -1;
        }
    }
    if (rc) return -1;
    *loss_sum += loss;
    s->fwd_ms += tm.fwd_ms;
    s->bwd_ms += tm.bwd_ms;
    s->opt_ms = tm.opt_ms;
    *comm_ms = 0;
    for (int i = 0; i < t->n_submitted; i++) {
        CommTiming *ct = &t->ct[i];
        int r = comm_timing(t->comm, t->tickets[i], ct, err, el);
        if (r < 0) return -1;
        if (r == 1) ct->start_ns = ct->done_ns = 0;
        *comm_ms += (ct->done_ns - ct->start_ns) / 1e6;
    }
    /* NCCL: what the optimizer waited for after backward. Gloo on CUDA ran
     * each bucket inside backward's hook, none of it hidden. */
    s->exposed_ms = !strcmp(t->id->backend, "nccl") ? tm.comm_wait_ms : *comm_ms;
    return 0;
}

/* The reducer never saw the buckets: their record, from comm_timing. */
static const RedOp *cuda_bucket_coll(Trainer *t, int i, RedOp *op)
{
    memset(op, 0, sizeof *op);
    op->kind = RED_ALLREDUCE;
    const Bucket *bk = &t->buckets[t->bucket_op[i]];
    /* bf16: the bucket alone (the flags travel apart, in FP32) */
    op->n = bk->numel + (bk->offset == 0 && t->a->grad_dtype != COMM_BF16 ? FL_COUNT : 0);
    op->bucket = (int)t->bucket_op[i];
    op->enq_ns = op->start_ns = t->ct[i].start_ns;
    op->done_ns = t->ct[i].done_ns;
    return op;
}

/* cudaMemGetInfo at most once a second. */
static void cuda_step_mem(Trainer *t, double now_ms, int64_t *used, int64_t *total)
{
    if (now_ms - t->mem_at_ms >= 1000 || t->mem_at_ms == 0) {
        char e[160];
        if (gpu_mem_info(&t->mem_used, &t->mem_total, e, sizeof e)) t->mem_used = t->mem_total = 0;
        t->mem_at_ms = now_ms;
    }
    *used = t->mem_used;
    *total = t->mem_total;
}

/* This rank's rows, gathered once, evaluated on the GPU. */
static int cuda_evaluate(Trainer *t, int64_t *correct, int64_t *total, double *loss, char *err, size_t errlen)
{
    const int W = t->id->world, dim = t->eval_ds.dim;
    int64_t i = t->id->rank;
    int64_t n = (t->eval_ds.n - i + W - 1) / W;
    float *x = malloc((size_t)(n > 0 ? n : 1) * dim * sizeof(float));
    int32_t *y = malloc((size_t)(n > 0 ? n : 1) * sizeof(int32_t));
    int rc = -1;
    if (x && y) {
        for (int64_t k = 0; k < n; k++, i += W) {
            memcpy(x + (size_t)k * dim, t->eval_ds.x + (size_t)i * dim, (size_t)dim * sizeof(float));
            y[k] = t->eval_ds.y[i];
        }
        if (cuda_mlp_evaluate(t->g, x, y, n, correct, loss, err, errlen) == 0) {
            *total = n;
            rc = 0;
        }
    } else {
        snprintf(err, errlen, "out of memory for the evaluation set");
    }
    free(x);
    free(y);
    return rc;
}

static int cuda_sync_host(Trainer *t, char *err, size_t errlen)
{
    return cuda_mlp_get_params(t->g, t->m.params, err, errlen) || cuda_mlp_get_optim(t->g, &t->o, err, errlen) ? -1 : 0;
}

/* GPU memory, for the log: the model's and the device's in use (the
 * protocol's step message has no field for it). */
static void cuda_log_memory(Trainer *t, const char *when)
{
    char desc[160] = "", e[256], how[160];
    int64_t used = 0, total = 0;
    if (gpu_describe(t->gpu, desc, sizeof desc, e, sizeof e)) snprintf(desc, sizeof desc, "?");
    if (gpu_mem_info(&used, &total, e, sizeof e)) used = total = 0;
    cuda_mlp_describe(t->g, how, sizeof how);
    report_log(t, "info",
               "rank %d %s: cuda:%d (%s), %s, %s, grads %s; this rank's model %.1f MiB%s; device memory in use %.2f "
               "of %.2f GiB",
               t->id->rank, when, t->gpu, desc, t->id->backend, how, comm_dtype_name(t->a->grad_dtype),
               cuda_mlp_bytes(t->g) / 1048576.0,
               t->data_on_gpu ? " with the dataset" : ", batches from pinned host memory", used / 1073741824.0,
               total / 1073741824.0);
}

const ComputeOps compute_cuda = {
    .comm_device = "cuda",
    .own_coll_seq = true,
    .loss_in_step_flags = false,
    .setup = cuda_setup,
    .free = cuda_free,
    .device_name = cuda_device_name,
    .stream = cuda_stream,
    .params = cuda_params,
    .grads = cuda_grads,
    .pad_write = cuda_pad_write,
    .pad_read = cuda_pad_read,
    .load_batch = cuda_load_batch,
    .forward_backward = cuda_forward_backward,
    .finish_step = cuda_finish_step,
    .bucket_coll = cuda_bucket_coll,
    .step_mem = cuda_step_mem,
    .evaluate = cuda_evaluate,
    .sync_host = cuda_sync_host,
    .log_memory = cuda_log_memory,
};
