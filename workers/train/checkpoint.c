/* checkpoint.c — checkpoints of a run and resuming from one (checkpoint.h).
 * Main thread.
 */
#include "train/checkpoint.h"

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "ckpt/ckpt.h"
#include "train/report.h"
#include "train/state.h"

/* Non-finite weights never become a checkpoint (and `latest`) unless
 * --allow-nan says so. */
static bool params_finite(const Mlp *m)
{
    for (size_t i = 0; i < m->n_params; i++)
        if (!isfinite(m->params[i])) return false;
    return true;
}

void checkpoint_write(Trainer *t, const char *why, Phase after, const char *after_detail)
{
    if (t->id->rank != 0 || t->last_ckpt_step == t->step) return;
    report_phase(t, PHASE_CHECKPOINT, why);
    const TrainerArgs *a = t->a;
    CkptMeta meta;
    memset(&meta, 0, sizeof meta);
    meta.step = t->step;
    meta.epoch = t->epoch;
    meta.sampler_pos = t->pos_in_epoch;
    meta.samples = t->samples;
    meta.seed = t->seed;
    meta.world = t->id->world;
    snprintf(meta.model_spec, sizeof meta.model_spec, "%s", a->model);
    snprintf(meta.dataset, sizeof meta.dataset, "%s", t->ds.name);
    meta.dataset_size = t->ds.n;
    meta.batch_size = a->batch_size;
    meta.grad_accum = a->grad_accum;
    meta.shuffle = a->shuffle;
    meta.drop_last = a->drop_last;
    meta.sched = t->sched;
    meta.last_lr = t->last_lr;
    meta.precision = a->precision;
    char path[512], err[512];
    int64_t bytes = 0;
    double t0 = mono_ms_f();
    /* The host copies are brought up to date first (the GPU's). */
    int rc = t->ops->sync_host(t, err, sizeof err);
    if (rc == 0 && !a->allow_nan && !params_finite(&t->m)) {
        snprintf(err, sizeof err, "the weights are not finite (NaN or inf): not written, latest unchanged");
        rc = -1;
    }
    if (rc == 0)
        rc =
            ckpt_write(a->ckpt_dir, &meta, &t->m, &t->o, (int)a->keep_last, path, sizeof path, &bytes, err, sizeof err);
    if (rc == 0)
        t->last_ckpt_step = t->step;
    else
        fprintf(stderr, "ddptop-worker rank 0: checkpoint failed: %s\n", err);
    report_ckpt(t, rc, mono_ms_f() - t0, bytes, path, err);
    report_phase(t, after, after_detail);
}

int checkpoint_resume(Trainer *t, int *status)
{
    const TrainerArgs *a = t->a;
    char dir[4096], note[512];
    CkptMeta meta;
    *status = 2;
    if (ckpt_resolve(a->resume, dir, sizeof dir, t->err, sizeof t->err)) return -1;
    if (ckpt_load(dir, &t->m, &t->o, &meta, t->id->world, note, sizeof note, t->err, sizeof t->err)) return -1;
    t->resumed = true;
    t->step = meta.step;
    t->epoch = meta.epoch;
    t->pos_in_epoch = meta.sampler_pos;
    t->samples = meta.samples;
    t->last_lr = meta.last_lr;
    t->last_ckpt_step = meta.step;
    t->resume_dataset_size = meta.dataset_size;
    if (meta.seed != a->seed) {
        t->seed = meta.seed;
        if (t->id->rank == 0)
            report_log(t, "warn",
                       "resume: using the checkpoint's seed %" PRIu64 " for the data (--seed %" PRIu64 " ignored)",
                       meta.seed, a->seed);
    }
    if (t->id->rank == 0) {
        if (note[0]) report_log(t, "warn", "resume: %s", note);
        if (meta.batch_size != a->batch_size || meta.grad_accum != a->grad_accum)
            report_log(t, "warn",
                       "resume: saved with --batch-size %" PRId64 " --grad-accum %" PRId64 ", this run uses %" PRId64
                       " and %" PRId64 ": it goes on from the same sample, not bit for bit",
                       meta.batch_size, meta.grad_accum, a->batch_size, a->grad_accum);
        if (meta.sched.base_lr != a->optim.lr || meta.sched.kind != a->lr_schedule ||
            meta.sched.warmup_steps != a->warmup_steps)
            report_log(t, "warn", "resume: the learning-rate settings differ from the checkpoint's (this run's apply)");
        /* The weights are FP32 whatever they were trained in: any precision
         * goes on from them; say so, as the losses will not continue the
         * saved run's exactly. */
        if (meta.precision != a->precision)
            report_log(t, "info", "resuming %s %s checkpoint (step %" PRId64 ") in %s",
                       meta.precision == PREC_FP32 ? "an" : "a", precision_name(meta.precision), meta.step,
                       precision_name(a->precision));
        report_log(t, "info",
                   "resuming from %s at step %" PRId64 " (epoch %" PRId64 ", sample %" PRId64 " of the epoch)", dir,
                   meta.step, meta.epoch, meta.sampler_pos);
    }
    *status = 0;
    return 0;
}
