/* tool_rogue.c — an outsider attacking a job's sockets, for tests.
 *
 *   tool_rogue ENDPOINT MODE [SECONDS [JOB]]
 *   MODE: nokeys | wrongserver | stranger KEYFILE | jobkeys KEYFILE
 *
 * ENDPOINT is the job's ctl endpoint (tcp://H:P); tel is keys_tel_endpoint
 * of it. nokeys: plain sockets. wrongserver: fresh keys for everything.
 * stranger: a fresh client key pair but the job's real server public key
 * from KEYFILE (the strongest outsider: only the ZAP check stops it).
 * jobkeys: the job's own client keys — the positive control, which must
 * get through.
 * For SECONDS (default 3) it sends every 250 ms, on ctl as a viewer
 * ("view-rogue", answering ddptop's pings as a viewer does): attach with
 * control, stop, abort, a store set of "rogue"
 * and sets of rendezvous keys under JOB (default "ddptop"); on tel: steps
 * of rank 0 with loss 12345.0 and an error phase of rank 0. Frames are
 * encoded with codec_encode, so only the keys stand between them and ddptop.
 * Prints "queued=N replies=M" (frames ZeroMQ accepted; frames that came
 * back on ctl) and exits 0; 2 on usage errors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <zmq.h>

#include "wire/codec.h"
#include "net/curve.h"
#include "wire/protocol.h"

static long queued;

static void send_msg(void *sock, Msg *m, CodecBuf *b)
{
    char err[256];
    m->t_ns = proto_now_ns();
    if (codec_encode(m, b, err, sizeof err)) {
        fprintf(stderr, "tool_rogue: %s\n", err);
        exit(1);
    }
    if (zmq_send(sock, b->data, b->len, ZMQ_DONTWAIT) >= 0) queued++;
}

static void cmd(void *ctl, CodecBuf *b, const char *op, int64_t arg, int64_t id)
{
    Msg m;
    msg_init(&m, MSG_CMD);
    snprintf(m.u.cmd.op, sizeof m.u.cmd.op, "%s", op);
    m.u.cmd.arg = arg;
    m.u.cmd.id = id;
    send_msg(ctl, &m, b);
}

static void store_set(void *ctl, CodecBuf *b, const char *key)
{
    static uint8_t val[] = "rogue";
    Msg m;
    msg_init(&m, MSG_SET);
    snprintf(m.u.store.key, sizeof m.u.store.key, "%s", key);
    m.u.store.val = val; /* borrowed: no msg_done */
    m.u.store.val_len = sizeof val - 1;
    send_msg(ctl, &m, b);
}

static long elapsed_ms(const struct timespec *t0)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long)(now.tv_sec - t0->tv_sec) * 1000 + (now.tv_nsec - t0->tv_nsec) / 1000000;
}

static int usage(void)
{
    fprintf(stderr, "usage: tool_rogue ENDPOINT nokeys|wrongserver|stranger KEYFILE|jobkeys KEYFILE [SECONDS [JOB]]\n");
    return 2;
}

int main(int argc, char **argv)
{
    char err[256], tel_ep[512];
    if (argc < 3) return usage();
    const char *ep = argv[1], *mode = argv[2];
    int at = 3;
    JobKeys keys, fresh;
    bool use_keys = true;
    if (keys_tel_endpoint(ep, tel_ep, sizeof tel_ep)) {
        fprintf(stderr, "tool_rogue: %s: not a tcp:// or ipc:// endpoint\n", ep);
        return 2;
    }
    if (keys_generate(&fresh, err, sizeof err)) {
        fprintf(stderr, "tool_rogue: %s\n", err);
        return 1;
    }
    if (!strcmp(mode, "stranger") || !strcmp(mode, "jobkeys")) {
        if (argc < 4) return usage();
        if (keys_read(argv[3], &keys, err, sizeof err)) {
            fprintf(stderr, "tool_rogue: %s\n", err);
            return 2;
        }
        at = 4;
        if (!strcmp(mode, "stranger")) {
            memcpy(fresh.server.pub, keys.server.pub, sizeof fresh.server.pub);
            keys = fresh;
        }
    } else if (!strcmp(mode, "wrongserver")) {
        keys = fresh;
    } else if (!strcmp(mode, "nokeys")) {
        use_keys = false;
    } else {
        return usage();
    }
    double seconds = argc > at ? atof(argv[at]) : 3.0;
    const char *job = argc > at + 1 ? argv[at + 1] : "ddptop";
    if (seconds <= 0) return usage();

    void *ctx = zmq_ctx_new();
    void *ctl = zmq_socket(ctx, ZMQ_DEALER), *tel = zmq_socket(ctx, ZMQ_PUSH);
    int zero = 0;
    zmq_setsockopt(ctl, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(tel, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(ctl, ZMQ_ROUTING_ID, "view-rogue", 10);
    if (use_keys &&
        (keys_client_socket(ctl, &keys, err, sizeof err) || keys_client_socket(tel, &keys, err, sizeof err))) {
        fprintf(stderr, "tool_rogue: %s\n", err);
        return 1;
    }
    if (zmq_connect(ctl, ep) || zmq_connect(tel, tel_ep)) {
        fprintf(stderr, "tool_rogue: cannot connect to %s: %s\n", ep, zmq_strerror(zmq_errno()));
        return 1;
    }

    /* Keys a rendezvous reads: Gloo's meshes (comm_gloo.cc) and NCCL's id. */
    char rdzv[3][PROTO_STR_MED];
    snprintf(rdzv[0], sizeof rdzv[0], "%s/gloo/coll/0", job);
    snprintf(rdzv[1], sizeof rdzv[1], "%s/gloo/ring/0", job);
    snprintf(rdzv[2], sizeof rdzv[2], "%s/nccl/id", job);

    CodecBuf b;
    codec_buf_init(&b);
    long replies = 0;
    long total_ms = (long)(seconds * 1000);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long round = 0;
    for (;;) {
        round++;
        cmd(ctl, &b, "attach", 1, 0);
        cmd(ctl, &b, "stop", 0, round);
        cmd(ctl, &b, "abort", 0, round);
        store_set(ctl, &b, "rogue");
        for (int i = 0; i < 3; i++) store_set(ctl, &b, rdzv[i]);
        Msg m;
        msg_init(&m, MSG_STEP);
        m.rank = 0;
        m.u.step.step = round;
        m.u.step.loss = 12345.0;
        send_msg(tel, &m, &b);
        msg_init(&m, MSG_PHASE);
        m.rank = 0;
        m.u.phase.phase = PHASE_ERROR;
        snprintf(m.u.phase.detail, sizeof m.u.phase.detail, "rogue: injected error");
        send_msg(tel, &m, &b);

        /* Read what comes back until the next round, or the end. */
        long wait;
        while ((wait = (round * 250 < total_ms ? round * 250 : total_ms) - elapsed_ms(&t0)) > 0) {
            zmq_pollitem_t it = { ctl, 0, ZMQ_POLLIN, 0 };
            if (zmq_poll(&it, 1, wait) > 0) {
                char buf[256];
                int n;
                while ((n = zmq_recv(ctl, buf, sizeof buf, ZMQ_DONTWAIT)) >= 0) {
                    replies++;
                    /* answer ddptop's pings as a viewer must, or it is never let in */
                    Msg r;
                    char err[128];
                    if (n <= (int)sizeof buf && codec_decode(buf, (size_t)n, &r, err, sizeof err) == 0) {
                        if (r.kind == MSG_CMD && !strcmp(r.u.cmd.op, "ping")) {
                            cmd(ctl, &b, "attach", 1, r.u.cmd.id);
                            cmd(ctl, &b, "stop", 0, 1000000 + round); /* once let in */
                        }
                        msg_done(&r);
                    }
                }
            }
        }
        if (elapsed_ms(&t0) >= total_ms) break;
    }
    cmd(ctl, &b, "detach", 0, 0);
    printf("queued=%ld replies=%ld\n", queued, replies);
    fflush(stdout);
    codec_buf_done(&b);
    int linger = 200; /* let the detach out */
    zmq_setsockopt(ctl, ZMQ_LINGER, &linger, sizeof linger);
    zmq_close(ctl);
    zmq_close(tel);
    zmq_ctx_term(ctx);
    return 0;
}
