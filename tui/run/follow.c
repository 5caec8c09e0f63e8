/* follow.c — a script that starts its own ranks (torch.multiprocessing.spawn,
 * start_processes, multiprocessing.Process; PyTorch's DDP tutorial): ddptop
 * launched one process, which is their launcher, not a rank; its children
 * become ranks at their init_process_group (workers/python/ddptop/spawn.py)
 * and say hello as rank-R.PID.NONCE with the world they declare. See
 * internal.h. Main thread.
 *
 * The first such hello, before any rank said hello, makes the job follow
 * them: the job model, the ranks' rows, the viewers' snapshot, the hang
 * watch, the recording and the screen's rank list start again for the
 * declared world (the events so far are carried over). From then on a hello
 * is admitted only from a descendant of the launched process. A followed
 * rank ends with its bye (its status), or when its process is gone without
 * one (its exit status where the kernel still has it, a zombie's, else 1),
 * or when the launched process exits. The launched process's own exit is
 * reported as the launcher's; a failure of it fails the job. The ladder's
 * signals reach the children through the launched process's process group.
 */
#include "run/internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "base/clock.h"
#include "base/err.h"

/* /proc/PID/stat's ppid (field 4) and, for a zombie, its exit code (field
 * 52, as waitpid reports it; Linux 3.5+). -1 when gone or unreadable. */
static int64_t stat_fields(int64_t pid, int *exit_code, char *state)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%" PRId64 "/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *rp = strrchr(buf, ')'); /* comm may hold spaces and parentheses */
    if (!rp || !rp[1]) return -1;
    char *p = rp + 2;
    if (state) *state = *p;
    int64_t ppid = -1;
    for (int field = 3; *p; field++) {
        if (field == 4) ppid = strtoll(p, NULL, 10);
        if (field == 52 && exit_code) *exit_code = (int)strtol(p, NULL, 10);
        char *sp = strchr(p, ' ');
        if (!sp) break;
        p = sp + 1;
    }
    return ppid;
}

static bool descends(int64_t pid, int64_t ancestor)
{
    for (int hops = 0; pid > 1 && hops < 64; hops++) {
        int64_t pp = stat_fields(pid, NULL, NULL);
        if (pp == ancestor) return true;
        pid = pp;
    }
    return false;
}

bool run_follow_descends(const Run *r, int64_t pid)
{
    return r->follow.pid > 0 && pid != r->follow.pid && descends(pid, r->follow.pid);
}

bool run_follow_descends_launched(const Run *r, int64_t pid)
{
    if (r->external || r->o->nproc != 1 || r->o->nnodes > 1 || !r->l) return false;
    int64_t launched = launcher_pid(r->l, 0);
    return launched > 0 && pid != launched && descends(pid, launched);
}

/* Everything sized by the world, again for w ranks; the events carried over. */
static int regrow(Run *r, int w, char *err, size_t errlen)
{
    Job *j = job_new(w, r->job->start_ns);
    RunRank *rk = calloc((size_t)w, sizeof *rk);
    Viewers *v = r->viewers ? viewers_new(w) : NULL;
    if (!j || !rk || (r->viewers && !v)) {
        job_free(&j);
        free(rk);
        viewers_free(&v);
        return err_set(err, errlen, "out of memory");
    }
    int n = 0;
    while (job_event_at(r->job, n)) n++;
    for (int i = n - 1; i >= 0; i--) {
        const JobEvent *e = job_event_at(r->job, i);
        job_event(j, e->mono_ns, e->t_ns, e->rank, e->level, "%s", e->text);
    }
    j->max_restarts = r->job->max_restarts;
    j->bare = r->job->bare;
    job_free(&r->job);
    r->job = j;
    free(r->rk);
    r->rk = rk;
    if (v) {
        viewers_free(&r->viewers);
        r->viewers = v;
    }
    if (run_watch_hangs(r, w, err, errlen)) return ERR_FAIL;
    if (r->tui && view_tui_set_world(r->tui, w)) return err_set(err, errlen, "out of memory");
    if (r->rec) { /* nothing of a rank was recorded yet: the header's world is the followed one */
        recorder_close(&r->rec, err, errlen);
        if (!(r->rec = recorder_open(r->o->record_path, w, r->o->description, err, errlen))) return ERR_FAIL;
    }
    if (r->bench) {
        bench_free(&r->bench);
        int st = bench_from_env(w, &r->bench, err, errlen);
        if (st) return st;
    }
    return ERR_OK;
}

bool run_follow_hello(Run *r, const Msg *m, int64_t claimed)
{
    if (r->follow.on) return true;
    const RunOptions *o = r->o;
    if (r->external || r->nodes || o->nnodes > 1 || o->nproc != 1 || !r->l ||
        (o->target != RUN_SCRIPT && o->target != RUN_MODULE))
        return false;
    int64_t launched = launcher_pid(r->l, 0);
    int w = m->u.hello.world;
    if (launched <= 0 || claimed == launched || r->rk[0].routable || w < 1 || w > JOB_MAX_RANKS || m->rank < 0 ||
        m->rank >= w || !descends(claimed, launched))
        return false;
    char err[512] = "";
    int old = r->job->world;
    if (w != old && regrow(r, w, err, sizeof err)) {
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_ERROR, "cannot follow the script's %d ranks: %s", w, err);
        return false;
    }
    r->follow.on = true;
    r->follow.pid = launched;
    job_event(r->job, mono_ns(), wall_ns(), -1, EV_INFO,
              "the script started its own ranks: following the %d rank%s of process %" PRId64
              " (their world, from init_process_group)",
              w, w == 1 ? "" : "s", launched);
    return true;
}

/* The exit status (as waitpid's) the launched process reaped pid with, which
 * it puts in the store as JOB/py/exit/PID (spawn.py); otherwise. */
static int reaped_status(const Run *r, int64_t pid, int otherwise)
{
    char key[160];
    snprintf(key, sizeof key, "%s/py/exit/%" PRId64, r->job_id, pid);
    size_t len = 0;
    const uint8_t *v = r->store ? store_peek(r->store, key, &len) : NULL;
    char num[16];
    if (!v || len == 0 || len >= sizeof num) return otherwise;
    memcpy(num, v, len);
    num[len] = 0;
    char *end;
    long st = strtol(num, &end, 10);
    return *end || st < 0 || st > 0xffff ? otherwise : (int)st;
}

/* A followed rank whose process is gone: its bye may still be on its way
 * (BYE_GRACE_MS in exits.c); after this long it ends without one. */
#define GONE_GRACE_MS 2000

/* Rank k's process is gone (status as waitpid's, used if no bye comes). */
static void gone(Run *r, int k, int status)
{
    RunRank *rk = &r->rk[k];
    if (rk->ext_ended || rk->gone_ms) return;
    if (!rk->routable) { /* never said hello: nothing to wait for */
        rk->ext_ended = true;
        run_rank_ended(r, k, 0, status);
        return;
    }
    rk->gone_ms = mono_ms();
    rk->gone_status = status;
}

void run_follow_launcher_exit(Run *r, int status)
{
    r->follow.exited = true;
    r->follow.status = status;
    char how[64];
    if (WIFSIGNALED(status))
        snprintf(how, sizeof how, "was killed by signal %d", WTERMSIG(status));
    else
        snprintf(how, sizeof how, "exited %d", WEXITSTATUS(status));
    bool bad = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    job_event(r->job, mono_ns(), wall_ns(), -1, bad ? EV_ERROR : EV_INFO,
              "the script's process %" PRId64 " (the ranks' launcher) %s", r->follow.pid, how);
    for (int k = 0; k < r->job->world; k++) gone(r, k, bad ? status : 1 << 8);
}

void run_follow_tick(Run *r)
{
    if (!r->follow.on) return;
    for (int k = 0; k < r->job->world; k++) {
        RunRank *rk = &r->rk[k];
        if (rk->ext_ended) continue;
        if (rk->gone_ms) {
            /* killed by a signal (as its launcher reaped it): no bye is on its way */
            int st = reaped_status(r, rk->pid, rk->gone_status);
            if (mono_ms() - rk->gone_ms >= GONE_GRACE_MS || (st != rk->gone_status && WIFSIGNALED(st))) {
                rk->ext_ended = true;
                run_rank_ended(r, k, (int)rk->pid, st);
            }
            continue;
        }
        if (!rk->routable || rk->pid <= 0) continue;
        int code = -1;
        char st = 0;
        int64_t pp = stat_fields(rk->pid, &code, &st);
        if (pp >= 0 && st != 'Z' && st != 'X') continue;
        /* gone: a zombie's status (a signal's at once: no bye is on its way), else a failure without one */
        if (pp >= 0 && code >= 0 && WIFSIGNALED(code)) {
            rk->ext_ended = true;
            run_rank_ended(r, k, (int)rk->pid, code);
            continue;
        }
        gone(r, k, pp >= 0 && code >= 0 ? code : 1 << 8);
    }
}

void run_follow_restarted(Run *r)
{
    if (!r->follow.on) return;
    r->follow.pid = launcher_pid(r->l, 0);
    r->follow.exited = false;
    r->follow.status = 0;
}
