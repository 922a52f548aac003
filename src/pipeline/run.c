/* run.c — start and stop of the pipeline's threads (run.h), on the caller's thread. Stopping
 * sets `stop` under mu and wakes every condition variable, then joins the threads without mu;
 * starting writes the cursors with no other thread running. */
#include "pipeline/run.h"

#include "base/numa.h"
#include "pipeline/loader.h"

void pl_threads_stop(rf_loader *ld)
{
    if (!ld->running)
        return;
    pl_core *k = &ld->core;
    pl_lock(k);
    k->stop = 1;
    pthread_cond_broadcast(&k->cv_io);
    pthread_cond_broadcast(&k->cv_dec);
    pthread_cond_broadcast(&k->cv_out);
    pthread_cond_broadcast(&k->cv_gpu);
    pl_unlock(k);
    rf_io_stage_stop(&ld->io);
    pl_pool_join(&ld->pool);
    pl_gpu_stage_join(&ld->gpu);
    ld->running = 0;
}

/* Published batches still hold device memory and maybe a copy in flight; the leased ones'
 * memory is the consumer's until destroy when keep_leased (rf_loader_stop). */
void pl_slots_return(rf_loader *ld, int keep_leased)
{
    assert(!ld->running); /* no thread left to fill or publish a slot */
    for (uint32_t i = 0; ld->ring.slots && i < ld->ring.depth; i++) {
        slot *s = &ld->ring.slots[i];
        if (keep_leased && s->state == SLOT_LEASED)
            continue;
        /* a slot stopped in its refill still holds its first device batch (submit.c) */
        if (s->state == SLOT_READY || s->state == SLOT_LEASED || s->state == SLOT_CHECKING ||
            (s->state == SLOT_FILLING && s->gpu.refill)) {
            rf_err e = {0};
            pl_backend_release(&ld->submit, s, NULL, &e); /* an error changes nothing: we stop */
        }
        s->state = SLOT_FREE;
    }
}

void pl_pipeline_stop(rf_loader *ld)
{
    pl_threads_stop(ld);
    pl_slots_return(ld, 0);
}

static int pipeline_start(rf_loader *ld, uint64_t epoch, uint64_t base, rf_err *err)
{
    pl_consumer *c = &ld->c;
    ld->core.stop = 0;
    pl_skip_restart(&ld->skip);
    pl_dispatch_restart(&ld->d, c->seq, epoch, base, c->epochs_done);
    c->epoch = ld->d.epoch;
    c->base = ld->d.epoch == epoch ? base : 0;
    c->batches = ld->plan.batches;
    c->k = 0;
    c->ep = (epoch_counts){.epoch = c->epoch, .total = pl_plan_real(&ld->plan)};
    int rc = pl_pool_start(&ld->pool, err);
    ld->running = 1; /* (a failed start leaves threads for the teardown to join) */
    if (rc == 0)
        rc = pl_gpu_stage_start(&ld->gpu, err);
    return rc ? rc : rf_io_stage_start(&ld->io, err);
}

int pl_pipeline_start_placed(rf_loader *ld, uint64_t epoch, uint64_t base, rf_err *err)
{
    rf_numa_scope sc;
    char why[96];
    rf_numa_enter(ld->mem.numa_node, &sc, why, sizeof why);
    int rc = pipeline_start(ld, epoch, base, err);
    rf_numa_leave(&sc);
    return rc;
}
