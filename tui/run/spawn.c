/* spawn.c — starting the ranks: the first launch and each --max-restarts
 * restart (a new job id, a fresh store and hang watch; the built-in
 * trainer resumes from CKPT_DIR/latest when there is one, a script (or a
 * DDPTOP_WORKER program other than ddptop-worker) is run again as it was, TORCHELASTIC_RESTART_COUNT telling it which run this
 * is). MASTER_PORT: a port free on this host at each launch (one node), or
 * node 0's --rdzv PORT+2 (several). See internal.h. The launcher
 * (launch/launcher.h) owns the processes; this file owns what they are
 * told. Main thread.
 */
#include "run/internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/err.h"

/* The trainer's --ckpt-dir (its default when not given). */
static const char *ckpt_dir(const RunOptions *o)
{
    const char *d = "./checkpoints";
    for (int i = 0; i + 1 < o->n_trainer_args; i++)
        if (!strcmp(o->trainer_args[i], "--ckpt-dir")) d = o->trainer_args[i + 1];
    return d;
}

/* Restart K: --resume CKPT_DIR/latest in r->lc's trainer options (and in
 * extra, for the agents) when it exists, else a start from step 0. */
static int resume_latest(Run *r, int restart, char *extra, size_t extra_len, char *err, size_t errlen)
{
    const RunOptions *o = r->o;
    const char *dir = ckpt_dir(o);
    char link[600], target[256];
    snprintf(link, sizeof link, "%s/latest", dir);
    struct stat st;
    if (stat(link, &st) != 0) {
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_WARN, "restart %d/%d: no checkpoint in %s, starting from step 0",
                  restart, o->max_restarts, dir);
        return ERR_OK;
    }
    if (!r->restart_args) r->restart_args = calloc((size_t)o->n_trainer_args + 3, sizeof *r->restart_args);
    if (!r->restart_args) return err_set(err, errlen, "out of memory");
    snprintf(r->resume_path, sizeof r->resume_path, "%s", link);
    int na = launcher_resume_args(o->trainer_args, o->n_trainer_args, r->resume_path, r->restart_args);
    r->lc.worker_args = r->restart_args;
    r->lc.n_worker_args = na;
    snprintf(extra, extra_len, "--resume %.400s", link);
    ssize_t n = readlink(link, target, sizeof target - 1);
    target[n > 0 ? n : 0] = '\0';
    const char *base = strrchr(target, '/') ? strrchr(target, '/') + 1 : target;
    long long step = -1;
    if (sscanf(base, "step-%lld", &step) == 1)
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_WARN, "restart %d/%d: resuming from step %lld (%s)", restart,
                  o->max_restarts, step, link);
    else
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_WARN, "restart %d/%d: resuming from %s", restart,
                  o->max_restarts, link);
    return ERR_OK;
}

/* The rows, events and charts stay; a restart gets a new job id (the
 * store's keys start over). */
int run_launch(Run *r, int restart, char *err, size_t errlen)
{
    const RunOptions *o = r->o;
    snprintf(r->job_id, sizeof r->job_id, "ddptop-%d-%" PRId64, (int)getpid(), proto_now_ns());
    static char master[256];
    int master_port = o->master_port; /* 0: a free one */
    snprintf(master, sizeof master, "127.0.0.1");
    if (o->nnodes > 1) {
        char ep[300];
        snprintf(ep, sizeof ep, "tcp://%s", o->rdzv);
        keys_tcp_split(ep, master, sizeof master, &master_port);
        master_port += 2; /* PORT and PORT+1 are ddptop's control and telemetry */
    } else if (launcher_free_port(master, &master_port, err, errlen)) {
        return ERR_FAIL;
    }
    r->lc = (LaunchConfig){ .world = o->nproc,
                            .rank_offset = 0,
                            /* a followed script's world is its children's (follow.c): it runs as one */
                            .global_world = r->follow.on ? o->nproc * o->nnodes : r->job->world,
                            .worker_path = o->worker_path,
                            .worker_args = o->trainer_args,
                            .n_worker_args = o->n_trainer_args,
                            .ctl_ep = r->ctl_ep,
                            .tel_ep = r->tel_ep,
                            .job_id = r->job_id,
                            .master_addr = master,
                            .master_port = master_port,
                            .log_dir = o->log_dir ? o->log_dir : r->dir,
                            .device = o->device,
                            .backend = o->backend,
                            .restart = restart,
                            .keys_path = r->tcp ? r->keys_file : NULL,
                            .node_rank = 0,
                            .nnodes = o->nnodes,
                            .max_restarts = o->max_restarts,
                            .pythonpath = o->adapter_dir,
                            .set_faults_spent = restart > 0 && r->steps_reached >= 0,
                            .faults_spent = r->steps_reached };
    char extra[PROTO_STR_LONG] = "";
    bool resumes = o->target == RUN_TRAINER && o->trainer_resumes;
    if (restart > 0 && resumes && resume_latest(r, restart, extra, sizeof extra, err, errlen)) return ERR_FAIL;
    if (restart > 0 && !resumes)
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_WARN,
                  "restart %d/%d: running %s again (TORCHELASTIC_RESTART_COUNT=%d)", restart, o->max_restarts,
                  o->program ? o->program : o->worker_path, restart);
    if (launcher_start(&r->l, &r->lc, err, errlen)) return ERR_FAIL;
    r->launched_any = r->launched_any || o->nproc > 0;
    if (r->nodes) nodes_launch(r->nodes, r->job_id, restart, extra, r->lc.set_faults_spent ? r->lc.faults_spent : -1);
    r->launched = true;
    for (int k = 0; k < o->nproc; k++) {
        job_rank_started(r->job, k, launcher_pid(r->l, k), mono_ns());
        if (r->rec) recorder_write_start(r->rec, k, launcher_pid(r->l, k), mono_ns(), 0, err, errlen);
    }
    err[0] = '\0';
    return ERR_OK;
}

int run_restart(Run *r, char *err, size_t errlen)
{
    int w = r->job->world;
    launcher_free(&r->l);
    store_free(&r->store);
    if (!(r->store = store_new())) return err_set(err, errlen, "out of memory");
    if (run_watch_hangs(r, w, err, errlen)) return ERR_FAIL;
    /* commands issued so far are history: the new ranks start clean */
    r->resume_id = r->pause_id;
    r->pause_wanted = false;
    for (int k = 0; k < w; k++)
        r->rk[k] = (RunRank){ .sent_ckpt = r->ckpt_id,
                              .sent_pause = r->pause_id,
                              .sent_resume = r->resume_id,
                              .heard_ms = r->rk[k].heard_ms,
                              .prev_pid = r->rk[k].pid, /* its late frames are not a stranger's */
                              /* listen's ended ranks stay ended; followed ones start again */
                              .ext_ended = r->rk[k].ext_ended && !r->follow.on };
    r->stop_requested = false;
    r->stop_arg = 0;
    r->rung = 0;
    r->restart_pending = false;
    r->status[0] = '\0';
    /* the furthest step so far: the faults of steps up to it fired (fault.h) */
    for (int k = 0; k < w; k++)
        if (r->job->ranks[k].have_step && r->job->ranks[k].last.step > r->steps_reached)
            r->steps_reached = r->job->ranks[k].last.step;
    job_restart(r->job, mono_ns());
    if (run_launch(r, r->job->restarts, err, errlen)) return ERR_FAIL;
    run_follow_restarted(r);
    snprintf(r->status, sizeof r->status, "restart %d/%d", r->job->restarts, r->o->max_restarts);
    return ERR_OK;
}
