/* record.h — recordings: the message stream ddptop received, in a file.
 *
 * Owns: the recording file format (docs/RECORDING.md), the writer that
 * `ddptop run --record FILE` feeds from its loop, and the readers that
 * `ddptop export` (and later `ddptop replay`) use: a streaming iterator and
 * an in-memory load for seeking. Does not own decoding the frames: a
 * record's payload is a protocol frame exactly as it arrived; give it to
 * codec_decode. Not thread-safe: the frontend's main thread uses it.
 *
 * Layout (little-endian): a header (magic, format version, protocol
 * version, creation time, world size, description), then records, each a
 * 28-byte head (payload length, source, CRC-32, arrival times) and the
 * payload. recorder_close appends an end record, so a file that stops
 * without one is known to be cut short, even on a record boundary.
 *
 * BUMP REC_FORMAT_VERSION on any incompatible change to this layout. Adding
 * a record source or appending header fields (the header states its own
 * length) is compatible: readers skip what they do not know.
 */
#ifndef DDPTOP_RECORD_H
#define DDPTOP_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define REC_MAGIC \
    "\x89"        \
    "DDPTOP\n" /* 8 bytes, no NUL */
#define REC_MAGIC_LEN      8
#define REC_FORMAT_VERSION 1
#define REC_HEADER_FIXED   32         /* header bytes before the description */
#define REC_HEADER_MAX     (1u << 20) /* a reader refuses a longer header */
#define REC_DESC_MAX       4096       /* the writer cuts longer descriptions */
#define REC_HEAD_BYTES     28         /* bytes in front of every payload */
/* A recorder writes when this much is buffered, and at the latest this long
 * after the oldest unwritten record arrived (recorder_tick/recorder_write),
 * so a crash of ddptop loses less than a second. */
#define REC_BUF_BYTES      (256u << 10)
#define REC_FLUSH_NS       500000000LL
/* Bytes of the "how it ended" text an exit record keeps. */
#define REC_HOW_MAX        64
#define REC_NOTE_MAX       256

/* Where a record came from. Values are on disk: never renumber. */
typedef enum {
    REC_SRC_TEL = 1,   /* a frame received on the tel PULL socket */
    REC_SRC_CTL = 2,   /* a frame received on the ctl ROUTER (the body; no routing id) */
    REC_SRC_SENT = 3,  /* a frame ddptop sent (a cmd), for replay to show it */
    REC_SRC_START = 4, /* ddptop launched a rank: RecProc payload */
    REC_SRC_EXIT = 5,  /* a rank's process ended: RecProc payload */
    REC_SRC_NOTE = 6,  /* an event line of ddptop's own: RecNote payload */
    REC_SRC_END = 7,   /* written by recorder_close; nothing follows it */
} RecSource;

/* A short name for a source ("tel", "ctl", "sent", "start", "exit",
 * "note", "end"; "unknown" otherwise). */
const char *rec_source_name(int src);

/* ---- writer ----------------------------------------------------------- */

typedef struct Recorder Recorder;

/* Create (or truncate) path and write the header: world size (0 when
 * unknown) and a free-form UTF-8 description of the job, e.g. the command
 * line (NULL for none; cut at REC_DESC_MAX bytes). The header reaches the
 * file before this returns. Returns NULL with a reason in err. */
Recorder *recorder_open(const char *path, int world, const char *desc, char *err, size_t errlen);

/* Append one record: a frame exactly as received (or sent, for
 * REC_SRC_SENT) from the socket `src` names. mono_ns is CLOCK_MONOTONIC
 * at arrival and wall_ns CLOCK_REALTIME at arrival; 0 means "now".
 * Frames over PROTO_MAX_FRAME_BYTES are not recorded (codec refuses them
 * anyway) and count as skipped.
 * Errors are reported once: the first failure returns -1 with err and turns
 * the recorder off; every later call returns 0 and does nothing (the job
 * goes on, unrecorded). Otherwise returns 0. */
int recorder_write(Recorder *r, RecSource src, const void *frame, size_t len, int64_t mono_ns, int64_t wall_ns,
                   char *err, size_t errlen);

/* Process events, for replay: ddptop launched `rank` as pid, or its process
 * ended with waitpid status `wait_status` (how: NULL or who ended it, e.g.
 * "SIGKILL by ddptop"). Same time and error conventions as recorder_write. */
int recorder_write_start(Recorder *r, int rank, int pid, int64_t mono_ns, int64_t wall_ns, char *err, size_t errlen);
int recorder_write_exit(Recorder *r, int rank, int pid, int wait_status, const char *how, int64_t mono_ns,
                        int64_t wall_ns, char *err, size_t errlen);
/* An event line of ddptop's own (rank -1 for ddptop; level 0 info, 1 warn,
 * 2 error, as JobEventLevel). */
int recorder_write_note(Recorder *r, int rank, int level, const char *text, int64_t mono_ns, int64_t wall_ns, char *err,
                        size_t errlen);

/* Call from the loop (every poll timeout is plenty): writes what has waited
 * REC_FLUSH_NS. now_mono_ns 0 means now. Returns 0, or -1 once (see
 * recorder_write). */
int recorder_tick(Recorder *r, int64_t now_mono_ns, char *err, size_t errlen);

/* Records written (accepted into the buffer), bytes in the file so far, and
 * whether the recorder turned itself off after an error. */
uint64_t recorder_records(const Recorder *r);
uint64_t recorder_bytes(const Recorder *r);
bool recorder_failed(const Recorder *r);

/* Write the end record, flush and close; *rp becomes NULL. Safe on NULL.
 * Returns 0, or -1 with err if this last write failed and no error had been
 * reported before. */
int recorder_close(Recorder **rp, char *err, size_t errlen);

/* ---- readers ---------------------------------------------------------- */

typedef struct {
    uint16_t format_version;
    uint16_t proto_version;  /* PROTO_VERSION of the writer */
    uint32_t header_bytes;   /* offset of the first record */
    int64_t created_wall_ns; /* CLOCK_REALTIME when the recording began */
    int32_t world;           /* 0 when unknown */
    char *desc;              /* NUL-terminated, heap (owned by the reader) */
} RecHeader;

typedef struct {
    int src;             /* RecSource; a newer writer's unknown values are passed on */
    int64_t t_ns;        /* arrival, ns since the recording began (monotonic) */
    int64_t wall_ns;     /* arrival, CLOCK_REALTIME */
    uint64_t offset;     /* byte offset of the record's head in the file */
    uint64_t index;      /* 0-based position in the file */
    const uint8_t *data; /* payload (a frame for TEL, CTL, SENT) */
    uint32_t len;
} RecEntry;

/* Payloads of REC_SRC_START / REC_SRC_EXIT and REC_SRC_NOTE, decoded. */
typedef struct {
    int32_t rank, pid, wait_status; /* wait_status: 0 for START */
    char how[REC_HOW_MAX];          /* EXIT: "" or who ended it */
} RecProc;

typedef struct {
    int32_t rank;  /* -1: ddptop itself */
    int32_t level; /* 0 info, 1 warn, 2 error */
    char text[REC_NOTE_MAX];
} RecNote;

/* Decode the payload of a START/EXIT (RecProc) or NOTE record. Returns 0,
 * or -1 when the payload is malformed or the source is another one. */
int rec_proc_decode(const RecEntry *e, RecProc *out);
int rec_note_decode(const RecEntry *e, RecNote *out);

/* Streaming reader: one record at a time, memory bounded by the largest
 * record (at most PROTO_MAX_FRAME_BYTES). */
typedef struct RecReader RecReader;

/* Open and validate the header. A wrong magic, a newer format or protocol
 * version, a damaged or truncated header: NULL with a one-line reason naming
 * the file in err. */
RecReader *recreader_open(const char *path, char *err, size_t errlen);
const RecHeader *recreader_header(const RecReader *rd);
/* The next record. Returns 1 with *out filled (out->data stays valid until
 * the next call), 0 at the end record (a complete recording), -1 when the
 * file stops early or is damaged: err says where, e.g.
 *   "recording ends early at byte 5120 (record 42, t=12.3 s): truncated record
 *    (188-byte payload, 40 bytes left)"
 * where byte is the end of the last good record, record the 1-based number
 * of the first bad one and t the arrival time of the last good one. Every
 * call after the end returns the same result again. Never reads past the
 * file's end, never allocates from an unchecked length. */
int recreader_next(RecReader *rd, RecEntry *out, char *err, size_t errlen);
/* Records returned so far, and the offset just past the last one. */
uint64_t recreader_count(const RecReader *rd);
void recreader_close(RecReader **rdp);

/* In memory, for seeking (replay) and for exporters that look ahead. */
typedef struct {
    RecHeader hdr;
    RecEntry *recs; /* [n], arrival order; data points into the loaded blob */
    size_t n;
    bool complete;  /* the end record was there */
    char tail[320]; /* when not complete: why and where it ended ("" if complete) */
    uint64_t file_bytes;
    void *blob_; /* private */
} Recording;

/* Load every good record of path. A tel/ctl record holding a burst is
 * loaded as one entry per message it carries (each with the burst's
 * arrival, offset and index; one claiming another rank than the burst's is
 * left out), so readers of a Recording meet single frames only; the file
 * keeps the burst as it arrived. A bad header fails (-1, err, *out NULL).
 * A damaged or truncated tail does not: the records before it are loaded,
 * complete is false and tail holds the reader's message. */
int recording_load(const char *path, Recording **out, char *err, size_t errlen);
void recording_free(Recording **rp);
/* Index of the first record arriving at or after t_ns (n when none). */
size_t recording_seek_time(const Recording *r, int64_t t_ns);

#endif
