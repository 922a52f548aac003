/* gpu_schedule.c — the GPU decode stage's scheduler (gpu_decode.h, over schedule.h's
 * controller). choose and start run at create, stop at destroy; pl_sched_batch on the stage's
 * thread without mu (the window and the controller are its own); pl_sched_route on the decode
 * threads without mu. Memory orders: pl_sched in gpu_decode.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pipeline/gpu_decode.h"

/* The consumer waited for its batch when its wait (mu and all) took longer than this. */
#define PL_SCHED_WAITED_NS 100000u

/* The test hook `sched` lets the host backend run BALANCE (packets decoded on the decode
 * threads, engine packets by the host stand-in). */
int pl_sched_choose(pl_gpu *g, rf_config *c, rf_err *err)
{
    const rf_test_hooks *h = &g->core->hooks;
    const pl_backend *be = g->backend;
    int device = be->ops->device_kind == RF_DEVICE_CUDA;
    const char *no = c->naive ? "the naive baseline"
                     : c->sample_hook ? "a sample_hook"
                     : c->source == RF_SOURCE_TOKENS ? "a token source"
                     : c->batch_size > RF_GJ_MAX_BATCH ? "batches of more than 65,535 samples"
                     : NULL;
    /* AUTO is BALANCE on the CUDA backend (or the host with the test hook), with the GPU
     * paths' prefetch_depth when that was AUTO too; the CPU elsewhere and where BALANCE
     * cannot run. */
    if (c->decode_schedule == RF_SCHEDULE_AUTO) {
        c->decode_schedule = (device || h->sched) && !no ? RF_SCHEDULE_BALANCE
                                                         : RF_SCHEDULE_CPU;
        if (c->decode_schedule == RF_SCHEDULE_BALANCE && g->ring->depth_auto)
            c->prefetch_depth = g->ring->depth = PL_DEPTH_GPU;
    } else if (c->decode_schedule == RF_SCHEDULE_BALANCE && !device && !h->sched)
        return rf_seterr(err, RF_EINVAL, "decode_schedule BALANCE needs the CUDA backend; the "
                         "%s backend decodes on the CPU", be->ops->name);
    else if (c->decode_schedule == RF_SCHEDULE_BALANCE && no)
        return rf_seterr(err, RF_EINVAL, "decode_schedule BALANCE does not run with %s", no);
    g->sched.mode = c->decode_schedule;
    /* The GPU paths decode at full scale: so must every other image of their run, or a
     * sample's pixels would depend on where it went (docs/gpu-decode.md). Only AUTO is
     * resolved; ON keeps the crops the CPU scales on the CPU (rf_decode_placed). */
    if ((c->gpu_decode || c->hw_decode_percent || g->sched.mode == RF_SCHEDULE_BALANCE) &&
        c->dct_scaling == RF_DCT_SCALING_AUTO)
        c->dct_scaling = RF_DCT_SCALING_OFF;
    if (g->sched.mode != RF_SCHEDULE_BALANCE)
        return 0;
    g->sched.trace = getenv("RINGFEED_SCHED_TRACE") && *getenv("RINGFEED_SCHED_TRACE") &&
                     strcmp(getenv("RINGFEED_SCHED_TRACE"), "0") != 0;
    rf_sched_init(&g->sched.ctl);
    /* The ring's first fill goes to the kernels: no training step runs yet, so the GPU is
     * idle. The first batch handed out publishes the controller's shares; the fill's batches
     * are not measured. */
    atomic_store_explicit(&g->sched.gpu, RF_SCHED_ONE, memory_order_relaxed);
    atomic_store_explicit(&g->sched.hw, 0, memory_order_relaxed);
    return 0;
}

static void *opener_main(void *arg)
{
    pl_gpu *g = arg;
    const pl_backend *be = g->backend;
    rf_err e = {0};
    int rc = 0;
    uint64_t t0 = rf_now_ns();
    if (be->ops->engine_open) {
        rc = be->ops->engine_open(be->b, g->ring->batch, &e);
    } else { /* the host stand-in (test hook): engines that take this long to open */
        uint64_t ns = (uint64_t)g->core->hooks.sched_open_ms * 1000000u;
        nanosleep(&(struct timespec){(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)},
                  NULL);
    }
    if (rc)
        snprintf(g->sched.engine_why, sizeof g->sched.engine_why, "%s", e.msg);
    else /* relaxed: a statistic */
        atomic_store_explicit(&g->sched.open_ns, rf_now_ns() - t0, memory_order_relaxed);
    /* release: the backend's engine state, and engine_why, to whoever acquires READY/NONE */
    atomic_store_explicit(&g->sched.engines, rc ? RF_HW_ENGINES_NONE : RF_HW_ENGINES_READY,
                          memory_order_release);
    return NULL;
}

/* The opener starts after the first batch is handed out (hw_decode_percent) or once the GPU
 * share needs the engines (BALANCE), never at create (but for the test hook
 * sched_open_at_create): the open is slow and delays the batches beside it. */
static void open_engines(pl_gpu *g)
{
    pl_sched *sc = &g->sched;
    sc->open_pending = 0;
    /* relaxed: OPENING is not READY, the only state a decode thread acts on */
    atomic_store_explicit(&sc->engines, RF_HW_ENGINES_OPENING, memory_order_relaxed);
    if (pthread_create(&sc->opener, NULL, opener_main, g) == 0) {
        sc->opener_on = 1;
        rf_thread_name(sc->opener, "rf-hw-open", -1);
        if (g->core->hooks.sched_open_join)
            pl_sched_stop(g);
        return;
    }
    snprintf(sc->engine_why, sizeof sc->engine_why, "no thread to open them");
    /* release: engine_why, to whoever acquires NONE */
    atomic_store_explicit(&sc->engines, RF_HW_ENGINES_NONE, memory_order_release);
}

void pl_sched_stop(pl_gpu *g)
{
    if (g->sched.opener_on)
        pthread_join(g->sched.opener, NULL);
    g->sched.opener_on = 0;
}

/* Until open_engines runs the engines are OPENING (MANUAL) or UNOPENED (BALANCE) and take no
 * sample. A CUDA backend without engines, the test hook's sched_no_engines, or a failed open
 * leaves them NONE. The host stand-in (libjpeg, gpu_place.c) is ready at once, unless the test
 * hook `sched` makes it play the device's engines, which open after sched_open_ms. */
void pl_sched_start(pl_gpu *g)
{
    const rf_test_hooks *h = &g->core->hooks;
    const pl_backend *be = g->backend;
    pl_sched *sc = &g->sched;
    if (sc->mode != RF_SCHEDULE_BALANCE && !(sc->mode == RF_SCHEDULE_MANUAL && g->hw_percent))
        return;
    int device = be->ops->device_kind == RF_DEVICE_CUDA;
    if (!device && !h->sched) { /* MANUAL (BALANCE needs the hook on the host) */
        /* relaxed: no decode thread exists yet; their creation orders it */
        atomic_store_explicit(&sc->engines, RF_HW_ENGINES_READY, memory_order_relaxed);
        return;
    }
    if ((device && !be->ops->engine_open) || (!device && h->sched_no_engines)) {
        snprintf(sc->engine_why, sizeof sc->engine_why, "the %s backend has no hardware JPEG "
                 "decoder", be->ops->name);
        return; /* engines stay NONE (0, calloc) */
    }
    int manual = sc->mode == RF_SCHEDULE_MANUAL;
    atomic_store_explicit(&sc->engines, manual ? RF_HW_ENGINES_OPENING : RF_HW_ENGINES_UNOPENED,
                          memory_order_relaxed);
    sc->open_pending = manual; /* MANUAL: once the first batch is handed out */
    if (h->sched_open_at_create) { /* tests of the engines' decoding itself */
        open_engines(g);
        pl_sched_stop(g);
    }
}

/* acquire: the backend's engine state the opener published with READY */
static int engines_ready(pl_gpu *g)
{
    return atomic_load_explicit(&g->sched.engines, memory_order_acquire) ==
           RF_HW_ENGINES_READY;
}

/* MANUAL: the seeded split of hw_decode_percent (lowest percentiles, the engines) and
 * gpu_decode_percent (next, the kernels); while the engines are not ready their percentiles
 * go to the kernels with gpu_decode, else the CPU. BALANCE: the same percentile against the
 * controller's shares, engines first once ready. Every path gives the same pixels, up to the
 * engines' IDCT rounding. */
int pl_sched_route(pl_gpu *g, uint64_t aug_seed)
{
    uint32_t pc = rf_plan_gpu_percentile(aug_seed);
    if (g->sched.mode != RF_SCHEDULE_BALANCE) {
        uint32_t hw = g->hw_percent;
        if (pc < hw)
            return engines_ready(g) ? PL_ROUTE_ENGINE
                   : g->gpu_decode   ? PL_ROUTE_KERNELS
                                     : PL_ROUTE_CPU;
        return g->gpu_decode && pc - hw < g->gpu_percent ? PL_ROUTE_KERNELS : PL_ROUTE_CPU;
    }
    uint32_t at = pc * 10 + 5; /* the percentile's middle, in permille */
    if (at < atomic_load_explicit(&g->sched.hw, memory_order_relaxed) && engines_ready(g))
        return PL_ROUTE_ENGINE;
    return at < atomic_load_explicit(&g->sched.gpu, memory_order_relaxed) ? PL_ROUTE_KERNELS
                                                                           : PL_ROUTE_CPU;
}

/* One batch into the window: its period (from the batch before it) and whether the consumer
 * waited for it. */
static void measure(pl_gpu *g, uint64_t now, uint64_t wait_ns)
{
    pl_sched *sc = &g->sched;
    uint64_t last = sc->last_ns;
    sc->last_ns = now;
    if (!last) { /* the first batch: the ring was filled before the consumer came, and the
                  * next depth batches come out of it faster than the loader makes them */
        sc->skip = g->ring->depth;
        return;
    }
    if (sc->skip) { /* the ring still holds batches of the old shares */
        sc->skip--;
        return;
    }
    rf_sched_in *w = &sc->win;
    w->period_ns += now - last;
    w->wait_ns += wait_ns;
    w->batches++;
    w->waited += wait_ns > PL_SCHED_WAITED_NS;
}

/* With BALANCE the batch joins the window; a full window is one controller step. After a
 * change of the shares the next depth + 1 batches are not measured: they were decoded (or
 * began) under the old shares. */
void pl_sched_batch(pl_gpu *g, const pl_handout *ho)
{
    pl_sched *sc = &g->sched;
    const rf_test_hooks *h = &g->core->hooks;
    if (sc->open_pending) /* MANUAL with hw_decode_percent */
        open_engines(g);
    if (sc->mode != RF_SCHEDULE_BALANCE)
        return;
    measure(g, ho->at_ns, ho->wait_ns);
    rf_sched *c = &sc->ctl;
    rf_sched_in *w = &sc->win;
    if (rf_sched_window_full(w, sc->steps == 0, h->sched_short_windows)) {
        uint32_t gpu = c->gpu, hw = c->hw;
        sc->steps++;
        w->period_ns /= w->batches;
        /* relaxed: the state is a signal for the shares; route() acquires it before any use.
         * Unopened engines are, to the controller, engines not ready yet: their open starting
         * is no change of the plant (rf_sched_step re-measures on one). */
        w->engines = atomic_load_explicit(&sc->engines, memory_order_relaxed);
        if (w->engines == RF_HW_ENGINES_UNOPENED)
            w->engines = RF_HW_ENGINES_OPENING;
        rf_sched_step(c, w);
        if (sc->trace) /* RINGFEED_SCHED_TRACE: one line per step (docs/gpu-decode.md) */
            fprintf(stderr, "ringfeed sched: period %.3f ms, waited %u/%u, engines %u -> gpu %u "
                    "hw %u permille\n", w->period_ns / 1e6, w->waited, w->batches, w->engines,
                    c->gpu, c->hw);
        *w = (rf_sched_in){0};
        if (c->gpu != gpu || c->hw != hw)
            sc->skip = g->ring->depth + 1;
    }
    if (h->sched_perturb) { /* tests: decisions that move with time, within bounds */
        h->sched_perturb(h->sched_ctx, ho->seq, &c->gpu, &c->hw);
        c->gpu = RF_MIN(c->gpu, RF_SCHED_ONE);
        c->hw = RF_MIN(c->hw, c->gpu);
    }
    atomic_store_explicit(&sc->gpu, c->gpu, memory_order_relaxed);
    atomic_store_explicit(&sc->hw, c->hw, memory_order_relaxed);
    /* The engines open the first time the GPU share reaches RF_SCHED_HW_MIN_GPU, so a loop the
     * CPU keeps fed never pays for their open. Relaxed: only this thread moves the state from
     * UNOPENED. */
    if (c->gpu >= RF_SCHED_HW_MIN_GPU &&
        atomic_load_explicit(&sc->engines, memory_order_relaxed) == RF_HW_ENGINES_UNOPENED)
        open_engines(g);
}
