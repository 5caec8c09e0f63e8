/* relay.c — an agent's relay between its node's ranks and node 0. See relay.h.
 */
#include "cluster/relay.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zmq.h>

#include "base/err.h"
#include "net/zsock.h"
#include "wire/protocol.h"

#define MAX_UP 256

typedef struct {
    char ident[ZS_IDENT_MAX];
    size_t len;
    void *sock; /* DEALER to node 0 with routing id = ident */
} Up;

struct Relay {
    void *zctx;
    void *ctl, *tel; /* local ROUTER, PULL (ipc) */
    void *up_tel;    /* PUSH to node 0 */
    Up up[MAX_UP];
    int n_up;
    char ctl_ep[300], tel_ep[300], up_ctl[300];
    JobKeys keys;
    uint64_t frames_up, frames_down, drops;
};

static void *up_socket(Relay *r, int type, const char *ident, size_t len, const char *ep, char *err, size_t errlen)
{
    void *s = zmq_socket(r->zctx, type);
    int zero = 0, timeo = 1000;
    if (!s) {
        err_set(err, errlen, "zeromq: %s", zmq_strerror(errno));
        return NULL;
    }
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_SNDTIMEO, &timeo, sizeof timeo);
    if ((ident && zmq_setsockopt(s, ZMQ_ROUTING_ID, ident, len)) || keys_client_socket(s, &r->keys, err, errlen) ||
        zmq_connect(s, ep)) {
        if (!err[0]) err_set(err, errlen, "connect %s: %s", ep, zmq_strerror(errno));
        zmq_close(s);
        return NULL;
    }
    return s;
}

int relay_open(Relay **out, void *zctx, const char *dir, const char *up_ctl, const char *up_tel, const JobKeys *keys,
               char *err, size_t errlen)
{
    Relay *r = calloc(1, sizeof *r);
    if (!r) return err_set(err, errlen, "out of memory");
    err[0] = 0;
    r->zctx = zctx;
    r->keys = *keys;
    snprintf(r->ctl_ep, sizeof r->ctl_ep, "ipc://%s/ctl", dir);
    snprintf(r->tel_ep, sizeof r->tel_ep, "ipc://%s/tel", dir);
    snprintf(r->up_ctl, sizeof r->up_ctl, "%s", up_ctl);
    r->ctl = zmq_socket(zctx, ZMQ_ROUTER);
    r->tel = zmq_socket(zctx, ZMQ_PULL);
    int zero = 0, hwm = 100000;
    if (!r->ctl || !r->tel) {
        err_set(err, errlen, "zeromq: %s", zmq_strerror(errno));
        goto fail;
    }
    zmq_setsockopt(r->ctl, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(r->tel, ZMQ_LINGER, &zero, sizeof zero);
    /* no ZMQ_ROUTER_HANDOVER: a second "rank-N" must not take a live rank's
     * traffic; ranks' ids are per process (find_up), so a restart is new */
    zmq_setsockopt(r->tel, ZMQ_RCVHWM, &hwm, sizeof hwm);
    int64_t maxmsg = 8 << 20; /* PROTO_MAX_FRAME_BYTES: larger frames are refused upstream anyway */
    zmq_setsockopt(r->tel, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    zmq_setsockopt(r->ctl, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    if (zs_bind(r->ctl, r->ctl_ep) || zs_bind(r->tel, r->tel_ep)) {
        err_set(err, errlen, "cannot bind the relay's sockets in %s: %s", dir, zmq_strerror(errno));
        goto fail;
    }
    if (!(r->up_tel = up_socket(r, ZMQ_PUSH, NULL, 0, up_tel, err, errlen))) goto fail;
    zmq_setsockopt(r->up_tel, ZMQ_SNDHWM, &hwm, sizeof hwm);
    *out = r;
    return 0;
fail:
    relay_close(&r);
    return -1;
}

const char *relay_ctl_endpoint(const Relay *r) { return r->ctl_ep; }
const char *relay_tel_endpoint(const Relay *r) { return r->tel_ep; }

/* A slot whose rank process (named by its routing id) has ended. */
static int dead_slot(Relay *r)
{
    for (int i = 0; i < r->n_up; i++) {
        int64_t pid = 0;
        proto_rank_ident_parse(r->up[i].ident, r->up[i].len, &pid);
        if (pid && kill((pid_t)pid, 0) < 0 && errno == ESRCH) return i;
    }
    return -1;
}

/* The DEALER to node 0 for a rank's routing id, made on its first frame.
 * A "rank-R.PID.NONCE" id must come from process PID (the kernel says who
 * sent body on ipc), so no process opens a slot in another's name; the
 * slots of ended processes are reused, so squatters that exit cannot
 * exhaust them. */
static Up *find_up(Relay *r, const void *ident, size_t len, zmq_msg_t *body)
{
    for (int i = 0; i < r->n_up; i++)
        if (r->up[i].len == len && !memcmp(r->up[i].ident, ident, len)) return &r->up[i];
    int64_t named = 0, sender = zs_peer_pid(body);
    if (proto_rank_ident_parse(ident, len, &named) < 0 || (named && sender && named != sender)) return NULL;
    int slot = r->n_up < MAX_UP ? r->n_up : dead_slot(r);
    if (slot < 0) return NULL;
    char err[256] = "";
    Up *u = &r->up[slot];
    if (slot < r->n_up) zmq_close(u->sock);
    memcpy(u->ident, ident, len);
    u->len = len;
    if (!(u->sock = up_socket(r, ZMQ_DEALER, ident, len, r->up_ctl, err, sizeof err))) {
        if (slot < r->n_up) *u = r->up[--r->n_up]; /* the slot is gone */
        return NULL;
    }
    if (slot == r->n_up) r->n_up++;
    return u;
}

/* One single-frame message from src to dst (multi-part ones are not ours: dropped). */
static int move(void *src, void *dst, int flags, uint64_t *ok, uint64_t *dropped)
{
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, src, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&m);
        return 0;
    }
    if (zmq_msg_more(&m)) {
        zs_drain(src);
        (*dropped)++;
    } else if (zmq_msg_send(&m, dst, flags) >= 0) {
        (*ok)++;
        return 1;
    } else {
        (*dropped)++;
    }
    zmq_msg_close(&m);
    return 1;
}

int relay_pump(Relay *r, void *extra, int *extra_ready, long timeout_ms)
{
    zmq_pollitem_t it[3 + MAX_UP];
    int n = 0;
    it[n++] = (zmq_pollitem_t){ r->tel, 0, ZMQ_POLLIN, 0 };
    it[n++] = (zmq_pollitem_t){ r->ctl, 0, ZMQ_POLLIN, 0 };
    it[n++] = (zmq_pollitem_t){ extra, 0, ZMQ_POLLIN, 0 };
    for (int i = 0; i < r->n_up; i++) it[n++] = (zmq_pollitem_t){ r->up[i].sock, 0, ZMQ_POLLIN, 0 };
    *extra_ready = 0;
    if (zmq_poll(it, n, timeout_ms) <= 0) return 0;
    *extra_ready = (it[2].revents & ZMQ_POLLIN) != 0;
    int moved = 0;
    /* telemetry up: never wait for node 0 */
    for (int k = 0; k < 4096 && move(r->tel, r->up_tel, ZMQ_DONTWAIT, &r->frames_up, &r->drops); k++) moved++;
    /* ctl up: [rank id][body] -> that rank's DEALER */
    for (int k = 0; k < 1024; k++) {
        zmq_msg_t id, body;
        zmq_msg_init(&id);
        if (zmq_msg_recv(&id, r->ctl, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&id);
            break;
        }
        zmq_msg_init(&body);
        int got = zmq_msg_more(&id) && zmq_msg_recv(&body, r->ctl, 0) >= 0;
        if (got && zmq_msg_more(&body)) { /* not ours: drain */
            zs_drain(r->ctl);
            got = 0;
        }
        Up *u = got ? find_up(r, zmq_msg_data(&id), zmq_msg_size(&id), &body) : NULL;
        if (u && zmq_msg_send(&body, u->sock, 0) >= 0)
            r->frames_up++;
        else
            r->drops++;
        zmq_msg_close(&body);
        zmq_msg_close(&id);
        moved++;
    }
    /* ctl down: node 0 -> the rank */
    for (int i = 0; i < r->n_up; i++) {
        for (int k = 0; k < 1024; k++) {
            zmq_msg_t m;
            zmq_msg_init(&m);
            if (zmq_msg_recv(&m, r->up[i].sock, ZMQ_DONTWAIT) < 0) {
                zmq_msg_close(&m);
                break;
            }
            if (zmq_send(r->ctl, r->up[i].ident, r->up[i].len, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0 &&
                zmq_msg_send(&m, r->ctl, ZMQ_DONTWAIT) >= 0)
                r->frames_down++;
            else
                r->drops++;
            zmq_msg_close(&m);
            moved++;
        }
    }
    return moved;
}

uint64_t relay_frames_up(const Relay *r) { return r->frames_up; }
uint64_t relay_frames_down(const Relay *r) { return r->frames_down; }
uint64_t relay_drops(const Relay *r) { return r->drops; }

void relay_close(Relay **pr)
{
    Relay *r = pr ? *pr : NULL;
    if (!r) return;
    for (int i = 0; i < r->n_up; i++) zmq_close(r->up[i].sock);
    if (r->up_tel) zmq_close(r->up_tel);
    if (r->ctl) zmq_close(r->ctl);
    if (r->tel) zmq_close(r->tel);
    free(r);
    *pr = NULL;
}
