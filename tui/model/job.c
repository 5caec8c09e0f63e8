/* job.c — the job model: folds protocol messages and process exits into
 * per-rank and job-wide state. Collectives,
 * the sampler map and rank summaries live in job_comm.c, job_shard.c and
 * job_stats.c; the events log and its folded rows in job_events.c.
 *
 * Owns: everything inside a Job (job.h). Does not own: sockets, decoding,
 * processes, clocks or drawing — callers hand it decoded messages and
 * waitpid statuses with the time they saw them (monotonic, and wall where
 * an event is stamped), so a test or a replay drives it with its own
 * clock. Main thread only.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strsignal, W* macros under -std=c11 */
#endif
#include "model/job_priv.h"
#include "model/hang.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static JobEventLevel level_from_name(const char *s);

/* Copy with truncation; the source may not be NUL-terminated if a peer sent
 * junk, so never read past n-1 bytes of it. */
static void copy_str(char *dst, size_t n, const char *src)
{
    size_t i = 0;
    if (src)
        for (; i + 1 < n && src[i]; i++) dst[i] = src[i];
    dst[i] = '\0';
}

/* ---- lifetime ---- */

Job *job_new(int world, int64_t now_ns)
{
    if (world < 1 || world > JOB_MAX_RANKS) return NULL;
    Job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->ranks = calloc((size_t)world, sizeof *j->ranks);
    j->book = calloc(1, sizeof *j->book + (size_t)world * sizeof j->book->ranks[0]);
    if (!j->ranks || !j->book) {
        free(j->ranks);
        free(j->book);
        free(j);
        return NULL;
    }
    j->world = world;
    j->state = JOB_STARTING;
    j->start_ns = now_ns;
    j->last_ckpt_step = -1;
    j->first_failed = -1;
    series_init(&j->loss_all);
    j->shard.epoch = -1;
    j->shard.same_order_rank = -1;
    j->shard.same_order_epoch = -1;
    j->book->fill.epoch = -1;
    j->book->fill_done_epoch = -1;
    j->book->ep_rank = -1;
    j->book->early_rank = j->book->early_by = -1;
    j->book->desync_seq = -1;
    if (job_comm_init(j)) {
        job_free(&j);
        return NULL;
    }
    for (int r = 0; r < world; r++) {
        JobRank *k = &j->ranks[r];
        k->rank = r;
        k->state = RANK_WAITING;
        k->phase = PHASE_NONE;
        k->phase_since_ns = j->start_ns;
        k->last_msg_ns = j->start_ns;
        k->bye_status = -1;
        k->book = &j->book->ranks[r];
        k->book->shard_mapped_epoch = -1;
        k->book->rate_old = -1;
        k->book->coll_seq_done = -1;
        series_init(&k->loss_hist);
    }
    return j;
}

void job_free(Job **pj)
{
    if (!pj || !*pj) return;
    job_comm_done(*pj);
    job_shard_done(*pj);
    free((*pj)->ranks);
    free((*pj)->book);
    free(*pj);
    *pj = NULL;
}

/* ---- job-wide figures ---- */

static bool rank_exited(const JobRank *r) { return r->state == RANK_EXITED_OK || r->state == RANK_FAILED; }

/* Phases at or past train, short of an error: the rank has started training. */
static bool rank_trained(const JobRank *r)
{
    return r->have_step || (r->phase >= PHASE_TRAIN && r->phase <= PHASE_DESTROYED);
}

static void update_state_from_phases(Job *j)
{
    if (j->state == JOB_DONE || j->state == JOB_FAILED || j->state == JOB_STOPPING) return;
    bool all_train = true;
    for (int i = 0; i < j->world; i++) {
        Phase p = j->ranks[i].phase;
        /* destroyed counts too: its stopping/destroying messages may have
         * been dropped on a full telemetry queue */
        if (p == PHASE_STOPPING || p == PHASE_DESTROYING || p == PHASE_DESTROYED) {
            j->state = JOB_STOPPING;
            return;
        }
        if (!rank_trained(&j->ranks[i])) all_train = false;
    }
    if (j->paused)
        j->state = JOB_PAUSED;
    else if (j->state == JOB_PAUSED)
        j->state = JOB_RUNNING;
    else if (all_train && j->state == JOB_STARTING)
        j->state = JOB_RUNNING;
}

/* Paused means every live rank says so (a rank with no hello yet is not
 * paused). The outcome of `p` is told once, when the last rank gets there,
 * with the step they stopped at: a spread of steps means they did not agree. */
static void pause_update(Job *j, JobTime at)
{
    int live = 0, paused = 0, training = 0;
    int64_t lo = 0, hi = 0;
    for (int i = 0; i < j->world; i++) {
        const JobRank *r = &j->ranks[i];
        if (r->state == RANK_WAITING) live++;
        if (r->state != RANK_ALIVE) continue;
        live++;
        training += r->phase == PHASE_TRAIN;
        if (r->phase != PHASE_PAUSED) continue;
        int64_t s = r->have_step ? r->last.step : 0;
        if (paused == 0 || s < lo) lo = s;
        if (paused == 0 || s > hi) hi = s;
        paused++;
    }
    bool all = live > 0 && paused == live;
    if (all != j->paused) job_rate_pause(j, all, training > 0);
    if (all && !j->paused) {
        j->paused = true;
        j->paused_step = lo;
        if (lo == hi)
            job_ev_add(j, at, -1, EV_INFO, "paused: %s%d rank%s at step %lld", live > 1 ? "all " : "", live,
                       live == 1 ? "" : "s", (long long)lo);
        else
            job_ev_add(j, at, -1, EV_WARN, "paused at different steps (%lld..%lld): the ranks did not agree",
                       (long long)lo, (long long)hi);
    } else if (!all && j->paused && training > 0) {
        j->paused = false;
        job_ev_add(j, at, -1, EV_INFO, "resumed at step %lld", (long long)j->paused_step);
    } else if (!all && j->paused) {
        j->paused = false; /* stopping or failing while paused: no "resumed" */
    }
}

/* Distinct hosts among the ranks that said hello: a hash set of rank
 * indices keyed by host, so a hello costs O(world), not O(world^2). */
static void count_nodes(Job *j)
{
    enum { SLOTS = 2 * JOB_MAX_RANKS }; /* a power of two, at least twice the ranks */
    int16_t slot[SLOTS];                /* rank + 1, 0 empty */
    memset(slot, 0, sizeof slot);
    int n = 0;
    for (int i = 0; i < j->world; i++) {
        const JobRank *r = &j->ranks[i];
        if (!r->hello) continue;
        uint32_t h = 2166136261u; /* FNV-1a */
        for (const unsigned char *c = (const unsigned char *)r->host; *c; c++) h = (h ^ *c) * 16777619u;
        for (uint32_t k = h & (SLOTS - 1);; k = (k + 1) & (SLOTS - 1)) {
            if (!slot[k]) {
                slot[k] = (int16_t)(i + 1);
                n++;
                break;
            }
            if (!strcmp(j->ranks[slot[k] - 1].host, r->host)) break;
        }
    }
    j->nodes = n;
}

static void step_min_recompute(Job *j)
{
    bool any = false;
    int count = 0;
    int64_t min = 0, epoch = 0, above = INT64_MAX; /* above: the least step past min */
    for (int i = 0; i < j->world; i++) {
        const JobRank *r = &j->ranks[i];
        if (!r->have_step) continue;
        if (!any || r->last.step < min) {
            if (any) above = min;
            any = true;
            min = r->last.step;
            epoch = r->last.epoch;
            count = 1;
        } else if (r->last.step == min) {
            count++;
            if (r->last.epoch < epoch) epoch = r->last.epoch;
        } else if (r->last.step < above) {
            above = r->last.step;
        }
    }
    j->step = min;
    j->epoch = epoch;
    j->book->step_min_count = count;
    j->book->step_above = above;
}

/* Keep job step = min over stepped ranks without scanning every rank on
 * every step message: ranks move in near lockstep, so the minimum only moves
 * when the last rank sitting on it leaves; and every other stepped rank is
 * at step_above or past it, so while that last rank's new step is short of
 * step_above it is the new minimum, alone (a burst carries a rank through
 * several steps: one scan per step round, not one per step). */
__attribute__((always_inline)) static inline void step_min_update(Job *j, const JobRank *r, bool had, int64_t old_step)
{
    JobBook *b = j->book;
    int64_t s = r->last.step;
    if (!had) {
        j->n_stepped++;
        if (j->n_stepped == 1) {
            b->step_above = INT64_MAX;
        } else if (s < j->step) { /* the ranks at the old minimum are above it now */
            if (j->step < b->step_above) b->step_above = j->step;
        } else if (s > j->step && s < b->step_above) {
            b->step_above = s;
        }
        if (j->n_stepped == 1 || s < j->step) {
            j->step = s;
            j->epoch = r->last.epoch;
            b->step_min_count = 1;
        } else if (s == j->step) {
            b->step_min_count++;
        }
        return;
    }
    if (s < old_step) { /* went backwards (a restart): rare, rescan */
        step_min_recompute(j);
        return;
    }
    if (old_step != j->step || s == old_step) return; /* a rank past the minimum stays at step_above or past it */
    if (--b->step_min_count > 0) {
        if (s < b->step_above) b->step_above = s;
    } else if (s < b->step_above) { /* the last one at the minimum, still short of every other rank */
        j->step = s;
        j->epoch = r->last.epoch;
        b->step_min_count = 1;
    } else {
        step_min_recompute(j);
    }
}

/* ---- messages ---- */

static void apply_hello(Job *j, JobRank *r, const MsgHello *h, JobTime at)
{
    const JobRank *first = NULL;
    for (int i = 0; i < j->world && !first; i++)
        if (j->ranks[i].hello && &j->ranks[i] != r) first = &j->ranks[i];
    if (!first && !r->hello) {
        /* a torch script's hello names no model or data: an info that came
         * first (a script without a process group says hello late) stays */
        if (h->dataset[0]) copy_str(j->dataset, sizeof j->dataset, h->dataset);
        if (h->model[0]) copy_str(j->model, sizeof j->model, h->model);
        copy_str(j->backend, sizeof j->backend, h->backend);
        copy_str(j->device, sizeof j->device, h->device);
        copy_str(j->precision, sizeof j->precision, h->precision);
        copy_str(j->grad_dtype, sizeof j->grad_dtype, h->grad_dtype);
        if (h->params > 0) j->params = h->params;
        if (h->batch_size > 0) j->batch_size = h->batch_size;
        j->max_steps = h->max_steps;
        j->steps_per_epoch = h->steps_per_epoch;
        if (h->dataset_size > 0) j->dataset_size = h->dataset_size;
    } else if (first && (h->model[0] || h->params > 0) &&
               (h->params != j->params || strncmp(h->model, j->model, sizeof j->model) != 0)) {
        /* DDP needs identical replicas; a mismatch ends in a hang or garbage.
         * A torch script's hello names no model (its info does, later): it
         * differs from nothing, also after a restart, when the job still
         * knows the model from the first run's info */
        job_ev_add(j, at, r->rank, EV_WARN, "rank %d runs model %.60s (%lld params), the job %.60s (%lld)", r->rank,
                   h->model, (long long)h->params, j->model, (long long)j->params);
    }
    r->hello = true;
    r->pid = h->pid;
    copy_str(r->host, sizeof r->host, h->host);
    copy_str(r->device, sizeof r->device, h->device);
    copy_str(r->backend, sizeof r->backend, h->backend);
    if (r->state == RANK_WAITING) r->state = RANK_ALIVE;
    count_nodes(j);
    /* Workers that name their arithmetic (ddptop-worker) get it in the line,
     * as the header shows it; a torch script's hello names none. */
    if (h->precision[0])
        job_ev_add(j, at, r->rank, EV_INFO, "rank %d hello pid %lld on %s (%s, %s), precision %s, grads %s", r->rank,
                   (long long)r->pid, r->host, r->device, r->backend, h->precision,
                   h->grad_dtype[0] ? h->grad_dtype : "-");
    else
        job_ev_add(j, at, r->rank, EV_INFO, "rank %d hello pid %lld on %s (%s, %s)", r->rank, (long long)r->pid,
                   r->host, r->device, r->backend);
    if (h->world > 0 && h->world != j->world)
        job_ev_add(j, at, r->rank, EV_WARN, "rank %d says world size %d, ddptop launched %d", r->rank, (int)h->world,
                   j->world);
}

/* A script's model and data, learned after its hello: each field the job
 * does not know yet is taken from the first rank that tells it. */
static void apply_info(Job *j, const MsgInfo *in)
{
    if (!j->dataset[0]) copy_str(j->dataset, sizeof j->dataset, in->dataset);
    if (!j->model[0]) copy_str(j->model, sizeof j->model, in->model);
    if (j->params <= 0 && in->params > 0) j->params = in->params;
    if (j->batch_size <= 0 && in->batch_size > 0) j->batch_size = in->batch_size;
    if (j->dataset_size <= 0 && in->dataset_size > 0) j->dataset_size = in->dataset_size;
}

static void apply_phase(Job *j, JobRank *r, const MsgPhaseInfo *p, JobTime at)
{
    if ((int)p->phase <= PHASE_NONE || (int)p->phase >= PHASE__COUNT) return; /* a phase this build does not know */
    bool has_detail = p->detail[0] != '\0';
    /* an error's text outlives the phases after it: the verdict needs it */
    if (has_detail && (p->phase == PHASE_ERROR || !r->had_error)) copy_str(r->detail, sizeof r->detail, p->detail);
    if (p->phase == PHASE_ERROR) {
        if (!r->had_error) {
            job_lint_early(j, r, p->detail, at); /* r->phase: the one it failed in */
            job_diag_on_error(j, r, p->detail);
        }
        r->had_error = true;
    }
    if (p->phase == r->phase) return;
    Phase old = r->phase;
    r->phase = p->phase;
    r->phase_since_ns = at.mono_ns;
    r->book->phases[r->book->phases_head] = (JobPhaseRec){ p->phase, at.mono_ns };
    r->book->phases_head = (r->book->phases_head + 1) % JOB_PHASE_HIST;
    if (r->phases_len < JOB_PHASE_HIST) r->phases_len++;
    char from[48] = "";
    if (old != PHASE_NONE) snprintf(from, sizeof from, "%s -> ", phase_name(old));
    if (p->phase == PHASE_ERROR)
        job_ev_add(j, at, r->rank, EV_ERROR, "rank %d: %serror%s%.200s", r->rank, from, has_detail ? ": " : "",
                   has_detail ? p->detail : "");
    else
        job_ev_add(j, at, r->rank, EV_INFO, "rank %d: %s%s%s%.180s%s", r->rank, from, phase_name(p->phase),
                   has_detail ? " (" : "", has_detail ? p->detail : "", has_detail ? ")" : "");
    pause_update(j, at);
    update_state_from_phases(j);
    if (p->phase == PHASE_DESTROYED && !r->finished_ns) r->finished_ns = at.mono_ns;
    if (p->phase == PHASE_DESTROYING || p->phase == PHASE_DESTROYED) job_lint_alone(j, at);
}

/* Inline into both job_apply and job_apply_burst: every step comes here. */
__attribute__((always_inline)) static inline void apply_step(Job *j, JobRank *r, const MsgStep *s, JobTime at)
{
    int64_t now_ns = at.mono_ns;
    bool had = r->have_step;
    int64_t old_step = had ? r->last.step : 0, old_epoch = had ? r->last.epoch : 0;
    /* the lint looks at a rank's first step and at each new epoch only */
    if (!had || s->epoch > old_epoch) job_lint_epoch(j, r, s, had, old_step, old_epoch, at);
    /* wire integers are within +-2^61 (PROTO_INT_MAX), so the difference fits;
     * the running total saturates rather than wrap on a hostile peer's counts */
    int64_t d = s->samples - (had ? r->last.samples : 0), sum;
    j->book->samples_total =
        __builtin_add_overflow(j->book->samples_total, d, &sum) ? (d > 0 ? INT64_MAX : INT64_MIN) : sum;
    /* drops are per-rank counters: add this rank's growth */
    uint64_t old_drops = had ? r->last.drops : 0;
    if (s->drops >= old_drops) j->drops += s->drops - old_drops;
    r->last = *s;
    r->have_step = true;
    r->book->ring[r->book->ring_head] = (JobStepRec){
        .step = s->step,
        .epoch = s->epoch,
        .loss = s->loss,
        .step_ms = s->step_ms,
        .comm_ms = s->comm_ms,
        .exposed_ms = s->exposed_ms,
        .samples = s->samples,
        .t_ns = now_ns,
    };
    series_add(&r->loss_hist, s->step, s->loss);
    series_add(&j->loss_all, s->step, s->loss);
    r->book->ring_head = (r->book->ring_head + 1) & (JOB_STEP_RING - 1);
    if (r->ring_len < JOB_STEP_RING) r->ring_len++;
    job_rate_rank_push(r, now_ns);
    step_min_update(j, r, had, old_step);
    if (!had) update_state_from_phases(j);
}

/* Inline into both job_apply and job_apply_burst: every collective comes here. */
__attribute__((always_inline)) static inline void apply_coll(Job *j, JobRank *r, const MsgColl *c, JobTime at)
{
    double ms = job_coll_ms(c);
    r->have_coll = true;
    JobCollRec *rec = &r->book->colls[r->book->colls_head];
    rec->c = *c;
    rec->ms = ms;
    rec->wait_ms = (c->start_ns > c->enq_ns && c->enq_ns > 0) ? (double)(c->start_ns - c->enq_ns) / 1e6 : 0.0;
    r->book->colls_head = r->book->colls_head + 1 < JOB_RANK_COLLS ? r->book->colls_head + 1 : 0;
    if (r->colls_len < JOB_RANK_COLLS) r->colls_len++;
    if (c->seq > r->book->coll_seq_done) r->book->coll_seq_done = c->seq;
    job_comm_on_coll(j, r->rank, c, ms, at);
}

/* The line keeps the rank's own wall time when it sent one; the event is
 * stamped when ddptop saw it, as every event is. */
static void apply_log(Job *j, JobRank *r, const MsgLog *l, int64_t sent_wall_ns, JobTime at)
{
    JobEventLevel level = level_from_name(l->level);
    JobLogRec *rec = &r->book->logs[r->book->logs_head];
    rec->t_ns = sent_wall_ns ? sent_wall_ns : at.wall_ns;
    rec->level = level;
    copy_str(rec->text, sizeof rec->text, l->text);
    r->book->logs_head = (r->book->logs_head + 1) % JOB_RANK_LOGS;
    if (r->logs_len < JOB_RANK_LOGS) r->logs_len++;
    job_diag_on_log(j, r, level, l->text);
    job_ev_add(j, at, r->rank, level, "%s", l->text);
}

/* Every rank reports the same all-reduced eval: keep it once. Evals are
 * not events: a short epoch makes one every second, which would push the
 * checkpoints and errors off the events panel; the loss chart marks them
 * and the headless printer prints them. */
static void apply_eval(Job *j, const MsgEval *e, int64_t now_ns)
{
    for (int i = 0; i < 4; i++) {
        const JobEval *old = job_eval_at(j, i);
        if (old && old->epoch == e->epoch && old->step == e->step) return;
    }
    j->book->evals[j->n_evals % JOB_EVALS] = (JobEval){
        .epoch = e->epoch,
        .step = e->step,
        .loss = e->loss,
        .accuracy = e->accuracy,
        .correct = e->correct,
        .total = e->total,
        .t_ns = now_ns,
    };
    j->n_evals++;
}

static JobEventLevel level_from_name(const char *s)
{
    if (strncmp(s, "warn", 4) == 0) /* warn, warning */
        return EV_WARN;
    if (strncmp(s, "err", 3) == 0 || strcmp(s, "fatal") == 0) return EV_ERROR;
    return EV_INFO;
}

static void apply_beat(Job *j, JobRank *r, const MsgBeat *b, JobTime at)
{
    r->beat = *b;
    r->beat.where[sizeof r->beat.where - 1] = '\0';
    r->have_beat = true;
    r->beat_ns = at.mono_ns;
    if (r->beat.where[0]) r->python = true;
    job_comm_on_beat(j, r->rank, b, at);
    job_lint_alone(j, at);
}

/* A message into the model, all but samples/s: job_apply's and
 * job_apply_burst's common part (inline in both: every message that is not
 * a burst's comes here). False when it was none of the model's (a command,
 * store traffic) or its rank is outside the world (counted): no update of
 * samples/s follows it. */
__attribute__((always_inline)) static inline bool apply_msg(Job *j, const Msg *m, JobTime at)
{
    switch (m->kind) {
    case MSG_CMD:
    case MSG_SET:
    case MSG_GET:
    case MSG_WAIT:
    case MSG_VAL: return false; /* commands and store traffic: not the model's */
    default: break;
    }
    if (m->rank < 0 || m->rank >= j->world) {
        j->bad_frames++;
        j->version++;
        return false;
    }
    JobRank *r = &j->ranks[m->rank];
    r->last_msg_ns = at.mono_ns;
    if (m->t_ns > r->last_sent_ns) r->last_sent_ns = m->t_ns;
    j->version++;
    switch (m->kind) {
    case MSG_HELLO: apply_hello(j, r, &m->u.hello, at); break;
    case MSG_PHASE: apply_phase(j, r, &m->u.phase, at); break;
    case MSG_STEP: apply_step(j, r, &m->u.step, at); break;
    case MSG_COLL: apply_coll(j, r, &m->u.coll, at); break;
    case MSG_SHARD: job_shard_on_shard(j, r, &m->u.shard, at); break;
    case MSG_CKPT: job_apply_ckpt(j, r, &m->u.ckpt, at); break;
    case MSG_LOG: apply_log(j, r, &m->u.log, m->t_ns, at); break;
    case MSG_EVAL: apply_eval(j, &m->u.eval, at.mono_ns); break;
    case MSG_INFO: apply_info(j, &m->u.info); break;
    case MSG_BEAT: apply_beat(j, r, &m->u.beat, at); break;
    case MSG_BYE:
        if (!r->finished_ns) r->finished_ns = at.mono_ns;
        r->bye = true;
        r->bye_status = m->u.bye.status;
        if (m->u.bye.refused[0] && !j->refused[0]) {
            copy_str(j->refused, sizeof j->refused, m->u.bye.refused);
            job_ev_add(j, at, r->rank, EV_ERROR, "rank %d refused to run: %.300s", r->rank, j->refused);
        }
        if (m->u.bye.status != 0)
            job_ev_add(j, at, r->rank, EV_WARN, "rank %d says bye with status %d at step %lld", r->rank,
                       (int)m->u.bye.status, (long long)m->u.bye.step);
        job_lint_alone(j, at);
        break;
    default: break; /* unknown kind: it still proves the rank is there */
    }
    return true;
}

void job_apply(Job *j, const Msg *m, int64_t now_ns, int64_t wall_ns)
{
    if (!j || !m) return;
    if (apply_msg(j, m, (JobTime){ now_ns, wall_ns })) job_rate_update(j, now_ns);
}

/* Kinds whose application reads nothing of samples/s (its figure, its
 * window): a step, a collective, a beat. */
static bool rate_blind(MsgKind k) { return k == MSG_STEP || k == MSG_COLL || k == MSG_BEAT; }

void job_apply_burst(Job *j, const Msg *ms, int n, int64_t now_ns, int64_t wall_ns)
{
    if (!j || !ms) return;
    JobTime at = { now_ns, wall_ns };
    /* job_apply updates samples/s after each message. An update at now_ns
     * with no snapshot due (one after another at that time, or the first
     * when the newest is recent) reads the counters only for the figure:
     * its base and the window's age depend on the time alone. So after a
     * rate-blind message that update can wait for the next one, owed until
     * a message that may read the figure (a phase: a pause keeps it) or the
     * end. One that takes a snapshot (of the counters as they are) runs in
     * its place. A pause empties the window inside its own message, whose
     * update then runs the long way as job_apply's would. */
    bool may_wait = !job_rate_snap_due(j, now_ns), owed = false;
    for (int i = 0; i < n; i++) {
        const Msg *m = &ms[i];
        bool blind;
        if ((m->kind == MSG_STEP || m->kind == MSG_COLL) && m->rank >= 0 && m->rank < j->world) {
            /* the most of them, without apply_msg's call and switch */
            JobRank *r = &j->ranks[m->rank];
            r->last_msg_ns = now_ns;
            if (m->t_ns > r->last_sent_ns) r->last_sent_ns = m->t_ns;
            j->version++;
            if (m->kind == MSG_STEP)
                apply_step(j, r, &m->u.step, at);
            else
                apply_coll(j, r, &m->u.coll, at);
            blind = true;
        } else {
            blind = rate_blind(m->kind);
            if (owed && !blind) {
                job_rate_update(j, now_ns);
                owed = false;
            }
            if (!apply_msg(j, m, at)) continue;
        }
        if (may_wait && blind) {
            owed = true;
            continue;
        }
        job_rate_update(j, now_ns);
        may_wait = true;
    }
    if (owed) job_rate_update(j, now_ns);
}

/* ---- processes ---- */

void job_rank_started(Job *j, int rank, int pid, int64_t now_ns)
{
    if (!j || rank < 0 || rank >= j->world) return;
    JobRank *r = &j->ranks[rank];
    r->pid = pid;
    r->state = RANK_WAITING;
    r->phase_since_ns = now_ns;
    r->last_msg_ns = now_ns; /* staleness counts from launch until hello */
    j->version++;
}

void job_rank_exited(Job *j, int rank, int pid, int wait_status, const char *how, int64_t now_ns, int64_t wall_ns)
{
    if (!j) return;
    JobTime at = { now_ns, wall_ns };
    if (rank < 0 || rank >= j->world) {
        job_ev_add(j, at, -1, EV_WARN, "exit of pid %d reported for unknown rank %d", pid, rank);
        return;
    }
    JobRank *r = &j->ranks[rank];
    if (rank_exited(r)) return; /* reaped once; a second report adds nothing */
    if (pid > 0) r->pid = pid;
    r->wait_status = wait_status;
    bool exit0 = WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0;
    bool silent = j->bare && !r->hello; /* a bare program: its exit code is all it says */
    bool clean = exit0 && ((r->bye && r->bye_status == 0) || silent);
    if (how && *how) {
        copy_str(r->how_ended, sizeof r->how_ended, how);
    } else if (WIFEXITED(wait_status)) {
        int code = WEXITSTATUS(wait_status);
        /* exit 0 is only clean after a bye: without one the worker skipped
         * its shutdown (or something else called exit) */
        if (exit0 && !r->bye && !silent)
            snprintf(r->how_ended, sizeof r->how_ended, "exit 0 without bye");
        else if (exit0 && !silent && r->bye_status != 0)
            snprintf(r->how_ended, sizeof r->how_ended, "exit 0, bye status %d", (int)r->bye_status);
        else
            snprintf(r->how_ended, sizeof r->how_ended, "exit %d", code);
    } else if (WIFSIGNALED(wait_status)) {
        int sig = WTERMSIG(wait_status);
        const char *name = strsignal(sig);
        snprintf(r->how_ended, sizeof r->how_ended, "signal %d (%.32s)%s", sig, name ? name : "?",
                 WCOREDUMP(wait_status) ? ", core dumped" : "");
    } else {
        snprintf(r->how_ended, sizeof r->how_ended, "wait status 0x%x", (unsigned)wait_status);
    }
    r->state = clean ? RANK_EXITED_OK : RANK_FAILED;
    if (j->paused) pause_update(j, at);
    char where[48] = "";
    if (r->have_step)
        snprintf(where, sizeof where, " at step %lld", (long long)r->last.step);
    else if (!clean)
        snprintf(where, sizeof where, " before its first step");
    job_ev_add(j, at, rank, clean ? EV_INFO : EV_ERROR, "rank %d (pid %lld) ended: %s%s", rank, (long long)r->pid,
               r->how_ended, where);
    if (job_all_exited(j)) j->samples_per_s = 0; /* nobody left to train: no stale rate */
    if (!clean) {
        if (j->first_failed < 0) {
            j->first_failed = rank;
            /* a rank ending while the others wait for a stalled one: the
             * stall is the cause, unless the stalled one ended by itself */
            /* the hang the others were in when the first rank failed is
             * the diagnosis's evidence (job_diagnose weighs it against
             * the ranks' own errors) */
            j->hang.blamed = hang_is_current(j);
        }
        job_diag_on_exit(j, r);
        j->state = JOB_FAILED;
    } else if (job_all_exited(j)) {
        j->state = job_all_clean(j) && !j->ckpts_lost ? JOB_DONE : JOB_FAILED;
    }
    if (clean) job_lint_alone(j, at);
}

void job_set_pause_wanted(Job *j, bool pause)
{
    if (!j) return;
    j->pause_wanted = pause;
    j->version++;
}

void job_restart(Job *j, int64_t now_ns)
{
    if (!j) return;
    for (int i = 0; i < j->world; i++) {
        JobRank *r = &j->ranks[i];
        r->state = RANK_WAITING;
        r->hello = false;
        r->bye = false;
        r->bye_status = -1;
        r->finished_ns = 0;
        r->lingered = false;
        r->book->linger_why[0] = r->book->linger_text[0] = '\0';
        r->book->linger_late = false;
        r->wait_status = 0;
        r->how_ended[0] = '\0';
        r->had_error = false;
        r->detail[0] = '\0';
        r->have_beat = false;
        r->phase = PHASE_NONE;
        r->phase_since_ns = now_ns;
        r->last_msg_ns = now_ns;
        r->last_sent_ns = 0;
        r->book->epoch_start_known = false; /* the restart resumes mid-epoch */
        r->book->coll_seq_done = -1;        /* the new processes count from the start */
    }
    job_comm_restart(j);
    memset(&j->hang, 0, sizeof j->hang);
    for (int i = 0; i < j->world; i++) {
        JobRankBook *b = j->ranks[i].book;
        b->fail_order = 0;
        b->fail_own = b->tb_open = false;
        b->tb_where[0] = b->tb_call[0] = '\0';
    }
    j->book->fail_count = 0;
    j->restarts++;
    j->state = JOB_STARTING;
    j->first_failed = -1;
    j->book->early_rank = j->book->early_by = -1;
    j->book->desync_seq = -1;
    j->pause_wanted = false;
    j->paused = false;
    j->version++;
}

void job_set_stopping(Job *j)
{
    if (!j || j->state == JOB_DONE || j->state == JOB_FAILED || j->state == JOB_STOPPING) return;
    j->state = JOB_STOPPING;
    j->version++;
}

/* ---- queries ---- */

bool job_all_exited(const Job *j)
{
    for (int i = 0; i < j->world; i++)
        if (!rank_exited(&j->ranks[i])) return false;
    return true;
}

bool job_all_clean(const Job *j)
{
    for (int i = 0; i < j->world; i++)
        if (j->ranks[i].state != RANK_EXITED_OK) return false;
    return true;
}

int job_alive(const Job *j)
{
    int n = 0;
    for (int i = 0; i < j->world; i++) n += j->ranks[i].state == RANK_ALIVE;
    return n;
}

bool job_rank_stale(const JobRank *r, int64_t now_ns)
{
    bool live = r->state == RANK_ALIVE || (r->state == RANK_WAITING && r->pid > 0);
    return live && now_ns - r->last_msg_ns > JOB_STALE_NS;
}

bool job_rank_beat_late(const JobRank *r, int64_t now_ns)
{
    return r->python && r->state == RANK_ALIVE && now_ns - r->last_msg_ns > JOB_BEAT_LATE_NS;
}

double job_rank_allreduce_ms(const JobRank *r)
{
    const JobCollRec *c = job_rank_coll_at(r, 0);
    if (c && strcmp(c->c.op, "allreduce") == 0) return c->ms;
    return r->have_step ? r->last.comm_ms : 0.0;
}

const JobPhaseRec *job_rank_phase_at(const JobRank *r, int i)
{
    if (!r || i < 0 || i >= r->phases_len) return NULL;
    return &r->book->phases[(r->book->phases_head + JOB_PHASE_HIST - 1 - i) % JOB_PHASE_HIST];
}

const JobCollRec *job_rank_coll_at(const JobRank *r, int i)
{
    if (!r || i < 0 || i >= r->colls_len) return NULL;
    return &r->book->colls[(r->book->colls_head + JOB_RANK_COLLS - 1 - i) % JOB_RANK_COLLS];
}

const JobLogRec *job_rank_log_at(const JobRank *r, int i)
{
    if (!r || i < 0 || i >= r->logs_len) return NULL;
    return &r->book->logs[(r->book->logs_head + JOB_RANK_LOGS - 1 - i) % JOB_RANK_LOGS];
}

const JobEval *job_eval_at(const Job *j, int i)
{
    if (!j || i < 0 || i >= j->n_evals || i >= JOB_EVALS) return NULL;
    return &j->book->evals[(j->n_evals - 1 - i) % JOB_EVALS];
}

double job_rank_beat_age_s(const JobRank *r, int64_t now_ns)
{
    int64_t d = now_ns - r->last_msg_ns;
    return d > 0 ? (double)d / 1e9 : 0.0;
}

bool job_rank_beat_in_coll(const JobRank *r)
{
    if (!r->have_beat || r->beat.coll_seq < 0 || r->beat.coll_since_ns <= 0) return false;
    /* a completed collective with that number or a later one means the beat
     * is old news (the newest coll alone may be an older bucket's) */
    return r->book->coll_seq_done < r->beat.coll_seq;
}

bool job_rank_in_flight(const JobRank *r, int64_t wall_ns, int64_t *seq, double *secs)
{
    if (r->state != RANK_ALIVE || !job_rank_beat_in_coll(r) || wall_ns - r->beat.coll_since_ns < JOB_INFLIGHT_NS)
        return false;
    if (seq) *seq = r->beat.coll_seq;
    if (secs) *secs = (double)(wall_ns - r->beat.coll_since_ns) / 1e9;
    return true;
}

const JobStepRec *job_rank_step_at(const JobRank *r, int i)
{
    if (!r || i < 0 || i >= r->ring_len) return NULL;
    return &r->book->ring[(r->book->ring_head + JOB_STEP_RING - 1 - i) % JOB_STEP_RING];
}

void job_verdict(const Job *j, char *buf, size_t len)
{
    if (!buf || len == 0 || job_outcome_verdict(j, buf, len)) return;
    if (job_all_clean(j)) {
        if (j->world == 1)
            snprintf(buf, len, "job done: rank 0 ended cleanly");
        else
            snprintf(buf, len, "job done: all %d ranks ended cleanly", j->world);
        return;
    }
    if (j->first_failed >= 0 && job_diag_verdict(j, buf, len)) {
        job_text_mend(buf);
        return;
    }
    int running = 0;
    for (int i = 0; i < j->world; i++) running += !rank_exited(&j->ranks[i]);
    snprintf(buf, len, "job not finished: %d of %d ranks still running at step %lld", running, j->world,
             (long long)j->step);
}

bool job_rank_where(const JobRank *r, char *buf, size_t len)
{
    if (!buf || len == 0) return false;
    buf[0] = '\0';
    if (!r || !r->have_beat || !r->beat.where[0]) return false;
    /* "file.py:57 fn" -> "file.py:57 in fn"; anything else as it came */
    const char *w = r->beat.where, *sp = strchr(w, ' ');
    if (sp && sp[1])
        snprintf(buf, len, "%.*s in %s", (int)(sp - w), w, sp + 1);
    else
        snprintf(buf, len, "%s", w);
    return true;
}

const char *job_state_name(JobState s)
{
    switch (s) {
    case JOB_STARTING: return "STARTING";
    case JOB_RUNNING: return "RUNNING";
    case JOB_STOPPING: return "STOPPING";
    case JOB_DONE: return "DONE";
    case JOB_FAILED: return "FAILED";
    case JOB_PAUSED: return "PAUSED";
    }
    return "?";
}

const char *rank_state_name(RankState s)
{
    switch (s) {
    case RANK_WAITING: return "waiting";
    case RANK_ALIVE: return "alive";
    case RANK_EXITED_OK: return "exited";
    case RANK_FAILED: return "failed";
    }
    return "?";
}
