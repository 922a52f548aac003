/* gpu_decode.h — the GPU decode stage (rf_config.gpu_decode, hw_decode_percent,
 * decode_schedule): where a JPEG is decoded and how a GPU-decoded batch reaches the consumer.
 * Placement (gpu_place.c), verdicts (gpu_verdict.c), the scheduler (gpu_schedule.c over
 * schedule.h) and the stage's thread that drives the last two (gpu_stage.c), so the consumer
 * only leases its batches and waits for them. Its state is one member of the loader (pl_gpu)
 * and one of each slot (gpu_slot.h); other stages call the functions below and read only the
 * flags on, device and late (stats.c also its counters). */
#ifndef RF_PL_GPU_DECODE_H
#define RF_PL_GPU_DECODE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/gpujpeg.h"
#include "decode/decode_setup.h"
#include "loaders/dataset.h"
#include "pipeline/counters.h"
#include "pipeline/policy.h"
#include "pipeline/ring.h"
#include "pipeline/schedule.h"
#include "pipeline/slot.h"
#include "pipeline/state.h"
#include "pipeline/sync_use.h"
#include "plan/plan.h"

struct pl_dispatch;

/* Where one sample goes (pl_sched_route). */
enum pl_route { PL_ROUTE_CPU = 0, PL_ROUTE_KERNELS = 1, PL_ROUTE_ENGINE = 2 };

/* The loader's scheduler: mode set at create; the shares written by the stage's thread and
 * read by the decode threads (relaxed: a share is a hint, any value routes a sample to a path
 * that gives the same pixels); engines written by the stage's thread before it starts the
 * opener (UNOPENED to OPENING), then by the opener (release: the backend's engine state it
 * opened), and read with acquire before an engine packet is placed. The rest is the stage
 * thread's (and create's and destroy's, while it does not run). */
typedef struct pl_sched {
    uint32_t mode;    /* enum rf_decode_schedule, resolved */
    _Atomic uint32_t gpu, hw, engines;
    _Atomic uint64_t open_ns; /* how long the engines took to open (rf_stats.hw_open_ns) */
    rf_sched ctl;     /* the controller */
    uint64_t last_ns; /* when the consumer was handed its last batch */
    rf_sched_in win;  /* the window measured so far (period_ns: the sum until it is full) */
    uint32_t skip;    /* batches to hand out unmeasured after a change of the shares */
    uint64_t steps;   /* controller steps taken */
    pthread_t opener;
    int opener_on;
    int open_pending; /* MANUAL: the opener starts with the first batch (pl_sched_batch);
                       * BALANCE: engines UNOPENED until its GPU share needs them */
    char engine_why[RF_ERRMSG_MAX]; /* why the engines are out (the opener's error), or "" */
    int trace;        /* RINGFEED_SCHED_TRACE set: each controller step printed to stderr */
} pl_sched;

/* One batch handed out, as the consumer reported it to the scheduler (pl_gpu_handed). */
typedef struct pl_handout {
    uint64_t seq, at_ns, wait_ns;
} pl_handout;

#define PL_HANDOUTS_MAX 64u /* handouts the stage may be behind by: the consumer then waits */

/* The stage's thread and what it is handed (gpu_stage.c), under mu. */
typedef struct pl_gpu_thread {
    pthread_t tid;
    int on;            /* running */
    int handouts;      /* the scheduler takes the consumer's handouts in (set at start) */
    pl_handout q[PL_HANDOUTS_MAX];
    uint64_t handed, taken, done; /* handouts reported, taken in, and acted upon */
} pl_gpu_thread;

typedef struct pl_gpu {
    /* Its neighbours (pl_gpu_init). */
    pl_core *core;
    pl_ring *ring;
    const pl_backend *backend;
    const rf_dataset *ds;
    const rf_plan *plan;
    const rf_decode_setup *decode;
    pl_counters *counters;
    const pl_policy *policy;   /* late verdicts in skip mode go to its late_locked */
    struct pl_dispatch *disp;  /* ... with the dispatcher they belong to */
    /* The settings it reads (rf_config). */
    uint32_t gpu_decode, gpu_percent, hw_percent, dtype;
    int naive, skip;
    /* Set at create (pl_gpu_choose, pl_gpu_stride), read by every thread. */
    int on;       /* gpu_decode or hw_decode_percent: samples may become packets */
    int device;   /* ... on the CUDA backend: packets go to the device */
    /* Verdicts come with the batch (the device, or the hook gpu_late_verdicts): the stage's
     * thread checks them (pl_gpu_check) before the batch is handed out. */
    int late;
    uint64_t cap; /* max(stage_bytes, RF_GJ_AREA) (see RF_GJ_AREA) */
    uint64_t px;  /* on the device: stage_bytes rounded to RF_GJ_ALIGN */
    /* The test hook gpu_device_layout: the device layout on the host, kernels emulated. */
    int emulate;
    /* rf_stats.gpu_decoded, hw_decoded and gpu_plain_decoded: relaxed, counted by the decode
     * threads and read only for rf_stats, like the loader's other statistics. */
    _Atomic uint64_t decoded, hw_decoded, plain_decoded;
    /* engine_redo's decoder, pixels and verdicts (the stage's thread's, made on first use). */
    struct rf_decoder *redo;
    uint8_t *redo_px;
    rf_err *redo_err;
    pl_sched sched; /* the decode scheduler (gpu_schedule.c) */
    pl_sync *sync;  /* the shards' sync-point indexes (sync_use.h), or NULL */
    pl_gpu_thread thread;
} pl_gpu;

/* A decode thread's buffers for GPU decode on the host backend: the packet is built here
 * (grown to the largest packet seen) and decoded into the slot by the kernels' host code. */
typedef struct pl_gpu_host {
    uint8_t *packet, *scratch;
    size_t cap;
} pl_gpu_host;

/* ---- gpu_place.c ----------------------------------------------------------------------- */

/* create: the stage's neighbours and the settings it reads. */
void pl_gpu_init(pl_gpu *g, const rf_config *c, pl_core *core, pl_ring *ring,
                 const pl_backend *be, const rf_dataset *ds, const rf_plan *plan,
                 const rf_decode_setup *decode, pl_counters *counters, const pl_policy *policy,
                 struct pl_dispatch *disp);
/* create, the backend and the schedule chosen: whether samples may become packets, and
 * whether they go to the device; the configurations GPU decode refuses. */
int pl_gpu_choose(pl_gpu *g, rf_err *err);
/* ring sizing: the GPU sizes, and the slot bytes per sample (pl_ring.stride). */
uint64_t pl_gpu_stride(pl_gpu *g);
/* ring sizing: the bytes a slot needs after its labels (0 without GPU decode on the device). */
size_t pl_gpu_ring_bytes(const pl_gpu *g);
/* ring sizing: the device pool's temporaries per copy stream (GPU decode on the device). */
size_t pl_gpu_temp_bytes(const pl_gpu *g, size_t staged, int convert);
/* ring allocated: every slot's arrays, after its labels (GPU decode on the device). */
void pl_gpu_slots_init(pl_gpu *g);
/* dispatch: slot s opens for a batch of `count` samples (mu held). */
void pl_gpu_slot_reset_locked(pl_gpu *g, slot *s, uint32_t count);
/* submit: the batch's GPU-decode part of the convert desc; returns the stage bytes it took. */
size_t pl_gpu_batch_desc(pl_gpu *g, slot *s, rf_gj_batch *gj);
/* decode pool: sample `index` of slot s holds pixels until a packet is placed for it. */
void pl_gpu_sample_start(const pl_gpu *g, slot *s, uint32_t index);
/* decode pool: where a sample decoded on the CPU (a refill's replacement, a blank) writes its
 * pixels: its row on the host, bytes placed in the packed stage on the device. */
uint8_t *pl_gpu_pixels(pl_gpu *g, slot *s, uint32_t index);
/* consumer: the batch as the host emulation of the device decoded it (gpu.emulate). */
uint8_t *pl_gpu_emulated(const slot *s);
/* decode pool: one sample under transform tf (its batch's), a packet or pixels (see
 * gpu_place.c); info: one entry, or one per multi-crop view. */
int pl_gpu_decode(pl_gpu *g, rf_decoder *dec, const task *t, slot *s, const rf_transform *tf,
                  const uint8_t *jpeg, uint32_t len, uint8_t *img, rf_decode_info *info,
                  pl_gpu_host *gh, rf_err *e);
/* rf_stats' GPU-decode counts of a packet: +1 when decoded, -1 when its sample becomes a hole. */
void pl_gpu_count(pl_gpu *g, int engine, const uint8_t *packet, int sign);
/* decode pool: a thread's host buffers (none unless GPU decode on the host backend). */
int pl_gpu_host_alloc(const pl_gpu *g, pl_gpu_host *gh);
void pl_gpu_host_free(pl_gpu_host *gh);

/* ---- gpu_verdict.c --------------------------------------------------------------------- */

/* submit: whether batch s must be checked before it is handed out (late verdicts, unless the
 * device batch has no packet and no skip policy waits for its outcomes). */
int pl_gpu_needs_check(const pl_gpu *g, const slot *s);
/* The stage's thread: wait for the batch's kernels and turn a verdict into the sample's error
 * (fail mode: returned), or (skip mode) into a hole the skip policy fills: PL_GPU_REFILL, the
 * slot is FILLING again and comes back to be checked once its replacements are in. */
#define PL_GPU_REFILL 1
int pl_gpu_check(pl_gpu *g, slot *s, rf_err *e);
/* destroy: the checks' buffers and the sync-point indexes (writing what was built). */
void pl_gpu_free(pl_gpu *g);

/* ---- gpu_schedule.c -------------------------------------------------------------------- */

/* create, the backend chosen: decode_schedule AUTO resolved (and with it prefetch_depth when
 * AUTO, and dct_scaling AUTO), BALANCE refused where it cannot run; c is the loader's record
 * of the resolved config. */
int pl_sched_choose(pl_gpu *g, rf_config *c, rf_err *err);
/* create, after the backend's: the engines' state, and their opener when it is due at once. */
void pl_sched_start(pl_gpu *g);
/* destroy: the opener is joined whatever its state (an open in progress finishes first). */
void pl_sched_stop(pl_gpu *g);
/* decode thread: where the sample with this augmentation seed is decoded (enum pl_route). */
int pl_sched_route(pl_gpu *g, uint64_t aug_seed);
/* The stage's thread: the consumer was handed a batch (h): the scheduler's measurements, the
 * controller's step, the opener when due. */
void pl_sched_batch(pl_gpu *g, const pl_handout *h);

/* ---- gpu_stage.c ----------------------------------------------------------------------- */

/* run: start the stage's thread when it has work (late verdicts, or a scheduler that takes
 * handouts); its neighbours and settings are create's. */
int pl_gpu_stage_start(pl_gpu *g, rf_err *err);
/* run: join it, once stop was set and cv_gpu broadcast (handouts reported are taken in
 * first). */
void pl_gpu_stage_join(pl_gpu *g);
/* submit, mu held: batch s is submitted and waits for its check (FILLING -> CHECKING). */
void pl_gpu_submitted_locked(pl_gpu *g, slot *s);
/* The consumer was handed batch seq after waiting wait_ns for it: reported to the stage's
 * scheduler, which acts on it on its thread. */
void pl_gpu_handed(pl_gpu *g, uint64_t seq, uint64_t wait_ns);
/* The consumer finished an epoch: the sync-point index entries built in it are written. */
void pl_gpu_epoch_done(pl_gpu *g);

#endif
