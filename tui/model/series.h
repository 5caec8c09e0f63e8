/* series.h — a value over steps kept at bounded memory: fixed bins that
 * double their width (halving the resolution) when the run outgrows them,
 * so a chart of a 100k-step run costs the same as one of 500 steps.
 *
 * Owns: nothing but its own array. Pure code, no allocation; main thread
 * (the job model) writes, views read.
 */
#ifndef DDPTOP_SERIES_H
#define DDPTOP_SERIES_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#define SERIES_CAP 512

typedef struct {
    double sum; /* of the finite values that fell in the bin */
    float min, max;
    int32_t n;     /* finite values */
    int32_t n_bad; /* NaN/inf values (a diverged loss): shown, not averaged */
} SeriesBin;

typedef struct {
    int64_t first;  /* x where bin 0 starts (the first x seen) */
    int64_t stride; /* x units per bin: 1, 2, 4, ... */
    int len;        /* bins in use (0: empty) */
    SeriesBin bin[SERIES_CAP];
} Series;

void series_init(Series *s);
/* Add value v at x (a step). x below the first one seen lands in bin 0.
 * Inline below: every step adds to three series (its rank's loss, the
 * job's, a bucket's all-reduce time). */
static inline void series_add(Series *s, int64_t x, double v);
/* series_add's rare cases (the first value, a series never initialised,
 * an x past the last bin: compacted until it fits); not for callers. */
void series_add_slow(Series *s, int64_t x, double v);

/* v into bin i (i < SERIES_CAP), which the series then covers. */
static inline void series_bin_add(Series *s, int i, double v)
{
    SeriesBin *b = &s->bin[i];
    if (!isfinite(v)) {
        b->n_bad++;
    } else {
        float f = (float)v; /* finite v: f is finite or infinite, never NaN, so a < b picks as min/max do */
        if (b->n == 0) {
            b->min = b->max = f;
        } else {
            b->min = f < b->min ? f : b->min;
            b->max = f > b->max ? f : b->max;
        }
        b->sum += v;
        b->n++;
    }
    if (i + 1 > s->len) s->len = i + 1;
}

/* The usual case without a call: the bin found with a shift, the stride
 * being a power of two (1, doubled by each compaction; nothing else writes
 * it). A series never initialised (zeroed: stride 0) is empty, so the slow
 * way takes it. */
static inline void series_add(Series *s, int64_t x, double v)
{
    /* x and first are wire integers (within +-2^61): the difference fits */
    uint64_t off = x > s->first ? (uint64_t)(x - s->first) : 0;
    uint64_t i = off >> __builtin_ctzll((uint64_t)s->stride | (1ull << 63));
    if (__builtin_expect(s->len == 0 || i >= SERIES_CAP, 0)) {
        series_add_slow(s, x, v);
        return;
    }
    series_bin_add(s, (int)i, v);
}
/* Mean of a bin's finite values (NaN when it has none). */
double series_bin_mean(const SeriesBin *b);
/* The x range bin i covers: [lo, lo + stride). */
int64_t series_bin_x(const Series *s, int i);
/* Last x covered by the series (first + len*stride - 1), or 0 when empty. */
int64_t series_last_x(const Series *s);
/* Min and max over all bins' finite values; false when there are none.
 * positive_only: ignore values <= 0 (for a log scale). */
bool series_range(const Series *s, bool positive_only, double *lo, double *hi);

#endif
