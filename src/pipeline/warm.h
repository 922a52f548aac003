/* warm.h — the page cache around the reads (warm.c): the warm cursor that hints the spans the
 * dispatcher reaches next (rf_config.warm, warm_bytes ahead) and the residency check of each
 * new read. Part of the dispatcher (pl_dispatch.warm), called from take(). */
#ifndef RF_PL_WARM_H
#define RF_PL_WARM_H

#include <stdint.h>

#include "io/pagecache.h"
#include "loaders/dataset.h"
#include "pipeline/slot.h"
#include "plan/plan.h"

#define WARM_HINTS_MAX 32 /* fadvise calls per take(); contiguous spans merge into one */
typedef struct warm_hint {
    uint32_t file;
    uint64_t off, len;
} warm_hint;

typedef struct pl_warm {
    int on;
    uint64_t bytes;                 /* rf_config.warm_bytes */
    uint64_t epoch, pos, ahead;     /* the cursor: plan position, bytes hinted ahead */
    /* what it reads, set at create */
    const rf_plan *plan;
    const rf_dataset *ds;
    rf_pagecache *pc;
    int tokens, sequential;         /* token windows, and whether SEQUENTIAL */
    uint64_t window_bytes;          /* a token window's bytes */
} pl_warm;

/* create: warm (rf_config.warm) is on unless reads bypass the cache (O_DIRECT), which why
 * (rf_stats.memory_why) then says. */
void pl_warm_init(pl_warm *w, int warm, uint64_t bytes, const rf_plan *plan,
                  const rf_dataset *ds, rf_pagecache *pc, int tokens, int sequential,
                  uint64_t window_bytes, char *why, size_t why_cap);
/* The warm cursor restarts with the plan (no thread runs). */
void pl_warm_restart(pl_warm *w);
/* mu held: the dispatcher, at plan position `pos` of `epoch` (done: no more epochs), claims
 * the hints that keep warm_bytes ahead of it; returns how many it wrote to h. */
int pl_warm_plan_locked(pl_warm *w, uint64_t epoch, uint64_t pos, int done, warm_hint *h);
/* mu held: the dispatcher read `len` bytes at plan position `pos` of `epoch`: a warmed span
 * leaves the window. */
void pl_warm_taken_locked(pl_warm *w, uint64_t epoch, uint64_t pos, uint64_t len);
/* Outside the lock, before the engine submits: residency of each new read, then the hints. */
void pl_after_take(pl_warm *w, rf_io_req **reqs, int n, const warm_hint *h, int nh);

#endif
