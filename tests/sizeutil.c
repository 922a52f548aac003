/* sizeutil.c — sizeutil.h's references, each from its definition (Ultralytics' LetterBox,
 * torchvision's Resize + center_crop), never from the library's crop code; only the resampler
 * is the library's, as every pixel test here uses it. */
#include "sizeutil.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "decode/resize.h"
#include "synth.h"

/* Python's round(): halves to even. */
static double py_round(double x)
{
    double r = floor(x + 0.5);
    if (r - x == 0.5 && fmod(r, 2.0) != 0)
        r -= 1;
    return r;
}

/* Ultralytics LetterBox(new_shape=(oh, ow), auto=False, scaleup=True, center=True): ratio r,
 * new size round(w * r) x round(h * r) (at least 1: a 1 x 1000 image in 40 rows keeps a
 * column), left/top padding round(dw - 0.1) of half the slack dw. */
rect sz_letterbox_rect(uint32_t W, uint32_t H, uint32_t oh, uint32_t ow)
{
    double r = fmin((double)oh / H, (double)ow / W);
    rect q;
    q.w = (uint32_t)fmax(py_round(W * r), 1), q.h = (uint32_t)fmax(py_round(H * r), 1);
    q.x = (uint32_t)py_round((ow - q.w) / 2.0 - 0.1);
    q.y = (uint32_t)py_round((oh - q.h) / 2.0 - 0.1);
    return q;
}

/* The whole W x H image resized to nw x nh NHWC with the library's filter. */
static void resize_whole(const uint8_t *rgb, uint32_t W, uint32_t H, uint32_t nw, uint32_t nh,
                         uint8_t *out)
{
    rf_axis h = {0}, v = {0};
    ck_assert_int_eq(rf_axis_plan(&h, 0, W, 0, (int32_t)W, 0, nw, 0), 0);
    ck_assert_int_eq(rf_axis_plan(&v, 0, H, 0, (int32_t)H, 0, nh, 0), 0);
    size_t n = (size_t)W * 3;
    uint8_t *vrow = calloc(n + RF_RESIZE_SRC_PAD, 1);
    int32_t *acc = malloc(n * sizeof *acc);
    const uint8_t **rows = malloc(v.taps * sizeof *rows);
    for (uint32_t i = 0; i < nh; i++) {
        for (uint32_t k = 0; k < v.taps; k++) /* zero-weight taps past the image */
            rows[k] = rgb + (size_t)RF_MIN(v.start[i] + (int32_t)k, (int32_t)H - 1) * n;
        rf_resize_row_v(&v, i, rows, n, acc, vrow);
        rf_resize_row_h(&h, vrow, out + (size_t)i * nw * 3);
    }
    free(vrow), free(acc), free(rows);
    rf_axis_free(&h), rf_axis_free(&v);
}

/* One axis of torchvision's center_crop (pad first, then crop at round((n - c) / 2)): the
 * resized image's index at output o, or -1 for padding. */
static int64_t center_src(uint32_t c, uint32_t n, uint32_t o)
{
    if (c > n) {
        int64_t s = (int64_t)o - (c - n) / 2;
        return s < (int64_t)n ? s : -1;
    }
    return o + (int64_t)py_round((n - c) / 2.0);
}

void sz_reference(const uint8_t *rgb, uint32_t W, uint32_t H, const rf_transform *t, int flip,
                  uint8_t *out, rect *r)
{
    uint32_t ow = t->width, oh = t->height, nw, nh;
    if (t->crop == RF_CROP_NATIVE) { /* its own size, or letterboxed down; no padding */
        *r = W <= ow && H <= oh ? (rect){0, 0, W, H} : sz_letterbox_rect(W, H, oh, ow);
        r->x = r->y = 0;
        ow = r->w, oh = r->h;
        nw = r->w, nh = r->h;
    } else if (t->crop == RF_CROP_LETTERBOX) {
        *r = sz_letterbox_rect(W, H, oh, ow);
        nw = r->w, nh = r->h;
    } else { /* torchvision Resize(R): the shorter side to R, the longer truncated */
        uint32_t R = t->resize_shorter;
        nw = W <= H ? R : (uint32_t)((uint64_t)R * W / H);
        nh = W <= H ? (uint32_t)((uint64_t)R * H / W) : R;
        nw = RF_MAX(nw, 1), nh = RF_MAX(nh, 1);
        r->w = RF_MIN(nw, ow), r->h = RF_MIN(nh, oh);
        r->x = ow > nw ? (ow - nw) / 2 : 0, r->y = oh > nh ? (oh - nh) / 2 : 0;
    }
    uint8_t *img = malloc((size_t)nw * nh * 3);
    resize_whole(rgb, W, H, nw, nh, img);
    size_t plane = (size_t)oh * ow;
    for (uint32_t y = 0; y < oh; y++)
        for (uint32_t x = 0; x < ow; x++) {
            uint32_t ux = flip ? ow - 1 - x : x; /* the unflipped output's column */
            int64_t sx, sy;
            if (t->crop == RF_CROP_LETTERBOX || t->crop == RF_CROP_NATIVE) {
                sx = ux >= r->x && ux < r->x + r->w ? (int64_t)(ux - r->x) : -1;
                sy = y >= r->y && y < r->y + r->h ? (int64_t)(y - r->y) : -1;
            } else {
                sx = center_src(ow, nw, ux), sy = center_src(oh, nh, y);
            }
            for (int k = 0; k < 3; k++) {
                uint8_t px = sx < 0 || sy < 0 ? t->pad[k]
                                              : img[((size_t)sy * nw + (size_t)sx) * 3 + k];
                size_t at = (size_t)y * ow + x;
                out[t->layout == RF_LAYOUT_NCHW ? k * plane + at : 3 * at + k] = px;
            }
        }
    free(img);
}

rf_transform sz_transform(uint32_t crop, uint32_t oh, uint32_t ow, uint32_t layout)
{
    return (rf_transform){.crop = crop, .height = oh, .width = ow, .layout = layout,
                          .resize_shorter = RF_MAX(oh, ow) * 256 / 224, .flip_prob = 0.5f,
                          .pad = {114, 114, 114}};
}

pic sz_make_pic(uint32_t w, uint32_t h, int format, uint64_t seed)
{
    pic p = {.w = w, .h = h};
    p.rgb = malloc((size_t)w * h * 3);
    rf_synth_image(seed, w, h, p.rgb);
    if (format == SZ_PNG)
        ck_assert_int_eq(rf_synth_png(p.rgb, w, h, RF_SYNTH_PNG_RGB8, &p.data, &p.len), 0);
    else if (format == SZ_WEBP)
        ck_assert_int_eq(rf_synth_webp(p.rgb, w, h, -1, &p.data, &p.len), 0);
    if (format == SZ_JPEG) {
        ck_assert_int_eq(rf_synth_jpeg(p.rgb, w, h, 90, 0, &p.data, &p.len), 0);
        rf_decoder *d = rf_decoder_create(NULL);
        rf_err e = {0};
        uint32_t fw, fh;
        free(p.rgb);
        ck_assert_int_eq(rf_decode_full(d, p.data, p.len, &p.rgb, &fw, &fh, &e), 0);
        ck_assert(fw == w && fh == h);
        rf_decoder_destroy(d);
    }
    return p;
}

void sz_free_pic(pic *p) { free(p->data), free(p->rgb); }

