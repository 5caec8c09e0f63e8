/* codec_scan.h — reading msgpack objects in place, for codec_decode.c
 * alone (which includes it, so that these inline into its loops, as redis's
 * ae.c includes its backend): scan_one checks an object against the bytes
 * there are and reads it; read_one reads one already checked. Static
 * functions, no state: safe from any thread.
 */
#ifndef DDPTOP_CODEC_SCAN_H
#define DDPTOP_CODEC_SCAN_H

#include <inttypes.h>
#include <string.h>

#include <msgpack.h>

#include "wire/codec_priv.h"
#include "base/err.h"

/* ---- reading objects in place ---------------------------------------------
 * read_one trusts the lengths: only for what scan_one (below) checked. */

/* A big-endian integer of n bytes (msgpack's widths: 1, 2, 4, 8). One load
 * and a byte swap: the byte-by-byte loop was a fifth of the decoder's own
 * time (perf, 64 ranks). */
static uint64_t be(const uint8_t *p, size_t n)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    switch (n) {
    case 1: return p[0];
    case 2: {
        uint16_t v;
        memcpy(&v, p, 2);
        return __builtin_bswap16(v);
    }
    case 4: {
        uint32_t v;
        memcpy(&v, p, 4);
        return __builtin_bswap32(v);
    }
    case 8: {
        uint64_t v;
        memcpy(&v, p, 8);
        return __builtin_bswap64(v);
    }
    default: break;
    }
#endif
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) v = (v << 8) | p[i];
    return v;
}

static void set_int(msgpack_object *o, int64_t v)
{
    if (v < 0) {
        o->type = MSGPACK_OBJECT_NEGATIVE_INTEGER;
        o->via.i64 = v;
    } else {
        o->type = MSGPACK_OBJECT_POSITIVE_INTEGER;
        o->via.u64 = (uint64_t)v;
    }
}

/* The object at p[*pos] as msgpack-c would make it, header only: a scalar
 * complete (strings, bins and exts pointing into p), a container's size set
 * and its pointer NULL; *pos moves past what was read (a container's
 * entries follow). Returns the objects a container holds (2 per map entry),
 * 0 for a scalar. */
static uint64_t read_one(const uint8_t *p, size_t *pos, msgpack_object *o)
{
    uint8_t c = p[(*pos)++];
    size_t n = 0;
    if (c <= 0x7f) {
        o->type = MSGPACK_OBJECT_POSITIVE_INTEGER;
        o->via.u64 = c;
        return 0;
    }
    if (c >= 0xe0) {
        set_int(o, (int8_t)c);
        return 0;
    }
    if (c >= 0xa0 && c <= 0xbf) { /* fixstr: most keys and short values */
        o->type = MSGPACK_OBJECT_STR;
        o->via.str.size = c & 0x1f;
        o->via.str.ptr = (const char *)p + *pos;
        *pos += c & 0x1f;
        return 0;
    }
    if (c <= 0x8f || c == 0xde || c == 0xdf) {
        n = c <= 0x8f ? (c & 0x0f) : be(p + *pos, c == 0xde ? 2 : 4);
        if (c > 0x8f) *pos += c == 0xde ? 2 : 4;
        o->type = MSGPACK_OBJECT_MAP;
        o->via.map.size = (uint32_t)n;
        o->via.map.ptr = NULL;
        return 2 * (uint64_t)n;
    }
    if (c <= 0x9f || c == 0xdc || c == 0xdd) {
        n = c <= 0x9f ? (c & 0x0f) : be(p + *pos, c == 0xdc ? 2 : 4);
        if (c > 0x9f) *pos += c == 0xdc ? 2 : 4;
        o->type = MSGPACK_OBJECT_ARRAY;
        o->via.array.size = (uint32_t)n;
        o->via.array.ptr = NULL;
        return n;
    }
    switch (c) {
    case 0xc0: o->type = MSGPACK_OBJECT_NIL; return 0;
    case 0xc2:
    case 0xc3:
        o->type = MSGPACK_OBJECT_BOOLEAN;
        o->via.boolean = c == 0xc3;
        return 0;
    case 0xc4:
    case 0xc5:
    case 0xc6:
    case 0xd9:
    case 0xda:
    case 0xdb: {
        size_t h = (c == 0xd9 || c == 0xc4) ? 1 : (c == 0xda || c == 0xc5) ? 2 : 4;
        n = be(p + *pos, h);
        *pos += h;
        o->type = c <= 0xc6 ? MSGPACK_OBJECT_BIN : MSGPACK_OBJECT_STR;
        o->via.str.size = (uint32_t)n; /* str and bin share the layout */
        o->via.str.ptr = (const char *)p + *pos;
        *pos += n;
        return 0;
    }
    case 0xca: {
        uint32_t u = (uint32_t)be(p + *pos, 4);
        float f;
        memcpy(&f, &u, 4);
        o->type = MSGPACK_OBJECT_FLOAT32;
        o->via.f64 = f;
        *pos += 4;
        return 0;
    }
    case 0xcb: {
        uint64_t u = be(p + *pos, 8);
        double d;
        memcpy(&d, &u, 8);
        o->type = MSGPACK_OBJECT_FLOAT64;
        o->via.f64 = d;
        *pos += 8;
        return 0;
    }
    case 0xcc:
    case 0xcd:
    case 0xce:
    case 0xcf: {
        size_t w = (size_t)1 << (c - 0xcc);
        o->type = MSGPACK_OBJECT_POSITIVE_INTEGER;
        o->via.u64 = be(p + *pos, w);
        *pos += w;
        return 0;
    }
    case 0xd0: set_int(o, (int8_t)p[*pos]), *pos += 1; return 0;
    case 0xd1: set_int(o, (int16_t)be(p + *pos, 2)), *pos += 2; return 0;
    case 0xd2: set_int(o, (int32_t)be(p + *pos, 4)), *pos += 4; return 0;
    case 0xd3: set_int(o, (int64_t)be(p + *pos, 8)), *pos += 8; return 0;
    default: { /* ext: fixext 1-16 (0xd4-0xd8) or ext 8/16/32 (0xc7-0xc9) */
        if (c >= 0xd4 && c <= 0xd8) {
            n = (size_t)1 << (c - 0xd4);
        } else {
            size_t h = c == 0xc7 ? 1 : c == 0xc8 ? 2 : 4;
            n = be(p + *pos, h);
            *pos += h;
        }
        o->type = MSGPACK_OBJECT_EXT;
        o->via.ext.type = (int8_t)p[*pos];
        o->via.ext.size = (uint32_t)n;
        o->via.ext.ptr = (const char *)p + *pos + 1;
        *pos += 1 + n;
        return 0;
    }
    }
}

/* Past the children objects of a container read with read_one. */
static size_t skip_objects(const uint8_t *p, size_t pos, uint64_t children)
{
    msgpack_object o;
    while (children) {
        children--;
        children += read_one(p, &pos, &o);
    }
    return pos;
}

/* ---- checked reading: the bound between hostile bytes and the decoder -----
 * msgpack-c allocates an array's or a map's objects from the count in its
 * header before reading them, and recurses as deep as the data says; a
 * decoder trusting a length reads past the frame. Every object is checked
 * here before read_one reads it, iteratively and without allocating:
 * lying lengths and counts, reserved bytes, truncation, nesting past
 * CODEC_MAX_DEPTH and more than CODEC_MAX_OBJECTS objects are refused with
 * the byte they happen at (docs/PROTOCOL.md, "Limits"); trailing bytes by
 * the callers. */

/* scan_one's general case: the object whose type byte p[*pos] is (the
 * frame holds it), any form. */
static int scan_any(const uint8_t *p, size_t len, size_t *pos, int depth, msgpack_object *o, uint64_t *children,
                    char *err, size_t errlen)
{
    size_t at = *pos;
    uint8_t c = p[at];
    size_t q = at + 1;
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
        if (len - q < hlen) return err_set(err, errlen, "truncated msgpack: %s header at byte %zu cut short", what, at);
        uint64_t v = be(p + q, hlen);
        q += hlen;
        if (container)
            count = v;
        else
            skip = v + payload_base;
    }
    size_t rem = len - q;
    if (container) {
        /* Each entry takes at least one byte, so a count larger than the
         * bytes left is a lie (and would size an allocation). */
        if (count > rem / per_entry)
            return err_set(err, errlen,
                           "malformed msgpack: %s at byte %zu declares %" PRIu64 " entries but only %zu bytes follow",
                           what, at, count, rem);
        if (depth + 1 > CODEC_MAX_DEPTH)
            return err_set(err, errlen, "malformed msgpack: nesting deeper than %d at byte %zu", CODEC_MAX_DEPTH, at);
    } else if (skip > rem) {
        if (what)
            return err_set(err, errlen,
                           "malformed msgpack: %s at byte %zu declares %" PRIu64 " bytes but only %zu follow", what, at,
                           skip - payload_base, rem);
        return err_set(err, errlen, "truncated msgpack: value at byte %zu cut short", at);
    }
    *children = read_one(p, pos, o);
    return 0;
}

/* The object at p[*pos] of a frame of len bytes, sitting at nesting level
 * depth (0: the frame's one object), the next of *objects: checked, then
 * read as read_one reads it (*children: its objects), *pos past what was
 * read. 0, or -1 with err. The forms a message's keys and values mostly
 * take are checked and read here at once. */
__attribute__((always_inline)) static inline int scan_one(const uint8_t *p, size_t len, size_t *pos, uint64_t *objects,
                                                          int depth, msgpack_object *o, uint64_t *children, char *err,
                                                          size_t errlen)
{
    size_t at = *pos;
    if (at >= len) return err_set(err, errlen, "truncated msgpack: frame ends at byte %zu inside the message", len);
    if (++*objects > CODEC_MAX_OBJECTS)
        return err_set(err, errlen, "frame holds more than %u msgpack objects", CODEC_MAX_OBJECTS);
    uint8_t c = p[at];
    size_t rem = len - at - 1;
    *children = 0;
    if (c <= 0x7f) {
        o->type = MSGPACK_OBJECT_POSITIVE_INTEGER;
        o->via.u64 = c;
        *pos = at + 1;
        return 0;
    }
    if (c >= 0xa0 && c <= 0xbf) {
        size_t n = c & 0x1f;
        if (n > rem)
            return err_set(err, errlen, "malformed msgpack: str at byte %zu declares %zu bytes but only %zu follow", at,
                           n, rem);
        o->type = MSGPACK_OBJECT_STR;
        o->via.str.size = (uint32_t)n;
        o->via.str.ptr = (const char *)p + at + 1;
        *pos = at + 1 + n;
        return 0;
    }
    if (c == 0xcb || (c >= 0xcc && c <= 0xcf)) {
        size_t w = c == 0xcb ? 8 : (size_t)1 << (c - 0xcc);
        if (w > rem) return err_set(err, errlen, "truncated msgpack: value at byte %zu cut short", at);
        uint64_t u = be(p + at + 1, w);
        if (c == 0xcb) {
            o->type = MSGPACK_OBJECT_FLOAT64;
            memcpy(&o->via.f64, &u, 8);
        } else {
            o->type = MSGPACK_OBJECT_POSITIVE_INTEGER;
            o->via.u64 = u;
        }
        *pos = at + 1 + w;
        return 0;
    }
    return scan_any(p, len, pos, depth, o, children, err, errlen);
}

/* The children objects of a container scan_one read (they sit at level
 * depth), each checked; *pos past them. 0, or -1 with err. */
static int scan_children(const uint8_t *p, size_t len, size_t *pos, uint64_t *objects, int depth, uint64_t children,
                         char *err, size_t errlen)
{
    uint64_t left[CODEC_MAX_DEPTH + 1]; /* objects still due per open container */
    int d = depth;
    left[d] = children;
    for (;;) {
        while (d >= depth && left[d] == 0) d--;
        if (d < depth) return 0;
        left[d]--;
        msgpack_object o;
        uint64_t n;
        if (scan_one(p, len, pos, objects, d, &o, &n, err, errlen) < 0) return -1;
        if (n) left[++d] = n;
    }
}

/* One whole object at p[*pos] (and what it holds) at level depth, checked. */
__attribute__((always_inline)) static inline int scan_value(const uint8_t *p, size_t len, size_t *pos,
                                                            uint64_t *objects, int depth, msgpack_object *o,
                                                            size_t *body, char *err, size_t errlen)
{
    uint64_t n;
    if (scan_one(p, len, pos, objects, depth, o, &n, err, errlen) < 0) return -1;
    *body = *pos;
    return n ? scan_children(p, len, pos, objects, depth + 1, n, err, errlen) : 0;
}

static int trailing_error(size_t len, size_t pos, char *err, size_t errlen)
{
    return err_set(err, errlen, "malformed msgpack: %zu bytes of trailing garbage after byte %zu", len - pos, pos);
}

/* The whole frame checked, as the decoder reads it (codec_store_key). */
static int prescan(const uint8_t *p, size_t len, char *err, size_t errlen)
{
    size_t pos = 0, body;
    uint64_t objects = 0;
    msgpack_object o;
    if (scan_value(p, len, &pos, &objects, 0, &o, &body, err, errlen) < 0) return -1;
    return pos == len ? 0 : trailing_error(len, pos, err, errlen);
}

#endif
