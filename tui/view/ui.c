/* ui.c — keys and mouse clicks to screen state or job actions. See ui.h;
 * which key means what is the key table's (keys.h).
 *
 * View keys answer in Ui.note (shown on the status line): the events panel
 * is for what happens to the job, and a sort or a zoom is not that.
 * Main thread.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strdup under -std=c11 */
#endif
#include "view/ui.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const panel_names[PANEL__COUNT] = { "header", "ranks", "loss", "all-reduce", "sampler", "events" };

const char *ui_panel_name(PanelId p) { return p >= 0 && p < PANEL__COUNT ? panel_names[p] : "?"; }

static const char fault_keys[UI_FAULT__COUNT] = { 'k', 't', 'w', 'e', 'u', 'b' };

int ui_fault_key(UiFault f) { return f >= 0 && f < UI_FAULT__COUNT ? fault_keys[f] : '?'; }

void ui_fault_label(UiFault f, int rank, char *buf, size_t len)
{
    switch (f) {
    case UI_FAULT_KILL: snprintf(buf, len, "kill rank %d now (SIGKILL at its next step)", rank); break;
    case UI_FAULT_STALL: snprintf(buf, len, "stall rank %d (stops stepping, keeps its sockets)", rank); break;
    case UI_FAULT_SLOW: snprintf(buf, len, "slow rank %d by %d ms per step", rank, UI_FAULT_SLOW_MS); break;
    case UI_FAULT_SKIP_SET_EPOCH: snprintf(buf, len, "skip set_epoch on every rank"); break;
    case UI_FAULT_UNSAFE_STOP: snprintf(buf, len, "unsafe stop: rank %d stops alone, no agreement", rank); break;
    case UI_FAULT_NO_BARRIER: snprintf(buf, len, "destroy without the final barrier"); break;
    default: snprintf(buf, len, "?"); break;
    }
}

/* The f menu: Up/Down and Enter, or a fault's letter; Esc closes. */
static ViewAction fault_menu_key(Ui *u, int key)
{
    if (key == UI_KEY_UP || key == UI_KEY_DOWN) {
        u->fault_item = (u->fault_item + (key == UI_KEY_UP ? UI_FAULT__COUNT - 1 : 1)) % UI_FAULT__COUNT;
        return VIEW_ACT_REDRAW;
    }
    int pick = -1;
    if (key == UI_KEY_ENTER) pick = u->fault_item;
    for (int i = 0; i < UI_FAULT__COUNT; i++)
        if (key == fault_keys[i] || key == '1' + i) pick = i;
    if (pick >= 0) {
        u->overlay = UI_NO_OVERLAY;
        u->fault_pick = pick;
        return VIEW_ACT_FAULT;
    }
    u->overlay = UI_NO_OVERLAY; /* Esc, or any other key: no fault */
    snprintf(u->note, sizeof u->note, "fault menu closed: nothing injected");
    return VIEW_ACT_REDRAW;
}

int ui_init(Ui *u, int world)
{
    memset(u, 0, sizeof *u);
    u->world = world;
    u->focus = PANEL_RANKS;
    u->zoom = -1;
    u->mouse = true;
    u->detail_rank = -1;
    u->order = malloc((size_t)(world > 0 ? world : 1) * sizeof *u->order);
    if (!u->order) return -1;
    for (int i = 0; i < world; i++) u->order[i] = i;
    return 0;
}

void ui_done(Ui *u)
{
    free(u->order);
    u->order = NULL;
    free(u->stack);
    u->stack = NULL;
}

void ui_stack_show(Ui *u, int rank, const char *head, const char *text)
{
    if (rank != u->stack_rank || u->overlay != UI_STACK) u->stack_top = 0;
    u->overlay = UI_STACK;
    u->stack_rank = rank;
    snprintf(u->stack_head, sizeof u->stack_head, "%s", head ? head : "");
    if (!text) return;
    free(u->stack);
    u->stack = strdup(text);
    u->stack_lines = 0;
    if (!u->stack) return;
    for (const char *s = u->stack; *s; s++) u->stack_lines += *s == '\n';
    if (u->stack[0] && u->stack[strlen(u->stack) - 1] != '\n') u->stack_lines++;
    if (u->stack_top > u->stack_lines - 1) u->stack_top = u->stack_lines > 0 ? u->stack_lines - 1 : 0;
}

static bool is_scroll_key(int key)
{
    return key == UI_KEY_UP || key == UI_KEY_DOWN || key == UI_KEY_PGUP || key == UI_KEY_PGDN || key == UI_KEY_HOME ||
           key == UI_KEY_END;
}

/* Up/Down/Page/Home/End over a page of `lines` lines that shows `rows` of
 * them from *top (the stacks page, the help). */
static void scroll_page(int *top, int lines, int rows, int key)
{
    int page = rows > 1 ? rows - 1 : 1;
    int max = lines - (rows > 0 ? rows : 1);
    if (max < 0) max = 0;
    switch (key) {
    case UI_KEY_UP: (*top)--; break;
    case UI_KEY_DOWN: (*top)++; break;
    case UI_KEY_PGUP: *top -= page; break;
    case UI_KEY_PGDN: *top += page; break;
    case UI_KEY_HOME: *top = 0; break;
    case UI_KEY_END: *top = max; break;
    default: break;
    }
    if (*top > max) *top = max;
    if (*top < 0) *top = 0;
}

bool ui_panel_visible(const Ui *u, PanelId p)
{
    if (u->zoom >= 0) return (int)p == u->zoom;
    return !u->hidden[p];
}

static int order_pos(const Ui *u, int rank)
{
    for (int i = 0; i < u->world; i++)
        if (u->order[i] == rank) return i;
    return 0;
}

void ui_clamp(Ui *u)
{
    if (u->world <= 0) return;
    if (u->sel < 0 || u->sel >= u->world) u->sel = 0;
    int pos = order_pos(u, u->sel);
    int rows = u->list_rows > 0 ? u->list_rows : 1;
    if (pos < u->ranks_top) u->ranks_top = pos;
    if (pos >= u->ranks_top + rows) u->ranks_top = pos - rows + 1;
    if (u->ranks_top > u->world - rows) u->ranks_top = u->world - rows;
    if (u->ranks_top < 0) u->ranks_top = 0;
}

static void move_sel(Ui *u, int delta)
{
    int pos = order_pos(u, u->sel) + delta;
    if (pos < 0) pos = 0;
    if (pos >= u->world) pos = u->world - 1;
    u->sel = u->order[pos];
    ui_clamp(u);
}

static void focus_step(Ui *u, int dir)
{
    for (int k = 1; k <= PANEL__COUNT; k++) {
        int p = ((int)u->focus + dir * k + PANEL__COUNT * 2) % PANEL__COUNT;
        /* the header is a line, not a place to be, unless zoomed */
        if (p == PANEL_HEADER && u->zoom < 0) continue;
        if (u->zoom >= 0 || !u->hidden[p]) {
            u->focus = (PanelId)p;
            if (u->zoom >= 0) u->zoom = p; /* zoomed: Tab walks through the panels full-screen */
            return;
        }
    }
}

static int page(int rows) { return rows > 1 ? rows - 1 : 1; }

/* Up/Down/Page/Home/End inside the focused panel. */
static void scroll(Ui *u, int key, const Job *j)
{
    int dir = 0, amount = 1;
    switch (key) {
    case UI_KEY_UP: dir = -1; break;
    case UI_KEY_DOWN: dir = 1; break;
    case UI_KEY_PGUP:
        dir = -1;
        amount = 0;
        break;
    case UI_KEY_PGDN:
        dir = 1;
        amount = 0;
        break;
    case UI_KEY_HOME: dir = -2; break;
    case UI_KEY_END: dir = 2; break;
    default: return;
    }
    switch (u->focus) {
    case PANEL_RANKS:
    case PANEL_HEADER:
    case PANEL_LOSS:
        if (dir == -2 || dir == 2)
            move_sel(u, dir < 0 ? -u->world : u->world);
        else
            move_sel(u, dir * (amount ? 1 : page(u->list_rows)));
        break;
    case PANEL_EVENTS: {
        int n = job_event_rows(j); /* the panel's rows: repeats folded */
        int max = n - (u->events_rows > 0 ? u->events_rows : 1);
        if (max < 0) max = 0;
        if (dir == -2)
            u->events_back = max; /* Home: the oldest */
        else if (dir == 2)
            u->events_back = 0; /* End: the newest */
        else
            u->events_back -= dir * (amount ? 1 : page(u->events_rows));
        if (u->events_back < 0) u->events_back = 0;
        if (u->events_back > max) u->events_back = max;
        break;
    }
    case PANEL_COMM:
        if (dir == -2)
            u->comm_top = 0;
        else if (dir == 2)
            u->comm_top = JOB_COLL_RING;
        else
            u->comm_top += dir * (amount ? 1 : page(u->comm_rows));
        if (u->comm_top < 0) u->comm_top = 0;
        if (u->comm_top > JOB_COLL_RING - 1) u->comm_top = JOB_COLL_RING - 1;
        break;
    case PANEL_SAMPLER: {
        int64_t step = u->strip_cells > 0 ? u->strip_cells : 64;
        int64_t n = j ? j->shard.size : 0;
        if (dir == -2)
            u->strip_first = 0;
        else if (dir == 2)
            u->strip_first = n > step ? (n - 1) / step * step : 0;
        else
            u->strip_first += dir * step;
        if (u->strip_first > n - 1) u->strip_first = n > step ? (n - 1) / step * step : 0;
        if (u->strip_first < 0) u->strip_first = 0;
        break;
    }
    default: break;
    }
}

static int visible_count(const Ui *u)
{
    int n = 0;
    for (int p = 0; p < PANEL__COUNT; p++) n += !u->hidden[p];
    return n;
}

/* A zoom key: that panel alone, or all of them again when it already is. */
static void zoom_key(Ui *u, int p)
{
    if (u->zoom == p) {
        u->zoom = -1;
        snprintf(u->note, sizeof u->note, "all panels");
    } else {
        u->zoom = p;
        u->focus = (PanelId)p;
        snprintf(u->note, sizeof u->note, "panel %d %s full-screen: %d or Esc for all panels", p + 1, panel_names[p],
                 p + 1);
    }
}

static void hide_key(Ui *u)
{
    if (u->zoom >= 0) u->zoom = -1;
    if (visible_count(u) <= 1) {
        snprintf(u->note, sizeof u->note, "the last panel stays");
        return;
    }
    u->hidden[u->focus] = true;
    snprintf(u->note, sizeof u->note, "panel %d %s hidden: H shows every panel", (int)u->focus + 1,
             panel_names[u->focus]);
    focus_step(u, 1);
}

/* The overlays take keys first; returns true when one did (*out set). */
static bool overlay_key(Ui *u, int key, ViewAction *out)
{
    switch (u->overlay) {
    case UI_CONFIRM_QUIT:
        u->overlay = UI_NO_OVERLAY;
        if (key == 'y' || key == 'Y' || key == 'q' || key == 'Q') {
            *out = VIEW_ACT_QUIT;
            return true;
        }
        snprintf(u->note, sizeof u->note, "quit cancelled: training goes on");
        *out = VIEW_ACT_REDRAW;
        return true;
    case UI_HELP:
        /* the help's rows may not all fit (draw_help): the arrows and the
         * page keys scroll it, any other key closes it */
        if (is_scroll_key(key))
            scroll_page(&u->help_top, u->help_lines, u->help_rows, key);
        else
            u->overlay = UI_NO_OVERLAY;
        *out = VIEW_ACT_REDRAW;
        return true;
    case UI_FAULT_MENU: *out = fault_menu_key(u, key); return true;
    case UI_STACK:
        if (key == UI_KEY_ESC || key == UI_KEY_ENTER || key == UI_KEY_BACKSPACE || key == UI_KEY_LEFT) {
            u->overlay = UI_NO_OVERLAY;
            *out = VIEW_ACT_REDRAW;
            return true;
        }
        if (is_scroll_key(key)) {
            scroll_page(&u->stack_top, u->stack_lines, u->stack_rows, key);
            *out = VIEW_ACT_REDRAW;
            return true;
        }
        return false; /* w asks again; q, ? and the rest as anywhere */
    case UI_DETAIL:
        if (key == UI_KEY_ESC || key == UI_KEY_ENTER || key == UI_KEY_BACKSPACE || key == UI_KEY_LEFT) {
            u->overlay = UI_NO_OVERLAY;
            *out = VIEW_ACT_REDRAW;
            return true;
        }
        if (key == UI_KEY_UP || key == UI_KEY_DOWN) { /* browse the ranks' details */
            move_sel(u, key == UI_KEY_UP ? -1 : 1);
            u->detail_rank = u->sel;
            *out = VIEW_ACT_REDRAW;
            return true;
        }
        return false;
    default: return false;
    }
}

ViewAction ui_key(Ui *u, int key, const Job *j, bool running)
{
    KeyAction act = keys_action(u->keys_mode, key);
    if (key == UI_KEY_RESIZE || act == KEY_ACT_REDRAW) return VIEW_ACT_REDRAW;
    u->note[0] = '\0'; /* a new key: the old answer goes */
    u->note_ns = 0;
    ViewAction taken;
    if (overlay_key(u, key, &taken)) return taken;

    switch (act) {
    case KEY_ACT_CKPT: return VIEW_ACT_CKPT;
    case KEY_ACT_DESTROY: return VIEW_ACT_DESTROY;
    case KEY_ACT_PAUSE: return VIEW_ACT_PAUSE;
    case KEY_ACT_ABORT: return VIEW_ACT_ABORT;
    case KEY_ACT_FAULT:
        if (u->world <= 0) return VIEW_ACT_NONE;
        u->overlay = UI_FAULT_MENU;
        u->fault_rank = u->sel;
        return VIEW_ACT_REDRAW;
    case KEY_ACT_STACK:
        if (u->keys_mode != KEYS_LIVE) {
            snprintf(u->note, sizeof u->note,
                     "Python stacks: only on the job's own screen (ddptop run signals the ranks it started)");
            return VIEW_ACT_REDRAW;
        }
        if (u->world <= 0) return VIEW_ACT_NONE;
        /* on its page, w asks the same rank again */
        if (u->overlay != UI_STACK || u->stack_rank == UI_STACK_TREE)
            u->stack_rank = u->overlay == UI_DETAIL ? u->detail_rank : u->sel;
        return VIEW_ACT_STACK;
    case KEY_ACT_TREE:
        if (u->keys_mode != KEYS_LIVE) {
            snprintf(u->note, sizeof u->note,
                     "merged stacks: of a running job only (t on its screen, or ddptop stacks ENDPOINT)");
            return VIEW_ACT_REDRAW;
        }
        return u->world > 0 ? VIEW_ACT_TREE : VIEW_ACT_NONE;
    case KEY_ACT_REPORT:
        if (u->keys_mode != KEYS_LIVE) {
            snprintf(u->note, sizeof u->note,
                     u->keys_mode == KEYS_REPLAY
                         ? "report: of a running job only (r on its screen; a recording holds no stacks)"
                         : "report: only on the job's own screen (ddptop run writes it beside the job's logs)");
            return VIEW_ACT_REDRAW;
        }
        return u->world > 0 ? VIEW_ACT_REPORT : VIEW_ACT_NONE;
    case KEY_ACT_QUIT:
        if (!running) return VIEW_ACT_QUIT;
        u->overlay = UI_CONFIRM_QUIT;
        return VIEW_ACT_REDRAW;
    case KEY_ACT_HELP:
        u->overlay = UI_HELP;
        u->help_top = 0;
        return VIEW_ACT_REDRAW;
    case KEY_ACT_FOCUS_NEXT: focus_step(u, 1); return VIEW_ACT_REDRAW;
    case KEY_ACT_FOCUS_PREV: focus_step(u, -1); return VIEW_ACT_REDRAW;
    case KEY_ACT_ZOOM: zoom_key(u, key - '1'); return VIEW_ACT_REDRAW;
    case KEY_ACT_UNZOOM: u->zoom = -1; return VIEW_ACT_REDRAW;
    case KEY_ACT_LOG:
        u->log_scale = !u->log_scale;
        snprintf(u->note, sizeof u->note, "loss chart: %s scale", u->log_scale ? "log" : "linear");
        return VIEW_ACT_REDRAW;
    case KEY_ACT_SORT:
        u->sort = (JobSort)((u->sort + 1) % JOB_SORT__COUNT);
        u->to_top = true; /* a new order is read from its top */
        snprintf(u->note, sizeof u->note, "ranks sorted by %s%s (s: next key, S: reverse)", job_sort_name(u->sort),
                 u->sort_desc ? ", reversed" : "");
        return VIEW_ACT_REDRAW;
    case KEY_ACT_SORT_REVERSE:
        u->sort_desc = !u->sort_desc;
        u->to_top = true;
        snprintf(u->note, sizeof u->note, "ranks sorted by %s%s", job_sort_name(u->sort),
                 u->sort_desc ? ", reversed" : "");
        return VIEW_ACT_REDRAW;
    case KEY_ACT_HIDE: hide_key(u); return VIEW_ACT_REDRAW;
    case KEY_ACT_SHOW_ALL:
        memset(u->hidden, 0, sizeof u->hidden);
        snprintf(u->note, sizeof u->note, "every panel shown");
        return VIEW_ACT_REDRAW;
    case KEY_ACT_MOUSE:
        u->mouse = !u->mouse;
        snprintf(u->note, sizeof u->note, "%s",
                 u->mouse ? "mouse: click to select, wheel to scroll" : "mouse off: the terminal selects text");
        return VIEW_ACT_REDRAW;
    case KEY_ACT_DETAIL:
        /* no other panel has a use for Enter: the selected rank, wherever the focus is */
        if (u->world > 0) {
            u->overlay = UI_DETAIL;
            u->detail_rank = u->sel;
            return VIEW_ACT_REDRAW;
        }
        return VIEW_ACT_NONE;
    case KEY_ACT_SCROLL: scroll(u, key, j); return VIEW_ACT_REDRAW;
    case KEY_ACT_ALONG:
        if (u->focus == PANEL_SAMPLER) {
            scroll(u, key == UI_KEY_LEFT ? UI_KEY_UP : UI_KEY_DOWN, j);
            return VIEW_ACT_REDRAW;
        }
        return VIEW_ACT_NONE;
    default: return VIEW_ACT_NONE; /* unbound, or the mode's hook's (replay) */
    }
}

static int panel_at(const Ui *u, int x, int y)
{
    for (int p = 0; p < PANEL__COUNT; p++) {
        const UiRect *r = &u->rect[p];
        if (r->w > 0 && x >= r->x && x < r->x + r->w && y >= r->y && y < r->y + r->h) return p;
    }
    return -1;
}

ViewAction ui_mouse(Ui *u, UiMouse kind, int x, int y, const Job *j)
{
    if (u->overlay == UI_HELP || u->overlay == UI_CONFIRM_QUIT || u->overlay == UI_FAULT_MENU) {
        if (kind == UI_MOUSE_CLICK || kind == UI_MOUSE_DOUBLE) {
            u->overlay = UI_NO_OVERLAY;
            return VIEW_ACT_REDRAW;
        }
        if (u->overlay != UI_HELP) return VIEW_ACT_NONE;
    }
    if (u->overlay == UI_HELP || u->overlay == UI_DETAIL || u->overlay == UI_STACK)
        return kind == UI_MOUSE_WHEEL_UP || kind == UI_MOUSE_WHEEL_DOWN
                   ? ui_key(u, kind == UI_MOUSE_WHEEL_UP ? UI_KEY_UP : UI_KEY_DOWN, j, false)
                   : VIEW_ACT_NONE;
    int p = panel_at(u, x, y);
    if (p < 0) return VIEW_ACT_NONE;
    u->focus = (PanelId)p;
    if (kind == UI_MOUSE_WHEEL_UP || kind == UI_MOUSE_WHEEL_DOWN) {
        if (p == PANEL_RANKS) {
            /* the wheel moves the view, not the selection, like a pager */
            u->ranks_top += kind == UI_MOUSE_WHEEL_UP ? -3 : 3;
            int max = u->world - (u->list_rows > 0 ? u->list_rows : 1);
            if (u->ranks_top > max) u->ranks_top = max;
            if (u->ranks_top < 0) u->ranks_top = 0;
            return VIEW_ACT_REDRAW;
        }
        scroll(u, kind == UI_MOUSE_WHEEL_UP ? UI_KEY_UP : UI_KEY_DOWN, j);
        return VIEW_ACT_REDRAW;
    }
    /* a cell of the rank map selects its (first) rank; the list follows */
    if (p == PANEL_RANKS && u->map_rows > 0 && y >= u->map_y && y < u->map_y + u->map_rows && x >= u->map_x &&
        x < u->map_x + u->map_w) {
        int rank = ((y - u->map_y) * u->map_w + (x - u->map_x)) * (u->map_per_cell > 0 ? u->map_per_cell : 1);
        if (rank < u->world) {
            u->sel = rank;
            ui_clamp(u);
            if (kind == UI_MOUSE_DOUBLE) {
                u->overlay = UI_DETAIL;
                u->detail_rank = rank;
            }
        }
        return VIEW_ACT_REDRAW;
    }
    if (p == PANEL_RANKS && y >= u->list_y && y < u->list_y + u->list_rows) {
        int pos = u->ranks_top + (y - u->list_y);
        if (pos >= 0 && pos < u->world) {
            u->sel = u->order[pos];
            if (kind == UI_MOUSE_DOUBLE) {
                u->overlay = UI_DETAIL;
                u->detail_rank = u->sel;
            }
        }
    }
    return VIEW_ACT_REDRAW;
}
