/* skip.h — the skip policy (on_error = SKIP, skip.c; docs/reliability.md): its bookkeeping,
 * which the dispatcher points to (pl_dispatch.skip), and its table for the dispatcher. In fail
 * mode the bookkeeping stays empty but for nothing: its counts are rf_stats' zeros. */
#ifndef RF_PL_SKIP_H
#define RF_PL_SKIP_H

#include <stdint.h>

#include "pipeline/policy.h"
#include "ringfeed.h"

struct skip_item;

typedef struct pl_skip {
    /* The settings it reads: rf_config.max_consecutive_skips; whether verdicts come late (GPU
     * decode: pl_gpu.late). */
    uint64_t max_run;
    int late;
    uint8_t *st;            /* status of every slot position (depth * batch) */
    uint64_t seq0;          /* batch seq of batch 0 of the dispatcher's epoch */
    uint64_t R, P;          /* real (non-padding) and all outputs of this rank's epoch */
    uint64_t L, rtop;       /* phase end (forward limit); replacements are taken below rtop */
    uint64_t a;             /* lowest output that is not final */
    uint64_t fwd_run, rep_run; /* consecutive failures of the two cursors */
    int met, epoch_wait, waiting;
    struct skip_item *q;    /* replacement / blank tasks waiting for a task and arena space */
    uint64_t q_head, q_tail;
    uint32_t q_cap;
    /* The failure of each slot position (depth * batch), for the consecutive-skips message:
     * the hole's own, whatever failed after it before the walk reached it (prefetched
     * batches, late verdicts). */
    rf_err *errs;
    uint64_t skipped, skipped_by[RF_SKIP_REASONS]; /* under mu: rf_stats.skipped */
} pl_skip;

extern const pl_policy pl_policy_skip;

void pl_skip_init(pl_skip *sk, uint64_t max_run, int late);
/* A (re)started pipeline: no replacement queued. */
void pl_skip_restart(pl_skip *sk);
void pl_skip_free(pl_skip *sk);

#endif
