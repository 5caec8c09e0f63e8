/* st_json.c — see st_json.h. Moved out of safetensors.c, which keeps the
 * format, the writer and the header's meaning. */
#include "ckpt/st_json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int js_fail(Js *j, const char *fmt, ...)
{
    if (j->failed) return -1;
    j->failed = true;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(j->err, j->errlen, "%s: bad header at byte %zu: %s", j->path, (size_t)(j->p - j->start), msg);
    return -1;
}

void js_ws(Js *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
}

/* Consume c (after whitespace) or fail. */
int js_expect(Js *j, char c)
{
    js_ws(j);
    if (j->p >= j->end) return js_fail(j, "expected '%c', header ends", c);
    if (*j->p != c) return js_fail(j, "expected '%c'", c);
    j->p++;
    return 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int js_hex4(Js *j, unsigned *out)
{
    if (j->end - j->p < 4) return js_fail(j, "short \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(j->p[i]);
        if (h < 0) return js_fail(j, "bad \\u escape");
        v = v << 4 | (unsigned)h;
    }
    j->p += 4;
    *out = v;
    return 0;
}

/* Parse a string into a malloc'd, NUL-terminated *out (NULL: skip it).
 * Embedded NULs are refused: names and metadata are C strings here. */
int js_string(Js *j, char **out)
{
    if (js_expect(j, '"') < 0) return -1;
    char *buf = NULL;
    size_t len = 0;
    if (out) {
        /* decoded text is never longer than the encoded text */
        const char *q = j->p;
        while (q < j->end && *q != '"') {
            if (*q == '\\' && q + 1 < j->end) q++;
            q++;
        }
        if (!(buf = malloc((size_t)(q - j->p) + 1))) return js_fail(j, "out of memory");
    }
    for (;;) {
        if (j->p >= j->end) {
            free(buf);
            return js_fail(j, "unterminated string");
        }
        unsigned char c = (unsigned char)*j->p++;
        if (c == '"') break;
        if (c < 0x20) {
            free(buf);
            return js_fail(j, "control character in string");
        }
        if (c != '\\') {
            if (buf) buf[len++] = (char)c;
            continue;
        }
        if (j->p >= j->end) {
            free(buf);
            return js_fail(j, "unterminated escape");
        }
        char e = *j->p++;
        unsigned cp;
        switch (e) {
        case '"': cp = '"'; break;
        case '\\': cp = '\\'; break;
        case '/': cp = '/'; break;
        case 'b': cp = '\b'; break;
        case 'f': cp = '\f'; break;
        case 'n': cp = '\n'; break;
        case 'r': cp = '\r'; break;
        case 't': cp = '\t'; break;
        case 'u':
            if (js_hex4(j, &cp) < 0) {
                free(buf);
                return -1;
            }
            if (cp >= 0xdc00 && cp <= 0xdfff) {
                free(buf);
                return js_fail(j, "lone low surrogate");
            }
            if (cp >= 0xd800 && cp <= 0xdbff) {
                unsigned lo;
                if (j->end - j->p < 2 || j->p[0] != '\\' || j->p[1] != 'u') {
                    free(buf);
                    return js_fail(j, "lone high surrogate");
                }
                j->p += 2;
                if (js_hex4(j, &lo) < 0) {
                    free(buf);
                    return -1;
                }
                if (lo < 0xdc00 || lo > 0xdfff) {
                    free(buf);
                    return js_fail(j, "bad surrogate pair");
                }
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            }
            if (cp == 0) {
                free(buf);
                return js_fail(j, "NUL in string");
            }
            break;
        default: free(buf); return js_fail(j, "bad escape '\\%c'", e >= 0x20 && e < 0x7f ? e : '?');
        }
        if (!buf) continue;
        /* UTF-8 of cp; an escape is at least 2 source bytes, a surrogate
         * pair 12, so the output still fits in the buffer. */
        if (cp < 0x80) {
            buf[len++] = (char)cp;
        } else if (cp < 0x800) {
            buf[len++] = (char)(0xc0 | cp >> 6);
            buf[len++] = (char)(0x80 | (cp & 0x3f));
        } else if (cp < 0x10000) {
            buf[len++] = (char)(0xe0 | cp >> 12);
            buf[len++] = (char)(0x80 | ((cp >> 6) & 0x3f));
            buf[len++] = (char)(0x80 | (cp & 0x3f));
        } else {
            buf[len++] = (char)(0xf0 | cp >> 18);
            buf[len++] = (char)(0x80 | ((cp >> 12) & 0x3f));
            buf[len++] = (char)(0x80 | ((cp >> 6) & 0x3f));
            buf[len++] = (char)(0x80 | (cp & 0x3f));
        }
    }
    if (buf) {
        buf[len] = '\0';
        *out = buf;
    }
    return 0;
}

/* A non-negative integer without sign, fraction or exponent, < 2^63. */
int js_uint(Js *j, uint64_t *out)
{
    js_ws(j);
    if (j->p >= j->end || *j->p < '0' || *j->p > '9') return js_fail(j, "expected a non-negative integer");
    if (*j->p == '0' && j->end - j->p > 1 && j->p[1] >= '0' && j->p[1] <= '9') return js_fail(j, "leading zero");
    uint64_t v = 0;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
        unsigned d = (unsigned)(*j->p - '0');
        if (v > (UINT64_C(0x7fffffffffffffff) - d) / 10) return js_fail(j, "integer too large");
        v = v * 10 + d;
        j->p++;
    }
    if (j->p < j->end && (*j->p == '.' || *j->p == 'e' || *j->p == 'E'))
        return js_fail(j, "expected an integer, not a fraction");
    *out = v;
    return 0;
}


/* Any JSON number, skipped (only inside keys we do not use). */
static int js_skip_number(Js *j)
{
    const char *p = j->p;
    if (p < j->end && *p == '-') p++;
    if (p >= j->end || *p < '0' || *p > '9') return js_fail(j, "bad value");
    if (*p == '0')
        p++;
    else
        while (p < j->end && *p >= '0' && *p <= '9') p++;
    if (p < j->end && *p == '.') {
        p++;
        if (p >= j->end || *p < '0' || *p > '9') return js_fail(j, "bad number");
        while (p < j->end && *p >= '0' && *p <= '9') p++;
    }
    if (p < j->end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < j->end && (*p == '+' || *p == '-')) p++;
        if (p >= j->end || *p < '0' || *p > '9') return js_fail(j, "bad number");
        while (p < j->end && *p >= '0' && *p <= '9') p++;
    }
    j->p = p;
    return 0;
}

int js_skip_value(Js *j, int depth)
{
    if (depth > ST_MAX_DEPTH) return js_fail(j, "nested too deeply");
    js_ws(j);
    if (j->p >= j->end) return js_fail(j, "expected a value, header ends");
    char c = *j->p;
    if (c == '"') return js_string(j, NULL);
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        j->p++;
        js_ws(j);
        if (j->p < j->end && *j->p == close) {
            j->p++;
            return 0;
        }
        for (;;) {
            if (c == '{' && (js_string(j, NULL) < 0 || js_expect(j, ':') < 0)) return -1;
            if (js_skip_value(j, depth + 1) < 0) return -1;
            js_ws(j);
            if (j->p < j->end && *j->p == ',') {
                j->p++;
                continue;
            }
            return js_expect(j, close);
        }
    }
    static const char *const lits[] = { "true", "false", "null" };
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(lits[i]);
        if ((size_t)(j->end - j->p) >= n && memcmp(j->p, lits[i], n) == 0) {
            j->p += n;
            return 0;
        }
    }
    return js_skip_number(j);
}

/* After an element: ',' (returns 1: more) or the closing char (returns 0). */
int js_next(Js *j, char close)
{
    js_ws(j);
    if (j->p < j->end && *j->p == ',') {
        j->p++;
        return 1;
    }
    return js_expect(j, close) < 0 ? -1 : 0;
}

/* '{' then either '}' (returns 0: empty) or nothing consumed (returns 1). */
int js_open(Js *j, char open, char close)
{
    if (js_expect(j, open) < 0) return -1;
    js_ws(j);
    if (j->p < j->end && *j->p == close) {
        j->p++;
        return 0;
    }
    return 1;
}

