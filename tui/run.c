/* run.c — the frontend's loop for one job. See run.h.
 *
 * Shutdown is a ladder with deadlines: a stop command (ranks agree on the
 * step, checkpoint, barrier, destroy, bye) -> after stop_grace_s SIGTERM ->
 * 5 s later SIGKILL. A second Ctrl-C jumps a rung. The job model records
 * which rung ended each rank.
 */
#include "run.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "job.h"
#include "launcher.h"
#include "store.h"
#include "view.h"
#include "zsock.h"

#define KILL_GRACE_MS 5000
#define FRAME_MS 50

static volatile sig_atomic_t g_signals;

static void on_signal(int sig)
{
    (void)sig;
    g_signals++;
}

typedef struct {
    const RunOptions *o;
    void *zctx, *ctl, *tel;
    Store *store;
    Launcher *l;
    Job *job;
    ViewTui *tui;
    ViewHeadless hl;
    CodecBuf buf;
    char dir[256];
    char ctl_ep[300], tel_ep[300];
    bool *routable;           /* [world] hello seen: its ctl routing id is known */
    int64_t *sent_ckpt;       /* [world] highest ckpt id sent */
    bool *sent_stop;          /* [world] */
    int64_t ckpt_id;
    bool stop_requested;
    int64_t stop_at_ms;
    int rung;                 /* 0 clean stop only, 1 SIGTERM sent, 2 SIGKILL sent */
    bool quit_after;
    int handled_signals;
    char status[256];
} Run;

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void send_cmd(Run *r, int rank, const char *op, int64_t id)
{
    Msg m;
    char ident[32], err[160];
    msg_init(&m, MSG_CMD);
    m.u.cmd.id = id;
    snprintf(m.u.cmd.op, sizeof m.u.cmd.op, "%s", op);
    m.t_ns = proto_now_ns();
    int n = snprintf(ident, sizeof ident, "rank-%d", rank);
    zs_send_to(r->ctl, ident, (size_t)n, &m, &r->buf, ZMQ_DONTWAIT, err, sizeof err);
}

/* Bring every routable rank up to date with the commands issued so far. */
static void flush_cmds(Run *r)
{
    for (int k = 0; k < r->job->world; k++) {
        if (!r->routable[k]) continue;
        if (r->sent_ckpt[k] < r->ckpt_id) {
            send_cmd(r, k, "ckpt", r->ckpt_id);
            r->sent_ckpt[k] = r->ckpt_id;
        }
        if (r->stop_requested && !r->sent_stop[k]) {
            send_cmd(r, k, "stop", 1);
            r->sent_stop[k] = true;
        }
    }
}

static void request_stop(Run *r, const char *why)
{
    if (r->stop_requested) return;
    r->stop_requested = true;
    r->stop_at_ms = mono_ms();
    job_set_stopping(r->job);
    job_event(r->job, -1, EV_INFO, "%s: asking every rank to stop at the same step", why);
    snprintf(r->status, sizeof r->status, "stopping: ranks agree on the last step, then checkpoint, barrier, destroy");
    flush_cmds(r);
}

static void request_ckpt(Run *r)
{
    if (r->stop_requested) {
        job_event(r->job, -1, EV_WARN, "checkpoint not requested: the job is stopping (a final checkpoint is written)");
        return;
    }
    r->ckpt_id++;
    job_event(r->job, -1, EV_INFO, "checkpoint requested: every rank will agree on the step");
    flush_cmds(r);
}

/* The next rung of the ladder, for ranks still running. */
static void escalate(Run *r, const char *why)
{
    if (launcher_running(r->l) == 0) return;
    if (r->rung == 0) {
        r->rung = 1;
        int n = launcher_signal_all(r->l, SIGTERM);
        job_event(r->job, -1, EV_WARN, "%s: sent SIGTERM to %d rank%s", why, n, n == 1 ? "" : "s");
    } else if (r->rung == 1) {
        r->rung = 2;
        int n = launcher_signal_all(r->l, SIGKILL);
        job_event(r->job, -1, EV_ERROR, "%s: sent SIGKILL to %d rank%s", why, n, n == 1 ? "" : "s");
    }
    r->stop_at_ms = mono_ms();
}

static void tail_log(Run *r, int rank)
{
    const char *path = launcher_log_path(r->l, rank);
    FILE *f = fopen(path, "r");
    if (!f) return;
    char lines[3][256];
    int n = 0;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!*line) continue;
        snprintf(lines[n % 3], sizeof lines[0], "%s", line);
        n++;
    }
    fclose(f);
    for (int i = n > 3 ? n - 3 : 0; i < n; i++)
        job_event(r->job, rank, EV_ERROR, "log: %s", lines[i % 3]);
}

static void on_exit_cb(void *ctx, int rank, int pid, int status)
{
    Run *r = ctx;
    const char *how = NULL;
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM && r->rung >= 1) how = "SIGTERM by ddptop";
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && r->rung >= 2) how = "SIGKILL by ddptop";
    job_rank_exited(r->job, rank, pid, status, how, mono_ns());
    JobRank *jr = &r->job->ranks[rank];
    if (jr->state == RANK_FAILED) {
        tail_log(r, rank);
        /* torchrun's rule: one rank failing ends the job for all. */
        if (launcher_running(r->l) > 0 && !r->stop_requested) {
            char why[128];
            snprintf(why, sizeof why, "rank %d %s", rank, jr->how_ended);
            request_stop(r, why);
        }
    }
}

static void handle_msg(Run *r, const void *ident, size_t ident_len, Msg *m)
{
    if (m->kind == MSG_SET || m->kind == MSG_GET || m->kind == MSG_WAIT) {
        if (ident) store_handle(r->store, r->ctl, ident, ident_len, m, mono_ms(), &r->buf);
        return;
    }
    job_apply(r->job, m, mono_ns());
    if (m->kind == MSG_HELLO && m->rank >= 0 && m->rank < r->job->world && ident) {
        r->routable[m->rank] = true;
        flush_cmds(r);
    }
}

/* Read whatever is waiting on both sockets (bounded, so keys stay responsive). */
static void drain(Run *r)
{
    char err[256];
    for (int i = 0; i < 4096; i++) {
        Msg m;
        int rc = zs_recv(r->tel, &m, ZMQ_DONTWAIT, err, sizeof err);
        if (rc == 1 || rc < 0) break;
        if (rc == 2) { r->job->bad_frames++; r->job->version++; continue; }
        handle_msg(r, NULL, 0, &m);
        msg_done(&m);
    }
    for (int i = 0; i < 1024; i++) {
        Msg m;
        char ident[ZS_IDENT_MAX];
        size_t ident_len = 0;
        int rc = zs_recv_from(r->ctl, ident, &ident_len, &m, ZMQ_DONTWAIT, err, sizeof err);
        if (rc == 1 || rc < 0) break;
        if (rc == 2) { r->job->bad_frames++; r->job->version++; continue; }
        handle_msg(r, ident, ident_len, &m);
        msg_done(&m);
    }
}

static int setup(Run *r, char *err, size_t errlen)
{
    const RunOptions *o = r->o;
    if (zs_private_dir(r->dir, sizeof r->dir, err, errlen)) return -1;
    snprintf(r->ctl_ep, sizeof r->ctl_ep, "ipc://%s/ctl", r->dir);
    snprintf(r->tel_ep, sizeof r->tel_ep, "ipc://%s/tel", r->dir);
    r->zctx = zmq_ctx_new();
    r->ctl = r->zctx ? zmq_socket(r->zctx, ZMQ_ROUTER) : NULL;
    r->tel = r->zctx ? zmq_socket(r->zctx, ZMQ_PULL) : NULL;
    if (!r->ctl || !r->tel) { snprintf(err, errlen, "zeromq: %s", zmq_strerror(errno)); return -1; }
    int hwm = 100000, zero = 0;
    zmq_setsockopt(r->tel, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt(r->ctl, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(r->tel, ZMQ_LINGER, &zero, sizeof zero);
    if (zmq_bind(r->ctl, r->ctl_ep) || zmq_bind(r->tel, r->tel_ep)) {
        snprintf(err, errlen, "cannot bind %s: %s", r->dir, zmq_strerror(errno));
        return -1;
    }
    r->store = store_new();
    r->job = job_new(o->nproc);
    int w = o->nproc;
    r->routable = calloc((size_t)w, sizeof *r->routable);
    r->sent_ckpt = calloc((size_t)w, sizeof *r->sent_ckpt);
    r->sent_stop = calloc((size_t)w, sizeof *r->sent_stop);
    if (!r->store || !r->job || !r->routable || !r->sent_ckpt || !r->sent_stop) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

static void teardown(Run *r)
{
    launcher_free(&r->l);
    store_free(&r->store);
    if (r->ctl) zmq_close(r->ctl);
    if (r->tel) zmq_close(r->tel);
    if (r->zctx) zmq_ctx_term(r->zctx);
    if (r->dir[0] && !r->o->log_dir) zs_private_dir_remove(r->dir);
    else if (r->dir[0]) {
        char p[320];
        snprintf(p, sizeof p, "%s/ctl", r->dir); unlink(p);
        snprintf(p, sizeof p, "%s/tel", r->dir); unlink(p);
        rmdir(r->dir);
    }
    codec_buf_done(&r->buf);
    free(r->routable);
    free(r->sent_ckpt);
    free(r->sent_stop);
    job_free(&r->job);
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

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;   /* no SA_RESTART: zmq_poll returns EINTR */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    if (setup(r, err, sizeof err)) {
        fprintf(stderr, "ddptop: %s\n", err);
        teardown(r);
        return 1;
    }

    char job_id[96];
    snprintf(job_id, sizeof job_id, "ddptop-%d-%" PRId64, (int)getpid(), proto_now_ns());
    LaunchConfig lc = {.world = o->nproc, .rank_offset = 0, .global_world = o->nproc,
                       .worker_path = o->worker_path, .worker_args = o->trainer_args,
                       .n_worker_args = o->n_trainer_args, .ctl_ep = r->ctl_ep, .tel_ep = r->tel_ep,
                       .job_id = job_id, .master_addr = "127.0.0.1", .master_port = 29500,
                       .log_dir = o->log_dir ? o->log_dir : r->dir};

    if (!o->headless) {
        if (view_tui_open(&r->tui, err, sizeof err)) {
            fprintf(stderr, "ddptop: %s (use --headless)\n", err);
            teardown(r);
            return 2;
        }
    } else {
        view_headless_init(&r->hl, stdout, o->json);
    }

    if (launcher_start(&r->l, &lc, err, sizeof err)) {
        view_tui_close(&r->tui);
        fprintf(stderr, "ddptop: %s\n", err);
        teardown(r);
        return 1;
    }
    for (int k = 0; k < o->nproc; k++) job_rank_started(r->job, k, launcher_pid(r->l, k), mono_ns());
    job_event(r->job, -1, EV_INFO, "launched %d rank%s (logs in %s)", o->nproc, o->nproc == 1 ? "" : "s",
              lc.log_dir);

    uint64_t drawn_version = (uint64_t)-1;
    int64_t last_draw = 0;
    bool leave = false;
    while (!leave) {
        zmq_pollitem_t items[3] = {
            {r->tel, 0, ZMQ_POLLIN, 0},
            {r->ctl, 0, ZMQ_POLLIN, 0},
            {NULL, 0, ZMQ_POLLIN, 0},
        };
        int nitems = 2;
        if (r->tui) nitems = 3;
        if (zmq_poll(items, nitems, FRAME_MS) < 0 && errno != EINTR) {
            job_event(r->job, -1, EV_ERROR, "poll: %s", zmq_strerror(errno));
        }
        drain(r);
        store_tick(r->store, r->ctl, mono_ms(), &r->buf);
        launcher_reap(r->l, on_exit_cb, r);

        /* Signals: first a clean stop, then each one a rung up the ladder. */
        while (r->handled_signals < g_signals) {
            r->handled_signals++;
            if (!r->stop_requested) { request_stop(r, "signal received"); r->quit_after = true; }
            else escalate(r, "signal received again");
        }

        if (r->tui) {
            ViewAction a;
            while ((a = view_tui_poll_key(r->tui)) != VIEW_ACT_NONE) {
                if (a == VIEW_ACT_CKPT) request_ckpt(r);
                else if (a == VIEW_ACT_DESTROY) request_stop(r, "destroy requested (d)");
                else if (a == VIEW_ACT_QUIT) {
                    r->quit_after = true;
                    if (launcher_running(r->l) > 0) request_stop(r, "quit requested (q)");
                } else if (a == VIEW_ACT_REDRAW) drawn_version = (uint64_t)-1;
            }
        }

        /* Deadlines of the ladder. */
        int running = launcher_running(r->l);
        if (r->stop_requested && running > 0) {
            int64_t waited = mono_ms() - r->stop_at_ms;
            if (r->rung == 0 && waited > (int64_t)(o->stop_grace_s * 1000))
                escalate(r, "ranks did not finish the clean stop in time");
            else if (r->rung == 1 && waited > KILL_GRACE_MS)
                escalate(r, "ranks ignored SIGTERM");
        }

        if (running == 0) {
            if (!r->status[0] || r->stop_requested)
                snprintf(r->status, sizeof r->status, "%s — press q to leave",
                         job_all_clean(r->job) ? "job done: every rank ended cleanly"
                                               : "job failed: see the events");
            if (o->headless || r->quit_after) leave = true;
        }

        int64_t now = mono_ms();
        if (r->tui) {
            if ((r->job->version != drawn_version && now - last_draw >= FRAME_MS) || now - last_draw >= 1000 || leave) {
                view_tui_draw(r->tui, r->job, mono_ns(), r->status);
                drawn_version = r->job->version;
                last_draw = now;
            }
        } else {
            view_headless_tick(&r->hl, r->job, mono_ns());
        }
    }

    status = job_all_clean(r->job) ? 0 : 1;
    view_tui_close(&r->tui);
    if (!o->headless) view_headless_init(&r->hl, stdout, false);
    view_headless_summary(&r->hl, r->job, mono_ns());
    teardown(r);
    return status;
}
