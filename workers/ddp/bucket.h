/* bucket.h — gradient buckets as PyTorch DDP builds them.
 *
 * Parameters are taken in reverse order (the order backward produces their
 * gradients); a bucket is closed once its size reaches its cap — 1 MB for
 * the first bucket (dist._DEFAULT_FIRST_BUCKET_BYTES), --bucket-cap-mb for
 * the rest — so the tensor that crosses the cap stays in the bucket, as in
 * torch's compute_bucket_assignment_by_size. With the flat state_dict layout
 * each bucket is one contiguous range of the gradient buffer. Pure.
 */
#ifndef DDPTOP_BUCKET_H
#define DDPTOP_BUCKET_H

#include <stddef.h>

#include "nn/model.h"

#define BUCKET_FIRST_CAP_BYTES (1u << 20)
#define BUCKET_MAX             (2 * MODEL_MAX_LINEAR)

typedef struct {
    int first_tensor, last_tensor; /* tensor indices; last_tensor <= first_tensor (reverse) */
    size_t offset, numel;          /* range in grads, in floats */
} Bucket;

/* Fill out[] (at least BUCKET_MAX) and return the number of buckets. */
int bucket_assign(const Mlp *m, double cap_mb, size_t first_cap_bytes, Bucket *out);

#endif
