/* safetensors.c — .safetensors files: writer, and a reader that distrusts
 * everything in the file.
 *
 * Owns: the file format (u64 LE header length, JSON header padded with spaces
 * to a multiple of 8, tensor bytes), validation of the header (read by the
 * strict JSON reader of st_json.c). Does not own: atomic replacement of checkpoints (the
 * caller writes into a temporary directory and renames), byte order of the
 * tensor data (little-endian, as on every machine we build for).
 * No globals: any thread, one StFile per thread at a time.
 *
 * The reader follows the reference implementation (huggingface/safetensors):
 * UTF-8 header, data_offsets relative to the data section, tensors sorted by
 * offset must tile it exactly (no gap, no overlap, nothing left over), and
 * shape x dtype size must equal each span. Unknown keys inside a tensor entry
 * are skipped, as serde does there.
 */
#include "ckpt/safetensors.h"
#include "ckpt/st_json.h"

#include "base/file.h"
#include "base/json.h"
#include "base/utf8.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ST_MAX_HEADER_BYTES (100u << 20) /* the reference reader's limit */
#define ST_MAX_TENSORS      (1 << 17)
#define ST_MAX_META         (1 << 16)
#define ST_ALIGN            64 /* data section alignment in memory */

typedef struct {
    char *key, *val;
} StMeta;

struct StFile {
    unsigned char *mem; /* malloc'd; the file starts at mem + shift */
    StTensor *t;
    int n, cap;
    StMeta *meta;
    int nmeta, metacap;
    bool meta_seen;
};

/* ---- dtypes ---- */

static const struct {
    const char *name;
    size_t size;
} st_dtypes[] = {
    { "BOOL", 1 }, { "U8", 1 },  { "I8", 1 },  { "F8_E5M2", 1 }, { "F8_E4M3", 1 },
    { "I16", 2 },  { "U16", 2 }, { "F16", 2 }, { "BF16", 2 },    { "I32", 4 },
    { "U32", 4 },  { "F32", 4 }, { "I64", 8 }, { "U64", 8 },     { "F64", 8 },
};

static size_t dtype_size(const char *name)
{
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (strcmp(st_dtypes[i].name, name) == 0) return st_dtypes[i].size;
    return 0;
}

/* ---- helpers ---- */

/* Copy s into dst for an error line: at most 40 bytes, control bytes as '?',
 * so a hostile name cannot break the one-line error. */
static const char *shown(char *dst, size_t cap, const char *s)
{
    size_t i = 0;
    for (; s[i] && i + 4 < cap && i < 40; i++) dst[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
    if (s[i] && i + 4 < cap) {
        memcpy(dst + i, "...", 3);
        i += 3;
    }
    dst[i] = '\0';
    return dst;
}

/* Length of the valid UTF-8 prefix of b[0..n), by ddptop's one rule. */
static size_t utf8_valid_prefix(const unsigned char *b, size_t n)
{
    size_t i = 0, k;
    while (i < n && (k = utf8_seq(b + i, n - i)) > 0) i += k;
    return i;
}

/* ---- writer ---- */

static int is_utf8(const char *s)
{
    size_t n = strlen(s);
    return utf8_valid_prefix((const unsigned char *)s, n) == n;
}

int st_write(const char *path, const StTensor *t, int n, const char *const *meta_kv, char *err, size_t errlen)
{
    char nm[64];
    if (n < 0 || n > ST_MAX_TENSORS) {
        snprintf(err, errlen, "%s: %d tensors, need 0..%d", path, n, ST_MAX_TENSORS);
        return -1;
    }
    /* Refuse what a reader would refuse, before touching the file. */
    for (int i = 0; i < n; i++) {
        const StTensor *x = &t[i];
        size_t esz = dtype_size(x->dtype);
        if (!memchr(x->name, '\0', sizeof x->name) || x->name[0] == '\0' || strcmp(x->name, "__metadata__") == 0 ||
            !is_utf8(x->name)) {
            snprintf(err, errlen, "%s: tensor %d: bad name", path, i);
            return -1;
        }
        shown(nm, sizeof nm, x->name);
        if (!esz) {
            snprintf(err, errlen, "%s: tensor '%s': unknown dtype", path, nm);
            return -1;
        }
        if (x->ndim < 0 || x->ndim > 8) {
            snprintf(err, errlen, "%s: tensor '%s': %d dimensions", path, nm, x->ndim);
            return -1;
        }
        uint64_t bytes = esz;
        for (int d = 0; d < x->ndim; d++) {
            if (x->shape[d] < 0 || (x->shape[d] > 0 && bytes > UINT64_MAX / (uint64_t)x->shape[d])) {
                snprintf(err, errlen, "%s: tensor '%s': bad shape", path, nm);
                return -1;
            }
            bytes *= (uint64_t)x->shape[d];
        }
        if (bytes != x->nbytes || (x->nbytes && !x->data)) {
            snprintf(err, errlen, "%s: tensor '%s': %zu bytes given, shape needs %llu", path, nm, x->nbytes,
                     (unsigned long long)bytes);
            return -1;
        }
        for (int j = 0; j < i; j++)
            if (strcmp(t[j].name, x->name) == 0) {
                snprintf(err, errlen, "%s: tensor '%s' appears twice", path, nm);
                return -1;
            }
    }
    for (int i = 0; meta_kv && meta_kv[i]; i += 2)
        if (!meta_kv[i + 1] || !is_utf8(meta_kv[i]) || !is_utf8(meta_kv[i + 1])) {
            snprintf(err, errlen, "%s: metadata key %d has no value or is not UTF-8", path, i / 2);
            return -1;
        }

    Json h;
    json_init_buf(&h);
    json_obj(&h);
    if (meta_kv && meta_kv[0]) {
        json_key(&h, "__metadata__");
        json_obj(&h);
        for (int i = 0; meta_kv[i]; i += 2) json_kv_str(&h, meta_kv[i], meta_kv[i + 1]);
        json_obj_end(&h);
    }
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        json_key(&h, t[i].name);
        json_obj(&h);
        json_kv_str(&h, "dtype", t[i].dtype);
        json_key(&h, "shape");
        json_arr(&h);
        for (int d = 0; d < t[i].ndim; d++) json_int(&h, t[i].shape[d]);
        json_arr_end(&h);
        json_key(&h, "data_offsets");
        json_arr(&h);
        json_uint(&h, off);
        off += t[i].nbytes;
        json_uint(&h, off);
        json_arr_end(&h);
        json_obj_end(&h);
    }
    json_obj_end(&h);
    size_t hlen;
    json_buf(&h, &hlen);
    for (size_t pad = (8 - hlen % 8) % 8; pad > 0; pad--) /* the data section starts 8-aligned */
        json_text(&h, " ");
    const char *hs = json_buf(&h, &hlen);
    if (!hs || hlen > ST_MAX_HEADER_BYTES) {
        snprintf(err, errlen, "%s: header %s", path, hs ? "too large" : "out of memory");
        json_done(&h);
        return -1;
    }

    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    FILE *f = fopen(path, "wb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot create (%s)", path, strerror(errno));
        json_done(&h);
        return -1;
    }
    errno = 0; /* so a failure below reports its own cause */
    bool ok = fwrite(len8, 1, 8, f) == 8 && fwrite(hs, 1, hlen, f) == hlen;
    for (int i = 0; ok && i < n; i++) ok = t[i].nbytes == 0 || fwrite(t[i].data, 1, t[i].nbytes, f) == t[i].nbytes;
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int saved = errno;
    ok = (fclose(f) == 0) && ok;
    if (!ok && saved == 0) saved = errno;
    json_done(&h);
    if (!ok) {
        unlink(path); /* a partial file must not pass for a checkpoint */
        snprintf(err, errlen, "%s: write failed (%s)", path, strerror(saved ? saved : EIO));
        return -1;
    }
    return 0;
}

/* ---- header -> StFile ---- */

typedef struct {
    uint64_t begin, end;
    int index;
} Span;

static int span_cmp(const void *a, const void *b)
{
    const Span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

static int parse_tensor(Js *j, StTensor *t, Span *sp)
{
    char nm[64];
    shown(nm, sizeof nm, t->name);
    bool have_dtype = false, have_shape = false, have_off = false;
    int r = js_open(j, '{', '}');
    while (r == 1) {
        char *key = NULL;
        if (js_string(j, &key) < 0 || js_expect(j, ':') < 0) {
            free(key);
            return -1;
        }
        if (strcmp(key, "dtype") == 0) {
            char *dt = NULL;
            if (have_dtype) {
                free(key);
                return js_fail(j, "tensor '%s': dtype given twice", nm);
            }
            free(key);
            if (js_string(j, &dt) < 0) return -1;
            size_t n = strlen(dt);
            if (n >= sizeof t->dtype || !dtype_size(dt)) {
                char d[64];
                js_fail(j, "tensor '%s': unknown dtype '%s'", nm, shown(d, sizeof d, dt));
                free(dt);
                return -1;
            }
            memcpy(t->dtype, dt, n + 1);
            free(dt);
            have_dtype = true;
        } else if (strcmp(key, "shape") == 0) {
            free(key);
            if (have_shape) return js_fail(j, "tensor '%s': shape given twice", nm);
            int rr = js_open(j, '[', ']');
            t->ndim = 0;
            while (rr == 1) {
                uint64_t v;
                if (t->ndim == 8) return js_fail(j, "tensor '%s': more than 8 dimensions", nm);
                if (js_uint(j, &v) < 0) return -1;
                t->shape[t->ndim++] = (int64_t)v;
                rr = js_next(j, ']');
            }
            if (rr < 0) return -1;
            have_shape = true;
        } else if (strcmp(key, "data_offsets") == 0) {
            free(key);
            if (have_off) return js_fail(j, "tensor '%s': data_offsets given twice", nm);
            if (js_expect(j, '[') < 0 || js_uint(j, &sp->begin) < 0 || js_expect(j, ',') < 0 ||
                js_uint(j, &sp->end) < 0 || js_expect(j, ']') < 0)
                return -1;
            have_off = true;
        } else {
            free(key);
            if (js_skip_value(j, 1) < 0) return -1;
        }
        r = js_next(j, '}');
    }
    if (r < 0) return -1;
    if (!have_dtype || !have_shape || !have_off)
        return js_fail(j, "tensor '%s' lacks %s", nm, !have_dtype ? "dtype" : !have_shape ? "shape" : "data_offsets");
    return 0;
}

static int parse_metadata(Js *j, StFile *f)
{
    if (f->meta_seen) return js_fail(j, "__metadata__ given twice");
    f->meta_seen = true;
    int r = js_open(j, '{', '}');
    while (r == 1) {
        char *k = NULL, *v = NULL;
        if (js_string(j, &k) < 0 || js_expect(j, ':') < 0) {
            free(k);
            return -1;
        }
        js_ws(j);
        if (j->p < j->end && *j->p != '"') {
            char d[64];
            js_fail(j, "__metadata__ value of '%s' is not a string", shown(d, sizeof d, k));
            free(k);
            return -1;
        }
        if (js_string(j, &v) < 0) {
            free(k);
            return -1;
        }
        if (f->nmeta == ST_MAX_META) {
            free(k);
            free(v);
            return js_fail(j, "more than %d metadata entries", ST_MAX_META);
        }
        if (f->nmeta == f->metacap) {
            int cap = f->metacap ? f->metacap * 2 : 8;
            StMeta *m = realloc(f->meta, sizeof *m * (size_t)cap);
            if (!m) {
                free(k);
                free(v);
                return js_fail(j, "out of memory");
            }
            f->meta = m;
            f->metacap = cap;
        }
        f->meta[f->nmeta].key = k;
        f->meta[f->nmeta].val = v;
        f->nmeta++;
        r = js_next(j, '}');
    }
    return r < 0 ? -1 : 0;
}

static int strp_cmp(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* Tensor names and metadata keys must be unique. Sorting keeps this
 * O(n log n): a hostile header may hold 100k names. */
static int check_unique(Js *j, StFile *f)
{
    int n = f->n > f->nmeta ? f->n : f->nmeta;
    const char **v = malloc(sizeof *v * (size_t)(n + 1));
    if (!v) return js_fail(j, "out of memory");
    for (int pass = 0; pass < 2; pass++) {
        int m = pass ? f->nmeta : f->n;
        for (int i = 0; i < m; i++) v[i] = pass ? f->meta[i].key : f->t[i].name;
        qsort(v, (size_t)m, sizeof *v, strp_cmp);
        for (int i = 1; i < m; i++)
            if (strcmp(v[i - 1], v[i]) == 0) {
                char nm[64];
                js_fail(j, "%s '%s' given twice", pass ? "__metadata__ key" : "tensor", shown(nm, sizeof nm, v[i]));
                free(v);
                return -1;
            }
    }
    free(v);
    return 0;
}

/* Parse the whole header into f->t (names, dtype, shape) and spans. */
static int parse_header(Js *j, StFile *f, Span **spans_out)
{
    Span *spans = NULL;
    char *key = NULL;
    int r = js_open(j, '{', '}');
    while (r == 1) {
        if (js_string(j, &key) < 0 || js_expect(j, ':') < 0) goto fail_key;
        if (strcmp(key, "__metadata__") == 0) {
            free(key);
            key = NULL;
            if (parse_metadata(j, f) < 0) goto fail;
        } else {
            char nm[64];
            if (strlen(key) >= sizeof f->t[0].name || key[0] == '\0') {
                js_fail(j, "tensor name '%s' empty or longer than %zu bytes", shown(nm, sizeof nm, key),
                        sizeof f->t[0].name - 1);
                goto fail_key;
            }
            if (f->n == ST_MAX_TENSORS) {
                js_fail(j, "more than %d tensors", ST_MAX_TENSORS);
                goto fail_key;
            }
            if (f->n == f->cap) {
                int cap = f->cap ? f->cap * 2 : 16;
                StTensor *t = realloc(f->t, sizeof *t * (size_t)cap);
                Span *s = realloc(spans, sizeof *s * (size_t)cap);
                if (t) f->t = t;
                if (s) spans = s;
                if (!t || !s) {
                    js_fail(j, "out of memory");
                    goto fail_key;
                }
                f->cap = cap;
            }
            StTensor *t = &f->t[f->n];
            memset(t, 0, sizeof *t);
            memcpy(t->name, key, strlen(key) + 1);
            free(key);
            key = NULL;
            spans[f->n].index = f->n;
            if (parse_tensor(j, t, &spans[f->n]) < 0) goto fail;
            f->n++;
        }
        r = js_next(j, '}');
    }
    if (r < 0) goto fail;
    js_ws(j);
    if (j->p != j->end) {
        js_fail(j, "unexpected text after the header object");
        goto fail;
    }
    if (check_unique(j, f) < 0) goto fail;
    *spans_out = spans;
    return 0;
fail_key:
    free(key);
fail:
    free(spans);
    return -1;
}

void st_close(StFile **pf)
{
    StFile *f = *pf;
    if (!f) return;
    for (int i = 0; i < f->nmeta; i++) {
        free(f->meta[i].key);
        free(f->meta[i].val);
    }
    free(f->meta);
    free(f->t);
    free(f->mem);
    free(f);
    *pf = NULL;
}

/* Read exactly n bytes; 0, or -1 (errno set, or 0 on early end of file). */
static int read_full(int fd, void *buf, size_t n)
{
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t r = read(fd, p, n > (1u << 30) ? (1u << 30) : n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            if (r == 0) errno = 0;
            return -1;
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

int st_open(const char *path, StFile **out, char *err, size_t errlen)
{
    *out = NULL;
    StFile *f = calloc(1, sizeof *f);
    Span *spans = NULL;
    /* A FIFO named as a checkpoint must not hang the reader in open(). */
    int fd = file_open_regular(path, err, errlen);
    if (fd < 0) {
        free(f);
        return -1;
    }
    if (!f) {
        snprintf(err, errlen, "%s: out of memory", path);
        goto fail;
    }
    struct stat sb;
    if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
        snprintf(err, errlen, "%s: not a regular file", path);
        goto fail;
    }
    uint64_t size = (uint64_t)sb.st_size;
    if (size < 8) {
        snprintf(err, errlen, "%s: %llu bytes, too short for a safetensors file", path, (unsigned long long)size);
        goto fail;
    }
    unsigned char len8[8];
    if (read_full(fd, len8, 8) < 0) {
        snprintf(err, errlen, "%s: read failed (%s)", path, errno ? strerror(errno) : "short");
        goto fail;
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | len8[i];
    if (hlen > ST_MAX_HEADER_BYTES || hlen > size - 8) {
        /* torch.save writes a zip (PK..) or, in the legacy format, a pickle
         * (0x80 then protocol 2-5): the usual mix-up with model.safetensors */
        if (!memcmp(len8, "PK\x03\x04", 4) || (len8[0] == 0x80 && len8[1] >= 2 && len8[1] <= 5)) {
            snprintf(err, errlen, "%s: not a safetensors file (is it a torch.save pickle?)", path);
            goto fail;
        }
        snprintf(err, errlen, "%s: header length %llu impossible (file has %llu bytes, limit %u)", path,
                 (unsigned long long)hlen, (unsigned long long)size, ST_MAX_HEADER_BYTES);
        goto fail;
    }
    if (size > SIZE_MAX - 2 * ST_ALIGN) {
        snprintf(err, errlen, "%s: too large", path);
        goto fail;
    }
    /* Place the file so the data section is 64-byte aligned in memory:
     * tensors with aligned offsets can be used in place. */
    size_t shift = (size_t)((ST_ALIGN - (8 + hlen) % ST_ALIGN) % ST_ALIGN);
    void *mem = NULL;
    if (posix_memalign(&mem, ST_ALIGN, (size_t)size + ST_ALIGN) != 0) {
        snprintf(err, errlen, "%s: out of memory for %llu bytes", path, (unsigned long long)size);
        goto fail;
    }
    f->mem = mem;
    unsigned char *base = f->mem + shift;
    memcpy(base, len8, 8);
    if (read_full(fd, base + 8, (size_t)size - 8) < 0) {
        snprintf(err, errlen, "%s: read failed (%s)", path, errno ? strerror(errno) : "file shrank while reading");
        goto fail;
    }
    close(fd);
    fd = -1;

    const char *hdr = (const char *)base + 8;
    size_t valid = utf8_valid_prefix((const unsigned char *)hdr, (size_t)hlen);
    if (valid != hlen) {
        snprintf(err, errlen, "%s: header is not UTF-8 (byte %zu)", path, valid);
        goto fail;
    }
    Js j = { .start = hdr, .p = hdr, .end = hdr + hlen, .path = path, .err = err, .errlen = errlen };
    if (parse_header(&j, f, &spans) < 0) goto fail;

    /* Sizes, then the tiling of the data section. */
    uint64_t data_len = size - 8 - hlen;
    const unsigned char *data = base + 8 + hlen;
    char nm[64], nm2[64];
    for (int i = 0; i < f->n; i++) {
        StTensor *t = &f->t[i];
        const Span *s = &spans[i];
        shown(nm, sizeof nm, t->name);
        uint64_t need = dtype_size(t->dtype);
        for (int d = 0; d < t->ndim; d++) {
            uint64_t dim = (uint64_t)t->shape[d];
            if (dim && need > UINT64_MAX / dim) {
                snprintf(err, errlen, "%s: tensor '%s': shape overflows", path, nm);
                goto fail;
            }
            need *= dim;
        }
        if (s->end < s->begin || s->end > data_len) {
            snprintf(err, errlen,
                     "%s: tensor '%s': data_offsets [%llu, %llu] outside the data "
                     "section of %llu bytes",
                     path, nm, (unsigned long long)s->begin, (unsigned long long)s->end, (unsigned long long)data_len);
            goto fail;
        }
        if (need != s->end - s->begin) {
            snprintf(err, errlen,
                     "%s: tensor '%s': shape and dtype need %llu bytes, "
                     "data_offsets give %llu",
                     path, nm, (unsigned long long)need, (unsigned long long)(s->end - s->begin));
            goto fail;
        }
        t->data = data + s->begin;
        t->nbytes = (size_t)need;
    }
    if (f->n > 0) /* spans is NULL for a file without tensors */
        qsort(spans, (size_t)f->n, sizeof *spans, span_cmp);
    uint64_t at = 0;
    for (int i = 0; i < f->n; i++) {
        shown(nm, sizeof nm, f->t[spans[i].index].name);
        if (spans[i].begin < at) {
            shown(nm2, sizeof nm2, f->t[spans[i - 1].index].name);
            snprintf(err, errlen, "%s: tensors '%s' and '%s' overlap", path, nm2, nm);
            goto fail;
        }
        if (spans[i].begin > at) {
            snprintf(err, errlen, "%s: %llu unused bytes in the data section before '%s'", path,
                     (unsigned long long)(spans[i].begin - at), nm);
            goto fail;
        }
        at = spans[i].end;
    }
    if (at != data_len) {
        snprintf(err, errlen, "%s: data section has %llu bytes, tensors cover %llu", path, (unsigned long long)data_len,
                 (unsigned long long)at);
        goto fail;
    }
    free(spans);
    *out = f;
    return 0;
fail:
    if (fd >= 0) close(fd);
    free(spans);
    st_close(&f);
    return -1;
}

int st_count(const StFile *f) { return f ? f->n : 0; }

const StTensor *st_tensor(const StFile *f, int i) { return f && i >= 0 && i < f->n ? &f->t[i] : NULL; }

const StTensor *st_find(const StFile *f, const char *name)
{
    for (int i = 0; f && i < f->n; i++)
        if (strcmp(f->t[i].name, name) == 0) return &f->t[i];
    return NULL;
}

const char *st_meta(const StFile *f, const char *key)
{
    for (int i = 0; f && i < f->nmeta; i++)
        if (strcmp(f->meta[i].key, key) == 0) return f->meta[i].val;
    return NULL;
}
