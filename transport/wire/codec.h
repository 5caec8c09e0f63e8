/* codec.h — msgpack encoding and decoding of protocol v1 messages.
 *
 * Pure functions: no sockets, no globals, safe from any thread.
 * Decoding never reads outside the frame it is given and never trusts a
 * length inside it: malformed, truncated, oversized or hostile frames come
 * back as an error; unknown kinds as MSG_UNKNOWN; unknown keys are skipped.
 */
#ifndef DDPTOP_CODEC_H
#define DDPTOP_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "wire/protocol.h"

/* A growable byte buffer the encoder appends to. */
typedef struct {
    uint8_t *data;
    size_t len, cap;
} CodecBuf;

void codec_buf_init(CodecBuf *b);
void codec_buf_done(CodecBuf *b);
void codec_buf_reset(CodecBuf *b); /* len = 0, keeps the memory */

/* Encode *m (with "v" = PROTO_VERSION) into b, replacing its contents.
 * Returns 0, or -1 with a reason in err (unknown kind, out of memory). */
int codec_encode(const Msg *m, CodecBuf *b, char *err, size_t errlen);

/* Decode one frame into *out (which the caller later gives to msg_done).
 * Returns 0 on success; 1 when the frame is well formed but of a kind this
 * build does not know (out->kind == MSG_UNKNOWN; skip it; err names the
 * kind); -1 with a reason in err for anything malformed. On -1 nothing needs
 * freeing. */
int codec_decode(const void *frame, size_t len, Msg *out, char *err, size_t errlen);

/* For a frame codec_decode refused: when it is a store request (set, get or
 * wait, protocol v1) whose "key" can still be read, *kind (may be NULL) and
 * key (keylen bytes, cut like any str) get them and 0 is returned, so ddptop
 * can answer it with ok=false instead of leaving the peer to its timeout;
 * -1 otherwise. Bounded like codec_decode. */
int codec_store_key(const void *frame, size_t len, MsgKind *kind, char *key, size_t keylen);

#endif
