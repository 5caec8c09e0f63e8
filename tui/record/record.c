/* record.c — the recording file format: writer and readers. See record.h
 * and docs/RECORDING.md.
 *
 * Owns: the byte layout, the CRC that tells a damaged record from a good
 * one, buffering and flush cadence on the write side, and the bounds that
 * keep a hostile or cut file from making a reader allocate or read more
 * than the file holds. Does not own the frames' meaning (wire/codec.h).
 * Main thread only: no locks, no globals besides a constant CRC table.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "record/record.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "wire/codec.h"
#include "wire/protocol.h"
#include "base/err.h"
#include "base/clock.h"
#include "base/file.h"

/* Times a reader accepts: readers add them to clocks and to each other,
 * so hostile values beyond these would overflow (about 36 years into a
 * recording; wall clocks up to the year 2116). */
#define REC_MAX_T_NS    (INT64_C(1) << 60)
#define REC_MAX_WALL_NS (INT64_C(1) << 62)

/* ---- small helpers ---------------------------------------------------- */

static void put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint16_t get_u16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* CRC-32 (IEEE 802.3, zlib's crc32): Python checks a record with
 * zlib.crc32(head[0:8] + head[12:28] + payload). ddptop does not link zlib. */
static uint32_t crc_table[256];

static void crc_init(void)
{
    if (crc_table[1]) return;
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
}

static uint32_t crc_update(uint32_t crc, const uint8_t *p, size_t n)
{
    crc = ~crc;
    while (n--) crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

/* The CRC of a record covers its head without the CRC field, then the payload. */
static uint32_t record_crc(const uint8_t *head, const uint8_t *payload, size_t len)
{
    crc_init();
    uint32_t c = crc_update(0, head, 8);
    c = crc_update(c, head + 12, REC_HEAD_BYTES - 12);
    return crc_update(c, payload, len);
}

static void fill_head(uint8_t *h, int src, const void *payload, uint32_t len, int64_t t_ns, int64_t wall_ns)
{
    put_u32(h, len);
    h[4] = (uint8_t)src;
    h[5] = 0;          /* flags: none yet */
    put_u16(h + 6, 0); /* reserved */
    put_u64(h + 12, (uint64_t)t_ns);
    put_u64(h + 20, (uint64_t)wall_ns);
    put_u32(h + 8, record_crc(h, payload, len));
}

const char *rec_source_name(int src)
{
    switch (src) {
    case REC_SRC_TEL: return "tel";
    case REC_SRC_CTL: return "ctl";
    case REC_SRC_SENT: return "sent";
    case REC_SRC_START: return "start";
    case REC_SRC_EXIT: return "exit";
    case REC_SRC_NOTE: return "note";
    case REC_SRC_END: return "end";
    default: return "unknown";
    }
}

/* ---- writer ----------------------------------------------------------- */

struct Recorder {
    int fd;
    char path[256];
    int64_t start_mono_ns;
    uint8_t *buf;
    size_t used;
    int64_t oldest_ns; /* monotonic arrival of the oldest buffered record */
    uint64_t records, bytes, skipped;
    uint64_t records_out; /* of records, those wholly in the file (bytes) */
    bool failed;          /* an error was reported: do nothing from now on */
};

static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n) {
        ssize_t k = write(fd, p, n);
        if (k < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* First failure: report it, stop recording. What a write tore (part of a
 * record) is cut off, so the file ends on a whole record and the count is
 * what a reader reads: the records lost with the buffer are not counted. */
static int rec_fail(Recorder *r, char *err, size_t errlen, const char *what)
{
    int e = errno;
    r->failed = true;
    r->used = 0;
    r->records = r->records_out;
    if (r->fd >= 0 && ftruncate(r->fd, (off_t)r->bytes)) {
        /* nothing more to do: the reader stops at the torn record */
    }
    return err_set(err, errlen, "recording to %s stopped: %s: %s (the job goes on unrecorded)", r->path, what,
                   strerror(e));
}

static int flush_buf(Recorder *r, char *err, size_t errlen)
{
    if (!r->used) return 0;
    if (write_all(r->fd, r->buf, r->used)) return rec_fail(r, err, errlen, "write");
    r->bytes += r->used;
    r->used = 0;
    r->records_out = r->records;
    return 0;
}

Recorder *recorder_open(const char *path, int world, const char *desc, char *err, size_t errlen)
{
    Recorder *r = calloc(1, sizeof *r);
    uint8_t *hdr = NULL;
    if (!r || !(r->buf = malloc(REC_BUF_BYTES))) {
        err_set(err, errlen, "--record %s: out of memory", path);
        goto fail;
    }
    r->fd = -1;
    snprintf(r->path, sizeof r->path, "%s", path);
    r->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (r->fd < 0) {
        err_set(err, errlen, "--record %s: %s", path, strerror(errno));
        goto fail;
    }
    size_t dlen = desc ? strlen(desc) : 0;
    if (dlen > REC_DESC_MAX) dlen = REC_DESC_MAX;
    size_t hlen = REC_HEADER_FIXED + dlen;
    hdr = calloc(1, hlen);
    if (!hdr) {
        err_set(err, errlen, "--record %s: out of memory", path);
        goto fail;
    }
    memcpy(hdr, REC_MAGIC, REC_MAGIC_LEN);
    put_u16(hdr + 8, REC_FORMAT_VERSION);
    put_u16(hdr + 10, PROTO_VERSION);
    put_u32(hdr + 12, (uint32_t)hlen);
    put_u64(hdr + 16, (uint64_t)proto_now_ns());
    put_u32(hdr + 24, (uint32_t)(world > 0 ? world : 0));
    put_u32(hdr + 28, (uint32_t)dlen);
    if (dlen) memcpy(hdr + REC_HEADER_FIXED, desc, dlen);
    r->start_mono_ns = mono_ns();
    if (write_all(r->fd, hdr, hlen)) {
        err_set(err, errlen, "--record %s: %s", path, strerror(errno));
        goto fail;
    }
    r->bytes = hlen;
    free(hdr);
    return r;
fail:
    free(hdr);
    if (r) {
        if (r->fd >= 0) close(r->fd);
        free(r->buf);
        free(r);
    }
    return NULL;
}

/* Append one record to the buffer (or straight to the file when it does not
 * fit), then flush if the oldest buffered record has waited long enough. */
static int append(Recorder *r, int src, const void *payload, size_t len, int64_t at_mono_ns, int64_t at_wall_ns,
                  char *err, size_t errlen)
{
    if (!r || r->failed) return 0;
    if (len > PROTO_MAX_FRAME_BYTES) {
        r->skipped++;
        return 0;
    }
    if (!at_mono_ns) at_mono_ns = mono_ns();
    if (!at_wall_ns) at_wall_ns = wall_ns();
    int64_t t = at_mono_ns - r->start_mono_ns;
    if (t < 0) t = 0;
    uint8_t head[REC_HEAD_BYTES];
    fill_head(head, src, payload, (uint32_t)len, t, at_wall_ns);
    size_t need = REC_HEAD_BYTES + len;
    if (r->used + need > REC_BUF_BYTES && flush_buf(r, err, errlen)) return -1;
    if (need > REC_BUF_BYTES) {
        /* A big frame (a full shard) goes out directly, after what was buffered. */
        if (write_all(r->fd, head, sizeof head) || write_all(r->fd, payload, len))
            return rec_fail(r, err, errlen, "write");
        r->bytes += need;
        r->records_out = r->records + 1;
    } else {
        if (!r->used) r->oldest_ns = at_mono_ns;
        memcpy(r->buf + r->used, head, sizeof head);
        if (len) memcpy(r->buf + r->used + sizeof head, payload, len);
        r->used += need;
    }
    r->records++;
    if (r->used && at_mono_ns - r->oldest_ns >= REC_FLUSH_NS) return flush_buf(r, err, errlen);
    return 0;
}

int recorder_write(Recorder *r, RecSource src, const void *frame, size_t len, int64_t mono_ns, int64_t wall_ns,
                   char *err, size_t errlen)
{
    return append(r, (int)src, frame, len, mono_ns, wall_ns, err, errlen);
}

static int write_proc(Recorder *r, int src, int rank, int pid, int status, const char *how, int64_t mono_ns,
                      int64_t wall_ns, char *err, size_t errlen)
{
    uint8_t p[12 + REC_HOW_MAX];
    size_t hl = how ? strnlen(how, REC_HOW_MAX - 1) : 0;
    put_u32(p, (uint32_t)rank);
    put_u32(p + 4, (uint32_t)pid);
    put_u32(p + 8, (uint32_t)status);
    if (hl) memcpy(p + 12, how, hl);
    return append(r, src, p, 12 + hl, mono_ns, wall_ns, err, errlen);
}

int recorder_write_start(Recorder *r, int rank, int pid, int64_t mono_ns, int64_t wall_ns, char *err, size_t errlen)
{
    return write_proc(r, REC_SRC_START, rank, pid, 0, NULL, mono_ns, wall_ns, err, errlen);
}

int recorder_write_exit(Recorder *r, int rank, int pid, int wait_status, const char *how, int64_t mono_ns,
                        int64_t wall_ns, char *err, size_t errlen)
{
    return write_proc(r, REC_SRC_EXIT, rank, pid, wait_status, how, mono_ns, wall_ns, err, errlen);
}

int recorder_write_note(Recorder *r, int rank, int level, const char *text, int64_t mono_ns, int64_t wall_ns, char *err,
                        size_t errlen)
{
    uint8_t p[8 + REC_NOTE_MAX];
    size_t tl = text ? strnlen(text, REC_NOTE_MAX - 1) : 0;
    put_u32(p, (uint32_t)rank);
    put_u32(p + 4, (uint32_t)level);
    if (tl) memcpy(p + 8, text, tl);
    return append(r, REC_SRC_NOTE, p, 8 + tl, mono_ns, wall_ns, err, errlen);
}

int recorder_tick(Recorder *r, int64_t now, char *err, size_t errlen)
{
    if (!r || r->failed || !r->used) return 0;
    if (!now) now = mono_ns();
    if (now - r->oldest_ns < REC_FLUSH_NS) return 0;
    return flush_buf(r, err, errlen);
}

uint64_t recorder_records(const Recorder *r) { return r ? r->records : 0; }
uint64_t recorder_bytes(const Recorder *r) { return r ? r->bytes + r->used : 0; }
bool recorder_failed(const Recorder *r) { return r && r->failed; }

int recorder_close(Recorder **rp, char *err, size_t errlen)
{
    Recorder *r = rp ? *rp : NULL;
    if (!r) return 0;
    int rc = 0;
    if (!r->failed) {
        /* The end record counts the records before it: a reader that sees it
         * knows the file is whole. */
        uint8_t p[8];
        put_u64(p, r->records);
        rc = append(r, REC_SRC_END, p, sizeof p, 0, 0, err, errlen);
        if (!rc) rc = flush_buf(r, err, errlen);
        if (!rc && close(r->fd)) rc = rec_fail(r, err, errlen, "close");
        r->fd = -1;
    }
    if (r->fd >= 0) close(r->fd);
    free(r->buf);
    free(r);
    *rp = NULL;
    return rc;
}

/* ---- payload decoders ------------------------------------------------- */

/* Copy n bytes of text into a C string, control bytes and NULs turned to '?'
 * (they come from a file: treat them as hostile). */
static void copy_text(char *out, size_t cap, const uint8_t *p, size_t n)
{
    if (n >= cap) n = cap - 1;
    for (size_t i = 0; i < n; i++) out[i] = (p[i] < 0x20 || p[i] == 0x7f) ? '?' : (char)p[i];
    out[n] = 0;
}

int rec_proc_decode(const RecEntry *e, RecProc *out)
{
    memset(out, 0, sizeof *out);
    if ((e->src != REC_SRC_START && e->src != REC_SRC_EXIT) || e->len < 12 || e->len > 12 + REC_HOW_MAX) return -1;
    out->rank = (int32_t)get_u32(e->data);
    out->pid = (int32_t)get_u32(e->data + 4);
    out->wait_status = (int32_t)get_u32(e->data + 8);
    copy_text(out->how, sizeof out->how, e->data + 12, e->len - 12);
    return 0;
}

int rec_note_decode(const RecEntry *e, RecNote *out)
{
    memset(out, 0, sizeof *out);
    if (e->src != REC_SRC_NOTE || e->len < 8 || e->len > 8 + REC_NOTE_MAX) return -1;
    out->rank = (int32_t)get_u32(e->data);
    out->level = (int32_t)get_u32(e->data + 4);
    copy_text(out->text, sizeof out->text, e->data + 8, e->len - 8);
    return 0;
}

/* ---- streaming reader ------------------------------------------------- */

struct RecReader {
    FILE *f;
    char path[256];
    RecHeader hdr;
    uint64_t file_bytes;
    uint64_t pos;      /* offset just past the last good record */
    uint64_t count;    /* good records returned */
    int64_t last_t_ns; /* arrival of the last good record */
    uint8_t *buf;
    size_t cap;
    int done;       /* 0 reading; 1 clean end; -1 stopped early */
    char stop[320]; /* the message for done == -1 */
};

/* Read exactly n bytes or as many as there are; returns the count. */
static size_t read_some(FILE *f, void *p, size_t n)
{
    size_t got = 0;
    while (got < n) {
        size_t k = fread((uint8_t *)p + got, 1, n - got, f);
        if (k == 0) break;
        got += k;
    }
    return got;
}

/* Reading failed. In the header: err is "PATH: why". At a record: reading
 * stops here, and the message is kept so later calls repeat it. The two
 * names below say which. */
static int reader_fail(RecReader *rd, bool at_record, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static int reader_fail(RecReader *rd, bool at_record, char *err, size_t errlen, const char *fmt, ...)
{
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (!at_record) return err_set(err, errlen, "%s: %s", rd->path, why);
    snprintf(rd->stop, sizeof rd->stop,
             "recording ends early at byte %" PRIu64 " (record %" PRIu64 ", t=%.1f s): %.199s", rd->pos, rd->count + 1,
             (double)rd->last_t_ns / 1e9, why);
    rd->done = -1;
    return err_set(err, errlen, "%s", rd->stop);
}

#define header_fail(rd, err, errlen, ...) reader_fail(rd, false, err, errlen, __VA_ARGS__)
#define stop_early(rd, err, errlen, ...)  reader_fail(rd, true, err, errlen, __VA_ARGS__)

static int read_header(RecReader *rd, char *err, size_t errlen)
{
    uint8_t h[REC_HEADER_FIXED];
    size_t got = read_some(rd->f, h, sizeof h);
    if (got == 0) return header_fail(rd, err, errlen, "not a ddptop recording (empty file)");
    if (got < REC_MAGIC_LEN || memcmp(h, REC_MAGIC, REC_MAGIC_LEN))
        return header_fail(rd, err, errlen, "not a ddptop recording (bad magic)");
    if (got < sizeof h)
        return header_fail(rd, err, errlen, "truncated header (%zu of %d bytes)", got, REC_HEADER_FIXED);
    RecHeader *H = &rd->hdr;
    H->format_version = get_u16(h + 8);
    H->proto_version = get_u16(h + 10);
    H->header_bytes = get_u32(h + 12);
    H->created_wall_ns = (int64_t)get_u64(h + 16);
    H->world = (int32_t)get_u32(h + 24);
    uint32_t dlen = get_u32(h + 28);
    if (H->format_version == 0) return header_fail(rd, err, errlen, "damaged header (format version 0)");
    if (H->format_version > REC_FORMAT_VERSION)
        return header_fail(rd, err, errlen,
                           "recording format version %u is newer than this build reads (%d); "
                           "use a newer ddptop",
                           H->format_version, REC_FORMAT_VERSION);
    if (H->proto_version != PROTO_VERSION)
        return header_fail(rd, err, errlen, "recorded with protocol version %u, this build speaks %d", H->proto_version,
                           PROTO_VERSION);
    if (H->header_bytes < REC_HEADER_FIXED || H->header_bytes > REC_HEADER_MAX ||
        dlen > H->header_bytes - REC_HEADER_FIXED || H->world < 0)
        return header_fail(rd, err, errlen,
                           "damaged header (header length %" PRIu32 ", description %" PRIu32 " bytes, world %" PRId32
                           ")",
                           H->header_bytes, dlen, H->world);
    if (H->created_wall_ns < 0 || H->created_wall_ns > REC_MAX_WALL_NS)
        return header_fail(rd, err, errlen, "damaged header (creation time %" PRId64 ")", H->created_wall_ns);
    if ((uint64_t)H->header_bytes > rd->file_bytes)
        return header_fail(rd, err, errlen, "truncated header (%" PRIu64 " of %" PRIu32 " bytes)", rd->file_bytes,
                           H->header_bytes);
    H->desc = malloc((size_t)dlen + 1);
    if (!H->desc) return header_fail(rd, err, errlen, "out of memory");
    if (read_some(rd->f, H->desc, dlen) != dlen) return header_fail(rd, err, errlen, "truncated header");
    for (uint32_t i = 0; i < dlen; i++)
        if (H->desc[i] == 0) H->desc[i] = '?';
    H->desc[dlen] = 0;
    /* Fields a newer (compatible) writer appended after the description. */
    if (fseeko(rd->f, (off_t)H->header_bytes, SEEK_SET))
        return header_fail(rd, err, errlen, "seek: %s", strerror(errno));
    rd->pos = H->header_bytes;
    return 0;
}

RecReader *recreader_open(const char *path, char *err, size_t errlen)
{
    RecReader *rd = calloc(1, sizeof *rd);
    if (!rd) {
        err_set(err, errlen, "%s: out of memory", path);
        return NULL;
    }
    snprintf(rd->path, sizeof rd->path, "%s", path);
    /* Regular files only (a FIFO would block the open, and the reader seeks). */
    rd->f = file_fopen_regular(path, err, errlen);
    if (!rd->f) {
        free(rd);
        return NULL;
    }
    struct stat st;
    if (fstat(fileno(rd->f), &st)) {
        err_set(err, errlen, "%s: %s", path, strerror(errno));
        recreader_close(&rd);
        return NULL;
    }
    rd->file_bytes = (uint64_t)st.st_size;
    if (read_header(rd, err, errlen)) {
        recreader_close(&rd);
        return NULL;
    }
    return rd;
}

const RecHeader *recreader_header(const RecReader *rd) { return &rd->hdr; }
uint64_t recreader_count(const RecReader *rd) { return rd->count; }

int recreader_next(RecReader *rd, RecEntry *out, char *err, size_t errlen)
{
    if (rd->done > 0) return 0;
    if (rd->done < 0) return err_set(err, errlen, "%s", rd->stop);
    /* Reads are sequential: the stream sits at rd->pos. */
    uint8_t h[REC_HEAD_BYTES];
    size_t got = read_some(rd->f, h, sizeof h);
    if (got == 0) {
        if (ferror(rd->f)) return stop_early(rd, err, errlen, "read error: %s", strerror(errno));
        return stop_early(rd, err, errlen, "truncated: no end record (ddptop stopped before closing it)");
    }
    if (got < sizeof h)
        return stop_early(rd, err, errlen, "truncated record head (%zu of %d bytes)", got, REC_HEAD_BYTES);
    uint32_t len = get_u32(h);
    int src = h[4];
    int64_t t_ns = (int64_t)get_u64(h + 12);
    /* Hostile or garbled lengths stop here, before any allocation. */
    if (len > PROTO_MAX_FRAME_BYTES)
        return stop_early(rd, err, errlen, "damaged: record length %" PRIu32 " over the %u-byte frame limit", len,
                          PROTO_MAX_FRAME_BYTES);
    int64_t wall = (int64_t)get_u64(h + 20);
    if (src == 0 || h[5] != 0 || get_u16(h + 6) != 0 || t_ns < 0 || t_ns > REC_MAX_T_NS || wall < 0 ||
        wall > REC_MAX_WALL_NS)
        return stop_early(rd, err, errlen, "damaged record head");
    uint64_t left = rd->file_bytes > rd->pos + REC_HEAD_BYTES ? rd->file_bytes - rd->pos - REC_HEAD_BYTES : 0;
    if (len > left)
        return stop_early(rd, err, errlen, "truncated record (%" PRIu32 "-byte payload, %" PRIu64 " bytes left)", len,
                          left);
    if (len > rd->cap) {
        size_t cap = rd->cap ? rd->cap : 4096;
        while (cap < len) cap *= 2;
        uint8_t *nb = realloc(rd->buf, cap);
        if (!nb) return stop_early(rd, err, errlen, "out of memory for a %" PRIu32 "-byte record", len);
        rd->buf = nb;
        rd->cap = cap;
    }
    if (read_some(rd->f, rd->buf, len) != len)
        return stop_early(rd, err, errlen, "truncated record (%" PRIu32 "-byte payload)", len);
    if (record_crc(h, rd->buf, len) != get_u32(h + 8)) return stop_early(rd, err, errlen, "damaged: checksum mismatch");
    if (src == REC_SRC_END) {
        if (len != 8 || get_u64(rd->buf) != rd->count) return stop_early(rd, err, errlen, "damaged end record");
        uint64_t end = rd->pos + REC_HEAD_BYTES + len;
        if (end != rd->file_bytes) {
            rd->pos = end;
            return stop_early(rd, err, errlen, "%" PRIu64 " bytes after the end record", rd->file_bytes - end);
        }
        rd->pos = end;
        rd->done = 1;
        return 0;
    }
    out->src = src;
    out->t_ns = t_ns;
    out->wall_ns = wall;
    out->offset = rd->pos;
    out->index = rd->count;
    out->data = rd->buf;
    out->len = len;
    rd->pos += REC_HEAD_BYTES + len;
    rd->count++;
    rd->last_t_ns = t_ns;
    return 1;
}

void recreader_close(RecReader **rdp)
{
    RecReader *rd = rdp ? *rdp : NULL;
    if (!rd) return;
    if (rd->f) fclose(rd->f);
    free(rd->hdr.desc);
    free(rd->buf);
    free(rd);
    *rdp = NULL;
}

/* ---- in memory -------------------------------------------------------- */

/* Room for one more entry and len more bytes of blob. 0, or -1 out of memory. */
static int load_room(Recording *r, size_t *cap, uint8_t **blob, size_t blob_len, size_t *blob_cap, size_t len)
{
    if (r->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 1024;
        RecEntry *nr = realloc(r->recs, nc * sizeof *nr);
        if (!nr) return -1;
        r->recs = nr;
        *cap = nc;
    }
    if (blob_len + len > *blob_cap) {
        size_t nc = *blob_cap ? *blob_cap : 65536;
        while (nc < blob_len + len) nc *= 2;
        uint8_t *nb = realloc(*blob, nc);
        if (!nb) return -1;
        *blob = nb;
        *blob_cap = nc;
    }
    return 0;
}

/* A tel/ctl frame of kind "burst" (every encoder writes "k" and "burst" as
 * fixstr: the byte search only spares the decode of the other frames). */
static bool is_burst(const RecEntry *e, Msg *m)
{
    static const char key[] = "\xa1k\xa5"
                              "burst";
    char err[8];
    if ((e->src != REC_SRC_TEL && e->src != REC_SRC_CTL) || !memmem(e->data, e->len, key, sizeof key - 1)) return false;
    int rc = codec_decode(e->data, e->len, m, err, sizeof err);
    if (rc == 0 && m->kind == MSG_BURST) return true;
    if (rc >= 0) msg_done(m);
    return false;
}

int recording_load(const char *path, Recording **out, char *err, size_t errlen)
{
    *out = NULL;
    RecReader *rd = recreader_open(path, err, errlen);
    if (!rd) return -1;
    Recording *r = calloc(1, sizeof *r);
    uint8_t *blob = NULL;
    size_t blob_len = 0, blob_cap = 0, cap = 0;
    if (!r) goto oom;
    for (;;) {
        RecEntry e;
        char why[320];
        int rc = recreader_next(rd, &e, why, sizeof why);
        if (rc == 0) {
            r->complete = true;
            break;
        }
        if (rc < 0) {
            snprintf(r->tail, sizeof r->tail, "%s", why);
            break;
        }
        Msg burst;
        if (is_burst(&e, &burst)) {
            /* A burst is loaded as its messages, each an entry of its own
             * (same arrival, offset and index), so every reader of a
             * Recording sees single frames. One claiming another rank was
             * dropped live: it is dropped here too. */
            size_t pos = 0, flen;
            const uint8_t *f;
            char derr[8];
            int bad = 0;
            while (codec_burst_next(&burst.u.burst, &pos, &f, &flen)) {
                Msg m;
                int brc = codec_burst_decode(&burst, f, flen, &m, derr, sizeof derr);
                if (brc == 0 || brc == -2) msg_done(&m);
                if (brc == -2) continue;
                if (!bad && load_room(r, &cap, &blob, blob_len, &blob_cap, flen)) bad = 1;
                if (bad) break;
                RecEntry ie = e;
                memcpy(blob + blob_len, f, flen);
                ie.data = (const uint8_t *)(uintptr_t)blob_len;
                ie.len = (uint32_t)flen;
                blob_len += flen;
                r->recs[r->n++] = ie;
            }
            msg_done(&burst);
            if (bad) goto oom;
            continue;
        }
        if (load_room(r, &cap, &blob, blob_len, &blob_cap, e.len)) goto oom;
        if (e.len) memcpy(blob + blob_len, e.data, e.len);
        /* Offsets into the blob for now: it may still move. */
        e.data = (const uint8_t *)(uintptr_t)blob_len;
        blob_len += e.len;
        r->recs[r->n++] = e;
    }
    for (size_t i = 0; i < r->n; i++) r->recs[i].data = blob ? blob + (uintptr_t)r->recs[i].data : (const uint8_t *)"";
    r->blob_ = blob;
    r->hdr = rd->hdr;
    rd->hdr.desc = NULL; /* moved into r */
    r->file_bytes = rd->file_bytes;
    recreader_close(&rd);
    *out = r;
    return 0;
oom:
    err_set(err, errlen, "%s: out of memory loading the recording", path);
    free(blob);
    if (r) free(r->recs);
    free(r);
    recreader_close(&rd);
    return -1;
}

void recording_free(Recording **rp)
{
    Recording *r = rp ? *rp : NULL;
    if (!r) return;
    free(r->recs);
    free(r->blob_);
    free(r->hdr.desc);
    free(r);
    *rp = NULL;
}

size_t recording_seek_time(const Recording *r, int64_t t_ns)
{
    /* Arrival order is monotonic time order: binary search. */
    size_t lo = 0, hi = r->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->recs[mid].t_ns < t_ns)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}
