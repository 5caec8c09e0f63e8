/* cuda_mlp.h — the MLP of model.h, trained on a CUDA GPU.
 *
 * Owns, on one device: parameters and gradients as one flat device buffer
 * each, laid out exactly as model.h's (state_dict order, same offsets, and
 * MODEL_GRAD_PAD floats before grads[0] for the caller's command flags), so
 * buckets, broadcasts and checkpoints carry over unchanged; activations;
 * the optimizer state (torch.optim.SGD / AdamW, as optim.c); a compute
 * stream and the matrix products' handles (cuda_gemm.cuh: FP32, TF32 or
 * bf16 as CudaMlpOptions says); with --precision bf16 a bf16 copy of the
 * parameters and bf16 activations; pinned staging for batches; optionally
 * the whole dataset on the device; with CudaMlpOptions.graph the step's
 * CUDA Graphs. Does not own
 * communication (comm.h; give it cuda_mlp_stream and the "gradient ready"
 * events) or the host copies that checkpoints are written from (Mlp and
 * Optim: cuda_mlp_get_params / cuda_mlp_get_optim fill them).
 *
 * One step, all queued on the compute stream, the host waiting only in
 * cuda_mlp_finish_step:
 *   cuda_mlp_load_batch (or cuda_mlp_gather_batch)
 *   cuda_mlp_write_pad            (the command flags, before the all-reduce)
 *   cuda_mlp_forward_backward     (hook: start each bucket's all-reduce)
 *   comm_join                     (the optimizer waits for the collectives)
 *   cuda_mlp_optim_step
 *   cuda_mlp_finish_step          (loss, reduced flags and timings to host)
 *
 * Plain C face over cuda_mlp.cu; cuda_mlp_none.c stands in without nvcc
 * and fails cuda_mlp_new with "built without CUDA". Every call makes the
 * model's device current on the calling thread. One thread at a time.
 * Errors: -1 with "cuda_mlp.cu:LINE: ..." in err; after a CUDA error the
 * model should be freed (the device may need a reset).
 */
#ifndef DDPTOP_CUDA_MLP_H
#define DDPTOP_CUDA_MLP_H

#include <stddef.h>
#include <stdint.h>

#include "nn/model.h"
#include "nn/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct CudaMlp CudaMlp;

/* How the model computes (the trainer's --precision, --gpu-fuse,
 * --cuda-graph; docs/GPU.md). */
typedef struct {
    /* PREC_FP32: full float32 products (no TF32, torch's default).
     * PREC_TF32: cuBLAS's TF32 tensor-op math, FP32 everywhere else.
     * PREC_BF16: torch.autocast(bf16)'s rules (docs/TRAINING.md
     * "Precision"): a bf16 copy of the weights, refreshed by the optimizer
     * kernel; bf16 activations; products of bf16 inputs accumulating in
     * FP32, stored in bf16; softmax and the loss in FP32; FP32 master
     * weights, optimizer state and gradients. */
    Precision precision;
    /* Non-zero: bias (+ ReLU) in forward and the bias gradient in backward
     * as cuBLASLt epilogues where cuBLASLt has an algorithm for them
     * (ddptop's kernels otherwise); the gradient scale is then applied to
     * the loss gradient instead of to each product (the same value when
     * the scale is a power of two). Zero: cuBLAS and the kernels only. */
    int fuse;
    /* Non-zero: forward + backward, and the optimizer, each captured once
     * in a CUDA Graph and replayed (one graph per batch size; the
     * optimizer's scalars live in device memory). The hook is then called
     * after the replay is launched, in the same order, with events the
     * graph records; the collectives it starts run beside the graph. */
    int graph;
} CudaMlpOptions;

/* Called during cuda_mlp_forward_backward right after the kernels that make
 * tensor t's gradient final have been queued, in model.h's order ("4.bias",
 * "4.weight", "2.bias", ...: reverse tensor order). `ready` is a cudaEvent_t
 * recorded on the compute stream just after them: a collective that waits
 * on it (comm_allreduce_sum_f32_start) sees the final gradient while the
 * rest of backward runs. Valid until the next forward_backward. */
typedef void (*CudaMlpGradHook)(void *ctx, int tensor, void *ready);

/* Where a step's GPU time went, from CUDA events on the compute stream. */
typedef struct {
    double fwd_ms;       /* forward and loss */
    double bwd_ms;       /* backward (the gradient hooks' collectives overlap it) */
    double comm_wait_ms; /* end of backward until the collectives were joined: exposed comm */
    double opt_ms;       /* optimizer */
    double gpu_ms;       /* start of forward to end of optimizer */
} CudaMlpTimes;

/* A model shaped and laid out like `layout` (made by mlp_init; only its
 * dims, tensors and n_params are read) on the calling thread's current
 * device, for batches of at most max_batch rows, with optimizer `oc` (as
 * accepted by optim_init). Parameters start at zero: set them with
 * cuda_mlp_set_params. Returns 0 or -1 with err (no GPU: at once). */
int cuda_mlp_new(CudaMlp **out, const Mlp *layout, const OptimConfig *oc, int max_batch, char *err, size_t errlen);
/* The same with options (NULL: cuda_mlp_new's: FP32, fused, no graph). */
int cuda_mlp_new_with(CudaMlp **out, const Mlp *layout, const OptimConfig *oc, int max_batch, const CudaMlpOptions *opt,
                      char *err, size_t errlen);
/* What the model computes with, for the log: "bf16, cuBLASLt epilogues,
 * CUDA Graphs"; after a step, how many products took cuBLASLt's fused
 * path ("fused 6 of 8 products"). */
void cuda_mlp_describe(const CudaMlp *m, char *buf, size_t n);
/* Waits for queued work, frees everything, sets *m to NULL. Safe on NULL. */
void cuda_mlp_free(CudaMlp **m);

/* The compute stream (a cudaStream_t) for CommConfig.stream. */
void *cuda_mlp_stream(const CudaMlp *m);
/* Device pointers: n_params floats each. grads - MODEL_GRAD_PAD is the
 * start of the gradient allocation; those floats are the caller's. A
 * caller that writes the parameters through this pointer (a broadcast)
 * gets the bf16 copy refreshed before the next forward. */
float *cuda_mlp_params(const CudaMlp *m);
float *cuda_mlp_grads(const CudaMlp *m);
/* Device memory this model holds, in bytes (parameters, gradients,
 * optimizer state, activations, dataset). */
int64_t cuda_mlp_bytes(const CudaMlp *m);

/* Parameters and optimizer state to and from the host (n_params floats in
 * model.h's layout; the Optim must come from optim_init with this model's
 * config and n_params). For the broadcast, checkpoints and resume: a
 * checkpoint written from the host copies is the same file a CPU run
 * writes, and either kind of run resumes the other's. The gets wait for
 * the queued work. Return 0 or -1 with err. */
int cuda_mlp_set_params(CudaMlp *m, const float *host, char *err, size_t errlen);
int cuda_mlp_get_params(CudaMlp *m, float *host, char *err, size_t errlen);
int cuda_mlp_set_optim(CudaMlp *m, const Optim *o, char *err, size_t errlen);
int cuda_mlp_get_optim(CudaMlp *m, Optim *o, char *err, size_t errlen);
/* Gradients (n_params floats): for tests, and for reductions done on the
 * host. */
int cuda_mlp_set_grads(CudaMlp *m, const float *host, char *err, size_t errlen);
int cuda_mlp_get_grads(CudaMlp *m, float *host, char *err, size_t errlen);

/* Pinned host memory to gather the next batch into (batch-major rows of
 * dims[0] floats, and labels), so cuda_mlp_load_batch need not copy it
 * first. Waits until the buffer's previous upload is done. */
int cuda_mlp_host_batch(CudaMlp *m, float **x, int32_t **y, char *err, size_t errlen);
/* Queue the upload of a batch (x: batch rows of dims[0] floats, y: labels
 * in 0..classes-1). From the pointers cuda_mlp_host_batch gave, the copy
 * is asynchronous from pinned memory; other host memory is first copied
 * into the pinned buffer. Returns 0 or -1 with err (bad label or size). */
int cuda_mlp_load_batch(CudaMlp *m, const float *x, const int32_t *y, int batch, char *err, size_t errlen);
/* Put the whole dataset (n rows) on the device, once, if it fits in what
 * is free with a margin left for the rest. Returns 0, 1 when it does not
 * fit (nothing changed: use cuda_mlp_load_batch), or -1 with err. */
int cuda_mlp_upload_dataset(CudaMlp *m, const float *x, const int32_t *y, int64_t n, char *err, size_t errlen);
/* Gather rows idx[0..batch) of the uploaded dataset into the next batch,
 * on the device. Returns 0 or -1 with err (no dataset, index out of range). */
int cuda_mlp_gather_batch(CudaMlp *m, const int64_t *idx, int batch, char *err, size_t errlen);

/* --grad-dtype bf16 (DDP's bf16_compress_hook). Range i (offset and n in
 * gradient floats, as a bucket) is cast right after tensor after_tensor's
 * gradient is final: scratch[offset..+n) = bf16(bf16(grads[..]) / divisor)
 * into cuda_mlp_grads_bf16 (n_params bf16 values, as raw bits); the hook
 * for after_tensor then gets an event recorded after the cast. The
 * optimizer step first copies every range back: grads = float(scratch).
 * count 0 turns it off. Returns 0 or -1 with err (bad range). */
typedef struct {
    size_t offset, n;
    int after_tensor;
} CudaMlpBf16Range;
int cuda_mlp_set_bf16_grads(CudaMlp *m, const CudaMlpBf16Range *ranges, int count, float divisor, char *err,
                            size_t errlen);
uint16_t *cuda_mlp_grads_bf16(const CudaMlp *m);

/* Write the n floats just before grads[0] (n <= MODEL_GRAD_PAD), queued on
 * the compute stream: the command flags that ride in the last bucket. */
int cuda_mlp_write_pad(CudaMlp *m, const float *vals, int n, char *err, size_t errlen);

/* Forward and backward of mean cross-entropy on the loaded batch, queued.
 * Gradients are grad_scale * d(loss)/d(params) (DDP's 1/world), written
 * over the old ones, or added to them when accumulate is non-zero
 * (gradient accumulation). hook (may be NULL) as above. */
int cuda_mlp_forward_backward(CudaMlp *m, float grad_scale, int accumulate, CudaMlpGradHook hook, void *hook_ctx,
                              char *err, size_t errlen);

/* One optimizer update with learning rate lr, queued (optim.c's rules and
 * arithmetic, fused multiply-adds where optim.c fuses them). */
int cuda_mlp_optim_step(CudaMlp *m, double lr, char *err, size_t errlen);

/* Wait for the step and bring back the mean loss of the last
 * forward_backward, the n_pad floats before grads[0] as they are now (the
 * reduced flags; pad may be NULL when n_pad is 0) and the step's timings
 * (times may be NULL). Waits at most timeout_ms (0: no limit) and returns
 * 1 if the step is not done by then: call again with the same arguments
 * to wait on (send a heartbeat in between; past the collective timeout,
 * comm_abort — a collective is stuck). Returns 0 when done, or -1 with
 * err. */
int cuda_mlp_finish_step(CudaMlp *m, int64_t timeout_ms, double *loss, float *pad, int n_pad, CudaMlpTimes *times,
                         char *err, size_t errlen);

/* Forward only over n rows of host data, in batches of max_batch:
 * *correct gets the argmax hits (first maximum wins, as torch.argmax) and
 * the summed cross-entropy is added to *loss_sum (may be NULL). Waits.
 * Returns 0 or -1 with err. */
int cuda_mlp_evaluate(CudaMlp *m, const float *x, const int32_t *y, int64_t n, int64_t *correct, double *loss_sum,
                      char *err, size_t errlen);

/* The floor of a step on this GPU (make bench-gpu): the products of one
 * training step of `layout` at `batch` rows (forward, and in backward the
 * weight gradients and every input gradient but the first layer's), in
 * bf16 through cuBLASLt with FP32 accumulation, timed back to back over
 * `reps` rounds after a warm-up, on the calling thread's device. *ms gets
 * one step's products, *tflops the rate they ran at (FLOPs counted 2mnk).
 * Returns 0 or -1 with err. */
int cuda_mlp_gemm_floor(const Mlp *layout, int batch, int reps, double *ms, double *tflops, char *err, size_t errlen);

/* "cublas 13.0.2" or NULL in a build without CUDA. Static storage. */
const char *cuda_mlp_version(void);

#ifdef __cplusplus
}
#endif

#endif
