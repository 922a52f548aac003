/* pipeline.h — the running pipeline's shared types, and the calls one pipeline file makes into
 * another (prefix pl_; hidden like the rest of the library, which is built with
 * -fvisibility=hidden). Only src/pipeline/ includes it.
 *
 * DESIGN
 * The pipeline: plan -> I/O engine -> decode pool -> copy -> consumer.
 * Threads: the I/O engine's threads (io_uring or pread), `decode_threads` decode threads, and
 * the consumer (the caller of rf_loader_next); with decode_schedule BALANCE, or MANUAL with
 * hw_decode_percent, also the engines' opener (schedule.c), which takes no lock and only
 * calls the backend's engine_open. One mutex `mu` guards the dispatch cursor, the
 * staging arena, the task ring, the decode queue and the slot states; per-sample work (reading,
 * decoding, resizing) happens outside it.
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
 *     slot[i]'s field rows, fields.c), frees the staging span (the
 *     arena tail advances in dispatch order over finished tasks), and when it was the batch's
 *     last sample submits the copy and marks the slot READY (submit.c).
 *  4. rf_loader_next() (consumer.c) waits for slot (deliver_seq % depth) to be READY with the
 *     expected seq, leases it; rf_loader_release() returns it (after the backend says the host
 *     memory may be overwritten) and wakes the dispatcher.
 * Order is decided by the plan alone, so thread counts and timing never change the batches.
 * Errors on any thread are sticky: the first is kept and every later rf_loader_next returns it.
 *
 * Variations on that flow, each kept to its own helpers:
 *  - token windows (raw path, loaders/tokens.c): read straight into the slot, no arena and no
 *    decode; done() counts the sample in and the last one publishes the slot;
 *  - folder datasets keep files closed: take() opens each file for its read, done() closes it;
 *  - skip mode (on_error = SKIP, skip.c): a failed sample leaves a hole that a replacement
 *    cursor, walking the rank's share from its end, fills in (batch, index) order; the forward
 *    cursor runs in phases so replacements never depend on timing (docs/reliability.md);
 *  - after take() and outside the lock, page-cache residency is checked and upcoming spans are
 *    hinted into the cache (warm.c); O_DIRECT reads use aligned spans of the arena;
 *  - GPU decode (gpu_place.c): a decode thread places a packet or pixels in the slot's stage;
 *    the consumer checks the kernels' verdicts before it hands the batch out (late verdicts:
 *    gpu.late). In skip mode those verdicts go to the skip policy (late_locked, mu held, after
 *    the backend's sync without it); a batch with holes goes from LEASED back to FILLING with
 *    one pending sample per hole, its replacements are decoded on the CPU (slot.gpu.refill),
 *    the last one publishes it again, and the consumer waits for it and checks it again. On
 *    the device layout (the CUDA backend, or the host with the test hook gpu_device_layout)
 *    the consumer first compacts the holes' bytes out of the packed stage (compact_refill,
 *    mu held: the one memmove under mu, on a batch with bad samples only, so the
 *    replacements' placements come after it), and the refilled batch is submitted whole
 *    again (pl_slot_finish returns the first device batch to the pool first);
 *  - a loader used after fork() in a child answers RF_EFORK and touches nothing.
 *
 * LOCK ORDER
 * There is one lock, `mu`. Nothing in the pipeline takes another lock while holding it, and
 * no thread holds another lock while taking it: the I/O engines call take() and done() with
 * none of their own held (their mutex only guards their start handshake). One exception, in
 * that order only: pl_cache_has (dispatch, under mu) takes the shard cache's mutex
 * (io/remote_cache.c) to queue a shard's fill; the fill thread never takes mu.
 * Three condition variables, each waited on with mu:
 *  - cv_io: the I/O threads in take() wait for a FREE slot, a task or arena space (in skip
 *    mode also for the outcomes a phase or epoch boundary needs). Signalled when a slot is
 *    released (one I/O thread; one that took as much as it asked for signals the next:
 *    pl_io_take). Broadcast when the task tail advances (task_finish_locked) and the
 *    dispatcher waits for that room (d_room), in skip mode when a sample fails, when the
 *    output the walk waits at gets its outcome or late verdict while a drain or a hole waits
 *    behind it (walk_may_move_locked), and when a sample that failed on its decode thread
 *    gets its late verdict, on an error (pl_fail_locked) and on stop.
 *  - cv_dec: the decode threads wait for the decode queue. Signalled once per queued task by
 *    done(); broadcast on an error and on stop.
 *  - cv_out (CLOCK_MONOTONIC, for next_timeout_ms): the consumer in rf_loader_next waits for
 *    its batch to be READY or BAD, or for an error. Broadcast when a slot is published or
 *    marked BAD, on an error and on stop.
 * With mu held, code reads and writes the cursors, the arena, the task ring and decode queue,
 * the slot states and the skip bookkeeping, formats messages (and fstat()s a file whose read
 * failed), and calls the plan (rf_plan_*), the token window and rf_pc_direct_span/fd, which
 * neither block nor lock. It never calls the backend (submit, release, sync, stats: without
 * mu, in submit.c, consumer.c, gpu_place.c and stats.c), the I/O engine (start, stop, stats;
 * the engine calls take() and done(), which take mu themselves), a decoder, rf_pc_check or
 * rf_pc_warm, a test hook, the user's rf_config.sample_hook (decode_pool.c calls it on the
 * decode thread, like the decoder), or open()/close() of per-read descriptors. Functions named
 * *_locked, and every pl_policy entry but setup, must be called with mu held.
 * Without mu: slot.pending counts a batch's samples down (the thread that takes it to 0
 * publishes the slot, pl_slot_finish); the statistics counters and the GPU placement's
 * slot.gpu claims (gpu_place.h) are atomics (task.finished is one too, but only touched with
 * mu held); the consumer's cursor (c_*, ep, stopped, wait_ns, delivered) belongs to the
 * consumer's thread; cfg, ds, the ring and the tables are written at create (or with every
 * thread stopped, in pl_pipeline_start_placed) and only read while threads run.
 *
 * MEMORY ORDERING
 * mu orders everything written under it: the cursors, the arena, the task ring, the decode
 * queue, slot state, seq and bad, the skip bookkeeping and the sticky error. It also hands
 * each task from take() to done() to a decode thread, so the bytes a read wrote reach the
 * decoder through it, and a published slot's rows reach the consumer through the state
 * written under it.
 * The atomics carry only what moves outside mu, each with its order and reason where it is
 * declared: slot.pending is the one hand-over: each sample's fetch_sub is a release of the row,
 * label, field rows and GPU-placement entries it wrote (and of slot.bad, which a failed sample
 * writes under mu but pl_slot_finish reads without it), and the one that reaches 0 acquires them
 * all before pl_slot_finish submits the batch (acq_rel); the slot state it then writes under mu
 * hands the batch to the consumer. Every other atomic is relaxed: the GPU placement's slot.gpu
 * claims (their atomicity alone keeps claims apart; the bytes are published by pending),
 * task.finished (only touched with mu held) and the statistics counters (read for rf_stats
 * only). No atomic keeps seq_cst: no code relies on a single order across two atomic variables.
 * Debug builds (without NDEBUG: the default RelWithDebInfo build; Release adds -DNDEBUG) assert
 * these invariants: slot state before each transition, the cursors and ring bounds, and that
 * a *_locked function's caller holds mu (pl_lock records the holder, PL_ASSERT_LOCKED checks
 * it; in Release both compile to nothing more than the lock itself).
 *
 * FILES, in dependency order: each calls only files before it, and the error policy through
 * the table create installed:
 *   state.c (errors, fork and stop checks, messages naming a sample, the token window)
 *   -> fields.c (extra fields: the list, the slots' rows, a sample's copy)
 *   -> schedule.c (the decode scheduler: mode, engines' opener, a sample's route, the
 *      consumer's controller step)
 *   -> gpu_place.c (GPU-decode sizing, slot arrays and reset, placement, convert desc, checks)
 *   -> submit.c (a full slot to the backend, published; release) -> warm.c (page cache)
 *   -> dispatch.c (the forward cursor, take/done, the end of a task, the fail policy)
 *   -> skip.c (the skip policy) -> decode_pool.c (decode threads)
 *   -> run.c (start and stop of the threads)
 *   -> config.c (defaults) -> ring.c (ring, arena, tables, NUMA placement)
 *   -> consumer.c (next, release, set_epoch, stop, state) -> stats.c
 *   -> create.c (open, plan, backend and I/O choice, resume, create, destroy).
 * The dispatch cursor never names skip.c: it calls ld->policy, and skip.c uses only what
 * dispatch.c exports below. A decode thread hands each sample it is through with to
 * pl_task_end. */
#ifndef RF_PIPELINE_H
#define RF_PIPELINE_H

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "backend/backend.h"
#include "backend/convert.h"
#include "backend/hostmem.h"
#include "base/numa.h"
#include "decode/decode.h"
#include "io/io.h"
#include "io/pagecache.h"
#include "loaders/dataset.h"
#include "loaders/tar.h"
#include "pipeline/gpu_place.h"
#include "pipeline/schedule.h"
#include "pipeline/testing.h"
#include "plan/plan.h"

/* prefetch_depth's AUTO with the GPU paths (gpu_decode, hw_decode_percent, BALANCE): batches
 * in flight on the copy streams, and more */
#define PL_DEPTH_GPU 8u

/* Extra fields (rf_config.fields, fields.c): the loader's copy of the list, split into names,
 * and the row offsets every slot shares (row i at i x max_field_bytes). Written at create. */
typedef struct pl_fields {
    uint32_t n;
    const char *names[RF_FIELDS_MAX]; /* into list */
    char *given, *list;               /* the list as given (reported), and split in place */
    uint64_t *offsets;                /* batch entries */
} pl_fields;

/* A slot's field rows: field f's row i is data[(f x batch + i) x max_field_bytes ...] with
 * lengths[f x batch + i] bytes, written by sample i's decode thread; tab is the rf_field
 * table the batch points at. */
typedef struct pl_field_slot {
    uint8_t *data;
    uint32_t *lengths;
    rf_field *tab;
} pl_field_slot;

/* SLOT_BAD: fail mode, every sample is in and one of them failed (slot.bad); nothing was
 * submitted, and the consumer turns it into the sticky error when it reaches the batch. */
enum slot_state { SLOT_FREE, SLOT_FILLING, SLOT_READY, SLOT_LEASED, SLOT_BAD };

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
    pl_gpu_slot gpu;          /* the GPU decode's state: gpu_place.h */
    uint64_t *ids, *positions;
    uint8_t *padding;
    const char **keys;
    /* Skip mode: samples that failed at the batch's positions (counted with the hole they
     * left, under mu), and the real samples of the batch's epoch on this rank: what the
     * consumer adds to the per-epoch counts when it is handed the batch. */
    uint64_t skipped, skipped_by[RF_SKIP_REASONS];
    uint64_t epoch_total;
    rf_devbatch dev;
    rf_batch batch;
    pl_field_slot fields;     /* extra fields' rows (fields.c) */
} slot;

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

enum task_phase { TASK_READING, TASK_QUEUED, TASK_DECODING };

#define SKIP_FATAL 0xff

/* Counts of one epoch as the consumer saw it (rf_stats.counted_epoch and epoch_*). Written
 * by the consumer only: from the batches it was handed, each carrying the skips of its own
 * positions, so a skip of a later batch (already prefetched, maybe of the next epoch) is
 * never in them. */
typedef struct epoch_counts {
    uint64_t epoch, delivered, skipped, skipped_by[RF_SKIP_REASONS], total;
    uint32_t final;
} epoch_counts;

struct rf_loader {
    rf_config cfg;
    char **patterns;
    char *label_json_path;         /* the copy cfg.label_json_path points at (or NULL) */
    char *image_exts; /* the loader's copy of cfg.image_exts, which points at it */
    char *cache_dir;  /* the loader's copy of cfg.cache_dir (or NULL) */
    struct rf_rcache *rcache; /* the shard cache of remote shards (io/remote_cache.h), or NULL */
    char cache_why[96];       /* why there is no cache though cache_dir is set, or "" */
    rf_dataset ds;
    rf_plan plan;
    struct pl_mix *mix;    /* mixing's inputs (mix.c) */
    rf_transform tf;
    rf_decode_limits limits;
    uint64_t stage_bytes;  /* one sample as decoded or read (uint8 NHWC image, raw tokens) */
    uint64_t stride;       /* slot bytes per sample: stage_bytes, or more for GPU packets */
    uint64_t out_bytes;    /* one sample as the consumer sees it */
    rf_convert_desc conv;  /* per-batch conversion (count-dependent fields set per batch) */
    int host_convert;      /* host backend converts per sample on the CPU */
    uint32_t out_dtype;
    int tokens;            /* RF_SOURCE_TOKENS: samples are windows computed on the fly
                              (loaders/tokens.c; the window table is ds.tok_first) */
    uint32_t batch, depth, ntasks;
    int depth_auto;         /* prefetch_depth was AUTO: the schedule resolved at create sets it */
    const rf_backend_ops *bops;
    rf_backend *backend;
    const rf_io_ops *iops;
    rf_io_engine *io;
    rf_io_params iop;
    rf_io_source src;
    char io_why[160];
    struct rf_remote *remote; /* the client of remote shards (io/remote.h), NULL for files */

    uint8_t *ring;         /* all slots' images + labels, one allocation */
    size_t ring_bytes;
    int pinned;
    slot *slots;

    uint8_t *arena;        /* staging for reads */
    uint64_t arena_bytes;
    uint64_t arena_head, arena_tail; /* virtual positions (monotonic) */
    task *tasks;
    uint64_t task_head, task_tail;   /* dispatch seq of next new task / oldest live task */
    uint32_t *decq;        /* decode queue of task ring indices, capacity ntasks */
    uint64_t decq_head, decq_tail;

    pthread_mutex_t mu;
    pthread_cond_t cv_io, cv_dec, cv_out;
    int stop;
    pthread_t *decoders;
    uint32_t ndecoders;
    rf_decoder **decs;
    int running;

    /* dispatcher cursor */
    uint64_t d_seq, d_epoch, d_k; /* batch seq, its epoch, batch index in epoch */
    uint32_t d_j, d_count;        /* next sample in the batch, batch size */
    uint64_t d_epochs_left;       /* 0 = forever */
    int d_done;
    /* 1: the dispatcher's last try stopped for room in the task ring or the arena, which a
     * finished task gives back: only then does one wake the I/O threads (task_finish_locked).
     * Set where the room is found missing (pl_tasks_full_locked, arena_alloc_locked). Every
     * finished task woke them, also while they waited for the next batch's slot, which only a
     * release frees, or for the skip walk (skip.c wakes them itself when it can move): on the
     * H200 a training run had 4x the context switches of the CPU schedule's (its four I/O
     * threads, against one), preempting the loop's threads. */
    int d_room;

    /* consumer cursor */
    uint64_t c_seq, c_epoch, c_k, c_base, c_batches;
    uint64_t c_epochs_done;
    int c_done;
    uint32_t leased;

    rf_err err;          /* sticky worker error */
    rf_err last;         /* detail for rf_last_error */

    /* Statistics: relaxed, counted by the threads and read only for rf_stats, which orders
     * them with nothing else (a snapshot may be a sample behind). */
    _Atomic uint64_t decode_ns, copy_ns, decoded, dct_scaled, region_decoded;
    /* Delivered samples libjpeg recovered from something in (pl_count_recovered) */
    _Atomic uint64_t recovered, recovered_kind[RF_RECOVERED_KINDS];
    pl_gpu gpu;            /* the GPU decode's state: gpu_place.h */
    uint64_t wait_ns, delivered, batches_out, created_ns;
    uint64_t io_ns_prev, io_reads_prev, io_retries_prev, io_bytes_prev;
    /* Bytes read from storage (rf_stats.storage_read_bytes): by create's thread while it opened
     * the shards, and by the I/O threads of engines already stopped. */
    uint64_t storage_create, io_storage_prev;
    uint64_t remote_create_requests, remote_create_bytes; /* rf_stats': the remote client's
                                     counts when create's dataset was open, before any read */
    int storage_on;         /* rf_stats.storage_measured */
    char storage_why[128];

    /* Memory hierarchy (docs/tuning.md): page cache, ring pages, NUMA placement. */
    rf_pagecache *pc;
    rf_ringmem rmem;
    int warm_on;
    uint64_t warm_epoch, warm_pos, warm_ahead; /* warm cursor: plan position, bytes ahead */
    int numa_node;
    uint32_t numa_nodes;
    uint64_t host_allocs0; /* backend pinned allocations when create finished */
    char mem_why[192];

    /* Error policy (skip.c and docs/reliability.md). */
    int skip;               /* on_error == RF_ON_ERROR_SKIP */
    uint8_t *skst;          /* skip mode: status of every slot position (depth * batch) */
    uint64_t sk_seq0;       /* batch seq of batch 0 of the dispatcher's epoch */
    uint64_t sk_R, sk_P;    /* real (non-padding) and all outputs of this rank's epoch */
    uint64_t sk_L, sk_rtop; /* phase end (forward limit); replacements are taken below rtop */
    uint64_t sk_a;          /* lowest output that is not final */
    uint64_t sk_fwd_run, sk_rep_run; /* consecutive failures of the two cursors */
    int sk_met, sk_epoch_wait, sk_waiting;
    struct skip_item *skq;  /* replacement / blank tasks waiting for a task and arena space */
    uint64_t skq_head, skq_tail;
    uint32_t skq_cap;
    /* The failure of each slot position (depth * batch), for the consecutive-skips message:
     * the hole's own, whatever failed after it before the walk reached it (prefetched
     * batches, late verdicts). */
    rf_err *sk_errs;
    uint64_t skipped, skipped_by[RF_SKIP_REASONS];
    epoch_counts ep;        /* rf_stats.epoch_*: the consumer's, for its current epoch */
    rf_test_hooks hooks;    /* src/pipeline/testing.h: injected faults (tests only; zero otherwise) */

    int stopped;            /* rf_loader_stop was called: no more batches */
    int cancelled;          /* rf_loader_cancel was called (any thread; under mu): a waiting
                               rf_loader_next returns RF_ECLOSED, and so does every later one */

    /* fork(): the process that created the loader. Its threads, io_uring rings and CUDA
     * context exist only there, so every call from another process (a fork() child holding a
     * copy of the handle) returns RF_EFORK instead of waiting on threads that do not exist. */
    pid_t pid;

    /* The error policy the dispatch cursor calls (pl_policy_fail or pl_policy_skip), chosen
     * at create from on_error; appended here so the members above keep their order. */
    const struct pl_policy *policy;

    /* Debug builds: the thread holding mu (mu_held 0: none), written by pl_lock/pl_unlock and
     * the waits with mu held, so the holder reads it race-free (PL_ASSERT_LOCKED). Always
     * present, so the layout does not depend on NDEBUG. */
    pthread_t mu_owner;
    int mu_held;

    pl_fields fields;       /* rf_config.fields, parsed at create (fields.c) */

    pl_sched sched;         /* the decode scheduler (schedule.c) */
};

/* mu, taken and released through these so debug builds know its holder. Release (NDEBUG)
 * builds compile them to the bare pthread calls. */
static inline void pl_mu_own(rf_loader *ld)
{
#ifndef NDEBUG
    ld->mu_owner = pthread_self();
    ld->mu_held = 1;
#else
    (void)ld;
#endif
}

static inline void pl_mu_disown(rf_loader *ld)
{
#ifndef NDEBUG
    ld->mu_held = 0;
#else
    (void)ld;
#endif
}

static inline void pl_lock(rf_loader *ld)
{
    pthread_mutex_lock(&ld->mu);
    pl_mu_own(ld);
}

static inline void pl_unlock(rf_loader *ld)
{
    pl_mu_disown(ld);
    pthread_mutex_unlock(&ld->mu);
}

/* pthread_cond_wait on cv with mu, which another thread may hold meanwhile. */
static inline void pl_wait(rf_loader *ld, pthread_cond_t *cv)
{
    pl_mu_disown(ld);
    pthread_cond_wait(cv, &ld->mu);
    pl_mu_own(ld);
}

static inline int pl_timedwait(rf_loader *ld, pthread_cond_t *cv, const struct timespec *end)
{
    pl_mu_disown(ld);
    int rc = pthread_cond_timedwait(cv, &ld->mu, end);
    pl_mu_own(ld);
    return rc;
}

/* The calling thread holds mu (debug builds; see pl_lock). */
#define PL_ASSERT_LOCKED(ld) \
    assert((ld)->mu_held && pthread_equal((ld)->mu_owner, pthread_self()))

/* One read of a task: sample bytes from a file span into the slot's stage or the arena. */
typedef struct sample_read {
    uint64_t off, end; /* end: the virtual arena position after the span (task.arena_end) */
    uint32_t file, len, skip, need;
    uint8_t *dst;
} sample_read;

#define WARM_HINTS_MAX 32 /* fadvise calls per take(); contiguous spans merge into one */
typedef struct warm_hint {
    uint32_t file;
    uint64_t off, len;
} warm_hint;

/* What run.c hands a decode thread it starts. */
typedef struct decoder_arg {
    rf_loader *ld;
    rf_decoder *dec;
} decoder_arg;

/* The error policy: what the dispatch cursor does with the outcome of each sample.
 * pl_policy_fail (dispatch.c, on_error = FAIL) keeps the lowest failed index of each batch for
 * the consumer to raise; pl_policy_skip (skip.c, on_error = SKIP) fills holes with
 * replacements. Every entry but setup is called with mu held. */
typedef struct pl_policy {
    /* create (ring sizes known): allocate the policy's bookkeeping. */
    int (*setup)(rf_loader *ld, rf_err *err);
    /* The dispatcher planned a new epoch; its batch 0 is d_seq. */
    void (*epoch_locked)(rf_loader *ld);
    /* The forward cursor passed the epoch's last batch: plan the next epoch, or wait. */
    void (*epoch_end_locked)(rf_loader *ld);
    /* Before forward output (d_k, d_j): 1 when the policy handled the call (*out: a task, or
     * NULL when blocked), 0 when the cursor dispatches that output as usual. */
    int (*dispatch_locked)(rf_loader *ld, task **out);
    /* Slot `si` opens for the dispatcher's batch. */
    void (*slot_open_locked)(rf_loader *ld, uint32_t si);
    /* Task t's sample is in. */
    void (*ok_locked)(rf_loader *ld, const task *t);
    /* Task t's sample failed with a data error (reason: enum rf_skip_reason). Returns 1 when
     * the sample still counts its slot down (fail mode: the batch completes, then fails). */
    int (*failed_locked)(rf_loader *ld, const task *t, int reason, int code, const char *msg);
    /* Skip mode with late verdicts (rf_loader.gpu.late): the consumer's verdict on position
     * (si, index) of a batch it checked (code 0: good; else a hole under reason, as
     * failed_locked). Returns 1 for a hole the policy fills. The fail policy never gets one:
     * pl_gpu_check raises a bad verdict as the batch's error. */
    int (*late_locked)(rf_loader *ld, uint32_t si, uint32_t index, int reason, int code,
                       const char *msg);
} pl_policy;

/* state.c */
/* The shard cache (cache.c; remote shards with cfg.cache_dir, else these do nothing): open
 * it at create after the dataset, the descriptor of a shard's cached copy for a read (-1:
 * read the URL; called under mu), let fills start once the first batch is handed out, its
 * counters, and close it after the engine stopped. */
int pl_cache_setup(rf_loader *ld, rf_err *err);
int pl_cache_has(rf_loader *ld, uint32_t file);
/* The cache of remote shards, opened with their client before the dataset (cache.c). */
int pl_cache_open(rf_loader *ld, rf_err *err);
void pl_cache_go(rf_loader *ld);
void pl_cache_stats(const rf_loader *ld, rf_stats *st);
void pl_cache_close(rf_loader *ld);
void pl_fail_locked(rf_loader *ld, int code, const char *msg);
void pl_fail(rf_loader *ld, int code, const char *msg);
void pl_slot_bad_locked(slot *s, uint32_t index, int code, const char *msg);
int pl_set_last(rf_loader *ld, const rf_err *e);
int pl_forked(const rf_loader *ld);
int pl_fork_error(const rf_loader *ld);
int pl_stopped_error(rf_loader *ld);
/* RF_ECLOSED after rf_loader_cancel, with its detail text. */
int pl_cancelled_error(rf_loader *ld);
int pl_alloc_refused(rf_loader *ld, const char *what, size_t bytes);
/* A delivered sample libjpeg recovered from `mask` in (1 << enum rf_recovered each; 0:
 * nothing): rf_stats.recovered and recovered_by_kind. */
void pl_count_recovered(rf_loader *ld, uint32_t mask);
__attribute__((format(printf, 2, 3))) void pl_mem_why(rf_loader *ld, const char *fmt, ...);
void pl_describe_task(const rf_loader *ld, const task *t, char *buf, size_t n);
void pl_describe_member(const rf_loader *ld, const rf_sample *sm, uint32_t hdr, char *buf,
                        size_t n);
void pl_token_window(const rf_loader *ld, uint64_t id, uint64_t epoch, uint32_t *file,
                     uint64_t *off);

/* fields.c */
int pl_fields_setup(rf_loader *ld, rf_err *err);
int pl_fields_alloc(rf_loader *ld, rf_err *err);
void pl_fields_free(rf_loader *ld);
void pl_fields_empty(const rf_loader *ld, slot *s, uint32_t index);
int pl_fields_copy(const rf_loader *ld, slot *s, uint32_t index, const rf_sample *sm,
                   const uint8_t *span, const rf_tar_span_member *found, int *why, rf_err *e);
void pl_fields_batch(const rf_loader *ld, const slot *s, rf_batch *b);

/* schedule.c */
int pl_sched_choose(rf_loader *ld, rf_err *err);
void pl_sched_start(rf_loader *ld);
void pl_sched_stop(rf_loader *ld);
int pl_sched_route(rf_loader *ld, uint64_t aug_seed);
void pl_sched_batch(rf_loader *ld, slot *s, uint64_t wait_ns);

/* submit.c */
void pl_slot_finish(rf_loader *ld, slot *s);
int pl_backend_release(rf_loader *ld, slot *s, void *stream, rf_err *e);

/* warm.c */
int pl_warm_plan_locked(rf_loader *ld, warm_hint *h);
void pl_after_take(rf_loader *ld, rf_io_req **reqs, int n, const warm_hint *h, int nh);

/* dispatch.c: the cursor (for the policies), the engine's callbacks (for create.c) and the
 * end of a task (for the decode threads) */
extern const pl_policy pl_policy_fail;
uint64_t pl_plan_real(const rf_plan *p);
/* mix.c: the patterns expanded and opened source by source (create's open), the plan
 * switched to weighted mixing when a mixing setting asks for it (after rf_plan_init), and
 * their memory. */
/* A tar sample's label rule: the loader's, or its source's (rf_config.source_labels). */
typedef struct pl_label_rule {
    uint32_t source;       /* enum rf_label_source */
    const char *json_path; /* RF_LABEL_JSON: the label's path */
    const char *ext;       /* the label member's extension (rf_label_ext) */
} pl_label_rule;
struct pl_mix;
pl_label_rule pl_mix_label_rule(const struct pl_mix *m, uint64_t sample_id);
int pl_mix_expand(struct pl_mix **out, rf_config *c, const rf_remote_ops *remote,
                  char ***paths, uint32_t *npaths, rf_err *err);
int pl_mix_open(struct pl_mix *m, const rf_config *c, rf_dataset *ds, char *const *paths,
                uint32_t npaths, rf_err *err);
int pl_mix_setup(struct pl_mix *m, rf_config *c, const rf_dataset *ds, rf_plan *plan,
                 rf_err *err);
void pl_mix_free(struct pl_mix *m);
void pl_plan_next_epoch_locked(rf_loader *ld);
int pl_sample_read_locked(rf_loader *ld, const slot *s, uint32_t row, uint64_t id,
                          sample_read *r);
void pl_task_set_read(rf_loader *ld, task *t, const sample_read *r);
int pl_tasks_full_locked(rf_loader *ld);
slot *pl_dispatch_slot_locked(rf_loader *ld);
void pl_slot_open_locked(rf_loader *ld, slot *s);
void pl_dispatch_advance_locked(rf_loader *ld);
int pl_io_take(void *ctx, rf_io_req **reqs, int max, int block);
void pl_io_done(void *ctx, rf_io_req *req);
void pl_task_end(rf_loader *ld, task *t, int failed, int rc, const rf_err *e);

/* skip.c */
extern const pl_policy pl_policy_skip;

/* decode_pool.c */
void *pl_decoder_main(void *arg);

/* run.c */
void pl_threads_stop(rf_loader *ld);
void pl_slots_return(rf_loader *ld, int keep_leased);
void pl_pipeline_stop(rf_loader *ld);
int pl_pipeline_start_placed(rf_loader *ld, uint64_t epoch, uint64_t base, rf_err *err);

/* config.c */
int pl_apply_defaults(rf_config *c, rf_err *err);
void pl_setup_output(rf_loader *ld);

/* ring.c */
int pl_mem_setup(rf_loader *ld, rf_err *err);
int pl_alloc_ring_placed(rf_loader *ld, rf_err *err);

/* consumer.c */
void pl_resume_point(const rf_loader *ld, uint64_t *epoch, uint64_t *consumed);

#endif
