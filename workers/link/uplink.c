/* uplink.c — the worker side of ddptop's sockets. See uplink.h.
 *
 * Telemetry never waits on a slow frontend (ZMQ_DONTWAIT, drops counted).
 * It is encoded at once but handed to ZeroMQ in bursts, one per TEL_FLUSH_MS
 * slot of the wall clock, each burst one frame of kind "burst"
 * (docs/PROTOCOL.md), so the frontend wakes a few times a second instead of
 * a few times a step and receives, checks and polls once per burst instead
 * of once per message. The slots are the wall clock's 50 ms marks, the same
 * on every rank: the ranks of a job step together, so their bursts leave
 * together and the frontend's I/O thread serves many in one wake-up instead
 * of waking once per rank (docs/BENCHMARKS.md, "flushes on the 50 ms grid");
 * on a machine with as many ranks as cores every wake-up of another thread
 * preempts some rank, and the others wait for it in the next all-reduce.
 * (A send still costs a few microseconds: ZeroMQ wakes its I/O thread per
 * message whenever that thread has caught up. Measured: about 20 us per
 * step per rank in all, docs/BENCHMARKS.md.) Messages a user must see
 * (phase, ckpt, eval, log, bye) flush the burst first, so the order holds.
 * Store operations are synchronous request/reply over ctl, bounded by their
 * timeout plus a margin so a dead ddptop cannot hang a rank forever.
 * Every ctl message received stamps last_heard_ms; pings stop here.
 * A ddptop that launched us is our parent: its death is a SIGHUP (the
 * parent-death signal, set here in place of the launcher's SIGKILL) and a
 * new getppid(); its stop is state T in /proc/PID/stat, read only once it
 * has been silent past the ping timeout. Once gone, sends no longer wait.
 */
#include "link/uplink.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "wire/codec.h"
#include "net/tstream.h"
#include "net/zsock.h"
#include "base/clock.h"

#define CMD_QUEUE        64
#define TEL_HWM          10000
/* Telemetry burst: out with the first frame of a later 50 ms slot of the
 * wall clock, or at this many frames or bytes; a larger frame (a shard's
 * indices) goes out alone. */
#define TEL_FLUSH_MS     50
#define TEL_BURST_FRAMES 512
#define TEL_BURST_BYTES  (256u << 10)
/* How long ddptop may be late beyond a store op's own timeout. */
#define STORE_MARGIN_MS  5000

struct Uplink {
    void *zctx, *ctl, *tel;
    TStream *ts;        /* the telemetry stream, when ddptop offers one on this host (tel then unused) */
    int rank;
    uint64_t drops;
    CodecBuf buf;
    CodecBuf burst;     /* the burst frame being built (codec_burst_*) */
    int64_t burst_slot; /* the TEL_FLUSH_MS slot of the wall clock the oldest waiting frame came in */
    int64_t cost_ns;    /* time spent in uplink_send / uplink_flush */
    MsgCmd q[CMD_QUEUE];
    int q_head, q_len;
    int64_t last_heard_ms;    /* last ctl message from ddptop */
    int64_t ping_timeout_ms;  /* 0: never judge */
    bool pinged;              /* a ping came: ddptop keeps a heartbeat */
    bool stop_heard;          /* a "stop" came: store waits end */
    int64_t stop_arg;         /* its arg: 1 + the rank whose death ended the job, else 0 */
    pid_t parent;             /* ddptop as our parent, 0: not watched */
    bool gone;                /* final: sends stop waiting */
    bool stopped;             /* ddptop was stopped at the last look */
    int64_t stopped_seen_ms;  /* when it was last seen stopped */
    int64_t stopped_since_ms; /* start of the stop in progress */
    int64_t stopped_total_ms; /* every stop that ended, in all */
};

/* The parent's death, from the SIGHUP handler (one process, one uplink). */
static volatile sig_atomic_t parent_died;
static pid_t watched_parent;

/* The telemetry stream of an ipc:// tel endpoint (tstream.h), unless
 * DDPTOP_TEL_STREAM=0 or there is none (an older ddptop, tcp://, keys):
 * true when telemetry goes there. */
static bool open_stream(Uplink *u, const char *tel_ep, const JobKeys *keys)
{
    char path[300];
    const char *off = getenv("DDPTOP_TEL_STREAM");
    if (keys || (off && !strcmp(off, "0")) || tstream_path(tel_ep, path, sizeof path)) return false;
    return tsc_open(&u->ts, path) == 0;
}

int uplink_open(Uplink **out, const char *ctl_ep, const char *tel_ep, int rank, const JobKeys *keys, char *err,
                size_t errlen)
{
    Uplink *u = calloc(1, sizeof *u);
    if (!u) {
        snprintf(err, errlen, "uplink: out of memory");
        return -1;
    }
    u->rank = rank;
    u->last_heard_ms = mono_ms();
    codec_buf_init(&u->buf);
    codec_buf_init(&u->burst);
    u->zctx = zmq_ctx_new();
    if (!u->zctx) goto zfail;
    u->ctl = zmq_socket(u->zctx, ZMQ_DEALER);
    u->tel = zmq_socket(u->zctx, ZMQ_PUSH);
    if (!u->ctl || !u->tel) goto zfail;
    /* a routing id of this process's own (protocol.h): nobody who connects
     * first can hold it, and ddptop admits it only with our pid */
    char ident[PROTO_RANK_IDENT_MAX];
    uint32_t nonce = 0;
    if (getrandom(&nonce, sizeof nonce, 0) != (ssize_t)sizeof nonce) nonce = (uint32_t)mono_ns() ^ (uint32_t)getpid();
    int n = proto_rank_ident(ident, sizeof ident, rank, getpid(), nonce);
    if (n < 0) {
        snprintf(err, errlen, "uplink: no routing id for rank %d", rank);
        goto fail;
    }
    int hwm = TEL_HWM, zero = 0;
    if (zmq_setsockopt(u->ctl, ZMQ_ROUTING_ID, ident, (size_t)n) ||
        zmq_setsockopt(u->tel, ZMQ_SNDHWM, &hwm, sizeof hwm) || zmq_setsockopt(u->ctl, ZMQ_LINGER, &zero, sizeof zero))
        goto zfail;
    /* CURVE options must be set before connect. */
    if (keys && (keys_client_socket(u->ctl, keys, err, errlen) || keys_client_socket(u->tel, keys, err, errlen)))
        goto fail;
    if (zmq_connect(u->ctl, ctl_ep)) {
        snprintf(err, errlen, "uplink: cannot connect ctl to %s: %s", ctl_ep, zmq_strerror(errno));
        goto fail;
    }
    if (open_stream(u, tel_ep, keys)) {
        /* telemetry over the stream: ZeroMQ's tel stays unconnected */
    } else if (zmq_connect(u->tel, tel_ep)) {
        snprintf(err, errlen, "uplink: cannot connect tel to %s: %s", tel_ep, zmq_strerror(errno));
        goto fail;
    }
    *out = u;
    return 0;
zfail:
    snprintf(err, errlen, "uplink: zeromq: %s", zmq_strerror(errno));
fail:
    uplink_close(&u, 0);
    return -1;
}

void uplink_close(Uplink **up, int linger_ms)
{
    Uplink *u = up ? *up : NULL;
    if (!u) return;
    if (u->tel) uplink_flush(u);
    if (u->gone) linger_ms = 0; /* nobody to flush to */
    tsc_close(&u->ts, linger_ms);
    if (u->tel) {
        zmq_setsockopt(u->tel, ZMQ_LINGER, &linger_ms, sizeof linger_ms);
        zmq_close(u->tel);
    }
    if (u->ctl) zmq_close(u->ctl);
    if (u->zctx) zmq_ctx_term(u->zctx);
    codec_buf_done(&u->buf);
    codec_buf_done(&u->burst);
    free(u);
    *up = NULL;
}

/* Returns now (wall-clock ns), the message's t unless it came with one. */
static int64_t stamp(Uplink *u, Msg *m)
{
    int64_t now = proto_now_ns();
    m->rank = u->rank;
    if (!m->t_ns) m->t_ns = now;
    return now;
}

static int send_now(Uplink *u, const void *data, size_t len)
{
    if (u->ts) return tsc_send(u->ts, data, len);
    for (;;) {
        if (zmq_send(u->tel, data, len, ZMQ_DONTWAIT) >= 0) return 0;
        if (errno != EINTR) return 1;
    }
}

/* Hand the waiting burst to ZeroMQ as one frame; a full queue drops every
 * message in it. */
static void flush_burst(Uplink *u)
{
    uint32_t n = codec_burst_count(&u->burst);
    if (n == 0) return;
    codec_burst_finish(&u->burst, proto_now_ns());
    if (send_now(u, u->burst.data, u->burst.len)) u->drops += n;
    codec_buf_reset(&u->burst);
}

void uplink_flush(Uplink *u)
{
    /* what the stream's socket did not take at once goes with the next flush */
    if (!codec_burst_count(&u->burst) && !(u->ts && tsc_flush(u->ts))) return;
    int64_t t0 = mono_ns();
    flush_burst(u);
    if (u->ts) tsc_flush(u->ts);
    u->cost_ns += mono_ns() - t0;
}

void uplink_flush_wait(Uplink *u, int timeout_ms)
{
    uplink_flush(u);
    if (u->ts) {
        tsc_wait(u->ts, timeout_ms);
        return;
    }
    struct timespec ts = { timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) && errno == EINTR) {}
}

static int queue_frame(Uplink *u, Msg *m);

int uplink_send(Uplink *u, Msg *m)
{
    int64_t t0 = mono_ns();
    int rc = queue_frame(u, m);
    u->cost_ns += mono_ns() - t0;
    return rc;
}

/* Add the frame in u->buf to the burst, starting one if none waits. */
static int burst_add(Uplink *u, int64_t slot)
{
    char err[160];
    if (!codec_burst_count(&u->burst)) {
        if (codec_burst_begin(&u->burst, u->rank, err, sizeof err)) return -1;
        u->burst_slot = slot;
    }
    return codec_burst_add(&u->burst, u->buf.data, u->buf.len, err, sizeof err);
}

static int queue_frame(Uplink *u, Msg *m)
{
    char err[160];
    int64_t slot = stamp(u, m) / ((int64_t)TEL_FLUSH_MS * 1000000);
    if (codec_encode(m, &u->buf, err, sizeof err) < 0) {
        u->drops++;
        return 1;
    }
    if (u->buf.len > TEL_BURST_BYTES) {
        flush_burst(u);
        if (send_now(u, u->buf.data, u->buf.len)) {
            u->drops++;
            return 1;
        }
        return 0;
    }
    /* full (frames or bytes): send what waits and start again */
    /* a frame of a later slot (or an earlier one: the clock was set back)
     * sends what waits first; it starts the next burst */
    if (codec_burst_count(&u->burst) && slot != u->burst_slot) flush_burst(u);
    if (burst_add(u, slot) < 0 && (flush_burst(u), burst_add(u, slot) < 0)) {
        u->drops++;
        return 1;
    }
    if (codec_burst_count(&u->burst) >= TEL_BURST_FRAMES || u->burst.len >= TEL_BURST_BYTES) flush_burst(u);
    return 0;
}

static bool front_stopped_now(Uplink *u);

/* The watched parent died (final). */
static bool parent_gone(Uplink *u)
{
    if (u->parent && (parent_died || getppid() != u->parent)) u->gone = true;
    return u->gone;
}

int uplink_send_important(Uplink *u, Msg *m)
{
    char err[160];
    stamp(u, m);
    void *s = (m->kind == MSG_HELLO) ? u->ctl : u->tel;
    uplink_flush(u); /* what came before goes first (and is telemetry's cost) */
    int64_t deadline = mono_ms() + 2000;
    if (s == u->tel && u->ts) {
        /* the stream queues it behind what waits; only a full queue waits */
        if (codec_encode(m, &u->buf, err, sizeof err) < 0) {
            u->drops++;
            return 1;
        }
        while (tsc_send(u->ts, u->buf.data, u->buf.len)) {
            if (tsc_broken(u->ts) || mono_ms() >= deadline || u->gone || u->stopped || front_stopped_now(u)) {
                u->drops++;
                return 1;
            }
            tsc_wait(u->ts, 5);
        }
        tsc_flush(u->ts);
        return 0;
    }
    for (;;) {
        int rc = zs_send(s, m, &u->buf, ZMQ_DONTWAIT, err, sizeof err);
        if (rc == 0) return 0;
        /* A ddptop that is gone or stopped will not make room: no wait. */
        if (rc < 0 || mono_ms() >= deadline || u->gone || u->stopped || front_stopped_now(u)) {
            u->drops++;
            return 1;
        }
        struct timespec ts = { 0, 5 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
}

uint64_t uplink_drops(const Uplink *u) { return u->drops; }

int64_t uplink_cost_ns(const Uplink *u) { return u->cost_ns; }

/* Everything from ddptop over ctl passes here: it is alive. */
static void heard(Uplink *u) { u->last_heard_ms = mono_ms(); }

static void queue_cmd(Uplink *u, const MsgCmd *c)
{
    if (!strcmp(c->op, "ping")) {
        u->pinged = true;
        return;
    }
    /* ddptop asks only the torch adapter's ranks for their stacks (this
     * worker's are its phase and collective in its beats): nothing to
     * queue, as for any op a newer ddptop sends that the trainer ignores */
    if (!strcmp(c->op, "stacks")) return;
    if (!strcmp(c->op, "stop") && !u->stop_heard) {
        u->stop_heard = true;
        u->stop_arg = c->arg;
    }
    if (u->q_len == CMD_QUEUE) return; /* ddptop sends a handful; a flood is dropped */
    u->q[(u->q_head + u->q_len) % CMD_QUEUE] = *c;
    u->q_len++;
}

/* Send a store request and wait for the "val" reply for `key`, queueing any
 * command that arrives meanwhile. Returns 0 with *reply filled (caller
 * msg_done), 1 on timeout, -1 on error. */
static int store_call(Uplink *u, Msg *req, int64_t timeout_ms, Msg *reply, char *err, size_t errlen)
{
    stamp(u, req);
    if (zs_send(u->ctl, req, &u->buf, 0, err, errlen) != 0) {
        if (!*err) snprintf(err, errlen, "store: cannot send %s", msg_kind_name(req->kind));
        return -1;
    }
    int64_t deadline = mono_ms() + timeout_ms + STORE_MARGIN_MS;
    for (;;) {
        /* A rank in the rendezvous acts on a stop (ddptop sends one when a
         * peer died there) and on ddptop's loss at once, not at the timeout. */
        if (u->stop_heard) {
            snprintf(err, errlen, "store: stop requested by ddptop while waiting for \"%s\"", req->u.store.key);
            return -1;
        }
        /* (Not uplink_front: it would read, and drop, the reply.) */
        if (parent_gone(u)) {
            snprintf(err, errlen, "store: ddptop (pid %d) is gone while waiting for \"%s\"", (int)u->parent,
                     req->u.store.key);
            return -1;
        }
        int64_t left = deadline - mono_ms();
        if (left <= 0) {
            snprintf(err, errlen, "store: no reply from ddptop for \"%s\" within %lld ms", req->u.store.key,
                     (long long)(timeout_ms + STORE_MARGIN_MS));
            return 1;
        }
        zmq_pollitem_t it = { u->ctl, 0, ZMQ_POLLIN, 0 };
        int n = zmq_poll(&it, 1, (long)(left > 1000 ? 1000 : left));
        if (n < 0) {
            if (errno == EINTR) continue;
            snprintf(err, errlen, "store: poll: %s", zmq_strerror(errno));
            return -1;
        }
        if (n == 0) continue;
        Msg m;
        char rerr[160];
        int rc = zs_recv(u->ctl, &m, ZMQ_DONTWAIT, rerr, sizeof rerr);
        if (rc < 0) {
            snprintf(err, errlen, "store: %s", rerr);
            return -1;
        }
        if (rc != 0) continue;
        heard(u);
        if (m.kind == MSG_CMD) {
            queue_cmd(u, &m.u.cmd);
        } else if (m.kind == MSG_VAL && !strcmp(m.u.store.key, req->u.store.key)) {
            *reply = m;
            return 0;
        }
        msg_done(&m);
    }
}

int uplink_store_set(void *ctx, const char *key, const void *val, size_t len, char *err, size_t errlen)
{
    Uplink *u = ctx;
    Msg req, rep;
    msg_init(&req, MSG_SET);
    snprintf(req.u.store.key, sizeof req.u.store.key, "%s", key);
    req.u.store.val = (uint8_t *)val; /* borrowed for the send only */
    req.u.store.val_len = (uint32_t)len;
    int rc = store_call(u, &req, 0, &rep, err, errlen);
    if (rc != 0) return -1;
    bool ok = rep.u.store.ok;
    if (!ok)
        snprintf(err, errlen, "store: ddptop refused set \"%s\"%s%s", key, rep.u.store.error[0] ? ": " : "",
                 rep.u.store.error);
    msg_done(&rep);
    if (!ok) return -1;
    return 0;
}

int uplink_store_get(void *ctx, const char *key, void **val, size_t *len, int64_t timeout_ms, char *err, size_t errlen)
{
    Uplink *u = ctx;
    Msg req, rep;
    msg_init(&req, MSG_GET);
    snprintf(req.u.store.key, sizeof req.u.store.key, "%s", key);
    req.u.store.timeout_ms = timeout_ms;
    int rc = store_call(u, &req, timeout_ms, &rep, err, errlen);
    if (rc != 0) return rc;
    if (!rep.u.store.ok) {
        msg_done(&rep);
        snprintf(err, errlen, "store: key \"%s\" did not appear within %lld ms", key, (long long)timeout_ms);
        return 1;
    }
    /* Hand the decoded value over instead of copying it. */
    *val = rep.u.store.val;
    *len = rep.u.store.val_len;
    rep.u.store.val = NULL;
    rep.u.store.val_len = 0;
    if (!*val) *val = malloc(1);
    msg_done(&rep);
    return 0;
}

/* Read one waiting ctl message, queueing a command. Returns 0 when one was
 * read, 1 when none waits, -1 on a socket error. */
static int read_ctl(Uplink *u)
{
    Msg m;
    char err[160];
    int rc = zs_recv(u->ctl, &m, ZMQ_DONTWAIT, err, sizeof err);
    if (rc < 0 || rc == 1) return rc;
    heard(u);
    if (rc == 2) return 0;
    if (m.kind == MSG_CMD) queue_cmd(u, &m.u.cmd);
    msg_done(&m);
    return 0;
}

int uplink_next_cmd(Uplink *u, MsgCmd *out)
{
    for (;;) {
        if (u->q_len) {
            *out = u->q[u->q_head];
            u->q_head = (u->q_head + 1) % CMD_QUEUE;
            u->q_len--;
            return 1;
        }
        int rc = read_ctl(u);
        if (rc) return rc < 0 ? -1 : 0;
    }
}

void uplink_set_ping_timeout(Uplink *u, int64_t timeout_ms) { u->ping_timeout_ms = timeout_ms; }

bool uplink_stop_heard(const Uplink *u) { return u->stop_heard; }

int uplink_stop_dead_rank(const Uplink *u)
{
    return u->stop_heard && u->stop_arg > 0 && u->stop_arg <= INT_MAX ? (int)(u->stop_arg - 1) : -1;
}

bool uplink_wait_stop(Uplink *u, int64_t timeout_ms)
{
    int64_t deadline = mono_ms() + timeout_ms;
    while (!u->stop_heard && !parent_gone(u)) {
        int64_t left = deadline - mono_ms();
        if (left <= 0) break;
        zmq_pollitem_t it = { u->ctl, 0, ZMQ_POLLIN, 0 };
        if (zmq_poll(&it, 1, (long)(left < 50 ? left : 50)) < 0 && errno != EINTR) break;
        for (int k = 0; k < 1024 && read_ctl(u) == 0; k++) {}
    }
    return u->stop_heard;
}

int uplink_store_interrupted(void *ctx, char *why, size_t whylen)
{
    Uplink *u = ctx;
    for (int k = 0; k < 1024 && read_ctl(u) == 0; k++) {}
    if (u->stop_heard) {
        int dead = uplink_stop_dead_rank(u);
        if (dead >= 0)
            snprintf(why, whylen, "ddptop stopped the job: rank %d died", dead);
        else
            snprintf(why, whylen, "ddptop stopped the job");
        return 1;
    }
    if (parent_gone(u)) {
        snprintf(why, whylen, "ddptop (pid %d) is gone", (int)u->parent);
        return 1;
    }
    return 0;
}

/* SIGHUP: the parent-death signal (or a stray hang-up: then the parent is
 * still ours and nothing happens). Async-signal-safe calls only. */
static void on_hup(int sig)
{
    (void)sig;
    if (watched_parent && getppid() != watched_parent) {
        parent_died = 1;
        alarm(UPLINK_GONE_BACKSTOP_S);
    }
}

bool uplink_watch_parent(Uplink *u)
{
    int sig = 0;
    if (prctl(PR_GET_PDEATHSIG, &sig) || sig == 0) return false;
    pid_t p = getppid();
    if (p <= 1) return false;
    watched_parent = p;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_hup;
    sa.sa_flags = SA_RESTART; /* Gloo's and ZeroMQ's calls go on undisturbed */
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGHUP, &sa, NULL) || prctl(PR_SET_PDEATHSIG, SIGHUP)) return false;
    u->parent = p;
    /* Died before the new signal was armed: no signal will come. */
    if (getppid() != p) on_hup(SIGHUP);
    return true;
}

/* The parent's state letter from /proc/PID/stat ("pid (comm) S ..."; comm
 * may hold spaces and parentheses, hence the last ')'), 0 when gone. */
static char proc_state(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *rp = strrchr(buf, ')');
    return rp && rp[1] == ' ' ? rp[2] : 0;
}

/* Looks at /proc: is the watched parent stopped? Marks when it was seen so. */
static bool front_stopped_now(Uplink *u)
{
    if (!u->parent) return false;
    char s = proc_state(u->parent);
    if (s != 'T' && s != 't') return false;
    u->stopped_seen_ms = mono_ms();
    return true;
}

int64_t uplink_stopped_ms(const Uplink *u) { return u->stopped_total_ms; }

/* While ddptop is known stopped, /proc is read at most this often. */
#define STOPPED_LOOK_MS 200

/* A frame ddptop sent down the telemetry stream (its pings, when this rank
 * is on the stream): heard, and a command queued as on ctl. */
static void stream_frame(void *ctx, const uint8_t *frame, size_t len)
{
    Uplink *u = ctx;
    Msg m;
    char err[160];
    if (codec_decode(frame, len, &m, err, sizeof err) == 0) {
        heard(u);
        if (m.kind == MSG_CMD) queue_cmd(u, &m.u.cmd);
    }
    msg_done(&m);
}

UplinkFront uplink_front(Uplink *u, char *why, size_t whylen)
{
    char tmp[8];
    if (!why) why = tmp, whylen = sizeof tmp;
    if (u->gone) {
        snprintf(why, whylen, "ddptop is gone");
        return UPLINK_FRONT_GONE;
    }
    while (read_ctl(u) == 0) {}
    if (u->ts) tsc_read(u->ts, stream_frame, u);
    if (parent_gone(u)) {
        snprintf(why, whylen, "ddptop (pid %d) is gone", (int)u->parent);
        return UPLINK_FRONT_GONE;
    }
    if (!u->pinged || u->ping_timeout_ms <= 0) return UPLINK_FRONT_OK;
    int64_t now = mono_ms();
    if (u->stopped) {
        if (now - u->stopped_seen_ms < STOPPED_LOOK_MS || front_stopped_now(u)) {
            snprintf(why, whylen, "ddptop (pid %d) is stopped", (int)u->parent);
            return UPLINK_FRONT_STOPPED;
        }
        /* Running again: a whole ping timeout to catch up and ping. */
        u->stopped = false;
        u->stopped_total_ms += now - u->stopped_since_ms;
        u->last_heard_ms = now;
        return UPLINK_FRONT_OK;
    }
    int64_t silent = now - u->last_heard_ms;
    if (silent <= u->ping_timeout_ms) return UPLINK_FRONT_OK;
    if (front_stopped_now(u)) {
        u->stopped = true;
        u->stopped_since_ms = u->last_heard_ms; /* silent since then */
        snprintf(why, whylen, "ddptop (pid %d) is stopped", (int)u->parent);
        return UPLINK_FRONT_STOPPED;
    }
    u->gone = true;
    snprintf(why, whylen, "nothing from ddptop for %.1f s (DDPTOP_PING_TIMEOUT)", silent / 1e3);
    return UPLINK_FRONT_GONE;
}
