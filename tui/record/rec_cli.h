/* rec_cli.h — command-line pieces that `ddptop export` and `ddptop replay`
 * share: both take exactly one recording. Main thread (stderr).
 */
#ifndef DDPTOP_REC_CLI_H
#define DDPTOP_REC_CLI_H

/* A word of the command line that is none of the command's options: the
 * recording's path the first time (into *path, in/out). A word that looks
 * like an option ("-x"; "-" alone is a path) or a second path is bad usage:
 * one line on stderr through usage_fail(who, see, ...), extra_fmt (with its
 * %s, a) wording the second case. Returns 0, or 2 after that line. */
int rec_cli_path(const char *who, const char *see, const char *a, const char **path, const char *extra_fmt);

#endif
