/* test_tstream.c — the telemetry stream (net/tstream.h): frames in order
 * and whole, with the sender's pid; a client that never blocks and never
 * cuts a frame; a server that survives whatever a connection sends (a wrong
 * greeting, impossible lengths, a peer dying mid-frame, too many peers).
 * Every wait has a deadline, so a broken build fails instead of hanging.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "net/tstream.h"
#include "net/zsock.h"
#include "wire/protocol.h"

typedef struct {
    int n;
    size_t bytes;
    int64_t pid;
    bool in_order;
    uint32_t next; /* the first 4 bytes of each frame count up from 0 */
    size_t last_len;
    uint64_t conn; /* the last frame's connection */
} Got;

static void on_frame(void *ctx, const uint8_t *f, size_t len, int64_t pid, uint64_t conn)
{
    Got *g = ctx;
    g->conn = conn;
    uint32_t k = 0;
    if (len >= 4) memcpy(&k, f, 4);
    if (len >= 4 && k != g->next) g->in_order = false;
    /* every byte past the counter is the counter's low byte: a frame cut or
     * spliced shows */
    for (size_t i = 4; i < len; i++)
        if (f[i] != (uint8_t)k) {
            g->in_order = false;
            break;
        }
    g->next = k + 1;
    g->n++;
    g->bytes += len;
    g->pid = pid;
    g->last_len = len;
}

static uint8_t *frame_of(uint32_t k, size_t len)
{
    uint8_t *f = malloc(len);
    memset(f, (uint8_t)k, len);
    memcpy(f, &k, len < 4 ? len : 4);
    return f;
}

static void drain_until(TStreamServer *s, Got *g, int want, double secs)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (g->n < want) {
        tss_drain(s, 4096, on_frame, g, NULL);
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 > secs) break;
        struct timespec ms = { 0, 1000000 };
        nanosleep(&ms, NULL);
    }
}

static int raw_connect(const char *path)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa)) {
        close(fd);
        return -1;
    }
    return fd;
}

static void put_len(uint8_t *p, uint32_t n)
{
    p[0] = (uint8_t)n, p[1] = (uint8_t)(n >> 8), p[2] = (uint8_t)(n >> 16), p[3] = (uint8_t)(n >> 24);
}

static void test_paths(void)
{
    TEST_BEGIN("path_of_a_tel_endpoint");
    char out[200];
    CHECK(tstream_path("ipc:///tmp/d/tel", out, sizeof out) == 0 && !strcmp(out, "/tmp/d/tel.stream"), "%s", out);
    CHECK(tstream_path("tcp://127.0.0.1:5556", out, sizeof out) < 0, "tcp has no stream");
    char longp[200] = "ipc:///";
    memset(longp + 7, 'a', 100);
    longp[107] = 0;
    CHECK(tstream_path(longp, out, sizeof out) < 0, "a path too long for sun_path");
    TEST_END();
}

static void test_round_trip(const char *dir)
{
    TEST_BEGIN("frames_whole_in_order_with_pid_big_and_small");
    char path[300], err[256];
    snprintf(path, sizeof path, "%s/rt.stream", dir);
    TStreamServer *s = NULL;
    CHECK(tss_open(&s, path, 8, err, sizeof err) == 0, "open: %s", err);
    TStream *c = NULL;
    CHECK(s && tsc_open(&c, path) == 0, "connect: %s", strerror(errno));
    Got g = { .in_order = true };
    size_t sizes[] = { 4, 5, 2000, 70000, 3u << 20, 100, 8 };
    int sent = 0;
    size_t total = 0;
    for (int k = 0; c && k < 300; k++) {
        size_t len = sizes[k % 7];
        uint8_t *f = frame_of((uint32_t)k, len);
        CHECK(tsc_send(c, f, len) == 0, "frame %d of %zu bytes not taken", k, len);
        sent++;
        total += len;
        free(f);
        /* the server reads meanwhile, as ddptop does each turn */
        for (int i = 0; i < 10000 && tsc_flush(c); i++) tss_drain(s, 4096, on_frame, &g, NULL);
    }
    for (int i = 0; c && i < 2000 && tsc_flush(c); i++) tss_drain(s, 4096, on_frame, &g, NULL);
    if (s) drain_until(s, &g, sent, 10);
    CHECK(g.n == sent && g.bytes == total, "got %d frames %zu bytes of %d / %zu", g.n, g.bytes, sent, total);
    CHECK(g.in_order, "a frame out of order or cut");
    CHECK(g.pid == getpid(), "pid %lld, want %d", (long long)g.pid, (int)getpid());
    /* an oversized frame is the client's to refuse, not to send */
    uint8_t one = 0;
    CHECK(c && tsc_send(c, &one, PROTO_MAX_FRAME_BYTES + 1u) == 1, "a frame over the limit taken");
    CHECK(c && tsc_send(c, &one, 0) == 1, "an empty frame taken");
    tsc_close(&c, 1000);
    TssStats st;
    if (s) {
        for (int i = 0; i < 200; i++) {
            tss_drain(s, 4096, on_frame, &g, NULL);
            tss_stats(s, &st);
            if (st.conns == 0) break;
            struct timespec ms = { 0, 1000000 };
            nanosleep(&ms, NULL);
        }
        tss_stats(s, &st);
        CHECK(st.conns == 0 && st.accepted == 1 && st.bad == 0 && st.cut == 0, "conns %d accepted %llu bad %llu cut %llu",
              st.conns, (unsigned long long)st.accepted, (unsigned long long)st.bad, (unsigned long long)st.cut);
    }
    tss_close(&s);
    struct stat sb;
    CHECK(stat(path, &sb) != 0, "%s left behind", path);
    TEST_END();
}

static void test_hostile(const char *dir)
{
    TEST_BEGIN("bad_greeting_bad_lengths_cut_frames_too_many_peers");
    char path[300], err[256];
    snprintf(path, sizeof path, "%s/h.stream", dir);
    TStreamServer *s = NULL;
    CHECK(tss_open(&s, path, 3, err, sizeof err) == 0, "open: %s", err);
    if (!s) {
        TEST_END();
        return;
    }
    Got g = { .in_order = true };
    /* a good peer, alive throughout */
    TStream *good = NULL;
    CHECK(tsc_open(&good, path) == 0, "connect");
    uint8_t *f0 = frame_of(0, 64);
    tsc_send(good, f0, 64);
    /* a wrong greeting */
    int bad1 = raw_connect(path);
    CHECK(write(bad1, "GET / HTTP/1.1\r\n", 16) == 16, "write");
    /* the right greeting, then a length of 0 */
    int bad2 = raw_connect(path);
    uint8_t b2[12];
    memcpy(b2, TSTREAM_MAGIC, 8);
    put_len(b2 + 8, 0);
    CHECK(write(bad2, b2, 12) == 12, "write");
    drain_until(s, &g, 1, 2);
    TssStats st;
    for (int i = 0; i < 100; i++) {
        tss_drain(s, 4096, on_frame, &g, NULL);
        tss_stats(s, &st);
        if (st.bad == 2) break;
        struct timespec ms = { 0, 1000000 };
        nanosleep(&ms, NULL);
    }
    tss_stats(s, &st);
    CHECK(st.bad == 2, "bad %llu (want 2: the greeting, the empty frame)", (unsigned long long)st.bad);
    CHECK(strstr(st.last_bad, "a frame of 0 bytes") != NULL, "last_bad: %s", st.last_bad);
    char c;
    CHECK(read(bad1, &c, 1) == 0 && read(bad2, &c, 1) == 0, "the bad peers were not closed");
    close(bad1);
    close(bad2);
    /* a length past the limit */
    int bad3 = raw_connect(path);
    uint8_t b3[12];
    memcpy(b3, TSTREAM_MAGIC, 8);
    put_len(b3 + 8, PROTO_MAX_FRAME_BYTES + 1u);
    CHECK(write(bad3, b3, 12) == 12, "write");
    for (int i = 0; i < 100; i++) {
        tss_drain(s, 4096, on_frame, &g, NULL);
        tss_stats(s, &st);
        if (st.bad == 3) break;
        struct timespec ms = { 0, 1000000 };
        nanosleep(&ms, NULL);
    }
    CHECK(st.bad == 3 && strstr(st.last_bad, "allowed"), "bad %llu: %s", (unsigned long long)st.bad, st.last_bad);
    close(bad3);
    /* a peer that dies mid-frame: its whole frames arrive, the cut one not */
    int cut = raw_connect(path);
    uint8_t *f1 = frame_of(1, 100), *f2 = frame_of(2, 100);
    uint8_t hb[4];
    CHECK(write(cut, TSTREAM_MAGIC, 8) == 8, "write");
    put_len(hb, 100);
    CHECK(write(cut, hb, 4) == 4 && write(cut, f1, 100) == 100, "write");
    CHECK(write(cut, hb, 4) == 4 && write(cut, f2, 40) == 40, "write");
    for (int i = 0; i < 200 && g.n < 2; i++) {
        tss_drain(s, 4096, on_frame, &g, NULL);
        struct timespec ms = { 0, 1000000 };
        nanosleep(&ms, NULL);
    }
    close(cut);
    for (int i = 0; i < 200; i++) {
        tss_drain(s, 4096, on_frame, &g, NULL);
        tss_stats(s, &st);
        if (st.cut == 1) break;
        struct timespec ms = { 0, 1000000 };
        nanosleep(&ms, NULL);
    }
    CHECK(g.n == 2 && g.in_order && g.last_len == 100, "frames %d in order %d last %zu", g.n, g.in_order, g.last_len);
    CHECK(st.cut == 1, "cut %llu", (unsigned long long)st.cut);
    /* three at once at most: the good one and two more; a fourth is closed */
    int p1 = raw_connect(path), p2 = raw_connect(path), p3 = raw_connect(path);
    for (int i = 0; i < 50; i++) {
        tss_drain(s, 4096, on_frame, &g, NULL);
        tss_stats(s, &st);
        if (st.refused >= 1) break;
        struct timespec ms = { 0, 1000000 };
        nanosleep(&ms, NULL);
    }
    CHECK(st.conns == 3 && st.refused == 1, "conns %d refused %llu", st.conns, (unsigned long long)st.refused);
    close(p1), close(p2), close(p3);
    /* the good peer is still served */
    uint8_t *f3 = frame_of(2, 5000); /* the next whole frame after the good 0 and the cut peer's 1 */
    CHECK(tsc_send(good, f3, 5000) == 0, "send");
    drain_until(s, &g, 3, 2);
    CHECK(g.n == 3 && g.in_order && g.last_len == 5000, "frames %d in order %d", g.n, g.in_order);
    free(f0), free(f1), free(f2), free(f3);
    tsc_close(&good, 0);
    tss_close(&s);
    TEST_END();
}

/* Per connection: frames counted up from 0, each byte past the counter its
 * low byte (as frame_of), the connection told apart by its id. */
typedef struct {
    uint64_t id[4];
    uint32_t next[4];
    int n;
    bool ok;
} Many;

static void on_many(void *ctx, const uint8_t *f, size_t len, int64_t pid, uint64_t conn)
{
    (void)pid;
    Many *m = ctx;
    int k = 0;
    while (k < 4 && m->id[k] && m->id[k] != conn) k++;
    if (k == 4) {
        m->ok = false;
        return;
    }
    m->id[k] = conn;
    uint32_t want = m->next[k]++, got = 0;
    if (len >= 4) memcpy(&got, f, 4);
    if (len < 4 || got != want) m->ok = false;
    for (size_t i = 4; i < len; i++)
        if (f[i] != (uint8_t)got) {
            m->ok = false;
            break;
        }
    m->n++;
}

static void test_interleaved(const char *dir)
{
    TEST_BEGIN("partial_frames_of_many_connections_never_mix");
    char path[300], err[256];
    snprintf(path, sizeof path, "%s/mix.stream", dir);
    TStreamServer *s = NULL;
    CHECK(tss_open(&s, path, 8, err, sizeof err) == 0, "open: %s", err);
    if (!s) {
        TEST_END();
        return;
    }
    /* three raw peers write their greetings and frames in odd-sized pieces,
     * one piece each in turn, the server reading between pieces: every
     * read ends inside some frame (or inside the greeting or a length) */
    enum { PEERS = 3, FRAMES = 40 };
    size_t sizes[] = { 7, 3000, 100, 90000, 4, 65536 - 4, 65536, 513 };
    int fd[PEERS];
    uint8_t *stream[PEERS];
    size_t slen[PEERS], off[PEERS];
    for (int p = 0; p < PEERS; p++) {
        fd[p] = raw_connect(path);
        size_t total = 8;
        for (int k = 0; k < FRAMES; k++) total += 4 + sizes[(k + p) % 8];
        stream[p] = malloc(total);
        memcpy(stream[p], TSTREAM_MAGIC, 8);
        size_t o = 8;
        for (int k = 0; k < FRAMES; k++) {
            size_t len = sizes[(k + p) % 8];
            uint8_t *f = frame_of((uint32_t)k, len);
            put_len(stream[p] + o, (uint32_t)len);
            memcpy(stream[p] + o + 4, f, len);
            free(f);
            o += 4 + len;
        }
        slen[p] = total;
        off[p] = 0;
    }
    Many m = { .ok = true };
    size_t piece[] = { 3, 5, 1, 4099, 17, 70001, 2, 600 };
    for (int turn = 0, busy = 1; busy; turn++) {
        busy = 0;
        for (int p = 0; p < PEERS; p++) {
            if (off[p] == slen[p]) continue;
            busy = 1;
            size_t want = piece[(turn + 3 * p) % 8];
            if (want > slen[p] - off[p]) want = slen[p] - off[p];
            ssize_t w = write(fd[p], stream[p] + off[p], want);
            if (w > 0) off[p] += (size_t)w;
            for (int i = 0; i < 4; i++) tss_drain(s, 4096, on_many, &m, NULL);
        }
    }
    for (int i = 0; i < 2000 && m.n < PEERS * FRAMES; i++) {
        tss_drain(s, 4096, on_many, &m, NULL);
        struct timespec ms = { 0, 1000000 };
        nanosleep(&ms, NULL);
    }
    TssStats st;
    tss_stats(s, &st);
    CHECK(m.n == PEERS * FRAMES && m.ok, "frames %d of %d, in order and whole: %d", m.n, PEERS * FRAMES, m.ok);
    CHECK(st.bad == 0 && st.conns == PEERS, "bad %llu conns %d", (unsigned long long)st.bad, st.conns);
    for (int p = 0; p < PEERS; p++) {
        close(fd[p]);
        free(stream[p]);
    }
    tss_close(&s);
    TEST_END();
}

/* A read that fills the server's buffer leaves data that no new edge will
 * announce (the peer sends nothing more): the drain must come back for it
 * by itself, saying so through *more and tss_more. */
static void test_full_read_again(const char *dir)
{
    TEST_BEGIN("a_full_read_is_read_again_without_new_data");
    char path[300], err[256];
    snprintf(path, sizeof path, "%s/full.stream", dir);
    TStreamServer *s = NULL;
    CHECK(tss_open(&s, path, 4, err, sizeof err) == 0, "open: %s", err);
    if (!s) {
        TEST_END();
        return;
    }
    int fd = raw_connect(path);
    enum { FRAMES = 150, LEN = 1000 };
    static uint8_t all[8 + FRAMES * (4 + LEN)];
    memcpy(all, TSTREAM_MAGIC, 8);
    for (int k = 0; k < FRAMES; k++) {
        uint8_t *f = frame_of((uint32_t)k, LEN);
        put_len(all + 8 + k * (4 + LEN), LEN);
        memcpy(all + 8 + k * (4 + LEN) + 4, f, LEN);
        free(f);
    }
    /* as much as the socket takes without waiting: more than one read's */
    size_t off = 0;
    fcntl(fd, F_SETFL, O_NONBLOCK);
    while (off < sizeof all) {
        ssize_t w = write(fd, all + off, sizeof all - off);
        if (w <= 0) break;
        off += (size_t)w;
    }
    int want = (int)((off - 8) / (4 + LEN));
    CHECK(off > 8 + 70 * (4 + LEN), "the socket took %zu bytes, not more than a read's 64 KB", off);
    /* everything is in the socket; from here on nothing new arrives */
    Got g = { .in_order = true };
    bool more = true;
    int calls = 0;
    struct pollfd p = { tss_fd(s), POLLIN, 0 };
    for (; calls < 1000 && g.n < want; calls++) {
        if (!more && poll(&p, 1, 100) == 0) break; /* what the loop does: wait for the fd */
        tss_drain(s, 20, on_frame, &g, &more);
    }
    CHECK(g.n == want && g.in_order, "frames %d of %d (in order %d) after %d drains", g.n, want, g.in_order, calls);
    CHECK(!more && !tss_more(s), "more %d after everything was read", more);
    CHECK(poll(&p, 1, 0) == 0, "the descriptor polls readable with nothing left");
    close(fd);
    tss_close(&s);
    TEST_END();
}

static void test_backpressure(const char *dir)
{
    TEST_BEGIN("client_queues_then_drops_whole_frames_never_blocks");
    char path[300], err[256];
    snprintf(path, sizeof path, "%s/bp.stream", dir);
    TStreamServer *s = NULL;
    CHECK(tss_open(&s, path, 8, err, sizeof err) == 0, "open: %s", err);
    TStream *c = NULL;
    CHECK(s && tsc_open(&c, path) == 0, "connect");
    if (!c) {
        tss_close(&s);
        TEST_END();
        return;
    }
    /* nobody reads: the kernel's buffers fill, then the client's queue, then
     * frames are dropped whole; no call blocks */
    size_t len = 256 << 10;
    int taken = 0, dropped = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (uint32_t k = 0; k < 200; k++) {
        uint8_t *f = frame_of((uint32_t)taken, len);
        if (tsc_send(c, f, len) == 0)
            taken++;
        else
            dropped++;
        free(f);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    CHECK(dropped > 0 && taken > 0, "taken %d dropped %d", taken, dropped);
    CHECK((size_t)taken * (len + 4) <= TSTREAM_PENDING_MAX + (4u << 20), "taken %d frames: more than the queue holds",
          taken);
    CHECK(secs < 2.0, "sending took %.2f s (it must not wait)", secs);
    /* then the server catches up: every frame taken arrives whole, in order */
    Got g = { .in_order = true };
    for (int i = 0; i < 5000 && g.n < taken; i++) {
        tss_drain(s, 4096, on_frame, &g, NULL);
        tsc_flush(c);
    }
    CHECK(g.n == taken && g.in_order, "got %d of %d, in order %d", g.n, taken, g.in_order);
    /* the frontend goes away: sends drop at once, no SIGPIPE */
    tss_close(&s);
    int rc = 0;
    uint8_t *f = frame_of(0, 100);
    for (int i = 0; i < 100 && rc == 0; i++) rc = tsc_send(c, f, 100);
    free(f);
    CHECK(rc == 1 && tsc_broken(c), "sends to a closed stream still taken");
    tsc_close(&c, 100);
    TEST_END();
}

typedef struct {
    int n;
    char last[64];
} Down;

static void on_down(void *ctx, const uint8_t *f, size_t len)
{
    Down *d = ctx;
    d->n++;
    snprintf(d->last, sizeof d->last, "%.*s", (int)len, (const char *)f);
}

static void test_down(const char *dir)
{
    TEST_BEGIN("frames_down_a_connection_never_wait");
    char path[300], err[256];
    snprintf(path, sizeof path, "%s/down.stream", dir);
    TStreamServer *s = NULL;
    CHECK(tss_open(&s, path, 8, err, sizeof err) == 0, "open: %s", err);
    TStream *c = NULL, *mute = NULL;
    CHECK(s && tsc_open(&c, path) == 0 && tsc_open(&mute, path) == 0, "connect");
    if (!c || !mute) {
        tss_close(&s);
        TEST_END();
        return;
    }
    Got g = { .in_order = true };
    uint8_t *f = frame_of(0, 10);
    tsc_send(c, f, 10);
    drain_until(s, &g, 1, 2);
    uint64_t conn_c = g.conn;
    g.next = 0;
    tsc_send(mute, f, 10);
    drain_until(s, &g, 2, 2);
    uint64_t conn_mute = g.conn;
    CHECK(conn_c && conn_mute && conn_c != conn_mute, "connection ids %llx %llx", (unsigned long long)conn_c,
          (unsigned long long)conn_mute);
    /* pings down one connection arrive whole, in order, on that one only */
    for (int i = 0; i < 5; i++) {
        char ping[32];
        int n = snprintf(ping, sizeof ping, "ping %d", i);
        CHECK(tss_send(s, conn_c, ping, (size_t)n) == 0, "ping %d not sent", i);
    }
    Down d = { 0 };
    for (int i = 0; i < 200 && d.n < 5; i++) {
        CHECK(tsc_read(c, on_down, &d) >= 0, "read broke");
        struct timespec ms = { 0, 1000000 };
        nanosleep(&ms, NULL);
    }
    CHECK(d.n == 5 && !strcmp(d.last, "ping 4"), "got %d, last \"%s\"", d.n, d.last);
    /* a rank that never reads: its buffer fills and tss_send drops, at once */
    int rc = 0, sent = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint8_t big[TSTREAM_DOWN_MAX];
    memset(big, 'x', sizeof big);
    for (int i = 0; i < 100000 && rc == 0; i++)
        if ((rc = tss_send(s, conn_mute, big, sizeof big)) == 0) sent++;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    CHECK(rc == 1 && sent > 10, "rc %d after %d frames", rc, sent);
    CHECK((t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9 < 2.0, "tss_send waited");
    /* a frame too large, an unknown or closed connection */
    CHECK(tss_send(s, conn_c, big, TSTREAM_DOWN_MAX + 1) == -1, "a frame over TSTREAM_DOWN_MAX sent");
    CHECK(tss_send(s, 0, "p", 1) == -1 && tss_send(s, conn_c + 1, "p", 1) == -1, "an unknown connection");
    tsc_close(&c, 0);
    for (int i = 0; i < 200; i++) {
        tss_drain(s, 4096, on_frame, &g, NULL);
        if (tss_send(s, conn_c, "p", 1) == -1) break;
        struct timespec ms = { 0, 1000000 };
        nanosleep(&ms, NULL);
    }
    CHECK(tss_send(s, conn_c, "p", 1) == -1, "a closed connection still taken");
    /* a later connection in the same slot is not the closed one */
    TStream *c2 = NULL;
    CHECK(tsc_open(&c2, path) == 0, "reconnect");
    g.next = 0;
    if (c2) tsc_send(c2, f, 10);
    drain_until(s, &g, g.n + 1, 2);
    CHECK(g.conn != conn_c && tss_send(s, conn_c, "p", 1) == -1, "the old id reaches the new connection");
    /* the frontend goes away: the rank reads what was sent, then the end */
    tss_close(&s);
    CHECK(tsc_read(mute, on_down, &d) == -1, "a closed frontend not noticed");
    free(f);
    tsc_close(&c2, 0);
    tsc_close(&mute, 0);
    TEST_END();
}

static void test_taken_paths(const char *dir)
{
    TEST_BEGIN("a_path_in_use_or_not_a_socket_is_left_alone");
    char path[300], err[256];
    snprintf(path, sizeof path, "%s/file.stream", dir);
    FILE *fp = fopen(path, "w");
    if (fp) fputs("keep me", fp), fclose(fp);
    TStreamServer *s = NULL;
    CHECK(tss_open(&s, path, 8, err, sizeof err) < 0 && strstr(err, "File exists"), "a file taken over: %s", err);
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size == 7, "the file was touched");
    snprintf(path, sizeof path, "%s/live.stream", dir);
    TStreamServer *a = NULL, *b = NULL;
    CHECK(tss_open(&a, path, 8, err, sizeof err) == 0, "open: %s", err);
    CHECK(tss_open(&b, path, 8, err, sizeof err) < 0 && strstr(err, "in use"), "a live stream taken over: %s", err);
    TStream *c = NULL;
    CHECK(tsc_open(&c, path) == 0, "the first server no longer reachable");
    tsc_close(&c, 0);
    tss_close(&a);
    /* no server: the client says so at once */
    CHECK(tsc_open(&c, path) < 0 && (errno == ENOENT || errno == ECONNREFUSED), "errno %d", errno);
    TEST_END();
}

int main(void)
{
    signal(SIGPIPE, SIG_DFL); /* a send that raised it would kill the test */
    char dir[256], err[256];
    if (zs_private_dir(dir, sizeof dir, err, sizeof err)) {
        printf("FAIL: %s:setup: %s\n", __FILE__, err);
        return 1;
    }
    test_paths();
    test_round_trip(dir);
    test_hostile(dir);
    test_interleaved(dir);
    test_full_read_again(dir);
    test_backpressure(dir);
    test_down(dir);
    test_taken_paths(dir);
    zs_private_dir_remove(dir);
    CHECK_EXIT();
}
