/* compute.h — where a rank's model computes: the CPU (model.c, optim.c)
 * or a CUDA GPU (cuda_mlp.h), behind one small table.
 *
 * Owns: the device side of a step (batches, forward/backward with the
 * gradient hooks that start each bucket's all-reduce, the wait for them,
 * the optimizer), the pad before grads[0] that carries small values in a
 * collective, evaluation, and the host copies checkpoints are written
 * from. Does not own the loop, the commands or the messages (trainer.c,
 * step.c, report.c). compute_cpu.c and compute_cuda.c implement it side by
 * side; trainer.c picks one from --device at start, and nobody else asks
 * which. World size 1 runs the same calls. Main thread.
 */
#ifndef DDPTOP_TRAIN_COMPUTE_H
#define DDPTOP_TRAIN_COMPUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ddp/reducer.h"
#include "wire/protocol.h"

typedef struct Trainer Trainer;

/* Every entry takes the run (state.h). Those returning int give 0, or -1
 * with the reason in t->err unless they take their own err buffer. */
typedef struct {
    /* "cuda" for CommConfig.device; NULL on the CPU (host buffers). */
    const char *comm_device;
    /* Buckets bypass the reducer (started from backward's hooks on the
     * Comm): report.c numbers every coll message itself. */
    bool own_coll_seq;
    /* The step's loss is known on the host before its last bucket's
     * all-reduce starts, so a non-finite loss rides in that step's flags
     * (CPU); otherwise in the next step's (CUDA: read after the step). */
    bool loss_in_step_flags;
    /* The device ready with the host model's weights (and the optimizer
     * state when resuming), before the hello names it. */
    int (*setup)(Trainer *t);
    /* Frees what setup made; safe after a failed or no setup. */
    void (*free)(Trainer *t);
    /* "cpu", "cuda:N", for the hello. */
    void (*device_name)(const Trainer *t, char *buf, size_t n);
    /* The compute stream for CommConfig.stream (NULL on the CPU). */
    void *(*stream)(Trainer *t);
    /* The n_params floats the broadcast and the gradient buckets reduce,
     * in model.h's layout; grads - MODEL_GRAD_PAD is the pad. */
    float *(*params)(Trainer *t);
    float *(*grads)(Trainer *t);
    /* The n floats just before grads[0]: written before a collective that
     * carries them, read back after it. */
    int (*pad_write)(Trainer *t, const float *v, int n);
    int (*pad_read)(Trainer *t, float *v, int n);

    /* One step (step.c): rows idx[0..n) of the training set as the next
     * micro-batch; forward and backward of micro-batch k of `micro`
     * (accumulated locally before the last, whose hooks start the bucket
     * all-reduces), adding its times to *s and its loss to *loss_sum as
     * soon as it is known. */
    int (*load_batch)(Trainer *t, const int64_t *idx, int n);
    int (*forward_backward)(Trainer *t, int k, int micro, int n, MsgStep *s, double *loss_sum);
    /* The rest of the step: wait for every bucket, apply the optimizer at
     * lr, bring back the reduced flags (FL_COUNT floats from the pad) and
     * the last loss if still on the device; fills s's exposed_ms, opt_ms
     * and timings, *comm_ms the buckets' summed all-reduce time. */
    int (*finish_step)(Trainer *t, double lr, float *flags, MsgStep *s, double *loss_sum, double *comm_ms);
    /* The record of the step's i-th bucket all-reduce for its coll message
     * (in scratch or the reducer's), or NULL when it is not known. */
    const RedOp *(*bucket_coll)(Trainer *t, int i, RedOp *scratch);
    /* GPU memory for a step message (0 and 0 on the CPU), at most once a
     * second; now_ms is the step's end. */
    void (*step_mem)(Trainer *t, double now_ms, int64_t *used, int64_t *total);

    /* This rank's rows of the evaluation set (rank, rank + W, ...):
     * argmax hits, rows, summed loss. -1 with err ("" when there is
     * nothing to say) when it cannot. */
    int (*evaluate)(Trainer *t, int64_t *correct, int64_t *total, double *loss, char *err, size_t errlen);
    /* The host Mlp and Optim up to date, for a checkpoint. */
    int (*sync_host)(Trainer *t, char *err, size_t errlen);
    /* The device and its memory in the log ("ready", "at the end"); nothing on the CPU. */
    void (*log_memory)(Trainer *t, const char *when);
} ComputeOps;

/* compute_cpu.c: model.c and optim.c, buckets through the reducer. */
extern const ComputeOps compute_cpu;
/* compute_cuda.c: cuda_mlp.h, buckets started on the Comm from backward. */
extern const ComputeOps compute_cuda;

#endif
