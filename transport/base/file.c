/* file.c — regular files only, opened without blocking. See file.h. */
#include "base/file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"

const char *file_kind_name(unsigned mode)
{
    if (S_ISREG(mode)) return "a regular file";
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    return "not a regular file";
}

int file_open_regular(const char *path, char *err, size_t errlen)
{
    /* O_NONBLOCK: open(2) of a FIFO without a writer returns at once
     * instead of waiting for one; on a regular file it changes nothing. */
    int fd;
    do fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        int e = errno;
        err_set(err, errlen, "%s: %s", path, strerror(e));
        errno = e;
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st)) {
        int e = errno;
        err_set(err, errlen, "%s: %s", path, strerror(e));
        close(fd);
        errno = e;
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        err_set(err, errlen, "%s: not a regular file (%s)", path, file_kind_name(st.st_mode));
        close(fd);
        errno = EINVAL;
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

FILE *file_fopen_regular(const char *path, char *err, size_t errlen)
{
    int fd = file_open_regular(path, err, errlen);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int e = errno;
        err_set(err, errlen, "%s: %s", path, strerror(e));
        close(fd);
        errno = e;
    }
    return f;
}
