/* test_shard_cache.c — the local shard cache (src/io/shard_cache.h): hits, misses and
 * bypasses, LRU eviction within the budget, fills written out of order and published only
 * whole, aborts, changed objects, a directory reopened with leftovers and foreign files in
 * it, a killed writer's `.part`, two processes filling one key, eviction against a reader in
 * another process, full disks (EFBIG from RLIMIT_FSIZE everywhere, ENOSPC from a private
 * tmpfs where the machine allows one), the directory's lock held too long, and threads
 * sharing one handle (run under TSan too). The cached bytes are shards written by GNU tar and
 * Python's tarfile. */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io/shard_cache.h"
#include "testutil.h"

static const char *const KEY_A = "https://data.example/train/shard-0000.tar";
static const char *const KEY_B = "https://data.example/train/shard-0001.tar";
static const char *const KEY_C = "https://data.example/train/shard-0002.tar";
static const char *const KEY_D = "https://data.example/train/shard-0003.tar";

/* What a test allocated, freed after it (a checked fixture, in the test's process). */
static void *g_track[256];
static int g_ntrack;

static void *track(void *p)
{
    ck_assert_int_lt(g_ntrack, 256);
    return g_track[g_ntrack++] = p;
}

static void free_tracked(void)
{
    while (g_ntrack)
        free(g_track[--g_ntrack]);
}

/* The names in dir, as rf_test_list_dir, freed after the test. */
static const char *listing(const char *dir)
{
    return track(rf_test_list_dir(dir));
}

/* size bytes that depend on (tag, offset): each key's shard is told from any other's. */
static uint8_t *pattern(uint32_t tag, size_t size)
{
    uint8_t *b = track(malloc(size));
    for (size_t i = 0; i < size; i++)
        b[i] = (uint8_t)((i * 131 + tag * 17 + (i >> 9)) & 0xff);
    return b;
}

static rf_cache *open_ok(const char *dir, uint64_t budget)
{
    rf_cache *c = NULL;
    rf_err e = {0};
    int rc = rf_cache_open(dir, budget, &c, &e);
    ck_assert_msg(rc == 0, "rf_cache_open(%s): %d %s", dir, rc, e.msg);
    return c;
}

/* Write data in `chunk`-byte pieces, last piece first when backwards. */
static void write_chunks(rf_cache_writer *w, const uint8_t *data, size_t size, size_t chunk,
                         int backwards)
{
    size_t n = (size + chunk - 1) / chunk;
    for (size_t k = 0; k < n; k++) {
        size_t i = backwards ? n - 1 - k : k, off = i * chunk;
        rf_err e = {0};
        int rc = rf_cache_fill_write(w, off, data + off, RF_MIN(chunk, size - off), &e);
        ck_assert_msg(rc == 0, "write at %zu: %d %s", off, rc, e.msg);
    }
}

/* rf_cache_fill_begin, every byte, commit: returns what begin or commit returned. */
static int fill(rf_cache *c, const char *key, const uint8_t *data, size_t size,
                const char *validator)
{
    rf_cache_writer *w = NULL;
    rf_err e = {0};
    int rc = rf_cache_fill_begin(c, key, size, validator, &w, &e);
    if (rc)
        return rc;
    write_chunks(w, data, size, 777, 1);
    return rf_cache_fill_commit(w, &e);
}

/* fill() that must publish, then a pause so that the next use of any shard is later by the
 * mtimes LRU goes by (they come from the kernel's coarse clock). */
static void fill_then_age(rf_cache *c, const char *key, const uint8_t *data, size_t size)
{
    ck_assert_int_eq(fill(c, key, data, size, "v"), 0);
    usleep(20000);
}

/* A hit whose descriptor holds exactly `data` (released afterwards unless *keep). */
static void expect_hit(rf_cache *c, const char *key, const uint8_t *data, size_t size,
                       const char *validator, int *keep)
{
    int fd = -1;
    rf_err e = {0};
    ck_assert_int_eq(rf_cache_get(c, key, size, validator, &fd, &e), 1);
    uint8_t *got = malloc(size + 1);
    size_t n = 0;
    ck_assert_int_eq(rf_pread_full(fd, got, size + 1, 0, &n), 0);
    ck_assert_uint_eq(n, size);
    ck_assert_msg(memcmp(got, data, size) == 0, "%s: other bytes", key);
    free(got);
    if (keep)
        *keep = fd;
    else
        rf_cache_release(c, fd);
}

static int is_miss(rf_cache *c, const char *key, size_t size, const char *validator)
{
    int fd = 7;
    rf_err e = {0};
    int rc = rf_cache_get(c, key, size, validator, &fd, &e);
    ck_assert_int_eq(fd, rc ? fd : -1);
    if (rc == 1)
        rf_cache_release(c, fd);
    return rc == 0;
}

static rf_cache_stats stats(rf_cache *c)
{
    rf_cache_stats st;
    rf_cache_stats_get(c, &st);
    return st;
}

/* The path of key's entry file "H.ext" in dir, found through the sidecar naming the key. */
static char *entry_path(const char *dir, const char *key, const char *ext)
{
    char pat[4200], want[4200], *out = NULL;
    glob_t g;
    snprintf(pat, sizeof pat, "%s/*.meta", dir);
    snprintf(want, sizeof want, "\nkey %s\n", key);
    ck_assert_int_eq(glob(pat, 0, NULL, &g), 0);
    for (size_t i = 0; i < g.gl_pathc && !out; i++) {
        size_t len;
        char *text = (char *)rf_test_read_file(g.gl_pathv[i], &len);
        if (text && strstr(text, want) && (out = malloc(strlen(g.gl_pathv[i]) + 8)))
            sprintf(out, "%.*s.%s", (int)(strlen(g.gl_pathv[i]) - 5), g.gl_pathv[i], ext);
        free(text);
    }
    globfree(&g);
    ck_assert_msg(out, "no entry of %s in %s", key, dir);
    return track(out);
}

/* ---- hits, misses, bypasses -------------------------------------------------------------- */

START_TEST(hit_miss_bypass_gnu_tar_shard)
{
    char *src = rf_test_mkdtemp("cache-src"), *dir = rf_test_mkdtemp("cache-hit");
    const char *labels[] = {"3", "1", "4", "1", "5"};
    char *tar = track(rf_test_make_label_shard(src, labels, 5));
    size_t size;
    uint8_t *bytes = track(rf_test_read_file(tar, &size));
    rf_cache *c = open_ok(dir, 1 << 20);
    ck_assert(is_miss(c, KEY_A, size, "\"etag-1\""));
    ck_assert_int_eq(fill(c, KEY_A, bytes, size, "\"etag-1\""), 0);
    expect_hit(c, KEY_A, bytes, size, "\"etag-1\"", NULL);
    /* The cached file is the shard itself (a human can list it) and its sidecar names the
     * URL; nothing else is left in the directory. */
    char *shard = entry_path(dir, KEY_A, "shard"), *meta = entry_path(dir, KEY_A, "meta");
    ck_assert_int_eq(rf_test_shell("tar tf '%s' | grep -q '^00000004.cls$'", shard), 0);
    size_t mlen;
    char *text = track(rf_test_read_file(meta, &mlen)), want[256];
    snprintf(want, sizeof want, "ringfeed-cache 1\nkey %s\nsize %zu\nvalidator \"etag-1\"\n",
             KEY_A, size);
    ck_assert_str_eq(text, want);
    ck_assert_int_eq((int)strlen(listing(dir)), 6 + 23 + 22); /* .lock, H.shard, H.meta */
    /* larger than the budget: a counted bypass, not an error */
    rf_cache_writer *w = (rf_cache_writer *)1;
    rf_err e = {0};
    ck_assert_int_eq(rf_cache_fill_begin(c, KEY_B, (1 << 20) + 1, NULL, &w, &e), RF_CACHE_SKIP);
    ck_assert_ptr_null(w);
    ck_assert_msg(strstr(e.msg, "larger than the cache's budget"), "%s", e.msg);
    rf_cache_stats st = stats(c);
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
    c = open_ok(dir, 100);
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
    uint8_t *a = pattern(1, 1000), *b = pattern(2, 1000), *cc = pattern(3, 1000),
            *d = pattern(4, 1000);
    rf_cache *c = open_ok(dir, 3000);
    fill_then_age(c, KEY_A, a, 1000);
    fill_then_age(c, KEY_B, b, 1000);
    fill_then_age(c, KEY_C, cc, 1000);
    expect_hit(c, KEY_A, a, 1000, "v", NULL); /* A is now the most recent */
    usleep(20000);
    ck_assert_int_eq(fill(c, KEY_D, d, 1000, "v"), 0);
    ck_assert(is_miss(c, KEY_B, 1000, "v"));
    ck_assert_uint_eq(stats(c).evictions, 1);
    ck_assert_uint_eq(stats(c).bytes_in_use, 3000);
    /* C held open and then made the oldest again: passed over, A goes instead */
    int held;
    expect_hit(c, KEY_C, cc, 1000, "v", &held);
    usleep(20000);
    expect_hit(c, KEY_A, a, 1000, "v", NULL);
    usleep(20000);
    expect_hit(c, KEY_D, d, 1000, "v", NULL);
    usleep(20000);
    ck_assert_int_eq(fill(c, KEY_B, b, 1000, "v"), 0);
    ck_assert(is_miss(c, KEY_A, 1000, "v"));
    uint8_t *got = malloc(1000);
    size_t n;
    ck_assert_int_eq(rf_pread_full(held, got, 1000, 0, &n), 0);
    ck_assert_int_eq(memcmp(got, cc, 1000), 0);
    rf_cache_release(c, held);
    /* 2000 bytes: C and D, the oldest and no longer open, go for them */
    uint8_t *big = pattern(5, 2000);
    ck_assert_int_eq(fill(c, KEY_A, big, 2000, "v2"), 0);
    ck_assert(is_miss(c, KEY_C, 1000, "v") && is_miss(c, KEY_D, 1000, "v"));
    expect_hit(c, KEY_B, b, 1000, "v", NULL);
    rf_cache_stats st = stats(c);
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
    uint8_t *data = pattern(9, size);
    rf_cache *c = open_ok(dir, 1 << 20);
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
    ck_assert(is_miss(c, KEY_A, size, "v"));
    /* the same with the gap written last: published */
    ck_assert_int_eq(rf_cache_fill_begin(c, KEY_A, size, "v", &w, &e), 0);
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
        ck_assert_int_eq(rf_cache_fill_write(w, parts[i][0], data + parts[i][0], parts[i][1],
                                             &e), 0);
    ck_assert_int_eq(rf_cache_fill_write(w, 6000, data + 6000, 1000, &e), 0);
    ck_assert_int_eq(rf_cache_fill_commit(w, &e), 0);
    expect_hit(c, KEY_A, data, size, "v", NULL);
    /* a write past the end fails the writer, naming the key and offset */
    ck_assert_int_eq(rf_cache_fill_begin(c, KEY_B, size, "v", &w, &e), 0);
    ck_assert_int_eq(rf_cache_fill_write(w, 9990, data, 11, &e), RF_EINVAL);
    ck_assert_msg(strstr(e.msg, KEY_B) && strstr(e.msg, "11 bytes at byte 9990"), "%s", e.msg);
    write_chunks(w, data, size, 4096, 0);
    ck_assert_int_eq(rf_cache_fill_commit(w, &e), RF_CACHE_SKIP);
    ck_assert_msg(strstr(e.msg, "a write failed"), "%s", e.msg);
    rf_cache_stats st = stats(c);
    ck_assert_uint_eq(st.fills, 1);
    ck_assert_uint_eq(st.aborts, 2);
    ck_assert_msg(!strstr(listing(dir), ".part"), "%s", listing(dir));
    rf_cache_close(c);
}
END_TEST

START_TEST(abort_leaves_nothing)
{
    char *dir = rf_test_mkdtemp("cache-abort");
    uint8_t *data = pattern(4, 5000);
    rf_cache *c = open_ok(dir, 1 << 20);
    rf_cache_writer *w, *w2;
    rf_err e = {0};
    ck_assert_int_eq(rf_cache_fill_begin(c, KEY_A, 5000, NULL, &w, &e), 0);
    /* while it fills, the same key is busy for everyone (this handle's threads too) */
    ck_assert_int_eq(rf_cache_fill_begin(c, KEY_A, 5000, NULL, &w2, &e), RF_CACHE_SKIP);
    ck_assert_msg(strstr(e.msg, "another writer is filling it"), "%s", e.msg);
    write_chunks(w, data, 5000, 1000, 0);
    rf_cache_fill_abort(w);
    ck_assert_str_eq(listing(dir), ".lock\n");
    ck_assert(is_miss(c, KEY_A, 5000, NULL));
    ck_assert_int_eq(fill(c, KEY_A, data, 5000, NULL), 0);
    expect_hit(c, KEY_A, data, 5000, NULL, NULL);
    expect_hit(c, KEY_A, data, 5000, "", NULL);
    /* a rank whose lookup missed before another rank published: its fill is not needed */
    ck_assert_int_eq(rf_cache_fill_begin(c, KEY_A, 5000, "", &w2, &e), RF_CACHE_SKIP);
    ck_assert_msg(strstr(e.msg, "already cached by another writer"), "%s", e.msg);
    expect_hit(c, KEY_A, data, 5000, "", NULL);
    ck_assert_uint_eq(stats(c).aborts, 1);
    ck_assert_uint_eq(stats(c).skips, 2);
    rf_cache_close(c);
}
END_TEST

/* The object changed on the server: another ETag or size is a stale miss, and the next fill
 * replaces the old bytes. A hash twin (another key in the sidecar) is a plain miss. */
START_TEST(validator_change_and_twin)
{
    char *dir = rf_test_mkdtemp("cache-valid");
    uint8_t *v1 = pattern(1, 3000), *v2 = pattern(2, 3000);
    rf_cache *c = open_ok(dir, 1 << 20);
    ck_assert_int_eq(fill(c, KEY_A, v1, 3000, "\"e1\" Tue, 01 Dec 2026 10:00:00 GMT"), 0);
    ck_assert(is_miss(c, KEY_A, 3000, "\"e2\" Tue, 01 Dec 2026 11:00:00 GMT"));
    ck_assert(is_miss(c, KEY_A, 2999, "\"e1\" Tue, 01 Dec 2026 10:00:00 GMT"));
    ck_assert_uint_eq(stats(c).stale, 2);
    ck_assert_int_eq(fill(c, KEY_A, v2, 3000, "\"e2\" Tue, 01 Dec 2026 11:00:00 GMT"), 0);
    ck_assert(is_miss(c, KEY_A, 3000, "\"e1\" Tue, 01 Dec 2026 10:00:00 GMT"));
    expect_hit(c, KEY_A, v2, 3000, "\"e2\" Tue, 01 Dec 2026 11:00:00 GMT", NULL);
    ck_assert_uint_eq(stats(c).entries, 1);
    /* KEY_A's sidecar rewritten to name KEY_B: neither is served from it */
    char *meta = entry_path(dir, KEY_A, "meta");
    char text[512];
    int n = snprintf(text, sizeof text, "ringfeed-cache 1\nkey %s\nsize 3000\nvalidator "
                     "\"e2\" Tue, 01 Dec 2026 11:00:00 GMT\n", KEY_B);
    rf_test_write_file(meta, text, (size_t)n);
    ck_assert(is_miss(c, KEY_A, 3000, "\"e2\" Tue, 01 Dec 2026 11:00:00 GMT"));
    ck_assert_uint_eq(stats(c).stale, 3); /* e2 against e1 above was the third; a twin is not */
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
    uint8_t *py = track(rf_test_read_file(path, &size)), *b = pattern(2, 2000);
    rf_cache *c = open_ok(dir, 1 << 20);
    ck_assert_int_eq(fill(c, KEY_A, py, size, "v"), 0);
    ck_assert_int_eq(fill(c, KEY_B, b, 2000, "v"), 0);
    ck_assert_int_eq(fill(c, KEY_C, b, 2000, "v"), 0);
    ck_assert_int_eq(fill(c, KEY_D, b, 2000, "v"), 0);
    char *c_meta = entry_path(dir, KEY_C, "meta"), *d_shard = entry_path(dir, KEY_D, "shard");
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
    c = open_ok(dir, 1 << 20);
    rf_cache_stats st = stats(c);
    ck_assert_uint_eq(st.entries, 2);
    ck_assert_uint_eq(st.bytes_in_use, size + 2000);
    ck_assert_uint_eq(st.cleaned, 5); /* C's entry, D's entry, the three leftovers */
    expect_hit(c, KEY_A, py, size, "v", NULL);
    expect_hit(c, KEY_B, b, 2000, "v", NULL);
    ck_assert(is_miss(c, KEY_C, 2000, "v"));
    ck_assert(is_miss(c, KEY_D, 2000, "v"));
    const char *list = listing(dir);
    ck_assert_msg(strstr(list, "README.txt\n") && !strstr(list, "00000000000000"), "%s", list);
    rf_cache_close(c);
}
END_TEST

/* A writer killed mid-fill leaves its `.part`; the next fill of that key (or the next open)
 * removes it, since no live writer holds it. */
START_TEST(killed_writer_part)
{
    char *dir = rf_test_mkdtemp("cache-killed");
    uint8_t *data = pattern(6, 8000);
    for (int round = 0; round < 2; round++) {
        /* round 0: open's scan finds the `.part`; round 1: the handle is open already and
         * the fill's start finds it */
        rf_cache *c = round ? open_ok(dir, 8000) : NULL;
        pid_t pid = fork();
        if (pid == 0) {
            rf_cache *cw = open_ok(dir, 1 << 20);
            rf_cache_writer *w;
            rf_err e = {0};
            if (rf_cache_fill_begin(cw, KEY_A, 8000, "v", &w, &e) != 0)
                _exit(2);
            write_chunks(w, data, 4000, 1000, 0);
            raise(SIGKILL);
        }
        int status;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        ck_assert_msg(strstr(listing(dir), ".part\n"), "%s", listing(dir));
        if (!c) {
            c = open_ok(dir, 8000);
            ck_assert_str_eq(listing(dir), ".lock\n");
        }
        ck_assert_uint_eq(stats(c).cleaned, round == 0);
        ck_assert(is_miss(c, KEY_A, 8000, "v"));
        ck_assert_int_eq(fill(c, KEY_A, data, 8000, "v"), 0);
        expect_hit(c, KEY_A, data, 8000, "v", NULL);
        ck_assert_uint_eq(stats(c).cleaned, 1);
        ck_assert_uint_eq(stats(c).bytes_in_use, 8000);
        rf_cache_close(c);
        if (round == 0)
            ck_assert_int_eq(rf_test_shell("rm -f '%s'/*.shard '%s'/*.meta", dir, dir), 0);
    }
}
END_TEST

/* ---- several processes -------------------------------------------------------------------- */

/* Block until the parent writes a byte to the pipe. */
static void wait_go(int fd)
{
    char x;
    ck_assert_int_eq(read(fd, &x, 1), 1);
}

/* A rank: look up, fill when this rank wins (slowly, backwards), else wait for the winner's
 * shard; exits 10 + filled when it read the right bytes. */
static void rank_main(const char *dir, int go, const uint8_t *data, size_t size)
{
    rf_cache *c = open_ok(dir, 1 << 20);
    wait_go(go);
    int fd = -1, filled = 0;
    rf_err e = {0};
    if (rf_cache_get(c, KEY_A, size, "v", &fd, &e) == 0) {
        rf_cache_writer *w;
        if (rf_cache_fill_begin(c, KEY_A, size, "v", &w, &e) == 0) {
            for (size_t off = size; off > 0;) {
                size_t n = RF_MIN((size_t)4096, off);
                off -= n;
                ck_assert_int_eq(rf_cache_fill_write(w, off, data + off, n, &e), 0);
                usleep(1000);
            }
            filled = rf_cache_fill_commit(w, &e) == 0;
        }
        for (int i = 0; i < 2000 && rf_cache_get(c, KEY_A, size, "v", &fd, &e) == 0; i++)
            usleep(5000);
    }
    expect_hit(c, KEY_A, data, size, "v", NULL);
    rf_cache_release(c, fd);
    rf_cache_close(c);
    _exit(10 + filled);
}

START_TEST(two_processes_fill_one_key)
{
    char *dir = rf_test_mkdtemp("cache-ranks");
    const size_t size = 200000;
    uint8_t *data = pattern(8, size);
    for (int round = 0; round < 3; round++) {
        int go[2];
        ck_assert_int_eq(pipe(go), 0);
        pid_t pids[2];
        for (int r = 0; r < 2; r++)
            if ((pids[r] = fork()) == 0)
                rank_main(dir, go[0], data, size);
        ck_assert_int_eq(write(go[1], "gg", 2), 2);
        int fills = 0;
        for (int r = 0; r < 2; r++) {
            int status;
            ck_assert_int_eq(waitpid(pids[r], &status, 0), pids[r]);
            ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) >= 10, "rank %d: %d", r,
                          status);
            fills += WEXITSTATUS(status) - 10;
        }
        ck_assert_int_eq(fills, 1); /* one fill won; both read the right bytes */
        close(go[0]);
        close(go[1]);
        ck_assert_int_eq(rf_test_shell("rm -f '%s'/*.shard '%s'/*.meta", dir, dir), 0);
    }
}
END_TEST

/* A reader in another process holds the least recently used shard: eviction passes over it
 * (its bytes stay readable and whole) and refuses a fill when only it could make room. */
START_TEST(eviction_spares_other_process_reader)
{
    char *dir = rf_test_mkdtemp("cache-evict");
    uint8_t *a = pattern(1, 1000), *b = pattern(2, 1000), *cc = pattern(3, 1000),
            *big = pattern(4, 1500);
    rf_cache *c = open_ok(dir, 2000);
    ck_assert_int_eq(fill(c, KEY_A, a, 1000, "v"), 0);
    int held[2], go[2];
    ck_assert_int_eq(pipe(held), 0);
    ck_assert_int_eq(pipe(go), 0);
    pid_t pid = fork();
    if (pid == 0) {
        rf_cache *rc = open_ok(dir, 2000);
        int fd;
        expect_hit(rc, KEY_A, a, 1000, "v", &fd);
        ck_assert_int_eq(write(held[1], "h", 1), 1);
        wait_go(go[0]);
        uint8_t got[1000];
        size_t n;
        int same = rf_pread_full(fd, got, 1000, 0, &n) == 0 && n == 1000 && !memcmp(got, a, n);
        rf_cache_release(rc, fd);
        rf_cache_close(rc);
        _exit(same ? 0 : 3);
    }
    wait_go(held[0]);
    usleep(20000);
    fill_then_age(c, KEY_B, b, 1000);
    ck_assert_int_eq(fill(c, KEY_C, cc, 1000, "v"), 0); /* A is older, but held: B goes */
    ck_assert(is_miss(c, KEY_B, 1000, "v"));
    rf_cache_writer *w;
    rf_err e = {0};
    ck_assert_int_eq(rf_cache_fill_begin(c, KEY_D, 1500, "v", &w, &e), RF_CACHE_SKIP);
    ck_assert_msg(strstr(e.msg, "1000 of the budget's 2000 bytes are shards in use"), "%s",
                  e.msg);
    ck_assert_uint_eq(stats(c).evictions, 2); /* B, then C for the refused fill */
    ck_assert_int_eq(write(go[1], "g", 1), 1);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_int_eq(WEXITSTATUS(status), 0);
    ck_assert_int_eq(fill(c, KEY_D, big, 1500, "v"), 0); /* released: A goes now */
    ck_assert(is_miss(c, KEY_A, 1000, "v"));
    ck_assert_uint_eq(stats(c).bytes_in_use, 1500);
    rf_cache_close(c);
}
END_TEST

/* A fill in progress holds its shard's full size against the budget for every handle (its
 * `.part` is reserved at the start), so two ranks' fills never overrun it together. */
START_TEST(budget_counts_fills_in_progress)
{
    char *dir = rf_test_mkdtemp("cache-inflight");
    uint8_t *a = pattern(1, 1500), *b = pattern(2, 1000);
    rf_cache *c1 = open_ok(dir, 2000), *c2 = open_ok(dir, 2000);
    rf_cache_writer *w1, *w2;
    rf_err e = {0};
    ck_assert_int_eq(rf_cache_fill_begin(c1, KEY_A, 1500, "v", &w1, &e), 0);
    ck_assert_int_eq(rf_cache_fill_begin(c2, KEY_B, 1000, "v", &w2, &e), RF_CACHE_SKIP);
    ck_assert_msg(strstr(e.msg, "no room for 1000 bytes: 0 of the budget's 2000 bytes are "
                         "shards in use and 1500 are fills in progress"), "%s", e.msg);
    write_chunks(w1, a, 1500, 700, 1);
    ck_assert_int_eq(rf_cache_fill_commit(w1, &e), 0);
    ck_assert_int_eq(fill(c2, KEY_B, b, 1000, "v"), 0); /* A, published and unused, goes */
    ck_assert(is_miss(c1, KEY_A, 1500, "v"));
    expect_hit(c1, KEY_B, b, 1000, "v", NULL);
    ck_assert_uint_eq(stats(c2).evictions, 1);
    rf_cache_close(c1);
    rf_cache_close(c2);
}
END_TEST

/* The directory's lock held by a stuck process: calls give up after RF_CACHE_LOCK_WAIT_MS and
 * answer "not cached" with the reason, never an error. */
START_TEST(lock_held_too_long)
{
    char *dir = rf_test_mkdtemp("cache-lock");
    rf_cache *c = open_ok(dir, 1 << 20);
    char path[4200];
    snprintf(path, sizeof path, "%s/.lock", dir);
    int fd = open(path, O_RDWR);
    ck_assert_int_eq(flock(fd, LOCK_EX), 0); /* another description: as another process */
    rf_cache_writer *w;
    rf_err e = {0};
    uint64_t t0 = rf_now_ns();
    ck_assert_int_eq(rf_cache_fill_begin(c, KEY_A, 10, NULL, &w, &e), RF_CACHE_SKIP);
    ck_assert_uint_ge(rf_now_ns() - t0, (uint64_t)RF_CACHE_LOCK_WAIT_MS * 1000000);
    ck_assert_msg(strstr(e.msg, "/.lock: held by another process for over 10000 ms"), "%s",
                  e.msg);
    close(fd);
    ck_assert_uint_eq(stats(c).skips, 1);
    rf_cache_close(c);
}
END_TEST

/* ---- full disks --------------------------------------------------------------------------- */

static void expect_off(rf_cache *c, const char *what)
{
    rf_cache_stats st = stats(c);
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
    uint8_t *a = pattern(1, 100000);
    rf_cache *c = open_ok(dir, 1 << 20);
    ck_assert_int_eq(fill(c, KEY_A, a, 1000, "v"), 0);
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
    expect_hit(c, KEY_A, a, 1000, "v", NULL); /* published shards are still served */
    rf_cache_close(c);
    /* the same limit at a fill's start: fallocate */
    c = open_ok(dir, 1 << 20);
    ck_assert_int_eq(rf_cache_fill_begin(c, KEY_C, 60000, "v", &w, &e), RF_CACHE_SKIP);
    ck_assert_msg(strstr(e.msg, ".part: reserving 60000 bytes at byte 0 failed: File too "
                         "large"), "%s", e.msg);
    expect_off(c, "reserving 60000 bytes at byte 0 failed: File too large");
    ck_assert_int_eq(rf_test_limit_file_size(0), 0);
    ck_assert_msg(!strstr(listing(dir), ".part"), "%s", listing(dir));
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
    uint8_t *a = pattern(1, 300000);
    rf_cache *c = open_ok(dir, 1 << 30);
    ck_assert_int_eq(fill(c, KEY_A, a, 100000, "v"), 0);
    rf_cache_writer *w;
    rf_err e = {0};
    ck_assert_int_eq(rf_cache_fill_begin(c, KEY_B, 200000, "v", &w, &e), RF_CACHE_SKIP);
    expect_off(c, "reserving 200000 bytes at byte 0 failed: No space left on device");
    expect_hit(c, KEY_A, a, 100000, "v", NULL);
    ck_assert_uint_eq(stats(c).bytes_in_use, 100000);
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
        uint32_t k = (i * 7 + t->id * 3) % T_KEYS;
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
    rf_cache *c = open_ok(dir, 3 * T_SIZE); /* half the keys fit: eviction all the time */
    tctx t[4];
    pthread_t th[4];
    for (uint32_t i = 0; i < 4; i++) {
        t[i] = (tctx){.c = c, .id = i};
        for (uint32_t k = 0; k < T_KEYS; k++)
            t[i].data[k] = pattern(100 + k, T_SIZE);
        ck_assert_int_eq(pthread_create(&th[i], NULL, thread_main, &t[i]), 0);
    }
    uint32_t hits = 0;
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(th[i], &r);
        ck_assert_ptr_null(r);
        hits += t[i].hits;
    }
    rf_cache_stats st = stats(c);
    ck_assert_uint_eq(st.hits + st.misses, 4 * T_ITERS);
    ck_assert_uint_eq(st.hits, hits);
    ck_assert_uint_gt(st.hits, 0);
    ck_assert_uint_le(st.bytes_in_use, 3 * T_SIZE);
    ck_assert_uint_eq(st.bytes_written, (st.fills + st.aborts) * T_SIZE);
    ck_assert_msg(!strstr(listing(dir), ".part"), "%s", listing(dir));
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
    uint8_t *data = pattern(12, 64000);
    rf_cache *c = open_ok(dir, 1 << 20);
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
    expect_hit(c, KEY_A, data, 64000, "v", NULL);
    rf_cache_close(c);
}
END_TEST

static Suite *shard_cache_suite(void)
{
    Suite *s = suite_create("shard_cache");
    TCase *tc = tcase_create("shard_cache");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, NULL, free_tracked);
    tcase_add_test(tc, hit_miss_bypass_gnu_tar_shard);
    tcase_add_test(tc, bad_arguments);
    tcase_add_test(tc, lru_order_and_budget);
    tcase_add_test(tc, out_of_order_fill_and_coverage);
    tcase_add_test(tc, abort_leaves_nothing);
    tcase_add_test(tc, validator_change_and_twin);
    tcase_add_test(tc, reopen_cleans_and_keeps);
    tcase_add_test(tc, killed_writer_part);
    tcase_add_test(tc, two_processes_fill_one_key);
    tcase_add_test(tc, eviction_spares_other_process_reader);
    tcase_add_test(tc, budget_counts_fills_in_progress);
    tcase_add_test(tc, lock_held_too_long);
    tcase_add_test(tc, full_disk_file_size_limit);
    tcase_add_test(tc, full_disk_enospc);
    tcase_add_test(tc, threads_share_one_cache);
    tcase_add_test(tc, one_writer_many_threads);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return rf_test_run_suite_mode(shard_cache_suite(), CK_ENV);
}
