/* sync_use.c — sync_use.h: the sidecars found at create, the checked lookup, the builds and
 * their flushes. */
#include "pipeline/sync_use.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/gpujpeg.h"
#include "base/hash.h"

/* A built entry with its own points. */
typedef struct built {
    rf_sync_entry e;
    uint8_t points[];
} built;

typedef struct shard {
    rf_sync_index ix;       /* the sidecar found at create (entries 0: none) */
    char *write_to;         /* where a built sidecar goes; NULL: nowhere */
    uint64_t first, count;  /* its samples: [first, first + count) of the dataset */
    uint64_t size;          /* the shard's bytes, for the header of a sidecar written */
    _Atomic uint32_t dirty; /* entries built since its last flush */
    int refused;            /* a sidecar was there but not readable: rf_stats.sync_stale 1 */
} shard;

struct pl_sync {
    shard *shards;
    uint32_t nshards;
    _Atomic(built *) *by_sample; /* entries built this run */
    _Atomic(uint8_t) *stale_seen; /* a loaded entry found stale: counted once */
    uint64_t nsamples;
    int build;
    _Atomic int go; /* the first batch is out: building may start (pl_sync_go) */
    _Atomic uint64_t build_bytes;
    _Atomic int build_full;
    _Atomic uint64_t indexed, stale, nbuilt, loaded;
    pthread_t flusher;
    int flusher_on;
};

/* The cache folder's name for a shard's sidecar: sync-<XXH64 of its path>.sync. */
static char *cache_name(const char *cache_dir, const char *path)
{
    char *out = malloc(strlen(cache_dir) + 40);
    if (out)
        sprintf(out, "%s/sync-%016llx%s", cache_dir,
                (unsigned long long)rf_xxh64(path, strlen(path)), RF_SYNC_EXT);
    return out;
}

/* A remote shard's sidecar beside it (a 404 is none). */
static void fetch_remote(const rf_dataset *ds, const char *url, shard *sh)
{
    char name[RF_PATH_BYTES_MAX], *text = NULL, why[200];
    uint64_t len = 0;
    rf_err e = {0};
    if (strchr(url, '?') || rf_sync_path(url, name, sizeof name) ||
        ds->remote->fetch(ds->remote->ctx, name, (uint64_t)1 << 32, &text, &len, &e) != 1)
        return;
    if (rf_sync_load((uint8_t *)text, (size_t)len, &sh->ix, why, sizeof why)) {
        fprintf(stderr, "ringfeed: %s: sync-point index not used: %s\n", name, why);
        sh->refused = 1;
    }
}

/* Which sidecar a shard uses and where a built one goes. */
static int open_shard(const rf_dataset *ds, uint32_t i, const char *url, const char *cache_dir,
                      shard *sh)
{
    const rf_file *f = &ds->files[i];
    char beside[RF_PATH_BYTES_MAX], why[200];
    sh->size = f->size;
    char *cached = cache_dir ? cache_name(cache_dir, url ? url : f->path) : NULL;
    if (cache_dir && !cached)
        return RF_ENOMEM;
    int found = 0;
    if (f->remote) {
        if (url)
            fetch_remote(ds, url, sh);
        found = sh->ix.entries > 0;
        sh->write_to = cached;
    } else if (rf_sync_path(f->path, beside, sizeof beside) == 0) {
        int rc = rf_sync_load_file(beside, &sh->ix, why, sizeof why);
        if (rc < 0)
            fprintf(stderr, "ringfeed: %s: sync-point index not used: %s\n", beside, why);
        sh->refused = rc < 0;
        found = rc == 0;
        /* a built one goes beside the shard when its folder takes it */
        char dir[RF_PATH_BYTES_MAX];
        snprintf(dir, sizeof dir, "%s", f->path);
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = 0;
        if (access(slash ? dir : ".", W_OK) == 0) {
            free(cached);
            cached = NULL;
            if (!(sh->write_to = strdup(beside)))
                return RF_ENOMEM;
        } else {
            sh->write_to = cached;
        }
    }
    if (!found && cached) {
        int rc = rf_sync_load_file(cached, &sh->ix, why, sizeof why);
        if (rc < 0)
            fprintf(stderr, "ringfeed: %s: sync-point index not used: %s\n", cached, why);
        sh->refused |= rc < 0;
    }
    if (sh->write_to != cached)
        free(cached);
    return 0;
}

int pl_sync_create(const rf_dataset *ds, char *const *urls, uint32_t npaths,
                   const char *cache_dir, int build, pl_sync **out, rf_err *err)
{
    *out = NULL;
    if (!ds->nfiles || !(ds->samples[0].flags & RF_SAMPLE_TAR))
        return 0;
    pl_sync *s = calloc(1, sizeof *s);
    if (!s || !(s->shards = calloc(ds->nfiles, sizeof *s->shards)) ||
        !(s->by_sample = calloc(ds->nsamples, sizeof *s->by_sample)) ||
        !(s->stale_seen = calloc(ds->nsamples, sizeof *s->stale_seen))) {
        pl_sync_destroy(s);
        return rf_seterr(err, RF_ENOMEM, "no memory for the sync-point indexes");
    }
    s->nshards = ds->nfiles, s->nsamples = ds->nsamples, s->build = build;
    for (uint32_t i = 0; i < ds->nfiles; i++) {
        const char *url = urls && npaths == ds->nfiles ? urls[i] : NULL;
        if (open_shard(ds, i, url, cache_dir, &s->shards[i])) {
            pl_sync_destroy(s);
            return rf_seterr(err, RF_ENOMEM, "no memory for the sync-point indexes");
        }
        s->loaded += s->shards[i].ix.entries;
        atomic_fetch_add_explicit(&s->stale, (uint64_t)s->shards[i].refused,
                                  memory_order_relaxed); /* create: no other thread yet */
    }
    for (uint64_t k = 0; k < ds->nsamples; k++) { /* samples are stored shard after shard */
        shard *sh = &s->shards[ds->samples[k].file];
        if (!sh->count++)
            sh->first = k;
    }
    *out = s;
    return 0;
}

/* ---- lookups and builds ----------------------------------------------------------------------- */

static const rf_sync_entry *build_one(pl_sync *s, rf_decoder *dec, uint32_t file,
                                      uint64_t sample, uint64_t off, const uint8_t *jpeg,
                                      size_t len)
{
    if (atomic_load_explicit(&s->build_full, memory_order_relaxed))
        return NULL;
    rf_sync_entry e = {.off = off};
    rf_err err = {0};
    if (rf_decode_sync_entry(dec, jpeg, len, &e, &err))
        return NULL;
    size_t pts = (size_t)e.npoints * RF_SYNC_POINT;
    /* relaxed: a budget, not an ordering; the message is said by whoever flips the flag */
    if (atomic_fetch_add_explicit(&s->build_bytes, pts + sizeof(built), memory_order_relaxed) +
            pts > RF_SYNC_BUILD_BYTES) {
        if (!atomic_exchange_explicit(&s->build_full, 1, memory_order_relaxed))
            fprintf(stderr, "ringfeed: sync-point indexes: %llu MiB of points built this run, "
                    "the most the loader holds; the rest are walked each epoch "
                    "(ringfeed-pack --sync-index builds them ahead)\n",
                    (unsigned long long)(RF_SYNC_BUILD_BYTES >> 20));
        return NULL;
    }
    built *b = malloc(sizeof *b + pts);
    if (!b)
        return NULL;
    b->e = e;
    if (pts) /* an entry without points (progressive, unreadable) has points NULL */
        memcpy(b->points, e.points, pts);
    b->e.points = b->points;
    built *none = NULL;
    /* acq_rel: publishes b's points to readers, and acquires the winner's on a loss */
    if (!atomic_compare_exchange_strong_explicit(&s->by_sample[sample], &none, b,
                                                 memory_order_acq_rel, memory_order_acquire)) {
        free(b); /* another thread built it first (a sample twice in one epoch: resampling) */
        return &none->e;
    }
    atomic_fetch_add_explicit(&s->nbuilt, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->shards[file].dirty, 1, memory_order_release);
    return &b->e;
}

void pl_sync_go(pl_sync *s)
{
    if (s)
        atomic_store_explicit(&s->go, 1, memory_order_relaxed); /* a hint, not an ordering */
}

/* A stale entry of `sample` counted once per run. */
static void count_stale(pl_sync *s, uint64_t sample)
{
    if (!atomic_exchange_explicit(&s->stale_seen[sample], 1, memory_order_relaxed))
        atomic_fetch_add_explicit(&s->stale, 1, memory_order_relaxed);
}

const rf_sync_entry *pl_sync_get(pl_sync *s, rf_decoder *dec, uint32_t file, uint64_t sample,
                                 uint64_t off, const uint8_t *jpeg, size_t len,
                                 rf_sync_entry *buf)
{
    int may_build = s->build && atomic_load_explicit(&s->go, memory_order_relaxed);
    built *b = atomic_load_explicit(&s->by_sample[sample], memory_order_acquire);
    const rf_sync_entry *e = NULL;
    if (b) {
        e = &b->e;
    } else if (rf_sync_find(&s->shards[file].ix, off, buf)) {
        e = buf;
    } else if (may_build) {
        return build_one(s, dec, file, sample, off, jpeg, len);
    } else {
        return NULL;
    }
    if (e->status != RF_SYNC_POINTS)
        return NULL;
    if (e->len == len && e->hash == rf_xxh64(jpeg, len))
        return e;
    count_stale(s, sample);
    if (e == buf && may_build)
        return build_one(s, dec, file, sample, off, jpeg, len);
    return NULL;
}

void pl_sync_count(pl_sync *s, uint64_t sample, uint32_t result)
{
    if (result == RF_SYNC_USED)
        atomic_fetch_add_explicit(&s->indexed, 1, memory_order_relaxed);
    else if (result == RF_SYNC_STALE)
        count_stale(s, sample);
}

void pl_sync_counts_get(const pl_sync *s, pl_sync_counts *c)
{
    *c = (pl_sync_counts){0};
    if (!s)
        return;
    c->indexed = atomic_load_explicit(&s->indexed, memory_order_relaxed);
    c->stale = atomic_load_explicit(&s->stale, memory_order_relaxed);
    c->built = atomic_load_explicit(&s->nbuilt, memory_order_relaxed);
    c->loaded = s->loaded;
}

/* ---- flushes ------------------------------------------------------------------------------- */

/* A loaded entry stays unless a built one replaces it (the builder keeps the later one). */
static int write_shard(pl_sync *s, uint32_t i)
{
    shard *sh = &s->shards[i];
    rf_sync_builder b = {0};
    int rc = rf_sync_builder_merge(&b, &sh->ix, NULL, NULL) ? -ENOMEM : 0;
    for (uint64_t k = sh->first; rc == 0 && k < sh->first + sh->count; k++) {
        built *e = atomic_load_explicit(&s->by_sample[k], memory_order_acquire);
        if (e && rf_sync_builder_add(&b, &e->e))
            rc = -ENOMEM;
    }
    if (rc == 0)
        rc = rf_sync_builder_write(&b, sh->size, sh->write_to);
    if (rc)
        fprintf(stderr, "ringfeed: %s: sync-point index not written: %s\n", sh->write_to,
                strerror(-rc));
    rf_sync_builder_free(&b);
    return rc;
}

static void *flush_main(void *arg)
{
    pl_sync *s = arg;
    for (uint32_t i = 0; i < s->nshards; i++) {
        shard *sh = &s->shards[i];
        uint32_t d = atomic_exchange_explicit(&sh->dirty, 0, memory_order_acquire);
        if (d && sh->write_to)
            write_shard(s, i);
    }
    return NULL;
}

void pl_sync_flush_async(pl_sync *s)
{
    if (!s || !s->build)
        return;
    if (s->flusher_on)
        pthread_join(s->flusher, NULL);
    s->flusher_on = pthread_create(&s->flusher, NULL, flush_main, s) == 0;
    if (s->flusher_on)
        rf_thread_name(s->flusher, "rf-sync-flush", -1);
    if (!s->flusher_on)
        flush_main(s);
}

void pl_sync_destroy(pl_sync *s)
{
    if (!s)
        return;
    if (s->flusher_on)
        pthread_join(s->flusher, NULL);
    if (s->build && s->shards && s->by_sample)
        flush_main(s);
    for (uint32_t i = 0; s->shards && i < s->nshards; i++) {
        rf_sync_free(&s->shards[i].ix);
        free(s->shards[i].write_to);
    }
    for (uint64_t k = 0; s->by_sample && k < s->nsamples; k++)
        free(atomic_load_explicit(&s->by_sample[k], memory_order_relaxed));
    free(s->by_sample);
    free((void *)s->stale_seen);
    free(s->shards);
    free(s);
}
