/* trainer.h — the worker's training loop, DDP style.
 *
 * Owns: one run from init to destroyed: data, sampler, model, optimizer,
 * learning-rate schedule, gradient buckets and accumulation, the collective
 * backend, command agreement (checkpoint, stop, pause/resume), evaluation,
 * checkpoints and resume, and the telemetry that describes all of it.
 * Main thread; the collectives run on the communication thread (reducer.h).
 */
#ifndef DDPTOP_TRAINER_H
#define DDPTOP_TRAINER_H

#include "train/args.h"
#include "link/identity.h" /* WorkerIdentity */
#include "link/uplink.h"

/* Run the whole job on this rank. Returns the process exit status:
 * 0 clean, 1 runtime failure (reported to ddptop as an error phase), 2 bad
 * input (dataset, model, init file). */
int trainer_run(const TrainerArgs *a, const WorkerIdentity *id, Uplink *up);

#endif
