/* cacheutil.h — fixtures of the shard cache's suites (test_shard_cache.c, one process;
 * test_shard_cache_ranks.c, processes sharing a directory): shards' bytes, fills and lookups
 * that must succeed, the names in an entry. Every check fails the running test. */
#ifndef RF_CACHEUTIL_H
#define RF_CACHEUTIL_H

#include <stddef.h>
#include <stdint.h>

#include "io/shard_cache.h"

/* Keys as the remote engine makes them (rf_cache_key_from_url). */
#define KEY_A "https://data.example/train/shard-0000.tar"
#define KEY_B "https://data.example/train/shard-0001.tar"
#define KEY_C "https://data.example/train/shard-0002.tar"
#define KEY_D "https://data.example/train/shard-0003.tar"

/* Remember p (malloc'ed) to free after the test: rf_tc_free_tracked, the suites' checked
 * teardown, runs in the test's process. Returns p. At most 256 per test. */
void *rf_tc_track(void *p);
void rf_tc_free_tracked(void);
/* rf_test_list_dir(dir), freed after the test. */
const char *rf_tc_listing(const char *dir);
/* size bytes that depend on (tag, offset), so each shard is told from any other; freed after
 * the test. */
uint8_t *rf_tc_pattern(uint32_t tag, size_t size);

/* rf_cache_open that must succeed. */
rf_cache *rf_tc_open_ok(const char *dir, uint64_t budget);
/* Write data[0..size) through w in `chunk`-byte pieces, last piece first when backwards;
 * every write must succeed. */
void rf_tc_write_chunks(rf_cache_writer *w, const uint8_t *data, size_t size, size_t chunk,
                        int backwards);
/* rf_cache_fill_begin, every byte (backwards, 777-byte pieces), commit: returns what begin
 * or commit returned. */
int rf_tc_fill(rf_cache *c, const char *key, const uint8_t *data, size_t size,
               const char *validator);
/* rf_tc_fill with validator "v" that must publish, then 20 ms, so that the next use of any
 * shard is later by the mtimes LRU goes by (the kernel's coarse clock). */
void rf_tc_fill_then_age(rf_cache *c, const char *key, const uint8_t *data, size_t size);
/* A hit whose descriptor holds exactly data[0..size): released, or left to the caller in
 * *keep when keep is not NULL. */
void rf_tc_expect_hit(rf_cache *c, const char *key, const uint8_t *data, size_t size,
                      const char *validator, int *keep);
/* 1 when rf_cache_get misses (and then gave fd -1), 0 on a hit (released). */
int rf_tc_is_miss(rf_cache *c, const char *key, size_t size, const char *validator);
rf_cache_stats rf_tc_stats(rf_cache *c);
/* The path of key's entry file "H.ext" in dir, found through the sidecar naming the key; freed
 * after the test. */
char *rf_tc_entry_path(const char *dir, const char *key, const char *ext);

#endif
