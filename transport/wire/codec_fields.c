/* codec_fields.c — the key names and msgpack types of every kind's fields
 * (the tables below ARE the wire format; docs/PROTOCOL.md documents them;
 * step's, coll's, beat's and burst's are made of lists in codec_priv.h,
 * which codec_fast.c also compiles into its decoders) and the UTF-8
 * hygiene of strings in both directions. codec_encode.c and
 * codec_decode.c are both driven by these tables, so the two directions
 * cannot drift apart. Renaming a key or changing its type is an
 * incompatible change: bump PROTO_VERSION in protocol.h. Constant data and
 * pure functions: safe from any thread.
 */
#include "wire/codec_priv.h"
#include "base/utf8.h"

#include <stdint.h>
#include <string.h>

#define FLD(key, type, member)                                                            \
    {                                                                                     \
        key, sizeof(key) - 1, type, offsetof(Msg, u.member), sizeof(((Msg *)0)->u.member) \
    }
/* An entry of a list in codec_priv.h (CODEC_STEP_FIELDS, ...). */
#define FLD_ITEM(key, type, member) FLD(key, type, member),

// clang-format off
static const CodecField hello_fields[] = {
    FLD("local_rank", F_I32, hello.local_rank),
    FLD("world", F_I32, hello.world),
    FLD("local_world", F_I32, hello.local_world),
    FLD("pid", F_I64, hello.pid),
    FLD("host", F_STR, hello.host),
    FLD("device", F_STR, hello.device),
    FLD("backend", F_STR, hello.backend),
    FLD("precision", F_STR, hello.precision),
    FLD("grad_dtype", F_STR, hello.grad_dtype),
    FLD("version", F_STR, hello.version),
    FLD("dataset", F_STR, hello.dataset),
    FLD("model", F_STR, hello.model),
    FLD("params", F_I64, hello.params),
    FLD("batch", F_I64, hello.batch_size),
    FLD("max_steps", F_I64, hello.max_steps),
    FLD("steps_per_epoch", F_I64, hello.steps_per_epoch),
    FLD("dataset_size", F_I64, hello.dataset_size),
};
// clang-format on

static const CodecField phase_fields[] = {
    FLD("phase", F_PHASE, phase.phase),
    FLD("detail", F_STR, phase.detail),
};

/* listed in codec_priv.h: codec_fast.c decodes it in line */
static const CodecField step_fields[] = { CODEC_STEP_FIELDS(FLD_ITEM) };

/* listed in codec_priv.h: codec_fast.c decodes it in line */
static const CodecField coll_fields[] = { CODEC_COLL_FIELDS(FLD_ITEM) };

// clang-format off
static const CodecField shard_fields[] = {
    FLD("epoch", F_I64, shard.epoch),
    FLD("seed", F_I64, shard.seed),
    FLD("shuffle", F_BOOL, shard.shuffle),
    FLD("drop_last", F_BOOL, shard.drop_last),
    FLD("size", F_I64, shard.dataset_size),
    FLD("num_samples", F_I64, shard.num_samples),
    FLD("total_size", F_I64, shard.total_size),
    FLD("padding", F_I64, shard.padding),
    FLD("idx", F_IDX, shard),
};
// clang-format on

// clang-format off
static const CodecField ckpt_fields[] = {
    FLD("step", F_I64, ckpt.step),
    FLD("epoch", F_I64, ckpt.epoch),
    FLD("ok", F_BOOL, ckpt.ok),
    FLD("path", F_STR, ckpt.path),
    FLD("bytes", F_I64, ckpt.bytes),
    FLD("ms", F_F64, ckpt.ms),
    FLD("error", F_STR, ckpt.error),
};
// clang-format on

static const CodecField log_fields[] = {
    FLD("level", F_STR, log.level),
    FLD("text", F_STR, log.text),
};

/* listed in codec_priv.h: codec_fast.c decodes it in line */
static const CodecField beat_fields[] = { CODEC_BEAT_FIELDS(FLD_ITEM) };

static const CodecField bye_fields[] = {
    FLD("status", F_I32, bye.status),
    FLD("step", F_I64, bye.step),
    FLD("refused", F_STR, bye.refused), /* added within v1: absent is "" */
};

static const CodecField cmd_fields[] = {
    FLD("id", F_I64, cmd.id),
    FLD("op", F_STR, cmd.op),
    FLD("arg", F_ARG, cmd.arg),
};

/* Store kinds carry only what their operation uses. */
static const CodecField set_fields[] = {
    FLD("key", F_STR, store.key),
    FLD("val", F_BIN, store),
};

static const CodecField get_fields[] = {
    FLD("key", F_STR, store.key),
    FLD("timeout_ms", F_ARG, store.timeout_ms),
};

/* "error" came after the first release: a refusal's reason. */
static const CodecField val_fields[] = {
    FLD("key", F_STR, store.key),
    FLD("ok", F_BOOL, store.ok),
    FLD("val", F_BIN, store),
    FLD("error", F_STR, store.error),
};

// clang-format off
static const CodecField eval_fields[] = {
    FLD("epoch", F_I64, eval.epoch),
    FLD("step", F_I64, eval.step),
    FLD("loss", F_F64, eval.loss),
    FLD("accuracy", F_F64, eval.accuracy),
    FLD("correct", F_I64, eval.correct),
    FLD("total", F_I64, eval.total),
};
// clang-format on

// clang-format off
static const CodecField node_fields[] = {
    FLD("op", F_STR, node.op),
    FLD("node", F_I32, node.node),
    FLD("nnodes", F_I32, node.nnodes),
    FLD("nproc", F_I32, node.nproc),
    FLD("host", F_STR, node.host),
    FLD("pid", F_I64, node.pid),
    FLD("status", F_I32, node.status),
    FLD("signo", F_I32, node.signo),
    FLD("restart", F_I32, node.restart),
    FLD("job", F_STR, node.job),
    FLD("text", F_STR, node.text),
    FLD("spent", F_I64, node.spent),
};
// clang-format on

// clang-format off
static const CodecField info_fields[] = {
    FLD("dataset", F_STR, info.dataset),
    FLD("model", F_STR, info.model),
    FLD("params", F_I64, info.params),
    FLD("batch", F_I64, info.batch_size),
    FLD("dataset_size", F_I64, info.dataset_size),
};
// clang-format on

/* "stack": a rank's dump for the look whose command carried token "tok". */
static const CodecField stack_fields[] = {
    FLD("tok", F_I64, stack.token),
    FLD("cut", F_BOOL, stack.cut),
    FLD("text", F_TEXT, stack),
};

/* A burst's messages travel as bins inside "m" (listed in codec_priv.h). */
static const CodecField burst_fields[] = { CODEC_BURST_FIELDS(FLD_ITEM) };

#define TABLE(a)                  \
    {                             \
        a, sizeof a / sizeof a[0] \
    }
const CodecFields codec_kind_fields[MSG__COUNT] = {
    [MSG_HELLO] = TABLE(hello_fields), [MSG_PHASE] = TABLE(phase_fields), [MSG_STEP] = TABLE(step_fields),
    [MSG_COLL] = TABLE(coll_fields),   [MSG_SHARD] = TABLE(shard_fields), [MSG_CKPT] = TABLE(ckpt_fields),
    [MSG_LOG] = TABLE(log_fields),     [MSG_BEAT] = TABLE(beat_fields),   [MSG_BYE] = TABLE(bye_fields),
    [MSG_CMD] = TABLE(cmd_fields),     [MSG_SET] = TABLE(set_fields),     [MSG_GET] = TABLE(get_fields),
    [MSG_WAIT] = TABLE(get_fields),    [MSG_VAL] = TABLE(val_fields),     [MSG_EVAL] = TABLE(eval_fields),
    [MSG_NODE] = TABLE(node_fields),   [MSG_BURST] = TABLE(burst_fields), [MSG_INFO] = TABLE(info_fields),
    [MSG_STACK] = TABLE(stack_fields),
};

/* ---- UTF-8 ---------------------------------------------------------------
 * Python's msgpack (raw=False) refuses a whole message over one bad byte in
 * a str, and the views print these strings: so every string leaving the
 * encoder or the decoder is well-formed UTF-8, cut only between characters. */

/* Copy s[0..n) into out[cap] NUL-terminated, stopping at a NUL byte or at
 * the last whole character that fits, each ill-formed byte replaced by '?'.
 * Returns the length written. */
size_t codec_utf8_copy(char *out, size_t cap, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, o = 0;
    if (cap == 0) return 0;
    while (i < n && u[i] != 0) {
        /* eight ASCII bytes, none a NUL, with room for them and the NUL
         * after: copied as one word, as the byte loop below would */
        if (n - i >= 8 && cap - o > 8) {
            uint64_t w;
            memcpy(&w, u + i, 8);
            if (((w | ((w - 0x0101010101010101ull) & ~w)) & 0x8080808080808080ull) == 0) {
                memcpy(out + o, &w, 8);
                o += 8, i += 8;
                continue;
            }
        }
        /* ASCII, most of any string on the wire: a byte, no sequence to check */
        if (u[i] < 0x80) {
            if (o + 1 >= cap) break;
            out[o++] = (char)u[i++];
            continue;
        }
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
