/* run.c — the frontend's loop for one job. See run.h.
 *
 * Shutdown is a ladder with deadlines: a stop command (ranks agree on the
 * step, checkpoint, barrier, destroy, bye) -> after stop_grace_s SIGTERM ->
 * 5 s later SIGKILL. A second Ctrl-C jumps a rung. The job model records
 * which rung ended each rank. `a` (abort) skips the clean stop: SIGTERM at
 * once, SIGKILL 5 s later.
 *
 * A rank that fails outside a requested stop ends the job for all
 * (torchrun's rule); with --max-restarts K, once every rank is reaped, all
 * of them start again (a new job id, a fresh store), resuming from
 * CKPT_DIR/latest when there is one, up to K times.
 *
 * ddptop's heartbeat: a "ping" command to every rank once a second, so a
 * worker notices a frontend that vanished (kill -9) even where
 * PR_SET_PDEATHSIG did not fire. The f menu sends "fault" commands whose
 * arg is fault_pack()'s (transport/wire/fault.h).
 *
 * Commands (ckpt, stop, pause, resume) go to every rank whose hello has
 * arrived, and to late ones when theirs does; each op has its own id
 * sequence. Frames are capped at one per FRAME_MS (bench.h measures what
 * that costs and how late a step reaches the screen).
 */
#include "run/run_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <locale.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "run/bench.h"
#include "wire/fault.h"
#include "model/job.h"
#include "run/hangwatch.h"
#include "net/curve.h"
#include "launch/launcher.h"
#include "cluster/nodes.h"
#include "net/publish.h"
#include "record/record.h"
#include "run/store.h"
#include "view/view.h"
#include "attach/server.h"
#include "net/zsock.h"
#include "base/signals.h"

/* ddptop's heartbeat: one ping per rank this often. */
#define PING_MS 1000
/* At most ~15 frames a second: smooth for a monitor, and with the pacing
 * below a step is on screen well within 100 ms of its arrival. */
#define FRAME_MS 66
/* Exits are collected this often (a waitpid per rank each time). */
#define REAP_MS 50
/* A rank that exited 0 before its bye was read: its last messages may
 * still be on their way through the socket. Judged this much later. */
#define BYE_GRACE_MS 500
/* A loop turn takes at least this long while only telemetry flows, so a
 * busy job is read in batches (64 ranks x 100 steps/s: ~250 messages a
 * turn) instead of a wake-up, a poll and a pipe re-activation inside
 * ZeroMQ per message: at that load it cuts ddptop's CPU by ~40% (make
 * bench-tui). Store and command traffic (ctl) is never paced: rendezvous
 * waits on it. */
#define LOOP_MIN_MS 20


/* Run (the loop's state) is in run_priv.h; setting up and tearing down
 * the sockets and the job are in run_setup.c. */

/* Ranks still running: this node's children, the agents' ranks, or (listen)
 * ranks that said hello and have not ended. */
static int procs_running(const Run *r)
{
    int n = launcher_running(r->l) + (r->nodes ? nodes_running(r->nodes) : 0);
    if (r->external && r->job)
        for (int k = 0; k < r->job->world; k++) n += r->routable[k] && !r->ext_ended[k];
    return n;
}

/* ---- commands ---- */

static void send_cmd(Run *r, int rank, const char *op, int64_t id, int64_t arg)
{
    Msg m;
    char ident[32], err[160];
    msg_init(&m, MSG_CMD);
    m.u.cmd.id = id;
    m.u.cmd.arg = arg;
    snprintf(m.u.cmd.op, sizeof m.u.cmd.op, "%s", op);
    m.t_ns = proto_now_ns();
    int n = snprintf(ident, sizeof ident, "rank-%d", rank);
    if (zs_send_to(r->ctl, ident, (size_t)n, &m, &r->buf, ZMQ_DONTWAIT, err, sizeof err) == 0 && r->rec)
        recorder_write(r->rec, REC_SRC_SENT, r->buf.data, r->buf.len, mono_ns(), 0, err, sizeof err);
}

/* Bring every routable rank up to date with the commands issued so far. */
static void flush_cmds(Run *r)
{
    for (int k = 0; k < r->job->world; k++) {
        if (!r->routable[k]) continue;
        if (r->sent_ckpt[k] < r->ckpt_id) {
            send_cmd(r, k, "ckpt", r->ckpt_id, 0);
            r->sent_ckpt[k] = r->ckpt_id;
        }
        /* pause n always precedes resume n: a late rank gets both, in order */
        if (r->sent_pause[k] < r->pause_id) {
            send_cmd(r, k, "pause", r->pause_id, 0);
            r->sent_pause[k] = r->pause_id;
        }
        if (r->sent_resume[k] < r->resume_id) {
            send_cmd(r, k, "resume", r->resume_id, 0);
            r->sent_resume[k] = r->resume_id;
        }
        if (r->stop_requested && !r->sent_stop[k]) {
            send_cmd(r, k, "stop", 1, 0);
            r->sent_stop[k] = true;
        }
    }
}

/* p: pause every rank at one agreed step, or resume them. The outcome
 * ("paused: all 4 ranks at step 1200") comes from the ranks' phases. */
static void request_pause(Run *r)
{
    if (r->stop_requested) {
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_WARN, "%s not requested: the job is stopping", r->pause_wanted ? "resume" : "pause");
        return;
    }
    if (procs_running(r) == 0) {
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_WARN, "nothing to pause: every rank has ended");
        return;
    }
    if (!r->pause_wanted) {
        r->pause_id++;
        r->pause_wanted = true;
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_INFO, "pause requested (p): the ranks agree on a step, then wait; p resumes");
    } else {
        r->resume_id++;
        r->pause_wanted = false;
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_INFO, "resume requested (p)");
    }
    job_set_pause_wanted(r->job, r->pause_wanted);
    flush_cmds(r);
}

static void request_stop(Run *r, const char *why)
{
    if (r->stop_requested) return;
    r->stop_requested = true;
    r->stop_at_ms = mono_ms();
    job_set_stopping(r->job);
    job_event(r->job, mono_ns(), wall_ns(), -1, EV_INFO, "%s: asking every rank to stop at the same step", why);
    snprintf(r->status, sizeof r->status, "stopping: ranks agree on the last step, then checkpoint, barrier, destroy");
    flush_cmds(r);
}

static void request_ckpt(Run *r)
{
    if (r->stop_requested) {
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_WARN, "checkpoint not requested: the job is stopping (a final checkpoint is written)");
        return;
    }
    r->ckpt_id++;
    job_event(r->job, mono_ns(), wall_ns(), -1, EV_INFO, "checkpoint requested: every rank will agree on the step");
    flush_cmds(r);
}

/* The next rung of the ladder, for ranks still running. */
static void escalate(Run *r, const char *why)
{
    if (procs_running(r) == 0) return;
    if (r->rung == 0) {
        r->rung = 1;
        int n = launcher_signal_all(r->l, SIGTERM) + (r->nodes ? nodes_signal(r->nodes, SIGTERM) : 0);
        if (r->external)
            job_event(r->job, mono_ns(), wall_ns(), -1, EV_WARN, "%s: ranks ddptop did not start cannot be signalled; they exit %d s after "
                      "ddptop stops pinging them", why, 15);
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_WARN, "%s: sent SIGTERM to %d rank%s", why, n, n == 1 ? "" : "s");
    } else if (r->rung == 1) {
        r->rung = 2;
        int n = launcher_signal_all(r->l, SIGKILL) + (r->nodes ? nodes_signal(r->nodes, SIGKILL) : 0);
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_ERROR, "%s: sent SIGKILL to %d rank%s", why, n, n == 1 ? "" : "s");
    }
    r->stop_at_ms = mono_ms();
}

/* a: no clean stop; the ladder's later rungs, starting now. A second a
 * jumps to SIGKILL. */
static void request_abort(Run *r)
{
    if (procs_running(r) == 0) {
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
        r->stop_requested = true;    /* no stop command: the ranks are signalled */
        for (int k = 0; k < r->job->world; k++) r->sent_stop[k] = true;
        job_set_stopping(r->job);
    }
    if (r->rung == 0) escalate(r, "abort requested (a): no clean stop");
    else escalate(r, "abort requested (a)");
    snprintf(r->status, sizeof r->status, "aborting: SIGTERM sent, SIGKILL in %d s", LAUNCH_KILL_GRACE_MS / 1000);
}

/* ddptop's heartbeat: every rank that can be reached gets a ping a second. */
static void ping_ranks(Run *r)
{
    int64_t now = mono_ms();
    if (now - r->last_ping_ms < PING_MS) return;
    r->last_ping_ms = now;
    r->ping_id++;
    for (int k = 0; k < r->job->world; k++) {
        RankState st = r->job->ranks[k].state;
        if (r->routable[k] && st != RANK_EXITED_OK && st != RANK_FAILED) send_cmd(r, k, "ping", r->ping_id, 0);
    }
}

/* The f menu's choice as a fault.h Fault: step 0 is "at the next step". */
static Fault menu_fault(int pick, int rank)
{
    Fault f = {.kind = FAULT_NONE, .rank = -1, .step = 0, .ms = 0};
    switch (pick) {
    case UI_FAULT_KILL: f.kind = FAULT_KILL; f.rank = rank; break;
    case UI_FAULT_STALL: f.kind = FAULT_STALL; f.rank = rank; break;
    case UI_FAULT_SLOW: f.kind = FAULT_SLOW; f.rank = rank; f.ms = UI_FAULT_SLOW_MS; break;
    case UI_FAULT_SKIP_SET_EPOCH: f.kind = FAULT_SKIP_SET_EPOCH; break;
    case UI_FAULT_UNSAFE_STOP: f.kind = FAULT_UNSAFE_STOP; break;
    case UI_FAULT_NO_BARRIER: f.kind = FAULT_NO_BARRIER; break;
    default: break;
    }
    return f;
}

/* fault_explain's sentence, for a fault sent live ("at step 0" there
 * means at the rank's next step). */
static void explain_live(const Fault *f, char *out, size_t len)
{
    char buf[320];
    fault_explain(f, buf, sizeof buf);
    const char *s = strncmp(buf, "fault: ", 7) ? buf : buf + 7;
    const char *at = strstr(s, " at step 0 ");
    if (at) snprintf(out, len, "%.*s at its next step %s", (int)(at - s), s, at + 11);
    else snprintf(out, len, "%s", s);
}

static void request_fault(Run *r, int pick, int rank)
{
    Fault f = menu_fault(pick, rank);
    if (f.kind == FAULT_NONE) return;
    if (procs_running(r) == 0) {
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_WARN, "fault not injected: every rank has ended");
        return;
    }
    if (f.rank >= 0 && (f.rank >= r->job->world || !r->routable[f.rank])) {
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_WARN, "fault not injected: rank %d cannot be reached (no hello yet, or ended)", f.rank);
        return;
    }
    r->fault_id++;
    int64_t arg = fault_pack(&f);
    int sent = 0;
    for (int k = 0; k < r->job->world; k++) {
        if (!r->routable[k] || (f.rank >= 0 && k != f.rank)) continue;
        send_cmd(r, k, "fault", r->fault_id, arg);
        sent++;
    }
    char why[400];
    explain_live(&f, why, sizeof why);
    job_event(r->job, mono_ns(), wall_ns(), f.rank, EV_WARN, "fault requested (f, %d rank%s): %s", sent, sent == 1 ? "" : "s", why);
}

/* A local rank's last log lines, into the events (other nodes' agents send
 * theirs as "log" messages). */
static void tail_log(Run *r, int rank)
{
    char lines[3][256];
    int n = launcher_log_tail(r->l, rank, lines, 3);
    for (int i = 0; i < n; i++) job_event(r->job, mono_ns(), wall_ns(), rank, EV_ERROR, "log: %s", lines[i]);
}

static void rank_ended(Run *r, int rank, int pid, int status);

/* The process is gone, but an exit 0 is judged only with its bye, which may
 * still be in the socket: hold it (BYE_GRACE_MS) and look again each turn. */
static void on_exit_cb(void *ctx, int rank, int pid, int status)
{
    Run *r = ctx;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && !r->job->ranks[rank].bye) {
        r->exit_at[rank] = mono_ms();
        r->exit_pid[rank] = pid;
        r->exit_status[rank] = status;
        return;
    }
    rank_ended(r, rank, pid, status);
}

/* Exits held for their bye: the bye came, or the grace is over. Returns how
 * many are still held. */
static int held_exits(Run *r, bool all_now)
{
    int held = 0;
    for (int k = 0; k < r->job->world; k++) {
        if (!r->exit_at[k]) continue;
        if (r->job->ranks[k].bye || all_now || mono_ms() - r->exit_at[k] >= BYE_GRACE_MS) {
            r->exit_at[k] = 0;
            rank_ended(r, k, r->exit_pid[k], r->exit_status[k]);
        } else {
            held++;
        }
    }
    return held;
}

static void rank_ended(Run *r, int rank, int pid, int status)
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
    if (jr->state == RANK_FAILED) {
        tail_log(r, rank);
        /* --max-restarts: a failure outside a requested stop restarts the
         * job once every rank is reaped */
        if (!r->stop_requested && !r->restart_pending && r->job->restarts < r->o->max_restarts) {
            r->restart_pending = true;
            job_event(r->job, mono_ns(), wall_ns(), rank, EV_WARN, "rank %d %s: every rank will be started again (restart %d/%d)", rank,
                      jr->how_ended, r->job->restarts + 1, r->o->max_restarts);
        }
        /* torchrun's rule: one rank failing ends the job for all. */
        if (procs_running(r) > 0 && !r->stop_requested) {
            char why[128];
            snprintf(why, sizeof why, "rank %d %s", rank, jr->how_ended);
            request_stop(r, why);
        }
    }
}

/* ---- the agents of other nodes (nodes.h) ---- */

static void node_started(void *ctx, int rank, int pid, const char *host)
{
    Run *r = ctx;
    (void)host;
    job_rank_started(r->job, rank, pid, mono_ns());
    if (r->rec) {
        char err[256];
        recorder_write_start(r->rec, rank, pid, mono_ns(), 0, err, sizeof err);
    }
}

static void node_log(void *ctx, int rank, const char *line)
{
    job_event(((Run *)ctx)->job, mono_ns(), wall_ns(), rank, EV_ERROR, "log: %s", line);
}

static void node_stop(void *ctx, int node, const char *why)
{
    Run *r = ctx;
    r->restart_pending = false;
    char w[200];
    snprintf(w, sizeof w, "node %d: %s", node, why[0] ? why : "stop requested");
    request_stop(r, w);
}

static void node_event(void *ctx, int level, const char *text)
{
    Run *r = ctx;
    job_event(r->job, mono_ns(), wall_ns(), -1, level == 0 ? EV_INFO : level == 1 ? EV_WARN : EV_ERROR, "%s", text);
    if (!r->tui && level == 2) fprintf(stderr, "ddptop: %s\n", text);
}

static NodeEvents node_events(Run *r)
{
    return (NodeEvents){.ctx = r, .started = node_started, .exited = on_exit_cb, .log = node_log,
                        .stop = node_stop, .event = node_event};
}

/* A command from an attached viewer (--control) acts like the key. */
static void viewer_cmd(Run *r, const void *ident, size_t ident_len, const Msg *m)
{
    char who[96] = "viewer";
    int before = viewers_count(r->viewers);
    ViewerAction a = viewers_handle(r->viewers, r->ctl, ident, ident_len, m, mono_ms(), who, sizeof who);
    int after = viewers_count(r->viewers);
    if (after != before)
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_INFO, "%s %s (%d attached)", who, after > before ? "attached" : "detached", after);
    char why[160];
    switch (a) {
    case VIEWER_CKPT: job_event(r->job, mono_ns(), wall_ns(), -1, EV_INFO, "%s asked for a checkpoint", who); request_ckpt(r); break;
    case VIEWER_STOP:
        snprintf(why, sizeof why, "destroy requested by %s", who);
        r->restart_pending = false;
        request_stop(r, why);
        break;
    case VIEWER_PAUSE: job_event(r->job, mono_ns(), wall_ns(), -1, EV_INFO, "%s toggled pause", who); request_pause(r); break;
    case VIEWER_ABORT: job_event(r->job, mono_ns(), wall_ns(), -1, EV_WARN, "%s asked to abort", who); request_abort(r); break;
    default: break;
    }
}

static void handle_msg(Run *r, const void *ident, size_t ident_len, Msg *m)
{
    int node;
    if (ident && r->nodes && nodes_ident(ident, ident_len, &node)) {
        NodeEvents ev = node_events(r);
        nodes_handle(r->nodes, ident, ident_len, m, mono_ms(), &ev);
        return;
    }
    if (ident && viewers_is_viewer_ident(ident, ident_len)) {
        if (m->kind == MSG_CMD) viewer_cmd(r, ident, ident_len, m);
        return;
    }
    if (m->kind == MSG_SET || m->kind == MSG_GET || m->kind == MSG_WAIT) {
        if (ident) store_handle(r->store, r->ctl, ident, ident_len, m, mono_ms(), &r->buf);
        return;
    }
    if (m->kind == MSG_NODE || m->kind == MSG_CMD) return;   /* not a rank's */
    int64_t now = mono_ns();
    if (r->external && m->rank >= 0 && m->rank < r->job->world) {
        r->heard_ms[m->rank] = mono_ms();
        if (m->kind == MSG_BYE && !r->ext_ended[m->rank]) {
            job_apply(r->job, m, now, wall_ns());
            r->ext_ended[m->rank] = true;
            rank_ended(r, m->rank, (int)r->job->ranks[m->rank].pid, (m->u.bye.status & 0xff) << 8);
            return;
        }
    }
    job_apply(r->job, m, now, wall_ns());
    bench_on_msg(r->bench, m, now);
    if (m->kind == MSG_HELLO && m->rank >= 0 && m->rank < r->job->world && ident) {
        r->routable[m->rank] = true;
        flush_cmds(r);
    }
}

/* Every frame as received goes to the recording and the PUB socket,
 * before it is decoded (so malformed frames are kept for a post-mortem). */
typedef struct {
    Run *r;
    RecSource src;
    const char *ident;        /* ctl: the sender's routing id, set before the tap runs */
    const size_t *ident_len;
} Tap;

static void tap_frame(void *ctx, const void *frame, size_t len, const Msg *m, int rc)
{
    Tap *t = ctx;
    char err[512];
    /* only the ranks' own frames: not agents' or viewers' */
    if (t->ident && (*t->ident_len < 5 || memcmp(t->ident, "rank-", 5))) return;
    if (t->r->viewers) viewers_on_decoded(t->r->viewers, t->r->ctl, frame, len, m, rc);
    if (t->r->rec && recorder_write(t->r->rec, t->src, frame, len, mono_ns(), 0, err, sizeof err))
        job_event(t->r->job, mono_ns(), wall_ns(), -1, EV_WARN, "%s", err);
    if (t->r->pub) publisher_send(t->r->pub, frame, len);
}

/* Read whatever is waiting on both sockets (bounded, so keys stay
 * responsive). Returns how many ctl messages came. */
static int drain(Run *r)
{
    int n_ctl = 0;
    char err[256];
    char ident[ZS_IDENT_MAX];
    size_t ident_len = 0;
    Tap tel_tap = {r, REC_SRC_TEL, NULL, NULL}, ctl_tap = {r, REC_SRC_CTL, ident, &ident_len};
    ZsTap tap = (r->rec || r->pub || r->viewers) ? tap_frame : NULL;
    for (int i = 0; i < 4096; i++) {
        Msg m;
        int rc = zs_recv_tap(r->tel, &m, ZMQ_DONTWAIT, tap, &tel_tap, err, sizeof err);
        if (rc == 1 || rc < 0) break;
        if (rc == 2) { r->job->bad_frames++; r->job->version++; continue; }
        handle_msg(r, NULL, 0, &m);
        msg_done(&m);
    }
    for (int i = 0; i < 1024; i++) {
        Msg m;
        int rc = zs_recv_from_tap(r->ctl, ident, &ident_len, &m, ZMQ_DONTWAIT, tap, &ctl_tap, err, sizeof err);
        if (rc == 1 || rc < 0) break;
        int node;
        if (rc == 2 && r->nodes && ident_len && nodes_ident(ident, ident_len, &node)) {
            NodeEvents ev = node_events(r);
            nodes_refuse_frame(r->nodes, ident, ident_len, err, &ev);
            continue;
        }
        if (rc == 2) { r->job->bad_frames++; r->job->version++; continue; }
        handle_msg(r, ident, ident_len, &m);
        msg_done(&m);
        n_ctl++;
    }
    return n_ctl;
}

/* The trainer's --ckpt-dir (its default when not given). */
static const char *ckpt_dir(const RunOptions *o)
{
    const char *d = "./checkpoints";
    for (int i = 0; i + 1 < o->n_trainer_args; i++)
        if (!strcmp(o->trainer_args[i], "--ckpt-dir")) d = o->trainer_args[i + 1];
    return d;
}

/* Launch every rank (restart 0: the first time). The rows, events and
 * charts stay; a restart gets a new job id (the store's keys start over)
 * and, when CKPT_DIR/latest exists, --resume it. */
static int launch(Run *r, int restart, char *err, size_t errlen)
{
    const RunOptions *o = r->o;
    snprintf(r->job_id, sizeof r->job_id, "ddptop-%d-%" PRId64, (int)getpid(), proto_now_ns());
    static char master[256];
    int master_port = 29500;
    snprintf(master, sizeof master, "127.0.0.1");
    if (o->nnodes > 1) {
        char ep[300];
        snprintf(ep, sizeof ep, "tcp://%s", o->rdzv);
        keys_tcp_split(ep, master, sizeof master, &master_port);
    }
    r->lc = (LaunchConfig){.world = o->nproc, .rank_offset = 0, .global_world = r->job->world,
                           .worker_path = o->worker_path, .worker_args = o->trainer_args,
                           .n_worker_args = o->n_trainer_args, .ctl_ep = r->ctl_ep, .tel_ep = r->tel_ep,
                           .job_id = r->job_id, .master_addr = master, .master_port = master_port,
                           .log_dir = o->log_dir ? o->log_dir : r->dir, .device = o->device,
                           .backend = o->backend, .restart = restart,
                           .keys_path = r->tcp ? r->keys_file : NULL};
    char extra[PROTO_STR_LONG] = "";
    if (restart > 0) {
        const char *dir = ckpt_dir(o);
        char link[600], target[256];
        snprintf(link, sizeof link, "%s/latest", dir);
        struct stat st;
        if (stat(link, &st) == 0) {
            if (!r->restart_args) r->restart_args = calloc((size_t)o->n_trainer_args + 3, sizeof *r->restart_args);
            if (!r->restart_args) { snprintf(err, errlen, "out of memory"); return -1; }
            snprintf(r->resume_path, sizeof r->resume_path, "%s", link);
            int na = launcher_resume_args(o->trainer_args, o->n_trainer_args, r->resume_path, r->restart_args);
            r->lc.worker_args = r->restart_args;
            r->lc.n_worker_args = na;
            snprintf(extra, sizeof extra, "--resume %.400s", link);
            ssize_t n = readlink(link, target, sizeof target - 1);
            target[n > 0 ? n : 0] = '\0';
            const char *base = strrchr(target, '/') ? strrchr(target, '/') + 1 : target;
            long long step = -1;
            if (sscanf(base, "step-%lld", &step) == 1)
                job_event(r->job, mono_ns(), wall_ns(), -1, EV_WARN, "restart %d/%d: resuming from step %lld (%s)", restart, o->max_restarts,
                          step, link);
            else
                job_event(r->job, mono_ns(), wall_ns(), -1, EV_WARN, "restart %d/%d: resuming from %s", restart, o->max_restarts, link);
        } else {
            job_event(r->job, mono_ns(), wall_ns(), -1, EV_WARN, "restart %d/%d: no checkpoint in %s, starting from step 0", restart,
                      o->max_restarts, dir);
        }
    }
    if (launcher_start(&r->l, &r->lc, err, errlen)) return -1;
    if (r->nodes) nodes_launch(r->nodes, r->job_id, restart, extra);
    r->launched = true;
    for (int k = 0; k < o->nproc; k++) {
        job_rank_started(r->job, k, launcher_pid(r->l, k), mono_ns());
        if (r->rec) recorder_write_start(r->rec, k, launcher_pid(r->l, k), mono_ns(), 0, err, errlen);
    }
    err[0] = '\0';
    return 0;
}

/* --max-restarts: every rank is reaped; start them all again. */
static int restart_job(Run *r, char *err, size_t errlen)
{
    int w = r->job->world;
    launcher_free(&r->l);
    store_free(&r->store);
    hangwatch_done(&r->hw);
    if (!(r->store = store_new()) || hangwatch_init(&r->hw, w, r->o->hang_after_s > 0 ? r->o->hang_after_s : 10.0)) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    /* commands issued so far are history: the new ranks start clean */
    r->resume_id = r->pause_id;
    r->pause_wanted = false;
    for (int k = 0; k < w; k++) {
        r->routable[k] = false;
        r->sent_ckpt[k] = r->ckpt_id;
        r->sent_pause[k] = r->pause_id;
        r->sent_resume[k] = r->resume_id;
        r->sent_stop[k] = false;
        r->exit_at[k] = 0;
    }
    r->stop_requested = false;
    r->rung = 0;
    r->restart_pending = false;
    r->status[0] = '\0';
    job_restart(r->job, mono_ns());
    if (launch(r, r->job->restarts, err, errlen)) return -1;
    snprintf(r->status, sizeof r->status, "restart %d/%d", r->job->restarts, r->o->max_restarts);
    return 0;
}

int run_job(const RunOptions *o)
{
    Run run;
    memset(&run, 0, sizeof run);
    Run *r = &run;
    r->o = o;
    codec_buf_init(&r->buf);
    char err[512];
    int status = 1;

    signals_catch_stop(1);

    if (run_setup_sockets(r, err, sizeof err)) {
        fprintf(stderr, "ddptop: %s\n", err);
        run_teardown(r);
        return err[0] && (strstr(err, "cannot bind") || strstr(err, "--rdzv") || strstr(err, "listen ") || strstr(err, "key file")) ? 2 : 1;
    }
    if (r->tcp)
        fprintf(stderr, "ddptop: %s on %s (CURVE; key file %s)\n", o->listen_ep ? "listening" : "rendezvous",
                o->listen_ep ? o->listen_ep : o->rdzv, r->keys_file);

    int world = o->nnodes > 1 ? o->nnodes * o->nproc : o->nproc;
    Msg first;
    char first_ident[ZS_IDENT_MAX];
    size_t first_len = 0;
    CodecBuf first_frame;
    codec_buf_init(&first_frame);
    if (o->listen_ep) {
        r->external = true;
        r->store = store_new();
        int w = run_listen_first_hello(r, &first, first_ident, &first_len, &first_frame, signals_stop_counter());
        if (w <= 0) {
            codec_buf_done(&first_frame);
            run_teardown(r);
            return w == 0 ? 0 : 1;
        }
        world = w;
    }
    if (run_setup_job(r, world, err, sizeof err)) {
        fprintf(stderr, "ddptop: %s\n", err);
        codec_buf_done(&first_frame);
        run_teardown(r);
        return 1;
    }

    r->job->max_restarts = o->max_restarts;
    if (!o->headless) {
        if (view_tui_open(&r->tui, world, err, sizeof err)) {
            fprintf(stderr, "ddptop: %s (use --headless)\n", err);
            codec_buf_done(&first_frame);
            run_teardown(r);
            return 2;
        }
    } else {
        view_headless_init(&r->hl, stdout, o->json);
    }
    {
        const char *shown = o->listen_ep ? o->listen_ep : r->ctl_ep;
        char rdzv_ep[300];
        if (o->nnodes > 1) { snprintf(rdzv_ep, sizeof rdzv_ep, "tcp://%s", o->rdzv); shown = rdzv_ep; }
        if (r->tcp) job_event(r->job, mono_ns(), wall_ns(), -1, EV_INFO, "attach: ddptop attach %s --keys %s", shown, r->keys_file);
        else job_event(r->job, mono_ns(), wall_ns(), -1, EV_INFO, "attach: ddptop attach %s", shown);
    }

    if (o->listen_ep) {
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_INFO, "listening on %s: %d rank%s expected; workers connect with DDPTOP_CONNECT=%s%s%s",
                  o->listen_ep, world, world == 1 ? "" : "s", o->listen_ep, r->tcp ? " DDPTOP_KEYS=" : "",
                  r->tcp ? r->keys_file : "");
        Tap t = {r, REC_SRC_CTL, first_ident, &first_len};
        tap_frame(&t, first_frame.data, first_frame.len, &first, 0);
        handle_msg(r, first_ident, first_len, &first);
        msg_done(&first);
    } else if (r->nodes) {
        r->rdzv_start_ms = mono_ms();
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_INFO, "rendezvous on %s: waiting for %d more node%s (--keys %s)", o->rdzv,
                  o->nnodes - 1, o->nnodes == 2 ? "" : "s", r->keys_file);
        snprintf(r->status, sizeof r->status, "rendezvous: waiting for nodes to join on %s", o->rdzv);
    } else {
        if (launch(r, 0, err, sizeof err)) {
            view_tui_close(&r->tui);
            fprintf(stderr, "ddptop: %s\n", err);
            codec_buf_done(&first_frame);
            run_teardown(r);
            return 1;
        }
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_INFO, "launched %d rank%s (logs in %s)", o->nproc, o->nproc == 1 ? "" : "s",
                  r->lc.log_dir);
    }
    codec_buf_done(&first_frame);
    bool rdzv_failed = false;

    uint64_t drawn_version = (uint64_t)-1;
    int64_t last_draw = 0, last_reap = 0;
    bool leave = false;
    while (!leave) {
        int64_t turn_start = mono_ms();
        /* Wake for the next frame slot when something changed, so a step
         * reaches the screen within FRAME_MS of its arrival. */
        long timeout = FRAME_MS;
        if (r->tui && r->job->version != drawn_version) {
            int64_t until = last_draw + FRAME_MS - mono_ms();
            timeout = until < 0 ? 0 : until > FRAME_MS ? FRAME_MS : (long)until;
        }
        zmq_pollitem_t items[3] = {
            {r->tel, 0, ZMQ_POLLIN, 0},
            {r->ctl, 0, ZMQ_POLLIN, 0},
            {NULL, 0, ZMQ_POLLIN, 0},
        };
        int nitems = 2;
        if (r->tui) nitems = 3;
        if (zmq_poll(items, nitems, timeout) < 0 && errno != EINTR) {
            job_event(r->job, mono_ns(), wall_ns(), -1, EV_ERROR, "poll: %s", zmq_strerror(errno));
        }
        int n_ctl = drain(r);
        store_tick(r->store, r->ctl, mono_ms(), &r->buf);
        if (r->rec && recorder_tick(r->rec, mono_ns(), err, sizeof err)) job_event(r->job, mono_ns(), wall_ns(), -1, EV_WARN, "%s", err);
        if (mono_ms() - last_reap >= REAP_MS) {
            launcher_reap(r->l, on_exit_cb, r);
            last_reap = mono_ms();
        }
        int held = held_exits(r, false);

        /* Signals: first a clean stop, then each one a rung up the ladder. */
        while (r->handled_signals < signals_stop_count()) {
            r->handled_signals++;
            r->restart_pending = false;
            if (!r->stop_requested) { request_stop(r, "signal received"); r->quit_after = true; }
            else { r->quit_after = true; escalate(r, "signal received again"); }
        }

        if (r->tui) {
            ViewAction a;
            /* q asks first only while a stop is not already on its way */
            bool running = procs_running(r) > 0 && !r->stop_requested;
            while ((a = view_tui_poll_key(r->tui, r->job, running)) != VIEW_ACT_NONE) {
                if (a == VIEW_ACT_CKPT) request_ckpt(r);
                else if (a == VIEW_ACT_DESTROY) { r->restart_pending = false; request_stop(r, "destroy requested (d)"); }
                else if (a == VIEW_ACT_PAUSE) request_pause(r);
                else if (a == VIEW_ACT_ABORT) request_abort(r);
                else if (a == VIEW_ACT_FAULT) {
                    int rank = 0, pick = view_tui_fault_pick(r->tui, &rank);
                    request_fault(r, pick, rank);
                } else if (a == VIEW_ACT_QUIT) {
                    r->restart_pending = false;
                    r->quit_after = true;
                    if (procs_running(r) > 0) request_stop(r, "quit requested (q)");
                } else if (a == VIEW_ACT_REDRAW) drawn_version = (uint64_t)-1;
            }
        }

        ping_ranks(r);
        {
            int before = viewers_count(r->viewers), after = viewers_tick(r->viewers, mono_ms());
            if (after < before)
                job_event(r->job, mono_ns(), wall_ns(), -1, EV_INFO, "%d viewer%s went silent and %s forgotten (%d attached)", before - after,
                          before - after == 1 ? "" : "s", before - after == 1 ? "was" : "were", after);
        }
        if (r->nodes && r->launched) {
            NodeEvents ev = node_events(r);
            nodes_tick(r->nodes, mono_ms(), &ev);
        }
        /* Multi-node: start the ranks once every node joined. */
        if (r->nodes && !r->launched && !rdzv_failed) {
            if (nodes_all_joined(r->nodes)) {
                if (launch(r, 0, err, sizeof err)) {
                    job_event(r->job, mono_ns(), wall_ns(), -1, EV_ERROR, "launch failed: %s", err);
                    nodes_done(r->nodes, err);
                    rdzv_failed = true;
                    r->quit_after = true;
                } else {
                    job_event(r->job, mono_ns(), wall_ns(), -1, EV_INFO, "every node joined: launched %d ranks on %d nodes", r->job->world,
                              o->nnodes);
                    r->status[0] = 0;
                }
            } else if (r->handled_signals || mono_ms() - r->rdzv_start_ms > (int64_t)(o->rdzv_timeout_s * 1000)) {
                char missing[200], why[700];
                nodes_missing(r->nodes, missing, sizeof missing);
                if (r->handled_signals) snprintf(why, sizeof why, "rendezvous interrupted: node%s %s had not joined",
                                                 strchr(missing, ',') ? "s" : "", missing);
                else snprintf(why, sizeof why, "rendezvous did not complete within %g s: node%s %s of %d never joined "
                              "(ddptop run --nnodes %d --node-rank K --rdzv %.60s --keys %.120s on those hosts)",
                              o->rdzv_timeout_s, strchr(missing, ',') ? "s" : "", missing, o->nnodes, o->nnodes,
                              o->rdzv, r->keys_file);
                job_event(r->job, mono_ns(), wall_ns(), -1, EV_ERROR, "%s", why);
                if (!r->tui) fprintf(stderr, "ddptop: %s\n", why);
                snprintf(r->status, sizeof r->status, "%.250s", why);
                nodes_done(r->nodes, why);
                rdzv_failed = true;
                r->quit_after = true;
            }
        }
        /* listen: a rank silent this long is taken for gone. */
        if (r->external) {
            for (int k = 0; k < r->job->world; k++) {
                if (!r->routable[k] || r->ext_ended[k] || mono_ms() - r->heard_ms[k] < 20000) continue;
                r->ext_ended[k] = true;
                job_event(r->job, mono_ns(), wall_ns(), k, EV_ERROR, "rank %d has been silent for 20 s: taken for gone", k);
                rank_ended(r, k, (int)r->job->ranks[k].pid, 0xff00);
            }
        }
        bool starting = (r->nodes && !r->launched && !rdzv_failed);

        /* Deadlines of the ladder. */
        int running = procs_running(r);
        if (r->stop_requested && running > 0) {
            int64_t waited = mono_ms() - r->stop_at_ms;
            if (r->rung == 0 && waited > (int64_t)(o->stop_grace_s * 1000))
                escalate(r, "ranks did not finish the clean stop in time");
            else if (r->rung == 1 && waited > LAUNCH_KILL_GRACE_MS)
                escalate(r, "ranks ignored SIGTERM");
        }

        /* Who waits for whom: one verdict per hang, in the events and as
         * {"k":"hang",...} for scripts. */
        if (running > 0 && hangwatch_tick(&r->hw, r->job, r->l, mono_ns(), proto_now_ns())) {
            job_event(r->job, mono_ns(), wall_ns(), -1, EV_ERROR, "hang: %s", r->hw.last.verdict);
            if (!r->tui) view_headless_hang(&r->hl, r->job, &r->hw.last, mono_ns());
            snprintf(r->status, sizeof r->status, "hang: %.200s", r->hw.last.verdict);
        }

        if (running == 0 && held == 0 && r->restart_pending) {
            if (restart_job(r, err, sizeof err)) {
                job_event(r->job, mono_ns(), wall_ns(), -1, EV_ERROR, "restart failed: %s", err);
                r->restart_pending = false;
            }
            running = procs_running(r);
        }
        if (running == 0 && held == 0 && !r->restart_pending && !starting) {
            if (r->nodes && r->launched) nodes_done(r->nodes, "the job ended");
            if (!r->status[0] || r->stop_requested)
                snprintf(r->status, sizeof r->status, "%s — press q to leave",
                         job_all_clean(r->job) ? "job done: every rank ended cleanly"
                                               : "job failed: see the events");
            if (o->headless || r->quit_after) leave = true;
        }

        int64_t now = mono_ms();
        if (r->tui) {
            if ((r->job->version != drawn_version && now - last_draw >= FRAME_MS) || now - last_draw >= 1000 || leave) {
                int64_t t0 = mono_ns();
                view_tui_draw(r->tui, r->job, t0, r->status);
                bench_on_frame(r->bench, t0, r->job);
                drawn_version = r->job->version;
                last_draw = now;
            }
        } else {
            view_headless_tick(&r->hl, r->job, mono_ns());
        }

        /* Pace the turns (LOOP_MIN_MS), never past the next frame slot. */
        if (!leave && n_ctl == 0) {
            int64_t left = turn_start + LOOP_MIN_MS - mono_ms();
            if (r->tui && r->job->version != drawn_version) {
                int64_t until = last_draw + FRAME_MS - mono_ms();
                if (until < left) left = until;
            }
            if (left > 0) {
                struct timespec ts = {0, (long)left * 1000000L};
                nanosleep(&ts, NULL);    /* a signal cuts it short: fine */
            }
        }
    }

    held_exits(r, true);
    if (r->nodes && !rdzv_failed) nodes_done(r->nodes, "the job ended");
    status = job_all_clean(r->job) && !r->aborted && !rdzv_failed ? 0 : 1;
    view_tui_close(&r->tui);
    bench_finish(r->bench, r->job);
    if (!o->headless) view_headless_init(&r->hl, stdout, false);
    if (rdzv_failed && !r->launched) printf("job not started: %s\n", r->status);
    else view_headless_summary(&r->hl, r->job, mono_ns());
    run_teardown(r);
    return status;
}
