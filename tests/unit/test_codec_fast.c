/* test_codec_fast.c — codec_decode's fast path (transport/wire/codec_fast.c)
 * against the checked walk it stands in front of (codec_decode_checked).
 *
 * For every input both give the same return code, the same error text
 * (none written on success) and the same Msg: every byte a decode defines
 * (the envelope and the kind's member, msg_defined_bytes), the heap parts
 * by content. Each decode reads an exact-size heap copy (ASan in a SAN=1
 * build) into a Msg filled with other garbage each time, so a byte the
 * fast path forgets to write shows. Inputs: messages of every kind with
 * random field values as codec_encode writes them, then the same entries
 * shuffled, swapped, dropped, repeated, retyped, with unknown keys, in
 * other msgpack forms; bursts of such messages; random mutations (byte
 * flips, insertions, deletions, cuts) of all of these; and every cut and
 * every byte value at every offset of a canonical step, coll, beat and
 * burst. The fast path must also take every canonical frame of its kinds
 * that the walk accepts, or it would pass by never running.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <msgpack.h>

#include "check.h"
#include "wire/codec.h"
#include "wire/codec_priv.h"
#include "wire/protocol.h"

/* ---- randomness ------------------------------------------------------------ */

static uint64_t rng_state = 0x0fa57c0dec0ffee1ULL;
static uint64_t rng(void)
{
    /* xorshift64*: deterministic across runs and platforms */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ULL;
}
static uint64_t below(uint64_t n) { return n ? rng() % n : 0; }

/* A message of out-of-range values (one in five), or of values the walk
 * accepts: most frames decoded, some refused. */
static bool dirty;

static int64_t rand_any_int(void);

/* Integers at and around the edges of every msgpack form and, in a dirty
 * message, of the decoder's ranges; or any 64 bits. */
static int64_t rand_int(void)
{
    int64_t v = rand_any_int();
    return dirty || (v >= -PROTO_INT_MAX && v <= PROTO_INT_MAX) ? v : v % PROTO_INT_MAX;
}

static int64_t rand_any_int(void)
{
    // clang-format off
    static const int64_t edge[] = {
        0, 1, 127, 128, 255, 256, 65535, 65536, INT32_MAX, (int64_t)INT32_MAX + 1, 4294967295LL, 4294967296LL,
        PROTO_INT_MAX - 1, PROTO_INT_MAX, PROTO_INT_MAX + 1, INT64_MAX,
        -1, -32, -33, -128, -129, -32768, -32769, INT32_MIN, (int64_t)INT32_MIN - 1,
        -PROTO_INT_MAX, -PROTO_INT_MAX - 1, INT64_MIN,
    };
    // clang-format on
    /* one draw a statement: the order of two in one expression is the compiler's */
    uint64_t a, b;
    switch (below(4)) {
    case 0:
        a = (uint64_t)edge[below(sizeof edge / sizeof edge[0])];
        b = below(3);
        return (int64_t)(a + b - 1);
    case 1: return (int64_t)below(200) - 40;
    case 2:
        a = rng();
        b = below(64);
        return (int64_t)(a >> b);
    default: return 1700000000000000000LL + (int64_t)below(1000000000);
    }
}

static double rand_double(void)
{
    static const uint64_t bits[] = { 0x7ff8000000000000ULL, 0x7ff0000000000001ULL, 0xfff8000000000badULL,
                                     0x7ff0000000000000ULL, 0xfff0000000000000ULL, 0x8000000000000000ULL,
                                     0x0000000000000001ULL, 0x7fefffffffffffffULL };
    double d;
    uint64_t u;
    switch (below(4)) {
    case 0: u = bits[below(sizeof bits / sizeof bits[0])]; break;
    case 1: u = rng(); break;
    case 2: return (double)((int64_t)below(4000) - 1000) / 8.0; /* fits a float 32 */
    default: return (double)rand_int();
    }
    memcpy(&d, &u, sizeof d);
    return d;
}

/* A string for a char[size] field: ASCII, UTF-8, bytes that are not,
 * NULs, up to past the field's size (the encoder cleans and cuts it). */
static void rand_str(char *out, size_t size)
{
    static const char *pieces[] = {
        "allreduce", "a",    "train.py:57 step", "\xc3\xa9", "\xe2\x94\x80", "\xf0\x9f\x98\x80",
        "\xff",      "\x80", "broadcast",        " ",        "\x7f"
    };
    size_t len = 0, want = below(4) ? below(12) : below(size + 12);
    char tmp[PROTO_STR_LONG + 64];
    while (len < want && len + 20 < sizeof tmp) {
        const char *p = pieces[below(sizeof pieces / sizeof pieces[0])];
        memcpy(tmp + len, p, strlen(p));
        len += strlen(p);
    }
    if (below(20) == 0 && len) tmp[below(len)] = 0; /* a NUL inside */
    size_t n = len < size ? len : size;             /* maybe no NUL at all */
    memcpy(out, tmp, n);
    if (n < size) out[n] = 0;
}

/* ---- random messages, by each kind's table ------------------------------- */

static void rand_frame(CodecBuf *b, MsgKind k, int32_t rank, int depth);

/* A burst's items: 0-6 messages (most of them tel kinds) as bins. */
static void rand_items(Msg *m, int depth)
{
    MsgBurst *bu = &m->u.burst;
    static const MsgKind kinds[] = { MSG_STEP, MSG_COLL, MSG_BEAT,  MSG_STEP, MSG_COLL,
                                     MSG_LOG,  MSG_BYE,  MSG_HELLO, MSG_BURST };
    uint32_t n = (uint32_t)below(7);
    CodecBuf f;
    codec_buf_init(&f);
    bu->items = malloc(n * 1600 + 1);
    bu->len = bu->n = 0;
    for (uint32_t i = 0; i < n; i++) {
        MsgKind k = kinds[below(sizeof kinds / sizeof kinds[0] - (depth > 0))];
        rand_frame(&f, k, below(8) ? m->rank : (int32_t)below(4), depth + 1);
        if (f.len == 0 || f.len > 1500) continue;
        bu->len += (uint32_t)codec_bin_hdr_put(bu->items + bu->len, f.len);
        memcpy(bu->items + bu->len, f.data, f.len);
        bu->len += (uint32_t)f.len;
        bu->n++;
    }
    codec_buf_done(&f);
}

static void rand_msg(Msg *m, MsgKind k, int32_t rank, int depth)
{
    msg_init(m, k);
    dirty = below(5) == 0;
    m->rank = rank;
    m->t_ns = below(10) ? rand_int() : 0; /* 0: no "t" */
    const CodecField *f = codec_kind_fields[k].f;
    for (size_t i = 0; i < codec_kind_fields[k].n; i++) {
        char *at = (char *)m + f[i].off;
        switch (f[i].type) {
        case F_I32: {
            int32_t v = below(2) ? (int32_t)rand_int() : (int32_t)below(9) - 1;
            memcpy(at, &v, sizeof v);
            break;
        }
        case F_I64:
        case F_ARG:
        case F_U64: {
            int64_t v = rand_int();
            if (f[i].type == F_U64 && !dirty && v < 0) v = -v;
            memcpy(at, &v, sizeof v);
            break;
        }
        case F_F64: {
            double v = rand_double();
            memcpy(at, &v, sizeof v);
            break;
        }
        case F_BOOL: *(bool *)at = below(2); break;
        case F_STR: rand_str(at, f[i].size); break;
        case F_PHASE: {
            Phase p = below(2) ? PHASE_TRAIN : (Phase)below(PHASE__COUNT);
            memcpy(at, &p, sizeof p);
            break;
        }
        case F_IDX: {
            MsgShard *s = &m->u.shard;
            s->n_idx = (uint32_t)below(6);
            s->idx = malloc(8 * (s->n_idx + 1));
            for (uint32_t j = 0; j < s->n_idx; j++) s->idx[j] = rand_int();
            break;
        }
        case F_BIN: {
            MsgStore *s = &m->u.store;
            s->val_len = (uint32_t)below(40);
            s->val = malloc(s->val_len + 1);
            for (uint32_t j = 0; j < s->val_len; j++) s->val[j] = (uint8_t)rng();
            break;
        }
        case F_BURST: rand_items(m, depth); break;
        case F_TEXT: {
            MsgStack *s = &m->u.stack;
            s->len = (uint32_t)below(40);
            s->text = malloc(s->len + 1);
            for (uint32_t j = 0; j < s->len; j++) s->text[j] = (char)(' ' + below(95));
            s->text[s->len] = 0;
            break;
        }
        }
    }
}

/* A frame of kind k as codec_encode writes it (empty if it refuses). */
static void rand_frame(CodecBuf *b, MsgKind k, int32_t rank, int depth)
{
    Msg m;
    char err[256];
    rand_msg(&m, k, rank, depth);
    if (codec_encode(&m, b, err, sizeof err) < 0) b->len = 0;
    msg_done(&m);
}

/* ---- other forms of a frame: its top-level entries rewritten ----------- */

typedef struct {
    msgpack_object k, v;
} Entry;

static void put(msgpack_sbuffer *sb, const void *p, size_t n) { msgpack_sbuffer_write(sb, p, n); }
static void put_u8(msgpack_sbuffer *sb, uint8_t c) { put(sb, &c, 1); }
static void put_be(msgpack_sbuffer *sb, uint64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--) put_u8(sb, (uint8_t)(v >> (8 * i)));
}

/* A length header: the fixed form where it fits (one of two times when
 * forms are random), else one of the wider ones that fit. */
static void put_len(msgpack_sbuffer *sb, uint64_t n, int fix_max, uint8_t fix, const uint8_t wide[3], bool any)
{
    if (n <= (uint64_t)fix_max && (!any || below(2))) {
        put_u8(sb, (uint8_t)(fix | n));
        return;
    }
    int w0 = n <= 0xff && wide[0] ? 0 : n <= 0xffff ? 1 : 2;
    int w = any ? w0 + (int)below((uint64_t)(3 - w0)) : w0;
    put_u8(sb, wide[w]);
    put_be(sb, n, 1 << w);
}

/* o in msgpack, each number and header in its smallest form, or (any) in
 * a random one of the forms that hold it. */
static void put_obj(msgpack_sbuffer *sb, const msgpack_object *o, bool any)
{
    switch (o->type) {
    case MSGPACK_OBJECT_POSITIVE_INTEGER: {
        uint64_t u = o->via.u64;
        int form = any ? (int)below(9) : -1;
        if ((form <= 0 && u <= 127)) {
            put_u8(sb, (uint8_t)u);
        } else if (form == 1 && u <= 127) {
            put_u8(sb, 0xd0), put_u8(sb, (uint8_t)u);
        } else if (form == 2 && u <= 32767) {
            put_u8(sb, 0xd1), put_be(sb, u, 2);
        } else if (form == 3 && u <= INT32_MAX) {
            put_u8(sb, 0xd2), put_be(sb, u, 4);
        } else if (form == 4 && u <= INT64_MAX) {
            put_u8(sb, 0xd3), put_be(sb, u, 8);
        } else if (form >= 5 && form <= 7 && u <= (form == 5 ? 0xffu : form == 6 ? 0xffffu : 0xffffffffu)) {
            put_u8(sb, (uint8_t)(0xcc + form - 5)), put_be(sb, u, 1 << (form - 5));
        } else if (form == 8) {
            put_u8(sb, 0xcf), put_be(sb, u, 8);
        } else {
            msgpack_packer pk;
            msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
            msgpack_pack_uint64(&pk, u);
        }
        return;
    }
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: {
        int64_t i = o->via.i64;
        int form = any ? (int)below(5) : -1;
        if (form == 1 && i >= -128) {
            put_u8(sb, 0xd0), put_be(sb, (uint64_t)i, 1);
        } else if (form == 2 && i >= -32768) {
            put_u8(sb, 0xd1), put_be(sb, (uint64_t)i, 2);
        } else if (form == 3 && i >= INT32_MIN) {
            put_u8(sb, 0xd2), put_be(sb, (uint64_t)i, 4);
        } else if (form == 4) {
            put_u8(sb, 0xd3), put_be(sb, (uint64_t)i, 8);
        } else {
            msgpack_packer pk;
            msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
            msgpack_pack_int64(&pk, i);
        }
        return;
    }
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64: {
        double d = o->via.f64;
        float f = (float)d;
        double back = f;
        bool as32 = o->type == MSGPACK_OBJECT_FLOAT32 ? !(any && below(2)) : any && below(2) && !memcmp(&back, &d, 8);
        uint64_t bits;
        if (as32) {
            uint32_t b32;
            memcpy(&b32, &f, 4);
            put_u8(sb, 0xca), put_be(sb, b32, 4);
        } else {
            memcpy(&bits, &d, 8);
            put_u8(sb, 0xcb), put_be(sb, bits, 8);
        }
        return;
    }
    case MSGPACK_OBJECT_STR: {
        static const uint8_t wide[3] = { 0xd9, 0xda, 0xdb };
        put_len(sb, o->via.str.size, 31, 0xa0, wide, any);
        put(sb, o->via.str.ptr, o->via.str.size);
        return;
    }
    case MSGPACK_OBJECT_BIN: {
        static const uint8_t wide[3] = { 0xc4, 0xc5, 0xc6 };
        uint32_t n = o->via.bin.size;
        int w = n <= 0xff ? 0 : n <= 0xffff ? 1 : 2;
        if (any && below(4) == 0) w += (int)below((uint64_t)(3 - w));
        put_u8(sb, wide[w]);
        put_be(sb, n, 1 << w);
        put(sb, o->via.bin.ptr, n);
        return;
    }
    case MSGPACK_OBJECT_ARRAY: {
        static const uint8_t wide[3] = { 0, 0xdc, 0xdd };
        put_len(sb, o->via.array.size, 15, 0x90, wide, any);
        for (uint32_t i = 0; i < o->via.array.size; i++) put_obj(sb, &o->via.array.ptr[i], any);
        return;
    }
    case MSGPACK_OBJECT_MAP: {
        static const uint8_t wide[3] = { 0, 0xde, 0xdf };
        put_len(sb, o->via.map.size, 15, 0x80, wide, any);
        for (uint32_t i = 0; i < o->via.map.size; i++) {
            put_obj(sb, &o->via.map.ptr[i].key, any);
            put_obj(sb, &o->via.map.ptr[i].val, any);
        }
        return;
    }
    default: {
        msgpack_packer pk;
        msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
        msgpack_pack_object(&pk, *o);
        return;
    }
    }
}

/* The map of entries e[0..n); with any, the map's header, a key, a value
 * each in a random form one time in four, two, two (so that the fast path
 * still meets the rest as it expects them). */
static void put_map(msgpack_sbuffer *sb, const Entry *e, uint32_t n, bool any)
{
    static const uint8_t wide[3] = { 0, 0xde, 0xdf };
    put_len(sb, n, 15, 0x80, wide, any && below(4) == 0);
    for (uint32_t i = 0; i < n; i++) {
        put_obj(sb, &e[i].k, any && below(4) == 0);
        put_obj(sb, &e[i].v, any && below(2));
    }
}

static msgpack_object str_obj(const char *s)
{
    msgpack_object o = { .type = MSGPACK_OBJECT_STR };
    o.via.str.ptr = s;
    o.via.str.size = (uint32_t)strlen(s);
    return o;
}

/* Another value for a key: of another type, or of the same out of range. */
static msgpack_object other_value(void)
{
    static const char *strs[] = { "", "train", "allreduce", "x" };
    msgpack_object o = { .type = MSGPACK_OBJECT_NIL };
    switch (below(7)) {
    case 0: break;
    case 1: o.type = MSGPACK_OBJECT_BOOLEAN, o.via.boolean = below(2); break;
    case 2: o = str_obj(strs[below(4)]); break;
    case 3: o.type = MSGPACK_OBJECT_FLOAT64, o.via.f64 = rand_double(); break;
    case 4: o.type = MSGPACK_OBJECT_POSITIVE_INTEGER, o.via.u64 = rng(); break;
    case 5: o.type = MSGPACK_OBJECT_NEGATIVE_INTEGER, o.via.i64 = -(int64_t)below(1ull << 62) - 1; break;
    default: o.type = MSGPACK_OBJECT_ARRAY, o.via.array.size = 0, o.via.array.ptr = NULL; break;
    }
    return o;
}

enum { V_CANON, V_FORMS, V_SHUFFLE, V_SWAP, V_DROP, V_REPEAT, V_EXTRA, V_RETYPE, N_VARIANTS };

/* frame rewritten by variant v into out (the frame itself for V_CANON, or
 * when it is no map). */
static void variant(const CodecBuf *frame, int v, CodecBuf *out)
{
    static const char *extra_keys[] = { "v", "k", "r", "t", "m", "x", "step", "stepx", "ste", "", "loss" };
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    size_t off = 0;
    codec_buf_reset(out);
    if (v == V_CANON ||
        msgpack_unpack_next(&up, (const char *)frame->data, frame->len, &off) != MSGPACK_UNPACK_SUCCESS ||
        up.data.type != MSGPACK_OBJECT_MAP) {
        codec_buf_grow(out, frame->len);
        memcpy(out->data, frame->data, frame->len);
        out->len = frame->len;
        msgpack_unpacked_destroy(&up);
        return;
    }
    uint32_t n = up.data.via.map.size;
    Entry *e = calloc(n + 2, sizeof *e);
    for (uint32_t i = 0; i < n; i++) e[i].k = up.data.via.map.ptr[i].key, e[i].v = up.data.via.map.ptr[i].val;
    bool any = v == V_FORMS;
    switch (v) {
    case V_SHUFFLE:
        for (uint32_t i = n; i > 1; i--) {
            uint32_t j = (uint32_t)below(i);
            Entry t = e[i - 1];
            e[i - 1] = e[j], e[j] = t;
        }
        break;
    case V_SWAP:
        if (n > 1) {
            uint32_t i = (uint32_t)below(n - 1);
            Entry t = e[i];
            e[i] = e[i + 1], e[i + 1] = t;
        }
        break;
    case V_DROP:
        for (int d = 1 + (int)below(3); d > 0 && n > 0; d--) {
            uint32_t i = (uint32_t)below(n);
            memmove(e + i, e + i + 1, (n - i - 1) * sizeof *e);
            n--;
        }
        break;
    case V_REPEAT: /* an entry again, later or earlier, with its value or another */
        if (n > 0) {
            Entry t = e[below(n)];
            if (below(2)) t.v = other_value();
            uint32_t at = (uint32_t)below(n + 1);
            memmove(e + at + 1, e + at, (n - at) * sizeof *e);
            e[at] = t;
            n++;
        }
        break;
    case V_EXTRA: {
        uint32_t at = (uint32_t)below(n + 1);
        memmove(e + at + 1, e + at, (n - at) * sizeof *e);
        e[at].k = str_obj(extra_keys[below(sizeof extra_keys / sizeof extra_keys[0])]);
        e[at].v = other_value();
        n++;
        break;
    }
    case V_RETYPE:
        if (n > 0) {
            uint32_t i = (uint32_t)below(n);
            e[i].v = other_value();
        }
        break;
    default: break;
    }
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    put_map(&sb, e, n, any);
    codec_buf_grow(out, sb.size);
    memcpy(out->data, sb.data, sb.size);
    out->len = sb.size;
    msgpack_sbuffer_destroy(&sb);
    free(e);
    msgpack_unpacked_destroy(&up);
}

/* 1-4 random mutations of buf[0..n) (room for n + 8 bytes): bit flips,
 * random and interesting bytes, inserts, deletes, a cut. The new length. */
static size_t mutate(uint8_t *buf, size_t n)
{
    static const uint8_t interesting[] = { 0x00, 0x01, 0x7f, 0x80, 0x8f, 0x90, 0xa0, 0xa1, 0xbf, 0xc0,
                                           0xc1, 0xc4, 0xc5, 0xc6, 0xca, 0xcb, 0xcc, 0xcd, 0xce, 0xcf,
                                           0xd0, 0xd3, 0xd9, 0xdc, 0xdd, 0xde, 0xdf, 0xe0, 0xff };
    int muts = 1 + (int)below(4);
    for (int j = 0; j < muts && n > 0; j++) {
        size_t at = below(n);
        switch (below(6)) {
        case 0: buf[at] ^= (uint8_t)(1u << below(8)); break;
        case 1: buf[at] = (uint8_t)rng(); break;
        case 2: buf[at] = interesting[below(sizeof interesting)]; break;
        case 3:
            memmove(buf + at + 1, buf + at, n - at);
            buf[at] = interesting[below(sizeof interesting)];
            n++;
            break;
        case 4:
            memmove(buf + at, buf + at + 1, n - at - 1);
            n--;
            break;
        default: n = at; break;
        }
    }
    return n;
}

/* ---- the comparison ---------------------------------------------------------- */

typedef struct {
    long cases, differ, fast, refused, decoded, unknown;
} Tally;

static void heap_part(Msg *m, void ***ptr, size_t *bytes)
{
    *ptr = NULL;
    *bytes = 0;
    switch (m->kind) {
    case MSG_SHARD: *ptr = (void **)&m->u.shard.idx, *bytes = m->u.shard.n_idx * sizeof(int64_t); break;
    case MSG_SET:
    case MSG_GET:
    case MSG_WAIT:
    case MSG_VAL: *ptr = (void **)&m->u.store.val, *bytes = m->u.store.val_len; break;
    case MSG_BURST: *ptr = (void **)&m->u.burst.items, *bytes = m->u.burst.len; break;
    case MSG_STACK: *ptr = (void **)&m->u.stack.text, *bytes = m->u.stack.len; break;
    default: break;
    }
}

/* The same Msg over the bytes a decode defines, heap parts by content. */
static bool same_msg(const Msg *a, const Msg *b)
{
    Msg x = *a, y = *b;
    void **px, **py;
    size_t nx, ny;
    heap_part(&x, &px, &nx);
    heap_part(&y, &py, &ny);
    if (x.kind != y.kind || nx != ny || !px != !py) return false;
    if (px) {
        if (!*px != !*py || (nx && memcmp(*px, *py, nx))) return false;
        *px = *py = NULL;
    }
    return !memcmp(&x, &y, msg_defined_bytes(x.kind));
}

static uint8_t garbage = 0x5a;

static int decode_into(int (*fn)(const void *, size_t, Msg *, char *, size_t), const uint8_t *copy, size_t n, Msg *m,
                       char *err, size_t errlen)
{
    memset(m, garbage += 0x3b, sizeof *m);
    snprintf(err, errlen, "untouched");
    return fn(n ? copy : NULL, n, m, err, errlen);
}

static int fast_only(const void *p, size_t n, Msg *m, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    return n ? codec_fast_decode(p, n, m) : -1;
}

/* codec_decode, the walk and the fast path alone on p[0..n); a burst's
 * messages the same way. false (and a line) when they differ. canonical:
 * a frame codec_encode wrote, which the fast path must take when the walk
 * does and its kind is the fast path's. */
static bool compare(const uint8_t *p, size_t n, bool canonical, Tally *t, int depth)
{
    uint8_t *copy = malloc(n ? n : 1);
    if (n) memcpy(copy, p, n);
    Msg a, b, c;
    char ea[256], eb[256], ec[16];
    int ra = decode_into(codec_decode, copy, n, &a, ea, sizeof ea);
    int rb = decode_into(codec_decode_checked, copy, n, &b, eb, sizeof eb);
    int rc = decode_into(fast_only, copy, n, &c, ec, sizeof ec);
    bool ok = true;
    t->cases++;
    if (ra != rb || strcmp(ea, eb)) {
        printf("  %zu bytes: codec_decode %d \"%s\", the walk %d \"%s\"\n", n, ra, ea, rb, eb);
        ok = false;
    } else if (!same_msg(&a, &b)) {
        printf("  %zu bytes: rc %d, a different %s from codec_decode\n", n, ra, msg_kind_name(b.kind));
        ok = false;
    }
    if (rc == 0) {
        t->fast++;
        if (rb != 0 || !same_msg(&c, &b)) {
            printf("  %zu bytes: the fast path took a frame the walk %s\n", n,
                   rb != 0 ? "refuses" : "decodes otherwise");
            ok = false;
        }
        msg_done(&c);
    } else if (canonical && rb == 0 &&
               (b.kind == MSG_STEP || b.kind == MSG_COLL || b.kind == MSG_BEAT || b.kind == MSG_BURST)) {
        printf("  %zu bytes: a canonical %s the walk decodes missed the fast path\n", n, msg_kind_name(b.kind));
        ok = false;
    }
    if (rb == 0) t->decoded++;
    if (rb == 1) t->unknown++;
    if (rb < 0) t->refused++;
    if (ok && rb == 0 && b.kind == MSG_BURST && depth == 0) {
        size_t pos = 0, len;
        const uint8_t *f;
        while (codec_burst_next(&b.u.burst, &pos, &f, &len)) ok = compare(f, len, canonical, t, depth + 1) && ok;
    }
    if (ra >= 0) msg_done(&a);
    if (rb >= 0) msg_done(&b);
    free(copy);
    if (!ok) t->differ++;
    return ok;
}

/* ---- cases ----------------------------------------------------------------- */

static const MsgKind fast_kinds[] = { MSG_STEP, MSG_COLL, MSG_BEAT, MSG_BURST };

/* Every kind at random, its entries rewritten, then (one time in two)
 * mutated: the fast path and the walk agree on all. */
static void test_random_frames(void)
{
    TEST_BEGIN("fast_path_decodes_as_the_walk_random_frames");
    Tally t = { 0 };
    CodecBuf frame, var;
    codec_buf_init(&frame);
    codec_buf_init(&var);
    uint8_t *buf = malloc(64 * 1024);
    long canon_fast = 0, canon = 0;
    for (int iter = 0; iter < 150000; iter++) {
        MsgKind k = below(4) ? fast_kinds[below(4)] : (MsgKind)(1 + below(MSG__COUNT - 1));
        int32_t rank = below(10) ? (int32_t)below(1024) : below(2) ? -1 : (int32_t)rand_int();
        rand_frame(&frame, k, rank, 0);
        if (frame.len == 0) continue;
        int v = (int)below(N_VARIANTS + 2); /* V_CANON three times as often */
        if (v >= N_VARIANTS) v = V_CANON;
        variant(&frame, v, &var);
        if (var.len + 8 > 64 * 1024) continue;
        memcpy(buf, var.data, var.len);
        size_t n = var.len;
        bool mutated = below(2);
        if (mutated) n = mutate(buf, n);
        long before = t.fast;
        if (!compare(buf, n, v == V_CANON && !mutated, &t, 0) && t.differ <= 5)
            CHECK(false, "case %d (%s, variant %d%s) differs", iter, msg_kind_name(k), v, mutated ? ", mutated" : "");
        if (v == V_CANON && !mutated) canon++, canon_fast += t.fast > before;
    }
    free(buf);
    codec_buf_done(&frame);
    codec_buf_done(&var);
    CHECK(t.differ == 0, "%ld of %ld inputs decoded differently", t.differ, t.cases);
    /* both paths and every outcome exercised, or the comparison proves little */
    CHECK(t.fast > t.cases / 5 && t.refused > t.cases / 10 && t.decoded > t.cases / 4 && t.unknown > 100,
          "fast %ld refused %ld decoded %ld unknown %ld of %ld", t.fast, t.refused, t.decoded, t.unknown, t.cases);
    printf("  %ld inputs (with burst items): %ld refused, %ld decoded (%ld by the fast path; %ld of %ld canonical "
           "frames), %ld unknown kind, all alike\n",
           t.cases, t.refused, t.decoded, t.fast, canon_fast, canon, t.unknown);
    TEST_END();
}

/* A fixed frame of each fast kind: every cut, and every byte value at
 * every offset. */
static void test_every_byte(void)
{
    TEST_BEGIN("fast_path_decodes_as_the_walk_every_cut_and_byte");
    Tally t = { 0 };
    CodecBuf f[4];
    char err[256];
    for (int i = 0; i < 4; i++) {
        codec_buf_init(&f[i]);
        Msg m;
        msg_init(&m, fast_kinds[i]);
        m.rank = 17, m.t_ns = 1764590000123456789LL;
        if (fast_kinds[i] == MSG_STEP) m.u.step.step = 4711, m.u.step.loss = 0.4132, m.u.step.dev_mem = -1;
        if (fast_kinds[i] == MSG_COLL) snprintf(m.u.coll.op, sizeof m.u.coll.op, "allreduce"), m.u.coll.seq = 300;
        if (fast_kinds[i] == MSG_BEAT) m.u.beat.phase = PHASE_TRAIN, m.u.beat.coll_seq = 70000;
        if (fast_kinds[i] == MSG_BURST) { /* a step and a beat */
            codec_burst_begin(&f[i], 17, err, sizeof err);
            codec_burst_add(&f[i], f[0].data, f[0].len, err, sizeof err);
            codec_burst_add(&f[i], f[2].data, f[2].len, err, sizeof err);
            codec_burst_finish(&f[i], m.t_ns);
        } else {
            CHECK(codec_encode(&m, &f[i], err, sizeof err) == 0, "encode: %s", err);
        }
    }
    uint8_t buf[1024];
    for (int i = 0; i < 4; i++) {
        size_t n = f[i].len;
        CHECK(n <= sizeof buf, "frame of %zu bytes", n);
        for (size_t cut = 0; cut <= n; cut++)
            if (!compare(f[i].data, cut, cut == n, &t, 0) && t.differ <= 5)
                CHECK(false, "%s cut at %zu differs", msg_kind_name(fast_kinds[i]), cut);
        for (size_t at = 0; at < n; at++)
            for (int byte = 0; byte < 256; byte++) {
                memcpy(buf, f[i].data, n);
                if (buf[at] == byte) continue;
                buf[at] = (uint8_t)byte;
                if (!compare(buf, n, false, &t, 0) && t.differ <= 5)
                    CHECK(false, "%s with byte %zu = 0x%02x differs", msg_kind_name(fast_kinds[i]), at, byte);
            }
    }
    for (int i = 0; i < 4; i++) codec_buf_done(&f[i]);
    CHECK(t.differ == 0, "%ld of %ld inputs decoded differently", t.differ, t.cases);
    CHECK(t.fast > t.cases / 4, "fast path took %ld of %ld", t.fast, t.cases);
    printf("  %ld inputs: %ld refused, %ld decoded (%ld by the fast path), %ld unknown kind, all alike\n", t.cases,
           t.refused, t.decoded, t.fast, t.unknown);
    TEST_END();
}

/* The defined bytes: the envelope and the kind's member, nothing past it
 * written by the fast path (the union's other bytes keep what they held). */
static void test_member_only(void)
{
    TEST_BEGIN("fast_path_writes_the_envelope_and_member_only");
    char err[256];
    CodecBuf b;
    codec_buf_init(&b);
    for (int i = 0; i < 3; i++) {
        Msg in, out;
        rand_msg(&in, fast_kinds[i], 5, 0);
        in.t_ns = 1; /* within range, as every field below */
        for (size_t j = 0; j < codec_kind_fields[in.kind].n; j++)
            if (codec_kind_fields[in.kind].f[j].type != F_STR && codec_kind_fields[in.kind].f[j].type != F_PHASE)
                memset((char *)&in + codec_kind_fields[in.kind].f[j].off, 0, 8);
        CHECK(codec_encode(&in, &b, err, sizeof err) == 0, "encode: %s", err);
        memset(&out, 0xee, sizeof out);
        CHECK(codec_fast_decode(b.data, b.len, &out) == 0, "%s not taken", msg_kind_name(fast_kinds[i]));
        size_t def = msg_defined_bytes(out.kind);
        CHECK(def < sizeof out, "%s defines all %zu bytes", msg_kind_name(out.kind), def);
        bool kept = true;
        for (size_t j = def; j < sizeof out; j++) kept = kept && ((uint8_t *)&out)[j] == 0xee;
        CHECK(kept, "%s: bytes past its member written", msg_kind_name(out.kind));
        msg_done(&out);
    }
    codec_buf_done(&b);
    TEST_END();
}

int main(void)
{
    test_member_only();
    test_every_byte();
    test_random_frames();
    CHECK_EXIT();
}
