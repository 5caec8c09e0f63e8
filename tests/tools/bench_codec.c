/* bench_codec.c — the frontend's decode cost per message: codec_decode
 * against the decoder it replaced (tests/ref/codec_ref.h: pre-scan, object
 * tree, walk), side by side in one binary, on the frames a rank sends
 * (tests/tools/tool_load.c's step, coll and beat) and on one 50 ms burst of
 * them, each message of it decoded as ddptop does (codec_burst_decode).
 * Not part of the test suite; `make bench-codec` runs it
 * (docs/BENCHMARKS.md).
 *
 *   bench_codec [-n FRAMES] [-r REPS] [-k CASE]
 *   bench_codec -c COUNT -k CASE
 *
 * Each rep times FRAMES decodes of every case (or of CASE alone), the old
 * decoder and the new one taking turns every CHUNK frames (so a busy
 * machine slows both alike); one row per case and rep (mean ns per message,
 * old / new), then the median of each case's ratios and the fastest chunk
 * of each. Single-threaded.
 *
 * -c decodes CASE's frame COUNT times with codec_decode alone and reads no
 * clock: for callgrind, whose instruction counts do not move with the
 * machine's load as times do. Two counts' difference over their messages is
 * the Ir a message, the setup cancelled (docs/BENCHMARKS.md).
 * "envelope" is the burst's own frame alone (codec_decode, msg_done).
 */
#include "base/clock.h"
#include "base/usage.h"
#include "ref/codec_ref.h"
#include "wire/codec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEE   "bench_codec [-n FRAMES] [-r REPS] [-k CASE] [-c COUNT]"
/* frames timed in one go before the other decoder takes its turn */
#define CHUNK 1000

enum { CASE_STEP, CASE_COLL, CASE_BEAT, CASE_BURST, CASE_ENVELOPE, N_CASES };
static const char *const case_names[N_CASES] = { "step", "coll", "beat", "burst", "envelope" };

/* What tool_load's rank 17 of 64 sends at step 4711 (100 steps/s, one bucket). */
static void encode_case(int c, CodecBuf *b, int64_t t_ns, int64_t s)
{
    Msg m;
    char err[160];
    msg_init(&m, c == CASE_STEP ? MSG_STEP : c == CASE_COLL ? MSG_COLL : MSG_BEAT);
    m.rank = 17;
    m.t_ns = t_ns;
    if (c == CASE_COLL) {
        MsgColl *k = &m.u.coll;
        k->seq = s, k->bucket = 0, k->step = s, k->bytes = 1 << 20;
        snprintf(k->op, sizeof k->op, "allreduce");
        k->enq_ns = t_ns - 3000000, k->start_ns = t_ns - 2500000, k->done_ns = t_ns - 500000;
        k->algbw_gbs = (double)k->bytes / 2e6, k->busbw_gbs = k->algbw_gbs * 2.0 * 63 / 64;
    } else if (c == CASE_STEP) {
        MsgStep *st = &m.u.step;
        st->epoch = (s - 1) / 1000, st->step = s, st->loss = 0.4132, st->lr = 1e-3, st->samples = s * 64;
        st->step_ms = 9.0, st->fwd_ms = 2.7, st->bwd_ms = 4.5, st->opt_ms = 0.45;
        st->comm_ms = 2.0, st->exposed_ms = 0.5, st->drops = 0;
    } else {
        m.u.beat.step = s;
        m.u.beat.phase = PHASE_TRAIN;
    }
    if (codec_encode(&m, b, err, sizeof err) < 0) {
        fprintf(stderr, "bench_codec: encode: %s\n", err);
        exit(1);
    }
}

/* Decode the case's frame (for a burst: the burst, then each message, but
 * for an envelope alone) once; returns the messages decoded, 0 on a failure. */
static int run_once(bool old, const CodecBuf *f, bool envelope, int64_t *sink)
{
    Msg m, in;
    char err[256];
    int rc =
        old ? ref_decode(f->data, f->len, &m, err, sizeof err) : codec_decode(f->data, f->len, &m, err, sizeof err);
    if (rc != 0) return 0;
    int n = 1;
    if (m.kind == MSG_BURST && !envelope) {
        size_t pos = 0, len;
        const uint8_t *p;
        n = 0;
        while (codec_burst_next(&m.u.burst, &pos, &p, &len)) {
            /* the old path: codec_burst_decode was codec_decode and its checks */
            int irc =
                old ? ref_decode(p, len, &in, err, sizeof err) : codec_burst_decode(&m, p, len, &in, err, sizeof err);
            if (irc != 0 || in.rank != m.rank) return 0;
            *sink += in.u.step.epoch;
            msg_done(&in);
            n++;
        }
    } else {
        *sink += m.kind == MSG_BURST ? (int64_t)m.u.burst.len : m.u.step.epoch; /* every kind's first field */
    }
    msg_done(&m);
    return n;
}

/* ns per message over frames runs of the case. */
static double time_case(bool old, const CodecBuf *f, bool envelope, long frames, int64_t *sink)
{
    long msgs = 0;
    int64_t t0 = mono_ns();
    for (long i = 0; i < frames; i++) {
        int n = run_once(old, f, envelope, sink);
        if (n == 0) {
            fprintf(stderr, "bench_codec: a %s frame did not decode\n", old ? "reference" : "new");
            exit(1);
        }
        msgs += n;
    }
    return (double)(mono_ns() - t0) / (double)msgs;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static bool parse_pos(const char *s, long max, long *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < 1 || v > max) return false;
    *out = v;
    return true;
}

/* -c: COUNT decodes of case c by codec_decode, untimed (callgrind). */
static int count_case(int c, const CodecBuf *f, long count)
{
    int64_t sink = 0;
    long msgs = 0;
    for (long i = 0; i < count; i++) {
        int n = run_once(false, f, c == CASE_ENVELOPE, &sink);
        if (n == 0) {
            fprintf(stderr, "bench_codec: a %s frame did not decode\n", case_names[c]);
            return 1;
        }
        msgs += n;
    }
    printf("bench_codec: %s (%zu bytes) decoded %ld times, %ld messages (checksum %lld)\n", case_names[c], f->len,
           count, msgs, (long long)sink);
    return 0;
}

int main(int argc, char **argv)
{
    long frames = 200000, reps = 5, count = 0;
    int only = -1;
    for (int i = 1; i < argc; i++) {
        bool is_k = !strcmp(argv[i], "-k");
        long *dst = !strcmp(argv[i], "-n")   ? &frames
                    : !strcmp(argv[i], "-r") ? &reps
                    : !strcmp(argv[i], "-c") ? &count
                                             : NULL;
        if (!dst && !is_k) return usage_fail("bench_codec", SEE, "unknown option %s", argv[i]);
        if (i + 1 >= argc) return usage_fail("bench_codec", SEE, "%s needs a value", argv[i]);
        if (is_k) {
            for (int c = 0; c < N_CASES; c++)
                if (!strcmp(argv[i + 1], case_names[c])) only = c;
            if (only < 0) return usage_fail("bench_codec", SEE, "-k: no case %s", argv[i + 1]);
        } else if (!parse_pos(argv[i + 1], dst == &reps ? 101 : 100000000, dst)) {
            return usage_fail("bench_codec", SEE, "not a count in range: %s", argv[i + 1]);
        }
        i++;
    }
    if (count && only < 0) return usage_fail("bench_codec", SEE, "%s needs a case (-k)", "-c");

    int64_t t_ns = 1764590000123456789LL, s = 4711;
    CodecBuf f[N_CASES], item;
    codec_buf_init(&item);
    char err[160];
    for (int c = 0; c < CASE_BURST; c++) {
        codec_buf_init(&f[c]);
        encode_case(c, &f[c], t_ns, s);
    }
    /* one rank's 50 ms flush at 100 steps/s: 5 x (coll, step), one beat */
    codec_buf_init(&f[CASE_BURST]);
    codec_burst_begin(&f[CASE_BURST], 17, err, sizeof err);
    for (int k = 0; k < 11; k++) {
        encode_case(k == 10 ? CASE_BEAT : k % 2 ? CASE_STEP : CASE_COLL, &item, t_ns + k * 10000000LL, s + k / 2);
        if (codec_burst_add(&f[CASE_BURST], item.data, item.len, err, sizeof err) < 0) {
            fprintf(stderr, "bench_codec: burst: %s\n", err);
            return 1;
        }
    }
    codec_burst_finish(&f[CASE_BURST], t_ns + 50000000LL);
    codec_buf_init(&f[CASE_ENVELOPE]); /* the same frame, its messages left alone */
    codec_buf_grow(&f[CASE_ENVELOPE], f[CASE_BURST].len);
    memcpy(f[CASE_ENVELOPE].data, f[CASE_BURST].data, f[CASE_BURST].len);
    f[CASE_ENVELOPE].len = f[CASE_BURST].len;

    int rc = 0;
    if (count) {
        rc = count_case(only, &f[only], count);
        goto done;
    }
    int c0 = only < 0 ? 0 : only, c1 = only < 0 ? N_CASES : only + 1;
    printf("bench_codec: %ld frames a case and rep, %ld reps, old and new in turn every %d frames; ns per message (a "
           "burst: its 11 messages; an envelope: the burst's frame alone)\n",
           frames, reps, CHUNK);
    printf("%-8s %5s %4s %10s %10s %7s\n", "case", "bytes", "rep", "old ns", "new ns", "old/new");
    double *ratios = calloc((size_t)(N_CASES * reps), sizeof *ratios);
    double best[N_CASES][2];
    int64_t sink = 0;
    for (int c = c0; c < c1; c++) { /* warm-up */
        time_case(true, &f[c], c == CASE_ENVELOPE, frames / 10 + 1, &sink);
        time_case(false, &f[c], c == CASE_ENVELOPE, frames / 10 + 1, &sink);
        best[c][0] = best[c][1] = 1e30;
    }
    for (long r = 0; r < reps; r++) {
        for (int c = c0; c < c1; c++) {
            /* in turn, a chunk each: the machine's load falls on both alike */
            bool env = c == CASE_ENVELOPE;
            double o = 0, n = 0;
            long chunks = (frames + CHUNK - 1) / CHUNK;
            for (long k = 0; k < chunks; k++) {
                double a = time_case(true, &f[c], env, CHUNK, &sink), b = time_case(false, &f[c], env, CHUNK, &sink);
                o += a, n += b;
                if (a < best[c][0]) best[c][0] = a;
                if (b < best[c][1]) best[c][1] = b;
            }
            o /= (double)chunks, n /= (double)chunks;
            ratios[c * reps + r] = o / n;
            printf("%-8s %5zu %4ld %10.1f %10.1f %7.2f\n", case_names[c], f[c].len, r + 1, o, n, o / n);
        }
    }
    printf("median old/new:");
    for (int c = c0; c < c1; c++) {
        qsort(ratios + c * reps, (size_t)reps, sizeof *ratios, cmp_double);
        double med = reps % 2 ? ratios[c * reps + reps / 2]
                              : (ratios[c * reps + reps / 2 - 1] + ratios[c * reps + reps / 2]) / 2;
        printf(" %s %.2fx", case_names[c], med);
    }
    printf("\nfastest chunk, old / new ns:");
    for (int c = c0; c < c1; c++)
        printf(" %s %.1f / %.1f (%.2fx)", case_names[c], best[c][0], best[c][1], best[c][0] / best[c][1]);
    printf("  (checksum %lld)\n", (long long)sink);
    free(ratios);
done:
    ref_unpack_release();
    for (int c = 0; c < N_CASES; c++) codec_buf_done(&f[c]);
    codec_buf_done(&item);
    return rc;
}
