/* json.h — the one JSON writer of every tree: objects, arrays, keys and
 * scalars streamed to a FILE or into a growing buffer. The writer places
 * the commas; strings are escaped by one rule; numbers that JSON cannot
 * hold (NaN, infinities) become null.
 *
 * Owns: separators, escaping, number formatting. Does not own the stream
 * (the caller opens, flushes and checks it) nor what the document means.
 * Plain data on the caller's stack; one writer per thread.
 */
#ifndef DDPTOP_JSON_H
#define DDPTOP_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Deeper nesting marks the writer failed (the codec stops at 16). */
#define JSON_DEPTH_MAX 64

typedef struct {
    FILE *f;   /* the stream, or NULL: the buffer below */
    char *buf; /* buffer mode: NUL-terminated, malloc'd */
    size_t len, cap;
    bool spaced; /* ", " and ": " (Python's json.dumps) */
    bool failed; /* out of memory or too deep */
    bool placed; /* the next value needs no separator */
    int depth;
    bool has[JSON_DEPTH_MAX + 1]; /* the container at depth i has members */
} Json;

/* A writer onto f (json_done is then optional), or into a buffer that
 * json_done frees. Set j->spaced after init for ", " and ": ". */
void json_init_file(Json *j, FILE *f);
void json_init_buf(Json *j);
void json_done(Json *j);

/* Buffer mode: the text so far and its length in *len (out, may be NULL);
 * NULL when the writer failed. */
const char *json_buf(const Json *j, size_t *len);
/* True when the writer failed or its stream has a write error. */
bool json_failed(const Json *j);

/* Containers: open, then members (a key before each value in an object),
 * then close. */
void json_obj(Json *j);
void json_obj_end(Json *j);
void json_arr(Json *j);
void json_arr_end(Json *j);
void json_key(Json *j, const char *k);
void json_keyn(Json *j, const char *k, size_t n);

/* A string: quotes, backslashes and control characters escaped, each
 * byte that is not part of well-formed UTF-8 (base/utf8.h) written as
 * U+FFFD, so the output is valid JSON whatever the input held. */
void json_str(Json *j, const char *s);
void json_strn(Json *j, const char *s, size_t n);
/* Bytes as a string of lower-case hex digits. */
void json_hex(Json *j, const void *data, size_t n);

void json_int(Json *j, int64_t v);
void json_uint(Json *j, uint64_t v);
void json_bool(Json *j, bool v);
void json_null(Json *j);
/* The shortest %g that reads back as v, with ".0" when it looks integral,
 * so readers see a float. */
void json_double(Json *j, double v);
/* printf's "%.*f" (fixed decimals) and "%.*g" (significant digits). */
void json_fixed(Json *j, double v, int decimals);
void json_sig(Json *j, double v, int digits);
/* A value the caller has already written as JSON text (a number). */
void json_raw(Json *j, const char *text);

/* A key and its value in one call. */
void json_kv_str(Json *j, const char *k, const char *v);
void json_kv_int(Json *j, const char *k, int64_t v);
void json_kv_uint(Json *j, const char *k, uint64_t v);
void json_kv_bool(Json *j, const char *k, bool v);
void json_kv_double(Json *j, const char *k, double v);
void json_kv_fixed(Json *j, const char *k, double v, int decimals);
void json_kv_sig(Json *j, const char *k, double v, int digits);

/* Layout: the next member starts a new line (its comma, if any, is written
 * first); and text outside any value, such as the newline that ends a JSON
 * lines record. */
void json_break(Json *j);
void json_text(Json *j, const char *s);

/* The text json_double writes, without the ".0": the shortest "%.15g" to
 * "%.17g" that reads back as v (into buf[n]), for other text formats. */
void json_shortest(char *buf, size_t n, double v);

#endif
