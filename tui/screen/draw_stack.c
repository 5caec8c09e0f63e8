/* draw_stack.c — a rank's Python stacks (the w key): every thread's stack
 * as faulthandler wrote it to the rank's log, a page over the body like
 * the rank detail, scrolled by the Ui; and every rank's stacks merged (the
 * t key), stacktree_text's lines on the same page.
 *
 * Owns: the page's wording and styles: thread headers as labels, the
 * script's own frames bold, the interpreter's and torch's dim (a frame
 * under site-packages, dist-packages or lib/python); in the merged tree a
 * smaller set than its siblings' (the odd ranks) in the warning colour,
 * the frames where no rank moved marked in the error colour. Reads the
 * Ui's dump; writes its rows shown. No curses. Main thread.
 */
#include "screen/draw.h"

#include <stdio.h>
#include <string.h>

#include "model/stacktree.h"

/* A frame of a library, not of the user's script. */
static bool library_frame(const char *line, size_t n)
{
    static const char *const marks[] = { "site-packages/", "dist-packages/", "/lib/python", "<frozen " };
    for (size_t k = 0; k < sizeof marks / sizeof marks[0]; k++) {
        size_t m = strlen(marks[k]);
        for (size_t i = 0; i + m <= n; i++)
            if (!memcmp(line + i, marks[k], m)) return true;
    }
    return false;
}

/* One of stacktree_text's lines: "S O COUNT  RANKS  INDENT FRAME". */
static void draw_tree_line(Canvas *cv, int x, int row, int w, const char *line)
{
    size_t n = strlen(line);
    if (n < 4) {
        canvas_put(cv, row, x, w, ST_NORMAL, line);
        return;
    }
    bool stuck = line[0] == '*', odd = line[2] == '!';
    /* the count and the ranks: up to the frame's column */
    size_t frame = 4;
    while (frame < n && line[frame] == ' ') frame++;                                    /* the count's padding */
    while (frame < n && line[frame] != ' ') frame++;                                    /* the count */
    frame += 2;                                                                         /* "  " */
    frame += STACKTREE_RANKS_COL + 2 < n - frame ? STACKTREE_RANKS_COL + 2 : n - frame; /* the ranks */
    int cx = x;
    char part[512];
    snprintf(part, sizeof part, "%.*s", 2, line);
    cx += canvas_put(cv, row, cx, x + w - cx, stuck ? ST_ERR : ST_NORMAL, part);
    snprintf(part, sizeof part, "%.*s", (int)(frame - 2), line + 2);
    cx += canvas_put(cv, row, cx, x + w - cx, odd ? ST_WARN : ST_DIM, part);
    const char *f = line + frame;
    canvas_put(cv, row, cx, x + w - cx, stuck ? ST_ERR : odd ? ST_WARN : ST_NORMAL, f);
}

void draw_stack(DrawCtx *d, int x, int y, int w, int h)
{
    Ui *u = d->ui;
    Canvas *cv = d->cv;
    int end = y + h;
    canvas_repeat(cv, y, x, w, ST_RULE, d->g->hline);
    bool tree = u->stack_rank == UI_STACK_TREE;
    int cx = x + 1;
    if (tree) {
        cx += canvas_put(cv, y, cx, w - 1, ST_RULE_FOCUS, " every rank's stacks, merged ");
        cx += canvas_put(cv, y, cx, x + w - cx, ST_RULE, " Esc closes, Up/Down/PgUp/PgDn scroll, t looks again ");
    } else {
        cx += canvas_printf(cv, y, cx, w - 1, ST_RULE_FOCUS, " rank %d Python stacks ", u->stack_rank);
        cx += canvas_put(cv, y, cx, x + w - cx, ST_RULE, " Esc closes, Up/Down/PgUp/PgDn scroll, w asks again ");
    }
    int row = y + 1;
    if (row < end) canvas_put(cv, row++, x, w, ST_BOLD, u->stack_head);
    int rows = end - row;
    u->stack_rows = rows > 0 ? rows : 0;
    if (!u->stack) return;
    if (u->stack_lines > rows && rows > 0) {
        char pos[64];
        int last = u->stack_top + rows < u->stack_lines ? u->stack_top + rows : u->stack_lines;
        snprintf(pos, sizeof pos, " lines %d-%d of %d ", u->stack_top + 1, last, u->stack_lines);
        int pw = canvas_text_width(cv, pos);
        if (x + w - pw - 2 > cx) canvas_put(cv, y, x + w - pw - 2, pw, ST_RULE, pos);
    }
    const char *s = u->stack;
    for (int i = 0; *s && i < u->stack_top; i++) {
        const char *nl = strchr(s, '\n');
        s = nl ? nl + 1 : s + strlen(s);
    }
    char line[512];
    while (*s && row < end) {
        const char *nl = strchr(s, '\n');
        size_t n = nl ? (size_t)(nl - s) : strlen(s);
        snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line ? n : sizeof line - 1), s);
        if (tree) {
            draw_tree_line(cv, x, row++, w, line);
            s = nl ? nl + 1 : s + n;
            continue;
        }
        int st = ST_NORMAL;
        if (line[0] && line[0] != ' ')
            st = ST_LABEL; /* "Thread 0x... (most recent call first):" */
        else if (strstr(line, "File \""))
            st = library_frame(line, strlen(line)) ? ST_DIM : ST_BOLD;
        canvas_put(cv, row++, x, w, st, line);
        s = nl ? nl + 1 : s + n;
    }
}
