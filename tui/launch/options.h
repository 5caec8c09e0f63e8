/* options.h — what the user asked of a job: `ddptop run`'s options, filled
 * by tui/cmd/ and read by the run loop (tui/run/) and the node agents
 * (tui/cluster/). Plain data.
 */
#ifndef DDPTOP_OPTIONS_H
#define DDPTOP_OPTIONS_H

#include <stdbool.h>

/* What every rank runs (torchrun's forms). */
typedef enum {
    RUN_TRAINER, /* ddptop-worker, the built-in trainer: `ddptop run [-- TRAINER OPTIONS]` */
    RUN_SCRIPT,  /* `ddptop run SCRIPT.py ARGS`: PYTHON -m ddptop SCRIPT.py ARGS */
    RUN_MODULE,  /* `ddptop run -m MODULE ARGS`: PYTHON -m ddptop -m MODULE ARGS */
    RUN_COMMAND, /* `ddptop run --no-python CMD ARGS`: CMD ARGS, as it is */
} RunTarget;

typedef struct {
    int nproc;
    bool headless, json;
    double timeout_s;    /* passed to workers as the collective timeout */
    double stop_grace_s; /* after a stop: how long before SIGTERM, then SIGKILL */
    double hang_after_s; /* a collective waited on this long is reported as a hang */
    const char *log_dir; /* NULL: a private directory, removed at exit */
    int max_restarts;    /* --max-restarts K: start every rank again after a failure */
    /* Each rank's argv after argv[0]: the trainer options (RUN_TRAINER,
     * --resume added on a restart), else what runs the script (for
     * RUN_SCRIPT "-m ddptop --timeout S SCRIPT.py ARGS"). */
    char *const *trainer_args;
    int n_trainer_args;
    const char *worker_path; /* argv[0]: ddptop-worker, the interpreter or CMD (absolute) */
    RunTarget target;
    /* RUN_TRAINER whose worker is ddptop-worker: a restart adds --resume
     * CKPT_DIR/latest. A DDPTOP_WORKER program of another name (the torch
     * adapter, a feeder) takes its arguments as given, as a script does. */
    bool trainer_resumes;
    const char *program;     /* SCRIPT.py, MODULE or CMD; NULL for RUN_TRAINER */
    const char *python;      /* --python PATH as given (default "python3", found on PATH) */
    bool no_inject;          /* --no-inject: PYTHON SCRIPT ARGS bare, no adapter */
    int master_port;         /* --master-port P (one node): the ranks' MASTER_PORT; 0: a free one */
    const char *adapter_dir; /* the torch adapter's directory, first on the ranks' PYTHONPATH */
    const char *device;      /* --device cpu|cuda|auto, to workers as DDPTOP_DEVICE */
    const char *backend;     /* --backend gloo|nccl|auto, to workers as DDPTOP_BACKEND */
    const char *record_path; /* --record FILE, NULL for none */
    const char *publish_ep;  /* --publish ENDPOINT, NULL for none */
    const char *description; /* the command line, kept in a recording's header */
    /* Beyond one machine (docs/CLUSTER.md). nnodes 1: a local job on ipc://. */
    int nnodes, node_rank; /* --nnodes M --node-rank K */
    const char *rdzv;      /* --rdzv HOST:PORT: node 0's control endpoint (tel: PORT+1) */
    double rdzv_timeout_s; /* --rdzv-timeout: every node joins within this */
    const char *keys_path; /* --keys FILE: reuse a key file (node 0 writes one when absent) */
    const char *listen_ep; /* `ddptop listen ENDPOINT`: no launch; workers connect */
} RunOptions;

#endif
