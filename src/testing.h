/* testing.h — internal hooks for tests (not part of the public API, not exported from the
 * shared library: tests link the static library).
 *
 * Fault injection at ringfeed's own completion layer: `fault` is installed as the loader's
 * rf_io_source.fault, so rf_io_complete() calls it for every attempt of every read, from either
 * engine (io_uring CQEs and pread returns alike). It receives the request (fd, offset, len,
 * done, retries) and the attempt's raw result (bytes, or -errno) and returns the result to act
 * on: e.g. a short count, 0 (end of file), -EAGAIN / -EINTR (retried up to io_retries), -EIO
 * (persistent: follows the error policy). It runs on I/O threads, concurrently: keep any state
 * it uses thread-safe. The hook must be known before the first read, hence a create variant
 * rather than a setter (create starts reading at once); no environment variable is involved. */
#ifndef RF_TESTING_H
#define RF_TESTING_H

#include <stddef.h>

#include "io.h"
#include "ringfeed.h"

typedef int (*rf_fault_fn)(void *ctx, const rf_io_req *req, int res);

/* rf_loader_create with a fault hook (NULL: none, the same as rf_loader_create). */
int rf_loader_create_faulty(const rf_config *cfg, rf_fault_fn fault, void *ctx, rf_loader **out,
                            char *out_error, size_t error_len);

#endif
