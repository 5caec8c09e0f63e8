/* launcher.h — starting, signalling and reaping the worker processes.
 *
 * Owns: the children (one ddptop-worker per rank), their environment (the
 * torchrun names plus ddptop's endpoints), their log files, and making sure
 * none outlives ddptop (PR_SET_PDEATHSIG, own process group so a terminal's
 * Ctrl-C reaches ddptop alone, SIGKILL on free). Main thread.
 */
#ifndef DDPTOP_LAUNCHER_H
#define DDPTOP_LAUNCHER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct {
    int world;       /* ranks on this node */
    int rank_offset; /* global rank of local rank 0 */
    int global_world;
    const char *worker_path;  /* ddptop-worker */
    char *const *worker_args; /* trainer options */
    int n_worker_args;
    const char *ctl_ep, *tel_ep;
    const char *job_id;
    const char *master_addr;
    int master_port;
    const char *log_dir;   /* rank-N.log files go here (rank-N.restart-K.log
                                 * after restart K) */
    int restart;           /* 0: the first run; K: the K-th restart (--max-restarts) */
    const char *device;    /* DDPTOP_DEVICE (NULL: auto) */
    const char *backend;   /* DDPTOP_BACKEND (NULL: auto) */
    const char *keys_path; /* DDPTOP_KEYS: the job's key file (tcp endpoints), NULL: none */
} LaunchConfig;

typedef struct Launcher Launcher;

/* The shutdown ladder's last rung: SIGKILL this long after SIGTERM (node 0
 * and the node agents alike). */
#define LAUNCH_KILL_GRACE_MS 5000

/* Fork and exec every rank. On failure nothing is left running.
 * Returns 0 or -1 with err. */
int launcher_start(Launcher **out, const LaunchConfig *c, char *err, size_t errlen);
/* Reap children that exited, without blocking: cb(ctx, rank, pid, status)
 * for each. Returns how many are still running. */
int launcher_reap(Launcher *l, void (*cb)(void *ctx, int rank, int pid, int status), void *ctx);
/* Send sig to every rank still running; returns how many got it. */
int launcher_signal_all(Launcher *l, int sig);
int launcher_running(const Launcher *l);
pid_t launcher_pid(const Launcher *l, int rank);
/* The path of a rank's log file. */
const char *launcher_log_path(const Launcher *l, int rank);
/* The last (at most max) non-empty lines of local rank `local`'s log, oldest
 * first, into lines. Returns how many (0 when there is no log). */
int launcher_log_tail(const Launcher *l, int local, char lines[][256], int max);

/* The trainer options of a restart: args without any --init-from or
 * --resume pair (the checkpoint has its own weights; the trainer refuses
 * both), then "--resume" resume. out needs n + 2 slots; it points into args
 * and at resume. Returns the count. */
int launcher_resume_args(char *const *args, int n, const char *resume, char **out);

/* The queries, reap and signal_all take NULL as "no process" (a restart
 * that could not launch). SIGKILL whatever still runs, reap it, free. Safe
 * on NULL. */
void launcher_free(Launcher **l);

#endif
