/* viewers.c — screens attached to a running job, ddptop's side. See
 * viewers.h (the wire is in docs/PROTOCOL.md, "Attached viewers").
 *
 * Frames are kept as received, in reference-counted blobs: the snapshot
 * holds one reference per slot (a rank's last hello, phase, shard, ckpt,
 * bye, its recent steps; the job's recent distinct evals and last log
 * lines), and each
 * viewer's outbound queue one per queued frame, so a frame shared by the
 * snapshot and sixteen queues exists once.
 *
 * Why a queue: a newcomer's snapshot can be thousands of frames (a hello,
 * a phase, a shard and a step per rank), more than a ROUTER pipe holds by
 * default (1000 messages), and the ROUTER drops silently when it is full.
 * So the snapshot goes out in bursts of VIEWERS_BURST frames, at most one
 * burst per viewer every VIEWERS_BURST_GAP_NS (from viewers_on_frame,
 * viewers_handle and viewers_tick), and frames that arrive meanwhile wait
 * behind it, in order. A viewer with nothing queued gets frames at once.
 * Nothing here ever waits on a socket (ZMQ_DONTWAIT throughout); a viewer
 * whose pipe is full (ctl is ZMQ_ROUTER_MANDATORY) keeps its frames queued,
 * in order, rather than losing them.
 *
 * Main thread only (the ctl socket's owner).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "base/clock.h"
#include "attach/server.h"

#include <errno.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zmq.h>

#include "net/zsock.h"

#define VIEWERS_MAX             16
/* Forgotten when it has not answered a ping this long: a viewer echoes
 * the id of ddptop's last ping in its "attach" (every second), so a peer
 * that re-sends "attach" without reading what it is sent loses its slot.
 * A newcomer answers a ping before it gets one (the ping's id a keyed hash
 * of its routing id: nothing to remember for peers that never answer), so
 * such peers cannot take the slots back either. */
#define VIEWERS_TIMEOUT_MS      6000
#define VIEWERS_PING_MS         1000
/* Snapshot bounds: shards larger than this are not kept (a viewer sees
 * the next epoch's), nor anything once the total would pass the cap. */
#define VIEWERS_SHARD_MAX_BYTES (1u << 20)
#define VIEWERS_SNAP_MAX_BYTES  (64u << 20)
/* Recent steps kept for the loss chart: about this many over all ranks,
 * at least one and at most VIEWERS_STEPS_PER_RANK per rank. */
#define VIEWERS_STEPS_TOTAL     2048
#define VIEWERS_STEPS_PER_RANK  256
#define VIEWERS_EVALS           16
/* The job's last log lines (warnings, fault notes), whatever the rank. */
#define VIEWERS_LOGS            32
/* Outbound queue bounds per viewer; past them frames are dropped (counted). */
#define VIEWERS_QUEUE_MAX       65536
#define VIEWERS_QUEUE_MAX_BYTES (32u << 20)
/* Under half the ROUTER's 1000-frame pipe: a reader's credit comes back
 * 500 frames at a time, so bursts of 500 fit only while nothing else (a
 * ping, a log) shares the pipe; 400 leaves room for those. */
#define VIEWERS_BURST           400
#define VIEWERS_BURST_GAP_NS    2000000LL

typedef struct {
    int refs;
    size_t len, cap; /* cap: the bytes data[] has room for */
    unsigned char data[];
} Blob;

typedef struct {
    Blob *hello, *info, *phase, *shard, *ckpt, *bye;
    Blob **steps; /* ring of step_keep */
    int steps_head, steps_len;
} SnapRank;

typedef struct {
    Blob *blob;
    int64_t epoch, step;
} SnapEval;

typedef struct {
    bool used;
    unsigned char ident[ZS_IDENT_MAX];
    size_t ident_len;
    int seq;  /* viewer 1, 2, ... in attach order */
    long pid; /* from "view-<pid>-...", 0 unknown */
    bool control;
    int64_t last_ms;    /* last heard, caller's clock */
    int64_t alive_ms;   /* attached, or sent the ping it last answered */
    int64_t ping_id[2]; /* the last two pings sent ([0] newest) */
    int64_t ping_ms[2]; /* when */
    int64_t last_id[5]; /* highest command id seen per op */
    Blob **q;           /* ring of q_cap */
    size_t q_head, q_len, q_cap, q_bytes;
    int64_t pump_ns; /* last burst */
    uint64_t drops;
} Viewer;

struct Viewers {
    int world;
    SnapRank *ranks; /* [world] */
    int step_keep;
    SnapEval evals[VIEWERS_EVALS]; /* ring, oldest first from evals_head */
    int evals_head, evals_len;
    Blob *logs[VIEWERS_LOGS]; /* ring, oldest first from logs_head */
    int logs_head, logs_len;
    size_t snap_bytes;
    uint64_t skipped; /* frames not kept for the snapshot (size caps) */
    uint64_t bad;     /* malformed frames (neither kept nor forwarded) */
    uint64_t reused;  /* frames kept in a slot's own blob, without an allocation */
    Viewer v[VIEWERS_MAX];
    int n; /* attached */
    int next_seq;
    uint64_t drops;
    void *router;    /* the ctl ROUTER last passed in: viewers_tick pumps through it */
    uint64_t rng;    /* ping ids: not guessable from the clock */
    uint64_t secret; /* keys a newcomer's ping id */
    CodecBuf buf;
};

/* ---- blobs ---- */

/* Room for len bytes rounded up to 64, so a slot's next frame of about the
 * same size (a step whose numbers grew a digit) fits in the same blob. */
static Blob *blob_new(const void *data, size_t len)
{
    size_t cap = (len + 63) & ~(size_t)63;
    Blob *b = malloc(sizeof *b + cap);
    if (!b) return NULL;
    b->refs = 1;
    b->len = len;
    b->cap = cap;
    memcpy(b->data, data, len);
    return b;
}

static Blob *blob_ref(Blob *b)
{
    if (b) b->refs++;
    return b;
}

static void blob_unref(Blob *b)
{
    if (b && --b->refs == 0) free(b);
}

/* Put b (one reference, taken over) in *slot, releasing what was there;
 * the snapshot's byte count follows. */
static void slot_set(Viewers *v, Blob **slot, Blob *b)
{
    if (*slot) {
        v->snap_bytes -= (*slot)->len;
        blob_unref(*slot);
    }
    *slot = b;
    if (b) v->snap_bytes += b->len;
}

/* The frame into *slot: copied over the blob already there when the slot
 * holds the only reference (no viewer's queue, no caller) and it has room,
 * so a job's steady stream of steps keeps the same blobs (no malloc, no
 * free per message); else into a new blob. Returns the slot's blob, or
 * NULL out of memory (the slot then unchanged). */
static Blob *slot_put(Viewers *v, Blob **slot, const void *frame, size_t len)
{
    Blob *b = *slot;
    if (b && b->refs == 1 && b->cap >= len) {
        v->snap_bytes = v->snap_bytes - b->len + len;
        memcpy(b->data, frame, len);
        b->len = len;
        v->reused++;
        return b;
    }
    if (!(b = blob_new(frame, len))) return NULL;
    slot_set(v, slot, b);
    return b;
}

/* ---- lifetime ---- */

Viewers *viewers_new(int world)
{
    if (world <= 0) return NULL;
    Viewers *v = calloc(1, sizeof *v);
    if (!v) return NULL;
    v->world = world;
    v->ranks = calloc((size_t)world, sizeof *v->ranks);
    int keep = VIEWERS_STEPS_TOTAL / world;
    v->step_keep = keep < 1 ? 1 : keep > VIEWERS_STEPS_PER_RANK ? VIEWERS_STEPS_PER_RANK : keep;
    if (!v->ranks) goto fail;
    for (int r = 0; r < world; r++)
        if (!(v->ranks[r].steps = calloc((size_t)v->step_keep, sizeof *v->ranks[r].steps))) goto fail;
    codec_buf_init(&v->buf);
    v->rng = (uint64_t)mono_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)v;
    v->secret = v->rng * 0x9e3779b97f4a7c15ull ^ (uint64_t)wall_ns();
    if (!v->rng) v->rng = 1;
    return v;
fail:
    if (v->ranks)
        for (int r = 0; r < world; r++) free(v->ranks[r].steps);
    free(v->ranks);
    free(v);
    return NULL;
}

static void queue_clear(Viewer *w)
{
    for (size_t i = 0; i < w->q_len; i++) blob_unref(w->q[(w->q_head + i) % w->q_cap]);
    w->q_head = w->q_len = w->q_bytes = 0;
}

static void forget(Viewers *v, Viewer *w)
{
    queue_clear(w);
    free(w->q);
    memset(w, 0, sizeof *w);
    v->n--;
}

void viewers_free(Viewers **pv)
{
    Viewers *v = pv ? *pv : NULL;
    if (!v) return;
    for (int i = 0; i < VIEWERS_MAX; i++)
        if (v->v[i].used) forget(v, &v->v[i]);
    for (int r = 0; r < v->world; r++) {
        SnapRank *s = &v->ranks[r];
        slot_set(v, &s->hello, NULL);
        slot_set(v, &s->info, NULL);
        slot_set(v, &s->phase, NULL);
        slot_set(v, &s->shard, NULL);
        slot_set(v, &s->ckpt, NULL);
        slot_set(v, &s->bye, NULL);
        for (int k = 0; k < v->step_keep; k++) slot_set(v, &s->steps[k], NULL);
        free(s->steps);
    }
    for (int i = 0; i < VIEWERS_EVALS; i++) slot_set(v, &v->evals[i].blob, NULL);
    for (int i = 0; i < VIEWERS_LOGS; i++) slot_set(v, &v->logs[i], NULL);
    free(v->ranks);
    codec_buf_done(&v->buf);
    free(v);
    *pv = NULL;
}

bool viewers_is_viewer_ident(const void *ident, size_t ident_len)
{
    return ident && ident_len >= 5 && memcmp(ident, "view-", 5) == 0;
}

int viewers_count(const Viewers *v) { return v ? v->n : 0; }

uint64_t viewers_drops(const Viewers *v) { return v ? v->drops : 0; }

uint64_t viewers_reused(const Viewers *v) { return v ? v->reused : 0; }

/* ---- sending ---- */

/* One frame to one viewer, never waiting: 0 sent, 1 its pipe is full (ctl
 * is ZMQ_ROUTER_MANDATORY, viewers_setup_router: EAGAIN, nothing lost, send
 * it later), -1 not sent (counted). */
static int send_now(Viewers *v, void *router, Viewer *w, const void *data, size_t len)
{
    if (zmq_send(router, w->ident, w->ident_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0) {
        if (zmq_send(router, data, len, ZMQ_DONTWAIT) >= 0) return 0;
    } else if (zmq_errno() == EAGAIN)
        return 1;
    w->drops++;
    v->drops++;
    return -1;
}

void viewers_setup_router(void *router)
{
    int one = 1;
    zmq_setsockopt(router, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
}

/* Queue one reference to b behind what w is still owed. */
static void enqueue(Viewers *v, Viewer *w, Blob *b)
{
    if (w->q_len >= VIEWERS_QUEUE_MAX || w->q_bytes + b->len > VIEWERS_QUEUE_MAX_BYTES) {
        w->drops++;
        v->drops++;
        return;
    }
    if (w->q_len == w->q_cap) {
        size_t cap = w->q_cap ? w->q_cap * 2 : 256;
        Blob **q = malloc(cap * sizeof *q);
        if (!q) {
            w->drops++;
            v->drops++;
            return;
        }
        for (size_t i = 0; i < w->q_len; i++) q[i] = w->q[(w->q_head + i) % w->q_cap];
        free(w->q);
        w->q = q;
        w->q_cap = cap;
        w->q_head = 0;
    }
    w->q[(w->q_head + w->q_len) % w->q_cap] = blob_ref(b);
    w->q_len++;
    w->q_bytes += b->len;
}

/* A burst of w's queue, unless one went out too recently (force: now). */
static void pump(Viewers *v, void *router, Viewer *w, bool force)
{
    if (!router || w->q_len == 0) return;
    int64_t now = mono_ns();
    if (!force && now - w->pump_ns < VIEWERS_BURST_GAP_NS) return;
    w->pump_ns = now;
    for (int i = 0; i < VIEWERS_BURST && w->q_len > 0; i++) {
        Blob *b = w->q[w->q_head];
        if (send_now(v, router, w, b->data, b->len) == 1) break; /* full: the rest waits for the next pump */
        w->q_head = (w->q_head + 1) % w->q_cap;
        w->q_len--;
        w->q_bytes -= b->len;
        blob_unref(b);
    }
}

/* A message ddptop itself says to one viewer (a log line). */
static void say(Viewers *v, void *router, const void *ident, size_t ident_len, const char *level, const char *text)
{
    Msg m;
    char err[128];
    msg_init(&m, MSG_LOG);
    m.t_ns = proto_now_ns();
    snprintf(m.u.log.level, sizeof m.u.log.level, "%s", level);
    snprintf(m.u.log.text, sizeof m.u.log.text, "%s", text);
    zs_send_to(router, ident, ident_len, &m, &v->buf, ZMQ_DONTWAIT, err, sizeof err);
}

/* A log line of ddptop's to viewer w, in order with what it is still owed:
 * through its queue when that is not empty. */
static void tell(Viewers *v, void *router, Viewer *w, const char *level, const char *text)
{
    if (w->q_len == 0) {
        say(v, router, w->ident, w->ident_len, level, text);
        return;
    }
    Msg lm;
    char err[128];
    msg_init(&lm, MSG_LOG);
    lm.t_ns = proto_now_ns();
    snprintf(lm.u.log.level, sizeof lm.u.log.level, "%s", level);
    snprintf(lm.u.log.text, sizeof lm.u.log.text, "%s", text);
    Blob *b;
    if (codec_encode(&lm, &v->buf, err, sizeof err) == 0 && (b = blob_new(v->buf.data, v->buf.len))) {
        enqueue(v, w, b);
        blob_unref(b);
    }
}

/* Every rank's latest message of one kind: the SnapRank member at off. */
static void enqueue_each_rank(Viewers *v, Viewer *w, size_t off)
{
    for (int r = 0; r < v->world; r++) {
        Blob *b = *(Blob **)((char *)&v->ranks[r] + off);
        if (b) enqueue(v, w, b);
    }
}

/* The snapshot, in the order a fresh job model digests it: hellos (the
 * ranks and the job's shape), infos (a script's model and data), phases, shards, checkpoints, log lines,
 * evals, steps (oldest first), byes. */
static void enqueue_snapshot(Viewers *v, Viewer *w)
{
    enqueue_each_rank(v, w, offsetof(SnapRank, hello));
    enqueue_each_rank(v, w, offsetof(SnapRank, info));
    enqueue_each_rank(v, w, offsetof(SnapRank, phase));
    enqueue_each_rank(v, w, offsetof(SnapRank, shard));
    enqueue_each_rank(v, w, offsetof(SnapRank, ckpt));
    for (int i = 0; i < v->logs_len; i++) enqueue(v, w, v->logs[(v->logs_head + i) % VIEWERS_LOGS]);
    for (int i = 0; i < v->evals_len; i++) enqueue(v, w, v->evals[(v->evals_head + i) % VIEWERS_EVALS].blob);
    /* steps round by round over the ranks, oldest first, so the model's
     * "slowest rank" figures move forward as they would live */
    for (int k = v->step_keep; k > 0; k--)
        for (int r = 0; r < v->world; r++) {
            SnapRank *s = &v->ranks[r];
            if (s->steps_len >= k) enqueue(v, w, s->steps[(s->steps_head + s->steps_len - k) % v->step_keep]);
        }
    enqueue_each_rank(v, w, offsetof(SnapRank, bye));
}

/* ---- frames from the ranks ---- */

/* The kind of a frame in the encoders' usual layout ({"v": int, "k": str,
 * ...}, as codec_encode and the Python examples write it), without a
 * decode; MSG__COUNT when the frame is laid out otherwise. Only a hint:
 * it lets frames the snapshot does not keep skip the decode while nobody
 * is attached. */
static MsgKind peek_kind(const unsigned char *p, size_t len)
{
    size_t i = 0;
    if (len < 8) return MSG__COUNT;
    if ((p[0] & 0xf0) == 0x80)
        i = 1;
    else if (p[0] == 0xde)
        i = 3;
    else
        return MSG__COUNT;
    if (i + 3 > len || p[i] != 0xa1 || p[i + 1] != 'v' || p[i + 2] > 0x7f) return MSG__COUNT;
    i += 3;
    if (i + 3 > len || p[i] != 0xa1 || p[i + 1] != 'k' || (p[i + 2] & 0xe0) != 0xa0) return MSG__COUNT;
    size_t n = p[i + 2] & 0x1f;
    i += 3;
    char name[32];
    if (i + n > len || n >= sizeof name) return MSG__COUNT;
    memcpy(name, p + i, n);
    name[n] = '\0';
    return msg_kind_from_name(name);
}

/* Every rank sends the same all-reduced eval: one of each is kept. */
static bool eval_kept(const Viewers *v, const MsgEval *e)
{
    for (int i = 0; i < v->evals_len; i++) {
        const SnapEval *s = &v->evals[(v->evals_head + i) % VIEWERS_EVALS];
        if (s->epoch == e->epoch && s->step == e->step) return true;
    }
    return false;
}

static Blob *keep_eval(Viewers *v, const MsgEval *e, const void *frame, size_t len)
{
    bool full = v->evals_len == VIEWERS_EVALS;
    int slot = full ? v->evals_head : (v->evals_head + v->evals_len) % VIEWERS_EVALS;
    Blob *b = slot_put(v, &v->evals[slot].blob, frame, len);
    if (!b) return NULL;
    if (full)
        v->evals_head = (v->evals_head + 1) % VIEWERS_EVALS;
    else
        v->evals_len++;
    v->evals[slot].epoch = e->epoch;
    v->evals[slot].step = e->step;
    return b;
}

/* The next slot of a ring of cap (head, len: oldest first; head < cap,
 * len <= cap), the oldest one when the ring is full; *advance runs once the
 * slot is filled. Wrapped by a compare: a step per message comes here. */
static int ring_slot(int head, int len, int cap)
{
    int at = head + len;
    return len == cap ? head : at >= cap ? at - cap : at;
}

static void ring_advance(int *head, int *len, int cap)
{
    if (*len == cap)
        *head = *head + 1 < cap ? *head + 1 : 0;
    else
        (*len)++;
}

/* The kinds the snapshot holds. */
#define KEPT_KINDS                                                                                            \
    (1u << MSG_HELLO | 1u << MSG_PHASE | 1u << MSG_SHARD | 1u << MSG_CKPT | 1u << MSG_EVAL | 1u << MSG_STEP | \
     1u << MSG_BYE | 1u << MSG_LOG | 1u << MSG_INFO)
_Static_assert(MSG__COUNT <= 32, "KEPT_KINDS is a 32-bit mask");

static bool kept_kind(MsgKind k) { return (unsigned)k < MSG__COUNT && (KEPT_KINDS >> k & 1u); }

/* Keep the frame for the snapshot when it is of a kind it holds. Returns
 * a reference to the kept blob (the caller releases it), else NULL. */
static Blob *keep(Viewers *v, const Msg *m, const void *frame, size_t len)
{
    int r = m->rank;
    if (!kept_kind(m->kind) || r < 0 || r >= v->world) return NULL;
    if ((m->kind == MSG_SHARD && len > VIEWERS_SHARD_MAX_BYTES) || v->snap_bytes + len > VIEWERS_SNAP_MAX_BYTES) {
        v->skipped++;
        return NULL;
    }
    SnapRank *s = &v->ranks[r];
    Blob *b = NULL;
    switch (m->kind) {
    case MSG_HELLO:
        if ((b = slot_put(v, &s->hello, frame, len)))
            slot_set(v, &s->bye, NULL); /* a rank that says hello again was restarted: its old end is history */
        break;
    case MSG_INFO: b = slot_put(v, &s->info, frame, len); break; /* each info says all its rank knows */
    case MSG_PHASE: b = slot_put(v, &s->phase, frame, len); break;
    case MSG_SHARD: b = slot_put(v, &s->shard, frame, len); break;
    case MSG_CKPT: b = slot_put(v, &s->ckpt, frame, len); break;
    case MSG_BYE: b = slot_put(v, &s->bye, frame, len); break;
    case MSG_EVAL:
        if (eval_kept(v, &m->u.eval)) return NULL; /* another rank's copy */
        b = keep_eval(v, &m->u.eval, frame, len);
        break;
    case MSG_LOG: {
        int at = ring_slot(v->logs_head, v->logs_len, VIEWERS_LOGS);
        if ((b = slot_put(v, &v->logs[at], frame, len))) ring_advance(&v->logs_head, &v->logs_len, VIEWERS_LOGS);
        break;
    }
    case MSG_STEP: {
        int at = ring_slot(s->steps_head, s->steps_len, v->step_keep);
        if ((b = slot_put(v, &s->steps[at], frame, len))) ring_advance(&s->steps_head, &s->steps_len, v->step_keep);
        break;
    }
    default: break;
    }
    if (!b) {
        v->skipped++; /* out of memory */
        return NULL;
    }
    return blob_ref(b); /* the caller's reference; the slot keeps its own */
}

/* keep() of a step in the steady state, without its reference dance: the
 * frame copied over the blob of its rank's next step slot when that blob
 * is the snapshot's alone (no viewer's queue holds it) and has room. False
 * (nothing done) for anything else, which keep() then decides. */
__attribute__((always_inline)) static inline bool keep_step_in_place(Viewers *v, int r, const void *frame, size_t len)
{
    if (r < 0 || r >= v->world || v->snap_bytes + len > VIEWERS_SNAP_MAX_BYTES) return false;
    SnapRank *s = &v->ranks[r];
    Blob *b = s->steps[ring_slot(s->steps_head, s->steps_len, v->step_keep)];
    if (!b || b->refs != 1 || b->cap < len) return false;
    v->snap_bytes = v->snap_bytes - b->len + len;
    memcpy(b->data, frame, len);
    b->len = len;
    v->reused++;
    ring_advance(&s->steps_head, &s->steps_len, v->step_keep);
    return true;
}

static void send_all(Viewers *v, const void *frame, size_t len, Blob *kept);

/* A burst from elsewhere than ddptop's receive loop (which checks and keeps
 * each message itself): its messages are kept as their own frames. */
static void keep_burst(Viewers *v, const Msg *burst)
{
    size_t pos = 0, len;
    const uint8_t *f;
    char err[160];
    while (codec_burst_next(&burst->u.burst, &pos, &f, &len)) {
        Msg m;
        int rc = codec_burst_decode(burst, f, len, &m, err, sizeof err);
        if (rc == 0) blob_unref(keep(v, &m, f, len));
        if (rc == 0 || rc == -2) msg_done(&m);
    }
}

void viewers_on_frame(Viewers *v, void *ctl_router, const void *frame, size_t len)
{
    if (!v || !frame || len == 0 || len > PROTO_MAX_FRAME_BYTES) return;
    if (v->n == 0) {
        MsgKind k = peek_kind(frame, len);
        if (k == MSG_COLL || k == MSG_BEAT || k == MSG_SET || k == MSG_GET || k == MSG_WAIT || k == MSG_NODE) {
            if (ctl_router) v->router = ctl_router;
            return; /* not kept, and nobody to forward it to */
        }
    }
    Msg m;
    char err[160];
    int rc = codec_decode(frame, len, &m, err, sizeof err);
    viewers_on_decoded(v, ctl_router, frame, len, &m, rc);
    if (rc >= 0) msg_done(&m);
}

void viewers_on_decoded(Viewers *v, void *ctl_router, const void *frame, size_t len, const Msg *m, int rc)
{
    if (!v || !frame || len == 0 || len > PROTO_MAX_FRAME_BYTES) return;
    if (ctl_router) v->router = ctl_router;
    if (rc < 0) {
        v->bad++;
        return;
    }
    bool forward = true;
    Blob *b = NULL;
    if (rc == 0) {
        switch (m->kind) {
        case MSG_SET:
        case MSG_GET:
        case MSG_WAIT:
        case MSG_VAL:
        case MSG_CMD:
        case MSG_NODE:
            forward = false; /* the store's and ddptop's business, not a screen's */
            break;
        case MSG_BURST: keep_burst(v, m); break;
        default:
            /* nobody attached: the kept blob would go to no queue, so a
             * step copied in place needs none (ddptop's single frames) */
            if (v->n > 0 || m->kind != MSG_STEP || !keep_step_in_place(v, m->rank, frame, len))
                b = keep(v, m, frame, len);
            break;
        }
    }
    /* rc 1 (a newer kind): forwarded as it is */
    if (forward) send_all(v, frame, len, b);
    blob_unref(b);
}

/* Every telemetry message comes here: a coll or a beat (which the snapshot
 * does not hold) leaves at once, a step in a few instructions. */
static inline void keep_msg(Viewers *v, const void *frame, size_t len, const Msg *m)
{
    if (!kept_kind(m->kind) || !frame || len == 0 || len > PROTO_MAX_FRAME_BYTES) return;
    if (m->kind == MSG_STEP && keep_step_in_place(v, m->rank, frame, len)) return;
    blob_unref(keep(v, m, frame, len));
}

void viewers_keep_msg(Viewers *v, const void *frame, size_t len, const Msg *m)
{
    if (v) keep_msg(v, frame, len, m);
}

void viewers_keep_msgs(Viewers *v, const void *const *frames, const size_t *lens, const Msg *ms, int n)
{
    if (!v) return;
    for (int i = 0; i < n; i++) keep_msg(v, frames[i], lens[i], &ms[i]);
}

void viewers_forward(Viewers *v, void *ctl_router, const void *frame, size_t len)
{
    if (!v || !frame || len == 0 || len > PROTO_MAX_FRAME_BYTES) return;
    if (ctl_router) v->router = ctl_router;
    send_all(v, frame, len, NULL);
}

/* Send a frame to every attached viewer (or queue it behind a snapshot);
 * b, when not NULL, is the frame already in a blob. */
static void send_all(Viewers *v, const void *frame, size_t len, Blob *kept)
{
    Blob *b = kept;
    if (v->n > 0) {
        for (int i = 0; i < VIEWERS_MAX; i++) {
            Viewer *w = &v->v[i];
            if (!w->used) continue;
            pump(v, v->router, w, false);
            if (w->q_len == 0 && (!v->router || send_now(v, v->router, w, frame, len) != 1)) continue;
            /* behind a snapshot, or its pipe is full: in order, after what it is owed */
            if (!b && !(b = blob_new(frame, len))) {
                w->drops++;
                v->drops++;
                continue;
            }
            enqueue(v, w, b);
        }
    }
    if (b != kept) blob_unref(b);
}

/* ---- messages from viewers ---- */

static Viewer *find(Viewers *v, const void *ident, size_t ident_len)
{
    for (int i = 0; i < VIEWERS_MAX; i++)
        if (v->v[i].used && v->v[i].ident_len == ident_len && !memcmp(v->v[i].ident, ident, ident_len)) return &v->v[i];
    return NULL;
}

/* "view-<pid>-..." -> pid, 0 when it is not there. */
static long ident_pid(const void *ident, size_t ident_len)
{
    char s[ZS_IDENT_MAX + 1];
    size_t n = ident_len < ZS_IDENT_MAX ? ident_len : ZS_IDENT_MAX;
    memcpy(s, ident, n);
    s[n] = '\0';
    char *end;
    long pid = strtol(s + 5, &end, 10);
    return end > s + 5 && pid > 0 ? pid : 0;
}

static void label(const Viewer *w, long pid, char *who, size_t wholen)
{
    if (!who || !wholen) return;
    if (w && pid)
        snprintf(who, wholen, "viewer %d (pid %ld)", w->seq, pid);
    else if (w)
        snprintf(who, wholen, "viewer %d", w->seq);
    else if (pid)
        snprintf(who, wholen, "viewer (pid %ld)", pid);
    else
        snprintf(who, wholen, "viewer");
}

/* The id of the ping a newcomer must answer before it is let in. */
static int64_t admission_id(const Viewers *v, const void *ident, size_t ident_len)
{
    uint64_t h = 14695981039346656037ull ^ v->secret;
    for (int round = 0; round < 2; round++) /* twice over: the secret mixes into every byte */
        for (size_t i = 0; i < ident_len; i++) h = (h ^ ((const unsigned char *)ident)[i]) * 1099511628211ull;
    return (int64_t)(h >> 3) + 1; /* within the wire's +-2^61 */
}

static void send_ping(Viewers *v, void *router, const void *ident, size_t ident_len, int64_t id)
{
    Msg m;
    char err[128];
    msg_init(&m, MSG_CMD);
    m.t_ns = proto_now_ns();
    m.u.cmd.id = id;
    snprintf(m.u.cmd.op, sizeof m.u.cmd.op, "ping");
    zs_send_to(router, ident, ident_len, &m, &v->buf, ZMQ_DONTWAIT, err, sizeof err);
}

static int op_index(const char *op)
{
    static const char *const ops[5] = { "ckpt", "stop", "pause", "abort", "stacks" };
    for (int i = 0; i < 5; i++)
        if (!strcmp(op, ops[i])) return i;
    return -1;
}

ViewerAction viewers_handle(Viewers *v, void *ctl_router, const void *ident, size_t ident_len, const Msg *m,
                            int64_t now_ms, char *who, size_t wholen)
{
    if (who && wholen) who[0] = '\0';
    if (!v || !ctl_router || !ident || !m || m->kind != MSG_CMD || !viewers_is_viewer_ident(ident, ident_len) ||
        ident_len > ZS_IDENT_MAX)
        return VIEWER_NONE;
    v->router = ctl_router;
    const MsgCmd *c = &m->u.cmd;
    long pid = ident_pid(ident, ident_len);
    Viewer *w = find(v, ident, ident_len);
    if (w) w->last_ms = now_ms;
    label(w, pid, who, wholen);

    if (!strcmp(c->op, "attach")) {
        bool control = c->arg != 0;
        /* an answer to one of the last two pings proves it reads */
        for (int i = 0; w && c->id > 0 && i < 2; i++)
            if (c->id == w->ping_id[i] && w->ping_ms[i] > w->alive_ms) w->alive_ms = w->ping_ms[i];
        if (w && w->control == control) return VIEWER_NONE; /* the once-a-second refresh */
        if (!w) {
            if (v->n >= VIEWERS_MAX) {
                char text[160];
                snprintf(text, sizeof text, "attach refused: %d viewers are attached already (the most ddptop serves)",
                         VIEWERS_MAX);
                say(v, ctl_router, ident, ident_len, "warn", text);
                return VIEWER_NONE;
            }
            int64_t want = admission_id(v, ident, ident_len);
            if (c->id != want) { /* first prove you read: answer this */
                send_ping(v, ctl_router, ident, ident_len, want);
                return VIEWER_NONE;
            }
            int slot = 0;
            while (slot < VIEWERS_MAX - 1 && v->v[slot].used) slot++; /* v->n < VIEWERS_MAX: there is a free one */
            w = &v->v[slot];
            memset(w, 0, sizeof *w);
            w->used = true;
            memcpy(w->ident, ident, ident_len);
            w->ident_len = ident_len;
            w->seq = ++v->next_seq;
            w->pid = pid;
            w->last_ms = now_ms;
            w->alive_ms = now_ms;
            w->ping_ms[0] = w->ping_ms[1] = now_ms; /* the first ping a second from now */
            v->n++;
            label(w, pid, who, wholen);
        }
        /* new, or the mode changed (a viewer that started over): the
         * snapshot, then whatever comes */
        w->control = control;
        queue_clear(w);
        enqueue_snapshot(v, w);
        pump(v, ctl_router, w, true);
        char text[200];
        snprintf(text, sizeof text, "attached as viewer %d (%s)", w->seq,
                 control ? "--control: c d p a act on the job" : "read-only");
        /* after the snapshot, in order */
        tell(v, ctl_router, w, "info", text);
        return VIEWER_NONE;
    }
    if (!strcmp(c->op, "detach")) {
        if (w) forget(v, w);
        return VIEWER_NONE;
    }
    int op = op_index(c->op);
    if (op < 0) return VIEWER_NONE; /* an op for someone else (or a newer viewer): skipped */
    if (!w) {
        say(v, ctl_router, ident, ident_len, "warn",
            "not attached (or forgotten: no answer to ddptop's pings for 6 s): send {\"op\":\"attach\"} first");
        return VIEWER_NONE;
    }
    if (c->id > 0) {
        if (c->id <= w->last_id[op]) return VIEWER_NONE; /* a repeat of a command already handled */
        w->last_id[op] = c->id;
    }
    if (op == 4) return VIEWER_STACKS; /* reads the ranks, changes nothing: read-only viewers may */
    if (!w->control) {
        char text[200];
        snprintf(text, sizeof text,
                 "read-only viewer: \"%s\" not sent to the ranks (ddptop attach --control ENDPOINT to send commands)",
                 c->op);
        say(v, ctl_router, ident, ident_len, "warn", text);
        return VIEWER_NONE;
    }
    static const ViewerAction act[4] = { VIEWER_CKPT, VIEWER_STOP, VIEWER_PAUSE, VIEWER_ABORT };
    return act[op];
}

int viewers_tell(Viewers *v, void *ctl_router, const void *ident, size_t ident_len, const char *level, const char *text)
{
    Viewer *w = v && ctl_router && ident ? find(v, ident, ident_len) : NULL;
    if (!w) return -1;
    tell(v, ctl_router, w, level, text);
    return 0;
}

/* {"k":"cmd","op":"ping","id":N} to one viewer, N fresh and random; it
 * answers by sending "attach" with id N. */
static void ping(Viewers *v, Viewer *w, int64_t now_ms)
{
    v->rng ^= v->rng << 13;
    v->rng ^= v->rng >> 7;
    v->rng ^= v->rng << 17;
    w->ping_id[1] = w->ping_id[0];
    w->ping_ms[1] = w->ping_ms[0];
    w->ping_id[0] = (int64_t)(v->rng >> 3) + 1; /* within the wire's +-2^61 */
    w->ping_ms[0] = now_ms;
    if (v->router) send_ping(v, v->router, w->ident, w->ident_len, w->ping_id[0]);
}

int viewers_tick(Viewers *v, int64_t now_ms)
{
    if (!v) return 0;
    for (int i = 0; i < VIEWERS_MAX; i++) {
        Viewer *w = &v->v[i];
        if (!w->used) continue;
        if (now_ms - w->alive_ms > VIEWERS_TIMEOUT_MS) {
            forget(v, w);
            continue;
        }
        if (now_ms - w->ping_ms[0] >= VIEWERS_PING_MS) ping(v, w, now_ms);
        pump(v, v->router, w, false);
    }
    return v->n;
}
