/* err.c — see err.h. */
#include "base/err.h"

#include <stdarg.h>
#include <stdio.h>

static void fill(char *err, size_t errlen, const char *fmt, va_list ap)
{
    if (err && errlen) vsnprintf(err, errlen, fmt, ap);
}

int err_set(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fill(err, errlen, fmt, ap);
    va_end(ap);
    return ERR_FAIL;
}

int err_setv(int status, char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fill(err, errlen, fmt, ap);
    va_end(ap);
    return status;
}

int err_exit_code(int status)
{
    if (status == ERR_OK) return 0;
    return status == ERR_USAGE ? 2 : 1;
}
