/* optim.h — torch.optim.SGD and torch.optim.AdamW update rules, exactly.
 *
 * Owns: optimizer state (momentum / exp_avg / exp_avg_sq buffers, step count).
 * Main thread only.
 */
#ifndef DDPTOP_OPTIM_H
#define DDPTOP_OPTIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { OPTIM_SGD = 0, OPTIM_ADAMW } OptimKind;

typedef struct {
    OptimKind kind;
    double lr;
    double momentum, dampening, weight_decay;
    bool nesterov;
    double beta1, beta2, eps; /* AdamW */
} OptimConfig;

typedef struct {
    OptimConfig cfg;
    size_t n;
    int64_t t;    /* steps taken */
    float *buf1;  /* SGD momentum_buffer / AdamW exp_avg */
    float *buf2;  /* AdamW exp_avg_sq */
    bool has_buf; /* SGD: momentum buffer initialised */
} Optim;

/* Defaults as torch: SGD momentum 0, dampening 0, wd 0; AdamW betas
 * (0.9, 0.999), eps 1e-8, wd 0.01. */
void optim_config_defaults(OptimConfig *c, OptimKind kind);
/* Returns 0 or -1 with err (e.g. nesterov without momentum). */
int optim_init(Optim *o, const OptimConfig *c, size_t n, char *err, size_t errlen);
void optim_done(Optim *o);
/* Whether updates use fused multiply-add, as torch's kernels do on this
 * CPU (AVX2+FMA). DDPTOP_OPTIM_FMA=0|1 overrides, for tests. */
bool optim_fused_madd(void);
/* One update with learning rate lr (the schedule's value for this step). */
void optim_step(Optim *o, float *params, const float *grads, double lr);

#endif
