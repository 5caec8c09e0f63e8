/* view_headless.c — ddptop without a screen: new job events as lines, a
 * progress line once a second, and a summary with the verdict at the end;
 * plain text for people and CI logs, or JSON lines for programs.
 *
 * Owns: the printing state in ViewHeadless. Reads the Job, never changes
 * it. Main thread only.
 *
 * Times are seconds since the job was created ("[  12.3s]", "t"). An
 * event's time is when ddptop saw what caused it, not when it is printed.
 */
#include "wire/codec.h"
#include "view/view.h"

#include "base/utf8.h"

#include <math.h>
#include <string.h>

#define NS_PER_S 1000000000LL
/* Up to this many ranks the progress line lists every rank's loss. */
#define HEADLESS_LOSS_LIST_MAX 4

void view_headless_init(ViewHeadless *h, FILE *out, bool json)
{
    memset(h, 0, sizeof *h);
    h->out = out ? out : stdout;
    h->json = json;
}

static double secs_since_start(const Job *j, int64_t mono_ns)
{
    return (double)(mono_ns - j->start_ns) / 1e9;
}

/* ---- output helpers ---- */

/* Length of a valid UTF-8 sequence at p (1..4), or 0 if invalid; stops at
 * the NUL (strnlen bounds what the rule may read). */
static int utf8_len(const unsigned char *p)
{
    return (int)utf8_seq(p, strnlen((const char *)p, 4));
}

/* Text from workers may hold newlines, escape sequences or broken UTF-8:
 * one event must stay one line and must not drive the reader's terminal. */
static void put_text(FILE *out, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        int n = utf8_len(p);
        if (*p == '\n' || *p == '\r' || *p == '\t')
            fputc(' ', out);
        else if (*p < 0x20 || *p == 0x7f || n == 0)
            fputc('?', out);
        else
            fwrite(p, 1, (size_t)n, out);
        p += n ? n : 1;
    }
}

/* A JSON string: escapes, and U+FFFD for bytes that are not UTF-8 so the
 * line stays valid JSON whatever a worker sent. */
static void put_json_str(FILE *out, const char *s)
{
    fputc('"', out);
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned char c = *p;
        switch (c) {
        case '"': fputs("\\\"", out); p++; continue;
        case '\\': fputs("\\\\", out); p++; continue;
        case '\n': fputs("\\n", out); p++; continue;
        case '\r': fputs("\\r", out); p++; continue;
        case '\t': fputs("\\t", out); p++; continue;
        case '\b': fputs("\\b", out); p++; continue;
        case '\f': fputs("\\f", out); p++; continue;
        default: break;
        }
        if (c < 0x20 || c == 0x7f) {
            fprintf(out, "\\u%04x", c);
            p++;
            continue;
        }
        int n = utf8_len(p);
        if (n == 0) {
            fputs("\\ufffd", out);
            p++;
            continue;
        }
        fwrite(p, 1, (size_t)n, out);
        p += n;
    }
    fputc('"', out);
}

/* JSON has no NaN or infinity: a diverged loss becomes null. */
static void put_json_num(FILE *out, double v, const char *fmt)
{
    if (isfinite(v))
        fprintf(out, fmt, v);
    else
        fputs("null", out);
}

static const char *level_name(JobEventLevel l)
{
    switch (l) {
    case EV_WARN: return "warn";
    case EV_ERROR: return "error";
    default: return "info";
    }
}

static const char *phase_str(Phase p)
{
    return p == PHASE_NONE ? "-" : phase_name(p);
}

/* ---- events ---- */

static void print_event(ViewHeadless *h, const Job *j, const JobEvent *e)
{
    double t = secs_since_start(j, e->mono_ns);
    if (h->json) {
        fprintf(h->out, "{\"k\":\"event\",\"t\":%.3f,\"r\":%d,\"level\":\"%s\",\"text\":", t, e->rank,
                level_name(e->level));
        put_json_str(h->out, e->text);
        fputs("}\n", h->out);
        return;
    }
    fprintf(h->out, "[%6.1fs] ", t);
    if (e->rank < 0)
        fputs("ddptop ", h->out);
    else
        fprintf(h->out, "r%d ", e->rank);
    /* in a log the level must show without colour */
    if (e->level == EV_WARN)
        fputs("warning: ", h->out);
    else if (e->level == EV_ERROR)
        fputs("error: ", h->out);
    put_text(h->out, e->text);
    fputc('\n', h->out);
}

static void print_events(ViewHeadless *h, const Job *j, int64_t now_ns)
{
    if (h->ev_printed > j->ev_total)     /* a different job: start over */
        h->ev_printed = 0;
    /* the ring overwrote some before we got to them: say so, once */
    if (j->ev_total - h->ev_printed > JOB_EVENTS) {
        uint64_t lost = j->ev_total - h->ev_printed - JOB_EVENTS;
        double t = secs_since_start(j, now_ns);
        if (h->json)
            fprintf(h->out, "{\"k\":\"events_lost\",\"t\":%.3f,\"n\":%llu}\n", t, (unsigned long long)lost);
        else
            fprintf(h->out, "[%6.1fs] ddptop %llu events lost (printing fell behind)\n", t,
                    (unsigned long long)lost);
        h->ev_printed += lost;
    }
    for (; h->ev_printed < j->ev_total; h->ev_printed++) {
        const JobEvent *e = job_event_nth(j, h->ev_printed);
        if (e)
            print_event(h, j, e);
    }
}

/* Evals are kept apart from the events (see job.c); here they are lines of
 * their own, as a training script would print them. */
static void print_evals(ViewHeadless *h, const Job *j)
{
    if (h->evals_printed > j->n_evals)
        h->evals_printed = 0;
    if (j->n_evals - h->evals_printed > JOB_EVALS)
        h->evals_printed = j->n_evals - JOB_EVALS;
    for (; h->evals_printed < j->n_evals; h->evals_printed++) {
        const JobEval *e = job_eval_at(j, j->n_evals - 1 - h->evals_printed);
        if (!e)
            continue;
        double t = secs_since_start(j, e->t_ns);
        if (h->json) {
            fprintf(h->out, "{\"k\":\"eval\",\"t\":%.3f,\"epoch\":%lld,\"step\":%lld,\"accuracy\":", t,
                    (long long)e->epoch, (long long)e->step);
            put_json_num(h->out, e->accuracy, "%.6g");
            fputs(",\"loss\":", h->out);
            put_json_num(h->out, e->loss, "%.6g");
            fprintf(h->out, ",\"correct\":%lld,\"total\":%lld}\n", (long long)e->correct, (long long)e->total);
        } else {
            fprintf(h->out, "[%6.1fs] eval after epoch %lld (step %lld): accuracy %.2f%% (%lld/%lld), loss %.4f\n", t,
                    (long long)e->epoch, (long long)e->step, e->accuracy * 100, (long long)e->correct,
                    (long long)e->total, e->loss);
        }
    }
}

/* ---- progress ---- */

/* Mean over ranks that stepped: the figure a DDP script would print after
 * averaging; per-rank values come next to it. */
static double mean_loss(const Job *j)
{
    double sum = 0;
    int n = 0;
    for (int i = 0; i < j->world; i++)
        if (j->ranks[i].have_step) {
            sum += j->ranks[i].last.loss;
            n++;
        }
    return n ? sum / n : NAN;
}

static double mean_allreduce_ms(const Job *j)
{
    double sum = 0;
    int n = 0;
    for (int i = 0; i < j->world; i++)
        if (j->ranks[i].have_step || j->ranks[i].have_coll) {
            sum += job_rank_allreduce_ms(&j->ranks[i]);
            n++;
        }
    return n ? sum / n : 0;
}

static void print_progress_text(ViewHeadless *h, const Job *j, double t)
{
    FILE *o = h->out;
    fprintf(o, "[%6.1fs] epoch %lld step %lld", t, (long long)j->epoch, (long long)j->step);
    if (j->max_steps > 0)
        fprintf(o, "/%lld", (long long)j->max_steps);
    fprintf(o, "  loss %.4f", mean_loss(j));
    if (j->world <= HEADLESS_LOSS_LIST_MAX) {
        fputs(" (", o);
        for (int i = 0; i < j->world; i++) {
            const JobRank *r = &j->ranks[i];
            if (r->have_step)
                fprintf(o, "%sr%d %.2f", i ? " " : "", i, r->last.loss);
            else
                fprintf(o, "%sr%d -", i ? " " : "", i);
        }
        fputc(')', o);
    } else {
        /* many ranks: the spread says more than a long list */
        int lo = -1, hi = -1;
        for (int i = 0; i < j->world; i++) {
            const JobRank *r = &j->ranks[i];
            if (!r->have_step)
                continue;
            if (lo < 0 || r->last.loss < j->ranks[lo].last.loss)
                lo = i;
            if (hi < 0 || r->last.loss > j->ranks[hi].last.loss)
                hi = i;
        }
        if (lo >= 0)
            fprintf(o, " (min r%d %.2f, max r%d %.2f)", lo, j->ranks[lo].last.loss, hi, j->ranks[hi].last.loss);
    }
    fprintf(o, "  %.0f samples/s  allreduce %.1f ms  drops %llu", j->samples_per_s, mean_allreduce_ms(j),
            (unsigned long long)j->drops);
    if (j->bad_frames)
        fprintf(o, "  bad frames %llu", (unsigned long long)j->bad_frames);
    fputc('\n', o);
}

static void print_progress_json(ViewHeadless *h, const Job *j, double t)
{
    FILE *o = h->out;
    fprintf(o, "{\"k\":\"progress\",\"t\":%.3f,\"epoch\":%lld,\"step\":%lld,\"max_steps\":%lld,\"loss\":[", t,
            (long long)j->epoch, (long long)j->step, (long long)j->max_steps);
    for (int i = 0; i < j->world; i++) {
        if (i)
            fputc(',', o);
        if (j->ranks[i].have_step)
            put_json_num(o, j->ranks[i].last.loss, "%.6g");
        else
            fputs("null", o);
    }
    fputs("],\"samples_per_s\":", o);
    put_json_num(o, j->samples_per_s, "%.1f");
    fputs(",\"allreduce_ms\":", o);
    put_json_num(o, mean_allreduce_ms(j), "%.3f");
    fprintf(o, ",\"drops\":%llu,\"bad_frames\":%llu,\"state\":\"%s\"}\n", (unsigned long long)j->drops,
            (unsigned long long)j->bad_frames, job_state_name(j->state));
}

void view_headless_hang(ViewHeadless *h, const Job *j, const HangReport *hr, int64_t now_ns)
{
    if (!h || !h->json || !hr || !hr->hung)
        return;   /* text mode: the verdict is an event line already */
    FILE *o = h->out;
    fprintf(o, "{\"k\":\"hang\",\"t\":%.3f,\"seq\":%lld,\"op\":", secs_since_start(j, now_ns),
            (long long)hr->seq);
    put_json_str(o, hr->op);
    fputs(",\"waiting\":[", o);
    for (int i = 0; i < hr->n_waiting && i < HANG_LIST_MAX; i++) fprintf(o, i ? ",%d" : "%d", hr->waiting[i]);
    fputs("],\"missing\":[", o);
    for (int i = 0; i < hr->n_missing && i < HANG_LIST_MAX; i++) fprintf(o, i ? ",%d" : "%d", hr->missing[i]);
    fprintf(o, "],\"waited_ms\":%lld,\"mismatch\":%s,\"verdict\":", (long long)hr->waited_ms,
            hr->mismatch ? "true" : "false");
    put_json_str(o, hr->verdict);
    fputs("}\n", o);
    fflush(o);
}

void view_headless_tick(ViewHeadless *h, const Job *j, int64_t now_ns)
{
    if (!h || !j)
        return;
    print_events(h, j, now_ns);
    print_evals(h, j);
    /* progress only while there is some: nothing before the first step,
     * nothing once the job is over (the summary follows) */
    bool over = j->state == JOB_DONE || j->state == JOB_FAILED;
    if (j->n_stepped > 0 && !over && now_ns - h->last_print_ns >= NS_PER_S) {
        double t = secs_since_start(j, now_ns);
        if (h->json)
            print_progress_json(h, j, t);
        else
            print_progress_text(h, j, t);
        h->last_print_ns = now_ns;
    }
    fflush(h->out);
}

/* ---- summary ---- */

static void rank_how(const JobRank *r, char *buf, size_t len)
{
    if (r->how_ended[0])
        snprintf(buf, len, "%s", r->how_ended);
    else if (r->state == RANK_WAITING)
        snprintf(buf, len, "never said hello");
    else
        snprintf(buf, len, "still running");
}

void view_headless_summary(ViewHeadless *h, const Job *j, int64_t now_ns)
{
    if (!h || !j)
        return;
    /* no pending events here: after the screen closes the run loop reuses a
     * fresh printer for the summary, and the whole log would pour out */
    FILE *o = h->out;
    char verdict[512], how[80];
    job_verdict(j, verdict, sizeof verdict);
    double t = secs_since_start(j, now_ns);
    if (h->json) {
        fprintf(o, "{\"k\":\"summary\",\"t\":%.3f,\"state\":\"%s\",\"ok\":%s,\"step\":%lld,\"epoch\":%lld,"
                   "\"ckpts\":%d,\"last_ckpt_step\":%lld,\"ranks\":[",
                t, job_state_name(j->state), job_all_clean(j) ? "true" : "false", (long long)j->step,
                (long long)j->epoch, j->ckpts, (long long)j->last_ckpt_step);
        for (int i = 0; i < j->world; i++) {
            const JobRank *r = &j->ranks[i];
            rank_how(r, how, sizeof how);
            fprintf(o, "%s{\"r\":%d,\"state\":\"%s\",\"how\":", i ? "," : "", i, rank_state_name(r->state));
            put_json_str(o, how);
            fprintf(o, ",\"step\":%lld,\"loss\":", (long long)(r->have_step ? r->last.step : 0));
            if (r->have_step)
                put_json_num(o, r->last.loss, "%.6g");
            else
                fputs("null", o);
            fprintf(o, ",\"phase\":\"%s\",\"host\":", phase_str(r->phase));
            put_json_str(o, r->host);
            fputc('}', o);
        }
        fputs("],\"verdict\":", o);
        put_json_str(o, verdict);
        fputs("}\n", o);
        fflush(o);
        return;
    }
    for (int i = 0; i < j->world; i++) {
        const JobRank *r = &j->ranks[i];
        rank_how(r, how, sizeof how);
        fprintf(o, "rank %d: ", i);
        put_text(o, how);
        if (r->have_step)
            fprintf(o, ", step %lld, loss %.4f", (long long)r->last.step, r->last.loss);
        else
            fputs(", no step", o);
        fprintf(o, ", phase %s", phase_str(r->phase));
        if (r->host[0]) {
            fputs(", host ", o);
            put_text(o, r->host);
        }
        fputc('\n', o);
    }
    put_text(o, verdict);
    fputc('\n', o);
    fflush(o);
}
