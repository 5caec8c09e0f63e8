/* draw_events.c — the events panel: rank-prefixed log of phase changes,
 * checkpoints, evals, warnings, errors and the outcome of every command,
 * newest at the bottom; scrolls back with Up/PgUp when focused. Repeats
 * come folded by the model (job_event_row_at): a row shows its newest
 * event and, before the text, how many it stands for ("×12").
 *
 * Owns: an event line's wording. Reads the Job's event rows. No curses.
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

/* The rows an event takes at width w: its time and who, then the text;
 * a hang's verdict and an error wrap under the text so that every word
 * can be read, other events stay one line (cut at the edge). */
static int event_rows(const JobEvent *e, int textw)
{
    if (e->level != EV_ERROR || textw < 10) return 1;
    int rows = 0;
    for (const char *p = e->text; *p && rows < 64; rows++) p += draw_wrap_next(p, textw);
    return rows ? rows : 1;
}

/* Columns the time and who take before an event's text. */
#define EVENT_INDENT 16

/* rows of the event from its row `from` on, at most `max`, from row y;
 * count > 1: the events a folded row stands for, said before its text. */
static void draw_event(DrawCtx *d, const JobEvent *e, int64_t count, int x, int y, int w, int from, int max)
{
    int textw = w - EVENT_INDENT;
    int st = e->level == EV_ERROR ? ST_ERR : e->level == EV_WARN ? ST_WARN : ST_NORMAL;
    if (event_rows(e, textw) == 1) {
        if (from > 0 || max < 1) return;
        int cx = x + canvas_put(d->cv, y, x, w, ST_DIM, event_when(e->t_ns));
        char who[16] = "ddptop ";
        if (e->rank >= 0) { /* "r%d " */
            who[0] = 'r';
            int len = 1 + numfmt_int(who + 1, sizeof who - 2, e->rank);
            who[len] = ' ';
            who[len + 1] = '\0';
        }
        cx += canvas_put(d->cv, y, cx, x + w - cx, e->rank < 0 ? ST_LABEL : ST_SERIES(e->rank), who);
        if (count > 1) {
            char times[24] = "\xc3\x97"; /* "×12 " ("x12 " on a terminal without UTF-8) */
            int sign = d->cv->utf8 ? 2 : 1;
            if (sign == 1) times[0] = 'x';
            int len = sign + numfmt_int(times + sign, sizeof times - 4, count);
            times[len] = ' ';
            times[len + 1] = '\0';
            cx += canvas_put(d->cv, y, cx, x + w - cx, ST_BOLD, times);
        }
        canvas_put(d->cv, y, cx, x + w - cx, st, e->text);
        return;
    }
    const char *p = e->text;
    for (int row = 0; *p && max > 0; row++) {
        int n = draw_wrap_next(p, textw);
        if (row >= from) {
            char piece[JOB_EVENT_TEXT];
            snprintf(piece, sizeof piece, "%.*s", n, p);
            if (row == 0) {
                canvas_put(d->cv, y, x, w, ST_DIM, event_when(e->t_ns));
                char who[16] = "ddptop";
                if (e->rank >= 0) snprintf(who, sizeof who, "r%d", e->rank);
                canvas_put(d->cv, y, x + 9, EVENT_INDENT - 9, e->rank < 0 ? ST_LABEL : ST_SERIES(e->rank), who);
            }
            canvas_put(d->cv, y, x + EVENT_INDENT, textw, st, piece);
            y++;
            max--;
        }
        p += n;
    }
}

/* Newest at the bottom; rank_filter >= 0 keeps one rank's events (the
 * detail page), else the panel's scroll position applies. An error
 * (a hang's verdict) wraps over as many rows as it needs; when the panel
 * is too short for the oldest shown, its first rows are the ones shown. */
void draw_events(DrawCtx *d, int x, int y, int w, int h, int rank_filter)
{
    const Job *j = d->j;
    if (h <= 0) return;
    const JobEventRow *pick[256];
    int rows[256];
    int n = 0, used = 0, skip = rank_filter < 0 ? d->ui->events_back : 0;
    if (rank_filter < 0) d->ui->events_rows = h;
    for (int i = 0; used < h && n < 256; i++) {
        const JobEventRow *e = job_event_row_at(j, i);
        if (!e) break;
        if (rank_filter >= 0 && e->e.rank != rank_filter) continue;
        if (skip > 0) {
            skip--;
            continue;
        }
        rows[n] = event_rows(&e->e, w - EVENT_INDENT);
        used += rows[n];
        pick[n++] = e;
    }
    if (n == 0) {
        canvas_put(d->cv, y, x, w, ST_DIM, "no events");
        return;
    }
    int row = y, left = h;
    for (int i = n - 1; i >= 0 && left > 0; i--) {
        /* the oldest shown may not fit whole: its first rows, then the newer ones whole */
        int show = i == n - 1 && used > h ? rows[i] - (used - h) : rows[i];
        if (show < 1) continue;
        draw_event(d, &pick[i]->e, pick[i]->count, x, row, w, 0, show);
        row += show;
        left -= show;
    }
}
