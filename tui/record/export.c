/* export.c — `ddptop export`: Chrome trace JSON, JSON lines and step CSV
 * from a recording. See export.h; formats in docs/RECORDING.md.
 *
 * Owns: JSON writing (escaping, numbers), the mapping from messages to
 * trace events (a process per rank; phase, compute and comm threads; spans
 * in µs; loss as a counter), the generic msgpack-to-JSON walk behind
 * --jsonl, and the subcommand's argument handling.
 * Every value comes from a file and is treated as hostile: frames go
 * through codec_decode (bounded pre-scan) before anything walks them, times
 * and durations are clamped, ranks are bounded. Main thread only.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "record/export.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <msgpack.h>

#include "wire/codec.h"
#include "wire/protocol.h"
#include "base/err.h"
#include "base/utf8.h"

/* Ranks above this are not given a trace process (a hostile "r"). */
#define EXPORT_MAX_RANKS 65536
/* Longest span we believe: anything longer is a garbled duration. */
#define EXPORT_MAX_SPAN_NS (86400LL * 1000000000LL)
/* Trace threads, top to bottom in the viewer. */
enum { TID_PHASE = 1, TID_COMPUTE = 2, TID_COMM = 3 };

/* ---- JSON output ------------------------------------------------------ */

/* A JSON string: quotes, backslashes and control characters escaped,
 * ill-formed UTF-8 bytes replaced by U+FFFD. */
static void json_strn(FILE *f, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    fputc('"', f);
    size_t i = 0;
    while (i < n) {
        unsigned c = p[i];
        if (c == '"' || c == '\\') { fputc('\\', f); fputc((int)c, f); i++; }
        else if (c == '\n') { fputs("\\n", f); i++; }
        else if (c == '\r') { fputs("\\r", f); i++; }
        else if (c == '\t') { fputs("\\t", f); i++; }
        else if (c < 0x20 || c == 0x7f) { fprintf(f, "\\u%04x", c); i++; }
        else if (c < 0x80) { fputc((int)c, f); i++; }
        else {
            size_t k = utf8_seq(p + i, n - i);
            if (k) { fwrite(p + i, 1, k, f); i += k; }
            else { fputs("\\ufffd", f); i++; }
        }
    }
    fputc('"', f);
}

static void json_str(FILE *f, const char *s) { json_strn(f, s, strlen(s)); }

/* The shortest %g that reads back as v. */
static void fmt_double(char *buf, size_t n, double v)
{
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) return;
    }
}

/* A JSON number; NaN and infinities (a diverged loss) have no JSON form and
 * become null. Integral values keep a ".0" so readers see a float. */
static void json_double(FILE *f, double v)
{
    if (!isfinite(v)) { fputs("null", f); return; }
    char b[40];
    fmt_double(b, sizeof b, v);
    fputs(b, f);
    if (!strpbrk(b, ".eE")) fputs(".0", f);
}

static void json_hex(FILE *f, const void *data, size_t n)
{
    const unsigned char *p = data;
    fputc('"', f);
    for (size_t i = 0; i < n; i++) fprintf(f, "%02x", p[i]);
    fputc('"', f);
}

/* Integer ns as µs with three decimals, exactly (no floating point). */
static void json_us(FILE *f, int64_t ns)
{
    if (ns < 0) { fputc('-', f); ns = -ns; }
    fprintf(f, "%" PRId64 ".%03d", ns / 1000, (int)(ns % 1000));
}

/* Any msgpack value as JSON. Only called on frames codec_decode accepted,
 * so depth and sizes are already bounded. */
static void json_obj(FILE *f, const msgpack_object *o)
{
    switch (o->type) {
    case MSGPACK_OBJECT_NIL: fputs("null", f); break;
    case MSGPACK_OBJECT_BOOLEAN: fputs(o->via.boolean ? "true" : "false", f); break;
    case MSGPACK_OBJECT_POSITIVE_INTEGER: fprintf(f, "%" PRIu64, o->via.u64); break;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: fprintf(f, "%" PRId64, o->via.i64); break;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64: json_double(f, o->via.f64); break;
    case MSGPACK_OBJECT_STR: json_strn(f, o->via.str.ptr, o->via.str.size); break;
    case MSGPACK_OBJECT_BIN: json_hex(f, o->via.bin.ptr, o->via.bin.size); break;
    case MSGPACK_OBJECT_EXT: json_hex(f, o->via.ext.ptr, o->via.ext.size); break;
    case MSGPACK_OBJECT_ARRAY:
        fputc('[', f);
        for (uint32_t i = 0; i < o->via.array.size; i++) {
            if (i) fputc(',', f);
            json_obj(f, &o->via.array.ptr[i]);
        }
        fputc(']', f);
        break;
    case MSGPACK_OBJECT_MAP:
        fputc('{', f);
        for (uint32_t i = 0; i < o->via.map.size; i++) {
            const msgpack_object_kv *kv = &o->via.map.ptr[i];
            if (i) fputc(',', f);
            /* JSON keys are strings: other keys (only in unknown nested
             * values) are written as their JSON text, quoted. */
            if (kv->key.type == MSGPACK_OBJECT_STR) json_strn(f, kv->key.via.str.ptr, kv->key.via.str.size);
            else if (kv->key.type == MSGPACK_OBJECT_POSITIVE_INTEGER) fprintf(f, "\"%" PRIu64 "\"", kv->key.via.u64);
            else if (kv->key.type == MSGPACK_OBJECT_NEGATIVE_INTEGER) fprintf(f, "\"%" PRId64 "\"", kv->key.via.i64);
            else fputs("\"?\"", f);
            fputc(':', f);
            json_obj(f, &kv->val);
        }
        fputc('}', f);
        break;
    default: fputs("null", f); break;
    }
}

static int check_stream(FILE *f, const char *what, char *err, size_t errlen)
{
    if (fflush(f) || ferror(f)) return err_set(err, errlen, "writing %s: %s", what, strerror(errno));
    return 0;
}

/* ---- Chrome trace ----------------------------------------------------- */

typedef struct {
    bool seen;               /* metadata written */
    bool in_phase;
    Phase phase;
    int64_t phase_ns;        /* start of the current phase span (wall ns) */
    char detail[PROTO_STR_LONG];
    int64_t last_ns;         /* latest time anything of this rank happened */
} TraceRank;

typedef struct {
    FILE *f;
    int64_t base_ns;         /* trace time 0 */
    bool first;              /* no event written yet */
    TraceRank *ranks;
    int n_ranks;             /* allocated */
    uint64_t events;
    uint64_t ignored;        /* messages with no usable rank */
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

static void ev_begin(Trace *tr)
{
    fputs(tr->first ? "\n" : ",\n", tr->f);
    tr->first = false;
    tr->events++;
}

static void ev_meta(Trace *tr, int pid, int tid, const char *what, const char *key, const char *sval, int ival)
{
    ev_begin(tr);
    fprintf(tr->f, "{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%d", what, pid);
    if (tid >= 0) fprintf(tr->f, ",\"tid\":%d", tid);
    fprintf(tr->f, ",\"args\":{\"%s\":", key);
    if (sval) json_str(tr->f, sval);
    else fprintf(tr->f, "%d", ival);
    fputs("}}", tr->f);
}

/* Start an event up to its args: name, cat, ph, pid, tid, ts. */
static void ev_head(Trace *tr, const char *name, const char *cat, char ph, int pid, int tid, int64_t ns)
{
    ev_begin(tr);
    fputs("{\"name\":", tr->f);
    json_str(tr->f, name);
    fprintf(tr->f, ",\"cat\":\"%s\",\"ph\":\"%c\",\"pid\":%d,\"tid\":%d,\"ts\":", cat, ph, pid, tid);
    json_us(tr->f, ns - tr->base_ns);
}

/* A complete span ("X"); the caller writes args (or not) and closes with
 * ev_end. */
static void ev_span(Trace *tr, const char *name, const char *cat, int pid, int tid, int64_t start,
                    int64_t dur)
{
    ev_head(tr, name, cat, 'X', pid, tid, start);
    fputs(",\"dur\":", tr->f);
    json_us(tr->f, dur);
}

static void ev_args_begin(Trace *tr) { fputs(",\"args\":{", tr->f); }
static void ev_end(Trace *tr, bool had_args) { fputs(had_args ? "}}" : "}", tr->f); }

static void arg_i(Trace *tr, bool first, const char *k, int64_t v)
{
    fprintf(tr->f, "%s\"%s\":%" PRId64, first ? "" : ",", k, v);
}
static void arg_d(Trace *tr, bool first, const char *k, double v)
{
    fprintf(tr->f, "%s\"%s\":", first ? "" : ",", k);
    json_double(tr->f, v);
}
static void arg_s(Trace *tr, bool first, const char *k, const char *v)
{
    fprintf(tr->f, "%s\"%s\":", first ? "" : ",", k);
    json_str(tr->f, v);
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
        if (!nr) { tr->ignored++; return NULL; }
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
    ev_span(tr, phase_name(R->phase), "phase", rank, TID_PHASE, R->phase_ns, dur);
    bool args = R->detail[0] != 0;
    if (args) {
        ev_args_begin(tr);
        arg_s(tr, true, "detail", R->detail);
    }
    ev_end(tr, args);
    R->in_phase = false;
}

static void trace_step(Trace *tr, int rank, const Msg *m, int64_t end)
{
    const MsgStep *s = &m->u.step;
    int64_t dur = span_ns(s->step_ms);
    int64_t start = end - dur;
    char name[48];
    snprintf(name, sizeof name, "step %" PRId64, s->step);
    ev_span(tr, name, "compute", rank, TID_COMPUTE, start, dur);
    ev_args_begin(tr);
    arg_i(tr, true, "epoch", s->epoch);
    arg_i(tr, false, "step", s->step);
    arg_d(tr, false, "loss", s->loss);
    arg_d(tr, false, "lr", s->lr);
    arg_i(tr, false, "samples", s->samples);
    arg_d(tr, false, "step_ms", s->step_ms);
    arg_d(tr, false, "comm_ms", s->comm_ms);
    arg_d(tr, false, "exposed_ms", s->exposed_ms);
    arg_i(tr, false, "drops", (int64_t)s->drops);
    if (s->dev_mem_total > 0) arg_i(tr, false, "dev_mem", s->dev_mem);
    ev_end(tr, true);
    /* Forward and backward from the step's start, the optimizer at its end;
     * each clamped inside the step so the nesting holds. */
    int64_t fwd = span_ns(s->fwd_ms), bwd = span_ns(s->bwd_ms), opt = span_ns(s->opt_ms);
    if (fwd > dur) fwd = dur;
    if (bwd > dur - fwd) bwd = dur - fwd;
    if (opt > dur - fwd - bwd) opt = dur - fwd - bwd;
    if (fwd) { ev_span(tr, "forward", "compute", rank, TID_COMPUTE, start, fwd); ev_end(tr, false); }
    if (bwd) { ev_span(tr, "backward", "compute", rank, TID_COMPUTE, start + fwd, bwd); ev_end(tr, false); }
    if (opt) { ev_span(tr, "optimizer", "compute", rank, TID_COMPUTE, end - opt, opt); ev_end(tr, false); }
    if (isfinite(s->loss)) {
        ev_head(tr, "loss", "loss", 'C', rank, TID_COMPUTE, end);
        ev_args_begin(tr);
        arg_d(tr, true, "loss", s->loss);
        ev_end(tr, true);
    }
}

static void trace_coll(Trace *tr, int rank, const Msg *m, const RecEntry *e, TraceRank *R)
{
    const MsgColl *c = &m->u.coll;
    int64_t start, dur;
    coll_span(m, e, &start, &dur);
    touch(R, start + dur);
    char name[64];
    if (c->bucket >= 0) snprintf(name, sizeof name, "%s bucket %d", c->op[0] ? c->op : "coll", (int)c->bucket);
    else snprintf(name, sizeof name, "%s", c->op[0] ? c->op : "coll");
    ev_span(tr, name, "comm", rank, TID_COMM, start, dur);
    ev_args_begin(tr);
    arg_i(tr, true, "bytes", c->bytes);
    arg_d(tr, false, "algbw_GBps", c->algbw_gbs);
    arg_d(tr, false, "busbw_GBps", c->busbw_gbs);
    arg_i(tr, false, "bucket", c->bucket);
    arg_i(tr, false, "seq", c->seq);
    arg_i(tr, false, "step", c->step);
    if (sane_ns(c->enq_ns) && c->enq_ns <= start) arg_d(tr, false, "queued_us", (double)(start - c->enq_ns) / 1e3);
    ev_end(tr, true);
}

static void trace_msg(Trace *tr, const Msg *m, const RecEntry *e)
{
    int rank = m->rank;
    if (m->kind == MSG_CMD || m->kind == MSG_VAL || m->kind == MSG_SET || m->kind == MSG_GET ||
        m->kind == MSG_WAIT)
        return;   /* commands and rendezvous plumbing: not part of the timeline */
    TraceRank *R = trace_rank(tr, rank);
    if (!R) return;
    int64_t t = msg_time(m, e);
    touch(R, t);
    char name[PROTO_STR_LONG + 32];
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
    case MSG_STEP:
        trace_step(tr, rank, m, t);
        break;
    case MSG_COLL:
        trace_coll(tr, rank, m, e, R);
        break;
    case MSG_CKPT: {
        const MsgCkpt *c = &m->u.ckpt;
        int64_t dur = span_ns(c->ms);
        snprintf(name, sizeof name, "checkpoint step %" PRId64 "%s", c->step, c->ok ? "" : " (failed)");
        ev_span(tr, name, "ckpt", rank, TID_COMPUTE, t - dur, dur);
        ev_args_begin(tr);
        arg_i(tr, true, "step", c->step);
        arg_i(tr, false, "epoch", c->epoch);
        fprintf(tr->f, ",\"ok\":%s", c->ok ? "true" : "false");
        arg_s(tr, false, "path", c->path);
        arg_i(tr, false, "bytes", c->bytes);
        arg_d(tr, false, "ms", c->ms);
        if (c->error[0]) arg_s(tr, false, "error", c->error);
        ev_end(tr, true);
        break;
    }
    case MSG_LOG:
        ev_head(tr, m->u.log.text, "log", 'i', rank, TID_PHASE, t);
        fputs(",\"s\":\"t\"", tr->f);
        ev_args_begin(tr);
        arg_s(tr, true, "level", m->u.log.level);
        ev_end(tr, true);
        break;
    case MSG_EVAL:
        /* Test-set figures after an epoch: a counter beside the loss. */
        if (isfinite(m->u.eval.loss) && isfinite(m->u.eval.accuracy)) {
            ev_head(tr, "eval", "eval", 'C', rank, TID_COMPUTE, t);
            ev_args_begin(tr);
            arg_d(tr, true, "loss", m->u.eval.loss);
            arg_d(tr, false, "accuracy", m->u.eval.accuracy);
            ev_end(tr, true);
        }
        break;
    case MSG_BYE:
        snprintf(name, sizeof name, "bye (status %d)", (int)m->u.bye.status);
        ev_head(tr, name, "phase", 'i', rank, TID_PHASE, t);
        fputs(",\"s\":\"t\"", tr->f);
        ev_args_begin(tr);
        arg_i(tr, true, "status", m->u.bye.status);
        arg_i(tr, false, "step", m->u.bye.step);
        ev_end(tr, true);
        break;
    default:
        break;
    }
}

/* "exit 0", "signal 9", from a waitpid status. */
static void wait_text(char *buf, size_t n, int st)
{
    if (WIFEXITED(st)) snprintf(buf, n, "exit %d", WEXITSTATUS(st));
    else if (WIFSIGNALED(st)) snprintf(buf, n, "signal %d", WTERMSIG(st));
    else snprintf(buf, n, "status %d", st);
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
    wait_text(how, sizeof how, p.wait_status);
    snprintf(name, sizeof name, "process %s%s%s", how, p.how[0] ? ", " : "", p.how);
    ev_head(tr, name, "process", 'i', p.rank, TID_PHASE, t);
    fputs(",\"s\":\"p\"", tr->f);
    ev_args_begin(tr);
    arg_i(tr, true, "pid", p.pid);
    arg_i(tr, false, "wait_status", p.wait_status);
    ev_end(tr, true);
}

int export_chrome_trace(const Recording *r, const char *name, FILE *f, char *err, size_t errlen)
{
    Trace tr = {.f = f, .first = true};
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

    fputs("{\"displayTimeUnit\":\"ms\",\"otherData\":{\"generator\":\"ddptop export\",\"recording\":", f);
    json_str(f, name ? name : "");
    fputs(",\"description\":", f);
    json_str(f, r->hdr.desc ? r->hdr.desc : "");
    fprintf(f, ",\"world\":%d,\"created_wall_ns\":%" PRId64 ",\"time0_wall_ns\":%" PRId64
               ",\"complete\":%s", (int)r->hdr.world, r->hdr.created_wall_ns, tr.base_ns,
            r->complete ? "true" : "false");
    if (!r->complete) {
        fputs(",\"ends_early\":", f);
        json_str(f, r->tail);
    }
    fputs("},\n\"traceEvents\":[", f);

    /* Pass 2: the events, in arrival order. */
    for (size_t i = 0; i < r->n; i++) {
        const RecEntry *e = &r->recs[i];
        if (e->src == REC_SRC_EXIT) { trace_exit(&tr, e); continue; }
        if (e->src != REC_SRC_TEL && e->src != REC_SRC_CTL) continue;
        Msg m;
        if (codec_decode(e->data, e->len, &m, derr, sizeof derr) != 0) continue;
        trace_msg(&tr, &m, e);
        msg_done(&m);
    }
    /* A phase lasts until the next one; the last one until the rank's last sign of life. */
    for (int k = 0; k < tr.n_ranks; k++)
        if (tr.ranks[k].in_phase) close_phase(&tr, k, &tr.ranks[k], tr.ranks[k].last_ns);
    fputs("\n]}\n", f);
    free(tr.ranks);
    return check_stream(f, "the Chrome trace", err, errlen);
}

/* ---- JSON lines ------------------------------------------------------- */

static void jsonl_prefix(FILE *f, const RecEntry *e, const char *src)
{
    fprintf(f, "{\"_src\":\"%s\",\"_t_ns\":%" PRId64 ",\"_wall_ns\":%" PRId64, src, e->t_ns,
            e->wall_ns);
}

static void jsonl_frame(FILE *f, const RecEntry *e)
{
    Msg m;
    char derr[256];
    int rc = codec_decode(e->data, e->len, &m, derr, sizeof derr);
    jsonl_prefix(f, e, rec_source_name(e->src));
    if (rc < 0) {
        /* Recorded as received, but not a frame anyone can read. */
        fprintf(f, ",\"_bytes\":%" PRIu32 ",\"_error\":", e->len);
        json_str(f, derr);
        fputs("}\n", f);
        return;
    }
    msg_done(&m);
    /* Every key of the frame, in its order, unknown ones included: the
     * pre-scan in codec_decode has bounded what this walk can meet. */
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    size_t off = 0;
    if (msgpack_unpack_next(&up, (const char *)e->data, e->len, &off) == MSGPACK_UNPACK_SUCCESS &&
        up.data.type == MSGPACK_OBJECT_MAP) {
        const msgpack_object_map *mp = &up.data.via.map;
        for (uint32_t i = 0; i < mp->size; i++) {
            fputc(',', f);
            json_strn(f, mp->ptr[i].key.via.str.ptr, mp->ptr[i].key.via.str.size);
            fputc(':', f);
            json_obj(f, &mp->ptr[i].val);
        }
    }
    msgpack_unpacked_destroy(&up);
    fputs("}\n", f);
}

int export_jsonl(const Recording *r, FILE *f, char *err, size_t errlen)
{
    for (size_t i = 0; i < r->n; i++) {
        const RecEntry *e = &r->recs[i];
        RecProc p;
        RecNote nt;
        switch (e->src) {
        case REC_SRC_TEL:
        case REC_SRC_CTL:
        case REC_SRC_SENT:
            jsonl_frame(f, e);
            break;
        case REC_SRC_START:
        case REC_SRC_EXIT:
            jsonl_prefix(f, e, rec_source_name(e->src));
            if (rec_proc_decode(e, &p) == 0) {
                fprintf(f, ",\"r\":%d,\"pid\":%d", (int)p.rank, (int)p.pid);
                if (e->src == REC_SRC_EXIT) {
                    char how[32];
                    wait_text(how, sizeof how, p.wait_status);
                    fprintf(f, ",\"wait_status\":%d,\"status\":", (int)p.wait_status);
                    json_str(f, how);
                    fputs(",\"how\":", f);
                    json_str(f, p.how);
                }
            } else {
                fputs(",\"_error\":\"malformed process record\"", f);
            }
            fputs("}\n", f);
            break;
        case REC_SRC_NOTE:
            jsonl_prefix(f, e, "note");
            if (rec_note_decode(e, &nt) == 0) {
                static const char *lv[] = {"info", "warn", "error"};
                fprintf(f, ",\"r\":%d,\"level\":\"%s\",\"text\":", (int)nt.rank,
                        nt.level >= 0 && nt.level <= 2 ? lv[nt.level] : "info");
                json_str(f, nt.text);
            } else {
                fputs(",\"_error\":\"malformed note record\"", f);
            }
            fputs("}\n", f);
            break;
        default:
            /* A newer writer's record kind: say it is there. */
            jsonl_prefix(f, e, "unknown");
            fprintf(f, ",\"_src_id\":%d,\"_bytes\":%" PRIu32 "}\n", e->src, e->len);
            break;
        }
    }
    return check_stream(f, "the JSON lines", err, errlen);
}

/* ---- CSV -------------------------------------------------------------- */

typedef struct {
    int rank;
    size_t order;            /* arrival, to keep each rank's rows in order */
    int64_t epoch, step;
    double loss, step_ms, comm_ms;
} CsvRow;

static int csv_cmp(const void *a, const void *b)
{
    const CsvRow *x = a, *y = b;
    if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

static void csv_double(FILE *f, double v)
{
    if (isnan(v)) { fputs("nan", f); return; }
    if (isinf(v)) { fputs(v > 0 ? "inf" : "-inf", f); return; }
    char b[40];
    fmt_double(b, sizeof b, v);
    fputs(b, f);
}

int export_csv(const Recording *r, FILE *f, char *err, size_t errlen)
{
    CsvRow *rows = NULL;
    size_t n = 0, cap = 0;
    char derr[256];
    for (size_t i = 0; i < r->n; i++) {
        const RecEntry *e = &r->recs[i];
        if (e->src != REC_SRC_TEL && e->src != REC_SRC_CTL) continue;
        Msg m;
        if (codec_decode(e->data, e->len, &m, derr, sizeof derr) != 0) continue;
        if (m.kind == MSG_STEP && m.rank >= 0) {
            if (n == cap) {
                size_t nc = cap ? cap * 2 : 1024;
                CsvRow *nr = realloc(rows, nc * sizeof *nr);
                if (!nr) { msg_done(&m); free(rows); return err_set(err, errlen, "out of memory"); }
                rows = nr;
                cap = nc;
            }
            rows[n++] = (CsvRow){m.rank, i, m.u.step.epoch, m.u.step.step, m.u.step.loss,
                                 m.u.step.step_ms, m.u.step.comm_ms};
        }
        msg_done(&m);
    }
    if (n) qsort(rows, n, sizeof *rows, csv_cmp);
    fputs("rank,epoch,step,loss,step_ms,comm_ms\n", f);
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "%d,%" PRId64 ",%" PRId64 ",", rows[i].rank, rows[i].epoch, rows[i].step);
        csv_double(f, rows[i].loss);
        fputc(',', f);
        csv_double(f, rows[i].step_ms);
        fputc(',', f);
        csv_double(f, rows[i].comm_ms);
        fputc('\n', f);
    }
    free(rows);
    return check_stream(f, "the CSV", err, errlen);
}

/* ---- the subcommand --------------------------------------------------- */

enum { OUT_TRACE, OUT_JSONL, OUT_CSV, OUT__COUNT };
static const char *const out_flag[OUT__COUNT] = {"--chrome-trace", "--jsonl", "--csv"};

static const char EXPORT_USAGE[] =
    "usage: ddptop export FILE [--chrome-trace OUT.json] [--jsonl OUT] [--csv OUT]\n"
    "\n"
    "Turn a recording (ddptop run --record FILE) into:\n"
    "  --chrome-trace OUT.json  Trace Event Format for Perfetto (ui.perfetto.dev) and\n"
    "                           chrome://tracing: a process per rank; phase, compute and\n"
    "                           comm threads; steps, all-reduce buckets, checkpoints and\n"
    "                           phases as spans; loss as a counter\n"
    "  --jsonl OUT              one JSON object per record, every key, with arrival times\n"
    "  --csv OUT                per-rank steps: rank,epoch,step,loss,step_ms,comm_ms\n"
    "Several at once are fine; OUT - writes to standard output.\n";

static int usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "ddptop export: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (see ddptop export --help)\n");
    return 2;
}

static bool same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

int export_main(int argc, char **argv)
{
    const char *in = NULL, *out[OUT__COUNT] = {NULL, NULL, NULL};
    int to_stdout = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(EXPORT_USAGE, stdout); return 0; }
        int k = -1;
        for (int j = 0; j < OUT__COUNT; j++)
            if (!strcmp(a, out_flag[j])) k = j;
        if (k >= 0) {
            if (i + 1 >= argc || !argv[i + 1][0]) return usage("%s: missing output file", a);
            if (out[k]) return usage("%s given twice", a);
            out[k] = argv[++i];
            if (!strcmp(out[k], "-") && ++to_stdout > 1) return usage("%s: only one output can be - (stdout)", a);
        } else if (a[0] == '-' && a[1]) {
            return usage("unknown option \"%s\"", a);
        } else if (in) {
            return usage("one recording at a time (got \"%s\" too)", a);
        } else {
            in = a;
        }
    }
    if (!in) return usage("%s", "which recording? ddptop export FILE --chrome-trace OUT.json");
    if (!out[OUT_TRACE] && !out[OUT_JSONL] && !out[OUT_CSV])
        return usage("%s", "nothing to do: give --chrome-trace OUT, --jsonl OUT and/or --csv OUT");
    for (int k = 0; k < OUT__COUNT; k++) {
        if (!out[k] || !strcmp(out[k], "-")) continue;
        if (same_file(in, out[k])) return usage("%s would overwrite the recording itself", out_flag[k]);
        for (int j = 0; j < k; j++)
            if (out[j] && !strcmp(out[j], out[k])) return usage("%s: same output file twice", out[k]);
    }

    char err[512];
    Recording *rec = NULL;
    if (recording_load(in, &rec, err, sizeof err)) {
        fprintf(stderr, "ddptop export: %s\n", err);
        return 2;
    }
    if (!rec->complete) fprintf(stderr, "ddptop export: warning: %s: %s\n", in, rec->tail);

    /* Open every output before writing any, so a bad path costs nothing. */
    FILE *f[OUT__COUNT] = {NULL, NULL, NULL};
    bool regular[OUT__COUNT] = {false, false, false};
    int status = 0;
    for (int k = 0; k < OUT__COUNT && !status; k++) {
        if (!out[k]) continue;
        f[k] = strcmp(out[k], "-") ? fopen(out[k], "w") : stdout;
        if (!f[k]) {
            fprintf(stderr, "ddptop export: %s %s: %s\n", out_flag[k], out[k], strerror(errno));
            status = 2;
            break;
        }
        struct stat st;
        regular[k] = f[k] != stdout && fstat(fileno(f[k]), &st) == 0 && S_ISREG(st.st_mode);
    }
    for (int k = 0; k < OUT__COUNT && !status; k++) {
        if (!f[k]) continue;
        int rc = k == OUT_TRACE ? export_chrome_trace(rec, in, f[k], err, sizeof err)
               : k == OUT_JSONL ? export_jsonl(rec, f[k], err, sizeof err)
                                : export_csv(rec, f[k], err, sizeof err);
        if (rc) {
            fprintf(stderr, "ddptop export: %s: %s\n", out[k], err);
            status = 1;
        }
    }
    for (int k = 0; k < OUT__COUNT; k++) {
        if (!f[k] || f[k] == stdout) continue;
        if (fclose(f[k]) && !status) {
            fprintf(stderr, "ddptop export: %s: %s\n", out[k], strerror(errno));
            status = 1;
        }
        /* A half-written file would only mislead (a device or a pipe is
         * not ours to remove). */
        if (status && regular[k]) unlink(out[k]);
    }
    recording_free(&rec);
    return status;
}
