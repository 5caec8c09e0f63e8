/* draw_events.c — the events panel: rank-prefixed log of phase changes,
 * checkpoints, evals, warnings, errors and the outcome of every command,
 * newest at the bottom; scrolls back with Up/PgUp when focused.
 *
 * Owns: an event line's wording. Reads the Job's events ring. No curses.
 * Main thread.
 */
#include "screen/draw.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "screen/numfmt.h"

/* An event's time, "HH:MM:SS " (local time). localtime_r and strftime were
 * most of an event row's cost and a panel's events share a few seconds:
 * the last ones formatted are kept by their second, which formats the same
 * while the time zone does (glibc's localtime_r reads TZ once; ddptop never
 * sets it). Main thread. */
#define WHEN_MEMO 16
static struct {
    bool used;
    time_t secs;
    char text[16];
} when_memo[WHEN_MEMO];

static const char *event_when(int64_t t_ns)
{
    time_t secs = (time_t)(t_ns / 1000000000LL);
    unsigned slot = (unsigned)((uint64_t)secs % WHEN_MEMO);
    if (when_memo[slot].used && when_memo[slot].secs == secs) return when_memo[slot].text;
    char when[16] = "--:--:--";
    struct tm tm;
    if (localtime_r(&secs, &tm)) strftime(when, sizeof when, "%H:%M:%S", &tm);
    /* what "%s " made of it */
    snprintf(when_memo[slot].text, sizeof when_memo[slot].text, "%s ", when);
    when_memo[slot].secs = secs;
    when_memo[slot].used = true;
    return when_memo[slot].text;
}

static void draw_event(DrawCtx *d, const JobEvent *e, int x, int y, int w)
{
    int cx = x + canvas_put(d->cv, y, x, w, ST_DIM, event_when(e->t_ns));
    char who[16] = "ddptop ";
    if (e->rank >= 0) { /* "r%d " */
        who[0] = 'r';
        int len = 1 + numfmt_int(who + 1, sizeof who - 2, e->rank);
        who[len] = ' ';
        who[len + 1] = '\0';
    }
    cx += canvas_put(d->cv, y, cx, x + w - cx, e->rank < 0 ? ST_LABEL : ST_SERIES(e->rank), who);
    int st = e->level == EV_ERROR ? ST_ERR : e->level == EV_WARN ? ST_WARN : ST_NORMAL;
    canvas_put(d->cv, y, cx, x + w - cx, st, e->text);
}

/* Newest at the bottom; rank_filter >= 0 keeps one rank's events (the
 * detail page), else the panel's scroll position applies. */
void draw_events(DrawCtx *d, int x, int y, int w, int h, int rank_filter)
{
    const Job *j = d->j;
    if (h <= 0) return;
    const JobEvent *pick[256];
    int n = 0, skip = rank_filter < 0 ? d->ui->events_back : 0;
    if (rank_filter < 0) d->ui->events_rows = h;
    for (int i = 0; n < h && n < 256; i++) {
        const JobEvent *e = job_event_at(j, i);
        if (!e) break;
        if (rank_filter >= 0 && e->rank != rank_filter) continue;
        if (skip > 0) {
            skip--;
            continue;
        }
        pick[n++] = e;
    }
    if (n == 0) {
        canvas_put(d->cv, y, x, w, ST_DIM, "no events");
        return;
    }
    for (int i = 0; i < n; i++) draw_event(d, pick[n - 1 - i], x, y + i, w);
}
