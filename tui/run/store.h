/* store.h — ddptop's rendezvous key/value store, served on the ctl ROUTER.
 *
 * Owns: keys and values set by workers, and the get/wait requests still
 * waiting for a key (answered when it is set or when their timeout passes).
 * Gloo's rendezvous and NCCL's unique id travel through it. Main thread.
 *
 * Bounded (docs/PROTOCOL.md, "Store"): at most STORE_MAX_KEYS keys and
 * STORE_MAX_BYTES of keys and values together, STORE_MAX_WAITERS requests
 * waiting, each for at most STORE_MAX_TIMEOUT_MS. Past a bound a request is
 * answered at once with ok=false and the reason in the reply's "error".
 * Keys are found through a hash table, waiters through a hash of their key.
 */
#ifndef DDPTOP_STORE_H
#define DDPTOP_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "wire/codec.h"
#include "wire/protocol.h"

#define STORE_MAX_KEYS           65536
#define STORE_MAX_BYTES          (64u << 20) /* keys and values together */
#define STORE_MAX_WAITERS        16384
#define STORE_DEFAULT_TIMEOUT_MS 30000   /* a get/wait with timeout_ms <= 0 */
#define STORE_MAX_TIMEOUT_MS     3600000 /* longer ones are cut to this (1 h) */

typedef struct Store Store;

Store *store_new(void);
void store_free(Store **s);

/* Handle a set/get/wait request (m->kind) from the peer `ident` on `router`.
 * get/wait reply at once when the key exists, else later from store_tick or
 * store_handle of the set that brings it. Returns 0, or -1 when the request
 * was refused (too many keys/bytes/waiters, value too large): a refusal is
 * still answered, with ok=false and the reason. */
int store_handle(Store *s, void *router, const void *ident, size_t ident_len, const Msg *m, int64_t now_ms,
                 CodecBuf *buf);
/* Answer a request the store never saw (a set whose frame the decoder
 * refused, e.g. a value over PROTO_MAX_VAL_BYTES): ok=false, why in "error",
 * for `key` to `ident`. */
void store_refuse(void *router, const void *ident, size_t ident_len, const char *key, const char *why, CodecBuf *buf);
/* Answer waiters whose timeout passed with ok=false. Cheap when none is due. */
void store_tick(Store *s, void *router, int64_t now_ms, CodecBuf *buf);
/* The value of key (*len its length), or NULL when the store has no such key. */
const uint8_t *store_peek(const Store *s, const char *key, size_t *len);
/* Keys held, requests waiting, bytes of keys and values held. */
size_t store_keys(const Store *s);
size_t store_waiting(const Store *s);
size_t store_bytes(const Store *s);

#endif
