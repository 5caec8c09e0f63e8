/* store.c — the rendezvous store. See store.h.
 *
 * Keys live in an open-addressing hash table (FNV-1a, linear probing, never
 * deleted: a store only grows, within STORE_MAX_KEYS and STORE_MAX_BYTES).
 * Waiters sit in a pool, chained per bucket of their key's hash, so a set
 * wakes its own waiters without looking at anyone else's; store_tick walks
 * them only when the earliest deadline has come.
 */
#include "run/store.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zmq.h>

#include "net/zsock.h"

#define WAIT_BUCKETS 1024 /* power of two */
#define NO_WAITER    UINT32_MAX

typedef struct {
    char *key; /* NULL: an empty slot */
    uint32_t hash;
    uint8_t *val;
    uint32_t len;
} Entry;

typedef struct {
    char ident[ZS_IDENT_MAX];
    size_t ident_len;
    char key[PROTO_STR_MED];
    uint32_t hash;
    int64_t deadline_ms;
    uint32_t next; /* in its bucket's chain, or the free list */
} Waiter;

struct Store {
    Entry *e; /* [cap], cap a power of two, at most half full */
    size_t n, cap, bytes;
    Waiter *w; /* pool [capw] */
    uint32_t nw, capw, free_w, used_w;
    uint32_t bucket[WAIT_BUCKETS];
    int64_t next_deadline_ms; /* earliest deadline among waiters (INT64_MAX: none) */
};

static uint32_t hash_key(const char *k)
{
    uint32_t h = 2166136261u;
    for (; *k; k++) h = (h ^ (uint8_t)*k) * 16777619u;
    return h;
}

Store *store_new(void)
{
    Store *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->cap = 64;
    s->e = calloc(s->cap, sizeof *s->e);
    if (!s->e) {
        free(s);
        return NULL;
    }
    for (int i = 0; i < WAIT_BUCKETS; i++) s->bucket[i] = NO_WAITER;
    s->free_w = NO_WAITER;
    s->next_deadline_ms = INT64_MAX;
    return s;
}

void store_free(Store **ps)
{
    Store *s = ps ? *ps : NULL;
    if (!s) return;
    for (size_t i = 0; i < s->cap; i++) {
        free(s->e[i].key);
        free(s->e[i].val);
    }
    free(s->e);
    free(s->w);
    free(s);
    *ps = NULL;
}

/* The slot holding key, or the empty slot where it would go. */
static Entry *slot(Entry *e, size_t cap, const char *key, uint32_t h)
{
    for (size_t i = h & (cap - 1);; i = (i + 1) & (cap - 1))
        if (!e[i].key || (e[i].hash == h && !strcmp(e[i].key, key))) return &e[i];
}

const uint8_t *store_peek(const Store *s, const char *key, size_t *len)
{
    const Entry *e = slot(s->e, s->cap, key, hash_key(key));
    if (!e->key) return NULL;
    *len = e->len;
    return e->val;
}

/* Double the table. -1 when out of memory (the table is unchanged). */
static int rehash(Store *s)
{
    size_t nc = s->cap * 2;
    Entry *ne = calloc(nc, sizeof *ne);
    if (!ne) return -1;
    for (size_t i = 0; i < s->cap; i++)
        if (s->e[i].key) *slot(ne, nc, s->e[i].key, s->e[i].hash) = s->e[i];
    free(s->e);
    s->e = ne;
    s->cap = nc;
    return 0;
}

static void send_val(void *router, const void *ident, size_t ident_len, const char *key, const Entry *e, bool ok,
                     const char *why, CodecBuf *buf)
{
    Msg r;
    char err[128];
    msg_init(&r, MSG_VAL);
    snprintf(r.u.store.key, sizeof r.u.store.key, "%s", key);
    r.u.store.ok = ok;
    if (why) snprintf(r.u.store.error, sizeof r.u.store.error, "%s", why);
    if (e) {
        r.u.store.val = e->val; /* borrowed for the send */
        r.u.store.val_len = e->len;
    }
    r.t_ns = proto_now_ns();
    /* A peer that went away is not our problem: ROUTER drops it. */
    zs_send_to(router, ident, ident_len, &r, buf, ZMQ_DONTWAIT, err, sizeof err);
}

void store_refuse(void *router, const void *ident, size_t ident_len, const char *key, const char *why, CodecBuf *buf)
{
    send_val(router, ident, ident_len, key, NULL, false, why, buf);
}

/* A request refused is still answered (ok=false and why), so the peer need
 * not wait for its timeout. Returns -1. */
static int refuse(void *router, const void *ident, size_t ident_len, const char *key, CodecBuf *buf, const char *fmt,
                  unsigned long long n)
{
    char why[PROTO_STR_MED];
    snprintf(why, sizeof why, fmt, n);
    store_refuse(router, ident, ident_len, key, why, buf);
    return -1;
}

/* Take the waiter *link out of its chain and back to the free list. */
static void release(Store *s, uint32_t *link)
{
    uint32_t i = *link;
    *link = s->w[i].next;
    s->w[i].next = s->free_w;
    s->free_w = i;
    s->used_w--;
}

static int handle_set(Store *s, void *router, const void *ident, size_t ident_len, const MsgStore *q, CodecBuf *buf)
{
    if (q->val_len > PROTO_MAX_VAL_BYTES)
        return refuse(router, ident, ident_len, q->key, buf, "value of %llu bytes: at most 1048576 allowed",
                      q->val_len);
    uint32_t h = hash_key(q->key);
    Entry *e = slot(s->e, s->cap, q->key, h);
    size_t klen = strlen(q->key) + 1;
    size_t old = e->key ? e->len : 0, add = e->key ? 0 : klen;
    if (!e->key && s->n >= STORE_MAX_KEYS)
        return refuse(router, ident, ident_len, q->key, buf, "store full: %llu keys held (the most it takes)",
                      STORE_MAX_KEYS);
    if (s->bytes - old + add + q->val_len > STORE_MAX_BYTES)
        return refuse(router, ident, ident_len, q->key, buf,
                      "store full: keys and values would pass %llu bytes (the most it holds)", STORE_MAX_BYTES);
    uint8_t *v = malloc(q->val_len ? q->val_len : 1);
    if (!v) return refuse(router, ident, ident_len, q->key, buf, "out of memory for %llu bytes", q->val_len);
    if (q->val_len) memcpy(v, q->val, q->val_len);
    if (!e->key) {
        /* keep the table at most half full, so probes stay short */
        if ((s->n + 1) * 2 > s->cap && rehash(s) == 0) e = slot(s->e, s->cap, q->key, h);
        char *k = malloc(klen);
        if (!k || (s->n + 1) * 2 > s->cap) {
            free(k);
            free(v);
            return refuse(router, ident, ident_len, q->key, buf, "out of memory for %llu keys", s->n + 1);
        }
        memcpy(k, q->key, klen);
        e->key = k;
        e->hash = h;
        s->n++;
    }
    free(e->val);
    e->val = v;
    e->len = q->val_len;
    s->bytes = s->bytes - old + add + q->val_len;
    send_val(router, ident, ident_len, q->key, NULL, true, NULL, buf);
    /* Wake everyone waiting for this key: only its bucket's chain. */
    uint32_t *link = &s->bucket[h & (WAIT_BUCKETS - 1)];
    while (*link != NO_WAITER) {
        Waiter *w = &s->w[*link];
        if (w->hash == h && !strcmp(w->key, e->key)) {
            send_val(router, w->ident, w->ident_len, w->key, e, true, NULL, buf);
            release(s, link);
        } else {
            link = &w->next;
        }
    }
    return 0;
}

static int handle_get(Store *s, void *router, const void *ident, size_t ident_len, const Msg *m, int64_t now_ms,
                      CodecBuf *buf)
{
    const MsgStore *q = &m->u.store;
    uint32_t h = hash_key(q->key);
    Entry *e = slot(s->e, s->cap, q->key, h);
    if (e->key) {
        send_val(router, ident, ident_len, q->key, m->kind == MSG_GET ? e : NULL, true, NULL, buf);
        return 0;
    }
    if (ident_len == 0 || ident_len > ZS_IDENT_MAX)
        return refuse(router, ident, ident_len, q->key, buf, "routing id of %llu bytes", ident_len);
    if (s->used_w >= STORE_MAX_WAITERS)
        return refuse(router, ident, ident_len, q->key, buf,
                      "store busy: %llu requests are waiting already (the most it holds)", STORE_MAX_WAITERS);
    uint32_t i = s->free_w;
    if (i != NO_WAITER) {
        s->free_w = s->w[i].next;
    } else {
        if (s->nw == s->capw) {
            uint32_t nc = s->capw ? s->capw * 2 : 64;
            Waiter *nw = realloc(s->w, (size_t)nc * sizeof *nw);
            if (!nw) return refuse(router, ident, ident_len, q->key, buf, "out of memory for %llu waiters", nc);
            s->w = nw;
            s->capw = nc;
        }
        i = s->nw++;
    }
    Waiter *w = &s->w[i];
    memcpy(w->ident, ident, ident_len);
    w->ident_len = ident_len;
    snprintf(w->key, sizeof w->key, "%s", q->key);
    w->hash = h;
    /* clamped, so no timeout_ms can overflow the deadline or mean "never" */
    int64_t t = q->timeout_ms > 0 ? q->timeout_ms : STORE_DEFAULT_TIMEOUT_MS;
    if (t > STORE_MAX_TIMEOUT_MS) t = STORE_MAX_TIMEOUT_MS;
    w->deadline_ms = now_ms + t;
    if (w->deadline_ms < s->next_deadline_ms) s->next_deadline_ms = w->deadline_ms;
    uint32_t *head = &s->bucket[h & (WAIT_BUCKETS - 1)];
    w->next = *head;
    *head = i;
    s->used_w++;
    return 0;
}

int store_handle(Store *s, void *router, const void *ident, size_t ident_len, const Msg *m, int64_t now_ms,
                 CodecBuf *buf)
{
    if (m->kind == MSG_SET) return handle_set(s, router, ident, ident_len, &m->u.store, buf);
    if (m->kind == MSG_GET || m->kind == MSG_WAIT) return handle_get(s, router, ident, ident_len, m, now_ms, buf);
    return -1;
}

void store_tick(Store *s, void *router, int64_t now_ms, CodecBuf *buf)
{
    if (now_ms < s->next_deadline_ms) return;
    int64_t next = INT64_MAX;
    for (int b = 0; b < WAIT_BUCKETS; b++) {
        uint32_t *link = &s->bucket[b];
        while (*link != NO_WAITER) {
            Waiter *w = &s->w[*link];
            if (now_ms >= w->deadline_ms) {
                send_val(router, w->ident, w->ident_len, w->key, NULL, false, NULL, buf);
                release(s, link);
            } else {
                if (w->deadline_ms < next) next = w->deadline_ms;
                link = &w->next;
            }
        }
    }
    s->next_deadline_ms = next;
}

size_t store_keys(const Store *s) { return s->n; }
size_t store_waiting(const Store *s) { return s->used_w; }
size_t store_bytes(const Store *s) { return s->bytes; }
