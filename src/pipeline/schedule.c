/* schedule.c — the decode scheduler (rf_config.decode_schedule; schedule.h): the controller
 * (rf_sched_step, a pure function), the mode resolved at create (pl_sched_choose), the
 * engines' opener thread (pl_sched_start, pl_sched_stop), the route of one sample
 * (pl_sched_route) and the consumer's step per batch (pl_sched_batch).
 *
 * DESIGN
 * choose and start run on the creating thread, stop on destroy's (after the pipeline's threads
 * stopped). The opener thread calls only the backend's engine_open (or, on the host with the
 * test hook, sleeps) and publishes the result with a release store of sched.engines; a decode
 * thread acquires it before it places an engine packet, and the backend's submit of that
 * packet's batch is ordered after the placement by slot.pending's acq_rel. pl_sched_batch runs
 * on the consumer's thread, takes mu only to count the ready slots, and calls the test hook
 * without it. pl_sched_route runs on the decode threads without mu. The shares are relaxed:
 * any value routes a sample to a path that gives the same pixels. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "pipeline/pipeline.h"

/* The consumer waited for its batch when its wait (mu and all) took longer than this. */
#define PL_SCHED_WAITED_NS 100000u

void rf_sched_init(rf_sched *s)
{
    *s = (rf_sched){.gpu = RF_SCHED_START, .hw = 0, .hw_cap = RF_SCHED_ONE / 2,
                    .step = 4 * RF_SCHED_STEP_MIN, .last = 0};
}

/* -1 ahead (every other slot is ready: the decode threads are about to wait for a free one),
 * +1 behind (the consumer waited), 0 in between. */
static int direction(const rf_sched_in *in)
{
    if (in->waited)
        return 1;
    return in->depth > 1 && in->ready + 1 >= in->depth ? -1 : 0;
}

static void move_gpu(rf_sched *s, int dir)
{
    if (!dir)
        return;
    if (dir == s->last)
        s->step = RF_MIN(s->step * 2, RF_SCHED_STEP_MAX);
    else if (s->last)
        s->step = RF_MAX(s->step / 2, RF_SCHED_STEP_MIN);
    s->last = dir;
    if (dir > 0)
        s->gpu = RF_MIN(s->gpu + s->step, RF_SCHED_ONE);
    else
        s->gpu = s->gpu > s->step ? s->gpu - s->step : 0;
}

/* The engines' capacity: it shrinks when the consumer waited for a batch's GPU work (more
 * than an eighth of the time between batches) that held engine samples, and grows while it
 * did not. */
static void move_engines(rf_sched *s, const rf_sched_in *in)
{
    if (in->engines != RF_HW_ENGINES_READY) {
        s->hw = 0; /* nothing goes to engines that are not there, or not open yet */
        return;
    }
    if (in->engine_samples && in->gpu_wait_ns * 8 > in->period_ns)
        s->hw_cap = s->hw_cap > RF_SCHED_HW_DOWN ? s->hw_cap - RF_SCHED_HW_DOWN : 0;
    else
        s->hw_cap = RF_MIN(s->hw_cap + RF_SCHED_HW_UP, RF_SCHED_ONE);
    s->hw = RF_MIN(s->gpu, s->hw_cap);
}

void rf_sched_step(rf_sched *s, const rf_sched_in *in)
{
    move_gpu(s, direction(in));
    move_engines(s, in);
}

/* create, the backend chosen: AUTO becomes a mode, and BALANCE is refused where it cannot
 * run. The test hook `sched` lets the host backend run it (packets decoded on the decode
 * threads, engine packets by the host stand-in). */
int pl_sched_choose(rf_loader *ld, rf_err *err)
{
    rf_config *c = &ld->cfg;
    int device = ld->bops->device_kind == RF_DEVICE_CUDA;
    const char *no = c->naive ? "the naive baseline"
                     : c->sample_hook ? "a sample_hook"
                     : c->source == RF_SOURCE_TOKENS ? "a token source"
                     : NULL;
    /* AUTO stays the CPU on the CUDA backend too until BALANCE meets its targets there
     * (docs/gpu-decode.md, "The scheduler": on the H200 ResNet-18 fell to 81% of its
     * GPU-bound rate under it, against 96-97% with the CPU); the test hook resolves it to
     * BALANCE so the scheduler's pipeline runs in CI. */
    if (c->decode_schedule == RF_SCHEDULE_AUTO)
        c->decode_schedule = ld->hooks.sched && !no ? RF_SCHEDULE_BALANCE : RF_SCHEDULE_CPU;
    else if (c->decode_schedule == RF_SCHEDULE_BALANCE && !device && !ld->hooks.sched)
        return rf_seterr(err, RF_EINVAL, "decode_schedule BALANCE needs the CUDA backend; the "
                         "%s backend decodes on the CPU", ld->bops->name);
    else if (c->decode_schedule == RF_SCHEDULE_BALANCE && no)
        return rf_seterr(err, RF_EINVAL, "decode_schedule BALANCE does not run with %s", no);
    ld->sched.mode = c->decode_schedule;
    if (ld->sched.mode != RF_SCHEDULE_BALANCE)
        return 0;
    /* Every image at full scale, on every path: a sample's pixels do not depend on the
     * timing-dependent route (docs/gpu-decode.md, "The scheduler"). */
    if (c->dct_scaling == RF_DCT_SCALING_AUTO)
        c->dct_scaling = RF_DCT_SCALING_OFF;
    rf_sched_init(&ld->sched.ctl);
    atomic_store_explicit(&ld->sched.gpu, ld->sched.ctl.gpu, memory_order_relaxed);
    atomic_store_explicit(&ld->sched.hw, 0, memory_order_relaxed);
    return 0;
}

static void *opener_main(void *arg)
{
    rf_loader *ld = arg;
    rf_err e = {0};
    int rc = 0;
    if (ld->bops->engine_open) {
        rc = ld->bops->engine_open(ld->backend, ld->batch, &e);
    } else { /* the host stand-in (test hook): engines that take this long to open */
        uint64_t ns = (uint64_t)ld->hooks.sched_open_ms * 1000000u;
        nanosleep(&(struct timespec){(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)},
                  NULL);
    }
    if (rc)
        snprintf(ld->sched.engine_why, sizeof ld->sched.engine_why, "%s", e.msg);
    /* release: the backend's engine state, and engine_why, to whoever acquires READY/NONE */
    atomic_store_explicit(&ld->sched.engines, rc ? RF_HW_ENGINES_NONE : RF_HW_ENGINES_READY,
                          memory_order_release);
    return NULL;
}

/* create, after the backend's (and after its engine_open with hw_decode_percent): with
 * BALANCE, the engines open on their own thread, beside
 * the first batches (nvJPEG's hardware backend takes ~100 ms to start). A backend without
 * engines, or the test hook's sched_no_engines, leaves them out; so does a failed open. */
void pl_sched_start(rf_loader *ld)
{
    /* MANUAL with hw_decode_percent: create opened them itself (or failed), so they are ready
     * (on the host, the stand-in); relaxed: only rf_stats reads it in this mode. */
    if (ld->sched.mode == RF_SCHEDULE_MANUAL && ld->cfg.hw_decode_percent)
        atomic_store_explicit(&ld->sched.engines, RF_HW_ENGINES_READY, memory_order_relaxed);
    if (ld->sched.mode != RF_SCHEDULE_BALANCE)
        return;
    int device = ld->bops->device_kind == RF_DEVICE_CUDA;
    if ((device && !ld->bops->engine_open) || (!device && ld->hooks.sched_no_engines)) {
        snprintf(ld->sched.engine_why, sizeof ld->sched.engine_why, "the %s backend has no "
                 "hardware JPEG decoder", ld->bops->name);
        return; /* engines stay NONE (0, calloc) */
    }
    atomic_store_explicit(&ld->sched.engines, RF_HW_ENGINES_OPENING, memory_order_relaxed);
    if (pthread_create(&ld->sched.opener, NULL, opener_main, ld) == 0) {
        ld->sched.opener_on = 1;
        return;
    }
    snprintf(ld->sched.engine_why, sizeof ld->sched.engine_why, "no thread to open them");
    atomic_store_explicit(&ld->sched.engines, RF_HW_ENGINES_NONE, memory_order_relaxed);
}

/* destroy: the opener is joined whatever its state (an open in progress finishes first). */
void pl_sched_stop(rf_loader *ld)
{
    if (ld->sched.opener_on)
        pthread_join(ld->sched.opener, NULL);
    ld->sched.opener_on = 0;
}

/* Where one JPEG goes. MANUAL: the seeded split of gpu_decode_percent and hw_decode_percent
 * (the lowest percentiles to the engines, the next to the kernels). BALANCE: the same
 * percentile against the controller's shares, engines first, and only once they are ready. */
int pl_sched_route(rf_loader *ld, uint64_t aug_seed)
{
    uint32_t pc = rf_plan_gpu_percentile(aug_seed);
    if (ld->sched.mode != RF_SCHEDULE_BALANCE) {
        uint32_t hw = ld->cfg.hw_decode_percent;
        if (pc < hw)
            return PL_ROUTE_ENGINE;
        return ld->cfg.gpu_decode && pc - hw < ld->cfg.gpu_decode_percent ? PL_ROUTE_KERNELS
                                                                           : PL_ROUTE_CPU;
    }
    uint32_t at = pc * 10 + 5; /* the percentile's middle, in permille */
    if (at < atomic_load_explicit(&ld->sched.hw, memory_order_relaxed) &&
        atomic_load_explicit(&ld->sched.engines, memory_order_acquire) == RF_HW_ENGINES_READY)
        return PL_ROUTE_ENGINE;
    return at < atomic_load_explicit(&ld->sched.gpu, memory_order_relaxed) ? PL_ROUTE_KERNELS
                                                                            : PL_ROUTE_CPU;
}

/* The consumer was handed batch s after waiting wait_ns for it and gpu_wait_ns for its GPU
 * work: one controller step, then the test hook's perturbation, then the new shares. */
void pl_sched_batch(rf_loader *ld, slot *s, uint64_t wait_ns, uint64_t gpu_wait_ns)
{
    if (ld->sched.mode != RF_SCHEDULE_BALANCE)
        return;
    uint64_t now = rf_now_ns();
    rf_sched_in in = {.depth = ld->depth, .waited = wait_ns > PL_SCHED_WAITED_NS,
                      .gpu_wait_ns = gpu_wait_ns,
                      .period_ns = ld->sched.last_ns ? now - ld->sched.last_ns : 0};
    ld->sched.last_ns = now;
    /* relaxed: the state is a signal for the shares; route() acquires it before any use */
    in.engines = atomic_load_explicit(&ld->sched.engines, memory_order_relaxed);
    /* relaxed, like pl_gpu_batch_desc's reads: the batch's samples are all in */
    in.engine_samples = ld->gpu.device
                            ? atomic_load_explicit(&s->gpu.engine, memory_order_relaxed) : 0;
    pl_lock(ld);
    for (uint32_t i = 0; i < ld->depth; i++)
        in.ready += ld->slots[i].state == SLOT_READY;
    pl_unlock(ld);
    rf_sched *c = &ld->sched.ctl;
    rf_sched_step(c, &in);
    if (ld->hooks.sched_perturb) { /* tests: decisions that move with time, within bounds */
        ld->hooks.sched_perturb(ld->hooks.sched_ctx, s->seq, &c->gpu, &c->hw);
        c->gpu = RF_MIN(c->gpu, RF_SCHED_ONE);
        c->hw = RF_MIN(c->hw, c->gpu);
    }
    atomic_store_explicit(&ld->sched.gpu, c->gpu, memory_order_relaxed);
    atomic_store_explicit(&ld->sched.hw, c->hw, memory_order_relaxed);
}
