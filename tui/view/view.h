/* view.h — the ways ddptop shows a job: the ncurses screen, the headless
 * progress printer and JSON lines. They read the Job model; none of them
 * changes it. Main thread only.
 */
#ifndef DDPTOP_VIEW_H
#define DDPTOP_VIEW_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "model/hang.h"
#include "model/job.h"
#include "model/stacktree.h"
#include "view/ui.h" /* ViewAction, the screen's state and keys */

/* ---- interactive screen (view_tui.c; drawing in draw_*.c) ---- */
typedef struct ViewTui ViewTui;

/* The screen's frame pace, for every loop that draws it (run, attach,
 * replay): at most 10 frames a second. Counters that change every step read
 * as well at 10 as at 15 a second, a step is on screen within ~100 ms, and a
 * frame is the largest cost that does not scale with messages
 * (docs/BENCHMARKS.md, issue 17; docs/DECISIONS.md). */
#define VIEW_FRAME_MS 100

/* Take over the terminal for a job of `world` ranks (UTF-8 when the locale
 * is, ASCII otherwise; colours unless NO_COLOR is set or the terminal has
 * none). When stdin or stdout is not a terminal (stdout sent to a file for
 * the summary), the screen goes to the controlling terminal, /dev/tty.
 * Returns 0 or -1 with err (no terminal at all: "not a terminal"; unknown
 * TERM). */
int view_tui_open(ViewTui **out, int world, char *err, size_t errlen);
/* The job's world changed before any rank said hello (a script that starts
 * its own ranks: tui/run/follow.c): the rank list starts again for `world`.
 * -1 when out of memory (the old list stays). */
int view_tui_set_world(ViewTui *v, int world);
/* Give the terminal back (endwin). Safe on NULL; sets *v = NULL. */
void view_tui_close(ViewTui **v);
/* Draw the whole screen. `status` is a one-line message from the run loop
 * (e.g. "stopping: ranks agree on the last step..."), may be NULL. */
void view_tui_draw(ViewTui *v, const Job *j, int64_t now_ns, const char *status);
/* Read pending keys and mouse events without blocking; view keys change
 * the screen's state. Returns the first action (NONE if none); the rest
 * stay queued. running: training is under way (q then asks first). */
ViewAction view_tui_poll_key(ViewTui *v, const Job *j, bool running);

/* After VIEW_ACT_FAULT: the fault picked in the f menu (UiFault) and the
 * rank it was opened on. */
int view_tui_fault_pick(const ViewTui *v, int *rank);
/* After VIEW_ACT_STACK: the rank whose Python stacks are asked for. */
int view_tui_stack_rank(const ViewTui *v);
/* Show (or refresh) rank's stacks page: head its first line, text the
 * dump (NULL: keep what it shows). */
void view_tui_show_stack(ViewTui *v, int rank, const char *head, const char *text);
/* The same page with more of the dump, only while it is open on rank's
 * stacks: false when the user closed it (or opened another rank's). */
bool view_tui_update_stack(ViewTui *v, int rank, const char *head, const char *text);
/* One line on the status line, for a few seconds (the answer to a key). */
void view_tui_note(ViewTui *v, const char *text);

/* Another screen's keys (`ddptop replay`, `ddptop attach`): mode picks
 * the key table's rows (keys.h) for keys, the ? box and the key line, and
 * hook, when not NULL, sees every key (ui.h codes, with the mode's
 * action for it) before the screen's own handling does; it returns
 * nonzero when it took the key (the poll then answers VIEW_ACT_REDRAW).
 * KEYS_LIVE and NULL: live mode again. */
typedef int (*ViewKeyHook)(void *ctx, int key, KeyAction act);
void view_tui_set_keys(ViewTui *v, KeysMode mode, ViewKeyHook hook, void *ctx);
/* The mode's toggle, for the key line's labels (replay: paused, so space
 * offers "play"). Read at each draw. */
void view_tui_set_keys_alt(ViewTui *v, bool alt);
/* Replay mode: the model is rebuilt from a recording, so the clocks are
 * the recording's: draw at its monotonic now_ns and its wall-clock
 * wall_ns (view_tui_draw uses the real wall clock). */
void view_tui_draw_at(ViewTui *v, const Job *j, int64_t now_ns, int64_t wall_ns, const char *status);

/* ---- headless (view_headless.c) ---- */
typedef struct {
    FILE *out;
    bool json;             /* one JSON object per event instead of text */
    int64_t last_print_ns; /* monotonic; progress lines once a second */
    uint64_t ev_printed;   /* job events already printed (compared with ev_total) */
    int evals_printed;     /* job evals already printed (compared with n_evals) */
} ViewHeadless;

void view_headless_init(ViewHeadless *h, FILE *out, bool json);
/* Print new events, and a progress line when a second has passed. */
void view_headless_tick(ViewHeadless *h, const Job *j, int64_t now_ns);
/* Final summary: one line per rank and the job's verdict (pending events
 * are left to view_headless_tick). */
void view_headless_summary(ViewHeadless *h, const Job *j, int64_t now_ns);
/* JSON mode: one {"k":"hang",...} object for a new hang verdict (text mode
 * prints nothing: the verdict is also an event line). */
void view_headless_hang(ViewHeadless *h, const Job *j, const HangReport *hr, int64_t now_ns);
/* JSON mode: one {"k":"stacks","t":S,"tree":{...}} object, every rank's
 * stacks merged (stacktree_json's object); text mode prints nothing. */
void view_headless_stacks(ViewHeadless *h, const Job *j, const StackTree *t, int64_t now_ns);

#endif
