/* remote_cache.c — the shard cache wired to remote shards: lookups at open, the fill thread,
 * the descriptors the pipeline reads cached shards through. remote_cache.h has the DESIGN. */
#include "io/remote_cache.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "io/remote.h"
#include "io/shard_cache.h"
#include "loaders/tar.h"

enum { SH_IDLE = 0, SH_QUEUED, SH_DONE };

typedef struct rshard {
    char *key;
    char validator[RF_REMOTE_ETAG_MAX];
    _Atomic int fd;         /* the cached copy (release-published), -1: remote */
    _Atomic int state;      /* SH_*: whether the shard was queued for a fill */
    uint32_t rechecks;      /* fill thread only */
    uint64_t due_ns;        /* under mu: when a deferred fill may be tried */
} rshard;

struct rf_rcache {
    rf_remote *r;
    rf_cache *c;
    const rf_file *files;
    uint32_t n, ninit;      /* shards, and of them those shard_init set up */
    uint64_t budget;
    rshard *s;
    pthread_mutex_t mu;     /* guards q, qlen, qhead, go, stop, why */
    pthread_cond_t cv;
    uint32_t *q, qhead, qlen; /* shards waiting for a fill, first read first */
    int go, stop, started;
    pthread_t tid;
    uint8_t *buf;           /* RF_RCACHE_CHUNK bytes: the fill thread's */
    char why[RF_ERRMSG_MAX];
    /* Counted by the fill thread and open, read by stats (relaxed: statistics only). */
    _Atomic uint64_t hits, misses, fills, fill_requests, fill_failures;
};

static void bump(_Atomic uint64_t *c) { atomic_fetch_add_explicit(c, 1, memory_order_relaxed); }

static void set_why(rf_rcache *rc, const char *msg)
{
    pthread_mutex_lock(&rc->mu);
    snprintf(rc->why, sizeof rc->why, "%s", msg);
    pthread_mutex_unlock(&rc->mu);
}

/* Look shard i up; a hit publishes its descriptor for the pipeline's reads (and counts, unless
 * it is this loader's own fill coming back). 1: hit. */
static int lookup(rf_rcache *rc, uint32_t i, int count)
{
    rshard *s = &rc->s[i];
    int fd = -1;
    rf_err e = {0};
    if (rf_cache_get(rc->c, s->key, rc->files[i].size, s->validator, &fd, &e) != 1)
        return 0;
    if (count)
        bump(&rc->hits);
    /* Release: the reader of fd (rf_rcache_fd, acquire) sees an open descriptor. */
    atomic_store_explicit(&s->fd, fd, memory_order_release);
    atomic_store_explicit(&s->state, SH_DONE, memory_order_relaxed);
    return 1;
}

/* Stream the object whole into w. 0, or a negative code with msg[cap] saying why. */
static int stream_into(rf_rcache *rc, uint32_t i, rf_cache_writer *w, char *msg, size_t cap)
{
    const rf_file *f = &rc->files[i];
    rf_byte_reader rd;
    rf_err e = {0};
    int rc_ = rc->r->ops.reader(rc->r->ops.ctx, f->remote, &rd, &e);
    if (rc_) {
        snprintf(msg, cap, "%s", e.msg);
        return rc_;
    }
    bump(&rc->fill_requests);
    for (uint64_t off = 0; rc_ == 0 && off < f->size;) {
        pthread_mutex_lock(&rc->mu);
        int stop = rc->stop;
        pthread_mutex_unlock(&rc->mu);
        if (stop) {
            snprintf(msg, cap, "%s: the loader closed during the fill", f->path);
            rc_ = RF_ECLOSED;
            break;
        }
        size_t got = 0;
        rc_ = rd.read(rd.ctx, rc->buf, RF_RCACHE_CHUNK, off, &got);
        if (rc_ == 0 && got == 0)
            rc_ = -EIO;
        if (rc_)
            snprintf(msg, cap, "%s", rd.why(rd.ctx)[0] ? rd.why(rd.ctx) : "the stream failed");
        else if ((rc_ = rf_cache_fill_write(w, off, rc->buf, got, &e)) != 0)
            snprintf(msg, cap, "%s", e.msg);
        off += got;
    }
    rc->r->ops.reader_close(&rd);
    return rc_;
}

/* A fill refused: look the shard up again later when the reason may pass. */
static void refused(rf_rcache *rc, uint32_t i, const char *msg)
{
    rshard *s = &rc->s[i];
    set_why(rc, msg);
    if (lookup(rc, i, 1))
        return; /* another writer published it since */
    if (rc->files[i].size > rc->budget || rf_cache_off_why(rc->c) ||
        ++s->rechecks > RF_RCACHE_RECHECKS_MAX) {
        atomic_store_explicit(&s->state, SH_DONE, memory_order_relaxed);
        return;
    }
    pthread_mutex_lock(&rc->mu);
    s->due_ns = rf_now_ns() + (uint64_t)RF_RCACHE_RECHECK_MS * 1000000u;
    rc->q[(rc->qhead + rc->qlen++) % rc->n] = i;
    pthread_mutex_unlock(&rc->mu);
}

static void fill_one(rf_rcache *rc, uint32_t i)
{
    rshard *s = &rc->s[i];
    rf_cache_writer *w = NULL;
    rf_err e = {0};
    int rc_ = rf_cache_fill_begin(rc->c, s->key, rc->files[i].size, s->validator, &w, &e);
    if (rc_) {
        refused(rc, i, e.msg);
        return;
    }
    char msg[RF_ERRMSG_MAX] = "";
    rc_ = stream_into(rc, i, w, msg, sizeof msg);
    if (rc_) {
        rf_cache_fill_abort(w);
    } else if ((rc_ = rf_cache_fill_commit(w, &e)) != 0) {
        snprintf(msg, sizeof msg, "%s", e.msg);
    }
    atomic_store_explicit(&s->state, SH_DONE, memory_order_relaxed);
    if (rc_) {
        bump(&rc->fill_failures);
        set_why(rc, msg);
        return;
    }
    bump(&rc->fills);
    lookup(rc, i, 0);
}

/* The next shard whose fill is due, under mu; waits while none is. UINT32_MAX: stop. */
static uint32_t next_due_locked(rf_rcache *rc)
{
    for (;;) {
        if (rc->stop)
            return UINT32_MAX;
        uint64_t now = rf_now_ns(), first = UINT64_MAX;
        for (uint32_t k = 0; rc->go && k < rc->qlen; k++) {
            uint32_t i = rc->q[rc->qhead];
            rc->qhead = (rc->qhead + 1) % rc->n;
            if (rc->s[i].due_ns <= now) {
                rc->qlen--;
                return i;
            }
            rc->q[(rc->qhead + rc->qlen - 1) % rc->n] = i; /* to the back */
            first = RF_MIN(first, rc->s[i].due_ns);
        }
        if (first == UINT64_MAX) {
            pthread_cond_wait(&rc->cv, &rc->mu);
        } else {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            uint64_t at = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec + first - now;
            ts = (struct timespec){(time_t)(at / 1000000000u), (long)(at % 1000000000u)};
            pthread_cond_timedwait(&rc->cv, &rc->mu, &ts);
        }
    }
}

static void *fill_main(void *arg)
{
    rf_rcache *rc = arg;
    pthread_mutex_lock(&rc->mu);
    for (uint32_t i; (i = next_due_locked(rc)) != UINT32_MAX;) {
        pthread_mutex_unlock(&rc->mu);
        fill_one(rc, i);
        pthread_mutex_lock(&rc->mu);
    }
    pthread_mutex_unlock(&rc->mu);
    return NULL;
}

int rf_rcache_fd(rf_rcache *rc, uint32_t file)
{
    rshard *s = &rc->s[file];
    int fd = atomic_load_explicit(&s->fd, memory_order_acquire); /* see lookup() */
    int idle = SH_IDLE;
    if (fd >= 0 || !atomic_compare_exchange_strong_explicit(&s->state, &idle, SH_QUEUED,
                                                            memory_order_relaxed,
                                                            memory_order_relaxed))
        return fd;
    pthread_mutex_lock(&rc->mu);
    rc->q[(rc->qhead + rc->qlen++) % rc->n] = file; /* each shard is queued at most once */
    pthread_cond_signal(&rc->cv);
    pthread_mutex_unlock(&rc->mu);
    return -1;
}

void rf_rcache_go(rf_rcache *rc)
{
    pthread_mutex_lock(&rc->mu);
    rc->go = 1;
    pthread_cond_signal(&rc->cv);
    pthread_mutex_unlock(&rc->mu);
}

/* The shard's key and validator, then its lookup. */
static int shard_init(rf_rcache *rc, uint32_t i, rf_err *err)
{
    rshard *s = &rc->s[i];
    const rf_remote_file *f = rc->files[i].remote;
    size_t cap = strlen(rc->files[i].path) + 1;
    atomic_init(&s->fd, -1);
    atomic_init(&s->state, SH_IDLE);
    rc->ninit = i + 1; /* close walks only shards whose fd says -1 or a cached copy */
    if (!(s->key = malloc(cap)))
        return rf_seterr(err, RF_ENOMEM, "no memory");
    if (rf_cache_key_from_url(rc->files[i].path, s->key, cap) != 0)
        return rf_seterr(err, RF_EINVAL, "%s: no cache key for it", rc->files[i].path);
    /* The ETag names the object's version; without one the size alone decides (documented). */
    snprintf(s->validator, sizeof s->validator, "%s", f->etag);
    if (!lookup(rc, i, 1))
        bump(&rc->misses);
    return 0;
}

int rf_rcache_open(rf_remote *r, const char *dir, uint64_t budget, const rf_file *files,
                   uint32_t nfiles, rf_rcache **out, rf_err *err)
{
    *out = NULL;
    rf_rcache *rc = calloc(1, sizeof *rc);
    if (!rc)
        return rf_seterr(err, RF_ENOMEM, "no memory");
    *rc = (rf_rcache){.r = r, .files = files, .n = nfiles, .budget = budget};
    pthread_mutex_init(&rc->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&rc->cv, &ca);
    pthread_condattr_destroy(&ca);
    int rc_ = rf_cache_open(dir, budget, &rc->c, err);
    if (rc_) {
        char m[RF_ERRMSG_MAX];
        snprintf(m, sizeof m, "%s", err->msg);
        rf_seterr(err, rc_, "cache_dir: %.480s", m);
    }
    if (rc_ == 0 && (!(rc->s = calloc(nfiles, sizeof *rc->s)) ||
                     !(rc->q = calloc(nfiles, sizeof *rc->q)) ||
                     !(rc->buf = malloc(RF_RCACHE_CHUNK))))
        rc_ = rf_seterr(err, RF_ENOMEM, "no memory");
    for (uint32_t i = 0; rc_ == 0 && i < nfiles; i++)
        rc_ = shard_init(rc, i, err);
    if (rc_ == 0) {
        int p = pthread_create(&rc->tid, NULL, fill_main, rc);
        rc->started = p == 0;
        if (rc->started)
            rf_thread_name(rc->tid, "rf-cache-fill", -1);
        if (p)
            rc_ = rf_seterr(err, -p, "cache_dir: starting the fill thread failed: %s",
                            strerror(p));
    }
    if (rc_) {
        rf_rcache_close(rc);
        return rc_;
    }
    *out = rc;
    return 0;
}

void rf_rcache_stats_get(rf_rcache *rc, rf_rcache_stats *st)
{
    memset(st, 0, sizeof *st);
    rf_cache_stats c;
    rf_cache_stats_get(rc->c, &c);
    st->on = c.off ? 2 : 1;
    st->hits = atomic_load_explicit(&rc->hits, memory_order_relaxed);
    st->misses = atomic_load_explicit(&rc->misses, memory_order_relaxed);
    st->stale = c.stale;
    st->bypasses = c.bypasses;
    st->fills = atomic_load_explicit(&rc->fills, memory_order_relaxed);
    st->fill_requests = atomic_load_explicit(&rc->fill_requests, memory_order_relaxed);
    st->fill_failures = atomic_load_explicit(&rc->fill_failures, memory_order_relaxed);
    st->bytes_written = c.bytes_written;
    st->evictions = c.evictions;
    const char *off = rf_cache_off_why(rc->c);
    pthread_mutex_lock(&rc->mu);
    snprintf(st->why, sizeof st->why, "%s", off ? off : rc->why);
    pthread_mutex_unlock(&rc->mu);
}

void rf_rcache_close(rf_rcache *rc)
{
    if (!rc)
        return;
    if (rc->started) {
        pthread_mutex_lock(&rc->mu);
        rc->stop = 1;
        pthread_cond_signal(&rc->cv);
        pthread_mutex_unlock(&rc->mu);
        pthread_join(rc->tid, NULL);
    }
    for (uint32_t i = 0; i < rc->ninit; i++) {
        int fd = atomic_load_explicit(&rc->s[i].fd, memory_order_relaxed); /* thread joined */
        if (fd >= 0)
            rf_cache_release(rc->c, fd);
        free(rc->s[i].key);
    }
    rf_cache_close(rc->c);
    free(rc->s);
    free(rc->q);
    free(rc->buf);
    pthread_mutex_destroy(&rc->mu);
    pthread_cond_destroy(&rc->cv);
    free(rc);
}
