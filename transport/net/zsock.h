/* zsock.h — thin ZeroMQ helpers for ddptop's sockets.
 *
 * Owns: sending/receiving one protocol message per frame (plain and ROUTER
 * envelopes), the private ipc directory. Does not own socket lifetimes
 * policy: callers create sockets with zmq_socket and close them.
 * A socket belongs to one thread (ZeroMQ's rule).
 */
#ifndef DDPTOP_ZSOCK_H
#define DDPTOP_ZSOCK_H

#include <stddef.h>
#include <stdint.h>

#include "wire/codec.h"
#include "wire/protocol.h"

#define ZS_IDENT_MAX 64

/* Encode and send *m as one frame. flags: 0 or ZMQ_DONTWAIT.
 * Returns 0 sent, 1 not sent because the queue is full (EAGAIN: the caller
 * counts a drop) or a signal interrupted a blocking send (EINTR), -1 error
 * with err. `scratch` is reused between calls. */
int zs_send(void *sock, const Msg *m, CodecBuf *scratch, int flags, char *err, size_t errlen);

/* Same, on a ROUTER: first frame is the peer's routing id. */
int zs_send_to(void *router, const void *ident, size_t ident_len, const Msg *m, CodecBuf *scratch, int flags, char *err,
               size_t errlen);

/* Read and drop the rest of a multi-part message (the part just received
 * said "more"), so the next receive starts on a message boundary. Parts of
 * one message arrive together, so this does not block. Returns the parts
 * dropped. */
int zs_drain(void *sock);

/* Receive one frame and decode it into *out (caller calls msg_done on 0).
 * Returns 0 message, 1 nothing to read (with ZMQ_DONTWAIT) or EINTR,
 * 2 a frame was read but skipped (unknown kind, or malformed: err says why),
 * -1 socket error with err. */
int zs_recv(void *sock, Msg *out, int flags, char *err, size_t errlen);

/* Same on a ROUTER: ident (at least ZS_IDENT_MAX bytes) gets the sender's id. */
int zs_recv_from(void *router, void *ident, size_t *ident_len, Msg *out, int flags, char *err, size_t errlen);

/* Called with a frame's bytes exactly as received (also for frames then
 * skipped as malformed or of an unknown kind; not for multi-part messages),
 * once it has been decoded: rc is codec_decode's (0: m holds the message, 1:
 * unknown kind, -1: malformed; m is then not to be read), so a tap that
 * needs the fields does not decode the frame again. ddptop records,
 * re-publishes and feeds attached viewers through it. */
typedef void (*ZsTap)(void *tap_ctx, const void *frame, size_t len, const Msg *m, int rc);

/* zs_recv and zs_recv_from with a tap (NULL for none). */
int zs_recv_tap(void *sock, Msg *out, int flags, ZsTap tap, void *tap_ctx, char *err, size_t errlen);
int zs_recv_from_tap(void *router, void *ident, size_t *ident_len, Msg *out, int flags, ZsTap tap, void *tap_ctx,
                     char *err, size_t errlen);

/* zs_recv_tap and zs_recv_from_tap that also tell who sent the frame:
 * *peer_pid gets the sending process's pid on ipc:// (the kernel's
 * SO_PEERCRED, which ZeroMQ reports as the frame's "Peer-Address"), or 0
 * where the transport cannot say (tcp://, inproc://). It is set before the
 * tap runs, so a tap may read it. */
int zs_recv_peer(void *sock, Msg *out, int flags, ZsTap tap, void *tap_ctx, int64_t *peer_pid, char *err,
                 size_t errlen);
int zs_recv_from_peer(void *router, void *ident, size_t *ident_len, Msg *out, int flags, ZsTap tap, void *tap_ctx,
                      int64_t *peer_pid, char *err, size_t errlen);

/* The sending process's pid of a received zmq_msg_t (passed as void *):
 * on ipc:// the kernel's SO_PEERCRED, else 0. */
int64_t zs_peer_pid(void *zmq_msg);

/* Whether an ipc:// socket path is taken: 0 free (nothing there, or a
 * stale socket nobody accepts on), EEXIST a file that is not a socket,
 * EADDRINUSE a socket some process accepts on. */
int zs_ipc_taken(const char *path);
/* zmq_bind, except that an ipc:// path already there is left alone: a
 * file that is not a socket fails with EEXIST, a socket some process
 * accepts on with EADDRINUSE (a stale one, nobody listening, is replaced as
 * ZeroMQ does). Returns 0, or -1 with errno (zmq_strerror names it). */
int zs_bind(void *sock, const char *endpoint);

/* Create a fresh private directory (mode 0700) under $TMPDIR or /tmp for
 * ipc:// endpoints (under /tmp when $TMPDIR is too long for a socket path).
 * out gets its path. Returns 0 or -1 with err. */
int zs_private_dir(char *out, size_t outlen, char *err, size_t errlen);
/* Remove the directory and the socket files in it (best effort). */
void zs_private_dir_remove(const char *dir);
/* Keep the directory for its other files (a failed run's logs): the
 * socket files given (names in it, NULL-terminated) and its owner file go,
 * so no later sweep takes it for a killed ddptop's. */
void zs_private_dir_keep(const char *dir, const char *const *sockets);
/* Clear the private directories (same base as zs_private_dir) whose ddptop
 * no longer exists: this user's, mode 0700, with an owner file naming a pid
 * that is gone (a ddptop killed with -9 never removed its own). Their
 * sockets and owner file are removed, the directory too when nothing else
 * is left; the ranks' logs are kept, as a failed run keeps them. Returns how
 * many were cleared. */
int zs_private_dir_sweep(void);

#endif
