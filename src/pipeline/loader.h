/* loader.h — struct rf_loader: the running pipeline as the composition of its stages, each
 * defined and initialised where it lives and reading at create the settings it owns. Only the
 * files that work on the whole loader include it: create.c (which wires the stages), run.c
 * (which starts and stops their threads), consumer.c and stats.c (the public calls), config.c
 * (the effective config). Every other pipeline file works on its own stage and the
 * neighbours it was given, through their headers.
 *
 * DESIGN
 * The pipeline: plan -> I/O engine -> decode pool -> copy -> consumer.
 * Threads: the I/O engine's threads (io_uring or pread), `decode_threads` decode threads, and
 * the consumer (the caller of rf_loader_next); with GPU decode whose verdicts come late or
 * whose scheduler acts on the consumer's handouts, the GPU decode stage's thread
 * (gpu_stage.c); with decode_schedule BALANCE, or MANUAL with hw_decode_percent, also the
 * engines' opener (gpu_schedule.c), which takes no lock and only calls the backend's
 * engine_open. One mutex `mu` (state.h, with the lock order and the
 * memory orders) guards the dispatch cursor, the staging arena, the task ring, the decode
 * queue and the slot states; per-sample work (reading, decoding, resizing) happens outside it.
 *
 * Flow, one direction:
 *  1. take() (I/O thread, dispatch.c pl_io_take) walks the plan in order: for the next batch it
 *     claims ring slot seq % depth (must be FREE: this is the backpressure), then for each
 *     sample it claims a task (a ring of `ntasks` in dispatch order) and a staging span of the
 *     arena, and emits a read request for the sample's byte span.
 *  2. done() (I/O thread, dispatch.c pl_io_done) queues the task for decode, or records the
 *     error.
 *  3. A decode thread (decode_pool.c) locates the image, label and extra fields in the span,
 *     decodes/crops/resizes straight into slot[i] of the batch (copying the fields into
 *     slot[i]'s field rows, fields.c), frees the staging span (the arena tail advances in
 *     dispatch order over finished tasks), and when it was the batch's last sample submits the
 *     copy and marks the slot READY (submit.c).
 *  4. rf_loader_next() (consumer.c) waits for slot (seq % depth) to be READY with the expected
 *     seq, leases it, and tells the stages that follow its pace; rf_loader_release() returns
 *     it (after the backend says the host memory may be overwritten) and wakes the
 *     dispatcher.
 * Order is decided by the plan alone, so thread counts and timing never change the batches.
 * Errors on any thread are sticky: the first is kept and every later rf_loader_next returns it.
 *
 * Variations on that flow, each kept to its own stage:
 *  - token windows (raw path, loaders/tokens.c): read straight into the slot, no arena and no
 *    decode; done() counts the sample in and the last one publishes the slot;
 *  - folder datasets keep files closed: take() opens each file for its read, done() closes it;
 *  - skip mode (on_error = SKIP, skip.c): a failed sample leaves a hole that a replacement
 *    cursor, walking the rank's share from its end, fills in (batch, index) order; the forward
 *    cursor runs in phases so replacements never depend on timing (docs/reliability.md);
 *  - after take() and outside the lock, page-cache residency is checked and upcoming spans are
 *    hinted into the cache (warm.c); O_DIRECT reads use aligned spans of the arena;
 *  - GPU decode (gpu_decode.h): a decode thread places a packet or pixels in the slot's stage;
 *    a batch with late verdicts is submitted CHECKING, and the GPU decode stage's thread checks
 *    it (pl_gpu_check, the lowest batch first) and publishes it READY. In skip mode those
 *    verdicts go to the skip policy (late_locked, mu held, after the backend's sync without
 *    it); a batch with holes goes back to FILLING with one pending sample per hole, its
 *    replacements are decoded on the CPU (slot.gpu.refill), the last one submits it again, and
 *    it is checked again. On the device layout (the CUDA backend, or the host with the test
 *    hook gpu_device_layout) the holes' bytes are first compacted out of the packed stage
 *    (compact_refill, mu held: the one memmove under mu, on a batch with bad samples only, so
 *    the replacements' placements come after it), and the refilled batch is submitted whole
 *    again (pl_slot_finish returns the first device batch to the pool first);
 *  - a loader used after fork() in a child answers RF_EFORK and touches nothing.
 *
 * FILES, in dependency order: each calls only files before it, and the error policy through
 * the table create installed:
 *   state.c (the core: lock, errors, fork and stop checks, messages naming a sample, the token
 *   window) -> ring.c (the ring, its slots, the memory hierarchy) -> fields.c (extra fields) ->
 *   warm.c (page cache) -> cache.c (remote shards and their cache) -> schedule.c (the scheduler's
 *   controller) -> gpu_schedule.c (the scheduler: mode, route, opener, measurements) -> gpu_place.c
 *   (GPU decode: sizing, slot arrays and reset, placement) -> gpu_verdict.c (checks, emulation,
 *   refills) -> gpu_stage.c (the stage's thread: checks and handouts) -> submit.c (a full slot to
 *   the backend, published; release) -> dispatch.c (the forward cursor, take/done, the decode
 *   queue, the end of a task, the fail policy) -> skip.c (the skip policy) -> decode_pool.c (decode
 *   threads) -> config.c (defaults) -> run.c (start and stop of the threads) -> consumer.c (next,
 *   release, set_epoch, stop, state) -> stats.c -> create.c (open, plan, backend and I/O choice,
 *   resume, the stages wired, create, destroy).
 * The I/O stage (io/io_stage.h) and the decode settings (decode/decode_setup.h) live in their
 * own folders. The dispatch cursor never names skip.c: it calls its policy, and skip.c uses
 * only what dispatch.h exports. A decode thread hands each sample it is through with to
 * pl_task_end. */
#ifndef RF_PL_LOADER_H
#define RF_PL_LOADER_H

#include <stdint.h>

#include "decode/decode_setup.h"
#include "io/io_stage.h"
#include "loaders/dataset.h"
#include "pipeline/cache.h"
#include "pipeline/counters.h"
#include "pipeline/decode_pool.h"
#include "pipeline/dispatch.h"
#include "pipeline/fields.h"
#include "pipeline/gpu_decode.h"
#include "pipeline/mix.h"
#include "pipeline/ring.h"
#include "pipeline/skip.h"
#include "pipeline/slot.h"
#include "pipeline/state.h"
#include "pipeline/submit.h"
#include "plan/plan.h"

/* Counts of one epoch as the consumer saw it (rf_stats.counted_epoch and epoch_*). Written
 * by the consumer only: from the batches it was handed, each carrying the skips of its own
 * positions, so a skip of a later batch (already prefetched, maybe of the next epoch) is
 * never in them. */
typedef struct epoch_counts {
    uint64_t epoch, delivered, skipped, skipped_by[RF_SKIP_REASONS], total;
    uint32_t final;
} epoch_counts;

/* The consumer (consumer.c): its cursor and counts belong to its thread; cancelled is
 * written under mu by any thread. */
typedef struct pl_consumer {
    uint64_t seq, epoch, k, base, batches;
    uint64_t epochs_done;
    int done;
    uint32_t leased;
    epoch_counts ep;        /* rf_stats.epoch_*: for its current epoch */
    int stopped;            /* rf_loader_stop was called: no more batches */
    int cancelled;          /* rf_loader_cancel was called (any thread; under mu): a waiting
                               rf_loader_next returns RF_ECLOSED, and so does every later one */
    uint64_t wait_ns, delivered, batches_out;
    /* The settings it reads (rf_config). */
    uint64_t epochs;        /* 0: forever */
    uint32_t timeout_ms;    /* next_timeout_ms */
    int device_index;
} pl_consumer;

/* The caller's strings the loader keeps (its config points at these copies). */
typedef struct pl_copies {
    char **patterns;
    char *label_json_path, *image_exts, *cache_dir;
    char **paths; /* the patterns expanded, URLs with their query (sidecars beside them) */
    uint32_t npaths;
} pl_copies;

struct rf_loader {
    pl_core core;            /* the lock, the stop flag, the sticky error, the hooks */
    rf_config cfg;           /* the resolved config, as rf_loader_config reports it; create
                                reads it, the stages copied what they read */
    pl_copies copies;
    rf_dataset ds;
    rf_plan plan;
    pl_mix mix;              /* the sources and mixing's inputs (mix.c) */
    rf_decode_setup decode;  /* the decode stage's settings */
    pl_backend backend;
    pl_ring ring;
    pl_mem mem;
    pl_remote remote;        /* remote shards: the client and the shard cache */
    rf_io_stage io;
    pl_dispatch d;           /* the plan's cursor, the arena, the task ring, the decode queue */
    pl_skip skip;
    pl_fields fields;
    pl_pool pool;            /* the CPU decode stage */
    pl_gpu gpu;              /* the GPU decode stage and its scheduler */
    pl_submit submit;        /* the copy stage */
    pl_consumer c;
    pl_counters counters;
    int running;             /* the pipeline's threads run (run.c) */
};

/* config.c: the caller's config resolved and checked, in place. */
int pl_apply_defaults(rf_config *c, rf_err *err);

#endif
