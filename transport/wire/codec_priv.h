/* codec_priv.h — what the codec's files share, private to wire/ (and its
 * tests): the field tables (codec_fields.c), the decoder's limits
 * (codec_decode.c), msgpack bin headers in their smallest form (as
 * msgpack-c and Python write them) and CodecBuf growth. codec.h is the
 * codec's one face.
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

/* Copy s[0..n) into out[cap] NUL-terminated, stopping at a NUL byte or at
 * the last whole character that fits, each ill-formed byte replaced by '?'.
 * Returns the length written. */
size_t codec_utf8_copy(char *out, size_t cap, const char *s, size_t n);

/* ---- decoding ---- */

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
