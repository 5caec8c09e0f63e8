/* test_file.c — base/file.h: regular files open (and read normally), a
 * FIFO, a directory and a missing path are refused at once with one line
 * naming the path and what it is; a FIFO never blocks the open.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"
#include "check.h"

static char dir[64];

static void path_of(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", dir, name); }

static void test_regular(void)
{
    TEST_BEGIN("regular file opens and reads, blocking");
    char p[128], err[256] = "", buf[8] = "";
    path_of(p, sizeof p, "r.txt");
    FILE *w = fopen(p, "w");
    fputs("hello", w);
    fclose(w);
    int fd = file_open_regular(p, err, sizeof err);
    CHECK(fd >= 0, "%s", err);
    CHECK(fd < 0 || !(fcntl(fd, F_GETFL) & O_NONBLOCK), "O_NONBLOCK left set");
    CHECK(fd < 0 || read(fd, buf, 5) == 5, "read");
    CHECK(!strcmp(buf, "hello"), "read \"%s\"", buf);
    if (fd >= 0) close(fd);
    FILE *f = file_fopen_regular(p, err, sizeof err);
    CHECK(f && fgets(buf, sizeof buf, f) && !strcmp(buf, "hello"), "fopen: %s", err);
    if (f) fclose(f);
    TEST_END();
}

static void test_refused(void)
{
    TEST_BEGIN("FIFO, directory, missing path refused with one line");
    char p[128], err[256];
    path_of(p, sizeof p, "fifo");
    CHECK(mkfifo(p, 0600) == 0, "mkfifo: %s", strerror(errno));
    alarm(10); /* a blocking open would hang here: fail loudly instead */
    int fd = file_open_regular(p, err, sizeof err);
    alarm(0);
    CHECK(fd < 0 && errno == EINVAL, "fd %d", fd);
    CHECK(strstr(err, p) && strstr(err, "not a regular file (a FIFO)"), "err \"%s\"", err);
    CHECK(!strchr(err, '\n'), "more than one line");
    CHECK(file_fopen_regular(p, err, sizeof err) == NULL && strstr(err, "a FIFO"), "fopen \"%s\"", err);
    fd = file_open_regular(dir, err, sizeof err);
    CHECK(fd < 0 && strstr(err, "not a regular file (a directory)"), "dir: \"%s\"", err);
    path_of(p, sizeof p, "none");
    fd = file_open_regular(p, err, sizeof err);
    CHECK(fd < 0 && errno == ENOENT && strstr(err, "No such file"), "missing: \"%s\"", err);
    fd = file_open_regular("/dev/null", err, sizeof err);
    CHECK(fd < 0 && strstr(err, "character device"), "dev: \"%s\"", err);
    TEST_END();
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/test_file.XXXXXX");
    if (!mkdtemp(dir)) return 1;
    test_regular();
    test_refused();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) {}
    CHECK_EXIT();
}
