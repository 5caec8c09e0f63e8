/* draw_ranks.c — the ranks table (one row per rank, sortable, scrolling;
 * min/median/max rows and the outliers when the ranks do not all fit; for
 * a big job the rank map above it, the odd ranks first and a "+N more"
 * line) and a rank's detail page (its collectives, phases, shard and log
 * lines).
 *
 * Owns: column choice by width and the rank row's wording. Reads the Job;
 * writes the Ui's list position. No curses. Main thread.
 *
 * Columns drop by priority as the width shrinks (device, host, pid first);
 * each field is written at its own column, so a host name in any script
 * cannot push the others out of line.
 */
#include "screen/draw.h"
#include "screen/numfmt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { C_RANK, C_HOST, C_PID, C_DEV, C_PHASE, C_EPOCH, C_STEP, C_LOSS, C_STEPMS, C_COMM, C_SPS, C_BEAT, C__N };

typedef struct {
    const char *head;
    int width;
    bool left;
    int prio; /* lower stays longer */
} Col;

/* Widths leave room for the sort arrow after a full-width head. */
// clang-format off
static const Col cols[C__N] = {
    [C_RANK] = {"RANK", 5, false, 0},      [C_HOST] = {"HOST", 12, true, 7},
    [C_PID] = {"PID", 7, false, 9},        [C_DEV] = {"DEVICE", 6, true, 11},
    [C_PHASE] = {"PHASE", 10, true, 1},    [C_EPOCH] = {"EPOCH", 5, false, 8},
    [C_STEP] = {"STEP", 7, false, 2},      [C_LOSS] = {"LOSS", 8, false, 3},
    [C_STEPMS] = {"STEP_MS", 8, false, 4}, [C_COMM] = {"EXP/COMM_MS", 12, false, 5},
    [C_SPS] = {"SAMPLES/S", 10, false, 10}, [C_BEAT] = {"BEAT", 5, false, 6},
};
// clang-format on

#define MARK_W          2 /* marker glyph and a space */
/* The note (why a row stands out) keeps some room: the lowest-priority
 * columns give way for it, more of them on wide screens. */
#define NOTE_ROOM_FROM  100
#define NOTE_MIN        24
#define NOTE_MIN_NARROW 14
/* A Python rank's line ("at train.py:57 in save_checkpoint") needs more */
#define NOTE_MIN_PYTHON 40
#define SPARK_MAX       40

typedef struct {
    bool on[C__N];
    int x[C__N]; /* column offsets from the table's left */
    int end;     /* first column after the last field */
} Cols;

static void choose_cols(int w, bool python, Cols *c)
{
    memset(c, 0, sizeof *c);
    int note = python && w >= 80 ? NOTE_MIN_PYTHON : w >= NOTE_ROOM_FROM ? NOTE_MIN : NOTE_MIN_NARROW;
    int avail = w - MARK_W - note;
    int used = 0;
    /* in priority order, until one does not fit: a lesser column never
     * takes the place of a more important one */
    for (int prio = 0; prio < C__N; prio++)
        for (int k = 0; k < C__N; k++) {
            if (cols[k].prio != prio) continue;
            if (used + cols[k].width > avail) goto placed;
            c->on[k] = true;
            used += cols[k].width + 1;
        }
placed:;
    int x = MARK_W;
    for (int k = 0; k < C__N; k++)
        if (c->on[k]) {
            c->x[k] = x;
            x += cols[k].width + 1;
        }
    c->end = x;
}

/* snprintf(dst, n, "%s", s): at most n - 1 bytes of s ("%.40s": n 41). */
static void copy_str(char *dst, size_t n, const char *s)
{
    size_t k = strnlen(s, n - 1);
    memcpy(dst, s, k);
    dst[k] = '\0';
}

/* snprintf(dst, n, "%s/%s", a, b). */
static void join_slash(char *dst, size_t n, const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la + 1 + lb >= n) {
        snprintf(dst, n, "%s/%s", a, b);
        return;
    }
    memcpy(dst, a, la);
    dst[la] = '/';
    memcpy(dst + la + 1, b, lb + 1);
}

static void put_field(DrawCtx *d, const Cols *c, int k, int x0, int y, int st, const char *s)
{
    if (!c->on[k]) return;
    int tw = canvas_text_width(d->cv, s);
    int x = x0 + c->x[k];
    if (!cols[k].left && tw < cols[k].width) x += cols[k].width - tw;
    canvas_put(d->cv, y, x, cols[k].width, st, s);
}

static int sort_col(JobSort s)
{
    switch (s) {
    case JOB_SORT_RANK: return C_RANK;
    case JOB_SORT_STEP: return C_STEP;
    case JOB_SORT_LOSS: return C_LOSS;
    case JOB_SORT_STEP_MS: return C_STEPMS;
    case JOB_SORT_COMM_MS: return C_COMM;
    case JOB_SORT_BEAT: return C_BEAT;
    default: return -1;
    }
}

/* A fresh rank reads "<1s": tenths of a second of heartbeat age are noise,
 * and a column that flickers on every frame costs terminal output. */
static void fmt_age(char *buf, size_t n, double s)
{
    if (s < 1)
        copy_str(buf, n, "<1s");
    else if (s < 10)
        snprintf(buf, n, "%.1fs", s);
    else if (s < 600)
        snprintf(buf, n, "%.0fs", s);
    else
        snprintf(buf, n, "%.0fm", s / 60);
}

/* Recent losses of a rank as a sparkline, oldest left, at (y, x): at most
 * width glyphs, in maxw columns. */
static void loss_spark(const DrawCtx *d, const JobRank *r, int width, int y, int x, int maxw, int style)
{
    int k = r->ring_len < width ? r->ring_len : width;
    if (k > DRAW_SPARK_MAX) k = DRAW_SPARK_MAX;
    if (k < 2) return;
    double v[DRAW_SPARK_MAX];
    for (int i = 0; i < k; i++) v[i] = job_rank_step_at(r, k - 1 - i)->loss;
    draw_spark_put(d, y, x, maxw, style, v, NULL, k, false);
}

static void draw_head(DrawCtx *d, const Cols *c, int x0, int y, int w)
{
    canvas_fill(d->cv, y, x0, w, ST_TITLE);
    int sc = sort_col(d->ui->sort);
    for (int k = 0; k < C__N; k++) {
        if (!c->on[k]) continue;
        char h[32];
        if (k == sc)
            snprintf(h, sizeof h, "%s%s", cols[k].head,
                     job_sort_descending(d->ui->sort, d->ui->sort_desc) ? d->g->sort_down : d->g->sort_up);
        else
            snprintf(h, sizeof h, "%s", cols[k].head);
        /* an arrow that does not fit is dropped, the name stays */
        if (canvas_text_width(d->cv, h) > cols[k].width) snprintf(h, sizeof h, "%s", cols[k].head);
        put_field(d, c, k, x0, y, ST_TITLE, h);
    }
    if (c->end + 4 < w)
        canvas_put(d->cv, y, x0 + c->end, w - c->end, ST_TITLE, w - c->end >= 18 ? "RECENT LOSS / NOTE" : "NOTE");
}

/* out: the rank's outlier entry, or NULL when it does not stand out. */
static void draw_rank_row(DrawCtx *d, const Cols *c, const JobRank *r, const JobOutlier *out, int x0, int y, int w,
                          bool selected)
{
    char f[C__N][48];
    memset(f, 0, sizeof f);
    numfmt_int(f[C_RANK], sizeof f[0], r->rank);
    copy_str(f[C_HOST], 41, r->host[0] ? r->host : "-");
    if (r->pid > 0)
        numfmt_int(f[C_PID], sizeof f[0], (long long)r->pid);
    else
        copy_str(f[C_PID], sizeof f[0], "-");
    if (r->have_step && r->last.dev_mem_total > 0) /* "cuda:0 1.2G" */
        snprintf(f[C_DEV], sizeof f[0], "%.12s %.1fG", r->device[0] ? r->device : "-",
                 (double)r->last.dev_mem / (1 << 30));
    else
        copy_str(f[C_DEV], 21, r->device[0] ? r->device : "-");
    copy_str(f[C_PHASE], sizeof f[0],
             r->phase != PHASE_NONE     ? phase_name(r->phase)
             : r->state == RANK_WAITING ? (r->pid > 0 ? "launched" : "pending")
                                        : "-");
    /* the step it has reached (a report still on its way cannot make a
     * healthy rank look steps apart), and how old its figures are */
    JobShownStep shown;
    job_rank_shown_step(d->j, r, d->now_ns, &shown);
    bool old = r->state == RANK_ALIVE && r->have_step && shown.age_s * 1e9 >= (double)JOB_FIGURES_OLD_NS;
    if (r->have_step) {
        numfmt_int(f[C_EPOCH], sizeof f[0], (long long)shown.epoch);
        numfmt_int(f[C_STEP], sizeof f[0], (long long)shown.step);
        draw_fmt_fit(f[C_LOSS], sizeof f[0], 8, r->last.loss, 4);
        draw_fmt_fit(f[C_STEPMS], sizeof f[0], 7, r->last.step_ms, 1);
        char a[24], b[24];
        draw_fmt_fit(a, sizeof a, 5, r->last.exposed_ms, 2);
        draw_fmt_fit(b, sizeof b, 5, r->last.comm_ms, 2);
        join_slash(f[C_COMM], sizeof f[0], a, b);
        draw_fmt_count(f[C_SPS], sizeof f[0], job_rank_samples_per_s(r, d->now_ns));
    } else {
        for (int k = C_EPOCH; k <= C_SPS; k++) copy_str(f[k], sizeof f[0], "-");
    }
    bool live = r->state == RANK_ALIVE || (r->state == RANK_WAITING && r->pid > 0);
    if (live)
        fmt_age(f[C_BEAT], sizeof f[0], job_rank_beat_age_s(r, d->now_ns));
    else
        snprintf(f[C_BEAT], sizeof f[0], "-");

    const char *mark = " ";
    int st = ST_NORMAL, nst = ST_LABEL;
    char note[256] = "";
    bool spark = false;
    int64_t seq;
    double secs;
    bool inflight = job_rank_in_flight(r, d->wall_ns, &seq, &secs);
    char inf[192] = "";
    if (inflight)
        snprintf(inf, sizeof inf, "in %.20s #%lld for %.0fs%s", r->beat.coll_op[0] ? r->beat.coll_op : "collective",
                 (long long)seq, secs, r->lints & JOB_LINT_ALONE ? ", alone: the others finished" : "");
    /* a Python rank's line follows what the note says it is doing */
    char at[PROTO_STR_MED + 16] = "", line[PROTO_STR_MED + 8];
    if (job_rank_where(r, line, sizeof line)) snprintf(at, sizeof at, "at %s", line);
    const char *lint = job_lint_brief(r->lints & ~(unsigned)JOB_LINT_ALONE);
    if (r->state == RANK_FAILED) {
        mark = d->g->mark_fail;
        st = nst = ST_ROW_ERR;
        snprintf(note, sizeof note, "FAILED %s", r->how_ended);
    } else if (r->state == RANK_EXITED_OK) {
        mark = d->g->mark_ok;
        st = ST_DIM;
        nst = ST_OK;
        snprintf(note, sizeof note, "%s", r->how_ended);
    } else if (job_rank_stale(r, d->now_ns)) {
        mark = d->g->mark_warn;
        st = nst = ST_ROW_WARN;
        snprintf(note, sizeof note, "STALE %.0fs%s%s%s%s", job_rank_beat_age_s(r, d->now_ns), inf[0] ? " " : "", inf,
                 at[0] ? " " : "", at);
    } else if (r->phase == PHASE_ERROR) {
        mark = d->g->mark_fail;
        st = nst = ST_ROW_ERR;
        snprintf(note, sizeof note, "error: %.200s", r->detail[0] ? r->detail : "-");
    } else if (inflight) {
        mark = d->g->mark_warn;
        st = nst = ST_ROW_WARN;
        snprintf(note, sizeof note, "%s%s%s", inf, at[0] ? " " : "", at);
    } else if (d->cell && d->cell[r->rank] == JOB_CELL_STALLED) {
        /* a big job's culprit: the others wait for it (job_summary) */
        mark = d->g->mark_warn;
        st = nst = ST_ROW_ERR;
        if (d->sum->wait_seq >= 0 && !(r->lints & JOB_LINT_ALONE))
            snprintf(note, sizeof note, "stalled, %d wait for it%s%s", d->sum->wait_in, at[0] ? " " : "", at);
        else
            snprintf(note, sizeof note, "stalled, alone: the others finished%s%s", at[0] ? " " : "", at);
    } else if (r->state == RANK_WAITING) {
        nst = ST_DIM;
        /* no pid yet: another node's agent (or, with listen, the
         * launcher) has not started it */
        snprintf(note, sizeof note, "%s", r->pid > 0 ? "waiting for hello" : "not started yet");
    } else if (r->phase == PHASE_PAUSED) {
        nst = ST_WARN;
        snprintf(note, sizeof note, "paused after step %lld%s%s", (long long)(r->have_step ? r->last.step : 0),
                 at[0] ? " " : "", at);
    } else if (r->have_step && !isfinite(r->last.loss)) {
        mark = d->g->mark_warn;
        nst = ST_ERR;
        snprintf(note, sizeof note, "loss is %s", isnan(r->last.loss) ? "nan" : "inf");
    } else if (out) {
        /* slow, behind, dropping: now, so before a lint that stays; a
         * rank that only waits for the straggler is not marked itself */
        if (out->kind != JOB_OUT_WAITING) mark = d->g->mark_warn;
        nst = out->kind == JOB_OUT_WAITING ? ST_DIM : ST_WARN;
        snprintf(note, sizeof note, "%s%s%s", out->brief, at[0] ? "  " : "", at);
    } else if (lint[0]) {
        /* a mistake in the script (the events say more) */
        mark = d->g->mark_warn;
        nst = ST_WARN;
        snprintf(note, sizeof note, "%s%s%s", lint, at[0] ? "  " : "", at);
    } else if (at[0]) {
        snprintf(note, sizeof note, "%s", at);
    } else if (old && r->phase == PHASE_TRAIN) {
        nst = ST_DIM; /* its figures are that old: no step since */
        snprintf(note, sizeof note, "last step %.1f s ago", shown.age_s);
    } else {
        spark = true; /* drawn below, in the note's style */
        nst = ST_SERIES(r->rank);
    }
    /* a diagnosis names one culprit: the `!` is its, not the ranks that
     * wait for it */
    if (d->culprit >= 0 && r->rank == d->culprit && mark != d->g->mark_fail)
        mark = d->g->mark_warn;
    else if (d->culprit >= 0 && mark == d->g->mark_warn)
        mark = " ";
    if (selected) {
        canvas_fill(d->cv, y, x0, w, ST_SEL);
        st = ST_SEL;
        if (nst != ST_ROW_ERR && nst != ST_ROW_WARN) nst = ST_SEL;
    } else if (st == ST_ROW_ERR || st == ST_ROW_WARN) {
        canvas_fill(d->cv, y, x0, w, st);
    }
    canvas_put(d->cv, y, x0, 1, st, selected && mark[0] == ' ' ? d->g->mark_sel : mark);
    for (int k = 0; k < C__N; k++) {
        bool figure = k == C_LOSS || k == C_STEPMS || k == C_COMM || k == C_SPS;
        put_field(d, c, k, x0, y, old && figure && st == ST_NORMAL ? ST_DIM : st, f[k]);
    }
    if (spark && c->end < w) {
        int sw = w - c->end;
        loss_spark(d, r, sw < SPARK_MAX ? sw : SPARK_MAX, y, x0 + c->end, sw, nst);
    } else if (note[0] && c->end < w) {
        canvas_put(d->cv, y, x0 + c->end, w - c->end, nst, note);
    }
}

/* min / median / max rows; the note says which rank holds the extremes. */
static void draw_summary(DrawCtx *d, const Cols *c, const JobStat *st, int x0, int y, int w)
{
    static const char *const name[3] = { "min", "med", "max" };
    for (int row = 0; row < 3; row++) {
        char f[C__N][48];
        memset(f, 0, sizeof f);
        snprintf(f[C_RANK], sizeof f[0], "%s", name[row]);
        const int map[][2] = { { C_STEP, JOB_METRIC_STEP },      { C_LOSS, JOB_METRIC_LOSS },
                               { C_STEPMS, JOB_METRIC_STEP_MS }, { C_COMM, JOB_METRIC_COMM_MS },
                               { C_SPS, JOB_METRIC_SAMPLES_S },  { C_BEAT, JOB_METRIC_BEAT_S } };
        for (size_t k = 0; k < sizeof map / sizeof map[0]; k++) {
            const JobStat *s = &st[map[k][1]];
            double v = row == 0 ? s->min : row == 1 ? s->median : s->max;
            if (s->n == 0) {
                snprintf(f[map[k][0]], sizeof f[0], "-");
                continue;
            }
            switch (map[k][0]) {
            case C_STEP: snprintf(f[C_STEP], sizeof f[0], "%.0f", v); break;
            case C_LOSS: draw_fmt_fit(f[C_LOSS], sizeof f[0], 8, v, 4); break;
            case C_STEPMS: draw_fmt_fit(f[C_STEPMS], sizeof f[0], 7, v, 1); break;
            case C_COMM: {
                const JobStat *e = &st[JOB_METRIC_EXPOSED_MS];
                double ev = row == 0 ? e->min : row == 1 ? e->median : e->max;
                char a[24], b[24];
                draw_fmt_fit(a, sizeof a, 5, ev, 2);
                draw_fmt_fit(b, sizeof b, 5, v, 2);
                snprintf(f[C_COMM], sizeof f[0], "%s/%s", a, b);
                break;
            }
            case C_SPS: draw_fmt_count(f[C_SPS], sizeof f[0], v); break;
            case C_BEAT: fmt_age(f[C_BEAT], sizeof f[0], v); break;
            default: break;
            }
        }
        if (row == 1) snprintf(f[C_PHASE], sizeof f[0], "%d ranks", d->j->world);
        int yy = y + row;
        canvas_fill(d->cv, yy, x0, w, ST_NORMAL);
        canvas_put(d->cv, yy, x0, 1, ST_LABEL, d->g->dot);
        for (int k = 0; k < C__N; k++) put_field(d, c, k, x0, yy, k == C_RANK ? ST_LABEL : ST_BOLD, f[k]);
        if (row != 1 && c->end + 8 < w) {
            const JobStat *sm = &st[JOB_METRIC_STEP_MS], *sl = &st[JOB_METRIC_LOSS];
            int rm = row == 0 ? sm->min_rank : sm->max_rank, rl = row == 0 ? sl->min_rank : sl->max_rank;
            char note[96] = "";
            if (rm >= 0) snprintf(note, sizeof note, "step_ms r%d  loss r%d", rm, rl);
            canvas_put(d->cv, yy, x0 + c->end, w - c->end, ST_DIM, note);
        }
    }
}

static void draw_outliers(DrawCtx *d, int x0, int y, int w)
{
    JobOutlier out[16];
    int n = job_outliers(d->j, d->now_ns, d->wall_ns, out, 16);
    int x = x0 + canvas_put(d->cv, y, x0, w, ST_LABEL, "outliers: ");
    if (n == 0) {
        canvas_put(d->cv, y, x, x0 + w - x, ST_DIM, "none");
        return;
    }
    int kept = n < 16 ? n : 16;
    for (int i = 0; i < kept; i++) {
        char more[32];
        snprintf(more, sizeof more, " +%d more", n - i);
        int need = canvas_text_width(d->cv, out[i].text) + (i ? 3 : 0);
        /* keep room to say how many did not fit */
        if (x + need > x0 + w - (i + 1 < n ? (int)strlen(more) : 0)) {
            canvas_put(d->cv, y, x, x0 + w - x, ST_WARN, more);
            return;
        }
        if (i) x += canvas_put(d->cv, y, x, x0 + w - x, ST_DIM, " | ");
        int st = out[i].kind <= JOB_OUT_ERROR ? ST_ERR : ST_WARN;
        x += canvas_put(d->cv, y, x, x0 + w - x, st, out[i].text);
    }
    if (n > kept) canvas_printf(d->cv, y, x, x0 + w - x, ST_WARN, " +%d more", n - kept);
}

int draw_ranks_want(const DrawCtx *d)
{
    int world = d->j->world;
    return 1 + world + (world > 8 ? 4 : 0);
}

/* A big job's outliers line: the odd ranks as the summary judged them,
 * worst first (they lead u->order), so the rank the others wait for is
 * named before the ranks waiting for it. */
static void draw_outliers_sum(DrawCtx *d, int x0, int y, int w)
{
    const JobSummary *s = d->sum;
    int x = x0 + canvas_put(d->cv, y, x0, w, ST_LABEL, "outliers: ");
    if (s->odd == 0) {
        if (s->count[JOB_CELL_WAITING])
            canvas_printf(d->cv, y, x, x0 + w - x, ST_DIM, "none; %d in a collective for 1s or more",
                          s->count[JOB_CELL_WAITING]);
        else
            canvas_put(d->cv, y, x, x0 + w - x, ST_DIM, "none");
        return;
    }
    for (int i = 0; i < s->odd && i < d->j->world; i++) {
        int rank = d->ui->order[i];
        char text[160], more[32];
        job_summary_text(d->j, s, d->cell, rank, d->now_ns, d->wall_ns, text, sizeof text);
        snprintf(more, sizeof more, " +%d more", s->odd - i);
        int need = canvas_text_width(d->cv, text) + (i ? 3 : 0);
        if (x + need > x0 + w - (i + 1 < s->odd ? (int)strlen(more) : 0)) {
            canvas_put(d->cv, y, x, x0 + w - x, ST_WARN, more);
            return;
        }
        if (i) x += canvas_put(d->cv, y, x, x0 + w - x, ST_DIM, " | ");
        x += canvas_put(d->cv, y, x, x0 + w - x, d->cell[rank] <= JOB_CELL_STALLED ? ST_ERR : ST_WARN, text);
    }
}

/* "+1000 more healthy ranks" (or what the ranks below the list are). */
static void draw_more(DrawCtx *d, int from, int x, int y, int w)
{
    const Job *j = d->j;
    int count[JOB_CELL__COUNT] = { 0 };
    for (int i = from; i < j->world; i++) count[d->cell[d->ui->order[i]]]++;
    int n = j->world - from, kinds = 0;
    for (int e = 0; e < JOB_CELL__COUNT; e++) kinds += count[e] > 0;
    char t[256];
    int len;
    if (kinds == 1 && count[JOB_CELL_OK])
        len = snprintf(t, sizeof t, "+%d more healthy rank%s", n, n == 1 ? "" : "s");
    else {
        len = snprintf(t, sizeof t, "+%d more rank%s:", n, n == 1 ? "" : "s");
        for (int e = 0, k = 0; e < JOB_CELL__COUNT && len < (int)sizeof t - 40; e++)
            if (count[e])
                len += snprintf(t + len, sizeof t - (size_t)len, "%s %d %s", k++ ? "," : "", count[e],
                                job_cell_name((JobCell)e));
    }
    (void)len;
    canvas_fill(d->cv, y, x, w, ST_NORMAL);
    canvas_put(d->cv, y, x + MARK_W, w - MARK_W, ST_DIM, t);
}

/* The rows of the list from `row` on: u->order from u->ranks_top, and for
 * a big job a last line saying what is below when not everything fits. */
static void draw_list(DrawCtx *d, const Cols *c, int x, int title_y, int row, int rows, int w)
{
    Ui *u = d->ui;
    const Job *j = d->j;
    if (rows < 0) rows = 0;
    u->list_y = row;
    u->list_rows = rows < j->world ? rows : j->world;
    if (u->ranks_top > j->world - u->list_rows) u->ranks_top = j->world - u->list_rows;
    if (u->ranks_top < 0) u->ranks_top = 0;
    bool more = d->sum && u->list_rows >= 2 && u->ranks_top + u->list_rows < j->world;
    if (more) u->list_rows--;
    bool focus = u->focus == PANEL_RANKS && u->overlay == UI_NO_OVERLAY;
    /* who stands out, once per frame: rows say why */
    JobOutlier *outs = malloc((size_t)j->world * sizeof *outs);
    int *out_of = malloc((size_t)j->world * sizeof *out_of);
    int nout = !outs || !out_of ? 0
               : d->sum         ? job_outliers_stats(j, d->sum->stats, d->now_ns, d->wall_ns, outs, j->world)
                                : job_outliers(j, d->now_ns, d->wall_ns, outs, j->world);
    if (out_of) {
        for (int i = 0; i < j->world; i++) out_of[i] = -1;
        for (int i = 0; i < nout && i < j->world; i++) out_of[outs[i].rank] = i;
    }
    for (int i = 0; i < u->list_rows; i++) {
        int rank = u->order[u->ranks_top + i];
        const JobOutlier *o = out_of && out_of[rank] >= 0 ? &outs[out_of[rank]] : NULL;
        draw_rank_row(d, c, &j->ranks[rank], o, x, row + i, w, focus && rank == u->sel);
    }
    free(outs);
    free(out_of);
    if (more) draw_more(d, u->ranks_top + u->list_rows, x, row + u->list_rows, w);
    /* where the list is, on the title line: the rows above and below */
    if (j->world > u->list_rows && u->rect[PANEL_RANKS].w > 0) {
        char pos[64];
        snprintf(pos, sizeof pos, " %d-%d of %d ", u->ranks_top + 1, u->ranks_top + u->list_rows, j->world);
        int pw = canvas_text_width(d->cv, pos);
        canvas_put(d->cv, title_y, x + w - pw - 2, pw, ST_RULE, pos);
    }
}

/* A big job: the rank map and its legend, the outliers, then the table
 * (min/median/max rows when there is room). False: too few rows for a
 * map, the plain layout instead. */
static bool draw_ranks_big(DrawCtx *d, const Cols *c, int x, int y, int w, int h)
{
    const Job *j = d->j;
    /* legend, outliers and the table's head; two rows of ranks at least */
    int per, mrows = draw_map_fit(j->world, w, h - 3 - 2, &per);
    if (mrows <= 0) return false;
    int row = y;
    draw_map(d, x, row, w, mrows, per);
    row += 1 + mrows;
    draw_outliers_sum(d, x, row++, w);
    draw_head(d, c, x, row++, w);
    int rows = y + h - row;
    /* the spread when it leaves a few ranks' rows */
    if (j->world > rows && rows >= 3 + 3) {
        draw_summary(d, c, d->sum->stats, x, row, w);
        row += 3;
        rows -= 3;
    }
    draw_list(d, c, x, y - 1, row, rows, w);
    return true;
}

void draw_ranks(DrawCtx *d, int x, int y, int w, int h)
{
    const Job *j = d->j;
    if (h <= 0) return;
    Cols c;
    bool python = false;
    for (int i = 0; i < j->world && !python; i++) python = j->ranks[i].python;
    choose_cols(w, python, &c);
    if (d->sum && draw_ranks_big(d, &c, x, y, w, h)) return;
    draw_head(d, &c, x, y, w);
    int row = y + 1, rows = h - 1;
    /* when the ranks do not fit, the spread and the odd ones come first */
    if (j->world > rows && rows >= 7) {
        JobStat st[JOB_METRIC__COUNT];
        job_rank_stats(j, d->now_ns, st);
        draw_summary(d, &c, st, x, row, w);
        if (d->sum)
            draw_outliers_sum(d, x, row + 3, w);
        else
            draw_outliers(d, x, row + 3, w);
        row += 4;
        rows -= 4;
    } else if (j->world > rows + 2 && rows >= 3) {
        /* a few rows for many ranks: the odd ones first; a rank or two
         * more than fit just scroll */
        if (d->sum)
            draw_outliers_sum(d, x, row, w);
        else
            draw_outliers(d, x, row, w);
        row++;
        rows--;
    }
    draw_list(d, &c, x, y - 1, row, rows, w);
}

/* ---- detail ---- */

static void fmt_secs(char *buf, size_t n, double s)
{
    if (s < 1)
        snprintf(buf, n, "%.2fs", s);
    else if (s < 120)
        snprintf(buf, n, "%.1fs", s);
    else
        snprintf(buf, n, "%.0fm%02.0fs", floor(s / 60), fmod(s, 60));
}

void draw_rank_detail(DrawCtx *d, int rank, int x, int y, int w, int h)
{
    const Job *j = d->j;
    const JobRank *r = &j->ranks[rank];
    Canvas *cv = d->cv;
    int end = y + h;
    canvas_repeat(cv, y, x, w, ST_RULE, d->g->hline);
    int cx = x + 1 + canvas_printf(cv, y, x + 1, w - 1, ST_RULE_FOCUS, " rank %d ", rank);
    canvas_put(cv, y, cx, x + w - cx, ST_RULE, " Esc closes, Up/Down: other ranks ");
    int row = y + 1;
    char since[32];
    fmt_secs(since, sizeof since, (double)(d->now_ns - r->phase_since_ns) / 1e9);
    canvas_printf(cv, row++, x, w, ST_BOLD, "host %s  pid %lld  %s  %s  state %s  phase %s for %s%s%s",
                  r->host[0] ? r->host : "-", (long long)r->pid, r->device[0] ? r->device : "-",
                  r->backend[0] ? r->backend : "-", rank_state_name(r->state),
                  r->phase != PHASE_NONE ? phase_name(r->phase) : "-", since, r->how_ended[0] ? "  ended: " : "",
                  r->how_ended);
    if (row < end && r->have_step) {
        const MsgStep *s = &r->last;
        JobShownStep sh;
        job_rank_shown_step(j, r, d->now_ns, &sh);
        JobStepParts p;
        job_step_parts(s, &p);
        char age[48] = "";
        if (sh.age_s * 1e9 >= (double)JOB_FIGURES_OLD_NS) snprintf(age, sizeof age, "  (%.1f s ago)", sh.age_s);
        /* the parts add up to the step; comm hidden behind bwd is beside the sum, not in it */
        canvas_printf(cv, row++, x, w, age[0] ? ST_DIM : ST_NORMAL,
                      "step %lld  epoch %lld  loss %.4f  lr %g  samples %lld%s  step %.2f ms = fwd %.2f + bwd %.2f + "
                      "comm wait %.2f + opt %.2f + other %.2f  (comm %.2f ms, %.2f overlapped with bwd)  drops %llu",
                      (long long)sh.step, (long long)sh.epoch, s->loss, s->lr, (long long)s->samples, age, p.step,
                      p.fwd, p.bwd, p.wait, p.opt, p.other, p.comm, p.overlapped, (unsigned long long)s->drops);
    }
    if (row < end && r->have_step && r->last.dev_mem_total > 0)
        canvas_printf(cv, row++, x, w, ST_NORMAL,
                      "GPU memory in use on %s: %.2f of %.2f GiB (every process, as nvidia-smi)",
                      r->device[0] ? r->device : "its device", (double)r->last.dev_mem / (1 << 30),
                      (double)r->last.dev_mem_total / (1 << 30));
    if (row < end && (r->phase == PHASE_ERROR || r->had_error) && r->detail[0])
        canvas_printf(cv, row++, x, w, ST_ERR, "error: %s", r->detail);
    char where[PROTO_STR_MED + 8];
    if (row < end && job_rank_where(r, where, sizeof where))
        canvas_printf(cv, row++, x, w, ST_BOLD, "python: rank %d at %s (%.1fs ago)  w: every thread's stack", rank,
                      where, (double)(d->now_ns - r->beat_ns) / 1e9);
    if (row < end && r->lints)
        canvas_printf(cv, row++, x, w, ST_WARN, "lint: %s (the events say more)", job_lint_brief(r->lints));
    /* phases, oldest first, with how long each lasted */
    if (row < end && r->phases_len > 0) {
        int cx = x + canvas_put(cv, row, x, w, ST_LABEL, "phases: ");
        for (int i = r->phases_len - 1; i >= 0; i--) {
            const JobPhaseRec *p = job_rank_phase_at(r, i);
            const JobPhaseRec *next = i > 0 ? job_rank_phase_at(r, i - 1) : NULL;
            int64_t until = next ? next->since_ns : d->now_ns;
            char dur[32], seg[96];
            fmt_secs(dur, sizeof dur, (double)(until - p->since_ns) / 1e9);
            snprintf(seg, sizeof seg, "%s%s %s%s", i < r->phases_len - 1 ? " > " : "", phase_name(p->phase), dur,
                     next ? "" : " (now)");
            cx += canvas_put(cv, row, cx, x + w - cx, next ? ST_NORMAL : ST_BOLD, seg);
        }
        row++;
    }
    if (row < end) {
        if (r->have_shard) {
            char first[256] = "";
            size_t len = 0;
            for (int i = 0; i < r->n_first && len + 24 < sizeof first; i++)
                len += (size_t)snprintf(first + len, sizeof first - len, "%s%lld", i ? " " : "",
                                        (long long)r->first_idx[i]);
            canvas_printf(cv, row++, x, w, ST_NORMAL,
                          "shard: epoch %lld  %lld samples (total %lld, padding %lld)%s  first %s",
                          (long long)r->shard_epoch, (long long)r->num_samples, (long long)r->total_size,
                          (long long)r->padding, r->shard_shuffle ? "  shuffled" : "", first);
        } else {
            canvas_put(cv, row++, x, w, ST_DIM, "shard: none reported yet");
        }
    }
    /* recent collectives: the rank's own times (in it, waiting for the last
     * rank in, queued before it began), then the collective's transfer and
     * its bandwidths (job_coll_times, as the all-reduce panel's): a rank's
     * own bytes / time taken would count its waiting as slow transfer */
    if (row + 1 < end) {
        canvas_fill(cv, row, x, w, ST_TITLE);
        canvas_printf(cv, row++, x, w, ST_TITLE, "%6s %-10s %3s %6s %8s %8s %8s %8s %7s %7s %9s", "SEQ", "OP", "BKT",
                      "STEP", "BYTES", "TOOK_MS", "WAIT_MS", "XFER_MS", "ALGBW", "BUSBW", "QUEUED_MS");
        int n = r->colls_len;
        if (n == 0 && row < end) canvas_put(cv, row++, x, w, ST_DIM, "no collective reported yet");
        for (int i = 0; i < n && row < end - 2; i++) {
            const JobCollRec *c = job_rank_coll_at(r, i);
            char b[24], bk[16];
            draw_fmt_bytes(b, sizeof b, (double)c->c.bytes);
            if (c->c.bucket >= 0)
                snprintf(bk, sizeof bk, "%d", (int)c->c.bucket);
            else
                snprintf(bk, sizeof bk, "-");
            /* "-": not every rank has completed it yet (or it left the job's ring) */
            char wait[16] = "-", xfer[16] = "-", alg[16] = "-", bus[16] = "-";
            double waited;
            JobCollTimes tm;
            if (job_rank_coll_times(j, c, &waited, &tm)) {
                snprintf(wait, sizeof wait, "%.3f", waited);
                snprintf(xfer, sizeof xfer, "%.3f", tm.xfer_ms);
                snprintf(alg, sizeof alg, "%.2f", tm.algbw_gbs);
                snprintf(bus, sizeof bus, "%.2f", tm.busbw_gbs);
            }
            if (j->world < 2) { /* one rank: nothing moves */
                snprintf(alg, sizeof alg, "n/a");
                snprintf(bus, sizeof bus, "n/a");
            }
            canvas_printf(cv, row++, x, w, ST_NORMAL, "%6lld %-10.10s %3s %6lld %8s %8.3f %8s %8s %7s %7s %9.3f",
                          (long long)c->c.seq, c->c.op, bk, (long long)c->c.step, b, c->ms, wait, xfer, alg, bus,
                          c->wait_ms);
        }
    }
    /* its log lines, then its events */
    if (row < end) {
        canvas_put(cv, row++, x, w, ST_LABEL, "last log lines:");
        if (r->logs_len == 0 && row < end) canvas_put(cv, row++, x + 2, w - 2, ST_DIM, "none");
        for (int i = r->logs_len - 1; i >= 0 && row < end; i--) {
            const JobLogRec *l = job_rank_log_at(r, i);
            char when[16] = "--:--:--";
            time_t secs = (time_t)(l->t_ns / 1000000000LL);
            struct tm tm;
            if (localtime_r(&secs, &tm)) strftime(when, sizeof when, "%H:%M:%S", &tm);
            int st = l->level == EV_ERROR ? ST_ERR : l->level == EV_WARN ? ST_WARN : ST_NORMAL;
            canvas_printf(cv, row++, x + 2, w - 2, st, "%s %s", when, l->text);
        }
    }
    if (row + 1 < end) {
        canvas_put(cv, row++, x, w, ST_LABEL, "events of this rank:");
        draw_events(d, x + 2, row, w - 2, end - row, rank);
    }
}
