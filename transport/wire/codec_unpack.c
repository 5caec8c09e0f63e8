/* codec_unpack.c — msgpack bytes the pre-scan accepted -> msgpack_object
 * tree, in one pass into a reused per-thread array: what msgpack-c's
 * msgpack_unpack_next did for codec_decode, without a zone allocated and
 * freed per message (bench-tui, 256 ranks: msgpack-c was the largest share
 * of decoding). Same objects as msgpack-c makes (types, strings and bins
 * pointing into the frame), so codec.c reads them unchanged. Safe from any
 * thread (each has its own array).
 */
#include "wire/codec_priv.h"

#include <stdlib.h>
#include <string.h>

/* The array is kept between calls up to this size; a larger one (a shard's
 * index list) is freed after its message. */
#define UNPACK_KEEP_OBJECTS 4096

static _Thread_local msgpack_object *pool;
static _Thread_local size_t pool_cap;

static uint64_t be(const uint8_t *p, size_t n)
{
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

/* One open container: where its next child goes and how many remain. */
typedef struct {
    msgpack_object *next;
    uint64_t left;
} Open;

/* The object at p[*pos], header only: scalars complete, a container's size
 * set (its children follow). Returns the child count of a container, 0 for
 * a scalar. The pre-scan has checked every length. */
static uint64_t read_one(const uint8_t *p, size_t *pos, msgpack_object *o, bool *is_map)
{
    uint8_t c = p[(*pos)++];
    size_t n = 0;
    *is_map = false;
    if (c <= 0x7f) {
        set_int(o, c);
        return 0;
    }
    if (c >= 0xe0) {
        set_int(o, (int8_t)c);
        return 0;
    }
    if (c <= 0x8f || c == 0xde || c == 0xdf) {
        n = c <= 0x8f ? (c & 0x0f) : be(p + *pos, c == 0xde ? 2 : 4);
        if (c > 0x8f) *pos += c == 0xde ? 2 : 4;
        o->type = MSGPACK_OBJECT_MAP;
        o->via.map.size = (uint32_t)n;
        *is_map = true;
        return n;
    }
    if (c <= 0x9f || c == 0xdc || c == 0xdd) {
        n = c <= 0x9f ? (c & 0x0f) : be(p + *pos, c == 0xdc ? 2 : 4);
        if (c > 0x9f) *pos += c == 0xdc ? 2 : 4;
        o->type = MSGPACK_OBJECT_ARRAY;
        o->via.array.size = (uint32_t)n;
        return n;
    }
    if (c <= 0xbf || c == 0xd9 || c == 0xda || c == 0xdb || c == 0xc4 || c == 0xc5 || c == 0xc6) {
        size_t h = c <= 0xbf ? 0 : (c == 0xd9 || c == 0xc4) ? 1 : (c == 0xda || c == 0xc5) ? 2 : 4;
        n = c <= 0xbf ? (c & 0x1f) : be(p + *pos, h);
        *pos += h;
        bool bin = c >= 0xc4 && c <= 0xc6;
        o->type = bin ? MSGPACK_OBJECT_BIN : MSGPACK_OBJECT_STR;
        o->via.str.size = (uint32_t)n; /* str and bin share the layout */
        o->via.str.ptr = (const char *)p + *pos;
        *pos += n;
        return 0;
    }
    switch (c) {
    case 0xc0: o->type = MSGPACK_OBJECT_NIL; break;
    case 0xc2:
    case 0xc3:
        o->type = MSGPACK_OBJECT_BOOLEAN;
        o->via.boolean = c == 0xc3;
        break;
    case 0xca: {
        uint32_t u = (uint32_t)be(p + *pos, 4);
        float f;
        memcpy(&f, &u, 4);
        o->type = MSGPACK_OBJECT_FLOAT32;
        o->via.f64 = f;
        *pos += 4;
        break;
    }
    case 0xcb: {
        uint64_t u = be(p + *pos, 8);
        double d;
        memcpy(&d, &u, 8);
        o->type = MSGPACK_OBJECT_FLOAT64;
        o->via.f64 = d;
        *pos += 8;
        break;
    }
    case 0xcc:
    case 0xcd:
    case 0xce:
    case 0xcf: {
        size_t w = (size_t)1 << (c - 0xcc);
        o->type = MSGPACK_OBJECT_POSITIVE_INTEGER;
        o->via.u64 = be(p + *pos, w);
        *pos += w;
        break;
    }
    case 0xd0: set_int(o, (int8_t)p[*pos]), *pos += 1; break;
    case 0xd1: set_int(o, (int16_t)be(p + *pos, 2)), *pos += 2; break;
    case 0xd2: set_int(o, (int32_t)be(p + *pos, 4)), *pos += 4; break;
    case 0xd3: set_int(o, (int64_t)be(p + *pos, 8)), *pos += 8; break;
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
        break;
    }
    }
    return 0;
}

int codec_unpack(const uint8_t *p, size_t len, uint64_t objects, msgpack_object *root)
{
    (void)len;
    /* a map's entry is two objects in place (key, value): msgpack_object_kv
     * is exactly two msgpack_objects, so one array serves maps and arrays */
    if (objects > pool_cap) {
        msgpack_object *np = malloc((size_t)objects * sizeof *np);
        if (!np) return -1;
        free(pool);
        pool = np;
        pool_cap = objects;
    }
    msgpack_object *bump = pool;
    Open open[CODEC_MAX_DEPTH + 1];
    int depth = -1;
    size_t pos = 0;
    msgpack_object *o = root;
    for (;;) {
        bool is_map;
        uint64_t n = read_one(p, &pos, o, &is_map);
        if (n) {
            uint64_t slots = is_map ? 2 * n : n;
            if (is_map)
                o->via.map.ptr = (msgpack_object_kv *)(void *)bump;
            else
                o->via.array.ptr = bump;
            open[++depth] = (Open){ bump, slots };
            bump += slots;
        } else if (o->type == MSGPACK_OBJECT_MAP) {
            o->via.map.ptr = NULL;
        } else if (o->type == MSGPACK_OBJECT_ARRAY) {
            o->via.array.ptr = NULL;
        }
        while (depth >= 0 && open[depth].left == 0) depth--;
        if (depth < 0) return 0;
        o = open[depth].next++;
        open[depth].left--;
    }
}

void codec_unpack_release(void)
{
    if (pool_cap <= UNPACK_KEEP_OBJECTS) return;
    free(pool);
    pool = NULL;
    pool_cap = 0;
}
