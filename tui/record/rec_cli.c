/* rec_cli.c — see rec_cli.h. */
#include "record/rec_cli.h"

#include <stddef.h>

#include "base/usage.h"

int rec_cli_path(const char *who, const char *see, const char *a, const char **path, const char *extra_fmt)
{
    if (a[0] == '-' && a[1]) return usage_fail(who, see, "unknown option \"%s\"", a);
    if (*path) return usage_fail(who, see, extra_fmt, a);
    *path = a;
    return 0;
}
