/* draw_sampler.c — the sampler panel: the dataset's index space for the
 * current epoch as a strip, one cell per index coloured by the rank that
 * got it (padding duplicates marked, indices no shard holds dotted), each
 * rank's num_samples and first indices, and a warning when an epoch
 * repeats the previous epoch's order (set_epoch forgotten).
 *
 * Owns: the panel's wording and the strip's glyphs. Reads the Job's shard
 * map; the strip scrolls with Left/Right (Ui.strip_first). No curses.
 * Main thread.
 */
#include "screen/draw.h"

#include <stdio.h>
#include <string.h>

int draw_sampler_want(const DrawCtx *d)
{
    int ranks = d->j->world < 4 ? d->j->world : 4;
    return 1 + 2 + 1 + ranks + (d->j->shard.same_order_rank >= 0 ? 1 : 0);
}

static char base36(int r) { return "0123456789abcdefghijklmnopqrstuvwxyz"[r % 36]; }

static void draw_strip(DrawCtx *d, int x, int y, int w, int rows)
{
    const Job *j = d->j;
    const JobShardMap *m = &j->shard;
    bool blocks = d->color && d->cv->utf8;
    int64_t i = d->ui->strip_first;
    for (int row = 0; row < rows; row++)
        for (int col = 0; col < w; col++, i++) {
            if (i >= m->size) return;
            int count;
            int owner = job_shard_owner(j, i, &count);
            if (owner < 0) {
                canvas_set(d->cv, y + row, x + col, i < m->mapped ? d->g->strip_none : ' ', ST_DIM);
            } else if (count >= 2) {
                canvas_set(d->cv, y + row, x + col, d->g->strip_dup, d->color ? ST_SERIES(owner) : ST_WARN);
            } else {
                canvas_set(d->cv, y + row, x + col, blocks ? d->g->strip_cell : (uint32_t)base36(owner),
                           d->color ? ST_SERIES(owner) : ST_NORMAL);
            }
        }
}

static void draw_legend(DrawCtx *d, int x, int y, int w, int64_t first, int64_t last)
{
    const Job *j = d->j;
    Canvas *cv = d->cv;
    int end = x + w, cx = x;
    cx += canvas_printf(cv, y, cx, end - cx, ST_LABEL, "indices %lld-%lld of %lld ", (long long)first, (long long)last,
                        (long long)j->shard.size);
    bool blocks = d->color && cv->utf8;
    if (!blocks) {
        cx +=
            canvas_put(cv, y, cx, end - cx, ST_DIM, j->world > 36 ? " cell = rank (base 36, mod 36)" : " cell = rank");
    } else {
        int shown = j->world < CANVAS_SERIES ? j->world : CANVAS_SERIES;
        if (j->world > CANVAS_SERIES)
            cx += canvas_printf(cv, y, cx, end - cx, ST_DIM, " colour = rank mod %d:", CANVAS_SERIES);
        for (int r = 0; r < shown && cx + 6 < end; r++) {
            canvas_set(cv, y, cx + 1, d->g->strip_cell, ST_SERIES(r));
            cx += 2;
            cx += canvas_printf(cv, y, cx, end - cx, ST_NORMAL, "r%d", r);
        }
    }
    if (cx + 22 < end) {
        canvas_set(cv, y, cx + 1, d->g->strip_dup, d->color ? ST_NORMAL : ST_WARN);
        cx += 2;
        cx += canvas_put(cv, y, cx, end - cx, ST_NORMAL, " padding duplicate");
    }
    if (cx + 16 < end) {
        canvas_set(cv, y, cx + 1, d->g->strip_none, ST_DIM);
        cx += 2;
        canvas_put(cv, y, cx, end - cx, ST_NORMAL, " in no shard");
    }
}

void draw_sampler(DrawCtx *d, int x, int y, int w, int h)
{
    const Job *j = d->j;
    const JobShardMap *m = &j->shard;
    Canvas *cv = d->cv;
    Ui *u = d->ui;
    int row = y, end = y + h;
    if (h <= 0) return;
    if (m->epoch < 0) {
        canvas_put(cv, row, x, w, ST_DIM, "no shard reported yet");
        return;
    }
    int cx = x + canvas_printf(cv, row, x, w, ST_LABEL, "epoch ");
    cx += canvas_printf(cv, row, cx, x + w - cx, ST_BOLD, "%lld", (long long)m->epoch);
    cx += canvas_printf(cv, row, cx, x + w - cx, ST_NORMAL, "  N %lld  %d/%d ranks  %s", (long long)m->size, m->ranks,
                        j->world, m->shuffle ? "shuffle" : "no shuffle");
    if (m->shuffle) cx += canvas_printf(cv, row, cx, x + w - cx, ST_NORMAL, " seed %lld", (long long)m->seed);
    cx += canvas_printf(cv, row, cx, x + w - cx, ST_NORMAL, "  %lld/rank  total %lld  padding ",
                        (long long)m->num_samples, (long long)m->total_size);
    cx += canvas_printf(cv, row, cx, x + w - cx, m->padding ? ST_WARN : ST_NORMAL, "%lld", (long long)m->padding);
    if (m->drop_last) cx += canvas_put(cv, row, cx, x + w - cx, ST_NORMAL, "  drop_last");
    if (m->cut) canvas_put(cv, row, cx, x + w - cx, ST_DIM, "  (lists cut: first indices only)");
    row++;
    if (row < end && m->same_order_rank >= 0 && m->same_order_epoch == m->epoch) {
        canvas_printf(cv, row++, x, w, ST_WARN,
                      "%s rank %d: epoch %lld repeats the previous epoch's order: "
                      "sampler.set_epoch(epoch) not called?",
                      d->g->warn, m->same_order_rank, (long long)m->same_order_epoch);
    }
    /* the strip gets up to a third of the rows (at least one), then a legend */
    int left = end - row;
    if (left <= 0) return;
    int strip_rows = left >= 6 ? left / 3 : 1;
    if (strip_rows > 8) strip_rows = 8;
    u->strip_cells = strip_rows * w;
    if (u->strip_first >= m->size) u->strip_first = 0;
    draw_strip(d, x, row, w, strip_rows);
    row += strip_rows;
    int64_t last = u->strip_first + (int64_t)strip_rows * w - 1;
    if (last >= m->size) last = m->size - 1;
    if (row < end) draw_legend(d, x, row++, w, u->strip_first, last);
    /* each rank's shard */
    int shown = 0;
    for (int r = 0; r < j->world && row < end; r++) {
        const JobRank *k = &j->ranks[r];
        if (row == end - 1 && j->world - r > 1) {
            canvas_printf(cv, row++, x, w, ST_DIM, "%s %d more ranks (5: this panel full-screen)", d->g->ellipsis,
                          j->world - r);
            break;
        }
        if (!k->have_shard) {
            canvas_printf(cv, row++, x, w, ST_DIM, "r%-3d no shard yet", r);
            continue;
        }
        char first[256] = "";
        size_t len = 0;
        for (int i = 0; i < k->n_first && len + 24 < sizeof first; i++)
            len += (size_t)snprintf(first + len, sizeof first - len, " %lld", (long long)k->first_idx[i]);
        int c2 = x + canvas_printf(cv, row, x, w, ST_SERIES(r), "r%-3d", r);
        canvas_printf(cv, row, c2, x + w - c2, ST_NORMAL, " %lld samples (epoch %lld)  first%s",
                      (long long)k->num_samples, (long long)k->shard_epoch, first);
        row++;
        shown++;
    }
}
