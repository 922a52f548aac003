/* remoteutil.h — helpers of the suites that read remote shards from the real servers
 * (test_remote.c, test_remote_cache.c and test_remote_tokens.c, run under tests/servers/servers.py). */
#ifndef RF_REMOTEUTIL_H
#define RF_REMOTEUTIL_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

#include "ringfeed.h"

#define N_GEN 12        /* samples per generator shard (2 shards) */
#define SIDE 32         /* output side */
#define SECRET_PW "pw-R4nd0m-s3cr3t"

typedef struct run {
    uint8_t *px;
    size_t px_len;
    uint64_t ids[1024];
    int32_t labels[1024];
    char keys[1024][48];
    uint32_t n;
    rf_stats st;
} run;

typedef struct opts {
    uint32_t io_threads, epochs, rank, world;
    uint32_t retries;          /* 0: the default */
    uint32_t engine_tries;     /* rf_test_hooks.remote_engine_tries */
    int skip;
    uint32_t depth, timeout_ms; /* prefetch_depth, next_timeout_ms (0: defaults) */
    uint32_t queue_depth;       /* io_queue_depth (0: default) */
    uint32_t remote_timeout_ms; /* rf_config.remote_timeout_ms (0: default) */
    const void *state;          /* resume_state (NULL: none) */
    uint64_t state_len;
    const char *cache_dir;      /* rf_config.cache_dir (NULL: no cache) */
    uint64_t cache_bytes;
    uint64_t wait_fills;        /* rt_collect: before the loader is destroyed, wait (at most
                                   30 s) until this many cache fills ended (published or
                                   failed), since a fill runs beside the batches */
    /* rt_config's last step, when set: a suite's own settings (a token source) */
    void (*config)(rf_config *c, const void *ctx);
    const void *config_ctx;
    int key_base; /* rt_collect: keep each key's part after its last '/' (a token batch's key
                     is its file's path or URL, which differ between the local and remote runs) */
} opts;

/* The environment variable name (set by servers.py); fails the test when unset. */
const char *rt_env(const char *name);
/* No credential in a message: the URL's password, the S3 key and secret, a signature. */
void rt_no_secrets(const char *msg);
/* The config of a loader over npats patterns with o's settings. */
rf_config rt_config(const char **pats, uint32_t npats, const opts *o);
/* Create (with o's test hooks); the message checked for credentials. */
rf_loader *rt_create(const rf_config *c, const opts *o, char *err, size_t cap, int *rc);
/* A loader over c that must be created (o's test hooks). */
rf_loader *rt_create_ok(const rf_config *c, const opts *o);
/* A loader over the one pattern url that must be created. */
rf_loader *rt_create_url(const char *url, const opts *o);
/* Every batch of the loader over `pattern` into r; the test fails on any error. */
void rt_collect(const char *pattern, const opts *o, run *r);
/* The same over any config (a token source, several patterns), with o's hooks and fills. */
void rt_collect_config(const rf_config *c, const opts *o, run *r);
/* create over `url` (rt_config_fails: over c) fails with code `code` (0: any) and a message
 * holding each of the NULL-terminated words (and no credential: rt_create checks). */
void rt_create_fails(const char *url, const opts *o, int code, const char *const *words);
void rt_config_fails(const rf_config *c, const opts *o, int code, const char *const *words);
/* Append batch b's samples and pixels to r, then release it. */
void rt_take(rf_loader *ld, rf_batch *b, run *r);
/* A server suite's command line: `--make-data DIR` runs make_data (its status), `DIR` sets
 * *root, makes the suite's test case in *tc (300 s a test) and returns -1 (add the tests,
 * then rt_run), anything else prints the usage and returns 2. */
int rt_main_args(int argc, char **argv, const char *suite, int (*make_data)(const char *dir),
                 const char **root, TCase **tc);
/* Run the suite `suite` of the one test case tc: its exit status. */
int rt_run(const char *suite, TCase *tc);
/* Each key of r becomes its part after the last '/' (opts.key_base). */
void rt_key_base(run *r);
/* base/rel read remotely equals data/rel read locally, both with o's settings, at 1 and
 * `threads` I/O threads: the same samples and bytes (rt_same_run), the curl engine with the
 * threads asked, the same reads and bytes read, at least one request a read. *first gets the
 * remote run at 1 thread, whose px the caller frees (a fault proxy faults the first attempts
 * at each range: that run meets them, the second none). */
void rt_equals_local(const char *data, const char *base, const char *rel, const opts *o,
                     uint32_t threads, run *first);
/* Each rank of 3 (2 I/O threads, 2 epochs, else o's settings) reads the same over base/rel
 * as over data/rel. */
void rt_ranks_equal_local(const char *data, const char *base, const char *rel, const opts *o);
/* A loader over data/rel (o's settings) takes `taken` batches and saves its state; loaders
 * resumed from it over the local files and over base/rel deliver the same samples and bytes.
 * Returns how many samples the resumed loaders delivered. */
uint32_t rt_resume_equals_local(const char *data, const char *base, const char *rel,
                                const opts *o, uint32_t taken);
/* a and b hold the same samples and byte-equal pixels. */
void rt_same_run(const run *a, const run *b, const char *what);
/* Wait until `fills` cache fills of ld ended (at most 30 s; 0: no wait), then its stats. */
void rt_wait_fills(rf_loader *ld, uint64_t fills, rf_stats *st);
/* Requests in the fault proxy's log (since its last reset) for targets under `prefix` that
 * are sample reads: not create's (the first `create` to arrive, a loader's
 * rf_stats.remote_create_requests, made before any sample read; and one-byte opens, index
 * fetches and reads to a shard's end, whoever made them) and not a fill's (the whole object,
 * which ends at the shard's end too). data: the served root, where the targets' sizes are
 * read. */
long rt_sample_gets(const char *data, const char *prefix, uint64_t create);
/* The AWS_* settings of moto's S3 server (servers.py's RF_TEST_S3_*), with another secret
 * key when secret is not NULL. */
void rt_s3_env(const char *secret);
/* Empty the fault proxy's log and its fault counters (POST /_reset). */
void rt_reset_log(void);

#endif
