/* view_tui.c — the interactive ncurses screen: opens and restores the
 * terminal, turns terminal keys and mouse events into ui.h's codes, and
 * copies a drawn Canvas (draw.h) to the screen.
 *
 * Owns: the curses SCREEN, its colours and the mouse mask, the Ui state
 * and the canvas of the screen. Reads the Job, never changes it. Main
 * thread only; never called from a signal handler (resize arrives as
 * KEY_RESIZE through view_tui_poll_key).
 *
 * A frame is: canvas (every cell decided in memory) -> the spans of cells
 * that differ from the last frame -> one write of them to the terminal
 * (tty_frame.h), the same cells handed to curses's copy of the screen
 * (wnoutrefresh, no doupdate: its own repaints stay right); an unchanged
 * row costs a comparison. The first frame, a new size and Ctrl-L go through
 * curses's refresh, as do all frames on a terminal tty_frame cannot drive.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#ifndef _XOPEN_SOURCE_EXTENDED
#define _XOPEN_SOURCE_EXTENDED 1
#endif
#ifndef NCURSES_WIDECHAR
#define NCURSES_WIDECHAR 1
#endif
#include "view/view.h"

#include <fcntl.h>
#include <stdio.h>
#include <langinfo.h>
#include <ncurses.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>

#include "screen/canvas.h"
#include "screen/draw.h"
#include "screen/tty_frame.h"
#include "view/keys.h"
#include "base/clock.h"

enum {
    CP_LABEL = 1,
    CP_TITLE,
    CP_RULE,
    CP_OK,
    CP_WARN,
    CP_ERR,
    CP_ROW_WARN,
    CP_ROW_ERR,
    CP_BADGE_INFO,
    CP_BADGE_OK,
    CP_BADGE_WARN,
    CP_BADGE_ERR,
    CP_BAND,
    CP_EVAL,
    CP_SERIES0, /* eight follow */
};

struct ViewTui {
    SCREEN *scr;
    FILE *tty; /* /dev/tty when stdin/stdout are not the terminal */
    bool utf8, color;
    bool clear_next;        /* Ctrl-L: repaint everything next frame */
    bool mouse_on;          /* the mask in force */
    attr_t attr[ST__COUNT]; /* style -> curses attributes */
    Ui ui;
    Canvas cv;
    Canvas prev;       /* what the terminal shows now */
    TtyFrame out;      /* frames written by ddptop (tty_frame.h), when the terminal allows */
    int out_fd;        /* the terminal ncurses writes to */
    bool direct;       /* this frame's cells go to out (and to ncurses's copy, unrefreshed) */
    bool curscr_stale; /* frames went past ncurses's refresh: its idea of the screen is old */
    /* another mode's keys (view_tui_set_keys): its hook sees them first */
    ViewKeyHook hook;
    void *hook_ctx;
};

static void set_err(char *err, size_t errlen, const char *msg)
{
    if (err && errlen) snprintf(err, errlen, "%s", msg);
}

/* Colours when the terminal has them; otherwise bold, reverse, underline
 * and dim carry the same meaning. */
static void setup_styles(ViewTui *v)
{
    attr_t *a = v->attr;
    for (int i = 0; i < ST__COUNT; i++) a[i] = A_NORMAL;
    a[ST_DIM] = A_DIM;
    a[ST_BOLD] = A_BOLD;
    a[ST_SEL] = A_REVERSE;
    a[ST_KEY] = A_REVERSE | A_BOLD;
    a[ST_AXIS] = A_DIM;
    if (!v->color) {
        a[ST_TITLE] = A_REVERSE;
        a[ST_RULE_FOCUS] = A_REVERSE | A_BOLD;
        a[ST_BADGE_INFO] = a[ST_BADGE_OK] = a[ST_BADGE_WARN] = A_REVERSE | A_BOLD;
        a[ST_BADGE_ERR] = A_REVERSE | A_BOLD | A_UNDERLINE;
        a[ST_WARN] = A_BOLD;
        a[ST_ERR] = A_BOLD | A_UNDERLINE;
        a[ST_ROW_WARN] = A_BOLD | A_UNDERLINE;
        a[ST_ROW_ERR] = A_REVERSE | A_BOLD;
        a[ST_MEAN] = A_BOLD;
        a[ST_BAND] = A_DIM;
        a[ST_EVAL] = A_BOLD;
        return;
    }
    start_color();
    short bg = use_default_colors() == OK ? -1 : COLOR_BLACK;
    init_pair(CP_LABEL, COLOR_CYAN, bg);
    init_pair(CP_TITLE, COLOR_BLACK, COLOR_CYAN);
    init_pair(CP_RULE, COLOR_CYAN, bg);
    init_pair(CP_OK, COLOR_GREEN, bg);
    init_pair(CP_WARN, COLOR_YELLOW, bg);
    init_pair(CP_ERR, COLOR_RED, bg);
    init_pair(CP_ROW_WARN, COLOR_BLACK, COLOR_YELLOW);
    init_pair(CP_ROW_ERR, COLOR_WHITE, COLOR_RED);
    init_pair(CP_BADGE_INFO, COLOR_WHITE, COLOR_BLUE);
    init_pair(CP_BADGE_OK, COLOR_BLACK, COLOR_GREEN);
    init_pair(CP_BADGE_WARN, COLOR_BLACK, COLOR_YELLOW);
    init_pair(CP_BADGE_ERR, COLOR_WHITE, COLOR_RED);
    init_pair(CP_BAND, COLOR_BLUE, bg);
    init_pair(CP_EVAL, COLOR_MAGENTA, bg);
    /* eight series colours; the last two use the 256-colour palette when
     * there is one, else bold variants */
    short series[8] = { COLOR_CYAN, COLOR_YELLOW, COLOR_MAGENTA, COLOR_GREEN,
                        COLOR_BLUE, COLOR_RED,    COLOR_WHITE,   COLOR_GREEN };
    if (COLORS >= 256) {
        series[6] = 208; /* orange */
        series[7] = 141; /* violet */
    }
    for (int i = 0; i < 8; i++) {
        init_pair((short)(CP_SERIES0 + i), series[i], bg);
        a[ST_SERIES0 + i] = COLOR_PAIR(CP_SERIES0 + i) | (COLORS < 256 && i >= 6 ? A_BOLD : 0);
    }
    a[ST_LABEL] = COLOR_PAIR(CP_LABEL);
    a[ST_TITLE] = COLOR_PAIR(CP_TITLE);
    a[ST_RULE] = COLOR_PAIR(CP_RULE);
    a[ST_RULE_FOCUS] = COLOR_PAIR(CP_RULE) | A_BOLD | A_REVERSE;
    a[ST_BADGE_INFO] = COLOR_PAIR(CP_BADGE_INFO) | A_BOLD;
    a[ST_BADGE_OK] = COLOR_PAIR(CP_BADGE_OK) | A_BOLD;
    a[ST_BADGE_WARN] = COLOR_PAIR(CP_BADGE_WARN) | A_BOLD;
    a[ST_BADGE_ERR] = COLOR_PAIR(CP_BADGE_ERR) | A_BOLD;
    a[ST_OK] = COLOR_PAIR(CP_OK);
    a[ST_WARN] = COLOR_PAIR(CP_WARN) | A_BOLD;
    a[ST_ERR] = COLOR_PAIR(CP_ERR) | A_BOLD;
    a[ST_ROW_WARN] = COLOR_PAIR(CP_ROW_WARN);
    a[ST_ROW_ERR] = COLOR_PAIR(CP_ROW_ERR) | A_BOLD;
    a[ST_MEAN] = A_BOLD;
    a[ST_BAND] = COLOR_PAIR(CP_BAND);
    a[ST_EVAL] = COLOR_PAIR(CP_EVAL) | A_BOLD;
}

static void apply_mouse(ViewTui *v)
{
    if (v->ui.mouse == v->mouse_on) return;
    mmask_t m = 0;
    if (v->ui.mouse) {
        m = BUTTON1_CLICKED | BUTTON1_DOUBLE_CLICKED | BUTTON4_PRESSED;
#ifdef BUTTON5_PRESSED
        m |= BUTTON5_PRESSED;
#endif
    }
    mousemask(m, NULL);
    v->mouse_on = v->ui.mouse;
}

int view_tui_open(ViewTui **out, int world, char *err, size_t errlen)
{
    *out = NULL;
    const char *term = getenv("TERM");
    if (!term || !*term) {
        set_err(err, errlen, "TERM is not set");
        return -1;
    }
    ViewTui *v = calloc(1, sizeof *v);
    if (!v || ui_init(&v->ui, world)) {
        free(v);
        set_err(err, errlen, "out of memory");
        return -1;
    }
    FILE *in = stdin, *outf = stdout;
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
        /* stdout sent to a file (for the summary) or stdin piped: draw on
         * the controlling terminal, as fzf and less do; none means no screen */
        int fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
        v->tty = fd >= 0 ? fdopen(fd, "r+") : NULL;
        if (!v->tty) {
            if (fd >= 0) close(fd);
            set_err(err, errlen, "not a terminal");
            ui_done(&v->ui);
            free(v);
            return -1;
        }
        in = outf = v->tty;
    }
    /* newterm, not initscr: initscr exits the process on an unknown TERM */
    v->scr = newterm(NULL, outf, in);
    if (!v->scr) {
        if (err && errlen) snprintf(err, errlen, "unknown terminal type '%.40s'", term);
        if (v->tty) fclose(v->tty);
        ui_done(&v->ui);
        free(v);
        return -1;
    }
    set_term(v->scr);
    /* A terminal that cannot place the cursor (TERM=dumb, emacs' shell):
     * ncurses "draws" there by writing every frame one after the other,
     * a scroll of garbage; say so and point at --headless instead. */
    const char *cup = tigetstr("cup");
    if (!cup || cup == (char *)-1) {
        if (err && errlen) snprintf(err, errlen, "terminal type '%.40s' cannot place the cursor", term);
        endwin();
        delscreen(v->scr);
        if (v->tty) fclose(v->tty);
        ui_done(&v->ui);
        free(v);
        return -1;
    }
    /* ncurses 6.4 flushes after every cursor move (a write(2) each, ~100 a
     * frame at 64 ranks) until the screen has once been suspended and
     * resumed: its "not initialized yet" test in mvcur. One endwin and
     * refresh here, before anything is drawn, leaves it buffering a frame
     * into one write (docs/BENCHMARKS.md, "Frames in one write"). */
    endwin();
    refresh();
    const char *cs = nl_langinfo(CODESET);
    v->utf8 = cs && (strcasecmp(cs, "UTF-8") == 0 || strcasecmp(cs, "utf8") == 0);
    const char *nc = getenv("NO_COLOR");
    v->color = !(nc && *nc) && has_colors();
    setup_styles(v);
    unsigned long attrs[ST__COUNT];
    for (int i = 0; i < ST__COUNT; i++) attrs[i] = v->attr[i];
    tty_frame_init(&v->out, attrs, v->utf8, v->color);
    v->out_fd = fileno(outf);
    canvas_init(&v->cv, v->utf8);
    canvas_init(&v->prev, v->utf8);
    noecho();
    cbreak();
    keypad(stdscr, TRUE);
    nodelay(stdscr, TRUE);
    set_escdelay(25); /* Esc closes things: do not wait a second for a sequence */
    curs_set(0);      /* some terminals cannot: not an error */
    typeahead(-1);    /* keys are read by the loop: no poll in every refresh */
    mouseinterval(200);
    v->mouse_on = false;
    apply_mouse(v);
    *out = v;
    return 0;
}

int view_tui_set_world(ViewTui *v, int world)
{
    Ui fresh;
    if (ui_init(&fresh, world)) {
        ui_done(&fresh);
        return -1;
    }
    ui_done(&v->ui);
    v->ui = fresh;
    v->clear_next = true;
    return 0;
}

void view_tui_close(ViewTui **pv)
{
    if (!pv || !*pv) return;
    ViewTui *v = *pv;
    set_term(v->scr);
    mousemask(0, NULL);
    curs_set(1);
    endwin();
    delscreen(v->scr);
    if (v->tty) fclose(v->tty);
    canvas_done(&v->cv);
    canvas_done(&v->prev);
    tty_frame_done(&v->out);
    ui_done(&v->ui);
    free(v);
    *pv = NULL;
}

static int translate(int ch)
{
    switch (ch) {
    case KEY_UP: return UI_KEY_UP;
    case KEY_DOWN: return UI_KEY_DOWN;
    case KEY_LEFT: return UI_KEY_LEFT;
    case KEY_RIGHT: return UI_KEY_RIGHT;
    case KEY_PPAGE: return UI_KEY_PGUP;
    case KEY_NPAGE: return UI_KEY_PGDN;
    case KEY_HOME: return UI_KEY_HOME;
    case KEY_END: return UI_KEY_END;
    case '\t': return UI_KEY_TAB;
    case KEY_BTAB: return UI_KEY_BTAB;
    case '\n':
    case '\r':
    case KEY_ENTER: return UI_KEY_ENTER;
    case 27: return UI_KEY_ESC;
    case KEY_BACKSPACE:
    case 127:
    case 8: return UI_KEY_BACKSPACE;
    case KEY_RESIZE: return UI_KEY_RESIZE;
    case 'L' & 0x1f: return UI_KEY_REDRAW;
    default: return ch;
    }
}

static ViewAction on_mouse(ViewTui *v, const Job *j)
{
    MEVENT ev;
    if (getmouse(&ev) != OK) return VIEW_ACT_NONE;
    UiMouse kind;
    if (ev.bstate & BUTTON1_DOUBLE_CLICKED)
        kind = UI_MOUSE_DOUBLE;
    else if (ev.bstate & BUTTON1_CLICKED)
        kind = UI_MOUSE_CLICK;
    else if (ev.bstate & BUTTON4_PRESSED)
        kind = UI_MOUSE_WHEEL_UP;
#ifdef BUTTON5_PRESSED
    else if (ev.bstate & BUTTON5_PRESSED)
        kind = UI_MOUSE_WHEEL_DOWN;
#endif
    else
        return VIEW_ACT_NONE;
    return ui_mouse(&v->ui, kind, ev.x, ev.y, j);
}

ViewAction view_tui_poll_key(ViewTui *v, const Job *j, bool running)
{
    if (!v) return VIEW_ACT_NONE;
    set_term(v->scr);
    int ch;
    while ((ch = getch()) != ERR) {
        ViewAction a;
        if (ch == KEY_MOUSE) {
            a = on_mouse(v, j);
        } else {
            int key = translate(ch);
            if (key == UI_KEY_REDRAW) v->clear_next = true;
            if (v->hook && key != UI_KEY_RESIZE && key != UI_KEY_REDRAW &&
                v->hook(v->hook_ctx, key, keys_action(v->ui.keys_mode, key))) {
                /* a new key: the old answer goes (ui_key's rule), or a
                 * note of r, w or t would hide what the hook says */
                v->ui.note[0] = '\0';
                v->ui.note_ns = 0;
                return VIEW_ACT_REDRAW;
            }
            a = ui_key(&v->ui, key, j, running);
        }
        apply_mouse(v);
        if (a != VIEW_ACT_NONE) return a;
    }
    return VIEW_ACT_NONE;
}

int view_tui_fault_pick(const ViewTui *v, int *rank)
{
    if (rank) *rank = v ? v->ui.fault_rank : 0;
    return v ? v->ui.fault_pick : 0;
}

int view_tui_stack_rank(const ViewTui *v) { return v ? v->ui.stack_rank : 0; }

void view_tui_show_stack(ViewTui *v, int rank, const char *head, const char *text)
{
    if (v) ui_stack_show(&v->ui, rank, head, text);
}

bool view_tui_update_stack(ViewTui *v, int rank, const char *head, const char *text)
{
    if (!v || v->ui.overlay != UI_STACK || v->ui.stack_rank != rank) return false;
    ui_stack_show(&v->ui, rank, head, text);
    return true;
}

void view_tui_note(ViewTui *v, const char *text)
{
    if (!v) return;
    snprintf(v->ui.note, sizeof v->ui.note, "%s", text);
    v->ui.note_ns = 0;
}

/* Write cells [x0, x1) of row y: one call per run of one style. The
 * bottom-right cell is left alone: writing it makes some terminals scroll. */
static void put_cells(ViewTui *v, int y, int x0, int x1)
{
    const Canvas *c = &v->cv;
    const Cell *row = &c->cells[(size_t)y * (size_t)c->w];
    if (y == c->h - 1 && x1 == c->w) x1--;
    if (v->direct) tty_frame_cells(&v->out, y, x0, row + x0, x1 - x0);
    wchar_t run[1024];
    int x = x0;
    while (x < x1) {
        int style = row[x].style, start = x, n = 0;
        while (x < x1 && row[x].style == style && n < (int)(sizeof run / sizeof run[0]) - 1) {
            if (row[x].ch != 0) run[n++] = (wchar_t)row[x].ch;
            x++;
        }
        if (n > 0) {
            run[n] = L'\0';
            attrset(v->attr[style < ST__COUNT ? style : ST_NORMAL]);
            mvaddnwstr(y, start, run, n);
        }
    }
    attrset(A_NORMAL);
}

/* Two cells alike: one 8-byte comparison (Cell's spare bytes are always 0). */
_Static_assert(sizeof(Cell) == 8, "a cell compares as one 64-bit word");
static inline bool same_cell(const Cell *a, const Cell *b)
{
    uint64_t x, y;
    memcpy(&x, a, sizeof x);
    memcpy(&y, b, sizeof y);
    return x == y;
}

/* Four cells alike (the unchanged stretches of a changed row, skipped
 * four at a time). */
static inline bool same_four(const Cell *a, const Cell *b)
{
    uint64_t x[4], y[4];
    memcpy(x, a, sizeof x);
    memcpy(y, b, sizeof y);
    return ((x[0] ^ y[0]) | (x[1] ^ y[1]) | (x[2] ^ y[2]) | (x[3] ^ y[3])) == 0;
}

/* Row y, only where it differs from what the terminal shows (all of it
 * when full): spans of changed cells, bridging gaps of a few unchanged
 * ones, widened so a wide character is never cut in half. */
static void blit_row(ViewTui *v, int y, bool full)
{
    const Canvas *c = &v->cv;
    if (full) {
        put_cells(v, y, 0, c->w);
        return;
    }
    const Cell *now = &c->cells[(size_t)y * (size_t)c->w], *was = &v->prev.cells[(size_t)y * (size_t)c->w];
    /* an unchanged row (most of a frame's): one comparison of its bytes */
    if (!memcmp(now, was, (size_t)c->w * sizeof *now)) return;
    int x = 0;
    while (x < c->w) {
        if (x + 4 <= c->w && same_four(&now[x], &was[x])) {
            x += 4;
            continue;
        }
        if (same_cell(&now[x], &was[x])) {
            x++;
            continue;
        }
        /* the span ends after its last changed cell with no change in
         * the 4 cells that follow */
        int start = x, last = x;
        for (int k = x + 1; k < c->w && k - last <= 4; k++)
            if (!same_cell(&now[k], &was[k])) last = k;
        int end = last + 1;
        while (start > 0 && now[start].ch == 0) start--; /* the left half of a wide character */
        while (end < c->w && now[end].ch == 0) end++;    /* its right half */
        put_cells(v, y, start, end);
        x = end;
    }
}

void view_tui_set_keys(ViewTui *v, KeysMode mode, ViewKeyHook hook, void *ctx)
{
    if (!v) return;
    v->ui.keys_mode = mode;
    v->hook = hook;
    v->hook_ctx = ctx;
}

void view_tui_set_keys_alt(ViewTui *v, bool alt)
{
    if (v) v->ui.keys_alt = alt;
}

void view_tui_draw(ViewTui *v, const Job *j, int64_t now_ns, const char *status)
{
    view_tui_draw_at(v, j, now_ns, wall_ns(), status);
}

void view_tui_draw_at(ViewTui *v, const Job *j, int64_t now_ns, int64_t wall_ns, const char *status)
{
    if (!v || !j) return;
    set_term(v->scr);
    if (v->clear_next) {
        clearok(curscr, TRUE);
        v->clear_next = false;
        v->prev.w = -1; /* and rewrite every row */
    }
    int h, w;
    getmaxyx(stdscr, h, w);
    if (canvas_reset(&v->cv, w, h)) return;
    draw_screen(&v->cv, &v->ui, j, now_ns, wall_ns, status, v->color);
    /* a new size or Ctrl-L: everything, through ncurses; else the rows
     * that changed, written by tty_frame when it can */
    bool full = v->prev.w != w || v->prev.h != h || v->prev.cells == NULL;
    v->direct = !full && v->out.ok;
    if (full) {
        /* ncurses's copy of the screen is older than the terminal's: its
         * diff would skip cells it thinks are right. Repaint it all. */
        if (v->curscr_stale) clearok(curscr, TRUE);
        erase();
    }
    if (v->direct) tty_frame_begin(&v->out);
    for (int y = 0; y < h; y++) blit_row(v, y, full);
    if (v->direct) {
        /* ncurses's copy gets the cells (a repaint of its own, resuming
         * after Ctrl-Z, shows this frame), the terminal gets our bytes */
        wnoutrefresh(stdscr);
        int cy, cx;
        getyx(curscr, cy, cx);
        if (tty_frame_end(&v->out, v->out_fd, cy, cx)) v->clear_next = true; /* not all of it got there */
        v->curscr_stale = true;
    } else {
        refresh();
        v->curscr_stale = false;
    }
    /* this frame is what the terminal shows now; the next one is drawn
     * into the other canvas (blanked by canvas_reset), not copied */
    Canvas shown = v->cv;
    v->cv = v->prev;
    v->prev = shown;
}
