/* test_shard_cache.c — the local shard cache (src/io/shard_cache.h) in one process: hits,
 * misses and bypasses, LRU eviction within the budget, fills written out of order and
 * published only whole, aborts, changed objects, a directory reopened with leftovers and
 * foreign files in it, full disks (EFBIG from RLIMIT_FSIZE everywhere, ENOSPC from a private
 * tmpfs where the machine allows one), a byte changed in a copy caught by its checksums, and
 * threads sharing one handle and one writer (run under TSan too). The cached bytes are shards written by GNU tar and Python's tarfile;
 * test_shard_cache_ranks.c has the processes sharing a directory. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "cacheutil.h"
#include "io/shard_cache_dir.h"
#include "testutil.h"

/* ---- hits, misses, bypasses -------------------------------------------------------------- */

START_TEST(hit_miss_bypass_gnu_tar_shard)
{
    char *src = rf_test_mkdtemp("cache-src"), *dir = rf_test_mkdtemp("cache-hit");
    const char *labels[] = {"3", "1", "4", "1", "5"};
    char *tar = rf_tc_track(rf_test_make_label_shard(src, labels, 5));
    size_t size;
    uint8_t *bytes = rf_tc_track(rf_test_read_file(tar, &size));
    rf_cache *c = rf_tc_open_ok(dir, 1 << 20);
    ck_assert(rf_tc_is_miss(c, KEY_A, size, "\"etag-1\""));
    ck_assert_int_eq(rf_tc_fill(c, KEY_A, bytes, size, "\"etag-1\""), 0);
    rf_tc_expect_hit(c, KEY_A, bytes, size, "\"etag-1\"", NULL);
    /* The cached file is the shard itself (a human can list it) and its sidecar names the
     * URL; nothing else is left in the directory. */
    char *shard = rf_tc_entry_path(dir, KEY_A, "shard");
    char *meta = rf_tc_entry_path(dir, KEY_A, "meta");
    ck_assert_int_eq(rf_test_shell("tar tf '%s' | grep -q '^00000004.cls$'", shard), 0);
    size_t mlen;
    char *text = rf_tc_track(rf_test_read_file(meta, &mlen)), want[256];
    snprintf(want, sizeof want, "ringfeed-cache 1\nkey %s\nsize %zu\nvalidator \"etag-1\"\n",
             KEY_A, size);
    ck_assert_str_eq(text, want);
    ck_assert_int_eq((int)strlen(rf_tc_listing(dir)), 6 + 23 + 22); /* .lock, H.shard, H.meta */
    /* larger than the budget: a counted bypass, not an error */
    rf_cache_writer *w = (rf_cache_writer *)1;
    rf_err e = {0};
    ck_assert_int_eq(rf_cache_fill_begin(c, KEY_B, (1 << 20) + 1, NULL, &w, &e), RF_CACHE_SKIP);
    ck_assert_ptr_null(w);
    ck_assert_msg(strstr(e.msg, "larger than the cache's budget"), "%s", e.msg);
    rf_cache_stats st = rf_tc_stats(c);
    ck_assert_uint_eq(st.hits, 1);
    ck_assert_uint_eq(st.misses, 1);
    ck_assert_uint_eq(st.bypasses, 1);
    ck_assert_uint_eq(st.fills, 1);
    ck_assert_uint_eq(st.bytes_written, size);
    ck_assert_uint_eq(st.bytes_in_use, size);
    ck_assert_uint_eq(st.entries, 1);
    ck_assert_uint_eq(st.off, 0);
    ck_assert_ptr_null(rf_cache_off_why(c));
    rf_cache_close(c);
}
END_TEST

/* Keys, validators and directories no caller should pass are refused with their reason;
 * keys made from URLs. */
START_TEST(bad_arguments)
{
    char *dir = rf_test_mkdtemp("cache-args");
    rf_cache *c = NULL;
    rf_err e = {0};
    ck_assert_int_eq(rf_cache_open(dir, 0, &c, &e), RF_EINVAL);
    ck_assert_msg(strstr(e.msg, "budget of 0"), "%s", e.msg);
    char missing[4200];
    snprintf(missing, sizeof missing, "%s/no/such", dir);
    ck_assert_int_eq(rf_cache_open(missing, 100, &c, &e), -ENOENT);
    ck_assert_msg(strstr(e.msg, missing), "%s", e.msg);
    c = rf_tc_open_ok(dir, 100);
    int fd;
    ck_assert_int_eq(rf_cache_get(c, "", 1, NULL, &fd, &e), RF_EINVAL);
    ck_assert_int_eq(rf_cache_get(c, "a\nkey bad", 1, NULL, &fd, &e), RF_EINVAL);
    ck_assert_msg(strstr(e.msg, "control character (0x0a) at byte 1"), "%s", e.msg);
    char *long_key = malloc(RF_CACHE_KEY_MAX + 2);
    memset(long_key, 'k', RF_CACHE_KEY_MAX + 1);
    long_key[RF_CACHE_KEY_MAX + 1] = 0;
    rf_cache_writer *w;
    ck_assert_int_eq(rf_cache_fill_begin(c, long_key, 1, NULL, &w, &e), RF_EINVAL);
    ck_assert_msg(strstr(e.msg, "over the limit of 4095"), "%s", e.msg);
    free(long_key);
    rf_cache_close(c);
    /* keys from URLs: no credentials, query (a request's signature) or fragment */
    char out[128];
    ck_assert_int_eq(rf_cache_key_from_url("https://user:s3cret@host:8443/b/x.tar?X-Amz-"
                                           "Signature=ab#frag", out, sizeof out), 0);
    ck_assert_str_eq(out, "https://host:8443/b/x.tar");
    ck_assert_int_eq(rf_cache_key_from_url("s3://bucket/a@b/x.tar", out, sizeof out), 0);
    ck_assert_str_eq(out, "s3://bucket/a@b/x.tar");
    ck_assert_int_eq(rf_cache_key_from_url("http://h/x.tar", out, 14), RF_ELIMIT);
    ck_assert_int_eq(rf_cache_key_from_url("http://h/x.tar", out, 15), 0);
}
END_TEST

/* ---- LRU and budget ----------------------------------------------------------------------- */

/* Budget of three 1000-byte shards: the fourth evicts the least recently used one, where a
 * hit counts as a use and a shard held open is passed over. */
START_TEST(lru_order_and_budget)
{
    char *dir = rf_test_mkdtemp("cache-lru");
    uint8_t *a = rf_tc_pattern(1, 1000), *b = rf_tc_pattern(2, 1000), *cc = rf_tc_pattern(3, 1000),
            *d = rf_tc_pattern(4, 1000);
    rf_cache *c = rf_tc_open_ok(dir, 3000);
    rf_tc_fill_then_age(c, KEY_A, a, 1000);
    rf_tc_fill_then_age(c, KEY_B, b, 1000);
    rf_tc_fill_then_age(c, KEY_C, cc, 1000);
    rf_tc_expect_hit(c, KEY_A, a, 1000, "v", NULL); /* A is now the most recent */
    usleep(20000);
    ck_assert_int_eq(rf_tc_fill(c, KEY_D, d, 1000, "v"), 0);
    ck_assert(rf_tc_is_miss(c, KEY_B, 1000, "v"));
    ck_assert_uint_eq(rf_tc_stats(c).evictions, 1);
    ck_assert_uint_eq(rf_tc_stats(c).bytes_in_use, 3000);
    /* C held open and then made the oldest again: passed over, A goes instead */
    int held;
    rf_tc_expect_hit(c, KEY_C, cc, 1000, "v", &held);
    usleep(20000);
    rf_tc_expect_hit(c, KEY_A, a, 1000, "v", NULL);
    usleep(20000);
    rf_tc_expect_hit(c, KEY_D, d, 1000, "v", NULL);
    usleep(20000);
    ck_assert_int_eq(rf_tc_fill(c, KEY_B, b, 1000, "v"), 0);
    ck_assert(rf_tc_is_miss(c, KEY_A, 1000, "v"));
    uint8_t *got = malloc(1000);
    size_t n;
    ck_assert_int_eq(rf_pread_full(held, got, 1000, 0, &n), 0);
    ck_assert_int_eq(memcmp(got, cc, 1000), 0);
    rf_cache_release(c, held);
    /* 2000 bytes: C and D, the oldest and no longer open, go for them */
    uint8_t *big = rf_tc_pattern(5, 2000);
    ck_assert_int_eq(rf_tc_fill(c, KEY_A, big, 2000, "v2"), 0);
    ck_assert(rf_tc_is_miss(c, KEY_C, 1000, "v") && rf_tc_is_miss(c, KEY_D, 1000, "v"));
    rf_tc_expect_hit(c, KEY_B, b, 1000, "v", NULL);
    rf_cache_stats st = rf_tc_stats(c);
    ck_assert_uint_eq(st.evictions, 4);
    ck_assert_uint_eq(st.bytes_in_use, 3000);
    ck_assert_uint_eq(st.entries, 2);
    free(got);
    rf_cache_close(c);
}
END_TEST

/* ---- fills -------------------------------------------------------------------------------- */

START_TEST(out_of_order_fill_and_coverage)
{
    char *dir = rf_test_mkdtemp("cache-cover");
    const size_t size = 10000;
    uint8_t *data = rf_tc_pattern(9, size);
    rf_cache *c = rf_tc_open_ok(dir, 1 << 20);
    rf_cache_writer *w;
    rf_err e = {0};
    ck_assert_int_eq(rf_cache_fill_begin(c, KEY_A, size, "v", &w, &e), 0);
    /* ranged fetches land out of order, one retried over another: every byte but 6000..6999 */
    static const size_t parts[][2] = {{9000, 1000}, {0, 1500}, {3000, 3000}, {1000, 2500},
                                      {8000, 1200}, {7000, 1000}, {2500, 600}};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
        ck_assert_int_eq(rf_cache_fill_write(w, parts[i][0], data + parts[i][0], parts[i][1],
                                             &e), 0);
    ck_assert_int_eq(rf_cache_fill_commit(w, &e), RF_CACHE_SKIP);
    ck_assert_msg(strstr(e.msg, "byte 6000 of 10000 was never written"), "%s", e.msg);
    ck_assert(rf_tc_is_miss(c, KEY_A, size, "v"));
    /* the same with the gap written last: published */
    ck_assert_int_eq(rf_cache_fill_begin(c, KEY_A, size, "v", &w, &e), 0);
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
        ck_assert_int_eq(rf_cache_fill_write(w, parts[i][0], data + parts[i][0], parts[i][1],
                                             &e), 0);
    ck_assert_int_eq(rf_cache_fill_write(w, 6000, data + 6000, 1000, &e), 0);
    ck_assert_int_eq(rf_cache_fill_commit(w, &e), 0);
    rf_tc_expect_hit(c, KEY_A, data, size, "v", NULL);
    /* a write past the end fails the writer, naming the key and offset */
    ck_assert_int_eq(rf_cache_fill_begin(c, KEY_B, size, "v", &w, &e), 0);
    ck_assert_int_eq(rf_cache_fill_write(w, 9990, data, 11, &e), RF_EINVAL);
    ck_assert_msg(strstr(e.msg, KEY_B) && strstr(e.msg, "11 bytes at byte 9990"), "%s", e.msg);
    rf_tc_write_chunks(w, data, size, 4096, 0);
    ck_assert_int_eq(rf_cache_fill_commit(w, &e), RF_CACHE_SKIP);
    ck_assert_msg(strstr(e.msg, "a write failed"), "%s", e.msg);
    rf_cache_stats st = rf_tc_stats(c);
    ck_assert_uint_eq(st.fills, 1);
    ck_assert_uint_eq(st.aborts, 2);
    ck_assert_msg(!strstr(rf_tc_listing(dir), ".part"), "%s", rf_tc_listing(dir));
    rf_cache_close(c);
}
END_TEST

START_TEST(abort_leaves_nothing)
{
    char *dir = rf_test_mkdtemp("cache-abort");
    uint8_t *data = rf_tc_pattern(4, 5000);
    rf_cache *c = rf_tc_open_ok(dir, 1 << 20);
    rf_cache_writer *w, *w2;
    rf_err e = {0};
    ck_assert_int_eq(rf_cache_fill_begin(c, KEY_A, 5000, NULL, &w, &e), 0);
    /* while it fills, the same key is busy for everyone (this handle's threads too) */
    ck_assert_int_eq(rf_cache_fill_begin(c, KEY_A, 5000, NULL, &w2, &e), RF_CACHE_SKIP);
    ck_assert_msg(strstr(e.msg, "another writer is filling it"), "%s", e.msg);
    rf_tc_write_chunks(w, data, 5000, 1000, 0);
    rf_cache_fill_abort(w);
    ck_assert_str_eq(rf_tc_listing(dir), ".lock\n");
    ck_assert(rf_tc_is_miss(c, KEY_A, 5000, NULL));
    ck_assert_int_eq(rf_tc_fill(c, KEY_A, data, 5000, NULL), 0);
    rf_tc_expect_hit(c, KEY_A, data, 5000, NULL, NULL);
    rf_tc_expect_hit(c, KEY_A, data, 5000, "", NULL);
    /* a rank whose lookup missed before another rank published: its fill is not needed */
    ck_assert_int_eq(rf_cache_fill_begin(c, KEY_A, 5000, "", &w2, &e), RF_CACHE_SKIP);
    ck_assert_msg(strstr(e.msg, "already cached by another writer"), "%s", e.msg);
    rf_tc_expect_hit(c, KEY_A, data, 5000, "", NULL);
    ck_assert_uint_eq(rf_tc_stats(c).aborts, 1);
    ck_assert_uint_eq(rf_tc_stats(c).skips, 2);
    rf_cache_close(c);
}
END_TEST

/* The object changed on the server: another ETag or size is a stale miss, and the next fill
 * replaces the old bytes. A hash twin (another key in the sidecar) is a plain miss. */
START_TEST(validator_change_and_twin)
{
    char *dir = rf_test_mkdtemp("cache-valid");
    uint8_t *v1 = rf_tc_pattern(1, 3000), *v2 = rf_tc_pattern(2, 3000);
    rf_cache *c = rf_tc_open_ok(dir, 1 << 20);
    ck_assert_int_eq(rf_tc_fill(c, KEY_A, v1, 3000, "\"e1\" Tue, 01 Dec 2026 10:00:00 GMT"), 0);
    ck_assert(rf_tc_is_miss(c, KEY_A, 3000, "\"e2\" Tue, 01 Dec 2026 11:00:00 GMT"));
    ck_assert(rf_tc_is_miss(c, KEY_A, 2999, "\"e1\" Tue, 01 Dec 2026 10:00:00 GMT"));
    ck_assert_uint_eq(rf_tc_stats(c).stale, 2);
    ck_assert_int_eq(rf_tc_fill(c, KEY_A, v2, 3000, "\"e2\" Tue, 01 Dec 2026 11:00:00 GMT"), 0);
    ck_assert(rf_tc_is_miss(c, KEY_A, 3000, "\"e1\" Tue, 01 Dec 2026 10:00:00 GMT"));
    rf_tc_expect_hit(c, KEY_A, v2, 3000, "\"e2\" Tue, 01 Dec 2026 11:00:00 GMT", NULL);
    ck_assert_uint_eq(rf_tc_stats(c).entries, 1);
    /* KEY_A's sidecar rewritten to name KEY_B: neither is served from it */
    char *meta = rf_tc_entry_path(dir, KEY_A, "meta");
    char text[512];
    int n = snprintf(text, sizeof text, "ringfeed-cache 1\nkey %s\nsize 3000\nvalidator "
                     "\"e2\" Tue, 01 Dec 2026 11:00:00 GMT\n", KEY_B);
    rf_test_write_file(meta, text, (size_t)n);
    ck_assert(rf_tc_is_miss(c, KEY_A, 3000, "\"e2\" Tue, 01 Dec 2026 11:00:00 GMT"));
    ck_assert_uint_eq(rf_tc_stats(c).stale, 3); /* e1 against e2 was the third; a twin is not */
    rf_cache_close(c);
}
END_TEST

/* ---- the directory across runs ------------------------------------------------------------ */

START_TEST(reopen_cleans_and_keeps)
{
    char *src = rf_test_mkdtemp("cache-src2"), *dir = rf_test_mkdtemp("cache-reopen");
    /* a shard as Python's tarfile writes it */
    ck_assert_int_eq(rf_test_shell("cd '%s' && python3 -c \"import io, tarfile\n"
                                   "with tarfile.open('py.tar', 'w', format=tarfile.PAX_FORMAT) "
                                   "as t:\n for i in range(4):\n  d = bytes([i]) * (700 + i)\n"
                                   "  m = tarfile.TarInfo('s%%04d.bin' %% i); m.size = len(d)\n"
                                   "  t.addfile(m, io.BytesIO(d))\"", src), 0);
    char path[4200];
    snprintf(path, sizeof path, "%s/py.tar", src);
    size_t size;
    uint8_t *py = rf_tc_track(rf_test_read_file(path, &size)), *b = rf_tc_pattern(2, 2000);
    rf_cache *c = rf_tc_open_ok(dir, 1 << 20);
    ck_assert_int_eq(rf_tc_fill(c, KEY_A, py, size, "v"), 0);
    ck_assert_int_eq(rf_tc_fill(c, KEY_B, b, 2000, "v"), 0);
    ck_assert_int_eq(rf_tc_fill(c, KEY_C, b, 2000, "v"), 0);
    ck_assert_int_eq(rf_tc_fill(c, KEY_D, b, 2000, "v"), 0);
    char *c_meta = rf_tc_entry_path(dir, KEY_C, "meta");
    char *d_shard = rf_tc_entry_path(dir, KEY_D, "shard");
    rf_cache_close(c);
    /* leftovers: C's sidecar garbage, D's shard cut short, an orphan sidecar and shard, a
     * stale sidecar temp, and a user's file (left alone) */
    rf_test_write_file(c_meta, "not a sidecar\n", 14);
    ck_assert_int_eq(truncate(d_shard, 1999), 0);
    snprintf(path, sizeof path, "%s/00000000000000aa.meta", dir);
    rf_test_write_file(path, "x", 1);
    snprintf(path, sizeof path, "%s/00000000000000bb.shard", dir);
    rf_test_write_file(path, "x", 1);
    snprintf(path, sizeof path, "%s/00000000000000cc.mtmp", dir);
    rf_test_write_file(path, "x", 1);
    snprintf(path, sizeof path, "%s/README.txt", dir);
    rf_test_write_file(path, "mine", 4);
    c = rf_tc_open_ok(dir, 1 << 20);
    rf_cache_stats st = rf_tc_stats(c);
    ck_assert_uint_eq(st.entries, 2);
    ck_assert_uint_eq(st.bytes_in_use, size + 2000);
    ck_assert_uint_eq(st.cleaned, 5); /* C's entry, D's entry, the three leftovers */
    rf_tc_expect_hit(c, KEY_A, py, size, "v", NULL);
    rf_tc_expect_hit(c, KEY_B, b, 2000, "v", NULL);
    ck_assert(rf_tc_is_miss(c, KEY_C, 2000, "v"));
    ck_assert(rf_tc_is_miss(c, KEY_D, 2000, "v"));
    const char *list = rf_tc_listing(dir);
    ck_assert_msg(strstr(list, "README.txt\n") && !strstr(list, "00000000000000"), "%s", list);
    rf_cache_close(c);
}
END_TEST

/* A writer killed mid-fill leaves its `.part`; the next fill of that key (or the next open)
 * removes it, since no live writer holds it. */
/* ---- checksums ----------------------------------------------------------------------------- */

/* Every block of a copy is checked on read: a byte changed on disk after the commit makes a
 * read of its block RF_CACHE_MISMATCH naming that block, wherever the read starts and ends in
 * it and whether the block is read in place or through the bounce buffer; the other blocks
 * still read right. A copy whose checksum trailer is gone is no entry (a miss). rf_cache_drop
 * then removes the entry. */
START_TEST(checksums_catch_a_changed_byte)
{
    char *dir = rf_test_mkdtemp("cache-sums");
    const size_t size = 5 * RF_CACHE_SUM_BLOCK + 1234, flip = 3 * RF_CACHE_SUM_BLOCK + 77;
    uint8_t *a = rf_tc_pattern(1, size), *got = malloc(size), *bounce = malloc(2 * RF_CACHE_SUM_BLOCK);
    rf_cache *c = rf_tc_open_ok(dir, 1 << 20);
    ck_assert_int_eq(rf_tc_fill(c, KEY_A, a, size, "v"), 0);
    ck_assert_int_eq(rf_tc_fill(c, KEY_B, a, size, "v"), 0);
    char path[1024];
    snprintf(path, sizeof path, "%s/%016llx.shard", dir, (unsigned long long)rf_cache_hash(KEY_A));
    int w = open(path, O_WRONLY);
    uint8_t x = a[flip] ^ 0x10;
    ck_assert_int_eq(pwrite(w, &x, 1, (off_t)flip), 1);
    close(w);
    int fd = -1;
    rf_err e = {0};
    ck_assert_int_eq(rf_cache_get(c, KEY_A, size, "v", &fd, &e), 1);
    rf_cache_sums s;
    ck_assert_int_eq(rf_cache_sums_load(fd, size, &s), 0);
    static const struct { size_t off, len; int bad; } reads[] = {
        {0, 3 * RF_CACHE_SUM_BLOCK, 0},                        /* blocks 0-2 in place */
        {flip - 10, 20, 1},                                     /* inside block 3 */
        {RF_CACHE_SUM_BLOCK + 5, 3 * RF_CACHE_SUM_BLOCK, 1},    /* block 3 in place */
        {4 * RF_CACHE_SUM_BLOCK, RF_CACHE_SUM_BLOCK + 1234, 0}, /* the short last block */
        {flip + 1, RF_CACHE_SUM_BLOCK, 1},                      /* 3 and 4 partly */
    };
    for (size_t i = 0; i < sizeof reads / sizeof reads[0]; i++) {
        uint64_t bad = 0;
        int rc = rf_cache_sums_read(&s, fd, got, reads[i].len, reads[i].off, bounce, &bad);
        if (reads[i].bad) {
            ck_assert_int_eq(rc, RF_CACHE_MISMATCH);
            ck_assert_uint_eq(bad, 3 * RF_CACHE_SUM_BLOCK);
        } else {
            ck_assert_int_eq(rc, 0);
            ck_assert(memcmp(got, a + reads[i].off, reads[i].len) == 0);
        }
    }
    ck_assert_int_eq(rf_cache_sums_read(&s, fd, got, 2, size - 1, bounce, &(uint64_t){0}),
                     -ENODATA);
    rf_cache_sums_free(&s);
    rf_cache_drop(c, KEY_A, fd);
    rf_cache_release(c, fd);
    ck_assert(rf_tc_is_miss(c, KEY_A, size, "v"));
    rf_tc_expect_hit(c, KEY_B, a, size, "v", NULL);
    /* B's trailer cut off: the file is no copy of B any more */
    snprintf(path, sizeof path, "%s/%016llx.shard", dir, (unsigned long long)rf_cache_hash(KEY_B));
    ck_assert_int_eq(truncate(path, (off_t)rf_cache_file_bytes(size) - 16), 0);
    ck_assert(rf_tc_is_miss(c, KEY_B, size, "v"));
    rf_cache_close(c);
    free(got), free(bounce);
}
END_TEST

/* ---- full disks --------------------------------------------------------------------------- */

static void expect_off(rf_cache *c, const char *what)
{
    rf_cache_stats st = rf_tc_stats(c);
    ck_assert_uint_eq(st.off, 1);
    const char *why = rf_cache_off_why(c);
    ck_assert_msg(why && strstr(why, "shard cache off for this run: ") && strstr(why, what),
                  "%s", why ? why : "(null)");
    rf_cache_writer *w;
    rf_err e = {0};
    ck_assert_int_eq(rf_cache_fill_begin(c, KEY_D, 10, NULL, &w, &e), RF_CACHE_SKIP);
    ck_assert_msg(strstr(e.msg, "fills are off"), "%s", e.msg);
    ck_assert_str_eq(rf_cache_off_why(c), why); /* the first message stays */
}

/* RLIMIT_FSIZE with SIGXFSZ ignored: fallocate past the limit fails with EFBIG at the fill's
 * start, and a write past it (the room reserved before the limit) at its byte. */
START_TEST(full_disk_file_size_limit)
{
    char *dir = rf_test_mkdtemp("cache-efbig");
    uint8_t *a = rf_tc_pattern(1, 100000);
    rf_cache *c = rf_tc_open_ok(dir, 1 << 20);
    ck_assert_int_eq(rf_tc_fill(c, KEY_A, a, 1000, "v"), 0);
    rf_cache_writer *w;
    rf_err e = {0};
    ck_assert_int_eq(rf_cache_fill_begin(c, KEY_B, 100000, "v", &w, &e), 0);
    ck_assert_int_eq(rf_test_limit_file_size(50000), 0);
    ck_assert_int_eq(rf_cache_fill_write(w, 0, a, 40000, &e), 0);
    ck_assert_int_eq(rf_cache_fill_write(w, 40000, a + 40000, 20000, &e), -EFBIG);
    ck_assert_msg(strstr(e.msg, ".part (cache fill of " "https://data.example/train/shard-0001"
                         ".tar): write at byte 50000 failed: File too large"), "%s", e.msg);
    ck_assert_int_eq(rf_cache_fill_commit(w, &e), RF_CACHE_SKIP);
    expect_off(c, "write at byte 50000 failed: File too large");
    rf_tc_expect_hit(c, KEY_A, a, 1000, "v", NULL); /* published shards are still served */
    rf_cache_close(c);
    /* the same limit at a fill's start: fallocate */
    c = rf_tc_open_ok(dir, 1 << 20);
    ck_assert_int_eq(rf_cache_fill_begin(c, KEY_C, 60000, "v", &w, &e), RF_CACHE_SKIP);
    /* the room reserved is the shard's and its checksums': 60000 + 4 x 8 + 16 bytes */
    ck_assert_uint_eq(rf_cache_file_bytes(60000), 60048);
    ck_assert_msg(strstr(e.msg, ".part: reserving 60048 bytes at byte 0 failed: File too "
                         "large"), "%s", e.msg);
    expect_off(c, "reserving 60048 bytes at byte 0 failed: File too large");
    ck_assert_int_eq(rf_test_limit_file_size(0), 0);
    ck_assert_msg(!strstr(rf_tc_listing(dir), ".part"), "%s", rf_tc_listing(dir));
    rf_cache_close(c);
}
END_TEST

/* A real full file system: a 256 KiB tmpfs of this test's own (when the machine allows one). */
START_TEST(full_disk_enospc)
{
    char *dir = rf_test_mkdtemp("cache-enospc");
    int rc = rf_test_private_tmpfs(dir, 256u << 10);
    if (rc) {
        fprintf(stderr, "full_disk_enospc: no tmpfs here (%s): skipped; "
                "full_disk_file_size_limit covers the same with EFBIG\n", strerror(-rc));
        return;
    }
    uint8_t *a = rf_tc_pattern(1, 300000);
    rf_cache *c = rf_tc_open_ok(dir, 1 << 30);
    ck_assert_int_eq(rf_tc_fill(c, KEY_A, a, 100000, "v"), 0);
    rf_cache_writer *w;
    rf_err e = {0};
    ck_assert_int_eq(rf_cache_fill_begin(c, KEY_B, 200000, "v", &w, &e), RF_CACHE_SKIP);
    expect_off(c, "reserving 200120 bytes at byte 0 failed: No space left on device");
    rf_tc_expect_hit(c, KEY_A, a, 100000, "v", NULL);
    ck_assert_uint_eq(rf_tc_stats(c).bytes_in_use, 100000);
    rf_cache_close(c);
    /* A shard that takes every block left: reserved and written, then its sidecar finds no
     * room. The fill is taken back whole (no file of it stays) and fills go off. */
    c = rf_tc_open_ok(dir, 1 << 30);
    struct statvfs vfs;
    ck_assert_int_eq(statvfs(dir, &vfs), 0);
    size_t left = (size_t)(vfs.f_bavail * vfs.f_bsize);
    ck_assert_uint_lt(left, 300000);
    left -= 16 + 8 * (left / RF_CACHE_SUM_BLOCK + 1); /* its checksums take the rest */
    ck_assert_uint_le(rf_cache_file_bytes(left), left + 16 + 8 * (left / RF_CACHE_SUM_BLOCK + 1));
    ck_assert_int_eq(rf_cache_fill_begin(c, KEY_C, left, "v", &w, &e), 0);
    rf_tc_write_chunks(w, a, left, 65536, 0);
    ck_assert_int_eq(rf_cache_fill_commit(w, &e), RF_CACHE_SKIP);
    expect_off(c, "writing the sidecar failed: No space left on device");
    const char *list = rf_tc_listing(dir); /* .lock and A's two files */
    ck_assert_msg(strlen(list) == 6 + 23 + 22 && !strstr(list, ".mtmp"), "%s", list);
    ck_assert(rf_tc_is_miss(c, KEY_C, left, "v"));
    rf_tc_expect_hit(c, KEY_A, a, 100000, "v", NULL);
    ck_assert_uint_eq(rf_tc_stats(c).aborts, 1);
    rf_cache_close(c);
}
END_TEST

/* ---- threads ------------------------------------------------------------------------------ */

#define T_KEYS 6
#define T_SIZE 3000
#define T_ITERS 60

typedef struct tctx {
    rf_cache *c;
    uint32_t id, hits;
    uint8_t *data[T_KEYS];
} tctx;

static void *thread_main(void *arg)
{
    tctx *t = arg;
    char key[64];
    uint8_t got[T_SIZE];
    for (uint32_t i = 0; i < T_ITERS; i++) {
        /* Each key twice in a row: the second look finds what this thread just filled unless
         * the others evicted it meanwhile. With each key once, a thread alone walked the six
         * keys in a cycle through an LRU of three, which never hits: the hits came only from
         * the threads' interleaving, and a CI run under load saw none. */
        uint32_t k = (i / 2 * 7 + t->id * 3) % T_KEYS;
        snprintf(key, sizeof key, "https://h/shard-%u.tar", k);
        int fd;
        rf_err e = {0};
        if (rf_cache_get(t->c, key, T_SIZE, "v", &fd, &e) == 1) {
            size_t n = 0;
            if (rf_pread_full(fd, got, T_SIZE, 0, &n) || n != T_SIZE ||
                memcmp(got, t->data[k], T_SIZE))
                return (void *)1;
            rf_cache_release(t->c, fd);
            t->hits++;
            continue;
        }
        rf_cache_writer *w;
        if (rf_cache_fill_begin(t->c, key, T_SIZE, "v", &w, &e) != 0)
            continue; /* read from the source instead */
        rf_cache_fill_write(w, 1500, t->data[k] + 1500, 1500, &e);
        rf_cache_fill_write(w, 0, t->data[k], 1500, &e);
        rf_cache_fill_commit(w, &e);
    }
    return NULL;
}

START_TEST(threads_share_one_cache)
{
    char *dir = rf_test_mkdtemp("cache-threads");
    rf_cache *c = rf_tc_open_ok(dir, 3 * T_SIZE); /* half the keys fit: eviction all the time */
    tctx t[4];
    pthread_t th[4];
    for (uint32_t i = 0; i < 4; i++) {
        t[i] = (tctx){.c = c, .id = i};
        for (uint32_t k = 0; k < T_KEYS; k++)
            t[i].data[k] = rf_tc_pattern(100 + k, T_SIZE);
        ck_assert_int_eq(pthread_create(&th[i], NULL, thread_main, &t[i]), 0);
    }
    uint32_t hits = 0;
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(th[i], &r);
        ck_assert_ptr_null(r);
        hits += t[i].hits;
    }
    rf_cache_stats st = rf_tc_stats(c);
    ck_assert_uint_eq(st.hits + st.misses, 4 * T_ITERS);
    ck_assert_uint_eq(st.hits, hits);
    ck_assert_uint_gt(st.hits, 0);
    ck_assert_uint_le(st.bytes_in_use, 3 * T_SIZE);
    ck_assert_uint_eq(st.bytes_written, (st.fills + st.aborts) * T_SIZE);
    ck_assert_msg(!strstr(rf_tc_listing(dir), ".part"), "%s", rf_tc_listing(dir));
    rf_cache_close(c);
}
END_TEST

/* Ranged fetches of one shard finish on several I/O threads: they write one writer at once. */
typedef struct wctx {
    rf_cache_writer *w;
    const uint8_t *data;
    uint32_t id;
} wctx;

static void *writer_main(void *arg)
{
    wctx *t = arg;
    for (uint64_t off = t->id * 1000; off < 64000; off += 4000) {
        rf_err e = {0};
        if (rf_cache_fill_write(t->w, off, t->data + off, 1000, &e) != 0)
            return (void *)1;
    }
    return NULL;
}

START_TEST(one_writer_many_threads)
{
    char *dir = rf_test_mkdtemp("cache-wthreads");
    uint8_t *data = rf_tc_pattern(12, 64000);
    rf_cache *c = rf_tc_open_ok(dir, 1 << 20);
    rf_cache_writer *w;
    rf_err e = {0};
    ck_assert_int_eq(rf_cache_fill_begin(c, KEY_A, 64000, "v", &w, &e), 0);
    wctx t[4];
    pthread_t th[4];
    for (uint32_t i = 0; i < 4; i++) {
        t[i] = (wctx){w, data, 3 - i};
        ck_assert_int_eq(pthread_create(&th[i], NULL, writer_main, &t[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(th[i], &r);
        ck_assert_ptr_null(r);
    }
    ck_assert_int_eq(rf_cache_fill_commit(w, &e), 0);
    rf_tc_expect_hit(c, KEY_A, data, 64000, "v", NULL);
    rf_cache_close(c);
}
END_TEST

static Suite *shard_cache_suite(void)
{
    Suite *s = suite_create("shard_cache");
    TCase *tc = tcase_create("shard_cache");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, NULL, rf_tc_free_tracked);
    tcase_add_test(tc, hit_miss_bypass_gnu_tar_shard);
    tcase_add_test(tc, bad_arguments);
    tcase_add_test(tc, lru_order_and_budget);
    tcase_add_test(tc, out_of_order_fill_and_coverage);
    tcase_add_test(tc, abort_leaves_nothing);
    tcase_add_test(tc, validator_change_and_twin);
    tcase_add_test(tc, reopen_cleans_and_keeps);
    tcase_add_test(tc, full_disk_file_size_limit);
    tcase_add_test(tc, full_disk_enospc);
    tcase_add_test(tc, checksums_catch_a_changed_byte);
    tcase_add_test(tc, threads_share_one_cache);
    tcase_add_test(tc, one_writer_many_threads);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return rf_test_run_suite_mode(shard_cache_suite(), CK_ENV);
}
