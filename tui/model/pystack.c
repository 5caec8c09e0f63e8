/* pystack.c — faulthandler's dump picked out of a rank's log. See
 * pystack.h. The format is CPython's Python/traceback.c: a header per
 * thread, then one line per frame, innermost first, each starting with
 * two spaces ("  File ...", "  <no Python frame>", "  ...").
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include "model/pystack.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool starts(const char *s, size_t n, const char *p)
{
    size_t k = strlen(p);
    return n >= k && !memcmp(s, p, k);
}

static bool header(const char *s, size_t n)
{
    return (starts(s, n, "Thread 0x") || starts(s, n, "Current thread 0x") || starts(s, n, "Stack ")) && n > 0 &&
           s[n - 1] == ':';
}

static bool frame(const char *s, size_t n)
{
    return starts(s, n, "  File \"") || starts(s, n, "  <no Python frame>") || starts(s, n, "  ...");
}

/* Append s[n] and a newline when it fits whole. */
static bool put(char *out, size_t outlen, size_t *o, const char *s, size_t n)
{
    if (*o + n + 2 > outlen) return false;
    memcpy(out + *o, s, n);
    *o += n;
    out[(*o)++] = '\n';
    out[*o] = '\0';
    return true;
}

int pystack_extract(const char *text, size_t len, char *out, size_t outlen)
{
    if (!out || outlen == 0) return 0;
    out[0] = '\0';
    size_t o = 0;
    int threads = 0;
    bool in_block = false, full = false;
    for (size_t i = 0; text && i < len && !full;) {
        const char *s = text + i;
        const char *nl = memchr(s, '\n', len - i);
        size_t n = nl ? (size_t)(nl - s) : len - i;
        i += n + (nl ? 1 : 0);
        if (n > 0 && s[n - 1] == '\r') n--;
        if (header(s, n)) {
            if (threads > 0 && !put(out, outlen, &o, "", 0)) break;
            full = !put(out, outlen, &o, s, n);
            threads += !full;
            in_block = !full;
        } else if (in_block && frame(s, n)) {
            full = !put(out, outlen, &o, s, n);
        } else if (n == 0) {
            in_block = false; /* a block ends at a blank line */
        }
    }
    return threads;
}

/* "  File \"/a/b/x.py\", line 57 in save" -> "x.py:57 save". */
static void frame_label(const char *s, size_t n, char *out, size_t outlen)
{
    if (!starts(s, n, "  File \"")) {
        size_t k = n - 2 < outlen - 1 ? n - 2 : outlen - 1; /* "<no Python frame>", "..." */
        memcpy(out, s + 2, k);
        out[k] = '\0';
        return;
    }
    const char *p = s + 8, *end = s + n;
    const char *q = p;
    while (q < end && *q != '"') q++;
    const char *base = q;
    while (base > p && base[-1] != '/') base--;
    /* a package's __init__.py or __main__.py says little alone: keep its folder */
    if (base > p + 1 &&
        (starts(base, (size_t)(q - base), "__init__.py") || starts(base, (size_t)(q - base), "__main__.py")))
        for (base--; base > p && base[-1] != '/';) base--;
    long line = 0;
    const char *l = q;
    while (l < end && (*l < '0' || *l > '9')) l++;
    while (l < end && *l >= '0' && *l <= '9') line = line * 10 + (*l++ - '0');
    const char *fn = l;
    if (end - fn >= 4 && !memcmp(fn, " in ", 4)) fn += 4;
    snprintf(out, outlen, "%.*s:%ld %.*s", (int)(q - base), base, line, (int)(end - fn), fn);
}

int pystack_parse(const char *text, size_t len, PyStackThread *th, void (*each)(void *ctx, const PyStackThread *th),
                  void *ctx)
{
    int threads = 0;
    bool in_block = false;
    char inner[PYSTACK_FRAMES_MAX][PYSTACK_FRAME_LEN]; /* innermost first, as written */
    int n = 0;
    for (size_t i = 0; text && i <= len;) {
        const char *s = text + i;
        const char *nl = i < len ? memchr(s, '\n', len - i) : NULL;
        size_t k = i < len ? (nl ? (size_t)(nl - s) : len - i) : 0;
        i += k + 1;
        if (k > 0 && s[k - 1] == '\r') k--;
        bool head = header(s, k), last = i > len;
        if (in_block && (head || k == 0 || last)) {
            if (last && frame(s, k) && n < PYSTACK_FRAMES_MAX) frame_label(s, k, inner[n++], PYSTACK_FRAME_LEN);
            th->n = n;
            for (int f = 0; f < n; f++) memcpy(th->frame[f], inner[n - 1 - f], PYSTACK_FRAME_LEN);
            threads++;
            if (each) each(ctx, th);
            in_block = false;
        }
        if (head) {
            in_block = true;
            n = 0;
            th->current = starts(s, k, "Current thread");
            th->beat = 0;
            const char *x = memchr(s, 'x', k);
            th->id = x && starts(s, k, "Stack") == 0 ? strtoull(x + 1, NULL, 16) : 0;
        } else if (in_block && frame(s, k) && n < PYSTACK_FRAMES_MAX) {
            frame_label(s, k, inner[n++], PYSTACK_FRAME_LEN);
            if (th->current && memmem(s, k, "/ddptop/beat.py\"", 16)) th->beat = 1;
        }
    }
    return threads;
}
