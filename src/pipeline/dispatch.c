/* dispatch.c — the forward cursor and the I/O engine's two callbacks: take() walks the plan,
 * claiming slots, tasks and arena spans and emitting reads; done() queues a read for decode
 * (token windows: counts it in); pl_task_end, where decode threads hand back a sample; and the
 * fail policy.
 * take() and done() run on the I/O threads, pl_task_end on the decode threads: bookkeeping
 * under mu, system calls (open, close, page-cache checks) outside it. Outcomes, epoch ends and
 * its own outputs go only through d->policy. */
#include "pipeline/dispatch.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/convert.h"
#include "pipeline/cache.h"
#include "pipeline/gpu_decode.h"
#include "pipeline/submit.h"

void pl_dispatch_init(pl_dispatch *d, const rf_config *c, pl_core *core, pl_ring *ring,
                      rf_plan *plan, const rf_dataset *ds, rf_pagecache *pc,
                      struct pl_remote *remote, struct pl_gpu *gpu, struct pl_submit *submit,
                      const pl_policy *policy, struct pl_skip *skip)
{
    d->core = core, d->ring = ring, d->plan = plan, d->ds = ds, d->pc = pc;
    d->remote = remote, d->gpu = gpu, d->submit = submit, d->policy = policy, d->skip = skip;
    d->epochs = c->epochs;
    d->sequential = c->token_windows == RF_WINDOWS_SEQUENTIAL;
}

/* Staging: enough for every decode thread to have work queued behind it plus a full queue of
 * reads, and never less than a few of the largest samples. The task ring is sized before the
 * I/O engine picks its thread count: io_threads as configured, 1 when AUTO. */
int pl_dispatch_alloc(pl_dispatch *d, const rf_config *c, rf_err *err)
{
    const rf_dataset *ds = d->ds;
    uint64_t mean = ds->total_bytes / ds->nsamples + 1;
    uint64_t want = c->staging_bytes;
    if (!want)
        want = RF_MAX(64ull << 20, mean * 8 * (c->decode_threads + c->io_queue_depth));
    want = RF_MAX(want, 4 * ds->max_span);
    if (rf_pc_odirect(d->pc)) /* aligned reads are up to two blocks longer than the span */
        want = RF_MAX(want, 4 * (ds->max_span + 2 * rf_pc_align(d->pc)));
    if (d->ring->tokens) /* token windows are read straight into the slots */
        want = 1u << 20;
    d->arena_bytes = (want + 4095) / 4096 * 4096;
    if (d->arena_bytes > SIZE_MAX || pl_alloc_refused(d->core, "staging arena", d->arena_bytes))
        d->arena = NULL;
    else
        d->arena = aligned_alloc(4096, d->arena_bytes);
    if (!d->arena)
        return rf_seterr(err, RF_ENOMEM, "cannot allocate the %llu-byte staging arena for reads "
                         "(%s; largest sample %llu bytes): out of memory",
                         (unsigned long long)d->arena_bytes,
                         c->staging_bytes ? "staging_bytes as configured"
                                          : "the default: set staging_bytes to choose",
                         (unsigned long long)ds->max_span);
    d->ntasks = (uint32_t)RF_MIN((uint64_t)d->ring->batch * d->ring->depth +
                                     c->io_queue_depth * RF_MAX(1u, c->io_threads) + 64,
                                 1u << 20);
    size_t tbytes = (size_t)d->ntasks * (sizeof *d->tasks + sizeof *d->decq);
    if (!pl_alloc_refused(d->core, "task ring", tbytes)) {
        d->tasks = calloc(d->ntasks, sizeof *d->tasks);
        d->decq = calloc(d->ntasks, sizeof *d->decq);
    }
    if (!d->tasks || !d->decq)
        return rf_seterr(err, RF_ENOMEM, "cannot allocate the %zu-byte task ring (%u tasks) "
                         "and its decode queue: out of memory", tbytes, d->ntasks);
    return 0;
}

void pl_dispatch_free(pl_dispatch *d)
{
    free(d->arena);
    free(d->tasks);
    free(d->decq);
}

void pl_dispatch_restart(pl_dispatch *d, uint64_t seq, uint64_t epoch, uint64_t base,
                         uint64_t epochs_done)
{
    pl_warm_restart(&d->warm);
    d->arena_head = d->arena_tail = 0;
    d->task_head = d->task_tail = 0;
    d->decq_head = d->decq_tail = 0;
    rf_plan_epoch(d->plan, epoch, base);
    d->epoch = epoch;
    d->k = 0;
    d->j = 0;
    d->seq = seq;
    d->done = 0;
    d->epochs_left = d->epochs ? d->epochs - epochs_done : 0;
    /* No other thread runs yet; mu is taken because the epoch calls are *_locked (asserted). */
    pl_lock(d->core);
    d->policy->epoch_locked(d);
    if (d->plan->batches == 0) /* a resume cursor at the very end of an epoch */
        pl_plan_next_epoch_locked(d);
    pl_unlock(d->core);
}

void pl_plan_next_epoch_locked(pl_dispatch *d)
{
    PL_ASSERT_LOCKED(d->core);
    if (d->epochs_left == 1) {
        d->done = 1;
        return;
    }
    if (d->epochs_left > 1)
        d->epochs_left--;
    d->epoch++;
    rf_plan_epoch(d->plan, d->epoch, 0);
    d->k = 0;
    d->policy->epoch_locked(d);
}

/* Claim the arena span for `len` bytes; returns the physical offset or UINT64_MAX when full. */
static uint64_t arena_alloc_locked(pl_dispatch *d, uint32_t len, uint64_t *end)
{
    uint64_t head = d->arena_head, phys = head % d->arena_bytes;
    if (phys + len > d->arena_bytes) { /* no wrap inside a span: skip the tail end */
        head += d->arena_bytes - phys;
        phys = 0;
    }
    if (head + len - d->arena_tail > d->arena_bytes) {
        d->room = 1; /* a finished task gives room back */
        return UINT64_MAX;
    }
    d->arena_head = head + len;
    assert(d->arena_head - d->arena_tail <= d->arena_bytes); /* live spans fit the arena */
    *end = head + len;
    return phys;
}

/* The real (non-padding) samples of the planned epoch on this rank: its candidates from its
 * first order position on, fewer when drop_last cuts the last batch. */
uint64_t pl_plan_real(const rf_plan *p)
{
    if (p->bk) /* size buckets: counted when the epoch was planned */
        return p->real;
    uint64_t first = p->base + p->rank;
    uint64_t real = first < p->n ? (p->n - first + p->world - 1) / p->world : 0;
    return RF_MIN(real, p->per_rank);
}

/* Where sample `id`, output `row` of slot s, is read from and into: tokens, its window of the
 * dispatcher's epoch straight into the slot's stage; images, the member's span in the arena.
 * Returns 0, or -1 when the arena is full (nothing claimed). */
int pl_sample_read_locked(pl_dispatch *d, const slot *s, uint32_t row, uint64_t id,
                              sample_read *r)
{
    PL_ASSERT_LOCKED(d->core);
    r->end = d->arena_head;
    r->skip = r->need = 0;
    if (d->ring->tokens) {
        pl_token_window(d->ds, d->plan, d->sequential, id, d->epoch, &r->file, &r->off);
        r->len = (uint32_t)d->ring->stage_bytes;
        r->dst = s->stage + (uint64_t)row * d->ring->stage_bytes;
        return 0;
    }
    const rf_sample *sm = &d->ds->samples[id];
    r->file = sm->file;
    r->off = sm->offset;
    r->len = sm->length;
    if (rf_pc_odirect(d->pc)) { /* read the aligned blocks around the span */
        r->need = r->len;
        rf_pc_direct_span(d->pc, r->off, r->need, &r->off, &r->len, &r->skip);
        r->need += r->skip;
    }
    uint64_t phys = arena_alloc_locked(d, r->len, &r->end);
    if (phys == UINT64_MAX)
        return -1;
    r->dst = d->arena + phys;
    return 0;
}

/* The task's read request for r (O_DIRECT spans through the file's direct descriptor). */
void pl_task_set_read(pl_dispatch *d, task *t, const sample_read *r)
{
    t->arena_end = r->end;
    t->phase = TASK_READING;
    t->file = r->file;
    t->req = (rf_io_req){.fd = d->ds->files[r->file].fd, .len = r->len, .offset = r->off,
                         .dst = r->dst, .user = t, .remote = d->ds->files[r->file].remote,
                         .file = r->file};
    t->skip = r->skip;
    /* the shard's local copy: the curl engine reads it, checked (the URL stays, for when the
     * copy is gone or does not match) */
    t->req.cached = t->req.remote && pl_cache_has(d->remote, r->file);
    if (r->need) {
        t->req.fd = rf_pc_direct_fd(d->pc, r->file);
        t->req.need = r->need;
    }
}

/* 1 when the task ring is full (a finished task makes room: room says the dispatcher waits
 * for it). */
int pl_tasks_full_locked(pl_dispatch *d)
{
    PL_ASSERT_LOCKED(d->core);
    assert(d->task_head - d->task_tail <= d->ntasks);
    if (d->task_head - d->task_tail < d->ntasks)
        return 0;
    d->room = 1;
    return 1;
}

/* The slot of forward output (d_k, d_j), counting the batch's outputs when it opens; NULL
 * while that slot is still in use or the task ring is full. */
slot *pl_dispatch_slot_locked(pl_dispatch *d)
{
    PL_ASSERT_LOCKED(d->core);
    assert(d->k < d->plan->batches); /* epoch_end_locked moved the cursor on or stopped */
    slot *s = &d->ring->slots[d->seq % d->ring->depth];
    if (d->j == 0) {
        if (s->state != SLOT_FREE)
            return NULL;
        d->count = rf_plan_batch_count(d->plan, d->k);
    }
    assert(d->j < d->count && d->count <= d->ring->batch);
    return pl_tasks_full_locked(d) ? NULL : s;
}

/* Claim slot s for the batch when its first output (d_j == 0) is dispatched. */
void pl_slot_open_locked(pl_dispatch *d, slot *s)
{
    PL_ASSERT_LOCKED(d->core);
    if (d->j == 0) {
        assert(s->state == SLOT_FREE); /* FREE -> FILLING */
        s->state = SLOT_FILLING;
        s->seq = d->seq;
        /* relaxed: mu orders it before the batch's tasks are handed out (slot.pending) */
        atomic_store_explicit(&s->pending, d->count, memory_order_relaxed);
        s->batch.count = d->count;
        s->batch.epoch = d->epoch;
        s->bad.code = 0;
        s->batch.index = rf_plan_batch_index(d->plan, d->k);
        /* size buckets: the decode threads fit each sample into the batch's bucket */
        uint32_t b = rf_plan_batch_bucket(d->plan, d->k);
        int bk = d->ring->buckets.n != 0;
        s->batch.bucket = b;
        s->batch.bucket_height = bk ? d->ring->buckets.height[b] : 0;
        s->batch.bucket_width = bk ? d->ring->buckets.width[b] : 0;
        s->skipped = 0;
        memset(s->skipped_by, 0, sizeof s->skipped_by);
        s->epoch_total = pl_plan_real(d->plan);
        d->policy->slot_open_locked(d, (uint32_t)(d->seq % d->ring->depth));
        pl_gpu_slot_reset_locked(d->gpu, s, d->count);
    }
}

/* Move the forward cursors past output (d_k, d_j). */
void pl_dispatch_advance_locked(pl_dispatch *d)
{
    PL_ASSERT_LOCKED(d->core);
    assert(d->j < d->count);
    if (++d->j == d->count) {
        d->j = 0;
        d->seq++;
        if (++d->k == d->plan->batches)
            d->policy->epoch_end_locked(d); /* fail mode: the next epoch at once */
    }
}

/* Prepare the next task of the plan; returns NULL when blocked on a resource or done. */
static task *dispatch_one_locked(pl_dispatch *d)
{
    d->room = 0; /* the places that find room missing set it */
    if (d->done || d->core->err.code)
        return NULL;
    task *skt;
    if (d->policy->dispatch_locked(d, &skt))
        return skt;
    slot *s = pl_dispatch_slot_locked(d);
    if (!s)
        return NULL;
    uint64_t id, pos;
    uint8_t pad;
    uint64_t j = rf_plan_first(d->plan, d->k) + d->j; /* the rank's sample of the epoch */
    rf_plan_sample(d->plan, j, &id, &pos, &pad);
    sample_read r;
    if (pl_sample_read_locked(d, s, d->j, id, &r))
        return NULL;
    pl_warm_taken_locked(&d->warm, d->epoch, j, r.need ? r.need - r.skip : r.len);
    pl_slot_open_locked(d, s);
    uint32_t i = d->j;
    s->ids[i] = id;
    s->positions[i] = pos;
    s->padding[i] = pad;
    s->keys[i] = d->ring->tokens ? d->ds->files[r.file].path : d->ds->keys + d->ds->samples[id].key;
    assert(d->task_head - d->task_tail < d->ntasks); /* pl_dispatch_slot_locked checked */
    task *t = &d->tasks[d->task_head % d->ntasks];
    t->seq = d->task_head++;
    t->sample_id = id;
    t->aug_seed = rf_plan_aug_seed(d->plan, d->epoch, id, pos);
    t->slot = (uint32_t)(d->seq % d->ring->depth);
    t->index = i;
    t->raw = d->ring->tokens;
    t->rep = t->blank = t->why = 0;
    t->padout = pad;
    atomic_store_explicit(&t->finished, 0, memory_order_relaxed); /* under mu */
    pl_task_set_read(d, t, &r);
    pl_dispatch_advance_locked(d);
    return t;
}

/* Files kept closed (fd -1: folder datasets with more images than descriptors to spare) are
 * opened for each read outside the lock and closed when the read completes. A failed open is
 * left to fail the read (-EBADF) and reported with its own errno by pl_io_done. */
static void open_per_read(pl_dispatch *d, rf_io_req **reqs, int n)
{
    for (int i = 0; i < n; i++) {
        task *t = reqs[i]->user;
        t->own_fd = -1;
        t->open_errno = 0;
        if (reqs[i]->fd >= 0 || reqs[i]->remote)
            continue;
        t->own_fd = open(d->ds->files[t->file].path, O_RDONLY | O_CLOEXEC);
        if (t->own_fd < 0)
            t->open_errno = errno;
        reqs[i]->fd = t->own_fd;
    }
}

int pl_io_take(void *ctx, rf_io_req **reqs, int max, int block)
{
    pl_dispatch *d = ctx;
    warm_hint hints[WARM_HINTS_MAX];
    int nh = 0;
    pl_lock(d->core);
    int n = 0;
    for (;;) {
        /* A sticky error is fatal to the loader: the engine stops taking (it cancels and reaps
         * what is in flight and its threads exit) instead of sleeping here until destroy. */
        if (d->core->stop || d->core->err.code) {
            n = -1;
            break;
        }
        task *t;
        while (n < max && (t = dispatch_one_locked(d)))
            reqs[n++] = &t->req;
        if (n > 0 || !block)
            break;
        pl_wait(d->core, &d->core->cv_io);
    }
    /* Taken as much as asked: there may be more, for another I/O thread that waits (a release
     * wakes only one: rf_loader_release). Woken for nothing, it waits again. */
    if (n > 0 && n == max)
        pthread_cond_signal(&d->core->cv_io);
    if (n > 0)
        nh = pl_warm_plan_locked(&d->warm, d->epoch, rf_plan_first(d->plan, d->k) + d->j,
                                 d->done, hints);
    pl_unlock(d->core);
    if (n > 0) {
        open_per_read(d, reqs, n);
        pl_after_take(&d->warm, reqs, n, hints, nh);
    }
    return n;
}

/* Free a finished task's arena span; the tail advances over finished tasks in dispatch order
 * so the arena is a simple FIFO even though decodes finish out of order. */
static void task_finish_locked(pl_dispatch *d, task *t)
{
    PL_ASSERT_LOCKED(d->core);
    atomic_store_explicit(&t->finished, 1, memory_order_relaxed); /* under mu, as the load */
    int moved = 0;
    while (d->task_tail < d->task_head) {
        task *o = &d->tasks[d->task_tail % d->ntasks];
        if (!atomic_load_explicit(&o->finished, memory_order_relaxed))
            break;
        /* spans were claimed in dispatch order: the tail only moves forward, never past head */
        assert(d->arena_tail <= o->arena_end && o->arena_end <= d->arena_head);
        d->arena_tail = o->arena_end;
        d->task_tail++;
        moved = 1;
    }
    /* the task ring and the arena have room again: a dispatcher that waits for it goes on
     * (one that waits for a slot or for outcomes does not, room) */
    if (moved && d->room)
        pthread_cond_broadcast(&d->core->cv_io);
}

/* One sample of slot s is finished: read (raw), decoded, or failed in fail mode. The last of
 * the batch finishes the slot. Called without the mutex. */
static void sample_done(pl_dispatch *d, slot *s)
{
    /* acq_rel (slot.pending): release this sample's row, label and slot.bad; the last one
     * acquires every other sample's before the batch is submitted. */
    uint32_t left = atomic_fetch_sub_explicit(&s->pending, 1, memory_order_acq_rel);
    assert(left >= 1); /* a slot counts each of its samples down once */
    if (left == 1)
        pl_slot_finish(d->submit, s);
}

void pl_io_done(void *ctx, rf_io_req *req)
{
    pl_dispatch *d = ctx;
    task *t = req->user;
    if (t->own_fd >= 0) {
        close(t->own_fd);
        t->own_fd = -1;
    }
    if (t->open_errno)
        req->result = -t->open_errno;
    slot *s = &d->ring->slots[t->slot];
    int done = 0;
    const uint8_t *widen_src = NULL; /* raw tokens the host backend widens into widen_dst */
    uint8_t *widen_dst = NULL;
    pl_lock(d->core);
    /* after a fatal error: reaped only */
    if (req->result != 0 && !d->core->stop && !d->core->err.code) {
        char where[RF_ERRMSG_MAX / 2], msg[RF_ERRMSG_MAX];
        pl_describe_task(d->ds, d->ring->tokens, t, where, sizeof where);
        const rf_file *f = &d->ds->files[t->file];
        struct stat fst;
        char now[96] = "";
        if (f->fd >= 0 && fstat(f->fd, &fst) == 0 && (uint64_t)fst.st_size != f->size)
            snprintf(now, sizeof now, " (the file changed during the epoch: %llu bytes now, %llu "
                     "at create)", (unsigned long long)fst.st_size, (unsigned long long)f->size);
        if (req->result == -ENODATA)
            snprintf(msg, sizeof msg, "%s: file ended after %u of %u bytes (truncated?)%s", where,
                     req->done, req->len, now);
        else if (req->why) /* the engine's words: a remote shard's URL, range and status */
            snprintf(msg, sizeof msg, "%s: read failed: %s", where, req->why);
        else
            snprintf(msg, sizeof msg, "%s: read failed: %s%s", where, rf_strerror(req->result),
                     now);
        int code = req->result == -ENODATA ? RF_EFORMAT : RF_EIO;
        /* fail mode: failed, but finished: the batch completes once the rest are in */
        done = d->policy->failed_locked(
            d, t, req->result == -ENODATA ? RF_SKIP_TRUNCATED : RF_SKIP_IO, code, msg);
    }
    if (req->result != 0 || d->core->stop) {
        task_finish_locked(d, t);
    } else if (t->raw && !t->blank) {
        /* Raw path: the bytes already sit in the slot; only the host backend converts here. */
        s->labels[t->index] = -1;
        d->policy->ok_locked(d, t);
        if (d->ring->host_convert) /* read now: once finished, the task may be reused */
            widen_src = t->req.dst, widen_dst = s->out + (uint64_t)t->index * d->ring->out_bytes;
        task_finish_locked(d, t);
        done = 1;
    } else {
        t->phase = TASK_QUEUED;
        /* queued tasks are live tasks not yet queued before: fewer than ntasks */
        assert(d->decq_head - d->decq_tail < d->ntasks);
        d->decq[d->decq_head++ % d->ntasks] = (uint32_t)(t->seq % d->ntasks);
        pthread_cond_signal(&d->core->cv_dec);
    }
    pl_unlock(d->core);
    if (widen_src)
        rf_widen_tokens_cpu(widen_src, widen_dst, d->ring->seq_len + 1, d->ring->token_bytes,
                            d->ring->out_dtype);
    if (done)
        sample_done(d, s);
}

task *pl_task_next_decode(pl_dispatch *d, int *failed, int *moot)
{
    pl_core *k = d->core;
    pl_lock(k);
    while (!k->stop && d->decq_tail == d->decq_head)
        pl_wait(k, &k->cv_dec);
    if (k->stop) {
        pl_unlock(k);
        return NULL;
    }
    task *t = &d->tasks[d->decq[d->decq_tail++ % d->ntasks]];
    t->phase = TASK_DECODING;
    const slot *s = &d->ring->slots[t->slot];
    *failed = k->err.code != 0;
    /* A sample after the slot's first bad one: the batch is never delivered. */
    *moot = s->bad.code && t->index > s->bad_index;
    pl_unlock(k);
    return t;
}

/* A decode thread is through with task t: `failed`, the loader had failed before it started
 * (the task is only freed); otherwise rc 0, or its error e, whose t->why SKIP_FATAL is fatal
 * to the loader and any other reason goes to the error policy. A sample that counts (decoded,
 * or fail mode's data error) counts its slot down. */
void pl_task_end(pl_dispatch *d, task *t, int failed, int rc, const rf_err *e)
{
    slot *s = &d->ring->slots[t->slot];
    int done = 0;
    pl_lock(d->core);
    if (rc) {
        char where[RF_ERRMSG_MAX / 2], msg[RF_ERRMSG_MAX];
        snprintf(where, sizeof where, "%s", d->ds->files[t->file].path);
        snprintf(msg, sizeof msg, "%s: %s", where, e->msg);
        if (t->why == SKIP_FATAL)
            pl_fail_locked(d->core, rc, msg); /* not the sample's fault: stop now */
        else
            done = d->policy->failed_locked(d, t, t->why, rc, msg);
    } else if (!failed) {
        d->policy->ok_locked(d, t);
        done = 1;
    }
    task_finish_locked(d, t);
    pl_unlock(d->core);
    if (done)
        sample_done(d, s);
}

/* ---- the fail policy (on_error = FAIL) --------------------------------------------------------
 * Each batch keeps its lowest failed index (pl_slot_bad_locked) and still completes; the
 * consumer raises it on reaching that batch. No replacements; the next epoch is planned as
 * soon as the cursor passes the last batch. */

static int fail_setup(pl_dispatch *d, rf_err *err)
{
    (void)d, (void)err;
    return 0;
}

static void fail_nothing_locked(pl_dispatch *d) { (void)d; }

static int fail_dispatch_locked(pl_dispatch *d, task **out)
{
    (void)d, (void)out;
    return 0; /* the cursor dispatches every output itself */
}

static void fail_slot_open_locked(pl_dispatch *d, uint32_t si) { (void)d, (void)si; }

static void fail_ok_locked(pl_dispatch *d, const task *t) { (void)d, (void)t; }

static int fail_failed_locked(pl_dispatch *d, const task *t, int reason, int code,
                              const char *msg)
{
    PL_ASSERT_LOCKED(d->core);
    (void)reason;
    pl_slot_bad_locked(&d->ring->slots[t->slot], t->index, code, msg);
    return 1;
}

const pl_policy pl_policy_fail = {
    .setup = fail_setup,
    .epoch_locked = fail_nothing_locked,
    .epoch_end_locked = pl_plan_next_epoch_locked,
    .dispatch_locked = fail_dispatch_locked,
    .slot_open_locked = fail_slot_open_locked,
    .ok_locked = fail_ok_locked,
    .failed_locked = fail_failed_locked,
    .late_locked = NULL, /* pl_gpu_check raises a late verdict itself in fail mode */
};
