/* gpu_place.h — GPU decode (rf_config.gpu_decode, hw_decode_percent) as the pipeline sees it:
 * its state in a slot (pl_gpu_slot) and in the loader (pl_gpu), one member each, and the
 * functions of gpu_place.c that every other pipeline file calls instead of touching that
 * state: sizing at create, the slot's arrays in the ring, the reset when a slot opens, a
 * sample's placement, the batch's part of the convert desc, the consumer's check. Included by
 * pipeline.h (which defines slot, task and rf_loader); nothing else includes it.
 *
 * The memory orders are the pipeline's (pipeline.h, MEMORY ORDERING): mu orders a slot's
 * reset before any placement, the placements are relaxed claims, and slot.pending's acq_rel
 * countdown publishes the bytes and totals to pl_slot_finish. */
#ifndef RF_PL_GPU_PLACE_H
#define RF_PL_GPU_PLACE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "backend/gpujpeg.h"

struct slot;
struct task;

/* GPU decode on the device, per slot: where sample i is in the stage, whether it is a packet,
 * what the kernels said about it (the three arrays are pinned, after the slot's labels).
 * Packets and decoded samples take the stage in the order they are written, from top up;
 * room is what is left once every sample not yet placed has room for its pixels. The four
 * atomics are relaxed everywhere: reset under mu when the slot opens (mu orders that before
 * any placement), then claimed by read-modify-writes whose atomicity alone keeps claims apart
 * and which publish no data; the bytes and totals reach pl_slot_finish through pending's
 * acq_rel. */
typedef struct pl_gpu_slot {
    uint64_t *offs;           /* PL_GJ_UNPLACED until the sample's bytes are placed */
    uint8_t *flags;
    int32_t *status;
    uint64_t *order;          /* the refill's compaction: placed samples by offset */
    uint8_t *emu, *emu_scratch; /* host emulation of the device (gpu.emulate): decoded batch */
    _Atomic uint64_t top;
    _Atomic int64_t room;
    _Atomic uint64_t scratch; /* device scratch the slot's packets take, RF_GJ_ALIGN units */
    _Atomic uint32_t engine;  /* engine packets in the slot (hardware decoder) */
    /* Packets of the batch (engine or kernels), counted at submit (pl_gpu_batch_desc) and
     * read by the consumer after the slot turned READY under mu: with none and no skip
     * policy, the batch has no verdict to wait for (pl_gpu_check). */
    uint32_t packets;
    /* Skip mode with late verdicts: the consumer checked the batch and it waits for the
     * replacements of its bad samples, which decode threads decode on the CPU (full scale,
     * the kernels' pixels) with their verdicts at once. Written under mu (verdicts_skip, and
     * cleared when the slot opens), which hands it to the replacements' decode threads. */
    int refill;
} pl_gpu_slot;

/* GPU decode, loader-wide: set at create (pl_gpu_choose, pl_gpu_stride), read by every thread;
 * the two counters are statistics. */
typedef struct pl_gpu {
    int on;       /* gpu_decode or hw_decode_percent: samples may become packets */
    int device;   /* ... on the CUDA backend: packets go to the device */
    /* Packets' verdicts come with the batch, after every sample of it was counted in: on the
     * device, or on the host with the test hook gpu_late_verdicts. The consumer checks them
     * (pl_gpu_check) before it hands the batch out. */
    int late;
    uint64_t cap; /* max(stage_bytes, RF_GJ_AREA) (see RF_GJ_AREA) */
    uint64_t px;  /* on the device: stage_bytes rounded to RF_GJ_ALIGN */
    /* The host backend with the test hook gpu_device_layout: the device layout, its kernels
     * emulated by the host driver when the consumer checks a batch. */
    int emulate;
    /* rf_stats.gpu_decoded, hw_decoded and gpu_plain_decoded: relaxed, counted by the decode
     * threads and read only for rf_stats, like the loader's other statistics. */
    _Atomic uint64_t decoded, hw_decoded, plain_decoded;
    /* The consumer's CPU decode of an engine packet's file whose check found a bad Huffman
     * code (pl_gpu_check): its decoder, pixels and per-sample verdicts, made at the first
     * such file and used only on the consumer's thread. */
    struct rf_decoder *redo;
    uint8_t *redo_px;
    rf_err *redo_err;
} pl_gpu;

/* A decode thread's buffers for GPU decode on the host backend: the packet is built here
 * (grown to the largest packet seen) and decoded into the slot by the kernels' host code. */
typedef struct pl_gpu_host {
    uint8_t *packet, *scratch;
    size_t cap;
} pl_gpu_host;

/* gpu.offs entry of a sample with no bytes in the stage yet (device layout). */
#define PL_GJ_UNPLACED UINT64_MAX

/* create: whether samples may become packets, and whether they go to the device (the backend
 * is chosen); the configurations GPU decode refuses. */
int pl_gpu_choose(rf_loader *ld, rf_err *err);
/* ring sizing: the GPU sizes, and the slot bytes per sample (rf_loader.stride). */
uint64_t pl_gpu_stride(rf_loader *ld);
/* ring sizing: the bytes a slot needs after its labels (0 without GPU decode on the device). */
size_t pl_gpu_ring_bytes(const rf_loader *ld);
/* ring sizing: the device pool's temporaries per copy stream (GPU decode on the device). */
size_t pl_gpu_temp_bytes(const rf_loader *ld, size_t staged, int convert);
/* ring: slot s's arrays, after its labels (GPU decode on the device). */
void pl_gpu_slot_init(const rf_loader *ld, struct slot *s);
/* dispatch: slot s opens for a batch of ld->d_count samples (mu held). */
void pl_gpu_slot_reset_locked(rf_loader *ld, struct slot *s);
/* submit: the batch's GPU-decode part of the convert desc; returns the stage bytes it took. */
size_t pl_gpu_batch_desc(rf_loader *ld, struct slot *s, rf_gj_batch *gj);
/* decode pool: sample `index` of slot s holds pixels until a packet is placed for it. */
void pl_gpu_sample_start(const rf_loader *ld, struct slot *s, uint32_t index);
/* decode pool: where a sample decoded on the CPU (a refill's replacement, a blank) writes its
 * pixels: its row on the host, bytes placed in the packed stage on the device. */
uint8_t *pl_gpu_pixels(rf_loader *ld, struct slot *s, uint32_t index);
/* consumer: the batch as the host emulation of the device decoded it (gpu.emulate). */
uint8_t *pl_gpu_emulated(const struct slot *s);
/* decode pool: one sample, a packet or pixels (see gpu_place.c). */
int pl_gpu_decode(rf_loader *ld, rf_decoder *dec, const struct task *t, struct slot *s,
                  const uint8_t *jpeg, uint32_t len, uint8_t *img, rf_decode_info *info,
                  pl_gpu_host *gh, rf_err *e);
/* consumer: wait for the batch's kernels and turn a verdict into the sample's error (fail
 * mode), or (skip mode) into a hole the skip policy fills: PL_GPU_REFILL, the slot is FILLING
 * again and the consumer waits for it as for any batch. */
#define PL_GPU_REFILL 1
int pl_gpu_check(rf_loader *ld, struct slot *s, rf_err *e);
/* decode pool: a thread's host buffers (none unless GPU decode on the host backend). */
int pl_gpu_host_alloc(rf_loader *ld, pl_gpu_host *gh);
void pl_gpu_host_free(pl_gpu_host *gh);
/* destroy: the consumer's buffers. */
void pl_gpu_free(rf_loader *ld);

#endif
