/* cuda_step.cu — a CudaMlp's step: forward, backward, the optimizer, and
 * their CUDA Graphs (--cuda-graph). See cuda_mlp.h and the comment at the
 * top of cuda_mlp.cu (the products' layout, the graphs' contents).
 *
 * Fused (CudaMlpOptions.fuse): the bias (+ ReLU) of forward and the bias
 * gradient of backward are cuBLASLt epilogues where cuBLASLt has an
 * algorithm (cuda_gemm.cu remembers where it has not, and the plain
 * product and ddptop's kernel run instead). The gradient scale then rides
 * in the loss gradient, so no product's alpha scales a bias gradient.
 */
#include "cuda/cuda_mlp_impl.cuh"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cuda/cuda_check.cuh"

#define KERN_TRY(call) CUDA_TRY(call)

void cm_drop_graphs(CudaMlp *m)
{
    for (int i = 0; i < FB_GRAPHS; i++) {
        if (m->fb[i].exec) cudaGraphExecDestroy(m->fb[i].exec);
        memset(&m->fb[i], 0, sizeof m->fb[i]);
    }
    if (m->opt_exec) cudaGraphExecDestroy(m->opt_exec);
    m->opt_exec = NULL;
}

/* Cross-entropy of the logits of `rows` rows (FP32, or bf16 taken to FP32),
 * with the loss gradient (scaled) into dact / dact16 when with_dz. */
cudaError_t cm_logits_ce(CudaMlp *m, int rows, float scale, bool with_dz, int *hit)
{
    const int L = m->n_linear, classes = m->dims[L];
    if (cm_bf16_on(m))
        return kern_softmax_ce_bf16(m->stream, m->act16[L], m->labels, rows, classes, scale, with_dz ? m->dact16 : NULL,
                                    m->row_loss, hit);
    return kern_softmax_ce(m->stream, m->act[L], m->labels, rows, classes, scale, with_dz ? m->dact : NULL, m->row_loss,
                           hit);
}

/* One call of cuBLASLt, or 1 (nothing queued) where the model runs
 * unfused or cuBLASLt has no algorithm for it. */
static int try_fused(CudaMlp *m, const GemmCall *c, char *err, size_t errlen)
{
    if (!m->opt.fuse) return 1;
    return gemm_fused(&m->gemm, c, err, errlen);
}

static GemmCall call(cublasOperation_t ta, cublasOperation_t tb, int mm, int nn, int kk, float alpha, float beta,
                     const void *a, int lda, const void *b, int ldb, void *d, int ldd, GemmType t, GemmType dt)
{
    GemmCall c;
    memset(&c, 0, sizeof c);
    c.ta = ta;
    c.tb = tb;
    c.m = mm;
    c.n = nn;
    c.k = kk;
    c.alpha = alpha;
    c.beta = beta;
    c.a = a;
    c.lda = lda;
    c.at = t;
    c.b = b;
    c.ldb = ldb;
    c.bt = t;
    c.d = d;
    c.ldd = ldd;
    c.dt = dt;
    return c;
}

/* Layer l's output from its input, ReLU except after the last layer:
 * FP32/TF32 act[l+1] = act[l] W^T + b; bf16 act16[l+1] = bf16(act16[l]
 * W16^T + b16), the bias added to the FP32 product before the one
 * rounding. Fused: the bias (+ ReLU) is the product's epilogue. */
int cm_forward(CudaMlp *m, int B, char *err, size_t errlen)
{
    const int L = m->n_linear;
    const bool h = cm_bf16_on(m);
    if (h) KERN_TRY(kern_to_bf16(m->stream, m->act16[0], m->act[0], (size_t)B * m->dims[0]));
    for (int l = 0; l < L; l++) {
        const int in = m->dims[l], out = m->dims[l + 1];
        const int relu = l < L - 1;
        const size_t ow = m->tensors[2 * l].offset, ob = m->tensors[2 * l + 1].offset;
        const size_t n = (size_t)B * out;
        GemmCall c = h ? call(CUBLAS_OP_T, CUBLAS_OP_N, out, B, in, 1.0f, 0.0f, m->params16 + ow, in, m->act16[l], in,
                              m->act16[l + 1], out, GT_BF16, GT_BF16)
                       : call(CUBLAS_OP_T, CUBLAS_OP_N, out, B, in, 1.0f, 0.0f, m->params + ow, in, m->act[l], in,
                              m->act[l + 1], out, GT_F32, GT_F32);
        c.epi = relu ? GE_RELU_BIAS : GE_BIAS;
        c.bias = h ? (void *)(m->params16 + ob) : (void *)(m->params + ob);
        int rc = try_fused(m, &c, err, errlen);
        if (rc < 0) return -1;
        if (rc == 0) continue;
        c.epi = GE_NONE;
        c.bias = NULL;
        if (h) {
            /* The FP32 product into act[l+1], then bias, ReLU, one rounding. */
            c.d = m->act[l + 1];
            c.dt = GT_F32;
            if (gemm_plain(&m->gemm, &c, err, errlen) != 0) return -1;
            KERN_TRY(kern_bias_act_bf16(m->stream, m->act16[l + 1], m->act[l + 1], m->params16 + ob, out, n, relu));
        } else {
            if (gemm_plain(&m->gemm, &c, err, errlen) != 0) return -1;
            KERN_TRY(kern_bias_act(m->stream, m->act[l + 1], m->params + ob, out, n, relu));
        }
    }
    return 0;
}

/* Tensor t's gradient is final in stream order: its event, the bf16 casts
 * of --grad-dtype bf16 that end at it, then the hook (or, while capturing,
 * a note to call it after the replay is launched). */
static int emit(CudaMlp *m, int t, CudaMlpGradHook hook, void *ctx, char *err, size_t errlen)
{
    cudaEvent_t ev = m->grad_ready[t];
    CUDA_TRY(cm_record(m, ev));
    if (hook)
        for (int i = 0; i < m->n_ranges; i++) {
            const CudaMlpBf16Range *r = &m->ranges[i];
            if (r->after_tensor != t) continue;
            KERN_TRY(kern_pack_bf16(m->stream, m->grads16 + r->offset, m->grads + r->offset, r->n, m->divisor));
            ev = m->range_ready[i];
            CUDA_TRY(cm_record(m, ev));
        }
    if (m->capturing) {
        m->fired[m->n_fired].tensor = t;
        m->fired[m->n_fired].ev = ev;
        m->n_fired++;
    } else if (hook) {
        hook(ctx, t, ev);
    }
    return 0;
}

/* Backward of layer l with dy its output's gradient (dact or dact16):
 * bias gradient, weight gradient, each followed by emit; gs scales them
 * (1 when the loss gradient carries the scale). */
static int backward_layer(CudaMlp *m, int l, int B, const void *dy, float gs, int acc, CudaMlpGradHook hook, void *ctx,
                          char *err, size_t errlen)
{
    const int in = m->dims[l], out = m->dims[l + 1];
    const ModelTensor *tw = &m->tensors[2 * l], *tb = &m->tensors[2 * l + 1];
    float *gw = m->grads + tw->offset, *gb = m->grads + tb->offset;
    const size_t nw = (size_t)in * out;
    if (cm_bf16_on(m)) {
        /* gW = fp32(bf16(dY^T A)), gb = fp32(bf16(sum dY)): the products
         * (and the fused bias gradient) in bf16, then into the FP32
         * gradients. */
        GemmCall c = call(CUBLAS_OP_N, CUBLAS_OP_T, in, out, B, 1.0f, 0.0f, m->act16[l], in, dy, out, m->w16, in,
                          GT_BF16, GT_BF16);
        c.epi = GE_BGRADB;
        c.bias = m->bgrad16;
        int rc = try_fused(m, &c, err, errlen);
        if (rc < 0) return -1;
        if (rc == 0) {
            KERN_TRY(kern_grad_in_bf16(m->stream, gb, m->bgrad16, (size_t)out, gs, acc));
        } else {
            KERN_TRY(kern_bias_grad_bf16(m->stream, gb, (const bf16_t *)dy, B, out, gs, acc));
            c.epi = GE_NONE;
            c.bias = NULL;
            if (gemm_plain(&m->gemm, &c, err, errlen) != 0) return -1;
        }
        if (emit(m, 2 * l + 1, hook, ctx, err, errlen) != 0) return -1;
        KERN_TRY(kern_grad_in_bf16(m->stream, gw, m->w16, nw, gs, acc));
        return emit(m, 2 * l, hook, ctx, err, errlen);
    }
    /* dW = gs * dY^T X (+ dW), straight into the gradients. */
    GemmCall c = call(CUBLAS_OP_N, CUBLAS_OP_T, in, out, B, gs, acc ? 1.0f : 0.0f, m->act[l], in, dy, out, gw, in,
                      GT_F32, GT_F32);
    c.epi = GE_BGRADB;
    c.bias = m->bgrad;
    int rc = try_fused(m, &c, err, errlen);
    if (rc < 0) return -1;
    if (rc == 0) {
        /* gs is 1 here (the loss gradient carries the scale): the bias
         * gradient is the plain sum, whatever cuBLASLt does with alpha. */
        KERN_TRY(kern_grad_in(m->stream, gb, m->bgrad, (size_t)out, 1.0f, acc));
        if (emit(m, 2 * l + 1, hook, ctx, err, errlen) != 0) return -1;
        return emit(m, 2 * l, hook, ctx, err, errlen);
    }
    KERN_TRY(kern_bias_grad(m->stream, gb, (const float *)dy, B, out, gs, acc));
    if (emit(m, 2 * l + 1, hook, ctx, err, errlen) != 0) return -1;
    c.epi = GE_NONE;
    c.bias = NULL;
    if (gemm_plain(&m->gemm, &c, err, errlen) != 0) return -1;
    return emit(m, 2 * l, hook, ctx, err, errlen);
}

/* Everything from the input batch to the last gradient, queued (or
 * captured): forward, the loss and its gradient, backward. */
static int queue_fb(CudaMlp *m, int B, float grad_scale, int acc, CudaMlpGradHook hook, void *ctx, char *err,
                    size_t errlen)
{
    const int L = m->n_linear;
    const bool h = cm_bf16_on(m);
    CUDA_TRY(cm_record(m, m->ev_start));
    if (cm_forward(m, B, err, errlen) != 0) return -1;
    /* Fused: the scale rides in the loss gradient, so the products run
     * with alpha 1 and the epilogue's bias gradient needs no scaling. */
    const float inv_b = 1.0f / (float)B;
    const float dz_scale = m->opt.fuse ? inv_b * grad_scale : inv_b;
    const float gs = m->opt.fuse ? 1.0f : grad_scale;
    KERN_TRY(cm_logits_ce(m, B, dz_scale, true, NULL));
    KERN_TRY(kern_sum_rows(m->stream, m->row_loss, NULL, B, m->loss, NULL));
    CUDA_TRY(cm_record(m, m->ev_fwd));

    void *dy = h ? (void *)m->dact16 : (void *)m->dact;
    void *dx = h ? (void *)m->dact16b : (void *)m->dact2;
    for (int l = L - 1; l >= 0; l--) {
        if (backward_layer(m, l, B, dy, gs, acc, hook, ctx, err, errlen) != 0) return -1;
        if (l == 0) break;
        /* dX = dY W, then through the ReLU that produced act[l]. */
        const int in = m->dims[l], out = m->dims[l + 1];
        const size_t ow = m->tensors[2 * l].offset, n = (size_t)B * in;
        GemmCall c = h ? call(CUBLAS_OP_N, CUBLAS_OP_N, in, B, out, 1.0f, 0.0f, m->params16 + ow, in, dy, out, dx, in,
                              GT_BF16, GT_BF16)
                       : call(CUBLAS_OP_N, CUBLAS_OP_N, in, B, out, 1.0f, 0.0f, m->params + ow, in, dy, out, dx, in,
                              GT_F32, GT_F32);
        if (gemm_plain(&m->gemm, &c, err, errlen) != 0) return -1;
        if (h)
            KERN_TRY(kern_relu_back_bf16(m->stream, (bf16_t *)dx, m->act16[l], n));
        else
            KERN_TRY(kern_relu_back(m->stream, (float *)dx, m->act[l], n));
        void *t = dy;
        dy = dx;
        dx = t;
    }
    CUDA_TRY(cm_record(m, m->ev_bwd));
    return 0;
}

/* Stream capture of queue(m, ...) into *exec. The capture is ended (and
 * dropped) on every path. */
template <typename F> static int capture(CudaMlp *m, cudaGraphExec_t *exec, F queue, char *err, size_t errlen)
{
    *exec = NULL;
    /* Thread-local: another thread's CUDA calls (NCCL's, the uplink's) do
     * not invalidate this capture. */
    CUDA_TRY(cudaStreamBeginCapture(m->stream, cudaStreamCaptureModeThreadLocal));
    m->capturing = true;
    m->n_fired = 0;
    int rc = queue();
    m->capturing = false;
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture(m->stream, &g);
    if (rc == 0 && e != cudaSuccess) {
        CC_ERR("--cuda-graph: cudaStreamEndCapture: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
        rc = -1;
    }
    if (rc == 0) {
        e = cudaGraphInstantiate(exec, g, 0);
        if (e != cudaSuccess) {
            CC_ERR("--cuda-graph: cudaGraphInstantiate: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
            *exec = NULL;
            rc = -1;
        }
    }
    if (g) cudaGraphDestroy(g);
    return rc;
}

extern "C" int cuda_mlp_forward_backward(CudaMlp *m, float grad_scale, int accumulate, CudaMlpGradHook hook,
                                         void *hook_ctx, char *err, size_t errlen)
{
    const int B = m->batch;
    if (B < 1) {
        CC_ERR("forward_backward: no batch loaded (cuda_mlp_load_batch or _gather_batch)");
        return -1;
    }
    CUDA_TRY(cudaSetDevice(m->device));
    if (cm_refresh_params16(m, err, errlen) != 0) return -1;
    const int acc = accumulate != 0;
    if (!m->opt.graph) {
        if (queue_fb(m, B, grad_scale, acc, hook, hook_ctx, err, errlen) != 0) return -1;
        m->fb_queued = true;
        return 0;
    }
    FbGraph *g = NULL;
    for (int i = 0; i < FB_GRAPHS && !g; i++)
        if (m->fb[i].exec && m->fb[i].rows == B && m->fb[i].accumulate == acc && m->fb[i].scale == grad_scale &&
            m->fb[i].hooked == (hook != NULL))
            g = &m->fb[i];
    if (!g) {
        /* A new shape (an epoch's last, shorter batch): replace the older. */
        g = &m->fb[m->fb_next];
        m->fb_next = (m->fb_next + 1) % FB_GRAPHS;
        if (g->exec) cudaGraphExecDestroy(g->exec);
        memset(g, 0, sizeof *g);
        if (capture(
                m, &g->exec, [&] { return queue_fb(m, B, grad_scale, acc, hook, hook_ctx, err, errlen); }, err,
                errlen) != 0)
            return -1;
        g->rows = B;
        g->hooked = hook != NULL; /* with a hook the graph holds the bf16 casts */
        g->accumulate = acc;
        g->scale = grad_scale;
        g->n_fired = m->n_fired;
        memcpy(g->fired, m->fired, sizeof g->fired);
    }
    CUDA_TRY(cudaGraphLaunch(g->exec, m->stream));
    if (hook)
        for (int i = 0; i < g->n_fired; i++) hook(hook_ctx, g->fired[i].tensor, g->fired[i].ev);
    m->fb_queued = true;
    return 0;
}

extern "C" int cuda_mlp_set_bf16_grads(CudaMlp *m, const CudaMlpBf16Range *ranges, int count, float divisor, char *err,
                                       size_t errlen)
{
    if (count < 0 || count > MAX_TENSORS || (count > 0 && !(divisor > 0.0f))) {
        CC_ERR("set_bf16_grads: %d ranges, divisor %g", count, (double)divisor);
        return -1;
    }
    for (int i = 0; i < count; i++)
        if (ranges[i].offset > m->n_params || ranges[i].n > m->n_params - ranges[i].offset ||
            ranges[i].after_tensor < 0 || ranges[i].after_tensor >= m->n_tensors) {
            CC_ERR("set_bf16_grads: range %d (offset %zu, %zu floats, after tensor %d) outside the model", i,
                   ranges[i].offset, ranges[i].n, ranges[i].after_tensor);
            return -1;
        }
    CUDA_TRY(cudaSetDevice(m->device));
    CUDA_TRY(cudaStreamSynchronize(m->stream));
    if (count > 0 && !m->grads16) {
        if (cm_dev_alloc(m, (void **)&m->grads16, m->n_params * sizeof(uint16_t), err, errlen) != 0) return -1;
        CUDA_TRY(cudaMemset(m->grads16, 0, m->n_params * sizeof(uint16_t)));
    }
    if (count > 0) memcpy(m->ranges, ranges, (size_t)count * sizeof *ranges);
    m->n_ranges = count;
    m->divisor = divisor;
    cm_drop_graphs(m); /* they hold the casts, or their absence */
    return 0;
}

/* ---- the optimizer ------------------------------------------------------- */

/* optim.c's scalars for step m->t (already counted), as the kernels read
 * them. */
static void opt_args(const CudaMlp *m, double lr, OptArgs *o)
{
    const OptimConfig *c = &m->oc;
    memset(o, 0, sizeof *o);
    if (c->kind == OPTIM_ADAMW) {
        /* Scalars in double, entering the tensor ops as float (optim.c). */
        const double bc1 = 1.0 - pow(c->beta1, (double)m->t);
        const double bc2 = 1.0 - pow(c->beta2, (double)m->t);
        AdamArgs *a = &o->adam;
        a->decay = (float)(1.0 - lr * c->weight_decay);
        a->b1 = (float)c->beta1;
        a->w1 = (float)(1.0 - c->beta1);
        a->b2 = (float)c->beta2;
        a->w2 = (float)(1.0 - c->beta2);
        a->neg_step_size = (float)-(lr / bc1);
        a->bc2_sqrt = (float)sqrt(bc2);
        a->eps = (float)c->eps;
    } else {
        SgdArgs *a = &o->sgd;
        a->wd = (float)c->weight_decay;
        a->mom = (float)c->momentum;
        a->keep = (float)(1.0 - c->dampening);
        a->neg_lr = (float)-lr;
        a->decay = c->weight_decay != 0.0; /* torch skips the add at 0 (0 * inf) */
        a->momentum = c->momentum != 0.0;
        a->first = a->momentum && !m->has_buf;
        a->nesterov = c->nesterov;
    }
}

/* The bf16 gradients back into FP32, the update (and the bf16 weight
 * copy), the end event: queued or captured. */
static int queue_opt(CudaMlp *m, char *err, size_t errlen)
{
    for (int i = 0; i < m->n_ranges; i++)
        KERN_TRY(kern_unpack_bf16(m->stream, m->grads + m->ranges[i].offset, m->grads16 + m->ranges[i].offset,
                                  m->ranges[i].n));
    bf16_t *p16 = cm_bf16_on(m) ? m->params16 : NULL;
    if (m->oc.kind == OPTIM_ADAMW)
        KERN_TRY(kern_adamw(m->stream, m->params, m->grads, m->buf1, m->buf2, m->n_params, m->d_opt, p16));
    else
        KERN_TRY(kern_sgd(m->stream, m->params, m->grads, m->buf1, m->n_params, m->d_opt, p16));
    CUDA_TRY(cm_record(m, m->ev_opt));
    return 0;
}

extern "C" int cuda_mlp_optim_step(CudaMlp *m, double lr, char *err, size_t errlen)
{
    CUDA_TRY(cudaSetDevice(m->device));
    /* After whatever the caller queued since backward (comm_join's wait):
     * the gap from ev_bwd is the communication backward did not hide. */
    CUDA_TRY(cudaEventRecord(m->ev_join, m->stream));
    m->t++;
    /* The scalars through pinned memory into device memory, where the
     * kernels (and a graph's replay) read them. */
    CUDA_TRY(cudaEventSynchronize(m->opt_in_free));
    opt_args(m, lr, m->h_opt);
    CUDA_TRY(cudaMemcpyAsync(m->d_opt, m->h_opt, sizeof(OptArgs), cudaMemcpyHostToDevice, m->stream));
    CUDA_TRY(cudaEventRecord(m->opt_in_free, m->stream));
    if (m->oc.kind == OPTIM_SGD && m->oc.momentum != 0.0) m->has_buf = true;
    if (!m->opt.graph) {
        if (queue_opt(m, err, errlen) != 0) return -1;
    } else {
        if (!m->opt_exec && capture(
                                m, &m->opt_exec, [&] { return queue_opt(m, err, errlen); }, err, errlen) != 0)
            return -1;
        CUDA_TRY(cudaGraphLaunch(m->opt_exec, m->stream));
    }
    m->opt_queued = true;
    return 0;
}

/* Wait for ev, at most timeout_ms (0: block in cudaEventSynchronize).
 * Returns 0 when it has completed, 1 on the timeout, -1 on a CUDA error.
 * Yields for the first 2 ms (a step usually ends by then and latency
 * matters), then sleeps a little. */

/* ---- the floor (make bench-gpu) ------------------------------------------ */

extern "C" int cuda_mlp_gemm_floor(const Mlp *layout, int batch, int reps, double *ms, double *tflops, char *err,
                                   size_t errlen)
{
    const int L = layout->n_linear;
    const int *d = layout->dims;
    if (batch < 1 || reps < 1 || L < 1) {
        CC_ERR("gemm_floor: batch %d, %d rounds", batch, reps);
        return -1;
    }
    int widest = 0;
    size_t widest_w = 0;
    for (int i = 0; i <= L; i++) widest = d[i] > widest ? d[i] : widest;
    for (int l = 0; l < L; l++) widest_w = (size_t)d[l] * d[l + 1] > widest_w ? (size_t)d[l] * d[l + 1] : widest_w;
    /* Operands of the largest sizes, reused by every product (the values
     * do not change the time: zeros would, through nothing). */
    const size_t act = (size_t)batch * widest;
    bf16_t *w = NULL, *x = NULL, *y = NULL, *dw = NULL;
    cudaStream_t s = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    GemmCtx g;
    memset(&g, 0, sizeof g);
    int64_t bytes = 0;
    int rc = -1;
    double flops = 0;
    float t = 0;
    CUDA_GOTO(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDA_GOTO(cudaEventCreate(&e0));
    CUDA_GOTO(cudaEventCreate(&e1));
    CUDA_GOTO(cudaMalloc(&w, widest_w * sizeof(bf16_t)));
    CUDA_GOTO(cudaMalloc(&dw, widest_w * sizeof(bf16_t)));
    CUDA_GOTO(cudaMalloc(&x, act * sizeof(bf16_t)));
    CUDA_GOTO(cudaMalloc(&y, act * sizeof(bf16_t)));
    CUDA_GOTO(cudaMemset(w, 0x3c, widest_w * sizeof(bf16_t))); /* bf16 0x3c3c: about 0.0115 */
    CUDA_GOTO(cudaMemset(x, 0x3c, act * sizeof(bf16_t)));
    CUDA_GOTO(cudaMemset(y, 0x3c, act * sizeof(bf16_t)));
    if (gemm_init(&g, s, PREC_BF16, &bytes, err, errlen) != 0) goto fail;
    for (int round = -3; round < reps; round++) { /* three warm-up rounds */
        if (round == 0) CUDA_GOTO(cudaEventRecord(e0, s));
        for (int l = 0; l < L; l++) {
            int in = d[l], out = d[l + 1];
            GemmCall c[3] = {
                call(CUBLAS_OP_T, CUBLAS_OP_N, out, batch, in, 1.0f, 0.0f, w, in, x, in, y, out, GT_BF16, GT_BF16),
                call(CUBLAS_OP_N, CUBLAS_OP_T, in, out, batch, 1.0f, 0.0f, x, in, y, out, dw, in, GT_BF16, GT_BF16),
                call(CUBLAS_OP_N, CUBLAS_OP_N, in, batch, out, 1.0f, 0.0f, w, in, y, out, x, in, GT_BF16, GT_BF16),
            };
            for (int k = 0; k < (l == 0 ? 2 : 3); k++) {
                int r = gemm_fused(&g, &c[k], err, errlen);
                if (r == 1) r = gemm_plain(&g, &c[k], err, errlen);
                if (r != 0) goto fail;
                if (round == 0) flops += 2.0 * c[k].m * (double)c[k].n * c[k].k;
            }
        }
    }
    CUDA_GOTO(cudaEventRecord(e1, s));
    CUDA_GOTO(cudaEventSynchronize(e1));
    CUDA_GOTO(cudaEventElapsedTime(&t, e0, e1));
    *ms = (double)t / reps;
    *tflops = *ms > 0 ? flops / (*ms * 1e-3) / 1e12 : 0;
    rc = 0;
fail:
    if (s) cudaStreamSynchronize(s);
    gemm_done(&g);
    if (w) cudaFree(w);
    if (dw) cudaFree(dw);
    if (x) cudaFree(x);
    if (y) cudaFree(y);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    if (s) cudaStreamDestroy(s);
    return rc;
}
