/* nodes.h — node 0's side of a multi-node job: the agents of nodes 1..M-1.
 *
 * Owns: which nodes joined the rendezvous (host, pid, protocol), the state
 * of every remote rank as its agent reports it (started, pid, exited with a
 * wait status), and the "node" messages node 0 sends them (wait, refused,
 * launch, signal, ping, done). Agents talk to node 0 over the job's ctl
 * ROUTER with routing id "node-K". Their ranks' own frames come through
 * each agent's relay (relay.h) under the ranks' routing ids, so node 0
 * handles them like local ranks'; the agents also start, signal and reap
 * ranks and send their log tails. Main thread only.
 */
#ifndef DDPTOP_NODES_H
#define DDPTOP_NODES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/codec.h"
#include "wire/protocol.h"

/* An agent silent this long (no message; agents beat every second) is
 * lost: its ranks are counted as failed. Likewise an agent whose node 0 is
 * silent this long (node 0 pings every second) stops its ranks.
 * DDPTOP_NODE_SILENT_MS overrides it (tests; very slow networks). */
#define NODES_SILENT_MS 15000
int nodes_silent_ms(void);
/* How often both sides send a sign of life: a second, or a quarter of the
 * silence deadline when that is shorter. */
int nodes_beat_ms(void);

typedef struct Nodes Nodes;

typedef struct {
    void *ctx;
    void (*started)(void *ctx, int rank, int pid, const char *host);
    void (*exited)(void *ctx, int rank, int pid, int status);
    void (*log)(void *ctx, int rank, const char *line);
    void (*stop)(void *ctx, int node, const char *why);    /* Ctrl-C on an agent */
    void (*event)(void *ctx, int level, const char *text); /* 0 info, 1 warn, 2 error */
} NodeEvents;

/* nnodes nodes of nproc ranks each; node 0 is this process. */
Nodes *nodes_new(int nnodes, int nproc, void *router);
void nodes_free(Nodes **n);

/* "node-K" routing ids; *node gets K. */
bool nodes_ident(const void *ident, size_t ident_len, int *node);

/* A decoded message from an agent. */
void nodes_handle(Nodes *n, const void *ident, size_t ident_len, const Msg *m, int64_t now_ms, const NodeEvents *ev);
/* A frame from an agent that could not be decoded (err says why, e.g. a
 * different protocol version): refuse that node, naming both versions. */
void nodes_refuse_frame(Nodes *n, const void *ident, size_t ident_len, const char *why, const NodeEvents *ev);

int nodes_joined(const Nodes *n); /* agents joined (node 0 not counted) */
bool nodes_all_joined(const Nodes *n);
/* "1, 3": the nodes that have not joined. */
void nodes_missing(const Nodes *n, char *out, size_t len);
/* Start every remote rank (restart 0 the first time; extra: trainer
 * options to add, e.g. "--resume DIR", or ""; spent: the furthest step an
 * earlier run reached, for the ranks' DDPTOP_FAULTS_SPENT, -1 for none). */
void nodes_launch(Nodes *n, const char *job_id, int restart, const char *extra, int64_t spent);
/* Send sig to every remote rank still running; returns how many ranks. */
int nodes_signal(Nodes *n, int sig);
/* Remote ranks started and not yet reported ended. */
int nodes_running(const Nodes *n);
/* Remote ranks launched but not yet reported started count as running too
 * (so a job does not look finished while agents are starting them). */
/* Once a second: ping the agents; an agent silent for NODES_SILENT_MS has
 * its running ranks reported as exited (status 0xff00 = exit 255) through
 * ev->exited and an error event. */
void nodes_tick(Nodes *n, int64_t now_ms, const NodeEvents *ev);
/* The job is over: tell the agents (they exit once their ranks are reaped,
 * with exit_code, node 0's exit status, and say why). Once; from then on
 * nobody is pinged or judged lost (until a relaunch). */
void nodes_done(Nodes *n, const char *why, int exit_code);
const char *nodes_host(const Nodes *n, int node);

#endif
