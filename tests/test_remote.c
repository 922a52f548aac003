/* test_remote.c — remote shards (http://, https://, s3://) against real servers: nginx, moto's
 * S3 and the fault proxy of tests/servers/servers.py, which ctest `remote` starts around this
 * suite (rf_add_server_test, tests/CMakeLists.txt) over the data `test_remote --make-data DIR`
 * wrote first (ctest `remote_data`).
 *
 * What must hold: the same samples and byte-equal batches as the same shards read from local
 * files (generator shards with and without .idx, GNU tar, Python tarfile, webdataset's
 * TarWriter, photos), at 1 and 4 I/O threads, over HTTP, HTTPS and S3; each fault of the proxy
 * retried to the right bytes or to the documented error with its message; 403, 404, a server
 * down at create, a missing CA, a wrong S3 secret; s3 globbing over several ListObjectsV2
 * pages, http globbing refused; every sample range fetched once per epoch (the proxy's log);
 * rank splits; a stalled server reported by next_timeout_ms; skip mode counting an exhausted
 * read under io; and no credential in any message. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pipeline/testing.h"
#include "ringfeed.h"
#include "remoteutil.h"
#include "ringfeed_shards.h"
#include "testutil.h"

static const char *data;  /* the served root */

/* The shards at `rel` (a pattern under the data root) read through `base` equal the local
 * files, at 1 and 4 I/O threads (rt_equals_local); returns the remote stats of the first run
 * (the fault proxy faults the first attempts at each range: the second run meets none). */
static rf_stats equals_local(const char *base, const char *rel, uint32_t epochs)
{
    static run r;
    opts o = {.epochs = epochs};
    rt_equals_local(data, base, rel, &o, 4, &r);
    free(r.px);
    return r.st;
}

/* ---- HTTP ---------------------------------------------------------------------------------- */

START_TEST(http_index_equals_local)
{
    rf_stats st = equals_local(rt_env("RF_TEST_HTTP"), "gen/shard-{0000..0001}.tar", 2);
    /* create: per shard the open, the index and a few small header reads (the index's spot
     * checks, each its own ranged GET); then one GET per sample read */
    ck_assert_uint_eq(st.remote_requests, st.reads + st.remote_create_requests);
    ck_assert_uint_ge(st.remote_create_requests, 2 * 3);
    ck_assert_uint_le(st.remote_create_requests, 2 * 10);
    ck_assert_uint_eq(st.remote_retries, 0);
}
END_TEST

START_TEST(http_scan_equals_local)
{
    rf_stats st = equals_local(rt_env("RF_TEST_HTTP"), "noidx/shard-{0000..0001}.tar", 1);
    /* per shard: the open, the index that is not there (404), one streamed GET */
    ck_assert_uint_eq(st.remote_requests, st.reads + 2 * 3);
}
END_TEST

static const char *const users[] = {"users/gnu/shard-0000.tar", "users/tarfile.tar",
                                    "users/wds.tar", "users-idx/gnu.tar",
                                    "users-idx/tarfile.tar", "users-idx/wds.tar"};

START_TEST(users_shards_equal_local)
{
    equals_local(rt_env("RF_TEST_HTTP"), users[_i], 1);
}
END_TEST

START_TEST(photos_equal_local)
{
    char probe[1024];
    snprintf(probe, sizeof probe, "%s/photos/photos-0000.tar", data);
    if (access(probe, R_OK) != 0) {
        fprintf(stderr, "photos: skipped (no photos written: mate-backgrounds or cjpeg missing)\n");
        return;
    }
    equals_local(rt_env("RF_TEST_HTTP"), "photos/photos-{0000..0001}.tar", 1);
}
END_TEST

START_TEST(https_with_ca)
{
    setenv("SSL_CERT_FILE", rt_env("RF_TEST_CA"), 1);
    equals_local(rt_env("RF_TEST_HTTPS"), "gen/shard-{0000..0001}.tar", 1);
    unsetenv("SSL_CERT_FILE");
    /* nginx offers HTTP/2 over TLS: the samples' GETs went over it */
    ck_assert_int_eq(rf_test_shell("grep -q '\"GET /gen/shard-0000.tar HTTP/2.0\" 206 .*ringfeed' "
                                   "%s/nginx-access.log", rt_env("RF_TEST_STATE")), 0);
    char url[1024];
    snprintf(url, sizeof url, "%s/gen/shard-0000.tar", rt_env("RF_TEST_HTTPS"));
    opts o = {.retries = 1};
    rt_create_fails(url, &o, 0, (const char *[]){url, "certificate", NULL});
}
END_TEST

START_TEST(errors_name_url)
{
    char url[1024], shown[1024];
    opts o = {.retries = 1};
    snprintf(url, sizeof url, "%s/f/403/gen/shard-0000.tar", rt_env("RF_TEST_FAULT"));
    rt_create_fails(url, &o, -13, (const char *[]){url, "HTTP 403", NULL});
    snprintf(url, sizeof url, "%s/f/404/gen/shard-0000.tar", rt_env("RF_TEST_FAULT"));
    rt_create_fails(url, &o, RF_ENOFILES, (const char *[]){url, "HTTP 404", NULL});
    snprintf(url, sizeof url, "%s/gen/no-such.tar", rt_env("RF_TEST_HTTP"));
    rt_create_fails(url, &o, RF_ENOFILES, (const char *[]){url, "HTTP 404", NULL});
    /* nothing listens on port 9 of loopback (discard, never run here) */
    rt_create_fails("http://127.0.0.1:9/gen/shard-0000.tar", &o, RF_EIO,
                 (const char *[]){"http://127.0.0.1:9/gen/shard-0000.tar", "connect",
                                  "after 1 retries", NULL});
    /* userinfo and a query string are never printed */
    const char *h = rt_env("RF_TEST_HTTP") + 7;
    snprintf(url, sizeof url, "http://user:" SECRET_PW "@%s/gen/no-such.tar?X-Amz-Signature=%s",
             h, SECRET_PW);
    snprintf(shown, sizeof shown, "http://%s/gen/no-such.tar", h);
    rt_create_fails(url, &o, 0, (const char *[]){shown, "HTTP 404", NULL});
    snprintf(url, sizeof url, "%s/gen/shard-*.tar", rt_env("RF_TEST_HTTP"));
    rt_create_fails(url, &o, RF_EINVAL, (const char *[]){"brace ranges", NULL});
    char local[1024];
    snprintf(local, sizeof local, "%s/gen/shard-0000.tar", data);
    const char *mixed[2] = {url, local};
    snprintf(url, sizeof url, "%s/gen/shard-0000.tar", rt_env("RF_TEST_HTTP"));
    rf_config c = rt_config(mixed, 2, &o);
    rt_config_fails(&c, &o, RF_EINVAL, (const char *[]){"mix URLs and local files", NULL});
}
END_TEST

/* ---- faults ------------------------------------------------------------------------------- */

/* min_ms: the proxy's 503 and 429 say Retry-After: 1, which the retries wait (over the
 * backoff of 25-50 ms, doubling); the run takes at least that long. */
static const struct {
    const char *spec;
    int retried;
    uint32_t min_ms;
} faults[] = {{"503x2", 1, 2000}, {"429x1", 1, 1000}, {"500x2", 1, 0}, {"resetx2", 1, 0},
              {"shortx2", 1, 0}, {"delay=300x1", 0, 300},
              {"503x1,resetx1,shortx1", 1, 1000}};

START_TEST(fault_retried_to_right_bytes)
{
    char base[512];
    snprintf(base, sizeof base, "%s/f/%s", rt_env("RF_TEST_FAULT"), faults[_i].spec);
    rf_stats st = equals_local(base, "gen/shard-0000.tar", 1);
    if (faults[_i].retried)
        ck_assert_msg(st.remote_retries > 0 && st.read_retries > 0, "%s: no retry counted",
                      faults[_i].spec);
    else
        ck_assert_uint_eq(st.remote_retries, 0);
    ck_assert_msg(st.wall_ns >= faults[_i].min_ms * 1000000ull, "%s: done in %llu ms",
                  faults[_i].spec, (unsigned long long)(st.wall_ns / 1000000));
}
END_TEST

/* Exhausted retries during the epoch: create gets through (4 tries) and the samples' reads
 * (2 tries) do not. Fail mode: the I/O error names the URL and the byte range; skip mode:
 * every sample is counted under io and nothing is delivered twice. */
START_TEST(exhausted_retries_error)
{
    char url[1024];
    snprintf(url, sizeof url, "%s/f/500x3/gen/shard-0000.tar", rt_env("RF_TEST_FAULT"));
    opts o = {.retries = 3, .engine_tries = 2};
    rf_loader *ld = rt_create_url(url, &o);
    rf_batch *b;
    int rc = rf_loader_next(ld, &b);
    ck_assert_int_eq(rc, RF_EIO);
    const char *m = rf_last_error(ld);
    rt_no_secrets(m);
    ck_assert_msg(strstr(m, url) && strstr(m, " bytes ") && strstr(m, "HTTP 500") &&
                  strstr(m, "after 1 retries"), "%s", m);
    rf_loader_destroy(ld);
    /* skip mode, the faulty shard beside a sound one: every sample of the first is skipped
     * under io, every sample of the second delivered once, neighbours in the same batches */
    o.skip = 1;
    o.retries = 4;  /* another spec: the proxy's counts of 500x3 were spent above */
    char sound[1024];
    snprintf(url, sizeof url, "%s/f/500x4/gen/shard-0000.tar", rt_env("RF_TEST_FAULT"));
    snprintf(sound, sizeof sound, "%s/gen/shard-0001.tar", rt_env("RF_TEST_HTTP"));
    const char *pats[2] = {url, sound};
    rf_config c = rt_config(pats, 2, &o);
    char err[RF_ERRMSG_MAX];
    ld = rt_create(&c, &o, err, sizeof err, &rc);
    ck_assert_msg(rc == 0, "%s", err);
    uint32_t seen[2 * N_GEN] = {0}, delivered = 0;
    while ((rc = rf_loader_next(ld, &b)) == 0) {
        for (uint32_t i = 0; i < b->count; i++)
            if (!b->is_padding[i]) {
                ck_assert_uint_ge(b->sample_ids[i], N_GEN); /* from the sound shard */
                seen[b->sample_ids[i]]++;
                delivered++;
            }
        rf_loader_release(ld, b, NULL);
    }
    ck_assert_int_eq(rc, RF_EPOCH_END);
    for (uint32_t i = N_GEN; i < 2 * N_GEN; i++)
        ck_assert_uint_eq(seen[i], 1);
    rf_stats st;
    rf_stats_init(&st);
    rf_loader_stats(ld, &st);
    ck_assert_uint_eq(st.skipped_by_reason[RF_SKIP_IO], N_GEN);
    ck_assert_uint_eq(st.skipped, N_GEN);
    ck_assert_uint_eq(delivered, N_GEN);
    ck_assert_uint_eq(st.epoch_delivered + st.epoch_skipped, st.epoch_total);
    rf_loader_destroy(ld);
}
END_TEST

/* A server that answers nothing for longer than remote_timeout_ms: the stalled attempt is a
 * timeout, retried, and the run ends with the right bytes. */
START_TEST(stall_timeout_retried)
{
    char base[512];
    snprintf(base, sizeof base, "%s/f/delay=2500x1", rt_env("RF_TEST_FAULT"));
    char local[1024], url[1024];
    snprintf(local, sizeof local, "%s/gen/shard-0000.tar", data);
    snprintf(url, sizeof url, "%s/gen/shard-0000.tar", base);
    static run lr, rr;
    opts o = {.remote_timeout_ms = 1000};
    rt_collect(local, &o, &lr);
    rt_collect(url, &o, &rr);
    rt_same_run(&rr, &lr, url);
    ck_assert_uint_gt(rr.st.remote_retries, 0);
    free(lr.px);
    free(rr.px);
}
END_TEST

/* A stalled server: rf_loader_next with next_timeout_ms says where the pipeline stands, and
 * the batches come once the server answers. */
START_TEST(stalled_server_timeout)
{
    char url[1024];
    snprintf(url, sizeof url, "%s/f/delay=1500x2/gen/shard-0001.tar", rt_env("RF_TEST_FAULT"));
    opts o = {.timeout_ms = 300};
    rf_loader *ld = rt_create_url(url, &o);
    rf_batch *b;
    int rc = rf_loader_next(ld, &b);
    ck_assert_int_eq(rc, RF_ETIMEDOUT);
    ck_assert_msg(strstr(rf_last_error(ld), "reading"), "%s", rf_last_error(ld));
    uint32_t got = 0;
    while ((rc = rf_loader_next(ld, &b)) == 0 || rc == RF_ETIMEDOUT || rc == RF_EPOCH_END)
        if (rc == 0) {
            got += b->count;
            rf_loader_release(ld, b, NULL);
        }
    ck_assert_int_eq(rc, RF_DONE);
    ck_assert_uint_eq(got, N_GEN);
    rf_loader_destroy(ld);
}
END_TEST

/* ---- exactly once, ranks, a shard that changes --------------------------------------------- */

/* Every sample's range is fetched once per epoch (the proxy's log of this loader's requests,
 * their paths without a fault spec: a delayed request of an earlier test is logged when it
 * ends; create's requests left out: the first remote_create_requests to arrive), and
 * connections are kept: one I/O thread with 4 reads in flight makes its 78 requests over three
 * epochs (and create's 6) on fewer than a third as many connections (10-13 seen). */
START_TEST(each_range_once_per_epoch)
{
    const char *fault = rt_env("RF_TEST_FAULT");
    rt_reset_log();
    char url[1024];
    snprintf(url, sizeof url, "%s/gen/shard-{0000..0001}.tar", fault);
    static run r;
    opts o = {.io_threads = 1, .queue_depth = 4, .epochs = 3};
    rt_collect(url, &o, &r);
    free(r.px);
    ck_assert_uint_eq(r.n, 3 * 2 * N_GEN);
    int rc = rf_test_shell(
        "curl -sf %s/_log | python3 -c '\n"
        "import json, os, sys, collections\n"
        "log = [q for q in json.load(sys.stdin)[\"requests\"] if q[\"path\"] == q[\"target\"]]\n"
        "log = sorted(log, key=lambda q: q[\"arrival\"])[%llu:]\n"
        "n = collections.Counter()\n"
        "for q in log:\n"
        "    t, rng = q[\"target\"], q[\"range\"] or \"\"\n"
        "    size = os.path.getsize(\"%s\" + t)\n"
        "    if t.endswith(\".idx\") or rng == \"bytes=0-0\" or rng.endswith(\"-%%d\" %% (size - 1)):\n"
        "        continue\n"
        "    n[(t, rng)] += 1\n"
        "bad = {k: v for k, v in n.items() if v != 3}\n"
        "conns = len(set(q[\"conn\"] for q in log))\n"
        "print(\"%%d requests on %%d connections\" %% (len(log), conns), file=sys.stderr)\n"
        "if conns * 3 > len(log): sys.exit(\"connections not reused\")\n"
        "sys.exit(\"%%d ranges, %%s\" %% (len(n), bad) if bad or len(n) != %d else 0)'",
        fault, (unsigned long long)r.st.remote_create_requests, data, 2 * N_GEN);
    ck_assert_msg(rc == 0, "the proxy log shows a sample range fetched other than once an epoch");
}
END_TEST

START_TEST(rank_split_equals_local)
{
    opts o = {0};
    rt_ranks_equal_local(data, rt_env("RF_TEST_HTTP"), "gen/shard-{0000..0001}.tar", &o);
}
END_TEST

/* A loader resumed from a state goes on from the same place over HTTP as from files. */
START_TEST(resume_equals_local)
{
    opts o = {.epochs = 2};
    ck_assert_uint_lt(rt_resume_equals_local(data, rt_env("RF_TEST_HTTP"),
                                             "gen/shard-{0000..0001}.tar", &o, 3),
                      2 * 2 * N_GEN);
}
END_TEST

/* A shard replaced during the run (another size, another ETag) is an I/O error naming the
 * URL, never other bytes. */
START_TEST(changed_shard_is_an_error)
{
    char dir[1024], src[1200], dst[1200], url[1024];
    snprintf(dir, sizeof dir, "%s/changing", data);
    snprintf(src, sizeof src, "%s/gen/shard-0000.tar", data);
    snprintf(dst, sizeof dst, "%s/shard.tar", dir);
    ck_assert_int_eq(rf_test_shell("mkdir -p %s && cp %s %s", dir, src, dst), 0);
    snprintf(url, sizeof url, "%s/changing/shard.tar", rt_env("RF_TEST_HTTP"));
    opts o = {.epochs = 50, .depth = 1};
    rf_loader *ld = rt_create_url(url, &o);
    int rc;
    ck_assert_int_eq(rf_test_shell("cat %s %s > %s.new && mv %s.new %s", src, src, dst, dst, dst),
                     0);
    rf_batch *b;
    while ((rc = rf_loader_next(ld, &b)) == 0 || rc == RF_EPOCH_END)
        if (rc == 0)
            rf_loader_release(ld, b, NULL);
    ck_assert_int_eq(rc, RF_EIO);
    const char *m = rf_last_error(ld);
    ck_assert_msg(strstr(m, url) && strstr(m, "changed during the run"), "%s", m);
    rf_loader_destroy(ld);
}
END_TEST

/* ---- inspection ---------------------------------------------------------------------------- */

static int keep_problem(void *ctx, const rf_inspect_problem *p)
{
    snprintf(ctx, RF_ERRMSG_MAX, "%s", p->message);
    return 0;
}

/* rf_shard_inspect (ringfeed-inspect) over a URL reports what it reports for the file: the
 * same samples, members, images, labels and index verdict; a missing shard is a problem
 * naming the URL. */
START_TEST(inspect_url_equals_local)
{
    static const char *const rels[] = {"gen/shard-0000.tar", "noidx/shard-0001.tar",
                                       "users/wds.tar", "users-idx/tarfile.tar"};
    char local[1024], url[1024], msg[RF_ERRMSG_MAX] = "";
    for (size_t i = 0; i < sizeof rels / sizeof rels[0]; i++) {
        snprintf(local, sizeof local, "%s/%s", data, rels[i]);
        snprintf(url, sizeof url, "%s/%s", rt_env("RF_TEST_HTTP"), rels[i]);
        rf_inspect_summary a, b;
        rf_inspect_summary_init(&a);
        rf_inspect_summary_init(&b);
        ck_assert_int_eq(rf_shard_inspect(local, NULL, keep_problem, NULL, msg, &a), 0);
        ck_assert_msg(rf_shard_inspect(url, NULL, keep_problem, NULL, msg, &b) == 0, "%s: %s",
                      url, msg);
        ck_assert_uint_eq(b.samples, a.samples);
        ck_assert_uint_eq(b.members, a.members);
        ck_assert_uint_eq(b.images, a.images);
        ck_assert_uint_eq(b.labeled, a.labeled);
        ck_assert_uint_eq(b.image_bytes, a.image_bytes);
        ck_assert_uint_eq(b.bytes, a.bytes);
        ck_assert_uint_eq(b.has_index, a.has_index);
        ck_assert_uint_eq(b.index_ok, a.index_ok);
    }
    snprintf(url, sizeof url, "%s/gen/no-such.tar", rt_env("RF_TEST_HTTP"));
    ck_assert_int_eq(rf_shard_inspect(url, NULL, keep_problem, NULL, msg, NULL), RF_ENOFILES);
    ck_assert_msg(strstr(msg, url) && strstr(msg, "HTTP 404"), "%s", msg);
}
END_TEST

/* ---- S3 ------------------------------------------------------------------------------------ */

START_TEST(s3_signed_equals_local)
{
    rt_s3_env(NULL);
    char base[256];
    snprintf(base, sizeof base, "s3://%s", rt_env("RF_TEST_S3_BUCKET"));
    equals_local(base, "gen/shard-{0000..0001}.tar", 1);
    equals_local(base, "noidx/shard-{0000..0001}.tar", 1);
}
END_TEST

/* Globbing lists the bucket with ListObjectsV2, two keys a page: five pages here. */
START_TEST(s3_glob_pages)
{
    rt_s3_env(NULL);
    setenv("RF_S3_MAX_KEYS", "2", 1);
    char base[256], url[1024];
    snprintf(base, sizeof base, "s3://%s", rt_env("RF_TEST_S3_BUCKET"));
    rf_stats st = equals_local(base, "many/shard-*.tar", 1);
    ck_assert_uint_ge(st.remote_requests, st.reads + 5 + 5 * 3);
    snprintf(url, sizeof url, "%s/many/none-*.tar", base);
    opts o = {.retries = 1};
    rt_create_fails(url, &o, RF_ENOFILES, (const char *[]){"matched no object", NULL});
}
END_TEST

START_TEST(s3_refusals)
{
    char url[1024];
    snprintf(url, sizeof url, "s3://%s/gen/shard-0000.tar", rt_env("RF_TEST_S3_BUCKET"));
    opts o = {.retries = 1};
    rt_s3_env("wrong-secret");
    char key4[8];
    snprintf(key4, sizeof key4, "%.4s...", rt_env("RF_TEST_S3_KEY"));
    rt_create_fails(url, &o, -13, (const char *[]){url, "HTTP 403", "SignatureDoesNotMatch",
                                                     "from the environment", key4, NULL});
    /* no key anywhere: nothing is sent (docs/remote.md "S3 credentials") */
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    setenv("HOME", rf_test_mkdtemp("s3-home"), 1);
    setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
    rt_create_fails(url, &o, -13, (const char *[]){url, "no S3 credentials",
                                                     "AWS_NO_SIGN_REQUEST", NULL});
    /* unsigned when asked: the private bucket refuses, the public-read one serves */
    setenv("AWS_NO_SIGN_REQUEST", "YES", 1);
    rt_create_fails(url, &o, -13, (const char *[]){url, "HTTP 403", "unsigned", NULL});
    char base[256];
    snprintf(base, sizeof base, "s3://%s", rt_env("RF_TEST_S3_PUBLIC_BUCKET"));
    equals_local(base, "gen/shard-{0000..0001}.tar", 1);
}
END_TEST

/* ---- the data, and the suite ------------------------------------------------------------- */

static int make_data(const char *dir)
{
    char p[1024], q[1024];
    const char *labels[10] = {"0", "1", "2\n", "3", " 4", "5", "6", "7", "8", "9"};
    int rc = 0;
#define SUB(x) (snprintf(p, sizeof p, "%s/%s", dir, x), p)
    rc |= rf_test_shell("mkdir -p %s/users-idx", dir);
    rc |= rf_test_make_shards(SUB("gen"), 2, N_GEN, 10, 1, 1, 96);
    rc |= rf_test_make_shards(SUB("noidx"), 2, N_GEN, 10, 1, 0, 96);
    rc |= rf_test_make_shards(SUB("many"), 5, 3, 10, 2, 1, 64);
    rc |= rf_test_shell("mkdir -p %s", SUB("users/gnu"));
    free(rf_test_make_label_shard(p, labels, 10));
    rc |= rf_test_shell("python3 %s/tests/remote_users.py %s/users/gnu/shard-0000.tar %s/users",
                        RF_SOURCE_DIR, dir, dir);
    rc |= rf_test_shell("cp %s/users/gnu/shard-0000.tar %s/users-idx/gnu.tar && cp "
                        "%s/users/tarfile.tar %s/users/wds.tar %s/users-idx/", dir, dir, dir,
                        dir, dir);
    const char *names[3] = {"gnu", "tarfile", "wds"};
    for (int i = 0; i < 3; i++) {
        char err[512];
        snprintf(q, sizeof q, "%s/users-idx/%s.tar", dir, names[i]);
        if (rf_shard_write_index(q, NULL, err, sizeof err) != 0) {
            fprintf(stderr, "%s: %s\n", q, err);
            rc = 1;
        }
    }
    /* Real photographs (mate-backgrounds, cjpeg): optional, the photos test says so. */
    if (rf_test_shell("python3 %s/datasets/photos.py --output '%s/photos/photos-%%04d.tar' "
                      "--images 16 --per-shard 8 >/dev/null 2>&1", RF_SOURCE_DIR, dir) != 0)
        fprintf(stderr, "make-data: photos not written (datasets/photos.py failed)\n");
#undef SUB
    return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
    TCase *tc;
    int rc = rt_main_args(argc, argv, "remote", make_data, &data, &tc);
    if (rc >= 0)
        return rc;
    tcase_add_test(tc, http_index_equals_local);
    tcase_add_test(tc, http_scan_equals_local);
    tcase_add_loop_test(tc, users_shards_equal_local, 0, sizeof users / sizeof users[0]);
    tcase_add_test(tc, photos_equal_local);
    tcase_add_test(tc, https_with_ca);
    tcase_add_test(tc, errors_name_url);
    tcase_add_loop_test(tc, fault_retried_to_right_bytes, 0, sizeof faults / sizeof faults[0]);
    tcase_add_test(tc, exhausted_retries_error);
    tcase_add_test(tc, stalled_server_timeout);
    tcase_add_test(tc, stall_timeout_retried);
    tcase_add_test(tc, each_range_once_per_epoch);
    tcase_add_test(tc, rank_split_equals_local);
    tcase_add_test(tc, resume_equals_local);
    tcase_add_test(tc, changed_shard_is_an_error);
    tcase_add_test(tc, inspect_url_equals_local);
    tcase_add_test(tc, s3_signed_equals_local);
    tcase_add_test(tc, s3_glob_pages);
    tcase_add_test(tc, s3_refusals);
    return rt_run("remote", tc);
}
