/* usage.h — the one line a command prints for bad usage, and its exit
 * status:
 *
 *   ddptop export: --csv given twice (see ddptop export --help)
 *
 * Writes stderr; main thread.
 */
#ifndef DDPTOP_USAGE_H
#define DDPTOP_USAGE_H

/* Print "WHO: " fmt (with its one %s, arg) " (see SEE)" and a newline on
 * stderr. Returns 2, the exit status of bad usage (err_exit_code of
 * ERR_USAGE), so `return usage_fail(...)` ends a main. */
int usage_fail(const char *who, const char *see, const char *fmt, const char *arg);

#endif
