/* fuzz_codec.c — the wire decoder (codec_decode) on any bytes: it must
 * refuse or decode without a memory error or undefined behaviour, and what
 * it decodes must encode again and decode to the same kind and rank (a
 * rank, that is: r >= 0).
 */
#include <stdlib.h>

#include "wire/codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    Msg m;
    char err[256];
    int rc = codec_decode(data, size, &m, err, sizeof err);
    if (rc < 0) return 0;
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
