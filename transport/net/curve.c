/* keys.c — CURVE keys, key files and the ZAP handler. See keys.h.
 *
 * The ZAP handler is a thread with a ROUTER socket on the context's well-known
 * inproc endpoint; libzmq asks it about every CURVE handshake on sockets
 * that set ZMQ_ZAP_DOMAIN. It must be bound before any server socket binds.
 */
#include "net/curve.h"
#include "net/zsock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "base/file.h"

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define ZAP_DOMAIN   "ddptop"
#define FILE_MAGIC   "ddptop-keys v1"

int keys_generate(JobKeys *k, char *err, size_t errlen)
{
    if (!zmq_has("curve")) {
        snprintf(err, errlen, "this libzmq has no CURVE support");
        return -1;
    }
    if (zmq_curve_keypair(k->server.pub, k->server.sec) || zmq_curve_keypair(k->client.pub, k->client.sec)) {
        snprintf(err, errlen, "cannot make CURVE keys: %s", zmq_strerror(errno));
        return -1;
    }
    return 0;
}

int keys_write(const char *path, const JobKeys *k, char *err, size_t errlen)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(err, errlen, "cannot create key file %s: %s", path, strerror(errno));
        return -1;
    }
    char buf[512];
    int n = snprintf(buf, sizeof buf, "%s\nserver-public %s\nserver-secret %s\nclient-public %s\nclient-secret %s\n",
                     FILE_MAGIC, k->server.pub, k->server.sec, k->client.pub, k->client.sec);
    int ok = write(fd, buf, (size_t)n) == n && fsync(fd) == 0;
    close(fd);
    if (!ok) {
        snprintf(err, errlen, "cannot write key file %s", path);
        unlink(path);
        return -1;
    }
    return 0;
}

static int z85_ok(const char *s)
{
    if (strlen(s) != 40) return 0;
    uint8_t bin[32];
    return zmq_z85_decode(bin, s) != NULL;
}

int keys_read(const char *path, JobKeys *k, char *err, size_t errlen)
{
    char ferr[256];
    int fd = file_open_regular(path, ferr, sizeof ferr);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open key file %s", ferr);
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) || (st.st_mode & 077)) {
        close(fd);
        snprintf(err, errlen, "key file %s is readable by others (mode %03o): chmod 600 it", path,
                 (unsigned)(st.st_mode & 0777));
        return -1;
    }
    char buf[1024];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) {
        snprintf(err, errlen, "key file %s is empty", path);
        return -1;
    }
    buf[n] = 0;
    memset(k, 0, sizeof *k);
    char magic[32] = "", name[32], val[64];
    int off = 0, got = 0;
    if (sscanf(buf, "%31[^\n]\n%n", magic, &off) < 1 || strcmp(magic, FILE_MAGIC)) {
        snprintf(err, errlen, "%s is not a ddptop key file", path);
        return -1;
    }
    const char *p = buf + off;
    int used;
    while (sscanf(p, "%31s %63s\n%n", name, val, &used) == 2) {
        char *dst = !strcmp(name, "server-public")   ? k->server.pub
                    : !strcmp(name, "server-secret") ? k->server.sec
                    : !strcmp(name, "client-public") ? k->client.pub
                    : !strcmp(name, "client-secret") ? k->client.sec
                                                     : NULL;
        if (dst && strlen(val) == 40) {
            memcpy(dst, val, 41);
            got++;
        }
        p += used;
    }
    if (got != 4 || !z85_ok(k->server.pub) || !z85_ok(k->server.sec) || !z85_ok(k->client.pub) ||
        !z85_ok(k->client.sec)) {
        snprintf(err, errlen, "key file %s is damaged: expected four Z85 keys", path);
        return -1;
    }
    return 0;
}

int keys_server_socket(void *sock, const JobKeys *k, char *err, size_t errlen)
{
    int one = 1;
    if (zmq_setsockopt(sock, ZMQ_CURVE_SERVER, &one, sizeof one) ||
        zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, k->server.sec, 40) ||
        zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, ZAP_DOMAIN, strlen(ZAP_DOMAIN))) {
        snprintf(err, errlen, "CURVE server setup: %s", zmq_strerror(errno));
        return -1;
    }
    return 0;
}

int keys_client_socket(void *sock, const JobKeys *k, char *err, size_t errlen)
{
    if (zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, k->server.pub, 40) ||
        zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, k->client.pub, 40) ||
        zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, k->client.sec, 40)) {
        snprintf(err, errlen, "CURVE client setup: %s", zmq_strerror(errno));
        return -1;
    }
    return 0;
}

struct ZapHandler {
    pthread_t th;
    void *rep;
    void *zctx;
    uint8_t allowed[32];
    volatile unsigned long refused;
    volatile int stop;
};

/* One ZAP request arrives on our ROUTER as [peer][empty][version][request
 * id][domain][address][identity][mechanism][credentials...]. A ROUTER, not
 * REP: a REP socket is left in its "must send" state when the requesting
 * session vanishes mid-handshake, and then refuses every later request. */
#define ZAP_PARTS 12
/* A receive that times out between requests must not start the drain
 * loop below: that loop would swallow the next request whole, and its
 * session would wait for a reply forever (every later handshake then
 * seemed to hang after the first refusal). */
static void *zap_main(void *arg)
{
    ZapHandler *z = arg;
    int timeout = 100;
    zmq_setsockopt(z->rep, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    while (!z->stop) {
        zmq_msg_t part[ZAP_PARTS];
        int n = 0, more = 1;
        while (more && n < ZAP_PARTS) {
            zmq_msg_init(&part[n]);
            if (zmq_msg_recv(&part[n], z->rep, 0) < 0) {
                zmq_msg_close(&part[n]);
                more = 0;
                break;
            }
            more = zmq_msg_more(&part[n]);
            n++;
        }
        if (more) zs_drain(z->rep); /* an over-long request */
        if (n >= 4 && zmq_msg_size(&part[1]) == 0) {
            /* part[2] version, [3] request id, [4] domain, [5] address,
             * [6] routing id, [7] mechanism, [8] client key */
            bool ok = n >= 9 && zmq_msg_size(&part[7]) == 5 && !memcmp(zmq_msg_data(&part[7]), "CURVE", 5) &&
                      zmq_msg_size(&part[8]) == 32 && !memcmp(zmq_msg_data(&part[8]), z->allowed, 32);
            if (!ok) z->refused++;
            const char *code = ok ? "200" : "400", *text = ok ? "OK" : "unknown client key";
            zmq_send(z->rep, zmq_msg_data(&part[0]), zmq_msg_size(&part[0]), ZMQ_SNDMORE);
            zmq_send(z->rep, "", 0, ZMQ_SNDMORE);
            zmq_send(z->rep, "1.0", 3, ZMQ_SNDMORE);
            zmq_send(z->rep, zmq_msg_data(&part[3]), zmq_msg_size(&part[3]), ZMQ_SNDMORE);
            zmq_send(z->rep, code, 3, ZMQ_SNDMORE);
            zmq_send(z->rep, text, strlen(text), ZMQ_SNDMORE);
            zmq_send(z->rep, "", 0, ZMQ_SNDMORE); /* user id */
            zmq_send(z->rep, "", 0, 0);           /* metadata */
        }
        for (int i = 0; i < n; i++) zmq_msg_close(&part[i]);
    }
    return NULL;
}

int zap_start(ZapHandler **out, void *zctx, const JobKeys *k, char *err, size_t errlen)
{
    ZapHandler *z = calloc(1, sizeof *z);
    if (!z) {
        snprintf(err, errlen, "zap: out of memory");
        return -1;
    }
    if (!zmq_z85_decode(z->allowed, k->client.pub)) {
        free(z);
        snprintf(err, errlen, "zap: bad client key");
        return -1;
    }
    z->zctx = zctx;
    z->rep = zmq_socket(zctx, ZMQ_ROUTER);
    int zero = 0;
    if (!z->rep || zmq_setsockopt(z->rep, ZMQ_LINGER, &zero, sizeof zero) || zmq_bind(z->rep, ZAP_ENDPOINT)) {
        snprintf(err, errlen, "zap: cannot bind %s: %s", ZAP_ENDPOINT, zmq_strerror(errno));
        if (z->rep) zmq_close(z->rep);
        free(z);
        return -1;
    }
    if (pthread_create(&z->th, NULL, zap_main, z)) {
        zmq_close(z->rep);
        free(z);
        snprintf(err, errlen, "zap: cannot start its thread");
        return -1;
    }
    *out = z;
    return 0;
}

unsigned long zap_refused(const ZapHandler *z) { return z->refused; }

void zap_stop(ZapHandler **pz)
{
    ZapHandler *z = pz ? *pz : NULL;
    if (!z) return;
    z->stop = 1;
    pthread_join(z->th, NULL);
    zmq_close(z->rep);
    free(z);
    *pz = NULL;
}

int keys_tcp_split(const char *ep, char *host, size_t hostlen, int *port)
{
    if (!ep || strncmp(ep, "tcp://", 6)) return -1;
    const char *h = ep + 6, *colon = strrchr(h, ':');
    size_t n = colon ? (size_t)(colon - h) : 0;
    if (!colon || n == 0 || n >= hostlen) return -1;
    char *end;
    long p = strtol(colon + 1, &end, 10);
    if (*end || end == colon + 1 || p < 0 || p > 65535) return -1;
    if (h[0] == '[' && n >= 2 && h[n - 1] == ']') {
        h++;
        n -= 2;
    }
    memcpy(host, h, n);
    host[n] = '\0';
    *port = (int)p;
    return 0;
}

bool keys_host_is_loopback(const char *host)
{
    if (!strcasecmp(host, "localhost")) return true;
    struct in_addr a4;
    if (inet_pton(AF_INET, host, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
    struct in6_addr a6;
    if (inet_pton(AF_INET6, host, &a6) == 1) return IN6_IS_ADDR_LOOPBACK(&a6);
    return false; /* "*", 0.0.0.0, interface names, other hosts */
}

bool keys_endpoint_needs_curve(const char *ep)
{
    char host[256];
    int port;
    if (!ep || strncmp(ep, "tcp://", 6)) return false;
    if (keys_tcp_split(ep, host, sizeof host, &port)) return true;
    return !keys_host_is_loopback(host);
}

int keys_tel_endpoint(const char *ctl_ep, char *out, size_t outlen)
{
    char host[256];
    int port;
    if (!strncmp(ctl_ep, "tcp://", 6)) {
        if (keys_tcp_split(ctl_ep, host, sizeof host, &port) || port == 0 || port >= 65535) return -1;
        bool v6 = strchr(host, ':') != NULL;
        return snprintf(out, outlen, "tcp://%s%s%s:%d", v6 ? "[" : "", host, v6 ? "]" : "", port + 1) < (int)outlen
                   ? 0
                   : -1;
    }
    if (!strncmp(ctl_ep, "ipc://", 6)) {
        size_t n = strlen(ctl_ep);
        if (n > 4 && !strcmp(ctl_ep + n - 4, "/ctl"))
            return snprintf(out, outlen, "%.*s/tel", (int)(n - 4), ctl_ep) < (int)outlen ? 0 : -1;
        return snprintf(out, outlen, "%s.tel", ctl_ep) < (int)outlen ? 0 : -1;
    }
    return -1;
}
