/* copy_cuda.c — the CUDA backend: finished pinned slots are copied to device memory taken from
 * a stream-ordered pool, on dedicated non-blocking streams, with one event per batch.
 *
 * Threads: submit() runs on whichever decode thread finished a batch's last sample, so several
 * run concurrently; each batch uses its own slot's event and allocation. The current device is
 * per thread, so each entry point sets it. Memory: cudaMallocFromPoolAsync on the copy stream,
 * cudaFreeAsync on the consumer's stream at release, so the pool recycles a buffer only after
 * the consumer's work on it; with the release threshold at its maximum the steady state never
 * reaches cudaMalloc. The host slot is reused only after the slot's event completed. */
#include <cuda_runtime.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/convert.h"
#include "backend/cudadev.h"
#include "backend/gpujpeg.h"
#include "base/numa.h"
#include "backend/nvjpg.h"

/* Waits on a batch sleep instead of spinning: the CPUs belong to the decode threads and the
 * training loop, and a batch is normally complete long before anyone waits for it. */
#define RF_EVENT_FLAGS (cudaEventDisableTiming | cudaEventBlockingSync)
/* Streams the batches' work goes round: up to this many batches overlap on the device. The GPU
 * decode's interval kernel fills a fraction of the GPU per batch, so it needs several
 * (docs/gpu-decode.md, "Memory"). */
#ifndef RF_COPY_STREAMS
#define RF_COPY_STREAMS 4
#endif

struct rf_backend {
    int dev;
    uint32_t slots;
    cudaStream_t streams[RF_COPY_STREAMS];
    cudaEvent_t *events;      /* one per ring slot */
    cudaMemPool_t pool;
    _Atomic uint64_t used;
    _Atomic uint64_t host_allocs;
    /* Pool growth: the most reserved memory seen, and how often a submit saw it grow. */
    _Atomic uint64_t reserved_seen;
    _Atomic uint64_t pool_growths;
    rf_nvjpg *engine; /* the hardware JPEG decoders, when the loader opened them */
};

static int cuda_err(rf_err *err, cudaError_t e, const char *what)
{
    return rf_cuda_seterr(err, (int)e, what);
}

/* The process whose CUDA context the backend's streams, events and pool belong to: the runtime
 * is unusable in a fork() child, and rf_batch_wait/synchronize get only an event. Process-wide,
 * mirroring the runtime's own state. 0: no backend yet. */
static _Atomic pid_t cuda_owner;

static int cuda_forked(void)
{
    /* Relaxed: the pid is the only data, and events reach other threads through the loader's
     * own synchronization, which orders cuda_create's store before them. */
    pid_t o = atomic_load_explicit(&cuda_owner, memory_order_relaxed);
    return o != 0 && o != getpid();
}

static void cuda_destroy(rf_backend *b)
{
    if (!b)
        return;
    cudaSetDevice(b->dev);
    for (int i = 0; i < RF_COPY_STREAMS; i++)
        if (b->streams[i])
            cudaStreamSynchronize(b->streams[i]);
    rf_nvjpg_close(b->engine); /* after its work on the streams is done */
    for (int i = 0; i < RF_COPY_STREAMS; i++)
        if (b->streams[i]) {
            cudaStreamDestroy(b->streams[i]);
        }
    if (b->events)
        for (uint32_t i = 0; i < b->slots; i++)
            if (b->events[i])
                cudaEventDestroy(b->events[i]);
    free(b->events);
    if (b->pool)
        cudaMemPoolDestroy(b->pool);
    free(b);
}

static int cuda_create(int device_index, uint32_t slots, rf_backend **out, rf_err *err)
{
    *out = NULL;
    int rc = rf_cuda_device_check(device_index, err);
    if (rc)
        return rc;
    atomic_store_explicit(&cuda_owner, getpid(), memory_order_relaxed); /* see cuda_forked */
    rf_backend *b = calloc(1, sizeof *b);
    if (!b || !(b->events = calloc(slots, sizeof *b->events))) {
        free(b);
        return rf_seterr(err, RF_ENOMEM, "no memory for the CUDA backend");
    }
    b->dev = device_index;
    b->slots = slots;
    cudaError_t e = cudaSetDevice(device_index);
    if (e != cudaSuccess)
        goto fail;
    for (int i = 0; i < RF_COPY_STREAMS; i++)
        if ((e = cudaStreamCreateWithFlags(&b->streams[i], cudaStreamNonBlocking)) != cudaSuccess)
            goto fail;
    for (uint32_t i = 0; i < slots; i++)
        if ((e = cudaEventCreateWithFlags(&b->events[i], RF_EVENT_FLAGS)) != cudaSuccess)
            goto fail;
    struct cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device_index;
    if ((e = cudaMemPoolCreate(&b->pool, &props)) != cudaSuccess)
        goto fail;
    uint64_t keep = UINT64_MAX;
    if ((e = cudaMemPoolSetAttribute(b->pool, cudaMemPoolAttrReleaseThreshold, &keep)) !=
        cudaSuccess)
        goto fail;
    *out = b;
    return 0;
fail:
    cuda_err(err, e, "CUDA backend setup");
    cuda_destroy(b);
    return RF_ECUDA;
}

static void *cuda_host_alloc(rf_backend *b, size_t bytes, int *pinned)
{
    void *p = NULL;
    cudaSetDevice(b->dev);
    /* Portable: pinned for every context, since the consumer may use another device's stream. */
    if (cudaHostAlloc(&p, bytes, cudaHostAllocPortable) != cudaSuccess) {
        cudaGetLastError();
        *pinned = 0;
        return NULL;
    }
    atomic_fetch_add_explicit(&b->host_allocs, 1, memory_order_relaxed); /* a stats counter */
    *pinned = 1;
    return p;
}

static void cuda_host_free(rf_backend *b, void *p, size_t bytes)
{
    if (p)
        cudaFreeHost(p);
}

#define RF_LABEL_ALIGN 256u

/* Count a growth of the pool's reserved memory since the last one seen. Relaxed: stats that
 * publish no other data; the CAS counts each growth once. */
static void note_pool_growth(rf_backend *b)
{
    uint64_t now = 0, seen = atomic_load_explicit(&b->reserved_seen, memory_order_relaxed);
    if (cudaMemPoolGetAttribute(b->pool, cudaMemPoolAttrReservedMemCurrent, &now) != cudaSuccess)
        return;
    while (now > seen)
        if (atomic_compare_exchange_weak_explicit(&b->reserved_seen, &seen, now,
                                                  memory_order_relaxed, memory_order_relaxed)) {
            atomic_fetch_add_explicit(&b->pool_growths, 1, memory_order_relaxed);
            break;
        }
}

/* GPU decode of the staged batch into dec, in stream order. staged is the pinned slot the
 * engine reads its files from, tmp the device copy the kernels read. */
static int gj_enqueue(rf_backend *b, cudaStream_t s, uint32_t k, const uint8_t *staged,
                      const void *tmp, uint8_t *dec, size_t staged_bytes, uint32_t count,
                      const rf_gj_batch *gj, void **scratch, rf_err *err)
{
    /* The scratch (a multiple of RF_GJ_ALIGN), then meta (8-byte offsets, then flags), then the
     * 4-byte statuses: the kernels read the offsets as uint64_t, which after an odd count of
     * statuses would be misaligned. */
    size_t sc = (size_t)gj->scratch, fl = (size_t)count * sizeof(int32_t);
    size_t offs = (size_t)count * sizeof(uint64_t);
    size_t st_at = (sc + offs + count + sizeof(int32_t) - 1) / sizeof(int32_t) * sizeof(int32_t);
    cudaError_t e = cudaMallocFromPoolAsync(scratch, st_at + fl, b->pool, s);
    if (e != cudaSuccess)
        return cuda_err(err, e, "cudaMallocFromPoolAsync");
    uint8_t *meta = (uint8_t *)*scratch + sc; /* offsets, then flags */
    int32_t *status = (int32_t *)((uint8_t *)*scratch + st_at);
    e = cudaMemcpyAsync(meta, gj->offs, offs, cudaMemcpyHostToDevice, s);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(meta + offs, gj->flags, count, cudaMemcpyHostToDevice, s);
    if (e == cudaSuccess)
        e = cudaMemsetAsync(status, 0, fl, s);
    if (e != cudaSuccess)
        return cuda_err(err, e, "enqueueing the GPU decode");
    if (gj->engine) {
        if (!b->engine)
            return rf_seterr(err, RF_EINVAL, "engine packets, but the hardware decoder is not "
                             "open");
        int rc = rf_nvjpg_decode(b->engine, k, staged, gj->offs, gj->flags, count,
                                 *scratch, sc, status, s, err);
        if (rc)
            return rc;
    }
    e = (cudaError_t)rf_cuda_gj_decode(tmp, staged_bytes, meta, dec, count, gj->rows,
                                       gj->sample_bytes, *scratch, sc, status, s);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(gj->status, status, fl, cudaMemcpyDeviceToHost, s);
    return e == cudaSuccess ? 0 : cuda_err(err, e, "enqueueing the GPU decode");
}

static int cuda_submit(rf_backend *b, uint32_t slot, const void *staged, size_t staged_bytes,
                       const int32_t *labels, uint32_t count, const rf_convert_desc *conv,
                       rf_devbatch *out, rf_err *err)
{
    cudaStream_t s = b->streams[slot % RF_COPY_STREAMS];
    int gj = conv->gj.flags && count;
    /* A batch the CPU decoded whole runs no decode kernel (it would take GPU time from the
     * training step for nothing): the conversion reads each sample at its offset in the stage,
     * or (uint8) one copy kernel puts them in order. */
    int gather = gj && !conv->gj.packets;
    size_t out_bytes = conv->kind == RF_CONV_NONE && !gj ? staged_bytes : conv->out_bytes;
    size_t lab_off = (out_bytes + RF_LABEL_ALIGN - 1) / RF_LABEL_ALIGN * RF_LABEL_ALIGN;
    size_t total = lab_off + (size_t)count * sizeof(int32_t);
    void *d = NULL, *tmp = NULL, *dec = NULL, *gjs = NULL;
    cudaError_t e = cudaSetDevice(b->dev);
    if (e == cudaSuccess)
        e = cudaMallocFromPoolAsync(&d, total, b->pool, s);
    /* A conversion or a GPU decode reads the staged bytes from a temporary device buffer, freed
     * in stream order right after the kernels so the pool recycles it; a GPU decode followed by
     * a conversion decodes into a second one. */
    if (e == cudaSuccess && (conv->kind != RF_CONV_NONE || gj))
        e = cudaMallocFromPoolAsync(&tmp, staged_bytes, b->pool, s);
    if (e == cudaSuccess && gj && !gather && conv->kind != RF_CONV_NONE)
        e = cudaMallocFromPoolAsync(&dec, (size_t)count * conv->gj.sample_bytes, b->pool, s);
    if (e == cudaSuccess && gather) /* the samples' offsets */
        e = cudaMallocFromPoolAsync(&gjs, (size_t)count * sizeof(uint64_t), b->pool, s);
    if (e != cudaSuccess)
        return cuda_err(err, e, "cudaMallocFromPoolAsync");
    e = cudaMemcpyAsync(tmp ? tmp : d, staged, staged_bytes, cudaMemcpyHostToDevice, s);
    const void *src = tmp; /* what the conversion reads */
    const uint64_t *offs = NULL; /* where it reads each image: contiguous when NULL */
    if (e == cudaSuccess && gather) {
        e = cudaMemcpyAsync(gjs, conv->gj.offs, (size_t)count * sizeof(uint64_t),
                            cudaMemcpyHostToDevice, s);
        /* no verdicts to come: the consumer reads them only after this batch is READY */
        memset(conv->gj.status, 0, (size_t)count * sizeof(int32_t));
        offs = gjs;
        if (e == cudaSuccess && conv->kind == RF_CONV_NONE)
            e = (cudaError_t)rf_cuda_gather_samples(
                tmp, offs, d, count, conv->gj.sample_bytes, s);
    } else if (e == cudaSuccess && gj) {
        int rc = gj_enqueue(b, s, slot % RF_COPY_STREAMS, staged, tmp, dec ? dec : d,
                            staged_bytes, count, &conv->gj, &gjs, err);
        if (rc)
            return rc;
        src = dec;
    }
    note_pool_growth(b);
    if (e == cudaSuccess && conv->kind == RF_CONV_IMAGES)
        e = (cudaError_t)rf_cuda_convert_images(src, offs, d, count, conv->h, conv->w,
                                                conv->dtype, conv->layout, conv->mean,
                                                conv->std, s);
    else if (e == cudaSuccess && conv->kind == RF_CONV_TOKENS)
        e = (cudaError_t)rf_cuda_widen_tokens(src, d, conv->elements, conv->token_bytes,
                                              conv->dtype, s);
    void *tmps[3] = {tmp, dec, gjs};
    for (int i = 0; i < 3 && e == cudaSuccess; i++)
        if (tmps[i])
            e = cudaFreeAsync(tmps[i], s);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync((char *)d + lab_off, labels, count * sizeof(int32_t),
                            cudaMemcpyHostToDevice, s);
    if (e == cudaSuccess)
        e = cudaEventRecord(b->events[slot], s);
    if (e != cudaSuccess)
        return cuda_err(err, e, "enqueueing the batch copy");
    atomic_fetch_add_explicit(&b->used, total, memory_order_relaxed); /* a stats counter */
    out->data = d;
    out->labels = (char *)d + lab_off;
    out->event = b->events[slot];
    out->bytes = total;
    return 0;
}

static int cuda_patch(rf_backend *b, rf_devbatch *db, uint32_t index, const uint8_t *pixels,
                      size_t n, const rf_convert_desc *conv, uint64_t out_bytes, rf_err *err)
{
    cudaStream_t s = b->streams[0];
    uint8_t *dst = (uint8_t *)db->data + (size_t)index * out_bytes;
    void *tmp = NULL;
    cudaError_t e = cudaSetDevice(b->dev);
    if (e == cudaSuccess && conv->kind == RF_CONV_IMAGES)
        e = cudaMallocFromPoolAsync(&tmp, n, b->pool, s);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(tmp ? tmp : dst, pixels, n, cudaMemcpyHostToDevice, s);
    if (e == cudaSuccess && tmp)
        e = (cudaError_t)rf_cuda_convert_images(tmp, NULL, dst, 1, conv->h, conv->w,
                                                conv->dtype, conv->layout, conv->mean,
                                                conv->std, s);
    if (tmp && e == cudaSuccess)
        e = cudaFreeAsync(tmp, s);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(s);
    return e == cudaSuccess ? 0 : cuda_err(err, e, "replacing a sample of a device batch");
}

static int cuda_release(rf_backend *b, rf_devbatch *db, void *stream, rf_err *err)
{
    cudaError_t e = cudaSetDevice(b->dev);
    if (e == cudaSuccess && db->event)
        e = cudaEventSynchronize((cudaEvent_t)db->event);
    if (e == cudaSuccess && db->data)
        e = cudaFreeAsync(db->data, (cudaStream_t)stream);
    if (e != cudaSuccess)
        return cuda_err(err, e, "releasing a batch");
    atomic_fetch_sub_explicit(&b->used, db->bytes, memory_order_relaxed); /* a stats counter */
    db->data = db->labels = NULL;
    db->bytes = 0;
    return 0;
}

static int cuda_wait(void *event, void *stream)
{
    if (!event)
        return 0;
    if (cuda_forked())
        return RF_EFORK;
    return cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)event, 0) == cudaSuccess
               ? 0
               : RF_ECUDA;
}

static int cuda_sync(void *event, char *why, size_t cap)
{
    if (!event)
        return 0;
    if (cuda_forked()) {
        snprintf(why, cap, "CUDA was initialized in the parent of this forked process");
        return RF_EFORK;
    }
    cudaError_t e = cudaEventSynchronize((cudaEvent_t)event);
    if (e == cudaSuccess)
        return 0;
    snprintf(why, cap, "%s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
    return RF_ECUDA;
}

static void cuda_stats(rf_backend *b, rf_backend_stats *st)
{
    uint64_t reserved = 0;
    cudaMemPoolGetAttribute(b->pool, cudaMemPoolAttrReservedMemCurrent, &reserved);
    st->pool_reserved_bytes = reserved;
    /* Relaxed: stats only; each counter is exact on its own, not a snapshot of all. */
    st->pool_used_bytes = atomic_load_explicit(&b->used, memory_order_relaxed);
    st->device_allocs_after_create = atomic_load_explicit(&b->pool_growths, memory_order_relaxed);
    st->host_allocs = atomic_load_explicit(&b->host_allocs, memory_order_relaxed);
}

static int cuda_host_register(rf_backend *b, void *p, size_t bytes)
{
    cudaSetDevice(b->dev);
    if (cudaHostRegister(p, bytes, cudaHostRegisterPortable) != cudaSuccess) {
        cudaGetLastError();
        return RF_ECUDA;
    }
    atomic_fetch_add_explicit(&b->host_allocs, 1, memory_order_relaxed); /* a stats counter */
    return 0;
}

static void cuda_host_unregister(rf_backend *b, void *p)
{
    cudaSetDevice(b->dev);
    if (cudaHostUnregister(p) != cudaSuccess)
        cudaGetLastError();
}

static int cuda_numa_node(rf_backend *b)
{
    char bus[32];
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, b->dev) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    return rf_numa_node_of_pci(bus);
}

/* Prime the pool with the allocations of `batches` batches in flight (and each stream's
 * temporaries), then free them: the pool keeps the memory. */
static int cuda_reserve(rf_backend *b, uint32_t batches, size_t out_bytes, uint32_t count,
                        size_t temp_bytes, rf_err *err)
{
    size_t lab_off = (out_bytes + RF_LABEL_ALIGN - 1) / RF_LABEL_ALIGN * RF_LABEL_ALIGN;
    size_t total = lab_off + (size_t)count * sizeof(int32_t);
    uint32_t n = batches + (temp_bytes ? RF_COPY_STREAMS : 0);
    void **p = calloc(n, sizeof *p);
    if (!p)
        return rf_seterr(err, RF_ENOMEM, "no memory");
    cudaStream_t s = b->streams[0];
    cudaError_t e = cudaSetDevice(b->dev);
    for (uint32_t i = 0; i < n && e == cudaSuccess; i++)
        e = cudaMallocFromPoolAsync(&p[i], i < batches ? total : temp_bytes, b->pool, s);
    for (uint32_t i = 0; i < n; i++)
        if (p[i])
            cudaFreeAsync(p[i], s);
    free(p);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(s);
    if (e != cudaSuccess) {
        /* out of device memory is an allocation failure (RF_ENOMEM); anything else is CUDA's */
        cudaGetLastError();
        size_t all = (size_t)batches * total + (temp_bytes ? RF_COPY_STREAMS * temp_bytes : 0);
        char conv[96] = "";
        if (temp_bytes)
            snprintf(conv, sizeof conv, " + %d streams x %zu bytes of temporaries",
                     RF_COPY_STREAMS, temp_bytes);
        return rf_seterr(err, e == cudaErrorMemoryAllocation ? RF_ENOMEM : RF_ECUDA,
                         "cannot reserve the %zu-byte device pool on cuda:%d (%u batches x %zu "
                         "bytes%s): %s (%s)", all, b->dev, batches, total, conv,
                         cudaGetErrorString(e), cudaGetErrorName(e));
    }
    uint64_t r = 0;
    cudaMemPoolGetAttribute(b->pool, cudaMemPoolAttrReservedMemCurrent, &r);
    atomic_store_explicit(&b->reserved_seen, r, memory_order_relaxed); /* see note_pool_growth */
    return 0;
}

static int cuda_trim(rf_backend *b, uint64_t keep_bytes, rf_err *err)
{
    cudaError_t e = cudaSetDevice(b->dev);
    if (e == cudaSuccess)
        e = cudaMemPoolTrimTo(b->pool, (size_t)RF_MIN(keep_bytes, (uint64_t)SIZE_MAX));
    if (e != cudaSuccess)
        return cuda_err(err, e, "cudaMemPoolTrimTo");
    uint64_t r = 0;
    cudaMemPoolGetAttribute(b->pool, cudaMemPoolAttrReservedMemCurrent, &r);
    /* Growth after a trim counts again; relaxed as in note_pool_growth. */
    atomic_store_explicit(&b->reserved_seen, r, memory_order_relaxed);
    return 0;
}

static int cuda_engine_open(rf_backend *b, uint32_t max_batch, rf_err *err)
{
    if (b->engine)
        return 0;
    cudaError_t e = cudaSetDevice(b->dev);
    if (e != cudaSuccess)
        return cuda_err(err, e, "cudaSetDevice");
    return rf_nvjpg_open(RF_COPY_STREAMS, max_batch, &b->engine, err);
}

const rf_backend_ops rf_backend_cuda = {
    .name = "cuda",
    .device_kind = RF_DEVICE_CUDA,
    .create = cuda_create,
    .destroy = cuda_destroy,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .submit = cuda_submit,
    .release = cuda_release,
    .wait = cuda_wait,
    .sync = cuda_sync,
    .stats = cuda_stats,
    .host_register = cuda_host_register,
    .host_unregister = cuda_host_unregister,
    .numa_node = cuda_numa_node,
    .reserve = cuda_reserve,
    .trim = cuda_trim,
    .engine_open = cuda_engine_open,
    .engine_load = rf_nvjpg_load,
    .patch = cuda_patch,
};
