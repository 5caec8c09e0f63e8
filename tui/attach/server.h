/* viewers.h — screens attached to a running job (`ddptop attach`), ddptop's side.
 *
 * Owns: the attached viewers (routing id on the job's ctl ROUTER, read-only
 * or --control, when last heard from), the snapshot a newcomer needs (the
 * last hello, phase, shard, ckpt and eval frame of every rank, plus the
 * steps it would otherwise have to wait for), and forwarding every
 * telemetry frame ddptop receives to each viewer without ever blocking
 * (ZMQ_DONTWAIT; a full queue drops and counts, as for --publish).
 * Main thread only (the ctl socket's owner).
 *
 * The wire (docs/PROTOCOL.md, "Attached viewers"): a viewer is a DEALER on
 * the job's control endpoint with a routing id "view-..." that sends
 *   {"k":"cmd","op":"attach","arg":0|1,"id":P}    (1: --control), at least every 2 s
 *   {"k":"cmd","op":"ckpt"|"stop"|"pause"|"abort", "id":N}
 *   {"k":"cmd","op":"stacks","id":N,"arg":0|1}    (every rank's stacks merged; 1: as JSON)
 *   {"k":"cmd","op":"detach"}
 * ddptop answers "attach" with the snapshot, then forwards frames as they
 * come; a command from a read-only viewer is answered with a "log" message
 * (level "warn") that says so, and applied only for --control viewers;
 * "stacks" (it changes nothing) is served to any attached viewer: ddptop
 * gathers every rank's stacks twice, a second apart, and answers with log
 * messages of level "stacks" that together hold the merged tree (as text,
 * or JSON with arg 1; cut anywhere but inside a UTF-8 character), then
 * one of level "stacks-end" (its text: what was gathered, or why not).
 * Every second ddptop sends each viewer {"k":"cmd","op":"ping","id":P}
 * (P random); the viewer's next "attach" carries the last P it got. A
 * viewer that has answered no ping for 6 s is forgotten (its slot freed),
 * however often it re-sends "attach". A newcomer's first "attach" is
 * answered with a ping only; it is let in when it answers that. 
 */
#ifndef DDPTOP_VIEWERS_H
#define DDPTOP_VIEWERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/codec.h"
#include "wire/protocol.h"

typedef struct Viewers Viewers;

/* What the run loop (tui/run/peers.c) must do for a viewer's command. */
typedef enum {
    VIEWER_NONE = 0,
    VIEWER_CKPT,
    VIEWER_STOP,
    VIEWER_PAUSE, /* toggles pause/resume, like the p key */
    VIEWER_ABORT,
    VIEWER_STACKS, /* every rank's stacks merged (arg 1: JSON): viewers_tell answers */
} ViewerAction;

/* Set ctl's options the viewers rely on (ZMQ_ROUTER_MANDATORY: a viewer's
 * full pipe is EAGAIN, so its frames wait in its queue instead of being
 * dropped silently). Call before the socket binds. */
void viewers_setup_router(void *router);

/* world: ranks in the job (sizes the snapshot). */
Viewers *viewers_new(int world);
void viewers_free(Viewers **v);

/* True for routing ids viewers use ("view-" prefix). */
bool viewers_is_viewer_ident(const void *ident, size_t ident_len);

/* Every frame ddptop receives from a rank (tel or ctl), as received: kept
 * for the snapshot when it is of a kind the snapshot holds, and forwarded
 * to every attached viewer. */
void viewers_on_frame(Viewers *v, void *ctl_router, const void *frame, size_t len);
/* The same for a frame already decoded (rc and m as ZsTap gives them):
 * ddptop's receive loop, which must not pay for a second decode. */
void viewers_on_decoded(Viewers *v, void *ctl_router, const void *frame, size_t len, const Msg *m, int rc);
/* For a receive loop that takes a burst apart itself: one of its messages
 * (its own frame and decoded form, checked) kept for the snapshot, not
 * forwarded; then the burst (or, when some of its messages were refused,
 * each accepted message's frame) goes out with viewers_forward, which
 * forwards a frame as it is and keeps nothing. */
void viewers_keep_msg(Viewers *v, const void *frame, size_t len, const Msg *m);
/* viewers_keep_msg for ms[0..n) in order, each from its own frame
 * (frames[i], lens[i] bytes): a burst's, one call for them. */
void viewers_keep_msgs(Viewers *v, const void *const *frames, const size_t *lens, const Msg *ms, int n);
void viewers_forward(Viewers *v, void *ctl_router, const void *frame, size_t len);

/* A decoded message from a viewer's routing id (m->kind == MSG_CMD).
 * Registers/refreshes the viewer on "attach" (and sends it the snapshot),
 * forgets it on "detach". Returns the action a --control viewer asked for
 * (VIEWER_NONE otherwise; a read-only viewer's request is answered with a
 * warning). *who gets a label for the event line ("viewer 2 (pid 1234)"). */
ViewerAction viewers_handle(Viewers *v, void *ctl_router, const void *ident, size_t ident_len, const Msg *m,
                            int64_t now_ms, char *who, size_t wholen);

/* A log line of ddptop's (rank -1) to the attached viewer ident, after
 * what it is still owed. Returns 0, or -1 when no such viewer is attached. */
int viewers_tell(Viewers *v, void *ctl_router, const void *ident, size_t ident_len, const char *level,
                 const char *text);

/* Ping the viewers (once a second each), pump their queues and forget
 * those that answered no ping for 6 s. Returns how many are attached. */
int viewers_tick(Viewers *v, int64_t now_ms);
int viewers_count(const Viewers *v);
uint64_t viewers_drops(const Viewers *v);
/* Frames the snapshot kept by copying them over a slot's own earlier frame
 * (no allocation): a job's steady stream of steps, while no viewer's queue
 * still holds that earlier frame. */
uint64_t viewers_reused(const Viewers *v);

#endif
