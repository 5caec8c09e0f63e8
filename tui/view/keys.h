/* keys.h — every key of every screen, in one table (htop's bindings with
 * their help, tmux's bind -N): what a key does, its line in the ? box, its
 * place on the bottom key line and in `ddptop --help`, and the modes it
 * applies in. Live, replay and attach differ only by which rows apply.
 * ui.c handles keys through it, draw_screen.c draws the help and the key
 * line from it, tui/cmd prints the --help paragraph from it.
 *
 * Owns: the table and the lookups over it. Plain data, no curses. Codes
 * are ui.h's (a character, or UI_KEY_*). Any thread (read-only).
 */
#ifndef DDPTOP_VIEW_KEYS_H
#define DDPTOP_VIEW_KEYS_H

#include <stdbool.h>
#include <stddef.h>

/* Which screen the keys are for. */
typedef enum {
    KEYS_LIVE = 0,       /* ddptop run's own screen */
    KEYS_REPLAY,         /* ddptop replay */
    KEYS_ATTACH,         /* ddptop attach, read-only */
    KEYS_ATTACH_CONTROL, /* ddptop attach --control */
    KEYS__MODES
} KeysMode;

/* What a key asks for. The job's and the screen's are ui.c's to carry
 * out; the replay's are replay.c's (its key hook). */
typedef enum {
    KEY_ACT_NONE = 0,
    /* on the job */
    KEY_ACT_CKPT,
    KEY_ACT_DESTROY,
    KEY_ACT_PAUSE,
    KEY_ACT_ABORT,
    KEY_ACT_FAULT,
    KEY_ACT_STACK,  /* the selected rank's Python stacks (its process is signalled) */
    KEY_ACT_TREE,   /* every rank's stacks merged into one tree (model/stacktree.h) */
    KEY_ACT_REPORT, /* a report on disk now: every rank's stacks, the diagnosis (tui/run/report.c) */
    KEY_ACT_QUIT,
    /* on the screen */
    KEY_ACT_HELP,
    KEY_ACT_FOCUS_NEXT,
    KEY_ACT_FOCUS_PREV,
    KEY_ACT_SCROLL,
    KEY_ACT_ALONG,
    KEY_ACT_DETAIL,
    KEY_ACT_ZOOM,
    KEY_ACT_UNZOOM,
    KEY_ACT_HIDE,
    KEY_ACT_SHOW_ALL,
    KEY_ACT_LOG,
    KEY_ACT_SORT,
    KEY_ACT_SORT_REVERSE,
    KEY_ACT_MOUSE,
    KEY_ACT_REDRAW,
    /* on a replay's playhead */
    KEY_ACT_PLAY,
    KEY_ACT_STEP_BACK,
    KEY_ACT_STEP_FWD,
    KEY_ACT_SEC_BACK,
    KEY_ACT_SEC_FWD,
    KEY_ACT_TENTH_BACK,
    KEY_ACT_TENTH_FWD,
    KEY_ACT_GOTO,
    KEY_ACT_SLOWER,
    KEY_ACT_FASTER,
} KeyAction;

/* Mode bits of KeyRow.modes and .line_modes. */
#define KEYS_IN(m)  (1u << (m))
#define KEYS_IN_ALL ((1u << KEYS__MODES) - 1)

#define KEYS_BIND_MAX 12

typedef struct {
    int code;
    KeyAction act;
} KeyBind;

typedef struct {
    unsigned modes;              /* KEYS_IN bits: where the row is handled and in the help */
    const char *keys;            /* the help's key column; NULL: handled, not listed */
    const char *help;            /* the help's line ("" keys: a second line of the row above) */
    unsigned line_modes;         /* KEYS_IN bits: the key lines that show it */
    int line;                    /* its place on the key line, smaller first */
    const char *line_key;        /* the key as the key line shows it; NULL: keys */
    const char *label;           /* on the key line */
    const char *label_alt;       /* instead of label while the mode's toggle is on (see keys_line) */
    const char *usage;           /* in ddptop --help's keys paragraph (live keys); NULL: not there */
    int usage_at;                /* its line * 10 + its place on that line */
    KeyBind bind[KEYS_BIND_MAX]; /* code -> action, ended by a zero code */
} KeyRow;

/* The whole table, *n rows (tests check it: no key bound twice in a mode). */
const KeyRow *keys_table(int *n);
/* The action of key `code` in mode m; KEY_ACT_NONE when no row binds it. */
KeyAction keys_action(KeysMode m, int code);
/* The ? box of mode m: its title, and its rows in order (those with keys)
 * into out[max]; returns how many. */
const char *keys_help_title(KeysMode m);
int keys_help(KeysMode m, const KeyRow **out, int max);
/* The key line of mode m: {key, label} pairs in their order into
 * out[max]; returns how many. alt: the mode's toggle is on (live: a pause
 * is wanted; replay: the replay is paused), so label_alt shows. ended: the
 * job is over (done or failed), so the keys that act on its ranks (c d p
 * a f w t r) are left out: the line shows only keys that still do something. */
int keys_line(KeysMode m, bool alt, bool ended, const char *(*out)[2], int max);
/* `ddptop --help`'s keys paragraph ("keys: c checkpoint  ..."), one or
 * more lines each ending in '\n', into buf[n]; returns its length
 * (snprintf's: the length it needed). */
int keys_usage(char *buf, size_t n);

#endif
