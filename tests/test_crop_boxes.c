/* test_crop_boxes.c — rf_batch.crop_boxes and rf_batch.flips (issue 46): every delivered
 * sample reports the box its image was cut from, in the source image's full-resolution pixels,
 * and its flip. A CENTER box equals Resize(shorter) + CenterCrop computed here on its own, and
 * a CENTER sample reported flipped mirrors the same sample of a run without flips; a RANDOM
 * box reproduces the delivered bytes exactly (the source decoded whole at full scale, the
 * reported box resampled with the library's own filter, flipped when reported); the boxes and
 * flips are the same on every path (CPU, gpu_decode, hw_decode_percent = 100 on the host
 * backend's emulation) at 1 and 3 decode threads, and with DCT scaling; padding repeats and
 * skip mode's replacements report what was delivered, blank padding {0, 0, 0, 0}; every box
 * lies inside its image. Token batches have none (test_tokens.c's batches: NULL). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "decode/decode.h"
#include "decode/resize.h"
#include "ringfeed.h"
#include "testutil.h"

#define N_SHARDS 2
#define N_PER_SHARD 21
#define N_SAMPLES (N_SHARDS * N_PER_SHARD)
#define OUT_H 40
#define OUT_W 56

static char *g_dir, g_pattern[512];

static void make_data(void)
{
    if (g_dir)
        return;
    g_dir = rf_test_mkdtemp("boxes");
    /* restart markers: the GPU kernels take them (and the engine any baseline JPEG) */
    ck_assert_int_eq(rf_test_make_restart_shards(g_dir, N_SHARDS, N_PER_SHARD, 5, 77, 160), 0);
    snprintf(g_pattern, sizeof g_pattern, "%s/shard-*.tar", g_dir);
}

/* The source images, decoded whole at full scale, by sample id. */
typedef struct sources {
    uint64_t n;
    uint8_t **rgb;
    uint32_t *w, *h;
} sources;

static void sources_open(sources *s, const char *pattern)
{
    rf_test_jpegs j;
    rf_err e = {0};
    rf_test_jpegs_open(&j, pattern);
    s->n = j.n;
    s->rgb = calloc(s->n, sizeof *s->rgb);
    s->w = calloc(s->n, sizeof *s->w), s->h = calloc(s->n, sizeof *s->h);
    rf_decoder *dec = rf_decoder_create(NULL);
    for (uint64_t id = 0; id < s->n; id++)
        /* a damaged member has no reference (it is never delivered) */
        if (rf_decode_full(dec, j.jpeg[id], j.len[id], &s->rgb[id], &s->w[id], &s->h[id], &e))
            s->rgb[id] = NULL;
    rf_decoder_destroy(dec);
    rf_test_jpegs_close(&j);
}

static void sources_close(sources *s)
{
    for (uint64_t id = 0; id < s->n; id++)
        free(s->rgb[id]);
    free(s->rgb), free(s->w), free(s->h);
}

/* The reported box of a W x H source resampled to OUT_H x OUT_W NHWC with the library's
 * filter, sources clamped to the box as RandomResizedCrop does, flipped when flip. */
static void resample(const uint8_t *rgb, uint32_t W, const int32_t *box, int flip, uint8_t *out)
{
    rf_axis h = {0}, v = {0};
    ck_assert_int_eq(rf_axis_plan(&h, box[0], box[0] + box[2], box[0], box[0] + box[2], 0,
                                  OUT_W, flip), 0);
    ck_assert_int_eq(rf_axis_plan(&v, box[1], box[1] + box[3], box[1], box[1] + box[3], 0,
                                  OUT_H, 0), 0);
    size_t n = (size_t)W * 3;
    uint8_t *vrow = calloc(n + RF_RESIZE_SRC_PAD, 1);
    int32_t *acc = malloc(n * sizeof *acc);
    const uint8_t **rows = malloc(v.taps * sizeof *rows);
    for (uint32_t i = 0; i < OUT_H; i++) {
        for (uint32_t k = 0; k < v.taps; k++) /* zero-weight taps past the image read row 0 */
            rows[k] = rgb + (size_t)RF_MIN(v.start[i] + (int32_t)k, box[1] + box[3] - 1) * n;
        rf_resize_row_v(&v, i, rows, n, acc, vrow);
        rf_resize_row_h(&h, vrow, out + (size_t)i * OUT_W * 3);
    }
    free(vrow), free(acc), free(rows);
    rf_axis_free(&h), rf_axis_free(&v);
}

/* Python's round(): halves to even, as the library's crop arithmetic rounds. */
static double py_round(double x)
{
    double r = floor(x + 0.5);
    if (r - x == 0.5 && fmod(r, 2.0) != 0)
        r -= 1;
    return r;
}

/* torchvision's Resize(R) (the shorter side to R, the longer truncated) then
 * CenterCrop((OUT_H, OUT_W)), mapped back onto the W x H source and rounded to pixels. */
static void center_expect(uint32_t W, uint32_t H, uint32_t R, int32_t *box)
{
    double nw = W <= H ? R : floor((double)R * W / H), nh = W <= H ? floor((double)R * H / W) : R;
    double cw = fmin(OUT_W, nw), ch = fmin(OUT_H, nh);
    double left = py_round((nw - cw) / 2), top = py_round((nh - ch) / 2);
    box[0] = (int32_t)py_round(left * W / nw), box[1] = (int32_t)py_round(top * H / nh);
    box[2] = (int32_t)fmin(py_round(cw * W / nw), W - box[0]);
    box[3] = (int32_t)fmin(py_round(ch * H / nh), H - box[1]);
}

typedef struct run_opts {
    const char *pattern; /* NULL: g_pattern */
    uint32_t crop, threads, gpu, hw, dct_off, world, rank, on_error, no_flip;
    uint8_t *images; /* not NULL: each sample's delivered image lands at images[id x bytes] */
    uint64_t n_pixels_checked;
} run_opts;

/* One epoch; each sample's box and flip land in boxes[id] / flips[id] (the last delivery of
 * that id; a padding repeat must agree with its original). RANDOM with full-scale decodes:
 * every delivered image must equal resample() of its reported box. Returns the stats. */
static rf_stats run_epoch(const sources *src, run_opts *o, int32_t (*boxes)[4], uint8_t *flips,
                          uint64_t *blanks)
{
    const char *pat;
    rf_config c = rf_test_host_config(&pat, o->pattern ? o->pattern : g_pattern, 0);
    c.image_height = OUT_H, c.image_width = OUT_W;
    c.seed = 5150, c.epochs = 1, c.batch_size = 8, c.layout = RF_LAYOUT_NHWC;
    c.crop = o->crop, c.resize_shorter = o->crop == RF_CROP_CENTER ? 72 : 0;
    c.flip_prob = o->no_flip ? 0.0f : 0.5f; /* CENTER too: its flips must be reported */
    c.decode_threads = o->threads, c.gpu_decode = o->gpu, c.hw_decode_percent = o->hw;
    c.dct_scaling = o->dct_off ? RF_DCT_SCALING_OFF : RF_DCT_SCALING_AUTO;
    c.world_size = o->world ? o->world : 1, c.rank = o->rank;
    c.on_error = o->on_error;
    rf_loader *ld = rf_test_create_ok(&c);
    size_t n = (size_t)OUT_H * OUT_W * 3;
    uint8_t *want = malloc(n);
    int full_scale = o->dct_off || o->gpu || o->hw;
    rf_batch *b;
    int rc;
    while ((rc = rf_loader_next(ld, &b)) == 0 || rc == RF_EPOCH_END) {
        if (rc == RF_EPOCH_END)
            continue;
        ck_assert_ptr_nonnull(b->crop_boxes);
        ck_assert_ptr_nonnull(b->flips);
        for (uint32_t i = 0; i < b->count; i++) {
            const int32_t *box = b->crop_boxes + 4 * (size_t)i;
            uint64_t id = b->sample_ids[i];
            if (id == UINT64_MAX) { /* skip mode's blank padding */
                ck_assert(box[0] == 0 && box[1] == 0 && box[2] == 0 && box[3] == 0);
                ck_assert_uint_eq(b->flips[i], 0);
                (*blanks)++;
                continue;
            }
            ck_assert_ptr_nonnull(src->rgb[id]);
            uint32_t W = src->w[id], H = src->h[id];
            ck_assert_msg(box[0] >= 0 && box[1] >= 0 && box[2] >= 1 && box[3] >= 1 &&
                              (uint32_t)(box[0] + box[2]) <= W &&
                              (uint32_t)(box[1] + box[3]) <= H,
                          "sample %llu: box %d,%d %dx%d outside its %ux%u image",
                          (unsigned long long)id, box[0], box[1], box[2], box[3], W, H);
            ck_assert_uint_le(b->flips[i], 1);
            if (b->is_padding[i]) /* a repeat: its original's box and flip */
                ck_assert(memcmp(boxes[id], box, sizeof boxes[id]) == 0 &&
                          flips[id] == b->flips[i]);
            memcpy(boxes[id], box, sizeof boxes[id]);
            flips[id] = b->flips[i];
            if (o->images)
                memcpy(o->images + id * n, (uint8_t *)b->data + i * n, n);
            if (o->crop == RF_CROP_RANDOM && full_scale) {
                resample(src->rgb[id], W, box, b->flips[i], want);
                ck_assert_msg(memcmp(want, (uint8_t *)b->data + i * n, n) == 0,
                              "sample %llu (padding %u): box %d,%d %dx%d flip %u does not give "
                              "the delivered pixels", (unsigned long long)id, b->is_padding[i],
                              box[0], box[1], box[2], box[3], b->flips[i]);
                o->n_pixels_checked++;
            }
        }
        rf_loader_release(ld, b, NULL);
    }
    ck_assert_int_eq(rc, RF_DONE);
    rf_stats st;
    rf_stats_init(&st);
    ck_assert_int_eq(rf_loader_stats(ld, &st), 0);
    rf_loader_destroy(ld);
    free(want);
    return st;
}

START_TEST(center_boxes_are_resize_shorter_then_center)
{
    make_data();
    sources src;
    sources_open(&src, g_pattern);
    int32_t boxes[N_SAMPLES][4], want[4];
    uint8_t flips[N_SAMPLES];
    uint64_t blanks = 0, flipped = 0;
    memset(boxes, 0xff, sizeof boxes);
    size_t n = (size_t)OUT_H * OUT_W * 3;
    uint8_t *img = malloc(N_SAMPLES * n), *plain = malloc(N_SAMPLES * n);
    int32_t pboxes[N_SAMPLES][4];
    uint8_t pflips[N_SAMPLES];
    run_opts o = {.crop = RF_CROP_CENTER, .threads = 2, .images = img};
    run_epoch(&src, &o, boxes, flips, &blanks);
    run_opts p = {.crop = RF_CROP_CENTER, .threads = 2, .images = plain, .no_flip = 1};
    run_epoch(&src, &p, pboxes, pflips, &blanks);
    for (uint32_t id = 0; id < N_SAMPLES; id++) {
        /* the flip reported is the one applied: a flipped image mirrors the unflipped run's */
        ck_assert(memcmp(pboxes[id], boxes[id], sizeof want) == 0 && pflips[id] == 0);
        for (uint32_t y = 0; y < OUT_H; y++)
            for (uint32_t x = 0; x < OUT_W; x++) {
                uint32_t sx = flips[id] ? OUT_W - 1 - x : x;
                ck_assert_msg(memcmp(img + id * n + ((size_t)y * OUT_W + x) * 3,
                                     plain + id * n + ((size_t)y * OUT_W + sx) * 3, 3) == 0,
                              "sample %u flip %u: pixel %u,%u", id, flips[id], x, y);
            }
    }
    free(img), free(plain);
    for (uint32_t id = 0; id < N_SAMPLES; id++) {
        center_expect(src.w[id], src.h[id], 72, want);
        ck_assert_msg(memcmp(want, boxes[id], sizeof want) == 0,
                      "sample %u (%ux%u): box %d,%d %dx%d, expected %d,%d %dx%d", id, src.w[id],
                      src.h[id], boxes[id][0], boxes[id][1], boxes[id][2], boxes[id][3],
                      want[0], want[1], want[2], want[3]);
        flipped += flips[id];
    }
    ck_assert_uint_gt(flipped, 0); /* flip_prob 0.5 over 42 samples: both kinds seen */
    ck_assert_uint_lt(flipped, N_SAMPLES);
    sources_close(&src);
}
END_TEST

/* RANDOM on every path and at 1 and 3 threads: the delivered pixels are the reported box's,
 * and the boxes and flips are the same everywhere; with DCT scaling (CPU, AUTO) the boxes are
 * still the full-resolution ones. */
START_TEST(random_boxes_give_the_pixels_on_every_path)
{
    make_data();
    sources src;
    sources_open(&src, g_pattern);
    static int32_t ref[N_SAMPLES][4], got[N_SAMPLES][4];
    uint8_t rflips[N_SAMPLES], gflips[N_SAMPLES];
    uint64_t blanks = 0;
    run_opts base = {.crop = RF_CROP_RANDOM, .threads = 1, .dct_off = 1};
    run_epoch(&src, &base, ref, rflips, &blanks);
    ck_assert_uint_eq(base.n_pixels_checked, N_SAMPLES);
    const struct {
        uint32_t threads, gpu, hw, dct_off;
    } paths[] = {{3, 0, 0, 1}, {1, 1, 0, 0}, {3, 1, 0, 0}, {1, 0, 100, 0}, {3, 0, 100, 0},
                 {3, 0, 0, 0}};
    for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++) {
        run_opts o = {.crop = RF_CROP_RANDOM, .threads = paths[p].threads, .gpu = paths[p].gpu,
                      .hw = paths[p].hw, .dct_off = paths[p].dct_off};
        memset(got, 0xff, sizeof got);
        rf_stats st = run_epoch(&src, &o, got, gflips, &blanks);
        if (paths[p].gpu)
            ck_assert_uint_gt(st.gpu_decoded, 0);
        if (paths[p].hw)
            ck_assert_uint_eq(st.hw_decoded, N_SAMPLES);
        if (!paths[p].gpu && !paths[p].hw && !paths[p].dct_off)
            ck_assert_uint_gt(st.dct_scaled, 0); /* the boxes below are still full-scale */
        for (uint32_t id = 0; id < N_SAMPLES; id++)
            ck_assert_msg(memcmp(ref[id], got[id], sizeof ref[id]) == 0 &&
                              rflips[id] == gflips[id],
                          "path %zu sample %u: box %d,%d %dx%d flip %u, CPU's %d,%d %dx%d "
                          "flip %u", p, id, got[id][0], got[id][1], got[id][2], got[id][3],
                          gflips[id], ref[id][0], ref[id][1], ref[id][2], ref[id][3],
                          rflips[id]);
    }
    ck_assert_uint_eq(blanks, 0);
    sources_close(&src);
}
END_TEST

/* Padding repeats (4 ranks over 22 samples: 2 repeats among them) and skip mode's
 * replacement of a damaged JPEG report the boxes of what they delivered: the pixels say so. */
START_TEST(padding_and_replacements_report_what_was_delivered)
{
    char *dir = rf_test_mkdtemp("boxes_skip");
    ck_assert_int_eq(rf_test_make_restart_shards(dir, 1, 22, 5, 78, 160), 0);
    char pattern[600], path[600], key[64];
    snprintf(pattern, sizeof pattern, "%s/shard-*.tar", dir);
    sources src;
    sources_open(&src, pattern);
    static int32_t boxes[22][4];
    uint8_t flips[22];
    uint64_t blanks = 0, checked = 0;
    for (uint32_t rank = 0; rank < 4; rank++) {
        run_opts o = {.pattern = pattern, .crop = RF_CROP_RANDOM, .threads = 3, .dct_off = 1,
                      .gpu = rank & 1, .world = 4, .rank = rank};
        run_epoch(&src, &o, boxes, flips, &blanks);
        checked += o.n_pixels_checked;
    }
    ck_assert_uint_eq(checked, 24); /* 22 samples and 2 padding repeats, each checked */
    snprintf(path, sizeof path, "%s/shard-0000.tar", dir);
    ck_assert_int_eq(rf_test_damage_entropy(path, 3, key, sizeof key), 0);
    for (uint32_t gpu = 0; gpu <= 1; gpu++) {
        blanks = 0;
        run_opts o = {.pattern = pattern, .crop = RF_CROP_RANDOM, .threads = 3, .gpu = gpu,
                      .dct_off = 1, .on_error = RF_ON_ERROR_SKIP};
        rf_stats st = run_epoch(&src, &o, boxes, flips, &blanks);
        ck_assert_uint_eq(st.skipped, 1);
        ck_assert_uint_eq(o.n_pixels_checked, 21); /* the replacement's pixels among them */
        ck_assert_uint_eq(blanks, 1);
    }
    sources_close(&src);
    free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("crop_boxes");
    TCase *tc = tcase_create("crop_boxes");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, center_boxes_are_resize_shorter_then_center);
    tcase_add_test(tc, random_boxes_give_the_pixels_on_every_path);
    tcase_add_test(tc, padding_and_replacements_report_what_was_delivered);
    suite_add_tcase(s, tc);
    return rf_test_run_suite(s);
}
