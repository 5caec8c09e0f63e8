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

/* faulthandler writes at most 100 frames a thread (then "  ..."). */
#define PYSTACK_FRAMES_MAX 101
#define PYSTACK_FRAME_LEN  96

/* One thread of a dump: its id (the header's hex; 0 for "Stack"), whether
 * it was the thread that took the signal, and its frames outermost first,
 * each "file:line function" with the file's base name ("train.py:57 save";
 * "pkg/__init__.py:3 f" for a package's files), "<no Python frame>" or
 * "..." (faulthandler's cut) as written. */
typedef struct {
    unsigned long long id;
    int current;
    int beat; /* the thread that took the signal is the adapter's heartbeat
               * (a frame in ddptop/beat.py): ddptop's own, not the script's */
    int n;
    char frame[PYSTACK_FRAMES_MAX][PYSTACK_FRAME_LEN];
} PyStackThread;

/* Call each(ctx, thread) for every thread's block in text[len] (what
 * pystack_extract keeps; other lines are skipped). th is the caller's
 * scratch. Returns how many threads. */
int pystack_parse(const char *text, size_t len, PyStackThread *th, void (*each)(void *ctx, const PyStackThread *th),
                  void *ctx);

#endif
