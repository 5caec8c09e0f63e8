/* safetensors.h — reading and writing .safetensors files.
 *
 * Format: u64 little-endian header length, a JSON header (padded with spaces
 * to a multiple of 8), then the tensor bytes. The reader checks everything a
 * hostile file could get wrong (sizes, offsets, overlaps, JSON) and never
 * reads outside the file.
 */
#ifndef DDPTOP_SAFETENSORS_H
#define DDPTOP_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    char name[128];
    char dtype[8]; /* "F32", "F64", "I64", "I32", "U8" */
    int ndim;
    int64_t shape[8];
    const void *data; /* write: caller's; read: into the opened file */
    size_t nbytes;
} StTensor;

/* Write tensors and string metadata (meta_kv: key, value, ..., NULL; may be
 * NULL) to path, then fsync it. Returns 0 or -1 with err. */
int st_write(const char *path, const StTensor *t, int n, const char *const *meta_kv, char *err, size_t errlen);

typedef struct StFile StFile;

/* Read and validate a whole file. Returns 0 or -1 with err naming the problem. */
int st_open(const char *path, StFile **out, char *err, size_t errlen);
int st_count(const StFile *f);
const StTensor *st_tensor(const StFile *f, int i);
const StTensor *st_find(const StFile *f, const char *name); /* NULL if absent */
const char *st_meta(const StFile *f, const char *key);      /* NULL if absent */
void st_close(StFile **f);

#endif
