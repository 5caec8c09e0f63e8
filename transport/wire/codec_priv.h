/* codec_priv.h — what the codec's files share, private to wire/ (and its
 * tests): the field tables (codec_fields.c) and the lists of the kinds the
 * fast path decodes in line, the decoder's limits and its two paths (the
 * checked walk of codec_decode.c, the fast path of codec_fast.c), msgpack
 * bin headers in their smallest form (as msgpack-c and Python write them)
 * and CodecBuf growth. codec.h is the codec's one face.
 */
#ifndef DDPTOP_CODEC_PRIV_H
#define DDPTOP_CODEC_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#include "wire/codec.h"

/* ---- one table of fields per kind (codec_fields.c) ---- */

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
    F_TEXT,  /* msgpack str (bin accepted): MsgStack text/len, PROTO_MAX_STACK_BYTES */
} CodecFieldType;

typedef struct {
    const char *key;
    size_t klen; /* strlen(key) */
    CodecFieldType type;
    size_t off;  /* offset in Msg */
    size_t size; /* F_STR: capacity including the NUL */
} CodecField;

typedef struct {
    const CodecField *f;
    size_t n;
} CodecFields;

/* Indexed by MsgKind: the keys each kind carries after the envelope ("v",
 * "k", "r", "t"), in the order codec_encode writes them. */
extern const CodecFields codec_kind_fields[MSG__COUNT];

/* The fields of the kinds ddptop receives by the thousand a second, as
 * lists of X(key, type, member): codec_fields.c makes their tables of
 * them, and codec_fast.c its decoders, one straight run of code a kind
 * with every key and type a constant; neither can drift from the other.
 * Every other kind's table is written out in codec_fields.c. */
// clang-format off
#define CODEC_STEP_FIELDS(X)                  \
    X("epoch", F_I64, step.epoch)             \
    X("step", F_I64, step.step)               \
    X("loss", F_F64, step.loss)               \
    X("lr", F_F64, step.lr)                   \
    X("samples", F_I64, step.samples)         \
    X("step_ms", F_F64, step.step_ms)         \
    X("fwd_ms", F_F64, step.fwd_ms)           \
    X("bwd_ms", F_F64, step.bwd_ms)           \
    X("opt_ms", F_F64, step.opt_ms)           \
    X("comm_ms", F_F64, step.comm_ms)         \
    X("exposed_ms", F_F64, step.exposed_ms)   \
    X("drops", F_U64, step.drops)             \
    X("dev_mem", F_I64, step.dev_mem)         \
    X("dev_mem_total", F_I64, step.dev_mem_total)

#define CODEC_COLL_FIELDS(X)                  \
    X("seq", F_I64, coll.seq)                 \
    X("op", F_STR, coll.op)                   \
    X("bucket", F_I32, coll.bucket)           \
    X("step", F_I64, coll.step)               \
    X("bytes", F_I64, coll.bytes)             \
    X("enq", F_I64, coll.enq_ns)              \
    X("start", F_I64, coll.start_ns)          \
    X("done", F_I64, coll.done_ns)            \
    X("algbw", F_F64, coll.algbw_gbs)         \
    X("busbw", F_F64, coll.busbw_gbs)         \
    X("count", F_I64, coll.count)             \
    X("dtype", F_STR, coll.dtype)

#define CODEC_BEAT_FIELDS(X)                  \
    X("step", F_I64, beat.step)               \
    X("phase", F_PHASE, beat.phase)           \
    X("seq", F_I64, beat.coll_seq)            \
    X("op", F_STR, beat.coll_op)              \
    X("since", F_I64, beat.coll_since_ns)     \
    X("where", F_STR, beat.where)             \
    X("bucket", F_I64, beat.coll_bucket)       \
    X("count", F_I64, beat.coll_count)         \
    X("dtype", F_STR, beat.coll_dtype)

/* A burst's messages travel as bins inside "m"; codec_burst.c's rules. */
#define CODEC_BURST_FIELDS(X)                 \
    X("m", F_BURST, burst)
// clang-format on

/* Copy s[0..n) into out[cap] NUL-terminated, stopping at a NUL byte or at
 * the last whole character that fits, each ill-formed byte replaced by '?'.
 * Returns the length written. */
size_t codec_utf8_copy(char *out, size_t cap, const char *s, size_t n);

/* ---- decoding ---- */

/* A phase's wire name s[0..n) -> its Phase, PHASE_NONE if none (a phase a
 * newer peer added). codec_decode.c. */
Phase codec_phase_from(const char *s, size_t n);

/* codec_decode without its fast path: the checked walk alone, for any
 * frame, with codec_decode's returns. codec_decode.c; tests compare the
 * two. */
int codec_decode_checked(const void *frame, size_t len, Msg *out, char *err, size_t errlen);

/* The fast path (codec_fast.c): a step, coll, beat or burst frame in the
 * form our encoders write it, decoded in one pass. 0: *out holds what
 * codec_decode_checked would decode (its return 0; of the union only the
 * kind's member is written, msg_init_member). -1: not such a frame, or not
 * one this path can vouch for: *out holds nothing to free or keep, and the
 * checked walk must decide. Reads only p[0..len); writes no error text. */
int codec_fast_decode(const uint8_t *p, size_t len, Msg *out);

/* Containers nested deeper than this are refused (the protocol itself
 * needs 2: the message map and the shard's index array). */
#define CODEC_MAX_DEPTH   16
/* Cap on msgpack objects in one frame (docs/PROTOCOL.md, "Limits"): a full
 * shard (PROTO_MAX_IDX indices) plus headroom for other keys. It bounds a
 * frame's work, and the memory msgpack-c (~24-48 bytes an object) takes
 * where codec_store_key hands it a frame. */
#define CODEC_MAX_OBJECTS (PROTO_MAX_IDX + 65536u)

/* Room for need more bytes in b. 0, or -1 out of memory. */
int codec_buf_grow(CodecBuf *b, size_t need);
/* Bytes of the smallest bin header for a body of n bytes (2, 3 or 5). */
size_t codec_bin_hdr_len(size_t n);
/* Write that header at p (room for 5 bytes); returns its length. */
size_t codec_bin_hdr_put(uint8_t *p, size_t n);
/* A bin at p[0..left): 0 with its header's and body's sizes, -1 if there is none. */
int codec_bin_hdr_get(const uint8_t *p, size_t left, size_t *hdr, size_t *body);
/* Do a burst's items hold exactly n bins, nothing before, between or after? */
bool codec_burst_items_ok(const MsgBurst *bu);

#endif
