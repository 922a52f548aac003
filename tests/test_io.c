/* test_io.c — the I/O engines: bytes delivered, completion rules, fault injection, stop, and
 * the pread fallback under a seccomp filter that refuses io_uring.
 *
 * DESIGN
 *  - A test source hands out a fixed array of requests over one temp file of random bytes; it
 *    counts take()s and done()s per request so exactly-once can be asserted. The main thread
 *    waits until every request is done, then raises the source's stop flag and calls ops.stop().
 *  - Checks that must run in a grandchild (seccomp, dropped capabilities) use helpers that
 *    return an error string instead of ck_assert, and report through the exit status.
 *  - No ring exists before Check forks: every ring is created inside a test. */
#include <check.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io/io.h"
#include "testutil.h"

#define FILE_BYTES ((1u << 20) + 4321u)
#define NREQ 600u
#define WAIT_NS (30ull * 1000000000ull)

enum fault_mode {
    F_NONE,
    F_HALF,          /* every attempt reports half of what it read: short reads */
    F_EOF_SOME,      /* every 5th request sees end of file */
    F_TRANSIENT,     /* -EAGAIN, -EINTR, -ECANCELED once each, then the real result */
    F_EIO,           /* persistent -EIO */
    F_ALWAYS_EAGAIN, /* never succeeds */
    F_SLOW,          /* 1 ms per attempt, so stop() finds reads in flight */
};

typedef struct tsrc {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    rf_io_req *reqs;
    uint32_t n, next, ndone;
    int stop;
    int mode;
    _Atomic uint32_t *taken, *dones, *attempts;
    _Atomic uint32_t bad_max; /* take() got max <= 0 */
} tsrc;

static uint32_t idx_of(const rf_io_req *r) { return (uint32_t)(uintptr_t)r->user; }

static int t_take(void *ctx, rf_io_req **out, int max, int block)
{
    tsrc *s = ctx;
    if (max <= 0)
        atomic_fetch_add(&s->bad_max, 1);
    pthread_mutex_lock(&s->mu);
    while (block && !s->stop && s->next == s->n)
        pthread_cond_wait(&s->cv, &s->mu);
    if (s->stop) {
        pthread_mutex_unlock(&s->mu);
        return -1;
    }
    int k = 0;
    /* Hand out uneven batches so engines see partial takes too. */
    int cap = RF_MIN(max, (int)(1 + (s->next * 7) % 13));
    while (k < cap && s->next < s->n) {
        rf_io_req *r = &s->reqs[s->next++];
        atomic_fetch_add(&s->taken[idx_of(r)], 1);
        out[k++] = r;
    }
    pthread_mutex_unlock(&s->mu);
    return k;
}

static void t_done(void *ctx, rf_io_req *r)
{
    tsrc *s = ctx;
    atomic_fetch_add(&s->dones[idx_of(r)], 1);
    pthread_mutex_lock(&s->mu);
    s->ndone++;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static int t_fault(void *ctx, const rf_io_req *r, int res)
{
    tsrc *s = ctx;
    uint32_t i = idx_of(r);
    uint32_t a = atomic_fetch_add(&s->attempts[i], 1);
    switch (s->mode) {
    case F_HALF:
        return res > 1 ? res / 2 : res;
    case F_EOF_SOME:
        return i % 5 == 0 ? 0 : res;
    case F_TRANSIENT:
        if (a < 3)
            return a == 0 ? -EAGAIN : a == 1 ? -EINTR : -ECANCELED;
        return res;
    case F_EIO:
        return -EIO;
    case F_ALWAYS_EAGAIN:
        return -EAGAIN;
    case F_SLOW:
        usleep(1000);
        return res;
    default:
        return res;
    }
}

/* ---- fixture: one file of random bytes and a request set over it ---------------------------- */

typedef struct fixture {
    char *dir;
    char path[512];
    int fd;
    uint8_t *file;      /* the file's contents */
    rf_io_req reqs[NREQ];
    uint8_t *arena;     /* most requests land here */
    uint64_t arena_bytes;
    uint8_t *outside;   /* every 7th request lands here: plain READ even with registration */
} fixture;

static uint64_t xs(uint64_t *st)
{
    *st = rf_mix64(*st);
    return *st;
}

static void fixture_make(fixture *f, uint64_t seed)
{
    memset(f, 0, sizeof *f);
    f->dir = rf_test_mkdtemp("io");
    snprintf(f->path, sizeof f->path, "%s/data.bin", f->dir);
    f->file = malloc(FILE_BYTES);
    uint64_t st = seed;
    for (uint32_t i = 0; i < FILE_BYTES; i++)
        f->file[i] = (uint8_t)xs(&st);
    FILE *fp = fopen(f->path, "wb");
    ck_assert_ptr_nonnull(fp);
    ck_assert_uint_eq(fwrite(f->file, 1, FILE_BYTES, fp), FILE_BYTES);
    fclose(fp);
    f->fd = open(f->path, O_RDONLY);
    ck_assert_int_ge(f->fd, 0);

    uint64_t in_bytes = 0, out_bytes = 0;
    for (uint32_t i = 0; i < NREQ; i++) {
        rf_io_req *r = &f->reqs[i];
        uint64_t kind = xs(&st) % 4, len, off;
        if (kind == 0) { /* tiny */
            len = 1 + xs(&st) % 64;
        } else if (kind == 1) { /* straddles a page boundary */
            len = 2 + xs(&st) % 9000;
        } else if (kind == 2) {
            len = 1 + xs(&st) % 4096;
        } else {
            len = 1 + xs(&st) % (i % 50 == 0 ? 65536 : 8192);
        }
        if (kind == 1) {
            uint64_t page = 3 + xs(&st) % (FILE_BYTES / 4096 - 6);
            off = page * 4096 - 1 - xs(&st) % (len - 1);
        } else {
            off = xs(&st) % (FILE_BYTES - len + 1);
        }
        if (i == 1) { /* the very end of the file */
            len = 777;
            off = FILE_BYTES - len;
        }
        r->fd = f->fd;
        r->len = (uint32_t)len;
        r->offset = off;
        r->user = (void *)(uintptr_t)i;
        if (i % 7 == 0)
            out_bytes += len;
        else
            in_bytes += len;
    }
    f->arena_bytes = in_bytes;
    ck_assert_int_eq(posix_memalign((void **)&f->arena, 4096, in_bytes), 0);
    f->outside = malloc(out_bytes);
    uint64_t a = 0, b = 0;
    for (uint32_t i = 0; i < NREQ; i++) {
        rf_io_req *r = &f->reqs[i];
        if (i % 7 == 0) {
            r->dst = f->outside + b;
            b += r->len;
        } else {
            r->dst = f->arena + a;
            a += r->len;
        }
    }
}

static void fixture_reset(fixture *f)
{
    memset(f->arena, 0xAA, f->arena_bytes);
    for (uint32_t i = 0; i < NREQ; i++) {
        f->reqs[i].done = 0;
        f->reqs[i].retries = 0;
        f->reqs[i].result = 1; /* not a valid final result: catches a missing write */
    }
}

static void fixture_free(fixture *f)
{
    close(f->fd);
    unlink(f->path);
    rmdir(f->dir);
    free(f->dir);
    free(f->file);
    free(f->arena);
    free(f->outside);
}

static void src_init(tsrc *s, rf_io_req *reqs, uint32_t n, int mode)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->reqs = reqs;
    s->n = n;
    s->mode = mode;
    s->taken = calloc(n, sizeof *s->taken);
    s->dones = calloc(n, sizeof *s->dones);
    s->attempts = calloc(n, sizeof *s->attempts);
}

static void src_free(tsrc *s)
{
    free((void *)s->taken);
    free((void *)s->dones);
    free((void *)s->attempts);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
}

static void src_stop(tsrc *s)
{
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* Wait until `want` requests are done (or a deadline); returns how many are. */
static uint32_t src_wait(tsrc *s, uint32_t want)
{
    uint64_t deadline = rf_now_ns() + WAIT_NS;
    pthread_mutex_lock(&s->mu);
    while (s->ndone < want && rf_now_ns() < deadline) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&s->cv, &s->mu, &ts);
    }
    uint32_t d = s->ndone;
    pthread_mutex_unlock(&s->mu);
    return d;
}

static char g_msg[1024];

/* Run every request of f through ops with the given fault mode; returns NULL or what went wrong.
 * *st and *registered receive the engine's view when not NULL. */
static const char *run_set(const rf_io_ops *ops, fixture *f, uint32_t threads, uint32_t qd, int use_arena,
                           int mode, uint32_t max_retries, tsrc *s, rf_io_stats *st, int *registered)
{
    fixture_reset(f);
    src_init(s, f->reqs, NREQ, mode);
    rf_io_source src = {.take = t_take, .done = t_done, .fault = mode == F_NONE ? NULL : t_fault, .ctx = s};
    rf_io_params p = {.threads = threads, .queue_depth = qd, .max_retries = max_retries};
    if (use_arena) {
        p.arena = f->arena;
        p.arena_bytes = f->arena_bytes;
    }
    rf_io_engine *e = NULL;
    rf_err err = {0};
    int rc = ops->start(&p, &src, &e, &err);
    if (rc != 0) {
        snprintf(g_msg, sizeof g_msg, "%s start: %d %s", ops->name, rc, err.msg);
        return g_msg;
    }
    uint32_t d = src_wait(s, NREQ);
    if (registered)
        *registered = ops->registered(e);
    src_stop(s);
    ops->stop(e, st);
    if (d != NREQ) {
        snprintf(g_msg, sizeof g_msg, "%s t=%u qd=%u: only %u of %u requests done", ops->name, threads, qd,
                 d, NREQ);
        return g_msg;
    }
    for (uint32_t i = 0; i < NREQ; i++) {
        if (s->taken[i] != 1 || s->dones[i] != 1) {
            snprintf(g_msg, sizeof g_msg, "%s: request %u taken %u done %u times", ops->name, i,
                     (unsigned)s->taken[i], (unsigned)s->dones[i]);
            return g_msg;
        }
    }
    if (atomic_load(&s->bad_max)) {
        snprintf(g_msg, sizeof g_msg, "%s: take() called with max <= 0", ops->name);
        return g_msg;
    }
    return NULL;
}

/* Every request succeeded and holds the file's bytes. */
static const char *check_bytes(const char *name, fixture *f)
{
    for (uint32_t i = 0; i < NREQ; i++) {
        rf_io_req *r = &f->reqs[i];
        if (r->result != 0 || r->done != r->len ||
            memcmp(r->dst, f->file + r->offset, r->len) != 0) {
            snprintf(g_msg, sizeof g_msg, "%s: request %u (off %llu len %u) result %d done %u%s", name, i,
                     (unsigned long long)r->offset, r->len, r->result, r->done,
                     r->result == 0 ? " bytes differ" : "");
            return g_msg;
        }
    }
    return NULL;
}

static int uring_ok(void)
{
    char why[256];
    int rc = rf_io_uring_probe(why, sizeof why);
    if (rc < 0)
        fprintf(stderr, "test_io: io_uring unavailable here, io_uring cases skipped: %s\n", why);
    return rc == 0;
}

static uint64_t sum_len(const fixture *f)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < NREQ; i++)
        n += f->reqs[i].len;
    return n;
}

/* ---- rf_io_complete on its own --------------------------------------------------------------- */

static int g_fault_ret;
static int fixed_fault(void *ctx, const rf_io_req *r, int res) { return g_fault_ret; }

START_TEST(complete_rules)
{
    rf_io_params p = {.max_retries = 2};
    rf_io_req r = {.len = 100};
    ck_assert_int_eq(rf_io_complete(NULL, &r, 40, &p), RF_IO_RESUBMIT);
    ck_assert_uint_eq(r.done, 40);
    ck_assert_uint_eq(r.retries, 0); /* progress is not a retry */
    ck_assert_int_eq(rf_io_complete(NULL, &r, 60, &p), RF_IO_FINISHED);
    ck_assert_int_eq(r.result, 0);
    ck_assert_uint_eq(r.done, 100);

    rf_io_req z = {.len = 10, .done = 3};
    ck_assert_int_eq(rf_io_complete(NULL, &z, 0, &p), RF_IO_FINISHED);
    ck_assert_int_eq(z.result, -ENODATA);

    int transient[] = {-EAGAIN, -EINTR, -ECANCELED};
    for (int k = 0; k < 3; k++) {
        rf_io_req t = {.len = 10};
        ck_assert_int_eq(rf_io_complete(NULL, &t, transient[k], &p), RF_IO_RESUBMIT);
        ck_assert_int_eq(rf_io_complete(NULL, &t, transient[k], &p), RF_IO_RESUBMIT);
        ck_assert_int_eq(rf_io_complete(NULL, &t, transient[k], &p), RF_IO_FINISHED);
        ck_assert_int_eq(t.result, transient[k]);
        ck_assert_uint_eq(t.retries, 2);
    }
    rf_io_req io = {.len = 10};
    ck_assert_int_eq(rf_io_complete(NULL, &io, -EIO, &p), RF_IO_FINISHED);
    ck_assert_int_eq(io.result, -EIO);

    /* More bytes than asked is refused, not counted. */
    rf_io_req big = {.len = 10, .done = 5};
    ck_assert_int_eq(rf_io_complete(NULL, &big, 6, &p), RF_IO_FINISHED);
    ck_assert_int_eq(big.result, -EIO);
    ck_assert_uint_eq(big.done, 5);

    /* The fault hook replaces the raw result. */
    rf_io_source src = {.fault = fixed_fault};
    g_fault_ret = 0;
    rf_io_req h = {.len = 10};
    ck_assert_int_eq(rf_io_complete(&src, &h, 10, &p), RF_IO_FINISHED);
    ck_assert_int_eq(h.result, -ENODATA);

    /* A hook that always makes 1 byte of progress still ends within len attempts. */
    g_fault_ret = 1;
    rf_io_req slow = {.len = 1000};
    int attempts = 1;
    while (rf_io_complete(&src, &slow, 1000, &p) == RF_IO_RESUBMIT)
        attempts++;
    ck_assert_int_eq(attempts, 1000);
    ck_assert_int_eq(slow.result, 0);
}
END_TEST

START_TEST(start_rejects_bad_params)
{
    tsrc s;
    src_init(&s, NULL, 0, F_NONE);
    rf_io_source src = {.take = t_take, .done = t_done, .ctx = &s};
    const rf_io_ops *ops[] = {&rf_io_pread_ops, &rf_io_uring_ops};
    rf_io_params bad[] = {{.threads = 0, .queue_depth = 8},
                          {.threads = 1, .queue_depth = 0},
                          {.threads = RF_IO_THREADS_MAX + 1, .queue_depth = 8},
                          {.threads = 1, .queue_depth = RF_IO_QUEUE_DEPTH_MAX + 1}};
    for (int k = 0; k < 2; k++) {
        for (size_t j = 0; j < sizeof bad / sizeof bad[0]; j++) {
            rf_io_engine *e = (rf_io_engine *)&s;
            rf_err err = {0};
            ck_assert_int_eq(ops[k]->start(&bad[j], &src, &e, &err), RF_EINVAL);
            ck_assert_ptr_null(e);
            ck_assert(strlen(err.msg) > 0);
        }
    }
    src_free(&s);
}
END_TEST

/* Whether `bytes` of registered buffers fit under RLIMIT_MEMLOCK (or CAP_IPC_LOCK waives it), so
 * that registration must succeed. */
static int can_lock(uint64_t bytes)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= 2 * bytes))
        return 1;
    FILE *fp = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long caps = 0;
    while (fp && fgets(line, sizeof line, fp))
        if (sscanf(line, "CapEff: %llx", &caps) == 1)
            break;
    if (fp)
        fclose(fp);
    return (caps >> CAP_IPC_LOCK) & 1;
}

/* ---- bytes: both engines, threads 1..4, queue depths 1, 8, 64, with and without an arena ---- */

static void matrix(const rf_io_ops *ops, int use_arena)
{
    fixture *f = malloc(sizeof *f);
    fixture_make(f, 42 + (uint64_t)use_arena);
    static const uint32_t qds[] = {1, 8, 64};
    for (uint32_t threads = 1; threads <= 4; threads++) {
        for (size_t q = 0; q < 3; q++) {
            tsrc s;
            rf_io_stats st;
            int reg = -1;
            const char *m = run_set(ops, f, threads, qds[q], use_arena, F_NONE, 8, &s, &st, &reg);
            ck_assert_msg(m == NULL, "%s", m);
            m = check_bytes(ops->name, f);
            ck_assert_msg(m == NULL, "t=%u qd=%u arena=%d: %s", threads, qds[q], use_arena, m);
            ck_assert_uint_eq(st.reads, NREQ);
            ck_assert_uint_eq(st.bytes, sum_len(f));
            ck_assert_uint_eq(st.retries, 0);
            if (ops == &rf_io_pread_ops || !use_arena)
                ck_assert_int_eq(reg, 0);
            else if (threads == 1 && can_lock(f->arena_bytes))
                ck_assert_int_eq(reg, 1);
            src_free(&s);
        }
    }
    fixture_free(f);
    free(f);
}

START_TEST(bytes_uring_plain) { if (uring_ok()) matrix(&rf_io_uring_ops, 0); }
END_TEST
START_TEST(bytes_uring_arena) { if (uring_ok()) matrix(&rf_io_uring_ops, 1); }
END_TEST
START_TEST(bytes_pread_plain) { matrix(&rf_io_pread_ops, 0); }
END_TEST
START_TEST(bytes_pread_arena) { matrix(&rf_io_pread_ops, 1); }
END_TEST

/* ---- faults through src->fault, both engines (loop index selects the engine) ----------------- */

static const rf_io_ops *engine_at(int i) { return i == 0 ? &rf_io_uring_ops : &rf_io_pread_ops; }

START_TEST(fault_short_reads)
{
    if (_i == 0 && !uring_ok())
        return;
    fixture *f = malloc(sizeof *f);
    fixture_make(f, 7);
    tsrc s;
    rf_io_stats st;
    const char *m = run_set(engine_at(_i), f, 2, 16, 1, F_HALF, 2, &s, &st, NULL);
    ck_assert_msg(m == NULL, "%s", m);
    m = check_bytes(engine_at(_i)->name, f);
    ck_assert_msg(m == NULL, "%s", m);
    ck_assert_uint_gt(st.retries, NREQ / 2); /* most requests needed several attempts */
    for (uint32_t i = 0; i < NREQ; i++)
        ck_assert_uint_eq(f->reqs[i].retries, 0); /* progress does not spend the retry budget */
    src_free(&s);
    fixture_free(f);
    free(f);
}
END_TEST

START_TEST(fault_eof)
{
    if (_i == 0 && !uring_ok())
        return;
    fixture *f = malloc(sizeof *f);
    fixture_make(f, 8);
    tsrc s;
    const char *m = run_set(engine_at(_i), f, 3, 8, 0, F_EOF_SOME, 8, &s, NULL, NULL);
    ck_assert_msg(m == NULL, "%s", m);
    for (uint32_t i = 0; i < NREQ; i++) {
        rf_io_req *r = &f->reqs[i];
        if (i % 5 == 0) {
            ck_assert_int_eq(r->result, -ENODATA);
            ck_assert_uint_eq(s.attempts[i], 1);
        } else {
            ck_assert_int_eq(r->result, 0);
            ck_assert_mem_eq(r->dst, f->file + r->offset, r->len);
        }
    }
    src_free(&s);
    fixture_free(f);
    free(f);
}
END_TEST

START_TEST(fault_transient_then_success)
{
    if (_i == 0 && !uring_ok())
        return;
    fixture *f = malloc(sizeof *f);
    fixture_make(f, 9);
    tsrc s;
    rf_io_stats st;
    const char *m = run_set(engine_at(_i), f, 2, 64, 1, F_TRANSIENT, 3, &s, &st, NULL);
    ck_assert_msg(m == NULL, "%s", m);
    m = check_bytes(engine_at(_i)->name, f);
    ck_assert_msg(m == NULL, "%s", m);
    for (uint32_t i = 0; i < NREQ; i++) {
        ck_assert_uint_eq(f->reqs[i].retries, 3);
        ck_assert_uint_eq(s.attempts[i], 4);
    }
    ck_assert_uint_eq(st.retries, 3ull * NREQ);
    src_free(&s);
    fixture_free(f);
    free(f);
}
END_TEST

START_TEST(fault_persistent_eio)
{
    if (_i == 0 && !uring_ok())
        return;
    fixture *f = malloc(sizeof *f);
    fixture_make(f, 10);
    tsrc s;
    const char *m = run_set(engine_at(_i), f, 4, 8, 0, F_EIO, 8, &s, NULL, NULL);
    ck_assert_msg(m == NULL, "%s", m);
    for (uint32_t i = 0; i < NREQ; i++) {
        ck_assert_int_eq(f->reqs[i].result, -EIO);
        ck_assert_uint_eq(s.attempts[i], 1); /* not transient: no retry */
    }
    src_free(&s);
    fixture_free(f);
    free(f);
}
END_TEST

START_TEST(fault_retries_bounded)
{
    if (_i == 0 && !uring_ok())
        return;
    fixture *f = malloc(sizeof *f);
    fixture_make(f, 11);
    tsrc s;
    rf_io_stats st;
    const uint32_t max = 5;
    const char *m = run_set(engine_at(_i), f, 2, 32, 1, F_ALWAYS_EAGAIN, max, &s, &st, NULL);
    ck_assert_msg(m == NULL, "%s", m);
    for (uint32_t i = 0; i < NREQ; i++) {
        ck_assert_int_eq(f->reqs[i].result, -EAGAIN);
        ck_assert_uint_eq(f->reqs[i].retries, max);
        ck_assert_uint_eq(s.attempts[i], max + 1);
    }
    ck_assert_uint_eq(st.retries, (uint64_t)max * NREQ);
    src_free(&s);
    fixture_free(f);
    free(f);
}
END_TEST

/* ---- stop with requests in flight ------------------------------------------------------------- */

#define NSTOP 3000u
#define NPIPE 4u

START_TEST(stop_in_flight)
{
    const rf_io_ops *ops = engine_at(_i);
    if (_i == 0 && !uring_ok())
        return;
    fixture *f = malloc(sizeof *f);
    fixture_make(f, 12);
    /* Many slow requests, cycling over the fixture's; for io_uring the first few read an empty
     * pipe, which never completes unless stop() cancels it. */
    rf_io_req *reqs = calloc(NSTOP, sizeof *reqs);
    uint8_t *buf = malloc((size_t)NSTOP * 65536);
    int pfd[2];
    ck_assert_int_eq(pipe(pfd), 0);
    for (uint32_t i = 0; i < NSTOP; i++) {
        reqs[i] = f->reqs[i % NREQ];
        reqs[i].dst = buf + (size_t)i * 65536;
        reqs[i].user = (void *)(uintptr_t)i;
        reqs[i].result = 1;
        if (_i == 0 && i < NPIPE) {
            reqs[i].fd = pfd[0];
            reqs[i].offset = (uint64_t)-1; /* "current position": the only offset a pipe takes */
            reqs[i].len = 16;
        }
    }
    tsrc s;
    src_init(&s, reqs, NSTOP, F_SLOW);
    rf_io_source src = {.take = t_take, .done = t_done, .fault = t_fault, .ctx = &s};
    rf_io_params p = {.threads = 3, .queue_depth = 32, .max_retries = 8};
    rf_io_engine *e = NULL;
    rf_err err = {0};
    ck_assert_int_eq(ops->start(&p, &src, &e, &err), 0);
    src_wait(&s, 100);
    uint64_t t0 = rf_now_ns();
    src_stop(&s);
    rf_io_stats fin;
    ops->stop(e, &fin);
    uint64_t stop_ms = (rf_now_ns() - t0) / 1000000;
    ck_assert_msg(stop_ms < 2000, "%s: stop took %llu ms", ops->name, (unsigned long long)stop_ms);
    uint32_t taken = 0, done = 0;
    for (uint32_t i = 0; i < NSTOP; i++) {
        ck_assert_msg(s.taken[i] <= 1 && s.dones[i] == s.taken[i], "request %u taken %u done %u", i,
                      (unsigned)s.taken[i], (unsigned)s.dones[i]);
        taken += s.taken[i];
        done += s.dones[i];
        if (s.dones[i] && reqs[i].result == 0)
            ck_assert_mem_eq(reqs[i].dst, f->file + reqs[i].offset, reqs[i].len);
        else if (s.dones[i])
            ck_assert_int_eq(reqs[i].result, -ECANCELED);
    }
    ck_assert_uint_eq(done, taken);
    ck_assert_uint_lt(taken, NSTOP); /* it really stopped early */
    /* stop's final stats count every request handed back, those finished while stopping too
     * (stats() taken before stop() missed them, and the loader's counters with them) */
    ck_assert_uint_eq(fin.reads, done);
    if (_i == 0)
        for (uint32_t i = 0; i < NPIPE; i++)
            ck_assert_int_eq(reqs[i].result, -ECANCELED);
    close(pfd[0]);
    close(pfd[1]);
    src_free(&s);
    free(buf);
    free(reqs);
    fixture_free(f);
    free(f);
}
END_TEST

/* ---- the pread fallback for real: io_uring_setup refused by seccomp --------------------------- */

#if defined(__x86_64__)
#define RF_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define RF_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

#ifdef RF_AUDIT_ARCH
/* Refuse io_uring_setup with EPERM, as container runtimes' default profiles do; allow the rest.
 * Calls from another ABI (i386, x32) are refused too, since their numbers mean other things. */
static int deny_io_uring(void)
{
    struct sock_filter prog[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, RF_AUDIT_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1), /* x32 ABI */
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog fp = {.len = (unsigned short)(sizeof prog / sizeof prog[0]), .filter = prog};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -errno;
    if (syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fp) != 0)
        return -errno;
    return 0;
}

#define CHILD_FAIL(...)                                                                            \
    do {                                                                                           \
        fprintf(stderr, "seccomp child: " __VA_ARGS__);                                            \
        fputc('\n', stderr);                                                                       \
        _exit(1);                                                                                  \
    } while (0)

static void seccomp_child(fixture *f)
{
    int rc = deny_io_uring();
    if (rc < 0)
        CHILD_FAIL("installing the filter: %s", strerror(-rc));
    char why[256];
    rc = rf_io_uring_probe(why, sizeof why);
    if (rc != -EPERM)
        CHILD_FAIL("probe returned %d, want -EPERM", rc);
    if (!strstr(why, "Operation not permitted") || !strstr(why, "seccomp"))
        CHILD_FAIL("probe reason does not name the cause: %s", why);

    /* The engine itself refuses the same way, before taking anything. */
    tsrc s0;
    src_init(&s0, f->reqs, NREQ, F_NONE);
    rf_io_source src0 = {.take = t_take, .done = t_done, .ctx = &s0};
    rf_io_params p = {.threads = 2, .queue_depth = 8, .max_retries = 8};
    rf_io_engine *e = NULL;
    rf_err err = {0};
    rc = rf_io_uring_ops.start(&p, &src0, &e, &err);
    if (rc != -EPERM || e || !strstr(err.msg, "seccomp") || s0.next != 0)
        CHILD_FAIL("io_uring start: rc %d, msg '%s', taken %u", rc, err.msg, s0.next);
    src_free(&s0);

    const rf_io_ops *ops = NULL;
    rc = rf_io_select(RF_IO_URING, &ops, why, sizeof why);
    if (rc != -EPERM || ops || !strstr(why, "seccomp"))
        CHILD_FAIL("select(URING): rc %d why '%s'", rc, why);
    rc = rf_io_select(RF_IO_PREAD, &ops, why, sizeof why);
    if (rc != 0 || ops != &rf_io_pread_ops || strcmp(why, "requested") != 0)
        CHILD_FAIL("select(PREAD): rc %d why '%s'", rc, why);
    rc = rf_io_select(RF_IO_AUTO, &ops, why, sizeof why);
    if (rc != 0 || ops != &rf_io_pread_ops || strncmp(why, "io_uring refused: ", 18) != 0 ||
        !strstr(why, "Operation not permitted"))
        CHILD_FAIL("select(AUTO): rc %d ops %s why '%s'", rc, ops ? ops->name : "NULL", why);

    tsrc s;
    const char *m = run_set(ops, f, 3, 8, 1, F_NONE, 8, &s, NULL, NULL);
    if (!m)
        m = check_bytes(ops->name, f);
    if (m)
        CHILD_FAIL("%s", m);
    _exit(0);
}

START_TEST(seccomp_fallback)
{
    fixture *f = malloc(sizeof *f);
    fixture_make(f, 13);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        seccomp_child(f);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "seccomp child failed (status 0x%x); see its stderr", status);
    fixture_free(f);
    free(f);
}
END_TEST
#endif

START_TEST(select_here)
{
    const rf_io_ops *ops = NULL;
    char why[256];
    ck_assert_int_eq(rf_io_select(RF_IO_AUTO, &ops, why, sizeof why), 0);
    ck_assert_ptr_nonnull(ops);
    if (ops == &rf_io_uring_ops)
        ck_assert_str_eq(why, "auto: io_uring available");
    else
        ck_assert(strncmp(why, "io_uring refused: ", 18) == 0);
    ck_assert_int_eq(rf_io_select(99, &ops, why, sizeof why), RF_EINVAL);
    ck_assert_ptr_null(ops);
}
END_TEST

/* ---- registration refused by RLIMIT_MEMLOCK: plain reads, registered() == 0 ------------------ */

static const char *memlock_child(void)
{
    /* Root with CAP_IPC_LOCK is exempt from the limit: drop the capability first. */
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct data[2];
    if (syscall(SYS_capget, &hdr, data) == 0) {
        data[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
        data[CAP_IPC_LOCK / 32].permitted &= ~(1u << (CAP_IPC_LOCK % 32));
        if (syscall(SYS_capset, &hdr, data) != 0)
            return "capset failed";
    }
    struct rlimit rl = {.rlim_cur = 256 * 1024, .rlim_max = 256 * 1024};
    if (setrlimit(RLIMIT_MEMLOCK, &rl) != 0)
        return "setrlimit failed";
    fixture *f = malloc(sizeof *f);
    fixture_make(f, 14);
    tsrc s;
    int reg = -1;
    const char *m = run_set(&rf_io_uring_ops, f, 1, 16, 1, F_NONE, 8, &s, NULL, &reg);
    if (!m)
        m = check_bytes("io_uring", f);
    if (!m && reg != 0)
        m = "registered() == 1 although RLIMIT_MEMLOCK is below the arena";
    return m;
}

START_TEST(registration_refused)
{
    if (!uring_ok())
        return;
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        const char *m = memlock_child();
        if (m)
            fprintf(stderr, "memlock child: %s\n", m);
        _exit(m ? 1 : 0);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "memlock child failed; see stderr");
}
END_TEST

/* rf_read_whole, the one reader of whole user files (image lists, shard indexes): the bytes
 * NUL-terminated, and every refusal with its code and a message that starts with the path. */
START_TEST(whole_file_read)
{
    char *dir = rf_test_mkdtemp("io-whole");
    char path[512], fifo[512];
    snprintf(path, sizeof path, "%s/list.txt", dir);
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    rf_test_write_file(path, "a.jpg 1\n", 8);
    char *text = NULL;
    uint64_t len = 0;
    rf_err e = {0};
    ck_assert_msg(rf_read_whole(path, "an image list", RF_EFORMAT, 8, &text, &len, &e) == 0,
                  "%s", e.msg);
    ck_assert_uint_eq(len, 8);
    ck_assert_str_eq(text, "a.jpg 1\n");
    free(text);
    ck_assert_int_eq(rf_read_whole(path, "an image list", RF_EFORMAT, 7, &text, &len, &e),
                     RF_ELIMIT);
    ck_assert_msg(strncmp(e.msg, path, strlen(path)) == 0 &&
                      strstr(e.msg, "larger than 7 bytes (the limit for an image list)"),
                  "%s", e.msg);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    ck_assert_int_eq(rf_read_whole(fifo, "a shard index", RF_EINDEX, 8, &text, &len, &e),
                     RF_EINDEX);
    ck_assert_msg(strncmp(e.msg, fifo, strlen(fifo)) == 0 && strstr(e.msg, "FIFO"), "%s", e.msg);
    ck_assert_int_eq(unlink(fifo), 0);
    ck_assert_int_eq(rf_read_whole(fifo, "a shard index", RF_EINDEX, 8, &text, &len, &e),
                     -ENOENT);
    ck_assert_msg(strncmp(e.msg, fifo, strlen(fifo)) == 0, "%s", e.msg);
    ck_assert_int_eq(rf_test_shell("rm -rf '%s'", dir), 0);
    free(dir);
}
END_TEST

static Suite *io_suite(void)
{
    Suite *s = suite_create("io");
    TCase *tc = tcase_create("io");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, complete_rules);
    tcase_add_test(tc, start_rejects_bad_params);
    tcase_add_test(tc, select_here);
    tcase_add_test(tc, bytes_uring_plain);
    tcase_add_test(tc, bytes_uring_arena);
    tcase_add_test(tc, bytes_pread_plain);
    tcase_add_test(tc, bytes_pread_arena);
    tcase_add_loop_test(tc, fault_short_reads, 0, 2);
    tcase_add_loop_test(tc, fault_eof, 0, 2);
    tcase_add_loop_test(tc, fault_transient_then_success, 0, 2);
    tcase_add_loop_test(tc, fault_persistent_eio, 0, 2);
    tcase_add_loop_test(tc, fault_retries_bounded, 0, 2);
    tcase_add_loop_test(tc, stop_in_flight, 0, 2);
#ifdef RF_AUDIT_ARCH
    tcase_add_test(tc, seccomp_fallback);
#endif
    tcase_add_test(tc, registration_refused);
    tcase_add_test(tc, whole_file_read);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return rf_test_run_suite_mode(io_suite(), CK_ENV);
}
