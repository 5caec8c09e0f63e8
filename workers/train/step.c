/* step.c — one optimizer step (step.h) over the compute face. Main thread;
 * the CPU's bucket all-reduces run on the communication thread (reducer.c).
 */
#include "train/step.h"

#include <string.h>

#include "base/clock.h"
#include "train/report.h"
#include "train/state.h"

int step_run(Trainer *t, int64_t off, float *flags, int64_t *used)
{
    const TrainerArgs *a = t->a;
    const ComputeOps *c = t->ops;
    const int64_t bs = a->batch_size;
    int64_t left_batches = (t->ns - off + bs - 1) / bs;
    int micro = (int)(left_batches < a->grad_accum ? left_batches : a->grad_accum);
    MsgStep s;
    memset(&s, 0, sizeof s);
    double t0 = mono_ms_f(), data_ms = 0;

    /* Flags ride just before grads[0], i.e. at the front of the last bucket. */
    if (c->pad_write(t, flags, FL_COUNT)) return -1;
    t->bucket_scale = (float)(1.0 / ((double)micro * (double)t->id->world));
    t->n_submitted = 0;
    t->hook_failed = false;
    double loss_sum = 0;
    int64_t u = 0;
    for (int k = 0; k < micro; k++) {
        double d0 = mono_ms_f();
        int bk = (int)(t->ns - (off + u) < bs ? t->ns - (off + u) : bs);
        if (c->load_batch(t, t->idx + off + u, bk)) return -1;
        data_ms += mono_ms_f() - d0;
        if (c->forward_backward(t, k, micro, bk, &s, &loss_sum)) return -1;
        u += bk;
    }
    double lr = schedule_lr(&t->sched, t->step);
    double comm_ms = 0;
    if (c->finish_step(t, lr, flags, &s, &loss_sum, &comm_ms)) return -1;
    t->last_lr = lr;

    report_step(t, &s, u, loss_sum / micro, lr, comm_ms, t0, data_ms);
    *used = u;
    if (a->telemetry)
        for (int i = 0; i < t->n_submitted; i++) {
            RedOp scratch;
            report_coll(t, c->bucket_coll(t, i, &scratch), t->step);
        }
    return 0;
}
