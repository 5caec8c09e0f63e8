/* agent.c — `ddptop run --nnodes M --node-rank K (K > 0) --rdzv HOST:PORT`:
 * the agent of one node of a multi-node job. See run.h, nodes.h and
 * docs/CLUSTER.md.
 *
 * It joins node 0 (a DEALER with routing id "node-K" on node 0's control
 * endpoint, CURVE with the job's keys), waits until node 0 says launch,
 * starts this node's ranks (global rank = K*N + local rank) connected to
 * its relay (relay.h: local ipc sockets, forwarded byte for byte to node 0
 * over CURVE, so the ranks need no keys), and from then on relays their
 * telemetry and node 0's commands, reports each rank's start and exit
 * (with its log tail on failure), relays node 0's signals to its ranks,
 * and follows the shutdown rules: when node 0 goes
 * silent for nodes_silent_ms() its ranks get SIGTERM, then SIGKILL, and the
 * agent exits 1; Ctrl-C asks node 0 to stop the whole job (twice: SIGTERM
 * to this node's ranks). No screen: a line per event on stdout.
 */
#include "base/clock.h"
#include "cluster/agent.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "net/curve.h"
#include "launch/launcher.h"
#include "cluster/nodes.h"
#include "cluster/relay.h"
#include "net/zsock.h"
#include "base/signals.h"

/* After its ranks are gone, how long the agent waits for node 0's word
 * (a restart or "done") before it leaves on its own. */
#define AFTER_MS 10000


typedef struct {
    const RunOptions *o;
    void *zctx, *sock;
    CodecBuf buf;
    Launcher *l;
    LaunchConfig lc;
    Relay *relay;
    JobKeys keys;
    char host[256], ctl_ep[300], tel_ep[300], dir[256];
    char job[PROTO_STR_MED], extra[PROTO_STR_LONG], resume[PROTO_STR_LONG];
    char **args;
    int first_rank, nproc, failed;
    int64_t heard_ms;
} Agent;

static void say(const Agent *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const Agent *a, const char *fmt, ...)
{
    char t[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t, sizeof t, fmt, ap);
    va_end(ap);
    printf("ddptop node %d: %s\n", a->o->node_rank, t);
    fflush(stdout);
}

static void send_op(Agent *a, const char *op, int rank, int64_t pid, int status, const char *text)
{
    Msg m;
    char err[160];
    msg_init(&m, MSG_NODE);
    m.rank = rank;
    m.t_ns = proto_now_ns();
    snprintf(m.u.node.op, sizeof m.u.node.op, "%s", op);
    m.u.node.node = a->o->node_rank;
    m.u.node.nnodes = a->o->nnodes;
    m.u.node.nproc = a->o->nproc;
    m.u.node.pid = pid;
    m.u.node.status = status;
    snprintf(m.u.node.host, sizeof m.u.node.host, "%.*s", (int)sizeof m.u.node.host - 1, a->host);
    if (text) snprintf(m.u.node.text, sizeof m.u.node.text, "%s", text);
    zs_send(a->sock, &m, &a->buf, ZMQ_DONTWAIT, err, sizeof err);
}

/* The last lines of a failed rank's log, for node 0's events. */
static void send_tail(Agent *a, int local, int rank)
{
    char lines[3][256];
    int n = launcher_log_tail(a->l, local, lines, 3);
    for (int i = 0; i < n; i++) send_op(a, "log", rank, 0, 0, lines[i]);
}

static void on_exit_cb(void *ctx, int local, int pid, int status)
{
    Agent *a = ctx;
    int rank = a->first_rank + local;
    bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok) {
        a->failed++;
        send_tail(a, local, rank);
    }
    send_op(a, "exit", rank, pid, status, NULL);
    if (WIFSIGNALED(status)) say(a, "rank %d (pid %d) killed by signal %d", rank, pid, WTERMSIG(status));
    else say(a, "rank %d (pid %d) exited %d", rank, pid, WEXITSTATUS(status));
}

static int launch(Agent *a, int restart)
{
    char err[512];
    launcher_free(&a->l);
    a->failed = 0;   /* the node's verdict is its last run's, as node 0's is */
    int n = a->o->n_trainer_args;
    free(a->args);
    a->args = calloc((size_t)n + 3, sizeof *a->args);
    if (!a->args) return -1;
    /* a restart resumes from node 0's latest checkpoint (a shared path),
     * as node 0's own ranks do */
    if (!strncmp(a->extra, "--resume ", 9)) {
        snprintf(a->resume, sizeof a->resume, "%s", a->extra + 9);
        n = launcher_resume_args(a->o->trainer_args, n, a->resume, a->args);
    } else {
        for (int k = 0; k < n; k++) a->args[k] = a->o->trainer_args[k];
    }
    char rdzv_host[256];
    int port = 0;
    keys_tcp_split(a->ctl_ep, rdzv_host, sizeof rdzv_host, &port);
    a->lc = (LaunchConfig){.world = a->nproc, .rank_offset = a->first_rank, .global_world = a->o->nnodes * a->nproc,
                           .worker_path = a->o->worker_path, .worker_args = a->args, .n_worker_args = n,
                           .ctl_ep = relay_ctl_endpoint(a->relay), .tel_ep = relay_tel_endpoint(a->relay),
                           .job_id = a->job, .master_addr = rdzv_host,
                           .master_port = port, .log_dir = a->o->log_dir ? a->o->log_dir : a->dir,
                           .restart = restart, .device = a->o->device, .backend = a->o->backend,
                           .keys_path = NULL};
    if (launcher_start(&a->l, &a->lc, err, sizeof err)) {
        say(a, "cannot start ranks: %s", err);
        send_op(a, "error", -1, 0, 0, err);
        return -1;
    }
    for (int k = 0; k < a->nproc; k++) send_op(a, "started", a->first_rank + k, launcher_pid(a->l, k), 0, NULL);
    say(a, "started ranks %d-%d of %d (job %s%s%s, logs in %s)", a->first_rank, a->first_rank + a->nproc - 1,
        a->lc.global_world, a->job, restart ? ", restart " : "", restart ? a->extra : "", a->lc.log_dir);
    return 0;
}

/* Read what node 0 sent. Returns -1 on a fatal answer (refused, another
 * protocol), 1 for "done", 0 otherwise. */
static int read_node0(Agent *a, bool *launched, int *restart_out)
{
    for (int i = 0; i < 64; i++) {
        Msg m;
        char err[300];
        int rc = zs_recv(a->sock, &m, ZMQ_DONTWAIT, err, sizeof err);
        if (rc == 1 || rc < 0) return 0;
        if (rc == 2) {
            if (strstr(err, "protocol version")) {
                fprintf(stderr, "ddptop: node 0 at %s speaks another ddptop protocol: %s (this node speaks protocol version %d)\n",
                        a->ctl_ep, err, PROTO_VERSION);
                return -1;
            }
            continue;
        }
        a->heard_ms = mono_ms();
        if (m.kind != MSG_NODE) { msg_done(&m); continue; }
        MsgNode *nm = &m.u.node;
        int ret = 0;
        if (!strcmp(nm->op, "refused")) {
            fprintf(stderr, "ddptop: node 0 refused this node: %s\n", nm->text);
            ret = -1;
        } else if (!strcmp(nm->op, "wait")) {
            static char last[PROTO_STR_LONG];
            if (strcmp(last, nm->text)) { say(a, "joined node 0; %s", nm->text); snprintf(last, sizeof last, "%s", nm->text); }
        } else if (!strcmp(nm->op, "launch")) {
            snprintf(a->job, sizeof a->job, "%s", nm->job);
            snprintf(a->extra, sizeof a->extra, "%s", nm->text);
            *launched = true;
            *restart_out = nm->restart;
        } else if (!strcmp(nm->op, "signal")) {
            int n = launcher_signal_all(a->l, nm->signo);
            say(a, "node 0 asked for signal %d: sent to %d rank%s", nm->signo, n, n == 1 ? "" : "s");
        } else if (!strcmp(nm->op, "done")) {
            ret = 1;
        }
        msg_done(&m);
        if (ret) return ret;
    }
    return 0;
}

int agent_run(const RunOptions *o)
{
    Agent ag;
    memset(&ag, 0, sizeof ag);
    Agent *a = &ag;
    a->o = o;
    a->nproc = o->nproc;
    a->first_rank = o->node_rank * o->nproc;
    codec_buf_init(&a->buf);
    gethostname(a->host, sizeof a->host - 1);
    const char *h = getenv("DDPTOP_HOST");
    if (h && *h) snprintf(a->host, sizeof a->host, "%s", h);
    char err[512];
    int status = 1;

    signals_catch_stop(1);

    JobKeys *keys = &a->keys;
    if (!o->keys_path) {
        fprintf(stderr, "ddptop: node %d needs the job's key file: --keys FILE (node 0 wrote it; copy it here, mode 0600)\n",
                o->node_rank);
        return 2;
    }
    if (keys_read(o->keys_path, keys, err, sizeof err)) { fprintf(stderr, "ddptop: --keys: %s\n", err); return 2; }
    snprintf(a->ctl_ep, sizeof a->ctl_ep, "tcp://%s", o->rdzv);
    if (keys_tel_endpoint(a->ctl_ep, a->tel_ep, sizeof a->tel_ep)) {
        fprintf(stderr, "ddptop: --rdzv %s: expected HOST:PORT with PORT below 65535\n", o->rdzv);
        return 2;
    }
    /* the relay's sockets (and the logs without --log-dir) */
    if (zs_private_dir(a->dir, sizeof a->dir, err, sizeof err)) {
        fprintf(stderr, "ddptop: %s\n", err);
        return 1;
    }
    a->zctx = zmq_ctx_new();
    a->sock = a->zctx ? zmq_socket(a->zctx, ZMQ_DEALER) : NULL;
    char id[32];
    int idn = snprintf(id, sizeof id, "node-%d", o->node_rank), zero = 0;
    if (!a->sock || zmq_setsockopt(a->sock, ZMQ_ROUTING_ID, id, (size_t)idn) ||
        zmq_setsockopt(a->sock, ZMQ_LINGER, &zero, sizeof zero) || keys_client_socket(a->sock, keys, err, sizeof err) ||
        zmq_connect(a->sock, a->ctl_ep)) {
        fprintf(stderr, "ddptop: cannot connect to node 0 at %s: %s\n", a->ctl_ep, err[0] ? err : zmq_strerror(errno));
        goto out;
    }
    say(a, "joining node 0 at %s (%d node%s, %d rank%s each)", a->ctl_ep, o->nnodes, o->nnodes == 1 ? "" : "s", o->nproc,
        o->nproc == 1 ? "" : "s");

    /* Rendezvous: join every second until node 0 says launch. */
    int64_t t0 = mono_ms(), last_join = 0;
    bool launched = false, heard = false;
    int restart = 0;
    a->heard_ms = 0;
    while (!launched) {
        if (signals_stop_count()) { say(a, "interrupted before the job started"); goto out; }
        if (mono_ms() - last_join >= 1000) {
            send_op(a, "join", -1, getpid(), 0, NULL);
            last_join = mono_ms();
        }
        zmq_pollitem_t it = {a->sock, 0, ZMQ_POLLIN, 0};
        zmq_poll(&it, 1, 200);
        int rc = read_node0(a, &launched, &restart);
        if (rc < 0) { status = 2; goto out; }
        if (rc > 0) { say(a, "node 0 ended the job before it started"); goto out; }
        if (a->heard_ms) heard = true;
        if (!launched && mono_ms() - t0 > (int64_t)(o->rdzv_timeout_s * 1000)) {
            if (heard)
                fprintf(stderr, "ddptop: rendezvous did not complete within %g s: node 0 is still waiting for other nodes\n",
                        o->rdzv_timeout_s);
            else
                fprintf(stderr, "ddptop: no answer from node 0 at %s within %g s (is its ddptop running? the same --keys? "
                                "port %d open?)\n", a->ctl_ep, o->rdzv_timeout_s, atoi(strrchr(a->ctl_ep, ':') + 1));
            goto out;
        }
    }
    if (relay_open(&a->relay, a->zctx, a->dir, a->ctl_ep, a->tel_ep, keys, err, sizeof err)) {
        fprintf(stderr, "ddptop: %s\n", err);
        send_op(a, "error", -1, 0, 0, err);
        goto out;
    }
    if (launch(a, restart)) goto out;

    /* The job: relay, reap, watch node 0. */
    int handled = 0, rung = 0;
    int64_t rung_at = 0, all_gone_at = 0, last_beat = 0;
    bool done = false;
    for (;;) {
        int ready;
        relay_pump(a->relay, a->sock, &ready, 50);
        bool relaunch = false;
        int rc = read_node0(a, &relaunch, &restart);
        if (rc < 0) break;
        if (rc > 0) done = true;
        if (relaunch) {
            if (launcher_running(a->l) == 0 && launch(a, restart) == 0) { all_gone_at = 0; continue; }
        }
        launcher_reap(a->l, on_exit_cb, a);
        int running = launcher_running(a->l);
        if (mono_ms() - last_beat >= nodes_beat_ms()) {   /* node 0 counts a silent agent as lost */
            send_op(a, "beat", -1, 0, 0, NULL);
            last_beat = mono_ms();
        }
        while (handled < signals_stop_count()) {
            handled++;
            if (handled == 1) {
                say(a, "signal received: asking node 0 to stop the job");
                char why[64];
                snprintf(why, sizeof why, "Ctrl-C on node %d", o->node_rank);
                send_op(a, "stop", -1, 0, 0, why);
            } else {
                int n = launcher_signal_all(a->l, handled == 2 ? SIGTERM : SIGKILL);
                say(a, "signal received again: %s to %d rank%s", handled == 2 ? "SIGTERM" : "SIGKILL", n, n == 1 ? "" : "s");
            }
        }
        /* node 0 silent: this node's ranks must not outlive the job */
        if (running > 0 && mono_ms() - a->heard_ms > nodes_silent_ms()) {
            if (rung == 0) {
                rung = 1;
                rung_at = mono_ms();
                int n = launcher_signal_all(a->l, SIGTERM);
                say(a, "node 0 has been silent for %.1f s: SIGTERM to %d rank%s", nodes_silent_ms() / 1000.0, n, n == 1 ? "" : "s");
            } else if (rung == 1 && mono_ms() - rung_at > LAUNCH_KILL_GRACE_MS) {
                rung = 2;
                int n = launcher_signal_all(a->l, SIGKILL);
                say(a, "ranks ignored SIGTERM: SIGKILL to %d", n);
            }
        }
        if (running == 0) {
            if (!all_gone_at) all_gone_at = mono_ms();
            if (!rung && mono_ms() - a->heard_ms > nodes_silent_ms()) {
                say(a, "node 0 has been silent for %.1f s: leaving", nodes_silent_ms() / 1000.0);
                rung = 1;   /* not a clean end */
            }
            if (done || rung || mono_ms() - all_gone_at > AFTER_MS) break;
        }
    }
    launcher_reap(a->l, on_exit_cb, a);
    status = (a->failed == 0 && rung == 0 && launcher_running(a->l) == 0) ? 0 : 1;
    for (int ready, k = 0; k < 20 && relay_pump(a->relay, a->sock, &ready, 10) > 0; k++) {}   /* the last frames */
    say(a, "%s (relayed %llu frames up, %llu down, %llu dropped)",
        status == 0 ? "every rank of this node ended cleanly" : "this node's ranks did not all end cleanly",
        (unsigned long long)relay_frames_up(a->relay), (unsigned long long)relay_frames_down(a->relay),
        (unsigned long long)relay_drops(a->relay));
out:
    launcher_free(&a->l);
    relay_close(&a->relay);
    if (a->sock) zmq_close(a->sock);
    if (a->zctx) zmq_ctx_term(a->zctx);
    if (a->dir[0]) zs_private_dir_remove(a->dir);
    free(a->args);
    codec_buf_done(&a->buf);
    return status;
}
