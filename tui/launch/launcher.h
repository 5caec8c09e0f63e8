/* launcher.h — starting, signalling and reaping the worker processes.
 *
 * Owns: the children (one ddptop-worker, script or command per rank), their
 * environment (torchrun's names: RANK, LOCAL_RANK, WORLD_SIZE,
 * LOCAL_WORLD_SIZE, GROUP_RANK, ROLE_*, MASTER_*, TORCHELASTIC_*; plus
 * ddptop's endpoints and PYTHONPATH), their log files, and making sure
 * none outlives ddptop (PR_SET_PDEATHSIG, own process group so a terminal's
 * Ctrl-C reaches ddptop alone, SIGKILL on free). Main thread.
 */
#ifndef DDPTOP_LAUNCHER_H
#define DDPTOP_LAUNCHER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
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
    const char *log_dir;    /* rank-N.log files go here (rank-N.restart-K.log
                                 * after restart K) */
    int restart;            /* 0: the first run; K: the K-th restart (--max-restarts) */
    const char *device;     /* DDPTOP_DEVICE (NULL: auto) */
    const char *backend;    /* DDPTOP_BACKEND (NULL: auto) */
    const char *keys_path;  /* DDPTOP_KEYS: the job's key file (tcp endpoints), NULL: none */
    int node_rank, nnodes;  /* GROUP_RANK, GROUP_WORLD_SIZE (0 and 1 on one node) */
    int max_restarts;       /* TORCHELASTIC_MAX_RESTARTS (restart is TORCHELASTIC_RESTART_COUNT) */
    const char *pythonpath; /* put first on PYTHONPATH (the torch adapter's directory); NULL: left alone */
    bool set_faults_spent;  /* a restart: DDPTOP_FAULTS_SPENT (wire/fault.h) = faults_spent, the */
    int64_t faults_spent;   /* furthest step an earlier generation reached (its faults are spent) */
} LaunchConfig;

typedef struct Launcher Launcher;

/* The shutdown ladder's last rung: SIGKILL this long after SIGTERM (node 0
 * and the node agents alike). */
#define LAUNCH_KILL_GRACE_MS 5000

/* A TCP port nobody listens on at addr now, for MASTER_PORT: torch's
 * TCPStore binds it on rank 0. *port 0: the kernel's pick; else that port
 * (--master-port), checked free. Returns 0 or -1 with err. */
int launcher_free_port(const char *addr, int *port, char *err, size_t errlen);
/* TORCHELASTIC_RUN_ID of a job id: the same on every node and restart
 * ("ddptop-PID-NS" -> "ddptop-PID", node 0's ddptop). */
void launcher_run_id(const char *job_id, char *out, size_t n);

/* Fork and exec every rank. On failure nothing is left running.
 * Returns 0 or -1 with err. */
int launcher_start(Launcher **out, const LaunchConfig *c, char *err, size_t errlen);
/* Reap children that exited, without blocking: cb(ctx, rank, pid, status)
 * for each. Returns how many are still running. */
int launcher_reap(Launcher *l, void (*cb)(void *ctx, int rank, int pid, int status), void *ctx);
/* Send sig to every rank still running and its process group (what it
 * started); returns how many got it. A rank reaped takes what it left in
 * its group with it (SIGKILL). */
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
