/* optim.c — torch.optim.SGD and torch.optim.AdamW, the single-tensor
 * (foreach=False) float32 path.
 *
 * Owns: the update rules and their state (momentum buffer, exp_avg,
 * exp_avg_sq, step count). Does not own: gradient averaging, the learning
 * rate schedule (the caller passes this step's lr), checkpointing of the
 * state (the trainer writes buf1/buf2/t). Main thread only.
 *
 * Arithmetic follows torch: tensors are float32, Python scalars (lr,
 * momentum, bias corrections, ...) are computed in double and enter the
 * tensor ops as float32. torch's vectorized kernels use fused multiply-add
 * in places, so the last bit of a result can differ from torch's; the
 * formulas are the same.
 */
#include "optim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void optim_config_defaults(OptimConfig *c, OptimKind kind)
{
    memset(c, 0, sizeof *c);
    c->kind = kind;
    if (kind == OPTIM_ADAMW) {
        c->lr = 1e-3;
        c->beta1 = 0.9;
        c->beta2 = 0.999;
        c->eps = 1e-8;
        c->weight_decay = 1e-2;
    } else {
        c->lr = 1e-3;   /* torch 1.13 requires lr; 1e-3 is torch 2.x's default */
    }
}

int optim_init(Optim *o, const OptimConfig *c, size_t n, char *err, size_t errlen)
{
    memset(o, 0, sizeof *o);
    /* The checks and messages of torch's constructors. */
    if (!(c->lr >= 0.0)) {
        snprintf(err, errlen, "optimizer: invalid learning rate %g", c->lr);
        return -1;
    }
    if (!(c->weight_decay >= 0.0)) {
        snprintf(err, errlen, "optimizer: invalid weight_decay value %g", c->weight_decay);
        return -1;
    }
    if (c->kind == OPTIM_SGD) {
        if (!(c->momentum >= 0.0)) {
            snprintf(err, errlen, "optimizer: invalid momentum value %g", c->momentum);
            return -1;
        }
        if (c->nesterov && (c->momentum <= 0.0 || c->dampening != 0.0)) {
            snprintf(err, errlen, "optimizer: Nesterov momentum requires a momentum and zero "
                     "dampening (momentum %g, dampening %g)", c->momentum, c->dampening);
            return -1;
        }
    } else if (c->kind == OPTIM_ADAMW) {
        if (!(c->eps >= 0.0)) {
            snprintf(err, errlen, "optimizer: invalid epsilon value %g", c->eps);
            return -1;
        }
        if (!(c->beta1 >= 0.0 && c->beta1 < 1.0) || !(c->beta2 >= 0.0 && c->beta2 < 1.0)) {
            snprintf(err, errlen, "optimizer: invalid betas (%g, %g), each must be in [0, 1)",
                     c->beta1, c->beta2);
            return -1;
        }
    } else {
        snprintf(err, errlen, "optimizer: unknown kind %d", (int)c->kind);
        return -1;
    }
    o->cfg = *c;
    o->n = n;
    int need1 = c->kind == OPTIM_ADAMW || c->momentum != 0.0;
    int need2 = c->kind == OPTIM_ADAMW;
    /* +1: calloc(0) may return NULL, and n == 0 is a valid (empty) model. */
    if (need1 && !(o->buf1 = calloc(n + 1, sizeof(float))))
        goto oom;
    if (need2 && !(o->buf2 = calloc(n + 1, sizeof(float))))
        goto oom;
    return 0;
oom:
    optim_done(o);
    snprintf(err, errlen, "optimizer: out of memory for %zu parameters", n);
    return -1;
}

void optim_done(Optim *o)
{
    free(o->buf1);
    free(o->buf2);
    memset(o, 0, sizeof *o);
}

/* One loop per case, without branches inside: the update is a streaming
 * pass over three arrays, and a per-element test of the config costs more
 * than the arithmetic. */
static void sgd_step(Optim *o, float *restrict p, const float *restrict g, double lr)
{
    const OptimConfig *c = &o->cfg;
    const size_t n = o->n;
    const float wd = (float)c->weight_decay, mom = (float)c->momentum;
    const float keep = (float)(1.0 - c->dampening), neg_lr = (float)-lr;
    float *restrict buf = o->buf1;
    /* torch skips the weight-decay add when wd == 0 (0 * inf would be NaN) */
    const bool decay = c->weight_decay != 0.0;

    if (c->momentum == 0.0) {
        if (decay)
            for (size_t i = 0; i < n; i++)
                p[i] = p[i] + neg_lr * (g[i] + wd * p[i]);   /* d_p = g.add(p, alpha=wd) */
        else
            for (size_t i = 0; i < n; i++)
                p[i] = p[i] + neg_lr * g[i];                 /* p.add_(d_p, alpha=-lr) */
        return;
    }
    if (!o->has_buf) {
        /* first step: momentum_buffer = clone(d_p) */
        for (size_t i = 0; i < n; i++) {
            float d = decay ? g[i] + wd * p[i] : g[i];
            buf[i] = d;
            p[i] = p[i] + neg_lr * (c->nesterov ? d + mom * d : d);
        }
        o->has_buf = true;
        return;
    }
    /* buf = buf * momentum + (1 - dampening) * d_p;
     * d_p = nesterov ? d_p + momentum * buf : buf */
    if (c->nesterov)
        for (size_t i = 0; i < n; i++) {
            float d = decay ? g[i] + wd * p[i] : g[i];
            float b = buf[i] * mom + keep * d;
            buf[i] = b;
            p[i] = p[i] + neg_lr * (d + mom * b);
        }
    else
        for (size_t i = 0; i < n; i++) {
            float d = decay ? g[i] + wd * p[i] : g[i];
            float b = buf[i] * mom + keep * d;
            buf[i] = b;
            p[i] = p[i] + neg_lr * b;
        }
}

static void adamw_step(Optim *o, float *restrict p, const float *restrict g, double lr)
{
    const OptimConfig *c = &o->cfg;
    int64_t step = o->t;   /* already incremented */
    const float decay = (float)(1.0 - lr * c->weight_decay);
    const float w1 = (float)(1.0 - c->beta1);
    const float b2 = (float)c->beta2, w2 = (float)(1.0 - c->beta2);
    const double bc1 = 1.0 - pow(c->beta1, (double)step);
    const double bc2 = 1.0 - pow(c->beta2, (double)step);
    const float neg_step_size = (float)-(lr / bc1);
    const float bc2_sqrt = (float)sqrt(bc2), eps = (float)c->eps;
    float *restrict m = o->buf1, *restrict v = o->buf2;
    for (size_t i = 0; i < o->n; i++) {
        float gi = g[i];
        p[i] = p[i] * decay;                               /* param.mul_(1 - lr*wd) */
        /* exp_avg.lerp_(grad, 1 - beta1), with torch's lerp formula for a
         * weight below 0.5 (betas near 1 make it so). */
        m[i] = w1 < 0.5f ? m[i] + w1 * (gi - m[i]) : gi - (gi - m[i]) * (1.0f - w1);
        v[i] = v[i] * b2 + w2 * gi * gi;                   /* mul_(b2).addcmul_(g, g, 1-b2) */
        float denom = sqrtf(v[i]) / bc2_sqrt + eps;
        p[i] = p[i] + neg_step_size * (m[i] / denom);      /* addcdiv_(m, denom, -step_size) */
    }
}

void optim_step(Optim *o, float *params, const float *grads, double lr)
{
    o->t++;
    if (o->cfg.kind == OPTIM_ADAMW)
        adamw_step(o, params, grads, lr);
    else
        sgd_step(o, params, grads, lr);
}
