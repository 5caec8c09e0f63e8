/* uplink.h — a worker's connection to ddptop.
 *
 * Owns: the worker's ZeroMQ context and sockets (tel PUSH for telemetry, ctl
 * DEALER for commands and store operations; CURVE clients when given the
 * job's keys), the count of dropped telemetry, the queue of commands that
 * arrived while a store reply was awaited, and when ddptop was last heard
 * from (any ctl message is a sign of life; its "ping" commands are absorbed
 * here, never handed to the trainer).
 * Used by the worker's main thread only.
 */
#ifndef DDPTOP_UPLINK_H
#define DDPTOP_UPLINK_H

#include <stddef.h>
#include <stdint.h>

#include "net/curve.h"
#include "wire/protocol.h"

typedef struct Uplink Uplink;

/* Connect to ddptop's ctl (ROUTER) and tel (PULL) endpoints as `rank`.
 * keys: the job's keys, making both sockets CURVE clients of ddptop (what
 * its tcp:// sockets demand); NULL for none (ipc://). Returns 0 or -1 with
 * err. */
int uplink_open(Uplink **out, const char *ctl_ep, const char *tel_ep, int rank, const JobKeys *keys, char *err,
                size_t errlen);
/* Flush what is queued (at most linger_ms) and close. Safe on NULL. */
void uplink_close(Uplink **u, int linger_ms);

/* Telemetry: stamps "r" and "t" (the time of the event, not of the send),
 * never blocks. Sent in bursts at most TEL_FLUSH_MS (50 ms) apart; a full
 * queue drops the message and counts it. Returns 0 queued or sent, 1
 * dropped. */
int uplink_send(Uplink *u, Msg *m);
/* Send the waiting burst now (before a long wait, so the frontend is not
 * left behind). */
void uplink_flush(Uplink *u);
/* For the few messages a user must see (hello, phase, ckpt, bye): waits up to
 * 2 s for queue room, then drops and counts. hello goes over ctl so ddptop
 * learns this rank's routing id. */
int uplink_send_important(Uplink *u, Msg *m);
uint64_t uplink_drops(const Uplink *u);
/* Time this thread has spent in uplink_send and uplink_flush (encoding,
 * queueing, handing frames to ZeroMQ): the worker's side of what
 * telemetry costs. */
int64_t uplink_cost_ns(const Uplink *u);

/* Store operations (CommStore callbacks; ctx is the Uplink). */
int uplink_store_set(void *ctx, const char *key, const void *val, size_t len, char *err, size_t errlen);
int uplink_store_get(void *ctx, const char *key, void **val, size_t *len, int64_t timeout_ms, char *err, size_t errlen);

/* The next command from ddptop, without blocking. Returns 1 and fills *out,
 * 0 when there is none, -1 when ddptop is gone (socket error). */
int uplink_next_cmd(Uplink *u, MsgCmd *out);

/* ddptop's heartbeat: it sends a "ping" command every second. After the
 * first ping, silence longer than timeout_ms means ddptop is gone (0: never
 * judge). Before the first ping nothing is judged, so a ddptop that does not
 * ping is never taken for dead. */
void uplink_set_ping_timeout(Uplink *u, int64_t timeout_ms);
/* Reads what waits on ctl (commands are queued for uplink_next_cmd), then
 * returns the milliseconds ddptop has been silent when that exceeds the
 * ping timeout, else 0. Cheap; call it from heartbeats and waits. */
int64_t uplink_ddptop_silent_ms(Uplink *u);

#endif
