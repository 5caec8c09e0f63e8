/* fuzz_codec.c — the wire decoder (codec_decode) on any bytes: it must
 * refuse or decode without a memory error or undefined behaviour, and what
 * it decodes must encode again and decode to the same kind and rank (a
 * rank, that is: r >= 0). A burst's messages go through codec_burst_decode.
 * Differential too: the decoder it replaced (tests/ref/codec_ref.h) must
 * give the same return code, error text and envelope for every input.
 */
#include <stdlib.h>
#include <string.h>

#include "wire/codec.h"
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    Msg m;
    char err[256];
    int rc = codec_decode(data, size, &m, err, sizeof err);
    same_as_reference(data, size, rc, &m, err);
    if (rc < 0) return 0;
    if (rc == 0 && m.kind == MSG_BURST) {
        size_t pos = 0, len;
        const uint8_t *f;
        while (codec_burst_next(&m.u.burst, &pos, &f, &len)) {
            Msg in;
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
