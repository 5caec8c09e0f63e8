/* draw_stack.c — a rank's Python stacks (the w key): every thread's stack
 * as faulthandler wrote it to the rank's log, a page over the body like
 * the rank detail, scrolled by the Ui.
 *
 * Owns: the page's wording and styles: thread headers as labels, the
 * script's own frames bold, the interpreter's and torch's dim (a frame
 * under site-packages, dist-packages or lib/python). Reads the Ui's dump;
 * writes its rows shown. No curses. Main thread.
 */
#include "screen/draw.h"

#include <stdio.h>
#include <string.h>

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

void draw_stack(DrawCtx *d, int x, int y, int w, int h)
{
    Ui *u = d->ui;
    Canvas *cv = d->cv;
    int end = y + h;
    canvas_repeat(cv, y, x, w, ST_RULE, d->g->hline);
    int cx = x + 1 + canvas_printf(cv, y, x + 1, w - 1, ST_RULE_FOCUS, " rank %d Python stacks ", u->stack_rank);
    cx += canvas_put(cv, y, cx, x + w - cx, ST_RULE, " Esc closes, Up/Down/PgUp/PgDn scroll, w asks again ");
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
        int st = ST_NORMAL;
        if (line[0] && line[0] != ' ')
            st = ST_LABEL; /* "Thread 0x... (most recent call first):" */
        else if (strstr(line, "File \""))
            st = library_frame(line, strlen(line)) ? ST_DIM : ST_BOLD;
        canvas_put(cv, row++, x, w, st, line);
        s = nl ? nl + 1 : s + n;
    }
}
