/* counters.h — the loader's statistics counters (rf_stats): counted by the decode threads and
 * the thread that submits a batch, read only by rf_loader_stats (stats.c), which orders them
 * with nothing else: every counter is relaxed, and a snapshot may be a sample behind. */
#ifndef RF_PL_COUNTERS_H
#define RF_PL_COUNTERS_H

#include <stdatomic.h>
#include <stdint.h>

#include "ringfeed.h"

typedef struct pl_counters {
    _Atomic uint64_t decode_ns, copy_ns, decoded, dct_scaled, region_decoded;
    /* Delivered samples libjpeg recovered from something in (pl_count_recovered) */
    _Atomic uint64_t recovered, recovered_kind[RF_RECOVERED_KINDS];
    uint64_t created_ns; /* rf_stats.wall_ns counts from here */
} pl_counters;

/* A statistic: relaxed, it orders nothing. */
static inline void pl_count(_Atomic uint64_t *c, uint64_t n)
{
    atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

/* A delivered sample libjpeg recovered from `mask` in (1 << enum rf_recovered each; 0:
 * nothing): rf_stats.recovered and recovered_by_kind. */
static inline void pl_count_recovered(pl_counters *c, uint32_t mask)
{
    if (!mask)
        return;
    pl_count(&c->recovered, 1);
    for (uint32_t k = 0; k < RF_RECOVERED_KINDS; k++)
        if (mask & (1u << k))
            pl_count(&c->recovered_kind[k], 1);
}

#endif
