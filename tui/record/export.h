/* export.h — `ddptop export`: a recording to formats other tools read.
 *
 *   ddptop export FILE [--chrome-trace OUT.json] [--jsonl OUT] [--csv OUT]
 *
 * Owns: the Chrome trace (Trace Event Format, for Perfetto and
 * chrome://tracing; export_chrome.c), JSON lines (one object per record;
 * export_jsonl.c) and per-rank step CSV (export_csv.c) renderings of a
 * recording, and the subcommand's command line (export_cli.c). Does not
 * own the recording format (record.h), message decoding (codec.h) or JSON
 * writing (base/json.h). docs/RECORDING.md describes the outputs. Main
 * thread only.
 */
#ifndef DDPTOP_EXPORT_H
#define DDPTOP_EXPORT_H

#include <stddef.h>
#include <stdio.h>

#include "record/record.h"

/* The subcommand: argv holds what follows "export" (argv[0] is FILE or an
 * option). Several outputs may be asked at once; OUT "-" is stdout (once).
 * Returns the exit status: 0 done (a recording that ends early is exported
 * up to the damage, with a warning line on stderr), 2 bad input (one line
 * on stderr), 1 an output could not be written. */
int export_main(int argc, char **argv);

/* The renderers, for tests and for replay's later use. Each writes the whole
 * output to f and returns 0, or -1 with err when f reports a write error.
 * `name` is the recording's name, put in the trace's metadata. */
int export_chrome_trace(const Recording *r, const char *name, FILE *f, char *err, size_t errlen);
int export_jsonl(const Recording *r, FILE *f, char *err, size_t errlen);
int export_csv(const Recording *r, FILE *f, char *err, size_t errlen);

#endif
