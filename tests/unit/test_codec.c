/* test_codec.c — protocol names and the msgpack codec, without sockets.
 *
 * Round trips of every kind and field, then hostile input: truncations,
 * wrong types, lying lengths, deep nesting, oversize frames and seeded
 * random mutations. Run under ASan/UBSan to make "no crash" mean something:
 * every decode reads from a heap copy of exactly the frame's size.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <msgpack.h>

#include "check.h"
#include "base/utf8.h"
#include "wire/codec.h"
#include "wire/codec_priv.h"
#include "wire/protocol.h"
#include "ref/codec_ref.h"

/* ---- helpers ------------------------------------------------------------- */

/* Decode from an exact-size heap copy so ASan sees any over-read. */
static int dec(const void *p, size_t n, Msg *m, char *err, size_t errlen)
{
    uint8_t *copy = malloc(n ? n : 1);
    if (n) memcpy(copy, p, n);
    err[0] = 0;
    int rc = codec_decode(n ? copy : NULL, n, m, err, errlen);
    free(copy);
    return rc;
}

static void fill_sample(Msg *m, MsgKind k)
{
    msg_init(m, k);
    m->rank = 3;
    m->t_ns = 1700000000123456789LL;
    switch (k) {
    case MSG_HELLO: {
        MsgHello *h = &m->u.hello;
        h->local_rank = 1, h->world = 4, h->local_world = 2, h->pid = 4242;
        snprintf(h->host, sizeof h->host, "node-7.cluster");
        snprintf(h->device, sizeof h->device, "cuda:1");
        snprintf(h->backend, sizeof h->backend, "nccl");
        snprintf(h->version, sizeof h->version, "ddptop 0.1.0 zmq 4.3.4");
        snprintf(h->dataset, sizeof h->dataset, "fashion-mnist");
        snprintf(h->model, sizeof h->model, "mlp:784,256,256,10");
        h->params = 269322, h->batch_size = 64, h->max_steps = 9375;
        h->steps_per_epoch = 235, h->dataset_size = 60000;
        break;
    }
    case MSG_PHASE:
        m->u.phase.phase = PHASE_DESTROYING;
        snprintf(m->u.phase.detail, sizeof m->u.phase.detail, "waiting for rank 2");
        break;
    case MSG_STEP: {
        MsgStep *s = &m->u.step;
        s->epoch = 2, s->step = 471, s->loss = 0.3817, s->lr = 1e-3, s->samples = 30144;
        s->step_ms = 12.5, s->fwd_ms = 3.25, s->bwd_ms = 6.125, s->opt_ms = 0.75;
        s->comm_ms = 4.5, s->exposed_ms = 1.0625, s->drops = 17;
        s->dev_mem = 1288490188, s->dev_mem_total = 150118350848;
        break;
    }
    case MSG_COLL: {
        MsgColl *c = &m->u.coll;
        c->seq = 9001, c->bucket = 2, c->step = 471, c->bytes = 26214400;
        snprintf(c->op, sizeof c->op, "allreduce");
        c->enq_ns = 1700000000000000000LL, c->start_ns = c->enq_ns + 1000;
        c->done_ns = c->enq_ns + 2500000, c->algbw_gbs = 10.48576, c->busbw_gbs = 15.72864;
        c->count = 6553600;
        snprintf(c->dtype, sizeof c->dtype, "float32");
        break;
    }
    case MSG_SHARD: {
        MsgShard *s = &m->u.shard;
        s->epoch = 1, s->seed = -5, s->shuffle = true, s->drop_last = false;
        s->dataset_size = 10, s->num_samples = 3, s->total_size = 12, s->padding = 2;
        s->n_idx = 5;
        s->idx = malloc(5 * sizeof *s->idx);
        int64_t v[5] = { 7, 0, 300, -1, INT64_MAX };
        memcpy(s->idx, v, sizeof v);
        break;
    }
    case MSG_CKPT: {
        MsgCkpt *c = &m->u.ckpt;
        c->step = 400, c->epoch = 1, c->ok = true, c->bytes = 1077290, c->ms = 42.5;
        snprintf(c->path, sizeof c->path, "/ckpt/step-00000400");
        snprintf(c->error, sizeof c->error, "none");
        break;
    }
    case MSG_LOG:
        snprintf(m->u.log.level, sizeof m->u.log.level, "warn");
        snprintf(m->u.log.text, sizeof m->u.log.text, "loss \xe2\x86\x93 0.38\nnext line");
        break;
    case MSG_BEAT: {
        MsgBeat *b = &m->u.beat;
        b->step = 471, b->phase = PHASE_TRAIN, b->coll_seq = 9001, b->coll_bucket = 3;
        snprintf(b->coll_op, sizeof b->coll_op, "allreduce");
        b->coll_since_ns = 1700000000500000000LL;
        b->coll_count = 10;
        snprintf(b->coll_dtype, sizeof b->coll_dtype, "float32");
        snprintf(b->where, sizeof b->where, "train.py:57 save_checkpoint");
        break;
    }
    case MSG_BYE:
        m->u.bye.status = -2, m->u.bye.step = 9375;
        snprintf(m->u.bye.refused, sizeof m->u.bye.refused, "ddptop run -n 2: the script starts its own ranks");
        break;
    case MSG_NODE: /* a restart's launch: what every node's ranks are told */
        snprintf(m->u.node.op, sizeof m->u.node.op, "launch");
        snprintf(m->u.node.job, sizeof m->u.node.job, "ddptop-1-2");
        snprintf(m->u.node.text, sizeof m->u.node.text, "--resume ck/latest");
        m->u.node.restart = 1, m->u.node.spent = 25, m->u.node.status = 3;
        break;
    case MSG_EVAL:
        m->u.eval.epoch = 3, m->u.eval.step = 1876, m->u.eval.loss = 0.40625;
        m->u.eval.accuracy = 0.8575, m->u.eval.correct = 8575, m->u.eval.total = 10000;
        break;
    case MSG_INFO:
        snprintf(m->u.info.dataset, sizeof m->u.info.dataset, "FashionMNIST");
        snprintf(m->u.info.model, sizeof m->u.info.model, "Sequential");
        m->u.info.params = 101770, m->u.info.batch_size = 64, m->u.info.dataset_size = 60000;
        break;
    case MSG_CMD:
        m->u.cmd.id = 12, m->u.cmd.arg = -1;
        snprintf(m->u.cmd.op, sizeof m->u.cmd.op, "ckpt");
        break;
    case MSG_STACK: {
        static const char dump[] = "Thread 0x00007f0000000001 (most recent call first):\n"
                                   "  File \"train.py\", line 57 in save \xe2\x86\x93\n";
        m->u.stack.token = 41, m->u.stack.cut = true;
        m->u.stack.len = sizeof dump - 1;
        m->u.stack.text = malloc(sizeof dump);
        memcpy(m->u.stack.text, dump, sizeof dump);
        break;
    }
    case MSG_SET:
    case MSG_GET:
    case MSG_WAIT:
    case MSG_VAL: {
        MsgStore *s = &m->u.store;
        snprintf(s->key, sizeof s->key, "rdzv/nccl_id");
        s->timeout_ms = 30000;
        s->ok = true;
        s->val_len = 6;
        s->val = malloc(6);
        memcpy(s->val,
               "\x00\x01\xff"
               "abc",
               6);
        if (m->kind == MSG_VAL) snprintf(s->error, sizeof s->error, "store full");
        break;
    }
    case MSG_BURST: {
        /* a step and a coll of the same rank, as bins */
        CodecBuf f;
        codec_buf_init(&f);
        char err[128];
        MsgBurst *bu = &m->u.burst;
        bu->items = malloc(4096);
        bu->len = 0;
        bu->n = 0;
        for (int i = 0; i < 2; i++) {
            Msg in;
            fill_sample(&in, i == 0 ? MSG_STEP : MSG_COLL);
            codec_encode(&in, &f, err, sizeof err);
            bu->items[bu->len++] = 0xc4;
            bu->items[bu->len++] = (uint8_t)f.len;
            memcpy(bu->items + bu->len, f.data, f.len);
            bu->len += (uint32_t)f.len;
            bu->n++;
        }
        codec_buf_done(&f);
        break;
    }
    default: break;
    }
}

#define EQI(f)                                                                            \
    do {                                                                                  \
        if (a->f != b->f) {                                                               \
            snprintf(why, whylen, #f ": %lld != %lld", (long long)a->f, (long long)b->f); \
            return 0;                                                                     \
        }                                                                                 \
    } while (0)
#define EQU(f)                                                                                              \
    do {                                                                                                    \
        if (a->f != b->f) {                                                                                 \
            snprintf(why, whylen, #f ": %llu != %llu", (unsigned long long)a->f, (unsigned long long)b->f); \
            return 0;                                                                                       \
        }                                                                                                   \
    } while (0)
/* Bitwise, so NaN compares equal to itself. */
#define EQD(f)                                                        \
    do {                                                              \
        if (memcmp(&a->f, &b->f, sizeof(double)) != 0) {              \
            snprintf(why, whylen, #f ": %.17g != %.17g", a->f, b->f); \
            return 0;                                                 \
        }                                                             \
    } while (0)
#define EQS(f)                                                                \
    do {                                                                      \
        if (strcmp(a->f, b->f) != 0) {                                        \
            snprintf(why, whylen, #f ": \"%.60s\" != \"%.60s\"", a->f, b->f); \
            return 0;                                                         \
        }                                                                     \
    } while (0)

/* Every field the kind carries on the wire. Store kinds compare only the
 * fields their operation sends (see docs/PROTOCOL.md). */
static int msg_equal(const Msg *a, const Msg *b, char *why, size_t whylen)
{
    EQI(kind);
    EQI(version);
    EQI(rank);
    EQI(t_ns);
    switch (a->kind) {
    case MSG_HELLO:
        EQI(u.hello.local_rank);
        EQI(u.hello.world);
        EQI(u.hello.local_world);
        EQI(u.hello.pid);
        EQS(u.hello.host);
        EQS(u.hello.device);
        EQS(u.hello.backend);
        EQS(u.hello.version);
        EQS(u.hello.dataset);
        EQS(u.hello.model);
        EQI(u.hello.params);
        EQI(u.hello.batch_size);
        EQI(u.hello.max_steps);
        EQI(u.hello.steps_per_epoch);
        EQI(u.hello.dataset_size);
        break;
    case MSG_PHASE:
        EQI(u.phase.phase);
        EQS(u.phase.detail);
        break;
    case MSG_STEP:
        EQI(u.step.epoch);
        EQI(u.step.step);
        EQD(u.step.loss);
        EQD(u.step.lr);
        EQI(u.step.samples);
        EQD(u.step.step_ms);
        EQD(u.step.fwd_ms);
        EQD(u.step.bwd_ms);
        EQD(u.step.opt_ms);
        EQD(u.step.comm_ms);
        EQD(u.step.exposed_ms);
        EQU(u.step.drops);
        EQI(u.step.dev_mem);
        EQI(u.step.dev_mem_total);
        break;
    case MSG_COLL:
        EQI(u.coll.seq);
        EQS(u.coll.op);
        EQI(u.coll.bucket);
        EQI(u.coll.step);
        EQI(u.coll.bytes);
        EQI(u.coll.enq_ns);
        EQI(u.coll.start_ns);
        EQI(u.coll.done_ns);
        EQD(u.coll.algbw_gbs);
        EQD(u.coll.busbw_gbs);
        EQI(u.coll.count);
        EQS(u.coll.dtype);
        break;
    case MSG_SHARD:
        EQI(u.shard.epoch);
        EQI(u.shard.seed);
        EQI(u.shard.shuffle);
        EQI(u.shard.drop_last);
        EQI(u.shard.dataset_size);
        EQI(u.shard.num_samples);
        EQI(u.shard.total_size);
        EQI(u.shard.padding);
        EQU(u.shard.n_idx);
        for (uint32_t i = 0; i < a->u.shard.n_idx; i++) EQI(u.shard.idx[i]);
        break;
    case MSG_CKPT:
        EQI(u.ckpt.step);
        EQI(u.ckpt.epoch);
        EQI(u.ckpt.ok);
        EQS(u.ckpt.path);
        EQI(u.ckpt.bytes);
        EQD(u.ckpt.ms);
        EQS(u.ckpt.error);
        break;
    case MSG_LOG:
        EQS(u.log.level);
        EQS(u.log.text);
        break;
    case MSG_BEAT:
        EQI(u.beat.step);
        EQI(u.beat.phase);
        EQI(u.beat.coll_seq);
        EQS(u.beat.coll_op);
        EQI(u.beat.coll_since_ns);
        EQS(u.beat.where);
        EQI(u.beat.coll_bucket);
        EQI(u.beat.coll_count);
        EQS(u.beat.coll_dtype);
        break;
    case MSG_BYE:
        EQI(u.bye.status);
        EQI(u.bye.step);
        EQS(u.bye.refused);
        break;
    case MSG_NODE:
        EQS(u.node.op);
        EQS(u.node.job);
        EQS(u.node.text);
        EQI(u.node.restart);
        EQI(u.node.spent);
        EQI(u.node.status);
        break;
    case MSG_CMD:
        EQI(u.cmd.id);
        EQS(u.cmd.op);
        EQI(u.cmd.arg);
        break;
    case MSG_STACK:
        EQI(u.stack.token);
        EQI(u.stack.cut);
        EQU(u.stack.len);
        if (a->u.stack.len && memcmp(a->u.stack.text, b->u.stack.text, a->u.stack.len + 1)) {
            snprintf(why, whylen, "u.stack.text differs");
            return 0;
        }
        break;
    case MSG_INFO:
        EQS(u.info.dataset);
        EQS(u.info.model);
        EQI(u.info.params);
        EQI(u.info.batch_size);
        EQI(u.info.dataset_size);
        break;
    case MSG_EVAL:
        EQI(u.eval.epoch);
        EQI(u.eval.step);
        EQI(u.eval.correct);
        EQI(u.eval.total);
        if (a->u.eval.loss != b->u.eval.loss || a->u.eval.accuracy != b->u.eval.accuracy) {
            snprintf(why, whylen, "u.eval floats differ");
            return 0;
        }
        break;
    case MSG_SET:
    case MSG_VAL:
        EQS(u.store.key);
        EQU(u.store.val_len);
        if (a->u.store.val_len && memcmp(a->u.store.val, b->u.store.val, a->u.store.val_len)) {
            snprintf(why, whylen, "u.store.val bytes differ");
            return 0;
        }
        if (a->kind == MSG_VAL) EQI(u.store.ok);
        if (a->kind == MSG_VAL) EQS(u.store.error);
        break;
    case MSG_GET:
    case MSG_WAIT:
        EQS(u.store.key);
        EQI(u.store.timeout_ms);
        break;
    case MSG_BURST:
        EQU(u.burst.n);
        EQU(u.burst.len);
        if (a->u.burst.len && memcmp(a->u.burst.items, b->u.burst.items, a->u.burst.len)) {
            snprintf(why, whylen, "u.burst.items bytes differ");
            return 0;
        }
        break;
    default: break;
    }
    return 1;
}

/* A tiny msgpack writer for hand-made frames. */
typedef struct {
    msgpack_sbuffer sb;
    msgpack_packer pk;
} TB;

static void tb_init(TB *t)
{
    msgpack_sbuffer_init(&t->sb);
    msgpack_packer_init(&t->pk, &t->sb, msgpack_sbuffer_write);
}
static void tb_done(TB *t) { msgpack_sbuffer_destroy(&t->sb); }
static void tb_str(TB *t, const char *s)
{
    msgpack_pack_str(&t->pk, strlen(s));
    msgpack_pack_str_body(&t->pk, s, strlen(s));
}
static void tb_int(TB *t, int64_t v) { msgpack_pack_int64(&t->pk, v); }
/* Map of 2 + extra keys, starting with "v" = 1 and "k" = kind. */
static void tb_head(TB *t, const char *kind, uint32_t extra)
{
    tb_init(t);
    msgpack_pack_map(&t->pk, 2 + extra);
    tb_str(t, "v");
    tb_int(t, PROTO_VERSION);
    tb_str(t, "k");
    tb_str(t, kind);
}

/* Is a top-level key present in an encoded frame? (read with msgpack-c) */
static int frame_has_key(const CodecBuf *b, const char *key, int *index)
{
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    size_t off = 0;
    int found = 0;
    if (msgpack_unpack_next(&up, (const char *)b->data, b->len, &off) == MSGPACK_UNPACK_SUCCESS &&
        up.data.type == MSGPACK_OBJECT_MAP) {
        for (uint32_t i = 0; i < up.data.via.map.size; i++) {
            msgpack_object *k = &up.data.via.map.ptr[i].key;
            if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == strlen(key) &&
                memcmp(k->via.str.ptr, key, strlen(key)) == 0) {
                found = 1;
                if (index) *index = (int)i;
            }
        }
    }
    msgpack_unpacked_destroy(&up);
    return found;
}

static uint64_t rng_state;
static uint64_t rng(void)
{
    /* xorshift64*: deterministic across runs and platforms */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ULL;
}

/* ---- cases --------------------------------------------------------------- */

/* Routing ids of rank processes: what the worker writes, ddptop parses;
 * anything else is not a rank's. */
static void test_rank_idents(void)
{
    TEST_BEGIN("rank_routing_ids");
    char id[PROTO_RANK_IDENT_MAX];
    int64_t pid = -1;
    int n = proto_rank_ident(id, sizeof id, 12, 4321, 0xbeef);
    CHECK(n > 0 && !strcmp(id, "rank-12.4321.0000beef"), "%s", id);
    CHECK(proto_rank_ident_parse(id, (size_t)n, &pid) == 12 && pid == 4321, "parse %s: pid %lld", id, (long long)pid);
    CHECK(proto_rank_ident_parse("rank-3", 6, &pid) == 3 && pid == 0, "plain rank-3");
    CHECK(proto_rank_ident(id, 10, 1, 1, 0) == -1, "too small a buffer");
    CHECK(proto_rank_ident(id, sizeof id, 1, 0, 0) == -1, "pid 0");
    const char *bad[] = { "rank-",
                          "rank-01",
                          "rank-1.",
                          "rank-1.5",
                          "rank-1.5.abc",
                          "rank-1.0.0000beef",
                          "rank-1.5.0000BEEF",
                          "rank-1.5.0000beef0",
                          "rank-x",
                          "evil-cmd",
                          "rank-1.99999999999.0000beef",
                          "rank-99999999999" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(proto_rank_ident_parse(bad[i], strlen(bad[i]), &pid) == -1, "\"%s\" taken for a rank's", bad[i]);
    TEST_END();
}

static void test_names(void)
{
    TEST_BEGIN("names");
    const char *wire[] = { "hello", "phase", "step", "coll", "shard", "ckpt", "log",  "beat", "bye",
                           "cmd",   "set",   "get",  "wait", "val",   "eval", "node", "burst", "info", "stack" };
    for (int k = MSG_HELLO; k < MSG__COUNT; k++) {
        CHECK(strcmp(msg_kind_name((MsgKind)k), wire[k - 1]) == 0, "kind %d is \"%s\"", k, msg_kind_name((MsgKind)k));
        CHECK(msg_kind_from_name(wire[k - 1]) == (MsgKind)k, "from \"%s\"", wire[k - 1]);
    }
    const char *ph[] = { "init",       "rendezvous", "broadcast",  "train",     "paused",
                         "checkpoint", "stopping",   "destroying", "destroyed", "error" };
    for (int p = PHASE_INIT; p < PHASE__COUNT; p++) {
        CHECK(strcmp(phase_name((Phase)p), ph[p - 1]) == 0, "phase %d is \"%s\"", p, phase_name((Phase)p));
        CHECK(phase_from_name(ph[p - 1]) == (Phase)p, "from \"%s\"", ph[p - 1]);
    }
    CHECK(msg_kind_from_name("Step") == MSG_UNKNOWN, "names are case-sensitive");
    CHECK(msg_kind_from_name("") == MSG_UNKNOWN, "empty name");
    CHECK(msg_kind_from_name(NULL) == MSG_UNKNOWN, "NULL name");
    CHECK(msg_kind_from_name("unknown") == MSG_UNKNOWN, "\"unknown\"");
    CHECK(phase_from_name("training") == PHASE_NONE, "unknown phase");
    CHECK(phase_from_name(NULL) == PHASE_NONE, "NULL phase");
    CHECK(msg_kind_name((MsgKind)99) != NULL, "out-of-range kind has a name");
    CHECK(phase_name((Phase)-3) != NULL, "out-of-range phase has a name");
    TEST_END();
}

static void test_init_and_time(void)
{
    TEST_BEGIN("init_defaults_and_time");
    Msg m;
    msg_init(&m, MSG_COLL);
    CHECK(m.rank == -1 && m.t_ns == 0 && m.version == PROTO_VERSION, "envelope defaults");
    CHECK(m.u.coll.bucket == -1, "coll bucket defaults to -1 (not a bucket)");
    msg_init(&m, MSG_BEAT);
    CHECK(m.u.beat.coll_seq == -1, "beat coll_seq defaults to -1 (none in flight)");
    CHECK(m.u.beat.coll_bucket == -1, "beat bucket defaults to -1 (not a bucket)");
    msg_init(&m, MSG_NODE);
    CHECK(m.u.node.spent == -1, "node spent defaults to -1 (no faults spent)");
    msg_init(&m, (MsgKind)1234);
    CHECK(m.kind == MSG_UNKNOWN, "bad kind becomes MSG_UNKNOWN");
    /* msg_init_member (the decoders'): the same envelope, member and
     * defaults, the union's other bytes as they were */
    static const MsgKind member_kinds[] = { MSG_COLL, MSG_BEAT, MSG_NODE, MSG_STEP, MSG_BURST };
    for (size_t i = 0; i < sizeof member_kinds / sizeof member_kinds[0]; i++) {
        Msg a, b;
        memset(&a, 0xee, sizeof a);
        msg_init_member(&a, member_kinds[i]);
        msg_init(&b, member_kinds[i]);
        size_t def = msg_defined_bytes(member_kinds[i]);
        bool kept = true; /* a node's member is the union's largest: nothing past it */
        for (size_t j = def; j < sizeof a; j++) kept = kept && ((uint8_t *)&a)[j] == 0xee;
        CHECK(!memcmp(&a, &b, def) && kept, "%s: msg_init_member is not msg_init over %zu bytes",
              msg_kind_name(member_kinds[i]), def);
    }
    CHECK(msg_defined_bytes(MSG_UNKNOWN) == sizeof m, "no kind: the whole Msg");
    CHECK(msg_defined_bytes(MSG_STEP) < sizeof m, "a step: %zu of %zu bytes", msg_defined_bytes(MSG_STEP), sizeof m);
    msg_done(&m);
    msg_done(&m); /* idempotent */
    msg_done(NULL);
    int64_t t = proto_now_ns();
    CHECK(t > 1577836800LL * 1000000000LL, "proto_now_ns %lld is wall-clock ns", (long long)t);
    TEST_END();
}

static void test_roundtrip(void)
{
    TEST_BEGIN("roundtrip_every_kind");
    CodecBuf b;
    codec_buf_init(&b);
    char err[256], why[256];
    for (int k = MSG_HELLO; k < MSG__COUNT; k++) {
        Msg in, out;
        fill_sample(&in, (MsgKind)k);
        int rc = codec_encode(&in, &b, err, sizeof err);
        CHECK(rc == 0, "%s: encode: %s", msg_kind_name((MsgKind)k), err);
        /* "v" then "k" first, as the design promises other readers */
        size_t h = (b.data[0] & 0xf0) == 0x80 ? 1 : b.data[0] == 0xde ? 3 : 0;
        CHECK(h && b.len > h + 5 && b.data[h] == 0xa1 && b.data[h + 1] == 'v' && b.data[h + 2] == PROTO_VERSION &&
                  b.data[h + 3] == 0xa1 && b.data[h + 4] == 'k',
              "%s: frame does not start with a map of v, k", msg_kind_name((MsgKind)k));
        rc = dec(b.data, b.len, &out, err, sizeof err);
        CHECK(rc == 0, "%s: decode: %s", msg_kind_name((MsgKind)k), err);
        if (rc == 0) CHECK(msg_equal(&in, &out, why, sizeof why), "%s: %s", msg_kind_name((MsgKind)k), why);
        msg_done(&out);
        msg_done(&in);
    }
    codec_buf_done(&b);
    TEST_END();
}

/* The decoder looks for each key from the field after the last one found;
 * every kind must decode alike with its keys reversed, or rotated by any
 * amount (a writer with another order, e.g. Python dicts built otherwise). */
static void test_roundtrip_key_orders(void)
{
    TEST_BEGIN("roundtrip_every_kind_any_key_order");
    CodecBuf b;
    codec_buf_init(&b);
    char err[256], why[256];
    for (int k = MSG_HELLO; k < MSG__COUNT; k++) {
        Msg in, out;
        fill_sample(&in, (MsgKind)k);
        CHECK(codec_encode(&in, &b, err, sizeof err) == 0, "%s: encode: %s", msg_kind_name((MsgKind)k), err);
        msgpack_unpacked up;
        msgpack_unpacked_init(&up);
        size_t off = 0;
        CHECK(msgpack_unpack_next(&up, (const char *)b.data, b.len, &off) == MSGPACK_UNPACK_SUCCESS &&
                  up.data.type == MSGPACK_OBJECT_MAP,
              "%s: unpack", msg_kind_name((MsgKind)k));
        uint32_t n = up.data.via.map.size;
        for (uint32_t rot = 0; rot <= n; rot++) { /* rot == n: reversed */
            msgpack_sbuffer sb;
            msgpack_packer pk;
            msgpack_sbuffer_init(&sb);
            msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
            msgpack_pack_map(&pk, n);
            for (uint32_t i = 0; i < n; i++) {
                uint32_t j = rot == n ? n - 1 - i : (i + rot) % n;
                msgpack_pack_object(&pk, up.data.via.map.ptr[j].key);
                msgpack_pack_object(&pk, up.data.via.map.ptr[j].val);
            }
            int rc = dec(sb.data, sb.size, &out, err, sizeof err);
            CHECK(rc == 0, "%s, order %u: decode: %s", msg_kind_name((MsgKind)k), rot, err);
            if (rc == 0)
                CHECK(msg_equal(&in, &out, why, sizeof why), "%s, order %u: %s", msg_kind_name((MsgKind)k), rot, why);
            msg_done(&out);
            msgpack_sbuffer_destroy(&sb);
        }
        msgpack_unpacked_destroy(&up);
        msg_done(&in);
    }
    codec_buf_done(&b);
    TEST_END();
}

static void test_envelope_optional(void)
{
    TEST_BEGIN("rank_and_time_omitted_when_absent");
    CodecBuf b;
    codec_buf_init(&b);
    char err[256];
    Msg in, out;
    msg_init(&in, MSG_CMD);
    snprintf(in.u.cmd.op, sizeof in.u.cmd.op, "stop");
    CHECK(codec_encode(&in, &b, err, sizeof err) == 0, "encode: %s", err);
    CHECK(!frame_has_key(&b, "r", NULL), "\"r\" present although rank is -1");
    CHECK(!frame_has_key(&b, "t", NULL), "\"t\" present although t_ns is 0");
    CHECK(dec(b.data, b.len, &out, err, sizeof err) == 0, "decode: %s", err);
    CHECK(out.rank == -1 && out.t_ns == 0, "rank %d t %lld", out.rank, (long long)out.t_ns);
    in.rank = 0;
    in.t_ns = 5;
    CHECK(codec_encode(&in, &b, err, sizeof err) == 0, "encode: %s", err);
    int ir = -1, it = -1;
    CHECK(frame_has_key(&b, "r", &ir) && ir == 2, "\"r\" third (at %d)", ir);
    CHECK(frame_has_key(&b, "t", &it) && it == 3, "\"t\" fourth (at %d)", it);
    CHECK(dec(b.data, b.len, &out, err, sizeof err) == 0 && out.rank == 0 && out.t_ns == 5, "rank 0 round trip");
    codec_buf_done(&b);
    TEST_END();
}

static void test_extremes(void)
{
    TEST_BEGIN("roundtrip_extreme_values");
    CodecBuf b;
    codec_buf_init(&b);
    char err[256], why[256];
    Msg in, out;

    msg_init(&in, MSG_STEP);
    in.rank = INT32_MAX;
    in.t_ns = -PROTO_INT_MAX;
    in.u.step.epoch = PROTO_INT_MAX;
    in.u.step.step = -PROTO_INT_MAX;
    in.u.step.loss = NAN;
    in.u.step.lr = -INFINITY;
    in.u.step.step_ms = DBL_MIN;
    in.u.step.fwd_ms = -0.0;
    in.u.step.drops = (uint64_t)PROTO_INT_MAX;
    CHECK(codec_encode(&in, &b, err, sizeof err) == 0, "encode: %s", err);
    CHECK(dec(b.data, b.len, &out, err, sizeof err) == 0, "decode: %s", err);
    CHECK(msg_equal(&in, &out, why, sizeof why), "%s", why);
    CHECK(isnan(out.u.step.loss), "NaN loss survives (a diverged run must show as NaN)");

    /* one past +-2^61 is refused, so a reader's sums and differences of two
     * wire integers cannot overflow (every integer field, the envelope too) */
    const int64_t past[] = { PROTO_INT_MAX + 1, -PROTO_INT_MAX - 1, INT64_MAX, INT64_MIN };
    for (size_t k = 0; k < sizeof past / sizeof past[0]; k++) {
        msg_init(&in, MSG_STEP);
        in.u.step.step = past[k];
        CHECK(codec_encode(&in, &b, err, sizeof err) == 0, "encode: %s", err);
        CHECK(dec(b.data, b.len, &out, err, sizeof err) != 0 && strstr(err, "out of range"), "step %lld accepted (%s)",
              (long long)past[k], err);
        msg_init(&in, MSG_STEP);
        in.t_ns = past[k];
        CHECK(codec_encode(&in, &b, err, sizeof err) == 0, "encode: %s", err);
        CHECK(dec(b.data, b.len, &out, err, sizeof err) != 0, "t %lld accepted", (long long)past[k]);
    }
    msg_init(&in, MSG_STEP);
    in.u.step.drops = UINT64_MAX;
    CHECK(codec_encode(&in, &b, err, sizeof err) == 0, "encode: %s", err);
    CHECK(dec(b.data, b.len, &out, err, sizeof err) != 0, "drops 2^64-1 accepted");

    /* empty shard, empty value with ok=false (a timed-out get) */
    msg_init(&in, MSG_SHARD);
    CHECK(codec_encode(&in, &b, err, sizeof err) == 0, "encode: %s", err);
    CHECK(dec(b.data, b.len, &out, err, sizeof err) == 0, "decode: %s", err);
    CHECK(out.u.shard.n_idx == 0 && out.u.shard.idx == NULL, "empty idx");
    msg_done(&out);
    msg_init(&in, MSG_VAL);
    snprintf(in.u.store.key, sizeof in.u.store.key, "k");
    CHECK(codec_encode(&in, &b, err, sizeof err) == 0, "encode: %s", err);
    CHECK(dec(b.data, b.len, &out, err, sizeof err) == 0, "decode: %s", err);
    CHECK(msg_equal(&in, &out, why, sizeof why), "%s", why);
    CHECK(!out.u.store.ok && out.u.store.val == NULL, "timed-out val");
    msg_done(&out);

    /* a string exactly as long as its field allows survives whole */
    msg_init(&in, MSG_LOG);
    memset(in.u.log.level, 'x', sizeof in.u.log.level - 1);
    memset(in.u.log.text, 'y', sizeof in.u.log.text - 1);
    CHECK(codec_encode(&in, &b, err, sizeof err) == 0, "encode: %s", err);
    CHECK(dec(b.data, b.len, &out, err, sizeof err) == 0, "decode: %s", err);
    CHECK(msg_equal(&in, &out, why, sizeof why), "%s", why);

    /* an unterminated field is sent as its full size, never read past */
    memset(in.u.log.level, 'z', sizeof in.u.log.level);
    CHECK(codec_encode(&in, &b, err, sizeof err) == 0, "encode: %s", err);
    CHECK(dec(b.data, b.len, &out, err, sizeof err) == 0, "decode: %s", err);
    CHECK(strlen(out.u.log.level) == sizeof out.u.log.level - 1, "level truncated to %zu", strlen(out.u.log.level));

    /* invalid UTF-8 is replaced before it reaches Python's strict decoder */
    msg_init(&in, MSG_LOG);
    snprintf(in.u.log.text, sizeof in.u.log.text,
             "a\xff"
             "b\xc3");
    CHECK(codec_encode(&in, &b, err, sizeof err) == 0, "encode: %s", err);
    CHECK(dec(b.data, b.len, &out, err, sizeof err) == 0, "decode: %s", err);
    CHECK(strcmp(out.u.log.text, "a?b?") == 0, "sanitized to \"%s\"", out.u.log.text);
    codec_buf_done(&b);
    TEST_END();
}

static void test_truncate_strings(void)
{
    TEST_BEGIN("long_strings_truncated_safely");
    char err[256];
    Msg m;
    TB t;
    char longhost[1000];
    memset(longhost, 'h', sizeof longhost - 1);
    longhost[sizeof longhost - 1] = 0;
    /* 'é' is 2 bytes; 200 of them cross the 128-byte field mid-character */
    char accents[401];
    for (int i = 0; i < 200; i++) accents[2 * i] = (char)0xc3, accents[2 * i + 1] = (char)0xa9;
    accents[400] = 0;
    tb_head(&t, "hello", 2);
    tb_str(&t, "host");
    tb_str(&t, longhost);
    tb_str(&t, "model");
    tb_str(&t, accents);
    int rc = dec(t.sb.data, t.sb.size, &m, err, sizeof err);
    CHECK(rc == 0, "decode: %s", err);
    CHECK(strlen(m.u.hello.host) == PROTO_STR_MED - 1, "host length %zu", strlen(m.u.hello.host));
    CHECK(strlen(m.u.hello.model) == PROTO_STR_MED - 2, "model cut between characters (%zu)", strlen(m.u.hello.model));
    tb_done(&t);
    TEST_END();
}

static void test_truncations(void)
{
    TEST_BEGIN("every_truncation_fails");
    CodecBuf b;
    codec_buf_init(&b);
    char err[256];
    int bad = 0, total = 0;
    for (int k = MSG_HELLO; k < MSG__COUNT; k++) {
        Msg in, out;
        fill_sample(&in, (MsgKind)k);
        codec_encode(&in, &b, err, sizeof err);
        for (size_t n = 0; n < b.len; n++, total++) {
            int rc = dec(b.data, n, &out, err, sizeof err);
            if (rc != -1 || err[0] == 0) {
                if (bad++ < 5) CHECK(0, "%s cut to %zu of %zu bytes: rc %d", msg_kind_name((MsgKind)k), n, b.len, rc);
            }
            msg_done(&out);
        }
        msg_done(&in);
    }
    CHECK(bad == 0, "%d of %d truncations accepted", bad, total);
    CHECK(total > 500, "only %d truncations tried", total);
    codec_buf_done(&b);
    TEST_END();
}

/* Frame "kind" with one key set to a value of the wrong type. */
typedef enum { W_STR, W_INT, W_NEG, W_FLOAT, W_BOOL, W_NIL, W_ARR_STR, W_BIG, W_MAP } Wrong;

static void pack_wrong(TB *t, Wrong w)
{
    switch (w) {
    case W_STR: tb_str(t, "abc"); break;
    case W_INT: tb_int(t, 5); break;
    case W_NEG: tb_int(t, -5); break;
    case W_FLOAT: msgpack_pack_double(&t->pk, 1.5); break;
    case W_BOOL: msgpack_pack_true(&t->pk); break;
    case W_NIL: msgpack_pack_nil(&t->pk); break;
    case W_ARR_STR:
        msgpack_pack_array(&t->pk, 2);
        tb_int(t, 1);
        tb_str(t, "x");
        break;
    case W_BIG: msgpack_pack_uint64(&t->pk, UINT64_MAX); break;
    case W_MAP: msgpack_pack_map(&t->pk, 0); break;
    }
}

static void test_wrong_types(void)
{
    TEST_BEGIN("wrong_type_for_known_key");
    static const struct {
        const char *kind, *key;
        Wrong w;
    } cases[] = {
        { "step", "loss", W_STR },     { "step", "loss", W_NIL },     { "step", "epoch", W_FLOAT },
        { "step", "step", W_STR },     { "step", "drops", W_NEG },    { "step", "samples", W_BIG },
        { "hello", "world", W_FLOAT }, { "hello", "world", W_BIG },   { "hello", "host", W_INT },
        { "hello", "pid", W_BOOL },    { "phase", "phase", W_INT },   { "phase", "detail", W_MAP },
        { "coll", "bucket", W_STR },   { "coll", "algbw", W_BOOL },   { "shard", "idx", W_STR },
        { "shard", "idx", W_ARR_STR }, { "shard", "shuffle", W_INT }, { "ckpt", "ok", W_STR },
        { "ckpt", "ms", W_STR },       { "log", "text", W_INT },      { "beat", "phase", W_NIL },
        { "beat", "op", W_INT },       { "bye", "status", W_BIG },    { "cmd", "op", W_INT },
        { "set", "val", W_INT },       { "val", "ok", W_INT },        { "get", "timeout_ms", W_FLOAT },
        { "wait", "key", W_INT },      { "step", "r", W_STR },        { "step", "t", W_FLOAT },
        { "cmd", "r", W_BIG },
    };
    char err[256];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        TB t;
        Msg m;
        tb_head(&t, cases[i].kind, 1);
        tb_str(&t, cases[i].key);
        pack_wrong(&t, cases[i].w);
        int rc = dec(t.sb.data, t.sb.size, &m, err, sizeof err);
        char quoted[64];
        snprintf(quoted, sizeof quoted, "\"%s\"", cases[i].key);
        CHECK(rc == -1, "%s.%s (wrong type %d) accepted", cases[i].kind, cases[i].key, (int)cases[i].w);
        CHECK(strstr(err, quoted) && strstr(err, cases[i].kind) && !strchr(err, '\n'),
              "error does not name kind and key on one line: \"%s\"", err);
        msg_done(&m);
        tb_done(&t);
    }
    /* the exact wording the brief asks for */
    TB t;
    Msg m;
    tb_head(&t, "step", 1);
    tb_str(&t, "loss");
    tb_str(&t, "low");
    dec(t.sb.data, t.sb.size, &m, err, sizeof err);
    CHECK(strcmp(err, "step: key \"loss\" is not a number") == 0, "got \"%s\"", err);
    tb_done(&t);
    TEST_END();
}

static void test_accepted_forms(void)
{
    TEST_BEGIN("numbers_in_every_msgpack_form");
    char err[256];
    TB t;
    Msg m;
    tb_head(&t, "step", 6);
    tb_str(&t, "loss");
    msgpack_pack_float(&t.pk, 0.5f); /* float32 */
    tb_str(&t, "lr");
    tb_int(&t, 2); /* int where a float is expected */
    tb_str(&t, "step_ms");
    tb_int(&t, -3);
    tb_str(&t, "epoch");
    msgpack_pack_fix_int64(&t.pk, 7); /* 9-byte signed form of a small value */
    tb_str(&t, "step");
    msgpack_pack_fix_uint8(&t.pk, 200);
    tb_str(&t, "samples");
    tb_int(&t, -12);
    int rc = dec(t.sb.data, t.sb.size, &m, err, sizeof err);
    CHECK(rc == 0, "decode: %s", err);
    CHECK(m.u.step.loss == 0.5 && m.u.step.lr == 2.0 && m.u.step.step_ms == -3.0, "floats %g %g %g", m.u.step.loss,
          m.u.step.lr, m.u.step.step_ms);
    CHECK(m.u.step.epoch == 7 && m.u.step.step == 200 && m.u.step.samples == -12, "ints %lld %lld %lld",
          (long long)m.u.step.epoch, (long long)m.u.step.step, (long long)m.u.step.samples);
    tb_done(&t);

    /* store values may come as str from a hand-written peer */
    tb_head(&t, "set", 2);
    tb_str(&t, "key");
    tb_str(&t, "a");
    tb_str(&t, "val");
    tb_str(&t, "hello");
    rc = dec(t.sb.data, t.sb.size, &m, err, sizeof err);
    CHECK(rc == 0 && m.u.store.val_len == 5 && memcmp(m.u.store.val, "hello", 5) == 0, "str value: rc %d %s", rc, err);
    msg_done(&m);
    tb_done(&t);

    /* a phase a newer peer added is not an error */
    tb_head(&t, "phase", 1);
    tb_str(&t, "phase");
    tb_str(&t, "compiling");
    rc = dec(t.sb.data, t.sb.size, &m, err, sizeof err);
    CHECK(rc == 0 && m.u.phase.phase == PHASE_NONE, "unknown phase: rc %d %s", rc, err);
    tb_done(&t);
    TEST_END();
}

static void test_huge_lengths(void)
{
    TEST_BEGIN("declared_lengths_larger_than_frame");
    static const struct {
        const char *what;
        uint8_t bytes[16];
        size_t n;
        const char *why; /* the pre-scan's reason, not msgpack-c's */
    } cases[] = {
        { "top-level map32 of 4G entries", { 0xdf, 0xff, 0xff, 0xff, 0xff }, 5, "declares" },
        { "top-level array32", { 0xdd, 0xff, 0xff, 0xff, 0xff }, 5, "declares" },
        { "top-level str32", { 0xdb, 0xff, 0xff, 0xff, 0xff }, 5, "declares" },
        { "map16 claiming more pairs than bytes", { 0xde, 0x00, 0x03, 0xa1, 'v', 0x01 }, 6, "declares" },
        { "value array32", { 0x81, 0xa1, 'x', 0xdd, 0xff, 0xff, 0xff, 0xff }, 8, "declares" },
        { "value map32", { 0x81, 0xa1, 'x', 0xdf, 0x7f, 0xff, 0xff, 0xff }, 8, "declares" },
        { "value bin32", { 0x81, 0xa1, 'x', 0xc6, 0xff, 0xff, 0xff, 0xff }, 8, "declares" },
        { "value str32", { 0x81, 0xa1, 'x', 0xdb, 0x00, 0x10, 0x00, 0x00, 'a' }, 9, "declares" },
        { "value ext32", { 0x81, 0xa1, 'x', 0xc9, 0xff, 0xff, 0xff, 0xff, 0x01 }, 9, "declares" },
        { "key str8 too long", { 0x81, 0xd9, 0xff, 'v' }, 4, "declares" },
        { "array16 of 2 with one byte", { 0x81, 0xa1, 'x', 0xdc, 0x00, 0x02, 0xc0 }, 7, "declares" },
        { "fixext16 cut", { 0x81, 0xa1, 'x', 0xd8, 0x01, 0x00 }, 6, "cut short" },
        { "float64 cut", { 0x81, 0xa1, 'x', 0xcb, 0x00, 0x00 }, 6, "cut short" },
        { "reserved byte 0xc1", { 0x81, 0xa1, 'x', 0xc1 }, 4, "not a type" },
    };
    char err[256];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Msg m;
        int rc = dec(cases[i].bytes, cases[i].n, &m, err, sizeof err);
        CHECK(rc == -1 && strstr(err, cases[i].why), "%s: rc %d \"%s\"", cases[i].what, rc, err);
        msg_done(&m);
    }
    TEST_END();
}

static void test_structure(void)
{
    TEST_BEGIN("non_map_int_keys_trailing_empty");
    char err[256];
    Msg m;
    TB t;

    uint8_t arr[] = { 0x92, 0x01, 0x02 }, num[] = { 0x05 }, str[] = { 0xa1, 'v' }, nil[] = { 0xc0 };
    CHECK(dec(arr, sizeof arr, &m, err, sizeof err) == -1 && strstr(err, "not a map"), "array: %s", err);
    CHECK(dec(num, sizeof num, &m, err, sizeof err) == -1 && strstr(err, "not a map"), "int: %s", err);
    CHECK(dec(str, sizeof str, &m, err, sizeof err) == -1, "str: %s", err);
    CHECK(dec(nil, sizeof nil, &m, err, sizeof err) == -1, "nil: %s", err);
    CHECK(dec(NULL, 0, &m, err, sizeof err) == -1 && strstr(err, "empty"), "empty: %s", err);

    /* integer keys: what Python refuses by default, we refuse too */
    tb_init(&t);
    msgpack_pack_map(&t.pk, 3);
    tb_str(&t, "v");
    tb_int(&t, 1);
    tb_str(&t, "k");
    tb_str(&t, "step");
    tb_int(&t, 7);
    tb_int(&t, 1);
    CHECK(dec(t.sb.data, t.sb.size, &m, err, sizeof err) == -1 && strstr(err, "not a string"), "integer key: %s", err);
    tb_done(&t);

    /* valid frame followed by garbage */
    CodecBuf b;
    codec_buf_init(&b);
    Msg in;
    fill_sample(&in, MSG_BYE);
    codec_encode(&in, &b, err, sizeof err);
    uint8_t *g = malloc(b.len + 1);
    memcpy(g, b.data, b.len);
    g[b.len] = 0xc0;
    CHECK(dec(g, b.len + 1, &m, err, sizeof err) == -1 && strstr(err, "trailing"), "trailing byte: %s", err);
    free(g);
    codec_buf_done(&b);

    /* missing envelope keys */
    tb_init(&t);
    msgpack_pack_map(&t.pk, 1);
    tb_str(&t, "k");
    tb_str(&t, "step");
    CHECK(dec(t.sb.data, t.sb.size, &m, err, sizeof err) == -1 && strstr(err, "\"v\""), "missing v: %s", err);
    tb_done(&t);
    tb_init(&t);
    msgpack_pack_map(&t.pk, 1);
    tb_str(&t, "v");
    tb_int(&t, 1);
    CHECK(dec(t.sb.data, t.sb.size, &m, err, sizeof err) == -1 && strstr(err, "\"k\""), "missing k: %s", err);
    tb_done(&t);
    tb_init(&t);
    msgpack_pack_map(&t.pk, 2);
    tb_str(&t, "v");
    tb_int(&t, 1);
    tb_str(&t, "k");
    tb_int(&t, 3);
    CHECK(dec(t.sb.data, t.sb.size, &m, err, sizeof err) == -1 && strstr(err, "\"k\""), "k not a string: %s", err);
    tb_done(&t);
    tb_init(&t);
    msgpack_pack_map(&t.pk, 2);
    tb_str(&t, "v");
    tb_str(&t, "1");
    tb_str(&t, "k");
    tb_str(&t, "step");
    CHECK(dec(t.sb.data, t.sb.size, &m, err, sizeof err) == -1 && strstr(err, "\"v\""), "v not an integer: %s", err);
    tb_done(&t);
    TEST_END();
}

static void test_version(void)
{
    TEST_BEGIN("other_protocol_version_refused");
    char err[256];
    Msg m;
    TB t;
    int64_t versions[] = { 2, 0, -1 };
    for (size_t i = 0; i < 3; i++) {
        tb_init(&t);
        msgpack_pack_map(&t.pk, 2);
        tb_str(&t, "v");
        tb_int(&t, versions[i]);
        tb_str(&t, "k");
        tb_str(&t, "step");
        char want[64];
        snprintf(want, sizeof want, "version %lld, this build speaks %d", (long long)versions[i], PROTO_VERSION);
        CHECK(dec(t.sb.data, t.sb.size, &m, err, sizeof err) == -1 && strstr(err, want), "v=%lld: \"%s\"",
              (long long)versions[i], err);
        tb_done(&t);
    }
    tb_init(&t);
    msgpack_pack_map(&t.pk, 2);
    tb_str(&t, "v");
    msgpack_pack_uint64(&t.pk, UINT64_MAX);
    tb_str(&t, "k");
    tb_str(&t, "step");
    CHECK(dec(t.sb.data, t.sb.size, &m, err, sizeof err) == -1 && strstr(err, "version"), "v=2^64-1: \"%s\"", err);
    tb_done(&t);
    TEST_END();
}

static void test_unknown_kind(void)
{
    TEST_BEGIN("unknown_kind_returns_1");
    char err[256];
    Msg m;
    TB t;
    tb_head(&t, "gossip", 3);
    tb_str(&t, "r");
    tb_int(&t, 5);
    tb_str(&t, "t");
    tb_int(&t, 123);
    tb_str(&t, "whatever");
    msgpack_pack_array(&t.pk, 1);
    tb_int(&t, 1);
    int rc = dec(t.sb.data, t.sb.size, &m, err, sizeof err);
    CHECK(rc == 1, "rc %d: %s", rc, err);
    CHECK(m.kind == MSG_UNKNOWN && m.rank == 5 && m.t_ns == 123, "kind %d rank %d", m.kind, m.rank);
    CHECK(strstr(err, "gossip") != NULL, "err names the kind: %s", err);
    msg_done(&m);
    tb_done(&t);

    /* a known name with a NUL and more after it is not that kind */
    tb_init(&t);
    msgpack_pack_map(&t.pk, 2);
    tb_str(&t, "v");
    tb_int(&t, 1);
    tb_str(&t, "k");
    msgpack_pack_str(&t.pk, 6);
    msgpack_pack_str_body(&t.pk, "step\0x", 6);
    rc = dec(t.sb.data, t.sb.size, &m, err, sizeof err);
    CHECK(rc == 1 && m.kind == MSG_UNKNOWN, "\"step\\0x\": rc %d kind %d", rc, m.kind);
    tb_done(&t);

    /* a kind name longer than any known one */
    char longkind[300];
    memset(longkind, 's', sizeof longkind - 1);
    longkind[sizeof longkind - 1] = 0;
    tb_head(&t, longkind, 0);
    rc = dec(t.sb.data, t.sb.size, &m, err, sizeof err);
    CHECK(rc == 1 && m.kind == MSG_UNKNOWN, "long kind: rc %d", rc);
    tb_done(&t);
    TEST_END();
}

static void test_unknown_keys(void)
{
    TEST_BEGIN("unknown_keys_skipped_any_order");
    char err[256];
    Msg m;
    TB t;
    tb_init(&t);
    msgpack_pack_map(&t.pk, 10);
    /* fields before the envelope, and every msgpack type as a future key */
    tb_str(&t, "loss");
    msgpack_pack_double(&t.pk, 0.25);
    tb_str(&t, "future_map");
    msgpack_pack_map(&t.pk, 1);
    msgpack_pack_int(&t.pk, 1); /* non-string keys deeper down are not our business */
    msgpack_pack_array(&t.pk, 2);
    msgpack_pack_nil(&t.pk);
    tb_str(&t, "x");
    tb_str(&t, "k");
    tb_str(&t, "step");
    tb_str(&t, "future_bin");
    msgpack_pack_bin(&t.pk, 3);
    msgpack_pack_bin_body(&t.pk, "abc", 3);
    tb_str(&t, "v");
    tb_int(&t, 1);
    tb_str(&t, "future_ext");
    msgpack_pack_ext(&t.pk, 4, 42);
    msgpack_pack_ext_body(&t.pk, "wxyz", 4);
    tb_str(&t, "future_f32");
    msgpack_pack_float(&t.pk, 1.0f);
    tb_str(&t, "step");
    tb_int(&t, 99);
    tb_str(&t, "future_nil");
    msgpack_pack_nil(&t.pk);
    tb_str(&t, "");
    tb_str(&t, "empty key");
    int rc = dec(t.sb.data, t.sb.size, &m, err, sizeof err);
    CHECK(rc == 0, "rc %d: %s", rc, err);
    CHECK(m.kind == MSG_STEP && m.u.step.loss == 0.25 && m.u.step.step == 99, "kind %d loss %g step %lld", m.kind,
          m.u.step.loss, (long long)m.u.step.step);
    tb_done(&t);
    TEST_END();
}

/* A beat from before "where" (ddptop's own C trainer, any older worker):
 * it decodes, with no line. */
static void test_beat_without_where(void)
{
    TEST_BEGIN("beat_without_where_has_no_line");
    char err[256];
    Msg m;
    TB t;
    tb_head(&t, "beat", 2);
    tb_str(&t, "step");
    tb_int(&t, 41);
    tb_str(&t, "seq");
    tb_int(&t, 7);
    int rc = dec(t.sb.data, t.sb.size, &m, err, sizeof err);
    CHECK(rc == 0 && m.kind == MSG_BEAT, "rc %d: %s", rc, err);
    CHECK(m.u.beat.step == 41 && m.u.beat.coll_seq == 7 && m.u.beat.where[0] == '\0' && m.u.beat.coll_count == -1 &&
              m.u.beat.coll_dtype[0] == '\0',
          "step %lld seq %lld where '%s' count %lld", (long long)m.u.beat.step, (long long)m.u.beat.coll_seq,
          m.u.beat.where, (long long)m.u.beat.coll_count);
    tb_done(&t);
    /* and a new one round trips its line */
    Msg b;
    msg_init(&b, MSG_BEAT);
    b.rank = 1;
    snprintf(b.u.beat.where, sizeof b.u.beat.where, "ddp_basics.py:88 main");
    CodecBuf out;
    codec_buf_init(&out);
    CHECK(codec_encode(&b, &out, err, sizeof err) == 0, "encode: %s", err);
    rc = codec_decode(out.data, out.len, &m, err, sizeof err);
    CHECK(rc == 0 && !strcmp(m.u.beat.where, "ddp_basics.py:88 main"), "rc %d where '%s'", rc, m.u.beat.where);
    codec_buf_done(&out);
    TEST_END();
}

/* A coll from a worker older than "count" and "dtype" (the ten keys it
 * sent) decodes, its shape unknown (-1, ""); a new one carries both, and
 * the fast path takes it as the encoder writes it. */
static void test_coll_shape_optional(void)
{
    TEST_BEGIN("coll_count_dtype_optional");
    char err[256];
    Msg m;
    TB t;
    tb_head(&t, "coll", 10);
    const char *ik[] = { "seq", "bucket", "step", "bytes", "enq", "start", "done" };
    for (int i = 0; i < 7; i++) tb_str(&t, ik[i]), tb_int(&t, 40 + i);
    tb_str(&t, "op"), tb_str(&t, "allreduce");
    tb_str(&t, "algbw"), msgpack_pack_double(&t.pk, 1.5);
    tb_str(&t, "busbw"), msgpack_pack_double(&t.pk, 1.5);
    int rc = dec(t.sb.data, t.sb.size, &m, err, sizeof err);
    CHECK(rc == 0 && m.kind == MSG_COLL && m.u.coll.seq == 40 && m.u.coll.count == -1 && m.u.coll.dtype[0] == 0,
          "rc %d count %lld dtype '%s': %s", rc, (long long)m.u.coll.count, m.u.coll.dtype, err);
    tb_done(&t);
    Msg c;
    msg_init(&c, MSG_COLL);
    c.rank = 1, c.u.coll.seq = 42, c.u.coll.count = 10;
    snprintf(c.u.coll.op, sizeof c.u.coll.op, "allreduce");
    snprintf(c.u.coll.dtype, sizeof c.u.coll.dtype, "float32");
    CodecBuf out;
    codec_buf_init(&out);
    CHECK(codec_encode(&c, &out, err, sizeof err) == 0, "encode: %s", err);
    memset(&m, 0, sizeof m);
    rc = codec_fast_decode(out.data, out.len, &m);
    CHECK(rc == 0 && m.u.coll.count == 10 && !strcmp(m.u.coll.dtype, "float32"), "fast rc %d count %lld dtype '%s'", rc,
          (long long)m.u.coll.count, m.u.coll.dtype);
    codec_buf_done(&out);
    TEST_END();
}

static void test_oversize(void)
{
    TEST_BEGIN("oversize_frames_and_limits");
    char err[256];
    Msg m, in;
    CodecBuf b;
    codec_buf_init(&b);

    size_t n = (size_t)PROTO_MAX_FRAME_BYTES + 1;
    uint8_t *big = calloc(1, n);
    big[0] = 0x80;
    CHECK(codec_decode(big, n, &m, err, sizeof err) == -1 && strstr(err, "exceeds"), "oversize frame: %s", err);
    free(big);

    /* the largest shard allowed round-trips ... */
    msg_init(&in, MSG_SHARD);
    in.u.shard.n_idx = PROTO_MAX_IDX;
    in.u.shard.idx = malloc(PROTO_MAX_IDX * sizeof(int64_t));
    for (uint32_t i = 0; i < PROTO_MAX_IDX; i++) in.u.shard.idx[i] = (int64_t)i * 4099 % 70001;
    CHECK(codec_encode(&in, &b, err, sizeof err) == 0, "max shard: %s", err);
    CHECK(b.len <= PROTO_MAX_FRAME_BYTES, "max shard is %zu bytes", b.len);
    int rc = codec_decode(b.data, b.len, &m, err, sizeof err);
    CHECK(rc == 0 && m.u.shard.n_idx == PROTO_MAX_IDX &&
              m.u.shard.idx[PROTO_MAX_IDX - 1] == in.u.shard.idx[PROTO_MAX_IDX - 1],
          "max shard decode: %s", err);
    msg_done(&m);
    /* ... one more is refused by the encoder */
    in.u.shard.n_idx = PROTO_MAX_IDX + 1;
    CHECK(codec_encode(&in, &b, err, sizeof err) == -1, "encoded %u indices", PROTO_MAX_IDX + 1);
    in.u.shard.n_idx = PROTO_MAX_IDX;
    msg_done(&in);

    /* ... and by the decoder (hand-made) */
    TB t;
    tb_head(&t, "shard", 1);
    tb_str(&t, "idx");
    msgpack_pack_array(&t.pk, PROTO_MAX_IDX + 1);
    for (uint32_t i = 0; i < PROTO_MAX_IDX + 1; i++) msgpack_pack_fix_uint8(&t.pk, 1);
    rc = codec_decode(t.sb.data, t.sb.size, &m, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "idx"), "too many indices: rc %d %s", rc, err);
    tb_done(&t);

    /* store value: 1 MiB passes, one byte more does not */
    msg_init(&in, MSG_SET);
    snprintf(in.u.store.key, sizeof in.u.store.key, "blob");
    in.u.store.val_len = PROTO_MAX_VAL_BYTES;
    in.u.store.val = calloc(1, PROTO_MAX_VAL_BYTES + 1);
    CHECK(codec_encode(&in, &b, err, sizeof err) == 0, "1 MiB value: %s", err);
    rc = codec_decode(b.data, b.len, &m, err, sizeof err);
    CHECK(rc == 0 && m.u.store.val_len == PROTO_MAX_VAL_BYTES, "1 MiB value decode: %s", err);
    msg_done(&m);
    in.u.store.val_len = PROTO_MAX_VAL_BYTES + 1;
    CHECK(codec_encode(&in, &b, err, sizeof err) == -1, "encoded a value over the limit");
    tb_head(&t, "set", 1);
    tb_str(&t, "val");
    msgpack_pack_bin(&t.pk, PROTO_MAX_VAL_BYTES + 1);
    msgpack_pack_bin_body(&t.pk, in.u.store.val, PROTO_MAX_VAL_BYTES + 1);
    rc = codec_decode(t.sb.data, t.sb.size, &m, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "\"val\""), "value over the limit: rc %d %s", rc, err);
    tb_done(&t);
    in.u.store.val_len = PROTO_MAX_VAL_BYTES;
    msg_done(&in);

    /* many tiny objects under an unknown key: bounded before msgpack-c sees them */
    tb_head(&t, "step", 1);
    tb_str(&t, "junk");
    msgpack_pack_array(&t.pk, 2 * PROTO_MAX_IDX);
    for (uint32_t i = 0; i < 2 * PROTO_MAX_IDX; i++) msgpack_pack_nil(&t.pk);
    rc = codec_decode(t.sb.data, t.sb.size, &m, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "objects"), "2M objects: rc %d %s", rc, err);
    tb_done(&t);
    codec_buf_done(&b);
    TEST_END();
}

static void test_encode_errors(void)
{
    TEST_BEGIN("encode_refuses_bad_messages");
    char err[256];
    CodecBuf b;
    codec_buf_init(&b);
    Msg m;
    msg_init(&m, MSG_UNKNOWN);
    CHECK(codec_encode(&m, &b, err, sizeof err) == -1, "encoded MSG_UNKNOWN");
    msg_init(&m, MSG_PHASE);
    m.u.phase.phase = (Phase)77;
    CHECK(codec_encode(&m, &b, err, sizeof err) == -1 && strstr(err, "phase"), "bad phase: %s", err);
    msg_init(&m, MSG_SHARD);
    m.u.shard.n_idx = 3;
    CHECK(codec_encode(&m, &b, err, sizeof err) == -1 && strstr(err, "NULL"), "NULL idx: %s", err);
    msg_init(&m, MSG_VAL);
    m.u.store.val_len = 3;
    CHECK(codec_encode(&m, &b, err, sizeof err) == -1 && strstr(err, "NULL"), "NULL val: %s", err);
    CHECK(b.len == 0, "failed encode leaves an empty buffer (%zu)", b.len);
    codec_buf_done(&b);
    TEST_END();
}

static void nest(TB *t, int levels)
{
    for (int i = 0; i < levels; i++) msgpack_pack_array(&t->pk, i + 1 < levels ? 1 : 0);
}

static void test_nesting(void)
{
    TEST_BEGIN("deep_nesting_refused");
    char err[256];
    Msg m;
    TB t;
    /* the message map is level 1: 15 more levels are allowed, 16 are not */
    tb_head(&t, "step", 1);
    tb_str(&t, "x");
    nest(&t, 15);
    int rc = dec(t.sb.data, t.sb.size, &m, err, sizeof err);
    CHECK(rc == 0, "depth 16: rc %d %s", rc, err);
    tb_done(&t);
    tb_head(&t, "step", 1);
    tb_str(&t, "x");
    nest(&t, 16);
    rc = dec(t.sb.data, t.sb.size, &m, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "nesting"), "depth 17: rc %d %s", rc, err);
    tb_done(&t);
    /* far deeper than any recursion could survive */
    size_t n = 3 + 2 + 1000000;
    uint8_t *deep = malloc(n);
    memcpy(deep, "\x81\xa1x", 3);
    memset(deep + 3, 0x91, n - 3);
    deep[n - 1] = 0xc0;
    rc = dec(deep, n, &m, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "nesting"), "depth 1e6: rc %d %s", rc, err);
    free(deep);
    TEST_END();
}

static void test_duplicates(void)
{
    TEST_BEGIN("repeated_keys_do_not_leak");
    char err[256];
    Msg m;
    TB t;
    tb_head(&t, "shard", 2);
    tb_str(&t, "idx");
    msgpack_pack_array(&t.pk, 2);
    tb_int(&t, 1);
    tb_int(&t, 2);
    tb_str(&t, "idx");
    msgpack_pack_array(&t.pk, 1);
    tb_int(&t, 9);
    int rc = dec(t.sb.data, t.sb.size, &m, err, sizeof err);
    CHECK(rc == 0 && m.u.shard.n_idx == 1 && m.u.shard.idx[0] == 9, "last idx wins: rc %d", rc);
    msg_done(&m);
    tb_done(&t);
    /* an error after a heap field leaves nothing to free (LeakSanitizer checks) */
    tb_head(&t, "set", 2);
    tb_str(&t, "val");
    msgpack_pack_bin(&t.pk, 2);
    msgpack_pack_bin_body(&t.pk, "ab", 2);
    tb_str(&t, "key");
    tb_int(&t, 1);
    rc = dec(t.sb.data, t.sb.size, &m, err, sizeof err);
    CHECK(rc == -1 && m.u.store.val == NULL, "error after val: rc %d", rc);
    tb_done(&t);
    TEST_END();
}

/* One encoded sample frame of every kind (frames[MSG_UNKNOWN] stays empty). */
static void sample_frames(CodecBuf frames[MSG__COUNT])
{
    char err[256];
    for (int k = 0; k < MSG__COUNT; k++) {
        codec_buf_init(&frames[k]);
        if (k == MSG_UNKNOWN) continue;
        Msg in;
        fill_sample(&in, (MsgKind)k);
        codec_encode(&in, &frames[k], err, sizeof err);
        msg_done(&in);
    }
}

/* ---- the reference decoder's tree (tests/ref/codec_ref.h) against msgpack-c ---- */

/* Same tree: types, values, sizes, and strings, bins and exts pointing at
 * the same bytes of the frame. */
static bool same_obj(const msgpack_object *a, const msgpack_object *b)
{
    if (a->type != b->type) return false;
    switch (a->type) {
    case MSGPACK_OBJECT_NIL: return true;
    case MSGPACK_OBJECT_BOOLEAN: return a->via.boolean == b->via.boolean;
    case MSGPACK_OBJECT_POSITIVE_INTEGER: return a->via.u64 == b->via.u64;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: return a->via.i64 == b->via.i64;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64: return !memcmp(&a->via.f64, &b->via.f64, sizeof a->via.f64);
    case MSGPACK_OBJECT_STR:
    case MSGPACK_OBJECT_BIN:
        return a->via.str.size == b->via.str.size && !memcmp(a->via.str.ptr, b->via.str.ptr, a->via.str.size);
    case MSGPACK_OBJECT_EXT:
        return a->via.ext.type == b->via.ext.type && a->via.ext.size == b->via.ext.size &&
               !memcmp(a->via.ext.ptr, b->via.ext.ptr, a->via.ext.size);
    case MSGPACK_OBJECT_ARRAY:
        if (a->via.array.size != b->via.array.size) return false;
        for (uint32_t i = 0; i < a->via.array.size; i++)
            if (!same_obj(&a->via.array.ptr[i], &b->via.array.ptr[i])) return false;
        return true;
    case MSGPACK_OBJECT_MAP:
        if (a->via.map.size != b->via.map.size) return false;
        for (uint32_t i = 0; i < a->via.map.size; i++)
            if (!same_obj(&a->via.map.ptr[i].key, &b->via.map.ptr[i].key) ||
                !same_obj(&a->via.map.ptr[i].val, &b->via.map.ptr[i].val))
                return false;
        return true;
    }
    return false;
}

/* 1: ref_unpack and msgpack_unpack_next agree on a pre-scanned frame;
 * 0: the pre-scan refused it; -1: they disagree. */
static int unpack_agrees(const uint8_t *p, size_t n)
{
    char err[256];
    uint64_t objects = 0;
    if (ref_prescan(p, n, &objects, err, sizeof err) < 0) return 0;
    msgpack_object mine;
    if (ref_unpack(p, n, objects, &mine) < 0) return -1;
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    size_t off = 0;
    int ok = msgpack_unpack_next(&up, (const char *)p, n, &off) == MSGPACK_UNPACK_SUCCESS && off == n &&
             same_obj(&mine, &up.data);
    msgpack_unpacked_destroy(&up);
    return ok ? 1 : -1;
}

static void test_unpack_matches_msgpack_c(void)
{
    TEST_BEGIN("unpack_makes_the_tree_msgpack_c_makes");
    /* every type, each width, signs at the edges, empty and nested containers */
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    static const int64_t ints[] = { 0,         1,  127, 128, 255,  256,  65535,  65536,  4294967295LL,  4294967296LL,
                                    INT64_MAX, -1, -32, -33, -128, -129, -32768, -32769, -2147483648LL, -2147483649LL,
                                    INT64_MIN };
    msgpack_pack_map(&pk, 9);
    msgpack_pack_str_with_body(&pk, "ints", 4);
    msgpack_pack_array(&pk, sizeof ints / sizeof ints[0] + 2);
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) msgpack_pack_int64(&pk, ints[i]);
    msgpack_pack_uint64(&pk, UINT64_MAX);
    msgpack_pack_int8(&pk, 5); /* a signed type holding a positive value */
    msgpack_pack_str_with_body(&pk, "floats", 6);
    msgpack_pack_array(&pk, 4);
    msgpack_pack_float(&pk, 1.5f);
    msgpack_pack_double(&pk, -0.1);
    msgpack_pack_double(&pk, NAN);
    msgpack_pack_double(&pk, INFINITY);
    msgpack_pack_str_with_body(&pk, "misc", 4);
    msgpack_pack_array(&pk, 5);
    msgpack_pack_nil(&pk);
    msgpack_pack_true(&pk);
    msgpack_pack_false(&pk);
    msgpack_pack_array(&pk, 0);
    msgpack_pack_map(&pk, 0);
    static char big[70000];
    memset(big, 'x', sizeof big);
    static const size_t lens[] = { 0, 31, 32, 255, 256, 65535, 65536 };
    msgpack_pack_str_with_body(&pk, "strs", 4);
    msgpack_pack_array(&pk, sizeof lens / sizeof lens[0]);
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) msgpack_pack_str_with_body(&pk, big, lens[i]);
    msgpack_pack_str_with_body(&pk, "bins", 4);
    msgpack_pack_array(&pk, 3);
    msgpack_pack_bin_with_body(&pk, big, 3);
    msgpack_pack_bin_with_body(&pk, big, 300);
    msgpack_pack_bin_with_body(&pk, big, 65536);
    static const size_t exts[] = { 1, 2, 4, 8, 16, 3, 300, 65536 };
    msgpack_pack_str_with_body(&pk, "exts", 4);
    msgpack_pack_array(&pk, sizeof exts / sizeof exts[0]);
    for (size_t i = 0; i < sizeof exts / sizeof exts[0]; i++) msgpack_pack_ext_with_body(&pk, big, exts[i], -7);
    msgpack_pack_str_with_body(&pk, "deep", 4);
    for (int d = 0; d < 10; d++) msgpack_pack_array(&pk, 1);
    msgpack_pack_map(&pk, 1);
    msgpack_pack_int(&pk, 3);
    msgpack_pack_str_with_body(&pk, "v", 1);
    msgpack_pack_str_with_body(&pk, "big", 3);
    msgpack_pack_array(&pk, 20000); /* larger than the array kept between calls */
    for (int i = 0; i < 20000; i++) msgpack_pack_int(&pk, i * 7919);
    msgpack_pack_int(&pk, 42);
    msgpack_pack_str_with_body(&pk, "k", 1);
    int rc = unpack_agrees((const uint8_t *)sb.data, sb.size);
    CHECK(rc == 1, "every type: %s", rc == 0 ? "pre-scan refused it" : "trees differ");
    ref_unpack_release();
    msgpack_sbuffer_destroy(&sb);

    /* the protocol's own frames, then mutated ones the pre-scan lets through */
    CodecBuf frames[MSG__COUNT];
    sample_frames(frames);
    for (int k = 1; k < MSG__COUNT; k++)
        CHECK(unpack_agrees(frames[k].data, frames[k].len) == 1, "%s frame", msg_kind_name((MsgKind)k));
    rng_state = 0x0bad5eed17ULL;
    int agreed = 0, differ = 0;
    uint8_t buf[4096];
    for (int iter = 0; iter < 20000; iter++) {
        const CodecBuf *src = &frames[1 + rng() % (MSG__COUNT - 1)];
        size_t n = src->len < sizeof buf ? src->len : sizeof buf;
        memcpy(buf, src->data, n);
        for (int j = 0; j < 2 && n > 0; j++) buf[rng() % n] = (uint8_t)rng();
        int a = unpack_agrees(buf, n);
        agreed += a == 1;
        if (a < 0 && differ++ < 3) CHECK(false, "mutation %d: trees differ", iter);
    }
    CHECK(differ == 0, "%d mutated frames unpacked differently", differ);
    CHECK(agreed > 2000, "only %d mutated frames passed the pre-scan", agreed);
    for (int k = 0; k < MSG__COUNT; k++) codec_buf_done(&frames[k]);
    TEST_END();
}

/* 1-4 random mutations of buf[0..n) (room for 4000 bytes): bit flips, random
 * and interesting bytes, inserts, deletes, a cut. Returns the new length. */
static size_t mutate(uint8_t *buf, size_t n)
{
    static const uint8_t interesting[] = { 0x00, 0x7f, 0x80, 0x8f, 0x90, 0xa0, 0xc0, 0xc1, 0xc4, 0xc6, 0xc9, 0xca,
                                           0xcb, 0xcf, 0xd3, 0xd8, 0xd9, 0xdb, 0xdc, 0xdd, 0xde, 0xdf, 0xe0, 0xff };
    int muts = 1 + (int)(rng() % 4);
    for (int j = 0; j < muts && n > 0; j++) {
        size_t at = rng() % n;
        switch (rng() % 6) {
        case 0: buf[at] ^= (uint8_t)(1u << (rng() % 8)); break;
        case 1: buf[at] = (uint8_t)rng(); break;
        case 2: buf[at] = interesting[rng() % sizeof interesting]; break;
        case 3: /* insert */
            if (n < 4000) {
                memmove(buf + at + 1, buf + at, n - at);
                buf[at] = interesting[rng() % sizeof interesting];
                n++;
            }
            break;
        case 4: /* delete */
            memmove(buf + at, buf + at + 1, n - at - 1);
            n--;
            break;
        case 5: n = at; break; /* truncate */
        }
    }
    return n;
}

static void test_mutations(void)
{
    TEST_BEGIN("random_mutations_10000");
    CodecBuf frames[MSG__COUNT];
    char err[256];
    sample_frames(frames);
    rng_state = 0x5eed2024ddb70b01ULL;
    int counts[3] = { 0, 0, 0 }, bad = 0;
    uint8_t *buf = malloc(4096);
    for (int iter = 0; iter < 10000; iter++) {
        const CodecBuf *src = &frames[1 + rng() % (MSG__COUNT - 1)];
        size_t n = src->len;
        memcpy(buf, src->data, n);
        n = mutate(buf, n);
        Msg m;
        int rc = dec(buf, n, &m, err, sizeof err);
        if (rc < -1 || rc > 1 || (rc == -1 && err[0] == 0))
            bad++;
        else
            counts[rc + 1]++;
        if (rc == 0 && m.kind == MSG_LOG && strnlen(m.u.log.text, sizeof m.u.log.text) == sizeof m.u.log.text) bad++;
        msg_done(&m);
    }
    free(buf);
    for (int k = 0; k < MSG__COUNT; k++) codec_buf_done(&frames[k]);
    CHECK(bad == 0, "%d mutations gave an out-of-contract result", bad);
    /* mutations must exercise both paths, or the test proves little */
    CHECK(counts[0] > 1000 && counts[1] > 100, "errors %d ok %d unknown %d", counts[0], counts[1], counts[2]);
    printf("  mutations: %d refused, %d decoded, %d unknown kind\n", counts[0], counts[1], counts[2]);
    TEST_END();
}

/* ---- codec_decode against the decoder it replaced (tests/ref/codec_ref.h) ---- */

/* The heap part a kind owns: its pointer slot and its byte count. */
static void heap_part(Msg *m, void ***ptr, size_t *bytes)
{
    *ptr = NULL;
    *bytes = 0;
    switch (m->kind) {
    case MSG_SHARD: *ptr = (void **)&m->u.shard.idx, *bytes = m->u.shard.n_idx * sizeof(int64_t); break;
    case MSG_SET:
    case MSG_GET:
    case MSG_WAIT:
    case MSG_VAL: *ptr = (void **)&m->u.store.val, *bytes = m->u.store.val_len; break;
    case MSG_BURST: *ptr = (void **)&m->u.burst.items, *bytes = m->u.burst.len; break;
    case MSG_STACK: *ptr = (void **)&m->u.stack.text, *bytes = m->u.stack.len; break;
    default: break;
    }
}

/* Same Msg, byte for byte over what a decode defines (the envelope and the
 * kind's member, msg_defined_bytes: the fast path leaves the union's other
 * bytes as they were), heap parts compared by content. */
static bool same_msg(const Msg *a, const Msg *b)
{
    Msg x = *a, y = *b;
    void **px, **py;
    size_t nx, ny;
    heap_part(&x, &px, &nx);
    heap_part(&y, &py, &ny);
    if (x.kind != y.kind || nx != ny || !px != !py) return false;
    if (px) {
        if (!*px != !*py || (nx && memcmp(*px, *py, nx))) return false;
        *px = *py = NULL;
    }
    return !memcmp(&x, &y, msg_defined_bytes(x.kind));
}

/* 1 when codec_decode and ref_decode agree on p[0..n) (return code, error
 * text, Msg; for a burst each message through codec_burst_decode too),
 * 0 when not; *rc gets codec_decode's return code. */
static int decode_agrees(const uint8_t *p, size_t n, int *rc, char *why, size_t whylen)
{
    char e1[256] = "", e2[256] = "";
    Msg a, b;
    int r1 = dec(p, n, &a, e1, sizeof e1);
    uint8_t *copy = malloc(n ? n : 1);
    if (n) memcpy(copy, p, n);
    int r2 = ref_decode(n ? copy : NULL, n, &b, e2, sizeof e2);
    free(copy);
    *rc = r1;
    int ok = 1;
    if (r1 != r2 || (r1 != 0 && strcmp(e1, e2))) {
        snprintf(why, whylen, "rc %d \"%s\", reference %d \"%s\"", r1, e1, r2, e2);
        ok = 0;
    } else if (!same_msg(&a, &b)) {
        snprintf(why, whylen, "rc %d, a different %s", r1, msg_kind_name(a.kind));
        ok = 0;
    } else if (r1 == 0 && a.kind == MSG_BURST) {
        size_t pos = 0, len;
        const uint8_t *f;
        while (ok && codec_burst_next(&a.u.burst, &pos, &f, &len)) {
            Msg ia, ib;
            int q1 = codec_burst_decode(&a, f, len, &ia, e1, sizeof e1);
            int q2 = ref_decode(f, len, &ib, e2, sizeof e2);
            /* codec_burst_decode adds its own rules on top of codec_decode */
            int q2b = q2 != 0 ? q2 : ib.rank != a.rank ? -2 : 0;
            if ((q1 == 0 || q1 == -2) && (q2b != q1 || !same_msg(&ia, &ib))) {
                snprintf(why, whylen, "burst item: rc %d, reference %d", q1, q2b);
                ok = 0;
            }
            if (q1 == 0 || q1 == -2) msg_done(&ia);
            msg_done(&ib);
        }
    }
    msg_done(&a);
    msg_done(&b);
    return ok;
}

/* A map of n_unknown unknown keys (some holding containers), then a step's
 * envelope and fields, some repeated: entries past the ones the decoder
 * keeps from its first walk. */
static void wide_frame(CodecBuf *out, int n_unknown)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, (size_t)n_unknown + 8);
    for (int i = 0; i < n_unknown; i++) {
        char key[16];
        int kl = snprintf(key, sizeof key, "x%d", i);
        msgpack_pack_str_with_body(&pk, key, (size_t)kl);
        if (i % 3 == 0) {
            msgpack_pack_array(&pk, 2);
            msgpack_pack_map(&pk, 1);
            msgpack_pack_str_with_body(&pk, "step", 4);
            msgpack_pack_int(&pk, i);
            msgpack_pack_double(&pk, 0.5);
        } else {
            msgpack_pack_int(&pk, i * 1000);
        }
    }
    msgpack_pack_str_with_body(&pk, "step", 4);
    msgpack_pack_int(&pk, 5);
    msgpack_pack_str_with_body(&pk, "v", 1);
    msgpack_pack_int(&pk, 1);
    msgpack_pack_str_with_body(&pk, "k", 1);
    msgpack_pack_str_with_body(&pk, "step", 4);
    msgpack_pack_str_with_body(&pk, "r", 1);
    msgpack_pack_int(&pk, 7);
    msgpack_pack_str_with_body(&pk, "loss", 4);
    msgpack_pack_double(&pk, 0.25);
    msgpack_pack_str_with_body(&pk, "step", 4); /* repeated: the last one counts */
    msgpack_pack_int(&pk, 6);
    msgpack_pack_str_with_body(&pk, "t", 1);
    msgpack_pack_int64(&pk, 1700000000000000000LL);
    msgpack_pack_str_with_body(&pk, "r", 1); /* a repeated envelope key */
    msgpack_pack_int(&pk, 8);
    codec_buf_init(out);
    codec_buf_grow(out, sb.size);
    memcpy(out->data, sb.data, sb.size);
    out->len = sb.size;
    msgpack_sbuffer_destroy(&sb);
}

static void test_decode_matches_reference(void)
{
    TEST_BEGIN("decode_matches_the_decoder_it_replaced");
    enum { N_SRC = MSG__COUNT + 3 };
    CodecBuf src[N_SRC];
    sample_frames(src);
    wide_frame(&src[MSG__COUNT], 10);
    wide_frame(&src[MSG__COUNT + 1], 40);
    /* a burst of a step, a coll and a beat of rank 3, as a worker sends them */
    CodecBuf *bb = &src[MSG__COUNT + 2];
    char err[256], why[300];
    codec_buf_init(bb);
    CHECK(codec_burst_begin(bb, 3, err, sizeof err) == 0, "burst: %s", err);
    static const MsgKind in_burst[] = { MSG_STEP, MSG_COLL, MSG_BEAT, MSG_COLL };
    for (size_t i = 0; i < sizeof in_burst / sizeof in_burst[0]; i++)
        CHECK(codec_burst_add(bb, src[in_burst[i]].data, src[in_burst[i]].len, err, sizeof err) == 0, "add: %s", err);
    codec_burst_finish(bb, 1700000000000000000LL);

    int rc, differ = 0, counts[3] = { 0, 0, 0 };
    for (int k = 1; k < N_SRC; k++) {
        if (!decode_agrees(src[k].data, src[k].len, &rc, why, sizeof why)) {
            CHECK(false, "source frame %d: %s", k, why);
            differ++;
        }
        if (k >= MSG__COUNT) CHECK(rc == 0, "source frame %d decoded with %d", k, rc);
    }
    /* hostile shapes mutations rarely reach: nesting, the object cap, a
     * key that is a container, a bad key before a structural fault */
    static const uint8_t hostile[][24] = {
        { 0x81, 0xa1, 'v',  0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91,
          0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x01 }, /* 17 deep */
        { 0x82, 0x91, 0x01, 0x02, 0xa1, 'v', 0x01 },                    /* array key */
        { 0x82, 0x01, 0x02, 0xa1, 'v', 0xd9, 0x09, 'x' },               /* int key, then a lying str */
        { 0x82, 0x01, 0x02, 0xa1, 'v', 0x01, 0x00 },                    /* int key, trailing byte */
        { 0x93, 0x01, 0x91, 0x02, 0xc1 },                               /* not a map, reserved byte */
        { 0x93, 0x01, 0x91, 0x02, 0x03, 0x04 },                         /* not a map, trailing */
        { 0xc7, 0x03, 0x01, 'a', 'b', 'c' },                            /* an ext, not a map */
        { 0xdf, 0x10, 0x00, 0x00, 0x00, 0xa1, 'v' },                    /* map32 lying count */
        { 0x83, 0xa1, 'v', 0x01, 0xa1, 'k', 0xa4, 's', 't', 'e', 'p', 0xa4, 's', 't', 'e', 'p', 0xcb,
          0x40 }, /* cut float */
    };
    static const size_t hostile_len[] = { 20, 7, 8, 7, 5, 6, 6, 7, 18 };
    for (size_t h = 0; h < sizeof hostile_len / sizeof hostile_len[0]; h++)
        for (size_t cut = 1; cut <= hostile_len[h]; cut++)
            if (!decode_agrees(hostile[h], cut, &rc, why, sizeof why)) {
                CHECK(false, "hostile frame %zu cut at %zu: %s", h, cut, why);
                differ++;
            }
    /* CODEC_MAX_OBJECTS objects, then one more: {"v":1,"k":"step","x":[0 x N]}
     * holds 7 + N */
    for (int extra = 0; extra < 2; extra++) {
        size_t big_n = CODEC_MAX_OBJECTS - 7 + (size_t)extra;
        uint8_t *big = calloc(1, 18 + big_n);
        memcpy(big, "\x83\xa1v\x01\xa1k\xa4step\xa1x\xdd", 14);
        for (int i = 0; i < 4; i++) big[14 + i] = (uint8_t)(big_n >> (24 - 8 * i));
        if (!decode_agrees(big, 18 + big_n, &rc, why, sizeof why)) {
            CHECK(false, "object cap%s: %s", extra ? " + 1" : "", why);
            differ++;
        }
        CHECK(rc == (extra ? -1 : 0), "%zu objects decoded with %d", 7 + big_n, rc);
        free(big);
    }

    rng_state = 0xdecade17c0dec0deULL;
    uint8_t *buf = malloc(8192);
    for (int iter = 0; iter < 60000; iter++) {
        const CodecBuf *s = &src[1 + rng() % (N_SRC - 1)];
        size_t n = s->len;
        memcpy(buf, s->data, n);
        n = mutate(buf, n);
        if (!decode_agrees(buf, n, &rc, why, sizeof why)) {
            if (differ++ < 5) CHECK(false, "mutation %d: %s", iter, why);
        } else {
            counts[rc + 1]++;
        }
    }
    free(buf);
    for (int k = 0; k < N_SRC; k++) codec_buf_done(&src[k]);
    ref_unpack_release();
    CHECK(differ == 0, "%d frames decoded differently from the reference", differ);
    /* both outcomes exercised, or the comparison proves little */
    CHECK(counts[0] > 10000 && counts[1] > 5000 && counts[2] > 100, "refused %d decoded %d unknown %d", counts[0],
          counts[1], counts[2]);
    printf("  against the reference: %d refused, %d decoded, %d unknown kind, all alike\n", counts[0], counts[1],
           counts[2]);
    TEST_END();
}

/* A frame of kind k for rank r (the sample's values). */
static void sample_frame(CodecBuf *b, MsgKind k, int r)
{
    Msg m;
    char err[128];
    fill_sample(&m, k);
    m.rank = r;
    CHECK(codec_encode(&m, b, err, sizeof err) == 0, "encode %s: %s", msg_kind_name(k), err);
    msg_done(&m);
}

static void test_burst(void)
{
    TEST_BEGIN("burst_carries_messages_whole");
    CodecBuf bb, f;
    codec_buf_init(&bb);
    codec_buf_init(&f);
    char err[256], why[256];
    Msg burst, out;

    /* builder -> decoder: three messages come back as they went in */
    const MsgKind kinds[3] = { MSG_STEP, MSG_COLL, MSG_BEAT };
    CHECK(codec_burst_count(&bb) == 0, "no burst yet");
    CHECK(codec_burst_begin(&bb, 3, err, sizeof err) == 0, "begin: %s", err);
    for (int i = 0; i < 3; i++) {
        sample_frame(&f, kinds[i], 3);
        CHECK(codec_burst_add(&bb, f.data, f.len, err, sizeof err) == 0, "add: %s", err);
    }
    codec_burst_finish(&bb, 1700000000999LL);
    CHECK(codec_burst_count(&bb) == 3, "count %u", codec_burst_count(&bb));
    int rc = dec(bb.data, bb.len, &burst, err, sizeof err);
    CHECK(rc == 0 && burst.kind == MSG_BURST && burst.rank == 3 && burst.t_ns == 1700000000999LL &&
              burst.u.burst.n == 3,
          "decode: rc %d %s, kind %d r %d n %u", rc, err, burst.kind, burst.rank, burst.u.burst.n);
    size_t pos = 0, len;
    const uint8_t *p;
    int i = 0;
    while (codec_burst_next(&burst.u.burst, &pos, &p, &len)) {
        Msg want;
        fill_sample(&want, kinds[i < 3 ? i : 0]);
        rc = codec_burst_decode(&burst, p, len, &out, err, sizeof err);
        CHECK(rc == 0, "message %d: %s", i, err);
        if (rc == 0) CHECK(msg_equal(&want, &out, why, sizeof why), "message %d: %s", i, why);
        msg_done(&out);
        msg_done(&want);
        i++;
    }
    CHECK(i == 3, "walked %d messages", i);
    msg_done(&burst);

    /* the rules: a non-tel kind or a burst inside is malformed, another
     * rank's message is forged, a bad one does not spoil the others */
    codec_burst_begin(&bb, 3, err, sizeof err);
    sample_frame(&f, MSG_HELLO, 3);
    codec_burst_add(&bb, f.data, f.len, err, sizeof err);
    sample_frame(&f, MSG_STEP, 1);
    codec_burst_add(&bb, f.data, f.len, err, sizeof err);
    codec_burst_add(&bb, "\x81\xa1v\x01", 4, err, sizeof err); /* no "k" */
    CodecBuf inner;
    codec_buf_init(&inner);
    codec_burst_begin(&inner, 3, err, sizeof err);
    sample_frame(&f, MSG_STEP, 3);
    codec_burst_add(&inner, f.data, f.len, err, sizeof err);
    codec_burst_add(&bb, inner.data, inner.len, err, sizeof err);
    codec_burst_add(&bb, f.data, f.len, err, sizeof err);
    CHECK(dec(bb.data, bb.len, &burst, err, sizeof err) == 0 && burst.u.burst.n == 5, "rules burst: %s", err);
    const int want_rc[5] = { -1, -2, -1, -1, 0 };
    const char *want_err[5] = { "hello may not", "claiming rank 1", "\"k\"", "burst may not", "" };
    pos = 0;
    for (i = 0; codec_burst_next(&burst.u.burst, &pos, &p, &len); i++) {
        err[0] = 0;
        rc = codec_burst_decode(&burst, p, len, &out, err, sizeof err);
        CHECK(i < 5 && rc == want_rc[i] && strstr(err, want_err[i]), "message %d: rc %d (want %d), \"%s\"", i, rc,
              i < 5 ? want_rc[i] : 9, err);
        if (rc == 0 || rc == -2) msg_done(&out);
    }
    CHECK(i == 5, "walked %d", i);
    msg_done(&burst);
    codec_buf_done(&inner);

    /* limits: PROTO_MAX_BURST messages, and the frame size */
    codec_burst_begin(&bb, 0, err, sizeof err);
    sample_frame(&f, MSG_BEAT, 0);
    int added = 0;
    while (codec_burst_add(&bb, f.data, f.len, err, sizeof err) == 0) added++;
    CHECK(added == (int)PROTO_MAX_BURST && strstr(err, "full"), "added %d: %s", added, err);
    CHECK(dec(bb.data, bb.len, &burst, err, sizeof err) == 0 && burst.u.burst.n == PROTO_MAX_BURST, "full burst: %s",
          err);
    msg_done(&burst);
    /* one more by hand: the decoder refuses it */
    {
        TB t;
        tb_head(&t, "burst", 2);
        tb_str(&t, "r");
        tb_int(&t, 0);
        tb_str(&t, "m");
        msgpack_pack_array(&t.pk, PROTO_MAX_BURST + 1);
        for (uint32_t k = 0; k <= PROTO_MAX_BURST; k++) {
            msgpack_pack_bin(&t.pk, f.len);
            msgpack_pack_bin_body(&t.pk, f.data, f.len);
        }
        CHECK(dec(t.sb.data, t.sb.size, &out, err, sizeof err) == -1 && strstr(err, "more than"), "4097: %s", err);
        tb_done(&t);
    }
    uint8_t *big = calloc(1, PROTO_MAX_FRAME_BYTES / 2);
    codec_burst_begin(&bb, 0, err, sizeof err);
    CHECK(codec_burst_add(&bb, big, PROTO_MAX_FRAME_BYTES / 2, err, sizeof err) == 0, "half the limit: %s", err);
    CHECK(codec_burst_add(&bb, big, PROTO_MAX_FRAME_BYTES / 2, err, sizeof err) == -1 && strstr(err, "frame limit"),
          "past the limit: %s", err);
    free(big);
    CHECK(codec_burst_begin(&bb, -1, err, sizeof err) == -1, "a burst needs a rank");

    /* hand-made: no "r", an element that is not a bin */
    {
        TB t;
        tb_head(&t, "burst", 1);
        tb_str(&t, "m");
        msgpack_pack_array(&t.pk, 0);
        CHECK(dec(t.sb.data, t.sb.size, &out, err, sizeof err) == -1 && strstr(err, "\"r\""), "no r: %s", err);
        tb_done(&t);
        tb_head(&t, "burst", 2);
        tb_str(&t, "r");
        tb_int(&t, 2);
        tb_str(&t, "m");
        msgpack_pack_array(&t.pk, 1);
        tb_str(&t, "step");
        CHECK(dec(t.sb.data, t.sb.size, &out, err, sizeof err) == -1 && strstr(err, "not a bin"), "str: %s", err);
        tb_done(&t);
    }
    /* the encoder refuses items that do not match n */
    Msg lie;
    fill_sample(&lie, MSG_BURST);
    lie.u.burst.n = 3;
    CHECK(codec_encode(&lie, &f, err, sizeof err) == -1 && strstr(err, "bins"), "n lies: %s", err);
    msg_done(&lie);

    codec_buf_done(&bb);
    codec_buf_done(&f);
    TEST_END();
}

/* codec_utf8_copy copies ASCII eight bytes or one at a time without asking
 * utf8_seq: the same bytes and length as the walk that asks for every
 * character, for
 * random strings of ASCII, NULs, well- and ill-formed sequences and every
 * capacity from 0 to past the string (a cut ASCII run, a sequence cut at
 * the end of the field). */
static size_t utf8_copy_walk(char *out, size_t cap, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, o = 0;
    if (cap == 0) return 0;
    while (i < n && u[i] != 0) {
        size_t k = utf8_seq(u + i, n - i);
        if (k == 0) {
            if (o + 1 >= cap) break;
            out[o++] = '?';
            i++;
            continue;
        }
        if (o + k >= cap) break;
        memcpy(out + o, u + i, k);
        o += k;
        i += k;
    }
    out[o] = 0;
    return o;
}

static void test_utf8_copy(void)
{
    TEST_BEGIN("utf8_copy_ascii_bytes_as_the_checked_walk");
    static const char *pieces[] = { "a", "allreduce", " ", "\x7f", "\x01", "\xc3\xa9", "\xe2\x94\x80", "\xf0\x9f\x98\x80",
                                    "\xe2\x94", "\xc0\xaf", "\xed\xa0\x80", "\xff", "\x80", "\0", "\xf4\x90\x80\x80" };
    const unsigned np = sizeof pieces / sizeof pieces[0];
    uint32_t seed = 7;
    int diffs = 0, cases = 0;
    for (int n = 0; n < 20000; n++) {
        char s[96];
        size_t len = 0;
        int k = (int)((seed = seed * 1103515245u + 12345u) >> 16) % 8;
        for (int i = 0; i < k; i++) {
            const char *p = pieces[((seed = seed * 1103515245u + 12345u) >> 16) % np];
            size_t pl = p[0] ? strlen(p) : 1; /* "\0": one NUL byte */
            memcpy(s + len, p, pl);
            len += pl;
        }
        for (size_t cap = 0; cap <= len + 2; cap++) {
            char a[100], b[100];
            memset(a, 'x', sizeof a);
            memset(b, 'x', sizeof b);
            size_t ra = codec_utf8_copy(a, cap, s, len), rb = utf8_copy_walk(b, cap, s, len);
            if (ra != rb || memcmp(a, b, sizeof a)) diffs++;
            cases++;
        }
    }
    CHECK(diffs == 0, "%d of %d copies differ from the checked walk", diffs, cases);
    TEST_END();
}

/* "stack" (a rank's every-thread dump, answering a "stacks" command):
 * bounded text, cut where a sender sent more, cleaned UTF-8, str or bin,
 * unknown keys skipped; the command's token rides in cmd's "arg". */
static void test_stack(void)
{
    TEST_BEGIN("stack_text_bounded");
    char err[256];
    CodecBuf b;
    codec_buf_init(&b);
    Msg m, out;
    /* the bound encodes; one byte more is refused, naming the limit */
    msg_init(&m, MSG_STACK);
    m.rank = 2, m.u.stack.token = 9;
    m.u.stack.len = PROTO_MAX_STACK_BYTES;
    m.u.stack.text = malloc(PROTO_MAX_STACK_BYTES + 2);
    memset(m.u.stack.text, 'a', PROTO_MAX_STACK_BYTES + 1);
    m.u.stack.text[PROTO_MAX_STACK_BYTES + 1] = 0;
    CHECK(codec_encode(&m, &b, err, sizeof err) == 0, "64 KiB: %s", err);
    CHECK(dec(b.data, b.len, &out, err, sizeof err) == 0 && out.u.stack.len == PROTO_MAX_STACK_BYTES &&
              !out.u.stack.cut && out.u.stack.token == 9 && out.rank == 2 &&
              out.u.stack.text[PROTO_MAX_STACK_BYTES] == 0,
          "64 KiB back: len %u", (unsigned)out.u.stack.len);
    msg_done(&out);
    m.u.stack.len = PROTO_MAX_STACK_BYTES + 1;
    CHECK(codec_encode(&m, &b, err, sizeof err) == -1 && strstr(err, "65536"), "64 KiB + 1 encoded: \"%s\"", err);
    msg_done(&m);
    CHECK(m.u.stack.text == NULL, "msg_done frees the text");

    /* a peer that sends more: the first 64 KiB kept, cut between characters, said */
    size_t big = PROTO_MAX_STACK_BYTES + 5000;
    char *txt = malloc(big);
    memset(txt, 'x', big);
    memcpy(txt + PROTO_MAX_STACK_BYTES - 1, "\xe2\x86\x93", 3); /* an arrow across the bound */
    TB t;
    tb_head(&t, "stack", 3);
    tb_str(&t, "r");
    tb_int(&t, 1);
    tb_str(&t, "tok");
    tb_int(&t, 3);
    tb_str(&t, "text");
    msgpack_pack_str(&t.pk, big);
    msgpack_pack_str_body(&t.pk, txt, big);
    int rc = dec(t.sb.data, t.sb.size, &out, err, sizeof err);
    CHECK(rc == 0 && out.kind == MSG_STACK && out.u.stack.cut && out.u.stack.len == PROTO_MAX_STACK_BYTES - 1 &&
              strlen(out.u.stack.text) == out.u.stack.len,
          "oversize text: rc %d cut %d len %u: %s", rc, out.u.stack.cut, (unsigned)out.u.stack.len, err);
    msg_done(&out);
    tb_done(&t);
    free(txt);

    /* bad bytes come out as '?'; a bin is taken as text; an unknown key is skipped */
    tb_head(&t, "stack", 4);
    tb_str(&t, "r");
    tb_int(&t, 0);
    tb_str(&t, "lines");
    tb_int(&t, 7);
    tb_str(&t, "tok");
    tb_int(&t, 5);
    tb_str(&t, "text");
    msgpack_pack_bin(&t.pk, 6);
    msgpack_pack_bin_body(&t.pk, "ab\xff\xc0" "cd", 6);
    rc = dec(t.sb.data, t.sb.size, &out, err, sizeof err);
    CHECK(rc == 0 && out.u.stack.token == 5 && !strcmp(out.u.stack.text, "ab??cd") && out.u.stack.len == 6,
          "bin text: rc %d \"%s\" %s", rc, out.u.stack.text ? out.u.stack.text : "(null)", err);
    msg_done(&out);
    tb_done(&t);

    /* the text must be text */
    tb_head(&t, "stack", 1);
    tb_str(&t, "text");
    tb_int(&t, 5);
    CHECK(dec(t.sb.data, t.sb.size, &out, err, sizeof err) == -1 && strstr(err, "\"text\" is not a string"),
          "int text: \"%s\"", err);
    tb_done(&t);

    /* no text at all: an empty dump, not an error */
    tb_head(&t, "stack", 1);
    tb_str(&t, "tok");
    tb_int(&t, 5);
    CHECK(dec(t.sb.data, t.sb.size, &out, err, sizeof err) == 0 && out.u.stack.len == 0 && !out.u.stack.text,
          "no text: %s", err);
    msg_done(&out);
    tb_done(&t);

    /* ddptop's ask: cmd "stacks", the look's token in arg */
    msg_init(&m, MSG_CMD);
    m.u.cmd.id = 17, m.u.cmd.arg = 17;
    snprintf(m.u.cmd.op, sizeof m.u.cmd.op, "stacks");
    CHECK(codec_encode(&m, &b, err, sizeof err) == 0, "stacks cmd: %s", err);
    CHECK(dec(b.data, b.len, &out, err, sizeof err) == 0 && out.kind == MSG_CMD && !strcmp(out.u.cmd.op, "stacks") &&
              out.u.cmd.arg == 17,
          "stacks cmd back: %s", err);
    codec_buf_done(&b);
    TEST_END();
}

int main(void)
{
    test_names();
    test_rank_idents();
    test_init_and_time();
    test_roundtrip();
    test_envelope_optional();
    test_extremes();
    test_truncate_strings();
    test_utf8_copy();
    test_truncations();
    test_wrong_types();
    test_accepted_forms();
    test_huge_lengths();
    test_structure();
    test_version();
    test_unknown_kind();
    test_unknown_keys();
    test_beat_without_where();
    test_coll_shape_optional();
    test_roundtrip_key_orders();
    test_oversize();
    test_encode_errors();
    test_nesting();
    test_duplicates();
    test_mutations();
    test_unpack_matches_msgpack_c();
    test_decode_matches_reference();
    test_burst();
    test_stack();
    CHECK_EXIT();
}
