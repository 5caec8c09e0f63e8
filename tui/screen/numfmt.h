/* numfmt.h — numbers as text the way printf writes them, without printf:
 * the frame formats a few hundred numbers (steps, losses, times), and
 * snprintf's format parsing and stdio set-up were a tenth of drawing one.
 *
 * Owns nothing. Pure functions, any thread; decimal point '.', as ddptop
 * runs with LC_NUMERIC "C".
 */
#ifndef DDPTOP_NUMFMT_H
#define DDPTOP_NUMFMT_H

#include <stddef.h>

/* snprintf(buf, n, "%lld", v). Returns the length written (buf always
 * terminated when n > 0; truncated like snprintf when n is short). */
int numfmt_int(char *buf, size_t n, long long v);
/* snprintf(buf, n, "%.*f", decimals, x), byte for byte, for decimals 0..9:
 * exact decimal rounding of the double, "-" on negative values and on -0,
 * "nan"/"inf" as printf spells them (those, huge values and the rare value
 * within a millionth of a rounding tie go through snprintf itself). Returns
 * the length. */
int numfmt_fixed(char *buf, size_t n, double x, int decimals);

#endif
