/* note.h — a one-line note on the status line that fades after a few
 * seconds ("checkpoint asked", "attach refused: ..."), as attach and replay
 * show them. Plain data; the caller passes the time. Main thread.
 */
#ifndef DDPTOP_NOTE_H
#define DDPTOP_NOTE_H

#include <stdbool.h>
#include <stdint.h>

/* How long a note stays. */
#define NOTE_MS 4000

typedef struct {
    char text[256];
    int64_t until_ms; /* monotonic ms */
} Note;

/* Set the note's text (printf-style), shown until now_ms + NOTE_MS. */
void note_set(Note *n, int64_t now_ms, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The note's text while it shows, else NULL. */
const char *note_text(const Note *n, int64_t now_ms);

#endif
