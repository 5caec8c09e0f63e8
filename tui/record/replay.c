/* replay.c — `ddptop replay`: a recording played in the live screen. See
 * replay.h.
 *
 * The model is the live one (job.c) fed from the file: record i arrives at
 * base + t_i, where base is the Job's own start (so "12.3 s into the job"
 * reads the same as it did live) and the screen's wall clock is the
 * recording's. A playhead (ns since the recording began) moves at the
 * chosen speed; every record at or before it is applied. Going back
 * rebuilds the model from the first record, at about 2.5 us a record
 * (measured: the 900-record examples in under 5 ms, a 40 000-record,
 * 11 MB recording of 5000 steps x 4 ranks in 0.1 s), so no snapshots.
 *
 * Frames are decoded once at load for the step index (which record carries
 * which step), and again as they are applied: the Job owns what it keeps.
 */
#include "base/clock.h"
#include "record/replay.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wire/codec.h"
#include "model/job.h"
#include "record/record.h"
#include "view/keys.h"
#include "view/view.h"
#include "base/signals.h"
#include "base/usage.h"
#include "record/rec_cli.h"
#include "view/note.h"

#define NS_PER_S  1000000000LL
#define FRAME_MS  VIEW_FRAME_MS
#define TURN_MS   15
#define SPEED_MIN 0.25
#define SPEED_MAX 64.0
/* A replay message (a disabled key, a seek) stays this long. */

typedef struct {
    Recording *rec;
    const char *path;
    const char *name; /* path's last component, for the title of events */
    int world;
    int64_t *step_of; /* [n] the step a record reports (a tel step message), -1 otherwise */
    int64_t dur;      /* t of the last record */
    Job *job;
    int64_t base;   /* job->start_ns: record i arrived at base + t_i */
    size_t pos;     /* records applied: [0, pos) */
    int64_t t_play; /* the playhead, ns since the recording began */
    double speed;
    bool paused;
    /* commands seen in the recording (SENT), so each shows once */
    int64_t cmd_ckpt, cmd_pause, cmd_resume;
    bool cmd_stop;
    /* screen */
    ViewTui *tui;
    bool entering; /* g: typing a step */
    char entry[24];
    Note note;
    bool quit;
} Replay;

static void sleep_ms(int64_t ms)
{
    if (ms <= 0) return;
    struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* ---- the model at a position ---- */

/* A command ddptop sent, as the live loop would have shown it. Events get
 * the record's times (now_ns on the replay's axis, wall_ns as recorded),
 * as everything the model is given while a record is applied does. */
static void apply_cmd(Replay *R, const MsgCmd *c, int64_t now_ns, int64_t wall_ns)
{
    Job *j = R->job;
    if (!strcmp(c->op, "stop") && !R->cmd_stop) {
        R->cmd_stop = true;
        job_set_stopping(j);
        job_event(j, now_ns, wall_ns, -1, EV_INFO, "ddptop asked every rank to stop at the same step");
    } else if (!strcmp(c->op, "ckpt") && c->id > R->cmd_ckpt) {
        R->cmd_ckpt = c->id;
        job_event(j, now_ns, wall_ns, -1, EV_INFO, "checkpoint requested: every rank will agree on the step");
    } else if (!strcmp(c->op, "pause") && c->id > R->cmd_pause) {
        R->cmd_pause = c->id;
        job_set_pause_wanted(j, true);
        job_event(j, now_ns, wall_ns, -1, EV_INFO, "pause requested: the ranks agree on a step, then wait");
    } else if (!strcmp(c->op, "resume") && c->id > R->cmd_resume) {
        R->cmd_resume = c->id;
        job_set_pause_wanted(j, false);
        job_event(j, now_ns, wall_ns, -1, EV_INFO, "resume requested");
    }
}

static void apply_rec(Replay *R, size_t i)
{
    const RecEntry *e = &R->rec->recs[i];
    Job *j = R->job;
    int64_t now = R->base + e->t_ns;
    char err[256];
    Msg m;
    RecProc p;
    RecNote nt;
    int rc;
    switch (e->src) {
    case REC_SRC_TEL:
    case REC_SRC_CTL:
    case REC_SRC_SENT:
        rc = codec_decode(e->data, e->len, &m, err, sizeof err);
        if (rc != 0) {
            if (rc > 0) msg_done(&m);
            if (e->src != REC_SRC_SENT) {
                j->bad_frames++; /* as the live loop counted it */
                j->version++;
            }
            break;
        }
        if (e->src == REC_SRC_SENT) {
            if (m.kind == MSG_CMD) apply_cmd(R, &m.u.cmd, now, e->wall_ns);
        } else if (m.kind != MSG_SET && m.kind != MSG_GET && m.kind != MSG_WAIT) {
            job_apply(j, &m, now, e->wall_ns); /* store requests are the store's, not the model's */
        }
        msg_done(&m);
        break;
    case REC_SRC_START:
        if (rec_proc_decode(e, &p) == 0) job_rank_started(j, p.rank, p.pid, now);
        break;
    case REC_SRC_EXIT:
        if (rec_proc_decode(e, &p) == 0)
            job_rank_exited(j, p.rank, p.pid, p.wait_status, p.how[0] ? p.how : NULL, now, e->wall_ns);
        break;
    case REC_SRC_NOTE:
        if (rec_note_decode(e, &nt) == 0)
            job_event(j, now, e->wall_ns, nt.rank,
                      nt.level == 2   ? EV_ERROR
                      : nt.level == 1 ? EV_WARN
                                      : EV_INFO,
                      "%s", nt.text);
        break;
    default: break; /* a newer writer's record: skipped */
    }
}

/* A fresh model at the start of the recording. */
static int rebuild(Replay *R)
{
    job_free(&R->job);
    R->job = job_new(R->world, mono_ns());
    if (!R->job) return -1;
    R->base = R->job->start_ns;
    R->pos = 0;
    R->cmd_ckpt = R->cmd_pause = R->cmd_resume = 0;
    R->cmd_stop = false;
    const RecHeader *h = &R->rec->hdr;
    job_event(R->job, R->base, h->created_wall_ns, -1, EV_INFO, "replaying %s: %d rank%s, %zu records, %.1f s%s%s",
              R->name, R->world, R->world == 1 ? "" : "s", R->rec->n, (double)R->dur / NS_PER_S,
              h->desc && h->desc[0] ? " — " : "", h->desc ? h->desc : "");
    return 0;
}

/* Apply records until pos == target (rebuilding first when target is
 * behind); the playhead goes to the last applied record's time, or to t
 * when t >= 0. */
static int seek_index(Replay *R, size_t target, int64_t t)
{
    if (target > R->rec->n) target = R->rec->n;
    if (target < R->pos && rebuild(R)) return -1;
    while (R->pos < target) apply_rec(R, R->pos++);
    if (t >= 0)
        R->t_play = t;
    else
        R->t_play = R->pos > 0 ? R->rec->recs[R->pos - 1].t_ns : 0;
    return 0;
}

static int seek_time(Replay *R, int64_t t)
{
    if (t < 0) t = 0;
    if (t > R->dur) t = R->dur;
    /* every record at or before t */
    return seek_index(R, recording_seek_time(R->rec, t + 1), t);
}

static bool at_end(const Replay *R) { return R->pos >= R->rec->n; }

/* The step the model shows: the highest one any rank reported. */
static int64_t shown_step(const Replay *R) { return R->job->step; }

/* ---- keys ---- */

static void step_msgs(Replay *R, int dir)
{
    size_t n = R->rec->n;
    R->paused = true;
    if (dir > 0) {
        size_t i = R->pos;
        while (i < n && R->step_of[i] < 0) i++;
        if (i >= n) {
            seek_index(R, n, -1);
            note_set(&R->note, mono_ms(), "no step message after this point");
            return;
        }
        seek_index(R, i + 1, -1);
        note_set(&R->note, mono_ms(), "forward one step message: step %" PRId64, R->step_of[i]);
        /* name the rank it came from */
        Msg m;
        char err[128];
        if (codec_decode(R->rec->recs[i].data, R->rec->recs[i].len, &m, err, sizeof err) == 0) {
            note_set(&R->note, mono_ms(), "forward one step message: rank %d step %" PRId64, (int)m.rank,
                     R->step_of[i]);
            msg_done(&m);
        }
    } else {
        /* s1: the last step message applied; back to just after the one before it */
        size_t i = R->pos;
        while (i > 0 && R->step_of[i - 1] < 0) i--;
        if (i == 0) {
            seek_index(R, 0, 0);
            note_set(&R->note, mono_ms(), "at the start of the recording");
            return;
        }
        i--; /* i: the last applied step message */
        while (i > 0 && R->step_of[i - 1] < 0) i--;
        seek_index(R, i, -1);
        note_set(&R->note, mono_ms(), "back one step message: step %" PRId64 " shown", shown_step(R));
    }
}

/* Just after the last message reporting `step` (the model's step is the
 * slowest rank's: every rank is then at it), or, when no rank reported it,
 * just before the first message past it. */
static void goto_step(Replay *R, int64_t step)
{
    size_t n = R->rec->n, i = n, last = n;
    for (size_t k = 0; k < n; k++) {
        if (R->step_of[k] == step) last = k;
        if (R->step_of[k] > step && i == n) i = k;
    }
    if (last < n) i = last + 1;
    seek_index(R, i, -1);
    if (i < n)
        note_set(&R->note, mono_ms(), "at step %" PRId64, shown_step(R));
    else
        note_set(&R->note, mono_ms(), "step %" PRId64 " is past the recording: at its end (step %" PRId64 ")", step,
                 shown_step(R));
}

static void change_speed(Replay *R, double f)
{
    double s = R->speed * f;
    if (s < SPEED_MIN) s = SPEED_MIN;
    if (s > SPEED_MAX) s = SPEED_MAX;
    R->speed = s;
    note_set(&R->note, mono_ms(), "speed %gx", s);
}

/* The replay's rows of the key table (keys.h, KEYS_REPLAY); while a step
 * is typed, every key is the entry's. */
static int on_key(void *ctx, int key, KeyAction act)
{
    Replay *R = ctx;
    if (R->entering) {
        size_t l = strlen(R->entry);
        if (key >= '0' && key <= '9') {
            if (l + 1 < sizeof R->entry && l < 15) {
                R->entry[l] = (char)key;
                R->entry[l + 1] = '\0';
            }
        } else if (key == UI_KEY_BACKSPACE) {
            if (l > 0) R->entry[l - 1] = '\0';
        } else if (key == UI_KEY_ENTER) {
            R->entering = false;
            if (l > 0) {
                R->paused = true;
                goto_step(R, strtoll(R->entry, NULL, 10));
            } else {
                note_set(&R->note, mono_ms(), "no step given");
            }
        } else {
            R->entering = false; /* Esc or any other key: cancelled */
            note_set(&R->note, mono_ms(), "go to step: cancelled");
        }
        return 1;
    }
    int64_t tenth = R->dur / 10 > 0 ? R->dur / 10 : 1;
    switch (act) {
    case KEY_ACT_PLAY:
        if (R->paused && at_end(R)) {
            seek_index(R, 0, 0); /* from the top again */
            note_set(&R->note, mono_ms(), "playing from the start");
        }
        R->paused = !R->paused;
        return 1;
    case KEY_ACT_STEP_FWD: step_msgs(R, 1); return 1;
    case KEY_ACT_STEP_BACK: step_msgs(R, -1); return 1;
    case KEY_ACT_SEC_FWD:
        seek_time(R, R->t_play + NS_PER_S);
        note_set(&R->note, mono_ms(), "forward 1 s");
        return 1;
    case KEY_ACT_SEC_BACK:
        seek_time(R, R->t_play - NS_PER_S);
        note_set(&R->note, mono_ms(), "back 1 s");
        return 1;
    case KEY_ACT_TENTH_FWD:
        seek_time(R, R->t_play + tenth);
        note_set(&R->note, mono_ms(), "forward 10%%");
        return 1;
    case KEY_ACT_TENTH_BACK:
        seek_time(R, R->t_play - tenth);
        note_set(&R->note, mono_ms(), "back 10%%");
        return 1;
    case KEY_ACT_FASTER: change_speed(R, 2); return 1;
    case KEY_ACT_SLOWER: change_speed(R, 0.5); return 1;
    case KEY_ACT_GOTO:
        R->entering = true;
        R->entry[0] = '\0';
        return 1;
    case KEY_ACT_CKPT:
    case KEY_ACT_DESTROY:
    case KEY_ACT_PAUSE:
        note_set(&R->note, mono_ms(), "%c: %s needs live workers — disabled in a replay (space pauses the replay)", key,
                 act == KEY_ACT_CKPT      ? "checkpoint"
                 : act == KEY_ACT_DESTROY ? "destroy"
                                          : "pause");
        return 1;
    default: return 0;
    }
}

static void status_line(Replay *R, char *buf, size_t n)
{
    char what[256];
    if (R->entering)
        snprintf(what, sizeof what, "go to step: %s_  (Enter goes, Esc cancels)", R->entry);
    else if (note_text(&R->note, mono_ms()))
        snprintf(what, sizeof what, "%s", note_text(&R->note, mono_ms()));
    else
        what[0] = '\0';
    if (at_end(R)) {
        char verdict[JOB_EVENT_TEXT + 512];
        job_verdict(R->job, verdict, sizeof verdict);
        if (R->rec->complete)
            snprintf(buf, n, "replay: end of recording (%.1f s, step %" PRId64 "): %s%s%s", (double)R->dur / NS_PER_S,
                     shown_step(R), verdict, what[0] ? " | " : " — space plays again, q leaves", what);
        else
            snprintf(buf, n, "replay: %s%s%s", R->rec->tail, what[0] ? " | " : " — q leaves", what);
        return;
    }
    snprintf(buf, n, "replay: %s %gx  t %.1f/%.1f s  step %" PRId64 "  record %zu/%zu%s%s",
             R->paused ? "paused" : "playing", R->speed, (double)R->t_play / NS_PER_S, (double)R->dur / NS_PER_S,
             shown_step(R), R->pos, R->rec->n, what[0] ? "  | " : "", what);
}

/* ---- the loops ---- */

static int play_tui(Replay *R)
{
    char err[256], status[JOB_EVENT_TEXT + 1024];
    if (view_tui_open(&R->tui, R->world, err, sizeof err)) {
        fprintf(stderr, "ddptop replay: %s (use --headless)\n", err);
        return 2; /* no screen here: bad usage, as for ddptop run */
    }
    view_tui_set_keys(R->tui, KEYS_REPLAY, on_key, R);
    int64_t last = mono_ms(), last_draw = 0;
    uint64_t drawn_version = (uint64_t)-1;
    size_t drawn_pos = (size_t)-1;
    while (!R->quit && !signals_stop_count()) {
        int64_t now = mono_ms();
        if (!R->paused && !at_end(R)) {
            int64_t t = R->t_play + (int64_t)((double)(now - last) * 1e6 * R->speed);
            size_t target = recording_seek_time(R->rec, t + 1);
            seek_index(R, target, t > R->dur ? R->dur : t);
            if (at_end(R)) R->paused = true;
        }
        last = now;
        ViewAction a;
        bool redraw = false;
        while ((a = view_tui_poll_key(R->tui, R->job, false)) != VIEW_ACT_NONE) {
            if (a == VIEW_ACT_QUIT)
                R->quit = true;
            else if (a == VIEW_ACT_REDRAW)
                redraw = true;
            /* c, d and p are taken by on_key: nothing else reaches here */
        }
        view_tui_set_keys_alt(R->tui, R->paused); /* space: "play" while paused */
        now = mono_ms();
        bool changed = R->job->version != drawn_version || R->pos != drawn_pos;
        if (redraw || (changed && now - last_draw >= FRAME_MS) || now - last_draw >= 250) {
            status_line(R, status, sizeof status);
            view_tui_draw_at(R->tui, R->job, R->base + R->t_play, R->rec->hdr.created_wall_ns + R->t_play, status);
            drawn_version = R->job->version;
            drawn_pos = R->pos;
            last_draw = now;
        }
        sleep_ms(TURN_MS);
    }
    view_tui_close(&R->tui);
    return 0;
}

/* As fast as it reads, or at --speed when given: the same event, progress
 * and summary lines as a live headless run. */
static int play_headless(Replay *R, bool json, bool paced)
{
    ViewHeadless hl;
    view_headless_init(&hl, stdout, json);
    int64_t t0 = mono_ms();
    while (R->pos < R->rec->n && !signals_stop_count()) {
        const RecEntry *e = &R->rec->recs[R->pos];
        if (paced) {
            int64_t due = t0 + (int64_t)((double)e->t_ns / 1e6 / R->speed);
            sleep_ms(due - mono_ms());
        }
        apply_rec(R, R->pos++);
        R->t_play = e->t_ns;
        view_headless_tick(&hl, R->job, R->base + R->t_play);
    }
    int64_t end_ns = R->base + R->dur, end_wall_ns = R->rec->hdr.created_wall_ns + R->dur;
    if (!R->rec->complete)
        job_event(R->job, end_ns, end_wall_ns, -1, EV_WARN, "%s", R->rec->tail);
    else
        job_event(R->job, end_ns, end_wall_ns, -1, EV_INFO, "end of recording");
    view_headless_tick(&hl, R->job, R->base + R->dur);
    view_headless_summary(&hl, R->job, R->base + R->dur);
    fflush(stdout);
    return 0;
}

/* ---- command line ---- */

static int bad(const char *fmt, const char *arg) { return usage_fail("ddptop replay", "ddptop --help", fmt, arg); }

int replay_main(int argc, char **argv)
{
    const char *path = NULL;
    double speed = 1;
    bool headless = false, json = false, speed_given = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs("usage: ddptop replay FILE [--speed X] [--headless [--json]]\n"
                  "Play a recording (ddptop run --record FILE) in the live screen; keys: space play/pause,\n"
                  ", . step, < > 1 s, [ ] 10%, g N Enter go to step N, - + speed (0.25x-64x), q quit.\n"
                  "--headless prints the live headless run's progress and summary lines.\n",
                  stdout);
            return 0;
        }
        if (!strcmp(a, "--speed")) {
            if (!v) return bad("%s: missing value", a);
            char *end;
            errno = 0;
            double d = strtod(v, &end);
            if (errno || end == v || *end || !isfinite(d) || d < SPEED_MIN || d > SPEED_MAX) {
                fprintf(stderr, "ddptop replay: --speed: expected a number in [%g, %g], got \"%s\"\n", SPEED_MIN,
                        SPEED_MAX, v);
                return 2;
            }
            speed = d;
            speed_given = true;
            i++;
        } else if (!strcmp(a, "--headless")) {
            headless = true;
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else {
            int rc =
                rec_cli_path("ddptop replay", "ddptop --help", a, &path, "one recording at a time (\"%s\" is extra)");
            if (rc) return rc;
        }
    }
    if (!path) return bad("%s", "replay: which recording? (ddptop replay FILE)");
    if (json && !headless) return bad("%s needs --headless", "--json");

    Replay R;
    memset(&R, 0, sizeof R);
    char err[512];
    if (recording_load(path, &R.rec, err, sizeof err)) {
        fprintf(stderr, "ddptop replay: %s\n", err);
        return 2;
    }
    R.path = path;
    const char *slash = strrchr(path, '/');
    R.name = slash ? slash + 1 : path;
    R.speed = speed;
    /* the world: the header's, else the highest rank the records name */
    int world = R.rec->hdr.world;
    R.step_of = malloc((R.rec->n ? R.rec->n : 1) * sizeof *R.step_of);
    if (!R.step_of) {
        recording_free(&R.rec);
        fprintf(stderr, "ddptop replay: out of memory\n");
        return 1;
    }
    /* Ranks beyond what a job can hold are hostile or damaged: never the
     * world (and max_rank + 1 cannot overflow). */
    int max_rank = -1;
    for (size_t i = 0; i < R.rec->n; i++) {
        const RecEntry *e = &R.rec->recs[i];
        Msg m;
        RecProc p;
        R.step_of[i] = -1;
        if ((e->src == REC_SRC_START || e->src == REC_SRC_EXIT) && rec_proc_decode(e, &p) == 0 && p.rank > max_rank &&
            p.rank < JOB_MAX_RANKS)
            max_rank = p.rank;
        if (e->src != REC_SRC_TEL && e->src != REC_SRC_CTL) continue;
        int rc = codec_decode(e->data, e->len, &m, err, sizeof err);
        if (rc != 0) {
            if (rc > 0) msg_done(&m);
            continue;
        }
        if (m.kind == MSG_STEP) R.step_of[i] = m.u.step.step;
        if (m.rank > max_rank && m.rank < JOB_MAX_RANKS && m.kind == MSG_HELLO) max_rank = m.rank;
        msg_done(&m);
    }
    if (world <= 0) world = max_rank + 1;
    if (world <= 0 || world > JOB_MAX_RANKS) {
        fprintf(stderr, "ddptop replay: %s: %s\n", path,
                world <= 0 ? "no ranks in this recording (nothing to replay)" : "too many ranks to show");
        free(R.step_of);
        recording_free(&R.rec);
        return 2;
    }
    R.world = world;
    R.dur = R.rec->n ? R.rec->recs[R.rec->n - 1].t_ns : 0;
    if (!R.rec->complete) fprintf(stderr, "ddptop replay: %s\n", R.rec->tail);

    signals_catch_stop(0);

    int rc = 1;
    if (rebuild(&R) == 0) {
        if (headless)
            rc = play_headless(&R, json, speed_given);
        else
            rc = play_tui(&R);
    } else {
        fprintf(stderr, "ddptop replay: out of memory\n");
    }
    job_free(&R.job);
    free(R.step_of);
    recording_free(&R.rec);
    return rc;
}
