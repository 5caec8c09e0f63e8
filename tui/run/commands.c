/* commands.c — what ddptop tells the ranks: ckpt, stop, pause, resume,
 * fault and ping commands on the ctl ROUTER. See internal.h.
 *
 * Commands (ckpt, stop, pause, resume) go to every rank whose hello has
 * arrived, and to late ones when theirs does; each op has its own id
 * sequence. ddptop's heartbeat is a "ping" to every rank once a second, so
 * a worker notices a frontend that vanished (kill -9) even where
 * PR_SET_PDEATHSIG did not fire. The f menu sends "fault" commands whose
 * arg is fault_pack()'s (transport/wire/fault.h). The w key's stack
 * signal goes to one rank's process (Python's faulthandler answers in the
 * rank's log, read back here); the "stacks" ask of stacks.c's gatherings
 * goes down ctl like any command. Signals and the ladder are exits.c's. Main
 * thread.
 */
#include "run/internal.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <zmq.h>

#include "base/clock.h"
#include "launch/procstat.h"
#include "model/pystack.h"
#include "view/ui.h"
#include "wire/fault.h"

/* ddptop's heartbeat: one ping per rank this often. */
#define PING_MS 1000

static void send_cmd(Run *r, int rank, const char *op, int64_t id, int64_t arg)
{
    Msg m;
    char ident[ZS_IDENT_MAX], err[160];
    msg_init(&m, MSG_CMD);
    m.u.cmd.id = id;
    m.u.cmd.arg = arg;
    snprintf(m.u.cmd.op, sizeof m.u.cmd.op, "%s", op);
    m.t_ns = proto_now_ns();
    /* to the routing id of the process whose hello was admitted (inbox.c) */
    const RunRank *rk = &r->rk[rank];
    size_t n = rk->ident_len;
    if (n)
        memcpy(ident, rk->ident, n);
    else
        n = (size_t)snprintf(ident, sizeof ident, "rank-%d", rank);
    if (zs_send_to(r->ctl, ident, n, &m, &r->buf, ZMQ_DONTWAIT, err, sizeof err) == 0 && r->rec)
        recorder_write(r->rec, REC_SRC_SENT, r->buf.data, r->buf.len, mono_ns(), 0, err, sizeof err);
}

void run_ask_stacks(Run *r, int rank, int64_t token) { send_cmd(r, rank, "stacks", token, token); }

void run_flush_cmds(Run *r)
{
    for (int k = 0; k < r->job->world; k++) {
        RunRank *rk = &r->rk[k];
        if (!rk->routable) continue;
        if (rk->sent_ckpt < r->ckpt_id) {
            send_cmd(r, k, "ckpt", r->ckpt_id, 0);
            rk->sent_ckpt = r->ckpt_id;
        }
        /* pause n always precedes resume n: a late rank gets both, in order */
        if (rk->sent_pause < r->pause_id) {
            send_cmd(r, k, "pause", r->pause_id, 0);
            rk->sent_pause = r->pause_id;
        }
        if (rk->sent_resume < r->resume_id) {
            send_cmd(r, k, "resume", r->resume_id, 0);
            rk->sent_resume = r->resume_id;
        }
        if (r->stop_requested && !rk->sent_stop) {
            send_cmd(r, k, "stop", 1, r->stop_arg);
            rk->sent_stop = true;
        }
    }
}

/* The outcome ("paused: all 4 ranks at step 1200") comes from the ranks'
 * phases. */
void run_request_pause(Run *r)
{
    if (r->stop_requested) {
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_WARN, "%s not requested: the job is stopping",
                  r->pause_wanted ? "resume" : "pause");
        return;
    }
    if (run_procs_running(r) == 0) {
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_WARN, "nothing to pause: every rank has ended");
        return;
    }
    if (!r->pause_wanted) {
        r->pause_id++;
        r->pause_wanted = true;
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_INFO,
                  "pause requested (p): the ranks agree on a step, then wait; p resumes");
    } else {
        r->resume_id++;
        r->pause_wanted = false;
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_INFO, "resume requested (p)");
    }
    job_set_pause_wanted(r->job, r->pause_wanted);
    run_flush_cmds(r);
}

void run_request_stop(Run *r, const char *why)
{
    if (r->stop_requested) return;
    r->stop_requested = true;
    r->stop_at_ms = mono_ms();
    job_set_stopping(r->job);
    job_event(r->job, mono_ns(), wall_ns(), -1, EV_INFO, "%s: asking every rank to stop at the same step", why);
    snprintf(r->status, sizeof r->status, "stopping: ranks agree on the last step, then checkpoint, barrier, destroy");
    run_flush_cmds(r);
}

void run_request_ckpt(Run *r)
{
    if (r->stop_requested) {
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_WARN,
                  "checkpoint not requested: the job is stopping (a final checkpoint is written)");
        return;
    }
    r->ckpt_id++;
    job_event(r->job, mono_ns(), wall_ns(), -1, EV_INFO, "checkpoint requested: every rank will agree on the step");
    run_flush_cmds(r);
}

/* A ping down the rank's telemetry stream: no ZeroMQ pipe holds it (a
 * ROUTER's pipe to each rank touches new memory over its first ~500
 * messages: +29 KB a rank, docs/BENCHMARKS.md). False when the rank has no
 * stream, it closed, or the rank does not read it (its buffer is full):
 * then ctl. */
static bool ping_stream(Run *r, int k, const CodecBuf *frame)
{
    RunRank *rk = &r->rk[k];
    if (!r->tss || !rk->stream_conn) return false;
    int rc = tss_send(r->tss, rk->stream_conn, frame->data, frame->len);
    if (rc < 0) rk->stream_conn = 0;
    if (rc) return false;
    char err[160];
    if (r->rec) recorder_write(r->rec, REC_SRC_SENT, frame->data, frame->len, mono_ns(), 0, err, sizeof err);
    return true;
}

void run_ping_ranks(Run *r)
{
    int64_t now = mono_ms();
    if (now - r->last_ping_ms < PING_MS) return;
    r->last_ping_ms = now;
    r->ping_id++;
    Msg ping;
    char err[160];
    CodecBuf frame;
    codec_buf_init(&frame);
    msg_init(&ping, MSG_CMD);
    ping.u.cmd.id = r->ping_id;
    snprintf(ping.u.cmd.op, sizeof ping.u.cmd.op, "ping");
    ping.t_ns = proto_now_ns();
    bool encoded = r->tss && codec_encode(&ping, &frame, err, sizeof err) == 0;
    for (int k = 0; k < r->job->world; k++) {
        RankState st = r->job->ranks[k].state;
        if (!r->rk[k].routable || st == RANK_EXITED_OK || st == RANK_FAILED) continue;
        if (!(encoded && ping_stream(r, k, &frame))) send_cmd(r, k, "ping", r->ping_id, 0);
    }
    codec_buf_done(&frame);
}

/* The f menu's choice as a fault.h Fault: step 0 is "at the next step". */
static Fault menu_fault(int pick, int rank)
{
    Fault f = { .kind = FAULT_NONE, .rank = -1, .step = 0, .ms = 0 };
    switch (pick) {
    case UI_FAULT_KILL:
        f.kind = FAULT_KILL;
        f.rank = rank;
        break;
    case UI_FAULT_STALL:
        f.kind = FAULT_STALL;
        f.rank = rank;
        break;
    case UI_FAULT_SLOW:
        f.kind = FAULT_SLOW;
        f.rank = rank;
        f.ms = UI_FAULT_SLOW_MS;
        break;
    case UI_FAULT_SKIP_SET_EPOCH: f.kind = FAULT_SKIP_SET_EPOCH; break;
    case UI_FAULT_UNSAFE_STOP:
        /* one rank alone: every rank's with step 0 would stop them all at
         * the step each hears of it, which can be the same one (no hang) */
        f.kind = FAULT_UNSAFE_STOP;
        f.rank = rank;
        break;
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
    if (at)
        snprintf(out, len, "%.*s at its next step %s", (int)(at - s), s, at + 11);
    else
        snprintf(out, len, "%s", s);
}

void run_request_fault(Run *r, int pick, int rank)
{
    Fault f = menu_fault(pick, rank);
    if (f.kind == FAULT_NONE) return;
    if (run_procs_running(r) == 0) {
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_WARN, "fault not injected: every rank has ended");
        return;
    }
    if (f.rank >= 0 && (f.rank >= r->job->world || !r->rk[f.rank].routable)) {
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_WARN,
                  "fault not injected: rank %d cannot be reached (no hello yet, or ended)", f.rank);
        return;
    }
    r->fault_id++;
    int64_t arg = fault_pack(&f);
    int sent = 0;
    for (int k = 0; k < r->job->world; k++) {
        if (!r->rk[k].routable || (f.rank >= 0 && k != f.rank)) continue;
        send_cmd(r, k, "fault", r->fault_id, arg);
        sent++;
    }
    char why[400];
    explain_live(&f, why, sizeof why);
    job_event(r->job, mono_ns(), wall_ns(), f.rank, EV_WARN, "fault requested (f, %d rank%s): %s", sent,
              sent == 1 ? "" : "s", why);
}

/* ---- w: a rank's Python stacks ---- */

/* The dump is read once the log has been quiet this long, or given up on;
 * what it writes later still reaches the open page for STACK_FOLLOW_MS. */
#define STACK_QUIET_MS  200
#define STACK_WAIT_MS   3000
#define STACK_FOLLOW_MS 10000
#define STACK_MAX       (1L << 20)

/* The adapter's signal (workers/python/ddptop/beat.py reads the same
 * variable, which the ranks inherit from ddptop). */
int run_stack_signal(const char **name)
{
    static const struct {
        const char *name;
        int sig;
    } sigs[] = { { "SIGUSR1", SIGUSR1 }, { "SIGUSR2", SIGUSR2 }, { "SIGQUIT", SIGQUIT }, { "SIGHUP", SIGHUP } };
    const char *want = getenv("DDPTOP_STACK_SIGNAL");
    for (size_t i = 0; want && i < sizeof sigs / sizeof sigs[0]; i++)
        if (!strcmp(want, sigs[i].name)) {
            *name = sigs[i].name;
            return sigs[i].sig;
        }
    *name = "SIGUSR1";
    return SIGUSR1;
}

int run_stack_ask(int pid)
{
    const char *name;
    int sig = run_stack_signal(&name);
    int catches = procstat_catches((pid_t)pid, sig);
    if (catches == 0) return RUN_STACK_NO_HANDLER;
    return catches == 1 && kill((pid_t)pid, sig) == 0 ? 0 : -1;
}

long run_file_size(const char *path)
{
    struct stat st;
    return path && path[0] && stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static void stack_note(Run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void stack_note(Run *r, const char *fmt, ...)
{
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    view_tui_note(r->tui, line);
}

void run_request_stack(Run *r, int rank)
{
    if (!r->tui || rank < 0 || rank >= r->job->world) return;
    const JobRank *jr = &r->job->ranks[rank];
    const char *signame;
    run_stack_signal(&signame);
    if (jr->state == RANK_EXITED_OK || jr->state == RANK_FAILED) {
        stack_note(r, "rank %d has ended (%s): no stack to show", rank, jr->how_ended);
        return;
    }
    if (!jr->python) {
        stack_note(r, "rank %d is not a Python rank (its heartbeats name no Python line): no Python stack to show",
                   rank);
        return;
    }
    if (r->stack.on) {
        stack_note(r, "still waiting for rank %d's stacks", r->stack.rank);
        return;
    }
    RunStackRoute how = run_stack_route(r, rank);
    if (how.via == RUN_STACK_VIA_NONE) {
        if (how.pid <= 0)
            stack_note(r, "rank %d runs on %s, not reachable on ctl: its stacks can only be read there", rank,
                       jr->host[0] ? jr->host : "another node");
        else if (how.asked == RUN_STACK_NO_HANDLER)
            stack_note(r,
                       "rank %d (pid %d) has no handler for %s (the script replaced the adapter's?) and is not "
                       "reachable on ctl: no stack, the signal would end it",
                       rank, how.pid, signame);
        else
            stack_note(r, "rank %d: cannot ask for its stacks (%s)", rank,
                       how.off < 0 ? "no log file" : "its process is gone");
        return;
    }
    /* the process that said hello: the interpreter, even under a wrapper that forked */
    int pid = how.pid > 0 ? how.pid : (int)jr->pid;
    r->stack.on = true;
    r->stack.follow = false;
    r->stack.rank = rank;
    r->stack.pid = pid;
    r->stack.wire = how.via == RUN_STACK_VIA_WIRE;
    r->stack.answered = false;
    r->stack.off = r->stack.size = how.off;
    r->stack.asked_ms = r->stack.grew_ms = mono_ms();
    char head[256];
    if (r->stack.wire) {
        /* its own answer, whatever log it shares (a spawned rank's is the launched process's) */
        r->stack.token = r->stack.token < RUN_STACK_W_TOKEN ? RUN_STACK_W_TOKEN : r->stack.token + 1;
        run_ask_stacks(r, rank, r->stack.token);
        snprintf(head, sizeof head, "asking rank %d (pid %d) for every thread's Python stack (on ctl) ...", rank, pid);
    } else {
        snprintf(head, sizeof head, "asking rank %d (pid %d) for every thread's Python stack (%s) ...", rank, pid,
                 signame);
    }
    view_tui_show_stack(r->tui, rank, head, "");
}

/* The dump in the log from off to size, as pystack_extract keeps it, into
 * *dump (caller frees). Returns how many threads it holds. */
static int stack_read(const char *log, long off, long size, char **dump)
{
    long n = size - off;
    if (n > STACK_MAX) n = STACK_MAX;
    char *text = n > 0 ? malloc((size_t)n) : NULL;
    *dump = malloc(STACK_MAX);
    FILE *f = text ? fopen(log, "rb") : NULL;
    size_t got = 0;
    if (f && fseek(f, off, SEEK_SET) == 0) got = fread(text, 1, (size_t)n, f);
    if (f) fclose(f);
    int threads = *dump ? pystack_extract(text, got, *dump, STACK_MAX) : 0;
    free(text);
    return threads;
}

static void stack_head(Run *r, char *head, size_t len, int threads, const char *from)
{
    char when[16] = "";
    time_t secs = time(NULL);
    struct tm tm;
    if (localtime_r(&secs, &tm)) strftime(when, sizeof when, "%H:%M:%S", &tm);
    snprintf(head, len, "rank %d (pid %d) at %s: %d thread%s, most recent call first (from %.120s)", r->stack.rank,
             r->stack.pid, when, threads, threads == 1 ? "" : "s", from);
}

/* w's answer on the wire: shown as a dump from the log is (pystack_extract);
 * one that comes after the 3 s still reaches the page if it is open. */
void run_stack_on_answer(Run *r, Msg *m)
{
    if (!r->stack.wire || r->stack.answered || m->rank != r->stack.rank || m->u.stack.token != r->stack.token) return;
    r->stack.answered = true;
    char *dump = malloc(STACK_MAX), head[256];
    int threads = dump && m->u.stack.text ? pystack_extract(m->u.stack.text, m->u.stack.len, dump, STACK_MAX) : 0;
    free(m->u.stack.text); /* taken: the gathering's tokens are below RUN_STACK_W_TOKEN */
    m->u.stack.text = NULL;
    m->u.stack.len = 0;
    if (threads > 0)
        stack_head(r, head, sizeof head, threads, "its heartbeat thread, on ctl");
    else
        snprintf(head, sizeof head, "rank %d (pid %d): no Python stack in its answer", r->stack.rank, r->stack.pid);
    const char *text = threads > 0 ? dump : "";
    if (r->stack.on)
        view_tui_show_stack(r->tui, r->stack.rank, head, text);
    else
        view_tui_update_stack(r->tui, r->stack.rank, head, text);
    r->stack.on = false;
    free(dump);
}

void run_stack_tick(Run *r)
{
    if (!r->stack.on && !r->stack.follow) return;
    if (r->stack.wire) { /* the answer comes as a message (run_stack_on_answer) */
        if (mono_ms() - r->stack.asked_ms < STACK_WAIT_MS) return;
        r->stack.on = false;
        char head[256];
        snprintf(head, sizeof head, "rank %d (pid %d) sent no stack within %d s (asked on ctl)", r->stack.rank,
                 r->stack.pid, STACK_WAIT_MS / 1000);
        view_tui_show_stack(r->tui, r->stack.rank, head, "");
        return;
    }
    const char *log = launcher_log_path(r->l, r->stack.rank);
    int64_t now = mono_ms();
    long size = run_file_size(log);
    if (size > r->stack.size) {
        r->stack.size = size;
        r->stack.grew_ms = now;
    }
    bool quiet = r->stack.size > r->stack.off && now - r->stack.grew_ms >= STACK_QUIET_MS;
    bool late = now - r->stack.asked_ms >= STACK_WAIT_MS;
    char head[256], *dump = NULL;
    if (r->stack.follow) {
        /* A dump written slower than STACK_QUIET_MS (a busy machine) came
         * in parts: the page takes each new part for STACK_FOLLOW_MS after
         * the ask, unless the user closed it or asked again. */
        if (now - r->stack.asked_ms >= STACK_FOLLOW_MS) r->stack.follow = false;
        if (!r->stack.follow || r->stack.size == r->stack.shown || !quiet) return;
        r->stack.shown = r->stack.size;
        int threads = stack_read(log, r->stack.off, r->stack.size, &dump);
        size_t len = dump ? strlen(dump) : 0;
        if (dump && (threads > r->stack.threads || (threads == r->stack.threads && len > r->stack.shown_len))) {
            r->stack.threads = threads;
            r->stack.shown_len = len;
            stack_head(r, head, sizeof head, threads, log);
            if (!view_tui_update_stack(r->tui, r->stack.rank, head, dump)) r->stack.follow = false;
        }
        free(dump);
        return;
    }
    if (!quiet && !late) return;
    int threads = stack_read(log, r->stack.off, r->stack.size, &dump);
    if (threads == 0 && !late) { /* the rank's own output, not the dump yet */
        free(dump);
        return;
    }
    r->stack.on = false;
    if (threads > 0) {
        stack_head(r, head, sizeof head, threads, log);
        r->stack.follow = true;
        r->stack.threads = threads;
        r->stack.shown_len = strlen(dump);
        r->stack.shown = r->stack.size;
    } else {
        ProcStat ps;
        bool stopped = procstat_read(r->stack.pid, &ps) == 0 && (ps.state == 'T' || ps.state == 't');
        snprintf(head, sizeof head, "rank %d (pid %d) wrote no stack within %d s%s", r->stack.rank, r->stack.pid,
                 STACK_WAIT_MS / 1000,
                 stopped ? ": it is stopped (SIGSTOP); it dumps when continued (SIGCONT), then w again" : "");
    }
    view_tui_show_stack(r->tui, r->stack.rank, head, dump && threads > 0 ? dump : "");
    free(dump);
}
