/* ckpt.h — checkpoint directories users keep, and resuming from them.
 *
 * Owns: CKPT_DIR/step-NNNNNNNN/{model,trainer}.safetensors, built in a
 * temporary directory, fsynced, renamed into place, then CKPT_DIR/latest
 * (a symlink) switched atomically; pruning to the newest K; reading a
 * checkpoint back with every check a hostile or mismatched file needs. A
 * crash at any point leaves every earlier checkpoint and `latest` intact.
 * Writes: rank 0's main thread. Reads: every rank's main thread (and the
 * worker's up-front option check).
 *
 * trainer.safetensors holds the optimizer state as tensors named
 * "state.<param>.<buffer>" (momentum_buffer, exp_avg, exp_avg_sq) and, as
 * string metadata, where training stood: format "ddptop-trainer-1", step,
 * epoch, sampler_pos, samples, seed, world_size, model, dataset,
 * dataset_size, batch_size, grad_accum, shuffle, drop_last, optimizer and
 * its hyper-parameters, optimizer_steps, lr_schedule, lr, warmup_steps,
 * total_steps, last_lr, precision (the --precision it was trained in; the
 * weights are FP32 in every mode; absent in older checkpoints, which were all
 * fp32), and CRC-32s of both files' tensor data.
 */
#ifndef DDPTOP_CKPT_H
#define DDPTOP_CKPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nn/model.h"
#include "nn/optim.h"
#include "nn/schedule.h"

/* Where training stood when the checkpoint was taken. */
typedef struct {
    int64_t step, epoch;
    int64_t sampler_pos; /* samples of `epoch` this rank has consumed; num_samples = epoch done */
    int64_t samples;     /* samples this rank has trained on in all */
    uint64_t seed;
    int world;
    char model_spec[128]; /* "mlp:784,256,256,10" */
    char dataset[32];
    int64_t dataset_size;
    int64_t batch_size, grad_accum;
    bool shuffle, drop_last;
    Schedule sched;
    double last_lr;
    Precision precision; /* what the GEMMs computed in; the saved weights are FP32 */
} CkptMeta;

/* Write a checkpoint of m (and o's state) for meta->step under dir, then
 * keep only the keep_last most recently written step directories (0 keeps
 * all; the one just written is never removed; by age, so an older run's
 * higher steps go first). The same step already there is replaced. path_out gets the final directory; *bytes the
 * bytes written. Returns 0 or -1 with err (nothing earlier is touched on
 * failure). */
int ckpt_write(const char *dir, const CkptMeta *meta, const Mlp *m, const Optim *o, int keep_last, char *path_out,
               size_t path_len, int64_t *bytes, char *err, size_t errlen);

/* Whether checkpoints can be written under dir, before a run starts: it
 * (or the nearest parent that exists, where ckpt_write would create it) is
 * a directory, not in /proc or /sys, and a directory can be made in it.
 * Returns 0 or -1 with one line in err naming --ckpt-dir. */
int ckpt_check_dir(const char *dir, char *err, size_t errlen);

/* How many step directories dir holds (0 when none or unreadable);
 * *newest_step (may be NULL) the highest step, -1 when none. */
int ckpt_count(const char *dir, int64_t *newest_step);

/* Load the weights of a model.safetensors into m, checking every name and
 * shape. Returns 0 or -1 with err naming the problem. */
int ckpt_load_model(const char *file, Mlp *m, char *err, size_t errlen);

/* Turn what a user passes to --resume (a step directory, CKPT_DIR/latest,
 * or CKPT_DIR itself when it has a `latest`) into a step directory.
 * Returns 0 or -1 with err. */
int ckpt_resolve(const char *path, char *out, size_t outlen, char *err, size_t errlen);

/* Read the checkpoint in step directory `dir` into m (weights) and o
 * (optimizer state; o must be initialised with this run's config) and
 * *meta. Refuses, with one line in err naming the file and the problem:
 * missing/truncated/corrupt files (structure or checksum), another model
 * shape, another optimizer (or SGD momentum state where this run has
 * none), a world size other than `world` (0 = do not check). Nothing is
 * changed in m and o unless everything checks out. Differences that do
 * not prevent resuming (learning rate, a hyper-parameter, batch size, seed)
 * are listed in note (may be NULL), "" when none. Returns 0 or -1. */
int ckpt_load(const char *dir, Mlp *m, Optim *o, CkptMeta *meta, int world, char *note, size_t notelen, char *err,
              size_t errlen);

#endif
