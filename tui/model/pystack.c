/* pystack.c — faulthandler's dump picked out of a rank's log. See
 * pystack.h. The format is CPython's Python/traceback.c: a header per
 * thread, then one line per frame, innermost first, each starting with
 * two spaces ("  File ...", "  <no Python frame>", "  ...").
 */
#include "model/pystack.h"

#include <stdbool.h>
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
