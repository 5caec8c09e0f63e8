/* fuzz_codec.c — the wire decoder (codec_decode) on any bytes: it must
 * refuse or decode without a memory error or undefined behaviour, and what
 * it decodes must encode again and decode to the same kind and rank (a
 * rank, that is: r >= 0). A burst's messages go through codec_burst_decode.
 * Differential too: the decoder it replaced (tests/ref/codec_ref.h) must
 * give the same return code, error text and envelope for every input, and
 * the checked walk alone (codec_decode_checked, without the fast path of
 * codec_fast.c) the same return code, error text and Msg: every byte a
 * decode defines, heap parts by content (a burst's messages too).
 */
#include <stdlib.h>
#include <string.h>

#include "wire/codec.h"
#include "wire/codec_priv.h"
#include "../ref/codec_ref.h"

static void same_as_reference(const uint8_t *data, size_t size, int rc, const Msg *m, const char *err)
{
    Msg r;
    char rerr[256];
    int rrc = ref_decode(data, size, &r, rerr, sizeof rerr);
    if (rrc != rc || (rc != 0 && strcmp(err, rerr))) abort();
    if (r.kind != m->kind || r.rank != m->rank || r.t_ns != m->t_ns || r.version != m->version) abort();
    msg_done(&r);
}

/* Where the heap part a kind owns is, and its bytes. */
static void **heap_part(Msg *m, size_t *bytes)
{
    switch (m->kind) {
    case MSG_SHARD: *bytes = m->u.shard.n_idx * sizeof(int64_t); return (void **)&m->u.shard.idx;
    case MSG_SET:
    case MSG_GET:
    case MSG_WAIT:
    case MSG_VAL: *bytes = m->u.store.val_len; return (void **)&m->u.store.val;
    case MSG_BURST: *bytes = m->u.burst.len; return (void **)&m->u.burst.items;
    case MSG_STACK: *bytes = m->u.stack.len; return (void **)&m->u.stack.text;
    default: *bytes = 0; return NULL;
    }
}

static void same_as_walk(const uint8_t *data, size_t size, int rc, const Msg *m, const char *err)
{
    Msg w, x = *m;
    char werr[256];
    memset(&w, 0xa5, sizeof w);
    int wrc = codec_decode_checked(data, size, &w, werr, sizeof werr);
    if (wrc != rc || (rc != 0 && strcmp(err, werr))) abort();
    Msg y = w;
    size_t nx, ny;
    void **px = heap_part(&x, &nx), **py = heap_part(&y, &ny);
    if (x.kind != y.kind || nx != ny || !px != !py) abort();
    if (px) {
        if (!*px != !*py || (nx && memcmp(*px, *py, nx))) abort();
        *px = *py = NULL;
    }
    if (memcmp(&x, &y, msg_defined_bytes(y.kind))) abort();
    if (wrc >= 0) msg_done(&w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    Msg m;
    char err[256];
    int rc = codec_decode(data, size, &m, err, sizeof err);
    same_as_reference(data, size, rc, &m, err);
    same_as_walk(data, size, rc, &m, err);
    if (rc < 0) return 0;
    if (rc == 0 && m.kind == MSG_BURST) {
        size_t pos = 0, len;
        const uint8_t *f;
        while (codec_burst_next(&m.u.burst, &pos, &f, &len)) {
            Msg in;
            Msg one;
            int orc = codec_decode(f, len, &one, err, sizeof err);
            same_as_walk(f, len, orc, &one, err);
            if (orc >= 0) msg_done(&one);
            int irc = codec_burst_decode(&m, f, len, &in, err, sizeof err);
            if (irc == 0 && (in.rank != m.rank || in.kind == MSG_BURST || in.kind == MSG_HELLO)) abort();
            if (irc == 0 || irc == -2) msg_done(&in);
        }
    }
    if (rc == 0) {
        CodecBuf b;
        codec_buf_init(&b);
        if (codec_encode(&m, &b, err, sizeof err) == 0) {
            Msg again;
            if (codec_decode(b.data, b.len, &again, err, sizeof err) != 0) abort();
            /* The encoder writes "r" only for a rank (>= 0); a hostile
             * negative r decodes as given and comes back as -1. */
            if (again.kind != m.kind || (m.rank >= 0 && again.rank != m.rank)) abort();
            msg_done(&again);
        }
        codec_buf_done(&b);
    }
    msg_done(&m);
    return 0;
}
