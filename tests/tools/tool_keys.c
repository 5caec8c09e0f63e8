/* tool_keys.c — the key table's ? rows for scenario tests, so a test that
 * looks for every key in the drawn help takes its list from the table
 * (view/keys.h) and stays honest when a key is added.
 *
 *   tool_keys live|replay|attach|control
 *       one line per row of that mode's help: its keys, a tab, its line
 *       ("" keys: a second line of the row above)
 *
 * Exit 0, or 2 on bad usage.
 */
#include <stdio.h>
#include <string.h>

#include "view/keys.h"

int main(int argc, char **argv)
{
    static const char *const names[KEYS__MODES] = { "live", "replay", "attach", "control" };
    int m = 0;
    while (argc == 2 && m < KEYS__MODES && strcmp(argv[1], names[m])) m++;
    if (argc != 2 || m == KEYS__MODES) {
        fprintf(stderr, "usage: tool_keys live|replay|attach|control\n");
        return 2;
    }
    const KeyRow *rows[128];
    int n = keys_help((KeysMode)m, rows, 128);
    for (int i = 0; i < n; i++) printf("%s\t%s\n", rows[i]->keys, rows[i]->help);
    return 0;
}
