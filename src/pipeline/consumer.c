/* consumer.c — the consumer's calls: rf_loader_next (wait for the next batch, lease it, raise
 * a failed batch's error in batch order), rf_loader_release, rf_batch_wait/synchronize,
 * set_epoch, stop, cancel, and the resume state.
 * Runs on the consumer's thread (one at a time, as the API says), which owns pl_consumer
 * without mu and waits on cv_out under mu. rf_loader_cancel is the exception: any thread, any
 * time; it only sets `cancelled` under mu and wakes cv_out. Backend calls run without mu. */
#include "pipeline/consumer.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "backend/convert.h"
#include "pipeline/loader.h"
#include "pipeline/masks.h"
#include "pipeline/run.h"

/* multi_crop: each view's rf_view over the batch's data (views laid out per sample, one
 * after another), its crop boxes, flips, masks, boxes and keypoints the view's block of the
 * slot's tables. */
static void fill_views(const pl_ring *r, const pl_boxes *bx, slot *s, rf_batch *b)
{
    uint32_t es = rf_dtype_bytes(r->out_dtype);
    for (uint32_t k = 0; k < r->nviews; k++) {
        rf_view *v = &s->views[k];
        int64_t H = r->views->height[k], W = r->views->width[k];
        v->data = (uint8_t *)b->data + r->views->offset[k] * es;
        v->sample_stride = r->out_bytes;
        v->shape[0] = b->count;
        if (r->layout == RF_LAYOUT_NHWC)
            v->shape[1] = H, v->shape[2] = W, v->shape[3] = 3;
        else
            v->shape[1] = 3, v->shape[2] = H, v->shape[3] = W;
        v->crop_boxes = s->boxes + (size_t)k * r->batch * 4;
        v->letterbox = s->places + (size_t)k * r->batch * 4;
        v->flips = s->flips + (size_t)k * r->batch;
        v->masks = pl_mask_view(r, s, k);
        pl_boxes_view(bx, s, k, v);
    }
    b->shape[0] = b->count, b->shape[1] = (int64_t)(r->out_bytes / es), b->shape[2] = 1,
    b->shape[3] = 1;
    b->ndim = 2;
}

static void fill_batch(rf_loader *ld, slot *s)
{
    rf_batch *b = &s->batch;
    int cuda = ld->backend.ops->device_kind == RF_DEVICE_CUDA;
    uint32_t H = ld->ring.height, W = ld->ring.width;
    b->struct_size = sizeof *b;
    b->data = cuda                  ? s->dev.data
              : ld->gpu.emulate       ? pl_gpu_emulated(s)
              : ld->ring.host_convert ? s->out
                                      : s->stage;
    b->data_bytes = (uint64_t)b->count * ld->ring.out_bytes;
    if (ld->ring.tokens) {
        b->shape[0] = b->count, b->shape[1] = ld->ring.seq_len + 1, b->shape[2] = 1,
        b->shape[3] = 1;
    } else if (ld->ring.layout == RF_LAYOUT_NHWC) {
        b->shape[0] = b->count, b->shape[1] = H, b->shape[2] = W, b->shape[3] = 3;
    } else {
        b->shape[0] = b->count, b->shape[1] = 3, b->shape[2] = H, b->shape[3] = W;
    }
    b->dtype = ld->ring.out_dtype;
    b->layout = ld->ring.layout;
    b->device_kind = ld->backend.ops->device_kind;
    b->device_index = cuda ? ld->c.device_index : -1;
    b->labels = s->labels;
    b->labels_device = cuda ? s->dev.labels : NULL;
    b->keys = s->keys;
    b->sample_ids = s->ids;
    b->positions = s->positions;
    b->is_padding = s->padding;
    b->event = s->dev.event;
    b->ndim = ld->ring.tokens ? 2 : 4;
    b->crop_boxes = ld->ring.tokens ? NULL : s->boxes;
    b->flips = ld->ring.tokens ? NULL : s->flips;
    b->letterbox = ld->ring.tokens ? NULL : s->places;
    int ragged = ld->ring.native || ld->ring.buckets.n; /* each sample says its size */
    b->sizes = ragged ? s->sizes : NULL;
    b->sample_offsets = ragged ? s->offsets : NULL;
    b->label_multihot = s->mhot, b->label_list = s->mlist, b->label_counts = s->mcounts;
    b->masks = s->masks, b->mask_dtype = ld->ring.mask_dtype;
    b->nviews = ld->ring.nviews;
    b->views = ld->ring.nviews ? s->views : NULL;
    if (ld->ring.nviews)
        fill_views(&ld->ring, &ld->boxes, s, b);
    pl_fields_batch(&ld->fields, s, b);
    pl_boxes_batch(&ld->boxes, s, b);
}

/* The consumer is handed slot s's batch: it joins the counts of its epoch (a batch of another
 * epoch than the counted one starts them afresh). */
static void count_epoch(rf_loader *ld, const slot *s)
{
    epoch_counts *ep = &ld->c.ep;
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
    PL_ASSERT_LOCKED(&ld->core);
    return (s->state == SLOT_READY || s->state == SLOT_BAD) && s->seq == ld->c.seq;
}

/* rf_loader_next gave up after next_timeout_ms (mu held): where the awaited batch is, what the
 * pipeline holds, and the oldest sample not through it, so a stuck read, decode or device
 * submit each read differently here. */
static void describe_stall(const rf_loader *ld, const slot *s, char *buf, size_t n)
{
    PL_ASSERT_LOCKED(&ld->core);
    uint32_t in[3] = {0};
    const task *oldest = NULL;
    for (uint64_t q = ld->d.task_tail; q < ld->d.task_head; q++) {
        const task *t = &ld->d.tasks[q % ld->d.ntasks];
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
    if (s->seq != ld->c.seq || s->state == SLOT_FREE)
        snprintf(batch, sizeof batch, "not started (its slot is not open yet)");
    else if (pending)
        snprintf(batch, sizeof batch, "%u of its %u samples still to come", pending,
                 s->batch.count);
    else if (s->state == SLOT_CHECKING)
        snprintf(batch, sizeof batch, "all %u samples in, its GPU decode being checked",
                 s->batch.count);
    else
        snprintf(batch, sizeof batch, "all %u samples in, being submitted to the %s backend",
                 s->batch.count, ld->backend.ops->name);
    if (oldest) {
        pl_describe_task(&ld->ds, ld->ring.tokens, oldest, where, sizeof where);
        size_t k = strlen(where);
        snprintf(where + k, sizeof where - k, " (%s)", phase[oldest->phase]);
    }
    snprintf(buf, n, "no batch in %u ms (next_timeout_ms; nothing is lost: call again to keep "
             "waiting). Batch %llu of epoch %llu: %s. In the pipeline: %u reads in flight, %u "
             "samples waiting for a decode thread, %u being decoded. Oldest unfinished sample: "
             "%s", ld->c.timeout_ms, (unsigned long long)ld->c.k,
             (unsigned long long)ld->c.epoch, batch, in[TASK_READING], in[TASK_QUEUED],
             in[TASK_DECODING], where);
}

/* Wait for the consumer's batch in slot s and lease it: 0, the sticky error (a BAD slot
 * becomes it), RF_ESTATE when the slot is still leased, or RF_ETIMEDOUT after
 * next_timeout_ms (deadline), which is not sticky. */
static int lease_due(rf_loader *ld, slot *s, const struct timespec *deadline)
{
    pl_lock(&ld->core);
    if (s->state == SLOT_LEASED) {
        /* The slot this batch needs is still held by the consumer: waiting would never end. */
        pl_unlock(&ld->core);
        return pl_set_last(&ld->core, &(rf_err){.code = RF_ESTATE,
                                      .msg = "every prefetch slot is leased: release a batch "
                                             "before asking for the next one"});
    }
    /* The dispatcher is at most a ring ahead: slot d_seq % depth opens only once batch
     * d_seq - depth was released, i.e. consumed (c_* is ours; d_seq is read under mu). */
    assert(ld->c.seq <= ld->d.seq && ld->d.seq - ld->c.seq <= ld->ring.depth);
    int expired = 0;
    while (!ld->core.err.code && !ld->c.cancelled && !batch_due(ld, s) && !expired) {
        if (ld->c.timeout_ms)
            expired = pl_timedwait(&ld->core, &ld->core.cv_out, deadline) == ETIMEDOUT;
        else
            pl_wait(&ld->core, &ld->core.cv_out);
    }
    if (ld->c.cancelled) {
        pl_unlock(&ld->core);
        return pl_cancelled_error(&ld->core);
    }
    if (expired && !ld->core.err.code && !batch_due(ld, s)) {
        /* not sticky: the pipeline goes on, and the next call waits again */
        ld->core.last.code = RF_ETIMEDOUT;
        describe_stall(ld, s, ld->core.last.msg, sizeof ld->core.last.msg);
        pl_unlock(&ld->core);
        return RF_ETIMEDOUT;
    }
    /* BAD: fail mode's first bad sample is in this batch; READY with slot.bad: the GPU decode
     * stage's check failed it. Either stays unleased (stop returns it). */
    if (!ld->core.err.code && (s->state == SLOT_BAD || s->bad.code))
        pl_fail_locked(&ld->core, s->bad.code, s->bad.msg);
    int rc = ld->core.err.code;
    if (rc) {
        ld->core.last = ld->core.err;
    } else {
        /* READY -> LEASED (a bad batch became the error above); the dispatcher is past it */
        assert(s->state == SLOT_READY && s->seq == ld->c.seq && ld->c.seq < ld->d.seq);
        s->state = SLOT_LEASED;
        ld->c.leased++;
    }
    pl_unlock(&ld->core);
    return rc;
}

int rf_loader_next(rf_loader *ld, rf_batch **out)
{
    if (!ld || !out)
        return RF_EINVAL;
    *out = NULL;
    if (pl_forked(&ld->core))
        return pl_fork_error(&ld->core);
    if (ld->c.stopped)
        return pl_stopped_error(&ld->core);
    if (ld->c.done)
        return RF_DONE;
    if (ld->c.k == ld->c.batches) {
        /* The consumer crossed an epoch boundary: say so once, then follow the dispatcher
         * into the next epoch (which always starts at order position 0). Every batch of the
         * epoch was handed out, and with it every skip it had: its counts are final. */
        if (ld->c.ep.epoch == ld->c.epoch)
            ld->c.ep.final = 1;
        ld->c.epochs_done++;
        pl_gpu_epoch_done(&ld->gpu);
        if (ld->c.epochs && ld->c.epochs_done >= ld->c.epochs) {
            ld->c.done = 1;
            return RF_EPOCH_END;
        }
        ld->c.epoch++;
        ld->c.base = 0;
        ld->c.k = 0;
        uint64_t per;
        rf_plan_shape(&ld->plan, 0, &per, &ld->c.batches);
        return RF_EPOCH_END;
    }
    uint64_t t0 = rf_now_ns();
    slot *s = &ld->ring.slots[ld->c.seq % ld->ring.depth];
    struct timespec deadline;
    if (ld->c.timeout_ms) {
        uint64_t end = t0 + (uint64_t)ld->c.timeout_ms * 1000000u;
        deadline = (struct timespec){(time_t)(end / 1000000000u), (long)(end % 1000000000u)};
    }
    int rc = lease_due(ld, s, &deadline);
    uint64_t waited = rf_now_ns() - t0;
    ld->c.wait_ns += waited;
    if (rc)
        return rc;
    /* The stages that follow the consumer's pace hear of the batch and act on their own
     * threads (the scheduler measures it; the cache's fills start after the first batch). */
    pl_gpu_handed(&ld->gpu, s->seq, waited);
    pl_cache_go(&ld->remote);
    fill_batch(ld, s);
    count_epoch(ld, s);
    ld->c.seq++;
    ld->c.k++;
    ld->c.delivered += s->batch.count;
    ld->c.batches_out++;
    *out = &s->batch;
    return 0;
}

int rf_loader_release(rf_loader *ld, rf_batch *batch, void *stream)
{
    if (!ld || !batch)
        return RF_EINVAL;
    if (pl_forked(&ld->core))
        return pl_fork_error(&ld->core);
    slot *s = NULL;
    for (uint32_t i = 0; i < ld->ring.depth; i++)
        if (&ld->ring.slots[i].batch == batch)
            s = &ld->ring.slots[i];
    rf_err e = {0};
    /* The state is read under mu: a slot released before is FREE and the dispatcher may be
     * reopening it right now. Once seen LEASED it stays so: only the consumer leaves LEASED. */
    int leased = 0;
    if (s) {
        pl_lock(&ld->core);
        leased = s->state == SLOT_LEASED;
        pl_unlock(&ld->core);
    }
    if (!leased)
        return pl_set_last(&ld->core, &(rf_err){.code = RF_ESTATE,
                                      .msg = "batch is not leased from this loader (released "
                                             "twice?)"});
    int rc = pl_backend_release(&ld->submit, s, stream, &e);
    pl_lock(&ld->core);
    assert(s->state == SLOT_LEASED && ld->c.leased > 0); /* LEASED -> FREE: only we leave it */
    s->state = SLOT_FREE;
    ld->c.leased--;
    if (rc)
        pl_fail_locked(&ld->core, rc, e.msg); /* (which wakes every thread itself) */
    /* One I/O thread, not all: every thread waiting on cv_io waits for the same thing, and
     * the one woken passes the wake on while there may be more (pl_io_take). A broadcast
     * would preempt the training loop's thread at every release (docs/gpu-decode.md). */
    pthread_cond_signal(&ld->core.cv_io);
    pl_unlock(&ld->core);
    return rc ? pl_set_last(&ld->core, &e) : 0;
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
    return ld->core.last.msg;
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
    if (pl_forked(&ld->core))
        return pl_fork_error(&ld->core);
    if (ld->c.stopped)
        return pl_stopped_error(&ld->core);
    pl_lock(&ld->core);
    int cancelled = ld->c.cancelled;
    pl_unlock(&ld->core);
    if (cancelled)
        return pl_cancelled_error(&ld->core);
    if (ld->c.leased)
        return pl_set_last(&ld->core, &(rf_err){.code = RF_ESTATE,
                                      .msg = "release every batch before set_epoch"});
    if (ld->core.err.code)
        return pl_set_last(&ld->core, &ld->core.err);
    pl_pipeline_stop(ld);
    ld->c.done = 0;
    ld->c.epochs_done = 0;
    rf_err e = {0};
    int rc = pl_pipeline_start_placed(ld, epoch, 0, &e);
    if (rc) {
        pl_fail(&ld->core, rc, e.msg);
        return pl_set_last(&ld->core, &e);
    }
    return 0;
}

/* Where a state written now resumes: the consumer's epoch and its order positions consumed
 * over all ranks, or the next epoch's start once this rank was handed all of its batches. */
void pl_resume_point(const rf_loader *ld, uint64_t *epoch, uint64_t *consumed)
{
    uint64_t per;
    rf_plan_shape(&ld->plan, ld->c.base, &per, &(uint64_t){0});
    uint64_t taken = ld->c.k * ld->ring.batch; /* samples this rank consumed in the epoch */
    if (ld->c.k >= ld->c.batches || (!ld->plan.bk && taken >= per)) {
        *epoch = ld->c.epoch + 1;
        *consumed = 0;
    } else {
        *epoch = ld->c.epoch;
        *consumed = rf_plan_cursor(&ld->plan, ld->c.base, ld->c.k);
    }
}

int rf_loader_cancel(rf_loader *ld)
{
    if (!ld)
        return RF_EINVAL;
    if (pl_forked(&ld->core))
        return RF_EFORK; /* (its detail text belongs to the consumer's thread) */
    pl_lock(&ld->core);
    ld->c.cancelled = 1;
    pthread_cond_broadcast(&ld->core.cv_out);
    pl_unlock(&ld->core);
    return 0;
}

int rf_loader_stop(rf_loader *ld)
{
    if (!ld)
        return RF_EINVAL;
    if (pl_forked(&ld->core))
        return pl_fork_error(&ld->core);
    pl_threads_stop(ld);
    pl_slots_return(ld, 1);
    ld->c.stopped = 1;
    return 0;
}

int rf_loader_state(const rf_loader *ld, void *buf, uint64_t cap, uint64_t *len)
{
    if (!ld || !len)
        return RF_EINVAL;
    if (pl_forked(&ld->core))
        return pl_fork_error(&ld->core);
    rf_resume r = {.seed = ld->plan.seed,
                   .n = ld->ds.nsamples,
                   .world = ld->plan.world,
                   .rank = ld->plan.rank,
                   .order = ld->plan.order,
                   .batch = ld->ring.batch,
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
