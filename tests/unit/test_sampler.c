/* test_sampler.c — mt19937, randperm and DistributedSampler against PyTorch.
 *
 * The fixture rows come from torch 1.13's own DistributedSampler; run from the
 * repository root (tests/fixtures/distributed_sampler.tsv: a copy of the
 * project's shared/fixtures file, kept in the repository so a clone tests alone).
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "wire/sampler.h"

#define FIXTURE "tests/fixtures/distributed_sampler.tsv"

static void test_mt19937(void)
{
    TEST_BEGIN("mt19937_matches_std");
    Mt19937 g;
    mt_seed(&g, 5489);
    /* std::mt19937 default seed: first output and the 10000th (the value the
     * C++ standard requires, [rand.predef]). */
    uint32_t first = mt_next_u32(&g), v = first;
    for (int i = 1; i < 10000; i++) v = mt_next_u32(&g);
    CHECK(first == 3499211612u, "first output %" PRIu32, first);
    CHECK(v == 4123659995u, "10000th output %" PRIu32, v);
    /* Reseeding restarts the stream. */
    mt_seed(&g, 5489);
    CHECK(mt_next_u32(&g) == 3499211612u, "reseed does not restart");
    TEST_END();
}

/* Parse "a,b,c" into out; returns the count or -1. */
static int64_t parse_list(char *s, int64_t *out, int64_t cap)
{
    int64_t n = 0;
    if (*s == '\0') return 0;
    for (char *tok = strtok(s, ","); tok; tok = strtok(NULL, ",")) {
        if (n >= cap) return -1;
        char *end;
        out[n++] = strtoll(tok, &end, 10);
        if (*end != '\0') return -1;
    }
    return n;
}

static void test_fixture(void)
{
    TEST_BEGIN("distributed_sampler_matches_torch_fixture");
    FILE *f = fopen(FIXTURE, "r");
    CHECK(f != NULL, "cannot open %s (run from the repository root)", FIXTURE);
    if (!f) {
        TEST_END();
        return;
    }
    char *line = NULL;
    size_t cap = 0;
    int rows = 0, bad = 0;
    while (getline(&line, &cap, f) > 0) {
        if (line[0] == '#' || line[0] == '\n') continue;
        line[strcspn(line, "\r\n")] = '\0';
        long long size, seed, epoch;
        int world, rank, shuffle, drop_last, off = 0;
        if (sscanf(line, "%lld\t%d\t%d\t%lld\t%lld\t%d\t%d\t%n", &size, &world, &rank, &seed, &epoch, &shuffle,
                   &drop_last, &off) != 7 ||
            off == 0) {
            CHECK(0, "unparsable fixture line: %.60s", line);
            bad++;
            continue;
        }
        rows++;
        int64_t *want = malloc(sizeof(int64_t) * (size_t)(size + 1));
        int64_t nwant = parse_list(line + off, want, size + 1);
        SamplerConfig c = { .size = size,
                            .world = world,
                            .rank = rank,
                            .seed = (uint64_t)seed,
                            .shuffle = shuffle,
                            .drop_last = drop_last };
        char err[256] = "";
        int64_t num = sampler_num_samples(&c);
        int64_t *got = malloc(sizeof(int64_t) * (size_t)(num + 1));
        int rc = sampler_indices(&c, epoch, got, err, sizeof err);
        int ok = rc == 0 && nwant == num;
        for (int64_t i = 0; ok && i < num; i++) ok = got[i] == want[i];
        if (!ok) {
            bad++;
            CHECK(0,
                  "row N=%lld W=%d r=%d seed=%lld epoch=%lld shuffle=%d drop_last=%d: "
                  "rc=%d num=%lld want %lld (%s); first got %lld want %lld",
                  size, world, rank, seed, epoch, shuffle, drop_last, rc, (long long)num, (long long)nwant, err,
                  num > 0 ? (long long)got[0] : -1LL, nwant > 0 ? (long long)want[0] : -1LL);
        }
        free(want);
        free(got);
    }
    free(line);
    fclose(f);
    CHECK(rows >= 20, "only %d fixture rows read", rows);
    CHECK(bad == 0, "%d of %d rows differ", bad, rows);
    TEST_END();
}

static void test_sizes(void)
{
    TEST_BEGIN("num_samples_total_size_padding");
    SamplerConfig c = { .size = 10, .world = 3, .rank = 0 };
    CHECK(sampler_num_samples(&c) == 4, "ceil(10/3)");
    CHECK(sampler_total_size(&c) == 12, "4*3");
    CHECK(sampler_padding(&c) == 2, "12-10");
    c.drop_last = true;
    CHECK(sampler_num_samples(&c) == 3, "10//3 with drop_last");
    CHECK(sampler_total_size(&c) == 9, "3*3");
    CHECK(sampler_padding(&c) == 0, "no padding with drop_last");
    c = (SamplerConfig){ .size = 12, .world = 4, .drop_last = true };
    CHECK(sampler_num_samples(&c) == 3, "divisible with drop_last");
    c = (SamplerConfig){ .size = 3, .world = 4, .drop_last = true };
    CHECK(sampler_num_samples(&c) == 0, "N < W with drop_last gives 0 (torch: ceil(-1/4))");
    c = (SamplerConfig){ .size = 0, .world = 2 };
    CHECK(sampler_num_samples(&c) == 0 && sampler_padding(&c) == 0, "empty dataset");
    TEST_END();

    TEST_BEGIN("padding_larger_than_dataset_repeats");
    /* N=3, W=8: total 8, padding 5 > N, torch repeats the list: 0,1,2,0,1,2,0,1. */
    c = (SamplerConfig){ .size = 3, .world = 8 };
    CHECK(sampler_padding(&c) == 5, "padding %lld", (long long)sampler_padding(&c));
    for (int r = 0; r < 8; r++) {
        c.rank = r;
        int64_t got = -1;
        char err[128];
        CHECK(sampler_indices(&c, 0, &got, err, sizeof err) == 0, "%s", err);
        CHECK(got == r % 3, "rank %d got %lld", r, (long long)got);
    }
    /* Shuffled: the 8 positions are perm repeated, so every index appears. */
    c.shuffle = true;
    c.seed = 7;
    int seen[3] = { 0 };
    for (int r = 0; r < 8; r++) {
        c.rank = r;
        int64_t got = -1;
        char err[128];
        CHECK(sampler_indices(&c, 0, &got, err, sizeof err) == 0, "%s", err);
        if (got >= 0 && got < 3) seen[got]++;
    }
    CHECK(seen[0] >= 2 && seen[1] >= 2 && seen[2] >= 2, "counts %d %d %d", seen[0], seen[1], seen[2]);
    TEST_END();

    TEST_BEGIN("ranks_partition_a_shuffled_epoch");
    /* Every index once across ranks, plus exactly `padding` duplicates. */
    enum { N = 1001, W = 4 };
    static int count[N];
    memset(count, 0, sizeof count);
    c = (SamplerConfig){ .size = N, .world = W, .seed = 123, .shuffle = true };
    int64_t num = sampler_num_samples(&c);
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)num);
    for (int r = 0; r < W; r++) {
        c.rank = r;
        char err[128];
        CHECK(sampler_indices(&c, 5, idx, err, sizeof err) == 0, "%s", err);
        for (int64_t i = 0; i < num; i++)
            if (idx[i] >= 0 && idx[i] < N) count[idx[i]]++;
    }
    int missing = 0, dup = 0;
    for (int i = 0; i < N; i++) {
        missing += count[i] == 0;
        dup += count[i] > 1 ? count[i] - 1 : 0;
    }
    CHECK(missing == 0, "%d indices never drawn", missing);
    CHECK(dup == sampler_padding(&c), "%d duplicates, padding %lld", dup, (long long)sampler_padding(&c));
    /* A different epoch gives a different order. */
    int64_t *idx2 = malloc(sizeof(int64_t) * (size_t)num);
    char err[128];
    c.rank = 0;
    sampler_indices(&c, 5, idx, err, sizeof err);
    sampler_indices(&c, 6, idx2, err, sizeof err);
    CHECK(memcmp(idx, idx2, sizeof(int64_t) * (size_t)num) != 0, "epochs 5 and 6 identical");
    free(idx);
    free(idx2);
    TEST_END();
}

static void test_bad_configs(void)
{
    TEST_BEGIN("bad_configs_rejected");
    struct {
        SamplerConfig c;
        const char *why;
    } bad[] = {
        { { .size = 10, .world = 0, .rank = 0 }, "world 0" },
        { { .size = 10, .world = -3, .rank = 0 }, "world negative" },
        { { .size = 10, .world = 2, .rank = 2 }, "rank == world" },
        { { .size = 10, .world = 2, .rank = -1 }, "rank negative" },
        { { .size = -1, .world = 2, .rank = 0 }, "size negative" },
        { { .size = ((int64_t)1 << 31) + 1, .world = 2, .rank = 0 }, "size above cap" },
        { { .size = INT64_MAX, .world = 1, .rank = 0, .shuffle = true }, "size huge" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[256] = "";
        int64_t out[4];
        CHECK(sampler_check(&bad[i].c, err, sizeof err) == -1, "%s accepted", bad[i].why);
        CHECK(err[0] != '\0', "%s: no message", bad[i].why);
        err[0] = '\0';
        CHECK(sampler_indices(&bad[i].c, 0, out, err, sizeof err) == -1, "%s: indices accepted", bad[i].why);
        CHECK(err[0] != '\0', "%s: no message from indices", bad[i].why);
    }
    SamplerConfig w0 = { .size = 10, .world = 0 };
    CHECK(sampler_num_samples(&w0) == 0 && sampler_total_size(&w0) == 0, "world 0 must not divide by zero");
    SamplerConfig ok = { .size = (int64_t)1 << 31, .world = 1 };
    char err[256];
    CHECK(sampler_check(&ok, err, sizeof err) == 0, "size at the cap refused: %s", err);
    TEST_END();
}

int main(void)
{
    test_mt19937();
    test_fixture();
    test_sizes();
    test_bad_configs();
    CHECK_EXIT();
}
