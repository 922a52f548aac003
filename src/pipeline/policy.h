/* policy.h — the error policy: what the dispatch cursor does with each sample's outcome.
 * pl_policy_fail (dispatch.c) or pl_policy_skip (skip.c), installed by create; the cursor
 * never names skip.c. Every entry but setup is called with mu held. */
#ifndef RF_PL_POLICY_H
#define RF_PL_POLICY_H

#include <stdint.h>

#include "base/common.h"

struct pl_dispatch;
struct task;

typedef struct pl_policy {
    /* create (ring sizes known): allocate the policy's bookkeeping. */
    int (*setup)(struct pl_dispatch *d, rf_err *err);
    /* The dispatcher planned a new epoch; its batch 0 is d->seq. */
    void (*epoch_locked)(struct pl_dispatch *d);
    /* The forward cursor passed the epoch's last batch: plan the next epoch, or wait. */
    void (*epoch_end_locked)(struct pl_dispatch *d);
    /* Before forward output (k, j): 1 when the policy handled the call (*out: a task, or
     * NULL when blocked), 0 when the cursor dispatches that output as usual. */
    int (*dispatch_locked)(struct pl_dispatch *d, struct task **out);
    /* Slot `si` opens for the dispatcher's batch. */
    void (*slot_open_locked)(struct pl_dispatch *d, uint32_t si);
    /* Task t's sample is in. */
    void (*ok_locked)(struct pl_dispatch *d, const struct task *t);
    /* Task t's sample failed with a data error (reason: enum rf_skip_reason). Returns 1 when
     * the sample still counts its slot down (fail mode: the batch completes, then fails). */
    int (*failed_locked)(struct pl_dispatch *d, const struct task *t, int reason, int code,
                         const char *msg);
    /* Skip mode with late verdicts: the verdict on position (si, index) of a checked batch
     * (code 0: good; else a hole under reason). Returns 1 for a hole. NULL in fail mode,
     * where the check raises a bad verdict as the batch's error. */
    int (*late_locked)(struct pl_dispatch *d, uint32_t si, uint32_t index, int reason, int code,
                       const char *msg);
} pl_policy;

#endif
