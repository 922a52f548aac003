/* test_remote_edges.c — remote shards against servers that misbehave on purpose (the fault
 * proxy's silent, rangestar, bighdr, listloop and noranges items, docs/testing.md), run by
 * ctest `remote_edges` under tests/servers/servers.py over the data `--make-data DIR` wrote.
 *
 * What must hold (docs/remote.md): a 206 whose Content-Range has no total gives the right
 * bytes; a listing that repeats its continuation token ends with an error naming it; one
 * silent connection holds no other transfer back and stalls time out in parallel; a server
 * that ignores Range is refused at create with the reason; create reads a few header bytes of
 * an indexed shard, not the shard; unclear URLs and answers are named for what they are; and
 * rf_loader_cancel from another thread wakes a next() blocked on a stalled server. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pipeline/testing.h"
#include "remoteutil.h"
#include "ringfeed.h"
#include "testutil.h"

static const char *data; /* the served root */

#define BIG 40 /* samples of big/shard-0000.tar */

static void arm(void)
{
    ck_assert_int_eq(rf_test_shell("curl -sf -X POST %s/_arm >/dev/null",
                                   rt_env("RF_TEST_FAULT")), 0);
}

/* Every batch of ld (created already) into r; the run must end without an error. */
static void drain(rf_loader *ld, run *r)
{
    memset(r, 0, sizeof *r);
    rf_batch *b;
    int rc;
    while ((rc = rf_loader_next(ld, &b)) == 0 || rc == RF_EPOCH_END)
        if (rc == 0)
            rt_take(ld, b, r);
    ck_assert_msg(rc == RF_DONE, "%d %s", rc, rf_last_error(ld));
    rf_stats_init(&r->st);
    ck_assert_int_eq(rf_loader_stats(ld, &r->st), 0);
}

/* rel read through the proxy with `spec` armed once the loader was created equals the local
 * file. */
static void armed_equals_local(const char *spec, const char *rel)
{
    char local[1024], url[1024];
    snprintf(local, sizeof local, "%s/%s", data, rel);
    snprintf(url, sizeof url, "%s/f/armed,%s/%s", rt_env("RF_TEST_FAULT"), spec, rel);
    static run lr, rr;
    opts o = {0};
    rt_collect(local, &o, &lr);
    rt_reset_log();
    rf_loader *ld = rt_create_url(url, &o);
    arm();
    drain(ld, &rr);
    rf_loader_destroy(ld);
    rt_same_run(&rr, &lr, url);
    ck_assert_uint_eq(rr.st.remote_retries, 0);
    free(lr.px);
    free(rr.px);
    rt_reset_log();
}

/* ---- Content-Range ------------------------------------------------------------------------ */

/* A 206 whose Content-Range gives an asterisk for the total: the server does not say the
 * object's length, the bytes are where the range says. */
START_TEST(content_range_without_total)
{
    armed_equals_local("rangestar", "gen/shard-0000.tar");
}
END_TEST

/* ---- listings ------------------------------------------------------------------------------ */

/* The fault proxy's log: how many requests it answered since its last reset for targets
 * holding `part`. */
static long logged(const char *part)
{
    char out[1200];
    snprintf(out, sizeof out, "%s/logged", rf_test_mkdtemp("edges-log"));
    ck_assert_int_eq(rf_test_shell("curl -sf %s/_log | python3 -c 'import json, sys; print(sum("
                                   "1 for q in json.load(sys.stdin)[\"requests\"] if \"%s\" in "
                                   "q[\"target\"]))' > %s", rt_env("RF_TEST_FAULT"), part, out),
                     0);
    FILE *f = fopen(out, "r");
    long n = -1;
    ck_assert(f && fscanf(f, "%ld", &n) == 1);
    fclose(f);
    return n;
}

/* An S3 server whose every page says IsTruncated with the token it was asked with: create
 * stops at the second page, naming the bucket and why. */
START_TEST(listing_repeating_its_token)
{
    char endpoint[512];
    snprintf(endpoint, sizeof endpoint, "%s/f/listloop", rt_env("RF_TEST_FAULT"));
    setenv("AWS_ENDPOINT_URL", endpoint, 1);
    setenv("AWS_NO_SIGN_REQUEST", "YES", 1);
    rt_reset_log();
    opts o = {.retries = 1};
    rt_create_fails("s3://rf-loop/loop/*.tar", &o, RF_EIO,
                    (const char *[]){"listing s3://rf-loop", "page 2",
                                     "continuation token it was asked with", NULL});
    ck_assert_int_eq(logged("/rf-loop/"), 2);
    unsetenv("AWS_ENDPOINT_URL");
}
END_TEST

/* ---- stalls ------------------------------------------------------------------------------- */

static void dataset_order(rf_config *c, const void *ctx)
{
    (void)ctx;
    c->order = RF_ORDER_NONE;
}

/* A shard's server goes silent (accepts, reads the request, sends nothing) after create. In
 * dataset order another shard's 40 samples come first, more than the ring holds, so every
 * read of the silent shard starts after the proxy was armed; its URL names the host as
 * "localhost", so the I/O thread has no connection to it yet. Every one of its N_GEN reads
 * must reach the server before the first of them times out (the proxy's arrival numbers):
 * a transfer waiting to see whether the silent connection could be shared (PIPEWAIT) sent
 * nothing until that one timed out, so stalls timed out one after another. The run then
 * fails at the first silent sample, naming it. */
START_TEST(silent_connection_holds_nothing_back)
{
    char silent[1024], sound[1024];
    const char *port = strrchr(rt_env("RF_TEST_FAULT"), ':');
    snprintf(sound, sizeof sound, "%s/big/shard-0000.tar", rt_env("RF_TEST_FAULT"));
    snprintf(silent, sizeof silent, "http://localhost%s/f/armed,silent/gen/shard-0000.tar",
             port);
    const char *pats[2] = {sound, silent};
    opts o = {.io_threads = 1, .retries = 1, .engine_tries = 1, .depth = 8,
              .remote_timeout_ms = 1000, .config = dataset_order};
    rf_config c = rt_config(pats, 2, &o);
    c.batch_size = 4;
    rt_reset_log();
    rf_loader *ld = rt_create_ok(&c, &o);
    arm();
    rf_batch *b;
    int rc;
    uint32_t got = 0;
    while ((rc = rf_loader_next(ld, &b)) == 0) {
        got += b->count;
        rf_loader_release(ld, b, NULL);
    }
    ck_assert_int_eq(rc, RF_EIO);
    ck_assert_uint_eq(got, BIG);
    const char *m = rf_last_error(ld);
    ck_assert_msg(strstr(m, silent) && strstr(m, "sample 00000000") && strstr(m, "Timeout"),
                  "%s", m);
    rf_loader_destroy(ld);
    char out[1200];
    snprintf(out, sizeof out, "%s/silent", rf_test_mkdtemp("edges-log"));
    ck_assert_int_eq(rf_test_shell(
        "curl -sf %s/_log | python3 -c 'import json, sys\n"
        "held = [q for q in json.load(sys.stdin)[\"requests\"] if q[\"fault\"] and "
        "q[\"fault\"].startswith(\"silent\")]\n"
        "closed = [q[\"arrivals_at_close\"] for q in held if \"arrivals_at_close\" in q]\n"
        "print(len(held), sum(1 for q in held if closed and q[\"arrival\"] <= min(closed)))' "
        "> %s", rt_env("RF_TEST_FAULT"), out), 0);
    FILE *f = fopen(out, "r");
    int held = -1, before_first_close = -1;
    ck_assert(f && fscanf(f, "%d %d", &held, &before_first_close) == 2);
    fclose(f);
    ck_assert_int_eq(held, N_GEN);
    ck_assert_msg(before_first_close == N_GEN, "%d of the %d silent reads reached the server "
                  "before the first timed out", before_first_close, N_GEN);
    rt_reset_log();
}
END_TEST

/* A server that trickles its bytes (4 a second: no stall by the 1-byte-a-second rule) once
 * armed: each read's attempt is cut after remote_timeout_ms plus its bytes at 16 KiB/s, so
 * the run ends with an error naming the URL and the rule instead of in half an hour. */
START_TEST(trickling_server_bounded_in_total_time)
{
    char url[1024];
    snprintf(url, sizeof url, "%s/f/armed,trickle/big/shard-0000.tar", rt_env("RF_TEST_FAULT"));
    opts o = {.depth = 2, .retries = 1, .engine_tries = 2, .remote_timeout_ms = 1000};
    rf_loader *ld = rt_create_url(url, &o);
    arm();
    rf_batch *b;
    int rc;
    while ((rc = rf_loader_next(ld, &b)) == 0)
        rf_loader_release(ld, b, NULL);
    ck_assert_int_eq(rc, RF_EIO);
    const char *m = rf_last_error(ld);
    ck_assert_msg(strstr(m, url) && strstr(m, "timed out") && strstr(m, "plus 1 s per 16 KiB") &&
                  strstr(m, "after 1 retries"), "%s", m);
    rf_loader_destroy(ld);
    rt_reset_log();
}
END_TEST

/* ---- servers without byte ranges ------------------------------------------------------------ */

/* A server that answers a ranged GET with 200 and the whole object (python -m http.server,
 * some proxies): create's one-byte open sees it and refuses the shard with the reason, after
 * that one request; a server that starts doing so during the run (armed once the ring, two
 * batches, holds the first samples) fails the sample's read with the same reason, not
 * retried, instead of reading the shard from its start once a sample. */
START_TEST(server_without_ranges_refused)
{
    char url[1024];
    snprintf(url, sizeof url, "%s/f/noranges/gen/shard-0000.tar", rt_env("RF_TEST_FAULT"));
    rt_reset_log();
    opts o = {0};
    rt_create_fails(url, &o, RF_EIO, (const char *[]){url, "bytes 0-0",
                    "the server ignores byte ranges", "HTTP 200", NULL});
    ck_assert_int_eq(logged("/gen/shard-0000"), 1);
    /* more samples than the ring holds: reads still to come when the proxy is armed */
    snprintf(url, sizeof url, "%s/f/armed,noranges/big/shard-0000.tar", rt_env("RF_TEST_FAULT"));
    o.depth = 2;
    rf_loader *ld = rt_create_url(url, &o);
    arm();
    rf_batch *b;
    int rc;
    while ((rc = rf_loader_next(ld, &b)) == 0)
        rf_loader_release(ld, b, NULL);
    ck_assert_int_eq(rc, RF_EIO);
    const char *m = rf_last_error(ld);
    ck_assert_msg(strstr(m, url) && strstr(m, "the server ignores byte ranges") &&
                  !strstr(m, "retries"), "%s", m);
    rf_stats st;
    rf_stats_init(&st);
    rf_loader_stats(ld, &st);
    ck_assert_uint_eq(st.remote_retries, 0);
    rf_loader_destroy(ld);
    rt_reset_log();
}
END_TEST

/* ---- closing from another thread ------------------------------------------------------------ */

static void *cancel_later(void *ld)
{
    usleep(300 * 1000);
    ck_assert_int_eq(rf_loader_cancel(ld), 0);
    return NULL;
}

/* rf_loader_next waits for a batch whose reads the server never answers (remote_timeout_ms a
 * minute, so only the cancel can end the wait): rf_loader_cancel from another thread makes it
 * return RF_ECLOSED saying so, and every later call too; destroy then completes. */
START_TEST(cancel_wakes_a_waiting_next)
{
    char url[1024];
    snprintf(url, sizeof url, "%s/f/armed,silent/big/shard-0000.tar", rt_env("RF_TEST_FAULT"));
    opts o = {.depth = 2, .remote_timeout_ms = 60000};
    rf_loader *ld = rt_create_url(url, &o);
    arm();
    rf_batch *b;
    int rc;
    uint32_t got = 0;
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, cancel_later, ld), 0);
    while ((rc = rf_loader_next(ld, &b)) == 0) {
        got += b->count;
        rf_loader_release(ld, b, NULL);
    }
    pthread_join(t, NULL);
    ck_assert_int_eq(rc, RF_ECLOSED);
    ck_assert_uint_lt(got, BIG);
    ck_assert_msg(strstr(rf_last_error(ld), "closed from another thread"), "%s",
                  rf_last_error(ld));
    ck_assert_int_eq(rf_loader_next(ld, &b), RF_ECLOSED);
    ck_assert_int_eq(rf_loader_set_epoch(ld, 1), RF_ECLOSED);
    rf_loader_destroy(ld);
    rt_reset_log();
}
END_TEST

/* ---- unclear URLs and answers ------------------------------------------------------------ */

/* A URL's #fragment never reaches the server (its index URL would have been the tar itself:
 * "NUL byte in the index"): refused naming it. A bracketed IPv6 host is a host, not a glob:
 * nothing listens on [::1] here, so create fails connecting to it. A header line over
 * libcurl's limit is named as such, not "Out of memory". */
START_TEST(unclear_urls_and_answers_named)
{
    char url[1024];
    opts o = {.retries = 1};
    snprintf(url, sizeof url, "%s/gen/shard-0000.tar#part", rt_env("RF_TEST_HTTP"));
    rt_create_fails(url, &o, RF_EINVAL, (const char *[]){"#part", "fragment", NULL});
    const char *port = strrchr(rt_env("RF_TEST_HTTP"), ':');
    snprintf(url, sizeof url, "http://[::1]%s/gen/shard-{0000..0001}.tar", port);
    char first[1024];
    snprintf(first, sizeof first, "http://[::1]%s/gen/shard-0000.tar", port);
    rt_create_fails(url, &o, RF_EIO, (const char *[]){first, "connect", NULL});
    snprintf(url, sizeof url, "%s/f/bighdr/gen/shard-0000.tar", rt_env("RF_TEST_FAULT"));
    rt_create_fails(url, &o, RF_EIO, (const char *[]){url, "header", "100 KiB", NULL});
}
END_TEST

/* ---- the data, and the suite ------------------------------------------------------------- */

static int make_data(const char *dir)
{
    char p[1024];
    int rc = 0;
#define SUB(x) (snprintf(p, sizeof p, "%s/%s", dir, x), p)
    rc |= rf_test_make_shards(SUB("gen"), 2, N_GEN, 10, 1, 1, 96);
    rc |= rf_test_make_shards(SUB("noidx"), 2, N_GEN, 10, 1, 0, 96);
    rc |= rf_test_make_shards(SUB("big"), 1, BIG, 10, 3, 1, 48);
#undef SUB
    return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
    TCase *tc;
    int rc = rt_main_args(argc, argv, "remote_edges", make_data, &data, &tc);
    if (rc >= 0)
        return rc;
    tcase_add_test(tc, content_range_without_total);
    tcase_add_test(tc, listing_repeating_its_token);
    tcase_add_test(tc, silent_connection_holds_nothing_back);
    tcase_add_test(tc, server_without_ranges_refused);
    tcase_add_test(tc, cancel_wakes_a_waiting_next);
    tcase_add_test(tc, unclear_urls_and_answers_named);
    tcase_add_test(tc, trickling_server_bounded_in_total_time);
    return rt_run("remote_edges", tc);
}
