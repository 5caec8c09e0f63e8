/* checkpoint.h — the trainer's side of checkpoints (ckpt.h writes and
 * reads the files): what a checkpoint of this run holds, and --resume.
 * Main thread.
 */
#ifndef DDPTOP_TRAIN_CHECKPOINT_H
#define DDPTOP_TRAIN_CHECKPOINT_H

#include "wire/protocol.h"

typedef struct Trainer Trainer;

/* Rank 0 writes a checkpoint of this step (once per step; other ranks
 * return at once), reports it, then reports phase `after` (with
 * `after_detail`, may be NULL). A failed checkpoint is reported, not
 * fatal: training goes on and the earlier checkpoints are untouched. */
void checkpoint_write(Trainer *t, const char *why, Phase after, const char *after_detail);

/* --resume: weights, optimizer state and position from a checkpoint into
 * the host Mlp and Optim. The position (and the seed that orders the data)
 * is the checkpoint's; the hyper-parameters are this run's, and
 * differences are said once. Returns 0, or -1 with t->err and *status the
 * exit status (2: bad input). */
int checkpoint_resume(Trainer *t, int *status);

#endif
