/* test_record.c — the recording format: round trip, flush cadence, a file
 * cut at every byte, damaged and hostile records, wrong magic and versions,
 * a write error reported once. Files live in a temporary directory.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "wire/codec.h"
#include "wire/protocol.h"
#include "record/record.h"

static char g_dir[256];

static const char *tmp_path(const char *name)
{
    static char p[4][320];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", g_dir, name);
    return p[k];
}

static int64_t mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static off_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) ? -1 : st.st_size;
}

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n + 1);
    *len = fread(b, 1, (size_t)n, f);
    fclose(f);
    return b;
}

static void spit(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    fwrite(data, 1, len, f);
    fclose(f);
}

/* A step frame as a worker would send it. */
static void step_frame(CodecBuf *b, int rank, int64_t step, double loss)
{
    Msg m;
    char err[128];
    msg_init(&m, MSG_STEP);
    m.rank = rank;
    m.t_ns = 1700000000000000000LL + step * 1000000;
    m.u.step.step = step;
    m.u.step.loss = loss;
    m.u.step.step_ms = 10;
    codec_encode(&m, b, err, sizeof err);
}

/* The small recording every damage test cuts: 3 step frames (tel), a ctl
 * frame, an empty frame, a start, an exit and a note record. Returns the
 * number of records (the end record not counted); ends[] gets the offset
 * just past each record. */
static int make_small(const char *path, uint64_t *ends)
{
    char err[256];
    Recorder *r = recorder_open(path, 2, "test job: small", err, sizeof err);
    if (!r) {
        printf("  recorder_open: %s\n", err);
        return -1;
    }
    CodecBuf b;
    codec_buf_init(&b);
    int64_t t0 = mono_now();
    uint64_t off = (uint64_t)(REC_HEADER_FIXED + strlen("test job: small"));
    int n = 0;
    for (int i = 0; i < 3; i++) {
        step_frame(&b, i % 2, i + 1, 2.0 - i);
        recorder_write(r, REC_SRC_TEL, b.data, b.len, t0 + (int64_t)(i + 1) * 1000000000, 0, err, sizeof err);
        off += REC_HEAD_BYTES + b.len;
        ends[n++] = off;
    }
    recorder_write(r, REC_SRC_CTL, "\x80", 1, t0 + 4000000000LL, 0, err, sizeof err);
    off += REC_HEAD_BYTES + 1;
    ends[n++] = off;
    recorder_write(r, REC_SRC_TEL, "", 0, t0 + 4500000000LL, 0, err, sizeof err);
    off += REC_HEAD_BYTES;
    ends[n++] = off;
    recorder_write_start(r, 1, 4242, t0 + 5000000000LL, 0, err, sizeof err);
    off += REC_HEAD_BYTES + 12;
    ends[n++] = off;
    recorder_write_exit(r, 1, 4242, 9, "SIGKILL by ddptop", t0 + 6000000000LL, 0, err, sizeof err);
    off += REC_HEAD_BYTES + 12 + strlen("SIGKILL by ddptop");
    ends[n++] = off;
    recorder_write_note(r, -1, 1, "stop requested", t0 + 7000000000LL, 0, err, sizeof err);
    off += REC_HEAD_BYTES + 8 + strlen("stop requested");
    ends[n++] = off;
    codec_buf_done(&b);
    if (recorder_close(&r, err, sizeof err)) {
        printf("  recorder_close: %s\n", err);
        return -1;
    }
    return n;
}

/* Read a file to the end; returns the count of records and the final rc. */
static int read_all(const char *path, uint64_t *count, char *err, size_t errlen)
{
    RecReader *rd = recreader_open(path, err, errlen);
    *count = 0;
    if (!rd) return -2;
    RecEntry e;
    int rc;
    while ((rc = recreader_next(rd, &e, err, errlen)) == 1) (*count)++;
    recreader_close(&rd);
    return rc;
}

static void test_round_trip(void)
{
    TEST_BEGIN("round_trip");
    const char *path = tmp_path("rt.rec");
    char err[256];
    int64_t before = proto_now_ns();
    Recorder *r = recorder_open(path, 4, "ddptop run -n 4 -- --steps 10 \xe2\x9c\x93", err, sizeof err);
    CHECK(r != NULL, "%s", err);
    if (!r) {
        TEST_END();
        return;
    }
    /* Frames of many sizes, one bigger than the write buffer. */
    size_t sizes[] = { 0, 1, 188, 4096, REC_BUF_BYTES + 17, 3 };
    size_t ns = sizeof sizes / sizeof sizes[0];
    uint8_t *big = malloc(REC_BUF_BYTES + 64);
    for (size_t i = 0; i < REC_BUF_BYTES + 64; i++) big[i] = (uint8_t)(i * 7 + 3);
    int64_t t0 = mono_now();
    for (size_t i = 0; i < ns; i++)
        CHECK(recorder_write(r, i % 2 ? REC_SRC_CTL : REC_SRC_TEL, big + i, sizes[i], t0 + (int64_t)i * 1000,
                             1700000000000000000LL + (int64_t)i, err, sizeof err) == 0,
              "write %zu: %s", i, err);
    /* Over the frame limit: skipped, not recorded. */
    CHECK(recorder_write(r, REC_SRC_TEL, big, (size_t)PROTO_MAX_FRAME_BYTES + 1, t0, 0, err, sizeof err) == 0,
          "oversized write");
    CHECK(recorder_records(r) == ns, "records %" PRIu64, recorder_records(r));
    CHECK(recorder_close(&r, err, sizeof err) == 0 && r == NULL, "close: %s", err);

    RecReader *rd = recreader_open(path, err, sizeof err);
    CHECK(rd != NULL, "%s", err);
    if (rd) {
        const RecHeader *h = recreader_header(rd);
        CHECK(h->format_version == REC_FORMAT_VERSION && h->proto_version == PROTO_VERSION, "versions %u %u",
              h->format_version, h->proto_version);
        CHECK(h->world == 4, "world %d", (int)h->world);
        CHECK(!strcmp(h->desc, "ddptop run -n 4 -- --steps 10 \xe2\x9c\x93"), "desc \"%s\"", h->desc);
        CHECK(h->created_wall_ns >= before && h->created_wall_ns <= proto_now_ns(), "created %" PRId64,
              h->created_wall_ns);
        RecEntry e;
        size_t i = 0;
        int rc;
        while ((rc = recreader_next(rd, &e, err, sizeof err)) == 1) {
            if (i < ns) {
                CHECK(e.len == sizes[i] && (e.len == 0 || !memcmp(e.data, big + i, e.len)), "record %zu bytes", i);
                CHECK(e.src == (i % 2 ? REC_SRC_CTL : REC_SRC_TEL), "record %zu src %d", i, e.src);
                CHECK(e.t_ns >= (int64_t)i * 1000 && e.t_ns < (int64_t)i * 1000 + 1000000000, "record %zu t %" PRId64,
                      i, e.t_ns);
                CHECK(e.wall_ns == 1700000000000000000LL + (int64_t)i, "record %zu wall", i);
                CHECK(e.index == i, "index %" PRIu64, e.index);
            }
            i++;
        }
        CHECK(rc == 0, "end: rc %d %s", rc, err);
        CHECK(i == ns, "%zu records read", i);
        CHECK(recreader_next(rd, &e, err, sizeof err) == 0, "after the end: still 0");
        recreader_close(&rd);
    }

    /* In memory: the same records, and seeking by time. */
    Recording *rec = NULL;
    CHECK(recording_load(path, &rec, err, sizeof err) == 0, "load: %s", err);
    if (rec) {
        CHECK(rec->n == ns && rec->complete && !rec->tail[0], "n %zu complete %d", rec->n, rec->complete);
        for (size_t i = 0; i < rec->n && i < ns; i++)
            CHECK(rec->recs[i].len == sizes[i] && (!sizes[i] || !memcmp(rec->recs[i].data, big + i, sizes[i])),
                  "loaded record %zu", i);
        CHECK(rec->hdr.world == 4 && rec->hdr.desc && rec->hdr.desc[0] == 'd', "loaded header");
        size_t k = recording_seek_time(rec, rec->recs[3].t_ns);
        CHECK(k <= 3 && rec->recs[k].t_ns == rec->recs[3].t_ns, "seek to record 3 gave %zu", k);
        CHECK(recording_seek_time(rec, INT64_MAX) == rec->n, "seek past the end");
        CHECK(recording_seek_time(rec, -1) == 0, "seek before the start");
        recording_free(&rec);
        CHECK(rec == NULL, "free sets NULL");
    }
    free(big);
    TEST_END();
}

static void test_special_records(void)
{
    TEST_BEGIN("start_exit_note_records");
    uint64_t ends[16];
    const char *path = tmp_path("small.rec");
    int n = make_small(path, ends);
    CHECK(n == 8, "make_small %d", n);
    Recording *rec = NULL;
    char err[256];
    CHECK(recording_load(path, &rec, err, sizeof err) == 0, "%s", err);
    if (rec && rec->n == 8) {
        RecProc p;
        RecNote nt;
        CHECK(rec_proc_decode(&rec->recs[5], &p) == 0 && rec->recs[5].src == REC_SRC_START && p.rank == 1 &&
                  p.pid == 4242,
              "start record");
        CHECK(rec_proc_decode(&rec->recs[6], &p) == 0 && p.wait_status == 9 && !strcmp(p.how, "SIGKILL by ddptop"),
              "exit record: %d \"%s\"", p.wait_status, p.how);
        CHECK(rec_note_decode(&rec->recs[7], &nt) == 0 && nt.rank == -1 && nt.level == 1 &&
                  !strcmp(nt.text, "stop requested"),
              "note record");
        CHECK(rec_proc_decode(&rec->recs[7], &p) < 0 && rec_note_decode(&rec->recs[0], &nt) < 0,
              "decoders refuse other sources");
        Msg m;
        CHECK(codec_decode(rec->recs[2].data, rec->recs[2].len, &m, err, sizeof err) == 0 && m.kind == MSG_STEP &&
                  m.u.step.step == 3 && m.u.step.loss == 0.0,
              "frame decodes: %s", err);
        CHECK(rec->recs[3].t_ns > rec->recs[2].t_ns, "arrival times in order");
    }
    recording_free(&rec);
    TEST_END();
}

/* Cut the small recording at every byte: the reader stops cleanly with the
 * records that fit and says where. */
static void test_truncate_every_byte(void)
{
    TEST_BEGIN("truncated_at_every_byte");
    uint64_t ends[16];
    const char *path = tmp_path("cut-src.rec");
    int n = make_small(path, ends);
    size_t len = 0;
    uint8_t *whole = slurp(path, &len);
    const char *cut = tmp_path("cut.rec");
    size_t hdr = REC_HEADER_FIXED + strlen("test job: small");
    int bad = 0;
    for (size_t L = 0; L < len && bad < 5; L++) {
        spit(cut, whole, L);
        char err[400] = "";
        uint64_t count = 0;
        int rc = read_all(cut, &count, err, sizeof err);
        if (L < hdr) {
            /* Inside the header: no reader at all, one line naming the file. */
            if (rc != -2 || !strstr(err, cut) || strchr(err, '\n')) {
                printf("  cut at %zu: rc %d err \"%s\"\n", L, rc, err);
                bad++;
            }
            continue;
        }
        uint64_t want = 0;
        while ((int)want < n && ends[want] <= L) want++;
        uint64_t good_end = want ? ends[want - 1] : hdr;
        char where[64];
        snprintf(where, sizeof where, "at byte %" PRIu64 " (record %" PRIu64 ",", good_end, want + 1);
        if (rc != -1 || count != want || !strstr(err, "recording ends early") || !strstr(err, where) ||
            !strstr(err, "truncated")) {
            printf("  cut at %zu: rc %d, %" PRIu64 " records (want %" PRIu64 "), err \"%s\"\n", L, rc, count, want,
                   err);
            bad++;
        }
        /* recording_load keeps the good records and the same message. */
        Recording *rec = NULL;
        char lerr[256];
        if (recording_load(cut, &rec, lerr, sizeof lerr) || rec->n != want || rec->complete || strcmp(rec->tail, err)) {
            printf("  load cut at %zu: n %zu tail \"%s\"\n", L, rec ? rec->n : 0, rec ? rec->tail : lerr);
            bad++;
        }
        recording_free(&rec);
    }
    CHECK(bad == 0, "%d cuts misread", bad);
    /* The whole file reads clean. */
    char err[256];
    uint64_t count;
    CHECK(read_all(path, &count, err, sizeof err) == 0 && count == (uint64_t)n, "whole file: %" PRIu64, count);
    /* A time in the message: the last good record's arrival (t=5.0 s after
     * the start record at +5 s), cut in the exit record. */
    spit(cut, whole, ends[5] + 3);
    read_all(cut, &count, err, sizeof err);
    CHECK(strstr(err, "(record 7, t=5.0 s): truncated record head (3 of 28 bytes)") != NULL, "message: %s", err);
    free(whole);
    TEST_END();
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void test_damage_and_hostile(void)
{
    TEST_BEGIN("damaged_and_hostile_records");
    uint64_t ends[16];
    const char *path = tmp_path("dmg-src.rec");
    make_small(path, ends);
    size_t len = 0;
    uint8_t *whole = slurp(path, &len);
    uint8_t *c = malloc(len + 64);
    const char *p = tmp_path("dmg.rec");
    char err[400];
    uint64_t count;

    /* A flipped payload byte in record 2: checksum. */
    memcpy(c, whole, len);
    c[ends[1] + REC_HEAD_BYTES + 5] ^= 0x40;
    spit(p, c, len);
    int rc = read_all(p, &count, err, sizeof err);
    CHECK(rc == -1 && count == 2 && strstr(err, "(record 3,") && strstr(err, "checksum"), "flip: %d %" PRIu64 " %s", rc,
          count, err);

    /* Hostile lengths: 4 GiB and just over the frame limit stop at once,
     * with no allocation and no read past the end. */
    uint32_t hostile[] = { 0xffffffffu, PROTO_MAX_FRAME_BYTES + 1 };
    for (int i = 0; i < 2; i++) {
        memcpy(c, whole, len);
        put32(c + ends[0], hostile[i]);
        spit(p, c, len);
        rc = read_all(p, &count, err, sizeof err);
        CHECK(rc == -1 && count == 1 && strstr(err, "over the") && strstr(err, "(record 2,"),
              "length %" PRIu32 ": %d %s", hostile[i], rc, err);
    }
    /* A length inside the limit but past the end of the file: truncated. */
    memcpy(c, whole, len);
    put32(c + ends[0], PROTO_MAX_FRAME_BYTES);
    spit(p, c, len);
    rc = read_all(p, &count, err, sizeof err);
    CHECK(rc == -1 && count == 1 && strstr(err, "truncated record"), "long length: %s", err);
    /* Reserved bytes set: damaged head. */
    memcpy(c, whole, len);
    c[ends[2] + 6] = 1;
    spit(p, c, len);
    rc = read_all(p, &count, err, sizeof err);
    CHECK(rc == -1 && count == 3 && strstr(err, "damaged record head"), "reserved: %s", err);
    /* Garbage after the end record. */
    memcpy(c, whole, len);
    memcpy(c + len, "junk", 4);
    spit(p, c, len + 4);
    rc = read_all(p, &count, err, sizeof err);
    CHECK(rc == -1 && count == 8 && strstr(err, "4 bytes after the end record"), "trailing: %s", err);

    /* Header: wrong magic, newer format, other protocol, hostile lengths. */
    memcpy(c, whole, len);
    c[1] = 'X';
    spit(p, c, len);
    CHECK(read_all(p, &count, err, sizeof err) == -2 && strstr(err, "not a ddptop recording (bad magic)") &&
              strstr(err, p),
          "magic: %s", err);
    memcpy(c, whole, len);
    c[8] = 2;
    spit(p, c, len);
    CHECK(read_all(p, &count, err, sizeof err) == -2 && strstr(err, "format version 2 is newer"), "format: %s", err);
    memcpy(c, whole, len);
    c[10] = 7;
    spit(p, c, len);
    CHECK(read_all(p, &count, err, sizeof err) == -2 && strstr(err, "protocol version 7"), "proto: %s", err);
    memcpy(c, whole, len);
    put32(c + 12, 0xfffffff0u);
    spit(p, c, len);
    CHECK(read_all(p, &count, err, sizeof err) == -2 && strstr(err, "damaged header"), "header length: %s", err);
    memcpy(c, whole, len);
    put32(c + 28, 0xfffffff0u);
    spit(p, c, len);
    CHECK(read_all(p, &count, err, sizeof err) == -2 && strstr(err, "damaged header"), "desc length: %s", err);
    spit(p, "", 0);
    CHECK(read_all(p, &count, err, sizeof err) == -2 && strstr(err, "empty file"), "empty: %s", err);
    CHECK(read_all(tmp_path("missing.rec"), &count, err, sizeof err) == -2 && strstr(err, "No such file"),
          "missing: %s", err);
    CHECK(read_all(g_dir, &count, err, sizeof err) == -2 && strstr(err, "directory"), "dir: %s", err);
    Recording *rec = (Recording *)1;
    CHECK(recording_load(p, &rec, err, sizeof err) == -1 && rec == NULL, "load of a bad header");
    free(c);
    free(whole);
    TEST_END();
}

/* Buffered, but nothing waits in memory longer than REC_FLUSH_NS once the
 * loop ticks: a crash loses under a second. */
static void test_flush_cadence(void)
{
    TEST_BEGIN("flush_within_a_second");
    const char *path = tmp_path("flush.rec");
    char err[256];
    Recorder *r = recorder_open(path, 1, "", err, sizeof err);
    CHECK(r != NULL, "%s", err);
    if (!r) {
        TEST_END();
        return;
    }
    off_t hdr = file_size(path);
    CHECK(hdr == REC_HEADER_FIXED, "header on disk at once: %lld", (long long)hdr);
    int64_t t = mono_now();
    recorder_write(r, REC_SRC_TEL, "\x81\xa1v\x01", 4, t, 0, err, sizeof err);
    recorder_tick(r, t + REC_FLUSH_NS / 2, err, sizeof err);
    CHECK(file_size(path) == hdr, "buffered for now");
    recorder_tick(r, t + REC_FLUSH_NS, err, sizeof err);
    CHECK(file_size(path) == hdr + REC_HEAD_BYTES + 4, "flushed by the tick: %lld", (long long)file_size(path));
    CHECK(REC_FLUSH_NS < 1000000000LL, "flush period under a second");
    /* A write long after the last flush flushes by itself. */
    recorder_write(r, REC_SRC_TEL, "\x81\xa1v\x01", 4, t + 2 * REC_FLUSH_NS, 0, err, sizeof err);
    recorder_write(r, REC_SRC_TEL, "\x81\xa1v\x01", 4, t + 4 * REC_FLUSH_NS, 0, err, sizeof err);
    CHECK(file_size(path) == hdr + 3 * (REC_HEAD_BYTES + 4), "flushed by a later write");
    /* What a crash leaves: readable, and the reader says it was cut. */
    uint64_t count;
    int rc = read_all(path, &count, err, sizeof err);
    CHECK(rc == -1 && count == 3 && strstr(err, "no end record"), "crash copy: %d %" PRIu64 " %s", rc, count, err);
    recorder_close(&r, err, sizeof err);
    rc = read_all(path, &count, err, sizeof err);
    CHECK(rc == 0 && count == 3, "closed: %d %s", rc, err);
    TEST_END();
}

/* A full disk: the first failure is reported, later calls are quiet. */
static void test_write_error_once(void)
{
    TEST_BEGIN("write_error_reported_once");
    char err[256] = "";
    /* /dev/full refuses the header: open fails with the reason. */
    Recorder *r = recorder_open("/dev/full", 1, "x", err, sizeof err);
    CHECK(r == NULL && strstr(err, "/dev/full") && strstr(err, "No space"), "open /dev/full: %s", err);
    CHECK(recorder_open(tmp_path("no/such/dir.rec"), 1, "x", err, sizeof err) == NULL && strstr(err, "No such"),
          "bad dir: %s", err);

    /* A file size limit (in a child: it changes the process) makes writes
     * fail mid-job with EFBIG. */
    int fds[2];
    CHECK(pipe(fds) == 0, "pipe");
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        signal(SIGXFSZ, SIG_IGN);
        Recorder *w = recorder_open(tmp_path("efbig.rec"), 1, "x", err, sizeof err);
        if (!w) _exit(10);
        struct rlimit rl = { 8192, 8192 };
        if (setrlimit(RLIMIT_FSIZE, &rl)) _exit(11);
        static uint8_t frame[1000];
        int fails = 0, calls = 0;
        int64_t t = mono_now();
        for (int i = 0; i < 400; i++) {
            calls++;
            if (recorder_write(w, REC_SRC_TEL, frame, sizeof frame, t + (int64_t)i * REC_FLUSH_NS, 0, err,
                               sizeof err)) {
                fails++;
                if (!strstr(err, "recording to") || !strstr(err, "File too large")) _exit(12);
            }
            if (recorder_tick(w, t + (int64_t)i * REC_FLUSH_NS + 1, err, sizeof err)) fails++;
        }
        if (fails != 1 || !recorder_failed(w)) _exit(13);
        uint64_t said = recorder_records(w); /* what ddptop tells the user it recorded */
        if (write(fds[1], &said, sizeof said) != (ssize_t)sizeof said) _exit(16);
        if (recorder_close(&w, err, sizeof err) != 0) _exit(14); /* already reported */
        _exit(calls == 400 ? 0 : 15);
    }
    close(fds[1]);
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    uint64_t said = 0;
    CHECK(read(fds[0], &said, sizeof said) == (ssize_t)sizeof said, "no count from the child");
    close(fds[0]);
    /* What was written before the failure still reads, and says it ends early;
     * the count the recorder gives is exactly what reads (a torn last record
     * is cut off, not counted). */
    uint64_t count;
    int rc = read_all(tmp_path("efbig.rec"), &count, err, sizeof err);
    CHECK(rc == -1 && count >= 1 && count <= 8, "after EFBIG: %d %" PRIu64 " %s", rc, count, err);
    CHECK(said == count, "the recorder says %" PRIu64 " records, %" PRIu64 " read back", said, count);
    CHECK(strstr(err, "truncated record") == NULL, "a torn record is left in the file: %s", err);
    TEST_END();
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/test_record.XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_round_trip();
    test_special_records();
    test_truncate_every_byte();
    test_damage_and_hostile();
    test_flush_cadence();
    test_write_error_once();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd)) {}
    CHECK_EXIT();
}
