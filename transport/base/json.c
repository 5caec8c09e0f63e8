/* json.c — see json.h. */
#include "base/json.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"

void json_init_file(Json *j, FILE *f)
{
    memset(j, 0, sizeof *j);
    j->f = f;
}

void json_init_buf(Json *j) { memset(j, 0, sizeof *j); }

void json_done(Json *j)
{
    free(j->buf);
    j->buf = NULL;
    j->len = j->cap = 0;
}

const char *json_buf(const Json *j, size_t *len)
{
    if (len) *len = j->failed ? 0 : j->len;
    if (j->failed) return NULL;
    return j->buf ? j->buf : "";
}

bool json_failed(const Json *j) { return j->failed || (j->f && ferror(j->f)); }

/* ---- output ---- */

static void put(Json *j, const char *s, size_t n)
{
    if (j->f) {
        fwrite(s, 1, n, j->f);
        return;
    }
    if (j->failed) return;
    if (j->len + n + 1 > j->cap) {
        size_t cap = j->cap ? j->cap : 256;
        while (cap < j->len + n + 1) cap *= 2;
        char *p = realloc(j->buf, cap);
        if (!p) {
            j->failed = true;
            return;
        }
        j->buf = p;
        j->cap = cap;
    }
    memcpy(j->buf + j->len, s, n);
    j->len += n;
    j->buf[j->len] = '\0';
}

static void puts_(Json *j, const char *s) { put(j, s, strlen(s)); }

/* Before every value and key: the comma its container needs. */
static void sep(Json *j)
{
    if (j->placed) {
        j->placed = false;
        return;
    }
    if (j->depth == 0) return;
    if (j->has[j->depth]) puts_(j, j->spaced ? ", " : ",");
    j->has[j->depth] = true;
}

/* ---- containers ---- */

static void open_(Json *j, char c)
{
    sep(j);
    put(j, &c, 1);
    if (j->depth == JSON_DEPTH_MAX) {
        j->failed = true;
        return;
    }
    j->has[++j->depth] = false;
}

static void close_(Json *j, char c)
{
    if (j->depth > 0) j->depth--;
    j->placed = false;
    put(j, &c, 1);
}

void json_obj(Json *j) { open_(j, '{'); }
void json_obj_end(Json *j) { close_(j, '}'); }
void json_arr(Json *j) { open_(j, '['); }
void json_arr_end(Json *j) { close_(j, ']'); }

static void str_body(Json *j, const char *s, size_t n);

void json_keyn(Json *j, const char *k, size_t n)
{
    sep(j);
    str_body(j, k, n);
    puts_(j, j->spaced ? ": " : ":");
    j->placed = true;
}

void json_key(Json *j, const char *k) { json_keyn(j, k, strlen(k)); }

/* ---- strings ---- */

/* The quoted string; plain runs go out in one write. */
static void str_body(Json *j, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    put(j, "\"", 1);
    size_t run = 0, i = 0;
    while (i < n) {
        unsigned c = p[i];
        size_t k = c >= 0x80 ? utf8_seq(p + i, n - i) : 1;
        bool plain = c >= 0x20 && c != 0x7f && c != '"' && c != '\\' && k;
        if (plain) {
            i += k;
            continue;
        }
        put(j, s + run, i - run);
        char esc[8];
        switch (c) {
        case '"': puts_(j, "\\\""); break;
        case '\\': puts_(j, "\\\\"); break;
        case '\n': puts_(j, "\\n"); break;
        case '\r': puts_(j, "\\r"); break;
        case '\t': puts_(j, "\\t"); break;
        case '\b': puts_(j, "\\b"); break;
        case '\f': puts_(j, "\\f"); break;
        default:
            if (c < 0x80) {
                snprintf(esc, sizeof esc, "\\u%04x", c);
                puts_(j, esc);
            } else {
                puts_(j, "\\ufffd"); /* ill-formed: one per byte */
            }
        }
        run = ++i;
    }
    put(j, s + run, n - run);
    put(j, "\"", 1);
}

void json_strn(Json *j, const char *s, size_t n)
{
    sep(j);
    str_body(j, s, n);
}

void json_str(Json *j, const char *s) { json_strn(j, s, strlen(s)); }

void json_hex(Json *j, const void *data, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    const unsigned char *p = data;
    sep(j);
    put(j, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        char h[2] = { digits[p[i] >> 4], digits[p[i] & 15] };
        put(j, h, 2);
    }
    put(j, "\"", 1);
}

/* ---- scalars ---- */

void json_raw(Json *j, const char *text)
{
    sep(j);
    puts_(j, text);
}

void json_int(Json *j, int64_t v)
{
    char b[24];
    snprintf(b, sizeof b, "%" PRId64, v);
    json_raw(j, b);
}

void json_uint(Json *j, uint64_t v)
{
    char b[24];
    snprintf(b, sizeof b, "%" PRIu64, v);
    json_raw(j, b);
}

void json_bool(Json *j, bool v) { json_raw(j, v ? "true" : "false"); }
void json_null(Json *j) { json_raw(j, "null"); }

void json_shortest(char *buf, size_t n, double v)
{
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) return;
    }
}

void json_double(Json *j, double v)
{
    if (!isfinite(v)) {
        json_null(j);
        return;
    }
    char b[40];
    json_shortest(b, sizeof b - 2, v);
    if (!strpbrk(b, ".eE")) strcat(b, ".0");
    json_raw(j, b);
}

/* printf of one finite double, or null. */
static void number(Json *j, const char *fmt, int prec, double v)
{
    if (!isfinite(v)) {
        json_null(j);
        return;
    }
    char b[352]; /* %.Nf of DBL_MAX is 309 digits and the decimals */
    snprintf(b, sizeof b, fmt, prec, v);
    json_raw(j, b);
}

void json_fixed(Json *j, double v, int decimals) { number(j, "%.*f", decimals, v); }
void json_sig(Json *j, double v, int digits) { number(j, "%.*g", digits, v); }

/* ---- key and value ---- */

void json_kv_str(Json *j, const char *k, const char *v)
{
    json_key(j, k);
    json_str(j, v);
}
void json_kv_int(Json *j, const char *k, int64_t v)
{
    json_key(j, k);
    json_int(j, v);
}
void json_kv_uint(Json *j, const char *k, uint64_t v)
{
    json_key(j, k);
    json_uint(j, v);
}
void json_kv_bool(Json *j, const char *k, bool v)
{
    json_key(j, k);
    json_bool(j, v);
}
void json_kv_double(Json *j, const char *k, double v)
{
    json_key(j, k);
    json_double(j, v);
}
void json_kv_fixed(Json *j, const char *k, double v, int decimals)
{
    json_key(j, k);
    json_fixed(j, v, decimals);
}
void json_kv_sig(Json *j, const char *k, double v, int digits)
{
    json_key(j, k);
    json_sig(j, v, digits);
}

/* ---- layout ---- */

void json_break(Json *j)
{
    sep(j);
    put(j, "\n", 1);
    j->placed = true;
}

void json_text(Json *j, const char *s) { puts_(j, s); }
