/* hang.c — the hang verdict. See hang.h.
 *
 * Every rank numbers its collectives in the same order, so "#812" means the
 * same collective on every rank. The ranks whose heartbeat says they are
 * inside the longest-stuck collective are waiting; every other rank is
 * "missing", and the verdict says what each missing rank is doing instead —
 * the answer to "which rank waits for whom".
 */
#include "model/hang.h"

#include <inttypes.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

void hang_snapshot(const Job *j, int64_t now_ns, HangRank *out, int n)
{
    for (int k = 0; k < n && k < j->world; k++) {
        const JobRank *r = &j->ranks[k];
        HangRank *s = &out[k];
        memset(s, 0, sizeof *s);
        s->rank = k;
        s->started = r->hello;
        s->exited = r->state == RANK_EXITED_OK || r->state == RANK_FAILED;
        snprintf(s->how_ended, sizeof s->how_ended, "%s", r->how_ended);
        s->phase = r->phase;
        s->last_step = r->have_step ? r->last.step : 0;
        s->inflight_seq = s->inflight_bucket = -1;
        if (!s->exited && job_rank_beat_in_coll(r)) {
            s->inflight_seq = r->beat.coll_seq;
            snprintf(s->inflight_op, sizeof s->inflight_op, "%s", r->beat.coll_op);
            s->inflight_since_ns = r->beat.coll_since_ns;
            s->inflight_bucket = r->beat.coll_bucket;
        }
        s->silent_ns = r->last_msg_ns ? now_ns - r->last_msg_ns : -1;
        s->sent_ns = r->last_sent_ns;
        job_rank_where(r, s->where, sizeof s->where);
        s->finished = r->state == RANK_EXITED_OK || (r->bye && r->bye_status == 0) ||
                      (!s->exited && (r->phase == PHASE_DESTROYING || r->phase == PHASE_DESTROYED));
        if (r->phase == PHASE_STOPPING || r->phase == PHASE_DESTROYING || r->phase == PHASE_DESTROYED)
            snprintf(s->stop_reason, sizeof s->stop_reason, "%.63s", r->detail);
        s->python = r->python;
    }
}

/* Its process lives as /proc sees it (not gone, stopped, a zombie). */
static bool proc_lives(const HangRank *r)
{
    return !r->exited && r->proc_state && !strchr("TtZX", r->proc_state);
}

bool hang_rank_silent(const HangRank *r)
{
    return r->python && proc_lives(r) && r->silent_ns > JOB_SILENT_NS;
}

/* Quiet past two beat periods, not yet silent: wait for the next look. */
static bool beat_late(const HangRank *r)
{
    return r->python && proc_lives(r) && r->silent_ns > JOB_BEAT_LATE_NS && r->silent_ns <= JOB_SILENT_NS;
}

/* The words of a silence, after "which has been" or "rank R has been". */
#define SILENT_WHY "(its heartbeat thread cannot run: the process is blocked in native code holding Python's GIL?)"

/* Out of the training loop: stopping, or destroying its process group. */
static bool stopping(const HangRank *a)
{
    return a->phase == PHASE_STOPPING || a->phase == PHASE_DESTROYING || a->phase == PHASE_DESTROYED;
}

/* " (unsafe stop)" for the fault's stop, else " (REASON)", or "". */
static void left_why(const HangRank *a, char *buf, size_t len)
{
    if (strstr(a->stop_reason, "unsafe stop"))
        snprintf(buf, len, " (unsafe stop)");
    else if (a->stop_reason[0])
        snprintf(buf, len, " (%.*s)", (int)strcspn(a->stop_reason, ":("), a->stop_reason);
    else
        buf[0] = 0;
}

const char *hang_state_name(char s)
{
    switch (s) {
    case 'R': return "running";
    case 'S': return "sleeping";
    case 'D': return "in uninterruptible wait";
    case 'T': return "stopped (SIGSTOP)";
    case 't': return "stopped by a debugger";
    case 'Z': return "a zombie";
    case 'X': return "dead";
    case 'I': return "idle";
    case 0: return "gone";
    default: return "in an unknown state";
    }
}

static const char *op_name(const char *op)
{
    if (!strcmp(op, "allreduce")) return "all-reduce";
    return op[0] ? op : "a collective";
}

void hang_format_ranks(const int *ranks, int n, char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < n && o < len; i++) {
        int j = i;
        while (j + 1 < n && ranks[j + 1] == ranks[j] + 1) j++;
        int w;
        if (j >= i + 2)
            w = snprintf(buf + o, len - o, "%s%d-%d", o ? "," : "", ranks[i], ranks[j]);
        else {
            w = snprintf(buf + o, len - o, "%s%d", o ? "," : "", ranks[i]);
            j = i;
        }
        if (w < 0) break;
        o += (size_t)w;
        i = j;
    }
}

/* What a rank that is not in the collective is doing, as a clause:
 * "which exited (signal 9 (Killed)) after step 811". A live rank's Python
 * line, when it sent one, says where: "which is at train.py:61 in save
 * (after step 811, sleeping)". A missing rank inside a collective is in
 * another one: another number, or the same number with another op (a
 * desync). */
static void why_missing(const HangRank *r, char *buf, size_t len)
{
    const char *w = r->where;
    if (w[0] && !r->exited && r->proc_state != 'Z') {
        if (r->proc_state == 'T' || r->proc_state == 't')
            snprintf(buf, len, "which is %s at %s after step %" PRId64, hang_state_name(r->proc_state), w,
                     r->last_step);
        else if (hang_rank_silent(r)) /* its line is where it was last heard, not where it is */
            snprintf(buf, len, "which has been silent for %" PRId64 " s after step %" PRId64 " " SILENT_WHY
                     ", last heard at %s", (int64_t)(r->silent_ns / 1000000000), r->last_step, w);
        else if (r->inflight_seq >= 0)
            snprintf(buf, len, "which waits in %s #%" PRId64 " instead, at %s (after step %" PRId64 ")",
                     op_name(r->inflight_op), r->inflight_seq, w, r->last_step);
        else if (r->phase == PHASE_STOPPING || r->phase == PHASE_DESTROYING || r->phase == PHASE_DESTROYED)
            snprintf(buf, len, "which stopped after step %" PRId64 " and is %s, at %s", r->last_step,
                     phase_name(r->phase), w);
        else if (r->phase == PHASE_PAUSED)
            snprintf(buf, len, "which is paused after step %" PRId64 " at %s", r->last_step, w);
        else if (r->silent_ns > 5000000000LL)
            snprintf(buf, len, "which has been silent for %" PRId64 " s after step %" PRId64 ", last at %s (%s)",
                     (int64_t)(r->silent_ns / 1000000000), r->last_step, w, hang_state_name(r->proc_state));
        else
            snprintf(buf, len, "which is at %s (after step %" PRId64 ", %s%s%s, phase %s)", w, r->last_step,
                     hang_state_name(r->proc_state), r->wchan[0] ? " in " : "", r->wchan, phase_name(r->phase));
        return;
    }
    if (!r->started && !r->exited) {
        snprintf(buf, len, "which never said hello");
    } else if (r->exited) {
        snprintf(buf, len, "which exited (%s) after step %" PRId64, r->how_ended[0] ? r->how_ended : "ended",
                 r->last_step);
    } else if (r->proc_state == 'T' || r->proc_state == 't') {
        snprintf(buf, len, "which is %s after step %" PRId64, hang_state_name(r->proc_state), r->last_step);
    } else if (r->proc_state == 'Z') {
        snprintf(buf, len, "which died after step %" PRId64, r->last_step);
    } else if (hang_rank_silent(r)) {
        snprintf(buf, len, "which has been silent for %" PRId64 " s after step %" PRId64 " " SILENT_WHY,
                 (int64_t)(r->silent_ns / 1000000000), r->last_step);
    } else if (r->inflight_seq >= 0) {
        snprintf(buf, len, "which waits in %s #%" PRId64 " instead (after step %" PRId64 ")", op_name(r->inflight_op),
                 r->inflight_seq, r->last_step);
    } else if (r->phase == PHASE_STOPPING || r->phase == PHASE_DESTROYING || r->phase == PHASE_DESTROYED) {
        snprintf(buf, len, "which stopped after step %" PRId64 " and is %s", r->last_step, phase_name(r->phase));
    } else if (r->phase == PHASE_PAUSED) {
        snprintf(buf, len, "which is paused after step %" PRId64, r->last_step);
    } else if (r->silent_ns > 5000000000LL) {
        snprintf(buf, len, "which has been silent for %" PRId64 " s after step %" PRId64 " (%s%s%s)",
                 (int64_t)(r->silent_ns / 1000000000), r->last_step, hang_state_name(r->proc_state),
                 r->wchan[0] ? " in " : "", r->wchan);
    } else {
        snprintf(buf, len, "which stopped stepping after step %" PRId64 " (%s%s%s, phase %s)", r->last_step,
                 hang_state_name(r->proc_state), r->wchan[0] ? " in " : "", r->wchan, phase_name(r->phase));
    }
}

/* The rest of the missing ranks after the first `from`, as "; rank 2,
 * which ..." clauses (three at most, then "and N more"), at out->verdict +
 * o. Returns the new length. */
static size_t other_missing(const HangRank *r, int n, HangReport *out, int from, size_t o)
{
    int shown = 0;
    for (int k = from; k < out->n_missing && k < HANG_LIST_MAX && o < sizeof out->verdict; k++) {
        const HangRank *m = NULL;
        for (int i = 0; i < n; i++)
            if (r[i].rank == out->missing[k]) m = &r[i];
        if (!m) continue;
        if (shown == 3) {
            int w = snprintf(out->verdict + o, sizeof out->verdict - o, "; and %d more rank%s",
                             out->n_missing - from - shown, out->n_missing - from - shown == 1 ? "" : "s");
            if (w > 0) o += (size_t)w;
            break;
        }
        char why[400];
        why_missing(m, why, sizeof why);
        int w = snprintf(out->verdict + o, sizeof out->verdict - o, "%s rank %d, %s", shown || from ? ";" : " for",
                         m->rank, why);
        if (w < 0) break;
        o += (size_t)w;
        shown++;
    }
    return o < sizeof out->verdict ? o : sizeof out->verdict - 1;
}

/* An unsafe stop: "rank 1 left the training loop (unsafe stop) after step
 * 40 and waits in barrier #41; rank 0 waits in all-reduce #41 (3.0 s) for
 * it", then any other missing rank. */
static int left_verdict(const HangRank *r, int n, HangReport *out, const char *who, const char *bucket, const char *at)
{
    const HangRank *l = NULL;
    for (int i = 0; i < n; i++)
        if (r[i].rank == out->left) l = &r[i];
    char why[80];
    left_why(l, why, sizeof why);
    size_t o = (size_t)snprintf(
        out->verdict, sizeof out->verdict,
        "rank %d left the training loop%s after step %" PRId64 " and waits in %s #%" PRId64 "%s%s; rank%s %s wait%s in "
        "%s #%" PRId64 " (%s%.1f s)%s%s for it",
        l->rank, why, l->last_step, op_name(l->inflight_op), l->inflight_seq, l->where[0] ? " at " : "", l->where,
        out->n_waiting == 1 ? "" : "s", who, out->n_waiting == 1 ? "s" : "", op_name(out->op), out->seq, bucket,
        out->waited_ms / 1000.0, at && at[0] ? " at " : "", at ? at : "");
    if (o >= sizeof out->verdict) return 1;
    o = other_missing(r, n, out, 1, o);
    if (o < sizeof out->verdict)
        snprintf(out->verdict + o, sizeof out->verdict - o,
                 ". The ranks must agree on the step to stop at (ddptop's d does), or the rest never reach its "
                 "barrier");
    return 1;
}

static int analyze(const HangRank *r, int n, int64_t now_ns, int64_t hang_after_ns, HangReport *out);

/* Is live rank a inside collective (seq, op)? */
static bool inside(const HangRank *a, int64_t seq, const char *op)
{
    return !a->exited && a->inflight_seq == seq && !strcmp(a->inflight_op, op);
}

/* A beat's "in collective #s" that the others' progress contradicts: ranks
 * number their collectives alike and one can finish #s+1 only once every
 * rank has entered it, so a rank inside #s+2 or later means this one has
 * left #s. Its beat is older than that (a rank SIGSTOPped a second after
 * its last beat had been inside the bucket before): taken at its word it
 * was the oldest wait, and the verdict read "rank 1 waits in #509 for rank
 * 0" while rank 0 waited in #511 for the stopped rank 1. Such a claim is
 * read as "in no collective"; the analysis runs on a copy without them.
 * So is a silent rank's (hang_rank_silent): its beat is as old as its
 * silence, and the collective it names may have completed long ago (a
 * rank that holds the GIL after it: "alone in all-reduce #2" was its old
 * news). While a rank's beat is late but not yet silent, no verdict. */
int hang_analyze(const HangRank *r, int n, int64_t now_ns, int64_t hang_after_ns, HangReport *out)
{
    int64_t top = -1;
    int stale = 0;
    for (int i = 0; i < n; i++)
        if (beat_late(&r[i])) {
            memset(out, 0, sizeof *out);
            out->seq = out->bucket = -1;
            out->left = out->catching_up = -1;
            out->late = r[i].rank;
            return 0;
        }
    for (int i = 0; i < n; i++)
        if (!r[i].exited && r[i].inflight_seq > top && !hang_rank_silent(&r[i])) top = r[i].inflight_seq;
    for (int i = 0; i < n; i++)
        stale += !r[i].exited && r[i].inflight_seq >= 0 && (r[i].inflight_seq + 2 <= top || hang_rank_silent(&r[i]));
    HangRank *c = stale ? malloc(sizeof *c * (size_t)n) : NULL;
    if (!c) return analyze(r, n, now_ns, hang_after_ns, out);
    memcpy(c, r, sizeof *c * (size_t)n);
    for (int i = 0; i < n; i++)
        if (!c[i].exited && c[i].inflight_seq >= 0 && (c[i].inflight_seq + 2 <= top || hang_rank_silent(&c[i]))) {
            c[i].inflight_seq = c[i].inflight_bucket = -1;
            c[i].inflight_op[0] = '\0';
        }
    int rc = analyze(c, n, now_ns, hang_after_ns, out);
    free(c);
    return rc;
}

static int analyze(const HangRank *r, int n, int64_t now_ns, int64_t hang_after_ns, HangReport *out)
{
    memset(out, 0, sizeof *out);
    out->seq = out->bucket = -1;
    out->left = out->catching_up = out->late = -1;
    /* The stuck collective: among ranks stuck longer than hang_after, the
     * (seq, op) ranks still training wait in, before one of ranks that left
     * the loop (their final barrier waits for the trainers, not the other
     * way round); then the one most of them share; ties go to the oldest
     * wait. */
    int best = -1, best_count = 0;
    int64_t best_since = 0;
    bool best_training = false;
    for (int i = 0; i < n; i++) {
        const HangRank *a = &r[i];
        if (a->exited || a->inflight_seq < 0 || now_ns - a->inflight_since_ns < hang_after_ns) continue;
        int count = 0;
        for (int j = 0; j < n; j++)
            if (inside(&r[j], a->inflight_seq, a->inflight_op)) count++;
        bool training = !stopping(a);
        if (best < 0 || (training && !best_training) ||
            (training == best_training &&
             (count > best_count || (count == best_count && a->inflight_since_ns < best_since)))) {
            best = i;
            best_count = count;
            best_since = a->inflight_since_ns;
            best_training = training;
        }
    }
    if (best < 0) return 0;
    /* when the wait began: its first rank's entry */
    const HangRank *b = &r[best];
    int64_t began = b->inflight_since_ns;
    for (int i = 0; i < n; i++)
        if (inside(&r[i], b->inflight_seq, b->inflight_op) && r[i].inflight_since_ns < began)
            began = r[i].inflight_since_ns;
    for (int i = 0; i < n; i++) {
        const HangRank *a = &r[i];
        if (!a->exited && !inside(a, b->inflight_seq, b->inflight_op) &&
            job_catching_up(a->silent_ns, a->sent_ns, began)) {
            out->catching_up = a->rank;
            return 0;
        }
    }
    out->hung = true;
    out->seq = r[best].inflight_seq;
    out->bucket = r[best].inflight_bucket;
    snprintf(out->op, sizeof out->op, "%s", r[best].inflight_op);
    for (int i = 0; i < n; i++) {
        const HangRank *a = &r[i];
        bool in = inside(a, out->seq, out->op);
        if (in) {
            int64_t w = (now_ns - a->inflight_since_ns) / 1000000;
            if (w > out->waited_ms) out->waited_ms = w;
            if (out->n_waiting < HANG_LIST_MAX) out->waiting[out->n_waiting] = a->rank;
            out->n_waiting++;
        } else {
            if (a->inflight_seq >= 0 && !a->exited) out->mismatch = true;
            /* the first rank that left the loop and waits in a collective of
             * its own, while trainers wait in theirs: the cause, named first */
            bool left = best_training && out->left < 0 && !a->exited && stopping(a) && a->inflight_seq >= 0;
            if (left) out->left = a->rank;
            if (left && out->n_missing > 0 && out->n_missing < HANG_LIST_MAX) {
                out->missing[out->n_missing] = out->missing[0];
                out->missing[0] = a->rank;
            } else if (out->n_missing < HANG_LIST_MAX) {
                out->missing[out->n_missing] = a->rank;
            }
            out->n_missing++;
        }
    }
    for (int i = 0; i < n && out->n_missing; i++)
        if (r[i].rank == out->missing[0]) out->missing_silent = hang_rank_silent(&r[i]);
    /* alone: every missing rank has finished for good; one that waits in a
     * collective of its own (a final barrier) is still coming to one */
    out->alone = out->n_missing > 0 && out->left < 0;
    for (int i = 0; i < n && out->alone; i++) {
        const HangRank *a = &r[i];
        bool in = inside(a, out->seq, out->op);
        if (!in && !a->finished) out->alone = false;
    }

    char who[256];
    int nw = out->n_waiting < HANG_LIST_MAX ? out->n_waiting : HANG_LIST_MAX;
    hang_format_ranks(out->waiting, nw, who, sizeof who);
    /* the line they wait at, when they all tell the same one */
    const char *at = NULL;
    for (int i = 0; i < n; i++) {
        const HangRank *a = &r[i];
        if (!inside(a, out->seq, out->op)) continue;
        if (!a->where[0] || (at && strcmp(at, a->where))) {
            at = "";
            break;
        }
        at = a->where;
    }
    char bucket[40] = "";
    if (out->bucket >= 0) snprintf(bucket, sizeof bucket, "bucket %" PRId64 ", ", out->bucket);
    if (out->left >= 0) return left_verdict(r, n, out, who, bucket, at);
    size_t o = (size_t)snprintf(out->verdict, sizeof out->verdict, "rank%s %s wait%s in %s #%" PRId64 " (%s%.1f s)%s%s",
                                out->n_waiting == 1 ? "" : "s", who, out->n_waiting == 1 ? "s" : "", op_name(out->op),
                                out->seq, bucket, out->waited_ms / 1000.0, at && at[0] ? " at " : "", at ? at : "");
    if (out->n_missing == 0) {
        snprintf(out->verdict + o, sizeof out->verdict - o,
                 ": every rank is inside it, so the collective itself is stuck (network or backend)");
        return 1;
    }
    o = other_missing(r, n, out, 0, o);
    if (out->alone && o < sizeof out->verdict)
        snprintf(out->verdict + o, sizeof out->verdict - o,
                 ". Nobody else will come: every other rank has finished, so this %s is reached by %s only "
                 "(code under `if rank == 0:`?), the classic shutdown hang; call it on every rank",
                 op_name(out->op), out->n_waiting == 1 ? "one rank" : "some ranks");
    return 1;
}

/* ---- the job's hang: reported once, blamed at the end ---- */

static bool same_hang(const JobHang *h, const HangReport *rep)
{
    return h->active && h->seq == rep->seq && !strcmp(h->op, rep->op);
}

/* The same hang a second later names a rank that was waiting as missing:
 * it left the collective since (its own timeout, ddptop's SIGTERM in the
 * ladder), which makes it no new culprit. The list only shrinks then (a
 * missing rank may have arrived meanwhile) and the event keeps what it said
 * while the picture was whole. Returns true when that was the case. */
static bool shrink_missing(JobHang *h, const HangReport *rep)
{
    int nh = h->n_missing < JOB_HANG_LIST ? h->n_missing : JOB_HANG_LIST;
    int nr = rep->n_missing < HANG_LIST_MAX ? rep->n_missing : HANG_LIST_MAX;
    bool grows = false;
    for (int i = 0; i < nr && !grows; i++) {
        bool was = false;
        for (int k = 0; k < nh && !was; k++) was = h->missing[k] == rep->missing[i];
        grows = !was;
    }
    if (!grows) return false;
    int kept = 0;
    for (int k = 0; k < nh; k++) {
        bool still = false;
        for (int i = 0; i < nr && !still; i++) still = rep->missing[i] == h->missing[k];
        if (still) h->missing[kept++] = h->missing[k];
    }
    if (kept > 0) h->n_missing = kept;
    return true;
}

/* The ranks of j inside collective (seq, op) now, as "0,2-5" (out), and
 * how many. */
static int ranks_in(const Job *j, int64_t seq, const char *op, char *buf, size_t len, int *first)
{
    int *in = malloc(sizeof(int) * (size_t)j->world), n = 0;
    if (!in) {
        buf[0] = 0;
        return 0;
    }
    for (int k = 0; k < j->world; k++) {
        const JobRank *r = &j->ranks[k];
        if (r->state == RANK_ALIVE && job_rank_beat_in_coll(r) && r->beat.coll_seq == seq &&
            !strcmp(r->beat.coll_op, op))
            in[n++] = k;
    }
    hang_format_ranks(in, n, buf, len);
    if (first) *first = n ? in[0] : -1;
    free(in);
    return n;
}

/* A desync: the ranks wait in different collectives. Grouped by the
 * collective each is in; the culprit is the smallest group's first rank
 * (ties: the lowest rank), so the same job names the same rank whichever
 * wait the analysis saw first. */
static void found_desync(const Job *j, JobDiagnosis *d)
{
    enum { GROUPS = 4 };
    struct {
        int64_t seq;
        char op[PROTO_STR_SHORT];
        int n, first;
        char who[128], where[PROTO_STR_MED + 8];
    } g[GROUPS];
    int ng = 0, more = 0;
    for (int k = 0; k < j->world; k++) {
        const JobRank *r = &j->ranks[k];
        if (r->state != RANK_ALIVE || !job_rank_beat_in_coll(r)) continue;
        bool seen = false;
        for (int i = 0; i < ng && !seen; i++) seen = g[i].seq == r->beat.coll_seq && !strcmp(g[i].op, r->beat.coll_op);
        if (seen) continue;
        if (ng == GROUPS) {
            more++;
            continue;
        }
        g[ng].seq = r->beat.coll_seq;
        snprintf(g[ng].op, sizeof g[ng].op, "%s", r->beat.coll_op);
        g[ng].n = ranks_in(j, g[ng].seq, g[ng].op, g[ng].who, sizeof g[ng].who, &g[ng].first);
        job_rank_user_where(r, g[ng].where, sizeof g[ng].where);
        ng++;
    }
    int c = 0;
    for (int i = 1; i < ng; i++)
        if (g[i].n < g[c].n || (g[i].n == g[c].n && g[i].first < g[c].first)) c = i;
    memset(d, 0, sizeof *d);
    d->kind = DIAG_DESYNC;
    d->rank = ng ? g[c].first : -1;
    d->step = d->rank >= 0 && j->ranks[d->rank].have_step ? j->ranks[d->rank].last.step : -1;
    if (!ng) return;
    snprintf(d->where, sizeof d->where, "%s", g[c].where);
    size_t o = (size_t)snprintf(d->text, sizeof d->text, "desync: rank%s %s in %s #%" PRId64 "%s%s", g[c].n == 1 ? "" : "s",
                                g[c].who, op_name(g[c].op), g[c].seq, g[c].where[0] ? " at " : "", g[c].where);
    for (int i = 0; i < ng && o < sizeof d->text; i++) {
        if (i == c) continue;
        int w = snprintf(d->text + o, sizeof d->text - o, "%s rank%s %s %s in %s #%" PRId64 "%s%s",
                         o && i > (c == 0 ? 1 : 0) ? ";" : " while", g[i].n == 1 ? "" : "s", g[i].who,
                         g[i].n == 1 ? "is" : "are", op_name(g[i].op), g[i].seq, g[i].where[0] ? " at " : "",
                         g[i].where);
        if (w < 0) break;
        o += (size_t)w;
    }
    if (o < sizeof d->text)
        snprintf(d->text + o, sizeof d->text - o,
                 "%s: the ranks call collectives in different orders (one under an `if`?)",
                 more ? " (and more)" : "");
}

/* A collective some ranks wait in alone: every other rank has finished. */
static void found_alone(const Job *j, const HangReport *rep, JobDiagnosis *d)
{
    memset(d, 0, sizeof *d);
    d->kind = DIAG_ALONE;
    d->rank = rep->n_waiting ? rep->waiting[0] : -1;
    const JobRank *r = d->rank >= 0 ? &j->ranks[d->rank] : NULL;
    d->step = r && r->have_step ? r->last.step : -1;
    if (r) job_rank_user_where(r, d->where, sizeof d->where);
    char who[96], gone[96];
    hang_format_ranks(rep->waiting, rep->n_waiting < HANG_LIST_MAX ? rep->n_waiting : HANG_LIST_MAX, who, sizeof who);
    hang_format_ranks(rep->missing, rep->n_missing < HANG_LIST_MAX ? rep->n_missing : HANG_LIST_MAX, gone, sizeof gone);
    const JobRank *m = rep->n_missing ? &j->ranks[rep->missing[0]] : NULL;
    snprintf(d->text, sizeof d->text,
             "rank%s %s alone in %s #%" PRId64 "%s%s: every other rank had finished (rank%s %s after step %" PRId64
             "), so only rank%s %s reach%s it (code under `if rank == %d:`?); call it on every rank",
             rep->n_waiting == 1 ? "" : "s", who, op_name(rep->op), rep->seq, d->where[0] ? " at " : "", d->where,
             rep->n_missing == 1 ? "" : "s", gone, m && m->have_step ? m->last.step : 0,
             rep->n_waiting == 1 ? "" : "s", who, rep->n_waiting == 1 ? "es" : "", d->rank);
}

/* This report's finding, for the job's diagnosis. */
static void found_of(const Job *j, const HangReport *rep, JobDiagnosis *d)
{
    if (rep->left < 0 && rep->mismatch) {
        found_desync(j, d);
        return;
    }
    if (rep->left < 0 && rep->alone) {
        found_alone(j, rep, d);
        return;
    }
    memset(d, 0, sizeof *d);
    d->kind = rep->left >= 0 ? DIAG_ALONE : rep->n_missing == 0 ? DIAG_STUCK : rep->missing_silent ? DIAG_SILENT : DIAG_STOPPED;
    d->rank = rep->left >= 0 ? rep->left : rep->n_missing ? rep->missing[0] : -1;
    d->step = d->rank >= 0 && j->ranks[d->rank].have_step ? j->ranks[d->rank].last.step : -1;
    if (d->rank >= 0) job_rank_user_where(&j->ranks[d->rank], d->where, sizeof d->where);
    /* a rank stopped: the cause first ("rank 1 is at q.py:12 in main
     * (...); ranks 0,2,3 wait in all-reduce #12 (...) for it"), so a cut
     * line still names it; the analysis says it the other way round */
    const char *v = rep->verdict, *f = strstr(v, " for rank ");
    const char *which = f ? strstr(f, ", which ") : NULL;
    if (rep->left >= 0 || rep->n_missing == 0 || !which) {
        snprintf(d->text, sizeof d->text, "%s", v);
        return;
    }
    snprintf(d->text, sizeof d->text, "rank %.*s %s; %.*s for %s", (int)(which - f - 10), f + 10, which + 8,
             (int)(f - v), v, rep->n_missing == 1 ? "it" : "them");
}

bool hang_note(Job *j, const HangReport *rep, int64_t now_ns, int64_t wall_ns)
{
    if (!j || !rep || !rep->hung) return false;
    JobHang *h = &j->hang;
    bool fresh = !same_hang(h, rep) || !job_event_nth(j, h->ev);
    if (!fresh && shrink_missing(h, rep)) return false;
    /* a new hang after one that resolved starts its own finding; while the
     * same trouble lasts only a stronger finding replaces the first, so the
     * job's diagnosis does not flip with what a second's snapshot saw */
    if (fresh && !hang_is_current(j)) h->found.kind = DIAG_NONE;
    JobDiagnosis f;
    found_of(j, rep, &f);
    /* once a stop was asked or a rank failed, what follows is that doing
     * (a stalled rank that d stopped cleanly is not a rank that finished
     * and left the others alone): the finding stands */
    bool frozen = h->found.kind != DIAG_NONE && (j->state == JOB_STOPPING || j->state == JOB_FAILED);
    if (!frozen &&
        (f.kind > h->found.kind || (f.kind == h->found.kind && same_hang(h, rep) && f.rank == h->found.rank)))
        h->found = f;
    h->active = true;
    h->seq = rep->seq;
    snprintf(h->op, sizeof h->op, "%s", rep->op);
    h->n_missing = rep->n_missing;
    for (int i = 0; i < rep->n_missing && i < JOB_HANG_LIST && i < HANG_LIST_MAX; i++) h->missing[i] = rep->missing[i];
    h->left = rep->left >= 0;
    h->unsafe = h->left && j->ranks[rep->left].detail[0] && strstr(j->ranks[rep->left].detail, "unsafe stop");
    if (fresh) {
        int m = rep->n_missing > 0 ? rep->missing[0] : -1;
        h->step = m >= 0 && m < j->world && j->ranks[m].have_step ? j->ranks[m].last.step : 0;
    }
    /* the live line is the diagnosis (a rank's own error may outrank the hang) */
    JobDiagnosis d;
    job_diagnose(j, &d);
    const char *line = d.kind != DIAG_NONE ? d.text : rep->verdict;
    if (fresh) {
        job_event(j, now_ns, wall_ns, -1, EV_ERROR, "hang: %s", line);
        h->ev = j->ev_total - 1;
    } else {
        job_event_update(j, h->ev, EV_ERROR, "hang: %s", line);
    }
    return fresh;
}

bool hang_is_missing(const Job *j, int rank)
{
    const JobHang *h = &j->hang;
    for (int i = 0; i < h->n_missing && i < JOB_HANG_LIST; i++)
        if (h->missing[i] == rank) return true;
    return false;
}

bool hang_is_current(const Job *j)
{
    const JobHang *h = &j->hang;
    if (!h->active || h->n_missing < 1) return false;
    const JobRank *m = &j->ranks[h->missing[0]];
    return !m->have_step || m->last.step <= h->step;
}

bool hang_verdict(const Job *j, char *buf, size_t len)
{
    const JobHang *h = &j->hang;
    if (h->n_missing < 1 || !buf || len == 0) return false;
    int nm = h->n_missing < JOB_HANG_LIST ? h->n_missing : JOB_HANG_LIST;
    int *waiting = malloc(sizeof(int) * (size_t)j->world);
    if (!waiting) return false;
    int nw = 0;
    for (int k = 0; k < j->world; k++)
        if (!hang_is_missing(j, k)) waiting[nw++] = k;
    char miss[128], wait[128];
    hang_format_ranks(h->missing, nm, miss, sizeof miss);
    hang_format_ranks(waiting, nw, wait, sizeof wait);
    free(waiting);
    const char *at = h->found.rank == h->missing[0] ? h->found.where : "";
    if (h->found.kind == DIAG_SILENT && h->found.rank == h->missing[0]) /* its line: where it was last heard */
        snprintf(buf, len,
                 "rank %d went silent after step %" PRId64
                 " (its heartbeat thread could not run: the process was blocked in native code holding Python's "
                 "GIL?)%s%s (%s %s waited for it in %s #%" PRId64 ")",
                 h->missing[0], h->step, at[0] ? ", last heard at " : "", at, nw == 1 ? "rank" : "ranks", wait,
                 op_name(h->op), h->seq);
    else if (h->left) /* the first missing rank left the loop alone: the cause */
        snprintf(buf, len,
                 "rank %d left the training loop%s after step %" PRId64 " (%s %s waited for it in %s #%" PRId64 ")",
                 h->missing[0], h->unsafe ? " (unsafe stop)" : " alone", h->step, nw == 1 ? "rank" : "ranks", wait,
                 op_name(h->op), h->seq);
    else
        snprintf(buf, len, "rank%s %s stalled at step %" PRId64 "%s%s (%s %s waited for %s in %s #%" PRId64 ")",
                 nm == 1 ? "" : "s", miss, h->step, at[0] ? " at " : "", at, nw == 1 ? "rank" : "ranks", wait,
                 nm == 1 ? "it" : "them", op_name(h->op), h->seq);
    return true;
}
