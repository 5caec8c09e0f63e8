/* tty_frame.c — a frame's changed cells as terminal bytes. See tty_frame.h.
 *
 * Every style change starts from normal attributes (sgr0, then op where
 * there are colours), so the bytes never depend on what was on before: a
 * few bytes more than ncurses would send, no state to get wrong. Main
 * thread.
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
#include "screen/tty_frame.h"

#include <errno.h>
#include <ncurses.h>
#include <stdlib.h>
#include <string.h>
#include <term.h>
#include <unistd.h>

/* A capability's string, NULL when the terminal has none, or when it asks
 * for padding ("$<5>": delays tputs would make, printed as they stand here):
 * such a terminal keeps ncurses writing its frames. */
static const char *cap(const char *name)
{
    const char *s = tigetstr(name);
    return s && s != (const char *)-1 && *s && !strstr(s, "$<") ? s : NULL;
}

static int grow(TtyFrame *t, size_t more)
{
    if (t->len + more <= t->cap) return 0;
    size_t cap = t->cap ? t->cap : 4096;
    while (cap < t->len + more) cap *= 2;
    char *nb = realloc(t->buf, cap);
    if (!nb) {
        t->failed = true; /* a frame short: tty_frame_end says so */
        return -1;
    }
    t->buf = nb;
    t->cap = cap;
    return 0;
}

static void put(TtyFrame *t, const char *s, size_t n)
{
    if (grow(t, n)) return;
    memcpy(t->buf + t->len, s, n);
    t->len += n;
}

static void put_str(TtyFrame *t, const char *s) { put(t, s, strlen(s)); }

/* ncv (no_color_video): the attributes a colour turns off, as ncurses
 * drops them, in terminfo's bit order */
static const unsigned long ncv_attr[] = { A_STANDOUT, A_UNDERLINE, A_REVERSE, A_BLINK,     A_DIM,
                                          A_BOLD,     A_INVIS,     A_PROTECT, A_ALTCHARSET };

/* One style's string into t->style[s]; false when the terminal lacks a
 * capability it needs. */
static bool build_style(TtyFrame *t, int s, unsigned long a, const char *sgr0, const char *op)
{
    static const struct {
        unsigned long attr;
        const char *name;
    } on[] = { { A_BOLD, "bold" }, { A_DIM, "dim" }, { A_REVERSE, "rev" }, { A_UNDERLINE, "smul" } };
    size_t start = t->len;
    int pair = (int)PAIR_NUMBER(a);
    if (pair != 0) {
        int ncv = tigetnum("ncv");
        for (int b = 0; ncv > 0 && b < (int)(sizeof ncv_attr / sizeof ncv_attr[0]); b++)
            if (ncv & (1 << b)) a &= ~ncv_attr[b];
    }
    put_str(t, sgr0);
    if (op) put_str(t, op);
    unsigned long known = A_COLOR;
    for (size_t i = 0; i < sizeof on / sizeof on[0]; i++) {
        known |= on[i].attr;
        if (!(a & on[i].attr)) continue;
        const char *c = cap(on[i].name);
        if (!c) return false;
        put_str(t, c);
    }
    if (a & ~known & A_ATTRIBUTES) return false; /* an attribute the view never uses */
    if (pair != 0) {
        short fg, bg;
        const char *af = cap("setaf"), *ab = cap("setab");
        if (pair_content((short)pair, &fg, &bg) != OK || !af || !ab) return false;
        if (fg >= 0) put_str(t, tiparm(af, fg));
        if (bg >= 0) put_str(t, tiparm(ab, bg));
    }
    size_t n = t->len - start;
    t->style[s] = t->failed ? NULL : malloc(n);
    if (!t->style[s]) return false;
    memcpy(t->style[s], t->buf + start, n);
    t->style_len[s] = n;
    t->len = start;
    return true;
}

void tty_frame_init(TtyFrame *t, const unsigned long *attrs, bool utf8, bool color)
{
    memset(t, 0, sizeof *t);
    t->utf8 = utf8;
    t->cur_style = ST_NORMAL;
    const char *sgr0 = cap("sgr0");
    t->cup = cap("cup");
    if (!sgr0 || !t->cup) return;
    t->cup_ansi = !strcmp(t->cup, "\033[%i%p1%d;%p2%dH");
    /* sgr0 leaves the colours alone on some terminals: op restores them */
    const char *op = color ? cap("op") : NULL;
    for (int s = 0; s < ST__COUNT; s++)
        if (!build_style(t, s, attrs[s], sgr0, op)) {
            tty_frame_done(t); /* ncurses writes the frames */
            return;
        }
    t->ok = true;
}

void tty_frame_done(TtyFrame *t)
{
    for (int s = 0; s < ST__COUNT; s++) free(t->style[s]);
    free(t->buf);
    memset(t, 0, sizeof *t);
}

void tty_frame_begin(TtyFrame *t)
{
    t->len = 0;
    t->failed = false;
    t->cur_style = ST_NORMAL; /* where ncurses and the last frame left the terminal */
}

/* Move to (y, x): cup, formatted here when it is the ANSI one. */
static void move_to(TtyFrame *t, int y, int x)
{
    if (!t->cup_ansi) {
        put_str(t, tiparm(t->cup, y, x));
        return;
    }
    char s[32], *p = s + sizeof s;
    *--p = 'H';
    for (unsigned v = (unsigned)x + 1;; v /= 10) {
        *--p = (char)('0' + v % 10);
        if (v < 10) break;
    }
    *--p = ';';
    for (unsigned v = (unsigned)y + 1;; v /= 10) {
        *--p = (char)('0' + v % 10);
        if (v < 10) break;
    }
    *--p = '[';
    *--p = '\033';
    put(t, p, (size_t)(s + sizeof s - p));
}

void tty_frame_cells(TtyFrame *t, int y, int x, const Cell *cells, int n)
{
    if (n <= 0) return;
    move_to(t, y, x);
    if (grow(t, (size_t)n * 4)) return; /* room for every cell's character */
    for (int i = 0; i < n; i++) {
        uint32_t ch = cells[i].ch;
        if (ch == 0) continue; /* a wide character's right half: written with its left */
        int st = cells[i].style < ST__COUNT ? cells[i].style : ST_NORMAL;
        if (st != t->cur_style) {
            put(t, t->style[st], t->style_len[st]);
            t->cur_style = st;
            if (grow(t, (size_t)(n - i) * 4)) return;
        }
        char *o = t->buf + t->len;
        if (ch < 0x80 || !t->utf8) {
            *o++ = (char)(ch < 0x80 ? ch : '?');
        } else if (ch < 0x800) {
            *o++ = (char)(0xc0 | ch >> 6);
            *o++ = (char)(0x80 | (ch & 0x3f));
        } else if (ch < 0x10000) {
            *o++ = (char)(0xe0 | ch >> 12);
            *o++ = (char)(0x80 | (ch >> 6 & 0x3f));
            *o++ = (char)(0x80 | (ch & 0x3f));
        } else {
            *o++ = (char)(0xf0 | ch >> 18);
            *o++ = (char)(0x80 | (ch >> 12 & 0x3f));
            *o++ = (char)(0x80 | (ch >> 6 & 0x3f));
            *o++ = (char)(0x80 | (ch & 0x3f));
        }
        t->len = (size_t)(o - t->buf);
    }
}

int tty_frame_end(TtyFrame *t, int fd, int cur_y, int cur_x)
{
    if (t->failed) return -1;
    if (t->len == 0) return 0;
    /* back to what ncurses believes: normal attributes (its doupdate ends
     * there too), the cursor where it left it */
    if (t->cur_style != ST_NORMAL) put(t, t->style[ST_NORMAL], t->style_len[ST_NORMAL]);
    move_to(t, cur_y, cur_x);
    size_t off = 0;
    while (off < t->len) {
        ssize_t k = write(fd, t->buf + off, t->len - off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        off += (size_t)k;
    }
    t->len = 0;
    return 0;
}
