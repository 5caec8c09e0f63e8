/* nodes.c — node 0's side of a multi-node job. See nodes.h and
 * docs/CLUSTER.md ("How the nodes talk").
 */
#include "cluster/nodes.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zmq.h>

#include "net/zsock.h"

enum { R_IDLE = 0, R_LAUNCHED, R_RUNNING, R_ENDED };

typedef struct {
    bool joined, refused, lost;
    char host[PROTO_STR_MED];
    int64_t pid;
    int64_t last_ms;
    char ident[ZS_IDENT_MAX];
    size_t ident_len;
} Node;

struct Nodes {
    int nnodes, nproc;
    void *router;
    Node *node;
    unsigned char *rank; /* [nnodes*nproc]: R_* */
    int *pid;
    int64_t last_ping_ms;
    bool done; /* "done" sent: the agents are leaving */
    CodecBuf buf;
};

int nodes_silent_ms(void)
{
    static int ms; /* read once: the loops ask every turn */
    if (!ms) {
        const char *e = getenv("DDPTOP_NODE_SILENT_MS");
        long v = e && *e ? strtol(e, NULL, 10) : 0;
        ms = v >= 500 && v <= 3600000 ? (int)v : NODES_SILENT_MS;
    }
    return ms;
}

int nodes_beat_ms(void)
{
    int q = nodes_silent_ms() / 4;
    return q < 1000 ? q : 1000;
}

Nodes *nodes_new(int nnodes, int nproc, void *router)
{
    Nodes *n = calloc(1, sizeof *n);
    if (!n) return NULL;
    n->nnodes = nnodes;
    n->nproc = nproc;
    n->router = router;
    n->node = calloc((size_t)nnodes, sizeof *n->node);
    n->rank = calloc((size_t)nnodes * (size_t)nproc, 1);
    n->pid = calloc((size_t)nnodes * (size_t)nproc, sizeof *n->pid);
    codec_buf_init(&n->buf);
    if (!n->node || !n->rank || !n->pid) nodes_free(&n);
    return n;
}

void nodes_free(Nodes **pn)
{
    Nodes *n = pn ? *pn : NULL;
    if (!n) return;
    free(n->node);
    free(n->rank);
    free(n->pid);
    codec_buf_done(&n->buf);
    free(n);
    *pn = NULL;
}

bool nodes_ident(const void *ident, size_t len, int *node)
{
    char s[ZS_IDENT_MAX + 1];
    if (len <= 5 || len >= sizeof s || memcmp(ident, "node-", 5)) return false;
    memcpy(s, ident, len);
    s[len] = 0;
    char *end;
    long k = strtol(s + 5, &end, 10);
    if (*end || k < 0 || k > 100000) return false;
    *node = (int)k;
    return true;
}

static void say(const NodeEvents *ev, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(const NodeEvents *ev, int level, const char *fmt, ...)
{
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (ev && ev->event) ev->event(ev->ctx, level, text);
}

static void send_node(Nodes *n, const void *ident, size_t len, const char *op, int signo, const char *job, int restart,
                      const char *text, int64_t spent)
{
    Msg m;
    char err[160];
    msg_init(&m, MSG_NODE);
    m.t_ns = proto_now_ns();
    snprintf(m.u.node.op, sizeof m.u.node.op, "%s", op);
    m.u.node.nnodes = n->nnodes;
    m.u.node.nproc = n->nproc;
    /* "done" carries node 0's exit status where the others carry a signal */
    if (!strcmp(op, "done"))
        m.u.node.status = signo;
    else
        m.u.node.signo = signo;
    m.u.node.restart = restart;
    m.u.node.spent = spent;
    if (job) snprintf(m.u.node.job, sizeof m.u.node.job, "%s", job);
    if (text) snprintf(m.u.node.text, sizeof m.u.node.text, "%s", text);
    zs_send_to(n->router, ident, len, &m, &n->buf, ZMQ_DONTWAIT, err, sizeof err);
}

static void refuse(Nodes *n, const void *ident, size_t len, int k, const char *why, const NodeEvents *ev)
{
    send_node(n, ident, len, "refused", 0, NULL, 0, why, -1);
    if (k >= 1 && k < n->nnodes) n->node[k].refused = true;
    say(ev, 2, "node %d refused: %s", k, why);
}

void nodes_refuse_frame(Nodes *n, const void *ident, size_t len, const char *why, const NodeEvents *ev)
{
    int k = -1;
    if (!nodes_ident(ident, len, &k)) return;
    char text[400];
    if (strstr(why, "protocol version"))
        snprintf(text, sizeof text, "node %d speaks another ddptop protocol (%s); node 0 speaks protocol version %d", k,
                 why, PROTO_VERSION);
    else
        snprintf(text, sizeof text, "node %d sent a malformed message: %s", k, why);
    refuse(n, ident, len, k, text, ev);
}

static void missing_list(const Nodes *n, char *out, size_t len)
{
    size_t o = 0;
    out[0] = 0;
    for (int k = 1; k < n->nnodes && o < len; k++)
        if (!n->node[k].joined)
            o += (size_t)snprintf(out + o, len - o, "%s%d%s", o ? ", " : "", k, n->node[k].refused ? " (refused)" : "");
}

void nodes_missing(const Nodes *n, char *out, size_t len) { missing_list(n, out, len); }

void nodes_handle(Nodes *n, const void *ident, size_t len, const Msg *m, int64_t now_ms, const NodeEvents *ev)
{
    int k = -1;
    if (!nodes_ident(ident, len, &k) || m->kind != MSG_NODE) return;
    const MsgNode *nm = &m->u.node;
    if (k < 1 || k >= n->nnodes) {
        char why[160];
        snprintf(why, sizeof why, "node rank %d is outside this job (--nnodes %d: node ranks 1..%d join node 0)", k,
                 n->nnodes, n->nnodes - 1);
        refuse(n, ident, len, k, why, ev);
        return;
    }
    Node *nd = &n->node[k];
    if (nd->refused) return;
    nd->last_ms = now_ms;
    if (!strcmp(nm->op, "join")) {
        if (nm->nnodes != n->nnodes || nm->nproc != n->nproc) {
            char why[200];
            snprintf(why, sizeof why, "node %d was started with --nnodes %d -n %d; node 0 runs --nnodes %d -n %d", k,
                     nm->nnodes, nm->nproc, n->nnodes, n->nproc);
            refuse(n, ident, len, k, why, ev);
            return;
        }
        if (nd->joined && nd->pid != nm->pid) {
            char why[200];
            snprintf(why, sizeof why, "node %d already joined from %s (pid %lld)", k, nd->host, (long long)nd->pid);
            send_node(n, ident, len, "refused", 0, NULL, 0, why, -1);
            say(ev, 1, "a second agent claimed node %d: refused", k);
            return;
        }
        if (!nd->joined) {
            nd->joined = true;
            nd->pid = nm->pid;
            snprintf(nd->host, sizeof nd->host, "%s", nm->host);
            memcpy(nd->ident, ident, len);
            nd->ident_len = len;
            say(ev, 0, "node %d joined from %s (%d rank%s)", k, nd->host, n->nproc, n->nproc == 1 ? "" : "s");
        }
        char missing[200];
        missing_list(n, missing, sizeof missing);
        if (missing[0]) {
            char why[260];
            snprintf(why, sizeof why, "waiting for node%s %s", strchr(missing, ',') ? "s" : "", missing);
            send_node(n, ident, len, "wait", 0, NULL, 0, why, -1);
        }
        return;
    }
    if (!nd->joined) return;
    int r = m->rank;
    bool mine = r >= k * n->nproc && r < (k + 1) * n->nproc;
    if (!strcmp(nm->op, "started") && mine) {
        n->rank[r] = R_RUNNING;
        n->pid[r] = (int)nm->pid;
        if (ev && ev->started) ev->started(ev->ctx, r, (int)nm->pid, nd->host);
    } else if (!strcmp(nm->op, "exit") && mine) {
        if (n->rank[r] != R_ENDED) {
            n->rank[r] = R_ENDED;
            if (ev && ev->exited) ev->exited(ev->ctx, r, (int)nm->pid, nm->status);
        }
    } else if (!strcmp(nm->op, "log") && mine) {
        if (ev && ev->log) ev->log(ev->ctx, r, nm->text);
    } else if (!strcmp(nm->op, "stop")) {
        if (ev && ev->stop) ev->stop(ev->ctx, k, nm->text);
    } else if (!strcmp(nm->op, "error")) {
        say(ev, 2, "node %d: %s", k, nm->text);
    }
}

int nodes_joined(const Nodes *n)
{
    int c = 0;
    for (int k = 1; k < n->nnodes; k++) c += n->node[k].joined;
    return c;
}

bool nodes_all_joined(const Nodes *n) { return nodes_joined(n) == n->nnodes - 1; }

void nodes_launch(Nodes *n, const char *job_id, int restart, const char *extra, int64_t spent)
{
    n->done = false;
    for (int k = 1; k < n->nnodes; k++) {
        Node *nd = &n->node[k];
        if (!nd->joined || nd->lost) continue;
        for (int i = 0; i < n->nproc; i++) n->rank[k * n->nproc + i] = R_LAUNCHED;
        send_node(n, nd->ident, nd->ident_len, "launch", 0, job_id, restart, extra, spent);
    }
}

int nodes_signal(Nodes *n, int sig)
{
    int c = 0;
    for (int k = 1; k < n->nnodes; k++) {
        Node *nd = &n->node[k];
        if (!nd->joined || nd->lost) continue;
        int here = 0;
        for (int i = 0; i < n->nproc; i++) here += n->rank[k * n->nproc + i] == R_RUNNING;
        if (here) send_node(n, nd->ident, nd->ident_len, "signal", sig, NULL, 0, NULL, -1);
        c += here;
    }
    return c;
}

int nodes_running(const Nodes *n)
{
    int c = 0;
    for (int r = n->nproc; r < n->nnodes * n->nproc; r++) c += n->rank[r] == R_LAUNCHED || n->rank[r] == R_RUNNING;
    return c;
}

void nodes_tick(Nodes *n, int64_t now_ms, const NodeEvents *ev)
{
    if (n->done || now_ms - n->last_ping_ms < nodes_beat_ms()) return;
    n->last_ping_ms = now_ms;
    for (int k = 1; k < n->nnodes; k++) {
        Node *nd = &n->node[k];
        if (!nd->joined || nd->lost) continue;
        send_node(n, nd->ident, nd->ident_len, "ping", 0, NULL, 0, NULL, -1);
        if (now_ms - nd->last_ms <= nodes_silent_ms()) continue;
        nd->lost = true;
        say(ev, 2, "node %d (%s) is lost: its agent has been silent for %.1f s", k, nd->host,
            nodes_silent_ms() / 1000.0);
        for (int i = 0; i < n->nproc; i++) {
            int r = k * n->nproc + i;
            if (n->rank[r] == R_LAUNCHED || n->rank[r] == R_RUNNING) {
                n->rank[r] = R_ENDED;
                if (ev && ev->exited) ev->exited(ev->ctx, r, n->pid[r], 0xff00);
            }
        }
    }
}

void nodes_done(Nodes *n, const char *why, int exit_code)
{
    if (n->done) return;
    n->done = true;
    for (int k = 1; k < n->nnodes; k++) {
        Node *nd = &n->node[k];
        if (nd->joined && !nd->lost) send_node(n, nd->ident, nd->ident_len, "done", exit_code, NULL, 0, why, -1);
    }
}

const char *nodes_host(const Nodes *n, int node)
{
    return node >= 1 && node < n->nnodes && n->node[node].joined ? n->node[node].host : "";
}
