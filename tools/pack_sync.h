/* pack_sync.h — ringfeed-pack's sync-point sidecars (--sync-index): a pool of threads that
 * writes SHARD.sync for each shard handed to it, while pack goes on writing the next shards
 * or, without --input, for shards that exist already. */
#ifndef RF_PACK_SYNC_H
#define RF_PACK_SYNC_H

#include <stdint.h>

#include "ringfeed_shards.h"

typedef struct pack_sync pack_sync;

typedef struct pack_sync_totals {
    uint64_t shards, failed;
    rf_sync_summary sum; /* summed over the shards */
} pack_sync_totals;

/* threads: 1 or more. NULL when out of memory. */
pack_sync *pack_sync_start(uint32_t threads, int quiet);
/* Queue one shard (its path is copied). 0, or -1 when out of memory. */
int pack_sync_add(pack_sync *s, const char *shard);
/* Wait for every queued shard, free s, and sum into *t. Returns the failures (each printed). */
uint64_t pack_sync_finish(pack_sync *s, pack_sync_totals *t);
/* The totals of `seconds` of work: a line on stderr, or (json) an object on stdout without a
 * newline. */
void pack_sync_print(const pack_sync_totals *t, double seconds, int json);
/* ringfeed-pack --sync-index SHARD...: the shards' sidecars and the totals (json: a JSON line
 * on stdout). Returns pack's exit status: 0, 1 when a shard failed, 2 for bad patterns. */
int pack_sync_only(const char *const *patterns, uint32_t n, uint32_t threads, int quiet,
                   int json);

#endif
