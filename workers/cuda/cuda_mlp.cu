/* cuda_mlp.cu — the MLP of model.h on a CUDA GPU. See cuda_mlp.h.
 *
 * Owns: device buffers in model.h's layout, the compute stream, a cuBLAS
 * handle in full float32 (CUBLAS_DEFAULT_MATH: no TF32, because the CPU
 * path is the oracle at 1e-4), the kernels below, pinned staging, the
 * step's CUDA events. One thread at a time; every entry point makes the
 * model's device current first.
 *
 * Products through cuBLAS, which is column-major: a row-major [r, c]
 * matrix with leading dimension c is, to cuBLAS, its transpose [c, r]. So
 * with X [B, in], W [out, in], dY [B, out] all row-major:
 *   Y  = X W^T   is  Y^T  = op(W)^T X^T  -> sgemm(T, N, out, B, in, W, X)
 *   dW = dY^T X  is  dW^T = X^T dY       -> sgemm(N, T, in, out, B, X, dY)
 *   dX = dY W    is  dX^T = W^T dY^T     -> sgemm(N, N, in, B, out, W, dY)
 * (each matrix passed with its row length as leading dimension).
 *
 * Arithmetic follows model.c and optim.c: the bias is added after the
 * product, softmax and the loss in double per row, bias gradients summed
 * in float; the optimizer kernels round exactly where optim.c's fused
 * variant does (fmaf where it uses MADD, __f*_rn elsewhere so nvcc cannot
 * contract), so given the same gradients the update matches optim.c with
 * fused multiply-adds bit for bit. Products and reductions sum in another
 * order than OpenBLAS: results agree to rounding, not bits.
 */
#include "cuda/cuda_mlp.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/cuda_check.cuh"
#include "base/clock.h"

#define CUBLAS_TRY(call)                                                                           \
    do {                                                                                           \
        cublasStatus_t s_ = (call);                                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                         \
            char nb_[64];                                                                          \
            CC_ERR("%s: %s (%s)", cc_call_name(#call, nb_, sizeof nb_), cublasGetStatusString(s_), \
                   cublasGetStatusName(s_));                                                       \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

enum { THREADS = 256, CE_THREADS = 128 };

struct StepOut {
    double loss;
    float pad[MODEL_GRAD_PAD];
};

struct EvalOut {
    double loss_sum;
    unsigned long long hits;
};

struct CudaMlp {
    int device;
    int n_linear, n_tensors, widest, max_batch;
    int dims[MODEL_MAX_LINEAR + 1];
    ModelTensor tensors[2 * MODEL_MAX_LINEAR];
    size_t n_params;
    OptimConfig oc;
    int64_t t;     /* optimizer steps taken */
    bool has_buf;  /* SGD momentum buffer initialised */
    int64_t bytes; /* device memory held */

    cudaStream_t stream;
    cublasHandle_t blas;

    float *params, *grads_alloc, *grads, *buf1, *buf2;
    float *act[MODEL_MAX_LINEAR + 1]; /* act[0] = input batch */
    float *dact, *dact2;
    int32_t *labels;
    int64_t *idx;
    double *row_loss;
    int *row_hit;
    double *loss; /* the last forward's mean loss */
    EvalOut *eval;

    float *ds_x; /* uploaded dataset, or NULL */
    int32_t *ds_y;
    int64_t ds_n;

    /* Pinned staging, two slots: one is filled while the other uploads. */
    float *h_x[2];
    int32_t *h_y[2];
    int64_t *h_idx[2];
    cudaEvent_t slot_free[2];
    int slot;
    StepOut *h_out;
    EvalOut *h_eval;

    int batch;                  /* rows of the loaded batch; 0: none */
    bool fb_queued, opt_queued; /* since the last finish_step */
    bool done_queued;           /* finish_step's read-back is queued, not yet seen */
    int done_pad;               /* pad floats in that read-back */
    cudaEvent_t ev_start, ev_fwd, ev_bwd, ev_join, ev_opt, ev_done;
    cudaEvent_t grad_ready[2 * MODEL_MAX_LINEAR];
};

/* ---- kernels ------------------------------------------------------------ */

static unsigned grid_for(size_t n)
{
    size_t g = (n + THREADS - 1) / THREADS;
    /* Grid-stride loops beyond this: enough blocks to fill any GPU. */
    return (unsigned)(g < 1 ? 1 : g > 65535 ? 65535 : g);
}

/* y[r, j] += b[j], then ReLU (y > 0 ? y : 0, as model.c) unless last. */
static __global__ void k_bias_act(float *y, const float *b, int cols, size_t n, int relu)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float v = __fadd_rn(y[i], b[i % (size_t)cols]);
        y[i] = relu ? (v > 0.0f ? v : 0.0f) : v;
    }
}

/* Through the ReLU that produced a: its output is positive exactly where
 * its input was. */
static __global__ void k_relu_back(float *dx, const float *a, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        if (!(a[i] > 0.0f)) dx[i] = 0.0f;
}

static __device__ float block_max(float v, float *sh)
{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) sh[w] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int i = 1; i < (int)blockDim.x / 32; i++) sh[0] = fmaxf(sh[0], sh[i]);
    }
    __syncthreads();
    v = sh[0];
    __syncthreads();
    return v;
}

static __device__ double block_sum(double v, double *sh)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) sh[w] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        double s = 0.0;
        for (int i = 0; i < (int)blockDim.x / 32; i++) s += sh[i];
        sh[0] = s;
    }
    __syncthreads();
    v = sh[0];
    __syncthreads();
    return v;
}

/* One block per row of logits z [rows, k]: cross-entropy by log-sum-exp
 * around the max, in double as model.c's row_ce. With dz: softmax -
 * onehot, times scale (1/batch), in dz. With hit: 1 where the first
 * maximum is the label (torch.argmax), for evaluation. */
static __global__ void k_softmax_ce(const float *z, const int32_t *y, int k, float scale, float *dz, double *row_loss,
                                    int *hit)
{
    __shared__ float shf[CE_THREADS / 32];
    __shared__ double shd[CE_THREADS / 32];
    __shared__ int shi[CE_THREADS / 32];
    const int r = blockIdx.x;
    const float *zr = z + (size_t)r * k;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < k; j += blockDim.x) mx = fmaxf(mx, zr[j]);
    mx = block_max(mx, shf);
    double s = 0.0;
    for (int j = threadIdx.x; j < k; j += blockDim.x) s += exp((double)zr[j] - (double)mx);
    s = block_sum(s, shd);
    const int label = y[r];
    if (dz) {
        float *dr = dz + (size_t)r * k;
        for (int j = threadIdx.x; j < k; j += blockDim.x)
            dr[j] = __fmul_rn((float)(exp((double)zr[j] - (double)mx) / s), scale);
        __syncthreads();
        if (threadIdx.x == 0) dr[label] = __fsub_rn(dr[label], scale);
    }
    if (hit) {
        /* The lowest index holding the maximum (mx itself). */
        int first = k;
        for (int j = threadIdx.x; j < k; j += blockDim.x)
            if (zr[j] == mx && j < first) first = j;
        for (int o = 16; o > 0; o >>= 1) first = min(first, __shfl_xor_sync(0xffffffffu, first, o));
        if (threadIdx.x % 32 == 0) shi[threadIdx.x / 32] = first;
        __syncthreads();
        if (threadIdx.x == 0) {
            for (int i = 1; i < (int)blockDim.x / 32; i++) first = min(first, shi[i]);
            hit[r] = first == label;
        }
    }
    if (threadIdx.x == 0) row_loss[r] = log(s) + (double)mx - (double)zr[label];
}

/* Sum of the rows' losses (and hits), one block, in a fixed order so a
 * step's loss does not depend on scheduling. mean: loss = sum / n;
 * otherwise add the sum (and the hits) to the eval totals. */
static __global__ void k_sum_rows(const double *row_loss, const int *hit, int n, double *mean_out, EvalOut *eval)
{
    __shared__ double shd[THREADS / 32];
    __shared__ int shi[THREADS / 32];
    double s = 0.0;
    int h = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        s += row_loss[i];
        if (hit) h += hit[i];
    }
    s = block_sum(s, shd);
    for (int o = 16; o > 0; o >>= 1) h += __shfl_xor_sync(0xffffffffu, h, o);
    if (threadIdx.x % 32 == 0) shi[threadIdx.x / 32] = h;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int i = 1; i < (int)blockDim.x / 32; i++) h += shi[i];
        if (mean_out) *mean_out = s / n;
        if (eval) {
            eval->loss_sum += s;
            eval->hits += (unsigned long long)h;
        }
    }
}

/* db[j] = scale * sum_r dY[r, j] (or += with accumulate). A block takes 32
 * columns; its 8 rows of threads stride down the batch, reading whole
 * 128-byte row segments. */
static __global__ void k_bias_grad(float *db, const float *dy, int rows, int cols, float scale, int accumulate)
{
    __shared__ float sh[8][33];
    const int col = blockIdx.x * 32 + threadIdx.x;
    float s = 0.0f;
    if (col < cols)
        for (int r = threadIdx.y; r < rows; r += 8) s += dy[(size_t)r * cols + col];
    sh[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && col < cols) {
        float t = sh[0][threadIdx.x];
        for (int i = 1; i < 8; i++) t = __fadd_rn(t, sh[i][threadIdx.x]);
        float v = __fmul_rn(t, scale);
        db[col] = accumulate ? __fadd_rn(db[col], v) : v;
    }
}

struct PadVals {
    float v[MODEL_GRAD_PAD];
};

static __global__ void k_set(float *dst, PadVals vals, int n)
{
    if ((int)threadIdx.x < n) dst[threadIdx.x] = vals.v[threadIdx.x];
}

static __global__ void k_gather(float *x, int32_t *y, const float *ds_x, const int32_t *ds_y, const int64_t *idx,
                                int batch, int dim)
{
    size_t n = (size_t)batch * dim;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x) {
        size_t r = e / dim, j = e % dim;
        int64_t k = idx[r];
        x[e] = ds_x[(size_t)k * dim + j];
        if (j == 0) y[r] = ds_y[k];
    }
}

/* optim.c's rules, its fused variant's rounding (see the file comment). */
struct SgdArgs {
    float wd, mom, keep, neg_lr;
    int decay, momentum, first, nesterov;
};

static __global__ void k_sgd(float *p, const float *g, float *buf, size_t n, SgdArgs a)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float pi = p[i], gi = g[i];
        float d = a.decay ? fmaf(pi, a.wd, gi) : gi; /* g.add(p, alpha=wd) */
        if (!a.momentum) {
            p[i] = fmaf(d, a.neg_lr, pi); /* p.add_(d, alpha=-lr) */
        } else if (a.first) {             /* buf = clone(d) */
            buf[i] = d;
            float u = a.nesterov ? fmaf(d, a.mom, d) : d;
            p[i] = fmaf(u, a.neg_lr, pi);
        } else {
            float b = fmaf(d, a.keep, __fmul_rn(buf[i], a.mom));
            buf[i] = b;
            float u = a.nesterov ? fmaf(b, a.mom, d) : b;
            p[i] = fmaf(u, a.neg_lr, pi);
        }
    }
}

struct AdamArgs {
    float decay, b1, w1, b2, w2, neg_step_size, bc2_sqrt, eps;
};

static __global__ void k_adamw(float *p, const float *g, float *m, float *v, size_t n, AdamArgs a)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float gi = g[i];
        float pi = __fmul_rn(p[i], a.decay); /* mul_(1 - lr*wd) */
        float mi = fmaf(gi, a.w1, __fmul_rn(m[i], a.b1));
        float vi = fmaf(__fmul_rn(a.w2, gi), gi, __fmul_rn(v[i], a.b2));
        m[i] = mi;
        v[i] = vi;
        float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), a.bc2_sqrt), a.eps);
        p[i] = __fadd_rn(pi, __fdiv_rn(__fmul_rn(a.neg_step_size, mi), denom));
    }
}

/* ---- host side ---------------------------------------------------------- */

static int dev_alloc(CudaMlp *m, void **p, size_t bytes, char *err, size_t errlen)
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
    if (m->blas) cublasDestroy(m->blas);
    void *dev[] = { m->params, m->grads_alloc, m->buf1,    m->buf2, m->dact, m->dact2, m->labels,
                    m->idx,    m->row_loss,    m->row_hit, m->loss, m->eval, m->ds_x,  m->ds_y };
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        if (dev[i]) cudaFree(dev[i]);
    for (int i = 0; i <= MODEL_MAX_LINEAR; i++)
        if (m->act[i]) cudaFree(m->act[i]);
    for (int s = 0; s < 2; s++) {
        if (m->h_x[s]) cudaFreeHost(m->h_x[s]);
        if (m->h_y[s]) cudaFreeHost(m->h_y[s]);
        if (m->h_idx[s]) cudaFreeHost(m->h_idx[s]);
        if (m->slot_free[s]) cudaEventDestroy(m->slot_free[s]);
    }
    if (m->h_out) cudaFreeHost(m->h_out);
    if (m->h_eval) cudaFreeHost(m->h_eval);
    cudaEvent_t evs[] = { m->ev_start, m->ev_fwd, m->ev_bwd, m->ev_join, m->ev_opt, m->ev_done };
    for (size_t i = 0; i < sizeof evs / sizeof evs[0]; i++)
        if (evs[i]) cudaEventDestroy(evs[i]);
    for (int i = 0; i < 2 * MODEL_MAX_LINEAR; i++)
        if (m->grad_ready[i]) cudaEventDestroy(m->grad_ready[i]);
    if (m->stream) cudaStreamDestroy(m->stream);
    free(m);
}

static int make(CudaMlp *m, char *err, size_t errlen)
{
    const int L = m->n_linear;
    const size_t B = (size_t)m->max_batch;
    CUDA_TRY(cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking));
    CUBLAS_TRY(cublasCreate(&m->blas));
    CUBLAS_TRY(cublasSetStream(m->blas, m->stream));
    /* Full float32 products: TF32 would cost the 1e-4 agreement with the
     * CPU (torch's default, allow_tf32 = False, is the same). */
    CUBLAS_TRY(cublasSetMathMode(m->blas, CUBLAS_DEFAULT_MATH));

    const size_t n = m->n_params, f = sizeof(float);
    if (dev_alloc(m, (void **)&m->params, n * f, err, errlen) ||
        dev_alloc(m, (void **)&m->grads_alloc, (n + MODEL_GRAD_PAD) * f, err, errlen))
        return -1;
    m->grads = m->grads_alloc + MODEL_GRAD_PAD;
    CUDA_TRY(cudaMemset(m->params, 0, n * f));
    CUDA_TRY(cudaMemset(m->grads_alloc, 0, (n + MODEL_GRAD_PAD) * f));
    bool need1 = m->oc.kind == OPTIM_ADAMW || m->oc.momentum != 0.0;
    bool need2 = m->oc.kind == OPTIM_ADAMW;
    if (need1) {
        if (dev_alloc(m, (void **)&m->buf1, n * f, err, errlen)) return -1;
        CUDA_TRY(cudaMemset(m->buf1, 0, n * f));
    }
    if (need2) {
        if (dev_alloc(m, (void **)&m->buf2, n * f, err, errlen)) return -1;
        CUDA_TRY(cudaMemset(m->buf2, 0, n * f));
    }
    for (int i = 0; i <= L; i++)
        if (dev_alloc(m, (void **)&m->act[i], B * (size_t)m->dims[i] * f, err, errlen)) return -1;
    if (dev_alloc(m, (void **)&m->dact, B * (size_t)m->widest * f, err, errlen) ||
        dev_alloc(m, (void **)&m->dact2, B * (size_t)m->widest * f, err, errlen) ||
        dev_alloc(m, (void **)&m->labels, B * sizeof(int32_t), err, errlen) ||
        dev_alloc(m, (void **)&m->idx, B * sizeof(int64_t), err, errlen) ||
        dev_alloc(m, (void **)&m->row_loss, B * sizeof(double), err, errlen) ||
        dev_alloc(m, (void **)&m->row_hit, B * sizeof(int), err, errlen) ||
        dev_alloc(m, (void **)&m->loss, sizeof(double), err, errlen) ||
        dev_alloc(m, (void **)&m->eval, sizeof(EvalOut), err, errlen))
        return -1;
    CUDA_TRY(cudaMemset(m->loss, 0, sizeof(double)));
    for (int s = 0; s < 2; s++) {
        if (host_alloc((void **)&m->h_x[s], B * (size_t)m->dims[0] * f, err, errlen) ||
            host_alloc((void **)&m->h_y[s], B * sizeof(int32_t), err, errlen) ||
            host_alloc((void **)&m->h_idx[s], B * sizeof(int64_t), err, errlen))
            return -1;
        CUDA_TRY(cudaEventCreateWithFlags(&m->slot_free[s], cudaEventDisableTiming));
    }
    if (host_alloc((void **)&m->h_out, sizeof(StepOut), err, errlen) ||
        host_alloc((void **)&m->h_eval, sizeof(EvalOut), err, errlen))
        return -1;
    cudaEvent_t *timed[] = { &m->ev_start, &m->ev_fwd, &m->ev_bwd, &m->ev_join, &m->ev_opt, &m->ev_done };
    for (size_t i = 0; i < sizeof timed / sizeof timed[0]; i++) CUDA_TRY(cudaEventCreate(timed[i]));
    for (int i = 0; i < m->n_tensors; i++)
        CUDA_TRY(cudaEventCreateWithFlags(&m->grad_ready[i], cudaEventDisableTiming));
    return 0;
}

extern "C" int cuda_mlp_new(CudaMlp **out, const Mlp *layout, const OptimConfig *oc, int max_batch, char *err,
                            size_t errlen)
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
    for (int i = 0; i <= m->n_linear; i++) m->widest = m->dims[i] > m->widest ? m->dims[i] : m->widest;
    if (make(m, err, errlen) != 0) {
        release(m);
        return -1;
    }
    *out = m;
    return 0;
}

extern "C" void cuda_mlp_free(CudaMlp **pm)
{
    if (!pm || !*pm) return;
    release(*pm);
    *pm = NULL;
}

extern "C" void *cuda_mlp_stream(const CudaMlp *m) { return m->stream; }
extern "C" float *cuda_mlp_params(const CudaMlp *m) { return m->params; }
extern "C" float *cuda_mlp_grads(const CudaMlp *m) { return m->grads; }
extern "C" int64_t cuda_mlp_bytes(const CudaMlp *m) { return m->bytes; }

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
    return copy_sync(m, m->params, host, m->n_params * sizeof(float), cudaMemcpyHostToDevice, err, errlen);
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
    if (dev_alloc(m, (void **)&m->ds_x, xb, err, errlen) != 0) return -1;
    if (dev_alloc(m, (void **)&m->ds_y, yb, err, errlen) != 0) return -1;
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
    k_gather<<<grid_for((size_t)batch * m->dims[0]), THREADS, 0, m->stream>>>(m->act[0], m->labels, m->ds_x, m->ds_y,
                                                                              m->idx, batch, m->dims[0]);
    CUDA_LAUNCHED();
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
    k_set<<<1, 32, 0, m->stream>>>(m->grads - n, pv, n);
    CUDA_LAUNCHED();
    return 0;
}

/* act[l+1] = act[l] W_l^T + b_l, ReLU except after the last layer. */
static int forward(CudaMlp *m, int B, char *err, size_t errlen)
{
    const float one = 1.0f, zero = 0.0f;
    for (int l = 0; l < m->n_linear; l++) {
        int in = m->dims[l], out = m->dims[l + 1];
        const float *w = m->params + m->tensors[2 * l].offset;
        const float *b = m->params + m->tensors[2 * l + 1].offset;
        CUBLAS_TRY(cublasSgemm(m->blas, CUBLAS_OP_T, CUBLAS_OP_N, out, B, in, &one, w, in, m->act[l], in, &zero,
                               m->act[l + 1], out));
        size_t n = (size_t)B * out;
        k_bias_act<<<grid_for(n), THREADS, 0, m->stream>>>(m->act[l + 1], b, out, n, l < m->n_linear - 1);
        CUDA_LAUNCHED();
    }
    return 0;
}

extern "C" int cuda_mlp_forward_backward(CudaMlp *m, float grad_scale, int accumulate, CudaMlpGradHook hook,
                                         void *hook_ctx, char *err, size_t errlen)
{
    const int B = m->batch, L = m->n_linear, classes = m->dims[L];
    if (B < 1) {
        CC_ERR("forward_backward: no batch loaded (cuda_mlp_load_batch or _gather_batch)");
        return -1;
    }
    CUDA_TRY(cudaSetDevice(m->device));
    CUDA_TRY(cudaEventRecord(m->ev_start, m->stream));
    if (forward(m, B, err, errlen) != 0) return -1;
    float *dy = m->dact, *dx = m->dact2;
    const float inv_b = 1.0f / (float)B;
    k_softmax_ce<<<B, CE_THREADS, 0, m->stream>>>(m->act[L], m->labels, classes, inv_b, dy, m->row_loss, NULL);
    CUDA_LAUNCHED();
    k_sum_rows<<<1, THREADS, 0, m->stream>>>(m->row_loss, NULL, B, m->loss, NULL);
    CUDA_LAUNCHED();
    CUDA_TRY(cudaEventRecord(m->ev_fwd, m->stream));

    const float one = 1.0f, zero = 0.0f, beta_w = accumulate ? 1.0f : 0.0f;
    for (int l = L - 1; l >= 0; l--) {
        int in = m->dims[l], out = m->dims[l + 1];
        const ModelTensor *tw = &m->tensors[2 * l], *tb = &m->tensors[2 * l + 1];
        float *gw = m->grads + tw->offset, *gb = m->grads + tb->offset;
        k_bias_grad<<<(out + 31) / 32, dim3(32, 8), 0, m->stream>>>(gb, dy, B, out, grad_scale, accumulate != 0);
        CUDA_LAUNCHED();
        CUDA_TRY(cudaEventRecord(m->grad_ready[2 * l + 1], m->stream));
        if (hook) hook(hook_ctx, 2 * l + 1, m->grad_ready[2 * l + 1]);
        /* dW = scale * dY^T X (+ dW) */
        CUBLAS_TRY(cublasSgemm(m->blas, CUBLAS_OP_N, CUBLAS_OP_T, in, out, B, &grad_scale, m->act[l], in, dy, out,
                               &beta_w, gw, in));
        CUDA_TRY(cudaEventRecord(m->grad_ready[2 * l], m->stream));
        if (hook) hook(hook_ctx, 2 * l, m->grad_ready[2 * l]);
        if (l == 0) break;
        /* dX = dY W, then through the ReLU that produced act[l]. */
        const float *w = m->params + tw->offset;
        CUBLAS_TRY(cublasSgemm(m->blas, CUBLAS_OP_N, CUBLAS_OP_N, in, B, out, &one, w, in, dy, out, &zero, dx, in));
        size_t n = (size_t)B * in;
        k_relu_back<<<grid_for(n), THREADS, 0, m->stream>>>(dx, m->act[l], n);
        CUDA_LAUNCHED();
        float *t = dy;
        dy = dx;
        dx = t;
    }
    CUDA_TRY(cudaEventRecord(m->ev_bwd, m->stream));
    m->fb_queued = true;
    return 0;
}

extern "C" int cuda_mlp_optim_step(CudaMlp *m, double lr, char *err, size_t errlen)
{
    CUDA_TRY(cudaSetDevice(m->device));
    /* After whatever the caller queued since backward (comm_join's wait):
     * the gap from ev_bwd is the communication backward did not hide. */
    CUDA_TRY(cudaEventRecord(m->ev_join, m->stream));
    const OptimConfig *c = &m->oc;
    const size_t n = m->n_params;
    m->t++;
    if (c->kind == OPTIM_ADAMW) {
        /* Scalars in double, entering the tensor ops as float (optim.c). */
        const double bc1 = 1.0 - pow(c->beta1, (double)m->t);
        const double bc2 = 1.0 - pow(c->beta2, (double)m->t);
        AdamArgs a;
        a.decay = (float)(1.0 - lr * c->weight_decay);
        a.b1 = (float)c->beta1;
        a.w1 = (float)(1.0 - c->beta1);
        a.b2 = (float)c->beta2;
        a.w2 = (float)(1.0 - c->beta2);
        a.neg_step_size = (float)-(lr / bc1);
        a.bc2_sqrt = (float)sqrt(bc2);
        a.eps = (float)c->eps;
        k_adamw<<<grid_for(n), THREADS, 0, m->stream>>>(m->params, m->grads, m->buf1, m->buf2, n, a);
    } else {
        SgdArgs a;
        a.wd = (float)c->weight_decay;
        a.mom = (float)c->momentum;
        a.keep = (float)(1.0 - c->dampening);
        a.neg_lr = (float)-lr;
        a.decay = c->weight_decay != 0.0; /* torch skips the add at 0 (0 * inf) */
        a.momentum = c->momentum != 0.0;
        a.first = a.momentum && !m->has_buf;
        a.nesterov = c->nesterov;
        k_sgd<<<grid_for(n), THREADS, 0, m->stream>>>(m->params, m->grads, m->buf1, n, a);
        if (a.momentum) m->has_buf = true;
    }
    CUDA_LAUNCHED();
    CUDA_TRY(cudaEventRecord(m->ev_opt, m->stream));
    m->opt_queued = true;
    return 0;
}

/* Wait for ev, at most timeout_ms (0: block in cudaEventSynchronize).
 * Returns 0 when it has completed, 1 on the timeout, -1 on a CUDA error.
 * Yields for the first 2 ms (a step usually ends by then and latency
 * matters), then sleeps a little. */
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
    const int L = m->n_linear, classes = m->dims[L], dim = m->dims[0];
    CUDA_TRY(cudaMemsetAsync(m->eval, 0, sizeof(EvalOut), m->stream));
    for (int64_t start = 0; start < n; start += m->max_batch) {
        int b = (int)(n - start < m->max_batch ? n - start : m->max_batch);
        int s = m->slot;
        CUDA_TRY(cudaEventSynchronize(m->slot_free[s]));
        memcpy(m->h_x[s], x + (size_t)start * dim, (size_t)b * dim * sizeof(float));
        memcpy(m->h_y[s], y + start, (size_t)b * sizeof(int32_t));
        if (upload_slot(m, s, b, err, errlen) != 0 || forward(m, b, err, errlen) != 0) return -1;
        k_softmax_ce<<<b, CE_THREADS, 0, m->stream>>>(m->act[L], m->labels, classes, 0.0f, NULL, m->row_loss,
                                                      m->row_hit);
        CUDA_LAUNCHED();
        k_sum_rows<<<1, THREADS, 0, m->stream>>>(m->row_loss, m->row_hit, b, NULL, m->eval);
        CUDA_LAUNCHED();
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
