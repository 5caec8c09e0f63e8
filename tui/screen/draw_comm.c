/* draw_comm.c — the all-reduce panel: how much of a step is communication
 * and how much of it backward hid, each gradient bucket's transfer time over
 * the run with its wait and bandwidths (nccl-tests' figures, from the
 * transfer alone: job_coll_times), and the recent collectives with theirs
 * and the rank that arrived last (the straggler) and by how much — or, for
 * one still open,
 * which ranks everybody is waiting for (or, once they ended, that it never
 * completed); for a big job, the rank that came last most often.
 *
 * Owns: the panel's wording. Reads the Job. No curses. Main thread.
 */
#include "screen/draw.h"

#include <stdio.h>
#include <string.h>

int draw_comm_want(const DrawCtx *d)
{
    int b = d->j->n_buckets > 0 ? d->j->n_buckets : 1;
    return 1 + b + 4;
}

/* A big job: the rank that came last most often, when one does (a quarter
 * of the finished collectives, four at least); false when none stands out. */
static bool draw_last_in(DrawCtx *d, int x, int y, int w)
{
    int rank, times, of;
    double late;
    job_colls_last_in(d->j, &rank, &times, &of, &late);
    if (rank < 0 || times < 4 || times * 4 < of) return false;
    int cx = x + canvas_put(d->cv, y, x, w, ST_LABEL, "last in most often ");
    cx += canvas_printf(d->cv, y, cx, x + w - cx, ST_WARN, "r%d", rank);
    canvas_printf(d->cv, y, cx, x + w - cx, ST_NORMAL, ": %d of the last %d collectives, %.2f ms after the others",
                  times, of, late);
    return true;
}

/* "r1 r5 r9 +3" — the ranks that have not reached collective c. */
static void missing_ranks(const Job *j, const JobColl *c, char *out, size_t n)
{
    size_t len = 0;
    int shown = 0, missing = 0;
    out[0] = '\0';
    for (int r = 0; r < j->world; r++) {
        if (job_coll_arrived(j, c, r)) continue;
        missing++;
        if (shown < 4 && len + 12 < n) {
            len += (size_t)snprintf(out + len, n - len, "%sr%d", shown ? " " : "", r);
            shown++;
        }
    }
    if (missing > shown && len + 12 < n) snprintf(out + len, n - len, " +%d", missing - shown);
}

static void draw_coll(DrawCtx *d, const JobColl *c, int x, int y, int w)
{
    const Job *j = d->j;
    char head[96], bk[16] = "";
    if (c->bucket >= 0) snprintf(bk, sizeof bk, " b%d", (int)c->bucket);
    snprintf(head, sizeof head, "#%-6lld %-9.9s%-4s step %-6lld", (long long)c->seq, c->op[0] ? c->op : "?", bk,
             (long long)c->step);
    int cx = x + canvas_put(d->cv, y, x, w, ST_NORMAL, head);
    int end = x + w;
    if (c->arrived < j->world) {
        char miss[80];
        missing_ranks(j, c, miss, sizeof miss);
        /* once those who came or those awaited have ended, nobody waits:
         * a frozen "waiting 10.2s" on a replay's last frame would say so */
        bool missing_ended = true, someone_waits = false;
        for (int r = 0; r < j->world; r++) {
            bool ended = j->ranks[r].state == RANK_EXITED_OK || j->ranks[r].state == RANK_FAILED;
            if (job_coll_arrived(j, c, r))
                someone_waits |= !ended;
            else
                missing_ended &= ended;
        }
        if (missing_ended || !someone_waits) {
            if (missing_ended)
                canvas_printf(d->cv, y, cx, end - cx, ST_DIM, " %d/%d in, never completed: %s ended without it",
                              c->arrived, j->world, miss);
            else
                canvas_printf(d->cv, y, cx, end - cx, ST_DIM,
                              " %d/%d in, never completed: the ranks in it ended waiting for %s", c->arrived, j->world,
                              miss);
            return;
        }
        double waited = (double)(d->wall_ns - c->first_ns) / 1e9;
        canvas_printf(d->cv, y, cx, end - cx, ST_WARN, " %d/%d in, waiting %.1fs for %s", c->arrived, j->world, waited,
                      miss);
        return;
    }
    JobCollTimes tm;
    if (!job_coll_times(j, c, &tm)) {
        /* every rank in, not every rank done: still moving, or never will */
        bool all_ended = true;
        for (int r = 0; r < j->world; r++)
            all_ended &= j->ranks[r].state == RANK_EXITED_OK || j->ranks[r].state == RANK_FAILED;
        if (all_ended)
            canvas_printf(d->cv, y, cx, end - cx, ST_DIM, " all in, %d/%d done, never completed", c->done, j->world);
        else
            canvas_printf(d->cv, y, cx, end - cx, c->done ? ST_NORMAL : ST_WARN, " all in, %d/%d done, in flight %.1fs",
                          c->done, j->world, (double)(d->wall_ns - c->last_ns) / 1e9);
        return;
    }
    char ms[24];
    draw_fmt_fit(ms, sizeof ms, 7, tm.xfer_ms, 2);
    cx += canvas_printf(d->cv, y, cx, end - cx, ST_NORMAL, " xfer %7s ms", ms);
    if (j->world < 2) return;
    double late = (double)(c->last_ns - c->prev_last_ns) / 1e6;
    double spread = (double)(c->last_ns - c->first_ns) / 1e6;
    if (tm.algbw_gbs > 0)
        cx += canvas_printf(d->cv, y, cx, end - cx, ST_NORMAL, "  algbw %.2f busbw %.2f GB/s", tm.algbw_gbs,
                            tm.busbw_gbs);
    if (spread < 0.005 && tm.wait_ms < 0.005) {
        canvas_put(d->cv, y, cx, end - cx, ST_DIM, "  all in together");
        return;
    }
    /* a straggler worth naming stands out in colour */
    int st = spread >= 1.0 && spread >= 0.25 * tm.xfer_ms ? ST_WARN : ST_NORMAL;
    cx += canvas_printf(d->cv, y, cx, end - cx, st, "  last in r%d +%.2f ms", c->last_rank, late);
    canvas_printf(d->cv, y, cx, end - cx, ST_DIM, " (wait %.2f ms)", tm.wait_ms);
}

void draw_comm(DrawCtx *d, int x, int y, int w, int h)
{
    const Job *j = d->j;
    Ui *u = d->ui;
    Canvas *cv = d->cv;
    int row = y, end = y + h;
    if (h <= 0) return;
    double cf, ef, hf, cms, ems;
    if (job_comm_share(j, &cf, &ef, &hf, &cms, &ems)) {
        int cx = x + canvas_put(cv, row, x, w, ST_LABEL, "comm ");
        cx += canvas_printf(cv, row, cx, x + w - cx, ST_BOLD, "%.0f%%", cf * 100);
        cx += canvas_put(cv, row, cx, x + w - cx, ST_LABEL, " of step  exposed ");
        cx += canvas_printf(cv, row, cx, x + w - cx, ST_BOLD, "%.2f/%.2f ms", ems, cms);
        cx += canvas_printf(cv, row, cx, x + w - cx, ST_LABEL, " (%.0f%% of step)  hidden behind backward ", ef * 100);
        canvas_printf(cv, row, cx, x + w - cx, ST_BOLD, "%.0f%%", hf * 100);
    } else {
        canvas_put(cv, row, x, w, ST_DIM, "no steps yet");
    }
    row++;
    /* the persistent straggler of a big job, when rows allow */
    if (d->sum && h >= 4 && draw_last_in(d, x, row, w)) row++;
    /* buckets: figures then the latency over the run, newest right; one
     * row stays for the newest collective (its straggler) when any */
    const JobColl *all[JOB_COLL_RING], *list[JOB_COLL_RING];
    int n_all = job_colls_recent(j, all, JOB_COLL_RING), n = 0;
    /* reports trickle in for a few ms: one not everybody reached yet is
     * news only after a second (a possible hang) */
    for (int i = 0; i < n_all; i++)
        if (all[i]->arrived >= j->world || d->wall_ns - all[i]->first_ns >= 1000000000LL) list[n++] = all[i];
    int bucket_end = n > 0 ? end - 1 : end;
    int nb = 0;
    for (int b = 0; b < j->n_buckets && row < bucket_end; b++) {
        const JobBucket *k = &j->buckets[b];
        if (!k->used) continue;
        nb++;
        char bytes[24], xfer[24], wait[24];
        draw_fmt_bytes(bytes, sizeof bytes, (double)k->bytes);
        JobCollTimes tm;
        bool full = job_bucket_times(j, b, &tm);
        draw_fmt_fit(xfer, sizeof xfer, 7, tm.xfer_ms, 2);
        draw_fmt_fit(wait, sizeof wait, 7, tm.wait_ms, 2);
        int cx = x + canvas_printf(cv, row, x, w, ST_LABEL, "b%d%s", b, b == JOB_MAX_BUCKETS - 1 ? "+" : "");
        if (!full) /* no step every rank reported yet: no transfer to tell */
            cx += canvas_printf(cv, row, cx, x + w - cx, ST_DIM, " %8s  no step reported by every rank yet ", bytes);
        else if (j->world == 1) /* an all-reduce of one rank moves no data: no bandwidth to speak of */
            cx += canvas_printf(cv, row, cx, x + w - cx, ST_NORMAL, " %8s xfer %7s ms  bandwidth n/a (1 rank) ", bytes,
                                xfer);
        else
            cx += canvas_printf(cv, row, cx, x + w - cx, ST_NORMAL,
                                " %8s xfer %7s ms wait %7s ms  algbw %6.2f busbw %6.2f GB/s ", bytes, xfer, wait,
                                tm.algbw_gbs, tm.busbw_gbs);
        int sw = x + w - cx;
        if (sw > 2) draw_spark_series_put(d, row, cx, sw, ST_SERIES(b), &k->ms, sw > 200 ? 200 : sw, true);
        row++;
    }
    if (nb == 0 && row < bucket_end) canvas_put(cv, row++, x, w, ST_DIM, "no gradient all-reduce yet");
    /* recent collectives, newest first */
    if (row >= end) return;
    u->comm_rows = end - row;
    if (u->comm_top > n - 1) u->comm_top = n > 0 ? n - 1 : 0;
    if (n == 0) {
        canvas_put(cv, row, x, w, ST_DIM, "no collective yet");
        return;
    }
    for (int i = u->comm_top; i < n && row < end; i++) draw_coll(d, list[i], x, row++, w);
}
