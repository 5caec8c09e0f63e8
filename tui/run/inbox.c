/* inbox.c — what arrives on the tel PULL and ctl ROUTER sockets: every
 * frame is tapped as received (recording, --publish, viewers), then each
 * message goes where its sender says: agents to nodes.h, viewers to
 * peers.c, store requests to the store, the ranks' own to the job model.
 * See internal.h. Main thread.
 */
#include "run/internal.h"

#include <string.h>
#include <zmq.h>

#include "base/clock.h"

/* Every frame as received goes to the recording and the PUB socket,
 * before it is decoded (so malformed frames are kept for a post-mortem). */
typedef struct {
    Run *r;
    RecSource src;
    const char *ident; /* ctl: the sender's routing id, set before the tap runs */
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

/* listen: a rank's word is its only sign of life, and its bye its exit. */
static bool listen_heard(Run *r, const Msg *m, int64_t now)
{
    RunRank *rk = &r->rk[m->rank];
    rk->heard_ms = mono_ms();
    if (m->kind != MSG_BYE || rk->ext_ended) return false;
    job_apply(r->job, m, now, wall_ns());
    rk->ext_ended = true;
    run_rank_ended(r, m->rank, (int)r->job->ranks[m->rank].pid, (m->u.bye.status & 0xff) << 8);
    return true;
}

static void handle_msg(Run *r, const void *ident, size_t ident_len, Msg *m)
{
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
        if (ident) store_handle(r->store, r->ctl, ident, ident_len, m, mono_ms(), &r->buf);
        return;
    }
    if (m->kind == MSG_NODE || m->kind == MSG_CMD) return; /* not a rank's */
    int64_t now = mono_ns();
    if (r->external && m->rank >= 0 && m->rank < r->job->world && listen_heard(r, m, now)) return;
    job_apply(r->job, m, now, wall_ns());
    bench_on_msg(r->bench, m, now);
    if (m->kind == MSG_HELLO && m->rank >= 0 && m->rank < r->job->world && ident) {
        r->rk[m->rank].routable = true;
        run_flush_cmds(r);
    }
}

int run_drain(Run *r)
{
    int n_ctl = 0;
    char err[256];
    char ident[ZS_IDENT_MAX];
    size_t ident_len = 0;
    Tap tel_tap = { r, REC_SRC_TEL, NULL, NULL }, ctl_tap = { r, REC_SRC_CTL, ident, &ident_len };
    ZsTap tap = (r->rec || r->pub || r->viewers) ? tap_frame : NULL;
    for (int i = 0; i < 4096; i++) {
        Msg m;
        int rc = zs_recv_tap(r->tel, &m, ZMQ_DONTWAIT, tap, &tel_tap, err, sizeof err);
        if (rc == 1 || rc < 0) break;
        if (rc == 2) {
            r->job->bad_frames++;
            r->job->version++;
            continue;
        }
        handle_msg(r, NULL, 0, &m);
        msg_done(&m);
    }
    for (int i = 0; i < 1024; i++) {
        Msg m;
        int rc = zs_recv_from_tap(r->ctl, ident, &ident_len, &m, ZMQ_DONTWAIT, tap, &ctl_tap, err, sizeof err);
        if (rc == 1 || rc < 0) break;
        int node;
        if (rc == 2 && r->nodes && ident_len && nodes_ident(ident, ident_len, &node)) {
            NodeEvents ev = run_node_events(r);
            nodes_refuse_frame(r->nodes, ident, ident_len, err, &ev);
            continue;
        }
        if (rc == 2) {
            r->job->bad_frames++;
            r->job->version++;
            continue;
        }
        handle_msg(r, ident, ident_len, &m);
        msg_done(&m);
        n_ctl++;
    }
    return n_ctl;
}

void run_take_hello(Run *r, RunHello *h)
{
    Tap t = { r, REC_SRC_CTL, h->ident, &h->ident_len };
    tap_frame(&t, h->frame.data, h->frame.len, &h->msg, 0);
    handle_msg(r, h->ident, h->ident_len, &h->msg);
    msg_done(&h->msg);
    h->have = false;
}
