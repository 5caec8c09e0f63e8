/* job_outcome.c — how a job ended, beyond its ranks' exits: the
 * checkpoints the ranks reported (written, lost, or lost and then
 * superseded by a later one), a stop signal that
 * interrupted it, and the words and exit status that follow (job_ok,
 * job_outcome, the verdict's lines for a lost checkpoint and an
 * interrupted run). See job.h.
 *
 * Owns: Job's ckpt and interruption fields. Main thread.
 */
#include "model/job_priv.h"

#include <stdio.h>
#include <string.h>

void job_apply_ckpt(Job *j, JobRank *r, const MsgCkpt *c, JobTime at)
{
    if (!c->ok) {
        /* asked for (c, the final one, a periodic one) and not on disk: the
         * run cannot end clean (job_outcome) */
        j->ckpts_lost++;
        j->lost_ckpt_step = c->step;
        j->lost_ckpt_restart = j->restarts;
        snprintf(j->lost_ckpt_error, sizeof j->lost_ckpt_error, "%s", c->error[0] ? c->error : "no reason given");
        job_ev_add(j, at, r->rank, EV_ERROR, "checkpoint step %lld lost: rank %d could not write it: %s",
                   (long long)c->step, r->rank, j->lost_ckpt_error);
        return;
    }
    /* a later checkpoint (a later step, or the same step in a later attempt
     * of --max-restarts) holds everything the lost one would have: the run can still end clean
     * (docs/DECISIONS.md) */
    if (j->ckpts_lost &&
        (c->step > j->lost_ckpt_step || (c->step == j->lost_ckpt_step && j->restarts > j->lost_ckpt_restart))) {
        job_ev_add(j, at, r->rank, EV_WARN,
                   "checkpoint step %lld superseded: step %lld lost earlier%s is replaced by it", (long long)c->step,
                   (long long)j->lost_ckpt_step, j->ckpts_lost > 1 ? " (and older ones)" : "");
        j->ckpts_superseded += j->ckpts_lost;
        j->ckpts_lost = 0;
    }
    j->last_ckpt_step = c->step;
    snprintf(j->last_ckpt_path, sizeof j->last_ckpt_path, "%s", c->path);
    j->ckpts++;
    /* test-sized models write a few kB: "0.0 MB" would read as nothing */
    bool small = c->bytes < 100000;
    job_ev_add(j, at, r->rank, EV_INFO, "checkpoint step %lld written by rank %d in %.0f ms (%.1f %s) -> %.160s",
               (long long)c->step, r->rank, c->ms, (double)c->bytes / (small ? 1e3 : 1e6), small ? "kB" : "MB",
               c->path);
}

void job_set_interrupted(Job *j, const char *by)
{
    /* a failure that came first stays the verdict; after the end it is just leaving */
    if (!j || j->interrupted_by[0] || j->state == JOB_FAILED || job_all_exited(j)) return;
    snprintf(j->interrupted_by, sizeof j->interrupted_by, "%s", by);
    j->version++;
}

JobOutcome job_outcome(const Job *j)
{
    if (!job_all_exited(j)) return JOB_END_RUNNING;
    /* the ranks' exit 2 is the refusal's, not a failure of the training */
    if (j->refused[0]) return JOB_END_REFUSED;
    /* a rank the ladder had to end (a hang) is a failure, signal or not */
    if (!job_all_clean(j)) return JOB_END_FAILED;
    if (j->interrupted_by[0]) return JOB_END_INTERRUPTED;
    return j->ckpts_lost ? JOB_END_CKPT_LOST : JOB_END_OK;
}

bool job_ok(const Job *j) { return job_outcome(j) == JOB_END_OK; }

bool job_outcome_verdict(const Job *j, char *buf, size_t len)
{
    JobOutcome o = job_outcome(j);
    if (o == JOB_END_REFUSED) {
        snprintf(buf, len, "job refused: %s", j->refused);
        return true;
    }
    if (o == JOB_END_CKPT_LOST) {
        char more[48] = "";
        if (j->ckpts_lost > 1) snprintf(more, sizeof more, " (%d checkpoints lost)", j->ckpts_lost);
        snprintf(buf, len, "job failed: checkpoint lost: step %lld was not written (%.200s)%s",
                 (long long)j->lost_ckpt_step, j->lost_ckpt_error, more);
        return true;
    }
    if (o != JOB_END_INTERRUPTED) return false;
    char ck[PROTO_STR_LONG + 300];
    if (j->last_ckpt_step >= 0 && j->last_ckpt_step == j->step)
        snprintf(ck, sizeof ck, "checkpoint written%s%s", j->last_ckpt_path[0] ? ": " : "", j->last_ckpt_path);
    else if (j->ckpts_lost && j->lost_ckpt_step >= j->step)
        snprintf(ck, sizeof ck, "no checkpoint written (step %lld lost: %.200s)", (long long)j->lost_ckpt_step,
                 j->lost_ckpt_error);
    else if (j->last_ckpt_step >= 0)
        snprintf(ck, sizeof ck, "no checkpoint written at the stop (the last is step %lld)",
                 (long long)j->last_ckpt_step);
    else
        snprintf(ck, sizeof ck, "no checkpoint written");
    snprintf(buf, len, "stopped by %s at step %lld, %s", j->interrupted_by, (long long)j->step, ck);
    return true;
}
