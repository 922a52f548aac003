/* test_schedule.c — the decode scheduler (rf_config.decode_schedule, src/pipeline/schedule.c).
 * The controller as a pure function fed simulated signals: it raises the GPU share when the
 * consumer waits, lowers it when the ring is full, holds it in between, stays within
 * 0..1000 permille, settles instead of swinging, and gives the engines nothing while they are
 * missing or still opening. The mode's resolution and refusals at create. And the whole
 * pipeline on the host backend with the balancing scheduler forced on (test hook `sched`,
 * src/pipeline/testing.h: kernel packets decoded by the kernels' host code, engine packets by
 * the host stand-in) while a hook moves the shares from batch to batch: every sample of each
 * epoch exactly once, and every batch byte for byte the CPU run's with dct_scaling off, at 1,
 * 2 and 4 decode threads, on plain shards of the generator, one rewritten by Python's tarfile
 * and a restart-marked one. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/schedule.h"
#include "pipeline/testing.h"
#include "ringfeed.h"
#include "testutil.h"

/* ---- the controller ------------------------------------------------------------------------ */

static rf_sched_in sig(uint32_t ready, uint32_t waited, uint32_t engines)
{
    return (rf_sched_in){.ready = ready, .depth = 8, .waited = waited, .engines = engines,
                         .period_ns = 10000000};
}

START_TEST(behind_raises_ahead_lowers_between_holds)
{
    rf_sched s;
    rf_sched_init(&s);
    uint32_t g0 = s.gpu;
    rf_sched_in behind = sig(0, 1, RF_HW_ENGINES_NONE), ahead = sig(7, 0, RF_HW_ENGINES_NONE),
                mid = sig(3, 0, RF_HW_ENGINES_NONE);
    rf_sched_step(&s, &behind);
    ck_assert_uint_gt(s.gpu, g0);
    uint32_t g1 = s.gpu;
    rf_sched_step(&s, &mid);
    ck_assert_uint_eq(s.gpu, g1); /* neither behind nor ahead: hold */
    rf_sched_step(&s, &ahead);
    ck_assert_uint_lt(s.gpu, g1);
    /* bounded: a long run either way ends at the range's ends, not past them */
    for (int i = 0; i < 100; i++)
        rf_sched_step(&s, &behind);
    ck_assert_uint_eq(s.gpu, RF_SCHED_ONE);
    for (int i = 0; i < 100; i++)
        rf_sched_step(&s, &ahead);
    ck_assert_uint_eq(s.gpu, 0);
    /* from one end to the other within a few batches: the step doubles while the signal lasts */
    int n = 0;
    while (s.gpu < RF_SCHED_ONE && n < 100)
        rf_sched_step(&s, &behind), n++;
    ck_assert_int_le(n, 8);
}
END_TEST

/* A loader that alternates between behind and ahead (the share is at the balance point):
 * the moves shrink to the smallest step instead of swinging over the range. */
START_TEST(alternating_signals_settle)
{
    rf_sched s;
    rf_sched_init(&s);
    rf_sched_in behind = sig(0, 1, RF_HW_ENGINES_NONE), ahead = sig(7, 0, RF_HW_ENGINES_NONE);
    for (int i = 0; i < 6; i++)
        rf_sched_step(&s, &behind); /* far up, with a large step */
    ck_assert_uint_eq(s.step, RF_SCHED_STEP_MAX);
    uint32_t lo = RF_SCHED_ONE, hi = 0;
    for (int i = 0; i < 40; i++) {
        rf_sched_step(&s, i % 2 ? &behind : &ahead);
        if (i >= 20)
            lo = s.gpu < lo ? s.gpu : lo, hi = s.gpu > hi ? s.gpu : hi;
    }
    ck_assert_uint_eq(s.step, RF_SCHED_STEP_MIN);
    ck_assert_uint_le(hi - lo, RF_SCHED_STEP_MIN);
}
END_TEST

START_TEST(engines_missing_or_opening_get_nothing)
{
    rf_sched s;
    rf_sched_init(&s);
    for (uint32_t e = RF_HW_ENGINES_NONE; e <= RF_HW_ENGINES_OPENING; e++) {
        rf_sched_in behind = sig(0, 1, e);
        for (int i = 0; i < 20; i++) {
            rf_sched_step(&s, &behind);
            ck_assert_uint_eq(s.hw, 0);
        }
        ck_assert_uint_eq(s.gpu, RF_SCHED_ONE); /* the kernels take the GPU share */
    }
    /* ready: engines first, up to their capacity and never beyond the GPU share */
    rf_sched_in ready = sig(3, 0, RF_HW_ENGINES_READY);
    rf_sched_step(&s, &ready);
    ck_assert_uint_gt(s.hw, 0);
    ck_assert_uint_le(s.hw, s.gpu);
    ck_assert_uint_eq(s.hw, s.hw_cap < s.gpu ? s.hw_cap : s.gpu);
    rf_sched_in ahead = sig(7, 0, RF_HW_ENGINES_READY);
    for (int i = 0; i < 100; i++) {
        rf_sched_step(&s, &ahead);
        ck_assert_uint_le(s.hw, s.gpu);
    }
    ck_assert_uint_eq(s.hw, 0); /* the loader is ahead: everything back on the CPU */
}
END_TEST

/* The consumer waited for batches' GPU work that held engine samples: the engines' capacity
 * shrinks; batches without such waits let it grow back. */
START_TEST(engine_backlog_shrinks_their_share)
{
    rf_sched s;
    rf_sched_init(&s);
    rf_sched_in go = sig(0, 1, RF_HW_ENGINES_READY);
    for (int i = 0; i < 10; i++)
        rf_sched_step(&s, &go);
    uint32_t cap = s.hw_cap;
    ck_assert_uint_eq(s.hw, cap < s.gpu ? cap : s.gpu);
    rf_sched_in jam = go;
    jam.engine_samples = 100;
    jam.gpu_wait_ns = jam.period_ns / 2;
    rf_sched_step(&s, &jam);
    ck_assert_uint_lt(s.hw_cap, cap);
    for (int i = 0; i < 50; i++)
        rf_sched_step(&s, &jam);
    ck_assert_uint_eq(s.hw, 0);
    ck_assert_uint_eq(s.gpu, RF_SCHED_ONE); /* the kernels keep the GPU share */
    for (int i = 0; i < 100; i++)
        rf_sched_step(&s, &go);
    ck_assert_uint_eq(s.hw, RF_SCHED_ONE);
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

/* The test hook's perturbation: shares drawn from the batch's sequence number, so every path
 * takes samples at different times in every run, whatever the controller would have done. */
static void perturb(void *ctx, uint64_t seq, uint32_t *gpu, uint32_t *hw)
{
    (*(uint32_t *)ctx)++;
    uint64_t h = (seq + 1) * 0x9e3779b97f4a7c15ull;
    *gpu = (uint32_t)((h >> 20) % 1001);
    *hw = (uint32_t)((h >> 40) % (*gpu + 1));
}

typedef struct run {
    uint64_t ids[NS * EPOCHS];
    uint8_t *px;
    uint32_t n;
    rf_stats st;
    rf_config got;
} run;

typedef struct opts {
    uint32_t threads;
    int sched, no_engines, perturb;
    uint32_t open_ms;
} opts;

static void collect(const opts *o, run *r)
{
    const char *pats[1];
    rf_config c = rf_test_host_config(pats, g_pat, SIZE);
    c.seed = 9;
    c.batch_size = BATCH;
    c.epochs = EPOCHS;
    c.decode_threads = o->threads;
    if (!o->sched) /* the reference: the CPU alone, at full scale */
        c.decode_schedule = RF_SCHEDULE_CPU, c.dct_scaling = RF_DCT_SCALING_OFF;
    uint32_t calls = 0;
    rf_test_hooks h = {.sched = o->sched, .sched_no_engines = o->no_engines,
                       .sched_open_ms = o->open_ms, .sched_perturb = o->perturb ? perturb : NULL,
                       .sched_ctx = &calls};
    rf_loader *ld = NULL;
    char err[512] = "";
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
        for (uint32_t i = 0; i < b->count; i++, r->n++) {
            ck_assert_uint_lt(r->n, NS * EPOCHS);
            r->ids[r->n] = b->sample_ids[i];
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
        ck_assert_msg(memcmp(a->px + (size_t)i * PX, ref->px + (size_t)i * PX, PX) == 0,
                      "%s: delivery %u (sample %llu) differs from the CPU run", what, i,
                      (unsigned long long)a->ids[i]);
    }
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
        collect(&(opts){.threads = threads[t], .sched = 1, .perturb = 1}, &r);
        char what[64];
        snprintf(what, sizeof what, "balance, %u threads", threads[t]);
        assert_exactly_once(&r);
        assert_same_batches(&r, &ref, what);
        /* AUTO resolved to BALANCE, every image at full scale, and all three paths used */
        ck_assert_uint_eq(r.got.decode_schedule, RF_SCHEDULE_BALANCE);
        ck_assert_uint_eq(r.got.dct_scaling, RF_DCT_SCALING_OFF);
        ck_assert_uint_eq(r.st.decode_schedule, RF_SCHEDULE_BALANCE);
        ck_assert_uint_eq(r.st.dct_scaled, 0);
        ck_assert_uint_gt(r.st.gpu_decoded, 0);
        ck_assert_uint_gt(r.st.gpu_plain_decoded, 0);
        ck_assert_uint_gt(r.st.gpu_decoded, r.st.gpu_plain_decoded); /* restart packets too */
        ck_assert_uint_gt(r.st.hw_decoded, 0);
        ck_assert_uint_gt(r.st.samples_decoded, r.st.gpu_decoded + r.st.hw_decoded);
        ck_assert_uint_le(r.st.sched_hw_permille, r.st.sched_gpu_permille);
        ck_assert_uint_le(r.st.sched_gpu_permille, RF_SCHED_ONE);
        ck_assert_uint_eq(r.st.hw_engines, RF_HW_ENGINES_READY);
        free(r.px);
    }
    free(ref.px);
}
END_TEST

/* The controller alone (no perturbation), without engines: the kernels and the CPU, the
 * same batches, and nothing for the engines. */
START_TEST(balance_without_engines)
{
    make_corpus();
    static run ref, r;
    collect(&(opts){.threads = 2}, &ref);
    collect(&(opts){.threads = 2, .sched = 1, .no_engines = 1}, &r);
    assert_same_batches(&r, &ref, "no engines");
    ck_assert_uint_eq(r.st.hw_decoded, 0);
    ck_assert_uint_eq(r.st.sched_hw_permille, 0);
    ck_assert_uint_eq(r.st.hw_engines, RF_HW_ENGINES_NONE);
    ck_assert_uint_gt(r.st.gpu_decoded, 0);
    free(ref.px);
    free(r.px);
}
END_TEST

/* Engines still opening for the whole run get nothing, and destroy joins the opener while it
 * is still opening. */
START_TEST(engines_opening_get_nothing_and_destroy_joins)
{
    make_corpus();
    static run ref, r;
    collect(&(opts){.threads = 2}, &ref);
    collect(&(opts){.threads = 2, .sched = 1, .perturb = 1, .open_ms = 5000}, &r);
    assert_same_batches(&r, &ref, "engines opening");
    ck_assert_uint_eq(r.st.hw_decoded, 0);
    ck_assert_uint_eq(r.st.hw_engines, RF_HW_ENGINES_OPENING);
    free(ref.px);
    free(r.px);
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
    /* the manual engines are opened by create: stats say they are ready, with no shares */
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

int main(void)
{
    Suite *s = suite_create("schedule");
    TCase *tc = tcase_create("controller");
    tcase_add_test(tc, behind_raises_ahead_lowers_between_holds);
    tcase_add_test(tc, alternating_signals_settle);
    tcase_add_test(tc, engines_missing_or_opening_get_nothing);
    tcase_add_test(tc, engine_backlog_shrinks_their_share);
    suite_add_tcase(s, tc);
    tc = tcase_create("pipeline");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, balance_equals_cpu_at_any_thread_count);
    tcase_add_test(tc, balance_without_engines);
    tcase_add_test(tc, engines_opening_get_nothing_and_destroy_joins);
    tcase_add_test(tc, modes_resolve_and_refuse_by_name);
    suite_add_tcase(s, tc);
    return rf_test_run_suite(s);
}
