/* devices.c — the public device queries of ringfeed.h, in backend/, which owns the answer. */
#include "backend/backend.h"

RF_API int rf_cuda_device_count(void) { return rf_backend_cuda_count(); }

RF_API int rf_cuda_status(char *msg, size_t len) { return rf_backend_cuda_status(msg, len); }
