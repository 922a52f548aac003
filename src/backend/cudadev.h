/* cudadev.h — the CUDA backend's shared helpers (cudadev_cuda.c, built with CUDA only): turning
 * a cudaError_t into an RF_ECUDA error, and checking that a requested device is usable. Included
 * by copy_cuda.c, copy_naive_cuda.c and nvjpg_cuda.c, which include nothing of each other's
 * except nvjpg.h (copy_cuda.c opens the hardware decoder): the CUDA files' dependencies run one
 * way, copy_cuda.c -> nvjpg_cuda.c -> cudadev_cuda.c. rf_backend_cuda_count and
 * rf_backend_cuda_status are backend.h's, answered here with CUDA. */
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
