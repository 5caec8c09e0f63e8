/* test_args.c — the trainer's option table (args.c): every option --help
 * names is parsed, values land in their fields, the optimizer options
 * apply in any order, and bad values are refused with the option's name. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "train/args.h"

static int parse(TrainerArgs *a, const char *line, char *err, size_t errlen)
{
    char buf[1024], *argv[64];
    int argc = 0;
    snprintf(buf, sizeof buf, "%s", line);
    for (char *tok = strtok(buf, " "); tok && argc < 64; tok = strtok(NULL, " ")) argv[argc++] = tok;
    trainer_args_defaults(a);
    err[0] = 0;
    return trainer_args_parse(a, argc, argv, err, errlen);
}

/* Each "--name" in the usage text, alone: never an unknown option. */
static void test_usage_options_known(void)
{
    TEST_BEGIN("usage_options_known");
    const char *u = trainer_args_usage();
    int seen = 0;
    for (const char *p = strstr(u, "--"); p; p = strstr(p + 2, "--")) {
        if (p > u && p[-1] != ' ') continue;
        char name[64];
        size_t n = 0;
        while (n + 1 < sizeof name && (p[n] == '-' || islower((unsigned char)p[n]))) name[n] = p[n], n++;
        name[n] = 0;
        if (!strcmp(name, "--help") || n < 3) continue;
        TrainerArgs a;
        char err[256];
        parse(&a, name, err, sizeof err);
        CHECK(!strstr(err, "unknown trainer option"), "%s: %s", name, err);
        seen++;
    }
    CHECK(seen >= 35, "only %d options in the usage text", seen);
    TEST_END();
}

static void test_values_land(void)
{
    TEST_BEGIN("values_land");
    TrainerArgs a;
    char err[256];
    int rc = parse(&a,
                   "--dataset synthetic --data-dir /d --limit 5 --synthetic-size 77 --model mlp:4,3 "
                   "--batch-size 9 --epochs 2 --steps 11 --lr 0.5 --momentum 0.9 --nesterov "
                   "--weight-decay 0.1 --lr-schedule cosine --warmup-steps 3 --grad-accum 4 --seed 42 "
                   "--no-shuffle --drop-last --bucket-cap-mb 2.5 --ckpt-dir ck --ckpt-every 6 --keep-last 2 "
                   "--no-final-ckpt --resume r --eval-every 0 --eval-limit 8 --no-telemetry --timeout 9 "
                   "--fault slow:1:5ms",
                   err, sizeof err);
    CHECK(rc == 0, "%s", err);
    CHECK(!strcmp(a.dataset, "synthetic") && !strcmp(a.data_dir, "/d") && !strcmp(a.model, "mlp:4,3"), "strings");
    CHECK(a.limit == 5 && a.synthetic_size == 77 && a.batch_size == 9 && a.epochs == 2 && a.steps == 11, "ints");
    CHECK(a.optim.kind == OPTIM_SGD && a.optim.lr == 0.5 && a.optim.momentum == 0.9 && a.optim.nesterov &&
              a.optim.weight_decay == 0.1,
          "optimizer");
    CHECK(a.lr_schedule == SCHED_COSINE && a.warmup_steps == 3 && a.grad_accum == 4 && a.seed == 42, "schedule");
    CHECK(!a.shuffle && a.drop_last && a.bucket_cap_mb == 2.5 && !strcmp(a.ckpt_dir, "ck"), "sampler, buckets");
    CHECK(a.ckpt_every == 6 && a.keep_last == 2 && !a.final_ckpt && !strcmp(a.resume, "r"), "checkpoints");
    CHECK(a.eval_every == 0 && a.eval_limit == 8 && !a.telemetry && a.timeout_s == 9 && a.faults.n == 1, "rest");
    CHECK(a.dims[0] == 4 && a.dims[1] == 3 && a.n_linear == 1, "model parsed");
    TEST_END();
}

static void test_optimizer_any_order(void)
{
    TEST_BEGIN("optimizer_any_order");
    TrainerArgs a;
    char err[256];
    CHECK(parse(&a, "--weight-decay 0 --betas 0.8,0.9 --optimizer adamw", err, sizeof err) == 0, "%s", err);
    CHECK(a.optim.kind == OPTIM_ADAMW && a.optim.weight_decay == 0 && a.optim.lr == 0.001, "adamw defaults");
    CHECK(a.optim.beta1 == 0.8 && a.optim.beta2 == 0.9, "betas");
    CHECK(parse(&a, "--momentum 0.5 --optimizer adamw", err, sizeof err) == -1 && strstr(err, "apply to sgd"), "%s",
          err);
    CHECK(parse(&a, "", err, sizeof err) == 0 && a.optim.lr == 0.01, "sgd's default lr");
    TEST_END();
}

static void test_refusals(void)
{
    TEST_BEGIN("refusals");
    TrainerArgs a;
    char err[256];
    CHECK(parse(&a, "--batch-size 0", err, sizeof err) == -1 &&
              !strcmp(err, "--batch-size: expected an integer in [1, 1048576], got \"0\""),
          "%s", err);
    CHECK(parse(&a, "--lr", err, sizeof err) == -1 && !strcmp(err, "--lr: missing value"), "%s", err);
    CHECK(parse(&a, "--timeout 0.01", err, sizeof err) == -1 && strstr(err, "--timeout: expected a number"), "%s", err);
    CHECK(parse(&a, "--betas 0.9", err, sizeof err) == -1 && strstr(err, "--betas: expected B1,B2"), "%s", err);
    /* a beta left out is not a beta of 0 */
    CHECK(parse(&a, "--betas 0.9,", err, sizeof err) == -1 && strstr(err, "--betas: expected B1,B2"), "%s", err);
    CHECK(parse(&a, "--betas ,0.9", err, sizeof err) == -1 && strstr(err, "--betas: expected B1,B2"), "%s", err);
    CHECK(parse(&a, "--betas ,", err, sizeof err) == -1 && strstr(err, "--betas: expected B1,B2"), "%s", err);
    CHECK(parse(&a, "--seed -1", err, sizeof err) == -1 && strstr(err, "--seed:"), "%s", err);
    CHECK(parse(&a, "--bogus --help", err, sizeof err) == -1 && strstr(err, "unknown trainer option \"--bogus\""), "%s",
          err);
    CHECK(parse(&a, "--model --lr", err, sizeof err) == -1 && !strstr(err, "missing value"),
          "a value may look like an option: %s", err);
    TEST_END();
}

/* --gpu-fuse and --cuda-graph, and the refusals that need the resolved
 * device and backend (trainer_args_check_device). */
static void test_gpu_modes(void)
{
    TEST_BEGIN("gpu_modes");
    TrainerArgs a;
    char err[256];
    CHECK(parse(&a, "", err, sizeof err) == 0 && !a.gpu_fuse && !a.cuda_graph, "defaults: not fused, no graph");
    CHECK(trainer_args_check_device(&a, "cpu", "gloo", err, sizeof err) == 0, "defaults refused on cpu: %s", err);
    CHECK(parse(&a, "--gpu-fuse on --gpu-fuse off --cuda-graph", err, sizeof err) == 0 && !a.gpu_fuse && a.cuda_graph, "%s", err);
    CHECK(trainer_args_check_device(&a, "cuda", "nccl", err, sizeof err) == 0, "cuda + nccl refused: %s", err);
    CHECK(trainer_args_check_device(&a, "cpu", "gloo", err, sizeof err) == -1 &&
              strstr(err, "--cuda-graph needs --device cuda"),
          "%s", err);
    CHECK(trainer_args_check_device(&a, "cuda", "gloo", err, sizeof err) == -1 &&
              strstr(err, "--cuda-graph needs --backend nccl"),
          "%s", err);
    CHECK(parse(&a, "--cuda-graph --grad-accum 2", err, sizeof err) == 0 &&
              trainer_args_check_device(&a, "cuda", "nccl", err, sizeof err) == -1 &&
              strstr(err, "--grad-accum 1 only (got 2)"),
          "%s", err);
    CHECK(parse(&a, "--gpu-fuse yes", err, sizeof err) == -1 &&
              !strcmp(err, "--gpu-fuse: expected on or off, got \"yes\""),
          "%s", err);
    TEST_END();
}

int main(void)
{
    test_usage_options_known();
    test_values_land();
    test_optimizer_any_order();
    test_refusals();
    test_gpu_modes();
    CHECK_EXIT();
}
