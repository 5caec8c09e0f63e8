/* tty_frame.h — a frame's changed cells written to the terminal by ddptop
 * itself, in one write(2): a cursor move per span of changed cells, each
 * style's attributes and colours as the terminal's terminfo entry spells
 * them (sgr0, op, bold, dim, rev, smul, setaf, setab), UTF-8 text.
 *
 * Why: ncurses's doupdate compares every changed line of its own copy of
 * the screen cell by cell three times and prices half a dozen ways to move
 * the cursor for each span (a tparm each), ~1.8M instructions a frame at
 * 64 ranks for ~1.3 KB of output, half of a frame's cost. The view already
 * knows which cells changed (its row diff).
 *
 * What stays ncurses's: the terminal's modes, keys and mouse, the first
 * frame and every full one (a new size, Ctrl-L), and its copy of the
 * screen: the view hands it the same cells (wnoutrefresh, no doupdate), so
 * a repaint ncurses does itself (resuming after Ctrl-Z) shows this frame.
 * After the write the terminal is back where ncurses believes it is: normal
 * attributes, the cursor at curscr's position.
 *
 * Owns: the style strings and the output buffer. Main thread.
 */
#ifndef DDPTOP_TTY_FRAME_H
#define DDPTOP_TTY_FRAME_H

#include <stdbool.h>
#include <stddef.h>

#include "screen/canvas.h"

typedef struct {
    bool ok;                /* the terminal has every capability needed; else ncurses writes frames */
    bool utf8;              /* cells as UTF-8, else bytes (the canvas is ASCII then) */
    char *style[ST__COUNT]; /* from normal attributes: sgr0 [op] then the style's own */
    size_t style_len[ST__COUNT];
    const char *cup; /* cursor_address */
    bool cup_ansi;   /* cup is "\E[%i%p1%d;%p2%dH": formatted here, without tparm */
    int cur_style;   /* the style the terminal is in within a frame */
    bool failed;     /* out of memory within this frame: some of it is missing */
    char *buf;
    size_t len, cap;
} TtyFrame;

/* Build the styles' strings from the current terminal (set_term'd) and
 * attrs[ST__COUNT], the curses attributes (colour pair included) the view
 * gives each style; color: the view started colours. t->ok stays false
 * (ncurses then writes every frame) when a capability is missing: cursor
 * addressing, sgr0, an attribute a style uses, setaf/setab for a colour. */
void tty_frame_init(TtyFrame *t, const unsigned long *attrs, bool utf8, bool color);
void tty_frame_done(TtyFrame *t);
/* Start a frame (empty the buffer). */
void tty_frame_begin(TtyFrame *t);
/* Cells [0, n) of a row segment at (y, x): written from (y, x) on, the
 * right halves of wide characters (ch 0) skipped. */
void tty_frame_cells(TtyFrame *t, int y, int x, const Cell *cells, int n);
/* Finish: normal attributes, the cursor to (cur_y, cur_x) (where ncurses
 * believes it is), and one write of the whole to fd. Returns 0, or -1 when
 * the terminal may not show the frame (out of memory, the write failed):
 * the caller repaints everything next time. */
int tty_frame_end(TtyFrame *t, int fd, int cur_y, int cur_x);

#endif
