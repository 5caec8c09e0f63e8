/* codec_priv.h — what codec.c, codec_prescan.c and codec_burst.c share,
 * private to wire/: the decoder's limits and pre-scan, msgpack bin headers
 * in their smallest form (as msgpack-c and Python write them) and CodecBuf
 * growth.
 */
#ifndef DDPTOP_CODEC_PRIV_H
#define DDPTOP_CODEC_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#include "wire/codec.h"

/* Containers nested deeper than this are refused (the protocol itself
 * needs 2: the message map and the shard's index array). */
#define CODEC_MAX_DEPTH   16
/* Cap on msgpack objects in one frame: msgpack-c allocates ~24-48 bytes per
 * object, so this bounds its memory to a few tens of MiB whatever the frame
 * says. A full shard (PROTO_MAX_IDX indices) plus headroom for other keys. */
#define CODEC_MAX_OBJECTS (PROTO_MAX_IDX + 65536u)

/* Walk frame p[0..len) without allocating and refuse (-1, err) anything
 * whose declared sizes do not fit what is there (codec_prescan.c). 0: it
 * may be unpacked; *n_objects (when not NULL): the objects it holds. */
int codec_prescan(const uint8_t *p, size_t len, uint64_t *n_objects, char *err, size_t errlen);
/* A frame codec_prescan accepted, holding n_objects objects -> *root, as
 * msgpack_unpack_next would make it, its containers in this thread's array
 * (valid until the next call here) and its strings pointing into p
 * (codec_unpack.c). 0, or -1 out of memory. */
int codec_unpack(const uint8_t *p, size_t len, uint64_t n_objects, msgpack_object *root);
/* Frees this thread's array if a large frame grew it past what is kept. */
void codec_unpack_release(void);
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
