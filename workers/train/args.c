/* args.c — parsing the trainer's options.
 *
 * Every value is checked here so the trainer can trust it: a bad option is
 * one line naming it, and ddptop-worker exits 2 (usage error).
 */
#include "train/args.h"
#include "wire/protocol.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/dataset.h"

static const char USAGE[] =
    "trainer options (after `ddptop run --`, or to ddptop-worker):\n"
    "  --dataset NAME        auto (default: fashion-mnist when installed, else synthetic),\n"
    "                        fashion-mnist, synthetic\n"
    "  --data-dir DIR        Fashion-MNIST directory (default " DATASET_FMNIST_DIR ")\n"
    "  --limit N             use the first N samples (default: all)\n"
    "  --synthetic-size N    samples in the synthetic set (default 8192)\n"
    "  --model mlp:A,B,...   layer sizes; ReLU between Linears (default mlp:784,256,256,10)\n"
    "  --batch-size B        per rank (default 64)\n"
    "  --epochs E            (default 30; with --steps alone: as many as the steps take)\n"
    "  --steps S             stop after S optimizer steps, across epochs; with --epochs too,\n"
    "                        whichever bound comes first (the stop names it). The built-in\n"
    "                        trainer's: a script's own --steps is the script's\n"
    "  --optimizer sgd|adamw (default sgd)\n"
    "  --lr X                (default 0.01 for sgd, 0.001 for adamw)\n"
    "  --momentum X --dampening X --nesterov --weight-decay X\n"
    "  --betas B1,B2 --eps X AdamW parameters\n"
    "  --lr-schedule constant|cosine\n"
    "                        (default constant); cosine decays to 0 at the last step\n"
    "  --warmup-steps W      linear warm-up from 0 over W steps (default 0)\n"
    "  --grad-accum K        K micro-batches of --batch-size per optimizer step, gradients\n"
    "                        averaged and all-reduced once, on the last (DDP no_sync) (default 1)\n"
    "  --seed S              model init, sampler and synthetic-data seed (default 0)\n"
    "  --no-shuffle --drop-last   as torch's DistributedSampler\n"
    "  --bucket-cap-mb X     gradient bucket cap (default 25; first bucket 1 MB)\n"
    "  --precision P         fp32 (default), tf32 (GEMM inputs rounded to TF32, cuBLAS's TF32\n"
    "                        math), bf16 (torch.autocast(bf16)'s rules: FP32 weights and\n"
    "                        optimizer, GEMMs in bf16 accumulating in FP32, loss in FP32)\n"
    "  --grad-dtype D        fp32 (default) or bf16: buckets all-reduced in bf16, as DDP's\n"
    "                        bf16_compress_hook (cast, divide, all-reduce, cast back)\n"
    "  --gpu-fuse on|off     CUDA: bias, ReLU and bias gradients fused into the cuBLASLt products\n"
    "                        where cuBLASLt can (default off until verified on a GPU;\n"
    "                        off: cuBLAS and ddptop's kernels)\n"
    "  --cuda-graph          CUDA: capture the step once in CUDA Graphs and replay it (NCCL\n"
    "                        only, without gradient accumulation; default off)\n"
    "  --ckpt-dir DIR        (default ./checkpoints)\n"
    "  --ckpt-every N        checkpoint every N steps (default 0: on request and at the end)\n"
    "  --keep-last K         keep only the newest K checkpoints (default 0: all)\n"
    "  --no-final-ckpt       do not write a checkpoint when the run stops\n"
    "  --resume DIR          continue from CKPT_DIR/step-NNNNNNNN, CKPT_DIR/latest or CKPT_DIR\n"
    "                        (same world size; --steps/--epochs count from the start)\n"
    "  --init-from FILE      initial weights from a model.safetensors\n"
    "  --eval-every E        evaluate on the test set every E epochs (default 1; 0: never)\n"
    "  --eval-limit N        evaluate on the first N test samples (default: all)\n"
    "  --no-telemetry        send no step/coll/shard/beat messages (to measure their cost)\n"
    "  --allow-nan           train on when a loss becomes NaN or inf (default: every rank\n"
    "                        stops at that step, exit 1, and no non-finite checkpoint is written)\n"
    "  --timeout S           collective/rendezvous timeout in seconds (default 300)\n"
    "  --pace N              at most N steps a second: wait 1/N s between steps (default 0:\n"
    "                        as fast as it goes; ddptop's default job, with no trainer\n"
    "                        options, is paced: ddptop run --help)\n"
    "  --fault SPEC          a teaching fault (repeatable; docs/TRAINING.md): kill:R@S,\n"
    "                        stall:R@S, slow:R:MSms, skip-set-epoch, unsafe-stop[@S], no-barrier\n";

const char *trainer_args_usage(void) { return USAGE; }

void trainer_args_defaults(TrainerArgs *a)
{
    memset(a, 0, sizeof *a);
    snprintf(a->dataset, sizeof a->dataset, "auto");
    snprintf(a->data_dir, sizeof a->data_dir, "%s", DATASET_FMNIST_DIR);
    a->synthetic_size = 8192;
    snprintf(a->model, sizeof a->model, "mlp:784,256,256,10");
    a->batch_size = 64;
    a->epochs = TRAINER_DEFAULT_EPOCHS;
    optim_config_defaults(&a->optim, OPTIM_SGD);
    a->optim.lr = 0.01;
    a->shuffle = true;
    a->bucket_cap_mb = 25.0;
    a->grad_accum = 1;
    a->gpu_fuse = false; /* until a GPU has run device_checks.sh (DECISIONS.md) */
    a->lr_schedule = SCHED_CONSTANT;
    a->eval_every = 1;
    a->telemetry = true;
    snprintf(a->ckpt_dir, sizeof a->ckpt_dir, "checkpoints");
    a->final_ckpt = true;
    a->timeout_s = 300.0;
}

static int parse_i64(const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out, char *err, size_t errlen)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        snprintf(err, errlen, "%s: expected an integer in [%" PRId64 ", %" PRId64 "], got \"%s\"", opt, lo, hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_f64(const char *opt, const char *s, double lo, double hi, double *out, char *err, size_t errlen)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi) {
        /* bounds as people write them: 1000000, not 1e+06 */
        char l[32], h[32];
        snprintf(l, sizeof l, lo == floor(lo) ? "%.0f" : "%g", lo);
        snprintf(h, sizeof h, hi == floor(hi) ? "%.0f" : "%g", hi);
        snprintf(err, errlen, "%s: expected a number in [%s, %s], got \"%s\"", opt, l, h, s);
        return -1;
    }
    *out = v;
    return 0;
}

static int copy_str(const char *opt, const char *s, char *dst, size_t n, char *err, size_t errlen)
{
    if (strlen(s) >= n || !*s) {
        snprintf(err, errlen, "%s: value is empty or longer than %zu characters", opt, n - 1);
        return -1;
    }
    memcpy(dst, s, strlen(s) + 1);
    return 0;
}

/* Optimizer hyper-parameters are collected first and applied after the
 * kind is known, so `--weight-decay 0 --optimizer adamw` works in any
 * order; NAN: not given. */
typedef struct {
    TrainerArgs *a;
    OptimKind kind;
    double momentum, dampening, wd, lr, eps, b1, b2;
    bool nesterov;
} Pending;

typedef enum {
    OPT_SET,   /* no value: the bool becomes true */
    OPT_CLEAR, /* no value: the bool becomes false */
    OPT_I64,   /* an integer in [lo, hi] */
    OPT_F64,   /* a number in [flo, fhi] */
    OPT_STR,   /* a non-empty string that fits */
    OPT_FN,    /* parse() does it */
} OptType;

/* One option: where its value goes (a TrainerArgs field, or a Pending one
 * when `pend`) and how it is checked. */
typedef struct {
    const char *name;
    OptType type;
    bool pend;
    size_t off, size;
    int64_t lo, hi;
    double flo, fhi;
    int (*parse)(Pending *p, const char *opt, const char *v, char *err, size_t errlen);
} Opt;

static int opt_dataset(Pending *p, const char *opt, const char *v, char *err, size_t errlen)
{
    (void)opt;
    if (strcmp(v, "auto") && strcmp(v, "fashion-mnist") && strcmp(v, "synthetic")) {
        snprintf(err, errlen, "--dataset: unknown dataset \"%s\" (auto, fashion-mnist, synthetic)", v);
        return -1;
    }
    snprintf(p->a->dataset, sizeof p->a->dataset, "%s", v);
    return 0;
}

static int opt_optimizer(Pending *p, const char *opt, const char *v, char *err, size_t errlen)
{
    (void)opt;
    if (!strcmp(v, "sgd"))
        p->kind = OPTIM_SGD;
    else if (!strcmp(v, "adamw"))
        p->kind = OPTIM_ADAMW;
    else {
        snprintf(err, errlen, "--optimizer: unknown optimizer \"%s\" (sgd, adamw)", v);
        return -1;
    }
    return 0;
}

static int opt_betas(Pending *p, const char *opt, const char *v, char *err, size_t errlen)
{
    (void)opt;
    /* both numbers there: strtod reads "" as 0 without moving, so ",0.9"
     * and "0.9," were beta 0 without a word */
    char *end;
    p->b1 = strtod(v, &end);
    if (end != v && *end == ',' && p->b1 >= 0 && p->b1 < 1) {
        const char *b2 = end + 1;
        p->b2 = strtod(b2, &end);
        if (end != b2 && !*end && p->b2 >= 0 && p->b2 < 1) return 0;
    }
    snprintf(err, errlen, "--betas: expected B1,B2 in [0,1), got \"%s\"", v);
    return -1;
}

static int opt_seed(Pending *p, const char *opt, const char *v, char *err, size_t errlen)
{
    int64_t iv;
    /* the seed travels in every shard message: within the wire's integers */
    if (parse_i64(opt, v, 0, PROTO_INT_MAX, &iv, err, errlen)) return -1;
    p->a->seed = (uint64_t)iv;
    return 0;
}

static int opt_lr_schedule(Pending *p, const char *opt, const char *v, char *err, size_t errlen)
{
    (void)opt;
    if (schedule_kind_parse(v, &p->a->lr_schedule)) {
        snprintf(err, errlen, "--lr-schedule: unknown schedule \"%s\" (constant, cosine)", v);
        return -1;
    }
    return 0;
}

static int opt_precision(Pending *p, const char *opt, const char *v, char *err, size_t errlen)
{
    if (precision_parse(v, &p->a->precision)) {
        snprintf(err, errlen, "%s: unknown precision \"%s\" (fp32, tf32, bf16)", opt, v);
        return -1;
    }
    return 0;
}

static int opt_grad_dtype(Pending *p, const char *opt, const char *v, char *err, size_t errlen)
{
    if (comm_dtype_parse(v, &p->a->grad_dtype)) {
        snprintf(err, errlen, "%s: unknown gradient dtype \"%s\" (fp32, bf16)", opt, v);
        return -1;
    }
    return 0;
}

static int opt_gpu_fuse(Pending *p, const char *opt, const char *v, char *err, size_t errlen)
{
    if (strcmp(v, "on") && strcmp(v, "off")) {
        snprintf(err, errlen, "%s: expected on or off, got \"%s\"", opt, v);
        return -1;
    }
    p->a->gpu_fuse = !strcmp(v, "on");
    return 0;
}

static int opt_fault(Pending *p, const char *opt, const char *v, char *err, size_t errlen)
{
    (void)opt;
    return fault_parse(&p->a->faults, v, err, errlen);
}

#define A_(f) .off = offsetof(TrainerArgs, f), .size = sizeof(((TrainerArgs *)0)->f)
#define P_(f) .pend = true, .off = offsetof(Pending, f)
#define I64(n, f, l, h)                         \
    {                                           \
        n, OPT_I64, A_(f), .lo = (l), .hi = (h) \
    }
#define F64(n, where, l, h)                       \
    {                                             \
        n, OPT_F64, where, .flo = (l), .fhi = (h) \
    }
#define STR(n, f)         \
    {                     \
        n, OPT_STR, A_(f) \
    }
#define FN(n, fn)              \
    {                          \
        n, OPT_FN, .parse = fn \
    }

/* Every option but --help, in USAGE's order. */
// clang-format off
static const Opt OPTS[] = {
    FN("--dataset", opt_dataset),
    STR("--data-dir", data_dir),
    I64("--limit", limit, 1, INT64_C(1) << 31),
    I64("--synthetic-size", synthetic_size, 1, INT64_C(1) << 24),
    STR("--model", model),
    I64("--batch-size", batch_size, 1, 1 << 20),
    I64("--epochs", epochs, 1, INT64_C(1) << 30),
    I64("--steps", steps, 1, INT64_C(1) << 40),
    FN("--optimizer", opt_optimizer),
    F64("--lr", P_(lr), 0.0, 1e6),
    F64("--momentum", P_(momentum), 0.0, 1.0),
    F64("--dampening", P_(dampening), 0.0, 1.0),
    {"--nesterov", OPT_SET, P_(nesterov)},
    F64("--weight-decay", P_(wd), 0.0, 1e3),
    FN("--betas", opt_betas),
    F64("--eps", P_(eps), 0.0, 1.0),
    FN("--lr-schedule", opt_lr_schedule),
    I64("--warmup-steps", warmup_steps, 0, INT64_C(1) << 40),
    I64("--grad-accum", grad_accum, 1, 1 << 16),
    FN("--seed", opt_seed),
    {"--no-shuffle", OPT_CLEAR, A_(shuffle)},
    {"--drop-last", OPT_SET, A_(drop_last)},
    F64("--bucket-cap-mb", A_(bucket_cap_mb), 0.001, 4096.0),
    FN("--precision", opt_precision),
    FN("--grad-dtype", opt_grad_dtype),
    FN("--gpu-fuse", opt_gpu_fuse),
    {"--cuda-graph", OPT_SET, A_(cuda_graph)},
    STR("--ckpt-dir", ckpt_dir),
    I64("--ckpt-every", ckpt_every, 0, INT64_C(1) << 40),
    I64("--keep-last", keep_last, 0, 1 << 20),
    {"--no-final-ckpt", OPT_CLEAR, A_(final_ckpt)},
    STR("--resume", resume),
    STR("--init-from", init_from),
    I64("--eval-every", eval_every, 0, INT64_C(1) << 30),
    I64("--eval-limit", eval_limit, 1, INT64_C(1) << 31),
    {"--no-telemetry", OPT_CLEAR, A_(telemetry)},
    {"--allow-nan", OPT_SET, A_(allow_nan)},
    F64("--timeout", A_(timeout_s), 0.1, 86400.0),
    F64("--pace", A_(pace), 0.0, 1e6),
    FN("--fault", opt_fault),
};
// clang-format on

static const Opt *opt_find(const char *name)
{
    for (size_t i = 0; i < sizeof OPTS / sizeof OPTS[0]; i++)
        if (!strcmp(OPTS[i].name, name)) return &OPTS[i];
    return NULL;
}

/* Option o with value v (NULL for OPT_SET / OPT_CLEAR). */
static int opt_apply(const Opt *o, Pending *p, const char *v, char *err, size_t errlen)
{
    char *at = (o->pend ? (char *)p : (char *)p->a) + o->off;
    switch (o->type) {
    case OPT_SET: *(bool *)at = true; return 0;
    case OPT_CLEAR: *(bool *)at = false; return 0;
    case OPT_I64: return parse_i64(o->name, v, o->lo, o->hi, (int64_t *)at, err, errlen);
    case OPT_F64: return parse_f64(o->name, v, o->flo, o->fhi, (double *)at, err, errlen);
    case OPT_STR: return copy_str(o->name, v, at, o->size, err, errlen);
    case OPT_FN: return o->parse(p, o->name, v, err, errlen);
    }
    return -1;
}

int trainer_args_parse(TrainerArgs *a, int argc, char **argv, char *err, size_t errlen)
{
    Pending p = { .a = a,
                  .kind = OPTIM_SGD,
                  .momentum = NAN,
                  .dampening = NAN,
                  .wd = NAN,
                  .lr = NAN,
                  .eps = NAN,
                  .b1 = NAN,
                  .b2 = NAN };
    for (int i = 0; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
            fputs(USAGE, stdout);
            return 1;
        }
        const Opt *opt = opt_find(o);
        if (!opt) {
            snprintf(err, errlen, "unknown trainer option \"%s\" (see ddptop run --trainer-help)", o);
            return -1;
        }
        const char *v = NULL;
        if (opt->type != OPT_SET && opt->type != OPT_CLEAR) {
            if (i + 1 >= argc) {
                snprintf(err, errlen, "%s: missing value", o);
                return -1;
            }
            v = argv[++i];
        }
        if (opt_apply(opt, &p, v, err, errlen)) return -1;
        if (!strcmp(o, "--epochs")) a->epochs_set = true;
    }

    optim_config_defaults(&a->optim, p.kind);
    a->optim.lr = !isnan(p.lr) ? p.lr : (p.kind == OPTIM_ADAMW ? 0.001 : 0.01);
    if (!isnan(p.momentum)) a->optim.momentum = p.momentum;
    if (!isnan(p.dampening)) a->optim.dampening = p.dampening;
    if (!isnan(p.wd)) a->optim.weight_decay = p.wd;
    if (!isnan(p.eps)) a->optim.eps = p.eps;
    if (!isnan(p.b1)) {
        a->optim.beta1 = p.b1;
        a->optim.beta2 = p.b2;
    }
    a->optim.nesterov = p.nesterov;
    if (p.kind == OPTIM_ADAMW && (!isnan(p.momentum) || p.nesterov || !isnan(p.dampening))) {
        snprintf(err, errlen, "--momentum/--dampening/--nesterov apply to sgd, not adamw");
        return -1;
    }
    if (p.nesterov && (a->optim.momentum <= 0 || a->optim.dampening != 0)) {
        snprintf(err, errlen, "--nesterov needs --momentum > 0 and zero dampening (as torch.optim.SGD)");
        return -1;
    }
    if (a->resume[0] && a->init_from[0]) {
        snprintf(err, errlen, "--resume and --init-from exclude each other (a checkpoint has its own weights)");
        return -1;
    }
    if (mlp_parse(a->model, a->dims, &a->n_linear, err, errlen)) return -1;
    return 0;
}

int trainer_args_check_device(const TrainerArgs *a, const char *device, const char *backend, char *err, size_t errlen)
{
    if (!a->cuda_graph) return 0;
    if (strcmp(device, "cuda")) {
        snprintf(err, errlen, "--cuda-graph needs --device cuda (a CUDA Graph replays GPU work; this job runs on %s)",
                 device);
        return -1;
    }
    if (strcmp(backend, "nccl")) {
        snprintf(err, errlen,
                 "--cuda-graph needs --backend nccl (Gloo on CUDA stages every bucket through host memory, "
                 "which a graph cannot replay)");
        return -1;
    }
    if (a->grad_accum > 1) {
        snprintf(err, errlen, "--cuda-graph supports --grad-accum 1 only (got %" PRId64 "): drop one of them",
                 a->grad_accum);
        return -1;
    }
    return 0;
}
