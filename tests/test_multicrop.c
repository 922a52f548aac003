/* test_multicrop.c — rf_config.multi_crop (issue 46 item 5): K views per sample, decoded once.
 * Each delivered view equals the library's own single-view decode of the box it reports
 * (rf_decode_image_box at the DCT scale the rule gives: the smallest of 1/8, 1/4, 1/2, 1 at
 * which every view's box still has its output's rows and columns), at 1 and 3 decode threads,
 * with padding repeats and skip mode's replacements among them; views differ from each other;
 * the same seed gives the same views and another seed others; a run resumed mid-epoch delivers
 * the uninterrupted run's views, every sample once; float conversion applies to each view at
 * its own size; the GPU paths (gpu_decode's kernels and hw_decode_percent's engines, in the host
 * backend's emulation) deliver the CPU's full-scale views byte for byte, one packet a sample;
 * bad text, a token source and a sample_hook are refused by name (masks, boxes and keypoints
 * per view: test_multicrop_targets.c). At the decode
 * level, rf_decode_views equals rf_decode_image with each view's own transform and seed for
 * JPEG (baseline, progressive), PNG and WebP (lossy and lossless), in both layouts, with
 * RANDOM crops and with letterbox and center_pad views (a rectangle of the output, padded). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "decode/decode.h"
#include "ringfeed.h"
#include "synth.h"
#include "testutil.h"

#define N_SHARDS 2
#define N_PER_SHARD 21
#define N_SAMPLES (N_SHARDS * N_PER_SHARD)
#define VIEWS "2x48x40:0.4-1,3x16:0.1-0.4"
#define NV 5

static const uint32_t VH[NV] = {48, 48, 16, 16, 16}, VW[NV] = {40, 40, 16, 16, 16};
static char *g_dir, g_pattern[512];

static size_t view_bytes(uint32_t k) { return (size_t)VH[k] * VW[k] * 3; }
static size_t sample_bytes(void)
{
    size_t n = 0;
    for (uint32_t k = 0; k < NV; k++)
        n += view_bytes(k);
    return n;
}

static void make_data(void)
{
    if (g_dir)
        return;
    g_dir = rf_test_mkdtemp("multicrop");
    /* restart markers: region decodes serve the views' union */
    ck_assert_int_eq(rf_test_make_restart_shards(g_dir, N_SHARDS, N_PER_SHARD, 5, 77, 160), 0);
    snprintf(g_pattern, sizeof g_pattern, "%s/shard-*.tar", g_dir);
}

typedef rf_test_jpegs sources; /* every sample's JPEG bytes, by sample id */

/* The documented scale rule from the reported boxes: the smallest num/8 (num 1, 2, 4) at
 * which every view's box keeps at least its output's columns and rows, else 8 (full). */
static uint32_t expected_num(const int32_t box[NV][4])
{
    for (uint32_t n = 1; n < 8; n *= 2) {
        int ok = 1;
        for (uint32_t k = 0; k < NV; k++)
            ok &= (double)box[k][2] * n >= VW[k] * 8.0 && (double)box[k][3] * n >= VH[k] * 8.0;
        if (ok)
            return n;
    }
    return 8;
}

typedef struct run_opts {
    const char *pattern; /* NULL: g_pattern */
    uint32_t threads, world, rank, on_error, dct_off, dtype, layout;
    uint32_t gpu, hw; /* gpu_decode, hw_decode_percent (both decode at full scale) */
    uint64_t seed;
    int check;          /* compare every view with its single-view decode */
    uint8_t *views;     /* not NULL: sample id's views (sample_bytes, NHWC uint8) land here */
    uint32_t *seen;     /* not NULL: deliveries per id (padding excluded) */
    uint64_t checked, blanks, distinct;
} run_opts;

static rf_config views_config(const char **pat, const run_opts *o)
{
    rf_config c = rf_test_host_config(pat, o->pattern ? o->pattern : g_pattern, 0);
    c.seed = o->seed ? o->seed : 5150, c.epochs = 1, c.batch_size = 8;
    c.multi_crop = VIEWS, c.flip_prob = 0.5f;
    c.decode_threads = o->threads ? o->threads : 1;
    c.world_size = o->world ? o->world : 1, c.rank = o->rank, c.on_error = o->on_error;
    c.dct_scaling = o->dct_off ? RF_DCT_SCALING_OFF : RF_DCT_SCALING_AUTO;
    c.dtype = o->dtype, c.layout = o->layout;
    c.gpu_decode = o->gpu, c.hw_decode_percent = o->hw;
    return c;
}

/* Sample i's views of batch b, each checked against its single-view decode. */
static void check_sample(const sources *src, run_opts *o, rf_decoder *dec, const rf_batch *b,
                         uint32_t i, uint8_t *want)
{
    uint64_t id = b->sample_ids[i];
    int32_t box[NV][4];
    for (uint32_t k = 0; k < NV; k++)
        memcpy(box[k], b->views[k].crop_boxes + 4 * (size_t)i, sizeof box[k]);
    uint32_t num = o->dct_off || o->gpu || o->hw ? 8 : expected_num(box);
    rf_decoder_set_max_scale_denom(dec, 8 / num);
    for (uint32_t k = 0; k < NV; k++) {
        const rf_view *v = &b->views[k];
        const uint8_t *got = (const uint8_t *)v->data + i * v->sample_stride;
        rf_transform t = {.crop = RF_CROP_RANDOM, .height = VH[k], .width = VW[k],
                          .layout = RF_LAYOUT_NHWC, .scale_min = 0.1f, .scale_max = 1.0f,
                          .ratio_min = 0.75f, .ratio_max = 4.0f / 3.0f, .flip_prob = 0.5f};
        rf_decode_info info;
        rf_err e = {0};
        ck_assert_int_eq(rf_decode_image_box(dec, src->jpeg[id], src->len[id], &t, box[k][0],
                                             box[k][1], box[k][2], box[k][3], v->flips[i], want,
                                             &info, &e), 0);
        ck_assert_uint_eq(info.scale_denom, 8 / num);
        /* its rf_batch.letterbox rows: where the view's box landed */
        ck_assert_msg(memcmp(v->letterbox + 4 * (size_t)i, info.place, sizeof info.place) == 0,
                      "sample %llu view %u: letterbox row", (unsigned long long)id, k);
        ck_assert_msg(memcmp(want, got, view_bytes(k)) == 0,
                      "sample %llu view %u (padding %u, scale 1/%u): box %d,%d %dx%d flip %u "
                      "is not its single-view decode", (unsigned long long)id, k,
                      b->is_padding[i], 8 / num, box[k][0], box[k][1], box[k][2], box[k][3],
                      v->flips[i]);
        ck_assert(box[k][0] + box[k][2] <= (int32_t)info.width &&
                  box[k][1] + box[k][3] <= (int32_t)info.height);
    }
    o->checked++;
    /* two views of one group are two crops */
    o->distinct += memcmp(b->views[0].crop_boxes + 4 * (size_t)i,
                          b->views[1].crop_boxes + 4 * (size_t)i, 16) != 0 &&
                   memcmp((const uint8_t *)b->views[0].data + i * b->views[0].sample_stride,
                          (const uint8_t *)b->views[1].data + i * b->views[1].sample_stride,
                          view_bytes(0)) != 0;
}

/* One epoch; returns the stats. */
static rf_stats run_epoch(const sources *src, run_opts *o)
{
    const char *pat;
    rf_config c = views_config(&pat, o);
    rf_loader *ld = rf_test_create_ok(&c);
    rf_decoder *dec = rf_decoder_create(NULL);
    uint8_t *want = malloc(sample_bytes());
    rf_batch *b;
    int rc;
    while ((rc = rf_loader_next(ld, &b)) == 0 || rc == RF_EPOCH_END) {
        if (rc == RF_EPOCH_END)
            continue;
        ck_assert_uint_eq(b->nviews, NV);
        ck_assert_ptr_eq(b->crop_boxes, b->views[0].crop_boxes);
        ck_assert_ptr_eq(b->letterbox, b->views[0].letterbox);
        ck_assert_uint_eq(b->ndim, 2);
        ck_assert_uint_eq(b->data_bytes, (uint64_t)b->count * b->views[0].sample_stride);
        for (uint32_t k = 0; k < NV; k++)
            ck_assert(b->views[k].shape[0] == b->count && b->views[k].shape[1] == VH[k] &&
                      b->views[k].shape[2] == VW[k] && b->views[k].shape[3] == 3);
        for (uint32_t i = 0; i < b->count; i++) {
            uint64_t id = b->sample_ids[i];
            if (id == UINT64_MAX) { /* skip mode's blank padding: zeros, no boxes */
                for (uint32_t k = 0; k < NV; k++) {
                    const int32_t *bx = b->views[k].crop_boxes + 4 * (size_t)i;
                    const float *pl = b->views[k].letterbox + 4 * (size_t)i;
                    ck_assert(!bx[0] && !bx[1] && !bx[2] && !bx[3] && !b->views[k].flips[i]);
                    ck_assert(pl[0] == 0 && pl[1] == 0 && pl[2] == 0 && pl[3] == 0);
                }
                o->blanks++;
                continue;
            }
            if (o->check)
                check_sample(src, o, dec, b, i, want);
            if (o->seen && !b->is_padding[i])
                o->seen[id]++;
            if (o->views) {
                uint8_t *dst = o->views + id * sample_bytes();
                for (uint32_t k = 0; k < NV; k++, dst += view_bytes(k - 1))
                    memcpy(dst, (const uint8_t *)b->views[k].data + i * b->views[k].sample_stride,
                           view_bytes(k));
            }
        }
        rf_loader_release(ld, b, NULL);
    }
    ck_assert_int_eq(rc, RF_DONE);
    rf_stats st;
    rf_stats_init(&st);
    ck_assert_int_eq(rf_loader_stats(ld, &st), 0);
    rf_loader_destroy(ld);
    rf_decoder_destroy(dec);
    free(want);
    return st;
}

START_TEST(views_are_their_single_view_decodes)
{
    make_data();
    sources src;
    rf_test_jpegs_open(&src, g_pattern);
    size_t n = N_SAMPLES * sample_bytes();
    uint8_t *one = malloc(n), *three = malloc(n), *full = malloc(n);
    run_opts a = {.threads = 1, .check = 1, .views = one};
    rf_stats st = run_epoch(&src, &a);
    ck_assert_uint_eq(a.checked, N_SAMPLES);
    ck_assert_uint_gt(st.dct_scaled, 0);    /* the rule picked a DCT scale for some */
    ck_assert_uint_gt(st.region_decoded, 0); /* and regions served the union */
    ck_assert_uint_gt(a.distinct, N_SAMPLES / 2);
    run_opts b = {.threads = 3, .check = 1, .views = three};
    run_epoch(&src, &b);
    ck_assert_uint_eq(b.checked, N_SAMPLES);
    ck_assert(memcmp(one, three, n) == 0); /* the thread count changes nothing */
    run_opts f = {.threads = 3, .check = 1, .views = full, .dct_off = 1};
    st = run_epoch(&src, &f);
    ck_assert_uint_eq(st.dct_scaled, 0);
    ck_assert_uint_eq(f.checked, N_SAMPLES);
    free(one), free(three), free(full);
    rf_test_jpegs_close(&src);
}
END_TEST

/* The GPU paths: every sample one packet of all its views (the union of what they read
 * decoded once), on the kernels and on the engines, at 1 and 3 threads: the views, boxes and
 * flips are the CPU's full-scale ones byte for byte. A damaged file is found on the kernels
 * too, and skip mode replaces it with views of their own. */
START_TEST(views_on_the_gpu_paths)
{
    make_data();
    sources src;
    rf_test_jpegs_open(&src, g_pattern);
    size_t n = N_SAMPLES * sample_bytes();
    uint8_t *cpu = malloc(n), *gpu = malloc(n);
    run_opts c = {.threads = 1, .check = 1, .views = cpu, .dct_off = 1};
    run_epoch(&src, &c);
    for (int k = 0; k < 3; k++) {
        run_opts g = {.threads = k == 1 ? 3 : 1, .check = 1, .views = gpu, .gpu = k < 2,
                      .hw = k == 2 ? 100 : 0};
        memset(gpu, 0, n);
        rf_stats st = run_epoch(&src, &g);
        ck_assert_uint_eq(g.checked, N_SAMPLES);
        ck_assert_uint_eq(k < 2 ? st.gpu_decoded : st.hw_decoded, N_SAMPLES);
        ck_assert_msg(memcmp(cpu, gpu, n) == 0, "path %d: views differ from the CPU's", k);
    }
    free(cpu), free(gpu);
    rf_test_jpegs_close(&src);
    char *dir = rf_test_mkdtemp("multicrop_gpu_skip"), pattern[600], path[600], key[64];
    ck_assert_int_eq(rf_test_make_restart_shards(dir, 1, 22, 5, 79, 160), 0);
    snprintf(pattern, sizeof pattern, "%s/shard-*.tar", dir);
    snprintf(path, sizeof path, "%s/shard-0000.tar", dir);
    ck_assert_int_eq(rf_test_damage_entropy(path, 3, key, sizeof key), 0);
    rf_test_jpegs_open(&src, pattern);
    run_opts o = {.pattern = pattern, .threads = 3, .check = 1, .gpu = 1,
                  .on_error = RF_ON_ERROR_SKIP};
    rf_stats st = run_epoch(&src, &o);
    ck_assert_uint_eq(st.skipped, 1);
    ck_assert_uint_eq(o.checked + o.blanks, 22);
    rf_test_jpegs_close(&src);
    free(dir);
}
END_TEST

/* Padding repeats (4 ranks over 22 samples: 2 repeats) and a skip-mode replacement of a
 * damaged JPEG deliver their own sample's views, each its single-view decode. */
START_TEST(padding_and_replacements_get_their_views)
{
    char *dir = rf_test_mkdtemp("multicrop_skip");
    ck_assert_int_eq(rf_test_make_restart_shards(dir, 1, 22, 5, 78, 160), 0);
    char pattern[600], path[600], key[64];
    snprintf(pattern, sizeof pattern, "%s/shard-*.tar", dir);
    sources src;
    rf_test_jpegs_open(&src, pattern);
    uint64_t checked = 0;
    for (uint32_t rank = 0; rank < 4; rank++) {
        run_opts o = {.pattern = pattern, .threads = 3, .check = 1, .world = 4, .rank = rank};
        run_epoch(&src, &o);
        checked += o.checked;
    }
    ck_assert_uint_eq(checked, 24); /* 22 samples and 2 padding repeats */
    snprintf(path, sizeof path, "%s/shard-0000.tar", dir);
    ck_assert_int_eq(rf_test_damage_entropy(path, 3, key, sizeof key), 0);
    run_opts o = {.pattern = pattern, .threads = 3, .check = 1, .on_error = RF_ON_ERROR_SKIP};
    rf_stats st = run_epoch(&src, &o);
    ck_assert_uint_eq(st.skipped, 1);
    ck_assert_uint_eq(o.checked, 21); /* the replacement's views among them */
    ck_assert_uint_eq(o.blanks, 1);
    rf_test_jpegs_close(&src);
    free(dir);
}
END_TEST

/* The same seed gives the same views, another seed others; a run stopped after two batches
 * and resumed from its state delivers the rest with the uninterrupted run's views, and the
 * two halves hold every sample exactly once. */
START_TEST(views_follow_the_seed_and_survive_a_resume)
{
    make_data();
    size_t sb = sample_bytes(), n = N_SAMPLES * sb;
    uint8_t *ref = malloc(n), *again = malloc(n), *other = malloc(n), *resumed = calloc(1, n);
    uint32_t seen[N_SAMPLES] = {0};
    run_opts a = {.threads = 3, .views = ref, .seen = seen};
    run_epoch(NULL, &a);
    for (uint32_t id = 0; id < N_SAMPLES; id++)
        ck_assert_uint_eq(seen[id], 1);
    run_opts b = {.threads = 1, .views = again};
    run_epoch(NULL, &b);
    ck_assert(memcmp(ref, again, n) == 0);
    run_opts c = {.threads = 3, .views = other, .seed = 77};
    run_epoch(NULL, &c);
    uint32_t differ = 0;
    for (uint32_t id = 0; id < N_SAMPLES; id++)
        differ += memcmp(ref + id * sb, other + id * sb, sb) != 0;
    ck_assert_uint_eq(differ, N_SAMPLES);

    memset(seen, 0, sizeof seen);
    const char *pat;
    run_opts r = {.threads = 3};
    rf_config cfg = views_config(&pat, &r);
    rf_loader *ld = rf_test_create_ok(&cfg);
    rf_batch *bt;
    uint8_t blob[256];
    uint64_t len = 0;
    for (int pass = 0; pass < 2; pass++) {
        int rc;
        for (int got = 0; (pass == 1 || got < 2) && (rc = rf_loader_next(ld, &bt)) == 0; got++) {
            for (uint32_t i = 0; i < bt->count; i++) {
                uint64_t id = bt->sample_ids[i];
                seen[id]++;
                uint8_t *dst = resumed + id * sb;
                for (uint32_t k = 0; k < NV; k++, dst += view_bytes(k - 1))
                    memcpy(dst, (const uint8_t *)bt->views[k].data + i * bt->views[k].sample_stride,
                           view_bytes(k));
            }
            rf_loader_release(ld, bt, NULL);
        }
        if (pass == 0) {
            ck_assert_int_eq(rf_loader_state(ld, blob, sizeof blob, &len), 0);
            rf_loader_destroy(ld);
            cfg.resume_state = blob, cfg.resume_state_bytes = len;
            ld = rf_test_create_ok(&cfg);
        }
    }
    rf_loader_destroy(ld);
    for (uint32_t id = 0; id < N_SAMPLES; id++)
        ck_assert_msg(seen[id] == 1, "sample %u delivered %u times", id, seen[id]);
    ck_assert(memcmp(ref, resumed, n) == 0);
    free(ref), free(again), free(other), free(resumed);
}
END_TEST

/* float32 NCHW on the host backend: each view is the uint8 run's view normalized at its own
 * size, in planes. */
START_TEST(conversion_applies_to_each_view)
{
    make_data();
    size_t sb = sample_bytes(), n = N_SAMPLES * sb;
    uint8_t *u8 = malloc(n);
    run_opts a = {.threads = 2, .views = u8};
    run_epoch(NULL, &a);
    const char *pat;
    run_opts o = {.threads = 2, .dtype = RF_DTYPE_FLOAT32, .layout = RF_LAYOUT_NCHW};
    rf_config c = views_config(&pat, &o);
    rf_loader *ld = rf_test_create_ok(&c);
    rf_batch *b;
    uint64_t checked = 0;
    while (rf_loader_next(ld, &b) == 0) {
        for (uint32_t i = 0; i < b->count; i++) {
            const uint8_t *ref = u8 + b->sample_ids[i] * sb;
            for (uint32_t k = 0; k < NV; k++, ref += view_bytes(k - 1)) {
                const rf_view *v = &b->views[k];
                ck_assert(v->shape[1] == 3 && v->shape[2] == VH[k] && v->shape[3] == VW[k]);
                const float *f = (const float *)((const uint8_t *)v->data + i * v->sample_stride);
                for (uint32_t ch = 0; ch < 3; ch++)
                    for (uint32_t p = 0; p < VH[k] * VW[k]; p++) {
                        float want = (ref[p * 3 + ch] - c.mean[ch]) / c.std[ch];
                        ck_assert_msg(fabsf(f[ch * VH[k] * VW[k] + p] - want) < 1e-4f,
                                      "view %u channel %u pixel %u", k, ch, p);
                    }
            }
            checked++;
        }
        rf_loader_release(ld, b, NULL);
    }
    ck_assert_uint_eq(checked, N_SAMPLES);
    rf_loader_destroy(ld);
    free(u8);
}
END_TEST

static int hook(const rf_sample_view *v, void *ctx)
{
    (void)v, (void)ctx;
    return 0;
}

/* c is refused at create, the message naming multi_crop and `says`. */
static void refused_config(const rf_config *c, const char *says)
{
    rf_loader *ld = NULL;
    char err[512] = "";
    ck_assert_int_eq(rf_loader_create(c, &ld, err, sizeof err), RF_EINVAL);
    ck_assert_ptr_null(ld);
    ck_assert_msg(strstr(err, "multi_crop") && strstr(err, says), "\"%s\": %s", c->multi_crop,
                  err);
}

/* sample_hook is handed one image per sample (masks, boxes and keypoints follow each view:
 * test_multicrop_targets.c) */
static void refused_hook(void)
{
    const char *pat;
    rf_config c = rf_test_host_config(&pat, g_pattern, 0);
    c.multi_crop = "2x32", c.sample_hook = hook;
    refused_config(&c, "sample_hook");
}

static void refused(const char *views, uint32_t tokens, const char *says)
{
    make_data();
    const char *pat;
    rf_config c = rf_test_host_config(&pat, g_pattern, 0);
    c.multi_crop = views;
    if (tokens)
        c.source = RF_SOURCE_TOKENS, c.seq_len = 8, c.token_bytes = 2;
    refused_config(&c, says);
}

START_TEST(bad_settings_are_refused_by_name)
{
    refused("2x", 0, "group 1");
    refused("2x224,x96", 0, "group 2 (\"x96\")");
    refused("0x224", 0, "0 views");
    refused("65x8", 0, "1..64 views");
    refused("2x224:0.5-0.4", 0, "scale range");
    refused("2x224:0-1", 0, "scale range");
    refused("2x224:0.4-1.5", 0, "scale range");
    refused("2x9000", 0, "out of range 1..8192");
    refused("2x224;6x96", 0, "not COUNTxSIZE");
    refused("2x224", 1, "token source");
    refused_hook();
    {
        const char *pat;
        rf_config c = rf_test_host_config(&pat, g_pattern, 0);
        c.multi_crop = "2x32", c.crop = RF_CROP_NATIVE;
        refused_config(&c, "native");
    }
    /* and a good one reports the loader's copy */
    const char *pat;
    rf_config c = rf_test_host_config(&pat, g_pattern, 0);
    char text[] = " 2x224:0.4-1 , 6x96x80 ";
    c.multi_crop = text;
    rf_loader *ld = rf_test_create_ok(&c);
    text[1] = '9';
    rf_config got;
    rf_config_init(&got);
    ck_assert_int_eq(rf_loader_config(ld, &got), 0);
    ck_assert_str_eq(got.multi_crop, " 2x224:0.4-1 , 6x96x80 ");
    rf_loader_destroy(ld);
}
END_TEST

/* rf_decode_views against rf_decode_image with each view's transform and seed, the decoder
 * capped at the scale the views were decoded at. */
static void views_match_single(rf_decoder *d, const uint8_t *data, size_t len, uint32_t layout,
                               uint32_t crop, const char *what)
{
    rf_views v;
    rf_err e = {0};
    ck_assert_int_eq(rf_views_parse("2x40x56:0.3-1,4x24:0.05-0.3", 0.08f, 1.0f, &v, &e), 0);
    ck_assert_uint_eq(v.n, 6);
    rf_transform base = {.crop = crop, .height = 10, .width = 10, .layout = layout,
                         .scale_min = 0.08f, .scale_max = 1, .ratio_min = 0.75f,
                         .ratio_max = 4.0f / 3.0f, .flip_prob = 0.5f, .pad = {114, 7, 200}};
    uint8_t *out = malloc(v.bytes), *want = malloc(v.bytes);
    rf_decode_info infos[RF_VIEWS_MAX], info;
    for (uint64_t seed = 1; seed <= 12; seed++) {
        rf_decoder_set_max_scale_denom(d, 8);
        ck_assert_int_eq(rf_decode_views(d, data, len, &base, &v, seed, out, infos, &e), 0);
        for (uint32_t k = 0; k < v.n; k++) {
            rf_transform t;
            rf_view_transform(&base, &v, k, &t);
            rf_decoder_set_max_scale_denom(d, infos[k].scale_denom);
            ck_assert_int_eq(rf_decode_image(d, data, len, &t, rf_view_seed(seed, k),
                                             want + v.offset[k], &info, &e), 0);
            ck_assert_uint_eq(info.scale_denom, infos[k].scale_denom);
            ck_assert(info.crop_x == infos[k].crop_x && info.crop_w == infos[k].crop_w &&
                      info.crop_y == infos[k].crop_y && info.crop_h == infos[k].crop_h &&
                      info.flipped == infos[k].flipped);
        }
        ck_assert_msg(memcmp(out, want, v.bytes) == 0, "%s seed %llu layout %u", what,
                      (unsigned long long)seed, layout);
    }
    free(out), free(want);
}

START_TEST(every_format_decodes_once_into_its_views)
{
    enum { PW = 301, PH = 233 };
    uint8_t *rgb = malloc((size_t)PW * PH * 3);
    rf_synth_image(99, PW, PH, rgb);
    struct {
        const char *what;
        uint8_t *p;
        size_t n;
    } f[5];
    ck_assert_int_eq(rf_synth_jpeg(rgb, PW, PH, 90, 0, &f[0].p, &f[0].n), 0);
    ck_assert_int_eq(rf_synth_jpeg(rgb, PW, PH, 90, 1, &f[1].p, &f[1].n), 0);
    ck_assert_int_eq(rf_synth_png(rgb, PW, PH, RF_SYNTH_PNG_RGB8, &f[2].p, &f[2].n), 0);
    ck_assert_int_eq(rf_synth_webp(rgb, PW, PH, 80, &f[3].p, &f[3].n), 0);
    ck_assert_int_eq(rf_synth_webp(rgb, PW, PH, -1, &f[4].p, &f[4].n), 0);
    f[0].what = "jpeg", f[1].what = "progressive jpeg", f[2].what = "png";
    f[3].what = "webp", f[4].what = "lossless webp";
    rf_decoder *d = rf_decoder_create(NULL);
    for (int i = 0; i < 5; i++) {
        views_match_single(d, f[i].p, f[i].n, RF_LAYOUT_NHWC, RF_CROP_RANDOM, f[i].what);
        views_match_single(d, f[i].p, f[i].n, RF_LAYOUT_NCHW, RF_CROP_RANDOM, f[i].what);
        /* views on a rectangle of their output, padded around it */
        views_match_single(d, f[i].p, f[i].n, RF_LAYOUT_NHWC, RF_CROP_LETTERBOX, f[i].what);
        views_match_single(d, f[i].p, f[i].n, RF_LAYOUT_NCHW, RF_CROP_CENTER_PAD, f[i].what);
        free(f[i].p);
    }
    rf_decoder_destroy(d);
    free(rgb);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("multicrop");
    TCase *tc = tcase_create("multicrop");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, every_format_decodes_once_into_its_views);
    tcase_add_test(tc, bad_settings_are_refused_by_name);
    tcase_add_test(tc, views_are_their_single_view_decodes);
    tcase_add_test(tc, padding_and_replacements_get_their_views);
    tcase_add_test(tc, views_on_the_gpu_paths);
    tcase_add_test(tc, views_follow_the_seed_and_survive_a_resume);
    tcase_add_test(tc, conversion_applies_to_each_view);
    suite_add_tcase(s, tc);
    return rf_test_run_suite(s);
}
