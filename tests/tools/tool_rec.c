/* tool_rec.c — recordings for tests, without a live job.
 *
 *   tool_rec write OUT [--ranks N] [--steps S] [--cut-tail K]
 *       write a recording of a synthetic job through record.c: per rank a
 *       start record, hello (ctl), phases init..destroyed, a broadcast, per
 *       step 2 bucket all-reduces and a step, a checkpoint on rank 0 at
 *       step 5 and an eval after it, a log, bye and an exit record; plus
 *       the odd ones: a store set (ctl), a sent cmd, a note, a log with
 *       ill-formed UTF-8, an unknown kind, a malformed frame, and a NaN loss
 *       (rank 1, step 7).
 *       Prints "records=N" (the end record not counted). --cut-tail drops
 *       the last K bytes afterwards, as a crash would.
 *   tool_rec export ARGS...   run export_main (what `ddptop export` runs)
 *
 * The values (keep in step with tests/scenario/record/t_export.sh): wall time base
 * B = 1700000000000000000 ns; rank r step s (from 1) ends at
 * B + 1 s + s*20 ms + r*1 ms with loss (r+1)/(s+1), step_ms 10 + r/2 +
 * (s%3)/4, fwd 3, bwd 4, opt 1, comm_ms 2.5; bucket b's all-reduce starts
 * 8 ms - 2b ms before the step's end, lasts 1.5 ms, 65536*(b+1) bytes.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <msgpack.h>

#include "wire/codec.h"
#include "record/export.h"
#include "wire/protocol.h"
#include "record/record.h"

#define B_NS    1700000000000000000LL
#define MS      1000000LL
#define BUCKETS 2

typedef struct {
    int64_t wall; /* event wall time; arrival is wall + 0.5 ms */
    int src;
    uint8_t *data;
    size_t len;
    int kind; /* 0 frame, 1 start, 2 exit, 3 note */
    int rank, pid, status;
    char text[64];
    int seq; /* creation order, to keep sorting stable */
} Ev;

static Ev *g_ev;
static size_t g_n, g_cap;

static Ev *new_ev(int64_t wall)
{
    if (g_n == g_cap) {
        g_cap = g_cap ? g_cap * 2 : 256;
        g_ev = realloc(g_ev, g_cap * sizeof *g_ev);
        if (!g_ev) {
            fprintf(stderr, "tool_rec: out of memory\n");
            exit(1);
        }
    }
    Ev *e = &g_ev[g_n];
    memset(e, 0, sizeof *e);
    e->wall = wall;
    e->seq = (int)g_n++;
    return e;
}

static void add_msg(int src, Msg *m)
{
    CodecBuf b;
    char err[256];
    codec_buf_init(&b);
    if (codec_encode(m, &b, err, sizeof err)) {
        fprintf(stderr, "tool_rec: encode: %s\n", err);
        exit(1);
    }
    Ev *e = new_ev(m->t_ns);
    e->src = src;
    e->data = b.data; /* ownership moves to the event */
    e->len = b.len;
}

static void add_raw(int src, int64_t wall, const void *data, size_t len)
{
    Ev *e = new_ev(wall);
    e->src = src;
    e->data = malloc(len ? len : 1);
    memcpy(e->data, data, len);
    e->len = len;
}

static void phase(int r, int64_t t, Phase p, const char *detail)
{
    Msg m;
    msg_init(&m, MSG_PHASE);
    m.rank = r;
    m.t_ns = t;
    m.u.phase.phase = p;
    snprintf(m.u.phase.detail, sizeof m.u.phase.detail, "%s", detail);
    add_msg(REC_SRC_TEL, &m);
}

static void coll(int r, int64_t seq, const char *op, int bucket, int64_t step, int64_t bytes, int64_t start,
                 int64_t dur)
{
    Msg m;
    msg_init(&m, MSG_COLL);
    m.rank = r;
    m.t_ns = start + dur;
    MsgColl *c = &m.u.coll;
    c->seq = seq;
    snprintf(c->op, sizeof c->op, "%s", op);
    c->bucket = bucket;
    c->step = step;
    c->bytes = bytes;
    c->enq_ns = start - MS / 10;
    c->start_ns = start;
    c->done_ns = start + dur;
    c->algbw_gbs = (double)bytes / (double)dur;
    c->busbw_gbs = c->algbw_gbs;
    c->count = bytes / 4;
    snprintf(c->dtype, sizeof c->dtype, "float32");
    add_msg(REC_SRC_TEL, &m);
}

/* A frame msgpack-c packs directly: things codec_encode would not write. */
static void pack_str(msgpack_packer *pk, const char *s, size_t n)
{
    msgpack_pack_str(pk, n);
    msgpack_pack_str_body(pk, s, n);
}

static void odd_frames(int64_t t)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    /* A log whose text has an ill-formed UTF-8 byte and a quote. */
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 6);
    pack_str(&pk, "v", 1);
    msgpack_pack_int(&pk, 1);
    pack_str(&pk, "k", 1);
    pack_str(&pk, "log", 3);
    pack_str(&pk, "r", 1);
    msgpack_pack_int(&pk, 1);
    pack_str(&pk, "t", 1);
    msgpack_pack_int64(&pk, t);
    pack_str(&pk, "level", 5);
    pack_str(&pk, "warn", 4);
    pack_str(&pk, "text", 4);
    pack_str(&pk, "bad \xff byte \"q\"", sizeof "bad \xff byte \"q\"" - 1);
    add_raw(REC_SRC_TEL, t, sb.data, sb.size);
    msgpack_sbuffer_destroy(&sb);
    /* A kind from the future, with nested values of every type. */
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 6);
    pack_str(&pk, "v", 1);
    msgpack_pack_int(&pk, 1);
    pack_str(&pk, "k", 1);
    pack_str(&pk, "gossip", 6);
    pack_str(&pk, "r", 1);
    msgpack_pack_int(&pk, 0);
    pack_str(&pk, "t", 1);
    msgpack_pack_int64(&pk, t + MS);
    pack_str(&pk, "payload", 7);
    msgpack_pack_array(&pk, 4);
    msgpack_pack_int(&pk, -3);
    msgpack_pack_double(&pk, 2.0);
    msgpack_pack_nil(&pk);
    msgpack_pack_map(&pk, 1);
    msgpack_pack_int(&pk, 7);
    msgpack_pack_true(&pk);
    pack_str(&pk, "f", 1);
    msgpack_pack_float(&pk, 1.5f);
    add_raw(REC_SRC_TEL, t + MS, sb.data, sb.size);
    msgpack_sbuffer_destroy(&sb);
    /* Not msgpack at all. */
    add_raw(REC_SRC_TEL, t + 2 * MS, "\xc1garbage", 8);
}

static int ev_cmp(const void *a, const void *b)
{
    const Ev *x = a, *y = b;
    if (x->wall != y->wall) return x->wall < y->wall ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int cmd_write(int argc, char **argv)
{
    if (argc < 1) {
        fprintf(stderr, "usage: tool_rec write OUT [--ranks N] [--steps S] [--cut-tail K]\n");
        return 2;
    }
    const char *out = argv[0];
    int ranks = 2, steps = 10;
    long cut = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--ranks"))
            ranks = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps"))
            steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--cut-tail"))
            cut = atol(argv[i + 1]);
        else {
            fprintf(stderr, "tool_rec: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (ranks < 1 || ranks > 64 || steps < 1) {
        fprintf(stderr, "tool_rec: bad --ranks/--steps\n");
        return 2;
    }

    for (int r = 0; r < ranks; r++) {
        int64_t t0 = B_NS + r * MS;
        Ev *e = new_ev(t0 - 50 * MS);
        e->kind = 1, e->rank = r, e->pid = 1000 + r;
        Msg m;
        msg_init(&m, MSG_HELLO);
        m.rank = r;
        m.t_ns = t0;
        MsgHello *h = &m.u.hello;
        h->world = ranks, h->local_world = ranks, h->local_rank = r, h->pid = 1000 + r;
        snprintf(h->host, sizeof h->host, "node-a");
        snprintf(h->device, sizeof h->device, "cpu");
        snprintf(h->backend, sizeof h->backend, "gloo");
        snprintf(h->dataset, sizeof h->dataset, "synthetic");
        snprintf(h->model, sizeof h->model, "mlp:20,16,3");
        h->max_steps = steps;
        add_msg(REC_SRC_CTL, &m);
        phase(r, t0 + 1 * MS, PHASE_INIT, "");
        phase(r, t0 + 100 * MS, PHASE_RENDEZVOUS, "");
        phase(r, t0 + 200 * MS, PHASE_BROADCAST, "");
        int64_t seq = 0;
        coll(r, seq++, "broadcast", -1, 0, 1388, t0 + 210 * MS, 2 * MS);
        phase(r, t0 + 300 * MS, PHASE_TRAIN, "");
        for (int s = 1; s <= steps; s++) {
            int64_t end = B_NS + 1000 * MS + s * 20 * MS + r * MS;
            for (int b = 0; b < BUCKETS; b++)
                coll(r, seq++, "allreduce", b, s, 65536LL * (b + 1), end - 8 * MS + b * 2 * MS, 3 * MS / 2);
            msg_init(&m, MSG_STEP);
            m.rank = r;
            m.t_ns = end;
            MsgStep *st = &m.u.step;
            st->epoch = (s - 1) / 5;
            st->step = s;
            st->loss = (r == 1 && s == 7) ? NAN : (double)(r + 1) / (s + 1.0);
            st->lr = 0.01;
            st->samples = s * 32;
            st->step_ms = 10 + r / 2.0 + (s % 3) / 4.0;
            st->fwd_ms = 3, st->bwd_ms = 4, st->opt_ms = 1;
            st->comm_ms = 2.5, st->exposed_ms = 0.5;
            add_msg(REC_SRC_TEL, &m);
            if (r == 0 && s == 5) {
                phase(r, end + 1 * MS, PHASE_CHECKPOINT, "requested");
                msg_init(&m, MSG_CKPT);
                m.rank = 0;
                m.t_ns = end + 15 * MS;
                m.u.ckpt.step = 5, m.u.ckpt.epoch = 0, m.u.ckpt.ok = true;
                m.u.ckpt.bytes = 4096, m.u.ckpt.ms = 12.5;
                snprintf(m.u.ckpt.path, sizeof m.u.ckpt.path, "ckpt/step-00000005");
                add_msg(REC_SRC_TEL, &m);
                phase(r, end + 16 * MS, PHASE_TRAIN, "");
                msg_init(&m, MSG_EVAL);
                m.rank = 0;
                m.t_ns = end + 17 * MS;
                m.u.eval.epoch = 0, m.u.eval.step = 5, m.u.eval.loss = 0.75, m.u.eval.accuracy = 0.5;
                m.u.eval.correct = 50, m.u.eval.total = 100;
                add_msg(REC_SRC_TEL, &m);
            }
        }
        int64_t te = B_NS + 1000 * MS + (steps + 1) * 20 * MS + r * MS;
        msg_init(&m, MSG_LOG);
        m.rank = r;
        m.t_ns = te;
        snprintf(m.u.log.level, sizeof m.u.log.level, "info");
        snprintf(m.u.log.text, sizeof m.u.log.text, "stopping after step %d: \"done\"\ttab \\ \xe2\x9c\x93", steps);
        add_msg(REC_SRC_TEL, &m);
        phase(r, te + 10 * MS, PHASE_STOPPING, "reached --steps");
        phase(r, te + 20 * MS, PHASE_DESTROYING, "");
        phase(r, te + 30 * MS, PHASE_DESTROYED, "");
        msg_init(&m, MSG_BYE);
        m.rank = r;
        m.t_ns = te + 40 * MS;
        m.u.bye.status = 0;
        m.u.bye.step = steps;
        add_msg(REC_SRC_TEL, &m);
        e = new_ev(te + 60 * MS);
        e->kind = 2, e->rank = r, e->pid = 1000 + r, e->status = 0;
    }
    /* The odd ones. */
    Msg m;
    msg_init(&m, MSG_SET);
    m.rank = ranks - 1;
    m.t_ns = B_NS + 150 * MS;
    snprintf(m.u.store.key, sizeof m.u.store.key, "job/gloo/%d", ranks - 1);
    static uint8_t val[4] = { 0xde, 0xad, 0x00, 0x01 };
    m.u.store.val = val;
    m.u.store.val_len = 4;
    add_msg(REC_SRC_CTL, &m);
    msg_init(&m, MSG_CMD);
    m.t_ns = B_NS + 1090 * MS;
    m.u.cmd.id = 1;
    snprintf(m.u.cmd.op, sizeof m.u.cmd.op, "ckpt");
    add_msg(REC_SRC_SENT, &m);
    Ev *e = new_ev(B_NS + 1091 * MS);
    e->kind = 3, e->rank = -1;
    snprintf(e->text, sizeof e->text, "checkpoint requested");
    odd_frames(B_NS + 1100 * MS + 500000);

    /* Arrival order: by time, then creation. */
    qsort(g_ev, g_n, sizeof *g_ev, ev_cmp);

    char err[256], desc[128];
    snprintf(desc, sizeof desc, "tool_rec synthetic job: %d ranks, %d steps", ranks, steps);
    Recorder *rec = recorder_open(out, ranks, desc, err, sizeof err);
    if (!rec) {
        fprintf(stderr, "tool_rec: %s\n", err);
        return 1;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t mono0 = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec - (g_ev[0].wall - B_NS);
    for (size_t i = 0; i < g_n; i++) {
        Ev *v = &g_ev[i];
        int64_t wall = v->wall + MS / 2, mono = mono0 + (v->wall - B_NS) + MS / 2;
        int rc;
        if (v->kind == 1)
            rc = recorder_write_start(rec, v->rank, v->pid, mono, wall, err, sizeof err);
        else if (v->kind == 2)
            rc = recorder_write_exit(rec, v->rank, v->pid, v->status, "", mono, wall, err, sizeof err);
        else if (v->kind == 3)
            rc = recorder_write_note(rec, v->rank, 0, v->text, mono, wall, err, sizeof err);
        else
            rc = recorder_write(rec, (RecSource)v->src, v->data, v->len, mono, wall, err, sizeof err);
        if (rc) {
            fprintf(stderr, "tool_rec: %s\n", err);
            return 1;
        }
        free(v->data);
    }
    if (recorder_close(&rec, err, sizeof err)) {
        fprintf(stderr, "tool_rec: %s\n", err);
        return 1;
    }
    if (cut > 0) {
        FILE *f = fopen(out, "rb");
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        fclose(f);
        if (truncate(out, n > cut ? n - cut : 0)) {
            perror("truncate");
            return 1;
        }
    }
    printf("records=%zu\n", g_n);
    free(g_ev);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "write")) return cmd_write(argc - 2, argv + 2);
    if (argc >= 2 && !strcmp(argv[1], "export")) return export_main(argc - 2, argv + 2);
    fprintf(stderr, "usage: tool_rec write OUT [--ranks N] [--steps S] [--cut-tail K] | tool_rec export ARGS...\n");
    return 2;
}
