/* peers.c — the loop's other peers on the ctl socket: the agents of other
 * nodes (nodes.h owns their state; this file turns their news into the job
 * model's, and runs the rendezvous), the attached viewers (attach/server.h
 * owns them; their commands act like keys here), and listen's ranks, which
 * are nobody's children. See internal.h. Main thread.
 */
#include "run/internal.h"

#include <stdio.h>
#include <string.h>

#include "base/clock.h"

/* listen: a rank silent this long is taken for gone. */
#define LISTEN_SILENT_MS 20000

static void node_started(void *ctx, int rank, int pid, const char *host)
{
    Run *r = ctx;
    (void)host;
    job_rank_started(r->job, rank, pid, mono_ns());
    if (r->rec) {
        char err[256];
        recorder_write_start(r->rec, rank, pid, mono_ns(), 0, err, sizeof err);
    }
}

static void node_log(void *ctx, int rank, const char *line)
{
    job_event(((Run *)ctx)->job, mono_ns(), wall_ns(), rank, EV_ERROR, "log: %s", line);
}

static void node_stop(void *ctx, int node, const char *why)
{
    Run *r = ctx;
    r->restart_pending = false;
    char w[200];
    snprintf(w, sizeof w, "node %d: %s", node, why[0] ? why : "stop requested");
    run_request_stop(r, w);
}

static void node_event(void *ctx, int level, const char *text)
{
    Run *r = ctx;
    job_event(r->job, mono_ns(), wall_ns(), -1, level == 0 ? EV_INFO : level == 1 ? EV_WARN : EV_ERROR, "%s", text);
    if (!r->tui && level == 2) fprintf(stderr, "ddptop: %s\n", text);
}

NodeEvents run_node_events(Run *r)
{
    return (NodeEvents){ .ctx = r,
                         .started = node_started,
                         .exited = run_on_exit,
                         .log = node_log,
                         .stop = node_stop,
                         .event = node_event };
}

void run_viewer_cmd(Run *r, const void *ident, size_t ident_len, const Msg *m)
{
    char who[96] = "viewer";
    int before = viewers_count(r->viewers);
    ViewerAction a = viewers_handle(r->viewers, r->ctl, ident, ident_len, m, mono_ms(), who, sizeof who);
    int after = viewers_count(r->viewers);
    if (after != before)
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_INFO, "%s %s (%d attached)", who,
                  after > before ? "attached" : "detached", after);
    char why[160];
    switch (a) {
    case VIEWER_CKPT:
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_INFO, "%s asked for a checkpoint", who);
        run_request_ckpt(r);
        break;
    case VIEWER_STOP:
        snprintf(why, sizeof why, "destroy requested by %s", who);
        r->restart_pending = false;
        run_request_stop(r, why);
        break;
    case VIEWER_PAUSE:
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_INFO, "%s toggled pause", who);
        run_request_pause(r);
        break;
    case VIEWER_STACKS: run_gather_viewer(r, ident, ident_len, m->u.cmd.arg != 0); break;
    case VIEWER_ABORT:
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_WARN, "%s asked to abort", who);
        run_request_abort(r);
        break;
    default: break;
    }
}

static void forget_silent_viewers(Run *r)
{
    int before = viewers_count(r->viewers), after = viewers_tick(r->viewers, mono_ms());
    if (after < before)
        job_event(r->job, mono_ns(), wall_ns(), -1, EV_INFO,
                  "%d viewer%s stopped answering and %s forgotten (%d attached)", before - after,
                  before - after == 1 ? "" : "s", before - after == 1 ? "was" : "were", after);
}

/* The rendezvous ended without a job: the agents are told why, and the
 * loop leaves once nothing runs. */
static void rendezvous_failed(Run *r, const char *why)
{
    nodes_done(r->nodes, why, 1);
    r->rdzv_failed = true;
    r->quit_after = true;
}

/* Multi-node: start the ranks once every node joined; give up on a signal
 * or after --rdzv-timeout. */
static void rendezvous_tick(Run *r)
{
    const RunOptions *o = r->o;
    char err[512];
    if (nodes_all_joined(r->nodes)) {
        if (run_launch(r, 0, err, sizeof err)) {
            job_event(r->job, mono_ns(), wall_ns(), -1, EV_ERROR, "launch failed: %s", err);
            rendezvous_failed(r, err);
        } else {
            job_event(r->job, mono_ns(), wall_ns(), -1, EV_INFO, "every node joined: launched %d ranks on %d nodes",
                      r->job->world, o->nnodes);
            r->status[0] = 0;
        }
        return;
    }
    if (!r->handled_signals && mono_ms() - r->rdzv_start_ms <= (int64_t)(o->rdzv_timeout_s * 1000)) return;
    char missing[200], why[700];
    nodes_missing(r->nodes, missing, sizeof missing);
    if (r->handled_signals)
        snprintf(why, sizeof why, "rendezvous interrupted: node%s %s had not joined", strchr(missing, ',') ? "s" : "",
                 missing);
    else
        snprintf(why, sizeof why,
                 "rendezvous did not complete within %g s: node%s %s of %d never joined "
                 "(ddptop run --nnodes %d --node-rank K --rdzv %.60s --keys %.120s on those hosts)",
                 o->rdzv_timeout_s, strchr(missing, ',') ? "s" : "", missing, o->nnodes, o->nnodes, o->rdzv,
                 r->keys_file);
    job_event(r->job, mono_ns(), wall_ns(), -1, EV_ERROR, "%s", why);
    if (!r->tui) fprintf(stderr, "ddptop: %s\n", why);
    snprintf(r->status, sizeof r->status, "%.250s", why);
    rendezvous_failed(r, why);
}

/* listen: a rank that said hello and then went silent has ended. */
static void end_silent_ranks(Run *r)
{
    for (int k = 0; k < r->job->world; k++) {
        RunRank *rk = &r->rk[k];
        if (!rk->routable || rk->ext_ended || mono_ms() - rk->heard_ms < LISTEN_SILENT_MS) continue;
        rk->ext_ended = true;
        job_event(r->job, mono_ns(), wall_ns(), k, EV_ERROR, "rank %d has been silent for 20 s: taken for gone", k);
        run_rank_ended(r, k, (int)r->job->ranks[k].pid, 0xff00);
    }
}

void run_peers_tick(Run *r)
{
    forget_silent_viewers(r);
    if (r->nodes && r->launched) {
        NodeEvents ev = run_node_events(r);
        nodes_tick(r->nodes, mono_ms(), &ev);
    }
    if (r->nodes && !r->launched && !r->rdzv_failed) rendezvous_tick(r);
    if (r->external) end_silent_ranks(r);
}
