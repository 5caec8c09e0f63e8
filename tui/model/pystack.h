/* pystack.h — a rank's Python stacks as Python's faulthandler writes them
 * to the rank's log (the torch adapter registers it for SIGUSR1): picked
 * out of whatever else the rank printed meanwhile.
 *
 * Pure text work: the caller reads the log and passes the bytes it grew by
 * since the signal. Any thread.
 */
#ifndef DDPTOP_PYSTACK_H
#define DDPTOP_PYSTACK_H

#include <stddef.h>

/* The faulthandler blocks in text[len]: each "Thread 0x... (most recent
 * call first):" (or "Current thread 0x...", "Stack (most recent call
 * first):") header with its frame lines ("  File \"train.py\", line 57 in
 * save"), a blank line between threads; lines that are neither (the
 * script's own output, interleaved) are dropped. Into out[outlen] (out,
 * always terminated; cut at a line when full). Returns how many threads. */
int pystack_extract(const char *text, size_t len, char *out, size_t outlen);

#endif
