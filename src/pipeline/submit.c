/* submit.c — the backend side of a slot: when a batch's last sample is in, its copy (and
 * conversion, and GPU decode kernels) is enqueued on the backend and the slot published READY
 * (or BAD, fail mode, when one of its samples failed); a returned slot is released to the
 * backend, behind the test hook.
 *
 * DESIGN
 * pl_slot_finish runs on whichever thread counted the slot's last sample down (a decode
 * thread, or an I/O thread for token windows): the submit runs without mu, then mu is taken to
 * publish the slot and wake the consumer (cv_out), or to record a failed submit as the sticky
 * error. pl_backend_release runs on the consumer's thread (release) or with every thread
 * stopped (run.c), without mu. Only state.c is called from here. */
#include <stdio.h>

#include "pipeline/pipeline.h"

/* The batch's last sample is in: enqueue the copy and publish the slot. */
void pl_slot_finish(rf_loader *ld, slot *s)
{
    if (s->bad.code) { /* written before the samples' countdown, which ordered it before us */
        pl_lock(ld);
        assert(s->state == SLOT_FILLING); /* FILLING -> BAD */
        s->state = SLOT_BAD;
        pthread_cond_broadcast(&ld->cv_out);
        pl_unlock(ld);
        return;
    }
    rf_err e = {0};
    uint64_t t0 = rf_now_ns();
    /* A refilled batch on the device (skip mode with late verdicts) is submitted again: the
     * first submit's device batch, never handed out, goes back to the pool first. */
    int rc = s->gpu.refill && ld->gpu.device ? ld->bops->release(ld->backend, &s->dev, NULL, &e)
                                             : 0;
    /* GPU decode: only the stage bytes the batch's packets and pixels took, and its part of
     * the convert desc (pl_gpu_batch_desc). */
    rf_convert_desc conv = ld->conv;
    size_t bytes = ld->gpu.device ? pl_gpu_batch_desc(ld, s, &conv.gj)
                                  : (size_t)s->batch.count * ld->stride;
    conv.elements = (uint64_t)s->batch.count * (ld->cfg.seq_len + 1);
    conv.out_bytes = (uint64_t)s->batch.count * ld->out_bytes;
    if (!rc && ld->hooks.backend &&
        (rc = ld->hooks.backend(ld->hooks.backend_ctx, RF_HOOK_SUBMIT, s->seq)) != 0)
        rf_seterr(&e, rc, "injected fault (src/pipeline/testing.h)");
    else if (!rc)
        rc = ld->bops->submit(ld->backend, (uint32_t)(s - ld->slots), s->stage, bytes,
                              s->labels, s->batch.count, &conv, &s->dev, &e);
    atomic_fetch_add_explicit(&ld->copy_ns, rf_now_ns() - t0, memory_order_relaxed); /* stats */
    pl_lock(ld);
    if (rc) {
        /* Sticky and fatal (a CUDA error poisons the context): fail_locked wakes the consumer
         * in rf_loader_next, the I/O threads in take() and the decode threads; they stop
         * taking work and every later call returns this error. */
        char m[RF_ERRMSG_MAX];
        snprintf(m, sizeof m, "copy of batch %llu (epoch %llu, batch %llu of the epoch, %u "
                 "samples, %zu bytes) to the device failed: %s", (unsigned long long)s->seq,
                 (unsigned long long)s->batch.epoch, (unsigned long long)s->batch.index,
                 s->batch.count, bytes, e.msg);
        pl_fail_locked(ld, rc, m);
    } else {
        assert(s->state == SLOT_FILLING); /* FILLING -> READY */
        s->state = SLOT_READY;
        pthread_cond_broadcast(&ld->cv_out);
    }
    pl_unlock(ld);
}

/* The backend's release of slot s, behind the test hook (src/pipeline/testing.h). */
int pl_backend_release(rf_loader *ld, slot *s, void *stream, rf_err *e)
{
    int rc = ld->hooks.backend ? ld->hooks.backend(ld->hooks.backend_ctx, RF_HOOK_RELEASE, s->seq)
                               : 0;
    if (rc)
        return rf_seterr(e, rc, "releasing batch %llu: injected fault (src/pipeline/testing.h)",
                         (unsigned long long)s->seq);
    return ld->bops->release(ld->backend, &s->dev, stream, e);
}
