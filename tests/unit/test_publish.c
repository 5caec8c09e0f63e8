/* test_publish.c — the pub socket: which endpoints may be bound, frames
 * re-published byte for byte, and a subscriber that never reads loses its
 * own frames, never another subscriber's, never a wait. Sockets on inproc:// and tcp://127.0.0.1:*.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <zmq.h>

#include "check.h"
#include "net/publish.h"

static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void test_endpoint_policy(void)
{
    TEST_BEGIN("endpoint_policy");
    char err[512];
    const char *ok[] = { "ipc:///tmp/ddptop.pub", "inproc://x",       "tcp://127.0.0.1:5555",
                         "tcp://127.1.2.3:*",     "tcp://[::1]:5555", "tcp://127.0.0.1:65535" };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        CHECK(publisher_check_endpoint(ok[i], err, sizeof err) == 0, "%s refused: %s", ok[i], err);
    const char *curve[] = { "tcp://0.0.0.0:5555", "tcp://*:5555",        "tcp://192.168.1.10:5555", "tcp://eth0:5555",
                            "tcp://[::]:5555",    "tcp://example.com:1", "tcp://128.0.0.1:5555" };
    for (size_t i = 0; i < sizeof curve / sizeof curve[0]; i++) {
        err[0] = 0;
        CHECK(publisher_check_endpoint(curve[i], err, sizeof err) < 0 && strstr(err, "CURVE") &&
                  strstr(err, curve[i]) && !strchr(err, '\n'),
              "%s: \"%s\"", curve[i], err);
    }
    CHECK(publisher_check_endpoint("pgm://eth0;239.192.1.1:5555", err, sizeof err) < 0 &&
              strstr(err, "unsupported transport"),
          "pgm: %s", err);
    CHECK(publisher_check_endpoint("tcp://127.0.0.1", err, sizeof err) < 0 && strstr(err, "HOST:PORT"), "no port: %s",
          err);
    CHECK(publisher_check_endpoint("", err, sizeof err) < 0, "empty endpoint");
    /* what ZeroMQ would bind otherwise than asked (port 99999 as 34463) or not at all (a name) */
    const char *bad_port[] = { "tcp://127.0.0.1:99999", "tcp://127.0.0.1:0", "tcp://127.0.0.1:-1", "tcp://127.0.0.1:5x" };
    for (size_t i = 0; i < sizeof bad_port / sizeof bad_port[0]; i++)
        CHECK(publisher_check_endpoint(bad_port[i], err, sizeof err) < 0 && strstr(err, "PORT must be 1..65535"),
              "%s: \"%s\"", bad_port[i], err);
    CHECK(publisher_check_endpoint("tcp://localhost:5555", err, sizeof err) < 0 &&
              strstr(err, "bind a numeric address: tcp://127.0.0.1:5555"),
          "localhost: %s", err);
    CHECK(publisher_check_endpoint_keys("tcp://0.0.0.0:99999", true, err, sizeof err) < 0 &&
              strstr(err, "PORT must be 1..65535"),
          "with keys, port 99999: %s", err);
    CHECK(publisher_check_endpoint_keys("tcp://0.0.0.0:5555", true, err, sizeof err) == 0, "with keys: %s", err);
    void *ctx = zmq_ctx_new();
    CHECK(publisher_open(ctx, "tcp://0.0.0.0:5555", 0, err, sizeof err) == NULL && strstr(err, "CURVE"),
          "open refuses too: %s", err);
    Publisher *p = publisher_open(ctx, "tcp://127.0.0.1:*", 0, err, sizeof err);
    CHECK(p != NULL, "%s", err);
    if (p) {
        const char *ep = publisher_endpoint(p);
        CHECK(!strncmp(ep, "tcp://127.0.0.1:", 16) && !strchr(ep, '*'), "bound endpoint %s", ep);
        publisher_close(&p);
        CHECK(p == NULL, "close sets NULL");
    }
    publisher_close(&p);
    zmq_ctx_term(ctx);
    TEST_END();
}

/* What goes in comes out, byte for byte, to a plain SUB subscribed to "". */
static void test_exact_frames(void)
{
    TEST_BEGIN("frames_republished_exactly");
    char err[512];
    void *ctx = zmq_ctx_new();
    Publisher *p = publisher_open(ctx, "inproc://exact", 0, err, sizeof err);
    CHECK(p != NULL, "%s", err);
    void *sub = zmq_socket(ctx, ZMQ_SUB);
    zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "", 0);
    zmq_connect(sub, "inproc://exact");
    const unsigned char frame[] = "\x82\xa1v\x01\xa1k\xa4step\x00\xff";
    /* Until the subscription has reached the publisher, frames go nowhere. */
    int got = -1;
    char buf[64];
    for (int i = 0; i < 200 && got < 0; i++) {
        publisher_send(p, frame, sizeof frame);
        zmq_pollitem_t it = { sub, 0, ZMQ_POLLIN, 0 };
        if (zmq_poll(&it, 1, 10) > 0) got = zmq_recv(sub, buf, sizeof buf, 0);
    }
    CHECK(got == (int)sizeof frame && !memcmp(buf, frame, sizeof frame), "received %d bytes", got);
    int more = 0;
    size_t ml = sizeof more;
    zmq_getsockopt(sub, ZMQ_RCVMORE, &more, &ml);
    CHECK(!more, "one frame per message (no topic frame)");
    zmq_close(sub);
    publisher_close(&p);
    zmq_ctx_term(ctx);
    TEST_END();
}

/* A subscriber that never reads: sends stay instant, and it loses only its
 * own frames; one that reads gets every frame, in order (with
 * ZMQ_XPUB_NODROP one stalled subscriber made every send fail for all). */
static void test_slow_subscriber(void)
{
    TEST_BEGIN("a_stalled_subscriber_starves_nobody_and_costs_no_time");
    char err[512];
    void *ctx = zmq_ctx_new();
    Publisher *p = publisher_open(ctx, "inproc://slow", 100, err, sizeof err);
    CHECK(p != NULL, "%s", err);
    void *stalled = zmq_socket(ctx, ZMQ_SUB), *reader = zmq_socket(ctx, ZMQ_SUB);
    int hwm = 100;
    zmq_setsockopt(stalled, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt(stalled, ZMQ_SUBSCRIBE, "", 0);
    zmq_setsockopt(reader, ZMQ_SUBSCRIBE, "", 0);
    zmq_connect(stalled, "inproc://slow");
    zmq_connect(reader, "inproc://slow");
    /* both subscriptions in place: each has read a sync frame */
    bool s_in = false, r_in = false;
    char b[64];
    for (int i = 0; i < 500 && !(s_in && r_in); i++) {
        publisher_send(p, "sync", 4);
        zmq_pollitem_t it[2] = { { stalled, 0, ZMQ_POLLIN, 0 }, { reader, 0, ZMQ_POLLIN, 0 } };
        zmq_poll(it, 2, 10);
        while (zmq_recv(stalled, b, sizeof b, ZMQ_DONTWAIT) >= 0) s_in = true;
        while (zmq_recv(reader, b, sizeof b, ZMQ_DONTWAIT) >= 0) r_in = true;
    }
    CHECK(s_in && r_in, "subscriptions never arrived");
    /* from here the stalled one reads nothing */
    enum { N = 20000 };
    static char frame[512];
    int64_t worst = 0;
    uint32_t next = 0;
    int got = 0, out_of_order = 0;
    for (uint32_t i = 0; i < N; i++) {
        memcpy(frame, "seq:", 4);
        memcpy(frame + 4, &i, sizeof i);
        int64_t t = mono_us();
        publisher_send(p, frame, sizeof frame);
        t = mono_us() - t;
        if (t > worst) worst = t;
        int n;
        while ((n = zmq_recv(reader, b, sizeof b, ZMQ_DONTWAIT)) >= 0) {
            uint32_t seq;
            if (n < 8 || memcmp(b, "seq:", 4)) continue;
            memcpy(&seq, b + 4, sizeof seq);
            out_of_order += seq != next;
            next = seq + 1;
            got++;
        }
    }
    for (int idle = 0; idle < 50 && got < N; idle++) {
        zmq_pollitem_t it = { reader, 0, ZMQ_POLLIN, 0 };
        if (zmq_poll(&it, 1, 10) <= 0) continue;
        while (zmq_recv(reader, b, sizeof b, ZMQ_DONTWAIT) >= 0) got++, idle = 0;
    }
    CHECK(got == N && out_of_order == 0, "the reading subscriber got %d of %d frames (%d gaps) beside a stalled one",
          got, N, out_of_order);
    int stalled_got = 0;
    while (zmq_recv(stalled, b, sizeof b, ZMQ_DONTWAIT) >= 0) stalled_got++;
    CHECK(stalled_got < N / 2, "the stalled subscriber holds %d frames: nothing was dropped for it", stalled_got);
    CHECK(worst < 50000, "slowest send took %lld us", (long long)worst);
    CHECK(publisher_sent(p) >= N, "sent %llu", (unsigned long long)publisher_sent(p));
    zmq_close(stalled);
    zmq_close(reader);
    publisher_close(&p);
    zmq_ctx_term(ctx);
    TEST_END();
}

/* With the job's keys any tcp endpoint may be bound, and only subscribers
 * holding the key file read it. */
static int sub_reads(void *ctx, const char *ep, const JobKeys *k, Publisher *p)
{
    void *sub = zmq_socket(ctx, ZMQ_SUB);
    int zero = 0;
    char err[256];
    zmq_setsockopt(sub, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "", 0);
    if (k) keys_client_socket(sub, k, err, sizeof err);
    zmq_connect(sub, ep);
    int got = 0;
    for (int i = 0; i < 30 && !got; i++) { /* slow joiner: keep publishing */
        publisher_send(p, "frame", 5);
        zmq_pollitem_t it = { sub, 0, ZMQ_POLLIN, 0 };
        if (zmq_poll(&it, 1, 50) > 0) {
            char b[16];
            got = zmq_recv(sub, b, sizeof b, 0) == 5;
        }
    }
    zmq_close(sub);
    return got;
}

static void test_curve(void)
{
    TEST_BEGIN("curve_with_keys");
    char err[512];
    JobKeys k;
    CHECK(keys_generate(&k, err, sizeof err) == 0, "%s", err);
    CHECK(publisher_check_endpoint_keys("tcp://0.0.0.0:5555", true, err, sizeof err) == 0, "keys allow any tcp");
    CHECK(publisher_check_endpoint_keys("tcp://0.0.0.0:5555", false, err, sizeof err) < 0, "no keys: refused");
    void *ctx = zmq_ctx_new();
    ZapHandler *zap = NULL;
    CHECK(zap_start(&zap, ctx, &k, err, sizeof err) == 0, "%s", err);
    Publisher *p = publisher_open_keys(ctx, "tcp://0.0.0.0:*", 0, &k, err, sizeof err);
    CHECK(p != NULL, "open with keys: %s", err);
    if (p) {
        char ep[128];
        int port = atoi(strrchr(publisher_endpoint(p), ':') + 1);
        snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
        CHECK(!sub_reads(ctx, ep, NULL, p), "a subscriber without keys read the job");
        CHECK(sub_reads(ctx, ep, &k, p), "a subscriber with the key file read nothing");
        publisher_close(&p);
    }
    zap_stop(&zap);
    zmq_ctx_term(ctx);
    TEST_END();
}

int main(void)
{
    test_endpoint_policy();
    test_curve();
    test_exact_frames();
    test_slow_subscriber();
    CHECK_EXIT();
}
