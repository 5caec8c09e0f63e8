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
 * freeing. Of out's union only the member of out->kind is defined (as
 * msg_init_member leaves it; the rest may hold what *out held before). */
int codec_decode(const void *frame, size_t len, Msg *out, char *err, size_t errlen);

/* For a frame codec_decode refused: when it is a store request (set, get or
 * wait, protocol v1) whose "key" can still be read, *kind (may be NULL) and
 * key (keylen bytes, cut like any str) get them and 0 is returned, so ddptop
 * can answer it with ok=false instead of leaving the peer to its timeout;
 * -1 otherwise. Bounded like codec_decode. */
int codec_store_key(const void *frame, size_t len, MsgKind *kind, char *key, size_t keylen);

/* ---- bursts (kind "burst": several tel messages of one rank in one frame) ----
 * Building one: codec_burst_begin, then codec_burst_add for each message
 * already encoded with codec_encode, then codec_burst_finish; b then holds
 * the burst frame. */

/* Start a burst of rank's messages in b (replacing its contents). Returns 0,
 * or -1 with err (a negative rank, out of memory). */
int codec_burst_begin(CodecBuf *b, int32_t rank, char *err, size_t errlen);
/* Append one complete frame (a tel kind of the same rank: the receiver
 * drops others). Returns 0, or -1 with err: PROTO_MAX_BURST messages already,
 * or the burst would pass PROTO_MAX_FRAME_BYTES (send it and start another). */
int codec_burst_add(CodecBuf *b, const void *frame, size_t len, char *err, size_t errlen);
/* Messages in the burst being built in b (0 before codec_burst_begin). */
uint32_t codec_burst_count(const CodecBuf *b);
/* Set the burst's "t" (wall-clock ns of the send). */
void codec_burst_finish(CodecBuf *b, int64_t t_ns);

/* Walk a decoded burst's messages: *pos starts at 0; each call points
 * *frame, *len at the next message's frame (inside bu->items) and returns 1;
 * 0 at the end. */
int codec_burst_next(const MsgBurst *bu, size_t *pos, const uint8_t **frame, size_t *len);
/* Decode one message of a burst (frame from codec_burst_next) with the
 * burst's rules. Returns codec_decode's 0, 1 (unknown kind: skip it) or -1
 * (malformed; also a kind other than a tel kind: a hello, a store request,
 * a burst inside a burst), or -2 when its "r" is not the burst's (forged:
 * *out holds it, msg_done it). err says why for anything but 0. */
int codec_burst_decode(const Msg *burst, const void *frame, size_t len, Msg *out, char *err, size_t errlen);

#endif
