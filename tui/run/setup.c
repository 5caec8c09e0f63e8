/* setup.c — sockets, keys, the job model and the per-rank rows of `ddptop
 * run`, listen's wait for the first hello, and the teardown of it all. See
 * internal.h. Main thread.
 */
#include "run/internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/signals.h"

/* The job's keys for tcp: --keys FILE when it exists; else fresh ones,
 * written to FILE (or ./ddptop-PID.keys, removed at the end) for the other
 * nodes, workers and viewers. */
int run_job_keys(Run *r, char *err, size_t errlen)
{
    const char *path = r->o->keys_path;
    if (path && access(path, F_OK) == 0) {
        if (keys_read(path, &r->keys, err, errlen)) return ERR_USAGE;
        snprintf(r->keys_file, sizeof r->keys_file, "%s", path);
        return ERR_OK;
    }
    if (keys_generate(&r->keys, err, errlen)) return ERR_FAIL;
    if (path)
        snprintf(r->keys_file, sizeof r->keys_file, "%s", path);
    else {
        snprintf(r->keys_file, sizeof r->keys_file, "ddptop-%d.keys", (int)getpid());
        r->keys_made = true;
    }
    if (keys_write(r->keys_file, &r->keys, err, errlen)) {
        r->keys_made = false;
        return ERR_USAGE;
    }
    /* absolute, so the workers (started elsewhere) find it */
    char abs[PATH_MAX];
    if (realpath(r->keys_file, abs))
        snprintf(r->keys_file, sizeof r->keys_file, "%.*s", (int)sizeof r->keys_file - 1, abs);
    return ERR_OK;
}

/* Where ddptop binds, by mode: a private ipc directory (one node), tcp on PORT
 * and PORT+1 with CURVE (node 0 of several: a numeric --rdzv address is bound as given, a name binds every interface),
 * or what `listen` was given. A bad endpoint is ERR_USAGE. */
/* HOST is an IPv4 literal (not a name to resolve; IPv6 keeps binding "*"). */
static bool numeric_host(const char *host)
{
    struct in_addr a;
    return inet_pton(AF_INET, host, &a) == 1;
}

static int endpoints(Run *r, char *bind_ctl, char *bind_tel, size_t n, char *err, size_t errlen)
{
    const RunOptions *o = r->o;
    if (o->listen_ep) {
        snprintf(bind_ctl, n, "%s", o->listen_ep);
        if (keys_tel_endpoint(o->listen_ep, bind_tel, n))
            return err_setv(ERR_USAGE, err, errlen, "listen %s: expected tcp://HOST:PORT (PORT < 65535) or ipc://PATH",
                            o->listen_ep);
        r->tcp = !strncmp(o->listen_ep, "tcp://", 6);
        snprintf(r->ctl_ep, sizeof r->ctl_ep, "%s", bind_ctl);
        snprintf(r->tel_ep, sizeof r->tel_ep, "%s", bind_tel);
        if (!r->tcp) {
            /* ipc: only in a private directory */
            char dir[300];
            snprintf(dir, sizeof dir, "%s", o->listen_ep + 6);
            char *slash = strrchr(dir, '/');
            if (slash) *slash = 0;
            struct stat st;
            if (!slash || !dir[0] || stat(dir, &st) || (st.st_mode & 077) || st.st_uid != getuid())
                return err_setv(ERR_USAGE, err, errlen,
                                "listen %s: the socket's directory must exist, be yours and private (mkdir -m 700 DIR)",
                                o->listen_ep);
        }
        return ERR_OK;
    }
    if (o->nnodes > 1) {
        char host[256];
        int port;
        char ep[300];
        snprintf(ep, sizeof ep, "tcp://%s", o->rdzv);
        if (keys_tcp_split(ep, host, sizeof host, &port) || port < 1 || port >= 65535)
            return err_setv(ERR_USAGE, err, errlen,
                            "--rdzv %s: expected HOST:PORT (PORT 1..65534; PORT+1 carries telemetry)", o->rdzv);
        r->tcp = true;
        /* An address given as a number is the one to bind (127.0.0.1 stays on
         * loopback); a host name binds every interface, as before. */
        const char *bind_host = numeric_host(host) ? host : "*";
        snprintf(bind_ctl, n, "tcp://%s:%d", bind_host, port);
        snprintf(bind_tel, n, "tcp://%s:%d", bind_host, port + 1);
        /* this node's own ranks reach the sockets where they are bound */
        const char *local = numeric_host(host) ? host : "127.0.0.1";
        snprintf(r->ctl_ep, sizeof r->ctl_ep, "tcp://%s:%d", local, port);
        snprintf(r->tel_ep, sizeof r->tel_ep, "tcp://%s:%d", local, port + 1);
        return ERR_OK;
    }
    if (zs_private_dir(r->dir, sizeof r->dir, err, errlen)) return ERR_FAIL;
    snprintf(r->ctl_ep, sizeof r->ctl_ep, "ipc://%s/ctl", r->dir);
    snprintf(r->tel_ep, sizeof r->tel_ep, "ipc://%s/tel", r->dir);
    snprintf(bind_ctl, n, "%s", r->ctl_ep);
    snprintf(bind_tel, n, "%s", r->tel_ep);
    return ERR_OK;
}

/* The ranks' telemetry streams beside tel (ipc only): not binding one is no
 * error, the ranks then send over ZeroMQ's tel (r->tss_note says why). A
 * connection a rank, a little more for restarts and strays; listen does
 * not know the world yet. */
static void open_stream(Run *r)
{
    char path[300], err[256];
    if (r->tcp || tstream_path(r->tel_ep, path, sizeof path)) return;
    if (getenv("DDPTOP_TEL_STREAM") && !strcmp(getenv("DDPTOP_TEL_STREAM"), "0")) return;
    int max = r->o->listen_ep ? 2 * 4096 + 64 : 2 * r->o->nproc + 64;
    if (tss_open(&r->tss, path, max, err, sizeof err))
        snprintf(r->tss_note, sizeof r->tss_note, "%.150s; the ranks send over ZeroMQ", err);
}

int run_setup_sockets(Run *r, char *err, size_t errlen)
{
    /* Directories a ddptop killed with -9 left behind (sockets, logs): ours to remove. */
    zs_private_dir_sweep();
    char bind_ctl[300], bind_tel[300];
    err[0] = 0;
    int st = endpoints(r, bind_ctl, bind_tel, sizeof bind_ctl, err, errlen);
    if (st) return st;
    if (r->o->log_dir == NULL && !r->dir[0] && zs_private_dir(r->dir, sizeof r->dir, err, errlen)) return ERR_FAIL;
    r->zctx = zmq_ctx_new();
    /* Each message in its own allocation of its size: with zero-copy
     * receive (the default) a queued burst of ~2 KB keeps the whole 8 KB
     * read buffer it came in alive, ~9.5 KB a frame (an 8 s stall at 1024
     * ranks: +1.5 GB, docs/BENCHMARKS.md). A draft option libzmq 4.3
     * honours; where it does not, nothing changes. */
    if (r->zctx) zmq_ctx_set(r->zctx, RUN_ZMQ_ZERO_COPY_RECV, 0);
    if (r->zctx && r->tcp) {
        if ((st = run_job_keys(r, err, errlen))) return st;
        if (zap_start(&r->zap, r->zctx, &r->keys, err, errlen)) return ERR_FAIL;
    }
    r->ctl = r->zctx ? zmq_socket(r->zctx, ZMQ_ROUTER) : NULL;
    r->tel = r->zctx ? zmq_socket(r->zctx, ZMQ_PULL) : NULL;
    if (!r->ctl || !r->tel) return err_set(err, errlen, "zeromq: %s", zmq_strerror(errno));
    /* Per peer: RUN_TEL_RCVHWM frames queued here, and no frame above what
     * the decoder accepts: ZeroMQ drops a peer that sends one, before a
     * byte of it is buffered. Together they bound what a flood can hold.
     * Past the queue a peer's frames wait in the kernel and in its own
     * send queue (a worker's holds 10000): a frontend that falls behind
     * holds a few seconds of each rank, not minutes (docs/DECISIONS.md). */
    int hwm = RUN_TEL_RCVHWM, zero = 0;
    int64_t maxmsg = (int64_t)PROTO_MAX_FRAME_BYTES;
    zmq_setsockopt(r->tel, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt(r->tel, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    zmq_setsockopt(r->ctl, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    /* No ZMQ_ROUTER_HANDOVER: while a rank's process is connected nobody
     * else can take its routing id (inbox.c); a restarted rank gets it
     * once the old connection is gone, which it is by the restart. */
    zmq_setsockopt(r->ctl, ZMQ_LINGER, &zero, sizeof zero);
    viewers_setup_router(r->ctl);
    zmq_setsockopt(r->tel, ZMQ_LINGER, &zero, sizeof zero);
    if (r->tcp &&
        (keys_server_socket(r->ctl, &r->keys, err, errlen) || keys_server_socket(r->tel, &r->keys, err, errlen)))
        return ERR_FAIL;
    /* an address in use or not ours is the user's to change: exit 2 */
    if (zs_bind(r->ctl, bind_ctl)) {
        /* ZeroMQ binds an address or an interface, never a name to look up */
        bool named = errno == ENODEV && !strncmp(bind_ctl, "tcp://", 6);
        return err_setv(ERR_USAGE, err, errlen, "cannot bind %s: %s%s", bind_ctl, zmq_strerror(errno),
                        named ? " (bind a numeric address or an interface: tcp://127.0.0.1:PORT, tcp://0.0.0.0:PORT)"
                              : "");
    }
    /* a listen's ipc files are at the user's path, not in a directory of
     * ours that teardown removes: they are removed one by one */
    bool user_ipc = r->o->listen_ep && !r->tcp;
    r->own_ipc[0] = user_ipc;
    if (zs_bind(r->tel, bind_tel))
        return err_setv(ERR_USAGE, err, errlen, "cannot bind %.150s (telemetry, beside the control socket): %s",
                        bind_tel, zmq_strerror(errno));
    r->own_ipc[1] = user_ipc;
    open_stream(r);
    return ERR_OK;
}

/* Everything sized by the world (known once the first hello came, for listen). */
int run_setup_job(Run *r, int w, char *err, size_t errlen)
{
    const RunOptions *o = r->o;
    if (o->publish_ep) {
        /* tcp with --keys: CURVE, so the job's key file is needed to read it */
        bool curve = o->keys_path && !strncmp(o->publish_ep, "tcp://", 6);
        /* exit 1, as ever, for a key file found bad this late: run_job_keys'
         * ERR_USAGE is not passed on */
        if (curve && !r->zap && (run_job_keys(r, err, errlen) || zap_start(&r->zap, r->zctx, &r->keys, err, errlen)))
            return ERR_FAIL;
        if (!(r->pub = publisher_open_keys(r->zctx, o->publish_ep, 0, curve ? &r->keys : NULL, err, errlen)))
            return ERR_FAIL;
        /* tcp://127.0.0.1:* has its port only now: subscribers need it */
        fprintf(stderr, "ddptop: publishing on %s\n", publisher_endpoint(r->pub));
    }
    if (o->record_path && !(r->rec = recorder_open(o->record_path, w, o->description, err, errlen))) return ERR_FAIL;
    if (!r->store) r->store = store_new();
    r->job = job_new(w, mono_ns());
    r->viewers = viewers_new(w);
    if (o->nnodes > 1) r->nodes = nodes_new(o->nnodes, o->nproc, r->ctl);
    r->rk = calloc((size_t)w, sizeof *r->rk);
    err[0] = '\0';
    if (run_watch_hangs(r, w, err, errlen)) return ERR_FAIL;
    int st = bench_from_env(w, &r->bench, err, errlen);
    if (st) return st;
    if (!r->store || !r->job || !r->rk || !r->viewers || (o->nnodes > 1 && !r->nodes))
        return err_set(err, errlen, "out of memory");
    if (r->tss_note[0]) job_event(r->job, mono_ns(), wall_ns(), -1, EV_WARN, "telemetry stream: %s", r->tss_note);
    r->job->max_restarts = o->max_restarts;
    r->job->bare = o->no_inject || o->target == RUN_COMMAND;
    return ERR_OK;
}

int run_watch_hangs(Run *r, int world, char *err, size_t errlen)
{
    const RunOptions *o = r->o;
    hangwatch_done(&r->hw);
    if (hangwatch_init(&r->hw, world, o->hang_after_s > 0 ? o->hang_after_s : 10.0))
        return err_set(err, errlen, "out of memory");
    return ERR_OK;
}

void run_teardown(Run *r)
{
    hangwatch_done(&r->hw);
    launcher_free(&r->l);
    store_free(&r->store);
    if (r->rec) {
        char err[512];
        unsigned long long n = (unsigned long long)recorder_records(r->rec);
        bool cut = recorder_failed(r->rec); /* n is then what reads back, up to the error */
        r->rec_lost = cut;
        if (recorder_close(&r->rec, err, sizeof err)) {
            fprintf(stderr, "ddptop: --record: %s\n", err);
            r->rec_lost = true;
        } else
            fprintf(stderr, "ddptop: recorded %llu records to %s%s\n", n, r->o->record_path,
                    cut ? " (then a write failed: the recording ends there)" : "");
    }
    if (r->pub) {
        if (publisher_drops(r->pub))
            fprintf(stderr, "ddptop: --publish: %llu frames could not be published at all\n",
                    (unsigned long long)publisher_drops(r->pub));
        publisher_close(&r->pub); /* before zmq_ctx_term, which would wait on it */
    }
    viewers_free(&r->viewers);
    nodes_free(&r->nodes);
    tss_close(&r->tss); /* removes its socket file */
    if (r->ctl) zmq_close(r->ctl);
    if (r->tel) zmq_close(r->tel);
    if (r->own_ipc[0]) unlink(r->ctl_ep + 6);
    if (r->own_ipc[1]) unlink(r->tel_ep + 6);
    zap_stop(&r->zap);
    if (r->zctx) zmq_ctx_term(r->zctx);
    if (r->keys_made) unlink(r->keys_file);
    static const char *const sockets[] = { "ctl", "tel", NULL };
    /* the newest hang report (report.c); --json: the summary's "hang_report"
     * says it, and a line here would break a reader that takes stderr along */
    const char *report = r->job && r->job->hang_report[0] && !r->o->json ? r->job->hang_report : NULL;
    if (r->o->log_dir && report) fprintf(stderr, "ddptop: hang report in %s (README.txt there)\n", report);
    if (r->dir[0] && !r->o->log_dir && r->keep_dir && r->launched_any) {
        /* the events name these logs: a failed run keeps them */
        zs_private_dir_keep(r->dir, sockets);
        fprintf(stderr, "ddptop: the ranks' logs are kept in %s\n", r->dir);
        if (report) fprintf(stderr, "ddptop: hang report in %s (README.txt there)\n", report);
    } else if (r->dir[0] && !r->o->log_dir)
        zs_private_dir_remove(r->dir);
    else if (r->dir[0]) {
        char p[320];
        snprintf(p, sizeof p, "%s/ctl", r->dir);
        unlink(p);
        snprintf(p, sizeof p, "%s/tel", r->dir);
        unlink(p);
        rmdir(r->dir);
    }
    codec_buf_done(&r->buf);
    free(r->rk);
    free(r->restart_args);
    bench_free(&r->bench);
    job_free(&r->job);
}

static void copy_frame(void *ctx, const void *frame, size_t len, const Msg *m, int rc)
{
    (void)m;
    (void)rc;
    CodecBuf *b = ctx;
    codec_buf_reset(b);
    if (len > b->cap) {
        uint8_t *p = realloc(b->data, len);
        if (!p) return;
        b->data = p;
        b->cap = len;
    }
    memcpy(b->data, frame, len);
    b->len = len;
}

/* Store requests are served meanwhile: the first hello may come only after
 * a rendezvous through the store. A poll error leaves err empty, as it
 * always has. */
int run_listen_first_hello(Run *r, RunHello *h, int *world, char *err, size_t errlen)
{
    Msg *first = &h->msg;
    *world = 0;
    fprintf(stderr, "ddptop: waiting for workers (DDPTOP_CONNECT=%s%s%s); Ctrl-C to leave\n", r->o->listen_ep,
            r->tcp ? " DDPTOP_KEYS=" : "", r->tcp ? r->keys_file : "");
    for (;;) {
        err[0] = '\0'; /* a skipped frame's reason is no error of ours */
        if (signals_stop_count()) return ERR_OK;
        zmq_pollitem_t it = { r->ctl, 0, ZMQ_POLLIN, 0 };
        if (zmq_poll(&it, 1, 200) < 0 && errno != EINTR) return ERR_FAIL;
        int rc =
            zs_recv_from_tap(r->ctl, h->ident, &h->ident_len, first, ZMQ_DONTWAIT, copy_frame, &h->frame, err, errlen);
        if (rc == 1) continue;
        if (rc < 0) return ERR_FAIL;
        if (rc == 2) continue;
        if (first->kind == MSG_HELLO && first->rank >= 0 && first->u.hello.world >= 1 &&
            first->rank < first->u.hello.world && first->u.hello.world <= 4096) {
            h->have = true;
            *world = first->u.hello.world;
            return ERR_OK;
        }
        if (first->kind == MSG_SET || first->kind == MSG_GET || first->kind == MSG_WAIT)
            store_handle(r->store, r->ctl, h->ident, h->ident_len, first, mono_ms(), &r->buf);
        msg_done(first);
    }
}
