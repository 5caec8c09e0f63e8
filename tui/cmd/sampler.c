/* sampler.c — `ddptop sampler --size N --world W [...]`: each rank's
 * dataset indices for an epoch, as PyTorch's DistributedSampler gives them
 * (the same sampler_indices the workers use), one line per rank.
 * Main thread.
 */
#include "cmd/cmd.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/sampler.h"

static int parse_sampler_args(int argc, char **argv, SamplerConfig *c, uint64_t *epoch, bool *help)
{
    uint64_t d;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            *help = true;
            return 0;
        }
        if (!strcmp(a, "--size")) {
            if (cmd_parse_u64(a, v, 0, 1 << 30, &d)) return 2;
            c->size = (int64_t)d;
            i++;
        } else if (!strcmp(a, "--world")) {
            if (cmd_parse_u64(a, v, 1, 1 << 16, &d)) return 2;
            c->world = (int)d;
            i++;
        } else if (!strcmp(a, "--epoch")) {
            if (cmd_parse_u64(a, v, 0, 1000000000000000ull, epoch)) return 2;
            i++;
        } else if (!strcmp(a, "--seed")) {
            /* torch seeds its generator with (seed + epoch) & 0xffffffff: every
             * bit of a large seed counts */
            if (cmd_parse_u64(a, v, 0, UINT64_MAX, &c->seed)) return 2;
            i++;
        } else if (!strcmp(a, "--no-shuffle"))
            c->shuffle = false;
        else if (!strcmp(a, "--drop-last"))
            c->drop_last = true;
        else
            return cmd_usage_error("sampler: unknown option \"%s\"", a);
    }
    if (c->size < 0) return cmd_usage_error("sampler: %s is required", "--size");
    if (c->world < 1) return cmd_usage_error("sampler: %s is required", "--world");
    return 0;
}

int cmd_sampler(int argc, char **argv)
{
    SamplerConfig c = { .size = -1, .world = 0, .rank = 0, .seed = 0, .shuffle = true, .drop_last = false };
    uint64_t epoch = 0;
    bool help = false;
    int rc = parse_sampler_args(argc, argv, &c, &epoch, &help);
    if (rc) return rc;
    if (help) {
        cmd_print_cmd_help(stdout, cmd_find("sampler"));
        return 0;
    }
    char err[256];
    if (sampler_check(&c, err, sizeof err)) {
        fprintf(stderr, "ddptop: sampler: %s\n", err);
        return 2;
    }
    int64_t n = sampler_num_samples(&c);
    int64_t *idx = malloc((size_t)(n > 0 ? n : 1) * sizeof *idx);
    if (!idx) {
        fprintf(stderr, "ddptop: sampler: out of memory\n");
        return 1;
    }
    for (int r = 0; r < c.world; r++) {
        c.rank = r;
        if (sampler_indices(&c, (int64_t)epoch, idx, err, sizeof err)) {
            fprintf(stderr, "ddptop: sampler: %s\n", err);
            free(idx);
            return 2;
        }
        printf("rank %d: ", r);
        for (int64_t k = 0; k < n; k++) printf(k ? ",%" PRId64 : "%" PRId64, idx[k]);
        putchar('\n');
    }
    free(idx);
    return 0;
}
