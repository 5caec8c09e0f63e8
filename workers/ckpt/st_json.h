/* st_json.h — the strict JSON reader of safetensors headers (st_json.c),
 * inside workers/ckpt only: just what a header needs (objects, arrays,
 * strings with every escape and UTF-8 checked, unsigned integers; other
 * values skipped, nesting at most ST_MAX_DEPTH). A failure returns -1 and
 * the first one writes "PATH: bad header at byte N: WHAT" into err; later
 * ones add nothing. Pure, any thread.
 */
#ifndef DDPTOP_ST_JSON_H
#define DDPTOP_ST_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ST_MAX_DEPTH 64 /* nesting inside skipped values */

typedef struct {
    const char *start, *p, *end;
    const char *path;
    char *err;
    size_t errlen;
    bool failed;
} Js;

int js_fail(Js *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void js_ws(Js *j);
int js_expect(Js *j, char c);
/* A string; *out (when out is not NULL) a malloc'd NUL-terminated copy. */
int js_string(Js *j, char **out);
int js_uint(Js *j, uint64_t *out);
int js_skip_value(Js *j, int depth);
/* After a member: 1 when another follows (','), 0 at `close`. */
int js_next(Js *j, char close);
/* `open`, then 1 when a member follows, 0 when `close` comes at once. */
int js_open(Js *j, char open, char close);

#endif
