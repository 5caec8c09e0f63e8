/* test_uplink.c — the worker's telemetry bursts, on a real socket.
 *
 * A burst holds the messages of one 50 ms slot of the wall clock and leaves
 * with the first message of a later slot, so every rank's bursts leave at
 * the same marks (workers/link/uplink.c). Nothing is lost or reordered on
 * the way, and close sends what still waits. Every receive has a timeout,
 * so a broken build fails instead of hanging.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <zmq.h>

#include "check.h"
#include "link/uplink.h"
#include "net/zsock.h"
#include "wire/codec.h"
#include "wire/protocol.h"

#define SLOT_NS    50000000LL
#define N_STEPS    150
#define GAP_NS     2000000L /* a step every 2 ms: about 7 slots */
#define MAX_BURSTS 64

static void sleep_ns(long ns)
{
    struct timespec ts = { 0, ns };
    nanosleep(&ts, NULL);
}

static void test_bursts_on_the_grid(void)
{
    TEST_BEGIN("bursts_hold_one_50ms_slot_and_leave_at_the_next_mark");
    char dir[256], err[256], ctl_ep[300], tel_ep[300];
    CHECK(zs_private_dir(dir, sizeof dir, err, sizeof err) == 0, "zs_private_dir: %s", err);
    snprintf(ctl_ep, sizeof ctl_ep, "ipc://%s/ctl", dir);
    snprintf(tel_ep, sizeof tel_ep, "ipc://%s/tel", dir);
    void *ctx = zmq_ctx_new();
    void *pull = zmq_socket(ctx, ZMQ_PULL), *router = zmq_socket(ctx, ZMQ_ROUTER);
    int timeout_ms = 2000, zero = 0;
    zmq_setsockopt(pull, ZMQ_RCVTIMEO, &timeout_ms, sizeof timeout_ms);
    zmq_setsockopt(pull, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(router, ZMQ_LINGER, &zero, sizeof zero);
    CHECK(zmq_bind(pull, tel_ep) == 0 && zmq_bind(router, ctl_ep) == 0, "bind: %s", zmq_strerror(zmq_errno()));

    Uplink *u = NULL;
    CHECK(uplink_open(&u, ctl_ep, tel_ep, 3, NULL, err, sizeof err) == 0, "uplink_open: %s", err);
    if (!u) return;
    sleep_ns(100000000); /* let ipc connect: telemetry before it is lost by design */
    for (int i = 0; i < N_STEPS; i++) {
        Msg m;
        msg_init(&m, MSG_STEP);
        m.u.step.step = i;
        CHECK(uplink_send(u, &m) == 0, "send step %d", i);
        sleep_ns(GAP_NS);
    }
    uplink_close(&u, 2000); /* sends the last burst */

    int64_t next = 0, prev_slot = -1;
    int bursts = 0, late = 0;
    for (;;) {
        zmq_msg_t z;
        zmq_msg_init(&z);
        if (zmq_msg_recv(&z, pull, 0) < 0) {
            zmq_msg_close(&z);
            break;
        }
        Msg b;
        CHECK(codec_decode(zmq_msg_data(&z), zmq_msg_size(&z), &b, err, sizeof err) == 0, "decode: %s", err);
        if (b.kind == MSG_BURST) {
            bursts++;
            size_t pos = 0;
            const uint8_t *f;
            size_t flen;
            int64_t slot = -1;
            while (codec_burst_next(&b.u.burst, &pos, &f, &flen)) {
                Msg m;
                CHECK(codec_burst_decode(&b, f, flen, &m, err, sizeof err) == 0, "burst item: %s", err);
                CHECK(m.kind == MSG_STEP && m.u.step.step == next, "got kind %d step %lld, want step %lld", (int)m.kind,
                      (long long)m.u.step.step, (long long)next);
                next = m.u.step.step + 1;
                if (slot < 0) slot = m.t_ns / SLOT_NS;
                CHECK(m.t_ns / SLOT_NS == slot, "step %lld (t %lld) in a burst of slot %lld", (long long)m.u.step.step,
                      (long long)m.t_ns, (long long)slot);
                msg_done(&m);
            }
            CHECK(slot > prev_slot, "a burst of slot %lld after one of slot %lld", (long long)slot,
                  (long long)prev_slot);
            prev_slot = slot;
            /* sent at a later slot's first message (the last one: at close) */
            if (b.t_ns / SLOT_NS > slot) late++;
        } else if (b.kind == MSG_STEP) {
            CHECK(b.u.step.step == next, "lone step %lld, want %lld", (long long)b.u.step.step, (long long)next);
            next = b.u.step.step + 1;
        }
        msg_done(&b);
        zmq_msg_close(&z);
    }
    CHECK(next == N_STEPS, "received %lld of %d steps", (long long)next, N_STEPS);
    /* 300 ms or more of steps: 6 slots or more, each its own burst, all
     * but the last sent in a later slot */
    CHECK(bursts >= 6, "%d bursts", bursts);
    CHECK(late >= bursts - 1, "%d of %d bursts sent after their slot", late, bursts);
    zmq_close(pull);
    zmq_close(router);
    zmq_ctx_term(ctx);
    zs_private_dir_remove(dir);
    TEST_END();
}

/* ddptop asks only torch ranks for their stacks, but a "stacks" command
 * reaching this worker (a newer ddptop, a hand-made one) is skipped: none
 * reaches the trainer or takes room in its command queue, and the command
 * after a hundred of them still comes. */
static void test_stacks_ask_skipped(void)
{
    TEST_BEGIN("stacks_asks_skipped_commands_still_come");
    char dir[256], err[256], ctl_ep[300], tel_ep[300];
    CHECK(zs_private_dir(dir, sizeof dir, err, sizeof err) == 0, "zs_private_dir: %s", err);
    snprintf(ctl_ep, sizeof ctl_ep, "ipc://%s/ctl", dir);
    snprintf(tel_ep, sizeof tel_ep, "ipc://%s/tel", dir);
    void *ctx = zmq_ctx_new();
    void *pull = zmq_socket(ctx, ZMQ_PULL), *router = zmq_socket(ctx, ZMQ_ROUTER);
    int timeout_ms = 2000, zero = 0;
    zmq_setsockopt(router, ZMQ_RCVTIMEO, &timeout_ms, sizeof timeout_ms);
    zmq_setsockopt(router, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(pull, ZMQ_LINGER, &zero, sizeof zero);
    CHECK(zmq_bind(pull, tel_ep) == 0 && zmq_bind(router, ctl_ep) == 0, "bind: %s", zmq_strerror(zmq_errno()));
    Uplink *u = NULL;
    CHECK(uplink_open(&u, ctl_ep, tel_ep, 3, NULL, err, sizeof err) == 0, "uplink_open: %s", err);
    if (!u) return;
    Msg hello;
    msg_init(&hello, MSG_HELLO); /* on ctl: the router learns the rank's routing id */
    hello.rank = 3;
    CHECK(uplink_send_important(u, &hello) == 0, "hello not sent");
    char ident[ZS_IDENT_MAX];
    size_t ident_len = 0;
    Msg in;
    CHECK(zs_recv_from(router, ident, &ident_len, &in, 0, err, sizeof err) == 0 && in.kind == MSG_HELLO,
          "no hello on ctl: %s", err);
    msg_done(&in);
    CodecBuf b;
    codec_buf_init(&b);
    for (int i = 1; i <= 100; i++) { /* more than the worker's command queue holds */
        Msg c;
        msg_init(&c, MSG_CMD);
        c.u.cmd.id = c.u.cmd.arg = i;
        snprintf(c.u.cmd.op, sizeof c.u.cmd.op, "stacks");
        CHECK(zs_send_to(router, ident, ident_len, &c, &b, 0, err, sizeof err) == 0, "send stacks %d: %s", i, err);
    }
    Msg ck;
    msg_init(&ck, MSG_CMD);
    ck.u.cmd.id = 1;
    snprintf(ck.u.cmd.op, sizeof ck.u.cmd.op, "ckpt");
    CHECK(zs_send_to(router, ident, ident_len, &ck, &b, 0, err, sizeof err) == 0, "send ckpt: %s", err);
    MsgCmd got;
    int n = 0, stacks = 0, ckpt = 0;
    for (int tries = 0; tries < 200 && !ckpt; tries++) {
        int rc;
        while ((rc = uplink_next_cmd(u, &got)) == 1) {
            n++;
            stacks += !strcmp(got.op, "stacks");
            ckpt += !strcmp(got.op, "ckpt");
        }
        CHECK(rc == 0, "uplink_next_cmd: %d", rc);
        if (!ckpt) sleep_ns(10000000);
    }
    CHECK(ckpt == 1 && stacks == 0 && n == 1, "commands out: %d (%d stacks, %d ckpt)", n, stacks, ckpt);
    codec_buf_done(&b);
    uplink_close(&u, 0);
    zmq_close(pull);
    zmq_close(router);
    zmq_ctx_term(ctx);
    TEST_END();
}

int main(void)
{
    test_bursts_on_the_grid();
    test_stacks_ask_skipped();
    return check_failures_ != 0;
}
