/* job_stats.c — reading many ranks at once: the order of the ranks table,
 * min/median/max over ranks, and the ranks that stand out (failed, silent,
 * stuck in a collective, diverged, behind, the straggler and those who
 * wait for it, slow). This is what keeps a job
 * of 256 ranks readable on one screen.
 *
 * Owns: nothing; reads a Job. Main thread.
 */
#include "model/job_priv.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *job_sort_name(JobSort s)
{
    switch (s) {
    case JOB_SORT_RANK: return "rank";
    case JOB_SORT_STEP: return "step";
    case JOB_SORT_LOSS: return "loss";
    case JOB_SORT_STEP_MS: return "step ms";
    case JOB_SORT_COMM_MS: return "comm ms";
    case JOB_SORT_BEAT: return "heartbeat age";
    case JOB_SORT_HEALTH: return "health";
    default: return "?";
    }
}

bool job_sort_descending(JobSort key, bool reversed)
{
    bool natural_desc = key == JOB_SORT_LOSS || key == JOB_SORT_STEP_MS || key == JOB_SORT_COMM_MS ||
                        key == JOB_SORT_BEAT || key == JOB_SORT_HEALTH;
    return natural_desc != reversed;
}

static bool rank_live(const JobRank *r) { return r->state == RANK_ALIVE || (r->state == RANK_WAITING && r->pid > 0); }

typedef struct {
    bool any;
    int64_t step, prev_epoch; /* the front, and the epoch its step - 1 was in */
    bool lockstep;            /* gradient buckets are all-reduced every step (DDP) */
} Front;
static Front front_of(const Job *j);
static void shown_step(const Front *f, const JobRank *r, int64_t now_ns, JobShownStep *out);

/* The value a metric has for a rank; false when it has none. The step is
 * the one shown (job_rank_shown_step against the front f). */
static bool metric(const Front *f, const JobRank *r, JobMetric m, int64_t now_ns, double *v)
{
    if (m == JOB_METRIC_BEAT_S) {
        if (!rank_live(r)) return false;
        *v = job_rank_beat_age_s(r, now_ns);
        return true;
    }
    if (!r->have_step) return false;
    switch (m) {
    case JOB_METRIC_STEP: {
        JobShownStep sh;
        shown_step(f, r, now_ns, &sh);
        *v = (double)sh.step;
        break;
    }
    case JOB_METRIC_LOSS: *v = r->last.loss; break;
    case JOB_METRIC_STEP_MS: *v = r->last.step_ms; break;
    case JOB_METRIC_COMM_MS: *v = r->last.comm_ms; break;
    case JOB_METRIC_EXPOSED_MS: *v = r->last.exposed_ms; break;
    case JOB_METRIC_SAMPLES_S: *v = job_rank_samples_per_s(r, now_ns); break;
    default: return false;
    }
    return isfinite(*v);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void job_rank_stats(const Job *j, int64_t now_ns, JobStat out[JOB_METRIC__COUNT])
{
    double *vals = malloc((size_t)j->world * sizeof *vals);
    Front front = front_of(j);
    for (int m = 0; m < JOB_METRIC__COUNT; m++) {
        JobStat *s = &out[m];
        memset(s, 0, sizeof *s);
        s->min_rank = s->max_rank = -1;
        int n = 0;
        for (int i = 0; i < j->world; i++) {
            double v;
            if (!metric(&front, &j->ranks[i], (JobMetric)m, now_ns, &v)) continue;
            if (s->min_rank < 0 || v < s->min) {
                s->min = v;
                s->min_rank = i;
            }
            if (s->max_rank < 0 || v > s->max) {
                s->max = v;
                s->max_rank = i;
            }
            if (vals) vals[n] = v;
            n++;
        }
        s->n = n;
        if (n > 0 && vals) {
            qsort(vals, (size_t)n, sizeof *vals, cmp_double);
            s->median = n % 2 ? vals[n / 2] : (vals[n / 2 - 1] + vals[n / 2]) / 2;
        }
    }
    free(vals);
}

/* ---- outliers ---- */

typedef struct {
    int64_t max_step;
    double med_step_ms;
    bool have_med;
    Front front;
    int straggler;       /* the rank the others wait for (-1: none) */
    double straggler_ms; /* its own time per step beyond the others' median */
} Ctx;

/* Steps over which a rank's own time (step minus the exposed wait in the
 * all-reduce) is averaged: one late step is not a straggler. */
#define STRAGGLER_STEPS   8
/* A straggler's own time exceeds the others' median by this much and by
 * this fraction of it; a rank waits for it when its exposed wait is at
 * least this share of the excess. */
#define STRAGGLER_MIN_MS  2.0
#define STRAGGLER_MIN_X   0.2
#define STRAGGLER_WAIT_OF 0.5

/* Mean over the recent steps of a rank's own time and of its exposed
 * wait; false without steps. */
static bool own_time(const JobRank *r, double *own_ms, double *wait_ms)
{
    double own = 0, wait = 0;
    int n = 0;
    for (int i = 0; i < STRAGGLER_STEPS; i++) {
        const JobStepRec *s = job_rank_step_at(r, i);
        if (!s || !isfinite(s->step_ms) || !isfinite(s->exposed_ms)) break;
        own += s->step_ms - s->exposed_ms;
        wait += s->exposed_ms;
        n++;
    }
    if (n == 0) return false;
    *own_ms = own / n;
    *wait_ms = wait / n;
    return true;
}

/* The straggler of a DDP job: every rank's step lasts as long (each waits
 * for the last one in the all-reduce), so step times cannot tell; the one
 * whose own time stands out, while the others spend it waiting, can. */
static void find_straggler(const Job *j, Ctx *c)
{
    c->straggler = -1;
    if (j->world < 2) return;
    double *own = malloc((size_t)j->world * sizeof *own), *wait = malloc((size_t)j->world * sizeof *wait),
           *sorted = malloc((size_t)j->world * sizeof *sorted);
    if (!own || !wait || !sorted) goto out;
    int worst = -1, n = 0;
    for (int i = 0; i < j->world; i++) {
        const JobRank *r = &j->ranks[i];
        own[i] = NAN;
        if (r->state != RANK_ALIVE || r->phase != PHASE_TRAIN || !own_time(r, &own[i], &wait[i])) continue;
        n++;
        if (worst < 0 || own[i] > own[worst]) worst = i;
    }
    if (n < 2) goto out;
    /* the others' medians: their own time, and their wait */
    double med[2];
    for (int k = 0; k < 2; k++) {
        int m = 0;
        for (int i = 0; i < j->world; i++)
            if (i != worst && isfinite(own[i])) sorted[m++] = k ? wait[i] : own[i];
        qsort(sorted, (size_t)m, sizeof *sorted, cmp_double);
        med[k] = m % 2 ? sorted[m / 2] : (sorted[m / 2 - 1] + sorted[m / 2]) / 2;
    }
    double excess = own[worst] - med[0];
    if (excess >= STRAGGLER_MIN_MS && excess >= STRAGGLER_MIN_X * med[0] && med[1] >= STRAGGLER_WAIT_OF * excess) {
        c->straggler = worst;
        c->straggler_ms = excess;
    }
out:
    free(own);
    free(wait);
    free(sorted);
}

static Ctx ctx_from(const Job *j, const JobStat st[JOB_METRIC__COUNT])
{
    Ctx c = { 0 };
    find_straggler(j, &c);
    c.max_step = st[JOB_METRIC_STEP].n ? (int64_t)st[JOB_METRIC_STEP].max : 0;
    c.have_med = st[JOB_METRIC_STEP_MS].n >= 2;
    c.med_step_ms = st[JOB_METRIC_STEP_MS].median;
    c.front = front_of(j);
    return c;
}

static Ctx ctx_of(const Job *j, int64_t now_ns)
{
    JobStat st[JOB_METRIC__COUNT];
    job_rank_stats(j, now_ns, st);
    return ctx_from(j, st);
}

/* The worst thing about a rank: its kind (-1: nothing), a text naming the
 * rank, and a brief one for its own row (either may be NULL). */
static int outlier_of(const JobRank *r, const Ctx *c, int64_t now_ns, int64_t wall_ns, char *text, size_t n,
                      char *brief, size_t bn)
{
    char scratch[8];
    if (!text) {
        text = scratch;
        n = sizeof scratch;
    }
    if (!brief) {
        brief = scratch;
        bn = sizeof scratch;
    }
    int64_t seq;
    double secs;
    if (r->state == RANK_FAILED) {
        snprintf(text, n, "r%d failed: %.60s", r->rank, r->how_ended);
        snprintf(brief, bn, "failed");
        return JOB_OUT_FAILED;
    }
    if (r->state == RANK_EXITED_OK) return -1;
    if (r->phase == PHASE_ERROR) {
        snprintf(text, n, "r%d error: %.60s", r->rank, r->detail[0] ? r->detail : "-");
        snprintf(brief, bn, "error");
        return JOB_OUT_ERROR;
    }
    if (job_rank_stale(r, now_ns)) {
        snprintf(text, n, "r%d silent %.0fs", r->rank, job_rank_beat_age_s(r, now_ns));
        snprintf(brief, bn, "silent %.0fs", job_rank_beat_age_s(r, now_ns));
        return JOB_OUT_STALE;
    }
    if (job_rank_in_flight(r, wall_ns, &seq, &secs)) {
        snprintf(text, n, "r%d in %.20s #%lld for %.0fs", r->rank, r->beat.coll_op[0] ? r->beat.coll_op : "collective",
                 (long long)seq, secs);
        snprintf(brief, bn, "in #%lld for %.0fs", (long long)seq, secs);
        return JOB_OUT_HUNG;
    }
    if (!r->have_step) return -1;
    if (!isfinite(r->last.loss)) {
        snprintf(text, n, "r%d loss %s", r->rank, isnan(r->last.loss) ? "nan" : "inf");
        snprintf(brief, bn, "loss %s", isnan(r->last.loss) ? "nan" : "inf");
        return JOB_OUT_NAN;
    }
    const JobStepRec *latest = job_rank_step_at(r, 0); /* its arrival time */
    JobShownStep sh;                                   /* in DDP lockstep a late report is not a rank behind */
    shown_step(&c->front, r, now_ns, &sh);
    if (c->max_step - sh.step >= 2 && latest && now_ns - latest->t_ns >= JOB_BEHIND_QUIET_NS) {
        snprintf(text, n, "r%d %lld steps behind", r->rank, (long long)(c->max_step - sh.step));
        snprintf(brief, bn, "%lld steps behind", (long long)(c->max_step - sh.step));
        return JOB_OUT_BEHIND;
    }
    double own, wait;
    if (r->rank == c->straggler) {
        snprintf(text, n, "r%d straggler: compute +%.0f ms/step, the others wait for it", r->rank, c->straggler_ms);
        snprintf(brief, bn, "straggler: +%.0f ms/step", c->straggler_ms);
        return JOB_OUT_STRAGGLER;
    }
    if (c->have_med && r->last.step_ms > 1.5 * c->med_step_ms && r->last.step_ms > c->med_step_ms + 2.0) {
        double x = c->med_step_ms > 0 ? r->last.step_ms / c->med_step_ms : 0.0;
        snprintf(text, n, "r%d step %.1f ms (%.1fx median)", r->rank, r->last.step_ms, x);
        snprintf(brief, bn, "slow %.1fx median", x);
        return JOB_OUT_SLOW;
    }
    if (r->last.drops > 0) {
        snprintf(text, n, "r%d dropped %llu messages", r->rank, (unsigned long long)r->last.drops);
        snprintf(brief, bn, "dropped %llu msgs", (unsigned long long)r->last.drops);
        return JOB_OUT_DROPS;
    }
    if (c->straggler >= 0 && r->state == RANK_ALIVE && own_time(r, &own, &wait) &&
        wait >= STRAGGLER_WAIT_OF * c->straggler_ms) {
        snprintf(text, n, "r%d waits %.0f ms/step for rank %d", r->rank, wait, c->straggler);
        snprintf(brief, bn, "waiting for rank %d", c->straggler);
        return JOB_OUT_WAITING;
    }
    return -1;
}

int job_outliers(const Job *j, int64_t now_ns, int64_t wall_ns, JobOutlier *out, int max)
{
    JobStat st[JOB_METRIC__COUNT];
    job_rank_stats(j, now_ns, st);
    return job_outliers_stats(j, st, now_ns, wall_ns, out, max);
}

int job_outliers_stats(const Job *j, const JobStat st[JOB_METRIC__COUNT], int64_t now_ns, int64_t wall_ns,
                       JobOutlier *out, int max)
{
    Ctx c = ctx_from(j, st);
    int total = 0, kept = 0;
    /* worst kind first, then by rank: one pass per kind keeps it stable
     * without sorting text */
    int *kind = malloc((size_t)j->world * sizeof *kind);
    if (!kind) return 0;
    for (int i = 0; i < j->world; i++) {
        kind[i] = outlier_of(&j->ranks[i], &c, now_ns, wall_ns, NULL, 0, NULL, 0);
        total += kind[i] >= 0;
    }
    for (int k = JOB_OUT_FAILED; k <= JOB_OUT_WAITING && kept < max; k++)
        for (int i = 0; i < j->world && kept < max; i++) {
            if (kind[i] != k) continue;
            out[kept].rank = i;
            out[kept].kind = (JobOutlierKind)k;
            outlier_of(&j->ranks[i], &c, now_ns, wall_ns, out[kept].text, sizeof out[kept].text, out[kept].brief,
                       sizeof out[kept].brief);
            kept++;
        }
    free(kind);
    return total;
}

bool job_rank_is_outlier(const Job *j, const JobRank *r, int64_t now_ns, int64_t wall_ns)
{
    Ctx c = ctx_of(j, now_ns);
    return outlier_of(r, &c, now_ns, wall_ns, NULL, 0, NULL, 0) >= 0;
}

/* ---- ordering ---- */

typedef struct {
    const Job *j;
    JobSort key;
    bool desc;
    int64_t now_ns;
    int *health; /* outlier kind per rank, big when none */
    Front front; /* for the steps as shown */
} SortCtx;

static int cmp_rank(const void *a, const void *b, void *arg)
{
    const SortCtx *s = arg;
    const JobRank *x = &s->j->ranks[*(const int *)a], *y = &s->j->ranks[*(const int *)b];
    double vx = 0, vy = 0;
    bool hx = true, hy = true;
    int sign = 1; /* +1: ascending is the natural order */
    switch (s->key) {
    case JOB_SORT_RANK:
        vx = x->rank;
        vy = y->rank;
        break;
    case JOB_SORT_STEP:
        hx = metric(&s->front, x, JOB_METRIC_STEP, s->now_ns, &vx);
        hy = metric(&s->front, y, JOB_METRIC_STEP, s->now_ns, &vy);
        break;
    case JOB_SORT_LOSS:
        hx = metric(&s->front, x, JOB_METRIC_LOSS, s->now_ns, &vx);
        hy = metric(&s->front, y, JOB_METRIC_LOSS, s->now_ns, &vy);
        sign = -1;
        break;
    case JOB_SORT_STEP_MS:
        hx = metric(&s->front, x, JOB_METRIC_STEP_MS, s->now_ns, &vx);
        hy = metric(&s->front, y, JOB_METRIC_STEP_MS, s->now_ns, &vy);
        sign = -1;
        break;
    case JOB_SORT_COMM_MS:
        hx = metric(&s->front, x, JOB_METRIC_COMM_MS, s->now_ns, &vx);
        hy = metric(&s->front, y, JOB_METRIC_COMM_MS, s->now_ns, &vy);
        sign = -1;
        break;
    case JOB_SORT_BEAT:
        hx = metric(&s->front, x, JOB_METRIC_BEAT_S, s->now_ns, &vx);
        hy = metric(&s->front, y, JOB_METRIC_BEAT_S, s->now_ns, &vy);
        sign = -1;
        break;
    case JOB_SORT_HEALTH:
        vx = s->health[x->rank];
        vy = s->health[y->rank];
        break;
    default: break;
    }
    /* ranks without the value go last whichever the direction */
    if (hx != hy) return hx ? -1 : 1;
    if (s->desc) sign = -sign;
    if (hx && vx != vy) return vx < vy ? -sign : sign;
    return x->rank - y->rank;
}

void job_rank_order(const Job *j, JobSort key, bool desc, int64_t now_ns, int64_t wall_ns, int *order)
{
    for (int i = 0; i < j->world; i++) order[i] = i;
    if (key == JOB_SORT_RANK && !desc) return;
    SortCtx s = { j, key, desc, now_ns, NULL, front_of(j) };
    if (key == JOB_SORT_HEALTH) {
        s.health = malloc((size_t)j->world * sizeof *s.health);
        if (!s.health) return;
        Ctx c = ctx_of(j, now_ns);
        for (int i = 0; i < j->world; i++) {
            int k = outlier_of(&j->ranks[i], &c, now_ns, wall_ns, NULL, 0, NULL, 0);
            s.health[i] = k < 0 ? 1000 : k;
        }
    }
    qsort_r(order, (size_t)j->world, sizeof *order, cmp_rank, &s);
    free(s.health);
}

/* ---- many ranks at once: cells, the odd ones first ---- */

const char *job_cell_name(JobCell c)
{
    static const char *const name[JOB_CELL__COUNT] = {
        [JOB_CELL_FAILED] = "failed", [JOB_CELL_ERROR] = "error",    [JOB_CELL_STALLED] = "stalled",
        [JOB_CELL_SILENT] = "silent", [JOB_CELL_NAN] = "nan",        [JOB_CELL_BEHIND] = "behind",
        [JOB_CELL_SLOW] = "slow",     [JOB_CELL_DROPS] = "dropping", [JOB_CELL_WAITING] = "waiting",
        [JOB_CELL_OK] = "healthy",    [JOB_CELL_DONE] = "ended",     [JOB_CELL_PENDING] = "not started",
    };
    return c >= 0 && c < JOB_CELL__COUNT ? name[c] : "?";
}

/* Has rank r not reached collective c, though it is alive and has not
 * gone past it (a dropped report must not make a rank look stuck), and is
 * ddptop not still reading what it said before c began (job_catching_up)? */
static bool missing_from(const Job *j, const JobColl *c, const JobRank *r, int64_t now_ns)
{
    if (r->state != RANK_ALIVE || job_coll_arrived(j, c, r->rank)) return false;
    if (job_catching_up(now_ns - r->last_msg_ns, r->last_sent_ns, c->first_ns)) return false;
    const JobCollRec *last = job_rank_coll_at(r, 0);
    if (last && last->c.seq >= c->seq) return false;
    if (job_rank_beat_in_coll(r) && r->beat.coll_seq >= c->seq) return false;
    return true;
}

/* The oldest collective some ranks have waited in for JOB_INFLIGHT_NS
 * while a live rank has not come: the one a hang is about. */
static const JobColl *held_up(const Job *j, int64_t now_ns, int64_t wall_ns)
{
    const JobColl *recent[JOB_COLL_RING];
    int n = job_colls_recent(j, recent, JOB_COLL_RING);
    for (int i = n - 1; i >= 0; i--) {
        const JobColl *c = recent[i];
        if (c->arrived >= j->world || wall_ns - c->first_ns < JOB_INFLIGHT_NS) continue;
        for (int r = 0; r < j->world; r++)
            if (missing_from(j, c, &j->ranks[r], now_ns)) return c;
    }
    return NULL;
}

void job_summary(const Job *j, int64_t now_ns, int64_t wall_ns, JobSummary *s, uint8_t *cell)
{
    memset(s, 0, sizeof *s);
    s->wait_seq = -1;
    s->first_stalled = -1;
    job_rank_stats(j, now_ns, s->stats);
    Ctx c = ctx_from(j, s->stats);
    s->max_step = c.max_step;
    s->med_step_ms = c.med_step_ms;
    s->have_med = c.have_med;
    s->straggler = c.straggler;
    s->straggler_ms = c.straggler_ms;
    const JobColl *held = held_up(j, now_ns, wall_ns);
    if (held) {
        s->wait_seq = held->seq;
        snprintf(s->wait_op, sizeof s->wait_op, "%s", held->op[0] ? held->op : "collective");
        s->wait_in = held->arrived;
        s->wait_s = (double)(wall_ns - held->first_ns) / 1e9;
    }
    for (int i = 0; i < j->world; i++) {
        const JobRank *r = &j->ranks[i];
        int k = outlier_of(r, &c, now_ns, wall_ns, NULL, 0, NULL, 0);
        JobCell e;
        if (k == JOB_OUT_FAILED)
            e = JOB_CELL_FAILED;
        else if (k == JOB_OUT_ERROR)
            e = JOB_CELL_ERROR;
        else if (held && missing_from(j, held, r, now_ns))
            e = JOB_CELL_STALLED;
        else if (k == JOB_OUT_HUNG && (r->lints & JOB_LINT_ALONE))
            e = JOB_CELL_STALLED; /* inside one nobody else will reach */
        else if (k >= 0)
            e = k == JOB_OUT_STALE    ? JOB_CELL_SILENT
                : k == JOB_OUT_HUNG   ? JOB_CELL_WAITING
                : k == JOB_OUT_NAN    ? JOB_CELL_NAN
                : k == JOB_OUT_BEHIND ? JOB_CELL_BEHIND
                : k == JOB_OUT_SLOW   ? JOB_CELL_SLOW
                                      : JOB_CELL_DROPS;
        else
            e = r->state == RANK_EXITED_OK ? JOB_CELL_DONE : r->state == RANK_ALIVE ? JOB_CELL_OK : JOB_CELL_PENDING;
        cell[i] = (uint8_t)e;
        s->count[e]++;
        if (e < JOB_CELL_WAITING) s->odd++;
        if (e == JOB_CELL_STALLED && s->first_stalled < 0) s->first_stalled = i;
    }
}

/* How bad a rank is within its cell: bigger is worse. */
static double severity(const JobRank *r, JobCell e, int64_t now_ns, int64_t max_step)
{
    switch (e) {
    case JOB_CELL_SILENT: return job_rank_beat_age_s(r, now_ns);
    case JOB_CELL_BEHIND: return (double)(max_step - r->last.step);
    case JOB_CELL_SLOW: return r->last.step_ms;
    case JOB_CELL_DROPS: return (double)r->last.drops;
    default: return 0;
    }
}

typedef struct {
    const Job *j;
    const uint8_t *cell;
    const double *sev;
} OddCtx;

static int cmp_odd(const void *a, const void *b, void *arg)
{
    const OddCtx *o = arg;
    int x = *(const int *)a, y = *(const int *)b;
    if (o->cell[x] != o->cell[y]) return o->cell[x] - o->cell[y];
    if (o->sev[x] != o->sev[y]) return o->sev[x] > o->sev[y] ? -1 : 1;
    return x - y;
}

int job_summary_order(const Job *j, const JobSummary *s, const uint8_t *cell, int64_t now_ns, int *order)
{
    int n = j->world, odd = 0;
    int *tmp = malloc((size_t)n * sizeof *tmp);
    double *sev = malloc((size_t)n * sizeof *sev);
    if (!tmp || !sev) {
        free(tmp);
        free(sev);
        return 0;
    }
    for (int i = 0; i < n; i++)
        if (cell[order[i]] < JOB_CELL_WAITING) {
            tmp[odd++] = order[i];
            sev[order[i]] = severity(&j->ranks[order[i]], (JobCell)cell[order[i]], now_ns, s->max_step);
        }
    OddCtx o = { j, cell, sev };
    qsort_r(tmp, (size_t)odd, sizeof *tmp, cmp_odd, &o);
    /* the rest keep their order behind them */
    int k = odd;
    for (int i = 0; i < n; i++)
        if (cell[order[i]] >= JOB_CELL_WAITING) tmp[k++] = order[i];
    memcpy(order, tmp, (size_t)n * sizeof *order);
    free(tmp);
    free(sev);
    return odd;
}

void job_summary_text(const Job *j, const JobSummary *s, const uint8_t *cell, int rank, int64_t now_ns, int64_t wall_ns,
                      char *buf, size_t n)
{
    if (rank < 0 || rank >= j->world) {
        snprintf(buf, n, "-");
        return;
    }
    const JobRank *r = &j->ranks[rank];
    JobCell e = (JobCell)cell[rank];
    if (e == JOB_CELL_STALLED && s->wait_seq >= 0 && !(r->lints & JOB_LINT_ALONE)) {
        char why[32] = "stalled";
        if (job_rank_stale(r, now_ns)) snprintf(why, sizeof why, "silent %.0fs", job_rank_beat_age_s(r, now_ns));
        snprintf(buf, n, "r%d %s: %d rank%s wait for it in %s #%lld for %.0fs", rank, why, s->wait_in,
                 s->wait_in == 1 ? "" : "s", s->wait_op, (long long)s->wait_seq, s->wait_s);
        return;
    }
    if (e == JOB_CELL_STALLED) {
        int64_t seq = 0;
        double secs = 0;
        job_rank_in_flight(r, wall_ns, &seq, &secs);
        snprintf(buf, n, "r%d alone in %s #%lld for %.0fs: the others finished", rank,
                 r->beat.coll_op[0] ? r->beat.coll_op : "collective", (long long)seq, secs);
        return;
    }
    if (e >= JOB_CELL_OK) {
        snprintf(buf, n, "r%d %s", rank, job_cell_name(e));
        return;
    }
    /* the frame's summary already holds what the rank is judged against */
    Ctx c = { .max_step = s->max_step,
              .med_step_ms = s->med_step_ms,
              .have_med = s->have_med,
              .front = front_of(j),
              .straggler = s->straggler,
              .straggler_ms = s->straggler_ms };
    outlier_of(r, &c, now_ns, wall_ns, buf, n, NULL, 0);
}

void job_colls_last_in(const Job *j, int *rank, int *times, int *of, double *late_ms)
{
    *rank = -1;
    *times = *of = 0;
    *late_ms = 0;
    const JobColl *c[JOB_COLL_RING];
    int n = job_colls_recent(j, c, JOB_COLL_RING);
    /* at most JOB_COLL_RING distinct last ranks: count them in place */
    int who[JOB_COLL_RING], cnt[JOB_COLL_RING], k = 0;
    double late[JOB_COLL_RING];
    for (int i = 0; i < n; i++) {
        /* finished by everybody, and not all in together */
        if (c[i]->arrived < j->world || c[i]->done < j->world || c[i]->last_ns - c[i]->first_ns < 5000) continue;
        (*of)++;
        /* a tie for last is nobody's fault */
        if (c[i]->last_ns - c[i]->prev_last_ns < 5000) continue;
        int s = 0;
        while (s < k && who[s] != c[i]->last_rank) s++;
        if (s == k) {
            who[k] = c[i]->last_rank;
            cnt[k] = 0;
            late[k++] = 0;
        }
        cnt[s]++;
        late[s] += (double)(c[i]->last_ns - c[i]->prev_last_ns) / 1e6;
    }
    for (int s = 0; s < k; s++)
        if (cnt[s] > *times || (cnt[s] == *times && who[s] < *rank)) {
            *rank = who[s];
            *times = cnt[s];
            *late_ms = late[s] / cnt[s];
        }
}

/* ---- the step the ranks agree on ---- */

static Front front_of(const Job *j)
{
    Front f = { 0 };
    const JobRank *fr = NULL;
    for (int i = 0; i < j->world; i++) {
        const JobRank *r = &j->ranks[i];
        if (r->state != RANK_ALIVE || !r->have_step) continue;
        if (!fr || r->last.step > fr->last.step) fr = r;
    }
    if (!fr) return f;
    f.any = true;
    f.lockstep = j->n_buckets > 0;
    f.step = fr->last.step;
    f.prev_epoch = fr->last.epoch;
    /* step - 1 may be the previous epoch's last: the front's ring says */
    for (int i = 1; i < fr->ring_len && i < 8; i++) {
        const JobStepRec *x = job_rank_step_at(fr, i);
        if (x->step <= f.step - 1) {
            f.prev_epoch = x->epoch;
            break;
        }
    }
    return f;
}

static void shown_step(const Front *f, const JobRank *r, int64_t now_ns, JobShownStep *out)
{
    memset(out, 0, sizeof *out);
    if (!r->have_step) return;
    const JobStepRec *latest = job_rank_step_at(r, 0);
    int64_t age = latest ? now_ns - latest->t_ns : 0;
    out->step = r->last.step;
    out->epoch = r->last.epoch;
    out->age_s = age > 0 ? (double)age / 1e9 : 0;
    /* DDP (gradient buckets all-reduced every step) cannot let a live rank
     * fall further back, however late its reports come; without that
     * evidence (independent ranks) only a rank still reporting is lifted */
    if (!f->any || r->state != RANK_ALIVE || r->last.step >= f->step - 1) return;
    if (!f->lockstep && age >= JOB_BEHIND_QUIET_NS) return;
    out->step = f->step - 1;
    out->epoch = f->prev_epoch;
    out->lifted = true;
}

void job_rank_shown_step(const Job *j, const JobRank *r, int64_t now_ns, JobShownStep *out)
{
    Front f = front_of(j);
    shown_step(&f, r, now_ns, out);
}

int64_t job_step_agreed(const Job *j, int64_t now_ns, int64_t *epoch)
{
    Front f = front_of(j);
    bool any = false;
    int64_t step = 0, ep = 0;
    for (int i = 0; i < j->world; i++) {
        if (!j->ranks[i].have_step) continue;
        JobShownStep s;
        shown_step(&f, &j->ranks[i], now_ns, &s);
        if (!any || s.step < step || (s.step == step && s.epoch < ep)) {
            step = s.step;
            ep = s.epoch;
        }
        any = true;
    }
    if (epoch) *epoch = any ? ep : j->epoch;
    return any ? step : j->step;
}

/* ---- a step's time in parts ---- */

static double nonneg(double v) { return isfinite(v) && v > 0 ? v : 0; }

void job_step_parts(const MsgStep *s, JobStepParts *out)
{
    JobStepParts p = {
        .step = nonneg(s->step_ms),
        .fwd = nonneg(s->fwd_ms),
        .bwd = nonneg(s->bwd_ms),
        .wait = nonneg(s->exposed_ms),
        .opt = nonneg(s->opt_ms),
        .comm = nonneg(s->comm_ms),
    };
    if (p.wait > p.comm) p.wait = p.comm;
    double rest = p.step - (p.fwd + p.bwd + p.wait + p.opt);
    if (rest < 0 && p.wait > 0) { /* the wait was counted inside bwd */
        rest += p.wait;
        p.wait = 0;
    }
    p.other = rest > 0 ? rest : 0;
    p.overlapped = p.comm - p.wait;
    *out = p;
}

double job_loss_now(const Job *j)
{
    double sum = 0;
    int n = 0;
    for (int i = 0; i < j->world; i++) {
        const JobRank *r = &j->ranks[i];
        if (!r->have_step || !isfinite(r->last.loss)) continue;
        sum += r->last.loss;
        n++;
    }
    return n ? sum / n : NAN;
}
