/* loader.c — the pipeline: plan -> I/O engine -> decode pool -> copy -> consumer.
 *
 * DESIGN
 * Threads: the I/O engine's threads (io_uring or pread), `decode_threads` decode threads, and
 * the consumer (the caller of rf_loader_next). One mutex `mu` guards the dispatch cursor, the
 * staging arena, the task ring, the decode queue and the slot states; per-sample work (reading,
 * decoding, resizing) happens outside it.
 *
 * Flow, one direction:
 *  1. take() (I/O thread) walks the plan in order: for the next batch it claims ring slot
 *     seq % depth (must be FREE: this is the backpressure), then for each sample it claims a
 *     task (a ring of `ntasks` in dispatch order) and a staging span of the arena, and emits a
 *     read request for the sample's byte span.
 *  2. done() (I/O thread) queues the task for decode, or records the error.
 *  3. A decode thread locates the image and label in the span, decodes/crops/resizes straight
 *     into slot[i] of the batch, frees the staging span (the arena tail advances in dispatch
 *     order over finished tasks), and when it was the batch's last sample submits the copy and
 *     marks the slot READY.
 *  4. rf_loader_next() waits for slot (deliver_seq % depth) to be READY with the expected seq,
 *     leases it; rf_loader_release() returns it (after the backend says the host memory may be
 *     overwritten) and wakes the dispatcher.
 * Who wakes whom: cv_io (dispatcher waits for a FREE slot, a task or arena space), cv_dec
 * (decode threads wait for queued tasks), cv_out (consumer waits for READY or an error).
 * Order is decided by the plan alone, so thread counts and timing never change the batches.
 * Errors on any thread are sticky: the first is kept and every later rf_loader_next returns it.
 *
 * Variations on that flow, each kept to its own helpers below:
 *  - token windows (raw path): read straight into the slot, no arena and no decode; done()
 *    counts the sample in and the last one publishes the slot;
 *  - folder datasets keep files closed: take() opens each file for its read, done() closes it;
 *  - skip mode (on_error = SKIP): a failed sample leaves a hole that a replacement cursor,
 *    walking the rank's share from its end, fills in (batch, index) order; the forward cursor
 *    runs in phases so replacements never depend on timing (docs/reliability.md);
 *  - after take() and outside the lock, page-cache residency is checked and upcoming spans are
 *    hinted into the cache (`warm`); O_DIRECT reads use aligned spans of the arena;
 *  - a loader used after fork() in a child answers RF_EFORK and touches nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/api.h"
#include "backend/backend.h"
#include "backend/convert.h"
#include "loaders/dataset.h"
#include "decode/decode.h"
#include "backend/gpujpeg.h"
#include "backend/hostmem.h"
#include "io/io.h"
#include "base/numa.h"
#include "io/pagecache.h"
#include "plan/plan.h"
#include "loaders/tar.h"
#include "pipeline/testing.h"

/* SLOT_BAD: fail mode, every sample is in and one of them failed (slot.bad); nothing was
 * submitted, and the consumer turns it into the sticky error when it reaches the batch. */
enum slot_state { SLOT_FREE, SLOT_FILLING, SLOT_READY, SLOT_LEASED, SLOT_BAD };

typedef struct slot {
    int state;
    uint64_t seq;             /* global batch number (across epochs) */
    _Atomic uint32_t pending; /* samples not yet decoded */
    /* Fail mode: the failure of the lowest sample index in the batch (code 0: none). Kept per
     * batch and raised in batch order, so the error names the first bad sample the consumer
     * would have met whatever the thread timing, and every batch before it is delivered. */
    rf_err bad;
    uint32_t bad_index;
    uint8_t *stage;           /* batch_size * stage_bytes: what decode/reads write (pinned) */
    uint8_t *out;             /* host backend with a conversion: batch_size * out_bytes */
    int32_t *labels;          /* batch_size, pinned (copied to the device) */
    /* GPU decode on the device (pinned): where sample i is in the stage, whether it is a
     * packet, what the kernels said about it. Packets and decoded samples take the stage in
     * the order they are written, from gj_top up; gj_room is what is left once every sample
     * not yet placed has room for its pixels. */
    uint64_t *gj_offs;
    uint8_t *gj_flags;
    int32_t *gj_status;
    _Atomic uint64_t gj_top;
    _Atomic int64_t gj_room;
    _Atomic uint64_t gj_scratch; /* device scratch the slot's packets take, RF_GJ_ALIGN units */
    _Atomic uint32_t gj_engine;  /* engine packets in the slot (hardware decoder) */
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
    _Atomic int finished;
    uint8_t rep;         /* skip mode: a replacement candidate (see "error policy") */
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
    rf_dataset ds;
    rf_plan plan;
    rf_transform tf;
    rf_decode_limits limits;
    uint64_t stage_bytes;  /* one sample as decoded or read (uint8 NHWC image, raw tokens) */
    uint64_t stride;       /* slot bytes per sample: stage_bytes, or more for GPU packets */
    uint64_t gj_cap;       /* GPU decode: max(stage_bytes, RF_GJ_AREA) (see RF_GJ_AREA) */
    uint64_t gj_px;        /* GPU decode on the device: stage_bytes rounded to RF_GJ_ALIGN */
    uint64_t out_bytes;    /* one sample as the consumer sees it */
    rf_convert_desc conv;  /* per-batch conversion (count-dependent fields set per batch) */
    int host_convert;      /* host backend converts per sample on the CPU */
    uint32_t out_dtype;
    int tokens;            /* RF_SOURCE_TOKENS: samples are windows computed on the fly */
    uint64_t *tok_first;   /* tokens: first window id of each file (nfiles + 1 entries) */
    uint32_t batch, depth, ntasks;
    const rf_backend_ops *bops;
    rf_backend *backend;
    const rf_io_ops *iops;
    rf_io_engine *io;
    rf_io_params iop;
    rf_io_source src;
    char io_why[160];

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

    /* consumer cursor */
    uint64_t c_seq, c_epoch, c_k, c_base, c_batches;
    uint64_t c_epochs_done;
    int c_done;
    uint32_t leased;

    rf_err err;          /* sticky worker error */
    rf_err last;         /* detail for rf_last_error */

    _Atomic uint64_t decode_ns, copy_ns, decoded, dct_scaled, region_decoded, gpu_decoded;
    _Atomic uint64_t hw_decoded;
    int gj;                /* gpu_decode or hw_decode_percent: samples may become packets */
    int gj_device;         /* ... on the CUDA backend: packets go to the device */
    uint64_t wait_ns, delivered, batches_out, created_ns;
    uint64_t io_ns_prev, io_reads_prev, io_retries_prev, io_bytes_prev;
    /* Bytes read from storage (rf_stats.storage_read_bytes): by create's thread while it opened
     * the shards, and by the I/O threads of engines already stopped. */
    uint64_t storage_create, io_storage_prev;
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

    /* Error policy (see "error policy" below and docs/reliability.md). */
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
    rf_err sk_last;         /* the last sample failure (for the consecutive-skips message) */
    uint64_t skipped, skipped_by[RF_SKIP_REASONS];
    epoch_counts ep;        /* rf_stats.epoch_*: the consumer's, for its current epoch */
    rf_test_hooks hooks;    /* src/pipeline/testing.h: injected faults (tests only; zero otherwise) */

    int stopped;            /* rf_loader_stop was called: no more batches */

    /* fork(): the process that created the loader. Its threads, io_uring rings and CUDA
     * context exist only there, so every call from another process (a fork() child holding a
     * copy of the handle) returns RF_EFORK instead of waiting on threads that do not exist. */
    pid_t pid;
};

/* ---- errors --------------------------------------------------------------------------------*/

/* Record the first worker error; later ones are dropped (the first is the cause). */
static void fail_locked(rf_loader *ld, int code, const char *msg)
{
    if (ld->err.code == 0) {
        ld->err.code = code;
        snprintf(ld->err.msg, sizeof ld->err.msg, "%s", msg);
    }
    pthread_cond_broadcast(&ld->cv_out);
    pthread_cond_broadcast(&ld->cv_io);
    pthread_cond_broadcast(&ld->cv_dec);
}

static void fail(rf_loader *ld, int code, const char *msg)
{
    pthread_mutex_lock(&ld->mu);
    fail_locked(ld, code, msg);
    pthread_mutex_unlock(&ld->mu);
}

/* Fail mode: sample `index` of slot s failed (a data error: this sample's bytes, not the
 * loader). The slot keeps the lowest index; rf_loader_next raises it in batch order. */
static void slot_bad_locked(slot *s, uint32_t index, int code, const char *msg)
{
    if (s->bad.code && s->bad_index < index)
        return;
    s->bad.code = code;
    s->bad_index = index;
    snprintf(s->bad.msg, sizeof s->bad.msg, "%s", msg);
}

static int set_last(rf_loader *ld, const rf_err *e)
{
    ld->last = *e;
    return e->code;
}

/* A call from a process other than the creator (see rf_loader.pid). */
static int forked(const rf_loader *ld) { return getpid() != ld->pid; }

static int fork_error(const rf_loader *ld)
{
    rf_err e;
    e.code = RF_EFORK;
    snprintf(e.msg, sizeof e.msg, "this loader belongs to process %d, which created it; process "
             "%d (a fork() child) cannot use it: create a new loader in this process",
             (int)ld->pid, (int)getpid());
    return set_last((rf_loader *)ld, &e);
}

static int stopped_error(rf_loader *ld)
{
    return set_last(ld, &(rf_err){.code = RF_ECLOSED,
                                  .msg = "the loader was stopped (rf_loader_stop): it hands "
                                         "out no more batches; destroy it"});
}

/* Whether the test hook (src/pipeline/testing.h) refuses the allocation of `bytes` for `what`. */
static int alloc_refused(rf_loader *ld, const char *what, size_t bytes)
{
    return ld->hooks.alloc && ld->hooks.alloc(ld->hooks.alloc_ctx, what, bytes);
}

/* Append a sentence to rf_stats.memory_why ("; " between sentences). */
__attribute__((format(printf, 2, 3))) static void mem_why(rf_loader *ld, const char *fmt, ...)
{
    size_t n = strlen(ld->mem_why);
    if (n && n + 2 < sizeof ld->mem_why)
        n += (size_t)snprintf(ld->mem_why + n, sizeof ld->mem_why - n, "; ");
    va_list ap;
    va_start(ap, fmt);
    if (n < sizeof ld->mem_why)
        vsnprintf(ld->mem_why + n, sizeof ld->mem_why - n, fmt, ap);
    va_end(ap);
}

/* ---- dispatch (I/O threads) ----------------------------------------------------------------*/

static void skip_epoch_locked(rf_loader *ld);

static void plan_next_epoch_locked(rf_loader *ld)
{
    if (ld->d_epochs_left == 1) {
        ld->d_done = 1;
        return;
    }
    if (ld->d_epochs_left > 1)
        ld->d_epochs_left--;
    ld->d_epoch++;
    rf_plan_epoch(&ld->plan, ld->d_epoch, 0);
    ld->d_k = 0;
    if (ld->skip)
        skip_epoch_locked(ld);
}

/* Claim the arena span for `len` bytes; returns the physical offset or UINT64_MAX when full. */
static uint64_t arena_alloc_locked(rf_loader *ld, uint32_t len, uint64_t *end)
{
    uint64_t head = ld->arena_head, phys = head % ld->arena_bytes;
    if (phys + len > ld->arena_bytes) { /* no wrap inside a span: skip the tail end */
        head += ld->arena_bytes - phys;
        phys = 0;
    }
    if (head + len - ld->arena_tail > ld->arena_bytes)
        return UINT64_MAX;
    ld->arena_head = head + len;
    *end = head + len;
    return phys;
}

/* Token window `id` of `epoch`: its file and byte offset. Window w of a file starts at w*L
 * (SEQUENTIAL) or at a start drawn uniformly over the file's valid starts from the sample's
 * seed (RANDOM), so windows never cross a file boundary. */
static void token_window(const rf_loader *ld, uint64_t id, uint64_t epoch, uint32_t *file,
                         uint64_t *off)
{
    uint32_t lo = 0, hi = ld->ds.nfiles; /* find f with tok_first[f] <= id < tok_first[f+1] */
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        if (ld->tok_first[mid] <= id)
            lo = mid;
        else
            hi = mid;
    }
    uint64_t L = ld->cfg.seq_len, tb = ld->cfg.token_bytes, start;
    if (ld->cfg.token_windows == RF_WINDOWS_SEQUENTIAL) {
        start = (id - ld->tok_first[lo]) * L;
    } else {
        uint64_t ntok = ld->ds.files[lo].size / tb;
        rf_rng r;
        rf_rng_seed(&r, rf_plan_sample_seed(&ld->plan, epoch, id));
        start = rf_rng_below(&r, ntok - L); /* starts 0 .. ntok-L-1 keep L+1 tokens */
    }
    *file = lo;
    *off = start * tb;
}

/* ---- error policy (skip mode) ----------------------------------------------------------------
 *
 * Fail mode: the first failed sample is a sticky error naming shard, member, offset and cause.
 * Skip mode: a failed sample leaves a hole at its output position (batch, index) that another
 * sample fills, chosen so that the batches stay a pure function of (seed, epoch, dataset) and
 * of which samples are bad, whatever the threads and timing:
 *  - Outputs o = 0 .. P-1 of the rank's epoch (o = batch * batch_size + index) normally hold
 *    the rank's candidates j = 0 .. R-1 (rf_plan_sample(j)), then the plan's padding [R, P).
 *  - The forward cursor (the ordinary dispatcher) gives output o candidate o. Holes are filled
 *    strictly in output order (the walk sk_a waits at the first output not yet final) by a
 *    replacement cursor that walks the rank's candidates from the END backwards (sk_rtop). A
 *    replacement that fails leaves the hole open and the next candidate is taken.
 *  - The cursors must never take the same candidate, whatever the timing. So the forward cursor
 *    runs in phases: it dispatches outputs below sk_L freely; at sk_L it waits until every
 *    earlier output is final (a drain), then opens the next phase [o, o + min(C, (rtop-o)/2))
 *    with C = max(SK_PHASE_MIN, 8 * batch_size); the candidates above the phase are the reserve
 *    its holes draw from. Phase ends depend only on earlier outcomes: deterministic.
 *  - When no candidate is left (the cursors met), the hole and every output from there to R
 *    become blank padding (zero image, label -1, is_padding 1, key "", sample id and position
 *    UINT64_MAX). A failed padding sample of the plan becomes blank too and is not counted.
 *    So each batch keeps its planned count, every rank the same number of batches, and
 *    delivered (non-padding) + skipped == R for the rank's epoch.
 *  - The dispatcher enters the next epoch only when all outputs of this one are final
 *    (replacements need this epoch's plan).
 * Without failures the outputs are exactly fail mode's. The cost is one drain per phase (a few
 * per epoch and one per SK_PHASE_MIN samples), only in skip mode. */
typedef struct skip_item {
    uint32_t slot, index;
    uint64_t cand; /* candidate j of the rank's epoch, or UINT64_MAX: blank */
} skip_item;

enum { SK_PENDING = 0, SK_GOOD = 1, SK_HOLE = 2, SK_FINAL = 3, SK_MASK = 3, SK_REP = 0x10,
       SK_PAD = 0x20 };
#define SK_PHASE_MIN 4096u

static void plan_next_epoch_locked(rf_loader *ld);

static uint8_t *sk_status(rf_loader *ld, uint64_t o)
{
    uint64_t seq = ld->sk_seq0 + o / ld->batch;
    return &ld->skst[(seq % ld->depth) * ld->batch + o % ld->batch];
}

/* The real (non-padding) samples of the planned epoch on this rank: its candidates from its
 * first order position on, fewer when drop_last cuts the last batch. */
static uint64_t plan_real(const rf_plan *p)
{
    uint64_t first = p->base + p->rank;
    uint64_t real = first < p->n ? (p->n - first + p->world - 1) / p->world : 0;
    return RF_MIN(real, p->per_rank);
}

/* Reset the bookkeeping for the dispatcher's newly planned epoch (batch 0 is d_seq). */
static void skip_epoch_locked(rf_loader *ld)
{
    const rf_plan *p = &ld->plan;
    ld->sk_P = p->per_rank;
    ld->sk_R = plan_real(p);
    ld->sk_L = 0;
    ld->sk_rtop = ld->sk_R;
    ld->sk_a = 0;
    ld->sk_fwd_run = ld->sk_rep_run = 0;
    ld->sk_met = ld->sk_epoch_wait = ld->sk_waiting = 0;
    ld->sk_seq0 = ld->d_seq;
}

static void skip_queue_locked(rf_loader *ld, uint64_t o, uint64_t cand)
{
    uint64_t seq = ld->sk_seq0 + o / ld->batch;
    skip_item *q = &ld->skq[ld->skq_head++ % ld->skq_cap];
    q->slot = (uint32_t)(seq % ld->depth);
    q->index = (uint32_t)(o % ld->batch);
    q->cand = cand;
}

/* Advance sk_a over final outputs; give the first hole the next replacement (or a blank when
 * none is left); check the consecutive-failure limit. */
static void skip_walk_locked(rf_loader *ld)
{
    uint64_t front = ld->sk_epoch_wait ? ld->sk_P : ld->d_k * ld->batch + ld->d_j;
    while (ld->sk_a < front && !ld->err.code) {
        uint8_t *st = sk_status(ld, ld->sk_a);
        int state = *st & SK_MASK;
        if (state == SK_PENDING)
            return;
        if (state != SK_HOLE) {
            if (state == SK_GOOD && !(*st & SK_PAD)) {
                if (*st & SK_REP)
                    ld->sk_rep_run = 0;
                else
                    ld->sk_fwd_run = 0;
            }
            ld->sk_a++;
            continue;
        }
        if (!(*st & SK_PAD)) {
            uint64_t run = (*st & SK_REP) ? ++ld->sk_rep_run : ++ld->sk_fwd_run;
            if (run > ld->cfg.max_consecutive_skips) {
                char m[RF_ERRMSG_MAX];
                snprintf(m, sizeof m, "%llu consecutive samples failed; last: %s",
                         (unsigned long long)run, ld->sk_last.msg);
                fail_locked(ld, ld->sk_last.code, m);
                return;
            }
            if (!ld->sk_met && ld->sk_rtop > ld->sk_L) {
                *st = SK_PENDING | SK_REP;
                skip_queue_locked(ld, ld->sk_a, --ld->sk_rtop);
                return; /* strict output order: later holes wait for this one */
            }
            ld->sk_met = 1;
        }
        *st = SK_FINAL | SK_PAD;
        skip_queue_locked(ld, ld->sk_a, UINT64_MAX);
        ld->sk_a++;
    }
}

/* One read of a task: sample bytes from a file span into the slot's stage or the arena. */
typedef struct sample_read {
    uint64_t off, end; /* end: the virtual arena position after the span (task.arena_end) */
    uint32_t file, len, skip, need;
    uint8_t *dst;
} sample_read;

/* Where sample `id`, output `row` of slot s, is read from and into: tokens, its window of the
 * dispatcher's epoch straight into the slot's stage; images, the member's span in the arena.
 * Returns 0, or -1 when the arena is full (nothing claimed). */
static int sample_read_locked(rf_loader *ld, const slot *s, uint32_t row, uint64_t id,
                              sample_read *r)
{
    r->end = ld->arena_head;
    r->skip = r->need = 0;
    if (ld->tokens) {
        token_window(ld, id, ld->d_epoch, &r->file, &r->off);
        r->len = (uint32_t)ld->stage_bytes;
        r->dst = s->stage + (uint64_t)row * ld->stage_bytes;
        return 0;
    }
    const rf_sample *sm = &ld->ds.samples[id];
    r->file = sm->file;
    r->off = sm->offset;
    r->len = sm->length;
    if (rf_pc_odirect(ld->pc)) { /* read the aligned blocks around the span */
        r->need = r->len;
        rf_pc_direct_span(ld->pc, r->off, r->need, &r->off, &r->len, &r->skip);
        r->need += r->skip;
    }
    uint64_t phys = arena_alloc_locked(ld, r->len, &r->end);
    if (phys == UINT64_MAX)
        return -1;
    r->dst = ld->arena + phys;
    return 0;
}

/* The task's read request for r (O_DIRECT spans through the file's direct descriptor). */
static void task_set_read(rf_loader *ld, task *t, const sample_read *r)
{
    t->arena_end = r->end;
    t->phase = TASK_READING;
    t->file = r->file;
    t->req = (rf_io_req){.fd = ld->ds.files[r->file].fd, .len = r->len, .offset = r->off,
                         .dst = r->dst, .user = t};
    t->skip = r->skip;
    if (r->need) {
        t->req.fd = rf_pc_direct_fd(ld->pc, r->file);
        t->req.need = r->need;
    }
}

/* The slot of forward output (d_k, d_j), counting the batch's outputs when it opens; NULL
 * while that slot is still in use or the task ring is full. */
static slot *dispatch_slot_locked(rf_loader *ld)
{
    slot *s = &ld->slots[ld->d_seq % ld->depth];
    if (ld->d_j == 0) {
        if (s->state != SLOT_FREE)
            return NULL;
        ld->d_count = rf_plan_batch_count(&ld->plan, ld->d_k);
    }
    if (ld->task_head - ld->task_tail >= ld->ntasks)
        return NULL;
    return s;
}

/* Claim slot s for the batch when its first output (d_j == 0) is dispatched. */
static void slot_open_locked(rf_loader *ld, slot *s)
{
    if (ld->d_j == 0) {
        s->state = SLOT_FILLING;
        s->seq = ld->d_seq;
        atomic_store(&s->pending, ld->d_count);
        s->batch.count = ld->d_count;
        s->batch.epoch = ld->d_epoch;
        s->bad.code = 0;
        s->batch.index = ld->d_k;
        s->skipped = 0;
        memset(s->skipped_by, 0, sizeof s->skipped_by);
        s->epoch_total = plan_real(&ld->plan);
        if (ld->skip)
            memset(ld->skst + (ld->d_seq % ld->depth) * ld->batch, 0, ld->batch);
        if (ld->gj_device) {
            atomic_store(&s->gj_top, 0);
            atomic_store(&s->gj_scratch, 0);
            atomic_store(&s->gj_engine, 0);
            atomic_store(&s->gj_room, (int64_t)(ld->batch * ld->stride - ld->d_count * ld->gj_px));
        }
    }
}

/* Move the forward cursors past output (d_k, d_j). */
static void dispatch_advance_locked(rf_loader *ld)
{
    if (++ld->d_j == ld->d_count) {
        ld->d_j = 0;
        ld->d_seq++;
        if (++ld->d_k == ld->plan.batches) {
            if (ld->skip)
                ld->sk_epoch_wait = 1; /* skip_dispatch_locked moves on once all are final */
            else
                plan_next_epoch_locked(ld);
        }
    }
}

/* A replacement or blank task for one slot position; NULL when out of tasks or arena. */
static task *skip_task_locked(rf_loader *ld, const skip_item *it)
{
    if (ld->task_head - ld->task_tail >= ld->ntasks)
        return NULL;
    slot *s = &ld->slots[it->slot];
    uint64_t id = UINT64_MAX, pos = UINT64_MAX;
    uint8_t pad = 1;
    sample_read r = {.end = ld->arena_head,
                     .dst = ld->tokens ? s->stage + (uint64_t)it->index * ld->stage_bytes
                                       : ld->arena};
    int blank = it->cand == UINT64_MAX;
    if (!blank) {
        rf_plan_sample(&ld->plan, it->cand, &id, &pos, &pad);
        if (sample_read_locked(ld, s, it->index, id, &r))
            return NULL;
    }
    uint32_t i = it->index;
    s->ids[i] = id;
    s->positions[i] = pos;
    s->padding[i] = pad;
    s->keys[i] = blank ? "" : ld->tokens ? ld->ds.files[r.file].path
                                         : ld->ds.keys + ld->ds.samples[id].key;
    task *t = &ld->tasks[ld->task_head % ld->ntasks];
    t->seq = ld->task_head++;
    t->sample_id = id;
    t->aug_seed = blank ? 0 : rf_plan_sample_seed(&ld->plan, ld->d_epoch, id);
    t->slot = it->slot;
    t->index = i;
    t->raw = ld->tokens;
    t->rep = !blank;
    t->padout = pad;
    t->blank = (uint8_t)blank;
    t->why = 0;
    atomic_store(&t->finished, 0);
    task_set_read(ld, t, &r);
    return t;
}

/* Forward output (d_k, d_j) after the cursors met: a blank, with the slot claim and cursor
 * advance of dispatch_one_locked. */
static task *skip_forward_blank_locked(rf_loader *ld)
{
    slot *s = dispatch_slot_locked(ld);
    if (!s)
        return NULL;
    uint32_t si = (uint32_t)(ld->d_seq % ld->depth);
    slot_open_locked(ld, s); /* ld->skip: clears the slot's skip states too */
    skip_item it = {si, ld->d_j, UINT64_MAX};
    task *t = skip_task_locked(ld, &it);
    ld->skst[(uint64_t)si * ld->batch + ld->d_j] = SK_FINAL | SK_PAD;
    dispatch_advance_locked(ld); /* ld->skip: waits for the epoch's outcomes */
    return t;
}

/* Skip mode's part of dispatch. Returns 1 when the call is handled here (*out: a task, or NULL
 * when blocked), 0 when dispatch_one_locked dispatches forward output (d_k, d_j) as usual. */
static int skip_dispatch_locked(rf_loader *ld, task **out)
{
    *out = NULL;
    ld->sk_waiting = 0;
    skip_walk_locked(ld);
    if (ld->err.code)
        return 1;
    if (ld->skq_tail < ld->skq_head) {
        if ((*out = skip_task_locked(ld, &ld->skq[ld->skq_tail % ld->skq_cap])))
            ld->skq_tail++;
        return 1;
    }
    if (ld->sk_epoch_wait) {
        if (ld->sk_a < ld->sk_P) {
            ld->sk_waiting = 1;
            return 1;
        }
        plan_next_epoch_locked(ld); /* resets the bookkeeping */
        if (ld->d_done)
            return 1;
    }
    uint64_t o = ld->d_k * ld->batch + ld->d_j;
    if (o >= ld->sk_R || o < ld->sk_L)
        return 0; /* the plan's padding, or a forward output of the open phase */
    if (!ld->sk_met) {
        if (ld->sk_a < o) { /* drain: the next phase depends on every earlier outcome */
            ld->sk_waiting = 1;
            return 1;
        }
        uint64_t left = ld->sk_rtop > o ? ld->sk_rtop - o : 0;
        uint64_t phase = RF_MAX((uint64_t)SK_PHASE_MIN, 8ull * ld->batch);
        if (left == 0)
            ld->sk_met = 1;
        else
            ld->sk_L = o + RF_MIN(phase, RF_MAX(1, left / 2));
    }
    if (!ld->sk_met)
        return 0;
    *out = skip_forward_blank_locked(ld);
    return 1;
}

/* Outcomes of a sample in skip mode (under mu). */
static void skip_ok_locked(rf_loader *ld, const task *t)
{
    ld->skst[(uint64_t)t->slot * ld->batch + t->index] =
        (uint8_t)((t->blank ? SK_FINAL : SK_GOOD) | (t->rep ? SK_REP : 0) |
                  (t->padout ? SK_PAD : 0));
    if (ld->sk_waiting)
        pthread_cond_broadcast(&ld->cv_io);
}

static void skip_failed_locked(rf_loader *ld, const task *t, int reason, int code,
                               const char *msg)
{
    if (!t->padout) {
        slot *s = &ld->slots[t->slot];
        ld->skipped++;
        ld->skipped_by[reason]++;
        s->skipped++;
        s->skipped_by[reason]++;
    }
    ld->sk_last.code = code;
    snprintf(ld->sk_last.msg, sizeof ld->sk_last.msg, "%s", msg);
    ld->skst[(uint64_t)t->slot * ld->batch + t->index] =
        (uint8_t)(SK_HOLE | (t->rep ? SK_REP : 0) | (t->padout ? SK_PAD : 0));
    pthread_cond_broadcast(&ld->cv_io);
}

/* A blank padding sample: zero pixels (or tokens), label -1. */
static void skip_fill_blank(rf_loader *ld, const task *t, slot *s)
{
    uint8_t *img = s->stage + (uint64_t)t->index * ld->stride;
    memset(img, 0, ld->stage_bytes);
    if (ld->host_convert && ld->tokens)
        rf_widen_tokens_cpu(img, s->out + (uint64_t)t->index * ld->out_bytes,
                            ld->cfg.seq_len + 1, ld->cfg.token_bytes, ld->out_dtype);
    else if (ld->host_convert)
        rf_convert_image_cpu(img, s->out + (uint64_t)t->index * ld->out_bytes, ld->conv.h,
                             ld->conv.w, ld->out_dtype, ld->cfg.layout, ld->cfg.mean,
                             ld->cfg.std);
    s->labels[t->index] = -1;
}

static int skip_setup(rf_loader *ld, rf_err *err)
{
    if (!ld->skip)
        return 0;
    uint64_t n = (uint64_t)ld->depth * ld->batch; /* one entry per slot position */
    if (n + 2 > UINT32_MAX)
        return rf_seterr(err, RF_ENOMEM, "skip mode: prefetch_depth %u x batch %u slot positions "
                         "exceed %u", ld->depth, ld->batch, UINT32_MAX - 2);
    ld->skq_cap = (uint32_t)n + 2;
    size_t bytes = (size_t)n + (size_t)ld->skq_cap * sizeof *ld->skq;
    if (!alloc_refused(ld, "skip bookkeeping", bytes)) {
        ld->skst = calloc(n, 1);
        ld->skq = calloc(ld->skq_cap, sizeof *ld->skq);
    }
    if (!ld->skst || !ld->skq)
        return rf_seterr(err, RF_ENOMEM, "cannot allocate %zu bytes of skip bookkeeping "
                         "(prefetch_depth %u x batch %u positions): out of memory", bytes,
                         ld->depth, ld->batch);
    return 0;
}

/* Prepare the next task of the plan; returns NULL when blocked on a resource or done. */
static task *dispatch_one_locked(rf_loader *ld)
{
    if (ld->d_done || ld->err.code)
        return NULL;
    task *skt;
    if (ld->skip && skip_dispatch_locked(ld, &skt))
        return skt;
    slot *s = dispatch_slot_locked(ld);
    if (!s)
        return NULL;
    uint64_t id, pos;
    uint8_t pad;
    rf_plan_sample(&ld->plan, ld->d_k * ld->batch + ld->d_j, &id, &pos, &pad);
    sample_read r;
    if (sample_read_locked(ld, s, ld->d_j, id, &r))
        return NULL;
    if (ld->warm_on && ld->warm_epoch == ld->d_epoch &&
        ld->d_k * ld->batch + ld->d_j < ld->warm_pos) /* a warmed sample leaves the window */
        ld->warm_ahead -= RF_MIN(ld->warm_ahead, r.need ? r.need - r.skip : r.len);
    slot_open_locked(ld, s);
    uint32_t i = ld->d_j;
    s->ids[i] = id;
    s->positions[i] = pos;
    s->padding[i] = pad;
    s->keys[i] = ld->tokens ? ld->ds.files[r.file].path : ld->ds.keys + ld->ds.samples[id].key;
    task *t = &ld->tasks[ld->task_head % ld->ntasks];
    t->seq = ld->task_head++;
    t->sample_id = id;
    t->aug_seed = rf_plan_sample_seed(&ld->plan, ld->d_epoch, id);
    t->slot = (uint32_t)(ld->d_seq % ld->depth);
    t->index = i;
    t->raw = ld->tokens;
    t->rep = t->blank = t->why = 0;
    t->padout = pad;
    atomic_store(&t->finished, 0);
    task_set_read(ld, t, &r);
    dispatch_advance_locked(ld);
    return t;
}

/* ---- page cache: residency at submit, warming ahead (see src/io/pagecache.c) ----------------*/

#define WARM_HINTS_MAX 32 /* fadvise calls per take(); contiguous spans merge into one */
typedef struct warm_hint {
    uint32_t file;
    uint64_t off, len;
} warm_hint;

/* Advance the warm cursor over the dispatcher's epoch while fewer than warm_bytes are hinted
 * ahead of the dispatcher; the hints are issued by the caller after unlocking. The cursor
 * stays within the epoch the dispatcher is in (the next epoch's order is not planned yet). */
static int warm_plan_locked(rf_loader *ld, warm_hint *h)
{
    if (!ld->warm_on || ld->d_done)
        return 0;
    if (ld->warm_epoch != ld->d_epoch) {
        ld->warm_epoch = ld->d_epoch;
        ld->warm_pos = ld->warm_ahead = 0;
    }
    ld->warm_pos = RF_MAX(ld->warm_pos, ld->d_k * ld->batch + ld->d_j);
    int nh = 0;
    while (ld->warm_ahead < ld->cfg.warm_bytes && ld->warm_pos < ld->plan.per_rank) {
        uint64_t id, pos, off, len = ld->stage_bytes;
        uint32_t file;
        uint8_t pad;
        rf_plan_sample(&ld->plan, ld->warm_pos, &id, &pos, &pad);
        if (ld->tokens) {
            token_window(ld, id, ld->d_epoch, &file, &off);
        } else {
            file = ld->ds.samples[id].file;
            off = ld->ds.samples[id].offset;
            len = ld->ds.samples[id].length;
        }
        if (nh > 0 && h[nh - 1].file == file && h[nh - 1].off + h[nh - 1].len == off)
            h[nh - 1].len += len;
        else if (nh == WARM_HINTS_MAX)
            break;
        else
            h[nh++] = (warm_hint){file, off, len};
        ld->warm_pos++;
        ld->warm_ahead += len;
    }
    return nh;
}

/* Outside the lock, before the engine submits: residency of each new read (the sample's own
 * bytes, not O_DIRECT padding), then the warm hints. */
static void after_take(rf_loader *ld, rf_io_req **reqs, int n, const warm_hint *h, int nh)
{
    for (int i = 0; i < n; i++) {
        const task *t = reqs[i]->user;
        uint64_t len = reqs[i]->need ? reqs[i]->need - t->skip : reqs[i]->len;
        rf_pc_check(ld->pc, t->file, reqs[i]->fd, reqs[i]->offset + t->skip, len);
    }
    for (int i = 0; i < nh; i++)
        rf_pc_warm(ld->pc, h[i].file, h[i].off, h[i].len);
}

/* Files kept closed (fd -1: folder datasets with more images than descriptors to spare) are
 * opened for each read outside the lock and closed when the read completes. A failed open is
 * left to fail the read (-EBADF) and reported with its own errno by io_done. */
static void open_per_read(rf_loader *ld, rf_io_req **reqs, int n)
{
    for (int i = 0; i < n; i++) {
        task *t = reqs[i]->user;
        t->own_fd = -1;
        t->open_errno = 0;
        if (reqs[i]->fd >= 0)
            continue;
        t->own_fd = open(ld->ds.files[t->file].path, O_RDONLY | O_CLOEXEC);
        if (t->own_fd < 0)
            t->open_errno = errno;
        reqs[i]->fd = t->own_fd;
    }
}

static int io_take(void *ctx, rf_io_req **reqs, int max, int block)
{
    rf_loader *ld = ctx;
    warm_hint hints[WARM_HINTS_MAX];
    int nh = 0;
    pthread_mutex_lock(&ld->mu);
    int n = 0;
    for (;;) {
        /* A sticky error is fatal to the loader: the engine stops taking (it cancels and reaps
         * what is in flight and its threads exit) instead of sleeping here until destroy. */
        if (ld->stop || ld->err.code) {
            n = -1;
            break;
        }
        task *t;
        while (n < max && (t = dispatch_one_locked(ld)))
            reqs[n++] = &t->req;
        if (n > 0 || !block)
            break;
        pthread_cond_wait(&ld->cv_io, &ld->mu);
    }
    if (n > 0)
        nh = warm_plan_locked(ld, hints);
    pthread_mutex_unlock(&ld->mu);
    if (n > 0) {
        open_per_read(ld, reqs, n);
        after_take(ld, reqs, n, hints, nh);
    }
    return n;
}

/* Free a finished task's arena span; the tail advances over finished tasks in dispatch order
 * so the arena is a simple FIFO even though decodes finish out of order. */
static void task_finish_locked(rf_loader *ld, task *t)
{
    atomic_store(&t->finished, 1);
    int moved = 0;
    while (ld->task_tail < ld->task_head) {
        task *o = &ld->tasks[ld->task_tail % ld->ntasks];
        if (!atomic_load(&o->finished))
            break;
        ld->arena_tail = o->arena_end;
        ld->task_tail++;
        moved = 1;
    }
    if (moved)
        pthread_cond_broadcast(&ld->cv_io);
}

static void describe_task(const rf_loader *ld, const task *t, char *buf, size_t n)
{
    if (ld->tokens)
        snprintf(buf, n, "%s: token window at offset %llu", ld->ds.files[t->file].path,
                 (unsigned long long)t->req.offset);
    else
        snprintf(buf, n, "%s: sample %s at offset %llu", ld->ds.files[t->file].path,
                 ld->ds.keys + ld->ds.samples[t->sample_id].key,
                 (unsigned long long)t->req.offset);
}

static void finish_slot(rf_loader *ld, slot *s);

/* One sample of slot s is finished: read (raw), decoded, or failed in fail mode. The last of
 * the batch finishes the slot. Called without the mutex. */
static void sample_done(rf_loader *ld, slot *s)
{
    if (atomic_fetch_sub(&s->pending, 1) == 1)
        finish_slot(ld, s);
}

static void io_done(void *ctx, rf_io_req *req)
{
    rf_loader *ld = ctx;
    task *t = req->user;
    if (t->own_fd >= 0) {
        close(t->own_fd);
        t->own_fd = -1;
    }
    if (t->open_errno)
        req->result = -t->open_errno;
    slot *s = &ld->slots[t->slot];
    int done = 0;
    const uint8_t *widen_src = NULL; /* raw tokens the host backend widens into widen_dst */
    uint8_t *widen_dst = NULL;
    pthread_mutex_lock(&ld->mu);
    if (req->result != 0 && !ld->stop && !ld->err.code) { /* after a fatal error: reaped only */
        char where[RF_ERRMSG_MAX / 2], msg[RF_ERRMSG_MAX];
        describe_task(ld, t, where, sizeof where);
        const rf_file *f = &ld->ds.files[t->file];
        struct stat fst;
        char now[96] = "";
        if (fstat(f->fd, &fst) == 0 && (uint64_t)fst.st_size != f->size)
            snprintf(now, sizeof now, " (the file changed during the epoch: %llu bytes now, %llu "
                     "at create)", (unsigned long long)fst.st_size, (unsigned long long)f->size);
        if (req->result == -ENODATA)
            snprintf(msg, sizeof msg, "%s: file ended after %u of %u bytes (truncated?)%s", where,
                     req->done, req->len, now);
        else
            snprintf(msg, sizeof msg, "%s: read failed: %s%s", where, rf_strerror(req->result),
                     now);
        int code = req->result == -ENODATA ? RF_EFORMAT : RF_EIO;
        if (ld->skip) {
            skip_failed_locked(ld, t, req->result == -ENODATA ? RF_SKIP_TRUNCATED : RF_SKIP_IO,
                               code, msg);
        } else {
            slot_bad_locked(s, t->index, code, msg);
            done = 1; /* failed, but finished: the batch completes once the rest are in */
        }
    }
    if (req->result != 0 || ld->stop) {
        task_finish_locked(ld, t);
    } else if (t->raw && !t->blank) {
        /* Raw path: the bytes already sit in the slot; only the host backend converts here. */
        s->labels[t->index] = -1;
        if (ld->skip)
            skip_ok_locked(ld, t);
        if (ld->host_convert) /* read now: once finished, the task may be reused */
            widen_src = t->req.dst, widen_dst = s->out + (uint64_t)t->index * ld->out_bytes;
        task_finish_locked(ld, t);
        done = 1;
    } else {
        t->phase = TASK_QUEUED;
        ld->decq[ld->decq_head++ % ld->ntasks] = (uint32_t)(t->seq % ld->ntasks);
        pthread_cond_signal(&ld->cv_dec);
    }
    pthread_mutex_unlock(&ld->mu);
    if (widen_src)
        rf_widen_tokens_cpu(widen_src, widen_dst, ld->cfg.seq_len + 1, ld->cfg.token_bytes,
                            ld->out_dtype);
    if (done)
        sample_done(ld, s);
}

/* ---- decode (decode threads) ---------------------------------------------------------------*/

/* "member KEY.jpg at offset N": the image member of sample sm, whose header is hdr bytes into
 * the sample's span; every per-image decode error starts with it (the thread adds the shard). */
static void describe_member(const rf_loader *ld, const rf_sample *sm, uint32_t hdr, char *buf,
                            size_t n)
{
    snprintf(buf, n, "member %s.%s at offset %llu", ld->ds.keys + sm->key,
             ld->ds.payload_ext ? ld->ds.payload_ext : "jpg",
             (unsigned long long)(sm->offset + hdr));
}

/* A decode thread's buffers for GPU decode on the host backend: the packet is built here
 * (grown to the largest packet seen) and decoded into the slot by the kernels' host code. */
typedef struct gj_host {
    uint8_t *packet, *scratch;
    size_t cap;
} gj_host;

/* Where rf_decode_packet writes one sample (rf_gj_place). */
typedef struct gj_place_ctx {
    rf_loader *ld;
    slot *s;
    uint32_t index;
    uint8_t *img; /* host backend: the sample's pixels */
    gj_host *gh;
} gj_place_ctx;

/* Device: the next free bytes of the slot's stage. A packet takes them only while every sample
 * not yet placed keeps room for its pixels, so a decoded sample always fits; a packet that
 * does not is decoded on the CPU to the same bytes (rf_decode_packet). Lock-free: one CAS on
 * the room, one add on the top. */
static uint8_t *gj_place_device(void *ctx, size_t bytes, int packet)
{
    gj_place_ctx *c = ctx;
    uint64_t n = (bytes + RF_GJ_ALIGN - 1) / RF_GJ_ALIGN * RF_GJ_ALIGN;
    if (packet) {
        int64_t need = (int64_t)n - (int64_t)c->ld->gj_px;
        int64_t room = atomic_load(&c->s->gj_room);
        do
            if (room < need)
                return NULL;
        while (!atomic_compare_exchange_weak(&c->s->gj_room, &room, room - need));
    } else {
        n = c->ld->gj_px; /* held for it since the slot opened */
    }
    uint64_t off = atomic_fetch_add(&c->s->gj_top, n);
    c->s->gj_offs[c->index] = off;
    return c->s->stage + off;
}

static uint8_t *gj_place_host(void *ctx, size_t bytes, int packet)
{
    gj_place_ctx *c = ctx;
    if (!packet)
        return c->img;
    if (bytes > c->gh->cap) { /* grows a few times, to the largest packet of the data */
        uint8_t *p = realloc(c->gh->packet, bytes);
        if (!p)
            return NULL; /* decoded on the CPU instead: the same bytes */
        c->gh->packet = p, c->gh->cap = bytes;
    }
    return c->gh->packet;
}

/* GPU decode of one sample (rf_config.gpu_decode, hw_decode_percent): a packet for the
 * device, or on the host backend the packet decoded right away by the same code (an engine
 * packet's planes by libjpeg); images the kernels or the engine do not take come back decoded
 * by the CPU path. */
static int gj_decode(rf_loader *ld, rf_decoder *dec, const task *t, slot *s, const uint8_t *jpeg,
                     uint32_t len, uint8_t *img, rf_decode_info *info, gj_host *gh, rf_err *e)
{
    uint32_t bytes = 0, bad = 0;
    gj_place_ctx c = {ld, s, t->index, img, gh};
    /* A hash of the sample's own seed (itself one of seed, epoch and sample), apart from the
     * draws that choose its crop, decides: percentiles below hw_decode_percent go to the
     * engine, the next gpu_decode_percent to the kernels, the rest to the CPU. */
    uint32_t pc = rf_plan_gpu_percentile(t->aug_seed), hw = ld->cfg.hw_decode_percent;
    int engine = pc < hw;
    if (!engine && (!ld->cfg.gpu_decode || pc - hw >= ld->cfg.gpu_decode_percent)) {
        uint8_t *px = ld->gj_device ? gj_place_device(&c, ld->stage_bytes, 0) : img;
        return rf_decode_transform(dec, jpeg, len, &ld->tf, t->aug_seed, px, info, e);
    }
    int rc = rf_decode_packet(dec, jpeg, len, &ld->tf, t->aug_seed, engine,
                              ld->gj_device ? gj_place_device : gj_place_host, &c, &bytes,
                              info, e);
    if (rc || !bytes)
        return rc;
    atomic_fetch_add(engine ? &ld->hw_decoded : &ld->gpu_decoded, 1);
    if (ld->gj_device) { /* the packet's share of the batch's device scratch */
        rf_gj_packet *p = (rf_gj_packet *)(s->stage + s->gj_offs[t->index]);
        p->scratch_at = (uint32_t)atomic_fetch_add(&s->gj_scratch,
                                                   (p->scratch + RF_GJ_ALIGN - 1) / RF_GJ_ALIGN);
        s->gj_flags[t->index] = engine ? RF_GJ_ENGINE_PACKET : RF_GJ_KERNELS;
        if (engine)
            atomic_fetch_add(&s->gj_engine, 1);
        return 0;
    }
    if (engine && (rc = rf_decode_planes(dec, gh->packet, gh->scratch, e)) != 0)
        return rc;
    int st = rf_gj_decode_host(gh->packet, gh->scratch, img, &bad);
    if (st)
        return rf_seterr(e, RF_EDECODE, "%s (GPU decode, restart interval %u of the crop's "
                         "region)", rf_gj_status_text(st), bad);
    return 0;
}

/* The label of a tar sample whose span locate walked: under RF_LABEL_CLS its label member,
 * which must be there and hold a label (rf_check_label: the same check as rf_shard_inspect);
 * under RF_LABEL_NONE -1, unread. */
static int tar_label(const rf_loader *ld, const rf_sample *sm, const uint8_t *span,
                     uint32_t loff, uint32_t llen, uint32_t lhdr, int32_t *label, rf_err *e)
{
    *label = -1;
    if (ld->cfg.label_source == RF_LABEL_NONE)
        return 0;
    const char *key = ld->ds.keys + sm->key;
    if (!loff)
        return rf_label_missing(key, sm->offset, e);
    return rf_check_label(key, span + loff, llen, sm->offset + lhdr, label, e);
}

static int decode_task(rf_loader *ld, rf_decoder *dec, task *t, slot *s, gj_host *gh, rf_err *e)
{
    const rf_sample *sm = &ld->ds.samples[t->sample_id];
    const uint8_t *span = t->req.dst + t->skip;
    uint32_t doff = sm->data_off, dlen = sm->data_len, dhdr = sm->data_hdr, loff, llen, lhdr;
    int32_t label = sm->label; /* folder sources: known from the tree or the list */
    int rc;
    if (sm->flags & RF_SAMPLE_TAR) {
        rc = rf_tar_locate(span, sm->length, ld->ds.keys + sm->key, "jpg,jpeg", &doff, &dlen,
                           &dhdr, &loff, &llen, &lhdr, e);
        if (rc) {
            /* span offsets in the message are relative to the sample's offset named here */
            t->why = rc == RF_ELIMIT ? RF_SKIP_TOO_LARGE
                     : rc != RF_EFORMAT ? SKIP_FATAL
                     : e->reason == RF_REASON_TRUNCATED ? RF_SKIP_TRUNCATED : RF_SKIP_TAR_HEADER;
            char m[RF_ERRMSG_MAX];
            snprintf(m, sizeof m, "sample %s at offset %llu: %s", ld->ds.keys + sm->key,
                     (unsigned long long)sm->offset, e->msg);
            return rf_seterr(e, rc, "%s", m);
        }
        if ((rc = tar_label(ld, sm, span, loff, llen, lhdr, &label, e)) != 0) {
            t->why = RF_SKIP_LABEL;
            return rc;
        }
    }
    rf_decode_info info;
    uint8_t *img = s->stage + (uint64_t)t->index * ld->stride;
    if (ld->gj_device)
        s->gj_flags[t->index] = 0;
    if ((rc = rf_jpeg_soi_check(span + doff, dlen, e)) != 0) {
        t->why = RF_SKIP_NOT_JPEG; /* not a JPEG at all */
    } else {
        rc = ld->gj
                 ? gj_decode(ld, dec, t, s, span + doff, dlen, img, &info, gh, e)
                 : rf_decode_transform(dec, span + doff, dlen, &ld->tf, t->aug_seed, img, &info, e);
        t->why = rc == RF_ELIMIT ? RF_SKIP_TOO_LARGE : rc == RF_EDECODE ? RF_SKIP_CORRUPT
                                                                        : SKIP_FATAL;
    }
    if (rc) {
        char m[RF_ERRMSG_MAX];
        describe_member(ld, sm, dhdr, m, sizeof m);
        size_t k = strlen(m);
        snprintf(m + k, sizeof m - k, ": %s", e->msg); /* e->msg is rewritten below */
        return rf_seterr(e, rc, "%s", m);
    }
    if (info.scale_denom > 1)
        atomic_fetch_add(&ld->dct_scaled, 1);
    if (info.region)
        atomic_fetch_add(&ld->region_decoded, 1);
    if (ld->host_convert)
        rf_convert_image_cpu(img, s->out + (uint64_t)t->index * ld->out_bytes, ld->conv.h,
                             ld->conv.w, ld->out_dtype, ld->cfg.layout, ld->cfg.mean,
                             ld->cfg.std);
    s->labels[t->index] = label;
    return 0;
}

/* GPU decode on the device: wait for the batch's kernels and turn a sample they could not
 * decode into the error the CPU path would have raised (named by file, member and offset),
 * before the batch is handed out. The consumer waits, in rf_loader_next: the kernels ran
 * while the batches before it were consumed, so the wait is normally over at once, and no
 * decode thread ever sits idle on the GPU (one did, for a whole batch's kernels, when the
 * thread that finished the batch waited). */
static int gj_check(rf_loader *ld, const slot *s, rf_err *e)
{
    if (ld->bops->sync(s->dev.event))
        return rf_seterr(e, RF_ECUDA, "waiting for the GPU decode of the batch failed");
    for (uint32_t i = 0; i < s->batch.count; i++) {
        if (!s->gj_status[i])
            continue;
        /* data_hdr is the located header: the sample decoded, so its span re-validated */
        const rf_sample *sm = &ld->ds.samples[s->ids[i]];
        char m[RF_ERRMSG_MAX];
        describe_member(ld, sm, sm->data_hdr, m, sizeof m);
        int st = s->gj_status[i];
        if ((st & 0xFF) == RF_GJ_ENGINE) /* nvJPEG's own status is above the low byte */
            return rf_seterr(e, RF_EDECODE, "%s: %s: %s (nvJPEG status %d)",
                             ld->ds.files[sm->file].path, m, rf_gj_status_text(RF_GJ_ENGINE),
                             st >> 8);
        return rf_seterr(e, RF_EDECODE, "%s: %s: %s (GPU decode)", ld->ds.files[sm->file].path,
                         m, rf_gj_status_text(st));
    }
    return 0;
}

/* The batch's last sample is in: enqueue the copy and publish the slot. */
static void finish_slot(rf_loader *ld, slot *s)
{
    if (s->bad.code) { /* written before the samples' countdown, which ordered it before us */
        pthread_mutex_lock(&ld->mu);
        s->state = SLOT_BAD;
        pthread_cond_broadcast(&ld->cv_out);
        pthread_mutex_unlock(&ld->mu);
        return;
    }
    rf_err e = {0};
    uint64_t t0 = rf_now_ns();
    /* GPU decode: only the stage bytes the batch's packets and pixels took */
    size_t bytes = ld->gj_device ? (size_t)atomic_load(&s->gj_top)
                                 : (size_t)s->batch.count * ld->stride;
    rf_convert_desc conv = ld->conv;
    conv.elements = (uint64_t)s->batch.count * (ld->cfg.seq_len + 1);
    conv.out_bytes = (uint64_t)s->batch.count * ld->out_bytes;
    if (ld->gj_device)
        conv.gj_offs = s->gj_offs, conv.gj_flags = s->gj_flags, conv.gj_status = s->gj_status,
        conv.gj_size = ld->tf.size, conv.gj_scratch = atomic_load(&s->gj_scratch) * RF_GJ_ALIGN,
        conv.gj_engine = atomic_load(&s->gj_engine);
    int rc = ld->hooks.backend ? ld->hooks.backend(ld->hooks.backend_ctx, RF_HOOK_SUBMIT, s->seq)
                               : 0;
    if (rc)
        rf_seterr(&e, rc, "injected fault (src/pipeline/testing.h)");
    else
        rc = ld->bops->submit(ld->backend, (uint32_t)(s - ld->slots), s->stage, bytes,
                              s->labels, s->batch.count, &conv, &s->dev, &e);
    atomic_fetch_add(&ld->copy_ns, rf_now_ns() - t0);
    pthread_mutex_lock(&ld->mu);
    if (rc) {
        /* Sticky and fatal (a CUDA error poisons the context): fail_locked wakes the consumer
         * in rf_loader_next, the I/O threads in take() and the decode threads; they stop
         * taking work and every later call returns this error. */
        char m[RF_ERRMSG_MAX];
        snprintf(m, sizeof m, "copy of batch %llu (epoch %llu, batch %llu of the epoch, %u "
                 "samples, %zu bytes) to the device failed: %s", (unsigned long long)s->seq,
                 (unsigned long long)s->batch.epoch, (unsigned long long)s->batch.index,
                 s->batch.count, bytes, e.msg);
        fail_locked(ld, rc, m);
    } else {
        s->state = SLOT_READY;
        pthread_cond_broadcast(&ld->cv_out);
    }
    pthread_mutex_unlock(&ld->mu);
}

typedef struct decoder_arg {
    rf_loader *ld;
    rf_decoder *dec;
} decoder_arg;

static int gj_host_alloc(rf_loader *ld, gj_host *gh)
{
    if (!ld->gj || ld->gj_device)
        return 0;
    gh->packet = malloc(ld->gj_cap);
    gh->cap = ld->gj_cap;
    gh->scratch = malloc(RF_GJ_SCRATCH);
    return gh->packet && gh->scratch ? 0 : -1;
}

static void *decoder_main(void *arg)
{
    rf_loader *ld = ((decoder_arg *)arg)->ld;
    rf_decoder *dec = ((decoder_arg *)arg)->dec;
    free(arg);
    if (ld->cfg.decode_nice) {
        /* Linux: PRIO_PROCESS with a thread id sets that thread alone. Raising one's own
         * niceness needs no privilege; failure only costs the scheduling preference. */
        id_t tid = (id_t)syscall(SYS_gettid);
        errno = 0;
        int cur = getpriority(PRIO_PROCESS, tid);
        if (errno == 0)
            (void)setpriority(PRIO_PROCESS, tid, RF_MIN(cur + (int)ld->cfg.decode_nice, 19));
    }
    gj_host gh = {0};
    if (gj_host_alloc(ld, &gh))
        fail(ld, RF_ENOMEM, "out of memory for a decode thread's GPU-decode buffers");
    for (;;) {
        pthread_mutex_lock(&ld->mu);
        while (!ld->stop && ld->decq_tail == ld->decq_head)
            pthread_cond_wait(&ld->cv_dec, &ld->mu);
        if (ld->stop) {
            pthread_mutex_unlock(&ld->mu);
            free(gh.packet), free(gh.scratch);
            return NULL;
        }
        task *t = &ld->tasks[ld->decq[ld->decq_tail++ % ld->ntasks]];
        t->phase = TASK_DECODING;
        slot *s = &ld->slots[t->slot];
        int failed = ld->err.code != 0;
        /* A sample after the slot's first bad one: the batch is never delivered. */
        int moot = s->bad.code && t->index > s->bad_index;
        pthread_mutex_unlock(&ld->mu);

        rf_err e = {0};
        int rc = 0;
        if (!failed && t->blank) {
            skip_fill_blank(ld, t, s);
        } else if (!failed && !moot) {
            uint64_t t0 = rf_now_ns();
            rc = decode_task(ld, dec, t, s, &gh, &e);
            atomic_fetch_add(&ld->decode_ns, rf_now_ns() - t0);
            atomic_fetch_add(&ld->decoded, 1);
        }
        pthread_mutex_lock(&ld->mu);
        if (rc) {
            char where[RF_ERRMSG_MAX / 2], msg[RF_ERRMSG_MAX];
            snprintf(where, sizeof where, "%s", ld->ds.files[t->file].path);
            snprintf(msg, sizeof msg, "%s: %s", where, e.msg);
            if (t->why == SKIP_FATAL)
                fail_locked(ld, rc, msg); /* not the sample's fault: stop now */
            else if (ld->skip)
                skip_failed_locked(ld, t, t->why, rc, msg);
            else
                slot_bad_locked(s, t->index, rc, msg);
        } else if (ld->skip && !failed) {
            skip_ok_locked(ld, t);
        }
        /* Counted down: decoded, skipped-mode successes, and fail mode's data errors. */
        int done = !failed && (!rc || (!ld->skip && t->why != SKIP_FATAL));
        task_finish_locked(ld, t);
        pthread_mutex_unlock(&ld->mu);
        if (done)
            sample_done(ld, s);
    }
}

/* ---- start / stop ----------------------------------------------------------------------- */

/* The backend's release of slot s, behind the test hook (src/pipeline/testing.h). */
static int backend_release(rf_loader *ld, slot *s, void *stream, rf_err *e)
{
    int rc = ld->hooks.backend ? ld->hooks.backend(ld->hooks.backend_ctx, RF_HOOK_RELEASE, s->seq)
                               : 0;
    if (rc)
        return rf_seterr(e, rc, "releasing batch %llu: injected fault (src/pipeline/testing.h)",
                         (unsigned long long)s->seq);
    return ld->bops->release(ld->backend, &s->dev, stream, e);
}

/* Stop every thread and reap in-flight work; the ring keeps its memory. */
static void threads_stop(rf_loader *ld)
{
    if (!ld->running)
        return;
    pthread_mutex_lock(&ld->mu);
    ld->stop = 1;
    pthread_cond_broadcast(&ld->cv_io);
    pthread_cond_broadcast(&ld->cv_dec);
    pthread_cond_broadcast(&ld->cv_out);
    pthread_mutex_unlock(&ld->mu);
    if (ld->io) {
        rf_io_stats st; /* after the threads finished: what they did while stopping counts */
        ld->iops->stop(ld->io, &st);
        ld->io = NULL;
        ld->io_ns_prev += st.busy_ns;
        ld->io_reads_prev += st.reads;
        ld->io_retries_prev += st.retries;
        ld->io_bytes_prev += st.bytes;
        ld->io_storage_prev += st.storage_bytes;
    }
    for (uint32_t i = 0; i < ld->ndecoders; i++)
        pthread_join(ld->decoders[i], NULL);
    ld->ndecoders = 0;
    ld->running = 0;
}

/* With the threads stopped: published batches still hold device memory and maybe a copy in
 * flight; return them to the backend and free their slots, the leased ones too unless
 * keep_leased (rf_loader_stop: their memory is the consumer's until destroy). */
static void slots_return(rf_loader *ld, int keep_leased)
{
    for (uint32_t i = 0; ld->slots && i < ld->depth; i++) {
        slot *s = &ld->slots[i];
        if (keep_leased && s->state == SLOT_LEASED)
            continue;
        if (s->state == SLOT_READY || s->state == SLOT_LEASED) {
            rf_err e = {0};
            backend_release(ld, s, NULL, &e); /* an error here changes nothing: we stop anyway */
        }
        s->state = SLOT_FREE;
    }
}

static void pipeline_stop(rf_loader *ld)
{
    threads_stop(ld);
    slots_return(ld, 0);
}

/* (Re)start at consumer batch seq `seq`, planning `epoch` from order position `base`. */
static int pipeline_start(rf_loader *ld, uint64_t epoch, uint64_t base, rf_err *err)
{
    ld->stop = 0;
    ld->warm_epoch = UINT64_MAX; /* the warm cursor restarts with the plan */
    ld->arena_head = ld->arena_tail = 0;
    ld->task_head = ld->task_tail = 0;
    ld->decq_head = ld->decq_tail = 0;
    rf_plan_epoch(&ld->plan, epoch, base);
    ld->d_epoch = epoch;
    ld->d_k = 0;
    ld->d_j = 0;
    ld->d_seq = ld->c_seq;
    ld->d_done = 0;
    ld->d_epochs_left = ld->cfg.epochs ? ld->cfg.epochs - ld->c_epochs_done : 0;
    ld->skq_head = ld->skq_tail = 0;
    if (ld->skip)
        skip_epoch_locked(ld);
    if (ld->plan.batches == 0) /* a resume cursor at the very end of an epoch */
        plan_next_epoch_locked(ld);
    ld->c_epoch = ld->d_epoch;
    ld->c_base = ld->d_epoch == epoch ? base : 0;
    ld->c_batches = ld->plan.batches;
    ld->c_k = 0;
    ld->ep = (epoch_counts){.epoch = ld->c_epoch, .total = plan_real(&ld->plan)};

    for (uint32_t i = 0; i < ld->cfg.decode_threads; i++) {
        decoder_arg *a = malloc(sizeof *a);
        if (!a)
            return rf_seterr(err, RF_ENOMEM, "no memory for decode threads");
        a->ld = ld;
        a->dec = ld->decs[i];
        /* (the hook reaches the teardown of a half-started pipeline) */
        if (alloc_refused(ld, "decode thread", 0) ||
            pthread_create(&ld->decoders[i], NULL, decoder_main, a)) {
            free(a);
            ld->running = 1;
            return rf_seterr(err, RF_ENOMEM, "cannot start decode thread %u of %u: out of memory",
                             i + 1, ld->cfg.decode_threads);
        }
        ld->ndecoders++;
    }
    ld->running = 1;
    int rc = ld->iops->start(&ld->iop, &ld->src, &ld->io, err);
    if (rc && ld->iops == &rf_io_uring_ops && ld->cfg.io_engine == RF_IO_AUTO) {
        /* io_uring passed the probe but a worker ring could not be set up (memlock, limits):
         * fall back for this loader and say why. */
        snprintf(ld->io_why, sizeof ld->io_why, "io_uring worker setup failed (%s): using pread",
                 err->msg);
        ld->iops = &rf_io_pread_ops;
        rc = ld->iops->start(&ld->iop, &ld->src, &ld->io, err);
    }
    return rc;
}

/* ---- create ------------------------------------------------------------------------------*/

/* Memory-hierarchy fields: the naive baseline's fixed settings, which replace the caller's
 * (before rf_config_resolve, so that they are not AUTO there). */
static int mem_defaults(rf_config *c, rf_err *err)
{
    if (c->numa > RF_NUMA_OFF)
        return rf_seterr(err, RF_EINVAL, "invalid numa %u", c->numa);
    if (c->naive) {
        c->io_engine = RF_IO_PREAD;
        c->io_threads = 1;
        c->io_queue_depth = 1;
        c->prefetch_depth = 1;
        c->warm = c->odirect = c->hugepages = 0;
        c->numa = RF_NUMA_OFF;
    }
    return 0;
}

/* The caller's config, resolved (rf_config_resolve: every fixed default and the AUTO values
 * that follow from the config and the machine) and then checked. */
static int apply_defaults(rf_config *c, rf_err *err)
{
    if (c->struct_size < offsetof(rf_config, resume_state_bytes) + sizeof(uint64_t) ||
        c->version != RF_CONFIG_VERSION)
        return rf_seterr(err, RF_EINVAL,
                         "config struct_size %u / version %u: fill it with rf_config_init()",
                         c->struct_size, c->version);
    if (!c->shards || c->shard_count == 0)
        return rf_seterr(err, RF_EINVAL, "no shards given");
    int mrc = mem_defaults(c, err);
    if (mrc)
        return mrc;
    rf_config_resolve(c);
    if (c->image_size > 8192)
        return rf_seterr(err, RF_EINVAL, "image_size %u exceeds 8192", c->image_size);
    if (c->crop > RF_CROP_CENTER || c->layout > RF_LAYOUT_NCHW)
        return rf_seterr(err, RF_EINVAL, "invalid crop %u or layout %u", c->crop, c->layout);
    if (!(c->scale_min > 0 && c->scale_min <= c->scale_max && c->scale_max <= 1.0f &&
          c->ratio_min > 0 && c->ratio_min <= c->ratio_max))
        return rf_seterr(err, RF_EINVAL, "invalid scale (%g, %g) or ratio (%g, %g)",
                         c->scale_min, c->scale_max, c->ratio_min, c->ratio_max);
    if (c->decode_threads > 1024)
        return rf_seterr(err, RF_EINVAL, "decode_threads %u exceeds 1024", c->decode_threads);
    if (c->decode_nice > 19)
        return rf_seterr(err, RF_EINVAL, "decode_nice %u out of range 0..19", c->decode_nice);
    if (c->prefetch_depth > 64 || c->io_queue_depth > 4096 || c->io_threads > 64)
        return rf_seterr(err, RF_EINVAL, "prefetch_depth (<= 64), io_queue_depth (<= 4096) or "
                                         "io_threads (<= 64) out of range");
    if (c->on_error > RF_ON_ERROR_SKIP)
        return rf_seterr(err, RF_EINVAL, "invalid on_error %u (0 fail, 1 skip)", c->on_error);
    if (c->label_source > RF_LABEL_NONE)
        return rf_seterr(err, RF_EINVAL, "invalid label_source %u (0 RF_LABEL_CLS, 1 "
                         "RF_LABEL_NONE)", c->label_source);
    if (c->max_name_bytes > RF_TAR_NAME_MAX)
        return rf_seterr(err, RF_EINVAL, "max_name_bytes %u exceeds %u", c->max_name_bytes,
                         RF_TAR_NAME_MAX);
    if (c->device_kind > RF_DEVICE_CUDA || c->io_engine > RF_IO_PREAD)
        return rf_seterr(err, RF_EINVAL, "invalid device_kind %u or io_engine %u",
                         c->device_kind, c->io_engine);
    if (c->order > RF_ORDER_SHARD || c->remainder > RF_REMAINDER_DROP)
        return rf_seterr(err, RF_EINVAL, "invalid order %u or remainder %u", c->order,
                         c->remainder);
    if (c->gpu_decode > 1)
        return rf_seterr(err, RF_EINVAL, "gpu_decode must be 0 or 1, not %u", c->gpu_decode);
    if (c->gpu_decode_percent > 100)
        return rf_seterr(err, RF_EINVAL, "gpu_decode_percent %u out of range 0..100 (0: all)",
                         c->gpu_decode_percent);
    if (c->hw_decode_percent > 100)
        return rf_seterr(err, RF_EINVAL, "hw_decode_percent %u out of range 0..100",
                         c->hw_decode_percent);
    if (c->dct_scaling > RF_DCT_SCALING_OFF)
        return rf_seterr(err, RF_EINVAL, "dct_scaling must be 0 (auto) or 1 (off), not %u",
                         c->dct_scaling);
    if ((c->gpu_decode || c->hw_decode_percent) && c->source == RF_SOURCE_TOKENS)
        return rf_seterr(err, RF_EINVAL, "gpu_decode and hw_decode_percent apply to JPEG "
                         "sources, not tokens");
    if (c->source == RF_SOURCE_TOKENS) {
        if (c->token_bytes != 2 && c->token_bytes != 4)
            return rf_seterr(err, RF_EINVAL, "tokens: token_bytes must be 2 or 4, not %u",
                             c->token_bytes);
        if (c->seq_len == 0 || c->seq_len > (1u << 24))
            return rf_seterr(err, RF_EINVAL, "tokens: seq_len must be in 1..16M, not %u",
                             c->seq_len);
        if (c->token_windows > RF_WINDOWS_SEQUENTIAL)
            return rf_seterr(err, RF_EINVAL, "tokens: invalid token_windows %u", c->token_windows);
        if (c->token_dtype != RF_DTYPE_UINT16 && c->token_dtype != RF_DTYPE_INT32 &&
            c->token_dtype != RF_DTYPE_INT64)
            return rf_seterr(err, RF_EINVAL, "tokens: token_dtype must be UINT16, INT32 or INT64");
        if (c->token_dtype == RF_DTYPE_UINT16 && c->token_bytes == 4)
            return rf_seterr(err, RF_EINVAL, "tokens: 4-byte tokens cannot narrow to UINT16");
    } else if (c->source != RF_SOURCE_TAR && c->source != RF_SOURCE_FOLDER) {
        return rf_seterr(err, RF_EINVAL, "invalid source %u", c->source);
    }
    if (c->dtype != RF_DTYPE_UINT8 && c->dtype != RF_DTYPE_FLOAT16 &&
        c->dtype != RF_DTYPE_BFLOAT16 && c->dtype != RF_DTYPE_FLOAT32)
        return rf_seterr(err, RF_EINVAL, "images: dtype must be UINT8, FLOAT16, BFLOAT16 or "
                                         "FLOAT32, not %u", c->dtype);
    for (int i = 0; i < 3; i++)
        if (!(c->std[i] > 0) && !(c->std[i] < 0))
            return rf_seterr(err, RF_EINVAL, "std[%d] must be non-zero", i);
    return 0;
}

/* Bytes per sample before and after conversion, and the conversion the backend runs. */
static void setup_output(rf_loader *ld)
{
    const rf_config *c = &ld->cfg;
    memset(&ld->conv, 0, sizeof ld->conv);
    if (ld->tokens) {
        uint64_t n = (uint64_t)c->seq_len + 1;
        ld->stage_bytes = n * c->token_bytes;
        ld->out_dtype = c->token_dtype;
        ld->out_bytes = n * rf_dtype_bytes(c->token_dtype);
        if (ld->out_bytes != ld->stage_bytes) {
            ld->conv.kind = RF_CONV_TOKENS;
            ld->conv.token_bytes = c->token_bytes;
            ld->conv.dtype = c->token_dtype;
        }
        return;
    }
    uint64_t px = (uint64_t)c->image_size * c->image_size;
    ld->stage_bytes = px * 3;
    ld->out_dtype = c->dtype;
    ld->out_bytes = px * 3 * rf_dtype_bytes(c->dtype);
    if (c->dtype != RF_DTYPE_UINT8) {
        /* decode stages NHWC uint8; the conversion writes the requested layout */
        ld->tf.layout = RF_LAYOUT_NHWC;
        ld->conv = (rf_convert_desc){.kind = RF_CONV_IMAGES, .h = c->image_size,
                                     .w = c->image_size, .dtype = c->dtype, .layout = c->layout};
        memcpy(ld->conv.mean, c->mean, sizeof ld->conv.mean);
        memcpy(ld->conv.std, c->std, sizeof ld->conv.std);
    }
}

/* ld->cfg holds what apply_defaults resolved (and the resume state's seed); what create chose
 * afterwards for the remaining AUTO fields is read from the loader: the engine reading now
 * (an io_uring that failed its worker setup fell back to pread), the backend, the arena. */
int rf_loader_config(const rf_loader *ld, rf_config *out)
{
    if (!ld || !out || out->struct_size < 2 * sizeof(uint32_t))
        return RF_EINVAL;
    rf_config c = ld->cfg;
    c.struct_size = out->struct_size;
    c.io_engine = ld->iops == &rf_io_uring_ops ? RF_IO_URING : RF_IO_PREAD;
    c.device_kind = ld->bops->device_kind;
    c.prefetch_depth = ld->depth;
    c.staging_bytes = ld->arena_bytes;
    c.resume_state = NULL; /* the caller's blob, read at create and not kept */
    c.resume_state_bytes = 0;
    memcpy(out, &c, RF_MIN((size_t)out->struct_size, sizeof c));
    return 0;
}

static int copy_patterns(rf_loader *ld, rf_err *err)
{
    ld->patterns = calloc(ld->cfg.shard_count, sizeof *ld->patterns);
    if (!ld->patterns)
        return rf_seterr(err, RF_ENOMEM, "no memory");
    for (uint32_t i = 0; i < ld->cfg.shard_count; i++) {
        if (!ld->cfg.shards[i] || !(ld->patterns[i] = strdup(ld->cfg.shards[i])))
            return rf_seterr(err, RF_EINVAL, "shard pattern %u is NULL", i);
    }
    ld->cfg.shards = (const char *const *)ld->patterns;
    return 0;
}

/* Token files: no per-sample records (a corpus has millions of windows); windows are
 * computed from the file sizes (tok_first) when dispatched. */
static int open_tokens(rf_loader *ld, char **paths, uint32_t npaths, rf_err *err)
{
    uint64_t L = ld->cfg.seq_len, tb = ld->cfg.token_bytes;
    ld->tok_first = calloc((size_t)npaths + 1, sizeof *ld->tok_first);
    if (!ld->tok_first)
        return rf_seterr(err, RF_ENOMEM, "no memory");
    for (uint32_t i = 0; i < npaths; i++) {
        int fd;
        uint64_t size;
        rf_err oe = {0};
        int rc = rf_open_regular(paths[i], "a token file", RF_EFORMAT, &fd, &size, &oe);
        if (rc)
            return rf_seterr(err, rc, "%s: %s", paths[i], oe.msg);
        rc = rf_dataset_add_file(&ld->ds, paths[i], fd, size, err);
        if (rc) {
            close(fd); /* not owned by ds unless added */
            return rc;
        }
        if (size % tb)
            return rf_seterr(err, RF_EFORMAT, "%s: %llu bytes is not a whole number of %llu-byte "
                             "tokens", paths[i], (unsigned long long)size,
                             (unsigned long long)tb);
        uint64_t ntok = size / tb;
        ld->tok_first[i + 1] = ld->tok_first[i] + (ntok > L ? (ntok - 1) / L : 0);
    }
    ld->ds.nsamples = ld->tok_first[npaths];
    ld->ds.max_span = (L + 1) * tb;
    ld->ds.total_bytes = ld->ds.nsamples * ld->ds.max_span;
    if (ld->ds.nsamples == 0)
        return rf_seterr(err, RF_EFORMAT, "no token file holds seq_len + 1 = %llu tokens",
                         (unsigned long long)(L + 1));
    return 0;
}

static int open_dataset(rf_loader *ld, rf_err *err)
{
    char **paths = NULL;
    uint32_t npaths = 0;
    int rc = rf_expand_patterns(ld->cfg.shards, ld->cfg.shard_count, &paths, &npaths, err);
    if (rc)
        return rc;
    ld->ds.max_name = ld->cfg.max_name_bytes;
    if (ld->tokens)
        rc = open_tokens(ld, paths, npaths, err);
    else if (ld->cfg.source == RF_SOURCE_FOLDER)
        rc = rf_format_folder.open(&ld->ds, paths, npaths, ld->cfg.max_sample_bytes, err);
    else
        rc = rf_format_tar.open(&ld->ds, paths, npaths, ld->cfg.max_sample_bytes, err);
    rf_free_paths(paths, npaths);
    if (rc)
        return rc;
    if (ld->ds.nsamples == 0)
        return rf_seterr(err, RF_EFORMAT, "the shards hold no samples");
    return 0;
}

/* Shard boundaries for RF_ORDER_SHARD: samples are stored shard after shard. */
static int plan_shards(rf_loader *ld, rf_err *err)
{
    if (ld->cfg.order != RF_ORDER_SHARD)
        return 0;
    uint64_t *starts = calloc((size_t)ld->ds.nfiles + 1, sizeof *starts);
    if (!starts)
        return rf_seterr(err, RF_ENOMEM, "no memory");
    if (ld->tokens) {
        memcpy(starts, ld->tok_first, ((size_t)ld->ds.nfiles + 1) * sizeof *starts);
    } else {
        uint64_t i = 0; /* starts[f]: first sample of file f or later (empty shards allowed) */
        for (uint32_t f = 0; f <= ld->ds.nfiles; f++) {
            while (i < ld->ds.nsamples && ld->ds.samples[i].file < f)
                i++;
            starts[f] = i;
        }
    }
    int rc = rf_plan_set_shards(&ld->plan, starts, ld->ds.nfiles, ld->cfg.shard_window, err);
    free(starts);
    return rc;
}

static int choose_backend(rf_loader *ld, rf_err *err)
{
    uint32_t kind = ld->cfg.device_kind;
    /* CUDA is queried only when it may be used: a host loader never initializes the CUDA
     * runtime, so a process that forks after creating one has no CUDA state to inherit. */
    if (kind == RF_DEVICE_AUTO)
        kind = rf_backend_cuda_count() > 0 ? RF_DEVICE_CUDA : RF_DEVICE_HOST;
    if (kind == RF_DEVICE_CUDA) {
#ifdef RINGFEED_HAVE_CUDA
        ld->bops = ld->cfg.naive ? &rf_backend_cuda_naive : &rf_backend_cuda;
#else
        char why[RF_ERRMSG_MAX / 2];
        rf_backend_cuda_status(why, sizeof why);
        return rf_seterr(err, RF_ENODEV, "device_kind CUDA requested, but %s", why);
#endif
    } else {
        ld->bops = &rf_backend_host;
    }
    ld->gj = ld->cfg.gpu_decode || ld->cfg.hw_decode_percent;
    ld->gj_device = ld->gj && ld->bops->device_kind == RF_DEVICE_CUDA;
    const char *what = ld->cfg.gpu_decode ? "gpu_decode" : "hw_decode_percent";
    if (ld->gj_device && ld->cfg.naive)
        return rf_seterr(err, RF_EINVAL, "%s needs the pipelined CUDA backend, not the naive "
                         "baseline", what);
    if (ld->gj_device && ld->skip)
        return rf_seterr(err, RF_EINVAL, "%s on the CUDA backend needs on_error = FAIL: a "
                         "corrupt file is found only after its batch was decoded, when the "
                         "sample can no longer be replaced", what);
    int rc = ld->bops->create(ld->cfg.device_index, ld->depth, &ld->backend, err);
    /* The hardware decoders are opened now, so a GPU without them or a missing libnvjpeg is
     * an error from create, not from the first batch. */
    if (rc == 0 && ld->gj_device && ld->cfg.hw_decode_percent)
        rc = ld->bops->engine_open
                 ? ld->bops->engine_open(ld->backend, ld->batch, err)
                 : rf_seterr(err, RF_EINVAL, "hw_decode_percent: the %s backend has no "
                             "hardware JPEG decoder", ld->bops->name);
    return rc;
}

static int alloc_ring(rf_loader *ld, rf_err *err)
{
    uint32_t B = ld->batch;
    /* Per slot, in pinned memory: staged samples, labels (both copied to the device), and on
     * the host backend with a conversion the converted output. Sizes are checked for
     * overflow: batch_size x image_size^2 comes from the caller and may not fit. */
#define PAGE_UP(x) (((x) + 4095) / 4096 * 4096)
    ld->host_convert = ld->conv.kind != RF_CONV_NONE && ld->bops->device_kind == RF_DEVICE_HOST;
    size_t img, lab, outb = 0, per, ring;
    const char *kind = ld->bops->device_kind == RF_DEVICE_CUDA && !ld->cfg.naive ? "pinned"
                                                                                  : "host";
    char conv[96] = "";
    if (ld->host_convert)
        snprintf(conv, sizeof conv, " + batch %u x %llu bytes converted", B,
                 (unsigned long long)ld->out_bytes);
    /* GPU decode on the device: a slot holds batch x max(decoded sample, RF_GJ_AREA) bytes
     * that its packets and CPU-decoded samples share (gj_place_device). Host GPU decode builds
     * packets in a per-thread buffer and writes pixels into the slot. */
    ld->gj_cap = RF_MAX(ld->stage_bytes, (uint64_t)RF_GJ_AREA);
    ld->gj_px = (ld->stage_bytes + RF_GJ_ALIGN - 1) / RF_GJ_ALIGN * RF_GJ_ALIGN;
    ld->stride = ld->gj_device ? RF_MAX(ld->gj_px, (uint64_t)RF_GJ_AREA) : ld->stage_bytes;
    lab = (size_t)B * sizeof(int32_t);
    if (ld->gj_device) /* GPU decode: status, offsets and flags per sample after the labels */
        lab += (size_t)B * (sizeof(int32_t) + sizeof(uint64_t) + 1);
    /* img and outb at most half and a quarter of SIZE_MAX, labels below 2^34 bytes: their
     * page-rounded sum cannot wrap, so only the products need checking. */
    if (__builtin_mul_overflow((size_t)B, (size_t)ld->stride, &img) || img > SIZE_MAX / 2 ||
        (ld->host_convert &&
         (__builtin_mul_overflow((size_t)B, (size_t)ld->out_bytes, &outb) || outb > SIZE_MAX / 4)) ||
        __builtin_mul_overflow(PAGE_UP(img) + PAGE_UP(lab) + PAGE_UP(outb), (size_t)ld->depth,
                               &ring))
        return rf_seterr(err, RF_ENOMEM, "cannot allocate the %s batch ring: prefetch_depth %u x "
                         "(batch %u x %llu bytes per sample%s + labels) exceeds %zu bytes: out "
                         "of memory", kind, ld->depth, B, (unsigned long long)ld->stage_bytes,
                         conv, SIZE_MAX);
    img = PAGE_UP(img);
    lab = PAGE_UP(lab);
    outb = PAGE_UP(outb);
    per = img + lab + outb;
    ld->ring_bytes = ring;
    char hw[160] = "";
    int rc = RF_ENOMEM;
    if (!alloc_refused(ld, "batch ring", ld->ring_bytes))
        rc = rf_ringmem_alloc(ld->bops, ld->backend, ld->ring_bytes, (int)ld->cfg.hugepages,
                              &ld->rmem, hw, sizeof hw);
    ld->ring = rc ? NULL : ld->rmem.ptr;
    ld->pinned = ld->rmem.pinned;
    if (hw[0])
        mem_why(ld, "hugepages: %s", hw);
    if (!ld->ring)
        return rf_seterr(err, RF_ENOMEM, "cannot allocate the %zu-byte %s batch ring "
                         "(prefetch_depth %u x (batch %u x %llu bytes per sample%s + labels), "
                         "page-rounded): out of memory", ld->ring_bytes, kind, ld->depth, B,
                         (unsigned long long)ld->stage_bytes, conv);
    /* ids, positions, keys (8 bytes each) and padding (1) per sample of every slot */
    size_t tables = (size_t)ld->depth * (sizeof *ld->slots + (size_t)B * 25);
    ld->slots = alloc_refused(ld, "slot tables", tables) ? NULL
                                                         : calloc(ld->depth, sizeof *ld->slots);
    if (!ld->slots)
        return rf_seterr(err, RF_ENOMEM, "cannot allocate %zu bytes of slot tables "
                         "(prefetch_depth %u x batch %u samples): out of memory", tables,
                         ld->depth, B);
    for (uint32_t i = 0; i < ld->depth; i++) {
        slot *s = &ld->slots[i];
        s->stage = ld->ring + per * i;
        s->labels = (int32_t *)(s->stage + img);
        if (ld->gj_device) { /* labels are page-aligned, so the offsets are 8-byte aligned */
            s->gj_status = s->labels + B;
            s->gj_offs = (uint64_t *)(s->labels + 2 * (size_t)B);
            s->gj_flags = (uint8_t *)(s->gj_offs + B);
        }
        s->out = ld->host_convert ? s->stage + img + lab : NULL;
        s->ids = calloc(B, sizeof *s->ids);
        s->positions = calloc(B, sizeof *s->positions);
        s->padding = calloc(B, 1);
        s->keys = calloc(B, sizeof *s->keys);
        if (!s->ids || !s->positions || !s->padding || !s->keys)
            return rf_seterr(err, RF_ENOMEM, "cannot allocate %zu bytes of slot tables "
                             "(prefetch_depth %u x batch %u samples): out of memory", tables,
                             ld->depth, B);
    }
    /* Staging: enough for every decode thread to have work queued behind it plus a full
     * queue of reads, and never less than a few of the largest samples. */
    uint64_t mean = ld->ds.total_bytes / ld->ds.nsamples + 1;
    uint64_t want = ld->cfg.staging_bytes;
    if (!want)
        want = RF_MAX(64ull << 20, mean * 8 * (ld->cfg.decode_threads + ld->cfg.io_queue_depth));
    want = RF_MAX(want, 4 * ld->ds.max_span);
    if (rf_pc_odirect(ld->pc)) /* aligned reads are up to two blocks longer than the span */
        want = RF_MAX(want, 4 * (ld->ds.max_span + 2 * rf_pc_align(ld->pc)));
    if (ld->tokens) /* token windows are read straight into the slots */
        want = 1u << 20;
    ld->arena_bytes = (want + 4095) / 4096 * 4096;
    if (ld->arena_bytes > SIZE_MAX || alloc_refused(ld, "staging arena", ld->arena_bytes))
        ld->arena = NULL;
    else
        ld->arena = aligned_alloc(4096, ld->arena_bytes);
    if (!ld->arena)
        return rf_seterr(err, RF_ENOMEM, "cannot allocate the %llu-byte staging arena for reads "
                         "(%s; largest sample %llu bytes): out of memory",
                         (unsigned long long)ld->arena_bytes,
                         ld->cfg.staging_bytes ? "staging_bytes as configured"
                                               : "the default: set staging_bytes to choose",
                         (unsigned long long)ld->ds.max_span);
    ld->ntasks = (uint32_t)RF_MIN((uint64_t)B * ld->depth + ld->cfg.io_queue_depth *
                                      RF_MAX(1u, ld->cfg.io_threads) + 64, 1u << 20);
    size_t tbytes = (size_t)ld->ntasks * (sizeof *ld->tasks + sizeof *ld->decq);
    if (!alloc_refused(ld, "task ring", tbytes)) {
        ld->tasks = calloc(ld->ntasks, sizeof *ld->tasks);
        ld->decq = calloc(ld->ntasks, sizeof *ld->decq);
        ld->decoders = calloc(ld->cfg.decode_threads, sizeof *ld->decoders);
        ld->decs = calloc(ld->cfg.decode_threads, sizeof *ld->decs);
    }
    if (!ld->tasks || !ld->decq || !ld->decoders || !ld->decs)
        return rf_seterr(err, RF_ENOMEM, "cannot allocate the %zu-byte task ring (%u tasks) "
                         "and tables for %u decode threads: out of memory", tbytes, ld->ntasks,
                         ld->cfg.decode_threads);
    for (uint32_t i = 0; i < ld->cfg.decode_threads; i++)
        if (alloc_refused(ld, "decoder", 0) || !(ld->decs[i] = rf_decoder_create(&ld->limits)))
            return rf_seterr(err, RF_ENOMEM, "cannot create JPEG decoder %u of %u: out of memory",
                             i + 1, ld->cfg.decode_threads);
        else if (ld->cfg.dct_scaling == RF_DCT_SCALING_OFF)
            rf_decoder_set_max_scale_denom(ld->decs[i], 1);
    /* Two batches of slack beyond the ring: a slow consumer stream delays reuse. Per copy
     * stream, temporaries: the staged copy a conversion or GPU decode reads, and for GPU
     * decode its scratch, status and flags, plus the decoded batch when a conversion follows. */
    int cv = ld->conv.kind != RF_CONV_NONE;
    size_t staged = (size_t)B * ld->stride, outs = (size_t)B * (cv ? ld->out_bytes : ld->stage_bytes);
    size_t temp = cv ? staged : 0;
    /* GPU decode's scratch is what the batch's packets take (~0.2-0.6 MiB each for 224 crops
     * of ImageNet-sized photos): half the per-sample maximum is reserved, and a batch of
     * larger crops grows the pool once (counted in device_allocs_after_create). */
    if (ld->gj_device)
        temp = staged + (cv ? (size_t)B * ld->stage_bytes : 0) +
               (size_t)B * (RF_GJ_SCRATCH / 2 + sizeof(int32_t) + sizeof(uint64_t) + 1);
    if (ld->bops->device_kind == RF_DEVICE_CUDA &&
        alloc_refused(ld, "device pool", (size_t)(ld->depth + 2) * outs))
        return rf_seterr(err, RF_ENOMEM, "cannot reserve the %zu-byte device pool on cuda:%d "
                         "(%u batches x %zu bytes): out of memory (refused by a test hook)",
                         (size_t)(ld->depth + 2) * outs, ld->cfg.device_index, ld->depth + 2,
                         outs);
    return ld->bops->reserve(ld->backend, ld->depth + 2, outs, B, temp, err);
}

/* Page-cache state (O_DIRECT descriptors, residency maps) and the NUMA node to use. */
static int mem_setup(rf_loader *ld, rf_err *err)
{
    char why[160] = "";
    uint64_t b0 = rf_io_acct_thread_bytes(); /* the O_DIRECT probe reads from storage */
    if (rf_pc_create(&ld->ds, ld->cfg.odirect && !ld->tokens, &ld->pc, why, sizeof why))
        return rf_seterr(err, RF_ENOMEM, "no memory for the page-cache state");
    ld->storage_create += rf_io_acct_thread_bytes() - b0;
    if (ld->cfg.odirect && ld->tokens)
        mem_why(ld, "odirect: not for token files (read straight into the slots)");
    else if (ld->cfg.odirect)
        mem_why(ld, "odirect: %s", why);
    ld->warm_on = ld->cfg.warm && !rf_pc_odirect(ld->pc);
    if (ld->cfg.warm && !ld->warm_on)
        mem_why(ld, "warm: off under O_DIRECT (reads bypass the cache)");
    ld->numa_nodes = rf_numa_nodes();
    ld->numa_node = -1;
    if (ld->cfg.numa != RF_NUMA_AUTO || ld->numa_nodes < 2)
        return 0;
    int node = ld->bops->numa_node(ld->backend);
    rf_numa_scope sc;
    if (node < 0) {
        mem_why(ld, "numa: %u nodes, device node unknown: no placement", ld->numa_nodes);
    } else if (rf_numa_enter(node, &sc, why, sizeof why) == 0) {
        rf_numa_leave(&sc);
        ld->numa_node = node;
        mem_why(ld, "numa: threads and ring on node %d of %u", node, ld->numa_nodes);
    } else {
        mem_why(ld, "numa: node %d: %s: no placement", node, why);
    }
    return 0;
}

/* Ring and threads are created inside a scope on the NUMA node (inherited placement). */
static int alloc_ring_placed(rf_loader *ld, rf_err *err)
{
    rf_numa_scope sc;
    char why[96];
    rf_numa_enter(ld->numa_node, &sc, why, sizeof why);
    int rc = alloc_ring(ld, err);
    rf_numa_leave(&sc);
    rf_backend_stats bs;
    memset(&bs, 0, sizeof bs);
    ld->bops->stats(ld->backend, &bs);
    ld->host_allocs0 = bs.host_allocs;
    return rc;
}

static int pipeline_start_placed(rf_loader *ld, uint64_t epoch, uint64_t base, rf_err *err)
{
    rf_numa_scope sc;
    char why[96];
    rf_numa_enter(ld->numa_node, &sc, why, sizeof why);
    int rc = pipeline_start(ld, epoch, base, err);
    rf_numa_leave(&sc);
    return rc;
}

/* src/pipeline/testing.h: the test's hook behind the engine's rf_io_complete. */
static int io_fault(void *ctx, const rf_io_req *req, int res)
{
    rf_loader *ld = ctx;
    return ld->hooks.io(ld->hooks.io_ctx, req, res);
}

/* Whether the bytes read from storage can be measured for this data set: the kernel must keep
 * per-thread I/O accounting, and no file may be on a file system it never sees (FUSE). Files
 * opened per read (large folders) are checked through the first one. */
static void storage_setup(rf_loader *ld)
{
    ld->storage_on = rf_io_acct_supported(ld->storage_why, sizeof ld->storage_why);
    for (uint32_t i = 0; ld->storage_on && i < ld->ds.nfiles; i++) {
        const rf_file *f = &ld->ds.files[i];
        if (f->fd >= 0 || i == 0)
            ld->storage_on = rf_io_acct_file_ok(f->fd, f->path, ld->storage_why,
                                                sizeof ld->storage_why);
    }
}

static int choose_io(rf_loader *ld, rf_err *err)
{
    int rc = rf_io_select(ld->cfg.io_engine, &ld->iops, ld->io_why, sizeof ld->io_why);
    if (rc)
        return rf_seterr(err, rc, "%s", ld->io_why);
    /* GPU decode reads up to 16 GB/s of JPEG bytes, and one io_uring thread copies ~5 GB/s
     * out of the page cache: one I/O thread per three decode threads, up to 4 (H200: 4 decode
     * threads gave 42k img/s with one, 62k with two; 16 threads 106k with four, 101k with two;
     * 1 decode thread is no faster with a second; docs/gpu-decode.md). */
    if (!ld->cfg.io_threads)
        ld->cfg.io_threads = ld->iops != &rf_io_uring_ops ? 4 : !ld->gj_device ? 1
                                 : RF_MIN(4, (ld->cfg.decode_threads + 2) / 3);
    ld->iop = (rf_io_params){.threads = ld->cfg.io_threads,
                             .queue_depth = ld->cfg.io_queue_depth,
                             .max_retries = ld->cfg.io_retries,
                             .arena = ld->arena,
                             .arena_bytes = ld->arena_bytes};
    storage_setup(ld);
    ld->iop.flags = (ld->storage_on ? RF_IO_ACCOUNT : 0) |
                    (ld->hooks.io_async ? RF_IO_FORCE_ASYNC : 0);
    ld->src = (rf_io_source){.take = io_take, .done = io_done, .ctx = ld,
                             .fault = ld->hooks.io ? io_fault : NULL};
    return 0;
}

static int apply_resume(rf_loader *ld, uint64_t *epoch, uint64_t *base, rf_err *err)
{
    *epoch = ld->cfg.start_epoch;
    *base = 0;
    if (!ld->cfg.resume_state)
        return 0;
    rf_resume r;
    int rc = rf_state_decode(ld->cfg.resume_state, ld->cfg.resume_state_bytes, &r, err);
    if (rc)
        return rc;
    if (r.n != ld->ds.nsamples)
        return rf_seterr(err, RF_ERESUME,
                         "resume state is for a dataset of %llu samples, these shards hold %llu",
                         (unsigned long long)r.n, (unsigned long long)ld->ds.nsamples);
    if (r.order != ld->cfg.order)
        return rf_seterr(err, RF_ERESUME, "resume state was saved with order %u, config has %u",
                         r.order, ld->cfg.order);
    ld->plan.seed = ld->cfg.seed = r.seed;
    *epoch = r.epoch;
    *base = r.consumed;
    return 0;
}

static int create_loader(const rf_config *cfg, const rf_test_hooks *hooks, rf_loader **out,
                         char *out_error, size_t error_len)
{
    rf_err err = {0};
    int rc;
    if (out)
        *out = NULL;
    if (!cfg || !out) {
        rc = rf_seterr(&err, RF_EINVAL, "cfg and out must not be NULL");
        goto report;
    }
    rf_loader *ld = calloc(1, sizeof *ld);
    if (!ld) {
        rc = rf_seterr(&err, RF_ENOMEM, "no memory for the loader");
        goto report;
    }
    ld->created_ns = rf_now_ns();
    ld->pid = getpid();
    if (hooks)
        ld->hooks = *hooks;
    memcpy(&ld->cfg, cfg, RF_MIN(sizeof ld->cfg, (size_t)cfg->struct_size));
    pthread_mutex_init(&ld->mu, NULL);
    pthread_cond_init(&ld->cv_io, NULL);
    pthread_cond_init(&ld->cv_dec, NULL);
    /* cv_out on the monotonic clock: next_timeout_ms must not move with the wall clock */
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&ld->cv_out, &ca);
    pthread_condattr_destroy(&ca);
    if ((rc = apply_defaults(&ld->cfg, &err)) || (rc = copy_patterns(ld, &err)))
        goto fail;
    ld->batch = ld->cfg.batch_size;
    ld->depth = ld->cfg.prefetch_depth;
    ld->tokens = ld->cfg.source == RF_SOURCE_TOKENS;
    ld->tf = (rf_transform){.crop = ld->cfg.crop,
                            .size = ld->cfg.image_size,
                            .resize_shorter = ld->cfg.resize_shorter,
                            .layout = ld->cfg.layout,
                            .scale_min = ld->cfg.scale_min,
                            .scale_max = ld->cfg.scale_max,
                            .ratio_min = ld->cfg.ratio_min,
                            .ratio_max = ld->cfg.ratio_max,
                            .flip_prob = ld->cfg.flip_prob};
    ld->limits = (rf_decode_limits){.max_pixels = ld->cfg.max_image_pixels,
                                    .max_dim = ld->cfg.max_image_dim,
                                    .max_scans = ld->cfg.max_scans};
    ld->skip = ld->cfg.on_error == RF_ON_ERROR_SKIP;
    setup_output(ld);
    /* Scanning tar headers reads from storage (and its readahead takes in more): counted in
     * storage_read_bytes, or the first epoch would show those pages as hits. */
    uint64_t b0 = rf_io_acct_thread_bytes();
    if ((rc = open_dataset(ld, &err)))
        goto fail;
    ld->storage_create = rf_io_acct_thread_bytes() - b0;
    if ((rc = rf_plan_init(&ld->plan, ld->ds.nsamples, ld->cfg.seed, ld->cfg.order, ld->batch,
                           ld->cfg.drop_last, ld->cfg.remainder, ld->cfg.rank,
                           ld->cfg.world_size, &err)) ||
        (rc = plan_shards(ld, &err)))
        goto fail;
    uint64_t epoch, base;
    if ((rc = apply_resume(ld, &epoch, &base, &err)) || (rc = choose_backend(ld, &err)) ||
        (rc = mem_setup(ld, &err)) || (rc = alloc_ring_placed(ld, &err)) ||
        (rc = skip_setup(ld, &err)) ||
        (rc = choose_io(ld, &err)) || (rc = pipeline_start_placed(ld, epoch, base, &err)))
        goto fail;
    *out = ld;
    return 0;
fail:
    rf_loader_destroy(ld);
report:
    if (out_error && error_len)
        snprintf(out_error, error_len, "%s", err.msg);
    return rc;
}

int rf_loader_create(const rf_config *cfg, rf_loader **out, char *out_error, size_t error_len)
{
    return create_loader(cfg, NULL, out, out_error, error_len);
}

int rf_loader_create_faulty(const rf_config *cfg, rf_fault_fn fault, void *ctx, rf_loader **out,
                            char *out_error, size_t error_len)
{
    rf_test_hooks h = {.io = fault, .io_ctx = ctx};
    return create_loader(cfg, &h, out, out_error, error_len);
}

int rf_loader_create_hooked(const rf_config *cfg, const rf_test_hooks *hooks, rf_loader **out,
                            char *out_error, size_t error_len)
{
    return create_loader(cfg, hooks, out, out_error, error_len);
}

void rf_loader_destroy(rf_loader *ld)
{
    if (!ld)
        return;
    if (forked(ld)) {
        /* A fork() child's copy: deliberately leaked. Its threads do not exist here, `mu` may
         * have been copied locked, and structures may have been copied mid-update by those
         * threads; the io_uring rings and the CUDA context are the parent's. Walking any of it
         * could hang or crash, and closing nothing leaves the parent untouched. The memory is
         * the child's copy-on-write view, returned when the child exits or execs (every
         * descriptor ringfeed opens is O_CLOEXEC). */
        fork_error(ld);
        return;
    }
    pipeline_stop(ld);
    if (ld->decs)
        for (uint32_t i = 0; i < ld->cfg.decode_threads; i++)
            rf_decoder_destroy(ld->decs[i]);
    free(ld->decs);
    free(ld->decoders);
    if (ld->slots)
        for (uint32_t i = 0; i < ld->depth; i++) {
            free(ld->slots[i].ids);
            free(ld->slots[i].positions);
            free(ld->slots[i].padding);
            free(ld->slots[i].keys);
        }
    free(ld->slots);
    if (ld->rmem.ptr)
        rf_ringmem_free(ld->bops, ld->backend, &ld->rmem);
    if (ld->backend)
        ld->bops->destroy(ld->backend);
    free(ld->arena);
    free(ld->tasks);
    free(ld->decq);
    free(ld->skst);
    free(ld->skq);
    free(ld->tok_first);
    rf_pc_destroy(ld->pc); /* before the dataset: it unmaps by file size */
    rf_plan_free(&ld->plan);
    rf_dataset_free(&ld->ds);
    if (ld->patterns)
        for (uint32_t i = 0; i < ld->cfg.shard_count; i++)
            free(ld->patterns[i]);
    free(ld->patterns);
    pthread_mutex_destroy(&ld->mu);
    pthread_cond_destroy(&ld->cv_io);
    pthread_cond_destroy(&ld->cv_dec);
    pthread_cond_destroy(&ld->cv_out);
    free(ld);
}

/* ---- consumer ----------------------------------------------------------------------------*/

static void fill_batch(rf_loader *ld, slot *s)
{
    rf_batch *b = &s->batch;
    int cuda = ld->bops->device_kind == RF_DEVICE_CUDA;
    uint32_t H = ld->cfg.image_size;
    b->struct_size = sizeof *b;
    b->data = cuda ? s->dev.data : ld->host_convert ? s->out : s->stage;
    b->data_bytes = (uint64_t)b->count * ld->out_bytes;
    if (ld->tokens) {
        b->shape[0] = b->count, b->shape[1] = ld->cfg.seq_len + 1, b->shape[2] = 1,
        b->shape[3] = 1;
    } else if (ld->cfg.layout == RF_LAYOUT_NHWC) {
        b->shape[0] = b->count, b->shape[1] = H, b->shape[2] = H, b->shape[3] = 3;
    } else {
        b->shape[0] = b->count, b->shape[1] = 3, b->shape[2] = H, b->shape[3] = H;
    }
    b->dtype = ld->out_dtype;
    b->layout = ld->cfg.layout;
    b->device_kind = ld->bops->device_kind;
    b->device_index = cuda ? ld->cfg.device_index : -1;
    b->labels = s->labels;
    b->labels_device = cuda ? s->dev.labels : NULL;
    b->keys = s->keys;
    b->sample_ids = s->ids;
    b->positions = s->positions;
    b->is_padding = s->padding;
    b->event = s->dev.event;
    b->ndim = ld->tokens ? 2 : 4;
}

/* The consumer is handed slot s's batch: it joins the counts of its epoch (a batch of another
 * epoch than the counted one starts them afresh). */
static void count_epoch(rf_loader *ld, const slot *s)
{
    epoch_counts *ep = &ld->ep;
    if (s->batch.epoch != ep->epoch)
        *ep = (epoch_counts){.epoch = s->batch.epoch};
    ep->total = s->epoch_total;
    for (uint32_t i = 0; i < s->batch.count; i++)
        ep->delivered += !s->padding[i];
    ep->skipped += s->skipped;
    for (int r = 0; r < RF_SKIP_REASONS; r++)
        ep->skipped_by[r] += s->skipped_by[r];
}

/* The consumer's next batch is in slot s, delivered or failed (mu held). */
static int batch_due(const rf_loader *ld, const slot *s)
{
    return (s->state == SLOT_READY || s->state == SLOT_BAD) && s->seq == ld->c_seq;
}

/* rf_loader_next gave up after next_timeout_ms (mu held): where the awaited batch is, what the
 * pipeline holds, and the oldest sample not through it yet, by file and offset. A read stuck
 * in the kernel (a hung network file system), a decode stuck in a library and a device submit
 * that never returns each read differently here. */
static void describe_stall(const rf_loader *ld, const slot *s, char *buf, size_t n)
{
    uint32_t in[3] = {0};
    const task *oldest = NULL;
    for (uint64_t q = ld->task_tail; q < ld->task_head; q++) {
        const task *t = &ld->tasks[q % ld->ntasks];
        if (atomic_load(&t->finished))
            continue;
        in[t->phase]++;
        if (!oldest)
            oldest = t;
    }
    static const char *const phase[] = {"reading", "waiting for a decode thread", "decoding"};
    char batch[96], where[RF_ERRMSG_MAX / 2] = "none";
    uint32_t pending = atomic_load(&s->pending);
    if (s->seq != ld->c_seq || s->state == SLOT_FREE)
        snprintf(batch, sizeof batch, "not started (its slot is not open yet)");
    else if (pending)
        snprintf(batch, sizeof batch, "%u of its %u samples still to come", pending,
                 s->batch.count);
    else
        snprintf(batch, sizeof batch, "all %u samples in, being submitted to the %s backend",
                 s->batch.count, ld->bops->name);
    if (oldest) {
        describe_task(ld, oldest, where, sizeof where);
        size_t k = strlen(where);
        snprintf(where + k, sizeof where - k, " (%s)", phase[oldest->phase]);
    }
    snprintf(buf, n, "no batch in %u ms (next_timeout_ms; nothing is lost: call again to keep "
             "waiting). Batch %llu of epoch %llu: %s. In the pipeline: %u reads in flight, %u "
             "samples waiting for a decode thread, %u being decoded. Oldest unfinished sample: "
             "%s", ld->cfg.next_timeout_ms, (unsigned long long)ld->c_k,
             (unsigned long long)ld->c_epoch, batch, in[TASK_READING], in[TASK_QUEUED],
             in[TASK_DECODING], where);
}

int rf_loader_next(rf_loader *ld, rf_batch **out)
{
    if (!ld || !out)
        return RF_EINVAL;
    *out = NULL;
    if (forked(ld))
        return fork_error(ld);
    if (ld->stopped)
        return stopped_error(ld);
    if (ld->c_done)
        return RF_DONE;
    if (ld->c_k == ld->c_batches) {
        /* The consumer crossed an epoch boundary: say so once, then follow the dispatcher
         * into the next epoch (which always starts at order position 0). Every batch of the
         * epoch was handed out, and with it every skip it had: its counts are final. */
        if (ld->ep.epoch == ld->c_epoch)
            ld->ep.final = 1;
        ld->c_epochs_done++;
        if (ld->cfg.epochs && ld->c_epochs_done >= ld->cfg.epochs) {
            ld->c_done = 1;
            return RF_EPOCH_END;
        }
        ld->c_epoch++;
        ld->c_base = 0;
        ld->c_k = 0;
        uint64_t per;
        rf_plan_shape(&ld->plan, 0, &per, &ld->c_batches);
        return RF_EPOCH_END;
    }
    uint64_t t0 = rf_now_ns();
    slot *s = &ld->slots[ld->c_seq % ld->depth];
    pthread_mutex_lock(&ld->mu);
    if (s->state == SLOT_LEASED) {
        /* The slot this batch needs is still held by the consumer: waiting would never end. */
        pthread_mutex_unlock(&ld->mu);
        return set_last(ld, &(rf_err){.code = RF_ESTATE,
                                      .msg = "every prefetch slot is leased: release a batch "
                                             "before asking for the next one"});
    }
    struct timespec deadline;
    if (ld->cfg.next_timeout_ms) {
        uint64_t end = t0 + (uint64_t)ld->cfg.next_timeout_ms * 1000000u;
        deadline = (struct timespec){(time_t)(end / 1000000000u), (long)(end % 1000000000u)};
    }
    int expired = 0;
    while (!ld->err.code && !batch_due(ld, s) && !expired) {
        if (ld->cfg.next_timeout_ms)
            expired = pthread_cond_timedwait(&ld->cv_out, &ld->mu, &deadline) == ETIMEDOUT;
        else
            pthread_cond_wait(&ld->cv_out, &ld->mu);
    }
    if (expired && !ld->err.code && !batch_due(ld, s)) {
        /* not sticky: the pipeline goes on, and the next call waits again */
        ld->last.code = RF_ETIMEDOUT;
        describe_stall(ld, s, ld->last.msg, sizeof ld->last.msg);
        pthread_mutex_unlock(&ld->mu);
        ld->wait_ns += rf_now_ns() - t0;
        return RF_ETIMEDOUT;
    }
    if (!ld->err.code && s->state == SLOT_BAD)
        fail_locked(ld, s->bad.code, s->bad.msg); /* this batch holds the first bad sample */
    int rc = ld->err.code;
    if (rc) {
        ld->last = ld->err;
    } else {
        s->state = SLOT_LEASED;
        ld->leased++;
    }
    pthread_mutex_unlock(&ld->mu);
    if (!rc && ld->gj_device) {
        rf_err e = {0};
        if ((rc = gj_check(ld, s, &e)) != 0) {
            pthread_mutex_lock(&ld->mu);
            fail_locked(ld, rc, e.msg);
            ld->last = ld->err;
            s->state = SLOT_READY; /* not handed out: stop releases it; later calls fail */
            ld->leased--;
            pthread_mutex_unlock(&ld->mu);
        }
    }
    ld->wait_ns += rf_now_ns() - t0;
    if (rc)
        return rc;
    fill_batch(ld, s);
    count_epoch(ld, s);
    ld->c_seq++;
    ld->c_k++;
    ld->delivered += s->batch.count;
    ld->batches_out++;
    *out = &s->batch;
    return 0;
}

int rf_loader_release(rf_loader *ld, rf_batch *batch, void *stream)
{
    if (!ld || !batch)
        return RF_EINVAL;
    if (forked(ld))
        return fork_error(ld);
    slot *s = NULL;
    for (uint32_t i = 0; i < ld->depth; i++)
        if (&ld->slots[i].batch == batch)
            s = &ld->slots[i];
    rf_err e = {0};
    /* The state is read under mu: a slot released before is FREE and the dispatcher may be
     * reopening it (FILLING) right now (a data race TSan found with a double release). Once
     * seen LEASED it stays so until this thread frees it: only the consumer leaves LEASED. */
    int leased = 0;
    if (s) {
        pthread_mutex_lock(&ld->mu);
        leased = s->state == SLOT_LEASED;
        pthread_mutex_unlock(&ld->mu);
    }
    if (!leased)
        return set_last(ld, &(rf_err){.code = RF_ESTATE,
                                      .msg = "batch is not leased from this loader (released "
                                             "twice?)"});
    int rc = backend_release(ld, s, stream, &e);
    pthread_mutex_lock(&ld->mu);
    s->state = SLOT_FREE;
    ld->leased--;
    if (rc)
        fail_locked(ld, rc, e.msg);
    pthread_cond_broadcast(&ld->cv_io);
    pthread_mutex_unlock(&ld->mu);
    return rc ? set_last(ld, &e) : 0;
}

int rf_batch_wait(const rf_batch *batch, void *stream)
{
    if (!batch)
        return RF_EINVAL;
    if (batch->device_kind != RF_DEVICE_CUDA)
        return 0;
#ifdef RINGFEED_HAVE_CUDA
    return rf_backend_cuda.wait(batch->event, stream);
#else
    return RF_ENODEV;
#endif
}

int rf_batch_synchronize(const rf_batch *batch)
{
    if (!batch)
        return RF_EINVAL;
    if (batch->device_kind != RF_DEVICE_CUDA)
        return 0;
#ifdef RINGFEED_HAVE_CUDA
    return rf_backend_cuda.sync(batch->event);
#else
    return RF_ENODEV;
#endif
}

const char *rf_last_error(const rf_loader *ld)
{
    if (!ld)
        return "";
    return ld->last.msg;
}

uint64_t rf_loader_batches_per_epoch(const rf_loader *ld)
{
    uint64_t per, batches;
    rf_plan_shape(&ld->plan, 0, &per, &batches);
    return batches;
}

uint64_t rf_loader_num_samples(const rf_loader *ld) { return ld->ds.nsamples; }

int rf_loader_set_epoch(rf_loader *ld, uint64_t epoch)
{
    if (!ld)
        return RF_EINVAL;
    if (forked(ld))
        return fork_error(ld);
    if (ld->stopped)
        return stopped_error(ld);
    if (ld->leased)
        return set_last(ld, &(rf_err){.code = RF_ESTATE,
                                      .msg = "release every batch before set_epoch"});
    if (ld->err.code)
        return set_last(ld, &ld->err);
    pipeline_stop(ld);
    ld->c_done = 0;
    ld->c_epochs_done = 0;
    rf_err e = {0};
    int rc = pipeline_start_placed(ld, epoch, 0, &e);
    if (rc) {
        fail(ld, rc, e.msg);
        return set_last(ld, &e);
    }
    return 0;
}

/* Where a state written now resumes: the consumer's epoch and its order positions consumed
 * over all ranks, or the next epoch's start once this rank was handed all of its batches. */
static void resume_point(const rf_loader *ld, uint64_t *epoch, uint64_t *consumed)
{
    uint64_t per;
    rf_plan_shape(&ld->plan, ld->c_base, &per, &(uint64_t){0});
    uint64_t taken = ld->c_k * ld->batch; /* samples this rank consumed in the epoch */
    if (ld->c_k >= ld->c_batches || taken >= per) {
        *epoch = ld->c_epoch + 1;
        *consumed = 0;
    } else {
        *epoch = ld->c_epoch;
        *consumed = RF_MIN(ld->ds.nsamples, ld->c_base + taken * ld->cfg.world_size);
    }
}

int rf_loader_stop(rf_loader *ld)
{
    if (!ld)
        return RF_EINVAL;
    if (forked(ld))
        return fork_error(ld);
    threads_stop(ld);
    slots_return(ld, 1);
    ld->stopped = 1;
    return 0;
}

int rf_loader_state(const rf_loader *ld, void *buf, uint64_t cap, uint64_t *len)
{
    if (!ld || !len)
        return RF_EINVAL;
    if (forked(ld))
        return fork_error(ld);
    *len = RF_STATE_BYTES;
    if (!buf)
        return 0;
    if (cap < RF_STATE_BYTES)
        return RF_EINVAL;
    rf_resume r = {.seed = ld->cfg.seed,
                   .n = ld->ds.nsamples,
                   .world = ld->cfg.world_size,
                   .rank = ld->cfg.rank,
                   .order = ld->cfg.order,
                   .batch = ld->batch};
    resume_point(ld, &r.epoch, &r.consumed);
    rf_state_encode(&r, buf);
    return 0;
}

void rf_stats_init(rf_stats *st)
{
    memset(st, 0, sizeof *st);
    st->struct_size = sizeof *st;
}

/* The memory-hierarchy fields of rf_stats (docs/tuning.md). */
static void mem_stats(const rf_loader *ld, rf_stats *st)
{
    rf_pc_stats pc;
    rf_pc_stats_get(ld->pc, &pc);
    st->cache_checked_bytes = pc.checked_bytes;
    st->cache_hit_bytes = pc.hit_bytes;
    st->warmed_bytes = pc.warmed_bytes;
    st->odirect = (uint32_t)rf_pc_odirect(ld->pc);
    st->hugepages = (uint32_t)ld->rmem.huge;
    st->numa_node = ld->numa_node;
    st->numa_nodes = ld->numa_nodes;
    rf_backend_stats bs;
    memset(&bs, 0, sizeof bs);
    ld->bops->stats(ld->backend, &bs);
    st->device_pool_reserved_bytes = bs.pool_reserved_bytes;
    st->device_pool_used_bytes = bs.pool_used_bytes;
    st->device_allocs_after_create = bs.device_allocs_after_create;
    st->host_allocs_after_create = bs.host_allocs - ld->host_allocs0;
    st->ring_register_ns = ld->rmem.pin_ns;
    snprintf(st->memory_why, sizeof st->memory_why, "%s", ld->mem_why);
}

int rf_loader_trim(rf_loader *ld, uint64_t keep_bytes)
{
    if (!ld)
        return RF_EINVAL;
    if (forked(ld))
        return fork_error(ld);
    rf_err e = {0};
    int rc = ld->bops->trim(ld->backend, keep_bytes, &e);
    return rc ? set_last(ld, &e) : 0;
}

int rf_loader_stats(const rf_loader *ld, rf_stats *out)
{
    if (!ld || !out || out->struct_size < sizeof(uint32_t))
        return RF_EINVAL;
    if (forked(ld))
        return fork_error(ld);
    rf_stats st;
    rf_stats_init(&st);
    st.io_threads = ld->cfg.io_threads;
    st.decode_threads = ld->cfg.decode_threads;
    st.prefetch_depth = ld->depth;
    snprintf(st.io_engine, sizeof st.io_engine, "%s", ld->iops->name);
    snprintf(st.io_engine_why, sizeof st.io_engine_why, "%s", ld->io_why);
    if (ld->bops->device_kind == RF_DEVICE_CUDA)
        snprintf(st.device, sizeof st.device, "cuda:%d", ld->cfg.device_index);
    else
        snprintf(st.device, sizeof st.device, "host");
    st.pinned = (uint32_t)ld->pinned;
    rf_io_stats io = {0};
    if (ld->io) {
        ld->iops->stats(ld->io, &io);
        st.registered_buffers = (uint32_t)ld->iops->registered(ld->io);
    }
    st.samples_delivered = ld->delivered;
    st.batches_delivered = ld->batches_out;
    st.samples_decoded = atomic_load(&((rf_loader *)ld)->decoded);
    st.bytes_read = ld->io_bytes_prev + io.bytes;
    st.reads = ld->io_reads_prev + io.reads;
    st.read_retries = ld->io_retries_prev + io.retries;
    st.io_busy_ns = ld->io_ns_prev + io.busy_ns;
    st.storage_measured = (uint32_t)ld->storage_on;
    if (ld->storage_on)
        st.storage_read_bytes = ld->storage_create + ld->io_storage_prev + io.storage_bytes;
    snprintf(st.storage_why, sizeof st.storage_why, "%s", ld->storage_on ? "" : ld->storage_why);
    st.decode_busy_ns = atomic_load(&((rf_loader *)ld)->decode_ns);
    st.copy_busy_ns = atomic_load(&((rf_loader *)ld)->copy_ns);
    st.consumer_wait_ns = ld->wait_ns;
    st.wall_ns = rf_now_ns() - ld->created_ns;
    st.epoch = ld->c_epoch;
    st.pinned_bytes = ld->pinned ? ld->ring_bytes : 0;
    st.dct_scaled = atomic_load(&((rf_loader *)ld)->dct_scaled);
    st.region_decoded = atomic_load(&((rf_loader *)ld)->region_decoded);
    st.gpu_decoded = atomic_load(&((rf_loader *)ld)->gpu_decoded);
    st.hw_decoded = atomic_load(&((rf_loader *)ld)->hw_decoded);
    pthread_mutex_lock(&((rf_loader *)ld)->mu);
    st.skipped = ld->skipped;
    memcpy(st.skipped_by_reason, ld->skipped_by, sizeof st.skipped_by_reason);
    pthread_mutex_unlock(&((rf_loader *)ld)->mu);
    st.nonregular_members = ld->ds.nonregular;
    resume_point(ld, &st.resume_epoch, &(uint64_t){0});
    st.counted_epoch = ld->ep.epoch;
    st.epoch_delivered = ld->ep.delivered;
    st.epoch_skipped = ld->ep.skipped;
    memcpy(st.epoch_skipped_by_reason, ld->ep.skipped_by, sizeof st.epoch_skipped_by_reason);
    st.epoch_total = ld->ep.total;
    st.epoch_final = ld->ep.final;
    mem_stats(ld, &st);
    memcpy(out, &st, RF_MIN((size_t)out->struct_size, sizeof st));
    return 0;
}
