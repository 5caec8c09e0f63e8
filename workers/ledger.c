/* ledger.c — collective ledger and heartbeat thread. See ledger.h.
 *
 * One mutex guards the ring; every operation is a few stores, so the comm
 * thread never waits on the heartbeat for long. The heartbeat has its own
 * socket because ZeroMQ sockets belong to one thread.
 */
#include "ledger.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "codec.h"
#include "zsock.h"

struct Ledger {
    pthread_mutex_t mu;
    LedgerEntry ring[LEDGER_SIZE];
    int64_t next_seq;       /* seq of the next collective */
    int64_t step;
    Phase phase;
};

Ledger *ledger_new(void)
{
    Ledger *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    pthread_mutex_init(&l->mu, NULL);
    l->next_seq = 1;
    return l;
}

void ledger_free(Ledger **pl)
{
    Ledger *l = pl ? *pl : NULL;
    if (!l) return;
    pthread_mutex_destroy(&l->mu);
    free(l);
    *pl = NULL;
}

static LedgerEntry *slot(Ledger *l, int64_t seq)
{
    if (seq < 1 || seq >= l->next_seq || l->next_seq - seq > LEDGER_SIZE) return NULL;
    return &l->ring[seq % LEDGER_SIZE];
}

int64_t ledger_enqueue(Ledger *l, const char *op, int32_t bucket, int64_t step, int64_t bytes)
{
    pthread_mutex_lock(&l->mu);
    int64_t seq = l->next_seq++;
    LedgerEntry *e = &l->ring[seq % LEDGER_SIZE];
    memset(e, 0, sizeof *e);
    e->seq = seq;
    snprintf(e->op, sizeof e->op, "%s", op);
    e->bucket = bucket;
    e->step = step;
    e->bytes = bytes;
    e->enq_ns = proto_now_ns();
    e->state = COLL_ENQUEUED;
    pthread_mutex_unlock(&l->mu);
    return seq;
}

void ledger_start(Ledger *l, int64_t seq)
{
    pthread_mutex_lock(&l->mu);
    LedgerEntry *e = slot(l, seq);
    if (e) { e->start_ns = proto_now_ns(); e->state = COLL_STARTED; }
    pthread_mutex_unlock(&l->mu);
}

void ledger_finish(Ledger *l, int64_t seq, bool ok)
{
    pthread_mutex_lock(&l->mu);
    LedgerEntry *e = slot(l, seq);
    if (e) {
        e->done_ns = proto_now_ns();
        if (!e->start_ns) e->start_ns = e->done_ns;
        e->state = ok ? COLL_DONE : COLL_FAILED;
    }
    pthread_mutex_unlock(&l->mu);
}

int ledger_get(const Ledger *cl, int64_t seq, LedgerEntry *out)
{
    Ledger *l = (Ledger *)cl;
    pthread_mutex_lock(&l->mu);
    LedgerEntry *e = slot(l, seq);
    if (e) *out = *e;
    pthread_mutex_unlock(&l->mu);
    return e ? 0 : -1;
}

int ledger_inflight(const Ledger *cl, LedgerEntry *out)
{
    Ledger *l = (Ledger *)cl;
    int found = 0;
    pthread_mutex_lock(&l->mu);
    int64_t lo = l->next_seq - LEDGER_SIZE;
    for (int64_t s = lo < 1 ? 1 : lo; s < l->next_seq; s++) {
        LedgerEntry *e = &l->ring[s % LEDGER_SIZE];
        if (e->state == COLL_ENQUEUED || e->state == COLL_STARTED) {
            *out = *e;
            found = 1;
            break;
        }
    }
    pthread_mutex_unlock(&l->mu);
    return found;
}

int ledger_recent(const Ledger *cl, LedgerEntry *out, int max)
{
    Ledger *l = (Ledger *)cl;
    int n = 0;
    pthread_mutex_lock(&l->mu);
    for (int64_t s = l->next_seq - 1; s >= 1 && n < max && l->next_seq - s <= LEDGER_SIZE; s--)
        out[n++] = l->ring[s % LEDGER_SIZE];
    pthread_mutex_unlock(&l->mu);
    return n;
}

void ledger_set_progress(Ledger *l, int64_t step, Phase phase)
{
    pthread_mutex_lock(&l->mu);
    l->step = step;
    l->phase = phase;
    pthread_mutex_unlock(&l->mu);
}

/* ---- heartbeat ---- */

struct Heartbeat {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    void *sock;
    int rank, interval_ms;
    Ledger *l;
};

static void *beat_main(void *arg)
{
    Heartbeat *h = arg;
    CodecBuf buf;
    codec_buf_init(&buf);
    pthread_mutex_lock(&h->mu);
    while (!h->stop) {
        pthread_mutex_unlock(&h->mu);
        Msg m;
        msg_init(&m, MSG_BEAT);
        m.rank = h->rank;
        m.t_ns = proto_now_ns();
        LedgerEntry e;
        pthread_mutex_lock(&h->l->mu);
        m.u.beat.step = h->l->step;
        m.u.beat.phase = h->l->phase;
        pthread_mutex_unlock(&h->l->mu);
        if (ledger_inflight(h->l, &e)) {
            m.u.beat.coll_seq = e.seq;
            snprintf(m.u.beat.coll_op, sizeof m.u.beat.coll_op, "%s", e.op);
            m.u.beat.coll_since_ns = e.start_ns ? e.start_ns : e.enq_ns;
        } else {
            m.u.beat.coll_seq = -1;
        }
        char err[128];
        zs_send(h->sock, &m, &buf, ZMQ_DONTWAIT, err, sizeof err);  /* a lost beat is fine */

        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += (long)(h->interval_ms % 1000) * 1000000L;
        ts.tv_sec += h->interval_ms / 1000 + ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_mutex_lock(&h->mu);
        while (!h->stop && pthread_cond_timedwait(&h->cv, &h->mu, &ts) != ETIMEDOUT) {}
    }
    pthread_mutex_unlock(&h->mu);
    codec_buf_done(&buf);
    return NULL;
}

int heartbeat_start(Heartbeat **out, void *zctx, const char *tel_ep, int rank, Ledger *l,
                    int interval_ms, char *err, size_t errlen)
{
    Heartbeat *h = calloc(1, sizeof *h);
    if (!h) { snprintf(err, errlen, "heartbeat: out of memory"); return -1; }
    h->rank = rank;
    h->interval_ms = interval_ms > 0 ? interval_ms : 1000;
    h->l = l;
    h->sock = zmq_socket(zctx, ZMQ_PUSH);
    int hwm = 100, zero = 0;
    if (!h->sock || zmq_setsockopt(h->sock, ZMQ_SNDHWM, &hwm, sizeof hwm) ||
        zmq_setsockopt(h->sock, ZMQ_LINGER, &zero, sizeof zero) || zmq_connect(h->sock, tel_ep)) {
        snprintf(err, errlen, "heartbeat: cannot connect to %s: %s", tel_ep, zmq_strerror(errno));
        if (h->sock) zmq_close(h->sock);
        free(h);
        return -1;
    }
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    if (pthread_create(&h->th, NULL, beat_main, h)) {
        snprintf(err, errlen, "heartbeat: cannot start its thread");
        zmq_close(h->sock);
        free(h);
        return -1;
    }
    *out = h;
    return 0;
}

void heartbeat_stop(Heartbeat **ph)
{
    Heartbeat *h = ph ? *ph : NULL;
    if (!h) return;
    pthread_mutex_lock(&h->mu);
    h->stop = true;
    pthread_cond_signal(&h->cv);
    pthread_mutex_unlock(&h->mu);
    pthread_join(h->th, NULL);
    zmq_close(h->sock);
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    free(h);
    *ph = NULL;
}
