/* internal.h — the state of `ddptop run`, shared by the files of tui/run/
 * that drive one job; run.h is the interface, this is not for other folders.
 *
 *   loop.c      run_job: start, the one poll loop, the end
 *   inbox.c     what arrives on ctl and tel, routed to the store, the
 *               agents, the viewers or the job model
 *   commands.c  commands to the ranks (ckpt, stop, pause, fault, ping)
 *   exits.c     reaping and exit bookkeeping, the shutdown ladder, the
 *               restart decision
 *   spawn.c     starting the ranks: the first launch and each restart
 *   peers.c     the agents of other nodes and the attached viewers
 *   setup.c     sockets, keys, the job model and the per-rank rows, and
 *               their teardown
 *   follow.c    a script that starts its own ranks (mp.spawn): its
 *               children are the ranks, their world the job's
 *
 * Every function here that takes err returns an ErrStatus (base/err.h)
 * and fills err when it fails; loop.c turns the status into the exit code.
 * Main thread only.
 */
#ifndef DDPTOP_RUN_INTERNAL_H
#define DDPTOP_RUN_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attach/server.h"
#include "cluster/nodes.h"
#include "launch/launcher.h"
#include "model/job.h"
#include "net/curve.h"
#include "net/publish.h"
#include "net/tstream.h"
#include "net/zsock.h"
#include "record/record.h"
#include "run/bench.h"
#include "run/hangwatch.h"
#include "run/run.h"
#include "run/store.h"
#include "view/view.h"
#include "wire/codec.h"

/* What the loop knows of one rank beyond the job model. */
typedef struct {
    bool routable;                   /* hello seen: its ctl routing id is known */
    int64_t sent_ckpt;               /* highest ckpt id sent */
    int64_t sent_pause, sent_resume; /* highest ids sent */
    bool sent_stop;
    int64_t exit_at;           /* ms an exit 0 without bye was reaped (0: none) */
    int exit_pid, exit_status; /* that exit, waiting for its bye */
    int64_t heard_ms;          /* listen: last message from it */
    bool ext_ended;            /* listen, follow.c: bye or silence ended it */
    int64_t gone_ms;           /* follow.c: its process seen gone (0: not), its bye awaited a while */
    int gone_status;           /* and the status it ends with without one */
    /* inbox.c: who the rank is (its hello's routing id and pid), and the
     * pid before a restart (its late frames are dropped without a word) */
    char ident[ZS_IDENT_MAX];
    size_t ident_len;
    int64_t pid, prev_pid;
    uint64_t stream_conn; /* its telemetry stream's connection (tss_send), 0: none seen */
} RunRank;

typedef struct {
    const RunOptions *o;
    void *zctx, *ctl, *tel;
    TStreamServer *tss;        /* the ranks' telemetry streams on this host (ipc only; NULL: ZeroMQ's tel alone) */
    char tss_note[200];        /* why there is none, told once the job model exists */
    uint64_t tss_bad, tss_cut; /* its connections closed and frames cut, counted in bad frames so far */
    Store *store;
    Launcher *l;
    Job *job;
    ViewTui *tui;
    ViewHeadless hl;
    CodecBuf buf;
    Bench *bench;     /* NULL unless DDPTOP_BENCH_OUT is set */
    Recorder *rec;    /* --record */
    HangWatch hw;     /* hang verdicts (--hang-after) */
    Publisher *pub;   /* --publish */
    Viewers *viewers; /* ddptop attach */
    Nodes *nodes;     /* --nnodes > 1: the agents of nodes 1..M-1 */
    ZapHandler *zap;  /* tcp: admits only the job's client key */
    JobKeys keys;
    bool tcp; /* ctl/tel on tcp:// with CURVE */
    char keys_file[600];
    bool keys_made;   /* this run wrote keys_file: remove it at the end */
    bool launched;    /* multi-node: every node joined, ranks started */
    bool rdzv_failed; /* multi-node: the rendezvous or its launch failed */
    int64_t rdzv_start_ms;
    bool external;   /* listen: ranks are not ours to start or signal */
    struct {         /* follow.c: the launched process started the ranks itself */
        bool on;     /* its children's hellos came: they are the ranks */
        int64_t pid; /* the launched process, their launcher (not a rank) */
        bool exited; /* and its exit */
        int status;
    } follow;
    char dir[256];     /* the private directory: sockets, and logs unless --log-dir */
    bool keep_dir;     /* the run failed: keep the logs in dir (run_teardown) */
    bool rec_lost;     /* a write of the --record file failed: it ends early (run_teardown) */
    bool own_ipc[2];   /* listen ipc://: ctl_ep, tel_ep bound by us, their files ours to remove */
    bool launched_any; /* this node started ranks (their logs are in dir) */
    char ctl_ep[300], tel_ep[300];
    RunRank *rk;                 /* [world] */
    int64_t pause_id, resume_id; /* pause n is always followed by resume n */
    bool pause_wanted;
    int64_t ckpt_id;
    bool stop_requested;
    int64_t stop_arg; /* the stop's arg: 1 + the rank whose death ended the job, else 0 */
    int64_t stop_at_ms;
    int rung;               /* 0 clean stop only, 1 SIGTERM sent, 2 SIGKILL sent */
    bool aborted;           /* a: the job was aborted on demand (exit non-zero) */
    int64_t linger_next_ns; /* run_linger_tick: its next look (monotonic) */
    int hang_reports;       /* report.c: reports made (hang-N and report-N share the count) */
    struct {                /* report.c: the report a gathering under way writes */
        bool due;           /* one is under way (a second r says so) */
        bool on_key;        /* r asked for it */
        int on_key_n;       /* reports written on request */
    } report;
    uint64_t reported_hang_ev; /* the hang (its event number) a report was started for */
    int64_t ping_id, last_ping_ms;
    int64_t fault_id;
    bool restart_pending; /* a rank failed: restart once every rank is reaped */
    LaunchConfig lc;
    char job_id[96];
    char **restart_args; /* trainer options + --resume CKPT_DIR/latest */
    char resume_path[600];
    int64_t steps_reached; /* the furthest step of any earlier generation (-1: none): DDPTOP_FAULTS_SPENT */
    bool quit_after;
    int handled_signals;
    bool verdict_told;                 /* the final verdict is an event (the TUI's events panel wraps it) */
    char status[JOB_EVENT_TEXT + 512]; /* a whole verdict: never cut (the screen cuts at its width) */
    uint64_t refused_frames;           /* inbox.c: not the sender's to send (counted in bad frames too) */
    bool tel_emptied;                  /* run_drain read tel until it was empty */
    /* loop.c's wait for input, read by run_drain: what this turn may skip
     * (all false, as a Run starts: read everything) */
    struct {
        int tel_fd, ctl_fd;                       /* ZeroMQ's ZMQ_FD of tel and ctl (edge: commands arrived) */
        bool have_fds;                            /* tel_fd and ctl_fd were asked for */
        bool quiet_tel, quiet_ctl, quiet_streams; /* the wait saw no input there */
        bool tel_left;                            /* the last drain left frames on tel (no new edge will say so) */
        int64_t tel_check_ms;                     /* tel's last ZMQ_EVENTS check (one a second at least) */
    } in;
    int64_t backlog_frames;  /* tel frames read by drains that left frames behind, since tel was last empty */
    bool trim_due;           /* a backlog ended: its memory goes back at the next trim */
    int64_t trim_ms;         /* the last trim (mono_ms) */
    int64_t refused_note_ms; /* last event about a refused hello */
    bool refused_warned;     /* the one event about frames with someone else's r */
    struct {                 /* w: a rank asked for its Python stacks */
        bool on;             /* waiting for its dump in its log */
        int rank, pid;       /* whom, which process */
        long off;            /* its log's size when signalled */
        long size;           /* the size last seen */
        int64_t asked_ms, grew_ms;
        bool follow;      /* shown: later parts of the dump still update the page */
        long shown;       /* the size the page shows */
        int threads;      /* threads it shows */
        size_t shown_len; /* and the length of their text */
        bool wire;        /* asked on ctl (run_stack_route's VIA_WIRE): the answer is a "stack" message */
        bool answered;    /* that answer came (a late one still reaches the open page) */
        int64_t token;    /* the ask's, above every gathering's (RUN_STACK_W_TOKEN) */
    } stack;
    struct RunGather *gather; /* stacks.c: every rank's stacks (NULL: none asked yet) */
} Run;

/* Frames ddptop queues per tel peer (ZMQ_RCVHWM): 5 s of a worker's
 * bursts (one each 50 ms). Beyond it ZeroMQ stops reading that peer, whose
 * frames then wait in the kernel and the peer's own queue. */
#define RUN_TEL_RCVHWM          100
/* Frames read while the queue was not emptied (a backlog) after which the
 * memory they held goes back to the system once the queue is empty: one
 * full drain, ~10 MB at 1024 ranks; at most one trim (5-13 ms on a 200 MB
 * heap) each RUN_TRIM_EVERY_MS. */
#define RUN_BACKLOG_TRIM_FRAMES 4096
#define RUN_TRIM_EVERY_MS       10000
/* libzmq's context option ZMQ_ZERO_COPY_RECV (zmq.h lists it with the
 * draft API only; libzmq 4.3 accepts it in any build). */
#define RUN_ZMQ_ZERO_COPY_RECV  10

/* listen: the first hello, read before the world size (and so the job
 * model) is known, applied once it is. */
typedef struct {
    Msg msg;
    char ident[ZS_IDENT_MAX];
    size_t ident_len;
    CodecBuf frame; /* as received, for the recording and viewers */
    bool have;
} RunHello;

/* ---- setup.c ---- */
/* The job's keys: --keys FILE when it exists, else fresh ones written there
 * (or to ./ddptop-PID.keys, removed at the end). ERR_USAGE for a key file
 * that cannot be read or written. */
int run_job_keys(Run *r, char *err, size_t errlen);
/* zmq context, ctl ROUTER and tel PULL bound where the mode says (a private
 * ipc directory; tcp with CURVE for several nodes or listen). ERR_USAGE for
 * a bad endpoint, a bad key file or an address that cannot be bound. */
int run_setup_sockets(Run *r, char *err, size_t errlen);
/* The job model, store, viewers, agents' state, recorder, publisher and
 * the per-rank rows, for a world of w ranks. */
int run_setup_job(Run *r, int w, char *err, size_t errlen);
/* A fresh hang watch for a world of w ranks (the first launch, each
 * restart): the verdicts of a run before are history. */
int run_watch_hangs(Run *r, int w, char *err, size_t errlen);
void run_teardown(Run *r);
/* listen: wait for the first hello (it carries the world size) into *h,
 * serving store requests meanwhile. *world gets the world size, or 0 when a
 * stop signal came first (ERR_OK: nothing to do). ERR_FAIL on a socket
 * error. */
int run_listen_first_hello(Run *r, RunHello *h, int *world, char *err, size_t errlen);

/* ---- inbox.c ---- */
/* Read whatever is waiting on the sockets loop.c's wait saw input on
 * (r->in; bounded, so keys stay responsive) and act on it; telemetry stops at until_ms (mono_ms), after
 * 64 frames at least, so a backlog does not hold the next frame back. Sets
 * r->tel_emptied, and counts a drain that left frames in r->backlog_frames.
 * Returns how many ctl messages came. */
int run_drain(Run *r, int64_t until_ms);
/* listen: the first hello, as if it had just arrived; frees it. */
void run_take_hello(Run *r, RunHello *h);
/* One rank's message m, decoded from frame (on ctl: from routing id ident;
 * ident NULL: telemetry, from process pid, 0 unknown): checked against its
 * sender, kept for the viewers' snapshot and applied to the job model at
 * now_ns / wall_ns; a refused one is counted and named as run_drain does.
 * 0 taken, -1 refused (or dropped as a stale process's). m stays the
 * caller's. */
int run_take_msg(Run *r, const void *ident, size_t ident_len, int64_t pid, const void *frame, size_t len, Msg *m,
                 int64_t now_ns, int64_t wall_ns);
/* ms[0..n), telemetry from process pid (0 unknown) that arrived together
 * at now_ns / wall_ns, each decoded from frames[i] (lens[i] bytes), taken
 * in order as a burst's messages are: run_take_msg's work for each, the
 * ones a rank's own process plainly sent applied together. Returns how
 * many were refused (or dropped). ms stay the caller's. What telemetry
 * costs after its decode: tests/tools/bench_model.c counts it here. */
int run_take_msgs(Run *r, int64_t pid, const void *const *frames, const size_t *lens, Msg *ms, int n, int64_t now_ns,
                  int64_t wall_ns);

/* ---- commands.c ---- */
/* Bring every routable rank up to date with the commands issued so far. */
void run_flush_cmds(Run *r);
/* A clean stop (once): every rank agrees on the last step. why goes to the
 * events. */
void run_request_stop(Run *r, const char *why);
void run_request_ckpt(Run *r);
/* p: pause every rank at one agreed step, or resume them. */
void run_request_pause(Run *r);
/* The f menu's choice (pick: UI_FAULT_*) for rank (the kinds that take one). */
void run_request_fault(Run *r, int pick, int rank);
/* ddptop's heartbeat: a ping to every reachable rank once a second. */
void run_ping_ranks(Run *r);
/* w: ask rank for every thread's Python stack as every gathering asks it
 * (run_stack_route): by signal into its log (SIGUSR1, or
 * DDPTOP_STACK_SIGNAL), or on the wire; a rank that cannot be asked gets
 * one line on the status line saying why not. */
void run_request_stack(Run *r, int rank);
/* Once a turn while a dump is awaited: read what the rank's log grew by
 * and show the stacks once it stops growing (or say none came in 3 s; on
 * the wire, only the 3 s). */
void run_stack_tick(Run *r);
/* Ask rank's torch adapter for every thread's stack on the wire (cmd
 * "stacks", arg token): its heartbeat thread answers with a "stack"
 * message carrying the token (run_gather_on_stack). */
void run_ask_stacks(Run *r, int rank, int64_t token);
/* A "stack" message: w's answer (commands.c; its text taken out of m) when
 * it carries w's latest token, else left for the gathering. */
void run_stack_on_answer(Run *r, Msg *m);
#define RUN_STACK_W_TOKEN (INT64_C(1) << 40) /* w's tokens from here up, a gathering's from 1 */
/* The signal that makes a Python rank dump its stacks (its *name). */
int run_stack_signal(const char **name);
/* Signal process pid (a Python rank's interpreter) to dump its stacks
 * (run_stack_signal), only when it has a handler for that signal: without
 * the adapter's the signal's default action would end it. 0 asked;
 * RUN_STACK_NO_HANDLER not asked; -1 gone (or the signal failed). The one
 * guard of w (commands.c) and of every gathering (stacks.c). */
enum { RUN_STACK_NO_HANDLER = 1 };
int run_stack_ask(int pid);
/* A file's size; -1 when it cannot be read. */
long run_file_size(const char *path);

/* ---- stacks.c: every rank's stacks merged (model/stacktree.h) ---- */
/* How one rank's stacks are asked for: the one rule of w (commands.c) and
 * of every gathering's look. */
enum { RUN_STACK_VIA_NONE, RUN_STACK_VIA_LOG, RUN_STACK_VIA_WIRE };
enum { RUN_STACK_NOT_TRIED = 2 }; /* RunStackRoute.asked: no pid or no log, not signalled */
typedef struct {
    int via;   /* RUN_STACK_VIA_*: VIA_LOG, signalled: its dump goes to its log from off on */
    int pid;   /* the Python process this ddptop may signal, -1: none (see python_pid) */
    long off;  /* its log's size before the signal, -1: no log of its own */
    int asked; /* run_stack_ask's answer, RUN_STACK_NOT_TRIED when not signalled */
} RunStackRoute;
/* Signal rank's Python process to dump its stacks into its log when this
 * ddptop started it here, with a log of its own and the adapter's handler
 * (VIA_LOG); else a live Python rank that said hello on ctl is to be asked
 * on the wire (VIA_WIRE: run_ask_stacks, not sent here): `ddptop listen`
 * ranks, other nodes', the ranks a script spawned (they share the launched
 * process's log: follow.c), a rank without the handler; else VIA_NONE. */
RunStackRoute run_stack_route(Run *r, int rank);
/* Who waits for a gathering's tree (RunGather.want). */
enum { RUN_GATHER_TUI = 1, RUN_GATHER_HANG = 2, RUN_GATHER_VIEWERS = 4, RUN_GATHER_REPORT = 8 };
/* Gather every rank's stacks twice, a second apart, for `want`; a
 * gathering under way takes the new wants along. */
void run_gather_start(Run *r, unsigned want);
/* An attached viewer's "stacks" (json: the answer as JSON). */
void run_gather_viewer(Run *r, const void *ident, size_t ident_len, bool json);
/* Once a turn while gathering: the second look, the logs read, the tree
 * delivered. */
void run_gather_tick(Run *r);
/* The job ends: a gathering under way delivers what it has. */
void run_gather_finish(Run *r);
/* A rank's "stack" reply: kept (its text taken out of m) when it answers
 * this look's ask, else dropped (a late reply to an older look). */
void run_gather_on_stack(Run *r, Msg *m);

/* ---- exits.c ---- */
/* Ranks still running: this node's children, the agents' ranks, or
 * (listen) ranks that said hello and have not ended. */
int run_procs_running(const Run *r);
/* A rank's process is gone (launcher_reap's and the agents' callback; ctx
 * is the Run). An exit 0 waits for its bye (run_held_exits). */
void run_on_exit(void *ctx, int rank, int pid, int status);
/* Judge the exits held for their bye: the bye came, the grace is over, or
 * all_now. Returns how many are still held. */
int run_held_exits(Run *r, bool all_now);
/* A rank ended (status as waitpid's): into the job model and the
 * recording; a failure stops the job or schedules a restart. */
void run_rank_ended(Run *r, int rank, int pid, int status);
/* Stop signals not yet handled: the first a clean stop, each later one a
 * rung up the ladder. */
void run_take_signals(Run *r);
/* a: no clean stop; SIGTERM now, SIGKILL later (a second a: at once). */
void run_request_abort(Run *r);
/* The ladder's deadlines, with running ranks still running. */
void run_ladder_tick(Run *r, int running);
/* Hangs at exit: a rank that finished (bye, or destroyed) and whose process
 * has not exited after --hang-after seconds is named (job_note_linger);
 * once no rank is training any more, the ladder ends them (SIGTERM now,
 * SIGKILL 5 s later). Once a second is plenty; cheap otherwise. */
void run_linger_tick(Run *r, int running);

/* ---- report.c ---- */
/* A report on disk once every rank's stacks are gathered (RUN_GATHER_REPORT,
 * with `also` wanted of the same gathering): for a hang (on_key false), or
 * on request (the r key: any time, hang or not; a note answers it). One at
 * a time: while one is under way, r says so and starts nothing. */
void run_report_start(Run *r, bool on_key, unsigned also);
/* The gathering for a report ended (stacks.c): hang-N/ (a hang is on, or
 * it was the hang's) or report-N/ beside the ranks' logs: the diagnosis,
 * the merged tree t (NULL: none), each rank's dump (its log's bytes
 * off[k]..size[k], off -1 none), its last collectives, its log's tail, the
 * job's versions, a README. Keeps the private directory; 0 and its path in
 * out, or -1. Its path goes to
 * the events (and the note of an r), a hang's to Job.hang_report (the
 * summary, the exit line). */
struct StackTree;
int run_hang_report(Run *r, const struct StackTree *t, const long *off, const long *size, char *out, size_t out_len);

/* ---- follow.c ---- */
/* A hello from rank m->rank claiming pid `claimed`, before any rank is known:
 * when this node launched one process of a script and `claimed` is a process
 * it started (a descendant), the job follows those processes as its ranks:
 * the world becomes the hello's (the job model and everything sized by the
 * world start again, the events kept). True when the job follows them now
 * (also when it already did). */
bool run_follow_hello(Run *r, const Msg *m, int64_t claimed);
/* Whether pid descends from the launched process the job follows. */
bool run_follow_descends(const Run *r, int64_t pid);
/* Before it follows: whether pid descends from the one process launched
 * for a script (its telemetry may come before its hello is read). */
bool run_follow_descends_launched(const Run *r, int64_t pid);
/* The launched process exited (status as waitpid's): ranks that did not say
 * bye end with it. */
void run_follow_launcher_exit(Run *r, int status);
/* --max-restarts launched the script again: its new process is the launcher followed. */
void run_follow_restarted(Run *r);
/* Once a turn: a followed rank whose process is gone without a bye ended. */
void run_follow_tick(Run *r);

/* ---- spawn.c ---- */
/* Start every rank (restart 0: the first time; K: the K-th restart, from
 * CKPT_DIR/latest when there is one). */
int run_launch(Run *r, int restart, char *err, size_t errlen);
/* --max-restarts: every rank is reaped; start them all again. */
int run_restart(Run *r, char *err, size_t errlen);

/* ---- peers.c ---- */
/* The callbacks nodes.h calls back with, on r. */
NodeEvents run_node_events(Run *r);
/* A command from an attached viewer (--control) acts like the key. */
void run_viewer_cmd(Run *r, const void *ident, size_t ident_len, const Msg *m);
/* Once a turn: viewers gone silent, the agents' beats, the rendezvous
 * (launch once every node joined, or give up), listen's silent ranks. */
void run_peers_tick(Run *r);

#endif
