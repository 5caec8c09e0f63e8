/* uplink.h — a worker's connection to ddptop.
 *
 * Owns: the worker's ZeroMQ context and sockets (tel PUSH for telemetry, ctl
 * DEALER for commands and store operations; CURVE clients when given the
 * job's keys), the telemetry stream used instead of tel where ddptop offers
 * one on this host (net/tstream.h; DDPTOP_TEL_STREAM=0: tel), the count of
 * dropped telemetry, the queue of commands that arrived while a store reply
 * was awaited, and when ddptop was last heard from (any ctl message, or a
 * frame down the stream, is a sign of life; its "ping" commands are absorbed
 * here, never handed to the trainer), and whether ddptop is there at all:
 * a ddptop that launched this worker is its parent, and a parent that is
 * stopped (Ctrl-Z, SIGSTOP: state T) is told from one that is gone.
 * Used by the worker's main thread only (the SIGHUP handler only counts).
 */
#ifndef DDPTOP_UPLINK_H
#define DDPTOP_UPLINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "net/curve.h"
#include "wire/protocol.h"

typedef struct Uplink Uplink;

/* Connect to ddptop's ctl (ROUTER) and tel (PULL) endpoints as `rank`; an
 * ipc:// tel's telemetry stream (TEL.stream) is used instead when it is there.
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
/* Flush, then give what waits up to timeout_ms to leave: the telemetry
 * stream's own queue (bytes its socket had no room for) is written as room
 * comes; over ZeroMQ, its I/O thread is given the time. For a rank about to
 * die; a rank that goes on living but stops sending must still call
 * uplink_flush now and then, or what its socket refused never leaves. */
void uplink_flush_wait(Uplink *u, int timeout_ms);
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
/* A "stop" came from ddptop (it stays queued for uplink_next_cmd too).
 * Store waits end at once once it has: a rank in the rendezvous can leave
 * when a peer died there instead of waiting out the store timeout. */
bool uplink_stop_heard(const Uplink *u);
/* The rank whose death made ddptop stop the job (the stop's arg), or -1. */
int uplink_stop_dead_rank(const Uplink *u);
/* Read ctl until a stop comes or ddptop is gone, at most timeout_ms.
 * Returns true when a stop has come. */
bool uplink_wait_stop(Uplink *u, int64_t timeout_ms);
/* CommStore.interrupted: reads what waits on ctl; 1 with why once a stop
 * came or ddptop is gone, else 0. */
int uplink_store_interrupted(void *ctx, char *why, size_t whylen);

/* ddptop's heartbeat: it sends a "ping" command every second. After the
 * first ping, silence longer than timeout_ms means ddptop is gone (0: never
 * judge). Before the first ping nothing is judged, so a ddptop that does not
 * ping is never taken for dead. */
void uplink_set_ping_timeout(Uplink *u, int64_t timeout_ms);

/* ddptop as this worker's parent: when the process was started with a
 * parent-death signal (ddptop's launcher sets SIGKILL, launcher.c), the
 * parent is ddptop. It is replaced by SIGHUP, whose handler notes the
 * death and arms a SIGALRM backstop (UPLINK_GONE_BACKSTOP_S): the worker
 * gets the time to stop and checkpoint, never the time to linger. Returns
 * true when the parent is watched (else only silence judges ddptop). */
bool uplink_watch_parent(Uplink *u);
#define UPLINK_GONE_BACKSTOP_S 60

typedef enum {
    UPLINK_FRONT_OK = 0,
    UPLINK_FRONT_STOPPED, /* silent, but stopped (state T/t): it will come back */
    UPLINK_FRONT_GONE,    /* the parent died, or silent while running */
} UplinkFront;
/* Reads what waits on ctl (commands are queued for uplink_next_cmd), then
 * judges ddptop. Silence counts only after the first ping and past the
 * ping timeout, from the last message or the last time ddptop was seen
 * stopped (a resumed ddptop gets a whole timeout to ping again). GONE is
 * final; why (may be NULL) gets the sentence ("ddptop (pid N) is gone",
 * "nothing from ddptop for 15.2 s"). Cheap (no /proc read unless silent);
 * call it from heartbeats, waits and every step. */
UplinkFront uplink_front(Uplink *u, char *why, size_t whylen);
/* Milliseconds ddptop has been known stopped in all (for the log line
 * when it comes back). */
int64_t uplink_stopped_ms(const Uplink *u);

#endif
