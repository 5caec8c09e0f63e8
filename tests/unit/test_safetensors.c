/* test_safetensors.c — round trip, and hostile files that must be refused
 * with a one-line reason and no crash (run under ASan to mean it). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "ckpt/safetensors.h"

static char dir[256];
static char path[512];

static unsigned char *slurp(const char *p, size_t *len)
{
    FILE *f = fopen(p, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    *len = fread(b, 1, (size_t)n, f);
    fclose(f);
    return b;
}

static void spit(const char *p, const void *b, size_t len)
{
    FILE *f = fopen(p, "wb");
    if (!f || fwrite(b, 1, len, f) != len) {
        perror(p);
        exit(2);
    }
    fclose(f);
}

/* A file with this header text (declared length = its length, or hlen when
 * hlen != UINT64_MAX) followed by datalen bytes. */
static void write_raw(const char *hdr, uint64_t hlen, size_t datalen)
{
    size_t n = strlen(hdr);
    if (hlen == UINT64_MAX) hlen = n;
    unsigned char *b = calloc(1, 8 + n + datalen + 1);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(hlen >> (8 * i));
    memcpy(b + 8, hdr, n);
    for (size_t i = 0; i < datalen; i++) b[8 + n + i] = (unsigned char)i;
    spit(path, b, 8 + n + datalen);
    free(b);
}

/* st_open must refuse the file with a one-line message containing `want`. */
static void expect_bad(const char *what, const char *want)
{
    char err[512] = "";
    StFile *f = (StFile *)(uintptr_t)1;
    int rc = st_open(path, &f, err, sizeof err);
    CHECK(rc == -1, "%s: accepted", what);
    CHECK(f == NULL, "%s: *out not NULL", what);
    CHECK(err[0] != '\0' && strchr(err, '\n') == NULL, "%s: message '%s'", what, err);
    CHECK(strstr(err, path) != NULL, "%s: message does not name the file: %s", what, err);
    if (want) CHECK(strstr(err, want) != NULL, "%s: message '%s' lacks '%s'", what, err, want);
    if (getenv("ST_VERBOSE")) /* to read every refusal: ST_VERBOSE=1 */
        printf("  refused: %s\n", err);
    if (rc == 0) st_close(&f);
}

static void expect_bad_hdr(const char *hdr, size_t datalen, const char *want)
{
    write_raw(hdr, UINT64_MAX, datalen);
    expect_bad(hdr, want);
}

static const char *good_hdr(void)
{
    return "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
           "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[8,12]}}";
}

static void test_round_trip(void)
{
    TEST_BEGIN("round_trip_with_metadata");
    float w[6] = { 1, -2, 3.5f, 4, 5, -6.25f };
    int64_t ids[4] = { 1, -1, INT64_MAX, 0 };
    double sc = 3.14159;
    // clang-format off
    StTensor t[4] = {
        { .name = "0.weight", .dtype = "F32", .ndim = 2, .shape = { 2, 3 }, .data = w,
          .nbytes = sizeof w },
        { .name = "ids", .dtype = "I64", .ndim = 1, .shape = { 4 }, .data = ids,
          .nbytes = sizeof ids },
        { .name = "empty", .dtype = "U8", .ndim = 1, .shape = { 0 }, .data = NULL, .nbytes = 0 },
        { .name = "scal\"ar\\", .dtype = "F64", .ndim = 0, .data = &sc, .nbytes = 8 },
    };
    // clang-format on
    const char *meta[] = { "format", "pt", "note", "line1\nline2 \"q\" \\ \x01 caf\xc3\xa9", NULL };
    snprintf(path, sizeof path, "%s/rt.safetensors", dir);
    char err[512] = "";
    CHECK(st_write(path, t, 4, meta, err, sizeof err) == 0, "%s", err);
    size_t len;
    unsigned char *raw = slurp(path, &len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | raw[i];
    CHECK(hlen % 8 == 0, "header length %llu not a multiple of 8", (unsigned long long)hlen);
    CHECK(8 + hlen + sizeof w + sizeof ids + 8 == len, "file size %zu", len);
    CHECK(raw[8] == '{', "header starts with %c", raw[8]);
    size_t close = 8 + hlen - 1;
    while (close > 8 && raw[close] == ' ') close--;
    CHECK(raw[close] == '}' && hlen - (close - 7) < 8, "padding is not spaces to a multiple of 8");
    const char *lead = "{\"__metadata__\":{\"format\":\"pt\"";
    CHECK(memcmp(raw + 8, lead, strlen(lead)) == 0, "metadata not first / not as expected: %.80s", raw + 8);
    free(raw);

    StFile *f = NULL;
    int rc = st_open(path, &f, err, sizeof err);
    CHECK(rc == 0, "%s", err);
    if (rc == 0) {
        CHECK(st_count(f) == 4, "count %d", st_count(f));
        for (int i = 0; i < 4 && i < st_count(f); i++) {
            const StTensor *r = st_tensor(f, i);
            CHECK(strcmp(r->name, t[i].name) == 0, "tensor %d is '%s', order not kept", i, r->name);
            CHECK(strcmp(r->dtype, t[i].dtype) == 0, "%s dtype %s", r->name, r->dtype);
            CHECK(r->ndim == t[i].ndim, "%s ndim %d", r->name, r->ndim);
            for (int d = 0; d < r->ndim; d++) CHECK(r->shape[d] == t[i].shape[d], "%s shape[%d]", r->name, d);
            CHECK(r->nbytes == t[i].nbytes, "%s nbytes %zu", r->name, r->nbytes);
            CHECK(r->nbytes == 0 || memcmp(r->data, t[i].data, r->nbytes) == 0, "%s data", r->name);
            CHECK(((uintptr_t)r->data & 3) == 0, "%s data not 4-byte aligned", r->name);
        }
        CHECK(st_find(f, "ids") == st_tensor(f, 1), "st_find");
        CHECK(st_find(f, "scal\"ar\\") == st_tensor(f, 3), "st_find escaped name");
        CHECK(st_find(f, "nope") == NULL, "st_find absent");
        CHECK(st_tensor(f, 4) == NULL && st_tensor(f, -1) == NULL, "st_tensor out of range");
        const char *v = st_meta(f, "format");
        CHECK(v && strcmp(v, "pt") == 0, "format = %s", v ? v : "(null)");
        v = st_meta(f, "note");
        CHECK(v && strcmp(v, meta[3]) == 0, "escaped metadata came back as '%s'", v ? v : "(null)");
        CHECK(st_meta(f, "missing") == NULL, "st_meta absent");
        st_close(&f);
        CHECK(f == NULL, "st_close sets NULL");
        st_close(&f);
    }

    /* no metadata at all */
    CHECK(st_write(path, t, 2, NULL, err, sizeof err) == 0, "%s", err);
    raw = slurp(path, &len);
    CHECK(memmem(raw, len, "__metadata__", 12) == NULL, "metadata written without any");
    free(raw);
    rc = st_open(path, &f, err, sizeof err);
    CHECK(rc == 0 && st_count(f) == 2 && st_meta(f, "format") == NULL, "rc=%d %s", rc, err);
    if (rc == 0) st_close(&f);
    /* no tensors */
    CHECK(st_write(path, NULL, 0, meta, err, sizeof err) == 0, "%s", err);
    rc = st_open(path, &f, err, sizeof err);
    CHECK(rc == 0 && st_count(f) == 0 && st_meta(f, "format"), "empty: rc=%d %s", rc, err);
    if (rc == 0) st_close(&f);
    TEST_END();

    TEST_BEGIN("writer_refuses_bad_input");
    struct {
        StTensor t;
        const char *why;
    } bad[] = {
        { { .name = "x", .dtype = "F32", .ndim = 1, .shape = { 3 }, .data = w, .nbytes = 8 }, "nbytes mismatch" },
        { { .name = "x", .dtype = "F33", .ndim = 1, .shape = { 2 }, .data = w, .nbytes = 8 }, "unknown dtype" },
        { { .name = "", .dtype = "F32", .ndim = 1, .shape = { 2 }, .data = w, .nbytes = 8 }, "empty name" },
        { { .name = "__metadata__", .dtype = "F32", .ndim = 1, .shape = { 2 }, .data = w, .nbytes = 8 },
          "reserved name" },
        { { .name = "x", .dtype = "F32", .ndim = 9, .shape = { 2 }, .data = w, .nbytes = 8 }, "9 dims" },
        { { .name = "x", .dtype = "F32", .ndim = 1, .shape = { -2 }, .data = w, .nbytes = 8 }, "negative dim" },
        { { .name = "x", .dtype = "F32", .ndim = 1, .shape = { 2 }, .data = NULL, .nbytes = 8 }, "NULL data" },
        { { .name = "bad\xff", .dtype = "F32", .ndim = 1, .shape = { 2 }, .data = w, .nbytes = 8 }, "non-UTF-8 name" },
    };
    snprintf(path, sizeof path, "%s/refused.safetensors", dir);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        CHECK(st_write(path, &bad[i].t, 1, NULL, err, sizeof err) == -1 && err[0], "%s accepted", bad[i].why);
        CHECK(access(path, F_OK) != 0, "%s: left a file behind", bad[i].why);
    }
    StTensor dup[2] = { t[0], t[0] };
    CHECK(st_write(path, dup, 2, NULL, err, sizeof err) == -1, "duplicate names accepted");
    const char *odd[] = { "format", NULL };
    CHECK(st_write(path, t, 1, odd, err, sizeof err) == -1, "key without value accepted");
    CHECK(st_write("/nonexistent-dir/x.safetensors", t, 1, NULL, err, sizeof err) == -1 &&
              strstr(err, "/nonexistent-dir/x.safetensors"),
          "unwritable path: %s", err);
    TEST_END();
}

static void test_hostile(void)
{
    char err[512];
    snprintf(path, sizeof path, "%s/bad.safetensors", dir);

    TEST_BEGIN("good_raw_header_accepted");
    write_raw(good_hdr(), UINT64_MAX, 12);
    StFile *f = NULL;
    int rc = st_open(path, &f, err, sizeof err);
    CHECK(rc == 0 && st_count(f) == 2, "rc=%d %s", rc, err);
    if (rc == 0) st_close(&f);
    /* unknown keys inside a tensor entry are skipped, whatever JSON they hold */
    write_raw("{\"a\":{\"x\":{\"y\":[1,-2.5e-3,true,false,null,\"s\\u00e9\",{}]},\"dtype\":\"F32\","
              "\"shape\":[1],\"data_offsets\":[0,4]}}  \n",
              UINT64_MAX, 4);
    rc = st_open(path, &f, err, sizeof err);
    CHECK(rc == 0 && st_count(f) == 1, "unknown keys: rc=%d %s", rc, err);
    if (rc == 0) st_close(&f);
    TEST_END();

    TEST_BEGIN("truncated_at_every_length");
    snprintf(path, sizeof path, "%s/full.safetensors", dir);
    float w[6] = { 1, 2, 3, 4, 5, 6 };
    StTensor t[2] = {
        { .name = "w", .dtype = "F32", .ndim = 2, .shape = { 2, 2 }, .data = w, .nbytes = 16 },
        { .name = "b", .dtype = "F32", .ndim = 1, .shape = { 2 }, .data = w + 4, .nbytes = 8 },
    };
    const char *meta[] = { "format", "pt", NULL };
    CHECK(st_write(path, t, 2, meta, err, sizeof err) == 0, "%s", err);
    size_t len;
    unsigned char *raw = slurp(path, &len);
    snprintf(path, sizeof path, "%s/cut.safetensors", dir);
    int accepted = 0;
    for (size_t cut = 0; cut < len; cut++) {
        spit(path, raw, cut);
        err[0] = '\0';
        f = NULL;
        if (st_open(path, &f, err, sizeof err) == 0) {
            accepted++;
            st_close(&f);
        } else if (!err[0] || strchr(err, '\n')) {
            CHECK(0, "cut at %zu: bad message '%s'", cut, err);
        }
    }
    CHECK(accepted == 0, "%d truncated files accepted", accepted);
    /* a file longer than the header says is refused too (bytes no tensor uses) */
    unsigned char *longer = malloc(len + 4);
    memcpy(longer, raw, len);
    memset(longer + len, 0, 4);
    spit(path, longer, len + 4);
    expect_bad("4 extra bytes", "data section");
    free(longer);
    TEST_END();

    TEST_BEGIN("header_length_impossible");
    write_raw(good_hdr(), (uint64_t)1 << 62, 12);
    expect_bad("2^62", "header length");
    write_raw(good_hdr(), UINT64_MAX - 1, 12);
    expect_bad("2^64-2", "header length");
    write_raw(good_hdr(), (100u << 20) + 1, 12);
    expect_bad("100 MB + 1", "header length");
    write_raw(good_hdr(), strlen(good_hdr()) + 13, 12);
    expect_bad("past end of file", "header length");
    write_raw(good_hdr(), strlen(good_hdr()) - 1, 12);
    expect_bad("one byte short", NULL);
    write_raw("", 0, 0);
    expect_bad("zero header", "bad header");
    spit(path, "\x08\x00\x00", 3);
    expect_bad("3-byte file", "too short");
    TEST_END();

    TEST_BEGIN("bad_json_refused");
    // clang-format off
    static const char *const bad_json[] = {
        "{", "}", "[]", "\"x\"", "null", "{\"a\"}", "{\"a\":}", "{,}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],}}",
        "{'a':{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,],\"data_offsets\":[0,4]}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[01],\"data_offsets\":[0,4]}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1e0],\"data_offsets\":[0,4]}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,99999999999999999999]}}",
        "{\"a\":{\"dtype\":F32,\"shape\":[1],\"data_offsets\":[0,4]}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}} x",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}{}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
        "{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
        "{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}",
        "{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}",
        "{\"a\":[1,2]}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}",
        "{\"a\\x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
        "{\"a\\u12\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
        "{\"a\\ud800\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
        "{\"a\\udc00\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
        "{\"a\\u0000b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
        "{\"a\tb\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
        "{\"\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
        "{\"a\xff\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
        "{\"a\xc0\xaf\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"__metadata__\":{\"k\":1}}",
        "{\"__metadata__\":{\"k\":\"v\"},\"__metadata__\":{},\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
        "{\"__metadata__\":{\"k\":\"v\",\"k\":\"w\"},\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
        "{\"__metadata__\":[],\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":tru}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":-}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1.}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":\"unterminated}}",
    };
    // clang-format on
    for (size_t i = 0; i < sizeof bad_json / sizeof bad_json[0]; i++) expect_bad_hdr(bad_json[i], 4, NULL);
    /* a name longer than StTensor.name holds */
    char longname[400];
    memset(longname, 'n', 200);
    snprintf(longname + 200, sizeof longname - 200, "\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}");
    char hdr[512] = "{\"";
    strcat(hdr, longname);
    expect_bad_hdr(hdr, 4, "longer");
    /* nesting bomb inside an ignored key */
    char *bomb = malloc(30000);
    strcpy(bomb, "{\"a\":{\"x\":");
    for (int i = 0; i < 10000; i++) strcat(bomb + 10 + i, "[");
    strcat(bomb, "]}}");
    expect_bad_hdr(bomb, 4, "deep");
    free(bomb);
    TEST_END();

    TEST_BEGIN("bad_offsets_sizes_dtypes_refused");
    expect_bad_hdr("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                   "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                   12, "overlap");
    expect_bad_hdr("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                   "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
                   8, "overlap");
    expect_bad_hdr("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                   "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]}}",
                   20, "unused");
    expect_bad_hdr("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "unused");
    expect_bad_hdr("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 24, "data section");
    expect_bad_hdr("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, "outside");
    expect_bad_hdr("{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}}", 8, "outside");
    expect_bad_hdr("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, "need 12");
    expect_bad_hdr("{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "need 16");
    expect_bad_hdr("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],"
                   "\"data_offsets\":[0,8]}}",
                   8, "overflow");
    expect_bad_hdr("{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],"
                   "\"data_offsets\":[0,8]}}",
                   8, "overflow");
    expect_bad_hdr("{\"a\":{\"dtype\":\"F31\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "dtype");
    expect_bad_hdr("{\"a\":{\"dtype\":\"float32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "dtype");
    expect_bad_hdr("{\"a\":{\"dtype\":\"f32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "dtype");
    expect_bad_hdr("{\"a\":{\"dtype\":\"F32\\n\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "dtype");
    expect_bad_hdr("{\"a\":{\"dtype\":7,\"shape\":[2],\"data_offsets\":[0,8]}}", 8, NULL);
    expect_bad_hdr("{}", 4, "data section");
    TEST_END();

    TEST_BEGIN("random_corruption_never_crashes");
    /* Flip bytes of a valid file (header and length prefix) many times: each
     * result is either a clean refusal or a file that still validates. */
    uint64_t s = 88172645463325252ull;
    int refused = 0, ok = 0, badmsg = 0;
    unsigned char *mut = malloc(len);
    for (int iter = 0; iter < 3000; iter++) {
        memcpy(mut, raw, len);
        int flips = 1 + (int)(iter % 4);
        for (int k = 0; k < flips; k++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            size_t at = (size_t)(s % (len < 200 ? len : 200));
            mut[at] = (unsigned char)(s >> 32);
        }
        size_t mlen = iter % 7 == 0 ? (size_t)(s >> 40) % len : len;
        spit(path, mut, mlen);
        err[0] = '\0';
        f = NULL;
        if (st_open(path, &f, err, sizeof err) == 0) {
            ok++;
            /* whatever it accepted must be internally consistent */
            for (int i = 0; i < st_count(f); i++) {
                const StTensor *x = st_tensor(f, i);
                volatile unsigned char sink = 0;
                for (size_t b = 0; b < x->nbytes; b++) sink ^= ((const unsigned char *)x->data)[b];
                (void)sink;
            }
            st_close(&f);
        } else {
            refused++;
            if (!err[0] || strchr(err, '\n')) badmsg++;
        }
    }
    free(mut);
    printf("  note: 3000 mutants: %d refused, %d still valid\n", refused, ok);
    CHECK(badmsg == 0, "%d refusals without a one-line message", badmsg);
    CHECK(refused > 2000, "only %d of 3000 mutants refused", refused);
    free(raw);
    TEST_END();

    TEST_BEGIN("missing_file_and_directory");
    StFile *g = NULL;
    err[0] = '\0';
    CHECK(st_open("/nonexistent/x.safetensors", &g, err, sizeof err) == -1 && g == NULL &&
              strstr(err, "/nonexistent/x.safetensors"),
          "missing: %s", err);
    err[0] = '\0';
    CHECK(st_open(dir, &g, err, sizeof err) == -1 && strstr(err, "regular"), "directory: %s", err);
    TEST_END();
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/ddptop-test-st-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 2;
    }
    test_round_trip();
    test_hostile();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    CHECK_EXIT();
}
