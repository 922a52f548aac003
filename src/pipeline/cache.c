/* cache.c — the pipeline's remote shards (cache.h): the client create opens for URL patterns,
 * and the glue between the pipeline and the local shard cache (io/remote_cache.h), which does
 * the work.
 * The cache opens with the client, before the dataset, so create reads a cached shard from
 * its copy. pl_cache_has runs under mu (the one lock taken after mu: state.h); a read it marks
 * `cached` is served from the copy, checked, or from the URL (io/remote_cache.h). */
#include "pipeline/cache.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef RINGFEED_HAVE_CURL
#include "io/remote.h"
#include "io/remote_cache.h"
#endif

#ifdef RINGFEED_HAVE_CURL
static int cache_open(pl_remote *rm, rf_dataset *ds, rf_err *err)
{
    if (!rm->cache_dir)
        return 0;
    int rc = rf_rcache_open(rm->client, rm->cache_dir, rm->cache_bytes, &rm->cache, err);
    if (rc == 0)
        ds->remote = rf_rcache_ops(rm->cache);
    return rc;
}
#endif

/* One run reads either files or URLs: the I/O engine is chosen once for all shards, so
 * patterns mixing both are refused. */
int pl_remote_setup(pl_remote *rm, rf_dataset *ds, const rf_config *c, rf_err *err)
{
    rm->cache_dir = c->cache_dir;
    rm->cache_bytes = c->cache_bytes;
    uint32_t urls = 0;
    for (uint32_t i = 0; i < c->shard_count; i++)
        urls += (uint32_t)rf_path_is_url(c->shards[i]);
    if (urls == 0)
        return 0;
    if (urls != c->shard_count)
        return rf_seterr(err, RF_EINVAL, "shard patterns mix URLs and local files; one loader "
                         "reads either (%u of %u patterns are URLs)", urls, c->shard_count);
    /* A folder source walks a directory tree or reads a list of local paths: neither has a
     * remote form (an http server cannot be listed). Tar shards and token files are objects
     * read by ranges, which the remote client serves. */
    if (c->source == RF_SOURCE_FOLDER)
        return rf_seterr(err, RF_EINVAL, "%s: a folder source (RF_SOURCE_FOLDER) reads local "
                         "files only; URLs are read as tar shards or token files", c->shards[0]);
#ifdef RINGFEED_HAVE_CURL
    int rc = rf_remote_new(c->remote_retries, c->remote_timeout_ms, &rm->client, err);
    if (rc)
        return rc;
    ds->remote = &rm->client->ops;
    return cache_open(rm, ds, err);
#else
    (void)ds;
    return rf_seterr(err, RF_EINVAL, "%s: this library was built without remote shard "
                     "support (libcurl), so URLs cannot be read", c->shards[0]);
#endif
}

void pl_remote_opened(pl_remote *rm)
{
#ifdef RINGFEED_HAVE_CURL
    if (rm->client) { /* relaxed: no other thread counts before the pipeline starts */
        rm->create_requests = atomic_load_explicit(&rm->client->requests, memory_order_relaxed);
        rm->create_bytes = atomic_load_explicit(&rm->client->bytes, memory_order_relaxed);
    }
#else
    (void)rm;
#endif
}

int pl_cache_setup(pl_remote *rm, const rf_dataset *ds, rf_err *err)
{
    if (!rm->cache_dir)
        return 0;
    if (!rm->client) {
        snprintf(rm->cache_why, sizeof rm->cache_why, "the shards are local files: the cache "
                 "keeps remote shards only");
        return 0;
    }
#ifdef RINGFEED_HAVE_CURL
    return rf_rcache_attach(rm->cache, ds->files, ds->nfiles, err);
#else
    (void)ds, (void)err;
    return 0;
#endif
}

int pl_cache_has(pl_remote *rm, uint32_t file)
{
#ifdef RINGFEED_HAVE_CURL
    if (rm->cache)
        return rf_rcache_has(rm->cache, file);
#else
    (void)rm, (void)file;
#endif
    return 0;
}

void pl_cache_go(pl_remote *rm)
{
    if (rm->going)
        return;
    rm->going = 1;
#ifdef RINGFEED_HAVE_CURL
    if (rm->cache)
        rf_rcache_go(rm->cache);
#endif
}

void pl_remote_stats(const pl_remote *rm, rf_stats *st)
{
    snprintf(st->shard_cache_why, sizeof st->shard_cache_why, "%s", rm->cache_why);
#ifdef RINGFEED_HAVE_CURL
    const rf_remote *r = rm->client;
    if (r) { /* relaxed: statistics, like the counters */
        st->remote_requests = atomic_load_explicit(&r->requests, memory_order_relaxed);
        st->remote_retries = atomic_load_explicit(&r->retried, memory_order_relaxed);
        st->remote_bytes = atomic_load_explicit(&r->bytes, memory_order_relaxed);
        st->remote_create_requests = rm->create_requests;
        st->remote_create_bytes = rm->create_bytes;
    }
    if (!rm->cache)
        return;
    rf_rcache_stats c;
    rf_rcache_stats_get(rm->cache, &c);
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

void pl_cache_close(pl_remote *rm, rf_dataset *ds)
{
#ifdef RINGFEED_HAVE_CURL
    rf_rcache_close(rm->cache);
    if (rm->client)
        ds->remote = &rm->client->ops;
#else
    (void)ds;
#endif
    rm->cache = NULL;
}

void pl_remote_free(pl_remote *rm)
{
#ifdef RINGFEED_HAVE_CURL
    rf_remote_free(rm->client);
#endif
    rm->client = NULL;
}
