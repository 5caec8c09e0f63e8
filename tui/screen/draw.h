/* draw.h — the whole ddptop screen drawn into a Canvas: title bar, the six
 * panels (header, ranks, loss chart, all-reduce, sampler, events), status
 * and key lines, and the overlays (help, a rank's detail, the quit
 * question). No curses: view_tui.c copies the canvas to the terminal and
 * tests read it as text.
 *
 * Owns: the layout rules and every panel's formatting. Reads the Job;
 * writes only the Ui's "where is what" fields (rects, display order, rows
 * shown) so keys and clicks can use them. Main thread.
 *
 * Files: draw_screen.c (layout, title, header, status, overlays, shared
 * helpers), draw_ranks.c (ranks table, summaries, rank detail),
 * draw_map.c (a big job's rank map), draw_loss.c (loss chart),
 * draw_comm.c (all-reduce), draw_sampler.c (sampler strip), draw_events.c
 * (events log), draw_stack.c (a rank's Python stacks).
 */
#ifndef DDPTOP_DRAW_H
#define DDPTOP_DRAW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "screen/canvas.h"
#include "model/job.h"
#include "view/ui.h"

/* Below this the screen only says it is too small. */
#define DRAW_MIN_W          60
#define DRAW_MIN_H          12
/* Up to this many ranks the loss chart draws a line per rank; above, the
 * mean with a min..max band. */
#define DRAW_LOSS_LINES_MAX 8
/* Above this many ranks the ranks panel summarises: a rank map above the
 * table, and the ranks that stand out listed first whatever the order. Up
 * to it (a few screens of rows, scrolled) the screen is a plain table. */
#define DRAW_MAP_MIN_RANKS  32

/* Draw the screen into cv (already sized to the terminal by the caller).
 * color: the terminal shows colours (else lines are told apart by glyphs).
 * status: the run loop's one-line message, may be NULL. */
void draw_screen(Canvas *cv, Ui *u, const Job *j, int64_t now_ns, int64_t wall_ns, const char *status, bool color);

/* ---- shared by the draw_*.c files ---- */

typedef struct {
    const char *hline, *vline, *ellipsis, *dot;
    const char *spark[8];
    const char *bar_full, *bar_empty;
    const char *mark_fail, *mark_ok, *mark_warn, *mark_sel;
    const char *sort_up, *sort_down, *warn;
    uint32_t eval_mark, strip_cell, strip_dup, strip_none;
} Glyphs;

typedef struct {
    Canvas *cv;
    Ui *ui;
    const Job *j;
    int64_t now_ns, wall_ns;
    bool color;
    const Glyphs *g;
    /* a big job's (world > DRAW_MAP_MIN_RANKS) ranks judged once a frame:
     * the summary and every rank's JobCell; NULL for a small job */
    const JobSummary *sum;
    const uint8_t *cell;
    /* the rank the job's diagnosis blames (job_diagnose), -1 none: the one
     * row the `!` stands on while a hang or a failure is diagnosed */
    int culprit;
} DrawCtx;

/* The panel bodies; (x, y, w, h) is the area under the panel's title line. */
void draw_ranks(DrawCtx *d, int x, int y, int w, int h);
void draw_rank_detail(DrawCtx *d, int rank, int x, int y, int w, int h);
/* The w page: the Ui's stacks of rank Ui.stack_rank (draw_stack.c). */
void draw_stack(DrawCtx *d, int x, int y, int w, int h);
void draw_loss(DrawCtx *d, int x, int y, int w, int h, int rule_y);
void draw_comm(DrawCtx *d, int x, int y, int w, int h);
void draw_sampler(DrawCtx *d, int x, int y, int w, int h);
void draw_events(DrawCtx *d, int x, int y, int w, int h, int rank_filter);
/* A big job's rank map (draw_map.c): a legend line, then `rows` rows of
 * cells, per_cell ranks each. */
void draw_map(DrawCtx *d, int x, int y, int w, int rows, int per_cell);
/* Rows the map of `world` ranks takes in w columns and at most avail rows;
 * *per_cell (out): ranks per cell (1 when every rank gets one). 0: none fit. */
int draw_map_fit(int world, int w, int avail, int *per_cell);

/* Rows each panel would like (content, without its title line). */
int draw_ranks_want(const DrawCtx *d);
int draw_comm_want(const DrawCtx *d);
int draw_sampler_want(const DrawCtx *d);

/* Helpers. */
void draw_fmt_fit(char *buf, size_t n, int width, double x, int decimals);
void draw_fmt_hms(char *buf, size_t n, int64_t ns);
/* The bytes of s that fill at most cols columns (a column a code point:
 * events and the help are ASCII but for what ranks log), ending at a space
 * when one is there, so a verdict or a key's line wraps between words. */
int draw_wrap_next(const char *s, int cols);
void draw_fmt_count(char *buf, size_t n, double x);
void draw_fmt_bytes(char *buf, size_t n, double bytes);
/* A sparkline of v[0..k) (oldest first) into out, scaled from the smallest
 * value (0 when zero_based) to the largest; a value that is not finite
 * shows as "?", or as a blank where blank[i] (blank may be NULL). */
#define DRAW_SPARK_MAX 1024
void draw_spark(const DrawCtx *d, const double *v, const bool *blank, int k, bool zero_based, char *out, size_t n);
/* A sparkline of the newest complete bins of s (up to width glyphs) into
 * out; zero_based: the scale starts at 0 (magnitudes such as latency),
 * else at the smallest value shown. */
void draw_spark_series(const DrawCtx *d, const Series *s, int width, bool zero_based, char *out, size_t n);
/* canvas_put(cv, y, x, maxw, style, the sparkline draw_spark makes of v)
 * cell for cell, without building the text and decoding it again. Returns
 * the columns written. */
int draw_spark_put(const DrawCtx *d, int y, int x, int maxw, int style, const double *v, const bool *blank, int k,
                   bool zero_based);
/* The same for draw_spark_series's sparkline of s. */
int draw_spark_series_put(const DrawCtx *d, int y, int x, int maxw, int style, const Series *s, int width,
                          bool zero_based);
/* The label of a panel's title line; returns the column after it. */
int draw_rule(DrawCtx *d, PanelId p, int x, int y, int w, const char *extra);

#endif
