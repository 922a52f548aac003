/* io_uring.c — the io_uring read engine: one ring per I/O thread.
 *
 * DESIGN
 *  - Each I/O thread creates its own ring (so IORING_SETUP_SINGLE_ISSUER binds it to its only
 *    submitter) and registers the arena on it; start() fails, with no work taken, if any did.
 *  - No queues of our own: a thread takes up to queue_depth - inflight requests, prepares one
 *    SQE each and submits them with the wait for the next completion; short reads and
 *    transient errors are re-prepared right away.
 *  - A thread sleeps in take(block=1) only with nothing in flight (the source wakes it), else in
 *    io_uring_enter (a CQE wakes it, or stop() through an eventfd every ring polls). No lock is
 *    held across either wait. At stop it cancels what is in flight, so a read on an empty pipe
 *    cannot hang shutdown.
 *  - done() runs in completion order; the pipeline places bytes by req->dst. */
#include "io/io.h"

#include <assert.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <liburing.h>

#ifndef IORING_SETUP_COOP_TASKRUN
#define IORING_SETUP_COOP_TASKRUN (1U << 8)
#endif
#ifndef IORING_SETUP_SINGLE_ISSUER
#define IORING_SETUP_SINGLE_ISSUER (1U << 12)
#endif
#ifndef IORING_ASYNC_CANCEL_ANY
#define IORING_ASYNC_CANCEL_ANY (1U << 2)
#endif

/* The kernel rejects a fixed-buffer iovec above 1 GiB, so a larger arena is registered as
 * several 1 GiB iovecs (buf_index = which GiB); a read that straddles two falls back to READ. */
#define URING_FIXED_IOV_BYTES (1ull << 30)
#define URING_FIXED_IOVS_MAX 64u

/* user_data of the two SQEs that are not reads; read requests are pointers, never 0 or 1. */
#define UD_CANCEL 0u
#define UD_WAKE 1u
/* SQ slots beyond queue_depth: the wake-up poll and the cancel at stop. */
#define URING_EXTRA_SQES 2u

typedef struct uring_thread {
    struct rf_io_engine *e;
    pthread_t tid;
    int started;
    struct io_uring ring;
    int ring_ok;
    int registered;
    int taking;             /* still calling take() */
    uint32_t inflight;      /* requests owned by this thread and not yet done() */
    rf_io_req **batch;
    struct io_uring_cqe **cqes; /* queue_depth + URING_EXTRA_SQES slots for peek_batch_cqe */
    int setup_rc;
    char setup_msg[RF_ERRMSG_MAX];
    /* Read by stats() from another thread while running, hence atomics (relaxed). */
    _Atomic uint64_t busy_ns, reads, retries, bytes;
    rf_io_acct acct;        /* storage bytes of this thread and its io-wq workers */
} uring_thread;

struct rf_io_engine {
    rf_io_params p;
    rf_io_source src;
    uint32_t nthreads;
    uint32_t qd;
    uint32_t nfixed;        /* arena iovecs to register, 0 when no arena */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint32_t reported;      /* threads that finished setup (guarded by mu) */
    int go;                 /* 0 wait, 1 run, -1 exit without running (guarded by mu) */
    atomic_int stop;        /* set by stop(): threads stop calling take() */
    int wake_fd;            /* eventfd: stop() makes it readable, every ring polls it */
    uring_thread *t;
};

/* Relaxed: the counters are read only for stats and publish no other data. */
static void add(_Atomic uint64_t *c, uint64_t v) { atomic_fetch_add_explicit(c, v, memory_order_relaxed); }

/* Explain a failed io_uring_setup in words the user can act on. */
static void setup_reason(int err, char *why, size_t why_len)
{
    char buf[64];
    const char *s = strerror_r(-err, buf, sizeof buf);
    if (err == -EPERM) {
        int disabled = -1;
        FILE *f = fopen("/proc/sys/kernel/io_uring_disabled", "r");
        if (f) {
            if (fscanf(f, "%d", &disabled) != 1)
                disabled = -1;
            fclose(f);
        }
        if (disabled == 2)
            snprintf(why, why_len, "io_uring_setup: %s (kernel.io_uring_disabled=2: io_uring is "
                     "switched off on this machine)", s);
        else if (disabled == 1)
            snprintf(why, why_len, "io_uring_setup: %s (kernel.io_uring_disabled=1: only "
                     "privileged users or kernel.io_uring_group may use it)", s);
        else if (disabled == 0)
            snprintf(why, why_len, "io_uring_setup: %s (seccomp: kernel.io_uring_disabled=0, so "
                     "a seccomp filter of the container or sandbox blocks it)", s);
        else
            snprintf(why, why_len, "io_uring_setup: %s (seccomp or kernel.io_uring_disabled)", s);
    } else if (err == -ENOSYS) {
        snprintf(why, why_len, "io_uring_setup: kernel without io_uring (ENOSYS)");
    } else if (err == -ENOMEM) {
        snprintf(why, why_len, "io_uring_setup: %s (ring memory; RLIMIT_MEMLOCK on kernels "
                 "before 5.12)", s);
    } else {
        snprintf(why, why_len, "io_uring_setup: %s", s);
    }
}

/* Create a ring with the cheapest flags this kernel accepts: SINGLE_ISSUER (6.0) and
 * COOP_TASKRUN (5.19) save wake-ups, but older kernels reject unknown flags with -EINVAL, so
 * drop them one at a time. Returns 0 or -errno from io_uring_setup. */
static int ring_create(struct io_uring *ring, uint32_t entries)
{
    static const unsigned flag_sets[] = {
        IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN, IORING_SETUP_COOP_TASKRUN, 0};
    int rc = -EINVAL;
    for (size_t i = 0; i < sizeof flag_sets / sizeof flag_sets[0]; i++) {
        struct io_uring_params prm;
        memset(&prm, 0, sizeof prm);
        prm.flags = flag_sets[i];
        rc = io_uring_queue_init_params(entries, ring, &prm);
        if (rc != -EINVAL)
            return rc;
    }
    return rc;
}

int rf_io_uring_probe(char *why, size_t why_len)
{
    struct io_uring ring;
    int rc = ring_create(&ring, 4);
    if (rc < 0) {
        setup_reason(rc, why, why_len);
        return rc;
    }
    io_uring_queue_exit(&ring);
    snprintf(why, why_len, "io_uring available");
    return 0;
}

/* Register the arena as fixed buffers. Failure is not an error: RLIMIT_MEMLOCK (ENOMEM), a
 * file-backed arena (EOPNOTSUPP) or an old kernel just mean plain reads. */
static void ring_register(uring_thread *t)
{
    struct rf_io_engine *e = t->e;
    struct iovec iov[URING_FIXED_IOVS_MAX];
    if (e->nfixed == 0)
        return;
    for (uint32_t i = 0; i < e->nfixed; i++) {
        uint64_t off = (uint64_t)i * URING_FIXED_IOV_BYTES;
        iov[i].iov_base = e->p.arena + off;
        iov[i].iov_len = (size_t)RF_MIN(URING_FIXED_IOV_BYTES, e->p.arena_bytes - off);
    }
    t->registered = io_uring_register_buffers(&t->ring, iov, e->nfixed) == 0;
}

static void prep_attempt(uring_thread *t, rf_io_req *req)
{
    struct rf_io_engine *e = t->e;
    struct io_uring_sqe *sqe = io_uring_get_sqe(&t->ring);
    /* The SQ has queue_depth + 2 entries; at most inflight + 2 (poll, cancel) are unsubmitted. */
    assert(sqe);
    /* Only a request with bytes left gets an attempt (start_req, rf_io_complete). */
    assert(req->done < req->len);
    uint32_t n = RF_MIN(req->len - req->done, RF_IO_ATTEMPT_BYTES_MAX);
    uint8_t *dst = req->dst + req->done;
    uint64_t off = req->offset + req->done;
    int fixed = -1;
    if (t->registered && dst >= e->p.arena && dst + n <= e->p.arena + e->p.arena_bytes) {
        uint64_t a = (uint64_t)(dst - e->p.arena), b = a + n - 1;
        if (a / URING_FIXED_IOV_BYTES == b / URING_FIXED_IOV_BYTES)
            fixed = (int)(a / URING_FIXED_IOV_BYTES);
    }
    if (fixed >= 0)
        io_uring_prep_read_fixed(sqe, req->fd, dst, n, off, fixed);
    else
        io_uring_prep_read(sqe, req->fd, dst, n, off);
    if (e->p.flags & RF_IO_FORCE_ASYNC)
        sqe->flags |= IOSQE_ASYNC;
    io_uring_sqe_set_data(sqe, req);
}

static void finish(uring_thread *t, rf_io_req *req)
{
    assert(t->inflight > 0); /* every finished request was started on this thread */
    t->inflight--;
    add(&t->reads, 1);
    t->e->src.done(t->e->src.ctx, req);
}

static void start_req(uring_thread *t, rf_io_req *req)
{
    /* take() was asked for at most qd - inflight: the SQ has room for every attempt. */
    assert(t->inflight < t->e->qd);
    t->inflight++;
    if (req->done >= req->len) {
        req->result = 0;
        finish(t, req);
        return;
    }
    prep_attempt(t, req);
}

/* One attempt with pread on this thread, for the per-operation fallback below. */
static int sync_attempt(const rf_io_req *req)
{
    uint32_t n = RF_MIN(req->len - req->done, RF_IO_ATTEMPT_BYTES_MAX);
    ssize_t r = pread(req->fd, req->dst + req->done, n, (off_t)(req->offset + req->done));
    return r < 0 ? -errno : (int)r;
}

static void on_cqe(uring_thread *t, rf_io_req *req, int res)
{
    /* Per-operation fallback: a file whose kernel driver cannot read asynchronously answers
     * -EOPNOTSUPP; read it synchronously here rather than fail the sample. */
    if (res == -EOPNOTSUPP)
        res = sync_attempt(req);
    uint32_t before = req->done;
    int act = rf_io_complete(&t->e->src, req, res, &t->e->p);
    add(&t->bytes, req->done - before);
    if (act == RF_IO_RESUBMIT && t->taking) {
        add(&t->retries, 1);
        prep_attempt(t, req);
        return;
    }
    if (act == RF_IO_RESUBMIT)
        req->result = -ECANCELED;
    finish(t, req);
}

static void reap(uring_thread *t)
{
    unsigned cap = t->e->qd + URING_EXTRA_SQES, n;
    while ((n = io_uring_peek_batch_cqe(&t->ring, t->cqes, cap)) > 0) {
        assert(n <= cap);
        for (unsigned i = 0; i < n; i++) {
            uint64_t ud = io_uring_cqe_get_data64(t->cqes[i]);
            /* The wake-up poll fired (stop() was called; run() checks the flag next) or the
             * cancel finished: nothing to do for either. */
            if (ud != UD_CANCEL && ud != UD_WAKE)
                on_cqe(t, (rf_io_req *)(uintptr_t)ud, t->cqes[i]->res);
        }
        io_uring_cq_advance(&t->ring, n);
    }
}

/* Stop taking; cancel what the kernel still holds (best effort: kernels before 5.19 answer
 * -EINVAL, and running reads of regular files just complete). */
static void stop_taking(uring_thread *t)
{
    t->taking = 0;
    if (t->inflight == 0)
        return;
    struct io_uring_sqe *sqe = io_uring_get_sqe(&t->ring);
    assert(sqe);
    io_uring_prep_cancel64(sqe, 0, (int)IORING_ASYNC_CANCEL_ANY);
    io_uring_sqe_set_data64(sqe, UD_CANCEL);
}

/* Submit what is prepared and wait for wait_nr completions. Resource shortages are left to the
 * caller's loop after a short sleep; any other failure is a bug in how we use the ring. */
static void submit_wait(uring_thread *t, unsigned wait_nr)
{
    int rc = io_uring_submit_and_wait(&t->ring, wait_nr);
    if (rc >= 0 || rc == -EINTR || rc == -ETIME)
        return;
    if (rc == -EAGAIN || rc == -EBUSY || rc == -ENOMEM) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
        return;
    }
    fprintf(stderr, "ringfeed: io_uring_enter failed: %s\n", strerror(-rc));
    assert(!"io_uring_enter failed");
    abort();
}

static void run(uring_thread *t)
{
    struct rf_io_engine *e = t->e;
    uint64_t seg = rf_now_ns();
    t->taking = 1;
    /* Reads that the kernel hands to io-wq are charged to its workers: follow them too. */
    rf_io_acct_start(&t->acct, (e->p.flags & RF_IO_ACCOUNT) != 0, 1);
    /* One-shot poll: it fires once, when stop() writes the eventfd, which is all we need. */
    struct io_uring_sqe *sqe = io_uring_get_sqe(&t->ring);
    assert(sqe);
    io_uring_prep_poll_add(sqe, e->wake_fd, POLLIN);
    io_uring_sqe_set_data64(sqe, UD_WAKE);
    /* Submitted now, so that the loop never waits for a CQE with no read in flight. */
    while (io_uring_sq_ready(&t->ring) > 0)
        submit_wait(t, 0);
    for (;;) {
        /* Acquire pairs with stop()'s release: what the stopping thread did before setting
         * the flag (the source's own stop state) is visible once the flag is. */
        if (t->taking && atomic_load_explicit(&e->stop, memory_order_acquire))
            stop_taking(t);
        if (t->taking && t->inflight < e->qd) {
            int block = t->inflight == 0;
            if (block) {
                rf_io_acct_sample(&t->acct, 1);
                add(&t->busy_ns, rf_now_ns() - seg);
            }
            int n = e->src.take(e->src.ctx, t->batch, (int)(e->qd - t->inflight), block);
            if (block)
                seg = rf_now_ns();
            if (n < 0) {
                stop_taking(t);
            } else {
                assert((uint32_t)n <= e->qd - t->inflight);
                for (int i = 0; i < n; i++)
                    start_req(t, t->batch[i]);
            }
        }
        if (t->inflight == 0) {
            if (!t->taking)
                break;
            continue;
        }
        submit_wait(t, 1);
        /* Before the completions' done(): their reads were charged when submitted. */
        rf_io_acct_sample(&t->acct, 0);
        reap(t);
        uint64_t now = rf_now_ns();
        add(&t->busy_ns, now - seg);
        seg = now;
    }
    /* io_uring_queue_exit discards the cancel's unreaped CQE. The workers live until then:
     * their last counts are read here. */
    rf_io_acct_finish(&t->acct);
    add(&t->busy_ns, rf_now_ns() - seg);
}

static void *thread_main(void *arg)
{
    uring_thread *t = arg;
    struct rf_io_engine *e = t->e;
    int rc = ring_create(&t->ring, e->qd + URING_EXTRA_SQES);
    if (rc == 0) {
        t->ring_ok = 1;
        ring_register(t);
    } else {
        setup_reason(rc, t->setup_msg, sizeof t->setup_msg);
    }
    pthread_mutex_lock(&e->mu);
    t->setup_rc = rc;
    e->reported++;
    pthread_cond_broadcast(&e->cv);
    while (e->go == 0)
        pthread_cond_wait(&e->cv, &e->mu);
    int go = e->go;
    pthread_mutex_unlock(&e->mu);
    if (go > 0)
        run(t);
    if (t->ring_ok)
        io_uring_queue_exit(&t->ring);
    t->ring_ok = 0;
    return NULL;
}

static void engine_free(struct rf_io_engine *e)
{
    if (e->t) {
        for (uint32_t i = 0; i < e->nthreads; i++) {
            free(e->t[i].batch);
            free(e->t[i].cqes);
        }
    }
    free(e->t);
    if (e->wake_fd >= 0)
        close(e->wake_fd);
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
    free(e);
}

static void release_and_join(struct rf_io_engine *e, int go)
{
    pthread_mutex_lock(&e->mu);
    e->go = go;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    for (uint32_t i = 0; i < e->nthreads; i++)
        if (e->t[i].started)
            pthread_join(e->t[i].tid, NULL);
}

/* Start p->threads threads, each with its own ring (io.h's start). */
static int uring_start(const rf_io_params *p, const rf_io_source *src, rf_io_engine **out, rf_err *err)
{
    *out = NULL;
    if (p->threads == 0 || p->threads > RF_IO_THREADS_MAX || p->queue_depth == 0 ||
        p->queue_depth > RF_IO_QUEUE_DEPTH_MAX || !src->take || !src->done)
        return rf_seterr(err, RF_EINVAL, "io_uring: threads must be 1..%u, queue_depth 1..%u",
                         RF_IO_THREADS_MAX, RF_IO_QUEUE_DEPTH_MAX);
    struct rf_io_engine *e = calloc(1, sizeof *e);
    if (!e)
        return rf_seterr(err, RF_ENOMEM, "io_uring: out of memory");
    e->p = *p;
    e->src = *src;
    e->nthreads = p->threads;
    e->qd = p->queue_depth;
    if (p->arena && p->arena_bytes > 0) {
        uint64_t n = (p->arena_bytes + URING_FIXED_IOV_BYTES - 1) / URING_FIXED_IOV_BYTES;
        e->nfixed = n <= URING_FIXED_IOVS_MAX ? (uint32_t)n : 0;
    }
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    atomic_init(&e->stop, 0);
    e->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (e->wake_fd < 0) {
        int rc = -errno;
        engine_free(e);
        return rf_seterr(err, rc, "io_uring: eventfd: %s", strerror(-rc));
    }
    e->t = calloc(e->nthreads, sizeof *e->t);
    if (!e->t) {
        engine_free(e);
        return rf_seterr(err, RF_ENOMEM, "io_uring: out of memory");
    }
    for (uint32_t i = 0; i < e->nthreads; i++) {
        uring_thread *t = &e->t[i];
        t->e = e;
        t->batch = calloc(e->qd, sizeof *t->batch);
        t->cqes = calloc(e->qd + URING_EXTRA_SQES, sizeof *t->cqes);
        if (!t->batch || !t->cqes) {
            engine_free(e);
            return rf_seterr(err, RF_ENOMEM, "io_uring: out of memory");
        }
    }
    int rc = 0;
    uint32_t started = 0;
    for (; started < e->nthreads; started++) {
        rc = -pthread_create(&e->t[started].tid, NULL, thread_main, &e->t[started]);
        if (rc < 0)
            break;
        e->t[started].started = 1;
        rf_thread_name(e->t[started].tid, "rf-io", (int)started);
    }
    pthread_mutex_lock(&e->mu);
    while (e->reported < started)
        pthread_cond_wait(&e->cv, &e->mu);
    pthread_mutex_unlock(&e->mu);
    if (rc < 0) {
        rf_seterr(err, rc, "io_uring: pthread_create: %s", strerror(-rc));
    } else {
        for (uint32_t i = 0; i < e->nthreads && rc == 0; i++) {
            if (e->t[i].setup_rc < 0) {
                rc = e->t[i].setup_rc;
                rf_seterr(err, rc, "%s", e->t[i].setup_msg);
            }
        }
    }
    if (rc < 0) {
        release_and_join(e, -1);
        engine_free(e);
        return rc;
    }
    pthread_mutex_lock(&e->mu);
    e->go = 1;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    *out = e;
    return 0;
}

static void uring_stats(rf_io_engine *e, rf_io_stats *st);

static void uring_stop(rf_io_engine *e, rf_io_stats *final)
{
    if (!e)
        return;
    /* Release: see run()'s acquire load of the flag. */
    atomic_store_explicit(&e->stop, 1, memory_order_release);
    /* Wake threads asleep in io_uring_enter; it stays readable, so a late poll fires too. */
    uint64_t one = 1;
    if (write(e->wake_fd, &one, sizeof one) < 0) {
        /* Cannot fail on a valid eventfd below its maximum count; nothing else to do. */
    }
    release_and_join(e, 1);
    if (final)
        uring_stats(e, final);
    engine_free(e);
}

static void uring_stats(rf_io_engine *e, rf_io_stats *st)
{
    memset(st, 0, sizeof *st);
    for (uint32_t i = 0; i < e->nthreads; i++) {
        uring_thread *t = &e->t[i];
        /* Relaxed: stats only; each counter is exact on its own, not a snapshot of all. */
        st->busy_ns += atomic_load_explicit(&t->busy_ns, memory_order_relaxed);
        st->reads += atomic_load_explicit(&t->reads, memory_order_relaxed);
        st->retries += atomic_load_explicit(&t->retries, memory_order_relaxed);
        st->bytes += atomic_load_explicit(&t->bytes, memory_order_relaxed);
        st->storage_bytes += rf_io_acct_bytes(&t->acct);
    }
}

/* 1 when every thread's ring reads into the registered arena (READ_FIXED for dst inside it). */
static int uring_registered(rf_io_engine *e)
{
    if (e->nfixed == 0)
        return 0;
    for (uint32_t i = 0; i < e->nthreads; i++)
        if (!e->t[i].registered)
            return 0;
    return 1;
}

const rf_io_ops rf_io_uring_ops = {
    .name = "io_uring",
    .start = uring_start,
    .stop = uring_stop,
    .stats = uring_stats,
    .registered = uring_registered,
};
