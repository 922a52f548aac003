/* transform.c — rf_decode_transform and rf_decode_placed: the crop decoded at the smallest
 * useful DCT scale, through a restart-interval region when the file allows one, and resized
 * row by row into the sample. PNG and WebP feed the same rows (rf_dec_rows).
 *
 * DESIGN (threads, ownership and errors: jpeg_decode.c)
 *  - jpeg_crop_scanline and jpeg_skip_scanlines decode only the needed columns and rows,
 *    jpeg_abort_decompress drops the rest; a region skips the Huffman data around the crop.
 *  - Decoded rows land in a ring of v.taps rows; the vertical pass runs once an output row's
 *    sources are in, then the horizontal one (a gather), on `height` rows only.
 *  - JDCT_IFAST and do_fancy_upsampling = FALSE stay opt-in (RF_DECODE_*): no gain over the
 *    AVX2 islow IDCT, and pixels moved by up to 65 levels (docs/tuning.md, "The CPU decoder"). */
#include "decode/decoder.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "decode/decode_hooks.h"
#include "decode/jpeg_restart.h"
#include "decode/resize.h"

/* ---- rf_decode_transform ---- */

typedef struct xform_job {
    const rf_transform *t;
    const uint8_t *jpeg; /* the whole file, for a region decode */
    size_t len;
    uint32_t width, height; /* of the file (the decompressor may move on to a region) */
    uint32_t region;        /* decoded through a restart-interval region */
    uint32_t imcu_rows;     /* iMCU rows entropy-decoded (rf_decode_info.imcu_rows) */
    uint64_t seed;
    uint8_t *out;
    crop_box box;
    uint32_t num; /* DCT scale num/8 */
} xform_job;

/* The smallest DCT scale num/8 at which the crop still has as many columns and rows as the
 * output rectangle it lands on, among the powers of two: libjpeg-turbo has SIMD IDCTs for
 * those only, and the others are slower than a larger power of two. */
static uint32_t pick_num(const rf_decoder *d, const crop_box *b)
{
    for (uint32_t n = 8 / d->max_denom; n < 8; n *= 2)
        if (b->w * n >= (double)b->out_w * 8 && b->h * n >= (double)b->out_h * 8)
            return n;
    return 8;
}

void rf_dec_axis_shift(rf_axis *a, int32_t by)
{
    for (uint32_t i = 0; i < a->n_out; i++)
        a->start[i] -= by;
    a->first -= by, a->last -= by;
}

/* One axis in scaled-image pixels: the crop's fractional window divided by the DCT scale. */
static int plan_axis(rf_axis *a, double x, double w, uint32_t num, uint32_t extent, int clamp,
                     uint32_t n_out, int flip)
{
    double lo = x * num / 8, hi = (x + w) * num / 8;
    int32_t src_lo = 0, src_hi = (int32_t)extent;
    if (clamp) {
        src_lo = RF_MAX((int32_t)floor(lo), 0);
        src_hi = RF_MIN((int32_t)ceil(hi), (int32_t)extent);
        if (src_hi <= src_lo) /* a sub-pixel crop at 1/1 cannot happen; stay safe anyway */
            src_lo = RF_MIN(src_lo, (int32_t)extent - 1), src_hi = src_lo + 1;
    }
    return rf_axis_plan(a, lo, hi, src_lo, src_hi, 0, n_out, flip);
}

/* Both axes of box b on a W x H image decoded at scale num/8, onto b's output rectangle
 * (rf_dec_rows places the rows there and pads around them). */
static int plan_both(rf_decoder *d, const crop_box *b, uint32_t num, uint32_t W, uint32_t H,
                     rf_err *err)
{
    d->box = *b;
    if (plan_axis(&d->h, b->x, b->w, num, W, b->clamp_box, b->out_w, b->flip) ||
        plan_axis(&d->v, b->y, b->h, num, H, b->clamp_box, b->out_h, 0))
        return rf_seterr(err, RF_ENOMEM, "out of memory for resize plans");
    return 0;
}

static int plan_axes(rf_decoder *d, xform_job *j, rf_err *err)
{
    struct jpeg_decompress_struct *ci = &d->cinfo;
    jpeg_calc_output_dimensions(ci);
    return plan_both(d, &j->box, j->num, ci->output_width, ci->output_height, err);
}

int rf_dec_plan_full(rf_decoder *d, const rf_transform *t, const crop_box *b, uint32_t W,
                     uint32_t H, rf_err *err)
{
    (void)t; /* the box carries the output rectangle */
    return plan_both(d, b, 8, W, H, err);
}

int rf_dec_plan_scaled(rf_decoder *d, const crop_box *b, uint32_t num, uint32_t W, uint32_t H,
                       rf_err *err)
{
    return plan_both(d, b, num, W, H, err);
}

static void set_scale(rf_decoder *d, const xform_job *j)
{
    struct jpeg_decompress_struct *ci = &d->cinfo;
    ci->scale_num = j->num;
    ci->scale_denom = 8;
    if (d->flags & RF_DECODE_DCT_IFAST)
        ci->dct_method = JDCT_IFAST;
    if (d->flags & RF_DECODE_NO_FANCY)
        ci->do_fancy_upsampling = FALSE;
}

/* Region decode: point the decompressor at a JPEG of only the MCUs the taps need (plus one
 * scaled pixel each side), then rebase the plans on it. Leaves the decompressor on the whole
 * file when the file is not shaped for it. */
static int try_region(rf_decoder *d, xform_job *j, rf_err *err)
{
    struct jpeg_decompress_struct *ci = &d->cinfo;
    rf_jpeg_geom g;
    if ((d->flags & RF_DECODE_NO_REGION) || !rf_jpeg_geom_read(ci, &g))
        return 0;
    uint32_t c0, c1, r0, r1;
    uint32_t mw = g.mcu_w * j->num / 8, mh = g.mcu_h * j->num / 8; /* MCUs in scaled pixels */
    rf_jpeg_region_cover(&g, j->num, ci->output_width, ci->output_height, d->h.first, d->h.last,
                         d->v.first, d->v.last, &c0, &c1, &r0, &r1);
    /* Taken even when it saves little (a crop of nearly the whole image): the GPU paths judge
     * such a file by the region's intervals, so the CPU reads just those too and every path
     * refuses the same damaged files (backend/gpujpeg.c check_reach). */
    int rc = rf_jpeg_region(j->jpeg, j->len, &g, c0, c1, r0, r1, &d->region);
    if (rc == RF_ENOMEM)
        return rf_seterr(err, RF_ENOMEM, "out of memory for a %zu-byte region JPEG", j->len);
    if (rc)
        return 0;
    jpeg_abort_decompress(ci);
    jpeg_mem_src(ci, d->region.jpeg, (unsigned long)d->region.len);
    if ((rc = rf_dec_read_header(d, err)) != 0)
        return rc;
    set_scale(d, j);
    jpeg_calc_output_dimensions(ci);
    rf_dec_axis_shift(&d->h, (int32_t)(c0 * mw));
    rf_dec_axis_shift(&d->v, (int32_t)(r0 * mh));
    if (d->h.last > (int32_t)ci->output_width || d->v.last > (int32_t)ci->output_height ||
        d->h.first < 0 || d->v.first < 0)
        return rf_seterr(err, RF_EDECODE, "internal: region %u..%u x %u..%u misses the crop",
                         c0, c1, r0, r1);
    j->region = 1;
    return 0;
}

/* Narrow libjpeg's output to the columns the taps touch, rebase the vertical plan on *y0 (the
 * first row any output needs) and size the scratch. */
static int narrow(rf_decoder *d, xform_job *j, uint32_t *y0, rf_err *err)
{
    struct jpeg_decompress_struct *ci = &d->cinfo;
    /* Fancy upsampling replicates the edge columns of a cropped scanline, so those can differ
     * from a full decode (up to ~30 levels on 4:2:0): one spare column each side keeps the taps
     * off them. */
    JDIMENSION xoff = (JDIMENSION)RF_MAX(d->h.first - 1, 0);
    JDIMENSION cw = (JDIMENSION)RF_MIN(d->h.last + 1, (int32_t)ci->output_width) - xoff;
    if (xoff > 0 || cw < ci->output_width)
        jpeg_crop_scanline(ci, &xoff, &cw); /* may widen left to an iMCU boundary */
    rf_dec_axis_shift(&d->h, (int32_t)xoff);
    *y0 = (uint32_t)d->v.first;
    rf_dec_axis_shift(&d->v, d->v.first);
    if (rf_dec_ensure_line(d, err))
        return err->code;
    return rf_dec_scratch(d, ci->output_width, j->t->width, err);
}

int rf_dec_scratch(rf_decoder *d, uint32_t row_px, uint32_t out_w, rf_err *err)
{
    size_t n = (size_t)row_px * 3;
    d->row_px = row_px;
    if (rf_reserve(&d->ring, &d->ring_cap, n * d->v.taps, 1) ||
        rf_reserve(&d->vrow, &d->vrow_cap, n + RF_RESIZE_SRC_PAD, 1) ||
        rf_reserve(&d->orow, &d->orow_cap, (size_t)out_w * 3, 1) ||
        rf_reserve(&d->acc, &d->acc_cap, n, sizeof *d->acc) ||
        rf_reserve(&d->rows, &d->rows_cap, d->v.taps, sizeof *d->rows))
        return rf_seterr(err, RF_ENOMEM, "out of memory for resize scratch");
    memset(d->vrow + n, 0, RF_RESIZE_SRC_PAD); /* what the SIMD horizontal pass over-reads */
    return 0;
}

/* n pixels of rgb into the planes of a W x H canvas at (row, x0). */
static void split_planes(const uint8_t *rgb, uint32_t W, uint32_t H, uint32_t row, uint32_t x0,
                         uint32_t n, uint8_t *out)
{
    size_t plane = (size_t)H * W;
    uint8_t *r = out + (size_t)row * W + x0, *g = r + plane, *bl = g + plane;
    for (uint32_t x = 0; x < n; x++) {
        r[x] = rgb[3 * x];
        g[x] = rgb[3 * x + 1];
        bl[x] = rgb[3 * x + 2];
    }
}

/* Output row i of the rectangle; NCHW goes through one row for its planes. */
static void emit_row(rf_decoder *d, const xform_job *j, uint32_t i)
{
    const crop_box *b = &d->box;
    uint32_t x0 = rf_dec_out_x(b), y = b->out_y + i;
    if (d->flags & RF_DECODE_NO_RESIZE)
        return;
    uint32_t taps = d->v.taps;
    size_t n = (size_t)d->row_px * 3;
    for (uint32_t k = 0; k < taps; k++)
        d->rows[k] = d->ring + ((size_t)(d->v.start[i] + (int32_t)k) % taps) * n;
    rf_resize_row_v(&d->v, i, d->rows, n, d->acc, d->vrow);
    if (j->t->layout == RF_LAYOUT_NCHW) {
        rf_resize_row_h(&d->h, d->vrow, d->orow);
        split_planes(d->orow, b->canvas_w, b->canvas_h, y, x0, d->h.n_out, j->out);
    } else {
        rf_resize_row_h(&d->h, d->vrow, j->out + ((size_t)y * b->canvas_w + x0) * 3);
    }
}

static const uint8_t *jpeg_row(void *src, uint8_t *slot, rf_err *err)
{
    return rf_dec_read_rgb_line(src, slot, err);
}

static int run_rows(rf_decoder *d, xform_job *j, uint32_t y0, rf_err *err)
{
    if (y0 > 0 && jpeg_skip_scanlines(&d->cinfo, y0) != y0)
        return rf_seterr(err, RF_EDECODE, "could not skip to scanline %u", y0);
    return rf_dec_rows(d, j->t, j->out, jpeg_row, d, err);
}

/* Decode the needed rows into a ring of v.taps rows, emitting each output row once its last
 * source row is in, and pad the output around the rectangle they fill. Every format feeds it
 * through next(). */
int rf_dec_rows(rf_decoder *d, const rf_transform *t, uint8_t *out, rf_dec_row_fn next,
                void *src, rf_err *err)
{
    uint32_t rows = d->v.n_out, taps = d->v.taps, at = 0;
    uint32_t nrows = (uint32_t)d->v.last;
    size_t n = (size_t)d->row_px * 3;
    xform_job j = {.t = t, .out = out};
    if (!(d->flags & RF_DECODE_NO_RESIZE))
        rf_dec_pad(t, &d->box, out);
    for (uint32_t r = 0; r < nrows; r++) {
        uint8_t *slot = d->ring + (size_t)(r % taps) * n;
        const uint8_t *row = next(src, slot, err);
        if (!row)
            return err->code;
        if (row != slot)
            memcpy(slot, row, n);
        while (at < rows && (uint32_t)d->v.start[at] + taps <= r + 1)
            emit_row(d, &j, at++);
    }
    if (at != rows)
        return rf_seterr(err, RF_EDECODE, "internal: %u of %u output rows produced", at, rows);
    return 0;
}

/* Header, limits and the crop: what both the CPU decode and a GPU packet start from. */
static int xform_header(rf_decoder *d, xform_job *j, rf_err *err)
{
    int rc = rf_dec_read_header(d, err);
    if (rc || (rc = rf_dec_check_scan(d, j->jpeg, j->len, err)) != 0)
        return rc;
    j->width = d->cinfo.image_width, j->height = d->cinfo.image_height;
    rf_dec_box(d, j->t, j->width, j->height, j->seed, &j->box);
    return 0;
}

static int xform_rows(rf_decoder *d, xform_job *j, rf_err *err)
{
    uint32_t y0 = 0;
    int rc;
    if ((rc = try_region(d, j, err)) != 0)
        return rc;
    jpeg_start_decompress(&d->cinfo);
    if ((rc = narrow(d, j, &y0, err)) != 0)
        return rc;
    rc = run_rows(d, j, y0, err);
    j->imcu_rows = (uint32_t)d->cinfo.input_iMCU_row;
    return rc;
}

static int xform_decode(rf_decoder *d, xform_job *j, rf_err *err)
{
    j->num = pick_num(d, &j->box);
    set_scale(d, j);
    int rc = plan_axes(d, j, err);
    return rc ? rc : xform_rows(d, j, err);
}

static int xform_run(rf_decoder *d, void *job, rf_err *err)
{
    int rc = xform_header(d, job, err);
    return rc ? rc : xform_decode(d, job, err);
}

int rf_dec_validate(const rf_transform *t, rf_err *err)
{
    if (t->height == 0 || t->height > 16384 || t->width == 0 || t->width > 16384)
        return rf_seterr(err, RF_EINVAL, "output size %ux%u (height x width) out of range "
                         "1..16384", t->height, t->width);
    if (t->crop == RF_CROP_RANDOM &&
        !(t->scale_min > 0 && t->scale_min <= t->scale_max && t->ratio_min > 0 &&
          t->ratio_min <= t->ratio_max))
        return rf_seterr(err, RF_EINVAL, "invalid RandomResizedCrop scale/ratio range");
    if (t->crop > RF_CROP_NATIVE)
        return rf_seterr(err, RF_EINVAL, "unknown crop mode %u", t->crop);
    return 0;
}

static void fill_info(const xform_job *j, rf_decode_info *info)
{
    rf_dec_fill_info(j->width, j->height, &j->box, info);
    if (info) {
        info->region = j->region;
        info->imcu_rows = j->imcu_rows;
        info->scale_denom = 8 / j->num;
    }
}

int rf_decode_transform(rf_decoder *d, const uint8_t *jpeg, size_t len, const rf_transform *t,
                        uint64_t seed, uint8_t *out, rf_decode_info *info, rf_err *err)
{
    int rc = rf_dec_validate(t, err);
    if (rc)
        return rc;
    xform_job j = {.t = t, .jpeg = jpeg, .len = len, .seed = seed, .out = out};
    rc = rf_dec_guarded(d, jpeg, len, xform_run, &j, err);
    if (rc == 0)
        fill_info(&j, info);
    return rc;
}

/* ---- rf_decode_views' JPEG part ---- */

/* Rows [v.first, v.last) and columns [h.first, h.last) of the decompressor's image (at its
 * scale, after a region moved it) into d->img, with one spare column each side as narrow()
 * keeps: *r gets them, its origin still in the decompressor's coordinates. */
static int jpeg_rect(rf_decoder *d, rf_dec_rect *r, rf_err *err)
{
    struct jpeg_decompress_struct *ci = &d->cinfo;
    JDIMENSION xoff = (JDIMENSION)RF_MAX(d->h.first - 1, 0);
    JDIMENSION cw = (JDIMENSION)RF_MIN(d->h.last + 1, (int32_t)ci->output_width) - xoff;
    if (xoff > 0 || cw < ci->output_width)
        jpeg_crop_scanline(ci, &xoff, &cw);
    uint32_t y0 = (uint32_t)d->v.first, rows = (uint32_t)(d->v.last - d->v.first);
    size_t stride = (size_t)ci->output_width * 3;
    if (rf_dec_ensure_line(d, err))
        return err->code;
    if (rf_reserve(&d->img, &d->img_cap, stride * rows + RF_RESIZE_SRC_PAD, 1))
        return rf_seterr(err, RF_ENOMEM, "out of memory for a %ux%u crop", ci->output_width,
                         rows);
    if (y0 > 0 && jpeg_skip_scanlines(ci, y0) != y0)
        return rf_seterr(err, RF_EDECODE, "could not skip to scanline %u", y0);
    for (uint32_t y = 0; y < rows; y++) {
        uint8_t *row = d->img + stride * y;
        const uint8_t *got = rf_dec_read_rgb_line(d, row, err);
        if (!got)
            return err->code;
        if (got != row)
            memcpy(row, got, stride);
    }
    *r = (rf_dec_rect){.px = d->img, .stride = stride, .x0 = (int32_t)xoff, .y0 = (int32_t)y0,
                       .w = ci->output_width, .h = rows};
    return 0;
}

/* ---- multi-crop views (views.c): the boxes, the union they read, each cut from it ---- */

void rf_dec_views_boxes(rf_views_job *j, uint32_t W, uint32_t H)
{
    j->W = W, j->H = H;
    /* rf_dec_choose_box is what rf_sample_geometry reports from: the box, the rectangle of the
     * output it lands on (the rows pad around it) and the flip */
    for (uint32_t k = 0; k < j->v->n; k++) {
        rf_view_transform(j->base, j->v, k, &j->t[k]);
        rf_dec_choose_box(&j->t[k], W, H, rf_view_seed(j->seed, k), &j->box[k]);
    }
}

int rf_dec_views_cover(rf_decoder *d, const rf_views_job *j, uint32_t num, uint32_t Ws,
                       uint32_t Hs, int32_t c[4], rf_err *err)
{
    c[0] = c[2] = INT32_MAX, c[1] = c[3] = INT32_MIN;
    for (uint32_t k = 0; k < j->v->n; k++) {
        int rc = rf_dec_plan_scaled(d, &j->box[k], num, Ws, Hs, err);
        if (rc)
            return rc;
        c[0] = RF_MIN(c[0], d->h.first), c[1] = RF_MAX(c[1], d->h.last);
        c[2] = RF_MIN(c[2], d->v.first), c[3] = RF_MAX(c[3], d->v.last);
    }
    return 0;
}

typedef struct rect_src {
    const uint8_t *px;
    size_t stride;
    uint32_t y;
} rect_src;

static const uint8_t *rect_row(void *src, uint8_t *slot, rf_err *err)
{
    rect_src *s = src;
    (void)slot, (void)err;
    return s->px + s->stride * s->y++;
}

int rf_dec_views_cut(rf_decoder *d, rf_views_job *j, uint32_t num, uint32_t Ws, uint32_t Hs,
                     const rf_dec_rect *r, rf_err *err)
{
    for (uint32_t k = 0; k < j->v->n; k++) {
        const rf_transform *t = &j->t[k];
        int rc = rf_dec_plan_scaled(d, &j->box[k], num, Ws, Hs, err);
        if (rc)
            return rc;
        int32_t cx = d->h.first - r->x0, cy = d->v.first - r->y0;
        if (cx < 0 || cy < 0 || d->h.last - r->x0 > (int32_t)r->w ||
            d->v.last - r->y0 > (int32_t)r->h)
            return rf_seterr(err, RF_EDECODE, "internal: view %u reads outside the decoded "
                             "%ux%u rectangle", k, r->w, r->h);
        uint32_t cols = (uint32_t)(d->h.last - d->h.first);
        rf_dec_axis_shift(&d->h, d->h.first);
        rf_dec_axis_shift(&d->v, d->v.first);
        if ((rc = rf_dec_scratch(d, cols, t->width, err)) != 0)
            return rc;
        rect_src s = {r->px + (size_t)cx * 3 + r->stride * (size_t)cy, r->stride, 0};
        /* the rows place the view on its rectangle and pad around it, as for one image */
        if ((rc = rf_dec_rows(d, t, j->out + j->v->offset[k], rect_row, &s, err)) != 0)
            return rc;
        if (j->infos) {
            rf_dec_fill_info(j->W, j->H, &j->box[k], &j->infos[k]);
            j->infos[k].scale_denom = 8 / num;
            j->infos[k].region = j->region;
            j->infos[k].imcu_rows = j->imcu_rows;
        }
    }
    return 0;
}

int rf_dec_views_start(rf_decoder *d, const uint8_t *data, size_t len, const rf_transform *base,
                       const rf_views *v, uint64_t seed, uint8_t *out, rf_decode_info *infos,
                       rf_err *err)
{
    rf_views_job *j = &d->views;
    int rc = 0;
    for (uint32_t k = 0; k < v->n && rc == 0; k++) {
        rf_transform t;
        rf_view_transform(base, v, k, &t);
        rc = rf_dec_validate(&t, err);
    }
    if (rc)
        return rc;
    memset(j, 0, offsetof(rf_views_job, box));
    j->base = base, j->v = v, j->seed = seed, j->out = out, j->infos = infos;
    j->data = data, j->len = len;
    d->jerr.recovered = 0; /* a JPEG decode records its own; PNG and WebP have none */
    return 0;
}

/* The views' header part: the header read and checked, every view's box chosen. */
static int views_header(rf_decoder *d, rf_views_job *vj, rf_err *err)
{
    int rc = rf_dec_read_header(d, err);
    if (rc || (rc = rf_dec_check_scan(d, vj->data, vj->len, err)) != 0)
        return rc;
    rf_dec_views_boxes(vj, d->cinfo.image_width, d->cinfo.image_height);
    return 0;
}

/* The views decoded here, from their header part on. */
static int views_decode(rf_decoder *d, rf_views_job *vj, rf_err *err)
{
    struct jpeg_decompress_struct *ci = &d->cinfo;
    int rc;
    xform_job j = {.jpeg = vj->data, .len = vj->len, .num = 8 / d->max_denom};
    for (uint32_t k = 0; k < vj->v->n; k++) /* the scale that serves every view */
        j.num = RF_MAX(j.num, pick_num(d, &vj->box[k]));
    set_scale(d, &j);
    jpeg_calc_output_dimensions(ci);
    uint32_t Ws = ci->output_width, Hs = ci->output_height;
    int32_t c[4];
    if ((rc = rf_dec_views_cover(d, vj, j.num, Ws, Hs, c, err)) != 0)
        return rc;
    /* the union as the axes' extent, for the region and the narrowing; no outputs */
    d->h.n_out = d->v.n_out = 0;
    d->h.first = c[0], d->h.last = c[1], d->v.first = c[2], d->v.last = c[3];
    if ((rc = try_region(d, &j, err)) != 0)
        return rc;
    int32_t dx = c[0] - d->h.first, dy = c[2] - d->v.first; /* the region's origin */
    jpeg_start_decompress(ci);
    rf_dec_rect r = {0};
    if ((rc = jpeg_rect(d, &r, err)) != 0)
        return rc;
    r.x0 += dx, r.y0 += dy;
    vj->region = j.region;
    vj->imcu_rows = (uint32_t)ci->input_iMCU_row;
    return rf_dec_views_cut(d, vj, j.num, Ws, Hs, &r, err);
}

int rf_dec_jpeg_views(rf_decoder *d, void *job, rf_err *err)
{
    int rc = views_header(d, job, err);
    return rc ? rc : views_decode(d, job, err);
}

/* ---- rf_decode_placed ---- */

typedef struct placed_job {
    xform_job x;   /* x.out: placed only when the image is decoded here */
    const rf_decode_place *pl;
    uint32_t bytes;
} placed_job;

/* Where box b's rectangle lands in its canvas, as delivered. */
static rf_out_rect place_rect(const crop_box *b)
{
    return (rf_out_rect){rf_dec_out_x(b), b->out_y, b->canvas_w, b->canvas_h};
}

static int place_pixels(placed_job *pj, rf_err *err)
{
    size_t n = (size_t)pj->x.t->height * pj->x.t->width * 3;
    if (!(pj->x.out = pj->pl->pixels(pj->pl->ctx, n)))
        return rf_seterr(err, RF_ENOMEM, "no room for a decoded %ux%u sample", pj->x.t->height,
                         pj->x.t->width);
    return 0;
}

/* Decoded here, not offered: what the other engine cannot take, and crops (boxes[0..n)) the
 * decoder may DCT-scale (only under the balancing scheduler), which the GPU, decoding at full
 * scale, would give other pixels. */
static int stays_here(const rf_decoder *d, const crop_box *boxes, uint32_t n)
{
    int here = d->cmyk || (d->flags & (RF_DECODE_DCT_IFAST | RF_DECODE_NO_FANCY));
    for (uint32_t k = 0; k < n && !here; k++)
        here = pick_num(d, &boxes[k]) < 8;
    return here;
}

static int pack_enomem(size_t len, rf_err *err)
{
    return rf_seterr(err, RF_ENOMEM, "out of memory for the restart intervals of a %zu-byte "
                     "JPEG", len);
}

static int placed_run(rf_decoder *d, void *job, rf_err *err)
{
    placed_job *pj = job;
    xform_job *j = &pj->x;
    int rc = xform_header(d, j, err);
    if (rc)
        return rc;
    if (stays_here(d, &j->box, 1))
        return place_pixels(pj, err) ? err->code : xform_decode(d, j, err);
    j->num = 8; /* the other engine decodes at full scale */
    set_scale(d, j);
    if ((rc = plan_axes(d, j, err)) != 0)
        return rc;
    const rf_place_out po = {&d->h, &d->v, place_rect(&j->box), 0};
    rc = pj->pl->pack(pj->pl->ctx, &d->cinfo, j->jpeg, j->len, &po, 1, j->t, &d->region,
                      &pj->bytes);
    if (rc == 0) {
        j->region = 1;
        return 0;
    }
    if (rc == RF_ENOMEM)
        return pack_enomem(j->len, err);
    if (place_pixels(pj, err))
        return err->code;
    /* No room for the packet: decode at full scale, the kernels' exact bytes, so the route never
     * shows in the batch. Declined: as the CPU path always does. */
    return rc == RF_PLACE_NO_ROOM ? xform_rows(d, j, err) : xform_decode(d, j, err);
}

/* Multi-crop views offered in one packet: every view planned at full scale onto its own
 * rectangle (the axes kept per view in the job); what the other engine does not take, and
 * views the decoder may DCT-scale, are decoded here as rf_decode_views decodes them. */
typedef struct views_placed_job {
    const rf_decode_place *pl;
    uint32_t bytes;
} views_placed_job;

static int views_placed_run(rf_decoder *d, void *job, rf_err *err)
{
    views_placed_job *pj = job;
    rf_views_job *vj = &d->views;
    int rc = views_header(d, vj, err);
    if (rc)
        return rc;
    uint32_t n = vj->v->n, W = d->cinfo.image_width, H = d->cinfo.image_height;
    int here = stays_here(d, vj->box, n);
    rf_place_out po[RF_VIEWS_MAX];
    for (uint32_t k = 0; k < n && !here; k++) {
        if ((rc = rf_dec_plan_scaled(d, &vj->box[k], 8, W, H, err)) != 0)
            return rc;
        /* the view keeps its plans: the decoder's axes swap places with the view's */
        rf_axis th = vj->ph[k], tv = vj->pv[k];
        vj->ph[k] = d->h, vj->pv[k] = d->v, d->h = th, d->v = tv;
        po[k] = (rf_place_out){&vj->ph[k], &vj->pv[k], place_rect(&vj->box[k]), vj->v->offset[k]};
    }
    rc = here ? RF_PLACE_DECLINED
              : pj->pl->pack(pj->pl->ctx, &d->cinfo, vj->data, vj->len, po, n, vj->base,
                             &d->region, &pj->bytes);
    if (rc == 0) {
        for (uint32_t k = 0; vj->infos && k < n; k++) {
            rf_dec_fill_info(W, H, &vj->box[k], &vj->infos[k]); /* full scale */
            vj->infos[k].region = 1;
        }
        return 0;
    }
    if (rc == RF_ENOMEM)
        return pack_enomem(vj->len, err);
    /* declined, or no room (every view then decodes at full scale here: none could be
     * DCT-scaled, or it would not have been offered) */
    if (!(vj->out = pj->pl->pixels(pj->pl->ctx, vj->v->bytes)))
        return rf_seterr(err, RF_ENOMEM, "no room for a sample's %u decoded views", n);
    return views_decode(d, vj, err);
}

int rf_decode_placed(rf_decoder *d, const uint8_t *jpeg, size_t len, const rf_transform *t,
                     const rf_views *v, uint64_t seed, const rf_decode_place *pl,
                     uint32_t *bytes, rf_decode_info *info, rf_err *err)
{
    int rc = rf_dec_validate(t, err);
    if (rc)
        return rc;
    if (v && v->n) {
        views_placed_job vp = {.pl = pl};
        if ((rc = rf_dec_views_start(d, jpeg, len, t, v, seed, NULL, info, err)) != 0 ||
            (rc = rf_dec_guarded(d, jpeg, len, views_placed_run, &vp, err)) != 0)
            return rc;
        *bytes = vp.bytes;
        return 0;
    }
    placed_job pj = {.x = {.t = t, .jpeg = jpeg, .len = len, .seed = seed}, .pl = pl};
    rc = rf_dec_guarded(d, jpeg, len, placed_run, &pj, err);
    if (rc)
        return rc;
    *bytes = pj.bytes;
    fill_info(&pj.x, info);
    return 0;
}
