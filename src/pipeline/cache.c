/* cache.c — the loader's use of the local shard cache for remote shards (rf_config.cache_dir):
 * the glue between the pipeline and io/remote_cache.h, which does the work. A library built
 * without libcurl reads no URL, so there these have no cache to reach and do nothing.
 *
 * DESIGN
 *  - pl_cache_fd runs under mu in dispatch (pl_task_set_read): a read of a shard whose copy is
 *    cached gets the copy's descriptor and no URL, and the curl engine reads it with pread.
 *    remote_cache.c takes its own mutex after mu, never mu after its own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/pipeline.h"
#ifdef RINGFEED_HAVE_CURL
#include "io/remote_cache.h"
#endif

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
    return rf_rcache_open(ld->remote, ld->cfg.cache_dir, ld->cfg.cache_bytes, ld->ds.files,
                          ld->ds.nfiles, &ld->rcache, err);
#else
    (void)err;
    return 0;
#endif
}

int pl_cache_fd(rf_loader *ld, uint32_t file)
{
#ifdef RINGFEED_HAVE_CURL
    if (ld->rcache)
        return rf_rcache_fd(ld->rcache, file);
#else
    (void)ld, (void)file;
#endif
    return -1;
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
    snprintf(st->shard_cache_why, sizeof st->shard_cache_why, "%s", c.why);
#endif
}

void pl_cache_close(rf_loader *ld)
{
#ifdef RINGFEED_HAVE_CURL
    rf_rcache_close(ld->rcache);
#endif
    ld->rcache = NULL;
    free(ld->cache_dir);
    ld->cache_dir = NULL;
}
