/* test_optim.c — SGD and AdamW for three steps against numbers worked out
 * here in double precision, straight from the torch documentation's
 * formulas (one parameter at a time, written out per step). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "nn/optim.h"

enum { N = 4, STEPS = 3 };

/* Parameters and a different gradient for each of the three steps. */
static const float P0[N] = { 1.0f, -2.0f, 0.5f, 0.0f };
static const float G[STEPS][N] = {
    { 0.1f, -0.2f, 0.3f, 0.0f },
    { -0.4f, 0.5f, 0.25f, 1.0f },
    { 0.05f, 0.05f, -0.6f, -2.0f },
};

static int close_to(float got, double want) { return fabs((double)got - want) <= 1e-6 + 2e-6 * fabs(want); }

/* Run `steps` SGD steps with cfg, compare every parameter after every step
 * with the reference. */
static void check_sgd(const char *name, double lr, double mom, double damp, double wd, int nesterov)
{
    TEST_BEGIN(name);
    OptimConfig c;
    optim_config_defaults(&c, OPTIM_SGD);
    c.lr = lr;
    c.momentum = mom;
    c.dampening = damp;
    c.weight_decay = wd;
    c.nesterov = nesterov;
    Optim o;
    char err[256];
    int rc = optim_init(&o, &c, N, err, sizeof err);
    CHECK(rc == 0, "%s", err);
    if (rc != 0) {
        TEST_END();
        return;
    }
    float p[N];
    memcpy(p, P0, sizeof p);
    /* Reference, per parameter:
     *   d  = g + wd * p
     *   step 1: buf = d;  later: buf = mom * buf + (1 - damp) * d
     *   nesterov: d = d + mom * buf, else d = buf (when mom != 0)
     *   p = p - lr * d */
    double ref[N], buf[N];
    for (int i = 0; i < N; i++) ref[i] = P0[i];
    for (int s = 0; s < STEPS; s++) {
        optim_step(&o, p, G[s], lr);
        for (int i = 0; i < N; i++) {
            double d = G[s][i] + wd * ref[i];
            if (mom != 0) {
                buf[i] = s == 0 ? d : mom * buf[i] + (1 - damp) * d;
                d = nesterov ? d + mom * buf[i] : buf[i];
            }
            ref[i] -= lr * d;
            CHECK(close_to(p[i], ref[i]), "step %d p[%d] = %.9g, want %.9g", s + 1, i, p[i], ref[i]);
        }
    }
    CHECK(o.t == STEPS, "t = %lld", (long long)o.t);
    optim_done(&o);
    TEST_END();
}

static void test_sgd_literals(void)
{
    TEST_BEGIN("sgd_momentum_literal_values");
    /* Worked by hand for p = 1, lr = 0.1, momentum 0.9, grads 0.1, -0.4, 0.05:
     *   step 1: buf = 0.1                 p = 1 - 0.01          = 0.99
     *   step 2: buf = 0.09 - 0.4 = -0.31  p = 0.99 + 0.031      = 1.021
     *   step 3: buf = -0.279 + 0.05 = -0.229  p = 1.021 + 0.0229 = 1.0439 */
    OptimConfig c;
    optim_config_defaults(&c, OPTIM_SGD);
    c.lr = 0.1;
    c.momentum = 0.9;
    Optim o;
    char err[256];
    CHECK(optim_init(&o, &c, 1, err, sizeof err) == 0, "%s", err);
    float p = 1.0f;
    const float g[3] = { 0.1f, -0.4f, 0.05f };
    const double want[3] = { 0.99, 1.021, 1.0439 };
    for (int s = 0; s < 3; s++) {
        optim_step(&o, &p, &g[s], 0.1);
        CHECK(fabs(p - want[s]) < 1e-6, "step %d: %.9g want %.9g", s + 1, p, want[s]);
    }
    CHECK(o.has_buf, "momentum buffer not marked");
    optim_done(&o);
    TEST_END();
}

static void check_adamw(const char *name, double lr, double b1, double b2, double eps, double wd)
{
    TEST_BEGIN(name);
    OptimConfig c;
    optim_config_defaults(&c, OPTIM_ADAMW);
    c.lr = lr;
    c.beta1 = b1;
    c.beta2 = b2;
    c.eps = eps;
    c.weight_decay = wd;
    Optim o;
    char err[256];
    int rc = optim_init(&o, &c, N, err, sizeof err);
    CHECK(rc == 0, "%s", err);
    if (rc != 0) {
        TEST_END();
        return;
    }
    float p[N];
    memcpy(p, P0, sizeof p);
    double ref[N], m[N] = { 0 }, v[N] = { 0 };
    for (int i = 0; i < N; i++) ref[i] = P0[i];
    for (int s = 0; s < STEPS; s++) {
        int t = s + 1;
        optim_step(&o, p, G[s], lr);
        for (int i = 0; i < N; i++) {
            /* p *= 1 - lr*wd;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
             * p -= lr / (1-b1^t) * m / (sqrt(v) / sqrt(1-b2^t) + eps) */
            double g = G[s][i];
            ref[i] *= 1 - lr * wd;
            m[i] = b1 * m[i] + (1 - b1) * g;
            v[i] = b2 * v[i] + (1 - b2) * g * g;
            double mhat_scale = lr / (1 - pow(b1, t));
            double denom = sqrt(v[i]) / sqrt(1 - pow(b2, t)) + eps;
            ref[i] -= mhat_scale * m[i] / denom;
            CHECK(close_to(p[i], ref[i]), "step %d p[%d] = %.9g, want %.9g", t, i, p[i], ref[i]);
            CHECK(fabs(o.buf1[i] - m[i]) <= 1e-7 + 1e-6 * fabs(m[i]), "exp_avg[%d] %.9g want %.9g", i, o.buf1[i], m[i]);
            CHECK(fabs(o.buf2[i] - v[i]) <= 1e-9 + 1e-6 * fabs(v[i]), "exp_avg_sq[%d] %.9g want %.9g", i, o.buf2[i],
                  v[i]);
        }
    }
    optim_done(&o);
    TEST_END();
}

static void test_adamw_first_step_closed_form(void)
{
    TEST_BEGIN("adamw_first_step_closed_form");
    /* After one step the bias corrections cancel: m/(1-b1) = g and
     * sqrt(v/(1-b2)) = |g|, so p1 = p0 (1 - lr wd) - lr g / (|g| + eps). */
    OptimConfig c;
    optim_config_defaults(&c, OPTIM_ADAMW);
    CHECK(c.beta1 == 0.9 && c.beta2 == 0.999 && c.eps == 1e-8 && c.weight_decay == 0.01, "defaults %g %g %g %g",
          c.beta1, c.beta2, c.eps, c.weight_decay);
    Optim o;
    char err[256];
    CHECK(optim_init(&o, &c, N, err, sizeof err) == 0, "%s", err);
    float p[N];
    memcpy(p, P0, sizeof p);
    optim_step(&o, p, G[0], 0.01);
    for (int i = 0; i < N; i++) {
        double g = G[0][i];
        double want = P0[i] * (1 - 0.01 * 0.01) - 0.01 * g / (fabs(g) + 1e-8);
        CHECK(close_to(p[i], want), "p[%d] = %.9g, want %.9g", i, p[i], want);
    }
    optim_done(&o);
    TEST_END();
}

static void test_errors(void)
{
    TEST_BEGIN("bad_configs_rejected");
    OptimConfig c;
    Optim o;
    char err[256];
    optim_config_defaults(&c, OPTIM_SGD);
    CHECK(c.momentum == 0 && c.dampening == 0 && c.weight_decay == 0 && !c.nesterov, "SGD defaults");
    c.nesterov = true;
    err[0] = '\0';
    CHECK(optim_init(&o, &c, N, err, sizeof err) == -1, "nesterov without momentum accepted");
    CHECK(strstr(err, "Nesterov") != NULL, "message: %s", err);
    c.momentum = 0.9;
    c.dampening = 0.1;
    err[0] = '\0';
    CHECK(optim_init(&o, &c, N, err, sizeof err) == -1 && err[0], "nesterov with dampening accepted");
    c.dampening = 0;
    CHECK(optim_init(&o, &c, N, err, sizeof err) == 0, "nesterov ok refused: %s", err);
    optim_done(&o);
    optim_config_defaults(&c, OPTIM_SGD);
    c.lr = -1;
    CHECK(optim_init(&o, &c, N, err, sizeof err) == -1, "negative lr accepted");
    c.lr = NAN;
    CHECK(optim_init(&o, &c, N, err, sizeof err) == -1, "NaN lr accepted");
    optim_config_defaults(&c, OPTIM_SGD);
    c.momentum = -0.5;
    CHECK(optim_init(&o, &c, N, err, sizeof err) == -1, "negative momentum accepted");
    optim_config_defaults(&c, OPTIM_ADAMW);
    c.beta1 = 1.0;
    CHECK(optim_init(&o, &c, N, err, sizeof err) == -1, "beta1 = 1 accepted");
    optim_config_defaults(&c, OPTIM_ADAMW);
    c.eps = -1e-8;
    CHECK(optim_init(&o, &c, N, err, sizeof err) == -1, "negative eps accepted");
    optim_config_defaults(&c, OPTIM_ADAMW);
    c.weight_decay = -0.1;
    CHECK(optim_init(&o, &c, N, err, sizeof err) == -1, "negative weight decay accepted");
    optim_config_defaults(&c, OPTIM_ADAMW);
    CHECK(optim_init(&o, &c, 0, err, sizeof err) == 0, "empty model refused: %s", err);
    optim_step(&o, NULL, NULL, 0.1);
    optim_done(&o);
    TEST_END();
}

int main(void)
{
    check_sgd("sgd_plain", 0.1, 0, 0, 0, 0);
    check_sgd("sgd_weight_decay", 0.1, 0, 0, 0.05, 0);
    check_sgd("sgd_momentum", 0.1, 0.9, 0, 0, 0);
    check_sgd("sgd_momentum_dampening", 0.1, 0.9, 0.3, 0, 0);
    check_sgd("sgd_nesterov_weight_decay", 0.05, 0.8, 0, 0.01, 1);
    check_sgd("sgd_all_but_nesterov", 0.2, 0.5, 0.5, 0.1, 0);
    test_sgd_literals();
    check_adamw("adamw_defaults", 1e-3, 0.9, 0.999, 1e-8, 0.01);
    check_adamw("adamw_custom", 0.05, 0.8, 0.9, 1e-3, 0.1);
    check_adamw("adamw_no_decay", 0.01, 0.5, 0.99, 1e-6, 0.0);
    test_adamw_first_step_closed_form();
    test_errors();
    CHECK_EXIT();
}
