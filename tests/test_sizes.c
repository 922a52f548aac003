/* test_sizes.c — output sizes beyond a fixed crop (issue 46 item 4): crop LETTERBOX (the whole
 * image resized, aspect kept, to fit the output, centred, the rest pad_value) and CENTER_PAD
 * (torchvision's Resize(shorter) + CenterCrop, padding where the resized image is smaller than
 * the crop). Each is checked against a reference built here from its own definition: the
 * rectangle Ultralytics' LetterBox computes, and torchvision's center_crop applied to the whole
 * image resized with the library's own filter, the flip mirroring the whole output. JPEG, PNG
 * and WebP; wide, tall, 1 x N and N x 1, tiny and smaller-than-output images; both layouts;
 * DCT-scaled decodes (same rectangle and padding, pixels near the full-scale ones); the shared
 * geometry (rf_sample_geometry) lands where the pixels do. NATIVE: an image that fits is its
 * own pixels, a larger one its letterbox rectangle, packed at that size. In a loader:
 * test_sizes_loader.c. Pixels against PIL: python/tests/test_letterbox.py. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/gpujpeg.h"
#include "decode/decode.h"
#include "jpegutil.h"
#include "ringfeed.h"
#include "sizeutil.h"
#include "testutil.h"

/* Sizes that meet every branch: wide, tall, square, 1 x N, N x 1, 1 x 1, smaller than the
 * output on one axis or both, the output's own aspect, odd slack. */
static const uint32_t g_sizes[][2] = {{97, 61}, {61, 97}, {50, 50}, {1, 37}, {37, 1}, {1, 1},
                                      {9, 5},   {200, 7}, {56, 40}, {113, 80}, {3, 90}};
#define N_SIZES (sizeof g_sizes / sizeof g_sizes[0])

/* Decode p under t for 8 seeds (flips both ways), full scale: the bytes are sz_reference()'s, the
 * info's placement, crop box and flip agree, and the geometry's output rectangle is where the
 * image's pixels are. Returns the flips seen. */
static uint32_t check_pic(rf_decoder *d, const pic *p, const rf_transform *t)
{
    size_t n = (size_t)t->height * t->width * 3;
    uint8_t *got = malloc(n), *want = malloc(n);
    uint32_t flips = 0;
    rf_err e = {0};
    for (uint64_t seed = 0; seed < 8; seed++) {
        rf_decode_info info;
        ck_assert_msg(rf_decode_image(d, p->data, p->len, t, seed, got, &info, &e) == 0, "%s",
                      e.msg);
        rect r;
        sz_reference(p->rgb, p->w, p->h, t, (int)info.flipped, want, &r);
        ck_assert_msg(memcmp(got, want, n) == 0, "crop %u %ux%u -> %ux%u layout %u seed %llu "
                      "flip %u: pixels differ", t->crop, p->w, p->h, t->width, t->height,
                      t->layout, (unsigned long long)seed, info.flipped);
        flips += info.flipped;
        rf_geometry g;
        rf_sample_geometry(t, p->w, p->h, seed, &g);
        ck_assert_uint_eq(g.flip, info.flipped);
        uint32_t gx = info.flipped ? t->width - r.x - r.w : r.x;
        ck_assert_msg(g.out_x == gx && g.out_y == r.y && g.out_w == r.w && g.out_h == r.h,
                      "geometry %u,%u %ux%u, pixels at %u,%u %ux%u", g.out_x, g.out_y, g.out_w,
                      g.out_h, gx, r.y, r.w, r.h);
        /* the source's corners land on the rectangle's (mirrored when flipped) */
        double ox, oy;
        rf_geometry_to_output(&g, g.x, g.y, &ox, &oy);
        ck_assert(fabs(ox - (info.flipped ? gx + r.w : gx)) < 1e-6 && fabs(oy - r.y) < 1e-6);
        rf_geometry_to_output(&g, g.x + g.w, g.y + g.h, &ox, &oy);
        ck_assert(fabs(ox - (info.flipped ? gx : gx + r.w)) < 1e-6 &&
                  fabs(oy - (r.y + r.h)) < 1e-6);
        /* rf_batch.letterbox's row: x * scale + pad maps the box onto the unflipped rectangle */
        ck_assert(fabs(g.x * info.place[0] + info.place[2] - r.x) < 1e-3);
        ck_assert(fabs((g.x + g.w) * info.place[0] + info.place[2] - (r.x + r.w)) < 1e-3);
        ck_assert(fabs((g.y + g.h) * info.place[1] + info.place[3] - (r.y + r.h)) < 1e-3);
        if (t->crop == RF_CROP_LETTERBOX) /* the whole image, at (pad_x, pad_y) */
            ck_assert(info.crop_x == 0 && info.crop_y == 0 && info.crop_w == p->w &&
                      info.crop_h == p->h && info.place[2] == r.x && info.place[3] == r.y);
    }
    free(got), free(want);
    return flips;
}

/* Every size, format, layout and two outputs, with Ultralytics' grey and a per-channel pad. */
static void check_crop(uint32_t crop)
{
    static const uint32_t outs[][2] = {{40, 56}, {33, 33}};
    rf_decoder *d = rf_decoder_create(NULL);
    rf_decoder_set_max_scale_denom(d, 1);
    uint32_t flips = 0, runs = 0;
    for (size_t s = 0; s < N_SIZES; s++)
        for (int format = 0; format < 3; format++) {
            pic p = sz_make_pic(g_sizes[s][0], g_sizes[s][1], format, 40 + s);
            for (int o = 0; o < 2; o++)
                for (uint32_t layout = 0; layout < 2; layout++) {
                    rf_transform t = sz_transform(crop, outs[o][0], outs[o][1], layout);
                    if (o)
                        t.pad[0] = 10, t.pad[1] = 200, t.pad[2] = 77;
                    if (crop == RF_CROP_CENTER_PAD && (s & 1)) /* shorter than the crop */
                        t.resize_shorter = 20 + (uint32_t)s;
                    flips += check_pic(d, &p, &t);
                    runs += 8;
                }
            sz_free_pic(&p);
        }
    ck_assert(flips > 0 && flips < runs);
    rf_decoder_destroy(d);
}

START_TEST(letterbox_is_the_whole_image_resized_and_padded)
{
    check_crop(RF_CROP_LETTERBOX);
}
END_TEST

START_TEST(center_pad_is_torchvision_resize_and_center_crop)
{
    check_crop(RF_CROP_CENTER_PAD);
}
END_TEST

/* NATIVE: an image that fits in H x W is delivered as it is (the source's own pixels, bit for
 * bit, flipped when flipped), a larger one scaled down to its letterbox rectangle; packed at
 * its own size in either layout, the geometry's output that size. */
START_TEST(native_is_the_image_or_its_fit)
{
    rf_decoder *d = rf_decoder_create(NULL);
    rf_decoder_set_max_scale_denom(d, 1);
    size_t cap = (size_t)40 * 56 * 3;
    uint8_t *got = malloc(cap + 1), *want = malloc(cap); /* + 1: the byte past a full one */
    uint32_t fits = 0, scaled = 0;
    rf_err e = {0};
    for (size_t s = 0; s < N_SIZES; s++)
        for (int format = 0; format < 3; format++) {
            pic p = sz_make_pic(g_sizes[s][0], g_sizes[s][1], format, 70 + s);
            for (uint32_t layout = 0; layout < 2; layout++) {
                rf_transform t = sz_transform(RF_CROP_NATIVE, 40, 56, layout);
                for (uint64_t seed = 0; seed < 4; seed++) {
                    rf_decode_info info;
                    memset(got, 0xEE, cap + 1);
                    ck_assert_msg(rf_decode_image(d, p.data, p.len, &t, seed, got, &info, &e) ==
                                  0, "%s", e.msg);
                    rect r;
                    sz_reference(p.rgb, p.w, p.h, &t, (int)info.flipped, want, &r);
                    ck_assert(info.out_w == r.w && info.out_h == r.h);
                    size_t n = (size_t)r.w * r.h * 3;
                    ck_assert_msg(memcmp(got, want, n) == 0, "native %ux%u layout %u flip %u",
                                  p.w, p.h, layout, info.flipped);
                    ck_assert_msg(got[n] == 0xEE, "native %ux%u format %d layout %u flip %u: "
                                  "written past the image", p.w, p.h, format, layout,
                                  info.flipped); /* nothing past the image */
                    int fit = p.w <= t.width && p.h <= t.height;
                    if (fit && layout == RF_LAYOUT_NHWC && !info.flipped)
                        ck_assert(memcmp(got, p.rgb, n) == 0); /* the source itself */
                    fits += fit, scaled += !fit;
                    rf_geometry g;
                    rf_sample_geometry(&t, p.w, p.h, seed, &g);
                    ck_assert(g.out_width == r.w && g.out_height == r.h && g.out_x == 0 &&
                              g.out_w == r.w && g.out_h == r.h && g.flip == info.flipped);
                }
            }
            sz_free_pic(&p);
        }
    ck_assert(fits > 0 && scaled > 0);
    free(got), free(want);
    rf_decoder_destroy(d);
}
END_TEST

/* The GPU paths (gpu_decode's kernels, hw_decode_percent's engine packets), run through the
 * host driver the kernels share their code with: each crop's packet resizes onto its rectangle
 * and pads the rest of the canvas (or packs NATIVE's own size), byte for byte the CPU path's
 * full-scale decode in both layouts, flipped and not, and writes nothing past the canvas. The
 * same packets on the device: test_cuda. */
START_TEST(gpu_packets_pad_and_pack_as_the_cpu)
{
    static const uint32_t outs[][2] = {{40, 56}, {33, 33}};
    rf_decoder *cpu = rf_decoder_create(NULL), *gpu = rf_decoder_create(NULL);
    rf_decoder_set_max_scale_denom(cpu, 1);
    rf_decoder_set_max_scale_denom(gpu, 1); /* the GPU paths' loader: no DCT scaling */
    size_t cap = 1u << 20, n = (size_t)40 * 56 * 3;
    uint8_t *pkt = malloc(cap), *scratch = malloc(RF_GJ_SCRATCH);
    uint8_t *want = malloc(n + 1), *got = malloc(n + 1);
    test_place pl = {pkt, got, cap};
    uint32_t packed[3][2] = {{0}}, flips = 0;
    rf_err e = {0};
    for (size_t s = 0; s < N_SIZES; s++) {
        pic p = sz_make_pic(g_sizes[s][0], g_sizes[s][1], SZ_JPEG, 90 + s);
        for (uint32_t crop = RF_CROP_LETTERBOX; crop <= RF_CROP_NATIVE; crop++)
            for (int o = 0; o < 2; o++)
                for (uint32_t layout = 0; layout < 2; layout++)
                    for (int engine = 0; engine < 2; engine++)
                        for (uint64_t seed = 0; seed < 4; seed++) {
                            rf_transform t = sz_transform(crop, outs[o][0], outs[o][1], layout);
                            if (o)
                                t.pad[0] = 10, t.pad[1] = 200, t.pad[2] = 77;
                            if (crop == RF_CROP_CENTER_PAD && (s & 1))
                                t.resize_shorter = 20 + (uint32_t)s;
                            rf_decode_info ic, ig;
                            memset(want, 0xEE, n + 1), memset(got, 0xEE, n + 1);
                            ck_assert_msg(rf_decode_image(cpu, p.data, p.len, &t, seed, want,
                                                          &ic, &e) == 0, "%s", e.msg);
                            uint32_t bytes = 0, bad = 0;
                            ck_assert_msg(rf_decode_packet(gpu, p.data, p.len, &t, NULL, seed,
                                                           engine, place_fixed, &pl, &bytes, &ig,
                                                           &e) == 0, "%s", e.msg);
                            if (bytes) {
                                memset(got, 0xEE, n + 1);
                                ck_assert(!engine || rf_decode_planes(gpu, pkt, scratch, &e) == 0);
                                int st = rf_gj_decode_host(pkt, scratch, got, &bad);
                                ck_assert_msg(st == 0, "%s", rf_gj_status_text(st));
                                packed[crop - RF_CROP_LETTERBOX][engine]++;
                            }
                            ck_assert(ig.out_w == ic.out_w && ig.out_h == ic.out_h &&
                                      ig.flipped == ic.flipped &&
                                      memcmp(ig.place, ic.place, sizeof ig.place) == 0);
                            size_t k = 0, m = (size_t)ic.out_w * ic.out_h * 3;
                            while (k <= m && got[k] == want[k])
                                k++;
                            ck_assert_msg(k > m, "crop %u %ux%u -> %ux%u layout %u engine %d "
                                          "seed %llu flip %u: byte %zu of %zu is %u, the CPU "
                                          "path's %u", crop, p.w, p.h, t.width, t.height, layout,
                                          engine, (unsigned long long)seed, ic.flipped, k, m,
                                          got[k], want[k]);
                            flips += ic.flipped;
                        }
        sz_free_pic(&p);
    }
    for (int c = 0; c < 3; c++)
        for (int engine = 0; engine < 2; engine++)
            ck_assert_msg(packed[c][engine] > 0, "crop %d engine %d: never packed", c, engine);
    ck_assert_uint_gt(flips, 0);
    free(pkt), free(scratch), free(want), free(got);
    rf_decoder_destroy(cpu), rf_decoder_destroy(gpu);
}
END_TEST

/* A JPEG several times the output is decoded at a DCT scale: the rectangle, the padding and
 * the placement are the full-scale decode's, the pixels inside close to them. */
START_TEST(dct_scaled_decodes_keep_the_rectangle)
{
    pic p = sz_make_pic(640, 410, SZ_JPEG, 9);
    rf_decoder *scaled = rf_decoder_create(NULL), *full = rf_decoder_create(NULL);
    rf_decoder_set_max_scale_denom(full, 1);
    for (uint32_t crop = RF_CROP_LETTERBOX; crop <= RF_CROP_CENTER_PAD; crop++) {
        rf_transform t = sz_transform(crop, 40, 56, RF_LAYOUT_NHWC);
        t.resize_shorter = 36; /* center_pad: 56 x 36, padded across the width */
        size_t n = (size_t)t.height * t.width * 3;
        uint8_t *a = malloc(n), *b = malloc(n);
        rf_err e = {0};
        rf_decode_info ia, ib;
        for (uint64_t seed = 0; seed < 4; seed++) {
            ck_assert_int_eq(rf_decode_image(scaled, p.data, p.len, &t, seed, a, &ia, &e), 0);
            ck_assert_int_eq(rf_decode_image(full, p.data, p.len, &t, seed, b, &ib, &e), 0);
            ck_assert_uint_gt(ia.scale_denom, 1);
            ck_assert_uint_eq(ib.scale_denom, 1);
            ck_assert(memcmp(ia.place, ib.place, sizeof ia.place) == 0);
            ck_assert(ia.flipped == ib.flipped && ia.crop_w == ib.crop_w);
            rf_geometry g;
            rf_sample_geometry(&t, p.w, p.h, seed, &g);
            double diff = 0;
            uint32_t inside = 0;
            for (uint32_t y = 0; y < t.height; y++)
                for (uint32_t x = 0; x < t.width; x++) {
                    int in = x >= g.out_x && x < g.out_x + g.out_w && y >= g.out_y &&
                             y < g.out_y + g.out_h;
                    for (int k = 0; k < 3; k++) {
                        size_t at = ((size_t)y * t.width + x) * 3 + k;
                        if (!in) /* padding: exact in both */
                            ck_assert(a[at] == t.pad[k] && b[at] == t.pad[k]);
                        else
                            diff += abs((int)a[at] - (int)b[at]), inside++;
                    }
                }
            ck_assert_uint_gt(inside, 0);
            ck_assert_msg(diff / inside < 4.0, "crop %u: mean difference %.2f", crop,
                          diff / inside);
            ck_assert_uint_lt(g.out_w * g.out_h, t.width * t.height); /* there is padding */
        }
        free(a), free(b);
    }
    rf_decoder_destroy(scaled), rf_decoder_destroy(full);
    sz_free_pic(&p);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sizes");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, letterbox_is_the_whole_image_resized_and_padded);
    tcase_add_test(tc, center_pad_is_torchvision_resize_and_center_crop);
    tcase_add_test(tc, dct_scaled_decodes_keep_the_rectangle);
    tcase_add_test(tc, native_is_the_image_or_its_fit);
    tcase_add_test(tc, gpu_packets_pad_and_pack_as_the_cpu);
    suite_add_tcase(s, tc);
    return rf_test_run_suite(s);
}
