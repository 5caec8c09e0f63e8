/* fuzz_common.h — what the fuzz targets share: an input as a file (the
 * readers under test open paths), through a memfd so nothing touches the
 * disk and each run is a regular file of exactly the input's bytes.
 */
#ifndef DDPTOP_FUZZ_COMMON_H
#define DDPTOP_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* Write data into a new memfd; *path gets "/proc/self/fd/N". Returns the
 * fd (close it after the run), or -1. */
static inline int fuzz_as_file(const uint8_t *data, size_t size, char *path, size_t n)
{
    int fd = memfd_create("fuzz", MFD_CLOEXEC);
    if (fd < 0) return -1;
    size_t off = 0;
    while (off < size) {
        ssize_t w = write(fd, data + off, size - off);
        if (w <= 0) {
            close(fd);
            return -1;
        }
        off += (size_t)w;
    }
    snprintf(path, n, "/proc/self/fd/%d", fd);
    return fd;
}

#endif
