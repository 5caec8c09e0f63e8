/* codec_burst.c — the "burst" kind's framing: the builder a sender fills,
 * the walk over a decoded burst's messages and the rules each message must
 * meet (docs/PROTOCOL.md, "burst"); the bin headers the decoder and the
 * encoder share (codec_priv.h). The burst's keys are in codec_fields.c's tables
 * like every kind's. Pure functions, no globals: safe from any thread.
 */
#include "wire/codec.h"
#include "wire/codec_priv.h"
#include "base/err.h"

#include <string.h>

size_t codec_bin_hdr_len(size_t n) { return n <= 0xff ? 2 : n <= 0xffff ? 3 : 5; }

size_t codec_bin_hdr_put(uint8_t *p, size_t n)
{
    size_t h = codec_bin_hdr_len(n);
    p[0] = h == 2 ? 0xc4 : h == 3 ? 0xc5 : 0xc6;
    for (size_t i = 1; i < h; i++) p[i] = (uint8_t)(n >> (8 * (h - 1 - i)));
    return h;
}

/* A bin at p[0..left): 0 with its header and body sizes, -1 if there is none. */
int codec_bin_hdr_get(const uint8_t *p, size_t left, size_t *hdr, size_t *body)
{
    if (left < 2) return -1;
    size_t h = p[0] == 0xc4 ? 2 : p[0] == 0xc5 ? 3 : p[0] == 0xc6 ? 5 : 0;
    if (!h || left < h) return -1;
    size_t n = 0;
    for (size_t i = 1; i < h; i++) n = (n << 8) | p[i];
    if (n > left - h) return -1;
    *hdr = h;
    *body = n;
    return 0;
}

/* Do a burst's items hold exactly n bins, nothing before, between or after? */
bool codec_burst_items_ok(const MsgBurst *bu)
{
    size_t pos = 0, h, n;
    uint32_t k = 0;
    if (bu->len && !bu->items) return false;
    while (pos < bu->len) {
        if (codec_bin_hdr_get(bu->items + pos, bu->len - pos, &h, &n) < 0) return false;
        pos += h + n;
        k++;
    }
    return k == bu->n;
}

/* ---- bursts ---------------------------------------------------------------
 * The builder writes a fixed-width header so the count and the time can be
 * patched in place: {"v":1,"k":"burst","r":int32,"t":int64,"m":array32}. */

#define BURST_HDR_LEN 37
#define BURST_R_AT    15 /* the int32 after 0xd2 */
#define BURST_T_AT    22 /* the int64 after 0xd3 */
#define BURST_N_AT    33 /* the uint32 after 0xdd */

static void put_be(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
}

int codec_burst_begin(CodecBuf *b, int32_t rank, char *err, size_t errlen)
{
    static const uint8_t head[BURST_HDR_LEN] = {
        0x85, 0xa1, 'v',  PROTO_VERSION, 0xa1, 'k', 0xa5, 'b', 'u', 'r', 's', 't', 0xa1, 'r',  0xd2, 0,    0,
        0,    0,    0xa1, 't',           0xd3, 0,   0,    0,   0,   0,   0,   0,   0,    0xa1, 'm',  0xdd, 0,
        0,    0,    0,
    };
    codec_buf_reset(b);
    if (rank < 0) return err_set(err, errlen, "burst: rank %d is not a rank", (int)rank);
    if (codec_buf_grow(b, BURST_HDR_LEN) < 0) return err_set(err, errlen, "burst: out of memory");
    memcpy(b->data, head, BURST_HDR_LEN);
    put_be(b->data + BURST_R_AT, (uint32_t)rank, 4);
    b->len = BURST_HDR_LEN;
    return 0;
}

uint32_t codec_burst_count(const CodecBuf *b)
{
    if (b->len < BURST_HDR_LEN) return 0;
    uint32_t n = 0;
    for (int i = 0; i < 4; i++) n = (n << 8) | b->data[BURST_N_AT + i];
    return n;
}

int codec_burst_add(CodecBuf *b, const void *frame, size_t len, char *err, size_t errlen)
{
    if (b->len < BURST_HDR_LEN) return err_set(err, errlen, "burst: codec_burst_begin was not called");
    uint32_t n = codec_burst_count(b);
    if (n >= PROTO_MAX_BURST) return err_set(err, errlen, "burst: full at %u messages", PROTO_MAX_BURST);
    if (len == 0 || !frame) return err_set(err, errlen, "burst: empty frame");
    size_t h = codec_bin_hdr_len(len);
    if (len > PROTO_MAX_FRAME_BYTES || b->len + h + len > PROTO_MAX_FRAME_BYTES)
        return err_set(err, errlen, "burst: adding %zu bytes would exceed the %u-byte frame limit", len,
                       PROTO_MAX_FRAME_BYTES);
    if (codec_buf_grow(b, h + len) < 0) return err_set(err, errlen, "burst: out of memory");
    b->len += codec_bin_hdr_put(b->data + b->len, len);
    memcpy(b->data + b->len, frame, len);
    b->len += len;
    put_be(b->data + BURST_N_AT, n + 1, 4);
    return 0;
}

void codec_burst_finish(CodecBuf *b, int64_t t_ns)
{
    if (b->len >= BURST_HDR_LEN) put_be(b->data + BURST_T_AT, (uint64_t)t_ns, 8);
}

int codec_burst_next(const MsgBurst *bu, size_t *pos, const uint8_t **frame, size_t *len)
{
    size_t h, n;
    if (!bu->items || *pos >= bu->len || codec_bin_hdr_get(bu->items + *pos, bu->len - *pos, &h, &n) < 0) return 0;
    *frame = bu->items + *pos + h;
    *len = n;
    *pos += h + n;
    return 1;
}

/* The kinds a worker sends on tel, the only ones a burst may carry. */
static bool tel_kind(MsgKind k)
{
    return k == MSG_PHASE || k == MSG_STEP || k == MSG_COLL || k == MSG_SHARD || k == MSG_CKPT || k == MSG_EVAL ||
           k == MSG_LOG || k == MSG_BEAT || k == MSG_BYE || k == MSG_INFO;
}

int codec_burst_decode(const Msg *burst, const void *frame, size_t len, Msg *out, char *err, size_t errlen)
{
    int rc = codec_decode(frame, len, out, err, errlen);
    if (rc != 0) return rc;
    if (!tel_kind(out->kind)) {
        err_set(err, errlen, "burst: a %s may not travel in a burst", msg_kind_name(out->kind));
        msg_done(out);
        msg_init(out, MSG_UNKNOWN);
        return -1;
    }
    if (out->rank != burst->rank) {
        err_set(err, errlen, "burst of rank %d carries a %s claiming rank %d", (int)burst->rank,
                msg_kind_name(out->kind), (int)out->rank);
        return -2;
    }
    return 0;
}
