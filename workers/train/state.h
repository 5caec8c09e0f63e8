/* state.h — one run's state, shared by the files of train/.
 *
 * The loop and command agreement (trainer.c), the step (step.c), its
 * compute face (compute_cpu.c, compute_cuda.c), telemetry (report.c) and
 * checkpoint glue (checkpoint.c) all work on one Trainer; nothing outside
 * train/ includes this header (trainer.h is the public face). Main thread.
 */
#ifndef DDPTOP_TRAIN_STATE_H
#define DDPTOP_TRAIN_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "train/args.h"
#include "train/compute.h"
#include "comm/comm.h"
#include "cuda/cuda_mlp.h"
#include "data/dataset.h"
#include "ddp/bucket.h"
#include "ddp/reducer.h"
#include "link/identity.h"
#include "link/uplink.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "nn/schedule.h"
#include "wire/fault.h"

/* How often a heartbeat goes out, and how long one wait lasts between two. */
#define BEAT_MS             1000
/* While a collective waits, how often what the telemetry stream's socket
 * had no room for is handed to it again (report_wait_cb): a rank blocked
 * after ddptop fell behind otherwise delivered its backlog one socket-full
 * (about 200 KB) a beat, and ddptop judged the job on seconds-old news. */
#define PUMP_MS             50
/* After ddptop's loss, how long the ranks have to agree on a stop, write
 * the final checkpoint and leave before a rank stops waiting (report.c). */
#define FRONT_GONE_GRACE_MS 30000

/* Command flags in the floats just before grads[0] (MODEL_GRAD_PAD): each
 * rank adds its own view; the sums decide. The same layout travels alone in
 * the flags-only all-reduce of a paused round. FL_NAN and FL_INF count the
 * ranks whose loss became NaN or infinite, FL_BAD_RANK sums their ranks
 * (exact in float below 2^24), so every rank can name the one. */
enum { FL_CKPT_ID = 0, FL_CKPT_PENDING, FL_STOP, FL_PAUSE, FL_NAN, FL_INF, FL_BAD_RANK, FL_COUNT };
/* --grad-dtype bf16: bf16 cannot carry the flags (counts, step ids, rank
 * sums), so they leave the last bucket and travel in an FP32 all-reduce of
 * their own, queued right after it with this tag (docs/TRAINING.md
 * "Gradient dtype"). Bucket b uses tag b; trainer.c's one-off collectives
 * use 0x70000001 and up. */
#define TAG_STEP_FLAGS 0x70000010u

struct Trainer {
    const TrainerArgs *a;
    const WorkerIdentity *id;
    Uplink *up;
    const ComputeOps *ops; /* CPU or CUDA, chosen at start (compute.h) */
    Dataset ds, eval_ds;
    bool eval_loaded, eval_off;
    Mlp m;
    Optim o;
    Schedule sched;
    uint64_t seed; /* the run's seed (a checkpoint's when resuming) */
    Comm *comm;
    Reducer *red;
    Bucket buckets[BUCKET_MAX];
    int nb;
    int tensor_bucket[2 * MODEL_MAX_LINEAR];
    /* the step in progress: buckets handed to the reducer (CPU: op ids) or
     * started on the Comm (CUDA: bucket indices, with their tickets) */
    int64_t bucket_op[BUCKET_MAX];
    int n_submitted;
    int64_t flags_op;   /* --grad-dtype bf16: the step's flags all-reduce (CPU: op id), 0: none */
    uint16_t *wire;     /* --grad-dtype bf16 on the CPU: the buckets' bf16 copies [n_params] */
    float bucket_scale; /* 1 / (micro-batches * world) */
    bool add_acc;       /* hook adds the accumulated micro-batch grads */
    float *acc;         /* [n_params], --grad-accum > 1 */
    bool hook_failed;
    float flags_pause[FL_COUNT];
    float *xb;
    int32_t *yb;
    int64_t *idx;
    int64_t ns; /* samples per rank per epoch */
    int64_t step, epoch, samples, pos_in_epoch;
    bool resumed;
    int64_t resume_dataset_size;
    double last_lr;
    /* command agreement */
    int64_t ckpt_seen, ckpt_acted; /* ckpt_acted is agreed by all ranks */
    bool stop_seen;
    int64_t pause_seen, resume_seen; /* paused is wanted while pause_seen > resume_seen */
    int64_t last_ckpt_step;
    char stop_reason[96];
    /* a loss that was not finite: raised in the flags of the step it
     * happened in (CPU) or of the next (where the loss is known only after
     * the step: compute_cuda); bad_step is the step it happened at */
    int bad_loss;            /* 0, FL_NAN or FL_INF */
    double loss_before_last; /* the step's earlier micro-batches' losses, summed */
    int micro;               /* micro-batches in the step in progress */
    int64_t bad_step;
    bool bad_said;
    /* ddptop is gone (uplink.h): stop and checkpoint as a clean stop would;
     * ddptop is stopped: train on */
    bool front_gone, front_stopped;
    double front_gone_ms;
    uint64_t drops_at_stop;
    bool back_unsaid; /* the catch-up line after a stop is still to be sent */
    int back_tries;
    double back_tried_ms;
    Phase phase;
    double last_beat_ms;
    /* throughput and the breakdown of a step, after the first */
    double first_step_end_ms;
    int64_t first_step_unix_ns, first_step;
    double sum_data_ms, sum_compute_ms, sum_exposed_ms, sum_comm_ms, sum_opt_ms, sum_step_ms;
    /* Between two steps (after the first): new shards (sampler + shard
     * message) and evaluations; pend_* until the next step ends. */
    double sum_epoch_ms, sum_eval_ms, pend_epoch_ms, pend_eval_ms;
    int64_t mem_used, mem_total; /* GPU: last gpu_mem_info, for step messages */
    double mem_at_ms;
    int64_t tel_ns_at_first;
    double last_step_end_ms;
    /* --device cuda: the model on the GPU; NULL on the CPU */
    CudaMlp *g;
    int gpu;                     /* the device index */
    bool data_on_gpu;            /* dataset uploaded: batches gathered there */
    int64_t tickets[BUCKET_MAX]; /* the step's bucket all-reduces (comm_timing) */
    CommTiming ct[BUCKET_MAX];   /* and when they ran, for the coll messages */
    int64_t coll_seq;            /* seq of coll messages when buckets bypass the reducer */
    int64_t pad_ticket;          /* --grad-dtype bf16: the flags' own FP32 all-reduce this step */
    bool pad_submitted;
    /* teaching faults: --fault, then live ones from ddptop */
    FaultPlan faults;
    bool fault_said[FAULT_MAX];
    int64_t fault_slow_ms; /* the slow fault's sleep in the next step (step.c), 0: none */
    bool pace_started;     /* --pace: the first step has started (it does not wait) */
    char err[512];
};

#endif
