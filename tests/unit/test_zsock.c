/* test_zsock.c — ZeroMQ helpers over ipc:// in a private directory.
 *
 * PUSH/PULL (telemetry) and ROUTER/DEALER (control) round trips, the
 * non-blocking drop path, frames that must be skipped without losing the
 * next message, and the private directory's mode and removal.
 * Every receive has a timeout, so a broken build fails instead of hanging.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <zmq.h>

#include "check.h"
#include "wire/codec.h"
#include "wire/protocol.h"
#include "net/zsock.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *sock_new(void *ctx, int type)
{
    void *s = zmq_socket(ctx, type);
    int linger = 0, timeout_ms = 2000;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &timeout_ms, sizeof timeout_ms);
    zmq_setsockopt(s, ZMQ_SNDTIMEO, &timeout_ms, sizeof timeout_ms);
    return s;
}

static void test_private_dir(void)
{
    TEST_BEGIN("private_dir_0700_and_removed");
    char dir[256], err[256];
    CHECK(zs_private_dir(dir, sizeof dir, err, sizeof err) == 0, "zs_private_dir: %s", err);
    struct stat st;
    CHECK(stat(dir, &st) == 0 && S_ISDIR(st.st_mode), "%s is not a directory", dir);
    CHECK((st.st_mode & 07777) == 0700, "mode %o", (unsigned)(st.st_mode & 07777));
    CHECK(strstr(dir, "/ddptop-") != NULL, "name %s", dir);
    /* socket files and stray files inside are removed with it */
    char f[300];
    snprintf(f, sizeof f, "%s/stray", dir);
    FILE *fp = fopen(f, "w");
    if (fp) fclose(fp);
    zs_private_dir_remove(dir);
    CHECK(stat(dir, &st) == -1 && errno == ENOENT, "%s still exists", dir);

    /* $TMPDIR is honoured */
    char base[] = "/tmp/ddptop-test-XXXXXX";
    CHECK(mkdtemp(base) != NULL, "mkdtemp");
    const char *old = getenv("TMPDIR");
    char *saved = old ? strdup(old) : NULL;
    setenv("TMPDIR", base, 1);
    CHECK(zs_private_dir(dir, sizeof dir, err, sizeof err) == 0, "with TMPDIR: %s", err);
    CHECK(strncmp(dir, base, strlen(base)) == 0, "%s not under %s", dir, base);
    zs_private_dir_remove(dir);
    /* one too long for a unix socket path falls back to /tmp */
    char longdir[200];
    memset(longdir, 'd', sizeof longdir - 1);
    longdir[0] = '/';
    longdir[sizeof longdir - 1] = 0;
    setenv("TMPDIR", longdir, 1);
    CHECK(zs_private_dir(dir, sizeof dir, err, sizeof err) == 0, "long TMPDIR: %s", err);
    CHECK(strncmp(dir, "/tmp/ddptop-", 12) == 0, "long TMPDIR gave %s", dir);
    zs_private_dir_remove(dir);
    if (saved) {
        setenv("TMPDIR", saved, 1);
        free(saved);
    } else {
        unsetenv("TMPDIR");
    }
    rmdir(base);
    /* too small an output buffer is an error, not an overflow */
    char tiny[8];
    CHECK(zs_private_dir(tiny, sizeof tiny, err, sizeof err) == -1, "8-byte buffer accepted");
    zs_private_dir_remove(NULL);
    TEST_END();
}

/* A ddptop killed with -9 leaves its private directory; the next one clears
 * it (its sockets and owner file; the directory when that was all), but
 * keeps the ranks' logs (a crashed run's only record, maybe still being
 * written), and never touches one whose ddptop still runs, nor one without
 * an owner file. */
static void dead_owner(const char *dir, pid_t pid)
{
    char f[300];
    snprintf(f, sizeof f, "%s/owner.pid", dir);
    FILE *fp = fopen(f, "w");
    if (fp) {
        fprintf(fp, "%ld\n", (long)pid);
        fclose(fp);
    }
}

static void a_socket(const char *dir, const char *name)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    int n = snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%s", dir, name);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(n > 0 && (size_t)n < sizeof sa.sun_path && fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0,
          "socket %s/%s: %s", dir, name, strerror(errno));
    if (fd >= 0) close(fd);
}

static void test_private_dir_sweep(void)
{
    TEST_BEGIN("private_dir_sweep_clears_only_the_dead_ones_and_keeps_logs");
    char dead[256], dead_logs[256], alive[256], unowned[256], err[256];
    CHECK(zs_private_dir(dead, sizeof dead, err, sizeof err) == 0, "zs_private_dir: %s", err);
    CHECK(zs_private_dir(dead_logs, sizeof dead_logs, err, sizeof err) == 0, "zs_private_dir: %s", err);
    CHECK(zs_private_dir(alive, sizeof alive, err, sizeof err) == 0, "zs_private_dir: %s", err);
    CHECK(zs_private_dir(unowned, sizeof unowned, err, sizeof err) == 0, "zs_private_dir: %s", err);
    /* a pid that is gone: a child that has exited and been reaped */
    pid_t child = fork();
    if (child == 0) _exit(0);
    waitpid(child, NULL, 0);
    char f[300];
    dead_owner(dead, child);
    a_socket(dead, "ctl");
    dead_owner(dead_logs, child);
    a_socket(dead_logs, "ctl");
    a_socket(dead_logs, "tel");
    snprintf(f, sizeof f, "%s/rank-0.log", dead_logs);
    FILE *fp = fopen(f, "w");
    if (fp) {
        fputs("rank 0: ddptop is gone\n", fp);
        fclose(fp);
    }
    snprintf(f, sizeof f, "%s/owner.pid", unowned);
    unlink(f);
    int n = zs_private_dir_sweep();
    struct stat st;
    CHECK(n >= 2, "swept %d", n);
    CHECK(stat(dead, &st) == -1 && errno == ENOENT, "%s (owner gone, sockets only) still exists", dead);
    snprintf(f, sizeof f, "%s/rank-0.log", dead_logs);
    CHECK(stat(f, &st) == 0 && st.st_size > 0, "%s: the killed run's rank log was removed", f);
    snprintf(f, sizeof f, "%s/ctl", dead_logs);
    CHECK(stat(f, &st) == -1, "%s: the killed run's socket was left", f);
    snprintf(f, sizeof f, "%s/owner.pid", dead_logs);
    CHECK(stat(f, &st) == -1, "%s: its owner file was left (every sweep would look again)", f);
    CHECK(stat(alive, &st) == 0, "%s (owner alive) was removed", alive);
    CHECK(stat(unowned, &st) == 0, "%s (no owner file) was removed", unowned);
    zs_private_dir_remove(alive);
    zs_private_dir_remove(unowned);
    zs_private_dir_remove(dead_logs);
    TEST_END();
}

static void test_push_pull(void *ctx, const char *dir)
{
    TEST_BEGIN("push_pull_roundtrip");
    char ep[300], err[256];
    snprintf(ep, sizeof ep, "ipc://%s/tel", dir);
    void *pull = sock_new(ctx, ZMQ_PULL), *push = sock_new(ctx, ZMQ_PUSH);
    CHECK(zmq_bind(pull, ep) == 0, "bind %s: %s", ep, zmq_strerror(errno));
    CHECK(zmq_connect(push, ep) == 0, "connect: %s", zmq_strerror(errno));

    CodecBuf scratch;
    codec_buf_init(&scratch);
    Msg in, out;
    msg_init(&in, MSG_STEP);
    in.rank = 2;
    in.t_ns = proto_now_ns();
    in.u.step.step = 10;
    in.u.step.loss = 1.25;
    in.u.step.drops = 3;
    CHECK(zs_send(push, &in, &scratch, 0, err, sizeof err) == 0, "send: %s", err);
    int rc = zs_recv(pull, &out, 0, err, sizeof err);
    CHECK(rc == 0, "recv rc %d: %s", rc, err);
    CHECK(out.kind == MSG_STEP && out.rank == 2 && out.t_ns == in.t_ns && out.u.step.step == 10 &&
              out.u.step.loss == 1.25 && out.u.step.drops == 3,
          "step fields differ");
    msg_done(&out);

    /* heap-carrying kind through a socket */
    msg_init(&in, MSG_SHARD);
    in.rank = 1;
    int64_t idx[4] = { 3, 1, 4, 1 };
    in.u.shard.idx = idx; /* ours, not heap: no msg_done on `in` */
    in.u.shard.n_idx = 4;
    CHECK(zs_send(push, &in, &scratch, ZMQ_DONTWAIT, err, sizeof err) == 0, "send shard: %s", err);
    rc = zs_recv(pull, &out, 0, err, sizeof err);
    CHECK(rc == 0 && out.kind == MSG_SHARD && out.u.shard.n_idx == 4 && out.u.shard.idx[2] == 4, "shard rc %d: %s", rc,
          err);
    msg_done(&out);

    /* nothing to read */
    rc = zs_recv(pull, &out, ZMQ_DONTWAIT, err, sizeof err);
    CHECK(rc == 1, "empty queue rc %d", rc);

    /* a bad frame, a multi-part message and an unknown kind are each
     * skipped (2) and the message behind them still arrives intact */
    zmq_send(push, "\xc1garbage", 8, 0);
    zmq_send(push, "part1", 5, ZMQ_SNDMORE);
    zmq_send(push, "part2", 5, ZMQ_SNDMORE);
    zmq_send(push, "part3", 5, 0);
    static const uint8_t unknown[] = { 0x82, 0xa1, 'v', 0x01, 0xa1, 'k', 0xa3, 'z', 'z', 'z' };
    zmq_send(push, unknown, sizeof unknown, 0);
    msg_init(&in, MSG_BYE);
    in.u.bye.status = 0;
    in.u.bye.step = 77;
    zs_send(push, &in, &scratch, 0, err, sizeof err);
    rc = zs_recv(pull, &out, 0, err, sizeof err);
    CHECK(rc == 2 && strstr(err, "msgpack"), "garbage: rc %d %s", rc, err);
    rc = zs_recv(pull, &out, 0, err, sizeof err);
    CHECK(rc == 2 && strstr(err, "multi-part"), "multi-part: rc %d %s", rc, err);
    rc = zs_recv(pull, &out, 0, err, sizeof err);
    CHECK(rc == 2 && strstr(err, "zzz"), "unknown kind: rc %d %s", rc, err);
    rc = zs_recv(pull, &out, 0, err, sizeof err);
    CHECK(rc == 0 && out.kind == MSG_BYE && out.u.bye.step == 77, "after skips: rc %d %s", rc, err);
    msg_done(&out);

    codec_buf_done(&scratch);
    zmq_close(push);
    zmq_close(pull);
    TEST_END();
}

static void test_router_dealer(void *ctx, const char *dir)
{
    TEST_BEGIN("router_dealer_roundtrip");
    char ep[300], err[256];
    snprintf(ep, sizeof ep, "ipc://%s/ctl", dir);
    void *router = sock_new(ctx, ZMQ_ROUTER), *dealer = sock_new(ctx, ZMQ_DEALER);
    int one = 1;
    zmq_setsockopt(router, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
    zmq_setsockopt(dealer, ZMQ_ROUTING_ID, "rank-3", 6);
    CHECK(zmq_bind(router, ep) == 0, "bind %s: %s", ep, zmq_strerror(errno));
    CHECK(zmq_connect(dealer, ep) == 0, "connect: %s", zmq_strerror(errno));

    CodecBuf scratch;
    codec_buf_init(&scratch);
    Msg in, out;
    /* worker -> ddptop: a store get */
    msg_init(&in, MSG_GET);
    in.rank = 3;
    snprintf(in.u.store.key, sizeof in.u.store.key, "rdzv/addr");
    in.u.store.timeout_ms = 5000;
    CHECK(zs_send(dealer, &in, &scratch, 0, err, sizeof err) == 0, "dealer send: %s", err);
    uint8_t ident[ZS_IDENT_MAX];
    size_t ident_len = 0;
    int rc = zs_recv_from(router, ident, &ident_len, &out, 0, err, sizeof err);
    CHECK(rc == 0, "router recv rc %d: %s", rc, err);
    CHECK(ident_len == 6 && memcmp(ident, "rank-3", 6) == 0, "ident %.*s", (int)ident_len, (char *)ident);
    CHECK(out.kind == MSG_GET && out.rank == 3 && strcmp(out.u.store.key, "rdzv/addr") == 0 &&
              out.u.store.timeout_ms == 5000,
          "get fields differ");
    msg_done(&out);

    /* ddptop -> worker: the reply, addressed by routing id */
    msg_init(&in, MSG_VAL);
    snprintf(in.u.store.key, sizeof in.u.store.key, "rdzv/addr");
    in.u.store.ok = true;
    uint8_t val[] = "10.0.0.1:29500";
    in.u.store.val = val;
    in.u.store.val_len = sizeof val - 1;
    CHECK(zs_send_to(router, ident, ident_len, &in, &scratch, 0, err, sizeof err) == 0, "router send: %s", err);
    rc = zs_recv(dealer, &out, 0, err, sizeof err);
    CHECK(rc == 0 && out.kind == MSG_VAL && out.u.store.ok && out.u.store.val_len == 14 &&
              memcmp(out.u.store.val, "10.0.0.1:29500", 14) == 0,
          "val rc %d: %s", rc, err);
    msg_done(&out);

    /* a command down to an unknown peer is an error with ROUTER_MANDATORY */
    msg_init(&in, MSG_CMD);
    snprintf(in.u.cmd.op, sizeof in.u.cmd.op, "stop");
    rc = zs_send_to(router, "nobody", 6, &in, &scratch, ZMQ_DONTWAIT, err, sizeof err);
    CHECK(rc == -1 && err[0], "unknown peer: rc %d", rc);
    CHECK(zs_send_to(router, "", 0, &in, &scratch, 0, err, sizeof err) == -1, "empty ident");

    /* a multi-part message from a dealer is skipped, the next one arrives */
    zmq_send(dealer, "a", 1, ZMQ_SNDMORE);
    zmq_send(dealer, "b", 1, 0);
    msg_init(&in, MSG_WAIT);
    snprintf(in.u.store.key, sizeof in.u.store.key, "barrier/1");
    zs_send(dealer, &in, &scratch, 0, err, sizeof err);
    rc = zs_recv_from(router, ident, &ident_len, &out, 0, err, sizeof err);
    CHECK(rc == 2 && strstr(err, "multi-part"), "multi-part: rc %d %s", rc, err);
    rc = zs_recv_from(router, ident, &ident_len, &out, 0, err, sizeof err);
    CHECK(rc == 0 && out.kind == MSG_WAIT && strcmp(out.u.store.key, "barrier/1") == 0, "after skip: rc %d %s", rc,
          err);
    msg_done(&out);
    rc = zs_recv_from(router, ident, &ident_len, &out, ZMQ_DONTWAIT, err, sizeof err);
    CHECK(rc == 1, "empty router rc %d", rc);

    codec_buf_done(&scratch);
    zmq_close(dealer);
    zmq_close(router);
    TEST_END();
}

static void test_drop(void *ctx, const char *dir)
{
    TEST_BEGIN("dontwait_drops_instead_of_blocking");
    char ep[300], err[256];
    CodecBuf scratch;
    codec_buf_init(&scratch);
    Msg m;
    msg_init(&m, MSG_STEP);
    int hwm = 1;

    /* bound, no peer: nowhere to queue at all */
    void *push = sock_new(ctx, ZMQ_PUSH);
    zmq_setsockopt(push, ZMQ_SNDHWM, &hwm, sizeof hwm);
    snprintf(ep, sizeof ep, "ipc://%s/lonely", dir);
    CHECK(zmq_bind(push, ep) == 0, "bind: %s", zmq_strerror(errno));
    double t0 = now_s();
    int rc = zs_send(push, &m, &scratch, ZMQ_DONTWAIT, err, sizeof err);
    CHECK(rc == 1, "bound PUSH without peer: rc %d %s", rc, err);
    zmq_close(push);

    /* connected to an endpoint nobody serves: the queue fills at the HWM */
    push = sock_new(ctx, ZMQ_PUSH);
    zmq_setsockopt(push, ZMQ_SNDHWM, &hwm, sizeof hwm);
    snprintf(ep, sizeof ep, "ipc://%s/nobody", dir);
    zmq_connect(push, ep);
    int sent = 0, dropped = 0;
    for (int i = 0; i < 1000; i++) {
        rc = zs_send(push, &m, &scratch, ZMQ_DONTWAIT, err, sizeof err);
        if (rc == 0)
            sent++;
        else if (rc == 1)
            dropped++;
    }
    double dt = now_s() - t0;
    CHECK(dropped > 990 && sent + dropped == 1000, "sent %d dropped %d", sent, dropped);
    CHECK(dt < 1.0, "took %.3f s: sends blocked", dt);
    zmq_close(push);
    codec_buf_done(&scratch);
    TEST_END();
}

/* zs_bind leaves what is at an ipc:// path alone: a user's file is not
 * unlinked, a socket another process listens on is not taken from it; a
 * stale socket (its listener gone) is replaced. */
static void test_bind_taken(void *ctx, const char *dir)
{
    TEST_BEGIN("bind_leaves_a_file_and_a_live_socket_alone");
    char path[300], ep[320];
    snprintf(path, sizeof path, "%s/data.txt", dir);
    snprintf(ep, sizeof ep, "ipc://%s", path);
    FILE *f = fopen(path, "w");
    CHECK(f && fputs("precious\n", f) >= 0 && fclose(f) == 0, "cannot write %s", path);
    void *a = zmq_socket(ctx, ZMQ_PULL), *b = zmq_socket(ctx, ZMQ_PULL);
    int zero = 0;
    zmq_setsockopt(a, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(b, ZMQ_LINGER, &zero, sizeof zero);
    CHECK(zs_ipc_taken(path) == EEXIST, "a regular file: %d", zs_ipc_taken(path));
    CHECK(zs_bind(a, ep) == -1 && errno == EEXIST, "bound over a file (errno %d)", errno);
    struct stat st;
    CHECK(stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 9, "the file was replaced");
    unlink(path);

    snprintf(path, sizeof path, "%s/live", dir);
    snprintf(ep, sizeof ep, "ipc://%s", path);
    CHECK(zs_ipc_taken(path) == 0, "a free path: %d", zs_ipc_taken(path));
    CHECK(zs_bind(a, ep) == 0, "bind %s: %s", ep, zmq_strerror(errno));
    ino_t ino = stat(path, &st) == 0 ? st.st_ino : 0;
    CHECK(zs_ipc_taken(path) == EADDRINUSE, "a live socket: %d", zs_ipc_taken(path));
    CHECK(zs_bind(b, ep) == -1 && errno == EADDRINUSE, "a second bind took a live endpoint (errno %d)", errno);
    CHECK(stat(path, &st) == 0 && st.st_ino == ino, "the live socket's file was replaced");
    zmq_close(a);
    /* a stale socket file: nobody accepts on it */
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    snprintf(path, sizeof path, "%s/stale", dir);
    CHECK(strlen(path) < sizeof sa.sun_path, "socket path too long: %s", path);
    memcpy(sa.sun_path, path, strlen(path) + 1 < sizeof sa.sun_path ? strlen(path) + 1 : sizeof sa.sun_path - 1);
    CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0, "stale socket: %s", strerror(errno));
    close(fd);
    snprintf(ep, sizeof ep, "ipc://%s", path);
    CHECK(zs_ipc_taken(path) == 0, "a stale socket counted as taken");
    CHECK(zs_bind(b, ep) == 0, "bind over a stale socket: %s", zmq_strerror(errno));
    zmq_close(b);
    unlink(path);
    snprintf(path, sizeof path, "%s/live", dir);
    unlink(path);
    TEST_END();
}

int main(void)
{
    test_private_dir();
    test_private_dir_sweep();

    char dir[256], err[256];
    if (zs_private_dir(dir, sizeof dir, err, sizeof err) < 0) {
        printf("FAIL: %s:setup: %s\n", __FILE__, err);
        return 1;
    }
    void *ctx = zmq_ctx_new();
    test_push_pull(ctx, dir);
    test_router_dealer(ctx, dir);
    test_drop(ctx, dir);
    test_bind_taken(ctx, dir);
    zmq_ctx_term(ctx);

    TEST_BEGIN("private_dir_removed_after_use");
    zs_private_dir_remove(dir);
    struct stat st;
    CHECK(stat(dir, &st) == -1, "%s left behind", dir);
    TEST_END();
    CHECK_EXIT();
}
