/* run.h — `ddptop run`: one job from launch to the last rank reaped.
 *
 * Owns: the frontend's sockets (ctl ROUTER, tel PULL), the store, the
 * launcher, the job model and the view, and the one loop that ties them:
 * zmq_poll over sockets and stdin -> drain messages -> reap -> keys ->
 * redraw. Main thread only. tui/run/internal.h maps the files behind it.
 */
#ifndef DDPTOP_RUN_H
#define DDPTOP_RUN_H

#include "launch/options.h"

/* Run the job; returns ddptop's exit status (0 only when every rank ended
 * cleanly; 1 when the job failed; 2 for bad input found before launch). */
int run_job(const RunOptions *o);

#endif
