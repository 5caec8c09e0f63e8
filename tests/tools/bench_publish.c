/* bench_publish.c — what a subscriber that keeps up gets from --publish
 * beside a stalled one: frames published, frames it got, gaps in their
 * sequence numbers. Not part of the test suite; `make bench-publish` runs
 * its table (docs/RECORDING.md, "The live stream").
 *
 *   bench_publish [-t inproc|ipc|tcp] [-m same|thread] [-H SNDHWM]
 *                 [-n FRAMES] [-r RATE] [-s BYTES] [-b LAG] [-p old|product]
 *
 * One PUB socket (-p product: publisher_open/publisher_send, what ddptop
 * runs; -p old: a plain PUB with SNDHWM and zmq_send(ZMQ_DONTWAIT), what
 * ddptop ran before it made the socket take in its subscribers' progress
 * every PUBLISH_LOOK_EVERY sends), a subscriber that never reads (RCVHWM 100) and one
 * that reads: in the publishing thread (-m same: after each send it reads
 * whatever has arrived; with -b LAG it reads only when more than LAG
 * frames are out that it has not read, and then waits for them, so it is
 * at most LAG frames behind whenever a frame goes out) or in a thread of its own (-m thread: a blocking zmq_recv
 * loop). Frames of BYTES carry a 32-bit sequence number; RATE frames/s
 * paced by the clock, 0 for as fast as the socket takes them.
 *
 * Prints one line: the case, ns a send (mean) and the slowest, the frames
 * the reader got, its gaps (jumps in the sequence), the frames it lost,
 * the most frames it was behind when one went out (published, not yet read
 * by it, as the publishing thread saw it) and what the stalled one holds.
 */
#include "base/clock.h"
#include "net/publish.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zmq.h>

#define SEE \
    "bench_publish [-t inproc|ipc|tcp] [-m same|thread] [-H SNDHWM] [-R RCVHWM] [-n FRAMES] [-r RATE] [-s BYTES] [-b LAG] [-p old|product]"

typedef struct {
    void *sub;
    uint32_t n;
    long got, gaps, lost;
    uint32_t next;
} Reader;

/* One frame read: count it, and a jump in the sequence as a gap. */
static void take(Reader *r, const char *b, int len)
{
    uint32_t seq;
    if (len < 8 || memcmp(b, "seq:", 4)) return;
    memcpy(&seq, b + 4, sizeof seq);
    if (seq != r->next) {
        r->gaps++;
        r->lost += seq > r->next ? (long)(seq - r->next) : 0;
    }
    __atomic_store_n(&r->next, seq + 1, __ATOMIC_RELEASE); /* the publisher reads it (-m thread) */
    r->got++;
}

static void *reader_thread(void *arg)
{
    Reader *r = arg;
    char b[64];
    int n, tmo = 2000;
    zmq_setsockopt(r->sub, ZMQ_RCVTIMEO, &tmo, sizeof tmo);
    while (r->next < r->n && (n = zmq_recv(r->sub, b, sizeof b, 0)) >= 0) take(r, b, n);
    return NULL;
}

int main(int argc, char **argv)
{
    const char *tr = "inproc", *mode = "same", *pmode = "product";
    int hwm = PUBLISH_DEFAULT_HWM, size = 512, rhwm = 1000, opt;
    long n = 20000, lagmax = 0;
    double rate = 0;
    while ((opt = getopt(argc, argv, "t:m:H:R:n:r:s:b:p:")) != -1) {
        switch (opt) {
        case 't': tr = optarg; break;
        case 'm': mode = optarg; break;
        case 'H': hwm = atoi(optarg); break;
        case 'R': rhwm = atoi(optarg); break;
        case 'n': n = atol(optarg); break;
        case 'r': rate = atof(optarg); break;
        case 's': size = atoi(optarg); break;
        case 'b': lagmax = atol(optarg); break;
        case 'p': pmode = optarg; break;
        default: fprintf(stderr, "usage: %s\n", SEE); return 2;
        }
    }
    bool same = !strcmp(mode, "same"), old = !strcmp(pmode, "old");
    if ((!same && strcmp(mode, "thread")) || (!old && strcmp(pmode, "product")) || hwm < 1 || n < 1 ||
        n > 0xfffffff0L || size < 8 || size > 1 << 20 || rate < 0 || lagmax < 0) {
        fprintf(stderr, "bench_publish: bad option (%s)\n", SEE);
        return 2;
    }
    char ep[256], err[512];
    if (!strcmp(tr, "inproc"))
        snprintf(ep, sizeof ep, "inproc://bench");
    else if (!strcmp(tr, "ipc"))
        snprintf(ep, sizeof ep, "ipc:///tmp/bench_publish.%d", (int)getpid());
    else if (!strcmp(tr, "tcp"))
        snprintf(ep, sizeof ep, "tcp://127.0.0.1:*");
    else {
        fprintf(stderr, "bench_publish: -t %s: inproc, ipc or tcp\n", tr);
        return 2;
    }
    void *ctx = zmq_ctx_new();
    Publisher *p = NULL;
    void *raw = NULL;
    if (old) {
        raw = zmq_socket(ctx, ZMQ_PUB);
        zmq_setsockopt(raw, ZMQ_SNDHWM, &hwm, sizeof hwm);
        if (zmq_bind(raw, ep)) {
            fprintf(stderr, "bench_publish: bind %s: %s\n", ep, zmq_strerror(errno));
            return 1;
        }
        size_t len = sizeof ep;
        zmq_getsockopt(raw, ZMQ_LAST_ENDPOINT, ep, &len);
    } else {
        if (!(p = publisher_open(ctx, ep, hwm, err, sizeof err))) {
            fprintf(stderr, "bench_publish: %s\n", err);
            return 1;
        }
        snprintf(ep, sizeof ep, "%s", publisher_endpoint(p));
    }
#define SEND(buf, len) (old ? zmq_send(raw, buf, len, ZMQ_DONTWAIT) < 0 : publisher_send(p, buf, len) != 0)
    void *stalled = zmq_socket(ctx, ZMQ_SUB);
    Reader r = { .sub = zmq_socket(ctx, ZMQ_SUB), .n = (uint32_t)n };
    int shwm = 100, zero = 0;
    zmq_setsockopt(stalled, ZMQ_RCVHWM, &shwm, sizeof shwm);
    zmq_setsockopt(r.sub, ZMQ_RCVHWM, &rhwm, sizeof rhwm);
    zmq_setsockopt(stalled, ZMQ_SUBSCRIBE, "", 0);
    zmq_setsockopt(r.sub, ZMQ_SUBSCRIBE, "", 0);
    zmq_setsockopt(stalled, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(r.sub, ZMQ_LINGER, &zero, sizeof zero);
    zmq_connect(stalled, ep);
    zmq_connect(r.sub, ep);
    /* both subscriptions in: each has read a sync frame */
    bool s_in = false, r_in = false;
    char b[64];
    for (int i = 0; i < 1000 && !(s_in && r_in); i++) {
        SEND("sync", 4);
        zmq_pollitem_t it[2] = { { stalled, 0, ZMQ_POLLIN, 0 }, { r.sub, 0, ZMQ_POLLIN, 0 } };
        zmq_poll(it, 2, 10);
        while (zmq_recv(stalled, b, sizeof b, ZMQ_DONTWAIT) >= 0) s_in = true;
        while (zmq_recv(r.sub, b, sizeof b, ZMQ_DONTWAIT) >= 0) r_in = true;
    }
    if (!(s_in && r_in)) {
        fprintf(stderr, "bench_publish: subscriptions never arrived\n");
        return 1;
    }
    pthread_t th;
    if (!same) pthread_create(&th, NULL, reader_thread, &r);
    char *frame = calloc(1, (size_t)size);
    memcpy(frame, "seq:", 4);
    int64_t worst = 0, t0 = mono_ns();
    long behind = 0;
    for (uint32_t i = 0; i < (uint32_t)n; i++) {
        if (rate > 0)
            while (mono_ns() - t0 < (int64_t)(i / rate * 1e9)) {}
        /* -b LAG: the reader keeps up: it is at most LAG frames behind
         * when a frame goes out (it waits for what is on its way; 200 ms
         * without one: a frame it waits for was lost, go on) */
        for (int64_t idle = mono_ns();
             same && lagmax > 0 && (long)i - (long)r.next > lagmax && mono_ns() - idle < 200000000;) {
            zmq_pollitem_t it = { r.sub, 0, ZMQ_POLLIN, 0 };
            if (zmq_poll(&it, 1, 10) <= 0) continue;
            int k;
            while ((k = zmq_recv(r.sub, b, sizeof b, ZMQ_DONTWAIT)) >= 0) take(&r, b, k), idle = mono_ns();
        }
        long lag = (long)i - (long)__atomic_load_n(&r.next, __ATOMIC_ACQUIRE); /* out, not read by it */
        if (lag > behind) behind = lag;
        memcpy(frame + 4, &i, sizeof i);
        int64_t t = mono_ns();
        SEND(frame, (size_t)size);
        t = mono_ns() - t;
        if (t > worst) worst = t;
        if (!same) continue;
        if (!lagmax) {
            int k;
            while ((k = zmq_recv(r.sub, b, sizeof b, ZMQ_DONTWAIT)) >= 0) take(&r, b, k);
        }
    }
    int64_t total = mono_ns() - t0;
    if (same) /* what is still on its way */
        for (int idle = 0; idle < 100 && r.next < r.n; idle++) {
            zmq_pollitem_t it = { r.sub, 0, ZMQ_POLLIN, 0 };
            if (zmq_poll(&it, 1, 10) <= 0) continue;
            int k;
            while ((k = zmq_recv(r.sub, b, sizeof b, ZMQ_DONTWAIT)) >= 0) take(&r, b, k), idle = 0;
        }
    else
        pthread_join(th, NULL);
    if (r.next < r.n) r.gaps++, r.lost += (long)(r.n - r.next); /* a lost tail */
    long held = 0;
    usleep(100000);
    while (zmq_recv(stalled, b, sizeof b, ZMQ_DONTWAIT) >= 0) held++;
    printf(
        "%-6s %-6s %-7s hwm=%-6d rcvhwm=%-5d rate=%-8.0f bytes=%-5d lagmax=%-5ld | %6.0f ns/send, slowest %6.0f us | "
        "got %ld of %ld, %ld gaps, %ld lost, behind<=%ld, stalled holds %ld\n",
        tr, mode, pmode, hwm, rhwm, rate, size, lagmax, (double)total / (double)n, (double)worst / 1e3, r.got, n,
        r.gaps, r.lost, behind, held);
    free(frame);
    zmq_close(stalled);
    zmq_close(r.sub);
    if (raw) zmq_close(raw);
    publisher_close(&p);
    zmq_ctx_term(ctx);
    return 0;
}
