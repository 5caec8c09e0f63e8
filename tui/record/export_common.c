/* export_common.c — see export_common.h. */
#include "record/export_common.h"

#include <errno.h>
#include <string.h>
#include <sys/wait.h>

#include "base/err.h"

int export_check_stream(FILE *f, const char *what, char *err, size_t errlen)
{
    if (fflush(f) || ferror(f)) return err_set(err, errlen, "writing %s: %s", what, strerror(errno));
    return 0;
}

void export_wait_text(char *buf, size_t n, int st)
{
    if (WIFEXITED(st))
        snprintf(buf, n, "exit %d", WEXITSTATUS(st));
    else if (WIFSIGNALED(st))
        snprintf(buf, n, "signal %d", WTERMSIG(st));
    else
        snprintf(buf, n, "status %d", st);
}
