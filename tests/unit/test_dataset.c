/* test_dataset.c — Fashion-MNIST loading, hostile IDX files, synthetic set. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "check.h"
#include "data/dataset.h"

static char tmpdir[256];

static void put_be32(unsigned char *b, uint32_t v)
{
    b[0] = (unsigned char)(v >> 24);
    b[1] = (unsigned char)(v >> 16);
    b[2] = (unsigned char)(v >> 8);
    b[3] = (unsigned char)v;
}

/* Write a gzip IDX file: magic, dims, then `len` payload bytes. */
static void write_idx(const char *dir, const char *file, uint32_t magic, const uint32_t *dims, int ndims,
                      const unsigned char *payload, size_t len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    gzFile gz = gzopen(path, "wb");
    if (!gz) {
        perror(path);
        exit(2);
    }
    unsigned char hdr[16];
    put_be32(hdr, magic);
    for (int i = 0; i < ndims; i++) put_be32(hdr + 4 + 4 * i, dims[i]);
    gzwrite(gz, hdr, 4 + 4 * (unsigned)ndims);
    if (len) gzwrite(gz, payload, (unsigned)len);
    gzclose(gz);
}

/* A tiny valid train set in dir: n images of 2x3, labels i % 10. */
static void write_small_set(const char *dir, uint32_t n)
{
    unsigned char pix[64 * 6], lab[64];
    for (uint32_t i = 0; i < n * 6; i++) pix[i] = (unsigned char)(i * 37);
    pix[0] = 0;
    pix[1] = 255;
    for (uint32_t i = 0; i < n; i++) lab[i] = (unsigned char)(i % 10);
    uint32_t idims[3] = { n, 2, 3 }, ldims[1] = { n };
    write_idx(dir, "train-images-idx3-ubyte.gz", 0x803, idims, 3, pix, n * 6);
    write_idx(dir, "train-labels-idx1-ubyte.gz", 0x801, ldims, 1, lab, n);
}

static char *subdir(const char *name)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    if (mkdir(path, 0700) != 0) {
        perror(path);
        exit(2);
    }
    return path;
}

static void test_fashion_mnist(void)
{
    /* Without the package there is nothing to check: a note, not a PASS. */
    if (!dataset_fashion_mnist_present(DATASET_FMNIST_DIR)) {
        printf("note: %s missing (Debian package dataset-fashion-mnist): "
               "Fashion-MNIST checks not run\n",
               DATASET_FMNIST_DIR);
        return;
    }
    TEST_BEGIN("fashion_mnist_train_loads");
    Dataset d;
    char err[512] = "";
    int rc = dataset_load_fashion_mnist(&d, DATASET_FMNIST_DIR, true, 0, err, sizeof err);
    CHECK(rc == 0, "%s", err);
    if (rc == 0) {
        CHECK(d.n == 60000, "n=%lld", (long long)d.n);
        CHECK(d.dim == 784 && d.classes == 10, "dim=%d classes=%d", d.dim, d.classes);
        CHECK(strcmp(d.name, "fashion-mnist") == 0, "name %s", d.name);
        CHECK(d.y[0] == 9, "first label %d (ankle boot is 9)", d.y[0]);
        int64_t counts[10] = { 0 }, bad = 0;
        for (int64_t i = 0; i < d.n; i++) {
            if (d.y[i] < 0 || d.y[i] > 9)
                bad++;
            else
                counts[d.y[i]]++;
        }
        CHECK(bad == 0, "%lld labels outside 0..9", (long long)bad);
        for (int c = 0; c < 10; c++) CHECK(counts[c] == 6000, "class %d has %lld samples", c, (long long)counts[c]);
        float lo = 1, hi = 0;
        int nonexact = 0;
        for (size_t i = 0; i < (size_t)d.n * 784; i++) {
            float v = d.x[i];
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
            /* every value must be k/255 for an integer k */
            float k = v * 255.0f;
            if (fabsf(k - roundf(k)) > 1e-3f) nonexact++;
        }
        CHECK(lo == 0.0f && hi == 1.0f, "pixel range [%g, %g]", lo, hi);
        CHECK(nonexact == 0, "%d values not k/255", nonexact);

        Dataset l;
        rc = dataset_load_fashion_mnist(&l, DATASET_FMNIST_DIR, true, 100, err, sizeof err);
        CHECK(rc == 0, "limit: %s", err);
        if (rc == 0) {
            CHECK(l.n == 100, "limit 100 gave %lld", (long long)l.n);
            CHECK(memcmp(l.x, d.x, 100 * 784 * sizeof(float)) == 0, "limit keeps the first rows");
            CHECK(memcmp(l.y, d.y, 100 * sizeof(int32_t)) == 0, "limit keeps the first labels");
            dataset_done(&l);
        }
        rc = dataset_load_fashion_mnist(&l, DATASET_FMNIST_DIR, true, 1000000, err, sizeof err);
        CHECK(rc == 0 && l.n == 60000, "limit above n keeps all: rc=%d n=%lld", rc, (long long)l.n);
        if (rc == 0) dataset_done(&l);
        dataset_done(&d);
        CHECK(d.x == NULL && d.n == 0, "dataset_done clears");
    }
    TEST_END();

    TEST_BEGIN("fashion_mnist_test_split_loads");
    rc = dataset_load_fashion_mnist(&d, DATASET_FMNIST_DIR, false, 0, err, sizeof err);
    CHECK(rc == 0, "%s", err);
    if (rc == 0) {
        CHECK(d.n == 10000 && d.dim == 784, "n=%lld dim=%d", (long long)d.n, d.dim);
        dataset_done(&d);
    }
    TEST_END();
}

static void test_small_and_hostile(void)
{
    char err[512];
    Dataset d;

    TEST_BEGIN("idx_small_set_parsed");
    char *dir = subdir("ok");
    write_small_set(dir, 12);
    CHECK(dataset_fashion_mnist_present(dir), "present() false for %s", dir);
    int rc = dataset_load_fashion_mnist(&d, dir, true, 0, err, sizeof err);
    CHECK(rc == 0, "%s", err);
    if (rc == 0) {
        CHECK(d.n == 12 && d.dim == 6 && d.classes == 10, "n=%lld dim=%d", (long long)d.n, d.dim);
        CHECK(d.x[0] == 0.0f && d.x[1] == 1.0f, "x[0]=%g x[1]=%g", d.x[0], d.x[1]);
        CHECK(d.x[2] == (float)(unsigned char)(2 * 37) / 255.0f, "x[2]=%g", d.x[2]);
        CHECK(d.y[11] == 1, "y[11]=%d", d.y[11]);
        dataset_done(&d);
    }
    rc = dataset_load_fashion_mnist(&d, dir, true, 5, err, sizeof err);
    CHECK(rc == 0 && d.n == 5, "limit 5: rc=%d n=%lld %s", rc, (long long)d.n, err);
    if (rc == 0) dataset_done(&d);
    TEST_END();

    TEST_BEGIN("idx_missing_dir_errors");
    err[0] = '\0';
    rc = dataset_load_fashion_mnist(&d, "/nonexistent/fmnist", true, 0, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "/nonexistent/fmnist/train-images-idx3-ubyte.gz"), "rc=%d err=%s", rc, err);
    CHECK(!dataset_fashion_mnist_present("/nonexistent/fmnist"), "present() true");
    rc = dataset_load_fashion_mnist(&d, tmpdir, false, 0, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "t10k-images"), "t10k missing: rc=%d err=%s", rc, err);
    TEST_END();

    TEST_BEGIN("idx_wrong_magic_errors");
    dir = subdir("magic");
    write_small_set(dir, 4);
    uint32_t idims[3] = { 4, 2, 3 };
    unsigned char pix[24] = { 0 };
    write_idx(dir, "train-images-idx3-ubyte.gz", 0x801, idims, 3, pix, 24);
    err[0] = '\0';
    rc = dataset_load_fashion_mnist(&d, dir, true, 0, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "train-images-idx3-ubyte.gz") && strstr(err, "magic"), "rc=%d err=%s", rc, err);
    CHECK(strchr(err, '\n') == NULL, "multi-line error");
    write_small_set(dir, 4);
    uint32_t ldims[3] = { 4, 1, 1 };
    write_idx(dir, "train-labels-idx1-ubyte.gz", 0x803, ldims, 3, pix, 4);
    rc = dataset_load_fashion_mnist(&d, dir, true, 0, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "train-labels-idx1-ubyte.gz") && strstr(err, "magic"), "labels: rc=%d err=%s", rc,
          err);
    TEST_END();

    TEST_BEGIN("idx_count_mismatch_and_bad_dims_error");
    dir = subdir("count");
    write_small_set(dir, 6);
    uint32_t l5[1] = { 5 };
    write_idx(dir, "train-labels-idx1-ubyte.gz", 0x801, l5, 1, pix, 5);
    rc = dataset_load_fashion_mnist(&d, dir, true, 0, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "labels"), "count mismatch: rc=%d err=%s", rc, err);
    uint32_t huge[3] = { 0xffffffffu, 28, 28 };
    write_idx(dir, "train-images-idx3-ubyte.gz", 0x803, huge, 3, pix, 24);
    rc = dataset_load_fashion_mnist(&d, dir, true, 0, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "count"), "huge count: rc=%d err=%s", rc, err);
    uint32_t wide[3] = { 5, 100000, 100000 };
    write_idx(dir, "train-images-idx3-ubyte.gz", 0x803, wide, 3, pix, 24);
    rc = dataset_load_fashion_mnist(&d, dir, true, 0, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "size"), "huge image: rc=%d err=%s", rc, err);
    /* a label of 10 is outside Fashion-MNIST's classes */
    write_small_set(dir, 5);
    unsigned char badlab[5] = { 1, 2, 10, 3, 4 };
    write_idx(dir, "train-labels-idx1-ubyte.gz", 0x801, l5, 1, badlab, 5);
    rc = dataset_load_fashion_mnist(&d, dir, true, 0, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "label 10"), "bad label: rc=%d err=%s", rc, err);
    /* a byte more than the header announces */
    unsigned char lab6[6] = { 1, 2, 3, 4, 5, 6 };
    write_idx(dir, "train-labels-idx1-ubyte.gz", 0x801, l5, 1, lab6, 6);
    rc = dataset_load_fashion_mnist(&d, dir, true, 0, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "after the last item"), "trailing byte: rc=%d err=%s", rc, err);
    rc = dataset_load_fashion_mnist(&d, dir, true, 3, err, sizeof err);
    CHECK(rc == 0 && d.n == 3, "limit skips the tail check: rc=%d err=%s", rc, err);
    if (rc == 0) dataset_done(&d);
    TEST_END();

    TEST_BEGIN("idx_truncated_payload_errors");
    dir = subdir("short");
    write_small_set(dir, 8);
    uint32_t d8[3] = { 8, 2, 3 };
    write_idx(dir, "train-images-idx3-ubyte.gz", 0x803, d8, 3, pix, 20); /* 48 needed */
    rc = dataset_load_fashion_mnist(&d, dir, true, 0, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "truncated") && strstr(err, "train-images"), "rc=%d err=%s", rc, err);
    /* header cut short */
    write_idx(dir, "train-images-idx3-ubyte.gz", 0x803, d8, 1, NULL, 0);
    rc = dataset_load_fashion_mnist(&d, dir, true, 0, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "truncated"), "short header: rc=%d err=%s", rc, err);
    TEST_END();

    TEST_BEGIN("gz_truncated_and_corrupt_copies_error");
    /* Copies of the real training images when installed; otherwise of a
     * generated set of 3000 noisy 28x28 images (so this runs everywhere). */
    char srcdir[512];
    snprintf(srcdir, sizeof srcdir, "%s", DATASET_FMNIST_DIR);
    if (!dataset_fashion_mnist_present(srcdir)) {
        snprintf(srcdir, sizeof srcdir, "%s", subdir("gen")); /* subdir's buffer is reused */
        static unsigned char gpix[3000 * 784], glab[3000];
        uint64_t r = 1;
        for (size_t i = 0; i < sizeof gpix; i++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            gpix[i] = (unsigned char)(r >> 56);
        }
        for (int i = 0; i < 3000; i++) glab[i] = (unsigned char)(i % 10);
        uint32_t gd[3] = { 3000, 28, 28 }, gl[1] = { 3000 };
        write_idx(srcdir, "train-images-idx3-ubyte.gz", 0x803, gd, 3, gpix, sizeof gpix);
        write_idx(srcdir, "train-labels-idx1-ubyte.gz", 0x801, gl, 1, glab, sizeof glab);
        printf("  note: %s missing, corrupting a generated set instead\n", DATASET_FMNIST_DIR);
    }
    dir = subdir("cut");
    char src[600], dst[600], lsrc[600], ldst[600];
    snprintf(src, sizeof src, "%s/train-images-idx3-ubyte.gz", srcdir);
    snprintf(dst, sizeof dst, "%s/train-images-idx3-ubyte.gz", dir);
    snprintf(lsrc, sizeof lsrc, "%s/train-labels-idx1-ubyte.gz", srcdir);
    snprintf(ldst, sizeof ldst, "%s/train-labels-idx1-ubyte.gz", dir);
    CHECK(symlink(lsrc, ldst) == 0, "symlink");
    /* the intact copy loads: what follows fails because of the damage */
    Dataset okd;
    rc = dataset_load_fashion_mnist(&okd, srcdir, true, 0, err, sizeof err);
    CHECK(rc == 0, "intact source: %s", err);
    if (rc == 0) dataset_done(&okd);
    FILE *in = fopen(src, "rb");
    CHECK(in != NULL, "open %s", src);
    if (!in) {
        TEST_END();
        return;
    }
    size_t cap = 64u << 20;
    unsigned char *buf = malloc(cap);
    size_t got = fread(buf, 1, cap, in);
    fclose(in);
    CHECK(got > (1u << 20) && got < cap, "read %zu bytes", got);
    /* first quarter of the stream: truncated gzip */
    FILE *out = fopen(dst, "wb");
    fwrite(buf, 1, got / 4, out);
    fclose(out);
    err[0] = '\0';
    rc = dataset_load_fashion_mnist(&d, dir, true, 0, err, sizeof err);
    CHECK(rc == -1 && strstr(err, dst), "truncated gz: rc=%d err=%s", rc, err);
    printf("  note: truncated copy: %s\n", err);
    /* whole file minus its last byte (the gzip trailer is cut) */
    out = fopen(dst, "wb");
    fwrite(buf, 1, got - 1, out);
    fclose(out);
    err[0] = '\0';
    rc = dataset_load_fashion_mnist(&d, dir, true, 0, err, sizeof err);
    CHECK(rc == -1 && strstr(err, dst), "trailer cut: rc=%d err=%s", rc, err);
    printf("  note: trailer cut: %s\n", err);
    /* one byte flipped in the middle of the deflate stream */
    buf[got / 2] ^= 0x10;
    out = fopen(dst, "wb");
    fwrite(buf, 1, got, out);
    fclose(out);
    err[0] = '\0';
    rc = dataset_load_fashion_mnist(&d, dir, true, 0, err, sizeof err);
    CHECK(rc == -1 && strstr(err, dst), "corrupt gz: rc=%d err=%s", rc, err);
    printf("  note: corrupt copy: %s\n", err);
    free(buf);
    TEST_END();
}

static void test_synthetic(void)
{
    char err[512];
    TEST_BEGIN("synthetic_deterministic_and_shaped");
    Dataset a, b, c;
    int ra = dataset_make_synthetic(&a, 300, 20, 3, 42, err, sizeof err);
    int rb = dataset_make_synthetic(&b, 300, 20, 3, 42, err, sizeof err);
    int rc = dataset_make_synthetic(&c, 300, 20, 3, 43, err, sizeof err);
    CHECK(ra == 0 && rb == 0 && rc == 0, "%s", err);
    if (ra == 0 && rb == 0 && rc == 0) {
        CHECK(a.n == 300 && a.dim == 20 && a.classes == 3, "shape %lld %d %d", (long long)a.n, a.dim, a.classes);
        CHECK(strcmp(a.name, "synthetic") == 0, "name %s", a.name);
        CHECK(memcmp(a.x, b.x, 300 * 20 * sizeof(float)) == 0, "same seed, different x");
        CHECK(memcmp(a.y, b.y, 300 * sizeof(int32_t)) == 0, "same seed, different y");
        CHECK(memcmp(a.x, c.x, 300 * 20 * sizeof(float)) != 0, "seed ignored");
        int counts[3] = { 0 };
        for (int i = 0; i < 300; i++)
            if (a.y[i] >= 0 && a.y[i] < 3) counts[a.y[i]]++;
        CHECK(counts[0] == 100 && counts[1] == 100 && counts[2] == 100, "labels %d %d %d", counts[0], counts[1],
              counts[2]);
        int periodic = 1;
        for (int i = 0; i < 300; i++) periodic &= a.y[i] == i % 3;
        CHECK(!periodic, "labels in a fixed cycle");
        /* Learnable: nearest class mean (estimated from the data) classifies
         * far above chance. */
        double mean[3][20] = { { 0 } };
        for (int i = 0; i < 300; i++)
            for (int j = 0; j < 20; j++) mean[a.y[i]][j] += a.x[i * 20 + j] / 100.0;
        int correct = 0;
        for (int i = 0; i < 300; i++) {
            int best = 0;
            double bd = 1e300;
            for (int k = 0; k < 3; k++) {
                double dd = 0;
                for (int j = 0; j < 20; j++) dd += (a.x[i * 20 + j] - mean[k][j]) * (a.x[i * 20 + j] - mean[k][j]);
                if (dd < bd) {
                    bd = dd;
                    best = k;
                }
            }
            correct += best == a.y[i];
        }
        CHECK(correct > 250, "nearest-mean accuracy %d/300", correct);
        /* Known bytes: a fingerprint that changes if the generator does (same
         * bytes on every machine is the promise). */
        uint32_t h = 2166136261u;
        const unsigned char *p = (const unsigned char *)a.x;
        for (size_t i = 0; i < 300 * 20 * sizeof(float); i++) h = (h ^ p[i]) * 16777619u;
        CHECK(h == 0xc0231ed4u && a.y[0] == 2,
              "synthetic(300,20,3,42) changed: fingerprint %08x y[0]=%d (recorded runs and "
              "other machines expect c0231ed4, 2)",
              h, a.y[0]);
    }
    if (ra == 0) dataset_done(&a);
    if (rb == 0) dataset_done(&b);
    if (rc == 0) dataset_done(&c);
    Dataset e;
    int r = dataset_make_synthetic(&e, 50, 784, 10, 1, err, sizeof err);
    CHECK(r == 0 && e.dim == 784 && e.classes == 10, "784/10: %s", err);
    if (r == 0) dataset_done(&e);
    TEST_END();

    TEST_BEGIN("synthetic_bad_args_rejected");
    Dataset z;
    struct {
        int64_t n;
        int dim, classes;
    } bad[] = {
        { 0, 20, 3 },  { -5, 20, 3 }, { 10, 0, 3 }, { 10, 20, 1 }, { 10, -1, 3 }, { (int64_t)1 << 40, 784, 10 },
        { 10, 20, 0 },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        r = dataset_make_synthetic(&z, bad[i].n, bad[i].dim, bad[i].classes, 1, err, sizeof err);
        CHECK(r == -1 && err[0], "n=%lld dim=%d classes=%d accepted", (long long)bad[i].n, bad[i].dim, bad[i].classes);
        CHECK(z.x == NULL && z.y == NULL, "left allocations behind");
    }
    TEST_END();
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ddptop-test-dataset-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 2;
    }
    test_fashion_mnist();
    test_small_and_hostile();
    test_synthetic();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    CHECK_EXIT();
}
