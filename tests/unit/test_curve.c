/* test_curve.c — on tcp:// only the job's own clients get through: no keys,
 * a wrong server key, or a stranger's key pair deliver nothing, and the
 * job's clients still get through after any number of refusals (a ZAP
 * handler bug once wedged every handshake after the first refusal); key
 * files are private; endpoint helpers. */
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "check.h"
#include "net/curve.h"

/* Connect a DEALER (configured by `how`) and send one frame; return whether
 * the server received it within 1 s. */
static int delivered(void *ctx, void *server, const char *ep, const JobKeys *k, int how)
{
    void *c = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(c, ZMQ_LINGER, &zero, sizeof zero);
    char err[128];
    JobKeys other;
    keys_generate(&other, err, sizeof err);
    if (how == 1) keys_client_socket(c, k, err, sizeof err); /* the job's client */
    if (how == 2) {                                          /* wrong server key */
        JobKeys w = *k;
        memcpy(w.server.pub, other.server.pub, 41);
        keys_client_socket(c, &w, err, sizeof err);
    }
    if (how == 3) { /* a stranger's pair */
        JobKeys w = other;
        memcpy(w.server.pub, k->server.pub, 41);
        keys_client_socket(c, &w, err, sizeof err);
    }
    zmq_connect(c, ep);
    zmq_send(c, "hello", 5, ZMQ_DONTWAIT);
    zmq_pollitem_t it = { server, 0, ZMQ_POLLIN, 0 };
    int got = 0;
    if (zmq_poll(&it, 1, how == 1 ? 3000 : 500) > 0) { /* a refusal shows in ~ms locally */
        char id[64], body[16];
        zmq_recv(server, id, sizeof id, 0);
        int n = zmq_recv(server, body, sizeof body, 0);
        got = n == 5 && !memcmp(body, "hello", 5);
    }
    zmq_close(c);
    return got;
}

int main(void)
{
    char err[256];
    JobKeys k;
    TEST_BEGIN("only_the_jobs_clients_get_through");
    CHECK(keys_generate(&k, err, sizeof err) == 0, "%s", err);
    void *ctx = zmq_ctx_new();
    ZapHandler *zap = NULL;
    CHECK(zap_start(&zap, ctx, &k, err, sizeof err) == 0, "%s", err);
    void *srv = zmq_socket(ctx, ZMQ_ROUTER);
    int zero = 0;
    zmq_setsockopt(srv, ZMQ_LINGER, &zero, sizeof zero);
    CHECK(keys_server_socket(srv, &k, err, sizeof err) == 0, "%s", err);
    CHECK(zmq_bind(srv, "tcp://127.0.0.1:*") == 0, "bind");
    char ep[128];
    size_t len = sizeof ep;
    zmq_getsockopt(srv, ZMQ_LAST_ENDPOINT, ep, &len);
    CHECK(delivered(ctx, srv, ep, &k, 1), "the job's own client did not get through (first)");
    CHECK(!delivered(ctx, srv, ep, &k, 0), "a client without keys got through");
    CHECK(!delivered(ctx, srv, ep, &k, 2), "a client with the wrong server key got through");
    CHECK(!delivered(ctx, srv, ep, &k, 3), "a stranger's key pair got through");
    CHECK(zap_refused(zap) >= 1, "the ZAP handler refused the stranger");
    CHECK(delivered(ctx, srv, ep, &k, 1), "the job's own client did not get through");
    for (int round = 0; round < 3; round++) {
        CHECK(!delivered(ctx, srv, ep, &k, 0), "round %d: a client without keys got through", round);
        CHECK(!delivered(ctx, srv, ep, &k, 3), "round %d: a stranger got through", round);
        CHECK(delivered(ctx, srv, ep, &k, 1), "round %d: the job's client was shut out after refusals", round);
    }
    zmq_close(srv);
    zap_stop(&zap);
    zmq_ctx_term(ctx);
    TEST_END();

    TEST_BEGIN("key_files_are_private");
    char dir[] = "/tmp/ddptop-keys-XXXXXX", path[128];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof path, "%s/job.keys", dir);
    CHECK(keys_write(path, &k, err, sizeof err) == 0, "%s", err);
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600, "mode %o", (unsigned)(st.st_mode & 0777));
    JobKeys r;
    CHECK(keys_read(path, &r, err, sizeof err) == 0 && !memcmp(&r, &k, sizeof k), "read back: %s", err);
    CHECK(keys_write(path, &k, err, sizeof err) == -1, "overwrote an existing key file");
    chmod(path, 0644);
    CHECK(keys_read(path, &r, err, sizeof err) == -1 && strstr(err, "chmod 600"), "a 0644 key file was accepted");
    chmod(path, 0600);
    FILE *f = fopen(path, "w");
    fputs("ddptop-keys v1\nserver-public short\n", f);
    fclose(f);
    CHECK(keys_read(path, &r, err, sizeof err) == -1 && strstr(err, "damaged"), "damaged file: %s", err);
    unlink(path);
    rmdir(dir);
    CHECK(keys_endpoint_needs_curve("tcp://0.0.0.0:5555") && keys_endpoint_needs_curve("tcp://10.1.2.3:1"),
          "non-loopback tcp needs CURVE");
    CHECK(!keys_endpoint_needs_curve("tcp://127.0.0.1:5555") && !keys_endpoint_needs_curve("ipc:///tmp/x"),
          "loopback and ipc do not");
    TEST_END();

    TEST_BEGIN("endpoints");
    char host[64], out[128];
    int port = 0;
    CHECK(keys_tcp_split("tcp://10.0.0.1:29400", host, sizeof host, &port) == 0 && !strcmp(host, "10.0.0.1") &&
              port == 29400,
          "split v4");
    CHECK(keys_tcp_split("tcp://[::1]:7", host, sizeof host, &port) == 0 && !strcmp(host, "::1") && port == 7,
          "split v6");
    CHECK(keys_tcp_split("tcp://host", host, sizeof host, &port) == -1, "no port");
    CHECK(keys_tcp_split("tcp://h:12x", host, sizeof host, &port) == -1, "bad port");
    CHECK(keys_tel_endpoint("tcp://10.0.0.1:29400", out, sizeof out) == 0 && !strcmp(out, "tcp://10.0.0.1:29401"),
          "tel beside tcp ctl: %s", out);
    CHECK(keys_tel_endpoint("ipc:///tmp/d/ctl", out, sizeof out) == 0 && !strcmp(out, "ipc:///tmp/d/tel"), "ipc");
    CHECK(keys_tel_endpoint("tcp://h:65535", out, sizeof out) == -1, "no room for port+1");
    CHECK(keys_endpoint_needs_curve("tcp://*:5555") && keys_endpoint_needs_curve("tcp://[::]:1") &&
              !keys_endpoint_needs_curve("tcp://[::1]:1") && !keys_endpoint_needs_curve("tcp://localhost:9"),
          "loopback rules");
    TEST_END();
    CHECK_EXIT();
}
