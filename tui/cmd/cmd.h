/* cmd.h — ddptop's subcommands as data: one CmdEntry per subcommand
 * (tmux's cmd_entry), the table main.c dispatches on and builds the usage
 * lines from, and the helpers every subcommand's argument parsing shares.
 *
 * The argv convention, for every entry (and attach_main, export_main,
 * replay_main): argv holds the subcommand's own arguments, what follows
 * its name (`ddptop replay F --speed 2`: argc 3, argv[0] "F").
 *
 * Files: main.c (the table, dispatch, --help), run.c (run, listen),
 * run_target.c (what the ranks of run run: trainer, script, command),
 * sampler.c, attach.c, stacks.c, export.c, replay.c. Main thread.
 */
#ifndef DDPTOP_CMD_H
#define DDPTOP_CMD_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct {
    const char *name;
    int (*exec)(int argc, char **argv); /* returns the exit status */
    const char *usage;                  /* after "ddptop " in the usage lines */
    const char *summary;                /* its line in ddptop --help's list of commands */
    /* `ddptop NAME --help` after the usage line; NULL: the module that owns
     * the command's line prints its own (attach/client.c, record/replay.c,
     * record/export_cli.c) */
    const char *help;
    bool output_is_result; /* stdout is what was asked for: a failed write is exit 1 */
} CmdEntry;

/* The subcommands in --help's order; the first one is what `ddptop` with
 * no subcommand runs. */
extern const CmdEntry cmd_table[];
extern const int cmd_table_len;

/* The subcommands (run.c, sampler.c, attach.c, export.c, replay.c). */
int cmd_run(int argc, char **argv);
int cmd_listen(int argc, char **argv);
int cmd_sampler(int argc, char **argv);
int cmd_attach(int argc, char **argv);
int cmd_stacks(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_replay(int argc, char **argv);

/* `ddptop --help`: usage lines, the commands, run's options (`ddptop`
 * alone is run), keys (the key table's live rows), exit status. */
void cmd_print_help(FILE *f);
/* The entry named name; NULL when there is none. */
const CmdEntry *cmd_find(const char *name);
/* `ddptop NAME --help` for an entry with its help in the table: its usage
 * line and help (run and listen: the keys and exit status too). */
void cmd_print_cmd_help(FILE *f, const CmdEntry *c);

/* "ddptop: <fmt with arg> (see ddptop --help)" on stderr; returns 2. */
int cmd_usage_error(const char *fmt, const char *arg);
/* A number in [lo, hi] from the value v of option opt into *out; 0, or 2
 * after one line on stderr (v missing, not a number, out of range). */
int cmd_parse_num(const char *opt, const char *v, double lo, double hi, double *out);
/* The same for a whole number, digits only; `name` is the option as the
 * error names it ("-n" for --nproc-per-node too). lo >= 0. */
int cmd_parse_int(const char *name, const char *v, int lo, int hi, int *out);
/* A whole number in [lo, hi], digits only and exact (no sign, no blanks, no
 * exponent, no hex), into *out; 0, or 2 after one line on stderr. */
int cmd_parse_u64(const char *opt, const char *v, uint64_t lo, uint64_t hi, uint64_t *out);

#endif
