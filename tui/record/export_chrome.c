/* export_chrome.c — `ddptop export --chrome-trace`: a recording as Trace
 * Event Format JSON for Perfetto and chrome://tracing. See export.h;
 * the format in docs/RECORDING.md.
 *
 * Owns: the mapping from messages to trace events (a process per rank;
 * phase, compute and comm threads; spans in µs; loss as a counter). Every
 * value comes from a file and is treated as hostile: frames go through
 * codec_decode (bounded pre-scan) before anything reads them, times and
 * durations are clamped, ranks are bounded. Main thread only.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "record/export.h"

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "record/export_common.h"
#include "wire/codec.h"
#include "wire/protocol.h"

/* Ranks above this are not given a trace process (a hostile "r"). */
#define EXPORT_MAX_RANKS   65536
/* Longest span we believe: anything longer is a garbled duration. */
#define EXPORT_MAX_SPAN_NS (86400LL * 1000000000LL)
/* Trace threads, top to bottom in the viewer. */
enum { TID_PHASE = 1, TID_COMPUTE = 2, TID_COMM = 3 };

typedef struct {
    bool seen; /* metadata written */
    bool in_phase;
    Phase phase;
    int64_t phase_ns; /* start of the current phase span (wall ns) */
    char detail[PROTO_STR_LONG];
    int64_t last_ns; /* latest time anything of this rank happened */
} TraceRank;

typedef struct {
    Json w;          /* onto the output stream */
    int64_t base_ns; /* trace time 0 */
    TraceRank *ranks;
    int n_ranks; /* allocated */
    uint64_t events;
    uint64_t ignored; /* messages with no usable rank */
} Trace;

static bool sane_ns(int64_t ns) { return ns > 0 && ns < (INT64_C(1) << 62); }

static int64_t span_ns(double ms)
{
    if (!isfinite(ms) || ms <= 0) return 0;
    double ns = ms * 1e6;
    return ns > (double)EXPORT_MAX_SPAN_NS ? EXPORT_MAX_SPAN_NS : (int64_t)ns;
}

/* When a message's event happened: its "t", or its arrival when the sender
 * gave none (or a garbled one). */
static int64_t msg_time(const Msg *m, const RecEntry *e)
{
    if (sane_ns(m->t_ns)) return m->t_ns;
    return sane_ns(e->wall_ns) ? e->wall_ns : 1;
}

/* A collective's span: [start, done], start falling back to enqueue and
 * both to the message time. */
static void coll_span(const Msg *m, const RecEntry *e, int64_t *start, int64_t *dur)
{
    const MsgColl *c = &m->u.coll;
    int64_t s = sane_ns(c->start_ns) ? c->start_ns : sane_ns(c->enq_ns) ? c->enq_ns : msg_time(m, e);
    int64_t d = sane_ns(c->done_ns) && c->done_ns > s ? c->done_ns - s : 0;
    *start = s;
    *dur = d > EXPORT_MAX_SPAN_NS ? EXPORT_MAX_SPAN_NS : d;
}

/* Earliest moment a message's spans start (for the trace's time 0). */
static int64_t msg_earliest(const Msg *m, const RecEntry *e)
{
    int64_t t = msg_time(m, e);
    if (m->kind == MSG_STEP) return t - span_ns(m->u.step.step_ms);
    if (m->kind == MSG_CKPT) return t - span_ns(m->u.ckpt.ms);
    if (m->kind == MSG_COLL) {
        int64_t s, d;
        coll_span(m, e, &s, &d);
        return s < t ? s : t;
    }
    return t;
}

/* Integer ns as µs with three decimals, exactly (no floating point). */
static void kv_us(Json *w, const char *k, int64_t ns)
{
    char b[32];
    uint64_t a = ns < 0 ? -(uint64_t)ns : (uint64_t)ns;
    snprintf(b, sizeof b, "%s%" PRIu64 ".%03d", ns < 0 ? "-" : "", a / 1000, (int)(a % 1000));
    json_key(w, k);
    json_raw(w, b);
}

/* Every event starts a line of its own in the traceEvents array. */
static Json *ev_begin(Trace *tr)
{
    json_break(&tr->w);
    json_obj(&tr->w);
    tr->events++;
    return &tr->w;
}

static void ev_meta(Trace *tr, int pid, int tid, const char *what, const char *key, const char *sval, int ival)
{
    Json *w = ev_begin(tr);
    json_kv_str(w, "name", what);
    json_kv_str(w, "ph", "M");
    json_kv_int(w, "pid", pid);
    if (tid >= 0) json_kv_int(w, "tid", tid);
    json_key(w, "args");
    json_obj(w);
    if (sval)
        json_kv_str(w, key, sval);
    else
        json_kv_int(w, key, ival);
    json_obj_end(w);
    json_obj_end(w);
}

/* Start an event up to its args: name, cat, ph, pid, tid, ts. Returns the
 * writer for what follows. */
static Json *ev_head(Trace *tr, const char *name, const char *cat, char ph, int pid, int tid, int64_t ns)
{
    Json *w = ev_begin(tr);
    char phs[2] = { ph, 0 };
    json_kv_str(w, "name", name);
    json_kv_str(w, "cat", cat);
    json_kv_str(w, "ph", phs);
    json_kv_int(w, "pid", pid);
    json_kv_int(w, "tid", tid);
    kv_us(w, "ts", ns - tr->base_ns);
    return w;
}

/* A complete span ("X"); the caller writes args (or not) and closes with
 * ev_end. */
static Json *ev_span(Trace *tr, const char *name, const char *cat, int pid, int tid, int64_t start, int64_t dur)
{
    Json *w = ev_head(tr, name, cat, 'X', pid, tid, start);
    kv_us(w, "dur", dur);
    return w;
}

/* An instant event ("i") of scope s: t(hread) or p(rocess). */
static Json *ev_instant(Trace *tr, const char *name, const char *cat, const char *s, int pid, int64_t ns)
{
    Json *w = ev_head(tr, name, cat, 'i', pid, TID_PHASE, ns);
    json_kv_str(w, "s", s);
    return w;
}

static void ev_args(Json *w)
{
    json_key(w, "args");
    json_obj(w);
}

static void ev_end(Json *w, bool had_args)
{
    if (had_args) json_obj_end(w);
    json_obj_end(w);
}

/* The rank's state, writing its process and thread names the first time.
 * NULL for a rank the trace cannot show. */
static TraceRank *trace_rank(Trace *tr, int rank)
{
    if (rank < 0 || rank >= EXPORT_MAX_RANKS) {
        tr->ignored++;
        return NULL;
    }
    if (rank >= tr->n_ranks) {
        int n = tr->n_ranks ? tr->n_ranks : 8;
        while (n <= rank) n *= 2;
        TraceRank *nr = realloc(tr->ranks, (size_t)n * sizeof *nr);
        if (!nr) {
            tr->ignored++;
            return NULL;
        }
        memset(nr + tr->n_ranks, 0, (size_t)(n - tr->n_ranks) * sizeof *nr);
        tr->ranks = nr;
        tr->n_ranks = n;
    }
    TraceRank *R = &tr->ranks[rank];
    if (!R->seen) {
        R->seen = true;
        char name[32];
        snprintf(name, sizeof name, "rank %d", rank);
        ev_meta(tr, rank, -1, "process_name", "name", name, 0);
        ev_meta(tr, rank, -1, "process_sort_index", "sort_index", NULL, rank);
        ev_meta(tr, rank, TID_PHASE, "thread_name", "name", "phase", 0);
        ev_meta(tr, rank, TID_COMPUTE, "thread_name", "name", "compute", 0);
        ev_meta(tr, rank, TID_COMM, "thread_name", "name", "comm", 0);
        ev_meta(tr, rank, TID_PHASE, "thread_sort_index", "sort_index", NULL, TID_PHASE);
        ev_meta(tr, rank, TID_COMPUTE, "thread_sort_index", "sort_index", NULL, TID_COMPUTE);
        ev_meta(tr, rank, TID_COMM, "thread_sort_index", "sort_index", NULL, TID_COMM);
    }
    return R;
}

static void touch(TraceRank *R, int64_t ns)
{
    if (ns > R->last_ns) R->last_ns = ns;
}

static void close_phase(Trace *tr, int rank, TraceRank *R, int64_t end)
{
    if (!R->in_phase) return;
    int64_t dur = end > R->phase_ns ? end - R->phase_ns : 0;
    Json *w = ev_span(tr, phase_name(R->phase), "phase", rank, TID_PHASE, R->phase_ns, dur);
    bool args = R->detail[0] != 0;
    if (args) {
        ev_args(w);
        json_kv_str(w, "detail", R->detail);
    }
    ev_end(w, args);
    R->in_phase = false;
}

static void trace_step(Trace *tr, int rank, const Msg *m, int64_t end)
{
    const MsgStep *s = &m->u.step;
    int64_t dur = span_ns(s->step_ms);
    int64_t start = end - dur;
    char name[48];
    snprintf(name, sizeof name, "step %" PRId64, s->step);
    Json *w = ev_span(tr, name, "compute", rank, TID_COMPUTE, start, dur);
    ev_args(w);
    json_kv_int(w, "epoch", s->epoch);
    json_kv_int(w, "step", s->step);
    json_kv_double(w, "loss", s->loss);
    json_kv_double(w, "lr", s->lr);
    json_kv_int(w, "samples", s->samples);
    json_kv_double(w, "step_ms", s->step_ms);
    json_kv_double(w, "comm_ms", s->comm_ms);
    json_kv_double(w, "exposed_ms", s->exposed_ms);
    json_kv_int(w, "drops", (int64_t)s->drops);
    if (s->dev_mem_total > 0) json_kv_int(w, "dev_mem", s->dev_mem);
    ev_end(w, true);
    /* Forward and backward from the step's start, the optimizer at its end;
     * each clamped inside the step so the nesting holds. */
    int64_t fwd = span_ns(s->fwd_ms), bwd = span_ns(s->bwd_ms), opt = span_ns(s->opt_ms);
    if (fwd > dur) fwd = dur;
    if (bwd > dur - fwd) bwd = dur - fwd;
    if (opt > dur - fwd - bwd) opt = dur - fwd - bwd;
    if (fwd) ev_end(ev_span(tr, "forward", "compute", rank, TID_COMPUTE, start, fwd), false);
    if (bwd) ev_end(ev_span(tr, "backward", "compute", rank, TID_COMPUTE, start + fwd, bwd), false);
    if (opt) ev_end(ev_span(tr, "optimizer", "compute", rank, TID_COMPUTE, end - opt, opt), false);
    if (isfinite(s->loss)) {
        w = ev_head(tr, "loss", "loss", 'C', rank, TID_COMPUTE, end);
        ev_args(w);
        json_kv_double(w, "loss", s->loss);
        ev_end(w, true);
    }
}

static void trace_coll(Trace *tr, int rank, const Msg *m, const RecEntry *e, TraceRank *R)
{
    const MsgColl *c = &m->u.coll;
    int64_t start, dur;
    coll_span(m, e, &start, &dur);
    touch(R, start + dur);
    char name[64];
    if (c->bucket >= 0)
        snprintf(name, sizeof name, "%s bucket %d", c->op[0] ? c->op : "coll", (int)c->bucket);
    else
        snprintf(name, sizeof name, "%s", c->op[0] ? c->op : "coll");
    Json *w = ev_span(tr, name, "comm", rank, TID_COMM, start, dur);
    ev_args(w);
    json_kv_int(w, "bytes", c->bytes);
    json_kv_double(w, "algbw_GBps", c->algbw_gbs);
    json_kv_double(w, "busbw_GBps", c->busbw_gbs);
    json_kv_int(w, "bucket", c->bucket);
    json_kv_int(w, "seq", c->seq);
    json_kv_int(w, "step", c->step);
    if (c->count >= 0) json_kv_int(w, "count", c->count); /* a worker older than count says none */
    if (c->dtype[0]) json_kv_str(w, "dtype", c->dtype);
    if (sane_ns(c->enq_ns) && c->enq_ns <= start) json_kv_double(w, "queued_us", (double)(start - c->enq_ns) / 1e3);
    ev_end(w, true);
}

static void trace_msg(Trace *tr, const Msg *m, const RecEntry *e)
{
    int rank = m->rank;
    if (m->kind == MSG_CMD || m->kind == MSG_VAL || m->kind == MSG_SET || m->kind == MSG_GET || m->kind == MSG_WAIT)
        return; /* commands and rendezvous plumbing: not part of the timeline */
    TraceRank *R = trace_rank(tr, rank);
    if (!R) return;
    int64_t t = msg_time(m, e);
    touch(R, t);
    char name[PROTO_STR_LONG + 32];
    Json *w;
    switch (m->kind) {
    case MSG_HELLO: {
        const MsgHello *h = &m->u.hello;
        char labels[PROTO_STR_MED * 2 + 64];
        snprintf(labels, sizeof labels, "%s, %s, %s", h->host, h->device, h->backend);
        ev_meta(tr, rank, -1, "process_labels", "labels", labels, 0);
        break;
    }
    case MSG_PHASE:
        close_phase(tr, rank, R, t);
        R->in_phase = true;
        R->phase = m->u.phase.phase;
        R->phase_ns = t;
        snprintf(R->detail, sizeof R->detail, "%s", m->u.phase.detail);
        break;
    case MSG_STEP: trace_step(tr, rank, m, t); break;
    case MSG_COLL: trace_coll(tr, rank, m, e, R); break;
    case MSG_CKPT: {
        const MsgCkpt *c = &m->u.ckpt;
        int64_t dur = span_ns(c->ms);
        snprintf(name, sizeof name, "checkpoint step %" PRId64 "%s", c->step, c->ok ? "" : " (failed)");
        w = ev_span(tr, name, "ckpt", rank, TID_COMPUTE, t - dur, dur);
        ev_args(w);
        json_kv_int(w, "step", c->step);
        json_kv_int(w, "epoch", c->epoch);
        json_kv_bool(w, "ok", c->ok);
        json_kv_str(w, "path", c->path);
        json_kv_int(w, "bytes", c->bytes);
        json_kv_double(w, "ms", c->ms);
        if (c->error[0]) json_kv_str(w, "error", c->error);
        ev_end(w, true);
        break;
    }
    case MSG_LOG:
        w = ev_instant(tr, m->u.log.text, "log", "t", rank, t);
        ev_args(w);
        json_kv_str(w, "level", m->u.log.level);
        ev_end(w, true);
        break;
    case MSG_EVAL:
        /* Test-set figures after an epoch: a counter beside the loss. */
        if (isfinite(m->u.eval.loss) && isfinite(m->u.eval.accuracy)) {
            w = ev_head(tr, "eval", "eval", 'C', rank, TID_COMPUTE, t);
            ev_args(w);
            json_kv_double(w, "loss", m->u.eval.loss);
            json_kv_double(w, "accuracy", m->u.eval.accuracy);
            ev_end(w, true);
        }
        break;
    case MSG_BYE:
        snprintf(name, sizeof name, "bye (status %d)", (int)m->u.bye.status);
        w = ev_instant(tr, name, "phase", "t", rank, t);
        ev_args(w);
        json_kv_int(w, "status", m->u.bye.status);
        json_kv_int(w, "step", m->u.bye.step);
        ev_end(w, true);
        break;
    default: break;
    }
}

static void trace_exit(Trace *tr, const RecEntry *e)
{
    RecProc p;
    if (rec_proc_decode(e, &p) || e->src != REC_SRC_EXIT) return;
    TraceRank *R = trace_rank(tr, p.rank);
    if (!R) return;
    int64_t t = sane_ns(e->wall_ns) ? e->wall_ns : R->last_ns;
    touch(R, t);
    char name[REC_HOW_MAX + 64], how[32];
    export_wait_text(how, sizeof how, p.wait_status);
    snprintf(name, sizeof name, "process %s%s%s", how, p.how[0] ? ", " : "", p.how);
    Json *w = ev_instant(tr, name, "process", "p", p.rank, t);
    ev_args(w);
    json_kv_int(w, "pid", p.pid);
    json_kv_int(w, "wait_status", p.wait_status);
    ev_end(w, true);
}

int export_chrome_trace(const Recording *r, const char *name, FILE *f, char *err, size_t errlen)
{
    Trace tr = { .base_ns = 0 };
    char derr[256];
    /* Pass 1: time 0 is the earliest moment anything starts. */
    int64_t base = sane_ns(r->hdr.created_wall_ns) ? r->hdr.created_wall_ns : INT64_MAX;
    for (size_t i = 0; i < r->n; i++) {
        const RecEntry *e = &r->recs[i];
        if (e->src == REC_SRC_EXIT && sane_ns(e->wall_ns) && e->wall_ns < base) base = e->wall_ns;
        if (e->src != REC_SRC_TEL && e->src != REC_SRC_CTL) continue;
        Msg m;
        if (codec_decode(e->data, e->len, &m, derr, sizeof derr) != 0) continue;
        int64_t t = msg_earliest(&m, e);
        if (t < base) base = t;
        msg_done(&m);
    }
    tr.base_ns = base == INT64_MAX ? 0 : base;

    Json *w = &tr.w;
    json_init_file(w, f);
    json_obj(w);
    json_kv_str(w, "displayTimeUnit", "ms");
    json_key(w, "otherData");
    json_obj(w);
    json_kv_str(w, "generator", "ddptop export");
    json_kv_str(w, "recording", name ? name : "");
    json_kv_str(w, "description", r->hdr.desc ? r->hdr.desc : "");
    json_kv_int(w, "world", (int)r->hdr.world);
    json_kv_int(w, "created_wall_ns", r->hdr.created_wall_ns);
    json_kv_int(w, "time0_wall_ns", tr.base_ns);
    json_kv_bool(w, "complete", r->complete);
    if (!r->complete) json_kv_str(w, "ends_early", r->tail);
    json_obj_end(w);
    json_break(w);
    json_key(w, "traceEvents");
    json_arr(w);

    /* Pass 2: the events, in arrival order. */
    for (size_t i = 0; i < r->n; i++) {
        const RecEntry *e = &r->recs[i];
        if (e->src == REC_SRC_EXIT) {
            trace_exit(&tr, e);
            continue;
        }
        if (e->src != REC_SRC_TEL && e->src != REC_SRC_CTL) continue;
        Msg m;
        if (codec_decode(e->data, e->len, &m, derr, sizeof derr) != 0) continue;
        trace_msg(&tr, &m, e);
        msg_done(&m);
    }
    /* A phase lasts until the next one; the last one until the rank's last sign of life. */
    for (int k = 0; k < tr.n_ranks; k++)
        if (tr.ranks[k].in_phase) close_phase(&tr, k, &tr.ranks[k], tr.ranks[k].last_ns);
    json_text(w, "\n");
    json_arr_end(w);
    json_obj_end(w);
    json_text(w, "\n");
    free(tr.ranks);
    return export_check_stream(f, "the Chrome trace", err, errlen);
}
