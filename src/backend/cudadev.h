/* cudadev.h — the CUDA backend's shared helpers (cudadev_cuda.c, CUDA builds only): CUDA errors
 * as RF_ECUDA, and whether a requested device is usable. Below copy_cuda.c, copy_naive_cuda.c
 * and nvjpg_cuda.c, which include nothing of each other's but nvjpg.h. */
#ifndef RF_CUDADEV_H
#define RF_CUDADEV_H

#include "base/common.h"

#ifdef RINGFEED_HAVE_CUDA
/* RF_ENODEV unless device_index names a usable CUDA device (message says what there is). */
int rf_cuda_device_check(int device_index, rf_err *err);
/* RF_ECUDA with "what: <cudaGetErrorString> (<cudaGetErrorName>)"; cuda_error is a
 * cudaError_t. */
int rf_cuda_seterr(rf_err *err, int cuda_error, const char *what);
#endif

#endif
