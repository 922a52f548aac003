/* gpu_stage.c — the GPU decode stage's thread (rf-gpu, gpu_decode.h): it checks each batch
 * whose verdicts come late (pl_gpu_check) and publishes it, the lowest batch first, and takes
 * in the consumer's handouts for the scheduler (pl_sched_batch), so rf_loader_next does no
 * decode work.
 * It waits on cv_gpu under mu, then works without mu: a CHECKING slot is its own (no other
 * thread moves it), and so is the scheduler's state. Handouts queue under mu (at most
 * PL_HANDOUTS_MAX: the consumer then waits on cv_out) and are acted upon in order, also when
 * stopping, so every batch handed out is measured. Joined by run.c after the I/O and decode
 * threads: a slot still CHECKING then is returned to the backend with the others. */
#include <stdio.h>

#include "pipeline/gpu_decode.h"

/* The CHECKING slot of the lowest seq (mu held): batches are checked in the order the consumer
 * wants them. NULL: none. */
static slot *next_check_locked(pl_gpu *g)
{
    slot *best = NULL;
    for (uint32_t i = 0; i < g->ring->depth; i++) {
        slot *s = &g->ring->slots[i];
        if (s->state == SLOT_CHECKING && (!best || s->seq < best->seq))
            best = s;
    }
    return best;
}

/* Check slot s (without mu) and publish it READY, with slot.bad holding the check's error
 * for the consumer to raise on reaching it; a refill the check left FILLING. */
static void check(pl_gpu *g, slot *s)
{
    rf_err e = {0};
    int rc = pl_gpu_check(g, s, &e);
    if (rc == PL_GPU_REFILL)
        return;
    pl_core *k = g->core;
    pl_lock(k);
    if (rc < 0) {
        s->bad.code = rc;
        s->bad_index = 0;
        snprintf(s->bad.msg, sizeof s->bad.msg, "%s", e.msg);
    }
    assert(s->state == SLOT_CHECKING); /* CHECKING -> READY */
    s->state = SLOT_READY;
    pthread_cond_broadcast(&k->cv_out);
    pl_unlock(k);
}

static void *stage_main(void *arg)
{
    pl_gpu *g = arg;
    pl_core *k = g->core;
    pl_gpu_thread *th = &g->thread;
    pl_handout h[PL_HANDOUTS_MAX];
    pl_lock(k);
    for (;;) {
        slot *s = k->stop ? NULL : next_check_locked(g);
        uint32_t n = (uint32_t)(th->handed - th->taken);
        if (!s && !n) {
            if (k->stop)
                break;
            pl_wait(k, &k->cv_gpu);
            continue;
        }
        for (uint32_t i = 0; i < n; i++)
            h[i] = th->q[(th->taken + i) % PL_HANDOUTS_MAX];
        th->taken += n;
        pl_unlock(k);
        for (uint32_t i = 0; i < n; i++)
            pl_sched_batch(g, &h[i]);
        if (s)
            check(g, s);
        pl_lock(k);
        if (n) { /* room in the queue, and the handouts acted upon (sched_open_join) */
            th->done += n;
            pthread_cond_broadcast(&k->cv_out);
        }
    }
    pl_unlock(k);
    return NULL;
}

int pl_gpu_stage_start(pl_gpu *g, rf_err *err)
{
    pl_gpu_thread *th = &g->thread;
    th->handouts = g->sched.mode == RF_SCHEDULE_BALANCE || g->sched.open_pending;
    th->handed = th->taken = th->done = 0;
    if (!g->late && !th->handouts)
        return 0;
    if (pthread_create(&th->tid, NULL, stage_main, g)) {
        th->handouts = 0;
        return rf_seterr(err, RF_ENOMEM, "cannot start the GPU decode stage's thread: out of "
                         "memory");
    }
    th->on = 1;
    rf_thread_name(th->tid, "rf-gpu", -1);
    return 0;
}

void pl_gpu_stage_join(pl_gpu *g)
{
    if (g->thread.on)
        pthread_join(g->thread.tid, NULL);
    g->thread.on = 0;
    g->thread.handouts = 0;
}

void pl_gpu_submitted_locked(pl_gpu *g, slot *s)
{
    PL_ASSERT_LOCKED(g->core);
    assert(s->state == SLOT_FILLING); /* FILLING -> CHECKING */
    s->state = SLOT_CHECKING;
    pthread_cond_signal(&g->core->cv_gpu);
}

/* The consumer's thread, after it leased the batch. With the test hook sched_open_join it
 * waits until the handout was acted upon, an opener it started joined: a test's short run
 * then has its engines ready from the next batch on, whatever the timing. */
void pl_gpu_epoch_done(pl_gpu *g)
{
    pl_sync_flush_async(g->sync);
}

void pl_gpu_handed(pl_gpu *g, uint64_t seq, uint64_t wait_ns)
{
    pl_gpu_thread *th = &g->thread;
    pl_sync_go(g->sync); /* entries are built once the first batch is out */
    if (!th->handouts) /* written by the consumer's own thread (start), read here */
        return;
    pl_core *k = g->core;
    uint64_t now = rf_now_ns();
    pl_lock(k);
    while (th->handed - th->taken == PL_HANDOUTS_MAX)
        pl_wait(k, &k->cv_out);
    th->q[th->handed % PL_HANDOUTS_MAX] = (pl_handout){seq, now, wait_ns};
    uint64_t mine = ++th->handed;
    pthread_cond_signal(&k->cv_gpu);
    while (k->hooks.sched_open_join && th->done < mine)
        pl_wait(k, &k->cv_out);
    pl_unlock(k);
}
