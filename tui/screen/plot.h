/* plot.h — lines and bands on a grid of terminal cells: braille dots (2x4
 * per cell, one colour per cell) when the terminal has UTF-8 and colours,
 * or one glyph per cell ('0'..'7' per series, ':' band, '*' mean) when it
 * has not, so lines stay apart without colour.
 *
 * Owns: its scratch buffers. Draws onto a Canvas; no curses. Main thread.
 */
#ifndef DDPTOP_PLOT_H
#define DDPTOP_PLOT_H

#include <stdbool.h>
#include <stdint.h>

#include "screen/canvas.h"

typedef struct {
    Canvas *cv;
    int x, y, w, h; /* cell rectangle on the canvas */
    bool braille;
    int px_w, px_h;  /* dot resolution: 2w x 4h, or w x h */
    uint8_t *dots;   /* [w*h] braille bits */
    uint8_t *style;  /* [w*h] style of the top layer */
    uint8_t *prio;   /* [w*h] layer that owns the cell */
    uint32_t *glyph; /* [w*h] glyph-mode character */
} Plot;

/* Layers: a higher one takes a shared cell's colour (and glyph). */
enum { PLOT_BAND = 1, PLOT_LINE = 2, PLOT_MEAN = 3, PLOT_MARK = 4 };

int plot_begin(Plot *p, Canvas *cv, int x, int y, int w, int h, bool braille);
/* A line between two dot positions (x right, y down), in a style and
 * layer; glyph is the character used in glyph mode. */
void plot_line(Plot *p, double x0, double y0, double x1, double y1, int style, int layer, uint32_t glyph);
/* plot_line from each point to the next, a dot for a point that follows
 * none (the first, or one after a point that is not finite): the same dots,
 * each point rounded once and a line that stays on one dot not stepped. */
void plot_path(Plot *p, const double *x, const double *y, int n, int style, int layer, uint32_t glyph);
/* Dots from y0 to y1 in column x (a band's slice). */
void plot_vspan(Plot *p, int x, double y0, double y1, int style, int layer, uint32_t glyph);
/* Write the cells that have anything in them onto the canvas, free scratch. */
void plot_end(Plot *p);

#endif
