/* slot.h — the types a batch travels in: a slot of the ring, a task (one sample's read and
 * decode), and the backend a finished slot goes to. Types only. */
#ifndef RF_PL_SLOT_H
#define RF_PL_SLOT_H

#include <stdatomic.h>
#include <stdint.h>

#include "backend/backend.h"
#include "base/common.h"
#include "io/io.h"
#include "pipeline/gpu_slot.h"
#include "ringfeed.h"

/* A slot goes FREE -> FILLING -> READY -> LEASED -> FREE; CHECKING (GPU verdicts to check,
 * gpu_stage.c) sits between FILLING and READY, BAD is fail mode's failed batch (nothing
 * submitted). The transitions: docs/architecture.md "The ring". */
enum slot_state { SLOT_FREE, SLOT_FILLING, SLOT_READY, SLOT_LEASED, SLOT_BAD, SLOT_CHECKING };

/* A slot's field rows (rf_config.fields, fields.h): field f's row i is data[(f x batch + i) x
 * max_field_bytes ...] with lengths[f x batch + i] bytes, written by sample i's decode thread;
 * tab is the rf_field table the batch points at. */
typedef struct pl_field_slot {
    uint8_t *data;
    uint32_t *lengths;
    rf_field *tab;
} pl_field_slot;

typedef struct slot {
    int state;
    uint64_t seq;             /* global batch number (across epochs) */
    /* Samples not yet in. Stored (relaxed) under mu when the slot opens, before any of its
     * tasks is handed out through mu; counted down outside mu with acq_rel: the release
     * publishes the sample's row, label, field rows, gpu.* entries and slot.bad, and the
     * acquire of the decrement to 0 (pl_slot_finish's caller) sees every sample's before the
     * submit. Read relaxed for the stall message only. */
    _Atomic uint32_t pending;
    /* Fail mode: the failure of the lowest sample index in the batch (code 0: none). Kept per
     * batch and raised in batch order, so the error names the first bad sample the consumer
     * would have met whatever the thread timing, and every batch before it is delivered. */
    rf_err bad;
    uint32_t bad_index;
    uint8_t *stage;           /* batch_size * stage_bytes: what decode/reads write (pinned) */
    uint8_t *out;             /* host backend with a conversion: batch_size * out_bytes */
    int32_t *labels;          /* batch_size, pinned (copied to the device) */
    pl_gpu_slot gpu;          /* the GPU decode's state: gpu_slot.h */
    uint64_t *ids, *positions;
    uint8_t *padding;
    const char **keys;
    /* batch_size x 4: each sample's crop box (rf_batch.crop_boxes); with multi_crop one such
     * block per view, view k's at boxes + k x batch_size x 4 (rf_view.crop_boxes) */
    int32_t *boxes;
    uint8_t *flips;           /* batch_size (per view with multi_crop): flipped or not */
    rf_view *views;           /* multi_crop: rf_batch.views, one per view */
    float *places;            /* batch_size x 4: scale and pad of each (rf_batch.letterbox);
                               * with views one such block per view */
    uint32_t *sizes;          /* batch_size x 2: each image's height, width (rf_batch.sizes) */
    uint64_t *offsets;        /* batch_size: each sample's first element (fixed at create) */
    uint8_t *mhot;            /* multi_label: batch_size x num_classes (rf_batch.label_multihot) */
    int32_t *mlist;           /* or batch_size x max_labels, -1 padded (rf_batch.label_list) */
    uint32_t *mcounts;        /* batch_size: ids or classes per sample (rf_batch.label_counts) */
    /* Boxes and keypoints (boxes.c; NULL when off): rf_batch.boxes, box_classes, box_counts,
     * points, point_counts. */
    /* With multi_crop each holds one block per view, view k's after views 0..k-1's (rf_view's
     * pointers), as boxes and flips do. */
    float *bx;                /* batch_size x max_boxes x 4 */
    int32_t *bcls;            /* batch_size x max_boxes */
    uint32_t *bn;             /* batch_size */
    float *pts;               /* batch_size x max_points x 3 */
    uint32_t *pn;             /* batch_size */
    /* rf_config.mask: batch_size x mask_bytes (rf_batch.masks); with multi_crop view k's
     * block of batch_size masks at its view's size after views 0..k-1's (masks.c) */
    uint8_t *masks;
    /* Skip mode: samples that failed at the batch's positions (counted with the hole they
     * left, under mu), and the real samples of the batch's epoch on this rank: what the
     * consumer adds to the per-epoch counts when it is handed the batch. */
    uint64_t skipped, skipped_by[RF_SKIP_REASONS];
    uint64_t epoch_total;
    rf_devbatch dev;
    rf_batch batch;
    pl_field_slot fields;     /* extra fields' rows (fields.c) */
} slot;

enum task_phase { TASK_READING, TASK_QUEUED, TASK_DECODING };

typedef struct task {
    rf_io_req req;
    uint64_t seq;        /* dispatch order: task ring index is seq % ntasks */
    uint64_t sample_id;
    uint64_t aug_seed;
    uint64_t arena_end;  /* virtual arena position after this task's span */
    uint32_t file;       /* for messages */
    int raw;             /* tokens: read straight into the slot, no decode */
    int own_fd;          /* >= 0: opened for this read (folder datasets), closed after it */
    int open_errno;      /* the open of own_fd failed with this errno */
    uint32_t skip;       /* O_DIRECT: the sample starts this far into the aligned read */
    uint32_t slot, index;
    _Atomic int finished; /* relaxed: read and written only with mu held (mu orders it) */
    uint8_t rep;         /* skip mode: a replacement candidate (see skip.c) */
    uint8_t padout;      /* skip mode: a padding output (failures are not counted) */
    uint8_t blank;       /* skip mode: no read; the position becomes a blank padding sample */
    uint8_t why;         /* enum rf_skip_reason of a failed decode; SKIP_FATAL: not skippable */
    uint8_t phase;       /* enum task_phase, under mu: what a timed-out rf_loader_next names */
} task;

#define SKIP_FATAL 0xff

/* Where finished batches go (backend/backend.h): the ops chosen at create and the backend
 * they made. */
typedef struct pl_backend {
    const rf_backend_ops *ops;
    rf_backend *b;
} pl_backend;

#endif
