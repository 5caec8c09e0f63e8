/* cuda_gemm.cuh — the model's matrix products on its compute stream, in
 * the precision --precision asks for, with cuBLASLt's fused epilogues
 * where it has an algorithm for them and cuBLAS otherwise.
 *
 * Owns: a cuBLAS handle (math mode by precision: full FP32, or TF32
 * tensor ops), a cuBLASLt handle, one fixed workspace for each (so stream
 * capture never sees an allocation), and a small cache of cuBLASLt plans
 * (descriptors, layouts, the heuristic's algorithm, or "no algorithm")
 * keyed by shape, types, epilogue and pointer alignment. Does not own the
 * matrices. Included by .cu files of this folder only. One thread.
 *
 * Column-major, as cuBLAS: D[m, n] = alpha op(A)[m, k] op(B)[k, n] + beta D.
 * Types: GT_F32 (float) or GT_BF16 (__nv_bfloat16) for A, B and D; the
 * products accumulate in FP32 (TF32 inputs under PREC_TF32), the scalars
 * are FP32.
 */
#ifndef DDPTOP_CUDA_GEMM_CUH
#define DDPTOP_CUDA_GEMM_CUH

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <stddef.h>

#include "nn/model.h"

typedef enum { GT_F32 = 0, GT_BF16 } GemmType;

typedef enum {
    GE_NONE = 0,  /* D = alpha AB + beta D */
    GE_BIAS,      /* ... + bias[row] (length m, type of D), before the one rounding to D */
    GE_RELU_BIAS, /* max(... + bias[row], 0) */
    GE_BGRADB,    /* and bias[col] = sum over k of B (length n, type of D): the bias gradient */
} GemmEpi;

typedef struct {
    cublasOperation_t ta, tb;
    int m, n, k;
    float alpha, beta;
    const void *a;
    int lda;
    GemmType at;
    const void *b;
    int ldb;
    GemmType bt;
    void *d;
    int ldd;
    GemmType dt;
    GemmEpi epi;
    void *bias; /* GE_BIAS / GE_RELU_BIAS: read; GE_BGRADB: written */
} GemmCall;

enum { GEMM_PLANS = 96 }; /* a model's shapes, with evaluation's shorter last batch */

typedef struct GemmPlan GemmPlan;

typedef struct {
    cublasHandle_t blas;
    cublasLtHandle_t lt;
    cudaStream_t stream;
    Precision prec;
    void *ws_blas, *ws_lt;
    size_t ws_bytes;
    GemmPlan *plans[GEMM_PLANS];
    int n_plans;
    int lt_calls, plain_calls; /* counted, for cuda_mlp_describe and the tests */
} GemmCtx;

/* Handles, workspaces (counted in *bytes), math mode for prec, all bound to
 * stream. Returns 0 or -1 with err. */
int gemm_init(GemmCtx *g, cudaStream_t stream, Precision prec, int64_t *bytes, char *err, size_t errlen);
/* Frees what gemm_init made; safe on a zeroed GemmCtx. */
void gemm_done(GemmCtx *g);

/* The call through cuBLASLt with its epilogue, queued. Returns 0, 1 when
 * cuBLASLt has no algorithm for it (nothing queued, remembered: the next
 * such call answers 1 at once; do it with gemm_plain and plain kernels),
 * or -1 with err. */
int gemm_fused(GemmCtx *g, const GemmCall *c, char *err, size_t errlen);

/* The call through cuBLAS (cublasSgemm, or cublasGemmEx for bf16 inputs),
 * queued; c->epi must be GE_NONE. Returns 0 or -1 with err. */
int gemm_plain(GemmCtx *g, const GemmCall *c, char *err, size_t errlen);

#endif
