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

/* An opened copy of a shard: its pinned descriptor and checksums, published through
 * rshard.copy; a dropped one stays allocated (rf_rcache.retired) until close, as a read may
 * still use it. */
typedef struct rcopy {
    int fd;
    rf_cache_sums sums;
    struct rcopy *next;     /* on retired */
} rcopy;

/* Create's lookup of one opened shard (its reader's), reused by rf_rcache_attach. */
typedef struct early {
    const void *file;       /* the rf_remote_file */
    rcopy *cp;              /* NULL: a miss */
} early;

typedef struct rshard {
    char *key;
    char validator[RF_REMOTE_ETAG_MAX];
    _Atomic(rcopy *) copy;  /* the cached copy (release-published), NULL: remote */
    _Atomic int state;      /* SH_*: whether the shard was queued for a fill */
    uint32_t rechecks;      /* fill thread only */
    uint64_t due_ns;        /* under mu: when a deferred fill may be tried */
} rshard;

struct rf_rcache {
    rf_remote *r;
    rf_cache *c;
    rf_remote_ops ops;      /* the client's, with a reader of cached copies */
    const rf_file *files;
    uint32_t n, ninit;      /* shards, and of them those shard_init set up */
    uint64_t budget;
    rshard *s;
    early *early;           /* create's lookups, in the order the dataset opened its shards */
    uint64_t nearly, early_cap, early_at;
    pthread_mutex_t mu;     /* guards q, qlen, qhead, go, stop, why, retired */
    pthread_cond_t cv;
    uint32_t *q, qhead, qlen; /* shards waiting for a fill, first read first */
    int go, stop, started;
    pthread_t tid;
    uint8_t *buf;           /* RF_RCACHE_CHUNK bytes: the fill thread's */
    rcopy *retired;
    char why[RF_ERRMSG_MAX];
    /* Counted by the fill thread, open and the readers, read by stats (relaxed: statistics). */
    _Atomic uint64_t hits, misses, fills, fill_requests, fill_failures, corrupt;
};

static void bump(_Atomic uint64_t *c) { atomic_fetch_add_explicit(c, 1, memory_order_relaxed); }

static void set_why(rf_rcache *rc, const char *msg)
{
    pthread_mutex_lock(&rc->mu);
    snprintf(rc->why, sizeof rc->why, "%s", msg);
    pthread_mutex_unlock(&rc->mu);
}

/* The copy of key if the cache holds it (pinned, its checksums read), else NULL. A copy
 * without valid checksums is not served. */
static rcopy *copy_get(rf_rcache *rc, const char *key, uint64_t size, const char *validator)
{
    int fd = -1;
    rf_err e = {0};
    if (rf_cache_get(rc->c, key, size, validator, &fd, &e) != 1)
        return NULL;
    rcopy *cp = calloc(1, sizeof *cp);
    if (!cp || rf_cache_sums_load(fd, size, &cp->sums) != 0) {
        free(cp);
        rf_cache_release(rc->c, fd);
        return NULL;
    }
    cp->fd = fd;
    return cp;
}

static void copy_free(rf_rcache *rc, rcopy *cp)
{
    rf_cache_release(rc->c, cp->fd);
    rf_cache_sums_free(&cp->sums);
    free(cp);
}

/* A copy that failed its checksums, under mu: its entry goes, the copy stays for reads still
 * using it, and it is counted with the message. */
static void retire_bad_locked(rf_rcache *rc, const char *key, rcopy *cp, const char *shown,
                              uint64_t bad_off)
{
    rf_cache_drop(rc->c, key, cp->fd);
    cp->next = rc->retired;
    rc->retired = cp;
    atomic_fetch_add_explicit(&rc->corrupt, 1, memory_order_relaxed);
    snprintf(rc->why, sizeof rc->why, "%s: the cached copy's block at byte %llu does not match "
             "its checksum: dropped, read from the server and filled again", shown,
             (unsigned long long)bad_off);
}

/* Publish cp as shard i's copy (and count it, unless it is this loader's own fill coming
 * back). */
static void publish(rf_rcache *rc, uint32_t i, rcopy *cp, int count)
{
    rshard *s = &rc->s[i];
    if (count)
        bump(&rc->hits);
    /* Release: the reader of the copy (acquire) sees its descriptor and checksums. */
    atomic_store_explicit(&s->copy, cp, memory_order_release);
    atomic_store_explicit(&s->state, SH_DONE, memory_order_relaxed);
}

/* Look shard i up; a hit publishes its copy for the pipeline's reads. 1: hit. */
static int lookup(rf_rcache *rc, uint32_t i, int count)
{
    rshard *s = &rc->s[i];
    rcopy *cp = copy_get(rc, s->key, rc->files[i].size, s->validator);
    if (!cp)
        return 0;
    publish(rc, i, cp, count);
    return 1;
}

/* Stream the object whole into w. 0, or a negative code with msg[cap] saying why. */
static int stream_into(rf_rcache *rc, uint32_t i, rf_cache_writer *w, char *msg, size_t cap)
{
    const rf_file *f = &rc->files[i];
    rf_byte_reader rd;
    rf_err e = {0};
    int rc_ = rc->r->ops.reader(rc->r->ops.ctx, f->remote, 1, &rd, &e);
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

int rf_rcache_has(rf_rcache *rc, uint32_t file)
{
    rshard *s = &rc->s[file];
    rcopy *cp = atomic_load_explicit(&s->copy, memory_order_acquire); /* see publish() */
    int idle = SH_IDLE;
    if (cp || !atomic_compare_exchange_strong_explicit(&s->state, &idle, SH_QUEUED,
                                                        memory_order_relaxed,
                                                        memory_order_relaxed))
        return cp != NULL;
    pthread_mutex_lock(&rc->mu);
    rc->q[(rc->qhead + rc->qlen++) % rc->n] = file; /* queued at most once at a time */
    pthread_cond_signal(&rc->cv);
    pthread_mutex_unlock(&rc->mu);
    return 0;
}

int rf_rcache_read(rf_rcache *rc, uint32_t file, uint8_t *dst, uint32_t len, uint64_t off,
                   uint8_t *bounce, char *why, size_t cap)
{
    rshard *s = &rc->s[file];
    rcopy *cp = atomic_load_explicit(&s->copy, memory_order_acquire); /* see publish() */
    if (!cp)
        return RF_RCACHE_REMOTE;
    uint64_t bad = 0;
    int r = rf_cache_sums_read(&cp->sums, cp->fd, dst, len, off, bounce, &bad);
    if (r == RF_CACHE_MISMATCH) {
        rcopy *was = cp;
        /* One reader drops it; the shard is idle again, so its next read queues a fill. */
        if (atomic_compare_exchange_strong_explicit(&s->copy, &was, NULL, memory_order_acq_rel,
                                                    memory_order_relaxed)) {
            pthread_mutex_lock(&rc->mu);
            retire_bad_locked(rc, s->key, cp, rc->files[file].path, bad);
            pthread_mutex_unlock(&rc->mu);
            atomic_store_explicit(&s->state, SH_IDLE, memory_order_relaxed);
        }
        return RF_RCACHE_REMOTE;
    }
    if (r && r != -ENODATA)
        snprintf(why, cap, "the shard cache's copy of %s at byte %llu: %s", rc->files[file].path,
                 (unsigned long long)(off + bad), strerror(-r));
    return r;
}

void rf_rcache_go(rf_rcache *rc)
{
    pthread_mutex_lock(&rc->mu);
    rc->go = 1;
    pthread_cond_signal(&rc->cv);
    pthread_mutex_unlock(&rc->mu);
}

/* Create's lookup of shard `file` (the dataset opened its shards in file order, so the cursor
 * only moves forward); NULL with *looked 0 when create made none. */
static rcopy *early_take(rf_rcache *rc, const void *file, int *looked)
{
    *looked = 0;
    for (uint64_t k = rc->early_at; k < rc->nearly; k++)
        if (rc->early[k].file == file) {
            rcopy *cp = rc->early[k].cp;
            rc->early[k].cp = NULL;
            rc->early_at = k + 1;
            *looked = 1;
            return cp;
        }
    return NULL;
}

/* The shard's key and validator, then its lookup (create's, when its reader made one). */
static int shard_init(rf_rcache *rc, uint32_t i, rf_err *err)
{
    rshard *s = &rc->s[i];
    const rf_remote_file *f = rc->files[i].remote;
    size_t cap = strlen(rc->files[i].path) + 1;
    atomic_init(&s->copy, NULL);
    atomic_init(&s->state, SH_IDLE);
    rc->ninit = i + 1; /* close walks only shards set up */
    if (!(s->key = malloc(cap)))
        return rf_seterr(err, RF_ENOMEM, "no memory");
    if (rf_cache_key_from_url(rc->files[i].path, s->key, cap) != 0)
        return rf_seterr(err, RF_EINVAL, "%s: no cache key for it", rc->files[i].path);
    /* The ETag names the object's version; without one the size alone decides (documented). */
    snprintf(s->validator, sizeof s->validator, "%s", f->etag);
    /* Create's lookup (a copy its reads found corrupt was dropped then: a miss) or now. */
    int looked;
    rcopy *cp = early_take(rc, f, &looked);
    if (cp)
        publish(rc, i, cp, 1);
    else if (looked || !lookup(rc, i, 1))
        bump(&rc->misses);
    return 0;
}

/* ---- the dataset's table: create reads a cached shard from its copy ---- */

static int cached_open(void *ctx, const char *url, void **file, uint64_t *size, char *shown,
                       size_t cap, rf_err *err)
{
    const rf_remote_ops *r = &((rf_rcache *)ctx)->r->ops;
    return r->open(r->ctx, url, file, size, shown, cap, err);
}

static int cached_fetch(void *ctx, const char *url, uint64_t max, char **text, uint64_t *len,
                        rf_err *err)
{
    const rf_remote_ops *r = &((rf_rcache *)ctx)->r->ops;
    return r->fetch(r->ctx, url, max, text, len, err);
}

static void cached_close(void *ctx, void *file)
{
    const rf_remote_ops *r = &((rf_rcache *)ctx)->r->ops;
    r->close(r->ctx, file);
}

static int cached_list(void *ctx, const char *pattern,
                       int (*fn)(void *arg, const char *url, rf_err *err), void *arg, rf_err *err)
{
    const rf_remote_ops *r = &((rf_rcache *)ctx)->r->ops;
    return r->list(r->ctx, pattern, fn, arg, err);
}

/* A reader of one shard at create: its copy (create's lookup, rf_rcache.early[k]) while it
 * holds, else the client's reader. */
typedef struct creader {
    rf_rcache *rc;
    uint64_t k;
    const rf_remote_file *file;
    int stream;
    char *key;
    uint8_t *bounce;
    rf_byte_reader inner;
    int inner_open;
    char why[RF_ERRMSG_MAX];
} creader;

static int creader_remote(creader *cr)
{
    const rf_remote_ops *r = &cr->rc->r->ops;
    rf_err e = {0};
    int rc = r->reader(r->ctx, (void *)cr->file, cr->stream, &cr->inner, &e);
    if (rc)
        snprintf(cr->why, sizeof cr->why, "%s", e.msg);
    cr->inner_open = rc == 0;
    return rc;
}

static int creader_read(void *ctx, uint8_t *buf, size_t want, uint64_t off, size_t *got)
{
    creader *cr = ctx;
    rf_rcache *rc = cr->rc;
    rcopy *cp = rc->early[cr->k].cp;
    *got = 0;
    if (cp) {
        if (off >= cp->sums.size)
            return 0;
        uint64_t len = RF_MIN((uint64_t)want, cp->sums.size - off), bad = 0;
        int r = rf_cache_sums_read(&cp->sums, cp->fd, buf, len, off, cr->bounce, &bad);
        if (r != RF_CACHE_MISMATCH) {
            *got = r ? 0 : (size_t)len;
            return r;
        }
        pthread_mutex_lock(&rc->mu);
        retire_bad_locked(rc, cr->key, cp, cr->file->shown, bad);
        pthread_mutex_unlock(&rc->mu);
        rc->early[cr->k].cp = NULL;
        int rc_ = creader_remote(cr);
        if (rc_)
            return rc_;
    }
    return cr->inner.read(cr->inner.ctx, buf, want, off, got);
}

static const char *creader_why(void *ctx)
{
    creader *cr = ctx;
    return cr->inner_open ? cr->inner.why(cr->inner.ctx) : cr->why;
}

static void cached_reader_close(rf_byte_reader *rd)
{
    creader *cr = rd->ctx;
    if (!cr)
        return;
    if (cr->inner_open)
        cr->rc->r->ops.reader_close(&cr->inner);
    free(cr->bounce);
    free(cr->key);
    free(cr);
    rd->ctx = NULL;
}

static int cached_reader(void *ctx, void *file, int stream, rf_byte_reader *rd, rf_err *err)
{
    rf_rcache *rc = ctx;
    const rf_remote_file *f = file;
    creader *cr = calloc(1, sizeof *cr);
    size_t cap = strlen(f->shown) + 1;
    if (!cr || !(cr->key = malloc(cap)) || !(cr->bounce = malloc(2 * RF_CACHE_SUM_BLOCK)) ||
        rf_grow(&rc->early, &rc->early_cap, rc->nearly + 1, sizeof *rc->early)) {
        if (cr)
            free(cr->key), free(cr->bounce);
        free(cr);
        return rf_seterr(err, RF_ENOMEM, "no memory");
    }
    *cr = (creader){.rc = rc, .k = rc->nearly, .file = f, .stream = stream, .key = cr->key,
                    .bounce = cr->bounce};
    rcopy *cp = rf_cache_key_from_url(f->shown, cr->key, cap) == 0
                    ? copy_get(rc, cr->key, f->size, f->etag) : NULL;
    rc->early[rc->nearly++] = (early){.file = f, .cp = cp};
    *rd = (rf_byte_reader){.read = creader_read, .why = creader_why, .ctx = cr};
    if (!cp && creader_remote(cr)) {
        rf_seterr(err, RF_EIO, "%s", cr->why);
        cached_reader_close(rd);
        return err->code;
    }
    return 0;
}

int rf_rcache_open(rf_remote *r, const char *dir, uint64_t budget, rf_rcache **out, rf_err *err)
{
    *out = NULL;
    rf_rcache *rc = calloc(1, sizeof *rc);
    if (!rc)
        return rf_seterr(err, RF_ENOMEM, "no memory");
    *rc = (rf_rcache){.r = r, .budget = budget};
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
        rf_rcache_close(rc);
        return rc_;
    }
    rc->ops = r->ops;
    rc->ops.ctx = rc;
    rc->ops.open = cached_open;
    rc->ops.fetch = cached_fetch;
    rc->ops.list = cached_list;
    rc->ops.close = cached_close;
    rc->ops.reader = cached_reader;
    rc->ops.reader_close = cached_reader_close;
    *out = rc;
    return 0;
}

const rf_remote_ops *rf_rcache_ops(rf_rcache *rc) { return &rc->ops; }

int rf_rcache_attach(rf_rcache *rc, const rf_file *files, uint32_t nfiles, rf_err *err)
{
    rc->files = files;
    rc->n = nfiles;
    int rc_ = 0;
    if (!(rc->s = calloc(nfiles, sizeof *rc->s)) || !(rc->q = calloc(nfiles, sizeof *rc->q)) ||
        !(rc->buf = malloc(RF_RCACHE_CHUNK)))
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
    return rc_;
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
    st->corrupt = atomic_load_explicit(&rc->corrupt, memory_order_relaxed);
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
        rcopy *cp = atomic_load_explicit(&rc->s[i].copy, memory_order_relaxed); /* joined */
        if (cp)
            copy_free(rc, cp);
        free(rc->s[i].key);
    }
    for (uint64_t k = 0; k < rc->nearly; k++)
        if (rc->early[k].cp)
            copy_free(rc, rc->early[k].cp);
    while (rc->retired) {
        rcopy *cp = rc->retired;
        rc->retired = cp->next;
        copy_free(rc, cp);
    }
    rf_cache_close(rc->c);
    free(rc->early);
    free(rc->s);
    free(rc->q);
    free(rc->buf);
    pthread_mutex_destroy(&rc->mu);
    pthread_cond_destroy(&rc->cv);
    free(rc);
}
