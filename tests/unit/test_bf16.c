/* test_bf16.c — bf16.h's roundings (ties to even, NaN, inf, -0, overflow,
 * subnormals; the bf16 expectations are what torch 1.13's .bfloat16()
 * gives), and the MLP's --precision bf16/tf32 arithmetic: a two-layer case
 * worked by hand, a larger one against an independent naive reference with
 * the spec's rounding points (docs/TRAINING.md, "Precision"), the weight copy
 * refreshed only when told, and FP32 left alone. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "nn/bf16.h"
#include "nn/model.h"

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t to_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static void test_bf16_rounding(void)
{
    TEST_BEGIN("bf16_rounding");
    static const struct {
        uint32_t in;
        uint16_t out;
        const char *what;
    } cases[] = {
        { 0x3f800000u, 0x3f80, "1.0 exact" },
        { 0x3f808000u, 0x3f80, "tie 1+2^-8 to even (down)" },
        { 0x3f818000u, 0x3f82, "tie 1+3*2^-8 to even (up)" },
        { 0x3f808001u, 0x3f81, "just above the tie rounds up" },
        { 0x3f807fffu, 0x3f80, "just below the tie rounds down" },
        { 0xbf808001u, 0xbf81, "negative, above the tie" },
        { 0x00000000u, 0x0000, "+0" },
        { 0x80000000u, 0x8000, "-0 keeps its sign" },
        { 0x7f800000u, 0x7f80, "+inf" },
        { 0xff800000u, 0xff80, "-inf" },
        { 0x7f7f7fffu, 0x7f7f, "largest finite bf16 stays" },
        { 0x7f7f8000u, 0x7f80, "tie above the largest bf16 overflows to inf" },
        { 0x7f7fffffu, 0x7f80, "largest finite float overflows to inf" },
        { 0xff7fffffu, 0xff80, "most negative float to -inf" },
        { 0x00010000u, 0x0001, "smallest bf16 subnormal exact" },
        { 0x00000001u, 0x0000, "smallest float subnormal to +0" },
        { 0x80000001u, 0x8000, "negative tiny subnormal to -0" },
        { 0x00008000u, 0x0000, "subnormal tie to even (0)" },
        { 0x00018000u, 0x0002, "subnormal tie to even (2)" },
        { 0x807fffffu, 0x8080, "largest negative subnormal rounds up to -min normal" },
        { 0x00800000u, 0x0080, "smallest normal exact" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t h = bf16_from_f32(from_bits(cases[i].in));
        CHECK(h == cases[i].out, "%s: 0x%08x -> 0x%04x, want 0x%04x", cases[i].what, cases[i].in, h, cases[i].out);
        CHECK(to_bits(bf16_round(from_bits(cases[i].in))) == (uint32_t)cases[i].out << 16, "%s: bf16_round",
              cases[i].what);
    }
    /* NaN stays NaN, quiet, whatever its payload (truncating 0x7f800001
     * would give inf); torch writes 0xffff, any quiet NaN is as good. */
    static const uint32_t nans[] = { 0x7fc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu };
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
        uint16_t h = bf16_from_f32(from_bits(nans[i]));
        CHECK(isnan(bf16_to_f32(h)) && (h & 0x0040), "NaN 0x%08x -> 0x%04x", nans[i], h);
        CHECK(isnan(bf16_round(from_bits(nans[i]))), "bf16_round(NaN 0x%08x)", nans[i]);
    }
    /* every bf16 value converts back and forth exactly */
    int bad = 0;
    for (uint32_t h = 0; h <= 0xffff; h++) {
        float f = bf16_to_f32((uint16_t)h);
        if (!isnan(f) && bf16_from_f32(f) != h) bad++;
    }
    CHECK(bad == 0, "%d bf16 values do not survive a round trip", bad);
    TEST_END();
}

static void test_tf32_rounding(void)
{
    TEST_BEGIN("tf32_rounding");
    static const struct {
        uint32_t in, out;
        const char *what;
    } cases[] = {
        { 0x3f800000u, 0x3f800000u, "1.0 exact" },
        { 0x3f801000u, 0x3f800000u, "tie 1+2^-11 to even (down)" },
        { 0x3f803000u, 0x3f804000u, "tie 1+3*2^-11 to even (up)" },
        { 0x3f801001u, 0x3f802000u, "above the tie rounds up" },
        { 0x3f800fffu, 0x3f800000u, "below the tie rounds down" },
        { 0x80000000u, 0x80000000u, "-0" },
        { 0x7f800000u, 0x7f800000u, "+inf passes" },
        { 0xff800000u, 0xff800000u, "-inf passes" },
        { 0x7f7fe000u, 0x7f7fe000u, "largest finite TF32 stays" },
        { 0x7f7fffffu, 0x7f800000u, "largest finite float overflows to inf" },
        { 0x00001000u, 0x00000000u, "subnormal tie to even (0)" },
        { 0x00003000u, 0x00004000u, "subnormal tie to even (up)" },
        { 0x80000001u, 0x80000000u, "negative tiny subnormal to -0" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint32_t got = to_bits(tf32_round(from_bits(cases[i].in)));
        CHECK(got == cases[i].out, "%s: 0x%08x -> 0x%08x, want 0x%08x", cases[i].what, cases[i].in, got, cases[i].out);
    }
    CHECK(isnan(tf32_round(from_bits(0x7f800001u))), "NaN with a low payload stays NaN");
    TEST_END();
}

static void set_tensor(Mlp *m, int t, const float *v)
{
    memcpy(m->params + m->tensors[t].offset, v, m->tensors[t].numel * sizeof(float));
}

/* mlp:2,2,2, one row, values chosen so that every rounding shows:
 *   x = (1+2^-8, 0.5)         -> A0 = (1, 0.5)         (tie, to even)
 *   W0 = [[1+2^-8+2^-12, 1],  -> [[1+2^-7, 1],         (above the tie)
 *         [0.25, -1]]             [0.25, -1]]
 *   b0 = (2^-8, 0)
 *   y0 = 1 + 2^-7 + 0.5 + 2^-8 = 1.5 + 3*2^-8: a tie between 1.5+2^-7 (odd)
 *        and 1.5+2^-6 (even) -> 1.515625;  y1 = 0.25 - 0.5 = -0.25 -> ReLU 0
 *   W1 = [[2, 3], [-1, 1]], b1 = (0, 2^-10)
 *   z0 = 2 * 1.515625 = 3.03125 (exact); z1 = -1.515625 + 2^-10 -> -1.515625
 * Backward (label 1): p = softmax(z), dz = bf16(p - onehot);
 *   gb1 = dz, gW1[i][j] = bf16(dz_i * A1_j) (A1 = (1.515625, 0)),
 *   dA1 = bf16(dz . W1) masked by A1 > 0 -> (bf16(2 dz0 - dz1), 0),
 *   gb0 = dA1, gW0[i][j] = bf16(dA1_i * A0_j). */
static void test_bf16_by_hand(void)
{
    TEST_BEGIN("bf16_layer_by_hand");
    Mlp m;
    char err[256];
    int dims[] = { 2, 2, 2 };
    CHECK(mlp_init(&m, dims, 2, 1, err, sizeof err) == 0, "%s", err);
    CHECK(mlp_set_precision(&m, PREC_BF16, err, sizeof err) == 0, "%s", err);
    const float w0[] = { 1.0f + 0x1p-8f + 0x1p-12f, 1.0f, 0.25f, -1.0f }, b0[] = { 0x1p-8f, 0.0f };
    const float w1[] = { 2.0f, 3.0f, -1.0f, 1.0f }, b1[] = { 0.0f, 0x1p-10f };
    set_tensor(&m, 0, w0);
    set_tensor(&m, 1, b0);
    set_tensor(&m, 2, w1);
    set_tensor(&m, 3, b1);
    mlp_params_changed(&m);
    const float x[] = { 1.0f + 0x1p-8f, 0.5f };
    const int32_t y[] = { 1 };
    double loss = mlp_forward_backward(&m, x, y, 1, NULL, NULL, NULL, NULL);
    CHECK(m.act[0][0] == 1.0f && m.act[0][1] == 0.5f, "A0 = (%.9g, %.9g)", m.act[0][0], m.act[0][1]);
    CHECK(m.act[1][0] == 1.515625f && m.act[1][1] == 0.0f, "A1 = (%.9g, %.9g)", m.act[1][0], m.act[1][1]);
    CHECK(m.act[2][0] == 3.03125f && m.act[2][1] == -1.515625f, "z = (%.9g, %.9g)", m.act[2][0], m.act[2][1]);
    double z0 = 3.03125, z1 = -1.515625, mx = z0;
    double want_loss = log(exp(z0 - mx) + exp(z1 - mx)) + mx - z1;
    CHECK(fabs(loss - want_loss) < 1e-6, "loss %.9g, want %.9g (FP32 cross-entropy of the bf16 logits)", loss,
          want_loss);
    float p0 = (float)(1.0 / (1.0 + exp(z1 - z0)));
    float dz0 = bf16_round(p0), dz1 = bf16_round((1.0f - p0) - 1.0f);
    const float *g = m.grads;
    const ModelTensor *t = m.tensors;
    CHECK(g[t[3].offset] == dz0 && g[t[3].offset + 1] == dz1, "gb1 (%.9g, %.9g), want (%.9g, %.9g)", g[t[3].offset],
          g[t[3].offset + 1], dz0, dz1);
    const float gw1[] = { bf16_round(dz0 * 1.515625f), 0.0f, bf16_round(dz1 * 1.515625f), 0.0f };
    for (int i = 0; i < 4; i++)
        CHECK(g[t[2].offset + i] == gw1[i], "gW1[%d] = %.9g, want %.9g", i, g[t[2].offset + i], gw1[i]);
    float da = bf16_round(2.0f * dz0 - dz1);
    CHECK(g[t[1].offset] == da && g[t[1].offset + 1] == 0.0f, "gb0 (%.9g, %.9g), want (%.9g, 0)", g[t[1].offset],
          g[t[1].offset + 1], da);
    const float gw0[] = { da, bf16_round(da * 0.5f), 0.0f, 0.0f };
    for (int i = 0; i < 4; i++)
        CHECK(g[t[0].offset + i] == gw0[i], "gW0[%d] = %.9g, want %.9g", i, g[t[0].offset + i], gw0[i]);
    /* master weights untouched by the rounding */
    CHECK(m.params[t[0].offset] == w0[0], "the FP32 master weight was rounded in place");

    /* the same numbers in FP32 differ where the roundings were */
    CHECK(mlp_set_precision(&m, PREC_FP32, err, sizeof err) == 0, "%s", err);
    mlp_forward_backward(&m, x, y, 1, NULL, NULL, NULL, NULL);
    CHECK(m.act[1][0] != 1.515625f && m.act[0][0] == x[0], "FP32 A1 %.9g, A0 %.9g", m.act[1][0], m.act[0][0]);
    mlp_done(&m);
    TEST_END();
}

/* The spec, written out naively in double with the rounding points. */
static float rnd(Precision p, double v) { return p == PREC_BF16 ? bf16_round((float)v) : (float)v; }

static float in_rnd(Precision p, float v)
{
    return p == PREC_BF16 ? bf16_round(v) : p == PREC_TF32 ? tf32_round(v) : v;
}

enum { RB = 4, RI = 5, RH = 7, RO = 3 };

static void reference(Precision p, const float *P, const Mlp *m, const float *x, const int32_t *y, float *grads)
{
    const float *W0 = P + m->tensors[0].offset, *b0 = P + m->tensors[1].offset;
    const float *W1 = P + m->tensors[2].offset, *b1 = P + m->tensors[3].offset;
    float a0[RB][RI], a1[RB][RH], z[RB][RO], dz[RB][RO], da[RB][RH];
    float bb0[RH], bb1[RO];
    for (int j = 0; j < RH; j++) bb0[j] = p == PREC_BF16 ? bf16_round(b0[j]) : b0[j];
    for (int j = 0; j < RO; j++) bb1[j] = p == PREC_BF16 ? bf16_round(b1[j]) : b1[j];
    for (int r = 0; r < RB; r++) {
        for (int i = 0; i < RI; i++) a0[r][i] = in_rnd(p, x[r * RI + i]);
        for (int o = 0; o < RH; o++) {
            double s = 0;
            for (int i = 0; i < RI; i++) s += (double)a0[r][i] * in_rnd(p, W0[o * RI + i]);
            float v = rnd(p, (float)s + bb0[o]);
            a1[r][o] = in_rnd(p, v > 0 ? v : 0);
        }
        for (int o = 0; o < RO; o++) {
            double s = 0;
            for (int i = 0; i < RH; i++) s += (double)a1[r][i] * in_rnd(p, W1[o * RH + i]);
            z[r][o] = rnd(p, (float)s + bb1[o]);
        }
        double mx = z[r][0], sum = 0;
        for (int o = 1; o < RO; o++) mx = z[r][o] > mx ? z[r][o] : mx;
        for (int o = 0; o < RO; o++) sum += exp(z[r][o] - mx);
        for (int o = 0; o < RO; o++) dz[r][o] = rnd(p, (exp(z[r][o] - mx) / sum - (o == y[r])) / RB);
    }
    float *gW0 = grads + m->tensors[0].offset, *gb0 = grads + m->tensors[1].offset;
    float *gW1 = grads + m->tensors[2].offset, *gb1 = grads + m->tensors[3].offset;
    for (int o = 0; o < RO; o++) {
        double s = 0;
        for (int r = 0; r < RB; r++) s += dz[r][o];
        gb1[o] = rnd(p, s);
        for (int i = 0; i < RH; i++) {
            double t = 0;
            for (int r = 0; r < RB; r++) t += (double)in_rnd(p, dz[r][o]) * a1[r][i];
            gW1[o * RH + i] = rnd(p, t);
        }
    }
    for (int r = 0; r < RB; r++)
        for (int i = 0; i < RH; i++) {
            double s = 0;
            for (int o = 0; o < RO; o++) s += (double)in_rnd(p, dz[r][o]) * in_rnd(p, W1[o * RH + i]);
            da[r][i] = a1[r][i] > 0 ? rnd(p, s) : 0.0f;
        }
    for (int o = 0; o < RH; o++) {
        double s = 0;
        for (int r = 0; r < RB; r++) s += da[r][o];
        gb0[o] = rnd(p, s);
        for (int i = 0; i < RI; i++) {
            double t = 0;
            for (int r = 0; r < RB; r++) t += (double)in_rnd(p, da[r][o]) * a0[r][i];
            gW0[o * RI + i] = rnd(p, t);
        }
    }
}

static uint64_t rng = 99;
static float urand(void) /* xorshift64*, in [-1,1) */
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (float)((double)((rng * 2685821657736338717ull) >> 11) * 0x1p-52 - 1.0);
}

/* Worst difference in units of the reference value's bf16 (or TF32) step:
 * FP32 sums in another order may land on the other side of a rounding
 * point, one step away, never more. */
static double worst_steps(const float *a, const float *b, size_t n, int mant_bits)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d == 0) continue;
        int e;
        frexp(fmax(fabs(a[i]), fabs(b[i])), &e);
        double step = ldexp(1.0, e - 1 - mant_bits);
        worst = fmax(worst, d / step);
    }
    return worst;
}

static void test_against_reference(void)
{
    TEST_BEGIN("precision_vs_naive_reference");
    Mlp m;
    char err[256];
    int dims[] = { RI, RH, RO };
    CHECK(mlp_init(&m, dims, 2, RB, err, sizeof err) == 0, "%s", err);
    float x[RB * RI];
    int32_t y[RB] = { 0, 2, 1, 2 };
    for (size_t i = 0; i < m.n_params; i++) m.params[i] = urand();
    for (int i = 0; i < RB * RI; i++) x[i] = 2.0f * urand();
    float want[64 + RH * RI + RO * RH];
    const Precision modes[] = { PREC_BF16, PREC_TF32, PREC_FP32 };
    float fp32_grads[sizeof want / sizeof want[0]], tf32_grads[sizeof want / sizeof want[0]];
    for (int k = 0; k < 3; k++) {
        Precision p = modes[k];
        CHECK(mlp_set_precision(&m, p, err, sizeof err) == 0, "%s", err);
        double loss = mlp_forward_backward(&m, x, y, RB, NULL, NULL, NULL, NULL);
        reference(p, m.params, &m, x, y, want);
        if (p == PREC_BF16) {
            /* every gradient a bf16 value, at most one bf16 step from the
             * reference */
            double w = worst_steps(m.grads, want, m.n_params, 7);
            printf("  note: bf16: loss %.6f, gradients within %.2f bf16 steps of the naive reference\n", loss, w);
            CHECK(w <= 1.0, "bf16: %.3g steps off", w);
            for (size_t i = 0; i < m.n_params; i++)
                if (bf16_round(m.grads[i]) != m.grads[i]) {
                    CHECK(0, "bf16 gradient %zu = %.9g is no bf16 value", i, m.grads[i]);
                    break;
                }
        } else {
            /* FP32 outputs: FP32 summation order only */
            double d = 0, mx = 0;
            for (size_t i = 0; i < m.n_params; i++) {
                d = fmax(d, fabs((double)m.grads[i] - want[i]));
                mx = fmax(mx, fabs(want[i]));
            }
            printf("  note: %s: loss %.6f, gradients within %.3g of the naive reference (max %.3g)\n",
                   precision_name(p), loss, d, mx);
            CHECK(d <= 1e-5 * mx, "%s: %.3g off (max %.3g)", precision_name(p), d, mx);
        }
        if (p == PREC_FP32) memcpy(fp32_grads, m.grads, m.n_params * sizeof(float));
        if (p == PREC_TF32) memcpy(tf32_grads, m.grads, m.n_params * sizeof(float));
    }
    /* and the modes are not the same arithmetic */
    CHECK(mlp_set_precision(&m, PREC_BF16, err, sizeof err) == 0, "%s", err);
    mlp_forward_backward(&m, x, y, RB, NULL, NULL, NULL, NULL);
    CHECK(worst_steps(m.grads, fp32_grads, m.n_params, 23) > 1000, "bf16 gradients equal the FP32 ones");
    CHECK(worst_steps(tf32_grads, fp32_grads, m.n_params, 23) > 100, "TF32 gradients equal the FP32 ones");
    mlp_done(&m);
    TEST_END();
}

/* The rounded copy is made again only after mlp_params_changed (once a
 * step, by the trainer), and evaluation computes in the same precision. */
static void test_copy_refresh_and_eval(void)
{
    TEST_BEGIN("weight_copy_refresh_and_eval");
    Mlp m;
    char err[256];
    int dims[] = { RI, RH, RO };
    CHECK(mlp_init(&m, dims, 2, RB, err, sizeof err) == 0, "%s", err);
    CHECK(mlp_set_precision(&m, PREC_BF16, err, sizeof err) == 0, "%s", err);
    float x[RB * RI];
    int32_t y[RB] = { 1, 0, 2, 1 };
    for (size_t i = 0; i < m.n_params; i++) m.params[i] = urand();
    for (int i = 0; i < RB * RI; i++) x[i] = urand();
    double l1 = mlp_forward_backward(&m, x, y, RB, NULL, NULL, NULL, NULL);
    double e1 = 0;
    mlp_evaluate(&m, x, y, RB, &e1);
    CHECK(fabs(e1 / RB - l1) < 1e-12, "evaluate's loss %.9g, training forward's %.9g", e1 / RB, l1);
    for (size_t i = 0; i < m.n_params; i++) m.params[i] *= 1.5f;
    double l2 = mlp_forward_backward(&m, x, y, RB, NULL, NULL, NULL, NULL);
    CHECK(l2 == l1, "the copy was rounded again without mlp_params_changed (%.9g vs %.9g)", l2, l1);
    mlp_params_changed(&m);
    double l3 = mlp_forward_backward(&m, x, y, RB, NULL, NULL, NULL, NULL);
    CHECK(l3 != l1, "mlp_params_changed did not refresh the copy");
    CHECK(mlp_set_precision(&m, (Precision)7, err, sizeof err) == -1 && strstr(err, "precision"), "bad mode: %s", err);
    mlp_done(&m);
    TEST_END();
}

int main(void)
{
    test_bf16_rounding();
    test_tf32_rounding();
    test_bf16_by_hand();
    test_against_reference();
    test_copy_refresh_and_eval();
    CHECK_EXIT();
}
