/* fuzz_safetensors.c — the safetensors reader (st_open) on any file: it
 * refuses or opens without reading outside the file, and every tensor it
 * hands out lies inside it, with a size that matches its shape and dtype.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt/safetensors.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64], err[512];
    int fd = fuzz_as_file(data, size, path, sizeof path);
    if (fd < 0) return 0;
    StFile *f = NULL;
    if (st_open(path, &f, err, sizeof err) == 0) {
        for (int i = 0; i < st_count(f); i++) {
            const StTensor *t = st_tensor(f, i);
            if (!t || t->ndim < 0 || t->ndim > 8) abort();
            volatile uint8_t sum = 0;
            const uint8_t *p = t->data;
            for (size_t k = 0; k < t->nbytes; k += 61) sum ^= p[k];
            if (t->nbytes) sum ^= p[t->nbytes - 1];
            (void)sum;
            if (st_find(f, t->name) == NULL) abort();
        }
        (void)st_meta(f, "format");
        st_close(&f);
    }
    close(fd);
    return 0;
}
