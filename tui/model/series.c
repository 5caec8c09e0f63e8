/* series.c — decimating bins over steps. See series.h.
 *
 * When an x falls past the last bin, neighbouring bins are merged pairwise
 * (sum, n, min, max combine exactly) and the stride doubles: the mean stays
 * the true mean of the values in the wider bin, min/max stay exact. Main
 * thread only.
 */
#include "model/series.h"

#include <math.h>
#include <string.h>

void series_init(Series *s)
{
    memset(s, 0, sizeof *s);
    s->stride = 1;
}

static void bin_merge(SeriesBin *into, const SeriesBin *b)
{
    if (b->n > 0) {
        if (into->n == 0) {
            into->min = b->min;
            into->max = b->max;
        } else {
            if (b->min < into->min) into->min = b->min;
            if (b->max > into->max) into->max = b->max;
        }
    }
    into->sum += b->sum;
    into->n += b->n;
    into->n_bad += b->n_bad;
}

static void compact(Series *s)
{
    int half = (s->len + 1) / 2;
    for (int i = 0; i < half; i++) {
        SeriesBin m;
        memset(&m, 0, sizeof m);
        bin_merge(&m, &s->bin[2 * i]);
        if (2 * i + 1 < s->len) bin_merge(&m, &s->bin[2 * i + 1]);
        s->bin[i] = m;
    }
    memset(&s->bin[half], 0, sizeof s->bin[0] * (size_t)(SERIES_CAP - half));
    s->len = half;
    s->stride *= 2;
}

void series_add_slow(Series *s, int64_t x, double v)
{
    if (s->stride < 1) series_init(s);
    if (s->len == 0) s->first = x;
    uint64_t off = x > s->first ? (uint64_t)(x - s->first) : 0;
    while (off / (uint64_t)s->stride >= SERIES_CAP) compact(s);
    series_bin_add(s, (int)(off / (uint64_t)s->stride), v);
}

double series_bin_mean(const SeriesBin *b) { return b->n > 0 ? b->sum / b->n : NAN; }

int64_t series_bin_x(const Series *s, int i) { return s->first + (int64_t)i * s->stride; }

int64_t series_last_x(const Series *s) { return s->len ? s->first + (int64_t)s->len * s->stride - 1 : 0; }

bool series_range(const Series *s, bool positive_only, double *lo, double *hi)
{
    bool any = false;
    double a = 0, b = 0;
    for (int i = 0; i < s->len; i++) {
        const SeriesBin *x = &s->bin[i];
        if (x->n == 0) continue;
        double mn = x->min, mx = x->max;
        if (positive_only) {
            if (mx <= 0) continue;
            if (mn <= 0) mn = mx; /* the bin's positive part is unknown below max */
        }
        if (!any || mn < a) a = mn;
        if (!any || mx > b) b = mx;
        any = true;
    }
    if (any) {
        *lo = a;
        *hi = b;
    }
    return any;
}
