/* attach.c — `ddptop attach`: a second screen on a running job. See
 * attach.h; ddptop's side is viewers.c.
 *
 * The model needs the world size up front (job_new), and only a hello says
 * it: frames are held until the first hello (the snapshot sends hellos
 * first, so that is the first frame when ranks are up), then the model is
 * made and the held frames applied in order.
 *
 * What the viewer cannot see, it infers: a rank's process exit (ddptop's
 * launcher reaps it, no frame says so) is taken from its bye (exit with
 * the bye's status), so rows, verdict and summary read as they do live.
 * The job has ended when every rank said bye, or when nothing came for
 * ATTACH_SILENT_MS after frames had flowed (ddptop gone, or the link).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "base/usage.h"
#include "base/clock.h"
#include "attach/client.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <zmq.h>

#include "wire/codec.h"
#include "model/job.h"
#include "net/curve.h"
#include "view/keys.h"
#include "view/view.h"
#include "net/zsock.h"
#include "base/signals.h"
#include "view/note.h"

#define FRAME_MS         VIEW_FRAME_MS
#define TURN_MS          15
/* "attach" this often (ddptop forgets a viewer silent for 6 s). */
#define ATTACH_EVERY_MS  1000
/* Nothing heard this long after frames flowed: the job has ended (or ddptop
 * is gone, or the link). */
#define ATTACH_SILENT_MS 10000
/* A notice on the status line stays this long. */
/* Frames held before the first hello. */
#define HELD_MAX         65536
#define HELD_MAX_BYTES   (64u << 20)
/* What ddptop's refusal says first (viewers.c). */
#define REFUSED_PREFIX   "attach refused"
/* ddptop stacks: the longest a gathering takes (two looks of up to 3 s
 * each, a second apart) with room for a busy job. */
#define STACKS_GATHER_MS 15000

typedef struct {
    unsigned char *data;
    size_t len;
} Held;

enum { OP_CKPT = 0, OP_STOP, OP_PAUSE, OP_ABORT, OP__COUNT };
static const char *const OP_NAME[OP__COUNT] = { "ckpt", "stop", "pause", "abort" };
static const char *const OP_WHAT[OP__COUNT] = { "checkpoint", "destroy", "pause/resume", "abort" };

typedef struct {
    const char *name; /* "ddptop attach", "ddptop stacks": its error lines' first words */
    const char *ep;
    bool control, headless, json;
    double wait_s;
    void *zctx, *sock;
    char ident[64];
    CodecBuf buf;
    Job *job;
    Held *held;
    size_t n_held, held_bytes;
    bool answered; /* ddptop said something (a log) */
    char refused[PROTO_STR_LONG];
    int64_t start_ms, last_heard_ms, last_attach_ms;
    bool flowed;        /* frames from ranks have come */
    bool snapshot_done; /* ddptop's own log after the snapshot has come: frames are live */
    bool ended;
    bool ended_silent; /* ended by silence, not by byes */
    int64_t cmd_id[OP__COUNT];
    int64_t ping_id; /* ddptop's last ping: echoed in "attach" (proof that this viewer reads) */
    ViewTui *tui;
    ViewHeadless hl;
    Note note;
    bool quit;
    /* ddptop stacks: the merged tree ddptop sends in "stacks" log lines */
    bool stacks;
    char *tree;
    size_t tree_len, tree_cap;
    bool tree_done, tree_lost;
    bool tree_asked;   /* t on the screen: an answer is awaited */
    int64_t stacks_id; /* the last "stacks" command's id */
    char tree_head[PROTO_STR_LONG];
} Attach;

/* ---- talking to ddptop ---- */

static void send_cmd(Attach *A, const char *op, int64_t id, int64_t arg)
{
    Msg m;
    char err[160];
    msg_init(&m, MSG_CMD);
    m.t_ns = proto_now_ns();
    m.u.cmd.id = id;
    m.u.cmd.arg = arg;
    snprintf(m.u.cmd.op, sizeof m.u.cmd.op, "%s", op);
    zs_send(A->sock, &m, &A->buf, ZMQ_DONTWAIT, err, sizeof err);
}

static void send_attach(Attach *A)
{
    send_cmd(A, "attach", A->ping_id, A->control ? 1 : 0);
    A->last_attach_ms = mono_ms();
}

/* ddptop's ping: answered at once, so the slot stays ours. */
static void on_ping(Attach *A, const Msg *m)
{
    if (m->kind != MSG_CMD || strcmp(m->u.cmd.op, "ping")) return;
    A->ping_id = m->u.cmd.id;
    send_attach(A);
}

/* c d p a: with --control, sent; read-only, sent as well (ddptop answers
 * with a warning for its own events) and refused here at once. */
static void command(Attach *A, int op)
{
    if (A->ended) {
        note_set(&A->note, mono_ms(), "%s: the job has ended", OP_WHAT[op]);
        return;
    }
    send_cmd(A, OP_NAME[op], ++A->cmd_id[op], 0);
    if (!A->control) {
        note_set(&A->note, mono_ms(), "read-only: %s not sent to the job (ddptop attach --control %s sends commands)",
                 OP_WHAT[op], A->ep);
        return;
    }
    note_set(&A->note, mono_ms(), "%s requested: sent to the job", OP_WHAT[op]);
    if (A->job)
        job_event(A->job, mono_ns(), wall_ns(), -1, EV_INFO, "%s requested from this viewer (--control)", OP_WHAT[op]);
}

/* ---- frames ---- */

/* Every rank has said bye (and nothing else is owed). */
static bool all_bye(const Job *j)
{
    for (int r = 0; r < j->world; r++)
        if (!j->ranks[r].bye) return false;
    return true;
}

/* When a frame's event happened, on both clocks: now for a live frame; for
 * one of the snapshot, the sender's own "t" (the frames are kept byte for
 * byte), so the events, phases and steps it makes keep their times rather
 * than all read as the moment of attaching. A "t" in the future or ages ago
 * (another host's clock) is not believed. */
static void frame_times(const Attach *A, const Msg *m, int64_t *mono, int64_t *wall)
{
    *mono = mono_ns();
    *wall = wall_ns();
    int64_t age = *wall - m->t_ns;
    if (A->snapshot_done || m->t_ns <= 0 || age <= 0 || age >= 7 * 86400 * 1000000000LL) return;
    *mono -= age;
    *wall = m->t_ns;
}

/* ddptop stacks: a part of the tree, or its end. True when m was one. */
static bool on_tree(Attach *A, const Msg *m)
{
    if (!strcmp(m->u.log.level, "stacks-end")) {
        snprintf(A->tree_head, sizeof A->tree_head, "%s", m->u.log.text);
        A->tree_done = true;
        return true;
    }
    if (strcmp(m->u.log.level, "stacks")) return false;
    size_t n = strlen(m->u.log.text);
    if (A->tree_len + n + 1 > A->tree_cap) {
        size_t cap = (A->tree_cap ? A->tree_cap * 2 : 65536) + n;
        char *t = realloc(A->tree, cap);
        if (!t) {
            A->tree_lost = true;
            return true;
        }
        A->tree = t;
        A->tree_cap = cap;
    }
    memcpy(A->tree + A->tree_len, m->u.log.text, n + 1);
    A->tree_len += n;
    return true;
}

/* One frame, or (burst not NULL) one message of that burst. */
static void apply_frame_in(Attach *A, const void *data, size_t len, const Msg *burst)
{
    Job *j = A->job;
    int64_t now, wall;
    Msg m;
    char err[256];
    int rc = burst ? codec_burst_decode(burst, data, len, &m, err, sizeof err)
                   : codec_decode(data, len, &m, err, sizeof err);
    if (rc != 0) {
        if (rc == 1)
            msg_done(&m); /* a kind this build does not know */
        else {
            if (rc == -2) msg_done(&m); /* another rank's, in a burst */
            j->bad_frames++;            /* as the live loop counts it */
            j->version++;
        }
        return;
    }
    if (m.kind == MSG_BURST) {
        /* what ddptop passed on whole: its messages one by one */
        size_t pos = 0, flen;
        const uint8_t *f;
        while (codec_burst_next(&m.u.burst, &pos, &f, &flen)) apply_frame_in(A, f, flen, &m);
        msg_done(&m);
        return;
    }
    frame_times(A, &m, &now, &wall);
    if (m.kind == MSG_LOG && m.rank < 0 && on_tree(A, &m)) {
        msg_done(&m);
        return;
    }
    if (m.kind == MSG_LOG && m.rank < 0) {
        A->snapshot_done = true; /* "attached as viewer N" closes the snapshot */
        /* ddptop's own word to this viewer */
        JobEventLevel lv = !strncmp(m.u.log.level, "warn", 4)  ? EV_WARN
                           : !strncmp(m.u.log.level, "err", 3) ? EV_ERROR
                                                               : EV_INFO;
        job_event(j, mono_ns(), wall_ns(), -1, lv, "%s", m.u.log.text);
        /* a local notice says the same in this viewer's words: it stays */
        if (lv != EV_INFO && !note_text(&A->note, mono_ms())) note_set(&A->note, mono_ms(), "ddptop: %s", m.u.log.text);
        msg_done(&m);
        return;
    }
    if (m.kind == MSG_CMD || m.kind == MSG_SET || m.kind == MSG_GET || m.kind == MSG_WAIT || m.kind == MSG_VAL ||
        m.kind == MSG_NODE) {
        on_ping(A, &m);
        msg_done(&m);
        return;
    }
    A->flowed = true;
    int r = m.rank;
    bool in = r >= 0 && r < j->world;
    /* a rank that ended says hello again: the job was restarted */
    if (m.kind == MSG_HELLO && in && (j->ranks[r].state == RANK_EXITED_OK || j->ranks[r].state == RANK_FAILED)) {
        job_restart(j, now);
        A->ended = false;
    }
    job_apply(j, &m, now, wall);
    /* whether ddptop asked for a pause is not on the wire: what the ranks
     * do is the wish, so no "PAUSING"/"RESUMING" that would never end */
    if (j->pause_wanted != j->paused) job_set_pause_wanted(j, j->paused);
    if (m.kind == MSG_BYE && in) {
        /* the process exit ddptop sees and this viewer does not */
        int st = m.u.bye.status;
        job_rank_exited(j, r, 0, W_EXITCODE(st < 0 || st > 255 ? 1 : st, 0), NULL, now, wall);
    }
    msg_done(&m);
}

static void apply_frame(Attach *A, const void *data, size_t len) { apply_frame_in(A, data, len, NULL); }

/* The first hello: the world is known, the model can be made. Returns -1
 * when the world cannot be shown. */
static int make_model(Attach *A, const Msg *hello)
{
    int world = hello->u.hello.world;
    if (world <= 0 || hello->rank >= world) world = hello->rank + 1;
    if (world <= 0 || world > JOB_MAX_RANKS) {
        fprintf(stderr, "%s: the job says world size %d: more ranks than ddptop shows (%d)\n", A->name,
                (int)hello->u.hello.world, JOB_MAX_RANKS);
        return -1;
    }
    if (!(A->job = job_new(world, mono_ns()))) {
        fprintf(stderr, "%s: out of memory\n", A->name);
        return -1;
    }
    /* "elapsed" counts from the rank's hello, as the job's own screen counts
     * from the launch a moment before, not from attaching; a hello stamped
     * in the future or ages ago (another host's clock) is not believed */
    int64_t age = proto_now_ns() - hello->t_ns;
    if (hello->t_ns > 0 && age > 0 && age < 7 * 86400 * 1000000000LL) A->job->start_ns -= age;
    job_event(A->job, mono_ns(), wall_ns(), -1, EV_INFO, "attached to %s (%s)%s", A->ep,
              A->control ? "--control" : "read-only", A->control ? ": c d p a act on the job" : "");
    return 0;
}

/* One frame from ddptop. Returns -1 on a fatal problem. */
static int on_frame(Attach *A, const unsigned char *data, size_t len)
{
    A->last_heard_ms = mono_ms();
    if (A->ended_silent) {
        A->ended = A->ended_silent = false; /* the link is back */
    }
    if (A->job) {
        apply_frame(A, data, len);
        return 0;
    }
    Msg m;
    char err[256];
    int rc = codec_decode(data, len, &m, err, sizeof err);
    bool hello = rc == 0 && m.kind == MSG_HELLO && m.rank >= 0;
    if (rc == 0) on_ping(A, &m);
    if (rc == 0 && m.kind == MSG_LOG && m.rank < 0) {
        A->answered = true;
        if (!strncmp(m.u.log.text, REFUSED_PREFIX, strlen(REFUSED_PREFIX)))
            snprintf(A->refused, sizeof A->refused, "%s", m.u.log.text);
    }
    if (hello && make_model(A, &m) < 0) {
        msg_done(&m);
        return -1;
    }
    if (rc >= 0) msg_done(&m);
    if (!hello) {
        if (A->n_held >= HELD_MAX || A->held_bytes + len > HELD_MAX_BYTES)
            return 0; /* a job that sends no hello: the wait ends it */
        if (A->n_held % 256 == 0) {
            Held *h = realloc(A->held, (A->n_held + 256) * sizeof *h);
            if (!h) return 0;
            A->held = h;
        }
        unsigned char *copy = malloc(len);
        if (!copy) return 0;
        memcpy(copy, data, len);
        A->held[A->n_held++] = (Held){ copy, len };
        A->held_bytes += len;
        return 0;
    }
    for (size_t i = 0; i < A->n_held; i++) {
        apply_frame(A, A->held[i].data, A->held[i].len);
        free(A->held[i].data);
    }
    free(A->held);
    A->held = NULL;
    A->n_held = A->held_bytes = 0;
    apply_frame(A, data, len);
    return 0;
}

/* Read what is waiting (bounded, so keys stay responsive). */
static int drain(Attach *A)
{
    for (int i = 0; i < 8192; i++) {
        zmq_msg_t msg;
        zmq_msg_init(&msg);
        if (zmq_msg_recv(&msg, A->sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&msg);
            break; /* EAGAIN, EINTR: next turn */
        }
        bool more = zmq_msg_more(&msg);
        int rc = 0;
        if (!more) rc = on_frame(A, zmq_msg_data(&msg), zmq_msg_size(&msg));
        zmq_msg_close(&msg);
        while (more) { /* not ddptop's: one frame per message */
            zmq_msg_t part;
            zmq_msg_init(&part);
            if (zmq_msg_recv(&part, A->sock, 0) < 0 && errno != EINTR) {
                zmq_msg_close(&part);
                break;
            }
            more = zmq_msg_more(&part);
            zmq_msg_close(&part);
        }
        if (rc < 0) return -1;
    }
    return 0;
}

/* Has the job ended? Sets A->ended once. */
static void check_end(Attach *A)
{
    if (!A->job || A->ended) return;
    if (all_bye(A->job)) {
        A->ended = true;
        job_event(A->job, mono_ns(), wall_ns(), -1, EV_INFO, "the job has ended: every rank said bye");
    } else if (A->flowed && mono_ms() - A->last_heard_ms >= ATTACH_SILENT_MS) {
        A->ended = A->ended_silent = true;
        job_event(A->job, mono_ns(), wall_ns(), -1, EV_WARN,
                  "no word from the job for %d s: it has ended, or ddptop or the link is gone",
                  ATTACH_SILENT_MS / 1000);
    }
}

/* ---- the screen ---- */

/* The viewer's rows of the key table (keys.h); f is answered here, c d p
 * a come back from the screen as actions (loop_tui). */
static int on_key(void *ctx, int key, KeyAction act)
{
    Attach *A = ctx;
    (void)key;
    if (act == KEY_ACT_FAULT) {
        note_set(&A->note, mono_ms(),
                 "f: faults are injected from the job's own screen (ddptop run), not from a viewer");
        return 1;
    }
    if (act == KEY_ACT_TREE) {
        if (A->ended) {
            note_set(&A->note, mono_ms(), "t: the job has ended: no stacks to gather");
        } else if (A->tree_asked) {
            note_set(&A->note, mono_ms(), "t: the job is still gathering every rank's stacks");
        } else {
            /* the job gathers (tui/run/stacks.c); loop_tui shows the answer */
            A->tree_asked = true;
            A->tree_done = false;
            A->tree_len = 0;
            if (A->tree) A->tree[0] = '\0';
            send_cmd(A, "stacks", ++A->stacks_id, 0);
            note_set(&A->note, mono_ms(), "t: the job gathers every rank's stacks (two looks, a second apart) ...");
        }
        return 1;
    }
    return 0;
}

static void status_line(Attach *A, char *buf, size_t n)
{
    char what[300];
    const char *note = note_text(&A->note, mono_ms());
    if (note)
        snprintf(what, sizeof what, "%s", note);
    else
        what[0] = '\0';
    if (A->ended) {
        char verdict[JOB_EVENT_TEXT + 512];
        if (A->ended_silent)
            snprintf(verdict, sizeof verdict, "no word from the job for %d s (ended, or the link is gone)",
                     ATTACH_SILENT_MS / 1000);
        else
            job_verdict(A->job, verdict, sizeof verdict);
        snprintf(buf, n, "attached to %s: %s%s%s", A->ep, verdict, what[0] ? " | " : " — q leaves", what);
        return;
    }
    if (what[0])
        snprintf(buf, n, "%s", what);
    else
        snprintf(buf, n, "attached %s to %s — q detaches, the job goes on",
                 A->control ? "with --control" : "(read-only)", A->ep);
}

static int loop_tui(Attach *A)
{
    char err[256], status[JOB_EVENT_TEXT + 1024];
    if (view_tui_open(&A->tui, A->job->world, err, sizeof err)) {
        fprintf(stderr, "ddptop attach: %s (use --headless)\n", err);
        return 2; /* no screen here: bad usage, as for ddptop run */
    }
    view_tui_set_keys(A->tui, A->control ? KEYS_ATTACH_CONTROL : KEYS_ATTACH, on_key, A);
    int64_t last_draw = 0;
    uint64_t drawn_version = (uint64_t)-1;
    bool drawn_ended = false;
    while (!A->quit && !signals_stop_count()) {
        zmq_pollitem_t it = { A->sock, 0, ZMQ_POLLIN, 0 };
        zmq_poll(&it, 1, TURN_MS);
        if (drain(A) < 0) break;
        if (mono_ms() - A->last_attach_ms >= ATTACH_EVERY_MS) send_attach(A);
        check_end(A);
        ViewAction a;
        bool redraw = false;
        if (A->tree_asked && A->tree_done) { /* t's answer: the same page as on the job's screen */
            view_tui_show_stack(A->tui, UI_STACK_TREE, A->tree_head, A->tree && !A->tree_lost ? A->tree : "");
            A->tree_asked = A->tree_done = false;
            redraw = true;
        }
        while ((a = view_tui_poll_key(A->tui, A->job, false)) != VIEW_ACT_NONE) {
            switch (a) {
            case VIEW_ACT_QUIT: A->quit = true; break;
            case VIEW_ACT_CKPT:
                command(A, OP_CKPT);
                redraw = true;
                break;
            case VIEW_ACT_DESTROY:
                command(A, OP_STOP);
                redraw = true;
                break;
            case VIEW_ACT_PAUSE:
                command(A, OP_PAUSE);
                redraw = true;
                break;
            case VIEW_ACT_ABORT:
                command(A, OP_ABORT);
                redraw = true;
                break;
            case VIEW_ACT_REDRAW: redraw = true; break;
            default: break;
            }
        }
        int64_t now = mono_ms();
        bool changed = A->job->version != drawn_version || A->ended != drawn_ended;
        if (redraw || (changed && now - last_draw >= FRAME_MS) || now - last_draw >= 250) {
            status_line(A, status, sizeof status);
            view_tui_draw(A->tui, A->job, mono_ns(), status);
            drawn_version = A->job->version;
            drawn_ended = A->ended;
            last_draw = now;
        }
    }
    view_tui_close(&A->tui);
    return A->ended_silent ? 1 : 0;
}

static int loop_headless(Attach *A)
{
    view_headless_init(&A->hl, stdout, A->json);
    while (!signals_stop_count() && !A->ended) {
        zmq_pollitem_t it = { A->sock, 0, ZMQ_POLLIN, 0 };
        zmq_poll(&it, 1, 50);
        if (drain(A) < 0) return 1;
        if (mono_ms() - A->last_attach_ms >= ATTACH_EVERY_MS) send_attach(A);
        check_end(A);
        view_headless_tick(&A->hl, A->job, mono_ns());
        fflush(stdout);
    }
    if (signals_stop_count() && !A->ended)
        job_event(A->job, mono_ns(), wall_ns(), -1, EV_INFO, "detached from %s: the job goes on", A->ep);
    view_headless_tick(&A->hl, A->job, mono_ns());
    view_headless_summary(&A->hl, A->job, mono_ns());
    fflush(stdout);
    /* a job not seen to end (ddptop killed, the link cut) is no success */
    return A->ended_silent ? 1 : 0;
}

/* ddptop stacks: ask once, then wait for the whole tree (a gathering
 * takes two looks a second apart, each up to 3 s) and print it. */
static int loop_stacks(Attach *A)
{
    send_cmd(A, "stacks", ++A->stacks_id, A->json ? 1 : 0);
    int64_t deadline = mono_ms() + (int64_t)(A->wait_s * 1000) + STACKS_GATHER_MS;
    while (!A->tree_done) {
        if (signals_stop_count()) return 130;
        if (mono_ms() >= deadline) {
            fprintf(stderr, "ddptop stacks: %s: no stacks came within %g s\n", A->ep,
                    (double)(deadline - A->start_ms) / 1000);
            return 1;
        }
        zmq_pollitem_t it = { A->sock, 0, ZMQ_POLLIN, 0 };
        zmq_poll(&it, 1, 50);
        if (drain(A) < 0) return 1;
        if (mono_ms() - A->last_attach_ms >= ATTACH_EVERY_MS) send_attach(A);
    }
    if (A->tree_lost) {
        fprintf(stderr, "ddptop stacks: out of memory\n");
        return 1;
    }
    if (A->json) {
        printf("%s\n", A->tree ? A->tree : "{}");
    } else {
        printf("%s\n%s", A->tree_head, A->tree ? A->tree : "");
    }
    return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
}

/* Until the first hello, or --wait seconds. 0 model made, 1 none (said
 * why), -1 fatal (said why), 2 interrupted. */
static int wait_model(Attach *A)
{
    int64_t deadline = A->start_ms + (int64_t)(A->wait_s * 1000);
    while (!A->job) {
        if (signals_stop_count()) return 2;
        if (A->refused[0]) {
            fprintf(stderr, "%s: %s: %s\n", A->name, A->ep, A->refused);
            return 1;
        }
        if (mono_ms() >= deadline) {
            if (A->answered)
                fprintf(stderr, "%s: ddptop answered at %s, but no rank said hello within %g s\n", A->name, A->ep,
                        A->wait_s);
            else
                fprintf(stderr, "%s: no job answered at %s within %g s (is it running? right endpoint/keys?)\n",
                        A->name, A->ep, A->wait_s);
            return 1;
        }
        if (mono_ms() - A->last_attach_ms >= ATTACH_EVERY_MS) send_attach(A);
        zmq_pollitem_t it = { A->sock, 0, ZMQ_POLLIN, 0 };
        zmq_poll(&it, 1, 50);
        if (drain(A) < 0) return -1;
    }
    return 0;
}

/* ---- command line ---- */

static int bad_as(bool stacks, const char *fmt, const char *arg)
{
    return stacks ? usage_fail("ddptop stacks", "ddptop stacks --help", fmt, arg)
                  : usage_fail("ddptop attach", "ddptop attach --help", fmt, arg);
}
#define bad(fmt, arg) bad_as(stacks, fmt, arg)

static const char HELP[] =
    "usage: ddptop attach ENDPOINT [--control] [--headless [--json]] [--keys FILE] [--wait S]\n"
    "A second screen on a running job: ENDPOINT is the job's control endpoint, as ddptop prints it\n"
    "(\"attach: ddptop attach ENDPOINT\"): ipc://DIR/ctl on the same machine, tcp://HOST:PORT from\n"
    "another one (with the job's key file: --keys FILE or DDPTOP_KEYS=FILE).\n"
    "Read-only by default; --control lets c d p a checkpoint, destroy, pause and abort the job.\n"
    "q or Ctrl-C detaches: the job goes on. --headless prints ddptop run --headless's lines\n"
    "(--json: JSON lines) and exits when the job ends. --wait S: give up when no rank has said\n"
    "hello within S seconds (default 10).\n";

static const char HELP_STACKS[] =
    "usage: ddptop stacks ENDPOINT [--json] [--keys FILE] [--wait S]\n"
    "Every rank's Python stacks (every thread), merged into one tree, from a running job: ENDPOINT\n"
    "as for ddptop attach. ddptop looks twice, a second apart (the ranks dump from their heartbeat\n"
    "thread: no blocking call is interrupted), and prints each frame with the ranks that took it\n"
    "(\"0,2-1023\"), the smaller sets first and marked !, and * on the frames where no rank moved.\n"
    "ddptop's own worker shows its phase and its collective in flight as frames. --json: one JSON\n"
    "object (docs/TUI.md, \"Hangs\"). --wait S: give up when no rank has said hello within S seconds\n"
    "(default 10).\n";

static void random_ident(char *out, size_t n)
{
    unsigned int rnd = 0;
    if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd)
        rnd = (unsigned int)(mono_ns() ^ ((int64_t)getpid() << 16));
    snprintf(out, n, "view-%d-%08x", (int)getpid(), rnd);
}

static void cleanup(Attach *A)
{
    if (A->sock) {
        /* a goodbye, so ddptop forgets this viewer now rather than in 6 s */
        int linger = 200;
        zmq_setsockopt(A->sock, ZMQ_LINGER, &linger, sizeof linger);
        send_cmd(A, "detach", 0, 0);
        zmq_close(A->sock);
    }
    if (A->zctx) zmq_ctx_term(A->zctx);
    for (size_t i = 0; i < A->n_held; i++) free(A->held[i].data);
    free(A->held);
    job_free(&A->job);
    free(A->tree);
    codec_buf_done(&A->buf);
}

static int attach_or_stacks(int argc, char **argv, bool stacks)
{
    Attach A;
    memset(&A, 0, sizeof A);
    A.wait_s = 10;
    A.stacks = stacks;
    A.name = stacks ? "ddptop stacks" : "ddptop attach";
    const char *keys_path = NULL;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(stacks ? HELP_STACKS : HELP, stdout);
            return 0;
        }
        if (stacks && (!strcmp(a, "--control") || !strcmp(a, "--headless"))) {
            return bad("unknown option \"%s\"", a);
        } else if (!strcmp(a, "--control")) {
            A.control = true;
        } else if (!strcmp(a, "--headless")) {
            A.headless = true;
        } else if (!strcmp(a, "--json")) {
            A.json = true;
        } else if (!strcmp(a, "--keys")) {
            if (!v || !*v) return bad("%s: missing key file", a);
            keys_path = v;
            i++;
        } else if (!strcmp(a, "--wait")) {
            if (!v) return bad("%s: missing value", a);
            char *end;
            errno = 0;
            double d = strtod(v, &end);
            if (errno || end == v || *end || !isfinite(d) || d <= 0 || d > 86400) {
                fprintf(stderr, "%s: --wait: expected seconds in (0, 86400], got \"%s\"\n", A.name, v);
                return 2;
            }
            A.wait_s = d;
            i++;
        } else if (a[0] == '-' && a[1]) {
            return bad("unknown option \"%s\"", a);
        } else if (A.ep) {
            return bad("one endpoint at a time (\"%s\" is extra)", a);
        } else {
            A.ep = a;
        }
    }
    if (!A.ep || !*A.ep)
        return bad("%s", stacks ? "which job? (ddptop stacks ENDPOINT: the endpoint ddptop prints as \"attach: ...\")"
                                : "which job? (ddptop attach ENDPOINT: the endpoint ddptop prints as \"attach: ...\")");
    if (A.json && !A.headless && !stacks) return bad("%s needs --headless", "--json");
    bool tcp = !strncmp(A.ep, "tcp://", 6);
    if (!tcp && strncmp(A.ep, "ipc://", 6)) return bad("%s: expected ipc://PATH or tcp://HOST:PORT", A.ep);
    if (!tcp && !A.ep[6]) return bad("%s: expected ipc://PATH", A.ep);
    JobKeys keys;
    if (tcp) {
        char host[256];
        int port = 0;
        if (keys_tcp_split(A.ep, host, sizeof host, &port) || port <= 0)
            return bad("%s: expected tcp://HOST:PORT", A.ep);
        if (!keys_path) {
            const char *env = getenv(KEYS_ENV);
            keys_path = env && *env ? env : NULL;
        }
        if (!keys_path) {
            fprintf(stderr, "%s: %s: a tcp:// job needs its key file: --keys FILE (or %s=FILE)\n", A.name, A.ep,
                    KEYS_ENV);
            return 2;
        }
        char err[512];
        if (keys_read(keys_path, &keys, err, sizeof err)) {
            fprintf(stderr, "%s: %s\n", A.name, err);
            return 2;
        }
    }

    signals_catch_stop(1);

    codec_buf_init(&A.buf);
    random_ident(A.ident, sizeof A.ident);
    int rc = 1;
    char err[512];
    A.zctx = zmq_ctx_new();
    A.sock = A.zctx ? zmq_socket(A.zctx, ZMQ_DEALER) : NULL;
    if (!A.sock) {
        fprintf(stderr, "%s: zeromq: %s\n", A.name, zmq_strerror(errno));
        goto done;
    }
    int zero = 0, hwm = 200000;
    zmq_setsockopt(A.sock, ZMQ_ROUTING_ID, A.ident, strlen(A.ident));
    zmq_setsockopt(A.sock, ZMQ_LINGER, &zero, sizeof zero);
    /* the snapshot comes in bursts; room for it and for a busy job's stream */
    zmq_setsockopt(A.sock, ZMQ_RCVHWM, &hwm, sizeof hwm);
    if (tcp && keys_client_socket(A.sock, &keys, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", A.name, err);
        goto done;
    }
    if (zmq_connect(A.sock, A.ep)) {
        fprintf(stderr, "%s: cannot connect to %s: %s\n", A.name, A.ep, zmq_strerror(errno));
        rc = 2;
        goto done;
    }
    A.start_ms = A.last_heard_ms = mono_ms();
    send_attach(&A);
    int w = wait_model(&A);
    if (w == 2) {
        rc = 0; /* Ctrl-C while waiting: nothing to detach from */
        goto done;
    }
    if (w != 0) goto done;
    if (A.stacks) {
        rc = loop_stacks(&A);
        goto done;
    }
    rc = A.headless ? loop_headless(&A) : loop_tui(&A);
    if (!A.headless && rc != 2) { /* 2: no screen opened, its line said why */
        /* the screen is gone: one line for the terminal */
        char verdict[JOB_EVENT_TEXT + 512];
        job_verdict(A.job, verdict, sizeof verdict);
        if (A.ended)
            printf("ddptop attach: %s: %s\n", A.ep, A.ended_silent ? "no word from the job (ended?)" : verdict);
        else
            printf("ddptop attach: detached from %s (the job goes on)\n", A.ep);
    }
done:
    cleanup(&A);
    return rc;
}
#undef bad

int attach_main(int argc, char **argv) { return attach_or_stacks(argc, argv, false); }
int attach_stacks_main(int argc, char **argv) { return attach_or_stacks(argc, argv, true); }
