/* job_priv.h — what the job model's source files share and nobody else
 * may use: the event adder with an explicit time, and the per-subject
 * hooks job.c calls as messages arrive. Main thread only.
 */
#ifndef DDPTOP_JOB_PRIV_H
#define DDPTOP_JOB_PRIV_H

#include "model/job.h"

/* When an entry point's caller saw what it reports, on both clocks (the
 * model reads none): mono_ns for intervals, wall_ns for event stamps. */
typedef struct {
    int64_t mono_ns, wall_ns;
} JobTime;

/* Add an event seen at `at` (printf-style). */
void job_ev_add(Job *j, JobTime at, int rank, JobEventLevel level, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* job_comm.c: allocate/free the collective tables; fold a completed
 * collective or a heartbeat (collective in flight) into them. */
int job_comm_init(Job *j);
void job_comm_done(Job *j);
void job_comm_on_coll(Job *j, int rank, const MsgColl *c);
void job_comm_on_beat(Job *j, int rank, const MsgBeat *b);

/* job_shard.c: fold a rank's shard into its summary and the index map;
 * warns when an epoch's order repeats the previous one's. */
void job_shard_on_shard(Job *j, JobRank *r, const MsgShard *s, JobTime at);
void job_shard_done(Job *j);

#endif
