/* step.c — one optimizer step (step.h) over the compute face. Main thread;
 * the CPU's bucket all-reduces run on the communication thread (reducer.c).
 */
#include "train/step.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>
#include <time.h>

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
    /* the slow fault (trainer.c): slower compute, timed as forward time */
    double slow_ms = 0;
    if (t->fault_slow_ms > 0) {
        struct timespec ts = { (time_t)(t->fault_slow_ms / 1000), (long)(t->fault_slow_ms % 1000) * 1000000L };
        while (nanosleep(&ts, &ts) && errno == EINTR) {}
        slow_ms = mono_ms_f() - t0;
    }

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
    s.fwd_ms += slow_ms;
    double lr = schedule_lr(&t->sched, t->step);
    double comm_ms = 0;
    if (c->finish_step(t, lr, flags, &s, &loss_sum, &comm_ms)) return -1;
    t->last_lr = lr;

    /* Where the loss comes after the flags (CUDA), trainer.c's put_flags
     * raises it in the next step's. */
    double loss = loss_sum / micro;
    step_flag_loss(t, NULL, loss);
    report_step(t, &s, u, loss, lr, comm_ms, t0, data_ms);
    if (!isfinite(loss) && a->allow_nan && !t->bad_said) {
        t->bad_said = true;
        report_log(t, "warn", "loss became %s at step %" PRId64 " on rank %d: training on (--allow-nan)",
                   isnan(loss) ? "nan" : "inf", t->step, t->id->rank);
    }
    *used = u;
    if (a->telemetry)
        for (int i = 0; i < t->n_submitted; i++) {
            RedOp scratch;
            report_coll(t, c->bucket_coll(t, i, &scratch), t->step);
        }
    return 0;
}

void step_flag_loss(Trainer *t, float *fl, double loss)
{
    if (isfinite(loss) || t->a->allow_nan) return;
    if (!t->bad_loss) {
        t->bad_loss = isnan(loss) ? FL_NAN : FL_INF;
        t->bad_step = t->step + 1; /* the step in progress */
    }
    if (fl) {
        fl[t->bad_loss] = 1.0f;
        fl[FL_BAD_RANK] = (float)t->id->rank;
    }
}
