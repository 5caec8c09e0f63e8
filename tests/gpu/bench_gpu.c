/* bench_gpu.c — steps/s of one rank training on the GPU the way the trainer
 * will: cuda_mlp with the dataset on the device, DDP's buckets all-reduced
 * by NCCL (world size 1) from the gradient hook on their ready events, the
 * optimizer joined behind them, loss and command flags read back every
 * step. Run by `make bench-gpu` beside tests/gpu/bench_torch.py.
 *
 *   bench_gpu [--model mlp:784,4096,4096,10] [--batch 512] [--steps 200]
 *             [--warmup 20] [--optimizer sgd|adamw] [--bucket-cap-mb 25]
 *             [--precision fp32|tf32|bf16] [--fuse on|off] [--graph]
 *             [--no-comm] [--json]
 *   bench_gpu --floor [--model ...] [--batch B] [--steps S] [--json]
 *
 * Prints one line (or one JSON object): steps/s and the mean step split
 * into compute (forward + backward + optimizer, CUDA events), exposed comm
 * (end of backward until the collectives were joined) and overhead (the
 * rest of the wall-clock step: launches, batch gather, the read-back).
 * --precision, --fuse and --graph are the trainer's --precision,
 * --gpu-fuse and --cuda-graph (CudaMlpOptions). --floor times the step's
 * own products in bf16 through cuBLASLt, back to back (cuda_mlp_gemm_floor):
 * the floor a bf16 step cannot beat on this GPU, and the rate reached.
 * Without a GPU: "SKIP: ..." and exit 0. Single-threaded.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ddp/bucket.h"
#include "comm/comm.h"
#include "cuda/cuda_mlp.h"
#include "cuda/gpu.h"
#include "nn/model.h"
#include "nn/optim.h"

#include "mem_store.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

enum { FLAGS = 3 };

/* The trainer's bucket logic: a bucket starts when its last tensor to
 * arrive (the lowest index, backward goes in reverse) is ready. */
typedef struct {
    Comm *c;
    float *grads;
    Bucket b[BUCKET_MAX];
    int nb;
    int64_t tickets[BUCKET_MAX];
    int started;
    int rc;
    char err[512];
} Buckets;

static void on_ready(void *ctx, int tensor, void *ready)
{
    Buckets *k = ctx;
    if (!k->c || k->rc) return;
    for (int i = 0; i < k->nb; i++) {
        if (k->b[i].last_tensor != tensor) continue;
        float *buf = k->grads + k->b[i].offset;
        size_t n = k->b[i].numel;
        if (k->b[i].offset == 0) { /* the flags ride in front of grads[0] */
            buf -= FLAGS;
            n += FLAGS;
        }
        k->rc = comm_allreduce_sum_f32_start(k->c, buf, n, (uint32_t)i, ready, &k->tickets[k->started++], k->err,
                                             sizeof k->err);
    }
}

static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint64_t next_u64(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return rs;
}

int main(int argc, char **argv)
{
    const char *model = "mlp:784,4096,4096,10", *optimizer = "sgd";
    int batch = 512, steps = 200, warmup = 20, json = 0, use_comm = 1, floor_only = 0;
    CudaMlpOptions mo = { PREC_FP32, 1, 0 };
    double cap_mb = 25;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--json"))
            json = 1;
        else if (!strcmp(a, "--no-comm"))
            use_comm = 0;
        else if (!strcmp(a, "--graph"))
            mo.graph = 1;
        else if (!strcmp(a, "--floor"))
            floor_only = 1;
        else if (v && !strcmp(a, "--precision")) {
            if (precision_parse(argv[++i], &mo.precision)) {
                fprintf(stderr, "bench_gpu: --precision fp32, tf32 or bf16, not %s\n", argv[i]);
                return 2;
            }
        } else if (v && !strcmp(a, "--fuse") && (!strcmp(v, "on") || !strcmp(v, "off")))
            mo.fuse = !strcmp(argv[++i], "on");
        else if (v && !strcmp(a, "--model"))
            model = argv[++i];
        else if (v && !strcmp(a, "--optimizer"))
            optimizer = argv[++i];
        else if (v && !strcmp(a, "--batch"))
            batch = atoi(argv[++i]);
        else if (v && !strcmp(a, "--steps"))
            steps = atoi(argv[++i]);
        else if (v && !strcmp(a, "--warmup"))
            warmup = atoi(argv[++i]);
        else if (v && !strcmp(a, "--bucket-cap-mb"))
            cap_mb = atof(argv[++i]);
        else {
            fprintf(stderr, "bench_gpu: unknown option %s\n", a);
            return 2;
        }
    }
    char err[512];
    int ngpu = 0;
    if (gpu_count(&ngpu, err, sizeof err) != 0) {
        printf("SKIP: no GPU (%s)\n", err);
        return 0;
    }
    int dims[MODEL_MAX_LINEAR + 1], L = 0;
    if (mlp_parse(model, dims, &L, err, sizeof err) != 0 || batch < 1 || steps < 1 || warmup < 0) {
        fprintf(stderr, "bench_gpu: %s\n", batch < 1 || steps < 1 ? "bad sizes" : err);
        return 2;
    }
    OptimConfig oc;
    if (!strcmp(optimizer, "adamw")) {
        optim_config_defaults(&oc, OPTIM_ADAMW);
    } else {
        optim_config_defaults(&oc, OPTIM_SGD);
        oc.lr = 0.01;
        oc.momentum = 0.9;
    }

    if (floor_only) {
        Mlp fl;
        double ms = 0, tf = 0;
        if (mlp_init(&fl, dims, L, 1, err, sizeof err) ||
            cuda_mlp_gemm_floor(&fl, batch, steps, &ms, &tf, err, sizeof err)) {
            fprintf(stderr, "bench_gpu: floor: %s\n", err);
            return 1;
        }
        mlp_done(&fl);
        if (json)
            printf("{\"who\": \"floor\", \"model\": \"%s\", \"batch\": %d, \"steps\": %d, \"floor_ms\": %.4f, "
                   "\"bf16_tflops\": %.1f}\n",
                   model, batch, steps, ms, tf);
        else
            printf("floor: %s batch %d: the step's products in bf16 take %.4f ms (%.1f TFLOP/s)\n", model, batch, ms,
                   tf);
        return 0;
    }

    Mlp lay; /* host copy of the weights; batch 1 keeps it small */
    CudaMlp *g = NULL;
    Comm *c = NULL;
    MemStore st = { 0 };
    CommStore cs = { .ctx = &st, .set = ms_set, .get = ms_get };
    float *x = NULL;
    int32_t *y = NULL;
    int64_t *idx = NULL;
    int status = 1;
    if (mlp_init(&lay, dims, L, 1, err, sizeof err)) goto fail;
    mlp_reset_params(&lay, 1);
    if (cuda_mlp_new_with(&g, &lay, &oc, batch, &mo, err, sizeof err) ||
        cuda_mlp_set_params(g, lay.params, err, sizeof err))
        goto fail;

    /* Synthetic data, uploaded once: 8 batches' worth. */
    int64_t rows = (int64_t)batch * 8;
    x = malloc((size_t)rows * dims[0] * sizeof *x);
    y = malloc((size_t)rows * sizeof *y);
    idx = malloc((size_t)batch * sizeof *idx);
    if (!x || !y || !idx) {
        snprintf(err, sizeof err, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < (size_t)rows * dims[0]; i++) x[i] = (float)(next_u64() >> 40) / 16777216.0f;
    for (int64_t r = 0; r < rows; r++) y[r] = (int32_t)(next_u64() % (uint64_t)dims[L]);
    int up = cuda_mlp_upload_dataset(g, x, y, rows, err, sizeof err);
    if (up < 0) goto fail;

    Buckets bk;
    memset(&bk, 0, sizeof bk);
    bk.grads = cuda_mlp_grads(g);
    bk.nb = bucket_assign(&lay, cap_mb, BUCKET_FIRST_CAP_BYTES, bk.b);
    if (use_comm && comm_available("nccl")) {
        CommConfig cfg = { .backend = "nccl",
                           .rank = 0,
                           .world = 1,
                           .host = "127.0.0.1",
                           .prefix = "bench",
                           .timeout_ms = 60000,
                           .store = &cs,
                           .device = "cuda",
                           .stream = cuda_mlp_stream(g) };
        if (comm_new(&c, &cfg, err, sizeof err)) goto fail;
        bk.c = c;
    }

    float flags[FLAGS] = { 0, 0, 0 }, back[FLAGS];
    double t_start = 0, sum_compute = 0, sum_wait = 0, sum_comm = 0, sum_gpu = 0, loss = 0;
    for (int s = 0; s < warmup + steps; s++) {
        if (s == warmup) t_start = now_ms();
        for (int i = 0; i < batch; i++) idx[i] = (int64_t)(next_u64() % (uint64_t)rows);
        if (up == 0) {
            if (cuda_mlp_gather_batch(g, idx, batch, err, sizeof err)) goto fail;
        } else {
            float *hx;
            int32_t *hy;
            if (cuda_mlp_host_batch(g, &hx, &hy, err, sizeof err)) goto fail;
            for (int i = 0; i < batch; i++) {
                memcpy(hx + (size_t)i * dims[0], x + (size_t)idx[i] * dims[0], (size_t)dims[0] * sizeof(float));
                hy[i] = y[idx[i]];
            }
            if (cuda_mlp_load_batch(g, hx, hy, batch, err, sizeof err)) goto fail;
        }
        bk.started = 0;
        CudaMlpTimes tm;
        if (cuda_mlp_write_pad(g, flags, FLAGS, err, sizeof err) ||
            cuda_mlp_forward_backward(g, 1.0f, 0, on_ready, &bk, err, sizeof err))
            goto fail;
        if (bk.rc) {
            snprintf(err, sizeof err, "%s", bk.err);
            goto fail;
        }
        if ((c && comm_join(c, err, sizeof err)) || cuda_mlp_optim_step(g, oc.lr, err, sizeof err) ||
            cuda_mlp_finish_step(g, 60000, &loss, back, FLAGS, &tm, err, sizeof err))
            goto fail;
        if (s < warmup) continue;
        sum_compute += tm.fwd_ms + tm.bwd_ms + tm.opt_ms;
        sum_wait += tm.comm_wait_ms;
        sum_gpu += tm.gpu_ms;
        for (int i = 0; c && i < bk.started; i++) {
            CommTiming ct;
            if (comm_timing(c, bk.tickets[i], &ct, err, sizeof err) == 0) sum_comm += (ct.done_ns - ct.start_ns) / 1e6;
        }
    }
    double wall = now_ms() - t_start, step_ms = wall / steps;
    double compute = sum_compute / steps, exposed = sum_wait / steps;
    double overhead = step_ms - compute - exposed;
    int64_t used = 0, total = 0;
    gpu_mem_info(&used, &total, err, sizeof err);
    if (!isfinite(loss)) {
        snprintf(err, sizeof err, "loss is %g", loss);
        goto fail;
    }
    char who[64], how[160];
    snprintf(who, sizeof who, "ddptop-%s%s%s", precision_name(mo.precision), mo.fuse ? "" : "-nofuse",
             mo.graph ? "-graph" : "");
    cuda_mlp_describe(g, how, sizeof how);
    if (json)
        printf("{\"who\": \"%s\", \"how\": \"%s\", \"model\": \"%s\", \"batch\": %d, \"steps\": %d, "
               "\"optimizer\": \"%s\", \"comm\": \"%s\", \"buckets\": %d, "
               "\"dataset_on_gpu\": %s, \"steps_per_s\": %.3f, \"step_ms\": %.4f, "
               "\"compute_ms\": %.4f, \"exposed_comm_ms\": %.4f, \"overhead_ms\": %.4f, "
               "\"comm_ms\": %.4f, \"gpu_ms\": %.4f, \"final_loss\": %.6f, "
               "\"gpu_mem_used_gib\": %.2f}\n",
               who, how, model, batch, steps, optimizer, c ? "nccl" : "none", bk.nb, up == 0 ? "true" : "false",
               steps / (wall / 1e3), step_ms, compute, exposed, overhead, sum_comm / steps, sum_gpu / steps, loss,
               used / 1073741824.0);
    else
        printf("%s (%s)%s: %s batch %d: %.1f steps/s (step %.3f ms: compute %.3f, "
               "exposed comm %.3f, overhead %.3f; collectives %.3f ms in %d bucket(s)); "
               "loss %.4f\n",
               who, how, c ? " + nccl" : "", model, batch, steps / (wall / 1e3), step_ms, compute, exposed, overhead,
               sum_comm / steps, bk.nb, loss);
    status = 0;
    if (c && comm_destroy(&c, err, sizeof err) != 0) {
        fprintf(stderr, "bench_gpu: destroy: %s\n", err);
        status = 1;
    }
fail:
    if (status) fprintf(stderr, "bench_gpu: %s\n", err);
    comm_free(&c);
    cuda_mlp_free(&g);
    mlp_done(&lay);
    ms_done(&st);
    free(x);
    free(y);
    free(idx);
    return status;
}
