/* uplink.c — the worker side of ddptop's sockets. See uplink.h.
 *
 * Telemetry never waits on a slow frontend (ZMQ_DONTWAIT, drops counted);
 * store operations are synchronous request/reply over ctl, bounded by their
 * timeout plus a margin so a dead ddptop cannot hang a rank forever.
 */
#include "uplink.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "codec.h"
#include "zsock.h"

#define CMD_QUEUE 64
#define TEL_HWM 10000
/* How long ddptop may be late beyond a store op's own timeout. */
#define STORE_MARGIN_MS 5000

struct Uplink {
    void *zctx, *ctl, *tel;
    int rank;
    uint64_t drops;
    CodecBuf buf;
    MsgCmd q[CMD_QUEUE];
    int q_head, q_len;
};

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int uplink_open(Uplink **out, const char *ctl_ep, const char *tel_ep, int rank,
                char *err, size_t errlen)
{
    Uplink *u = calloc(1, sizeof *u);
    if (!u) { snprintf(err, errlen, "uplink: out of memory"); return -1; }
    u->rank = rank;
    codec_buf_init(&u->buf);
    u->zctx = zmq_ctx_new();
    if (!u->zctx) goto zfail;
    u->ctl = zmq_socket(u->zctx, ZMQ_DEALER);
    u->tel = zmq_socket(u->zctx, ZMQ_PUSH);
    if (!u->ctl || !u->tel) goto zfail;
    char ident[32];
    int n = snprintf(ident, sizeof ident, "rank-%d", rank);
    int hwm = TEL_HWM, zero = 0;
    if (zmq_setsockopt(u->ctl, ZMQ_ROUTING_ID, ident, (size_t)n) ||
        zmq_setsockopt(u->tel, ZMQ_SNDHWM, &hwm, sizeof hwm) ||
        zmq_setsockopt(u->ctl, ZMQ_LINGER, &zero, sizeof zero))
        goto zfail;
    if (zmq_connect(u->ctl, ctl_ep)) {
        snprintf(err, errlen, "uplink: cannot connect ctl to %s: %s", ctl_ep, zmq_strerror(errno));
        goto fail;
    }
    if (zmq_connect(u->tel, tel_ep)) {
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
    if (u->tel) {
        zmq_setsockopt(u->tel, ZMQ_LINGER, &linger_ms, sizeof linger_ms);
        zmq_close(u->tel);
    }
    if (u->ctl) zmq_close(u->ctl);
    if (u->zctx) zmq_ctx_term(u->zctx);
    codec_buf_done(&u->buf);
    free(u);
    *up = NULL;
}

static void stamp(Uplink *u, Msg *m)
{
    m->rank = u->rank;
    if (!m->t_ns) m->t_ns = proto_now_ns();
}

int uplink_send(Uplink *u, Msg *m)
{
    char err[160];
    stamp(u, m);
    int rc = zs_send(u->tel, m, &u->buf, ZMQ_DONTWAIT, err, sizeof err);
    if (rc != 0) { u->drops++; return 1; }
    return 0;
}

int uplink_send_important(Uplink *u, Msg *m)
{
    char err[160];
    stamp(u, m);
    void *s = (m->kind == MSG_HELLO) ? u->ctl : u->tel;
    int64_t deadline = mono_ms() + 2000;
    for (;;) {
        int rc = zs_send(s, m, &u->buf, ZMQ_DONTWAIT, err, sizeof err);
        if (rc == 0) return 0;
        if (rc < 0 || mono_ms() >= deadline) { u->drops++; return 1; }
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

uint64_t uplink_drops(const Uplink *u) { return u->drops; }

static void queue_cmd(Uplink *u, const MsgCmd *c)
{
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
        int64_t left = deadline - mono_ms();
        if (left <= 0) {
            snprintf(err, errlen, "store: no reply from ddptop for \"%s\" within %lld ms",
                     req->u.store.key, (long long)(timeout_ms + STORE_MARGIN_MS));
            return 1;
        }
        zmq_pollitem_t it = {u->ctl, 0, ZMQ_POLLIN, 0};
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
        if (rc < 0) { snprintf(err, errlen, "store: %s", rerr); return -1; }
        if (rc != 0) continue;
        if (m.kind == MSG_CMD) {
            queue_cmd(u, &m.u.cmd);
        } else if (m.kind == MSG_VAL && !strcmp(m.u.store.key, req->u.store.key)) {
            *reply = m;
            return 0;
        }
        msg_done(&m);
    }
}

int uplink_store_set(void *ctx, const char *key, const void *val, size_t len,
                     char *err, size_t errlen)
{
    Uplink *u = ctx;
    Msg req, rep;
    msg_init(&req, MSG_SET);
    snprintf(req.u.store.key, sizeof req.u.store.key, "%s", key);
    req.u.store.val = (uint8_t *)val;     /* borrowed for the send only */
    req.u.store.val_len = (uint32_t)len;
    int rc = store_call(u, &req, 0, &rep, err, errlen);
    if (rc != 0) return -1;
    bool ok = rep.u.store.ok;
    msg_done(&rep);
    if (!ok) { snprintf(err, errlen, "store: ddptop refused set \"%s\"", key); return -1; }
    return 0;
}

int uplink_store_get(void *ctx, const char *key, void **val, size_t *len, int64_t timeout_ms,
                     char *err, size_t errlen)
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

int uplink_next_cmd(Uplink *u, MsgCmd *out)
{
    for (;;) {
        if (u->q_len) {
            *out = u->q[u->q_head];
            u->q_head = (u->q_head + 1) % CMD_QUEUE;
            u->q_len--;
            return 1;
        }
        Msg m;
        char err[160];
        int rc = zs_recv(u->ctl, &m, ZMQ_DONTWAIT, err, sizeof err);
        if (rc < 0) return -1;
        if (rc == 1) return 0;
        if (rc == 2) continue;
        if (m.kind == MSG_CMD) queue_cmd(u, &m.u.cmd);
        msg_done(&m);
    }
}
