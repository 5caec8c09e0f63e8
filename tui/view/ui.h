/* ui.h — the screen's state and what keys and mouse clicks do to it:
 * focus, zoom, hidden panels, sort order, log scale, selection, scrolling,
 * overlays (help, a rank's detail, the quit question). No curses: the view
 * translates terminal keys into the codes below, and tests press keys here.
 *
 * Owns: a Ui and its display order array. Keys that act on the job come
 * back as a ViewAction for the run loop. Main thread.
 */
#ifndef DDPTOP_UI_H
#define DDPTOP_UI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/job.h"
#include "view/keys.h" /* the key table: which keys do what, per mode */

/* What a key press asks the run loop to do. */
typedef enum {
    VIEW_ACT_NONE = 0,
    VIEW_ACT_CKPT,    /* c */
    VIEW_ACT_DESTROY, /* d: clean destroy (stop at an agreed step) */
    VIEW_ACT_QUIT,    /* q (confirmed while training): destroy first, then leave */
    VIEW_ACT_REDRAW,  /* the screen changed: resize, Ctrl-L, any view key */
    VIEW_ACT_PAUSE,   /* p: pause, or resume when paused */
    VIEW_ACT_ABORT,   /* a: abort now: SIGTERM, then SIGKILL (no clean stop) */
    VIEW_ACT_FAULT,   /* f menu: inject Ui.fault_pick on Ui.fault_rank */
    VIEW_ACT_STACK,   /* w: ask rank Ui.stack_rank for its Python stacks (ui_stack_show answers) */
    VIEW_ACT_TREE,    /* t: every rank's stacks merged (ui_stack_show with VIEW_STACK_TREE answers) */
    VIEW_ACT_REPORT,  /* r: a report on disk now (every rank's stacks, the diagnosis; tui/run/report.c) */
} ViewAction;

/* The f menu's faults, in menu order (tui/run/commands.c turns them into transport/wire/fault.h
 * Faults: the first three on the selected rank, the rest on every rank). */
typedef enum {
    UI_FAULT_KILL = 0,
    UI_FAULT_STALL,
    UI_FAULT_SLOW,
    UI_FAULT_SKIP_SET_EPOCH,
    UI_FAULT_UNSAFE_STOP,
    UI_FAULT_NO_BARRIER,
    UI_FAULT__COUNT
} UiFault;
/* The f menu slows a rank by this much per step. */
#define UI_FAULT_SLOW_MS 50

/* The panels, numbered as the zoom keys 1-6. */
typedef enum {
    PANEL_HEADER = 0,
    PANEL_RANKS,
    PANEL_LOSS,
    PANEL_COMM,
    PANEL_SAMPLER,
    PANEL_EVENTS,
    PANEL__COUNT
} PanelId;

typedef enum { UI_NO_OVERLAY = 0, UI_HELP, UI_DETAIL, UI_CONFIRM_QUIT, UI_FAULT_MENU, UI_STACK } UiOverlay;

/* Keys that are not characters (above Unicode, so they never clash). */
enum {
    UI_KEY_UP = 0x110000,
    UI_KEY_DOWN,
    UI_KEY_LEFT,
    UI_KEY_RIGHT,
    UI_KEY_PGUP,
    UI_KEY_PGDN,
    UI_KEY_HOME,
    UI_KEY_END,
    UI_KEY_TAB,
    UI_KEY_BTAB,
    UI_KEY_ENTER,
    UI_KEY_ESC,
    UI_KEY_BACKSPACE,
    UI_KEY_RESIZE,
    UI_KEY_REDRAW,
};
/* Mouse events for ui_mouse. */
typedef enum { UI_MOUSE_CLICK = 1, UI_MOUSE_DOUBLE, UI_MOUSE_WHEEL_UP, UI_MOUSE_WHEEL_DOWN } UiMouse;

typedef struct {
    int x, y, w, h;
} UiRect; /* w == 0: not on screen */

typedef struct {
    int world;
    PanelId focus;
    int zoom; /* -1, or the PanelId shown alone */
    bool hidden[PANEL__COUNT];
    JobSort sort;
    bool sort_desc;
    bool log_scale;
    int sel;             /* selected rank */
    int ranks_top;       /* position in order[] of the first listed rank */
    bool to_top;         /* next draw: list from the top, select the first */
    int events_back;     /* events scrolled back from the newest */
    int comm_top;        /* recent collectives scrolled */
    int64_t strip_first; /* first dataset index in the sampler strip */
    UiOverlay overlay;
    int detail_rank;
    int fault_item; /* f menu: the highlighted line (UiFault) */
    int fault_rank; /* f menu: the rank it acts on (the selection when opened) */
    int fault_pick; /* VIEW_ACT_FAULT: the fault chosen (UiFault) */
    /* w: a rank's Python stacks, a page like the detail (ui_stack_show) */
    int stack_rank;       /* the rank asked (VIEW_ACT_STACK) or shown; UI_STACK_TREE: every rank's, merged (t) */
    char stack_head[256]; /* what the page says first: whose, when, or why none yet */
    char *stack;          /* the dump's lines (heap, '\n' between), NULL: none yet */
    int stack_lines;      /* lines in it */
    int stack_top;        /* first line shown */
    int stack_rows;       /* lines the last draw showed (for paging) */
    bool mouse;           /* report mouse events (off: the terminal selects text) */
    char note[160];       /* the outcome of the last view key, for the status line */
    KeysMode keys_mode;   /* whose keys: live (0), replay, attach (keys.h) */
    bool keys_alt;        /* replay: paused, so the key line offers "play" */
    int64_t note_ns;      /* when the draw first showed it (0: not yet) */
    /* ?: the key table's rows; when they do not fit, one column scrolled
     * (help_lines and help_rows are written by each draw) */
    int help_top;   /* first line shown */
    int help_lines; /* lines the help is laid out in (one column) */
    int help_rows;  /* lines shown: fewer than help_lines, the help scrolls */
    /* written by each draw: what is where, for paging keys and mouse hits */
    UiRect rect[PANEL__COUNT];
    int *order;            /* [world] ranks in display order */
    int list_y, list_rows; /* screen row of the first listed rank; rows listed */
    /* a big job's rank map: its cells' top left, width, rows, ranks a cell
     * (map_rows 0: no map on screen) */
    int map_x, map_y, map_w, map_rows, map_per_cell;
    int strip_cells;       /* indices one view of the strip holds */
    int events_rows, comm_rows;
} Ui;

int ui_init(Ui *u, int world);
void ui_done(Ui *u);
/* A key: a character, or UI_KEY_*, as the key table binds it in
 * u->keys_mode. running: training is under way, so q asks before it
 * destroys the job. */
ViewAction ui_key(Ui *u, int key, const Job *j, bool running);
/* A mouse event at screen cell (x, y). */
ViewAction ui_mouse(Ui *u, UiMouse kind, int x, int y, const Job *j);
/* The stacks page's rank when it shows every rank's stacks merged (t). */
#define UI_STACK_TREE (-1)

/* Open (or refresh) the stacks page of rank `rank`: head is its first line
 * ("rank 1 (pid 4711): 3 threads, 12:00:01"), text the dump (copied; NULL
 * keeps what is shown, e.g. while waiting for it). */
void ui_stack_show(Ui *u, int rank, const char *head, const char *text);
/* The f menu's key for a fault ('k', ...) and its line, for rank `rank`. */
int ui_fault_key(UiFault f);
void ui_fault_label(UiFault f, int rank, char *buf, size_t len);
/* "ranks", "loss", ... */
const char *ui_panel_name(PanelId p);
/* Shown in the current layout (not hidden; the zoomed one when zoomed). */
bool ui_panel_visible(const Ui *u, PanelId p);
/* Keep the selection inside the list's visible rows (after a draw changed
 * how many rows there are). */
void ui_clamp(Ui *u);

#endif
