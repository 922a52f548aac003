/* test_loader.c — the whole pipeline through the host backend: exactly-once delivery over
 * epochs for many thread/depth/batch shapes, determinism whatever the threads and engine,
 * labels and pixels against the shards, epoch boundaries, resume, and destroy mid-flight. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "loaders/dataset.h"
#include "decode/decode.h"
#include "gen.h"
#include "plan/plan.h"
#include "ringfeed.h"
#include "loaders/tar.h"
#include "backend/convert.h"
#include "testutil.h"

#define N_SHARDS 3
#define N_PER_SHARD 33
#define N_SAMPLES (N_SHARDS * N_PER_SHARD) /* 99: none of the batch sizes below divides it */
#define CLASSES 10
#define SEED 1234
#define SIZE 32

static char *g_dir, g_pattern[512];

static void make_data(void)
{
    if (g_dir)
        return;
    g_dir = rf_test_mkdtemp("loader");
    ck_assert_int_eq(rf_test_make_shards(g_dir, N_SHARDS, N_PER_SHARD, CLASSES, SEED, 1, 96), 0);
    snprintf(g_pattern, sizeof g_pattern, "%s/shard-*.tar", g_dir);
}

static rf_config base_config(const char **pat)
{
    rf_config c = rf_test_host_config(pat, g_pattern, SIZE);
    c.seed = 99;
    return c;
}

static uint64_t key_index(const char *key)
{
    const char *slash = strrchr(key, '/');
    return strtoull(slash ? slash + 1 : key, NULL, 10);
}

/* Run `epochs` epochs; every sample exactly once per epoch, labels as generated. */
static void check_exactly_once(uint32_t threads, uint32_t depth, uint32_t batch, uint32_t epochs,
                               uint32_t io)
{
    const char *pat;
    rf_config c = base_config(&pat);
    c.decode_threads = threads;
    c.prefetch_depth = depth;
    c.batch_size = batch;
    c.epochs = epochs;
    c.io_engine = io;
    rf_loader *ld = rf_test_create_ok(&c);
    uint64_t expect_batches = (N_SAMPLES + batch - 1) / batch;
    ck_assert_uint_eq(rf_loader_batches_per_epoch(ld), expect_batches);
    uint32_t seen[N_SAMPLES];
    for (uint32_t e = 0; e < epochs; e++) {
        memset(seen, 0, sizeof seen);
        uint64_t nb = 0;
        rf_batch *b;
        int rc;
        while ((rc = rf_loader_next(ld, &b)) == 0) {
            ck_assert_uint_eq(b->epoch, e);
            ck_assert_uint_eq(b->index, nb);
            ck_assert_uint_eq(b->count, nb + 1 < expect_batches ? batch
                                                               : N_SAMPLES - batch * nb);
            for (uint32_t i = 0; i < b->count; i++) {
                uint64_t idx = key_index(b->keys[i]);
                ck_assert_uint_lt(idx, N_SAMPLES);
                seen[idx]++;
                ck_assert_int_eq(b->labels[i], (int32_t)(idx % CLASSES));
                ck_assert_int_eq(b->is_padding[i], 0);
            }
            ck_assert_int_eq(rf_loader_release(ld, b, NULL), 0);
            nb++;
        }
        ck_assert_int_eq(rc, RF_EPOCH_END);
        ck_assert_uint_eq(nb, expect_batches);
        for (uint32_t i = 0; i < N_SAMPLES; i++)
            ck_assert_msg(seen[i] == 1, "sample %u seen %u times (threads %u depth %u batch %u)",
                          i, seen[i], threads, depth, batch);
    }
    rf_batch *b;
    ck_assert_int_eq(rf_loader_next(ld, &b), RF_DONE);
    ck_assert_int_eq(rf_loader_next(ld, &b), RF_DONE);
    rf_stats st;
    rf_stats_init(&st);
    ck_assert_int_eq(rf_loader_stats(ld, &st), 0);
    ck_assert_uint_eq(st.samples_delivered, (uint64_t)N_SAMPLES * epochs);
    ck_assert_str_eq(st.device, "host");
    rf_loader_destroy(ld);
}

START_TEST(exactly_once_threads_depths_batches)
{
    make_data();
    static const uint32_t threads[] = {1, 2, 3, 8};
    static const uint32_t depths[] = {1, 2, 5, 8};
    static const uint32_t batches[] = {1, 7, 32, 100};
    for (int t = 0; t < 4; t++)
        for (int d = 0; d < 4; d++)
            check_exactly_once(threads[t], depths[d], batches[(t + d) % 4], 2, RF_IO_AUTO);
}
END_TEST

START_TEST(exactly_once_pread)
{
    make_data();
    check_exactly_once(2, 3, 10, 3, RF_IO_PREAD);
    check_exactly_once(4, 1, 99, 1, RF_IO_PREAD);
}
END_TEST

/* All batches of an epoch, flattened: keys and pixels. */
typedef struct capture {
    char keys[N_SAMPLES][64];
    uint8_t *pixels;
    int32_t labels[N_SAMPLES];
} capture;

static void capture_epoch(rf_config c, capture *cap)
{
    rf_loader *ld = rf_test_create_ok(&c);
    cap->pixels = malloc((size_t)N_SAMPLES * SIZE * SIZE * 3);
    uint32_t n = 0;
    rf_batch *b;
    int rc;
    while ((rc = rf_loader_next(ld, &b)) == 0) {
        for (uint32_t i = 0; i < b->count; i++, n++) {
            snprintf(cap->keys[n], sizeof cap->keys[n], "%s", b->keys[i]);
            cap->labels[n] = b->labels[i];
        }
        memcpy(cap->pixels + (size_t)(n - b->count) * SIZE * SIZE * 3, b->data, b->data_bytes);
        rf_loader_release(ld, b, NULL);
    }
    ck_assert_int_eq(rc, RF_EPOCH_END);
    ck_assert_uint_eq(n, N_SAMPLES);
    rf_loader_destroy(ld);
}

START_TEST(deterministic_across_threads_depth_engine)
{
    make_data();
    const char *pat;
    rf_config c = base_config(&pat);
    c.epochs = 1;
    c.batch_size = 16;
    capture *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    c.decode_threads = 1, c.prefetch_depth = 1, c.io_engine = RF_IO_URING;
    capture_epoch(c, a);
    c.decode_threads = 6, c.prefetch_depth = 7, c.io_engine = RF_IO_PREAD;
    capture_epoch(c, b);
    for (int i = 0; i < N_SAMPLES; i++)
        ck_assert_str_eq(a->keys[i], b->keys[i]);
    ck_assert_int_eq(memcmp(a->labels, b->labels, sizeof a->labels), 0);
    ck_assert_int_eq(memcmp(a->pixels, b->pixels, (size_t)N_SAMPLES * SIZE * SIZE * 3), 0);
    /* another seed, another order */
    c.seed = 100;
    capture *d = calloc(1, sizeof *d);
    capture_epoch(c, d);
    int same = 0;
    for (int i = 0; i < N_SAMPLES; i++)
        same += !strcmp(a->keys[i], d->keys[i]);
    ck_assert_int_lt(same, N_SAMPLES / 4);
    free(a->pixels), free(b->pixels), free(d->pixels);
    free(a), free(b), free(d);
}
END_TEST

START_TEST(no_shuffle_is_dataset_order)
{
    make_data();
    const char *pat;
    rf_config c = base_config(&pat);
    c.epochs = 1;
    c.batch_size = 10;
    c.order = RF_ORDER_NONE;
    capture *a = calloc(1, sizeof *a);
    capture_epoch(c, a);
    for (int i = 0; i < N_SAMPLES; i++)
        ck_assert_uint_eq(key_index(a->keys[i]), (uint64_t)i);
    free(a->pixels);
    free(a);
}
END_TEST

/* Every batch of one epoch over `pattern` equals a direct decode of the same members with the
 * same seeds: at full scale for every sample of a run with gpu_decode or hw_decode_percent
 * (whichever path the seed gave it: the GPU paths' pixels are the CPU path's with DCT scaling
 * off, and the CPU share of such a run decodes at full scale too) or with dct_scaling OFF; with
 * DCT scaling where the crop allows it otherwise. Returns how many samples the GPU decode path
 * took, and in *engine (may be NULL) how many the engine packets took. */
static uint64_t check_direct_decode_hxw(const char *pattern, uint32_t height, uint32_t width,
                                        int gpu, uint32_t percent, uint32_t hw, uint32_t dct_off,
                                        uint64_t *engine)
{
    const char *pat;
    rf_config c = rf_test_host_config(&pat, pattern, height == width ? height : 0);
    if (height != width) /* the square tests keep setting image_size alone */
        c.image_height = height, c.image_width = width;
    c.seed = 99;
    c.epochs = 1;
    c.batch_size = 13;
    c.layout = RF_LAYOUT_NCHW;
    c.gpu_decode = (uint32_t)gpu;
    c.gpu_decode_percent = percent;
    c.hw_decode_percent = hw;
    c.dct_scaling = dct_off ? RF_DCT_SCALING_OFF : RF_DCT_SCALING_AUTO;
    rf_loader *ld = rf_test_create_ok(&c);
    rf_dataset ds = {0};
    rf_err e = {0};
    char **paths;
    uint32_t np;
    ck_assert_int_eq(rf_expand_patterns(&pat, 1, &paths, &np, &e), 0);
    ck_assert_int_eq(rf_format_tar.open(&ds, paths, np, 64 << 20, &e), 0);
    rf_plan plan;
    ck_assert_int_eq(rf_plan_init(&plan, ds.nsamples, c.seed, 0, 13, 0, 0, 0, 1, &e), 0);
    rf_decode_limits lim = {.max_pixels = 1 << 26, .max_dim = 1 << 14};
    /* GPU-decoded samples are full-scale decodes, and so is the CPU share of their run */
    rf_decoder *dec = rf_decoder_create(&lim), *full = rf_decoder_create(&lim);
    rf_decoder_set_max_scale_denom(full, 1);
    uint64_t expect_gpu = 0, expect_hw = 0;
    rf_transform tf = {.crop = RF_CROP_RANDOM, .height = height, .width = width,
                       .resize_shorter = c.resize_shorter, .layout = RF_LAYOUT_NCHW,
                       .scale_min = 0.08f, .scale_max = 1.0f, .ratio_min = 0.75f,
                       .ratio_max = 4.0f / 3.0f, .flip_prob = 0.5f};
    size_t n = (size_t)height * width * 3;
    uint8_t *want = malloc(n);
    rf_batch *b;
    uint32_t checked = 0;
    while (rf_loader_next(ld, &b) == 0) {
        ck_assert(b->ndim == 4 && b->shape[0] == b->count && b->shape[1] == 3 &&
                  b->shape[2] == height && b->shape[3] == width);
        ck_assert_uint_eq(b->data_bytes, (uint64_t)b->count * n);
        for (uint32_t i = 0; i < b->count; i++) {
            const rf_sample *sm = &ds.samples[b->sample_ids[i]];
            ck_assert_str_eq(ds.keys + sm->key, b->keys[i]);
            uint8_t *span = malloc(sm->length);
            ck_assert_int_eq(pread(ds.files[sm->file].fd, span, sm->length, (off_t)sm->offset),
                             (ssize_t)sm->length);
            uint32_t doff, dlen, dhdr, loff, llen, lhdr;
            ck_assert_int_eq(rf_tar_locate(span, sm->length, b->keys[i], "jpg,jpeg", NULL, &doff,
                                           &dlen, &dhdr, &loff, &llen, &lhdr, &e), 0);
            uint64_t seed = rf_plan_sample_seed(&plan, b->epoch, b->sample_ids[i]);
            uint32_t pc = rf_plan_gpu_percentile(seed);
            int on_hw = pc < hw;
            int on_gpu = !on_hw && gpu && pc - hw < (percent ? percent : 100);
            expect_gpu += on_gpu, expect_hw += on_hw;
            int full_scale = gpu || hw || dct_off;
            ck_assert_int_eq(rf_decode_transform(full_scale ? full : dec, span + doff, dlen, &tf,
                                                 seed, want, NULL, &e), 0);
            ck_assert_int_eq(memcmp(want, (uint8_t *)b->data + (size_t)i * n, n), 0);
            free(span);
            checked++;
        }
        rf_loader_release(ld, b, NULL);
    }
    ck_assert_uint_eq(checked, ds.nsamples);
    rf_stats st;
    rf_stats_init(&st);
    ck_assert_int_eq(rf_loader_stats(ld, &st), 0);
    free(want);
    rf_decoder_destroy(dec), rf_decoder_destroy(full);
    rf_plan_free(&plan);
    /* every sample chosen for the GPU took it, restart-marked or plain, unless its region
     * passes the scratch limit; every sample chosen for the engine took it (all these files
     * are baseline) */
    ck_assert_uint_le(st.gpu_decoded, expect_gpu);
    ck_assert_uint_eq(st.hw_decoded, expect_hw);
    if (engine)
        *engine = st.hw_decoded;
    rf_dataset_free(&ds);
    rf_free_paths(paths, np);
    rf_loader_destroy(ld);
    return st.gpu_decoded;
}

static uint64_t check_direct_decode_dct(const char *pattern, uint32_t size, int gpu,
                                        uint32_t percent, uint32_t hw, uint32_t dct_off,
                                        uint64_t *engine)
{
    return check_direct_decode_hxw(pattern, size, size, gpu, percent, hw, dct_off, engine);
}

static uint64_t check_direct_decode_hw(const char *pattern, uint32_t size, int gpu,
                                       uint32_t percent, uint32_t hw, uint64_t *engine)
{
    return check_direct_decode_dct(pattern, size, gpu, percent, hw, 0, engine);
}

static uint64_t check_direct_decode(const char *pattern, uint32_t size, int gpu, uint32_t percent)
{
    return check_direct_decode_hw(pattern, size, gpu, percent, 0, NULL);
}

/* The pipeline's pixels equal a direct decode of the same member with the same seed. */
START_TEST(pixels_match_direct_decode)
{
    make_data();
    ck_assert_uint_eq(check_direct_decode(g_pattern, SIZE, 0, 0), 0);
}
END_TEST

/* GPU decode on the host backend (the kernels' code, run by the decode threads) over
 * restart-marked shards: every sample takes the packet path (packets may be larger than the
 * 96x96x3-byte sample, and for large photos larger than RF_GJ_AREA), and every pixel is a
 * direct full-scale decode's. Plain shards take it too, as plain packets. */
START_TEST(gpu_decode_matches_full_scale_decode)
{
    char *dir = rf_test_mkdtemp("gpudec");
    char pattern[600];
    ck_assert_int_eq(rf_test_make_restart_shards(dir, 2, 40, CLASSES, SEED, 200), 0);
    snprintf(pattern, sizeof pattern, "%s/shard-*.tar", dir);
    ck_assert_uint_eq(check_direct_decode(pattern, 96, 1, 0), 80);
    /* gpu_decode_percent 40: the samples the seed picks go to the kernels' code, the others
     * to the CPU path at full scale, each exactly */
    uint64_t some = check_direct_decode(pattern, 96, 1, 40);
    ck_assert_msg(some > 16 && some < 48, "%llu of 80 on the GPU path", (unsigned long long)some);
    char *big = rf_test_mkdtemp("gpudec-big");
    ck_assert_int_eq(rf_test_make_big_restart_shards(big, 1, 13, SEED), 0);
    snprintf(pattern, sizeof pattern, "%s/shard-*.tar", big);
    ck_assert_uint_eq(check_direct_decode(pattern, 96, 1, 0), 13);
    uint64_t big40 = check_direct_decode(pattern, 96, 1, 40); /* where DCT scaling would show */
    ck_assert_msg(big40 >= 1 && big40 < 13, "%llu of 13", (unsigned long long)big40);
    /* a CPU-only run with dct_scaling OFF: every sample a full-scale decode */
    ck_assert_uint_eq(check_direct_decode_dct(pattern, 96, 0, 0, 0, 1, NULL), 0);
    /* plain shards (no restart markers): every sample a plain packet (the walker's segments),
     * every pixel still the full-scale decode's */
    make_data();
    ck_assert_uint_eq(check_direct_decode(g_pattern, 96, 1, 0), N_SHARDS * N_PER_SHARD);
}
END_TEST

/* Non-square outputs (image_height x image_width) through the whole pipeline: the batch's
 * shape and every pixel equal a direct decode of the same member to height x width with the
 * same seed, on the CPU path (DCT scaling where the crop allows), on the GPU decode's packets
 * (the kernels' code on the host backend) and on the engine packets (hw_decode_percent). */
START_TEST(non_square_batches_match_direct_decode)
{
    make_data();
    ck_assert_uint_eq(check_direct_decode_hxw(g_pattern, 160, 224, 0, 0, 0, 0, NULL), 0);
    ck_assert_uint_eq(check_direct_decode_hxw(g_pattern, 112, 48, 0, 0, 0, 0, NULL), 0);
    uint64_t hw = 0;
    ck_assert_uint_eq(check_direct_decode_hxw(g_pattern, 48, 112, 0, 0, 100, 0, &hw), 0);
    ck_assert_uint_eq(hw, N_SAMPLES);
    char *dir = rf_test_mkdtemp("gpudec-hxw");
    char pattern[600];
    ck_assert_int_eq(rf_test_make_restart_shards(dir, 2, 40, CLASSES, SEED, 200), 0);
    snprintf(pattern, sizeof pattern, "%s/shard-*.tar", dir);
    ck_assert_uint_eq(check_direct_decode_hxw(pattern, 64, 112, 1, 0, 0, 0, NULL), 80);
    ck_assert_uint_eq(check_direct_decode_hxw(pattern, 120, 56, 1, 0, 0, 0, NULL), 80);
}
END_TEST

/* hw_decode_percent on the host backend: the engine packets are decoded by libjpeg's raw planes
 * and the kernels' resize code, so every pixel is a direct full-scale decode's, on plain shards
 * (the engine needs no restart markers) and split three ways with gpu_decode on
 * restart-marked ones. Out-of-range percents are refused. */
START_TEST(hw_decode_matches_full_scale_decode)
{
    uint64_t hw = 0;
    make_data();
    ck_assert_uint_eq(check_direct_decode_hw(g_pattern, 96, 0, 0, 100, &hw), 0);
    ck_assert_uint_eq(hw, N_SAMPLES);
    ck_assert_uint_eq(check_direct_decode_hw(g_pattern, SIZE, 0, 0, 30, &hw), 0);
    ck_assert_msg(hw > 15 && hw < 45, "%llu of %d to the engine", (unsigned long long)hw,
                  N_SAMPLES);
    char *dir = rf_test_mkdtemp("hwdec");
    char pattern[600];
    ck_assert_int_eq(rf_test_make_restart_shards(dir, 2, 40, CLASSES, SEED, 200), 0);
    snprintf(pattern, sizeof pattern, "%s/shard-*.tar", dir);
    uint64_t gpu = check_direct_decode_hw(pattern, 96, 1, 40, 30, &hw);
    ck_assert_msg(hw > 10 && hw < 40 && gpu > 16 && gpu < 52 && hw + gpu < 80,
                  "engine %llu, kernels %llu of 80", (unsigned long long)hw,
                  (unsigned long long)gpu);
    const char *pat;
    rf_config c = rf_test_host_config(&pat, pattern, 96);
    c.hw_decode_percent = 101;
    rf_loader *ld;
    char err[512];
    ck_assert_int_eq(rf_loader_create(&c, &ld, err, sizeof err), RF_EINVAL);
    ck_assert_msg(strstr(err, "hw_decode_percent 101 out of range"), "%s", err);
}
END_TEST

/* A damaged restart-marked JPEG on the GPU decode path is an error naming shard, member and
 * offset; the batches before it arrive intact. */
START_TEST(gpu_decode_damage_names_member)
{
    char *dir = rf_test_mkdtemp("gpubad");
    char pattern[600], shard[600], key[128];
    ck_assert_int_eq(rf_test_make_restart_shards(dir, 1, 40, CLASSES, SEED, 200), 0);
    snprintf(pattern, sizeof pattern, "%s/shard-*.tar", dir);
    snprintf(shard, sizeof shard, "%s/shard-0000.tar", dir);
    ck_assert_int_eq(rf_test_damage_entropy(shard, 30, key, sizeof key), 0);
    const char *pat;
    rf_config c = rf_test_host_config(&pat, pattern, 224);
    c.epochs = 1;
    c.batch_size = 8;
    c.order = RF_ORDER_NONE;
    c.gpu_decode = 1;
    rf_loader *ld = rf_test_create_ok(&c);
    rf_batch *b;
    int rc, batches = 0;
    while ((rc = rf_loader_next(ld, &b)) == 0) {
        batches++;
        rf_loader_release(ld, b, NULL);
    }
    ck_assert_int_eq(rc, RF_EDECODE);
    /* in fail mode decoding stops at the first error, so of the batches before it (samples
     * 0..23) only those finished by then arrive */
    ck_assert_int_le(batches, 3);
    const char *msg = rf_last_error(ld);
    ck_assert_msg(strstr(msg, key) && strstr(msg, "shard-0000.tar") && strstr(msg, "at offset") &&
                      strstr(msg, "GPU decode"), "%s", msg);
    rf_loader_destroy(ld);
    char err[512];
    c.gpu_decode = 2;
    ck_assert_int_eq(rf_loader_create(&c, &ld, err, sizeof err), RF_EINVAL);
    ck_assert_msg(strstr(err, "gpu_decode must be 0 or 1"), "%s", err);
    c.gpu_decode = 1, c.gpu_decode_percent = 101;
    ck_assert_int_eq(rf_loader_create(&c, &ld, err, sizeof err), RF_EINVAL);
    ck_assert_msg(strstr(err, "gpu_decode_percent 101 out of range"), "%s", err);
}
END_TEST

START_TEST(drop_last_and_forever)
{
    make_data();
    const char *pat;
    rf_config c = base_config(&pat);
    c.batch_size = 10;
    c.drop_last = 1;
    c.epochs = 0; /* forever */
    rf_loader *ld = rf_test_create_ok(&c);
    ck_assert_uint_eq(rf_loader_batches_per_epoch(ld), 9);
    rf_batch *b;
    for (int e = 0; e < 4; e++) {
        int n = 0, rc;
        while ((rc = rf_loader_next(ld, &b)) == 0) {
            ck_assert_uint_eq(b->count, 10);
            ck_assert_uint_eq(b->epoch, (uint64_t)e);
            rf_loader_release(ld, b, NULL);
            n++;
        }
        ck_assert_int_eq(rc, RF_EPOCH_END);
        ck_assert_int_eq(n, 9);
    }
    rf_loader_destroy(ld);
}
END_TEST

/* Save after every batch position and resume: before + after == one uninterrupted epoch, the
 * batches numbered on from where the state was saved. */
START_TEST(resume_at_every_position)
{
    make_data();
    const char *pat;
    rf_config c = base_config(&pat);
    c.batch_size = 8;
    c.epochs = 1;
    c.decode_threads = 2;
    capture *full = calloc(1, sizeof *full);
    capture_epoch(c, full);
    uint64_t nb = (N_SAMPLES + 7) / 8;
    for (uint64_t stop = 0; stop <= nb; stop++) {
        rf_loader *ld = rf_test_create_ok(&c);
        rf_batch *b;
        uint32_t n = 0;
        for (uint64_t k = 0; k < stop; k++) {
            ck_assert_int_eq(rf_loader_next(ld, &b), 0);
            for (uint32_t i = 0; i < b->count; i++, n++)
                ck_assert_str_eq(b->keys[i], full->keys[n]);
            rf_loader_release(ld, b, NULL);
        }
        uint8_t blob[256];
        uint64_t len;
        ck_assert_int_eq(rf_loader_state(ld, blob, sizeof blob, &len), 0);
        rf_stats saved;
        rf_stats_init(&saved);
        rf_loader_stats(ld, &saved);
        /* where the state resumes: epoch 0, the next one after the last batch */
        ck_assert_uint_eq(saved.resume_epoch, stop == nb ? 1 : 0);
        ck_assert_uint_eq(saved.epoch, 0);
        rf_loader_destroy(ld);
        rf_config r = c;
        r.resume_state = blob;
        r.resume_state_bytes = len;
        r.seed = 5; /* the blob's seed wins */
        ld = rf_test_create_ok(&r);
        rf_stats restored;
        rf_stats_init(&restored);
        rf_loader_stats(ld, &restored);
        ck_assert_uint_eq(restored.epoch, saved.resume_epoch);
        ck_assert_uint_eq(restored.resume_epoch, saved.resume_epoch);
        int rc;
        /* No replay: the first batch after a resume is ready after at most one ring's worth
         * of reads, wherever in the epoch the state was saved. */
        ck_assert_int_eq(rf_loader_next(ld, &b), 0);
        rf_stats st;
        rf_stats_init(&st);
        rf_loader_stats(ld, &st);
        ck_assert_uint_le(st.reads, (uint64_t)c.batch_size * (c.prefetch_depth ? c.prefetch_depth : 4) + 8);
        rf_loader_destroy(ld);
        ld = rf_test_create_ok(&r);
        if (stop == nb) {
            /* saved after the last batch: the resumed loader starts the next epoch */
            ck_assert_int_eq(rf_loader_next(ld, &b), 0);
            ck_assert_uint_eq(b->epoch, 1);
            ck_assert_uint_eq(b->index, 0);
            rf_loader_destroy(ld);
            continue;
        }
        uint64_t index = stop; /* the resumed epoch counts its batches on */
        while ((rc = rf_loader_next(ld, &b)) == 0) {
            ck_assert_uint_lt(n, N_SAMPLES);
            ck_assert_uint_eq(b->index, index++);
            for (uint32_t i = 0; i < b->count; i++, n++) {
                ck_assert_str_eq(b->keys[i], full->keys[n]);
                ck_assert_int_eq(memcmp((uint8_t *)b->data + (size_t)i * SIZE * SIZE * 3,
                                        full->pixels + (size_t)n * SIZE * SIZE * 3,
                                        SIZE * SIZE * 3), 0);
            }
            rf_loader_release(ld, b, NULL);
        }
        ck_assert_int_eq(rc, RF_EPOCH_END);
        ck_assert_uint_eq(n, N_SAMPLES);
        rf_loader_destroy(ld);
    }
    free(full->pixels);
    free(full);
}
END_TEST

START_TEST(destroy_mid_flight)
{
    make_data();
    const char *pat;
    rf_config c = base_config(&pat);
    c.batch_size = 4;
    for (int round = 0; round < 20; round++) {
        c.decode_threads = 1 + round % 4;
        c.prefetch_depth = 1 + round % 5;
        c.io_engine = round % 2 ? RF_IO_PREAD : RF_IO_AUTO;
        rf_loader *ld = rf_test_create_ok(&c);
        rf_batch *b;
        for (int k = 0; k < round % 4; k++) {
            int rc = rf_loader_next(ld, &b);
            if (rc == RF_ESTATE) { /* all slots leased: an error, never a hang */
                ck_assert_ptr_nonnull(strstr(rf_last_error(ld), "leased"));
                break;
            }
            ck_assert_int_eq(rc, 0);
            if (k % 2 == 0)
                rf_loader_release(ld, b, NULL); /* keep some leased */
        }
        rf_loader_destroy(ld); /* with reads, decodes and leases outstanding */
    }
    rf_loader_destroy(NULL);
}
END_TEST

START_TEST(set_epoch_restarts)
{
    make_data();
    const char *pat;
    rf_config c = base_config(&pat);
    c.batch_size = 20;
    c.epochs = 0;
    rf_loader *ld = rf_test_create_ok(&c);
    rf_batch *b;
    ck_assert_int_eq(rf_loader_next(ld, &b), 0);
    ck_assert_int_eq(rf_loader_set_epoch(ld, 5), RF_ESTATE);
    char first[64];
    rf_loader_release(ld, b, NULL);
    ck_assert_int_eq(rf_loader_set_epoch(ld, 5), 0);
    ck_assert_int_eq(rf_loader_next(ld, &b), 0);
    ck_assert_uint_eq(b->epoch, 5);
    ck_assert_uint_eq(b->index, 0);
    snprintf(first, sizeof first, "%s", b->keys[0]);
    rf_loader_release(ld, b, NULL);
    rf_loader_destroy(ld);
    c.start_epoch = 5;
    ld = rf_test_create_ok(&c);
    ck_assert_int_eq(rf_loader_next(ld, &b), 0);
    ck_assert_str_eq(b->keys[0], first);
    rf_loader_release(ld, b, NULL);
    ck_assert_int_eq(rf_loader_release(ld, b, NULL), RF_ESTATE);
    rf_loader_destroy(ld);
}
END_TEST

START_TEST(create_errors_are_clear)
{
    make_data();
    const char *nothing;
    rf_config c = rf_test_host_config(&nothing, "/nonexistent/shard-*.tar", 0);
    rf_loader *ld = (rf_loader *)1;
    char err[512];
    int rc = rf_loader_create(&c, &ld, err, sizeof err);
    ck_assert_msg(rc == RF_ENOFILES, "got %d: %s", rc, err);
    ck_assert_ptr_null(ld);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/shard-*.tar"));
    const char *pat;
    c = base_config(&pat);
    c.struct_size = 8;
    ck_assert_int_eq(rf_loader_create(&c, &ld, err, sizeof err), RF_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "rf_config_init"));
    c = base_config(&pat);
    c.batch_size = 1000;
    c.drop_last = 1;
    ck_assert_int_eq(rf_loader_create(&c, &ld, err, sizeof err), RF_EINVAL);
    c = base_config(&pat);
    c.image_width = 8193; /* each output side is limited like image_size */
    ck_assert_int_eq(rf_loader_create(&c, &ld, err, sizeof err), RF_EINVAL);
    ck_assert_msg(strstr(err, "image_width 8193 out of range 1..8192"), "%s", err);
    uint8_t junk[64] = {0};
    c = base_config(&pat);
    c.resume_state = junk;
    c.resume_state_bytes = sizeof junk;
    ck_assert_int_eq(rf_loader_create(&c, &ld, err, sizeof err), RF_ERESUME);
#ifndef RINGFEED_HAVE_CUDA
    c = base_config(&pat);
    c.device_kind = RF_DEVICE_CUDA;
    ck_assert_int_eq(rf_loader_create(&c, &ld, err, sizeof err), RF_ENODEV);
#endif
    ck_assert_str_eq(rf_strerror(RF_EFORMAT), "malformed shard");
    ck_assert_str_eq(rf_strerror(-2), "No such file or directory");
}
END_TEST

/* Threads of this process whose nice value (field 19 of /proc/self/task/T/stat) is `nice`. */
static int threads_at_nice(int nice)
{
    DIR *d = opendir("/proc/self/task");
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char path[300], buf[1024];
        snprintf(path, sizeof path, "/proc/self/task/%s/stat", de->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue; /* the thread exited meanwhile */
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[len] = 0;
        const char *p = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
        int field = 2;
        for (; p && *p && field < 19; p++)
            if (*p == ' ')
                field++;
        n += field == 19 && atoi(p) == nice;
    }
    closedir(d);
    return n;
}

/* decode_nice: exactly the decode threads run nicer, by 10 unless set (rf_config_init's
 * AUTO, and what rf_loader_config reports), by what is set, or not at all with 0 (a zeroed
 * struct's value too); out of range is refused. */
START_TEST(decode_nice_applies_to_decode_threads)
{
    make_data();
    const char *pat;
    rf_config c = base_config(&pat);
    c.decode_threads = 3;
    ck_assert_uint_eq(c.decode_nice, RF_DECODE_NICE_AUTO);
    /* Decode threads add decode_nice to the niceness they start with, the test's own (not 0
     * when ctest itself runs under nice). A decoder that has not been scheduled yet has not
     * set itself: give it 5 s. At 19 every thread of the process would count. */
    errno = 0;
    int base = getpriority(PRIO_PROCESS, 0);
    ck_assert_int_eq(errno, 0);
    const struct {
        uint32_t set;
        int add;
    } cases[] = {{RF_DECODE_NICE_AUTO, 10}, {4, 4}, {0, 0}};
    rf_loader *ld;
    char err[512];
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        c.decode_nice = cases[k].set;
        ck_assert_msg(rf_loader_create(&c, &ld, err, sizeof err) == 0, "%s", err);
        rf_config got;
        rf_config_init(&got);
        ck_assert_int_eq(rf_loader_config(ld, &got), 0);
        ck_assert_uint_eq(got.decode_nice, (uint32_t)cases[k].add);
        rf_batch *b;
        ck_assert_int_eq(rf_loader_next(ld, &b), 0);
        int want = RF_MIN(base + cases[k].add, 19), n = 0;
        if (want < 19) {
            /* with 0 the decode threads are among the threads at base, with the rest */
            for (int i = 0; i < 500 && (n = threads_at_nice(want)) < 3; i++)
                usleep(10000);
            if (cases[k].add)
                ck_assert_int_eq(n, 3);
            else
                ck_assert_int_ge(n, 3 + 1); /* and the test's own thread */
            if (cases[k].add != 10 && base + 10 < 19) /* nor the default as well */
                ck_assert_int_eq(threads_at_nice(base + 10), 0);
        }
        rf_loader_release(ld, b, NULL);
        rf_loader_destroy(ld);
    }
    c.decode_nice = 20;
    ck_assert_int_eq(rf_loader_create(&c, &ld, err, sizeof err), RF_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "decode_nice"));
}
END_TEST

/* rf_loader_next across epoch ends (epochs 0: for ever). */
static int next_of_any_epoch(rf_loader *ld, rf_batch **b)
{
    int rc;
    while ((rc = rf_loader_next(ld, b)) == RF_EPOCH_END)
        ;
    return rc;
}

/* A consumer slower than the loader (a training loop) leaves the ring full: the I/O threads
 * then wait for a slot, and only a released slot wakes them, not every sample a decode thread
 * finishes; in skip mode not every outcome either, only those that let the skip walk move
 * where it matters. Each finished sample woke all four of them to find the ring still full:
 * on the H200 a training run switched context four times as often as with one I/O thread, and
 * the woken threads preempted the training loop's. Counted as the process's voluntary context
 * switches per batch (the test thread's own sleep is one): 9-12 in both modes, against 61-75
 * before (skip mode: 68-75 with the fail mode's fix alone). */
START_TEST(full_ring_does_not_wake_io_per_sample)
{
    /* an epoch of 1,024 samples: skip mode's drains (a phase's start, the epoch's end) then
     * come every few dozen batches, as in a real epoch, not every batch */
    char *dir = rf_test_mkdtemp("fullring"), pattern[512];
    ck_assert_int_eq(rf_test_make_shards(dir, 4, 256, CLASSES, SEED, 1, 48), 0);
    snprintf(pattern, sizeof pattern, "%s/shard-*.tar", dir);
    for (int skip = 0; skip < 2; skip++) {
        const char *pat;
        rf_config c = rf_test_host_config(&pat, pattern, SIZE);
        c.decode_threads = 2;
        c.io_threads = 4;
        c.prefetch_depth = 2;
        c.batch_size = 16;
        c.epochs = 0;
        c.on_error = skip ? RF_ON_ERROR_SKIP : RF_ON_ERROR_FAIL;
        rf_loader *ld = rf_test_create_ok(&c);
        rf_batch *b;
        for (int i = 0; i < 4; i++) { /* the ring fills behind the first batches */
            ck_assert_int_eq(next_of_any_epoch(ld, &b), 0);
            ck_assert_int_eq(rf_loader_release(ld, b, NULL), 0);
        }
        enum { BATCHES = 24 };
        struct rusage r0, r1;
        getrusage(RUSAGE_SELF, &r0);
        for (int i = 0; i < BATCHES; i++) {
            ck_assert_int_eq(next_of_any_epoch(ld, &b), 0);
            usleep(5000); /* the training step: the loader is ahead, the ring full */
            ck_assert_int_eq(rf_loader_release(ld, b, NULL), 0);
        }
        getrusage(RUSAGE_SELF, &r1);
        long per_batch = (r1.ru_nvcsw - r0.ru_nvcsw) / BATCHES;
        ck_assert_msg(per_batch <= (long)c.batch_size, "%ld voluntary context switches per batch "
                      "of %u samples with a full ring (on_error %s)", per_batch, c.batch_size,
                      skip ? "skip" : "fail");
        rf_loader_destroy(ld);
    }
}
END_TEST

/* A release frees one slot, work for one I/O thread: it wakes one, which passes the wake on
 * only when it took all it asked for (a batch of more samples than its queue holds). A
 * broadcast woke all four at every step, and on the training loop's thread the call then
 * took ~350-470 us instead of ~20 while they fought for the mutex (2-CPU host). Counted as
 * the I/O threads' own voluntary context switches per released batch (thread names,
 * rf-io-N): one per batch for the woken thread, plus its reads', against at least four with
 * the broadcast. */
START_TEST(release_wakes_one_io_thread)
{
    const char *pat;
    rf_config c = base_config(&pat);
    c.decode_threads = 2;
    c.io_threads = 4;
    c.prefetch_depth = 2;
    c.batch_size = 16;
    c.epochs = 0;
    rf_loader *ld = rf_test_create_ok(&c);
    ck_assert_int_eq(rf_test_threads_named("rf-io-", 1, NULL), 4);
    rf_batch *b;
    for (int i = 0; i < 4; i++) { /* the ring fills behind the first batches */
        ck_assert_int_eq(next_of_any_epoch(ld, &b), 0);
        ck_assert_int_eq(rf_loader_release(ld, b, NULL), 0);
    }
    enum { BATCHES = 24 };
    long sw0, sw1;
    rf_test_threads_named("rf-io-", 1, &sw0);
    for (int i = 0; i < BATCHES; i++) {
        ck_assert_int_eq(next_of_any_epoch(ld, &b), 0);
        usleep(5000); /* the training step: the loader is ahead, the ring full */
        ck_assert_int_eq(rf_loader_release(ld, b, NULL), 0);
    }
    usleep(5000);
    rf_test_threads_named("rf-io-", 1, &sw1);
    double per_batch = (double)(sw1 - sw0) / BATCHES;
    ck_assert_msg(per_batch < 3.0, "the I/O threads switched %.1f times per released batch",
                  per_batch);
    rf_loader_destroy(ld);
}
END_TEST

/* float output: (pixel - mean) / std in the requested layout, equal to converting the uint8
 * batch of the same seed by hand. */
START_TEST(float_output_matches_uint8)
{
    const char *pat;
    rf_config c = base_config(&pat);
    c.epochs = 1;
    c.batch_size = 33;
    c.order = RF_ORDER_NONE;
    capture *u8 = calloc(1, sizeof *u8);
    capture_epoch(c, u8); /* NHWC uint8 */
    const float mean[3] = {123.675f, 116.28f, 103.53f}, sd[3] = {58.395f, 57.12f, 57.375f};
    static const uint32_t dtypes[] = {RF_DTYPE_FLOAT32, RF_DTYPE_FLOAT16, RF_DTYPE_BFLOAT16};
    for (int d = 0; d < 3; d++) {
        c.dtype = dtypes[d];
        c.layout = RF_LAYOUT_NCHW;
        memcpy(c.mean, mean, sizeof mean);
        memcpy(c.std, sd, sizeof sd);
        rf_loader *ld = rf_test_create_ok(&c);
        rf_batch *b;
        uint32_t n = 0;
        size_t px = SIZE * SIZE, esz = dtypes[d] == RF_DTYPE_FLOAT32 ? 4 : 2;
        uint8_t *want = malloc(px * 3 * esz);
        while (rf_loader_next(ld, &b) == 0) {
            ck_assert_uint_eq(b->dtype, dtypes[d]);
            ck_assert_uint_eq(b->data_bytes, (uint64_t)b->count * px * 3 * esz);
            ck_assert_int_eq(b->shape[1], 3);
            for (uint32_t i = 0; i < b->count; i++, n++) {
                rf_convert_image_cpu(u8->pixels + (size_t)n * px * 3, want, SIZE, SIZE,
                                     dtypes[d], RF_LAYOUT_NCHW, mean, sd);
                ck_assert_int_eq(memcmp(want, (uint8_t *)b->data + i * px * 3 * esz, px * 3 * esz), 0);
            }
            rf_loader_release(ld, b, NULL);
        }
        ck_assert_uint_eq(n, N_SAMPLES);
        free(want);
        rf_loader_destroy(ld);
    }
    /* spot-check the conversion itself against float math */
    uint8_t px[3] = {0, 128, 255};
    float f[3];
    rf_convert_image_cpu(px, f, 1, 1, RF_DTYPE_FLOAT32, RF_LAYOUT_NHWC, mean, sd);
    ck_assert_float_eq_tol(f[0], (0 - 123.675f) / 58.395f, 1e-5);
    ck_assert_float_eq_tol(f[2], (255 - 103.53f) / 57.375f, 1e-5);
    ck_assert_uint_eq(rf_f32_to_f16(1.0f), 0x3c00);
    ck_assert_uint_eq(rf_f32_to_f16(-2.5f), 0xc100);
    ck_assert_uint_eq(rf_f32_to_f16(65520.0f), 0x7c00); /* rounds to inf */
    ck_assert_uint_eq(rf_f32_to_bf16(1.0f), 0x3f80);
    ck_assert_uint_eq(rf_f32_to_bf16(1.00390625f), 0x3f80); /* tie to even */
    free(u8->pixels);
    free(u8);
}
END_TEST

/* Shard order: still exactly once, and each window of consecutive samples comes from at most
 * shard_window shards. */
START_TEST(shard_order_is_local_and_complete)
{
    const char *pat;
    rf_config c = base_config(&pat);
    c.epochs = 2;
    c.batch_size = 11;
    c.order = RF_ORDER_SHARD;
    c.shard_window = 1;
    rf_loader *ld = rf_test_create_ok(&c);
    for (int e = 0; e < 2; e++) {
        uint32_t seen[N_SAMPLES] = {0}, n = 0, last_shard = UINT32_MAX, switches = 0;
        rf_batch *b;
        while (rf_loader_next(ld, &b) == 0) {
            for (uint32_t i = 0; i < b->count; i++, n++) {
                uint64_t idx = key_index(b->keys[i]);
                seen[idx]++;
                uint32_t shard = (uint32_t)(idx / N_PER_SHARD);
                switches += shard != last_shard;
                last_shard = shard;
            }
            rf_loader_release(ld, b, NULL);
        }
        ck_assert_uint_eq(n, N_SAMPLES);
        for (int i = 0; i < N_SAMPLES; i++)
            ck_assert_uint_eq(seen[i], 1);
        ck_assert_uint_eq(switches, N_SHARDS); /* window 1: one shard after the other */
    }
    rf_loader_destroy(ld);
}
END_TEST

/* One epoch on every rank of a world: keys per rank, in order, with padding flags. */
static uint32_t run_ranks(rf_config c, uint32_t world, const void *blob, uint64_t blob_len,
                          uint32_t *seen, uint64_t *batches_per_rank, uint32_t stop_after)
{
    uint32_t padded = 0;
    *batches_per_rank = UINT64_MAX;
    for (uint32_t r = 0; r < world; r++) {
        c.rank = r;
        c.world_size = world;
        c.resume_state = blob;
        c.resume_state_bytes = blob_len;
        rf_loader *ld = rf_test_create_ok(&c);
        rf_batch *b;
        uint64_t nb = 0;
        while ((stop_after == 0 || nb < stop_after) && rf_loader_next(ld, &b) == 0) {
            for (uint32_t i = 0; i < b->count; i++) {
                if (b->is_padding[i])
                    padded++;
                else
                    seen[key_index(b->keys[i])]++;
            }
            rf_loader_release(ld, b, NULL);
            nb++;
        }
        if (*batches_per_rank == UINT64_MAX)
            *batches_per_rank = nb;
        ck_assert_uint_eq(nb, *batches_per_rank); /* every rank the same number of batches */
        rf_loader_destroy(ld);
    }
    return padded;
}

START_TEST(ranks_disjoint_complete_with_padding)
{
    const char *pat;
    rf_config c = base_config(&pat);
    c.epochs = 1;
    static const uint32_t worlds[] = {2, 3, 4, 7};
    static const uint32_t batches[] = {5, 8, 4, 3};
    for (int w = 0; w < 4; w++) {
        c.batch_size = batches[w];
        uint32_t seen[N_SAMPLES] = {0};
        uint64_t nb;
        uint32_t padded = run_ranks(c, worlds[w], NULL, 0, seen, &nb, 0);
        for (int i = 0; i < N_SAMPLES; i++)
            ck_assert_uint_eq(seen[i], 1);
        uint32_t per = (N_SAMPLES + worlds[w] - 1) / worlds[w];
        ck_assert_uint_eq(padded, per * worlds[w] - N_SAMPLES);
        ck_assert_uint_eq(nb, (per + batches[w] - 1) / batches[w]);
    }
}
END_TEST

/* Save mid-epoch in world w1 (every rank at the same batch), resume in world w2: the samples
 * before plus after are exactly the epoch. */
START_TEST(resume_across_world_sizes)
{
    const char *pat;
    rf_config c = base_config(&pat);
    c.epochs = 1;
    c.batch_size = 4;
    static const uint32_t w1s[] = {2, 3, 1}, w2s[] = {3, 1, 2};
    for (int t = 0; t < 3; t++) {
        for (uint32_t stop = 1; stop * 4 * w1s[t] < N_SAMPLES; stop += 3) {
            uint32_t seen[N_SAMPLES] = {0};
            uint64_t nb;
            c.rank = 0;
            run_ranks(c, w1s[t], NULL, 0, seen, &nb, stop);
            /* rank 0's state after `stop` batches stands for the whole world */
            c.world_size = w1s[t];
            rf_loader *ld = rf_test_create_ok(&c);
            rf_batch *b;
            for (uint32_t k = 0; k < stop; k++) {
                ck_assert_int_eq(rf_loader_next(ld, &b), 0);
                rf_loader_release(ld, b, NULL);
            }
            uint8_t blob[128];
            uint64_t len;
            ck_assert_int_eq(rf_loader_state(ld, blob, sizeof blob, &len), 0);
            rf_loader_destroy(ld);
            run_ranks(c, w2s[t], blob, len, seen, &nb, 0);
            for (int i = 0; i < N_SAMPLES; i++)
                ck_assert_msg(seen[i] == 1, "w %u->%u stop %u: sample %d seen %u", w1s[t],
                              w2s[t], stop, i, seen[i]);
        }
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("loader");
    TCase *tc = tcase_create("loader");
    tcase_set_timeout(tc, 300);
    /* Runs once in the parent before Check forks: shards only, no rings or contexts. */
    tcase_add_unchecked_fixture(tc, make_data, NULL);
    tcase_add_test(tc, exactly_once_threads_depths_batches);
    tcase_add_test(tc, exactly_once_pread);
    tcase_add_test(tc, deterministic_across_threads_depth_engine);
    tcase_add_test(tc, no_shuffle_is_dataset_order);
    tcase_add_test(tc, pixels_match_direct_decode);
    tcase_add_test(tc, gpu_decode_matches_full_scale_decode);
    tcase_add_test(tc, gpu_decode_damage_names_member);
    tcase_add_test(tc, hw_decode_matches_full_scale_decode);
    tcase_add_test(tc, drop_last_and_forever);
    tcase_add_test(tc, resume_at_every_position);
    tcase_add_test(tc, destroy_mid_flight);
    tcase_add_test(tc, set_epoch_restarts);
    tcase_add_test(tc, non_square_batches_match_direct_decode);
    tcase_add_test(tc, create_errors_are_clear);
    tcase_add_test(tc, decode_nice_applies_to_decode_threads);
    tcase_add_test(tc, full_ring_does_not_wake_io_per_sample);
    tcase_add_test(tc, release_wakes_one_io_thread);
    tcase_add_test(tc, float_output_matches_uint8);
    tcase_add_test(tc, shard_order_is_local_and_complete);
    tcase_add_test(tc, ranks_disjoint_complete_with_padding);
    tcase_add_test(tc, resume_across_world_sizes);
    suite_add_tcase(s, tc);
    return rf_test_run_suite(s);
}
