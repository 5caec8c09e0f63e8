/* err.h — one error style for every tree: a caller's buffer filled by
 * err_set, and a typed status travelling up the stack. Entry points choose
 * exit codes from the status (err_exit_code), never from message text.
 * Pure, any thread.
 */
#ifndef DDPTOP_ERR_H
#define DDPTOP_ERR_H

#include <stddef.h>

/* What went wrong, as library functions return it (0 or negative). */
typedef enum {
    ERR_OK = 0,
    ERR_FAIL = -1,  /* the work itself failed (a rank, a socket, a file) */
    ERR_USAGE = -2, /* bad input found before anything started: exit 2 */
} ErrStatus;

/* Format a reason into err[errlen] (when err is not NULL) and return
 * ERR_FAIL, so `return err_set(err, len, "...")` reads as one line. */
int err_set(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The same with a status of the caller's choice (ERR_USAGE, ...). */
int err_setv(int status, char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* The process exit code for a status: 0, 2 for usage, else 1. */
int err_exit_code(int status);

#endif
