/* submit.c — the copy stage (submit.h). pl_slot_finish runs on the thread that counted the
 * slot's last sample down: the submit without mu, then mu to publish the slot (READY, BAD or
 * CHECKING; cv_out) or record a failed submit. */
#include "pipeline/submit.h"

#include <stdio.h>

void pl_slot_finish(pl_submit *u, slot *s)
{
    pl_core *k = u->core;
    const pl_ring *r = u->ring;
    const pl_backend *be = u->backend;
    if (s->bad.code) { /* written before the samples' countdown, which ordered it before us */
        pl_lock(k);
        assert(s->state == SLOT_FILLING); /* FILLING -> BAD */
        s->state = SLOT_BAD;
        pthread_cond_broadcast(&k->cv_out);
        pl_unlock(k);
        return;
    }
    rf_err e = {0};
    uint64_t t0 = rf_now_ns();
    /* A refilled batch on the device (skip mode with late verdicts) is submitted again: the
     * first submit's device batch, never handed out, goes back to the pool first. */
    int rc = s->gpu.refill && u->gpu->device ? be->ops->release(be->b, &s->dev, NULL, &e) : 0;
    /* GPU decode: only the stage bytes the batch's packets and pixels took, and its part of
     * the convert desc (pl_gpu_batch_desc). */
    rf_convert_desc conv = r->conv;
    size_t bytes = u->gpu->device ? pl_gpu_batch_desc(u->gpu, s, &conv.gj)
                                  : (size_t)s->batch.count * r->stride;
    conv.elements = (uint64_t)s->batch.count * (r->seq_len + 1);
    conv.out_bytes = (uint64_t)s->batch.count * r->out_bytes;
    if (!rc && k->hooks.backend &&
        (rc = k->hooks.backend(k->hooks.backend_ctx, RF_HOOK_SUBMIT, s->seq)) != 0)
        rf_seterr(&e, rc, "injected fault (src/pipeline/testing.h)");
    else if (!rc)
        rc = be->ops->submit(be->b, (uint32_t)(s - r->slots), s->stage, bytes, s->labels,
                             s->batch.count, &conv, &s->dev, &e);
    pl_count(&u->counters->copy_ns, rf_now_ns() - t0);
    pl_lock(k);
    if (rc) {
        /* Sticky and fatal (a CUDA error poisons the context). */
        char m[RF_ERRMSG_MAX];
        snprintf(m, sizeof m, "copy of batch %llu (epoch %llu, batch %llu of the epoch, %u "
                 "samples, %zu bytes) to the device failed: %s", (unsigned long long)s->seq,
                 (unsigned long long)s->batch.epoch, (unsigned long long)s->batch.index,
                 s->batch.count, bytes, e.msg);
        pl_fail_locked(k, rc, m);
    } else if (pl_gpu_needs_check(u->gpu, s)) {
        pl_gpu_submitted_locked(u->gpu, s); /* its verdicts first */
    } else {
        assert(s->state == SLOT_FILLING); /* FILLING -> READY */
        s->state = SLOT_READY;
        pthread_cond_broadcast(&k->cv_out);
    }
    pl_unlock(k);
}

int pl_backend_release(pl_submit *u, slot *s, void *stream, rf_err *e)
{
    const rf_test_hooks *h = &u->core->hooks;
    int rc = h->backend ? h->backend(h->backend_ctx, RF_HOOK_RELEASE, s->seq) : 0;
    if (rc)
        return rf_seterr(e, rc, "releasing batch %llu: injected fault (src/pipeline/testing.h)",
                         (unsigned long long)s->seq);
    return u->backend->ops->release(u->backend->b, &s->dev, stream, e);
}
