/* sync_index.c — the sync-point sidecar's format (sync_index.h): load and check, look up,
 * build and write.
 *
 * Layout (little-endian):
 *   header, RF_SYNC_HEADER bytes: magic[8], u32 version, u32 flags (0), u64 shard_bytes,
 *     u64 entries, u64 points, u64 body_hash (XXH64 of every byte after the header),
 *     u64 reserved (0), u64 header_hash (XXH64 of the 56 bytes before it);
 *   entries, RF_SYNC_ENTRY bytes each, sorted by offset, offsets distinct: u64 off, u64 len,
 *     u64 hash, u64 first (its first point), u32 npoints, u16 status, u8 ncomp, u8 0,
 *     u16 span, u16 cols, u16 rows, u16 0;
 *   points, RF_SYNC_POINT bytes each: u32 bit, i16 pred[3].
 * The file is exactly as long as that. */
#include "loaders/sync_index.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/common.h"
#include "base/hash.h"

static uint64_t get64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static uint32_t get32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static uint16_t get16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }

void rf_sync_point(const rf_sync_entry *e, uint32_t k, uint32_t *bit, int32_t pred[3])
{
    const uint8_t *p = e->points + (size_t)k * RF_SYNC_POINT;
    *bit = get32(p);
    for (int i = 0; i < 3; i++)
        pred[i] = (int16_t)get16(p + 4 + 2 * i);
}

void rf_sync_put_point(uint8_t *dst, uint32_t bit, const int32_t pred[3])
{
    put32(dst, bit);
    for (int i = 0; i < 3; i++)
        put16(dst + 4 + 2 * i, (uint16_t)(int16_t)pred[i]);
}

const char *rf_sync_status_name(uint32_t status)
{
    static const char *const names[RF_SYNC_STATUSES] = {"indexed", "needs none", "unsupported",
                                                        "unreadable"};
    return status < RF_SYNC_STATUSES ? names[status] : "unknown";
}

int rf_sync_path(const char *shard, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "%s%s", shard, RF_SYNC_EXT);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

/* ---- reading -------------------------------------------------------------------------------- */

static void entry_decode(const rf_sync_index *ix, const uint8_t *p, rf_sync_entry *e)
{
    uint64_t first = get64(p + 24);
    e->off = get64(p), e->len = get64(p + 8), e->hash = get64(p + 16);
    e->npoints = get32(p + 32);
    e->status = get16(p + 36);
    e->ncomp = p[38];
    e->span = get16(p + 40), e->cols = get16(p + 42), e->rows = get16(p + 44);
    e->points = ix->buf + RF_SYNC_HEADER + ix->entries * RF_SYNC_ENTRY + first * RF_SYNC_POINT;
}

static int bad(char *why, size_t cap, const char *what, uint64_t at)
{
    snprintf(why, cap, "%s at byte %llu", what, (unsigned long long)at);
    return -1;
}

/* The checks of one entry against the previous one and the points area. */
static int entry_check(const uint8_t *p, uint64_t prev_end, uint64_t points, uint64_t *next,
                       const char **what)
{
    uint64_t off = get64(p), len = get64(p + 8), first = get64(p + 24);
    uint32_t n = get32(p + 32), status = get16(p + 36), ncomp = p[38];
    uint32_t span = get16(p + 40), cols = get16(p + 42), rows = get16(p + 44);
    *what = off < prev_end                      ? "entries out of order or overlapping"
            : status >= RF_SYNC_STATUSES        ? "an unknown entry status"
            : first != *next                    ? "entries' points out of order"
            : n > points || first > points - n ? "points past the end"
            : status != RF_SYNC_POINTS && n    ? "points for an entry without any"
                                                : NULL;
    if (!*what && status == RF_SYNC_POINTS &&
        (ncomp < 1 || ncomp > 3 || !span || !cols || !rows || span > cols ||
         (uint64_t)rows * ((cols + span - 1) / span) != n || len > RF_SYNC_MAX_MEMBER))
        *what = "an entry whose points do not match its MCU grid";
    *next = first + n;
    (void)len;
    return *what ? -1 : 0;
}

/* The checks of a whole sidecar: 0, or -1 with why. */
static int sync_check(const uint8_t *buf, size_t len, char *why, size_t cap)
{
    if (len < RF_SYNC_HEADER || memcmp(buf, RF_SYNC_MAGIC, 8) != 0)
        return bad(why, cap, "not a sync-point index (no RFSYNC header)", 0);
    if (get32(buf + 8) != RF_SYNC_VERSION) {
        snprintf(why, cap, "sync-point index version %u at byte 8 (this build reads %u)",
                 get32(buf + 8), RF_SYNC_VERSION);
        return -1;
    }
    if (rf_xxh64(buf, 56) != get64(buf + 56))
        return bad(why, cap, "a damaged header (its hash does not match)", 56);
    uint64_t ne = get64(buf + 24), np = get64(buf + 32);
    if (ne > len / RF_SYNC_ENTRY || np > len / RF_SYNC_POINT ||
        RF_SYNC_HEADER + ne * RF_SYNC_ENTRY + np * RF_SYNC_POINT != len)
        return bad(why, cap, "a file whose length does not match its header", 24);
    if (rf_xxh64(buf + RF_SYNC_HEADER, len - RF_SYNC_HEADER) != get64(buf + 40))
        return bad(why, cap, "damaged entries or points (their hash does not match)", 40);
    uint64_t prev_end = 0, next = 0;
    for (uint64_t i = 0; i < ne; i++) {
        const uint8_t *p = buf + RF_SYNC_HEADER + i * RF_SYNC_ENTRY;
        const char *what;
        if (entry_check(p, prev_end, np, &next, &what))
            return bad(why, cap, what, RF_SYNC_HEADER + i * RF_SYNC_ENTRY);
        prev_end = get64(p) + RF_MAX(get64(p + 8), 1);
    }
    if (next != np)
        return bad(why, cap, "points no entry owns", RF_SYNC_HEADER + ne * RF_SYNC_ENTRY);
    return 0;
}

int rf_sync_load(uint8_t *buf, size_t len, rf_sync_index *out, char *why, size_t cap)
{
    *out = (rf_sync_index){0};
    if (sync_check(buf, len, why, cap)) {
        free(buf);
        return -1;
    }
    *out = (rf_sync_index){buf, len, get64(buf + 16), get64(buf + 24), get64(buf + 32), 0};
    return 0;
}

int rf_sync_load_file(const char *path, rf_sync_index *out, char *why, size_t cap)
{
    *out = (rf_sync_index){0};
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return 1;
        snprintf(why, cap, "cannot open: %s", strerror(errno));
        return -1;
    }
    struct stat st;
    void *m = MAP_FAILED;
    int rc = fstat(fd, &st);
    if (rc == 0 && !S_ISREG(st.st_mode))
        rc = -1, errno = EINVAL;
    if (rc == 0 && st.st_size > 0)
        m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (rc || st.st_size == 0 || m == MAP_FAILED) {
        if (rc || st.st_size == 0)
            return bad(why, cap, rc ? "not a regular file" : "an empty file", 0);
        snprintf(why, cap, "cannot map: %s", strerror(e));
        return -1;
    }
    if (sync_check(m, (size_t)st.st_size, why, cap)) {
        munmap(m, (size_t)st.st_size);
        return -1;
    }
    const uint8_t *b = m;
    *out = (rf_sync_index){m, (size_t)st.st_size, get64(b + 16), get64(b + 24), get64(b + 32), 1};
    return 0;
}

void rf_sync_free(rf_sync_index *ix)
{
    if (ix->mapped)
        munmap(ix->buf, ix->len);
    else
        free(ix->buf);
    *ix = (rf_sync_index){0};
}

void rf_sync_entry_at(const rf_sync_index *ix, uint64_t i, rf_sync_entry *out)
{
    entry_decode(ix, ix->buf + RF_SYNC_HEADER + i * RF_SYNC_ENTRY, out);
}

int rf_sync_find(const rf_sync_index *ix, uint64_t off, rf_sync_entry *out)
{
    uint64_t lo = 0, hi = ix->entries;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        uint64_t o = get64(ix->buf + RF_SYNC_HEADER + mid * RF_SYNC_ENTRY);
        if (o == off) {
            rf_sync_entry_at(ix, mid, out);
            return 1;
        }
        if (o < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

/* ---- building -------------------------------------------------------------------------------- */

int rf_sync_builder_add(rf_sync_builder *b, const rf_sync_entry *e)
{
    if (rf_grow(&b->ent, &b->ent_cap, b->nent + 1, RF_SYNC_ENTRY) ||
        rf_grow(&b->pts, &b->pts_cap, b->npts + e->npoints, RF_SYNC_POINT))
        return -1;
    uint8_t *p = b->ent + b->nent * RF_SYNC_ENTRY;
    memset(p, 0, RF_SYNC_ENTRY);
    put64(p, e->off), put64(p + 8, e->len), put64(p + 16, e->hash);
    put64(p + 24, b->npts); /* the builder's own point order until rf_sync_builder_bytes */
    put32(p + 32, e->npoints);
    put16(p + 36, (uint16_t)e->status);
    p[38] = (uint8_t)e->ncomp;
    put16(p + 40, (uint16_t)e->span), put16(p + 42, (uint16_t)e->cols);
    put16(p + 44, (uint16_t)e->rows);
    if (e->npoints)
        memcpy(b->pts + b->npts * RF_SYNC_POINT, e->points, (size_t)e->npoints * RF_SYNC_POINT);
    b->nent++, b->npts += e->npoints;
    return 0;
}

int rf_sync_builder_merge(rf_sync_builder *b, const rf_sync_index *ix,
                          int (*keep)(void *ctx, const rf_sync_entry *e), void *ctx)
{
    for (uint64_t i = 0; i < ix->entries; i++) {
        rf_sync_entry e;
        rf_sync_entry_at(ix, i, &e);
        if ((!keep || keep(ctx, &e)) && rf_sync_builder_add(b, &e))
            return -1;
    }
    return 0;
}

static int by_off(const void *a, const void *b)
{
    uint64_t x = get64(*(const uint8_t *const *)a), y = get64(*(const uint8_t *const *)b);
    if (x != y)
        return x < y ? -1 : 1;
    /* equal offsets: the later addition sorts last and wins */
    const uint8_t *pa = *(const uint8_t *const *)a, *pb = *(const uint8_t *const *)b;
    return pa < pb ? -1 : pa > pb;
}

int rf_sync_builder_bytes(rf_sync_builder *b, uint64_t shard_bytes, uint8_t **out, size_t *len)
{
    const uint8_t **order = malloc((size_t)RF_MAX(b->nent, 1) * sizeof *order);
    if (!order)
        return -1;
    for (uint64_t i = 0; i < b->nent; i++)
        order[i] = b->ent + i * RF_SYNC_ENTRY;
    qsort(order, (size_t)b->nent, sizeof *order, by_off);
    /* keep the last of each offset; then an entry overlapping the one before it (a member
     * that moved) replaces it too */
    uint64_t n = 0, np = 0;
    for (uint64_t i = 0; i < b->nent; i++) {
        if (i + 1 < b->nent && get64(order[i + 1]) == get64(order[i]))
            continue;
        while (n && get64(order[n - 1]) + RF_MAX(get64(order[n - 1] + 8), 1) > get64(order[i]))
            np -= get32(order[--n] + 32);
        order[n++] = order[i];
        np += get32(order[i] + 32);
    }
    size_t total = RF_SYNC_HEADER + (size_t)n * RF_SYNC_ENTRY + (size_t)np * RF_SYNC_POINT;
    uint8_t *f = calloc(1, total);
    if (!f) {
        free(order);
        return -1;
    }
    uint8_t *ent = f + RF_SYNC_HEADER, *pts = ent + n * RF_SYNC_ENTRY;
    uint64_t at = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint8_t *e = ent + i * RF_SYNC_ENTRY;
        uint32_t k = get32(order[i] + 32);
        memcpy(e, order[i], RF_SYNC_ENTRY);
        if (k) /* b->pts is NULL while no entry has points */
            memcpy(pts + at * RF_SYNC_POINT, b->pts + get64(order[i] + 24) * RF_SYNC_POINT,
                   (size_t)k * RF_SYNC_POINT);
        put64(e + 24, at);
        at += k;
    }
    free(order);
    memcpy(f, RF_SYNC_MAGIC, 8);
    put32(f + 8, RF_SYNC_VERSION);
    put64(f + 16, shard_bytes), put64(f + 24, n), put64(f + 32, np);
    put64(f + 40, rf_xxh64(f + RF_SYNC_HEADER, total - RF_SYNC_HEADER));
    put64(f + 56, rf_xxh64(f, 56));
    *out = f, *len = total;
    return 0;
}

int rf_sync_builder_write(rf_sync_builder *b, uint64_t shard_bytes, const char *path)
{
    uint8_t *f;
    size_t len;
    char tmp[RF_PATH_BYTES_MAX + 32];
    if (rf_sync_builder_bytes(b, shard_bytes, &f, &len))
        return -ENOMEM;
    int n = snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    int fd = n < 0 || (size_t)n >= sizeof tmp
                 ? (errno = ENAMETOOLONG, -1)
                 : open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int rc = fd < 0 ? -errno : 0;
    for (size_t done = 0; rc == 0 && done < len;) {
        ssize_t w = write(fd, f + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            rc = w < 0 ? -errno : -EIO;
        else
            done += (size_t)w;
    }
    if (fd >= 0 && close(fd) != 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && rename(tmp, path) != 0)
        rc = -errno;
    if (rc && fd >= 0)
        unlink(tmp);
    free(f);
    return rc;
}

void rf_sync_builder_free(rf_sync_builder *b)
{
    free(b->ent);
    free(b->pts);
    *b = (rf_sync_builder){0};
}
