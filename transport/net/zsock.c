/* zsock.c — one protocol message per ZeroMQ frame, and the private ipc dir.
 *
 * Owns: turning Msg <-> frames on a socket (plain, and ROUTER envelopes),
 * classifying what went wrong (queue full, nothing to read, a bad frame to
 * skip, a real socket error), and the 0700 directory ipc:// endpoints live
 * in. Does not own socket creation, options or lifetimes: callers do.
 * A socket belongs to one thread (ZeroMQ's rule); these functions keep no
 * state of their own.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* mkdtemp, strnlen under -std=c11 */
#endif
#include "net/zsock.h"
#include "base/err.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <zmq.h>

int zs_ipc_taken(const char *path)
{
    struct stat st;
    if (!*path || lstat(path, &st)) return 0;
    if (!S_ISSOCK(st.st_mode)) return EEXIST;
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    if (strlen(path) >= sizeof sa.sun_path) return 0; /* zmq_bind will say */
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return 0;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int live = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return live ? EADDRINUSE : 0;
}

int zs_bind(void *sock, const char *endpoint)
{
    /* ZeroMQ unlinks whatever is at an ipc:// path before it binds: a
     * user's file, or the socket another process is listening on, taken
     * from it without a word (a second `ddptop listen` on one endpoint
     * left the first waiting for workers that could no longer reach it). */
    int taken = strncmp(endpoint, "ipc://", 6) ? 0 : zs_ipc_taken(endpoint + 6);
    if (taken) {
        errno = taken;
        return -1;
    }
    return zmq_bind(sock, endpoint);
}

/* sun_path is 108 bytes; keep room for "/" and a socket name like "ctl". */
#define ZS_DIR_MAX 90

int zs_drain(void *sock)
{
    int parts = 0;
    int more = 1;
    while (more) {
        zmq_msg_t part;
        zmq_msg_init(&part);
        if (zmq_msg_recv(&part, sock, 0) < 0) {
            zmq_msg_close(&part);
            if (errno == EINTR) continue;
            break;
        }
        more = zmq_msg_more(&part);
        zmq_msg_close(&part);
        parts++;
    }
    return parts;
}

/* Send a frame; flags may carry ZMQ_SNDMORE. 0 sent, 1 would block / EINTR. */
static int send_frame(void *sock, const void *data, size_t len, int flags, char *err, size_t errlen)
{
    if (zmq_send(sock, data, len, flags) >= 0) return 0;
    if (errno == EAGAIN || errno == EINTR) return 1;
    return err_set(err, errlen, "zmq_send: %s", zmq_strerror(errno));
}

int zs_send(void *sock, const Msg *m, CodecBuf *scratch, int flags, char *err, size_t errlen)
{
    if (codec_encode(m, scratch, err, errlen) < 0) return -1;
    return send_frame(sock, scratch->data, scratch->len, flags, err, errlen);
}

int zs_send_to(void *router, const void *ident, size_t ident_len, const Msg *m, CodecBuf *scratch, int flags, char *err,
               size_t errlen)
{
    if (!ident || ident_len == 0 || ident_len > 255)
        return err_set(err, errlen, "routing id of %zu bytes (must be 1..255)", ident_len);
    /* Encode before the envelope goes out: a failed encode must not leave a
     * half-sent message on the socket. */
    if (codec_encode(m, scratch, err, errlen) < 0) return -1;
    int rc = send_frame(router, ident, ident_len, flags | ZMQ_SNDMORE, err, errlen);
    if (rc != 0) return rc;
    /* Once the first part is accepted ZeroMQ takes the rest of the message:
     * later parts are not subject to the high-water mark. */
    return send_frame(router, scratch->data, scratch->len, flags & ~ZMQ_SNDMORE, err, errlen);
}

/* Receive one part. 0 got it, 1 nothing (EAGAIN/EINTR), -1 error. */
static int recv_part(void *sock, zmq_msg_t *part, int flags, char *err, size_t errlen)
{
    if (zmq_msg_recv(part, sock, flags) >= 0) return 0;
    if (errno == EAGAIN || errno == EINTR) return 1;
    return err_set(err, errlen, "zmq_msg_recv: %s", zmq_strerror(errno));
}

/* "localhost:UID:GID:PID" on ipc (libzmq with SO_PEERCRED) -> PID; 0
 * for anything else (tcp gives an address, inproc nothing). */
int64_t zs_peer_pid(void *zmq_msg)
{
    zmq_msg_t *part = zmq_msg;
    const char *a = zmq_msg_gets(part, "Peer-Address");
    if (!a || strncmp(a, "localhost:", 10)) return 0;
    /* three numbers, nothing after: strtoll, not sscanf (this runs for
     * every frame received, and sscanf was a per-cent of ddptop's CPU) */
    const char *p = a + 10;
    char *end = NULL;
    long long v = 0;
    for (int i = 0; i < 3; i++) {
        v = strtoll(p, &end, 10);
        if (end == p || *end != (i < 2 ? ':' : '\0')) return 0;
        p = end + 1;
    }
    return v > 0 ? v : 0;
}

/* Decode a message part that must be the last one. 0, or 2 with err. */
static int decode_last(void *sock, zmq_msg_t *part, Msg *out, char *err, size_t errlen, const char *where, ZsTap tap,
                       void *tap_ctx, int64_t *pid)
{
    if (pid) *pid = zs_peer_pid(part);
    if (zmq_msg_more(part)) {
        int extra = zs_drain(sock);
        msg_init(out, MSG_UNKNOWN);
        err_set(err, errlen, "%smulti-part message (%d more parts) where one frame was expected", where, extra);
        return 2;
    }
    int rc = codec_decode(zmq_msg_data(part), zmq_msg_size(part), out, err, errlen);
    if (tap) tap(tap_ctx, zmq_msg_data(part), zmq_msg_size(part), out, rc);
    if (rc == 0) return 0;
    /* Unknown kind (1) or malformed (-1): skip it; codec filled err. */
    msg_done(out);
    return 2;
}

int zs_recv(void *sock, Msg *out, int flags, char *err, size_t errlen)
{
    return zs_recv_tap(sock, out, flags, NULL, NULL, err, errlen);
}

int zs_recv_tap(void *sock, Msg *out, int flags, ZsTap tap, void *tap_ctx, char *err, size_t errlen)
{
    return zs_recv_peer(sock, out, flags, tap, tap_ctx, NULL, err, errlen);
}

int zs_recv_peer(void *sock, Msg *out, int flags, ZsTap tap, void *tap_ctx, int64_t *pid, char *err, size_t errlen)
{
    zmq_msg_t part;
    zmq_msg_init(&part);
    if (pid) *pid = 0;
    int rc = recv_part(sock, &part, flags, err, errlen);
    if (rc == 0) rc = decode_last(sock, &part, out, err, errlen, "", tap, tap_ctx, pid);
    zmq_msg_close(&part);
    return rc;
}

int zs_recv_from(void *router, void *ident, size_t *ident_len, Msg *out, int flags, char *err, size_t errlen)
{
    return zs_recv_from_tap(router, ident, ident_len, out, flags, NULL, NULL, err, errlen);
}

int zs_recv_from_tap(void *router, void *ident, size_t *ident_len, Msg *out, int flags, ZsTap tap, void *tap_ctx,
                     char *err, size_t errlen)
{
    return zs_recv_from_peer(router, ident, ident_len, out, flags, tap, tap_ctx, NULL, err, errlen);
}

int zs_recv_from_peer(void *router, void *ident, size_t *ident_len, Msg *out, int flags, ZsTap tap, void *tap_ctx,
                      int64_t *pid, char *err, size_t errlen)
{
    zmq_msg_t id, body;
    zmq_msg_init(&id);
    *ident_len = 0;
    if (pid) *pid = 0;
    int rc = recv_part(router, &id, flags, err, errlen);
    if (rc != 0) {
        zmq_msg_close(&id);
        return rc;
    }
    size_t n = zmq_msg_size(&id);
    if (!zmq_msg_more(&id)) {
        zmq_msg_close(&id);
        msg_init(out, MSG_UNKNOWN);
        err_set(err, errlen, "ROUTER message without a body (is the socket a ROUTER?)");
        return 2;
    }
    if (n == 0 || n > ZS_IDENT_MAX) {
        zmq_msg_close(&id);
        zs_drain(router);
        msg_init(out, MSG_UNKNOWN);
        err_set(err, errlen, "peer routing id of %zu bytes (at most %d supported)", n, ZS_IDENT_MAX);
        return 2;
    }
    memcpy(ident, zmq_msg_data(&id), n);
    *ident_len = n;
    zmq_msg_close(&id);

    /* The rest of the message is already here: wait for it even when the
     * caller asked for ZMQ_DONTWAIT. */
    zmq_msg_init(&body);
    for (;;) {
        rc = recv_part(router, &body, 0, err, errlen);
        if (rc != 1 || errno != EINTR) break;
    }
    if (rc == 0)
        rc = decode_last(router, &body, out, err, errlen, "peer sent a ", tap, tap_ctx, pid);
    else if (rc == 1)
        rc = err_set(err, errlen, "zmq_msg_recv: body of a message missing");
    zmq_msg_close(&body);
    return rc;
}

/* Where private directories go: $TMPDIR, unless too long for sun_path (every
 * bind would fail later with a puzzling error); /tmp always fits. */
static const char *private_base(void)
{
    const char *base = getenv("TMPDIR");
    if (!base || !*base || strlen(base) + sizeof "/ddptop-XXXXXX" > ZS_DIR_MAX) base = "/tmp";
    return base;
}

/* The owner file: the pid of the ddptop that made the directory, so the
 * next ddptop can tell a directory left by a killed one (zs_private_dir_sweep). */
#define ZS_OWNER_FILE "owner.pid"

int zs_private_dir(char *out, size_t outlen, char *err, size_t errlen)
{
    const char *base = private_base();
    char path[ZS_DIR_MAX + 16];
    int n = snprintf(path, sizeof path, "%s/ddptop-XXXXXX", base);
    if (n < 0 || (size_t)n >= sizeof path) return err_set(err, errlen, "private dir: path under %s too long", base);
    if (!mkdtemp(path)) return err_set(err, errlen, "private dir: mkdtemp %s: %s", path, strerror(errno));
    /* mkdtemp already uses 0700; say it explicitly, it is the security boundary. */
    if (chmod(path, 0700) < 0) {
        int e = errno;
        rmdir(path);
        return err_set(err, errlen, "private dir: chmod %s: %s", path, strerror(e));
    }
    if ((size_t)n >= outlen) {
        rmdir(path);
        return err_set(err, errlen, "private dir: output buffer of %zu bytes too small", outlen);
    }
    char owner[ZS_DIR_MAX + 32];
    snprintf(owner, sizeof owner, "%s/" ZS_OWNER_FILE, path);
    FILE *f = fopen(owner, "w");
    if (f) {
        fprintf(f, "%ld\n", (long)getpid());
        fclose(f);
    }
    memcpy(out, path, (size_t)n + 1);
    return 0;
}

/* A killed ddptop's directory: its sockets and owner file go, and the
 * directory with them when nothing else is there; its ranks' logs stay (the
 * only record of a run that ended that way, and its ranks may still be
 * writing them: they outlive a ddptop killed with -9 to stop cleanly). */
static void sweep_dead(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        int fd = dirfd(d);
        struct dirent *e;
        struct stat st;
        while ((e = readdir(d))) {
            if (fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW)) continue;
            if (S_ISSOCK(st.st_mode) || !strcmp(e->d_name, ZS_OWNER_FILE)) unlinkat(fd, e->d_name, 0);
        }
        closedir(d);
    }
    rmdir(dir); /* fails, and keeps it, when logs are left */
}

int zs_private_dir_sweep(void)
{
    const char *base = private_base();
    DIR *d = opendir(base);
    if (!d) return 0;
    int removed = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "ddptop-", 7) != 0 || strlen(e->d_name) != 13) continue;
        char dir[ZS_DIR_MAX + 16], owner[ZS_DIR_MAX + 32];
        if (snprintf(dir, sizeof dir, "%s/%s", base, e->d_name) >= (int)sizeof dir) continue;
        struct stat st;
        /* only our own private directories, never through a link */
        if (lstat(dir, &st) || !S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 077)) continue;
        snprintf(owner, sizeof owner, "%s/" ZS_OWNER_FILE, dir);
        FILE *f = fopen(owner, "r");
        if (!f) continue; /* no owner file: not ours to judge */
        long pid = 0;
        int got = fscanf(f, "%ld", &pid);
        fclose(f);
        if (got != 1 || pid <= 0 || pid > INT32_MAX) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive (or not ours to ask) */
        sweep_dead(dir);
        removed++;
    }
    closedir(d);
    return removed;
}

void zs_private_dir_keep(const char *dir, const char *const *sockets)
{
    if (!dir || !*dir) return;
    char p[ZS_DIR_MAX + 64];
    for (int i = 0; sockets && sockets[i]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, sockets[i]);
        unlink(p);
    }
    snprintf(p, sizeof p, "%s/" ZS_OWNER_FILE, dir);
    unlink(p);
}

void zs_private_dir_remove(const char *dir)
{
    if (!dir || !*dir) return;
    DIR *d = opendir(dir);
    if (d) {
        int fd = dirfd(d);
        struct dirent *e;
        while ((e = readdir(d))) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            unlinkat(fd, e->d_name, 0);
        }
        closedir(d);
    }
    rmdir(dir);
}
