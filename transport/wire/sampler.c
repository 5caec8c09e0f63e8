/* sampler.c — PyTorch's DistributedSampler, index for index.
 *
 * Owns: mt19937 (bit-identical to std::mt19937 and torch's CPU generator),
 * torch's CPU randperm, and DistributedSampler's num_samples / padding /
 * truncation / rank striding (torch 1.13, torch/utils/data/distributed.py).
 * Does not own: the epoch loop or batching (the trainer's). Pure functions
 * with no globals: any thread.
 *
 * Checked against ../shared/fixtures/distributed_sampler.tsv, produced by
 * torch's own sampler (tests/unit/test_sampler.c).
 */
#include "wire/sampler.h"

#include <stdio.h>
#include <stdlib.h>

#define MT_N 624
#define MT_M 397

/* Sizes above this are refused, so a silly size cannot ask for a huge
 * permutation (4 bytes per index, 8 GiB at the cap). Note: this follows
 * torch 1.13's randperm (one 32-bit draw per swap); later torch versions
 * draw 64 bits per swap for very large n (hundreds of millions). */
#define SAMPLER_MAX_SIZE ((int64_t)1 << 31)

void mt_seed(Mt19937 *g, uint32_t seed)
{
    g->mt[0] = seed;
    for (int i = 1; i < MT_N; i++) g->mt[i] = 1812433253u * (g->mt[i - 1] ^ (g->mt[i - 1] >> 30)) + (uint32_t)i;
    g->idx = MT_N;
}

static void mt_twist(Mt19937 *g)
{
    for (int i = 0; i < MT_N; i++) {
        uint32_t y = (g->mt[i] & 0x80000000u) | (g->mt[(i + 1) % MT_N] & 0x7fffffffu);
        uint32_t v = g->mt[(i + MT_M) % MT_N] ^ (y >> 1);
        if (y & 1u) v ^= 0x9908b0dfu;
        g->mt[i] = v;
    }
    g->idx = 0;
}

uint32_t mt_next_u32(Mt19937 *g)
{
    /* idx outside [0, 624] means a Mt19937 that was never seeded or was
     * corrupted; twisting rebuilds a valid index instead of reading out of
     * the array. */
    if (g->idx >= MT_N || g->idx < 0) mt_twist(g);
    uint32_t y = g->mt[g->idx++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

int sampler_check(const SamplerConfig *c, char *err, size_t errlen)
{
    if (c->world < 1) {
        snprintf(err, errlen, "sampler: world size %d, must be >= 1", c->world);
        return -1;
    }
    if (c->rank < 0 || c->rank >= c->world) {
        snprintf(err, errlen, "sampler: rank %d outside [0, %d)", c->rank, c->world);
        return -1;
    }
    if (c->size < 0) {
        snprintf(err, errlen, "sampler: dataset size %lld is negative", (long long)c->size);
        return -1;
    }
    if (c->size > SAMPLER_MAX_SIZE) {
        snprintf(err, errlen, "sampler: dataset size %lld above the limit %lld", (long long)c->size,
                 (long long)SAMPLER_MAX_SIZE);
        return -1;
    }
    return 0;
}

int64_t sampler_num_samples(const SamplerConfig *c)
{
    if (c->world < 1 || c->size < 0) return 0;
    int64_t n = c->size, w = c->world;
    /* torch: drop_last and n % w != 0 -> ceil((n - w) / w), which is n // w
     * for every n >= 0 (including n < w, where it is ceil of a value in
     * (-1, 0), i.e. 0); otherwise ceil(n / w). */
    if (c->drop_last) return n / w;
    return (n + w - 1) / w;
}

int64_t sampler_total_size(const SamplerConfig *c) { return sampler_num_samples(c) * (c->world < 1 ? 0 : c->world); }

int64_t sampler_padding(const SamplerConfig *c)
{
    if (c->drop_last || c->world < 1 || c->size < 0) return 0;
    return sampler_total_size(c) - c->size;
}

int sampler_indices(const SamplerConfig *c, int64_t epoch, int64_t *out, char *err, size_t errlen)
{
    if (sampler_check(c, err, errlen) < 0) return -1;
    int64_t n = c->size, w = c->world;
    int64_t num = sampler_num_samples(c);
    if (num == 0) return 0; /* n == 0, or drop_last with n < w */

    if (!c->shuffle) {
        /* indices = range(n), padded by repeating from the start (as often
         * as needed when padding > n), or truncated: position p holds p % n. */
        for (int64_t j = 0; j < num; j++) out[j] = (c->rank + j * w) % n;
        return 0;
    }

    uint32_t *perm = malloc((size_t)n * sizeof *perm);
    if (!perm) {
        snprintf(err, errlen, "sampler: out of memory for a permutation of %lld", (long long)n);
        return -1;
    }
    /* g.manual_seed(seed + epoch): torch seeds mt19937 with the low 32 bits. */
    Mt19937 g;
    mt_seed(&g, (uint32_t)((c->seed + (uint64_t)epoch) & 0xffffffffu));
    /* torch.randperm(n, generator=g) on the CPU (randperm_cpu). */
    for (int64_t i = 0; i < n; i++) perm[i] = (uint32_t)i;
    for (int64_t i = 0; i < n - 1; i++) {
        int64_t z = (int64_t)(mt_next_u32(&g) % (uint64_t)(n - i));
        uint32_t t = perm[i];
        perm[i] = perm[i + z];
        perm[i + z] = t;
    }
    for (int64_t j = 0; j < num; j++) out[j] = perm[(c->rank + j * w) % n];
    free(perm);
    return 0;
}
