/* cuda_mlp.cu — the MLP of model.h on a CUDA GPU. See cuda_mlp.h.
 *
 * Owns: device buffers in model.h's layout, the compute stream, the
 * matrix products (cuda_gemm.cuh: cuBLAS and cuBLASLt, by precision),
 * the bf16 copies of --precision bf16, pinned staging, the step's CUDA
 * events and, with --cuda-graph, the step's CUDA Graphs. The step itself
 * (forward, backward, optimizer, graphs) is cuda_step.cu, the kernels
 * cuda_kernels.cu. One thread at a time; every entry point makes the
 * model's device current first.
 *
 * Products through cuBLAS, which is column-major: a row-major [r, c]
 * matrix with leading dimension c is, to cuBLAS, its transpose [c, r]. So
 * with X [B, in], W [out, in], dY [B, out] all row-major:
 *   Y  = X W^T   is  Y^T  = op(W)^T X^T  -> gemm(T, N, out, B, in, W, X)
 *   dW = dY^T X  is  dW^T = X^T dY       -> gemm(N, T, in, out, B, X, dY)
 *   dX = dY W    is  dX^T = W^T dY^T     -> gemm(N, N, in, B, out, W, dY)
 * (each matrix passed with its row length as leading dimension). Fused:
 * Y's bias (+ ReLU) is the first product's epilogue (bias = rows of Y^T),
 * the bias gradient the second's (BGRADB: the sum of dY over the batch,
 * the columns of dW^T).
 *
 * FP32 arithmetic follows model.c and optim.c (cuda_kernels.cu); products
 * and reductions sum in another order than OpenBLAS: results agree to
 * rounding, not bits. bf16 follows docs/TRAINING.md "Precision".
 *
 * CUDA Graphs: forward + backward (from the input batch, which the host
 * gathers or uploads before the replay, to the last gradient) is one
 * graph per (batch rows, gradient scale, accumulate); the optimizer
 * (bf16 gradients back to FP32, the update) another, its per-step scalars
 * copied into device memory before each replay. Events the host or the
 * collectives read are recorded as external event nodes, so they are
 * recorded at each replay (timings, "gradient ready").
 */
#include "cuda/cuda_mlp_impl.cuh"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/cuda_check.cuh"
#include "base/clock.h"

#define KERN_TRY(call) CUDA_TRY(call)

int cm_dev_alloc(CudaMlp *m, void **p, size_t bytes, char *err, size_t errlen)
{
    cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        *p = NULL;
        CC_ERR("cudaMalloc of %.1f MiB: %s (%s)", (double)bytes / 1048576.0, cudaGetErrorString(e),
               cudaGetErrorName(e));
        return -1;
    }
    m->bytes += (int64_t)bytes;
    return 0;
}

static int host_alloc(void **p, size_t bytes, char *err, size_t errlen)
{
    cudaError_t e = cudaMallocHost(p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        *p = NULL;
        CC_ERR("cudaMallocHost of %.1f MiB (pinned): %s (%s)", (double)bytes / 1048576.0, cudaGetErrorString(e),
               cudaGetErrorName(e));
        return -1;
    }
    return 0;
}

static void release(CudaMlp *m)
{
    cudaSetDevice(m->device);
    if (m->stream) cudaStreamSynchronize(m->stream);
    cm_drop_graphs(m);
    if (m->gemm_made) gemm_done(&m->gemm);
    void *dev[] = { m->params, m->grads_alloc, m->buf1,    m->buf2,    m->dact,    m->dact2, m->bgrad, m->labels,
                    m->idx,    m->row_loss,    m->row_hit, m->loss,    m->eval,    m->ds_x,  m->ds_y,  m->params16,
                    m->dact16, m->dact16b,     m->w16,     m->bgrad16, m->grads16, m->d_opt };
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        if (dev[i]) cudaFree(dev[i]);
    for (int i = 0; i <= MODEL_MAX_LINEAR; i++) {
        if (m->act[i]) cudaFree(m->act[i]);
        if (m->act16[i]) cudaFree(m->act16[i]);
    }
    for (int s = 0; s < 2; s++) {
        if (m->h_x[s]) cudaFreeHost(m->h_x[s]);
        if (m->h_y[s]) cudaFreeHost(m->h_y[s]);
        if (m->h_idx[s]) cudaFreeHost(m->h_idx[s]);
        if (m->slot_free[s]) cudaEventDestroy(m->slot_free[s]);
    }
    if (m->h_out) cudaFreeHost(m->h_out);
    if (m->h_eval) cudaFreeHost(m->h_eval);
    if (m->h_opt) cudaFreeHost(m->h_opt);
    cudaEvent_t evs[] = { m->ev_start, m->ev_fwd, m->ev_bwd, m->ev_join, m->ev_opt, m->ev_done, m->opt_in_free };
    for (size_t i = 0; i < sizeof evs / sizeof evs[0]; i++)
        if (evs[i]) cudaEventDestroy(evs[i]);
    for (int i = 0; i < MAX_TENSORS; i++) {
        if (m->grad_ready[i]) cudaEventDestroy(m->grad_ready[i]);
        if (m->range_ready[i]) cudaEventDestroy(m->range_ready[i]);
    }
    if (m->stream) cudaStreamDestroy(m->stream);
    free(m);
}

static int make(CudaMlp *m, char *err, size_t errlen)
{
    const int L = m->n_linear;
    const size_t B = (size_t)m->max_batch;
    CUDA_TRY(cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking));
    if (gemm_init(&m->gemm, m->stream, m->opt.precision, &m->bytes, err, errlen) != 0) {
        m->gemm_made = true;
        return -1;
    }
    m->gemm_made = true;

    const size_t n = m->n_params, f = sizeof(float), h = sizeof(bf16_t);
    if (cm_dev_alloc(m, (void **)&m->params, n * f, err, errlen) ||
        cm_dev_alloc(m, (void **)&m->grads_alloc, (n + MODEL_GRAD_PAD) * f, err, errlen))
        return -1;
    m->grads = m->grads_alloc + MODEL_GRAD_PAD;
    CUDA_TRY(cudaMemset(m->params, 0, n * f));
    CUDA_TRY(cudaMemset(m->grads_alloc, 0, (n + MODEL_GRAD_PAD) * f));
    bool need1 = m->oc.kind == OPTIM_ADAMW || m->oc.momentum != 0.0;
    bool need2 = m->oc.kind == OPTIM_ADAMW;
    if (need1) {
        if (cm_dev_alloc(m, (void **)&m->buf1, n * f, err, errlen)) return -1;
        CUDA_TRY(cudaMemset(m->buf1, 0, n * f));
    }
    if (need2) {
        if (cm_dev_alloc(m, (void **)&m->buf2, n * f, err, errlen)) return -1;
        CUDA_TRY(cudaMemset(m->buf2, 0, n * f));
    }
    for (int i = 0; i <= L; i++)
        if (cm_dev_alloc(m, (void **)&m->act[i], B * (size_t)m->dims[i] * f, err, errlen)) return -1;
    if (cm_dev_alloc(m, (void **)&m->dact, B * (size_t)m->widest * f, err, errlen) ||
        cm_dev_alloc(m, (void **)&m->dact2, B * (size_t)m->widest * f, err, errlen) ||
        cm_dev_alloc(m, (void **)&m->bgrad, (size_t)m->widest * f, err, errlen) ||
        cm_dev_alloc(m, (void **)&m->labels, B * sizeof(int32_t), err, errlen) ||
        cm_dev_alloc(m, (void **)&m->idx, B * sizeof(int64_t), err, errlen) ||
        cm_dev_alloc(m, (void **)&m->row_loss, B * sizeof(double), err, errlen) ||
        cm_dev_alloc(m, (void **)&m->row_hit, B * sizeof(int), err, errlen) ||
        cm_dev_alloc(m, (void **)&m->loss, sizeof(double), err, errlen) ||
        cm_dev_alloc(m, (void **)&m->eval, sizeof(EvalOut), err, errlen) ||
        cm_dev_alloc(m, (void **)&m->d_opt, sizeof(OptArgs), err, errlen))
        return -1;
    if (cm_bf16_on(m)) {
        if (cm_dev_alloc(m, (void **)&m->params16, n * h, err, errlen) ||
            cm_dev_alloc(m, (void **)&m->dact16, B * (size_t)m->widest * h, err, errlen) ||
            cm_dev_alloc(m, (void **)&m->dact16b, B * (size_t)m->widest * h, err, errlen) ||
            cm_dev_alloc(m, (void **)&m->w16, m->widest_w * h, err, errlen) ||
            cm_dev_alloc(m, (void **)&m->bgrad16, (size_t)m->widest * h, err, errlen))
            return -1;
        for (int i = 0; i <= L; i++)
            if (cm_dev_alloc(m, (void **)&m->act16[i], B * (size_t)m->dims[i] * h, err, errlen)) return -1;
        CUDA_TRY(cudaMemset(m->params16, 0, n * h));
    }
    CUDA_TRY(cudaMemset(m->loss, 0, sizeof(double)));
    CUDA_TRY(cudaMemset(m->d_opt, 0, sizeof(OptArgs)));
    for (int s = 0; s < 2; s++) {
        if (host_alloc((void **)&m->h_x[s], B * (size_t)m->dims[0] * f, err, errlen) ||
            host_alloc((void **)&m->h_y[s], B * sizeof(int32_t), err, errlen) ||
            host_alloc((void **)&m->h_idx[s], B * sizeof(int64_t), err, errlen))
            return -1;
        CUDA_TRY(cudaEventCreateWithFlags(&m->slot_free[s], cudaEventDisableTiming));
    }
    if (host_alloc((void **)&m->h_out, sizeof(StepOut), err, errlen) ||
        host_alloc((void **)&m->h_eval, sizeof(EvalOut), err, errlen) ||
        host_alloc((void **)&m->h_opt, sizeof(OptArgs), err, errlen))
        return -1;
    CUDA_TRY(cudaEventCreateWithFlags(&m->opt_in_free, cudaEventDisableTiming));
    cudaEvent_t *timed[] = { &m->ev_start, &m->ev_fwd, &m->ev_bwd, &m->ev_join, &m->ev_opt, &m->ev_done };
    for (size_t i = 0; i < sizeof timed / sizeof timed[0]; i++) CUDA_TRY(cudaEventCreate(timed[i]));
    for (int i = 0; i < m->n_tensors; i++) {
        CUDA_TRY(cudaEventCreateWithFlags(&m->grad_ready[i], cudaEventDisableTiming));
        CUDA_TRY(cudaEventCreateWithFlags(&m->range_ready[i], cudaEventDisableTiming));
    }
    return 0;
}

extern "C" int cuda_mlp_new_with(CudaMlp **out, const Mlp *layout, const OptimConfig *oc, int max_batch,
                                 const CudaMlpOptions *opt, char *err, size_t errlen)
{
    *out = NULL;
    if (!layout || layout->n_linear < 1 || layout->n_linear > MODEL_MAX_LINEAR ||
        layout->n_tensors != 2 * layout->n_linear) {
        CC_ERR("cuda_mlp_new: layout is not an initialised Mlp");
        return -1;
    }
    if (max_batch < 1) {
        CC_ERR("cuda_mlp_new: batch %d, need at least 1", max_batch);
        return -1;
    }
    if (!oc || (oc->kind != OPTIM_SGD && oc->kind != OPTIM_ADAMW)) {
        CC_ERR("cuda_mlp_new: unknown optimizer");
        return -1;
    }
    CudaMlpOptions o = { PREC_FP32, 1, 0 };
    if (opt) o = *opt;
    if (o.precision != PREC_FP32 && o.precision != PREC_TF32 && o.precision != PREC_BF16) {
        CC_ERR("cuda_mlp_new: unknown precision %d", (int)o.precision);
        return -1;
    }
    int ndev = 0;
    cudaError_t ce = cudaGetDeviceCount(&ndev);
    if (ce != cudaSuccess || ndev < 1) {
        char why[160];
        CC_ERR("--device cuda: no usable CUDA GPU (cudaGetDeviceCount: %s): use --device cpu",
               cc_no_gpu_reason(ce, why, sizeof why));
        return -1;
    }
    CudaMlp *m = (CudaMlp *)calloc(1, sizeof *m);
    if (!m) {
        CC_ERR("cuda_mlp_new: out of memory");
        return -1;
    }
    if (cudaGetDevice(&m->device) != cudaSuccess) m->device = 0;
    m->n_linear = layout->n_linear;
    m->n_tensors = layout->n_tensors;
    memcpy(m->dims, layout->dims, sizeof m->dims);
    memcpy(m->tensors, layout->tensors, sizeof m->tensors);
    m->n_params = layout->n_params;
    m->max_batch = max_batch;
    m->oc = *oc;
    m->opt = o;
    for (int i = 0; i <= m->n_linear; i++) m->widest = m->dims[i] > m->widest ? m->dims[i] : m->widest;
    for (int l = 0; l < m->n_linear; l++) {
        size_t w = (size_t)m->dims[l] * (size_t)m->dims[l + 1];
        if (w > m->widest_w) m->widest_w = w;
    }
    if (make(m, err, errlen) != 0) {
        release(m);
        return -1;
    }
    *out = m;
    return 0;
}

extern "C" int cuda_mlp_new(CudaMlp **out, const Mlp *layout, const OptimConfig *oc, int max_batch, char *err,
                            size_t errlen)
{
    return cuda_mlp_new_with(out, layout, oc, max_batch, NULL, err, errlen);
}

extern "C" void cuda_mlp_describe(const CudaMlp *m, char *buf, size_t n)
{
    int k = snprintf(buf, n, "%s, %s%s", precision_name(m->opt.precision),
                     m->opt.fuse ? "cuBLASLt epilogues" : "no fused epilogues", m->opt.graph ? ", CUDA Graphs" : "");
    int all = m->gemm.lt_calls + m->gemm.plain_calls;
    if (all > 0 && m->opt.fuse && k > 0 && (size_t)k < n)
        snprintf(buf + k, n - (size_t)k, " (fused %d of %d products so far)", m->gemm.lt_calls, all);
}

extern "C" void cuda_mlp_free(CudaMlp **pm)
{
    if (!pm || !*pm) return;
    release(*pm);
    *pm = NULL;
}

extern "C" void *cuda_mlp_stream(const CudaMlp *m) { return m->stream; }
extern "C" float *cuda_mlp_params(const CudaMlp *m)
{
    /* Whoever holds this pointer may write through it (the broadcast). */
    ((CudaMlp *)m)->params16_stale = true;
    return m->params;
}
extern "C" float *cuda_mlp_grads(const CudaMlp *m) { return m->grads; }
extern "C" uint16_t *cuda_mlp_grads_bf16(const CudaMlp *m) { return m->grads16; }
extern "C" int64_t cuda_mlp_bytes(const CudaMlp *m) { return m->bytes; }

int cm_refresh_params16(CudaMlp *m, char *err, size_t errlen)
{
    if (!cm_bf16_on(m) || !m->params16_stale) return 0;
    KERN_TRY(kern_to_bf16(m->stream, m->params16, m->params, m->n_params));
    m->params16_stale = false;
    return 0;
}
/* Host <-> device copies ordered after the queued work. */
static int copy_sync(CudaMlp *m, void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, char *err,
                     size_t errlen)
{
    CUDA_TRY(cudaSetDevice(m->device));
    if (bytes == 0) return 0;
    CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, kind, m->stream));
    CUDA_TRY(cudaStreamSynchronize(m->stream));
    return 0;
}

extern "C" int cuda_mlp_set_params(CudaMlp *m, const float *host, char *err, size_t errlen)
{
    if (copy_sync(m, m->params, host, m->n_params * sizeof(float), cudaMemcpyHostToDevice, err, errlen)) return -1;
    m->params16_stale = true;
    if (cm_refresh_params16(m, err, errlen) != 0) return -1;
    CUDA_TRY(cudaStreamSynchronize(m->stream));
    return 0;
}

extern "C" int cuda_mlp_get_params(CudaMlp *m, float *host, char *err, size_t errlen)
{
    return copy_sync(m, host, m->params, m->n_params * sizeof(float), cudaMemcpyDeviceToHost, err, errlen);
}

extern "C" int cuda_mlp_set_grads(CudaMlp *m, const float *host, char *err, size_t errlen)
{
    return copy_sync(m, m->grads, host, m->n_params * sizeof(float), cudaMemcpyHostToDevice, err, errlen);
}

extern "C" int cuda_mlp_get_grads(CudaMlp *m, float *host, char *err, size_t errlen)
{
    return copy_sync(m, host, m->grads, m->n_params * sizeof(float), cudaMemcpyDeviceToHost, err, errlen);
}

static int optim_matches(const CudaMlp *m, const Optim *o, char *err, size_t errlen)
{
    if (o->cfg.kind != m->oc.kind || o->n != m->n_params) {
        CC_ERR("optimizer state: %s over %zu parameters, the model has %s over %zu",
               o->cfg.kind == OPTIM_ADAMW ? "adamw" : "sgd", o->n, m->oc.kind == OPTIM_ADAMW ? "adamw" : "sgd",
               m->n_params);
        return -1;
    }
    if ((o->buf1 != NULL) != (m->buf1 != NULL) || (o->buf2 != NULL) != (m->buf2 != NULL)) {
        CC_ERR("optimizer state: buffers differ (momentum on one side only?)");
        return -1;
    }
    return 0;
}

extern "C" int cuda_mlp_set_optim(CudaMlp *m, const Optim *o, char *err, size_t errlen)
{
    if (optim_matches(m, o, err, errlen) != 0) return -1;
    size_t bytes = m->n_params * sizeof(float);
    if (m->buf1 && copy_sync(m, m->buf1, o->buf1, bytes, cudaMemcpyHostToDevice, err, errlen)) return -1;
    if (m->buf2 && copy_sync(m, m->buf2, o->buf2, bytes, cudaMemcpyHostToDevice, err, errlen)) return -1;
    m->t = o->t;
    m->has_buf = o->has_buf;
    return 0;
}

extern "C" int cuda_mlp_get_optim(CudaMlp *m, Optim *o, char *err, size_t errlen)
{
    if (optim_matches(m, o, err, errlen) != 0) return -1;
    size_t bytes = m->n_params * sizeof(float);
    if (m->buf1 && copy_sync(m, o->buf1, m->buf1, bytes, cudaMemcpyDeviceToHost, err, errlen)) return -1;
    if (m->buf2 && copy_sync(m, o->buf2, m->buf2, bytes, cudaMemcpyDeviceToHost, err, errlen)) return -1;
    o->t = m->t;
    o->has_buf = m->has_buf;
    return 0;
}

static int check_rows(const CudaMlp *m, int batch, char *err, size_t errlen)
{
    if (batch < 1 || batch > m->max_batch) {
        CC_ERR("batch of %d rows, the model takes 1..%d", batch, m->max_batch);
        return -1;
    }
    return 0;
}

static int check_labels(const CudaMlp *m, const int32_t *y, int64_t n, char *err, size_t errlen)
{
    int classes = m->dims[m->n_linear];
    for (int64_t i = 0; i < n; i++)
        if (y[i] < 0 || y[i] >= classes) {
            CC_ERR("label %d at row %lld outside 0..%d", (int)y[i], (long long)i, classes - 1);
            return -1;
        }
    return 0;
}

extern "C" int cuda_mlp_host_batch(CudaMlp *m, float **x, int32_t **y, char *err, size_t errlen)
{
    CUDA_TRY(cudaSetDevice(m->device));
    CUDA_TRY(cudaEventSynchronize(m->slot_free[m->slot]));
    *x = m->h_x[m->slot];
    *y = m->h_y[m->slot];
    return 0;
}

/* Queue the upload of `batch` rows from pinned slot s into act[0]/labels. */
static int upload_slot(CudaMlp *m, int s, int batch, char *err, size_t errlen)
{
    CUDA_TRY(cudaMemcpyAsync(m->act[0], m->h_x[s], (size_t)batch * m->dims[0] * sizeof(float), cudaMemcpyHostToDevice,
                             m->stream));
    CUDA_TRY(cudaMemcpyAsync(m->labels, m->h_y[s], (size_t)batch * sizeof(int32_t), cudaMemcpyHostToDevice, m->stream));
    CUDA_TRY(cudaEventRecord(m->slot_free[s], m->stream));
    m->slot ^= 1;
    m->batch = batch;
    return 0;
}

extern "C" int cuda_mlp_load_batch(CudaMlp *m, const float *x, const int32_t *y, int batch, char *err, size_t errlen)
{
    if (check_rows(m, batch, err, errlen) || check_labels(m, y, batch, err, errlen)) return -1;
    CUDA_TRY(cudaSetDevice(m->device));
    int s = m->slot;
    if (x != m->h_x[s] || y != m->h_y[s]) {
        CUDA_TRY(cudaEventSynchronize(m->slot_free[s]));
        if (x != m->h_x[s]) memcpy(m->h_x[s], x, (size_t)batch * m->dims[0] * sizeof(float));
        if (y != m->h_y[s]) memcpy(m->h_y[s], y, (size_t)batch * sizeof(int32_t));
    }
    return upload_slot(m, s, batch, err, errlen);
}

extern "C" int cuda_mlp_upload_dataset(CudaMlp *m, const float *x, const int32_t *y, int64_t n, char *err,
                                       size_t errlen)
{
    if (n < 1) {
        CC_ERR("upload_dataset: %lld rows", (long long)n);
        return -1;
    }
    if (check_labels(m, y, n, err, errlen) != 0) return -1;
    CUDA_TRY(cudaSetDevice(m->device));
    size_t xb = (size_t)n * m->dims[0] * sizeof(float), yb = (size_t)n * sizeof(int32_t);
    size_t free_b = 0, total_b = 0;
    CUDA_TRY(cudaMemGetInfo(&free_b, &total_b));
    /* Leave room for cuBLAS workspaces, NCCL's buffers and other ranks. */
    size_t margin = total_b / 20 > ((size_t)512 << 20) ? total_b / 20 : ((size_t)512 << 20);
    if (xb + yb + margin > free_b) return 1;
    if (m->ds_x) {
        CUDA_TRY(cudaStreamSynchronize(m->stream));
        cudaFree(m->ds_x);
        cudaFree(m->ds_y);
        m->bytes -= (int64_t)((size_t)m->ds_n * (m->dims[0] * sizeof(float) + sizeof(int32_t)));
        m->ds_x = NULL;
        m->ds_y = NULL;
        m->ds_n = 0;
    }
    if (cm_dev_alloc(m, (void **)&m->ds_x, xb, err, errlen) != 0) return -1;
    if (cm_dev_alloc(m, (void **)&m->ds_y, yb, err, errlen) != 0) return -1;
    CUDA_TRY(cudaMemcpy(m->ds_x, x, xb, cudaMemcpyHostToDevice));
    CUDA_TRY(cudaMemcpy(m->ds_y, y, yb, cudaMemcpyHostToDevice));
    m->ds_n = n;
    return 0;
}

extern "C" int cuda_mlp_gather_batch(CudaMlp *m, const int64_t *idx, int batch, char *err, size_t errlen)
{
    if (check_rows(m, batch, err, errlen) != 0) return -1;
    if (!m->ds_x) {
        CC_ERR("gather_batch: no dataset uploaded");
        return -1;
    }
    for (int i = 0; i < batch; i++)
        if (idx[i] < 0 || idx[i] >= m->ds_n) {
            CC_ERR("gather_batch: index %lld outside the dataset's 0..%lld", (long long)idx[i], (long long)m->ds_n - 1);
            return -1;
        }
    CUDA_TRY(cudaSetDevice(m->device));
    int s = m->slot;
    CUDA_TRY(cudaEventSynchronize(m->slot_free[s]));
    memcpy(m->h_idx[s], idx, (size_t)batch * sizeof(int64_t));
    CUDA_TRY(cudaMemcpyAsync(m->idx, m->h_idx[s], (size_t)batch * sizeof(int64_t), cudaMemcpyHostToDevice, m->stream));
    CUDA_TRY(cudaEventRecord(m->slot_free[s], m->stream));
    KERN_TRY(kern_gather(m->stream, m->act[0], m->labels, m->ds_x, m->ds_y, m->idx, batch, m->dims[0]));
    m->slot ^= 1;
    m->batch = batch;
    return 0;
}

extern "C" int cuda_mlp_write_pad(CudaMlp *m, const float *vals, int n, char *err, size_t errlen)
{
    if (n < 0 || n > MODEL_GRAD_PAD) {
        CC_ERR("write_pad: %d floats, the pad holds %d", n, MODEL_GRAD_PAD);
        return -1;
    }
    if (n == 0) return 0;
    CUDA_TRY(cudaSetDevice(m->device));
    /* Kernel arguments are captured at launch: no pinned buffer to keep. */
    PadVals pv;
    memset(&pv, 0, sizeof pv);
    memcpy(pv.v, vals, (size_t)n * sizeof(float));
    KERN_TRY(kern_set(m->stream, m->grads - n, pv, n));
    return 0;
}

static int wait_event(cudaEvent_t ev, int64_t timeout_ms, const char *what, char *err, size_t errlen)
{
    if (timeout_ms <= 0) {
        cudaError_t e = cudaEventSynchronize(ev);
        if (e != cudaSuccess) {
            CC_ERR("%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
            return -1;
        }
        return 0;
    }
    int64_t t0 = mono_ms();
    for (;;) {
        cudaError_t q = cudaEventQuery(ev);
        if (q == cudaSuccess) return 0;
        if (q != cudaErrorNotReady) {
            CC_ERR("%s: %s (%s)", what, cudaGetErrorString(q), cudaGetErrorName(q));
            return -1;
        }
        int64_t waited = mono_ms() - t0;
        if (waited >= timeout_ms) return 1;
        if (waited < 2) {
            sched_yield();
        } else {
            struct timespec ts = { 0, waited < 100 ? 20000L : 500000L };
            nanosleep(&ts, NULL);
        }
    }
}

static double elapsed_ms(cudaEvent_t a, cudaEvent_t b)
{
    float ms = 0;
    return cudaEventElapsedTime(&ms, a, b) == cudaSuccess ? (double)ms : 0.0;
}

extern "C" int cuda_mlp_finish_step(CudaMlp *m, int64_t timeout_ms, double *loss, float *pad, int n_pad,
                                    CudaMlpTimes *times, char *err, size_t errlen)
{
    if (n_pad < 0 || n_pad > MODEL_GRAD_PAD) {
        CC_ERR("finish_step: %d pad floats, the pad holds %d", n_pad, MODEL_GRAD_PAD);
        return -1;
    }
    CUDA_TRY(cudaSetDevice(m->device));
    if (!m->done_queued) {
        CUDA_TRY(cudaMemcpyAsync(&m->h_out->loss, m->loss, sizeof(double), cudaMemcpyDeviceToHost, m->stream));
        if (n_pad > 0)
            CUDA_TRY(cudaMemcpyAsync(m->h_out->pad, m->grads - n_pad, (size_t)n_pad * sizeof(float),
                                     cudaMemcpyDeviceToHost, m->stream));
        CUDA_TRY(cudaEventRecord(m->ev_done, m->stream));
        m->done_queued = true;
        m->done_pad = n_pad;
    }
    int rc = wait_event(m->ev_done, timeout_ms, "finish_step", err, errlen);
    if (rc != 0) return rc; /* 1: not yet; called again, it waits on */
    m->done_queued = false;
    if (n_pad > m->done_pad) n_pad = m->done_pad;
    if (loss) *loss = m->h_out->loss;
    if (n_pad > 0) memcpy(pad, m->h_out->pad, (size_t)n_pad * sizeof(float));
    if (times) {
        memset(times, 0, sizeof *times);
        if (m->fb_queued) {
            times->fwd_ms = elapsed_ms(m->ev_start, m->ev_fwd);
            times->bwd_ms = elapsed_ms(m->ev_fwd, m->ev_bwd);
            times->gpu_ms = elapsed_ms(m->ev_start, m->ev_bwd);
        }
        if (m->fb_queued && m->opt_queued) {
            times->comm_wait_ms = elapsed_ms(m->ev_bwd, m->ev_join);
            times->opt_ms = elapsed_ms(m->ev_join, m->ev_opt);
            times->gpu_ms = elapsed_ms(m->ev_start, m->ev_opt);
        }
    }
    m->fb_queued = m->opt_queued = false;
    return 0;
}

extern "C" int cuda_mlp_evaluate(CudaMlp *m, const float *x, const int32_t *y, int64_t n, int64_t *correct,
                                 double *loss_sum, char *err, size_t errlen)
{
    if (n < 0 || check_labels(m, y, n, err, errlen) != 0) return -1;
    CUDA_TRY(cudaSetDevice(m->device));
    if (cm_refresh_params16(m, err, errlen) != 0) return -1;
    const int dim = m->dims[0];
    CUDA_TRY(cudaMemsetAsync(m->eval, 0, sizeof(EvalOut), m->stream));
    for (int64_t start = 0; start < n; start += m->max_batch) {
        int b = (int)(n - start < m->max_batch ? n - start : m->max_batch);
        int s = m->slot;
        CUDA_TRY(cudaEventSynchronize(m->slot_free[s]));
        memcpy(m->h_x[s], x + (size_t)start * dim, (size_t)b * dim * sizeof(float));
        memcpy(m->h_y[s], y + start, (size_t)b * sizeof(int32_t));
        if (upload_slot(m, s, b, err, errlen) != 0 || cm_forward(m, b, err, errlen) != 0) return -1;
        KERN_TRY(cm_logits_ce(m, b, 0.0f, false, m->row_hit));
        KERN_TRY(kern_sum_rows(m->stream, m->row_loss, m->row_hit, b, NULL, m->eval));
    }
    /* The activations now hold evaluation rows: training needs a new batch. */
    m->batch = 0;
    CUDA_TRY(cudaMemcpyAsync(m->h_eval, m->eval, sizeof(EvalOut), cudaMemcpyDeviceToHost, m->stream));
    CUDA_TRY(cudaStreamSynchronize(m->stream));
    *correct = (int64_t)m->h_eval->hits;
    if (loss_sum) *loss_sum += m->h_eval->loss_sum;
    return 0;
}

extern "C" const char *cuda_mlp_version(void)
{
    static char v[48];
    if (!v[0]) {
        int a = 0, b = 0, c = 0;
        cublasGetProperty(MAJOR_VERSION, &a);
        cublasGetProperty(MINOR_VERSION, &b);
        cublasGetProperty(PATCH_LEVEL, &c);
        snprintf(v, sizeof v, "cublas %d.%d.%d", a, b, c);
    }
    return v;
}
