/* loop.c — `ddptop run` from the first socket to the exit code: the
 * start-up steps, the one loop and the summary. See run.h; internal.h maps
 * the other files of tui/run/.
 *
 * One loop: poll over the sockets and stdin -> drain the messages ->
 * reap -> signals and keys -> the peers' ticks -> the ladder's deadlines ->
 * hang verdicts -> the end of the job (or a restart) -> redraw, capped at
 * one frame per FRAME_MS (bench.h measures what that costs and how late a
 * step reaches the screen). Each start-up step returns an ErrStatus; the
 * exit code comes from it. Main thread.
 */
#include "run/internal.h"

#include <errno.h>
#include <poll.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <zmq.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/signals.h"

/* view.h's pace; with the pacing below a step is on screen within about a
 * frame and a turn of its arrival. */
#define FRAME_MS    VIEW_FRAME_MS
/* Exits are collected this often (a waitpid per rank each time). */
#define REAP_MS     50
/* A loop turn takes at least this long while only telemetry flows, so a
 * busy job is read in batches (64 ranks x 100 steps/s: ~250 messages a
 * turn) instead of a wake-up, a poll and a pipe re-activation inside
 * ZeroMQ per message: at that load it cuts ddptop's CPU by ~40% (make
 * bench-tui). Store and command traffic (ctl) is never paced: rendezvous
 * waits on it. */
#define LOOP_MIN_MS 20

/* The loop's own bookkeeping across turns. */
typedef struct {
    uint64_t drawn_version; /* the job model's version on screen */
    int64_t last_draw_ms, last_reap_ms;
    bool leave;
} Turns;

/* ---- start ---- */

static void say_endpoint(const Run *r)
{
    const RunOptions *o = r->o;
    if (r->tcp)
        fprintf(stderr, "ddptop: %s on %s (CURVE; key file %s)\n", o->listen_ep ? "listening" : "rendezvous",
                o->listen_ep ? o->listen_ep : o->rdzv, r->keys_file);
}

/* No terminal is the user's to fix (--headless): ERR_USAGE. */
static int open_view(Run *r, int world, char *err, size_t errlen)
{
    if (r->o->headless) {
        view_headless_init(&r->hl, stdout, r->o->json);
        return ERR_OK;
    }
    char why[512] = "";
    if (view_tui_open(&r->tui, world, why, sizeof why))
        return err_setv(ERR_USAGE, err, errlen, "%s (use --headless)", why);
    return ERR_OK;
}

/* The first event: how a viewer attaches. */
static void say_attach(Run *r)
{
    const RunOptions *o = r->o;
    const char *shown = o->listen_ep ? o->listen_ep : r->ctl_ep;
    char rdzv_ep[300];
    if (o->nnodes > 1) {
        snprintf(rdzv_ep, sizeof rdzv_ep, "tcp://%s", o->rdzv);
        shown = rdzv_ep;
    }
    if (r->pub) job_event(r->job, mono_ns(), wall_ns(), -1, EV_INFO, "publishing on %s", publisher_endpoint(r->pub));
    if (r->tcp)
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_INFO, "attach: ddptop attach %s --keys %s", shown, r->keys_file);
    else
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_INFO, "attach: ddptop attach %s", shown);
}

/* The ranks' side: listen's first hello, the rendezvous of several nodes
 * (the loop launches once every node joined), or the launch. */
static int begin(Run *r, RunHello *first, char *err, size_t errlen)
{
    const RunOptions *o = r->o;
    int world = r->job->world;
    if (o->listen_ep) {
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_INFO,
                  "listening on %s: %d rank%s expected; workers connect with DDPTOP_CONNECT=%s%s%s", o->listen_ep,
                  world, world == 1 ? "" : "s", o->listen_ep, r->tcp ? " DDPTOP_KEYS=" : "",
                  r->tcp ? r->keys_file : "");
        run_take_hello(r, first);
    } else if (r->nodes) {
        r->rdzv_start_ms = mono_ms();
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_INFO, "rendezvous on %s: waiting for %d more node%s (--keys %s)",
                  o->rdzv, o->nnodes - 1, o->nnodes == 2 ? "" : "s", r->keys_file);
        snprintf(r->status, sizeof r->status, "rendezvous: waiting for nodes to join on %s", o->rdzv);
    } else {
        if (run_launch(r, 0, err, errlen)) return ERR_FAIL;
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_INFO, "launched %d rank%s (logs in %s)", o->nproc,
                  o->nproc == 1 ? "" : "s", r->lc.log_dir);
    }
    return ERR_OK;
}

/* Sockets, the world size (listen: from the first hello), the job model,
 * the screen, then the ranks. r->job stays NULL when listen was
 * interrupted before any rank said hello (ERR_OK: nothing ran). */
static int start_job(Run *r, char *err, size_t errlen)
{
    const RunOptions *o = r->o;
    int world = o->nnodes > 1 ? o->nnodes * o->nproc : o->nproc;
    RunHello first = { .have = false };
    codec_buf_init(&first.frame);
    int st = run_setup_sockets(r, err, errlen);
    if (st) goto out;
    say_endpoint(r);
    if (o->listen_ep) {
        r->external = true;
        r->store = store_new();
        if ((st = run_listen_first_hello(r, &first, &world, err, errlen)) || world == 0) goto out;
    }
    if ((st = run_setup_job(r, world, err, errlen)) || (st = open_view(r, world, err, errlen))) goto out;
    say_attach(r);
    st = begin(r, &first, err, errlen);
out:
    if (first.have) msg_done(&first.msg);
    codec_buf_done(&first.frame);
    return st;
}

/* ---- one turn's steps ---- */

/* Does ZeroMQ socket s hold a message (ZMQ_EVENTS)? */
static bool zmq_has_input(void *s)
{
    uint32_t ev = 0;
    size_t len = sizeof ev;
    return zmq_getsockopt(s, ZMQ_EVENTS, &ev, &len) == 0 && (ev & ZMQ_POLLIN);
}

/* Until input comes, or the next frame slot when something changed (a
 * step reaches the screen within FRAME_MS of its arrival). Sets r->in: what
 * run_drain may leave unread this turn.
 *
 * A poll(2) on ZeroMQ's own descriptors (ZMQ_FD) rather than zmq_poll:
 * zmq_poll asks every socket's ZMQ_EVENTS before and after it sleeps, and
 * run_drain then read both sockets until empty, each of them a poll(2)
 * and a getpid(2) inside ZeroMQ: eight system calls a turn on sockets that,
 * with the telemetry streams, mostly carry nothing (perf at 64 ranks: 8% of
 * ddptop's CPU). ZMQ_FD is an edge: it says commands arrived, and any call
 * on the socket may consume it while leaving a message unread. So ctl,
 * which ddptop sends on, is asked for ZMQ_EVENTS before every wait; tel,
 * only ever read until empty, needs no question unless the last drain left
 * frames on it, and is asked once a second all the same. */
static void wait_input(Run *r, const Turns *t)
{
    long timeout = FRAME_MS;
    if (r->tui && r->job->version != t->drawn_version) {
        int64_t until = t->last_draw_ms + FRAME_MS - mono_ms();
        timeout = until < 0 ? 0 : until > FRAME_MS ? FRAME_MS : (long)until;
    }
    if (!r->in.have_fds) {
        size_t len = sizeof r->in.tel_fd;
        r->in.tel_fd = r->in.ctl_fd = -1;
        zmq_getsockopt(r->tel, ZMQ_FD, &r->in.tel_fd, &len);
        len = sizeof r->in.ctl_fd;
        zmq_getsockopt(r->ctl, ZMQ_FD, &r->in.ctl_fd, &len);
        r->in.have_fds = true;
        r->in.tel_left = true;
    }
    int64_t now = mono_ms();
    bool tel = r->in.tel_left || r->in.tel_fd < 0, ctl = zmq_has_input(r->ctl);
    if (!tel && now - r->in.tel_check_ms >= 1000) {
        tel = zmq_has_input(r->tel);
        r->in.tel_check_ms = now;
    }
    if (tel || ctl) timeout = 0;
    struct pollfd p[4] = { { r->in.tel_fd, POLLIN, 0 }, { r->in.ctl_fd, POLLIN, 0 }, { -1, POLLIN, 0 },
                           { -1, POLLIN, 0 } };
    if (r->tui) p[2].fd = 0; /* the keys */
    if (r->tss) p[3].fd = tss_fd(r->tss);
    if (r->tss && tss_more(r->tss)) timeout = 0;
    int k = poll(p, 4, (int)timeout);
    if (k < 0 && errno != EINTR) {
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_ERROR, "poll: %s", strerror(errno));
        tel = ctl = true; /* read everything, as if it had said so */
    }
    /* an error or a hang-up on a descriptor is read too: the read says why */
    r->in.quiet_tel = !(tel || p[0].revents);
    r->in.quiet_ctl = !(ctl || p[1].revents);
    r->in.quiet_streams = !(k < 0 || p[3].revents || (r->tss && tss_more(r->tss)));
}

/* The store's timeouts, the recording's flush and (every REAP_MS) this
 * node's exits. Returns how many exits still wait for their bye. */
static int collect(Run *r, Turns *t)
{
    char err[512];
    store_tick(r->store, r->ctl, mono_ms(), &r->buf);
    if (r->rec && recorder_tick(r->rec, mono_ns(), err, sizeof err))
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_WARN, "%s", err);
    if (mono_ms() - t->last_reap_ms >= REAP_MS) {
        launcher_reap(r->l, run_on_exit, r);
        run_follow_tick(r);
        t->last_reap_ms = mono_ms();
    }
    return run_held_exits(r, false);
}

static void take_keys(Run *r, Turns *t)
{
    if (!r->tui) return;
    ViewAction a;
    /* q asks first only while a stop is not already on its way */
    bool running = run_procs_running(r) > 0 && !r->stop_requested;
    while ((a = view_tui_poll_key(r->tui, r->job, running)) != VIEW_ACT_NONE) {
        /* every rank has ended (the key line no longer offers these) */
        bool to_ranks = a == VIEW_ACT_CKPT || a == VIEW_ACT_DESTROY || a == VIEW_ACT_PAUSE || a == VIEW_ACT_ABORT ||
                        a == VIEW_ACT_STACK || a == VIEW_ACT_TREE || a == VIEW_ACT_REPORT;
        if (to_ranks && run_procs_running(r) == 0 && !r->restart_pending) {
            view_tui_note(r->tui, "the job has ended: no rank left to act on (q leaves)");
            t->drawn_version = (uint64_t)-1;
            continue;
        }
        if (a == VIEW_ACT_CKPT)
            run_request_ckpt(r);
        else if (a == VIEW_ACT_DESTROY) {
            r->restart_pending = false;
            run_request_stop(r, "destroy requested (d)");
        } else if (a == VIEW_ACT_PAUSE)
            run_request_pause(r);
        else if (a == VIEW_ACT_ABORT)
            run_request_abort(r);
        else if (a == VIEW_ACT_STACK)
            run_request_stack(r, view_tui_stack_rank(r->tui));
        else if (a == VIEW_ACT_TREE)
            run_gather_start(r, RUN_GATHER_TUI);
        else if (a == VIEW_ACT_REPORT)
            run_report_start(r, true, 0);
        else if (a == VIEW_ACT_FAULT) {
            int rank = 0, pick = view_tui_fault_pick(r->tui, &rank);
            run_request_fault(r, pick, rank);
        } else if (a == VIEW_ACT_QUIT) {
            r->restart_pending = false;
            r->quit_after = true;
            if (run_procs_running(r) > 0) run_request_stop(r, "quit requested (q)");
        } else if (a == VIEW_ACT_REDRAW)
            t->drawn_version = (uint64_t)-1;
    }
}

/* Who waits for whom: one event per hang, updated in place each second,
 * and one {"k":"hang",...} for scripts when it is first seen. */
static void watch_hangs(Run *r, int running)
{
    if (running == 0 || !hangwatch_tick(&r->hw, r->job, r->l, mono_ns(), proto_now_ns())) return;
    /* Once the ladder has signalled the ranks, who waits for whom is
     * ddptop's doing (a rank it killed leaves the collective, one still in
     * its finally blocks seems to wait for it): the hang already noted
     * stands, as the one the summary blames. */
    const JobHang *h = &r->job->hang;
    if (r->rung >= 1 && h->active && (h->seq != r->hw.last.seq || strcmp(h->op, r->hw.last.op))) return;
    if (hang_note(r->job, &r->hw.last, mono_ns(), wall_ns()) && !r->tui) {
        view_headless_hang(&r->hl, r->job, &r->hw.last, mono_ns());
    }
    if (r->job->hang.active && r->job->hang.ev != r->reported_hang_ev) {
        /* once per hang: the stacks, then its report on disk (report.c); in --json, {"k":"stacks"} too */
        r->reported_hang_ev = r->job->hang.ev;
        run_report_start(r, false, r->hl.json && !r->tui ? RUN_GATHER_HANG : 0);
    }
    if (!r->stop_requested) { /* once stopping, the status line counts down the ladder */
        JobDiagnosis d; /* the hang's event says the same */
        job_diagnose(r->job, &d);
        snprintf(r->status, sizeof r->status, "hang: %s", d.kind != DIAG_NONE ? d.text : r->hw.last.verdict);
    }
}

/* Nothing runs and no exit waits for its bye: restart (--max-restarts),
 * or say how the job ended. Returns true when the loop should leave. */
/* ddptop's exit status for the job (the table in README.md, "Exit
 * status"): 0 ok; 1 failed (a rank, an abort, the rendezvous); 2 a rank
 * refused to run as launched (a usage error found at run time); 3 a
 * checkpoint lost though every rank ended cleanly; 128 + N stopped by
 * signal N (130 Ctrl-C, 143 SIGTERM), as shells report it. */
static int exit_status(const Run *r)
{
    JobOutcome o = job_outcome(r->job);
    if (o == JOB_END_INTERRUPTED && signals_first() > 0) return 128 + signals_first();
    if (o == JOB_END_REFUSED) return 2; /* a usage error the ranks found (their bye's `refused`) */
    if (r->aborted || r->rdzv_failed) return 1;
    /* the script's process that started the ranks failed after they ended well */
    if (r->follow.exited && !(WIFEXITED(r->follow.status) && WEXITSTATUS(r->follow.status) == 0)) return 1;
    if (o == JOB_END_OK) return 0;
    return o == JOB_END_CKPT_LOST ? RUN_EXIT_CKPT_LOST : 1;
}

static bool job_over(Run *r, int running, int held, bool starting)
{
    /* a refusal (a bye's `refused`) heard after its exit was reaped: it would be refused again */
    if (r->restart_pending && r->job->refused[0]) r->restart_pending = false;
    if (running == 0 && held == 0 && r->restart_pending) {
        char err[512];
        if (run_restart(r, err, sizeof err)) {
            job_event(r->job, mono_ns(), wall_ns(), -1, EV_ERROR, "restart failed: %s", err);
            r->restart_pending = false;
        }
        running = run_procs_running(r);
    }
    if (running > 0 || held > 0 || r->restart_pending || starting) return false;
    if (r->nodes && r->launched) { /* every node exits as node 0 does */
        char v[sizeof r->status] = "job done: every rank ended cleanly";
        if (!job_ok(r->job)) job_verdict(r->job, v, sizeof v);
        nodes_done(r->nodes, v, exit_status(r));
    }
    if (!r->status[0] || r->stop_requested) {
        char verdict[sizeof r->status - 32] = "job done: every rank ended cleanly";
        if (!job_ok(r->job)) { /* the status line names the cause, as the summary will */
            job_verdict(r->job, verdict, sizeof verdict);
            /* and the events panel keeps it whole, wrapped, where the
             * status line's one row cuts it */
            if (r->tui && !r->verdict_told) job_event(r->job, mono_ns(), wall_ns(), -1, EV_ERROR, "%s", verdict);
            r->verdict_told = true;
        }
        snprintf(r->status, sizeof r->status, "%s — press q to leave", verdict);
    }
    return r->o->headless || r->quit_after;
}

/* A frame when the job changed (at most one per FRAME_MS), at least one a
 * second, and the last one; headless: its own pace. */
static void draw(Run *r, Turns *t)
{
    int64_t now = mono_ms();
    if (!r->tui) {
        view_headless_tick(&r->hl, r->job, mono_ns());
        return;
    }
    if ((r->job->version != t->drawn_version && now - t->last_draw_ms >= FRAME_MS) || now - t->last_draw_ms >= 1000 ||
        t->leave) {
        int64_t t0 = mono_ns();
        view_tui_draw(r->tui, r->job, t0, r->status);
        bench_on_frame(r->bench, t0, r->job);
        t->drawn_version = r->job->version;
        t->last_draw_ms = now;
    }
}

/* A turn lasts LOOP_MIN_MS at least, never past the next frame slot. */
static void pace(const Run *r, const Turns *t, int64_t turn_start_ms, int n_ctl)
{
    if (t->leave || n_ctl > 0) return;
    int64_t left = turn_start_ms + LOOP_MIN_MS - mono_ms();
    if (r->tui && r->job->version != t->drawn_version) {
        int64_t until = t->last_draw_ms + FRAME_MS - mono_ms();
        if (until < left) left = until;
    }
    if (left > 0) {
        struct timespec ts = { 0, (long)left * 1000000L };
        nanosleep(&ts, NULL); /* a signal cuts it short: fine */
    }
}

/* A backlog is over (tel read until empty after drains that were not):
 * the frames it held were freed, but into the allocator's arenas (most by
 * ZeroMQ's I/O thread), where they stay resident; give them back, so the
 * RSS after a catch-up is the RSS before it. One malloc_trim after a
 * backlog of RUN_BACKLOG_TRIM_FRAMES or more (at most one a
 * RUN_TRIM_EVERY_MS), none in a steady state. */
static void backlog_over(Run *r)
{
    if (!r->tel_emptied) return;
    if (r->backlog_frames >= RUN_BACKLOG_TRIM_FRAMES) r->trim_due = true;
    r->backlog_frames = 0;
    int64_t now = mono_ms();
    if (!r->trim_due || (r->trim_ms && now - r->trim_ms < RUN_TRIM_EVERY_MS)) return;
#ifdef __GLIBC__
    malloc_trim(0);
#endif
    r->trim_due = false;
    r->trim_ms = now;
}

static void run_loop(Run *r)
{
    Turns t = { .drawn_version = (uint64_t)-1 };
    while (!t.leave) {
        int64_t turn_start_ms = mono_ms();
        wait_input(r, &t);
        /* the drain yields to the next frame slot (what it reads makes a
         * frame due), and at the latest to the next turn's keys and ticks */
        int64_t until = turn_start_ms + FRAME_MS;
        if (r->tui && t.last_draw_ms + FRAME_MS < until) until = t.last_draw_ms + FRAME_MS;
        int n_ctl = run_drain(r, until);
        backlog_over(r);
        bench_tick(r->bench);
        int held = collect(r, &t);
        run_take_signals(r);
        take_keys(r, &t);
        run_stack_tick(r);
        run_gather_tick(r);
        run_ping_ranks(r);
        run_peers_tick(r);
        bool starting = r->nodes && !r->launched && !r->rdzv_failed; /* the rendezvous goes on */
        int running = run_procs_running(r);
        run_ladder_tick(r, running);
        run_linger_tick(r, running);
        watch_hangs(r, running);
        t.leave = job_over(r, running, held, starting);
        draw(r, &t);
        pace(r, &t, turn_start_ms, n_ctl);
    }
}

/* ---- end ---- */

/* The summary; the exit status. */
static int end_job(Run *r)
{
    run_held_exits(r, true);
    int code = exit_status(r);
    if (r->nodes && !r->rdzv_failed) nodes_done(r->nodes, "the job ended", code);
    r->keep_dir = code == 1 || code == RUN_EXIT_CKPT_LOST || !job_all_clean(r->job) || r->job->ckpts_lost;
    view_tui_close(&r->tui);
    run_gather_finish(r); /* a tree still owed to --json or a viewer */
    bench_finish(r->bench, r->job);
    if (!r->o->headless) view_headless_init(&r->hl, stdout, false);
    if (r->rdzv_failed && !r->launched)
        printf("job not started: %s\n", r->status);
    else
        view_headless_summary(&r->hl, r->job, mono_ns());
    return code;
}

int run_job(const RunOptions *o)
{
    Run run = { .o = o, .steps_reached = -1 };
    char err[512] = "";
    codec_buf_init(&run.buf);
    signals_catch_stop(1);
    int st = start_job(&run, err, sizeof err), code = err_exit_code(st);
    if (st != ERR_OK) {
        view_tui_close(&run.tui); /* the terminal back before the error line */
        if (err[0]) fprintf(stderr, "ddptop: %s\n", err);
    } else if (run.job) {
        run_loop(&run);
        code = end_job(&run);
    }
    run_teardown(&run);
    /* the recording asked for ends early (a full disk): not all was done */
    if (code == 0 && run.rec_lost) code = RUN_EXIT_CKPT_LOST;
    return code;
}
