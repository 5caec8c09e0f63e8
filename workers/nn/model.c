/* model.c — the MLP on the CPU: nn.Sequential(Linear, ReLU, ..., Linear) with
 * mean cross-entropy, forward and backward on OpenBLAS sgemm.
 *
 * Owns: the flat parameter and gradient buffers (state_dict order and names),
 * activations and backward scratch, nn.Linear's default init. The
 * MODEL_GRAD_PAD floats allocated just before grads[0] are the caller's.
 * Does not own: optimizer state, gradient averaging, the BLAS thread count
 * (the worker sets one thread per rank). Main thread only; the gradient hook
 * runs on the calling thread, in the middle of backward.
 *
 * Hook order. PyTorch's autograd produces a Linear's bias and weight
 * gradients from one node (AddmmBackward); DDP buckets parameters in reverse
 * state_dict order. We report the bias first, then the weight, last layer
 * first: "4.bias", "4.weight", "2.bias", "2.weight", "0.bias", "0.weight".
 * That is exactly reverse tensor order, so a bucket filled from the back of
 * the flat buffer is always contiguous. Each hook fires before the next
 * layer's input gradient is computed, so communication overlaps it.
 */
#include "nn/model.h"

#include "nn/bf16.h"
#include "nn/optim.h"
#include "base/clock.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wire/sampler.h" /* Mt19937, for torch's init stream */

/* Any wider layer or bigger model is a typo, not a model this CPU trains. */
#define MLP_MAX_DIM    (1 << 20)
#define MLP_MAX_PARAMS ((size_t)1 << 30)
#define MLP_MAX_BATCH  (1 << 20)

const char *precision_name(Precision p)
{
    switch (p) {
    case PREC_FP32: return "fp32";
    case PREC_TF32: return "tf32";
    case PREC_BF16: return "bf16";
    }
    return "?";
}

int precision_parse(const char *s, Precision *out)
{
    for (Precision p = PREC_FP32; p <= PREC_BF16; p++)
        if (!strcmp(s, precision_name(p))) {
            *out = p;
            return 0;
        }
    return -1;
}

int mlp_parse(const char *spec, int *dims, int *n_linear, char *err, size_t errlen)
{
    const char *p = spec;
    if (strncmp(p, "mlp:", 4) != 0) {
        snprintf(err, errlen, "model '%s': expected mlp:IN,HIDDEN,...,CLASSES", spec);
        return -1;
    }
    p += 4;
    int n = 0;
    for (;;) {
        if (n > MODEL_MAX_LINEAR) {
            snprintf(err, errlen, "model '%s': more than %d layers", spec, MODEL_MAX_LINEAR);
            return -1;
        }
        if (*p < '0' || *p > '9') {
            snprintf(err, errlen, "model '%s': expected a number at '%s'", spec, p);
            return -1;
        }
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || v < 1 || v > MLP_MAX_DIM) {
            snprintf(err, errlen, "model '%s': width %.*s outside 1..%d", spec, (int)(end - p), p, MLP_MAX_DIM);
            return -1;
        }
        dims[n++] = (int)v;
        p = end;
        if (*p == '\0') break;
        if (*p != ',') {
            snprintf(err, errlen, "model '%s': unexpected '%c'", spec, *p);
            return -1;
        }
        p++;
    }
    if (n < 2) {
        snprintf(err, errlen, "model '%s': need at least input and output widths", spec);
        return -1;
    }
    *n_linear = n - 1;
    return 0;
}

void mlp_done(Mlp *m)
{
    free(m->params);
    if (m->grads) free(m->grads - MODEL_GRAD_PAD);
    for (int i = 0; i <= MODEL_MAX_LINEAR; i++) free(m->act[i]);
    free(m->dact);
    free(m->dact2);
    free(m->wq);
    memset(m, 0, sizeof *m);
}

int mlp_init(Mlp *m, const int *dims, int n_linear, int max_batch, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    if (n_linear < 1 || n_linear > MODEL_MAX_LINEAR) {
        snprintf(err, errlen, "model: %d linear layers, need 1..%d", n_linear, MODEL_MAX_LINEAR);
        return -1;
    }
    if (max_batch < 1 || max_batch > MLP_MAX_BATCH) {
        snprintf(err, errlen, "model: batch %d outside 1..%d", max_batch, MLP_MAX_BATCH);
        return -1;
    }
    int widest = 0;
    size_t off = 0;
    for (int i = 0; i <= n_linear; i++) {
        if (dims[i] < 1 || dims[i] > MLP_MAX_DIM) {
            snprintf(err, errlen, "model: width %d outside 1..%d", dims[i], MLP_MAX_DIM);
            return -1;
        }
        m->dims[i] = dims[i];
        widest = dims[i] > widest ? dims[i] : widest;
    }
    m->n_linear = n_linear;
    m->n_tensors = 2 * n_linear;
    for (int l = 0; l < n_linear; l++) {
        int in = dims[l], out = dims[l + 1];
        ModelTensor *w = &m->tensors[2 * l], *b = &m->tensors[2 * l + 1];
        /* Sequential numbers its children; ReLUs take the odd indices. */
        snprintf(w->name, sizeof w->name, "%d.weight", 2 * l);
        snprintf(b->name, sizeof b->name, "%d.bias", 2 * l);
        w->ndim = 2;
        w->shape[0] = out;
        w->shape[1] = in;
        w->numel = (size_t)out * (size_t)in;
        w->offset = off;
        off += w->numel;
        b->ndim = 1;
        b->shape[0] = out;
        b->numel = (size_t)out;
        b->offset = off;
        off += b->numel;
        if (off > MLP_MAX_PARAMS) {
            snprintf(err, errlen, "model: more than %zu parameters", MLP_MAX_PARAMS);
            return -1;
        }
    }
    m->n_params = off;
    m->max_batch = max_batch;
    m->params = calloc(off, sizeof(float));
    /* MODEL_GRAD_PAD floats before grads[0] belong to the caller (command
     * flags riding in the all-reduce); the model never reads or writes them. */
    float *galloc = calloc(off + MODEL_GRAD_PAD, sizeof(float));
    m->grads = galloc ? galloc + MODEL_GRAD_PAD : NULL;
    size_t scratch = (size_t)max_batch * (size_t)widest;
    m->dact = malloc(scratch * sizeof(float));
    m->dact2 = malloc(scratch * sizeof(float));
    int ok = m->params && m->grads && m->dact && m->dact2;
    for (int i = 0; ok && i <= n_linear; i++)
        ok = (m->act[i] = malloc((size_t)max_batch * (size_t)dims[i] * sizeof(float))) != NULL;
    if (!ok) {
        mlp_done(m);
        snprintf(err, errlen, "model: out of memory (%zu parameters, batch %d)", off, max_batch);
        return -1;
    }
    m->wq_stale = 1;
    return 0;
}

int mlp_set_precision(Mlp *m, Precision p, char *err, size_t errlen)
{
    if (p != PREC_FP32 && p != PREC_TF32 && p != PREC_BF16) {
        snprintf(err, errlen, "model: unknown precision %d", (int)p);
        return -1;
    }
    if (p != PREC_FP32 && !m->wq && !(m->wq = malloc(m->n_params * sizeof(float)))) {
        snprintf(err, errlen, "model: out of memory for the %s weight copy (%zu parameters)", precision_name(p),
                 m->n_params);
        return -1;
    }
    m->prec = p;
    m->wq_stale = 1;
    return 0;
}

void mlp_params_changed(Mlp *m) { m->wq_stale = 1; }

/* Round n floats in place as the precision's GEMM inputs are: bf16 or TF32
 * (round to nearest even, bf16.h); nothing in FP32. */
static void round_inputs(Precision p, float *v, size_t n)
{
    if (p == PREC_BF16)
        for (size_t i = 0; i < n; i++) v[i] = bf16_round(v[i]);
    else if (p == PREC_TF32)
        for (size_t i = 0; i < n; i++) v[i] = tf32_round(v[i]);
}

/* The weights the GEMMs see: params itself in FP32, else the rounded copy,
 * made again here when the parameters changed. Under bf16 the biases are
 * rounded too (autocast casts them with the weight); under TF32 they stay
 * FP32 (they are no GEMM input: cuBLAS adds them in FP32). */
static const float *gemm_params(Mlp *m)
{
    if (m->prec == PREC_FP32) return m->params;
    if (m->wq_stale) {
        memcpy(m->wq, m->params, m->n_params * sizeof(float));
        for (int t = 0; t < m->n_tensors; t++) {
            const ModelTensor *mt = &m->tensors[t];
            if (mt->ndim == 2 || m->prec == PREC_BF16) round_inputs(m->prec, m->wq + mt->offset, mt->numel);
        }
        m->wq_stale = 0;
    }
    return m->wq;
}

/* torch's CPU uniform_ for float32: 24 random bits of one mt19937 draw,
 * scaled to [from, to) in float arithmetic. */
static float torch_uniform_f32(Mt19937 *g, float from, float to)
{
    float x = (float)(mt_next_u32(g) & ((1u << 24) - 1)) * (1.0f / (float)(1u << 24));
    /* torch's uniform_ kernel computes x*(to-from)+from fused on FMA CPUs:
     * the same rounding gives the same initial weights as torch.manual_seed. */
    return optim_fused_madd() ? fmaf(x, to - from, from) : x * (to - from) + from;
}

void mlp_reset_params(Mlp *m, uint64_t seed)
{
    /* nn.Linear.reset_parameters: kaiming_uniform_(weight, a=sqrt(5)), whose
     * bound works out to 1/sqrt(fan_in), then bias uniform in 1/sqrt(fan_in).
     * Draws follow torch's recipe (torch.manual_seed(seed), then each Linear
     * in construction order, weight before bias, row-major), so the same seed
     * should give torch's weights; that has not been checked against torch
     * here, only the distribution is promised. */
    Mt19937 g;
    mt_seed(&g, (uint32_t)(seed & 0xffffffffu));
    for (int l = 0; l < m->n_linear; l++) {
        double fan_in = m->dims[l];
        double a = sqrt(5.0);
        double gain = sqrt(2.0 / (1.0 + pow(a, 2)));
        double wbound = sqrt(3.0) * (gain / sqrt(fan_in));
        double bbound = 1.0 / sqrt(fan_in);
        const ModelTensor *w = &m->tensors[2 * l], *b = &m->tensors[2 * l + 1];
        float *pw = m->params + w->offset, *pb = m->params + b->offset;
        for (size_t i = 0; i < w->numel; i++) pw[i] = torch_uniform_f32(&g, (float)-wbound, (float)wbound);
        for (size_t i = 0; i < b->numel; i++) pb[i] = torch_uniform_f32(&g, (float)-bbound, (float)bbound);
    }
    m->wq_stale = 1;
}

/* act[l+1] = act[l] W_l^T + b_l, ReLU except after the last Linear; act[0]
 * holds the batch. Under bf16 every GEMM input and output is a bf16 value:
 * the input rounded here, each output rounded once after the FP32 sum
 * (products and bias added in FP32), before the ReLU (exact in bf16), the
 * logits included. Under TF32 the inputs of the next GEMM are rounded and
 * the logits stay FP32. */
static void forward_layers(Mlp *m, int batch)
{
    const Precision p = m->prec;
    const float *params = gemm_params(m);
    round_inputs(p, m->act[0], (size_t)batch * (size_t)m->dims[0]);
    for (int l = 0; l < m->n_linear; l++) {
        int in = m->dims[l], out = m->dims[l + 1];
        const float *w = params + m->tensors[2 * l].offset;
        const float *b = params + m->tensors[2 * l + 1].offset;
        float *y = m->act[l + 1];
        size_t n = (size_t)batch * (size_t)out;
        int last = l == m->n_linear - 1;
        for (int r = 0; r < batch; r++) memcpy(y + (size_t)r * out, b, (size_t)out * sizeof(float));
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, out, in, 1.0f, m->act[l], in, w, in, 1.0f, y, out);
        if (p == PREC_BF16) round_inputs(p, y, n);
        if (!last) {
            for (size_t i = 0; i < n; i++) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
            /* A positive normal float stays positive in TF32, so the ReLU
             * mask backward reads from it is the FP32 one (subnormals aside). */
            if (p == PREC_TF32) round_inputs(p, y, n);
        }
    }
}

/* Cross-entropy of one row of logits, by log-sum-exp around the max. When
 * dlogits is not NULL it receives softmax - onehot, times scale. */
static double row_ce(const float *z, int k, int label, float *dlogits, float scale)
{
    float mx = z[0];
    for (int j = 1; j < k; j++) mx = z[j] > mx ? z[j] : mx;
    double sum = 0.0;
    for (int j = 0; j < k; j++) sum += exp((double)z[j] - (double)mx);
    if (dlogits) {
        for (int j = 0; j < k; j++) dlogits[j] = (float)(exp((double)z[j] - (double)mx) / sum) * scale;
        dlogits[label] -= scale;
    }
    return log(sum) + (double)mx - (double)z[label];
}

static int labels_ok(const int32_t *y, int batch, int classes)
{
    for (int r = 0; r < batch; r++)
        if (y[r] < 0 || y[r] >= classes) return 0;
    return 1;
}

double mlp_forward_backward(Mlp *m, const float *x, const int32_t *y, int batch, MlpGradHook hook, void *hook_ctx,
                            double *fwd_ms, double *bwd_ms)
{
    /* A batch the buffers cannot hold or a label outside the classes is a
     * caller bug; NaN tells the trainer without touching memory or grads. */
    int L = m->n_linear, classes = m->dims[L];
    if (batch < 1 || batch > m->max_batch || !labels_ok(y, batch, classes)) return NAN;

    double t0 = mono_ms_f();
    const Precision p = m->prec;
    memcpy(m->act[0], x, (size_t)batch * (size_t)m->dims[0] * sizeof(float));
    forward_layers(m, batch);
    const float *params = gemm_params(m);
    float *dy = m->dact, *dx = m->dact2;
    const float inv_b = 1.0f / (float)batch;
    double loss = 0.0;
    for (int r = 0; r < batch; r++)
        loss += row_ce(m->act[L] + (size_t)r * classes, classes, y[r], dy + (size_t)r * classes, inv_b);
    loss /= batch;
    m->loss = loss;
    /* bf16: the logits' gradient, computed in FP32, enters backward as bf16
     * (the backward of autocast's cast to FP32 for the loss). */
    if (p == PREC_BF16) round_inputs(p, dy, (size_t)batch * (size_t)classes);
    double t1 = mono_ms_f();

    for (int l = L - 1; l >= 0; l--) {
        int in = m->dims[l], out = m->dims[l + 1];
        const ModelTensor *tw = &m->tensors[2 * l], *tb = &m->tensors[2 * l + 1];
        float *gw = m->grads + tw->offset, *gb = m->grads + tb->offset;
        /* db = column sums of dY (FP32; bf16: one rounding of the sum, as
         * torch's bf16 sum) */
        for (int j = 0; j < out; j++) gb[j] = 0.0f;
        for (int r = 0; r < batch; r++) {
            const float *row = dy + (size_t)r * out;
            for (int j = 0; j < out; j++) gb[j] += row[j];
        }
        if (p == PREC_BF16) round_inputs(p, gb, (size_t)out);
        if (hook) hook(hook_ctx, 2 * l + 1);
        /* TF32: dY is a GEMM input from here on (the bias took it in FP32). */
        if (p == PREC_TF32) round_inputs(p, dy, (size_t)batch * (size_t)out);
        /* dW = dY^T X   [out, in]; bf16: the FP32 sums rounded once */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, batch, 1.0f, dy, out, m->act[l], in, 0.0f, gw,
                    in);
        if (p == PREC_BF16) round_inputs(p, gw, tw->numel);
        if (hook) hook(hook_ctx, 2 * l);
        if (l == 0) break;
        /* dX = dY W, then through the ReLU that produced act[l] (its output
         * is positive exactly where its input was). bf16: dX rounded before
         * the mask (exact either way). */
        const float *w = params + tw->offset;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, batch, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in);
        size_t n = (size_t)batch * (size_t)in;
        if (p == PREC_BF16) round_inputs(p, dx, n);
        const float *a = m->act[l];
        for (size_t i = 0; i < n; i++)
            if (!(a[i] > 0.0f)) dx[i] = 0.0f;
        float *t = dy;
        dy = dx;
        dx = t;
    }
    double t2 = mono_ms_f();
    if (fwd_ms) *fwd_ms = t1 - t0;
    if (bwd_ms) *bwd_ms = t2 - t1;
    return loss;
}

int64_t mlp_evaluate(Mlp *m, const float *x, const int32_t *y, int batch, double *loss_sum)
{
    int L = m->n_linear, classes = m->dims[L];
    if (batch < 0 || !labels_ok(y, batch, classes)) return -1;
    int64_t correct = 0;
    double sum = 0.0;
    for (int start = 0; start < batch; start += m->max_batch) {
        int b = batch - start < m->max_batch ? batch - start : m->max_batch;
        memcpy(m->act[0], x + (size_t)start * (size_t)m->dims[0], (size_t)b * (size_t)m->dims[0] * sizeof(float));
        forward_layers(m, b);
        for (int r = 0; r < b; r++) {
            const float *z = m->act[L] + (size_t)r * classes;
            int best = 0;
            for (int j = 1; j < classes; j++)
                if (z[j] > z[best]) /* first maximum wins, as torch.argmax */
                    best = j;
            correct += best == y[start + r];
            sum += row_ce(z, classes, y[start + r], NULL, 0.0f);
        }
    }
    if (loss_sum) *loss_sum += sum;
    return correct;
}
