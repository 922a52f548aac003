/* cudadev_cuda.c — what CUDA device there is, and CUDA errors as ringfeed errors (cudadev.h).
 * CUDA builds only; copy_host.c answers rf_backend_cuda_count/status without it. */
#include <cuda_runtime.h>
#include <stdio.h>

#include "backend/backend.h"
#include "backend/cudadev.h"

int rf_cuda_seterr(rf_err *err, int e, const char *what)
{
    return rf_seterr(err, RF_ECUDA, "%s: %s (%s)", what, cudaGetErrorString((cudaError_t)e),
                     cudaGetErrorName((cudaError_t)e));
}

int rf_cuda_device_check(int device_index, rf_err *err)
{
    char why[RF_ERRMSG_MAX / 2];
    int n = rf_backend_cuda_status(why, sizeof why);
    if (n == 0)
        return rf_seterr(err, RF_ENODEV, "device_kind CUDA requested, but %s", why);
    if (device_index < 0 || device_index >= n)
        return rf_seterr(err, RF_ENODEV, "CUDA device %d requested, %d usable (%s)", device_index,
                         n, why);
    return 0;
}

int rf_backend_cuda_status(char *msg, size_t len)
{
    char tmp[2];
    if (!msg || !len)
        msg = tmp, len = sizeof tmp;
    int n = 0, drv = 0, rt = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    cudaRuntimeGetVersion(&rt);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* clear: "no device" must not stick to later calls */
        n = 0;
    }
    /* Driver version 0: no driver could be loaded (libcuda.so.1 missing); otherwise it is the
     * newest CUDA version the installed driver supports. */
    if (cudaDriverGetVersion(&drv) != cudaSuccess) {
        cudaGetLastError();
        drv = 0;
    }
    if (e == cudaSuccess && n > 0)
        snprintf(msg, len, "%d CUDA device%s (driver supports CUDA %d.%d, runtime %d.%d)", n,
                 n == 1 ? "" : "s", drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
    else if (e == cudaSuccess || e == cudaErrorNoDevice)
        snprintf(msg, len, "no CUDA device: the NVIDIA driver (CUDA %d.%d) is installed but "
                 "reports no GPU (cudaErrorNoDevice; check CUDA_VISIBLE_DEVICES and nvidia-smi)",
                 drv / 1000, drv % 1000 / 10);
    else if (e == cudaErrorInsufficientDriver && drv == 0)
        snprintf(msg, len, "no NVIDIA driver: libcuda.so.1 could not be loaded, so no GPU can be "
                 "used (cudaErrorInsufficientDriver, driver version 0; install the NVIDIA "
                 "driver)");
    else if (e == cudaErrorInsufficientDriver)
        snprintf(msg, len, "the NVIDIA driver is too old: it supports CUDA %d.%d, this runtime "
                 "needs %d.%d (cudaErrorInsufficientDriver; update the driver)",
                 drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
    else
        snprintf(msg, len, "the CUDA driver (CUDA %d.%d) failed to initialize: %s (%s)",
                 drv / 1000, drv % 1000 / 10, cudaGetErrorString(e), cudaGetErrorName(e));
    return n;
}

int rf_backend_cuda_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* clear: "no device" must not stick to later calls */
        return 0;
    }
    return n;
}
