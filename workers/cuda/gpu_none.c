/* gpu_none.c — gpu.h in a worker built without nvcc (mk/cuda.mk picks this
 * file or gpu.cu). Every call that would need a GPU fails and says why. */
#include "cuda/gpu.h"

#include <stdio.h>

#ifdef DDPTOP_CPU_ONLY
#define NO_CUDA "this is the CPU-only worker (cpu/ddptop-worker): the ddptop-worker beside ddptop runs on GPUs"
const char *gpu_missing(void)
{
    return "not in the CPU-only worker (cpu/ddptop-worker); the ddptop-worker beside ddptop has it";
}
#else
#define NO_CUDA "ddptop-worker was built without CUDA (nvcc not found at build time): use --device cpu"
const char *gpu_missing(void) { return "not built in (no nvcc at build time)"; }
#endif

int gpu_compiled(void) { return 0; }

int gpu_count(int *count, char *err, size_t errlen)
{
    *count = 0;
    snprintf(err, errlen, "gpu_none.c:%d: %s", __LINE__, NO_CUDA);
    return -1;
}

int gpu_use(int device, char *err, size_t errlen)
{
    (void)device;
    snprintf(err, errlen, "gpu_none.c:%d: %s", __LINE__, NO_CUDA);
    return -1;
}

int gpu_describe(int device, char *buf, size_t n, char *err, size_t errlen)
{
    (void)device;
    if (n) buf[0] = 0;
    snprintf(err, errlen, "gpu_none.c:%d: %s", __LINE__, NO_CUDA);
    return -1;
}

int gpu_mem_info(int64_t *used_bytes, int64_t *total_bytes, char *err, size_t errlen)
{
    if (used_bytes) *used_bytes = 0;
    if (total_bytes) *total_bytes = 0;
    snprintf(err, errlen, "gpu_none.c:%d: %s", __LINE__, NO_CUDA);
    return -1;
}

const char *gpu_version(void) { return NULL; }

int gpu_stage_new(GpuStage **out, void *compute_stream, char *err, size_t errlen)
{
    (void)compute_stream;
    *out = NULL;
    snprintf(err, errlen, "gpu_none.c:%d: %s", __LINE__, NO_CUDA);
    return -1;
}

void gpu_stage_free(GpuStage **s)
{
    if (s) *s = NULL;
}

int gpu_stage_to_host(GpuStage *s, const void *src, size_t bytes, void *ready, void **host, char *err, size_t errlen)
{
    (void)s, (void)src, (void)bytes, (void)ready;
    *host = NULL;
    snprintf(err, errlen, "gpu_none.c:%d: %s", __LINE__, NO_CUDA);
    return -1;
}

int gpu_stage_to_device(GpuStage *s, void *dst, size_t bytes, char *err, size_t errlen)
{
    (void)s, (void)dst, (void)bytes;
    snprintf(err, errlen, "gpu_none.c:%d: %s", __LINE__, NO_CUDA);
    return -1;
}
