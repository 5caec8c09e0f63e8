/* tool_wire.c — the C codec as a command, for cross-language wire tests.
 *
 *   tool_wire encode-samples DIR   write DIR/<kind>.bin, one frame per kind,
 *                                  with the values tests/scenario/wire/t_wire_python.sh expects
 *   tool_wire decode FILE          decode one frame, print key=value lines
 *                                  (wire key names); exit 2 with the error;
 *                                  a burst prints n, then each message's
 *                                  mI=RC and its lines prefixed "mI." 
 *
 * Output of decode: "v", "k", "r" (-1 when absent), "t", then every field of
 * the kind in wire order. Strings escape \\ \n \r \t and other control bytes
 * as \xNN; booleans are true/false; "idx" is comma-separated; "val" is hex;
 * floats use %.17g. An unknown kind prints the envelope with k=unknown,
 * says why on stderr, and exits 0 (well formed, skipped).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/codec.h"
#include "wire/protocol.h"

#define T_NS 1700000000123456789LL

/* The samples: keep in step with EXPECT in tests/scenario/wire/t_wire_python.sh. */
static void sample(Msg *m, MsgKind k)
{
    msg_init(m, k);
    m->rank = 3;
    m->t_ns = T_NS;
    switch (k) {
    case MSG_HELLO: {
        MsgHello *h = &m->u.hello;
        h->local_rank = 1, h->world = 4, h->local_world = 2, h->pid = 4242;
        snprintf(h->host, sizeof h->host, "n\xc5\x93ud-7"); /* "nœud-7" */
        snprintf(h->device, sizeof h->device, "cuda:1");
        snprintf(h->backend, sizeof h->backend, "nccl");
        snprintf(h->precision, sizeof h->precision, "bf16");
        snprintf(h->grad_dtype, sizeof h->grad_dtype, "fp32");
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
        s->epoch = 2, s->step = 471, s->loss = 0.3817, s->lr = 0.001, s->samples = 30144;
        s->step_ms = 12.5, s->fwd_ms = 3.25, s->bwd_ms = 6.125, s->opt_ms = 0.75;
        s->comm_ms = 4.5, s->exposed_ms = 1.0625, s->drops = 17;
        s->dev_mem = 1288490188, s->dev_mem_total = 150118350848;
        break;
    }
    case MSG_COLL: {
        MsgColl *c = &m->u.coll;
        c->seq = 9001, c->bucket = -1, c->step = 471, c->bytes = 26214400;
        snprintf(c->op, sizeof c->op, "allreduce");
        c->enq_ns = 1700000000000000000LL, c->start_ns = 1700000000000001000LL;
        c->done_ns = 1700000000002501000LL, c->algbw_gbs = 10.48576, c->busbw_gbs = 15.72864;
        c->count = 6553600;
        snprintf(c->dtype, sizeof c->dtype, "float32");
        break;
    }
    case MSG_SHARD: {
        MsgShard *s = &m->u.shard;
        s->epoch = 1, s->seed = -5, s->shuffle = true, s->drop_last = false;
        s->dataset_size = 10, s->num_samples = 3, s->total_size = 12, s->padding = 2;
        static int64_t idx[] = { 7, 0, 300, -1, INT64_MAX };
        s->idx = idx;
        s->n_idx = 5;
        break;
    }
    case MSG_CKPT: {
        MsgCkpt *c = &m->u.ckpt;
        c->step = 400, c->epoch = 1, c->ok = false, c->bytes = 1077290, c->ms = 42.5;
        snprintf(c->path, sizeof c->path, "/ckpt/step-00000400");
        snprintf(c->error, sizeof c->error, "disk full");
        break;
    }
    case MSG_LOG:
        snprintf(m->u.log.level, sizeof m->u.log.level, "warn");
        snprintf(m->u.log.text, sizeof m->u.log.text, "loss \xe2\x86\x93 0.38\nnext\\line");
        break;
    case MSG_BEAT: {
        MsgBeat *b = &m->u.beat;
        b->step = 471, b->phase = PHASE_TRAIN, b->coll_seq = 9001;
        snprintf(b->coll_op, sizeof b->coll_op, "allreduce");
        b->coll_since_ns = 1700000000500000000LL;
        snprintf(b->where, sizeof b->where, "train.py:57 save_checkpoint");
        b->coll_bucket = 0;
        b->coll_count = 6553600;
        snprintf(b->coll_dtype, sizeof b->coll_dtype, "bfloat16");
        break;
    }
    case MSG_BYE:
        m->u.bye.status = 2, m->u.bye.step = 9375;
        snprintf(m->u.bye.refused, sizeof m->u.bye.refused, "the script starts its own ranks");
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
    case MSG_STACK: {
        static char text[] = "Thread 0x00007f0000000001 (most recent call first):\n"
                             "  File \"train.py\", line 57 in save\n";
        m->u.stack.token = 7;
        m->u.stack.cut = false;
        m->u.stack.text = text;
        m->u.stack.len = sizeof text - 1;
        break;
    }
    case MSG_CMD:
        m->rank = -1; /* ddptop -> worker: no rank */
        m->u.cmd.id = 12, m->u.cmd.arg = -1;
        snprintf(m->u.cmd.op, sizeof m->u.cmd.op, "ckpt");
        break;
    case MSG_SET:
    case MSG_GET:
    case MSG_WAIT:
    case MSG_VAL: {
        static uint8_t val[] = { 0x00, 0x01, 0xff, 'a', 'b', 'c' };
        MsgStore *s = &m->u.store;
        snprintf(s->key, sizeof s->key, "rdzv/nccl_id");
        s->timeout_ms = 30000;
        s->ok = true;
        if (k == MSG_SET || k == MSG_VAL) {
            s->val = val;
            s->val_len = sizeof val;
        }
        if (k == MSG_VAL) {
            m->rank = -1;
            snprintf(s->error, sizeof s->error, "store full");
        }
        break;
    }
    case MSG_BURST: {
        /* the step and the beat samples, as bins */
        static uint8_t items[1024];
        static uint32_t len;
        if (!len) {
            CodecBuf f;
            codec_buf_init(&f);
            char err[128];
            const MsgKind inner[2] = { MSG_STEP, MSG_BEAT };
            for (int i = 0; i < 2; i++) {
                Msg in;
                sample(&in, inner[i]);
                codec_encode(&in, &f, err, sizeof err);
                items[len++] = 0xc4;
                items[len++] = (uint8_t)f.len;
                memcpy(items + len, f.data, f.len);
                len += (uint32_t)f.len;
            }
            codec_buf_done(&f);
        }
        m->u.burst.items = items;
        m->u.burst.len = len;
        m->u.burst.n = 2;
        break;
    }
    default: break;
    }
}

static int encode_samples(const char *dir)
{
    CodecBuf b;
    codec_buf_init(&b);
    char err[256], path[4096];
    int rc = 0;
    for (int k = MSG_HELLO; k < MSG__COUNT; k++) {
        Msg m;
        sample(&m, (MsgKind)k);
        /* sample() points idx/val at static arrays: no msg_done here */
        if (codec_encode(&m, &b, err, sizeof err) < 0) {
            fprintf(stderr, "tool_wire: encode %s: %s\n", msg_kind_name((MsgKind)k), err);
            rc = 1;
            break;
        }
        snprintf(path, sizeof path, "%s/%s.bin", dir, msg_kind_name((MsgKind)k));
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(b.data, 1, b.len, f) != b.len || fclose(f) != 0) {
            fprintf(stderr, "tool_wire: %s: %s\n", path, strerror(errno));
            rc = 1;
            break;
        }
    }
    codec_buf_done(&b);
    return rc;
}

/* "m0." while a burst's first message prints, "" otherwise */
static char prefix[16];

static void put_str(const char *key, const char *s)
{
    printf("%s%s=", prefix, key);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '\\')
            fputs("\\\\", stdout);
        else if (*p == '\n')
            fputs("\\n", stdout);
        else if (*p == '\r')
            fputs("\\r", stdout);
        else if (*p == '\t')
            fputs("\\t", stdout);
        else if (*p < 0x20 || *p == 0x7f)
            printf("\\x%02x", *p);
        else
            putchar(*p);
    }
    putchar('\n');
}

static void put_i(const char *key, int64_t v) { printf("%s%s=%" PRId64 "\n", prefix, key, v); }
static void put_u(const char *key, uint64_t v) { printf("%s%s=%" PRIu64 "\n", prefix, key, v); }
static void put_f(const char *key, double v) { printf("%s%s=%.17g\n", prefix, key, v); }
static void put_b(const char *key, bool v) { printf("%s%s=%s\n", prefix, key, v ? "true" : "false"); }

static void print_msg(const Msg *m)
{
    put_i("v", m->version);
    put_str("k", msg_kind_name(m->kind));
    put_i("r", m->rank);
    put_i("t", m->t_ns);
    switch (m->kind) {
    case MSG_HELLO: {
        const MsgHello *h = &m->u.hello;
        put_i("local_rank", h->local_rank);
        put_i("world", h->world);
        put_i("local_world", h->local_world);
        put_i("pid", h->pid);
        put_str("host", h->host);
        put_str("device", h->device);
        put_str("backend", h->backend);
        put_str("precision", h->precision);
        put_str("grad_dtype", h->grad_dtype);
        put_str("version", h->version);
        put_str("dataset", h->dataset);
        put_str("model", h->model);
        put_i("params", h->params);
        put_i("batch", h->batch_size);
        put_i("max_steps", h->max_steps);
        put_i("steps_per_epoch", h->steps_per_epoch);
        put_i("dataset_size", h->dataset_size);
        break;
    }
    case MSG_PHASE:
        put_str("phase", phase_name(m->u.phase.phase));
        put_str("detail", m->u.phase.detail);
        break;
    case MSG_STEP: {
        const MsgStep *s = &m->u.step;
        put_i("epoch", s->epoch);
        put_i("step", s->step);
        put_f("loss", s->loss);
        put_f("lr", s->lr);
        put_i("samples", s->samples);
        put_f("step_ms", s->step_ms);
        put_f("fwd_ms", s->fwd_ms);
        put_f("bwd_ms", s->bwd_ms);
        put_f("opt_ms", s->opt_ms);
        put_f("comm_ms", s->comm_ms);
        put_f("exposed_ms", s->exposed_ms);
        put_u("drops", s->drops);
        put_i("dev_mem", s->dev_mem);
        put_i("dev_mem_total", s->dev_mem_total);
        break;
    }
    case MSG_COLL: {
        const MsgColl *c = &m->u.coll;
        put_i("seq", c->seq);
        put_str("op", c->op);
        put_i("bucket", c->bucket);
        put_i("step", c->step);
        put_i("bytes", c->bytes);
        put_i("enq", c->enq_ns);
        put_i("start", c->start_ns);
        put_i("done", c->done_ns);
        put_f("algbw", c->algbw_gbs);
        put_f("busbw", c->busbw_gbs);
        put_i("count", c->count);
        put_str("dtype", c->dtype);
        break;
    }
    case MSG_SHARD: {
        const MsgShard *s = &m->u.shard;
        put_i("epoch", s->epoch);
        put_i("seed", s->seed);
        put_b("shuffle", s->shuffle);
        put_b("drop_last", s->drop_last);
        put_i("size", s->dataset_size);
        put_i("num_samples", s->num_samples);
        put_i("total_size", s->total_size);
        put_i("padding", s->padding);
        printf("%sidx=", prefix);
        for (uint32_t i = 0; i < s->n_idx; i++) printf("%s%" PRId64, i ? "," : "", s->idx[i]);
        putchar('\n');
        break;
    }
    case MSG_CKPT: {
        const MsgCkpt *c = &m->u.ckpt;
        put_i("step", c->step);
        put_i("epoch", c->epoch);
        put_b("ok", c->ok);
        put_str("path", c->path);
        put_i("bytes", c->bytes);
        put_f("ms", c->ms);
        put_str("error", c->error);
        break;
    }
    case MSG_LOG:
        put_str("level", m->u.log.level);
        put_str("text", m->u.log.text);
        break;
    case MSG_BEAT: {
        const MsgBeat *b = &m->u.beat;
        put_i("step", b->step);
        put_str("phase", phase_name(b->phase));
        put_i("seq", b->coll_seq);
        put_str("op", b->coll_op);
        put_i("since", b->coll_since_ns);
        put_str("where", b->where);
        put_i("bucket", b->coll_bucket);
        put_i("count", b->coll_count);
        put_str("dtype", b->coll_dtype);
        break;
    }
    case MSG_BYE:
        put_i("status", m->u.bye.status);
        put_i("step", m->u.bye.step);
        put_str("refused", m->u.bye.refused);
        break;
    case MSG_STACK:
        put_i("tok", m->u.stack.token);
        put_b("cut", m->u.stack.cut);
        put_str("text", m->u.stack.text ? m->u.stack.text : "");
        break;
    case MSG_INFO:
        put_str("dataset", m->u.info.dataset);
        put_str("model", m->u.info.model);
        put_i("params", m->u.info.params);
        put_i("batch", m->u.info.batch_size);
        put_i("dataset_size", m->u.info.dataset_size);
        break;
    case MSG_EVAL:
        put_i("epoch", m->u.eval.epoch);
        put_i("step", m->u.eval.step);
        put_f("loss", m->u.eval.loss);
        put_f("accuracy", m->u.eval.accuracy);
        put_i("correct", m->u.eval.correct);
        put_i("total", m->u.eval.total);
        break;
    case MSG_CMD:
        put_i("id", m->u.cmd.id);
        put_str("op", m->u.cmd.op);
        put_i("arg", m->u.cmd.arg);
        break;
    case MSG_SET:
    case MSG_GET:
    case MSG_WAIT:
    case MSG_VAL: {
        const MsgStore *s = &m->u.store;
        put_str("key", s->key);
        if (m->kind == MSG_GET || m->kind == MSG_WAIT) put_i("timeout_ms", s->timeout_ms);
        if (m->kind == MSG_VAL) put_b("ok", s->ok);
        if (m->kind == MSG_SET || m->kind == MSG_VAL) {
            printf("%sval=", prefix);
            for (uint32_t i = 0; i < s->val_len; i++) printf("%02x", s->val[i]);
            putchar('\n');
        }
        if (m->kind == MSG_VAL) put_str("error", s->error);
        break;
    }
    case MSG_BURST: {
        /* n, then each message: mI=RC (codec_burst_decode's) and its keys as mI.KEY */
        put_u("n", m->u.burst.n);
        size_t pos = 0, len;
        const uint8_t *f;
        char err[256];
        for (int i = 0; codec_burst_next(&m->u.burst, &pos, &f, &len); i++) {
            Msg in;
            int rc = codec_burst_decode(m, f, len, &in, err, sizeof err);
            printf("m%d=%d\n", i, rc);
            if (rc != 0) printf("m%d.error=%s\n", i, err);
            if (rc == 0 || rc == -2) {
                snprintf(prefix, sizeof prefix, "m%d.", i);
                print_msg(&in);
                prefix[0] = 0;
                msg_done(&in);
            }
        }
        break;
    }
    default: break;
    }
}

static int decode_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "tool_wire: %s: %s\n", path, strerror(errno));
        return 2;
    }
    /* Read one byte past the limit so the codec sees, and names, an
     * oversize frame. */
    size_t cap = (size_t)PROTO_MAX_FRAME_BYTES + 1;
    uint8_t *buf = malloc(cap);
    size_t n = buf ? fread(buf, 1, cap, f) : 0;
    int ioerr = !buf || ferror(f);
    fclose(f);
    if (ioerr) {
        fprintf(stderr, "tool_wire: %s: read error\n", path);
        free(buf);
        return 2;
    }
    Msg m;
    char err[256];
    int rc = codec_decode(buf, n, &m, err, sizeof err);
    free(buf);
    if (rc < 0) {
        fprintf(stderr, "tool_wire: %s: %s\n", path, err);
        return 2;
    }
    print_msg(&m);
    if (rc == 1) fprintf(stderr, "tool_wire: %s: skipped: %s\n", path, err);
    msg_done(&m);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "encode-samples") == 0) return encode_samples(argv[2]);
    if (argc == 3 && strcmp(argv[1], "decode") == 0) return decode_file(argv[2]);
    fprintf(stderr, "usage: tool_wire encode-samples DIR | decode FILE\n");
    return 2;
}
