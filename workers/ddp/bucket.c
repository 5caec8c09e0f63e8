/* bucket.c — DDP's bucket assignment. See bucket.h. */
#include "ddp/bucket.h"

int bucket_assign(const Mlp *m, double cap_mb, size_t first_cap_bytes, Bucket *out)
{
    size_t cap = (size_t)(cap_mb * 1024.0 * 1024.0);
    size_t limit = first_cap_bytes; /* torch: limits [first, cap], first as given */
    int nb = 0;
    size_t bytes = 0;
    for (int t = m->n_tensors - 1; t >= 0; t--) {
        const ModelTensor *mt = &m->tensors[t];
        if (bytes == 0) {
            out[nb].first_tensor = t;
            out[nb].numel = 0;
        }
        out[nb].last_tensor = t;
        out[nb].offset = mt->offset;
        out[nb].numel += mt->numel;
        bytes += mt->numel * sizeof(float);
        if (bytes >= limit) {
            nb++;
            bytes = 0;
            limit = cap;
        }
    }
    if (bytes > 0) nb++;
    return nb;
}
