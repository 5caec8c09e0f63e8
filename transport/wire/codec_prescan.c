/* codec_prescan.c — the bounded walk that stands between hostile bytes and
 * msgpack-c (docs/PROTOCOL.md, "Limits"): iterative, allocation-free,
 * refusing lying lengths and counts, reserved bytes, truncation, trailing
 * bytes, nesting past CODEC_MAX_DEPTH and more than CODEC_MAX_OBJECTS
 * objects. codec.c runs it before every decode (codec_unpack.c then reads
 * what it accepted). Pure, safe from any thread.
 */
#include "wire/codec_priv.h"
#include "base/err.h"

#include <inttypes.h>

/* ---- pre-scan -------------------------------------------------------------
 * msgpack-c allocates an array's or a map's objects from the count in its
 * header before reading them, and recurses as deep as the data says. Walk
 * the bytes first, iteratively and without allocating, and refuse anything
 * whose declared sizes do not fit in what is actually there. */

static uint64_t be_read(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) v = (v << 8) | p[i];
    return v;
}

int codec_prescan(const uint8_t *p, size_t len, uint64_t *n_objects, char *err, size_t errlen)
{
    uint64_t left[CODEC_MAX_DEPTH + 1]; /* objects still due per open container */
    int depth = 0;                      /* left[0]: the one top-level object */
    size_t pos = 0;
    uint64_t objects = 0;

    left[0] = 1;
    for (;;) {
        while (depth >= 0 && left[depth] == 0) depth--;
        if (depth < 0) break;
        left[depth]--;

        if (pos >= len)
            return err_set(err, errlen, "truncated msgpack: frame ends at byte %zu inside the message", len);
        if (++objects > CODEC_MAX_OBJECTS)
            return err_set(err, errlen, "frame holds more than %u msgpack objects", CODEC_MAX_OBJECTS);

        size_t at = pos;
        uint8_t c = p[pos++];
        size_t hlen = 0;   /* length bytes following the type byte */
        uint64_t skip = 0; /* payload bytes after those */
        uint64_t payload_base = 0;
        uint64_t count = 0; /* child objects, for containers */
        int container = 0, per_entry = 1;
        const char *what = NULL;

        if (c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3) {
            /* fixint, nil, bool: the type byte is all */
        } else if (c <= 0x8f) {
            count = c & 0x0f, container = 1, per_entry = 2, what = "map";
        } else if (c <= 0x9f) {
            count = c & 0x0f, container = 1, what = "array";
        } else if (c <= 0xbf) {
            skip = c & 0x1f, what = "str";
        } else {
            switch (c) {
            case 0xc4: hlen = 1, what = "bin"; break;
            case 0xc5: hlen = 2, what = "bin"; break;
            case 0xc6: hlen = 4, what = "bin"; break;
            case 0xc7: hlen = 1, payload_base = 1, what = "ext"; break;
            case 0xc8: hlen = 2, payload_base = 1, what = "ext"; break;
            case 0xc9: hlen = 4, payload_base = 1, what = "ext"; break;
            case 0xca: skip = 4; break;
            case 0xcb: skip = 8; break;
            case 0xcc:
            case 0xd0: skip = 1; break;
            case 0xcd:
            case 0xd1: skip = 2; break;
            case 0xce:
            case 0xd2: skip = 4; break;
            case 0xcf:
            case 0xd3: skip = 8; break;
            case 0xd4: skip = 2; break;
            case 0xd5: skip = 3; break;
            case 0xd6: skip = 5; break;
            case 0xd7: skip = 9; break;
            case 0xd8: skip = 17; break;
            case 0xd9: hlen = 1, what = "str"; break;
            case 0xda: hlen = 2, what = "str"; break;
            case 0xdb: hlen = 4, what = "str"; break;
            case 0xdc: hlen = 2, container = 1, what = "array"; break;
            case 0xdd: hlen = 4, container = 1, what = "array"; break;
            case 0xde: hlen = 2, container = 1, per_entry = 2, what = "map"; break;
            case 0xdf: hlen = 4, container = 1, per_entry = 2, what = "map"; break;
            default: /* 0xc1 is reserved */
                return err_set(err, errlen, "malformed msgpack: byte 0x%02x at %zu is not a type", c, at);
            }
        }
        if (hlen) {
            if (len - pos < hlen)
                return err_set(err, errlen, "truncated msgpack: %s header at byte %zu cut short", what, at);
            uint64_t v = be_read(p + pos, hlen);
            pos += hlen;
            if (container)
                count = v;
            else
                skip = v + payload_base;
        }
        size_t rem = len - pos;
        if (container) {
            /* Each entry takes at least one byte, so a count larger than the
             * bytes left is a lie (and would size msgpack-c's allocation). */
            if (count > rem / per_entry)
                return err_set(err, errlen,
                               "malformed msgpack: %s at byte %zu declares %" PRIu64
                               " entries but only %zu bytes follow",
                               what, at, count, rem);
            if (depth + 1 > CODEC_MAX_DEPTH)
                return err_set(err, errlen, "malformed msgpack: nesting deeper than %d at byte %zu", CODEC_MAX_DEPTH,
                               at);
            if (count) {
                depth++;
                left[depth] = count * per_entry;
            }
        } else if (skip > rem) {
            if (what)
                return err_set(err, errlen,
                               "malformed msgpack: %s at byte %zu declares %" PRIu64 " bytes but only %zu follow", what,
                               at, skip - payload_base, rem);
            return err_set(err, errlen, "truncated msgpack: value at byte %zu cut short", at);
        } else {
            pos += (size_t)skip;
        }
    }
    if (pos != len)
        return err_set(err, errlen, "malformed msgpack: %zu bytes of trailing garbage after byte %zu", len - pos, pos);
    if (n_objects) *n_objects = objects;
    return 0;
}
