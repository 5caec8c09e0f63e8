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
#include "view/view.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/utf8.h"

#define NS_PER_S               1000000000LL
/* Up to this many ranks the progress line lists every rank's loss. */
#define HEADLESS_LOSS_LIST_MAX 4

void view_headless_init(ViewHeadless *h, FILE *out, bool json)
{
    memset(h, 0, sizeof *h);
    h->out = out ? out : stdout;
    h->json = json;
}

static double secs_since_start(const Job *j, int64_t mono_ns) { return (double)(mono_ns - j->start_ns) / 1e9; }

/* ---- output helpers ---- */

/* Length of a valid UTF-8 sequence at p (1..4), or 0 if invalid; stops at
 * the NUL (strnlen bounds what the rule may read). */
static int utf8_len(const unsigned char *p) { return (int)utf8_seq(p, strnlen((const char *)p, 4)); }

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

/* A JSON lines record: an object whose "k" names it, then "t". Every
 * line of --json starts so; line_end closes it. */
static void line_begin(Json *w, FILE *out, const char *kind, double t)
{
    json_init_file(w, out);
    json_obj(w);
    json_kv_str(w, "k", kind);
    json_kv_fixed(w, "t", t, 3);
}

static void line_end(Json *w)
{
    json_obj_end(w);
    json_text(w, "\n");
}

/* A loss as the progress and summary lines print it; null before the
 * first step (and for a diverged loss). */
static void put_loss(Json *w, bool have_step, double loss)
{
    if (have_step)
        json_sig(w, loss, 6);
    else
        json_null(w);
}

static const char *level_name(JobEventLevel l)
{
    switch (l) {
    case EV_WARN: return "warn";
    case EV_ERROR: return "error";
    default: return "info";
    }
}

static const char *phase_str(Phase p) { return p == PHASE_NONE ? "-" : phase_name(p); }

/* ---- events ---- */

static void print_event(ViewHeadless *h, const Job *j, const JobEvent *e)
{
    double t = secs_since_start(j, e->mono_ns);
    if (h->json) {
        Json w;
        line_begin(&w, h->out, "event", t);
        json_kv_int(&w, "r", e->rank);
        json_kv_str(&w, "level", level_name(e->level));
        json_kv_str(&w, "text", e->text);
        line_end(&w);
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
    if (h->ev_printed > j->ev_total) /* a different job: start over */
        h->ev_printed = 0;
    /* the ring overwrote some before we got to them: say so, once */
    if (j->ev_total - h->ev_printed > JOB_EVENTS) {
        uint64_t lost = j->ev_total - h->ev_printed - JOB_EVENTS;
        double t = secs_since_start(j, now_ns);
        if (h->json) {
            Json w;
            line_begin(&w, h->out, "events_lost", t);
            json_kv_uint(&w, "n", lost);
            line_end(&w);
        } else {
            fprintf(h->out, "[%6.1fs] ddptop %llu events lost (printing fell behind)\n", t, (unsigned long long)lost);
        }
        h->ev_printed += lost;
    }
    for (; h->ev_printed < j->ev_total; h->ev_printed++) {
        const JobEvent *e = job_event_nth(j, h->ev_printed);
        if (e) print_event(h, j, e);
    }
}

/* Evals are kept apart from the events (see job.c); here they are lines of
 * their own, as a training script would print them. */
static void print_evals(ViewHeadless *h, const Job *j)
{
    if (h->evals_printed > j->n_evals) h->evals_printed = 0;
    if (j->n_evals - h->evals_printed > JOB_EVALS) h->evals_printed = j->n_evals - JOB_EVALS;
    for (; h->evals_printed < j->n_evals; h->evals_printed++) {
        const JobEval *e = job_eval_at(j, j->n_evals - 1 - h->evals_printed);
        if (!e) continue;
        double t = secs_since_start(j, e->t_ns);
        if (h->json) {
            Json w;
            line_begin(&w, h->out, "eval", t);
            json_kv_int(&w, "epoch", e->epoch);
            json_kv_int(&w, "step", e->step);
            json_kv_sig(&w, "accuracy", e->accuracy, 6);
            json_kv_sig(&w, "loss", e->loss, 6);
            json_kv_int(&w, "correct", e->correct);
            json_kv_int(&w, "total", e->total);
            line_end(&w);
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
    if (j->max_steps > 0) fprintf(o, "/%lld", (long long)j->max_steps);
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
            if (!r->have_step) continue;
            if (lo < 0 || r->last.loss < j->ranks[lo].last.loss) lo = i;
            if (hi < 0 || r->last.loss > j->ranks[hi].last.loss) hi = i;
        }
        if (lo >= 0)
            fprintf(o, " (min r%d %.2f, max r%d %.2f)", lo, j->ranks[lo].last.loss, hi, j->ranks[hi].last.loss);
    }
    fprintf(o, "  %.0f samples/s  allreduce %.1f ms  drops %llu", j->samples_per_s, mean_allreduce_ms(j),
            (unsigned long long)j->drops);
    if (j->bad_frames) fprintf(o, "  bad frames %llu", (unsigned long long)j->bad_frames);
    fputc('\n', o);
}

/* The rank the others wait for now, as the ranks panel shows it:
 * "straggler": {"rank", "ms_per_step" (its own time beyond the others'
 * median)}, or null. */
static void put_straggler(Json *w, const Job *j, int64_t now_ns)
{
    JobSummary sum;
    uint8_t *cell = malloc((size_t)j->world);
    sum.straggler = -1;
    if (cell) job_summary(j, now_ns, now_ns, &sum, cell);
    free(cell);
    json_key(w, "straggler");
    if (sum.straggler < 0) {
        json_null(w);
        return;
    }
    json_obj(w);
    json_kv_int(w, "rank", sum.straggler);
    json_kv_fixed(w, "ms_per_step", sum.straggler_ms, 1);
    json_obj_end(w);
}

static void print_progress_json(ViewHeadless *h, const Job *j, double t, int64_t now_ns)
{
    Json w;
    line_begin(&w, h->out, "progress", t);
    json_kv_int(&w, "epoch", j->epoch);
    json_kv_int(&w, "step", j->step);
    json_kv_int(&w, "max_steps", j->max_steps);
    json_key(&w, "loss");
    json_arr(&w);
    for (int i = 0; i < j->world; i++) put_loss(&w, j->ranks[i].have_step, j->ranks[i].last.loss);
    json_arr_end(&w);
    json_kv_fixed(&w, "samples_per_s", j->samples_per_s, 1);
    json_kv_fixed(&w, "allreduce_ms", mean_allreduce_ms(j), 3);
    json_kv_uint(&w, "drops", j->drops);
    json_kv_uint(&w, "bad_frames", j->bad_frames);
    json_kv_str(&w, "state", job_state_name(j->state));
    put_straggler(&w, j, now_ns);
    line_end(&w);
}

/* The job's diagnosis as "cause": {"kind", "rank", "line", "step",
 * "text"}; null when nothing is wrong. */
static void put_cause(Json *w, const Job *j)
{
    JobDiagnosis d;
    job_diagnose(j, &d);
    json_key(w, "cause");
    if (d.kind == DIAG_NONE) {
        json_null(w);
        return;
    }
    json_obj(w);
    json_kv_str(w, "kind", job_diag_kind_name(d.kind));
    json_kv_int(w, "rank", d.rank);
    json_kv_str(w, "line", d.where);
    json_kv_int(w, "step", d.step);
    json_kv_str(w, "text", d.text);
    json_obj_end(w);
}

/* Ranks as an array: the first HANG_LIST_MAX of n. */
static void put_ranks(Json *w, const char *key, const int *r, int n)
{
    json_key(w, key);
    json_arr(w);
    for (int i = 0; i < n && i < HANG_LIST_MAX; i++) json_int(w, r[i]);
    json_arr_end(w);
}

void view_headless_hang(ViewHeadless *h, const Job *j, const HangReport *hr, int64_t now_ns)
{
    if (!h || !h->json || !hr || !hr->hung) return; /* text mode: the verdict is an event line already */
    Json w;
    line_begin(&w, h->out, "hang", secs_since_start(j, now_ns));
    json_kv_int(&w, "seq", hr->seq);
    json_kv_str(&w, "op", hr->op);
    json_kv_int(&w, "bucket", hr->bucket);
    put_ranks(&w, "waiting", hr->waiting, hr->n_waiting);
    put_ranks(&w, "missing", hr->missing, hr->n_missing);
    json_kv_int(&w, "waited_ms", hr->waited_ms);
    json_kv_bool(&w, "mismatch", hr->mismatch);
    json_kv_str(&w, "verdict", hr->verdict);
    put_cause(&w, j);
    line_end(&w);
    fflush(h->out);
}

void view_headless_stacks(ViewHeadless *h, const Job *j, const StackTree *t, int64_t now_ns)
{
    if (!h || !h->json || !t) return;
    Json w;
    line_begin(&w, h->out, "stacks", secs_since_start(j, now_ns));
    json_key(&w, "tree");
    stacktree_json(t, &w);
    line_end(&w);
    fflush(h->out);
}

void view_headless_tick(ViewHeadless *h, const Job *j, int64_t now_ns)
{
    if (!h || !j) return;
    print_events(h, j, now_ns);
    print_evals(h, j);
    /* progress only while there is some: nothing before the first step,
     * nothing once the job is over (the summary follows) */
    bool over = j->state == JOB_DONE || j->state == JOB_FAILED;
    if (j->n_stepped > 0 && !over && now_ns - h->last_print_ns >= NS_PER_S) {
        double t = secs_since_start(j, now_ns);
        if (h->json)
            print_progress_json(h, j, t, now_ns);
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
    if (!h || !j) return;
    /* no pending events here: after the screen closes the run loop reuses a
     * fresh printer for the summary, and the whole log would pour out */
    FILE *o = h->out;
    char verdict[JOB_EVENT_TEXT + 512], how[80];
    job_verdict(j, verdict, sizeof verdict);
    double t = secs_since_start(j, now_ns);
    if (h->json) {
        Json w;
        line_begin(&w, o, "summary", t);
        json_kv_str(&w, "state", job_state_name(j->state));
        json_kv_bool(&w, "ok", job_ok(j));
        int64_t epoch, step = job_step_agreed(j, now_ns, &epoch);
        json_kv_int(&w, "step", step);
        json_kv_int(&w, "epoch", epoch);
        json_kv_int(&w, "ckpts", j->ckpts);
        json_kv_int(&w, "last_ckpt_step", j->last_ckpt_step);
        json_kv_str(&w, "last_ckpt_path", j->last_ckpt_path);
        json_key(&w, "ranks");
        json_arr(&w);
        for (int i = 0; i < j->world; i++) {
            const JobRank *r = &j->ranks[i];
            rank_how(r, how, sizeof how);
            json_obj(&w);
            json_kv_int(&w, "r", i);
            json_kv_str(&w, "state", rank_state_name(r->state));
            json_kv_str(&w, "how", how);
            JobShownStep sh; /* a viewer leaving mid-run: not a burst's arrival order */
            job_rank_shown_step(j, r, now_ns, &sh);
            json_kv_int(&w, "step", sh.step);
            json_key(&w, "loss");
            put_loss(&w, r->have_step, r->last.loss);
            json_kv_str(&w, "phase", phase_str(r->phase));
            json_kv_str(&w, "host", r->host);
            json_obj_end(&w);
        }
        json_arr_end(&w);
        json_kv_str(&w, "verdict", verdict);
        if (j->hang_report[0]) json_kv_str(&w, "hang_report", j->hang_report);
        put_cause(&w, j);
        line_end(&w);
        fflush(o);
        return;
    }
    for (int i = 0; i < j->world; i++) {
        const JobRank *r = &j->ranks[i];
        rank_how(r, how, sizeof how);
        fprintf(o, "rank %d: ", i);
        put_text(o, how);
        JobShownStep sh;
        job_rank_shown_step(j, r, now_ns, &sh);
        if (r->have_step)
            fprintf(o, ", step %lld, loss %.4f", (long long)sh.step, r->last.loss);
        else
            fputs(", no step", o);
        fprintf(o, ", phase %s", phase_str(r->phase));
        if (r->host[0]) {
            fputs(", host ", o);
            put_text(o, r->host);
        }
        fputc('\n', o);
    }
    /* where the newest checkpoint is (a `c`, `d`'s final one, the script's
     * own save), unless the verdict names it (a stop by a signal) */
    if (j->ckpts > 0 && j->last_ckpt_path[0] && !strstr(verdict, j->last_ckpt_path)) {
        fprintf(o, "last checkpoint: step %lld -> ", (long long)j->last_ckpt_step);
        put_text(o, j->last_ckpt_path);
        fputc('\n', o);
    }
    if (j->hang_report[0]) {
        fputs("hang report: ", o);
        put_text(o, j->hang_report);
        fputc('\n', o);
    }
    put_text(o, verdict);
    fputc('\n', o);
    fflush(o);
}
