/* codec.c — msgpack encoding and decoding of protocol v1 messages.
 *
 * Owns: the key names and msgpack types of every field (the tables below
 * ARE the wire format; docs/PROTOCOL.md documents them) and the UTF-8
 * hygiene of strings in both directions. The structural pre-scan that
 * stands between hostile bytes and the decoder is codec_prescan.c's; the
 * object tree it then reads codec_unpack.c's (msgpack-c encodes; decoding
 * no longer goes through it); the burst builder and its rules
 * codec_burst.c's.
 * Does not own: sockets (zsock.c), kind and phase names (protocol.c).
 * Pure functions, no globals (codec_unpack.c's array is per thread): safe
 * from any thread.
 *
 * Encoding and decoding are driven by one field table per kind, so the two
 * directions cannot drift apart. Renaming a key or changing its type is an
 * incompatible change: bump PROTO_VERSION in protocol.h.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strnlen under -std=c11 */
#endif
#include "wire/codec.h"
#include "wire/codec_priv.h"
#include "base/err.h"
#include "base/utf8.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <msgpack.h>

/* Room kept in front of the body for the map header, patched in at the end
 * once the number of keys is known (map32 is 5 bytes). */
#define HDR_RESERVE 5

typedef enum {
    F_I32,   /* msgpack int, int32_t */
    F_I64,   /* msgpack int, int64_t, within +-PROTO_INT_MAX */
    F_ARG,   /* msgpack int, int64_t, any: cmd.arg (packed), a store timeout (clamped) */
    F_U64,   /* msgpack int >= 0, uint64_t */
    F_F64,   /* msgpack float (or int), double */
    F_BOOL,  /* msgpack bool, bool */
    F_STR,   /* msgpack str, char[size] */
    F_PHASE, /* msgpack str (phase name), Phase */
    F_IDX,   /* msgpack array of int: MsgShard idx/n_idx */
    F_BIN,   /* msgpack bin: MsgStore val/val_len */
    F_BURST, /* msgpack array of bin: MsgBurst n/len/items */
} FieldType;

typedef struct {
    const char *key;
    size_t klen; /* strlen(key) */
    FieldType type;
    size_t off;  /* offset in Msg */
    size_t size; /* F_STR: capacity including the NUL */
} Field;

#define FLD(key, type, member)                                                            \
    {                                                                                     \
        key, sizeof(key) - 1, type, offsetof(Msg, u.member), sizeof(((Msg *)0)->u.member) \
    }

// clang-format off
static const Field hello_fields[] = {
    FLD("local_rank", F_I32, hello.local_rank),
    FLD("world", F_I32, hello.world),
    FLD("local_world", F_I32, hello.local_world),
    FLD("pid", F_I64, hello.pid),
    FLD("host", F_STR, hello.host),
    FLD("device", F_STR, hello.device),
    FLD("backend", F_STR, hello.backend),
    FLD("precision", F_STR, hello.precision),
    FLD("grad_dtype", F_STR, hello.grad_dtype),
    FLD("version", F_STR, hello.version),
    FLD("dataset", F_STR, hello.dataset),
    FLD("model", F_STR, hello.model),
    FLD("params", F_I64, hello.params),
    FLD("batch", F_I64, hello.batch_size),
    FLD("max_steps", F_I64, hello.max_steps),
    FLD("steps_per_epoch", F_I64, hello.steps_per_epoch),
    FLD("dataset_size", F_I64, hello.dataset_size),
};
// clang-format on

static const Field phase_fields[] = {
    FLD("phase", F_PHASE, phase.phase),
    FLD("detail", F_STR, phase.detail),
};

// clang-format off
static const Field step_fields[] = {
    FLD("epoch", F_I64, step.epoch),
    FLD("step", F_I64, step.step),
    FLD("loss", F_F64, step.loss),
    FLD("lr", F_F64, step.lr),
    FLD("samples", F_I64, step.samples),
    FLD("step_ms", F_F64, step.step_ms),
    FLD("fwd_ms", F_F64, step.fwd_ms),
    FLD("bwd_ms", F_F64, step.bwd_ms),
    FLD("opt_ms", F_F64, step.opt_ms),
    FLD("comm_ms", F_F64, step.comm_ms),
    FLD("exposed_ms", F_F64, step.exposed_ms),
    FLD("drops", F_U64, step.drops),
    FLD("dev_mem", F_I64, step.dev_mem),
    FLD("dev_mem_total", F_I64, step.dev_mem_total),
};
// clang-format on

// clang-format off
static const Field coll_fields[] = {
    FLD("seq", F_I64, coll.seq),
    FLD("op", F_STR, coll.op),
    FLD("bucket", F_I32, coll.bucket),
    FLD("step", F_I64, coll.step),
    FLD("bytes", F_I64, coll.bytes),
    FLD("enq", F_I64, coll.enq_ns),
    FLD("start", F_I64, coll.start_ns),
    FLD("done", F_I64, coll.done_ns),
    FLD("algbw", F_F64, coll.algbw_gbs),
    FLD("busbw", F_F64, coll.busbw_gbs),
};
// clang-format on

// clang-format off
static const Field shard_fields[] = {
    FLD("epoch", F_I64, shard.epoch),
    FLD("seed", F_I64, shard.seed),
    FLD("shuffle", F_BOOL, shard.shuffle),
    FLD("drop_last", F_BOOL, shard.drop_last),
    FLD("size", F_I64, shard.dataset_size),
    FLD("num_samples", F_I64, shard.num_samples),
    FLD("total_size", F_I64, shard.total_size),
    FLD("padding", F_I64, shard.padding),
    FLD("idx", F_IDX, shard),
};
// clang-format on

// clang-format off
static const Field ckpt_fields[] = {
    FLD("step", F_I64, ckpt.step),
    FLD("epoch", F_I64, ckpt.epoch),
    FLD("ok", F_BOOL, ckpt.ok),
    FLD("path", F_STR, ckpt.path),
    FLD("bytes", F_I64, ckpt.bytes),
    FLD("ms", F_F64, ckpt.ms),
    FLD("error", F_STR, ckpt.error),
};
// clang-format on

static const Field log_fields[] = {
    FLD("level", F_STR, log.level),
    FLD("text", F_STR, log.text),
};

// clang-format off
static const Field beat_fields[] = {
    FLD("step", F_I64, beat.step),
    FLD("phase", F_PHASE, beat.phase),
    FLD("seq", F_I64, beat.coll_seq),
    FLD("op", F_STR, beat.coll_op),
    FLD("since", F_I64, beat.coll_since_ns),
    FLD("where", F_STR, beat.where),
    FLD("bucket", F_I64, beat.coll_bucket),
};
// clang-format on

static const Field bye_fields[] = {
    FLD("status", F_I32, bye.status),
    FLD("step", F_I64, bye.step),
};

static const Field cmd_fields[] = {
    FLD("id", F_I64, cmd.id),
    FLD("op", F_STR, cmd.op),
    FLD("arg", F_ARG, cmd.arg),
};

/* Store kinds carry only what their operation uses. */
static const Field set_fields[] = {
    FLD("key", F_STR, store.key),
    FLD("val", F_BIN, store),
};

static const Field get_fields[] = {
    FLD("key", F_STR, store.key),
    FLD("timeout_ms", F_ARG, store.timeout_ms),
};

/* "error" came after the first release: a refusal's reason. */
static const Field val_fields[] = {
    FLD("key", F_STR, store.key),
    FLD("ok", F_BOOL, store.ok),
    FLD("val", F_BIN, store),
    FLD("error", F_STR, store.error),
};

// clang-format off
static const Field eval_fields[] = {
    FLD("epoch", F_I64, eval.epoch),
    FLD("step", F_I64, eval.step),
    FLD("loss", F_F64, eval.loss),
    FLD("accuracy", F_F64, eval.accuracy),
    FLD("correct", F_I64, eval.correct),
    FLD("total", F_I64, eval.total),
};
// clang-format on

// clang-format off
static const Field node_fields[] = {
    FLD("op", F_STR, node.op),
    FLD("node", F_I32, node.node),
    FLD("nnodes", F_I32, node.nnodes),
    FLD("nproc", F_I32, node.nproc),
    FLD("host", F_STR, node.host),
    FLD("pid", F_I64, node.pid),
    FLD("status", F_I32, node.status),
    FLD("signo", F_I32, node.signo),
    FLD("restart", F_I32, node.restart),
    FLD("job", F_STR, node.job),
    FLD("text", F_STR, node.text),
    FLD("spent", F_I64, node.spent),
};
// clang-format on

/* A burst's messages travel as bins inside "m"; codec_burst_* below. */
static const Field burst_fields[] = {
    FLD("m", F_BURST, burst),
};

#define TABLE(a)                  \
    {                             \
        a, sizeof a / sizeof a[0] \
    }
static const struct {
    const Field *f;
    size_t n;
} kind_fields[MSG__COUNT] = {
    [MSG_HELLO] = TABLE(hello_fields), [MSG_PHASE] = TABLE(phase_fields), [MSG_STEP] = TABLE(step_fields),
    [MSG_COLL] = TABLE(coll_fields),   [MSG_SHARD] = TABLE(shard_fields), [MSG_CKPT] = TABLE(ckpt_fields),
    [MSG_LOG] = TABLE(log_fields),     [MSG_BEAT] = TABLE(beat_fields),   [MSG_BYE] = TABLE(bye_fields),
    [MSG_CMD] = TABLE(cmd_fields),     [MSG_SET] = TABLE(set_fields),     [MSG_GET] = TABLE(get_fields),
    [MSG_WAIT] = TABLE(get_fields),    [MSG_VAL] = TABLE(val_fields),     [MSG_EVAL] = TABLE(eval_fields),
    [MSG_NODE] = TABLE(node_fields),   [MSG_BURST] = TABLE(burst_fields),
};

/* ---- UTF-8 ---------------------------------------------------------------
 * Python's msgpack (raw=False) refuses a whole message over one bad byte in
 * a str, and the views print these strings: so every string leaving the
 * encoder or the decoder is well-formed UTF-8, cut only between characters. */

/* Copy s[0..n) into out[cap] NUL-terminated, stopping at a NUL byte or at
 * the last whole character that fits, each ill-formed byte replaced by '?'.
 * Returns the length written. */
static size_t utf8_copy(char *out, size_t cap, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, o = 0;
    if (cap == 0) return 0;
    while (i < n && u[i] != 0) {
        size_t k = utf8_seq(u + i, n - i);
        if (k == 0) {
            if (o + 1 >= cap) break;
            out[o++] = '?';
            i++;
            continue;
        }
        if (o + k >= cap) break;
        memcpy(out + o, u + i, k);
        o += k;
        i += k;
    }
    out[o] = 0;
    return o;
}

/* ---- CodecBuf ------------------------------------------------------------ */

void codec_buf_init(CodecBuf *b)
{
    b->data = NULL;
    b->len = b->cap = 0;
}

void codec_buf_done(CodecBuf *b)
{
    free(b->data);
    codec_buf_init(b);
}

void codec_buf_reset(CodecBuf *b) { b->len = 0; }

/* ---- encoder ------------------------------------------------------------- */

typedef struct {
    CodecBuf *b;
    int too_big; /* the frame would exceed PROTO_MAX_FRAME_BYTES */
    int oom;
} Sink;

int codec_buf_grow(CodecBuf *b, size_t need)
{
    if (b->len + need <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + need) cap *= 2;
    uint8_t *p = realloc(b->data, cap);
    if (!p) return -1;
    b->data = p;
    b->cap = cap;
    return 0;
}

/* msgpack_packer's write callback: append to the CodecBuf, refusing to grow
 * past what a peer would accept anyway. */
static int sink_write(void *data, const char *buf, size_t len)
{
    Sink *s = data;
    CodecBuf *b = s->b;
    if (len == 0) return 0; /* an empty str/bin body may come with a NULL pointer */
    if (len > (size_t)PROTO_MAX_FRAME_BYTES + HDR_RESERVE - b->len) {
        s->too_big = 1;
        return -1;
    }
    if (codec_buf_grow(b, len) < 0) {
        s->oom = 1;
        return -1;
    }
    memcpy(b->data + b->len, buf, len);
    b->len += len;
    return 0;
}

static int pack_cstr(msgpack_packer *pk, const char *s)
{
    size_t n = strlen(s);
    return msgpack_pack_str(pk, n) || msgpack_pack_str_body(pk, s, n);
}

/* A char[size] field: may lack its NUL, may hold bad UTF-8 (a path, a
 * hostname, a message cut by snprintf). */
static int pack_field_str(msgpack_packer *pk, const char *s, size_t size)
{
    char tmp[PROTO_STR_LONG + 1];
    size_t n = utf8_copy(tmp, sizeof tmp, s, strnlen(s, size));
    return msgpack_pack_str(pk, n) || msgpack_pack_str_body(pk, tmp, n);
}

/* Pack one field's value. Returns 0, -1 packer failure, -2 invalid (err). */
static int pack_field(msgpack_packer *pk, const Msg *m, const Field *f, char *err, size_t errlen)
{
    const char *base = (const char *)m + f->off;
    const char *kind = msg_kind_name(m->kind);
    switch (f->type) {
    case F_I32: {
        int32_t v;
        memcpy(&v, base, sizeof v);
        return msgpack_pack_int64(pk, v);
    }
    case F_I64:
    case F_ARG: {
        int64_t v;
        memcpy(&v, base, sizeof v);
        return msgpack_pack_int64(pk, v);
    }
    case F_U64: {
        uint64_t v;
        memcpy(&v, base, sizeof v);
        return msgpack_pack_uint64(pk, v);
    }
    case F_F64: {
        double v;
        memcpy(&v, base, sizeof v);
        return msgpack_pack_double(pk, v);
    }
    case F_BOOL: {
        bool v;
        memcpy(&v, base, sizeof v);
        return v ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
    }
    case F_STR: return pack_field_str(pk, base, f->size);
    case F_PHASE: {
        Phase p;
        memcpy(&p, base, sizeof p);
        if ((int)p < 0 || (int)p >= PHASE__COUNT) {
            err_set(err, errlen, "%s: key \"%s\" has invalid phase %d", kind, f->key, (int)p);
            return -2;
        }
        return pack_cstr(pk, phase_name(p));
    }
    case F_IDX: {
        const MsgShard *sh = &m->u.shard;
        if (sh->n_idx > PROTO_MAX_IDX) {
            err_set(err, errlen, "%s: %" PRIu32 " indices, more than the %u a message may carry", kind, sh->n_idx,
                    PROTO_MAX_IDX);
            return -2;
        }
        if (sh->n_idx && !sh->idx) {
            err_set(err, errlen, "%s: n_idx is %" PRIu32 " but idx is NULL", kind, sh->n_idx);
            return -2;
        }
        if (msgpack_pack_array(pk, sh->n_idx)) return -1;
        for (uint32_t i = 0; i < sh->n_idx; i++)
            if (msgpack_pack_int64(pk, sh->idx[i])) return -1;
        return 0;
    }
    case F_BIN: {
        const MsgStore *st = &m->u.store;
        if (st->val_len > PROTO_MAX_VAL_BYTES) {
            err_set(err, errlen, "%s: value of %" PRIu32 " bytes, more than the %u allowed", kind, st->val_len,
                    PROTO_MAX_VAL_BYTES);
            return -2;
        }
        if (st->val_len && !st->val) {
            err_set(err, errlen, "%s: val_len is %" PRIu32 " but val is NULL", kind, st->val_len);
            return -2;
        }
        return msgpack_pack_bin(pk, st->val_len) || msgpack_pack_bin_body(pk, st->val, st->val_len);
    }
    case F_BURST: {
        const MsgBurst *bu = &m->u.burst;
        if (bu->n > PROTO_MAX_BURST) {
            err_set(err, errlen, "%s: %" PRIu32 " messages, more than the %u a burst may carry", kind, bu->n,
                    PROTO_MAX_BURST);
            return -2;
        }
        if (!codec_burst_items_ok(bu)) {
            err_set(err, errlen, "%s: items do not hold exactly %" PRIu32 " msgpack bins", kind, bu->n);
            return -2;
        }
        /* the items are already bins: copied as they are */
        if (msgpack_pack_array(pk, bu->n)) return -1;
        return bu->len ? pk->callback(pk->data, (const char *)bu->items, bu->len) : 0;
    }
    }
    return -1;
}

int codec_encode(const Msg *m, CodecBuf *b, char *err, size_t errlen)
{
    if ((int)m->kind <= MSG_UNKNOWN || (int)m->kind >= MSG__COUNT)
        return err_set(err, errlen, "cannot encode message of unknown kind %d", (int)m->kind);

    codec_buf_reset(b);
    Sink sink = { .b = b };
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sink, sink_write);

    static const char zeros[HDR_RESERVE];
    uint32_t nkeys = 0;
    int rc = sink_write(&sink, zeros, HDR_RESERVE);

    /* "v" and "k" first: a reader can tell version and kind from the
     * first bytes. */
    rc = rc || pack_cstr(&pk, "v") || msgpack_pack_int64(&pk, PROTO_VERSION);
    rc = rc || pack_cstr(&pk, "k") || pack_cstr(&pk, msg_kind_name(m->kind));
    nkeys += 2;
    if (m->rank >= 0) {
        rc = rc || pack_cstr(&pk, "r") || msgpack_pack_int64(&pk, m->rank);
        nkeys++;
    }
    if (m->t_ns != 0) {
        rc = rc || pack_cstr(&pk, "t") || msgpack_pack_int64(&pk, m->t_ns);
        nkeys++;
    }

    const Field *f = kind_fields[m->kind].f;
    for (size_t i = 0; !rc && i < kind_fields[m->kind].n; i++, nkeys++) {
        rc = msgpack_pack_str(&pk, f[i].klen) || msgpack_pack_str_body(&pk, f[i].key, f[i].klen);
        if (!rc) {
            int frc = pack_field(&pk, m, &f[i], err, errlen);
            if (frc == -2) {
                codec_buf_reset(b);
                return -1;
            }
            rc = frc;
        }
    }
    if (rc) {
        codec_buf_reset(b);
        if (sink.too_big)
            return err_set(err, errlen, "%s: message exceeds the %u-byte frame limit", msg_kind_name(m->kind),
                           PROTO_MAX_FRAME_BYTES);
        return err_set(err, errlen, "%s: out of memory while encoding", msg_kind_name(m->kind));
    }

    /* Patch the smallest map header in front of the body. */
    uint8_t hdr[HDR_RESERVE];
    size_t h;
    if (nkeys <= 15) {
        hdr[0] = (uint8_t)(0x80 | nkeys);
        h = 1;
    } else if (nkeys <= 0xffff) {
        hdr[0] = 0xde;
        hdr[1] = (uint8_t)(nkeys >> 8);
        hdr[2] = (uint8_t)nkeys;
        h = 3;
    } else {
        hdr[0] = 0xdf;
        for (int i = 0; i < 4; i++) hdr[1 + i] = (uint8_t)(nkeys >> (24 - 8 * i));
        h = 5;
    }
    memcpy(b->data + HDR_RESERVE - h, hdr, h);
    memmove(b->data, b->data + HDR_RESERVE - h, b->len - (HDR_RESERVE - h));
    b->len -= HDR_RESERVE - h;
    if (b->len > PROTO_MAX_FRAME_BYTES) {
        codec_buf_reset(b);
        return err_set(err, errlen, "%s: message exceeds the %u-byte frame limit", msg_kind_name(m->kind),
                       PROTO_MAX_FRAME_BYTES);
    }
    return 0;
}

/* ---- decoder ------------------------------------------------------------- */

static bool key_is(const msgpack_object *k, const Field *f)
{
    return k->via.str.size == f->klen && memcmp(k->via.str.ptr, f->key, f->klen) == 0;
}

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

static const char *obj_type_name(msgpack_object_type t);

/* Decode one known key's value into m. */
static int decode_field(const msgpack_object *o, Msg *m, const Field *f, char *err, size_t errlen)
{
    char *base = (char *)m + f->off;
    const char *kind = msg_kind_name(m->kind);
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
        utf8_copy(base, f->size, o->via.str.ptr, o->via.str.size);
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
            if ((rc = obj_i64(&o->via.array.ptr[i], &idx[i]))) {
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
                               i, obj_type_name(e->type));
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

static int decode_map(const msgpack_object *top, Msg *m, char *err, size_t errlen)
{
    if (top->type != MSGPACK_OBJECT_MAP)
        return err_set(err, errlen, "message is a msgpack %s, not a map", obj_type_name(top->type));

    const msgpack_object_kv *kv = top->via.map.ptr;
    uint32_t n = top->via.map.size;
    const msgpack_object *ov = NULL, *ok = NULL, *orank = NULL, *ot = NULL;

    /* Pass 1: keys are strings; find the envelope keys wherever they are
     * (our encoder puts "v","k" first, but a reader need not insist). */
    for (uint32_t i = 0; i < n; i++) {
        const msgpack_object *k = &kv[i].key;
        if (k->type != MSGPACK_OBJECT_STR)
            return err_set(err, errlen, "map key %" PRIu32 " is a msgpack %s, not a string", i, obj_type_name(k->type));
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
    if (obj_i64(ov, &v) == -1) return err_set(err, errlen, "key \"v\" is not an integer");
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
        int rc = obj_i64(orank, &r);
        if (rc == 0 && (r < INT32_MIN || r > INT32_MAX)) rc = -2;
        if (rc) return int_error(rc, kn, "r", err, errlen);
        m->rank = (int32_t)r;
    }
    if (ot) {
        int rc = obj_i64(ot, &m->t_ns);
        if (rc) return int_error(rc, kn, "t", err, errlen);
        if (m->t_ns > PROTO_INT_MAX || m->t_ns < -PROTO_INT_MAX) return int_error(-2, kn, "t", err, errlen);
    }

    /* a burst is one rank's: its sender is checked by that rank */
    if (kind == MSG_BURST && (!orank || m->rank < 0))
        return err_set(err, errlen, "burst: key \"r\" is missing or negative");

    if (kind == MSG_UNKNOWN) {
        char shown[PROTO_STR_SHORT];
        utf8_copy(shown, sizeof shown, ok->via.str.ptr, ok->via.str.size);
        err_set(err, errlen, "unknown kind \"%s\"", shown);
        return 1;
    }

    /* Pass 2: the kind's own keys; anything else is skipped (a newer peer).
     * Each key is looked for from the field after the last one found, so
     * keys in the table's order (as codec_encode writes them) cost one
     * comparison each; any other order still finds every key. */
    const Field *f = kind_fields[kind].f;
    size_t nf = kind_fields[kind].n;
    size_t next = 0;
    for (uint32_t i = 0; i < n; i++) {
        for (size_t t = 0; t < nf; t++) {
            size_t j = next + t < nf ? next + t : next + t - nf;
            if (key_is(&kv[i].key, &f[j])) {
                if (decode_field(&kv[i].val, m, &f[j], err, errlen) < 0) return -1;
                next = j + 1 < nf ? j + 1 : 0;
                break;
            }
        }
    }
    return 0;
}

int codec_decode(const void *frame, size_t len, Msg *out, char *err, size_t errlen)
{
    msg_init(out, MSG_UNKNOWN);
    if (!frame || len == 0) return err_set(err, errlen, "empty frame");
    if (len > PROTO_MAX_FRAME_BYTES)
        return err_set(err, errlen, "frame of %zu bytes exceeds the %u-byte limit", len, PROTO_MAX_FRAME_BYTES);
    uint64_t n_objects = 0;
    if (codec_prescan(frame, len, &n_objects, err, errlen) < 0) return -1;

    msgpack_object root;
    int rc;
    if (codec_unpack(frame, len, n_objects, &root) < 0)
        rc = err_set(err, errlen, "out of memory decoding a %zu-byte frame", len);
    else
        rc = decode_map(&root, out, err, errlen);
    codec_unpack_release();

    if (rc < 0) {
        /* On error nothing is left for the caller to free. */
        msg_done(out);
        msg_init(out, MSG_UNKNOWN);
    }
    return rc;
}

/* Only the envelope and "key": a refused set still names the key it was
 * for, so the store can answer it (PROTOCOL.md: every request gets a reply). */
int codec_store_key(const void *frame, size_t len, MsgKind *kind, char *key, size_t keylen)
{
    char err[8];
    if (!frame || len == 0 || len > PROTO_MAX_FRAME_BYTES || !keylen ||
        codec_prescan(frame, len, NULL, err, sizeof err) < 0)
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
                utf8_copy(key, keylen < PROTO_STR_MED ? keylen : PROTO_STR_MED, vo->via.str.ptr, vo->via.str.size);
                have_key = true;
            }
        }
        if (have_v && have_key && (k == MSG_SET || k == MSG_GET || k == MSG_WAIT)) rc = 0;
    }
    msgpack_unpacked_destroy(&up);
    if (rc == 0 && kind) *kind = k;
    return rc;
}
