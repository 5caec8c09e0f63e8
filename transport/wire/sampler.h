/* sampler.h — PyTorch's DistributedSampler, index for index.
 *
 * Owns: the mt19937 generator as torch's CPU generator uses it, randperm, and
 * the padding/truncation and rank striding of torch.utils.data.distributed.
 * DistributedSampler. Pure functions, any thread. Used by the worker and by
 * `ddptop sampler`.
 */
#ifndef DDPTOP_SAMPLER_H
#define DDPTOP_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    int64_t size; /* dataset length N */
    int world, rank;
    uint64_t seed;
    bool shuffle, drop_last;
} SamplerConfig;

/* mt19937, as std::mt19937 / torch's CPU generator. */
typedef struct {
    uint32_t mt[624];
    int idx;
} Mt19937;

void mt_seed(Mt19937 *g, uint32_t seed);
uint32_t mt_next_u32(Mt19937 *g);

/* 0 when the config is usable, else -1 with a reason in err. */
int sampler_check(const SamplerConfig *c, char *err, size_t errlen);
/* ceil(N/W), or N/W with drop_last. */
int64_t sampler_num_samples(const SamplerConfig *c);
/* num_samples * W. */
int64_t sampler_total_size(const SamplerConfig *c);
/* Duplicated indices added to reach total_size (0 with drop_last). */
int64_t sampler_padding(const SamplerConfig *c);
/* Fill out[0..num_samples) with this rank's indices for an epoch.
 * Returns 0, or -1 with a reason in err (bad config, out of memory). */
int sampler_indices(const SamplerConfig *c, int64_t epoch, int64_t *out, char *err, size_t errlen);

#endif
