/* test_keys.c — the key table (view/keys.h): no key bound twice in a
 * mode, each mode's keys do what its screen says, and the key line and
 * `ddptop --help`'s paragraph come out as they always read. The drawn
 * help box and key line are test_screen.c's and the tmux tests'.
 */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "view/keys.h"
#include "view/ui.h"

static void test_no_key_twice(void)
{
    TEST_BEGIN("no_key_bound_twice_in_a_mode");
    int n;
    const KeyRow *rows = keys_table(&n);
    for (int m = 0; m < KEYS__MODES; m++)
        for (int a = 0; a < n; a++)
            for (int ka = 0; ka < KEYS_BIND_MAX && rows[a].bind[ka].code; ka++)
                for (int b = a; b < n; b++)
                    for (int kb = b == a ? ka + 1 : 0; kb < KEYS_BIND_MAX && rows[b].bind[kb].code; kb++)
                        CHECK(!((rows[a].modes & rows[b].modes & KEYS_IN(m)) &&
                                rows[a].bind[ka].code == rows[b].bind[kb].code),
                              "mode %d: key %d in rows %d and %d", m, rows[a].bind[ka].code, a, b);
    for (int i = 0; i < n; i++) {
        CHECK(!rows[i].keys || rows[i].help, "row %d: keys without a help line", i);
        CHECK(!rows[i].line_modes || rows[i].label, "row %d: on a key line without a label", i);
        CHECK((rows[i].line_modes & ~rows[i].modes) == 0, "row %d: on the key line of a mode it is not in", i);
    }
    TEST_END();
}

static void test_modes(void)
{
    TEST_BEGIN("modes_differ_by_rows");
    CHECK(keys_action(KEYS_LIVE, 'c') == KEY_ACT_CKPT && keys_action(KEYS_LIVE, 'C') == KEY_ACT_CKPT, "live c");
    CHECK(keys_action(KEYS_LIVE, ' ') == KEY_ACT_NONE, "space is the replay's");
    CHECK(keys_action(KEYS_REPLAY, ' ') == KEY_ACT_PLAY && keys_action(KEYS_REPLAY, '=') == KEY_ACT_FASTER, "replay");
    CHECK(keys_action(KEYS_REPLAY, 'p') == KEY_ACT_PAUSE, "replay p: the hook refuses it");
    CHECK(keys_action(KEYS_ATTACH, 'a') == KEY_ACT_ABORT && keys_action(KEYS_ATTACH_CONTROL, 'a') == KEY_ACT_ABORT,
          "attach a");
    CHECK(keys_action(KEYS_ATTACH, 'g') == KEY_ACT_NONE, "g is the replay's");
    for (int m = 0; m < KEYS__MODES; m++)
        CHECK(keys_action((KeysMode)m, UI_KEY_TAB) == KEY_ACT_FOCUS_NEXT &&
                  keys_action((KeysMode)m, 'S') == KEY_ACT_SORT_REVERSE &&
                  keys_action((KeysMode)m, UI_KEY_REDRAW) == KEY_ACT_REDRAW,
              "mode %d lacks the shared keys", m);
    const KeyRow *help[64];
    int n = keys_help(KEYS_ATTACH, help, 64);
    CHECK(n > 4 && !strcmp(help[0]->keys, "c d p a") && !strcmp(help[2]->keys, "t") && !strcmp(help[3]->keys, "q") &&
              !strcmp(help[4]->keys, "?"),
          "read-only help: %d rows, first '%s'", n, n ? help[0]->keys : "");
    CHECK(keys_action(KEYS_LIVE, 't') == KEY_ACT_TREE && keys_action(KEYS_ATTACH, 't') == KEY_ACT_TREE &&
              keys_action(KEYS_REPLAY, 'T') == KEY_ACT_TREE,
          "t: the merged stacks everywhere (the replay says why not)");
    CHECK(!strcmp(keys_help_title(KEYS_REPLAY), "ddptop replay keys"), "replay title");
    TEST_END();
}

static void test_lines(void)
{
    TEST_BEGIN("key_lines_and_usage");
    const char *k[48][2];
    char line[512];
    struct {
        KeysMode m;
        bool alt;
        const char *want;
        bool ended;
    } cases[] = {
        { KEYS_LIVE, false,
          "c ckpt d destroy p pause q quit ? help Tab panel 1-6 zoom Enter rank s sort l log "
          "h hide f fault a abort w stack t tree r report ",
          false },
        { KEYS_LIVE, true,
          "c ckpt d destroy p resume q quit ? help Tab panel 1-6 zoom Enter rank s sort l log "
          "h hide f fault a abort w stack t tree r report ",
          false },
        { KEYS_REPLAY, true,
          "space play , . step < > 1 s [ ] 10% g go to step - + speed q quit ? help Tab panel "
          "1-6 zoom Enter rank ",
          false },
        { KEYS_ATTACH, false, "q detach ? help Tab panel 1-6 zoom Enter rank ", false },
        { KEYS_ATTACH_CONTROL, false, "c ckpt d destroy p pause a abort q detach ? help Tab panel 1-6 zoom Enter rank ",
          false },
        /* after DONE: only the keys that still do something */
        { KEYS_LIVE, false, "q quit ? help Tab panel 1-6 zoom Enter rank s sort l log h hide ", true },
        { KEYS_ATTACH_CONTROL, false, "q detach ? help Tab panel 1-6 zoom Enter rank ", true },
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int n = keys_line(cases[c].m, cases[c].alt, cases[c].ended, k, 48);
        size_t len = 0;
        line[0] = '\0';
        for (int i = 0; i < n; i++) len += (size_t)snprintf(line + len, sizeof line - len, "%s %s ", k[i][0], k[i][1]);
        CHECK(!strcmp(line, cases[c].want), "mode %d key line:\n'%s'", (int)cases[c].m, line);
    }
    char u[1024];
    int n = keys_usage(u, sizeof u);
    const char *want =
        "keys: c checkpoint  d destroy cleanly  p pause/resume  q quit (asks while training)\n"
        "      a abort now (SIGTERM, then SIGKILL)  f inject a fault (menu)  w Python stacks of the "
        "selected rank\n"
        "      ? help  Tab/arrows move  Enter rank detail  1-6 zoom  h/H hide/show  l log  s/S sort\n"
        "      t every rank's stacks merged in one tree  r write a report (stacks, verdict) beside the logs\n";
    CHECK(!strcmp(u, want) && n == (int)strlen(want), "usage:\n%s", u);
    char small[16];
    CHECK(keys_usage(small, sizeof small) == n && strlen(small) == sizeof small - 1, "a short buffer");
    TEST_END();
}

int main(void)
{
    test_no_key_twice();
    test_modes();
    test_lines();
    CHECK_EXIT();
}
