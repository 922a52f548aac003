/* test_remote_cache.c — the local shard cache (rf_config.cache_dir) of remote shards, against
 * the real servers (ctest `remote_cache`: tests/servers/servers.py around this suite, over the
 * data `test_remote_cache --make-data DIR` wrote first; the helpers are test_remote.c's, in
 * remoteutil.c).
 *
 * What must hold: a first loader misses and fills every shard it reads (one extra GET each),
 * a second loader on the same directory hits and the fault proxy's log shows no sample GET for
 * it; batches byte-equal with the uncached and the local runs (generator shards, GNU tar,
 * Python tarfile, webdataset TarWriter); later epochs of one loader read the filled copy; a
 * budget smaller than a shard bypasses; a full disk turns fills off without failing the run; a
 * changed object (another ETag) is a stale miss, never
 * old bytes; two ranks sharing a directory at once fill each shard once and both end up
 * reading the copies; a directory that cannot be made fails create naming it; no credential in
 * the cache's file names or sidecars. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pipeline/testing.h"
#include "remoteutil.h"
#include "testutil.h"

static const char *data; /* the served root */

/* The cache's counters of a run, checked in one line each. */
#define CACHE_IS(st, hits_, misses_, fills_)                                                    \
    ck_assert_msg((st).shard_cache_hits == (hits_) && (st).shard_cache_misses == (misses_) &&  \
                      (st).shard_cache_fills == (fills_),                                       \
                  "hits %llu misses %llu fills %llu (%s)",                                      \
                  (unsigned long long)(st).shard_cache_hits,                                    \
                  (unsigned long long)(st).shard_cache_misses,                                  \
                  (unsigned long long)(st).shard_cache_fills, (st).shard_cache_why)

/* First loader misses and fills, the second hits with no sample GET in the proxy's log; both
 * equal the uncached remote run and the local run. */
START_TEST(second_loader_hits_without_sample_gets)
{
    char local[1024], url[1024];
    snprintf(local, sizeof local, "%s/gen/shard-{0000..0001}.tar", data);
    snprintf(url, sizeof url, "%s/gen/shard-{0000..0001}.tar", rt_env("RF_TEST_FAULT"));
    const char *dir = rf_test_mkdtemp("rcache");
    static run lr, ur, fr, hr;
    opts plain = {.io_threads = 2, .epochs = 1};
    opts cached = {.io_threads = 2, .epochs = 1, .cache_dir = dir, .cache_bytes = 64 << 20,
                   .wait_fills = 2};
    rt_collect(local, &plain, &lr);
    rt_reset_log();
    rt_collect(url, &plain, &ur);
    /* the check sees sample reads */
    ck_assert_int_eq(rt_sample_gets(data, "/gen/", ur.st.remote_create_requests), 2 * N_GEN);
    ck_assert_uint_eq(ur.st.shard_cache_on, 0);
    rt_collect(url, &cached, &fr);
    CACHE_IS(fr.st, 0, 2, 2);
    ck_assert_uint_eq(fr.st.shard_cache_on, 1);
    ck_assert_uint_eq(fr.st.shard_cache_fill_requests, 2);
    ck_assert_uint_gt(fr.st.shard_cache_bytes_written, 0);
    rt_reset_log();
    cached.wait_fills = 0;
    rt_collect(url, &cached, &hr);
    CACHE_IS(hr.st, 2, 0, 0);
    ck_assert_int_eq(rt_sample_gets(data, "/gen/", hr.st.remote_create_requests), 0);
    ck_assert_uint_eq(hr.st.shard_cache_fill_requests, 0);
    rt_same_run(&ur, &lr, "uncached");
    rt_same_run(&fr, &lr, "filling");
    rt_same_run(&hr, &lr, "cached");
    free(lr.px), free(ur.px), free(fr.px), free(hr.px);
}
END_TEST

/* One loader over three epochs: once the fills are in, its reads go to the local copies. The
 * first batch is read from the server (fills start after it is handed out, checked), the fills may end during the
 * first epoch, and each epoch end waits for them: at most one epoch and the prefetched batches
 * (depth 1) of sample GETs, where an uncached run makes three epochs' worth. */
START_TEST(later_epochs_read_the_copy)
{
    char local[1024], url[1024];
    snprintf(local, sizeof local, "%s/gen/shard-{0000..0001}.tar", data);
    snprintf(url, sizeof url, "%s/gen/shard-{0000..0001}.tar", rt_env("RF_TEST_FAULT"));
    static run lr, rr;
    opts o = {.epochs = 3, .depth = 1};
    rt_collect(local, &o, &lr);
    o.cache_dir = rf_test_mkdtemp("rcache");
    o.cache_bytes = 64 << 20;
    rt_reset_log();
    rf_loader *ld = rt_create_url(url, &o);
    memset(&rr, 0, sizeof rr);
    /* the prefetched batch's reads queued the fills of the shards they read, but no fill
     * starts before the first batch is handed out */
    usleep(300000);
    rf_stats_init(&rr.st);
    rf_loader_stats(ld, &rr.st);
    ck_assert_uint_eq(rr.st.shard_cache_fill_requests, 0);
    rf_batch *b;
    int rc;
    while ((rc = rf_loader_next(ld, &b)) == 0 || rc == RF_EPOCH_END) {
        if (rc) { /* an epoch ended: every shard was read, so both fills are queued */
            rt_wait_fills(ld, 2, &rr.st);
            continue;
        }
        rt_take(ld, b, &rr);
    }
    ck_assert_int_eq(rc, RF_DONE);
    rt_wait_fills(ld, 2, &rr.st);
    rf_loader_destroy(ld);
    CACHE_IS(rr.st, 0, 2, 2);
    long gets = rt_sample_gets(data, "/gen/", rr.st.remote_create_requests);
    ck_assert_msg(gets >= 5 && gets <= 2 * N_GEN + 2 * 5, "%ld sample GETs", gets);
    rt_same_run(&rr, &lr, url);
    free(lr.px), free(rr.px);
}
END_TEST

static const char *const users[] = {"users/gnu.tar", "users/tarfile.tar", "users/wds.tar"};

/* Users' shards (GNU tar, Python tarfile, webdataset's TarWriter, no index: create scans
 * them) filled and then served equal the local run. */
START_TEST(users_shards_cached_equal_local)
{
    char local[1024], url[1024];
    snprintf(local, sizeof local, "%s/%s", data, users[_i]);
    if (access(local, R_OK) != 0)
        return; /* webdataset missing: make-data said so */
    snprintf(url, sizeof url, "%s/%s", rt_env("RF_TEST_HTTP"), users[_i]);
    static run lr, fr, hr;
    opts o = {.epochs = 2, .cache_dir = rf_test_mkdtemp("rcache"), .cache_bytes = 64 << 20,
              .wait_fills = 1};
    rt_collect(local, &(opts){.epochs = 2}, &lr);
    rt_collect(url, &o, &fr);
    CACHE_IS(fr.st, 0, 1, 1);
    o.wait_fills = 0;
    rt_collect(url, &o, &hr);
    CACHE_IS(hr.st, 1, 0, 0);
    ck_assert_uint_eq(hr.st.bytes_read, lr.st.bytes_read);
    rt_same_run(&fr, &lr, url);
    rt_same_run(&hr, &lr, url);
    free(lr.px), free(fr.px), free(hr.px);
}
END_TEST

/* rf_test_poll_stats' conditions: both shards' fills bypassed; the cache turned off. */
static int two_bypasses(const rf_stats *st, const void *ctx)
{
    (void)ctx;
    return st->shard_cache_bypasses >= 2;
}

static int cache_went_off(const rf_stats *st, const void *ctx)
{
    (void)ctx;
    return st->shard_cache_on == 2;
}

/* A budget smaller than one shard: every fill is a counted bypass, nothing is written, the
 * run is the same. */
START_TEST(budget_smaller_than_a_shard_bypasses)
{
    char local[1024], url[1024];
    snprintf(local, sizeof local, "%s/gen/shard-{0000..0001}.tar", data);
    snprintf(url, sizeof url, "%s/gen/shard-{0000..0001}.tar", rt_env("RF_TEST_HTTP"));
    const char *dir = rf_test_mkdtemp("rcache");
    static run lr, rr;
    rt_collect(local, &(opts){.epochs = 2}, &lr);
    opts o = {.epochs = 2, .cache_dir = dir, .cache_bytes = 4096};
    rf_loader *ld = rt_create_url(url, &o);
    rf_test_drain(ld);
    rf_test_poll_stats(ld, &rr.st, two_bypasses, NULL);
    rf_loader_destroy(ld);
    ck_assert_uint_eq(rr.st.shard_cache_bypasses, 2);
    CACHE_IS(rr.st, 0, 2, 0);
    ck_assert_uint_eq(rr.st.shard_cache_fill_requests, 0);
    ck_assert_msg(strstr(rr.st.shard_cache_why, "budget"), "%s", rr.st.shard_cache_why);
    ck_assert_int_eq(rf_test_shell("! ls %s | grep -q shard", dir), 0);
    static run br;
    rt_collect(url, &o, &br);
    rt_same_run(&br, &lr, "bypassed");
    free(lr.px), free(br.px);
}
END_TEST

/* A full disk (EFBIG from RLIMIT_FSIZE, as shard_cache's tests make it) at the fills never
 * fails the run: fills go off with the file, offset and error in shard_cache_why, the shards
 * stay remote, the batches are the local run's and no file of a fill is left. */
START_TEST(full_disk_leaves_the_shards_remote)
{
    char local[1024], url[1024];
    snprintf(local, sizeof local, "%s/gen/shard-{0000..0001}.tar", data);
    snprintf(url, sizeof url, "%s/gen/shard-{0000..0001}.tar", rt_env("RF_TEST_HTTP"));
    const char *dir = rf_test_mkdtemp("rcache");
    static run lr, rr;
    opts o = {.epochs = 2};
    rt_collect(local, &o, &lr);
    o.cache_dir = dir;
    o.cache_bytes = 64 << 20;
    ck_assert_int_eq(rf_test_limit_file_size(4096), 0);
    rf_loader *ld = rt_create_url(url, &o);
    rf_batch *b;
    int rc;
    while ((rc = rf_loader_next(ld, &b)) == 0 || rc == RF_EPOCH_END)
        if (rc == 0)
            rt_take(ld, b, &rr);
    ck_assert_int_eq(rc, RF_DONE);
    rf_test_poll_stats(ld, &rr.st, cache_went_off, NULL);
    rf_loader_destroy(ld);
    ck_assert_int_eq(rf_test_limit_file_size(0), 0);
    ck_assert_uint_eq(rr.st.shard_cache_on, 2);
    CACHE_IS(rr.st, 0, 2, 0);
    ck_assert_msg(strstr(rr.st.shard_cache_why, ".part: reserving ") &&
                  strstr(rr.st.shard_cache_why, "at byte 0 failed: File too large"), "%s",
                  rr.st.shard_cache_why);
    ck_assert_int_eq(rf_test_shell("! ls %s | grep -q -e part -e shard", dir), 0);
    rt_same_run(&rr, &lr, "full disk");
    free(lr.px), free(rr.px);
}
END_TEST

/* An object replaced on the server after it was cached, by one of the same size whose first
 * label differs (only the ETag tells them apart): the next loader's lookup is a stale miss and
 * its batches are the new object's, never the cached bytes. */
START_TEST(changed_object_is_a_stale_miss)
{
    char dir[1024], a[1200], b[1200], dst[1200], url[1024];
    snprintf(dir, sizeof dir, "%s/changing", data);
    snprintf(a, sizeof a, "%s/gen/shard-0000.tar", data);
    snprintf(b, sizeof b, "%s/relabelled.tar", dir);
    snprintf(dst, sizeof dst, "%s/shard.tar", dir);
    ck_assert_int_eq(rf_test_shell(
        "mkdir -p %s && python3 -c '\n"
        "import sys, tarfile\n"
        "src, out = sys.argv[1:]\n"
        "m = next(m for m in tarfile.open(src) if m.name.endswith(\".cls\"))\n"
        "raw = bytearray(open(src, \"rb\").read())\n"
        "raw[m.offset_data] = ord(\"9\") if raw[m.offset_data] != ord(\"9\") else ord(\"8\")\n"
        "open(out, \"wb\").write(raw)' %s %s", dir, a, b), 0);
    ck_assert_int_eq(rf_test_shell("mkdir -p %s && cp %s %s", dir, a, dst), 0);
    snprintf(url, sizeof url, "%s/changing/shard.tar", rt_env("RF_TEST_HTTP"));
    const char *cdir = rf_test_mkdtemp("rcache");
    static run lr, rr;
    opts o = {.cache_dir = cdir, .cache_bytes = 64 << 20, .wait_fills = 1};
    rt_collect(url, &o, &rr);
    CACHE_IS(rr.st, 0, 1, 1);
    free(rr.px);
    /* the other object, its mtime later so that nginx's ETag (mtime-size) changes */
    ck_assert_int_eq(rf_test_shell("cp %s %s.new && touch -d '+2 seconds' %s.new && mv %s.new %s",
                                   b, dst, dst, dst, dst), 0);
    ck_assert_int_eq(rf_test_shell("! cmp -s %s %s && test $(stat -c %%s %s) = $(stat -c %%s %s)",
                                   a, b, a, b), 0);
    rt_collect(b, &(opts){0}, &lr);
    rt_collect(url, &o, &rr);
    ck_assert_uint_eq(rr.st.shard_cache_stale, 1);
    CACHE_IS(rr.st, 0, 1, 1);
    rt_same_run(&rr, &lr, "replaced object");
    free(lr.px), free(rr.px);
}
END_TEST

/* Two ranks sharing one directory at once, consumed in turn: each shard is filled once, and
 * the rank that found the other's fill in progress reads the copy once it is published. */
START_TEST(two_ranks_share_a_directory)
{
    char local[1024], url[1024];
    snprintf(local, sizeof local, "%s/gen/shard-{0000..0001}.tar", data);
    snprintf(url, sizeof url, "%s/gen/shard-{0000..0001}.tar", rt_env("RF_TEST_HTTP"));
    const char *dir = rf_test_mkdtemp("rcache");
    rf_loader *ld[2];
    static run lr[2];
    for (uint32_t k = 0; k < 2; k++) {
        opts o = {.epochs = 3, .rank = k, .world = 2, .cache_dir = dir, .cache_bytes = 64 << 20};
        rt_collect(local, &(opts){.epochs = 3, .rank = k, .world = 2}, &lr[k]);
        ld[k] = rt_create_url(url, &o);
    }
    static run rr[2];
    memset(rr, 0, sizeof rr);
    for (int live = 2; live;) {
        live = 0;
        for (uint32_t k = 0; k < 2; k++) {
            rf_batch *b;
            int rc = rf_loader_next(ld[k], &b);
            live += rc == 0 || rc == RF_EPOCH_END;
            if (rc != 0)
                continue;
            rt_take(ld[k], b, &rr[k]);
        }
    }
    /* every shard ends up local on both ranks: filled by one, found by the other */
    for (int i = 0; i < 3000; i++) {
        for (uint32_t k = 0; k < 2; k++) {
            rf_stats_init(&rr[k].st);
            rf_loader_stats(ld[k], &rr[k].st);
        }
        if (rr[0].st.shard_cache_fills + rr[0].st.shard_cache_hits == 2 &&
            rr[1].st.shard_cache_fills + rr[1].st.shard_cache_hits == 2)
            break;
        usleep(10000);
    }
    for (uint32_t k = 0; k < 2; k++) {
        ck_assert_msg(rr[k].st.shard_cache_fills + rr[k].st.shard_cache_hits == 2,
                      "rank %u: fills %llu hits %llu: %s", k,
                      (unsigned long long)rr[k].st.shard_cache_fills,
                      (unsigned long long)rr[k].st.shard_cache_hits, rr[k].st.shard_cache_why);
        rf_loader_destroy(ld[k]);
        rt_same_run(&rr[k], &lr[k], "rank");
        free(rr[k].px), free(lr[k].px);
    }
    ck_assert_uint_eq(rr[0].st.shard_cache_fills + rr[1].st.shard_cache_fills, 2);
    ck_assert_int_eq(rf_test_shell("test $(ls %s | grep -c '\\.shard$') = 2", dir), 0);
}
END_TEST

/* Settings and directories the cache refuses, each with its message; local shards ignore
 * the cache and say why. */
START_TEST(refusals_name_the_setting)
{
    char url[1024], local[1024], err[RF_ERRMSG_MAX], bad[1200];
    snprintf(url, sizeof url, "%s/gen/shard-0000.tar", rt_env("RF_TEST_HTTP"));
    snprintf(local, sizeof local, "%s/gen/shard-0000.tar", data);
    snprintf(bad, sizeof bad, "%s/sub", local); /* under a regular file: cannot be made */
    const char *pats[1] = {url};
    struct { const char *dir; uint64_t bytes; int code; const char *words[2]; } cases[] = {
        {bad, 1 << 20, 0, {bad, NULL}},
        {rf_test_mkdtemp("rcache"), 0, RF_EINVAL, {"cache_bytes must be > 0", NULL}},
        {"", 1 << 20, RF_EINVAL, {"cache_dir must be a directory path", NULL}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        opts o = {.cache_dir = cases[i].dir, .cache_bytes = cases[i].bytes};
        rf_config c = rt_config(pats, 1, &o);
        int rc;
        rf_loader *ld = rt_create(&c, &o, err, sizeof err, &rc);
        rf_loader_destroy(ld);
        ck_assert_msg(rc != 0 && (!cases[i].code || rc == cases[i].code), "%d %s", rc, err);
        for (const char *const *w = cases[i].words; *w; w++)
            ck_assert_msg(strstr(err, *w), "'%s' not in \"%s\"", *w, err);
    }
    static run r;
    rt_collect(local, &(opts){.cache_dir = rf_test_mkdtemp("rcache"), .cache_bytes = 1 << 20},
               &r);
    ck_assert_uint_eq(r.st.shard_cache_on, 0);
    ck_assert_msg(strstr(r.st.shard_cache_why, "local files"), "%s", r.st.shard_cache_why);
    free(r.px);
}
END_TEST

/* A URL with a password and a signed query: the cache's file names and sidecars hold the URL
 * without either (the key is scheme, host and path). */
START_TEST(no_credentials_in_the_directory)
{
    const char *h = rt_env("RF_TEST_HTTP") + strlen("http://");
    char url[1024];
    snprintf(url, sizeof url, "http://user:" SECRET_PW "@%s/gen/shard-0000.tar"
             "?X-Amz-Signature=" SECRET_PW, h);
    const char *dir = rf_test_mkdtemp("rcache");
    static run r;
    rt_collect(url, &(opts){.cache_dir = dir, .cache_bytes = 64 << 20, .wait_fills = 1}, &r);
    CACHE_IS(r.st, 0, 1, 1);
    free(r.px);
    ck_assert_int_eq(rf_test_shell("! ls -a %s | grep -e '" SECRET_PW "' -e Signature -e user",
                                   dir), 0);
    ck_assert_int_eq(rf_test_shell("! grep -r -e '" SECRET_PW "' -e Signature -e user: %s", dir),
                     0);
    ck_assert_int_eq(rf_test_shell("grep -q 'key http://%s/gen/shard-0000.tar$' %s/*.meta", h,
                                   dir), 0);
}
END_TEST

/* What create reads of a remote shard (docs/remote.md): with an index, its size, the index and
 * a few small header reads, not the shard; from the shard cache, nothing of the shard but its
 * open's byte, with or without an index (the index checks and the scan read the copy). */
static uint64_t file_size(const char *rel)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", data, rel);
    FILE *f = fopen(p, "rb");
    ck_assert_msg(f != NULL, "%s", p);
    fseek(f, 0, SEEK_END);
    uint64_t n = (uint64_t)ftell(f);
    fclose(f);
    return n;
}

START_TEST(create_reads_headers_then_nothing_from_the_cache)
{
    static const char *const rels[] = {"big/shard-0000.tar", "bigscan/shard-0000.tar"};
    const char *dir = rf_test_mkdtemp("rcache-create");
    for (int k = 0; k < 2; k++) {
        char url[1024];
        snprintf(url, sizeof url, "%s/%s", rt_env("RF_TEST_FAULT"), rels[k]);
        uint64_t size = file_size(rels[k]), idx = k == 0 ? file_size("big/shard-0000.idx") : 0;
        static run r, f, h;
        opts plain = {.epochs = 1};
        rt_collect(url, &plain, &r);
        if (k == 0) /* the open's byte, the index, a few header reads */
            ck_assert_msg(r.st.remote_create_bytes > idx &&
                              r.st.remote_create_bytes < idx + 1 + size / 4,
                          "create read %llu bytes of a %llu-byte shard (index %llu)",
                          (unsigned long long)r.st.remote_create_bytes,
                          (unsigned long long)size, (unsigned long long)idx);
        opts cached = {.epochs = 1, .cache_dir = dir, .cache_bytes = 64 << 20, .wait_fills = 1};
        rt_collect(url, &cached, &f);
        CACHE_IS(f.st, 0, 1, 1);
        cached.wait_fills = 0;
        rt_collect(url, &cached, &h);
        CACHE_IS(h.st, 1, 0, 0);
        /* the open and the index fetch (a 404's page without one): no byte of the shard */
        ck_assert_uint_eq(h.st.remote_create_requests, 2);
        if (k == 0)
            ck_assert_uint_eq(h.st.remote_create_bytes, 1 + idx);
        else
            ck_assert_uint_lt(h.st.remote_create_bytes, 1024);
        rt_same_run(&h, &r, url);
        free(r.px), free(f.px), free(h.px);
    }
}
END_TEST

/* A byte of a cached copy changed on the disk after its fill (a failing sector, another
 * program): the read of its block fails its checksum, so the copy is dropped (counted in
 * shard_cache_corrupt, with the reason), the read and the shard's later ones go to the server,
 * and the batches are the local files' (the changed byte was served as a wrong image). The
 * shard is filled again and the next loader hits it. */
START_TEST(changed_byte_in_a_copy_is_refetched)
{
    char local[1024], url[1024];
    snprintf(local, sizeof local, "%s/big/shard-0000.tar", data);
    snprintf(url, sizeof url, "%s/big/shard-0000.tar", rt_env("RF_TEST_FAULT"));
    const char *dir = rf_test_mkdtemp("rcache-flip");
    static run lr, fr, br, hr;
    opts plain = {.epochs = 1};
    opts cached = {.epochs = 1, .cache_dir = dir, .cache_bytes = 64 << 20, .wait_fills = 1};
    rt_collect(local, &plain, &lr);
    rt_collect(url, &cached, &fr);
    CACHE_IS(fr.st, 0, 1, 1);
    /* the one copy in the directory: a byte in the middle of the shard, XOR 0x40 */
    ck_assert_int_eq(rf_test_shell("python3 -c 'import glob, sys\n"
                                   "[p] = glob.glob(sys.argv[1] + \"/*.shard\")\n"
                                   "f = open(p, \"r+b\"); f.seek(%llu); b = f.read(1)\n"
                                   "f.seek(%llu); f.write(bytes([b[0] ^ 0x40]))' %s",
                                   (unsigned long long)file_size("big/shard-0000.tar") / 2,
                                   (unsigned long long)file_size("big/shard-0000.tar") / 2,
                                   dir), 0);
    cached.wait_fills = 1; /* the dropped shard is filled again */
    rt_collect(url, &cached, &br);
    ck_assert_uint_eq(br.st.shard_cache_corrupt, 1);
    ck_assert_msg(strstr(br.st.shard_cache_why, "does not match its checksum"), "%s",
                  br.st.shard_cache_why);
    ck_assert_uint_eq(br.st.shard_cache_fills, 1);
    rt_same_run(&br, &lr, "a copy with a changed byte");
    cached.wait_fills = 0;
    rt_collect(url, &cached, &hr);
    CACHE_IS(hr.st, 1, 0, 0);
    ck_assert_uint_eq(hr.st.shard_cache_corrupt, 0);
    rt_same_run(&hr, &lr, "the copy filled again");
    free(lr.px), free(fr.px), free(br.px), free(hr.px);
}
END_TEST

static int make_data(const char *dir)
{
    char p[1024];
    const char *labels[10] = {"0", "1", "2\n", "3", " 4", "5", "6", "7", "8", "9"};
    int rc = rf_test_make_shards((snprintf(p, sizeof p, "%s/gen", dir), p), 2, N_GEN, 10, 1,
                                 1, 96);
    rc |= rf_test_make_shards((snprintf(p, sizeof p, "%s/big", dir), p), 1, 64, 10, 5, 1, 256);
    rc |= rf_test_make_shards((snprintf(p, sizeof p, "%s/bigscan", dir), p), 1, 64, 10, 5, 0,
                              256);
    rc |= rf_test_shell("mkdir -p %s/users/gnu", dir);
    snprintf(p, sizeof p, "%s/users/gnu", dir);
    free(rf_test_make_label_shard(p, labels, 10));
    rc |= rf_test_shell("mv %s/users/gnu/shard-0000.tar %s/users/gnu.tar && python3 "
                        "%s/tests/remote_users.py %s/users/gnu.tar %s/users", dir, dir,
                        RF_SOURCE_DIR, dir, dir);
    return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
    TCase *tc;
    int rc = rt_main_args(argc, argv, "remote_cache", make_data, &data, &tc);
    if (rc >= 0)
        return rc;
    tcase_add_test(tc, second_loader_hits_without_sample_gets);
    tcase_add_test(tc, later_epochs_read_the_copy);
    tcase_add_loop_test(tc, users_shards_cached_equal_local, 0, sizeof users / sizeof users[0]);
    tcase_add_test(tc, budget_smaller_than_a_shard_bypasses);
    tcase_add_test(tc, full_disk_leaves_the_shards_remote);
    tcase_add_test(tc, changed_object_is_a_stale_miss);
    tcase_add_test(tc, two_ranks_share_a_directory);
    tcase_add_test(tc, refusals_name_the_setting);
    tcase_add_test(tc, no_credentials_in_the_directory);
    tcase_add_test(tc, create_reads_headers_then_nothing_from_the_cache);
    tcase_add_test(tc, changed_byte_in_a_copy_is_refetched);
    return rt_run("remote_cache", tc);
}
