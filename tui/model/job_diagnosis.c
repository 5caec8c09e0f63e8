/* job_diagnosis.c — the job's one diagnosis: what went wrong, which rank
 * caused it and at which line of the user's own code. See job.h
 * (job_diagnose).
 *
 * Evidence comes in three kinds and is weighed here, not where it arrives:
 * the live hang's finding (hang.c keeps the strongest in JobHang.found),
 * each rank's error text and traceback (its innermost frame of the user's
 * own code, and the torch.distributed call made there), and how each
 * process ended, in the order failures came. A peer's "Connection closed by
 * peer" and a timeout are consequences: named, never the cause while
 * anything better is known. The live hang line, the final verdict, --json
 * and the exit line all read job_diagnose, so they cannot disagree.
 *
 * Owns: JobRankBook's fail_* and tb_* fields. Main thread.
 */
#include "model/job_priv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/hang.h"

const char *job_diag_kind_name(DiagKind k)
{
    switch (k) {
    case DIAG_NONE: return "none";
    case DIAG_FAILED: return "failed";
    case DIAG_TIMEOUT: return "timeout";
    case DIAG_UNEVEN: return "uneven";
    case DIAG_LINGER: return "linger";
    case DIAG_STUCK: return "stuck";
    case DIAG_STOPPED: return "stopped";
    case DIAG_SILENT: return "silent";
    case DIAG_DIED: return "died";
    case DIAG_EXCEPTION: return "exception";
    case DIAG_ALONE: return "alone";
    case DIAG_DESYNC: return "desync";
    }
    return "?";
}

static bool timed_out(const char *error)
{
    return error && (strstr(error, "Timed out") || strstr(error, "timed out") || strstr(error, "Timeout") ||
                     strstr(error, "timeout caused pair closure") ||
                     strstr(error, "DistBackendError: Watchdog"));
}

/* A consequence of another rank's trouble, not a cause of its own. */
static bool consequence(const char *error) { return job_error_peer_gone(error) || timed_out(error); }

void job_diag_on_error(Job *j, JobRank *r, const char *error)
{
    JobRankBook *b = r->book;
    if (b->fail_order) return;
    b->fail_order = ++j->book->fail_count;
    b->fail_own = !consequence(error);
}

void job_diag_on_exit(Job *j, JobRank *r)
{
    JobRankBook *b = r->book;
    if (b->fail_order) return; /* its error came first and said what it was */
    b->fail_order = ++j->book->fail_count;
    /* ended by ddptop's ladder: the hang it was in is the story, not this */
    b->fail_own = !strstr(r->how_ended, "by ddptop");
}

/* Library code, not the user's: torch, installed packages, the standard
 * library, frozen modules. */
static bool library_path(const char *path, size_t n)
{
    char p[PROTO_STR_MED];
    snprintf(p, sizeof p, "%.*s", (int)(n < sizeof p - 1 ? n : sizeof p - 1), path);
    return p[0] == '<' || strstr(p, "/site-packages/") || strstr(p, "/dist-packages/") ||
           strstr(p, "/lib/python3") || strstr(p, "/torch/") || strstr(p, "/ddptop/");
}

/* The adapter's traceback lines (runner.py script_traceback): a head
 * "Traceback (most recent call last)...", frames "PATH:LINE in FN: CODE",
 * innermost last, then the exception. */
/* What the adapter says when a finished script's process waits for its
 * threads (workers/python/ddptop/linger.py). */
#define LINGER_SAID "the script has finished but its process waits for "

void job_diag_on_log(Job *j, JobRank *r, JobEventLevel level, const char *text)
{
    (void)j;
    JobRankBook *b = r->book;
    if (level == EV_WARN && !strncmp(text, LINGER_SAID, strlen(LINGER_SAID))) {
        const char *why = text + strlen(LINGER_SAID);
        snprintf(b->linger_why, sizeof b->linger_why, "%.*s", (int)strcspn(why, "("), why);
        size_t n = strlen(b->linger_why);
        while (n && b->linger_why[n - 1] == ' ') b->linger_why[--n] = '\0';
        return;
    }
    if (level != EV_ERROR) return;
    if (!strncmp(text, "Traceback (most recent call last)", 33)) {
        b->tb_open = true;
        b->tb_where[0] = b->tb_call[0] = '\0';
        return;
    }
    if (!b->tb_open) return;
    const char *in = strstr(text, " in ");
    const char *colon = in ? in : NULL;
    while (colon > text && colon[-1] != ':') colon--;
    bool digits = in && colon > text + 1 && colon < in;
    for (const char *p = colon; digits && p < in; p++) digits = *p >= '0' && *p <= '9';
    if (!digits) { /* not a frame ("PATH:LINE in FN"): the exception closes it */
        b->tb_open = false;
        return;
    }
    size_t plen = (size_t)(colon - 1 - text);
    const char *fn = in + 4;
    size_t fnlen = strcspn(fn, ": ");
    if (!library_path(text, plen)) {
        const char *base = text;
        for (const char *p = text; p < colon - 1; p++)
            if (*p == '/') base = p + 1;
        snprintf(b->tb_where, sizeof b->tb_where, "%.*s in %.*s", (int)(in - base), base, (int)fnlen, fn);
        b->tb_call[0] = '\0';
    } else if (b->tb_where[0] && !b->tb_call[0]) {
        /* the first library frame under the user's: a collective they called? */
        char p[PROTO_STR_MED];
        snprintf(p, sizeof p, "%.*s", (int)(plen < sizeof p - 1 ? plen : sizeof p - 1), text);
        if (strstr(p, "distributed_c10d"))
            snprintf(b->tb_call, sizeof b->tb_call, "%.*s", (int)fnlen, fn);
        else
            snprintf(b->tb_call, sizeof b->tb_call, "-"); /* something else (backward, DDP's forward) */
    }
}

/* A rank that is done for good: ended cleanly, said bye 0, or destroys its
 * process group. */
static bool finished(const JobRank *r)
{
    return r->state == RANK_EXITED_OK || (r->bye && r->bye_status == 0) ||
           (r->state != RANK_FAILED && (r->phase == PHASE_DESTROYING || r->phase == PHASE_DESTROYED));
}

static int64_t step_of(const JobRank *r) { return r->have_step ? r->last.step : 0; }

/* Where rank r was, as the user reads it: its traceback's frame of their
 * code, else its newest heartbeat's line. */
static void where_of(const JobRank *r, char *buf, size_t len)
{
    if (r->book->tb_where[0])
        snprintf(buf, len, "%s", r->book->tb_where);
    else
        job_rank_user_where(r, buf, len);
}

bool job_rank_user_where(const JobRank *r, char *buf, size_t len)
{
    if (!job_rank_where(r, buf, len)) return false;
    if (buf[0] != '<') return true;
    buf[0] = '\0';
    return false;
}

static void set(JobDiagnosis *d, DiagKind k, const JobRank *r)
{
    memset(d, 0, sizeof *d);
    d->kind = k;
    d->rank = r ? r->rank : -1;
    d->step = r && r->have_step ? r->last.step : -1;
    if (r) where_of(r, d->where, sizeof d->where);
}

/* A collective the user called (their traceback says barrier, all_reduce,
 * ...) failed because its peer went away, while another rank had finished
 * after as many steps: a collective only some ranks reach. */
static bool alone_by_error(const Job *j, JobDiagnosis *d)
{
    /* the finished rank with the most steps (the lowest of those): O(world) a frame */
    int done = -1;
    for (int i = 0; i < j->world; i++)
        if (finished(&j->ranks[i]) && (done < 0 || step_of(&j->ranks[i]) > step_of(&j->ranks[done]))) done = i;
    for (int k = 0; done >= 0 && k < j->world; k++) {
        const JobRank *r = &j->ranks[k];
        const JobRankBook *b = r->book;
        if (!r->had_error || !job_error_peer_gone(r->detail) || !b->tb_call[0] || b->tb_call[0] == '-') continue;
        int other = done != k && step_of(&j->ranks[done]) >= step_of(r) ? done : -1;
        if (other < 0) continue;
        set(d, DIAG_ALONE, r);
        snprintf(d->text, sizeof d->text,
                 "rank %d called %s at %s after step %lld, which no other rank reached: rank %d had finished after "
                 "step %lld (code under `if rank == %d:`?); call it on every rank",
                 k, b->tb_call, d->where[0] ? d->where : "?", (long long)step_of(r), other,
                 (long long)step_of(&j->ranks[other]), k);
        return true;
    }
    return false;
}

static const char *op_words(const char *op) { return !strcmp(op, "allreduce") ? "all-reduce" : op[0] ? op : "?"; }

/* Two ranks reported one collective number with different ops (the
 * desync lint), though no hang showed it (the pair completed wrongly, or
 * a rank aborted on it). The culprit: the rank whose op is not DDP's
 * all-reduce, else the lower. */
static bool lint_desync(const Job *j, JobDiagnosis *d)
{
    const JobBook *b = j->book;
    if (b->desync_seq < 0) return false;
    int c = !strcmp(b->desync_op[0], "allreduce") && strcmp(b->desync_op[1], "allreduce")        ? 1
            : strcmp(b->desync_op[0], "allreduce") && !strcmp(b->desync_op[1], "allreduce")      ? 0
            : b->desync_rank[0] < b->desync_rank[1]                                                ? 0
                                                                                                   : 1;
    const JobRank *r = &j->ranks[b->desync_rank[c]], *o = &j->ranks[b->desync_rank[1 - c]];
    set(d, DIAG_DESYNC, r);
    char ow[PROTO_STR_MED + 8];
    where_of(o, ow, sizeof ow);
    snprintf(d->text, sizeof d->text,
             "desync: rank %d called %s #%lld%s%s where rank %d called %s%s%s: the ranks call collectives in "
             "different orders (one under an `if`?)",
             r->rank, op_words(b->desync_op[c]), (long long)b->desync_seq, d->where[0] ? " at " : "", d->where, o->rank,
             op_words(b->desync_op[1 - c]), ow[0] ? " at " : "", ow);
    return true;
}

/* One collective number passed with other sizes, dtypes or ops by the
 * ranks (job_comm.c; Gloo aborts the smaller side): named with both sides;
 * the culprit is the lower rank, as a desync's tie goes. */
static bool shape_desync(const Job *j, JobDiagnosis *d)
{
    char t[256];
    int64_t seq = job_coll_mismatch_first(j, t, sizeof t);
    const char *r0 = strstr(t, ": rank ");
    if (seq < 0 || !t[0] || !r0) return false;
    int rank = atoi(r0 + 7);
    if (rank < 0 || rank >= j->world) return false;
    set(d, DIAG_DESYNC, &j->ranks[rank]);
    snprintf(d->text, sizeof d->text, "desync: %s%s%s: the ranks passed one collective different payloads", t,
             d->where[0] ? " at " : "", d->where);
    return true;
}

/* The first rank whose own failure (an exception, a death) came first. */
static bool own_failure(const Job *j, JobDiagnosis *d)
{
    const JobRank *first = NULL;
    for (int k = 0; k < j->world; k++) {
        const JobRank *r = &j->ranks[k];
        if (r->book->fail_order && r->book->fail_own && (!first || r->book->fail_order < first->book->fail_order))
            first = r;
    }
    if (!first) return false;
    const JobRank *r = first;
    bool err = r->had_error && r->detail[0];
    set(d, err ? DIAG_EXCEPTION : DIAG_DIED, r);
    char at[48];
    if (r->have_step)
        snprintf(at, sizeof at, "at step %lld", (long long)r->last.step);
    else
        snprintf(at, sizeof at, "before its first step");
    const char *how = r->how_ended[0] ? r->how_ended : "failed";
    if (err && r->book->tb_where[0])
        snprintf(d->text, sizeof d->text, "rank %d raised at %s %s: %.400s", r->rank, d->where, at, r->detail);
    else if (err)
        snprintf(d->text, sizeof d->text, "rank %d %s %s: %.400s", r->rank, how, at, r->detail);
    else if (d->where[0])
        snprintf(d->text, sizeof d->text, "rank %d %s %s, last seen at %s", r->rank, how, at, d->where);
    else
        snprintf(d->text, sizeof d->text, "rank %d %s %s", r->rank, how, at);
    return true;
}

bool job_rank_finished_alive(const JobRank *r, int64_t *since_ns)
{
    if (!r || !r->finished_ns || r->state != RANK_ALIVE) return false;
    if (since_ns) *since_ns = r->finished_ns;
    return true;
}

/* Why a finished rank's process has not exited, as the user reads it, at
 * now_ns: an adapter's rank silent since (JOB_SILENT_NS) is not at its last
 * beat's line any more, only last heard there. */
static void linger_words(const JobRank *r, const char *wchan, int64_t now_ns, char *buf, size_t len)
{
    char w[PROTO_STR_MED + 8];
    bool heard = job_rank_user_where(r, w, sizeof w);
    if (r->book->linger_why[0])
        snprintf(buf, len, "it waits for %s", r->book->linger_why);
    else if (r->python && now_ns - r->last_msg_ns > JOB_SILENT_NS)
        snprintf(buf, len, "it has been silent for %lld s (its heartbeat thread cannot run: the process is blocked in "
                 "native code holding Python's GIL?)%s%s",
                 (long long)((now_ns - r->last_msg_ns) / 1000000000), heard ? ", last heard at " : "", heard ? w : "");
    else if (heard)
        snprintf(buf, len, "it is at %s", w);
    else if (wchan && wchan[0])
        snprintf(buf, len, "it waits in the kernel (%s)", wchan);
    else
        snprintf(buf, len, "nothing says why");
}

static void linger_text(const JobRank *r, const char *wchan, int64_t now_ns, char *buf, size_t len)
{
    char why[PROTO_STR_LONG + 64], said[64] = "";
    linger_words(r, wchan, now_ns, why, sizeof why);
    if (r->bye)
        snprintf(said, sizeof said, "said bye %d", (int)r->bye_status);
    else
        snprintf(said, sizeof said, "destroyed its process group");
    snprintf(buf, len, "rank %d finished (%s after step %lld) but its process did not exit: %s", r->rank, said,
             (long long)step_of(r), why);
}

bool job_note_linger(Job *j, int rank, int64_t now_ns, int64_t wall_ns, double secs, const char *wchan)
{
    JobTime at = { now_ns, wall_ns };
    if (!j || rank < 0 || rank >= j->world) return false;
    JobRank *r = &j->ranks[rank];
    if (r->lingered) return false;
    r->lingered = true;
    char t[JOB_DIAG_TEXT];
    linger_text(r, wchan, now_ns, t, sizeof t);
    snprintf(r->book->linger_text, sizeof r->book->linger_text, "%s", t);
    r->book->linger_late = j->book->fail_count > 0 || j->first_failed >= 0;
    job_ev_add(j, at, rank, EV_ERROR, "%s (%.0f s after it finished); ddptop ends it once no rank is training", t,
               secs);
    return true;
}

bool job_note_silent(Job *j, int rank, int64_t now_ns, int64_t wall_ns)
{
    if (!j || rank < 0 || rank >= j->world) return false;
    JobRank *r = &j->ranks[rank];
    JobRankBook *b = r->book;
    bool fresh = b->silent_from_ns != r->last_msg_ns;
    b->silent_from_ns = r->last_msg_ns;
    b->silent_for_ns = now_ns - r->last_msg_ns;
    if (!fresh) return false;
    char w[PROTO_STR_MED + 8];
    bool heard = job_rank_user_where(r, w, sizeof w);
    job_ev_add(j, (JobTime){ now_ns, wall_ns }, rank, EV_WARN,
               "rank %d has been silent for %lld s after step %lld (its heartbeat thread cannot run: the process is "
               "blocked in native code holding Python's GIL?)%s%s",
               rank, (long long)(b->silent_for_ns / 1000000000), (long long)step_of(r), heard ? ", last heard at " : "",
               heard ? w : "");
    return true;
}

/* A rank noted silent (job_note_silent) and not heard from since, that has
 * not finished (then its linger says it): the first by rank. Its line is
 * where it was last heard, in the past tense. */
static bool silent_rank(const Job *j, JobDiagnosis *d)
{
    for (int k = 0; k < j->world; k++) {
        const JobRank *r = &j->ranks[k];
        const JobRankBook *b = r->book;
        if (!b->silent_from_ns || b->silent_from_ns != r->last_msg_ns || finished(r)) continue;
        set(d, DIAG_SILENT, r);
        long long secs = (long long)(b->silent_for_ns / 1000000000);
        if (r->state == RANK_ALIVE)
            snprintf(d->text, sizeof d->text,
                     "rank %d has been silent for %lld s after step %lld (its heartbeat thread cannot run: the process "
                     "is blocked in native code holding Python's GIL?)%s%s",
                     k, secs, (long long)step_of(r), d->where[0] ? ", last heard at " : "", d->where);
        else
            snprintf(d->text, sizeof d->text,
                     "rank %d went silent after step %lld, for %lld s until it ended (its heartbeat thread could not "
                     "run: the process was blocked in native code holding Python's GIL?)%s%s",
                     k, (long long)step_of(r), secs, d->where[0] ? ", last heard at " : "", d->where);
        return true;
    }
    return false;
}

/* A finished rank whose process did not exit: the first one noted; late:
 * also one noted after a rank had failed (a slow exit under load, or a
 * real one, came after that failure and did not cause it: what did comes
 * first). */
static bool lingering(const Job *j, JobDiagnosis *d, bool late)
{
    for (int k = 0; k < j->world; k++) {
        const JobRank *r = &j->ranks[k];
        if (!r->lingered || (r->book->linger_late && !late)) continue;
        set(d, DIAG_LINGER, r);
        if (r->book->linger_why[0]) d->where[0] = '\0'; /* the thread's line is in the text */
        snprintf(d->text, sizeof d->text, "%s", r->book->linger_text);
        return true;
    }
    return false;
}

/* The uneven-inputs lint (job_lint_early) when the failing rank was not in
 * a collective of the user's own (then alone_by_error told it). */
static bool uneven(const Job *j, JobDiagnosis *d)
{
    const JobBook *b = j->book;
    if (b->early_by < 0) return false;
    const JobRank *r = &j->ranks[b->early_by];
    set(d, DIAG_UNEVEN, r);
    /* the line first: where the rank that trained on found no partner (its
     * backward, for DDP's all-reduce); step counts alone cannot tell uneven
     * inputs from no_sync() windows that differ (the same batches, fewer
     * synced steps on one rank), so both are named */
    snprintf(d->text, sizeof d->text,
             "rank %d had finished after step %lld while rank %d trained on: its next collective%s%s had no "
             "partner; the ranks ran different numbers of steps (uneven inputs, or no_sync() windows that differ "
             "by rank: Join)",
             b->early_rank, (long long)b->early_step, b->early_by, d->where[0] ? " at " : "", d->where);
    return true;
}

/* The first rank whose error is a timeout or a vanished peer. */
static bool first_consequence(const Job *j, JobDiagnosis *d)
{
    const JobRank *first = NULL;
    for (int k = 0; k < j->world; k++) {
        const JobRank *r = &j->ranks[k];
        if (r->book->fail_order && r->had_error && (!first || r->book->fail_order < first->book->fail_order))
            first = r;
    }
    if (!first) return false;
    const JobRank *r = first;
    set(d, timed_out(r->detail) ? DIAG_TIMEOUT : DIAG_FAILED, r);
    char at[48], call[80] = "";
    if (r->have_step)
        snprintf(at, sizeof at, "at step %lld", (long long)r->last.step);
    else
        snprintf(at, sizeof at, "before its first step");
    if (r->book->tb_call[0] > '-' || d->where[0])
        snprintf(call, sizeof call, " in %s", r->book->tb_call[0] > '-' ? r->book->tb_call : "a collective");
    snprintf(d->text, sizeof d->text, "rank %d %s %s%s%s%s: %.400s (%s, a consequence: no rank was seen causing it)",
             r->rank, r->how_ended[0] ? r->how_ended : "failed", at, call, d->where[0] ? " at " : "", d->where,
             r->detail, d->kind == DIAG_TIMEOUT ? "a timeout" : "its peer went away");
    return true;
}

void job_diagnose(const Job *j, JobDiagnosis *d)
{
    memset(d, 0, sizeof *d);
    d->rank = -1;
    d->step = -1;
    if (!j) return;
    /* a hang counts while it lasts, and at the end when it was on when the
     * first rank failed */
    const JobDiagnosis *hang = NULL;
    if (j->hang.found.kind != DIAG_NONE && (j->first_failed < 0 ? hang_is_current(j) : j->hang.blamed))
        hang = &j->hang.found;
    if (hang && hang->kind >= DIAG_ALONE) {
        *d = *hang;
        return;
    }
    if (j->first_failed >= 0 && (lint_desync(j, d) || shape_desync(j, d))) return;
    if (alone_by_error(j, d) || own_failure(j, d) || lingering(j, d, false)) return;
    if (hang) {
        *d = *hang;
        return;
    }
    if (silent_rank(j, d)) return;
    if (uneven(j, d) || lingering(j, d, true) || first_consequence(j, d)) return;
    if (j->first_failed >= 0) {
        const JobRank *r = &j->ranks[j->first_failed];
        set(d, DIAG_FAILED, r);
        if (r->have_step)
            snprintf(d->text, sizeof d->text, "rank %d %s at step %lld", r->rank, r->how_ended, (long long)r->last.step);
        else
            snprintf(d->text, sizeof d->text, "rank %d %s before its first step", r->rank, r->how_ended);
    }
}

bool job_diag_is_culprit(const Job *j, int rank)
{
    JobDiagnosis d;
    job_diagnose(j, &d);
    return d.kind != DIAG_NONE && d.rank == rank;
}

/* The words of a consequence's error: "Connection closed by peer",
 * "Timed out waiting 20000ms for recv operation to complete". */
static void consequence_words(const char *error, char *buf, size_t len)
{
    static const char *const keys[] = { "Connection closed", "Connection reset", "Broken pipe", "Timed out",
                                        "timed out", "Timeout", "Application timeout" };
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        const char *p = strstr(error, keys[i]);
        if (p) {
            snprintf(buf, len, "%.*s", (int)strcspn(p, "\n[("), p);
            size_t n = strlen(buf);
            while (n && buf[n - 1] == ' ') buf[--n] = 0;
            return;
        }
    }
    snprintf(buf, len, "%.80s", error);
}

/* How rank k ended, for the consequences' list. */
static void end_words(const JobRank *r, char *buf, size_t len)
{
    const char *how = r->how_ended[0] ? r->how_ended : "failed";
    const char *by = strstr(how, " by ddptop");
    if (by) {
        snprintf(buf, len, "stopped by ddptop (%.*s)", (int)(by - how), how);
        return;
    }
    if (r->had_error && consequence(r->detail)) {
        char w[96];
        consequence_words(r->detail, w, sizeof w);
        snprintf(buf, len, "ended: %s after \"%s\" (a consequence)", how, w);
        return;
    }
    snprintf(buf, len, "ended: %s", how);
}

bool job_diag_verdict(const Job *j, char *buf, size_t len)
{
    JobDiagnosis d;
    job_diagnose(j, &d);
    if (d.kind == DIAG_NONE) return false;
    char head[JOB_DIAG_TEXT];
    /* a stopped rank and one that left the loop: the hang's past tense */
    if (!((d.kind == DIAG_STOPPED || d.kind == DIAG_SILENT || (d.kind == DIAG_ALONE && j->hang.left)) &&
          d.rank == j->hang.found.rank && hang_verdict(j, head, sizeof head)))
        snprintf(head, sizeof head, "%s", d.text);
    size_t o = (size_t)snprintf(buf, len, "job failed: %s", head);
    /* how the other ranks ended, those that ended alike together; the
     * culprit's own end too when the head does not say it */
    bool *told = calloc((size_t)j->world, sizeof *told);
    int *group = malloc(sizeof(int) * (size_t)j->world);
    for (int k = 0; told && group && k < j->world && o < len; k++) {
        const JobRank *r = &j->ranks[k];
        if (told[k] || r->state != RANK_FAILED) continue;
        if (k == d.rank && strstr(head, r->how_ended)) continue;
        char how[160];
        end_words(r, how, sizeof how);
        int ng = 0;
        for (int i = k; i < j->world; i++) {
            char other[160];
            if (told[i] || j->ranks[i].state != RANK_FAILED) continue;
            if (i == d.rank && strstr(head, j->ranks[i].how_ended)) continue;
            end_words(&j->ranks[i], other, sizeof other);
            if (strcmp(other, how)) continue;
            told[i] = true;
            group[ng++] = i;
        }
        char who[128];
        hang_format_ranks(group, ng, who, sizeof who);
        const char *be = strncmp(how, "stopped", 7) ? "" : ng > 1 ? "were " : "was ";
        int w = snprintf(buf + o, len - o, "; rank%s %s %s%s", ng == 1 ? "" : "s", who, be, how);
        if (w < 0) break;
        o += (size_t)w;
    }
    free(told);
    free(group);
    return true;
}
