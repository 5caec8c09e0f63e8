/* cuda_mlp_none.c — cuda_mlp.h in a worker built without nvcc (mk/cuda.mk
 * picks this file or cuda_mlp.cu). cuda_mlp_new fails and says why; no
 * CudaMlp can exist, so the other calls are never reached with one and
 * only refuse. */
#include "cuda/cuda_mlp.h"

#include <stdio.h>

#define NO_CUDA "ddptop-worker was built without CUDA (nvcc not found at build time): use --device cpu"

static int refuse(int line, char *err, size_t errlen)
{
    if (err && errlen) snprintf(err, errlen, "cuda_mlp_none.c:%d: %s", line, NO_CUDA);
    return -1;
}

int cuda_mlp_new(CudaMlp **out, const Mlp *layout, const OptimConfig *oc, int max_batch, char *err, size_t errlen)
{
    (void)layout, (void)oc, (void)max_batch;
    *out = NULL;
    return refuse(__LINE__, err, errlen);
}

int cuda_mlp_new_with(CudaMlp **out, const Mlp *layout, const OptimConfig *oc, int max_batch, const CudaMlpOptions *opt,
                      char *err, size_t errlen)
{
    (void)layout, (void)oc, (void)max_batch, (void)opt;
    *out = NULL;
    return refuse(__LINE__, err, errlen);
}

void cuda_mlp_describe(const CudaMlp *m, char *buf, size_t n)
{
    (void)m;
    if (n) snprintf(buf, n, "built without CUDA");
}

int cuda_mlp_set_bf16_grads(CudaMlp *m, const CudaMlpBf16Range *ranges, int count, float divisor, char *err,
                            size_t errlen)
{
    (void)m, (void)ranges, (void)count, (void)divisor;
    return refuse(__LINE__, err, errlen);
}

uint16_t *cuda_mlp_grads_bf16(const CudaMlp *m)
{
    (void)m;
    return NULL;
}

void cuda_mlp_free(CudaMlp **m)
{
    if (m) *m = NULL;
}

void *cuda_mlp_stream(const CudaMlp *m)
{
    (void)m;
    return NULL;
}
float *cuda_mlp_params(const CudaMlp *m)
{
    (void)m;
    return NULL;
}
float *cuda_mlp_grads(const CudaMlp *m)
{
    (void)m;
    return NULL;
}
int64_t cuda_mlp_bytes(const CudaMlp *m)
{
    (void)m;
    return 0;
}

int cuda_mlp_set_params(CudaMlp *m, const float *host, char *err, size_t errlen)
{
    (void)m, (void)host;
    return refuse(__LINE__, err, errlen);
}

int cuda_mlp_get_params(CudaMlp *m, float *host, char *err, size_t errlen)
{
    (void)m, (void)host;
    return refuse(__LINE__, err, errlen);
}

int cuda_mlp_set_optim(CudaMlp *m, const Optim *o, char *err, size_t errlen)
{
    (void)m, (void)o;
    return refuse(__LINE__, err, errlen);
}

int cuda_mlp_get_optim(CudaMlp *m, Optim *o, char *err, size_t errlen)
{
    (void)m, (void)o;
    return refuse(__LINE__, err, errlen);
}

int cuda_mlp_set_grads(CudaMlp *m, const float *host, char *err, size_t errlen)
{
    (void)m, (void)host;
    return refuse(__LINE__, err, errlen);
}

int cuda_mlp_get_grads(CudaMlp *m, float *host, char *err, size_t errlen)
{
    (void)m, (void)host;
    return refuse(__LINE__, err, errlen);
}

int cuda_mlp_host_batch(CudaMlp *m, float **x, int32_t **y, char *err, size_t errlen)
{
    (void)m;
    *x = NULL;
    *y = NULL;
    return refuse(__LINE__, err, errlen);
}

int cuda_mlp_load_batch(CudaMlp *m, const float *x, const int32_t *y, int batch, char *err, size_t errlen)
{
    (void)m, (void)x, (void)y, (void)batch;
    return refuse(__LINE__, err, errlen);
}

int cuda_mlp_upload_dataset(CudaMlp *m, const float *x, const int32_t *y, int64_t n, char *err, size_t errlen)
{
    (void)m, (void)x, (void)y, (void)n;
    return refuse(__LINE__, err, errlen);
}

int cuda_mlp_gather_batch(CudaMlp *m, const int64_t *idx, int batch, char *err, size_t errlen)
{
    (void)m, (void)idx, (void)batch;
    return refuse(__LINE__, err, errlen);
}

int cuda_mlp_write_pad(CudaMlp *m, const float *vals, int n, char *err, size_t errlen)
{
    (void)m, (void)vals, (void)n;
    return refuse(__LINE__, err, errlen);
}

int cuda_mlp_forward_backward(CudaMlp *m, float grad_scale, int accumulate, CudaMlpGradHook hook, void *hook_ctx,
                              char *err, size_t errlen)
{
    (void)m, (void)grad_scale, (void)accumulate, (void)hook, (void)hook_ctx;
    return refuse(__LINE__, err, errlen);
}

int cuda_mlp_optim_step(CudaMlp *m, double lr, char *err, size_t errlen)
{
    (void)m, (void)lr;
    return refuse(__LINE__, err, errlen);
}

int cuda_mlp_finish_step(CudaMlp *m, int64_t timeout_ms, double *loss, float *pad, int n_pad, CudaMlpTimes *times,
                         char *err, size_t errlen)
{
    (void)m, (void)timeout_ms, (void)loss, (void)pad, (void)n_pad, (void)times;
    return refuse(__LINE__, err, errlen);
}

int cuda_mlp_evaluate(CudaMlp *m, const float *x, const int32_t *y, int64_t n, int64_t *correct, double *loss_sum,
                      char *err, size_t errlen)
{
    (void)m, (void)x, (void)y, (void)n, (void)loss_sum;
    *correct = 0;
    return refuse(__LINE__, err, errlen);
}

int cuda_mlp_gemm_floor(const Mlp *layout, int batch, int reps, double *ms, double *tflops, char *err, size_t errlen)
{
    (void)layout, (void)batch, (void)reps, (void)ms, (void)tflops;
    return refuse(__LINE__, err, errlen);
}

const char *cuda_mlp_version(void) { return NULL; }
