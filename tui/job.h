/* job.h — the job model: what ddptop knows about a running job, built from
 * protocol messages and process events. No curses here: views read it,
 * tests drive it with messages.
 *
 * Owns: per-rank state (identity, phase, latest step, recent steps ring,
 * last collective, shard summary, exit), job-wide figures (samples/s, drops),
 * and the events log. Main thread only.
 */
#ifndef DDPTOP_JOB_H
#define DDPTOP_JOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol.h"

#define JOB_MAX_RANKS 4096
#define JOB_STEP_RING 256
#define JOB_EVENTS 512
#define JOB_SHARD_FIRST 16
/* A live rank silent this long is shown as stale (a hang, or a dead link). */
#define JOB_STALE_NS 5000000000LL
/* samples/s is measured over this window, from snapshots taken at most
 * every JOB_RATE_SNAP_NS (the ring must span the window). */
#define JOB_RATE_WINDOW_NS 2000000000LL
#define JOB_RATE_SNAP_NS 100000000LL
#define JOB_RATE_RING 32

typedef struct {
    int64_t step, epoch;
    double loss, step_ms, comm_ms, exposed_ms;
    int64_t t_ns;                    /* arrival, monotonic */
} JobStepRec;

typedef enum {
    RANK_WAITING = 0,    /* launched, no hello yet */
    RANK_ALIVE,
    RANK_EXITED_OK,      /* exit 0 after bye */
    RANK_FAILED,         /* non-zero exit, signal, or exit without bye */
} RankState;

typedef struct {
    int rank;
    RankState state;
    bool hello;
    int64_t pid;
    char host[PROTO_STR_MED], device[PROTO_STR_SHORT], backend[PROTO_STR_SHORT];
    Phase phase;
    int64_t phase_since_ns;          /* monotonic */
    char detail[PROTO_STR_LONG];     /* last phase detail / error text */
    bool had_error;                  /* went through the error phase; detail
                                      * then keeps the error's text */
    bool have_step;
    MsgStep last;                    /* latest step message */
    int64_t last_msg_ns;             /* monotonic arrival of anything from it
                                      * (launch time until its hello) */
    JobStepRec ring[JOB_STEP_RING];
    int ring_len, ring_head;         /* ring_head = next write position */
    bool have_coll;
    MsgColl coll;                    /* latest collective */
    double coll_ms;                  /* its duration */
    bool have_beat;
    MsgBeat beat;                    /* latest heartbeat (collective in flight) */
    int64_t beat_ns;                 /* its arrival, monotonic */
    /* shard of the current epoch */
    bool have_shard;
    int64_t shard_epoch, num_samples, total_size, padding;
    int n_first;
    int64_t first_idx[JOB_SHARD_FIRST];
    /* end */
    bool bye;
    int32_t bye_status;
    int wait_status;                 /* raw waitpid status once exited */
    char how_ended[64];              /* "exit 0", "signal 9 (Killed)", "SIGTERM by ddptop" */
} JobRank;

typedef enum { EV_INFO = 0, EV_WARN, EV_ERROR } JobEventLevel;

typedef struct {
    int64_t t_ns;                    /* wall clock */
    int64_t mono_ns;                 /* monotonic, same clock as job start_ns */
    int rank;                        /* -1: ddptop itself */
    JobEventLevel level;
    char text[256];
} JobEvent;

typedef enum {
    JOB_STARTING = 0,   /* launched, not every rank training yet */
    JOB_RUNNING,
    JOB_STOPPING,       /* a stop was requested or is under way */
    JOB_DONE,           /* every rank exited cleanly */
    JOB_FAILED,         /* a rank failed */
} JobState;

typedef struct {
    int world;
    JobRank *ranks;                  /* [world] */
    JobState state;
    int64_t start_ns;                /* monotonic, job creation */
    /* from the first hello */
    char dataset[PROTO_STR_SHORT], model[PROTO_STR_MED];
    char backend[PROTO_STR_SHORT], device[PROTO_STR_SHORT];
    int64_t params, batch_size, max_steps, steps_per_epoch, dataset_size;
    /* progress */
    int64_t step, epoch;             /* min over ranks that have stepped of their
                                      * last step; epoch of a rank at that step */
    double samples_per_s;            /* whole job, smoothed */
    uint64_t drops;                  /* sum of ranks' dropped telemetry */
    uint64_t bad_frames;             /* frames ddptop could not decode */
    int64_t last_ckpt_step;
    char last_ckpt_path[PROTO_STR_LONG];
    int ckpts;
    /* events ring */
    JobEvent events[JOB_EVENTS];
    uint64_t ev_total;               /* events ever added; event n sits in slot n % JOB_EVENTS */
    uint64_t version;                /* bumped on every change: views redraw when it moves */
    int first_failed;                /* rank that failed first, -1 if none */
    /* bookkeeping for the figures above (job.c) */
    int n_stepped, step_min_count;   /* ranks that stepped; how many sit at `step` */
    int64_t samples_total;           /* sum of ranks' last `samples` */
    int64_t rate_t_ns[JOB_RATE_RING], rate_samples[JOB_RATE_RING];
    int rate_len, rate_head;         /* snapshots of samples_total; head = next write */
} Job;

/* New model for `world` ranks (1..JOB_MAX_RANKS). NULL on bad world/out of memory. */
Job *job_new(int world);
void job_free(Job **j);

/* Apply one message that arrived at now_ns (monotonic). Messages with a rank
 * outside the world are counted as bad frames and ignored. */
void job_apply(Job *j, const Msg *m, int64_t now_ns);
/* A rank's process ended with a waitpid status; `how` may be NULL or say who
 * ended it ("SIGKILL by ddptop"). */
void job_rank_exited(Job *j, int rank, int pid, int wait_status, const char *how, int64_t now_ns);
/* The launcher's pid for a rank, known before its hello. */
void job_rank_started(Job *j, int rank, int pid, int64_t now_ns);
/* Add an event (printf-style). rank -1 is ddptop itself. */
void job_event(Job *j, int rank, JobEventLevel level, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The i-th most recent event (0 = newest), NULL past the end. */
const JobEvent *job_event_at(const Job *j, int i);
/* Event number n (0 = first ever), NULL if never added or overwritten. */
const JobEvent *job_event_nth(const Job *j, uint64_t n);
/* Note that a stop was requested (state becomes STOPPING unless finished). */
void job_set_stopping(Job *j);

/* Every rank's process has exited. */
bool job_all_exited(const Job *j);
/* Every rank said bye with status 0 and exited 0. */
bool job_all_clean(const Job *j);
/* Ranks alive (hello seen, not exited). */
int job_alive(const Job *j);

/* Alive (or launched and never heard from) and silent for JOB_STALE_NS. */
bool job_rank_stale(const JobRank *r, int64_t now_ns);
/* All-reduce time of the rank's latest step in ms: the last all-reduce
 * collective's duration when one was reported, else the step's comm_ms. */
double job_rank_allreduce_ms(const JobRank *r);
/* The rank's i-th most recent step (0 = newest), NULL past the end. */
const JobStepRec *job_rank_step_at(const JobRank *r, int i);
/* One line for the job's outcome, e.g. "job done: all 2 ranks ended cleanly"
 * or "job failed: rank 1 signal 9 (Killed) at step 57". Writes buf (out). */
void job_verdict(const Job *j, char *buf, size_t len);

const char *job_state_name(JobState s);
const char *rank_state_name(RankState s);

#endif
