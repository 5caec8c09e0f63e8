/* bench.h — ddptop measuring itself for `make bench-tui`: how long a step
 * takes from its arrival (and from the worker's send) to the screen, how
 * many frames are drawn and what they cost, the CPU ddptop uses, and the
 * steps that never arrived (gaps in each rank's step numbers).
 *
 * Switched on by the environment, off (NULL, no cost) otherwise:
 *   DDPTOP_BENCH_OUT=FILE     where the JSON result goes
 *   DDPTOP_BENCH_WARMUP=S     seconds after start before measuring (0)
 *   DDPTOP_BENCH_SECS=S       measure this long, then write FILE (0: until exit)
 *   DDPTOP_BENCH_STALL=AT:S   at AT seconds after start the loop sleeps S
 *                             seconds once, as if the machine had not run it
 *                             (ZeroMQ's I/O thread goes on receiving): a
 *                             backlog on demand, for tests of catching up
 * Owns: its counters and histograms. Main thread (the run loop).
 */
#ifndef DDPTOP_BENCH_H
#define DDPTOP_BENCH_H

#include <stdint.h>

#include "model/job.h"
#include "wire/protocol.h"

typedef struct Bench Bench;

/* *out: NULL when DDPTOP_BENCH_OUT is not set. Returns ERR_OK, ERR_USAGE
 * for a malformed DDPTOP_BENCH_STALL or ERR_FAIL (out of memory), *err
 * saying which. */
int bench_from_env(int world, Bench **out, char *err, size_t errlen);
/* A message was applied to the job at arrived_ns (monotonic). */
void bench_on_msg(Bench *b, const Msg *m, int64_t arrived_ns);
/* A frame reached the terminal; its drawing began at draw_start_ns. */
void bench_on_frame(Bench *b, int64_t draw_start_ns, const Job *j);
/* Once a loop turn: DDPTOP_BENCH_STALL's sleep when it is due. */
void bench_tick(Bench *b);
/* Write the result now if it was not written yet (at exit). */
void bench_finish(Bench *b, const Job *j);
void bench_free(Bench **b);

#endif
