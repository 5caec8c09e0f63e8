/* cuda_gemm.cu — matrix products through cuBLAS and cuBLASLt. See
 * cuda_gemm.cuh.
 *
 * A cuBLASLt plan is made the first time a (shape, types, epilogue,
 * alignment) is seen: descriptors, layouts and the heuristic's first
 * algorithm, which are then reused, so a steady step only sets the
 * pointers. The heuristic is told the pointers' real alignment: the
 * model's tensors sit at offsets in one flat buffer, not on 256-byte
 * boundaries. "No algorithm" is remembered too, and the caller falls back
 * to cuBLAS and its own kernels.
 */
#include "cuda/cuda_gemm.cuh"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_check.cuh"

/* cuBLASLt's recommended workspace on Hopper; cuBLAS gets the same. */
static const size_t GEMM_WS_BYTES = (size_t)32 << 20;

#define BLAS_OR(call, on_fail)                                                                     \
    do {                                                                                           \
        cublasStatus_t s_ = (call);                                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                         \
            char nb_[64];                                                                          \
            CC_ERR("%s: %s (%s)", cc_call_name(#call, nb_, sizeof nb_), cublasGetStatusString(s_), \
                   cublasGetStatusName(s_));                                                       \
            on_fail;                                                                               \
        }                                                                                          \
    } while (0)

struct GemmPlan {
    /* the key */
    cublasOperation_t ta, tb;
    int m, n, k, lda, ldb, ldd;
    GemmType at, bt, dt;
    GemmEpi epi;
    unsigned align_a, align_b, align_d, align_bias;
    /* the plan */
    int usable; /* 0: cuBLASLt has no algorithm */
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulAlgo_t algo;
};

static cudaDataType_t cuda_type(GemmType t) { return t == GT_BF16 ? CUDA_R_16BF : CUDA_R_32F; }

/* The largest power of two (up to 256) that divides the address. */
static unsigned alignment(const void *p)
{
    uintptr_t u = (uintptr_t)p;
    unsigned a = 256;
    while (a > 1 && (u & (a - 1))) a >>= 1;
    return a;
}

int gemm_init(GemmCtx *g, cudaStream_t stream, Precision prec, int64_t *bytes, char *err, size_t errlen)
{
    memset(g, 0, sizeof *g);
    g->stream = stream;
    g->prec = prec;
    g->ws_bytes = GEMM_WS_BYTES;
    BLAS_OR(cublasCreate(&g->blas), return -1);
    BLAS_OR(cublasSetStream(g->blas, stream), return -1);
    /* FP32: full float32 products, the CPU oracle's 1e-4 (torch's default,
     * allow_tf32 = False, too). TF32: cuBLAS's TF32 tensor-op math. bf16
     * inputs go through cublasGemmEx, whose compute type says it. */
    BLAS_OR(cublasSetMathMode(g->blas, prec == PREC_TF32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
            return -1);
    BLAS_OR(cublasLtCreate(&g->lt), return -1);
    /* Fixed workspaces: under stream capture cuBLAS must not allocate. */
    CUDA_TRY(cudaMalloc(&g->ws_blas, g->ws_bytes));
    CUDA_TRY(cudaMalloc(&g->ws_lt, g->ws_bytes));
    *bytes += 2 * (int64_t)g->ws_bytes;
    BLAS_OR(cublasSetWorkspace(g->blas, g->ws_blas, g->ws_bytes), return -1);
    return 0;
}

static void plan_free(GemmPlan *p)
{
    if (p->desc) cublasLtMatmulDescDestroy(p->desc);
    if (p->la) cublasLtMatrixLayoutDestroy(p->la);
    if (p->lb) cublasLtMatrixLayoutDestroy(p->lb);
    if (p->ld) cublasLtMatrixLayoutDestroy(p->ld);
    free(p);
}

void gemm_done(GemmCtx *g)
{
    for (int i = 0; i < g->n_plans; i++) plan_free(g->plans[i]);
    g->n_plans = 0;
    if (g->lt) cublasLtDestroy(g->lt);
    if (g->blas) cublasDestroy(g->blas);
    if (g->ws_blas) cudaFree(g->ws_blas);
    if (g->ws_lt) cudaFree(g->ws_lt);
    g->lt = NULL;
    g->blas = NULL;
    g->ws_blas = g->ws_lt = NULL;
}

static int same_key(const GemmPlan *p, const GemmPlan *k)
{
    return p->ta == k->ta && p->tb == k->tb && p->m == k->m && p->n == k->n && p->k == k->k && p->lda == k->lda &&
           p->ldb == k->ldb && p->ldd == k->ldd && p->at == k->at && p->bt == k->bt && p->dt == k->dt &&
           p->epi == k->epi && p->align_a == k->align_a && p->align_b == k->align_b && p->align_d == k->align_d &&
           p->align_bias == k->align_bias;
}

static cublasLtEpilogue_t lt_epilogue(GemmEpi e)
{
    switch (e) {
    case GE_BIAS: return CUBLASLT_EPILOGUE_BIAS;
    case GE_RELU_BIAS: return CUBLASLT_EPILOGUE_RELU_BIAS;
    case GE_BGRADB: return CUBLASLT_EPILOGUE_BGRADB;
    default: return CUBLASLT_EPILOGUE_DEFAULT;
    }
}

/* Descriptors, layouts and the heuristic's algorithm for key k. Returns 0
 * (p->usable says whether there is an algorithm) or -1 with err. */
static int plan_make(GemmCtx *g, GemmPlan *p, char *err, size_t errlen)
{
    cublasComputeType_t ct =
        g->prec == PREC_TF32 && p->at == GT_F32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    BLAS_OR(cublasLtMatmulDescCreate(&p->desc, ct, CUDA_R_32F), return -1);
    BLAS_OR(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &p->ta, sizeof p->ta), return -1);
    BLAS_OR(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &p->tb, sizeof p->tb), return -1);
    cublasLtEpilogue_t epi = lt_epilogue(p->epi);
    BLAS_OR(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi), return -1);
    /* Stored shapes: op(A) is m x k, so A is k x m when transposed. */
    int ar = p->ta == CUBLAS_OP_N ? p->m : p->k, ac = p->ta == CUBLAS_OP_N ? p->k : p->m;
    int br = p->tb == CUBLAS_OP_N ? p->k : p->n, bc = p->tb == CUBLAS_OP_N ? p->n : p->k;
    BLAS_OR(cublasLtMatrixLayoutCreate(&p->la, cuda_type(p->at), ar, ac, p->lda), return -1);
    BLAS_OR(cublasLtMatrixLayoutCreate(&p->lb, cuda_type(p->bt), br, bc, p->ldb), return -1);
    BLAS_OR(cublasLtMatrixLayoutCreate(&p->ld, cuda_type(p->dt), p->m, p->n, p->ldd), return -1);

    cublasLtMatmulPreference_t pref = NULL;
    BLAS_OR(cublasLtMatmulPreferenceCreate(&pref), return -1);
    int rc = -1;
    uint32_t aa = p->align_a, ab = p->align_b, ad = p->align_d;
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    memset(&res, 0, sizeof res);
    BLAS_OR(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &g->ws_bytes,
                                                 sizeof g->ws_bytes),
            goto out);
    BLAS_OR(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &aa, sizeof aa),
            goto out);
    BLAS_OR(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &ab, sizeof ab),
            goto out);
    BLAS_OR(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ad, sizeof ad),
            goto out);
    BLAS_OR(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ad, sizeof ad),
            goto out);
    {
        /* The heuristic wants the bias pointer set when an epilogue reads
         * or writes one (it checks its alignment): a stand-in of the same
         * alignment is enough, the real one is set per call. */
        if (p->epi != GE_NONE) {
            void *stand_in = (void *)(uintptr_t)p->align_bias;
            BLAS_OR(
                cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &stand_in, sizeof stand_in),
                goto out);
        }
        cublasStatus_t s =
            cublasLtMatmulAlgoGetHeuristic(g->lt, p->desc, p->la, p->lb, p->ld, p->ld, pref, 1, &res, &found);
        /* NOT_SUPPORTED (or no result): this fusion is not available here. */
        p->usable = s == CUBLAS_STATUS_SUCCESS && found > 0 && res.state == CUBLAS_STATUS_SUCCESS;
        if (p->usable) p->algo = res.algo;
    }
    rc = 0;
out:
    cublasLtMatmulPreferenceDestroy(pref);
    return rc;
}

int gemm_fused(GemmCtx *g, const GemmCall *c, char *err, size_t errlen)
{
    GemmPlan key;
    memset(&key, 0, sizeof key);
    key.ta = c->ta;
    key.tb = c->tb;
    key.m = c->m;
    key.n = c->n;
    key.k = c->k;
    key.lda = c->lda;
    key.ldb = c->ldb;
    key.ldd = c->ldd;
    key.at = c->at;
    key.bt = c->bt;
    key.dt = c->dt;
    key.epi = c->epi;
    key.align_a = alignment(c->a);
    key.align_b = alignment(c->b);
    key.align_d = alignment(c->d);
    key.align_bias = c->epi != GE_NONE ? alignment(c->bias) : 0;
    GemmPlan *p = NULL;
    for (int i = 0; i < g->n_plans && !p; i++)
        if (same_key(g->plans[i], &key)) p = g->plans[i];
    if (!p) {
        if (g->n_plans == GEMM_PLANS) return 1; /* more shapes than a model has: plain path */
        p = (GemmPlan *)calloc(1, sizeof *p);
        if (!p) {
            CC_ERR("gemm: out of memory");
            return -1;
        }
        *p = key;
        /* A descriptor or attribute this cuBLASLt refuses is one more
         * "no algorithm": the call falls back, and the log's count of
         * fused products shows it. */
        if (plan_make(g, p, err, errlen) != 0) {
            p->usable = 0;
            if (errlen) err[0] = 0;
        }
        g->plans[g->n_plans++] = p;
    }
    if (!p->usable) return 1;
    if (c->epi != GE_NONE)
        BLAS_OR(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &c->bias, sizeof c->bias),
                return -1);
    cublasStatus_t st = cublasLtMatmul(g->lt, p->desc, &c->alpha, c->a, p->la, c->b, p->lb, &c->beta, c->d, p->ld, c->d,
                                       p->ld, &p->algo, g->ws_lt, g->ws_bytes, g->stream);
    if (st == CUBLAS_STATUS_NOT_SUPPORTED) { /* refused before queuing anything: the plain path */
        p->usable = 0;
        return 1;
    }
    if (st != CUBLAS_STATUS_SUCCESS) {
        CC_ERR("cublasLtMatmul (%dx%dx%d, epilogue %d): %s (%s)", c->m, c->n, c->k, (int)c->epi,
               cublasGetStatusString(st), cublasGetStatusName(st));
        return -1;
    }
    g->lt_calls++;
    return 0;
}

int gemm_plain(GemmCtx *g, const GemmCall *c, char *err, size_t errlen)
{
    if (c->epi != GE_NONE) {
        CC_ERR("gemm_plain: an epilogue needs gemm_fused");
        return -1;
    }
    if (c->at == GT_F32 && c->bt == GT_F32 && c->dt == GT_F32) {
        BLAS_OR(cublasSgemm(g->blas, c->ta, c->tb, c->m, c->n, c->k, &c->alpha, (const float *)c->a, c->lda,
                            (const float *)c->b, c->ldb, &c->beta, (float *)c->d, c->ldd),
                return -1);
    } else {
        BLAS_OR(cublasGemmEx(g->blas, c->ta, c->tb, c->m, c->n, c->k, &c->alpha, c->a, cuda_type(c->at), c->lda, c->b,
                             cuda_type(c->bt), c->ldb, &c->beta, c->d, cuda_type(c->dt), c->ldd, CUBLAS_COMPUTE_32F,
                             CUBLAS_GEMM_DEFAULT),
                return -1);
    }
    g->plain_calls++;
    return 0;
}
