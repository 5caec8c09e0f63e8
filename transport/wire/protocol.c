/* protocol.c — names, init and cleanup for protocol v1 messages.
 *
 * Owns: the wire names of kinds and phases (the strings in "k" and
 * "phase"), the empty state of a Msg, and freeing what a decode put on the
 * heap. Does not own encoding (codec.c) or sockets (zsock.c).
 * Pure functions, safe from any thread.
 */
#include "wire/protocol.h"
#include "base/clock.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Indexed by MsgKind; these strings are the protocol, do not rename. */
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
};

/* Indexed by Phase; also wire strings. */
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

void msg_init(Msg *m, MsgKind kind)
{
    memset(m, 0, sizeof *m);
    m->kind = ((int)kind > MSG_UNKNOWN && (int)kind < MSG__COUNT) ? kind : MSG_UNKNOWN;
    m->version = PROTO_VERSION;
    m->rank = -1;
    /* -1 means "none" for these; 0 would name a real bucket / collective. */
    if (m->kind == MSG_COLL)
        m->u.coll.bucket = -1;
    if (m->kind == MSG_BEAT)
        m->u.beat.coll_seq = -1;
}

void msg_done(Msg *m)
{
    if (!m)
        return;
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
    default:
        break;
    }
}

const char *msg_kind_name(MsgKind k)
{
    if ((int)k < 0 || (int)k >= MSG__COUNT)
        return kind_names[MSG_UNKNOWN];
    return kind_names[k];
}

MsgKind msg_kind_from_name(const char *s)
{
    if (!s)
        return MSG_UNKNOWN;
    for (int k = MSG_UNKNOWN + 1; k < MSG__COUNT; k++)
        if (strcmp(s, kind_names[k]) == 0)
            return (MsgKind)k;
    return MSG_UNKNOWN;
}

const char *phase_name(Phase p)
{
    if ((int)p < 0 || (int)p >= PHASE__COUNT)
        return phase_names[PHASE_NONE];
    return phase_names[p];
}

Phase phase_from_name(const char *s)
{
    if (!s)
        return PHASE_NONE;
    for (int p = PHASE_NONE + 1; p < PHASE__COUNT; p++)
        if (strcmp(s, phase_names[p]) == 0)
            return (Phase)p;
    return PHASE_NONE;
}

int64_t proto_now_ns(void) { return wall_ns(); }
