/* test_decode.c — the decode stage against references computed here: libjpeg's own plain
 * decode (byte-for-byte) and a double-precision PIL/torchvision-style antialiased resize of that
 * decode (within stated tolerances). JPEGs are encoded in the test from synthetic images so the
 * suite depends on nothing but libjpeg. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "decode/decode.h"
#include "decode/decode_hooks.h"
#include "backend/gpujpeg.h"
#include "decode/jpeg_restart.h"
#include "decode/resize.h"
#include "jpegutil.h"
#include "testutil.h"

static const enc_opts RGB420 = {3, 90, 0, 1}, RGB444 = {3, 90, 0, 0}, PROG420 = {3, 85, 1, 1},
                      GRAY = {1, 90, 0, 0}, CMYK = {4, 90, 0, 0};

/* The reference decode: libjpeg's plain loop with every default, output RGB. */
static uint8_t *ref_decode(const uint8_t *jpeg, size_t len, uint32_t *w, uint32_t *h)
{
    struct jpeg_decompress_struct d;
    struct jpeg_error_mgr e;
    d.err = jpeg_std_error(&e);
    jpeg_create_decompress(&d);
    jpeg_mem_src(&d, jpeg, len);
    jpeg_read_header(&d, TRUE);
    d.out_color_space = JCS_RGB;
    jpeg_start_decompress(&d);
    *w = d.output_width, *h = d.output_height;
    uint8_t *out = malloc((size_t)*w * *h * 3);
    while (d.output_scanline < d.output_height) {
        JSAMPROW row = out + (size_t)d.output_scanline * *w * 3;
        jpeg_read_scanlines(&d, &row, 1);
    }
    jpeg_finish_decompress(&d);
    jpeg_destroy_decompress(&d);
    return out;
}

/* ---- double-precision reference resize --------------------------------------------------- */

typedef struct ref_box {
    double x, y, w, h;
    int clamp_box; /* taps stay in the box (RandomResizedCrop) or in the image (CENTER) */
} ref_box;

/* Weights of output i along one axis, written from the PIL/torchvision definition. */
static int ref_weights(double lo, double hi, int src_lo, int src_hi, int n, int i, double *wt)
{
    double scale = (hi - lo) / n, fs = scale > 1 ? scale : 1, c = lo + (i + 0.5) * scale;
    int xmin = (int)floor(c - fs + 0.5), xmax = (int)floor(c + fs + 0.5);
    xmin = xmin < src_lo ? src_lo : xmin;
    xmax = xmax > src_hi ? src_hi : xmax;
    double tot = 0;
    for (int x = xmin; x < xmax; x++) {
        double t = fabs((x + 0.5 - c) / fs);
        wt[x - xmin] = t < 1 ? 1 - t : 0;
        tot += wt[x - xmin];
    }
    for (int x = xmin; x < xmax; x++)
        wt[x - xmin] /= tot;
    wt[-1] = xmax - xmin; /* the caller's slot before the weights holds the count */
    return xmin;
}

/* out[oh*ow*3] NHWC in double, from the full decode img (W x H RGB). */
static double *ref_resize(const uint8_t *img, uint32_t W, uint32_t H, ref_box b, uint32_t oh,
                          uint32_t ow, int flip)
{
    double *out = calloc((size_t)oh * ow * 3, sizeof *out), wy[1024], wx[1024];
    int ylo = b.clamp_box ? (int)floor(b.y) : 0, yhi = b.clamp_box ? (int)ceil(b.y + b.h) : (int)H;
    int xlo = b.clamp_box ? (int)floor(b.x) : 0, xhi = b.clamp_box ? (int)ceil(b.x + b.w) : (int)W;
    for (uint32_t oy = 0; oy < oh; oy++) {
        int y0 = ref_weights(b.y, b.y + b.h, ylo, yhi, (int)oh, oy, wy + 1);
        for (uint32_t ox = 0; ox < ow; ox++) {
            uint32_t sx = flip ? ow - 1 - ox : ox;
            int x0 = ref_weights(b.x, b.x + b.w, xlo, xhi, (int)ow, sx, wx + 1);
            double *o = out + ((size_t)oy * ow + ox) * 3;
            for (int ky = 0; ky < (int)wy[0]; ky++)
                for (int kx = 0; kx < (int)wx[0]; kx++)
                    for (int c = 0; c < 3; c++)
                        o[c] += wy[ky + 1] * wx[kx + 1] *
                                img[((size_t)(y0 + ky) * W + x0 + kx) * 3 + c];
        }
    }
    return out;
}

static void compare(const uint8_t *got, const double *want, size_t n, double *mean, double *max)
{
    double sum = 0, mx = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs(got[i] - want[i]);
        sum += e;
        mx = e > mx ? e : mx;
    }
    *mean = sum / n, *max = mx;
}

/* ---- full decode ------------------------------------------------------------------------- */

typedef struct shape {
    uint32_t w, h;
    enc_opts o;
} shape;

static const shape SHAPES[] = {
    {37, 53, {3, 90, 0, 0}},  {500, 375, {3, 90, 0, 1}}, {1000, 200, {3, 85, 1, 1}},
    {123, 77, {1, 90, 0, 0}}, {333, 501, {3, 75, 1, 0}}, {640, 480, {1, 80, 1, 0}},
};
#define NSHAPES (sizeof SHAPES / sizeof SHAPES[0])

START_TEST(full_decode_matches_libjpeg)
{
    rf_decoder *d = rf_decoder_create(NULL);
    ck_assert_ptr_nonnull(d);
    for (size_t i = 0; i < NSHAPES; i++) {
        size_t len;
        uint8_t *j = make_jpeg(SHAPES[i].w, SHAPES[i].h, SHAPES[i].o, i, &len);
        uint32_t rw, rh, w, h;
        rf_jpeg_info ji;
        uint8_t *ref = ref_decode(j, len, &rw, &rh), *got = NULL;
        rf_err err = {0};
        ck_assert_int_eq(rf_decode_full(d, j, len, &got, &w, &h, &err), 0);
        ck_assert_uint_eq(w, SHAPES[i].w);
        ck_assert_uint_eq(h, SHAPES[i].h);
        ck_assert_int_eq(memcmp(got, ref, (size_t)w * h * 3), 0);
        ck_assert_int_eq(rf_jpeg_probe(d, j, len, &ji, &err), 0);
        ck_assert_uint_eq(ji.width, w);
        ck_assert_uint_eq(ji.height, h);
        ck_assert_uint_eq(ji.progressive, (uint32_t)SHAPES[i].o.progressive);
        ck_assert_uint_eq(ji.restart_interval, 0);
        ck_assert_uint_eq(ji.region_ready, 0);
        if (SHAPES[i].o.comps == 1) /* gray is replicated into all three channels */
            for (size_t p = 0; p < (size_t)w * h; p++)
                ck_assert(got[3 * p] == got[3 * p + 1] && got[3 * p] == got[3 * p + 2]);
        free(got);
        free(ref);
        free(j);
    }
    rf_decoder_destroy(d);
}
END_TEST

/* ---- crop + resize against the double reference ------------------------------------------ */

typedef struct err_stats {
    double worst_mean, worst_max;
    int scaled; /* transforms that used DCT scaling */
} err_stats;

static void check_transform(rf_decoder *d, uint32_t W, uint32_t H, enc_opts o, rf_transform t,
                            uint64_t seed, err_stats *st)
{
    size_t len;
    uint8_t *j = make_jpeg(W, H, o, seed, &len);
    uint32_t rw, rh;
    uint8_t *full = ref_decode(j, len, &rw, &rh);
    uint8_t *out = malloc((size_t)t.height * t.width * 3);
    rf_decode_info info;
    rf_err err = {0};
    int rc = rf_decode_transform(d, j, len, &t, seed, out, &info, &err);
    ck_assert_msg(rc == 0, "decode %ux%u: %s", W, H, err.msg);
    /* a reduced DCT scale leaves the crop at least height rows and width columns (up to the
     * box's rounding to whole pixels in info) */
    ck_assert_msg(info.scale_denom == 1 || (info.crop_w + 1 >= t.width * info.scale_denom &&
                                            info.crop_h + 1 >= t.height * info.scale_denom),
                  "crop %ux%u at 1/%u for %ux%u", info.crop_w, info.crop_h, info.scale_denom,
                  t.width, t.height);
    /* The reference box is recomputed independently only for RANDOM (integer crop); CENTER
     * boxes are fractional, so rebuild them with the torchvision formula. */
    ref_box b = {info.crop_x, info.crop_y, info.crop_w, info.crop_h, 1};
    if (t.crop == RF_CROP_CENTER) {
        uint32_t R = t.resize_shorter ? t.resize_shorter
                                      : (t.height > t.width ? t.height : t.width) * 256 / 224;
        double nw = W <= H ? R : floor((double)R * W / H), nh = W <= H ? floor((double)R * H / W) : R;
        double left = rint((nw - t.width) / 2.0), top = rint((nh - t.height) / 2.0);
        b = (ref_box){left * W / nw, top * H / nh, t.width * W / nw, t.height * H / nh, 0};
    }
    double *want = ref_resize(full, W, H, b, t.height, t.width, info.flipped);
    double mean, max;
    compare(out, want, (size_t)t.height * t.width * 3, &mean, &max);
    st->worst_mean = mean > st->worst_mean ? mean : st->worst_mean;
    st->worst_max = max > st->worst_max ? max : st->worst_max;
    st->scaled += info.scale_denom > 1;
    free(want);
    free(out);
    free(full);
    free(j);
}

/* At full size the only differences from the double reference are the 14-bit weights and the
 * uint8 rounding after each pass (as in PIL): each rounding is at most half a level and the
 * second pass averages the first's, so every pixel is within one level (measured: max 0.998,
 * mean 0.30). This also proves crop-during-decode reads the same pixels as a full decode. */
START_TEST(resize_full_scale_matches_reference)
{
    rf_decoder *d = rf_decoder_create(NULL);
    rf_decoder_set_max_scale_denom(d, 1);
    err_stats st = {0};
    for (uint64_t seed = 0; seed < 24; seed++) {
        const shape *s = &SHAPES[seed % NSHAPES];
        rf_transform t = random_t(seed % 3 == 0 ? 64 : 224); /* up- and downscales */
        check_transform(d, s->w, s->h, s->o, t, seed, &st);
    }
    rf_transform c = random_t(224);
    c.crop = RF_CROP_CENTER;
    c.flip_prob = -1;
    check_transform(d, 500, 375, RGB420, c, 7, &st);
    check_transform(d, 375, 500, RGB444, c, 8, &st);
    ck_assert_int_eq(st.scaled, 0);
    ck_assert_msg(st.worst_mean <= 0.4 && st.worst_max <= 1.25, "mean %.3f max %.3f",
                  st.worst_mean, st.worst_max);
    rf_decoder_destroy(d);
}
END_TEST

/* With DCT scaling libjpeg's reduced IDCT replaces the first part of the filter (roughly an
 * s x s block average instead of a triangle s pixels wide), so the result is not the ideal
 * resize of the full-size image. How far off depends on the content: on these images (7- and
 * 11-pixel stripes plus +-10 noise: a worst case for aliasing) the worst sample mean was 2.9
 * and the worst pixel 28.6 levels at 1/8; on the same shapes without stripes and noise the
 * means are 0.3..0.46, which shows the crop geometry itself is right. Bounds: mean <= 3.5,
 * max <= 40. */
START_TEST(resize_dct_scaled_matches_reference)
{
    rf_decoder *d = rf_decoder_create(NULL);
    err_stats st = {0};
    static const shape big[] = {{1000, 750, {3, 90, 0, 1}}, {1200, 900, {3, 90, 1, 0}},
                                {900, 1333, {1, 90, 0, 0}}};
    for (uint64_t seed = 0; seed < 18; seed++) {
        rf_transform t = random_t(seed % 2 ? 112 : 64);
        t.scale_min = 0.5f; /* big crops, so 1/2..1/8 scaling is used */
        check_transform(d, big[seed % 3].w, big[seed % 3].h, big[seed % 3].o, t, seed, &st);
    }
    rf_transform c = random_t(112);
    c.crop = RF_CROP_CENTER;
    check_transform(d, 1000, 750, RGB420, c, 3, &st);
    ck_assert_int_ge(st.scaled, 15);
    ck_assert_msg(st.worst_mean <= 3.5 && st.worst_max <= 40.0, "mean %.3f max %.3f",
                  st.worst_mean, st.worst_max);
    rf_decoder_destroy(d);
}
END_TEST

/* NCHW holds NHWC's pixels in planes, and flip mirrors the same crop, for an H x W output. */
static void check_layouts_and_flip(rf_decoder *d, const uint8_t *j, size_t len, uint32_t H,
                                   uint32_t W)
{
    uint8_t *a = malloc(H * W * 3), *b = malloc(H * W * 3), *f = malloc(H * W * 3);
    rf_err err = {0};
    rf_decode_info ia, ib, ifl;
    rf_transform t = random_hw(H, W);
    t.flip_prob = 0;
    ck_assert_int_eq(rf_decode_transform(d, j, len, &t, 11, a, &ia, &err), 0);
    t.layout = RF_LAYOUT_NCHW;
    ck_assert_int_eq(rf_decode_transform(d, j, len, &t, 11, b, &ib, &err), 0);
    for (uint32_t p = 0; p < H * W; p++)
        for (int c = 0; c < 3; c++)
            ck_assert_uint_eq(a[p * 3 + c], b[c * H * W + p]);
    /* The crop is drawn before the flip, so the same seed gives the same crop, mirrored. */
    t.layout = RF_LAYOUT_NHWC;
    t.flip_prob = 1;
    ck_assert_int_eq(rf_decode_transform(d, j, len, &t, 11, f, &ifl, &err), 0);
    ck_assert_uint_eq(ifl.flipped, 1);
    ck_assert_uint_eq(ia.flipped, 0);
    ck_assert_uint_eq(ifl.crop_x, ia.crop_x);
    ck_assert_uint_eq(ifl.crop_w, ia.crop_w);
    for (uint32_t y = 0; y < H; y++)
        for (uint32_t x = 0; x < W; x++)
            for (int c = 0; c < 3; c++)
                ck_assert_uint_eq(f[(y * W + x) * 3 + c], a[(y * W + W - 1 - x) * 3 + c]);
    free(a), free(b), free(f);
}

START_TEST(layouts_and_flip)
{
    rf_decoder *d = rf_decoder_create(NULL);
    size_t len;
    uint8_t *j = make_jpeg(500, 375, RGB420, 5, &len);
    check_layouts_and_flip(d, j, len, 96, 96);
    check_layouts_and_flip(d, j, len, 64, 160); /* wider than high */
    check_layouts_and_flip(d, j, len, 160, 64); /* higher than wide */
    free(j);
    rf_decoder_destroy(d);
}
END_TEST

/* ---- SIMD resize passes against the scalar ones ------------------------------------------ */

/* The dispatched passes (AVX2 where the CPU has it) must equal the scalar loops bit for bit:
 * random rows, random windows (down- and upscales, 1..20 taps, odd and even), flips, and the
 * source offset a crop gives; the horizontal source has exactly RF_RESIZE_SRC_PAD bytes of
 * slack (the documented over-read), the destination none (no over-write). */
START_TEST(resize_simd_matches_scalar)
{
    uint64_t s = 12345;
    rf_axis a = {0};
    int checked = 0;
    for (int iter = 0; iter < 400; iter++) {
        uint32_t n_out = 1 + lcg(&s) % 300, src_w = 1 + lcg(&s) % 1500;
        double lo = (lcg(&s) % 1000) / 1000.0 * src_w * 0.5;
        double hi = lo + (0.02 + (lcg(&s) % 1000) / 1000.0) * (src_w - lo);
        if (hi > src_w)
            hi = src_w;
        if (hi <= lo)
            continue;
        int32_t slo = (int32_t)floor(lo), shi = (int32_t)ceil(hi), flip = (int)(lcg(&s) & 1);
        if (iter % 3 == 0)
            slo = 0, shi = (int32_t)src_w;
        if (shi <= slo)
            shi = slo + 1;
        ck_assert_int_eq(rf_axis_plan(&a, lo, hi, slo, shi, slo, n_out, flip), 0);
        ck_assert_int_ge(a.first, 0);
        /* Horizontal: source covers [0, last) pixels of the origin-relative row + the pad. */
        size_t sbytes = (size_t)a.last * 3;
        uint8_t *src = malloc(sbytes + RF_RESIZE_SRC_PAD);
        for (size_t k = 0; k < sbytes + RF_RESIZE_SRC_PAD; k++)
            src[k] = (uint8_t)(k < sbytes ? lcg(&s) : 0);
        uint8_t *d1 = malloc((size_t)n_out * 3), *d2 = malloc((size_t)n_out * 3);
        rf_resize_row_h_scalar(&a, src, d1);
        rf_resize_row_h(&a, src, d2);
        ck_assert_msg(memcmp(d1, d2, (size_t)n_out * 3) == 0, "h: iter %d taps %u n_out %u", iter,
                      a.taps, n_out);
        /* Vertical: a.taps rows of random width, every output row. */
        size_t n = 1 + lcg(&s) % 2000;
        const uint8_t **rows = malloc(a.taps * sizeof *rows);
        uint8_t *buf = malloc(n * a.taps);
        for (size_t k = 0; k < n * a.taps; k++)
            buf[k] = (uint8_t)lcg(&s);
        int32_t *acc = malloc(n * sizeof *acc);
        uint8_t *v1 = malloc(n), *v2 = malloc(n);
        for (uint32_t k = 0; k < a.taps; k++)
            rows[k] = buf + (size_t)k * n;
        for (uint32_t i = 0; i < n_out; i += 1 + n_out / 16) {
            rf_resize_row_v_scalar(&a, i, rows, n, acc, v1);
            rf_resize_row_v(&a, i, rows, n, acc, v2);
            ck_assert_msg(memcmp(v1, v2, n) == 0, "v: iter %d taps %u row %u", iter, a.taps, i);
        }
        checked++;
        free(src), free(d1), free(d2), free(buf), free(acc), free(v1), free(v2);
        free(rows);
    }
    ck_assert_int_gt(checked, 300);
    rf_axis_free(&a);
}
END_TEST

/* ---- crop geometry ----------------------------------------------------------------------- */

START_TEST(random_crop_follows_torchvision)
{
    rf_transform t = random_t(224);
    static const uint32_t dims[][2] = {{500, 375}, {37, 53}, {1000, 200}, {224, 224}};
    int flips = 0, n = 0;
    for (int k = 0; k < 4; k++)
        for (uint64_t seed = 0; seed < 500; seed++) {
            uint32_t W = dims[k][0], H = dims[k][1], x, y, w, h, fl, x2, y2, w2, h2, fl2;
            rf_choose_crop(&t, W, H, seed, &x, &y, &w, &h, &fl);
            rf_choose_crop(&t, W, H, seed, &x2, &y2, &w2, &h2, &fl2);
            ck_assert(x == x2 && y == y2 && w == w2 && h == h2 && fl == fl2);
            ck_assert(w > 0 && h > 0 && x + w <= W && y + h <= H);
            flips += fl, n++;
            /* w and h are rounded from sqrt(area*r), sqrt(area/r): widen the bounds by half a
             * pixel each way before checking area and ratio. Fallback crops may break them
             * (1000x200 has ratio 5), and then they are the central clamp-ratio crop. */
            double amin = t.scale_min * W * H, amax = t.scale_max * W * H;
            int ok_area = (w + 0.5) * (h + 0.5) >= amin && (w - 0.5) * (h - 0.5) <= amax;
            int ok_ratio = (w + 0.5) / (h - 0.5) >= t.ratio_min && (w - 0.5) / (h + 0.5) <= t.ratio_max;
            if (!(ok_area && ok_ratio)) {
                ck_assert_uint_eq(x, (W - w) / 2);
                ck_assert_uint_eq(y, (H - h) / 2);
            }
        }
    ck_assert_int_gt(flips, n * 4 / 10); /* flip_prob 0.5 */
    ck_assert_int_lt(flips, n * 6 / 10);
}
END_TEST

START_TEST(random_crop_fallback)
{
    /* No attempt can fit a 2:1 crop of the whole area into a square: always the fallback, which
     * clamps the ratio to 2 and centres: w = W, h = round(W / 2). */
    rf_transform t = random_t(224);
    t.scale_min = t.scale_max = 1.0f;
    t.ratio_min = t.ratio_max = 2.0f;
    for (uint64_t seed = 0; seed < 50; seed++) {
        uint32_t x, y, w, h, fl;
        rf_choose_crop(&t, 301, 301, seed, &x, &y, &w, &h, &fl);
        ck_assert_uint_eq(w, 301);
        ck_assert_uint_eq(h, 150); /* round(150.5) = 150: Python rounds half to even */
        ck_assert_uint_eq(x, 0);
        ck_assert_uint_eq(y, (301 - 150) / 2);
    }
    /* A 5:1 image with the default ratios: whole height, width round(200 * 4/3) = 267. */
    t = random_t(224);
    t.scale_min = t.scale_max = 1.0f;
    uint32_t x, y, w, h, fl;
    rf_choose_crop(&t, 1000, 200, 1, &x, &y, &w, &h, &fl);
    ck_assert_uint_eq(w, 267);
    ck_assert_uint_eq(h, 200);
    ck_assert_uint_eq(x, (1000 - 267) / 2);
    ck_assert_uint_eq(y, 0);
}
END_TEST

/* rf_sample_geometry is the crop's box (rounded, it is rf_choose_crop's), the whole output
 * and the flip; points map linearly, mirrored when flipped, and the nearest source pixel of
 * an output pixel is the one under its centre. */
START_TEST(sample_geometry_maps_points_and_pixels)
{
    rf_transform t = random_t(64);
    t.width = 48;
    for (uint64_t seed = 0; seed < 200; seed++) {
        uint32_t x, y, w, h, fl, sx, sy;
        rf_geometry g;
        rf_choose_crop(&t, 300, 200, seed, &x, &y, &w, &h, &fl);
        rf_sample_geometry(&t, 300, 200, seed, &g);
        ck_assert(lrint(g.x) == x && lrint(g.y) == y && lrint(g.w) == w && lrint(g.h) == h);
        ck_assert_uint_eq(g.flip, fl);
        ck_assert(g.out_x == 0 && g.out_y == 0 && g.out_w == 48 && g.out_h == 64);
        double ox, oy;
        rf_geometry_to_output(&g, g.x, g.y, &ox, &oy); /* the box's corner */
        ck_assert(fabs(ox - (fl ? 48 : 0)) < 1e-9 && fabs(oy) < 1e-9);
        rf_geometry_to_output(&g, g.x + g.w, g.y + g.h, &ox, &oy);
        ck_assert(fabs(ox - (fl ? 0 : 48)) < 1e-9 && fabs(oy - 64) < 1e-9);
        rf_geometry_nearest(&g, 300, 200, 0, 0, &sx, &sy);
        uint32_t first = (uint32_t)floor(g.x + 0.5 * (g.w / 48)),
                 last = (uint32_t)floor(g.x + 47.5 * (g.w / 48));
        ck_assert_uint_eq(sx, fl ? last : first);
        ck_assert_uint_eq(sy, (uint32_t)floor(g.y + 0.5 * (g.h / 64)));
        /* PIL's running sum: a centre exactly on an edge (10.5 x 272 / 56 = 51) falls
         * short of it, in pixel 50, as Pillow's does */
        rf_geometry eg = {.w = 272, .h = 40, .out_w = 56, .out_h = 40, .out_width = 56,
                          .out_height = 40};
        rf_geometry_nearest(&eg, 300, 40, 10, 0, &sx, &sy);
        ck_assert_uint_eq(sx, 50);
    }
}
END_TEST

/* The center box of a W x H image resized to nw x nh and cropped to t's height x width at
 * (left, top), mapped back onto the image; no flip. */
static void assert_center_box(const rf_transform *t, uint32_t W, uint32_t H, uint64_t seed,
                              uint32_t nw, uint32_t nh, uint32_t left, uint32_t top)
{
    uint32_t x, y, w, h, fl;
    rf_choose_crop(t, W, H, seed, &x, &y, &w, &h, &fl);
    ck_assert_uint_eq(x, (uint32_t)lrint(left * (double)W / nw));
    ck_assert_uint_eq(w, (uint32_t)lrint(t->width * (double)W / nw));
    ck_assert_uint_eq(y, (uint32_t)lrint(top * (double)H / nh));
    ck_assert_uint_eq(h, (uint32_t)lrint(t->height * (double)H / nh));
    ck_assert_uint_eq(fl, 0);
}

START_TEST(center_crop_geometry)
{
    /* 500x375, size 224, shorter side -> 256: resized 341x256, crop at (58, 16) (round(58.5)
     * is 58), i.e. x = 58 * 500/341, w = 224 * 500/341, y = 16 * 375/256, h = 224 * 375/256. */
    rf_transform t = random_t(224);
    t.crop = RF_CROP_CENTER;
    t.flip_prob = -1;
    assert_center_box(&t, 500, 375, 99, 341, 256, 58, 16);
    uint32_t x, y, w, h, fl;
    t.resize_shorter = 224; /* no border: the crop spans the whole shorter side */
    rf_choose_crop(&t, 375, 500, 1, &x, &y, &w, &h, &fl);
    ck_assert_uint_eq(x, 0);
    ck_assert_uint_eq(w, 375);
}
END_TEST

/* H != W (torchvision's RandomResizedCrop((H, W)) and CenterCrop((H, W))): the random box is
 * drawn on the source alone, so the same seed gives the same box whatever the output; the
 * center box is CenterCrop((H, W)) of Resize(max(H, W) * 256 / 224), worked out by hand. */
START_TEST(non_square_crop_geometry)
{
    rf_transform sq = random_t(224), wide = random_hw(160, 224), tall = random_hw(224, 96);
    for (uint64_t seed = 0; seed < 200; seed++) {
        uint32_t a[5], b[5], c[5];
        rf_choose_crop(&sq, 500, 375, seed, &a[0], &a[1], &a[2], &a[3], &a[4]);
        rf_choose_crop(&wide, 500, 375, seed, &b[0], &b[1], &b[2], &b[3], &b[4]);
        rf_choose_crop(&tall, 500, 375, seed, &c[0], &c[1], &c[2], &c[3], &c[4]);
        ck_assert_int_eq(memcmp(a, b, sizeof a), 0);
        ck_assert_int_eq(memcmp(a, c, sizeof a), 0);
    }
    /* 160x224 from 500x375: shorter side -> 256 (the longer output side 224, scaled), resized
     * 341x256, crop 224 wide at round(58.5) = 58 and 160 high at (256 - 160) / 2 = 48 */
    wide.crop = RF_CROP_CENTER, wide.flip_prob = -1;
    assert_center_box(&wide, 500, 375, 5, 341, 256, 58, 48);
    /* 224x96 from 375x500: resized 256x341, crop 96 wide at 80 and 224 high at 58 */
    tall.crop = RF_CROP_CENTER, tall.flip_prob = -1;
    assert_center_box(&tall, 375, 500, 5, 256, 341, 80, 58);
}
END_TEST

/* Non-square outputs against the double reference, both crop modes: within one level at full
 * scale (as resize_full_scale_matches_reference), within the DCT-scaling bounds of
 * resize_dct_scaled_matches_reference when the crop is large enough to scale. */
START_TEST(non_square_resize_matches_reference)
{
    static const uint32_t HW[][2] = {{160, 224}, {224, 96}, {48, 200}};
    rf_decoder *d = rf_decoder_create(NULL);
    rf_decoder_set_max_scale_denom(d, 1);
    err_stats st = {0};
    for (uint64_t seed = 0; seed < 24; seed++) {
        const shape *s = &SHAPES[seed % NSHAPES];
        rf_transform t = random_hw(HW[seed % 3][0], HW[seed % 3][1]);
        if (seed % 4 == 3)
            t.crop = RF_CROP_CENTER, t.flip_prob = -1;
        check_transform(d, s->w, s->h, s->o, t, seed, &st);
    }
    ck_assert_int_eq(st.scaled, 0);
    ck_assert_msg(st.worst_mean <= 0.4 && st.worst_max <= 1.25, "mean %.3f max %.3f",
                  st.worst_mean, st.worst_max);
    rf_decoder_destroy(d);

    d = rf_decoder_create(NULL);
    st = (err_stats){0};
    static const shape big[] = {{1000, 750, {3, 90, 0, 1}}, {900, 1333, {1, 90, 0, 0}}};
    for (uint64_t seed = 0; seed < 12; seed++) {
        rf_transform t = random_hw(seed % 2 ? 200 : 40, seed % 2 ? 40 : 200);
        t.scale_min = 0.5f; /* big crops, so 1/2..1/8 scaling is used */
        if (seed % 4 == 3)
            t.crop = RF_CROP_CENTER, t.flip_prob = -1;
        check_transform(d, big[seed % 2].w, big[seed % 2].h, big[seed % 2].o, t, seed, &st);
    }
    ck_assert_int_ge(st.scaled, 10);
    ck_assert_msg(st.worst_mean <= 3.5 && st.worst_max <= 40.0, "mean %.3f max %.3f",
                  st.worst_mean, st.worst_max);
    rf_decoder_destroy(d);
}
END_TEST

/* ---- errors ------------------------------------------------------------------------------ */

static int decode_rc(rf_decoder *d, const uint8_t *j, size_t len, rf_err *err)
{
    rf_transform t = random_t(64);
    uint8_t out[64 * 64 * 3];
    memset(err, 0, sizeof *err);
    return rf_decode_transform(d, j, len, &t, 1, out, NULL, err);
}

static void assert_good_decode(rf_decoder *d)
{
    size_t len;
    uint8_t *j = make_jpeg(200, 150, RGB420, 3, &len), *full;
    rf_err err;
    uint32_t w, h;
    ck_assert_int_eq(decode_rc(d, j, len, &err), 0);
    ck_assert_int_eq(rf_decode_full(d, j, len, &full, &w, &h, &err), 0);
    free(full);
    free(j);
}

START_TEST(errors_truncated_and_not_jpeg)
{
    rf_decoder *d = rf_decoder_create(NULL);
    size_t len;
    uint8_t *j = make_jpeg(500, 375, RGB420, 1, &len), *full = NULL;
    rf_err err;
    uint32_t w, h;
    ck_assert_int_eq(decode_rc(d, j, len / 2, &err), RF_EDECODE);
    ck_assert_msg(strstr(err.msg, "Premature end") != NULL, "msg: %s", err.msg);
    assert_good_decode(d);
    ck_assert_int_eq(rf_decode_full(d, j, len / 2, &full, &w, &h, &err), RF_EDECODE);
    ck_assert_ptr_null(full);
    assert_good_decode(d);
    static const uint8_t text[] = "GIF89a this is not a jpeg at all";
    ck_assert_int_eq(decode_rc(d, text, sizeof text, &err), RF_EDECODE);
    ck_assert_msg(strstr(err.msg, "Not a JPEG") != NULL, "msg: %s", err.msg);
    ck_assert_int_eq(decode_rc(d, text, 0, &err), RF_EDECODE);
    assert_good_decode(d);
    free(j);
    rf_decoder_destroy(d);
}
END_TEST

START_TEST(errors_limits)
{
    rf_decoder *d = rf_decoder_create(NULL);
    size_t len;
    uint8_t *j = make_jpeg(64, 48, RGB420, 2, &len);
    rf_test_jpeg_set_size(j, len, 65000, 65000);
    rf_err err;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ck_assert_int_eq(decode_rc(d, j, len, &err), RF_ELIMIT);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ck_assert_msg(strstr(err.msg, "65000x65000") != NULL, "msg: %s", err.msg);
    /* Refused from the header: no 12 GB of buffers were touched (that would take many seconds).
     * The bound is loose so a loaded sanitizer run cannot trip it. */
    ck_assert_int_lt((t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec),
                     1000000000L);
    assert_good_decode(d);
    free(j);
    rf_decoder_destroy(d);

    /* Tight pixel limit and scan limit on a decoder of its own. */
    rf_decode_limits lim = {.max_pixels = 200 * 150, .max_scans = 2};
    d = rf_decoder_create(&lim);
    j = make_jpeg(201, 150, RGB420, 2, &len);
    ck_assert_int_eq(decode_rc(d, j, len, &err), RF_ELIMIT);
    free(j);
    j = make_jpeg(90, 90, PROG420, 2, &len); /* simple progression: 10 scans */
    ck_assert_int_eq(decode_rc(d, j, len, &err), RF_ELIMIT);
    ck_assert_msg(strstr(err.msg, "scans") != NULL, "msg: %s", err.msg);
    free(j);
    assert_good_decode(d);
    rf_decoder_destroy(d);
}
END_TEST


START_TEST(cmyk_and_gray_decode)
{
    rf_decoder *d = rf_decoder_create(NULL);
    size_t len;
    uint8_t *j = make_jpeg(150, 110, CMYK, 6, &len);
    rf_err err = {0};
    uint8_t out[64 * 64 * 3];
    rf_transform t = random_t(64);
    ck_assert_msg(rf_decode_transform(d, j, len, &t, 1, out, NULL, &err) == 0, "%s", err.msg);
    free(j);
    j = make_jpeg(150, 110, GRAY, 6, &len);
    ck_assert_int_eq(rf_decode_transform(d, j, len, &t, 1, out, NULL, &err), 0);
    for (int p = 0; p < 64 * 64; p++)
        ck_assert(out[3 * p] == out[3 * p + 1] && out[3 * p] == out[3 * p + 2]);
    free(j);
    rf_decoder_destroy(d);
}
END_TEST

/* ---- restart markers: lossless transcode and region decode -------------------------------- */

static uint8_t *with_restarts(const uint8_t *j, size_t len, uint32_t interval, size_t *out_len)
{
    uint8_t *out = NULL;
    rf_err err = {0};
    int rc = rf_jpeg_restart_transcode(j, len, interval, interval == 3, &out, out_len, &err);
    ck_assert_msg(rc == 0, "transcode: %s", err.msg);
    return out;
}

/* Same coefficients, so the same pixels; baseline, with the asked-for (or chosen) interval. */
START_TEST(restart_transcode_is_lossless)
{
    static const enc_opts OPTS[] = {{3, 90, 0, 1}, {3, 90, 0, 0}, {3, 85, 1, 1}, {1, 90, 0, 0},
                                    {4, 90, 0, 0}};
    static const uint32_t INTERVALS[] = {0, 1, 3};
    for (size_t o = 0; o < sizeof OPTS / sizeof OPTS[0]; o++)
        for (size_t k = 0; k < 3; k++) {
            size_t len, tlen;
            uint8_t *j = make_jpeg(407, 351, OPTS[o], o, &len);
            uint8_t *t = with_restarts(j, len, INTERVALS[k], &tlen);
            uint32_t w, h, tw, th;
            uint8_t *a, *b;
            rf_err err = {0};
            rf_decoder *dec = rf_decoder_create(NULL); /* rf_decode_full also does CMYK */
            ck_assert_int_eq(rf_decode_full(dec, j, len, &a, &w, &h, &err), 0);
            ck_assert_int_eq(rf_decode_full(dec, t, tlen, &b, &tw, &th, &err), 0);
            rf_decoder_destroy(dec);
            ck_assert_uint_eq(w, tw);
            ck_assert_uint_eq(h, th);
            ck_assert_int_eq(memcmp(a, b, (size_t)w * h * 3), 0);
            struct jpeg_decompress_struct d;
            struct jpeg_error_mgr e;
            d.err = jpeg_std_error(&e);
            jpeg_create_decompress(&d);
            jpeg_mem_src(&d, t, tlen);
            jpeg_read_header(&d, TRUE);
            uint32_t mcu = OPTS[o].comps == 1 ? 8 : 8u * (uint32_t)d.max_h_samp_factor;
            uint32_t cols = (407 + mcu - 1) / mcu;
            uint32_t want = INTERVALS[k] ? INTERVALS[k] : rf_jpeg_restart_for_row(cols);
            ck_assert_uint_eq(d.restart_interval, want);
            ck_assert(!d.progressive_mode);
            jpeg_destroy_decompress(&d);
            rf_jpeg_info ji;
            rf_decoder *pd = rf_decoder_create(NULL);
            ck_assert_int_eq(rf_jpeg_probe(pd, t, tlen, &ji, &err), 0);
            rf_decoder_destroy(pd);
            ck_assert_uint_eq(ji.restart_interval, want);
            ck_assert_uint_eq(ji.region_ready, cols % want == 0);
            free(a), free(b), free(t), free(j);
        }
    /* Not a JPEG: an error with libjpeg's words, no output. */
    uint8_t junk[64] = {0xFF, 0xD8, 0xFF, 0xDB, 0x00, 0x02, 1, 2, 3};
    uint8_t *out = (uint8_t *)junk;
    size_t olen = 1;
    rf_err err = {0};
    ck_assert_int_eq(rf_jpeg_restart_transcode(junk, sizeof junk, 0, 0, &out, &olen, &err),
                     RF_EDECODE);
    ck_assert_ptr_null(out);
    ck_assert_msg(strstr(err.msg, "restart transcode: ") != NULL, "%s", err.msg);
}
END_TEST

/* The region path must give byte-for-byte what decoding the whole file gives, for every crop,
 * scale, sampling, interval and both crop modes, while actually taking the region path. */
START_TEST(region_decode_matches_whole_decode)
{
    static const shape RS[] = {
        {407, 351, {3, 90, 0, 1}}, {500, 375, {3, 90, 0, 0}}, {97, 1000, {3, 85, 0, 1}},
        {1000, 61, {1, 90, 0, 0}}, {333, 501, {4, 90, 0, 0}}, {1200, 900, {3, 80, 1, 1}},
    };
    static const uint32_t INTERVALS[] = {0, 1, 2, 3};
    rf_decoder *a = rf_decoder_create(NULL), *b = rf_decoder_create(NULL);
    rf_decoder_set_flags(b, RF_DECODE_NO_REGION);
    uint8_t *oa = malloc(224 * 224 * 3), *ob = malloc(224 * 224 * 3);
    uint32_t regions = 0, runs = 0;
    for (size_t s = 0; s < sizeof RS / sizeof RS[0]; s++)
        for (size_t k = 0; k < 4; k++) {
            size_t len, tlen;
            uint8_t *j = make_jpeg(RS[s].w, RS[s].h, RS[s].o, s, &len);
            uint8_t *t = with_restarts(j, len, INTERVALS[k], &tlen);
            for (uint64_t seed = 0; seed < 60; seed++) {
                rf_transform tr = mixed_t(seed);
                rf_decode_info ia, ib;
                rf_err ea = {0}, eb = {0};
                ck_assert_msg(rf_decode_transform(a, t, tlen, &tr, seed, oa, &ia, &ea) == 0, "%s",
                              ea.msg);
                ck_assert_msg(rf_decode_transform(b, t, tlen, &tr, seed, ob, &ib, &eb) == 0, "%s",
                              eb.msg);
                ck_assert_msg(memcmp(oa, ob, (size_t)tr.height * tr.width * 3) == 0,
                              "%ux%u interval %u seed %llu: region decode differs (scale 1/%u)",
                              RS[s].w, RS[s].h, INTERVALS[k], (unsigned long long)seed,
                              ia.scale_denom);
                ck_assert_uint_eq(ia.width, RS[s].w);
                ck_assert_uint_eq(ia.crop_x, ib.crop_x);
                ck_assert_uint_eq(ib.region, 0);
                regions += ia.region, runs++;
            }
            free(t), free(j);
        }
    ck_assert_msg(regions > runs / 2, "region path taken %u of %u times", regions, runs);
    free(oa), free(ob);
    rf_decoder_destroy(a), rf_decoder_destroy(b);
}
END_TEST

/* decode.h's placement interface with no GPU behind it: a placement that takes a sample ends
 * the decode there (pixels() is not asked for, *bytes is its answer); one that declines gets
 * rf_decode_transform's bytes, one without room the full-scale bytes (DCT scaling off), and
 * RF_ENOMEM is an error naming the file's size. pack() sees the full-scale plans and the
 * transform it was given. */
typedef struct plain_place {
    int answer;     /* what pack() returns */
    uint32_t packs, pixel_calls;
    const rf_transform *t;
    uint8_t *px;
} plain_place;

static int plain_pack(void *ctx, const struct jpeg_decompress_struct *ci, const uint8_t *jpeg,
                      size_t len, const rf_place_out *outs, uint32_t n, const rf_transform *t,
                      struct rf_region_buf *rb, uint32_t *bytes)
{
    plain_place *p = ctx;
    p->packs++;
    ck_assert_ptr_eq(t, p->t);
    ck_assert(ci && jpeg && len && outs && n == 1 && rb);
    const rf_place_out *o = &outs[0];
    ck_assert_uint_eq(o->h->n_out, t->width);
    ck_assert_uint_eq(o->v->n_out, t->height);
    ck_assert(o->r.x == 0 && o->r.y == 0 && o->r.canvas_w == t->width &&
              o->r.canvas_h == t->height && o->at == 0);
    if (p->answer == 0)
        *bytes = 1234;
    return p->answer;
}

static uint8_t *plain_pixels(void *ctx, size_t bytes)
{
    plain_place *p = ctx;
    p->pixel_calls++;
    ck_assert_uint_eq(bytes, (size_t)p->t->height * p->t->width * 3);
    return p->px;
}

START_TEST(placement_without_gpu)
{
    size_t len;
    uint8_t *j = make_jpeg(801, 600, (enc_opts){3, 90, 0, 1}, 7, &len);
    rf_decoder *d = rf_decoder_create(NULL), *full = rf_decoder_create(NULL);
    rf_decoder_set_max_scale_denom(full, 1);
    rf_transform tr = mixed_t(3);
    size_t n = (size_t)tr.height * tr.width * 3;
    uint8_t *px = malloc(n), *want = malloc(n), *want_full = malloc(n);
    rf_err e = {0};
    rf_decode_info info;
    ck_assert_int_eq(rf_decode_transform(d, j, len, &tr, 3, want, NULL, &e), 0);
    ck_assert_int_eq(rf_decode_transform(full, j, len, &tr, 3, want_full, NULL, &e), 0);
    plain_place p = {.t = &tr, .px = px};
    rf_decode_place pl = {plain_pack, plain_pixels, &p};
    uint32_t bytes = 99;

    p.answer = 0;
    ck_assert_int_eq(rf_decode_placed(d, j, len, &tr, NULL, 3, &pl, &bytes, &info, &e), 0);
    ck_assert_uint_eq(bytes, 1234);
    ck_assert_uint_eq(p.pixel_calls, 0);
    ck_assert_uint_eq(info.region, 1);
    ck_assert_uint_eq(info.scale_denom, 1);

    p.answer = RF_PLACE_DECLINED;
    ck_assert_int_eq(rf_decode_placed(d, j, len, &tr, NULL, 3, &pl, &bytes, &info, &e), 0);
    ck_assert_uint_eq(bytes, 0);
    ck_assert_int_eq(memcmp(px, want, n), 0);

    p.answer = RF_PLACE_NO_ROOM;
    ck_assert_int_eq(rf_decode_placed(d, j, len, &tr, NULL, 3, &pl, &bytes, &info, &e), 0);
    ck_assert_uint_eq(bytes, 0);
    ck_assert_int_eq(memcmp(px, want_full, n), 0);
    ck_assert_uint_eq(p.packs, 3);
    ck_assert_uint_eq(p.pixel_calls, 2);

    p.answer = RF_ENOMEM;
    ck_assert_int_eq(rf_decode_placed(d, j, len, &tr, NULL, 3, &pl, &bytes, &info, &e), RF_ENOMEM);
    char msg[128];
    snprintf(msg, sizeof msg, "restart intervals of a %zu-byte JPEG", len);
    ck_assert_msg(strstr(e.msg, msg), "%s", e.msg);
    free(px), free(want), free(want_full), free(j);
    rf_decoder_destroy(d), rf_decoder_destroy(full);
}
END_TEST

/* GPU decode (gpujpeg.h), run through its host driver: every packet decodes byte-for-byte to
 * what the CPU path gives with DCT scaling off, for each sampling, interval, crop mode, layout,
 * flip and image edge; images the kernels do not cover come back decoded by the CPU path, and
 * a packet with no room left decodes on the CPU to the packet's very bytes. */
START_TEST(gpu_packet_matches_cpu_full_scale)
{
    static const shape GS[] = {
        {407, 351, {3, 90, 0, 1}}, {500, 375, {3, 90, 0, 0}}, {97, 1000, {3, 85, 0, 1}},
        {1000, 61, {1, 90, 0, 0}}, {333, 501, {3, 90, 0, 2}}, {801, 600, {3, 80, 0, 1}},
        {61, 47, {3, 90, 0, 1}},   {5, 7, {3, 90, 0, 1}},
    };
    static const uint32_t INTERVALS[] = {0, 1, 3}; /* 3: optimized Huffman tables too */
    rf_decoder *a = rf_decoder_create(NULL), *b = rf_decoder_create(NULL);
    rf_decoder_set_max_scale_denom(a, 1);
    rf_decoder_set_max_scale_denom(b, 1); /* gpu_decode's loader: no crop is DCT-scaled */
    size_t cap = 1u << 20;
    uint8_t *pkt = malloc(cap), *scratch = malloc(RF_GJ_SCRATCH);
    uint8_t *oa = malloc(224 * 224 * 3), *og = malloc(224 * 224 * 3), *on = malloc(224 * 224 * 3);
    test_place pl = {pkt, og, cap}, none = {pkt, on, 0};
    uint32_t gpu = 0, runs = 0;
    for (size_t s = 0; s < sizeof GS / sizeof GS[0]; s++)
        for (size_t k = 0; k < 3; k++) {
            size_t len, tlen;
            uint8_t *j = make_jpeg(GS[s].w, GS[s].h, GS[s].o, s, &len);
            uint8_t *t = with_restarts(j, len, INTERVALS[k], &tlen);
            for (uint64_t seed = 0; seed < 40; seed++) {
                rf_transform tr = mixed_t(seed);
                rf_decode_info ia, ib;
                rf_err ea = {0}, eb = {0};
                uint32_t bytes = 0, bad = 0;
                runs++;
                int rc = rf_decode_packet(b, t, tlen, &tr, NULL, seed, 0, place_fixed, &pl, &bytes,
                                          &ib, &eb);
                ck_assert_msg(rc == 0, "%s", eb.msg);
                if (bytes == 0) {
                    /* only an interval that does not divide the MCU row (the packer's own
                     * choice, 0, and 1 always do); the CPU path decoded it instead */
                    ck_assert_msg(INTERVALS[k] > 1, "%ux%u interval %u: not packed", GS[s].w,
                                  GS[s].h, INTERVALS[k]);
                    ck_assert_int_eq(rf_decode_transform(b, t, tlen, &tr, seed, oa, NULL, &ea), 0);
                    ck_assert_int_eq(memcmp(oa, og, (size_t)tr.height * tr.width * 3), 0);
                    continue;
                }
                ck_assert_uint_le(bytes, cap);
                int st = rf_gj_decode_host(pkt, scratch, og, &bad);
                ck_assert_msg(st == 0, "%ux%u: %s in interval %u", GS[s].w, GS[s].h,
                              rf_gj_status_text(st), bad);
                ck_assert_msg(rf_decode_transform(a, t, tlen, &tr, seed, oa, &ia, &ea) == 0, "%s",
                              ea.msg);
                size_t n = (size_t)tr.height * tr.width * 3, i = 0;
                while (i < n && oa[i] == og[i])
                    i++;
                ck_assert_msg(i == n,
                              "%ux%u interval %u seed %llu: byte %zu is %u on the GPU path, %u on "
                              "the CPU path (crop %u,%u %ux%u)", GS[s].w, GS[s].h, INTERVALS[k],
                              (unsigned long long)seed, i, og[i], oa[i], ia.crop_x, ia.crop_y,
                              ia.crop_w, ia.crop_h);
                ck_assert_uint_eq(ib.crop_x, ia.crop_x);
                ck_assert_uint_eq(ib.flipped, ia.flipped);
                if (seed % 4 == 0) { /* no room for the packet: the same bytes from the CPU */
                    ck_assert_int_eq(rf_decode_packet(b, t, tlen, &tr, NULL, seed, 0, place_fixed,
                                                      &none, &bytes, &ib, &eb), 0);
                    ck_assert_uint_eq(bytes, 0);
                    ck_assert_uint_eq(ib.scale_denom, 1);
                    ck_assert_msg(memcmp(on, og, n) == 0, "%ux%u seed %llu: the no-room decode "
                                  "differs from the packet's", GS[s].w, GS[s].h,
                                  (unsigned long long)seed);
                }
                gpu++;
            }
            free(t), free(j);
        }
    ck_assert_msg(gpu > runs * 2 / 3, "GPU path taken %u of %u times", gpu, runs);
    free(pkt), free(scratch), free(oa), free(og), free(on);
    rf_decoder_destroy(a), rf_decoder_destroy(b);
}
END_TEST

/* Engine packets (hw_decode_percent), run through the host's stand-in for the hardware decoder
 * (libjpeg's raw planes, then the kernels' own resize code): every baseline file, with or
 * without restart markers, decodes byte-for-byte to the CPU path's full-scale pixels, for each
 * sampling, crop mode, layout, flip and image edge. A progressive file is not the engine's:
 * the CPU path decodes it, as it always would (with_restarts rewrites it as baseline). A
 * trailer after the EOI stays out of the packet; a file without its EOI makes none. */
START_TEST(engine_packet_matches_cpu_full_scale)
{
    static const shape ES[] = {
        {407, 351, {3, 90, 0, 1}}, {500, 375, {3, 90, 0, 0}}, {97, 1000, {3, 85, 0, 1}},
        {1000, 61, {1, 90, 0, 0}}, {333, 501, {3, 90, 0, 2}}, {801, 600, {3, 80, 0, 1}},
        {61, 47, {3, 90, 0, 1}},   {5, 7, {3, 90, 0, 1}},    {300, 200, {3, 85, 1, 1}},
    };
    rf_decoder *a = rf_decoder_create(NULL), *b = rf_decoder_create(NULL);
    rf_decoder_set_max_scale_denom(a, 1);
    rf_decoder_set_max_scale_denom(b, 1); /* gpu_decode's loader: no crop is DCT-scaled */
    size_t cap = 1u << 21;
    uint8_t *pkt = malloc(cap), *scratch = malloc(RF_GJ_SCRATCH);
    uint8_t *oa = malloc(224 * 224 * 3), *og = malloc(224 * 224 * 3);
    test_place pl = {pkt, og, cap};
    for (size_t s = 0; s < sizeof ES / sizeof ES[0]; s++)
        for (int restarts = 0; restarts < 2; restarts++) {
            size_t len, tlen;
            uint8_t *j = make_jpeg(ES[s].w, ES[s].h, ES[s].o, s, &len);
            uint8_t *t = restarts ? with_restarts(j, len, 1, &tlen) : j;
            if (!restarts)
                tlen = len;
            for (uint64_t seed = 0; seed < 24; seed++) {
                rf_transform tr = mixed_t(seed);
                rf_err e = {0};
                uint32_t bytes = 0, bad = 0;
                size_t n = (size_t)tr.height * tr.width * 3;
                ck_assert_msg(rf_decode_packet(b, t, tlen, &tr, NULL, seed, 1, place_fixed, &pl,
                                               &bytes, NULL, &e) == 0, "%s", e.msg);
                if (ES[s].o.progressive && !restarts) { /* the CPU path's own pixels */
                    ck_assert_uint_eq(bytes, 0);
                    ck_assert_int_eq(rf_decode_transform(b, t, tlen, &tr, seed, oa, NULL, &e), 0);
                    ck_assert_int_eq(memcmp(oa, og, n), 0);
                    continue;
                }
                ck_assert_msg(bytes > tlen, "%ux%u: no engine packet", ES[s].w, ES[s].h);
                ck_assert_uint_eq(((rf_gj_packet *)pkt)->engine, 1);
                /* its check: a plain scan's walk, done when it was packed (a damaged one
                 * keeps its unit for the GPU: engine_verdicts_equal_the_kernels), or the
                 * region's intervals */
                if (restarts)
                    ck_assert_uint_ge(((rf_gj_packet *)pkt)->nintervals, 1);
                else
                    ck_assert_uint_eq(((rf_gj_packet *)pkt)->nintervals, 0);
                ck_assert_msg(rf_decode_planes(b, pkt, scratch, &e) == 0, "%s", e.msg);
                int st = rf_gj_decode_host(pkt, scratch, og, &bad);
                ck_assert_msg(st == 0, "%s", rf_gj_status_text(st));
                ck_assert_int_eq(rf_decode_transform(a, t, tlen, &tr, seed, oa, NULL, &e), 0);
                size_t i = 0;
                while (i < n && oa[i] == og[i])
                    i++;
                ck_assert_msg(i == n, "%ux%u restarts %d seed %llu: byte %zu is %u from the "
                              "engine packet, %u on the CPU path", ES[s].w, ES[s].h, restarts,
                              (unsigned long long)seed, i, og[i], oa[i]);
            }
            if (restarts)
                free(t);
            free(j);
        }
    /* a file cut short (no EOI) is refused before any packet is made, on every path: the
     * engine would report no error for it */
    {
        size_t len;
        uint8_t *j = make_jpeg(407, 351, RGB420, 3, &len);
        memset(j + len / 2, 0, len - len / 2);
        rf_transform tr = random_t(64);
        rf_err e1 = {0}, e2 = {0};
        uint32_t bytes = 7;
        int r1 = rf_decode_packet(b, j, len, &tr, NULL, 1, 1, place_fixed, &pl, &bytes, NULL, &e1);
        int r2 = rf_decode_transform(b, j, len, &tr, 1, oa, NULL, &e2);
        ck_assert_int_eq(r1, RF_EDECODE);
        ck_assert_int_eq(r2, RF_EDECODE);
        ck_assert_msg(strstr(e1.msg, "Premature end") != NULL, "%s", e1.msg);
        ck_assert_str_eq(e1.msg, e2.msg);
        (void)bytes;
        free(j);
    }
    /* a trailer after the EOI (a motion photo's appended video, a second JPEG): the engine
     * packet holds the file up to its EOI, not the trailer, and decodes to the CPU's pixels */
    {
        size_t len, big = 100000;
        uint8_t *j = make_jpeg(407, 351, RGB420, 5, &len);
        uint8_t *t = realloc(j, len + big);
        ck_assert_ptr_nonnull(t);
        for (size_t i = 0; i < big; i++)
            t[len + i] = (uint8_t)(i * 131 + 7);
        memcpy(t + len, "\xff\xd8\xff\xe1", 4);
        rf_transform tr = random_t(64);
        rf_err e = {0};
        uint32_t bytes = 0, bad = 0;
        ck_assert_msg(rf_decode_packet(b, t, len + big, &tr, NULL, 2, 1, place_fixed, &pl, &bytes,
                                       NULL, &e) == 0, "%s", e.msg);
        const rf_gj_packet *p = (const rf_gj_packet *)pkt;
        ck_assert_msg(bytes > len && p->engine, "no engine packet for a file with a trailer");
        ck_assert_uint_eq(p->data_bytes, len);
        ck_assert_int_eq(memcmp(pkt + p->off_data, t, len), 0);
        ck_assert_int_eq(rf_decode_planes(b, pkt, scratch, &e), 0);
        ck_assert_int_eq(rf_gj_decode_host(pkt, scratch, og, &bad), 0);
        ck_assert_int_eq(rf_decode_transform(a, t, len + big, &tr, 2, oa, NULL, &e), 0);
        ck_assert_int_eq(memcmp(oa, og, (size_t)tr.height * tr.width * 3), 0);
        free(t);
    }
    /* a packet the stand-in refuses to take for an engine packet */
    ((rf_gj_packet *)pkt)->engine = 0;
    rf_err e = {0};
    ck_assert_int_eq(rf_decode_planes(b, pkt, scratch, &e), RF_EINVAL);
    free(pkt), free(scratch), free(oa), free(og);
    rf_decoder_destroy(a), rf_decoder_destroy(b);
}
END_TEST

/* A decoder that may DCT-scale (the balancing scheduler's loader) keeps every crop it would
 * scale on the CPU, so a sample's pixels never depend on the route: each crop either becomes a
 * packet (at full scale, as the CPU decodes it) or is decoded right there as
 * rf_decode_transform decodes it, scaled; both happen on these photo-sized images. */
START_TEST(packets_leave_dct_scalable_crops_to_the_cpu)
{
    static const shape SS[] = {{407, 351, {3, 90, 0, 1}}, {801, 600, {3, 80, 0, 1}},
                               {1000, 61, {1, 90, 0, 0}}, {333, 501, {3, 90, 0, 2}}};
    rf_decoder *a = rf_decoder_create(NULL), *b = rf_decoder_create(NULL);
    size_t cap = 1u << 21;
    uint8_t *pkt = malloc(cap), *scratch = malloc(RF_GJ_SCRATCH);
    uint8_t *oa = malloc(224 * 224 * 3), *og = malloc(224 * 224 * 3);
    test_place pl = {pkt, og, cap};
    uint32_t scaled = 0, packets = 0;
    for (size_t s = 0; s < sizeof SS / sizeof SS[0]; s++)
        for (int restarts = 0; restarts < 2; restarts++) {
            size_t len, tlen = 0;
            uint8_t *j = make_jpeg(SS[s].w, SS[s].h, SS[s].o, s + 40, &len);
            uint8_t *t = restarts ? with_restarts(j, len, 1, &tlen) : j;
            tlen = restarts ? tlen : len;
            for (uint64_t seed = 0; seed < 24; seed++) {
                rf_transform tr = mixed_t(seed);
                rf_err e = {0};
                rf_decode_info ib = {0}, ia = {0};
                uint32_t bytes = 0, bad = 0, engine = seed & 1;
                size_t n = (size_t)tr.height * tr.width * 3;
                ck_assert_msg(rf_decode_packet(b, t, tlen, &tr, NULL, seed, (int)engine,
                                               place_fixed,
                                               &pl, &bytes, &ib, &e) == 0, "%s", e.msg);
                ck_assert_int_eq(rf_decode_transform(a, t, tlen, &tr, seed, oa, &ia, &e), 0);
                if (ia.scale_denom > 1) { /* scaled on the CPU, never a packet */
                    ck_assert_uint_eq(bytes, 0);
                    ck_assert_uint_eq(ib.scale_denom, ia.scale_denom);
                    scaled++;
                } else {
                    ck_assert_msg(bytes > 0, "%ux%u seed %llu: no packet for a full-scale crop",
                                  SS[s].w, SS[s].h, (unsigned long long)seed);
                    if (engine)
                        ck_assert_msg(rf_decode_planes(b, pkt, scratch, &e) == 0, "%s", e.msg);
                    int st = rf_gj_decode_host(pkt, scratch, og, &bad);
                    ck_assert_msg(st == 0, "%s", rf_gj_status_text(st));
                    packets++;
                }
                ck_assert_msg(memcmp(oa, og, n) == 0, "%ux%u restarts %d seed %llu: pixels "
                              "differ from the CPU path's", SS[s].w, SS[s].h, restarts,
                              (unsigned long long)seed);
            }
            if (restarts)
                free(t);
            free(j);
        }
    ck_assert_uint_gt(scaled, 0);
    ck_assert_uint_gt(packets, 0);
    rf_decoder_destroy(a);
    rf_decoder_destroy(b);
    free(pkt), free(scratch), free(oa), free(og);
}
END_TEST

/* Offset of the last SOS marker in j (the scan the damage tests write into); 0 when none. */
static size_t last_sos(const uint8_t *j, size_t len)
{
    size_t sos = 0;
    for (size_t i = 0; i + 1 < len; i++)
        if (j[i] == 0xFF && j[i + 1] == 0xDA)
            sos = i;
    return sos;
}

/* Copy j to bad and pick a byte of its scan to damage, from 20 bytes after the SOS marker to
 * `tail` bytes before the end; 0 when it or the byte before is 0xFF: damage there would change
 * the marker structure, which rf_jpeg_scan_check refuses before any packet is made. */
static size_t damage_at(uint64_t *rng, const uint8_t *j, size_t len, size_t sos, uint8_t *bad,
                        size_t tail)
{
    memcpy(bad, j, len);
    size_t at = sos + 20 + (size_t)(lcg(rng) % (len - sos - 20 - tail));
    return bad[at] == 0xFF || bad[at - 1] == 0xFF ? 0 : at;
}

/* Damaged entropy-coded bytes on the GPU path: a packet whose intervals decode wrongly reports
 * the cause (the kernels cannot print), and then the whole-file CPU decode fails too. A damaged
 * packet that decodes mostly gives the CPU path's pixels, but not always: garbage can make
 * dequantized coefficients too large for the 16-bit lanes of libjpeg-turbo's SIMD IDCT, which
 * saturates where its C IDCT (and ours) keeps 32 bits (with JSIMD_FORCENONE=1 every one
 * matches). No encoder writes such coefficients, so clean files are exact (test above). */
START_TEST(gpu_packet_damage)
{
    size_t len, tlen;
    uint8_t *j = make_jpeg(407, 351, RGB420, 11, &len);
    uint8_t *t = with_restarts(j, len, 0, &tlen);
    rf_decoder *a = rf_decoder_create(NULL), *b = rf_decoder_create(NULL);
    rf_decoder_set_max_scale_denom(a, 1);
    rf_decoder_set_max_scale_denom(b, 1); /* gpu_decode's loader: no crop is DCT-scaled */
    size_t cap = 1u << 20, sos = last_sos(t, tlen);
    uint8_t *pkt = malloc(cap), *scratch = malloc(RF_GJ_SCRATCH), *bad = malloc(tlen);
    uint8_t *oa = malloc(64 * 64 * 3), *og = malloc(64 * 64 * 3), *full = NULL;
    rf_transform tr = random_t(64);
    test_place pl = {pkt, og, cap};
    uint32_t caught = 0, clean = 0, same = 0;
    uint64_t rng = 99;
    for (int trial = 0; trial < 300; trial++) {
        size_t at = damage_at(&rng, t, tlen, sos, bad, 4);
        if (!at)
            continue;
        uint8_t v = (uint8_t)(lcg(&rng) & 0xFF);
        bad[at] = v == 0xFF ? 0x7F : v;
        uint32_t bytes, bi = 0, fw, fh;
        rf_err e = {0};
        uint64_t seed = (uint64_t)trial;
        int rc = rf_decode_packet(b, bad, tlen, &tr, NULL, seed, 0, place_fixed, &pl, &bytes, NULL,
                                  &e);
        ck_assert_msg(rc == 0, "trial %d: %s", trial, e.msg);
        ck_assert_uint_gt(bytes, 0);
        int st = RF_GJ_FAILURE(rf_gj_decode_host(pkt, scratch, og, &bi));
        int ra = rf_decode_transform(a, bad, tlen, &tr, seed, oa, NULL, &e);
        if (st) {
            ck_assert_uint_lt(bi, ((rf_gj_packet *)pkt)->nintervals);
            ck_assert_msg(rf_decode_full(a, bad, tlen, &full, &fw, &fh, &e) != 0,
                          "trial %d: GPU path says %s, libjpeg decodes the file", trial,
                          rf_gj_status_text(st));
            ck_assert_ptr_null(full);
            caught++;
        } else if (ra == 0) {
            same += memcmp(oa, og, 64 * 64 * 3) == 0;
            clean++;
        }
    }
    ck_assert_uint_gt(caught, 50);
    ck_assert_uint_gt(clean, 5);
    ck_assert_msg(same * 10 >= clean * 8, "%u of %u damaged decodes match", same, clean);
    free(pkt), free(scratch), free(bad), free(oa), free(og), free(t), free(j);
    rf_decoder_destroy(a), rf_decoder_destroy(b);
}
END_TEST

/* One GPU path's verdict on a file and crop, as rf_loader_next would give it: 1 when the
 * sample fails (on its decode thread, or by its packet's status), 0 when it is delivered. */
static int gpu_verdict(rf_decoder *d, const uint8_t *j, size_t len, const rf_transform *tr,
                       uint64_t seed, int engine, test_place *pl, uint8_t *scratch)
{
    uint32_t bytes = 0, bi = 0;
    rf_err e = {0};
    if (rf_decode_packet(d, j, len, tr, NULL, seed, engine, place_fixed, pl, &bytes, NULL, &e))
        return 1;
    if (!bytes) /* decoded on the CPU right there */
        return 0;
    /* the stand-in decodes damaged data without an error, as the engines do */
    ck_assert_msg(!engine || rf_decode_planes(d, pl->pkt, scratch, &e) == 0, "%s", e.msg);
    return RF_GJ_FAILURE(rf_gj_decode_host(pl->pkt, scratch, pl->px, &bi)) != 0;
}

/* The engines decode damaged entropy-coded data without an error, so an engine packet carries
 * the kernels' check of the same file and crop (rf_gj_engine_check): a plain file is walked
 * as far as the CPU path's libjpeg decodes it (rf_jpeg_rows_read), as the walker walks it; a
 * restart-marked one is checked interval by interval as the kernels decode it. Whatever the
 * damage - the file cut short and closed with an EOI (a download cut off and patched by a
 * tool), or a byte of its scan overwritten - the engines' verdict is the kernels', the
 * engines never refuse a file the CPU path decodes with that crop, and on plain files every
 * path gives the CPU's verdict. A file cut to its first 600 bytes is refused on every path. */
START_TEST(engine_verdicts_equal_the_kernels)
{
    static const struct {
        uint32_t w, h;
        enc_opts o;
        uint32_t restart;
    } S[] = {{407, 351, {3, 90, 0, 1}, 0}, {407, 351, {3, 90, 0, 1}, 1},
             {333, 501, {3, 85, 0, 0}, 0}, {500, 375, {1, 90, 0, 0}, 0},
             {640, 480, {3, 95, 0, 2}, 2}, {407, 351, {3, 90, 0, 1}, 7}};
    rf_decoder *a = rf_decoder_create(NULL), *b = rf_decoder_create(NULL);
    rf_decoder_set_max_scale_denom(a, 1);
    rf_decoder_set_max_scale_denom(b, 1);
    size_t cap = 1u << 21;
    uint8_t *pkt = malloc(cap), *scratch = malloc(RF_GJ_SCRATCH), *og = malloc(224 * 224 * 3);
    uint8_t *oa = malloc(224 * 224 * 3);
    test_place pl = {pkt, og, cap};
    uint32_t refused = 0, delivered = 0, cpu_only = 0;
    uint64_t rng = 41;
    for (size_t s = 0; s < sizeof S / sizeof S[0]; s++) {
        size_t len, tlen;
        uint8_t *j = make_jpeg(S[s].w, S[s].h, S[s].o, s + 3, &len);
        uint8_t *t = S[s].restart ? with_restarts(j, len, S[s].restart, &tlen) : j;
        tlen = S[s].restart ? tlen : len;
        size_t sos = last_sos(t, tlen);
        uint8_t *bad = malloc(tlen + 2);
        for (int trial = 0; trial < 60; trial++) {
            size_t blen = tlen;
            if (trial % 2 == 0) { /* cut, then closed with an EOI */
                memcpy(bad, t, tlen);
                blen = sos + 20 + (size_t)(lcg(&rng) % (tlen - sos - 22));
                if (bad[blen - 1] == 0xFF)
                    blen--;
                bad[blen++] = 0xFF, bad[blen++] = 0xD9;
            } else {
                size_t at = damage_at(&rng, t, tlen, sos, bad, 4);
                if (!at)
                    continue;
                uint8_t v = (uint8_t)(lcg(&rng) & 0xFF);
                bad[at] = v == 0xFF ? 0x7F : v;
            }
            for (uint64_t seed = 0; seed < 4; seed++) {
                rf_transform tr = mixed_t(seed + (uint64_t)trial * 4);
                rf_err e = {0};
                int kern = gpu_verdict(b, bad, blen, &tr, seed, 0, &pl, scratch);
                int eng = gpu_verdict(b, bad, blen, &tr, seed, 1, &pl, scratch);
                int cpu = rf_decode_transform(a, bad, blen, &tr, seed, oa, NULL, &e) != 0;
                ck_assert_msg(eng == kern, "%ux%u restart %u trial %d seed %llu: engines %s, "
                              "kernels %s", S[s].w, S[s].h, S[s].restart, trial,
                              (unsigned long long)seed, eng ? "refuse" : "deliver",
                              kern ? "refuse" : "deliver");
                ck_assert_msg(!eng || cpu, "%ux%u restart %u trial %d: the engines refuse a "
                              "file the CPU path decodes", S[s].w, S[s].h, S[s].restart, trial);
                /* the data are read as far as libjpeg reads them: the same verdict */
                ck_assert_msg(eng == cpu, "%ux%u restart %u trial %d seed %llu: the CPU path "
                              "%s", S[s].w, S[s].h, S[s].restart, trial, (unsigned long long)seed,
                              cpu ? "refuses a file the GPU paths deliver"
                                  : "delivers a file the GPU paths refuse");
                refused += eng, delivered += !eng, cpu_only += cpu && !eng;
            }
        }
        /* the first 600 bytes and an EOI: refused on every path, whatever the crop */
        memcpy(bad, t, 600);
        bad[600] = 0xFF, bad[601] = 0xD9;
        for (uint64_t seed = 0; seed < 8; seed++) {
            rf_transform tr = mixed_t(seed);
            rf_err e = {0};
            ck_assert(gpu_verdict(b, bad, 602, &tr, seed, 1, &pl, scratch));
            ck_assert(gpu_verdict(b, bad, 602, &tr, seed, 0, &pl, scratch));
            ck_assert(rf_decode_transform(a, bad, 602, &tr, seed, oa, NULL, &e) != 0);
        }
        free(bad);
        if (S[s].restart)
            free(t);
        free(j);
    }
    /* A center crop of all but 3 MCUs each side of a restart-marked file, whose interval just
     * right of the crop (row 5, MCUs 48-49) is overwritten with 0xFF00 pairs (no Huffman code):
     * the CPU path decodes such a file through the crop's region too (transform.c try_region),
     * so no path reads that interval and every path delivers the sample; a crop of the whole
     * width reads it on every path, and every path refuses it. */
    {
        size_t len, tlen, k = 0, s0 = 0, s1 = 0;
        uint8_t *j = make_jpeg(800, 480, RGB420, 77, &len);
        uint8_t *t = with_restarts(j, len, 2, &tlen);
        for (size_t i = last_sos(t, tlen); i + 1 < tlen && !s1; i++)
            if (t[i] == 0xFF && t[i + 1] >= 0xD0 && t[i + 1] <= 0xD7 && ++k >= 149)
                *(k == 149 ? &s0 : &s1) = k == 149 ? i + 2 : i;
        ck_assert_uint_gt(s1, s0 + 4);
        for (size_t i = s0; i + 1 < s1; i += 2)
            t[i] = 0xFF, t[i + 1] = 0x00;
        rf_transform tr = {.crop = RF_CROP_CENTER, .height = 240, .width = 352,
                           .resize_shorter = 240, .layout = RF_LAYOUT_NHWC, .flip_prob = -1};
        uint8_t *px = malloc(240 * 400 * 3);
        test_place wpl = {pkt, px, cap};
        for (int wide = 0; wide < 2; wide++, tr.width = 400) {
            rf_err e = {0};
            int cpu = rf_decode_transform(a, t, tlen, &tr, 0, px, NULL, &e) != 0;
            ck_assert_int_eq(cpu, wide);
            ck_assert_int_eq(gpu_verdict(b, t, tlen, &tr, 0, 0, &wpl, scratch), wide);
            ck_assert_int_eq(gpu_verdict(b, t, tlen, &tr, 0, 1, &wpl, scratch), wide);
        }
        free(px), free(t), free(j);
    }
    /* both verdicts occur */
    ck_assert_uint_gt(refused, 100);
    ck_assert_uint_gt(delivered, 100);
    fprintf(stderr, "engine verdicts: %u refused, %u delivered, %u refused by the CPU alone\n",
            refused, delivered, cpu_only);
    free(pkt), free(scratch), free(og), free(oa);
    rf_decoder_destroy(a), rf_decoder_destroy(b);
}
END_TEST

/* How far the GPU paths judge a plain file's Huffman data (rf_jpeg_rows_read, an engine
 * packet's check_mcus) is how far the CPU path's libjpeg decodes it for the same crop (its
 * input_iMCU_row afterwards): one row above the crop's region for a crop ending on a row
 * boundary of a file without vertical chroma upsampling, one past it where 4:2:0's fancy
 * upsampling reads ahead. Every sampling the engines take, crops at every position. */
START_TEST(rows_read_are_libjpegs)
{
    static const struct {
        uint32_t w, h;
        enc_opts o;
    } S[] = {{407, 351, {3, 90, 0, 1}}, {333, 501, {3, 85, 0, 0}}, {500, 375, {1, 90, 0, 0}},
             {640, 480, {3, 95, 0, 2}}, {97, 1000, {3, 85, 0, 1}}, {1000, 61, {3, 90, 0, 1}},
             {64, 48, {3, 90, 0, 1}}};
    rf_decoder *a = rf_decoder_create(NULL), *b = rf_decoder_create(NULL);
    rf_decoder_set_max_scale_denom(a, 1);
    rf_decoder_set_max_scale_denom(b, 1);
    size_t cap = 1u << 21;
    uint8_t *pkt = malloc(cap), *og = malloc(224 * 224 * 3), *oa = malloc(224 * 224 * 3);
    test_place pl = {pkt, og, cap};
    uint32_t below = 0, past = 0;
    for (size_t s = 0; s < sizeof S / sizeof S[0]; s++) {
        size_t len;
        uint8_t *j = make_jpeg(S[s].w, S[s].h, S[s].o, s + 3, &len);
        for (uint64_t seed = 0; seed < 200; seed++) {
            rf_transform tr = mixed_t(seed);
            rf_err e = {0};
            rf_decode_info ia = {0};
            uint32_t bytes = 0;
            ck_assert_int_eq(rf_decode_transform(a, j, len, &tr, seed, oa, &ia, &e), 0);
            ck_assert_int_eq(rf_decode_packet(b, j, len, &tr, NULL, seed, 1, place_fixed, &pl,
                                              &bytes, NULL, &e), 0);
            ck_assert_uint_gt(bytes, 0);
            const rf_gj_packet *p = (const rf_gj_packet *)pkt;
            const rf_gj_unit *u = (const rf_gj_unit *)(pkt + p->off_span);
            /* a plain scan: one unit, which the packing thread checked (nintervals 0) */
            ck_assert_uint_eq(p->nintervals, 0);
            ck_assert_uint_eq(u->mcus % p->mcu_cols, 0);
            ck_assert_msg(u->mcus / p->mcu_cols == ia.imcu_rows, "%ux%u seed %llu: the "
                          "check reads %u MCU rows, libjpeg %u", S[s].w, S[s].h,
                          (unsigned long long)seed, u->mcus / p->mcu_cols, ia.imcu_rows);
            /* the crop region's rows, as the kernels' packet would have them */
            ck_assert_int_eq(rf_decode_packet(b, j, len, &tr, NULL, seed, 0, place_fixed, &pl,
                                              &bytes, NULL, &e), 0);
            uint32_t region_end = p->ry / p->mcu_h + p->mcu_rows;
            below += ia.imcu_rows < region_end, past += ia.imcu_rows > region_end;
        }
        free(j);
    }
    ck_assert_uint_gt(below, 0); /* both differences from the region occur */
    ck_assert_uint_gt(past, 0);
    free(pkt), free(og), free(oa);
    rf_decoder_destroy(a), rf_decoder_destroy(b);
}
END_TEST

/* j[0..len) with `n` bytes of `ins` inserted at `at`. */
static uint8_t *with_inserted(const uint8_t *j, size_t len, size_t at, const void *ins, size_t n)
{
    uint8_t *o = malloc(len + n);
    memcpy(o, j, at);
    memcpy(o + at, ins, n);
    memcpy(o + at + n, j + at, len - at);
    return o;
}

/* What libjpeg recovers from without losing a pixel is decoded, on every path, and recorded
 * by kind (rf_decoder_recovered): junk bytes between header segments, a comment whose length
 * field says 0 (libjpeg skips its text as junk). The pixels are the clean file's, in full and
 * through a RandomResizedCrop, on the CPU, the kernels and the engines' stand-in. Junk bytes
 * left before a restart marker in the scan, which damaged data leave too, and the data cut
 * short still fail, on every path. */
START_TEST(recovered_warnings_decode_the_clean_pixels)
{
    rf_decoder *d = rf_decoder_create(NULL);
    rf_decoder_set_max_scale_denom(d, 1);
    size_t len, rlen;
    uint8_t *j = make_jpeg(120, 80, RGB420, 4, &len);
    uint8_t *r = with_restarts(j, len, 1, &rlen);
    uint32_t w, h, w2, h2;
    uint8_t *clean = NULL, *full = NULL;
    rf_err err = {0};
    ck_assert_int_eq(rf_decode_full(d, j, len, &clean, &w, &h, &err), 0);
    ck_assert_uint_eq(rf_decoder_recovered(d), 0);
    /* the first RST marker after the scan begins: junk goes before it */
    size_t sos = last_sos(r, rlen), rst = sos + 20;
    while (!(r[rst] == 0xFF && r[rst + 1] >= 0xD0 && r[rst + 1] <= 0xD7))
        rst++;
    struct {
        const char *name;
        uint8_t *data;
        size_t len;
    } cases[] = {
        {"junk after SOI", with_inserted(j, len, 2, "\x12\x34", 2), len + 2},
        {"comment of length 0", with_inserted(j, len, 2, "\xff\xfe\x00\x00a note", 10),
         len + 10},
    };
    size_t cap = 1u << 21;
    uint8_t *pkt = malloc(cap), *scratch = malloc(RF_GJ_SCRATCH);
    uint8_t *oa = malloc(64 * 64 * 3), *ob = malloc(64 * 64 * 3), *og = malloc(64 * 64 * 3);
    test_place pl = {pkt, og, cap};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        ck_assert_msg(rf_decode_full(d, cases[c].data, cases[c].len, &full, &w2, &h2, &err) == 0,
                      "%s: %s", cases[c].name, err.msg);
        ck_assert_msg(rf_decoder_recovered(d) == 1u << RF_RECOVERED_HEADER_BYTES,
                      "%s: recovered %#x", cases[c].name, rf_decoder_recovered(d));
        ck_assert_int_eq(memcmp(full, clean, (size_t)w * h * 3), 0);
        free(full);
        full = NULL;
        for (uint64_t seed = 0; seed < 6; seed++) {
            rf_transform tr = random_t(64);
            ck_assert_int_eq(rf_decode_transform(d, j, len, &tr, seed, ob, NULL, &err), 0);
            ck_assert_int_eq(rf_decode_transform(d, cases[c].data, cases[c].len, &tr, seed, oa,
                                                 NULL, &err), 0);
            ck_assert_msg(memcmp(oa, ob, 64 * 64 * 3) == 0, "%s seed %llu: CPU pixels differ",
                          cases[c].name, (unsigned long long)seed);
            for (int engine = 0; engine < 2; engine++) {
                uint32_t bytes = 0, bi = 0;
                ck_assert_int_eq(rf_decode_packet(d, cases[c].data, cases[c].len, &tr, NULL, seed,
                                                  engine, place_fixed, &pl, &bytes, NULL, &err),
                                 0);
                if (bytes) {
                    ck_assert(!engine || rf_decode_planes(d, pkt, scratch, &err) == 0);
                    ck_assert_int_eq(RF_GJ_FAILURE(rf_gj_decode_host(pkt, scratch, og, &bi)), 0);
                }
                ck_assert_msg(memcmp(og, ob, 64 * 64 * 3) == 0, "%s seed %llu engine %d: GPU "
                              "path's pixels differ", cases[c].name, (unsigned long long)seed,
                              engine);
            }
        }
        free(cases[c].data);
    }
    /* junk before RST0: corrupt on every path, for a crop that reads that interval */
    uint8_t *junk = with_inserted(r, rlen, rst, "\x55\x66\x77", 3);
    ck_assert_int_eq(rf_decode_full(d, junk, rlen + 3, &full, &w2, &h2, &err), RF_EDECODE);
    ck_assert_msg(strstr(err.msg, "extraneous") != NULL, "msg: %s", err.msg);
    rf_transform whole = {.crop = RF_CROP_CENTER, .height = 64, .width = 96,
                          .resize_shorter = 64, .layout = RF_LAYOUT_NHWC, .flip_prob = -1};
    uint8_t *ow = malloc(64 * 96 * 3);
    test_place wpl = {pkt, ow, cap};
    ck_assert_int_eq(rf_decode_transform(d, junk, rlen + 3, &whole, 0, ow, NULL, &err),
                     RF_EDECODE);
    ck_assert(gpu_verdict(d, junk, rlen + 3, &whole, 0, 0, &wpl, scratch));
    ck_assert(gpu_verdict(d, junk, rlen + 3, &whole, 0, 1, &wpl, scratch));
    free(junk), free(ow);
    /* premature end costs pixels: still an error */
    uint8_t *cut = malloc(len);
    memcpy(cut, j, len / 2);
    cut[len / 2] = 0xFF, cut[len / 2 + 1] = 0xD9;
    ck_assert_int_eq(rf_decode_full(d, cut, len / 2 + 2, &full, &w2, &h2, &err), RF_EDECODE);
    ck_assert_ptr_null(full);
    ck_assert_msg(strstr(err.msg, "Corrupt JPEG data") != NULL, "msg: %s", err.msg);
    assert_good_decode(d);
    free(cut), free(pkt), free(scratch), free(oa), free(ob), free(og);
    free(clean), free(r), free(j);
    rf_decoder_destroy(d);
}
END_TEST

/* Damage in a restart-marked file: a truncation anywhere, or a renumbered marker, is an error
 * (or, where the damage lies outside what the crop needs, a correct decode) - never a crash or
 * a region built from the wrong bytes. */
START_TEST(region_decode_damage)
{
    size_t len, tlen;
    uint8_t *j = make_jpeg(407, 351, RGB420, 9, &len);
    uint8_t *t = with_restarts(j, len, 1, &tlen);
    rf_decoder *a = rf_decoder_create(NULL), *b = rf_decoder_create(NULL);
    rf_decoder_set_flags(b, RF_DECODE_NO_REGION);
    uint8_t *oa = malloc(64 * 64 * 3), *ob = malloc(64 * 64 * 3);
    rf_transform tr = random_t(64);
    for (size_t cut = 0; cut < tlen; cut += 97) {
        for (uint64_t seed = 0; seed < 3; seed++) {
            rf_err ea = {0}, eb = {0};
            int ra = rf_decode_transform(a, t, cut, &tr, seed, oa, NULL, &ea);
            int rb = rf_decode_transform(b, t, cut, &tr, seed, ob, NULL, &eb);
            ck_assert(ra == 0 || ra == RF_EDECODE);
            if (ra == 0 && rb == 0)
                ck_assert_int_eq(memcmp(oa, ob, 64 * 64 * 3), 0);
            if (ra)
                ck_assert_msg(ea.msg[0] != 0, "error without a message");
        }
    }
    /* Renumber every RST marker to RST7: the marker check that every decode runs names the
     * first marker out of sequence, whatever the crop. */
    uint8_t *bad = malloc(tlen);
    memcpy(bad, t, tlen);
    int seen = 0;
    for (size_t i = 0; i + 1 < tlen; i++)
        if (bad[i] == 0xFF && bad[i + 1] >= 0xD0 && bad[i + 1] <= 0xD6)
            bad[i + 1] = 0xD7, seen++;
    ck_assert_int_gt(seen, 10);
    rf_err e = {0};
    rf_decode_info info;
    for (uint64_t seed = 0; seed < 8; seed++) {
        ck_assert_int_eq(rf_decode_transform(a, bad, tlen, &tr, seed, oa, &info, &e), RF_EDECODE);
        ck_assert_msg(strstr(e.msg, "restart marker RST7 at byte") &&
                      strstr(e.msg, "where RST0 was due"), "%s", e.msg);
    }
    /* Direct misuse of the region builder: intervals that do not divide the row. */
    rf_region_buf rb = {0};
    rf_jpeg_geom g = {407, 351, 16, 16, 3};
    ck_assert_int_eq(rf_jpeg_region(t, tlen, &g, 0, 3, 0, 2, &rb), 1); /* 26 % 3 != 0 */
    g.restart = 1;
    ck_assert_int_eq(rf_jpeg_region(t, tlen, &g, 3, 2, 0, 2, &rb), 1);  /* empty */
    ck_assert_int_eq(rf_jpeg_region(t, tlen, &g, 0, 27, 0, 2, &rb), 1); /* past the row */
    ck_assert_int_eq(rf_jpeg_region(t, tlen, &g, 2, 5, 3, 6, &rb), 0);
    uint32_t w, h;
    uint8_t *reg = ref_decode(rb.jpeg, rb.len, &w, &h);
    ck_assert_uint_eq(w, 48);
    ck_assert_uint_eq(h, 48);
    free(reg);
    rf_region_buf_free(&rb);
    free(bad), free(oa), free(ob), free(t), free(j);
    rf_decoder_destroy(a), rf_decoder_destroy(b);
}
END_TEST

/* ---- every image decodes on its own: tables, markers, the whole file's structure ---------- */

/* The three ways into the decoder (CPU transform, GPU packet, full decode) on one file. */
static int decode_each_way(rf_decoder *d, const uint8_t *j, size_t len, uint8_t *out,
                           rf_err *e)
{
    rf_transform t = random_t(64);
    int rc = rf_decode_transform(d, j, len, &t, 3, out, NULL, e);
    uint8_t px[64 * 64 * 3], *full = NULL;
    test_place pl = {.px = px, .pkt = malloc(RF_GJ_SCRATCH), .cap = RF_GJ_SCRATCH};
    uint32_t bytes = 0, w, h;
    rf_err e2 = {0}, e3 = {0};
    int rc2 = rf_decode_packet(d, j, len, &t, NULL, 3, 0, place_fixed, &pl, &bytes, NULL, &e2);
    int rc3 = rf_decode_full(d, j, len, &full, &w, &h, &e3);
    ck_assert_int_eq(rc, rc2);
    ck_assert_int_eq(rc, rc3);
    if (rc)
        ck_assert_str_eq(e->msg, e3.msg);
    free(pl.pkt), free(full);
    return rc;
}

/* libjpeg keeps tables in a reused decompressor; ours must not: a file without DQT is refused
 * whatever the thread decoded before, and one without DHT decodes with the standard tables
 * (as djpeg does), not with the previous image's. */
START_TEST(tables_are_per_image)
{
    size_t la, lb, lc;
    uint8_t *a = make_jpeg(203, 151, RGB420, 1, &la);
    uint8_t *b = make_jpeg(203, 151, (enc_opts){3, 40, 0, 1}, 2, &lb);
    uint8_t *ao = with_restarts(a, la, 3, &lc); /* optimized Huffman tables */
    uint8_t out[64 * 64 * 3], ref[64 * 64 * 3];
    rf_decoder *d = rf_decoder_create(NULL), *fresh = rf_decoder_create(NULL);
    rf_err e = {0};
    size_t lbq = lb;
    uint8_t *bq = malloc(lb);
    memcpy(bq, b, lb);
    rf_test_jpeg_strip(bq, &lbq, 0xDB);
    ck_assert_uint_lt(lbq, lb);
    for (int warm = 0; warm < 2; warm++) {
        if (warm)
            ck_assert_int_eq(decode_each_way(d, a, la, out, &e), 0);
        ck_assert_int_eq(decode_each_way(d, bq, lbq, out, &e), RF_EDECODE);
        ck_assert_msg(strstr(e.msg, "Quantization table 0x00 was not defined"), "%s", e.msg);
    }
    /* b uses the standard Huffman tables (libjpeg's default): without its DHT it is the same
     * image, whatever the decoder saw before (here: a's optimized tables) */
    size_t lbh = lb;
    uint8_t *bh = malloc(lb);
    memcpy(bh, b, lb);
    rf_test_jpeg_strip(bh, &lbh, 0xC4);
    ck_assert_uint_lt(lbh, lb);
    rf_transform t = random_t(64);
    ck_assert_int_eq(rf_decode_transform(fresh, b, lb, &t, 3, ref, NULL, &e), 0);
    ck_assert_int_eq(decode_each_way(d, ao, lc, out, &e), 0);
    ck_assert_msg(decode_each_way(d, bh, lbh, out, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(memcmp(out, ref, sizeof out), 0);
    /* the optimized file without its DHT: whatever libjpeg makes of it with the standard tables,
     * the same after any earlier image */
    size_t lah = lc;
    uint8_t *ah = malloc(lc), out2[64 * 64 * 3];
    memcpy(ah, ao, lc);
    rf_test_jpeg_strip(ah, &lah, 0xC4);
    rf_err e2 = {0};
    int r1 = rf_decode_transform(fresh, ah, lah, &t, 3, out2, NULL, &e2);
    ck_assert_int_eq(decode_each_way(d, ao, lc, out, &e), 0);
    ck_assert_int_eq(rf_decode_transform(d, ah, lah, &t, 3, out, NULL, &e), r1);
    if (r1 == 0)
        ck_assert_int_eq(memcmp(out, out2, sizeof out), 0);
    else
        ck_assert_str_eq(e.msg, e2.msg);
    free(a), free(b), free(ao), free(bq), free(bh), free(ah);
    rf_decoder_destroy(d), rf_decoder_destroy(fresh);
}
END_TEST

/* Damage the crop never decodes still fails every decode, with or without restart markers;
 * a missing EOI too; bytes after the EOI (camera trailers) are ignored. */
START_TEST(marker_damage_found_whatever_the_crop)
{
    size_t len, tlen;
    uint8_t *j = make_jpeg(407, 351, RGB420, 5, &len);
    uint8_t *t = with_restarts(j, len, 1, &tlen);
    rf_decoder *d = rf_decoder_create(NULL);
    rf_transform tr = random_t(64);
    uint8_t out[64 * 64 * 3], ref[64 * 64 * 3];
    for (int r = 0; r < 2; r++) {
        const uint8_t *src = r ? t : j;
        size_t n = r ? tlen : len;
        uint8_t *bad = malloc(n + 300);
        memcpy(bad, src, n);
        size_t p = n * 19 / 20; /* in the bottom rows */
        while (bad[p - 1] == 0xFF || bad[p] == 0xFF || bad[p + 1] == 0xFF)
            p++;
        bad[p] = 0xFF, bad[p + 1] = 0x99;
        char want[64];
        snprintf(want, sizeof want, "marker 0xFF99 at byte %zu", p);
        for (uint64_t seed = 0; seed < 24; seed++) {
            rf_err e = {0};
            ck_assert_int_eq(rf_decode_transform(d, bad, n, &tr, seed, out, NULL, &e),
                             RF_EDECODE);
            ck_assert_msg(strstr(e.msg, want), "seed %llu: %s", (unsigned long long)seed, e.msg);
        }
        /* no EOI: cut the last two bytes */
        memcpy(bad, src, n);
        for (uint64_t seed = 0; seed < 24; seed++) {
            rf_err e = {0};
            ck_assert_int_eq(rf_decode_transform(d, bad, n - 2, &tr, seed, out, NULL, &e),
                             RF_EDECODE);
            ck_assert_msg(strstr(e.msg, "Premature end of JPEG file"), "%s", e.msg);
        }
        /* a trailer after EOI (300 bytes holding markers, as camera trailers do) */
        for (size_t k = 0; k < 300; k++)
            bad[n + k] = (uint8_t)(k % 3 ? 0xFF : 0xE1 + k);
        for (uint64_t seed = 0; seed < 8; seed++) {
            rf_err e = {0};
            ck_assert_int_eq(rf_decode_transform(d, src, n, &tr, seed, ref, NULL, &e), 0);
            ck_assert_msg(rf_decode_transform(d, bad, n + 300, &tr, seed, out, NULL, &e) == 0,
                          "%s", e.msg);
            ck_assert_int_eq(memcmp(out, ref, sizeof out), 0);
        }
        free(bad);
    }
    free(j), free(t);
    rf_decoder_destroy(d);
}
END_TEST

/* ---- plain packets (files without restart markers) --------------------------------------- */

/* Decode j with the GPU path's plain packet through the host driver and with the CPU path at
 * full scale (decoder a, DCT scaling off) for seeds [0, seeds): every sample must become a
 * plain packet and give the CPU path's bytes. Returns how many segments start inside a byte
 * that was stuffed in the file (0xFF in the destuffed data), the case destuffing must get
 * right. */
static uint32_t check_plain(rf_decoder *a, const uint8_t *j, size_t len, uint64_t seeds,
                            const char *what)
{
    size_t cap = 4u << 20;
    uint8_t *pkt = malloc(cap), *scratch = malloc(RF_GJ_SCRATCH);
    uint8_t *oa = malloc(224 * 224 * 3), *og = malloc(224 * 224 * 3);
    test_place pl = {pkt, og, cap};
    uint32_t stuffed = 0;
    for (uint64_t seed = 0; seed < seeds; seed++) {
        rf_transform tr = mixed_t(seed);
        rf_decode_info ia, ig;
        rf_err e = {0};
        uint32_t bytes = 0, bad = 0;
        ck_assert_msg(rf_decode_packet(a, j, len, &tr, NULL, seed, 0, place_fixed, &pl, &bytes, &ig,
                                       &e) == 0, "%s: %s", what, e.msg);
        const rf_gj_packet *p = (const rf_gj_packet *)pkt;
        ck_assert_msg(bytes > 0 && p->plain == 1, "%s seed %llu: no plain packet", what,
                      (unsigned long long)seed);
        const rf_gj_seg *sg = (const rf_gj_seg *)(pkt + p->off_span);
        for (uint32_t k = 0; k < p->nintervals; k++) { /* a stuffed byte at the start, or next */
            const uint8_t *at = pkt + p->off_data + sg[k].bit / 8;
            stuffed += at[0] == 0xFF || (sg[k].bit / 8 + 1 < p->data_bytes && at[1] == 0xFF);
        }

        int st = rf_gj_decode_host(pkt, scratch, og, &bad);
        ck_assert_msg(st == 0, "%s: %s in segment %u", what, rf_gj_status_text(st), bad);
        ck_assert_msg(rf_decode_transform(a, j, len, &tr, seed, oa, &ia, &e) == 0, "%s", e.msg);
        size_t n = (size_t)tr.height * tr.width * 3, i = 0;
        while (i < n && oa[i] == og[i])
            i++;
        ck_assert_msg(i == n, "%s seed %llu: byte %zu is %u from the plain packet, %u on the "
                      "CPU path (crop %u,%u %ux%u)", what, (unsigned long long)seed, i, og[i],
                      oa[i], ia.crop_x, ia.crop_y, ia.crop_w, ia.crop_h);
        ck_assert_uint_eq(ig.crop_x, ia.crop_x);
        ck_assert_uint_eq(ig.flipped, ia.flipped);
    }
    free(pkt), free(scratch), free(oa), free(og);
    return stuffed;
}

/* j with `n` trailer bytes after its EOI (a camera's or an editor's), malloc'ed. */
static uint8_t *with_trailer(const uint8_t *j, size_t len, size_t n, size_t *out_len)
{
    uint8_t *t = malloc(len + n);
    memcpy(t, j, len);
    for (size_t i = 0; i < n; i++)
        t[len + i] = (uint8_t)(i * 37 + 1);
    *out_len = len + n;
    return t;
}

/* Files without restart markers take the GPU path as plain packets (the walker's segments)
 * and decode byte-for-byte to the CPU path's full-scale pixels: odd sizes, every sampling the
 * kernels take, standard and optimized Huffman tables, a trailer after the EOI, RandomResizedCrop
 * and center crops, NHWC and NCHW, flips, non-square outputs. */
START_TEST(plain_packet_matches_cpu_full_scale)
{
    static const shape PS[] = {
        {407, 351, {3, 90, 0, 1}}, {500, 375, {3, 90, 0, 0}}, {97, 1000, {3, 85, 0, 1}},
        {1000, 61, {1, 90, 0, 0}}, {333, 501, {3, 90, 0, 2}}, {801, 600, {3, 75, 0, 1}},
        {61, 47, {3, 90, 0, 1}},   {5, 7, {3, 90, 0, 1}},    {211, 143, {1, 95, 0, 0}},
        {259, 187, {3, 95, 0, 2}},
    };
    rf_decoder *a = rf_decoder_create(NULL);
    rf_decoder_set_max_scale_denom(a, 1);
    for (size_t s = 0; s < sizeof PS / sizeof PS[0]; s++) {
        size_t len, tlen;
        int coding = s % 2 ? ENC_OPTIMIZE : ENC_STANDARD;
        uint8_t *j = make_jpeg_ex(PS[s].w, PS[s].h, PS[s].o, coding, 40 + s, &len);
        uint8_t *t = with_trailer(j, len, s % 3 == 0 ? 700 : 0, &tlen);
        char what[64];
        snprintf(what, sizeof what, "%ux%u shape %zu coding %d", PS[s].w, PS[s].h, s, coding);
        check_plain(a, t, tlen, 40, what);
        free(t), free(j);
    }
    rf_decoder_destroy(a);
}
END_TEST

typedef struct plain_photos {
    rf_decoder *dec;
    uint32_t stuffed;
} plain_photos;

static void plain_photo(void *ctx, const uint8_t *j, size_t n, enc_opts o, const char *what)
{
    (void)o;
    plain_photos *pp = ctx;
    pp->stuffed += check_plain(pp->dec, j, n, 24, what);
}

/* photo_crops' real photographs: every plain packet gives the CPU path's bytes, over 24 crops
 * each. Their data hold stuffed 0xFF bytes, and some segments start inside one or just before
 * one. */
START_TEST(plain_packet_photos)
{
    plain_photos pp = {rf_decoder_create(NULL), 0};
    rf_decoder_set_max_scale_denom(pp.dec, 1);
    uint32_t files = photo_crops("plain_packet_photos", plain_photo, &pp);
    if (files) {
        ck_assert_uint_ge(files, 2);
        ck_assert_msg(pp.stuffed > 0, "no segment started at a stuffed byte");
    }
    rf_decoder_destroy(pp.dec);
}
END_TEST

/* The walker caches its AC tables per decoder (8, least recently used replaced): with files of
 * standard tables between files whose optimized tables are each their own (20 distinct AC
 * tables in all, more than the cache holds), in two rounds, every plain packet still gives
 * the CPU path's bytes, so no file is walked with another's table. */
START_TEST(plain_packet_table_cache)
{
    enum { OPT = 10 };
    rf_decoder *a = rf_decoder_create(NULL);
    rf_decoder_set_max_scale_denom(a, 1);
    size_t slen, olen[OPT];
    uint8_t *std = make_jpeg_ex(353, 271, (enc_opts){3, 90, 0, 1}, ENC_STANDARD, 7, &slen);
    uint8_t *opt[OPT];
    for (int i = 0; i < OPT; i++)
        opt[i] = make_jpeg_ex(200 + 37 * (uint32_t)i, 161 + 23 * (uint32_t)i,
                              (enc_opts){3, 75 + 2 * i, 0, i % 3}, ENC_OPTIMIZE, 100 + (uint64_t)i,
                              &olen[i]);
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < OPT; i++) {
            char what[64];
            snprintf(what, sizeof what, "round %d optimized file %d", round, i);
            check_plain(a, opt[i], olen[i], 3, what);
            if (i % 2)
                check_plain(a, std, slen, 2, "the standard-table file");
        }
    for (int i = 0; i < OPT; i++)
        free(opt[i]);
    free(std);
    rf_decoder_destroy(a);
}
END_TEST

/* What the kernels do not take stays on the CPU, decoded as rf_decode_transform does:
 * progressive, arithmetic-coded, CMYK (and a restart interval that does not divide the row,
 * whose files the walker does not read: it knows no markers). */
START_TEST(plain_packet_not_eligible)
{
    static const shape NS[] = {
        {300, 200, {3, 85, 1, 1}}, {300, 200, {3, 85, 0, 1}}, {300, 200, {4, 90, 0, 0}},
    };
    rf_decoder *a = rf_decoder_create(NULL), *b = rf_decoder_create(NULL);
    size_t cap = 1u << 20;
    uint8_t *pkt = malloc(cap), *oa = malloc(224 * 224 * 3), *og = malloc(224 * 224 * 3);
    test_place pl = {pkt, og, cap};
    for (size_t s = 0; s < 4; s++) {
        size_t len, tlen;
        uint8_t *j = make_jpeg_ex(s < 3 ? NS[s].w : 301, 200, s < 3 ? NS[s].o : RGB420,
                                  s == 1 ? ENC_ARITH : ENC_STANDARD, s, &len);
        uint8_t *t = s < 3 ? j : with_restarts(j, len, 3, &tlen); /* 19 MCUs a row */
        if (s < 3)
            tlen = len;
        for (uint64_t seed = 0; seed < 8; seed++) {
            rf_transform tr = mixed_t(seed);
            rf_err e = {0};
            uint32_t bytes = 7;
            ck_assert_msg(rf_decode_packet(a, t, tlen, &tr, NULL, seed, 0, place_fixed, &pl, &bytes,
                                           NULL, &e) == 0, "%s", e.msg);
            ck_assert_msg(bytes == 0, "shape %zu: packed", s);
            ck_assert_int_eq(rf_decode_transform(b, t, tlen, &tr, seed, oa, NULL, &e), 0);
            ck_assert_int_eq(memcmp(oa, og, (size_t)tr.height * tr.width * 3), 0);
        }
        if (t != j)
            free(t);
        free(j);
    }
    free(pkt), free(oa), free(og);
    rf_decoder_destroy(a), rf_decoder_destroy(b);
}
END_TEST

/* Damaged plain files, three ways in turn: a flipped bit, a run of one bits (stuffed 0xFF
 * bytes: no Huffman code is all ones) and the data ended early by an EOI. A bad code or data
 * that end before the region's last MCU make the walker decline, and the CPU path then fails
 * with its own error (class and message those of a CPU-only decode); a file cut short without
 * its EOI fails before any packet. Never a packet of wrong bits: when the walker takes a
 * damaged file its packet decodes, and mostly to the CPU path's pixels (see gpu_packet_damage
 * for the SIMD IDCT's saturation on absurd coefficients). */
START_TEST(plain_packet_damage)
{
    size_t len;
    uint8_t *j = make_jpeg(407, 351, RGB420, 11, &len);
    rf_decoder *a = rf_decoder_create(NULL), *c = rf_decoder_create(NULL);
    rf_decoder_set_max_scale_denom(a, 1), rf_decoder_set_max_scale_denom(c, 1);
    size_t cap = 1u << 20, sos = last_sos(j, len);
    uint8_t *pkt = malloc(cap), *scratch = malloc(RF_GJ_SCRATCH), *bad = malloc(len);
    uint8_t *oa = malloc(64 * 64 * 3), *og = malloc(64 * 64 * 3);
    rf_transform tr = random_t(64);
    test_place pl = {pkt, og, cap};
    uint32_t declined = 0, packed = 0, same = 0;
    uint64_t rng = 5;
    for (int trial = 0; trial < 300; trial++) {
        size_t at = damage_at(&rng, j, len, sos, bad, 10), blen = len;
        if (!at)
            continue;
        if (trial % 3 == 0)
            bad[at] ^= (uint8_t)(1u << (lcg(&rng) % 8));
        else if (trial % 3 == 1)
            memcpy(bad + at, "\xFF\x00\xFF\x00\xFF\x00", 6);
        else
            bad[at] = 0xFF, bad[at + 1] = 0xD9, blen = at + 2;
        if (bad[at] == 0xFF && trial % 3 == 0)
            continue;
        uint32_t bytes = 0, bi = 0;
        rf_err e = {0}, ec = {0};
        uint64_t seed = (uint64_t)trial;
        int rp = rf_decode_packet(a, bad, blen, &tr, NULL, seed, 0, place_fixed, &pl, &bytes, NULL,
                                  &e);
        int rc = rf_decode_transform(c, bad, blen, &tr, seed, oa, NULL, &ec);
        if (rp) { /* declined, then the CPU's own error */
            ck_assert_int_eq(rp, rc);
            ck_assert_str_eq(e.msg, ec.msg);
            ck_assert_int_eq(rp, RF_EDECODE);
            declined++;
        } else if (bytes) {
            ck_assert_int_eq(rf_gj_decode_host(pkt, scratch, og, &bi), 0);
            same += rc == 0 && memcmp(oa, og, 64 * 64 * 3) == 0;
            packed++;
        } else { /* declined, and the CPU decoded it */
            ck_assert_int_eq(rc, 0);
            ck_assert_int_eq(memcmp(oa, og, 64 * 64 * 3), 0);
        }
    }
    ck_assert_uint_gt(declined, 30);
    ck_assert_uint_gt(packed, 30);
    ck_assert_msg(same * 10 >= packed * 7, "%u of %u damaged packets match", same, packed);
    /* cut short: the marker check refuses it before a packet is made, as on the CPU path */
    memcpy(bad, j, len);
    memset(bad + len / 2, 0, len - len / 2);
    rf_err e1 = {0}, e2 = {0};
    uint32_t bytes = 7;
    ck_assert_int_eq(rf_decode_packet(a, bad, len, &tr, NULL, 1, 0, place_fixed, &pl, &bytes, NULL,
                                      &e1), RF_EDECODE);
    ck_assert_int_eq(rf_decode_transform(c, bad, len, &tr, 1, oa, NULL, &e2), RF_EDECODE);
    ck_assert_str_eq(e1.msg, e2.msg);
    free(pkt), free(scratch), free(bad), free(oa), free(og), free(j);
    rf_decoder_destroy(a), rf_decoder_destroy(c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("decode");
    TCase *tc = tcase_create("decode");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, full_decode_matches_libjpeg);
    tcase_add_test(tc, sample_geometry_maps_points_and_pixels);
    tcase_add_test(tc, resize_full_scale_matches_reference);
    tcase_add_test(tc, resize_dct_scaled_matches_reference);
    tcase_add_test(tc, layouts_and_flip);
    tcase_add_test(tc, resize_simd_matches_scalar);
    tcase_add_test(tc, random_crop_follows_torchvision);
    tcase_add_test(tc, random_crop_fallback);
    tcase_add_test(tc, center_crop_geometry);
    tcase_add_test(tc, non_square_crop_geometry);
    tcase_add_test(tc, non_square_resize_matches_reference);
    tcase_add_test(tc, errors_truncated_and_not_jpeg);
    tcase_add_test(tc, errors_limits);
    tcase_add_test(tc, recovered_warnings_decode_the_clean_pixels);
    tcase_add_test(tc, cmyk_and_gray_decode);
    tcase_add_test(tc, restart_transcode_is_lossless);
    tcase_add_test(tc, region_decode_matches_whole_decode);
    tcase_add_test(tc, region_decode_damage);
    tcase_add_test(tc, gpu_packet_matches_cpu_full_scale);
    tcase_add_test(tc, placement_without_gpu);
    tcase_add_test(tc, gpu_packet_damage);
    tcase_add_test(tc, engine_verdicts_equal_the_kernels);
    tcase_add_test(tc, rows_read_are_libjpegs);
    tcase_add_test(tc, engine_packet_matches_cpu_full_scale);
    tcase_add_test(tc, packets_leave_dct_scalable_crops_to_the_cpu);
    tcase_add_test(tc, tables_are_per_image);
    tcase_add_test(tc, marker_damage_found_whatever_the_crop);
    tcase_add_test(tc, plain_packet_matches_cpu_full_scale);
    tcase_add_test(tc, plain_packet_photos);
    tcase_add_test(tc, plain_packet_table_cache);
    tcase_add_test(tc, plain_packet_not_eligible);
    tcase_add_test(tc, plain_packet_damage);
    suite_add_tcase(s, tc);
    return rf_test_run_suite(s);
}
