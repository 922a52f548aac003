/* test_schedule.c — the decode scheduler (rf_config.decode_schedule, src/pipeline/schedule.c).
 * The controller as a pure function fed simulated plants (the consumer's period per window as
 * a function of the shares, with noise): from the CPU-only start it climbs to each plant's
 * best split (training: the CPU; loading: the GPU share the CPU needs; with engines: hw 350
 * of gpu 1000) within 40 windows and stays there, follows a plant that changes mid-run,
 * stays within 0..1000 permille with hw <= gpu, gives the engines nothing while they are
 * missing or still opening (and below a GPU share of 500), probes a training loop's share in
 * steps sized from its waits, and gives the GPU share back while the loader keeps up (training
 * stays first). The mode's resolution and refusals at create. And the whole
 * pipeline on the host backend with the balancing scheduler forced on (test hook `sched`,
 * src/pipeline/testing.h: kernel packets decoded by the kernels' host code, engine packets by
 * the host stand-in) while a hook moves the shares from batch to batch: every sample of each
 * epoch exactly once, and every batch byte for byte the CPU run's (with dct_scaling ON, DCT
 * scaling included: a crop the CPU scales stays on the CPU; with AUTO, which BALANCE resolves
 * to OFF, the CPU's full-scale pixels), at 1, 2 and 4 decode threads, on plain shards of the
 * generator, one rewritten by Python's tarfile and a restart-marked one; the ring's first
 * fill on the kernels; and the manual split's engines opening beside the first batches. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/gpujpeg.h"
#include "pipeline/schedule.h"
#include "pipeline/testing.h"
#include "ringfeed.h"
#include "testutil.h"

/* ---- the controller ------------------------------------------------------------------------ */

/* A simulated plant: at the shares (permille), the consumer's mean period (ms), the way the
 * loader's window measures it, and whether the loader is the bound (the consumer waits for
 * every batch) or keeps up (it waits for none). */
typedef double (*plant_fn)(double gpu, double hw, int *bound);

/* The share of its period the consumer waited in the last loop() evaluated. */
static double g_wait_share;

/* The period of a loop whose step takes `step` ms and whose loader needs `loader` ms a batch
 * (the consumer waits for the difference when the loader is the bound). */
static double loop(double step, double loader, int *bound)
{
    *bound = loader > step;
    g_wait_share = *bound ? (loader - step) / loader : 0.0;
    return *bound ? loader : step;
}

/* Training: the step shares the GPU, so every GPU share slows it; the CPU keeps up. */
static double plant_training(double gpu, double hw, int *bound)
{
    (void)hw;
    return loop(30.0 * (1.0 + 0.3 * gpu), 20.0 * (1.0 - gpu) + 8.0 * gpu, bound);
}

/* Training whose CPU decode (30 ms a batch) does not keep up with the step (20 ms, 10% slower
 * with every image on the GPU): the best is the least GPU share at which the loader keeps up,
 * 417 permille. */
static double plant_training_cpu_short(double gpu, double hw, int *bound)
{
    (void)hw;
    double cpu = (1.0 - gpu) * 30.0 + gpu * 8.0, kernels = gpu * 12.0;
    return loop(20.0 * (1.0 + 0.1 * gpu), cpu > kernels ? cpu : kernels, bound);
}

/* Training whose CPU decode falls just behind the step (20.2 ms a batch against 20, waits of
 * 1%): any GPU share makes the loader keep up but slows the step by more than the waits it
 * saves, so the best is the CPU alone, and a probe is a slow window. */
static double plant_training_marginal(double gpu, double hw, int *bound)
{
    (void)hw;
    return loop(20.0 * (1.0 + 0.3 * gpu), 20.2 * (1.0 - gpu) + 8.0 * gpu, bound);
}

/* Further behind (20.5 ms a batch, waits of 2.4%: above the margin) with a step that the GPU
 * share slows more (the kernels' share costs it 3x as much as plant_training's): a probe of
 * 64 permille makes the loader keep up but the step 19% slower, so the CPU alone is best
 * (within 0.4%), but only a probe can tell. */
static double plant_training_behind(double gpu, double hw, int *bound)
{
    (void)hw;
    return loop(20.0 * (1.0 + 3.0 * gpu), 20.5 * (1.0 - gpu) + 8.0 * gpu, bound);
}

/* Loading, no engines: the CPU decode (20 ms a batch) saturates; the kernels' share costs the
 * CPU its entropy walk (8) and the GPU its kernels (12): the best split is gpu 833. */
static double plant_loading(double gpu, double hw, int *bound)
{
    double cpu = (1.0 - gpu) * 20.0 + (gpu - hw) * 8.0, kernels = (gpu - hw) * 12.0;
    return loop(0.0, cpu > kernels ? cpu : kernels, bound);
}

/* Loading with engines (12 ms a batch, off the CPU): the CPU's part (full decodes and the
 * kernels' walks) against the engines'; the best is gpu 1000 with hw 350. */
static double plant_engines(double gpu, double hw, int *bound)
{
    double cpu = (1.0 - gpu) * 20.0 + (gpu - hw) * 6.4615, eng = hw * 12.0;
    return loop(0.0, cpu > eng ? cpu : eng, bound);
}

/* The H200's photo crops (batch 256, 16 CPUs; docs/gpu-decode.md, the manual splits): the
 * CPU decodes a batch in 16 ms, walks it for the kernels in 5.95 ms, the engines take 13.8 ms
 * for a whole batch, and something else (copies, I/O) bounds the loop at 5.2 ms. The best is
 * gpu 1000 with hw anywhere from 126 to 377 permille: a plateau, past which the engines bound
 * the loop (45% was 14% slower). */
static double plant_h200(double gpu, double hw, int *bound)
{
    double cpu = (1.0 - gpu) * 16.0 + (gpu - hw) * 5.95, eng = hw * 13.8;
    double p = cpu > eng ? cpu : eng;
    return loop(0.0, p > 5.2 ? p : 5.2, bound);
}

/* The noise-free period. */
static double period(plant_fn f, double gpu, double hw)
{
    int bound;
    return f(gpu, hw, &bound);
}

static uint64_t g_noise = 1;
static double g_noise_sd = 0.01 / 1.7320508; /* +-1%, uniform */
static int g_noise_terms = 1;

/* One draw, uniform on -1..1. */
static double uniform(void)
{
    g_noise = g_noise * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(g_noise >> 11) / (double)(1ull << 53) * 2.0 - 1.0;
}

/* The plant's period with noise of standard deviation g_noise_sd (a sum of g_noise_terms
 * uniform draws), as one window measures it. */
static rf_sched_in window(plant_fn f, const rf_sched *s, uint32_t engines)
{
    double u = 0;
    for (int i = 0; i < g_noise_terms; i++)
        u += uniform();
    u *= 1.7320508 / __builtin_sqrt((double)g_noise_terms); /* standard deviation 1 */
    int bound;
    double ms = f(s->gpu / 1000.0, s->hw / 1000.0, &bound) * (1.0 + g_noise_sd * u);
    return (rf_sched_in){.period_ns = (uint64_t)(ms * 1e6), .batches = RF_SCHED_WINDOW,
                         .waited = bound ? RF_SCHED_WINDOW : 0, .engines = engines,
                         .wait_ns = (uint64_t)(ms * 1e6 * g_wait_share * RF_SCHED_WINDOW)};
}

/* n windows of plant f; every step within the bounds, the engines' share 0 unless READY.
 * Returns the mean noise-free period over the windows (shares as routed, probes included). */
static double drive(rf_sched *s, plant_fn f, uint32_t engines, int n)
{
    double sum = 0;
    for (int i = 0; i < n; i++) {
        rf_sched_in in = window(f, s, engines);
        rf_sched_step(s, &in);
        ck_assert_uint_le(s->gpu, RF_SCHED_ONE);
        ck_assert_uint_le(s->hw, s->gpu);
        ck_assert_uint_le(s->at[0], RF_SCHED_ONE);
        ck_assert_uint_le(s->at[1], RF_SCHED_ONE);
        if (engines != RF_HW_ENGINES_READY)
            ck_assert_uint_eq(s->hw, 0);
        sum += period(f, s->gpu / 1000.0, s->hw / 1000.0);
    }
    return sum / n;
}

/* The accepted point is within tol permille of (gpu, hw), and the rate over the next 200
 * windows, probes included, within 5% of the plant's best. */
static void assert_stays_near(rf_sched *s, plant_fn f, uint32_t engines, uint32_t gpu,
                              uint32_t hw, uint32_t tol, const char *what)
{
    for (int i = 0; i < 200; i++) {
        drive(s, f, engines, 1);
        uint32_t at_hw = engines == RF_HW_ENGINES_READY ? s->at[0] * s->at[1] / 1000 : 0;
        ck_assert_msg(s->at[0] + tol >= gpu && s->at[0] <= gpu + tol && at_hw + tol >= hw &&
                      at_hw <= hw + tol, "%s, window %d: at gpu %u hw %u, best %u/%u", what,
                      i, s->at[0], at_hw, gpu, hw);
    }
    double best = period(f, gpu / 1000.0, hw / 1000.0), got = drive(s, f, engines, 200);
    ck_assert_msg(got <= best * 1.05, "%s: mean period %.3f ms, best %.3f", what, got, best);
}

/* From the CPU-only start, the climb finds each plant's best split within 40 windows and
 * stays there: training backs off to the CPU, loading takes the GPU share the CPU needs, and
 * with engines the split the manual measurements found best. */
START_TEST(climbs_to_each_plants_best)
{
    rf_sched s;
    rf_sched_init(&s);
    ck_assert_uint_eq(s.gpu + s.hw, 0); /* the safe start: the CPU only */
    drive(&s, plant_training, RF_HW_ENGINES_NONE, 40);
    /* the loader keeps up from the start, so nothing is probed: exactly the CPU */
    assert_stays_near(&s, plant_training, RF_HW_ENGINES_NONE, 0, 0, 0, "training");
    rf_sched_init(&s);
    drive(&s, plant_training_cpu_short, RF_HW_ENGINES_NONE, 40);
    assert_stays_near(&s, plant_training_cpu_short, RF_HW_ENGINES_NONE, 417, 0, 80,
                      "training, the CPU short");
    /* a probe that slows the loop holds the next one off: within 1% of the best over time */
    rf_sched_init(&s);
    drive(&s, plant_training_behind, RF_HW_ENGINES_NONE, 40);
    ck_assert_uint_eq(s.at[0], 0);
    double got = drive(&s, plant_training_behind, RF_HW_ENGINES_NONE, 400);
    ck_assert_msg(got <= 20.5 * 1.01, "training a little behind: mean period %.3f ms", got);
    rf_sched_init(&s);
    drive(&s, plant_loading, RF_HW_ENGINES_NONE, 40);
    assert_stays_near(&s, plant_loading, RF_HW_ENGINES_NONE, 833, 0, 60, "loading");
    rf_sched_init(&s);
    drive(&s, plant_engines, RF_HW_ENGINES_READY, 40);
    assert_stays_near(&s, plant_engines, RF_HW_ENGINES_READY, 1000, 350, 60, "engines");
}
END_TEST

/* The H200's plant with its measured noise (a standard deviation of 3% per window at a fixed
 * split), in 16 runs of other noise: the GPU share reaches the floor's range and the engines'
 * part stays on or near the plateau, so that over 400 windows the loop runs within 3% of the
 * best, probes included. With steps of the GPU share's size (250 permille) for the engines'
 * part too, one lucky window walked the split far past the plateau (the H200's traces: 600
 * and 850 permille, 20% slower). */
START_TEST(stays_on_a_noisy_plateau)
{
    g_noise_sd = 0.03, g_noise_terms = 4;
    for (int run = 0; run < 16; run++) {
        rf_sched s;
        rf_sched_init(&s);
        drive(&s, plant_h200, RF_HW_ENGINES_OPENING, 6);
        drive(&s, plant_h200, RF_HW_ENGINES_READY, 30);
        ck_assert_uint_ge(s.at[0], 875); /* past 872 the floor bounds the loop */
        uint32_t off = 0;
        double got = 0;
        for (int i = 0; i < 400; i++) {
            got += drive(&s, plant_h200, RF_HW_ENGINES_READY, 1) / 400;
            uint32_t hw = s.at[0] * s.at[1] / 1000;
            off += hw < 126 || hw > 377;
        }
        ck_assert_msg(got <= 5.2 * 1.03, "run %d: mean period %.3f ms, best 5.2", run, got);
        ck_assert_msg(off <= 200, "run %d: the accepted split off the plateau in %u of 400 "
                      "windows", run, off);
    }
    g_noise_sd = 0.01 / 1.7320508, g_noise_terms = 1;
}
END_TEST

/* The engines become ready while a probe of the GPU share is measured: that window is not the
 * accepted point's period, so it is dropped and the accepted point measured again; taken as
 * the reference, it made the next probe (the same shares) look flat and held the CPU alone. */
START_TEST(engines_ready_during_a_probe_remeasure)
{
    rf_sched s;
    rf_sched_init(&s);
    rf_sched_in in = window(plant_h200, &s, RF_HW_ENGINES_OPENING);
    rf_sched_step(&s, &in); /* the CPU alone measured: the first probe */
    ck_assert_uint_eq(s.probing, 1);
    ck_assert_uint_gt(s.gpu, 0);
    in = window(plant_h200, &s, RF_HW_ENGINES_READY);
    rf_sched_step(&s, &in);
    ck_assert_uint_eq(s.probing, 0);
    ck_assert_uint_eq(s.gpu, s.at[0]); /* back at the accepted point, to measure it */
    ck_assert_uint_eq(s.ref_ns, 0);
    drive(&s, plant_h200, RF_HW_ENGINES_READY, 12);
    ck_assert_uint_ge(s.at[0], 875);
}
END_TEST

/* The workload changes mid-run (a training step starts sharing the GPU, then a loading-bound
 * phase without engines): the periodic probes notice and the climb follows within 100
 * windows. */
START_TEST(recovers_when_the_plant_changes)
{
    rf_sched s;
    rf_sched_init(&s);
    drive(&s, plant_engines, RF_HW_ENGINES_READY, 60);
    ck_assert_uint_ge(s.at[0], 900);
    drive(&s, plant_training, RF_HW_ENGINES_READY, 100);
    assert_stays_near(&s, plant_training, RF_HW_ENGINES_READY, 0, 0, 70, "to training");
    drive(&s, plant_loading, RF_HW_ENGINES_NONE, 100);
    assert_stays_near(&s, plant_loading, RF_HW_ENGINES_NONE, 833, 0, 60, "to loading");
}
END_TEST

/* Engines missing or still opening get nothing while the GPU share climbs on the kernels;
 * once READY, their part is probed and the split found. */
START_TEST(engines_get_nothing_until_ready)
{
    rf_sched s;
    rf_sched_init(&s);
    for (uint32_t e = RF_HW_ENGINES_NONE; e <= RF_HW_ENGINES_OPENING; e++)
        drive(&s, plant_engines, e, 40); /* drive asserts hw 0 at every step */
    ck_assert_uint_ge(s.at[0], 900); /* the kernels took the GPU share */
    drive(&s, plant_engines, RF_HW_ENGINES_READY, 40);
    assert_stays_near(&s, plant_engines, RF_HW_ENGINES_READY, 1000, 350, 60, "opened");
}
END_TEST

/* A training loop whose waits come to less than the margin (2%) never probes: no share could
 * gain it more than a probe is judged by (on the H200 ResNet-18 waited for 0.3% on a few
 * batches of every window, and its runs with a probe were 2-3% slower than the one without).
 * One that waits for a little more probes a small GPU share first, sized from its waits (on
 * the H200 a first probe of 1000 cost ResNet-18 2-3% of a 300-step run), while a loading
 * run, which mostly waits, goes to 1000 at once; a probe that makes the loader keep up
 * without a gain holds the next one off, each hold in a row longer, so the probes become
 * rarer. The engines take no part below a GPU share of 500 (a training loop's top-up goes to
 * the kernels), even when ready. */
START_TEST(training_probes_small_and_leaves_the_engines_out)
{
    rf_sched s;
    rf_sched_init(&s);
    rf_sched_in in = window(plant_training_marginal, &s, RF_HW_ENGINES_READY);
    ck_assert_uint_eq(in.waited, in.batches); /* it waits for every batch, */
    ck_assert_uint_lt(in.wait_ns, in.period_ns * in.batches / 50); /* but for < 2% in all */
    for (int i = 0; i < 400; i++) {
        drive(&s, plant_training_marginal, RF_HW_ENGINES_READY, 1);
        ck_assert_uint_eq(s.gpu, 0);
    }
    rf_sched_init(&s);
    in = window(plant_training_behind, &s, RF_HW_ENGINES_READY);
    ck_assert_uint_gt(in.wait_ns, in.period_ns * in.batches / 50); /* > 2% */
    rf_sched_step(&s, &in);
    ck_assert_uint_eq(s.probing, 1);
    ck_assert_uint_eq(s.gpu, RF_SCHED_STEP_PROBE);
    ck_assert_uint_eq(s.hw, 0);
    uint32_t probes = 0, last = 0, gap = 0;
    for (int i = 0; i < 400; i++) {
        drive(&s, plant_training_behind, RF_HW_ENGINES_READY, 1);
        ck_assert_uint_eq(s.hw, 0);
        ck_assert_uint_le(s.gpu, RF_SCHED_STEP_PROBE);
        if (s.gpu > 0)
            probes++, gap = (uint32_t)i - last, last = (uint32_t)i;
    }
    ck_assert_uint_le(probes, 12);
    ck_assert_uint_ge(gap, 4 * RF_SCHED_HOLD); /* the holds grew */
    rf_sched_init(&s);
    in = window(plant_loading, &s, RF_HW_ENGINES_NONE);
    rf_sched_step(&s, &in);
    ck_assert_uint_eq(s.gpu, RF_SCHED_ONE);
    rf_sched_init(&s);
    drive(&s, plant_training_cpu_short, RF_HW_ENGINES_READY, 200); /* best 417 */
    ck_assert_uint_lt(s.at[0], RF_SCHED_HW_MIN_GPU);
    ck_assert_uint_eq(s.hw, 0);
}
END_TEST

/* Training stays first: windows in which the consumer did not wait give the GPU share back
 * whatever the period says, the share reaches 0 within a few windows and then nothing is
 * probed while the loader keeps up; a window with nothing measured changes nothing. */
/* A window is a controller step after RF_SCHED_WINDOW batches spanning RF_SCHED_WINDOW_NS,
 * or 8x as many batches, or (test hook) RF_SCHED_WINDOW batches however short; the first
 * window of a run also after RF_SCHED_WINDOW_START batches, when the consumer waited for every
 * one of them and for half their span or more (a loading run: its first probe need not wait
 * for a quarter second of CPU decoding), but not a later one, nor a first one with shorter
 * waits or a batch not waited for (a training loop's). */
START_TEST(window_is_full_when_measured_or_plainly_loader_bound)
{
    uint64_t ms = 1000000u;
    rf_sched_in w = {.period_ns = 4 * 13 * ms, .batches = RF_SCHED_WINDOW_START,
                     .waited = RF_SCHED_WINDOW_START, .wait_ns = 4 * 12 * ms};
    ck_assert(rf_sched_window_full(&w, 1, 0));
    ck_assert(!rf_sched_window_full(&w, 0, 0));      /* not the first window */
    ck_assert(!rf_sched_window_full(&w, 0, 1));      /* short windows: RF_SCHED_WINDOW still */
    w.waited--;
    ck_assert(!rf_sched_window_full(&w, 1, 0));      /* one batch came without a wait */
    w.waited++, w.wait_ns = w.period_ns / 2 - 1;
    ck_assert(!rf_sched_window_full(&w, 1, 0));      /* waits under half the span */
    w.wait_ns = w.period_ns / 2;
    ck_assert(rf_sched_window_full(&w, 1, 0));
    w.batches = w.waited = RF_SCHED_WINDOW_START - 1;
    ck_assert(!rf_sched_window_full(&w, 1, 0));      /* too few batches */
    rf_sched_in t = {.period_ns = RF_SCHED_WINDOW_NS - 1, .batches = RF_SCHED_WINDOW};
    ck_assert(!rf_sched_window_full(&t, 1, 0));      /* a training loop's: not long enough */
    ck_assert(rf_sched_window_full(&t, 1, 1));       /* short windows */
    t.period_ns = RF_SCHED_WINDOW_NS;
    ck_assert(rf_sched_window_full(&t, 0, 0));       /* long enough */
    t.period_ns = 1, t.batches = 8 * RF_SCHED_WINDOW;
    ck_assert(rf_sched_window_full(&t, 0, 0));       /* or 8x the batches */
    t.batches--;
    ck_assert(!rf_sched_window_full(&t, 0, 0));
}
END_TEST

START_TEST(keeps_up_gives_the_gpu_back_and_empty_window)
{
    rf_sched s;
    rf_sched_init(&s);
    drive(&s, plant_loading, RF_HW_ENGINES_NONE, 40);
    ck_assert_uint_gt(s.gpu, 0);
    rf_sched before = s;
    rf_sched_in none = {0};
    rf_sched_step(&s, &none);
    ck_assert_mem_eq(&s, &before, sizeof s);
    int n = 0;
    while (s.at[0] > 0 && n < 100) {
        uint32_t g = s.gpu;
        rf_sched_in in = window(plant_loading, &s, RF_HW_ENGINES_NONE);
        in.waited = 1; /* one batch in 8: the loader keeps up */
        rf_sched_step(&s, &in);
        ck_assert_uint_lt(s.gpu, g);
        n++;
    }
    ck_assert_uint_eq(s.gpu, 0);
    ck_assert_int_le(n, 16);
    for (int i = 0; i < 100; i++) { /* no probe while it keeps up */
        rf_sched_in in = window(plant_loading, &s, RF_HW_ENGINES_NONE);
        in.waited = 0;
        rf_sched_step(&s, &in);
        ck_assert_uint_eq(s.gpu, 0);
    }
}
END_TEST

/* ---- the pipeline ------------------------------------------------------------------------- */

#define NPER 24
#define NSH 3
#define NS (NSH * NPER)
#define SIZE 40
#define PX (SIZE * SIZE * 3)
#define EPOCHS 2
#define BATCH 6
static char g_pat[700];

/* Three shards: plain generator JPEGs, the same rewritten by Python's tarfile (PAX, as users'
 * scripts write them), and restart-marked ones (restart packets). */
static void make_corpus(void)
{
    if (g_pat[0])
        return;
    char *gen = rf_test_mkdtemp("sched-gen"), *rs = rf_test_mkdtemp("sched-rs"),
         *dir = rf_test_mkdtemp("sched");
    ck_assert_int_eq(rf_test_make_shards(gen, 1, NPER, 5, 41, 0, 150), 0);
    ck_assert_int_eq(rf_test_make_restart_shards(rs, 1, NPER, 5, 43, 150), 0);
    ck_assert_int_eq(rf_test_shell("cp '%s/shard-0000.tar' '%s/' && cp '%s/shard-0000.tar' "
                                   "'%s/shard-0002.tar' && python3 -c \"import tarfile,sys; "
                                   "i=tarfile.open(sys.argv[1]); o=tarfile.open(sys.argv[2],'w',"
                                   "format=tarfile.PAX_FORMAT)\n[o.addfile(m,i.extractfile(m)) "
                                   "for m in i.getmembers()]\no.close()\" '%s/shard-0000.tar' "
                                   "'%s/shard-0001.tar'", gen, dir, rs, dir, gen, dir), 0);
    snprintf(g_pat, sizeof g_pat, "%s/shard-*.tar", dir);
}

typedef struct run {
    uint64_t ids[NS * EPOCHS];
    int32_t labels[NS * EPOCHS];
    uint8_t *px;
    uint32_t n;
    rf_stats st;
    rf_config got;
    rf_stats first;  /* the stats when the first batch was handed out */
    double first_ms; /* and how long after create began */
} run;

typedef struct opts {
    uint32_t threads;
    int sched, no_engines;
    int perturb; /* enum perturbation: how the test hook moves the shares */
    uint32_t dct; /* enum rf_dct_scaling (AUTO: 0) */
    uint32_t open_ms;
    uint32_t hw;    /* hw_decode_percent (the manual split, with gpu_decode when gpu) */
    int gpu;
    int wait_ready; /* after the first batch, wait (holding it) until the engines are READY */
} opts;

/* A training loop's shares, as the controller's keeps_up leaves them: the hook's, with the GPU
 * share below the least the engines take part in (RF_SCHED_HW_MIN_GPU). */
static void perturb_training(void *ctx, uint64_t seq, uint32_t *gpu, uint32_t *hw)
{
    rf_test_sched_perturb(ctx, seq, gpu, hw);
    *gpu %= RF_SCHED_HW_MIN_GPU;
    *hw = *hw < *gpu ? *hw : *gpu;
}

/* The same until half the run's batches were handed out, then a loader-bound loop's: every
 * image on the GPU, half of them on the engines. */
#define NEED_AT (NS * EPOCHS / BATCH / 2)
static void perturb_training_then_loading(void *ctx, uint64_t seq, uint32_t *gpu,
                                          uint32_t *hw)
{
    perturb_training(ctx, seq, gpu, hw);
    if (seq >= NEED_AT)
        *gpu = RF_SCHED_ONE, *hw = RF_SCHED_ONE / 2;
}

enum perturbation { SHARES_CONTROLLER = 0, SHARES_ANY, SHARES_TRAINING, SHARES_LATER_LOADING };
static void (*const perturbations[])(void *, uint64_t, uint32_t *, uint32_t *) = {
    NULL, rf_test_sched_perturb, perturb_training, perturb_training_then_loading};

/* The first batch was handed out: when, and the stats then; with o->wait_ready the consumer
 * then waits for the opener, holding the batch, so the ring's other slots fill meanwhile. */
static void first_batch(rf_loader *ld, const opts *o, run *r, uint64_t t0)
{
    r->first_ms = (double)(rf_now_ns() - t0) / 1e6;
    rf_stats_init(&r->first);
    ck_assert_int_eq(rf_loader_stats(ld, &r->first), 0);
    if (o->wait_ready)
        ck_assert_uint_eq(rf_test_wait_engines(ld), RF_HW_ENGINES_READY);
}

static void collect(const opts *o, run *r)
{
    const char *pats[1];
    rf_config c = rf_test_host_config(pats, g_pat, SIZE);
    c.seed = 9;
    c.batch_size = BATCH;
    c.epochs = EPOCHS;
    c.decode_threads = o->threads;
    c.prefetch_depth = 4; /* BALANCE's 8 would leave these short runs too few windows */
    if (!o->sched) /* the reference: the CPU alone */
        c.decode_schedule = RF_SCHEDULE_CPU;
    c.dct_scaling = o->dct;
    c.hw_decode_percent = o->hw; /* with it AUTO is MANUAL, whatever the hook `sched` says */
    c.gpu_decode = (uint32_t)o->gpu;
    uint32_t calls = 0;
    rf_test_hooks h = {.sched = o->sched, .sched_no_engines = o->no_engines,
                       .sched_open_ms = o->open_ms, .sched_perturb = perturbations[o->perturb],
                       .sched_ctx = &calls, .sched_short_windows = 1,
                       .sched_open_join = !o->open_ms};
    rf_loader *ld = NULL;
    char err[512] = "";
    uint64_t t0 = rf_now_ns();
    int rc = rf_loader_create_hooked(&c, &h, &ld, err, sizeof err);
    ck_assert_msg(rc == 0, "create: %d %s", rc, err);
    rf_config_init(&r->got);
    ck_assert_int_eq(rf_loader_config(ld, &r->got), 0);
    r->px = malloc((size_t)NS * EPOCHS * PX);
    r->n = 0;
    rf_batch *b;
    while ((rc = rf_loader_next(ld, &b)) != RF_DONE) {
        if (rc == RF_EPOCH_END)
            continue;
        ck_assert_msg(rc == 0, "next: %d %s", rc, rf_last_error(ld));
        if (r->n == 0)
            first_batch(ld, o, r, t0);
        for (uint32_t i = 0; i < b->count; i++, r->n++) {
            ck_assert_uint_lt(r->n, NS * EPOCHS);
            r->ids[r->n] = b->sample_ids[i];
            r->labels[r->n] = b->labels[i];
            memcpy(r->px + (size_t)r->n * PX, (uint8_t *)b->data + (size_t)i * PX, PX);
        }
        ck_assert_int_eq(rf_loader_release(ld, b, NULL), 0);
    }
    rf_stats_init(&r->st);
    ck_assert_int_eq(rf_loader_stats(ld, &r->st), 0);
    rf_loader_destroy(ld);
    if (o->perturb)
        ck_assert_uint_eq(calls, NS * EPOCHS / BATCH); /* one step per batch */
}

/* Every sample once per epoch. */
static void assert_exactly_once(const run *r)
{
    ck_assert_uint_eq(r->n, NS * EPOCHS);
    for (uint32_t e = 0; e < EPOCHS; e++) {
        uint8_t seen[NS] = {0};
        for (uint32_t i = 0; i < NS; i++) {
            uint64_t id = r->ids[e * NS + i];
            ck_assert_uint_lt(id, NS);
            ck_assert_msg(!seen[id]++, "epoch %u: sample %llu twice", e, (unsigned long long)id);
        }
    }
}

static void assert_same_batches(const run *a, const run *ref, const char *what)
{
    ck_assert_uint_eq(a->n, ref->n);
    for (uint32_t i = 0; i < a->n; i++) {
        ck_assert_uint_eq(a->ids[i], ref->ids[i]);
        ck_assert_int_eq(a->labels[i], ref->labels[i]);
        ck_assert_msg(memcmp(a->px + (size_t)i * PX, ref->px + (size_t)i * PX, PX) == 0,
                      "%s: delivery %u (sample %llu) differs from the CPU run", what, i,
                      (unsigned long long)a->ids[i]);
    }
}

/* Engines that took no sample: their state when the first batch was handed out and at the
 * end, why they are out, and no open timed. */
static void assert_engines_unused(const run *r, uint32_t first, uint32_t last, const char *why)
{
    ck_assert_uint_eq(r->first.hw_engines, first);
    ck_assert_uint_eq(r->st.hw_engines, last);
    ck_assert_str_eq(r->st.hw_engines_why, why);
    ck_assert_uint_eq(r->st.hw_open_ns, 0);
    ck_assert_uint_eq(r->st.hw_decoded, 0);
}

START_TEST(balance_equals_cpu_at_any_thread_count)
{
    make_corpus();
    static run ref, r;
    collect(&(opts){.threads = 1}, &ref);
    assert_exactly_once(&ref);
    ck_assert_uint_eq(ref.got.decode_schedule, RF_SCHEDULE_CPU);
    ck_assert_uint_eq(ref.st.gpu_decoded + ref.st.hw_decoded, 0);
    static const uint32_t threads[] = {1, 2, 4};
    for (int t = 0; t < 3; t++) {
        collect(&(opts){.threads = threads[t], .sched = 1, .perturb = SHARES_ANY,
                        .dct = RF_DCT_SCALING_ON}, &r);
        char what[64];
        snprintf(what, sizeof what, "balance, %u threads", threads[t]);
        assert_exactly_once(&r);
        assert_same_batches(&r, &ref, what);
        /* AUTO resolved to BALANCE; with dct_scaling ON the crops the CPU run DCT-scaled
         * were DCT-scaled here too (on the CPU, whatever the shares), and all three paths
         * used */
        ck_assert_uint_eq(r.got.decode_schedule, RF_SCHEDULE_BALANCE);
        ck_assert_uint_eq(r.got.dct_scaling, RF_DCT_SCALING_ON);
        ck_assert_uint_eq(r.st.decode_schedule, RF_SCHEDULE_BALANCE);
        ck_assert_uint_gt(ref.st.dct_scaled, 0);
        ck_assert_uint_eq(r.st.dct_scaled, ref.st.dct_scaled);
        ck_assert_uint_gt(r.st.gpu_decoded, 0);
        ck_assert_uint_gt(r.st.gpu_plain_decoded, 0);
        ck_assert_uint_gt(r.st.gpu_decoded, r.st.gpu_plain_decoded); /* restart packets too */
        ck_assert_uint_gt(r.st.hw_decoded, 0);
        ck_assert_uint_gt(r.st.samples_decoded, r.st.gpu_decoded + r.st.hw_decoded);
        ck_assert_uint_le(r.st.sched_hw_permille, r.st.sched_gpu_permille);
        ck_assert_uint_le(r.st.sched_gpu_permille, RF_SCHED_ONE);
        ck_assert_uint_eq(r.st.hw_engines, RF_HW_ENGINES_READY);
        ck_assert_str_eq(r.st.hw_engines_why, "");
        ck_assert_uint_gt(r.st.hw_open_ns, 0); /* the opener timed its open */
        free(r.px);
    }
    free(ref.px);
    /* dct_scaling AUTO resolves to OFF under BALANCE: the CPU's full-scale pixels */
    collect(&(opts){.threads = 1, .dct = RF_DCT_SCALING_OFF}, &ref);
    collect(&(opts){.threads = 2, .sched = 1, .perturb = SHARES_ANY}, &r);
    ck_assert_uint_eq(r.got.dct_scaling, RF_DCT_SCALING_OFF);
    assert_same_batches(&r, &ref, "balance, dct_scaling off");
    ck_assert_uint_eq(r.st.dct_scaled, 0);
    ck_assert_uint_gt(r.st.gpu_decoded, 0);
    ck_assert_uint_gt(r.st.hw_decoded, 0);
    free(ref.px);
    free(r.px);
}
END_TEST

/* The controller alone (no perturbation), without engines: the kernels and the CPU, the
 * same batches, and nothing for the engines. The ring's first fill goes to the kernels
 * (pl_sched_choose), so the first batch, which is complete before it is handed out, was
 * decoded there whatever the timing; the controller's later shares depend on it (on a loaded
 * machine the consumer may keep up and every later sample stay on the CPU). */
START_TEST(balance_without_engines)
{
    make_corpus();
    static run ref, r;
    collect(&(opts){.threads = 2, .dct = RF_DCT_SCALING_OFF}, &ref);
    collect(&(opts){.threads = 2, .sched = 1, .no_engines = 1}, &r);
    assert_same_batches(&r, &ref, "no engines");
    ck_assert_uint_eq(r.st.sched_hw_permille, 0);
    assert_engines_unused(&r, RF_HW_ENGINES_NONE, RF_HW_ENGINES_NONE,
                          "the host backend has no hardware JPEG decoder");
    ck_assert_uint_ge(r.first.gpu_decoded, BATCH);
    ck_assert_uint_ge(r.st.gpu_decoded, r.first.gpu_decoded);
    free(r.px);
    free(ref.px);
}
END_TEST

/* Engines still opening for the whole run get nothing, and destroy joins the opener while it
 * is still opening. */
START_TEST(engines_opening_get_nothing_and_destroy_joins)
{
    make_corpus();
    static run ref, r;
    collect(&(opts){.threads = 2, .dct = RF_DCT_SCALING_OFF}, &ref);
    collect(&(opts){.threads = 2, .sched = 1, .perturb = SHARES_ANY, .open_ms = 5000}, &r);
    assert_same_batches(&r, &ref, "engines opening");
    ck_assert_uint_eq(r.st.hw_decoded, 0);
    ck_assert_uint_eq(r.st.hw_engines, RF_HW_ENGINES_OPENING);
    ck_assert_uint_eq(r.st.hw_open_ns, 0); /* not open: no time yet */
    free(ref.px);
    free(r.px);
}
END_TEST

/* BALANCE opens the engines only when its GPU share first reaches the least they take part
 * in (RF_SCHED_HW_MIN_GPU): with a training loop's shares they stay UNOPENED for the whole run
 * (no opener thread, nothing on them, open time 0) while the kernels take their share; when
 * the shares later turn to a loader-bound loop's, the batch that first needs them starts the
 * opener (joined here: READY from the next batch), and the engines take samples from then on.
 * Either way the CPU run's batches, exactly once per epoch. */
START_TEST(balance_opens_the_engines_when_its_share_needs_them)
{
    make_corpus();
    static run ref, r;
    collect(&(opts){.threads = 2, .dct = RF_DCT_SCALING_OFF}, &ref);
    collect(&(opts){.threads = 2, .sched = 1, .perturb = SHARES_TRAINING}, &r);
    assert_exactly_once(&r);
    assert_same_batches(&r, &ref, "balance, training shares");
    ck_assert_uint_eq(r.got.decode_schedule, RF_SCHEDULE_BALANCE);
    assert_engines_unused(&r, RF_HW_ENGINES_UNOPENED, RF_HW_ENGINES_UNOPENED, "");
    ck_assert_uint_gt(r.st.gpu_decoded, r.first.gpu_decoded); /* the kernels after the fill */
    ck_assert_uint_lt(r.st.sched_gpu_permille, RF_SCHED_HW_MIN_GPU);
    free(r.px);
    collect(&(opts){.threads = 2, .sched = 1, .perturb = SHARES_LATER_LOADING}, &r);
    assert_exactly_once(&r);
    assert_same_batches(&r, &ref, "balance, training then loading shares");
    ck_assert_uint_eq(r.first.hw_engines, RF_HW_ENGINES_UNOPENED);
    ck_assert_uint_eq(r.st.hw_engines, RF_HW_ENGINES_READY);
    ck_assert_uint_gt(r.st.hw_open_ns, 0);
    ck_assert_uint_gt(r.st.hw_decoded, 0);
    ck_assert_uint_le(r.st.hw_decoded, NS * EPOCHS - NEED_AT * BATCH); /* none before */
    free(r.px);
    free(ref.px);
}
END_TEST

/* MANUAL (hw_decode_percent 100, alone and with gpu_decode) with the host's engines playing
 * the device's (the hook `sched`): they open on the opener thread started with the first
 * batch, as BALANCE's do, not in create. The engines' share takes the path the split gives
 * the next percentiles (the kernels with gpu_decode, else the CPU) until they are READY, and
 * every later sample goes to them: of the run's samples, those decoded before READY are the
 * first batch's at least and the ring's depth in batches at most. Every sample once per
 * epoch, with the CPU run's labels and pixels (the host's stand-in for the engines is exact). */
static void check_manual(const opts *o, const run *ref, run *r)
{
    collect(o, r);
    char what[64];
    snprintf(what, sizeof what, "manual, %u threads, gpu_decode %d", o->threads, o->gpu);
    assert_exactly_once(r);
    assert_same_batches(r, ref, what);
    ck_assert_uint_eq(r->got.decode_schedule, RF_SCHEDULE_MANUAL);
    ck_assert_uint_eq(r->st.hw_engines, RF_HW_ENGINES_READY);
    ck_assert_uint_ge(r->st.hw_open_ns, (uint64_t)o->open_ms * 1000000u);
    ck_assert_uint_ge(r->st.hw_decoded, NS * EPOCHS - 4 * BATCH); /* prefetch_depth 4 */
    ck_assert_uint_le(r->st.hw_decoded, NS * EPOCHS - BATCH);
    ck_assert_uint_eq(r->st.gpu_decoded, o->gpu ? NS * EPOCHS - r->st.hw_decoded : 0);
    ck_assert_uint_eq(r->st.sched_gpu_permille + r->st.sched_hw_permille, 0);
    free(r->px);
}

/* The first batch comes long before a 2 s open of the engines ends (create no longer waits
 * for it), with the engines OPENING and none of its samples on them; the consumer then waits
 * for READY. */
START_TEST(manual_engines_open_beside_the_first_batches)
{
    make_corpus();
    static run ref, r;
    collect(&(opts){.threads = 2, .dct = RF_DCT_SCALING_OFF}, &ref);
    for (int gpu = 0; gpu < 2; gpu++) {
        check_manual(&(opts){.threads = 2, .sched = 1, .hw = 100, .gpu = gpu, .open_ms = 2000,
                             .wait_ready = 1}, &ref, &r);
        ck_assert_uint_eq(r.first.hw_engines, RF_HW_ENGINES_OPENING);
        ck_assert_uint_eq(r.first.hw_decoded, 0);
        ck_assert_uint_eq(r.first.hw_open_ns, 0);
        ck_assert_msg(r.first_ms < 2000, "first batch %.1f ms after create", r.first_ms);
    }
    free(ref.px);
}
END_TEST

/* The same at 1, 2 and 4 decode threads with the opener joined at the first batch (the hook
 * sched_open_join): the batches do not depend on the thread count or on when the engines
 * became ready. */
START_TEST(manual_engines_ready_at_any_thread_count)
{
    make_corpus();
    static run ref, r;
    collect(&(opts){.threads = 1, .dct = RF_DCT_SCALING_OFF}, &ref);
    static const uint32_t threads[] = {1, 2, 4};
    for (int t = 0; t < 3; t++)
        check_manual(&(opts){.threads = threads[t], .sched = 1, .hw = 100, .gpu = t == 1},
                     &ref, &r);
    free(ref.px);
}
END_TEST

/* MANUAL without engines (the hook sched_no_engines: a GPU without them): NONE from create on,
 * not an error; the engines' share decoded by the kernels with gpu_decode, else the CPU, and
 * nothing lost. */
START_TEST(manual_without_engines_falls_back)
{
    make_corpus();
    static run ref, r;
    collect(&(opts){.threads = 2, .dct = RF_DCT_SCALING_OFF}, &ref);
    for (int gpu = 0; gpu < 2; gpu++) {
        collect(&(opts){.threads = 2, .sched = 1, .no_engines = 1, .hw = 100, .gpu = gpu}, &r);
        assert_exactly_once(&r);
        assert_same_batches(&r, &ref, gpu ? "no engines, gpu_decode" : "no engines");
        ck_assert_uint_eq(r.got.decode_schedule, RF_SCHEDULE_MANUAL);
        assert_engines_unused(&r, RF_HW_ENGINES_NONE, RF_HW_ENGINES_NONE,
                              "the host backend has no hardware JPEG decoder");
        ck_assert_uint_eq(r.st.gpu_decoded, gpu ? NS * EPOCHS : 0);
        free(r.px);
    }
    free(ref.px);
}
END_TEST

/* ---- the mode at create ------------------------------------------------------------------ */

static int try_create(rf_config *c, char *err, size_t n, uint32_t *mode)
{
    rf_loader *ld = NULL;
    int rc = rf_loader_create(c, &ld, err, n);
    if (rc == 0) {
        rf_config got;
        rf_config_init(&got);
        ck_assert_int_eq(rf_loader_config(ld, &got), 0);
        *mode = got.decode_schedule;
        rf_loader_destroy(ld);
    }
    return rc;
}

START_TEST(modes_resolve_and_refuse_by_name)
{
    make_corpus();
    const char *pats[1];
    rf_config c = rf_test_host_config(pats, g_pat, SIZE);
    char err[512];
    uint32_t mode = 99;
    ck_assert_int_eq(try_create(&c, err, sizeof err, &mode), 0);
    ck_assert_uint_eq(mode, RF_SCHEDULE_CPU); /* the host backend's default */
    c.gpu_decode = 1; /* explicit percentages: the manual mode, as before */
    ck_assert_int_eq(try_create(&c, err, sizeof err, &mode), 0);
    ck_assert_uint_eq(mode, RF_SCHEDULE_MANUAL);
    c.decode_schedule = RF_SCHEDULE_CPU;
    ck_assert_int_eq(try_create(&c, err, sizeof err, &mode), RF_EINVAL);
    ck_assert_msg(strstr(err, "decode_schedule CPU takes neither"), "%s", err);
    c.gpu_decode = 0;
    c.decode_schedule = RF_SCHEDULE_BALANCE;
    ck_assert_int_eq(try_create(&c, err, sizeof err, &mode), RF_EINVAL);
    ck_assert_msg(strstr(err, "BALANCE needs the CUDA backend"), "%s", err);
    c.decode_schedule = 4;
    ck_assert_int_eq(try_create(&c, err, sizeof err, &mode), RF_EINVAL);
    ck_assert_msg(strstr(err, "decode_schedule must be"), "%s", err);
    c.decode_schedule = RF_SCHEDULE_AUTO;
    c.dct_scaling = RF_DCT_SCALING_ON + 1;
    ck_assert_int_eq(try_create(&c, err, sizeof err, &mode), RF_EINVAL);
    ck_assert_msg(strstr(err, "dct_scaling must be 0 (auto), 1 (off) or 2 (on), not 3"), "%s",
                  err);
    c.dct_scaling = RF_DCT_SCALING_AUTO;
    /* the manual engines on the host without the hook `sched`: the stand-in has nothing to
     * open, so stats say they are ready from create on, with no shares */
    c.decode_schedule = RF_SCHEDULE_AUTO;
    c.hw_decode_percent = 30;
    c.epochs = 1;
    rf_loader *ld = rf_test_create_ok(&c);
    rf_stats st = rf_test_drain(ld);
    rf_loader_destroy(ld);
    ck_assert_uint_eq(st.decode_schedule, RF_SCHEDULE_MANUAL);
    ck_assert_uint_eq(st.hw_engines, RF_HW_ENGINES_READY);
    ck_assert_uint_gt(st.hw_decoded, 0);
    ck_assert_uint_eq(st.sched_gpu_permille + st.sched_hw_permille, 0);
}
END_TEST

/* The GPU paths' kernels run a CUDA grid row per sample (at most 65,535): AUTO takes the CPU
 * for a larger batch where it would take BALANCE (the hook `sched` stands for the CUDA
 * backend), and asking for BALANCE or GPU decode with one is refused at create by name. */
START_TEST(batches_past_the_kernels_grid_take_the_cpu)
{
    make_corpus();
    const char *pats[1];
    rf_config c = rf_test_host_config(pats, g_pat, 2); /* 12-byte samples: a small ring */
    c.batch_size = RF_GJ_MAX_BATCH + 1;
    char err[512] = "";
    rf_loader *ld = NULL;
    const rf_test_hooks sched = {.sched = 1};
    ck_assert_int_eq(rf_loader_create_hooked(&c, &sched, &ld, err, sizeof err), 0);
    rf_config got;
    rf_config_init(&got);
    ck_assert_int_eq(rf_loader_config(ld, &got), 0);
    rf_loader_destroy(ld);
    ck_assert_uint_eq(got.decode_schedule, RF_SCHEDULE_CPU);
    c.batch_size = RF_GJ_MAX_BATCH; /* the largest the kernels take: BALANCE */
    ck_assert_int_eq(rf_loader_create_hooked(&c, &sched, &ld, err, sizeof err), 0);
    ck_assert_int_eq(rf_loader_config(ld, &got), 0);
    rf_loader_destroy(ld);
    ck_assert_uint_eq(got.decode_schedule, RF_SCHEDULE_BALANCE);
    c.batch_size = RF_GJ_MAX_BATCH + 1;
    c.decode_schedule = RF_SCHEDULE_BALANCE;
    ck_assert_int_eq(rf_loader_create_hooked(&c, &sched, &ld, err, sizeof err), RF_EINVAL);
    ck_assert_msg(strstr(err, "decode_schedule BALANCE does not run with batches of more than "
                          "65,535 samples"), "%s", err);
    c.decode_schedule = RF_SCHEDULE_AUTO;
    c.gpu_decode = 1; /* the device layout on the host: the kernels' limit applies */
    const rf_test_hooks layout = {.gpu_device_layout = 1};
    ck_assert_int_eq(rf_loader_create_hooked(&c, &layout, &ld, err, sizeof err), RF_EINVAL);
    ck_assert_msg(strstr(err, "gpu_decode takes batches of at most 65535 samples (the kernels "
                          "run a CUDA grid row per sample), not 65536"), "%s", err);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("schedule");
    TCase *tc = tcase_create("controller");
    tcase_add_test(tc, climbs_to_each_plants_best);
    tcase_add_test(tc, recovers_when_the_plant_changes);
    tcase_add_test(tc, stays_on_a_noisy_plateau);
    tcase_add_test(tc, engines_ready_during_a_probe_remeasure);
    tcase_add_test(tc, engines_get_nothing_until_ready);
    tcase_add_test(tc, keeps_up_gives_the_gpu_back_and_empty_window);
    tcase_add_test(tc, training_probes_small_and_leaves_the_engines_out);
    tcase_add_test(tc, window_is_full_when_measured_or_plainly_loader_bound);
    suite_add_tcase(s, tc);
    tc = tcase_create("pipeline");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, balance_equals_cpu_at_any_thread_count);
    tcase_add_test(tc, balance_without_engines);
    tcase_add_test(tc, engines_opening_get_nothing_and_destroy_joins);
    tcase_add_test(tc, balance_opens_the_engines_when_its_share_needs_them);
    tcase_add_test(tc, manual_engines_open_beside_the_first_batches);
    tcase_add_test(tc, manual_engines_ready_at_any_thread_count);
    tcase_add_test(tc, manual_without_engines_falls_back);
    tcase_add_test(tc, modes_resolve_and_refuse_by_name);
    tcase_add_test(tc, batches_past_the_kernels_grid_take_the_cpu);
    suite_add_tcase(s, tc);
    return rf_test_run_suite(s);
}
