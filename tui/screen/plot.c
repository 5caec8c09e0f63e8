/* plot.c — dots to cells. See plot.h.
 *
 * Braille: U+2800 plus one bit per dot; columns 0/1 and rows 0..3 map to
 * bits 0,1,2,6 / 3,4,5,7 (the Unicode braille layout). Main thread.
 */
#include "screen/plot.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const uint8_t braille_bit[2][4] = { { 0x01, 0x02, 0x04, 0x40 }, { 0x08, 0x10, 0x20, 0x80 } };

/* (int)lround(v): halves away from zero. A libm call per end of every line
 * was a fifth of the loss chart's cost; below 2^52 the truncation and the
 * difference are exact, so this rounds as lround does. */
static inline int px_round(double v)
{
    if (!(fabs(v) < 1e9)) return (int)lround(v);
    long i = (long)v;
    double f = v - (double)i;
    if (f >= 0.5)
        i++;
    else if (f <= -0.5)
        i--;
    return (int)i;
}

int plot_begin(Plot *p, Canvas *cv, int x, int y, int w, int h, bool braille)
{
    memset(p, 0, sizeof *p);
    if (w <= 0 || h <= 0) return -1;
    p->cv = cv;
    p->x = x;
    p->y = y;
    p->w = w;
    p->h = h;
    p->braille = braille;
    p->px_w = braille ? 2 * w : w;
    p->px_h = braille ? 4 * h : h;
    size_t n = (size_t)w * (size_t)h;
    p->dots = calloc(n, 1);
    p->style = calloc(n, 1);
    p->prio = calloc(n, 1);
    p->glyph = calloc(n, sizeof *p->glyph);
    if (!p->dots || !p->style || !p->prio || !p->glyph) {
        plot_end(p);
        return -1;
    }
    return 0;
}

/* Inlined: a frame's chart sets ~2,000 dots, a call each was a fifth of it. */
static inline __attribute__((always_inline)) void dot(Plot *p, int px, int py, int style, int layer, uint32_t glyph)
{
    if (px < 0 || py < 0 || px >= p->px_w || py >= p->px_h) return;
    int cx = p->braille ? px / 2 : px, cy = p->braille ? py / 4 : py;
    size_t i = (size_t)cy * (size_t)p->w + (size_t)cx;
    if (p->braille)
        p->dots[i] |= braille_bit[px % 2][py % 4];
    else
        p->dots[i] = 1;
    if (layer >= p->prio[i]) {
        p->prio[i] = (uint8_t)layer;
        p->style[i] = (uint8_t)style;
        p->glyph[i] = glyph;
    }
}

/* The dots from (ax, ay) to (bx, by), rounded already. */
static void segment(Plot *p, int ax, int ay, int bx, int by, int style, int layer, uint32_t glyph)
{
    /* clip far-off coordinates before stepping through them */
    if ((ax < 0 && bx < 0) || (ax >= p->px_w && bx >= p->px_w)) return;
    int dx = abs(bx - ax), dy = -abs(by - ay);
    int sx = ax < bx ? 1 : -1, sy = ay < by ? 1 : -1;
    int err = dx + dy;
    for (int guard = 0; guard < 100000; guard++) {
        dot(p, ax, ay, style, layer, glyph);
        if (ax == bx && ay == by) break;
        int e2 = 2 * err;
        if (e2 >= dy) {
            err += dy;
            ax += sx;
        }
        if (e2 <= dx) {
            err += dx;
            ay += sy;
        }
    }
}

void plot_line(Plot *p, double x0, double y0, double x1, double y1, int style, int layer, uint32_t glyph)
{
    if (!p->dots || !isfinite(x0) || !isfinite(y0) || !isfinite(x1) || !isfinite(y1)) return;
    segment(p, px_round(x0), px_round(y0), px_round(x1), px_round(y1), style, layer, glyph);
}

void plot_path(Plot *p, const double *x, const double *y, int n, int style, int layer, uint32_t glyph)
{
    if (!p->dots) return;
    int ax = 0, ay = 0;
    bool joined = false;
    for (int i = 0; i < n; i++) {
        if (!isfinite(x[i]) || !isfinite(y[i])) {
            joined = false; /* plot_line draws nothing to or from it */
            continue;
        }
        int bx = px_round(x[i]), by = px_round(y[i]);
        /* a segment that stays on the last dot: that dot is set already,
         * in this style and layer (or was off the plot) */
        if (!joined)
            segment(p, bx, by, bx, by, style, layer, glyph);
        else if (bx != ax || by != ay)
            segment(p, ax, ay, bx, by, style, layer, glyph);
        ax = bx;
        ay = by;
        joined = true;
    }
}

void plot_vspan(Plot *p, int x, double y0, double y1, int style, int layer, uint32_t glyph)
{
    if (!p->dots || !isfinite(y0) || !isfinite(y1)) return;
    int a = px_round(fmin(y0, y1)), b = px_round(fmax(y0, y1));
    if (a < 0) a = 0;
    if (b >= p->px_h) b = p->px_h - 1;
    for (int y = a; y <= b; y++) dot(p, x, y, style, layer, glyph);
}

void plot_end(Plot *p)
{
    if (p->dots && p->cv) {
        for (int cy = 0; cy < p->h; cy++)
            for (int cx = 0; cx < p->w; cx++) {
                size_t i = (size_t)cy * (size_t)p->w + (size_t)cx;
                if (!p->dots[i]) continue;
                uint32_t ch = p->braille ? 0x2800u + p->dots[i] : p->glyph[i];
                canvas_set(p->cv, p->y + cy, p->x + cx, ch, p->style[i]);
            }
    }
    free(p->dots);
    free(p->style);
    free(p->prio);
    free(p->glyph);
    p->dots = p->style = p->prio = NULL;
    p->glyph = NULL;
}
