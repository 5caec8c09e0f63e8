/* report.c — a hang report on disk: one directory a person can attach to
 * a bug report, written once per hang when the gathering that follows it
 * (stacks.c) ends, and on request (the r key) at any time, hang or not.
 * See internal.h (run_report_start, run_hang_report).
 *
 * Beside the ranks' logs (--log-dir, else ddptop's private directory,
 * which is then kept): hang-N/ (a hang was on when it was written) or
 * report-N/ (none was: asked with r), one count for both, with README.txt,
 * verdict.txt, tree.txt (the merged stacks, compared over two looks),
 * stacks/rank-K.txt (each rank's own dump, every thread), collectives.txt
 * (each rank's last collectives: number, op, bucket, payload, state,
 * times), logs/rank-K.txt (the tail of each rank's log) and versions.txt.
 * Bounded: REPORT_RANKS_MAX ranks get their own stacks and log tails, each
 * capped; the tree holds every rank; at most REPORT_ON_KEY_MAX on request.
 * Main thread.
 */
#include "run/internal.h"

#include <errno.h>
#include <limits.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>

#include "base/clock.h"
#include "model/stacktree.h"

#define REPORT_RANKS_MAX  64          /* ranks with their own stacks and log tails */
#define REPORT_STACK_MAX  (256L << 10) /* bytes of one rank's dump */
#define REPORT_TAIL_MAX   (32L << 10)  /* bytes of one rank's log tail */
#define REPORT_COLLS      16          /* each rank's last collectives */
#define REPORT_TREE_MAX   (1L << 20)
#define REPORT_ON_KEY_MAX 32 /* reports written on request (r) in one job */

static FILE *open_in(const char *dir, const char *name)
{
    char p[1200];
    snprintf(p, sizeof p, "%.1000s/%.100s", dir, name);
    return fopen(p, "w");
}

/* The last `max` bytes of a file (from a line's start) into f. */
static void copy_tail(FILE *out, const char *path, long from, long to, long max)
{
    FILE *in = path && *path ? fopen(path, "rb") : NULL;
    if (!in) {
        fprintf(out, "(no log: %s)\n", path && *path ? strerror(errno) : "none kept here");
        return;
    }
    if (to < 0) {
        fseek(in, 0, SEEK_END);
        to = ftell(in);
    }
    bool skip_partial = false; /* cut to its last max bytes: begin at a line */
    if (from < 0 || to - from > max) {
        from = to - max > 0 ? to - max : 0;
        skip_partial = from > 0;
    }
    char buf[8192];
    if (fseek(in, from, SEEK_SET) == 0) {
        long left = to - from;
        while (left > 0) {
            size_t n = fread(buf, 1, (size_t)(left < (long)sizeof buf ? left : (long)sizeof buf), in);
            if (n == 0) break;
            size_t o = 0;
            if (skip_partial) {
                while (o < n && buf[o] != '\n') o++;
                if (o < n) {
                    o++;
                    skip_partial = false;
                }
            }
            fwrite(buf + o, 1, n - o, out);
            left -= (long)n;
        }
    }
    fclose(in);
}

static void write_collectives(FILE *f, const Job *j)
{
    fprintf(f, "# each rank's last %d collectives, newest first\n"
               "# rank seq op bucket step bytes count dtype state start_wall_ns done_wall_ns ms\n",
            REPORT_COLLS);
    for (int k = 0; k < j->world; k++) {
        const JobRank *r = &j->ranks[k];
        int64_t fseq = -1;
        if (r->have_beat && job_rank_beat_in_coll(r)) {
            fseq = r->beat.coll_seq;
            fprintf(f, "%d %" PRId64 " %s %d - - %" PRId64 " %s in-flight-since %" PRId64 " - -\n", k, fseq,
                    r->beat.coll_op[0] ? r->beat.coll_op : "?", (int)r->beat.coll_bucket, r->beat.coll_count,
                    r->beat.coll_dtype[0] ? r->beat.coll_dtype : "-", r->beat.coll_since_ns);
        }
        for (int i = 0; i < REPORT_COLLS; i++) {
            const JobCollRec *c = job_rank_coll_at(r, i);
            if (!c) break;
            fprintf(f, "%d %" PRId64 " %s %d %" PRId64 " %" PRId64 " %" PRId64 " %s done %" PRId64 " %" PRId64 " %.3f\n", k,
                    c->c.seq, c->c.op, (int)c->c.bucket, c->c.step, c->c.bytes, c->c.count,
                    c->c.dtype[0] ? c->c.dtype : "-", c->c.start_ns, c->c.done_ns, c->ms);
        }
    }
}

static void write_versions(FILE *f, const Job *j)
{
    struct utsname u;
    fprintf(f, "ddptop wire protocol v%d\n", PROTO_VERSION);
    if (uname(&u) == 0) fprintf(f, "host %s %s %s %s\n", u.nodename, u.sysname, u.release, u.machine);
    fprintf(f, "backend %s, device %s, world %d\nmodel %s, dataset %s\n", j->backend[0] ? j->backend : "?",
            j->device[0] ? j->device : "?", j->world, j->model[0] ? j->model : "?", j->dataset[0] ? j->dataset : "?");
    for (int k = 0; k < j->world && k < REPORT_RANKS_MAX; k++) {
        const JobRank *r = &j->ranks[k];
        fprintf(f, "rank %d: pid %" PRId64 " on %s, %s, phase %s, step %" PRId64 "%s%s\n", k, r->pid,
                r->host[0] ? r->host : "?", r->python ? "torch adapter" : "ddptop-worker", phase_name(r->phase),
                r->have_step ? r->last.step : (int64_t)-1, r->how_ended[0] ? ", ended: " : "", r->how_ended);
    }
}

/* Someone (a note on the screen, else an event) hears it. */
static void say(Run *r, bool on_key, const char *text)
{
    if (on_key && r->tui)
        view_tui_note(r->tui, text);
    else
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_WARN, "%s", text);
}

void run_report_start(Run *r, bool on_key, unsigned also)
{
    if (r->report.due) { /* the gathering under way writes one report, for both */
        if (on_key)
            say(r, true,
                r->report.on_key ? "r: a report is still being written (its stacks are being gathered)"
                                 : "r: the hang's report is being written (its stacks are being gathered)");
        if (also) run_gather_start(r, also);
        return;
    }
    if (on_key && r->report.on_key_n >= REPORT_ON_KEY_MAX) {
        char t[120];
        snprintf(t, sizeof t, "r: %d reports written on request already: no more in this job", REPORT_ON_KEY_MAX);
        say(r, true, t);
        return;
    }
    r->report.due = true;
    r->report.on_key = on_key;
    if (on_key) say(r, true, "r: writing a report: gathering every rank's stacks (two looks, a second apart) ...");
    run_gather_start(r, RUN_GATHER_REPORT | also);
}

/* verdict.txt: the diagnosis, else (a report on request) that there is no hang. */
static void write_verdict(FILE *f, Run *r, bool hang)
{
    JobDiagnosis d;
    job_diagnose(r->job, &d);
    const char *who = hang ? r->hw.last.verdict : "";
    if (!hang) {
        const Job *j = r->job;
        fprintf(f, "no hang: written on request (r) at step %lld, %.1f s into the job\n", (long long)j->step,
                (double)(mono_ns() - j->start_ns) / 1e9);
        if (d.kind != DIAG_NONE) fprintf(f, "\nthe job's diagnosis so far: %s\n", d.text);
        return;
    }
    fprintf(f, "%s\n", d.kind != DIAG_NONE ? d.text : who);
    if (d.kind != DIAG_NONE && who[0] && strcmp(d.text, who)) fprintf(f, "\nwho waits for whom: %s\n", who);
}

/* The directory made, or "" (a message in why). */
static int write_report(Run *r, const StackTree *t, const long *off, const long *size, bool hang, char *dir,
                        size_t dir_len, char *why, size_t why_len);

int run_hang_report(Run *r, const StackTree *t, const long *off, const long *size, char *out, size_t out_len)
{
    bool on_key = r->report.on_key;
    r->report.due = r->report.on_key = false;
    /* a hang on now makes it a hang's report, whoever asked */
    bool hang = r->job->hang.active || !on_key;
    char dir[sizeof r->job->hang_report], why[300], text[sizeof dir + 64];
    if (write_report(r, t, off, size, hang, dir, sizeof dir, why, sizeof why) == 0) {
        if (on_key) r->report.on_key_n++;
        /* the summary and the exit line name the newest hang's report */
        if (hang) snprintf(r->job->hang_report, sizeof r->job->hang_report, "%s", dir);
        snprintf(text, sizeof text, "%s written: %s", hang ? "hang report" : "report", dir);
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_WARN, "%s", text);
        if (on_key && r->tui) view_tui_note(r->tui, text);
        snprintf(out, out_len, "%s", dir);
        return 0;
    } else {
        snprintf(text, sizeof text, "%s: no directory could be made (%s)", hang ? "hang report" : "report", why);
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_WARN, "%s", text);
        if (on_key && r->tui) view_tui_note(r->tui, text);
    }
    return -1;
}

static int write_report(Run *r, const StackTree *t, const long *off, const long *size, bool hang, char *dir,
                        size_t dir_len, char *why, size_t why_len)
{
    const char *base = r->o->log_dir ? r->o->log_dir : r->dir;
    dir[0] = '\0';
    if (!base || !*base) {
        snprintf(why, why_len, "no log directory");
        return -1;
    }
    int n = ++r->hang_reports;
    snprintf(dir, dir_len, "%.360s/%s-%d", base, hang ? "hang" : "report", n);
    char sub[sizeof r->job->hang_report + 16];
    if (mkdir(dir, 0777) && errno != EEXIST) {
        snprintf(why, why_len, "%s: %s", dir, strerror(errno));
        dir[0] = '\0';
        return -1;
    }
    snprintf(sub, sizeof sub, "%s/stacks", dir);
    mkdir(sub, 0777);
    snprintf(sub, sizeof sub, "%s/logs", dir);
    mkdir(sub, 0777);
    if (!r->o->log_dir) r->keep_dir = true; /* the private directory goes unless kept */

    FILE *f = open_in(dir, "verdict.txt");
    if (f) {
        write_verdict(f, r, hang);
        fclose(f);
    }
    char *text = t ? malloc(REPORT_TREE_MAX) : NULL;
    if ((f = open_in(dir, "tree.txt"))) {
        if (text && stacktree_text_whole(t, text, REPORT_TREE_MAX)) fputs(text, f);
        else fputs("(no stacks gathered)\n", f);
        fclose(f);
    }
    free(text);
    int world = r->job->world;
    for (int k = 0; k < world && k < REPORT_RANKS_MAX; k++) {
        char name[64];
        const char *log = launcher_log_path(r->l, r->follow.on ? 0 : k);
        snprintf(name, sizeof name, "stacks/rank-%d.txt", k);
        if (off && off[k] >= 0 && (f = open_in(dir, name))) {
            copy_tail(f, log, off[k], size[k], REPORT_STACK_MAX);
            fclose(f);
        }
        snprintf(name, sizeof name, "logs/rank-%d.txt", k);
        if ((f = open_in(dir, name))) {
            copy_tail(f, log, -1, -1, REPORT_TAIL_MAX);
            fclose(f);
        }
    }
    if ((f = open_in(dir, "collectives.txt"))) {
        write_collectives(f, r->job);
        fclose(f);
    }
    if ((f = open_in(dir, "versions.txt"))) {
        write_versions(f, r->job);
        fclose(f);
    }
    if ((f = open_in(dir, "README.txt"))) {
        fprintf(f,
                "ddptop %s %d\n\n"
                "%s\n"
                "Attach the whole directory to a bug report.\n\n"
                "verdict.txt      %s\n"
                "tree.txt         every rank's stacks merged into one tree: each frame with the set of\n"
                "                 ranks that took it, smallest sets first (! a smaller set than its\n"
                "                 sibling's; * no rank moved there between two looks a second apart);\n"
                "                 nothing folded, as the screen folds long runs of frames\n"
                "stacks/          each rank's own dump, every thread (the first %d ranks)\n"
                "collectives.txt  each rank's last %d collectives: number, op, bucket, payload, state, times\n"
                "logs/            the tail of each rank's log (the first %d ranks, %ld kB each)\n"
                "versions.txt     the job: backend, device, model, each rank's host and process\n",
                hang ? "hang report" : "report", n,
                hang ? "A hang ddptop saw in this job, written once when its stacks had been gathered."
                     : "Written on request (the r key) while the job ran, once every rank's stacks had been gathered.",
                hang ? "the diagnosis: the cause, the rank, the line of the script's own code"
                     : "no hang: the step it was written at (and the job's diagnosis, if any)",
                REPORT_RANKS_MAX, REPORT_COLLS, REPORT_RANKS_MAX, REPORT_TAIL_MAX >> 10);
        fclose(f);
    }
    return 0;
}
