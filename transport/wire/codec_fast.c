/* codec_fast.c — codec_decode's fast path: the frames ddptop receives by
 * the thousand a second (step, coll, beat, and the burst that carries
 * them) decoded in one pass over their bytes, when they come as
 * codec_encode and the Python adapter write them: a map whose keys are "v"
 * (the fixint 1), "k" (one of those kinds), "r" and "t" if present, then
 * every key of the kind in codec_fields.c's order; each key a fixstr, each
 * value of its field's type, a burst's messages bins with the smallest
 * header. Each key's bytes and each value's type byte are checked as they
 * are read, against the bytes the frame has.
 *
 * The kinds' fields are codec_priv.h's lists (CODEC_STEP_FIELDS, ...),
 * the ones codec_fields.c makes their tables of: each kind's decoder below
 * is one straight run of code, a key compared as one or two loads, a
 * value's type known where it is read.
 *
 * Owns no rule of the wire: types and ranges are the checked walk's
 * (codec_decode.c). Anything else (another order, a missing, unknown or
 * repeated key, another form or type, a value out of range, a truncated
 * frame, trailing bytes, another kind) is not decided here: -1, and
 * codec_decode runs the checked walk, which decides it. So this path
 * accepts a part of what the walk accepts and decodes it to the same Msg;
 * tests/unit/test_codec_fast.c compares the two over random messages,
 * orders, forms and mutations, and fuzz_codec over any bytes.
 * Pure functions, no globals: safe from any thread.
 */
#include "wire/codec_priv.h"
#include "wire/protocol.h"

#include <stdlib.h>
#include <string.h>

/* The bytes left to read: q up to e. */
typedef struct {
    const uint8_t *q, *e;
} Rd;

static inline bool have(const Rd *r, size_t n) { return (size_t)(r->e - r->q) >= n; }

/* A big-endian integer of w bytes (1, 2, 4 or 8): one load and a swap. */
static inline uint64_t load_be(const uint8_t *p, size_t w)
{
    uint64_t v = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    switch (w) {
    case 1: return p[0];
    case 2: {
        uint16_t x;
        memcpy(&x, p, 2);
        return __builtin_bswap16(x);
    }
    case 4: {
        uint32_t x;
        memcpy(&x, p, 4);
        return __builtin_bswap32(x);
    }
    default: memcpy(&v, p, 8); return __builtin_bswap64(v);
    }
#else
    for (size_t i = 0; i < w; i++) v = (v << 8) | p[i];
    return v;
#endif
}

/* An integer in any msgpack form: *u its value's bits (two's complement),
 * *neg when below 0 (as msgpack-c types it: a signed form holding a value
 * >= 0 is a positive integer); r past it. false: not an integer, or cut. */
static inline bool rd_int(Rd *r, uint64_t *u, bool *neg)
{
    if (r->q >= r->e) return false;
    uint8_t c = r->q[0];
    int64_t s;
    if (c <= 0x7f || c >= 0xe0) { /* fixints: 0x00-0x7f and 0xe0-0xff as int8 */
        s = (int8_t)c;
        *u = (uint64_t)s, *neg = s < 0;
        r->q++;
        return true;
    }
    if (c < 0xcc || c > 0xd3) return false;
    size_t w = (size_t)1 << ((c - 0xcc) & 3); /* uint 8-64, then int 8-64 */
    if (!have(r, 1 + w)) return false;
    const uint8_t *b = r->q + 1;
    r->q += 1 + w;
    switch (c) { /* a case a form: each width a constant */
    case 0xcc: *u = b[0], *neg = false; return true;
    case 0xcd: *u = load_be(b, 2), *neg = false; return true;
    case 0xce: *u = load_be(b, 4), *neg = false; return true;
    case 0xcf: *u = load_be(b, 8), *neg = false; return true;
    case 0xd0: s = (int8_t)b[0]; break;
    case 0xd1: s = (int16_t)load_be(b, 2); break;
    case 0xd2: s = (int32_t)load_be(b, 4); break;
    default: s = (int64_t)load_be(b, 8); break;
    }
    *u = (uint64_t)s, *neg = s < 0;
    return true;
}

/* An integer within [lo, hi] (hi <= INT64_MAX): the ranges the checked
 * walk gives F_I32, F_I64, F_U64, "r" and "t". Out of line: fast_int reads
 * the forms the encoders write most in line. */
__attribute__((noinline)) static bool rd_int_in(Rd *r, int64_t lo, int64_t hi, int64_t *v)
{
    uint64_t u;
    bool neg;
    if (!rd_int(r, &u, &neg)) return false;
    if (neg ? (int64_t)u < lo : u > (uint64_t)hi) return false;
    *v = (int64_t)u;
    return true;
}

/* A str in any form: *s, *n its bytes; r past it. */
static inline bool rd_str(Rd *r, const char **s, size_t *n)
{
    if (r->q >= r->e) return false;
    uint8_t c = r->q[0];
    size_t h = 0;
    if ((c & 0xe0) == 0xa0) {
        *n = c & 0x1f;
    } else if (c >= 0xd9 && c <= 0xdb) {
        h = (size_t)1 << (c - 0xd9);
        if (!have(r, 1 + h)) return false;
        *n = (size_t)load_be(r->q + 1, h);
    } else {
        return false;
    }
    if ((size_t)(r->e - r->q) - 1 - h < *n) return false;
    *s = (const char *)r->q + 1 + h;
    r->q += 1 + h + *n;
    return true;
}

/* A burst's messages where they lie in the frame. */
typedef struct {
    const uint8_t *p;
    size_t len;
    uint32_t n;
} Items;

/* A burst's "m": an array of at most PROTO_MAX_BURST bins, each header in
 * its smallest form, so that the items codec_decode.c would build are
 * these bytes as they lie (*it). */
static bool rd_items(Rd *r, Items *it)
{
    if (r->q >= r->e) return false;
    uint8_t c = r->q[0];
    size_t count;
    if ((c & 0xf0) == 0x90) {
        count = c & 0x0f;
        r->q++;
    } else if (c == 0xdc || c == 0xdd) {
        size_t h = c == 0xdc ? 2 : 4;
        if (!have(r, 1 + h)) return false;
        count = (size_t)load_be(r->q + 1, h);
        r->q += 1 + h;
    } else {
        return false;
    }
    if (count > PROTO_MAX_BURST) return false;
    const uint8_t *start = r->q;
    for (size_t i = 0; i < count; i++) {
        size_t h, body; /* bin 8, 16, 32: each holding more than the one before */
        if (have(r, 2) && r->q[0] == 0xc4)
            h = 1, body = r->q[1];
        else if (have(r, 3) && r->q[0] == 0xc5 && (body = (size_t)load_be(r->q + 1, 2)) > 0xff)
            h = 2;
        else if (have(r, 5) && r->q[0] == 0xc6 && (body = (size_t)load_be(r->q + 1, 4)) > 0xffff)
            h = 4;
        else
            return false;
        if ((size_t)(r->e - r->q) - 1 - h < body) return false;
        r->q += 1 + h + body;
    }
    it->p = start;
    it->len = (size_t)(r->q - start);
    it->n = (uint32_t)count;
    return true;
}

/* ---- a value of each field type at r into base (size bytes there), as
 * codec_decode.c's decode_field decodes it; false for anything it refuses */

/* The forms the encoders write most are read in line: an integer that is
 * a fixint or unsigned (its bytes one load where 9 bytes are left), a
 * float 64, an empty str; any other out of line. */

__attribute__((always_inline)) static inline bool fast_int(Rd *r, int64_t lo, int64_t hi, int64_t *v)
{
    if (have(r, 9)) {
        uint8_t c = r->q[0];
        unsigned k = (unsigned)c - 0xcc;
        if (c <= 0x7f || c >= 0xe0) { /* fixints: 0x00-0x7f and 0xe0-0xff as int8 */
            *v = (int8_t)c;
            r->q++;
            return *v >= lo && *v <= hi;
        }
        if (k < 4) { /* uint 8, 16, 32, 64: the word's top w bytes */
            unsigned w = 1u << k;
            uint64_t u = load_be(r->q + 1, 8) >> (64 - 8 * w);
            if (u > (uint64_t)hi) return false;
            *v = (int64_t)u;
            r->q += 1 + w;
            return true;
        }
    }
    return rd_int_in(r, lo, hi, v);
}

__attribute__((always_inline)) static inline bool fast_F_I32(Rd *r, char *base, size_t size, Items *it)
{
    (void)size, (void)it;
    int64_t v;
    if (!fast_int(r, INT32_MIN, INT32_MAX, &v)) return false;
    int32_t w = (int32_t)v;
    memcpy(base, &w, sizeof w);
    return true;
}

__attribute__((always_inline)) static inline bool fast_F_I64(Rd *r, char *base, size_t size, Items *it)
{
    (void)size, (void)it;
    int64_t v;
    if (!fast_int(r, -PROTO_INT_MAX, PROTO_INT_MAX, &v)) return false;
    memcpy(base, &v, sizeof v);
    return true;
}

__attribute__((always_inline)) static inline bool fast_F_U64(Rd *r, char *base, size_t size, Items *it)
{
    (void)size, (void)it;
    int64_t v;
    if (!fast_int(r, 0, PROTO_INT_MAX, &v)) return false;
    uint64_t u = (uint64_t)v;
    memcpy(base, &u, sizeof u);
    return true;
}

/* A number as a double in any form but float 64. */
__attribute__((noinline)) static bool rd_f64_other(Rd *r, double *d)
{
    if (r->q >= r->e) return false;
    if (r->q[0] == 0xca) {
        if (!have(r, 5)) return false;
        uint32_t bits = (uint32_t)load_be(r->q + 1, 4);
        float x;
        memcpy(&x, &bits, 4);
        *d = x;
        r->q += 5;
        return true;
    }
    uint64_t u;
    bool neg;
    if (!rd_int(r, &u, &neg)) return false;
    *d = neg ? (double)(int64_t)u : (double)u;
    return true;
}

__attribute__((always_inline)) static inline bool fast_F_F64(Rd *r, char *base, size_t size, Items *it)
{
    (void)size, (void)it;
    double d;
    if (have(r, 9) && r->q[0] == 0xcb) {
        uint64_t bits = load_be(r->q + 1, 8);
        memcpy(&d, &bits, 8);
        r->q += 9;
    } else if (!rd_f64_other(r, &d)) {
        return false;
    }
    memcpy(base, &d, sizeof d);
    return true;
}

/* A str into a char[size] field, cut and cleaned as the walk does. */
__attribute__((noinline)) static bool rd_str_into(Rd *r, char *base, size_t size)
{
    const char *s;
    size_t n;
    if (!rd_str(r, &s, &n)) return false;
    codec_utf8_copy(base, size, s, n);
    return true;
}

__attribute__((always_inline)) static inline bool fast_F_STR(Rd *r, char *base, size_t size, Items *it)
{
    (void)it;
    if (r->q < r->e && r->q[0] == 0xa0) { /* "": a beat's op and where, outside a collective */
        base[0] = 0;
        r->q++;
        return true;
    }
    return rd_str_into(r, base, size);
}

static inline bool fast_F_PHASE(Rd *r, char *base, size_t size, Items *it)
{
    (void)size, (void)it;
    const char *s;
    size_t n;
    if (!rd_str(r, &s, &n)) return false;
    Phase ph = codec_phase_from(s, n); /* a phase a newer peer added: PHASE_NONE */
    memcpy(base, &ph, sizeof ph);
    return true;
}

static inline bool fast_F_BURST(Rd *r, char *base, size_t size, Items *it)
{
    (void)base, (void)size;
    return rd_items(r, it);
}

/* ---- the kinds ------------------------------------------------------------ */

/* a[0..n) == key[0..n), in loads of 8, 4, 2 or 1 bytes that overlap
 * rather than read past n. Inlined with a literal key, its side of each
 * compare is a constant (gcc calls memcmp for some of these). */
__attribute__((always_inline)) static inline bool key_eq(const uint8_t *a, const char *key, size_t n)
{
    uint64_t x, y;
    uint32_t u, w;
    uint16_t h, k;
    if (n >= 8) {
        for (size_t i = 0; i + 8 < n; i += 8) {
            memcpy(&x, a + i, 8), memcpy(&y, key + i, 8);
            if (x != y) return false;
        }
        memcpy(&x, a + n - 8, 8), memcpy(&y, key + n - 8, 8);
        return x == y;
    }
    if (n >= 4) {
        memcpy(&u, a, 4), memcpy(&w, key, 4);
        if (u != w) return false;
        memcpy(&u, a + n - 4, 4), memcpy(&w, key + n - 4, 4);
        return u == w;
    }
    if (n >= 2) {
        memcpy(&h, a, 2), memcpy(&k, key, 2);
        if (h != k) return false;
        memcpy(&h, a + n - 2, 2), memcpy(&k, key + n - 2, 2);
        return h == k;
    }
    return n == 0 || a[0] == (uint8_t)key[0];
}

/* Is the next key the fixstr key (kl bytes, at most 31)? Then r past it. */
__attribute__((always_inline)) static inline bool key_is(Rd *r, const char *key, size_t kl)
{
    if (!have(r, 1 + kl) || r->q[0] != 0xa0 + kl || !key_eq(r->q + 1, key, kl)) return false;
    r->q += 1 + kl;
    return true;
}

/* One field of a list: its key, then its value. */
#define FAST_FIELD(key, type, member)                   \
    if (!key_is(r, key, sizeof(key) - 1)) return false; \
    if (!fast_##type(r, (char *)&m->u.member, sizeof m->u.member, it)) return false;
#define FAST_COUNT(key, type, member) +1

/* The kind's fields, every one in the list's order, at r into m (a burst's
 * messages into *it). */
static bool fast_step(Rd *r, Msg *m, Items *it)
{
    CODEC_STEP_FIELDS(FAST_FIELD)
    return true;
}

static bool fast_coll(Rd *r, Msg *m, Items *it)
{
    CODEC_COLL_FIELDS(FAST_FIELD)
    return true;
}

static bool fast_beat(Rd *r, Msg *m, Items *it)
{
    CODEC_BEAT_FIELDS(FAST_FIELD)
    return true;
}

static bool fast_burst(Rd *r, Msg *m, Items *it)
{
    CODEC_BURST_FIELDS(FAST_FIELD)
    return true;
}

/* "k"'s value: a fixstr naming a kind this path takes; r past it. */
static MsgKind fast_kind(Rd *r)
{
    if (have(r, 5) && r->q[0] == 0xa4) {
        const uint8_t *s = r->q + 1;
        MsgKind k = !memcmp(s, "step", 4)   ? MSG_STEP
                    : !memcmp(s, "coll", 4) ? MSG_COLL
                    : !memcmp(s, "beat", 4) ? MSG_BEAT
                                            : MSG_UNKNOWN;
        if (k != MSG_UNKNOWN) r->q += 5;
        return k;
    }
    if (have(r, 6) && r->q[0] == 0xa5 && !memcmp(r->q + 1, "burst", 5)) {
        r->q += 6;
        return MSG_BURST;
    }
    return MSG_UNKNOWN;
}

int codec_fast_decode(const uint8_t *p, size_t len, Msg *m)
{
    Rd r = { p, p + len };
    if (!have(&r, 1)) return -1;
    size_t left;
    if ((p[0] & 0xf0) == 0x80) { /* fixmap; map 16 from 16 keys (a step) */
        left = p[0] & 0x0f;
        r.q++;
    } else if (p[0] == 0xde && have(&r, 3)) {
        left = (size_t)load_be(p + 1, 2);
        r.q += 3;
    } else {
        return -1;
    }
    /* "v": 1, "k": the kind; "r" and "t" if there */
    if (left < 2 || !key_is(&r, "v", 1) || !have(&r, 1) || r.q[0] != PROTO_VERSION) return -1;
    r.q++;
    if (!key_is(&r, "k", 1)) return -1;
    MsgKind kind = fast_kind(&r);
    if (kind == MSG_UNKNOWN) return -1;
    left -= 2;
    msg_init_member(m, kind);
    int64_t v;
    if (left && key_is(&r, "r", 1)) {
        if (!fast_int(&r, INT32_MIN, INT32_MAX, &v)) return -1;
        m->rank = (int32_t)v;
        left--;
    }
    if (left && key_is(&r, "t", 1)) {
        if (!fast_int(&r, -PROTO_INT_MAX, PROTO_INT_MAX, &m->t_ns)) return -1;
        left--;
    }

    Items items = { NULL, 0, 0 };
    bool ok;
    switch (kind) {
    case MSG_STEP: ok = left == 0 CODEC_STEP_FIELDS(FAST_COUNT) && fast_step(&r, m, &items); break;
    case MSG_COLL: ok = left == 0 CODEC_COLL_FIELDS(FAST_COUNT) && fast_coll(&r, m, &items); break;
    case MSG_BEAT: ok = left == 0 CODEC_BEAT_FIELDS(FAST_COUNT) && fast_beat(&r, m, &items); break;
    default: /* a burst is one rank's: the walk refuses one without */
        ok = m->rank >= 0 && left == 0 CODEC_BURST_FIELDS(FAST_COUNT) && fast_burst(&r, m, &items);
        break;
    }
    if (!ok || r.q != r.e) return -1;
    if (items.n) { /* the one allocation, once the frame proved whole */
        uint8_t *copy = malloc(items.len);
        if (!copy) return -1;
        memcpy(copy, items.p, items.len);
        m->u.burst.items = copy;
        m->u.burst.len = (uint32_t)items.len;
        m->u.burst.n = items.n;
    }
    return 0;
}
