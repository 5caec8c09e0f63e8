/* report.h — the trainer's telemetry: every message a rank sends ddptop
 * through its uplink (phase, log, hello, beat, shard, step, coll, ckpt,
 * eval, bye), and the throughput sums behind the final log line.
 *
 * Owns the shape of each message and when --no-telemetry drops it (step,
 * coll, shard and beat messages; the others always go). Does not decide
 * anything about the run (trainer.c) or compute (compute.h). Main thread
 * only, as the uplink is.
 */
#ifndef DDPTOP_TRAIN_REPORT_H
#define DDPTOP_TRAIN_REPORT_H

#include <stdint.h>

#include "ddp/reducer.h"
#include "wire/protocol.h"
#include "wire/sampler.h"

typedef struct Trainer Trainer;

/* t->phase = p, and a phase message (detail may be NULL). */
void report_phase(Trainer *t, Phase p, const char *detail);
/* A log message at `level` ("info", "warn"). */
void report_log(Trainer *t, const char *level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A failure (t->err): on stderr (the rank's log), as an error phase, and a
 * bye with `status`. Returns status. */
int report_fail(Trainer *t, int status);
/* The clean end: a bye with status 0. */
void report_bye(Trainer *t);

/* ddptop's liveness (uplink.h, uplink_front): stopped, this rank trains on
 * (said when it stops and when it is back); gone (its process, or silent
 * past DDPTOP_PING_TIMEOUT while running), this rank raises the stop flag
 * and t->front_gone; still here FRONT_GONE_GRACE_MS later (a collective
 * that does not end), or gone before the rendezvous, it exits (_exit 1). */
void report_check_ddptop(Trainer *t);
/* This rank's heartbeat now (and report_check_ddptop first);
 * report_maybe_beat only when BEAT_MS have passed. */
void report_beat(Trainer *t);
void report_maybe_beat(Trainer *t);
/* For a wait (reducer_wait's callback every PUMP_MS, a pause's rounds; ctx: the Trainer):
 * the heartbeat when BEAT_MS have passed, else what waits to be sent goes
 * to the socket as it makes room (uplink_flush). */
void report_wait_cb(void *ctx);

/* The hello: who, where, what is trained, how many steps are planned. */
void report_hello(Trainer *t, int64_t steps_per_epoch, int64_t planned_steps);
/* This epoch's shard (t->idx, the first SHARD_IDX_MAX of them). */
void report_shard(Trainer *t, const SamplerConfig *sc);
/* A finished collective (op may be NULL: nothing sent), at `step`. */
void report_coll(Trainer *t, const RedOp *op, int64_t step);
/* The end of a step: t->step and t->samples advance by one and u, the
 * throughput sums take the step (from the second on), and the step message
 * goes out. *sp has the step's timings; comm_ms caps exposed_ms; t0 is the
 * step's start (mono_ms_f). */
void report_step(Trainer *t, const MsgStep *sp, int64_t u, double loss, double lr, double comm_ms, double t0,
                 double data_ms);
/* A checkpoint of this step: written (rc 0, at `path`, `bytes`) or not
 * (`err`), in ms. */
void report_ckpt(Trainer *t, int rc, double ms, int64_t bytes, const char *path, const char *err);
/* The job's evaluation: correct, total, summed loss (all ranks' sums). */
void report_eval(Trainer *t, const float *sums);

/* The log lines: the bucket layout (start of the run) and the throughput
 * and breakdown of a step (end of the run). */
void report_buckets(Trainer *t);
void report_throughput(Trainer *t);

#endif
