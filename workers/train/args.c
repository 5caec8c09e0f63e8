/* args.c — parsing the trainer's options.
 *
 * Every value is checked here so the trainer can trust it: a bad option is
 * one line naming it, and ddptop-worker exits 2 (usage error).
 */
#include "train/args.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
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
    "  --epochs E            (default 1)\n"
    "  --steps S             stop after S optimizer steps (default: when the epochs end)\n"
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
    "  --timeout S           collective/rendezvous timeout in seconds (default 300)\n"
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
    a->epochs = 1;
    optim_config_defaults(&a->optim, OPTIM_SGD);
    a->optim.lr = 0.01;
    a->shuffle = true;
    a->bucket_cap_mb = 25.0;
    a->grad_accum = 1;
    a->lr_schedule = SCHED_CONSTANT;
    a->eval_every = 1;
    a->telemetry = true;
    snprintf(a->ckpt_dir, sizeof a->ckpt_dir, "checkpoints");
    a->final_ckpt = true;
    a->timeout_s = 300.0;
}

static int parse_i64(const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out,
                     char *err, size_t errlen)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        snprintf(err, errlen, "%s: expected an integer in [%" PRId64 ", %" PRId64 "], got \"%s\"",
                 opt, lo, hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_f64(const char *opt, const char *s, double lo, double hi, double *out,
                     char *err, size_t errlen)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi) {
        snprintf(err, errlen, "%s: expected a number in [%g, %g], got \"%s\"", opt, lo, hi, s);
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

int trainer_args_parse(TrainerArgs *a, int argc, char **argv, char *err, size_t errlen)
{
    bool lr_set = false;
    OptimKind kind = OPTIM_SGD;
    /* Optimizer hyper-parameters are collected first and applied after the
     * kind is known, so `--weight-decay 0 --optimizer adamw` works in any order. */
    double momentum = NAN, dampening = NAN, wd = NAN, lr = NAN, eps = NAN, b1 = NAN, b2 = NAN;
    bool nesterov = false;

    for (int i = 0; i < argc; i++) {
        const char *o = argv[i];
        const char *v = (i + 1 < argc) ? argv[i + 1] : NULL;
        int64_t iv;
#define NEED_VALUE() do { if (!v) { snprintf(err, errlen, "%s: missing value", o); return -1; } i++; } while (0)
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
            fputs(USAGE, stdout);
            return 1;
        } else if (!strcmp(o, "--dataset")) {
            NEED_VALUE();
            if (strcmp(v, "auto") && strcmp(v, "fashion-mnist") && strcmp(v, "synthetic")) {
                snprintf(err, errlen, "--dataset: unknown dataset \"%s\" (auto, fashion-mnist, synthetic)", v);
                return -1;
            }
            snprintf(a->dataset, sizeof a->dataset, "%s", v);
        } else if (!strcmp(o, "--data-dir")) {
            NEED_VALUE();
            if (copy_str(o, v, a->data_dir, sizeof a->data_dir, err, errlen)) return -1;
        } else if (!strcmp(o, "--limit")) {
            NEED_VALUE();
            if (parse_i64(o, v, 1, INT64_C(1) << 31, &a->limit, err, errlen)) return -1;
        } else if (!strcmp(o, "--synthetic-size")) {
            NEED_VALUE();
            if (parse_i64(o, v, 1, INT64_C(1) << 24, &a->synthetic_size, err, errlen)) return -1;
        } else if (!strcmp(o, "--model")) {
            NEED_VALUE();
            if (copy_str(o, v, a->model, sizeof a->model, err, errlen)) return -1;
        } else if (!strcmp(o, "--batch-size")) {
            NEED_VALUE();
            if (parse_i64(o, v, 1, 1 << 20, &a->batch_size, err, errlen)) return -1;
        } else if (!strcmp(o, "--epochs")) {
            NEED_VALUE();
            if (parse_i64(o, v, 1, INT64_C(1) << 30, &a->epochs, err, errlen)) return -1;
        } else if (!strcmp(o, "--steps")) {
            NEED_VALUE();
            if (parse_i64(o, v, 1, INT64_C(1) << 40, &a->steps, err, errlen)) return -1;
        } else if (!strcmp(o, "--optimizer")) {
            NEED_VALUE();
            if (!strcmp(v, "sgd")) kind = OPTIM_SGD;
            else if (!strcmp(v, "adamw")) kind = OPTIM_ADAMW;
            else { snprintf(err, errlen, "--optimizer: unknown optimizer \"%s\" (sgd, adamw)", v); return -1; }
        } else if (!strcmp(o, "--lr")) {
            NEED_VALUE();
            if (parse_f64(o, v, 0.0, 1e6, &lr, err, errlen)) return -1;
            lr_set = true;
        } else if (!strcmp(o, "--momentum")) {
            NEED_VALUE();
            if (parse_f64(o, v, 0.0, 1.0, &momentum, err, errlen)) return -1;
        } else if (!strcmp(o, "--dampening")) {
            NEED_VALUE();
            if (parse_f64(o, v, 0.0, 1.0, &dampening, err, errlen)) return -1;
        } else if (!strcmp(o, "--nesterov")) {
            nesterov = true;
        } else if (!strcmp(o, "--weight-decay")) {
            NEED_VALUE();
            if (parse_f64(o, v, 0.0, 1e3, &wd, err, errlen)) return -1;
        } else if (!strcmp(o, "--eps")) {
            NEED_VALUE();
            if (parse_f64(o, v, 0.0, 1.0, &eps, err, errlen)) return -1;
        } else if (!strcmp(o, "--betas")) {
            NEED_VALUE();
            char *end;
            b1 = strtod(v, &end);
            if (*end != ',' || !(b1 >= 0 && b1 < 1)) { snprintf(err, errlen, "--betas: expected B1,B2 in [0,1), got \"%s\"", v); return -1; }
            b2 = strtod(end + 1, &end);
            if (*end || !(b2 >= 0 && b2 < 1)) { snprintf(err, errlen, "--betas: expected B1,B2 in [0,1), got \"%s\"", v); return -1; }
        } else if (!strcmp(o, "--seed")) {
            NEED_VALUE();
            if (parse_i64(o, v, 0, INT64_MAX, &iv, err, errlen)) return -1;
            a->seed = (uint64_t)iv;
        } else if (!strcmp(o, "--no-shuffle")) {
            a->shuffle = false;
        } else if (!strcmp(o, "--drop-last")) {
            a->drop_last = true;
        } else if (!strcmp(o, "--bucket-cap-mb")) {
            NEED_VALUE();
            if (parse_f64(o, v, 0.001, 4096.0, &a->bucket_cap_mb, err, errlen)) return -1;
        } else if (!strcmp(o, "--ckpt-dir")) {
            NEED_VALUE();
            if (copy_str(o, v, a->ckpt_dir, sizeof a->ckpt_dir, err, errlen)) return -1;
        } else if (!strcmp(o, "--ckpt-every")) {
            NEED_VALUE();
            if (parse_i64(o, v, 0, INT64_C(1) << 40, &a->ckpt_every, err, errlen)) return -1;
        } else if (!strcmp(o, "--no-final-ckpt")) {
            a->final_ckpt = false;
        } else if (!strcmp(o, "--init-from")) {
            NEED_VALUE();
            if (copy_str(o, v, a->init_from, sizeof a->init_from, err, errlen)) return -1;
        } else if (!strcmp(o, "--lr-schedule")) {
            NEED_VALUE();
            if (schedule_kind_parse(v, &a->lr_schedule)) {
                snprintf(err, errlen, "--lr-schedule: unknown schedule \"%s\" (constant, cosine)", v);
                return -1;
            }
        } else if (!strcmp(o, "--warmup-steps")) {
            NEED_VALUE();
            if (parse_i64(o, v, 0, INT64_C(1) << 40, &a->warmup_steps, err, errlen)) return -1;
        } else if (!strcmp(o, "--grad-accum")) {
            NEED_VALUE();
            if (parse_i64(o, v, 1, 1 << 16, &a->grad_accum, err, errlen)) return -1;
        } else if (!strcmp(o, "--keep-last")) {
            NEED_VALUE();
            if (parse_i64(o, v, 0, 1 << 20, &a->keep_last, err, errlen)) return -1;
        } else if (!strcmp(o, "--resume")) {
            NEED_VALUE();
            if (copy_str(o, v, a->resume, sizeof a->resume, err, errlen)) return -1;
        } else if (!strcmp(o, "--eval-every")) {
            NEED_VALUE();
            if (parse_i64(o, v, 0, INT64_C(1) << 30, &a->eval_every, err, errlen)) return -1;
        } else if (!strcmp(o, "--eval-limit")) {
            NEED_VALUE();
            if (parse_i64(o, v, 1, INT64_C(1) << 31, &a->eval_limit, err, errlen)) return -1;
        } else if (!strcmp(o, "--no-telemetry")) {
            a->telemetry = false;
        } else if (!strcmp(o, "--timeout")) {
            NEED_VALUE();
            if (parse_f64(o, v, 0.1, 86400.0, &a->timeout_s, err, errlen)) return -1;
        } else if (!strcmp(o, "--fault")) {
            NEED_VALUE();
            if (fault_parse(&a->faults, v, err, errlen)) return -1;
        } else {
            snprintf(err, errlen, "unknown trainer option \"%s\" (see ddptop-worker --help)", o);
            return -1;
        }
#undef NEED_VALUE
    }

    optim_config_defaults(&a->optim, kind);
    a->optim.lr = lr_set ? lr : (kind == OPTIM_ADAMW ? 0.001 : 0.01);
    if (!isnan(momentum)) a->optim.momentum = momentum;
    if (!isnan(dampening)) a->optim.dampening = dampening;
    if (!isnan(wd)) a->optim.weight_decay = wd;
    if (!isnan(eps)) a->optim.eps = eps;
    if (!isnan(b1)) { a->optim.beta1 = b1; a->optim.beta2 = b2; }
    a->optim.nesterov = nesterov;
    if (kind == OPTIM_ADAMW && (momentum == momentum || nesterov || dampening == dampening)) {
        snprintf(err, errlen, "--momentum/--dampening/--nesterov apply to sgd, not adamw");
        return -1;
    }
    if (nesterov && (a->optim.momentum <= 0 || a->optim.dampening != 0)) {
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
