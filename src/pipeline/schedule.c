/* schedule.c — the decode scheduler (rf_config.decode_schedule; schedule.h): the controller
 * (rf_sched_step, a pure function), the mode resolved at create (pl_sched_choose), the
 * engines' opener thread (pl_sched_start, pl_sched_stop), the route of one sample
 * (pl_sched_route) and the consumer's measurements per batch, a controller step per window
 * (pl_sched_batch).
 *
 * DESIGN
 * choose and start run on the creating thread, stop on destroy's (after the pipeline's threads
 * stopped). The engines open on the opener thread in both modes that use them (BALANCE, and
 * MANUAL with hw_decode_percent). It calls only the backend's engine_open (or, on the host with
 * the test hook, sleeps) and publishes the result with a release store of sched.engines; a decode
 * thread acquires it before it places an engine packet, and the backend's submit of that
 * packet's batch is ordered after the placement by slot.pending's acq_rel. pl_sched_batch runs
 * on the consumer's thread (the window and the controller's state are its own) without mu,
 * and so does the test hook it calls. pl_sched_route runs on the decode threads without mu. The shares are relaxed:
 * any value routes a sample to a path that gives the same pixels. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pipeline/pipeline.h"

/* The consumer waited for its batch when its wait (mu and all) took longer than this. */
#define PL_SCHED_WAITED_NS 100000u

/* The CPU-only start: training stays first until a window shows that the GPU paths make the
 * consumer faster. The engines' part starts inside the plateau the manual measurements found
 * on the H200 (docs/gpu-decode.md: 25% to 35% of the JPEGs on the engines, the rest of the
 * GPU share on the kernels, within 2% of each other; 45% was 14% slower), with probes of
 * RF_SCHED_STEP_PROBE: a first probe of the GPU share's size would leave that plateau. */
void rf_sched_init(rf_sched *s)
{
    *s = (rf_sched){.at = {0, RF_SCHED_HW_START},
                    .step = {RF_SCHED_STEP_START, RF_SCHED_STEP_PROBE}, .dir = {1, 1}};
}

/* Coordinate c's margin and largest step. The GPU share moves images between a full CPU
 * decode and the kernels' entropy walk, which costs the CPU a third as much: a step of it
 * changes the period by far more than a window's noise. The engines' part moves images
 * between the walk and the engines, a gain of a few percent inside a wide plateau, against
 * the noise of 250 ms windows on the H200 (a standard deviation of 3% at a fixed split):
 * steps of 250 permille on a 2% margin took noise for gains there and walked the split out
 * of the plateau (to 600 and 850 permille, 20% slower). */
static uint32_t margin(uint32_t c)
{
    return c ? RF_SCHED_MARGIN_HW : RF_SCHED_MARGIN;
}

static uint32_t step_max(uint32_t c)
{
    return c ? RF_SCHED_STEP_MAX_HW : RF_SCHED_STEP_MAX;
}

/* The shares the decode threads route by: the accepted point, or the probe. */
static void publish(rf_sched *s)
{
    uint32_t gpu = s->at[0], part = s->at[1];
    if (s->probing)
        *(s->coord ? &part : &gpu) = s->probe;
    s->gpu = gpu;
    s->hw = s->engines == RF_HW_ENGINES_READY && gpu >= RF_SCHED_HW_MIN_GPU
                ? gpu * part / RF_SCHED_ONE : 0;
}

/* The engines' part means something only while they are ready and the GPU share is at least
 * RF_SCHED_HW_MIN_GPU. Below it the GPU share is a training loop's top-up, which the kernels
 * take: a batch with engine images pays a blocking nvJPEG call and slows a training step on
 * the same GPU far more per image than the kernels (on the H200 ResNet-18 ran at 72-80% of
 * its GPU-bound rate with every image on the engines, 92-93% with every image on the
 * kernels; docs/gpu-decode.md). */
static int coord_usable(const rf_sched *s, uint32_t c)
{
    return c == 0 || (s->engines == RF_HW_ENGINES_READY && s->at[0] >= RF_SCHED_HW_MIN_GPU);
}

/* The step of a probe up from the CPU alone (the start, or after the loader kept up), when
 * the consumer spent less than half its time waiting (a training loop): as large as its
 * waits say the loader is short. A consumer that waited a share f of the window needs the loader 1/(1-f) times
 * faster; an image moved from the CPU to the kernels saves two thirds of its CPU time, so
 * about 1.5 f of the images must move: the step is 2 f, at least RF_SCHED_STEP_PROBE. A loop
 * that waits for 3% of its time probes 64 permille, not a share that slows its step for a
 * whole window (on the H200 the first probe of 1000 cost ResNet-18 2-3% of a 300-step run).
 * A loop that mostly waits (loading) keeps the climb's own step, all GPU at once; a climb
 * from a share above 0 keeps its steps too (sized from the waits there, its probes overshot
 * and the descents after them undershot a training plant's best by 150 permille). */
static void size_step_up(rf_sched *s, const rf_sched_in *in)
{
    uint64_t span = in->period_ns * in->batches;
    uint64_t f = span ? RF_MIN(in->wait_ns, span) * RF_SCHED_ONE / span : RF_SCHED_ONE;
    if (s->dir[0] < 0 || s->at[0] != 0 || 2 * f >= RF_SCHED_ONE)
        return;
    s->step[0] = (uint32_t)RF_MAX(2 * f, (uint64_t)RF_SCHED_STEP_PROBE);
}

/* Coordinate c moved by its step in its direction, within the range; 0 when it cannot move
 * that way (at the bound it points to, or the engines' part while it means nothing). */
static int probe(rf_sched *s, uint32_t c)
{
    int64_t to = (int64_t)s->at[c] + s->dir[c] * (int64_t)s->step[c];
    to = to < 0 ? 0 : to > RF_SCHED_ONE ? RF_SCHED_ONE : to;
    if ((uint32_t)to == s->at[c] || !coord_usable(s, c))
        return 0;
    s->coord = c, s->probe = (uint32_t)to, s->probing = 1;
    return 1;
}

/* After a probe that gained nothing: the other direction, at the same step. */
static int probe_other_way(rf_sched *s)
{
    if (s->tried)
        return 0;
    s->tried = 1;
    s->dir[s->coord] = -s->dir[s->coord];
    return probe(s, s->coord);
}

/* A round of coordinate c: probes from the accepted point, starting with a step that can
 * show a gradient above the noise, either way. */
static int start_round(rf_sched *s, uint32_t c)
{
    s->step[c] = RF_MAX(s->step[c], RF_SCHED_STEP_PROBE);
    s->tried = 0;
    s->coord = c;
    return probe(s, c) || probe_other_way(s);
}

/* The next hold: RF_SCHED_HOLD windows for the first two in a row whose probes found no
 * gain (the first follows the climb, whose steps are still large), then twice as long each
 * time, to RF_SCHED_HOLD << RF_SCHED_HOLD_DOUBLINGS. */
static uint32_t hold_length(rf_sched *s)
{
    uint32_t k = s->holds ? s->holds - 1 : 0;
    s->holds = RF_MIN(s->holds + 1, RF_SCHED_HOLD_DOUBLINGS + 1);
    return RF_SCHED_HOLD << RF_MIN(k, RF_SCHED_HOLD_DOUBLINGS);
}

/* Coordinate `coord` gained nothing this round: the other one's turn, or, when both gained
 * nothing in a row, a hold at the accepted point. Each probe costs a window off the best
 * point, so a point whose probes found nothing several holds in a row is held longer (16,
 * 32, then 64 windows): on the H200's photo crops the probes of a settled split cost a few
 * percent of a loading run. A loader that starts keeping up is noticed at the next window
 * whatever the hold (rf_sched_step), and an accepted probe or a change of the engines' state
 * starts the doubling over. */
static void end_round(rf_sched *s)
{
    s->probing = 0;
    if (++s->quiet < 2 && start_round(s, s->coord ^ 1))
        return;
    s->quiet = 0; /* (the other coordinate could not move either) */
    s->coord ^= 1;
    s->hold = hold_length(s);
}

/* The probe measured `p` against the accepted point's ref_ns. Faster: accepted, and the next
 * probe goes the same way with twice the step. Slower: the other way with half the step,
 * until the step is below its minimum. Either way, a probe that cannot go on in its new
 * direction (a bound) ends the round: the other way was just measured slower (on the H200,
 * the GPU share at 1000 probed 750, 875, 938 and 969 after it, each a slow window). Within
 * the margin: the other way at the same step,
 * and if that is within the margin too, the point stays and the next round of this
 * coordinate starts with twice the step (a gradient too small for the margin at one step
 * shows at a larger one). */
static void judge(rf_sched *s, uint64_t p)
{
    uint32_t c = s->coord;
    s->probing = 0;
    if (p * RF_SCHED_ONE < s->ref_ns * (RF_SCHED_ONE - margin(c))) {
        s->at[c] = s->probe, s->ref_ns = p, s->quiet = 0, s->tried = 0, s->holds = 0;
        s->step[c] = RF_MIN(s->step[c] * 2, step_max(c));
        if (!probe(s, c)) {
            /* at a bound: a later probe back from it asks whether a little less is better,
             * not whether half as much is (the GPU share's 500 from 1000 took a batch twice
             * as long on the H200) */
            s->step[c] = RF_SCHED_STEP_PROBE;
            end_round(s);
        }
    } else if (p * RF_SCHED_ONE > s->ref_ns * (RF_SCHED_ONE + margin(c))) {
        s->dir[c] = -s->dir[c], s->step[c] /= 2, s->tried = 0;
        if (s->step[c] < RF_SCHED_STEP_MIN || !probe(s, c))
            s->step[c] = RF_MAX(s->step[c], RF_SCHED_STEP_MIN), end_round(s);
    } else if (!probe_other_way(s)) {
        /* flat both ways at this step: the next round looks further */
        s->step[c] = RF_MIN(s->step[c] * 2, step_max(c));
        end_round(s);
    }
}

/* The loader keeps up: the consumer waited for at most one batch in RF_SCHED_KEEPS_UP, or its
 * waits came to at most RF_SCHED_MARGIN of the window. Removing waits that small cannot make
 * the loop faster by more than the margin a probe is judged by, so a probe could only cost:
 * on the H200 ResNet-18 waited for 0.3% of its time, on 3-5 of every 16 batches, and its
 * runs with a 64-permille probe among their 400 measured steps trained at 96.2-96.8% of the
 * GPU-bound rate, the one without at 99.0% (the CPU schedule 98.7-99.9%, same call). */
static int keeps_up(const rf_sched_in *in)
{
    uint64_t span = in->period_ns * in->batches;
    return in->waited * RF_SCHED_KEEPS_UP <= in->batches ||
           in->wait_ns * RF_SCHED_ONE <= span * RF_SCHED_MARGIN;
}

void rf_sched_step(rf_sched *s, const rf_sched_in *in)
{
    if (!in->batches || !in->period_ns)
        return;
    if (in->engines != s->engines) {
        /* The plant changed under the measurement: re-measure the accepted point. A window
         * measured under a probe says nothing of it, and taken as its period it made the
         * next probe (the same shares) look flat: on the H200 the climb then held the CPU
         * alone for 16 windows while the consumer waited for every batch. */
        int probed = s->probing;
        s->engines = in->engines, s->ref_ns = 0, s->probing = 0, s->hold = 0, s->holds = 0;
        /* what changed is the engines' part's worth: the next round probes it first (on the
         * H200 a probe of the GPU share back from 1000 was the slowest window of a run) */
        s->coord = 1;
        if (probed) {
            publish(s);
            return;
        }
    }
    if (keeps_up(in)) {
        /* Training stays first: the loader keeps up (keeps_up), so no GPU share can make the
         * loop faster by more than the margin, and any share takes GPU time from the step.
         * The GPU share routed in this window steps down: the first window after
         * loader-bound ones by half the step, so the climb and the descent close in on the
         * share at which the loader just keeps up, and each next one in a row by twice the
         * step, so a loop that stopped needing the GPU gets it back within a few windows. At 0
         * nothing is probed until the consumer waits again, and the next climb starts
         * upwards. */
        uint32_t base = s->probing && s->coord == 0 ? s->probe : s->at[0];
        /* A probe up that made the loader keep up without making the loop faster by more
         * than the margin: the GPU share costs the step about what the waits it saved did,
         * or more. The descent starts from the accepted point, and no probe comes for a
         * hold (hold_length), so a loader that only now and then falls behind does not pay
         * a slow window every few. */
        int no_gain = s->probing && s->coord == 0 && s->probe > s->at[0] && s->ref_ns &&
                      in->period_ns * RF_SCHED_ONE >= s->ref_ns * (RF_SCHED_ONE - RF_SCHED_MARGIN);
        if (no_gain)
            base = s->at[0];
        if (base > 0)
            s->step[0] = s->kept_up ? RF_MIN(s->step[0] * 2, RF_SCHED_STEP_MAX)
                                    : RF_MAX(s->step[0] / 2, RF_SCHED_STEP_MIN);
        else if (no_gain) /* up from the CPU alone: the next probe smaller, and later */
            s->step[0] = RF_MAX(s->step[0] / 2, RF_SCHED_STEP_PROBE);
        s->at[0] = base > s->step[0] ? base - s->step[0] : 0;
        s->kept_up = 1, s->dir[0] = 1, s->probing = 0, s->ref_ns = 0, s->coord = 0;
        if (no_gain)
            s->hold = hold_length(s);
        else
            s->holds = 0;
    } else if (s->hold && --s->hold) {
        /* held: the accepted point stays */
    } else if (!s->ref_ns || !s->probing) {
        s->kept_up = 0;
        s->ref_ns = in->period_ns; /* the accepted point measured (again): probe from it */
        s->quiet = 0;
        size_step_up(s, in);
        if (!start_round(s, s->coord))
            end_round(s);
    } else {
        judge(s, in->period_ns);
    }
    publish(s);
}

int rf_sched_window_full(const rf_sched_in *w, int first, int short_windows)
{
    if (first && w->batches >= RF_SCHED_WINDOW_START && w->waited == w->batches &&
        2 * w->wait_ns >= w->period_ns)
        return 1;
    return w->batches >= RF_SCHED_WINDOW &&
           (w->period_ns >= RF_SCHED_WINDOW_NS || w->batches >= 8 * RF_SCHED_WINDOW ||
            short_windows);
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
                     : c->batch_size > RF_GJ_MAX_BATCH ? "batches of more than 65,535 samples"
                     : NULL;
    /* AUTO is BALANCE on the CUDA backend (the test hook makes it so on the host, so the
     * scheduler's pipeline runs in CI), with the GPU paths' prefetch_depth when that was
     * AUTO too (config_resolve gave it the CPU's before the backend was known); the CPU
     * elsewhere and where BALANCE cannot run. */
    if (c->decode_schedule == RF_SCHEDULE_AUTO) {
        c->decode_schedule = (device || ld->hooks.sched) && !no ? RF_SCHEDULE_BALANCE
                                                                : RF_SCHEDULE_CPU;
        if (c->decode_schedule == RF_SCHEDULE_BALANCE && ld->depth_auto)
            c->prefetch_depth = ld->depth = PL_DEPTH_GPU;
    } else if (c->decode_schedule == RF_SCHEDULE_BALANCE && !device && !ld->hooks.sched)
        return rf_seterr(err, RF_EINVAL, "decode_schedule BALANCE needs the CUDA backend; the "
                         "%s backend decodes on the CPU", ld->bops->name);
    else if (c->decode_schedule == RF_SCHEDULE_BALANCE && no)
        return rf_seterr(err, RF_EINVAL, "decode_schedule BALANCE does not run with %s", no);
    ld->sched.mode = c->decode_schedule;
    /* The GPU paths decode at full scale: so must every other image of their run, or a
     * sample's pixels would depend on where it went (docs/gpu-decode.md). Only AUTO is
     * resolved (a value out of range was refused); ON keeps the crops the CPU scales on the
     * CPU (rf_decode_placed), which under BALANCE kept 11% of the H200's photo crops off the
     * GPU paths and cost it 14% of its rate ("The scheduler"). */
    if ((c->gpu_decode || c->hw_decode_percent || ld->sched.mode == RF_SCHEDULE_BALANCE) &&
        c->dct_scaling == RF_DCT_SCALING_AUTO)
        c->dct_scaling = RF_DCT_SCALING_OFF;
    if (ld->sched.mode != RF_SCHEDULE_BALANCE)
        return 0;
    ld->sched.trace = getenv("RINGFEED_SCHED_TRACE") && *getenv("RINGFEED_SCHED_TRACE") &&
                      strcmp(getenv("RINGFEED_SCHED_TRACE"), "0") != 0;
    rf_sched_init(&ld->sched.ctl);
    /* The ring's first fill goes to the kernels: no training step runs before the first batch
     * is handed out, so the GPU is idle, and its decode is the fastest path to that batch.
     * The consumer's first batch publishes the controller's shares (pl_sched_batch), and the
     * fill's batches are not measured (measure). */
    atomic_store_explicit(&ld->sched.gpu, RF_SCHED_ONE, memory_order_relaxed);
    atomic_store_explicit(&ld->sched.hw, 0, memory_order_relaxed);
    return 0;
}

static void *opener_main(void *arg)
{
    rf_loader *ld = arg;
    rf_err e = {0};
    int rc = 0;
    uint64_t t0 = rf_now_ns();
    if (ld->bops->engine_open) {
        rc = ld->bops->engine_open(ld->backend, ld->batch, &e);
    } else { /* the host stand-in (test hook): engines that take this long to open */
        uint64_t ns = (uint64_t)ld->hooks.sched_open_ms * 1000000u;
        nanosleep(&(struct timespec){(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)},
                  NULL);
    }
    if (rc)
        snprintf(ld->sched.engine_why, sizeof ld->sched.engine_why, "%s", e.msg);
    else /* relaxed: a statistic */
        atomic_store_explicit(&ld->sched.open_ns, rf_now_ns() - t0, memory_order_relaxed);
    /* release: the backend's engine state, and engine_why, to whoever acquires READY/NONE */
    atomic_store_explicit(&ld->sched.engines, rc ? RF_HW_ENGINES_NONE : RF_HW_ENGINES_READY,
                          memory_order_release);
    return NULL;
}

/* The consumer's thread, when it is handed the first batch with hw_decode_percent, or with
 * BALANCE the first batch after which the GPU share needs the engines (pl_sched_batch); or
 * create's, with the test hook sched_open_at_create: the opener starts now, not at create.
 * nvJPEG's hardware backend takes ~1 s to open on the H200, and opened beside the first batch
 * it delayed that batch from ~25 ms to 64-122 ms (driver work the first copies and kernels
 * waited behind); after it, it overlaps the next CPU- and kernel-decoded ones. */
static void open_engines(rf_loader *ld)
{
    ld->sched.open_pending = 0;
    /* relaxed: OPENING is not READY, the only state a decode thread acts on */
    atomic_store_explicit(&ld->sched.engines, RF_HW_ENGINES_OPENING, memory_order_relaxed);
    if (pthread_create(&ld->sched.opener, NULL, opener_main, ld) == 0) {
        ld->sched.opener_on = 1;
        rf_thread_name(ld->sched.opener, "rf-hw-open", -1);
        if (ld->hooks.sched_open_join)
            pl_sched_stop(ld);
        return;
    }
    snprintf(ld->sched.engine_why, sizeof ld->sched.engine_why, "no thread to open them");
    /* release: engine_why, to whoever acquires NONE */
    atomic_store_explicit(&ld->sched.engines, RF_HW_ENGINES_NONE, memory_order_release);
}

/* destroy: the opener is joined whatever its state (an open in progress finishes first). */
void pl_sched_stop(rf_loader *ld)
{
    if (ld->sched.opener_on)
        pthread_join(ld->sched.opener, NULL);
    ld->sched.opener_on = 0;
}

/* create, after the backend's: in the modes that use the engines (BALANCE, and MANUAL with
 * hw_decode_percent) they will open on their own thread (open_engines), started with MANUAL
 * when the first batch is handed out, and with BALANCE once its GPU share needs them
 * (pl_sched_batch); until then they are OPENING (MANUAL) or UNOPENED (BALANCE) and take no
 * sample (pl_sched_route). A CUDA backend without engines, or the test hook's
 * sched_no_engines, leaves them out (NONE); so does a failed open. The host backend's
 * stand-in for them (libjpeg, gpu_place.c) has nothing to open and is ready at once, unless
 * the test hook `sched` makes it play the device's engines, which open after sched_open_ms. */
void pl_sched_start(rf_loader *ld)
{
    if (ld->sched.mode != RF_SCHEDULE_BALANCE &&
        !(ld->sched.mode == RF_SCHEDULE_MANUAL && ld->cfg.hw_decode_percent))
        return;
    int device = ld->bops->device_kind == RF_DEVICE_CUDA;
    if (!device && !ld->hooks.sched) { /* MANUAL (BALANCE needs the hook on the host) */
        /* relaxed: no decode thread exists yet; their creation orders it */
        atomic_store_explicit(&ld->sched.engines, RF_HW_ENGINES_READY, memory_order_relaxed);
        return;
    }
    if ((device && !ld->bops->engine_open) || (!device && ld->hooks.sched_no_engines)) {
        snprintf(ld->sched.engine_why, sizeof ld->sched.engine_why, "the %s backend has no "
                 "hardware JPEG decoder", ld->bops->name);
        return; /* engines stay NONE (0, calloc) */
    }
    int manual = ld->sched.mode == RF_SCHEDULE_MANUAL;
    atomic_store_explicit(&ld->sched.engines,
                          manual ? RF_HW_ENGINES_OPENING : RF_HW_ENGINES_UNOPENED,
                          memory_order_relaxed);
    ld->sched.open_pending = manual; /* MANUAL: once the first batch is handed out */
    if (ld->hooks.sched_open_at_create) { /* tests of the engines' decoding itself */
        open_engines(ld);
        pl_sched_stop(ld);
    }
}

/* acquire: the backend's engine state the opener published with READY */
static int engines_ready(rf_loader *ld)
{
    return atomic_load_explicit(&ld->sched.engines, memory_order_acquire) ==
           RF_HW_ENGINES_READY;
}

/* Where one JPEG goes. MANUAL: the seeded split of gpu_decode_percent and hw_decode_percent
 * (the lowest percentiles to the engines, the next to the kernels); the engines' percentiles
 * take the path the split gives the next ones (the kernels with gpu_decode, else the CPU)
 * while the engines are not ready: opening, or for good when they are missing. BALANCE: the
 * same percentile against the controller's shares, engines first, and only once they are
 * ready. Every path gives a sample the same pixels, up to the engines' IDCT rounding
 * (pl_sched_choose's dct_scaling rule). */
int pl_sched_route(rf_loader *ld, uint64_t aug_seed)
{
    uint32_t pc = rf_plan_gpu_percentile(aug_seed);
    if (ld->sched.mode != RF_SCHEDULE_BALANCE) {
        uint32_t hw = ld->cfg.hw_decode_percent;
        if (pc < hw)
            return engines_ready(ld) ? PL_ROUTE_ENGINE
                   : ld->cfg.gpu_decode ? PL_ROUTE_KERNELS
                                        : PL_ROUTE_CPU;
        return ld->cfg.gpu_decode && pc - hw < ld->cfg.gpu_decode_percent ? PL_ROUTE_KERNELS
                                                                           : PL_ROUTE_CPU;
    }
    uint32_t at = pc * 10 + 5; /* the percentile's middle, in permille */
    if (at < atomic_load_explicit(&ld->sched.hw, memory_order_relaxed) && engines_ready(ld))
        return PL_ROUTE_ENGINE;
    return at < atomic_load_explicit(&ld->sched.gpu, memory_order_relaxed) ? PL_ROUTE_KERNELS
                                                                            : PL_ROUTE_CPU;
}

/* One batch into the window: its period (from the batch before it) and whether the consumer
 * waited for it. */
static void measure(rf_loader *ld, uint64_t wait_ns)
{
    uint64_t now = rf_now_ns(), last = ld->sched.last_ns;
    ld->sched.last_ns = now;
    if (!last) { /* the first batch: the ring was filled before the consumer came, and the
                  * next depth batches come out of it faster than the loader makes them */
        ld->sched.skip = ld->depth;
        return;
    }
    if (ld->sched.skip) { /* the ring still holds batches of the old shares */
        ld->sched.skip--;
        return;
    }
    rf_sched_in *w = &ld->sched.win;
    w->period_ns += now - last;
    w->wait_ns += wait_ns;
    w->batches++;
    w->waited += wait_ns > PL_SCHED_WAITED_NS;
}

/* The consumer was handed batch s after waiting wait_ns for it. With hw_decode_percent the
 * first one starts the engines' opener (open_engines). With BALANCE the batch joins the
 * window; a full window is one controller step. After a change of the shares the next
 * depth + 1 batches are not measured: they were decoded (or began) under the old shares. Then
 * the test hook's perturbation, the new shares, and the opener when they are the first to
 * need the engines. */
void pl_sched_batch(rf_loader *ld, slot *s, uint64_t wait_ns)
{
    if (ld->sched.open_pending) /* MANUAL with hw_decode_percent */
        open_engines(ld);
    if (ld->sched.mode != RF_SCHEDULE_BALANCE)
        return;
    measure(ld, wait_ns);
    rf_sched *c = &ld->sched.ctl;
    rf_sched_in *w = &ld->sched.win;
    if (rf_sched_window_full(w, ld->sched.steps == 0, ld->hooks.sched_short_windows)) {
        uint32_t gpu = c->gpu, hw = c->hw;
        ld->sched.steps++;
        w->period_ns /= w->batches;
        /* relaxed: the state is a signal for the shares; route() acquires it before any use.
         * Unopened engines are, to the controller, engines not ready yet: their open starting
         * is no change of the plant (rf_sched_step re-measures on one). */
        w->engines = atomic_load_explicit(&ld->sched.engines, memory_order_relaxed);
        if (w->engines == RF_HW_ENGINES_UNOPENED)
            w->engines = RF_HW_ENGINES_OPENING;
        rf_sched_step(c, w);
        if (ld->sched.trace) /* RINGFEED_SCHED_TRACE: one line per step (docs/gpu-decode.md) */
            fprintf(stderr, "ringfeed sched: period %.3f ms, waited %u/%u, engines %u -> gpu %u "
                    "hw %u permille\n", w->period_ns / 1e6, w->waited, w->batches, w->engines,
                    c->gpu, c->hw);
        *w = (rf_sched_in){0};
        if (c->gpu != gpu || c->hw != hw)
            ld->sched.skip = ld->depth + 1;
    }
    if (ld->hooks.sched_perturb) { /* tests: decisions that move with time, within bounds */
        ld->hooks.sched_perturb(ld->hooks.sched_ctx, s->seq, &c->gpu, &c->hw);
        c->gpu = RF_MIN(c->gpu, RF_SCHED_ONE);
        c->hw = RF_MIN(c->hw, c->gpu);
    }
    atomic_store_explicit(&ld->sched.gpu, c->gpu, memory_order_relaxed);
    atomic_store_explicit(&ld->sched.hw, c->hw, memory_order_relaxed);
    /* The engines take part only from a GPU share of RF_SCHED_HW_MIN_GPU (publish): they open
     * the first time it is reached, and a loop the CPU keeps fed (a training step on the same
     * GPU) never pays for their open. Relaxed: only this thread moves the state from
     * UNOPENED. */
    if (c->gpu >= RF_SCHED_HW_MIN_GPU &&
        atomic_load_explicit(&ld->sched.engines, memory_order_relaxed) == RF_HW_ENGINES_UNOPENED)
        open_engines(ld);
}
