/* test_sync_loader.c — sync-point indexes in the loader (rf_config.sync_index): the GPU decode
 * on the host backend builds entries after the first batch, writes them beside the shard at the
 * epoch's end and at destroy, and a later loader decodes from them; each kind of staleness
 * (a member rewritten in place, another shard under the same name, a shard grown by more
 * samples, a damaged sidecar) is found before use and counted; pixels are the same with and
 * without the index in every case. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ringfeed.h"
#include "ringfeed_shards.h"

#include "base/hash.h"
#include "jpegutil.h"
#include "testutil.h"

#define EPOCHS 2
#define MAX_SAMPLES 64

/* Sample i: baseline files in four samplings and sizes, every seventh progressive (which
 * needs no entry), `variant` changing the pixels (another shard under the same name). */
typedef struct member_ctx {
    uint32_t variant;
    uint8_t *keep[MAX_SAMPLES];
} member_ctx;

static const void *member(uint32_t i, const char *ext, size_t *len, void *ctx)
{
    member_ctx *m = ctx;
    if (strcmp(ext, "jpg") != 0)
        return NULL;
    static const enc_opts kinds[] = {{3, 0, 0, 1}, {3, 0, 0, 0}, {3, 0, 0, 2}, {1, 0, 0, 0}};
    enc_opts o = kinds[i % 4]; /* 4:2:0, 4:4:4, 4:2:2, gray */
    o.quality = 80 + (int)(i % 15), o.progressive = i % 7 == 6;
    free(m->keep[i]);
    m->keep[i] = make_jpeg(72 + 40 * (i % 5), 64 + 24 * (i % 4), o, 900 + i + 1000 * m->variant,
                           len);
    return m->keep[i];
}

static char *make_shard(const char *dir, uint32_t n, uint32_t variant)
{
    static const char *const exts[] = {"jpg"};
    member_ctx m = {.variant = variant};
    char *shard = rf_test_make_member_shard(dir, n, exts, 1, member, &m);
    for (uint32_t i = 0; i < MAX_SAMPLES; i++)
        free(m.keep[i]);
    return shard;
}

/* One run: the XXH64 of every delivered sample's pixels by (epoch, sample id), and the stats. */
typedef struct run_out {
    uint64_t px[EPOCHS][MAX_SAMPLES];
    rf_stats st;
} run_out;

static run_out run(const char *shard, uint32_t mode, const char *cache_dir)
{
    const char *pat;
    rf_config c = rf_test_host_config(&pat, shard, 64);
    c.gpu_decode = 1;
    c.sync_index = mode;
    c.cache_dir = cache_dir;
    c.cache_bytes = cache_dir ? 1u << 30 : 0;
    c.batch_size = 4;
    /* two batches ahead: the rest are decoded after the first batch is out, when building
     * starts, whatever the timing */
    c.prefetch_depth = 2;
    c.decode_threads = 2;
    c.epochs = EPOCHS;
    c.seed = 7;
    c.label_source = RF_LABEL_NONE;
    rf_loader *ld = rf_test_create_ok(&c);
    run_out r;
    memset(&r, 0, sizeof r);
    rf_batch *b;
    int rc;
    uint32_t epoch = 0;
    while ((rc = rf_loader_next(ld, &b)) != RF_DONE) {
        if (rc == RF_EPOCH_END) {
            epoch++;
            continue;
        }
        ck_assert_int_eq(rc, 0);
        size_t each = (size_t)(b->data_bytes / b->count);
        for (uint32_t i = 0; i < b->count; i++) {
            ck_assert_uint_lt(b->sample_ids[i], MAX_SAMPLES);
            r.px[epoch][b->sample_ids[i]] = rf_xxh64((const uint8_t *)b->data + i * each, each);
        }
        rf_loader_release(ld, b, NULL);
    }
    rf_stats_init(&r.st);
    ck_assert_int_eq(rf_loader_stats(ld, &r.st), 0);
    rf_loader_destroy(ld);
    return r;
}

static void same_pixels(const run_out *a, const run_out *b, uint32_t n)
{
    for (uint32_t e = 0; e < EPOCHS; e++)
        for (uint32_t i = 0; i < n; i++) {
            ck_assert_msg(a->px[e][i] != 0, "sample %u not delivered in epoch %u", i, e);
            ck_assert_msg(a->px[e][i] == b->px[e][i], "sample %u, epoch %u: pixels differ", i, e);
        }
}

/* Baseline members of make_shard(n) (the ones that get entries). */
static uint32_t baseline(uint32_t n)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++)
        k += i % 7 != 6;
    return k;
}

static int exists(const char *path)
{
    return access(path, F_OK) == 0;
}

/* Built during the first run (not from its first batch), written beside the shard at
 * destroy, read whole by the next: every baseline sample of every epoch from its entry. */
START_TEST(builds_then_reads)
{
    char *dir = rf_test_mkdtemp("syncl"), side[600];
    const uint32_t n = 24;
    char *shard = make_shard(dir, n, 0);
    ck_assert_int_eq(rf_shard_sync_path(shard, side, sizeof side), 0);
    run_out off = run(shard, RF_SYNC_INDEX_OFF, NULL);
    ck_assert(!exists(side));
    ck_assert_uint_eq(off.st.sync_indexed + off.st.sync_built + off.st.sync_loaded, 0);

    run_out first = run(shard, RF_SYNC_INDEX_BUILD, NULL);
    same_pixels(&first, &off, n);
    ck_assert_uint_eq(first.st.sync_loaded, 0);
    /* every member gets an entry (a progressive one's says it needs none), those decoded
     * before the first batch was out in the second epoch */
    ck_assert_uint_eq(first.st.sync_built, n);
    ck_assert_uint_gt(first.st.sync_indexed, 0);
    ck_assert_uint_eq(first.st.sync_stale, 0);
    ck_assert_msg(exists(side), "no sidecar beside the shard after the run");

    run_out second = run(shard, RF_SYNC_INDEX_READ, NULL);
    same_pixels(&second, &off, n);
    ck_assert_uint_eq(second.st.sync_indexed, (uint64_t)EPOCHS * baseline(n));
    ck_assert_uint_eq(second.st.sync_built, 0);
    ck_assert_uint_eq(second.st.sync_stale, 0);

    /* what the loader wrote is what ringfeed-inspect checks */
    rf_sync_summary m;
    char err[600] = "";
    rf_sync_summary_init(&m);
    ck_assert_int_eq(rf_shard_check_sync_index(shard, NULL, &m, err, sizeof err), 0);
    ck_assert_uint_eq(m.stale + m.missing, 0);
    free(shard);
    rf_test_shell("rm -rf '%s'", dir);
    free(dir);
}
END_TEST

/* READ builds nothing and writes nothing; OFF reads nothing. */
START_TEST(read_and_off_write_nothing)
{
    char *dir = rf_test_mkdtemp("synclr"), side[600];
    const uint32_t n = 12;
    char *shard = make_shard(dir, n, 0);
    ck_assert_int_eq(rf_shard_sync_path(shard, side, sizeof side), 0);
    run_out r = run(shard, RF_SYNC_INDEX_READ, NULL);
    ck_assert_uint_eq(r.st.sync_indexed + r.st.sync_built, 0);
    ck_assert(!exists(side));
    ck_assert_int_eq(rf_shard_write_sync_index(shard, NULL, NULL, NULL, 0), 0);
    r = run(shard, RF_SYNC_INDEX_OFF, NULL);
    ck_assert_uint_eq(r.st.sync_indexed + r.st.sync_loaded, 0);
    free(shard);
    rf_test_shell("rm -rf '%s'", dir);
    free(dir);
}
END_TEST

/* A folder the loader may not write: the built sidecar goes to cache_dir, where the next
 * loader finds it. */
START_TEST(read_only_folder_uses_cache_dir)
{
    char *dir = rf_test_mkdtemp("syncro"), *cache = rf_test_mkdtemp("syncc"), side[600];
    const uint32_t n = 12;
    /* root writes into any folder it may not: a read-only mount of a tmpfs of our own */
    int tmpfs = rf_test_private_tmpfs(dir, 64u << 20) == 0;
    char *shard = make_shard(dir, n, 0);
    ck_assert_int_eq(rf_shard_sync_path(shard, side, sizeof side), 0);
    if (!tmpfs || rf_test_shell("mount -o remount,ro '%s'", dir) != 0)
        ck_assert_int_eq(rf_test_shell("chmod a-w '%s'", dir), 0);
    ck_assert_msg(access(dir, W_OK) != 0, "%s stayed writable", dir);
    run_out a = run(shard, RF_SYNC_INDEX_BUILD, cache);
    ck_assert(!exists(side));
    ck_assert_uint_gt(a.st.sync_built, 0);
    run_out b = run(shard, RF_SYNC_INDEX_READ, cache);
    ck_assert_uint_eq(b.st.sync_indexed, (uint64_t)EPOCHS * baseline(n));
    same_pixels(&a, &b, n);
    rf_test_shell("chmod u+w '%s' 2>/dev/null; rm -rf '%s' '%s' 2>/dev/null", dir, dir, cache);
    free(shard), free(dir), free(cache);
}
END_TEST

/* Each kind of staleness, against a sidecar written for the original shard: the entries that
 * no longer describe their member's bytes are counted once each and not used, the rest are,
 * and the pixels are those of a run without the index on the same shard. */
START_TEST(stale_kinds)
{
    char *dir = rf_test_mkdtemp("syncs"), *other = rf_test_mkdtemp("synco"), side[600], cmd[1400];
    const uint32_t n = 14;
    char *shard = make_shard(dir, n, 0);
    ck_assert_int_eq(rf_shard_sync_path(shard, side, sizeof side), 0);
    ck_assert_int_eq(rf_shard_write_sync_index(shard, NULL, NULL, NULL, 0), 0);
    ck_assert_int_eq(rf_test_shell("cp '%s' '%s/keep.sync'", side, dir), 0);

    /* a member rewritten in place: one byte of its JFIF header (X density), same size */
    uint64_t at = rf_test_member_offset(shard, "00000002.jpg") + 512;
    snprintf(cmd, sizeof cmd, "printf '\\x07' | dd of='%s' bs=1 seek=%llu conv=notrunc "
             "status=none", shard, (unsigned long long)at + 15);
    ck_assert_int_eq(rf_test_shell("%s", cmd), 0);
    run_out off = run(shard, RF_SYNC_INDEX_OFF, NULL);
    run_out r = run(shard, RF_SYNC_INDEX_READ, NULL);
    same_pixels(&r, &off, n);
    ck_assert_uint_eq(r.st.sync_stale, 1);
    ck_assert_uint_eq(r.st.sync_indexed, (uint64_t)EPOCHS * (baseline(n) - 1));

    /* another shard under the same name: every entry stale */
    char *fresh = make_shard(other, n, 1);
    ck_assert_int_eq(rf_test_shell("cp '%s' '%s' && cp '%s/keep.sync' '%s'", fresh, shard, dir,
                                   side), 0);
    off = run(shard, RF_SYNC_INDEX_OFF, NULL);
    r = run(shard, RF_SYNC_INDEX_READ, NULL);
    same_pixels(&r, &off, n);
    ck_assert_uint_eq(r.st.sync_indexed, 0);
    ck_assert_uint_eq(r.st.sync_stale, baseline(n));

    /* the same samples and more after them (a shard grown): the old entries still hold */
    free(fresh);
    rf_test_shell("rm -rf '%s'/*", other);
    fresh = make_shard(other, n + 4, 0);
    ck_assert_int_eq(rf_test_shell("cp '%s' '%s' && cp '%s/keep.sync' '%s'", fresh, shard, dir,
                                   side), 0);
    off = run(shard, RF_SYNC_INDEX_OFF, NULL);
    r = run(shard, RF_SYNC_INDEX_READ, NULL);
    same_pixels(&r, &off, n + 4);
    ck_assert_uint_eq(r.st.sync_stale, 0);
    ck_assert_uint_eq(r.st.sync_indexed, (uint64_t)EPOCHS * baseline(n));

    /* a damaged sidecar: refused whole (counted once), then rebuilt by a building run */
    ck_assert_int_eq(rf_test_shell("printf '\\x01' | dd of='%s' bs=1 seek=100 conv=notrunc "
                                   "status=none", side), 0);
    r = run(shard, RF_SYNC_INDEX_BUILD, NULL);
    same_pixels(&r, &off, n + 4);
    ck_assert_uint_eq(r.st.sync_loaded, 0);
    ck_assert_uint_eq(r.st.sync_stale, 1);
    ck_assert_uint_gt(r.st.sync_built, 0);
    r = run(shard, RF_SYNC_INDEX_READ, NULL);
    ck_assert_uint_eq(r.st.sync_stale, 0);
    ck_assert_uint_eq(r.st.sync_indexed, (uint64_t)EPOCHS * baseline(n + 4));
    free(shard), free(fresh);
    rf_test_shell("rm -rf '%s' '%s'", dir, other);
    free(dir), free(other);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sync_loader");
    TCase *tc = tcase_create("sync_loader");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, builds_then_reads);
    tcase_add_test(tc, read_and_off_write_nothing);
    tcase_add_test(tc, read_only_folder_uses_cache_dir);
    tcase_add_test(tc, stale_kinds);
    suite_add_tcase(s, tc);
    return rf_test_run_suite(s);
}
