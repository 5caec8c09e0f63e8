/* gpu.h — CUDA devices as the rest of the worker sees them.
 *
 * Owns: finding and naming GPUs, the memory figures for step messages,
 * version strings, and GpuStage, the pinned host buffer and copy stream
 * through which Gloo reduces device buffers (comm.c). Does not own the
 * model (cuda_mlp.h) or NCCL (comm_nccl.cu).
 *
 * Plain C face over gpu.cu; gpu_none.c stands in when the worker is built
 * without nvcc, and every call there fails with "built without CUDA".
 * Any thread: CUDA's runtime is thread-safe, and calls that touch a device
 * make it current on the calling thread first. Handles (streams, events)
 * cross this face as void *.
 */
#ifndef DDPTOP_GPU_H
#define DDPTOP_GPU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 1 in a build with CUDA (gpu.cu), 0 with gpu_none.c. */
int gpu_compiled(void);
/* Why this binary has no CUDA, for --version ("" when it has it):
 * built without nvcc, or cpu/ddptop-worker, the CPU-only twin of a CUDA
 * build (mk/cuda.mk). */
const char *gpu_missing(void);

/* Number of usable CUDA devices in *count (>= 1). Returns 0, or -1 with err
 * naming the CUDA error when there is no GPU or no driver: fast, no retries
 * (without a GPU cudaGetDeviceCount answers at once, error 35). */
int gpu_count(int *count, char *err, size_t errlen);

/* cudaSetDevice(device) on the calling thread. Returns 0 or -1 with err. */
int gpu_use(int device, char *err, size_t errlen);

/* One line about a device into buf: "NVIDIA H200, 139.8 GiB, sm_90,
 * pci 0000:3b:00.0". Returns 0 or -1 with err. */
int gpu_describe(int device, char *buf, size_t n, char *err, size_t errlen);

/* Memory of the current device as nvidia-smi counts it (cudaMemGetInfo:
 * every process's allocations): *used_bytes = total - free. Either pointer
 * may be NULL. Returns 0 or -1 with err. */
int gpu_mem_info(int64_t *used_bytes, int64_t *total_bytes, char *err, size_t errlen);

/* "cuda runtime 13.0 (built with 13.0), driver 13.0"; "driver none" when
 * no driver is loaded. NULL in a build without CUDA. Static storage. */
const char *gpu_version(void);

/* Device buffers reduced by a host-memory backend: copied to pinned host
 * memory, reduced there, copied back (what PyTorch's Gloo backend does with
 * CUDA tensors). One GpuStage per Comm; one call at a time. */
typedef struct GpuStage GpuStage;

/* On the current device; compute_stream (a cudaStream_t, NULL for the
 * legacy default stream) is the stream whose work "ready" refers to.
 * Returns 0 or -1 with err. */
int gpu_stage_new(GpuStage **out, void *compute_stream, char *err, size_t errlen);
void gpu_stage_free(GpuStage **s);

/* Wait for `ready` (a cudaEvent_t; NULL: the work queued on the compute
 * stream so far), copy `bytes` from device memory `src` into the stage's
 * pinned buffer and wait for the copy; *host points at it until the next
 * call. Returns 0 or -1 with err. */
int gpu_stage_to_host(GpuStage *s, const void *src, size_t bytes, void *ready, void **host, char *err, size_t errlen);

/* Copy the first `bytes` of the pinned buffer back to device memory `dst`
 * and wait, so anything queued afterwards on any stream sees them. */
int gpu_stage_to_device(GpuStage *s, void *dst, size_t bytes, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
