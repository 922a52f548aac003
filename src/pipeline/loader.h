/* loader.h — struct rf_loader: the running pipeline as the composition of its stages, each
 * defined and initialised where it lives and reading at create the settings it owns. Only the
 * files that work on the whole loader include it: create.c, run.c, consumer.c, stats.c and
 * config.c. Every other pipeline file works on its own stage and the neighbours it was given.
 *
 * DESIGN (the flow, the slot states and the threads: docs/architecture.md)
 * Threads: the I/O engine's, `decode_threads` decode threads, the consumer, and when needed
 * the GPU decode stage's thread (gpu_stage.c) and the engines' opener (gpu_schedule.c, which
 * takes no lock). One mutex `mu` (state.h: lock order, condition variables, memory orders)
 * guards the dispatch cursor, the arena, the task ring, the decode queue and the slot states;
 * per-sample work happens outside it. Order is decided by the plan alone, so thread counts
 * and timing never change the batches; errors are sticky (the first is kept).
 *
 * FILES, in dependency order (each calls only files before it; the error policy through the
 * table create installed): state.c -> ring.c -> fields.c -> boxes.c -> masks.c -> warm.c ->
 * cache.c -> schedule.c -> gpu_schedule.c -> gpu_place.c -> gpu_verdict.c -> gpu_stage.c ->
 * submit.c -> dispatch.c -> skip.c -> decode_pool.c -> config.c -> run.c -> consumer.c ->
 * stats.c -> create.c.
 * The dispatch cursor never names skip.c: it calls its policy, and skip.c uses only what
 * dispatch.h exports. A decode thread hands each sample it is through with to pl_task_end. */
#ifndef RF_PL_LOADER_H
#define RF_PL_LOADER_H

#include <stdint.h>

#include "decode/decode_setup.h"
#include "io/io_stage.h"
#include "loaders/dataset.h"
#include "pipeline/boxes.h"
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
    char *label_json_path, *image_exts, *cache_dir, *mask, *multi_crop, *size_buckets;
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
    pl_boxes boxes;          /* boxes and keypoints that follow the crop (boxes.c) */
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
