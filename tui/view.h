/* view.h — the ways ddptop shows a job: the ncurses screen, the headless
 * progress printer and JSON lines. They read the Job model; none of them
 * changes it. Main thread only.
 */
#ifndef DDPTOP_VIEW_H
#define DDPTOP_VIEW_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "job.h"

/* What a key press asks the run loop to do. */
typedef enum {
    VIEW_ACT_NONE = 0,
    VIEW_ACT_CKPT,      /* c */
    VIEW_ACT_DESTROY,   /* d: clean destroy (stop at an agreed step) */
    VIEW_ACT_QUIT,      /* q: destroy first, then leave */
    VIEW_ACT_REDRAW,    /* resize, Ctrl-L */
} ViewAction;

/* ---- interactive screen (view_tui.c) ---- */
typedef struct ViewTui ViewTui;

/* Take over the terminal (UTF-8 when the locale is; ASCII otherwise; colours
 * unless NO_COLOR or the terminal has none). When stdin or stdout is not a
 * terminal (stdout sent to a file for the summary), the screen goes to the
 * controlling terminal, /dev/tty. Returns 0 or -1 with err (no terminal at
 * all: "not a terminal"; unknown TERM). */
int view_tui_open(ViewTui **out, char *err, size_t errlen);
/* Give the terminal back (endwin). Safe on NULL; sets *v = NULL. */
void view_tui_close(ViewTui **v);
/* Draw the whole screen. `status` is a one-line message from the run loop
 * (e.g. "stop requested: ranks agree on the stop step..."), may be NULL. */
void view_tui_draw(ViewTui *v, const Job *j, int64_t now_ns, const char *status);
/* Read pending keys without blocking; returns the first action (NONE if none). */
ViewAction view_tui_poll_key(ViewTui *v);

/* ---- headless (view_headless.c) ---- */
typedef struct {
    FILE *out;
    bool json;              /* one JSON object per event instead of text */
    int64_t last_print_ns;  /* monotonic; progress lines once a second */
    uint64_t ev_printed;    /* job events already printed (compared with ev_total) */
} ViewHeadless;

void view_headless_init(ViewHeadless *h, FILE *out, bool json);
/* Print new events, and a progress line when a second has passed. */
void view_headless_tick(ViewHeadless *h, const Job *j, int64_t now_ns);
/* Final summary: one line per rank and the job's verdict (pending events
 * are left to view_headless_tick). */
void view_headless_summary(ViewHeadless *h, const Job *j, int64_t now_ns);

#endif
