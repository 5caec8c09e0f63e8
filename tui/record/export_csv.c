/* export_csv.c — `ddptop export --csv`: per-rank steps as CSV, rows of a
 * rank in arrival order, ranks in order. See export.h; the format in
 * docs/RECORDING.md. Main thread only.
 */
#include "record/export.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>

#include "base/err.h"
#include "base/json.h"
#include "record/export_common.h"
#include "wire/codec.h"

typedef struct {
    int rank;
    size_t order; /* arrival, to keep each rank's rows in order */
    int64_t epoch, step;
    double loss, step_ms, comm_ms;
} CsvRow;

static int csv_cmp(const void *a, const void *b)
{
    const CsvRow *x = a, *y = b;
    if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* Numbers as JSON writes them, but a diverged loss stays readable. */
static void csv_double(FILE *f, double v)
{
    if (isnan(v)) {
        fputs("nan", f);
        return;
    }
    if (isinf(v)) {
        fputs(v > 0 ? "inf" : "-inf", f);
        return;
    }
    char b[40];
    json_shortest(b, sizeof b, v);
    fputs(b, f);
}

int export_csv(const Recording *r, FILE *f, char *err, size_t errlen)
{
    CsvRow *rows = NULL;
    size_t n = 0, cap = 0;
    char derr[256];
    for (size_t i = 0; i < r->n; i++) {
        const RecEntry *e = &r->recs[i];
        if (e->src != REC_SRC_TEL && e->src != REC_SRC_CTL) continue;
        Msg m;
        if (codec_decode(e->data, e->len, &m, derr, sizeof derr) != 0) continue;
        if (m.kind == MSG_STEP && m.rank >= 0) {
            if (n == cap) {
                size_t nc = cap ? cap * 2 : 1024;
                CsvRow *nr = realloc(rows, nc * sizeof *nr);
                if (!nr) {
                    msg_done(&m);
                    free(rows);
                    return err_set(err, errlen, "out of memory");
                }
                rows = nr;
                cap = nc;
            }
            rows[n++] =
                (CsvRow){ m.rank, i, m.u.step.epoch, m.u.step.step, m.u.step.loss, m.u.step.step_ms, m.u.step.comm_ms };
        }
        msg_done(&m);
    }
    if (n) qsort(rows, n, sizeof *rows, csv_cmp);
    fputs("rank,epoch,step,loss,step_ms,comm_ms\n", f);
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "%d,%" PRId64 ",%" PRId64 ",", rows[i].rank, rows[i].epoch, rows[i].step);
        csv_double(f, rows[i].loss);
        fputc(',', f);
        csv_double(f, rows[i].step_ms);
        fputc(',', f);
        csv_double(f, rows[i].comm_ms);
        fputc('\n', f);
    }
    free(rows);
    return export_check_stream(f, "the CSV", err, errlen);
}
