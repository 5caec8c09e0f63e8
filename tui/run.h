/* run.h — `ddptop run`: one job from launch to the last rank reaped.
 *
 * Owns: the frontend's sockets (ctl ROUTER, tel PULL), the store, the
 * launcher, the job model and the view, and the one loop that ties them:
 * zmq_poll over sockets and stdin -> drain messages -> reap -> keys ->
 * redraw. Main thread only.
 */
#ifndef DDPTOP_RUN_H
#define DDPTOP_RUN_H

#include <stdbool.h>

typedef struct {
    int nproc;
    bool headless, json;
    double timeout_s;           /* passed to workers as the collective timeout */
    double stop_grace_s;        /* after a stop: how long before SIGTERM, then SIGKILL */
    double hang_after_s;        /* a collective waited on this long is reported as a hang */
    const char *log_dir;        /* NULL: a private directory, removed at exit */
    int max_restarts;           /* --max-restarts K: start every rank again after a failure */
    char *const *trainer_args;
    int n_trainer_args;
    const char *worker_path;
    const char *device;         /* --device cpu|cuda|auto, to workers as DDPTOP_DEVICE */
    const char *backend;        /* --backend gloo|nccl|auto, to workers as DDPTOP_BACKEND */
    const char *record_path;    /* --record FILE, NULL for none */
    const char *publish_ep;     /* --publish ENDPOINT, NULL for none */
    const char *description;    /* the command line, kept in a recording's header */
    /* Beyond one machine (docs/CLUSTER.md). nnodes 1: a local job on ipc://. */
    int nnodes, node_rank;      /* --nnodes M --node-rank K */
    const char *rdzv;           /* --rdzv HOST:PORT: node 0's control endpoint (tel: PORT+1) */
    double rdzv_timeout_s;      /* --rdzv-timeout: every node joins within this */
    const char *keys_path;      /* --keys FILE: reuse a key file (node 0 writes one when absent) */
    const char *listen_ep;      /* `ddptop listen ENDPOINT`: no launch; workers connect */
} RunOptions;

/* A node K > 0 of a multi-node job: start this node's ranks when node 0
 * says so, report their exits, relay node 0's signals (tui/agent.c). */
int agent_run(const RunOptions *o);

/* Run the job; returns ddptop's exit status (0 only when every rank ended
 * cleanly; 1 when the job failed; 2 for bad input found before launch). */
int run_job(const RunOptions *o);

#endif
