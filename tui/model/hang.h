/* hang.h — who waits for whom: the hang verdict, computed here and only
 * here (run/hangwatch.c drives it live, the views print it).
 *
 * Pure analysis over a snapshot of every rank (what its heartbeats say is in
 * flight, its phase, its process state), and the snapshot's build from the
 * job model; no curses, no sockets, no /proc (the caller adds process
 * states), so it is unit-tested with made-up snapshots. Main thread.
 */
#ifndef DDPTOP_HANG_H
#define DDPTOP_HANG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/protocol.h"
#include "model/job.h"

#define HANG_LIST_MAX 256

typedef struct {
    int rank;
    bool started;       /* hello seen */
    bool exited;        /* its process ended */
    char how_ended[64]; /* "signal 9 (Killed)", "exit 1" */
    char proc_state;    /* /proc state letter; 0 unknown */
    char wchan[48];     /* kernel function it sleeps in; "" unknown */
    Phase phase;
    int64_t last_step;    /* last completed optimizer step */
    int64_t inflight_seq; /* collective in flight per its newest beat; -1 none */
    char inflight_op[PROTO_STR_SHORT];
    int64_t inflight_since_ns;     /* wall clock when it entered that collective */
    int64_t inflight_bucket;       /* the DDP bucket that collective reduces; -1 none */
    int64_t silent_ns;             /* since its last message; -1 never heard */
    int64_t sent_ns;               /* when its newest message was sent (its wall clock); 0 none */
    char where[PROTO_STR_MED + 8]; /* its Python line, "train.py:61 in save"; "" none */
    bool finished;                 /* done for good: exited cleanly, bye 0, destroying or destroyed */
    char stop_reason[64];          /* stopping/destroying: why it stopped (its phase detail); "" */
    bool python;                   /* the torch adapter's rank: it beats from a thread of its own (JobRank.python) */
} HangRank;

typedef struct {
    bool hung;     /* some collective waited longer than hang_after */
    bool mismatch; /* ranks wait in different collectives */
    bool alone;    /* every missing rank has finished: nobody will ever join
                    * (a collective under `if rank == 0:`) */
    int64_t seq;   /* the collective most ranks wait in */
    char op[PROTO_STR_SHORT];
    int64_t bucket;    /* the DDP bucket it reduces, -1 none or not known */
    int64_t waited_ms; /* longest wait in it */
    int n_waiting, n_missing;
    int waiting[HANG_LIST_MAX]; /* ranks inside it (first HANG_LIST_MAX) */
    int missing[HANG_LIST_MAX]; /* ranks that never entered it (the one that left first) */
    int left;                   /* a rank that left the training loop alone (stopping or destroying,
                                 * in its own collective) while the others wait in the next step's:
                                 * the cause (an unsafe stop); -1 none */
    int catching_up;            /* no verdict yet: ddptop is still reading what this missing rank
                                 * said before the wait began (job_catching_up); -1 none */
    int late;                   /* no verdict yet: this rank's beat is late (JOB_BEAT_LATE_NS), not
                                 * yet silent (JOB_SILENT_NS): what it said may be old news; -1 none */
    bool missing_silent;        /* the first missing rank is silent (hang_rank_silent) */
    char verdict[768];          /* one line */
} HangReport;

/* The first n ranks of j as snapshots into out[n], at now_ns (monotonic):
 * identity, exit, phase, last step, the collective in flight (and its
 * bucket) by the model's one rule (job_rank_beat_in_coll; none once exited), silence, the
 * Python line of its newest beat and whether it has finished.
 * proc_state and wchan are left unknown (0, "") for the caller to fill. */
void hang_snapshot(const Job *j, int64_t now_ns, HangRank *out, int n);

/* Analyse n ranks at now_ns (wall clock). Returns 1 when a hang is reported
 * (out->hung), 0 when none. The stuck collective is the one ranks still
 * training wait in (most ranks, then the oldest wait): a rank that left the
 * loop and waits in its final barrier is the cause, not the one waited for.
 * None either while a missing rank's telemetry is still being caught up on
 * (out->catching_up): what it did since the wait began is not known yet. */
int hang_analyze(const HangRank *r, int n, int64_t now_ns, int64_t hang_after_ns, HangReport *out);

/* One hang, one report: tell the job model the hang the live watch sees
 * (j->hang) and keep its finding (JobHang.found: a desync, ranks alone in a
 * collective, a rank stopped) when it is stronger than the one before, for
 * the job's diagnosis (job_diagnose). The event says the diagnosis. A new one (another collective than the current) is added as
 * an event; the same one rewrites that event in place as its wait grows or
 * its verdict changes. Returns true for a new hang (the one time to print
 * it as {"k":"hang"}). */
bool hang_note(Job *j, const HangReport *rep, int64_t now_ns, int64_t wall_ns);
/* A hang was reported and the rank waited for has not stepped since. */
bool hang_is_current(const Job *j);
/* Is rank one the current hang's ranks waited for? */
bool hang_is_missing(const Job *j, int rank);
/* The final words for a hang whose finding is a rank that stopped or left
 * the loop alone (job_verdict): "rank 1 stalled at step 10 at
 * train.py:12 in main (ranks 0,2,3 waited for it in all-reduce #12)" into
 * buf (out). False (buf untouched) when no rank was missing. */
bool hang_verdict(const Job *j, char *buf, size_t len);

/* An adapter's rank whose process lives (its /proc state known: not gone,
 * stopped or a zombie) and that sent nothing for JOB_SILENT_NS: its
 * heartbeat thread cannot run, so its beat's collective and line are old
 * news (the analysis reads it as in no collective). */
bool hang_rank_silent(const HangRank *r);

/* "0-2,5,7" into buf. */
void hang_format_ranks(const int *ranks, int n, char *buf, size_t len);

/* A word for a /proc state letter: "running", "sleeping", "stopped
 * (SIGSTOP)", ...; "gone" for 0. */
const char *hang_state_name(char state);

#endif
