/* shard_cache.h — the local shard cache: whole remote shards kept in a directory under a byte
 * budget, least recently used out first (docs/cache.md: policy, layout, several processes).
 *
 * A hit of rf_cache_get gives a read-only descriptor of the complete shard; a miss is followed
 * by rf_cache_fill_begin, whose writer takes the shard's bytes as they arrive (any order,
 * overlaps allowed) until commit (published only when complete) or abort. A shard is a key, a
 * size and a validator: nothing here knows HTTP.
 *
 * The cache never fails a read: its own troubles (a full disk, an I/O error, a lock held too
 * long, a shard over the budget) answer "not cached" and are counted. Negative codes only for
 * arguments no caller should pass, a failed fill write (abort it, go on reading) and
 * rf_cache_open.
 *
 * Processes sharing a directory lock it as shard_cache_dir.h says; a handle is not used across
 * fork(). Every call is thread-safe; a writer may be written from several threads and is
 * committed or aborted once, after every write returned. Includes base/ only. */
#ifndef RF_SHARD_CACHE_H
#define RF_SHARD_CACHE_H

#include <stdint.h>

#include "base/common.h"

/* A key (the URL without credentials, query or fragment) and a validator are stored in the
 * entry's sidecar, one line each. */
#define RF_CACHE_KEY_MAX 4095        /* bytes of a key */
#define RF_CACHE_VALIDATOR_MAX 1023  /* bytes of a validator */
#define RF_CACHE_ENTRIES_MAX 1000000 /* entries one directory may hold */
#define RF_CACHE_RANGES_MAX 65536    /* disjoint written ranges one fill may have at a time */
#define RF_CACHE_LOCK_WAIT_MS 10000  /* longest wait for the directory's lock */

/* rf_cache_fill_begin's answer when it gives no writer: read without caching. */
#define RF_CACHE_SKIP 1
/* rf_cache_sums_read's answer for bytes that do not match their checksum. */
#define RF_CACHE_MISMATCH 2
#define RF_CACHE_SUM_BLOCK (16u << 10) /* bytes one checksum covers (shard_cache_sum.c) */

typedef struct rf_cache rf_cache;
typedef struct rf_cache_writer rf_cache_writer;

/* Open (and create, one level) the cache directory `dir` with a budget of `budget_bytes` (> 0),
 * cleaning what crashed writers left (rf_cache_scan). Returns 0 with *out, RF_EINVAL, RF_ENOMEM,
 * RF_ELIMIT (over RF_CACHE_ENTRIES_MAX), or -errno when the directory cannot be made, listed or
 * locked (-EWOULDBLOCK: lock held past RF_CACHE_LOCK_WAIT_MS); err names the directory. */
int rf_cache_open(const char *dir, uint64_t budget_bytes, rf_cache **out, rf_err *err);
/* Close the cache (NULL: nothing), every descriptor released and every writer finished. */
void rf_cache_close(rf_cache *c);

/* Look the shard up. A hit (1) needs an entry for exactly this key, size and validator; *fd is
 * then an O_RDONLY descriptor of the shard's bytes followed by their checksums (read it with
 * rf_cache_sums_read), pinned against eviction until rf_cache_release; the entry's use time
 * becomes now. Anything else is a miss (0, *fd = -1), counted as stale when size or validator
 * differ. Negative only for a bad key or validator. `validator`: the server's identity of the
 * object's version (NULL or "": the size only). */
int rf_cache_get(rf_cache *c, const char *key, uint64_t size, const char *validator, int *fd,
                 rf_err *err);
/* Unpin and close a descriptor rf_cache_get gave. */
void rf_cache_release(rf_cache *c, int fd);
/* The copy fd reads failed its checksums: unpin fd (it stays open until rf_cache_release) and
 * remove the entry unless another process holds it, so a fill writes it afresh. */
void rf_cache_drop(rf_cache *c, const char *key, int fd);

/* Start filling the entry of (key, size, validator) after a miss. Returns 0 with *w, or
 * RF_CACHE_SKIP with *w = NULL and err saying why not now (over the budget: a bypass; empty;
 * another writer; room held by shards in use; the lock; too many entries; an I/O error; fills
 * off). Room is made by evicting unused least recently used shards and reserved with
 * fallocate, so a full disk shows here and turns fills off (rf_cache_off_why). A stale entry of
 * the same key or hash is replaced unless a reader holds it. */
int rf_cache_fill_begin(rf_cache *c, const char *key, uint64_t size, const char *validator,
                        rf_cache_writer **w, rf_err *err);
/* Write len bytes of the shard at off (off + len <= size), in any order, overlaps allowed.
 * Returns 0, or -errno / RF_ELIMIT / RF_EINVAL with err naming key and offset; the writer is
 * then failed and can only be aborted. */
int rf_cache_fill_write(rf_cache_writer *w, uint64_t off, const void *buf, uint64_t len,
                        rf_err *err);
/* Publish the shard when every byte of [0, size) was written (fsync, then rename into place with
 * its sidecar), else abort. Frees w. Returns 0, or RF_CACHE_SKIP with err saying why not. */
int rf_cache_fill_commit(rf_cache_writer *w, rf_err *err);
/* Drop the fill and its `.part`; frees w (NULL: nothing). */
void rf_cache_fill_abort(rf_cache_writer *w);

typedef struct rf_cache_stats {
    uint64_t hits;          /* rf_cache_get found the shard */
    uint64_t misses;        /* rf_cache_get did not (stale included) */
    uint64_t stale;         /* misses where the entry held another size or validator */
    uint64_t bypasses;      /* fills refused: the shard is larger than the budget */
    uint64_t skips;         /* fills refused for another reason (rf_cache_fill_begin) */
    uint64_t fills;         /* shards published */
    uint64_t aborts;        /* fills dropped (abort, incomplete or failed commit) */
    uint64_t evictions;     /* shards removed to make room (by this handle) */
    uint64_t cleaned;       /* stale, orphaned or corrupt files removed (by this handle) */
    uint64_t bytes_written; /* bytes written into fills */
    uint64_t bytes_in_use;  /* shard bytes in the directory at the last scan, this handle's
                               changes since included */
    uint64_t entries;       /* shards in the directory, counted the same way */
    uint32_t off;           /* 1 once a full disk turned fills off */
} rf_cache_stats;
void rf_cache_stats_get(rf_cache *c, rf_cache_stats *st);

/* NULL while fills are on; after a full disk, why they are off (file, offset, error). */
const char *rf_cache_off_why(rf_cache *c);

/* ---- checksums (shard_cache_sum.c) ----
 * Every RF_CACHE_SUM_BLOCK bytes of a cached shard have a 64-bit checksum, written after the
 * shard by the commit, so a byte changed on disk since is never served. */
typedef struct rf_cache_sums {
    uint64_t *sum;  /* one per block */
    uint64_t n;     /* blocks */
    uint64_t size;  /* the shard's bytes */
} rf_cache_sums;

/* Bytes of a cached shard's file: its `size` bytes, their checksums and a trailer. */
uint64_t rf_cache_file_bytes(uint64_t size);
/* The shard bytes of a file of `file_bytes` (rf_cache_file_bytes' inverse), or UINT64_MAX
 * when no shard size gives that length. */
uint64_t rf_cache_shard_bytes(uint64_t file_bytes);
/* Checksum fd's first `size` bytes and write the table and trailer after them: 0 or -errno. */
int rf_cache_sums_append(int fd, uint64_t size);
/* Read the checksums of a copy of `size` bytes (from rf_cache_get): 0, or -1 when its table
 * or trailer is missing or not this format's. Free with rf_cache_sums_free. */
int rf_cache_sums_load(int fd, uint64_t size, rf_cache_sums *out);
void rf_cache_sums_free(rf_cache_sums *s);
/* Read len bytes at off of the copy fd into dst, checking every block they touch; bounce: 2 x
 * RF_CACHE_SUM_BLOCK bytes for blocks only partly wanted. Returns 0; RF_CACHE_MISMATCH with
 * *bad_off the first bad block (dst then garbage); -ENODATA past the end; -errno. Thread-safe. */
int rf_cache_sums_read(const rf_cache_sums *s, int fd, uint8_t *dst, uint64_t len, uint64_t off,
                       uint8_t *bounce, uint64_t *bad_off);

/* The cache key of a URL: without user information, query and fragment, so credentials and
 * request signatures never reach the directory. RF_ELIMIT when it does not fit out_len. */
int rf_cache_key_from_url(const char *url, char *out, size_t out_len);

#endif
