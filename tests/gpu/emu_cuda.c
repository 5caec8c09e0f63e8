/* emu_cuda.c — a CPU stand-in for the GPU modules (gpu.h, cuda_mlp.h and
 * the nccl entry of comm.c's table), linked before libworkers.a into
 * build/tests/test_gpu_emu, so that test_gpu.c's GPU cases — their flow,
 * their expectations of the API, comm.c's staging of device buffers through
 * Gloo — run in CI, where there is no GPU. It checks the test and the
 * contracts, not the CUDA code: the "GPU" here is model.c and optim.c
 * themselves, so every numerical comparison is CPU against CPU.
 *
 * Semantics mirrored from cuda_mlp.cu: gradients scaled (and accumulated)
 * before a tensor's hook fires, hooks in reverse tensor order with a
 * non-NULL "event", the pad before grads[0] untouched by the model,
 * finish_step returning the loss, the pad and positive times, evaluation
 * leaving no batch loaded. NCCL: world size 1 only (sums and broadcasts
 * leave buffers as they are), and more ranks refused as ranks sharing the
 * one "GPU" are. CudaMlpOptions: the precision is model.c's (its bf16 and
 * TF32 math, the CPU reference), fusion is recorded and described; with graph, the hooks
 * run after backward has finished, in the same order, as after a graph's
 * replay; --grad-dtype bf16 ranges are cast (bf16.h) before their hook
 * and back at the optimizer step, as cuda_step.cu does. Single-threaded
 * per model.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/comm_backend.h"
#include "cuda/cuda_mlp.h"
#include "cuda/gpu.h"
#include "nn/bf16.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#define EMU_ERR(...)                                     \
    (snprintf(err, errlen, "emu_cuda.c:%d: ", __LINE__), \
     snprintf(err + strlen(err), errlen - strlen(err), __VA_ARGS__), -1)

/* ---- gpu.h ---------------------------------------------------------------- */

int gpu_compiled(void) { return 1; }
const char *gpu_missing(void) { return ""; }

/* DDPTOP_EMU_GPUS=N (tests): pretend to have N devices, all the same CPU. */
static int emu_gpus(void)
{
    const char *e = getenv("DDPTOP_EMU_GPUS");
    return e && atoi(e) > 0 ? atoi(e) : 1;
}

int gpu_count(int *count, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    *count = emu_gpus();
    return 0;
}

int gpu_use(int device, char *err, size_t errlen)
{
    return device >= 0 && device < emu_gpus() ? 0 : EMU_ERR("gpu_use: device %d of %d", device, emu_gpus());
}

int gpu_describe(int device, char *buf, size_t n, char *err, size_t errlen)
{
    (void)device, (void)err, (void)errlen;
    snprintf(buf, n, "CPU stand-in for a GPU (tests/gpu/emu_cuda.c)");
    return 0;
}

int gpu_mem_info(int64_t *used_bytes, int64_t *total_bytes, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    if (used_bytes) *used_bytes = 1 << 20;
    if (total_bytes) *total_bytes = (int64_t)1 << 30;
    return 0;
}

const char *gpu_version(void) { return "cuda runtime emulated (tests/gpu/emu_cuda.c)"; }

struct GpuStage {
    void *host;
    size_t cap;
};

int gpu_stage_new(GpuStage **out, void *compute_stream, char *err, size_t errlen)
{
    (void)compute_stream;
    *out = calloc(1, sizeof **out);
    return *out ? 0 : EMU_ERR("out of memory");
}

void gpu_stage_free(GpuStage **s)
{
    if (!s || !*s) return;
    free((*s)->host);
    free(*s);
    *s = NULL;
}

int gpu_stage_to_host(GpuStage *s, const void *src, size_t bytes, void *ready, void **host, char *err, size_t errlen)
{
    (void)ready;
    if (bytes > s->cap) {
        void *p = realloc(s->host, bytes);
        if (!p) return EMU_ERR("out of memory");
        s->host = p;
        s->cap = bytes;
    }
    memcpy(s->host, src, bytes);
    *host = s->host;
    return 0;
}

int gpu_stage_to_device(GpuStage *s, void *dst, size_t bytes, char *err, size_t errlen)
{
    if (bytes > s->cap) return EMU_ERR("stage holds %zu bytes", s->cap);
    memcpy(dst, s->host, bytes);
    return 0;
}

/* ---- cuda_mlp.h ------------------------------------------------------------- */

struct CudaMlp {
    CudaMlpOptions mode;
    CudaMlpBf16Range ranges[2 * MODEL_MAX_LINEAR];
    int n_ranges;
    float divisor;
    uint16_t *grads16;
    int fired[2 * MODEL_MAX_LINEAR], n_fired; /* graph: hooks owed after "replay" */
    Mlp m;
    Optim o;
    OptimConfig oc;
    float *x[2];
    int32_t *y[2];
    int slot, batch;
    float *acc; /* gradients before an accumulating backward */
    float scale;
    int accumulate;
    CudaMlpGradHook hook;
    void *hook_ctx;
    double loss;
    CudaMlpTimes times;
    bool fb, opt;
    float *ds_x;
    int32_t *ds_y;
    int64_t ds_n;
    int stream_token;
};

int cuda_mlp_new(CudaMlp **out, const Mlp *layout, const OptimConfig *oc, int max_batch, char *err, size_t errlen)
{
    return cuda_mlp_new_with(out, layout, oc, max_batch, NULL, err, errlen);
}

int cuda_mlp_new_with(CudaMlp **out, const Mlp *layout, const OptimConfig *oc, int max_batch, const CudaMlpOptions *opt,
                      char *err, size_t errlen)
{
    *out = NULL;
    if (opt && opt->precision != PREC_FP32 && opt->precision != PREC_TF32 && opt->precision != PREC_BF16)
        return EMU_ERR("cuda_mlp_new: unknown precision %d", (int)opt->precision);
    CudaMlp *g = calloc(1, sizeof *g);
    if (!g) return EMU_ERR("out of memory");
    g->mode = opt ? *opt : (CudaMlpOptions){ PREC_FP32, 1, 0 };
    if (mlp_init(&g->m, layout->dims, layout->n_linear, max_batch, err, errlen) ||
        optim_init(&g->o, oc, g->m.n_params, err, errlen) || mlp_set_precision(&g->m, g->mode.precision, err, errlen)) {
        mlp_done(&g->m);
        optim_done(&g->o);
        free(g);
        return -1;
    }
    g->oc = *oc;
    for (int s = 0; s < 2; s++) {
        g->x[s] = calloc((size_t)max_batch * layout->dims[0], sizeof(float));
        g->y[s] = calloc((size_t)max_batch, sizeof(int32_t));
    }
    g->acc = calloc(g->m.n_params + 1, sizeof(float));
    *out = g;
    return 0;
}

void cuda_mlp_free(CudaMlp **pm)
{
    if (!pm || !*pm) return;
    CudaMlp *g = *pm;
    mlp_done(&g->m);
    optim_done(&g->o);
    for (int s = 0; s < 2; s++) {
        free(g->x[s]);
        free(g->y[s]);
    }
    free(g->acc);
    free(g->grads16);
    free(g->ds_x);
    free(g->ds_y);
    free(g);
    *pm = NULL;
}

void cuda_mlp_describe(const CudaMlp *m, char *buf, size_t n)
{
    snprintf(buf, n, "%s, %s%s (emulated: model.c's arithmetic)", precision_name(m->mode.precision),
             m->mode.fuse ? "cuBLASLt epilogues" : "no fused epilogues", m->mode.graph ? ", CUDA Graphs" : "");
}

int cuda_mlp_set_bf16_grads(CudaMlp *m, const CudaMlpBf16Range *ranges, int count, float divisor, char *err,
                            size_t errlen)
{
    if (count < 0 || count > 2 * MODEL_MAX_LINEAR || (count > 0 && !(divisor > 0.0f)))
        return EMU_ERR("set_bf16_grads: %d ranges", count);
    for (int i = 0; i < count; i++)
        if (ranges[i].offset > m->m.n_params || ranges[i].n > m->m.n_params - ranges[i].offset ||
            ranges[i].after_tensor < 0 || ranges[i].after_tensor >= m->m.n_tensors)
            return EMU_ERR("set_bf16_grads: range %d outside the model", i);
    if (count > 0 && !m->grads16 && !(m->grads16 = calloc(m->m.n_params + 1, sizeof(uint16_t))))
        return EMU_ERR("out of memory");
    memcpy(m->ranges, ranges, (size_t)count * sizeof *ranges);
    m->n_ranges = count;
    m->divisor = divisor;
    return 0;
}

uint16_t *cuda_mlp_grads_bf16(const CudaMlp *m) { return m->grads16; }

void *cuda_mlp_stream(const CudaMlp *m) { return (void *)&m->stream_token; }
float *cuda_mlp_params(const CudaMlp *m) { return m->m.params; }
float *cuda_mlp_grads(const CudaMlp *m) { return m->m.grads; }
int64_t cuda_mlp_bytes(const CudaMlp *m) { return (int64_t)(m->m.n_params * 4 * sizeof(float)); }

int cuda_mlp_set_params(CudaMlp *m, const float *host, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    memcpy(m->m.params, host, m->m.n_params * sizeof(float));
    return 0;
}

int cuda_mlp_get_params(CudaMlp *m, float *host, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    memcpy(host, m->m.params, m->m.n_params * sizeof(float));
    return 0;
}

int cuda_mlp_set_grads(CudaMlp *m, const float *host, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    memcpy(m->m.grads, host, m->m.n_params * sizeof(float));
    return 0;
}

int cuda_mlp_get_grads(CudaMlp *m, float *host, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    memcpy(host, m->m.grads, m->m.n_params * sizeof(float));
    return 0;
}

static int same_optim(const CudaMlp *m, const Optim *o, char *err, size_t errlen)
{
    if (o->cfg.kind != m->oc.kind || o->n != m->m.n_params || (o->buf1 != NULL) != (m->o.buf1 != NULL) ||
        (o->buf2 != NULL) != (m->o.buf2 != NULL))
        return EMU_ERR("optimizer state does not fit the model");
    return 0;
}

int cuda_mlp_set_optim(CudaMlp *m, const Optim *o, char *err, size_t errlen)
{
    if (same_optim(m, o, err, errlen)) return -1;
    size_t b = m->m.n_params * sizeof(float);
    if (o->buf1) memcpy(m->o.buf1, o->buf1, b);
    if (o->buf2) memcpy(m->o.buf2, o->buf2, b);
    m->o.t = o->t;
    m->o.has_buf = o->has_buf;
    return 0;
}

int cuda_mlp_get_optim(CudaMlp *m, Optim *o, char *err, size_t errlen)
{
    if (same_optim(m, o, err, errlen)) return -1;
    size_t b = m->m.n_params * sizeof(float);
    if (o->buf1) memcpy(o->buf1, m->o.buf1, b);
    if (o->buf2) memcpy(o->buf2, m->o.buf2, b);
    o->t = m->o.t;
    o->has_buf = m->o.has_buf;
    return 0;
}

static int check_batch(const CudaMlp *m, const int32_t *y, int64_t n, char *err, size_t errlen)
{
    int classes = m->m.dims[m->m.n_linear];
    for (int64_t i = 0; i < n; i++)
        if (y[i] < 0 || y[i] >= classes)
            return EMU_ERR("label %d at row %lld outside 0..%d", (int)y[i], (long long)i, classes - 1);
    return 0;
}

int cuda_mlp_host_batch(CudaMlp *m, float **x, int32_t **y, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    *x = m->x[m->slot];
    *y = m->y[m->slot];
    return 0;
}

int cuda_mlp_load_batch(CudaMlp *m, const float *x, const int32_t *y, int batch, char *err, size_t errlen)
{
    if (batch < 1 || batch > m->m.max_batch)
        return EMU_ERR("batch of %d rows, the model takes 1..%d", batch, m->m.max_batch);
    if (check_batch(m, y, batch, err, errlen)) return -1;
    int s = m->slot;
    if (x != m->x[s]) memcpy(m->x[s], x, (size_t)batch * m->m.dims[0] * sizeof(float));
    if (y != m->y[s]) memcpy(m->y[s], y, (size_t)batch * sizeof(int32_t));
    m->batch = batch;
    m->slot ^= 1;
    return 0;
}

int cuda_mlp_upload_dataset(CudaMlp *m, const float *x, const int32_t *y, int64_t n, char *err, size_t errlen)
{
    if (n < 1 || check_batch(m, y, n, err, errlen)) return -1;
    free(m->ds_x);
    free(m->ds_y);
    m->ds_x = malloc((size_t)n * m->m.dims[0] * sizeof(float));
    m->ds_y = malloc((size_t)n * sizeof(int32_t));
    memcpy(m->ds_x, x, (size_t)n * m->m.dims[0] * sizeof(float));
    memcpy(m->ds_y, y, (size_t)n * sizeof(int32_t));
    m->ds_n = n;
    return 0;
}

int cuda_mlp_gather_batch(CudaMlp *m, const int64_t *idx, int batch, char *err, size_t errlen)
{
    if (batch < 1 || batch > m->m.max_batch) return EMU_ERR("batch of %d rows", batch);
    if (!m->ds_x) return EMU_ERR("gather_batch: no dataset uploaded");
    for (int i = 0; i < batch; i++)
        if (idx[i] < 0 || idx[i] >= m->ds_n)
            return EMU_ERR("gather_batch: index %lld outside the dataset", (long long)idx[i]);
    int s = m->slot, d = m->m.dims[0];
    for (int i = 0; i < batch; i++) {
        memcpy(m->x[s] + (size_t)i * d, m->ds_x + (size_t)idx[i] * d, (size_t)d * sizeof(float));
        m->y[s][i] = m->ds_y[idx[i]];
    }
    m->batch = batch;
    m->slot ^= 1;
    return 0;
}

int cuda_mlp_write_pad(CudaMlp *m, const float *vals, int n, char *err, size_t errlen)
{
    if (n < 0 || n > MODEL_GRAD_PAD) return EMU_ERR("write_pad: %d floats", n);
    memcpy(m->m.grads - n, vals, (size_t)n * sizeof(float));
    return 0;
}

/* As cuda_mlp.cu: a tensor's gradient is scaled (and accumulated) before
 * its hook sees it. */
static void emu_hook(void *ctx, int tensor)
{
    CudaMlp *m = ctx;
    const ModelTensor *t = &m->m.tensors[tensor];
    float *g = m->m.grads + t->offset;
    const float *a = m->acc + t->offset;
    for (size_t i = 0; i < t->numel; i++) g[i] = m->accumulate ? a[i] + g[i] * m->scale : g[i] * m->scale;
    if (!m->hook) return;
    for (int r = 0; r < m->n_ranges; r++) {
        const CudaMlpBf16Range *br = &m->ranges[r];
        if (br->after_tensor != tensor) continue;
        for (size_t i = 0; i < br->n; i++)
            m->grads16[br->offset + i] =
                bf16_from_f32(bf16_round(m->m.grads[br->offset + i]) / m->divisor); /* cast, then divide */
    }
    if (m->mode.graph)
        m->fired[m->n_fired++] = tensor;
    else
        m->hook(m->hook_ctx, tensor, (void *)&m->stream_token);
}

int cuda_mlp_forward_backward(CudaMlp *m, float grad_scale, int accumulate, CudaMlpGradHook hook, void *hook_ctx,
                              char *err, size_t errlen)
{
    if (m->batch < 1) return EMU_ERR("forward_backward: no batch loaded");
    if (accumulate) memcpy(m->acc, m->m.grads, m->m.n_params * sizeof(float));
    m->scale = grad_scale;
    m->accumulate = accumulate;
    m->hook = hook;
    m->hook_ctx = hook_ctx;
    double f = 0, b = 0;
    int s = m->slot ^ 1; /* the slot load_batch filled last */
    m->n_fired = 0;
    mlp_params_changed(&m->m); /* set_params or the optimizer moved them */
    m->loss = mlp_forward_backward(&m->m, m->x[s], m->y[s], m->batch, emu_hook, m, &f, &b);
    if (isnan(m->loss)) return EMU_ERR("forward_backward: the model refused the batch");
    /* a graph's replay: its hooks come once it is launched, in order */
    for (int i = 0; i < m->n_fired; i++) hook(hook_ctx, m->fired[i], (void *)&m->stream_token);
    m->times.fwd_ms = f > 0 ? f : 1e-3;
    m->times.bwd_ms = b > 0 ? b : 1e-3;
    m->fb = true;
    return 0;
}

int cuda_mlp_optim_step(CudaMlp *m, double lr, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    double t0 = now_ms();
    for (int r = 0; r < m->n_ranges; r++)
        for (size_t i = 0; i < m->ranges[r].n; i++)
            m->m.grads[m->ranges[r].offset + i] = bf16_to_f32(m->grads16[m->ranges[r].offset + i]);
    optim_step(&m->o, m->m.params, m->m.grads, lr);
    double dt = now_ms() - t0;
    m->times.opt_ms = dt > 0 ? dt : 1e-3;
    m->opt = true;
    return 0;
}

int cuda_mlp_finish_step(CudaMlp *m, int64_t timeout_ms, double *loss, float *pad, int n_pad, CudaMlpTimes *times,
                         char *err, size_t errlen)
{
    (void)timeout_ms;
    if (n_pad < 0 || n_pad > MODEL_GRAD_PAD) return EMU_ERR("finish_step: %d pad floats", n_pad);
    if (loss) *loss = m->loss;
    if (n_pad) memcpy(pad, m->m.grads - n_pad, (size_t)n_pad * sizeof(float));
    if (times) {
        memset(times, 0, sizeof *times);
        if (m->fb) {
            times->fwd_ms = m->times.fwd_ms;
            times->bwd_ms = m->times.bwd_ms;
            times->gpu_ms = times->fwd_ms + times->bwd_ms;
        }
        if (m->fb && m->opt) {
            times->opt_ms = m->times.opt_ms;
            times->gpu_ms += times->opt_ms;
        }
    }
    m->fb = m->opt = false;
    return 0;
}

int cuda_mlp_evaluate(CudaMlp *m, const float *x, const int32_t *y, int64_t n, int64_t *correct, double *loss_sum,
                      char *err, size_t errlen)
{
    if (n < 0 || check_batch(m, y, n, err, errlen)) return -1;
    *correct = mlp_evaluate(&m->m, x, y, (int)n, loss_sum);
    m->batch = 0;
    return 0;
}

int cuda_mlp_gemm_floor(const Mlp *layout, int batch, int reps, double *ms, double *tflops, char *err, size_t errlen)
{
    (void)layout, (void)batch, (void)reps, (void)ms, (void)tflops;
    return EMU_ERR("gemm_floor: no GPU products to time in the stand-in");
}

const char *cuda_mlp_version(void) { return "cublas emulated"; }

/* ---- the nccl entry: world size 1 -------------------------------------------- */

typedef struct {
    int aborted;
    int64_t t[COMM_TIMING_KEEP][3];
} EmuNccl;

static int en_create(void **impl, const CommConfig *cfg, char *err, size_t errlen)
{
    *impl = NULL;
    if (!cfg->device || strcmp(cfg->device, "cuda"))
        return EMU_ERR("comm_new: nccl reduces GPU buffers: it needs --device cuda");
    if (cfg->world > 1)
        return EMU_ERR("comm_new: ranks 0 and 1 are both on GPU 0 of the emulator; NCCL needs a "
                       "GPU of its own for every rank: use --backend gloo");
    *impl = calloc(1, sizeof(EmuNccl));
    return *impl ? 0 : EMU_ERR("out of memory");
}

static int en_allreduce(void *impl, void *buf, size_t n, CommDtype dtype, uint32_t tag, void *ready, int async,
                        int64_t ticket, char *err, size_t errlen)
{
    (void)buf, (void)n, (void)dtype, (void)tag, (void)ready, (void)async;
    EmuNccl *e = impl;
    if (e->aborted) return EMU_ERR("allreduce: communicator was aborted (comm_abort)");
    int64_t *t = e->t[ticket % COMM_TIMING_KEEP];
    t[0] = ticket;
    t[1] = t[2] = wall_ns();
    return 0;
}

static int en_broadcast(void *impl, float *buf, size_t n, int root, int64_t ticket, char *err, size_t errlen)
{
    if (root != 0) return EMU_ERR("broadcast: root %d out of range for world size 1", root);
    return en_allreduce(impl, buf, n, COMM_F32, 0, NULL, 0, ticket, err, errlen);
}

static int en_barrier(void *impl, char *err, size_t errlen)
{
    return ((EmuNccl *)impl)->aborted ? EMU_ERR("barrier: aborted") : 0;
}

static int en_join(void *impl, char *err, size_t errlen)
{
    return ((EmuNccl *)impl)->aborted ? EMU_ERR("join: aborted") : 0;
}

static int en_timing(void *impl, int64_t ticket, CommTiming *out, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    int64_t *t = ((EmuNccl *)impl)->t[ticket % COMM_TIMING_KEEP];
    if (t[0] != ticket) return 1;
    out->start_ns = t[1];
    out->done_ns = t[2];
    return 0;
}

static int en_destroy(void *impl, char *err, size_t errlen)
{
    EmuNccl *e = impl;
    int aborted = e->aborted;
    free(e);
    return aborted ? EMU_ERR("destroy: communicator was aborted (comm_abort)") : 0;
}

static void en_abort(void *impl) { ((EmuNccl *)impl)->aborted = 1; }

static const char *en_version(void) { return "nccl 2.0.0 (emulated)"; }

const CommOps comm_nccl_ops = {
    .name = "nccl",
    .compiled = 1,
    .device_buffers = 1,
    .create = en_create,
    .allreduce = en_allreduce,
    .broadcast = en_broadcast,
    .barrier = en_barrier,
    .join = en_join,
    .timing = en_timing,
    .destroy = en_destroy,
    .abort = en_abort,
    .version = en_version,
};
