/* devices.c — the public device queries of ringfeed.h. They live in backend/, which owns the
 * answer (copy_cuda.c with CUDA, copy_host.c without), so that base/ includes nothing above
 * it. */
#include "backend/backend.h"

RF_API int rf_cuda_device_count(void) { return rf_backend_cuda_count(); }

RF_API int rf_cuda_status(char *msg, size_t len) { return rf_backend_cuda_status(msg, len); }
