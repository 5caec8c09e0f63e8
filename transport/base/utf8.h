/* utf8.h — the one UTF-8 rule of ddptop: the codec, the JSON writer and the
 * printers share it, so a string one accepts the others accept too.
 * Pure, any thread.
 */
#ifndef DDPTOP_UTF8_H
#define DDPTOP_UTF8_H

#include <stddef.h>

/* Length of the well-formed UTF-8 sequence at s (n bytes available, n >= 1;
 * RFC 3629: no overlongs, no surrogates, at most U+10FFFF), or 0 if
 * ill-formed. */
size_t utf8_seq(const unsigned char *s, size_t n);

#endif
