/* fuzz_record.c — the recording reader (recreader_open, recreader_next,
 * the START/EXIT/NOTE payload decoders, the frames' codec) on any file:
 * it stops with a reason or reads to the end, never outside the file, and
 * the times it hands out are in range (readers add them to clocks).
 */
#include <stdlib.h>
#include <unistd.h>

#include "record/record.h"
#include "wire/codec.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64], err[512];
    int fd = fuzz_as_file(data, size, path, sizeof path);
    if (fd < 0) return 0;
    RecReader *rd = recreader_open(path, err, sizeof err);
    if (rd) {
        const RecHeader *h = recreader_header(rd);
        if (h->world < 0 || h->created_wall_ns < 0) abort();
        RecEntry e;
        while (recreader_next(rd, &e, err, sizeof err) == 1) {
            if (e.t_ns < 0 || e.wall_ns < 0 || e.t_ns + h->created_wall_ns < 0) abort();
            RecProc p;
            RecNote n;
            Msg m;
            if (e.src == REC_SRC_START || e.src == REC_SRC_EXIT) (void)rec_proc_decode(&e, &p);
            if (e.src == REC_SRC_NOTE) (void)rec_note_decode(&e, &n);
            if (e.src == REC_SRC_TEL || e.src == REC_SRC_CTL || e.src == REC_SRC_SENT) {
                int rc = codec_decode(e.data, e.len, &m, err, sizeof err);
                if (rc >= 0) msg_done(&m);
            }
        }
        recreader_close(&rd);
    }
    close(fd);
    return 0;
}
