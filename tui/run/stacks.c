/* stacks.c — every rank's stacks merged into one tree (the t key, hangs
 * in --json, `ddptop stacks`). See internal.h and model/stacktree.h.
 *
 * A gathering looks twice, a second apart. Each look asks every Python
 * rank one of two ways:
 * - the signal path, for a rank this ddptop started on this host with its
 *   own log: the stack signal makes the adapter's faulthandler dump from
 *   its heartbeat thread (no blocking call of the script's is interrupted,
 *   and it works even where no Python thread can run: workers/python/
 *   ddptop/beat.py), and ddptop reads what the rank's log grew by once the
 *   logs have been quiet GATHER_QUIET_MS (or after GATHER_WAIT_MS);
 * - the wire path, for every other Python rank (`ddptop listen`, other
 *   nodes', the ranks a script spawned, which share one log): a "stacks"
 *   command on ctl whose arg is the look's token; the adapter's heartbeat
 *   thread dumps every thread into a file of its own and sends the text
 *   back in one "stack" message with the token (docs/PROTOCOL.md), so a
 *   late answer to an older look is dropped.
 * Every thread's stack goes into a tree; a rank that answered neither way
 * within GATHER_WAIT_MS says so; a rank that is not Python (ddptop's own
 * worker) adds its phase and its collective in flight as frames, from its
 * heartbeats. The second look's tree is compared with the first, so the
 * frames where no rank moved are marked. The second look's signal waits
 * until every signalled log has been quiet GATHER_QUIET_MS (a first dump
 * still being written is not read as the second's). Main thread.
 */
#include "run/internal.h"

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "launch/procstat.h"
#include "model/pystack.h"
#include "model/stacktree.h"

#define GATHER_QUIET_MS     200  /* the logs grew no more this long: the dumps are in */
#define GATHER_WAIT_MS      3000 /* a rank that wrote nothing by then has no stack this look */
#define GATHER_APART_MS     1000 /* the second look after the first (STAT's time dimension) */
#define GATHER_READ_MAX     (1L << 20)
#define GATHER_VIEWERS      16
#define GATHER_TEXT_MAX     (1L << 20)
#define GATHER_CHUNK        480 /* of a log message's 512 bytes */
#define GATHER_REPORT_RANKS 64  /* ranks whose own dump a hang report keeps (report.c's REPORT_RANKS_MAX) */

typedef struct RunGather {
    bool on;
    bool waiting; /* between the looks */
    int look;     /* 1 or 2 */
    unsigned want;
    bool tui_shown; /* the page opened on this gathering's first look */
    int64_t asked_ms, grew_ms, next_ms;
    long *off, *size;   /* [world]; off -1: not signalled this look */
    int64_t token;      /* this look's, for the wire path's answers */
    unsigned char *via; /* [world] RUN_STACK_VIA_*: how it was asked this look */
    char **text;        /* [world] the wire path's answers this look (NULL: none yet) */
    uint32_t *len;
    int wire_asked, wire_got;
    int64_t looked_ms; /* the first look's end: how long the second may wait for quiet logs */
    StackTree *prev, *cur;
    int n_viewers;
    struct {
        char ident[ZS_IDENT_MAX];
        size_t len;
        bool json;
    } viewers[GATHER_VIEWERS];
} RunGather;

static RunGather *gather_get(Run *r)
{
    if (r->gather) return r->gather;
    int world = r->job->world;
    RunGather *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->off = malloc((size_t)world * sizeof *g->off);
    g->size = malloc((size_t)world * sizeof *g->size);
    g->via = calloc((size_t)world, sizeof *g->via);
    g->text = calloc((size_t)world, sizeof *g->text);
    g->len = calloc((size_t)world, sizeof *g->len);
    g->prev = stacktree_new(world, 0);
    g->cur = stacktree_new(world, 0);
    if (!g->off || !g->size || !g->via || !g->text || !g->len || !g->prev || !g->cur) {
        free(g->off);
        free(g->size);
        free(g->via);
        free(g->text);
        free(g->len);
        stacktree_free(&g->prev);
        stacktree_free(&g->cur);
        free(g);
        return NULL;
    }
    r->gather = g;
    return g;
}

/* The Python process of a rank this ddptop can signal and whose log is
 * its own, or -1 (listen, other nodes, and the ranks a script spawned,
 * which share the launched process's log: the wire path's). */
static int python_pid(const Run *r, int rank)
{
    const JobRank *jr = &r->job->ranks[rank];
    if (r->external || r->follow.on || !jr->python || jr->state != RANK_ALIVE) return -1;
    pid_t pid = launcher_pid(r->l, rank);
    if (pid <= 0) return -1;
    /* the process that said hello: the interpreter, even under a wrapper that forked */
    return jr->pid > 0 ? (int)jr->pid : (int)pid;
}

RunStackRoute run_stack_route(Run *r, int rank)
{
    const JobRank *jr = &r->job->ranks[rank];
    RunStackRoute how = { .via = RUN_STACK_VIA_NONE, .off = -1, .asked = RUN_STACK_NOT_TRIED };
    how.pid = python_pid(r, rank);
    how.off = how.pid > 0 ? run_file_size(launcher_log_path(r->l, rank)) : -1;
    /* only a process with the adapter's handler: the signal's default would end it */
    if (how.off >= 0) how.asked = run_stack_ask(how.pid);
    if (how.asked == 0)
        how.via = RUN_STACK_VIA_LOG;
    else if (jr->python && jr->state == RANK_ALIVE && r->rk && r->rk[rank].routable)
        how.via = RUN_STACK_VIA_WIRE;
    return how;
}

static void drop_answers(RunGather *g, int world)
{
    for (int k = 0; k < world; k++) {
        free(g->text[k]);
        g->text[k] = NULL;
        g->len[k] = 0;
    }
}

/* One look: signal every Python rank here (noting where its log was), ask
 * every other reachable Python rank on the wire. */
static void look(Run *r, RunGather *g)
{
    drop_answers(g, r->job->world);
    g->token++;
    g->wire_asked = g->wire_got = 0;
    for (int k = 0; k < r->job->world; k++) {
        g->off[k] = -1;
        RunStackRoute how = run_stack_route(r, k);
        g->via[k] = (unsigned char)how.via;
        if (how.via == RUN_STACK_VIA_LOG) {
            g->off[k] = g->size[k] = how.off;
        } else if (how.via == RUN_STACK_VIA_WIRE) {
            run_ask_stacks(r, k, g->token);
            g->wire_asked++;
        }
    }
    g->asked_ms = g->grew_ms = mono_ms();
    g->waiting = false;
}

void run_gather_on_stack(Run *r, Msg *m)
{
    RunGather *g = r->gather;
    int k = m->rank;
    if (!g || !g->on || g->waiting || !r->job || k < 0 || k >= r->job->world) return;
    if (g->via[k] != RUN_STACK_VIA_WIRE || m->u.stack.token != g->token || g->text[k]) return; /* not this look's */
    g->text[k] = m->u.stack.text ? m->u.stack.text : strdup("");
    g->len[k] = m->u.stack.text ? m->u.stack.len : 0;
    m->u.stack.text = NULL; /* kept here now */
    m->u.stack.len = 0;
    if (g->text[k]) g->wire_got++;
}

void run_gather_start(Run *r, unsigned want)
{
    RunGather *g = r->job ? gather_get(r) : NULL;
    if (!g) {
        if (r->tui) view_tui_note(r->tui, "stacks: out of memory");
        return;
    }
    g->want |= want;
    if ((want & RUN_GATHER_TUI) && r->tui)
        view_tui_note(r->tui, g->on ? "t: still gathering every rank's stacks"
                                    : "t: gathering every rank's stacks (two looks, a second apart) ...");
    if (g->on) return; /* the one under way serves this want too */
    g->on = true;
    g->tui_shown = false;
    g->look = 1;
    look(r, g);
}

void run_gather_viewer(Run *r, const void *ident, size_t ident_len, bool json)
{
    RunGather *g = r->job ? gather_get(r) : NULL;
    if (!g || ident_len > ZS_IDENT_MAX) {
        viewers_tell(r->viewers, r->ctl, ident, ident_len, "stacks-end", "no stacks: out of memory");
        return;
    }
    for (int i = 0; i < g->n_viewers; i++)
        if (g->viewers[i].len == ident_len && !memcmp(g->viewers[i].ident, ident, ident_len)) {
            g->viewers[i].json = json;
            run_gather_start(r, RUN_GATHER_VIEWERS);
            return;
        }
    if (g->n_viewers == GATHER_VIEWERS) {
        viewers_tell(r->viewers, r->ctl, ident, ident_len, "stacks-end", "no stacks: too many viewers are waiting");
        return;
    }
    memcpy(g->viewers[g->n_viewers].ident, ident, ident_len);
    g->viewers[g->n_viewers].len = ident_len;
    g->viewers[g->n_viewers].json = json;
    g->n_viewers++;
    run_gather_start(r, RUN_GATHER_VIEWERS);
}

/* A rank with no Python stack: what the model knows of it, as frames. */
static void add_known(Run *r, StackTree *t, int k, uint64_t token, const char *why)
{
    const JobRank *jr = &r->job->ranks[k];
    char f0[STACKTREE_LABEL], f1[STACKTREE_LABEL], f2[STACKTREE_LABEL], f3[STACKTREE_LABEL];
    const char *frames[4] = { f0, f1, f2, f3 };
    int n = 0;
    if (jr->state == RANK_WAITING) {
        snprintf(f0, sizeof f0, "(no hello yet)");
        n = 1;
    } else if (jr->state != RANK_ALIVE) {
        snprintf(f0, sizeof f0, "(ended: %s)", jr->how_ended[0] ? jr->how_ended : "gone");
        n = 1;
    } else {
        snprintf(f0, sizeof f0, "%s", why);
        snprintf(f1, sizeof f1, "phase %s", jr->phase == PHASE_NONE ? "-" : phase_name(jr->phase));
        if (jr->have_beat && jr->beat.coll_seq >= 0 && jr->beat.coll_bucket >= 0)
            snprintf(f2, sizeof f2, "%s #%lld bucket %lld", jr->beat.coll_op, (long long)jr->beat.coll_seq,
                     (long long)jr->beat.coll_bucket);
        else if (jr->have_beat && jr->beat.coll_seq >= 0)
            snprintf(f2, sizeof f2, "%s #%lld", jr->beat.coll_op, (long long)jr->beat.coll_seq);
        else
            snprintf(f2, sizeof f2, "(in no collective)");
        n = 3;
        /* its heartbeats say where it was; a stopped process says no more */
        ProcStat ps;
        pid_t pid = r->external ? -1 : launcher_pid(r->l, k); /* ours, on this host */
        if (pid > 0 && procstat_read(jr->pid > 0 ? (int)jr->pid : (int)pid, &ps) == 0 &&
            (ps.state == 'T' || ps.state == 't')) {
            snprintf(f3, sizeof f3, "(process stopped)");
            n = 4;
        }
    }
    stacktree_add(t, k, 0, frames, n, token);
}

/* The label of a rank that gave no stack: an adapter's rank silent
 * (JOB_SILENT_NS) cannot answer, its heartbeat thread waits for the GIL. */
static const char *no_stack(const JobRank *jr, char *buf, size_t len)
{
    int64_t quiet = mono_ns() - jr->last_msg_ns;
    if (jr->python && jr->state == RANK_ALIVE && quiet > JOB_SILENT_NS)
        snprintf(buf, len, "(no stack within 3 s) silent %lld s: native code holding the GIL?",
                 (long long)(quiet / 1000000000));
    else
        snprintf(buf, len, "(no stack within 3 s)");
    return buf;
}

/* The look's tree: every rank's stacks into t. */
static void build(Run *r, RunGather *g, StackTree *t)
{
    stacktree_clear(t);
    char *text = malloc(GATHER_READ_MAX);
    for (int k = 0; k < r->job->world; k++) {
        const JobRank *jr = &r->job->ranks[k];
        /* a rank that trained on between the looks moved, whatever line both caught */
        uint64_t token = (uint64_t)(jr->have_beat ? jr->beat.step : jr->have_step ? jr->last.step : -1);
        if (g->via[k] == RUN_STACK_VIA_WIRE) {
            if (g->text[k] && stacktree_add_faulthandler(t, k, g->text[k], g->len[k], token) > 0) continue;
            char none[STACKTREE_LABEL];
            const char *frames[1] = { g->text[k] ? "(no Python stack in its answer)"
                                                 : no_stack(jr, none, sizeof none) };
            stacktree_add(t, k, 0, frames, 1, token);
            continue;
        }
        if (g->off[k] >= 0 && text) {
            long n = g->size[k] - g->off[k];
            if (n > GATHER_READ_MAX) n = GATHER_READ_MAX;
            size_t got = 0;
            FILE *f = n > 0 ? fopen(launcher_log_path(r->l, k), "rb") : NULL;
            if (f && fseek(f, g->off[k], SEEK_SET) == 0) got = fread(text, 1, (size_t)n, f);
            if (f) fclose(f);
            if (stacktree_add_faulthandler(t, k, text, got, token) > 0) continue;
            ProcStat ps;
            bool stopped = procstat_read(python_pid(r, k), &ps) == 0 && (ps.state == 'T' || ps.state == 't');
            char none[STACKTREE_LABEL];
            const char *frames[1] = { stopped ? "(stopped: no stack until it is continued)"
                                              : no_stack(jr, none, sizeof none) };
            stacktree_add(t, k, 0, frames, 1, token);
            continue;
        }
        char why[STACKTREE_LABEL];
        if (jr->python && jr->state == RANK_ALIVE) /* no hello on ctl: no route to ask it */
            snprintf(why, sizeof why, "(Python on %.40s: not reachable on ctl)", jr->host[0] ? jr->host : "?");
        else
            snprintf(why, sizeof why, "ddptop-worker");
        add_known(r, t, k, token, why);
    }
    free(text);
}

/* Whether a signalled rank's log grew since last seen (g->size, g->grew_ms
 * follow it); *all_grew (may be NULL): every signalled log grew this look. */
static bool logs_grow(Run *r, RunGather *g, int64_t now, bool *all_grew)
{
    bool grew = false, all = true;
    for (int k = 0; k < r->job->world; k++) {
        if (g->off[k] < 0) continue;
        long size = run_file_size(launcher_log_path(r->l, k));
        if (size > g->size[k]) {
            g->size[k] = size;
            g->grew_ms = now;
            grew = true;
        }
        if (g->size[k] == g->off[k]) all = false;
    }
    if (all_grew) *all_grew = all;
    return grew;
}

/* This look: every signalled log grew and is quiet and every wire answer
 * is in, or time is up. */
static bool look_done(Run *r, RunGather *g, int64_t now)
{
    bool all = true;
    logs_grow(r, g, now, &all);
    bool any_log = false;
    for (int k = 0; k < r->job->world && !any_log; k++) any_log = g->off[k] >= 0;
    bool logs_in = all && (!any_log || now - g->grew_ms >= GATHER_QUIET_MS);
    return (logs_in && g->wire_got == g->wire_asked) || now - g->asked_ms >= GATHER_WAIT_MS;
}

static void head_line(const Run *r, const StackTree *t, char *out, size_t len)
{
    if (stacktree_compared(t)) /* one line at 80 columns for 1024 ranks */
        snprintf(out, len, "%d ranks, %d stacks; looks %.1f s apart: * no rank moved (%d), ! smaller set",
                 stacktree_ranks(t), stacktree_stacks(t), GATHER_APART_MS / 1000.0, stacktree_stuck(t));
    else
        snprintf(out, len, "%d ranks, %d stacks; ! smaller set%s", stacktree_ranks(t), stacktree_stacks(t),
                 r->gather && r->gather->on ? "; a second look follows" : "");
}

/* Text (or JSON) to one viewer in log messages, then the end. */
static void to_viewer(Run *r, const char *ident, size_t len, const char *text, const char *end)
{
    size_t n = strlen(text);
    char chunk[GATHER_CHUNK + 1];
    for (size_t o = 0; o < n;) {
        size_t k = n - o < GATHER_CHUNK ? n - o : GATHER_CHUNK;
        /* never inside a UTF-8 character */
        while (k > 1 && o + k < n && ((unsigned char)text[o + k] & 0xC0) == 0x80) k--;
        memcpy(chunk, text + o, k);
        chunk[k] = '\0';
        if (viewers_tell(r->viewers, r->ctl, ident, len, "stacks", chunk)) return;
        o += k;
    }
    viewers_tell(r->viewers, r->ctl, ident, len, "stacks-end", end);
}

/* The wire path's answers into a hang report's stacks/ (report.c copies
 * the signalled ranks' from their logs). */
static void report_answers(Run *r, const RunGather *g, const char *dir)
{
    for (int k = 0; k < r->job->world && k < GATHER_REPORT_RANKS; k++) {
        if (g->via[k] != RUN_STACK_VIA_WIRE || !g->text[k]) continue;
        char path[PATH_MAX + 32];
        snprintf(path, sizeof path, "%s/stacks/rank-%d.txt", dir, k);
        FILE *f = fopen(path, "w");
        if (!f) continue;
        fwrite(g->text[k], 1, g->len[k], f);
        fclose(f);
    }
}

/* The tree to whoever waits: final after the second look. */
static void deliver(Run *r, RunGather *g, const StackTree *t, bool final)
{
    char head[300];
    head_line(r, t, head, sizeof head);
    char *text = malloc(GATHER_TEXT_MAX);
    if (text) stacktree_text(t, text, GATHER_TEXT_MAX);
    if ((g->want & RUN_GATHER_TUI) && r->tui && text) {
        /* t during a gathering for someone else: the page opens on its second look */
        if (!g->tui_shown)
            view_tui_show_stack(r->tui, UI_STACK_TREE, head, text);
        else
            view_tui_update_stack(r->tui, UI_STACK_TREE, head, text); /* unless the user closed it */
        g->tui_shown = true;
    }
    if (!final) {
        free(text);
        return;
    }
    if ((g->want & RUN_GATHER_HANG) && !r->tui) view_headless_stacks(&r->hl, r->job, t, mono_ns());
    if (g->want & RUN_GATHER_REPORT) {
        char dir[PATH_MAX];
        if (run_hang_report(r, t, g->off, g->size, dir, sizeof dir) == 0) report_answers(r, g, dir);
    }
    for (int i = 0; i < g->n_viewers; i++) {
        if (g->viewers[i].json) {
            Json w;
            json_init_buf(&w);
            stacktree_json(t, &w);
            const char *js = json_buf(&w, NULL);
            to_viewer(r, g->viewers[i].ident, g->viewers[i].len, js ? js : "{}", head);
            json_done(&w);
        } else {
            to_viewer(r, g->viewers[i].ident, g->viewers[i].len, text ? text : "", head);
        }
    }
    g->n_viewers = 0;
    g->want = 0;
    free(text);
}

void run_gather_tick(Run *r)
{
    RunGather *g = r->gather;
    if (!g || !g->on) return;
    int64_t now = mono_ms();
    if (g->waiting) {
        /* a first dump still being written would be read as the second's:
         * the second look waits for quiet logs (at most GATHER_WAIT_MS more) */
        logs_grow(r, g, now, NULL);
        bool quiet = now - g->grew_ms >= GATHER_QUIET_MS || now - g->looked_ms >= GATHER_WAIT_MS;
        if (now >= g->next_ms && quiet) look(r, g);
        return;
    }
    if (!look_done(r, g, now)) return;
    build(r, g, g->cur);
    if (g->look == 1) {
        g->looked_ms = now;
        deliver(r, g, g->cur, false);
        StackTree *t = g->prev;
        g->prev = g->cur;
        g->cur = t;
        g->look = 2;
        g->waiting = true;
        g->next_ms = g->asked_ms + GATHER_APART_MS;
        return;
    }
    stacktree_compare(g->cur, g->prev);
    g->on = false;
    deliver(r, g, g->cur, true);
}

void run_gather_finish(Run *r)
{
    RunGather *g = r->gather;
    if (g && g->on) {
        /* the second look cannot come: the first one's tree, or what this one has */
        g->on = false;
        if (g->look == 2 && !g->waiting) {
            build(r, g, g->cur);
            stacktree_compare(g->cur, g->prev);
            deliver(r, g, g->cur, true);
        } else if (g->look == 2) {
            deliver(r, g, g->prev, true);
        } else {
            build(r, g, g->cur);
            deliver(r, g, g->cur, true);
        }
    }
    if (g) {
        drop_answers(g, r->job ? r->job->world : 0);
        free(g->via);
        free(g->text);
        free(g->len);
        free(g->off);
        free(g->size);
        stacktree_free(&g->prev);
        stacktree_free(&g->cur);
        free(g);
        r->gather = NULL;
    }
}
