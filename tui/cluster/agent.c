/* agent.c — `ddptop run --nnodes M --node-rank K (K > 0) --rdzv HOST:PORT`:
 * the agent of one node of a multi-node job. See run.h, nodes.h and
 * docs/CLUSTER.md.
 *
 * It joins node 0 (a DEALER with routing id "node-K" on node 0's control
 * endpoint, CURVE with the job's keys), waits until node 0 says launch,
 * starts this node's ranks (global rank = K*N + local rank; the trainer, a
 * script or a command, with torchrun's environment, as node 0 does) connected to
 * its relay (relay.h: local ipc sockets, forwarded byte for byte to node 0
 * over CURVE, so the ranks need no keys), and from then on relays their
 * telemetry and node 0's commands, reports each rank's start and exit
 * (with its log tail on failure), relays node 0's signals to its ranks,
 * and follows the shutdown rules: when node 0 goes
 * silent for nodes_silent_ms() its ranks get SIGTERM, then SIGKILL, and the
 * agent exits 1; Ctrl-C asks node 0 to stop the whole job (twice: SIGTERM
 * to this node's ranks). No screen: a line per event on stdout.
 */
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

#include "base/clock.h"
#include "base/err.h"
#include "base/signals.h"
#include "cluster/nodes.h"
#include "cluster/relay.h"
#include "launch/launcher.h"
#include "net/curve.h"
#include "net/zsock.h"

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
    bool launched_any;              /* ranks were started: their logs are in dir (no --log-dir) */
    int64_t spent;                  /* node 0's launch: DDPTOP_FAULTS_SPENT, -1 for none */
    int node0_exit;                 /* node 0's "done": the job's exit status, -1 until then */
    char node0_why[PROTO_STR_LONG]; /* and its verdict */
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
    if (WIFSIGNALED(status))
        say(a, "rank %d (pid %d) killed by signal %d", rank, pid, WTERMSIG(status));
    else
        say(a, "rank %d (pid %d) exited %d", rank, pid, WEXITSTATUS(status));
}

static int launch(Agent *a, int restart)
{
    char err[512];
    launcher_free(&a->l);
    a->failed = 0; /* the node's verdict is its last run's, as node 0's is */
    int n = a->o->n_trainer_args;
    free(a->args);
    a->args = calloc((size_t)n + 3, sizeof *a->args);
    if (!a->args) return -1;
    /* a restart resumes from node 0's latest checkpoint (a shared path),
     * as node 0's own ranks do */
    if (!strncmp(a->extra, "--resume ", 9) && a->o->target == RUN_TRAINER && a->o->trainer_resumes) {
        snprintf(a->resume, sizeof a->resume, "%s", a->extra + 9);
        n = launcher_resume_args(a->o->trainer_args, n, a->resume, a->args);
    } else {
        for (int k = 0; k < n; k++) a->args[k] = a->o->trainer_args[k];
    }
    char rdzv_host[256];
    int port = 0;
    keys_tcp_split(a->ctl_ep, rdzv_host, sizeof rdzv_host, &port);
    port += 2; /* node 0's MASTER_PORT (spawn.c): PORT and PORT+1 are ddptop's */
    a->lc = (LaunchConfig){ .world = a->nproc,
                            .rank_offset = a->first_rank,
                            .global_world = a->o->nnodes * a->nproc,
                            .worker_path = a->o->worker_path,
                            .worker_args = a->args,
                            .n_worker_args = n,
                            .ctl_ep = relay_ctl_endpoint(a->relay),
                            .tel_ep = relay_tel_endpoint(a->relay),
                            .job_id = a->job,
                            .master_addr = rdzv_host,
                            .master_port = port,
                            .log_dir = a->o->log_dir ? a->o->log_dir : a->dir,
                            .restart = restart,
                            .device = a->o->device,
                            .backend = a->o->backend,
                            .keys_path = NULL,
                            .node_rank = a->o->node_rank,
                            .nnodes = a->o->nnodes,
                            .max_restarts = a->o->max_restarts,
                            .pythonpath = a->o->adapter_dir,
                            /* a restart hands every node what node 0's ranks get */
                            .set_faults_spent = restart > 0 && a->spent >= 0,
                            .faults_spent = a->spent };
    if (launcher_start(&a->l, &a->lc, err, sizeof err)) {
        say(a, "cannot start ranks: %s", err);
        send_op(a, "error", -1, 0, 0, err);
        return -1;
    }
    a->launched_any = a->launched_any || a->nproc > 0;
    for (int k = 0; k < a->nproc; k++) send_op(a, "started", a->first_rank + k, launcher_pid(a->l, k), 0, NULL);
    say(a, "started ranks %d-%d of %d (job %s%s%s, logs in %s)", a->first_rank, a->first_rank + a->nproc - 1,
        a->lc.global_world, a->job, restart ? ", restart " : "", restart ? a->extra : "", a->lc.log_dir);
    return 0;
}

/* Read what node 0 sent; *done when it said the job is over. Returns
 * ERR_USAGE for a fatal answer (refused, another protocol: said on stderr),
 * else ERR_OK. */
static int read_node0(Agent *a, bool *launched, int *restart_out, bool *done)
{
    for (int i = 0; i < 64; i++) {
        Msg m;
        char err[300];
        int rc = zs_recv(a->sock, &m, ZMQ_DONTWAIT, err, sizeof err);
        if (rc == 1 || rc < 0) return ERR_OK;
        if (rc == 2) {
            /* zs_recv tells another version from other bad frames only in
             * its text (transport/wire/codec_decode.c) */
            if (strstr(err, "protocol version")) {
                fprintf(
                    stderr,
                    "ddptop: node 0 at %s speaks another ddptop protocol: %s (this node speaks protocol version %d)\n",
                    a->ctl_ep, err, PROTO_VERSION);
                return ERR_USAGE;
            }
            continue;
        }
        a->heard_ms = mono_ms();
        if (m.kind != MSG_NODE) {
            msg_done(&m);
            continue;
        }
        MsgNode *nm = &m.u.node;
        int ret = ERR_OK;
        bool enough = false; /* refused or done: the rest can wait */
        if (!strcmp(nm->op, "refused")) {
            fprintf(stderr, "ddptop: node 0 refused this node: %s\n", nm->text);
            ret = ERR_USAGE;
            enough = true;
        } else if (!strcmp(nm->op, "wait")) {
            static char last[PROTO_STR_LONG];
            if (strcmp(last, nm->text)) {
                say(a, "joined node 0; %s", nm->text);
                snprintf(last, sizeof last, "%s", nm->text);
            }
        } else if (!strcmp(nm->op, "launch")) {
            snprintf(a->job, sizeof a->job, "%s", nm->job);
            snprintf(a->extra, sizeof a->extra, "%s", nm->text);
            a->spent = nm->spent;
            *launched = true;
            *restart_out = nm->restart;
        } else if (!strcmp(nm->op, "signal")) {
            int n = launcher_signal_all(a->l, nm->signo);
            say(a, "node 0 asked for signal %d: sent to %d rank%s", nm->signo, n, n == 1 ? "" : "s");
        } else if (!strcmp(nm->op, "done")) {
            *done = enough = true;
            a->node0_exit = nm->status;
            snprintf(a->node0_why, sizeof a->node0_why, "%s", nm->text);
        }
        msg_done(&m);
        if (enough) return ret;
    }
    return ERR_OK;
}

/* The job's keys, node 0's endpoints, a private directory and the DEALER
 * connected to node 0. ERR_USAGE for a missing or bad key file or --rdzv. */
static int agent_open(Agent *a, char *err, size_t errlen)
{
    const RunOptions *o = a->o;
    char why[300] = "";
    if (!o->keys_path)
        return err_setv(ERR_USAGE, err, errlen,
                        "node %d needs the job's key file: --keys FILE (node 0 wrote it; copy it "
                        "here, mode 0600)",
                        o->node_rank);
    if (keys_read(o->keys_path, &a->keys, why, sizeof why)) return err_setv(ERR_USAGE, err, errlen, "--keys: %s", why);
    snprintf(a->ctl_ep, sizeof a->ctl_ep, "tcp://%s", o->rdzv);
    if (keys_tel_endpoint(a->ctl_ep, a->tel_ep, sizeof a->tel_ep))
        return err_setv(ERR_USAGE, err, errlen, "--rdzv %s: expected HOST:PORT with PORT below 65535", o->rdzv);
    /* the relay's sockets (and the logs without --log-dir) */
    if (zs_private_dir(a->dir, sizeof a->dir, err, errlen)) return ERR_FAIL;
    a->zctx = zmq_ctx_new();
    a->sock = a->zctx ? zmq_socket(a->zctx, ZMQ_DEALER) : NULL;
    char id[32];
    int idn = snprintf(id, sizeof id, "node-%d", o->node_rank), zero = 0;
    if (!a->sock || zmq_setsockopt(a->sock, ZMQ_ROUTING_ID, id, (size_t)idn) ||
        zmq_setsockopt(a->sock, ZMQ_LINGER, &zero, sizeof zero) ||
        keys_client_socket(a->sock, &a->keys, why, sizeof why) || zmq_connect(a->sock, a->ctl_ep))
        return err_set(err, errlen, "cannot connect to node 0 at %s: %s", a->ctl_ep,
                       why[0] ? why : zmq_strerror(errno));
    say(a, "joining node 0 at %s (%d node%s, %d rank%s each)", a->ctl_ep, o->nnodes, o->nnodes == 1 ? "" : "s",
        o->nproc, o->nproc == 1 ? "" : "s");
    return ERR_OK;
}

/* Join every second until node 0 says launch (*restart: which run).
 * ERR_USAGE when node 0 refuses this node; ERR_FAIL on a signal, node 0
 * ending the job, or --rdzv-timeout. */
static int rendezvous(Agent *a, int *restart, char *err, size_t errlen)
{
    const RunOptions *o = a->o;
    int64_t t0 = mono_ms(), last_join = 0;
    bool launched = false, heard = false, done = false;
    a->heard_ms = 0;
    while (!launched) {
        if (signals_stop_count()) {
            say(a, "interrupted before the job started");
            return ERR_FAIL;
        }
        if (mono_ms() - last_join >= 1000) {
            send_op(a, "join", -1, getpid(), 0, NULL);
            last_join = mono_ms();
        }
        zmq_pollitem_t it = { a->sock, 0, ZMQ_POLLIN, 0 };
        zmq_poll(&it, 1, 200);
        int st = read_node0(a, &launched, restart, &done);
        if (st) return st;
        if (done) {
            say(a, "node 0 ended the job before it started");
            return ERR_FAIL;
        }
        if (a->heard_ms) heard = true;
        if (launched || mono_ms() - t0 <= (int64_t)(o->rdzv_timeout_s * 1000)) continue;
        if (heard)
            return err_set(err, errlen,
                           "rendezvous did not complete within %g s: node 0 is still waiting for other nodes",
                           o->rdzv_timeout_s);
        return err_set(err, errlen,
                       "no answer from node 0 at %s within %g s (is its ddptop running? the same --keys? "
                       "port %d open?)",
                       a->ctl_ep, o->rdzv_timeout_s, atoi(strrchr(a->ctl_ep, ':') + 1));
    }
    return ERR_OK;
}

/* Ctrl-C: the first asks node 0 to stop the whole job, the next ones
 * signal this node's ranks (SIGTERM, then SIGKILL). */
static void take_signals(Agent *a, int *handled)
{
    while (*handled < signals_stop_count()) {
        (*handled)++;
        if (*handled == 1) {
            say(a, "signal received: asking node 0 to stop the job");
            char why[64];
            snprintf(why, sizeof why, "Ctrl-C on node %d", a->o->node_rank);
            send_op(a, "stop", -1, 0, 0, why);
        } else {
            int n = launcher_signal_all(a->l, *handled == 2 ? SIGTERM : SIGKILL);
            say(a, "signal received again: %s to %d rank%s", *handled == 2 ? "SIGTERM" : "SIGKILL", n,
                n == 1 ? "" : "s");
        }
    }
}

/* The job: relay, reap, watch node 0, until this node's ranks are gone and
 * node 0 is done (or silent, or AFTER_MS passed). ERR_OK only when every
 * rank of this node ended cleanly. */
static int run_ranks(Agent *a, int restart)
{
    int handled = 0, rung = 0;
    int64_t rung_at = 0, all_gone_at = 0, last_beat = 0;
    bool done = false;
    for (;;) {
        int ready;
        relay_pump(a->relay, a->sock, &ready, 50);
        bool relaunch = false;
        if (read_node0(a, &relaunch, &restart, &done)) break;
        if (relaunch) {
            if (launcher_running(a->l) == 0 && launch(a, restart) == 0) {
                all_gone_at = 0;
                continue;
            }
        }
        launcher_reap(a->l, on_exit_cb, a);
        int running = launcher_running(a->l);
        if (mono_ms() - last_beat >= nodes_beat_ms()) { /* node 0 counts a silent agent as lost */
            send_op(a, "beat", -1, 0, 0, NULL);
            last_beat = mono_ms();
        }
        take_signals(a, &handled);
        /* node 0 silent: this node's ranks must not outlive the job */
        if (running > 0 && mono_ms() - a->heard_ms > nodes_silent_ms()) {
            if (rung == 0) {
                rung = 1;
                rung_at = mono_ms();
                int n = launcher_signal_all(a->l, SIGTERM);
                say(a, "node 0 has been silent for %.1f s: SIGTERM to %d rank%s", nodes_silent_ms() / 1000.0, n,
                    n == 1 ? "" : "s");
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
                rung = 1; /* not a clean end */
            }
            if (done || rung || mono_ms() - all_gone_at > AFTER_MS) break;
        }
    }
    launcher_reap(a->l, on_exit_cb, a);
    int st = (a->failed == 0 && rung == 0 && launcher_running(a->l) == 0) ? ERR_OK : ERR_FAIL;
    for (int ready, k = 0; k < 20 && relay_pump(a->relay, a->sock, &ready, 10) > 0; k++) {} /* the last frames */
    say(a, "%s (relayed %llu frames up, %llu down, %llu dropped)",
        st == ERR_OK ? "every rank of this node ended cleanly" : "this node's ranks did not all end cleanly",
        (unsigned long long)relay_frames_up(a->relay), (unsigned long long)relay_frames_down(a->relay),
        (unsigned long long)relay_drops(a->relay));
    return st;
}

/* The node's exit status: node 0's for the job (docs/TUI.md "Exit status":
 * every node exits as node 0 does), but 1 when this node's own ranks did
 * not end cleanly, and 128 + N when stop signal N here interrupted a job
 * that then ended well. Without node 0's word (it went silent, the
 * rendezvous failed): 0 or 1 from this node's ranks alone. */
static int agent_exit_code(const Agent *a, int st)
{
    if (a->node0_exit < 0 || st == ERR_USAGE) return err_exit_code(st);
    int code = a->node0_exit;
    if (code == 0 && st != ERR_OK) code = 1;
    if (code == 0 && signals_stop_count() > 0 && signals_first() > 0) code = 128 + signals_first();
    return code;
}

/* A failed run (1, or 3: a checkpoint lost) keeps the ranks' logs the
 * events named, as node 0 does (loop.c, setup.c). */
static void agent_close(Agent *a, int code)
{
    launcher_free(&a->l);
    relay_close(&a->relay);
    if (a->sock) zmq_close(a->sock);
    if (a->zctx) zmq_ctx_term(a->zctx);
    static const char *const sockets[] = { "ctl", "tel", NULL };
    if (a->dir[0] && (code == 1 || code == 3) && a->launched_any && !a->o->log_dir) {
        zs_private_dir_keep(a->dir, sockets);
        fprintf(stderr, "ddptop: the ranks' logs are kept in %s\n", a->dir);
    } else if (a->dir[0]) {
        zs_private_dir_remove(a->dir);
    }
    free(a->args);
    codec_buf_done(&a->buf);
}

int agent_run(const RunOptions *o)
{
    Agent ag = { .o = o, .nproc = o->nproc, .first_rank = o->node_rank * o->nproc, .spent = -1, .node0_exit = -1 };
    Agent *a = &ag;
    codec_buf_init(&a->buf);
    gethostname(a->host, sizeof a->host - 1);
    const char *h = getenv("DDPTOP_HOST");
    if (h && *h) snprintf(a->host, sizeof a->host, "%s", h);
    char err[512] = "";
    int restart = 0;
    signals_catch_stop(1);
    int st = agent_open(a, err, sizeof err);
    if (st == ERR_OK) st = rendezvous(a, &restart, err, sizeof err);
    if (st == ERR_OK && relay_open(&a->relay, a->zctx, a->dir, a->ctl_ep, a->tel_ep, &a->keys, err, sizeof err)) {
        send_op(a, "error", -1, 0, 0, err);
        st = ERR_FAIL;
    }
    if (st == ERR_OK && launch(a, restart))
        st = ERR_FAIL; /* launch said why */
    else if (st == ERR_OK)
        st = run_ranks(a, restart);
    if (st != ERR_OK && err[0]) fprintf(stderr, "ddptop: %s\n", err);
    int code = agent_exit_code(a, st);
    if (a->node0_exit >= 0 && a->node0_why[0]) say(a, "node 0: %s (exit %d)", a->node0_why, a->node0_exit);
    fflush(stdout);
    agent_close(a, code);
    return code;
}
