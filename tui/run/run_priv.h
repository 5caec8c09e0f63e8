/* run_priv.h — the state of `ddptop run`'s loop, shared by run.c (the
 * loop, commands, exits, the agents and viewers glue) and run_setup.c
 * (sockets, keys, the job model and everything sized by the world, and
 * their teardown). Not for other files: run.h is the interface.
 */
#ifndef DDPTOP_RUN_PRIV_H
#define DDPTOP_RUN_PRIV_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "run/bench.h"
#include "base/clock.h"
#include "wire/codec.h"
#include "run/hangwatch.h"
#include "model/job.h"
#include "net/curve.h"
#include "launch/launcher.h"
#include "cluster/nodes.h"
#include "net/publish.h"
#include "record/record.h"
#include "run/run.h"
#include "run/store.h"
#include "view/view.h"
#include "attach/server.h"

typedef struct {
    const RunOptions *o;
    void *zctx, *ctl, *tel;
    Store *store;
    Launcher *l;
    Job *job;
    ViewTui *tui;
    ViewHeadless hl;
    CodecBuf buf;
    Bench *bench;             /* NULL unless DDPTOP_BENCH_OUT is set */
    Recorder *rec;            /* --record */
    HangWatch hw;             /* hang verdicts (--hang-after) */
    Publisher *pub;           /* --publish */
    Viewers *viewers;         /* ddptop attach */
    Nodes *nodes;             /* --nnodes > 1: the agents of nodes 1..M-1 */
    ZapHandler *zap;          /* tcp: admits only the job's client key */
    JobKeys keys;
    bool tcp;                 /* ctl/tel on tcp:// with CURVE */
    char keys_file[600];
    bool keys_made;           /* this run wrote keys_file: remove it at the end */
    bool launched;            /* multi-node: every node joined, ranks started */
    int64_t rdzv_start_ms;
    bool external;            /* listen: ranks are not ours to start or signal */
    int64_t *heard_ms;        /* [world] listen: last message from each rank */
    bool *ext_ended;          /* [world] listen: bye or silence ended it */
    char dir[256];
    char ctl_ep[300], tel_ep[300];
    bool *routable;           /* [world] hello seen: its ctl routing id is known */
    int64_t *sent_ckpt;       /* [world] highest ckpt id sent */
    bool *sent_stop;          /* [world] */
    int64_t *sent_pause, *sent_resume;  /* [world] highest ids sent */
    int64_t *exit_at;         /* [world] ms an exit 0 without bye was reaped (0: none) */
    int *exit_pid, *exit_status;        /* [world] that exit, waiting for its bye */
    int64_t pause_id, resume_id;        /* pause n is always followed by resume n */
    bool pause_wanted;
    int64_t ckpt_id;
    bool stop_requested;
    int64_t stop_at_ms;
    int rung;                 /* 0 clean stop only, 1 SIGTERM sent, 2 SIGKILL sent */
    bool aborted;             /* a: the job was aborted on demand (exit non-zero) */
    int64_t ping_id, last_ping_ms;
    int64_t fault_id;
    bool restart_pending;     /* a rank failed: restart once every rank is reaped */
    LaunchConfig lc;
    char job_id[96];
    char **restart_args;      /* trainer options + --resume CKPT_DIR/latest */
    char resume_path[600];
    bool quit_after;
    int handled_signals;
    char status[256];
} Run;

/* run_setup.c */
/* The job's keys: --keys FILE when it exists, else fresh ones written there
 * (or to ./ddptop-PID.keys, removed at the end). */
int run_job_keys(Run *r, char *err, size_t errlen);
/* zmq context, ctl ROUTER and tel PULL bound where the mode says (a private
 * ipc directory; tcp with CURVE for several nodes or listen). */
int run_setup_sockets(Run *r, char *err, size_t errlen);
/* The job model, store, viewers, agents' state, recorder, publisher and
 * every per-rank array, for a world of w ranks. */
int run_setup_job(Run *r, int w, char *err, size_t errlen);
void run_teardown(Run *r);
/* listen: wait for the first hello (it carries the world size), serving
 * store requests meanwhile. Returns the world size, 0 when *signals
 * became non-zero, -1 on a socket error. */
int run_listen_first_hello(Run *r, Msg *first, char *ident, size_t *ident_len, CodecBuf *frame,
                           volatile sig_atomic_t *signals);

#endif
