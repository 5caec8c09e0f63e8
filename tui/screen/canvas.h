/* canvas.h — a screen's worth of cells (a character and a style each) that
 * the panels draw into before anything touches the terminal. The ncurses
 * view copies a finished canvas to the screen; tests read it as text.
 *
 * Owns: the cell array. No curses, no locale changes (text is decoded with
 * the caller's locale: UTF-8 when the view said so, else ASCII only).
 * Main thread.
 */
#ifndef DDPTOP_CANVAS_H
#define DDPTOP_CANVAS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What a cell means, not how it looks: the terminal view maps each to
 * colours, or to bold/reverse/underline/dim without colours. */
typedef enum {
    ST_NORMAL = 0,
    ST_DIM,
    ST_BOLD,
    ST_LABEL,      /* a field name */
    ST_TITLE,      /* title bar, table heads */
    ST_RULE,       /* a panel's title line */
    ST_RULE_FOCUS, /* the focused panel's title line */
    ST_BADGE_INFO,
    ST_BADGE_OK,
    ST_BADGE_WARN,
    ST_BADGE_ERR,
    ST_OK,
    ST_WARN,
    ST_ERR,
    ST_ROW_WARN, /* a stale or hung rank's row */
    ST_ROW_ERR,  /* a failed rank's row */
    ST_SEL,      /* the selected row */
    ST_KEY,      /* a key in the hints */
    ST_MEAN,
    ST_BAND,
    ST_EVAL,
    ST_AXIS,
    ST_SERIES0, /* eight distinct series colours follow */
    ST__COUNT = ST_SERIES0 + 8
} Style;

#define CANVAS_SERIES 8
/* Style of series i (ranks cycle through the eight). */
#define ST_SERIES(i)  ((Style)(ST_SERIES0 + ((i) % CANVAS_SERIES)))

typedef struct {
    uint32_t ch; /* Unicode code point; 0 on the right half of a wide character */
    uint8_t style;
    uint8_t zero_[3]; /* never set, so always 0: equal rows are equal bytes (memcmp) */
} Cell;

/* A character decoded before: its bytes (packed), code point and columns. */
typedef struct {
    uint32_t bytes, cp;
    uint8_t len, cols;
} CanvasGlyph;

#define CANVAS_GLYPHS 16

typedef struct {
    int w, h;
    bool utf8;   /* else anything outside printable ASCII becomes '?' */
    Cell *cells; /* [h][w] */
    size_t cap;
    /* the last multi-byte characters mbrtowc and wcwidth decoded (rules,
     * plot blocks, ellipses: the same few a frame), by their bytes;
     * emptied by canvas_reset */
    CanvasGlyph glyph[CANVAS_GLYPHS];
} Canvas;

void canvas_init(Canvas *c, bool utf8);
void canvas_done(Canvas *c);
/* Size the canvas (keeps the allocation when it fits) and blank it.
 * Returns 0 or -1 out of memory. */
int canvas_reset(Canvas *c, int w, int h);
/* Write UTF-8 text at (y, x), at most maxw columns and never past the right
 * edge. Invalid bytes and control characters become '?' (newline and tab a
 * space); combining marks are dropped. Text cut where a letter or digit is
 * left out loses the word it would split and ends with an ellipsis ("…",
 * '~' without UTF-8): "waiting for hello" in 14 columns is "waiting for…",
 * never "waiting for he"; lines, bars and plots are cut plainly. The one
 * truncation of the screen: panels cut text by giving it a width. Returns
 * the columns written. */
int canvas_put(Canvas *c, int y, int x, int maxw, int style, const char *s);
/* Like canvas_put, with a printf format. */
int canvas_printf(Canvas *c, int y, int x, int maxw, int style, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* canvas_put(c, y, x + i, 1, style, s) for i in [0, n): a rule of n copies
 * of one character along row y, decoded once. Returns the columns written. */
int canvas_repeat(Canvas *c, int y, int x, int n, int style, const char *s);
/* True when s is one character of one column, as canvas_put decodes it:
 * its code point (out), for canvas_set to write it many times over without
 * decoding it each time (a map's cells, a plot's dots). */
bool canvas_char(const Canvas *c, const char *s, uint32_t *cp);
/* One code point (width 1) at (y, x). */
void canvas_set(Canvas *c, int y, int x, uint32_t ch, int style);
/* Blank w cells from (y, x) in a style (bars, selections). */
void canvas_fill(Canvas *c, int y, int x, int w, int style);
/* Change the style of w cells, keeping their characters. */
void canvas_restyle(Canvas *c, int y, int x, int w, int style);
const Cell *canvas_at(const Canvas *c, int y, int x);
/* Row y as UTF-8 (trailing blanks kept) into buf (out). */
void canvas_row_text(const Canvas *c, int y, char *buf, size_t n);
/* Display columns of UTF-8 text, as canvas_put would draw it. */
int canvas_text_width(const Canvas *c, const char *s);

#endif
