/* publish.h — the pub socket: `ddptop run --publish ENDPOINT`.
 *
 * Owns: one ZeroMQ PUB socket that re-publishes frames exactly as ddptop
 * received them (no topic: subscribers subscribe to ""), the policy on
 * which endpoints may be bound. A subscriber at most publisher_keeps_up()
 * frames behind gets every frame in order; one further behind loses its
 * own frames (ZeroMQ drops them past its queue of SNDHWM), never another's,
 * and never makes a send wait (docs/RECORDING.md, "The live stream").
 * Does not own the frames' meaning: each is a protocol v1
 * frame (docs/PROTOCOL.md), readable by any msgpack client.
 * The socket belongs to the thread that opened it (ddptop's main loop).
 *
 * Binding beyond this machine needs the job's CURVE keys (publisher_open_keys:
 * the PUB socket is then a CURVE server, and subscribers need the key file
 * and pass the ZAP check); without keys anyone who can reach the port could
 * read the job, so only ipc://, inproc:// and tcp:// on a loopback address
 * (127.0.0.0/8, ::1, localhost) are accepted.
 */
#ifndef DDPTOP_PUBLISH_H
#define DDPTOP_PUBLISH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net/curve.h"

/* Each subscriber's queue in ddptop, in frames (ZMQ_SNDHWM). */
#define PUBLISH_DEFAULT_HWM 10000
/* publisher_send takes in the subscribers' progress every this many sends. */
#define PUBLISH_LOOK_EVERY  100
/* How long closing may spend handing the last frames to subscribers. */
#define PUBLISH_LINGER_MS   200

typedef struct Publisher Publisher;

/* Check that endpoint may be bound (see above). Returns 0, or -1 with a
 * one-line reason in err. publisher_open calls it; main may call it early
 * to refuse a bad --publish before launching anything. */
int publisher_check_endpoint(const char *endpoint, char *err, size_t errlen);

/* The same, when the job has CURVE keys: any tcp:// endpoint is accepted. */
int publisher_check_endpoint_keys(const char *endpoint, bool have_keys, char *err, size_t errlen);

/* Bind a PUB socket in the ZeroMQ context ctx. sndhwm <= 0 means
 * PUBLISH_DEFAULT_HWM. Returns NULL with a one-line reason in err. */
Publisher *publisher_open(void *ctx, const char *endpoint, int sndhwm, char *err, size_t errlen);
/* With keys (non-NULL) a tcp:// endpoint gets CURVE (a ZAP handler must run
 * in ctx: zap_start). */
Publisher *publisher_open_keys(void *ctx, const char *endpoint, int sndhwm, const JobKeys *keys, char *err,
                               size_t errlen);

/* The endpoint actually bound (a "tcp://127.0.0.1:*" gets its port here). */
const char *publisher_endpoint(const Publisher *p);

/* Publish one frame, never blocking: a subscriber whose queue is full
 * misses it, the others get it (ZeroMQ does not tell which, so that is not
 * counted). Returns 0 handed to ZeroMQ (or nobody subscribed), 1 lost for
 * every subscriber (counted in publisher_drops). */
int publisher_send(Publisher *p, const void *frame, size_t len);

/* The promise (see the top of publish.c): a subscriber that is at most
 * this many frames behind whenever a frame is published gets every frame,
 * in order: SNDHWM/2 - PUBLISH_LOOK_EVERY (4,900 for the default). */
long publisher_keeps_up(const Publisher *p);

uint64_t publisher_sent(const Publisher *p);
uint64_t publisher_drops(const Publisher *p);

/* Close the socket (waits at most PUBLISH_LINGER_MS for queued frames);
 * *pp becomes NULL. Safe on NULL. */
void publisher_close(Publisher **pp);

#endif
