/* backend.h — where finished batches go: the host backend (the pinned slot is the batch) or
 * the CUDA backend (async copy into a stream-ordered device pool, one event per batch). Only
 * the *_cuda.c and .cu files include cuda_runtime.h; the rest of ringfeed sees this table.
 *
 * backend/ includes base/ and decode/ (packets are built from the CPU decoder's header and
 * plans), nothing of io/, plan/, loaders/ or pipeline/. The CUDA files depend one way:
 * copy_cuda.c -> nvjpg_cuda.c -> cudadev_cuda.c, copy_naive_cuda.c -> cudadev_cuda.c. */
#ifndef RF_BACKEND_H
#define RF_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "backend/gpujpeg.h"
#include "base/common.h"

typedef struct rf_backend rf_backend;

/* Per-batch device-side state, filled by submit() and consumed by release(). */
typedef struct rf_devbatch {
    void *data;          /* device copy of the images (NULL on host) */
    void *labels;        /* device copy of the labels */
    void *event;         /* recorded after both copies */
    uint64_t bytes;      /* bytes allocated at data */
} rf_devbatch;

/* What the device must do to the staged bytes of a batch before the consumer sees them. */
enum rf_conv_kind { RF_CONV_NONE = 0, RF_CONV_IMAGES = 1, RF_CONV_TOKENS = 2 };
typedef struct rf_convert_desc {
    uint32_t kind;          /* enum rf_conv_kind */
    uint32_t h, w;          /* IMAGES: staged NHWC uint8 of h x w x 3 per sample */
    uint32_t dtype, layout; /* output element type and layout */
    uint32_t token_bytes;   /* TOKENS: staged bytes per token */
    float mean[3], std[3];
    uint64_t elements;      /* TOKENS: tokens in the batch */
    uint64_t out_bytes;     /* bytes of the converted output for the batch */
    rf_gj_batch gj;         /* GPU decode, before any conversion: gpujpeg.h */
} rf_convert_desc;

typedef struct rf_backend_stats {
    uint64_t pool_reserved_bytes, pool_used_bytes;
    uint64_t device_allocs_after_create; /* cudaMalloc/cudaHostAlloc calls after create */
    /* Callers zero the struct first. */
    uint64_t host_allocs;       /* pinned host allocations and registrations, since create */
} rf_backend_stats;

typedef struct rf_backend_ops {
    const char *name;
    uint32_t device_kind; /* RF_DEVICE_HOST or RF_DEVICE_CUDA */
    int (*create)(int device_index, uint32_t slots, rf_backend **out, rf_err *err);
    void (*destroy)(rf_backend *b);
    /* Page-aligned host memory for the ring; *pinned says whether it is page-locked. */
    void *(*host_alloc)(rf_backend *b, size_t bytes, int *pinned);
    void (*host_free)(rf_backend *b, void *p, size_t bytes);
    /* Enqueue the copy of a finished slot (staged bytes, then labels) and, unless conv->kind is
     * NONE, the conversion into the output; called from decode or I/O threads, concurrently for
     * different slots. The host backend does nothing (the loader converts on the CPU). */
    int (*submit)(rf_backend *b, uint32_t slot, const void *staged, size_t staged_bytes,
                  const int32_t *labels, uint32_t count, const rf_convert_desc *conv,
                  rf_devbatch *out, rf_err *err);
    /* The consumer is done with the batch (device work ordered on `stream`); block until the
     * host slot may be overwritten (its copy completed). */
    int (*release)(rf_backend *b, rf_devbatch *db, void *stream, rf_err *err);
    int (*wait)(void *event, void *stream);
    /* Block until the event's work is done; a failure says why in why (the CUDA error's name
     * and text: a kernel's fault is reported here, on the next call that waits). */
    int (*sync)(void *event, char *why, size_t cap);
    void (*stats)(rf_backend *b, rf_backend_stats *st);
    /* ---- memory hierarchy (hostmem.c, base/numa.c, docs/tuning.md) ---- */
    /* Page-lock memory the caller mapped (cudaHostRegister) / undo it. NULL: cannot pin. */
    int (*host_register)(rf_backend *b, void *p, size_t bytes);
    void (*host_unregister)(rf_backend *b, void *p);
    /* NUMA node of the device (from sysfs), -1 when unknown or no device. */
    int (*numa_node)(rf_backend *b);
    /* Grow the device pool at create to what `batches` batches in flight need (out_bytes and
     * count labels each, plus temp_bytes per copy stream), so steady state never grows it. */
    int (*reserve)(rf_backend *b, uint32_t batches, size_t out_bytes, uint32_t count,
                   size_t temp_bytes, rf_err *err);
    /* Return pool memory above keep_bytes to the driver (cudaMemPoolTrimTo). Not for the hot
     * loop: the next batches grow the pool again. */
    int (*trim)(rf_backend *b, uint64_t keep_bytes, rf_err *err);
    /* Open the GPU's hardware JPEG decoders for batches of up to max_batch samples. NULL: none
     * (the host backend decodes engine packets on the CPU). */
    int (*engine_open)(rf_backend *b, uint32_t max_batch, rf_err *err);
    /* engine_open's cheap part, run by create so a missing libnvjpeg is create's error while the
     * open itself runs beside the first batches: RF_ENODEV saying why not. NULL exactly when
     * engine_open is. */
    int (*engine_load)(rf_err *err);
    /* Replace sample `index` of a finished device batch with `pixels` (pixel_bytes long: the
     * output itself without a conversion, else NHWC uint8), converted as conv says; returns
     * when written. For a sample whose GPU decode the CPU redid (src/pipeline/gpu_verdict.c).
     * NULL on the host backend, where the pinned slot is the batch. */
    int (*patch)(rf_backend *b, rf_devbatch *db, uint32_t index, const uint8_t *pixels,
                 size_t pixel_bytes, const rf_convert_desc *conv, uint64_t out_bytes,
                 rf_err *err);
} rf_backend_ops;

extern const rf_backend_ops rf_backend_host;
#ifdef RINGFEED_HAVE_CUDA
extern const rf_backend_ops rf_backend_cuda;
/* The --naive baseline (copy_naive_cuda.c). */
extern const rf_backend_ops rf_backend_cuda_naive;
#endif
/* Number of usable CUDA devices (0 when built without CUDA or no driver/GPU). */
int rf_backend_cuda_count(void); /* copy_host.c without CUDA, cudadev_cuda.c with it */
/* The same count, and in msg one sentence saying why there is none or what there is. */
int rf_backend_cuda_status(char *msg, size_t len);

#endif
