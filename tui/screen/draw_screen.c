/* draw_screen.c — the screen's frame: title bar, header panel, the layout
 * that gives each panel its rows, panel title lines, status and key lines,
 * the help and quit overlays, and the helpers the panels share.
 *
 * Owns: layout decisions. Reads the Job; writes the Ui's rects. No curses.
 * Main thread.
 *
 * Layout: one column under 150 columns (or 30 rows), else two: ranks and
 * the loss chart on the left, all-reduce, sampler and events on the right.
 * When rows are short, panels give way in this order: sampler, all-reduce,
 * loss, events; the ranks table goes last.
 */
#include "screen/draw.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "screen/numfmt.h"
#include "view/keys.h"

static const Glyphs glyphs_utf8 = {
    .hline = "─",
    .vline = "│",
    .ellipsis = "…",
    .dot = "·",
    .spark = { "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█" },
    .bar_full = "█",
    .bar_empty = "░",
    .mark_fail = "✗",
    .mark_ok = "✓",
    .mark_warn = "!",
    .mark_sel = "▶",
    .sort_up = "▲",
    .sort_down = "▼",
    .warn = "⚠",
    .eval_mark = 0x25BC /* ▼ */,
    .strip_cell = 0x2588 /* █ */,
    .strip_dup = 0x259A /* ▚ */,
    .strip_none = 0x00B7 /* · */,
};
/* Without a UTF-8 locale those would vanish or garble: plain ASCII. */
static const Glyphs glyphs_ascii = {
    .hline = "-",
    .vline = "|",
    .ellipsis = "...",
    .dot = "-",
    .spark = { "_", ".", ",", "-", "~", "=", "*", "#" },
    .bar_full = "#",
    .bar_empty = ".",
    .mark_fail = "x",
    .mark_ok = "+",
    .mark_warn = "!",
    .mark_sel = ">",
    .sort_up = "^",
    .sort_down = "v",
    .warn = "!",
    .eval_mark = 'v',
    .strip_cell = '#',
    .strip_dup = '+',
    .strip_none = '.',
};

/* ---- helpers ---- */

void draw_fmt_fit(char *buf, size_t n, int width, double x, int decimals)
{
    if (isnan(x)) {
        snprintf(buf, n, "nan");
        return;
    }
    if (isinf(x)) {
        snprintf(buf, n, x > 0 ? "inf" : "-inf");
        return;
    }
    for (int d = decimals; d >= 0; d--) {
        size_t len = (size_t)numfmt_fixed(buf, n, x, d);
        if ((len < n ? len : n - 1) <= (size_t)width) return; /* the text as written, cut or not */
    }
    snprintf(buf, n, "%.*g", width > 6 ? width - 5 : 1, x);
}

void draw_fmt_hms(char *buf, size_t n, int64_t ns)
{
    long long s = ns > 0 ? ns / 1000000000LL : 0;
    snprintf(buf, n, "%02lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
}

int draw_wrap_next(const char *s, int cols)
{
    int n = 0, col = 0, space = -1;
    while (s[n] && col < cols) {
        if (s[n] == ' ') space = n;
        n++;
        while ((s[n] & 0xC0) == 0x80) n++; /* the rest of a UTF-8 sequence */
        col++;
    }
    if (!s[n]) return n;
    if (s[n] == ' ') return n + 1; /* the row ends at a word's end: its space goes with it */
    return space > 0 ? space + 1 : n;
}

/* A number with a unit suffix ("1.25k"), as "%.*f%s" would print it. */
static void fmt_suffixed(char *buf, size_t n, double x, int decimals, const char *suffix)
{
    size_t len = (size_t)numfmt_fixed(buf, n, x, decimals), sl = strlen(suffix);
    if (len + sl < n)
        memcpy(buf + len, suffix, sl + 1);
    else
        snprintf(buf, n, "%.*f%s", decimals, x, suffix);
}

void draw_fmt_count(char *buf, size_t n, double x)
{
    if (!isfinite(x))
        snprintf(buf, n, "-");
    else if (x >= 1e9)
        fmt_suffixed(buf, n, x / 1e9, 2, "G");
    else if (x >= 1e6)
        fmt_suffixed(buf, n, x / 1e6, 2, "M");
    else if (x >= 1e4)
        fmt_suffixed(buf, n, x / 1e3, 1, "k");
    else if (x >= 1e3)
        fmt_suffixed(buf, n, x / 1e3, 2, "k"); /* three digits: steady on screen */
    else
        numfmt_fixed(buf, n, x, 0);
}

void draw_fmt_bytes(char *buf, size_t n, double b)
{
    if (b >= 1e9)
        snprintf(buf, n, "%.2fGB", b / 1e9);
    else if (b >= 1e6)
        snprintf(buf, n, "%.2fMB", b / 1e6);
    else if (b >= 1e3)
        snprintf(buf, n, "%.1fkB", b / 1e3);
    else
        snprintf(buf, n, "%.0fB", b);
}

/* Each value's glyph: its level 0..7, or SPARK_BAD ("?") or SPARK_GAP (" "). */
enum { SPARK_BAD = 8, SPARK_GAP = 9 };
static void spark_levels(const double *v, const bool *blank, int k, bool zero_based, uint8_t *lv)
{
    double lo = zero_based ? 0 : INFINITY, hi = -INFINITY;
    for (int i = 0; i < k; i++)
        if (isfinite(v[i])) {
            lo = v[i] < lo ? v[i] : lo;
            hi = v[i] > hi ? v[i] : hi;
        }
    for (int i = 0; i < k; i++) {
        if (!isfinite(v[i]))
            lv[i] = blank && blank[i] ? SPARK_GAP : SPARK_BAD;
        else if (hi - lo < 1e-12)
            lv[i] = 3;
        else
            lv[i] = (uint8_t)(int)((v[i] - lo) / (hi - lo) * 7 + 0.5);
    }
}

static const char *spark_glyph(const DrawCtx *d, int level)
{
    return level == SPARK_GAP ? " " : level == SPARK_BAD ? "?" : d->g->spark[level];
}

void draw_spark(const DrawCtx *d, const double *v, const bool *blank, int k, bool zero_based, char *out, size_t n)
{
    uint8_t lv[DRAW_SPARK_MAX];
    if (k > DRAW_SPARK_MAX) k = DRAW_SPARK_MAX;
    spark_levels(v, blank, k, zero_based, lv);
    size_t used = 0;
    for (int i = 0; i < k; i++) {
        const char *gl = spark_glyph(d, lv[i]);
        size_t gl_len = strlen(gl);
        if (used + gl_len + 1 > n) break;
        memcpy(out + used, gl, gl_len);
        used += gl_len;
    }
    out[used] = '\0';
}

int draw_spark_put(const DrawCtx *d, int y, int x, int maxw, int style, const double *v, const bool *blank, int k,
                   bool zero_based)
{
    Canvas *cv = d->cv;
    if (k > DRAW_SPARK_MAX) k = DRAW_SPARK_MAX;
    /* the glyphs decoded once: each one column, as they are in UTF-8 and in ASCII */
    uint32_t cp[SPARK_GAP + 1];
    bool one_col = true;
    for (int i = 0; i <= SPARK_GAP && one_col; i++) one_col = canvas_char(cv, spark_glyph(d, i), &cp[i]);
    if (!one_col) {
        char s[4 * DRAW_SPARK_MAX + 1];
        draw_spark(d, v, blank, k, zero_based, s, sizeof s);
        return canvas_put(cv, y, x, maxw, style, s);
    }
    /* canvas_put's clipping; a sparkline has no word to lose, so a cut is plain */
    if (y < 0 || y >= cv->h || x < 0 || x >= cv->w) return 0;
    int lim = cv->w - x < maxw ? cv->w - x : maxw;
    if (k <= 0 || lim <= 0) return 0;
    uint8_t lv[DRAW_SPARK_MAX];
    spark_levels(v, blank, k, zero_based, lv); /* scaled over all k, then cut */
    int n = k < lim ? k : lim;
    for (int i = 0; i < n; i++) canvas_set(cv, y, x + i, cp[lv[i]], style);
    return n;
}

/* The newest complete bins of s, up to width of them, into v and blank
 * (out); returns how many. */
static int series_values(const Series *s, int width, double *v, bool *blank)
{
    /* the newest bin is still filling (some ranks not in yet): leave it out */
    int len = s->len > 1 ? s->len - 1 : s->len;
    int k = len < width ? len : width;
    if (k > DRAW_SPARK_MAX) k = DRAW_SPARK_MAX;
    for (int i = 0; i < k; i++) {
        const SeriesBin *b = &s->bin[len - k + i];
        v[i] = series_bin_mean(b);
        blank[i] = b->n_bad == 0; /* no data yet: a gap, not a bad value */
    }
    return k < 0 ? 0 : k;
}

void draw_spark_series(const DrawCtx *d, const Series *s, int width, bool zero_based, char *out, size_t n)
{
    out[0] = '\0';
    double v[DRAW_SPARK_MAX];
    bool blank[DRAW_SPARK_MAX];
    int k = series_values(s, width, v, blank);
    if (k >= 1) draw_spark(d, v, blank, k, zero_based, out, n);
}

int draw_spark_series_put(const DrawCtx *d, int y, int x, int maxw, int style, const Series *s, int width,
                          bool zero_based)
{
    double v[DRAW_SPARK_MAX];
    bool blank[DRAW_SPARK_MAX];
    int k = series_values(s, width, v, blank);
    return k >= 1 ? draw_spark_put(d, y, x, maxw, style, v, blank, k, zero_based) : 0;
}

int draw_rule(DrawCtx *d, PanelId p, int x, int y, int w, const char *extra)
{
    bool focus = d->ui->focus == p && d->ui->overlay == UI_NO_OVERLAY;
    int st = focus ? ST_RULE_FOCUS : ST_RULE;
    canvas_repeat(d->cv, y, x, w, ST_RULE, d->g->hline);
    char label[96];
    snprintf(label, sizeof label, " %d %s ", (int)p + 1, ui_panel_name(p));
    int cx = x + 1;
    cx += canvas_put(d->cv, y, cx, w - 1, st, label);
    if (extra && *extra) {
        cx += canvas_put(d->cv, y, cx, x + w - cx, ST_RULE, " ");
        cx += canvas_put(d->cv, y, cx, x + w - cx, ST_RULE, extra);
        cx += canvas_put(d->cv, y, cx, x + w - cx, ST_RULE, " ");
    }
    return cx;
}

/* ---- title and header ---- */

static int state_badge(JobState s)
{
    switch (s) {
    case JOB_RUNNING: return ST_BADGE_OK;
    case JOB_DONE: return ST_BADGE_OK;
    case JOB_STOPPING: return ST_BADGE_WARN;
    case JOB_PAUSED: return ST_BADGE_WARN;
    case JOB_FAILED: return ST_BADGE_ERR;
    default: return ST_BADGE_INFO;
    }
}

/* The state, with the in-between states of a pause the model cannot know. */
static const char *state_text(const Job *j)
{
    bool live = j->state == JOB_RUNNING || j->state == JOB_STARTING || j->state == JOB_PAUSED;
    if (live && j->pause_wanted && !j->paused) return "PAUSING";
    if (live && !j->pause_wanted && j->paused) return "RESUMING";
    return job_state_name(j->state);
}

static double eta_s(const Job *j, int64_t step)
{
    double world_batch = (double)j->batch_size * j->world;
    if (j->state != JOB_RUNNING || !(j->samples_per_s > 0) || world_batch <= 0 || j->max_steps <= step) return -1;
    return (double)(j->max_steps - step) / (j->samples_per_s / world_batch);
}

/* A title piece whole or not at all ("eta 00:1" would read as a time):
 * returns the columns used, and *full once one did not fit. */
static int put_piece(DrawCtx *d, int x, int w, int style, const char *s, bool *full)
{
    int sw = canvas_text_width(d->cv, s);
    if (*full || x + sw > w) {
        *full = true;
        return 0;
    }
    return canvas_put(d->cv, 0, x, w - x, style, s);
}

static void draw_title(DrawCtx *d, int w)
{
    const Job *j = d->j;
    Canvas *cv = d->cv;
    bool full = false;
    canvas_fill(cv, 0, 0, w, ST_TITLE);
    int x = canvas_put(cv, 0, 0, w, ST_TITLE, " ddptop ");
    char buf[160];
    snprintf(buf, sizeof buf, " %s ", state_text(j));
    x += put_piece(d, x, w, state_badge(j->state), buf, &full);
    snprintf(buf, sizeof buf, "  %d/%d ranks", job_alive(j), j->world);
    x += put_piece(d, x, w, ST_TITLE, buf, &full);
    if (j->max_restarts > 0) {
        snprintf(buf, sizeof buf, "  restart %d/%d", j->restarts, j->max_restarts);
        x += put_piece(d, x, w, ST_TITLE, buf, &full);
    }
    int64_t epoch, step = job_step_agreed(j, d->now_ns, &epoch); /* not a burst's arrival order */
    if (j->max_steps > 0)
        snprintf(buf, sizeof buf, "  epoch %lld  step %lld/%lld", (long long)epoch, (long long)step,
                 (long long)j->max_steps);
    else
        snprintf(buf, sizeof buf, "  epoch %lld  step %lld", (long long)epoch, (long long)step);
    x += put_piece(d, x, w, ST_TITLE, buf, &full);
    char n[32];
    draw_fmt_count(n, sizeof n, j->samples_per_s);
    snprintf(buf, sizeof buf, "  %s samples/s", n);
    x += put_piece(d, x, w, ST_TITLE, buf, &full);
    double eta = eta_s(j, step);
    if (j->paused && j->max_steps > step) { /* no estimate while nothing runs */
        snprintf(buf, sizeof buf, "  eta paused");
        x += put_piece(d, x, w, ST_TITLE, buf, &full);
    } else if (eta >= 0) {
        char t[32];
        draw_fmt_hms(t, sizeof t, (int64_t)(eta * 1e9));
        snprintf(buf, sizeof buf, "  eta %s", t);
        x += put_piece(d, x, w, ST_TITLE, buf, &full);
    }
    char el[32];
    draw_fmt_hms(el, sizeof el, d->now_ns - j->start_ns);
    snprintf(buf, sizeof buf, "elapsed %s  ? help ", el);
    int bw = canvas_text_width(cv, buf);
    if (w - bw > x + 1) canvas_put(cv, 0, w - bw, bw, ST_TITLE, buf);
}

typedef struct {
    const char *label;
    char value[160];
    int style;
} Seg;

/* label/value pairs left to right, wrapping, in at most maxlines lines; a
 * pair that finds no room is left out whole. Returns the lines drawn (the
 * line a left-out pair would have started is not one: the progress bar
 * goes there). */
static int flow(DrawCtx *d, int x0, int y, int w, int maxlines, const Seg *segs, int n)
{
    int line = 0, x = 0;
    for (int i = 0; i < n; i++) {
        int sw = canvas_text_width(d->cv, segs[i].label) + 1 + canvas_text_width(d->cv, segs[i].value);
        if (x > 0 && x + 2 + sw > w) {
            if (line + 1 >= maxlines) continue; /* a shorter one may still fit */
            line++;
            x = 0;
        }
        if (x > 0) x += 2;
        x += canvas_put(d->cv, y + line, x0 + x, w - x, ST_LABEL, segs[i].label);
        x += canvas_put(d->cv, y + line, x0 + x, w - x, ST_NORMAL, " ");
        x += canvas_put(d->cv, y + line, x0 + x, w - x, segs[i].style ? segs[i].style : ST_BOLD, segs[i].value);
    }
    return n > 0 ? line + 1 : 0;
}

static const char *or_dash(const char *s) { return s && *s ? s : "-"; }

/* The job's identity and health in a line or two. */
static int header_segs(const Job *j, Seg *s, bool full)
{
    int n = 0;
    memset(s, 0, sizeof(Seg) * 24);
    s[n].label = "job";
    snprintf(s[n++].value, sizeof s[0].value, "%s/%s", or_dash(j->backend), or_dash(j->device));
    if (j->precision[0]) {
        s[n].label = "precision";
        snprintf(s[n++].value, sizeof s[0].value, "%s, grads %s", j->precision, or_dash(j->grad_dtype));
    }
    s[n].label = "world";
    snprintf(s[n++].value, sizeof s[0].value, "%d on %d node%s", j->world, j->nodes, j->nodes == 1 ? "" : "s");
    s[n].label = "data";
    if (j->dataset_size > 0)
        snprintf(s[n++].value, sizeof s[0].value, "%.60s (%lld)", or_dash(j->dataset), (long long)j->dataset_size);
    else
        snprintf(s[n++].value, sizeof s[0].value, "%.60s", or_dash(j->dataset));
    s[n].label = "model";
    char p[32] = "-";
    if (j->params > 0) draw_fmt_count(p, sizeof p, (double)j->params);
    snprintf(s[n++].value, sizeof s[0].value, "%.100s (%s params)", or_dash(j->model), p);
    if (j->batch_size > 0) {
        s[n].label = "batch";
        snprintf(s[n++].value, sizeof s[0].value, "%lld/rank", (long long)j->batch_size);
    }
    s[n].label = "drops";
    snprintf(s[n].value, sizeof s[0].value, "%llu", (unsigned long long)j->drops);
    s[n++].style = j->drops ? ST_WARN : 0;
    if (j->bad_frames || full) {
        s[n].label = "bad frames";
        snprintf(s[n].value, sizeof s[0].value, "%llu", (unsigned long long)j->bad_frames);
        s[n++].style = j->bad_frames ? ST_WARN : 0;
    }
    if (j->ckpts > 0) {
        s[n].label = "ckpt";
        snprintf(s[n++].value, sizeof s[0].value, "step %lld", (long long)j->last_ckpt_step);
    }
    if (full) {
        s[n].label = "steps/epoch";
        snprintf(s[n++].value, sizeof s[0].value, "%lld", (long long)j->steps_per_epoch);
        s[n].label = "max steps";
        snprintf(s[n++].value, sizeof s[0].value, "%lld", (long long)j->max_steps);
        s[n].label = "state";
        snprintf(s[n++].value, sizeof s[0].value, "%s", state_text(j));
    }
    return n;
}

static void draw_progress(DrawCtx *d, int x0, int y, int w)
{
    const Job *j = d->j;
    int64_t step = job_step_agreed(j, d->now_ns, NULL);
    double frac = j->max_steps > 0 ? (double)step / (double)j->max_steps : 0;
    if (frac < 0) frac = 0;
    if (frac > 1) frac = 1;
    char tail[96];
    snprintf(tail, sizeof tail, " %5.1f%%  step %lld of %lld", frac * 100, (long long)step, (long long)j->max_steps);
    int bw = w - 2 - canvas_text_width(d->cv, tail);
    if (bw > 60) bw = 60;
    if (bw < 5) return;
    int full = (int)(frac * bw + 0.5);
    int x = x0 + canvas_put(d->cv, y, x0, 1, ST_NORMAL, "[");
    for (int i = 0; i < bw; i++)
        x += canvas_put(d->cv, y, x, 1, i < full ? ST_OK : ST_DIM, i < full ? d->g->bar_full : d->g->bar_empty);
    x += canvas_put(d->cv, y, x, 1, ST_NORMAL, "]");
    canvas_put(d->cv, y, x, x0 + w - x, ST_NORMAL, tail);
}

static void draw_header(DrawCtx *d, int x, int y, int w, int h)
{
    Seg s[24];
    int n = header_segs(d->j, s, false);
    int used = flow(d, x, y, w, h > 1 && d->j->max_steps <= 0 ? h : 1, s, n);
    if (h > used && d->j->max_steps > 0) draw_progress(d, x, y + used, w);
}

/* Zoomed header: every job-wide fact, then one line per node. */
static void draw_header_full(DrawCtx *d, int x, int y, int w, int h)
{
    const Job *j = d->j;
    Seg s[24];
    int n = header_segs(j, s, true);
    int used = flow(d, x, y, w, h, s, n);
    int row = y + used;
    if (j->max_steps > 0 && row < y + h) draw_progress(d, x, row++, w);
    if (row < y + h) canvas_put(d->cv, row++, x, w, ST_LABEL, "nodes");
    for (int i = 0; i < j->world && row < y + h; i++) {
        const JobRank *r = &j->ranks[i];
        if (!r->hello) continue;
        bool first = true;
        for (int k = 0; k < i && first; k++) first = !(j->ranks[k].hello && strcmp(j->ranks[k].host, r->host) == 0);
        if (!first) continue;
        int count = 0;
        for (int k = 0; k < j->world; k++) count += j->ranks[k].hello && strcmp(j->ranks[k].host, r->host) == 0;
        canvas_printf(d->cv, row++, x, w, ST_NORMAL, "  %-24.60s %d rank%s (%s, %s)", r->host, count,
                      count == 1 ? "" : "s", or_dash(r->device), or_dash(r->backend));
    }
}

/* ---- events, status, keys ---- */

static void draw_status(DrawCtx *d, int y, int w, const char *status)
{
    const Job *j = d->j;
    Ui *u = d->ui;
    char buf[600] = "";
    int st = ST_BOLD;
    if (u->note[0]) {
        snprintf(buf, sizeof buf, "%s", u->note);
        st = ST_LABEL;
    } else if (status && *status) {
        snprintf(buf, sizeof buf, "%s", status);
        if (j->state == JOB_DONE)
            st = ST_OK;
        else if (j->state == JOB_FAILED)
            st = ST_ERR;
    } else if (j->state == JOB_DONE || j->state == JOB_FAILED) {
        job_verdict(j, buf, sizeof buf);
        st = j->state == JOB_DONE ? ST_OK : ST_ERR;
    } else if (j->ckpts > 0) {
        snprintf(buf, sizeof buf, "last checkpoint: step %lld -> %.500s", (long long)j->last_ckpt_step,
                 j->last_ckpt_path);
        st = ST_NORMAL;
    }
    canvas_put(d->cv, y, 0, w, st, buf);
}

/* The mode's key line (keys.h), as many pairs as fit. */
static void draw_keys(DrawCtx *d, int y, int w)
{
    const Ui *u = d->ui;
    const char *keys[48][2];
    /* live: p offers "resume" once a pause is asked; replay: the mode says */
    bool alt = u->keys_mode == KEYS_LIVE ? d->j->pause_wanted : u->keys_alt;
    bool ended = d->j->state == JOB_DONE || d->j->state == JOB_FAILED;
    int n = keys_line(u->keys_mode, alt, ended, keys, 48);
    int x = 0;
    for (int i = 0; i < n; i++) {
        int need = canvas_text_width(d->cv, keys[i][0]) + 1 + canvas_text_width(d->cv, keys[i][1]);
        if (x + need > w) break;
        x += canvas_put(d->cv, y, x, w - x, ST_KEY, keys[i][0]);
        x += canvas_put(d->cv, y, x, w - x, ST_NORMAL, " ");
        x += canvas_put(d->cv, y, x, w - x, ST_NORMAL, keys[i][1]);
        x += canvas_put(d->cv, y, x, w - x, ST_NORMAL, "  ");
    }
}

/* ---- overlays ---- */

/* A box's ground, border and title at (x0, y0), bw x bh. */
static void box_frame(DrawCtx *d, int x0, int y0, int bw, int bh, const char *title)
{
    for (int y = y0; y < y0 + bh; y++) canvas_fill(d->cv, y, x0, bw, ST_NORMAL);
    canvas_repeat(d->cv, y0, x0, bw, ST_RULE_FOCUS, d->g->hline);
    canvas_repeat(d->cv, y0 + bh - 1, x0, bw, ST_RULE, d->g->hline);
    for (int y = y0 + 1; y < y0 + bh - 1; y++) {
        canvas_put(d->cv, y, x0, 1, ST_RULE, d->g->vline);
        canvas_put(d->cv, y, x0 + bw - 1, 1, ST_RULE, d->g->vline);
    }
    char t[128];
    snprintf(t, sizeof t, " %s ", title);
    canvas_put(d->cv, y0, x0 + 2, bw - 4, ST_RULE_FOCUS, t);
}

/* A box with a title and lines, centred; lines may start with "\t" to be
 * drawn as a label (key) column. */
static void draw_box(DrawCtx *d, int w, int h, const char *title, const char *const *lines, int n, int key_w)
{
    int bw = 0;
    for (int i = 0; i < n; i++) {
        int lw = canvas_text_width(d->cv, lines[i]);
        if (lines[i][0] == '\t') lw += key_w;
        if (lw > bw) bw = lw;
    }
    bw += 4;
    if (bw > w - 2) bw = w - 2;
    int bh = n + 2;
    if (bh > h - 2) bh = h - 2;
    int x0 = (w - bw) / 2, y0 = (h - bh) / 2;
    if (y0 < 1) y0 = 1;
    box_frame(d, x0, y0, bw, bh, title);
    for (int i = 0; i < n && i < bh - 2; i++) {
        const char *s = lines[i];
        int x = x0 + 2;
        if (s[0] == '\t') {
            /* "\tKEY\tdescription" */
            const char *k = s + 1, *tab = strchr(k, '\t');
            char key[48];
            size_t kl = tab ? (size_t)(tab - k) : strlen(k);
            if (kl >= sizeof key) kl = sizeof key - 1;
            memcpy(key, k, kl);
            key[kl] = '\0';
            canvas_put(d->cv, y0 + 1 + i, x, bw - 4, ST_KEY, key);
            if (tab) canvas_put(d->cv, y0 + 1 + i, x + key_w, bw - 4 - key_w, ST_NORMAL, tab + 1);
        } else {
            canvas_put(d->cv, y0 + 1 + i, x, bw - 4, ST_NORMAL, s);
        }
    }
}

/* ---- the help ---- */

enum { HELP_ROWS_MAX = 64, HELP_LINES_MAX = 256, HELP_COLS_MAX = 4, HELP_GAP = 3 };

/* One line of the help: a row's key (or "" under its first line) and a
 * piece of its description. */
typedef struct {
    const char *key;
    const char *text; /* len bytes of the row's help */
    int len;
    bool starts; /* a key's first line: a column may begin here (never
                    inside a row, nor before a row that goes on the one
                    above, as 1-6's second line) */
} HelpLine;

/* The rows as lines, each description wrapped at desc_w columns (0: not
 * wrapped); returns how many. */
static int help_lines(const KeyRow *const *rows, int n, int desc_w, HelpLine *out, int max)
{
    int k = 0;
    for (int i = 0; i < n; i++) {
        const char *p = rows[i]->help;
        bool first = true;
        do {
            int len = desc_w > 0 ? draw_wrap_next(p, desc_w) : (int)strlen(p);
            if (len <= 0) len = (int)strlen(p);
            if (k == max) return k;
            out[k++] = (HelpLine){ first ? rows[i]->keys : "", p, len, first && rows[i]->keys[0] };
            first = false;
            p += len;
        } while (*p);
    }
    return k;
}

/* The lines in `cols` columns, balanced: the fewest lines a column that
 * lets every column begin where a column may; the columns' first lines
 * into start[cols + 1] (start[cols] = n). */
static int help_pack(const HelpLine *l, int n, int cols, int *start)
{
    for (int per = (n + cols - 1) / cols; per <= n; per++) {
        int c = 0, from = 0;
        start[0] = 0;
        while (n - from > per && c < cols) {
            int cut = from + per;
            while (cut > from && !l[cut].starts) cut--;
            if (cut == from) break; /* a row taller than per */
            start[++c] = from = cut;
        }
        if (n - from <= per && c < cols) {
            for (int k = c + 1; k <= cols; k++) start[k] = n;
            return per;
        }
    }
    for (int k = 1; k <= cols; k++) start[k] = n;
    return n;
}

/* ?: the mode's rows of the key table, every one of them reachable at any
 * size: in one column when they fit the height; else in as many columns
 * side by side as the width holds, when that makes them fit; else in one
 * column, descriptions wrapped to the width, scrolled (Up Down PgUp PgDn,
 * ui.c) with the lines above and below counted on the box's border. The
 * box takes the whole height when it needs it (an overlay: the screen
 * under it waits). */
static void draw_help(DrawCtx *d, int w, int h)
{
    Ui *u = d->ui;
    const KeyRow *rows[HELP_ROWS_MAX];
    int n = keys_help(u->keys_mode, rows, HELP_ROWS_MAX);
    int key_w = 0, desc_w = 0;
    for (int i = 0; i < n; i++) {
        int kw = canvas_text_width(d->cv, rows[i]->keys), dw = canvas_text_width(d->cv, rows[i]->help);
        key_w = kw > key_w ? kw : key_w;
        desc_w = dw > desc_w ? dw : desc_w;
    }
    key_w += 2;
    int room_h = h - 2 > 1 ? h - 2 : 1; /* inside the border */
    int room_w = w - 6;                 /* the box leaves a column each side; border and padding */
    static HelpLine lines[HELP_LINES_MAX];
    int start[HELP_COLS_MAX + 1];
    int nl = help_lines(rows, n, 0, lines, HELP_LINES_MAX), cols = 0, per = 0;
    for (int c = 1; c <= HELP_COLS_MAX && c * (key_w + desc_w) + (c - 1) * HELP_GAP <= room_w; c++) {
        int p = help_pack(lines, nl, c, start);
        if (p <= room_h) {
            cols = c;
            per = p;
            break;
        }
    }
    if (!cols) { /* one column, as wide as there is room for, scrolled */
        cols = 1;
        if (key_w + desc_w > room_w) {
            desc_w = room_w - key_w > 8 ? room_w - key_w : 8;
            nl = help_lines(rows, n, desc_w, lines, HELP_LINES_MAX);
        }
        per = nl < room_h ? nl : room_h;
        start[0] = 0;
        start[1] = nl;
    }
    /* what the keys scroll: one column; none when everything shows */
    u->help_lines = cols == 1 ? nl : per;
    u->help_rows = per;
    int max_top = u->help_lines - per > 0 ? u->help_lines - per : 0;
    if (u->help_top > max_top) u->help_top = max_top;
    if (u->help_top < 0) u->help_top = 0;
    int top = cols == 1 ? u->help_top : 0;

    int bw = cols * (key_w + desc_w) + (cols - 1) * HELP_GAP + 4, bh = per + 2;
    if (bw > w - 2) bw = w - 2;
    int x0 = (w - bw) / 2, y0 = (h - bh) / 2;
    if (y0 < 1 && bh <= h - 2) y0 = 1; /* the title bar stays when there is room */
    if (y0 < 0) y0 = 0;
    box_frame(d, x0, y0, bw, bh, keys_help_title(u->keys_mode));
    for (int c = 0; c < cols; c++) {
        int x = x0 + 2 + c * (key_w + desc_w + HELP_GAP), right = x0 + bw - 2;
        int from = start[c] + (c == 0 ? top : 0), to = start[c + 1];
        for (int i = from, y = y0 + 1; i < to && y < y0 + 1 + per; i++, y++) {
            canvas_put(d->cv, y, x, right - x, ST_KEY, lines[i].key);
            char piece[256];
            snprintf(piece, sizeof piece, "%.*s", lines[i].len, lines[i].text);
            if (x + key_w < right) canvas_put(d->cv, y, x + key_w, right - x - key_w, ST_NORMAL, piece);
        }
    }
    /* more above or below: said on the border, with the keys that show it */
    char more[64];
    if (top > 0) {
        snprintf(more, sizeof more, " %s %d more (Up, PgUp) ", d->g->sort_up, top);
        int mw = canvas_text_width(d->cv, more);
        canvas_put(d->cv, y0, x0 + bw - 2 - mw, mw, ST_RULE_FOCUS, more);
    }
    int below = nl - top - per;
    if (cols == 1 && below > 0) {
        snprintf(more, sizeof more, " %s %d more (Down, PgDn) ", d->g->sort_down, below);
        int mw = canvas_text_width(d->cv, more);
        canvas_put(d->cv, y0 + bh - 1, x0 + bw - 2 - mw, mw, ST_RULE_FOCUS, more);
    }
}

static void draw_confirm_quit(DrawCtx *d, int w, int h)
{
    // clang-format off
    static const char *const lines[] = {
        "Training is running. Quit now?",
        "Every rank stops after the same step, writes the final checkpoint,",
        "passes a barrier and destroys its process group; then ddptop leaves.",
        "",
        "\ty / q\tquit",
        "\tany other key\tkeep training",
    };
    // clang-format on
    draw_box(d, w, h, "quit?", lines, (int)(sizeof lines / sizeof lines[0]), 15);
}

/* f: the teaching faults; the highlighted line is drawn selected. */
static void draw_fault_menu(DrawCtx *d, int w, int h)
{
    const Ui *u = d->ui;
    char text[UI_FAULT__COUNT][128];
    const char *lines[UI_FAULT__COUNT + 3];
    int n = 0;
    for (int i = 0; i < UI_FAULT__COUNT; i++) {
        char label[96];
        ui_fault_label((UiFault)i, u->fault_rank, label, sizeof label);
        snprintf(text[i], sizeof text[i], "\t%c\t%s", ui_fault_key((UiFault)i), label);
        lines[n++] = text[i];
    }
    lines[n++] = "";
    lines[n++] = "Enter or a letter injects it now; Esc closes. Each fault is";
    lines[n++] = "explained in the events when it is requested.";
    draw_box(d, w, h, "inject a fault", lines, n, 4);
    /* the highlighted line: the box is centred as draw_box placed it */
    int bh = n + 2 > h - 2 ? h - 2 : n + 2;
    int y0 = (h - bh) / 2 < 1 ? 1 : (h - bh) / 2;
    int y = y0 + 1 + u->fault_item;
    if (u->fault_item >= 0 && u->fault_item < UI_FAULT__COUNT && y < y0 + bh - 1) {
        int bw = 0;
        for (int i = 0; i < n; i++) {
            int lw = canvas_text_width(d->cv, lines[i]) + (lines[i][0] == '\t' ? 4 : 0);
            if (lw > bw) bw = lw;
        }
        bw += 4;
        if (bw > w - 2) bw = w - 2;
        int x0 = (w - bw) / 2;
        char label[96];
        ui_fault_label((UiFault)u->fault_item, u->fault_rank, label, sizeof label);
        canvas_fill(d->cv, y, x0 + 2 + 4, bw - 4 - 4, ST_SEL);
        canvas_put(d->cv, y, x0 + 2 + 4, bw - 4 - 4, ST_SEL, label);
    }
}

static void draw_too_small(DrawCtx *d, int w, int h)
{
    char msg[96];
    snprintf(msg, sizeof msg, "terminal too small: need %dx%d, have %dx%d", DRAW_MIN_W, DRAW_MIN_H, w, h);
    int mw = canvas_text_width(d->cv, msg);
    int x = mw < w ? (w - mw) / 2 : 0;
    canvas_put(d->cv, h / 2, x, w, ST_BOLD, msg);
}

/* ---- layout ---- */

typedef struct {
    PanelId id;
    int min, want; /* content rows */
    int flex;      /* share of the rows left over */
    int rows;      /* given (content); -1: not shown */
} Slot;

/* Give n slots (in screen order) rows out of avail: drop panels that do
 * not fit (lowest `drop` first), then fill wants, then flex shares. */
static void allocate(Slot *s, int n, int avail, const int *drop_order, int ndrop)
{
    int total = 0;
    for (int i = 0; i < n; i++) {
        s[i].rows = s[i].min;
        total += 1 + s[i].min;
    }
    for (int k = 0; k < ndrop && total > avail; k++)
        for (int i = 0; i < n; i++)
            if ((int)s[i].id == drop_order[k] && s[i].rows >= 0) {
                total -= 1 + s[i].min;
                s[i].rows = -1;
            }
    int left = avail - total;
    /* even the last panel's minimum does not fit: it gets what there is */
    for (int i = n - 1; i >= 0 && left < 0; i--) {
        if (s[i].rows < 0) continue;
        int cut = s[i].rows < -left ? s[i].rows : -left;
        s[i].rows -= cut;
        left += cut;
    }
    for (int i = 0; i < n && left > 0; i++) {
        if (s[i].rows < 0 || s[i].want <= s[i].rows) continue;
        int give = s[i].want - s[i].rows;
        if (give > left) give = left;
        s[i].rows += give;
        left -= give;
    }
    int flex = 0;
    for (int i = 0; i < n; i++)
        if (s[i].rows >= 0) flex += s[i].flex;
    if (left > 0 && flex > 0) {
        int given = 0, last = -1;
        for (int i = 0; i < n; i++) {
            if (s[i].rows < 0 || !s[i].flex) continue;
            int g = left * s[i].flex / flex;
            s[i].rows += g;
            given += g;
            last = i;
        }
        if (last >= 0) s[last].rows += left - given;
    } else if (left > 0) {
        for (int i = n - 1; i >= 0; i--)
            if (s[i].rows >= 0) {
                s[i].rows += left;
                break;
            }
    }
}

static void draw_panel(DrawCtx *d, PanelId p, int x, int y, int w, int h, bool zoomed)
{
    UiRect *r = &d->ui->rect[p];
    *r = (UiRect){ x, y, w, h };
    if (p == PANEL_HEADER && !zoomed) {
        draw_header(d, x, y, w, h);
        return;
    }
    char extra[160] = "";
    if (p == PANEL_RANKS) {
        const Ui *u = d->ui;
        snprintf(extra, sizeof extra, "sorted by %s %s%s", job_sort_name(u->sort),
                 job_sort_descending(u->sort, u->sort_desc) ? d->g->sort_down : d->g->sort_up,
                 d->sum && d->sum->odd ? ", odd ones first" : "");
    } else if (p == PANEL_EVENTS && d->ui->events_back > 0) {
        snprintf(extra, sizeof extra, "%d newer below (End)", d->ui->events_back);
    }
    if (p != PANEL_LOSS) draw_rule(d, p, x, y, w, extra);
    if (h <= 1) return;
    switch (p) {
    case PANEL_HEADER: draw_header_full(d, x, y + 1, w, h - 1); break;
    case PANEL_RANKS: draw_ranks(d, x, y + 1, w, h - 1); break;
    case PANEL_LOSS: draw_loss(d, x, y + 1, w, h - 1, y); break;
    case PANEL_COMM: draw_comm(d, x, y + 1, w, h - 1); break;
    case PANEL_SAMPLER: draw_sampler(d, x, y + 1, w, h - 1); break;
    case PANEL_EVENTS: draw_events(d, x, y + 1, w, h - 1, -1); break;
    default: break;
    }
}

static void layout_column(DrawCtx *d, const PanelId *ids, int n, int x, int y, int w, int h)
{
    Slot s[PANEL__COUNT];
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (!ui_panel_visible(d->ui, ids[i])) continue;
        Slot *t = &s[k++];
        t->id = ids[i];
        t->flex = 0;
        switch (ids[i]) {
        case PANEL_RANKS: {
            t->want = draw_ranks_want(d);
            t->min = 1 + (d->j->world < 2 ? d->j->world : 2);
            /* a big job must not push the charts off the screen */
            int cap = h * 45 / 100;
            /* a big job's map and table: a legend, a row of cells, the
             * outliers, the head and two ranks at least (draw_ranks) */
            if (d->sum) t->min = 6;
            if (t->want > cap) t->want = cap > t->min ? cap : t->min;
            break;
        }
        case PANEL_LOSS:
            t->min = 4;
            t->want = 4;
            t->flex = 3;
            break;
        case PANEL_COMM:
            t->min = 2;
            t->want = draw_comm_want(d);
            break;
        case PANEL_SAMPLER:
            t->min = 2;
            t->want = draw_sampler_want(d);
            break;
        case PANEL_EVENTS:
            t->min = 2;
            t->want = 2;
            t->flex = 2;
            break;
        default: t->min = t->want = 1; break;
        }
        /* the fixed panels take no more than a fifth each when rows are short */
        if ((ids[i] == PANEL_COMM || ids[i] == PANEL_SAMPLER) && t->want > h / 5 && h / 5 >= t->min) t->want = h / 5;
    }
    static const int drop[] = { PANEL_SAMPLER, PANEL_COMM, PANEL_LOSS, PANEL_EVENTS, PANEL_RANKS };
    allocate(s, k, h, drop, 5);
    int row = y;
    for (int i = 0; i < k; i++) {
        if (s[i].rows < 0) {
            d->ui->rect[s[i].id] = (UiRect){ 0, 0, 0, 0 };
            continue;
        }
        draw_panel(d, s[i].id, x, row, w, s[i].rows + 1, false);
        row += s[i].rows + 1;
    }
}

static bool any_visible(const Ui *u, const PanelId *ids, int n)
{
    for (int i = 0; i < n; i++)
        if (ui_panel_visible(u, ids[i])) return true;
    return false;
}

static void layout_body(DrawCtx *d, int y, int w, int h)
{
    static const PanelId left[] = { PANEL_RANKS, PANEL_LOSS };
    static const PanelId right[] = { PANEL_COMM, PANEL_SAMPLER, PANEL_EVENTS };
    static const PanelId all[] = { PANEL_RANKS, PANEL_LOSS, PANEL_COMM, PANEL_SAMPLER, PANEL_EVENTS };
    bool two = w >= 150 && h >= 24 && any_visible(d->ui, left, 2) && any_visible(d->ui, right, 3);
    if (!two) {
        layout_column(d, all, 5, 0, y, w, h);
        return;
    }
    int lw = w * 60 / 100;
    layout_column(d, left, 2, 0, y, lw, h);
    for (int r = y; r < y + h; r++) canvas_put(d->cv, r, lw, 1, ST_RULE, d->g->vline);
    layout_column(d, right, 3, lw + 1, y, w - lw - 1, h);
}

void draw_screen(Canvas *cv, Ui *u, const Job *j, int64_t now_ns, int64_t wall_ns, const char *status, bool color)
{
    DrawCtx d = { cv, u, j, now_ns, wall_ns, color, cv->utf8 ? &glyphs_utf8 : &glyphs_ascii, NULL, NULL, -1 };
    int w = cv->w, h = cv->h;
    for (int p = 0; p < PANEL__COUNT; p++) u->rect[p] = (UiRect){ 0, 0, 0, 0 };
    u->map_rows = 0;
    if (w < DRAW_MIN_W || h < DRAW_MIN_H) {
        draw_too_small(&d, w, h);
        return;
    }
    /* a view key's answer stays a few seconds, then the job's status returns */
    if (u->note[0]) {
        if (u->note_ns == 0)
            u->note_ns = now_ns;
        else if (now_ns - u->note_ns > 4000000000LL)
            u->note[0] = '\0';
    }
    /* the order the ranks are listed in: keys move through it; a big job
     * lists the ranks that stand out first */
    job_rank_order(j, u->sort, u->sort_desc, now_ns, wall_ns, u->order);
    JobDiagnosis diag;
    job_diagnose(j, &diag);
    d.culprit = diag.kind != DIAG_NONE ? diag.rank : -1;
    JobSummary sum;
    uint8_t *cell = j->world > DRAW_MAP_MIN_RANKS ? malloc((size_t)j->world) : NULL;
    if (cell) {
        job_summary(j, now_ns, wall_ns, &sum, cell);
        job_summary_order(j, &sum, cell, now_ns, u->order);
        d.sum = &sum;
        d.cell = cell;
    }
    if (u->to_top) {
        u->to_top = false;
        u->ranks_top = 0;
        u->sel = u->order[0];
    }

    draw_title(&d, w);
    int body_y = 1, body_h = h - 3;
    if (u->overlay == UI_DETAIL && u->detail_rank >= 0 && u->detail_rank < j->world) {
        draw_rank_detail(&d, u->detail_rank, 0, body_y, w, body_h);
    } else if (u->overlay == UI_STACK) {
        draw_stack(&d, 0, body_y, w, body_h);
    } else if (u->zoom >= 0) {
        draw_panel(&d, (PanelId)u->zoom, 0, body_y, w, body_h, true);
    } else {
        if (!u->hidden[PANEL_HEADER]) {
            int hh = h >= 30 ? 2 : 1;
            draw_panel(&d, PANEL_HEADER, 0, body_y, w, hh, false);
            body_y += hh;
            body_h -= hh;
        }
        layout_body(&d, body_y, w, body_h);
    }
    draw_status(&d, h - 2, w, status);
    draw_keys(&d, h - 1, w);
    if (u->overlay == UI_HELP)
        draw_help(&d, w, h);
    else if (u->overlay == UI_CONFIRM_QUIT)
        draw_confirm_quit(&d, w, h);
    else if (u->overlay == UI_FAULT_MENU)
        draw_fault_menu(&d, w, h);
    free(cell);
}
