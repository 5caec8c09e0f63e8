/* tool_feed.c — a scripted stand-in for ddptop-worker, for screen tests and
 * the load benchmark. ddptop launches it in place of the worker
 * (DDPTOP_WORKER=build/tests/tool_feed ddptop run -n N -- --script FILE);
 * it connects as a worker does (DDPTOP_CTL, DDPTOP_TEL, RANK, WORLD_SIZE;
 * hello over ctl with routing id "rank-N"), sends what the script says at
 * the times it says, and obeys ddptop's commands (stop, ckpt, pause,
 * resume) the way ranks do: at the next step that is a multiple of `sync`,
 * so every rank acts on the same step.
 *
 * Script: one directive a line, "TIME RANKS KIND key=value ...":
 *   TIME   seconds from start (float)      RANKS  * | N | A-B | A,B,...
 *   KIND   hello phase step coll shard ckpt log beat eval bye
 *          train (a stream of steps and collectives), block (stuck inside a
 *          collective), stall (stuck outside one), silence (sends nothing),
 *          hang (ignores everything), linger (a SIGTERM ends it s=S
 *          seconds later), exit, die, end
 *   "set beat=S sync=N" (no time, no ranks) sets options.
 * Values may be quoted ("two words"); "{r}" in a string becomes the rank.
 * docs/TUI.md ("For developers") lists every key. Each command received is
 * written to stdout ("feed rank R: cmd pause id 1 at step 120"), which ddptop
 * keeps in rank-R.log.
 *
 * With DDPTOP_CHECK_ARGS=1 it only parses the script (exit 0, or 2 and one
 * line naming the file, line and problem), as the worker checks its options.
 * Single-threaded.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "wire/codec.h"
#include "wire/protocol.h"
#include "wire/sampler.h"
#include "net/zsock.h"

#define MAX_KV      40
#define MAX_DIRS    100000
#define MAX_BUCKETS 16

typedef struct {
    char k[32];
    char v[512];
} Kv;

typedef struct {
    double t;
    int line;
    char kind[16];
    char ranks[64];
    int nkv;
    Kv kv[MAX_KV];
} Dir;

typedef struct {
    bool active;
    int64_t from, to, k; /* next step to send */
    double rate, next_t; /* seconds on the script's clock */
    double loss0, loss1, tau, noise, spread;
    int64_t epoch_steps, batch;
    double step_ms, comm_ms, exposed_ms;
    int nb;
    int64_t bytes[MAX_BUCKETS];
    int slow_rank, late_rank;
    double slow_factor, late_ms;
    int64_t nan_at;
    int64_t anchor_ns; /* wall time of step `from` on the shared schedule, 0: none */
} Train;

static struct {
    int rank, world;
    const char *script;
    Dir *dirs;
    int ndirs;
    double beat_s;
    int sync;
    void *zctx, *ctl, *tel;
    CodecBuf buf;
    uint64_t drops;
    int64_t job_ns;      /* ddptop's start (from DDPTOP_JOB): the ranks' shared clock */
    int64_t step, epoch; /* last step sent */
    int64_t coll_seq;
    Train tr;
    bool paused, blocked, stalled, silent, hung;
    int64_t block_seq, block_since_ns;
    char block_op[16];
    double term_s; /* linger s=S: SIGTERM ends the rank S seconds later */
    bool want_stop, want_pause, want_resume;
    int64_t want_ckpt; /* ckpt id asked, 0 none */
    int64_t last_ckpt_id;
    Phase phase;
} F;

/* ---- helpers ---- */

static int64_t base_ns; /* the script's time 0, wall clock */

/* The script's clock: seconds since ddptop started the job (DDPTOP_JOB
 * carries that moment), the same for every rank however late its process
 * started, so ranks step together as DDP ranks do. */
static double now_s(void) { return (double)(proto_now_ns() - base_ns) / 1e9; }

static int fail_parse(int line, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail_parse(int line, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "tool_feed: %s:%d: ", F.script, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return -1;
}

static const char *get(const Dir *d, const char *k)
{
    for (int i = 0; i < d->nkv; i++)
        if (!strcmp(d->kv[i].k, k)) return d->kv[i].v;
    return NULL;
}

static double getf(const Dir *d, const char *k, double dflt)
{
    const char *v = get(d, k);
    return v ? strtod(v, NULL) : dflt;
}

static int64_t geti(const Dir *d, const char *k, int64_t dflt)
{
    const char *v = get(d, k);
    return v ? strtoll(v, NULL, 10) : dflt;
}

/* A string value with "{r}" replaced by this rank. */
static void gets_(const Dir *d, const char *k, const char *dflt, char *out, size_t n)
{
    const char *v = get(d, k);
    if (!v) v = dflt;
    size_t len = 0;
    out[0] = '\0';
    for (const char *p = v; *p && len + 1 < n; p++) {
        if (!strncmp(p, "{r}", 3)) {
            len += (size_t)snprintf(out + len, n - len, "%d", F.rank);
            p += 2;
            if (len >= n) len = n - 1;
        } else {
            out[len++] = *p;
            out[len] = '\0';
        }
    }
}

/* "R:X" -> rank and value; false when absent. */
static bool get_pair(const Dir *d, const char *k, int *rank, double *val)
{
    const char *v = get(d, k);
    if (!v) return false;
    char *end;
    *rank = (int)strtol(v, &end, 10);
    *val = *end == ':' ? strtod(end + 1, NULL) : 0;
    return true;
}

static bool rank_selected(const char *sel, int rank)
{
    if (!strcmp(sel, "*") || !strcmp(sel, "all")) return true;
    const char *p = sel;
    while (*p) {
        char *end;
        long a = strtol(p, &end, 10), b = a;
        if (end == p) return false;
        if (*end == '-') b = strtol(end + 1, &end, 10);
        if (rank >= a && rank <= b) return true;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return false;
    }
    return false;
}

/* ---- script ---- */

/* linger s=S: a SIGTERM noted, the rank ends S seconds later (as a
 * script running its finally blocks, still beating meanwhile) */
static volatile sig_atomic_t got_term;
static void on_term(int sig) { got_term = sig; }


static const char *const kinds[] = { "hello", "phase", "step", "coll",  "shard", "ckpt",  "log",
                                     "beat",  "eval",  "bye",  "train", "block", "stall", "silence",
                                     "hang",  "exit",  "die",  "end",   "linger", NULL };

/* Split a line into words; quotes group, \" escapes. Returns the count. */
static int split(char *s, char **w, int max)
{
    int n = 0;
    while (*s && n < max) {
        while (*s == ' ' || *s == '\t') s++;
        if (!*s || *s == '#') break;
        char *out = s;
        w[n++] = s;
        bool q = false;
        while (*s && (q || (*s != ' ' && *s != '\t'))) {
            if (*s == '"') {
                q = !q;
                s++;
                continue;
            }
            if (*s == '\\' && s[1] == '"') s++;
            *out++ = *s++;
        }
        if (*s) s++;
        *out = '\0';
    }
    return n;
}

static int parse_script(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "tool_feed: cannot open script %s: %s\n", path, strerror(errno));
        return -1;
    }
    F.dirs = calloc(MAX_DIRS, sizeof *F.dirs);
    if (!F.dirs) {
        fclose(f);
        return -1;
    }
    char line[4096];
    int ln = 0, rc = 0;
    while (fgets(line, sizeof line, f)) {
        ln++;
        line[strcspn(line, "\r\n")] = '\0';
        char *w[MAX_KV + 4];
        int n = split(line, w, MAX_KV + 4);
        if (n == 0) continue;
        if (!strcmp(w[0], "set")) {
            for (int i = 1; i < n; i++) {
                if (!strncmp(w[i], "beat=", 5))
                    F.beat_s = strtod(w[i] + 5, NULL);
                else if (!strncmp(w[i], "sync=", 5))
                    F.sync = atoi(w[i] + 5) > 0 ? atoi(w[i] + 5) : 1;
                else {
                    rc = fail_parse(ln, "unknown option \"%s\" (beat=, sync=)", w[i]);
                    break;
                }
            }
            continue;
        }
        if (n < 3) {
            rc = fail_parse(ln, "expected TIME RANKS KIND [key=value ...]");
            break;
        }
        char *end;
        double t = strtod(w[0], &end);
        if (*end || t < 0) {
            rc = fail_parse(ln, "bad time \"%s\"", w[0]);
            break;
        }
        bool known = false;
        for (int k = 0; kinds[k]; k++) known |= !strcmp(kinds[k], w[2]);
        if (!known) {
            rc = fail_parse(ln, "unknown kind \"%s\"", w[2]);
            break;
        }
        if (F.ndirs == MAX_DIRS) {
            rc = fail_parse(ln, "more than %d directives", MAX_DIRS);
            break;
        }
        Dir *d = &F.dirs[F.ndirs];
        d->t = t;
        d->line = ln;
        snprintf(d->kind, sizeof d->kind, "%s", w[2]);
        snprintf(d->ranks, sizeof d->ranks, "%s", w[1]);
        for (int i = 3; i < n; i++) {
            char *eq = strchr(w[i], '=');
            if (!eq || eq == w[i]) {
                rc = fail_parse(ln, "expected key=value, got \"%s\"", w[i]);
                break;
            }
            if (d->nkv == MAX_KV) {
                rc = fail_parse(ln, "more than %d keys", MAX_KV);
                break;
            }
            *eq = '\0';
            snprintf(d->kv[d->nkv].k, sizeof d->kv[0].k, "%s", w[i]);
            snprintf(d->kv[d->nkv].v, sizeof d->kv[0].v, "%s", eq + 1);
            d->nkv++;
        }
        if (rc) break;
        if (!strcmp(d->kind, "phase") && get(d, "phase") && phase_from_name(get(d, "phase")) == PHASE_NONE) {
            rc = fail_parse(ln, "unknown phase \"%s\"", get(d, "phase"));
            break;
        }
        /* only what concerns this rank is kept (all lines are checked) */
        if (rank_selected(d->ranks, F.rank))
            F.ndirs++;
        else
            memset(d, 0, sizeof *d);
    }
    fclose(f);
    return rc;
}

/* ---- sending ---- */

static void send_tel(Msg *m)
{
    if (F.silent || F.hung) return;
    char err[160];
    m->rank = F.rank;
    if (!m->t_ns) m->t_ns = proto_now_ns();
    if (zs_send(F.tel, m, &F.buf, ZMQ_DONTWAIT, err, sizeof err) != 0) F.drops++;
}

/* Messages a user must see wait a little for room, as the worker's do. */
static void send_important(Msg *m)
{
    if (F.silent || F.hung) return;
    char err[160];
    m->rank = F.rank;
    m->t_ns = proto_now_ns();
    void *s = m->kind == MSG_HELLO ? F.ctl : F.tel;
    for (int i = 0; i < 400; i++) {
        int rc = zs_send(s, m, &F.buf, ZMQ_DONTWAIT, err, sizeof err);
        if (rc == 0) return;
        if (rc < 0) break;
        usleep(5000);
    }
    F.drops++;
}

static void send_phase(Phase p, const char *detail)
{
    Msg m;
    msg_init(&m, MSG_PHASE);
    m.u.phase.phase = p;
    if (detail) snprintf(m.u.phase.detail, sizeof m.u.phase.detail, "%s", detail);
    F.phase = p;
    send_important(&m);
}

static void send_coll_msg(const char *op, int bucket, int64_t bytes, double ms, double wait_ms, int64_t done)
{
    Msg m;
    msg_init(&m, MSG_COLL);
    MsgColl *c = &m.u.coll;
    c->seq = ++F.coll_seq;
    snprintf(c->op, sizeof c->op, "%s", op);
    c->bucket = bucket;
    c->step = F.step + 1;
    c->bytes = bytes;
    c->done_ns = done;
    c->start_ns = done - (int64_t)(ms * 1e6);
    c->enq_ns = c->start_ns - (int64_t)(wait_ms * 1e6);
    c->algbw_gbs = ms > 0 ? (double)bytes / (ms * 1e6) : 0;
    c->busbw_gbs =
        !strcmp(op, "allreduce") && F.world > 0 ? c->algbw_gbs * 2.0 * (F.world - 1) / F.world : c->algbw_gbs;
    send_tel(&m);
}

/* ---- commands: act at a step every rank agrees on ---- */

static bool training(void) { return F.tr.active && !F.paused && !F.blocked && !F.stalled && !F.hung; }

/* The bye from a fresh process, after this one has exited: a bye still on
 * its way when ddptop reaps the rank (the race ddptop must survive). */
static void late_bye(int status, int delay_ms)
{
    fflush(stdout);
    pid_t rank_pid = getpid();
    pid_t pid = fork();
    if (pid != 0) return; /* parent (or no child): go on exiting */
    /* out of the rank's process group, which ddptop kills when the rank
     * exits (what a rank leaves running goes with it): this child stands
     * for a bye still in the socket, not for a leftover */
    setpgid(0, 0);
    /* the bye comes after the rank's process has ended (on a loaded machine
     * the parent may not have run its exit 200 ms later): wait to be
     * orphaned (at most 10 s), then the delay */
    for (int i = 0; i < 10000 && getppid() == rank_pid; i++) usleep(1000);
    usleep((useconds_t)delay_ms * 1000);
    void *ctx = zmq_ctx_new();
    void *push = zmq_socket(ctx, ZMQ_PUSH);
    int linger = 2000; /* and no longer: ddptop may be gone */
    zmq_setsockopt(push, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(push, ZMQ_SNDTIMEO, &linger, sizeof linger);
    if (zmq_connect(push, getenv("DDPTOP_TEL")) == 0) {
        Msg m;
        msg_init(&m, MSG_BYE);
        m.rank = F.rank;
        m.t_ns = proto_now_ns();
        m.u.bye.status = status;
        m.u.bye.step = F.step;
        CodecBuf b;
        char err[160];
        codec_buf_init(&b);
        zs_send(push, &m, &b, 0, err, sizeof err);
        codec_buf_done(&b);
    }
    zmq_close(push);
    zmq_ctx_term(ctx);
    _exit(0);
}

static void shutdown_clean(int status, bool bye, const char *why, int bye_after_ms)
{
    send_phase(PHASE_STOPPING, why);
    send_phase(PHASE_DESTROYING, NULL);
    send_phase(PHASE_DESTROYED, NULL);
    if (bye && bye_after_ms > 0) {
        bye = false;
    } else {
        bye_after_ms = 0;
    }
    if (bye) {
        Msg m;
        msg_init(&m, MSG_BYE);
        m.u.bye.status = status;
        m.u.bye.step = F.step;
        send_important(&m);
    }
    int linger = 2000;
    zmq_setsockopt(F.tel, ZMQ_LINGER, &linger, sizeof linger);
    zmq_close(F.tel);
    zmq_close(F.ctl);
    zmq_ctx_term(F.zctx);
    fflush(stdout);
    if (bye_after_ms > 0) late_bye(status, bye_after_ms);
    exit(status);
}

static void do_ckpt(void)
{
    if (F.rank == 0) {
        send_phase(PHASE_CHECKPOINT, "requested");
        Msg m;
        msg_init(&m, MSG_CKPT);
        m.u.ckpt.step = F.step;
        m.u.ckpt.epoch = F.epoch;
        m.u.ckpt.ok = true;
        m.u.ckpt.bytes = 38612;
        m.u.ckpt.ms = 4.0;
        snprintf(m.u.ckpt.path, sizeof m.u.ckpt.path, "/tmp/ddptop-feed/step-%08lld", (long long)F.step);
        send_important(&m);
        send_phase(F.paused ? PHASE_PAUSED : PHASE_TRAIN, NULL);
    }
    F.last_ckpt_id = F.want_ckpt;
    F.want_ckpt = 0;
}

/* After a step (or at once when not stepping): what the ranks agreed. */
static void act_on_commands(bool at_boundary)
{
    if (!at_boundary) return;
    if (F.want_ckpt) do_ckpt();
    if (F.want_stop) shutdown_clean(0, true, "stop requested by ddptop", 0);
    if (F.want_pause && !F.paused) {
        F.want_pause = false;
        F.paused = true;
        char detail[64];
        snprintf(detail, sizeof detail, "at step %lld", (long long)F.step);
        send_phase(PHASE_PAUSED, detail);
    }
}

static void read_commands(void)
{
    for (;;) {
        Msg m;
        char err[160];
        int rc = zs_recv(F.ctl, &m, ZMQ_DONTWAIT, err, sizeof err);
        if (rc != 0 && rc != 2) return;
        if (rc == 2) continue;
        if (m.kind == MSG_CMD && !F.hung) {
            const MsgCmd *c = &m.u.cmd;
            printf("feed rank %d: cmd %s id %lld at step %lld\n", F.rank, c->op, (long long)c->id, (long long)F.step);
            fflush(stdout);
            if (!strcmp(c->op, "stop"))
                F.want_stop = true;
            else if (!strcmp(c->op, "ckpt") && c->id > F.last_ckpt_id)
                F.want_ckpt = c->id;
            else if (!strcmp(c->op, "pause"))
                F.want_pause = true;
            else if (!strcmp(c->op, "resume")) {
                F.want_pause = false;
                if (F.paused) {
                    F.paused = false;
                    send_phase(PHASE_TRAIN, NULL);
                    F.tr.next_t = now_s(); /* the schedule restarts from now */
                    F.tr.anchor_ns = 0;    /* ranks resume at different moments */
                }
            }
        }
        msg_done(&m);
    }
}

/* ---- the train stream ---- */

static double hash01(int64_t a, int64_t b)
{
    uint64_t x = (uint64_t)a * 0x9E3779B97F4A7C15ULL ^ (uint64_t)b * 0xC2B2AE3D27D4EB4FULL;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (double)(x >> 11) / 9007199254740992.0;
}

static void train_step(void)
{
    Train *t = &F.tr;
    int64_t k = t->k;
    /* Collectives end on the shared schedule, so what the ranks report
     * differs only by what the script says (late=), not by process jitter. */
    int64_t done = t->anchor_ns ? t->anchor_ns + (int64_t)((double)(k - t->from) * 1e9 / t->rate) : proto_now_ns();
    double comm_each = t->nb > 0 ? t->comm_ms / t->nb : 0;
    for (int b = 0; b < t->nb; b++) {
        /* everyone leaves a collective together: who came late waited least */
        double ms = comm_each;
        if (t->late_rank >= 0 && F.rank != t->late_rank) ms += t->late_ms;
        send_coll_msg("allreduce", b, t->bytes[b], ms, 0, done);
    }
    Msg m;
    msg_init(&m, MSG_STEP);
    MsgStep *s = &m.u.step;
    s->step = k;
    s->epoch = t->epoch_steps > 0 ? (k - 1) / t->epoch_steps : 0;
    double x = t->tau > 0 ? (double)(k - t->from) / t->tau : 0;
    s->loss = t->loss1 + (t->loss0 - t->loss1) * exp(-x) + t->spread * F.rank + t->noise * (2 * hash01(F.rank, k) - 1);
    if (t->nan_at > 0 && k >= t->nan_at) s->loss = NAN;
    s->lr = 0.01;
    s->samples = k * t->batch;
    s->step_ms = t->step_ms * (F.rank == t->slow_rank ? t->slow_factor : 1.0);
    s->fwd_ms = s->step_ms * 0.3;
    s->bwd_ms = s->step_ms * 0.5;
    s->opt_ms = s->step_ms * 0.05;
    s->comm_ms = t->comm_ms + (t->late_rank >= 0 && F.rank != t->late_rank ? t->late_ms * t->nb : 0);
    s->exposed_ms = t->exposed_ms;
    s->drops = F.drops;
    send_tel(&m);
    F.step = k;
    F.epoch = s->epoch;
    t->k++;
    if (t->k > t->to) t->active = false;
    act_on_commands(F.step % F.sync == 0 || !t->active);
}

static void start_train(const Dir *d)
{
    Train *t = &F.tr;
    memset(t, 0, sizeof *t);
    t->active = true;
    t->from = geti(d, "from", F.step + 1);
    t->to = geti(d, "to", t->from + 999);
    t->k = t->from;
    t->rate = getf(d, "rate", 50);
    if (t->rate <= 0) t->rate = 50;
    t->loss0 = getf(d, "loss0", 2.3);
    t->loss1 = getf(d, "loss1", 0.3);
    t->tau = getf(d, "tau", (double)(t->to - t->from + 1) / 4.0);
    t->noise = getf(d, "noise", 0.02);
    t->spread = getf(d, "spread", 0.01);
    t->epoch_steps = geti(d, "epoch_steps", 100);
    t->batch = geti(d, "batch", 32);
    t->step_ms = getf(d, "step_ms", 10);
    t->comm_ms = getf(d, "comm_ms", 2);
    t->exposed_ms = getf(d, "exposed_ms", 0.5);
    t->nb = (int)geti(d, "buckets", 1);
    if (t->nb > MAX_BUCKETS) t->nb = MAX_BUCKETS;
    if (t->nb < 0) t->nb = 0;
    const char *bb = get(d, "bucket_bytes");
    for (int b = 0; b < t->nb; b++) {
        t->bytes[b] = 1048576;
        if (bb) {
            t->bytes[b] = strtoll(bb, (char **)&bb, 10);
            if (*bb == ',')
                bb++;
            else
                bb = NULL;
        }
    }
    double v;
    t->slow_rank = t->late_rank = -1;
    if (get_pair(d, "slow", &t->slow_rank, &v)) t->slow_factor = v;
    if (get_pair(d, "late", &t->late_rank, &v)) t->late_ms = v;
    t->nan_at = geti(d, "nan_at", 0);
    t->anchor_ns = base_ns + (int64_t)(d->t * 1e9);
    t->next_t = d->t; /* on the shared schedule, even if this rank started late */
    F.stalled = F.blocked = false;
}

/* ---- one-shot directives ---- */

static void run_dir(const Dir *d)
{
    const char *k = d->kind;
    Msg m;
    char s1[PROTO_STR_LONG];
    if (!strcmp(k, "hello")) {
        msg_init(&m, MSG_HELLO);
        MsgHello *h = &m.u.hello;
        h->local_rank = (int32_t)geti(d, "local_rank", F.rank);
        h->world = (int32_t)geti(d, "world", F.world);
        h->local_world = (int32_t)geti(d, "local_world", F.world);
        h->pid = geti(d, "pid", getpid());
        gets_(d, "host", "feed-host", h->host, sizeof h->host);
        gets_(d, "device", "cpu", h->device, sizeof h->device);
        gets_(d, "backend", "gloo", h->backend, sizeof h->backend);
        gets_(d, "version", "tool_feed", h->version, sizeof h->version);
        gets_(d, "dataset", "synthetic", h->dataset, sizeof h->dataset);
        gets_(d, "model", "mlp:64,128,10", h->model, sizeof h->model);
        h->params = geti(d, "params", 9610);
        h->batch_size = geti(d, "batch", 32);
        h->max_steps = geti(d, "max_steps", 0);
        h->steps_per_epoch = geti(d, "steps_per_epoch", 100);
        h->dataset_size = geti(d, "dataset_size", 6400);
        send_important(&m);
    } else if (!strcmp(k, "phase")) {
        gets_(d, "detail", "", s1, sizeof s1);
        Phase p = phase_from_name(get(d, "phase") ? get(d, "phase") : "train");
        /* a rank paused before training starts stays paused: resume says train */
        if (F.paused && p == PHASE_TRAIN) return;
        send_phase(p, s1[0] ? s1 : NULL);
    } else if (!strcmp(k, "step")) {
        msg_init(&m, MSG_STEP);
        MsgStep *s = &m.u.step;
        s->epoch = geti(d, "epoch", 0);
        s->step = geti(d, "step", F.step + 1);
        s->loss = getf(d, "loss", 1.0);
        s->lr = getf(d, "lr", 0.01);
        s->samples = geti(d, "samples", s->step * 32);
        s->step_ms = getf(d, "step_ms", 10);
        s->fwd_ms = getf(d, "fwd_ms", 3);
        s->bwd_ms = getf(d, "bwd_ms", 5);
        s->opt_ms = getf(d, "opt_ms", 0.5);
        s->comm_ms = getf(d, "comm_ms", 2);
        s->exposed_ms = getf(d, "exposed_ms", 0.5);
        s->drops = (uint64_t)geti(d, "drops", (int64_t)F.drops);
        F.step = s->step;
        F.epoch = s->epoch;
        send_tel(&m);
    } else if (!strcmp(k, "coll")) {
        gets_(d, "op", "allreduce", s1, sizeof s1);
        if (get(d, "seq")) F.coll_seq = geti(d, "seq", 1) - 1;
        /* it completes now; it started ms ago and was queued wait_ms before
         * that: a rank with a shorter ms arrived later */
        send_coll_msg(s1, (int)geti(d, "bucket", 0), geti(d, "bytes", 1048576), getf(d, "ms", 2), getf(d, "wait_ms", 0),
                      proto_now_ns());
    } else if (!strcmp(k, "shard")) {
        SamplerConfig c = { .size = geti(d, "size", 6400),
                            .world = F.world,
                            .rank = F.rank,
                            .seed = (uint64_t)geti(d, "seed", 0),
                            .shuffle = geti(d, "shuffle", 1) != 0,
                            .drop_last = geti(d, "drop_last", 0) != 0 };
        int64_t epoch = geti(d, "epoch", F.epoch);
        /* repeat_epoch=E: the order of epoch E again (set_epoch forgotten) */
        int64_t perm_epoch = geti(d, "repeat_epoch", epoch);
        char err[160];
        int64_t n = sampler_num_samples(&c);
        int64_t *idx = malloc((size_t)(n > 0 ? n : 1) * sizeof *idx);
        if (!idx || sampler_indices(&c, perm_epoch, idx, err, sizeof err)) {
            fprintf(stderr, "tool_feed: shard: %s\n", idx ? err : "out of memory");
            free(idx);
            return;
        }
        msg_init(&m, MSG_SHARD);
        MsgShard *s = &m.u.shard;
        s->epoch = epoch;
        s->seed = (int64_t)c.seed;
        s->shuffle = c.shuffle;
        s->drop_last = c.drop_last;
        s->dataset_size = c.size;
        s->num_samples = n;
        s->total_size = sampler_total_size(&c);
        s->padding = sampler_padding(&c);
        int64_t cut = geti(d, "cut", n);
        s->n_idx = (uint32_t)(cut < n ? cut : n);
        s->idx = idx;
        send_tel(&m);
        free(idx); /* ours, not msg_done's */
    } else if (!strcmp(k, "ckpt")) {
        msg_init(&m, MSG_CKPT);
        m.u.ckpt.step = geti(d, "step", F.step);
        m.u.ckpt.epoch = geti(d, "epoch", F.epoch);
        m.u.ckpt.ok = geti(d, "ok", 1) != 0;
        m.u.ckpt.bytes = geti(d, "bytes", 38612);
        m.u.ckpt.ms = getf(d, "ms", 41);
        gets_(d, "path", "/tmp/ddptop-feed/ckpt", m.u.ckpt.path, sizeof m.u.ckpt.path);
        gets_(d, "error", "", m.u.ckpt.error, sizeof m.u.ckpt.error);
        send_important(&m);
    } else if (!strcmp(k, "log")) {
        msg_init(&m, MSG_LOG);
        gets_(d, "level", "info", m.u.log.level, sizeof m.u.log.level);
        gets_(d, "text", "", m.u.log.text, sizeof m.u.log.text);
        send_important(&m);
    } else if (!strcmp(k, "beat")) {
        msg_init(&m, MSG_BEAT);
        m.u.beat.step = geti(d, "step", F.step);
        m.u.beat.phase = get(d, "phase") ? phase_from_name(get(d, "phase")) : F.phase;
        m.u.beat.coll_seq = geti(d, "seq", -1);
        gets_(d, "op", "", m.u.beat.coll_op, sizeof m.u.beat.coll_op);
        gets_(d, "where", "", m.u.beat.where, sizeof m.u.beat.where);
        double since = getf(d, "since_ms", -1);
        m.u.beat.coll_since_ns = since >= 0 ? proto_now_ns() - (int64_t)(since * 1e6) : 0;
        send_tel(&m);
    } else if (!strcmp(k, "eval")) {
        msg_init(&m, MSG_EVAL);
        m.u.eval.epoch = geti(d, "epoch", F.epoch);
        m.u.eval.step = geti(d, "step", F.step);
        m.u.eval.loss = getf(d, "loss", 0.5);
        m.u.eval.accuracy = getf(d, "accuracy", 0.8);
        m.u.eval.total = geti(d, "total", 1000);
        m.u.eval.correct = geti(d, "correct", (int64_t)llround(m.u.eval.accuracy * (double)m.u.eval.total));
        send_tel(&m);
    } else if (!strcmp(k, "bye")) {
        msg_init(&m, MSG_BYE);
        m.u.bye.status = (int32_t)geti(d, "status", 0);
        m.u.bye.step = geti(d, "step", F.step);
        send_important(&m);
    } else if (!strcmp(k, "train")) {
        start_train(d);
    } else if (!strcmp(k, "block")) {
        F.blocked = true;
        F.block_seq = F.coll_seq + 1;
        F.block_since_ns = proto_now_ns();
        gets_(d, "op", "allreduce", F.block_op, sizeof F.block_op);
    } else if (!strcmp(k, "stall")) {
        F.stalled = true;
    } else if (!strcmp(k, "silence")) {
        F.silent = true;
    } else if (!strcmp(k, "hang")) {
        F.hung = true;
    } else if (!strcmp(k, "exit")) {
        shutdown_clean((int)geti(d, "status", 0), geti(d, "bye", 1) != 0, "script ended",
                       (int)geti(d, "bye_after_ms", 0));
    } else if (!strcmp(k, "linger")) {
        F.term_s = getf(d, "s", 1.0);
        signal(SIGTERM, on_term);
    } else if (!strcmp(k, "die")) {
        fflush(stdout);
        raise((int)geti(d, "signal", SIGKILL));
    }
}

static void send_beat(void)
{
    Msg m;
    msg_init(&m, MSG_BEAT);
    m.u.beat.step = F.step;
    m.u.beat.phase = F.phase;
    m.u.beat.coll_seq = -1;
    if (F.blocked) {
        m.u.beat.coll_seq = F.block_seq;
        snprintf(m.u.beat.coll_op, sizeof m.u.beat.coll_op, "%s", F.block_op);
        m.u.beat.coll_since_ns = F.block_since_ns;
    }
    send_tel(&m);
}

static int cmp_dir(const void *a, const void *b)
{
    const Dir *x = a, *y = b;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    return x->line - y->line; /* same time: script order */
}

int main(int argc, char **argv)
{
    const char *script = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--script") && i + 1 < argc)
            script = argv[++i];
        else if (!strcmp(argv[i], "--timeout") && i + 1 < argc)
            i++; /* ddptop passes its collective timeout: not ours */
        else {
            fprintf(stderr, "tool_feed: unknown option \"%s\" (usage: tool_feed --script FILE)\n", argv[i]);
            return 2;
        }
    }
    if (!script) {
        fprintf(stderr, "tool_feed: --script FILE is required\n");
        return 2;
    }
    F.script = script;
    F.rank = getenv("RANK") ? atoi(getenv("RANK")) : 0;
    F.world = getenv("WORLD_SIZE") ? atoi(getenv("WORLD_SIZE")) : 1;
    F.beat_s = 1.0;
    F.sync = 10;
    F.phase = PHASE_NONE;
    if (parse_script(script)) return 2;
    if (getenv("DDPTOP_CHECK_ARGS")) return 0;
    qsort(F.dirs, (size_t)F.ndirs, sizeof *F.dirs, cmp_dir);

    const char *ctl_ep = getenv("DDPTOP_CTL"), *tel_ep = getenv("DDPTOP_TEL");
    if (!ctl_ep || !tel_ep) {
        fprintf(stderr, "tool_feed: DDPTOP_CTL and DDPTOP_TEL must be set (run me through ddptop)\n");
        return 2;
    }
    codec_buf_init(&F.buf);
    F.zctx = zmq_ctx_new();
    F.ctl = zmq_socket(F.zctx, ZMQ_DEALER);
    F.tel = zmq_socket(F.zctx, ZMQ_PUSH);
    char ident[32];
    int n = snprintf(ident, sizeof ident, "rank-%d", F.rank);
    int hwm = 10000, zero = 0;
    zmq_setsockopt(F.ctl, ZMQ_ROUTING_ID, ident, (size_t)n);
    zmq_setsockopt(F.tel, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(F.ctl, ZMQ_LINGER, &zero, sizeof zero);
    if (zmq_connect(F.ctl, ctl_ep) || zmq_connect(F.tel, tel_ep)) {
        fprintf(stderr, "tool_feed: connect: %s\n", zmq_strerror(errno));
        return 1;
    }
    /* DDPTOP_JOB is "ddptop-PID-NS", NS the frontend's start in wall-clock ns */
    const char *job = getenv("DDPTOP_JOB");
    const char *dash = job ? strrchr(job, '-') : NULL;
    F.job_ns = dash ? strtoll(dash + 1, NULL, 10) : 0;
    base_ns = F.job_ns > 0 ? F.job_ns : proto_now_ns();
    double next_beat = now_s() + F.beat_s;
    int di = 0;
    double term_at = -1;
    for (;;) {
        double now = now_s();
        if (got_term && term_at < 0) term_at = now + F.term_s;
        if (term_at >= 0 && now >= term_at) {
            fflush(stdout);
            signal(SIGTERM, SIG_DFL);
            raise(SIGTERM);
        }
        while (di < F.ndirs && F.dirs[di].t <= now) run_dir(&F.dirs[di++]);
        /* steps due now; a rank that started late catches up with the others
         * (in bursts of at most 200 per wake-up, so commands are still read) */
        for (int burst = 0; training() && F.tr.next_t <= now && burst < 200; burst++) {
            train_step();
            F.tr.next_t += 1.0 / F.tr.rate;
        }
        if (training() && F.tr.next_t < now - 10.0)
            F.tr.next_t = now; /* hopelessly behind (machine overloaded): skip ahead */
        /* commands wait for a step boundary only while steps flow */
        if (!training() && !F.blocked && !F.hung) act_on_commands(true);
        if (F.beat_s > 0 && now >= next_beat) {
            if (!F.silent && !F.hung) send_beat();
            next_beat += F.beat_s;
            if (next_beat < now) next_beat = now + F.beat_s;
        }
        double next = next_beat;
        if (F.beat_s <= 0) next = now + 1.0;
        if (di < F.ndirs && F.dirs[di].t < next) next = F.dirs[di].t;
        if (training() && F.tr.next_t < next) next = F.tr.next_t;
        long ms = (long)ceil((next - now_s()) * 1000);
        if (ms < 0) ms = 0;
        if (ms > 1000) ms = 1000;
        zmq_pollitem_t it = { F.ctl, 0, ZMQ_POLLIN, 0 };
        if (zmq_poll(&it, 1, ms) < 0 && errno != EINTR) break;
        read_commands();
    }
    return 1;
}
