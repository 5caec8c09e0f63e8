/* job_lint.c — mistakes in a training script, spotted live from what the
 * ranks report: an epoch with another number of steps on one rank than on
 * another (DDP pairs the ranks' all-reduces in order, so the one with more
 * batches is left waiting at the end), one collective number carrying
 * different ops on different ranks (desync), and a rank alone in a
 * collective while every other rank has finished (a collective under
 * `if rank == 0:`, the classic shutdown hang). The forgotten set_epoch is
 * job_shard.c's; it marks its ranks here too.
 *
 * Owns: JobRank.lints, the told-once bits and the epoch counts in the
 * books. Each lint is one warn event per job and a mark on the ranks it
 * concerns (the ranks table shows it). Main thread.
 */
#include "model/job_priv.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "model/hang.h"

void job_lint_mark(Job *j, JobRank *r, JobLint lint, JobTime at, const char *fmt, ...)
{
    if (r && !(r->lints & lint)) {
        r->lints |= lint;
        j->version++;
    }
    if (!fmt || (j->book->lints_told & lint)) return;
    j->book->lints_told |= lint;
    char text[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    job_ev_add(j, at, r ? r->rank : -1, EV_WARN, "%s", text);
}

const char *job_lint_brief(unsigned lints)
{
    if (lints & JOB_LINT_ALONE) return "alone: the others finished";
    if (lints & JOB_LINT_EARLY) return "steps differ (Join?)";
    if (lints & JOB_LINT_DESYNC) return "desync: other ops, same #";
    if (lints & JOB_LINT_SHAPE) return "desync: other sizes, same #";
    if (lints & JOB_LINT_UNEVEN) return "uneven epochs (Join?)";
    if (lints & JOB_LINT_SET_EPOCH) return "set_epoch not called?";
    return "";
}

/* Steps of the epoch a rank just left: from the last step of the epoch
 * before (when known) to its last step in this one. The first rank to
 * finish an epoch sets the count; a rank that finishes it with another is
 * the lint. Step numbers count optimizer steps, so a dropped step message
 * in the middle of an epoch changes nothing. */
void job_lint_epoch(Job *j, JobRank *r, const MsgStep *s, bool had, int64_t prev_step, int64_t prev_epoch, JobTime at)
{
    JobRankBook *b = r->book;
    if (!had) {
        b->epoch_start_known = s->step == 1; /* from the start (a resumed run's first epoch is partial) */
        b->epoch_start_step = 0;
        return;
    }
    if (s->epoch <= prev_epoch) return;
    bool known = b->epoch_start_known;
    int64_t steps = prev_step - b->epoch_start_step;
    b->epoch_start_known = s->epoch == prev_epoch + 1;
    b->epoch_start_step = prev_step;
    if (!known || steps <= 0) return;
    JobBook *k = j->book;
    if (k->ep_rank < 0 || prev_epoch > k->ep_epoch) {
        k->ep_epoch = prev_epoch;
        k->ep_steps = steps;
        k->ep_rank = r->rank;
        return;
    }
    if (prev_epoch != k->ep_epoch || steps == k->ep_steps) return;
    job_lint_mark(j, &j->ranks[k->ep_rank], JOB_LINT_UNEVEN, at, NULL);
    job_lint_mark(j, r, JOB_LINT_UNEVEN, at,
                  "uneven epochs: epoch %lld took rank %d %lld steps, rank %d %lld: at the end the rank with more "
                  "batches hangs in all-reduce; wrap the loop in torch.distributed.algorithms.join.Join or use "
                  "drop_last=True",
                  (long long)prev_epoch, k->ep_rank, (long long)k->ep_steps, r->rank, (long long)steps);
}

void job_lint_desync(Job *j, JobTime at, int64_t seq, int rank_a, const char *op_a, int rank_b, const char *op_b)
{
    if (rank_a < 0 || rank_a >= j->world || rank_b < 0 || rank_b >= j->world || rank_a == rank_b) return;
    JobBook *b = j->book;
    if (b->desync_seq < 0) { /* the first one, for the diagnosis */
        b->desync_seq = seq;
        b->desync_rank[0] = rank_a;
        b->desync_rank[1] = rank_b;
        snprintf(b->desync_op[0], sizeof b->desync_op[0], "%s", op_a);
        snprintf(b->desync_op[1], sizeof b->desync_op[1], "%s", op_b);
    }
    job_lint_mark(j, &j->ranks[rank_a], JOB_LINT_DESYNC, at, NULL);
    job_lint_mark(j, &j->ranks[rank_b], JOB_LINT_DESYNC, at,
                  "desync: collective #%lld is %.20s on rank %d but %.20s on rank %d: the ranks call collectives in "
                  "different orders (one under an if, or different models); they pair up wrongly or hang",
                  (long long)seq, op_a, rank_a, op_b, rank_b);
}

void job_lint_shape(Job *j, JobTime at, int rank_a, int rank_b, const char *what)
{
    if (rank_a < 0 || rank_a >= j->world || rank_b < 0 || rank_b >= j->world || rank_a == rank_b) return;
    job_lint_mark(j, &j->ranks[rank_a], JOB_LINT_SHAPE, at, NULL);
    job_lint_mark(j, &j->ranks[rank_b], JOB_LINT_SHAPE, at,
                  "desync: %s: the ranks pass tensors of different sizes or types to one collective; it sums the "
                  "wrong elements, aborts or hangs",
                  what);
}

/* Done with training for good: exited cleanly, said bye 0, or destroying
 * or destroyed its process group. */
static bool finished(const JobRank *r)
{
    if (r->state == RANK_EXITED_OK || (r->bye && r->bye_status == 0)) return true;
    return r->state == RANK_ALIVE && (r->phase == PHASE_DESTROYING || r->phase == PHASE_DESTROYED);
}

/* In flight for a second or more (the model's one rule), by wall clock,
 * and its beats on time: a late one's collective may be long over (it
 * holds the GIL elsewhere: JOB_SILENT_NS). */
static bool waiting_in(const JobRank *r, JobTime at)
{
    return r->state == RANK_ALIVE && job_rank_beat_in_coll(r) && at.wall_ns - r->beat.coll_since_ns >= JOB_INFLIGHT_NS &&
           !job_rank_beat_late(r, at.mono_ns);
}

/* Rank r is alone when every other rank has finished or waits in r's own
 * collective, and at least one has finished: so some ranks are alone
 * exactly when none is neither waiting nor finished, some have finished,
 * and the waiting ones all wait in one collective. One pass over the ranks
 * that stops at the first rank still training (the usual case, at once):
 * a beat costs O(1) while training, O(world) in a hang, not O(world^2). */
void job_lint_alone(Job *j, JobTime at)
{
    if (j->world < 2) return;
    int in[HANG_LIST_MAX], n_in = 0, n_wait = 0, n_done = 0;
    int64_t seq = -1;
    bool fresh = false; /* a waiting rank not marked yet */
    for (int k = 0; k < j->world; k++) {
        const JobRank *o = &j->ranks[k];
        if (waiting_in(o, at)) {
            if (n_wait++ == 0)
                seq = o->beat.coll_seq;
            else if (o->beat.coll_seq != seq)
                return;
            if (n_in < HANG_LIST_MAX) in[n_in++] = k;
            fresh |= !(o->lints & JOB_LINT_ALONE);
        } else if (finished(o)) {
            n_done++;
        } else {
            return;
        }
    }
    if (n_wait == 0 || n_done == 0 || !fresh) return;
    const JobRank *r = &j->ranks[in[0]];
    char who[256];
    hang_format_ranks(in, n_in, who, sizeof who);
    for (int k = 0; k < j->world; k++)
        if (k != in[0] && waiting_in(&j->ranks[k], at))
            job_lint_mark(j, &j->ranks[k], JOB_LINT_ALONE, at, NULL);
    job_lint_mark(j, &j->ranks[in[0]], JOB_LINT_ALONE, at,
                  "rank%s %s %s alone in %.20s #%lld: every other rank has finished. A collective only some "
                  "ranks reach (e.g. under `if rank == 0:`) is the classic shutdown hang: call it on every rank",
                  n_wait == 1 ? "" : "s", who, n_wait == 1 ? "is" : "are",
                  r->beat.coll_op[0] ? r->beat.coll_op : "a collective", (long long)seq);
}

/* The error text of a collective whose peer went away: Gloo's "Connection
 * closed by peer" / "reset by peer", a broken pipe. */
bool job_error_peer_gone(const char *error)
{
    return error && (strstr(error, "by peer") || strstr(error, "Connection closed") ||
                     strstr(error, "Connection reset") || strstr(error, "Broken pipe"));
}

/* The uneven-inputs failure that does not hang: rank r was still training
 * when another rank finished (a shorter loop, fewer batches) and destroyed
 * its process group; r's next collective then had no partner and failed
 * (Gloo: "Connection closed by peer"; NCCL would hang, which the hang view
 * and the alone lint tell). Judged on the job's first error only, when no
 * other rank has failed (then that one may be the peer that went). A stop
 * agreed through ddptop is no such case: every rank leaves training (phase
 * stopping) after the same step, so r would not be training past it. */
void job_lint_early(Job *j, JobRank *r, const char *error, JobTime at)
{
    JobBook *b = j->book;
    if (j->world < 2 || j->first_failed >= 0 || b->early_by >= 0) return;
    if (r->phase != PHASE_TRAIN || !r->have_step || !job_error_peer_gone(error)) return;
    int best = -1;
    for (int k = 0; k < j->world; k++) {
        const JobRank *o = &j->ranks[k];
        if (k == r->rank) continue;
        if (o->had_error || o->state == RANK_FAILED) return;
        if (!finished(o) || !o->have_step || o->last.step > r->last.step) continue;
        if (best < 0 || o->last.step < j->ranks[best].last.step) best = k;
    }
    if (best < 0) return;
    b->early_rank = best;
    b->early_by = r->rank;
    b->early_step = j->ranks[best].last.step;
    job_lint_mark(j, &j->ranks[best], JOB_LINT_EARLY, at, NULL);
    job_lint_mark(j, r, JOB_LINT_EARLY, at,
                  "rank %d had finished after step %lld while rank %d trained on: its next collective had no "
                  "partner. The ranks ran different numbers of steps: the same number of batches on each "
                  "(DistributedSampler, drop_last), the same no_sync() windows, or torch's Join",
                  best, (long long)b->early_step, r->rank);
}
