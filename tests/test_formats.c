/* test_formats.c — PNG and WebP samples: lossless encodings of one picture decode to the same
 * bytes as each other through every crop, flip and layout; bad files are errors named like
 * JPEG's (RF_ELIMIT from the header before any allocation, RF_EDECODE for damage); and in a
 * loader, a shard mixing JPEG, PNG and WebP gives each sample what rf_decode_image gives it,
 * the same bytes with the GPU decode path on or off (it takes the JPEGs only) and at any
 * thread count.
 * Pixels against an independent decoder (PIL) are python/tests/test_formats.py's. */
#include <check.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "decode/decode.h"
#include "loaders/dataset.h"
#include "loaders/tar.h"
#include "ringfeed.h"
#include "ringfeed_shards.h"
#include "synth.h"
#include "testutil.h"

#define W 97
#define H 61

typedef struct blob {
    uint8_t *p;
    size_t n;
} blob;

static blob png_of(const uint8_t *rgb, uint32_t w, uint32_t h, uint32_t kind)
{
    blob b;
    ck_assert_int_eq(rf_synth_png(rgb, w, h, kind, &b.p, &b.n), 0);
    return b;
}

static blob webp_of(const uint8_t *rgb, uint32_t w, uint32_t h, int quality)
{
    blob b;
    ck_assert_int_eq(rf_synth_webp(rgb, w, h, quality, &b.p, &b.n), 0);
    return b;
}

static rf_transform transform_hw(uint32_t crop, uint32_t layout, uint32_t oh, uint32_t ow)
{
    return (rf_transform){.crop = crop, .height = oh, .width = ow, .layout = layout,
                          .scale_min = 0.08f, .scale_max = 1.0f, .ratio_min = 0.75f,
                          .ratio_max = 4.0f / 3.0f, .flip_prob = 0.5f};
}

static rf_transform transform(uint32_t crop, uint32_t layout)
{
    return transform_hw(crop, layout, 24, 24);
}

/* Every blob (of a pic_w x pic_h picture) decodes to the bytes the first one does at oh x ow,
 * for 16 seeds of each crop and layout. */
static void assert_alike_hw(rf_decoder *d, const blob *v, size_t nv, uint32_t pic_w,
                            uint32_t pic_h, uint32_t oh, uint32_t ow)
{
    size_t n = (size_t)oh * ow * 3;
    uint8_t *want = malloc(n), *got = malloc(n);
    ck_assert(want && got);
    rf_err e = {0};
    for (uint32_t mode = 0; mode < 4; mode++) {
        rf_transform t = transform_hw(mode & 1 ? RF_CROP_CENTER : RF_CROP_RANDOM,
                                      mode & 2 ? RF_LAYOUT_NCHW : RF_LAYOUT_NHWC, oh, ow);
        for (uint64_t seed = 0; seed < 16; seed++) {
            rf_decode_info a, b;
            ck_assert_msg(rf_decode_image(d, v[0].p, v[0].n, &t, seed, want, &a, &e) == 0,
                          "%s", e.msg);
            ck_assert(a.width == pic_w && a.height == pic_h && a.scale_denom == 1);
            for (size_t i = 1; i < nv; i++) {
                ck_assert_msg(rf_decode_image(d, v[i].p, v[i].n, &t, seed, got, &b, &e) == 0,
                              "%zu: %s", i, e.msg);
                ck_assert_msg(memcmp(want, got, n) == 0, "encoding %zu, mode %u, "
                              "seed %llu", i, mode, (unsigned long long)seed);
                ck_assert(a.crop_x == b.crop_x && a.crop_w == b.crop_w && a.flipped == b.flipped);
            }
        }
    }
    free(want), free(got);
}

static void assert_alike(rf_decoder *d, const blob *v, size_t nv)
{
    assert_alike_hw(d, v, nv, W, H, 24, 24);
}

/* The same picture as 8-bit, 16-bit and RGBA PNG and as lossless WebP; a gray picture as gray
 * PNG and as RGB PNG; a 3-3-2 picture as palette PNG and as RGB PNG. */
START_TEST(lossless_encodings_decode_to_the_same_bytes)
{
    uint8_t rgb[W * H * 3], gray[W * H * 3], pal[W * H * 3];
    rf_synth_image(5, W, H, rgb);
    for (size_t i = 0; i < (size_t)W * H; i++) {
        memset(gray + 3 * i, rgb[3 * i + 1], 3);
        pal[3 * i] = rgb[3 * i] & 0xE0, pal[3 * i + 1] = rgb[3 * i + 1] & 0xE0;
        pal[3 * i + 2] = rgb[3 * i + 2] & 0xC0;
    }
    rf_decoder *d = rf_decoder_create(NULL);
    blob same[] = {png_of(rgb, W, H, RF_SYNTH_PNG_RGB8), png_of(rgb, W, H, RF_SYNTH_PNG_RGB16),
                   png_of(rgb, W, H, RF_SYNTH_PNG_RGBA8), webp_of(rgb, W, H, -1)};
    blob grays[] = {png_of(gray, W, H, RF_SYNTH_PNG_RGB8), png_of(rgb, W, H, RF_SYNTH_PNG_GRAY8)};
    blob pals[] = {png_of(pal, W, H, RF_SYNTH_PNG_RGB8), png_of(rgb, W, H, RF_SYNTH_PNG_PALETTE)};
    assert_alike(d, same, 4);
    assert_alike(d, grays, 2);
    assert_alike(d, pals, 2);
    /* and a whole-image check of each, as ringfeed-inspect runs it */
    uint32_t w, h;
    rf_err e = {0};
    for (size_t i = 0; i < 4; i++) {
        ck_assert_msg(rf_image_check(d, same[i].p, same[i].n, &w, &h, &e) == 0, "%s", e.msg);
        ck_assert(w == W && h == H);
        free(same[i].p);
    }
    for (size_t i = 0; i < 2; i++)
        free(grays[i].p), free(pals[i].p);
    rf_decoder_destroy(d);
}
END_TEST

/* Non-square output (height x width 96x160 and 160x96) through the PNG and WebP rows: 8- and
 * 16-bit PNG and lossless WebP of one picture give the same bytes in every crop and layout,
 * and the center crop has the output's shape (Resize(R) + CenterCrop((h, w)) on the source).
 * Pixels against PIL at 96x160: python/tests/test_formats.py's non-square case. */
START_TEST(non_square_encodings_decode_to_the_same_bytes)
{
    enum { PW = 301, PH = 203 };
    uint8_t *rgb = malloc((size_t)PW * PH * 3);
    ck_assert(rgb);
    rf_synth_image(9, PW, PH, rgb);
    rf_decoder *d = rf_decoder_create(NULL);
    blob same[] = {png_of(rgb, PW, PH, RF_SYNTH_PNG_RGB8), png_of(rgb, PW, PH, RF_SYNTH_PNG_RGB16),
                   webp_of(rgb, PW, PH, -1)};
    static const uint32_t hw[][2] = {{96, 160}, {160, 96}};
    for (size_t k = 0; k < 2; k++) {
        uint32_t oh = hw[k][0], ow = hw[k][1];
        assert_alike_hw(d, same, 3, PW, PH, oh, ow);
        rf_transform t = transform_hw(RF_CROP_CENTER, RF_LAYOUT_NHWC, oh, ow);
        uint8_t *out = malloc((size_t)oh * ow * 3);
        rf_decode_info a;
        rf_err e = {0};
        for (size_t i = 0; i < 3; i++) {
            ck_assert_msg(rf_decode_image(d, same[i].p, same[i].n, &t, 0, out, &a, &e) == 0,
                          "%s", e.msg);
            /* the box's aspect is the output's, within the rounding of its integer sides */
            double want = (double)ow / oh, got = (double)a.crop_w / a.crop_h;
            ck_assert_msg(got > want * 0.97 && got < want * 1.03, "%ux%u: box %ux%u", oh, ow,
                          a.crop_w, a.crop_h);
        }
        free(out);
    }
    for (size_t i = 0; i < 3; i++)
        free(same[i].p);
    free(rgb);
    rf_decoder_destroy(d);
}
END_TEST

static void be32_put(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* A copy of png with the IHDR's size replaced (and its CRC made right again). */
static blob png_sized(const blob *png, uint32_t w, uint32_t h)
{
    blob b = {malloc(png->n), png->n};
    memcpy(b.p, png->p, png->n);
    be32_put(b.p + 16, w), be32_put(b.p + 20, h);
    be32_put(b.p + 29, (uint32_t)crc32(0, b.p + 12, 17));
    return b;
}

/* rf_image_check fails on b with code saying `says`, and so does the decode unless only_check
 * (damage past the rows the crop needs is not read by it). */
static void expect_ex(rf_decoder *d, const blob *b, int code, const char *says, int only_check)
{
    uint8_t out[24 * 24 * 3];
    rf_transform t = transform(RF_CROP_CENTER, RF_LAYOUT_NHWC);
    rf_err e = {0};
    uint32_t w, h;
    int rc = rf_decode_image(d, b->p, b->n, &t, 1, out, NULL, &e);
    if (!only_check) {
        ck_assert_msg(rc == code, "decode: %d %s, not %d '%s'", rc, e.msg, code, says);
        ck_assert_msg(strstr(e.msg, says), "'%s' does not say '%s'", e.msg, says);
    }
    ck_assert_msg(rf_image_check(d, b->p, b->n, &w, &h, &e) == code, "check: %s", e.msg);
    ck_assert_msg(strstr(e.msg, says), "check: '%s' does not say '%s'", e.msg, says);
}

static void expect(rf_decoder *d, const blob *b, int code, const char *says)
{
    expect_ex(d, b, code, says, 0);
}

/* Truncated, bad CRC, a size over the limits (a 60000x60000 header; 40000x40000 over a few
 * bytes of zlib: refused from the header, nothing inflated), truncated WebP, no signature. */
START_TEST(bad_files_are_named_errors)
{
    uint8_t rgb[W * H * 3];
    rf_synth_image(6, W, H, rgb);
    rf_decoder *d = rf_decoder_create(NULL);
    blob png = png_of(rgb, W, H, RF_SYNTH_PNG_RGB8), webp = webp_of(rgb, W, H, 80);
    blob cut = {png.p, png.n / 2}, wcut = {webp.p, webp.n / 2};
    expect(d, &cut, RF_EDECODE, "PNG");
    blob crc = png_sized(&png, W, H);
    crc.p[png.n - 13] ^= 0x55; /* the IDAT's CRC, after the last row */
    expect_ex(d, &crc, RF_EDECODE, "PNG after the image: invalid chunk checksum", 1);
    free(crc.p);
    blob bomb = png_sized(&png, 60000, 60000);
    expect(d, &bomb, RF_ELIMIT, "PNG is 60000x60000: over the limit (max_dim 32768, "
                                "max_pixels 100000000)");
    free(bomb.p);
    bomb = png_sized(&png, 40000, 40000);
    expect(d, &bomb, RF_ELIMIT, "PNG is 40000x40000: over the limit");
    free(bomb.p);
    expect(d, &wcut, RF_EDECODE, "WebP");
    blob gif = {(uint8_t *)"GIF89a and then some bytes", 26};
    expect(d, &gif, RF_EDECODE, "not an image (26 bytes, no JPEG, PNG or WebP signature)");
    /* smaller limits: a picture within the defaults is over these, as JPEG's are */
    rf_decode_limits lim = {.max_pixels = 1000, .max_dim = 100};
    rf_decoder *small = rf_decoder_create(&lim);
    expect(small, &png, RF_ELIMIT, "PNG is 97x61: over the limit (max_dim 100, max_pixels 1000)");
    expect(small, &webp, RF_ELIMIT, "WebP is 97x61: over the limit");
    rf_decoder_destroy(small);
    free(png.p), free(webp.p);
    rf_decoder_destroy(d);
}
END_TEST

/* ---- a mixed shard through the loader -------------------------------------------------------- */

static const char *g_mixed;
static uint32_t g_jpegs;

/* Sample i of the mixed shard: the file's bytes (*enc, malloc'd) and its extension. */
static const char *mixed_sample(uint32_t i, uint8_t **enc, size_t *n)
{
    char err[256];
    uint32_t iw = 80 + 13 * i, ih = 60 + 7 * i;
    uint8_t *rgb = malloc((size_t)iw * ih * 3);
    rf_synth_image(40 + i, iw, ih, rgb);
    if (i % 5 == 0) {
        void *r;
        uint64_t rn;
        ck_assert_int_eq(rf_synth_jpeg(rgb, iw, ih, 90, 0, enc, n), 0);
        ck_assert_int_eq(rf_jpeg_add_restarts(*enc, *n, 1, 1, &r, &rn, err, sizeof err), 0);
        free(*enc), *enc = r, *n = rn;
    } else if (i % 5 < 3) {
        ck_assert_int_eq(rf_synth_png(rgb, iw, ih, i % 5 - 1, enc, n), 0);
    } else {
        ck_assert_int_eq(rf_synth_webp(rgb, iw, ih, i % 5 == 3 ? 75 : -1, enc, n), 0);
    }
    free(rgb);
    return i % 5 == 0 ? "jpg" : i % 5 < 3 ? "png" : "webp";
}

/* 15 samples cycling JPEG (with restart markers, so GPU decode takes it), PNG RGB8, PNG RGB16,
 * lossy WebP, lossless WebP; labels 0..14. */
static const char *make_mixed(void)
{
    char *dir = rf_test_mkdtemp("formats"), err[256];
    static char tar[4096];
    snprintf(tar, sizeof tar, "%s/mixed.tar", dir);
    rf_shard_writer *w;
    ck_assert_int_eq(rf_shard_writer_open(tar, NULL, RF_SHARD_PAX, &w, err, sizeof err), 0);
    g_jpegs = 0;
    for (uint32_t i = 0; i < 15; i++) {
        uint8_t *enc;
        size_t n;
        const char *ext = mixed_sample(i, &enc, &n);
        g_jpegs += i % 5 == 0;
        char key[16];
        snprintf(key, sizeof key, "s%02u", i);
        ck_assert_int_eq(rf_shard_writer_add(w, key, ext, enc, n, (int32_t)i), 0);
        free(enc);
    }
    ck_assert_int_eq(rf_shard_writer_close(w, err, sizeof err), 0);
    free(dir);
    return tar;
}

/* One epoch's samples, by sample id, as the loader delivered them (n = 15 * 24*24*3 bytes). */
static uint8_t *run(uint32_t gpu, uint32_t threads, uint64_t *gpu_decoded)
{
    const char *pat;
    rf_config c = rf_test_host_config(&pat, g_mixed, 24);
    c.batch_size = 4, c.epochs = 1, c.seed = 11, c.layout = RF_LAYOUT_NHWC;
    c.decode_threads = threads, c.gpu_decode = gpu, c.dct_scaling = RF_DCT_SCALING_OFF;
    rf_loader *ld = rf_test_create_ok(&c);
    size_t n = 24 * 24 * 3;
    uint8_t *all = calloc(15, n);
    rf_batch *b;
    while (rf_loader_next(ld, &b) == 0) {
        for (uint32_t i = 0; i < b->count; i++)
            if (!b->is_padding[i]) {
                ck_assert_int_eq(b->labels[i], (int32_t)b->sample_ids[i]);
                memcpy(all + b->sample_ids[i] * n, (uint8_t *)b->data + i * n, n);
            }
        ck_assert_int_eq(rf_loader_release(ld, b, NULL), 0);
    }
    rf_stats st;
    rf_stats_init(&st);
    ck_assert_int_eq(rf_loader_stats(ld, &st), 0);
    *gpu_decoded = st.gpu_decoded;
    rf_loader_destroy(ld);
    return all;
}

/* The same bytes for every sample whether the GPU decode path is on (it takes every JPEG and
 * no other sample: the others are decoded by the CPU into the same batch) or off, at 1 or 2
 * decode threads; labels follow their samples. */
START_TEST(mixed_shard_same_pixels_with_gpu_decode_and_threads)
{
    uint64_t gd;
    g_mixed = make_mixed();
    uint8_t *ref = run(0, 1, &gd);
    ck_assert_uint_eq(gd, 0);
    for (uint32_t k = 0; k < 3; k++) {
        uint8_t *got = run(k > 0, 1 + (k & 1), &gd);
        ck_assert_uint_eq(gd, k > 0 ? g_jpegs : 0); /* every JPEG, no other sample */
        ck_assert_msg(memcmp(ref, got, 15 * 24 * 24 * 3) == 0, "run %u differs", k);
        free(got);
    }
    free(ref);
}
END_TEST

/* ---- non-square output and the sample hook over every format ------------------------------- */

#define NS_H 40
#define NS_W 64
#define NS_BYTES ((size_t)NS_H * NS_W * 3)

typedef struct ns_ctx {
    const uint8_t *want; /* 15 samples of NS_BYTES: rf_decode_image's center crop, no flip */
    _Atomic uint32_t calls, bad;
} ns_ctx;

static int ns_hook(const rf_sample_view *v, void *ctx)
{
    ns_ctx *c = ctx;
    atomic_fetch_add(&c->calls, 1);
    if (v->height != NS_H || v->width != NS_W || v->row_stride != NS_W * 3 || v->sample_id >= 15 ||
        memcmp(v->pixels, c->want + v->sample_id * NS_BYTES, NS_BYTES) != 0)
        atomic_fetch_add(&c->bad, 1);
    *v->label += 100; /* delivered as written */
    return 0;
}

/* The mixed shard at height x width 40x64 (center crop, no flip, full scale) with a sample
 * hook, at 1 and 2 decode threads: the hook sees every JPEG, PNG and WebP sample once, in the
 * output's shape, holding exactly what rf_decode_image gives for its file, and the batch
 * delivers those bytes and the hook's labels. */
START_TEST(non_square_mixed_shard_through_the_sample_hook)
{
    if (!g_mixed)
        g_mixed = make_mixed();
    uint8_t *want = malloc(15 * NS_BYTES);
    rf_decoder *d = rf_decoder_create(NULL);
    rf_decoder_set_max_scale_denom(d, 1);
    rf_transform t = transform_hw(RF_CROP_CENTER, RF_LAYOUT_NHWC, NS_H, NS_W);
    t.flip_prob = 0;
    rf_err e = {0};
    for (uint32_t i = 0; i < 15; i++) {
        uint8_t *enc;
        size_t n;
        mixed_sample(i, &enc, &n);
        ck_assert_msg(rf_decode_image(d, enc, n, &t, 0, want + i * NS_BYTES, NULL, &e) == 0,
                      "%u: %s", i, e.msg);
        free(enc);
    }
    rf_decoder_destroy(d);
    for (uint32_t threads = 1; threads <= 2; threads++) {
        ns_ctx ctx = {.want = want};
        const char *pat;
        rf_config c = rf_test_host_config(&pat, g_mixed, 0);
        c.image_height = NS_H, c.image_width = NS_W, c.crop = RF_CROP_CENTER, c.flip_prob = 0;
        c.batch_size = 4, c.epochs = 1, c.layout = RF_LAYOUT_NHWC, c.decode_threads = threads;
        c.dct_scaling = RF_DCT_SCALING_OFF, c.sample_hook = ns_hook, c.sample_hook_ctx = &ctx;
        rf_loader *ld = rf_test_create_ok(&c);
        rf_batch *b;
        uint32_t seen = 0;
        while (rf_loader_next(ld, &b) == 0) {
            ck_assert(b->shape[1] == NS_H && b->shape[2] == NS_W && b->shape[3] == 3);
            for (uint32_t i = 0; i < b->count; i++) {
                uint64_t id = b->sample_ids[i];
                ck_assert_int_eq(b->labels[i], (int32_t)id + 100);
                ck_assert_msg(memcmp((uint8_t *)b->data + i * NS_BYTES, want + id * NS_BYTES,
                                     NS_BYTES) == 0, "sample %llu", (unsigned long long)id);
                seen++;
            }
            ck_assert_int_eq(rf_loader_release(ld, b, NULL), 0);
        }
        rf_loader_destroy(ld);
        ck_assert_uint_eq(seen, 15);
        ck_assert_uint_eq(atomic_load(&ctx.calls), 15);
        ck_assert_uint_eq(atomic_load(&ctx.bad), 0);
    }
    free(want);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("formats");
    TCase *tc = tcase_create("formats");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, lossless_encodings_decode_to_the_same_bytes);
    tcase_add_test(tc, non_square_encodings_decode_to_the_same_bytes);
    tcase_add_test(tc, bad_files_are_named_errors);
    tcase_add_test(tc, mixed_shard_same_pixels_with_gpu_decode_and_threads);
    tcase_add_test(tc, non_square_mixed_shard_through_the_sample_hook);
    suite_add_tcase(s, tc);
    return rf_test_run_suite(s);
}
