/* export_cli.c — the `ddptop export` subcommand: its options, and the
 * outputs opened before any is written. See export.h; the renderers are
 * export_chrome.c, export_jsonl.c and export_csv.c. Main thread only.
 */
#include "record/export.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
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

/* Where an output goes. A regular file (or one not there yet) is written
 * beside itself under a temporary name and renamed over `path` only when
 * every output is complete, so a failed export leaves what was there
 * before; a device, a pipe or stdout is written in place. */
typedef struct {
    char path[PATH_MAX]; /* the file written: a symlink followed */
    char canon[PATH_MAX]; /* its directory's real path + its name: two spellings of one file compare equal */
    char tmp[PATH_MAX];   /* the temporary beside it, or "" when written in place */
    FILE *f;
} Out;

/* Resolve `arg` (not "-") into o; 0, or 2 after one line (flag names it). */
static int out_resolve(const char *flag, const char *arg, Out *o)
{
    struct stat st;
    char real[PATH_MAX];
    const char *path = arg;
    if (lstat(arg, &st) == 0 && S_ISLNK(st.st_mode) && realpath(arg, real)) path = real;
    if (strlen(path) >= sizeof o->path) {
        fprintf(stderr, "%s: %s %s: %s\n", WHO, flag, arg, strerror(ENAMETOOLONG));
        return 2;
    }
    memcpy(o->path, path, strlen(path) + 1);
    bool exists = stat(o->path, &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) {
        fprintf(stderr, "%s: %s %s: %s\n", WHO, flag, arg, strerror(EISDIR));
        return 2;
    }
    /* its directory: "." for a bare name, "/" for one at the root */
    char dir[PATH_MAX];
    const char *slash = strrchr(o->path, '/'), *base = slash ? slash + 1 : o->path;
    size_t dlen = !slash ? 0 : slash == o->path ? 1 : (size_t)(slash - o->path);
    memcpy(dir, slash ? o->path : ".", slash ? dlen : 1);
    dir[slash ? dlen : 1] = 0;
    if (!realpath(dir, real)) {
        fprintf(stderr, "%s: %s %s: %s\n", WHO, flag, arg, strerror(errno));
        return 2;
    }
    if (snprintf(o->canon, sizeof o->canon, "%s/%s", real, base) >= (int)sizeof o->canon) {
        fprintf(stderr, "%s: %s %s: %s\n", WHO, flag, arg, strerror(ENAMETOOLONG));
        return 2;
    }
    o->tmp[0] = 0;
    if (exists && !S_ISREG(st.st_mode)) return 0; /* a device or a pipe: in place */
    if (exists && access(o->path, W_OK)) {
        fprintf(stderr, "%s: %s %s: %s\n", WHO, flag, arg, strerror(errno));
        return 2;
    }
    if (snprintf(o->tmp, sizeof o->tmp, "%s/.%s.XXXXXX", real, base) >= (int)sizeof o->tmp) {
        fprintf(stderr, "%s: %s %s: %s\n", WHO, flag, arg, strerror(ENAMETOOLONG));
        return 2;
    }
    return 0;
}

/* Open o: its temporary (the mode the file has, or a new file's) or the
 * file itself. 0, or -1 with errno. */
static int out_open(Out *o)
{
    if (!o->tmp[0]) return (o->f = fopen(o->path, "w")) ? 0 : -1;
    int fd = mkstemp(o->tmp);
    if (fd < 0) {
        o->tmp[0] = 0;
        return -1;
    }
    struct stat st;
    mode_t mask = umask(0);
    umask(mask);
    mode_t mode = stat(o->path, &st) == 0 ? st.st_mode & 07777 : 0666 & ~mask;
    if (fchmod(fd, mode) || !(o->f = fdopen(fd, "w"))) {
        int e = errno;
        close(fd);
        unlink(o->tmp);
        o->tmp[0] = 0;
        errno = e;
        return -1;
    }
    return 0;
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
    Out o[OUT__COUNT];
    memset(o, 0, sizeof o);
    for (int k = 0; k < OUT__COUNT; k++) {
        if (!out[k] || !strcmp(out[k], "-")) continue;
        if (same_file(in, out[k])) return usage("%s would overwrite the recording itself", out_flag[k]);
        if (out_resolve(out_flag[k], out[k], &o[k])) return 2;
        for (int j = 0; j < k; j++)
            if (o[j].canon[0] && (!strcmp(o[j].canon, o[k].canon) || same_file(out[j], out[k])))
                return usage("%s: same output file twice", out[k]);
    }
    char err[512];
    Recording *rec = NULL;
    if (recording_load(in, &rec, err, sizeof err)) {
        fprintf(stderr, "ddptop export: %s\n", err);
        return 2;
    }
    if (!rec->complete) fprintf(stderr, "ddptop export: warning: %s: %s\n", in, rec->tail);

    /* Open every output before writing any, so a bad path costs nothing;
     * rename the temporaries into place only when every one is whole. */
    int status = 0;
    for (int k = 0; k < OUT__COUNT && !status; k++) {
        if (!out[k]) continue;
        if (!strcmp(out[k], "-"))
            o[k].f = stdout;
        else if (out_open(&o[k])) {
            fprintf(stderr, "ddptop export: %s %s: %s\n", out_flag[k], out[k], strerror(errno));
            status = 2;
        }
    }
    for (int k = 0; k < OUT__COUNT && !status; k++) {
        if (!o[k].f) continue;
        int rc = k == OUT_TRACE   ? export_chrome_trace(rec, in, o[k].f, err, sizeof err)
                 : k == OUT_JSONL ? export_jsonl(rec, o[k].f, err, sizeof err)
                                  : export_csv(rec, o[k].f, err, sizeof err);
        if (rc) {
            fprintf(stderr, "ddptop export: %s: %s\n", out[k], err);
            status = 1;
        }
    }
    for (int k = 0; k < OUT__COUNT; k++) {
        if (!o[k].f || o[k].f == stdout) continue;
        if (fclose(o[k].f) && !status) {
            fprintf(stderr, "ddptop export: %s: %s\n", out[k], strerror(errno));
            status = 1;
        }
    }
    for (int k = 0; k < OUT__COUNT; k++) {
        if (!o[k].tmp[0]) continue;
        if (!status && rename(o[k].tmp, o[k].path)) {
            fprintf(stderr, "ddptop export: %s: %s\n", out[k], strerror(errno));
            status = 1;
        }
        /* a failed export: the file keeps what it held before */
        if (status) unlink(o[k].tmp);
    }
    recording_free(&rec);
    return status;
}
