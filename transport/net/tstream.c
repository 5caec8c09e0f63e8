/* tstream.c — the telemetry stream. See tstream.h.
 *
 * Server: a listening unix socket and its connections in one epoll set
 * (level-triggered). Connections are read into one buffer of the server's
 * and their frames decoded from it in place; a connection keeps only the
 * partial frame at the end of its last read (most often none), so 1024
 * connections cost 1024 small structures, not 1024 read buffers that a
 * catch-up (every connection's 64 KB read full) would leave resident.
 * A frame larger than the shared buffer is gathered in its connection's
 * own buffer, freed once the frame is whole. Client: a non-blocking socket
 * and a queue of the bytes it did not take yet.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* accept4, struct ucred */
#endif
#include "net/tstream.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/err.h"
#include "wire/protocol.h"

/* The server's read buffer: room for a read of many bursts. */
#define READ_BUF   (64u << 10)
/* A connection's own buffer (a partial frame) is kept across reads up to
 * this size, freed when larger and empty. */
#define KEEP_BUF   (4u << 10)
#define EVENTS_MAX 256
/* epoll passes per drain: a connection whose read filled its buffer is
 * read again in the next pass, up to this many. */
#define PASSES_MAX 8

int tstream_path(const char *tel_ep, char *out, size_t outlen)
{
    if (strncmp(tel_ep, "ipc://", 6)) return -1;
    const char *p = tel_ep + 6;
    struct sockaddr_un sa;
    size_t n = strlen(p);
    if (!n || n + sizeof ".stream" > sizeof sa.sun_path) return -1;
    return snprintf(out, outlen, "%s.stream", p) < (int)outlen ? 0 : -1;
}

static uint32_t le32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

/* ---- server ---- */

typedef struct {
    int fd;
    int64_t pid;
    uint64_t id; /* generation << 32 | slot + 1 */
    uint8_t *buf; /* the partial frame its last read ended in */
    size_t len, cap;
    bool magic_ok;
    bool pending; /* in the server's pend list */
    int slot;
    uint8_t down[4 + TSTREAM_DOWN_MAX]; /* the tail of a frame tss_send could not write whole */
    size_t down_off, down_len;
} Conn;

struct TStreamServer {
    int lfd, ep;
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    Conn **conns; /* [max_conns], NULL: free */
    int max_conns;
    uint32_t gen; /* connections accepted: the high half of a connection's id */
    uint8_t *rbuf; /* [READ_BUF]: every connection is read into it */
    /* connections whose last read filled the room it had: more may wait,
     * and epoll (edge-triggered) will not say so again (ids: a closed
     * connection's entry no longer matches) */
    uint64_t *pend;
    int n_pend, cap_pend;
    TssStats st;
};

/* The listening socket's tag in the epoll set (a connection's is its Conn). */
static int listen_tag;

int tss_open(TStreamServer **out, const char *path, int max_conns, char *err, size_t errlen)
{
    *out = NULL;
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    size_t n = strlen(path);
    if (!n || n >= sizeof sa.sun_path) return err_set(err, errlen, "telemetry stream %s: path too long", path);
    memcpy(sa.sun_path, path, n + 1);
    struct stat st;
    if (!lstat(path, &st)) {
        if (!S_ISSOCK(st.st_mode)) return err_set(err, errlen, "telemetry stream %s: %s", path, strerror(EEXIST));
        int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        bool live = probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof sa) == 0;
        if (probe >= 0) close(probe);
        if (live) return err_set(err, errlen, "telemetry stream %s: %s", path, strerror(EADDRINUSE));
        unlink(path); /* stale: nobody accepts on it */
    }
    TStreamServer *s = calloc(1, sizeof *s);
    if (!s) return err_set(err, errlen, "telemetry stream: out of memory");
    s->lfd = s->ep = -1;
    s->max_conns = max_conns > 0 ? max_conns : 1;
    s->conns = calloc((size_t)s->max_conns, sizeof *s->conns);
    s->rbuf = malloc(READ_BUF);
    s->cap_pend = 2 * s->max_conns; /* a connection at most once, and as many closed since */
    s->pend = malloc(sizeof *s->pend * (size_t)s->cap_pend);
    if (!s->conns || !s->rbuf || !s->pend) goto oom;
    s->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s->lfd < 0 || bind(s->lfd, (struct sockaddr *)&sa, sizeof sa)) {
        err_set(err, errlen, "telemetry stream %s: %s", path, strerror(errno));
        goto fail;
    }
    memcpy(s->path, path, n + 1);
    if (listen(s->lfd, SOMAXCONN)) goto sysfail;
    s->ep = epoll_create1(EPOLL_CLOEXEC);
    if (s->ep < 0) goto sysfail;
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &listen_tag };
    if (epoll_ctl(s->ep, EPOLL_CTL_ADD, s->lfd, &ev)) goto sysfail;
    *out = s;
    return 0;
oom:
    err_set(err, errlen, "telemetry stream: out of memory");
    goto fail;
sysfail:
    err_set(err, errlen, "telemetry stream %s: %s", path, strerror(errno));
fail:
    tss_close(&s);
    return -1;
}

static void conn_close(TStreamServer *s, Conn *c)
{
    epoll_ctl(s->ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    s->conns[c->slot] = NULL;
    s->st.conns--;
    free(c->buf);
    free(c);
}

void tss_close(TStreamServer **sp)
{
    TStreamServer *s = sp ? *sp : NULL;
    if (!s) return;
    for (int i = 0; s->conns && i < s->max_conns; i++)
        if (s->conns[i]) conn_close(s, s->conns[i]);
    if (s->ep >= 0) close(s->ep);
    if (s->lfd >= 0) close(s->lfd);
    if (s->path[0]) unlink(s->path);
    free(s->conns);
    free(s->rbuf);
    free(s->pend);
    free(s);
    *sp = NULL;
}

int tss_fd(const TStreamServer *s) { return s->ep; }

void tss_stats(const TStreamServer *s, TssStats *out) { *out = s->st; }

static void accept_all(TStreamServer *s)
{
    for (;;) {
        int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            return; /* EAGAIN, or out of descriptors: the rest waits in the backlog */
        }
        int slot = -1;
        if (s->st.conns < s->max_conns)
            for (int i = 0; i < s->max_conns && slot < 0; i++)
                if (!s->conns[i]) slot = i;
        Conn *c = slot >= 0 ? calloc(1, sizeof *c) : NULL;
        if (!c) {
            close(fd);
            s->st.refused++;
            continue;
        }
        struct ucred cred;
        socklen_t cl = sizeof cred;
        c->fd = fd;
        c->slot = slot;
        c->id = (uint64_t)++s->gen << 32 | (uint32_t)(slot + 1);
        c->pid = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0 && cred.pid > 0 ? cred.pid : 0;
        /* edge-triggered: a connection read short was read empty, and a
         * level-triggered set would look at it again at every wait */
        struct epoll_event ev = { .events = EPOLLIN | EPOLLET, .data.ptr = c };
        if (epoll_ctl(s->ep, EPOLL_CTL_ADD, fd, &ev)) {
            close(fd);
            free(c);
            s->st.refused++;
            continue;
        }
        s->conns[slot] = c;
        s->st.conns++;
        s->st.accepted++;
    }
}

static void bad(TStreamServer *s, Conn *c, const char *why)
{
    s->st.bad++;
    snprintf(s->st.last_bad, sizeof s->st.last_bad, "process %lld: %s", (long long)c->pid, why);
    conn_close(s, c);
}

/* A connection's own buffer holding at least `want` bytes (its len kept). */
static bool hold(Conn *c, size_t want)
{
    if (c->cap >= want) return true;
    size_t cap = c->cap ? c->cap : 1024;
    while (cap < want) cap *= 2;
    uint8_t *p = realloc(c->buf, cap);
    if (!p) return false;
    c->buf = p;
    c->cap = cap;
    return true;
}

/* The bytes a connection's partial frame still needs to be whole, 0 while
 * its length is not known yet (or nothing is pending). */
static size_t pending_frame(const Conn *c)
{
    return c->magic_ok && c->len >= 4 ? 4 + (size_t)le32(c->buf) : 0;
}

/* Read once and hand over the whole frames. Returns the frames, -1 when
 * the connection was closed, and sets *full when the read filled the room
 * it had (more may wait). Reads go into the server's buffer after what the
 * connection kept of its last; a frame too large for it is gathered in the
 * connection's own buffer instead. */
static int read_conn(TStreamServer *s, Conn *c, TssFrameFn fn, void *ctx, bool *full)
{
    *full = false;
    size_t whole = pending_frame(c);
    bool own = whole > READ_BUF;
    uint8_t *buf;
    size_t len = c->len, cap;
    if (own) {
        if (!hold(c, whole)) {
            bad(s, c, "out of memory for a frame");
            return -1;
        }
        buf = c->buf, cap = whole;
    } else {
        buf = s->rbuf, cap = READ_BUF;
        if (len) memcpy(buf, c->buf, len);
    }
    size_t want = cap - len;
    ssize_t got = recv(c->fd, buf + len, want, MSG_DONTWAIT);
    if (got < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
        got = 0; /* reset by the peer: as its end */
    }
    if (got == 0) {
        if (c->magic_ok && c->len > 0) s->st.cut++;
        conn_close(s, c);
        return -1;
    }
    *full = (size_t)got == want;
    len += (size_t)got;
    size_t pos = 0;
    int n = 0;
    if (!c->magic_ok && len >= TSTREAM_MAGIC_LEN) {
        if (memcmp(buf, TSTREAM_MAGIC, TSTREAM_MAGIC_LEN)) {
            bad(s, c, "not a ddptop telemetry stream (wrong greeting)");
            return -1;
        }
        c->magic_ok = true;
        pos = TSTREAM_MAGIC_LEN;
    }
    while (c->magic_ok && len - pos >= 4) {
        uint32_t flen = le32(buf + pos);
        if (flen == 0 || flen > PROTO_MAX_FRAME_BYTES) {
            char why[96];
            snprintf(why, sizeof why, "a frame of %u bytes (1..%u allowed)", flen, PROTO_MAX_FRAME_BYTES);
            bad(s, c, why);
            return -1;
        }
        if (len - pos - 4 < flen) break;
        fn(ctx, buf + pos + 4, flen, c->pid, c->id);
        s->st.frames++;
        s->st.bytes += flen;
        n++;
        pos += 4 + (size_t)flen;
    }
    /* what is left (a partial frame) stays with the connection */
    c->len = len - pos;
    if (c->len) {
        if (own) {
            if (pos) memmove(c->buf, c->buf + pos, c->len);
        } else if (!hold(c, c->len)) {
            bad(s, c, "out of memory for a partial frame");
            return -1;
        } else {
            memcpy(c->buf, buf + pos, c->len);
        }
    } else if (c->cap > KEEP_BUF) {
        free(c->buf);
        c->buf = NULL;
        c->cap = 0;
    }
    return n;
}

/* Read c once; a read that filled its room puts c on the pend list. */
static int read_one(TStreamServer *s, Conn *c, TssFrameFn fn, void *ctx)
{
    bool full = false;
    int n = read_conn(s, c, fn, ctx, &full);
    if (n < 0) return 0; /* closed (and freed) */
    if (full && !c->pending && s->n_pend < s->cap_pend) {
        c->pending = true;
        s->pend[s->n_pend++] = c->id;
    }
    return n > 0 ? n : 0;
}

int tss_drain(TStreamServer *s, int max_frames, TssFrameFn fn, void *ctx, bool *more)
{
    struct epoll_event ev[EVENTS_MAX];
    int total = 0;
    bool events_left = false;
    for (int pass = 0; pass < PASSES_MAX && total < max_frames; pass++) {
        /* the connections a read filled last time first, in their order */
        int np = s->n_pend;
        uint64_t pend[EVENTS_MAX];
        if (np > EVENTS_MAX) np = EVENTS_MAX;
        memcpy(pend, s->pend, sizeof *pend * (size_t)np);
        memmove(s->pend, s->pend + np, sizeof *s->pend * (size_t)(s->n_pend - np));
        s->n_pend -= np;
        for (int i = 0; i < np; i++) {
            uint32_t slot = (uint32_t)pend[i];
            Conn *c = slot && slot <= (uint32_t)s->max_conns ? s->conns[slot - 1] : NULL;
            if (!c || c->id != pend[i]) continue; /* closed since */
            c->pending = false;
            total += read_one(s, c, fn, ctx);
        }
        int k = epoll_wait(s->ep, ev, EVENTS_MAX, 0);
        events_left = k == EVENTS_MAX;
        for (int i = 0; i < k; i++) {
            if (ev[i].data.ptr == &listen_tag) {
                accept_all(s);
                continue;
            }
            /* a connection closed here may be another event's pointer of
             * this pass: none, since each fd is reported once a pass */
            total += read_one(s, ev[i].data.ptr, fn, ctx);
        }
        if (!s->n_pend && !events_left) break;
    }
    if (more) *more = s->n_pend > 0 || events_left;
    return total;
}

bool tss_more(const TStreamServer *s) { return s->n_pend > 0; }

/* What waits of the last frame down; true when nothing waits any more. */
static bool down_out(Conn *c)
{
    while (c->down_off < c->down_len) {
        ssize_t w = send(c->fd, c->down + c->down_off, c->down_len - c->down_off, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR) continue;
            return false; /* full, or broken: the read side will see the end */
        }
        c->down_off += (size_t)w;
    }
    c->down_off = c->down_len = 0;
    return true;
}

int tss_send(TStreamServer *s, uint64_t conn, const void *frame, size_t len)
{
    uint32_t slot = (uint32_t)conn;
    if (!slot || slot > (uint32_t)s->max_conns || !len || len > TSTREAM_DOWN_MAX) return -1;
    Conn *c = s->conns[slot - 1];
    if (!c || c->id != conn) return -1;
    if (!down_out(c)) return 1;
    c->down[0] = (uint8_t)len, c->down[1] = (uint8_t)(len >> 8), c->down[2] = 0, c->down[3] = 0;
    memcpy(c->down + 4, frame, len);
    c->down_len = 4 + len;
    down_out(c);
    return 0;
}

/* ---- client ---- */

struct TStream {
    int fd;
    uint8_t *q;
    size_t qoff, qlen, qcap; /* bytes waiting: q[qoff..qlen) */
    bool broken;
    uint8_t in[4 * (4 + TSTREAM_DOWN_MAX)]; /* what ddptop sent down, not yet a whole frame */
    size_t in_len;
};

static void broke(TStream *c)
{
    c->broken = true;
    c->qoff = c->qlen = 0;
}

/* Write q[qoff..qlen) as far as the socket takes it. */
static void write_queue(TStream *c)
{
    while (!c->broken && c->qoff < c->qlen) {
        ssize_t w = send(c->fd, c->q + c->qoff, c->qlen - c->qoff, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK) broke(c);
            return;
        }
        c->qoff += (size_t)w;
    }
    if (c->qoff == c->qlen) c->qoff = c->qlen = 0;
}

static bool enqueue(TStream *c, const void *a, size_t an, const void *b, size_t bn)
{
    if (c->qoff && c->qoff >= c->qlen / 2) {
        memmove(c->q, c->q + c->qoff, c->qlen - c->qoff);
        c->qlen -= c->qoff;
        c->qoff = 0;
    }
    size_t need = c->qlen + an + bn;
    if (need > c->qcap) {
        size_t cap = c->qcap ? c->qcap : 8192;
        while (cap < need) cap *= 2;
        uint8_t *p = realloc(c->q, cap);
        if (!p) return false;
        c->q = p;
        c->qcap = cap;
    }
    memcpy(c->q + c->qlen, a, an);
    if (bn) memcpy(c->q + c->qlen + an, b, bn);
    c->qlen += an + bn;
    return true;
}

int tsc_open(TStream **out, const char *path)
{
    *out = NULL;
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    size_t n = strlen(path);
    if (!n || n >= sizeof sa.sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(sa.sun_path, path, n + 1);
    TStream *c = calloc(1, sizeof *c);
    if (!c) return -1;
    c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) goto fail;
    /* a full backlog (a thousand ranks connecting at once) says EAGAIN: a
     * few tries, then ZeroMQ's tel instead */
    for (int tries = 0;; tries++) {
        if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) == 0) break;
        if (errno == EINTR) continue;
        if (errno != EAGAIN || tries >= 50) goto fail;
        struct timespec ts = { 0, 10 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    if (!enqueue(c, TSTREAM_MAGIC, TSTREAM_MAGIC_LEN, NULL, 0)) goto fail;
    write_queue(c);
    *out = c;
    return 0;
fail:;
    int e = errno;
    if (c->fd >= 0) close(c->fd);
    free(c->q);
    free(c);
    errno = e;
    return -1;
}

int tsc_send(TStream *c, const void *frame, size_t len)
{
    if (c->broken || len == 0 || len > PROTO_MAX_FRAME_BYTES) return 1;
    uint8_t hdr[4] = { (uint8_t)len, (uint8_t)(len >> 8), (uint8_t)(len >> 16), (uint8_t)(len >> 24) };
    if (c->qoff < c->qlen) write_queue(c);
    if (c->broken) return 1;
    if (c->qoff == c->qlen) {
        /* nothing waits: straight to the socket, the rest queued */
        struct iovec iov[2] = { { hdr, 4 }, { (void *)frame, len } };
        struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };
        ssize_t w;
        do
            w = sendmsg(c->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
        while (w < 0 && errno == EINTR);
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            broke(c);
            return 1;
        }
        size_t done = w > 0 ? (size_t)w : 0;
        if (done == 4 + len) return 0;
        if (done < 4) return enqueue(c, hdr + done, 4 - done, frame, len) ? 0 : 1;
        return enqueue(c, (const uint8_t *)frame + (done - 4), len - (done - 4), NULL, 0) ? 0 : 1;
    }
    if (c->qlen - c->qoff + 4 + len > TSTREAM_PENDING_MAX) return 1;
    return enqueue(c, hdr, 4, frame, len) ? 0 : 1;
}

size_t tsc_flush(TStream *c)
{
    write_queue(c);
    return c->qlen - c->qoff;
}

size_t tsc_wait(TStream *c, int timeout_ms)
{
    int64_t deadline = mono_ms() + timeout_ms;
    write_queue(c);
    while (!c->broken && c->qoff < c->qlen) {
        int64_t left = deadline - mono_ms();
        if (left <= 0) break;
        struct pollfd p = { .fd = c->fd, .events = POLLOUT };
        if (poll(&p, 1, (int)(left > 100 ? 100 : left)) < 0 && errno != EINTR) break;
        write_queue(c);
    }
    return c->qlen - c->qoff;
}

bool tsc_broken(const TStream *c) { return c->broken; }

int tsc_read(TStream *c, TscFrameFn fn, void *ctx)
{
    int n = 0;
    while (!c->broken) {
        ssize_t got = recv(c->fd, c->in + c->in_len, sizeof c->in - c->in_len, MSG_DONTWAIT);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (got <= 0) {
            broke(c);
            return -1;
        }
        c->in_len += (size_t)got;
        size_t pos = 0;
        while (c->in_len - pos >= 4) {
            uint32_t flen = le32(c->in + pos);
            if (flen == 0 || flen > TSTREAM_DOWN_MAX) {
                broke(c);
                return -1;
            }
            if (c->in_len - pos - 4 < flen) break;
            fn(ctx, c->in + pos + 4, flen);
            n++;
            pos += 4 + (size_t)flen;
        }
        memmove(c->in, c->in + pos, c->in_len - pos);
        c->in_len -= pos;
    }
    return c->broken ? -1 : n;
}

void tsc_close(TStream **cp, int linger_ms)
{
    TStream *c = cp ? *cp : NULL;
    if (!c) return;
    if (linger_ms > 0) tsc_wait(c, linger_ms);
    close(c->fd);
    free(c->q);
    free(c);
    *cp = NULL;
}
