/* view_tui.c — the interactive ncurses screen: title, job header, a row per
 * rank, recent events, a status line and key hints; and key mapping.
 *
 * Owns: the curses SCREEN and its colours. Reads the Job, never changes it.
 * Main thread only; never called from a signal handler (resize arrives as
 * KEY_RESIZE through view_tui_poll_key).
 *
 * Every row is formatted into a char buffer first and written with put(),
 * which clips to the screen by display columns, so nothing lands past an
 * edge whatever the text or terminal size. A frame is erase + draw + one
 * refresh; curses sends only the difference, so there is no flicker.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#ifndef _XOPEN_SOURCE_EXTENDED
#define _XOPEN_SOURCE_EXTENDED 1
#endif
#ifndef NCURSES_WIDECHAR
#define NCURSES_WIDECHAR 1
#endif
#include "view.h"

#include <fcntl.h>
#include <langinfo.h>
#include <math.h>
#include <ncurses.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>

#define MIN_W 60
#define MIN_H 12
/* Fixed part of a rank row: a marker column, then ROW_FMT; under
 * WIDE_MIN columns the PID goes (ROW_FMT_NARROW) so ALLRED_MS and some of
 * the note still fit. */
#define ROW_FMT "%4s %7s %-10.10s %5s %7s %8s %7s %9s"
#define ROW_FMT_NARROW "%4s %-10.10s %5s %7s %8s %7s %9s"
#define TABLE_X 1
#define TABLE_W 64
#define TABLE_W_NARROW 56
#define WIDE_MIN (TABLE_X + TABLE_W + 1 + 12)
#define SPARK_MAX 40

typedef struct {
    const char *hline;
    const char *spark[8];
    const char *bar_full, *bar_empty;
    const char *ellipsis;
    const char *mark_fail, *mark_ok, *mark_stale;
} Glyphs;

static const Glyphs glyphs_utf8 = {
    "─", {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"}, "█", "░", "…", "✗", "✓", "!",
};
/* Without a UTF-8 locale those would vanish or garble: plain ASCII. */
static const Glyphs glyphs_ascii = {
    "-", {"_", ".", ",", "-", "~", "=", "*", "#"}, "#", ".", "...", "x", "+", "!",
};

enum {
    CP_OK = 1, CP_WARN, CP_ERR, CP_HEAD, CP_TITLE,
    CP_BADGE_INFO, CP_BADGE_OK, CP_BADGE_WARN, CP_BADGE_ERR,
};

struct ViewTui {
    SCREEN *scr;
    FILE *tty;                       /* /dev/tty when stdin/stdout are not the terminal */
    bool utf8, color;
    bool clear_next;                 /* Ctrl-L: repaint everything next frame */
    const Glyphs *g;
};

/* ---- open / close / keys ---- */

static void set_err(char *err, size_t errlen, const char *msg)
{
    if (err && errlen)
        snprintf(err, errlen, "%s", msg);
}

int view_tui_open(ViewTui **out, char *err, size_t errlen)
{
    *out = NULL;
    const char *term = getenv("TERM");
    if (!term || !*term) {
        set_err(err, errlen, "TERM is not set");
        return -1;
    }
    ViewTui *v = calloc(1, sizeof *v);
    if (!v) {
        set_err(err, errlen, "out of memory");
        return -1;
    }
    FILE *in = stdin, *outf = stdout;
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
        /* stdout sent to a file (for the summary) or stdin piped: draw on
         * the controlling terminal, as fzf and less do; none means no screen */
        int fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
        v->tty = fd >= 0 ? fdopen(fd, "r+") : NULL;
        if (!v->tty) {
            if (fd >= 0)
                close(fd);
            set_err(err, errlen, "not a terminal");
            free(v);
            return -1;
        }
        in = outf = v->tty;
    }
    /* newterm, not initscr: initscr exits the process on an unknown TERM */
    v->scr = newterm(NULL, outf, in);
    if (!v->scr) {
        if (err && errlen)
            snprintf(err, errlen, "unknown terminal type '%.40s'", term);
        if (v->tty)
            fclose(v->tty);
        free(v);
        return -1;
    }
    set_term(v->scr);
    const char *cs = nl_langinfo(CODESET);
    v->utf8 = cs && (strcasecmp(cs, "UTF-8") == 0 || strcasecmp(cs, "utf8") == 0);
    v->g = v->utf8 ? &glyphs_utf8 : &glyphs_ascii;
    const char *nc = getenv("NO_COLOR");
    v->color = !(nc && *nc) && has_colors();
    if (v->color) {
        start_color();
        short bg = use_default_colors() == OK ? -1 : COLOR_BLACK;
        init_pair(CP_OK, COLOR_GREEN, bg);
        init_pair(CP_WARN, COLOR_YELLOW, bg);
        init_pair(CP_ERR, COLOR_RED, bg);
        init_pair(CP_HEAD, COLOR_CYAN, bg);
        init_pair(CP_TITLE, COLOR_BLACK, COLOR_CYAN);
        init_pair(CP_BADGE_INFO, COLOR_WHITE, COLOR_BLUE);
        init_pair(CP_BADGE_OK, COLOR_BLACK, COLOR_GREEN);
        init_pair(CP_BADGE_WARN, COLOR_BLACK, COLOR_YELLOW);
        init_pair(CP_BADGE_ERR, COLOR_WHITE, COLOR_RED);
    }
    noecho();
    cbreak();
    keypad(stdscr, TRUE);
    nodelay(stdscr, TRUE);
    curs_set(0);                     /* some terminals cannot: not an error */
    *out = v;
    return 0;
}

void view_tui_close(ViewTui **pv)
{
    if (!pv || !*pv)
        return;
    ViewTui *v = *pv;
    set_term(v->scr);
    curs_set(1);
    endwin();
    delscreen(v->scr);
    if (v->tty)
        fclose(v->tty);
    free(v);
    *pv = NULL;
}

ViewAction view_tui_poll_key(ViewTui *v)
{
    if (!v)
        return VIEW_ACT_NONE;
    int ch;
    /* return at the first key that means something; the rest stay queued
     * for the next call */
    while ((ch = getch()) != ERR) {
        switch (ch) {
        case 'c': case 'C': return VIEW_ACT_CKPT;
        case 'd': case 'D': return VIEW_ACT_DESTROY;
        case 'q': case 'Q': return VIEW_ACT_QUIT;
        case KEY_RESIZE: return VIEW_ACT_REDRAW;
        case 'L' & 0x1f:
            v->clear_next = true;
            return VIEW_ACT_REDRAW;
        default: break;
        }
    }
    return VIEW_ACT_NONE;
}

/* ---- writing text ---- */

static attr_t pick(const ViewTui *v, int pair, attr_t mono)
{
    return v->color ? (attr_t)COLOR_PAIR(pair) : mono;
}

/* Write UTF-8 text at (y, x), at most maxw columns (and never past the
 * right edge, nor into the bottom-right cell, where curses would scroll).
 * Bytes that are not valid, control characters and, without UTF-8, any
 * non-ASCII character become '?'. Returns the columns written. */
static int put(const ViewTui *v, int y, int x, int maxw, attr_t a, const char *s)
{
    int h, w;
    getmaxyx(stdscr, h, w);
    if (y < 0 || y >= h || x < 0 || x >= w || !s)
        return 0;
    int lim = w - x - (y == h - 1 ? 1 : 0);
    if (maxw < lim)
        lim = maxw;
    if (lim <= 0)
        return 0;
    wchar_t wb[1024];
    int n = 0, cols = 0;
    mbstate_t st;
    memset(&st, 0, sizeof st);
    size_t left = strlen(s);
    while (left > 0 && n < (int)(sizeof wb / sizeof wb[0]) - 1) {
        wchar_t wc;
        size_t k = mbrtowc(&wc, s, left, &st);
        if (k == 0)
            break;
        if (k == (size_t)-1 || k == (size_t)-2) {
            wc = L'?';
            k = 1;
            memset(&st, 0, sizeof st);
        }
        if (wc == L'\n' || wc == L'\t' || wc == L'\r')
            wc = L' ';
        if (!v->utf8 && wc > 0x7e)
            wc = L'?';
        int cw = wcwidth(wc);
        if (cw < 0) {
            wc = L'?';
            cw = 1;
        }
        s += k;
        left -= k;
        if (cw == 0)
            continue;                /* combining marks: dropped, never misplaced */
        if (cols + cw > lim)
            break;
        wb[n++] = wc;
        cols += cw;
    }
    wb[n] = L'\0';
    attrset(a);
    mvaddnwstr(y, x, wb, n);
    attrset(A_NORMAL);
    return cols;
}

/* Display columns of UTF-8 text (as put would draw it, unclipped). */
static int text_width(const char *s)
{
    int cols = 0;
    mbstate_t st;
    memset(&st, 0, sizeof st);
    size_t left = strlen(s);
    while (left > 0) {
        wchar_t wc;
        size_t k = mbrtowc(&wc, s, left, &st);
        if (k == 0)
            break;
        if (k == (size_t)-1 || k == (size_t)-2) {
            k = 1;
            wc = L'?';
            memset(&st, 0, sizeof st);
        }
        int cw = wcwidth(wc);
        cols += cw < 0 ? 1 : cw;
        s += k;
        left -= k;
    }
    return cols;
}

/* Fill a whole row with blanks in attribute a (bars: title, table head). */
static void fill_row(int y, attr_t a)
{
    int h, w;
    getmaxyx(stdscr, h, w);
    if (y < 0 || y >= h)
        return;
    attrset(a);
    mvhline(y, 0, ' ', y == h - 1 ? w - 1 : w);
    attrset(A_NORMAL);
}

/* A number in at most `width` characters: fewer decimals, then %g. */
static void fmt_fit(char *buf, size_t n, int width, double x, int decimals)
{
    if (isnan(x)) {
        snprintf(buf, n, "nan");
        return;
    }
    if (isinf(x)) {
        snprintf(buf, n, x > 0 ? "inf" : "-inf");
        return;
    }
    for (int d = decimals; d >= 0; d--) {
        snprintf(buf, n, "%.*f", d, x);
        if ((int)strlen(buf) <= width)
            return;
    }
    snprintf(buf, n, "%.*g", width > 6 ? width - 5 : 1, x);
}

static void fmt_hms(char *buf, size_t n, int64_t ns)
{
    long long s = ns > 0 ? ns / 1000000000LL : 0;
    snprintf(buf, n, "%02lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
}

static void fmt_count(char *buf, size_t n, int64_t x)
{
    if (x >= 1000000000)
        snprintf(buf, n, "%.2fG", (double)x / 1e9);
    else if (x >= 1000000)
        snprintf(buf, n, "%.2fM", (double)x / 1e6);
    else if (x >= 10000)
        snprintf(buf, n, "%.1fk", (double)x / 1e3);
    else
        snprintf(buf, n, "%lld", (long long)x);
}

static const char *or_dash(const char *s)
{
    return s && *s ? s : "-";
}

/* ---- sections ---- */

static const char *state_text(const Job *j)
{
    return job_state_name(j->state);
}

static int state_pair(JobState s)
{
    switch (s) {
    case JOB_RUNNING: return CP_BADGE_OK;
    case JOB_DONE: return CP_BADGE_OK;
    case JOB_STOPPING: return CP_BADGE_WARN;
    case JOB_FAILED: return CP_BADGE_ERR;
    default: return CP_BADGE_INFO;
    }
}

static void draw_title(const ViewTui *v, const Job *j, int64_t now_ns, int w)
{
    attr_t bar = pick(v, CP_TITLE, A_REVERSE);
    fill_row(0, bar);
    int x = put(v, 0, 0, w, bar | A_BOLD, " ddptop ");
    char buf[64];
    snprintf(buf, sizeof buf, " %s ", state_text(j));
    x += put(v, 0, x + 1, w, v->color ? (attr_t)COLOR_PAIR(state_pair(j->state)) | A_BOLD : A_BOLD, buf) + 1;
    snprintf(buf, sizeof buf, "  %d/%d ranks alive", job_alive(j), j->world);
    x += put(v, 0, x, w, bar, buf);
    char el[32];
    fmt_hms(el, sizeof el, now_ns - j->start_ns);
    snprintf(buf, sizeof buf, "elapsed %s ", el);
    int bw = text_width(buf);
    if (w - bw > x + 1)
        put(v, 0, w - bw, bw, bar, buf);
}

typedef struct {
    const char *label;
    char value[160];
    bool brk;                        /* start a new line before this one */
} Seg;

/* Lay label/value pairs out left to right, wrapping, in at most maxlines
 * lines from y. Returns the lines used. */
static int flow(const ViewTui *v, int y, int maxlines, int w, const Seg *segs, int n)
{
    int line = 0, x = 0;
    attr_t la = pick(v, CP_HEAD, A_NORMAL);
    for (int i = 0; i < n; i++) {
        int sw = text_width(segs[i].label) + 1 + text_width(segs[i].value);
        if (x > 0 && (segs[i].brk || x + 2 + sw > w)) {
            line++;
            x = 0;
        }
        if (line >= maxlines)
            break;
        if (x > 0)
            x += 2;
        x += put(v, y + line, x, w - x, la, segs[i].label);
        x += put(v, y + line, x, w - x, A_NORMAL, " ");
        x += put(v, y + line, x, w - x, A_BOLD, segs[i].value);
    }
    return x > 0 || line > 0 ? line + 1 : 0;
}

static int draw_header(const ViewTui *v, const Job *j, int y, int maxlines, int w)
{
    Seg s[16];
    int n = 0;
    memset(s, 0, sizeof s);
    /* progress first: on a short terminal the identity is what gets cut */
    s[n].label = "epoch";
    snprintf(s[n++].value, sizeof s[0].value, "%lld", (long long)j->epoch);
    s[n].label = "step";
    if (j->max_steps > 0)
        snprintf(s[n++].value, sizeof s[0].value, "%lld/%lld", (long long)j->step, (long long)j->max_steps);
    else
        snprintf(s[n++].value, sizeof s[0].value, "%lld", (long long)j->step);
    s[n].label = "samples/s";
    snprintf(s[n++].value, sizeof s[0].value, "%.0f", j->samples_per_s);
    s[n].label = "drops";
    snprintf(s[n++].value, sizeof s[0].value, "%llu", (unsigned long long)j->drops);
    s[n].label = "bad frames";
    snprintf(s[n++].value, sizeof s[0].value, "%llu", (unsigned long long)j->bad_frames);
    if (j->ckpts > 0) {
        s[n].label = "ckpt";
        snprintf(s[n++].value, sizeof s[0].value, "step %lld", (long long)j->last_ckpt_step);
    }
    s[n].label = "backend";
    s[n].brk = true;
    snprintf(s[n++].value, sizeof s[0].value, "%s", or_dash(j->backend));
    s[n].label = "device";
    snprintf(s[n++].value, sizeof s[0].value, "%s", or_dash(j->device));
    s[n].label = "world";
    snprintf(s[n++].value, sizeof s[0].value, "%d", j->world);
    s[n].label = "dataset";
    if (j->dataset_size > 0)
        snprintf(s[n++].value, sizeof s[0].value, "%.60s (%lld)", or_dash(j->dataset), (long long)j->dataset_size);
    else
        snprintf(s[n++].value, sizeof s[0].value, "%.60s", or_dash(j->dataset));
    s[n].label = "model";
    snprintf(s[n++].value, sizeof s[0].value, "%.120s", or_dash(j->model));
    s[n].label = "params";
    if (j->params > 0)
        fmt_count(s[n++].value, sizeof s[0].value, j->params);
    else
        snprintf(s[n++].value, sizeof s[0].value, "-");
    if (j->batch_size > 0) {
        s[n].label = "batch";
        snprintf(s[n++].value, sizeof s[0].value, "%lld/rank", (long long)j->batch_size);
    }
    return flow(v, y, maxlines, w, s, n);
}

static void draw_progress_bar(const ViewTui *v, const Job *j, int y, int w)
{
    double frac = j->max_steps > 0 ? (double)j->step / (double)j->max_steps : 0;
    if (frac < 0)
        frac = 0;
    if (frac > 1)
        frac = 1;
    char tail[64] = "";
    double world_batch = (double)j->batch_size * j->world;
    if (j->state == JOB_RUNNING && j->samples_per_s > 0 && world_batch > 0 && j->step < j->max_steps) {
        double steps_per_s = j->samples_per_s / world_batch;
        char eta[32];
        fmt_hms(eta, sizeof eta, (int64_t)((double)(j->max_steps - j->step) / steps_per_s * 1e9));
        snprintf(tail, sizeof tail, "  eta %s", eta);
    }
    char pct[96];
    snprintf(pct, sizeof pct, " %5.1f%%%s", frac * 100, tail);
    int bw = w - 2 - text_width(pct) - 1;
    if (bw > 60)
        bw = 60;
    if (bw < 5)
        return;
    char bar[60 * 4 + 8];
    int full = (int)(frac * bw + 0.5), len = 0;
    bar[len++] = '[';
    for (int i = 0; i < bw; i++) {
        const char *gl = i < full ? v->g->bar_full : v->g->bar_empty;
        size_t gl_len = strlen(gl);
        memcpy(bar + len, gl, gl_len);
        len += (int)gl_len;
    }
    bar[len++] = ']';
    bar[len] = '\0';
    int x = put(v, y, 0, w, pick(v, CP_OK, A_BOLD), bar);
    put(v, y, x, w - x, A_NORMAL, pct);
}

/* Recent losses as a sparkline of `width` glyphs, oldest left. */
static void sparkline(const ViewTui *v, const JobRank *r, int width, char *out, size_t n)
{
    out[0] = '\0';
    int k = r->ring_len < width ? r->ring_len : width;
    if (k < 2)
        return;
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < k; i++) {
        double x = job_rank_step_at(r, i)->loss;
        if (isfinite(x)) {
            lo = x < lo ? x : lo;
            hi = x > hi ? x : hi;
        }
    }
    size_t len = 0;
    for (int i = k - 1; i >= 0; i--) {
        double x = job_rank_step_at(r, i)->loss;
        const char *gl;
        if (!isfinite(x))
            gl = "?";
        else if (hi - lo < 1e-12)
            gl = v->g->spark[3];
        else
            gl = v->g->spark[(int)((x - lo) / (hi - lo) * 7 + 0.5)];
        size_t gl_len = strlen(gl);
        if (len + gl_len + 1 > n)
            break;
        memcpy(out + len, gl, gl_len);
        len += gl_len;
    }
    out[len] = '\0';
}

static void draw_rank(const ViewTui *v, const JobRank *r, int y, int w, int64_t now_ns, int64_t wall_ns)
{
    char pid[24], epoch[24], step[24], loss[24], sms[24], ams[24], rk[16];
    snprintf(rk, sizeof rk, "%d", r->rank);
    if (r->pid > 0)
        snprintf(pid, sizeof pid, "%lld", (long long)r->pid);
    else
        snprintf(pid, sizeof pid, "-");
    const char *phase = r->phase != PHASE_NONE ? phase_name(r->phase)
                        : r->state == RANK_WAITING ? "launched" : "-";
    if (r->have_step) {
        snprintf(epoch, sizeof epoch, "%lld", (long long)r->last.epoch);
        snprintf(step, sizeof step, "%lld", (long long)r->last.step);
        fmt_fit(loss, sizeof loss, 8, r->last.loss, 4);
        fmt_fit(sms, sizeof sms, 7, r->last.step_ms, 1);
    } else {
        snprintf(epoch, sizeof epoch, "-");
        snprintf(step, sizeof step, "-");
        snprintf(loss, sizeof loss, "-");
        snprintf(sms, sizeof sms, "-");
    }
    if (r->have_step || r->have_coll)
        fmt_fit(ams, sizeof ams, 9, job_rank_allreduce_ms(r), 2);
    else
        snprintf(ams, sizeof ams, "-");
    char row[256];
    bool wide = w >= WIDE_MIN;
    if (wide)
        snprintf(row, sizeof row, ROW_FMT, rk, pid, phase, epoch, step, loss, sms, ams);
    else
        snprintf(row, sizeof row, ROW_FMT_NARROW, rk, phase, epoch, step, loss, sms, ams);

    bool stale = job_rank_stale(r, now_ns);
    const char *mark = " ";
    attr_t a = A_NORMAL, na = A_NORMAL;
    char note[256] = "";
    /* a hang shows as a collective that has been in flight for long */
    char inflight[96] = "";
    if (r->have_beat && r->beat.coll_seq >= 0 && r->beat.coll_since_ns > 0 &&
        wall_ns - r->beat.coll_since_ns > 1000000000LL)
        snprintf(inflight, sizeof inflight, "in %.20s #%lld for %llds", or_dash(r->beat.coll_op),
                 (long long)r->beat.coll_seq, (long long)((wall_ns - r->beat.coll_since_ns) / 1000000000LL));
    if (r->state == RANK_FAILED) {
        mark = v->g->mark_fail;
        a = na = pick(v, CP_ERR, A_REVERSE) | A_BOLD;
        snprintf(note, sizeof note, "FAILED %s", r->how_ended);
    } else if (r->state == RANK_EXITED_OK) {
        mark = v->g->mark_ok;
        a = A_DIM;
        na = pick(v, CP_OK, A_DIM);
        snprintf(note, sizeof note, "%s", r->how_ended);
    } else if (stale) {
        mark = v->g->mark_stale;
        a = na = pick(v, CP_WARN, A_BOLD) | A_BOLD;
        snprintf(note, sizeof note, "STALE %llds%s%s", (long long)((now_ns - r->last_msg_ns) / 1000000000LL),
                 inflight[0] ? " " : "", inflight);
    } else if (r->phase == PHASE_ERROR) {
        mark = v->g->mark_fail;
        a = na = pick(v, CP_ERR, A_BOLD) | A_BOLD;
        snprintf(note, sizeof note, "error: %.200s", or_dash(r->detail));
    } else if (inflight[0]) {
        mark = v->g->mark_stale;
        na = pick(v, CP_WARN, A_BOLD);
        snprintf(note, sizeof note, "%s", inflight);
    } else if (r->state == RANK_WAITING) {
        na = A_DIM;
        snprintf(note, sizeof note, "waiting for hello");
    } else {
        int sw = w - (TABLE_X + (wide ? TABLE_W : TABLE_W_NARROW) + 1);
        sparkline(v, r, sw < SPARK_MAX ? sw : SPARK_MAX, note, sizeof note);
        na = pick(v, CP_HEAD, A_NORMAL);
    }
    put(v, y, 0, 1, a, mark);
    int x = TABLE_X + put(v, y, TABLE_X, w - TABLE_X, a, row);
    if (note[0] && x + 1 < w)
        put(v, y, x + 1, w - x - 1, na, note);
}

static void draw_event(const ViewTui *v, const JobEvent *e, int y, int w)
{
    char when[16] = "--:--:--";
    time_t secs = (time_t)(e->t_ns / 1000000000LL);
    struct tm tm;
    if (localtime_r(&secs, &tm))
        strftime(when, sizeof when, "%H:%M:%S", &tm);
    char who[16];
    if (e->rank < 0)
        snprintf(who, sizeof who, "ddptop");
    else
        snprintf(who, sizeof who, "r%d", e->rank);
    char line[320];
    snprintf(line, sizeof line, "%s %s %s", when, who, e->text);
    attr_t a = e->level == EV_ERROR ? pick(v, CP_ERR, A_BOLD) | A_BOLD
               : e->level == EV_WARN ? pick(v, CP_WARN, A_BOLD) : A_NORMAL;
    put(v, y, 0, w, a, line);
}

/* A line of the box glyph with a label, e.g. "── events ───…". */
static void draw_rule(const ViewTui *v, int y, int w, const char *label)
{
    char buf[4096];
    size_t len = 0, gl = strlen(v->g->hline);
    for (int i = 0; i < 2 && len + gl < sizeof buf; i++, len += gl)
        memcpy(buf + len, v->g->hline, gl);
    len += (size_t)snprintf(buf + len, sizeof buf - len, " %s ", label);
    for (int i = text_width(label) + 4; i < w && len + gl < sizeof buf; i++, len += gl)
        memcpy(buf + len, v->g->hline, gl);
    buf[len] = '\0';
    put(v, y, 0, w, pick(v, CP_HEAD, A_DIM), buf);
}

static void draw_status(const ViewTui *v, const Job *j, int y, int w, const char *status)
{
    char buf[600] = "";
    attr_t a = A_BOLD;
    if (status && *status) {
        snprintf(buf, sizeof buf, "%s", status);
    } else if (j->state == JOB_DONE || j->state == JOB_FAILED) {
        job_verdict(j, buf, sizeof buf);
        a = (j->state == JOB_DONE ? pick(v, CP_OK, A_BOLD) : pick(v, CP_ERR, A_REVERSE)) | A_BOLD;
    } else if (j->ckpts > 0) {
        snprintf(buf, sizeof buf, "last checkpoint: step %lld -> %.500s", (long long)j->last_ckpt_step,
                 j->last_ckpt_path);
        a = A_NORMAL;
    }
    put(v, y, 0, w, a, buf);
}

static void draw_keys(const ViewTui *v, int y, int w)
{
    static const char *const keys[][2] = {{"c", "checkpoint"}, {"d", "destroy"}, {"q", "quit"}};
    int x = 0;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        x += put(v, y, x, w - x, A_REVERSE | A_BOLD, keys[i][0]);
        x += put(v, y, x, w - x, A_NORMAL, " ");
        x += put(v, y, x, w - x, A_NORMAL, keys[i][1]);
        x += put(v, y, x, w - x, A_NORMAL, "  ");
    }
}

static void draw_too_small(const ViewTui *v, int h, int w)
{
    char msg[96];
    snprintf(msg, sizeof msg, "terminal too small: need %dx%d, have %dx%d", MIN_W, MIN_H, w, h);
    int mw = text_width(msg);
    int x = mw < w ? (w - mw) / 2 : 0;
    put(v, h / 2, x, w, A_BOLD, msg);
}

void view_tui_draw(ViewTui *v, const Job *j, int64_t now_ns, const char *status)
{
    if (!v || !j)
        return;
    set_term(v->scr);
    if (v->clear_next) {
        clearok(curscr, TRUE);
        v->clear_next = false;
    }
    erase();
    int h, w;
    getmaxyx(stdscr, h, w);
    if (w < MIN_W || h < MIN_H) {
        draw_too_small(v, h, w);
        refresh();
        return;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t wall_ns = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;

    draw_title(v, j, now_ns, w);
    int y = 1;
    y += draw_header(v, j, y, h >= 20 ? 3 : 2, w);
    if (j->max_steps > 0 && h >= 16)
        draw_progress_bar(v, j, y++, w);
    if (h >= 20)
        y++;

    /* table head */
    char head[160];
    if (w >= WIDE_MIN)
        snprintf(head, sizeof head, ROW_FMT, "RANK", "PID", "PHASE", "EPOCH", "STEP", "LOSS", "STEP_MS",
                 "ALLRED_MS");
    else
        snprintf(head, sizeof head, ROW_FMT_NARROW, "RANK", "PHASE", "EPOCH", "STEP", "LOSS", "STEP_MS",
                 "ALLRED_MS");
    attr_t ha = pick(v, CP_TITLE, A_REVERSE);
    fill_row(y, ha);
    int x = TABLE_X + put(v, y, TABLE_X, w - TABLE_X, ha | A_BOLD, head);
    put(v, y, x + 1, w - x - 1, ha | A_BOLD, w - x - 1 >= 18 ? "RECENT LOSS / NOTE" : "NOTE");
    y++;

    /* ranks get the room, less the status lines and a few events */
    int ev_min = h >= 20 ? 4 : 1;
    int avail = h - y - 2 - 1 - ev_min;
    if (avail < 1)
        avail = 1;
    int shown = j->world <= avail ? j->world : avail - 1;
    for (int i = 0; i < shown; i++)
        draw_rank(v, &j->ranks[i], y++, w, now_ns, wall_ns);
    if (shown < j->world) {
        char more[64];
        snprintf(more, sizeof more, " %s %d more ranks", v->g->ellipsis, j->world - shown);
        put(v, y++, 0, w, A_DIM, more);
    }

    /* events, oldest of those that fit at the top, newest at the bottom */
    draw_rule(v, y++, w, "events");
    int n_ev = h - 2 - y;
    int have = 0;
    while (have < n_ev && job_event_at(j, have))
        have++;
    for (int i = 0; i < have; i++)
        draw_event(v, job_event_at(j, have - 1 - i), y + i, w);

    draw_status(v, j, h - 2, w, status);
    draw_keys(v, h - 1, w);
    refresh();
}
