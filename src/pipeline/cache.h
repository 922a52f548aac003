/* cache.h — remote shards (docs/remote.md) as the pipeline sees them (cache.c): the loader's
 * client of the remote shards (io/remote.h) and its local shard cache (rf_config.cache_dir,
 * io/remote_cache.h, docs/cache.md), with their settings and the counts rf_stats reports. A
 * library built without libcurl reads no URL: there the client is refused at create and the
 * cache calls do nothing. */
#ifndef RF_PL_CACHE_H
#define RF_PL_CACHE_H

#include <stdint.h>

#include "loaders/dataset.h"
#include "ringfeed.h"

struct rf_remote;
struct rf_rcache;

typedef struct pl_remote {
    struct rf_remote *client; /* the client of remote shards, NULL for files */
    struct rf_rcache *cache;  /* their shard cache, or NULL */
    const char *cache_dir;    /* rf_config.cache_dir (the loader's copy), cache_bytes */
    uint64_t cache_bytes;
    char cache_why[96];       /* why there is no cache though cache_dir is set, or "" */
    uint64_t create_requests, create_bytes; /* the client's counts when create's dataset was
                                              open, before any read */
    int going;                /* the fills were let start (pl_cache_go) */
} pl_remote;

/* create, before the dataset opens: for URL patterns (all of them or none), the client, set
 * in the dataset (ds->remote), and the cache it reads cached shards through. 0 for files. */
int pl_remote_setup(pl_remote *rm, rf_dataset *ds, const rf_config *c, rf_err *err);
/* create, the dataset open: the client's counts so far (rf_stats.remote_create_*). */
void pl_remote_opened(pl_remote *rm);
/* create, the engine chosen: the cache's shards attached (its fill thread waits for
 * pl_cache_go). */
int pl_cache_setup(pl_remote *rm, const rf_dataset *ds, rf_err *err);
/* Under mu (dispatch): 1 when a read of shard `file` comes from its cached copy. */
int pl_cache_has(pl_remote *rm, uint32_t file);
/* The first batch was handed out: fills may start; they never compete with it. */
void pl_cache_go(pl_remote *rm);
/* rf_stats' remote_* and shard_cache_* fields. */
void pl_remote_stats(const pl_remote *rm, rf_stats *st);
/* destroy, after the engine stopped and before the dataset (whose shards the fills read):
 * the cache; the dataset then closes its shards through the client itself. */
void pl_cache_close(pl_remote *rm, rf_dataset *ds);
/* destroy, after the dataset, whose shards it closed. */
void pl_remote_free(pl_remote *rm);

#endif
