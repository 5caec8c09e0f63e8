/* store.h — ddptop's rendezvous key/value store, served on the ctl ROUTER.
 *
 * Owns: keys and values set by workers, and the get/wait requests still
 * waiting for a key (answered when it is set or when their timeout passes).
 * Gloo's rendezvous and NCCL's unique id travel through it. Main thread.
 */
#ifndef DDPTOP_STORE_H
#define DDPTOP_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "wire/codec.h"
#include "wire/protocol.h"

typedef struct Store Store;

Store *store_new(void);
void store_free(Store **s);

/* Handle a set/get/wait request (m->kind) from the peer `ident` on `router`.
 * get/wait reply at once when the key exists, else later from store_tick or
 * store_handle of the set that brings it. Returns 0, or -1 when the request
 * was refused (too many keys/waiters, value too large): a refusal is still
 * answered with ok=false. */
int store_handle(Store *s, void *router, const void *ident, size_t ident_len, const Msg *m, int64_t now_ms,
                 CodecBuf *buf);
/* Answer waiters whose timeout passed with ok=false. */
void store_tick(Store *s, void *router, int64_t now_ms, CodecBuf *buf);
/* Number of keys held / requests waiting (for tests and the screen). */
size_t store_keys(const Store *s);
size_t store_waiting(const Store *s);

#endif
