/* shard_cache_dir.h — the shard cache's directory, internal to the cache: shared by
 * shard_cache.c and shard_cache_dir.c. On disk, for a key hashing to H (16 hex digits): H.shard
 * (the bytes), H.meta (the sidecar; its presence publishes the entry), H.part (a fill, flocked
 * by its writer), H.mtmp (a sidecar being written, under the lock); .lock is the directory's.
 * Locks: c->mu before the directory's flock, both held for every look at or change of the
 * directory, never across a download. */
#ifndef RF_SHARD_CACHE_DIR_H
#define RF_SHARD_CACHE_DIR_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "io/shard_cache.h"

/* A published entry as the last scan saw it: its hash, size and use time (the shard's
 * mtime, which each hit sets to now). */
typedef struct rf_cache_ent {
    uint64_t hash;
    uint64_t size;
    int64_t used_ns;
} rf_cache_ent;

/* A sidecar's content. */
typedef struct rf_cache_meta {
    char key[RF_CACHE_KEY_MAX + 1];
    char validator[RF_CACHE_VALIDATOR_MAX + 1];
    uint64_t size;
} rf_cache_meta;

struct rf_cache {
    pthread_mutex_t mu;
    char dir[RF_PATH_BYTES_MAX];
    int dirfd, lockfd;
    uint64_t budget;
    /* under mu: the last scan's entries (with this handle's changes), their bytes, and those of
     * other shard files (other writers' fills, files in use that could not be removed) */
    rf_cache_ent *ents;
    uint64_t nents, cap;
    uint64_t used, other;
    rf_cache_stats st; /* under mu, except the atomics below */
    _Atomic uint64_t bytes_written;
    _Atomic int off; /* 0 on, 1 turning off, 2 off with off_why written */
    char off_why[RF_ERRMSG_MAX];
};

#define RF_CACHE_NAME_MAX 32

/* "H.ext" in out (RF_CACHE_NAME_MAX bytes). */
void rf_cache_name(char *out, uint64_t hash, const char *ext);
/* The hash of a key (FNV-1a, mixed). */
uint64_t rf_cache_hash(const char *key);

/* Take the directory's flock, waiting up to RF_CACHE_LOCK_WAIT_MS; 0 or -errno with err. */
int rf_cache_dir_lock(rf_cache *c, rf_err *err);
void rf_cache_dir_unlock(rf_cache *c);

/* Read and check H.meta: 0 with *m, or -1 (absent, unreadable or malformed). */
int rf_cache_meta_read(rf_cache *c, uint64_t hash, rf_cache_meta *m);
/* Write H.meta through H.mtmp (fsync, rename): 0 or -errno with err. */
int rf_cache_meta_write(rf_cache *c, uint64_t hash, const rf_cache_meta *m, rf_err *err);

/* 1 when some process holds a flock on the named file; directory lock held. */
int rf_cache_in_use(rf_cache *c, const char *name);
/* Remove H's entry (sidecar first) unless in use: 0, or 1 when in use. Directory lock held. */
int rf_cache_remove(rf_cache *c, uint64_t hash);

/* Scan the directory into c->ents, c->used and c->other, removing what no live process holds:
 * stale `.part` and `.mtmp`, shards without a sidecar, sidecars without a shard and (full)
 * entries with a malformed sidecar or another size. 0 or a negative code. Both locks held. */
int rf_cache_scan(rf_cache *c, int full, rf_err *err);
/* Evict least recently used entries nobody has open until `need` more bytes fit in the
 * budget; 0, or 1 when they cannot (err says how much is held). Both locks held. */
int rf_cache_make_room(rf_cache *c, uint64_t need, rf_err *err);
/* c->ents: add (or update) an entry; drop one. mu held. */
int rf_cache_ents_put(rf_cache *c, uint64_t hash, uint64_t size, int64_t used_ns);
void rf_cache_ents_drop(rf_cache *c, uint64_t hash);

/* Turn fills off for the rest of the run after a full disk; the first message stays. */
void rf_cache_turn_off(rf_cache *c, const char *msg);
/* 1 for the errors that mean the file system is full (ENOSPC, EDQUOT, EFBIG). */
int rf_cache_full_errno(int e);

#endif
