/* publish.c — the pub socket: re-publish received frames. See publish.h.
 *
 * A plain PUB: each subscriber has its own queue in ddptop (SNDHWM frames)
 * and when one is full ZeroMQ drops that subscriber's copy only. Not
 * ZMQ_XPUB_NODROP: with it one stalled subscriber turned every send into
 * EAGAIN and starved the others. The price is that ZeroMQ does not say
 * which copies it dropped, so publisher_drops counts only frames that no
 * subscriber got. Every send uses ZMQ_DONTWAIT: never a wait. Main thread
 * only (the socket's owner).
 *
 * The promise (publisher_keeps_up): a subscriber that is at most
 * SNDHWM/2 - PUBLISH_LOOK_EVERY frames behind whenever a frame is published
 * gets every frame, in order. Why that number, from libzmq 4.3's pipe.cpp:
 * the socket judges a subscriber's queue full when frames written minus the
 * reads it has heard of reach SNDHWM; the reading end reports its reads in
 * steps of half the queue (lwm = (SNDHWM+1)/2, an activate_write command),
 * and the socket hears of them only when it processes its commands.
 * zmq_send does that only once ~3M TSC ticks have passed since the last
 * time (socket_base.cpp, max_command_delay: about 1 ms), and a fast CPU
 * publishes thousands of frames within that: the socket then believed a
 * subscriber that kept up full and dropped its frames (issue 28: 9-15% of
 * them for a reader one frame behind, SNDHWM 100, on an AVX512 Xeon). So publisher_send makes the
 * socket process them (zmq_getsockopt ZMQ_EVENTS, one poll(2) when none
 * wait) before every PUBLISH_LOOK_EVERY-th send: then what it believes
 * exceeds the truth by less than lwm + PUBLISH_LOOK_EVERY frames, whatever
 * the CPU or the load. On inproc the queue is SNDHWM plus the subscriber's
 * RCVHWM, which only adds room; on ipc/tcp frames already in the kernel or
 * the subscriber's own queue count as behind but take no room here.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "net/publish.h"
#include "net/curve.h"
#include "net/zsock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zmq.h>

struct Publisher {
    void *sock;
    bool bound; /* endpoint is bound: an ipc file there is ours */
    char endpoint[256];
    uint64_t sent, drops;
    uint64_t tries; /* publisher_send calls: every PUBLISH_LOOK_EVERY-th looks first */
    int hwm;        /* SNDHWM */
};

/* ipc://PATH: PATH's directory must exist (zmq_bind would fail later, and
 * the run with it), and PATH be free. */
static int check_ipc_dir(const char *ep, char *err, size_t errlen)
{
    char dir[4096];
    const char *path = ep + 6, *slash = strrchr(path, '/');
    if (!*path) {
        snprintf(err, errlen, "--publish %s: missing path (ipc:///tmp/ddptop.pub)", ep);
        return -1;
    }
    /* binding would unlink what is there (zs_bind) */
    int taken = zs_ipc_taken(path);
    if (taken) {
        snprintf(err, errlen, "--publish %s: %s", ep,
                 taken == EADDRINUSE ? "in use by another process" : "a file that is not a socket is there");
        return -1;
    }
    if (!slash) return 0; /* relative to the working directory */
    snprintf(dir, sizeof dir, "%.*s", (int)(slash == path ? 1 : slash - path), path);
    struct stat st;
    if (stat(dir, &st)) {
        snprintf(err, errlen, "--publish %s: directory %s: %s", ep, dir, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "--publish %s: %s is not a directory", ep, dir);
        return -1;
    }
    return 0;
}

/* What zmq_bind would take otherwise than asked: a port beyond 65535 (99999
 * bound 34463, mod 65536), or not at all: a host name (it binds an address
 * or an interface, never a name to look up). 0, or -1 with err. */
static int check_tcp_bind(const char *ep, const char *host, const char *port, char *err, size_t errlen)
{
    char *end;
    errno = 0;
    long pv = strcmp(port, "*") && port[0] >= '0' && port[0] <= '9' ? strtol(port, &end, 10) : -1;
    if (strcmp(port, "*") && (pv < 1 || pv > 65535 || errno || *end)) {
        snprintf(err, errlen, "--publish %s: PORT must be 1..65535 or * (any free one)", ep);
        return -1;
    }
    if (!strcasecmp(host, "localhost")) {
        snprintf(err, errlen, "--publish %s: bind a numeric address: tcp://127.0.0.1:%s", ep, port);
        return -1;
    }
    return 0;
}

int publisher_check_endpoint_keys(const char *ep, bool have_keys, char *err, size_t errlen)
{
    /* with keys, any tcp://HOST:PORT (PORT may be *) a bind takes as asked */
    const char *colon = ep && !strncmp(ep, "tcp://", 6) ? strrchr(ep + 6, ':') : NULL;
    if (have_keys && colon && colon[1]) {
        char host[256];
        snprintf(host, sizeof host, "%.*s", (int)(colon - (ep + 6)), ep + 6);
        return check_tcp_bind(ep, host, colon + 1, err, errlen);
    }
    return publisher_check_endpoint(ep, err, errlen);
}

int publisher_check_endpoint(const char *ep, char *err, size_t errlen)
{
    if (!ep || !*ep) {
        snprintf(err, errlen, "--publish: missing endpoint (e.g. ipc:///tmp/ddptop.pub or tcp://127.0.0.1:5555)");
        return -1;
    }
    if (!strncmp(ep, "inproc://", 9)) return 0;
    if (!strncmp(ep, "ipc://", 6)) return check_ipc_dir(ep, err, errlen);
    if (strncmp(ep, "tcp://", 6)) {
        snprintf(err, errlen, "--publish %s: unsupported transport (use ipc://PATH or tcp://127.0.0.1:PORT)", ep);
        return -1;
    }
    /* tcp://HOST:PORT, HOST possibly [v6]; the port is after the last ':'. */
    char host[256];
    const char *h = ep + 6, *colon = strrchr(h, ':');
    size_t n = colon ? (size_t)(colon - h) : 0;
    if (!colon || n == 0 || n >= sizeof host || !colon[1]) {
        snprintf(err, errlen, "--publish %s: expected tcp://HOST:PORT", ep);
        return -1;
    }
    if (h[0] == '[' && n >= 2 && h[n - 1] == ']') {
        h++;
        n -= 2;
    }
    memcpy(host, h, n);
    host[n] = 0;
    if (check_tcp_bind(ep, host, colon + 1, err, errlen)) return -1;
    if (!keys_host_is_loopback(host)) {
        snprintf(err, errlen,
                 "--publish %s: publishing beyond this machine needs CURVE keys: add --keys FILE "
                 "(subscribers then need that key file), or use tcp://127.0.0.1:PORT or ipc://PATH",
                 ep);
        return -1;
    }
    return 0;
}

Publisher *publisher_open(void *ctx, const char *endpoint, int sndhwm, char *err, size_t errlen)
{
    return publisher_open_keys(ctx, endpoint, sndhwm, NULL, err, errlen);
}

Publisher *publisher_open_keys(void *ctx, const char *endpoint, int sndhwm, const JobKeys *keys, char *err,
                               size_t errlen)
{
    bool curve = keys && !strncmp(endpoint, "tcp://", 6);
    if (publisher_check_endpoint_keys(endpoint, curve, err, errlen)) return NULL;
    Publisher *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(err, errlen, "--publish: out of memory");
        return NULL;
    }
    int hwm = sndhwm > 0 ? sndhwm : PUBLISH_DEFAULT_HWM, linger = PUBLISH_LINGER_MS;
    p->sock = zmq_socket(ctx, ZMQ_PUB);
    if (!p->sock || zmq_setsockopt(p->sock, ZMQ_SNDHWM, &hwm, sizeof hwm) ||
        zmq_setsockopt(p->sock, ZMQ_LINGER, &linger, sizeof linger)) {
        snprintf(err, errlen, "--publish: zeromq: %s", zmq_strerror(errno));
        goto fail;
    }
    if (curve && keys_server_socket(p->sock, keys, err, errlen)) goto fail;
    if (zs_bind(p->sock, endpoint)) {
        snprintf(err, errlen, "--publish %s: cannot bind: %s", endpoint, zmq_strerror(errno));
        goto fail;
    }
    p->bound = true;
    p->hwm = hwm;
    size_t len = sizeof p->endpoint;
    if (zmq_getsockopt(p->sock, ZMQ_LAST_ENDPOINT, p->endpoint, &len))
        snprintf(p->endpoint, sizeof p->endpoint, "%s", endpoint);
    return p;
fail:
    publisher_close(&p);
    return NULL;
}

const char *publisher_endpoint(const Publisher *p) { return p->endpoint; }

int publisher_send(Publisher *p, const void *frame, size_t len)
{
    if (!p) return 1;
    /* what the subscribers have read, before a queue is judged full (top) */
    if (p->tries++ % PUBLISH_LOOK_EVERY == 0) {
        int events;
        size_t evlen = sizeof events;
        zmq_getsockopt(p->sock, ZMQ_EVENTS, &events, &evlen);
    }
    if (zmq_send(p->sock, frame, len, ZMQ_DONTWAIT) >= 0) {
        p->sent++;
        return 0;
    }
    /* PUB does not refuse for a full subscriber; EINTR or anything else:
     * the frame is lost for all, and the screen must not wait for it. */
    p->drops++;
    return 1;
}

long publisher_keeps_up(const Publisher *p)
{
    long b = p ? p->hwm / 2 - PUBLISH_LOOK_EVERY : 0;
    return b > 0 ? b : 0;
}

uint64_t publisher_sent(const Publisher *p) { return p ? p->sent : 0; }
uint64_t publisher_drops(const Publisher *p) { return p ? p->drops : 0; }

void publisher_close(Publisher **pp)
{
    Publisher *p = pp ? *pp : NULL;
    if (!p) return;
    if (p->sock) zmq_close(p->sock);
    /* an ipc socket file it bound is its own to remove (endpoint is set only
     * by a bind that succeeded) */
    if (p->bound && !strncmp(p->endpoint, "ipc://", 6)) unlink(p->endpoint + 6);
    free(p);
    *pp = NULL;
}
