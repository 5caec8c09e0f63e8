/* custom_trainer.c — a toy trainer that reports to ddptop through transport/.
 *
 * What any trainer needs to show up in ddptop, in one page: it is launched
 * like ddptop-worker (RANK, WORLD_SIZE, DDPTOP_CTL, DDPTOP_TEL in the
 * environment), says hello over ctl with routing id "rank-N", reports
 * phases, steps and a heartbeat over tel without ever blocking on them,
 * honours the "stop" command, and says bye before a clean exit.
 * The "training" is a fake loss that decays; there are no collectives, so
 * each rank may act on a command alone (a real data-parallel trainer must
 * agree on the step first: see docs/DECISIONS.md).
 *
 *   custom_trainer [--steps N] [--step-ms MS] [--timeout S]
 *
 * Only transport/'s public headers: protocol.h (messages), codec.h (via
 * zsock.h), zsock.h (one message per frame) and ZeroMQ itself.
 * Build: make (gives build/examples/custom_trainer).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zmq.h>

#include "wire/protocol.h"
#include "net/zsock.h"

typedef struct {
    void *ctx, *ctl, *tel;
    int rank, world;
    CodecBuf buf;
    uint64_t drops;
} Link;

static int env_int(const char *name, int *out)
{
    const char *s = getenv(name);
    char *end;
    if (!s || !*s) return -1;
    long v = strtol(s, &end, 10);
    if (*end || v < 0 || v > 1 << 20) return -1;
    *out = (int)v;
    return 0;
}

/* Telemetry: stamped, never waits (a full queue drops and counts). */
static void tel(Link *l, Msg *m)
{
    char err[160];
    m->rank = l->rank;
    m->t_ns = proto_now_ns();
    if (zs_send(l->tel, m, &l->buf, ZMQ_DONTWAIT, err, sizeof err) != 0) l->drops++;
}

static void phase(Link *l, Phase p, const char *detail)
{
    Msg m;
    msg_init(&m, MSG_PHASE);
    m.u.phase.phase = p;
    snprintf(m.u.phase.detail, sizeof m.u.phase.detail, "%s", detail ? detail : "");
    tel(l, &m);
}

static void sleep_ms(double ms)
{
    struct timespec ts = { (time_t)(ms / 1000), (long)(fmod(ms, 1000) * 1e6) };
    while (nanosleep(&ts, &ts) && errno == EINTR) {}
}

/* Commands waiting on ctl. Returns the op of the last one seen ("" if none). */
static const char *poll_cmds(Link *l, char *op, size_t n)
{
    op[0] = 0;
    for (;;) {
        Msg m;
        char err[160];
        int rc = zs_recv(l->ctl, &m, ZMQ_DONTWAIT, err, sizeof err);
        if (rc != 0 && rc != 2) break; /* nothing more, or ddptop gone */
        if (rc == 0 && m.kind == MSG_CMD) snprintf(op, n, "%s", m.u.cmd.op);
        if (rc == 0) msg_done(&m);
    }
    return op;
}

int main(int argc, char **argv)
{
    long steps = 100;
    double step_ms = 20;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--steps") && v)
            steps = atol(argv[++i]);
        else if (!strcmp(a, "--step-ms") && v)
            step_ms = atof(argv[++i]);
        else if (!strcmp(a, "--timeout") && v)
            i++; /* ddptop passes it; no collectives here */
        else {
            fprintf(stderr, "custom_trainer: unknown option \"%s\" (--steps N, --step-ms MS)\n", a);
            return 2;
        }
    }
    if (steps < 1 || step_ms < 0) {
        fprintf(stderr, "custom_trainer: --steps must be >= 1\n");
        return 2;
    }
    if (getenv("DDPTOP_CHECK_ARGS")) return 0; /* ddptop validates options before launching */

    Link l = { 0 };
    const char *ctl_ep = getenv("DDPTOP_CTL"), *tel_ep = getenv("DDPTOP_TEL");
    if (env_int("RANK", &l.rank) || env_int("WORLD_SIZE", &l.world) || !ctl_ep || !tel_ep) {
        fprintf(stderr,
                "custom_trainer: RANK, WORLD_SIZE, DDPTOP_CTL and DDPTOP_TEL must be set (run it from ddptop)\n");
        return 2;
    }
    codec_buf_init(&l.buf);
    l.ctx = zmq_ctx_new();
    l.ctl = zmq_socket(l.ctx, ZMQ_DEALER);
    l.tel = zmq_socket(l.ctx, ZMQ_PUSH);
    char ident[32];
    int n = snprintf(ident, sizeof ident, "rank-%d", l.rank);
    int hwm = 10000, linger = 2000;
    /* The routing id tells ddptop's ROUTER which rank a command goes to. */
    zmq_setsockopt(l.ctl, ZMQ_ROUTING_ID, ident, (size_t)n);
    zmq_setsockopt(l.tel, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(l.tel, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(l.ctl, ZMQ_LINGER, &linger, sizeof linger);
    if (zmq_connect(l.ctl, ctl_ep) || zmq_connect(l.tel, tel_ep)) {
        fprintf(stderr, "custom_trainer: connect: %s\n", zmq_strerror(errno));
        return 1;
    }

    char err[256], host[PROTO_STR_MED] = "?", op[PROTO_STR_SHORT];
    gethostname(host, sizeof host - 1);
    Msg m;
    msg_init(&m, MSG_HELLO);
    m.rank = l.rank;
    m.t_ns = proto_now_ns();
    m.u.hello.world = l.world;
    m.u.hello.local_rank = l.rank;
    m.u.hello.local_world = l.world;
    m.u.hello.pid = getpid();
    snprintf(m.u.hello.host, sizeof m.u.hello.host, "%s", host);
    snprintf(m.u.hello.device, sizeof m.u.hello.device, "cpu");
    snprintf(m.u.hello.backend, sizeof m.u.hello.backend, "none");
    snprintf(m.u.hello.version, sizeof m.u.hello.version, "custom_trainer 1.0");
    snprintf(m.u.hello.dataset, sizeof m.u.hello.dataset, "none");
    snprintf(m.u.hello.model, sizeof m.u.hello.model, "toy");
    m.u.hello.max_steps = steps;
    m.u.hello.steps_per_epoch = steps;
    /* hello goes over ctl, and must not be lost: a blocking send. */
    if (zs_send(l.ctl, &m, &l.buf, 0, err, sizeof err) != 0) {
        fprintf(stderr, "custom_trainer: hello: %s\n", err);
        return 1;
    }

    phase(&l, PHASE_INIT, NULL);
    phase(&l, PHASE_TRAIN, NULL);
    const char *why = "finished";
    long step = 0;
    int64_t last_beat = 0;
    unsigned seed = 12345u + (unsigned)l.rank;
    while (step < steps) {
        int64_t t0 = proto_now_ns();
        sleep_ms(step_ms); /* "compute" */
        step++;
        seed = seed * 1103515245u + 12345u;
        double noise = ((seed >> 16) & 0x7fff) / 32768.0 - 0.5;
        msg_init(&m, MSG_STEP);
        m.u.step.epoch = 0;
        m.u.step.step = step;
        m.u.step.loss = 2.3 * exp(-step / 30.0) + 0.1 + 0.02 * noise + 0.01 * l.rank;
        m.u.step.lr = 0.01;
        m.u.step.samples = step * 32;
        m.u.step.step_ms = m.u.step.fwd_ms = (double)(proto_now_ns() - t0) / 1e6;
        m.u.step.drops = l.drops;
        tel(&l, &m);
        if (proto_now_ns() - last_beat > 1000000000LL) {
            msg_init(&m, MSG_BEAT);
            m.u.beat.step = step;
            m.u.beat.phase = PHASE_TRAIN;
            m.u.beat.coll_seq = -1;
            tel(&l, &m);
            last_beat = proto_now_ns();
        }
        poll_cmds(&l, op, sizeof op);
        if (!strcmp(op, "stop")) {
            why = "stop requested";
            break;
        }
        if (!strcmp(op, "ckpt")) {
            msg_init(&m, MSG_LOG);
            snprintf(m.u.log.level, sizeof m.u.log.level, "warn");
            snprintf(m.u.log.text, sizeof m.u.log.text, "this toy trainer keeps no checkpoints");
            tel(&l, &m);
        }
    }

    phase(&l, PHASE_STOPPING, why);
    phase(&l, PHASE_DESTROYING, NULL);
    phase(&l, PHASE_DESTROYED, NULL);
    msg_init(&m, MSG_BYE);
    m.u.bye.status = 0;
    m.u.bye.step = step;
    tel(&l, &m);
    /* Closing lingers up to 2 s so the last messages reach ddptop. */
    zmq_close(l.tel);
    zmq_close(l.ctl);
    zmq_ctx_term(l.ctx);
    codec_buf_done(&l.buf);
    return 0;
}
