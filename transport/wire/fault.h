/* fault.h — faults a teacher injects on purpose, to show what breaks.
 *
 * Owns: parsing `--fault SPEC` (repeatable) and the same faults sent live as
 * commands (ddptop's `f` menu), and the one-sentence explanation shown when
 * a fault fires. The trainer asks fault_* at its hook points. Main thread.
 *
 *   kill:R@S          rank R kills itself (SIGKILL) when it reaches step S
 *   stall:R@S         rank R stops stepping at step S but keeps its sockets
 *   slow:R:MS         rank R sleeps MS ms every step (a straggler)
 *   skip-set-epoch    every rank forgets set_epoch: each epoch repeats epoch 0's order
 *   unsafe-stop@S     each rank stops on its own after step S+rank, no agreement
 *                     (the classic shutdown hang); live (the f menu's u), one
 *                     rank R stops alone after its next step
 *
 * A restarted generation (--max-restarts) is told, in DDPTOP_FAULTS_SPENT,
 * the furthest step the job reached before: the faults of a step at or
 * below it fired already and are dropped (fault_drop_spent), so a kill
 * fires once and the class sees the recovery, even when the restart
 * resumes from a checkpoint below the fault's step.
 *   no-barrier        ranks destroy the communicator without the final barrier
 */
#ifndef DDPTOP_FAULT_H
#define DDPTOP_FAULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    FAULT_NONE = 0,
    FAULT_KILL,
    FAULT_STALL,
    FAULT_SLOW,
    FAULT_SKIP_SET_EPOCH,
    FAULT_UNSAFE_STOP,
    FAULT_NO_BARRIER,
} FaultKind;

typedef struct {
    FaultKind kind;
    int rank;     /* -1: every rank */
    int64_t step; /* kill/stall/unsafe-stop: at this step (0: at once) */
    int64_t ms;   /* slow */
} Fault;

#define FAULT_MAX 16

typedef struct {
    Fault f[FAULT_MAX];
    int n;
} FaultPlan;

/* Parse one spec and add it. Returns 0 or -1 with err naming the problem. */
int fault_parse(FaultPlan *p, const char *spec, char *err, size_t errlen);
/* A live fault from a command (op "fault", arg packs kind/rank/step/ms as
 * fault_pack does). Returns 0 or -1. */
int fault_unpack(int64_t arg, Fault *out);
int64_t fault_pack(const Fault *f);
void fault_add(FaultPlan *p, const Fault *f);
/* The fault of `kind` that applies to `rank` (NULL if none). */
const Fault *fault_find(const FaultPlan *p, FaultKind kind, int rank);
/* Drop the faults of a step (kill, stall, unsafe-stop@S) at or below
 * spent_step: an earlier generation went past them. Returns how many. */
int fault_drop_spent(FaultPlan *p, int64_t spent_step);
/* The environment variable ddptop sets on a restarted generation. */
#define FAULT_SPENT_ENV "DDPTOP_FAULTS_SPENT"
/* One sentence for the screen when the fault fires (f->step: the step it
 * fires at, as the rank knows it: the trainer passes its own step). */
void fault_explain(const Fault *f, char *buf, size_t len);
const char *fault_name(FaultKind k);

#endif
