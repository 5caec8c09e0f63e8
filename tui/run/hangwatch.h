/* hangwatch.h — turning the job model into hang verdicts, live.
 *
 * Owns: when to look (once a second) and the process states from /proc
 * added to the model's snapshot (hang_snapshot). The verdict itself is
 * model/hang.c's, and so is telling one hang once (hang_note). Main thread.
 */
#ifndef DDPTOP_HANGWATCH_H
#define DDPTOP_HANGWATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "model/hang.h"
#include "model/job.h"
#include "launch/launcher.h"

typedef struct {
    int64_t hang_after_ns;
    int64_t next_check_ns; /* monotonic */
    bool reported;         /* the newest look found a hang */
    HangReport last;       /* its report (valid when reported) */
    HangRank *snap;        /* [world] scratch */
    int world;
    char host[256];        /* this machine's name: a rank elsewhere has no /proc here */
} HangWatch;

/* hang_after_s: a collective waited on this long is a hang. Returns 0 or -1. */
int hangwatch_init(HangWatch *w, int world, double hang_after_s);
void hangwatch_done(HangWatch *w);
/* Look at the job if a second has passed: notes each silent rank in the
 * model (hang_rank_silent, job_note_silent; only with /proc states).
 * Returns 1 when that look found a hang (its report in w->last: a new one
 * or the same one, longer), else 0. l may be NULL (no /proc states: a
 * replay). */
int hangwatch_tick(HangWatch *w, Job *j, const Launcher *l, int64_t mono_ns, int64_t wall_ns);

#endif
