/* remoteutil.c — the helpers of the suites that read remote shards from the real servers
 * (test_remote.c, test_remote_cache.c, test_remote_tokens.c): loaders over URLs, their runs, and the comparisons. */
#include "remoteutil.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pipeline/testing.h"
#include "testutil.h"

const char *rt_env(const char *name)
{
    const char *v = getenv(name);
    ck_assert_msg(v && *v, "%s is not set: run under tests/servers/servers.py (ctest remote)", name);
    return v;
}

/* No credential in a message: the URL's password, the S3 key and secret, a signature. */
void rt_no_secrets(const char *msg)
{
    const char *s3k = getenv("RF_TEST_S3_KEY"), *s3s = getenv("RF_TEST_S3_SECRET");
    const char *bad[] = {SECRET_PW, "X-Amz-Signature", "Authorization", s3k, s3s, "wrong-secret"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(!bad[i] || !*bad[i] || !strstr(msg, bad[i]), "credential in \"%s\"", msg);
}

rf_config rt_config(const char **pats, uint32_t npats, const opts *o)
{
    rf_config c = rf_test_host_config(pats, pats[0], SIDE);
    c.shard_count = npats;
    c.batch_size = 5;
    c.decode_threads = 2;
    c.epochs = o->epochs ? o->epochs : 1;
    c.io_threads = o->io_threads;
    c.seed = 7;
    c.world_size = o->world ? o->world : 1;
    c.rank = o->rank;
    c.remote_retries = o->retries;
    c.on_error = o->skip ? RF_ON_ERROR_SKIP : RF_ON_ERROR_FAIL;
    c.prefetch_depth = o->depth;
    c.next_timeout_ms = o->timeout_ms;
    if (o->queue_depth)
        c.io_queue_depth = o->queue_depth;
    c.remote_timeout_ms = o->remote_timeout_ms;
    c.resume_state = o->state;
    c.resume_state_bytes = o->state_len;
    c.cache_dir = o->cache_dir;
    c.cache_bytes = o->cache_bytes;
    if (o->config)
        o->config(&c, o->config_ctx);
    return c;
}

rf_loader *rt_create(const rf_config *c, const opts *o, char *err, size_t cap, int *rc)
{
    rf_test_hooks h = {.remote_engine_tries = o->engine_tries};
    rf_loader *ld = NULL;
    err[0] = 0;
    *rc = rf_loader_create_hooked(c, &h, &ld, err, cap);
    rt_no_secrets(err);
    return ld;
}

rf_loader *rt_create_ok(const rf_config *c, const opts *o)
{
    char err[RF_ERRMSG_MAX];
    int rc;
    rf_loader *ld = rt_create(c, o, err, sizeof err, &rc);
    ck_assert_msg(rc == 0, "create %s: %d %s", c->shards[0], rc, err);
    return ld;
}

/* A loader over the one pattern url that must be created. */
rf_loader *rt_create_url(const char *url, const opts *o)
{
    const char *pats[1] = {url};
    rf_config c = rt_config(pats, 1, o);
    return rt_create_ok(&c, o);
}

void rt_create_fails(const char *url, const opts *o, int code, const char *const *words)
{
    const char *pats[1] = {url};
    rf_config c = rt_config(pats, 1, o);
    rt_config_fails(&c, o, code, words);
}

void rt_config_fails(const rf_config *c, const opts *o, int code, const char *const *words)
{
    char err[RF_ERRMSG_MAX];
    int rc;
    rf_loader *ld = rt_create(c, o, err, sizeof err, &rc);
    rf_loader_destroy(ld);
    ck_assert_msg(rc != 0 && (!code || rc == code), "%s: create gave %d (%s)", c->shards[0], rc,
                  err);
    for (; *words; words++)
        ck_assert_msg(strstr(err, *words), "%s: '%s' not in \"%s\"", c->shards[0], *words, err);
}

void rt_take(rf_loader *ld, rf_batch *b, run *r)
{
    r->px = realloc(r->px, r->px_len + b->data_bytes);
    memcpy(r->px + r->px_len, b->data, b->data_bytes);
    r->px_len += b->data_bytes;
    for (uint32_t i = 0; i < b->count && r->n < 1024; i++, r->n++) {
        r->ids[r->n] = b->sample_ids[i];
        r->labels[r->n] = b->labels[i];
        /* a long key keeps its end: a token batch's key is its file's path or URL */
        size_t len = strlen(b->keys[i]), cap = sizeof r->keys[0] - 1;
        snprintf(r->keys[r->n], sizeof r->keys[0], "%s", b->keys[i] + (len > cap ? len - cap : 0));
    }
    ck_assert_int_eq(rf_loader_release(ld, b, NULL), 0);
}

int rt_main_args(int argc, char **argv, const char *suite, int (*make_data)(const char *dir),
                 const char **root, TCase **tc)
{
    if (argc == 3 && strcmp(argv[1], "--make-data") == 0)
        return make_data(argv[2]);
    if (argc != 2) {
        fprintf(stderr, "usage: test_%s --make-data DIR | test_%s DIR (under "
                        "tests/servers/servers.py: ctest %s_data and %s run both)\n", suite,
                suite, suite, suite);
        return 2;
    }
    *root = argv[1];
    *tc = tcase_create(suite);
    tcase_set_timeout(*tc, 300);
    return -1;
}

int rt_run(const char *suite, TCase *tc)
{
    Suite *s = suite_create(suite);
    suite_add_tcase(s, tc);
    return rf_test_run_suite(s);
}

/* Every batch of the loader over `pattern` (one pattern) into r; the test fails on any
 * error. */
void rt_collect(const char *pattern, const opts *o, run *r)
{
    const char *pats[1] = {pattern};
    rf_config c = rt_config(pats, 1, o);
    rt_collect_config(&c, o, r);
}

void rt_collect_config(const rf_config *c, const opts *o, run *r)
{
    rf_loader *ld = rt_create_ok(c, o);
    memset(r, 0, sizeof *r);
    rf_batch *b;
    int rc;
    while ((rc = rf_loader_next(ld, &b)) == 0 || rc == RF_EPOCH_END)
        if (rc == 0)
            rt_take(ld, b, r);
    ck_assert_msg(rc == RF_DONE, "%s: %d %s", c->shards[0], rc, rf_last_error(ld));
    rt_wait_fills(ld, o->wait_fills, &r->st);
    rf_loader_destroy(ld);
    if (o->key_base)
        rt_key_base(r);
}

void rt_key_base(run *r)
{
    for (uint32_t i = 0; i < r->n; i++) {
        const char *slash = strrchr(r->keys[i], '/');
        if (slash)
            memmove(r->keys[i], slash + 1, strlen(slash + 1) + 1);
    }
}

void rt_equals_local(const char *data, const char *base, const char *rel, const opts *o,
                     uint32_t threads, run *first)
{
    char local[1024], url[1024];
    snprintf(local, sizeof local, "%s/%s", data, rel);
    snprintf(url, sizeof url, "%s/%s", base, rel);
    static run lr, rr;
    for (uint32_t t = 1;; t = threads) {
        opts ot = *o;
        ot.io_threads = t;
        rt_collect(local, &ot, &lr);
        rt_collect(url, &ot, &rr);
        rt_same_run(&rr, &lr, url);
        ck_assert_str_eq(rr.st.io_engine, "curl");
        ck_assert_uint_eq(rr.st.io_threads, t);
        ck_assert_uint_eq(rr.st.reads, lr.st.reads);
        ck_assert_uint_eq(rr.st.bytes_read, lr.st.bytes_read);
        ck_assert(rr.st.remote_requests >= rr.st.reads);
        free(lr.px);
        if (t == 1) {
            *first = rr;
        } else {
            free(rr.px);
            return;
        }
    }
}

void rt_same_run(const run *a, const run *b, const char *what)
{
    ck_assert_msg(a->n == b->n && a->n > 0, "%s: %u samples, local %u", what, a->n, b->n);
    for (uint32_t i = 0; i < a->n; i++) {
        ck_assert_msg(a->ids[i] == b->ids[i] && a->labels[i] == b->labels[i] &&
                      strcmp(a->keys[i], b->keys[i]) == 0, "%s: sample %u: %s/%d, local %s/%d",
                      what, i, a->keys[i], a->labels[i], b->keys[i], b->labels[i]);
    }
    ck_assert_msg(a->px_len == b->px_len && memcmp(a->px, b->px, a->px_len) == 0,
                  "%s: decoded batches differ from the local run", what);
}

static int fills_ended(const rf_stats *st, const void *fills)
{
    return st->shard_cache_fills + st->shard_cache_fill_failures >= *(const uint64_t *)fills;
}

void rt_wait_fills(rf_loader *ld, uint64_t fills, rf_stats *st)
{
    ck_assert_msg(rf_test_poll_stats(ld, st, fills_ended, &fills),
                  "%llu of %llu cache fills ended after 30 s: %s",
                  (unsigned long long)(st->shard_cache_fills + st->shard_cache_fill_failures),
                  (unsigned long long)fills, st->shard_cache_why);
}

long rt_sample_gets(const char *data, const char *prefix, uint64_t create)
{
    char out[1200];
    snprintf(out, sizeof out, "%s/sample-gets", rf_test_mkdtemp("rcache-log"));
    int rc = rf_test_shell(
        "curl -sf %s/_log | python3 -c '\n"
        "import json, os, sys\n"
        "n = 0\n"
        "log = sorted(json.load(sys.stdin)[\"requests\"], key=lambda q: q[\"arrival\"])\n"
        "for q in log[%llu:]:\n"
        "    t, rng = q[\"target\"].split(\"?\")[0], q[\"range\"] or \"\"\n"
        "    if not t.startswith(\"%s\") or t.endswith(\".idx\") or rng == \"bytes=0-0\":\n"
        "        continue\n"
        "    if not rng.endswith(\"-%%d\" %% (os.path.getsize(\"%s\" + t) - 1)):\n"
        "        n += 1\n"
        "print(n)' > %s", rt_env("RF_TEST_FAULT"), (unsigned long long)create, prefix, data,
        out);
    ck_assert_int_eq(rc, 0);
    FILE *f = fopen(out, "r");
    long n = -1;
    ck_assert(f && fscanf(f, "%ld", &n) == 1);
    fclose(f);
    return n;
}

void rt_reset_log(void)
{
    ck_assert_int_eq(rf_test_shell("curl -sf -X POST %s/_reset >/dev/null",
                                   rt_env("RF_TEST_FAULT")), 0);
}

void rt_s3_env(const char *secret)
{
    setenv("AWS_ACCESS_KEY_ID", rt_env("RF_TEST_S3_KEY"), 1);
    setenv("AWS_SECRET_ACCESS_KEY", secret ? secret : rt_env("RF_TEST_S3_SECRET"), 1);
    setenv("AWS_ENDPOINT_URL", rt_env("RF_TEST_S3_ENDPOINT"), 1);
    setenv("AWS_REGION", rt_env("RF_TEST_S3_REGION"), 1);
}

void rt_ranks_equal_local(const char *data, const char *base, const char *rel, const opts *o)
{
    char local[1024], url[1024];
    snprintf(local, sizeof local, "%s/%s", data, rel);
    snprintf(url, sizeof url, "%s/%s", base, rel);
    static run lr, rr;
    for (uint32_t rank = 0; rank < 3; rank++) {
        opts ro = *o;
        ro.io_threads = 2, ro.epochs = 2, ro.rank = rank, ro.world = 3;
        rt_collect(local, &ro, &lr);
        rt_collect(url, &ro, &rr);
        rt_same_run(&rr, &lr, url);
        free(lr.px);
        free(rr.px);
    }
}

uint32_t rt_resume_equals_local(const char *data, const char *base, const char *rel,
                                const opts *o, uint32_t taken)
{
    char local[1024], url[1024];
    snprintf(local, sizeof local, "%s/%s", data, rel);
    snprintf(url, sizeof url, "%s/%s", base, rel);
    rf_loader *ld = rt_create_url(local, o);
    rf_batch *b;
    for (uint32_t i = 0; i < taken; i++) {
        ck_assert_int_eq(rf_loader_next(ld, &b), 0);
        rf_loader_release(ld, b, NULL);
    }
    static uint8_t state[4096];
    uint64_t len = 0;
    ck_assert_int_eq(rf_loader_state(ld, state, sizeof state, &len), 0);
    rf_loader_destroy(ld);
    static run lr, rr;
    opts ro = *o;
    ro.state = state;
    ro.state_len = len;
    rt_collect(local, &ro, &lr);
    rt_collect(url, &ro, &rr);
    rt_same_run(&rr, &lr, url);
    free(lr.px);
    free(rr.px);
    return rr.n;
}
