/* remote_cache.h — the local shard cache (shard_cache.h) wired to remote shards: what a loader
 * with rf_config.cache_dir does with it (remote_cache.c). docs/remote.md, "The local shard
 * cache", gives the behaviour: lookups at create, checked reads, one fill thread, retries.
 *
 * DESIGN
 *  - The cache is opened before the dataset, which opens its shards through rf_rcache_ops, so
 *    create's checks of a cached shard read its copy and move no byte over the network.
 *  - A copy dropped after a checksum mismatch keeps its memory and descriptor until
 *    rf_rcache_close, as reads may still use them.
 *  - Fills start once the first batch was handed out (rf_rcache_go), so they never compete with
 *    its reads. A fill refused for a passing reason is looked up again every
 *    RF_RCACHE_RECHECK_MS, so ranks sharing a directory end up reading another rank's copy.
 *  - Locks: rf_rcache_has runs under the loader's mutex and takes the cache's own only to queue
 *    a shard (order: loader, then cache); the fill thread never takes the loader's. A copy is
 *    published with a release store and read with an acquire load.
 *
 * Included by pipeline/ and the curl engine; includes base/ and loaders/dataset.h. */
#ifndef RF_REMOTE_CACHE_H
#define RF_REMOTE_CACHE_H

#include <stdint.h>

#include "base/common.h"
#include "loaders/dataset.h"

#define RF_RCACHE_CHUNK (256u << 10)    /* bytes one fill reads from its stream at a time */
#define RF_RCACHE_RECHECK_MS 1000u      /* wait before a refused fill is looked up again */
#define RF_RCACHE_RECHECKS_MAX 600u     /* times one shard is looked up again */

struct rf_remote;
typedef struct rf_rcache rf_rcache;

typedef struct rf_rcache_stats {
    uint32_t on;             /* 1: hits served, fills on; 2: hits served, fills off (full disk) */
    uint64_t hits;           /* shards read from the cache (found at open, or after another
                                process's fill) */
    uint64_t misses;         /* shards not found at open (stale ones included) */
    uint64_t stale;          /* of misses: cached with another ETag or size */
    uint64_t bypasses;       /* fills refused: the shard is larger than the budget */
    uint64_t fills;          /* shards this loader filled and published */
    uint64_t fill_requests;  /* whole-object GETs this loader made for fills */
    uint64_t fill_failures;  /* fills started that did not publish */
    uint64_t bytes_written;  /* bytes written into fills */
    uint64_t evictions;      /* shards this loader evicted to make room */
    uint64_t corrupt;        /* reads of a copy that failed its checksums (copy dropped) */
    char why[RF_ERRMSG_MAX]; /* why fills are off, else the last fill refused or failed, else "" */
} rf_rcache_stats;

/* Open the cache directory (made when missing, one level) with a budget of `budget` bytes, for
 * the remote shards of client r. Returns 0, or rf_cache_open's error. */
int rf_rcache_open(struct rf_remote *r, const char *dir, uint64_t budget, rf_rcache **out,
                   rf_err *err);
/* The client's rf_remote_ops, but whose reader reads a shard found in the cache from its copy,
 * checked (the dataset opens its shards through it). Valid until rf_rcache_close. */
const rf_remote_ops *rf_rcache_ops(rf_rcache *rc);
/* Look up the nfiles remote shards (files[i].remote, opened through rf_rcache_ops) and start
 * the fill thread, which waits for rf_rcache_go. files must outlive the cache. 0 or an error. */
int rf_rcache_attach(rf_rcache *rc, const rf_file *files, uint32_t nfiles, rf_err *err);
/* 1 when a read of shard `file` is to come from its copy (rf_rcache_read); 0: read it
 * remotely (its first such answer queues the shard's fill). */
int rf_rcache_has(rf_rcache *rc, uint32_t file);
/* Read len bytes at off of shard `file`'s copy into dst, checked (bounce as rf_cache_sums_read).
 * 0; RF_RCACHE_REMOTE when the copy is gone or failed its checksums: read it from the server;
 * -ENODATA past its end; -errno with why naming the copy and byte. Any thread. */
int rf_rcache_read(rf_rcache *rc, uint32_t file, uint8_t *dst, uint32_t len, uint64_t off,
                   uint8_t *bounce, char *why, size_t cap);
#define RF_RCACHE_REMOTE 1
/* Let the fill thread start (the first batch was handed out). */
void rf_rcache_go(rf_rcache *rc);
void rf_rcache_stats_get(rf_rcache *rc, rf_rcache_stats *st);
/* Stop the fill thread (a fill in progress is aborted), release every cached copy, close the
 * directory. After the engine stopped: no read may use a copy any more. NULL: nothing. */
void rf_rcache_close(rf_rcache *rc);

#endif
