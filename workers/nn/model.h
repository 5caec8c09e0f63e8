/* model.h — the MLP: torch.nn.Sequential(Linear, ReLU, ..., Linear) on the CPU.
 *
 * Owns: parameters and gradients as one flat float buffer each, laid out in
 * PyTorch's state_dict order ("0.weight" [out,in], "0.bias", "2.weight", ...),
 * forward, backward of mean cross-entropy (OpenBLAS sgemm), activations.
 * Does not own: optimizer state, communication. Main thread only; the
 * backward hook lets the caller start all-reduces while backward goes on.
 */
#ifndef DDPTOP_MODEL_H
#define DDPTOP_MODEL_H

#include <stddef.h>
#include <stdint.h>

#define MODEL_MAX_LINEAR 16
/* Floats reserved just before grads[0] for the caller: the trainer puts its
 * command flags there so they ride in the last bucket's all-reduce without a
 * copy (docs/TRAINING.md, "Commands"). */
#define MODEL_GRAD_PAD   16

/* The arithmetic of the GEMMs (--precision; docs/TRAINING.md, "Precision").
 * Master weights, gradients handed to the optimizer and its state stay FP32
 * in every mode, as under torch.autocast. PREC_TF32: GEMM inputs rounded to
 * TF32 (cuBLAS's TF32 math mode); PREC_BF16: autocast(bf16)'s rules (GEMM
 * inputs and outputs in bf16, FP32 accumulation; loss and softmax in FP32). */
typedef enum { PREC_FP32 = 0, PREC_TF32, PREC_BF16 } Precision;

/* "fp32", "tf32", "bf16". */
const char *precision_name(Precision p);
/* Parse a precision_name; 0, or -1 for an unknown name. */
int precision_parse(const char *s, Precision *out);

typedef struct {
    char name[32]; /* "0.weight" */
    int ndim;      /* 1 or 2 */
    int64_t shape[2];
    size_t offset; /* in floats, into params / grads */
    size_t numel;
} ModelTensor;

typedef struct {
    int n_linear;
    int dims[MODEL_MAX_LINEAR + 1]; /* dims[0] = input, dims[n_linear] = classes */
    int n_tensors;                  /* 2 * n_linear */
    ModelTensor tensors[2 * MODEL_MAX_LINEAR];
    size_t n_params;
    float *params, *grads; /* grads - MODEL_GRAD_PAD is the allocation */
    int max_batch;
    float *act[MODEL_MAX_LINEAR + 1]; /* act[0] = input copy, act[i] output of layer i (post-ReLU) */
    float *dact;                      /* scratch for backward */
    float *dact2;
    double loss;    /* the last forward's mean loss, set before backward (hooks may read it) */
    Precision prec; /* PREC_FP32 unless mlp_set_precision said otherwise */
    float *wq;      /* params rounded for the GEMMs (same layout); NULL in fp32 */
    int wq_stale;   /* wq is to be rounded again from params before the next forward */
} Mlp;

/* Parse "mlp:784,256,256,10" into dims/n_linear. Returns 0 or -1 with err. */
int mlp_parse(const char *spec, int *dims, int *n_linear, char *err, size_t errlen);
/* Allocate for a batch of at most max_batch rows. Returns 0 or -1 with err. */
int mlp_init(Mlp *m, const int *dims, int n_linear, int max_batch, char *err, size_t errlen);
void mlp_done(Mlp *m);
/* The GEMMs' arithmetic from now on (docs/TRAINING.md, "Precision"); FP32
 * is the default and stays bit for bit what it always was. TF32 and BF16
 * keep a rounded copy of the parameters (n_params floats, allocated here,
 * once). Returns 0 or -1 with err. */
int mlp_set_precision(Mlp *m, Precision p, char *err, size_t errlen);
/* The parameters changed (optimizer step, broadcast, load): the rounded
 * copy is made again, once, at the next forward. Callers that change
 * params between forwards under TF32 or BF16 must call it; free in FP32. */
void mlp_params_changed(Mlp *m);
/* nn.Linear's default init: weight and bias uniform in +-1/sqrt(in), seeded. */
void mlp_reset_params(Mlp *m, uint64_t seed);

/* Called during backward as soon as tensor `t` (index into m->tensors) has
 * its gradient final. Tensors arrive in reverse order. */
typedef void (*MlpGradHook)(void *ctx, int tensor);

/* Forward + backward for one batch: grads = d(mean CE)/dparams (overwritten),
 * in m->prec's arithmetic (the gradients FP32 values in every mode).
 * Returns the mean loss; *fwd_ms / *bwd_ms (may be NULL) get timings. */
double mlp_forward_backward(Mlp *m, const float *x, const int32_t *y, int batch, MlpGradHook hook, void *hook_ctx,
                            double *fwd_ms, double *bwd_ms);
/* Forward only; returns the number of correct argmax predictions and adds
 * the summed loss to *loss_sum (may be NULL). */
int64_t mlp_evaluate(Mlp *m, const float *x, const int32_t *y, int batch, double *loss_sum);

#endif
