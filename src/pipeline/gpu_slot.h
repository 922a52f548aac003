/* gpu_slot.h — the GPU decode stage's part of a slot (pl_gpu_slot, a member of every slot):
 * where each sample of the batch is in the stage, whether it is a packet, what the kernels
 * said about it. Only the GPU decode stage writes it; others read the refill flag. */
#ifndef RF_PL_GPU_SLOT_H
#define RF_PL_GPU_SLOT_H

#include <stdatomic.h>
#include <stdint.h>

/* GPU decode on the device, per slot (the three arrays are pinned, after the slot's labels).
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
    /* Packets of the batch, counted at submit (pl_gpu_batch_desc, read by pl_gpu_needs_check). */
    uint32_t packets;
    /* Skip mode with late verdicts: the checked batch waits for its holes' replacements, which
     * are decoded on the CPU with their verdicts at once. Written under mu (verdicts_skip;
     * cleared when the slot opens), which hands it to the replacements' decode threads. */
    int refill;
} pl_gpu_slot;

/* gpu.offs entry of a sample with no bytes in the stage yet (device layout). */
#define PL_GJ_UNPLACED UINT64_MAX

#endif
