/* store.c — the rendezvous store. See store.h.
 *
 * Small and linear on purpose: a job has a few keys per rank. Limits keep a
 * misbehaving peer from growing it without bound.
 */
#include "run/store.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <stdio.h>
#include <zmq.h>

#include "net/zsock.h"

#define STORE_MAX_KEYS    65536
#define STORE_MAX_WAITERS 65536
#define STORE_MAX_VAL     (1u << 20)

typedef struct {
    char key[PROTO_STR_MED];
    uint8_t *val;
    uint32_t len;
} Entry;

typedef struct {
    char ident[ZS_IDENT_MAX];
    size_t ident_len;
    char key[PROTO_STR_MED];
    int64_t deadline_ms;
} Waiter;

struct Store {
    Entry *e;
    size_t n, cap;
    Waiter *w;
    size_t nw, capw;
};

Store *store_new(void) { return calloc(1, sizeof(Store)); }

void store_free(Store **ps)
{
    Store *s = ps ? *ps : NULL;
    if (!s) return;
    for (size_t i = 0; i < s->n; i++) free(s->e[i].val);
    free(s->e);
    free(s->w);
    free(s);
    *ps = NULL;
}

static Entry *find(Store *s, const char *key)
{
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->e[i].key, key)) return &s->e[i];
    return NULL;
}

/* Room for one more of n elements (elem bytes each) in arr, whose capacity
 * *cap doubles from 64. Returns the array, moved or not; NULL when out of
 * memory (arr is still the caller's then). */
static void *grow(void *arr, size_t n, size_t *cap, size_t elem)
{
    if (n < *cap) return arr;
    size_t nc = *cap ? *cap * 2 : 64;
    void *p = realloc(arr, nc * elem);
    if (p) *cap = nc;
    return p;
}

static void reply(void *router, const void *ident, size_t ident_len, const char *key, const Entry *e, bool ok,
                  CodecBuf *buf)
{
    Msg r;
    char err[128];
    msg_init(&r, MSG_VAL);
    snprintf(r.u.store.key, sizeof r.u.store.key, "%s", key);
    r.u.store.ok = ok;
    if (e) {
        r.u.store.val = e->val; /* borrowed for the send */
        r.u.store.val_len = e->len;
    }
    r.t_ns = proto_now_ns();
    /* A peer that went away is not our problem: ROUTER drops it. */
    zs_send_to(router, ident, ident_len, &r, buf, ZMQ_DONTWAIT, err, sizeof err);
}

/* A request refused is still answered (ok=false), so the peer need not
 * wait for its timeout. Returns -1. */
static int refuse(void *router, const void *ident, size_t ident_len, const char *key, CodecBuf *buf)
{
    reply(router, ident, ident_len, key, NULL, false, buf);
    return -1;
}

int store_handle(Store *s, void *router, const void *ident, size_t ident_len, const Msg *m, int64_t now_ms,
                 CodecBuf *buf)
{
    const MsgStore *q = &m->u.store;
    if (m->kind == MSG_SET) {
        if (q->val_len > STORE_MAX_VAL) return refuse(router, ident, ident_len, q->key, buf);
        Entry *e = find(s, q->key);
        if (!e) {
            if (s->n == STORE_MAX_KEYS) return refuse(router, ident, ident_len, q->key, buf);
            Entry *ne = grow(s->e, s->n, &s->cap, sizeof *ne);
            if (!ne) return refuse(router, ident, ident_len, q->key, buf);
            s->e = ne;
            e = &s->e[s->n++];
            memset(e, 0, sizeof *e);
            snprintf(e->key, sizeof e->key, "%s", q->key);
        }
        uint8_t *v = malloc(q->val_len ? q->val_len : 1);
        if (!v) return refuse(router, ident, ident_len, q->key, buf);
        if (q->val_len) memcpy(v, q->val, q->val_len);
        free(e->val);
        e->val = v;
        e->len = q->val_len;
        reply(router, ident, ident_len, q->key, NULL, true, buf);
        /* Wake everyone waiting for this key. */
        size_t j = 0;
        for (size_t i = 0; i < s->nw; i++) {
            Waiter *w = &s->w[i];
            if (!strcmp(w->key, e->key))
                reply(router, w->ident, w->ident_len, w->key, e, true, buf);
            else
                s->w[j++] = *w;
        }
        s->nw = j;
        return 0;
    }
    if (m->kind == MSG_GET || m->kind == MSG_WAIT) {
        Entry *e = find(s, q->key);
        if (e) {
            reply(router, ident, ident_len, q->key, m->kind == MSG_GET ? e : NULL, true, buf);
            return 0;
        }
        if (s->nw == STORE_MAX_WAITERS || ident_len > ZS_IDENT_MAX)
            return refuse(router, ident, ident_len, q->key, buf);
        Waiter *nw = grow(s->w, s->nw, &s->capw, sizeof *nw);
        if (!nw) return refuse(router, ident, ident_len, q->key, buf);
        s->w = nw;
        Waiter *w = &s->w[s->nw++];
        memcpy(w->ident, ident, ident_len);
        w->ident_len = ident_len;
        snprintf(w->key, sizeof w->key, "%s", q->key);
        int64_t t = q->timeout_ms > 0 ? q->timeout_ms : 30000;
        w->deadline_ms = now_ms + t;
        return 0;
    }
    return -1;
}

void store_tick(Store *s, void *router, int64_t now_ms, CodecBuf *buf)
{
    size_t j = 0;
    for (size_t i = 0; i < s->nw; i++) {
        Waiter *w = &s->w[i];
        if (now_ms >= w->deadline_ms)
            reply(router, w->ident, w->ident_len, w->key, NULL, false, buf);
        else
            s->w[j++] = *w;
    }
    s->nw = j;
}

size_t store_keys(const Store *s) { return s->n; }
size_t store_waiting(const Store *s) { return s->nw; }
