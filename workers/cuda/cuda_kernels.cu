/* cuda_kernels.cu — the MLP's own kernels. See cuda_kernels.cuh.
 *
 * Arithmetic follows model.c and optim.c: the bias is added after the
 * product, softmax and the loss in double per row, bias gradients summed
 * in float; the optimizer kernels round exactly where optim.c's fused
 * variant does (fmaf where it uses MADD, __f*_rn elsewhere so nvcc cannot
 * contract), so given the same gradients the update matches optim.c with
 * fused multiply-adds bit for bit. The bf16 forms follow the spec in
 * docs/TRAINING.md "Precision": values held in bf16, arithmetic in FP32,
 * one rounding where torch.autocast stores a bf16 tensor.
 */
#include "cuda/cuda_kernels.cuh"

#include <math.h>

enum { THREADS = 256, CE_THREADS = 128 };

static unsigned grid_for(size_t n)
{
    size_t g = (n + THREADS - 1) / THREADS;
    /* Grid-stride loops beyond this: enough blocks to fill any GPU. */
    return (unsigned)(g < 1 ? 1 : g > 65535 ? 65535 : g);
}

#define GRID_STRIDE(i, n) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

static __device__ __forceinline__ float ld(const float *p, size_t i) { return p[i]; }
static __device__ __forceinline__ float ld(const bf16_t *p, size_t i) { return __bfloat162float(p[i]); }
static __device__ __forceinline__ void st(float *p, size_t i, float v) { p[i] = v; }
static __device__ __forceinline__ void st(bf16_t *p, size_t i, float v) { p[i] = __float2bfloat16_rn(v); }
static __device__ __forceinline__ float round_bf16(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }

static __global__ void k_bias_act(float *y, const float *b, int cols, size_t n, int relu)
{
    GRID_STRIDE(i, n)
    {
        float v = __fadd_rn(y[i], b[i % (size_t)cols]);
        y[i] = relu ? (v > 0.0f ? v : 0.0f) : v;
    }
}

cudaError_t kern_bias_act(cudaStream_t s, float *y, const float *b, int cols, size_t n, int relu)
{
    k_bias_act<<<grid_for(n), THREADS, 0, s>>>(y, b, cols, n, relu);
    return cudaGetLastError();
}

static __global__ void k_bias_act_bf16(bf16_t *out, const float *y, const bf16_t *b, int cols, size_t n, int relu)
{
    GRID_STRIDE(i, n)
    {
        float v = __fadd_rn(y[i], __bfloat162float(b[i % (size_t)cols]));
        out[i] = __float2bfloat16_rn(relu ? (v > 0.0f ? v : 0.0f) : v);
    }
}

cudaError_t kern_bias_act_bf16(cudaStream_t s, bf16_t *out, const float *y, const bf16_t *b, int cols, size_t n,
                               int relu)
{
    k_bias_act_bf16<<<grid_for(n), THREADS, 0, s>>>(out, y, b, cols, n, relu);
    return cudaGetLastError();
}

/* Its output is positive exactly where its input was. */
template <typename T> static __global__ void k_relu_back(T *dx, const T *a, size_t n)
{
    GRID_STRIDE(i, n)
    if (!(ld(a, i) > 0.0f)) st(dx, i, 0.0f);
}

cudaError_t kern_relu_back(cudaStream_t s, float *dx, const float *a, size_t n)
{
    k_relu_back<float><<<grid_for(n), THREADS, 0, s>>>(dx, a, n);
    return cudaGetLastError();
}

cudaError_t kern_relu_back_bf16(cudaStream_t s, bf16_t *dx, const bf16_t *a, size_t n)
{
    k_relu_back<bf16_t><<<grid_for(n), THREADS, 0, s>>>(dx, a, n);
    return cudaGetLastError();
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

/* One block per row, as model.c's row_ce. The label's element is
 * p * scale - scale, both steps in FP32 (model.c's order), then stored. */
template <typename T>
static __global__ void k_softmax_ce(const T *z, const int32_t *y, int k, float scale, T *dz, double *row_loss, int *hit)
{
    __shared__ float shf[CE_THREADS / 32];
    __shared__ double shd[CE_THREADS / 32];
    __shared__ int shi[CE_THREADS / 32];
    const int r = blockIdx.x;
    const T *zr = z + (size_t)r * k;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < k; j += blockDim.x) mx = fmaxf(mx, ld(zr, j));
    mx = block_max(mx, shf);
    double s = 0.0;
    for (int j = threadIdx.x; j < k; j += blockDim.x) s += exp((double)ld(zr, j) - (double)mx);
    s = block_sum(s, shd);
    const int label = y[r];
    if (dz) {
        T *dr = dz + (size_t)r * k;
        for (int j = threadIdx.x; j < k; j += blockDim.x) {
            float v = __fmul_rn((float)(exp((double)ld(zr, j) - (double)mx) / s), scale);
            if (j == label) v = __fsub_rn(v, scale);
            st(dr, j, v);
        }
    }
    if (hit) {
        /* The lowest index holding the maximum (mx itself). */
        int first = k;
        for (int j = threadIdx.x; j < k; j += blockDim.x)
            if (ld(zr, j) == mx && j < first) first = j;
        for (int o = 16; o > 0; o >>= 1) first = min(first, __shfl_xor_sync(0xffffffffu, first, o));
        if (threadIdx.x % 32 == 0) shi[threadIdx.x / 32] = first;
        __syncthreads();
        if (threadIdx.x == 0) {
            for (int i = 1; i < (int)blockDim.x / 32; i++) first = min(first, shi[i]);
            hit[r] = first == label;
        }
    }
    if (threadIdx.x == 0) row_loss[r] = log(s) + (double)mx - (double)ld(zr, label);
}

cudaError_t kern_softmax_ce(cudaStream_t s, const float *z, const int32_t *y, int rows, int k, float scale, float *dz,
                            double *row_loss, int *hit)
{
    k_softmax_ce<float><<<rows, CE_THREADS, 0, s>>>(z, y, k, scale, dz, row_loss, hit);
    return cudaGetLastError();
}

cudaError_t kern_softmax_ce_bf16(cudaStream_t s, const bf16_t *z, const int32_t *y, int rows, int k, float scale,
                                 bf16_t *dz, double *row_loss, int *hit)
{
    k_softmax_ce<bf16_t><<<rows, CE_THREADS, 0, s>>>(z, y, k, scale, dz, row_loss, hit);
    return cudaGetLastError();
}

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

cudaError_t kern_sum_rows(cudaStream_t s, const double *row_loss, const int *hit, int n, double *mean_out,
                          EvalOut *eval)
{
    k_sum_rows<<<1, THREADS, 0, s>>>(row_loss, hit, n, mean_out, eval);
    return cudaGetLastError();
}

/* A block takes 32 columns; its 8 rows of threads stride down the batch,
 * reading whole row segments. */
template <typename T>
static __global__ void k_bias_grad(float *db, const T *dy, int rows, int cols, float scale, int accumulate, int rnd)
{
    __shared__ float sh[8][33];
    const int col = blockIdx.x * 32 + threadIdx.x;
    float s = 0.0f;
    if (col < cols)
        for (int r = threadIdx.y; r < rows; r += 8) s += ld(dy, (size_t)r * cols + col);
    sh[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && col < cols) {
        float t = sh[0][threadIdx.x];
        for (int i = 1; i < 8; i++) t = __fadd_rn(t, sh[i][threadIdx.x]);
        if (rnd) t = round_bf16(t);
        float v = __fmul_rn(t, scale);
        db[col] = accumulate ? __fadd_rn(db[col], v) : v;
    }
}

cudaError_t kern_bias_grad(cudaStream_t s, float *db, const float *dy, int rows, int cols, float scale, int accumulate)
{
    k_bias_grad<float><<<(cols + 31) / 32, dim3(32, 8), 0, s>>>(db, dy, rows, cols, scale, accumulate, 0);
    return cudaGetLastError();
}

cudaError_t kern_bias_grad_bf16(cudaStream_t s, float *db, const bf16_t *dy, int rows, int cols, float scale,
                                int accumulate)
{
    k_bias_grad<bf16_t><<<(cols + 31) / 32, dim3(32, 8), 0, s>>>(db, dy, rows, cols, scale, accumulate, 1);
    return cudaGetLastError();
}

template <typename T> static __global__ void k_grad_in(float *g, const T *src, size_t n, float scale, int accumulate)
{
    GRID_STRIDE(i, n)
    {
        float v = __fmul_rn(ld(src, i), scale);
        g[i] = accumulate ? __fadd_rn(g[i], v) : v;
    }
}

cudaError_t kern_grad_in_bf16(cudaStream_t s, float *g, const bf16_t *src, size_t n, float scale, int accumulate)
{
    k_grad_in<bf16_t><<<grid_for(n), THREADS, 0, s>>>(g, src, n, scale, accumulate);
    return cudaGetLastError();
}

cudaError_t kern_grad_in(cudaStream_t s, float *g, const float *src, size_t n, float scale, int accumulate)
{
    k_grad_in<float><<<grid_for(n), THREADS, 0, s>>>(g, src, n, scale, accumulate);
    return cudaGetLastError();
}

static __global__ void k_to_bf16(bf16_t *dst, const float *src, size_t n)
{
    GRID_STRIDE(i, n) dst[i] = __float2bfloat16_rn(src[i]);
}

cudaError_t kern_to_bf16(cudaStream_t s, bf16_t *dst, const float *src, size_t n)
{
    k_to_bf16<<<grid_for(n), THREADS, 0, s>>>(dst, src, n);
    return cudaGetLastError();
}

static __global__ void k_pack_bf16(uint16_t *dst, const float *src, size_t n, float divisor)
{
    GRID_STRIDE(i, n)
    {
        float v = __fdiv_rn(round_bf16(src[i]), divisor);
        bf16_t h = __float2bfloat16_rn(v);
        dst[i] = *(const uint16_t *)&h;
    }
}

cudaError_t kern_pack_bf16(cudaStream_t s, uint16_t *dst, const float *src, size_t n, float divisor)
{
    k_pack_bf16<<<grid_for(n), THREADS, 0, s>>>(dst, src, n, divisor);
    return cudaGetLastError();
}

static __global__ void k_unpack_bf16(float *dst, const uint16_t *src, size_t n)
{
    GRID_STRIDE(i, n) dst[i] = __uint_as_float((unsigned)src[i] << 16);
}

cudaError_t kern_unpack_bf16(cudaStream_t s, float *dst, const uint16_t *src, size_t n)
{
    k_unpack_bf16<<<grid_for(n), THREADS, 0, s>>>(dst, src, n);
    return cudaGetLastError();
}

static __global__ void k_gather(float *x, int32_t *y, const float *ds_x, const int32_t *ds_y, const int64_t *idx,
                                int batch, int dim)
{
    size_t n = (size_t)batch * dim;
    GRID_STRIDE(e, n)
    {
        size_t r = e / dim, j = e % dim;
        int64_t k = idx[r];
        x[e] = ds_x[(size_t)k * dim + j];
        if (j == 0) y[r] = ds_y[k];
    }
}

cudaError_t kern_gather(cudaStream_t s, float *x, int32_t *y, const float *ds_x, const int32_t *ds_y,
                        const int64_t *idx, int batch, int dim)
{
    k_gather<<<grid_for((size_t)batch * dim), THREADS, 0, s>>>(x, y, ds_x, ds_y, idx, batch, dim);
    return cudaGetLastError();
}

static __global__ void k_set(float *dst, PadVals vals, int n)
{
    if ((int)threadIdx.x < n) dst[threadIdx.x] = vals.v[threadIdx.x];
}

cudaError_t kern_set(cudaStream_t s, float *dst, PadVals vals, int n)
{
    k_set<<<1, 32, 0, s>>>(dst, vals, n);
    return cudaGetLastError();
}

static __global__ void k_sgd(float *p, const float *g, float *buf, size_t n, const OptArgs *args, bf16_t *p16)
{
    const SgdArgs a = args->sgd;
    GRID_STRIDE(i, n)
    {
        float pi = p[i], gi = g[i], np;
        float d = a.decay ? fmaf(pi, a.wd, gi) : gi; /* g.add(p, alpha=wd) */
        if (!a.momentum) {
            np = fmaf(d, a.neg_lr, pi); /* p.add_(d, alpha=-lr) */
        } else if (a.first) {           /* buf = clone(d) */
            buf[i] = d;
            float u = a.nesterov ? fmaf(d, a.mom, d) : d;
            np = fmaf(u, a.neg_lr, pi);
        } else {
            float b = fmaf(d, a.keep, __fmul_rn(buf[i], a.mom));
            buf[i] = b;
            float u = a.nesterov ? fmaf(b, a.mom, d) : b;
            np = fmaf(u, a.neg_lr, pi);
        }
        p[i] = np;
        if (p16) p16[i] = __float2bfloat16_rn(np);
    }
}

cudaError_t kern_sgd(cudaStream_t s, float *p, const float *g, float *buf, size_t n, const OptArgs *a, bf16_t *p16)
{
    k_sgd<<<grid_for(n), THREADS, 0, s>>>(p, g, buf, n, a, p16);
    return cudaGetLastError();
}

static __global__ void k_adamw(float *p, const float *g, float *m, float *v, size_t n, const OptArgs *args, bf16_t *p16)
{
    const AdamArgs a = args->adam;
    GRID_STRIDE(i, n)
    {
        float gi = g[i];
        float pi = __fmul_rn(p[i], a.decay); /* mul_(1 - lr*wd) */
        float mi = fmaf(gi, a.w1, __fmul_rn(m[i], a.b1));
        float vi = fmaf(__fmul_rn(a.w2, gi), gi, __fmul_rn(v[i], a.b2));
        m[i] = mi;
        v[i] = vi;
        float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), a.bc2_sqrt), a.eps);
        float np = __fadd_rn(pi, __fdiv_rn(__fmul_rn(a.neg_step_size, mi), denom));
        p[i] = np;
        if (p16) p16[i] = __float2bfloat16_rn(np);
    }
}

cudaError_t kern_adamw(cudaStream_t s, float *p, const float *g, float *m, float *v, size_t n, const OptArgs *a,
                       bf16_t *p16)
{
    k_adamw<<<grid_for(n), THREADS, 0, s>>>(p, g, m, v, n, a, p16);
    return cudaGetLastError();
}
