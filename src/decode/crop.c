/* crop.c — which part of an image a sample shows and where it lands: torchvision's
 * RandomResizedCrop and Resize+CenterCrop, drawn from the sample's seed, as a fractional box on
 * the original image resized onto the whole output; a letterbox and torchvision's padded
 * CenterCrop, whose box lands on a rectangle of the output with padding around it. */
#include "decode/decoder.h"

#include <math.h>
#include <string.h>


static void random_box(const rf_transform *t, uint32_t W, uint32_t H, rf_rng *rng, crop_box *b)
{
    double area = (double)W * H, lr0 = log(t->ratio_min), lr1 = log(t->ratio_max);
    for (int attempt = 0; attempt < 10; attempt++) {
        double target = area * (t->scale_min + (t->scale_max - t->scale_min) * rf_rng_unit(rng));
        double ar = exp(lr0 + (lr1 - lr0) * rf_rng_unit(rng));
        int64_t w = rf_py_round(sqrt(target * ar)), h = rf_py_round(sqrt(target / ar));
        if (0 < w && w <= W && 0 < h && h <= H) {
            b->y = (double)rf_rng_below(rng, H - (uint64_t)h + 1);
            b->x = (double)rf_rng_below(rng, W - (uint64_t)w + 1);
            b->w = (double)w, b->h = (double)h;
            return;
        }
    }
    double in_ratio = (double)W / H;
    int64_t w = W, h = H;
    if (in_ratio < t->ratio_min)
        h = rf_py_round(w / (double)t->ratio_min);
    else if (in_ratio > t->ratio_max)
        w = rf_py_round(h * (double)t->ratio_max);
    w = RF_MAX(RF_MIN(w, (int64_t)W), 1), h = RF_MAX(RF_MIN(h, (int64_t)H), 1);
    b->x = (double)((W - w) / 2), b->y = (double)((H - h) / 2);
    b->w = (double)w, b->h = (double)h;
}

/* torchvision's Resize(shorter -> R) of a W x H image: *nw x *nh, the longer side truncated. */
static void resized_size(const rf_transform *t, uint32_t W, uint32_t H, double *nw, double *nh)
{
    uint32_t R = t->resize_shorter ? t->resize_shorter
                                   : RF_MAX(t->height, t->width) * 256 / 224;
    if (W <= H)
        *nw = R, *nh = floor((double)R * H / W);
    else
        *nh = R, *nw = floor((double)R * W / H);
    *nw = RF_MAX(*nw, 1.0), *nh = RF_MAX(*nh, 1.0);
}

/* Resize(shorter -> R) then CenterCrop((height, width)), mapped back onto the original. A crop
 * larger than the resized image (torchvision would pad) is clamped to the image instead, per
 * axis. */
static void center_box(const rf_transform *t, uint32_t W, uint32_t H, crop_box *b)
{
    double nw, nh;
    resized_size(t, W, H, &nw, &nh);
    double cw = RF_MIN((double)t->width, nw), ch = RF_MIN((double)t->height, nh);
    double left = (double)rf_py_round((nw - cw) / 2.0), top = (double)rf_py_round((nh - ch) / 2.0);
    double sx = W / nw, sy = H / nh;
    b->x = left * sx, b->y = top * sy, b->w = cw * sx, b->h = ch * sy;
}

/* Ultralytics' LetterBox (center, scaleup, auto off): r = min(H / h, W / w), the new size
 * round(w * r) x round(h * r) (Python's round, at least 1 pixel), placed at the floor of half
 * the slack on each axis (its round(d - 0.1) for the left and top padding), so an odd slack
 * leaves the extra pixel on the right or bottom. The box is the whole image. */
static void letterbox_box(const rf_transform *t, uint32_t W, uint32_t H, crop_box *b)
{
    double r = fmin((double)t->height / H, (double)t->width / W);
    int64_t nw = rf_py_round(W * r), nh = rf_py_round(H * r);
    nw = RF_MAX(RF_MIN(nw, (int64_t)t->width), 1), nh = RF_MAX(RF_MIN(nh, (int64_t)t->height), 1);
    b->x = 0, b->y = 0, b->w = W, b->h = H;
    b->out_w = (uint32_t)nw, b->out_h = (uint32_t)nh;
    b->out_x = (t->width - b->out_w) / 2, b->out_y = (t->height - b->out_h) / 2;
}

/* One axis of torchvision's center_crop on an image resized to n (of the source's `src`): a
 * crop c larger than n pads (c - n) // 2 before the image and the rest after, the image whole;
 * else the crop starts at round((n - c) / 2) of the resized image. */
static void center_pad_axis(uint32_t c, double n, uint32_t src, double *x, double *w,
                            uint32_t *ox, uint32_t *ow)
{
    if ((double)c > n) {
        *x = 0, *w = src;
        *ow = (uint32_t)n, *ox = (c - *ow) / 2;
        return;
    }
    double s = src / n;
    *x = (double)rf_py_round((n - c) / 2.0) * s, *w = c * s;
    *ox = 0, *ow = c;
}

/* Resize(shorter -> R) then torchvision's CenterCrop((height, width)), zero-padding included,
 * per axis. */
static void center_pad_box(const rf_transform *t, uint32_t W, uint32_t H, crop_box *b)
{
    double nw, nh;
    resized_size(t, W, H, &nw, &nh);
    center_pad_axis(t->width, nw, W, &b->x, &b->w, &b->out_x, &b->out_w);
    center_pad_axis(t->height, nh, H, &b->y, &b->h, &b->out_y, &b->out_h);
}

/* NATIVE: the whole image at its own size, or scaled down as letterbox_box scales it when it
 * is larger than t's height x width; the output is that size, nothing padded. */
static void native_box(const rf_transform *t, uint32_t W, uint32_t H, crop_box *b)
{
    if (W <= t->width && H <= t->height) {
        b->x = 0, b->y = 0, b->w = W, b->h = H;
        b->out_w = W, b->out_h = H;
    } else {
        letterbox_box(t, W, H, b);
    }
    b->out_x = b->out_y = 0;
    b->canvas_w = b->out_w, b->canvas_h = b->out_h;
}

void rf_dec_choose_box(const rf_transform *t, uint32_t W, uint32_t H, uint64_t seed, crop_box *b)
{
    rf_rng rng;
    rf_rng_seed(&rng, seed);
    double p = t->flip_prob;
    b->out_x = b->out_y = 0, b->out_w = b->canvas_w = t->width, b->out_h = b->canvas_h = t->height;
    if (t->crop != RF_CROP_RANDOM) {
        if (t->crop == RF_CROP_NATIVE)
            native_box(t, W, H, b);
        else if (t->crop == RF_CROP_LETTERBOX)
            letterbox_box(t, W, H, b);
        else if (t->crop == RF_CROP_CENTER_PAD)
            center_pad_box(t, W, H, b);
        else
            center_box(t, W, H, b);
        b->clamp_box = 0;
        p = p < 0 ? 0.0 : p;
    } else {
        random_box(t, W, H, &rng, b);
        b->clamp_box = 1;
        p = p < 0 ? 0.5 : p;
    }
    b->flip = p > 0 && rf_rng_unit(&rng) < p;
}

void rf_dec_box(const rf_decoder *d, const rf_transform *t, uint32_t W, uint32_t H,
                uint64_t seed, crop_box *b)
{
    rf_dec_choose_box(t, W, H, seed, b);
    if (d->box_given) { /* where it lands stays the transform's (RANDOM, CENTER: everywhere) */
        b->x = d->given.x, b->y = d->given.y, b->w = d->given.w, b->h = d->given.h;
        b->flip = d->given.flip;
    }
}

void rf_choose_crop(const rf_transform *t, uint32_t width, uint32_t height, uint64_t seed,
                    uint32_t *x, uint32_t *y, uint32_t *w, uint32_t *h, uint32_t *flip)
{
    crop_box b;
    rf_dec_choose_box(t, width, height, seed, &b);
    *x = (uint32_t)rf_py_round(b.x), *y = (uint32_t)rf_py_round(b.y);
    *w = (uint32_t)rf_py_round(b.w), *h = (uint32_t)rf_py_round(b.h);
    *flip = b.flip;
}

void rf_dec_fill_info(uint32_t W, uint32_t H, const crop_box *b, rf_decode_info *info)
{
    if (!info)
        return;
    memset(info, 0, sizeof *info);
    info->width = W, info->height = H;
    info->crop_x = (uint32_t)rf_py_round(b->x), info->crop_y = (uint32_t)rf_py_round(b->y);
    info->crop_w = (uint32_t)rf_py_round(b->w), info->crop_h = (uint32_t)rf_py_round(b->h);
    info->scale_denom = 1;
    info->flipped = b->flip;
    info->out_w = b->canvas_w, info->out_h = b->canvas_h;
    double sx = b->out_w / b->w, sy = b->out_h / b->h;
    info->place[0] = (float)sx, info->place[1] = (float)sy;
    info->place[2] = (float)(b->out_x - b->x * sx), info->place[3] = (float)(b->out_y - b->y * sy);
}

void rf_dec_pad(const rf_transform *t, const crop_box *b, uint8_t *out)
{
    uint32_t W = b->canvas_w, H = b->canvas_h, x0 = rf_dec_out_x(b), x1 = x0 + b->out_w;
    uint32_t y0 = b->out_y, y1 = y0 + b->out_h;
    if (x0 == 0 && y0 == 0 && x1 == W && y1 == H)
        return;
    int nchw = t->layout == RF_LAYOUT_NCHW;
    size_t plane = (size_t)W * H;
    for (uint32_t y = 0; y < H; y++) {
        int inside = y >= y0 && y < y1;
        for (uint32_t x = 0; x < W; x++) {
            if (inside && x == x0) {
                x = x1 - 1;
                continue;
            }
            size_t at = (size_t)y * W + x;
            for (int k = 0; k < 3; k++)
                out[nchw ? k * plane + at : 3 * at + k] = t->pad[k];
        }
    }
}

void rf_sample_geometry(const rf_transform *t, uint32_t width, uint32_t height, uint64_t seed,
                        rf_geometry *g)
{
    crop_box b;
    rf_dec_choose_box(t, width, height, seed, &b);
    memset(g, 0, sizeof *g);
    g->x = b.x, g->y = b.y, g->w = b.w, g->h = b.h;
    g->out_width = b.canvas_w, g->out_height = b.canvas_h;
    /* where the resize puts the pixels (transform.c plan_both, rf_dec_rows): the rectangle
     * mirrored with the whole output when flipped */
    g->out_x = rf_dec_out_x(&b), g->out_y = b.out_y, g->out_w = b.out_w, g->out_h = b.out_h;
    g->flip = b.flip;
}

void rf_geometry_to_output(const rf_geometry *g, double sx, double sy, double *ox, double *oy)
{
    double x = (sx - g->x) * g->out_w / g->w, y = (sy - g->y) * g->out_h / g->h;
    *ox = g->out_x + (g->flip ? g->out_w - x : x);
    *oy = g->out_y + y;
}

void rf_nearest_start(rf_nearest *s, double box, double size, uint32_t n, uint32_t extent)
{
    s->step = ((box + size) - box) / n;
    s->v = box + s->step * 0.5;
    s->extent = extent;
}

uint32_t rf_nearest_next(rf_nearest *s)
{
    double v = s->v;
    s->v += s->step; /* one step at a time: PIL's roundings, not (i + 0.5) x step's */
    return v < 1.0 ? 0 : v >= s->extent ? s->extent - 1 : (uint32_t)v;
}

/* Output o of the walk (o + 1 steps of it): for a single pixel; whole rows and columns walk. */
static uint32_t nearest_src(double box, double size, uint32_t n_out, uint32_t o, uint32_t extent)
{
    rf_nearest s;
    rf_nearest_start(&s, box, size, n_out, extent);
    for (uint32_t i = 0; i < o; i++)
        rf_nearest_next(&s);
    return rf_nearest_next(&s);
}

void rf_geometry_nearest(const rf_geometry *g, uint32_t width, uint32_t height, uint32_t ox,
                         uint32_t oy, uint32_t *sx, uint32_t *sy)
{
    uint32_t x = ox - g->out_x, y = oy - g->out_y;
    *sx = nearest_src(g->x, g->w, g->out_w, g->flip ? g->out_w - 1 - x : x, width);
    *sy = nearest_src(g->y, g->h, g->out_h, y, height);
}

/* ---- multi-crop views: each one's transform and seed (views.c parses them) ---- */

void rf_view_transform(const rf_transform *base, const rf_views *v, uint32_t k, rf_transform *t)
{
    *t = *base;
    t->height = v->height[k], t->width = v->width[k];
    t->scale_min = v->scale_min[k], t->scale_max = v->scale_max[k];
}

uint64_t rf_view_seed(uint64_t seed, uint32_t k)
{
    /* another stream than the sample's own seed, so view 0 is not the single-view crop */
    return rf_mix64(seed ^ rf_mix64(0x766965777300ull + k));
}
