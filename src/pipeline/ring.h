/* ring.h — the ring and its slots (pl_ring: prefetch_depth slots of batch_size samples, one
 * allocation, pinned on CUDA) and the memory hierarchy around it (pl_mem: page cache, NUMA
 * node, rf_stats.memory_why). Made by ring.c at create; slot states are moved by others. */
#ifndef RF_PL_RING_H
#define RF_PL_RING_H

#include <stddef.h>
#include <stdint.h>

#include "backend/hostmem.h"
#include "decode/decode.h"
#include "io/pagecache.h"
#include "pipeline/slot.h"
#include "pipeline/state.h"
#include "plan/buckets.h"

typedef struct pl_ring {
    uint32_t batch, depth;
    int depth_auto;        /* prefetch_depth was AUTO: the schedule resolved at create sets it */
    int tokens;            /* RF_SOURCE_TOKENS: samples are windows computed on the fly */
    uint32_t mlabel, mlabel_width; /* rf_config.multi_label; its row's width (0: off) */
    const char *mask_ext;  /* rf_config.mask (the loader's copy); NULL: no masks */
    uint32_t mask_dtype, mask_fill; /* rf_config's, resolved */
    uint64_t mask_bytes;   /* one sample's mask (every view's with multi_crop): height x width
                            * x 1 or 4 bytes; 0: off */
    uint32_t mask_width;   /* the widest mask row: width, or the widest view's */
    uint32_t height, width, layout; /* images: the output's */
    int native;            /* crop NATIVE: each image at its own size, within H x W */
    uint64_t sample_elems; /* images: H x W x 3, the elements between samples' starts */
    /* rf_config.multi_crop (the decode stage's parse; n = 0: off): a sample's row is its
     * views one after another, each slot has a box and a flip per view and sample and an
     * rf_view per view */
    const rf_views *views;
    uint32_t nviews;
    rf_buckets buckets;    /* rf_config.size_buckets (n = 0: off): a batch's bucket sizes */
    uint32_t seq_len, token_bytes;  /* tokens: a window is seq_len + 1 tokens of token_bytes */
    uint64_t stage_bytes;  /* one sample as decoded or read (uint8 NHWC image, raw tokens) */
    uint64_t stride;       /* slot bytes per sample: stage_bytes, or more for GPU packets */
    uint64_t out_bytes;    /* one sample as the consumer sees it */
    uint32_t out_dtype;
    rf_convert_desc conv;  /* per-batch conversion (count-dependent fields set per batch) */
    int host_convert;      /* host backend converts per sample on the CPU */
    slot *slots;
    uint8_t *mem;          /* all slots' images + labels, one allocation */
    size_t bytes;
    int pinned;
    rf_ringmem rmem;
} pl_ring;

/* Memory hierarchy (docs/tuning.md): page cache, NUMA placement, what rf_stats says of them. */
typedef struct pl_mem {
    rf_pagecache *pc;
    int numa_node;
    uint32_t numa_nodes;
    uint64_t host_allocs0; /* backend pinned allocations when create finished */
    char why[192];
} pl_mem;

/* prefetch_depth's AUTO with the GPU paths (gpu_decode, hw_decode_percent, BALANCE): batches
 * in flight on the copy streams, and more */
#define PL_DEPTH_GPU 8u

/* The sizes from the resolved config: batch, depth, one sample's bytes before and after
 * conversion, and the conversion the backend runs (stride: stage_bytes until GPU decode sets
 * it). */
void pl_ring_shape(pl_ring *r, const rf_config *c, const rf_views *views);
/* The ring (stride and depth set) with `extra` bytes per slot after its labels, and the slot
 * tables; hugepages as rf_config.hugepages, naive the baseline's plain memory. A failure
 * names its bytes (core: the allocation hook; why: the hugepages sentence). */
int pl_ring_alloc(pl_ring *r, const pl_core *core, const pl_backend *be, size_t extra,
                  int hugepages, int naive, pl_mem *m, rf_err *err);
void pl_ring_free(pl_ring *r, const pl_backend *be);

/* Page-cache state (O_DIRECT descriptors, residency maps): odirect as rf_config.odirect;
 * *storage gets the bytes the O_DIRECT probe read from storage. */
int pl_mem_cache(pl_mem *m, const rf_dataset *ds, int odirect, int tokens, uint64_t *storage,
                 rf_err *err);
/* The NUMA node to place the ring and the threads on (numa: rf_config.numa). */
void pl_mem_numa(pl_mem *m, uint32_t numa, const pl_backend *be);

#endif
