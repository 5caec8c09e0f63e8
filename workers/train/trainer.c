/* trainer.c — one rank of a data-parallel job, the way DDP trains: the
 * run from init to destroyed, the loop over epochs and steps, and command
 * agreement.
 *
 * Each step (step.c) carries this rank's command flags in its last bucket's
 * all-reduce. Commands (checkpoint, stop, pause/resume) are acted on only
 * at the step where the all-reduced flags say so, which is the same step
 * on every rank — a rank never stops or pauses alone, so nobody is left
 * waiting in a collective. See docs/TRAINING.md "Commands" and
 * docs/DECISIONS.md "Command agreement". The device is
 * compute.h's (--device picks compute_cpu or compute_cuda at start),
 * messages report.c's, checkpoints checkpoint.c's.
 *
 * Teaching faults (fault.h, docs/TRAINING.md "Teaching faults") break this
 * on purpose, at a few hook points: before a step (kill, stall, slow), at
 * an epoch's start (skip-set-epoch), after a step (unsafe-stop: a rank
 * stops without the flags) and at shutdown (no-barrier). Each says its
 * sentence once, as a warn log, when it fires. Without faults the hooks
 * cost one test of a counter.
 *
 * Threads: everything here runs on the main thread, except the collectives
 * (reducer.c).
 */
#include "train/trainer.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "ckpt/ckpt.h"
#include "train/checkpoint.h"
#include "train/report.h"
#include "train/state.h"
#include "train/step.h"
#include "wire/sampler.h"

/* How often a rank polls commands and agrees with the others while paused. */
#define PAUSE_ROUND_MS          20
/* How long a rank whose rendezvous failed on a dead peer waits for
 * ddptop's stop (ddptop reaps the dead rank and sends it within ms). */
#define PEER_DEATH_STOP_WAIT_MS 1000
/* All-reduce tags of the collectives that are not gradient buckets (bucket
 * b uses tag b; BUCKET_MAX is far below these). */
#define TAG_PAUSE_FLAGS         0x70000001u
#define TAG_EVAL                0x70000002u

/* What the reduced flags of a step (or a paused round) ask for. */
typedef struct {
    bool ckpt, stop, pause;
    bool bad_loss; /* some rank's loss became NaN or inf: t->err has the verdict */
} Agreed;

static int load_data(Trainer *t)
{
    const TrainerArgs *a = t->a;
    int in = a->dims[0], classes = a->dims[a->n_linear];
    bool fm = !strcmp(a->dataset, "fashion-mnist");
    if (!strcmp(a->dataset, "auto")) fm = dataset_fashion_mnist_present(a->data_dir) && in == 784 && classes == 10;
    if (fm) {
        if (in != 784 || classes != 10) {
            snprintf(t->err, sizeof t->err, "--model %s does not fit fashion-mnist (784 inputs, 10 classes)", a->model);
            return -1;
        }
        return dataset_load_fashion_mnist(&t->ds, a->data_dir, true, a->limit, t->err, sizeof t->err);
    }
    int64_t n = a->limit ? a->limit : a->synthetic_size;
    return dataset_make_synthetic(&t->ds, n, in, classes, t->seed, t->err, sizeof t->err);
}

/* The evaluation set, loaded at the first evaluation so that it costs
 * nothing before the first step: Fashion-MNIST's t10k files, or for the
 * synthetic set another draw from the same class prototypes (same seed:
 * the prototypes are drawn first; labels and noise come out differently
 * because the set is smaller). */
static int load_eval(Trainer *t, char *err, size_t errlen)
{
    const TrainerArgs *a = t->a;
    if (!strcmp(t->ds.name, "fashion-mnist"))
        return dataset_load_fashion_mnist(&t->eval_ds, a->data_dir, false, a->eval_limit, err, errlen);
    int64_t n = a->eval_limit ? a->eval_limit : (t->ds.n + 7) / 8;
    if (n == t->ds.n && n > 1) n--; /* never the training set itself */
    return dataset_make_synthetic(&t->eval_ds, n, t->ds.dim, t->ds.classes, t->seed, err, errlen);
}

static int64_t batches_per_epoch(const Trainer *t) { return (t->ns + t->a->batch_size - 1) / t->a->batch_size; }

static int64_t steps_per_epoch(const Trainer *t)
{
    return (batches_per_epoch(t) + t->a->grad_accum - 1) / t->a->grad_accum;
}

/* --steps alone runs as many epochs as it takes (HF Trainer's max_steps);
 * with --epochs too, whichever bound comes first. */
static bool epochs_bound(const TrainerArgs *a) { return !a->steps || a->epochs_set; }

/* Optimizer steps the run will take in all (the cosine schedule's T). */
static int64_t planned_steps(const Trainer *t)
{
    if (!epochs_bound(t->a)) return t->a->steps;
    int64_t spe = steps_per_epoch(t), s = spe * t->a->epochs;
    if (t->a->epochs > INT64_MAX / (spe > 0 ? spe : 1)) s = INT64_MAX;
    if (t->a->steps && t->a->steps < s) s = t->a->steps;
    return s;
}

/* A one-off collective through the reducer, reported as a coll message. */
static int collective(Trainer *t, RedOp *op)
{
    int rc = reducer_run(t->red, op, report_wait_cb, t, PUMP_MS, t->err, sizeof t->err);
    if (rc == 0) report_coll(t, op, t->step);
    return rc;
}

/* A fault fires: its sentence, once, on stderr and as a warn log. A fault
 * of every rank is said by rank 0 alone (the others would repeat it). The
 * sentence names the step it fires at (a live fault's step is 0: "at the
 * next step"). */
static void fault_fired(Trainer *t, const Fault *f)
{
    int i = (int)(f - t->faults.f);
    if (t->fault_said[i]) return;
    t->fault_said[i] = true;
    char s[PROTO_STR_LONG];
    Fault at = *f;
    if (at.kind == FAULT_KILL || at.kind == FAULT_STALL || at.kind == FAULT_UNSAFE_STOP) at.step = t->step;
    fault_explain(&at, s, sizeof s);
    fprintf(stderr, "ddptop-worker rank %d: %s\n", t->id->rank, s);
    if (f->rank >= 0 || t->id->rank == 0) report_log(t, "warn", "%s", s);
}

/* A live fault replaces one of the same kind for the same ranks (a new
 * slow:R:MS changes the delay), else joins the plan. */
static void add_fault(Trainer *t, const Fault *f)
{
    for (int i = 0; i < t->faults.n; i++)
        if (t->faults.f[i].kind == f->kind && t->faults.f[i].rank == f->rank) {
            t->faults.f[i] = *f;
            t->fault_said[i] = false;
            return;
        }
    if (t->faults.n == FAULT_MAX) {
        report_log(t, "warn", "fault %s ignored: at most %d faults", fault_name(f->kind), FAULT_MAX);
        return;
    }
    fault_add(&t->faults, f);
}

/* ddptop is gone: this rank saw it, or (when another rank raised the
 * stop first) sees it now. */
static bool front_gone(Trainer *t)
{
    if (!t->front_gone && uplink_front(t->up, NULL, 0) == UPLINK_FRONT_GONE) t->front_gone = true;
    return t->front_gone;
}

/* Drain commands from ddptop into this rank's local view. */
static void poll_commands(Trainer *t)
{
    report_check_ddptop(t);
    MsgCmd c;
    while (uplink_next_cmd(t->up, &c) == 1) {
        if (!strcmp(c.op, "ckpt")) {
            if (c.id > t->ckpt_seen) t->ckpt_seen = c.id;
        } else if (!strcmp(c.op, "stop")) {
            t->stop_seen = true;
        } else if (!strcmp(c.op, "pause")) {
            if (c.id > t->pause_seen) t->pause_seen = c.id;
        } else if (!strcmp(c.op, "resume")) {
            if (c.id > t->resume_seen) t->resume_seen = c.id;
        } else if (!strcmp(c.op, "fault")) {
            Fault f;
            if (fault_unpack(c.arg, &f) == 0 && (f.rank < 0 || f.rank == t->id->rank)) add_fault(t, &f);
        }
    }
}

/* This rank's view of the commands, as flags to be summed over ranks. */
static void put_flags(const Trainer *t, float *fl)
{
    bool pending = t->ckpt_seen > t->ckpt_acted;
    fl[FL_CKPT_ID] = pending ? (float)t->ckpt_seen : 0.0f;
    fl[FL_CKPT_PENDING] = pending ? 1.0f : 0.0f;
    fl[FL_STOP] = t->stop_seen ? 1.0f : 0.0f;
    fl[FL_PAUSE] = t->pause_seen > t->resume_seen ? 1.0f : 0.0f;
    fl[FL_NAN] = fl[FL_INF] = fl[FL_BAD_RANK] = 0.0f;
    /* A loss known only after its step (compute.h) is said in this one;
     * otherwise the step's own backward raises it (step_flag_loss). */
    if (t->bad_loss && !t->ops->loss_in_step_flags) {
        fl[t->bad_loss] = 1.0f;
        fl[FL_BAD_RANK] = (float)t->id->rank;
    }
}

/* The verdict of a non-finite loss from the reduced flags, into t->err:
 * "loss became nan at step S on rank R" (S: the step whose loss it was). */
static void bad_loss_verdict(Trainer *t, const float *fl, int64_t step)
{
    int nan = (int)(fl[FL_NAN] + 0.5f), inf = (int)(fl[FL_INF] + 0.5f);
    const char *what = nan > 0 ? "nan" : "inf";
    if (t->bad_loss) step = t->bad_step;
    if (nan + inf == 1)
        snprintf(t->err, sizeof t->err, "loss became %s at step %" PRId64 " on rank %d (--allow-nan to go on)", what,
                 step, (int)(fl[FL_BAD_RANK] + 0.5f));
    else
        snprintf(t->err, sizeof t->err, "loss became %s at step %" PRId64 " on %d ranks (--allow-nan to go on)", what,
                 step, nan + inf);
}

/* The reduced flags are identical on every rank: decide together. `step`
 * is the step a non-finite loss the flags carry belongs to. */
static Agreed agree(Trainer *t, const float *fl, int64_t step)
{
    Agreed g = { false, false, false, false };
    if (fl[FL_NAN] + fl[FL_INF] > 0.5f) {
        g.bad_loss = true;
        bad_loss_verdict(t, fl, step);
    }
    if (fl[FL_CKPT_PENDING] > 0.5f) {
        /* Ranks that saw the request proposed its id; agree on the ceiling of
         * their mean so every rank stores the same acted id (exact in float). */
        double id = ceil((double)fl[FL_CKPT_ID] / (double)fl[FL_CKPT_PENDING] - 1e-6);
        if (id > t->ckpt_acted) t->ckpt_acted = (int64_t)id;
        g.ckpt = true;
    }
    g.stop = fl[FL_STOP] > 0.5f;
    g.pause = fl[FL_PAUSE] > 0.5f;
    return g;
}

/* A one-off sum of n host floats (n <= FL_COUNT) over the ranks, through
 * the reducer; `report` sends it as a coll message. The values travel in
 * the pad before grads[0], since NCCL reduces device memory. */
static int small_allreduce(Trainer *t, float *v, int n, uint32_t tag, bool report)
{
    RedOp op;
    memset(&op, 0, sizeof op);
    op.kind = RED_ALLREDUCE;
    op.n = (size_t)n;
    op.tag = tag;
    op.scale = 1.0f;
    op.bucket = -1;
    if (t->ops->pad_write(t, v, n)) return -1;
    op.buf = t->ops->grads(t) - n;
    int rc = report ? collective(t, &op) : reducer_run(t->red, &op, report_wait_cb, t, PUMP_MS, t->err, sizeof t->err);
    if (rc) return -1;
    return t->ops->pad_read(t, v, n);
}

/* Accuracy and loss on the evaluation set, split over the ranks without
 * padding (rank r takes samples r, r+W, ...), counts all-reduced: every
 * rank ends with the job's numbers; rank 0 reports them. A rank that cannot
 * load the set says so in the all-reduce, and every rank turns evaluation
 * off together. */
static int run_eval(Trainer *t)
{
    char err[512] = "";
    float red[4] = { 0, 0, 0, 0 }; /* correct, total, loss sum, ranks that failed */
    if (!t->eval_loaded) {
        if (load_eval(t, err, sizeof err))
            red[3] = 1;
        else
            t->eval_loaded = true;
    }
    if (t->eval_loaded) {
        int64_t correct = 0, total = 0;
        double loss = 0;
        if (t->ops->evaluate(t, &correct, &total, &loss, err, sizeof err)) red[3] = 1;
        red[0] = (float)correct;
        red[1] = (float)total;
        red[2] = (float)loss;
    }
    if (small_allreduce(t, red, 4, TAG_EVAL, true)) return -1;
    if (red[3] > 0.5f) {
        t->eval_off = true;
        if (err[0]) fprintf(stderr, "ddptop-worker rank %d: evaluation off: %s\n", t->id->rank, err);
        if (t->id->rank == 0)
            report_log(t, "warn", "evaluation turned off: %s",
                       err[0] ? err : "another rank could not load the test set");
        return 0;
    }
    if (t->id->rank == 0 && red[1] > 0) report_eval(t, red);
    return 0;
}

/* Paused after an agreed step: every PAUSE_ROUND_MS, poll commands and
 * all-reduce the flags alone, so every rank leaves the pause at the same
 * round — on resume, on stop (*stop set) — and a checkpoint asked for
 * meanwhile is written at that round. No collective waits longer than a
 * round, so a long pause never meets the collective timeout. */
static int pause_loop(Trainer *t, bool *stop)
{
    char detail[64];
    snprintf(detail, sizeof detail, "paused after step %" PRId64, t->step);
    report_phase(t, PHASE_PAUSED, detail);
    for (;;) {
        struct timespec ts = { 0, PAUSE_ROUND_MS * 1000000L };
        nanosleep(&ts, NULL);
        poll_commands(t);
        put_flags(t, t->flags_pause);
        if (small_allreduce(t, t->flags_pause, FL_COUNT, TAG_PAUSE_FLAGS, false)) return -1;
        Agreed g = agree(t, t->flags_pause, t->step);
        if (g.bad_loss) return -1;
        /* back to paused after it: what comes next (train, stopping) says so itself */
        if (g.ckpt) checkpoint_write(t, "requested while paused", PHASE_PAUSED, detail);
        if (g.stop) {
            *stop = true;
            return 0;
        }
        if (!g.pause) {
            report_phase(t, PHASE_TRAIN, "resumed");
            return 0;
        }
        report_wait_cb(t); /* the beat when due, and the backlog out as ddptop makes room */
    }
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) && errno == EINTR) {}
}

/* --pace N: a rank waits 1/N s before each step but the first, so a person
 * can follow the default job (ddptop gives it --pace when the user gave no
 * trainer options): at most N steps a second. The wait is between steps,
 * so a step's times stay its work's, and it starts when the last step's
 * all-reduce ended, which is the same moment on every rank: a wait timed
 * from each rank's own step start kept the ranks' skew at the start and
 * showed it as all-reduce wait. Waited in 20 ms slices that hand the
 * backlog and the beat to ddptop, as a pause does. */
static void pace_wait(Trainer *t)
{
    double now = mono_ms_f(), due = now + 1000.0 / t->a->pace;
    while (t->pace_started && now < due) {
        double ms = due - now < 20 ? due - now : 20;
        struct timespec ts = { 0, (long)(ms * 1e6) };
        nanosleep(&ts, NULL);
        report_wait_cb(t);
        now = mono_ms_f();
    }
    t->pace_started = true;
}

/* Faults that act before a step: kill and stall once this rank has done
 * S steps, slow in every step. */
static void faults_before_step(Trainer *t)
{
    const int r = t->id->rank;
    const Fault *f = fault_find(&t->faults, FAULT_KILL, r);
    if (f && t->step >= f->step) {
        fault_fired(t, f);
        /* SIGKILL leaves nothing queued a chance: let the sentence leave first. */
        uplink_flush_wait(t->up, 200);
        raise(SIGKILL);
    }
    f = fault_find(&t->faults, FAULT_STALL, r);
    if (f && t->step >= f->step) {
        fault_fired(t, f);
        /* Alive, sockets open, answering nothing: the peers wait in their
         * next all-reduce. ddptop's pings are still read, so its heartbeat
         * does not end the lesson; its stop ladder or death does. What was
         * said before (the sentence too) still goes out as ddptop makes
         * room: one that was behind would otherwise never see it. */
        for (;;) {
            uplink_flush(t->up);
            sleep_ms(200);
            report_check_ddptop(t);
            if (t->front_gone) _exit(1); /* a stalled rank has nothing to save */
        }
    }
    /* slow compute: step.c sleeps inside the step's forward, so the step
     * (not the gap between steps) is what takes longer, as a slow GPU's does */
    f = fault_find(&t->faults, FAULT_SLOW, r);
    if (f) fault_fired(t, f);
    t->fault_slow_ms = f ? f->ms : 0;
}

/* unsafe-stop: stop alone after step S + rank, without the flags, as a
 * script that breaks out of its loop on a local condition does. One that
 * names this rank (the f menu's u) stops it alone after step S: the
 * others go on into an all-reduce it never joins, whatever step each
 * heard of it at. */
static bool unsafe_stop(Trainer *t)
{
    const Fault *f = fault_find(&t->faults, FAULT_UNSAFE_STOP, t->id->rank);
    if (!f || t->step < f->step + (f->rank >= 0 ? 0 : t->id->rank)) return false;
    fault_fired(t, f);
    snprintf(t->stop_reason, sizeof t->stop_reason, "unsafe stop (fault): rank %d stops alone, no agreement",
             t->id->rank);
    return true;
}

static int train(Trainer *t)
{
    const TrainerArgs *a = t->a;
    SamplerConfig sc = { .size = t->ds.n,
                         .world = t->id->world,
                         .rank = t->id->rank,
                         .seed = t->seed,
                         .shuffle = a->shuffle,
                         .drop_last = a->drop_last };
    int64_t e0 = 0, pos0 = 0;
    if (t->resumed) {
        e0 = t->epoch;
        pos0 = t->pos_in_epoch;
        if (pos0 >= t->ns) {
            e0++;
            pos0 = 0;
        } /* saved at the end of an epoch */
    }
    bool stop = false;
    if (a->steps && t->step >= a->steps) {
        snprintf(t->stop_reason, sizeof t->stop_reason,
                 "reached --steps %" PRId64 " (nothing left after the checkpoint)", a->steps);
        return 0;
    }
    for (int64_t e = e0; (!epochs_bound(a) || e < a->epochs) && !stop; e++) {
        t->epoch = e;
        /* set_epoch: a new permutation every epoch (the fault forgets it). */
        int64_t order = e;
        const Fault *sk = t->faults.n ? fault_find(&t->faults, FAULT_SKIP_SET_EPOCH, t->id->rank) : NULL;
        if (sk && e > 0) {
            order = 0;
            fault_fired(t, sk);
        }
        double e_t0 = mono_ms_f();
        if (sampler_indices(&sc, order, t->idx, t->err, sizeof t->err)) return -1;
        report_shard(t, &sc);
        t->pend_epoch_ms += mono_ms_f() - e_t0;
        int64_t off = e == e0 ? pos0 : 0;
        t->pos_in_epoch = off;
        while (off < t->ns && !stop) {
            if (a->pace > 0) pace_wait(t);
            poll_commands(t);
            if (t->faults.n) faults_before_step(t);
            int64_t used = 0;
            float fl[FL_COUNT];
            put_flags(t, fl);
            if (step_run(t, off, fl, &used)) return -1;
            Agreed g = agree(t, fl, t->ops->loss_in_step_flags ? t->step : t->step - 1);
            /* Every rank stops here, together: nothing after this step may
             * save or evaluate the non-finite weights. */
            if (g.bad_loss) return -1;
            off += used;
            t->pos_in_epoch = off;
            /* End of an epoch: evaluate before any checkpoint, so that a run
             * resumed from a checkpoint taken here does not evaluate again. */
            if (off >= t->ns && a->eval_every && !t->eval_off && (e + 1) % a->eval_every == 0) {
                double v0 = mono_ms_f();
                if (run_eval(t)) return -1;
                t->pend_eval_ms += mono_ms_f() - v0;
            }
            if (g.ckpt)
                checkpoint_write(t, "requested", PHASE_TRAIN, NULL);
            else if (a->ckpt_every && t->step % a->ckpt_every == 0)
                checkpoint_write(t, "periodic", PHASE_TRAIN, NULL);
            if (g.stop) {
                snprintf(t->stop_reason, sizeof t->stop_reason, "%s",
                         front_gone(t) ? "ddptop is gone" : "stop requested by ddptop");
                stop = true;
            } else if (a->steps && t->step >= a->steps) {
                snprintf(t->stop_reason, sizeof t->stop_reason, "reached --steps %" PRId64 "%s", a->steps,
                         a->epochs_set ? " (before --epochs)" : "");
                stop = true;
            } else if (t->faults.n && unsafe_stop(t)) {
                stop = true;
            } else if (g.pause) {
                if (pause_loop(t, &stop)) return -1;
                if (stop) snprintf(t->stop_reason, sizeof t->stop_reason, "stop requested by ddptop (while paused)");
            }
            report_maybe_beat(t);
        }
    }
    if (!stop)
        snprintf(t->stop_reason, sizeof t->stop_reason, "finished %" PRId64 " epochs%s", a->epochs,
                 a->steps ? " (before --steps)" : "");
    return 0;
}

int trainer_run(const TrainerArgs *a, const WorkerIdentity *id, Uplink *up)
{
    Trainer tr;
    memset(&tr, 0, sizeof tr);
    Trainer *t = &tr;
    t->a = a;
    t->id = id;
    t->up = up;
    t->ops = &compute_cpu; /* the device's, once --device is acted on */
    t->seed = a->seed;
    t->last_ckpt_step = -1;
    t->last_beat_ms = mono_ms_f();
    t->faults = a->faults;
    int status = 0;

    report_phase(t, PHASE_INIT, NULL);
    if (mlp_init(&t->m, a->dims, a->n_linear, (int)a->batch_size, t->err, sizeof t->err)) {
        status = report_fail(t, 2);
        goto out;
    }
    if (optim_init(&t->o, &a->optim, t->m.n_params, t->err, sizeof t->err)) {
        status = report_fail(t, 2);
        goto out;
    }
    if (a->resume[0]) {
        int st;
        if (checkpoint_resume(t, &st)) {
            status = report_fail(t, st);
            goto out;
        }
    } else {
        mlp_reset_params(&t->m, a->seed);
        if (a->init_from[0] && ckpt_load_model(a->init_from, &t->m, t->err, sizeof t->err)) {
            status = report_fail(t, 2);
            goto out;
        }
    }
    if (load_data(t)) {
        status = report_fail(t, 2);
        goto out;
    }
    SamplerConfig sc = { .size = t->ds.n,
                         .world = id->world,
                         .rank = id->rank,
                         .seed = t->seed,
                         .shuffle = a->shuffle,
                         .drop_last = a->drop_last };
    if (sampler_check(&sc, t->err, sizeof t->err)) {
        status = report_fail(t, 2);
        goto out;
    }
    t->ns = sampler_num_samples(&sc);
    if (t->ns == 0) {
        snprintf(t->err, sizeof t->err, "rank %d has no samples: dataset of %" PRId64 " over world size %d%s", id->rank,
                 t->ds.n, id->world, a->drop_last ? " with --drop-last" : "");
        status = report_fail(t, 2);
        goto out;
    }
    t->xb = malloc((size_t)a->batch_size * t->ds.dim * sizeof(float));
    t->yb = malloc((size_t)a->batch_size * sizeof(int32_t));
    t->idx = malloc((size_t)t->ns * sizeof *t->idx);
    if (a->grad_accum > 1) t->acc = malloc(t->m.n_params * sizeof(float));
    if (!t->xb || !t->yb || !t->idx || (a->grad_accum > 1 && !t->acc)) {
        snprintf(t->err, sizeof t->err, "out of memory for a batch");
        status = report_fail(t, 1);
        goto out;
    }
    t->sched = (Schedule){
        .kind = a->lr_schedule, .base_lr = a->optim.lr, .warmup_steps = a->warmup_steps, .total_steps = planned_steps(t)
    };
    if (t->resumed && t->id->rank == 0 && t->ds.n != t->resume_dataset_size)
        report_log(t, "warn",
                   "resume: the checkpoint was taken on %" PRId64 " samples, this dataset has %" PRId64
                   ": the data order differs from the interrupted run's",
                   t->resume_dataset_size, t->ds.n);
    t->nb = bucket_assign(&t->m, a->bucket_cap_mb, BUCKET_FIRST_CAP_BYTES, t->buckets);
    for (int b = 0; b < t->nb; b++)
        for (int k = t->buckets[b].last_tensor; k <= t->buckets[b].first_tensor; k++) t->tensor_bucket[k] = b;
    if (!strcmp(id->device, "cuda")) t->ops = &compute_cuda;
    if (t->ops->setup(t)) {
        status = report_fail(t, 1);
        goto out;
    }
    report_hello(t, steps_per_epoch(t), planned_steps(t));
    if (id->rank == 0) report_buckets(t);
    int64_t newest = -1;
    int others = id->rank == 0 && !t->resumed ? ckpt_count(a->ckpt_dir, &newest) : 0;
    if (others > 0)
        report_log(t, "warn",
                   "--ckpt-dir %s holds %d checkpoint%s of another run (up to step %" PRId64
                   "): latest will be this run's; --keep-last removes the oldest written first",
                   a->ckpt_dir, others, others == 1 ? "" : "s", newest);
    /* a restart: the faults an earlier generation went past do not fire again */
    const char *spent = getenv(FAULT_SPENT_ENV);
    if (spent && *spent) {
        char *e;
        long long v = strtoll(spent, &e, 10);
        if (*e == '\0' && fault_drop_spent(&t->faults, v) > 0 && id->rank == 0)
            report_log(t, "info", "restart: faults at steps up to %lld fired in an earlier run, not again", v);
    }
    t->ops->log_memory(t, "ready");

    report_phase(t, PHASE_RENDEZVOUS, NULL);
    CommStore store = {
        .ctx = up, .set = uplink_store_set, .get = uplink_store_get, .interrupted = uplink_store_interrupted
    };
    char prefix[128];
    snprintf(prefix, sizeof prefix, "%s/%s", id->job_id, id->backend);
    CommConfig cc = { .backend = id->backend,
                      .rank = id->rank,
                      .world = id->world,
                      .host = id->gloo_host[0] ? id->gloo_host : "127.0.0.1",
                      .prefix = prefix,
                      .timeout_ms = (int64_t)(a->timeout_s * 1000),
                      .store = &store,
                      .device = t->ops->comm_device,
                      .stream = t->ops->stream(t) };
    if (comm_new(&t->comm, &cc, t->err, sizeof t->err)) {
        /* A peer's death can reach us first as Gloo's own error (the side
         * that connects to a dead peer is refused at once): give ddptop's
         * stop, which names the dead rank, a moment to arrive. */
        if (strstr(t->err, "Connection refused") || strstr(t->err, "closed by peer") || strstr(t->err, "reset by peer"))
            uplink_wait_stop(up, PEER_DEATH_STOP_WAIT_MS);
        if (uplink_stop_heard(up) && !t->front_gone) {
            /* ddptop stops the job (a peer died in the rendezvous): leave now. */
            char why[96] = "stop requested by ddptop during the rendezvous";
            int dead = uplink_stop_dead_rank(up);
            if (dead >= 0) snprintf(why, sizeof why, "rank %d died during the rendezvous: stopped by ddptop", dead);
            fprintf(stderr, "ddptop-worker rank %d: %s: %s\n", id->rank, why, t->err);
            report_phase(t, PHASE_STOPPING, why);
            report_bye(t);
            goto out;
        }
        status = report_fail(t, 1);
        goto out;
    }
    if (id->rank == 0 && id->world > 1) report_log(t, "info", "collectives: %s", comm_describe(t->comm));
    if (reducer_new(&t->red, t->comm, t->err, sizeof t->err)) {
        status = report_fail(t, 1);
        goto out;
    }

    /* DDP: rank 0's parameters everywhere before the first step. */
    report_phase(t, PHASE_BROADCAST, NULL);
    RedOp op;
    memset(&op, 0, sizeof op);
    op.kind = RED_BROADCAST;
    op.buf = t->ops->params(t);
    op.n = t->m.n_params;
    op.root = 0;
    op.scale = 1.0f;
    op.bucket = -1;
    if (collective(t, &op)) {
        status = report_fail(t, 1);
        goto out;
    }

    report_phase(t, PHASE_TRAIN, NULL);
    if (a->pace > 0 && t->id->rank == 0)
        report_log(t, "info", "paced: at most %g steps a second (trainer option --pace N; 0: full speed)", a->pace);
    if (train(t)) {
        status = report_fail(t, 1);
        goto out;
    }

    report_throughput(t);
    t->ops->log_memory(t, "at the end");
    report_log(t, "info", "stopping after step %" PRId64 ": %s", t->step, t->stop_reason);
    if (a->final_ckpt && t->step > 0) checkpoint_write(t, "final", PHASE_TRAIN, NULL);
    report_phase(t, PHASE_STOPPING, t->stop_reason);
    /* Nobody destroys the communicator while a peer may still use it
     * (unless the no-barrier fault shows why). */
    const Fault *nb = t->faults.n ? fault_find(&t->faults, FAULT_NO_BARRIER, id->rank) : NULL;
    if (nb) {
        fault_fired(t, nb);
    } else {
        memset(&op, 0, sizeof op);
        op.kind = RED_BARRIER;
        op.scale = 1.0f;
        op.bucket = -1;
        if (collective(t, &op)) {
            status = report_fail(t, 1);
            goto out;
        }
    }
    report_phase(t, PHASE_DESTROYING, NULL);
    reducer_free(&t->red);
    if (comm_destroy(&t->comm, t->err, sizeof t->err)) {
        status = report_fail(t, 1);
        goto out;
    }
    t->ops->free(t);
    report_phase(t, PHASE_DESTROYED, NULL);
    report_bye(t);
    if (front_gone(t)) {
        /* Saved and torn down cleanly, but nobody watched the end. */
        fprintf(stderr, "ddptop-worker rank %d: ddptop is gone: stopped after step %" PRId64 "%s; exit 1\n", id->rank,
                t->step, id->rank == 0 && t->last_ckpt_step == t->step ? " with a final checkpoint" : "");
        status = 1;
    }
out:
    reducer_free(&t->red);
    comm_free(&t->comm);
    t->ops->free(t);
    free(t->idx);
    free(t->xb);
    free(t->yb);
    free(t->acc);
    optim_done(&t->o);
    mlp_done(&t->m);
    dataset_done(&t->ds);
    dataset_done(&t->eval_ds);
    return status;
}
