/* test_remote_tokens.c — token files (RF_SOURCE_TOKENS) over http:// and s3:// against the real
 * servers: nginx, moto's S3 and the fault proxy of tests/servers/servers.py, which ctest
 * `remote_tokens` starts around this suite over the data `test_remote_tokens --make-data DIR`
 * wrote first (numpy's tofile, as nanoGPT's prepare scripts write them, and C's fwrite). The
 * helpers are test_remote.c's, in remoteutil.c.
 *
 * What must hold: the same windows byte for byte as the same files read locally (random and
 * sequential windows, 2- and 4-byte tokens, output as on disk and int64) at 1 and 3 I/O
 * threads over HTTP and S3, every window once per epoch (the batches' ids, and the fault
 * proxy's log: one ranged GET per window); a file that is not a whole number of tokens and a
 * 404 fail create naming the URL, without its credentials; a folder source over a URL is
 * refused; 503 (Retry-After), resets and short bodies are retried to the same bytes and
 * counted; the shard cache serves later epochs and a second loader with no window GET; rank
 * splits and a resumed loader equal the local ones. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "remoteutil.h"
#include "ringfeed.h"
#include "testutil.h"

#define SEQ 64 /* tokens per window: a window is SEQ + 1 tokens */

static const char *data; /* the served root */

/* The data: tok2 holds 3000, 40 (no window) and 1203 uint16 tokens, 46 + 0 + 18 windows;
 * tok4 2000 and 777 uint32 tokens, 31 + 12. No sequential window ends at a file's end, so
 * rt_sample_gets counts every window's GET. */
#define TOK2 "tok2/tok-{0..2}.bin"
#define TOK2_WINDOWS 64
#define TOK4 "tok4/tok-{0..1}.bin"
#define TOK4_WINDOWS 43

typedef struct tcase {
    const char *rel;
    uint32_t token_bytes, windows, dtype, nwindows;
} tcase;

static const tcase cases[] = {
    {TOK2, 2, RF_WINDOWS_RANDOM, 0, TOK2_WINDOWS},
    {TOK2, 2, RF_WINDOWS_SEQUENTIAL, RF_DTYPE_INT64, TOK2_WINDOWS},
    {TOK4, 4, RF_WINDOWS_RANDOM, RF_DTYPE_INT64, TOK4_WINDOWS},
    {TOK4, 4, RF_WINDOWS_SEQUENTIAL, 0, TOK4_WINDOWS},
};

/* rt_config's last step for case k (opts.config): the token source. */
static void tok_setup(rf_config *c, const void *ctx)
{
    const tcase *k = ctx;
    c->source = RF_SOURCE_TOKENS;
    c->token_bytes = k->token_bytes;
    c->seq_len = SEQ;
    c->token_windows = k->windows;
    c->token_dtype = k->dtype;
    c->image_size = 0;
}

/* o with case k's token source, comparing keys by the file's base name. */
static opts tok_opts(const tcase *k, const opts *o)
{
    opts t = *o;
    t.config = tok_setup;
    t.config_ctx = k;
    t.key_base = 1;
    return t;
}

/* The token loader's config over `pattern` with o's settings. */
static rf_config tok_config(const char **pat, const tcase *k, const opts *o)
{
    opts t = tok_opts(k, o);
    return rt_config(pat, 1, &t);
}

/* Every batch of the token loader over base/k->rel into r. */
static void tok_collect(const char *base, const tcase *k, const opts *o, run *r)
{
    char pattern[1024];
    snprintf(pattern, sizeof pattern, "%s/%s", base, k->rel);
    opts t = tok_opts(k, o);
    rt_collect(pattern, &t, r);
}

/* Each window id comes once per epoch, `epochs` epochs. */
static void each_window_once(const run *r, const tcase *k, uint32_t epochs)
{
    ck_assert_uint_eq(r->n, epochs * k->nwindows);
    uint32_t seen[TOK2_WINDOWS] = {0};
    for (uint32_t i = 0; i < r->n; i++) {
        ck_assert_uint_lt(r->ids[i], k->nwindows);
        seen[r->ids[i]]++;
    }
    for (uint32_t w = 0; w < k->nwindows; w++)
        ck_assert_msg(seen[w] == epochs, "window %u came %u times in %u epochs", w, seen[w],
                      epochs);
}

/* k's files read through `base` equal the local files at 1 and 3 I/O threads over `epochs`
 * epochs (rt_equals_local), each window once an epoch; returns the remote stats of the
 * first run. */
static rf_stats equals_local(const char *base, const tcase *k, uint32_t epochs)
{
    static run r;
    opts o = {.epochs = epochs};
    o = tok_opts(k, &o);
    rt_equals_local(data, base, k->rel, &o, 3, &r);
    each_window_once(&r, k, epochs);
    free(r.px);
    return r.st;
}

START_TEST(http_equals_local)
{
    rf_stats st = equals_local(rt_env("RF_TEST_HTTP"), &cases[_i], 2);
    /* one small GET per file at create (its size), then one ranged GET per window */
    uint32_t files = cases[_i].token_bytes == 2 ? 3 : 2;
    ck_assert_uint_eq(st.remote_requests, st.reads + files);
    ck_assert_uint_eq(st.remote_retries, 0);
    ck_assert_uint_ge(st.remote_bytes, st.bytes_read);
}
END_TEST

START_TEST(s3_equals_local)
{
    rt_s3_env(NULL);
    char base[256];
    snprintf(base, sizeof base, "s3://%s", rt_env("RF_TEST_S3_BUCKET"));
    equals_local(base, &cases[_i], 1);
}
END_TEST

/* Every window's range is one GET per epoch in the fault proxy's log (sequential windows: the
 * same ranges each epoch), retries aside (there are none here). */
START_TEST(one_get_per_window_per_epoch)
{
    static run r;
    opts o = {.io_threads = 2, .epochs = 3};
    rt_reset_log();
    tok_collect(rt_env("RF_TEST_FAULT"), &cases[3], &o, &r);
    each_window_once(&r, &cases[3], 3);
    ck_assert_int_eq(rt_sample_gets(data, "/tok4/", r.st.remote_create_requests),
                     3 * TOK4_WINDOWS);
    free(r.px);
}
END_TEST

START_TEST(errors_name_url)
{
    char url[1024], shown[1024];
    opts o = {.retries = 1};
    const char *pat = url;
    tcase k = cases[0];
    k.rel = "bad/odd.bin";
    /* userinfo and a query string are never printed: the message names the shown form */
    const char *h = rt_env("RF_TEST_HTTP") + 7;
    snprintf(url, sizeof url, "http://user:" SECRET_PW "@%s/bad/odd.bin?X-Amz-Signature=%s", h,
             SECRET_PW);
    snprintf(shown, sizeof shown, "http://%s/bad/odd.bin", h);
    rf_config c = tok_config(&pat, &k, &o);
    rt_config_fails(&c, &o, RF_EFORMAT, (const char *[]){
        shown, "2001 bytes is not a whole number of 2-byte tokens", NULL});
    snprintf(url, sizeof url, "%s/tok2/no-such.bin", rt_env("RF_TEST_HTTP"));
    rt_config_fails(&c, &o, RF_ENOFILES, (const char *[]){url, "HTTP 404", NULL});
    /* a folder source has no remote form */
    snprintf(url, sizeof url, "%s/tok2/", rt_env("RF_TEST_HTTP"));
    c.source = RF_SOURCE_FOLDER;
    rt_config_fails(&c, &o, RF_EINVAL, (const char *[]){url, "folder source", NULL});
    /* a token file locally and another remotely: one loader reads either */
    char local[1024];
    snprintf(local, sizeof local, "%s/tok2/tok-0.bin", data);
    snprintf(url, sizeof url, "%s/tok2/tok-2.bin", rt_env("RF_TEST_HTTP"));
    const char *mixed[2] = {url, local};
    c = tok_config(mixed, &cases[0], &o);
    c.shard_count = 2;
    rt_config_fails(&c, &o, RF_EINVAL, (const char *[]){"mix URLs and local files", NULL});
}
END_TEST

/* The proxy's faults on every window (and on create's opens) are retried to the same bytes;
 * a 503 and a 429 say Retry-After: 1, which the retries wait. */
static const char *const faults[] = {"503x2", "resetx1", "shortx1", "429x1,resetx1"};

START_TEST(faults_retried_to_right_bytes)
{
    char base[512];
    snprintf(base, sizeof base, "%s/f/%s", rt_env("RF_TEST_FAULT"), faults[_i]);
    tcase k = cases[_i % 2 ? 3 : 1];
    k.rel = k.token_bytes == 2 ? "tok2/tok-2.bin" : "tok4/tok-1.bin";
    k.nwindows = k.token_bytes == 2 ? 18 : 12;
    static run lr, rr;
    opts o = {.io_threads = 2};
    tok_collect(data, &k, &o, &lr);
    tok_collect(base, &k, &o, &rr);
    rt_same_run(&rr, &lr, base);
    each_window_once(&rr, &k, 1);
    ck_assert_msg(rr.st.remote_retries >= k.nwindows && rr.st.read_retries >= k.nwindows,
                  "%s: %llu remote retries, %llu read retries", faults[_i],
                  (unsigned long long)rr.st.remote_retries,
                  (unsigned long long)rr.st.read_retries);
    free(lr.px);
    free(rr.px);
}
END_TEST

/* The shard cache keeps token files as it keeps tar shards: one loader fills the two files it
 * reads (tok-1.bin holds no window and is never read, so never filled) and its later epochs
 * read the copies; a second loader on the directory hits both and makes no window GET. */
START_TEST(cache_serves_later_epochs)
{
    static run lr, fr, hr;
    opts o = {.epochs = 3, .depth = 1};
    tok_collect(data, &cases[1], &o, &lr);
    o.cache_dir = rf_test_mkdtemp("tcache");
    o.cache_bytes = 64 << 20;
    char url[1024];
    snprintf(url, sizeof url, "%s/%s", rt_env("RF_TEST_FAULT"), TOK2);
    const char *pat = url;
    rf_config c = tok_config(&pat, &cases[1], &o);
    rt_reset_log();
    rf_loader *ld = rt_create_ok(&c, &o);
    memset(&fr, 0, sizeof fr);
    rf_batch *b;
    int rc;
    while ((rc = rf_loader_next(ld, &b)) == 0 || rc == RF_EPOCH_END) {
        if (rc) /* an epoch ended: both files were read, so both fills are queued */
            rt_wait_fills(ld, 2, &fr.st);
        else
            rt_take(ld, b, &fr);
    }
    ck_assert_int_eq(rc, RF_DONE);
    rt_wait_fills(ld, 2, &fr.st);
    rf_loader_destroy(ld);
    rt_key_base(&fr); /* rt_collect's key_base, for this loop of its own */
    rt_same_run(&fr, &lr, "filling");
    ck_assert_msg(fr.st.shard_cache_misses == 3 && fr.st.shard_cache_fills == 2 &&
                  fr.st.shard_cache_fill_requests == 2, "misses %llu fills %llu (%s)",
                  (unsigned long long)fr.st.shard_cache_misses,
                  (unsigned long long)fr.st.shard_cache_fills, fr.st.shard_cache_why);
    /* the first epoch and the prefetched batch at most: three epochs uncached are 192 */
    long gets = rt_sample_gets(data, "/tok2/", fr.st.remote_create_requests);
    ck_assert_msg(gets >= 5 && gets <= TOK2_WINDOWS + 5, "%ld window GETs", gets);
    rt_reset_log();
    opts h = o;
    h.epochs = 2;
    tok_collect(rt_env("RF_TEST_FAULT"), &cases[1], &h, &hr);
    ck_assert_int_eq(rt_sample_gets(data, "/tok2/", hr.st.remote_create_requests), 0);
    ck_assert_msg(hr.st.shard_cache_hits == 2 && hr.st.shard_cache_misses == 1 &&
                  hr.st.shard_cache_fills == 0, "hits %llu misses %llu (%s)",
                  (unsigned long long)hr.st.shard_cache_hits,
                  (unsigned long long)hr.st.shard_cache_misses, hr.st.shard_cache_why);
    lr.n = hr.n; /* the first two of the local run's three epochs */
    lr.px_len = hr.px_len;
    rt_same_run(&hr, &lr, "cached");
    free(lr.px), free(fr.px), free(hr.px);
}
END_TEST

/* Each rank's share, and a loader resumed mid-epoch (after 3 batches of 5), read the same
 * windows over HTTP as from the files. */
START_TEST(ranks_and_resume_equal_local)
{
    opts o = {.epochs = 2};
    o = tok_opts(&cases[0], &o);
    rt_ranks_equal_local(data, rt_env("RF_TEST_HTTP"), TOK2, &o);
    ck_assert_uint_eq(rt_resume_equals_local(data, rt_env("RF_TEST_HTTP"), TOK2, &o, 3),
                      2 * TOK2_WINDOWS - 3 * 5);
}
END_TEST

/* ---- the data, and the suite ------------------------------------------------------------- */

static int make_data(const char *dir)
{
    int rc = rf_test_shell("mkdir -p %s/tok2 %s/tok4 %s/bad", dir, dir, dir);
    /* GPT-2 sized vocabulary, uint16 as nanoGPT writes train.bin (numpy tofile) */
    rc |= rf_test_shell("python3 -c '\n"
                        "import numpy as np, sys\n"
                        "g = np.random.default_rng(23)\n"
                        "for i, n in enumerate((3000, 40, 1203)):\n"
                        "    g.integers(0, 50257, n).astype(np.uint16).tofile(f\"%s/tok2/tok-{i}.bin\")'",
                        dir);
    for (uint32_t f = 0; f < 2 && rc == 0; f++) {
        char path[1200];
        snprintf(path, sizeof path, "%s/tok4/tok-%u.bin", dir, f);
        FILE *fp = fopen(path, "wb");
        for (uint32_t i = 0; fp && i < (f ? 777u : 2000u); i++) {
            uint32_t v = f << 20 | i * 2654435761u >> 12; /* 4-byte ids above 65535 */
            fwrite(&v, 4, 1, fp);
        }
        rc |= !fp || fclose(fp) != 0;
    }
    rc |= rf_test_shell("head -c 2001 /dev/urandom > %s/bad/odd.bin", dir);
    return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
    TCase *tc;
    int rc = rt_main_args(argc, argv, "remote_tokens", make_data, &data, &tc);
    if (rc >= 0)
        return rc;
    tcase_add_loop_test(tc, http_equals_local, 0, sizeof cases / sizeof cases[0]);
    tcase_add_loop_test(tc, s3_equals_local, 0, sizeof cases / sizeof cases[0]);
    tcase_add_test(tc, one_get_per_window_per_epoch);
    tcase_add_test(tc, errors_name_url);
    tcase_add_loop_test(tc, faults_retried_to_right_bytes, 0, sizeof faults / sizeof faults[0]);
    tcase_add_test(tc, cache_serves_later_epochs);
    tcase_add_test(tc, ranks_and_resume_equal_local);
    return rt_run("remote_tokens", tc);
}
