/* step.h — one optimizer step of DDP, on either device.
 *
 * Owns the order of a step: gather this rank's micro-batches from its
 * shard, forward/backward each (gradients accumulated locally, DDP's
 * no_sync, except on the last, whose backward hands every bucket to its
 * all-reduce as soon as it is final), wait for the buckets, apply the
 * optimizer at the schedule's learning rate, report. The device side goes
 * through compute.h; what the flags mean is trainer.c's. Main thread.
 */
#ifndef DDPTOP_TRAIN_STEP_H
#define DDPTOP_TRAIN_STEP_H

#include <stdint.h>

typedef struct Trainer Trainer;

/* One step from sample `off` of the rank's shard: up to --grad-accum
 * micro-batches. flags (FL_COUNT floats, state.h) ride in front of the
 * last bucket: in, this rank's; out, their sum over the ranks. *used gets
 * the samples consumed. Returns 0 or -1 (t->err). */
int step_run(Trainer *t, int64_t off, float *flags, int64_t *used);

/* The step in progress had mean loss `loss`: when it is NaN or infinite
 * (and --allow-nan is off), remember it (t->bad_loss, t->bad_step) and
 * raise this rank's FL_NAN or FL_INF and FL_BAD_RANK in fl, once. The
 * compute face calls it where the loss is known before the flags travel
 * (compute.h, loss_in_step_flags); step_run calls it after every step. */
void step_flag_loss(Trainer *t, float *fl, double loss);

#endif
