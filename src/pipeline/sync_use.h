/* sync_use.h — the GPU decode's sync-point indexes at run time (loaders/sync_index.h; where
 * sidecars are looked for and written: docs/sync-index.md): each shard's sidecar found at
 * create, the entry a plain JPEG's packet starts from, and entries built by the decode threads
 * for members without one, written as sidecars for the runs after.
 *
 * DESIGN
 *  - A loaded sidecar is mapped read-only; an entry is used only when the member's size and
 *    XXH64 equal its own, so no sidecar lends its points to other bytes. A stale entry is
 *    counted once and the member decoded as without one, then rebuilt when building is on.
 *  - Building is the walker's work done once for the whole file, on the decode thread that
 *    has the member's bytes, never before the first batch is out. A built entry is set once
 *    (CAS) in a per-sample slot and flushed at each epoch's end (own thread) and at destroy;
 *    past RF_SYNC_BUILD_BYTES building stops for the run, said once on stderr. */
#ifndef RF_PIPELINE_SYNC_USE_H
#define RF_PIPELINE_SYNC_USE_H

#include <stddef.h>
#include <stdint.h>

#include "base/common.h"
#include "decode/decode.h"
#include "loaders/dataset.h"
#include "loaders/sync_index.h"

#define RF_SYNC_BUILD_BYTES (512ull << 20)

typedef struct pl_sync pl_sync;

typedef struct pl_sync_counts {
    uint64_t indexed; /* samples whose packet came from an entry */
    uint64_t stale;   /* entries found stale (each once) */
    uint64_t built;   /* entries built this run */
    uint64_t loaded;  /* entries in the sidecars found at create */
} pl_sync_counts;

/* The indexes of ds's shards (tar shards; other sources get none). urls[i] is file i's URL as
 * the user gave it (for a remote shard's sidecar beside it), npaths their count; cache_dir
 * may be NULL; build: entries are built for members without one. *out NULL when there is
 * nothing to do (not tar, or no GPU decode). Returns 0 or RF_ENOMEM; a sidecar that cannot be
 * read is counted stale and ignored. */
int pl_sync_create(const rf_dataset *ds, char *const *urls, uint32_t npaths,
                   const char *cache_dir, int build, pl_sync **out, rf_err *err);
/* Flush (when building) and free. NULL is a no-op. */
void pl_sync_destroy(pl_sync *s);

/* The first batch is out: from now on members without an entry get one built. */
void pl_sync_go(pl_sync *s);
/* The entry for sample `sample`, whose image member starts at `off` of file `file` and whose
 * bytes are jpeg[len], or NULL; built now when the member has none and building is on (its
 * packet then starts from it). buf holds a loaded entry's fields. Thread-safe. */
const rf_sync_entry *pl_sync_get(pl_sync *s, rf_decoder *dec, uint32_t file, uint64_t sample,
                                 uint64_t off, const uint8_t *jpeg, size_t len,
                                 rf_sync_entry *buf);
/* What the packer did with it (rf_decoder_sync_result). */
void pl_sync_count(pl_sync *s, uint64_t sample, uint32_t result);
/* Write, on a thread of its own, the sidecars of the shards with entries built since the last
 * flush (the previous flush's thread is joined first). */
void pl_sync_flush_async(pl_sync *s);
void pl_sync_counts_get(const pl_sync *s, pl_sync_counts *c);

#endif
