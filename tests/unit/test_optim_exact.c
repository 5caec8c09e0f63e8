/* test_optim_exact.c — workers/nn/optim.c against torch 1.13's own numbers
 * (tests/optim_torch_fixture.h, made by bench/gen_optim_fixture.py), and
 * the learning-rate schedules against values worked out by hand.
 *
 * On a CPU with FMA (where torch's kernels fuse multiply-adds) the updates
 * must match torch bit for bit; elsewhere, or with DDPTOP_OPTIM_FMA=0, each
 * step may differ from torch's in the last bits only. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "nn/optim.h"
#include "optim_torch_fixture.h"
#include "nn/schedule.h"

static float f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void run_case(const FixCase *c)
{
    char name[96];
    snprintf(name, sizeof name, "torch_bits_%s", c->name);
    TEST_BEGIN(name);
    OptimConfig cfg;
    optim_config_defaults(&cfg, c->adamw ? OPTIM_ADAMW : OPTIM_SGD);
    cfg.lr = c->lr;
    cfg.weight_decay = c->weight_decay;
    if (c->adamw) {
        cfg.beta1 = c->beta1;
        cfg.beta2 = c->beta2;
        cfg.eps = c->eps;
    } else {
        cfg.momentum = c->momentum;
        cfg.dampening = c->dampening;
        cfg.nesterov = c->nesterov;
    }
    Optim o;
    char err[256];
    int rc = optim_init(&o, &cfg, FIX_N, err, sizeof err);
    CHECK(rc == 0, "%s", err);
    if (rc) {
        TEST_END();
        return;
    }
    float p[FIX_N], g[FIX_N];
    for (int i = 0; i < FIX_N; i++) p[i] = f32(FIX_P0[i]);
    bool exact = optim_fused_madd();
    int moved = 0;
    for (int s = 0; s < FIX_STEPS; s++) {
        for (int i = 0; i < FIX_N; i++) g[i] = f32(FIX_G[s][i]);
        optim_step(&o, p, g, c->lr);
        int bad = 0;
        for (int i = 0; i < FIX_N; i++) {
            float want = f32(c->after[s][i]);
            moved += want != f32(FIX_P0[i]);
            bool ok = exact ? memcmp(&p[i], &want, sizeof want) == 0
                            : fabsf(p[i] - want) <= 4e-7f * (fabsf(want) + 1e-3f) * (s + 1);
            uint32_t gotbits;
            memcpy(&gotbits, &p[i], sizeof gotbits);
            if (!ok && bad++ < 3)
                CHECK(ok, "step %d p[%d] = %.9g (0x%08x), torch %.9g (0x%08x)%s", s + 1, i, p[i], gotbits, want,
                      c->after[s][i], exact ? " (bit-exact expected)" : "");
        }
    }
    CHECK(moved > FIX_N, "the fixture does not move the parameters: it would prove nothing");
    optim_done(&o);
    TEST_END();
}

static void test_fused_is_not_plain(void)
{
    /* The check above must be able to fail: on FMA hardware, the unfused
     * kernels differ from torch in some element of these cases. */
    TEST_BEGIN("plain_madd_differs_from_torch_where_torch_fuses");
    if (!optim_fused_madd()) {
        printf("  (no FMA here: nothing to contrast)\n");
        TEST_END();
        return;
    }
    /* Emulate the plain SGD update of case 0 (momentum, dampening, wd) by hand. */
    const FixCase *c = &FIX_CASES[0];
    float p[FIX_N], buf[FIX_N];
    int differ = 0;
    for (int i = 0; i < FIX_N; i++) p[i] = f32(FIX_P0[i]);
    for (int s = 0; s < FIX_STEPS; s++)
        for (int i = 0; i < FIX_N; i++) {
            float g = f32(FIX_G[s][i]);
            float d = g + (float)c->weight_decay * p[i];
            buf[i] = s == 0 ? d : buf[i] * (float)c->momentum + (float)(1.0 - c->dampening) * d;
            p[i] = p[i] + (float)-c->lr * buf[i];
            if (s == FIX_STEPS - 1) differ += p[i] != f32(c->after[s][i]);
        }
    CHECK(differ > 0, "unfused arithmetic agrees with torch everywhere: the bit test has no teeth");
    TEST_END();
}

static void test_schedules(void)
{
    TEST_BEGIN("lr_schedules_by_hand");
    Schedule c = { SCHED_CONSTANT, 0.1, 0, 100 };
    CHECK(schedule_lr(&c, 0) == 0.1 && schedule_lr(&c, 99) == 0.1, "constant");
    Schedule w = { SCHED_CONSTANT, 0.1, 4, 100 };
    /* transformers' warm-up: step / W, so the very first step has lr 0 */
    CHECK(schedule_lr(&w, 0) == 0.0, "warmup s=0: %g", schedule_lr(&w, 0));
    CHECK(fabs(schedule_lr(&w, 1) - 0.025) < 1e-15, "warmup s=1: %g", schedule_lr(&w, 1));
    CHECK(fabs(schedule_lr(&w, 3) - 0.075) < 1e-15, "warmup s=3: %g", schedule_lr(&w, 3));
    CHECK(schedule_lr(&w, 4) == 0.1 && schedule_lr(&w, 1000) == 0.1, "after warm-up");
    Schedule k = { SCHED_COSINE, 1.0, 0, 10 };
    CHECK(schedule_lr(&k, 0) == 1.0, "cosine s=0: %g", schedule_lr(&k, 0));
    /* 0.5 * (1 + cos(0.2 pi)) = 0.5 * (1 + 0.80901699437) */
    CHECK(fabs(schedule_lr(&k, 2) - 0.904508497187) < 1e-12, "cosine s=2: %.12g", schedule_lr(&k, 2));
    CHECK(fabs(schedule_lr(&k, 5) - 0.5) < 1e-12, "cosine s=5: %.12g", schedule_lr(&k, 5));
    CHECK(schedule_lr(&k, 10) == 0.0, "cosine s=T: %g", schedule_lr(&k, 10));
    Schedule kw = { SCHED_COSINE, 2.0, 2, 10 };
    CHECK(fabs(schedule_lr(&kw, 1) - 1.0) < 1e-12, "cosine+warmup s=1: %g", schedule_lr(&kw, 1));
    CHECK(schedule_lr(&kw, 2) == 2.0, "cosine+warmup s=W: %g", schedule_lr(&kw, 2));
    /* progress (6-2)/(10-2) = 0.5 -> factor 0.5 */
    CHECK(fabs(schedule_lr(&kw, 6) - 1.0) < 1e-12, "cosine+warmup s=6: %.12g", schedule_lr(&kw, 6));
    SchedKind sk;
    CHECK(schedule_kind_parse("cosine", &sk) == 0 && sk == SCHED_COSINE, "parse cosine");
    CHECK(schedule_kind_parse("linear", &sk) == -1, "parse refuses unknown");
    TEST_END();
}

int main(void)
{
    printf("  optimizer arithmetic: %s\n",
           optim_fused_madd() ? "fused multiply-add (as torch's AVX2 kernels)" : "unfused");
    for (size_t i = 0; i < sizeof FIX_CASES / sizeof FIX_CASES[0]; i++) run_case(&FIX_CASES[i]);
    test_fused_is_not_plain();
    test_schedules();
    CHECK_EXIT();
}
