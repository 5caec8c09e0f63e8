/* exits.c — how ranks end: reaping and exit bookkeeping, the shutdown
 * ladder and the restart decision. See internal.h.
 *
 * Shutdown is a ladder with deadlines: a stop command (ranks agree on the
 * step, checkpoint, barrier, destroy, bye) -> after stop_grace_s SIGTERM ->
 * LAUNCH_KILL_GRACE_MS later SIGKILL. A second Ctrl-C jumps a rung. The job
 * model records which rung ended each rank. `a` (abort) skips the clean
 * stop: SIGTERM at once, SIGKILL 5 s later.
 *
 * A rank that fails outside a requested stop ends the job for all
 * (torchrun's rule); with --max-restarts K, once every rank is reaped, all
 * of them start again (spawn.c), up to K times. Main thread.
 */
#include "run/internal.h"

#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>

#include "base/clock.h"
#include "base/signals.h"
#include "launch/procstat.h"

/* A rank that exited 0 before its bye was read: its last messages may
 * still be on their way through the socket. Judged this much later: on a
 * loaded machine ddptop's own threads may not run for hundreds of ms (500
 * ms called clean exits of 32 ranks "without bye" in a test at load 6, and
 * 2 s called one so in a clean clone's CI run at load 10 or more). Only a
 * rank that really exits 0 without a bye waits this long. */
#define BYE_GRACE_MS 5000

int run_procs_running(const Run *r)
{
    int n = launcher_running(r->l) + (r->nodes ? nodes_running(r->nodes) : 0);
    if ((r->external || r->follow.on) && r->job)
        for (int k = 0; k < r->job->world; k++) n += r->rk[k].routable && !r->rk[k].ext_ended;
    return n;
}

/* The process is gone, but an exit 0 is judged only with its bye, which may
 * still be in the socket: hold it (BYE_GRACE_MS) and look again each turn. */
void run_on_exit(void *ctx, int rank, int pid, int status)
{
    Run *r = ctx;
    if (r->follow.on && pid == r->follow.pid) { /* the ranks' launcher, not a rank (follow.c) */
        run_follow_launcher_exit(r, status);
        return;
    }
    const JobRank *jr = &r->job->ranks[rank];
    bool silent = r->job->bare && !jr->hello; /* a bare program sends no bye: nothing to wait for */
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && !jr->bye && !silent) {
        r->rk[rank].exit_at = mono_ms();
        r->rk[rank].exit_pid = pid;
        r->rk[rank].exit_status = status;
        return;
    }
    run_rank_ended(r, rank, pid, status);
}

int run_held_exits(Run *r, bool all_now)
{
    int held = 0;
    for (int k = 0; k < r->job->world; k++) {
        RunRank *rk = &r->rk[k];
        if (!rk->exit_at) continue;
        if (r->job->ranks[k].bye || all_now || mono_ms() - rk->exit_at >= BYE_GRACE_MS) {
            rk->exit_at = 0;
            run_rank_ended(r, k, rk->exit_pid, rk->exit_status);
        } else {
            held++;
        }
    }
    return held;
}

/* A local rank's last log lines, into the events (other nodes' agents send
 * theirs as "log" messages). */
static void tail_log(Run *r, int rank)
{
    char lines[3][256];
    int n = launcher_log_tail(r->l, r->follow.on ? 0 : rank, lines, 3); /* followed ranks: the launched log */
    for (int i = 0; i < n; i++) job_event(r->job, mono_ns(), wall_ns(), rank, EV_ERROR, "log: %s", lines[i]);
}

void run_rank_ended(Run *r, int rank, int pid, int status)
{
    const char *how = NULL;
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM && r->rung >= 1) how = "SIGTERM by ddptop";
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && r->rung >= 2) how = "SIGKILL by ddptop";
    job_rank_exited(r->job, rank, pid, status, how, mono_ns(), wall_ns());
    if (r->rec) {
        char err[256];
        recorder_write_exit(r->rec, rank, pid, status, how, mono_ns(), 0, err, sizeof err);
    }
    JobRank *jr = &r->job->ranks[rank];
    if (jr->state != RANK_FAILED) return;
    tail_log(r, rank);
    /* --max-restarts: a failure outside a requested stop restarts the job
     * once every rank is reaped */
    /* a refusal (the bye's `refused`: a usage error) would be refused again */
    if (!r->stop_requested && !r->restart_pending && r->job->restarts < r->o->max_restarts && !r->job->refused[0]) {
        r->restart_pending = true;
        job_event(r->job, mono_ns(), wall_ns(), rank, EV_WARN,
                  "rank %d %s: every rank will be started again (restart %d/%d)", rank, jr->how_ended,
                  r->job->restarts + 1, r->o->max_restarts);
    }
    /* torchrun's rule: one rank failing ends the job for all. */
    if (run_procs_running(r) > 0 && !r->stop_requested) {
        char why[128];
        snprintf(why, sizeof why, "rank %d %s", rank, jr->how_ended);
        r->stop_arg = 1 + (int64_t)rank; /* so ranks still connecting can say who */
        run_request_stop(r, why);
    }
}

/* The next rung of the ladder, for ranks still running. */
static void escalate(Run *r, const char *why)
{
    if (run_procs_running(r) == 0) return;
    if (r->rung == 0) {
        r->rung = 1;
        int n = launcher_signal_all(r->l, SIGTERM) + (r->nodes ? nodes_signal(r->nodes, SIGTERM) : 0);
        if (r->external)
            job_event(r->job, mono_ns(), wall_ns(), -1, EV_WARN,
                      "%s: ranks ddptop did not start cannot be signalled; they exit %d s after "
                      "ddptop stops pinging them",
                      why, 15);
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_WARN, "%s: sent SIGTERM to %d rank%s", why, n,
                  n == 1 ? "" : "s");
    } else if (r->rung == 1) {
        r->rung = 2;
        int n = launcher_signal_all(r->l, SIGKILL) + (r->nodes ? nodes_signal(r->nodes, SIGKILL) : 0);
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_ERROR, "%s: sent SIGKILL to %d rank%s", why, n,
                  n == 1 ? "" : "s");
    }
    r->stop_at_ms = mono_ms();
}

void run_take_signals(Run *r)
{
    while (r->handled_signals < signals_stop_count()) {
        r->handled_signals++;
        r->restart_pending = false;
        r->quit_after = true;
        if (r->handled_signals == 1) job_set_interrupted(r->job, signals_name(signals_first()));
        if (!r->stop_requested)
            run_request_stop(r, "signal received");
        else
            escalate(r, "signal received again");
    }
}

void run_linger_tick(Run *r, int running)
{
    if (running == 0 || r->external) return; /* listen: a rank's bye is its exit */
    int64_t now = mono_ns(), next = r->linger_next_ns;
    if (now < next) return;
    r->linger_next_ns = now + 1000000000LL;
    double after_s = r->o->hang_after_s > 0 ? r->o->hang_after_s : 10.0;
    int alive = 0, lingering = 0, first = -1;
    for (int k = 0; k < r->job->world; k++) {
        const JobRank *jr = &r->job->ranks[k];
        if (jr->state != RANK_ALIVE && jr->state != RANK_WAITING) continue;
        alive++;
        int64_t since;
        if (!job_rank_finished_alive(jr, &since)) continue;
        double secs = (double)(now - since) / 1e9;
        if (secs < after_s) continue;
        lingering++;
        if (first < 0) first = k;
        if (!jr->lingered) {
            ProcStat ps;
            char wchan[sizeof ps.wchan] = "";
            if (jr->pid > 0 && procstat_read((pid_t)jr->pid, &ps) == 0) snprintf(wchan, sizeof wchan, "%s", ps.wchan);
            job_note_linger(r->job, k, now, wall_ns(), secs, wchan);
        }
    }
    if (!lingering || lingering < alive || r->stop_requested) return;
    /* every rank still running has finished: nothing is left to stop cleanly */
    char why[96];
    snprintf(why, sizeof why, "rank %d finished but its process did not exit", first);
    r->restart_pending = false;
    r->stop_requested = true;
    for (int k = 0; k < r->job->world; k++) r->rk[k].sent_stop = true;
    job_set_stopping(r->job);
    escalate(r, why);
}

/* A second a jumps to SIGKILL. */
void run_request_abort(Run *r)
{
    if (run_procs_running(r) == 0) {
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_WARN, "nothing to abort: every rank has ended");
        return;
    }
    r->restart_pending = false;
    r->quit_after = true;
    if (r->aborted) {
        escalate(r, "abort requested again (a)");
        return;
    }
    r->aborted = true;
    if (!r->stop_requested) {
        r->stop_requested = true; /* no stop command: the ranks are signalled */
        for (int k = 0; k < r->job->world; k++) r->rk[k].sent_stop = true;
        job_set_stopping(r->job);
    }
    if (r->rung == 0)
        escalate(r, "abort requested (a): no clean stop");
    else
        escalate(r, "abort requested (a)");
    snprintf(r->status, sizeof r->status, "aborting: SIGTERM sent, SIGKILL in %d s", LAUNCH_KILL_GRACE_MS / 1000);
}

/* The status line counts down to the next rung, so a user waiting on a
 * stuck clean stop sees when ddptop will act. */
static void ladder_countdown(Run *r, int64_t waited_ms)
{
    int64_t grace = r->rung == 0 ? (int64_t)(r->o->stop_grace_s * 1000) : LAUNCH_KILL_GRACE_MS;
    long left = (long)((grace - waited_ms + 999) / 1000);
    if (left < 0) left = 0;
    if (r->rung == 0)
        snprintf(r->status, sizeof r->status,
                 "stopping: ranks agree on the last step, then checkpoint, barrier, destroy; SIGTERM in %ld s "
                 "(--stop-grace)",
                 left);
    else if (r->rung == 1)
        snprintf(r->status, sizeof r->status, "%s: SIGTERM sent, SIGKILL in %ld s",
                 r->aborted ? "aborting" : "stopping", left);
    else
        snprintf(r->status, sizeof r->status, "%s: SIGKILL sent", r->aborted ? "aborting" : "stopping");
}

void run_ladder_tick(Run *r, int running)
{
    if (!r->stop_requested || running == 0) return;
    int64_t waited = mono_ms() - r->stop_at_ms;
    if (r->rung == 0 && waited > (int64_t)(r->o->stop_grace_s * 1000))
        escalate(r, "ranks did not finish the clean stop in time");
    else if (r->rung == 1 && waited > LAUNCH_KILL_GRACE_MS)
        escalate(r, "ranks ignored SIGTERM");
    ladder_countdown(r, mono_ms() - r->stop_at_ms);
}
