/* tstream.h — the telemetry stream: a rank's tel frames over a unix stream
 * socket on its own host, read by the frontend's own thread.
 *
 * ZeroMQ's PUSH/PULL over ipc:// costs the receiver a thread: its I/O
 * thread wakes, reads, copies each frame into an allocation and signals the
 * main thread, which polls and receives it again (a third of ddptop's CPU
 * at 64 ranks, docs/BENCHMARKS.md). Here the frontend reads each rank's
 * connection itself, once per turn, straight into a buffer of its own, and
 * decodes the frames where they lie: one system call per ready connection
 * and turn, no thread, no copy per frame. It is the same wire: every frame
 * exactly as it would travel over ZeroMQ (docs/PROTOCOL.md, "The telemetry
 * stream"), so the recording, --publish and the viewers see the same bytes.
 *
 * A connection begins with TSTREAM_MAGIC; then each frame is a 4-byte
 * little-endian length and that many bytes. The server trusts nothing: a
 * wrong magic, a length of 0 or over PROTO_MAX_FRAME_BYTES closes that
 * connection (counted, the reason kept); a peer that dies mid-frame loses
 * only that frame (counted). Who sent a frame is the pid the kernel gave
 * at accept (SO_PEERCRED), as ZeroMQ's ipc reports it.
 *
 * ddptop also writes down the stream, in the same framing (no greeting):
 * its once-a-second `cmd` ping to the rank on that connection, so a rank on
 * the stream hears ddptop without a message a second queued in ZeroMQ's
 * pipe to it (a pipe touches new memory for its first ~500 messages: +29 KB
 * a rank over 7.5 minutes, docs/BENCHMARKS.md). A rank reads them with
 * tsc_read; one that never reads leaves them in the kernel's buffer, where
 * they stop at its size (ddptop's writes never wait).
 *
 * The client never blocks the caller: what the socket does not take at
 * once waits in the client's own queue (bounded: past TSTREAM_PENDING_MAX
 * a new frame is dropped whole and the caller counts it, as a full ZeroMQ
 * queue drops), and is written by the next send or flush. Frames are
 * queued whole, so a full queue never cuts one.
 *
 * One thread per object (the caller's lock, if several share a client).
 * Owns the sockets and the path it binds (removed at close); not the
 * decoding (codec.h) nor what a frame means.
 */
#ifndef DDPTOP_TSTREAM_H
#define DDPTOP_TSTREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TSTREAM_MAGIC     "DDPTEL1\n" /* 8 bytes: bump the digit with an incompatible change */
#define TSTREAM_MAGIC_LEN 8
/* What a client may hold unsent (a frontend that fell behind), like the
 * 10000 frames of a worker's ZeroMQ queue. */
#define TSTREAM_PENDING_MAX (16u << 20)

/* The stream's path for a tel endpoint: "ipc://P" -> "P.stream"; -1 for
 * any other endpoint (tcp:// has none) or a path too long for a socket. */
int tstream_path(const char *tel_ep, char *out, size_t outlen);

/* ---- the frontend's end ---- */

typedef struct TStreamServer TStreamServer;

/* Bind and listen at path (a file that is there is left alone: a socket
 * some process accepts on -> EADDRINUSE, anything else -> EEXIST; a stale
 * socket nobody accepts on is replaced). At most max_conns connections at
 * once (more are accepted and closed at once, counted). Returns 0, or -1
 * with err. */
int tss_open(TStreamServer **out, const char *path, int max_conns, char *err, size_t errlen);
/* Close every connection and the listening socket; remove the path. */
void tss_close(TStreamServer **s);
/* A descriptor that polls readable when a connection or new data arrives
 * (for a poll set); data a drain left (tss_more) does not make it so. */
int tss_fd(const TStreamServer *s);
/* Did a drain leave data it knows waits (a read that filled its room)? */
bool tss_more(const TStreamServer *s);

/* One frame as received: its bytes (valid during the call only), the
 * sending process's pid (0 where the kernel did not say) and its
 * connection (for tss_send; never 0, never reused by a later connection). */
typedef void (*TssFrameFn)(void *ctx, const uint8_t *frame, size_t len, int64_t pid, uint64_t conn);

/* Accept what connects and read what waits: every connection that has data
 * is read once (up to its buffer), and each whole frame goes to fn, in the
 * order each connection sent them; a connection whose read filled the
 * buffer is read again in the next pass (or the next call). Stops after
 * max_frames frames (the rest waits for the next call). Returns the frames
 * handed to fn; *more (if not NULL) says whether data still waits that
 * tss_fd will not announce: call again without waiting. Never blocks. */
int tss_drain(TStreamServer *s, int max_frames, TssFrameFn fn, void *ctx, bool *more);

/* Write one frame (at most TSTREAM_DOWN_MAX bytes) down connection conn,
 * never waiting: 0 written (or its tail queued behind nothing else), 1
 * dropped (the last one is not out yet: the rank does not read), -1 no such
 * connection (closed, or a frame too large). */
#define TSTREAM_DOWN_MAX 256
int tss_send(TStreamServer *s, uint64_t conn, const void *frame, size_t len);

typedef struct {
    int conns;               /* open now */
    uint64_t accepted;       /* connections accepted, in all */
    uint64_t refused;        /* closed at once: over max_conns */
    uint64_t bad;            /* closed for a wrong magic or length */
    uint64_t cut;            /* frames lost to a peer that closed mid-frame */
    uint64_t frames, bytes;  /* delivered */
    char last_bad[160];      /* why the last bad connection was closed */
} TssStats;
void tss_stats(const TStreamServer *s, TssStats *out);

/* ---- a rank's end ---- */

typedef struct TStream TStream;

/* Connect to path. Returns 0, or -1 with errno (ENOENT, ECONNREFUSED: no
 * stream there; the caller uses ZeroMQ's tel). */
int tsc_open(TStream **out, const char *path);
/* Close; up to linger_ms is spent writing what waits (0: nothing). */
void tsc_close(TStream **c, int linger_ms);
/* Send one frame (1..PROTO_MAX_FRAME_BYTES bytes): written at once as far
 * as the socket takes it, the rest queued. Returns 0 taken, 1 dropped (the
 * queue is full or the connection broke: the caller counts it). */
int tsc_send(TStream *c, const void *frame, size_t len);
/* Write what waits, as far as the socket takes it. Returns the bytes still
 * waiting. */
size_t tsc_flush(TStream *c);
/* Write what waits, waiting for the socket up to timeout_ms. Returns the
 * bytes still waiting. */
size_t tsc_wait(TStream *c, int timeout_ms);
/* Whether the connection broke (the frontend went away): every send drops. */
bool tsc_broken(const TStream *c);
/* Read what ddptop sent down (tss_send) without waiting: fn gets each whole
 * frame (valid during the call). Returns the frames, -1 when the
 * connection broke or ddptop sent something that is not a frame of at most
 * TSTREAM_DOWN_MAX bytes (the stream is then broken). */
typedef void (*TscFrameFn)(void *ctx, const uint8_t *frame, size_t len);
int tsc_read(TStream *c, TscFrameFn fn, void *ctx);

#endif
