/* cuda_check.cuh — error reporting for the .cu files (llm.c's cudaCheck,
 * nccl-tests' NCCLCHECK), with this project's rule: nothing exits, the
 * reason goes into the caller's err buffer as "file.cu:LINE: call: what"
 * and the function returns -1.
 *
 * Included by .cu files only (it includes CUDA headers). The macros expect
 * `char *err, size_t errlen` in scope.
 */
#ifndef DDPTOP_CUDA_CHECK_CUH
#define DDPTOP_CUDA_CHECK_CUH

#include <cuda_runtime.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* "workers/cuda/gpu.cu" -> "gpu.cu": messages name the file as comm_gloo.cc does. */
static inline const char *cc_base(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static inline void cc_put_err(char *err, size_t errlen, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static inline void cc_put_err(char *err, size_t errlen, const char *file, int line, const char *fmt, ...)
{
    if (!err || errlen == 0) return;
    int k = snprintf(err, errlen, "%s:%d: ", cc_base(file), line);
    if (k < 0 || (size_t)k >= errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + k, errlen - (size_t)k, fmt, ap);
    va_end(ap);
}

/* "cudaMalloc(&p, n)" -> "cudaMalloc": the call's name, not its arguments. */
static inline const char *cc_call_name(const char *call, char *buf, size_t n)
{
    size_t i = 0;
    while (call[i] && call[i] != '(' && i + 1 < n) {
        buf[i] = call[i];
        i++;
    }
    buf[i] = 0;
    return buf;
}

/* Why cudaGetDeviceCount found no GPU, in words: without any driver the
 * runtime says "driver version is insufficient", which misleads. */
static inline const char *cc_no_gpu_reason(cudaError_t e, char *buf, size_t n)
{
    int drv = 0;
    if (e == cudaSuccess)
        snprintf(buf, n, "no CUDA device");
    else if (e == cudaErrorInsufficientDriver && cudaDriverGetVersion(&drv) == cudaSuccess && drv == 0)
        snprintf(buf, n, "no NVIDIA driver loaded, %s", cudaGetErrorName(e));
    else
        snprintf(buf, n, "%s, %s", cudaGetErrorString(e), cudaGetErrorName(e));
    return buf;
}

#define CC_ERR(...) cc_put_err(err, errlen, __FILE__, __LINE__, __VA_ARGS__)

#define CC_CUDA_MSG(call, e_)                                                                            \
    do {                                                                                                 \
        char nb_[64];                                                                                    \
        cc_put_err(err, errlen, __FILE__, __LINE__, "%s: %s (%s)", cc_call_name(#call, nb_, sizeof nb_), \
                   cudaGetErrorString(e_), cudaGetErrorName(e_));                                        \
    } while (0)

/* A CUDA runtime call; on failure: the message, then `on_fail`. */
#define CUDA_OR(call, on_fail)     \
    do {                           \
        cudaError_t e_ = (call);   \
        if (e_ != cudaSuccess) {   \
            CC_CUDA_MSG(call, e_); \
            on_fail;               \
        }                          \
    } while (0)

/* On failure: message, return -1. */
#define CUDA_TRY(call) CUDA_OR(call, return -1)

/* The same, jumping to the function's `fail:` label instead. */
#define CUDA_GOTO(call) CUDA_OR(call, goto fail)

/* After a kernel launch: a bad configuration shows up here, not later. */
#define CUDA_LAUNCHED() CUDA_TRY(cudaGetLastError())

#endif
