/* test_lifecycle.c — lifecycle faults (docs/reliability.md, "Lifecycle"): an allocation that
 * fails at each site of create (injected, and a real one from an absurd batch shape), no GPU or
 * no driver, a sticky CUDA-style error in submit or release (injected on the host backend),
 * destroy with the pipeline blocked and batches leased, a consumer that stops mid-epoch,
 * fork() after create, and rf_loader_stop (threads gone, batches still readable). Everything runs on the host backend; CUDA is queried only inside a
 * forked child (Check forks too, but the suite must also hold with CK_FORK=no). */
#include <check.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ringfeed.h"
#include "pipeline/testing.h"
#include "testutil.h"

#define NSH 2
#define NPER 24
#define NS (NSH * NPER)
#define SIZE 32

static char *g_dir;
static char g_pat[600];

static void make_data(void)
{
    if (g_dir)
        return;
    g_dir = rf_test_mkdtemp("lifecycle");
    ck_assert_int_eq(rf_test_make_shards(g_dir, NSH, NPER, 10, 5, 1, 64), 0);
    snprintf(g_pat, sizeof g_pat, "%s/shard-*.tar", g_dir);
}

static const char *g_pats[1];

static rf_config config(uint32_t batch)
{
    rf_config c = rf_test_host_config(g_pats, g_pat, SIZE);
    c.batch_size = batch;
    c.decode_threads = 2;
    c.epochs = 1;
    c.seed = 3;
    return c;
}

/* Seconds on the monotonic clock, from the library's rf_now_ns. */
static double now_s(void) { return (double)rf_now_ns() * 1e-9; }

/* Two stats readings `us` apart: the pipeline read and decoded nothing in between. */
static void assert_idle(rf_loader *ld, useconds_t us)
{
    rf_stats s1, s2;
    rf_stats_init(&s1);
    rf_stats_init(&s2);
    ck_assert_int_eq(rf_loader_stats(ld, &s1), 0);
    usleep(us);
    ck_assert_int_eq(rf_loader_stats(ld, &s2), 0);
    ck_assert_uint_eq(s1.reads, s2.reads);
    ck_assert_uint_eq(s1.samples_decoded, s2.samples_decoded);
}

/* ---- allocation failure at create ------------------------------------------------------- */

typedef struct alloc_fault {
    int fail_at;   /* refuse the fail_at-th hooked allocation (0-based) */
    int calls;
    char what[64]; /* the refused one */
    size_t bytes;
} alloc_fault;

static int refuse_nth(void *ctx, const char *what, size_t bytes)
{
    alloc_fault *a = ctx;
    if (a->calls++ != a->fail_at)
        return 0;
    snprintf(a->what, sizeof a->what, "%s", what);
    a->bytes = bytes;
    return 1;
}

/* Refuse each hooked allocation of create in turn (fail and skip mode, whose bookkeeping is one
 * more site): every one is RF_ENOMEM with a message naming what and how many bytes, and no
 * loader; ASan's leak check (tools/test.sh) proves that nothing half-made is left. */
START_TEST(alloc_failure_at_each_site)
{
    make_data();
    rf_config c = config(8);
    c.on_error = (uint32_t)_i;
    int sites = 0;
    for (int k = 0;; k++) {
        alloc_fault a = {.fail_at = k};
        rf_test_hooks h = {.alloc = refuse_nth, .alloc_ctx = &a};
        rf_loader *ld = (rf_loader *)&a; /* create must overwrite it */
        char err[512] = "";
        int rc = rf_loader_create_hooked(&c, &h, &ld, err, sizeof err);
        if (a.calls <= k) { /* fewer sites than k: create ran through */
            ck_assert_msg(rc == 0, "create failed without an injected fault: %s", err);
            rf_loader_destroy(ld);
            break;
        }
        sites++;
        ck_assert_msg(rc == RF_ENOMEM, "site %d (%s): rc %d: %s", k, a.what, rc, err);
        ck_assert_ptr_null(ld);
        ck_assert_msg(strstr(err, "out of memory"), "site %s: %s", a.what, err);
        if (a.bytes) { /* the message states the bytes asked for */
            char num[32];
            snprintf(num, sizeof num, "%zu", a.bytes);
            ck_assert_msg(strstr(err, num), "site %s (%zu bytes): %s", a.what, a.bytes, err);
        }
        if (!strcmp(a.what, "batch ring"))
            ck_assert_msg(strstr(err, "prefetch_depth 4 x (batch 8 x 3072 bytes per sample"),
                          "%s", err);
    }
    /* batch ring, slot tables x 2 (array, per slot), staging arena, task ring, 2 decoders, and
     * the skip bookkeeping in skip mode */
    ck_assert_int_ge(sites, 6 + _i);
}
END_TEST

/* A real allocation failure, no hook: 4 slots of 2^20 samples of 8192 x 8192 x 3 bytes (about
 * 844 TB, beyond the 128 TiB of user address space, so no overcommit setting lets it through);
 * and a shape whose ring size does not even fit in 64 bits. */
START_TEST(absurd_batch_shape_fails_cleanly)
{
    make_data();
    rf_config c = config(1u << 20);
    c.image_size = 8192;
    c.decode_threads = 1;
    rf_loader *ld = NULL;
    char err[512] = "";
    ck_assert_int_eq(rf_loader_create(&c, &ld, err, sizeof err), RF_ENOMEM);
    ck_assert_ptr_null(ld);
    size_t per = (size_t)(1u << 20) * 8192 * 8192 * 3 + (size_t)(1u << 20) * 4; /* page-aligned */
    char want[160];
    snprintf(want, sizeof want, "cannot allocate the %zu-byte host batch ring (prefetch_depth 4 "
             "x (batch 1048576 x 201326592 bytes per sample + labels)", 4 * per);
    ck_assert_msg(strstr(err, want), "%s", err);
    ck_assert_ptr_nonnull(strstr(err, "out of memory"));

    c.batch_size = UINT32_MAX;
    c.prefetch_depth = 64;
    ck_assert_int_eq(rf_loader_create(&c, &ld, err, sizeof err), RF_ENOMEM);
    ck_assert_ptr_null(ld);
    ck_assert_msg(strstr(err, "prefetch_depth 64 x (batch 4294967295 x 201326592 bytes per "
                              "sample + labels) exceeds 18446744073709551615 bytes"), "%s", err);
}
END_TEST

/* ---- no GPU / no driver ----------------------------------------------------------------- */

/* In a child (CUDA is initialized only there): without a usable device, create with
 * device_kind CUDA is RF_ENODEV and its message carries rf_cuda_status's reason, which names
 * the missing driver when libcuda.so.1 cannot be loaded. Exit codes say which check failed. */
static int cuda_absent_child(void)
{
    char why[512] = "", err[512] = "";
    int n = rf_cuda_status(why, sizeof why);
    if (n != rf_cuda_device_count())
        return 10;
    if (n > 0)
        return 0; /* a GPU machine: nothing absent to report (test_cuda covers the device) */
    if (!why[0])
        return 11;
#ifdef RINGFEED_HAVE_CUDA
    void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!drv && !strstr(why, "no NVIDIA driver: libcuda.so.1 could not be loaded")) {
        fprintf(stderr, "no driver, but rf_cuda_status says: %s\n", why);
        return 12;
    }
    if (drv && strstr(why, "no NVIDIA driver")) {
        fprintf(stderr, "a driver loads, but rf_cuda_status says: %s\n", why);
        return 13;
    }
#else
    if (!strstr(why, "no CUDA backend"))
        return 14;
#endif
    rf_config c = config(8);
    c.device_kind = RF_DEVICE_CUDA;
    rf_loader *ld = NULL;
    int rc = rf_loader_create(&c, &ld, err, sizeof err);
    if (rc != RF_ENODEV || ld) {
        fprintf(stderr, "create: %d %s\n", rc, err);
        return 15;
    }
    if (!strstr(err, "device_kind CUDA requested, but ") || !strstr(err, why)) {
        fprintf(stderr, "create message \"%s\" lacks \"%s\"\n", err, why);
        return 16;
    }
    /* AUTO falls back to the host backend */
    c.device_kind = RF_DEVICE_AUTO;
    if (rf_loader_create(&c, &ld, err, sizeof err) != 0)
        return 17;
    rf_stats st;
    rf_stats_init(&st);
    int ok = rf_loader_stats(ld, &st) == 0 && !strcmp(st.device, "host");
    rf_loader_destroy(ld);
    return ok ? 0 : 18;
}

START_TEST(no_gpu_or_no_driver_named)
{
    make_data();
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit(cuda_absent_child());
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
}
END_TEST

/* ---- sticky backend (CUDA-style) errors -------------------------------------------------- */

typedef struct backend_fault {
    int op;
    uint64_t seq;
    int delay_ms; /* before failing: lets the consumer block in rf_loader_next first */
    int gated;    /* before failing, wait (up to 10 s) until the test opens the gate */
    _Atomic int gate, hits;
} backend_fault;

static int fail_op_at(void *ctx, int op, uint64_t seq)
{
    backend_fault *f = ctx;
    if (op != f->op || seq != f->seq)
        return 0;
    atomic_fetch_add(&f->hits, 1);
    for (int i = 0; f->gated && !atomic_load(&f->gate) && i < 10000; i++)
        usleep(1000);
    if (f->delay_ms)
        usleep((useconds_t)f->delay_ms * 1000);
    return RF_ECUDA;
}

/* _i: 0 submit fails while the consumer waits in next; 1 the same, pread and skip mode (the
 * error is fatal in skip mode too); 2 submit fails with the ring full (3 batches leased, I/O
 * blocked on a free slot); 3 release fails. In every case the consumer gets RF_ECUDA promptly,
 * every later call returns it, the pipeline stops reading, and destroy completes. */
START_TEST(sticky_backend_error_wakes_everyone)
{
    make_data();
    rf_config c = config(4);
    c.epochs = 0;
    c.decode_threads = 3;
    if (_i == 1) {
        c.io_engine = RF_IO_PREAD;
        c.on_error = RF_ON_ERROR_SKIP;
    }
    backend_fault f = {.op = _i == 3 ? RF_HOOK_RELEASE : RF_HOOK_SUBMIT,
                       .seq = _i == 2 ? 3 : _i == 3 ? 1 : 2,
                       .delay_ms = _i <= 1 ? 300 : 0,
                       .gated = _i == 2};
    rf_test_hooks h = {.backend = fail_op_at, .backend_ctx = &f};
    rf_loader *ld = NULL;
    char err[512];
    ck_assert_int_eq(rf_loader_create_hooked(&c, &h, &ld, err, sizeof err), 0);
    rf_batch *b = NULL;
    int rc;
    if (_i <= 1) {
        for (int k = 0; k < 2; k++) {
            ck_assert_int_eq(rf_loader_next(ld, &b), 0);
            ck_assert_int_eq(rf_loader_release(ld, b, NULL), 0);
        }
    } else if (_i == 2) {
        for (int k = 0; k < 3; k++) /* keep them leased */
            ck_assert_int_eq(rf_loader_next(ld, &b), 0);
        atomic_store(&f.gate, 1); /* now batch 3's copy may fail */
    } else {
        ck_assert_int_eq(rf_loader_next(ld, &b), 0);
        ck_assert_int_eq(rf_loader_release(ld, b, NULL), 0);
        ck_assert_int_eq(rf_loader_next(ld, &b), 0);
        ck_assert_int_eq(rf_loader_release(ld, b, NULL), RF_ECUDA);
        ck_assert_ptr_nonnull(strstr(rf_last_error(ld), "releasing batch 1"));
    }
    double t0 = now_s();
    rc = rf_loader_next(ld, &b);
    double waited = now_s() - t0;
    ck_assert_msg(rc == RF_ECUDA, "next: %d %s", rc, rf_last_error(ld));
    ck_assert_ptr_null(b);
    ck_assert_msg(waited < 5.0, "the consumer waited %.2f s for the error", waited);
    if (_i != 3) {
        char want[64];
        snprintf(want, sizeof want, "copy of batch %llu (epoch 0,", (unsigned long long)f.seq);
        ck_assert_msg(strstr(rf_last_error(ld), want), "%s", rf_last_error(ld));
        ck_assert_int_eq(atomic_load(&f.hits), 1);
    }
    /* sticky: later calls return it too */
    ck_assert_int_eq(rf_loader_next(ld, &b), RF_ECUDA);
    ck_assert_int_eq(rf_loader_set_epoch(ld, 1), _i == 2 ? RF_ESTATE : RF_ECUDA);
    /* the I/O threads stopped taking work: the read count stands still */
    usleep(100 * 1000); /* reads taken just before the error complete (or are cancelled) */
    assert_idle(ld, 200 * 1000);
    t0 = now_s();
    rf_loader_destroy(ld); /* leased batches (case 2), a failing release (case 3) */
    ck_assert_msg(now_s() - t0 < 5.0, "destroy took %.2f s", now_s() - t0);
}
END_TEST

/* ---- a consumer that stops; destroy with everything in flight ---------------------------- */

/* The consumer stops after k batches (some leased) and waits until the pipeline has filled the
 * ring and blocked; destroy then meets every thread asleep (I/O on a free slot, decoders on an
 * empty queue) or busy, across engines, depths and thread counts. */
START_TEST(consumer_stops_mid_epoch)
{
    make_data();
    for (int round = 0; round < 8; round++) {
        rf_config c = config(2 + round % 3);
        c.epochs = 0;
        c.io_engine = round % 2 ? RF_IO_PREAD : RF_IO_AUTO;
        c.prefetch_depth = 1 + round % 4;
        c.decode_threads = 1 + round % 3;
        rf_loader *ld = rf_test_create_ok(&c);
        rf_batch *b;
        for (uint32_t k = 0; k < c.prefetch_depth && k < (uint32_t)round; k++) {
            ck_assert_int_eq(rf_loader_next(ld, &b), 0);
            if (k % 2)
                ck_assert_int_eq(rf_loader_release(ld, b, NULL), 0);
        }
        usleep(50 * 1000); /* the ring fills; every thread blocks */
        double t0 = now_s();
        rf_loader_destroy(ld);
        ck_assert_msg(now_s() - t0 < 5.0, "destroy took %.2f s", now_s() - t0);
    }
}
END_TEST

/* ---- fork() after create ------------------------------------------------------------------ */

/* In the child: every call on the parent's loader is RF_EFORK with a message, destroy returns
 * (and leaks the child's copy, by design). Exit codes say which check failed. */
static int fork_child(rf_loader *ld, rf_batch *leased)
{
    rf_batch *b = NULL;
    if (rf_loader_next(ld, &b) != RF_EFORK || b)
        return 20;
    if (!strstr(rf_last_error(ld), "belongs to process") || !strstr(rf_last_error(ld), "fork()"))
        return 21;
    if (rf_loader_release(ld, leased, NULL) != RF_EFORK)
        return 22;
    rf_stats st;
    rf_stats_init(&st);
    if (rf_loader_stats(ld, &st) != RF_EFORK)
        return 23;
    uint64_t len = 0;
    if (rf_loader_state(ld, NULL, 0, &len) != RF_EFORK)
        return 24;
    if (rf_loader_set_epoch(ld, 2) != RF_EFORK || rf_loader_trim(ld, 0) != RF_EFORK)
        return 25;
    if (rf_loader_num_samples(ld) != NS) /* plain numbers still read */
        return 26;
    if (strcmp(rf_strerror(RF_EFORK), "loader used from a fork() child of the process that "
                                      "created it"))
        return 27;
    rf_loader_destroy(ld); /* must return: no threads to join here */
#if !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
    /* A child makes its own loader. Not under the sanitizers: their runtimes are not fork-safe
     * in a multi-threaded parent (TSan refuses new threads in such a child; ASan's allocator
     * lock can be copied held by a parent thread, and the child's first malloc of a new size
     * class then waits forever). glibc's malloc is fork-safe, so the plain build runs it. */
    rf_config c = config(8);
    rf_loader *own = NULL;
    char err[512];
    if (rf_loader_create(&c, &own, err, sizeof err) != 0)
        return 28;
    int n = 0;
    while (rf_loader_next(own, &b) == 0) {
        n += (int)b->count;
        rf_loader_release(own, b, NULL);
    }
    rf_loader_destroy(own);
    if (n != NS)
        return 29;
#endif
    return 0;
}

static uint64_t fnv(const void *p, size_t n, uint64_t h)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* The parent forks with reads and decodes in flight and a batch leased; the child's calls fail
 * with RF_EFORK; the parent then delivers its epoch exactly once, byte for byte equal to a
 * loader that never saw a fork. _i: io_uring (AUTO) or pread. */
START_TEST(fork_after_create)
{
    make_data();
    rf_config c = config(8);
    c.io_engine = _i ? RF_IO_PREAD : RF_IO_AUTO;
    rf_loader *ld = rf_test_create_ok(&c);
    rf_batch *b;
    ck_assert_int_eq(rf_loader_next(ld, &b), 0);
    uint64_t sum = fnv(b->data, b->data_bytes, 14695981039346656037ull);
    uint8_t seen[NS] = {0};
    for (uint32_t i = 0; i < b->count; i++)
        seen[b->sample_ids[i]]++;
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit(fork_child(ld, b));
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d (exit %d)",
                  status, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    ck_assert_int_eq(rf_loader_release(ld, b, NULL), 0);
    int rc;
    while ((rc = rf_loader_next(ld, &b)) == 0) {
        sum = fnv(b->data, b->data_bytes, sum);
        for (uint32_t i = 0; i < b->count; i++)
            if (!b->is_padding[i])
                seen[b->sample_ids[i]]++;
        ck_assert_int_eq(rf_loader_release(ld, b, NULL), 0);
    }
    ck_assert_msg(rc == RF_EPOCH_END, "%d %s", rc, rf_last_error(ld));
    rf_loader_destroy(ld);
    for (int i = 0; i < NS; i++)
        ck_assert_msg(seen[i] == 1, "sample %d delivered %d times", i, seen[i]);
    /* the same epoch from a loader that never forked */
    ld = rf_test_create_ok(&c);
    uint64_t ref = 14695981039346656037ull;
    while (rf_loader_next(ld, &b) == 0) {
        ref = fnv(b->data, b->data_bytes, ref);
        rf_loader_release(ld, b, NULL);
    }
    rf_loader_destroy(ld);
    ck_assert_uint_eq(sum, ref);
}
END_TEST

/* ---- stop without freeing (rf_loader_stop) -------------------------------------------------- */

/* rf_loader_stop: every thread ends at once and nothing is read, decoded or written any more;
 * the leased batch keeps its pixels and the released one its memory; later next and set_epoch
 * say RF_ECLOSED; release, state, stats, a second stop and destroy still work. _i: io_uring
 * (AUTO) or pread. */
START_TEST(stop_keeps_batches_readable)
{
    make_data();
    int alone = rf_test_threads();
    rf_config c = config(4);
    c.epochs = 0;
    c.io_engine = _i ? RF_IO_PREAD : RF_IO_AUTO;
    rf_loader *ld = rf_test_create_ok(&c);
    rf_batch *a, *b;
    ck_assert_int_eq(rf_loader_next(ld, &a), 0);
    uint64_t ha = fnv(a->data, a->data_bytes, 1);
    ck_assert_int_eq(rf_loader_release(ld, a, NULL), 0);
    ck_assert_int_eq(rf_loader_next(ld, &b), 0);
    uint64_t hb = fnv(b->data, b->data_bytes, 1);
    ck_assert_int_gt(rf_test_threads(), alone);
    ck_assert_int_eq(rf_loader_stop(ld), 0);
    ck_assert_int_eq(rf_test_threads(), alone);
    assert_idle(ld, 50 * 1000);
    ck_assert_uint_eq(fnv(b->data, b->data_bytes, 1), hb);
    (void)fnv(a->data, a->data_bytes, ha); /* released: still mapped (ASan checks the read) */
    rf_batch *x = NULL;
    ck_assert_int_eq(rf_loader_next(ld, &x), RF_ECLOSED);
    ck_assert_ptr_null(x);
    ck_assert_ptr_nonnull(strstr(rf_last_error(ld), "rf_loader_stop"));
    ck_assert_int_eq(rf_loader_set_epoch(ld, 3), RF_ECLOSED);
    ck_assert_int_eq(rf_loader_stop(ld), 0);
    uint64_t len = 0;
    ck_assert_int_eq(rf_loader_state(ld, NULL, 0, &len), 0);
    ck_assert_int_eq(rf_loader_release(ld, b, NULL), 0);
    ck_assert_int_eq(rf_loader_release(ld, b, NULL), RF_ESTATE);
    rf_loader_destroy(ld);
    ck_assert_int_eq(rf_loader_stop(NULL), RF_EINVAL);
}
END_TEST

/* ---- thread names ------------------------------------------------------------------------ */

static int threads_named(const char *name) { return rf_test_threads_named(name, 0, NULL); }

/* Every thread the loader starts carries a name saying what it is (top -H, perf, /proc: the
 * CPU time of decoding and of I/O told apart from the caller's), one per decode and I/O
 * thread, and none is left after destroy. _i: io_uring (AUTO) or pread. */
START_TEST(threads_are_named_by_role)
{
    make_data();
    rf_config c = config(4);
    c.decode_threads = 3;
    c.io_threads = 2;
    c.io_engine = _i ? RF_IO_PREAD : RF_IO_AUTO;
    rf_loader *ld = rf_test_create_ok(&c);
    rf_batch *b;
    ck_assert_int_eq(rf_loader_next(ld, &b), 0);
    static const char *const names[] = {"rf-decode-0", "rf-decode-1", "rf-decode-2",
                                        "rf-io-0", "rf-io-1"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        ck_assert_msg(threads_named(names[i]) == 1, "%s: %d threads", names[i],
                      threads_named(names[i]));
    ck_assert_int_eq(threads_named("rf-decode-3") + threads_named("rf-io-2"), 0);
    ck_assert_int_eq(rf_loader_release(ld, b, NULL), 0);
    rf_loader_destroy(ld);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        ck_assert_int_eq(threads_named(names[i]), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("lifecycle");
    TCase *tc = tcase_create("lifecycle");
    tcase_set_timeout(tc, 120);
    tcase_add_unchecked_fixture(tc, make_data, NULL);
    tcase_add_loop_test(tc, alloc_failure_at_each_site, 0, 2);
    tcase_add_test(tc, absurd_batch_shape_fails_cleanly);
    tcase_add_test(tc, no_gpu_or_no_driver_named);
    tcase_add_loop_test(tc, sticky_backend_error_wakes_everyone, 0, 4);
    tcase_add_test(tc, consumer_stops_mid_epoch);
    tcase_add_loop_test(tc, fork_after_create, 0, 2);
    tcase_add_loop_test(tc, stop_keeps_batches_readable, 0, 2);
    tcase_add_loop_test(tc, threads_are_named_by_role, 0, 2);
    suite_add_tcase(s, tc);
    return rf_test_run_suite(s);
}
