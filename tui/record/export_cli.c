/* export_cli.c — the `ddptop export` subcommand: its options, and the
 * outputs opened before any is written. See export.h; the renderers are
 * export_chrome.c, export_jsonl.c and export_csv.c. Main thread only.
 */
#include "record/export.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/usage.h"
#include "record/rec_cli.h"

enum { OUT_TRACE, OUT_JSONL, OUT_CSV, OUT__COUNT };
static const char *const out_flag[OUT__COUNT] = { "--chrome-trace", "--jsonl", "--csv" };

static const char EXPORT_USAGE[] =
    "usage: ddptop export FILE [--chrome-trace OUT.json] [--jsonl OUT] [--csv OUT]\n"
    "\n"
    "Turn a recording (ddptop run --record FILE) into:\n"
    "  --chrome-trace OUT.json  Trace Event Format for Perfetto (ui.perfetto.dev) and\n"
    "                           chrome://tracing: a process per rank; phase, compute and\n"
    "                           comm threads; steps, all-reduce buckets, checkpoints and\n"
    "                           phases as spans; loss as a counter\n"
    "  --jsonl OUT              one JSON object per record, every key, with arrival times\n"
    "  --csv OUT                per-rank steps: rank,epoch,step,loss,step_ms,comm_ms\n"
    "Several at once are fine; OUT - writes to standard output.\n";

/* Who a usage line names, and where it points. */
static const char WHO[] = "ddptop export", SEE[] = "ddptop export --help";

static int usage(const char *fmt, const char *arg) { return usage_fail(WHO, SEE, fmt, arg); }

static bool same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

int export_main(int argc, char **argv)
{
    const char *in = NULL, *out[OUT__COUNT] = { NULL, NULL, NULL };
    int to_stdout = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(EXPORT_USAGE, stdout);
            return 0;
        }
        int k = -1;
        for (int j = 0; j < OUT__COUNT; j++)
            if (!strcmp(a, out_flag[j])) k = j;
        if (k >= 0) {
            if (i + 1 >= argc || !argv[i + 1][0]) return usage("%s: missing output file", a);
            if (out[k]) return usage("%s given twice", a);
            out[k] = argv[++i];
            if (!strcmp(out[k], "-") && ++to_stdout > 1) return usage("%s: only one output can be - (stdout)", a);
        } else {
            int rc = rec_cli_path(WHO, SEE, a, &in, "one recording at a time (got \"%s\" too)");
            if (rc) return rc;
        }
    }
    if (!in) return usage("%s", "which recording? ddptop export FILE --chrome-trace OUT.json");
    if (!out[OUT_TRACE] && !out[OUT_JSONL] && !out[OUT_CSV])
        return usage("%s", "nothing to do: give --chrome-trace OUT, --jsonl OUT and/or --csv OUT");
    for (int k = 0; k < OUT__COUNT; k++) {
        if (!out[k] || !strcmp(out[k], "-")) continue;
        if (same_file(in, out[k])) return usage("%s would overwrite the recording itself", out_flag[k]);
        for (int j = 0; j < k; j++)
            if (out[j] && !strcmp(out[j], out[k])) return usage("%s: same output file twice", out[k]);
    }

    char err[512];
    Recording *rec = NULL;
    if (recording_load(in, &rec, err, sizeof err)) {
        fprintf(stderr, "ddptop export: %s\n", err);
        return 2;
    }
    if (!rec->complete) fprintf(stderr, "ddptop export: warning: %s: %s\n", in, rec->tail);

    /* Open every output before writing any, so a bad path costs nothing. */
    FILE *f[OUT__COUNT] = { NULL, NULL, NULL };
    bool regular[OUT__COUNT] = { false, false, false };
    int status = 0;
    for (int k = 0; k < OUT__COUNT && !status; k++) {
        if (!out[k]) continue;
        f[k] = strcmp(out[k], "-") ? fopen(out[k], "w") : stdout;
        if (!f[k]) {
            fprintf(stderr, "ddptop export: %s %s: %s\n", out_flag[k], out[k], strerror(errno));
            status = 2;
            break;
        }
        struct stat st;
        regular[k] = f[k] != stdout && fstat(fileno(f[k]), &st) == 0 && S_ISREG(st.st_mode);
    }
    for (int k = 0; k < OUT__COUNT && !status; k++) {
        if (!f[k]) continue;
        int rc = k == OUT_TRACE   ? export_chrome_trace(rec, in, f[k], err, sizeof err)
                 : k == OUT_JSONL ? export_jsonl(rec, f[k], err, sizeof err)
                                  : export_csv(rec, f[k], err, sizeof err);
        if (rc) {
            fprintf(stderr, "ddptop export: %s: %s\n", out[k], err);
            status = 1;
        }
    }
    for (int k = 0; k < OUT__COUNT; k++) {
        if (!f[k] || f[k] == stdout) continue;
        if (fclose(f[k]) && !status) {
            fprintf(stderr, "ddptop export: %s: %s\n", out[k], strerror(errno));
            status = 1;
        }
        /* A half-written file would only mislead (a device or a pipe is
         * not ours to remove). */
        if (status && regular[k]) unlink(out[k]);
    }
    recording_free(&rec);
    return status;
}
