/* io_curl.c — the read engine for remote shards: libcurl's multi interface, one multi handle
 * per I/O thread, up to queue_depth ranged GETs in flight on each.
 *
 * DESIGN
 *  - Each slot keeps its easy handle for the thread's life, so connections are reused
 *    (keep-alive; HTTP/2 multiplexing where offered). Each transfer has its own timeouts, so one
 *    silent connection holds no other back. Bytes go straight to dst (rf_remote_body).
 *  - A retry waits in its slot, not in the multi handle, then asks for the same range again, up
 *    to max_retries; then the request fails with -EIO and the verdict's message.
 *  - A thread with nothing in flight or waiting blocks in take(); otherwise it polls its sockets
 *    a few milliseconds at a time between non-blocking takes. At stop every request in flight
 *    or waiting ends with -ECANCELED, so a stalled server never holds up stop().
 *  - A `cached` request reads the shard's checked copy on the I/O thread when taken; a copy that
 *    is gone or does not match goes to the server like any other.
 *  - rf_io_source.fault is not applied here: tests put a real proxy before a real server.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/io.h"
#include "io/remote.h"
#include "io/remote_cache.h"
#include "io/shard_cache.h"

#define CURL_POLL_MS 2    /* socket wait while there may be new requests to take */
#define CURL_IDLE_POLL_MS 50

enum { SLOT_FREE = 0, SLOT_RUNNING, SLOT_WAITING };

typedef struct cslot {
    CURL *h;
    rf_io_req *req;
    rf_xfer x;
    int state;
    uint32_t attempt;
    uint64_t due_ns;       /* SLOT_WAITING: when to try again */
    uint64_t got_before;   /* window bytes in place when the attempt started */
    char range[64];
    char why[RF_ERRMSG_MAX - 64];
} cslot;

typedef struct cthread {
    struct rf_io_engine *e;
    pthread_t tid;
    int started;
    CURLM *m;
    cslot *s;
    uint32_t busy;         /* slots not FREE */
    rf_io_req **taken;
    uint8_t *bounce;       /* 2 x RF_CACHE_SUM_BLOCK: cached reads' partly wanted blocks */
    char local_why[RF_ERRMSG_MAX]; /* a failed cached read's description, during its done() */
    _Atomic uint64_t busy_ns, reads, retries, bytes;
} cthread;

struct rf_io_engine {
    rf_io_params p;
    rf_io_source src;
    rf_remote *r;
    uint32_t nthreads;
    atomic_int stop;
    cthread *t;
};

/* Relaxed: counters for stats only. */
static void add(_Atomic uint64_t *c, uint64_t v) { atomic_fetch_add_explicit(c, v, memory_order_relaxed); }

/* Acquire pairs with curl_stop's release store: the stopper's writes are visible here. */
static int stopping(struct rf_io_engine *e) { return atomic_load_explicit(&e->stop, memory_order_acquire); }

static void slot_judge(cthread *t, cslot *c, CURLcode code);

static void slot_attempt(cthread *t, cslot *c)
{
    int ready = rf_remote_xfer_start(c->h, &c->x, c->range, sizeof c->range) == 0;
    c->got_before = c->x.got;
    c->state = SLOT_RUNNING;
    if (!ready) { /* not to be sent (no S3 credentials): judged now, the verdict says why */
        slot_judge(t, c, CURLE_OK);
        return;
    }
    add(&t->e->r->requests, 1);
    if (curl_multi_add_handle(t->m, c->h) != CURLM_OK) {
        c->x.errbuf[0] = 0; /* judged as a failed transfer right away */
        c->state = SLOT_WAITING;
        c->due_ns = 0;
    }
}

static void slot_begin(cthread *t, cslot *c, rf_io_req *req)
{
    c->req = req;
    c->attempt = 0;
    req->why = NULL;
    c->x = (rf_xfer){.r = t->e->r, .file = req->remote, .dst = req->dst, .off = req->offset,
                     .len = req->len, .got = req->done, .check = 1};
    rf_remote_easy(t->e->r, c->h, req->remote->url, req->remote->s3, &c->x);
    t->busy++;
    if (req->done >= req->len) { /* nothing to read (io.h): finished without I/O */
        c->state = SLOT_WAITING;
        c->due_ns = 0;
        return;
    }
    slot_attempt(t, c);
}

static void slot_finish(cthread *t, cslot *c, int result)
{
    rf_io_req *req = c->req;
    req->done = (uint32_t)c->x.got;
    req->result = result;
    req->why = result && result != -ECANCELED ? c->why : NULL;
    c->state = SLOT_FREE;
    c->req = NULL;
    t->busy--;
    add(&t->reads, 1);
    t->e->src.done(t->e->src.ctx, req);
}

/* A transfer ended with `code`: done, or wait and retry, or fail. */
static void slot_judge(cthread *t, cslot *c, CURLcode code)
{
    curl_multi_remove_handle(t->m, c->h);
    add(&t->e->r->bytes, c->x.body);
    uint32_t delay;
    int v = rf_remote_verdict(&c->x, code, c->attempt, &delay, c->why, sizeof c->why);
    if (v == RF_XFER_OK) {
        add(&t->bytes, c->x.got - c->got_before);
        slot_finish(t, c, 0);
        return;
    }
    if (v == RF_XFER_FAIL || c->attempt >= t->e->p.max_retries) {
        size_t n = strlen(c->why);
        if (c->attempt)
            snprintf(c->why + n, sizeof c->why - n, " (after %u retries)", c->attempt);
        slot_finish(t, c, -EIO);
        return;
    }
    /* The retry asks for the same range again (what a server or cache keyed by range has
     * seen), rewriting the same destination bytes. */
    c->x.got = c->got_before;
    c->attempt++;
    add(&t->retries, 1);
    add(&t->e->r->retried, 1);
    c->state = SLOT_WAITING;
    c->due_ns = rf_now_ns() + (uint64_t)delay * 1000000u;
}

/* Start the waiting slots whose time has come; returns ms until the next one (or -1). */
static long start_due(cthread *t)
{
    uint64_t now = rf_now_ns(), next = UINT64_MAX;
    for (uint32_t i = 0; i < t->e->p.queue_depth; i++) {
        cslot *c = &t->s[i];
        if (c->state != SLOT_WAITING)
            continue;
        if (c->req->done >= c->req->len && c->attempt == 0 && c->x.got >= c->x.len) {
            slot_finish(t, c, 0);
        } else if (c->due_ns <= now) {
            slot_attempt(t, c);
        } else {
            next = RF_MIN(next, c->due_ns);
        }
    }
    return next == UINT64_MAX ? -1 : (long)((next - now) / 1000000u) + 1;
}

static void reap(cthread *t)
{
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(t->m, &left))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        for (uint32_t i = 0; i < t->e->p.queue_depth; i++)
            if (t->s[i].state == SLOT_RUNNING && t->s[i].h == msg->easy_handle) {
                slot_judge(t, &t->s[i], msg->data.result);
                break;
            }
    }
}

/* A read of a cached shard's copy, checked, finished on this thread (past its end: -ENODATA).
 * 1: the copy is gone or did not match; read the request from the server. */
static int cached_read(cthread *t, rf_io_req *req)
{
    uint32_t before = req->done;
    int res = rf_rcache_read(t->e->p.rcache, req->file, req->dst + req->done,
                             req->len - req->done, req->offset + req->done, t->bounce,
                             t->local_why, sizeof t->local_why);
    if (res == RF_RCACHE_REMOTE)
        return 1;
    if (res == 0)
        req->done = req->len;
    req->result = res;
    req->why = res && res != -ENODATA ? t->local_why : NULL;
    add(&t->reads, 1);
    add(&t->bytes, req->done - before);
    t->e->src.done(t->e->src.ctx, req);
    return 0;
}

/* Take new requests into free slots: blocking only when nothing is in flight or waiting. */
static int take_more(cthread *t)
{
    uint32_t qd = t->e->p.queue_depth, free_slots = qd - t->busy;
    if (free_slots == 0)
        return 0;
    int n = t->e->src.take(t->e->src.ctx, t->taken, (int)free_slots, t->busy == 0);
    for (int k = 0, i = 0; k < n; k++) {
        if (t->taken[k]->cached && cached_read(t, t->taken[k]) == 0)
            continue;
        while (t->s[i].state != SLOT_FREE)
            i++;
        slot_begin(t, &t->s[i], t->taken[k]);
    }
    return n;
}

static void cancel_all(cthread *t)
{
    for (uint32_t i = 0; i < t->e->p.queue_depth; i++) {
        cslot *c = &t->s[i];
        if (c->state == SLOT_RUNNING)
            curl_multi_remove_handle(t->m, c->h);
        if (c->state != SLOT_FREE)
            slot_finish(t, c, -ECANCELED);
    }
}

static void *curl_main(void *arg)
{
    cthread *t = arg;
    struct rf_io_engine *e = t->e;
    uint64_t seg = rf_now_ns();
    while (!stopping(e)) {
        /* Busy: all but the time blocked in take(block=1), i.e. with nothing in flight. */
        uint64_t now = rf_now_ns();
        add(&t->busy_ns, now - seg);
        seg = now;
        int blocked = t->busy == 0;
        int n = take_more(t);
        if (blocked)
            seg = rf_now_ns();
        if (n < 0)
            break;
        long due = start_due(t);
        int running = 0;
        curl_multi_perform(t->m, &running);
        reap(t);
        if (t->busy == 0)
            continue;
        long wait = t->busy < e->p.queue_depth ? CURL_POLL_MS : CURL_IDLE_POLL_MS;
        if (due >= 0)
            wait = RF_MIN(wait, due);
        curl_multi_poll(t->m, NULL, 0, (int)wait, NULL);
        curl_multi_perform(t->m, &running);
        reap(t);
    }
    cancel_all(t);
    add(&t->busy_ns, rf_now_ns() - seg);
    return NULL;
}

static void thread_free(cthread *t, uint32_t qd)
{
    for (uint32_t i = 0; t->s && i < qd; i++)
        if (t->s[i].h)
            curl_easy_cleanup(t->s[i].h);
    if (t->m)
        curl_multi_cleanup(t->m);
    free(t->s);
    free(t->taken);
    free(t->bounce);
}

static int thread_init(struct rf_io_engine *e, cthread *t)
{
    t->e = e;
    t->m = curl_multi_init();
    t->s = calloc(e->p.queue_depth, sizeof *t->s);
    t->taken = calloc(e->p.queue_depth, sizeof *t->taken);
    t->bounce = e->p.rcache ? malloc(2 * RF_CACHE_SUM_BLOCK) : NULL;
    if (!t->m || !t->s || !t->taken || (e->p.rcache && !t->bounce))
        return -1;
    curl_multi_setopt(t->m, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
    /* Connections this thread keeps open (one per server on HTTP/2, up to queue_depth on
     * HTTP/1.1). */
    curl_multi_setopt(t->m, CURLMOPT_MAXCONNECTS, (long)e->p.queue_depth);
    for (uint32_t i = 0; i < e->p.queue_depth; i++)
        if (!(t->s[i].h = curl_easy_init()))
            return -1;
    return 0;
}

static void curl_stop(rf_io_engine *e, rf_io_stats *final);

static int curl_start(const rf_io_params *p, const rf_io_source *src, rf_io_engine **out,
                      rf_err *err)
{
    *out = NULL;
    if (p->threads == 0 || p->threads > RF_IO_THREADS_MAX || p->queue_depth == 0 ||
        p->queue_depth > RF_IO_QUEUE_DEPTH_MAX || !src->take || !src->done || !p->remote)
        return rf_seterr(err, RF_EINVAL, "curl: threads must be 1..%u, queue_depth 1..%u",
                         RF_IO_THREADS_MAX, RF_IO_QUEUE_DEPTH_MAX);
    struct rf_io_engine *e = calloc(1, sizeof *e);
    if (!e)
        return rf_seterr(err, RF_ENOMEM, "curl: out of memory");
    e->p = *p;
    e->src = *src;
    e->r = p->remote;
    e->nthreads = p->threads;
    atomic_init(&e->stop, 0);
    e->t = calloc(e->nthreads, sizeof *e->t);
    int rc = e->t ? 0 : -ENOMEM;
    for (uint32_t i = 0; rc == 0 && i < e->nthreads; i++)
        rc = thread_init(e, &e->t[i]) ? -ENOMEM : 0;
    for (uint32_t i = 0; rc == 0 && i < e->nthreads; i++) {
        int prc = pthread_create(&e->t[i].tid, NULL, curl_main, &e->t[i]);
        if (prc) {
            rc = -prc;
        } else {
            e->t[i].started = 1;
            rf_thread_name(e->t[i].tid, "rf-http", (int)i);
        }
    }
    if (rc) {
        curl_stop(e, NULL);
        return rf_seterr(err, rc, "curl: starting the I/O threads failed: %s", strerror(-rc));
    }
    *out = e;
    return 0;
}

static void curl_stats(rf_io_engine *e, rf_io_stats *st)
{
    memset(st, 0, sizeof *st);
    for (uint32_t i = 0; i < e->nthreads; i++) {
        cthread *t = &e->t[i];
        /* Relaxed: stats only; each counter is exact on its own, not a snapshot of all. */
        st->busy_ns += atomic_load_explicit(&t->busy_ns, memory_order_relaxed);
        st->reads += atomic_load_explicit(&t->reads, memory_order_relaxed);
        st->retries += atomic_load_explicit(&t->retries, memory_order_relaxed);
        st->bytes += atomic_load_explicit(&t->bytes, memory_order_relaxed);
    }
}

static void curl_stop(rf_io_engine *e, rf_io_stats *final)
{
    if (!e)
        return;
    atomic_store_explicit(&e->stop, 1, memory_order_release); /* see stopping() */
    for (uint32_t i = 0; e->t && i < e->nthreads; i++)
        if (e->t[i].started) {
            curl_multi_wakeup(e->t[i].m);
            pthread_join(e->t[i].tid, NULL);
        }
    if (final)
        curl_stats(e, final);
    for (uint32_t i = 0; e->t && i < e->nthreads; i++)
        thread_free(&e->t[i], e->p.queue_depth);
    free(e->t);
    free(e);
}

static int curl_registered(rf_io_engine *e) { return 0; }

const rf_io_ops rf_io_curl_ops = {
    .name = "curl",
    .start = curl_start,
    .stop = curl_stop,
    .stats = curl_stats,
    .registered = curl_registered,
};
