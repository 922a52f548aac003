/* shard_cache.c — the local shard cache's calls (shard_cache.h): open, lookups that pin, fills
 * written in any order and published whole, stats. The directory's rules (names, sidecars, the
 * scan, eviction) are shard_cache_dir.c's.
 *
 * DESIGN
 *  - A lookup and a fill's start and publication take c->mu, then the directory's flock, so
 *    threads and processes see the directory change one whole step at a time. A fill's writes
 *    take neither: pwrite to the writer's own `.part`, then the writer's mutex for the range.
 *  - A writer keeps the written ranges sorted, disjoint and not touching, so the shard is
 *    complete exactly when [0, size) remains; out of order, one range per open gap at most.
 *  - Room is reserved at a fill's start with fallocate (ftruncate without it), so a `.part`
 *    counts against every process's budget from the start and a full disk fails the start, not
 *    the middle. ENOSPC, EDQUOT and EFBIG turn fills off for the run; lookups go on.
 */
#include "io/shard_cache_dir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

struct rf_cache_writer {
    rf_cache *c;
    uint64_t hash;
    int fd; /* H.part, exclusively flocked until published or removed */
    rf_cache_meta meta;
    pthread_mutex_t mu; /* ranges, nranges, cap, failed */
    uint64_t (*ranges)[2];
    uint64_t nranges, cap;
    int failed;
};

/* ---- arguments ---- */

static int check_text(const char *s, size_t max, int need, const char *what, rf_err *err)
{
    size_t n = s ? strlen(s) : 0;
    if (need && n == 0)
        return rf_seterr(err, RF_EINVAL, "shard cache: the %s is empty", what);
    if (n > max)
        return rf_seterr(err, RF_EINVAL, "shard cache: the %s is %zu bytes, over the limit of "
                         "%zu", what, n, max);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return rf_seterr(err, RF_EINVAL, "shard cache: the %s has a control character "
                             "(0x%02x) at byte %zu", what, (unsigned char)s[i], i);
    return 0;
}

static int check_args(const char *key, const char *validator, rf_err *err)
{
    int rc = check_text(key, RF_CACHE_KEY_MAX, 1, "key", err);
    return rc ? rc : check_text(validator, RF_CACHE_VALIDATOR_MAX, 0, "validator", err);
}

/* ---- open and close ---- */

static int open_dir(rf_cache *c, const char *dir, rf_err *err)
{
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return rf_seterr(err, -errno, "%s: cannot make the cache directory: %s", dir,
                         strerror(errno));
    c->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (c->dirfd < 0)
        return rf_seterr(err, -errno, "%s: cannot open the cache directory: %s", dir,
                         strerror(errno));
    c->lockfd = openat(c->dirfd, ".lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (c->lockfd < 0)
        return rf_seterr(err, -errno, "%s/.lock: cannot open the cache's lock: %s", dir,
                         strerror(errno));
    if (faccessat(c->dirfd, ".", W_OK | X_OK, AT_EACCESS) != 0)
        return rf_seterr(err, -errno, "%s: the cache directory is not writable: %s", dir,
                         strerror(errno));
    return 0;
}

int rf_cache_open(const char *dir, uint64_t budget_bytes, rf_cache **out, rf_err *err)
{
    *out = NULL;
    if (!dir || !dir[0] || budget_bytes == 0)
        return rf_seterr(err, RF_EINVAL, "shard cache: %s", budget_bytes ? "no directory"
                         : "a budget of 0 bytes (leave the cache off instead)");
    if (strlen(dir) >= RF_PATH_BYTES_MAX)
        return rf_seterr(err, RF_EINVAL, "shard cache: the directory's path is over %d bytes",
                         RF_PATH_BYTES_MAX - 1);
    rf_cache *c = calloc(1, sizeof *c);
    if (!c)
        return rf_seterr(err, RF_ENOMEM, "shard cache: out of memory");
    snprintf(c->dir, sizeof c->dir, "%s", dir);
    c->budget = budget_bytes;
    c->dirfd = c->lockfd = -1;
    pthread_mutex_init(&c->mu, NULL);
    int rc = open_dir(c, dir, err);
    if (rc == 0)
        rc = rf_cache_dir_lock(c, err);
    if (rc == 0) {
        rc = rf_cache_scan(c, 1, err);
        rf_cache_dir_unlock(c);
    }
    if (rc) {
        rf_cache_close(c);
        return rc;
    }
    *out = c;
    return 0;
}

void rf_cache_close(rf_cache *c)
{
    if (!c)
        return;
    if (c->lockfd >= 0)
        close(c->lockfd);
    if (c->dirfd >= 0)
        close(c->dirfd);
    pthread_mutex_destroy(&c->mu);
    free(c->ents);
    free(c);
}

/* ---- lookups ---- */

/* Open H.shard for a hit of `size` bytes: 0 with *fd pinned (a shared flock), or -1. */
static int open_hit(rf_cache *c, uint64_t hash, uint64_t size, int *fd)
{
    char name[RF_CACHE_NAME_MAX];
    rf_cache_name(name, hash, "shard");
    int f = openat(c->dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    struct stat sb;
    if (f < 0)
        return -1;
    if (fstat(f, &sb) != 0 || !S_ISREG(sb.st_mode) ||
        (uint64_t)sb.st_size != rf_cache_file_bytes(size) ||
        flock(f, LOCK_SH | LOCK_NB) != 0 || fcntl(f, F_SETFL, 0) != 0) {
        close(f);
        return -1;
    }
    /* The use time LRU goes by; a hit on another user's shard may not set it (EPERM), which
     * only makes that shard look older. */
    futimens(f, NULL);
    *fd = f;
    return 0;
}

/* The file's mtime in ns: the use time the scan reads back, on the same clock. */
static int64_t mtime_ns(int fd)
{
    struct stat sb;
    if (fstat(fd, &sb) != 0)
        return 0;
    return (int64_t)sb.st_mtim.tv_sec * 1000000000ll + sb.st_mtim.tv_nsec;
}

static int lookup_locked(rf_cache *c, const char *key, uint64_t size, const char *validator,
                         int *fd)
{
    uint64_t hash = rf_cache_hash(key);
    rf_cache_meta m;
    if (rf_cache_meta_read(c, hash, &m) != 0 || strcmp(m.key, key) != 0)
        return 0; /* absent, unreadable, or another key of the same hash */
    if (m.size != size || strcmp(m.validator, validator ? validator : "") != 0) {
        c->st.stale++;
        return 0;
    }
    if (open_hit(c, hash, size, fd) != 0)
        return 0;
    rf_cache_ents_put(c, hash, size, mtime_ns(*fd));
    return 1;
}

int rf_cache_get(rf_cache *c, const char *key, uint64_t size, const char *validator, int *fd,
                 rf_err *err)
{
    *fd = -1;
    int rc = check_args(key, validator, err);
    if (rc)
        return rc;
    pthread_mutex_lock(&c->mu);
    int hit = 0;
    if (rf_cache_dir_lock(c, err) == 0) {
        hit = lookup_locked(c, key, size, validator, fd);
        rf_cache_dir_unlock(c);
    }
    if (hit)
        c->st.hits++;
    else
        c->st.misses++;
    pthread_mutex_unlock(&c->mu);
    return hit;
}

void rf_cache_release(rf_cache *c, int fd)
{
    (void)c;
    if (fd >= 0)
        close(fd); /* drops the shared flock that pinned it */
}

void rf_cache_drop(rf_cache *c, const char *key, int fd)
{
    flock(fd, LOCK_UN); /* no longer pinned by us; reads in progress go on */
    uint64_t hash = rf_cache_hash(key);
    rf_cache_meta m;
    rf_err e = {0};
    pthread_mutex_lock(&c->mu);
    if (rf_cache_dir_lock(c, &e) == 0) {
        if (rf_cache_meta_read(c, hash, &m) == 0 && strcmp(m.key, key) == 0 &&
            rf_cache_remove(c, hash) == 0)
            c->st.cleaned++;
        rf_cache_dir_unlock(c);
    }
    pthread_mutex_unlock(&c->mu);
}

/* ---- starting a fill ---- */

/* Create H.part, exclusively flocked. One no writer holds is a crashed fill's: replaced.
 * 0, 1 when another writer is filling H, or -errno. */
static int claim_part(rf_cache *c, uint64_t hash, int *fd)
{
    char name[RF_CACHE_NAME_MAX];
    rf_cache_name(name, hash, "part");
    for (int attempt = 0; attempt < 2; attempt++) {
        int f = openat(c->dirfd, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (f >= 0) {
            if (flock(f, LOCK_EX | LOCK_NB) != 0) {
                int e = errno;
                unlinkat(c->dirfd, name, 0);
                close(f);
                return -e;
            }
            *fd = f;
            return 0;
        }
        if (errno != EEXIST)
            return -errno;
        if (rf_cache_in_use(c, name))
            return 1;
        if (unlinkat(c->dirfd, name, 0) == 0)
            c->st.cleaned++;
    }
    return 1;
}

/* Room for the shard in the file: fallocate, or ftruncate where it is not supported. */
static int reserve(int fd, uint64_t size)
{
    if (fallocate(fd, 0, 0, (off_t)size) == 0)
        return 0;
    if (errno != EOPNOTSUPP)
        return -errno;
    return ftruncate(fd, (off_t)size) == 0 ? 0 : -errno;
}

/* A failed step of a fill: turn fills off when the disk is full; returns RF_CACHE_SKIP. */
static int fill_trouble(rf_cache *c, int rc, rf_err *err)
{
    if (rc < 0 && rf_cache_full_errno(-rc))
        rf_cache_turn_off(c, err ? err->msg : strerror(-rc));
    return RF_CACHE_SKIP;
}

/* Make way for w's entry: an entry already there is the same shard published by another
 * writer since the caller's lookup (RF_CACHE_SKIP: look it up again), or a stale one of this
 * key or one of a hash twin's (removed unless in use). Both locks held. */
static int clear_old(rf_cache *c, const rf_cache_writer *w, rf_err *err)
{
    rf_cache_meta m;
    if (rf_cache_meta_read(c, w->hash, &m) == 0 && !strcmp(m.key, w->meta.key) &&
        m.size == w->meta.size && !strcmp(m.validator, w->meta.validator))
        return rf_seterr(err, RF_CACHE_SKIP, "%s: already cached by another writer",
                         w->meta.key);
    if (rf_cache_remove(c, w->hash) != 0)
        return rf_seterr(err, RF_CACHE_SKIP, "%s: the old entry of %016llx is in use", c->dir,
                         (unsigned long long)w->hash);
    return 0;
}

/* The steps of rf_cache_fill_begin under both locks: 0 with w->fd, or RF_CACHE_SKIP. */
static int begin_locked(rf_cache *c, rf_cache_writer *w, rf_err *err)
{
    char name[RF_CACHE_NAME_MAX];
    rf_cache_name(name, w->hash, "part");
    int rc = claim_part(c, w->hash, &w->fd);
    if (rc)
        return rc > 0 ? rf_seterr(err, RF_CACHE_SKIP, "%s/%s: another writer is filling it",
                                  c->dir, name)
                      : fill_trouble(c, rf_seterr(err, rc, "%s/%s: cannot create it: %s",
                                                  c->dir, name, strerror(-rc)), err);
    rc = clear_old(c, w, err);
    if (rc == 0)
        rc = rf_cache_scan(c, 0, err) ? RF_CACHE_SKIP : 0;
    if (rc == 0)
        rc = rf_cache_make_room(c, w->meta.size, err) ? RF_CACHE_SKIP : 0;
    if (rc == 0) {
        /* the shard and its checksums: a full disk shows now, not at the commit */
        uint64_t room = rf_cache_file_bytes(w->meta.size);
        int e = reserve(w->fd, room);
        if (e)
            rc = fill_trouble(c, rf_seterr(err, e, "%s/%s: reserving %llu bytes at byte 0 "
                                           "failed: %s", c->dir, name,
                                           (unsigned long long)room, strerror(-e)), err);
    }
    if (rc) {
        unlinkat(c->dirfd, name, 0);
        close(w->fd);
        w->fd = -1;
    }
    return rc;
}

static rf_cache_writer *writer_new(rf_cache *c, const char *key, uint64_t size,
                                   const char *validator)
{
    rf_cache_writer *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->c = c;
    w->hash = rf_cache_hash(key);
    w->fd = -1;
    snprintf(w->meta.key, sizeof w->meta.key, "%s", key);
    snprintf(w->meta.validator, sizeof w->meta.validator, "%s", validator ? validator : "");
    w->meta.size = size;
    pthread_mutex_init(&w->mu, NULL);
    return w;
}

static void writer_free(rf_cache_writer *w)
{
    if (w->fd >= 0)
        close(w->fd);
    pthread_mutex_destroy(&w->mu);
    free(w->ranges);
    free(w);
}

/* The reasons not to start, before any lock: counted, RF_CACHE_SKIP with err. */
static int refuse_early(rf_cache *c, const char *key, uint64_t size, rf_err *err)
{
    if (size > c->budget) {
        pthread_mutex_lock(&c->mu);
        c->st.bypasses++;
        pthread_mutex_unlock(&c->mu);
        return rf_seterr(err, RF_CACHE_SKIP, "%s: %llu bytes, larger than the cache's budget of "
                         "%llu: not cached", key, (unsigned long long)size,
                         (unsigned long long)c->budget);
    }
    int off = atomic_load_explicit(&c->off, memory_order_acquire); /* off_why written */
    if (size && !off)
        return 0;
    pthread_mutex_lock(&c->mu);
    c->st.skips++;
    pthread_mutex_unlock(&c->mu);
    return rf_seterr(err, RF_CACHE_SKIP, "%s: %s", key, size ? "fills are off (a full disk)"
                     : "an empty shard: nothing to cache");
}

int rf_cache_fill_begin(rf_cache *c, const char *key, uint64_t size, const char *validator,
                        rf_cache_writer **w, rf_err *err)
{
    *w = NULL;
    int rc = check_args(key, validator, err);
    if (rc || (rc = refuse_early(c, key, size, err)) != 0)
        return rc;
    rf_cache_writer *nw = writer_new(c, key, size, validator);
    if (!nw)
        return rf_seterr(err, RF_CACHE_SKIP, "shard cache: out of memory");
    pthread_mutex_lock(&c->mu);
    rc = rf_cache_dir_lock(c, err) ? RF_CACHE_SKIP : 0;
    if (rc == 0) {
        rc = begin_locked(c, nw, err);
        rf_cache_dir_unlock(c);
    }
    if (rc)
        c->st.skips++;
    pthread_mutex_unlock(&c->mu);
    if (rc) {
        writer_free(nw);
        return RF_CACHE_SKIP;
    }
    *w = nw;
    return 0;
}

/* ---- writing ---- */

/* Record [a, b) as written, merging with the ranges it overlaps or touches. w->mu held. */
static int cover(rf_cache_writer *w, uint64_t a, uint64_t b)
{
    uint64_t i = 0, j;
    while (i < w->nranges && w->ranges[i][1] < a)
        i++;
    for (j = i; j < w->nranges && w->ranges[j][0] <= b; j++) {
        a = RF_MIN(a, w->ranges[j][0]);
        b = RF_MAX(b, w->ranges[j][1]);
    }
    if (j == i) { /* no neighbour: a new range at i */
        if (w->nranges >= RF_CACHE_RANGES_MAX ||
            rf_grow(&w->ranges, &w->cap, w->nranges + 1, sizeof *w->ranges))
            return -1;
        memmove(w->ranges + i + 1, w->ranges + i, (w->nranges - i) * sizeof *w->ranges);
        w->nranges++;
    } else { /* ranges i..j-1 become one */
        memmove(w->ranges + i + 1, w->ranges + j, (w->nranges - j) * sizeof *w->ranges);
        w->nranges -= j - i - 1;
    }
    w->ranges[i][0] = a;
    w->ranges[i][1] = b;
    return 0;
}

static int pwrite_all(int fd, const uint8_t *p, uint64_t len, uint64_t off, uint64_t *done)
{
    for (*done = 0; *done < len;) {
        ssize_t n = pwrite(fd, p + *done, (size_t)RF_MIN(len - *done, 1u << 30),
                           (off_t)(off + *done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -errno : -EIO;
        *done += (uint64_t)n;
    }
    return 0;
}

static int write_failed(rf_cache_writer *w, int rc)
{
    pthread_mutex_lock(&w->mu);
    w->failed = 1;
    pthread_mutex_unlock(&w->mu);
    return rc;
}

int rf_cache_fill_write(rf_cache_writer *w, uint64_t off, const void *buf, uint64_t len,
                        rf_err *err)
{
    rf_cache *c = w->c;
    if (off > w->meta.size || len > w->meta.size - off)
        return write_failed(w, rf_seterr(err, RF_EINVAL, "cache fill of %s: %llu bytes at "
                                         "byte %llu pass the shard's end (%llu bytes)",
                                         w->meta.key, (unsigned long long)len,
                                         (unsigned long long)off,
                                         (unsigned long long)w->meta.size));
    uint64_t done = 0;
    int rc = pwrite_all(w->fd, buf, len, off, &done);
    atomic_fetch_add_explicit(&c->bytes_written, done, memory_order_relaxed); /* a counter */
    if (rc) {
        rf_seterr(err, rc, "%s/%016llx.part (cache fill of %s): write at byte %llu failed: %s",
                  c->dir, (unsigned long long)w->hash, w->meta.key,
                  (unsigned long long)(off + done), strerror(-rc));
        fill_trouble(c, rc, err);
        return write_failed(w, rc);
    }
    pthread_mutex_lock(&w->mu);
    rc = len ? cover(w, off, off + len) : 0;
    pthread_mutex_unlock(&w->mu);
    if (rc)
        return write_failed(w, rf_seterr(err, RF_ELIMIT, "cache fill of %s: over %d separate "
                                         "ranges written (at byte %llu)", w->meta.key,
                                         RF_CACHE_RANGES_MAX, (unsigned long long)off));
    return 0;
}

/* ---- finishing ---- */

void rf_cache_fill_abort(rf_cache_writer *w)
{
    if (!w)
        return;
    rf_cache *c = w->c;
    char name[RF_CACHE_NAME_MAX];
    rf_cache_name(name, w->hash, "part");
    /* Unlinked while our flock still holds it: once closed, a later writer's H.part may
     * already be there under the same name. */
    unlinkat(c->dirfd, name, 0);
    pthread_mutex_lock(&c->mu);
    c->st.aborts++;
    pthread_mutex_unlock(&c->mu);
    writer_free(w);
}

/* RF_CACHE_SKIP with err when w is not every byte of its shard. */
static int check_complete(rf_cache_writer *w, rf_err *err)
{
    pthread_mutex_lock(&w->mu);
    int failed = w->failed;
    uint64_t first_gap = w->nranges && w->ranges[0][0] == 0 ? w->ranges[0][1] : 0;
    pthread_mutex_unlock(&w->mu);
    if (failed)
        return rf_seterr(err, RF_CACHE_SKIP, "cache fill of %s: a write failed",
                         w->meta.key);
    if (first_gap < w->meta.size)
        return rf_seterr(err, RF_CACHE_SKIP, "cache fill of %s: byte %llu of %llu was never "
                         "written", w->meta.key, (unsigned long long)first_gap,
                         (unsigned long long)w->meta.size);
    return 0;
}

/* Rename H.part to H.shard and write the sidecar; both locks held. On failure nothing of the
 * fill is left under any name. */
static int publish_locked(rf_cache *c, rf_cache_writer *w, rf_err *err)
{
    char part[RF_CACHE_NAME_MAX], shard[RF_CACHE_NAME_MAX];
    rf_cache_name(part, w->hash, "part");
    rf_cache_name(shard, w->hash, "shard");
    if (renameat(c->dirfd, part, c->dirfd, shard) != 0) {
        int e = errno;
        unlinkat(c->dirfd, part, 0); /* while the writer's flock still holds it */
        return rf_seterr(err, -e, "%s/%s: rename to %s failed: %s", c->dir, part, shard,
                         strerror(e));
    }
    int rc = rf_cache_meta_write(c, w->hash, &w->meta, err);
    if (rc == 0 && fsync(c->dirfd) != 0)
        rc = rf_seterr(err, -errno, "%s: fsync of the directory failed: %s", c->dir,
                       strerror(errno));
    if (rc) { /* a shard without its sidecar is no entry: take it back (sidecar first) */
        rf_cache_name(part, w->hash, "meta");
        unlinkat(c->dirfd, part, 0);
        unlinkat(c->dirfd, shard, 0);
        return rc;
    }
    rf_cache_ents_put(c, w->hash, w->meta.size, mtime_ns(w->fd));
    c->st.bytes_in_use = c->used;
    c->st.entries = c->nents;
    return 0;
}

int rf_cache_fill_commit(rf_cache_writer *w, rf_err *err)
{
    rf_cache *c = w->c;
    int rc = check_complete(w, err);
    int sums = rc == 0 ? rf_cache_sums_append(w->fd, w->meta.size) : 0;
    if (sums)
        rc = fill_trouble(c, rf_seterr(err, sums, "%s/%016llx.part (cache fill of %s): writing "
                                       "its checksums failed: %s", c->dir,
                                       (unsigned long long)w->hash, w->meta.key,
                                       strerror(-sums)), err);
    if (rc == 0 && fsync(w->fd) != 0)
        rc = fill_trouble(c, rf_seterr(err, -errno, "%s/%016llx.part (cache fill of %s): fsync "
                                       "failed: %s", c->dir, (unsigned long long)w->hash,
                                       w->meta.key, strerror(errno)), err);
    if (rc) {
        rf_cache_fill_abort(w);
        return RF_CACHE_SKIP;
    }
    pthread_mutex_lock(&c->mu);
    rc = rf_cache_dir_lock(c, err);
    if (rc == 0) {
        rc = publish_locked(c, w, err);
        close(w->fd); /* drops the writer's flock, under the directory's lock */
        w->fd = -1;
        rf_cache_dir_unlock(c);
    }
    if (rc == 0)
        c->st.fills++;
    pthread_mutex_unlock(&c->mu);
    if (rc && w->fd >= 0) { /* the directory's lock was not had: the `.part` is still ours */
        rf_cache_fill_abort(w);
        return fill_trouble(c, rc, err);
    }
    if (rc) { /* publication failed and removed the fill's files */
        pthread_mutex_lock(&c->mu);
        c->st.aborts++;
        pthread_mutex_unlock(&c->mu);
    }
    writer_free(w);
    return rc ? fill_trouble(c, rc, err) : 0;
}

/* ---- stats and keys ---- */

void rf_cache_stats_get(rf_cache *c, rf_cache_stats *st)
{
    pthread_mutex_lock(&c->mu);
    *st = c->st;
    pthread_mutex_unlock(&c->mu);
    st->bytes_written = atomic_load_explicit(&c->bytes_written, memory_order_relaxed);
    st->off = atomic_load_explicit(&c->off, memory_order_relaxed) != 0; /* a flag */
}

const char *rf_cache_off_why(rf_cache *c)
{
    /* acquire: pairs with the release store after off_why was written */
    return atomic_load_explicit(&c->off, memory_order_acquire) == 2 ? c->off_why : NULL;
}

int rf_cache_key_from_url(const char *url, char *out, size_t out_len)
{
    const char *auth = strstr(url, "://");
    auth = auth ? auth + 3 : url;
    size_t host_end = strcspn(auth, "/?#");
    const char *at = NULL;
    for (const char *p = auth; p < auth + host_end; p++)
        if (*p == '@')
            at = p; /* the last '@' of the authority ends the user information */
    size_t head = (size_t)(auth - url);
    const char *rest = at ? at + 1 : auth;
    size_t tail = strcspn(rest, "?#");
    if (head + tail + 1 > out_len)
        return RF_ELIMIT;
    memcpy(out, url, head);
    memcpy(out + head, rest, tail);
    out[head + tail] = 0;
    return 0;
}
