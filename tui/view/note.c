/* note.c — see note.h. */
#include "view/note.h"

#include <stdarg.h>
#include <stdio.h>

void note_set(Note *n, int64_t now_ms, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(n->text, sizeof n->text, fmt, ap);
    va_end(ap);
    n->until_ms = now_ms + NOTE_MS;
}

const char *note_text(const Note *n, int64_t now_ms) { return n->text[0] && now_ms < n->until_ms ? n->text : NULL; }
