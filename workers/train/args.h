/* args.h — the trainer's command line (everything after `ddptop run --`).
 *
 * Owns: option defaults, parsing and validation. Pure; main thread.
 */
#ifndef DDPTOP_ARGS_H
#define DDPTOP_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/fault.h"
#include "comm/comm.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "nn/schedule.h"

/* The job's length when neither --epochs nor --steps is given: long
 * enough to watch and steer (`ddptop` alone runs this). */
#define TRAINER_DEFAULT_EPOCHS 30

typedef struct {
    char dataset[32]; /* "auto", "fashion-mnist", "synthetic" */
    char data_dir[256];
    int64_t limit; /* first N samples, 0 = all */
    int64_t synthetic_size;
    char model[128];
    int dims[MODEL_MAX_LINEAR + 1];
    int n_linear;
    int64_t batch_size; /* per rank */
    int64_t epochs;     /* the bound when epochs_set or no --steps */
    bool epochs_set;    /* --epochs given: with --steps, whichever comes first */
    int64_t steps;      /* 0: until the epochs end; else across as many epochs as it takes */
    OptimConfig optim;
    SchedKind lr_schedule;
    int64_t warmup_steps;
    int64_t grad_accum; /* micro-batches per optimizer step */
    uint64_t seed;
    bool shuffle, drop_last;
    double bucket_cap_mb;
    Precision precision;  /* --precision: the GEMMs' arithmetic (model.h) */
    CommDtype grad_dtype; /* --grad-dtype: what gradient buckets travel in */
    bool gpu_fuse;        /* --gpu-fuse on|off: cuBLASLt epilogues on CUDA (default off until verified on a GPU) */
    bool cuda_graph;      /* --cuda-graph: the CUDA step captured once and replayed */
    char ckpt_dir[256];
    int64_t ckpt_every; /* 0: only when asked and at the end */
    bool final_ckpt;    /* write a checkpoint when the run stops */
    int64_t keep_last;  /* 0: keep every checkpoint */
    char init_from[256];
    char resume[256];   /* "": start from scratch */
    int64_t eval_every; /* epochs; 0: never */
    int64_t eval_limit; /* first N test samples, 0 = all */
    bool telemetry;     /* false: no step/coll/shard/beat messages */
    bool allow_nan;     /* --allow-nan: a non-finite loss does not stop the run */
    double timeout_s;   /* collectives and rendezvous */
    double pace;        /* --pace: at most this many steps a second; 0: as fast as it goes */
    FaultPlan faults;   /* --fault: teaching faults (fault.h) */
} TrainerArgs;

void trainer_args_defaults(TrainerArgs *a);
/* Parse argv[0..argc) (no program name). Returns 0, 1 when --help was asked
 * (usage printed to stdout), or -1 with a one-line reason in err. */
int trainer_args_parse(TrainerArgs *a, int argc, char **argv, char *err, size_t errlen);
/* The options that depend on where the job runs, once the device ("cpu",
 * "cuda") and backend ("gloo", "nccl") are resolved: --cuda-graph needs
 * cuda, nccl and --grad-accum 1. Returns 0, or -1 with a one-line reason
 * in err (a usage error: exit 2). */
int trainer_args_check_device(const TrainerArgs *a, const char *device, const char *backend, char *err, size_t errlen);
/* The trainer options' help text. */
const char *trainer_args_usage(void);

#endif
