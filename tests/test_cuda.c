/* test_cuda.c — the CUDA backend on a real GPU (exit 77 = skipped without one): device batches
 * equal the host backend's, the caller's stream waits for the copy, conversions on the GPU
 * match the CPU ones, token widening, token files over HTTP onto the device (under
 * tests/servers/servers.py, which the suite starts), and destroy with copies in flight. Each
 * test runs in its own forked child, which creates its own CUDA context. */
#include <check.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend/convert.h"
#include "base/common.h"
#include "pipeline/testing.h"
#include "ringfeed.h"
#include "testutil.h"

#define SIZE 48
static char *g_dir, g_pat[512], g_rpat[512];
/* What mem_cfg uses: the GPU-decode tests switch to the restart-marked copy (each test runs
 * in its own forked child, so a switch stays within its test). */
static const char *g_use = g_pat, *g_mixed[2];
static uint32_t g_gpu, g_size = SIZE, g_percent, g_hw;
static uint32_t g_height, g_width; /* non-square output; 0: g_size */
static uint32_t g_batch = 16;
static uint32_t g_crop = RF_CROP_RANDOM, g_resize_shorter; /* crop, resize_shorter */
static const char *g_views, *g_buckets; /* multi_crop, size_buckets */
/* 1: decode_schedule BALANCE on the device against the host backend's CPU run, at full scale
 * on both; 2: the same with dct_scaling ON on both (the crops the CPU scales stay on the
 * CPU); 0: the CPU alone (AUTO's choice) unless gpu_decode or hw_decode_percent ask for the
 * manual split. */
static int g_balance;
/* With g_balance: the shares held at 0 after every controller step (a training step that
 * keeps the GPU busy) instead of moved per batch (create_perturbed). */
static int g_zero_shares;
/* hw_decode_percent: nvJPEG does not promise libjpeg's islow IDCT to the bit, so uint8 batches
 * are compared within these bounds. On the H200 machine every byte was identical (the test
 * prints the figures); a wrong plane geometry gives differences in the tens. */
#define HW_MAX_DIFF 2
#define HW_MEAN_DIFF 0.02

static void make_data(void)
{
    g_dir = rf_test_mkdtemp("cuda");
    ck_assert_int_eq(rf_test_make_shards(g_dir, 2, 40, 10, 7, 1, 200), 0);
    snprintf(g_pat, sizeof g_pat, "%s/shard-*.tar", g_dir);
    char *r = rf_test_mkdtemp("cuda-restart");
    ck_assert_int_eq(rf_test_make_restart_shards(r, 2, 40, 10, 7, 200), 0);
    snprintf(g_rpat, sizeof g_rpat, "%s/shard-*.tar", r);
}

/* The suite's shards on device_kind: SIZE px, batches of 16, one epoch, seed 11, depth 3. */
static rf_config mem_cfg(uint32_t device_kind, const char **pat)
{
    rf_config c = rf_test_host_config(pat, g_use, g_size);
    c.image_height = g_height, c.image_width = g_width;
    c.gpu_decode = g_gpu;
    c.gpu_decode_percent = g_percent;
    c.hw_decode_percent = g_hw;
    if (g_balance) {
        /* 1: both at full scale; 2: both DCT-scaling the crops it applies to, which BALANCE
         * then leaves on the CPU */
        c.dct_scaling = g_balance == 1 ? RF_DCT_SCALING_OFF : RF_DCT_SCALING_ON;
        c.decode_schedule = device_kind == RF_DEVICE_CUDA ? RF_SCHEDULE_BALANCE : RF_SCHEDULE_CPU;
    } else if (!g_gpu && !g_hw)
        c.decode_schedule = RF_SCHEDULE_CPU;
    if (g_mixed[0]) /* plain and restart-marked shards together: batches of both kinds */
        c.shards = g_mixed, c.shard_count = 2;
    c.batch_size = g_batch;
    c.crop = g_crop, c.resize_shorter = g_resize_shorter, c.multi_crop = g_views;
    if ((c.size_buckets = g_buckets) != NULL) /* the slot: the largest bucket */
        c.image_height = c.image_width = 0;
    if (g_crop >= RF_CROP_LETTERBOX || g_views) /* the GPU paths decode at full scale: so does
                                                 * the host */
        c.dct_scaling = RF_DCT_SCALING_OFF;
    c.epochs = 1;
    c.seed = 11;
    c.device_kind = device_kind;
    c.prefetch_depth = 3;
    return c;
}

/* A loader for c with the test hooks h, which must be created. */
static rf_loader *create_hooked(const rf_config *c, rf_test_hooks h)
{
    rf_loader *ld = NULL;
    char err[512] = "";
    int rc = rf_loader_create_hooked(c, &h, &ld, err, sizeof err);
    ck_assert_msg(rc == 0, "create: %d %s", rc, err);
    return ld;
}

/* g_zero_shares' hook: a training step that keeps the GPU busy, as the controller would see
 * it after every step. */
static void zero_shares(void *ctx, uint64_t seq, uint32_t *gpu, uint32_t *hw)
{
    (void)ctx, (void)seq;
    *gpu = *hw = 0;
}

/* BALANCE on the device with the shares moved per batch by the test hook (every route takes
 * samples, at times that differ from batch to batch), as test_schedule does on the host: the
 * controller starts on the CPU only and needs windows of batches to move, more than these
 * short runs have. With g_zero_shares, held at 0 instead, and each handout acted upon before
 * the consumer goes on (sched_open_join): the stage thread steps the shares, so without it the
 * refills of a fast run may still be placed with the first fill's shares. */
static rf_loader *create_perturbed(const rf_config *c)
{
    return create_hooked(c, (rf_test_hooks){
                                .sched_perturb = g_zero_shares ? zero_shares : rf_test_sched_perturb,
                                .sched_open_join = g_zero_shares});
}

/* hw_decode_percent on the device: the engines open on the opener thread started with the
 * first batch, and until they are ready the engines' share goes to the kernels or the CPU. The
 * tests of the engines' decoding itself need every sample of that share on them, so create
 * opens them first there (the test hook sched_open_at_create); g_hw_deferred leaves the
 * library's own start-up (hw_decode_deferred_first_batch). */
static int g_hw_deferred;

static rf_loader *create_engines_open(const rf_config *c)
{
    return create_hooked(c, (rf_test_hooks){.sched_open_at_create = 1});
}

/* The suite's loader for c: BALANCE perturbed, the engines opened first (above), or plain. */
static rf_loader *create_for(const rf_config *c)
{
    if (g_balance && c->device_kind == RF_DEVICE_CUDA)
        return create_perturbed(c);
    if (g_hw && !g_hw_deferred && c->device_kind == RF_DEVICE_CUDA)
        return create_engines_open(c);
    return rf_test_create_ok(c);
}

static rf_loader *mk(uint32_t device_kind, uint32_t dtype, uint32_t layout, uint32_t depth)
{
    const char *pat;
    rf_config c = mem_cfg(device_kind, &pat);
    c.dtype = dtype;
    c.layout = layout;
    c.prefetch_depth = depth;
    const float mean[3] = {123.675f, 116.28f, 103.53f}, sd[3] = {58.395f, 57.12f, 57.375f};
    if (dtype != RF_DTYPE_UINT8) {
        memcpy(c.mean, mean, sizeof mean);
        memcpy(c.std, sd, sizeof sd);
    }
    return create_for(&c);
}

#define CK_CUDA(x) ck_assert_msg((x) == cudaSuccess, "%s: %s", #x, cudaGetErrorString(cudaGetLastError()))

/* crop NATIVE: the sizes agree, and the bytes of each slot past its sample's own size (which
 * nothing writes) are set to the host's in `back`, so that the whole batches compare. */
static void native_to_compare(const rf_batch *a, const rf_batch *b, uint8_t *back)
{
    ck_assert_ptr_nonnull(a->sizes);
    ck_assert_int_eq(memcmp(a->sizes, b->sizes, (size_t)a->count * 8), 0);
    uint64_t slot = a->data_bytes / a->count;
    for (uint32_t i = 0; i < a->count; i++) {
        uint64_t used = (uint64_t)b->sizes[2 * i] * (uint64_t)b->sizes[2 * i + 1] * 3;
        ck_assert_uint_eq(a->sample_offsets[i], (uint64_t)i * slot);
        memcpy(back + i * slot + used, (const uint8_t *)b->data + i * slot + used, slot - used);
    }
}

/* Every batch: wait on our own stream, copy back on it, compare with the host backend. */
static void compare_with_host(uint32_t dtype, uint32_t layout)
{
    rf_loader *dev = mk(RF_DEVICE_CUDA, dtype, layout, 3);
    rf_loader *host = mk(RF_DEVICE_HOST, dtype, layout, 3);
    cudaStream_t st;
    CK_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    rf_batch *a, *b;
    int n = 0;
    uint32_t samples = 0;
    uint64_t diff_sum = 0, diff_n = 0, diff_bytes = 0;
    int diff_max = 0, rc;
    while ((rc = rf_loader_next(dev, &a)) == 0) {
        ck_assert_int_eq(rf_loader_next(host, &b), 0);
        ck_assert_uint_eq(a->device_kind, RF_DEVICE_CUDA);
        ck_assert_uint_eq(a->data_bytes, b->data_bytes);
        ck_assert_ptr_nonnull(a->event);
        ck_assert_int_eq(rf_batch_wait(a, st), 0);
        uint8_t *back = malloc(a->data_bytes);
        int32_t labels[64];
        CK_CUDA(cudaMemcpyAsync(back, a->data, a->data_bytes, cudaMemcpyDeviceToHost, st));
        CK_CUDA(cudaMemcpyAsync(labels, a->labels_device, a->count * 4, cudaMemcpyDeviceToHost, st));
        CK_CUDA(cudaStreamSynchronize(st));
        ck_assert_int_eq(memcmp(labels, b->labels, a->count * 4), 0);
        if (g_crop == RF_CROP_NATIVE || g_buckets) /* only each sample's own size is written */
            native_to_compare(a, b, back);
        if (g_buckets)
            ck_assert(a->bucket == b->bucket && a->bucket_height == b->bucket_height);
        if (g_crop >= RF_CROP_LETTERBOX)
            ck_assert_int_eq(memcmp(a->letterbox, b->letterbox, (size_t)a->count * 16), 0);
        if (dtype == RF_DTYPE_UINT8 && (g_hw || (g_balance && !g_zero_shares))) {
            for (uint64_t i = 0; i < a->data_bytes; i++) {
                int d = abs((int)back[i] - (int)((const uint8_t *)b->data)[i]);
                diff_sum += (uint64_t)d, diff_bytes += d != 0;
                diff_max = d > diff_max ? d : diff_max;
            }
            diff_n += a->data_bytes;
        } else if (dtype == RF_DTYPE_UINT8) {
            ck_assert_int_eq(memcmp(back, b->data, a->data_bytes), 0);
        } else {
            /* GPU and CPU may round (x*scale+bias) differently (FMA): one unit in the last
             * place of the output type at most. */
            uint64_t elems = a->data_bytes / (dtype == RF_DTYPE_FLOAT32 ? 4 : 2), bad = 0;
            for (uint64_t i = 0; i < elems; i++) {
                if (dtype == RF_DTYPE_FLOAT32) {
                    float x = ((float *)back)[i], y = ((const float *)b->data)[i];
                    bad += fabsf(x - y) > 1e-5f * (1 + fabsf(y));
                } else {
                    int x = ((uint16_t *)back)[i], y = ((const uint16_t *)b->data)[i];
                    bad += abs(x - y) > 1;
                }
            }
            ck_assert_uint_eq(bad, 0);
        }
        free(back);
        samples += a->count; /* read before the release hands the batch back */
        ck_assert_int_eq(rf_loader_release(dev, a, st), 0);
        rf_loader_release(host, b, NULL);
        n++;
    }
    ck_assert_msg(rc == RF_EPOCH_END || rc == RF_DONE, "the device loader after %d batches "
                  "(%u samples): %d %s", n, samples, rc, rf_last_error(dev));
    /* 80 (160 mixed) samples in batches of g_batch, the last one partial (with size buckets
     * the last one of each bucket) */
    ck_assert_uint_eq(samples, g_mixed[0] ? 160 : 80);
    if (!g_buckets)
        ck_assert_int_eq(n, ((g_mixed[0] ? 160 : 80) + g_batch - 1) / g_batch);
    if (diff_n) {
        double mean = (double)diff_sum / (double)diff_n;
        printf("hw_decode %u%%: %.3f%% of bytes differ from the host's, mean |diff| %.4f, max "
               "%d\n", g_hw, 100.0 * (double)diff_bytes / (double)diff_n, mean, diff_max);
        ck_assert_msg(diff_max <= HW_MAX_DIFF && mean <= HW_MEAN_DIFF,
                      "engine pixels: max |diff| %d, mean %.4f", diff_max, mean);
    }
    rf_loader_destroy(dev);
    rf_loader_destroy(host);
    cudaStreamDestroy(st);
}

START_TEST(uint8_nhwc_equals_host) { compare_with_host(RF_DTYPE_UINT8, RF_LAYOUT_NHWC); }
END_TEST
START_TEST(uint8_nchw_equals_host) { compare_with_host(RF_DTYPE_UINT8, RF_LAYOUT_NCHW); }
END_TEST
START_TEST(float32_nchw_normalized) { compare_with_host(RF_DTYPE_FLOAT32, RF_LAYOUT_NCHW); }
END_TEST
START_TEST(float16_nhwc_normalized) { compare_with_host(RF_DTYPE_FLOAT16, RF_LAYOUT_NHWC); }
END_TEST
START_TEST(bfloat16_nchw_normalized) { compare_with_host(RF_DTYPE_BFLOAT16, RF_LAYOUT_NCHW); }
END_TEST

/* GPU decode (gpujpeg.h): the kernels' batches equal the host backend's, which runs the same
 * code on the CPU and is itself byte-exact with libjpeg (tests/test_decode.c), in every output
 * type and layout; nearly every sample took the GPU path. */
/* One epoch of the suite's loader on device_kind, read to the end: its stats. */
static rf_stats epoch_stats(uint32_t device_kind, uint32_t dtype, uint32_t layout)
{
    rf_loader *ld = mk(device_kind, dtype, layout, 3);
    rf_batch *b;
    while (rf_loader_next(ld, &b) == 0)
        rf_loader_release(ld, b, NULL);
    rf_stats st;
    rf_stats_init(&st);
    rf_loader_stats(ld, &st);
    rf_loader_destroy(ld);
    return st;
}

static void gpu_decode_equals_host(uint32_t dtype, uint32_t layout, uint32_t size, int mixed)
{
    g_use = g_rpat, g_gpu = 1, g_size = size;
    if (mixed)
        g_mixed[0] = g_pat, g_mixed[1] = g_rpat;
    compare_with_host(dtype, layout);
    rf_stats st = epoch_stats(RF_DEVICE_CUDA, dtype, layout);
    /* every image takes the GPU path: the restart-marked ones as restart packets, the plain
     * ones of a mixed run as plain packets */
    ck_assert_uint_eq(st.gpu_decoded, mixed ? 160 : 80);
    ck_assert_uint_eq(st.samples_decoded, mixed ? 160 : 80);
}

START_TEST(gpu_decode_uint8_nhwc) { gpu_decode_equals_host(RF_DTYPE_UINT8, RF_LAYOUT_NHWC, 224, 0); }
END_TEST
START_TEST(gpu_decode_uint8_nchw) { gpu_decode_equals_host(RF_DTYPE_UINT8, RF_LAYOUT_NCHW, 224, 0); }
END_TEST
START_TEST(gpu_decode_float32_nchw) { gpu_decode_equals_host(RF_DTYPE_FLOAT32, RF_LAYOUT_NCHW, 224, 0); }
END_TEST
START_TEST(gpu_decode_uint8_mixed_cpu) { gpu_decode_equals_host(RF_DTYPE_UINT8, RF_LAYOUT_NHWC, 96, 1); }
END_TEST
START_TEST(gpu_decode_bf16_mixed_cpu) { gpu_decode_equals_host(RF_DTYPE_BFLOAT16, RF_LAYOUT_NHWC, 96, 1); }
END_TEST

/* Non-square output: the kernels' rows (height blocks) and columns (width per row) in both
 * layouts, with the CPU-decoded samples of a mixed run copied into the same batch. */
START_TEST(gpu_decode_non_square)
{
    g_height = 160, g_width = 224;
    gpu_decode_equals_host(RF_DTYPE_UINT8, RF_LAYOUT_NCHW, 224, 0);
}
END_TEST
START_TEST(gpu_decode_non_square_mixed_cpu)
{
    g_height = 224, g_width = 96;
    gpu_decode_equals_host(RF_DTYPE_BFLOAT16, RF_LAYOUT_NHWC, 224, 1);
}
END_TEST

static int hw_available(void);

/* crop letterbox, center_pad and native on the GPU paths: the kernels and the engines resize
 * onto the crop's rectangle of the output and pad the rest (native: each image packed at its
 * own size), the batches equal to the host backend's (the same code on the CPU, equal to the
 * CPU path: tests/test_sizes.c), letterbox rows and sizes too; every image on the kernels,
 * then on the engines, in both layouts, outputs larger and smaller than the images. */
/* uint8 in layout, every image on the kernels (restart-marked shards), then, where the GPU
 * has them, every image on the engines (plain shards): each run's batches equal the host
 * backend's. */
static void on_kernels_then_engines(uint32_t layout)
{
    g_balance = 0, g_hw = 0, g_gpu = 1, g_use = g_rpat;
    compare_with_host(RF_DTYPE_UINT8, layout);
    ck_assert_uint_eq(epoch_stats(RF_DEVICE_CUDA, RF_DTYPE_UINT8, layout).gpu_decoded, 80);
    g_gpu = 0, g_hw = 100, g_use = g_pat;
    if (!hw_available())
        return;
    compare_with_host(RF_DTYPE_UINT8, layout);
    ck_assert_uint_eq(epoch_stats(RF_DEVICE_CUDA, RF_DTYPE_UINT8, layout).hw_decoded, 80);
}

START_TEST(gpu_paths_padded_crops)
{
    static const uint32_t crops[] = {RF_CROP_LETTERBOX, RF_CROP_CENTER_PAD, RF_CROP_NATIVE};
    for (int k = 0; k < 6; k++) {
        g_crop = crops[k % 3], g_resize_shorter = k % 3 == 1 ? 120 : 0;
        g_height = k < 3 ? 160 : 96, g_width = k < 3 ? 224 : 128;
        on_kernels_then_engines(k & 1 ? RF_LAYOUT_NCHW : RF_LAYOUT_NHWC);
    }
}
END_TEST

/* size_buckets on the GPU paths: each image letterboxed into its batch's bucket, packed from
 * its sample's start; the batches equal the host backend's, on the kernels and the engines,
 * in both layouts. */
START_TEST(gpu_paths_size_buckets)
{
    g_buckets = "96x160,128x128,160x96", g_crop = RF_CROP_LETTERBOX;
    on_kernels_then_engines(RF_LAYOUT_NHWC);
    on_kernels_then_engines(RF_LAYOUT_NCHW);
}
END_TEST

/* multi_crop on the GPU paths: one packet a sample holding every view's plans (the union of
 * what they read decoded once), the views written one after another into the sample's row;
 * the batches equal the host backend's, on the kernels, the engines and BALANCE. */
START_TEST(gpu_paths_multi_crop)
{
    g_views = "2x96x80:0.4-1,4x32:0.05-0.4", g_crop = RF_CROP_RANDOM;
    g_gpu = 0, g_use = g_rpat, g_balance = 1;
    compare_with_host(RF_DTYPE_UINT8, RF_LAYOUT_NHWC);
    on_kernels_then_engines(RF_LAYOUT_NHWC);
    on_kernels_then_engines(RF_LAYOUT_NCHW);
}
END_TEST

/* Plain shards (no restart markers): every image becomes a plain packet, whose segments (the
 * CPU walker's bit offsets and DC predictors) the interval kernel decodes; the batches equal
 * the host backend's byte for byte (which runs the same code on the CPU and equals the CPU
 * path with DCT scaling off: tests/test_decode.c, tests/test_loader.c), uint8 and bfloat16,
 * NHWC and NCHW, square and not. */
static void gpu_plain_equals_host(uint32_t dtype, uint32_t layout)
{
    g_use = g_pat, g_gpu = 1;
    compare_with_host(dtype, layout);
    rf_stats st = epoch_stats(RF_DEVICE_CUDA, dtype, layout);
    ck_assert_uint_eq(st.gpu_decoded, 80);
    ck_assert_uint_eq(st.samples_decoded, 80);
}

/* Batches of an odd count (7: 80 images make 11 of them and a last one of 3): the kernels
 * read each sample's 8-byte offset from the batch's device metadata, which sat after the
 * 4-byte statuses and was misaligned for an odd count (the H200: "misaligned address" in
 * gj_hpass, first seen on a torchrun rank's last partial batch). Plain packets, restart
 * packets and the engines, each equal to the host's. */
START_TEST(gpu_decode_odd_batches)
{
    g_batch = 7, g_size = 64;
    gpu_plain_equals_host(RF_DTYPE_UINT8, RF_LAYOUT_NHWC);
    g_use = g_rpat;
    compare_with_host(RF_DTYPE_UINT8, RF_LAYOUT_NHWC);
    if (hw_available()) {
        g_use = g_pat, g_hw = 30;
        compare_with_host(RF_DTYPE_UINT8, RF_LAYOUT_NHWC);
    }
}
END_TEST

START_TEST(gpu_decode_plain_uint8_nhwc)
{
    g_size = 224;
    gpu_plain_equals_host(RF_DTYPE_UINT8, RF_LAYOUT_NHWC);
}
END_TEST
START_TEST(gpu_decode_plain_uint8_nchw_non_square)
{
    g_height = 160, g_width = 224;
    gpu_plain_equals_host(RF_DTYPE_UINT8, RF_LAYOUT_NCHW);
}
END_TEST
START_TEST(gpu_decode_plain_bf16_nchw)
{
    g_size = 96;
    gpu_plain_equals_host(RF_DTYPE_BFLOAT16, RF_LAYOUT_NCHW);
}
END_TEST

/* gpu_decode_percent: the samples the seed picks take the kernels, the others the CPU path
 * with DCT scaling, the same ones on both backends, and the batches equal the host's. */
START_TEST(gpu_decode_percent_equals_host)
{
    g_use = g_rpat, g_gpu = 1, g_size = 224, g_percent = 40;
    compare_with_host(RF_DTYPE_BFLOAT16, RF_LAYOUT_NCHW);
    uint64_t dev = epoch_stats(RF_DEVICE_CUDA, RF_DTYPE_UINT8, RF_LAYOUT_NHWC).gpu_decoded;
    ck_assert_uint_eq(dev, epoch_stats(RF_DEVICE_HOST, RF_DTYPE_UINT8, RF_LAYOUT_NHWC).gpu_decoded);
    ck_assert_msg(dev > 16 && dev < 48, "%llu of 80", (unsigned long long)dev);
}
END_TEST

/* Large photos (JPEGs of 300-550 KB; 224 px outputs leave 0.7 MB of a 16-sample slot beyond
 * what decoded samples are guaranteed): packets larger than RF_GJ_AREA take the GPU path while
 * the slot has room, the rest decode on the CPU at full scale. Either way the batches are the
 * host backend's, whose packets always fit, byte for byte. */
START_TEST(gpu_decode_large_packets)
{
    char *dir = rf_test_mkdtemp("cuda-big"), pattern[600];
    ck_assert_int_eq(rf_test_make_big_restart_shards(dir, 2, 40, 7), 0);
    snprintf(pattern, sizeof pattern, "%s/shard-*.tar", dir);
    g_use = pattern, g_gpu = 1, g_size = 224;
    compare_with_host(RF_DTYPE_UINT8, RF_LAYOUT_NHWC);
    uint64_t got[2] = {epoch_stats(RF_DEVICE_CUDA, RF_DTYPE_UINT8, RF_LAYOUT_NHWC).gpu_decoded,
                       epoch_stats(RF_DEVICE_HOST, RF_DTYPE_UINT8, RF_LAYOUT_NHWC).gpu_decoded};
    /* every batch's packets need more than its room, whatever order they come in, and the
     * first packet of a batch always fits */
    ck_assert_msg(got[0] >= 5 && got[0] < 80, "%llu of 80 on the GPU", (unsigned long long)got[0]);
    ck_assert_uint_eq(got[1], 80);
}
END_TEST

/* A damaged restart-marked JPEG: the batch's kernels report it, the loader fails with shard,
 * member and offset before publishing that batch; earlier batches arrive. (Skip mode:
 * gpu_decode_skip_restart_damage below.) */
START_TEST(gpu_decode_damage_names_member)
{
    char *dir = rf_test_mkdtemp("cuda-bad"), shard[600], pattern[600], key[128];
    ck_assert_int_eq(rf_test_make_restart_shards(dir, 1, 40, 10, 7, 200), 0);
    snprintf(shard, sizeof shard, "%s/shard-0000.tar", dir);
    snprintf(pattern, sizeof pattern, "%s/shard-*.tar", dir);
    ck_assert_int_eq(rf_test_damage_entropy(shard, 30, key, sizeof key), 0);
    g_use = pattern, g_gpu = 1, g_size = 224;
    const char *pat;
    rf_config c = mem_cfg(RF_DEVICE_CUDA, &pat);
    c.batch_size = 8;
    c.order = RF_ORDER_NONE;
    rf_loader *ld = rf_test_create_ok(&c);
    rf_batch *b;
    int rc, batches = 0;
    while ((rc = rf_loader_next(ld, &b)) == 0) {
        batches++;
        ck_assert_int_eq(rf_batch_synchronize(b), 0);
        rf_loader_release(ld, b, NULL);
    }
    ck_assert_int_eq(rc, RF_EDECODE);
    ck_assert_int_le(batches, 3); /* fail mode: decoding stops at the first error */
    const char *msg = rf_last_error(ld);
    ck_assert_msg(strstr(msg, key) && strstr(msg, "shard-0000.tar") && strstr(msg, "at offset") &&
                      strstr(msg, "GPU decode"), "%s", msg);
    rf_loader_destroy(ld);
}
END_TEST

/* ---- on_error = SKIP with GPU decode (docs/reliability.md, "Skip with late verdicts") ---- */

/* One epoch of c (batches of 8, skip mode), the delivered real samples' ids and pixels (copied
 * back from the device on the CUDA backend) in delivery order; every batch full. Returns how
 * many real samples arrived. */
#define SKIP_PX (224 * 224 * 3)
static uint32_t skip_collect(rf_config c, uint64_t *ids, uint8_t *px, rf_stats *st)
{
    c.on_error = RF_ON_ERROR_SKIP;
    c.batch_size = 8;
    rf_loader *ld = create_for(&c);
    rf_batch *b;
    uint32_t n = 0;
    int rc;
    while ((rc = rf_loader_next(ld, &b)) == 0) {
        ck_assert_uint_eq(b->count, 8);
        uint8_t *data = b->data;
        if (c.device_kind == RF_DEVICE_CUDA) {
            data = malloc(b->data_bytes);
            ck_assert_int_eq(rf_batch_synchronize(b), 0);
            CK_CUDA(cudaMemcpy(data, b->data, b->data_bytes, cudaMemcpyDeviceToHost));
        }
        for (uint32_t i = 0; i < b->count; i++)
            if (!b->is_padding[i]) {
                ck_assert_uint_lt(n, 80);
                ids[n] = b->sample_ids[i];
                memcpy(px + (size_t)n++ * SKIP_PX, data + (size_t)i * SKIP_PX, SKIP_PX);
            }
        if (data != b->data)
            free(data);
        ck_assert_int_eq(rf_loader_release(ld, b, NULL), 0);
    }
    ck_assert_msg(rc == RF_DONE || rc == RF_EPOCH_END, "%d %s", rc, rf_last_error(ld));
    rf_stats_init(st);
    rf_loader_stats(ld, st);
    rf_loader_destroy(ld);
    return n;
}

/* The same skip-mode epoch on the CUDA and the host backend (mem_cfg): device d, host h; the
 * device skipped `skips` samples as corrupt and delivered `delivered`, the host skipped
 * host_skips. */
typedef struct skip_pair {
    uint64_t di[80], hi[80];
    uint8_t *dp, *hp;
    rf_stats ds, hs;
    uint32_t dn, hn;
} skip_pair;

static skip_pair *skip_both(uint64_t skips, uint64_t host_skips, uint32_t delivered)
{
    const char *pat;
    skip_pair *p = malloc(sizeof *p);
    p->dp = malloc((size_t)80 * SKIP_PX), p->hp = malloc((size_t)80 * SKIP_PX);
    p->dn = skip_collect(mem_cfg(RF_DEVICE_CUDA, &pat), p->di, p->dp, &p->ds);
    p->hn = skip_collect(mem_cfg(RF_DEVICE_HOST, &pat), p->hi, p->hp, &p->hs);
    ck_assert_uint_eq(p->ds.skipped, skips);
    ck_assert_uint_eq(p->ds.skipped_by_reason[RF_SKIP_CORRUPT], skips);
    ck_assert_uint_eq(p->hs.skipped, host_skips);
    ck_assert_uint_eq(p->dn, delivered);
    return p;
}

/* Device run d against the host backend's run h of the same config: each sample at most once,
 * the same set, and each sample's pixels within max_diff of the host's (but sample `nocmp`'s,
 * damaged data both decode without an error; UINT64_MAX: none). */
static void skip_same_as_host(const uint64_t *di, const uint8_t *dp, uint32_t dn,
                              const uint64_t *hi, const uint8_t *hp, uint32_t hn, uint64_t nocmp,
                              int max_diff)
{
    ck_assert_uint_eq(dn, hn);
    for (uint32_t k = 0; k < dn; k++) {
        for (uint32_t m = 0; m < k; m++)
            ck_assert_msg(di[m] != di[k], "sample %llu twice", (unsigned long long)di[k]);
        uint32_t j = 0;
        while (j < hn && hi[j] != di[k])
            j++;
        ck_assert_msg(j < hn, "sample %llu not in the host run", (unsigned long long)di[k]);
        if (di[k] == nocmp)
            continue;
        const uint8_t *x = dp + (size_t)k * SKIP_PX, *y = hp + (size_t)j * SKIP_PX;
        for (size_t q = 0; q < SKIP_PX; q++)
            ck_assert_msg(abs((int)x[q] - (int)y[q]) <= max_diff, "sample %llu byte %zu: %d vs %d",
                          (unsigned long long)di[k], q, x[q], y[q]);
    }
}

/* gpu_decode + SKIP, 4 bad members (shard 0's 5th, 6th and 30th, shard 1's 17th). Restart-
 * marked shards: their Huffman data overwritten, found by the kernels (late verdicts, the
 * batch's packets compacted). Plain shards: overwritten Huffman data (0xA5 bytes) decodes
 * without an error on every path, so they are cut short instead, found on the decode thread
 * (the marker check) before any bytes are placed: holes the batch's check refills, whose
 * unplaced rows the first submit gives zero pixels. Either way each is a corrupt skip counted
 * once, the batch is refilled with CPU-decoded replacements, submitted again and handed out
 * full; the device delivers the host backend's samples (verdicts on the decode thread) with
 * the same pixels, and no bad one counts as GPU-decoded. On the host with the device layout
 * emulated (test hook gpu_device_layout) these runs gave 76 delivered, 4 corrupt skips, 72
 * GPU-decoded, the host's samples and pixels. */
static void gpu_decode_skip(int restart)
{
    char *dir = rf_test_mkdtemp("cuda-skip"), shard[600], pattern[600], key[128];
    ck_assert_int_eq(restart ? rf_test_make_restart_shards(dir, 2, 40, 10, 7, 200)
                             : rf_test_make_shards(dir, 2, 40, 10, 7, 1, 200), 0);
    static const uint32_t bad[][2] = {{0, 5}, {0, 6}, {0, 30}, {1, 17}};
    for (uint32_t k = 0; k < 4; k++) {
        snprintf(shard, sizeof shard, "%s/shard-%04u.tar", dir, bad[k][0]);
        ck_assert_int_eq(restart ? rf_test_damage_entropy(shard, bad[k][1], key, sizeof key)
                                 : rf_test_truncate_jpeg(shard, bad[k][1], key, sizeof key), 0);
    }
    snprintf(pattern, sizeof pattern, "%s/shard-*.tar", dir);
    g_use = pattern, g_gpu = 1, g_size = 224;
    skip_pair *p = skip_both(4, 4, 76);
    skip_same_as_host(p->di, p->dp, p->dn, p->hi, p->hp, p->hn, UINT64_MAX, 0);
    for (uint32_t k = 0; k < p->dn; k++) /* the damaged ones: members 5, 6, 30 and 40 + 17 */
        ck_assert(p->di[k] != 5 && p->di[k] != 6 && p->di[k] != 30 && p->di[k] != 57);
    /* the replacements (at most one per skip) are decoded on the CPU, the bad packets are
     * taken back: every other delivered sample was GPU-decoded */
    ck_assert_msg(p->ds.gpu_decoded >= 72 && p->ds.gpu_decoded <= 76, "%llu",
                  (unsigned long long)p->ds.gpu_decoded);
    free(p->dp), free(p->hp), free(p);
}

START_TEST(gpu_decode_skip_restart_damage) { gpu_decode_skip(1); }
END_TEST
START_TEST(gpu_decode_skip_plain_damage) { gpu_decode_skip(0); }
END_TEST

/* The hardware JPEG decoders, when this GPU has them and libnvjpeg loads: 1 when they do. When
 * RINGFEED_NVJPEG names the library they must work; otherwise their absence skips the test.
 * A library that does not load is create's error, which must say why; a GPU without engines
 * is not an error: they end up NONE (rf_stats.hw_engines) once the opener tried, here at
 * create (the hook sched_open_at_create), and the run decodes their share elsewhere. */
static int hw_available(void)
{
    const char *pat;
    rf_config c = mem_cfg(RF_DEVICE_CUDA, &pat);
    c.hw_decode_percent = 100;
    c.decode_schedule = RF_SCHEDULE_AUTO; /* the manual mode, which hw_decode_percent asks for */
    rf_test_hooks h = {.sched_open_at_create = 1};
    rf_loader *ld;
    char err[512];
    int rc = rf_loader_create_hooked(&c, &h, &ld, err, sizeof err);
    if (rc == 0) {
        rf_stats st;
        rf_stats_init(&st);
        rf_loader_stats(ld, &st);
        rf_loader_destroy(ld);
        ck_assert_uint_ne(st.hw_engines, RF_HW_ENGINES_OPENING); /* the open ended in create */
        if (st.hw_engines == RF_HW_ENGINES_READY)
            return 1;
        ck_assert_msg(strstr(st.hw_engines_why, "hardware JPEG decoder"), "%s",
                      st.hw_engines_why);
        snprintf(err, sizeof err, "rf_stats.hw_engines NONE: %s", st.hw_engines_why);
    } else {
        ck_assert_int_eq(rc, RF_ENODEV);
        ck_assert_msg(strstr(err, "nvJPEG"), "%s", err);
    }
    ck_assert_msg(!getenv("RINGFEED_NVJPEG"), "hw_decode_percent: %s", err);
    printf("hw_decode: skipped (%s)\n", err);
    return 0;
}

/* Engine packets decoded by the GPU's hardware decoders: the plain shards at `pattern`,
 * every sample to the engine, batches equal the host backend's (libjpeg's planes, the same
 * resize code) within the engine's IDCT rounding, in both layouts and at two sizes. */
static void hw_decode_equals_host_on(const char *pattern, uint32_t layout, uint32_t size)
{
    g_use = pattern, g_hw = 100, g_size = size;
    if (!hw_available())
        return;
    compare_with_host(RF_DTYPE_UINT8, layout);
    rf_stats st = epoch_stats(RF_DEVICE_CUDA, RF_DTYPE_UINT8, layout);
    ck_assert_uint_eq(st.hw_decoded, 80);
    ck_assert_uint_eq(st.samples_decoded, 80);
}

/* Files with 100 KB after their EOI (a motion photo's video, a camera's preview): the engines
 * get each file up to its EOI, every sample on them, and the batches equal the host
 * backend's. */
START_TEST(hw_decode_trailers)
{
    char *dir = rf_test_mkdtemp("cuda-trailer"), pat[600];
    ck_assert_int_eq(rf_test_make_trailer_shards(dir, 2, 40, 10, 7, 200, 100000), 0);
    snprintf(pat, sizeof pat, "%s/shard-*.tar", dir);
    hw_decode_equals_host_on(pat, RF_LAYOUT_NHWC, 96);
}
END_TEST

static void hw_decode_equals_host(uint32_t layout, uint32_t size)
{
    hw_decode_equals_host_on(g_pat, layout, size);
}

START_TEST(hw_decode_uint8_nhwc) { hw_decode_equals_host(RF_LAYOUT_NHWC, 224); }
END_TEST
START_TEST(hw_decode_uint8_nchw) { hw_decode_equals_host(RF_LAYOUT_NCHW, 96); }
END_TEST
START_TEST(hw_decode_non_square)
{
    g_height = 96, g_width = 160;
    hw_decode_equals_host(RF_LAYOUT_NCHW, 224);
}
END_TEST

/* Three ways at once on restart-marked shards: 30% engine, the next 40% kernels, the rest the
 * CPU at full scale; the same samples take the same paths on both backends, and the
 * batches agree within the engine's rounding. */
START_TEST(hw_decode_split_with_gpu_decode)
{
    g_use = g_rpat, g_hw = 30, g_gpu = 1, g_percent = 40, g_size = 224;
    if (!hw_available())
        return;
    compare_with_host(RF_DTYPE_UINT8, RF_LAYOUT_NHWC);
    rf_stats d = epoch_stats(RF_DEVICE_CUDA, RF_DTYPE_UINT8, RF_LAYOUT_NHWC);
    rf_stats h = epoch_stats(RF_DEVICE_HOST, RF_DTYPE_UINT8, RF_LAYOUT_NHWC);
    ck_assert_uint_eq(d.hw_decoded, h.hw_decoded);
    ck_assert_uint_eq(d.gpu_decoded, h.gpu_decoded);
    ck_assert_msg(d.hw_decoded > 10 && d.hw_decoded < 40 && d.gpu_decoded > 16 &&
                      d.hw_decoded + d.gpu_decoded < 80, "engine %llu, kernels %llu of 80",
                  (unsigned long long)d.hw_decoded, (unsigned long long)d.gpu_decoded);
}
END_TEST

/* Damaged files and the engine. A file cut short (no EOI) never reaches it: the marker check
 * every decode runs refuses it on both backends, with the same error naming the member, after
 * the same batches. A file whose entropy-coded bytes are overwritten with 0xA5 but whose
 * structure is intact decodes without an error on every path: libjpeg reads those bytes as
 * valid codes, and so does the engine packet's check (nvJPEG itself reports no error for
 * damaged data even with its strict flag: the check is what judges, docs/reliability.md); in
 * skip mode it is delivered, not skipped (hw_decode_skip below). What the check refuses is
 * tested on photographs in python/tests/test_gpu.py (test_bad_files_..._on_cuda). */
START_TEST(hw_decode_damaged_files)
{
    char *dir = rf_test_mkdtemp("cuda-hwbad"), shard[600], pattern[600], key[128];
    ck_assert_int_eq(rf_test_make_shards(dir, 2, 40, 10, 7, 1, 200), 0);
    snprintf(shard, sizeof shard, "%s/shard-0000.tar", dir);
    snprintf(pattern, sizeof pattern, "%s/shard-*.tar", dir);
    ck_assert_int_eq(rf_test_truncate_jpeg(shard, 30, key, sizeof key), 0);
    g_use = pattern, g_hw = 100, g_size = 224;
    if (!hw_available())
        return;
    int batches[2];
    for (int k = 0; k < 2; k++) {
        rf_loader *ld = mk(k ? RF_DEVICE_HOST : RF_DEVICE_CUDA, RF_DTYPE_UINT8, RF_LAYOUT_NHWC, 3);
        rf_batch *b;
        int rc;
        for (batches[k] = 0; (rc = rf_loader_next(ld, &b)) == 0; batches[k]++)
            rf_loader_release(ld, b, NULL);
        ck_assert_int_eq(rc, RF_EDECODE);
        ck_assert_msg(strstr(rf_last_error(ld), key) &&
                          strstr(rf_last_error(ld), "Premature end of JPEG file"),
                      "%s", rf_last_error(ld));
        rf_loader_destroy(ld);
    }
    ck_assert_int_eq(batches[0], batches[1]);

    dir = rf_test_mkdtemp("cuda-hwbad2");
    ck_assert_int_eq(rf_test_make_shards(dir, 2, 40, 10, 7, 1, 200), 0);
    snprintf(pattern, sizeof pattern, "%s/shard-*.tar", dir);
    snprintf(shard, sizeof shard, "%s/shard-0001.tar", dir);
    ck_assert_int_eq(rf_test_damage_entropy(shard, 5, key, sizeof key), 0);
    rf_stats st = epoch_stats(RF_DEVICE_CUDA, RF_DTYPE_UINT8, RF_LAYOUT_NHWC);
    printf("hw_decode: entropy-damaged member %s decoded without an error, as libjpeg does "
           "(%llu of %llu samples on the engine)\n", key, (unsigned long long)st.hw_decoded,
           (unsigned long long)st.samples_decoded);
    ck_assert_uint_eq(st.samples_decoded, 80);
}
END_TEST

/* hw_decode_percent 100 + SKIP on plain shards with a member cut short (shard 0's 30th: the
 * marker check finds it on the decode thread, on every path) and one with overwritten Huffman
 * data (shard 1's 5th, sample 45: valid codes for libjpeg and for the engines' check alike,
 * these 0xA5 bytes). Both backends skip the first once and deliver every other sample once, the
 * overwritten one included (as the CPU path does), with the host backend's pixels within the
 * engine's rounding (but sample 45's, whose garbage coefficients the engine's IDCT may round
 * otherwise). */
START_TEST(hw_decode_skip)
{
    char *dir = rf_test_mkdtemp("cuda-hwskip"), shard[600], pattern[600], key[128];
    ck_assert_int_eq(rf_test_make_shards(dir, 2, 40, 10, 7, 1, 200), 0);
    snprintf(shard, sizeof shard, "%s/shard-0000.tar", dir);
    ck_assert_int_eq(rf_test_truncate_jpeg(shard, 30, key, sizeof key), 0);
    snprintf(shard, sizeof shard, "%s/shard-0001.tar", dir);
    ck_assert_int_eq(rf_test_damage_entropy(shard, 5, key, sizeof key), 0);
    snprintf(pattern, sizeof pattern, "%s/shard-*.tar", dir);
    g_use = pattern, g_hw = 100, g_size = 224;
    if (!hw_available())
        return;
    skip_pair *p = skip_both(1, 1, 79);
    uint32_t k45 = 0;
    while (k45 < p->dn && p->di[k45] != 45)
        k45++;
    ck_assert_uint_lt(k45, p->dn); /* delivered, not skipped */
    ck_assert_msg(p->ds.hw_decoded >= 78 && p->ds.hw_decoded <= 79, /* a CPU replacement */
                  "%llu", (unsigned long long)p->ds.hw_decoded);
    skip_same_as_host(p->di, p->dp, p->dn, p->hi, p->hp, p->hn, 45, HW_MAX_DIFF);
    free(p->dp), free(p->hp), free(p);
}
END_TEST

/* The engines' start-up beside the first batches (issue 22: the first batch at most 50 ms after
 * create on every path; create used to open the engines, 0.85-1.26 s on the H200):
 * hw_decode_percent 30 + gpu_decode on plain shards at 224 px, as a user would run it. The
 * first batch's time after create is printed against that target; asserted is what does not
 * depend on the machine's speed: no sample of the first batch went to the engines (they open
 * only once it is handed out), and it came before their open ended. Holding it, the consumer
 * waits for READY; the later batches give the engines their share, and every sample of the
 * three epochs is decoded once. Then the same configuration's batches, engines opening beside
 * them as in that run, equal the host backend's within the engines' rounding. */
START_TEST(hw_decode_deferred_first_batch)
{
    g_use = g_pat, g_hw = 30, g_gpu = 1, g_size = 224;
    if (!hw_available())
        return;
    g_hw_deferred = 1;
    const char *pat;
    rf_config c = mem_cfg(RF_DEVICE_CUDA, &pat);
    c.epochs = 3; /* 15 batches of 16, 3 in flight: 12 are dispatched after READY */
    uint64_t t0 = rf_now_ns();
    rf_loader *ld = create_for(&c);
    rf_batch *b;
    ck_assert_int_eq(rf_loader_next(ld, &b), 0);
    double first_ms = (double)(rf_now_ns() - t0) / 1e6;
    rf_stats first;
    rf_stats_init(&first);
    rf_loader_stats(ld, &first);
    ck_assert_uint_eq(rf_test_wait_engines(ld), RF_HW_ENGINES_READY);
    ck_assert_int_eq(rf_loader_release(ld, b, NULL), 0);
    rf_stats st = rf_test_drain(ld);
    rf_loader_destroy(ld);
    printf("hw_decode 30%% + gpu_decode: first batch %.1f ms after create (target 50 ms), engines "
           "%u then (hw_decoded %llu), opened in %.1f ms; %llu decoded: %llu engines, %llu "
           "kernels\n", first_ms, first.hw_engines, (unsigned long long)first.hw_decoded,
           st.hw_open_ns / 1e6, (unsigned long long)st.samples_decoded,
           (unsigned long long)st.hw_decoded, (unsigned long long)st.gpu_decoded);
    ck_assert_uint_eq(first.hw_decoded, 0);
    ck_assert_uint_eq(first.hw_open_ns, 0);
    ck_assert_msg(first_ms * 1e6 < (double)st.hw_open_ns, "first batch %.1f ms, open %.1f ms",
                  first_ms, st.hw_open_ns / 1e6);
    ck_assert_uint_eq(st.samples_decoded, 240);
    ck_assert_uint_eq(st.samples_delivered, 240);
    ck_assert_uint_gt(st.hw_decoded, 0);
    ck_assert_uint_eq(st.decode_schedule, RF_SCHEDULE_MANUAL);
    compare_with_host(RF_DTYPE_UINT8, RF_LAYOUT_NHWC);
}
END_TEST

/* The consumer's stream is slow (a long device-to-device copy queued first); releasing the
 * batch on that stream must not let the next copies overwrite memory it still reads. */
START_TEST(slow_consumer_stream_never_sees_recycled_memory)
{
    rf_loader *dev = mk(RF_DEVICE_CUDA, RF_DTYPE_UINT8, RF_LAYOUT_NHWC, 2);
    rf_loader *host = mk(RF_DEVICE_HOST, RF_DTYPE_UINT8, RF_LAYOUT_NHWC, 2);
    cudaStream_t st;
    CK_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    size_t big = 512u << 20;
    void *junk_a, *junk_b;
    CK_CUDA(cudaMalloc(&junk_a, big));
    CK_CUDA(cudaMalloc(&junk_b, big));
    rf_batch *a, *b;
    uint8_t *outs[8];
    int n = 0;
    while (rf_loader_next(dev, &a) == 0) {
        rf_loader_next(host, &b);
        rf_batch_wait(a, st);
        for (int k = 0; k < 4; k++) /* keep the stream busy for a while */
            CK_CUDA(cudaMemcpyAsync(junk_b, junk_a, big, cudaMemcpyDeviceToDevice, st));
        CK_CUDA(cudaMallocHost((void **)&outs[n], a->data_bytes));
        CK_CUDA(cudaMemcpyAsync(outs[n], a->data, a->data_bytes, cudaMemcpyDeviceToHost, st));
        rf_loader_release(dev, a, st); /* before the stream reached the read */
        CK_CUDA(cudaStreamSynchronize(st) == cudaSuccess ? cudaSuccess : cudaErrorUnknown);
        ck_assert_int_eq(memcmp(outs[n], b->data, b->data_bytes), 0);
        rf_loader_release(host, b, NULL);
        cudaFreeHost(outs[n]);
        n++;
    }
    cudaFree(junk_a);
    cudaFree(junk_b);
    rf_loader_destroy(dev);
    rf_loader_destroy(host);
}
END_TEST

START_TEST(destroy_with_copies_in_flight)
{
    for (int i = 0; i < 10; i++) {
        rf_loader *dev = mk(RF_DEVICE_CUDA, i % 2 ? RF_DTYPE_FLOAT16 : RF_DTYPE_UINT8,
                            RF_LAYOUT_NCHW, 1 + i % 4);
        rf_batch *a;
        if (i % 3 == 0 && rf_loader_next(dev, &a) == 0 && i % 2)
            rf_loader_release(dev, a, NULL);
        rf_loader_destroy(dev);
    }
}
END_TEST

START_TEST(token_widening_on_gpu)
{
    char path[600];
    snprintf(path, sizeof path, "%s/tokens.bin", g_dir);
    FILE *f = fopen(path, "wb");
    for (uint32_t i = 0; i < 5000; i++) {
        uint16_t v = (uint16_t)(i * 7);
        fwrite(&v, 2, 1, f);
    }
    fclose(f);
    const char *pat;
    rf_config c = rf_test_host_config(&pat, path, 0);
    c.source = RF_SOURCE_TOKENS;
    c.token_bytes = 2;
    c.seq_len = 64;
    c.token_dtype = RF_DTYPE_INT64;
    c.token_windows = RF_WINDOWS_RANDOM;
    c.batch_size = 8;
    c.epochs = 1;
    c.device_kind = RF_DEVICE_CUDA;
    rf_loader *ld;
    char err[512];
    ck_assert_int_eq(rf_loader_create(&c, &ld, err, sizeof err), 0);
    rf_batch *b;
    int64_t *back = malloc(8 * 65 * 8);
    while (rf_loader_next(ld, &b) == 0) {
        ck_assert_uint_eq(b->dtype, RF_DTYPE_INT64);
        rf_batch_synchronize(b);
        CK_CUDA(cudaMemcpy(back, b->data, b->data_bytes, cudaMemcpyDeviceToHost));
        for (uint32_t r = 0; r < b->count; r++)
            for (int j = 1; j <= 64; j++)
                ck_assert_int_eq((uint16_t)(back[r * 65 + j] - back[r * 65 + j - 1]), 7);
        rf_loader_release(ld, b, NULL);
    }
    free(back);
    rf_loader_destroy(ld);
}
END_TEST

/* Ask in a throwaway child: initializing CUDA here, before Check forks each test, would leave
 * the children with an unusable runtime (cudaErrorInitializationError). */
static int gpu_present(void)
{
    pid_t pid = fork();
    if (pid == 0)
        _exit(rf_cuda_device_count() > 0 ? 0 : 1);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* ---- memory hierarchy (docs/tuning.md) ---------------------------------------------------- */


/* Device batches of `dev` equal the host backend's batches of the same config. */
static int device_equals_host(rf_loader *dev, rf_loader *host)
{
    rf_batch *a, *b;
    int n = 0;
    while (rf_loader_next(dev, &a) == 0) {
        ck_assert_int_eq(rf_loader_next(host, &b), 0);
        ck_assert_uint_eq(a->data_bytes, b->data_bytes);
        uint8_t *back = malloc(a->data_bytes);
        int32_t labels[64];
        ck_assert_int_eq(rf_batch_synchronize(a), 0);
        CK_CUDA(cudaMemcpy(back, a->data, a->data_bytes, cudaMemcpyDeviceToHost));
        CK_CUDA(cudaMemcpy(labels, a->labels_device, a->count * 4, cudaMemcpyDeviceToHost));
        ck_assert_int_eq(memcmp(back, b->data, a->data_bytes), 0);
        ck_assert_int_eq(memcmp(labels, b->labels, a->count * 4), 0);
        free(back);
        ck_assert_int_eq(rf_loader_release(dev, a, NULL), 0);
        rf_loader_release(host, b, NULL);
        n++;
    }
    return n;
}

/* ---- token files over HTTP (docs/remote.md) ---------------------------------------------- */

static const char *g_served; /* remote_tokens_child: the directory servers.py serves */

typedef struct token_file {
    const char *name;
    uint32_t token_bytes, ntokens, windows, dtype, batches; /* batches of 8, one epoch */
} token_file;

/* 100,000 uint16 tokens: 390 windows of 256; 30,001 uint32: 117 sequential windows. */
static const token_file g_token_files[] = {
    {"tok2.bin", 2, 100000, RF_WINDOWS_RANDOM, RF_DTYPE_INT64, 49},
    {"tok4.bin", 4, 30001, RF_WINDOWS_SEQUENTIAL, 0, 15},
};

static rf_config token_file_cfg(const char **pat, const char *path, const token_file *k,
                                uint32_t device_kind)
{
    rf_config c = rf_test_host_config(pat, path, 0);
    c.source = RF_SOURCE_TOKENS;
    c.token_bytes = k->token_bytes;
    c.seq_len = 256;
    c.token_windows = k->windows;
    c.token_dtype = k->dtype;
    c.batch_size = 8;
    c.epochs = 1;
    c.seed = 5;
    c.io_threads = 2;
    c.device_kind = device_kind;
    return c;
}

/* The child of remote_tokens_on_gpu (test_cuda --remote-tokens DIR under servers.py): each
 * token file read over HTTP onto the device (widened there) equals the host backend's batches
 * of the local file, window for window. */
START_TEST(remote_tokens_child)
{
    for (size_t i = 0; i < sizeof g_token_files / sizeof g_token_files[0]; i++) {
        const token_file *k = &g_token_files[i];
        char local[1024], url[1024], err[RF_ERRMSG_MAX];
        snprintf(local, sizeof local, "%s/%s", g_served, k->name);
        snprintf(url, sizeof url, "%s/%s", getenv("RF_TEST_HTTP"), k->name);
        const char *lp, *up;
        rf_config h = token_file_cfg(&lp, local, k, RF_DEVICE_HOST);
        rf_config d = token_file_cfg(&up, url, k, RF_DEVICE_CUDA);
        rf_loader *dev = NULL, *host = rf_test_create_ok(&h);
        int rc = rf_loader_create(&d, &dev, err, sizeof err);
        ck_assert_msg(rc == 0, "%s: %d %s", url, rc, err);
        ck_assert_int_eq(device_equals_host(dev, host), k->batches);
        rf_stats st;
        rf_stats_init(&st);
        rf_loader_stats(dev, &st);
        ck_assert_str_eq(st.io_engine, "curl");
        ck_assert_uint_ge(st.remote_requests, st.reads);
        printf("%s over HTTP onto the GPU: %llu windows equal the host's, %llu requests\n",
               k->name, (unsigned long long)st.samples_delivered,
               (unsigned long long)st.remote_requests);
        rf_loader_destroy(dev);
        rf_loader_destroy(host);
    }
}
END_TEST

/* Token files over loopback HTTP on the CUDA backend (the raw path remote_bench.sh --tokens
 * measures): this binary runs remote_tokens_child under tests/servers/servers.py --only http,
 * which finds nginx as $NGINX where the machine has no package; no nginx is a skip. */
START_TEST(remote_tokens_on_gpu)
{
    char *dir = rf_test_mkdtemp("cuda-remote-tokens"), self[1024], path[1200];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    ck_assert(n > 0);
    self[n] = 0;
    uint32_t x = 23;
    for (size_t i = 0; i < sizeof g_token_files / sizeof g_token_files[0]; i++) {
        const token_file *k = &g_token_files[i];
        snprintf(path, sizeof path, "%s/%s", dir, k->name);
        FILE *f = fopen(path, "wb");
        ck_assert_ptr_nonnull(f);
        for (uint32_t t = 0; t < k->ntokens; t++) {
            x = x * 1664525u + 1013904223u; /* any ids: the test compares bytes */
            uint32_t v = k->token_bytes == 2 ? x >> 16 : x;
            fwrite(&v, k->token_bytes, 1, f); /* little-endian: the low bytes first */
        }
        ck_assert_int_eq(fclose(f), 0);
    }
    int rc = rf_test_shell("python3 %s/tests/servers/servers.py --root %s --state %s-state "
                           "--only http -- %s --remote-tokens %s", RF_SOURCE_DIR, dir, dir,
                           self, dir);
    if (rc == 77) {
        printf("remote_tokens_on_gpu: skipped (servers.py found no nginx: NGINX=path names "
               "a binary)\n");
        return;
    }
    ck_assert_msg(rc == 0, "the HTTP token run failed (%d): its output is above", rc);
}
END_TEST

/* After create the pool holds what steady state needs: no growth over epochs, no pinned
 * allocations, and the accounting agrees with itself. */
START_TEST(pool_reserved_stable_no_allocs_after_create)
{
    const char *pat;
    rf_config c = mem_cfg(RF_DEVICE_CUDA, &pat);
    c.epochs = 3;
    rf_loader *ld = rf_test_create_ok(&c);
    rf_stats st0, st1, st;
    rf_stats_init(&st0);
    rf_loader_stats(ld, &st0);
    ck_assert_uint_gt(st0.device_pool_reserved_bytes, 0); /* primed at create */
    ck_assert_uint_gt(st0.ring_register_ns, 0);
    ck_assert_uint_eq(st0.pinned, 1);
    ck_assert_uint_gt(st0.pinned_bytes, 0);
    rf_batch *b;
    int rc, epochs = 0;
    uint64_t used_max = 0;
    while ((rc = rf_loader_next(ld, &b)) == 0 || rc == RF_EPOCH_END) {
        if (rc == RF_EPOCH_END) {
            if (++epochs == 1) {
                rf_stats_init(&st1);
                rf_loader_stats(ld, &st1);
            }
            continue;
        }
        rf_stats_init(&st);
        rf_loader_stats(ld, &st);
        used_max = st.device_pool_used_bytes > used_max ? st.device_pool_used_bytes : used_max;
        ck_assert_uint_le(st.device_pool_used_bytes, st.device_pool_reserved_bytes);
        rf_loader_release(ld, b, NULL);
    }
    ck_assert_int_eq(rc, RF_DONE);
    rf_stats_init(&st);
    rf_loader_stats(ld, &st);
    printf("pool: reserved %llu at create, %llu after epoch 1, %llu at the end; used max %llu; "
           "allocs after create %llu\n", (unsigned long long)st0.device_pool_reserved_bytes,
           (unsigned long long)st1.device_pool_reserved_bytes,
           (unsigned long long)st.device_pool_reserved_bytes, (unsigned long long)used_max,
           (unsigned long long)st.device_allocs_after_create);
    ck_assert_uint_gt(used_max, 0);
    ck_assert_uint_eq(st.device_pool_reserved_bytes, st1.device_pool_reserved_bytes);
    ck_assert_uint_eq(st.device_allocs_after_create, st1.device_allocs_after_create);
    ck_assert_uint_eq(st.device_allocs_after_create, 0);
    ck_assert_uint_eq(st.host_allocs_after_create, 0);
    rf_loader_destroy(ld);
}
END_TEST

START_TEST(hugepage_ring_registered_equals_host)
{
    const char *pa, *pb;
    rf_config c = mem_cfg(RF_DEVICE_CUDA, &pa), h = mem_cfg(RF_DEVICE_HOST, &pb);
    c.hugepages = 1;
    rf_loader *dev = rf_test_create_ok(&c), *host = rf_test_create_ok(&h);
    ck_assert_int_eq(device_equals_host(dev, host), 5);
    rf_stats st;
    rf_stats_init(&st);
    rf_loader_stats(dev, &st);
    printf("hugepages %u, pinned %u, pin %.3f ms: %s\n", st.hugepages, st.pinned,
           st.ring_register_ns / 1e6, st.memory_why);
    ck_assert_str_ne(st.memory_why, "");
    ck_assert_uint_le(st.hugepages, 2);
    ck_assert_uint_eq(st.pinned, 1); /* cudaHostRegister of the mapping */
    ck_assert_uint_eq(st.host_allocs_after_create, 0);
    rf_loader_destroy(dev);
    rf_loader_destroy(host);
}
END_TEST

START_TEST(trim_returns_memory_and_loader_continues)
{
    const char *pat;
    rf_config c = mem_cfg(RF_DEVICE_CUDA, &pat);
    c.epochs = 0;
    rf_loader *ld = rf_test_create_ok(&c);
    rf_batch *b;
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(rf_loader_next(ld, &b), 0);
        rf_loader_release(ld, b, NULL);
    }
    CK_CUDA(cudaDeviceSynchronize());
    rf_stats before, after;
    rf_stats_init(&before);
    rf_loader_stats(ld, &before);
    ck_assert_int_eq(rf_loader_trim(ld, 0), 0);
    rf_stats_init(&after);
    rf_loader_stats(ld, &after);
    printf("trim: reserved %llu -> %llu (used %llu)\n",
           (unsigned long long)before.device_pool_reserved_bytes,
           (unsigned long long)after.device_pool_reserved_bytes,
           (unsigned long long)after.device_pool_used_bytes);
    ck_assert_uint_le(after.device_pool_reserved_bytes, before.device_pool_reserved_bytes);
    for (int i = 0; i < 8; i++) { /* the loader keeps working after a trim */
        int rc = rf_loader_next(ld, &b);
        if (rc == RF_EPOCH_END)
            continue;
        ck_assert_int_eq(rc, 0);
        rf_loader_release(ld, b, NULL);
    }
    rf_loader_destroy(ld);
}
END_TEST

START_TEST(naive_cuda_equals_host)
{
    const char *pa, *pb;
    rf_config c = mem_cfg(RF_DEVICE_CUDA, &pa), h = mem_cfg(RF_DEVICE_HOST, &pb);
    c.naive = 1;
    rf_loader *dev = rf_test_create_ok(&c), *host = rf_test_create_ok(&h);
    ck_assert_int_eq(device_equals_host(dev, host), 5);
    rf_stats st;
    rf_stats_init(&st);
    rf_loader_stats(dev, &st);
    ck_assert_uint_eq(st.pinned, 0);
    ck_assert_uint_eq(st.prefetch_depth, 1);
    ck_assert_uint_ge(st.device_allocs_after_create, 5); /* a cudaMalloc per batch */
    rf_loader_destroy(dev);
    rf_loader_destroy(host);
}
END_TEST

/* decode_schedule BALANCE on the device (AUTO's choice there): plain shards, with
 * the shares moved per batch by the test hook, batches equal the host backend's CPU run at
 * full scale byte for byte (within the engines' IDCT rounding, HW_MAX_DIFF, when they took
 * samples) and the GPU takes samples; the time from create to the first batch is printed
 * (target: 50 ms, with the engines opening beside it). Then the controller alone over 40
 * epochs (200 batches, enough windows to climb): every sample decoded once per epoch, the
 * shares within bounds, and where the samples went printed (a loading-bound loop: the climb
 * should give the GPU a share when its paths are faster than the CPU's). */
START_TEST(balance_schedule_plain_equals_host)
{
    g_use = g_pat, g_size = 224;
    {   /* no setting: AUTO resolves to BALANCE on the device, every image at full scale,
         * with the GPU paths' prefetch_depth; one that was set stays */
        const char *pat;
        rf_config c = mem_cfg(RF_DEVICE_CUDA, &pat);
        c.decode_schedule = RF_SCHEDULE_AUTO;
        c.prefetch_depth = 0;
        rf_loader *ld = rf_test_create_ok(&c);
        rf_config got;
        rf_config_init(&got);
        rf_loader_config(ld, &got);
        rf_loader_destroy(ld);
        ck_assert_uint_eq(got.decode_schedule, RF_SCHEDULE_BALANCE);
        ck_assert_uint_eq(got.dct_scaling, RF_DCT_SCALING_OFF);
        ck_assert_uint_eq(got.prefetch_depth, 8);
        c.prefetch_depth = 3;
        ld = rf_test_create_ok(&c);
        rf_loader_config(ld, &got);
        rf_loader_destroy(ld);
        ck_assert_uint_eq(got.decode_schedule, RF_SCHEDULE_BALANCE);
        ck_assert_uint_eq(got.prefetch_depth, 3);
    }
    g_balance = 1;
    compare_with_host(RF_DTYPE_UINT8, RF_LAYOUT_NHWC);
    g_balance = 2, g_size = 64; /* crops of the 200 px images the CPU decodes at 1/2..1/8 */
    compare_with_host(RF_DTYPE_UINT8, RF_LAYOUT_NHWC);
    g_balance = 1, g_size = 224;
    const char *pat;
    rf_config c = mem_cfg(RF_DEVICE_CUDA, &pat);
    uint64_t t0 = 0;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    t0 = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    rf_loader *ld = create_perturbed(&c);
    rf_batch *b;
    ck_assert_int_eq(rf_loader_next(ld, &b), 0);
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double first_ms = ((double)ts.tv_sec * 1e9 + (double)ts.tv_nsec - (double)t0) / 1e6;
    rf_loader_release(ld, b, NULL);
    while (rf_loader_next(ld, &b) == 0)
        rf_loader_release(ld, b, NULL);
    rf_stats st;
    rf_stats_init(&st);
    rf_loader_stats(ld, &st);
    rf_config got;
    rf_config_init(&got);
    rf_loader_config(ld, &got);
    rf_loader_destroy(ld);
    printf("balance schedule: first batch %.1f ms after create; %llu decoded: %llu engines, %llu "
           "kernels (%llu plain), the rest CPU; shares now gpu %u, hw %u permille; engines %u\n",
           first_ms, (unsigned long long)st.samples_decoded, (unsigned long long)st.hw_decoded,
           (unsigned long long)st.gpu_decoded, (unsigned long long)st.gpu_plain_decoded,
           st.sched_gpu_permille, st.sched_hw_permille, st.hw_engines);
    ck_assert_uint_eq(got.decode_schedule, RF_SCHEDULE_BALANCE);
    ck_assert_uint_eq(st.decode_schedule, RF_SCHEDULE_BALANCE);
    ck_assert_uint_eq(st.samples_decoded, 80);
    ck_assert_uint_gt(st.gpu_decoded + st.hw_decoded, 0); /* the GPU took samples */
    ck_assert_uint_le(st.sched_hw_permille, st.sched_gpu_permille);
    c.epochs = 40;
    ld = rf_test_create_ok(&c);
    st = rf_test_drain(ld);
    rf_loader_destroy(ld);
    printf("balance controller, 40 epochs: %llu decoded: %llu engines, %llu kernels, the rest "
           "CPU; shares at the end gpu %u, hw %u permille; engines %u\n",
           (unsigned long long)st.samples_decoded, (unsigned long long)st.hw_decoded,
           (unsigned long long)st.gpu_decoded, st.sched_gpu_permille, st.sched_hw_permille,
           st.hw_engines);
    ck_assert_uint_eq(st.samples_decoded, 80 * 40);
    ck_assert_uint_eq(st.samples_delivered, 80 * 40);
    ck_assert_uint_le(st.sched_gpu_permille, 1000);
    ck_assert_uint_le(st.sched_hw_permille, st.sched_gpu_permille);
}
END_TEST

/* BALANCE while a training step keeps its GPU share at 0: after the ring's first fill, which
 * the kernels decode, the CPU decodes every batch whole into the device layout (pixels packed
 * at offsets in the stage) and the backend puts them in order without the decode kernels, by
 * the conversion's own reads or one copy kernel for uint8 (copy_cuda.c). Those batches equal
 * the host backend's byte for byte (no engine took part) in every output type and layout,
 * with odd batch sizes (offsets of partial batches) and sizes whose sample bytes are not a
 * multiple of 16 (the copy kernel's byte path). */
START_TEST(balance_cpu_batches_equal_host)
{
    g_use = g_pat, g_balance = 1, g_zero_shares = 1;
    const struct { uint32_t batch, size, dtype, layout; } runs[] = {
        {16, 224, RF_DTYPE_UINT8, RF_LAYOUT_NHWC},   {16, 224, RF_DTYPE_BFLOAT16, RF_LAYOUT_NCHW},
        {7, 64, RF_DTYPE_UINT8, RF_LAYOUT_NCHW},     {7, 64, RF_DTYPE_FLOAT16, RF_LAYOUT_NHWC},
        {5, 33, RF_DTYPE_UINT8, RF_LAYOUT_NHWC},     {5, 33, RF_DTYPE_FLOAT32, RF_LAYOUT_NCHW},
    };
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        g_batch = runs[r].batch, g_size = runs[r].size;
        compare_with_host(runs[r].dtype, runs[r].layout);
        rf_stats st = epoch_stats(RF_DEVICE_CUDA, runs[r].dtype, runs[r].layout);
        /* the kernels took the ring's first fill (3 batches) at most: every later batch was
         * decoded after the shares went to 0 and went through the gather */
        ck_assert_uint_eq(st.samples_decoded, 80);
        ck_assert_uint_le(st.gpu_decoded, 3 * g_batch);
        ck_assert_uint_eq(st.hw_decoded, 0);
        ck_assert_uint_eq(st.hw_engines, RF_HW_ENGINES_UNOPENED);
    }
}
END_TEST

int main(int argc, char **argv)
{
    if (!gpu_present()) {
        printf("no usable CUDA device: skipping the GPU suite\n");
        return 77;
    }
    Suite *s = suite_create("cuda");
    TCase *tc = tcase_create("cuda");
    tcase_set_timeout(tc, 300);
    if (argc == 3 && strcmp(argv[1], "--remote-tokens") == 0) { /* remote_tokens_on_gpu's */
        g_served = argv[2];
        tcase_add_test(tc, remote_tokens_child);
        suite_add_tcase(s, tc);
        return rf_test_run_suite(s);
    }
    tcase_add_unchecked_fixture(tc, make_data, NULL);
    tcase_add_test(tc, uint8_nhwc_equals_host);
    tcase_add_test(tc, uint8_nchw_equals_host);
    tcase_add_test(tc, float32_nchw_normalized);
    tcase_add_test(tc, float16_nhwc_normalized);
    tcase_add_test(tc, bfloat16_nchw_normalized);
    tcase_add_test(tc, slow_consumer_stream_never_sees_recycled_memory);
    tcase_add_test(tc, destroy_with_copies_in_flight);
    tcase_add_test(tc, token_widening_on_gpu);
    tcase_add_test(tc, remote_tokens_on_gpu);
    tcase_add_test(tc, pool_reserved_stable_no_allocs_after_create);
    tcase_add_test(tc, hugepage_ring_registered_equals_host);
    tcase_add_test(tc, trim_returns_memory_and_loader_continues);
    tcase_add_test(tc, naive_cuda_equals_host);
    tcase_add_test(tc, gpu_decode_uint8_nhwc);
    tcase_add_test(tc, gpu_decode_uint8_nchw);
    tcase_add_test(tc, gpu_decode_float32_nchw);
    tcase_add_test(tc, gpu_decode_uint8_mixed_cpu);
    tcase_add_test(tc, gpu_decode_bf16_mixed_cpu);
    tcase_add_test(tc, gpu_decode_non_square);
    tcase_add_test(tc, gpu_decode_non_square_mixed_cpu);
    tcase_add_test(tc, gpu_decode_large_packets);
    tcase_add_test(tc, gpu_decode_percent_equals_host);
    tcase_add_test(tc, gpu_decode_damage_names_member);
    tcase_add_test(tc, gpu_decode_skip_restart_damage);
    tcase_add_test(tc, gpu_decode_skip_plain_damage);
    tcase_add_test(tc, hw_decode_uint8_nhwc);
    tcase_add_test(tc, hw_decode_trailers);
    tcase_add_test(tc, hw_decode_uint8_nchw);
    tcase_add_test(tc, hw_decode_non_square);
    tcase_add_test(tc, hw_decode_split_with_gpu_decode);
    tcase_add_test(tc, hw_decode_deferred_first_batch);
    tcase_add_test(tc, gpu_decode_odd_batches);
    tcase_add_test(tc, gpu_decode_plain_uint8_nhwc);
    tcase_add_test(tc, gpu_decode_plain_uint8_nchw_non_square);
    tcase_add_test(tc, gpu_decode_plain_bf16_nchw);
    tcase_add_test(tc, gpu_paths_padded_crops);
    tcase_add_test(tc, gpu_paths_multi_crop);
    tcase_add_test(tc, gpu_paths_size_buckets);
    tcase_add_test(tc, hw_decode_damaged_files);
    tcase_add_test(tc, hw_decode_skip);
    tcase_add_test(tc, balance_schedule_plain_equals_host);
    tcase_add_test(tc, balance_cpu_batches_equal_host);
    suite_add_tcase(s, tc);
    return rf_test_run_suite(s);
}
