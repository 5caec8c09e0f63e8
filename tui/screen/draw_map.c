/* draw_map.c — a big job's rank map: one cell per rank (or per group of
 * ranks when the rows are short, the worst state shown), each a glyph AND
 * a colour by the rank's state, so a hang in one of 1024 ranks shows at a
 * glance, also without colours; a legend line above it with the count of
 * each state and the few odd ranks named.
 *
 * Owns: the cells' glyphs and styles. Reads the frame's JobSummary and
 * cells (DrawCtx); writes where the cells are into the Ui (a click selects
 * a cell's rank). No curses. Main thread.
 */
#include "screen/draw.h"

#include <stdio.h>
#include <string.h>

/* glyph in UTF-8, in ASCII, style; problems are letters or marks that read
 * in a capture, a healthy rank a quiet dot */
static const struct {
    const char *utf8, *ascii;
    int style;
} cell_look[JOB_CELL__COUNT] = {
    [JOB_CELL_FAILED] = { "✗", "x", ST_ROW_ERR },  [JOB_CELL_ERROR] = { "E", "E", ST_ROW_ERR },
    [JOB_CELL_STALLED] = { "!", "!", ST_ROW_ERR }, [JOB_CELL_SILENT] = { "?", "?", ST_ROW_WARN },
    [JOB_CELL_NAN] = { "n", "n", ST_ERR },         [JOB_CELL_BEHIND] = { "b", "b", ST_WARN },
    [JOB_CELL_SLOW] = { "s", "s", ST_WARN },       [JOB_CELL_DROPS] = { "d", "d", ST_WARN },
    [JOB_CELL_WAITING] = { "w", "w", ST_LABEL },   [JOB_CELL_OK] = { "·", ".", ST_OK },
    [JOB_CELL_DONE] = { "✓", "+", ST_DIM },        [JOB_CELL_PENDING] = { "-", "-", ST_DIM },
};

static const char *glyph(const DrawCtx *d, int e) { return d->cv->utf8 ? cell_look[e].utf8 : cell_look[e].ascii; }

int draw_map_fit(int world, int w, int avail, int *per_cell)
{
    *per_cell = 1;
    if (w < 8 || avail < 1 || world < 1) return 0;
    int need = (world + w - 1) / w;
    if (need <= avail) return need;
    int k = (world + w * avail - 1) / (w * avail);
    *per_cell = k;
    int cells = (world + k - 1) / k;
    return (cells + w - 1) / w;
}

/* "! stalled 1: r517" — a state's legend entry; its ranks named when few. */
static int legend_entry(DrawCtx *d, int e, int x, int y, int end)
{
    const JobSummary *s = d->sum;
    int x0 = x;
    x += canvas_put(d->cv, y, x, end - x, cell_look[e].style, glyph(d, e));
    char t[96];
    int len = snprintf(t, sizeof t, " %s %d", job_cell_name((JobCell)e), s->count[e]);
    if (e < JOB_CELL_WAITING && s->count[e] <= 3) {
        for (int r = 0, k = 0; r < d->j->world && k < s->count[e] && len < (int)sizeof t - 12; r++)
            if (d->cell[r] == e) len += snprintf(t + len, sizeof t - (size_t)len, "%sr%d", k++ ? "," : ": ", r);
    }
    x += canvas_put(d->cv, y, x, end - x, e < JOB_CELL_WAITING ? ST_BOLD : ST_NORMAL, t);
    return x - x0;
}

void draw_map(DrawCtx *d, int x, int y, int w, int rows, int per_cell)
{
    const Job *j = d->j;
    const JobSummary *s = d->sum;
    int end = x + w, cx = x;
    char head[96];
    if (per_cell > 1)
        snprintf(head, sizeof head, "%d ranks, a cell = %d ranks (the worst shown): ", j->world, per_cell);
    else
        snprintf(head, sizeof head, "%d ranks: ", j->world);
    cx += canvas_put(d->cv, y, cx, end - cx, ST_LABEL, head);
    for (int e = 0; e < JOB_CELL__COUNT && cx < end; e++) {
        if (!s->count[e]) continue;
        cx += legend_entry(d, e, cx, y, end);
        cx += canvas_put(d->cv, y, cx, end - cx, ST_NORMAL, "  ");
    }
    /* where the cells are, for a click (ui_mouse) */
    d->ui->map_x = x;
    d->ui->map_y = y + 1;
    d->ui->map_w = w;
    d->ui->map_rows = rows;
    d->ui->map_per_cell = per_cell;
    int cells = (j->world + per_cell - 1) / per_cell;
    int sel_cell = d->ui->sel >= 0 && d->ui->sel < j->world ? d->ui->sel / per_cell : -1;
    /* each state's glyph decoded once, not once per cell (1024 a frame) */
    uint32_t cp[JOB_CELL__COUNT];
    bool one_col[JOB_CELL__COUNT];
    for (int e = 0; e < JOB_CELL__COUNT; e++) one_col[e] = canvas_char(d->cv, glyph(d, e), &cp[e]);
    for (int i = 0; i < cells; i++) {
        int row = i / w, col = i % w;
        if (row >= rows) break;
        int worst = JOB_CELL__COUNT - 1;
        for (int r = i * per_cell; r < (i + 1) * per_cell && r < j->world; r++)
            if (d->cell[r] < worst) worst = d->cell[r];
        int st = i == sel_cell ? ST_SEL : cell_look[worst].style;
        if (one_col[worst])
            canvas_set(d->cv, y + 1 + row, x + col, cp[worst], st);
        else
            canvas_put(d->cv, y + 1 + row, x + col, 1, st, glyph(d, worst));
    }
}
