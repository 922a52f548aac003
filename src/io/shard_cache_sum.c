/* shard_cache_sum.c — the checksums that make a cached shard's bytes trustworthy: XXH64 of every
 * RF_CACHE_SUM_BLOCK bytes, written after the shard's bytes at commit and checked on every
 * read of the copy.
 *
 * DESIGN
 *  - Layout of H.shard: `size` bytes, one little-endian uint64 per block (the last may be short),
 *    a 16-byte trailer (RF_CACHE_SUM_MAGIC, block size). Any other length or trailer is a miss,
 *    so an older directory is refilled rather than trusted.
 *  - A read checks the blocks it covers: partly wanted first and last blocks through a two-block
 *    bounce buffer, the others in place. The hash is base/hash.h's.
 *  - The table is read into memory once per opened copy (8 bytes per 16 KiB).
 * Includes base/ and shard_cache.h only. */
#include "io/shard_cache.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/hash.h"

#define RF_CACHE_SUM_MAGIC "RFSUMv1"  /* 8 bytes with its NUL */
#define SUM_TRAILER 16u

/* ---- the table ---- */

static uint64_t nblocks(uint64_t size) { return (size + RF_CACHE_SUM_BLOCK - 1) / RF_CACHE_SUM_BLOCK; }

uint64_t rf_cache_file_bytes(uint64_t size) { return size + 8 * nblocks(size) + SUM_TRAILER; }

uint64_t rf_cache_shard_bytes(uint64_t file_bytes)
{
    if (file_bytes < SUM_TRAILER)
        return UINT64_MAX;
    uint64_t s = file_bytes - SUM_TRAILER, n = (s + RF_CACHE_SUM_BLOCK + 7) / (RF_CACHE_SUM_BLOCK + 8);
    for (uint64_t k = n + 1; k + 2 > n && k <= n + 1; k--) /* n + 1, n, n - 1 */
        if (8 * k <= s && rf_cache_file_bytes(s - 8 * k) == file_bytes)
            return s - 8 * k;
    return UINT64_MAX;
}

static int pread_all(int fd, uint8_t *p, uint64_t len, uint64_t off)
{
    while (len) {
        ssize_t n = pread(fd, p, (size_t)RF_MIN(len, (uint64_t)1 << 30), (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return -ENODATA;
        p += n, len -= (uint64_t)n, off += (uint64_t)n;
    }
    return 0;
}

static int pwrite_all(int fd, const uint8_t *p, uint64_t len, uint64_t off)
{
    while (len) {
        ssize_t n = pwrite(fd, p, (size_t)RF_MIN(len, (uint64_t)1 << 30), (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -errno : -EIO;
        p += n, len -= (uint64_t)n, off += (uint64_t)n;
    }
    return 0;
}

int rf_cache_sums_append(int fd, uint64_t size)
{
    uint64_t n = nblocks(size);
    uint8_t *buf = malloc(RF_CACHE_SUM_BLOCK);
    uint64_t *sums = malloc((size_t)RF_MAX(n, 1) * 8);
    int rc = buf && sums ? 0 : -ENOMEM;
    for (uint64_t b = 0; rc == 0 && b < n; b++) {
        uint64_t off = b * RF_CACHE_SUM_BLOCK, len = RF_MIN((uint64_t)RF_CACHE_SUM_BLOCK, size - off);
        rc = pread_all(fd, buf, len, off);
        sums[b] = rc ? 0 : rf_xxh64(buf, (size_t)len);
    }
    uint8_t trailer[SUM_TRAILER] = RF_CACHE_SUM_MAGIC;
    uint32_t block = RF_CACHE_SUM_BLOCK;
    memcpy(trailer + 8, &block, 4);
    if (rc == 0)
        rc = pwrite_all(fd, (const uint8_t *)sums, 8 * n, size);
    if (rc == 0)
        rc = pwrite_all(fd, trailer, SUM_TRAILER, size + 8 * n);
    free(buf);
    free(sums);
    return rc;
}

int rf_cache_sums_load(int fd, uint64_t size, rf_cache_sums *out)
{
    uint64_t n = nblocks(size);
    uint8_t trailer[SUM_TRAILER];
    uint32_t block;
    *out = (rf_cache_sums){0};
    if (pread_all(fd, trailer, SUM_TRAILER, size + 8 * n) != 0 ||
        memcmp(trailer, RF_CACHE_SUM_MAGIC, 8) != 0 ||
        (memcpy(&block, trailer + 8, 4), block != RF_CACHE_SUM_BLOCK))
        return -1;
    if (!(out->sum = malloc((size_t)RF_MAX(n, 1) * 8)))
        return -1;
    if (pread_all(fd, (uint8_t *)out->sum, 8 * n, size) != 0) {
        rf_cache_sums_free(out);
        return -1;
    }
    out->n = n;
    out->size = size;
    return 0;
}

void rf_cache_sums_free(rf_cache_sums *s)
{
    free(s->sum);
    *s = (rf_cache_sums){0};
}

/* ---- checked reads ---- */

/* Block b (whole, len bytes) at p: 0 when it matches its sum. */
static int block_ok(const rf_cache_sums *s, uint64_t b, const uint8_t *p, uint64_t len)
{
    return rf_xxh64(p, (size_t)len) == s->sum[b] ? 0 : RF_CACHE_MISMATCH;
}

int rf_cache_sums_read(const rf_cache_sums *s, int fd, uint8_t *dst, uint64_t len, uint64_t off,
                       uint8_t *bounce, uint64_t *bad_off)
{
    if (off > s->size || len > s->size - off)
        return -ENODATA;
    const uint64_t B = RF_CACHE_SUM_BLOCK;
    uint64_t end = off + len;
    for (uint64_t b = off / B; b * B < end; b++) {
        uint64_t bs = b * B, be = RF_MIN(bs + B, s->size), blen = be - bs;
        int rc;
        if (bs >= off && be <= end) { /* wholly wanted: read in place */
            rc = pread_all(fd, dst + (bs - off), blen, bs);
            if (rc == 0)
                rc = block_ok(s, b, dst + (bs - off), blen);
        } else { /* partly wanted: through the bounce buffer */
            rc = pread_all(fd, bounce, blen, bs);
            if (rc == 0 && (rc = block_ok(s, b, bounce, blen)) == 0) {
                uint64_t from = RF_MAX(bs, off), to = RF_MIN(be, end);
                memcpy(dst + (from - off), bounce + (from - bs), (size_t)(to - from));
            }
        }
        if (rc) {
            *bad_off = bs;
            return rc;
        }
    }
    return 0;
}
