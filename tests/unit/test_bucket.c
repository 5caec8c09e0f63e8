/* test_bucket.c — DDP's gradient buckets (workers/ddp/bucket.c) for several
 * models and caps, against assignments worked out by hand from torch 1.13's
 * compute_bucket_assignment_by_size (reverse parameter order, a bucket
 * closes once its bytes reach its cap: the first cap for the first bucket,
 * the bucket cap after). make check-torch compares with torch itself. */
#include <stdio.h>
#include <string.h>

#include "ddp/bucket.h"
#include "check.h"
#include "nn/model.h"

/* want: for each bucket, its tensors' names in the order they are filled. */
static void check_layout(const char *name, const char *spec, double cap_mb, size_t first_cap, const char *const *want,
                         int want_n)
{
    TEST_BEGIN(name);
    int dims[MODEL_MAX_LINEAR + 1], nl;
    char err[256];
    Mlp m;
    CHECK(mlp_parse(spec, dims, &nl, err, sizeof err) == 0, "%s", err);
    if (mlp_init(&m, dims, nl, 1, err, sizeof err)) {
        CHECK(0, "%s", err);
        TEST_END();
        return;
    }
    Bucket b[BUCKET_MAX];
    int nb = bucket_assign(&m, cap_mb, first_cap, b);
    CHECK(nb == want_n, "%d buckets, want %d", nb, want_n);
    size_t covered = 0;
    for (int i = 0; i < nb && i < want_n; i++) {
        char got[256] = "";
        size_t numel = 0;
        for (int t = b[i].first_tensor; t >= b[i].last_tensor; t--) {
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s", t == b[i].first_tensor ? "" : " ",
                     m.tensors[t].name);
            numel += m.tensors[t].numel;
        }
        CHECK(!strcmp(got, want[i]), "bucket %d = [%s], want [%s]", i, got, want[i]);
        /* one contiguous range of the flat buffer, starting at its lowest tensor */
        CHECK(b[i].offset == m.tensors[b[i].last_tensor].offset, "bucket %d offset %zu", i, b[i].offset);
        CHECK(b[i].numel == numel, "bucket %d numel %zu, tensors hold %zu", i, b[i].numel, numel);
        covered += b[i].numel;
    }
    CHECK(covered == m.n_params, "buckets cover %zu of %zu parameters", covered, m.n_params);
    mlp_done(&m);
    TEST_END();
}

int main(void)
{
    const size_t MB = 1u << 20;
    /* 784-256-256-10 is 1077288 bytes: the 1 MB first bucket closes on 0.weight. */
    const char *mnist[] = { "4.bias 4.weight 2.bias 2.weight 0.bias 0.weight" };
    check_layout("default_mlp_one_bucket", "mlp:784,256,256,10", 25.0, MB, mnist, 1);
    check_layout("default_mlp_small_cap_still_one", "mlp:784,256,256,10", 0.5, MB, mnist, 1);
    /* 2.weight alone is 4 MB: the first bucket closes on it; then 1 MB cap. */
    const char *wide[] = { "4.bias 4.weight 2.bias 2.weight", "0.bias 0.weight" };
    check_layout("wide_mlp_cap_1mb", "mlp:784,1024,1024,10", 1.0, MB, wide, 2);
    /* 819640 bytes never reach the 1 MB first cap, whatever the later cap. */
    const char *deep1[] = { "6.bias 6.weight 4.bias 4.weight 2.bias 2.weight 0.bias 0.weight" };
    check_layout("first_cap_never_reached", "mlp:100,200,300,400,10", 0.001, MB, deep1, 1);
    /* first cap 64 KB: closes at 4.weight (497640 B); 0.25 MB cap: 2.weight
     * reaches 241200 < 262144, 0.weight 322000 >= it. */
    const char *deep2[] = { "6.bias 6.weight 4.bias 4.weight", "2.bias 2.weight 0.bias 0.weight" };
    check_layout("first_64k_then_quarter_mb", "mlp:100,200,300,400,10", 0.25, 65536, deep2, 2);
    /* 0.1 MB cap (104857 B): 2.weight closes a bucket at 241200; 0.bias and
     * 0.weight (80800) are left over and form the last bucket. */
    const char *deep3[] = { "6.bias 6.weight 4.bias 4.weight", "2.bias 2.weight", "0.bias 0.weight" };
    check_layout("leftover_bucket", "mlp:100,200,300,400,10", 0.1, 65536, deep3, 3);
    /* Tiny caps: every tensor that reaches the cap alone closes its bucket. */
    const char *tiny[] = { "6.bias 6.weight", "4.bias", "4.weight", "2.bias", "2.weight", "0.bias 0.weight" };
    check_layout("tiny_caps", "mlp:100,200,300,400,10", 0.001, 1000, tiny, 6);
    CHECK_EXIT();
}
