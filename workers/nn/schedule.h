/* schedule.h — the learning-rate schedule: constant or cosine, with linear
 * warm-up.
 *
 * Owns: the formula only (pure, any thread). It is the one of transformers'
 * get_{constant,cosine}_schedule_with_warmup, i.e. torch's LambdaLR with
 *   factor(s) = s / W                                   for s < W
 *   constant:  1                                        for s >= W
 *   cosine:    0.5 * (1 + cos(pi * (s - W) / (T - W)))  for W <= s < T, 0 after
 * where s = optimizer steps already taken (0 for the first step), W the
 * warm-up steps and T the total steps of the run. Computed in double, as
 * Python does, so `LambdaLR(opt, factor)` gives the same lr bit for bit.
 */
#ifndef DDPTOP_SCHEDULE_H
#define DDPTOP_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

typedef enum { SCHED_CONSTANT = 0, SCHED_COSINE } SchedKind;

typedef struct {
    SchedKind kind;
    double base_lr;
    int64_t warmup_steps; /* W */
    int64_t total_steps;  /* T: the run's planned optimizer steps (cosine) */
} Schedule;

/* The learning rate of the optimizer step that follows `steps_done` steps. */
double schedule_lr(const Schedule *s, int64_t steps_done);
/* "constant" / "cosine"; parse returns 0 or -1. */
const char *schedule_kind_name(SchedKind k);
int schedule_kind_parse(const char *name, SchedKind *out);

#endif
