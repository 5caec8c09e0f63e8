/* series.h — a value over steps kept at bounded memory: fixed bins that
 * double their width (halving the resolution) when the run outgrows them,
 * so a chart of a 100k-step run costs the same as one of 500 steps.
 *
 * Owns: nothing but its own array. Pure code, no allocation; main thread
 * (the job model) writes, views read.
 */
#ifndef DDPTOP_SERIES_H
#define DDPTOP_SERIES_H

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
/* Add value v at x (a step). x below the first one seen lands in bin 0. */
void series_add(Series *s, int64_t x, double v);
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
