/* dispatch.c — the forward cursor and the I/O engine's two callbacks: take() walks the plan,
 * claiming slots, tasks and arena spans and emitting reads; done() queues a read for decode
 * (or, for token windows, counts it in); pl_task_end is where a decode thread hands back a
 * sample; and the fail policy, the default table the cursor calls for outcomes.
 *
 * DESIGN
 * take() and done() run on the I/O threads, pl_task_end on the decode threads; all three do
 * their bookkeeping under mu and their system calls (open, close of per-read descriptors,
 * page-cache checks) outside it. The cursor touches the d_* cursor, the arena, the task ring,
 * the decode queue and the opening of slots; it learns what to do with outcomes, epoch ends
 * and its own outputs only through ld->policy (the skip policy lives in skip.c and is never
 * named here). A slot's last sample publishes it through submit.c. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pipeline/pipeline.h"

void pl_plan_next_epoch_locked(rf_loader *ld)
{
    PL_ASSERT_LOCKED(ld);
    if (ld->d_epochs_left == 1) {
        ld->d_done = 1;
        return;
    }
    if (ld->d_epochs_left > 1)
        ld->d_epochs_left--;
    ld->d_epoch++;
    rf_plan_epoch(&ld->plan, ld->d_epoch, 0);
    ld->d_k = 0;
    ld->policy->epoch_locked(ld);
}

/* Claim the arena span for `len` bytes; returns the physical offset or UINT64_MAX when full. */
static uint64_t arena_alloc_locked(rf_loader *ld, uint32_t len, uint64_t *end)
{
    uint64_t head = ld->arena_head, phys = head % ld->arena_bytes;
    if (phys + len > ld->arena_bytes) { /* no wrap inside a span: skip the tail end */
        head += ld->arena_bytes - phys;
        phys = 0;
    }
    if (head + len - ld->arena_tail > ld->arena_bytes) {
        ld->d_room = 1; /* a finished task gives room back */
        return UINT64_MAX;
    }
    ld->arena_head = head + len;
    assert(ld->arena_head - ld->arena_tail <= ld->arena_bytes); /* live spans fit the arena */
    *end = head + len;
    return phys;
}

/* The real (non-padding) samples of the planned epoch on this rank: its candidates from its
 * first order position on, fewer when drop_last cuts the last batch. */
uint64_t pl_plan_real(const rf_plan *p)
{
    uint64_t first = p->base + p->rank;
    uint64_t real = first < p->n ? (p->n - first + p->world - 1) / p->world : 0;
    return RF_MIN(real, p->per_rank);
}

/* Where sample `id`, output `row` of slot s, is read from and into: tokens, its window of the
 * dispatcher's epoch straight into the slot's stage; images, the member's span in the arena.
 * Returns 0, or -1 when the arena is full (nothing claimed). */
int pl_sample_read_locked(rf_loader *ld, const slot *s, uint32_t row, uint64_t id,
                              sample_read *r)
{
    PL_ASSERT_LOCKED(ld);
    r->end = ld->arena_head;
    r->skip = r->need = 0;
    if (ld->tokens) {
        pl_token_window(ld, id, ld->d_epoch, &r->file, &r->off);
        r->len = (uint32_t)ld->stage_bytes;
        r->dst = s->stage + (uint64_t)row * ld->stage_bytes;
        return 0;
    }
    const rf_sample *sm = &ld->ds.samples[id];
    r->file = sm->file;
    r->off = sm->offset;
    r->len = sm->length;
    if (rf_pc_odirect(ld->pc)) { /* read the aligned blocks around the span */
        r->need = r->len;
        rf_pc_direct_span(ld->pc, r->off, r->need, &r->off, &r->len, &r->skip);
        r->need += r->skip;
    }
    uint64_t phys = arena_alloc_locked(ld, r->len, &r->end);
    if (phys == UINT64_MAX)
        return -1;
    r->dst = ld->arena + phys;
    return 0;
}

/* The task's read request for r (O_DIRECT spans through the file's direct descriptor). */
void pl_task_set_read(rf_loader *ld, task *t, const sample_read *r)
{
    t->arena_end = r->end;
    t->phase = TASK_READING;
    t->file = r->file;
    t->req = (rf_io_req){.fd = ld->ds.files[r->file].fd, .len = r->len, .offset = r->off,
                         .dst = r->dst, .user = t, .remote = ld->ds.files[r->file].remote,
                         .file = r->file};
    t->skip = r->skip;
    /* the shard's local copy: the curl engine reads it, checked (the URL stays, for when the
     * copy is gone or does not match) */
    t->req.cached = t->req.remote && pl_cache_has(ld, r->file);
    if (r->need) {
        t->req.fd = rf_pc_direct_fd(ld->pc, r->file);
        t->req.need = r->need;
    }
}

/* 1 when the task ring is full (a finished task makes room: d_room says the dispatcher waits
 * for it). */
int pl_tasks_full_locked(rf_loader *ld)
{
    PL_ASSERT_LOCKED(ld);
    assert(ld->task_head - ld->task_tail <= ld->ntasks);
    if (ld->task_head - ld->task_tail < ld->ntasks)
        return 0;
    ld->d_room = 1;
    return 1;
}

/* The slot of forward output (d_k, d_j), counting the batch's outputs when it opens; NULL
 * while that slot is still in use or the task ring is full. */
slot *pl_dispatch_slot_locked(rf_loader *ld)
{
    PL_ASSERT_LOCKED(ld);
    assert(ld->d_k < ld->plan.batches); /* epoch_end_locked moved the cursor on or stopped */
    slot *s = &ld->slots[ld->d_seq % ld->depth];
    if (ld->d_j == 0) {
        if (s->state != SLOT_FREE)
            return NULL;
        ld->d_count = rf_plan_batch_count(&ld->plan, ld->d_k);
    }
    assert(ld->d_j < ld->d_count && ld->d_count <= ld->batch);
    return pl_tasks_full_locked(ld) ? NULL : s;
}

/* Claim slot s for the batch when its first output (d_j == 0) is dispatched. */
void pl_slot_open_locked(rf_loader *ld, slot *s)
{
    PL_ASSERT_LOCKED(ld);
    if (ld->d_j == 0) {
        assert(s->state == SLOT_FREE); /* FREE -> FILLING */
        s->state = SLOT_FILLING;
        s->seq = ld->d_seq;
        /* relaxed: mu orders it before the batch's tasks are handed out (slot.pending) */
        atomic_store_explicit(&s->pending, ld->d_count, memory_order_relaxed);
        s->batch.count = ld->d_count;
        s->batch.epoch = ld->d_epoch;
        s->bad.code = 0;
        s->batch.index = ld->d_k;
        s->skipped = 0;
        memset(s->skipped_by, 0, sizeof s->skipped_by);
        s->epoch_total = pl_plan_real(&ld->plan);
        ld->policy->slot_open_locked(ld, (uint32_t)(ld->d_seq % ld->depth));
        pl_gpu_slot_reset_locked(ld, s);
    }
}

/* Move the forward cursors past output (d_k, d_j). */
void pl_dispatch_advance_locked(rf_loader *ld)
{
    PL_ASSERT_LOCKED(ld);
    assert(ld->d_j < ld->d_count);
    if (++ld->d_j == ld->d_count) {
        ld->d_j = 0;
        ld->d_seq++;
        if (++ld->d_k == ld->plan.batches)
            ld->policy->epoch_end_locked(ld); /* fail mode: the next epoch at once */
    }
}

/* Prepare the next task of the plan; returns NULL when blocked on a resource or done. */
static task *dispatch_one_locked(rf_loader *ld)
{
    ld->d_room = 0; /* the places that find room missing set it */
    if (ld->d_done || ld->err.code)
        return NULL;
    task *skt;
    if (ld->policy->dispatch_locked(ld, &skt))
        return skt;
    slot *s = pl_dispatch_slot_locked(ld);
    if (!s)
        return NULL;
    uint64_t id, pos;
    uint8_t pad;
    rf_plan_sample(&ld->plan, ld->d_k * ld->batch + ld->d_j, &id, &pos, &pad);
    sample_read r;
    if (pl_sample_read_locked(ld, s, ld->d_j, id, &r))
        return NULL;
    if (ld->warm_on && ld->warm_epoch == ld->d_epoch &&
        ld->d_k * ld->batch + ld->d_j < ld->warm_pos) /* a warmed sample leaves the window */
        ld->warm_ahead -= RF_MIN(ld->warm_ahead, r.need ? r.need - r.skip : r.len);
    pl_slot_open_locked(ld, s);
    uint32_t i = ld->d_j;
    s->ids[i] = id;
    s->positions[i] = pos;
    s->padding[i] = pad;
    s->keys[i] = ld->tokens ? ld->ds.files[r.file].path : ld->ds.keys + ld->ds.samples[id].key;
    assert(ld->task_head - ld->task_tail < ld->ntasks); /* pl_dispatch_slot_locked checked */
    task *t = &ld->tasks[ld->task_head % ld->ntasks];
    t->seq = ld->task_head++;
    t->sample_id = id;
    t->aug_seed = rf_plan_aug_seed(&ld->plan, ld->d_epoch, id, pos);
    t->slot = (uint32_t)(ld->d_seq % ld->depth);
    t->index = i;
    t->raw = ld->tokens;
    t->rep = t->blank = t->why = 0;
    t->padout = pad;
    atomic_store_explicit(&t->finished, 0, memory_order_relaxed); /* under mu */
    pl_task_set_read(ld, t, &r);
    pl_dispatch_advance_locked(ld);
    return t;
}

/* Files kept closed (fd -1: folder datasets with more images than descriptors to spare) are
 * opened for each read outside the lock and closed when the read completes. A failed open is
 * left to fail the read (-EBADF) and reported with its own errno by pl_io_done. */
static void open_per_read(rf_loader *ld, rf_io_req **reqs, int n)
{
    for (int i = 0; i < n; i++) {
        task *t = reqs[i]->user;
        t->own_fd = -1;
        t->open_errno = 0;
        if (reqs[i]->fd >= 0 || reqs[i]->remote)
            continue;
        t->own_fd = open(ld->ds.files[t->file].path, O_RDONLY | O_CLOEXEC);
        if (t->own_fd < 0)
            t->open_errno = errno;
        reqs[i]->fd = t->own_fd;
    }
}

int pl_io_take(void *ctx, rf_io_req **reqs, int max, int block)
{
    rf_loader *ld = ctx;
    warm_hint hints[WARM_HINTS_MAX];
    int nh = 0;
    pl_lock(ld);
    int n = 0;
    for (;;) {
        /* A sticky error is fatal to the loader: the engine stops taking (it cancels and reaps
         * what is in flight and its threads exit) instead of sleeping here until destroy. */
        if (ld->stop || ld->err.code) {
            n = -1;
            break;
        }
        task *t;
        while (n < max && (t = dispatch_one_locked(ld)))
            reqs[n++] = &t->req;
        if (n > 0 || !block)
            break;
        pl_wait(ld, &ld->cv_io);
    }
    /* Taken as much as asked: there may be more, for another I/O thread that waits (a release
     * wakes only one: rf_loader_release). Woken for nothing, it waits again. */
    if (n > 0 && n == max)
        pthread_cond_signal(&ld->cv_io);
    if (n > 0)
        nh = pl_warm_plan_locked(ld, hints);
    pl_unlock(ld);
    if (n > 0) {
        open_per_read(ld, reqs, n);
        pl_after_take(ld, reqs, n, hints, nh);
    }
    return n;
}

/* Free a finished task's arena span; the tail advances over finished tasks in dispatch order
 * so the arena is a simple FIFO even though decodes finish out of order. */
static void task_finish_locked(rf_loader *ld, task *t)
{
    PL_ASSERT_LOCKED(ld);
    atomic_store_explicit(&t->finished, 1, memory_order_relaxed); /* under mu, as the load */
    int moved = 0;
    while (ld->task_tail < ld->task_head) {
        task *o = &ld->tasks[ld->task_tail % ld->ntasks];
        if (!atomic_load_explicit(&o->finished, memory_order_relaxed))
            break;
        /* spans were claimed in dispatch order: the tail only moves forward, never past head */
        assert(ld->arena_tail <= o->arena_end && o->arena_end <= ld->arena_head);
        ld->arena_tail = o->arena_end;
        ld->task_tail++;
        moved = 1;
    }
    /* the task ring and the arena have room again: a dispatcher that waits for it goes on
     * (one that waits for a slot or for outcomes does not, d_room) */
    if (moved && ld->d_room)
        pthread_cond_broadcast(&ld->cv_io);
}

/* One sample of slot s is finished: read (raw), decoded, or failed in fail mode. The last of
 * the batch finishes the slot. Called without the mutex. */
static void sample_done(rf_loader *ld, slot *s)
{
    /* acq_rel (slot.pending): release this sample's row, label and slot.bad; the last one
     * acquires every other sample's before the batch is submitted. */
    uint32_t left = atomic_fetch_sub_explicit(&s->pending, 1, memory_order_acq_rel);
    assert(left >= 1); /* a slot counts each of its samples down once */
    if (left == 1)
        pl_slot_finish(ld, s);
}

void pl_io_done(void *ctx, rf_io_req *req)
{
    rf_loader *ld = ctx;
    task *t = req->user;
    if (t->own_fd >= 0) {
        close(t->own_fd);
        t->own_fd = -1;
    }
    if (t->open_errno)
        req->result = -t->open_errno;
    slot *s = &ld->slots[t->slot];
    int done = 0;
    const uint8_t *widen_src = NULL; /* raw tokens the host backend widens into widen_dst */
    uint8_t *widen_dst = NULL;
    pl_lock(ld);
    if (req->result != 0 && !ld->stop && !ld->err.code) { /* after a fatal error: reaped only */
        char where[RF_ERRMSG_MAX / 2], msg[RF_ERRMSG_MAX];
        pl_describe_task(ld, t, where, sizeof where);
        const rf_file *f = &ld->ds.files[t->file];
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
        done = ld->policy->failed_locked(
            ld, t, req->result == -ENODATA ? RF_SKIP_TRUNCATED : RF_SKIP_IO, code, msg);
    }
    if (req->result != 0 || ld->stop) {
        task_finish_locked(ld, t);
    } else if (t->raw && !t->blank) {
        /* Raw path: the bytes already sit in the slot; only the host backend converts here. */
        s->labels[t->index] = -1;
        ld->policy->ok_locked(ld, t);
        if (ld->host_convert) /* read now: once finished, the task may be reused */
            widen_src = t->req.dst, widen_dst = s->out + (uint64_t)t->index * ld->out_bytes;
        task_finish_locked(ld, t);
        done = 1;
    } else {
        t->phase = TASK_QUEUED;
        /* queued tasks are live tasks not yet queued before: fewer than ntasks */
        assert(ld->decq_head - ld->decq_tail < ld->ntasks);
        ld->decq[ld->decq_head++ % ld->ntasks] = (uint32_t)(t->seq % ld->ntasks);
        pthread_cond_signal(&ld->cv_dec);
    }
    pl_unlock(ld);
    if (widen_src)
        rf_widen_tokens_cpu(widen_src, widen_dst, ld->cfg.seq_len + 1, ld->cfg.token_bytes,
                            ld->out_dtype);
    if (done)
        sample_done(ld, s);
}

/* A decode thread is through with task t: `failed`, the loader had failed before it started
 * (the sample only frees its task); otherwise rc 0, the sample is in, or its error e (t->why
 * says whose fault: SKIP_FATAL is fatal to the loader, any other reason is the sample's and
 * goes to the error policy). The task is freed, and a sample that counts (decoded, and fail
 * mode's data errors) counts its slot down; the last one publishes the slot. */
void pl_task_end(rf_loader *ld, task *t, int failed, int rc, const rf_err *e)
{
    slot *s = &ld->slots[t->slot];
    int done = 0;
    pl_lock(ld);
    if (rc) {
        char where[RF_ERRMSG_MAX / 2], msg[RF_ERRMSG_MAX];
        snprintf(where, sizeof where, "%s", ld->ds.files[t->file].path);
        snprintf(msg, sizeof msg, "%s: %s", where, e->msg);
        if (t->why == SKIP_FATAL)
            pl_fail_locked(ld, rc, msg); /* not the sample's fault: stop now */
        else
            done = ld->policy->failed_locked(ld, t, t->why, rc, msg);
    } else if (!failed) {
        ld->policy->ok_locked(ld, t);
        done = 1;
    }
    task_finish_locked(ld, t);
    pl_unlock(ld);
    if (done)
        sample_done(ld, s);
}

/* ---- the fail policy (on_error = FAIL) --------------------------------------------------------
 * The first failed sample is a sticky error naming shard, member, offset and cause: each batch
 * keeps its lowest failed index (pl_slot_bad_locked), the batch still completes, and the
 * consumer raises the error when it reaches that batch, so every batch before it is delivered.
 * Nothing to allocate, no replacements, and the next epoch is planned as soon as the cursor
 * passes the last batch. */

static int fail_setup(rf_loader *ld, rf_err *err)
{
    (void)ld, (void)err;
    return 0;
}

static void fail_nothing_locked(rf_loader *ld) { (void)ld; }

static int fail_dispatch_locked(rf_loader *ld, task **out)
{
    (void)ld, (void)out;
    return 0; /* the cursor dispatches every output itself */
}

static void fail_slot_open_locked(rf_loader *ld, uint32_t si) { (void)ld, (void)si; }

static void fail_ok_locked(rf_loader *ld, const task *t) { (void)ld, (void)t; }

static int fail_failed_locked(rf_loader *ld, const task *t, int reason, int code,
                              const char *msg)
{
    PL_ASSERT_LOCKED(ld);
    (void)reason;
    pl_slot_bad_locked(&ld->slots[t->slot], t->index, code, msg);
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
