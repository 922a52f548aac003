/* copy_naive_cuda.c — the deliberately plain CUDA backend behind rf_config.naive (bench
 * --naive): what a first GPU input pipeline does, kept so users can measure what each technique
 * of the real backend buys on their own machine.
 *
 * DESIGN: a pageable ring (every copy goes through the driver's staging buffer); per batch
 * cudaMalloc, synchronous cudaMemcpy on the legacy default stream (and the conversion, with a
 * cudaMalloc'ed temporary), cudaFree at release. No event: the batch is complete when submit
 * returns. The naive settings (prefetch_depth 1) keep one batch in flight. */
#include <cuda_runtime.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "backend/backend.h"
#include "backend/convert.h"
#include "backend/cudadev.h"

struct rf_backend {
    int dev;
    _Atomic uint64_t mallocs, used;
};

static int naive_err(rf_err *err, cudaError_t e, const char *what)
{
    return rf_cuda_seterr(err, (int)e, what);
}

static int naive_create(int device_index, uint32_t slots, rf_backend **out, rf_err *err)
{
    *out = NULL;
    int rc = rf_cuda_device_check(device_index, err);
    if (rc)
        return rc;
    cudaError_t e = cudaSetDevice(device_index);
    if (e != cudaSuccess)
        return naive_err(err, e, "cudaSetDevice");
    rf_backend *b = calloc(1, sizeof *b);
    if (!b)
        return rf_seterr(err, RF_ENOMEM, "no memory for the CUDA backend");
    b->dev = device_index;
    *out = b;
    return 0;
}

static void naive_destroy(rf_backend *b) { free(b); }

static void *naive_host_alloc(rf_backend *b, size_t bytes, int *pinned)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    *pinned = 0;
    return p == MAP_FAILED ? NULL : p;
}

static void naive_host_free(rf_backend *b, void *p, size_t bytes)
{
    if (p)
        munmap(p, bytes);
}

static int naive_submit(rf_backend *b, uint32_t slot, const void *staged, size_t staged_bytes,
                        const int32_t *labels, uint32_t count, const rf_convert_desc *conv,
                        rf_devbatch *out, rf_err *err)
{
    size_t out_bytes = conv->kind == RF_CONV_NONE ? staged_bytes : conv->out_bytes;
    size_t lab_off = (out_bytes + 255) / 256 * 256;
    size_t total = lab_off + (size_t)count * sizeof(int32_t);
    void *d = NULL, *tmp = NULL;
    cudaError_t e = cudaSetDevice(b->dev);
    if (e == cudaSuccess && (e = cudaMalloc(&d, total)) == cudaSuccess)
        atomic_fetch_add_explicit(&b->mallocs, 1, memory_order_relaxed); /* stats */
    if (e == cudaSuccess && conv->kind != RF_CONV_NONE &&
        (e = cudaMalloc(&tmp, staged_bytes)) == cudaSuccess)
        atomic_fetch_add_explicit(&b->mallocs, 1, memory_order_relaxed); /* stats */
    if (e == cudaSuccess)
        e = cudaMemcpy(tmp ? tmp : d, staged, staged_bytes, cudaMemcpyHostToDevice);
    if (e == cudaSuccess && conv->kind == RF_CONV_IMAGES)
        e = (cudaError_t)rf_cuda_convert_images(tmp, NULL, d, count, conv->h, conv->w,
                                                conv->dtype, conv->layout, conv->mean,
                                                conv->std, 0);
    else if (e == cudaSuccess && conv->kind == RF_CONV_TOKENS)
        e = (cudaError_t)rf_cuda_widen_tokens(tmp, d, conv->elements, conv->token_bytes,
                                              conv->dtype, 0);
    if (e == cudaSuccess)
        e = cudaMemcpy((char *)d + lab_off, labels, count * sizeof(int32_t),
                       cudaMemcpyHostToDevice);
    if (tmp)
        cudaFree(tmp); /* synchronizes the device: the kernel is done with it */
    if (e != cudaSuccess) {
        if (d)
            cudaFree(d);
        return naive_err(err, e, "naive batch copy");
    }
    atomic_fetch_add_explicit(&b->used, total, memory_order_relaxed); /* a stats counter */
    out->data = d;
    out->labels = (char *)d + lab_off;
    out->event = NULL;
    out->bytes = total;
    return 0;
}

static int naive_release(rf_backend *b, rf_devbatch *db, void *stream, rf_err *err)
{
    cudaError_t e = cudaSetDevice(b->dev);
    /* cudaFree waits for all device work, the consumer's stream included. */
    if (e == cudaSuccess && db->data)
        e = cudaFree(db->data);
    if (e != cudaSuccess)
        return naive_err(err, e, "cudaFree");
    atomic_fetch_sub_explicit(&b->used, db->bytes, memory_order_relaxed); /* a stats counter */
    db->data = db->labels = NULL;
    db->bytes = 0;
    return 0;
}

static int naive_wait(void *event, void *stream) { return 0; }
static int naive_sync(void *event, char *why, size_t cap) { return 0; }

static void naive_stats(rf_backend *b, rf_backend_stats *st)
{
    /* Relaxed: stats only; each counter is exact on its own, not a snapshot of all. */
    st->pool_used_bytes = st->pool_reserved_bytes =
        atomic_load_explicit(&b->used, memory_order_relaxed);
    st->device_allocs_after_create = atomic_load_explicit(&b->mallocs, memory_order_relaxed);
    st->host_allocs = 0;
}

static int naive_numa_node(rf_backend *b) { return -1; }
static int naive_reserve(rf_backend *b, uint32_t batches, size_t out_bytes, uint32_t count,
                         size_t temp_bytes, rf_err *err)
{
    return 0;
}
static int naive_trim(rf_backend *b, uint64_t keep_bytes, rf_err *err) { return 0; }

const rf_backend_ops rf_backend_cuda_naive = {
    .name = "cuda-naive",
    .device_kind = RF_DEVICE_CUDA,
    .create = naive_create,
    .destroy = naive_destroy,
    .host_alloc = naive_host_alloc,
    .host_free = naive_host_free,
    .submit = naive_submit,
    .release = naive_release,
    .wait = naive_wait,
    .sync = naive_sync,
    .stats = naive_stats,
    .numa_node = naive_numa_node,
    .reserve = naive_reserve,
    .trim = naive_trim,
};
