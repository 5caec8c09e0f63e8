/* export_common.h — what the export renderers (export_*.c) share; not for
 * use outside them. Main thread only.
 */
#ifndef DDPTOP_EXPORT_COMMON_H
#define DDPTOP_EXPORT_COMMON_H

#include <stddef.h>
#include <stdio.h>

/* Flush f; 0, or -1 with "writing WHAT: reason" in err when f reports a
 * write error. The last call of every renderer. */
int export_check_stream(FILE *f, const char *what, char *err, size_t errlen);

/* "exit 0", "signal 9" or "status N" from a waitpid status, into buf[n]. */
void export_wait_text(char *buf, size_t n, int st);

#endif
