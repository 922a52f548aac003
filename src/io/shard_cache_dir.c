/* shard_cache_dir.c — the shard cache's directory: entry names, the lock, sidecars, the scan
 * that cleans up after crashed writers, and LRU eviction (layout: shard_cache_dir.h).
 *
 * DESIGN
 *  - Names derive from a 64-bit hash of the key; two keys sharing a hash share one slot (the
 *    sidecar holds the key, a lookup compares it): that costs hits, never correctness.
 *  - The sidecar is the commit point: a fill renames H.part to H.shard, then H.mtmp to H.meta;
 *    removal unlinks H.meta first. A crash in between leaves a shard without a sidecar (the next
 *    scan removes it), never a sidecar beside the wrong bytes.
 *  - flock locks belong to open file descriptions, so one process's other descriptors conflict
 *    with a reader's or writer's lock as another process's would; a probe takes LOCK_EX|LOCK_NB
 *    on a new descriptor. A dead writer's lock goes with it.
 *  - The scan at open reads every sidecar; the one before each fill only lists and stats (its
 *    cost: docs/cache.md), as other processes change the directory and the budget is shared.
 */
#include "io/shard_cache_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define RF_CACHE_META_MAX 8192 /* bytes of a sidecar: two limited lines and a header */
static const char META_HEAD[] = "ringfeed-cache 1\n";

void rf_cache_name(char *out, uint64_t hash, const char *ext)
{
    snprintf(out, RF_CACHE_NAME_MAX, "%016llx.%s", (unsigned long long)hash, ext);
}

uint64_t rf_cache_hash(const char *key)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    return rf_mix64(h);
}

int rf_cache_full_errno(int e)
{
    return e == ENOSPC || e == EDQUOT || e == EFBIG;
}

void rf_cache_turn_off(rf_cache *c, const char *msg)
{
    int on = 0;
    /* acq_rel: the winner writes off_why and publishes it with the release store below */
    if (!atomic_compare_exchange_strong_explicit(&c->off, &on, 1, memory_order_acq_rel,
                                                 memory_order_acquire))
        return;
    snprintf(c->off_why, sizeof c->off_why, "shard cache off for this run: %s", msg);
    atomic_store_explicit(&c->off, 2, memory_order_release); /* off_why is complete */
}

/* ---- the directory's lock ---- */

int rf_cache_dir_lock(rf_cache *c, rf_err *err)
{
    uint64_t waited_us = 0, step_us = 200;
    for (;;) {
        if (flock(c->lockfd, LOCK_EX | LOCK_NB) == 0)
            return 0;
        if (errno != EWOULDBLOCK && errno != EINTR)
            return rf_seterr(err, -errno, "%s/.lock: flock failed: %s", c->dir,
                             strerror(errno));
        if (waited_us >= (uint64_t)RF_CACHE_LOCK_WAIT_MS * 1000)
            return rf_seterr(err, -EWOULDBLOCK, "%s/.lock: held by another process for over "
                             "%d ms", c->dir, RF_CACHE_LOCK_WAIT_MS);
        usleep((useconds_t)step_us);
        waited_us += step_us;
        step_us = RF_MIN(step_us * 2, 50000);
    }
}

void rf_cache_dir_unlock(rf_cache *c)
{
    flock(c->lockfd, LOCK_UN);
}

/* ---- sidecars ---- */

/* The value of line "name value\n" at *p, copied to out (cap bytes); advances *p. */
static int meta_field(const char **p, const char *name, char *out, size_t cap)
{
    size_t n = strlen(name);
    if (strncmp(*p, name, n) != 0 || (*p)[n] != ' ')
        return -1;
    const char *v = *p + n + 1, *nl = strchr(v, '\n');
    if (!nl || (size_t)(nl - v) >= cap)
        return -1;
    memcpy(out, v, (size_t)(nl - v));
    out[nl - v] = 0;
    *p = nl + 1;
    return 0;
}

static int meta_parse(const char *text, rf_cache_meta *m)
{
    char size[24], *end;
    const char *p = text;
    if (strncmp(p, META_HEAD, sizeof META_HEAD - 1) != 0)
        return -1;
    p += sizeof META_HEAD - 1;
    if (meta_field(&p, "key", m->key, sizeof m->key) || !m->key[0] ||
        meta_field(&p, "size", size, sizeof size) ||
        meta_field(&p, "validator", m->validator, sizeof m->validator) || *p)
        return -1;
    errno = 0;
    m->size = strtoull(size, &end, 10);
    return (errno || *end || end == size || size[0] == '-') ? -1 : 0;
}

int rf_cache_meta_read(rf_cache *c, uint64_t hash, rf_cache_meta *m)
{
    char name[RF_CACHE_NAME_MAX], text[RF_CACHE_META_MAX + 1];
    rf_cache_name(name, hash, "meta");
    int fd = openat(c->dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return -1;
    struct stat sb;
    size_t got = 0;
    int ok = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size <= RF_CACHE_META_MAX &&
             rf_pread_full(fd, text, (size_t)sb.st_size, 0, &got) == 0 &&
             got == (size_t)sb.st_size;
    close(fd);
    if (!ok || memchr(text, 0, got))
        return -1;
    text[got] = 0;
    return meta_parse(text, m);
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? -errno : -EIO;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int rf_cache_meta_write(rf_cache *c, uint64_t hash, const rf_cache_meta *m, rf_err *err)
{
    char tmp[RF_CACHE_NAME_MAX], name[RF_CACHE_NAME_MAX], text[RF_CACHE_META_MAX];
    rf_cache_name(tmp, hash, "mtmp");
    rf_cache_name(name, hash, "meta");
    int n = snprintf(text, sizeof text, "%skey %s\nsize %llu\nvalidator %s\n", META_HEAD, m->key,
                     (unsigned long long)m->size, m->validator);
    int fd = openat(c->dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    int rc = fd < 0 ? -errno : write_all(fd, text, (size_t)n);
    if (rc == 0 && fsync(fd) != 0)
        rc = -errno;
    if (fd >= 0)
        close(fd);
    if (rc == 0 && renameat(c->dirfd, tmp, c->dirfd, name) != 0)
        rc = -errno;
    if (rc) {
        unlinkat(c->dirfd, tmp, 0);
        return rf_seterr(err, rc, "%s/%s: writing the sidecar failed: %s", c->dir, tmp,
                         strerror(-rc));
    }
    return 0;
}

/* ---- entries ---- */

int rf_cache_in_use(rf_cache *c, const char *name)
{
    int fd = openat(c->dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return 0;
    int busy = flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    close(fd); /* drops the probe's lock */
    return busy;
}

int rf_cache_remove(rf_cache *c, uint64_t hash)
{
    char name[RF_CACHE_NAME_MAX];
    rf_cache_name(name, hash, "shard");
    if (rf_cache_in_use(c, name))
        return 1;
    rf_cache_name(name, hash, "meta");
    unlinkat(c->dirfd, name, 0);
    rf_cache_name(name, hash, "shard");
    unlinkat(c->dirfd, name, 0);
    rf_cache_ents_drop(c, hash);
    return 0;
}

/* Add an entry known not to be in c->ents (the scan's, whose names are unique). */
static int ents_append(rf_cache *c, uint64_t hash, uint64_t size, int64_t used_ns)
{
    if (c->nents >= RF_CACHE_ENTRIES_MAX || rf_grow(&c->ents, &c->cap, c->nents + 1,
                                                    sizeof *c->ents))
        return -1;
    c->ents[c->nents++] = (rf_cache_ent){hash, size, used_ns};
    c->used += size;
    return 0;
}

int rf_cache_ents_put(rf_cache *c, uint64_t hash, uint64_t size, int64_t used_ns)
{
    for (uint64_t i = 0; i < c->nents; i++) {
        if (c->ents[i].hash == hash) {
            c->used = c->used - c->ents[i].size + size;
            c->ents[i].size = size;
            c->ents[i].used_ns = used_ns;
            return 0;
        }
    }
    return ents_append(c, hash, size, used_ns);
}

void rf_cache_ents_drop(rf_cache *c, uint64_t hash)
{
    for (uint64_t i = 0; i < c->nents; i++) {
        if (c->ents[i].hash == hash) {
            c->used -= c->ents[i].size;
            c->ents[i] = c->ents[--c->nents];
            return;
        }
    }
}

/* ---- the scan ---- */

/* What the listing found: shards (hash, size, mtime) and sidecar hashes. */
typedef struct scan_list {
    rf_cache_ent *shards;
    uint64_t nshards, cap_shards;
    uint64_t *metas;
    uint64_t nmetas, cap_metas;
} scan_list;

/* "H.ext" with 16 lowercase hex digits: its hash and extension, or -1 for any other name. */
static int parse_name(const char *name, uint64_t *hash, const char **ext)
{
    for (int i = 0; i < 16; i++)
        if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f')))
            return -1;
    if (name[16] != '.')
        return -1;
    *hash = strtoull(name, NULL, 16);
    *ext = name + 17;
    return 0;
}

/* A `.part` no writer holds is a crashed fill's: removed. One a writer holds counts its
 * fallocated size, the room that fill reserved. */
static void scan_part(rf_cache *c, const char *name, const struct stat *sb)
{
    if (rf_cache_in_use(c, name)) {
        c->other += (uint64_t)sb->st_size;
        return;
    }
    if (unlinkat(c->dirfd, name, 0) == 0)
        c->st.cleaned++;
}

static int scan_file(rf_cache *c, scan_list *l, const char *name)
{
    uint64_t hash;
    const char *ext;
    struct stat sb;
    if (parse_name(name, &hash, &ext) || fstatat(c->dirfd, name, &sb, AT_SYMLINK_NOFOLLOW) ||
        !S_ISREG(sb.st_mode))
        return 0; /* not ours: left alone, never counted or served */
    if (!strcmp(ext, "part")) {
        scan_part(c, name, &sb);
    } else if (!strcmp(ext, "mtmp")) {
        if (unlinkat(c->dirfd, name, 0) == 0) /* only written under the lock we hold */
            c->st.cleaned++;
    } else if (!strcmp(ext, "meta")) {
        if (rf_grow(&l->metas, &l->cap_metas, l->nmetas + 1, sizeof *l->metas))
            return -1;
        l->metas[l->nmetas++] = hash;
    } else if (!strcmp(ext, "shard")) {
        if (rf_grow(&l->shards, &l->cap_shards, l->nshards + 1, sizeof *l->shards))
            return -1;
        int64_t t = (int64_t)sb.st_mtim.tv_sec * 1000000000ll + sb.st_mtim.tv_nsec;
        /* the shard's bytes (UINT64_MAX: a file of no shard's length, which no sidecar names) */
        l->shards[l->nshards++] =
            (rf_cache_ent){hash, rf_cache_shard_bytes((uint64_t)sb.st_size), t};
    }
    return 0;
}

static int cmp_ent_hash(const void *a, const void *b)
{
    uint64_t x = ((const rf_cache_ent *)a)->hash, y = ((const rf_cache_ent *)b)->hash;
    return x < y ? -1 : x > y;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* A listed shard with its sidecar (and, when full, a sidecar that parses and names the
 * shard's size). */
static int entry_valid(rf_cache *c, const rf_cache_ent *e, const scan_list *l, int full)
{
    if (!l->nmetas || !bsearch(&e->hash, l->metas, l->nmetas, sizeof *l->metas, cmp_u64))
        return 0;
    rf_cache_meta m;
    return !full || (rf_cache_meta_read(c, e->hash, &m) == 0 && m.size == e->size);
}

/* Pair the listed shards with their sidecars into c->ents; remove the unpaired and invalid. */
static int scan_pair(rf_cache *c, scan_list *l, int full)
{
    char name[RF_CACHE_NAME_MAX];
    if (l->nshards) /* qsort and bsearch take no NULL array, even empty */
        qsort(l->shards, l->nshards, sizeof *l->shards, cmp_ent_hash);
    if (l->nmetas)
        qsort(l->metas, l->nmetas, sizeof *l->metas, cmp_u64);
    for (uint64_t i = 0; i < l->nshards; i++) {
        const rf_cache_ent *e = &l->shards[i];
        if (entry_valid(c, e, l, full)) {
            if (ents_append(c, e->hash, e->size, e->used_ns))
                return -1;
        } else if (rf_cache_remove(c, e->hash) == 0) {
            c->st.cleaned++;
        } else {
            c->other += e->size; /* open by a reader: removed by a later scan */
        }
    }
    for (uint64_t i = 0; i < l->nmetas; i++) {
        rf_cache_ent key = {.hash = l->metas[i]};
        if (!l->nshards ||
            !bsearch(&key, l->shards, l->nshards, sizeof *l->shards, cmp_ent_hash)) {
            rf_cache_name(name, l->metas[i], "meta");
            if (unlinkat(c->dirfd, name, 0) == 0)
                c->st.cleaned++;
        }
    }
    return 0;
}

int rf_cache_scan(rf_cache *c, int full, rf_err *err)
{
    int dfd = openat(c->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
    if (!d) {
        int e = errno;
        if (dfd >= 0)
            close(dfd);
        return rf_seterr(err, -e, "%s: cannot list the cache directory: %s", c->dir,
                         strerror(e));
    }
    scan_list l = {0};
    c->nents = c->used = c->other = 0;
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        rc = scan_file(c, &l, de->d_name);
        if (l.nshards > RF_CACHE_ENTRIES_MAX || l.nmetas > RF_CACHE_ENTRIES_MAX)
            rc = -1;
    }
    closedir(d);
    if (rc == 0)
        rc = scan_pair(c, &l, full);
    free(l.shards);
    free(l.metas);
    if (rc)
        return rf_seterr(err, RF_ELIMIT, "%s: more than %d entries or no memory for them",
                         c->dir, RF_CACHE_ENTRIES_MAX);
    c->st.bytes_in_use = c->used;
    c->st.entries = c->nents;
    return 0;
}

/* ---- eviction ---- */

static int cmp_ent_used(const void *a, const void *b)
{
    int64_t x = ((const rf_cache_ent *)a)->used_ns, y = ((const rf_cache_ent *)b)->used_ns;
    return x < y ? -1 : x > y;
}

int rf_cache_make_room(rf_cache *c, uint64_t need, rf_err *err)
{
    if (c->nents)
        qsort(c->ents, c->nents, sizeof *c->ents, cmp_ent_used);
    /* Oldest first; an entry in use is passed over, so the walk goes by position while
     * removals swap the last entry into the removed one's place. */
    uint64_t i = 0, kept = 0;
    while (c->used + c->other + need > c->budget && i < c->nents) {
        uint64_t h = c->ents[i].hash;
        if (rf_cache_remove(c, h) == 0) {
            c->st.evictions++;
            qsort(c->ents + i, c->nents - i, sizeof *c->ents, cmp_ent_used);
        } else {
            kept += c->ents[i].size;
            i++;
        }
    }
    c->st.bytes_in_use = c->used;
    c->st.entries = c->nents;
    if (c->used + c->other + need <= c->budget)
        return 0;
    rf_seterr(err, RF_CACHE_SKIP, "%s: no room for %llu bytes: %llu of the budget's %llu bytes "
              "are shards in use and %llu are fills in progress or files in use", c->dir,
              (unsigned long long)need, (unsigned long long)kept, (unsigned long long)c->budget,
              (unsigned long long)c->other);
    return 1;
}
