/* ledger.h — the collective ledger and the heartbeat that reports it.
 *
 * Owns: the last LEDGER_SIZE collectives of this rank (seq, op, bucket,
 * bytes, enqueued/started/completed, state) — PyTorch's flight recorder, but
 * live — and a heartbeat thread with its own PUSH socket that sends a `beat`
 * every interval with the collective in flight, even while the thread that
 * issued it is blocked inside it. Thread-safe: the trainer and its comm
 * thread write, the heartbeat thread reads.
 */
#ifndef DDPTOP_LEDGER_H
#define DDPTOP_LEDGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol.h"

#define LEDGER_SIZE 256

typedef enum { COLL_ENQUEUED = 0, COLL_STARTED, COLL_DONE, COLL_FAILED } CollState;

typedef struct {
    int64_t seq;
    char op[PROTO_STR_SHORT];
    int32_t bucket;
    int64_t step;
    int64_t bytes;
    int64_t enq_ns, start_ns, done_ns;   /* wall clock; 0 = not yet */
    CollState state;
} LedgerEntry;

typedef struct Ledger Ledger;

Ledger *ledger_new(void);
void ledger_free(Ledger **l);
/* A collective is queued; returns its seq (1, 2, ... per rank: the same
 * numbering on every rank, since ranks issue collectives in the same order). */
int64_t ledger_enqueue(Ledger *l, const char *op, int32_t bucket, int64_t step, int64_t bytes);
void ledger_start(Ledger *l, int64_t seq);
void ledger_finish(Ledger *l, int64_t seq, bool ok);
/* Copy entry seq (if still in the ring). Returns 0 or -1. */
int ledger_get(const Ledger *l, int64_t seq, LedgerEntry *out);
/* The oldest collective not done. Returns 1 and fills *out, or 0. */
int ledger_inflight(const Ledger *l, LedgerEntry *out);
/* Up to max most recent entries, newest first. Returns the count. */
int ledger_recent(const Ledger *l, LedgerEntry *out, int max);
/* What the heartbeat reports besides the collective. */
void ledger_set_progress(Ledger *l, int64_t step, Phase phase);

typedef struct Heartbeat Heartbeat;

/* Start the heartbeat thread: its own PUSH socket on zctx connected to
 * tel_ep, a beat every interval_ms. Returns 0 or -1 with err. */
int heartbeat_start(Heartbeat **out, void *zctx, const char *tel_ep, int rank, Ledger *l,
                    int interval_ms, char *err, size_t errlen);
/* Stop and join it. Safe on NULL. */
void heartbeat_stop(Heartbeat **h);

#endif
