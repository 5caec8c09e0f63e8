/* comm_nccl_none.c — the nccl entry of comm.c's table in a worker built
 * without nvcc (mk/cuda.mk picks this file or comm_nccl.cu). comm_new
 * fails and says why; nothing else is reachable without a Comm. */
#include <stdio.h>

#include "comm/comm_backend.h"

static int none_create(void **impl, const CommConfig *cfg, char *err, size_t errlen)
{
    (void)cfg;
    *impl = NULL;
    snprintf(err, errlen,
             "comm_nccl_none.c:%d: ddptop-worker was built without NCCL (nvcc or nccl.h not "
             "found at build time): use --backend gloo",
             __LINE__);
    return -1;
}

static const char *none_version(void) { return NULL; }

static int none_destroy(void *impl, char *err, size_t errlen)
{
    (void)impl, (void)err, (void)errlen;
    return 0;
}

const CommOps comm_nccl_ops = {
    .name = "nccl",
    .compiled = 0,
    .device_buffers = 1,
    .create = none_create,
    .destroy = none_destroy,
    .version = none_version,
};
