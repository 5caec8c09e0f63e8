/* relay.h — an agent's relay between its node's ranks and node 0.
 *
 * Owns: the node-local sockets the ranks connect to (ctl ROUTER and tel PULL
 * on ipc:// in the agent's private 0700 directory, so local ranks need no
 * keys) and the agent's sockets to node 0 (one CURVE PUSH for all telemetry,
 * one CURVE DEALER per rank process carrying its routing id "rank-N.PID.NONCE", so
 * node 0 sees each rank exactly as if it had connected itself: store
 * replies and commands find their way back). Frames pass byte for byte.
 * Telemetry is forwarded with ZMQ_DONTWAIT: a full queue drops and counts,
 * as in the workers; ctl frames wait up to 1 s for queue room.
 * Main thread of the agent only.
 */
#ifndef DDPTOP_RELAY_H
#define DDPTOP_RELAY_H

#include <stddef.h>
#include <stdint.h>

#include "net/curve.h"

typedef struct Relay Relay;

/* Bind ipc://dir/ctl and ipc://dir/tel in zctx; node 0 is at up_ctl (tcp,
 * its tel at port + 1), reached with keys. Returns 0 or -1 with err. */
int relay_open(Relay **out, void *zctx, const char *dir, const char *up_ctl, const char *up_tel, const JobKeys *keys,
               char *err, size_t errlen);
const char *relay_ctl_endpoint(const Relay *r); /* for the ranks' DDPTOP_CTL */
const char *relay_tel_endpoint(const Relay *r); /* for the ranks' DDPTOP_TEL */

/* Move what is waiting, both ways; wait at most timeout_ms for something to
 * arrive (also on extra, the agent's own socket to node 0, which the relay
 * does not read: *extra_ready says whether it has input). Returns frames
 * moved. */
int relay_pump(Relay *r, void *extra, int *extra_ready, long timeout_ms);

uint64_t relay_frames_up(const Relay *r);
uint64_t relay_frames_down(const Relay *r);
uint64_t relay_drops(const Relay *r);
void relay_close(Relay **r);

#endif
