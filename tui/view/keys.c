/* keys.c — the key table and its lookups. See keys.h.
 *
 * Rows are in the ? box's order: each mode's own keys, then the
 * navigation every mode shares. The key line and --help order by their
 * own numbers (`line`, `usage_at`), because they group keys differently
 * (the key line keeps abort last, --help puts it on a line of its own).
 */
#include "view/keys.h"

#include <stdio.h>
#include <string.h>

#include "view/ui.h"

#define LIVE    KEYS_IN(KEYS_LIVE)
#define REPLAY  KEYS_IN(KEYS_REPLAY)
#define ATTACH  KEYS_IN(KEYS_ATTACH)
#define CONTROL KEYS_IN(KEYS_ATTACH_CONTROL)
#define ALL     KEYS_IN_ALL

/* Key line places: a mode's own keys first (1..), then the shared ones. */
enum { LINE_NAV = 50, LINE_LAST = 60 };

// clang-format off
static const KeyRow key_rows[] = {
    /* ---- the job's keys: live, and attach --control ---- */
    {LIVE, "c", "checkpoint now: the ranks agree on a step, rank 0 writes", LIVE, 1, NULL, "ckpt", NULL,
     "c checkpoint", 11, {{'c', KEY_ACT_CKPT}, {'C', KEY_ACT_CKPT}}},
    {LIVE, "d", "destroy cleanly: one stop step, final checkpoint, barrier", LIVE, 2, NULL, "destroy", NULL,
     "d destroy cleanly", 12, {{'d', KEY_ACT_DESTROY}, {'D', KEY_ACT_DESTROY}}},
    {CONTROL, "c", "checkpoint now (the job's ranks agree on a step)", CONTROL, 1, NULL, "ckpt", NULL, NULL, 0,
     {{'c', KEY_ACT_CKPT}, {'C', KEY_ACT_CKPT}}},
    {CONTROL, "d", "destroy the job cleanly", CONTROL, 2, NULL, "destroy", NULL, NULL, 0,
     {{'d', KEY_ACT_DESTROY}, {'D', KEY_ACT_DESTROY}}},
    {LIVE | CONTROL, "p", "pause / resume every rank at the same step", LIVE | CONTROL, 3, NULL, "pause", "resume",
     "p pause/resume", 13, {{'p', KEY_ACT_PAUSE}, {'P', KEY_ACT_PAUSE}}},
    {LIVE, "a", "abort now: SIGTERM every rank, SIGKILL 5 s later", LIVE, LINE_LAST + 1, NULL, "abort", NULL,
     "a abort now (SIGTERM, then SIGKILL)", 21, {{'a', KEY_ACT_ABORT}, {'A', KEY_ACT_ABORT}}},
    {LIVE, "f", "inject a fault (kill, stall, slow the selected rank; ...)", LIVE, LINE_LAST, NULL, "fault", NULL,
     "f inject a fault (menu)", 22, {{'f', KEY_ACT_FAULT}, {'F', KEY_ACT_FAULT}}},
    {LIVE, "w", "where is it: every thread's Python stack of the selected rank", LIVE, LINE_LAST + 2, NULL, "stack",
     NULL, "w Python stacks of the selected rank", 23, {{'w', KEY_ACT_STACK}, {'W', KEY_ACT_STACK}}},
    {LIVE, "t", "every rank's stacks merged in one tree; * where no rank moved", LIVE, LINE_LAST + 3, NULL, "tree",
     NULL, "t every rank's stacks merged in one tree", 41, {{'t', KEY_ACT_TREE}, {'T', KEY_ACT_TREE}}},
    {LIVE, "r", "a report on disk now: every rank's stacks and the verdict", LIVE, LINE_LAST + 4, NULL,
     "report", NULL, "r write a report (stacks, verdict) beside the logs", 42,
     {{'r', KEY_ACT_REPORT}, {'R', KEY_ACT_REPORT}}},
    {LIVE, "q", "quit (asks while training; destroys cleanly first)", LIVE, 4, NULL, "quit", NULL,
     "q quit (asks while training)", 14, {{'q', KEY_ACT_QUIT}, {'Q', KEY_ACT_QUIT}}},
    {CONTROL, "a", "abort the job (SIGTERM, then SIGKILL)", CONTROL, 4, NULL, "abort", NULL, NULL, 0,
     {{'a', KEY_ACT_ABORT}, {'A', KEY_ACT_ABORT}}},
    /* read-only: sent all the same, ddptop refuses them (attach/client.c) */
    {ATTACH, "c d p a", "read-only: start with --control to send commands", 0, 0, NULL, NULL, NULL, NULL, 0,
     {{'c', KEY_ACT_CKPT}, {'C', KEY_ACT_CKPT}, {'d', KEY_ACT_DESTROY}, {'D', KEY_ACT_DESTROY},
      {'p', KEY_ACT_PAUSE}, {'P', KEY_ACT_PAUSE}, {'a', KEY_ACT_ABORT}, {'A', KEY_ACT_ABORT}}},
    /* the viewer's key hook answers f */
    {ATTACH | CONTROL, "f", "faults: only from the job's own screen", 0, 0, NULL, NULL, NULL, NULL, 0,
     {{'f', KEY_ACT_FAULT}, {'F', KEY_ACT_FAULT}}},
    /* not listed: ui.c says why (only the screen that launched the ranks can signal them) */
    {ATTACH | CONTROL | REPLAY, NULL, NULL, 0, 0, NULL, NULL, NULL, NULL, 0, {{'w', KEY_ACT_STACK}, {'W', KEY_ACT_STACK}}},
    /* the viewer's key hook asks the job (attach/client.c) */
    {ATTACH | CONTROL, "t", "every rank's stacks merged in one tree (the job gathers them)", 0, 0, NULL, NULL, NULL,
     NULL, 0, {{'t', KEY_ACT_TREE}, {'T', KEY_ACT_TREE}}},
    /* not listed: ui.c says why (a recording holds no stacks; a viewer's ddptop cannot write beside the job's
     * logs, and a report is no read-only act) */
    {REPLAY, NULL, NULL, 0, 0, NULL, NULL, NULL, NULL, 0, {{'t', KEY_ACT_TREE}, {'T', KEY_ACT_TREE}}},
    {ATTACH | CONTROL | REPLAY, NULL, NULL, 0, 0, NULL, NULL, NULL, NULL, 0,
     {{'r', KEY_ACT_REPORT}, {'R', KEY_ACT_REPORT}}},
    {ATTACH | CONTROL, "q", "detach (the job goes on)", ATTACH | CONTROL, 5, NULL, "detach", NULL, NULL, 0,
     {{'q', KEY_ACT_QUIT}, {'Q', KEY_ACT_QUIT}}},

    /* ---- a replay's playhead (replay.c's key hook) ---- */
    {REPLAY, "space", "play / pause", REPLAY, 1, NULL, "pause", "play", NULL, 0, {{' ', KEY_ACT_PLAY}}},
    {REPLAY, ",  .", "one step back / forward (pauses)", REPLAY, 2, ", .", "step", NULL, NULL, 0,
     {{',', KEY_ACT_STEP_BACK}, {'.', KEY_ACT_STEP_FWD}}},
    {REPLAY, "<  >", "one second back / forward", REPLAY, 3, "< >", "1 s", NULL, NULL, 0,
     {{'<', KEY_ACT_SEC_BACK}, {'>', KEY_ACT_SEC_FWD}}},
    {REPLAY, "[  ]", "10% of the recording back / forward", REPLAY, 4, "[ ]", "10%", NULL, NULL, 0,
     {{'[', KEY_ACT_TENTH_BACK}, {']', KEY_ACT_TENTH_FWD}}},
    {REPLAY, "g", "go to a step (type it, Enter)", REPLAY, 5, NULL, "go to step", NULL, NULL, 0,
     {{'g', KEY_ACT_GOTO}, {'G', KEY_ACT_GOTO}}},
    {REPLAY, "-  +", "slower / faster", REPLAY, 6, "- +", "speed", NULL, NULL, 0,
     {{'-', KEY_ACT_SLOWER}, {'_', KEY_ACT_SLOWER}, {'+', KEY_ACT_FASTER}, {'=', KEY_ACT_FASTER}}},
    /* the hook says why they do nothing */
    {REPLAY, "c d p", "need live workers: a replay only shows what happened", 0, 0, NULL, NULL, NULL, NULL, 0,
     {{'c', KEY_ACT_CKPT}, {'C', KEY_ACT_CKPT}, {'d', KEY_ACT_DESTROY}, {'D', KEY_ACT_DESTROY},
      {'p', KEY_ACT_PAUSE}, {'P', KEY_ACT_PAUSE}}},
    {REPLAY, "q", "quit", REPLAY, 7, NULL, "quit", NULL, NULL, 0, {{'q', KEY_ACT_QUIT}, {'Q', KEY_ACT_QUIT}}},
    /* not listed, as before this table: f opens the fault menu (the replay
     * ignores the pick), a asks for an abort the replay ignores */
    {REPLAY, NULL, NULL, 0, 0, NULL, NULL, NULL, NULL, 0,
     {{'f', KEY_ACT_FAULT}, {'F', KEY_ACT_FAULT}, {'a', KEY_ACT_ABORT}, {'A', KEY_ACT_ABORT}}},

    /* ---- the screen: every mode ---- */
    {ALL, "?", "this help: Up Down PgUp PgDn scroll it, other keys close it", ALL, LINE_NAV, NULL, "help", NULL, "? help", 31,
     {{'?', KEY_ACT_HELP}}},
    {ALL, "Tab  S-Tab", "move between panels", ALL, LINE_NAV + 1, "Tab", "panel", NULL, "Tab/arrows move", 32,
     {{UI_KEY_TAB, KEY_ACT_FOCUS_NEXT}, {UI_KEY_BTAB, KEY_ACT_FOCUS_PREV}}},
    {ALL, "Up Down", "select a rank / scroll the focused panel", 0, 0, NULL, NULL, NULL, NULL, 0,
     {{UI_KEY_UP, KEY_ACT_SCROLL}, {UI_KEY_DOWN, KEY_ACT_SCROLL}}},
    {ALL, "PgUp PgDn", "page; Home End: first, last", 0, 0, NULL, NULL, NULL, NULL, 0,
     {{UI_KEY_PGUP, KEY_ACT_SCROLL}, {UI_KEY_PGDN, KEY_ACT_SCROLL}, {UI_KEY_HOME, KEY_ACT_SCROLL},
      {UI_KEY_END, KEY_ACT_SCROLL}}},
    {ALL, "Left Right", "move along the sampler strip", 0, 0, NULL, NULL, NULL, NULL, 0,
     {{UI_KEY_LEFT, KEY_ACT_ALONG}, {UI_KEY_RIGHT, KEY_ACT_ALONG}}},
    {ALL, "Enter", "open the selected rank's detail (Esc closes)", ALL, LINE_NAV + 3, NULL, "rank", NULL,
     "Enter rank detail", 33, {{UI_KEY_ENTER, KEY_ACT_DETAIL}}},
    {ALL, "1-6", "zoom a panel: 1 header 2 ranks 3 loss 4 all-reduce", ALL, LINE_NAV + 2, NULL, "zoom", NULL,
     "1-6 zoom", 34,
     {{'1', KEY_ACT_ZOOM}, {'2', KEY_ACT_ZOOM}, {'3', KEY_ACT_ZOOM}, {'4', KEY_ACT_ZOOM}, {'5', KEY_ACT_ZOOM},
      {'6', KEY_ACT_ZOOM}}},
    {ALL, "", "5 sampler 6 events; the same key or Esc: all panels", 0, 0, NULL, NULL, NULL, NULL, 0,
     {{'0', KEY_ACT_UNZOOM}, {UI_KEY_ESC, KEY_ACT_UNZOOM}}},
    {ALL, "h  H", "hide the focused panel / show every panel", LIVE, LINE_NAV + 6, "h", "hide", NULL,
     "h/H hide/show", 35, {{'h', KEY_ACT_HIDE}, {'H', KEY_ACT_SHOW_ALL}}},
    {ALL, "l", "loss chart: log scale on/off", LIVE, LINE_NAV + 5, NULL, "log", NULL, "l log", 36,
     {{'l', KEY_ACT_LOG}, {'L', KEY_ACT_LOG}}},
    {ALL, "s  S", "sort ranks by the next key / reverse the order", LIVE, LINE_NAV + 4, "s", "sort", NULL,
     "s/S sort", 37, {{'s', KEY_ACT_SORT}, {'S', KEY_ACT_SORT_REVERSE}}},
    {ALL, "m", "mouse on/off (off: the terminal can select text)", 0, 0, NULL, NULL, NULL, NULL, 0,
     {{'m', KEY_ACT_MOUSE}, {'M', KEY_ACT_MOUSE}}},
    {ALL, "Ctrl-L", "redraw the screen", 0, 0, NULL, NULL, NULL, NULL, 0, {{UI_KEY_REDRAW, KEY_ACT_REDRAW}}},
};
// clang-format on
#define N_ROWS ((int)(sizeof key_rows / sizeof key_rows[0]))

// clang-format off
static const char *const help_titles[KEYS__MODES] = {
    [KEYS_LIVE] = "ddptop keys",
    [KEYS_REPLAY] = "ddptop replay keys",
    [KEYS_ATTACH] = "ddptop attach keys (read-only)",
    [KEYS_ATTACH_CONTROL] = "ddptop attach --control keys",
};
// clang-format on

static bool in_mode(unsigned modes, KeysMode m) { return m >= 0 && m < KEYS__MODES && (modes & KEYS_IN(m)); }

const KeyRow *keys_table(int *n)
{
    *n = N_ROWS;
    return key_rows;
}

KeyAction keys_action(KeysMode m, int code)
{
    for (int i = 0; i < N_ROWS; i++) {
        if (!in_mode(key_rows[i].modes, m)) continue;
        for (const KeyBind *b = key_rows[i].bind; b < key_rows[i].bind + KEYS_BIND_MAX && b->code; b++)
            if (b->code == code) return b->act;
    }
    return KEY_ACT_NONE;
}

const char *keys_help_title(KeysMode m) { return m >= 0 && m < KEYS__MODES ? help_titles[m] : help_titles[KEYS_LIVE]; }

int keys_help(KeysMode m, const KeyRow **out, int max)
{
    int n = 0;
    for (int i = 0; i < N_ROWS && n < max; i++)
        if (in_mode(key_rows[i].modes, m) && key_rows[i].keys) out[n++] = &key_rows[i];
    return n;
}

/* The rows that pass `take`, ordered by `place` (stable: ties keep the
 * table's order). */
static int sorted_rows(const KeyRow **out, int max, bool (*take)(const KeyRow *, KeysMode), KeysMode m,
                       int (*place)(const KeyRow *))
{
    int n = 0;
    for (int i = 0; i < N_ROWS && n < max; i++) {
        if (!take(&key_rows[i], m)) continue;
        int k = n++;
        while (k > 0 && place(out[k - 1]) > place(&key_rows[i])) {
            out[k] = out[k - 1];
            k--;
        }
        out[k] = &key_rows[i];
    }
    return n;
}

static bool on_line(const KeyRow *r, KeysMode m) { return in_mode(r->line_modes, m) && r->label; }

static int line_place(const KeyRow *r) { return r->line; }

/* Does the row's key act on the job's ranks (nothing to do once they ended)? */
static bool acts_on_ranks(const KeyRow *r)
{
    switch (r->bind[0].act) {
    case KEY_ACT_CKPT:
    case KEY_ACT_DESTROY:
    case KEY_ACT_PAUSE:
    case KEY_ACT_ABORT:
    case KEY_ACT_FAULT:
    case KEY_ACT_STACK:
    case KEY_ACT_TREE:
    case KEY_ACT_REPORT: return true;
    default: return false;
    }
}

int keys_line(KeysMode m, bool alt, bool ended, const char *(*out)[2], int max)
{
    const KeyRow *rows[N_ROWS];
    int n = sorted_rows(rows, N_ROWS, on_line, m, line_place), k = 0;
    for (int i = 0; i < n && k < max; i++) {
        if (ended && acts_on_ranks(rows[i])) continue;
        out[k][0] = rows[i]->line_key ? rows[i]->line_key : rows[i]->keys;
        out[k][1] = alt && rows[i]->label_alt ? rows[i]->label_alt : rows[i]->label;
        k++;
    }
    return k;
}

static bool in_usage(const KeyRow *r, KeysMode m) { return in_mode(r->modes, m) && r->usage; }

static int usage_place(const KeyRow *r) { return r->usage_at; }

int keys_usage(char *buf, size_t n)
{
    const KeyRow *rows[N_ROWS];
    int k = sorted_rows(rows, N_ROWS, in_usage, KEYS_LIVE, usage_place);
    size_t len = 0;
    for (int i = 0; i < k; i++) {
        bool first = i == 0 || rows[i]->usage_at / 10 != rows[i - 1]->usage_at / 10;
        bool last = i == k - 1 || rows[i]->usage_at / 10 != rows[i + 1]->usage_at / 10;
        int w = snprintf(buf + (len < n ? len : n), len < n ? n - len : 0, "%s%s%s",
                         !first ? "  "
                         : i    ? "      "
                                : "keys: ",
                         rows[i]->usage, last ? "\n" : "");
        len += (size_t)(w > 0 ? w : 0);
    }
    if (k == 0 && n) buf[0] = '\0';
    return (int)len;
}
