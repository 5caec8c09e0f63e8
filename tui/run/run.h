/* run.h — `ddptop run`: one job from launch to the last rank reaped.
 *
 * Owns: the frontend's sockets (ctl ROUTER, tel PULL), the store, the
 * launcher, the job model and the view, and the one loop that ties them:
 * one poll over sockets and stdin -> drain messages -> reap -> keys ->
 * redraw. Main thread only. tui/run/internal.h maps the files behind it.
 */
#ifndef DDPTOP_RUN_H
#define DDPTOP_RUN_H

#include "launch/options.h"

/* The exit status of a run whose ranks all ended cleanly but one of whose
 * checkpoints, or its --record recording, could not be written. */
#define RUN_EXIT_CKPT_LOST 3

/* Run the job; returns ddptop's exit status: 0 only when every rank ended
 * cleanly and every checkpoint asked for (and the recording) was written; 1 when the job
 * failed; 2 for bad input found before launch, or a rank that refused to run as
 * launched (its bye's `refused`); RUN_EXIT_CKPT_LOST; 128 + N
 * when stop signal N (Ctrl-C: 130, SIGTERM: 143) interrupted it. */
int run_job(const RunOptions *o);

#endif
