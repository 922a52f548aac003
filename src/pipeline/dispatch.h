/* dispatch.h — the dispatcher (dispatch.c): the forward cursor over the plan, the staging
 * arena, the task ring, the decode queue and the I/O engine's two callbacks. What to do with
 * outcomes it learns only from its error policy (policy.h): the fail policy, or the skip
 * policy (skip.h), which uses what is exported here. */
#ifndef RF_PL_DISPATCH_H
#define RF_PL_DISPATCH_H

#include <stdint.h>

#include "io/pagecache.h"
#include "loaders/dataset.h"
#include "pipeline/policy.h"
#include "pipeline/ring.h"
#include "pipeline/slot.h"
#include "pipeline/state.h"
#include "pipeline/warm.h"
#include "plan/plan.h"

struct pl_gpu;
struct pl_remote;
struct pl_skip;
struct pl_submit;

/* One read of a task: sample bytes from a file span into the slot's stage or the arena. */
typedef struct sample_read {
    uint64_t off, end; /* end: the virtual arena position after the span (task.arena_end) */
    uint32_t file, len, skip, need;
    uint8_t *dst;
} sample_read;

typedef struct pl_dispatch {
    /* Its neighbours (pl_dispatch_init). */
    pl_core *core;
    pl_ring *ring;
    rf_plan *plan;
    const rf_dataset *ds;
    rf_pagecache *pc;
    struct pl_remote *remote;  /* the shard cache: reads of cached shards */
    struct pl_gpu *gpu;        /* a slot's GPU-decode part is reset when it opens */
    struct pl_submit *submit;  /* a slot's last sample submits it */
    const pl_policy *policy;   /* pl_policy_fail or pl_policy_skip, from on_error */
    struct pl_skip *skip;      /* the skip policy's state (skip.h) */
    /* The settings it reads (rf_config). */
    uint64_t epochs;           /* 0: forever */
    int sequential;            /* token_windows SEQUENTIAL */
    pl_warm warm;              /* the page cache around the reads (warm.h) */
    /* The cursor. */
    uint64_t seq, epoch, k;    /* batch seq, its epoch, batch index in epoch */
    uint32_t j, count;         /* next sample in the batch, batch size */
    uint64_t epochs_left;      /* 0 = forever */
    int done;
    /* 1: the dispatcher's last try stopped for room in the task ring or the arena, which a
     * finished task gives back: only then does one wake the I/O threads (task_finish_locked),
     * so threads waiting for a slot or the skip walk are not woken for nothing. */
    int room;
    /* The staging arena: reads land here, claimed in dispatch order, freed in that order. */
    uint8_t *arena;
    uint64_t arena_bytes;
    uint64_t arena_head, arena_tail; /* virtual positions (monotonic) */
    /* The task ring, and the decode queue of task ring indices (capacity ntasks). */
    task *tasks;
    uint32_t ntasks;
    uint64_t task_head, task_tail;   /* dispatch seq of next new task / oldest live task */
    uint32_t *decq;
    uint64_t decq_head, decq_tail;
} pl_dispatch;

/* create: the neighbours, the error policy and the settings (epochs, token_windows); the
 * warm cursor is set up on its own (pl_warm_init). */
void pl_dispatch_init(pl_dispatch *d, const rf_config *c, pl_core *core, pl_ring *ring,
                      rf_plan *plan, const rf_dataset *ds, rf_pagecache *pc,
                      struct pl_remote *remote, struct pl_gpu *gpu, struct pl_submit *submit,
                      const pl_policy *policy, struct pl_skip *skip);
/* create, the ring allocated: the staging arena (staging_bytes; AUTO from the data set and
 * the thread counts), the task ring and the decode queue. */
int pl_dispatch_alloc(pl_dispatch *d, const rf_config *c, rf_err *err);
void pl_dispatch_free(pl_dispatch *d);
/* (Re)start with no thread running: the cursor at consumer batch seq `seq`, planning `epoch`
 * from order position `base`, epochs_done of rf_config.epochs already consumed. */
void pl_dispatch_restart(pl_dispatch *d, uint64_t seq, uint64_t epoch, uint64_t base,
                         uint64_t epochs_done);

/* The cursor, for the policies. */
extern const pl_policy pl_policy_fail;
/* The real (non-padding) samples of the planned epoch on this rank. */
uint64_t pl_plan_real(const rf_plan *p);
void pl_plan_next_epoch_locked(pl_dispatch *d);
int pl_sample_read_locked(pl_dispatch *d, const slot *s, uint32_t row, uint64_t id,
                          sample_read *r);
void pl_task_set_read(pl_dispatch *d, task *t, const sample_read *r);
int pl_tasks_full_locked(pl_dispatch *d);
slot *pl_dispatch_slot_locked(pl_dispatch *d);
void pl_slot_open_locked(pl_dispatch *d, slot *s);
void pl_dispatch_advance_locked(pl_dispatch *d);

/* The I/O engine's callbacks (rf_io_source; ctx: the dispatcher). */
int pl_io_take(void *ctx, rf_io_req **reqs, int max, int block);
void pl_io_done(void *ctx, rf_io_req *req);

/* A decode thread's next task (it waits for one; NULL: stop). *failed: the loader had failed
 * before (the sample only frees its task); *moot: a sample after its slot's first bad one. */
task *pl_task_next_decode(pl_dispatch *d, int *failed, int *moot);
/* A decode thread is through with task t (see dispatch.c). */
void pl_task_end(pl_dispatch *d, task *t, int failed, int rc, const rf_err *e);

#endif
