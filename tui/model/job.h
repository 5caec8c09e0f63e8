/* job.h — the job model: what ddptop knows about a running job, built from
 * protocol messages and process events. No curses here: views read it,
 * tests drive it with messages.
 *
 * Owns: per-rank state (identity, phase and its history, latest step,
 * recent steps ring, loss history, recent collectives, shard summary, log
 * lines, exit), job-wide figures (samples/s, drops, nodes, loss band,
 * evals, pause), collectives matched across ranks (who arrived last), the
 * per-bucket all-reduce history, the sampler's index map of the current
 * epoch, and the events log. Main thread only.
 *
 * The structs below are what views may read; the rings behind the
 * *_at accessors and the bookkeeping that keeps the figures up to date
 * are private (job_priv.h, reached through the `book` pointers).
 *
 * The implementation is split by subject: job.c (ranks, phases, steps,
 * exits), job_events.c (the events log, its folded rows), job_comm.c (collectives, buckets, comm share),
 * job_shard.c (sampler map, set_epoch check), job_stats.c (rank ordering,
 * min/median/max, outliers, the steps as shown), job_rate.c (samples/s),
 * hang.c (the hang verdict).
 */
#ifndef DDPTOP_JOB_H
#define DDPTOP_JOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/protocol.h"
#include "model/series.h"

#define JOB_MAX_RANKS       4096
#define JOB_STEP_RING       256
#define JOB_EVENTS          512
/* An event's text: long enough for a whole hang verdict (full words, never cut). */
#define JOB_EVENT_TEXT      1024
#define JOB_SHARD_FIRST     16
/* A live rank silent this long is shown as stale (a hang, or a dead link). */
#define JOB_STALE_NS        5000000000LL
/* Ranks send steps in bursts up to 50 ms apart (workers/link/uplink.c), so at a
 * few hundred steps a second their last reported steps differ by tens of
 * steps while DDP keeps them within one. A rank counts as behind only when
 * it is 2+ steps back and has reported no step for this long. */
#define JOB_BEHIND_QUIET_NS 500000000LL
/* samples/s is measured over this window. */
#define JOB_RATE_WINDOW_NS  2000000000LL

/* Per-rank histories for the detail view. */
#define JOB_PHASE_HIST    16
#define JOB_RANK_COLLS    12
#define JOB_RANK_LOGS     8
/* Collectives matched across ranks by sequence number. */
#define JOB_COLL_RING     64
/* Gradient buckets with their own latency history (later ones are pooled
 * into the last). */
#define JOB_MAX_BUCKETS   8
/* Steps a bucket's means are gathered over at once: a rank's burst brings
 * its steps of 50 ms together, one rank after another, a straggler's later. */
#define JOB_BUCKET_STEPS  32
#define JOB_EVALS         64
/* The sampler's index map covers at most this many dataset indices. */
#define JOB_SHARD_MAP_MAX (4 << 20)
/* The torch adapter beats once a second from a thread of its own, also
 * while the script waits in a collective (torch releases the GIL there).
 * Its rank whose process lives but that sent nothing for JOB_SILENT_NS (5
 * beat periods) is silent: its heartbeat thread cannot run (the process is
 * blocked in native code that holds Python's GIL), so what its last beat
 * said (a collective in flight, a line) is old news, never a current fact.
 * Quiet past JOB_BEAT_LATE_NS (2 beat periods) its beat is late: the hang
 * verdict waits rather than lean on it. The built-in C worker beats from
 * its training thread (between steps and while it waits), so a long step
 * is no silence: these hold for the adapter's ranks only (JobRank.python). */
#define JOB_SILENT_NS     5000000000LL
#define JOB_BEAT_LATE_NS  2000000000LL
/* A collective in flight this long shows as a possible hang. */
#define JOB_INFLIGHT_NS   1000000000LL
/* A rank heard from this recently whose newest message was sent before a
 * wait began is one ddptop is still catching up on (job_catching_up). */
#define JOB_CATCHUP_NS    1000000000LL

typedef struct {
    int64_t step, epoch;
    double loss, step_ms, comm_ms, exposed_ms;
    int64_t samples; /* the rank's sample counter at this step */
    int64_t t_ns;    /* arrival, monotonic */
} JobStepRec;

typedef struct {
    Phase phase;
    int64_t since_ns; /* monotonic */
} JobPhaseRec;

typedef struct {
    MsgColl c;
    double ms;      /* done - start */
    double wait_ms; /* start - enqueued */
} JobCollRec;

typedef struct {
    int64_t t_ns; /* wall clock */
    int level;    /* JobEventLevel */
    char text[200];
} JobLogRec;

typedef enum {
    RANK_WAITING = 0, /* launched, no hello yet */
    RANK_ALIVE,
    RANK_EXITED_OK, /* exit 0 after bye */
    RANK_FAILED,    /* non-zero exit, signal, or exit without bye */
} RankState;

typedef struct JobRankBook JobRankBook; /* private halves: job_priv.h */
typedef struct JobBook JobBook;

typedef struct {
    int rank;
    RankState state;
    bool hello;
    int64_t pid;
    char host[PROTO_STR_MED], device[PROTO_STR_SHORT], backend[PROTO_STR_SHORT];
    Phase phase;
    int64_t phase_since_ns;      /* monotonic */
    char detail[PROTO_STR_LONG]; /* last phase detail / error text */
    bool had_error;              /* went through the error phase; detail
                                      * then keeps the error's text */
    bool have_step;
    MsgStep last;        /* latest step message */
    int64_t last_msg_ns; /* monotonic arrival of anything from it
                                      * (launch time until its hello) */
    int64_t last_sent_ns; /* the newest "t" of its messages: when it last said
                           * anything, by its own clock (wall); 0 none */
    bool have_coll;      /* a collective completed: job_rank_coll_at(r, 0)
                          * is the latest (kept once, in the ring) */
    bool have_beat;
    MsgBeat beat;    /* latest heartbeat (collective in flight, beat.where) */
    int64_t beat_ns; /* its arrival, monotonic */
    bool python;     /* a beat named a Python line: the torch adapter runs
                      * there (and dumps its stacks on SIGUSR1) */
    unsigned lints;  /* JobLint bits found on this rank */
    /* shard of the current epoch */
    bool have_shard;
    int64_t shard_epoch, num_samples, total_size, padding;
    int n_first;
    int64_t first_idx[JOB_SHARD_FIRST];
    bool shard_shuffle;
    /* histories: how many are kept; job_rank_step_at, _phase_at, _coll_at
     * and _log_at read them, newest first */
    Series loss_hist; /* loss over steps, decimated */
    int ring_len;     /* steps (up to JOB_STEP_RING) */
    int phases_len, colls_len, logs_len;
    /* end */
    bool bye;
    int32_t bye_status;
    int64_t finished_ns; /* monotonic, when it said bye or destroyed (the first); 0: not yet */
    bool lingered;       /* finished, and its process did not exit (job_note_linger) */
    int wait_status;    /* raw waitpid status once exited */
    char how_ended[64]; /* "exit 0", "signal 9 (Killed)", "SIGTERM by ddptop" */
    JobRankBook *book;  /* private: the rings, the shard's hashes */
} JobRank;

typedef enum { EV_INFO = 0, EV_WARN, EV_ERROR } JobEventLevel;

/* Mistakes in a training script the model spots from the messages, each
 * told once as a warn event and kept on the ranks it concerns. */
typedef enum {
    JOB_LINT_SET_EPOCH = 1u << 0, /* a shuffled shard repeats the previous epoch's order */
    JOB_LINT_UNEVEN = 1u << 1,    /* another number of steps in an epoch than another rank */
    JOB_LINT_DESYNC = 1u << 2,    /* a collective number carried another op than on another rank */
    JOB_LINT_ALONE = 1u << 3,     /* inside a collective the other ranks will never reach: they finished */
    JOB_LINT_EARLY = 1u << 4,     /* failed while training after another rank had finished at the same step or
                                     earlier: the ranks ran different numbers of steps */
    JOB_LINT_SHAPE = 1u << 5,     /* a collective number carried another count or dtype than on another rank */
} JobLint;

typedef struct {
    int64_t t_ns;    /* wall clock */
    int64_t mono_ns; /* monotonic, same clock as job start_ns */
    int rank;        /* -1: ddptop itself */
    JobEventLevel level;
    char text[JOB_EVENT_TEXT];
} JobEvent;

/* A row of the events panel (job_event_row_at): one event, or a run of
 * info events of one rank that said the same thing but for their numbers
 * and paths (a checkpoint every epoch, its phase changes, a sampler's
 * pass), folded into one row that shows the newest and counts them. */
typedef struct {
    JobEvent e;     /* the newest of the row's events */
    uint64_t ev;    /* its number (job_event_nth) */
    int64_t count;  /* events in the row: 1 unless folded */
    uint64_t shape; /* hash of e's rank, level and text with numbers and paths masked */
} JobEventRow;
/* An info event folds into the row of the same shape among the newest
 * JOB_FOLD_RECENT rows (so that a checkpoint, its two phase changes and an
 * epoch's other events, interleaved, keep one row each), which moves to the
 * newest place. Warnings and errors never fold: each is a row of its own. */
#define JOB_FOLD_RECENT 32

typedef enum {
    JOB_STARTING = 0, /* launched, not every rank training yet */
    JOB_RUNNING,
    JOB_STOPPING, /* a stop was requested or is under way */
    JOB_DONE,     /* every rank exited cleanly */
    JOB_FAILED,   /* a rank failed */
    JOB_PAUSED,   /* every live rank reports the paused phase */
} JobState;

typedef struct {
    int64_t epoch, step;
    double loss, accuracy;
    int64_t correct, total;
    int64_t t_ns; /* arrival, monotonic */
} JobEval;

/* One collective (by sequence number) as the ranks reported it: arrival
 * from a beat (in flight) or the completed collective's enqueue time. */
typedef struct {
    int64_t seq; /* -1: slot unused */
    char op[PROTO_STR_SHORT];
    int32_t bucket;
    int64_t step, bytes;
    int arrived, done;         /* ranks that entered / completed it */
    int64_t first_ns, last_ns; /* earliest and latest arrival (wall) */
    int64_t prev_last_ns;      /* the arrival before the latest */
    int first_rank, last_rank;
    int op_rank; /* the rank whose report set op */
    /* the completed reports' starts (min, max) and their latest done, wall:
     * the wait and the transfer (job_coll_times) */
    int64_t in_first_ns, in_last_ns, done_last_ns;
    /* the payload as the first rank that said (count -1: nobody yet), and
     * the first rank whose op, count or dtype differed (odd_rank -1: none):
     * job_coll_mismatch */
    int64_t count, odd_count;
    char dtype[PROTO_STR_DTYPE], odd_dtype[PROTO_STR_DTYPE];
    char shape_op[PROTO_STR_SHORT], odd_op[PROTO_STR_SHORT];
    int shape_rank, odd_rank;
    /* which ranks arrived: job_coll_arrived */
} JobColl;

/* One collective's (or a bucket's step's) figures as nccl-tests defines
 * them, from the ranks' own clocks: a rank is "in" when it started it. */
typedef struct {
    double xfer_ms;   /* the transfer: the last rank in to the last rank done */
    double wait_ms;   /* the first rank in to the last rank in */
    double algbw_gbs; /* bytes / xfer (GB/s); 0 when xfer is not above 0 */
    double busbw_gbs; /* algbw x the op's factor: 2(n-1)/n all-reduce, (n-1)/n all-gather,
                         reduce-scatter and all-to-all, 1 otherwise, 0 a barrier */
} JobCollTimes;

typedef struct {
    bool used;
    int64_t bytes;
    Series ms; /* the transfer time (JobCollTimes.xfer_ms) of each step every rank reported */
    JobCollTimes last; /* of the newest step every rank reported */
    int64_t last_step; /* that step, -1 none yet */
} JobBucket;

/* The sampler's dataset index space for the newest epoch any rank reported:
 * which rank got each index, and how often (padding repeats some): read
 * with job_shard_owner. */
typedef struct {
    int64_t epoch;  /* -1: no shard yet */
    int64_t size;   /* dataset size N */
    int64_t mapped; /* indices covered: min(N, JOB_SHARD_MAP_MAX) */
    int ranks;      /* ranks whose shard is in the map */
    int64_t num_samples, total_size, padding, seed;
    bool shuffle, drop_last;
    int64_t dup_indices;      /* indices handed out more than once */
    bool cut;                 /* some rank sent fewer indices than num_samples */
    int same_order_rank;      /* first rank whose order equals its previous epoch's, -1 */
    int64_t same_order_epoch; /* the epoch that repeated, -1 */
} JobShardMap;

/* The job's one diagnosis (job_diagnosis.c): the strongest finding the job
 * has produced, of which the live hang line, the final verdict, --json's
 * summary and the exit line are views. Strongest first: */
typedef enum {
    DIAG_NONE = 0,
    DIAG_FAILED,    /* a rank failed; nothing tells more */
    DIAG_TIMEOUT,   /* a collective timed out (only consequences were seen) */
    DIAG_UNEVEN,    /* the ranks ran different numbers of steps */
    DIAG_LINGER,    /* a rank finished but its process did not exit (a non-daemon thread, a teardown) */
    DIAG_STUCK,     /* every rank is inside one collective that never completes */
    DIAG_STOPPED,   /* a rank stopped (stuck in Python, SIGSTOP) while the others wait for it */
    DIAG_SILENT,    /* an adapter's rank whose process lives went silent (JOB_SILENT_NS): blocked holding the GIL */
    DIAG_DIED,      /* a rank's process ended on its own: a signal, an exit code */
    DIAG_EXCEPTION, /* a rank's own exception */
    DIAG_ALONE,     /* a collective reached by some ranks only */
    DIAG_DESYNC,    /* the ranks wait in different collectives */
} DiagKind;
#define JOB_DIAG_TEXT 768
typedef struct {
    DiagKind kind;
    int rank;                     /* the culprit (the `!`), -1 none */
    int64_t step;                 /* its last step, -1 unknown */
    char where[PROTO_STR_MED + 8]; /* the innermost line of the user's own code, "x.py:12 in main"; "" */
    char text[JOB_DIAG_TEXT];     /* cause first: the rank, what it did, the line */
} JobDiagnosis;

/* The hang ddptop reported (model/hang.c keeps it: hang_note), so that the
 * job's verdict blames the rank the others waited for, not the first one
 * the shutdown ladder happened to reap. */
#define JOB_HANG_LIST 64
typedef struct {
    bool active; /* reported, and the rank waited for has not stepped since */
    bool blamed; /* active when the first rank failed: the job's cause */
    int64_t seq; /* the collective the others wait in */
    char op[PROTO_STR_SHORT];
    int n_missing; /* ranks that never entered it (first JOB_HANG_LIST kept) */
    int missing[JOB_HANG_LIST];
    int64_t step; /* the first missing rank's last step when reported */
    uint64_t ev;  /* its event (job_event_nth), updated in place */
    bool left;    /* the first missing rank left the training loop alone (HangReport.left) */
    bool unsafe;  /* and its stop says it was an unsafe stop */
    JobDiagnosis found; /* the strongest finding of this hang (hang_note); kind DIAG_NONE: none */
} JobHang;

typedef struct {
    int world;
    JobRank *ranks; /* [world] */
    JobState state;
    int64_t start_ns; /* monotonic, job creation */
    /* from the first hello */
    char dataset[PROTO_STR_SHORT], model[PROTO_STR_MED];
    char backend[PROTO_STR_SHORT], device[PROTO_STR_SHORT];
    char precision[PROTO_STR_SHORT], grad_dtype[PROTO_STR_SHORT]; /* "" when the workers do not say */
    int64_t params, batch_size, max_steps, steps_per_epoch, dataset_size;
    /* progress */
    int64_t step, epoch;  /* min over ranks that have stepped of their
                                      * last step; epoch of a rank at that step */
    double samples_per_s; /* whole job, smoothed */
    uint64_t drops;       /* sum of ranks' dropped telemetry */
    uint64_t bad_frames;  /* frames ddptop could not decode */
    int64_t last_ckpt_step;
    char last_ckpt_path[PROTO_STR_LONG];
    char hang_report[400]; /* the newest hang report's directory (the run layer writes it), "" none */
    int ckpts;
    int ckpts_lost;         /* checkpoints a rank reported it could not write */
    int64_t lost_ckpt_step; /* the last of those, and why */
    char lost_ckpt_error[PROTO_STR_LONG];
    int lost_ckpt_restart;   /* the attempt (restarts) that lost it */
    int ckpts_superseded;    /* lost ones a later checkpoint replaced: a warning, no longer lost */
    char interrupted_by[16]; /* "Ctrl-C", "SIGTERM", "SIGHUP": the stop signal that ended the run; "" none */
    char refused[PROTO_STR_LONG]; /* the first bye's `refused`: a rank refused to run as launched (usage, exit 2) */
    uint64_t ev_total;       /* events ever added (job_event_at, job_event_nth) */
    uint64_t version;        /* bumped on every change: views redraw when it moves */
    int first_failed;        /* rank that failed first, -1 if none */
    int nodes;               /* distinct hosts among hellos */
    Series loss_all;         /* every rank's loss pooled: mean and band */
    int n_evals;             /* evals ever kept (job_eval_at) */
    bool pause_wanted;       /* ddptop asked the ranks to pause (not resumed) */
    bool paused;             /* every live rank reports phase paused */
    int64_t paused_step;
    int restarts, max_restarts; /* --max-restarts: restarts done / allowed */
    bool bare;                  /* the ranks may speak no protocol (--no-inject, --no-python): an exit 0 of a
                  rank that never said hello is clean without a bye */
    JobBucket buckets[JOB_MAX_BUCKETS];
    int n_buckets; /* highest bucket index seen + 1 (capped) */
    JobShardMap shard;
    int n_stepped; /* ranks that have reported a step */
    JobHang hang;  /* the current (or the blamed) hang: hang.h */
    JobBook *book; /* private: the rings behind job_event_at,
                                      * job_eval_at, job_colls_recent and
                                      * job_shard_owner; the bookkeeping behind
                                      * step, samples_per_s and buckets */
} Job;

/* The model reads no clock: every entry point takes the time its caller saw
 * the thing happen, now_ns monotonic (the clock of start_ns) and, where an
 * event is stamped, wall_ns (CLOCK_REALTIME, what the events panel shows).
 * A replay passes the recorded times, a test its own. */

/* New model for `world` ranks (1..JOB_MAX_RANKS), created at now_ns (its
 * start_ns). NULL on bad world/out of memory. */
Job *job_new(int world, int64_t now_ns);
void job_free(Job **j);

/* Apply one message that arrived at now_ns / wall_ns. Messages with a rank
 * outside the world are counted as bad frames and ignored. */
void job_apply(Job *j, const Msg *m, int64_t now_ns, int64_t wall_ns);
/* Apply ms[0..n), in order, that all arrived at now_ns / wall_ns (a burst's
 * messages): the model ends as job_apply on each in turn would leave it,
 * with the sample rate's update, which only the last of a run of steps,
 * collectives and beats decides, done once for them. */
void job_apply_burst(Job *j, const Msg *ms, int n, int64_t now_ns, int64_t wall_ns);
/* A rank's process ended with a waitpid status; `how` may be NULL or say who
 * ended it ("SIGKILL by ddptop"). */
void job_rank_exited(Job *j, int rank, int pid, int wait_status, const char *how, int64_t now_ns, int64_t wall_ns);
/* The launcher's pid for a rank, known before its hello. */
void job_rank_started(Job *j, int rank, int pid, int64_t now_ns);
/* Add an event seen at now_ns / wall_ns (printf-style). rank -1 is ddptop
 * itself. */
void job_event(Job *j, int64_t now_ns, int64_t wall_ns, int rank, JobEventLevel level, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* The i-th most recent event (0 = newest), NULL past the end. */
const JobEvent *job_event_at(const Job *j, int i);
/* Event number n (0 = first ever), NULL if never added or overwritten. */
const JobEvent *job_event_nth(const Job *j, uint64_t n);
/* Rewrite event n's level and text in place (a report that grows, such as
 * a hang's wait); its times stay those of when it was first added. False
 * when it is no longer kept. */
bool job_event_update(Job *j, uint64_t n, JobEventLevel level, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The events as the screen shows them, folded (JobEventRow): the i-th most
 * recent row (0 = newest), NULL past the end. Of the last JOB_EVENTS rows;
 * a row keeps its newest event's text after the event ring moved on.
 * job_event_at and job_event_nth still give every event (headless, --json). */
const JobEventRow *job_event_row_at(const Job *j, int i);
/* Rows kept (at most JOB_EVENTS). */
int job_event_rows(const Job *j);
/* Note that a stop was requested (state becomes STOPPING unless finished). */
void job_set_stopping(Job *j);
/* Note that ddptop asked the ranks to pause (true) or resume (false); the
 * ranks' phases then say whether it happened. */
void job_set_pause_wanted(Job *j, bool pause);

/* Every rank is launched again (--max-restarts): the ranks' process state
 * (exit, bye, phase, error) starts over, their histories stay; restarts
 * counts one more. */
void job_restart(Job *j, int64_t now_ns);

/* Every rank's process has exited. */
bool job_all_exited(const Job *j);
/* Every rank said bye with status 0 and exited 0. */
bool job_all_clean(const Job *j);
/* Ranks alive (hello seen, not exited). */
int job_alive(const Job *j);

/* Alive (or launched and never heard from) and silent for JOB_STALE_NS. */
bool job_rank_stale(const JobRank *r, int64_t now_ns);
/* Is ddptop still reading what a rank said before since_wall_ns? Its newest
 * message (sent at sent_ns, its own clock) is older than that, yet came in
 * less than JOB_CATCHUP_NS ago (silent_ns, -1 never): its telemetry is
 * queued behind a backlog (a loaded ddptop, a full socket), so nothing is
 * known of what it did since, and its absence from a collective others
 * wait in is ddptop's lag, not the rank's. A rank that really stopped
 * before that wait began went quiet before it too, by more than any wait
 * that counts (JOB_INFLIGHT_NS, the hang threshold); a rank that beats
 * while stuck elsewhere sends newer times. The hang verdict and the ranks
 * panel's "stalled" wait until it has caught up. */
static inline bool job_catching_up(int64_t silent_ns, int64_t sent_ns, int64_t since_wall_ns)
{
    return silent_ns >= 0 && silent_ns < JOB_CATCHUP_NS && sent_ns > 0 && sent_ns < since_wall_ns;
}
/* All-reduce time of the rank's latest step in ms: the last all-reduce
 * collective's duration when one was reported, else the step's comm_ms. */
double job_rank_allreduce_ms(const JobRank *r);
/* The rank's i-th most recent step (0 = newest), NULL past the end. */
const JobStepRec *job_rank_step_at(const JobRank *r, int i);
/* How the job ended, in the order that decides it: still running, a rank
 * refused to run as launched (its bye's `refused`: a usage error found at
 * run time, e.g. -n N with a script that starts its own ranks), a rank
 * failed (also one the shutdown ladder ended after a stop signal), every
 * rank stopped cleanly after a stop signal (job_set_interrupted), a
 * checkpoint lost while every rank ended cleanly, or ok. */
typedef enum {
    JOB_END_OK,
    JOB_END_RUNNING,
    JOB_END_FAILED,
    JOB_END_CKPT_LOST,
    JOB_END_INTERRUPTED,
    JOB_END_REFUSED,
} JobOutcome;
JobOutcome job_outcome(const Job *j);
/* Every rank ended cleanly, no checkpoint was lost, nothing interrupted
 * the run: what exit 0 and "ok":true mean. */
bool job_ok(const Job *j);
/* A stop signal (by: "Ctrl-C", "SIGTERM", ...) is ending the run. Ignored
 * once a rank has failed or every rank has exited (that verdict stands). */
void job_set_interrupted(Job *j, const char *by);
/* job_verdict's line for an interrupted run ("stopped by Ctrl-C at step
 * 57, checkpoint written: PATH"), a lost checkpoint ("job failed: checkpoint
 * lost: ...") or a refusal ("job refused: WHY"); false (buf untouched) for
 * any other outcome. */
bool job_outcome_verdict(const Job *j, char *buf, size_t len);
/* A rank that finished (said bye or destroyed, *since_ns: when) and whose
 * process has not exited: what the run layer's clock and /proc watch. */
bool job_rank_finished_alive(const JobRank *r, int64_t *since_ns);
/* Rank `rank` finished secs ago and its process has not exited (the run
 * layer saw it alive; wchan: its kernel wait, "" unknown): noted once as
 * an error event and as the diagnosis's evidence (DIAG_LINGER), with why:
 * the non-daemon threads its adapter named, else where its beat placed it.
 * True the first time. */
bool job_note_linger(Job *j, int rank, int64_t now_ns, int64_t wall_ns, double secs, const char *wchan);
/* Rank `rank` is silent at now_ns (the caller saw its process alive and
 * not stopped: hang_rank_silent): noted for the diagnosis (DIAG_SILENT
 * while nothing outranks it) with how long, told once per silence as a warn
 * event naming the last line heard. Anything it sends ends the silence.
 * Returns true when this silence is new. */
bool job_note_silent(Job *j, int rank, int64_t now_ns, int64_t wall_ns);
/* Is r an adapter's rank quiet past JOB_BEAT_LATE_NS at now_ns (its beat
 * late, or it silent)? False for the C worker and for ranks not alive. */
bool job_rank_beat_late(const JobRank *r, int64_t now_ns);
/* One line for the job's outcome, e.g. "job done: all 2 ranks ended cleanly"
 * or "job failed: rank 1 signal 9 (Killed) at step 57": a failure says the
 * diagnosis (job_diagnose) first, then how the others ended, as
 * consequences. Writes buf (out). */
void job_verdict(const Job *j, char *buf, size_t len);
/* The job's one diagnosis now (job_diagnosis.c), into *d (out): the
 * strongest of a current hang's finding (desync, a collective some ranks
 * reach alone, a rank stopped), what the ranks' own errors say (a
 * collective the user called that a finished peer never reached, the first
 * rank's own exception or death), uneven inputs when the step counts
 * differ, a timeout, a failure. A peer's "Connection closed by peer" or a
 * timeout is a consequence, never the cause while anything better is
 * known. Pure: the same messages give the same diagnosis. kind DIAG_NONE
 * when nothing is wrong. */
void job_diagnose(const Job *j, JobDiagnosis *d);
/* The word for a kind: "desync", "alone", "exception", ... */
const char *job_diag_kind_name(DiagKind k);
/* Is rank the culprit of the job's diagnosis (the `!` mark)? */
bool job_diag_is_culprit(const Job *j, int rank);

/* The rank's i-th most recent phase change (0 = current), NULL past the end. */
const JobPhaseRec *job_rank_phase_at(const JobRank *r, int i);
/* The rank's i-th most recent collective (0 = newest), NULL past the end. */
const JobCollRec *job_rank_coll_at(const JobRank *r, int i);
/* The rank's i-th most recent log line (0 = newest), NULL past the end. */
const JobLogRec *job_rank_log_at(const JobRank *r, int i);
/* The rank's samples/s over its last ~second of steps; 0 when unknown or
 * when no step came for a while (paused, stuck). */
double job_rank_samples_per_s(const JobRank *r, int64_t now_ns);
/* Seconds since anything came from the rank (its heartbeat age). */
double job_rank_beat_age_s(const JobRank *r, int64_t now_ns);
/* The one in-flight rule: the rank's newest heartbeat names a collective
 * (r->beat.coll_seq, since r->beat.coll_since_ns, wall) and no completed
 * collective with that number or a later one has arrived since. Says
 * nothing of the rank's process state or of how long. */
bool job_rank_beat_in_coll(const JobRank *r);
/* A live rank inside a collective for JOB_INFLIGHT_NS or more (by the rule
 * above); *seq, *secs (out, may be NULL) say which and how long. */
bool job_rank_in_flight(const JobRank *r, int64_t wall_ns, int64_t *seq, double *secs);
/* The i-th most recent eval (0 = newest), NULL past the end. */
const JobEval *job_eval_at(const Job *j, int i);
/* The rank's Python line from its newest beat, as people read it:
 * "train.py:57 in save_checkpoint" into buf (out). False (buf "") when the
 * rank has sent none (ddptop's C trainer, no beat yet). */
bool job_rank_where(const JobRank *r, char *buf, size_t len);
/* job_rank_where, when the line is the user's own code: not a frozen
 * stdlib module ("<frozen genericpath>:19 exists") nor any "<...>" the
 * worker could not place; false (buf "") otherwise. The diagnosis names
 * no line rather than a wrong one. */
bool job_rank_user_where(const JobRank *r, char *buf, size_t len);
/* A few words for the row of a rank with these JobLint bits ("set_epoch
 * not called?"), the most serious first; "" for none. */
const char *job_lint_brief(unsigned lints);

/* ---- collectives (job_comm.c) ---- */
/* Up to max collectives, newest (highest seq) first, into out. Returns n. */
int job_colls_recent(const Job *j, const JobColl **out, int max);
/* Bucket b's figures (out) of the newest step every rank reported: true,
 * or false (*out zeroed) before one is. */
bool job_bucket_times(const Job *j, int b, JobCollTimes *out);
/* Collective c's figures (out, zeroed when false) once every rank has
 * completed it (c->done == world); false while one has not. */
bool job_coll_times(const Job *j, const JobColl *c, JobCollTimes *out);
/* A rank's report rec (one of job_rank_coll_at's) beside its collective:
 * *waited_ms, how long that rank waited in it for the last rank in (its
 * start to the last rank's; 0 when it came last), and the collective's
 * figures (out: job_coll_times, from the transfer, the same for every
 * rank). False (both zeroed) while a rank has not completed it, or once
 * it has left the ring of the last JOB_COLL_RING. */
bool job_rank_coll_times(const Job *j, const JobCollRec *rec, double *waited_ms, JobCollTimes *out);
/* Do the ranks' reports of collective number seq disagree on its op, its
 * element count or its dtype? True with "allreduce #42: rank 0 has 10
 * float32, rank 1 has 20" in buf (the dtype and op said again only where
 * they differ: "rank 1 has 10 int32", "collective #42: rank 0 has
 * allreduce of 10 float32, rank 1 has broadcast of 10"); false (buf "")
 * when they agree, fewer than two ranks reported it, or seq has left the
 * ring of the last JOB_COLL_RING. Two ranks' reports, the first and the
 * first that differed, said lower rank first (the same text every run); counts come with completed collectives (coll) and
 * with beats of the collective in flight (the torch adapter sends one as a
 * script's own dist.* call begins, so a rank that aborts inside has said
 * what it passed). */
bool job_coll_mismatch(const Job *j, int64_t seq, char *buf, size_t len);
/* The job's first (lowest-numbered) collective whose ranks disagreed, as
 * job_coll_mismatch says it, kept after the ring moved on: its seq, or -1
 * (buf "") when none did. */
int64_t job_coll_mismatch_first(const Job *j, char *buf, size_t len);
/* Did rank r reach collective c (one of job_colls_recent's)? */
bool job_coll_arrived(const Job *j, const JobColl *c, int rank);
/* Means over ranks' latest steps: comm/step, exposed/step and the share of
 * comm hidden behind backward (1 - exposed/comm). False without steps. */
bool job_comm_share(const Job *j, double *comm_frac, double *exposed_frac, double *hidden_frac, double *comm_ms,
                    double *exposed_ms);

/* ---- sampler (job_shard.c) ---- */
/* The rank holding dataset index i in the map's epoch: -1 none (or outside
 * the map); *count (out, may be NULL) how many times it was handed out. */
int job_shard_owner(const Job *j, int64_t i, int *count);

/* ---- ordering and summaries (job_stats.c) ---- */
typedef enum {
    JOB_SORT_RANK = 0,
    JOB_SORT_STEP, /* furthest behind first */
    JOB_SORT_LOSS,
    JOB_SORT_STEP_MS,
    JOB_SORT_COMM_MS,
    JOB_SORT_BEAT,   /* longest silent first */
    JOB_SORT_HEALTH, /* failed, stale, hung, slow first */
    JOB_SORT__COUNT
} JobSort;

const char *job_sort_name(JobSort s);
/* Does key, reversed or not, list the largest values first (loss, times,
 * heartbeat age; health: the worst first)? The arrows say this, the same
 * way in every column: ▼ descending, ▲ ascending. */
bool job_sort_descending(JobSort key, bool reversed);
/* The ranks in display order into order[world]. desc reverses the key's
 * natural order (ties stay by rank). */
void job_rank_order(const Job *j, JobSort key, bool desc, int64_t now_ns, int64_t wall_ns, int *order);

typedef enum {
    JOB_METRIC_STEP = 0,
    JOB_METRIC_LOSS,
    JOB_METRIC_STEP_MS,
    JOB_METRIC_COMM_MS,
    JOB_METRIC_EXPOSED_MS,
    JOB_METRIC_SAMPLES_S,
    JOB_METRIC_BEAT_S,
    JOB_METRIC__COUNT
} JobMetric;

typedef struct {
    int n; /* ranks with a value */
    double min, median, max;
    int min_rank, max_rank;
} JobStat;

/* min/median/max over ranks of each metric (ranks without a step count
 * only for the heartbeat age). */
void job_rank_stats(const Job *j, int64_t now_ns, JobStat out[JOB_METRIC__COUNT]);

typedef enum {
    JOB_OUT_FAILED = 0,
    JOB_OUT_ERROR,
    JOB_OUT_STALE,
    JOB_OUT_HUNG,
    JOB_OUT_NAN,
    JOB_OUT_BEHIND,
    JOB_OUT_STRAGGLER, /* the others wait for it in every all-reduce */
    JOB_OUT_SLOW,
    JOB_OUT_DROPS,
    JOB_OUT_WAITING, /* waits for the straggler: not its own fault */
} JobOutlierKind;

typedef struct {
    int rank;
    JobOutlierKind kind;
    char text[96];  /* "r17 silent 7s", "r3 step 31.0 ms (3.1x median)" */
    char brief[48]; /* the same for the rank's own row: "slow 3.1x median" */
} JobOutlier;

/* Ranks that stand out, worst first, at most max. Returns how many were
 * found in total (may exceed max). A slow rank takes 1.5x the median step
 * time and 2 ms more; a rank behind is 2 or more steps short of the front;
 * the straggler's own time (step minus its exposed all-reduce wait, over
 * its last 8 steps) exceeds the others' median by 2 ms and 20%, and a rank
 * waiting for it spends half that excess or more waiting. */
int job_outliers(const Job *j, int64_t now_ns, int64_t wall_ns, JobOutlier *out, int max);
/* The same with st = job_rank_stats(j, now_ns) already at hand (a big job's
 * JobSummary.stats): the ranks' statistics, a sort of every metric, are
 * most of job_outliers' cost at 1024 ranks. */
int job_outliers_stats(const Job *j, const JobStat st[JOB_METRIC__COUNT], int64_t now_ns, int64_t wall_ns,
                       JobOutlier *out, int max);
/* Does rank r stand out (any outlier kind)? */
bool job_rank_is_outlier(const Job *j, const JobRank *r, int64_t now_ns, int64_t wall_ns);

/* ---- many ranks at once (job_stats.c) ---- */
/* What a rank looks like in a big job's rank map: one state each, worst
 * first (the order the ranks that stand out are listed in). */
typedef enum {
    JOB_CELL_FAILED = 0,
    JOB_CELL_ERROR,   /* in the error phase */
    JOB_CELL_STALLED, /* the others wait for it: alive, not in the collective they are in (or alone in one the
                         others finished) */
    JOB_CELL_SILENT,  /* nothing from it for JOB_STALE_NS */
    JOB_CELL_NAN,     /* its loss is not finite */
    JOB_CELL_BEHIND,  /* 2+ steps behind the front, quiet for JOB_BEHIND_QUIET_NS */
    JOB_CELL_SLOW,    /* step time 1.5x the median and 2 ms more */
    JOB_CELL_DROPS,   /* dropped telemetry */
    JOB_CELL_WAITING, /* inside a collective for JOB_INFLIGHT_NS (for someone else) */
    JOB_CELL_OK,
    JOB_CELL_DONE,    /* ended cleanly */
    JOB_CELL_PENDING, /* no hello yet */
    JOB_CELL__COUNT
} JobCell;

typedef struct {
    int count[JOB_CELL__COUNT]; /* ranks in each cell */
    int odd;                    /* ranks that stand out: cells before JOB_CELL_WAITING */
    int first_stalled;          /* lowest stalled rank, -1 */
    /* the oldest collective ranks have waited in for JOB_INFLIGHT_NS while a
     * live rank has not come (the one a hang is about); wait_seq -1: none */
    int64_t wait_seq;
    char wait_op[PROTO_STR_SHORT];
    int wait_in;   /* ranks inside it */
    double wait_s; /* since the first one came */
    /* what the cells were judged against: job_rank_stats of the frame */
    JobStat stats[JOB_METRIC__COUNT];
    int64_t max_step;
    double med_step_ms;
    bool have_med;
    int straggler;       /* the rank the others wait for, -1: none (found once a frame) */
    double straggler_ms; /* its own time per step beyond the others' median */
} JobSummary;

/* Every rank's JobCell into cell[world] (out) and the counts into s (out).
 * Once per frame: O(world), plus the median's sort. */
void job_summary(const Job *j, int64_t now_ns, int64_t wall_ns, JobSummary *s, uint8_t *cell);
/* order[world] (in/out, a display order) with the ranks that stand out
 * moved to the front, worst cell first, within a cell the worst first (the
 * longest silent, the most behind, the slowest), the others in their
 * order behind them. Returns how many were moved. */
int job_summary_order(const Job *j, const JobSummary *s, const uint8_t *cell, int64_t now_ns, int *order);
/* One line naming rank `rank` and what is wrong with it into buf (out):
 * "r517 stalled: 1023 ranks wait for it in allreduce #812 for 7s",
 * "r17 step 40.0 ms (4.0x median)", "r3 healthy". */
void job_summary_text(const Job *j, const JobSummary *s, const uint8_t *cell, int rank, int64_t now_ns, int64_t wall_ns,
                      char *buf, size_t n);
/* "stalled", "healthy", ... */
const char *job_cell_name(JobCell c);
/* The persistent straggler: among the collectives kept that every rank
 * finished, not all in together (first to last 5 us or more), *of (out)
 * of them, the rank that came last most often, 5 us or more after the
 * next-to-last (*rank, -1 when none; ties to the lower rank), *times (out)
 * it did, *late_ms (out) its mean lead over the next-to-last. O(JOB_COLL_RING^2), no allocation. */
void job_colls_last_in(const Job *j, int *rank, int *times, int *of, double *late_ms);
/* ---- the step the ranks agree on (job_stats.c) ----
 * Ranks send their steps in bursts up to 50 ms apart, so their newest
 * reports differ by tens of steps while DDP keeps them within one: a rank
 * whose report lags can only be a step short of the front (the newest step
 * any live rank reported), since the front's all-reduce needed it. */
typedef struct {
    int64_t step, epoch; /* reached, as shown */
    bool lifted;         /* its own report lags the front (a burst on its way): step is the front's - 1 */
    double age_s;        /* age of its newest report, whose figures (loss, times) the row shows */
} JobShownStep;

/* Rank r's step as shown: its own, unless it is alive, more than a step
 * short of the front and either in DDP lockstep (the job's gradient buckets
 * are all-reduced: however late its reports, it cannot be further back) or
 * still reporting (a step within JOB_BEHIND_QUIET_NS). Ranks without a
 * step: step 0, age 0. */
void job_rank_shown_step(const Job *j, const JobRank *r, int64_t now_ns, JobShownStep *out);
/* The job's agreed step (every rank has done at least this many; min over
 * the ranks' shown steps) and its epoch (out, may be NULL). */
int64_t job_step_agreed(const Job *j, int64_t now_ns, int64_t *epoch);
/* A step's time in parts that add up: step_ms = fwd + bwd + wait + opt +
 * other, where wait is the all-reduce time backward did not hide (exposed)
 * and other the rest (data loading, telemetry, the Python around it);
 * overlapped is the comm that ran during backward (comm - wait), shown
 * beside the sum, not in it. When the reported parts exceed the step (a
 * worker that counts its wait inside bwd) the wait is taken as inside bwd. */
typedef struct {
    double step, fwd, bwd, wait, opt, other, comm, overlapped;
} JobStepParts;
void job_step_parts(const MsgStep *s, JobStepParts *out);

/* The loss now: the mean over ranks of each one's newest finite loss (NaN
 * when none), not the chart's newest bin, which averages many steps. */
double job_loss_now(const Job *j);

/* Figures older than this are marked by their age on the ranks' rows. */
#define JOB_FIGURES_OLD_NS 1000000000LL

const char *job_state_name(JobState s);
const char *rank_state_name(RankState s);

#endif
