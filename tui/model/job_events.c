/* job_events.c — the events log and the rows the screen makes of it.
 *
 * Owns: the ring of the last JOB_EVENTS events (every one, in order: what
 * headless and --json print, what a hang's report rewrites in place) and
 * the ring of rows (JobEventRow): the same events with repeats folded, so a
 * script that checkpoints every epoch keeps one row for it and the warnings
 * and verdicts stay in view. Both are filled at once by every event, live,
 * replayed or attached, so every view of one job folds alike. Does not own
 * drawing or any clock. Main thread only.
 */
#include "model/job_priv.h"
#include "base/utf8.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void job_text_mend(char *s)
{
    /* a "%.200s" of a message cuts wherever its byte count ends: a UTF-8
     * character cut in two would reach the screen and --json as two bad
     * bytes. Such a cut leaves a lead byte with fewer continuation bytes
     * than it announces: those go. Any other ill-formed byte stays, for
     * the printers to mark as such. */
    unsigned char *in = (unsigned char *)s, *out = in;
    size_t n = strlen(s);
    while (*in) {
        size_t left = n - (size_t)(in - (unsigned char *)s);
        size_t k = *in < 0x80 ? 1 : utf8_seq(in, left);
        if (!k) {
            size_t need = *in >= 0xC2 && *in <= 0xDF ? 2 : *in >= 0xE0 && *in <= 0xEF ? 3 : *in >= 0xF0 && *in <= 0xF4 ? 4 : 0;
            size_t c = 0;
            while (need && c + 1 < need && c + 1 < left && (in[c + 1] & 0xC0) == 0x80) c++;
            if (need && c + 1 < need) { /* a prefix of a character, cut: drop it */
                in += c + 1;
                continue;
            }
            k = 1; /* ill-formed of its own: kept */
        }
        if (out != in) memmove(out, in, k);
        out += k;
        in += k;
    }
    *out = '\0';
}

/* ---- rows: repeats folded ---- */

/* An event's text as units: a byte, or one of these for what varies from
 * one repeat to the next (a step, a size and its unit, a duration, a path),
 * so that two events of one kind read the same. */
enum { UNIT_END = -1, UNIT_NUM = 256, UNIT_PATH = 257 };

typedef struct {
    const char *s, *p;
} Units;

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

/* A size or time unit right after a number ("3 ms", "1.1 MB", "2s"): its
 * length, 0 when none (a word such as "samples" is no unit). */
static int unit_word(const char *p)
{
    static const char *const words[] = { "B",   "kB", "KB", "MB", "GB", "TB",  "KiB", "MiB",
                                         "GiB", "ns", "us", "ms", "s",  "min", "h" };
    if (*p == ' ') p++;
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        size_t n = strlen(words[i]);
        if (!strncmp(p, words[i], n) && !is_alpha(p[n])) return (int)n + (p[-1] == ' ');
    }
    return 0;
}

static int unit_next(Units *u)
{
    const char *p = u->p;
    if (!*p) return UNIT_END;
    /* a word with a slash in it: a path (a checkpoint's file), masked whole */
    if (p == u->s || p[-1] == ' ') {
        const char *e = p;
        bool slash = false;
        while (*e && *e != ' ') slash |= *e++ == '/';
        if (slash) {
            u->p = e;
            return UNIT_PATH;
        }
    }
    if (is_digit(*p)) {
        while (is_digit(*p) || ((*p == '.' || *p == ',' || *p == ':') && is_digit(p[1]))) p++;
        p += unit_word(p);
        u->p = p;
        return UNIT_NUM;
    }
    u->p = p + 1;
    return (unsigned char)*p;
}

/* FNV-1a of the event's rank, level and units. */
static uint64_t shape_of(const JobEvent *e)
{
    uint64_t h = 1469598103934665603ULL;
    int head[2] = { e->rank, (int)e->level };
    for (int i = 0; i < 2; i++) h = (h ^ (uint64_t)(uint32_t)head[i]) * 1099511628211ULL;
    Units u = { e->text, e->text };
    for (int c; (c = unit_next(&u)) != UNIT_END;) h = (h ^ (uint64_t)c) * 1099511628211ULL;
    return h;
}

/* Do a and b read alike but for their numbers and paths? (The hash found
 * the candidate; this makes a fold exact.) */
static bool same_shape(const JobEvent *a, const JobEvent *b)
{
    if (a->rank != b->rank || a->level != b->level) return false;
    Units x = { a->text, a->text }, y = { b->text, b->text };
    for (;;) {
        int c = unit_next(&x);
        if (c != unit_next(&y)) return false;
        if (c == UNIT_END) return true;
    }
}

static JobEventRow *row_slot(JobBook *b, uint64_t i) { return &b->rows[(b->rows_total - 1 - i) % JOB_EVENTS]; }

/* Event number ev (just added) joins the rows: folded into a recent row of
 * its shape, which moves to the newest place, or a row of its own. */
static void rows_add(Job *j, const JobEvent *e, uint64_t ev)
{
    JobBook *b = j->book;
    uint64_t shape = shape_of(e);
    uint64_t kept = b->rows_total < JOB_EVENTS ? b->rows_total : JOB_EVENTS;
    if (e->level == EV_INFO) {
        for (uint64_t i = 0; i < kept && i < JOB_FOLD_RECENT; i++) {
            JobEventRow *r = row_slot(b, i);
            if (r->shape != shape || r->e.level != EV_INFO || !same_shape(&r->e, e)) continue;
            int64_t count = r->count + 1;
            /* the rows newer than it move down one place */
            for (; i > 0; i--) *row_slot(b, i) = *row_slot(b, i - 1);
            r = row_slot(b, 0);
            r->e = *e;
            r->ev = ev;
            r->count = count;
            r->shape = shape;
            return;
        }
    }
    b->rows_total++;
    JobEventRow *r = row_slot(b, 0);
    r->e = *e;
    r->ev = ev;
    r->count = 1;
    r->shape = shape;
}

/* Event n was rewritten in place: so is its row, when n is still a row's newest. */
static void rows_update(Job *j, uint64_t n, const JobEvent *e)
{
    JobBook *b = j->book;
    uint64_t kept = b->rows_total < JOB_EVENTS ? b->rows_total : JOB_EVENTS;
    for (uint64_t i = 0; i < kept; i++) {
        JobEventRow *r = row_slot(b, i);
        if (r->ev < n) return; /* rows are in the order of their newest events */
        if (r->ev == n) {
            r->e = *e;
            r->shape = shape_of(e);
            return;
        }
    }
}

const JobEventRow *job_event_row_at(const Job *j, int i)
{
    if (!j || i < 0 || (uint64_t)i >= (uint64_t)job_event_rows(j)) return NULL;
    return row_slot(j->book, (uint64_t)i);
}

int job_event_rows(const Job *j)
{
    if (!j) return 0;
    return (int)(j->book->rows_total < JOB_EVENTS ? j->book->rows_total : JOB_EVENTS);
}

static void ev_addv(Job *j, JobTime at, int rank, JobEventLevel level, const char *fmt, va_list ap)
{
    JobEvent *e = &j->book->events[j->ev_total % JOB_EVENTS];
    e->t_ns = at.wall_ns;
    e->mono_ns = at.mono_ns;
    e->rank = rank;
    e->level = level;
    vsnprintf(e->text, sizeof e->text, fmt, ap);
    job_text_mend(e->text);
    rows_add(j, e, j->ev_total);
    j->ev_total++;
    j->version++;
}

/* Events caused by a message carry the message's arrival time, so a test
 * (or a replay) with its own clock gets consistent timestamps. */
void job_ev_add(Job *j, JobTime at, int rank, JobEventLevel level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ev_addv(j, at, rank, level, fmt, ap);
    va_end(ap);
}

void job_event(Job *j, int64_t now_ns, int64_t wall_ns, int rank, JobEventLevel level, const char *fmt, ...)
{
    if (!j) return;
    va_list ap;
    va_start(ap, fmt);
    ev_addv(j, (JobTime){ now_ns, wall_ns }, rank, level, fmt, ap);
    va_end(ap);
}

const JobEvent *job_event_at(const Job *j, int i)
{
    if (!j || i < 0) return NULL;
    uint64_t kept = j->ev_total < JOB_EVENTS ? j->ev_total : JOB_EVENTS;
    if ((uint64_t)i >= kept) return NULL;
    return &j->book->events[(j->ev_total - 1 - (uint64_t)i) % JOB_EVENTS];
}

const JobEvent *job_event_nth(const Job *j, uint64_t n)
{
    if (!j || n >= j->ev_total || j->ev_total - n > JOB_EVENTS) return NULL;
    return &j->book->events[n % JOB_EVENTS];
}

bool job_event_update(Job *j, uint64_t n, JobEventLevel level, const char *fmt, ...)
{
    if (!j || n >= j->ev_total || j->ev_total - n > JOB_EVENTS) return false;
    JobEvent *e = &j->book->events[n % JOB_EVENTS];
    e->level = level;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->text, sizeof e->text, fmt, ap);
    job_text_mend(e->text);
    va_end(ap);
    rows_update(j, n, e);
    j->version++;
    return true;
}
