/* run.c — start and stop of the pipeline's threads: (re)plan the epoch and reset the cursors,
 * start the decode threads and the I/O engine (falling back to pread when an io_uring worker
 * cannot be set up); stop them and return the published slots to the backend.
 *
 * DESIGN
 * Runs on the caller's thread (create, set_epoch, stop, destroy). Stopping sets `stop` under
 * mu and wakes every condition variable, then joins the engine and the decode threads without
 * mu; starting writes the cursors with no other thread running. NUMA placement: threads
 * inherit the node of the scope they are started in (pl_pipeline_start_placed). */
#include <stdio.h>
#include <stdlib.h>

#include "pipeline/pipeline.h"

/* Stop every thread and reap in-flight work; the ring keeps its memory. */
void pl_threads_stop(rf_loader *ld)
{
    if (!ld->running)
        return;
    pl_lock(ld);
    ld->stop = 1;
    pthread_cond_broadcast(&ld->cv_io);
    pthread_cond_broadcast(&ld->cv_dec);
    pthread_cond_broadcast(&ld->cv_out);
    pl_unlock(ld);
    if (ld->io) {
        rf_io_stats st; /* after the threads finished: what they did while stopping counts */
        ld->iops->stop(ld->io, &st);
        ld->io = NULL;
        ld->io_ns_prev += st.busy_ns;
        ld->io_reads_prev += st.reads;
        ld->io_retries_prev += st.retries;
        ld->io_bytes_prev += st.bytes;
        ld->io_storage_prev += st.storage_bytes;
    }
    for (uint32_t i = 0; i < ld->ndecoders; i++)
        pthread_join(ld->decoders[i], NULL);
    ld->ndecoders = 0;
    ld->running = 0;
}

/* With the threads stopped: published batches still hold device memory and maybe a copy in
 * flight; return them to the backend and free their slots, the leased ones too unless
 * keep_leased (rf_loader_stop: their memory is the consumer's until destroy). */
void pl_slots_return(rf_loader *ld, int keep_leased)
{
    assert(!ld->running); /* no thread left to fill or publish a slot */
    for (uint32_t i = 0; ld->slots && i < ld->depth; i++) {
        slot *s = &ld->slots[i];
        if (keep_leased && s->state == SLOT_LEASED)
            continue;
        /* a slot stopped in its refill still holds its first device batch (submit.c) */
        if (s->state == SLOT_READY || s->state == SLOT_LEASED ||
            (s->state == SLOT_FILLING && s->gpu.refill)) {
            rf_err e = {0};
            pl_backend_release(ld, s, NULL, &e); /* an error here changes nothing: we stop anyway */
        }
        s->state = SLOT_FREE;
    }
}

void pl_pipeline_stop(rf_loader *ld)
{
    pl_threads_stop(ld);
    pl_slots_return(ld, 0);
}

/* (Re)start at consumer batch seq `seq`, planning `epoch` from order position `base`. */
static int pipeline_start(rf_loader *ld, uint64_t epoch, uint64_t base, rf_err *err)
{
    ld->stop = 0;
    ld->warm_epoch = UINT64_MAX; /* the warm cursor restarts with the plan */
    ld->arena_head = ld->arena_tail = 0;
    ld->task_head = ld->task_tail = 0;
    ld->decq_head = ld->decq_tail = 0;
    rf_plan_epoch(&ld->plan, epoch, base);
    ld->d_epoch = epoch;
    ld->d_k = 0;
    ld->d_j = 0;
    ld->d_seq = ld->c_seq;
    ld->d_done = 0;
    ld->d_epochs_left = ld->cfg.epochs ? ld->cfg.epochs - ld->c_epochs_done : 0;
    ld->skq_head = ld->skq_tail = 0;
    /* No other thread runs yet; mu is taken because the epoch calls are *_locked (asserted). */
    pl_lock(ld);
    ld->policy->epoch_locked(ld);
    if (ld->plan.batches == 0) /* a resume cursor at the very end of an epoch */
        pl_plan_next_epoch_locked(ld);
    pl_unlock(ld);
    ld->c_epoch = ld->d_epoch;
    ld->c_base = ld->d_epoch == epoch ? base : 0;
    ld->c_batches = ld->plan.batches;
    ld->c_k = 0;
    ld->ep = (epoch_counts){.epoch = ld->c_epoch, .total = pl_plan_real(&ld->plan)};

    for (uint32_t i = 0; i < ld->cfg.decode_threads; i++) {
        decoder_arg *a = malloc(sizeof *a);
        if (!a)
            return rf_seterr(err, RF_ENOMEM, "no memory for decode threads");
        a->ld = ld;
        a->dec = ld->decs[i];
        /* (the hook reaches the teardown of a half-started pipeline) */
        if (pl_alloc_refused(ld, "decode thread", 0) ||
            pthread_create(&ld->decoders[i], NULL, pl_decoder_main, a)) {
            free(a);
            ld->running = 1;
            return rf_seterr(err, RF_ENOMEM, "cannot start decode thread %u of %u: out of memory",
                             i + 1, ld->cfg.decode_threads);
        }
        rf_thread_name(ld->decoders[i], "rf-decode", (int)i);
        ld->ndecoders++;
    }
    ld->running = 1;
    int rc = ld->iops->start(&ld->iop, &ld->src, &ld->io, err);
    if (rc && ld->iops == &rf_io_uring_ops && ld->cfg.io_engine == RF_IO_AUTO) {
        /* io_uring passed the probe but a worker ring could not be set up (memlock, limits):
         * fall back for this loader and say why. */
        snprintf(ld->io_why, sizeof ld->io_why, "io_uring worker setup failed (%s): using pread",
                 err->msg);
        ld->iops = &rf_io_pread_ops;
        rc = ld->iops->start(&ld->iop, &ld->src, &ld->io, err);
    }
    return rc;
}

int pl_pipeline_start_placed(rf_loader *ld, uint64_t epoch, uint64_t base, rf_err *err)
{
    rf_numa_scope sc;
    char why[96];
    rf_numa_enter(ld->numa_node, &sc, why, sizeof why);
    int rc = pipeline_start(ld, epoch, base, err);
    rf_numa_leave(&sc);
    return rc;
}
