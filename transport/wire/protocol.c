/* protocol.c — names, init and cleanup for protocol v1 messages.
 *
 * Owns: the wire names of kinds and phases (the strings in "k" and
 * "phase"), the empty state of a Msg, and freeing what a decode put on the
 * heap. Does not own encoding (codec.h) or sockets (zsock.c).
 * Pure functions, safe from any thread.
 */
#include "wire/protocol.h"
#include "base/clock.h"
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Indexed by MsgKind; these strings are the protocol, do not rename. */
// clang-format off
static const char *const kind_names[MSG__COUNT] = {
    [MSG_UNKNOWN] = "unknown",
    [MSG_HELLO] = "hello",
    [MSG_PHASE] = "phase",
    [MSG_STEP] = "step",
    [MSG_COLL] = "coll",
    [MSG_SHARD] = "shard",
    [MSG_CKPT] = "ckpt",
    [MSG_LOG] = "log",
    [MSG_BEAT] = "beat",
    [MSG_BYE] = "bye",
    [MSG_CMD] = "cmd",
    [MSG_SET] = "set",
    [MSG_GET] = "get",
    [MSG_WAIT] = "wait",
    [MSG_VAL] = "val",
    [MSG_EVAL] = "eval",
    [MSG_NODE] = "node",
    [MSG_BURST] = "burst",
    [MSG_INFO] = "info",
    [MSG_STACK] = "stack",
};
// clang-format on

/* Indexed by Phase; also wire strings. */
// clang-format off
static const char *const phase_names[PHASE__COUNT] = {
    [PHASE_NONE] = "none",
    [PHASE_INIT] = "init",
    [PHASE_RENDEZVOUS] = "rendezvous",
    [PHASE_BROADCAST] = "broadcast",
    [PHASE_TRAIN] = "train",
    [PHASE_PAUSED] = "paused",
    [PHASE_CHECKPOINT] = "checkpoint",
    [PHASE_STOPPING] = "stopping",
    [PHASE_DESTROYING] = "destroying",
    [PHASE_DESTROYED] = "destroyed",
    [PHASE_ERROR] = "error",
};
// clang-format on

/* The envelope's and kind's defaults, what a missing key reads as, over a
 * cleared Msg. */
static void msg_defaults(Msg *m, MsgKind kind)
{
    m->kind = ((int)kind > MSG_UNKNOWN && (int)kind < MSG__COUNT) ? kind : MSG_UNKNOWN;
    m->version = PROTO_VERSION;
    m->rank = -1;
    /* -1 means "none" for these; 0 would name a real bucket / collective. */
    if (m->kind == MSG_COLL) m->u.coll.bucket = -1, m->u.coll.count = -1; /* count: unknown, as from an older worker */
    if (m->kind == MSG_BEAT) m->u.beat.coll_seq = m->u.beat.coll_bucket = m->u.beat.coll_count = -1;
    if (m->kind == MSG_NODE) m->u.node.spent = -1;
}

void msg_init(Msg *m, MsgKind kind)
{
    memset(m, 0, sizeof *m);
    msg_defaults(m, kind);
}

/* Bytes of the union a kind's member takes; all of it for no kind. */
static size_t member_bytes(MsgKind kind)
{
    switch (kind) {
    case MSG_HELLO: return sizeof(MsgHello);
    case MSG_PHASE: return sizeof(MsgPhaseInfo);
    case MSG_STEP: return sizeof(MsgStep);
    case MSG_COLL: return sizeof(MsgColl);
    case MSG_SHARD: return sizeof(MsgShard);
    case MSG_CKPT: return sizeof(MsgCkpt);
    case MSG_LOG: return sizeof(MsgLog);
    case MSG_BEAT: return sizeof(MsgBeat);
    case MSG_BYE: return sizeof(MsgBye);
    case MSG_CMD: return sizeof(MsgCmd);
    case MSG_SET:
    case MSG_GET:
    case MSG_WAIT:
    case MSG_VAL: return sizeof(MsgStore);
    case MSG_EVAL: return sizeof(MsgEval);
    case MSG_NODE: return sizeof(MsgNode);
    case MSG_BURST: return sizeof(MsgBurst);
    case MSG_INFO: return sizeof(MsgInfo);
    case MSG_STACK: return sizeof(MsgStack);
    default: return sizeof(((Msg *)0)->u);
    }
}

size_t msg_defined_bytes(MsgKind kind) { return offsetof(Msg, u) + member_bytes(kind); }

void msg_init_member(Msg *m, MsgKind kind)
{
    memset(m, 0, msg_defined_bytes(kind));
    msg_defaults(m, kind);
}

void msg_done(Msg *m)
{
    if (!m) return;
    switch (m->kind) {
    case MSG_SHARD:
        free(m->u.shard.idx);
        m->u.shard.idx = NULL;
        m->u.shard.n_idx = 0;
        break;
    case MSG_SET:
    case MSG_GET:
    case MSG_WAIT:
    case MSG_VAL:
        free(m->u.store.val);
        m->u.store.val = NULL;
        m->u.store.val_len = 0;
        break;
    case MSG_STACK:
        free(m->u.stack.text);
        m->u.stack.text = NULL;
        m->u.stack.len = 0;
        break;
    case MSG_BURST:
        free(m->u.burst.items);
        m->u.burst.items = NULL;
        m->u.burst.n = m->u.burst.len = 0;
        break;
    default: break;
    }
}

/* A name table's entry i, or entry 0 (the "unknown" name) out of range. */
static const char *name_at(const char *const *names, int n, int i) { return i >= 0 && i < n ? names[i] : names[0]; }

/* The index of s in a name table, 0 (unknown) when absent. */
static int index_of(const char *const *names, int n, const char *s)
{
    for (int i = 1; s && i < n; i++)
        if (strcmp(s, names[i]) == 0) return i;
    return 0;
}

const char *msg_kind_name(MsgKind k) { return name_at(kind_names, MSG__COUNT, (int)k); }
MsgKind msg_kind_from_name(const char *s) { return (MsgKind)index_of(kind_names, MSG__COUNT, s); }
const char *phase_name(Phase p) { return name_at(phase_names, PHASE__COUNT, (int)p); }
Phase phase_from_name(const char *s) { return (Phase)index_of(phase_names, PHASE__COUNT, s); }

int64_t proto_now_ns(void) { return wall_ns(); }

int proto_rank_ident(char *out, size_t outlen, int rank, int64_t pid, uint32_t nonce)
{
    if (rank < 0 || pid <= 0 || pid > INT32_MAX) return -1;
    int n = snprintf(out, outlen, "rank-%d.%" PRId64 ".%08" PRIx32, rank, pid, nonce);
    return n > 0 && (size_t)n < outlen && n < PROTO_RANK_IDENT_MAX ? n : -1;
}

/* Decimal digits at s[*i..] without a leading zero, at most max; -1 if none. */
static int64_t digits(const char *s, size_t len, size_t *i, int64_t max)
{
    size_t start = *i;
    int64_t v = 0;
    for (; *i < len && s[*i] >= '0' && s[*i] <= '9'; (*i)++) {
        v = v * 10 + (s[*i] - '0');
        if (v > max) return -1;
    }
    if (*i == start || (s[start] == '0' && *i - start > 1)) return -1;
    return v;
}

int proto_rank_ident_parse(const void *ident, size_t len, int64_t *pid)
{
    const char *s = ident;
    size_t i = 5;
    if (pid) *pid = 0;
    if (!s || len < 6 || len >= PROTO_RANK_IDENT_MAX || memcmp(s, "rank-", 5)) return -1;
    int64_t rank = digits(s, len, &i, 1000000000);
    if (rank < 0) return -1;
    if (i == len) return (int)rank;
    if (s[i++] != '.') return -1;
    int64_t p = digits(s, len, &i, INT32_MAX);
    if (p <= 0 || i >= len || s[i++] != '.' || len - i != 8) return -1;
    for (; i < len; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return -1;
    if (pid) *pid = p;
    return (int)rank;
}
