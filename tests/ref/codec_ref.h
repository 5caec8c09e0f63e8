/* codec_ref.h — the frame decoder as it was before the one-pass reader
 * (main at eadc782: codec_prescan, then codec_unpack's msgpack_object tree,
 * then decode_map's walk over it), kept as a reference for tests and the
 * benchmark only: test_codec.c compares ref_decode with codec_decode on
 * every kind and on mutated frames (Msg, return code, error text), and
 * proves ref_unpack makes the tree msgpack-c's msgpack_unpack_next makes;
 * tools/bench_codec.c times both. Shares only the field tables and the
 * UTF-8 copy with production (codec_priv.h): those did not change.
 * Header-only (static functions), one thread.
 */
#ifndef DDPTOP_TESTS_CODEC_REF_H
#define DDPTOP_TESTS_CODEC_REF_H

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <msgpack.h>

#include "base/err.h"
#include "wire/codec_priv.h"

/* ---- ref_prescan: codec_prescan.c as it was ---- */

static uint64_t ref_be_read(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) v = (v << 8) | p[i];
    return v;
}

/* noinline: on main it was its own file (codec_prescan.c), called across files */
__attribute__((noinline)) static int ref_prescan(const uint8_t *p, size_t len, uint64_t *n_objects, char *err,
                                                 size_t errlen)
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
            uint64_t v = ref_be_read(p + pos, hlen);
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

/* ---- ref_unpack: codec_unpack.c as it was ---- */

/* The array is kept between calls up to this size; a larger one (a shard's
 * index list) is freed after its message. */
#define REF_UNPACK_KEEP_OBJECTS 4096

static msgpack_object *ref_pool;
static size_t ref_pool_cap;

static uint64_t ref_be(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) v = (v << 8) | p[i];
    return v;
}

static void ref_set_int(msgpack_object *o, int64_t v)
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
} ref_Open;

/* The object at p[*pos], header only: scalars complete, a container's size
 * set (its children follow). Returns the child count of a container, 0 for
 * a scalar. The pre-scan has checked every length. */
static uint64_t ref_read_one(const uint8_t *p, size_t *pos, msgpack_object *o, bool *is_map)
{
    uint8_t c = p[(*pos)++];
    size_t n = 0;
    *is_map = false;
    if (c <= 0x7f) {
        ref_set_int(o, c);
        return 0;
    }
    if (c >= 0xe0) {
        ref_set_int(o, (int8_t)c);
        return 0;
    }
    if (c <= 0x8f || c == 0xde || c == 0xdf) {
        n = c <= 0x8f ? (c & 0x0f) : ref_be(p + *pos, c == 0xde ? 2 : 4);
        if (c > 0x8f) *pos += c == 0xde ? 2 : 4;
        o->type = MSGPACK_OBJECT_MAP;
        o->via.map.size = (uint32_t)n;
        *is_map = true;
        return n;
    }
    if (c <= 0x9f || c == 0xdc || c == 0xdd) {
        n = c <= 0x9f ? (c & 0x0f) : ref_be(p + *pos, c == 0xdc ? 2 : 4);
        if (c > 0x9f) *pos += c == 0xdc ? 2 : 4;
        o->type = MSGPACK_OBJECT_ARRAY;
        o->via.array.size = (uint32_t)n;
        return n;
    }
    if (c <= 0xbf || c == 0xd9 || c == 0xda || c == 0xdb || c == 0xc4 || c == 0xc5 || c == 0xc6) {
        size_t h = c <= 0xbf ? 0 : (c == 0xd9 || c == 0xc4) ? 1 : (c == 0xda || c == 0xc5) ? 2 : 4;
        n = c <= 0xbf ? (c & 0x1f) : ref_be(p + *pos, h);
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
        uint32_t u = (uint32_t)ref_be(p + *pos, 4);
        float f;
        memcpy(&f, &u, 4);
        o->type = MSGPACK_OBJECT_FLOAT32;
        o->via.f64 = f;
        *pos += 4;
        break;
    }
    case 0xcb: {
        uint64_t u = ref_be(p + *pos, 8);
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
        o->via.u64 = ref_be(p + *pos, w);
        *pos += w;
        break;
    }
    case 0xd0: ref_set_int(o, (int8_t)p[*pos]), *pos += 1; break;
    case 0xd1: ref_set_int(o, (int16_t)ref_be(p + *pos, 2)), *pos += 2; break;
    case 0xd2: ref_set_int(o, (int32_t)ref_be(p + *pos, 4)), *pos += 4; break;
    case 0xd3: ref_set_int(o, (int64_t)ref_be(p + *pos, 8)), *pos += 8; break;
    default: { /* ext: fixext 1-16 (0xd4-0xd8) or ext 8/16/32 (0xc7-0xc9) */
        if (c >= 0xd4 && c <= 0xd8) {
            n = (size_t)1 << (c - 0xd4);
        } else {
            size_t h = c == 0xc7 ? 1 : c == 0xc8 ? 2 : 4;
            n = ref_be(p + *pos, h);
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

/* noinline: on main it was its own file (codec_unpack.c) */
__attribute__((noinline)) static int ref_unpack(const uint8_t *p, size_t len, uint64_t objects, msgpack_object *root)
{
    (void)len;
    /* a map's entry is two objects in place (key, value): msgpack_object_kv
     * is exactly two msgpack_objects, so one array serves maps and arrays */
    if (objects > ref_pool_cap) {
        msgpack_object *np = malloc((size_t)objects * sizeof *np);
        if (!np) return -1;
        free(ref_pool);
        ref_pool = np;
        ref_pool_cap = objects;
    }
    msgpack_object *bump = ref_pool;
    ref_Open open[CODEC_MAX_DEPTH + 1];
    int depth = -1;
    size_t pos = 0;
    msgpack_object *o = root;
    for (;;) {
        bool is_map;
        uint64_t n = ref_read_one(p, &pos, o, &is_map);
        if (n) {
            uint64_t slots = is_map ? 2 * n : n;
            if (is_map)
                o->via.map.ptr = (msgpack_object_kv *)(void *)bump;
            else
                o->via.array.ptr = bump;
            open[++depth] = (ref_Open){ bump, slots };
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

static void ref_unpack_release(void)
{
    if (ref_pool_cap <= REF_UNPACK_KEEP_OBJECTS) return;
    free(ref_pool);
    ref_pool = NULL;
    ref_pool_cap = 0;
}

/* ---- ref_decode: codec.c's decoder as it was ---- */

static bool ref_key_is(const msgpack_object *k, const CodecField *f)
{
    return k->via.str.size == f->klen && memcmp(k->via.str.ptr, f->key, f->klen) == 0;
}

/* 0 ok, -1 not an integer, -2 does not fit int64. */
static int ref_obj_i64(const msgpack_object *o, int64_t *v)
{
    if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
        if (o->via.u64 > INT64_MAX) return -2;
        *v = (int64_t)o->via.u64;
        return 0;
    }
    if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
        *v = o->via.i64;
        return 0;
    }
    return -1;
}

static int ref_int_error(int rc, const char *kind, const char *key, char *err, size_t errlen)
{
    if (rc == -1) return err_set(err, errlen, "%s: key \"%s\" is not an integer", kind, key);
    return err_set(err, errlen, "%s: key \"%s\" is out of range", kind, key);
}

static const char *ref_obj_type_name(msgpack_object_type t);

/* Decode one known key's value into m. */
static int ref_decode_field(const msgpack_object *o, Msg *m, const CodecField *f, char *err, size_t errlen)
{
    char *base = (char *)m + f->off;
    const char *kind = msg_kind_name(m->kind);
    int rc;

    switch (f->type) {
    case F_I32: {
        int64_t v = 0;
        rc = ref_obj_i64(o, &v);
        if (rc == 0 && (v < INT32_MIN || v > INT32_MAX)) rc = -2;
        if (rc) return ref_int_error(rc, kind, f->key, err, errlen);
        int32_t w = (int32_t)v;
        memcpy(base, &w, sizeof w);
        return 0;
    }
    case F_I64: {
        int64_t v = 0;
        if ((rc = ref_obj_i64(o, &v))) return ref_int_error(rc, kind, f->key, err, errlen);
        if (v > PROTO_INT_MAX || v < -PROTO_INT_MAX) return ref_int_error(-2, kind, f->key, err, errlen);
        memcpy(base, &v, sizeof v);
        return 0;
    }
    case F_ARG: {
        int64_t v = 0;
        if ((rc = ref_obj_i64(o, &v))) return ref_int_error(rc, kind, f->key, err, errlen);
        memcpy(base, &v, sizeof v);
        return 0;
    }
    case F_U64: {
        if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
            return err_set(err, errlen, "%s: key \"%s\" is negative", kind, f->key);
        if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER) return ref_int_error(-1, kind, f->key, err, errlen);
        uint64_t v = o->via.u64;
        if (v > (uint64_t)PROTO_INT_MAX) return ref_int_error(-2, kind, f->key, err, errlen);
        memcpy(base, &v, sizeof v);
        return 0;
    }
    case F_F64: {
        double v;
        if (o->type == MSGPACK_OBJECT_FLOAT32 || o->type == MSGPACK_OBJECT_FLOAT64)
            v = o->via.f64;
        else if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
            v = (double)o->via.u64;
        else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
            v = (double)o->via.i64;
        else
            return err_set(err, errlen, "%s: key \"%s\" is not a number", kind, f->key);
        memcpy(base, &v, sizeof v);
        return 0;
    }
    case F_BOOL: {
        if (o->type != MSGPACK_OBJECT_BOOLEAN)
            return err_set(err, errlen, "%s: key \"%s\" is not a boolean", kind, f->key);
        bool v = o->via.boolean;
        memcpy(base, &v, sizeof v);
        return 0;
    }
    case F_STR:
        if (o->type != MSGPACK_OBJECT_STR) return err_set(err, errlen, "%s: key \"%s\" is not a string", kind, f->key);
        codec_utf8_copy(base, f->size, o->via.str.ptr, o->via.str.size);
        return 0;
    case F_PHASE: {
        if (o->type != MSGPACK_OBJECT_STR) return err_set(err, errlen, "%s: key \"%s\" is not a string", kind, f->key);
        /* A phase a newer peer added reads as PHASE_NONE, not as an error. */
        char name[PROTO_STR_SHORT];
        Phase p = PHASE_NONE;
        if (o->via.str.size < sizeof name && !memchr(o->via.str.ptr, 0, o->via.str.size)) {
            memcpy(name, o->via.str.ptr, o->via.str.size);
            name[o->via.str.size] = 0;
            p = phase_from_name(name);
        }
        memcpy(base, &p, sizeof p);
        return 0;
    }
    case F_IDX: {
        MsgShard *sh = &m->u.shard;
        if (o->type != MSGPACK_OBJECT_ARRAY)
            return err_set(err, errlen, "%s: key \"%s\" is not an array", kind, f->key);
        uint32_t n = o->via.array.size;
        if (n > PROTO_MAX_IDX)
            return err_set(err, errlen, "%s: key \"%s\" has %" PRIu32 " entries, more than the %u allowed", kind,
                           f->key, n, PROTO_MAX_IDX);
        /* A repeated key replaces, it does not leak. */
        free(sh->idx);
        sh->idx = NULL;
        sh->n_idx = 0;
        if (n == 0) return 0;
        int64_t *idx = malloc((size_t)n * sizeof *idx);
        if (!idx) return err_set(err, errlen, "%s: out of memory for %" PRIu32 " indices", kind, n);
        for (uint32_t i = 0; i < n; i++) {
            if ((rc = ref_obj_i64(&o->via.array.ptr[i], &idx[i]))) {
                free(idx);
                return err_set(err, errlen, "%s: key \"%s\" entry %" PRIu32 " is %s", kind, f->key, i,
                               rc == -1 ? "not an integer" : "out of range");
            }
        }
        sh->idx = idx;
        sh->n_idx = n;
        return 0;
    }
    case F_BIN: {
        MsgStore *st = &m->u.store;
        /* str is accepted too: a hand-written peer may send text values. */
        if (o->type != MSGPACK_OBJECT_BIN && o->type != MSGPACK_OBJECT_STR)
            return err_set(err, errlen, "%s: key \"%s\" is not binary", kind, f->key);
        uint32_t n = o->type == MSGPACK_OBJECT_BIN ? o->via.bin.size : o->via.str.size;
        const char *src = o->type == MSGPACK_OBJECT_BIN ? o->via.bin.ptr : o->via.str.ptr;
        if (n > PROTO_MAX_VAL_BYTES)
            return err_set(err, errlen, "%s: key \"%s\" is %" PRIu32 " bytes, more than the %u allowed", kind, f->key,
                           n, PROTO_MAX_VAL_BYTES);
        free(st->val);
        st->val = NULL;
        st->val_len = 0;
        if (n == 0) return 0;
        uint8_t *v = malloc(n);
        if (!v) return err_set(err, errlen, "%s: out of memory for a %" PRIu32 "-byte value", kind, n);
        memcpy(v, src, n);
        st->val = v;
        st->val_len = n;
        return 0;
    }
    case F_TEXT: { /* came after the reference: as codec_decode.c has it */
        MsgStack *st = &m->u.stack;
        if (o->type != MSGPACK_OBJECT_STR && o->type != MSGPACK_OBJECT_BIN)
            return err_set(err, errlen, "%s: key \"%s\" is not a string", kind, f->key);
        uint32_t n = o->type == MSGPACK_OBJECT_STR ? o->via.str.size : o->via.bin.size;
        const char *src = o->type == MSGPACK_OBJECT_STR ? o->via.str.ptr : o->via.bin.ptr;
        if (n > PROTO_MAX_STACK_BYTES) {
            n = PROTO_MAX_STACK_BYTES, st->cut = true;
            while (n > 0 && ((unsigned char)src[n] & 0xC0) == 0x80) n--; /* not inside a character */
        }
        char *v = malloc((size_t)n + 1);
        if (!v) return err_set(err, errlen, "%s: out of memory for %" PRIu32 " bytes of text", kind, n);
        free(st->text);
        st->len = (uint32_t)codec_utf8_copy(v, (size_t)n + 1, src, n);
        st->text = v;
        return 0;
    }
    case F_BURST: {
        MsgBurst *bu = &m->u.burst;
        if (o->type != MSGPACK_OBJECT_ARRAY)
            return err_set(err, errlen, "%s: key \"%s\" is not an array", kind, f->key);
        uint32_t n = o->via.array.size;
        if (n > PROTO_MAX_BURST)
            return err_set(err, errlen, "%s: key \"%s\" has %" PRIu32 " messages, more than the %u allowed", kind,
                           f->key, n, PROTO_MAX_BURST);
        size_t total = 0;
        for (uint32_t i = 0; i < n; i++) {
            const msgpack_object *e = &o->via.array.ptr[i];
            if (e->type != MSGPACK_OBJECT_BIN)
                return err_set(err, errlen, "%s: key \"%s\" entry %" PRIu32 " is a msgpack %s, not a bin", kind, f->key,
                               i, ref_obj_type_name(e->type));
            total += codec_bin_hdr_len(e->via.bin.size) + e->via.bin.size; /* within the frame's 8 MiB */
        }
        free(bu->items);
        bu->items = NULL;
        bu->n = bu->len = 0;
        if (n == 0) return 0;
        uint8_t *p = malloc(total);
        if (!p) return err_set(err, errlen, "%s: out of memory for %zu bytes of messages", kind, total);
        size_t at = 0;
        for (uint32_t i = 0; i < n; i++) {
            const msgpack_object *e = &o->via.array.ptr[i];
            at += codec_bin_hdr_put(p + at, e->via.bin.size);
            if (e->via.bin.size) memcpy(p + at, e->via.bin.ptr, e->via.bin.size);
            at += e->via.bin.size;
        }
        bu->items = p;
        bu->n = n;
        bu->len = (uint32_t)total;
        return 0;
    }
    }
    return err_set(err, errlen, "%s: key \"%s\": internal error", kind, f->key);
}

static const char *ref_obj_type_name(msgpack_object_type t)
{
    switch (t) {
    case MSGPACK_OBJECT_NIL: return "nil";
    case MSGPACK_OBJECT_BOOLEAN: return "boolean";
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: return "integer";
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64: return "float";
    case MSGPACK_OBJECT_STR: return "string";
    case MSGPACK_OBJECT_ARRAY: return "array";
    case MSGPACK_OBJECT_MAP: return "map";
    case MSGPACK_OBJECT_BIN: return "bin";
    case MSGPACK_OBJECT_EXT: return "ext";
    }
    return "unknown type";
}

static int ref_decode_map(const msgpack_object *top, Msg *m, char *err, size_t errlen)
{
    if (top->type != MSGPACK_OBJECT_MAP)
        return err_set(err, errlen, "message is a msgpack %s, not a map", ref_obj_type_name(top->type));

    const msgpack_object_kv *kv = top->via.map.ptr;
    uint32_t n = top->via.map.size;
    const msgpack_object *ov = NULL, *ok = NULL, *orank = NULL, *ot = NULL;

    /* Pass 1: keys are strings; find the envelope keys wherever they are
     * (our encoder puts "v","k" first, but a reader need not insist). */
    for (uint32_t i = 0; i < n; i++) {
        const msgpack_object *k = &kv[i].key;
        if (k->type != MSGPACK_OBJECT_STR)
            return err_set(err, errlen, "map key %" PRIu32 " is a msgpack %s, not a string", i,
                           ref_obj_type_name(k->type));
        if (k->via.str.size != 1) continue;
        switch (k->via.str.ptr[0]) {
        case 'v': ov = &kv[i].val; break;
        case 'k': ok = &kv[i].val; break;
        case 'r': orank = &kv[i].val; break;
        case 't': ot = &kv[i].val; break;
        default: break;
        }
    }

    if (!ov) return err_set(err, errlen, "missing key \"v\" (protocol version)");
    int64_t v;
    if (ref_obj_i64(ov, &v) == -1) return err_set(err, errlen, "key \"v\" is not an integer");
    if (ov->type == MSGPACK_OBJECT_POSITIVE_INTEGER && ov->via.u64 > INT64_MAX)
        return err_set(err, errlen, "protocol version %" PRIu64 ", this build speaks %d", ov->via.u64, PROTO_VERSION);
    if (v != PROTO_VERSION)
        return err_set(err, errlen, "protocol version %" PRId64 ", this build speaks %d", v, PROTO_VERSION);
    if (!ok) return err_set(err, errlen, "missing key \"k\" (message kind)");
    if (ok->type != MSGPACK_OBJECT_STR) return err_set(err, errlen, "key \"k\" is not a string");

    char kname[PROTO_STR_SHORT];
    MsgKind kind = MSG_UNKNOWN;
    /* "step\0junk" is not "step" */
    if (ok->via.str.size < sizeof kname && !memchr(ok->via.str.ptr, 0, ok->via.str.size)) {
        memcpy(kname, ok->via.str.ptr, ok->via.str.size);
        kname[ok->via.str.size] = 0;
        kind = msg_kind_from_name(kname);
    }
    msg_init(m, kind);
    m->version = (int32_t)v;
    const char *kn = msg_kind_name(kind);

    if (orank) {
        int64_t r = 0;
        int rc = ref_obj_i64(orank, &r);
        if (rc == 0 && (r < INT32_MIN || r > INT32_MAX)) rc = -2;
        if (rc) return ref_int_error(rc, kn, "r", err, errlen);
        m->rank = (int32_t)r;
    }
    if (ot) {
        int rc = ref_obj_i64(ot, &m->t_ns);
        if (rc) return ref_int_error(rc, kn, "t", err, errlen);
        if (m->t_ns > PROTO_INT_MAX || m->t_ns < -PROTO_INT_MAX) return ref_int_error(-2, kn, "t", err, errlen);
    }

    /* a burst is one rank's: its sender is checked by that rank */
    if (kind == MSG_BURST && (!orank || m->rank < 0))
        return err_set(err, errlen, "burst: key \"r\" is missing or negative");

    if (kind == MSG_UNKNOWN) {
        char shown[PROTO_STR_SHORT];
        codec_utf8_copy(shown, sizeof shown, ok->via.str.ptr, ok->via.str.size);
        err_set(err, errlen, "unknown kind \"%s\"", shown);
        return 1;
    }

    /* Pass 2: the kind's own keys; anything else is skipped (a newer peer).
     * Each key is looked for from the field after the last one found, so
     * keys in the table's order (as codec_encode writes them) cost one
     * comparison each; any other order still finds every key. */
    const CodecField *f = codec_kind_fields[kind].f;
    size_t nf = codec_kind_fields[kind].n;
    size_t next = 0;
    for (uint32_t i = 0; i < n; i++) {
        for (size_t t = 0; t < nf; t++) {
            size_t j = next + t < nf ? next + t : next + t - nf;
            if (ref_key_is(&kv[i].key, &f[j])) {
                if (ref_decode_field(&kv[i].val, m, &f[j], err, errlen) < 0) return -1;
                next = j + 1 < nf ? j + 1 : 0;
                break;
            }
        }
    }
    return 0;
}

/* noinline: codec_decode, called from other files */
__attribute__((noinline)) static int ref_decode(const void *frame, size_t len, Msg *out, char *err, size_t errlen)
{
    msg_init(out, MSG_UNKNOWN);
    if (!frame || len == 0) return err_set(err, errlen, "empty frame");
    if (len > PROTO_MAX_FRAME_BYTES)
        return err_set(err, errlen, "frame of %zu bytes exceeds the %u-byte limit", len, PROTO_MAX_FRAME_BYTES);
    uint64_t n_objects = 0;
    if (ref_prescan(frame, len, &n_objects, err, errlen) < 0) return -1;

    msgpack_object root;
    int rc;
    if (ref_unpack(frame, len, n_objects, &root) < 0)
        rc = err_set(err, errlen, "out of memory decoding a %zu-byte frame", len);
    else
        rc = ref_decode_map(&root, out, err, errlen);
    ref_unpack_release();

    if (rc < 0) {
        /* On error nothing is left for the caller to free. */
        msg_done(out);
        msg_init(out, MSG_UNKNOWN);
    }
    return rc;
}

#endif
