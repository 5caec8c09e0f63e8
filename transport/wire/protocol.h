/* protocol.h — ddptop wire protocol v1: message kinds and their fields.
 *
 * Owns: the in-memory form of every message that crosses ddptop's sockets.
 * Does not own: encoding (codec.h) or sockets (zsock.h).
 *
 * Each message is one ZeroMQ frame holding a msgpack map with string keys;
 * "v" (protocol version) and "k" (kind) come first, then "r" (rank) and
 * "t" (wall-clock ns) where they apply. docs/PROTOCOL.md is the reference.
 *
 * BUMP PROTO_VERSION on any incompatible change (a key renamed, a type or a
 * unit changed, a meaning changed). Adding a kind or a key is compatible:
 * decoders skip what they do not know.
 */
#ifndef DDPTOP_PROTOCOL_H
#define DDPTOP_PROTOCOL_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#define PROTO_VERSION         1
/* Frames above this size are refused by the decoder (a shard of 1M indices
 * fits with room to spare). */
#define PROTO_MAX_FRAME_BYTES (8u << 20)
/* Most indices one shard message carries, and the largest store value.
 * Encoder and decoder both refuse more; send a compact form instead. */
#define PROTO_MAX_IDX         (1u << 20)
/* Integers on the wire lie within +-PROTO_INT_MAX (2^61: wall-clock ns until
 * 2043, any step, sample or byte count), so a reader may subtract or add two
 * of them without overflow; a frame with a larger one is malformed. */
#define PROTO_INT_MAX         ((int64_t)1 << 61)
#define PROTO_MAX_VAL_BYTES   (1u << 20)
/* Most messages one burst carries (the burst also stays within
 * PROTO_MAX_FRAME_BYTES). */
#define PROTO_MAX_BURST       4096u
/* Most bytes of a stack message's text (a rank's every-thread dump): the
 * encoder refuses more, the decoder keeps the first this many (cut at a
 * character). A sender cuts at a line and sets "cut". */
#define PROTO_MAX_STACK_BYTES (64u << 10)

/* Fixed string sizes: decoders truncate longer strings (NUL-terminated). */
#define PROTO_STR_SHORT 32
#define PROTO_STR_MED   128
#define PROTO_STR_LONG  512
/* a dtype's name: torch's longest today, "float8_e4m3fnuz", is 15 */
#define PROTO_STR_DTYPE 16

typedef enum {
    MSG_UNKNOWN = 0, /* a kind this build does not know: skip it */
    /* worker -> ddptop */
    MSG_HELLO,
    MSG_PHASE,
    MSG_STEP,
    MSG_COLL,
    MSG_SHARD,
    MSG_CKPT,
    MSG_LOG,
    MSG_BEAT,
    MSG_BYE,
    /* ddptop -> worker */
    MSG_CMD,
    /* store: worker -> ddptop requests, ddptop -> worker reply ("val") */
    MSG_SET,
    MSG_GET,
    MSG_WAIT,
    MSG_VAL,
    /* worker -> ddptop, added after the first kinds (order here is not on the wire) */
    MSG_EVAL,
    /* ddptop on node 0 <-> the agent on another node (multi-node runs) */
    MSG_NODE,
    /* worker -> ddptop: several tel messages of one rank in one frame */
    MSG_BURST,
    /* worker -> ddptop: what it learned of the job after its hello (a torch
     * script's model at DDP, its data at the first batch) */
    MSG_INFO,
    /* worker -> ddptop (on ctl): one rank's every-thread stack dump,
     * answering a "stacks" command */
    MSG_STACK,
    MSG__COUNT
} MsgKind;

/* Phases of a worker, in the order a clean run passes through them. */
typedef enum {
    PHASE_NONE = 0,
    PHASE_INIT,
    PHASE_RENDEZVOUS,
    PHASE_BROADCAST,
    PHASE_TRAIN,
    PHASE_PAUSED,
    PHASE_CHECKPOINT,
    PHASE_STOPPING,
    PHASE_DESTROYING,
    PHASE_DESTROYED,
    PHASE_ERROR,
    PHASE__COUNT
} Phase;

typedef struct {
    int32_t local_rank, world, local_world;
    int64_t pid;
    char host[PROTO_STR_MED];
    char device[PROTO_STR_SHORT];  /* "cpu", "cuda:0" */
    char backend[PROTO_STR_SHORT]; /* "gloo", "nccl" */
    /* the GEMMs' arithmetic ("fp32", "tf32", "bf16") and the gradient
     * buckets' wire type ("fp32", "bf16"); "" when the worker does not say */
    char precision[PROTO_STR_SHORT], grad_dtype[PROTO_STR_SHORT];
    char version[PROTO_STR_MED];   /* "ddptop 0.1.0 gloo 0.5.0 zmq 4.3.4" */
    /* the job as this worker runs it */
    char dataset[PROTO_STR_SHORT];
    char model[PROTO_STR_MED]; /* "mlp:784,256,256,10" */
    int64_t params;            /* parameter count */
    int64_t batch_size;        /* per rank */
    int64_t max_steps;         /* total optimizer steps planned, 0 = unknown */
    int64_t steps_per_epoch;
    int64_t dataset_size;
} MsgHello;

typedef struct {
    Phase phase;
    char detail[PROTO_STR_LONG]; /* optional: error text, reason */
} MsgPhaseInfo;

typedef struct {
    int64_t epoch, step; /* step counts optimizer steps from 1 */
    double loss, lr;
    int64_t samples; /* samples this rank has trained on */
    double step_ms, fwd_ms, bwd_ms, opt_ms;
    double comm_ms;                 /* total time collectives took */
    double exposed_ms;              /* part of comm the step waited for */
    uint64_t drops;                 /* telemetry messages dropped so far */
    int64_t dev_mem, dev_mem_total; /* GPU memory in use / in all on the rank's
                                       device, bytes, as nvidia-smi counts it
                                       (every process); 0 on a CPU */
} MsgStep;

typedef struct {
    int64_t seq;              /* per-rank collective sequence number */
    char op[PROTO_STR_SHORT]; /* "allreduce", "broadcast", "barrier" */
    int32_t bucket;           /* -1 when not a gradient bucket */
    int64_t step;
    int64_t bytes;
    int64_t enq_ns, start_ns, done_ns; /* wall-clock ns */
    double algbw_gbs, busbw_gbs;       /* GB/s, nccl-tests formulas */
    /* the payload's shape, so ranks that disagree on it are named (came
     * after the first release: absent from an older worker, -1 and "") */
    int64_t count;                     /* elements (the first tensor's, a list's sum); -1 unknown */
    char dtype[PROTO_STR_DTYPE];       /* "float32", "bfloat16", torch's names; "" unknown */
} MsgColl;

typedef struct {
    int64_t epoch, seed;
    bool shuffle, drop_last;
    int64_t dataset_size, num_samples, total_size, padding;
    uint32_t n_idx; /* indices carried (may be < num_samples) */
    int64_t *idx;   /* heap-owned after decode; msg_done frees */
} MsgShard;

typedef struct {
    int64_t step, epoch;
    bool ok;
    char path[PROTO_STR_LONG];
    int64_t bytes;
    double ms;
    char error[PROTO_STR_MED];
} MsgCkpt;

typedef struct {
    char level[PROTO_STR_SHORT]; /* "info", "warn", "error" */
    char text[PROTO_STR_LONG];
} MsgLog;

typedef struct {
    int64_t step;
    Phase phase;
    int64_t coll_seq; /* collective in flight, -1 if none */
    char coll_op[PROTO_STR_SHORT];
    int64_t coll_since_ns;
    /* where the rank's main thread is, "train.py:57 save_checkpoint" (file,
     * line, function of the script's innermost frame); "" when the worker
     * has no such thing (ddptop's own C trainer) */
    char where[PROTO_STR_MED];
    int64_t coll_bucket; /* the DDP gradient bucket that collective reduces, -1 none or not a bucket */
    /* that collective's payload, as MsgColl's count and dtype: -1 and ""
     * unknown (an older worker, a DDP bucket) */
    int64_t coll_count;
    char coll_dtype[PROTO_STR_DTYPE];
} MsgBeat;

typedef struct {
    int32_t status; /* the exit status the worker will use */
    int64_t step;
    /* "" or why the worker refused to run as launched, a usage error
     * (-n N with a script that starts its own ranks): ddptop exits 2 */
    char refused[PROTO_STR_LONG];
} MsgBye;

typedef struct {
    int64_t epoch, step;    /* evaluated after this step (end of epoch) */
    double loss;            /* mean cross-entropy over the eval set */
    double accuracy;        /* correct / total, 0..1 */
    int64_t correct, total; /* all-reduced over ranks */
} MsgEval;

/* hello's job fields, learned later: a torch script's model when DDP
 * wraps it, its data at the first batch. Every field optional: "" or 0 is
 * not known (yet); the job takes each the first time one is known. */
typedef struct {
    char dataset[PROTO_STR_SHORT]; /* the dataset's class, "FashionMNIST" */
    char model[PROTO_STR_MED];     /* the DDP module's class, "Sequential" */
    int64_t params;                /* its parameter count */
    int64_t batch_size;            /* per rank */
    int64_t dataset_size;          /* samples in the dataset (len) */
} MsgInfo;

/* Between node 0's ddptop and the agent of node K (ops, see PROTOCOL.md):
 * agent -> node 0: "join" (nnodes, nproc, host, pid), "started" (r, pid),
 * "exit" (r, pid, status: a wait status), "log" (r, text: a line of a rank's
 * log tail);
 * node 0 -> agent: "welcome" (job, restart, text: the trainer options
 * added for a restart), "refused" (text), "launch" (job, restart, text,
 * spent),
 * "signal" (signo), "done". */
typedef struct {
    char op[PROTO_STR_SHORT];
    int32_t node, nnodes, nproc;
    char host[PROTO_STR_MED];
    int64_t pid;
    int32_t status, signo, restart;
    char job[PROTO_STR_MED];
    char text[PROTO_STR_LONG];
    int64_t spent; /* launch: the ranks' DDPTOP_FAULTS_SPENT, -1 (and absent): none */
} MsgNode;

/* A burst: up to PROTO_MAX_BURST complete v1 frames of the burst's rank,
 * each a tel kind (never a burst), in the order they happened. items holds
 * them as msgpack bins (header, then the frame), one after the other;
 * codec_burst_next walks them, codec_burst_decode decodes one. */
typedef struct {
    uint32_t n;     /* frames carried */
    uint32_t len;   /* bytes in items */
    uint8_t *items; /* heap-owned after decode; msg_done frees */
} MsgBurst;

/* One rank's stacks, every thread, as Python's faulthandler writes them
 * (model/pystack.h's format), sent by the torch adapter's heartbeat thread
 * when a "stacks" command asks (cmd arg = token). */
typedef struct {
    int64_t token; /* the asking command's arg: a reply to an older look is ignored */
    bool cut;      /* the sender cut the dump to fit PROTO_MAX_STACK_BYTES */
    uint32_t len;  /* bytes of text */
    char *text;    /* heap-owned after decode, NUL-terminated UTF-8; msg_done frees */
} MsgStack;

typedef struct {
    int64_t id;               /* per-op sequence number, from 1 */
    char op[PROTO_STR_SHORT]; /* "ckpt", "stop", "pause", "resume", "ping", "fault", "stacks" */
    int64_t arg;
} MsgCmd;

typedef struct {
    char key[PROTO_STR_MED];
    int64_t timeout_ms; /* wait/get: how long ddptop may hold the reply */
    uint32_t val_len;
    uint8_t *val;              /* heap-owned after decode; msg_done frees */
    bool ok;                   /* val: false when the key timed out or the request was refused */
    char error[PROTO_STR_MED]; /* val: why ok is false ("" for a timeout) */
} MsgStore;

typedef struct {
    MsgKind kind;
    int32_t version; /* "v" as received */
    int32_t rank;    /* "r", -1 when absent */
    int64_t t_ns;    /* "t", 0 when absent */
    union {
        MsgHello hello;
        MsgPhaseInfo phase;
        MsgStep step;
        MsgColl coll;
        MsgShard shard;
        MsgCkpt ckpt;
        MsgLog log;
        MsgBeat beat;
        MsgBye bye;
        MsgCmd cmd;
        MsgStore store; /* set, get, wait, val */
        MsgEval eval;
        MsgNode node;
        MsgBurst burst;
        MsgInfo info;
        MsgStack stack;
    } u;
} Msg;

/* Initialise *m as an empty message of the given kind (rank -1). */
void msg_init(Msg *m, MsgKind kind);
/* As msg_init, but only the envelope and the kind's member of the union
 * (msg_defined_bytes) are cleared and given their defaults; the union's
 * other bytes keep what they held. For decoders, which fill one message a
 * frame: a step's 136 bytes, not the Msg's 872. */
void msg_init_member(Msg *m, MsgKind kind);
/* Bytes from the start of a Msg of this kind that msg_init_member defines:
 * the envelope and the kind's member (the whole Msg for no kind). */
size_t msg_defined_bytes(MsgKind kind);
/* Free heap parts a decode allocated (shard indices, store values, burst items, stack text). It frees
 * idx/val whoever set them: on a message built around your own arrays, don't. */
void msg_done(Msg *m);

/* Names for kinds and phases, as they appear on the wire. */
const char *msg_kind_name(MsgKind k);
MsgKind msg_kind_from_name(const char *s); /* MSG_UNKNOWN if none */
const char *phase_name(Phase p);
Phase phase_from_name(const char *s); /* PHASE_NONE if none */

/* Wall-clock time in ns (CLOCK_REALTIME). */
int64_t proto_now_ns(void);

/* A rank's routing id on ctl: "rank-R.PID.NONCE", NONCE 8 lowercase hex
 * digits drawn per process, so no other process can take (or hold first)
 * the id of a live rank (docs/PROTOCOL.md, "Routing ids"). The plain
 * "rank-R" of custom trainers is still accepted. Fits PROTO_RANK_IDENT_MAX. */
#define PROTO_RANK_IDENT_MAX 48
/* Write rank's id for process pid into out; returns its length, or -1 when
 * rank or pid is out of range or out is too small. */
int proto_rank_ident(char *out, size_t outlen, int rank, int64_t pid, uint32_t nonce);
/* The rank a routing id names, or -1 when it is not a rank's id; *pid (may
 * be NULL) gets the pid it names, 0 for a plain "rank-R". */
int proto_rank_ident_parse(const void *ident, size_t len, int64_t *pid);

#endif
