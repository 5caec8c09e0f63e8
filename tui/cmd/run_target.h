/* run_target.h — what every rank of `ddptop run` runs (RunTarget,
 * launch/options.h): the built-in trainer, a Python script or module under
 * the torch adapter (or bare, --no-inject), or any command (--no-python).
 * Finds the program (ddptop-worker beside ddptop, --python on PATH, CMD on
 * PATH) and the adapter's directory, builds each rank's arguments, and
 * checks them before anything starts (DDPTOP_CHECK_ARGS: a bad trainer
 * option, a missing script or module, an interpreter without torch is one
 * line, exit 2). Main thread.
 */
#ifndef DDPTOP_RUN_TARGET_H
#define DDPTOP_RUN_TARGET_H

#include <limits.h>
#include <stdbool.h>

#include "launch/options.h"

/* The default job's pace (`ddptop` with no trainer options): the built-in
 * trainer's --pace, steps a second (run_target.c, run's --help). */
#define RUN_DEFAULT_PACE "20"

/* The strings RunOptions points at once run_target_prepare filled it. */
typedef struct {
    char bin[PATH_MAX], cpu_bin[PATH_MAX + 8], adapter[PATH_MAX];
    char timeout[32];
    char **args; /* each rank's argv after argv[0] */
    char spawns[96]; /* the check's "WHAT:LINE" when the script starts its own ranks (mp.spawn), else "" */
} RunTargetBuf;

/* o->worker_path, o->trainer_args/n_trainer_args and o->adapter_dir for
 * o->target and o->program; argc/argv: the user's arguments for it (after
 * "--" for the trainer, after SCRIPT, MODULE or CMD otherwise). The
 * program is checked (o->listen_ep: not: nothing is started), and, when
 * !nproc_set and the job runs on GPUs, o->nproc becomes the GPU count; a
 * script that starts its own ranks (b->spawns) runs once (o->nproc 1), and
 * with -n N > 1 is refused.
 * Returns 0, or 2 (1 when out of memory) after one line on stderr. */
int run_target_prepare(RunOptions *o, bool nproc_set, int argc, char **argv, RunTargetBuf *b);
/* `ddptop run --trainer-help`: runs the built-in trainer's --help (the
 * worker beside ddptop, as a job would). Returns its exit status, or 1
 * after one line on stderr when it cannot be run. */
int run_target_trainer_help(void);
/* Frees b->args; safe twice. */
void run_target_done(RunTargetBuf *b);

#endif
