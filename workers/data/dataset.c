/* dataset.c — Fashion-MNIST from gzip IDX files, and a seeded synthetic set.
 *
 * Owns: reading and checking IDX files (zlib), x = pixel/255 as float32, the
 * synthetic generator and its PRNG. Does not own: sampling, batching or
 * normalisation beyond /255 (PyTorch's ToTensor() does exactly /255).
 * Main thread only (no shared state, but loads are long and not reentrant
 * with the same Dataset).
 */
#include "data/dataset.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "base/file.h"

#define IDX_MAGIC_IMAGES 0x00000803u
#define IDX_MAGIC_LABELS 0x00000801u
/* Far above Fashion-MNIST (60000 x 28 x 28); refuses headers that would ask
 * for absurd allocations. */
#define IDX_MAX_COUNT    (1 << 24)
#define IDX_MAX_SIDE     4096
#define FMNIST_CLASSES   10

/* Synthetic set limits: x is n * dim floats. */
#define SYNTH_MAX_ELEMS   ((int64_t)1 << 31)
#define SYNTH_MAX_CLASSES 1000000

void dataset_done(Dataset *d)
{
    free(d->x);
    free(d->y);
    memset(d, 0, sizeof *d);
}

/* ---- IDX over zlib ---- */

/* zlib's message, without the "path: " prefix gzerror puts in front. */
static const char *gz_msg(gzFile gz, const char *path, int *zerr)
{
    const char *msg = gzerror(gz, zerr);
    size_t n = strlen(path);
    if (msg && strncmp(msg, path, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ') msg += n + 2;
    return msg && *msg ? msg : "zlib error";
}

/* Read exactly len bytes. Returns 0, or -1 with err naming the file:
 * a short read is truncation, a zlib error is corruption. */
static int gz_read_all(gzFile gz, const char *path, void *buf, size_t len, const char *what, char *err, size_t errlen)
{
    unsigned char *p = buf;
    while (len > 0) {
        unsigned chunk = len > (1u << 30) ? (1u << 30) : (unsigned)len;
        int got = gzread(gz, p, chunk);
        int zerr = Z_OK;
        if (got < 0) {
            snprintf(err, errlen, "%s: corrupt gzip data while reading %s (%s)", path, what, gz_msg(gz, path, &zerr));
            return -1;
        }
        if (got == 0) {
            const char *msg = gz_msg(gz, path, &zerr);
            snprintf(err, errlen, "%s: truncated while reading %s%s%s%s", path, what, zerr != Z_OK ? " (" : "",
                     zerr != Z_OK ? msg : "", zerr != Z_OK ? ")" : "");
            return -1;
        }
        p += got;
        len -= (size_t)got;
    }
    return 0;
}

/* After the last item: the stream must end here, and reaching its end makes
 * zlib check the gzip CRC, which catches corruption that still inflates. */
static int gz_expect_end(gzFile gz, const char *path, char *err, size_t errlen)
{
    unsigned char extra;
    int zerr = Z_OK;
    int got = gzread(gz, &extra, 1);
    if (got > 0) {
        snprintf(err, errlen, "%s: unexpected bytes after the last item", path);
        return -1;
    }
    const char *msg = gz_msg(gz, path, &zerr);
    if (got < 0 || (zerr != Z_OK && zerr != Z_BUF_ERROR)) {
        snprintf(err, errlen, "%s: corrupt gzip data (%s)", path, msg);
        return -1;
    }
    if (zerr == Z_BUF_ERROR) {
        snprintf(err, errlen, "%s: truncated gzip stream (%s)", path, msg);
        return -1;
    }
    return 0;
}

static uint32_t be32(const unsigned char *b)
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* Open path and read its magic and `ndims` big-endian dimensions. */
static gzFile idx_open(const char *path, uint32_t magic, int ndims, uint32_t *dims, char *err, size_t errlen)
{
    /* Regular files only: gzopen of a FIFO would wait for a writer. */
    int fd = file_open_regular(path, err, errlen);
    if (fd < 0) return NULL;
    gzFile gz = gzdopen(fd, "rb");
    if (!gz) {
        close(fd);
        snprintf(err, errlen, "%s: cannot open (out of memory)", path);
        return NULL;
    }
    gzbuffer(gz, 1 << 17);
    unsigned char hdr[16];
    if (gz_read_all(gz, path, hdr, 4 + 4 * (size_t)ndims, "the IDX header", err, errlen) < 0) goto fail;
    uint32_t m = be32(hdr);
    if (m != magic) {
        snprintf(err, errlen, "%s: bad IDX magic 0x%08x (expected 0x%08x)", path, m, magic);
        goto fail;
    }
    for (int i = 0; i < ndims; i++) dims[i] = be32(hdr + 4 + 4 * i);
    return gz;
fail:
    gzclose(gz);
    return NULL;
}

/* A set complete in d->x and d->y: its name and shape. Returns 0. */
static int loaded(Dataset *d, const char *name, int64_t n, int dim, int classes)
{
    snprintf(d->name, sizeof d->name, "%s", name);
    d->n = n;
    d->dim = dim;
    d->classes = classes;
    return 0;
}

static int join_path(char *out, size_t outlen, const char *dir, const char *file, char *err, size_t errlen)
{
    int n = snprintf(out, outlen, "%s/%s", dir, file);
    if (n < 0 || (size_t)n >= outlen) {
        snprintf(err, errlen, "%s: path too long", dir);
        return -1;
    }
    return 0;
}

bool dataset_fashion_mnist_present(const char *dir)
{
    char a[4096], b[4096], e[64];
    if (join_path(a, sizeof a, dir, "train-images-idx3-ubyte.gz", e, sizeof e) < 0 ||
        join_path(b, sizeof b, dir, "train-labels-idx1-ubyte.gz", e, sizeof e) < 0)
        return false;
    return access(a, R_OK) == 0 && access(b, R_OK) == 0;
}

int dataset_load_fashion_mnist(Dataset *d, const char *dir, bool train, int64_t limit, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    const char *pre = train ? "train" : "t10k";
    char ipath[4096], lpath[4096], name[64];
    snprintf(name, sizeof name, "%s-images-idx3-ubyte.gz", pre);
    if (join_path(ipath, sizeof ipath, dir, name, err, errlen) < 0) return -1;
    snprintf(name, sizeof name, "%s-labels-idx1-ubyte.gz", pre);
    if (join_path(lpath, sizeof lpath, dir, name, err, errlen) < 0) return -1;

    gzFile gi = NULL, gl = NULL;
    unsigned char *pix = NULL;
    uint32_t idims[3], ldims[1];
    if (!(gi = idx_open(ipath, IDX_MAGIC_IMAGES, 3, idims, err, errlen))) goto fail;
    if (!(gl = idx_open(lpath, IDX_MAGIC_LABELS, 1, ldims, err, errlen))) goto fail;
    if (idims[0] == 0 || idims[0] > IDX_MAX_COUNT) {
        snprintf(err, errlen, "%s: image count %u out of range", ipath, idims[0]);
        goto fail;
    }
    if (idims[1] == 0 || idims[1] > IDX_MAX_SIDE || idims[2] == 0 || idims[2] > IDX_MAX_SIDE ||
        (uint64_t)idims[1] * idims[2] > (1u << 20)) {
        snprintf(err, errlen, "%s: image size %ux%u out of range", ipath, idims[1], idims[2]);
        goto fail;
    }
    if (ldims[0] != idims[0]) {
        snprintf(err, errlen, "%s: %u labels but %s has %u images", lpath, ldims[0], ipath, idims[0]);
        goto fail;
    }

    int64_t n = idims[0];
    if (limit > 0 && limit < n) n = limit; /* only the first n are read: --limit starts fast */
    int dim = (int)(idims[1] * idims[2]);
    d->x = malloc((size_t)n * (size_t)dim * sizeof(float));
    d->y = malloc((size_t)n * sizeof(int32_t));
    pix = malloc((size_t)n > (size_t)dim ? (size_t)n : (size_t)dim);
    if (!d->x || !d->y || !pix) {
        snprintf(err, errlen, "%s: out of memory for %lld images", ipath, (long long)n);
        goto fail;
    }
    for (int64_t i = 0; i < n; i++) {
        if (gz_read_all(gi, ipath, pix, (size_t)dim, "pixels", err, errlen) < 0) goto fail;
        float *row = d->x + (size_t)i * (size_t)dim;
        for (int j = 0; j < dim; j++) row[j] = (float)pix[j] / 255.0f;
    }
    if (gz_read_all(gl, lpath, pix, (size_t)n, "labels", err, errlen) < 0) goto fail;
    /* Without a limit the whole file was read: verify its end and CRC. With
     * one, the rest is never inflated (a fast start matters more). */
    if (n == (int64_t)idims[0] &&
        (gz_expect_end(gi, ipath, err, errlen) < 0 || gz_expect_end(gl, lpath, err, errlen) < 0))
        goto fail;
    for (int64_t i = 0; i < n; i++) {
        if (pix[i] >= FMNIST_CLASSES) {
            snprintf(err, errlen, "%s: label %u at index %lld outside 0..%d", lpath, pix[i], (long long)i,
                     FMNIST_CLASSES - 1);
            goto fail;
        }
        d->y[i] = pix[i];
    }
    free(pix);
    gzclose(gi);
    gzclose(gl);
    return loaded(d, "fashion-mnist", n, dim, FMNIST_CLASSES);
fail:
    free(pix);
    if (gi) gzclose(gi);
    if (gl) gzclose(gl);
    dataset_done(d);
    return -1;
}

/* ---- synthetic ---- */

/* splitmix64: tiny, portable, and the same stream on every machine. */
static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double uniform01(uint64_t *s) { return (double)(splitmix64(s) >> 11) * 0x1p-53; }

/* Approximately standard normal: the sum of 12 uniforms minus 6 (Irwin-Hall).
 * Chosen over Box-Muller because it uses only + and exact scaling: libm's
 * log/cos may differ in the last bit between machines, and the promise is
 * "same bytes on every machine". */
static double gauss(uint64_t *s)
{
    double acc = 0.0;
    for (int i = 0; i < 12; i++) acc += uniform01(s);
    return acc - 6.0;
}

int dataset_make_synthetic(Dataset *d, int64_t n, int dim, int classes, uint64_t seed, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    if (n < 1 || dim < 1 || classes < 2 || classes > SYNTH_MAX_CLASSES || n > SYNTH_MAX_ELEMS / dim ||
        (int64_t)classes * dim > SYNTH_MAX_ELEMS) {
        snprintf(err, errlen,
                 "synthetic dataset: bad shape n=%lld dim=%d classes=%d (need n >= 1, dim >= 1, "
                 "classes >= 2, n*dim <= 2^31)",
                 (long long)n, dim, classes);
        return -1;
    }
    float *proto = malloc((size_t)classes * (size_t)dim * sizeof(float));
    d->x = malloc((size_t)n * (size_t)dim * sizeof(float));
    d->y = malloc((size_t)n * sizeof(int32_t));
    if (!proto || !d->x || !d->y) {
        free(proto);
        dataset_done(d);
        snprintf(err, errlen, "synthetic dataset: out of memory for %lld x %d", (long long)n, dim);
        return -1;
    }
    uint64_t s = seed;
    /* One prototype per class, samples = prototype + unit noise. Prototypes
     * are scaled by 3/sqrt(dim) so two classes' centres are about 4.2 noise
     * deviations apart whatever dim is: learnable, with a few percent
     * overlap, so a loss curve has something to show even at dim 784.
     * (sqrt is correctly rounded in IEEE arithmetic: still the same bytes.) */
    const double scale = 3.0 / sqrt((double)dim);
    for (size_t i = 0; i < (size_t)classes * (size_t)dim; i++) proto[i] = (float)(gauss(&s) * scale);
    /* Balanced labels (counts differ by at most one), in a seeded order. */
    for (int64_t i = 0; i < n; i++) d->y[i] = (int32_t)(i % classes);
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(splitmix64(&s) % (uint64_t)(i + 1));
        int32_t t = d->y[i];
        d->y[i] = d->y[j];
        d->y[j] = t;
    }
    for (int64_t i = 0; i < n; i++) {
        const float *p = proto + (size_t)d->y[i] * (size_t)dim;
        float *row = d->x + (size_t)i * (size_t)dim;
        for (int j = 0; j < dim; j++) row[j] = (float)((double)p[j] + gauss(&s));
    }
    free(proto);
    return loaded(d, "synthetic", n, dim, classes);
}
