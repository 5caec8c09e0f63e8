/* draw_loss.c — the loss chart: loss against step, one line per rank in
 * its own colour (up to DRAW_LOSS_LINES_MAX ranks), else the mean with the
 * min..max band of all ranks; eval accuracy marked where it was measured;
 * linear or log scale.
 *
 * Owns: the chart's scales and labels. Reads the Job's decimated loss
 * series (whole run, bounded memory). No curses. Main thread.
 *
 * Without colours every rank's line is drawn with its own digit, so lines
 * stay apart on a monochrome terminal; without UTF-8 the same, in ASCII.
 */
#include "screen/draw.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "screen/plot.h"

#define YLAB_W 8

typedef struct {
    bool log;
    double flo, fhi; /* transformed y range */
    int64_t xmin, xmax;
    int px_w, px_h;
} Scale;

static double fy(const Scale *s, double v)
{
    if (!s->log) return v;
    return v > 0 ? log10(v) : NAN;
}

static double px_x(const Scale *s, double xv)
{
    if (s->xmax <= s->xmin) return 0;
    return (xv - (double)s->xmin) / (double)(s->xmax - s->xmin) * (s->px_w - 1);
}

static double px_y(const Scale *s, double v)
{
    double t = fy(s, v);
    if (!isfinite(t)) return NAN;
    return (1.0 - (t - s->flo) / (s->fhi - s->flo)) * (s->px_h - 1);
}

/* x at the middle of a bin */
static double bin_xc(const Series *se, int i) { return (double)series_bin_x(se, i) + (double)(se->stride - 1) / 2.0; }

/* A series as one path through its bins' means (plot_path: each point
 * rounded once). */
static void plot_series(Plot *p, const Scale *sc, const Series *se, int style, int layer, uint32_t glyph)
{
    double xs[SERIES_CAP], ys[SERIES_CAP];
    int n = 0;
    for (int i = 0; i < se->len && n < SERIES_CAP; i++) {
        double v = series_bin_mean(&se->bin[i]);
        double x = px_x(sc, bin_xc(se, i)), y = px_y(sc, v);
        if (!isfinite(y)) continue;
        xs[n] = x;
        ys[n++] = y;
    }
    plot_path(p, xs, ys, n, style, layer, glyph);
}

/* The min..max band as its two edges: a filled area would swallow the
 * mean line (a braille cell has one colour) and read as noise in mono.
 * The first bin is a vertical slice; the edges are paths from it (one
 * style and layer: the order of their dots does not matter). */
static void plot_band(Plot *p, const Scale *sc, const Series *se)
{
    double xs[SERIES_CAP], lo[SERIES_CAP], hi[SERIES_CAP];
    int n = 0;
    for (int i = 0; i < se->len && n < SERIES_CAP; i++) {
        const SeriesBin *b = &se->bin[i];
        if (b->n == 0) continue;
        double x = px_x(sc, bin_xc(se, i)); /* finite: the scale's x range is never empty */
        double l = px_y(sc, b->min), h = px_y(sc, b->max);
        if (!isfinite(l)) l = (double)(sc->px_h - 1); /* a non-positive minimum on a log scale: to the floor */
        if (!isfinite(h)) continue;
        if (n == 0) plot_vspan(p, (int)lround(x), l, h, ST_BAND, PLOT_BAND, ':');
        xs[n] = x;
        lo[n] = l;
        hi[n++] = h;
    }
    plot_path(p, xs, lo, n, ST_BAND, PLOT_BAND, ':');
    plot_path(p, xs, hi, n, ST_BAND, PLOT_BAND, ':');
}

/* The legend on the panel's title line. */
static void legend(DrawCtx *d, int x, int y, int w, bool lines, bool braille)
{
    const Job *j = d->j;
    Canvas *cv = d->cv;
    int end = x + w - 1, cx = x;
    if (lines) {
        for (int r = 0; r < j->world; r++) {
            if (j->ranks[r].loss_hist.len == 0) continue;
            char seg[24];
            if (braille)
                snprintf(seg, sizeof seg, "r%d%s ", r, cv->utf8 ? "━" : "-");
            else
                snprintf(seg, sizeof seg, "%d=r%d ", r % 10, r);
            if (cx + canvas_text_width(cv, seg) > end) break;
            cx += canvas_put(cv, y, cx, end - cx, ST_SERIES(r), seg);
        }
    } else {
        cx += canvas_put(cv, y, cx, end - cx, ST_MEAN, braille ? "mean " : "*=mean ");
        cx += canvas_printf(cv, y, cx, end - cx, ST_BAND, "%s ", braille ? "min/max of ranks" : ":=min/max of ranks");
    }
    const JobEval *e = job_eval_at(j, 0);
    if (e && cx + 24 < end) {
        char mark[8];
        snprintf(mark, sizeof mark, "%s", cv->utf8 ? "▼" : "v");
        cx += canvas_printf(cv, y, cx, end - cx, ST_EVAL, "%s eval %.1f%% (epoch %lld) ", mark, e->accuracy * 100,
                            (long long)e->epoch);
    }
    /* the ranks' newest losses (a diverged rank does not hide the rest), not
     * the newest bin's mean of many steps */
    double now = job_loss_now(j);
    if (isfinite(now)) {
        char v[24];
        draw_fmt_fit(v, sizeof v, 8, now, 4);
        if (cx + 12 < end) canvas_printf(cv, y, cx, end - cx, ST_RULE, "now %s ", v);
    }
}

void draw_loss(DrawCtx *d, int x, int y, int w, int h, int rule_y)
{
    const Job *j = d->j;
    Canvas *cv = d->cv;
    bool lines = j->world <= DRAW_LOSS_LINES_MAX;
    /* braille dots cannot carry a rank's identity without colour */
    bool braille = cv->utf8 && (d->color || !lines);
    int cx = draw_rule(d, PANEL_LOSS, x, rule_y, w, d->ui->log_scale ? "log" : "linear");
    legend(d, cx, rule_y, x + w - cx, lines, braille);

    int pw = w - YLAB_W - 1, ph = h - 1;
    if (pw < 8 || ph < 2) {
        canvas_put(cv, y, x, w, ST_DIM, "(no room for the chart: zoom with 3)");
        return;
    }
    Scale sc;
    memset(&sc, 0, sizeof sc);
    sc.log = d->ui->log_scale;
    const Series *all = &j->loss_all;
    double lo, hi;
    if (all->len == 0 || !series_range(all, sc.log, &lo, &hi)) {
        canvas_put(cv, y + ph / 2, x + YLAB_W + pw / 2 - 8, 20, ST_DIM,
                   sc.log && all->len ? "no positive loss yet" : "no steps yet");
        return;
    }
    sc.xmin = all->first;
    sc.xmax = series_last_x(all);
    for (int r = 0; r < j->world; r++) {
        const Series *s = &j->ranks[r].loss_hist;
        if (s->len == 0) continue;
        if (s->first < sc.xmin) sc.xmin = s->first;
        if (series_last_x(s) > sc.xmax) sc.xmax = series_last_x(s);
    }
    sc.flo = fy(&sc, lo);
    sc.fhi = fy(&sc, hi);
    if (sc.fhi - sc.flo < 1e-9) {
        double pad = sc.log ? 0.1 : (fabs(sc.fhi) > 1e-9 ? fabs(sc.fhi) * 0.1 : 0.5);
        sc.flo -= pad;
        sc.fhi += pad;
    } else {
        double pad = (sc.fhi - sc.flo) * 0.05;
        sc.flo -= pad;
        sc.fhi += pad;
    }
    /* a loss is not negative: no axis label below 0 for the padding's sake */
    if (!sc.log && lo >= 0 && sc.flo < 0) sc.flo = 0;

    int plot_x = x + YLAB_W + 1;
    Plot p;
    if (plot_begin(&p, cv, plot_x, y, pw, ph, braille)) return;
    sc.px_w = p.px_w;
    sc.px_h = p.px_h;
    if (lines) {
        for (int r = 0; r < j->world; r++)
            plot_series(&p, &sc, &j->ranks[r].loss_hist, ST_SERIES(r), PLOT_LINE, (uint32_t)('0' + r % 10));
    } else {
        plot_band(&p, &sc, all);
        plot_series(&p, &sc, all, ST_MEAN, PLOT_MEAN, '*');
    }
    plot_end(&p);

    /* y axis: labels at top, middle, bottom and a rule */
    for (int row = 0; row < ph; row++) canvas_put(cv, y + row, x + YLAB_W, 1, ST_AXIS, d->g->vline);
    int label_rows[3] = { 0, ph / 2, ph - 1 };
    for (int k = 0; k < 3; k++) {
        if (k == 1 && ph < 5) continue;
        int row = label_rows[k];
        double t = sc.fhi - (sc.fhi - sc.flo) * (double)row / (double)(ph > 1 ? ph - 1 : 1);
        double v = sc.log ? pow(10, t) : t;
        char lab[24];
        draw_fmt_fit(lab, sizeof lab, YLAB_W - 1, v, 4);
        int lw = canvas_text_width(cv, lab);
        canvas_put(cv, y + row, x + YLAB_W - 1 - lw, lw, ST_AXIS, lab);
    }
    /* x axis: first, middle and last step */
    int ay = y + ph;
    char a[32], b[32], m[32];
    snprintf(a, sizeof a, "step %lld", (long long)sc.xmin);
    snprintf(b, sizeof b, "%lld", (long long)sc.xmax);
    snprintf(m, sizeof m, "%lld", (long long)((sc.xmin + sc.xmax) / 2));
    canvas_put(cv, ay, plot_x, pw, ST_AXIS, a);
    int bw = canvas_text_width(cv, b);
    canvas_put(cv, ay, plot_x + pw - bw, bw, ST_AXIS, b);
    int mw = canvas_text_width(cv, m);
    if (pw > 3 * (mw + 8) && sc.xmax - sc.xmin > 2) canvas_put(cv, ay, plot_x + (pw - mw) / 2, mw, ST_AXIS, m);

    /* evals: a mark on the top row at their step; the accuracy beside a
     * mark when it fits before the next mark */
    int n = j->n_evals < JOB_EVALS ? j->n_evals : JOB_EVALS;
    int col_of[JOB_EVALS], nm = 0;
    const JobEval *ev[JOB_EVALS];
    for (int i = n - 1; i >= 0; i--) {
        const JobEval *e = job_eval_at(j, i);
        double px = px_x(&sc, (double)e->step);
        int col = plot_x + (int)(braille ? px / 2 : px);
        if (col < plot_x || col >= plot_x + pw) continue;
        col_of[nm] = col;
        ev[nm++] = e;
        canvas_set(cv, y, col, d->g->eval_mark, ST_EVAL);
    }
    int label_end = -1;
    for (int k = 0; k < nm; k++) {
        char lab[16];
        snprintf(lab, sizeof lab, "%.1f%%", ev[k]->accuracy * 100);
        int lw = canvas_text_width(cv, lab);
        int limit = k + 1 < nm ? col_of[k + 1] : plot_x + pw + 1;
        if (col_of[k] + 1 > label_end && col_of[k] + 1 + lw < limit) {
            canvas_put(cv, y, col_of[k] + 1, lw, ST_EVAL, lab);
            label_end = col_of[k] + 1 + lw;
        }
    }
}
