/* shm_reduce.h — all-reduce through shared memory, for ranks on one host.
 *
 * Owns: one shared mapping per communicator (a header of per-rank arrival
 * counters and pids, then two sets of per-rank slots), and the wait for
 * the other ranks (spin, then yield, then a futex on the header's bell),
 * bounded by the communicator's timeout and by the peers' lives: a peer
 * whose process is gone (or a zombie) fails the wait at once, naming it.
 *
 * Used by comm_gloo.cc for its all-reduces when every rank of the job is
 * on this host (same boot, same pid/net/ipc/mount namespaces): Gloo over
 * loopback TCP costs ~1.5 ms per MB here, the copy through shared memory a
 * fraction of it. Broadcast and barrier stay with Gloo.
 *
 * The sum is taken in rank order on every rank, so every rank gets the same
 * bits (DDP's requirement: identical gradients everywhere). One call at a
 * time per communicator (comm.h's rule); any thread.
 */
#ifndef DDPTOP_SHM_REDUCE_H
#define DDPTOP_SHM_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* At most this many ranks share a mapping (more: comm_gloo.cc keeps TCP). */
#define SHM_REDUCE_MAX_WORLD 32

typedef struct ShmReduce ShmReduce;

/* What must match for two ranks to share memory: boot id, host name and
 * the pid/net/ipc/mnt namespaces. Returns 0 or -1 (out too small, /proc
 * unreadable: then do not share). */
int shm_host_key(char *out, size_t outlen);

/* A fresh, unguessable POSIX shm name ("/ddptop-PID-RANDOM"). */
void shm_reduce_name(char *out, size_t outlen);

/* Map the segment `name`: rank 0 creates it (exclusive, mode 0600), the
 * others open it. Returns 0 or -1 with err. */
int shm_reduce_open(ShmReduce **out, const char *name, int rank, int world, int64_t timeout_ms, char *err,
                    size_t errlen);
/* Remove the name once every rank has mapped it (the mapping lives on). */
void shm_reduce_unlink(const char *name);

/* In-place sum of buf[0..n) over the ranks. Returns 0, or -1 with err: a
 * peer gone ("rank 1 (pid 4242) is gone"), the timeout, an abort. After an
 * error the mapping is not usable again. */
int shm_reduce_allreduce(ShmReduce *s, float *buf, size_t n, char *err, size_t errlen);
/* The same for bf16 bits: the rank-order sum with every partial sum rounded
 * to bf16 (c10::BFloat16's a + b), ((r0 + r1) + r2) + ... */
int shm_reduce_allreduce_bf16(ShmReduce *s, uint16_t *buf, size_t n, char *err, size_t errlen);

/* Make a wait in progress (on another thread) fail soon. */
void shm_reduce_abort(ShmReduce *s);
void shm_reduce_close(ShmReduce **s);

#ifdef __cplusplus
}
#endif

#endif
