/* tool_pub.c — a publisher for tests/scenario/attach/t_publish.sh, through publish.c.
 *
 *   tool_pub ENDPOINT FLAGFILE [--ranks N] [--steps S] [--lose L]
 *
 * Binds ENDPOINT with publisher_open and prints "endpoint=<bound endpoint>".
 * A SUB that connects late misses what was sent before (ZeroMQ's slow
 * joiner), so until FLAGFILE exists it re-sends every rank's hello every
 * 100 ms (15 s at most, then exit 1). Then per step s = 1..S and rank r a
 * step with loss (r+1)/(s+1) (none for step L: frames lost on the way, as a
 * subscriber too far behind loses them), then every rank's bye, and
 * "sent=N drops=M". Frames are encoded with codec_encode, as workers do.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zmq.h>

#include "wire/codec.h"
#include "wire/protocol.h"
#include "net/publish.h"

static void pub(Publisher *p, Msg *m)
{
    CodecBuf b;
    char err[256];
    codec_buf_init(&b);
    m->t_ns = proto_now_ns();
    if (codec_encode(m, &b, err, sizeof err)) {
        fprintf(stderr, "tool_pub: %s\n", err);
        exit(1);
    }
    publisher_send(p, b.data, b.len);
    codec_buf_done(&b);
}

static void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: tool_pub ENDPOINT FLAGFILE [--ranks N] [--steps S] [--lose L]\n");
        return 2;
    }
    int ranks = 2, steps = 5, lose = 0;
    for (int i = 3; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--ranks"))
            ranks = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps"))
            steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--lose"))
            lose = atoi(argv[i + 1]);
    }
    char err[512];
    void *ctx = zmq_ctx_new();
    Publisher *p = publisher_open(ctx, argv[1], 0, err, sizeof err);
    if (!p) {
        fprintf(stderr, "tool_pub: %s\n", err);
        zmq_ctx_term(ctx);
        return 2;
    }
    printf("endpoint=%s\n", publisher_endpoint(p));
    fflush(stdout);
    Msg m;
    int waited = 0;
    while (access(argv[2], F_OK) != 0) {
        if (waited > 15000) {
            fprintf(stderr, "tool_pub: nobody subscribed\n");
            return 1;
        }
        for (int r = 0; r < ranks; r++) {
            msg_init(&m, MSG_HELLO);
            m.rank = r;
            m.u.hello.world = ranks;
            snprintf(m.u.hello.host, sizeof m.u.hello.host, "node-a");
            snprintf(m.u.hello.device, sizeof m.u.hello.device, "cpu");
            snprintf(m.u.hello.backend, sizeof m.u.hello.backend, "gloo");
            pub(p, &m);
        }
        sleep_ms(100);
        waited += 100;
    }
    for (int s = 1; s <= steps; s++)
        for (int r = 0; r < ranks && s != lose; r++) {
            msg_init(&m, MSG_STEP);
            m.rank = r;
            m.u.step.epoch = 0;
            m.u.step.step = s;
            m.u.step.loss = (r + 1) / (s + 1.0);
            pub(p, &m);
        }
    for (int r = 0; r < ranks; r++) {
        msg_init(&m, MSG_BYE);
        m.rank = r;
        m.u.bye.step = steps;
        pub(p, &m);
    }
    printf("sent=%llu drops=%llu\n", (unsigned long long)publisher_sent(p), (unsigned long long)publisher_drops(p));
    publisher_close(&p); /* lingers a moment: the byes get out */
    zmq_ctx_term(ctx);
    return 0;
}
