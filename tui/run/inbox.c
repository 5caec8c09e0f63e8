/* inbox.c — what arrives on the tel PULL and ctl ROUTER sockets: every
 * frame is checked against who sent it, tapped as received (recording,
 * --publish, viewers), then each message goes where its sender says:
 * agents to nodes.h, viewers to peers.c, store requests to the store, the
 * ranks' own to the job model. See internal.h. Main thread.
 *
 * Who a rank is (docs/CLUSTER.md, "Trust"): the process whose hello came
 * on ctl from routing id rank-R, with the pid ddptop started for R (this
 * node's ranks) and, on ipc, the pid the kernel says sent the frame. ctl
 * has no ZMQ_ROUTER_HANDOVER, so while that process is connected nobody
 * else can hold rank-R; a restarted rank (new pid) is admitted once the
 * old one's connection is gone. A hello that fails these checks is refused
 * (named in the events); any other frame whose "r" is not its sender's rank
 * (ctl: routing id; ipc tel: pid) is dropped and counted with the bad
 * frames: one warning, then the count. Frames dropped here reach neither
 * the job model nor the recording, the viewers or --publish.
 */
#include "run/internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "base/clock.h"
#include "launch/procstat.h"

/* A step cannot have dropped more telemetry than this many messages per
 * step it reports (a step sends one step, a coll per bucket, a beat a
 * second): a larger "drops" is forged or corrupt. */
#define DROPS_PER_STEP_MAX 65536

/* When a frame arrived: read once per frame, so a burst's messages share
 * their frame's arrival (they did arrive together) and a busy drain does
 * not read two clocks per message. */
typedef struct {
    int64_t mono_ns, wall_ns;
} Arrival;

static Arrival arrival_now(void) { return (Arrival){ mono_ns(), wall_ns() }; }

/* FROM_TAKEN: a burst the tap took apart and handled itself. */
typedef enum { FROM_OK = 0, FROM_STALE, FROM_FOREIGN, FROM_IMPLAUSIBLE, FROM_BAD_HELLO, FROM_TAKEN } FromVerdict;

/* Every frame as received goes to the recording and the PUB socket,
 * before it is decoded (so malformed frames are kept for a post-mortem),
 * unless its sender had no right to send it. */
typedef struct {
    Run *r;
    RecSource src;
    const char *ident; /* ctl: the sender's routing id, set before the tap runs */
    const size_t *ident_len;
    const int64_t *pid; /* the sender's pid where the transport says (ipc), else 0 */
    FromVerdict verdict;
    char why[512];  /* for a refused hello or a foreign frame */
    bool store_key; /* a refused frame was a store request for key: answer it */
    char key[PROTO_STR_MED];
} Tap;

static bool is_rank_kind(MsgKind k)
{
    return k != MSG_SET && k != MSG_GET && k != MSG_WAIT && k != MSG_VAL && k != MSG_CMD && k != MSG_NODE &&
           k != MSG_UNKNOWN;
}

/* "rank-N" or "rank-N.PID.NONCE" -> N; -1 for any other routing id. */
static int ident_rank(const char *ident, size_t len) { return proto_rank_ident_parse(ident, len, NULL); }

/* Values no worker sends: a "drops" past DROPS_PER_STEP_MAX a step, an eval
 * that is not rank 0's or whose counts do not add up. */
static inline bool implausible(const Msg *m)
{
    if (m->kind == MSG_STEP) {
        const MsgStep *s = &m->u.step;
        if (s->step < 0 || s->samples < 0) return true;
        uint64_t cap = (uint64_t)s->step < UINT64_MAX / DROPS_PER_STEP_MAX - 1
                           ? ((uint64_t)s->step + 1) * DROPS_PER_STEP_MAX
                           : UINT64_MAX;
        return s->drops > cap;
    }
    if (m->kind == MSG_EVAL) {
        const MsgEval *e = &m->u.eval;
        return m->rank != 0 || e->total <= 0 || e->correct < 0 || e->correct > e->total || !(e->accuracy >= 0) ||
               e->accuracy > 1;
    }
    return false;
}

/* The pid ddptop itself started for rank k (this node's ranks), 0 when it
 * did not start it (listen, other nodes' ranks, before the launch). */
static int64_t started_pid(const Run *r, int k)
{
    if (r->external || r->follow.on || !r->l || k >= r->o->nproc) return 0;
    return launcher_pid(r->l, k);
}

/* A rank's process that has exited (a zombie, or reaped). Its bye may
 * still come from elsewhere (a helper it left behind): the verdict needs
 * the real exit 0 anyway, so such a bye cannot make a failure look clean. */
static bool process_ended(int64_t pid)
{
    ProcStat st;
    return procstat_read((pid_t)pid, &st) < 0 || st.state == 'Z' || st.state == 0;
}

static FromVerdict check_hello(Tap *t, const Msg *m, const char *ident, size_t ident_len, int64_t pid)
{
    Run *r = t->r;
    int k = m->rank;
    int64_t claimed = m->u.hello.pid, expect = started_pid(r, k);
    char who[ZS_IDENT_MAX + 4];
    snprintf(who, sizeof who, "\"%.*s\"", (int)ident_len, ident);
    for (char *c = who; *c; c++)
        if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f) *c = '?';
    char from[48] = "";
    if (pid) snprintf(from, sizeof from, ", process %" PRId64, pid);
    int64_t named = 0;
    if (proto_rank_ident_parse(ident, ident_len, &named) != k)
        snprintf(t->why, sizeof t->why,
                 "refused a hello for rank %d from routing id %s (pid %" PRId64 "%s): rank %d's routing id is "
                 "rank-%d.PID.NONCE",
                 k, who, claimed, from, k, k);
    else if (named && named != claimed)
        snprintf(t->why, sizeof t->why,
                 "refused a hello for rank %d from %s: it claims pid %" PRId64 " but its routing id names pid %" PRId64,
                 k, who, claimed, named);
    else if (pid && claimed != pid)
        snprintf(t->why, sizeof t->why,
                 "refused a hello for rank %d from %s: it claims pid %" PRId64 " but comes from process %" PRId64, k,
                 who, claimed, pid);
    else if (r->follow.on && !run_follow_descends(r, claimed))
        snprintf(t->why, sizeof t->why,
                 "refused a hello for rank %d from %s (pid %" PRId64 "%s): not a process the script's launcher "
                 "(pid %" PRId64 ") started",
                 k, who, claimed, from, r->follow.pid);
    else if (expect && claimed != expect)
        snprintf(t->why, sizeof t->why,
                 "refused a hello for rank %d from %s (pid %" PRId64 "%s): ddptop started rank %d as pid %" PRId64, k,
                 who, claimed, from, k, expect);
    else
        return FROM_OK;
    return FROM_BAD_HELLO;
}

/* check_sender's every case; check_sender answers most messages without it. */
__attribute__((noinline)) static FromVerdict check_sender_all(Tap *t, const Msg *m)
{
    Run *r = t->r;
    const char *ident = t->ident;
    size_t ident_len = t->ident_len ? *t->ident_len : 0;
    int64_t pid = t->pid ? *t->pid : 0;
    /* a process the launched script started: the job follows its world from now on */
    if (ident && m->kind == MSG_HELLO && r->rk && !r->follow.on) run_follow_hello(r, m, m->u.hello.pid);
    if (!is_rank_kind(m->kind) || m->rank < 0 || !r->rk || m->rank >= r->job->world) return FROM_OK;
    const RunRank *rk = &r->rk[m->rank];
    if (ident && m->kind == MSG_HELLO) return check_hello(t, m, ident, ident_len, pid);
    if (ident) {
        bool mine = rk->ident_len ? (rk->ident_len == ident_len && !memcmp(rk->ident, ident, ident_len))
                                  : ident_rank(ident, ident_len) == m->rank;
        if (!mine) {
            snprintf(t->why, sizeof t->why, "routing id \"%.*s\"", (int)(ident_len < 64 ? ident_len : 64), ident);
            return FROM_FOREIGN;
        }
    } else if (pid) {
        int64_t own = rk->pid ? rk->pid : started_pid(r, m->rank);
        if (own && pid != own && !(m->kind == MSG_BYE && process_ended(own))) {
            if (pid == rk->prev_pid) return FROM_STALE;
            /* a rank the launched script started, whose hello is not read yet (follow.c) */
            if (!r->follow.on && own == started_pid(r, m->rank) && run_follow_descends_launched(r, pid))
                return FROM_STALE;
            snprintf(t->why, sizeof t->why, "process %" PRId64 " (rank %d is process %" PRId64 ")", pid, m->rank, own);
            return FROM_FOREIGN;
        }
    }
    if (implausible(m)) {
        snprintf(t->why, sizeof t->why, "rank %d's %s with values no worker sends", m->rank, msg_kind_name(m->kind));
        return FROM_IMPLAUSIBLE;
    }
    return FROM_OK;
}

/* Does m plainly pass the checks, coming from process pid (0: the transport
 * does not say) with no routing id? A rank's telemetry of a kind with
 * nothing to weigh, or a plausible step, from its rank's own process (or
 * from a process unnamed). Such a message is plain: let through, kept,
 * applied. */
static inline bool plain_from(const RunRank *rk, int world, const Msg *m, int64_t pid)
{
    if (!rk || m->rank < 0 || m->rank >= world) return false;
    if (!(m->kind == MSG_COLL || m->kind == MSG_BEAT || (m->kind == MSG_STEP && !implausible(m)))) return false;
    return !pid || pid == rk[m->rank].pid;
}

/* The check's quick answer (check_sender's first test): plain_from for a
 * message without a routing id. */
static inline bool sender_plain(const Tap *t, const Msg *m)
{
    return !t->ident && plain_from(t->r->rk, t->r->job->world, m, t->pid ? *t->pid : 0);
}

/* May this sender send m? Sets t->verdict (and t->why); no side effects,
 * so the tap and handle_msg agree, but one: the first hello from a process
 * the launched script started makes the job follow its world (follow.c),
 * before the frame is recorded or applied, and a second look agrees with
 * the first. Every telemetry message asks, so the
 * usual answer comes first (sender_plain); anything else, and every
 * refusal, is check_sender_all's. */
static inline FromVerdict check_sender(Tap *t, const Msg *m)
{
    return sender_plain(t, m) ? FROM_OK : check_sender_all(t, m);
}

static void refused(Run *r, const Tap *t, const Msg *m);
static void handle_msg(Run *r, const void *ident, size_t ident_len, Msg *m, Arrival at);
static void handle_tel(Run *r, Msg *m, Arrival at);

/* A frame the checks let through, as received: to the recording and --publish. */
static void record_publish(Run *r, RecSource src, const void *frame, size_t len)
{
    char err[512];
    if (r->rec && recorder_write(r->rec, src, frame, len, mono_ns(), 0, err, sizeof err))
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_WARN, "%s", err);
    if (r->pub) publisher_send(r->pub, frame, len);
}

/* One message, decoded from its own frame f: checked against its sender,
 * kept for the viewers' snapshot and applied when it passes (t->verdict
 * says whether it did). */
static FromVerdict take_msg(Tap *t, const uint8_t *f, size_t flen, Msg *m, Arrival at)
{
    Run *r = t->r;
    t->verdict = check_sender(t, m);
    if (t->verdict != FROM_OK) return t->verdict;
    if (r->viewers) viewers_keep_msg(r->viewers, f, flen, m);
    if (t->ident)
        handle_msg(r, t->ident, *t->ident_len, m, at);
    else
        handle_tel(r, m, at);
    return FROM_OK;
}

/* Plain messages (sender_plain), let through: kept for the viewers'
 * snapshot and given to the job model together, what take_msg does with
 * each (listen's sign of life, the snapshot, the model, the bench) with the
 * work that is the burst's rather than each message's done once
 * (viewers_keep_msgs, job_apply_burst). */
static void take_plain(Run *r, const uint8_t *const *f, const size_t *flen, Msg *ms, int n, Arrival at)
{
    if (n <= 0) return;
    if (r->external) {
        int64_t heard_ms = at.mono_ns / 1000000;
        for (int k = 0; k < n; k++) /* once for each rank in a row (a burst's: one) */
            if (k == 0 || ms[k].rank != ms[k - 1].rank) r->rk[ms[k].rank].heard_ms = heard_ms;
    }
    if (r->viewers) viewers_keep_msgs(r->viewers, (const void *const *)f, flen, ms, n);
    job_apply_burst(r->job, ms, n, at.mono_ns, at.wall_ns);
    if (r->bench)
        for (int k = 0; k < n; k++) bench_on_msg(r->bench, &ms[k], at.mono_ns);
}

/* Messages ms[0..n) of one sender, each decoded from its own frame f[i]
 * (flen[i] bytes), arrived together at `at`, taken in order as take_msg
 * takes one: checked, kept for the viewers' snapshot and applied, or
 * refused (counted, and named: refused()); the bit of each one not taken
 * is set in dropped (bit first + i). Returns how many were not taken.
 * Plain ones go on together (take_plain), any other alone after the plain
 * ones before it, so the snapshot and the model get every message in its
 * place. The work every telemetry message costs after its decode:
 * tests/tools/bench_model.c counts it through run_take_msgs, so it stays a
 * function of its own. */
__attribute__((noinline)) static int take_msgs(Tap *t, const uint8_t *const *f, const size_t *flen, Msg *ms, int n,
                                               Arrival at, uint8_t *dropped, uint32_t first)
{
    Run *r = t->r;
    /* the sender's, the same for all: read once */
    int64_t pid = t->pid ? *t->pid : 0;
    const RunRank *rk = t->ident ? NULL : r->rk;
    int world = r->job->world, not_taken = 0;
    int plain = 0; /* the plain messages not taken yet: ms[plain..i) */
    for (int i = 0; i < n; i++) {
        if (plain_from(rk, world, &ms[i], pid)) continue;
        take_plain(r, f + plain, flen + plain, ms + plain, i - plain, at);
        plain = i + 1;
        FromVerdict v = take_msg(t, f[i], flen[i], &ms[i], at);
        if (v == FROM_OK) continue;
        not_taken++;
        dropped[(first + i) / 8] |= (uint8_t)(1u << ((first + i) % 8));
        if (v != FROM_STALE) refused(r, t, &ms[i]);
    }
    take_plain(r, f + plain, flen + plain, ms + plain, n - plain, at);
    return not_taken;
}

/* A burst's messages decoded at a time, then taken together (take_msgs):
 * a worker's 50 ms of one bucket's steps is 10 or 11. */
#define TAKE_AT_ONCE 16

/* A burst whose sender is rank b->rank's (checked): each message is checked
 * like a frame of its own and handled, in order; one that fails to decode
 * is counted bad, one claiming another rank (or failing the checks) is
 * refused. The burst then goes on whole, byte for byte, unless a message
 * was refused: then only the accepted messages go on, each as its own
 * frame. */
static void take_burst(Tap *t, const void *frame, size_t len, const Msg *b)
{
    Run *r = t->r;
    uint8_t dropped[PROTO_MAX_BURST / 8];
    bool whole = true, more = true;
    size_t pos = 0, flen[TAKE_AT_ONCE];
    const uint8_t *f[TAKE_AT_ONCE];
    Msg ms[TAKE_AT_ONCE];
    char err[256];
    Arrival at = arrival_now();
    memset(dropped, 0, sizeof dropped);
    uint32_t i = 0; /* the next message's number in the burst */
    while (more) {
        /* up to TAKE_AT_ONCE messages that decode; one that does not ends
         * the group and is dealt with after it: ms[n] */
        int n = 0, rc = 0;
        uint32_t first = i;
        while (n < TAKE_AT_ONCE && (more = codec_burst_next(&b->u.burst, &pos, &f[n], &flen[n]))) {
            rc = codec_burst_decode(b, f[n], flen[n], &ms[n], err, sizeof err);
            i++;
            if (rc != 0) break;
            n++;
        }
        if (take_msgs(t, f, flen, ms, n, at, dropped, first)) whole = false;
        for (int k = 0; k < n; k++) msg_done(&ms[k]);
        if (rc == 1 || rc == -1) {
            r->job->bad_frames++;
            r->job->version++;
        } else if (rc == -2) {
            t->verdict = FROM_FOREIGN;
            snprintf(t->why, sizeof t->why, "a burst of rank %d", (int)b->rank);
            whole = false;
            dropped[(i - 1) / 8] |= (uint8_t)(1u << ((i - 1) % 8));
            refused(r, t, &ms[n]);
            msg_done(&ms[n]);
        }
    }
    t->verdict = FROM_TAKEN;
    if (whole) {
        if (r->viewers) viewers_forward(r->viewers, r->ctl, frame, len);
        record_publish(r, t->src, frame, len);
        return;
    }
    pos = 0;
    const uint8_t *g;
    size_t glen;
    for (uint32_t k = 0; codec_burst_next(&b->u.burst, &pos, &g, &glen); k++) {
        if (dropped[k / 8] & (1u << (k % 8))) continue;
        if (r->viewers) viewers_forward(r->viewers, r->ctl, g, glen);
        record_publish(r, t->src, g, glen);
    }
}

static void tap_frame(void *ctx, const void *frame, size_t len, const Msg *m, int rc)
{
    Tap *t = ctx;
    t->verdict = FROM_OK;
    t->store_key = false;
    /* only the ranks' own frames are passed on: not agents' or viewers',
     * and not a stranger's (whose rank frames are refused) */
    if (t->ident && (*t->ident_len < 5 || memcmp(t->ident, "rank-", 5))) {
        bool routed =
            viewers_is_viewer_ident(t->ident, *t->ident_len) || (*t->ident_len >= 5 && !memcmp(t->ident, "node-", 5));
        if (rc == 0 && !routed) t->verdict = check_sender(t, m);
        return;
    }
    if (rc < 0 && t->ident) {
        MsgKind k;
        t->store_key = codec_store_key(frame, len, &k, t->key, sizeof t->key) == 0;
    }
    if (rc == 0 && (t->verdict = check_sender(t, m)) != FROM_OK) return;
    if (rc == 0 && m->kind == MSG_BURST) {
        take_burst(t, frame, len, m);
        return;
    }
    Run *r = t->r;
    if (r->viewers) viewers_on_decoded(r->viewers, r->ctl, frame, len, m, rc);
    record_publish(r, t->src, frame, len);
}

/* A frame the tap refused: counted with the bad frames; a hello named in
 * the events (at most one such line a second), a foreign frame once. */
static void refused(Run *r, const Tap *t, const Msg *m)
{
    r->refused_frames++;
    r->job->bad_frames++;
    r->job->version++;
    int64_t now = mono_ms();
    if (t->verdict == FROM_BAD_HELLO) {
        if (now - r->refused_note_ms < 1000 && r->refused_note_ms) return;
        r->refused_note_ms = now;
        job_event(r->job, mono_ns(), wall_ns(), m->rank, EV_WARN, "%s", t->why);
        return;
    }
    if (r->refused_warned) return;
    r->refused_warned = true;
    job_event(r->job, mono_ns(), wall_ns(), m->rank, EV_WARN,
              "dropped a %s claiming rank %d from %s; such frames are dropped and counted in bad frames",
              msg_kind_name(m->kind), (int)m->rank, t->why);
}

/* listen: a rank's bye is its exit. */
static void listen_bye(Run *r, const Msg *m, Arrival at)
{
    job_apply(r->job, m, at.mono_ns, at.wall_ns);
    r->rk[m->rank].ext_ended = true;
    run_rank_ended(r, m->rank, (int)r->job->ranks[m->rank].pid, (m->u.bye.status & 0xff) << 8);
}

/* listen: a rank's word is its only sign of life, and its bye its exit
 * (true: the bye, applied and ended). */
static inline bool listen_heard(Run *r, const Msg *m, Arrival at)
{
    RunRank *rk = &r->rk[m->rank];
    rk->heard_ms = at.mono_ns / 1000000;
    if (m->kind != MSG_BYE || rk->ext_ended) return false;
    listen_bye(r, m, at);
    return true;
}

/* A rank's own message, to the job model (and the bench). */
static inline void apply_rank_msg(Run *r, Msg *m, Arrival at)
{
    if ((r->external || r->follow.on) && m->rank >= 0 && m->rank < r->job->world && listen_heard(r, m, at)) return;
    job_apply(r->job, m, at.mono_ns, at.wall_ns);
    if (r->bench) bench_on_msg(r->bench, m, at.mono_ns);
}

/* handle_msg for a message without a routing id (telemetry): only a rank's
 * own kinds go anywhere, to the job model; agents, viewers, the store and
 * a hello's routing id all need one. The path of nearly every message. */
static inline void handle_tel(Run *r, Msg *m, Arrival at)
{
    switch (m->kind) {
    case MSG_SET:
    case MSG_GET:
    case MSG_WAIT:
    case MSG_NODE:
    case MSG_CMD:
    case MSG_BURST: return; /* not a rank's to apply */
    case MSG_STACK:         /* w's answer (commands.c) or a gathering's (stacks.c) */
        run_stack_on_answer(r, m);
        run_gather_on_stack(r, m);
        return;
    default: apply_rank_msg(r, m, at);
    }
}

static void handle_msg(Run *r, const void *ident, size_t ident_len, Msg *m, Arrival at)
{
    if (!ident) {
        handle_tel(r, m, at);
        return;
    }
    int node;
    if (ident && r->nodes && nodes_ident(ident, ident_len, &node)) {
        NodeEvents ev = run_node_events(r);
        nodes_handle(r->nodes, ident, ident_len, m, mono_ms(), &ev);
        return;
    }
    if (ident && viewers_is_viewer_ident(ident, ident_len)) {
        if (m->kind == MSG_CMD) run_viewer_cmd(r, ident, ident_len, m);
        return;
    }
    if (m->kind == MSG_SET || m->kind == MSG_GET || m->kind == MSG_WAIT) {
        if (ident && ident_rank(ident, ident_len) < 0)
            store_refuse(r->ctl, ident, ident_len, m->u.store.key,
                         "the store serves the ranks only (routing id rank-N)", &r->buf);
        else if (ident)
            store_handle(r->store, r->ctl, ident, ident_len, m, mono_ms(), &r->buf);
        return;
    }
    if (m->kind == MSG_NODE || m->kind == MSG_CMD || m->kind == MSG_BURST) return; /* not a rank's to apply */
    if (m->kind == MSG_STACK) { /* w's answer (commands.c) or a gathering's (stacks.c), not the job model's */
        run_stack_on_answer(r, m);
        run_gather_on_stack(r, m);
        return;
    }
    apply_rank_msg(r, m, at);
    if (m->kind == MSG_HELLO && m->rank >= 0 && m->rank < r->job->world) {
        RunRank *rk = &r->rk[m->rank];
        rk->routable = true;
        memcpy(rk->ident, ident, ident_len);
        rk->ident_len = ident_len;
        rk->pid = m->u.hello.pid;
        run_flush_cmds(r);
    }
}

/* Telemetry frames read between two looks at the clock. */
#define DRAIN_CLOCK_EVERY 64

/* One frame of a rank's telemetry stream: what zs_recv_peer does for a
 * ZeroMQ frame (decoded in place, tapped, checked against its sender's
 * pid), then what run_drain does with it. */
typedef struct {
    Run *r;
    Tap *tap;
    int64_t *pid;
    char err[256];
} StreamTake;

static void take_stream_frame(void *ctx, const uint8_t *frame, size_t len, int64_t pid, uint64_t conn)
{
    StreamTake *st = ctx;
    Run *r = st->r;
    Msg m;
    *st->pid = pid;
    int rc = codec_decode(frame, len, &m, st->err, sizeof st->err);
    tap_frame(st->tap, frame, len, &m, rc);
    if (rc != 0) {
        msg_done(&m);
        r->job->bad_frames++;
        r->job->version++;
        return;
    }
    /* the rank's own frame (a burst's envelope checked too): its pings go
     * down this connection (run_ping_ranks) */
    if ((st->tap->verdict == FROM_OK || st->tap->verdict == FROM_TAKEN) && m.rank >= 0 && m.rank < r->job->world &&
        r->rk)
        r->rk[m.rank].stream_conn = conn;
    if (st->tap->verdict == FROM_OK)
        handle_msg(r, NULL, 0, &m, arrival_now());
    else if (st->tap->verdict != FROM_STALE && st->tap->verdict != FROM_TAKEN)
        refused(r, st->tap, &m);
    msg_done(&m);
}

/* The telemetry streams: every connection with data read once a drain
 * (tstream.h). A connection closed for what it sent is named once. */
static int drain_streams(Run *r, Tap *tap, int64_t *pid, bool *more)
{
    StreamTake st = { .r = r, .tap = tap, .pid = pid };
    int n = tss_drain(r->tss, 4096, take_stream_frame, &st, more);
    TssStats s;
    tss_stats(r->tss, &s);
    if (s.bad + s.refused != r->tss_bad) {
        if (!r->tss_bad)
            job_event(r->job, mono_ns(), wall_ns(), -1, EV_WARN, "telemetry stream: closed a connection: %s%s",
                      s.bad ? s.last_bad : "more connections than ranks",
                      "; such connections are closed and counted in bad frames");
        r->job->bad_frames += s.bad + s.refused - r->tss_bad;
        r->job->version++;
        r->tss_bad = s.bad + s.refused;
    }
    if (s.cut != r->tss_cut) {
        r->job->bad_frames += s.cut - r->tss_cut;
        r->job->version++;
        r->tss_cut = s.cut;
    }
    return n;
}

int run_drain(Run *r, int64_t until_ms)
{
    int n_ctl = 0;
    char err[256];
    char ident[ZS_IDENT_MAX];
    size_t ident_len = 0;
    int64_t pid = 0;
    Tap tel_tap = { .r = r, .src = REC_SRC_TEL, .pid = &pid };
    Tap ctl_tap = { .r = r, .src = REC_SRC_CTL, .ident = ident, .ident_len = &ident_len, .pid = &pid };
    int n_tel = 0;
    /* tel, ctl and the streams only where the wait saw input (loop.c):
     * reading an empty ZeroMQ socket costs a system call or two */
    r->tel_emptied = r->in.quiet_tel;
    for (; !r->in.quiet_tel && n_tel < 4096; n_tel++) {
        /* 1024 ranks' bursts are ~10 messages each: 4096 of them are ~70 ms
         * of work, and a frame waiting that long is a step late on screen */
        if (n_tel > 0 && n_tel % DRAIN_CLOCK_EVERY == 0 && mono_ms() >= until_ms) break;
        Msg m;
        int rc = zs_recv_peer(r->tel, &m, ZMQ_DONTWAIT, tap_frame, &tel_tap, &pid, err, sizeof err);
        if (rc == 1 || rc < 0) {
            r->tel_emptied = rc == 1;
            break;
        }
        if (rc == 2) {
            r->job->bad_frames++;
            r->job->version++;
            continue;
        }
        if (tel_tap.verdict == FROM_OK)
            handle_msg(r, NULL, 0, &m, arrival_now());
        else if (tel_tap.verdict != FROM_STALE && tel_tap.verdict != FROM_TAKEN)
            refused(r, &tel_tap, &m);
        msg_done(&m);
    }
    r->in.tel_left = !r->in.quiet_tel && !r->tel_emptied;
    if (r->tss && !r->in.quiet_streams) {
        bool more = false;
        int n = drain_streams(r, &tel_tap, &pid, &more);
        if (more) {
            r->tel_emptied = false;
            n_tel += n;
        }
    }
    if (!r->tel_emptied) r->backlog_frames += n_tel;
    for (int i = 0; !r->in.quiet_ctl && i < 1024; i++) {
        Msg m;
        int rc =
            zs_recv_from_peer(r->ctl, ident, &ident_len, &m, ZMQ_DONTWAIT, tap_frame, &ctl_tap, &pid, err, sizeof err);
        if (rc == 1 || rc < 0) break;
        int node;
        if (rc == 2 && r->nodes && ident_len && nodes_ident(ident, ident_len, &node)) {
            NodeEvents ev = run_node_events(r);
            nodes_refuse_frame(r->nodes, ident, ident_len, err, &ev);
            continue;
        }
        if (rc == 2) {
            /* a store request the decoder refused (a value over 1 MiB) is
             * still answered, so its sender need not wait out a timeout */
            if (ctl_tap.store_key) store_refuse(r->ctl, ident, ident_len, ctl_tap.key, err, &r->buf);
            r->job->bad_frames++;
            r->job->version++;
            continue;
        }
        if (ctl_tap.verdict == FROM_OK)
            handle_msg(r, ident, ident_len, &m, arrival_now());
        else if (ctl_tap.verdict != FROM_STALE && ctl_tap.verdict != FROM_TAKEN)
            refused(r, &ctl_tap, &m);
        msg_done(&m);
        n_ctl++;
    }
    return n_ctl;
}

void run_take_hello(Run *r, RunHello *h)
{
    int64_t pid = 0;
    Tap t = { .r = r, .src = REC_SRC_CTL, .ident = h->ident, .ident_len = &h->ident_len, .pid = &pid };
    tap_frame(&t, h->frame.data, h->frame.len, &h->msg, 0);
    if (t.verdict == FROM_OK)
        handle_msg(r, h->ident, h->ident_len, &h->msg, arrival_now());
    else
        refused(r, &t, &h->msg);
    msg_done(&h->msg);
    h->have = false;
}

/* The checks' Tap for one message or burst from ident (ctl) or pid (tel):
 * only what the checks read (why and key, 700 bytes, are written on a
 * refusal, and clearing them would cost more than the message). */
static void tap_for(Tap *t, Run *r, const void *ident, const size_t *ident_len, const int64_t *pid)
{
    t->r = r;
    t->src = ident ? REC_SRC_CTL : REC_SRC_TEL;
    t->ident = ident;
    t->ident_len = ident_len;
    t->pid = pid;
    t->store_key = false;
}

int run_take_msg(Run *r, const void *ident, size_t ident_len, int64_t pid, const void *frame, size_t len, Msg *m,
                 int64_t now_ns, int64_t wall_ns)
{
    Tap t;
    tap_for(&t, r, ident, &ident_len, &pid);
    FromVerdict v = take_msg(&t, frame, len, m, (Arrival){ now_ns, wall_ns });
    if (v != FROM_OK && v != FROM_STALE) refused(r, &t, m);
    return v == FROM_OK ? 0 : -1;
}

int run_take_msgs(Run *r, int64_t pid, const void *const *frames, const size_t *lens, Msg *ms, int n, int64_t now_ns,
                  int64_t wall_ns)
{
    Tap t;
    size_t no_len = 0;
    tap_for(&t, r, NULL, &no_len, &pid);
    uint8_t dropped[TAKE_AT_ONCE / 8] = { 0 };
    int not_taken = 0;
    for (int at = 0; at < n; at += TAKE_AT_ONCE) {
        int k = n - at < TAKE_AT_ONCE ? n - at : TAKE_AT_ONCE;
        not_taken += take_msgs(&t, (const uint8_t *const *)frames + at, lens + at, ms + at, k,
                               (Arrival){ now_ns, wall_ns }, dropped, 0);
    }
    return not_taken;
}
