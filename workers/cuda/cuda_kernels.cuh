/* cuda_kernels.cuh — ddptop's own kernels for the MLP (everything that is
 * not a matrix product), queued by cuda_mlp.cu on its stream: bias + ReLU,
 * the ReLU's gradient, softmax cross-entropy, sums of the rows' losses,
 * bias gradients, the casts of --precision bf16 and --grad-dtype bf16, the
 * batch gather, the pad, and the SGD/AdamW updates.
 *
 * Every launcher queues on `s` and returns cudaGetLastError() (a bad
 * launch configuration shows here, not later). Activation and gradient
 * pointers are float or __nv_bfloat16 as the name says (..._bf16);
 * bf16 rounding is CUDA's __float2bfloat16_rn, round to nearest even as
 * nn/bf16.h's bf16_from_f32 (they differ only in a NaN's payload).
 * Included by .cu files of this folder only.
 */
#ifndef DDPTOP_CUDA_KERNELS_CUH
#define DDPTOP_CUDA_KERNELS_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <stddef.h>
#include <stdint.h>

#include "nn/model.h"

typedef __nv_bfloat16 bf16_t;

/* The optimizer's per-step scalars, read by the update kernels from
 * device memory: a CUDA Graph replays the same pointers with new values. */
typedef struct {
    float wd, mom, keep, neg_lr;
    int decay, momentum, first, nesterov;
} SgdArgs;

typedef struct {
    float decay, b1, w1, b2, w2, neg_step_size, bc2_sqrt, eps;
} AdamArgs;

typedef struct {
    SgdArgs sgd;
    AdamArgs adam;
} OptArgs;

typedef struct {
    double loss_sum;
    unsigned long long hits;
} EvalOut;

typedef struct {
    float v[MODEL_GRAD_PAD];
} PadVals;

/* y[r, j] = relu?(y[r, j] + b[j]) in place (FP32, as model.c). */
cudaError_t kern_bias_act(cudaStream_t s, float *y, const float *b, int cols, size_t n, int relu);
/* out[r, j] = bf16(relu?(y[r, j] + float(b[j]))): the FP32 product plus the
 * bf16 bias, rounded once (--precision bf16 without cuBLASLt). */
cudaError_t kern_bias_act_bf16(cudaStream_t s, bf16_t *out, const float *y, const bf16_t *b, int cols, size_t n,
                               int relu);
/* dx[i] = 0 where a[i] is not positive (through the ReLU that made a). */
cudaError_t kern_relu_back(cudaStream_t s, float *dx, const float *a, size_t n);
cudaError_t kern_relu_back_bf16(cudaStream_t s, bf16_t *dx, const bf16_t *a, size_t n);

/* Per row of logits z [rows, k]: the cross-entropy (double, log-sum-exp
 * around the max) in row_loss; with dz, (softmax - onehot) * scale, each
 * element computed in FP32 and stored once (rounded to bf16 for the _bf16
 * form); with hit, 1 where the first maximum is the label. */
cudaError_t kern_softmax_ce(cudaStream_t s, const float *z, const int32_t *y, int rows, int k, float scale, float *dz,
                            double *row_loss, int *hit);
cudaError_t kern_softmax_ce_bf16(cudaStream_t s, const bf16_t *z, const int32_t *y, int rows, int k, float scale,
                                 bf16_t *dz, double *row_loss, int *hit);
/* Fixed-order sum of n row losses (and hits): mean into *mean_out, or
 * added to *eval. */
cudaError_t kern_sum_rows(cudaStream_t s, const double *row_loss, const int *hit, int n, double *mean_out,
                          EvalOut *eval);

/* db[j] = scale * sum_r dy[r, j] (+ db[j] with accumulate), summed in FP32;
 * the _bf16 form reads bf16 dy and rounds the sum to bf16 before the scale
 * (autocast: the bias gradient is a bf16 tensor). */
cudaError_t kern_bias_grad(cudaStream_t s, float *db, const float *dy, int rows, int cols, float scale, int accumulate);
cudaError_t kern_bias_grad_bf16(cudaStream_t s, float *db, const bf16_t *dy, int rows, int cols, float scale,
                                int accumulate);
/* g[i] = scale * float(src[i]) (+ g[i] with accumulate): a bf16 (or FP32)
 * gradient made by a product into the model's FP32 gradients. */
cudaError_t kern_grad_in_bf16(cudaStream_t s, float *g, const bf16_t *src, size_t n, float scale, int accumulate);
cudaError_t kern_grad_in(cudaStream_t s, float *g, const float *src, size_t n, float scale, int accumulate);

/* dst[i] = bf16(src[i]). */
cudaError_t kern_to_bf16(cudaStream_t s, bf16_t *dst, const float *src, size_t n);
/* --grad-dtype bf16, DDP's bf16_compress_hook: dst[i] = bf16(bf16(src[i]) /
 * divisor) (cast, then the division rounded in bf16), as raw bits. */
cudaError_t kern_pack_bf16(cudaStream_t s, uint16_t *dst, const float *src, size_t n, float divisor);
/* ...and back: dst[i] = float(src[i]) (exact). */
cudaError_t kern_unpack_bf16(cudaStream_t s, float *dst, const uint16_t *src, size_t n);

/* The dataset's rows idx[0..batch) into x / y. */
cudaError_t kern_gather(cudaStream_t s, float *x, int32_t *y, const float *ds_x, const int32_t *ds_y,
                        const int64_t *idx, int batch, int dim);
/* dst[0..n) = vals (n <= MODEL_GRAD_PAD), the values travelling as a kernel
 * argument. */
cudaError_t kern_set(cudaStream_t s, float *dst, PadVals vals, int n);

/* optim.c's updates, its fused variant's rounding, the scalars read from
 * *a on the device; with p16, also p16[i] = bf16(new p[i]) (the bf16 weight
 * copy of --precision bf16, refreshed in the same pass). */
cudaError_t kern_sgd(cudaStream_t s, float *p, const float *g, float *buf, size_t n, const OptArgs *a, bf16_t *p16);
cudaError_t kern_adamw(cudaStream_t s, float *p, const float *g, float *m, float *v, size_t n, const OptArgs *a,
                       bf16_t *p16);

#endif
