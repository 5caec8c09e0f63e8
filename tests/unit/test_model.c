/* test_model.c — the MLP: layout and names, loss by hand, gradients against
 * finite differences of an independent double-precision forward, hook order,
 * partial batches, evaluation, and a short training run. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "data/dataset.h"
#include "nn/model.h"
#include "nn/optim.h"

/* ---- an independent reference: double precision, naive loops ---- */

static double ref_loss(const Mlp *m, const double *p, const float *x, const int32_t *y, int batch)
{
    int L = m->n_linear;
    double total = 0.0;
    double a[64], b[64];
    for (int r = 0; r < batch; r++) {
        for (int j = 0; j < m->dims[0]; j++) a[j] = x[r * m->dims[0] + j];
        for (int l = 0; l < L; l++) {
            int in = m->dims[l], out = m->dims[l + 1];
            const double *w = p + m->tensors[2 * l].offset;
            const double *bias = p + m->tensors[2 * l + 1].offset;
            for (int o = 0; o < out; o++) {
                double s = bias[o];
                for (int i = 0; i < in; i++) s += w[o * in + i] * a[i];
                b[o] = (l < L - 1 && s < 0) ? 0 : s;
            }
            memcpy(a, b, sizeof(double) * (size_t)out);
        }
        int k = m->dims[L];
        double mx = a[0], sum = 0;
        for (int j = 1; j < k; j++) mx = a[j] > mx ? a[j] : mx;
        for (int j = 0; j < k; j++) sum += exp(a[j] - mx);
        total += log(sum) + mx - a[y[r]];
    }
    return total / batch;
}

static uint64_t rng_state = 12345;
static double urand(void) /* xorshift64*, in [0,1) */
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * 2685821657736338717ull) >> 11) * 0x1p-53;
}

static void test_parse_and_layout(void)
{
    TEST_BEGIN("parse_spec");
    int dims[MODEL_MAX_LINEAR + 1], n;
    char err[256];
    CHECK(mlp_parse("mlp:784,256,256,10", dims, &n, err, sizeof err) == 0, "%s", err);
    CHECK(n == 3 && dims[0] == 784 && dims[1] == 256 && dims[2] == 256 && dims[3] == 10, "n=%d", n);
    CHECK(mlp_parse("mlp:20,3", dims, &n, err, sizeof err) == 0 && n == 1, "single linear");
    const char *bad[] = { "",
                          "mlp:",
                          "mlp:784",
                          "mlp:784,,10",
                          "mlp:784,0,10",
                          "mlp:784,-5,10",
                          "mlp:784,256,",
                          "cnn:1,2",
                          "mlp:784,256x,10",
                          "mlp: 784,10",
                          "mlp:99999999999999999999,10",
                          "mlp:1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        CHECK(mlp_parse(bad[i], dims, &n, err, sizeof err) == -1 && err[0], "'%s' accepted", bad[i]);
    }
    TEST_END();

    TEST_BEGIN("state_dict_names_shapes_offsets");
    Mlp m;
    mlp_parse("mlp:784,256,256,10", dims, &n, err, sizeof err);
    CHECK(mlp_init(&m, dims, n, 64, err, sizeof err) == 0, "%s", err);
    const char *names[] = { "0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias" };
    int64_t shapes[6][2] = { { 256, 784 }, { 256, 0 }, { 256, 256 }, { 256, 0 }, { 10, 256 }, { 10, 0 } };
    CHECK(m.n_tensors == 6, "n_tensors %d", m.n_tensors);
    size_t off = 0;
    for (int t = 0; t < 6 && t < m.n_tensors; t++) {
        const ModelTensor *mt = &m.tensors[t];
        CHECK(strcmp(mt->name, names[t]) == 0, "tensor %d is %s", t, mt->name);
        int nd = shapes[t][1] ? 2 : 1;
        CHECK(mt->ndim == nd && mt->shape[0] == shapes[t][0] && (nd == 1 || mt->shape[1] == shapes[t][1]), "%s shape",
              mt->name);
        CHECK(mt->offset == off, "%s offset %zu, want %zu", mt->name, mt->offset, off);
        off += mt->numel;
    }
    CHECK(m.n_params == 269322 && off == m.n_params, "n_params %zu", m.n_params);
    mlp_done(&m);
    CHECK(m.params == NULL, "done clears");
    int zero[2] = { 0, 3 };
    CHECK(mlp_init(&m, zero, 1, 4, err, sizeof err) == -1, "width 0 accepted");
    int ok2[2] = { 3, 3 };
    CHECK(mlp_init(&m, ok2, 1, 0, err, sizeof err) == -1, "batch 0 accepted");
    TEST_END();

    TEST_BEGIN("reset_params_like_nn_linear");
    int d2[3] = { 100, 50, 10 };
    Mlp a, b;
    mlp_init(&a, d2, 2, 4, err, sizeof err);
    mlp_init(&b, d2, 2, 4, err, sizeof err);
    mlp_reset_params(&a, 7);
    mlp_reset_params(&b, 7);
    CHECK(memcmp(a.params, b.params, a.n_params * sizeof(float)) == 0, "not deterministic");
    mlp_reset_params(&b, 8);
    CHECK(memcmp(a.params, b.params, a.n_params * sizeof(float)) != 0, "seed ignored");
    for (int t = 0; t < a.n_tensors; t++) {
        const ModelTensor *mt = &a.tensors[t];
        double bound = 1.0 / sqrt((double)d2[t / 2]), mx = 0, mean = 0;
        for (size_t i = 0; i < mt->numel; i++) {
            double v = a.params[mt->offset + i];
            mx = fabs(v) > mx ? fabs(v) : mx;
            mean += v / (double)mt->numel;
        }
        CHECK(mx <= bound * (1 + 1e-6) && mx > 0.8 * bound, "%s: max |w| %g, bound %g", mt->name, mx, bound);
        CHECK(fabs(mean) < 0.2 * bound, "%s: mean %g", mt->name, mean);
    }
    mlp_done(&a);
    mlp_done(&b);
    TEST_END();
}

static void test_loss_by_hand(void)
{
    char err[256];
    TEST_BEGIN("loss_and_grads_by_hand_single_linear");
    /* W = I, b = 0, x = (1, 2), y = 1: logits (1, 2),
     * loss = log(e^1 + e^2) - 2 = log(1 + e^-1). */
    int dims[2] = { 2, 2 };
    Mlp m;
    mlp_init(&m, dims, 1, 1, err, sizeof err);
    float p[6] = { 1, 0, 0, 1, 0, 0 };
    memcpy(m.params, p, sizeof p);
    float x[2] = { 1, 2 };
    int32_t y[1] = { 1 };
    double loss = mlp_forward_backward(&m, x, y, 1, NULL, NULL, NULL, NULL);
    double want = log1p(exp(-1.0));
    CHECK(fabs(loss - want) < 1e-6, "loss %.9f want %.9f", loss, want);
    double p0 = 1.0 / (1.0 + exp(1.0)); /* softmax(1,2)[0] */
    double g[6] = { p0 * 1, p0 * 2, -p0 * 1, -p0 * 2, p0, -p0 };
    for (int i = 0; i < 6; i++) CHECK(fabs(m.grads[i] - g[i]) < 1e-6, "grad[%d] %.9f want %.9f", i, m.grads[i], g[i]);
    mlp_done(&m);
    TEST_END();

    TEST_BEGIN("loss_by_hand_with_relu_and_batch_mean");
    /* 2-2-2. W0 = [[1,-1],[2,0]], b0 = (0,-7); W1 = [[1,1],[0,-1]], b1 = (0.5, 0).
     * Row 1: x = (3,1) -> pre (2,-1) -> relu (2,0) -> logits (2.5, 0), y = 0:
     *   loss = log(1 + e^-2.5).
     * Row 2: x = (0,0) -> pre (0,-7) -> relu (0,0) -> logits (0.5, 0), y = 1:
     *   loss = log(1 + e^0.5). */
    int d2[3] = { 2, 2, 2 };
    mlp_init(&m, d2, 2, 2, err, sizeof err);
    float q[12] = { 1, -1, 2, 0, 0, -7, 1, 1, 0, -1, 0.5f, 0 };
    memcpy(m.params, q, sizeof q);
    float xb[4] = { 3, 1, 0, 0 };
    int32_t yb[2] = { 0, 1 };
    loss = mlp_forward_backward(&m, xb, yb, 2, NULL, NULL, NULL, NULL);
    want = (log1p(exp(-2.5)) + log1p(exp(0.5))) / 2;
    CHECK(fabs(loss - want) < 1e-6, "loss %.9f want %.9f", loss, want);
    /* Hidden unit 1 is dead for both rows: its W0 row and bias get no gradient. */
    CHECK(m.grads[2] == 0 && m.grads[3] == 0 && m.grads[5] == 0, "dead ReLU unit has gradient %g %g %g", m.grads[2],
          m.grads[3], m.grads[5]);
    double sum = 0;
    int64_t correct = mlp_evaluate(&m, xb, yb, 2, &sum);
    CHECK(fabs(sum - 2 * want) < 1e-5, "evaluate loss sum %.9f want %.9f", sum, 2 * want);
    CHECK(correct == 1, "correct %lld (row 1 right, row 2 predicts 0)", (long long)correct);
    mlp_done(&m);
    TEST_END();

    TEST_BEGIN("large_logits_stay_finite");
    mlp_init(&m, dims, 1, 1, err, sizeof err);
    float big[6] = { 1, 0, 0, 1, 0, 0 };
    memcpy(m.params, big, sizeof big);
    float xbig[2] = { 1000, -1000 };
    int32_t y0[1] = { 1 };
    loss = mlp_forward_backward(&m, xbig, y0, 1, NULL, NULL, NULL, NULL);
    CHECK(isfinite(loss) && fabs(loss - 2000) < 1e-3, "loss %g want 2000", loss);
    for (int i = 0; i < 6; i++) CHECK(isfinite(m.grads[i]), "grad %d not finite", i);
    mlp_done(&m);
    TEST_END();
}

static void test_gradcheck(void)
{
    char err[256];
    TEST_BEGIN("gradients_match_finite_differences");
    int dims[4] = { 5, 7, 6, 3 };
    enum { B = 4 };
    Mlp m;
    CHECK(mlp_init(&m, dims, 3, B, err, sizeof err) == 0, "%s", err);
    mlp_reset_params(&m, 3);
    /* Positive biases keep most ReLUs alive so every path is exercised. */
    for (int t = 1; t < m.n_tensors; t += 2)
        for (size_t i = 0; i < m.tensors[t].numel; i++) m.params[m.tensors[t].offset + i] += 0.1f;
    float x[B * 5];
    for (int i = 0; i < B * 5; i++) x[i] = (float)(2 * urand() - 1);
    int32_t y[B] = { 0, 2, 1, 2 };
    double loss = mlp_forward_backward(&m, x, y, B, NULL, NULL, NULL, NULL);
    double *p = malloc(sizeof(double) * m.n_params);
    for (size_t i = 0; i < m.n_params; i++) p[i] = m.params[i];
    double ref = ref_loss(&m, p, x, y, B);
    CHECK(fabs(loss - ref) < 1e-5, "loss %.9f, double reference %.9f", loss, ref);
    const double h = 1e-6;
    double worst = 0;
    for (int t = 0; t < m.n_tensors; t++) {
        const ModelTensor *mt = &m.tensors[t];
        int bad = 0;
        double tw = 0;
        for (size_t i = 0; i < mt->numel; i++) {
            size_t k = mt->offset + i;
            double save = p[k];
            p[k] = save + h;
            double lp = ref_loss(&m, p, x, y, B);
            p[k] = save - h;
            double lm = ref_loss(&m, p, x, y, B);
            p[k] = save;
            double fd = (lp - lm) / (2 * h);
            double e = fabs(m.grads[k] - fd) / (1e-4 + fabs(fd));
            tw = e > tw ? e : tw;
            if (fabs(m.grads[k] - fd) > 1e-5 + 1e-3 * fabs(fd)) bad++;
        }
        worst = tw > worst ? tw : worst;
        CHECK(bad == 0, "%s: %d of %zu entries differ from finite differences (worst rel %g)", mt->name, bad, mt->numel,
              tw);
    }
    printf("  note: worst relative gradient error %.3g\n", worst);
    free(p);
    mlp_done(&m);
    TEST_END();
}

/* ---- hook order ---- */

typedef struct {
    Mlp *m;
    int order[2 * MODEL_MAX_LINEAR];
    int n;
    int early_ok; /* the next tensor's grads were still untouched */
    float *snap;  /* grads at hook time */
} HookLog;

static void hook(void *ctx, int t)
{
    HookLog *h = ctx;
    if (h->n < 2 * MODEL_MAX_LINEAR) h->order[h->n++] = t;
    const ModelTensor *mt = &h->m->tensors[t];
    memcpy(h->snap + mt->offset, h->m->grads + mt->offset, mt->numel * sizeof(float));
    /* "As soon as final": the tensor before this one has not been computed yet. */
    if (t > 0) {
        const ModelTensor *prev = &h->m->tensors[t - 1];
        if (!isnan(h->m->grads[prev->offset])) h->early_ok = 0;
    }
}

static void test_hooks(void)
{
    char err[256];
    TEST_BEGIN("hook_order_reverse_bias_then_weight");
    int dims[4] = { 6, 5, 4, 3 };
    Mlp m;
    mlp_init(&m, dims, 3, 8, err, sizeof err);
    mlp_reset_params(&m, 1);
    float x[8 * 6];
    for (int i = 0; i < 8 * 6; i++) x[i] = (float)urand();
    int32_t y[8] = { 0, 1, 2, 0, 1, 2, 0, 1 };
    for (size_t i = 0; i < m.n_params; i++) m.grads[i] = NAN;
    HookLog h = { .m = &m, .early_ok = 1, .snap = calloc(m.n_params, sizeof(float)) };
    double fwd = -1, bwd = -1;
    double loss = mlp_forward_backward(&m, x, y, 8, hook, &h, &fwd, &bwd);
    CHECK(isfinite(loss), "loss %g", loss);
    CHECK(h.n == 6, "%d hook calls", h.n);
    /* "4.bias", "4.weight", "2.bias", "2.weight", "0.bias", "0.weight" */
    int want[6] = { 5, 4, 3, 2, 1, 0 };
    for (int i = 0; i < 6 && i < h.n; i++)
        CHECK(h.order[i] == want[i], "call %d: tensor %d (%s), want %s", i, h.order[i], m.tensors[h.order[i]].name,
              m.tensors[want[i]].name);
    CHECK(h.early_ok, "a hook fired only after an earlier tensor's gradient was computed");
    CHECK(memcmp(h.snap, m.grads, m.n_params * sizeof(float)) == 0, "a gradient changed after its hook");
    CHECK(fwd >= 0 && bwd >= 0 && fwd < 1e4 && bwd < 1e4, "timings %g %g", fwd, bwd);
    /* The caller's floats before grads[0] are there, and backward leaves
     * them alone (the trainer's command flags live there). */
    for (int i = 1; i <= MODEL_GRAD_PAD; i++) m.grads[-i] = (float)i;
    mlp_forward_backward(&m, x, y, 8, NULL, NULL, NULL, NULL);
    int pad_ok = 1;
    for (int i = 1; i <= MODEL_GRAD_PAD; i++) pad_ok &= m.grads[-i] == (float)i;
    CHECK(pad_ok, "backward touched the MODEL_GRAD_PAD floats");
    free(h.snap);
    mlp_done(&m);
    TEST_END();
}

static void test_partial_and_bad_batches(void)
{
    char err[256];
    TEST_BEGIN("partial_batch_matches_exact_size_model");
    int dims[3] = { 4, 8, 3 };
    Mlp big, small;
    mlp_init(&big, dims, 2, 16, err, sizeof err);
    mlp_init(&small, dims, 2, 3, err, sizeof err);
    mlp_reset_params(&big, 9);
    mlp_reset_params(&small, 9);
    float x[16 * 4];
    for (int i = 0; i < 16 * 4; i++) x[i] = (float)(urand() * 2 - 1);
    int32_t y[16];
    for (int i = 0; i < 16; i++) y[i] = i % 3;
    double lb = mlp_forward_backward(&big, x, y, 3, NULL, NULL, NULL, NULL);
    double ls = mlp_forward_backward(&small, x, y, 3, NULL, NULL, NULL, NULL);
    CHECK(lb == ls, "loss %g vs %g", lb, ls);
    double maxd = 0;
    for (size_t i = 0; i < big.n_params; i++) maxd = fmax(maxd, fabs(big.grads[i] - small.grads[i]));
    CHECK(maxd < 1e-6, "grads differ by %g", maxd);
    /* evaluate in chunks of max_batch equals the reference on all 16 rows */
    double *p = malloc(sizeof(double) * small.n_params);
    for (size_t i = 0; i < small.n_params; i++) p[i] = small.params[i];
    double sum = 0;
    int64_t c = mlp_evaluate(&small, x, y, 16, &sum);
    double ref = ref_loss(&small, p, x, y, 16) * 16;
    CHECK(c >= 0 && c <= 16, "correct %lld", (long long)c);
    CHECK(fabs(sum - ref) < 1e-4, "chunked evaluate loss %.7f, reference %.7f", sum, ref);
    free(p);
    TEST_END();

    TEST_BEGIN("bad_batch_or_label_gives_nan");
    CHECK(isnan(mlp_forward_backward(&small, x, y, 4, NULL, NULL, NULL, NULL)), "batch > max");
    CHECK(isnan(mlp_forward_backward(&small, x, y, 0, NULL, NULL, NULL, NULL)), "batch 0");
    int32_t bad[3] = { 0, 3, 1 };
    CHECK(isnan(mlp_forward_backward(&small, x, bad, 3, NULL, NULL, NULL, NULL)), "label 3");
    bad[1] = -1;
    CHECK(isnan(mlp_forward_backward(&small, x, bad, 3, NULL, NULL, NULL, NULL)), "label -1");
    CHECK(mlp_evaluate(&small, x, bad, 3, NULL) == -1, "evaluate label -1");
    mlp_done(&big);
    mlp_done(&small);
    TEST_END();
}

static void test_training(void)
{
    char err[256];
    TEST_BEGIN("sgd_on_synthetic_lowers_loss");
    Dataset d;
    int rc = dataset_make_synthetic(&d, 600, 20, 3, 5, err, sizeof err);
    CHECK(rc == 0, "%s", err);
    int dims[MODEL_MAX_LINEAR + 1], n;
    mlp_parse("mlp:20,16,3", dims, &n, err, sizeof err);
    Mlp m;
    mlp_init(&m, dims, n, 32, err, sizeof err);
    mlp_reset_params(&m, 0);
    OptimConfig oc;
    optim_config_defaults(&oc, OPTIM_SGD);
    oc.lr = 0.05;
    oc.momentum = 0.9;
    Optim o;
    CHECK(optim_init(&o, &oc, m.n_params, err, sizeof err) == 0, "%s", err);
    double before = 0, after = 0;
    mlp_evaluate(&m, d.x, d.y, (int)d.n, &before);
    before /= (double)d.n;
    for (int step = 0; step < 300; step++) {
        int start = (step * 32) % 576;
        double l = mlp_forward_backward(&m, d.x + (size_t)start * 20, d.y + start, 32, NULL, NULL, NULL, NULL);
        if (!isfinite(l)) {
            CHECK(0, "loss %g at step %d", l, step);
            break;
        }
        optim_step(&o, m.params, m.grads, oc.lr);
    }
    int64_t correct = mlp_evaluate(&m, d.x, d.y, (int)d.n, &after);
    after /= (double)d.n;
    printf("  note: mean loss %.4f -> %.4f, accuracy %lld/600\n", before, after, (long long)correct);
    CHECK(before > 0.8, "initial loss %g suspiciously low", before);
    CHECK(after < 0.25 * before, "loss only went %g -> %g", before, after);
    CHECK(correct > 540, "accuracy %lld/600", (long long)correct);
    optim_done(&o);
    mlp_done(&m);
    dataset_done(&d);
    TEST_END();
}

int main(void)
{
    test_parse_and_layout();
    test_loss_by_hand();
    test_gradcheck();
    test_hooks();
    test_partial_and_bad_batches();
    test_training();
    CHECK_EXIT();
}
