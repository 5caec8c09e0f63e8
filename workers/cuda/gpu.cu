/* gpu.cu — CUDA devices as the rest of the worker sees them. See gpu.h.
 *
 * Owns: device queries, the version line, and GpuStage (pinned host buffer,
 * its own non-blocking copy stream and an event). Any thread; each call
 * that touches a device makes it current on the calling thread first
 * (cudaSetDevice is per thread: a communication thread starts on device 0).
 */
#include "cuda/gpu.h"

#include <cuda_runtime.h>

#include <stdio.h>
#include <stdlib.h>

#include "cuda/cuda_check.cuh"

/* nvcc's list of the virtual architectures this file was built for, e.g.
 * "750,900" (sm_90 code, compute_75 PTX; mk/cuda.mk). */
#define GPU_STR_(...) #__VA_ARGS__
#define GPU_STR(...)  GPU_STR_(__VA_ARGS__)
#ifdef __CUDA_ARCH_LIST__
#define GPU_ARCH_LIST GPU_STR(__CUDA_ARCH_LIST__)
#else
#define GPU_ARCH_LIST "?"
#endif

extern "C" int gpu_compiled(void) { return 1; }
extern "C" const char *gpu_missing(void) { return ""; }

extern "C" int gpu_count(int *count, char *err, size_t errlen)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n < 1) {
        /* No driver, no device, or a driver older than the runtime: name it. */
        char why[160];
        CC_ERR("no usable CUDA GPU (cudaGetDeviceCount: %s): use --device cpu", cc_no_gpu_reason(e, why, sizeof why));
        return -1;
    }
    *count = n;
    return 0;
}

extern "C" int gpu_use(int device, char *err, size_t errlen)
{
    CUDA_TRY(cudaSetDevice(device));
    return 0;
}

extern "C" int gpu_describe(int device, char *buf, size_t n, char *err, size_t errlen)
{
    cudaDeviceProp p;
    CUDA_TRY(cudaGetDeviceProperties(&p, device));
    snprintf(buf, n, "%s, %.1f GiB, sm_%d%d, pci %04x:%02x:%02x.0", p.name,
             (double)p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0), p.major, p.minor, p.pciDomainID, p.pciBusID,
             p.pciDeviceID);
    return 0;
}

extern "C" int gpu_mem_info(int64_t *used_bytes, int64_t *total_bytes, char *err, size_t errlen)
{
    size_t free_b = 0, total_b = 0;
    CUDA_TRY(cudaMemGetInfo(&free_b, &total_b));
    if (used_bytes) *used_bytes = (int64_t)(total_b - free_b);
    if (total_bytes) *total_bytes = (int64_t)total_b;
    return 0;
}

extern "C" const char *gpu_version(void)
{
    static char line[160];
    if (line[0]) return line;
    int rt = 0, drv = 0;
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv); /* 0, not an error, when no driver is loaded */
    char d[32];
    if (drv > 0)
        snprintf(d, sizeof d, "%d.%d", drv / 1000, drv % 1000 / 10);
    else
        snprintf(d, sizeof d, "none");
    snprintf(line, sizeof line, "cuda runtime %d.%d (built with %d.%d for arch %s), driver %s", rt / 1000,
             rt % 1000 / 10, CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10, GPU_ARCH_LIST, d);
    return line;
}

struct GpuStage {
    int device;
    cudaStream_t compute; /* the caller's; not ours to destroy */
    cudaStream_t copy;    /* ours: copies do not queue behind compute kernels */
    cudaEvent_t mark;     /* "the compute stream so far", when no ready event is given */
    void *host;           /* pinned */
    size_t cap;
};

extern "C" int gpu_stage_new(GpuStage **out, void *compute_stream, char *err, size_t errlen)
{
    *out = NULL;
    GpuStage *s = (GpuStage *)calloc(1, sizeof *s);
    if (!s) {
        CC_ERR("gpu_stage_new: out of memory");
        return -1;
    }
    s->compute = (cudaStream_t)compute_stream;
    CUDA_GOTO(cudaGetDevice(&s->device));
    CUDA_GOTO(cudaStreamCreateWithFlags(&s->copy, cudaStreamNonBlocking));
    CUDA_GOTO(cudaEventCreateWithFlags(&s->mark, cudaEventDisableTiming));
    *out = s;
    return 0;
fail:
    gpu_stage_free(&s);
    return -1;
}

extern "C" void gpu_stage_free(GpuStage **ps)
{
    if (!ps || !*ps) return;
    GpuStage *s = *ps;
    cudaSetDevice(s->device);
    if (s->copy) cudaStreamSynchronize(s->copy);
    if (s->host) cudaFreeHost(s->host);
    if (s->mark) cudaEventDestroy(s->mark);
    if (s->copy) cudaStreamDestroy(s->copy);
    free(s);
    *ps = NULL;
}

static int stage_reserve(GpuStage *s, size_t bytes, char *err, size_t errlen)
{
    if (bytes <= s->cap) return 0;
    /* Grow by half again, so buckets of slowly rising sizes do not
     * reallocate pinned memory (slow: it pins pages) every time. */
    size_t cap = bytes + bytes / 2;
    if (s->host) {
        CUDA_TRY(cudaFreeHost(s->host));
        s->host = NULL;
        s->cap = 0;
    }
    CUDA_TRY(cudaMallocHost(&s->host, cap));
    s->cap = cap;
    return 0;
}

extern "C" int gpu_stage_to_host(GpuStage *s, const void *src, size_t bytes, void *ready, void **host, char *err,
                                 size_t errlen)
{
    CUDA_TRY(cudaSetDevice(s->device));
    if (stage_reserve(s, bytes, err, errlen) != 0) return -1;
    cudaEvent_t ev = (cudaEvent_t)ready;
    if (!ev) {
        CUDA_TRY(cudaEventRecord(s->mark, s->compute));
        ev = s->mark;
    }
    CUDA_TRY(cudaStreamWaitEvent(s->copy, ev, 0));
    CUDA_TRY(cudaMemcpyAsync(s->host, src, bytes, cudaMemcpyDeviceToHost, s->copy));
    CUDA_TRY(cudaStreamSynchronize(s->copy));
    *host = s->host;
    return 0;
}

extern "C" int gpu_stage_to_device(GpuStage *s, void *dst, size_t bytes, char *err, size_t errlen)
{
    if (bytes > s->cap) {
        CC_ERR("gpu_stage_to_device: %zu bytes, the stage holds %zu", bytes, s->cap);
        return -1;
    }
    CUDA_TRY(cudaSetDevice(s->device));
    CUDA_TRY(cudaMemcpyAsync(dst, s->host, bytes, cudaMemcpyHostToDevice, s->copy));
    CUDA_TRY(cudaStreamSynchronize(s->copy));
    return 0;
}
