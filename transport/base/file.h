/* file.h — opening a file for reading that must be a regular file
 * (checkpoints, recordings, key files, datasets), without ever blocking in
 * open(): a FIFO, a device or a socket at that path is refused with one
 * line naming it, instead of hanging the caller until someone writes.
 * Pure (no global state), any thread.
 */
#ifndef DDPTOP_FILE_H
#define DDPTOP_FILE_H

#include <stddef.h>
#include <stdio.h>

/* Open path read-only (O_CLOEXEC) if it is a regular file. The open itself
 * does not block (O_NONBLOCK, cleared again before returning, so reads
 * block as usual); the check is fstat on the opened descriptor, so there is
 * no window between check and open. Returns the fd, or -1 with err
 * ("PATH: not a regular file (a FIFO)", "PATH: No such file or directory")
 * and errno set (EINVAL for a file that is not regular). */
int file_open_regular(const char *path, char *err, size_t errlen);
/* The same as a stdio stream opened "rb". NULL with err. */
FILE *file_fopen_regular(const char *path, char *err, size_t errlen);
/* "a FIFO", "a directory", "a socket", ... for an st_mode. */
const char *file_kind_name(unsigned mode);

#endif
