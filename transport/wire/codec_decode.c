/* codec_decode.c — msgpack frame -> Msg, for every kind, driven by
 * codec_fields.c's tables; and the key of a refused store request.
 *
 * No object tree: one walk over the frame checks every object before it
 * is read (scan_one: the bound between hostile bytes and the decoder) and
 * keeps the top-level map's keys and values where they lie; a second, over
 * those kept entries, decodes the kind's fields (an array's entries read
 * one by one). Nothing is allocated but a kind's own arrays (shard indices,
 * store values, burst items), and the Msg is cleared once, for the kind it
 * turns out to be.
 * Results and error texts are those of the tree-based decoder this
 * replaced (tests/ref/codec_ref.h, compared in tests/unit/test_codec.c).
 * codec_decode tries the fast path first (codec_fast.c: the common kinds
 * as our encoders write them, in one pass) and runs this walk for every
 * frame it does not take; codec_decode_checked is the walk alone.
 * Does not own encoding (codec_encode.c) or burst rules (codec_burst.c).
 * Pure functions, no globals: safe from any thread.
 */
#include "wire/codec.h"
#include "wire/codec_priv.h"
#include "wire/codec_scan.h"
#include "base/err.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <msgpack.h>

/* One value of the top-level map: the object, and where its entries (if a
 * container) begin. */
typedef struct {
    msgpack_object o;
    size_t body;
} Val;

/* a[0..n) == b[0..n), a word at a time (keys run to 13 bytes): the words
 * overlap rather than read past n. */
static inline bool bytes_eq(const char *a, const char *b, size_t n)
{
    if (n >= 8) {
        uint64_t x, y;
        for (size_t i = 0; i + 8 < n; i += 8) {
            memcpy(&x, a + i, 8), memcpy(&y, b + i, 8);
            if (x != y) return false;
        }
        memcpy(&x, a + n - 8, 8), memcpy(&y, b + n - 8, 8);
        return x == y;
    }
    if (n >= 4) {
        uint32_t x, y, u, w;
        memcpy(&x, a, 4), memcpy(&y, b, 4), memcpy(&u, a + n - 4, 4), memcpy(&w, b + n - 4, 4);
        return x == y && u == w;
    }
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) return false;
    return true;
}

/* A kind's or a phase's wire name -> its index, 0 if none. Compared over
 * the whole length: "step\0junk" is not "step". */
static int name_index(const char *(*name)(int), int count, const char *s, size_t n)
{
    if (n == 0 || n >= PROTO_STR_SHORT) return 0;
    for (int i = 1; i < count; i++) {
        const char *t = name(i);
        if (t[0] == s[0] && strlen(t) == n && bytes_eq(t, s, n)) return i;
    }
    return 0;
}

static const char *kind_name_at(int i) { return msg_kind_name((MsgKind)i); }
static const char *phase_name_at(int i) { return phase_name((Phase)i); }

Phase codec_phase_from(const char *s, size_t n) { return (Phase)name_index(phase_name_at, PHASE__COUNT, s, n); }

/* ---- the fields ----------------------------------------------------------- */

/* 0 ok, -1 not an integer, -2 does not fit int64. */
static int obj_i64(const msgpack_object *o, int64_t *v)
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

static int int_error(int rc, const char *kind, const char *key, char *err, size_t errlen)
{
    if (rc == -1) return err_set(err, errlen, "%s: key \"%s\" is not an integer", kind, key);
    return err_set(err, errlen, "%s: key \"%s\" is out of range", kind, key);
}

static const char *obj_type_name(msgpack_object_type t)
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

/* Decode one known key's value (read in place at val) into m. */
static int decode_field(const uint8_t *p, const Val *val, Msg *m, const char *kind, const CodecField *f, char *err,
                        size_t errlen)
{
    const msgpack_object *o = &val->o;
    char *base = (char *)m + f->off;
    int rc;

    switch (f->type) {
    case F_I32: {
        int64_t v = 0;
        rc = obj_i64(o, &v);
        if (rc == 0 && (v < INT32_MIN || v > INT32_MAX)) rc = -2;
        if (rc) return int_error(rc, kind, f->key, err, errlen);
        int32_t w = (int32_t)v;
        memcpy(base, &w, sizeof w);
        return 0;
    }
    case F_I64: {
        int64_t v = 0;
        if ((rc = obj_i64(o, &v))) return int_error(rc, kind, f->key, err, errlen);
        if (v > PROTO_INT_MAX || v < -PROTO_INT_MAX) return int_error(-2, kind, f->key, err, errlen);
        memcpy(base, &v, sizeof v);
        return 0;
    }
    case F_ARG: {
        int64_t v = 0;
        if ((rc = obj_i64(o, &v))) return int_error(rc, kind, f->key, err, errlen);
        memcpy(base, &v, sizeof v);
        return 0;
    }
    case F_U64: {
        if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
            return err_set(err, errlen, "%s: key \"%s\" is negative", kind, f->key);
        if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER) return int_error(-1, kind, f->key, err, errlen);
        uint64_t v = o->via.u64;
        if (v > (uint64_t)PROTO_INT_MAX) return int_error(-2, kind, f->key, err, errlen);
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
        Phase ph = codec_phase_from(o->via.str.ptr, o->via.str.size);
        memcpy(base, &ph, sizeof ph);
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
        size_t at = val->body;
        for (uint32_t i = 0; i < n; i++) {
            msgpack_object e;
            read_one(p, &at, &e); /* a container here is refused before its entries matter */
            if ((rc = obj_i64(&e, &idx[i]))) {
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
    case F_TEXT: {
        MsgStack *st = &m->u.stack;
        if (o->type != MSGPACK_OBJECT_STR && o->type != MSGPACK_OBJECT_BIN)
            return err_set(err, errlen, "%s: key \"%s\" is not a string", kind, f->key);
        uint32_t n = o->type == MSGPACK_OBJECT_STR ? o->via.str.size : o->via.bin.size;
        const char *src = o->type == MSGPACK_OBJECT_STR ? o->via.str.ptr : o->via.bin.ptr;
        /* longer: cut, as a fixed string is, and said in "cut" */
        if (n > PROTO_MAX_STACK_BYTES) {
            n = PROTO_MAX_STACK_BYTES, st->cut = true;
            while (n > 0 && ((unsigned char)src[n] & 0xC0) == 0x80) n--; /* not inside a character */
        }
        char *v = malloc((size_t)n + 1);
        if (!v) return err_set(err, errlen, "%s: out of memory for %" PRIu32 " bytes of text", kind, n);
        free(st->text); /* a repeated key replaces, it does not leak */
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
        size_t total = 0, at = val->body;
        for (uint32_t i = 0; i < n; i++) {
            msgpack_object e;
            read_one(p, &at, &e);
            if (e.type != MSGPACK_OBJECT_BIN)
                return err_set(err, errlen, "%s: key \"%s\" entry %" PRIu32 " is a msgpack %s, not a bin", kind, f->key,
                               i, obj_type_name(e.type));
            total += codec_bin_hdr_len(e.via.bin.size) + e.via.bin.size; /* within the frame's 8 MiB */
        }
        free(bu->items);
        bu->items = NULL;
        bu->n = bu->len = 0;
        if (n == 0) return 0;
        uint8_t *items = malloc(total);
        if (!items) return err_set(err, errlen, "%s: out of memory for %zu bytes of messages", kind, total);
        size_t put = 0;
        at = val->body;
        for (uint32_t i = 0; i < n; i++) {
            msgpack_object e;
            read_one(p, &at, &e);
            put += codec_bin_hdr_put(items + put, e.via.bin.size);
            if (e.via.bin.size) memcpy(items + put, e.via.bin.ptr, e.via.bin.size);
            put += e.via.bin.size;
        }
        bu->items = items;
        bu->n = n;
        bu->len = (uint32_t)total;
        return 0;
    }
    }
    return err_set(err, errlen, "%s: key \"%s\": internal error", kind, f->key);
}

/* ---- the message ---------------------------------------------------------- */

/* Top-level entries kept from the first walk for the second (a step has 18);
 * a map with more is walked again from the first one not kept. */
#define KEPT_ENTRIES 32

typedef struct {
    const char *key;
    uint32_t klen;
    Val val;
} Entry;

/* The value at p[*pos] -> *v; *pos past it, entries and all. */
static void read_value(const uint8_t *p, size_t *pos, Val *v)
{
    uint64_t children = read_one(p, pos, &v->o);
    v->body = *pos;
    *pos = skip_objects(p, *pos, children);
}

/* The entry at p[*pos] (its key known to be a string), *pos past it. */
static void read_entry(const uint8_t *p, size_t *pos, Entry *e)
{
    msgpack_object k;
    read_one(p, pos, &k);
    e->key = k.via.str.ptr;
    e->klen = k.via.str.size;
    read_value(p, pos, &e->val);
}

/* The frame p[0..len) -> *m: codec_decode's returns. *m is touched (and
 * *inited set) only once the frame proved whole and its kind is known, so
 * it is cleared once a message. */
static int decode_map(const uint8_t *p, size_t len, Msg *m, bool *inited, char *err, size_t errlen)
{
    size_t pos = 0, body;
    uint64_t objects = 0, children;
    msgpack_object top;
    if (scan_one(p, len, &pos, &objects, 0, &top, &children, err, errlen) < 0) return -1;
    if (top.type != MSGPACK_OBJECT_MAP) {
        if (children && scan_children(p, len, &pos, &objects, 1, children, err, errlen) < 0) return -1;
        if (pos != len) return trailing_error(len, pos, err, errlen);
        return err_set(err, errlen, "message is a msgpack %s, not a map", obj_type_name(top.type));
    }
    uint32_t n = top.via.map.size;
    Entry kept[KEPT_ENTRIES];
    const Val *ov = NULL, *ok = NULL, *orank = NULL, *ot = NULL;
    Val env[4];      /* the envelope's values past the kept entries */
    size_t rest = 0; /* where entry KEPT_ENTRIES begins */
    int64_t bad_key = -1;
    msgpack_object_type bad_type = MSGPACK_OBJECT_NIL;

    /* Walk 1, over the whole frame, checking every object: keys are
     * strings (the first that is not is named once the frame proved whole);
     * find the envelope keys wherever they are (our encoder puts "v","k"
     * first, but a reader need not insist), a repeated one as its last. */
    for (uint32_t i = 0; i < n; i++) {
        if (i == KEPT_ENTRIES) rest = pos;
        msgpack_object k;
        Entry tmp, *e = i < KEPT_ENTRIES ? &kept[i] : &tmp;
        if (scan_value(p, len, &pos, &objects, 1, &k, &body, err, errlen) < 0 ||
            scan_value(p, len, &pos, &objects, 1, &e->val.o, &e->val.body, err, errlen) < 0)
            return -1;
        if (k.type != MSGPACK_OBJECT_STR && bad_key < 0) bad_key = i, bad_type = k.type;
        if (bad_key >= 0) continue;
        e->key = k.via.str.ptr;
        e->klen = k.via.str.size;
        if (e->klen != 1) continue;
        const Val **slot = NULL;
        int which = 0;
        switch (e->key[0]) {
        case 'v': slot = &ov, which = 0; break;
        case 'k': slot = &ok, which = 1; break;
        case 'r': slot = &orank, which = 2; break;
        case 't': slot = &ot, which = 3; break;
        default: break;
        }
        if (!slot) continue;
        if (e == &tmp) {
            env[which] = tmp.val;
            *slot = &env[which];
        } else {
            *slot = &e->val;
        }
    }
    if (pos != len) return trailing_error(len, pos, err, errlen);
    if (bad_key >= 0)
        return err_set(err, errlen, "map key %" PRId64 " is a msgpack %s, not a string", bad_key,
                       obj_type_name(bad_type));

    if (!ov) return err_set(err, errlen, "missing key \"v\" (protocol version)");
    int64_t v;
    const msgpack_object *o = &ov->o;
    if (obj_i64(o, &v) == -1) return err_set(err, errlen, "key \"v\" is not an integer");
    if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 > INT64_MAX)
        return err_set(err, errlen, "protocol version %" PRIu64 ", this build speaks %d", o->via.u64, PROTO_VERSION);
    if (v != PROTO_VERSION)
        return err_set(err, errlen, "protocol version %" PRId64 ", this build speaks %d", v, PROTO_VERSION);
    if (!ok) return err_set(err, errlen, "missing key \"k\" (message kind)");
    if (ok->o.type != MSGPACK_OBJECT_STR) return err_set(err, errlen, "key \"k\" is not a string");

    const char *ks = ok->o.via.str.ptr;
    uint32_t kl = ok->o.via.str.size;
    MsgKind kind = (MsgKind)name_index(kind_name_at, MSG__COUNT, ks, kl);
    msg_init(m, kind);
    *inited = true;
    m->version = (int32_t)v;
    const char *kn = msg_kind_name(kind);

    if (orank) {
        int64_t r = 0;
        int rc = obj_i64(&orank->o, &r);
        if (rc == 0 && (r < INT32_MIN || r > INT32_MAX)) rc = -2;
        if (rc) return int_error(rc, kn, "r", err, errlen);
        m->rank = (int32_t)r;
    }
    if (ot) {
        int rc = obj_i64(&ot->o, &m->t_ns);
        if (rc) return int_error(rc, kn, "t", err, errlen);
        if (m->t_ns > PROTO_INT_MAX || m->t_ns < -PROTO_INT_MAX) return int_error(-2, kn, "t", err, errlen);
    }

    /* a burst is one rank's: its sender is checked by that rank */
    if (kind == MSG_BURST && (!orank || m->rank < 0))
        return err_set(err, errlen, "burst: key \"r\" is missing or negative");

    if (kind == MSG_UNKNOWN) {
        char shown[PROTO_STR_SHORT];
        codec_utf8_copy(shown, sizeof shown, ks, kl);
        err_set(err, errlen, "unknown kind \"%s\"", shown);
        return 1;
    }

    /* Walk 2: the kind's own keys; anything else is skipped (a newer peer).
     * Each key is looked for from the field after the last one found, so
     * keys in the table's order (as codec_encode writes them) cost one
     * comparison each; any other order still finds every key. */
    const CodecField *f = codec_kind_fields[kind].f;
    size_t nf = codec_kind_fields[kind].n;
    size_t next = 0;
    pos = rest;
    for (uint32_t i = 0; i < n; i++) {
        Entry tmp, *e = &tmp;
        if (i < KEPT_ENTRIES)
            e = &kept[i];
        else
            read_entry(p, &pos, &tmp);
        /* no kind has a field named like an envelope key: not looked for */
        if (e->klen == 1 && (e->key[0] == 'v' || e->key[0] == 'k' || e->key[0] == 'r' || e->key[0] == 't')) continue;
        for (size_t t = 0; t < nf; t++) {
            size_t j = next + t < nf ? next + t : next + t - nf;
            if (e->klen == f[j].klen && bytes_eq(e->key, f[j].key, f[j].klen)) {
                if (decode_field(p, &e->val, m, kn, &f[j], err, errlen) < 0) return -1;
                next = j + 1 < nf ? j + 1 : 0;
                break;
            }
        }
    }
    return 0;
}

int codec_decode_checked(const void *frame, size_t len, Msg *out, char *err, size_t errlen)
{
    if (!frame || len == 0) {
        msg_init(out, MSG_UNKNOWN);
        return err_set(err, errlen, "empty frame");
    }
    if (len > PROTO_MAX_FRAME_BYTES) {
        msg_init(out, MSG_UNKNOWN);
        return err_set(err, errlen, "frame of %zu bytes exceeds the %u-byte limit", len, PROTO_MAX_FRAME_BYTES);
    }
    bool inited = false;
    int rc = decode_map(frame, len, out, &inited, err, errlen);
    if (rc < 0) {
        /* On error nothing is left for the caller to free. */
        if (inited) msg_done(out);
        msg_init(out, MSG_UNKNOWN);
    }
    return rc;
}

/* The frames ddptop meets by the thousand a second (step, coll, beat and
 * burst, as our encoders write them) take the fast path; it vouches only
 * for frames the walk accepts, and leaves every other to the walk. */
int codec_decode(const void *frame, size_t len, Msg *out, char *err, size_t errlen)
{
    if (frame && len && len <= PROTO_MAX_FRAME_BYTES && codec_fast_decode(frame, len, out) == 0) return 0;
    return codec_decode_checked(frame, len, out, err, errlen);
}

/* Only the envelope and "key": a refused set still names the key it was
 * for, so the store can answer it (PROTOCOL.md: every request gets a reply). */
int codec_store_key(const void *frame, size_t len, MsgKind *kind, char *key, size_t keylen)
{
    char err[8];
    if (!frame || len == 0 || len > PROTO_MAX_FRAME_BYTES || !keylen || prescan(frame, len, err, sizeof err) < 0)
        return -1;
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    size_t off = 0;
    int rc = -1;
    MsgKind k = MSG_UNKNOWN;
    bool have_key = false, have_v = false;
    if (msgpack_unpack_next(&up, frame, len, &off) == MSGPACK_UNPACK_SUCCESS && up.data.type == MSGPACK_OBJECT_MAP) {
        const msgpack_object_map *map = &up.data.via.map;
        for (uint32_t i = 0; i < map->size; i++) {
            const msgpack_object *ko = &map->ptr[i].key, *vo = &map->ptr[i].val;
            if (ko->type != MSGPACK_OBJECT_STR) continue;
            if (ko->via.str.size == 1 && ko->via.str.ptr[0] == 'v')
                have_v = vo->type == MSGPACK_OBJECT_POSITIVE_INTEGER && vo->via.u64 == PROTO_VERSION;
            if (ko->via.str.size == 1 && ko->via.str.ptr[0] == 'k' && vo->type == MSGPACK_OBJECT_STR) {
                char name[PROTO_STR_SHORT];
                if (vo->via.str.size < sizeof name && !memchr(vo->via.str.ptr, 0, vo->via.str.size)) {
                    memcpy(name, vo->via.str.ptr, vo->via.str.size);
                    name[vo->via.str.size] = 0;
                    k = msg_kind_from_name(name);
                }
            }
            if (ko->via.str.size == 3 && !memcmp(ko->via.str.ptr, "key", 3) && vo->type == MSGPACK_OBJECT_STR) {
                codec_utf8_copy(key, keylen < PROTO_STR_MED ? keylen : PROTO_STR_MED, vo->via.str.ptr,
                                vo->via.str.size);
                have_key = true;
            }
        }
        if (have_v && have_key && (k == MSG_SET || k == MSG_GET || k == MSG_WAIT)) rc = 0;
    }
    msgpack_unpacked_destroy(&up);
    if (rc == 0 && kind) *kind = k;
    return rc;
}
