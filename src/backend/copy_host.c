/* copy_host.c — the host backend: the ring slot (page-aligned, not page-locked) is the batch, so
 * submit() has nothing to enqueue, release() nothing to wait for, and there is no device pool.
 * It runs the same ring and ordering logic as the CUDA backend: how CI tests the pipeline. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "backend/backend.h"

struct rf_backend {
    int unused;
};

static int host_create(int device_index, uint32_t slots, rf_backend **out, rf_err *err)
{
    *out = calloc(1, sizeof **out);
    return *out ? 0 : rf_seterr(err, RF_ENOMEM, "no memory for the host backend");
}

static void host_destroy(rf_backend *b) { free(b); }

static void *host_alloc(rf_backend *b, size_t bytes, int *pinned)
{
    /* mmap gives page alignment and lets the kernel back large rings with huge pages. */
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    *pinned = 0;
    return p == MAP_FAILED ? NULL : p;
}

static void host_free(rf_backend *b, void *p, size_t bytes)
{
    if (p)
        munmap(p, bytes);
}

static int host_submit(rf_backend *b, uint32_t slot, const void *staged, size_t staged_bytes,
                       const int32_t *labels, uint32_t count, const rf_convert_desc *conv,
                       rf_devbatch *out, rf_err *err)
{
    out->data = NULL;
    out->labels = NULL;
    out->event = NULL;
    out->bytes = 0;
    return 0;
}

static int host_release(rf_backend *b, rf_devbatch *db, void *stream, rf_err *err) { return 0; }
static int host_wait(void *event, void *stream) { return 0; }
static int host_sync(void *event, char *why, size_t cap) { return 0; }
static void host_stats(rf_backend *b, rf_backend_stats *st)
{
    st->pool_reserved_bytes = st->pool_used_bytes = st->device_allocs_after_create = 0;
}

/* No device: no node to place on, no pool to reserve or trim, and nothing to pin with (the
 * host backend's ring is not page-locked, so host_register stays NULL). */
static int host_numa_node(rf_backend *b) { return -1; }
static int host_reserve(rf_backend *b, uint32_t batches, size_t out_bytes, uint32_t count,
                        size_t temp_bytes, rf_err *err)
{
    return 0;
}
static int host_trim(rf_backend *b, uint64_t keep_bytes, rf_err *err) { return 0; }

const rf_backend_ops rf_backend_host = {
    .name = "host",
    .device_kind = RF_DEVICE_HOST,
    .create = host_create,
    .destroy = host_destroy,
    .host_alloc = host_alloc,
    .host_free = host_free,
    .submit = host_submit,
    .release = host_release,
    .wait = host_wait,
    .sync = host_sync,
    .stats = host_stats,
    .numa_node = host_numa_node,
    .reserve = host_reserve,
    .trim = host_trim,
};

#ifndef RINGFEED_HAVE_CUDA
int rf_backend_cuda_count(void) { return 0; }
int rf_backend_cuda_status(char *msg, size_t len)
{
    if (msg && len)
        snprintf(msg, len, "this build of ringfeed has no CUDA backend (built without the CUDA "
                 "toolkit or with RINGFEED_CUDA=OFF)");
    return 0;
}
#endif
