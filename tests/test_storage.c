/* test_storage.c — the page-cache hit ratio says what came from storage (rf_stats
 * storage_read_bytes against bytes_read): an epoch over shards just evicted with
 * posix_fadvise(DONTNEED) is below 0.1 and the epoch repeated right after it above 0.9, with
 * pread and io_uring, with reads io_uring hands to its worker threads, with warm hints (which
 * read ahead from storage: the residency check at submit counted those pages as hits), and
 * with O_DIRECT (never a hit). The shards have no .idx, so create scans their tar headers
 * from storage too. The count is current at every completion: a stats call made as a read
 * is delivered already holds what storage gave for it, workers just born included.
 *
 * The whole suite is skipped (exit 77, with the reason) where it cannot measure: a kernel
 * without per-thread I/O accounting, or a file system under RF_TEST_TMP on which
 * posix_fadvise(DONTNEED) leaves pages resident (checked with mincore). */
#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/io.h"
#include "ringfeed.h"
#include "pipeline/testing.h"
#include "testutil.h"

#define N_SHARDS 3
#define N_PER_SHARD 100

typedef struct variant {
    uint32_t engine;  /* RF_IO_PREAD or RF_IO_URING */
    int async;        /* io_uring: every read through its worker threads */
    int warm, odirect;
} variant;

static void shard_path(const char *dir, uint32_t i, char *out, size_t n)
{
    snprintf(out, n, "%s/shard-%04u.tar", dir, i);
}

/* Shards of a few MB each, written without indexes. */
static char *make_data(uint64_t seed)
{
    char *dir = rf_test_mkdtemp("storage");
    ck_assert_int_eq(rf_test_make_shards(dir, N_SHARDS, N_PER_SHARD, 10, seed, 0, 320), 0);
    return dir;
}

/* The shards go when the test is done: each test writes its own ~16 MB. */
static void remove_data(char *dir)
{
    for (uint32_t i = 0; i < N_SHARDS; i++) {
        char p[600];
        shard_path(dir, i, p, sizeof p);
        unlink(p);
    }
    rmdir(dir);
}

/* Evict every shard; the test cannot mean anything if a page stays. */
static void evict_all(const char *dir)
{
    for (uint32_t i = 0; i < N_SHARDS; i++) {
        char p[600];
        shard_path(dir, i, p, sizeof p);
        long long left = rf_test_evict(p);
        ck_assert_msg(left == 0, "%s: %lld bytes still resident after DONTNEED", p, left);
    }
}

/* One epoch over the shards; returns the stats after it. */
static rf_stats one_epoch(const char *dir, variant v)
{
    char pattern[600];
    const char *pat;
    snprintf(pattern, sizeof pattern, "%s/shard-*.tar", dir);
    rf_config c = rf_test_host_config(&pat, pattern, 32);
    c.batch_size = 16;
    c.decode_threads = 2;
    c.epochs = 1;
    c.io_engine = v.engine;
    c.warm = v.warm;
    c.odirect = v.odirect;
    rf_test_hooks h = {.io_async = v.async};
    rf_loader *ld;
    char err[512];
    int rc = rf_loader_create_hooked(&c, &h, &ld, err, sizeof err);
    ck_assert_msg(rc == 0, "create: %d %s", rc, err);
    rf_stats st = rf_test_drain(ld);
    rf_loader_destroy(ld);
    ck_assert_str_eq(st.io_engine, v.engine == RF_IO_URING ? "io_uring" : "pread");
    ck_assert_msg(st.odirect == (uint32_t)v.odirect, "odirect %u: %s", st.odirect, st.memory_why);
    ck_assert_msg(st.storage_measured == 1, "not measured: %s", st.storage_why);
    ck_assert_str_eq(st.storage_why, "");
    ck_assert_uint_eq(st.samples_delivered, N_SHARDS * N_PER_SHARD);
    return st;
}

/* rf_stats' definition of the hit ratio (include/ringfeed.h). */
static double hit_ratio(const rf_stats *st)
{
    ck_assert_uint_gt(st->bytes_read, 0);
    return st->storage_read_bytes >= st->bytes_read
               ? 0.0
               : 1.0 - (double)st->storage_read_bytes / (double)st->bytes_read;
}

static void cold_then_warm(variant v)
{
    char *dir = make_data(11 + v.engine + 2u * (uint32_t)v.async);
    evict_all(dir);
    rf_stats cold = one_epoch(dir, v);
    /* Every byte came from storage: at least the bytes read (the aligned blocks under
     * O_DIRECT), besides the headers create scanned and what readahead took in. */
    ck_assert_uint_ge(cold.storage_read_bytes, cold.bytes_read);
    ck_assert_msg(hit_ratio(&cold) < 0.1, "cold epoch: hit ratio %.3f (storage %llu of %llu bytes "
                  "read; resident at submit %llu of %llu)", hit_ratio(&cold),
                  (unsigned long long)cold.storage_read_bytes,
                  (unsigned long long)cold.bytes_read, (unsigned long long)cold.cache_hit_bytes,
                  (unsigned long long)cold.cache_checked_bytes);
    rf_stats hot = one_epoch(dir, v);
    printf("%s%s%s%s: cold epoch hit ratio %.3f (resident at submit %.3f), repeated %.3f\n",
           v.engine == RF_IO_URING ? "io_uring" : "pread", v.async ? " via io-wq" : "",
           v.warm ? " warm" : "", v.odirect ? " odirect" : "", hit_ratio(&cold),
           (double)cold.cache_hit_bytes / (double)cold.cache_checked_bytes, hit_ratio(&hot));
    if (v.odirect) /* every read goes to storage again */
        ck_assert_msg(hit_ratio(&hot) < 0.1, "O_DIRECT: hit ratio %.3f", hit_ratio(&hot));
    else
        ck_assert_msg(hit_ratio(&hot) > 0.9, "repeated epoch: hit ratio %.3f (storage %llu of "
                      "%llu bytes read)", hit_ratio(&hot),
                      (unsigned long long)hot.storage_read_bytes,
                      (unsigned long long)hot.bytes_read);
    remove_data(dir);
}

START_TEST(pread_cold_then_warm) { cold_then_warm((variant){.engine = RF_IO_PREAD}); }
END_TEST
START_TEST(uring_cold_then_warm) { cold_then_warm((variant){.engine = RF_IO_URING}); }
END_TEST
/* The reads io_uring's workers make are charged to them, not to the I/O thread. */
START_TEST(uring_workers_cold_then_warm)
{
    cold_then_warm((variant){.engine = RF_IO_URING, .async = 1});
}
END_TEST
/* Warm hints read from storage ahead of the reads: still storage. */
START_TEST(pread_warm_hints_cold_then_warm)
{
    cold_then_warm((variant){.engine = RF_IO_PREAD, .warm = 1});
}
END_TEST
START_TEST(uring_warm_hints_cold_then_warm)
{
    cold_then_warm((variant){.engine = RF_IO_URING, .warm = 1});
}
END_TEST
START_TEST(pread_odirect_never_hits) { cold_then_warm((variant){.engine = RF_IO_PREAD, .odirect = 1}); }
END_TEST
START_TEST(uring_odirect_never_hits) { cold_then_warm((variant){.engine = RF_IO_URING, .odirect = 1}); }
END_TEST

/* ---- each done() already sees its read in the storage count ---------------------------- */

#define ORDER_READS 96u
#define ORDER_LEN (64u << 10)

typedef struct order_src {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    rf_io_req reqs[ORDER_READS];
    uint32_t next, ndone;
    int go, stop;
    const rf_io_ops *ops;
    rf_io_engine *e;         /* set before go */
    uint64_t done_bytes;     /* bytes of the requests done so far (I/O thread only) */
    uint32_t short_of;       /* done() calls whose storage count was below done_bytes */
    uint64_t first_storage, first_done; /* the first such call's figures */
    int failed;              /* a read failed */
} order_src;

static int order_take(void *ctx, rf_io_req **out, int max, int block)
{
    order_src *s = ctx;
    pthread_mutex_lock(&s->mu);
    while (block && !s->stop && (!s->go || s->next == ORDER_READS))
        pthread_cond_wait(&s->cv, &s->mu);
    int k = -1;
    if (!s->stop) {
        for (k = 0; s->go && k < max && s->next < ORDER_READS; k++)
            out[k] = &s->reqs[s->next++];
    }
    pthread_mutex_unlock(&s->mu);
    return k;
}

/* On the I/O thread: the engine's storage count, published before this completion's done(),
 * must already hold what storage gave for every read done so far (each was a cold miss). */
static void order_done(void *ctx, rf_io_req *r)
{
    order_src *s = ctx;
    s->failed |= r->result != 0;
    s->done_bytes += r->len;
    rf_io_stats st;
    s->ops->stats(s->e, &st);
    if (st.storage_bytes < s->done_bytes && s->short_of++ == 0) {
        s->first_storage = st.storage_bytes;
        s->first_done = s->done_bytes;
    }
    pthread_mutex_lock(&s->mu);
    s->ndone++;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* rf_stats taken the moment a batch arrives must not show fewer storage bytes than bytes
 * read on a cold pass: reads (io_uring's forced through its workers) in an order readahead
 * cannot guess, over a file just evicted. (The storage count once refreshed the workers'
 * counters only every 50 ms: a stats call right after an epoch's last batch missed their
 * last reads.) */
static void counted_before_done(const rf_io_ops *ops)
{
    char *dir = rf_test_mkdtemp("storage-order"), path[600];
    snprintf(path, sizeof path, "%s/data.bin", dir);
    size_t bytes = (size_t)ORDER_READS * ORDER_LEN;
    uint8_t *data = malloc(bytes), *dst = malloc(bytes);
    ck_assert_ptr_nonnull(data);
    ck_assert_ptr_nonnull(dst);
    for (size_t i = 0; i < bytes; i++)
        data[i] = (uint8_t)(i * 131u + (i >> 12));
    rf_test_write_file(path, data, bytes);
    ck_assert_int_eq(rf_test_evict(path), 0);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ck_assert_int_ge(fd, 0);

    static order_src s;
    memset(&s, 0, sizeof s);
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, NULL);
    s.ops = ops;
    for (uint32_t i = 0; i < ORDER_READS; i++) {
        uint32_t block = (i * 37u) % ORDER_READS; /* 37 is prime to 96: every block once */
        s.reqs[i] = (rf_io_req){.fd = fd, .len = ORDER_LEN, .offset = (uint64_t)block * ORDER_LEN,
                                .dst = dst + (size_t)block * ORDER_LEN};
    }
    rf_io_source src = {.take = order_take, .done = order_done, .ctx = &s};
    rf_io_params p = {.threads = 1, .queue_depth = 8, .max_retries = 4,
                      .flags = RF_IO_ACCOUNT | RF_IO_FORCE_ASYNC};
    rf_err err = {0};
    ck_assert_msg(s.ops->start(&p, &src, &s.e, &err) == 0, "start: %s", err.msg);
    pthread_mutex_lock(&s.mu);
    s.go = 1;
    pthread_cond_broadcast(&s.cv);
    while (s.ndone < ORDER_READS)
        pthread_cond_wait(&s.cv, &s.mu);
    s.stop = 1;
    pthread_cond_broadcast(&s.cv);
    pthread_mutex_unlock(&s.mu);
    rf_io_stats fin;
    s.ops->stop(s.e, &fin);
    close(fd);
    ck_assert(!s.failed);
    ck_assert(memcmp(dst, data, bytes) == 0);
    ck_assert_msg(s.short_of == 0, "%u of %u done() calls saw fewer storage bytes than bytes read "
                  "(first: %llu < %llu)", s.short_of, ORDER_READS,
                  (unsigned long long)s.first_storage, (unsigned long long)s.first_done);
    ck_assert_uint_ge(fin.storage_bytes, bytes);
    unlink(path);
    rmdir(dir);
    free(data);
    free(dst);
}

START_TEST(uring_workers_counted_before_done) { counted_before_done(&rf_io_uring_ops); }
END_TEST
/* pread charges the reading thread, sampled after each read: the same holds. */
START_TEST(pread_counted_before_done) { counted_before_done(&rf_io_pread_ops); }
END_TEST

/* Why this machine cannot run the suite ("" when it can): no accounting, or an eviction that
 * leaves pages resident on RF_TEST_TMP's file system. */
static void cannot_measure(char *why, size_t n)
{
    why[0] = 0;
    if (!rf_io_acct_supported(why, n))
        return;
    char *dir = rf_test_mkdtemp("storage-probe"), path[600];
    snprintf(path, sizeof path, "%s/probe", dir);
    static char block[1 << 20];
    memset(block, 0x5a, sizeof block);
    rf_test_write_file(path, block, sizeof block);
    long long left = rf_test_evict(path);
    unlink(path);
    rmdir(dir);
    if (left != 0)
        snprintf(why, n, "posix_fadvise(DONTNEED) left %lld of %zu bytes resident on %s", left,
                 sizeof block, dir);
}

int main(void)
{
    char why[256];
    cannot_measure(why, sizeof why);
    if (why[0]) {
        printf("storage: skipped: %s\n", why);
        return 77;
    }
    Suite *s = suite_create("storage");
    TCase *tc = tcase_create("storage");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, pread_cold_then_warm);
    tcase_add_test(tc, pread_warm_hints_cold_then_warm);
    tcase_add_test(tc, pread_odirect_never_hits);
    tcase_add_test(tc, pread_counted_before_done);
    char uwhy[160];
    if (rf_io_uring_probe(uwhy, sizeof uwhy) == 0) {
        tcase_add_test(tc, uring_cold_then_warm);
        tcase_add_test(tc, uring_workers_cold_then_warm);
        tcase_add_test(tc, uring_workers_counted_before_done);
        tcase_add_test(tc, uring_warm_hints_cold_then_warm);
        tcase_add_test(tc, uring_odirect_never_hits);
    } else {
        printf("storage: io_uring tests not run: %s\n", uwhy);
    }
    suite_add_tcase(s, tc);
    return rf_test_run_suite(s);
}
