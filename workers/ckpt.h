/* ckpt.h — checkpoint directories users keep.
 *
 * Owns: CKPT_DIR/step-NNNNNNNN/{model,trainer}.safetensors, built in a
 * temporary directory, fsynced, renamed into place, then CKPT_DIR/latest
 * (a symlink) switched atomically. A crash at any point leaves every earlier
 * checkpoint and `latest` intact. Rank 0's main thread.
 */
#ifndef DDPTOP_CKPT_H
#define DDPTOP_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "optim.h"

typedef struct {
    int64_t step, epoch;
    uint64_t seed;
    int world;
    int64_t sampler_pos;    /* samples of this epoch already consumed per rank */
    const char *model_spec; /* "mlp:784,256,256,10" */
} CkptMeta;

/* Write a checkpoint of m (and o's state) for meta->step under dir.
 * path_out gets the final directory; *bytes the bytes written.
 * Returns 0 or -1 with err (nothing earlier is touched on failure). */
int ckpt_write(const char *dir, const CkptMeta *meta, const Mlp *m, const Optim *o,
               char *path_out, size_t path_len, int64_t *bytes, char *err, size_t errlen);

/* Load the weights of a model.safetensors into m, checking every name and
 * shape. Returns 0 or -1 with err naming the problem. */
int ckpt_load_model(const char *file, Mlp *m, char *err, size_t errlen);

#endif
