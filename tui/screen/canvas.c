/* canvas.c — cells in memory. See canvas.h.
 *
 * Text goes through mbrtowc/wcwidth with the caller's locale, the same
 * rules ncurses would apply, so what a test reads is what the terminal
 * shows. Main thread.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "screen/canvas.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

void canvas_init(Canvas *c, bool utf8)
{
    memset(c, 0, sizeof *c);
    c->utf8 = utf8;
}

void canvas_done(Canvas *c)
{
    free(c->cells);
    memset(c, 0, sizeof *c);
}

int canvas_reset(Canvas *c, int w, int h)
{
    if (w < 0) w = 0;
    if (h < 0) h = 0;
    size_t n = (size_t)w * (size_t)h;
    if (n > c->cap) {
        Cell *nc = realloc(c->cells, n * sizeof *nc);
        if (!nc) return -1;
        c->cells = nc;
        c->cap = n;
    }
    c->w = w;
    c->h = h;
    /* one blank row, then copies of it: a frame starts here */
    for (int x = 0; x < w && h > 0; x++) c->cells[x] = (Cell){ .ch = ' ', .style = ST_NORMAL };
    for (int y = 1; y < h; y++) memcpy(&c->cells[(size_t)y * (size_t)w], c->cells, (size_t)w * sizeof *c->cells);
    /* a frame decodes with the locale of its time */
    memset(c->glyph, 0, sizeof c->glyph);
    return 0;
}

static Cell *at(Canvas *c, int y, int x) { return &c->cells[(size_t)y * (size_t)c->w + (size_t)x]; }

const Cell *canvas_at(const Canvas *c, int y, int x)
{
    if (y < 0 || y >= c->h || x < 0 || x >= c->w) return NULL;
    return &c->cells[(size_t)y * (size_t)c->w + (size_t)x];
}

/* Next character of s: its code point (out), its byte length (return,
 * 0 at the end) and its columns (out). */
static size_t next_char(const Canvas *c, const char *s, size_t left, mbstate_t *st, uint32_t *cp, int *cols)
{
    if (left == 0 || !*s) return 0;
    /* printable ASCII, most of any screen: no decoding, no table lookup */
    unsigned char b0 = (unsigned char)*s;
    if (b0 >= 0x20 && b0 < 0x7f) {
        *cp = b0;
        *cols = 1;
        return 1;
    }
    /* a multi-byte character decoded before: its bytes give the same
     * answer again (UTF-8 has no shift state: st is initial here) */
    size_t want = b0 >= 0xc2 && b0 <= 0xdf ? 2 : b0 >= 0xe0 && b0 <= 0xef ? 3 : b0 >= 0xf0 && b0 <= 0xf4 ? 4 : 0;
    CanvasGlyph *g = NULL;
    uint32_t bytes = 0;
    if (c->utf8 && want && left >= want) {
        for (size_t i = 0; i < want; i++) bytes = bytes << 8 | (unsigned char)s[i];
        /* a cache, not the canvas's content: kept in the canvas, written through a const view */
        g = (CanvasGlyph *)&c->glyph[(bytes * 2654435761u) >> 28];
        if (g->len == want && g->bytes == bytes) {
            *cp = g->cp;
            *cols = g->cols;
            return want;
        }
    }
    wchar_t wc;
    size_t k;
    if (!c->utf8) {
        unsigned char b = (unsigned char)*s;
        wc = b;
        k = 1;
        if (b > 0x7e) wc = L'?';
    } else {
        k = mbrtowc(&wc, s, left, st);
        if (k == 0) return 0;
        if (k == (size_t)-1 || k == (size_t)-2) {
            wc = L'?';
            k = 1;
            memset(st, 0, sizeof *st);
        }
    }
    if (wc == L'\n' || wc == L'\t' || wc == L'\r') wc = L' ';
    int w = wc < 0x20 || wc == 0x7f ? -1 : wcwidth(wc);
    if (w < 0) {
        wc = L'?';
        w = 1;
    }
    *cp = (uint32_t)wc;
    *cols = w;
    if (g && k == want) *g = (CanvasGlyph){ bytes, (uint32_t)wc, (uint8_t)want, (uint8_t)w };
    return k;
}

/* Walking a string character by character, with each one's columns. */
typedef struct {
    const Canvas *c;
    const char *s;
    size_t left;
    mbstate_t st;
} CharIter;

static void iter_init(CharIter *it, const Canvas *c, const char *s)
{
    memset(it, 0, sizeof *it);
    it->c = c;
    it->s = s;
    it->left = s ? strlen(s) : 0;
}

static bool iter_next(CharIter *it, uint32_t *cp, int *cw)
{
    size_t k = next_char(it->c, it->s, it->left, &it->st, cp, cw);
    if (k == 0) return false;
    it->s += k;
    it->left -= k;
    return true;
}

/* The length of s when every byte is printable ASCII (one column each,
 * no decoding), else -1: most of a frame's text takes this path. */
static long ascii_len(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    for (;; p++) {
        if (!*p) return (long)(p - (const unsigned char *)s);
        if (*p < 0x20 || *p >= 0x7f) return -1;
    }
}

static bool ascii_alnum(uint32_t cp) { return cp < 0x80 && ((cp | 0x20) - 'a' < 26 || cp - '0' < 10); }

/* Where a cut through text ends: before the word it would split (back to
 * the last space of what fits, with the spaces and the opening punctuation
 * before it), leaving a column for the ellipsis. Returns the columns to
 * keep (0 when not even that fits). */
static int cut_at(const Canvas *c, const char *s, int lim)
{
    CharIter it;
    iter_init(&it, c, s);
    uint32_t cp = ' ', prev = ' ';
    int cw, cols = 0, word_end = -1, end = 0;
    while (iter_next(&it, &cp, &cw)) {
        if (cw == 0) continue;
        if (cols + cw > lim - 1) break;
        if (cp == ' ' && prev != ' ') word_end = cols;
        cols += cw;
        prev = cp;
        if (cp != ' ') end = cols; /* no blank before the ellipsis */
    }
    /* the character after the cut continues a word: drop the whole word */
    if (cp != ' ' && prev != ' ' && word_end > 0) end = word_end;
    return end;
}

int canvas_put(Canvas *c, int y, int x, int maxw, int style, const char *s)
{
    if (!s || y < 0 || y >= c->h || x < 0 || x >= c->w) return 0;
    int lim = c->w - x;
    if (maxw < lim) lim = maxw;
    if (lim <= 0) return 0;
    long alen = ascii_len(s);
    if (alen >= 0 && alen <= lim) {
        Cell *row = at(c, y, x);
        for (long i = 0; i < alen; i++) row[i] = (Cell){ .ch = (unsigned char)s[i], .style = (uint8_t)style };
        return (int)alen;
    }
    /* Text cut at the edge never reads as another word ("waiting for hell",
     * "eta 00:1"): it loses whole words and ends with an ellipsis. Lines,
     * bars and plots (no letter or digit left out) are cut plainly. */
    int keep = lim;
    bool ellipsis = false;
    /* No character takes more columns than its bytes (wide ones are 3 or 4
     * bytes in UTF-8, anything invalid a '?' a byte), so text of at most
     * lim bytes fits and needs no look for a cut: most of a frame's text */
    if (strlen(s) > (size_t)lim) {
        CharIter it;
        iter_init(&it, c, s);
        uint32_t cp;
        int cw, cols = 0;
        bool cut = false, words_lost = false;
        while (iter_next(&it, &cp, &cw) && !words_lost) {
            if (cw == 0) continue;
            if (!cut && cols + cw > lim) cut = true;
            words_lost = cut && ascii_alnum(cp);
            cols += cw;
        }
        if (words_lost) {
            keep = cut_at(c, s, lim);
            ellipsis = true;
        }
    }
    int cols = 0;
    CharIter it;
    iter_init(&it, c, s);
    uint32_t cp;
    int cw;
    while (iter_next(&it, &cp, &cw)) {
        if (cw == 0) continue; /* combining marks: dropped, never misplaced */
        if (cols + cw > keep) break;
        *at(c, y, x + cols) = (Cell){ .ch = cp, .style = (uint8_t)style };
        if (cw == 2) *at(c, y, x + cols + 1) = (Cell){ .ch = 0, .style = (uint8_t)style };
        cols += cw;
    }
    if (ellipsis) *at(c, y, x + cols++) = (Cell){ .ch = c->utf8 ? 0x2026u : '~', .style = (uint8_t)style };
    return cols;
}

int canvas_printf(Canvas *c, int y, int x, int maxw, int style, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return canvas_put(c, y, x, maxw, style, buf);
}

int canvas_repeat(Canvas *c, int y, int x, int n, int style, const char *s)
{
    /* each copy would be the same cell: the first one put, the rest copied */
    int i = x < 0 ? -x : 0;
    if (i >= n || canvas_put(c, y, x + i, 1, style, s) != 1) return 0;
    Cell first = *at(c, y, x + i);
    int cols = 1;
    for (i++; i < n && x + i < c->w; i++, cols++) *at(c, y, x + i) = first;
    return cols;
}

bool canvas_char(const Canvas *c, const char *s, uint32_t *cp)
{
    CharIter it;
    iter_init(&it, c, s);
    int cw;
    uint32_t next;
    return iter_next(&it, cp, &cw) && cw == 1 && !iter_next(&it, &next, &cw);
}

void canvas_set(Canvas *c, int y, int x, uint32_t ch, int style)
{
    if (y < 0 || y >= c->h || x < 0 || x >= c->w) return;
    if (!c->utf8 && (ch < 0x20 || ch > 0x7e)) ch = '?';
    *at(c, y, x) = (Cell){ .ch = ch, .style = (uint8_t)style };
}

void canvas_fill(Canvas *c, int y, int x, int w, int style)
{
    if (y < 0 || y >= c->h) return;
    for (int i = x < 0 ? 0 : x; i < x + w && i < c->w; i++) *at(c, y, i) = (Cell){ .ch = ' ', .style = (uint8_t)style };
}

void canvas_restyle(Canvas *c, int y, int x, int w, int style)
{
    if (y < 0 || y >= c->h) return;
    for (int i = x < 0 ? 0 : x; i < x + w && i < c->w; i++) at(c, y, i)->style = (uint8_t)style;
}

void canvas_row_text(const Canvas *c, int y, char *buf, size_t n)
{
    size_t len = 0;
    if (n == 0) return;
    buf[0] = '\0';
    if (y < 0 || y >= c->h) return;
    mbstate_t st;
    memset(&st, 0, sizeof st);
    for (int x = 0; x < c->w; x++) {
        uint32_t ch = c->cells[(size_t)y * (size_t)c->w + (size_t)x].ch;
        if (ch == 0) continue;
        char mb[8];
        size_t k;
        if (ch < 0x80) {
            mb[0] = (char)ch;
            k = 1;
        } else {
            k = wcrtomb(mb, (wchar_t)ch, &st);
            if (k == (size_t)-1) {
                mb[0] = '?';
                k = 1;
            }
        }
        if (len + k + 1 > n) break;
        memcpy(buf + len, mb, k);
        len += k;
    }
    buf[len] = '\0';
}

int canvas_text_width(const Canvas *c, const char *s)
{
    long alen = s ? ascii_len(s) : 0;
    if (alen >= 0) return (int)alen;
    int cols = 0;
    CharIter it;
    iter_init(&it, c, s);
    uint32_t cp;
    int cw;
    while (iter_next(&it, &cp, &cw)) cols += cw;
    return cols;
}
