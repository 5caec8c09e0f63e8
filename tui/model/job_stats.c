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

static bool rank_live(const JobRank *r) { return r->state == RANK_ALIVE || (r->state == RANK_WAITING && r->pid > 0); }

/* The value a metric has for a rank; false when it has none. */
static bool metric(const JobRank *r, JobMetric m, int64_t now_ns, double *v)
{
    if (m == JOB_METRIC_BEAT_S) {
        if (!rank_live(r)) return false;
        *v = job_rank_beat_age_s(r, now_ns);
        return true;
    }
    if (!r->have_step) return false;
    switch (m) {
    case JOB_METRIC_STEP: *v = (double)r->last.step; break;
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
    for (int m = 0; m < JOB_METRIC__COUNT; m++) {
        JobStat *s = &out[m];
        memset(s, 0, sizeof *s);
        s->min_rank = s->max_rank = -1;
        int n = 0;
        for (int i = 0; i < j->world; i++) {
            double v;
            if (!metric(&j->ranks[i], (JobMetric)m, now_ns, &v)) continue;
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

static Ctx ctx_of(const Job *j, int64_t now_ns)
{
    Ctx c = { 0 };
    find_straggler(j, &c);
    JobStat st[JOB_METRIC__COUNT];
    job_rank_stats(j, now_ns, st);
    c.max_step = st[JOB_METRIC_STEP].n ? (int64_t)st[JOB_METRIC_STEP].max : 0;
    c.have_med = st[JOB_METRIC_STEP_MS].n >= 2;
    c.med_step_ms = st[JOB_METRIC_STEP_MS].median;
    return c;
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
    if (c->max_step - r->last.step >= 2 && latest && now_ns - latest->t_ns >= JOB_BEHIND_QUIET_NS) {
        snprintf(text, n, "r%d %lld steps behind", r->rank, (long long)(c->max_step - r->last.step));
        snprintf(brief, bn, "%lld steps behind", (long long)(c->max_step - r->last.step));
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
    Ctx c = ctx_of(j, now_ns);
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
        hx = metric(x, JOB_METRIC_STEP, s->now_ns, &vx);
        hy = metric(y, JOB_METRIC_STEP, s->now_ns, &vy);
        break;
    case JOB_SORT_LOSS:
        hx = metric(x, JOB_METRIC_LOSS, s->now_ns, &vx);
        hy = metric(y, JOB_METRIC_LOSS, s->now_ns, &vy);
        sign = -1;
        break;
    case JOB_SORT_STEP_MS:
        hx = metric(x, JOB_METRIC_STEP_MS, s->now_ns, &vx);
        hy = metric(y, JOB_METRIC_STEP_MS, s->now_ns, &vy);
        sign = -1;
        break;
    case JOB_SORT_COMM_MS:
        hx = metric(x, JOB_METRIC_COMM_MS, s->now_ns, &vx);
        hy = metric(y, JOB_METRIC_COMM_MS, s->now_ns, &vy);
        sign = -1;
        break;
    case JOB_SORT_BEAT:
        hx = metric(x, JOB_METRIC_BEAT_S, s->now_ns, &vx);
        hy = metric(y, JOB_METRIC_BEAT_S, s->now_ns, &vy);
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
    SortCtx s = { j, key, desc, now_ns, NULL };
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
