/* codec_encode.c — Msg -> msgpack frame, for every kind, driven by
 * codec_fields.c's tables (keys in table order after "v", "k", "r", "t"),
 * through msgpack-c's packer into a CodecBuf; and CodecBuf itself.
 * Strings leave as well-formed UTF-8 (codec_utf8_copy). Does not own
 * decoding (codec_decode.c) or bursts (codec_burst.c). Pure functions, no
 * globals: safe from any thread.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strnlen under -std=c11 */
#endif
#include "wire/codec.h"
#include "wire/codec_priv.h"
#include "base/err.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <msgpack.h>

/* Room kept in front of the body for the map header, patched in at the end
 * once the number of keys is known (map32 is 5 bytes). */
#define HDR_RESERVE 5

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
    size_t n = codec_utf8_copy(tmp, sizeof tmp, s, strnlen(s, size));
    return msgpack_pack_str(pk, n) || msgpack_pack_str_body(pk, tmp, n);
}

/* Pack one field's value. Returns 0, -1 packer failure, -2 invalid (err). */
static int pack_field(msgpack_packer *pk, const Msg *m, const CodecField *f, char *err, size_t errlen)
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
    case F_TEXT: {
        const MsgStack *st = &m->u.stack;
        if (st->len > PROTO_MAX_STACK_BYTES) {
            err_set(err, errlen, "%s: text of %" PRIu32 " bytes, more than the %u allowed", kind, st->len,
                    PROTO_MAX_STACK_BYTES);
            return -2;
        }
        if (st->len && !st->text) {
            err_set(err, errlen, "%s: len is %" PRIu32 " but text is NULL", kind, st->len);
            return -2;
        }
        /* well-formed UTF-8 (Python's msgpack refuses a str with a bad byte) */
        char *tmp = malloc((size_t)st->len + 1);
        if (!tmp) return -1;
        size_t n = codec_utf8_copy(tmp, (size_t)st->len + 1, st->text ? st->text : "", st->len);
        int rc = msgpack_pack_str(pk, n) || msgpack_pack_str_body(pk, tmp, n);
        free(tmp);
        return rc;
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

    const CodecField *f = codec_kind_fields[m->kind].f;
    for (size_t i = 0; !rc && i < codec_kind_fields[m->kind].n; i++, nkeys++) {
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
