/* mem_store.h — a CommStore in memory, for one process (NCCL at world size
 * 1 in tests/gpu/test_gpu.c and tests/gpu/bench_gpu.c): set keeps a copy,
 * get returns the newest value of a key, and a missing key is a timeout at
 * once (nothing else could ever set it). ms_done frees the values. */
#ifndef DDPTOP_TESTS_MEM_STORE_H
#define DDPTOP_TESTS_MEM_STORE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char key[32][128];
    void *val[32];
    size_t len[32];
    int n;
} MemStore;

static inline int ms_set(void *ctx, const char *key, const void *val, size_t len, char *err, size_t errlen)
{
    MemStore *s = ctx;
    if (s->n == 32) {
        snprintf(err, errlen, "memstore full");
        return -1;
    }
    void *copy = malloc(len ? len : 1);
    if (!copy) {
        snprintf(err, errlen, "memstore: out of memory");
        return -1;
    }
    memcpy(copy, val, len);
    snprintf(s->key[s->n], sizeof s->key[0], "%s", key);
    s->val[s->n] = copy;
    s->len[s->n++] = len;
    return 0;
}

static inline int ms_get(void *ctx, const char *key, void **val, size_t *len, int64_t timeout_ms, char *err,
                         size_t errlen)
{
    (void)timeout_ms, (void)err, (void)errlen;
    MemStore *s = ctx;
    for (int i = s->n - 1; i >= 0; i--)
        if (!strcmp(s->key[i], key)) {
            *val = malloc(s->len[i] ? s->len[i] : 1);
            if (!*val) return -1;
            memcpy(*val, s->val[i], s->len[i]);
            *len = s->len[i];
            return 0;
        }
    return 1;
}

static inline void ms_done(MemStore *s)
{
    for (int i = 0; i < s->n; i++) free(s->val[i]);
    s->n = 0;
}

#endif
