/* cuda_mlp_impl.cuh — the inside of a CudaMlp, shared by the two halves
 * of its implementation: cuda_mlp.cu (buffers, copies, batches, the host
 * wait, evaluation) and cuda_step.cu (forward, backward, the optimizer,
 * CUDA Graphs). Included by those two files only. One thread.
 */
#ifndef DDPTOP_CUDA_MLP_IMPL_CUH
#define DDPTOP_CUDA_MLP_IMPL_CUH

extern "C" {
#include "nn/model.h" /* C declarations (model.h has no extern "C" of its own) */
}
#include "cuda/cuda_mlp.h"

#include <cuda_runtime.h>

#include "cuda/cuda_gemm.cuh"
#include "cuda/cuda_kernels.cuh"

enum { MAX_TENSORS = 2 * MODEL_MAX_LINEAR, FB_GRAPHS = 2 };

struct StepOut {
    double loss;
    float pad[MODEL_GRAD_PAD];
};

/* A "gradient ready" moment: the hook's tensor and the event it gets. */
struct Fired {
    int tensor;
    cudaEvent_t ev;
};

/* One captured forward + backward. */
struct FbGraph {
    cudaGraphExec_t exec;
    int rows, accumulate, hooked;
    float scale;
    int n_fired;
    Fired fired[MAX_TENSORS];
};

struct CudaMlp {
    int device;
    int n_linear, n_tensors, widest, max_batch;
    int dims[MODEL_MAX_LINEAR + 1];
    ModelTensor tensors[MAX_TENSORS];
    size_t n_params, widest_w; /* widest_w: the largest weight (in * out) */
    OptimConfig oc;
    CudaMlpOptions opt;
    int64_t t;     /* optimizer steps taken */
    bool has_buf;  /* SGD momentum buffer initialised */
    int64_t bytes; /* device memory held */

    cudaStream_t stream;
    GemmCtx gemm;
    bool gemm_made;

    float *params, *grads_alloc, *grads, *buf1, *buf2;
    float *act[MODEL_MAX_LINEAR + 1]; /* act[0] = input batch; bf16: FP32 products before the bias */
    float *dact, *dact2;
    float *bgrad; /* fused FP32 bias gradient, widest */
    int32_t *labels;
    int64_t *idx;
    double *row_loss;
    int *row_hit;
    double *loss; /* the last forward's mean loss */
    EvalOut *eval;

    /* --precision bf16 */
    bf16_t *params16;
    bool params16_stale; /* the FP32 parameters were written from outside */
    bf16_t *act16[MODEL_MAX_LINEAR + 1];
    bf16_t *dact16, *dact16b, *w16, *bgrad16;

    /* --grad-dtype bf16 */
    uint16_t *grads16;
    CudaMlpBf16Range ranges[MAX_TENSORS];
    int n_ranges;
    float divisor;
    cudaEvent_t range_ready[MAX_TENSORS];

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
    OptArgs *h_opt, *d_opt; /* the optimizer's scalars, host and device */
    cudaEvent_t opt_in_free;

    /* CUDA Graphs */
    bool capturing;
    Fired fired[MAX_TENSORS];
    int n_fired;
    FbGraph fb[FB_GRAPHS];
    int fb_next;
    cudaGraphExec_t opt_exec;

    int batch;                  /* rows of the loaded batch; 0: none */
    bool fb_queued, opt_queued; /* since the last finish_step */
    bool done_queued;           /* finish_step's read-back is queued, not yet seen */
    int done_pad;               /* pad floats in that read-back */
    cudaEvent_t ev_start, ev_fwd, ev_bwd, ev_join, ev_opt, ev_done;
    cudaEvent_t grad_ready[MAX_TENSORS];
};

static inline bool cm_bf16_on(const CudaMlp *m) { return m->opt.precision == PREC_BF16; }

/* Under stream capture an event record becomes an external event node, so
 * each replay records it (timings, the collectives' "ready"). */
static inline cudaError_t cm_record(CudaMlp *m, cudaEvent_t ev)
{
    return cudaEventRecordWithFlags(ev, m->stream, m->capturing ? cudaEventRecordExternal : cudaEventRecordDefault);
}

/* cudaMalloc counted in m->bytes; 0 or -1 with err. */
int cm_dev_alloc(CudaMlp *m, void **p, size_t bytes, char *err, size_t errlen);
/* The bf16 weight copy from the FP32 parameters when they were written
 * from outside, queued eagerly (never inside a graph); 0 or -1 with err. */
int cm_refresh_params16(CudaMlp *m, char *err, size_t errlen);
/* Forward of B rows of the loaded batch, queued (cuda_step.cu). */
int cm_forward(CudaMlp *m, int B, char *err, size_t errlen);
/* Cross-entropy of the logits' rows into row_loss (and the loss gradient
 * times scale into dact / dact16 with with_dz; hits with hit). */
cudaError_t cm_logits_ce(CudaMlp *m, int rows, float scale, bool with_dz, int *hit);
/* Destroy the captured graphs (they are captured again when needed). */
void cm_drop_graphs(CudaMlp *m);

#endif
