/* dir_store.h — a CommStore over a directory, for tests and benchmarks
 * whose ranks are forked processes (tests/unit/test_comm.c, tests/tools/bench_comm.c,
 * tests/gpu/test_gpu.c): one file per key, written by rename so a reader
 * sees no file or the whole value; a get polls until its timeout.
 *
 *   DirStore ds;
 *   if (dir_store_open(&ds, "test_comm")) ...      mkdtemp under /tmp
 *   CommStore cs = {.ctx = &ds, .set = ds_set, .get = ds_get};
 *   ... fork ranks ...
 *   dir_store_remove(&ds);
 */
#ifndef DDPTOP_TESTS_DIR_STORE_H
#define DDPTOP_TESTS_DIR_STORE_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    char dir[256];
} DirStore;

/* A fresh directory /tmp/NAME.XXXXXX: 0, or -1 with errno. */
static inline int dir_store_open(DirStore *ds, const char *name)
{
    snprintf(ds->dir, sizeof ds->dir, "/tmp/%s.XXXXXX", name);
    return mkdtemp(ds->dir) ? 0 : -1;
}

/* Removes every file of the store, then the directory. */
static inline void dir_store_remove(DirStore *ds)
{
    if (!ds->dir[0]) return;
    DIR *d = opendir(ds->dir);
    if (d) {
        struct dirent *e;
        char path[1024];
        while ((e = readdir(d)) != NULL) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            snprintf(path, sizeof path, "%s/%s", ds->dir, e->d_name);
            unlink(path);
        }
        closedir(d);
    }
    rmdir(ds->dir);
    ds->dir[0] = 0;
}

static inline int64_t ds_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Keys hold '/' (Gloo's PrefixStore joins with it): escape anything that
 * is not [A-Za-z0-9_-], which also keeps keys apart from ".tmp" files. */
static inline int ds_key_path(const DirStore *ds, const char *key, char *out, size_t n)
{
    size_t k = (size_t)snprintf(out, n, "%s/", ds->dir);
    for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
        if (k + 4 >= n) return -1;
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '-')
            out[k++] = (char)*p;
        else
            k += (size_t)snprintf(out + k, n - k, "%%%02X", *p);
    }
    out[k] = 0;
    return 0;
}

static inline int ds_set(void *ctx, const char *key, const void *val, size_t len, char *err, size_t errlen)
{
    const DirStore *ds = ctx;
    char path[1024], tmp[1100];
    static unsigned seq;
    if (ds_key_path(ds, key, path, sizeof path) != 0) {
        snprintf(err, errlen, "key too long: %s", key);
        return -1;
    }
    snprintf(tmp, sizeof tmp, "%s/.tmp.%d.%u", ds->dir, (int)getpid(), seq++);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd < 0) {
        snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
        return -1;
    }
    const char *p = val;
    size_t left = len;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) {
            snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
            close(fd);
            unlink(tmp);
            return -1;
        }
        p += w;
        left -= (size_t)w;
    }
    close(fd);
    /* rename is atomic: a reader sees no file or the whole value */
    if (rename(tmp, path) != 0) {
        snprintf(err, errlen, "rename %s: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* 0 with *val (malloc'd) and *len, 1 after timeout_ms without the key, -1 with err. */
static inline int ds_get(void *ctx, const char *key, void **val, size_t *len, int64_t timeout_ms, char *err,
                         size_t errlen)
{
    const DirStore *ds = ctx;
    char path[1024];
    if (ds_key_path(ds, key, path, sizeof path) != 0) {
        snprintf(err, errlen, "key too long: %s", key);
        return -1;
    }
    int64_t deadline = ds_now_ms() + timeout_ms;
    int fd;
    while ((fd = open(path, O_RDONLY)) < 0) {
        if (errno != ENOENT && errno != EINTR) {
            snprintf(err, errlen, "%s: %s", path, strerror(errno));
            return -1;
        }
        if (ds_now_ms() >= deadline) return 1;
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    size_t n = (size_t)st.st_size, got = 0;
    char *buf = malloc(n ? n : 1);
    while (buf && got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (!buf || got != n) {
        snprintf(err, errlen, "%s: short read", path);
        free(buf);
        return -1;
    }
    *val = buf;
    *len = n;
    return 0;
}

#endif
