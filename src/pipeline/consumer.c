/* consumer.c — the consumer's calls: rf_loader_next (wait for the next batch, lease it, raise
 * a failed batch's error in batch order), rf_loader_release, rf_batch_wait/synchronize,
 * set_epoch, stop, cancel, and the resume state.
 *
 * DESIGN
 * Runs on the consumer's thread (one at a time, as the API says). It waits on cv_out under mu
 * for its batch, and owns the consumer cursor (c_*, ep, stopped) without mu. rf_loader_cancel
 * is the exception: any thread may call it, during any call, and it only sets `cancelled`
 * under mu and wakes cv_out, so a consumer waiting there returns RF_ECLOSED. Backend calls
 * (release, the GPU decode check) run without mu; set_epoch restarts the threads through
 * run.c. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "pipeline/pipeline.h"

static void fill_batch(rf_loader *ld, slot *s)
{
    rf_batch *b = &s->batch;
    int cuda = ld->bops->device_kind == RF_DEVICE_CUDA;
    uint32_t H = ld->cfg.image_height, W = ld->cfg.image_width;
    b->struct_size = sizeof *b;
    b->data = cuda ? s->dev.data : ld->gpu.emulate ? pl_gpu_emulated(s) : ld->host_convert ? s->out
                                                                            : s->stage;
    b->data_bytes = (uint64_t)b->count * ld->out_bytes;
    if (ld->tokens) {
        b->shape[0] = b->count, b->shape[1] = ld->cfg.seq_len + 1, b->shape[2] = 1,
        b->shape[3] = 1;
    } else if (ld->cfg.layout == RF_LAYOUT_NHWC) {
        b->shape[0] = b->count, b->shape[1] = H, b->shape[2] = W, b->shape[3] = 3;
    } else {
        b->shape[0] = b->count, b->shape[1] = 3, b->shape[2] = H, b->shape[3] = W;
    }
    b->dtype = ld->out_dtype;
    b->layout = ld->cfg.layout;
    b->device_kind = ld->bops->device_kind;
    b->device_index = cuda ? ld->cfg.device_index : -1;
    b->labels = s->labels;
    b->labels_device = cuda ? s->dev.labels : NULL;
    b->keys = s->keys;
    b->sample_ids = s->ids;
    b->positions = s->positions;
    b->is_padding = s->padding;
    b->event = s->dev.event;
    b->ndim = ld->tokens ? 2 : 4;
    pl_fields_batch(ld, s, b);
}

/* The consumer is handed slot s's batch: it joins the counts of its epoch (a batch of another
 * epoch than the counted one starts them afresh). */
static void count_epoch(rf_loader *ld, const slot *s)
{
    epoch_counts *ep = &ld->ep;
    if (s->batch.epoch != ep->epoch)
        *ep = (epoch_counts){.epoch = s->batch.epoch};
    ep->total = s->epoch_total;
    for (uint32_t i = 0; i < s->batch.count; i++)
        ep->delivered += !s->padding[i];
    ep->skipped += s->skipped;
    for (int r = 0; r < RF_SKIP_REASONS; r++)
        ep->skipped_by[r] += s->skipped_by[r];
}

/* The consumer's next batch is in slot s, delivered or failed (mu held). */
static int batch_due(const rf_loader *ld, const slot *s)
{
    PL_ASSERT_LOCKED(ld);
    return (s->state == SLOT_READY || s->state == SLOT_BAD) && s->seq == ld->c_seq;
}

/* rf_loader_next gave up after next_timeout_ms (mu held): where the awaited batch is, what the
 * pipeline holds, and the oldest sample not through it yet, by file and offset. A read stuck
 * in the kernel (a hung network file system), a decode stuck in a library and a device submit
 * that never returns each read differently here. */
static void describe_stall(const rf_loader *ld, const slot *s, char *buf, size_t n)
{
    PL_ASSERT_LOCKED(ld);
    uint32_t in[3] = {0};
    const task *oldest = NULL;
    for (uint64_t q = ld->task_tail; q < ld->task_head; q++) {
        const task *t = &ld->tasks[q % ld->ntasks];
        if (atomic_load_explicit(&t->finished, memory_order_relaxed)) /* under mu */
            continue;
        in[t->phase]++;
        if (!oldest)
            oldest = t;
    }
    static const char *const phase[] = {"reading", "waiting for a decode thread", "decoding"};
    char batch[96], where[RF_ERRMSG_MAX / 2] = "none";
    /* relaxed: a snapshot for the message; the decrements run outside mu */
    uint32_t pending = atomic_load_explicit(&s->pending, memory_order_relaxed);
    if (s->seq != ld->c_seq || s->state == SLOT_FREE)
        snprintf(batch, sizeof batch, "not started (its slot is not open yet)");
    else if (pending)
        snprintf(batch, sizeof batch, "%u of its %u samples still to come", pending,
                 s->batch.count);
    else
        snprintf(batch, sizeof batch, "all %u samples in, being submitted to the %s backend",
                 s->batch.count, ld->bops->name);
    if (oldest) {
        pl_describe_task(ld, oldest, where, sizeof where);
        size_t k = strlen(where);
        snprintf(where + k, sizeof where - k, " (%s)", phase[oldest->phase]);
    }
    snprintf(buf, n, "no batch in %u ms (next_timeout_ms; nothing is lost: call again to keep "
             "waiting). Batch %llu of epoch %llu: %s. In the pipeline: %u reads in flight, %u "
             "samples waiting for a decode thread, %u being decoded. Oldest unfinished sample: "
             "%s", ld->cfg.next_timeout_ms, (unsigned long long)ld->c_k,
             (unsigned long long)ld->c_epoch, batch, in[TASK_READING], in[TASK_QUEUED],
             in[TASK_DECODING], where);
}

/* Wait for the consumer's batch in slot s and lease it: 0, the sticky error (a BAD slot
 * becomes it), RF_ESTATE when the slot is still leased, or RF_ETIMEDOUT after
 * next_timeout_ms (deadline), which is not sticky. */
static int lease_due(rf_loader *ld, slot *s, const struct timespec *deadline)
{
    pl_lock(ld);
    if (s->state == SLOT_LEASED) {
        /* The slot this batch needs is still held by the consumer: waiting would never end. */
        pl_unlock(ld);
        return pl_set_last(ld, &(rf_err){.code = RF_ESTATE,
                                      .msg = "every prefetch slot is leased: release a batch "
                                             "before asking for the next one"});
    }
    /* The dispatcher is at most a ring ahead: slot d_seq % depth opens only once batch
     * d_seq - depth was released, i.e. consumed (c_* is ours; d_seq is read under mu). */
    assert(ld->c_seq <= ld->d_seq && ld->d_seq - ld->c_seq <= ld->depth);
    int expired = 0;
    while (!ld->err.code && !ld->cancelled && !batch_due(ld, s) && !expired) {
        if (ld->cfg.next_timeout_ms)
            expired = pl_timedwait(ld, &ld->cv_out, deadline) == ETIMEDOUT;
        else
            pl_wait(ld, &ld->cv_out);
    }
    if (ld->cancelled) {
        pl_unlock(ld);
        return pl_cancelled_error(ld);
    }
    if (expired && !ld->err.code && !batch_due(ld, s)) {
        /* not sticky: the pipeline goes on, and the next call waits again */
        ld->last.code = RF_ETIMEDOUT;
        describe_stall(ld, s, ld->last.msg, sizeof ld->last.msg);
        pl_unlock(ld);
        return RF_ETIMEDOUT;
    }
    if (!ld->err.code && s->state == SLOT_BAD)
        pl_fail_locked(ld, s->bad.code, s->bad.msg); /* this batch holds the first bad sample */
    int rc = ld->err.code;
    if (rc) {
        ld->last = ld->err;
    } else {
        /* READY -> LEASED (BAD became the error above); the dispatcher is past this batch */
        assert(s->state == SLOT_READY && s->seq == ld->c_seq && ld->c_seq < ld->d_seq);
        s->state = SLOT_LEASED;
        ld->leased++;
    }
    pl_unlock(ld);
    return rc;
}

/* The leased batch's late GPU-decode verdicts (pl_gpu_check): 0, PL_GPU_REFILL (the slot is
 * FILLING again), or an error that becomes the sticky one, the slot returned to READY (not
 * handed out: stop releases it; later calls fail). */
static int check_late(rf_loader *ld, slot *s)
{
    rf_err e = {0};
    int rc = pl_gpu_check(ld, s, &e);
    if (rc >= 0)
        return rc;
    pl_lock(ld);
    pl_fail_locked(ld, rc, e.msg);
    ld->last = ld->err;
    assert(s->state == SLOT_LEASED && ld->leased > 0); /* LEASED -> READY */
    s->state = SLOT_READY;
    ld->leased--;
    rc = ld->err.code;
    pl_unlock(ld);
    return rc;
}

int rf_loader_next(rf_loader *ld, rf_batch **out)
{
    if (!ld || !out)
        return RF_EINVAL;
    *out = NULL;
    if (pl_forked(ld))
        return pl_fork_error(ld);
    if (ld->stopped)
        return pl_stopped_error(ld);
    if (ld->c_done)
        return RF_DONE;
    if (ld->c_k == ld->c_batches) {
        /* The consumer crossed an epoch boundary: say so once, then follow the dispatcher
         * into the next epoch (which always starts at order position 0). Every batch of the
         * epoch was handed out, and with it every skip it had: its counts are final. */
        if (ld->ep.epoch == ld->c_epoch)
            ld->ep.final = 1;
        ld->c_epochs_done++;
        if (ld->cfg.epochs && ld->c_epochs_done >= ld->cfg.epochs) {
            ld->c_done = 1;
            return RF_EPOCH_END;
        }
        ld->c_epoch++;
        ld->c_base = 0;
        ld->c_k = 0;
        uint64_t per;
        rf_plan_shape(&ld->plan, 0, &per, &ld->c_batches);
        return RF_EPOCH_END;
    }
    uint64_t t0 = rf_now_ns();
    slot *s = &ld->slots[ld->c_seq % ld->depth];
    struct timespec deadline;
    if (ld->cfg.next_timeout_ms) {
        uint64_t end = t0 + (uint64_t)ld->cfg.next_timeout_ms * 1000000u;
        deadline = (struct timespec){(time_t)(end / 1000000000u), (long)(end % 1000000000u)};
    }
    int rc;
    /* With late verdicts in skip mode a batch with bad samples goes back to FILLING for its
     * replacements (pl_gpu_check: PL_GPU_REFILL), and is waited for again. */
    while ((rc = lease_due(ld, s, &deadline)) == 0 && ld->gpu.late &&
           (rc = check_late(ld, s)) == PL_GPU_REFILL)
        ;
    uint64_t waited = rf_now_ns() - t0;
    ld->wait_ns += waited;
    if (rc)
        return rc;
    pl_sched_batch(ld, s, waited); /* the scheduler's measurements */
    if (ld->batches_out == 0)
        pl_cache_go(ld); /* cache fills start now: they never compete with the first batch */
    fill_batch(ld, s);
    count_epoch(ld, s);
    ld->c_seq++;
    ld->c_k++;
    ld->delivered += s->batch.count;
    ld->batches_out++;
    *out = &s->batch;
    return 0;
}

int rf_loader_release(rf_loader *ld, rf_batch *batch, void *stream)
{
    if (!ld || !batch)
        return RF_EINVAL;
    if (pl_forked(ld))
        return pl_fork_error(ld);
    slot *s = NULL;
    for (uint32_t i = 0; i < ld->depth; i++)
        if (&ld->slots[i].batch == batch)
            s = &ld->slots[i];
    rf_err e = {0};
    /* The state is read under mu: a slot released before is FREE and the dispatcher may be
     * reopening it (FILLING) right now (a data race TSan found with a double release). Once
     * seen LEASED it stays so until this thread frees it: only the consumer leaves LEASED. */
    int leased = 0;
    if (s) {
        pl_lock(ld);
        leased = s->state == SLOT_LEASED;
        pl_unlock(ld);
    }
    if (!leased)
        return pl_set_last(ld, &(rf_err){.code = RF_ESTATE,
                                      .msg = "batch is not leased from this loader (released "
                                             "twice?)"});
    int rc = pl_backend_release(ld, s, stream, &e);
    pl_lock(ld);
    assert(s->state == SLOT_LEASED && ld->leased > 0); /* LEASED -> FREE: only we leave it */
    s->state = SLOT_FREE;
    ld->leased--;
    if (rc)
        pl_fail_locked(ld, rc, e.msg); /* (which wakes every thread itself) */
    /* One I/O thread, not all: every thread waiting on cv_io waits for the same thing, work
     * dispatch_one_locked can hand out, and the one woken passes the wake on while there may
     * be more (pl_io_take). A broadcast woke all four I/O threads of the GPU paths at every
     * release, on the training loop's thread: with the ring full, 6.6-7.5 context switches of
     * theirs per batch against 1.3-1.6 (test_loader release_wakes_one_io_thread), and on a
     * 2-CPU host this call took 350-470 us instead of 18-26 while they preempted it. */
    pthread_cond_signal(&ld->cv_io);
    pl_unlock(ld);
    return rc ? pl_set_last(ld, &e) : 0;
}

int rf_batch_wait(const rf_batch *batch, void *stream)
{
    if (!batch)
        return RF_EINVAL;
    if (batch->device_kind != RF_DEVICE_CUDA)
        return 0;
#ifdef RINGFEED_HAVE_CUDA
    return rf_backend_cuda.wait(batch->event, stream);
#else
    return RF_ENODEV;
#endif
}

int rf_batch_synchronize(const rf_batch *batch)
{
    if (!batch)
        return RF_EINVAL;
    if (batch->device_kind != RF_DEVICE_CUDA)
        return 0;
#ifdef RINGFEED_HAVE_CUDA
    char why[RF_ERRMSG_MAX / 2]; /* the public call returns the code only */
    return rf_backend_cuda.sync(batch->event, why, sizeof why);
#else
    return RF_ENODEV;
#endif
}

const char *rf_last_error(const rf_loader *ld)
{
    if (!ld)
        return "";
    return ld->last.msg;
}

uint64_t rf_loader_batches_per_epoch(const rf_loader *ld)
{
    uint64_t per, batches;
    rf_plan_shape(&ld->plan, 0, &per, &batches);
    return batches;
}

uint64_t rf_loader_num_samples(const rf_loader *ld) { return ld->ds.nsamples; }

int rf_loader_set_epoch(rf_loader *ld, uint64_t epoch)
{
    if (!ld)
        return RF_EINVAL;
    if (pl_forked(ld))
        return pl_fork_error(ld);
    if (ld->stopped)
        return pl_stopped_error(ld);
    pl_lock(ld);
    int cancelled = ld->cancelled;
    pl_unlock(ld);
    if (cancelled)
        return pl_cancelled_error(ld);
    if (ld->leased)
        return pl_set_last(ld, &(rf_err){.code = RF_ESTATE,
                                      .msg = "release every batch before set_epoch"});
    if (ld->err.code)
        return pl_set_last(ld, &ld->err);
    pl_pipeline_stop(ld);
    ld->c_done = 0;
    ld->c_epochs_done = 0;
    rf_err e = {0};
    int rc = pl_pipeline_start_placed(ld, epoch, 0, &e);
    if (rc) {
        pl_fail(ld, rc, e.msg);
        return pl_set_last(ld, &e);
    }
    return 0;
}

/* Where a state written now resumes: the consumer's epoch and its order positions consumed
 * over all ranks, or the next epoch's start once this rank was handed all of its batches. */
void pl_resume_point(const rf_loader *ld, uint64_t *epoch, uint64_t *consumed)
{
    uint64_t per;
    rf_plan_shape(&ld->plan, ld->c_base, &per, &(uint64_t){0});
    uint64_t taken = ld->c_k * ld->batch; /* samples this rank consumed in the epoch */
    if (ld->c_k >= ld->c_batches || taken >= per) {
        *epoch = ld->c_epoch + 1;
        *consumed = 0;
    } else {
        *epoch = ld->c_epoch;
        *consumed = RF_MIN(ld->plan.n, ld->c_base + taken * ld->cfg.world_size);
    }
}

int rf_loader_cancel(rf_loader *ld)
{
    if (!ld)
        return RF_EINVAL;
    if (pl_forked(ld))
        return RF_EFORK; /* (its detail text belongs to the consumer's thread) */
    pl_lock(ld);
    ld->cancelled = 1;
    pthread_cond_broadcast(&ld->cv_out);
    pl_unlock(ld);
    return 0;
}

int rf_loader_stop(rf_loader *ld)
{
    if (!ld)
        return RF_EINVAL;
    if (pl_forked(ld))
        return pl_fork_error(ld);
    pl_threads_stop(ld);
    pl_slots_return(ld, 1);
    ld->stopped = 1;
    return 0;
}

int rf_loader_state(const rf_loader *ld, void *buf, uint64_t cap, uint64_t *len)
{
    if (!ld || !len)
        return RF_EINVAL;
    if (pl_forked(ld))
        return pl_fork_error(ld);
    rf_resume r = {.seed = ld->cfg.seed,
                   .n = ld->ds.nsamples,
                   .world = ld->cfg.world_size,
                   .rank = ld->cfg.rank,
                   .order = ld->cfg.order,
                   .batch = ld->batch,
                   .mix = rf_plan_mix_fingerprint(&ld->plan)};
    *len = rf_state_bytes(&r);
    if (!buf)
        return 0;
    if (cap < *len)
        return RF_EINVAL;
    pl_resume_point(ld, &r.epoch, &r.consumed);
    rf_state_encode(&r, buf);
    return 0;
}
