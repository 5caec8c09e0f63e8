/* tool_st.c — a small safetensors helper for scenario tests.
 *
 *   tool_st write-mlp SPEC SEED OUT.safetensors
 *       an MLP's initial parameters (mlp_init + mlp_reset_params), state_dict
 *       names, metadata {"format": "pt"}
 *   tool_st dump FILE
 *       one line per tensor: name, dtype, shape, sum of its elements
 *
 * Exit 0 on success, 1 on a failure (one line on stderr), 2 on bad usage.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/model.h"
#include "ckpt/safetensors.h"

static int usage(void)
{
    fprintf(stderr, "usage: tool_st write-mlp SPEC SEED OUT.safetensors | tool_st dump FILE\n");
    return 2;
}

static int write_mlp(const char *spec, const char *seed_s, const char *out)
{
    char err[512];
    char *end;
    unsigned long long seed = strtoull(seed_s, &end, 10);
    if (*seed_s == '\0' || *end != '\0' || *seed_s == '-') {
        fprintf(stderr, "tool_st: bad seed '%s'\n", seed_s);
        return 2;
    }
    int dims[MODEL_MAX_LINEAR + 1], n;
    Mlp m;
    if (mlp_parse(spec, dims, &n, err, sizeof err) < 0 || mlp_init(&m, dims, n, 1, err, sizeof err) < 0) {
        fprintf(stderr, "tool_st: %s\n", err);
        return 1;
    }
    mlp_reset_params(&m, seed);
    StTensor t[2 * MODEL_MAX_LINEAR];
    for (int i = 0; i < m.n_tensors; i++) {
        const ModelTensor *mt = &m.tensors[i];
        memset(&t[i], 0, sizeof t[i]);
        snprintf(t[i].name, sizeof t[i].name, "%s", mt->name);
        snprintf(t[i].dtype, sizeof t[i].dtype, "F32");
        t[i].ndim = mt->ndim;
        for (int d = 0; d < mt->ndim; d++) t[i].shape[d] = mt->shape[d];
        t[i].data = m.params + mt->offset;
        t[i].nbytes = mt->numel * sizeof(float);
    }
    const char *meta[] = { "format", "pt", NULL };
    int rc = st_write(out, t, m.n_tensors, meta, err, sizeof err);
    mlp_done(&m);
    if (rc < 0) {
        fprintf(stderr, "tool_st: %s\n", err);
        return 1;
    }
    return 0;
}

static double sum_of(const StTensor *t)
{
    double s = 0;
    size_t n;
    const unsigned char *p = t->data;
    /* memcpy per element: data need not be aligned for every dtype */
#define SUM(type)                                   \
    do {                                            \
        n = t->nbytes / sizeof(type);               \
        for (size_t i = 0; i < n; i++) {            \
            type v;                                 \
            memcpy(&v, p + i * sizeof v, sizeof v); \
            s += (double)v;                         \
        }                                           \
    } while (0)
    if (strcmp(t->dtype, "F32") == 0)
        SUM(float);
    else if (strcmp(t->dtype, "F64") == 0)
        SUM(double);
    else if (strcmp(t->dtype, "I64") == 0)
        SUM(int64_t);
    else if (strcmp(t->dtype, "I32") == 0)
        SUM(int32_t);
    else if (strcmp(t->dtype, "U8") == 0)
        SUM(uint8_t);
    else
        return NAN; /* a dtype this tool does not add up */
#undef SUM
    return s;
}

static int dump(const char *path)
{
    char err[512];
    StFile *f;
    if (st_open(path, &f, err, sizeof err) < 0) {
        fprintf(stderr, "tool_st: %s\n", err);
        return 1;
    }
    for (int i = 0; i < st_count(f); i++) {
        const StTensor *t = st_tensor(f, i);
        printf("%s\t%s\t[", t->name, t->dtype);
        for (int d = 0; d < t->ndim; d++) printf(d ? ",%lld" : "%lld", (long long)t->shape[d]);
        printf("]\t%.17g\n", sum_of(t));
    }
    st_close(&f);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "write-mlp") == 0) return write_mlp(argv[2], argv[3], argv[4]);
    if (argc == 3 && strcmp(argv[1], "dump") == 0) return dump(argv[2]);
    return usage();
}
