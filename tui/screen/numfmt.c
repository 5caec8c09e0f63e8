/* numfmt.c — printf's %lld and %.*f without printf. See numfmt.h.
 *
 * %.*f rounds the double's exact binary value to the nearest decimal (ties
 * to even, in glibc). Scaling by 10^d in double rounds once more, by at
 * most half an ulp of the scaled value: below 1e9 that is under 1.2e-7, so
 * a fraction further than 1e-6 from one half rounds the same way as the
 * exact value would. Anything nearer a tie, and anything larger, is left to
 * snprintf, so the output is always printf's.
 */
#include "screen/numfmt.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const double pow10_d[10] = { 1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9 };

/* Copy len bytes of s into buf[n] as snprintf would (truncated, terminated). */
static int out(char *buf, size_t n, const char *s, int len)
{
    if (n > 0) {
        size_t k = (size_t)len < n ? (size_t)len : n - 1;
        memcpy(buf, s, k);
        buf[k] = '\0';
    }
    return len;
}

/* Digits of v, most significant first, into the end of tmp; returns the start. */
static char *digits(char *end, unsigned long long v)
{
    do {
        *--end = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return end;
}

int numfmt_int(char *buf, size_t n, long long v)
{
    char tmp[24];
    char *end = tmp + sizeof tmp;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    char *s = digits(end, u);
    if (v < 0) *--s = '-';
    return out(buf, n, s, (int)(end - s));
}

int numfmt_fixed(char *buf, size_t n, double x, int decimals)
{
    if (decimals < 0 || decimals > 9 || !isfinite(x)) return snprintf(buf, n, "%.*f", decimals, x);
    double y = fabs(x) * pow10_d[decimals];
    if (!(y < 1e9)) return snprintf(buf, n, "%.*f", decimals, x);
    double whole = floor(y), frac = y - whole;
    if (fabs(frac - 0.5) < 1e-6) return snprintf(buf, n, "%.*f", decimals, x);
    unsigned long long r = (unsigned long long)whole + (frac > 0.5);
    char tmp[40];
    char *end = tmp + sizeof tmp, *s = end;
    for (int i = 0; i < decimals; i++) {
        *--s = (char)('0' + r % 10);
        r /= 10;
    }
    if (decimals > 0) *--s = '.';
    s = digits(s, r);
    if (signbit(x)) *--s = '-';
    return out(buf, n, s, (int)(end - s));
}
