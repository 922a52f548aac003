/* io_pread.c — the fallback read engine: a pool of threads calling pread().
 *
 * DESIGN
 *  - Used where io_uring is refused (seccomp, io_uring_disabled, old kernels) or asked for.
 *  - Each worker takes up to RF_IO_PREAD_BATCH requests at a time and preads each to completion
 *    through rf_io_complete(), so retries and fault injection match the io_uring engine. A few,
 *    not one, amortize the source's lock; many would queue requests behind a slow one while
 *    other workers idle.
 *  - A worker has nothing in flight between batches, so it always takes with block=1 and the
 *    source wakes it.
 *  - Stopping: the read in progress completes its attempt (a pread of a regular file cannot be
 *    interrupted); held requests that need another attempt, or have not started, finish with
 *    -ECANCELED.
 */
#include "io/io.h"

#include <assert.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RF_IO_PREAD_BATCH 4u

typedef struct pread_thread {
    struct rf_io_engine *e;
    pthread_t tid;
    int started;
    /* Read by stats() from another thread while running, hence atomics (relaxed). */
    _Atomic uint64_t busy_ns, reads, retries, bytes;
    rf_io_acct acct;        /* storage bytes this thread's reads and hints caused */
} pread_thread;

struct rf_io_engine {
    rf_io_params p;
    rf_io_source src;
    uint32_t nthreads;
    uint32_t batch;
    /* Workers wait for go before their first take(), so a failed start never has to wake a
     * worker sleeping inside the source's take(block=1). */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int go;                 /* 0 wait, 1 run, -1 exit at once (guarded by mu) */
    atomic_int stop;        /* set by stop(): workers stop taking and starting attempts */
    pread_thread *t;
};

/* Relaxed: the counters are read only for stats and publish no other data. */
static void add(_Atomic uint64_t *c, uint64_t v) { atomic_fetch_add_explicit(c, v, memory_order_relaxed); }

/* Acquire pairs with stop_and_join()'s release: what the stopping thread did before setting the
 * flag is visible to a worker that sees it. */
static int stopping(struct rf_io_engine *e) { return atomic_load_explicit(&e->stop, memory_order_acquire); }

/* Read one request to its end (or failure) and hand it back. */
static void read_one(pread_thread *t, rf_io_req *req)
{
    struct rf_io_engine *e = t->e;
    int act = RF_IO_RESUBMIT;
    if (req->done >= req->len) {
        req->result = 0;
        act = RF_IO_FINISHED;
    }
    while (act == RF_IO_RESUBMIT) {
        if (stopping(e)) {
            req->result = -ECANCELED;
            break;
        }
        assert(req->done < req->len); /* finished above, or rf_io_complete said RESUBMIT */
        uint32_t n = RF_MIN(req->len - req->done, RF_IO_ATTEMPT_BYTES_MAX);
        ssize_t r = pread(req->fd, req->dst + req->done, n, (off_t)(req->offset + req->done));
        uint32_t before = req->done;
        act = rf_io_complete(&e->src, req, r < 0 ? -errno : (int)r, &e->p);
        add(&t->bytes, req->done - before);
        if (act == RF_IO_RESUBMIT)
            add(&t->retries, 1);
    }
    add(&t->reads, 1);
    /* Before done(): a consumer that sees the sample also sees the storage bytes it cost. */
    rf_io_acct_sample(&t->acct, 0);
    e->src.done(e->src.ctx, req);
}

static void *worker_main(void *arg)
{
    pread_thread *t = arg;
    struct rf_io_engine *e = t->e;
    rf_io_req *batch[RF_IO_PREAD_BATCH];
    pthread_mutex_lock(&e->mu);
    while (e->go == 0)
        pthread_cond_wait(&e->cv, &e->mu);
    int go = e->go;
    pthread_mutex_unlock(&e->mu);
    if (go < 0)
        return NULL;
    /* A pread is charged to the thread that calls it: no other thread to follow. */
    rf_io_acct_start(&t->acct, (e->p.flags & RF_IO_ACCOUNT) != 0, 0);
    uint64_t seg = rf_now_ns();
    while (!stopping(e)) {
        add(&t->busy_ns, rf_now_ns() - seg);
        int n = e->src.take(e->src.ctx, batch, (int)e->batch, 1);
        seg = rf_now_ns();
        if (n < 0)
            break;
        assert((uint32_t)n <= e->batch);
        for (int i = 0; i < n; i++)
            read_one(t, batch[i]);
    }
    rf_io_acct_finish(&t->acct);
    add(&t->busy_ns, rf_now_ns() - seg);
    return NULL;
}

static void engine_free(struct rf_io_engine *e)
{
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
    free(e->t);
    free(e);
}

static void set_go(struct rf_io_engine *e, int go)
{
    pthread_mutex_lock(&e->mu);
    e->go = go;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

static void stop_and_join(struct rf_io_engine *e, int go)
{
    atomic_store_explicit(&e->stop, 1, memory_order_release); /* see stopping() */
    set_go(e, go);
    for (uint32_t i = 0; i < e->nthreads; i++)
        if (e->t[i].started)
            pthread_join(e->t[i].tid, NULL);
}

/* Start p->threads workers. Returns 0 and *out; or RF_EINVAL, RF_ENOMEM, or -errno from
 * pthread_create (no take() happened then). The arena is not used. */
static int pread_start(const rf_io_params *p, const rf_io_source *src, rf_io_engine **out, rf_err *err)
{
    *out = NULL;
    if (p->threads == 0 || p->threads > RF_IO_THREADS_MAX || p->queue_depth == 0 ||
        p->queue_depth > RF_IO_QUEUE_DEPTH_MAX || !src->take || !src->done)
        return rf_seterr(err, RF_EINVAL, "pread: threads must be 1..%u, queue_depth 1..%u",
                         RF_IO_THREADS_MAX, RF_IO_QUEUE_DEPTH_MAX);
    struct rf_io_engine *e = calloc(1, sizeof *e);
    if (!e)
        return rf_seterr(err, RF_ENOMEM, "pread: out of memory");
    e->p = *p;
    e->src = *src;
    e->nthreads = p->threads;
    e->batch = RF_MIN(p->queue_depth, RF_IO_PREAD_BATCH);
    atomic_init(&e->stop, 0);
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    e->t = calloc(e->nthreads, sizeof *e->t);
    if (!e->t) {
        engine_free(e);
        return rf_seterr(err, RF_ENOMEM, "pread: out of memory");
    }
    for (uint32_t i = 0; i < e->nthreads; i++) {
        e->t[i].e = e;
        int rc = pthread_create(&e->t[i].tid, NULL, worker_main, &e->t[i]);
        if (rc != 0) {
            stop_and_join(e, -1);
            engine_free(e);
            return rf_seterr(err, -rc, "pread: pthread_create: %s", strerror(rc));
        }
        e->t[i].started = 1;
        rf_thread_name(e->t[i].tid, "rf-io", (int)i);
    }
    set_go(e, 1);
    *out = e;
    return 0;
}

static void pread_stats(rf_io_engine *e, rf_io_stats *st);

static void pread_stop(rf_io_engine *e, rf_io_stats *final)
{
    if (!e)
        return;
    stop_and_join(e, 1);
    if (final)
        pread_stats(e, final);
    engine_free(e);
}

static void pread_stats(rf_io_engine *e, rf_io_stats *st)
{
    memset(st, 0, sizeof *st);
    for (uint32_t i = 0; i < e->nthreads; i++) {
        pread_thread *t = &e->t[i];
        /* Relaxed: stats only; each counter is exact on its own, not a snapshot of all. */
        st->busy_ns += atomic_load_explicit(&t->busy_ns, memory_order_relaxed);
        st->reads += atomic_load_explicit(&t->reads, memory_order_relaxed);
        st->retries += atomic_load_explicit(&t->retries, memory_order_relaxed);
        st->bytes += atomic_load_explicit(&t->bytes, memory_order_relaxed);
        st->storage_bytes += rf_io_acct_bytes(&t->acct);
    }
}

static int pread_registered(rf_io_engine *e) { return 0; }

const rf_io_ops rf_io_pread_ops = {
    .name = "pread",
    .start = pread_start,
    .stop = pread_stop,
    .stats = pread_stats,
    .registered = pread_registered,
};
