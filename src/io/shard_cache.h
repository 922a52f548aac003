/* shard_cache.h — the local shard cache: whole remote shards kept in a directory under a byte
 * budget, least recently used out first, so that later epochs read them from local disk.
 * docs/cache.md is the user's description (policy, layout on disk, several processes, limits).
 *
 * The caller (io/remote_cache.c, for a loader's remote shards) asks rf_cache_get first. A hit
 * gives a read-only descriptor of the complete shard; a miss is followed by rf_cache_fill_begin,
 * which reserves room and gives a writer: the caller writes the shard's bytes through
 * rf_cache_fill_write as they arrive (any order, overlaps allowed), then calls
 * rf_cache_fill_commit (which publishes the shard only when every byte was written) or
 * rf_cache_fill_abort. Nothing here knows HTTP: a shard is a key, a size and a validator.
 *
 * The cache never fails a read: every trouble of its own (a full disk, an I/O error, a lock
 * held too long, a shard larger than the budget) makes a call answer "not cached" and is
 * counted. Negative codes come back for arguments no caller should pass (a key that is empty,
 * too long or holds control characters, a write past the shard's end), from
 * rf_cache_fill_write when a write fails (the fill is dead: abort it, go on reading) and from
 * rf_cache_open.
 *
 * Several processes (torchrun ranks) may open the same directory: every change to it is made
 * under an exclusive flock of DIR/.lock, a fill in progress holds an exclusive flock of its
 * `.part` file and a reader holds a shared flock of the shard it reads, which eviction tests.
 * A handle must not be used across fork(): each process opens its own.
 *
 * Threads: every call is thread-safe; one writer may be written from several threads, and is
 * committed or aborted once, after every write to it returned.
 * What this file may include: base/ only. */
#ifndef RF_SHARD_CACHE_H
#define RF_SHARD_CACHE_H

#include <stdint.h>

#include "base/common.h"

/* Limits. A key (the URL without credentials, query or fragment) and a validator are stored
 * in the entry's sidecar, one line each. */
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

/* Open (and create, one level, when missing) the cache directory `dir` with a budget of
 * `budget_bytes` (> 0) of shard bytes. The directory is scanned: entries are checked against
 * their sidecars, and a `.part` no live writer holds, a shard without a valid sidecar or of
 * another size than its sidecar says, and a sidecar without its shard are removed; files of
 * other names are left alone and never served. Returns 0 with *out, RF_EINVAL (no directory,
 * budget 0), RF_ENOMEM, RF_ELIMIT (over RF_CACHE_ENTRIES_MAX entries), or -errno when the
 * directory cannot be made, opened, listed or locked (-EWOULDBLOCK: its lock held past
 * RF_CACHE_LOCK_WAIT_MS); err names the directory. */
int rf_cache_open(const char *dir, uint64_t budget_bytes, rf_cache **out, rf_err *err);
/* Close the cache (NULL: nothing). Every descriptor from rf_cache_get must have been released
 * and every writer committed or aborted. */
void rf_cache_close(rf_cache *c);

/* Look the shard up. A hit (return 1) needs an entry for exactly this key (the sidecar's key,
 * not only its hash) with this size and validator; *fd is then an O_RDONLY descriptor of the
 * complete shard, its `size` bytes followed by their checksums (rf_cache_file_bytes(size) in
 * all: read it with rf_cache_sums_read), pinned against eviction by every process until
 * rf_cache_release(c, *fd); the entry's use time becomes now. Anything else is a miss (return
 * 0, *fd = -1), counted as stale when the entry holds another size or validator (the object
 * changed). A negative code only for a bad key or validator. `validator`: the server's
 * identity of the object's version (ETag and/or Last-Modified, as the engine chooses; NULL or
 * "" checks the size only). */
int rf_cache_get(rf_cache *c, const char *key, uint64_t size, const char *validator, int *fd,
                 rf_err *err);
/* Unpin and close a descriptor rf_cache_get gave. */
void rf_cache_release(rf_cache *c, int fd);
/* The copy of key that fd reads failed its checksums: unpin fd (which stays open, for reads
 * in progress, until rf_cache_release) and remove the entry unless another process holds it,
 * so that a fill writes it afresh. */
void rf_cache_drop(rf_cache *c, const char *key, int fd);

/* Start filling the entry of (key, size, validator) after a miss. Returns 0 with *w, or
 * RF_CACHE_SKIP with *w = NULL when this shard is not cached now: larger than the budget
 * (counted as a bypass), empty, being filled by another writer, published by another writer
 * since the caller's lookup (look it up again), the room held by shards in use, the
 * directory's lock held past RF_CACHE_LOCK_WAIT_MS, more than RF_CACHE_ENTRIES_MAX entries, an
 * I/O error, or fills off after a full disk; err says which. Room is made by evicting the
 * least recently used shards nobody has open and reserved with fallocate, so a full disk shows
 * here (ENOSPC, EFBIG, EDQUOT turn fills off for the rest of the run: rf_cache_off_why). A
 * stale entry of the same key (another validator or size), or of a key with the same hash, is
 * replaced unless a reader holds it. */
int rf_cache_fill_begin(rf_cache *c, const char *key, uint64_t size, const char *validator,
                        rf_cache_writer **w, rf_err *err);
/* Write len bytes of the shard at offset off (off + len <= size). Ranges may come in any order
 * and overlap (a retried range writes the same bytes again). Returns 0, or -errno / RF_ELIMIT
 * / RF_EINVAL with err naming the key and byte offset; the writer is then failed and can only
 * be aborted (commit aborts it too). */
int rf_cache_fill_write(rf_cache_writer *w, uint64_t off, const void *buf, uint64_t len,
                        rf_err *err);
/* Publish the shard when every byte of [0, size) was written (fsync, then rename into place
 * with its sidecar: readers never see a partial shard), else abort. Frees w. Returns 0, or
 * RF_CACHE_SKIP with err saying why it was not published (bytes missing: the first offset not
 * written; a failed write; a full disk). */
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

/* NULL while fills are on; after a full disk the one message saying why they are off (the
 * file, the byte offset and the error). */
const char *rf_cache_off_why(rf_cache *c);

/* ---- checksums (shard_cache_sum.c) --------------------------------------------------------
 * Every RF_CACHE_SUM_BLOCK bytes of a cached shard have a 64-bit checksum, written after the
 * shard's bytes by the fill's commit, so that a byte changed on the disk since (a failing
 * sector, another program) is never served: a read that does not match says so. */
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
/* Read len bytes at off of the copy fd into dst, checking every block they touch against s;
 * bounce: 2 x RF_CACHE_SUM_BLOCK bytes of the caller's, for blocks only partly wanted.
 * Returns 0; RF_CACHE_MISMATCH with *bad_off the first block that does not match (dst then
 * holds garbage); -ENODATA past the shard's end; -errno from pread. Any thread, any number at
 * once. */
int rf_cache_sums_read(const rf_cache_sums *s, int fd, uint8_t *dst, uint64_t len, uint64_t off,
                       uint8_t *bounce, uint64_t *bad_off);

/* The cache key of a URL: the URL without its user information (`user:password@`), query
 * string and fragment, so that credentials and request signatures never reach the directory.
 * Returns 0, or RF_ELIMIT when the result (NUL included) does not fit in out_len bytes. */
int rf_cache_key_from_url(const char *url, char *out, size_t out_len);

#endif
