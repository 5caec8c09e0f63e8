/* fuzz_store.c — the store's messages (set, get, wait, val) as the store
 * receives them. tui/run/store.c's handler answers through a ZeroMQ ROUTER
 * and is being reworked, so this target fuzzes what reaches it: the
 * decoder on store frames, the fields the handler trusts (key within its
 * size and NUL-terminated, value length within PROTO_MAX_VAL_BYTES and
 * matching its buffer, any timeout_ms), and a reply round trip.
 */
#include <stdlib.h>
#include <string.h>

#include "wire/codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    Msg m;
    char err[256];
    if (codec_decode(data, size, &m, err, sizeof err) != 0) return 0;
    if (m.kind == MSG_SET || m.kind == MSG_GET || m.kind == MSG_WAIT || m.kind == MSG_VAL) {
        const MsgStore *s = &m.u.store;
        if (memchr(s->key, 0, sizeof s->key) == NULL) abort();
        if (s->val_len > PROTO_MAX_VAL_BYTES) abort();
        if (s->val_len && !s->val) abort();
        volatile uint8_t sum = 0; /* every byte the store would copy is readable */
        for (uint32_t i = 0; i < s->val_len; i++) sum ^= s->val[i];
        (void)sum;
        /* the reply the store sends for it */
        Msg r;
        msg_init(&r, MSG_VAL);
        memcpy(r.u.store.key, s->key, sizeof r.u.store.key);
        r.u.store.ok = true;
        r.u.store.val = s->val;
        r.u.store.val_len = s->val_len;
        CodecBuf b;
        codec_buf_init(&b);
        if (codec_encode(&r, &b, err, sizeof err) == 0) {
            Msg back;
            if (codec_decode(b.data, b.len, &back, err, sizeof err) != 0) abort();
            if (strcmp(back.u.store.key, s->key) || back.u.store.val_len != s->val_len ||
                (s->val_len && memcmp(back.u.store.val, s->val, s->val_len)))
                abort();
            msg_done(&back);
        }
        codec_buf_done(&b);
    }
    msg_done(&m);
    return 0;
}
