/* cache.c — the loader's use of the local shard cache for remote shards (rf_config.cache_dir):
 * the glue between the pipeline and io/remote_cache.h, which does the work. A library built
 * without libcurl reads no URL, so there these have no cache to reach and do nothing.
 *
 * DESIGN
 *  - The cache opens with the remote client, before the dataset (pl_cache_open), whose shards
 *    are opened through its table so that create reads a cached shard from its copy; the
 *    shards are attached once the dataset is open (pl_cache_setup).
 *  - pl_cache_has runs under mu in dispatch (pl_task_set_read): a read of a shard whose copy
 *    is cached is marked `cached`, and the curl engine reads the copy, checked, falling back
 *    to the URL when the copy is gone or does not match (io/remote_cache.h).
 *    remote_cache.c takes its own mutex after mu, never mu after its own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/pipeline.h"
#ifdef RINGFEED_HAVE_CURL
#include "io/remote.h"
#include "io/remote_cache.h"
#endif

int pl_cache_open(rf_loader *ld, rf_err *err)
{
#ifdef RINGFEED_HAVE_CURL
    if (!ld->cfg.cache_dir || !ld->remote)
        return 0;
    int rc = rf_rcache_open(ld->remote, ld->cfg.cache_dir, ld->cfg.cache_bytes, &ld->rcache,
                            err);
    if (rc == 0)
        ld->ds.remote = rf_rcache_ops(ld->rcache);
    return rc;
#else
    (void)ld, (void)err;
    return 0;
#endif
}

int pl_cache_setup(rf_loader *ld, rf_err *err)
{
    if (!ld->cfg.cache_dir)
        return 0;
    if (!ld->remote) {
        snprintf(ld->cache_why, sizeof ld->cache_why, "the shards are local files: the cache "
                 "keeps remote shards only");
        return 0;
    }
#ifdef RINGFEED_HAVE_CURL
    ld->iop.rcache = ld->rcache;
    return rf_rcache_attach(ld->rcache, ld->ds.files, ld->ds.nfiles, err);
#else
    (void)err;
    return 0;
#endif
}

int pl_cache_has(rf_loader *ld, uint32_t file)
{
#ifdef RINGFEED_HAVE_CURL
    if (ld->rcache)
        return rf_rcache_has(ld->rcache, file);
#else
    (void)ld, (void)file;
#endif
    return 0;
}

void pl_cache_go(rf_loader *ld)
{
#ifdef RINGFEED_HAVE_CURL
    if (ld->rcache)
        rf_rcache_go(ld->rcache);
#else
    (void)ld;
#endif
}

void pl_cache_stats(const rf_loader *ld, rf_stats *st)
{
    snprintf(st->shard_cache_why, sizeof st->shard_cache_why, "%s", ld->cache_why);
#ifdef RINGFEED_HAVE_CURL
    if (!ld->rcache)
        return;
    rf_rcache_stats c;
    rf_rcache_stats_get(ld->rcache, &c);
    st->shard_cache_on = c.on;
    st->shard_cache_hits = c.hits;
    st->shard_cache_misses = c.misses;
    st->shard_cache_stale = c.stale;
    st->shard_cache_bypasses = c.bypasses;
    st->shard_cache_fills = c.fills;
    st->shard_cache_fill_requests = c.fill_requests;
    st->shard_cache_fill_failures = c.fill_failures;
    st->shard_cache_bytes_written = c.bytes_written;
    st->shard_cache_evictions = c.evictions;
    st->shard_cache_corrupt = c.corrupt;
    snprintf(st->shard_cache_why, sizeof st->shard_cache_why, "%s", c.why);
#endif
}

void pl_cache_close(rf_loader *ld)
{
#ifdef RINGFEED_HAVE_CURL
    rf_rcache_close(ld->rcache);
    if (ld->remote) /* the dataset closes its shards after this: through the client itself */
        ld->ds.remote = &ld->remote->ops;
#endif
    ld->rcache = NULL;
    free(ld->cache_dir);
    ld->cache_dir = NULL;
}
