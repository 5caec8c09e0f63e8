/* usage.c — see usage.h. */
#include "base/usage.h"

#include <stdio.h>

#include "base/err.h"

int usage_fail(const char *who, const char *see, const char *fmt, const char *arg)
{
    fprintf(stderr, "%s: ", who);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (see %s)\n", see);
    return err_exit_code(ERR_USAGE);
}
