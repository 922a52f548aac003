/* jpeg_decode.c — libjpeg-turbo decode with crop-during-decode, DCT scaling, resize and flip.
 *
 * DESIGN
 *  - Threads: an rf_decoder belongs to one thread at a time (libjpeg decompressors are not
 *    thread-safe). The decode pool gives each worker its own; nothing here is shared or global.
 *  - Ownership: the decoder owns one jpeg_decompress_struct, created once, plus every scratch
 *    buffer (one scanline, a ring of resampled rows, filter plans). Scratch only grows, so the
 *    steady state allocates nothing of ours; libjpeg still uses its own per-image pools.
 *  - Errors: libjpeg reports through callbacks that must not return; ours longjmp back to the
 *    single setjmp in guarded(), which aborts the decompressor so it is reusable for the next
 *    sample. Warnings (corrupt data, premature end) are treated as errors: a training set with a
 *    silently half-grey image is worse than one that names the bad member. Code between that
 *    setjmp and a longjmp keeps its state in the decoder or in a job struct reached through a
 *    pointer, never in locals of guarded() itself, so nothing needs to be volatile.
 *  - Work avoided: limits are checked on the header before libjpeg allocates image buffers; the
 *    crop picks the smallest SIMD-covered DCT scale (1/8..1/1) that still leaves the crop at
 *    least size x size; jpeg_crop_scanline and jpeg_skip_scanlines decode only the needed
 *    columns and rows, and jpeg_abort_decompress drops the rest of the file unread.
 *  - Region decode (try_region, jpeg_restart.h): those calls still entropy-decode every MCU
 *    above and beside the crop, because a baseline scan is one bit stream. When the file has
 *    restart markers at an interval dividing its MCU rows (ringfeed-pack --restart writes
 *    them), the decompressor is pointed at a JPEG cut down to the MCUs the crop needs plus one
 *    scaled pixel of context each side, and decodes byte-for-byte what the whole file gives
 *    (tests/test_decode.c checks every crop mode, scale and sampling). Measured on one core:
 *    RandomResizedCrop 1,223 -> 1,561 img/s, Resize+CenterCrop 1,107 -> 1,346 img/s.
 *  - Resize: decoded scanlines land in a ring of v.taps rows; as soon as the rows an output row
 *    needs are in, the vertical pass (contiguous, vectorized) collapses them into one cropped
 *    row and the horizontal pass (a gather per output pixel; AVX2 where available) makes the
 *    output row. Vertical first means the gather pass runs on exactly `size` rows instead of on
 *    every decoded row (up to 2x size with DCT scaling, more for large crops): measured ~1.6x
 *    faster for the resize than horizontal-first on 500x375 -> 224.
 *  - Where the time goes (tools/internal/decode_bench.c, 1 thread, ~100 KB 4:2:0 photos of ~400x350):
 *    ~74% of RandomResizedCrop's instructions are libjpeg's Huffman decoding, which no crop can
 *    skip without restart markers (rows above the crop are entropy-decoded to find the next
 *    one); the resize is ~14%.
 *    JDCT_IFAST gains nothing over the AVX2 islow IDCT; do_fancy_upsampling = FALSE saves ~3%
 *    but moves pixels by up to 65 levels, so both are opt-in flags (RF_DECODE_*), not defaults.
 */
#include "decode/decode.h"

#include <math.h>
#include <setjmp.h>
#include <stdio.h> /* jpeglib.h needs FILE */
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>

#include "decode/decode_hooks.h"
#include "decode/jpeg_restart.h"
#include "decode/resize.h"

/* Headroom over a full coefficient image (progressive JPEGs buffer all of it) at max_pixels. */
#define MEM_SLACK_BYTES (64ull << 20)

typedef struct rf_jerr {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    int code;
    char msg[JMSG_LENGTH_MAX + 64];
} rf_jerr;

typedef struct rf_jprogress {
    struct jpeg_progress_mgr pub;
    uint32_t max_scans;
} rf_jprogress;

/* A crop of the original image. Fractional for CENTER (torchvision resizes, then crops whole
 * pixels of the resized image). clamp_box: filter taps stay inside the box (RandomResizedCrop
 * crops, then resizes) rather than inside the image. */
typedef struct crop_box {
    double x, y, w, h;
    int clamp_box;
    uint32_t flip;
} crop_box;

struct rf_decoder {
    struct jpeg_decompress_struct cinfo;
    rf_jerr jerr;
    rf_jprogress progress;
    rf_decode_limits lim;
    uint32_t max_denom;
    uint32_t flags; /* enum rf_decode_flag */
    int cmyk; /* this image is decoded as CMYK and converted per row */
    rf_axis h, v;
    uint8_t *line, *rgb, *ring, *vrow, *orow;
    size_t line_cap, rgb_cap, ring_cap, vrow_cap, orow_cap;
    const uint8_t **rows;
    size_t rows_cap;
    int32_t *acc;
    size_t acc_cap;
    rf_region_buf region;
};

/* ---- libjpeg callbacks ------------------------------------------------------------------- */

static int code_for(int msg_code)
{
    switch (msg_code) {
    case JERR_OUT_OF_MEMORY: return RF_ENOMEM;
    case JERR_NO_BACKING_STORE: /* max_memory_to_use exceeded: libjpeg wanted a temp file */
    case JERR_IMAGE_TOO_BIG:
    case JERR_WIDTH_OVERFLOW: return RF_ELIMIT;
    default: return RF_EDECODE;
    }
}

static void fail_jump(j_common_ptr c, const char *what)
{
    rf_jerr *e = (rf_jerr *)c->err;
    char text[JMSG_LENGTH_MAX];
    c->err->format_message(c, text);
    snprintf(e->msg, sizeof e->msg, "%s: %s", what, text);
    e->code = code_for(c->err->msg_code);
    longjmp(e->jb, 1);
}

static void on_error_exit(j_common_ptr c) { fail_jump(c, "libjpeg error"); }

/* level < 0 is a warning (corrupt data, premature end); >= 0 are trace messages. */
static void on_emit_message(j_common_ptr c, int level)
{
    if (level < 0)
        fail_jump(c, "libjpeg warning");
}

/* Called between input chunks while a multi-scan image is absorbed: the place to stop a file of
 * thousands of tiny progressive scans before it burns seconds of CPU. */
static void on_progress(j_common_ptr c)
{
    j_decompress_ptr di = (j_decompress_ptr)c;
    rf_jprogress *p = (rf_jprogress *)c->progress;
    if (!c->is_decompressor || (uint32_t)di->input_scan_number <= p->max_scans)
        return;
    rf_jerr *e = (rf_jerr *)c->err;
    snprintf(e->msg, sizeof e->msg, "progressive JPEG has more than %u scans", p->max_scans);
    e->code = RF_ELIMIT;
    longjmp(e->jb, 1);
}

/* ---- decoder lifetime -------------------------------------------------------------------- */

/* jpeg_create_decompress itself can fail (out of memory), through error_exit. */
static int init_jpeg(rf_decoder *d)
{
    d->cinfo.err = jpeg_std_error(&d->jerr.pub);
    d->jerr.pub.error_exit = on_error_exit;
    d->jerr.pub.emit_message = on_emit_message;
    if (setjmp(d->jerr.jb)) {
        jpeg_destroy_decompress(&d->cinfo);
        return -1;
    }
    jpeg_create_decompress(&d->cinfo);
    d->cinfo.client_data = d;
    d->progress.pub.progress_monitor = on_progress;
    d->progress.max_scans = d->lim.max_scans;
    d->cinfo.progress = &d->progress.pub;
    uint64_t mem = d->lim.max_pixels > (1ull << 40) ? (1ull << 43) : d->lim.max_pixels * 6;
    d->cinfo.mem->max_memory_to_use = (long)(mem + MEM_SLACK_BYTES);
    return 0;
}

rf_decoder *rf_decoder_create(const rf_decode_limits *lim)
{
    rf_decoder *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    if (lim)
        d->lim = *lim;
    if (!d->lim.max_pixels)
        d->lim.max_pixels = RF_DEFAULT_MAX_IMAGE_PIXELS;
    if (!d->lim.max_dim)
        d->lim.max_dim = RF_DEFAULT_MAX_IMAGE_DIM;
    if (!d->lim.max_scans)
        d->lim.max_scans = RF_DEFAULT_MAX_SCANS;
    d->max_denom = 8;
    if (init_jpeg(d)) {
        free(d);
        return NULL;
    }
    return d;
}

void rf_decoder_destroy(rf_decoder *d)
{
    if (!d)
        return;
    jpeg_destroy_decompress(&d->cinfo);
    rf_axis_free(&d->h);
    rf_axis_free(&d->v);
    free(d->line);
    free(d->rgb);
    free(d->ring);
    free(d->vrow);
    free(d->orow);
    free(d->rows);
    free(d->acc);
    rf_region_buf_free(&d->region);
    free(d);
}

void rf_decoder_set_max_scale_denom(rf_decoder *d, uint32_t denom)
{
    d->max_denom = denom >= 8 ? 8 : denom >= 4 ? 4 : denom >= 2 ? 2 : 1;
}

void rf_decoder_set_flags(rf_decoder *d, uint32_t flags) { d->flags = flags; }

/* ---- the guarded region ------------------------------------------------------------------ */

/* Every image starts from a new decompressor, as djpeg's does. libjpeg keeps the quantization
 * and Huffman tables of the previous image in a reused decompressor (abbreviated datastreams
 * rely on that), so a file without its own DQT or DHT would decode with whatever image the same
 * thread decoded before: pixels and skip counts that depend on the thread count. Everything
 * else a file sets (restart interval, JFIF/Adobe flags, colour space, arithmetic-coding
 * conditioning) libjpeg resets at SOI. Creating one costs ~0.4 us, against 80+ us for the
 * cheapest use of it (a GPU-decode header parse). */
static int fresh_jpeg(rf_decoder *d)
{
    jpeg_destroy_decompress(&d->cinfo);
    return init_jpeg(d);
}

typedef int (*job_fn)(rf_decoder *d, void *job, rf_err *err);

/* The only setjmp: runs fn with libjpeg errors turned into a return, and always leaves the
 * decompressor aborted (idle, reusable) whichever way fn ends. */
static int guarded(rf_decoder *d, const uint8_t *jpeg, size_t len, job_fn fn, void *job,
                   rf_err *err)
{
    if (!jpeg || len == 0)
        return rf_seterr(err, RF_EDECODE, "empty input: not a JPEG");
    if (fresh_jpeg(d))
        return rf_seterr(err, RF_ENOMEM, "out of memory for a JPEG decompressor");
    d->region.of = NULL;
    if (setjmp(d->jerr.jb)) {
        jpeg_abort_decompress(&d->cinfo);
        return rf_seterr(err, d->jerr.code, "%s", d->jerr.msg);
    }
    jpeg_mem_src(&d->cinfo, jpeg, (unsigned long)len);
    int rc = fn(d, job, err);
    jpeg_abort_decompress(&d->cinfo);
    return rc;
}

/* Header, limits and output colour space; no image-sized allocation has happened yet. */
static int read_header_checked(rf_decoder *d, rf_err *err)
{
    struct jpeg_decompress_struct *ci = &d->cinfo;
    jpeg_read_header(ci, TRUE);
    uint64_t w = ci->image_width, h = ci->image_height;
    if (w > d->lim.max_dim || h > d->lim.max_dim || w * h > d->lim.max_pixels)
        return rf_seterr(err, RF_ELIMIT,
                         "JPEG is %llux%llu: over the limit (max_dim %u, max_pixels %llu)",
                         (unsigned long long)w, (unsigned long long)h, d->lim.max_dim,
                         (unsigned long long)d->lim.max_pixels);
    switch (ci->jpeg_color_space) {
    case JCS_GRAYSCALE: /* libjpeg-turbo replicates gray into RGB itself */
    case JCS_YCbCr:
    case JCS_RGB: ci->out_color_space = JCS_RGB; d->cmyk = 0; return 0;
    case JCS_CMYK:
    case JCS_YCCK: ci->out_color_space = JCS_CMYK; d->cmyk = 1; return 0;
    default:
        return rf_seterr(err, RF_EDECODE, "unsupported JPEG colour space %d with %d components",
                         (int)ci->jpeg_color_space, ci->num_components);
    }
}

/* Naive ink model, enough for the rare CMYK training image. Adobe writers store inverted
 * values (255 = no ink), which is what the multiply below wants. */
static void cmyk_to_rgb(const uint8_t *src, uint8_t *dst, size_t n, int adobe_inverted)
{
    for (size_t i = 0; i < n; i++, src += 4, dst += 3) {
        unsigned c = src[0], m = src[1], y = src[2], k = src[3];
        if (!adobe_inverted) {
            c = 255 - c, m = 255 - m, y = 255 - y, k = 255 - k;
        }
        dst[0] = (uint8_t)((c * k + 127) / 255);
        dst[1] = (uint8_t)((m * k + 127) / 255);
        dst[2] = (uint8_t)((y * k + 127) / 255);
    }
}

/* Read the next scanline as RGB: straight from libjpeg, or through the CMYK conversion. */
static const uint8_t *read_rgb_line(rf_decoder *d, uint8_t *direct, rf_err *err)
{
    JSAMPROW row = d->cmyk ? d->line : direct;
    if (jpeg_read_scanlines(&d->cinfo, &row, 1) != 1) {
        rf_seterr(err, RF_EDECODE, "libjpeg returned no scanline");
        return NULL;
    }
    if (!d->cmyk)
        return direct;
    cmyk_to_rgb(d->line, d->rgb, d->cinfo.output_width, d->cinfo.saw_Adobe_marker);
    return d->rgb;
}

/* Scanline buffers for the current output_width (after any crop). */
static int ensure_line(rf_decoder *d, rf_err *err)
{
    size_t w = d->cinfo.output_width;
    if (rf_reserve(&d->line, &d->line_cap, w * 4, 1) ||
        rf_reserve(&d->rgb, &d->rgb_cap, w * 3, 1))
        return rf_seterr(err, RF_ENOMEM, "out of memory for a %zu-pixel scanline", w);
    return 0;
}

/* ---- crop choice (torchvision's RandomResizedCrop / Resize+CenterCrop) ------------------- */

/* Python's round(): half to even, which rint() does in the default rounding mode. */
static int64_t py_round(double v) { return (int64_t)rint(v); }

static void random_box(const rf_transform *t, uint32_t W, uint32_t H, rf_rng *rng, crop_box *b)
{
    double area = (double)W * H, lr0 = log(t->ratio_min), lr1 = log(t->ratio_max);
    for (int attempt = 0; attempt < 10; attempt++) {
        double target = area * (t->scale_min + (t->scale_max - t->scale_min) * rf_rng_unit(rng));
        double ar = exp(lr0 + (lr1 - lr0) * rf_rng_unit(rng));
        int64_t w = py_round(sqrt(target * ar)), h = py_round(sqrt(target / ar));
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
        h = py_round(w / (double)t->ratio_min);
    else if (in_ratio > t->ratio_max)
        w = py_round(h * (double)t->ratio_max);
    w = RF_MAX(RF_MIN(w, (int64_t)W), 1), h = RF_MAX(RF_MIN(h, (int64_t)H), 1);
    b->x = (double)((W - w) / 2), b->y = (double)((H - h) / 2);
    b->w = (double)w, b->h = (double)h;
}

/* Resize(shorter -> R) then CenterCrop(size), mapped back onto the original. A crop larger than
 * the resized image (torchvision would pad) is clamped to the image instead. */
static void center_box(const rf_transform *t, uint32_t W, uint32_t H, crop_box *b)
{
    uint32_t R = t->resize_shorter ? t->resize_shorter : t->size * 256 / 224;
    double nw, nh;
    if (W <= H)
        nw = R, nh = floor((double)R * H / W);
    else
        nh = R, nw = floor((double)R * W / H);
    nw = RF_MAX(nw, 1.0), nh = RF_MAX(nh, 1.0);
    double cw = RF_MIN((double)t->size, nw), ch = RF_MIN((double)t->size, nh);
    double left = (double)py_round((nw - cw) / 2.0), top = (double)py_round((nh - ch) / 2.0);
    double sx = W / nw, sy = H / nh;
    b->x = left * sx, b->y = top * sy, b->w = cw * sx, b->h = ch * sy;
}

static void choose_box(const rf_transform *t, uint32_t W, uint32_t H, uint64_t seed, crop_box *b)
{
    rf_rng rng;
    rf_rng_seed(&rng, seed);
    double p = t->flip_prob;
    if (t->crop == RF_CROP_CENTER) {
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

void rf_choose_crop(const rf_transform *t, uint32_t width, uint32_t height, uint64_t seed,
                    uint32_t *x, uint32_t *y, uint32_t *w, uint32_t *h, uint32_t *flip)
{
    crop_box b;
    choose_box(t, width, height, seed, &b);
    *x = (uint32_t)py_round(b.x), *y = (uint32_t)py_round(b.y);
    *w = (uint32_t)py_round(b.w), *h = (uint32_t)py_round(b.h);
    *flip = b.flip;
}

/* ---- rf_decode_transform ----------------------------------------------------------------- */

typedef struct xform_job {
    const rf_transform *t;
    const uint8_t *jpeg; /* the whole file, for a region decode */
    size_t len;
    uint32_t width, height; /* of the file (the decompressor may move on to a region) */
    uint32_t region;        /* decoded through a restart-interval region */
    uint64_t seed;
    uint8_t *out;
    crop_box box;
    uint32_t num; /* DCT scale num/8 */
} xform_job;

/* The smallest DCT scale num/8 at which the crop still has >= size pixels, among the powers of
 * two (libjpeg-turbo has SIMD IDCTs for those only; allowing 3/8, 5/8, 6/8, 7/8 as well made
 * RandomResizedCrop 224 slower, 1,232-1,407 vs 1,445-1,461 img/s on one core). */
static uint32_t pick_num(const rf_decoder *d, const crop_box *b, uint32_t size)
{
    for (uint32_t n = 8 / d->max_denom; n < 8; n *= 2)
        if (b->w * n >= (double)size * 8 && b->h * n >= (double)size * 8)
            return n;
    return 8;
}

static void axis_shift(rf_axis *a, int32_t by)
{
    for (uint32_t i = 0; i < a->n_out; i++)
        a->start[i] -= by;
    a->first -= by, a->last -= by;
}

/* One axis in scaled-image pixels: the crop's fractional window divided by the DCT scale. */
static int plan_axis(rf_axis *a, double x, double w, uint32_t num, uint32_t extent, int clamp,
                     uint32_t size, int flip)
{
    double lo = x * num / 8, hi = (x + w) * num / 8;
    int32_t src_lo = 0, src_hi = (int32_t)extent;
    if (clamp) {
        src_lo = RF_MAX((int32_t)floor(lo), 0);
        src_hi = RF_MIN((int32_t)ceil(hi), (int32_t)extent);
        if (src_hi <= src_lo) /* a sub-pixel crop at 1/1 cannot happen; stay safe anyway */
            src_lo = RF_MIN(src_lo, (int32_t)extent - 1), src_hi = src_lo + 1;
    }
    return rf_axis_plan(a, lo, hi, src_lo, src_hi, 0, size, flip);
}

/* Plans both axes on the scaled image libjpeg will produce (jpeg_calc_output_dimensions). */
static int plan_axes(rf_decoder *d, xform_job *j, rf_err *err)
{
    struct jpeg_decompress_struct *ci = &d->cinfo;
    const crop_box *b = &j->box;
    uint32_t size = j->t->size;
    jpeg_calc_output_dimensions(ci);
    if (plan_axis(&d->h, b->x, b->w, j->num, ci->output_width, b->clamp_box, size, b->flip) ||
        plan_axis(&d->v, b->y, b->h, j->num, ci->output_height, b->clamp_box, size, 0))
        return rf_seterr(err, RF_ENOMEM, "out of memory for resize plans");
    return 0;
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

/* Region decode (jpeg_restart.h): when the file has restart intervals that divide its rows,
 * point the decompressor at a JPEG of only the MCUs holding the rows and columns the taps need,
 * plus one scaled pixel each side (fancy upsampling reads one chroma sample past a pixel, and
 * the region's own edge samples are replicated), then rebase the plans on it. That skips the
 * Huffman decoding of everything above and beside the crop, which a plain decode must do to
 * find the crop. Leaves the decompressor on the whole file when that saves too little or the
 * file is not shaped for it. */
static int try_region(rf_decoder *d, xform_job *j, rf_err *err)
{
    struct jpeg_decompress_struct *ci = &d->cinfo;
    rf_jpeg_geom g;
    if ((d->flags & RF_DECODE_NO_REGION) || !rf_jpeg_geom_read(ci, &g))
        return 0;
    uint32_t cols = rf_jpeg_mcu_cols(&g), c0, c1, r0, r1;
    uint32_t mw = g.mcu_w * j->num / 8, mh = g.mcu_h * j->num / 8; /* MCUs in scaled pixels */
    rf_jpeg_region_cover(&g, j->num, ci->output_width, ci->output_height, d->h.first, d->h.last,
                         d->v.first, d->v.last, &c0, &c1, &r0, &r1);
    /* A plain decode entropy-decodes every MCU down to row r1; skip regions that save < 1/8. */
    if ((uint64_t)(c1 - c0) * (r1 - r0) * 8 > (uint64_t)cols * r1 * 7)
        return 0;
    int rc = rf_jpeg_region(j->jpeg, j->len, &g, c0, c1, r0, r1, &d->region);
    if (rc == RF_ENOMEM)
        return rf_seterr(err, RF_ENOMEM, "out of memory for a %zu-byte region JPEG", j->len);
    if (rc)
        return 0;
    jpeg_abort_decompress(ci);
    jpeg_mem_src(ci, d->region.jpeg, (unsigned long)d->region.len);
    if ((rc = read_header_checked(d, err)) != 0)
        return rc;
    set_scale(d, j);
    jpeg_calc_output_dimensions(ci);
    axis_shift(&d->h, (int32_t)(c0 * mw));
    axis_shift(&d->v, (int32_t)(r0 * mh));
    if (d->h.last > (int32_t)ci->output_width || d->v.last > (int32_t)ci->output_height ||
        d->h.first < 0 || d->v.first < 0)
        return rf_seterr(err, RF_EDECODE, "internal: region %u..%u x %u..%u misses the crop",
                         c0, c1, r0, r1);
    j->region = 1;
    return 0;
}

/* Narrows libjpeg's output to the columns the horizontal taps touch, rebases the vertical plan
 * on *y0 (the first row any output needs) and sizes the scratch rows. */
static int narrow(rf_decoder *d, xform_job *j, uint32_t *y0, rf_err *err)
{
    struct jpeg_decompress_struct *ci = &d->cinfo;
    uint32_t size = j->t->size;
    /* libjpeg's fancy upsampling replicates the edge columns of a cropped scanline, so the
     * first and last columns it returns can differ from a full decode (by up to ~30 levels on
     * 4:2:0). Ask for one spare column each side so the taps never read those. */
    JDIMENSION xoff = (JDIMENSION)RF_MAX(d->h.first - 1, 0);
    JDIMENSION cw = (JDIMENSION)RF_MIN(d->h.last + 1, (int32_t)ci->output_width) - xoff;
    if (xoff > 0 || cw < ci->output_width)
        jpeg_crop_scanline(ci, &xoff, &cw); /* may widen left to an iMCU boundary */
    axis_shift(&d->h, (int32_t)xoff);
    *y0 = (uint32_t)d->v.first;
    axis_shift(&d->v, d->v.first);
    size_t n = (size_t)ci->output_width * 3; /* a cropped scanline */
    if (ensure_line(d, err))
        return err->code;
    if (rf_reserve(&d->ring, &d->ring_cap, n * d->v.taps, 1) ||
        rf_reserve(&d->vrow, &d->vrow_cap, n + RF_RESIZE_SRC_PAD, 1) ||
        rf_reserve(&d->orow, &d->orow_cap, (size_t)size * 3, 1) ||
        rf_reserve(&d->acc, &d->acc_cap, n, sizeof *d->acc) ||
        rf_reserve(&d->rows, &d->rows_cap, d->v.taps, sizeof *d->rows))
        return rf_seterr(err, RF_ENOMEM, "out of memory for resize scratch");
    memset(d->vrow + n, 0, RF_RESIZE_SRC_PAD); /* what the SIMD horizontal pass over-reads */
    return 0;
}

static void split_planes(const uint8_t *rgb, uint32_t size, uint32_t row, uint8_t *out)
{
    size_t plane = (size_t)size * size;
    uint8_t *r = out + (size_t)row * size, *g = r + plane, *bl = g + plane;
    for (uint32_t x = 0; x < size; x++) {
        r[x] = rgb[3 * x];
        g[x] = rgb[3 * x + 1];
        bl[x] = rgb[3 * x + 2];
    }
}

/* Output row i: vertical pass over the ring of decoded rows, horizontal pass (with the flip)
 * straight into the output, or via one row for NCHW's planes. */
static void emit_row(rf_decoder *d, const xform_job *j, uint32_t i)
{
    if (d->flags & RF_DECODE_NO_RESIZE)
        return;
    uint32_t size = j->t->size, taps = d->v.taps;
    size_t n = (size_t)d->cinfo.output_width * 3;
    for (uint32_t k = 0; k < taps; k++)
        d->rows[k] = d->ring + ((size_t)(d->v.start[i] + (int32_t)k) % taps) * n;
    rf_resize_row_v(&d->v, i, d->rows, n, d->acc, d->vrow);
    if (j->t->layout == RF_LAYOUT_NCHW) {
        rf_resize_row_h(&d->h, d->vrow, d->orow);
        split_planes(d->orow, size, i, j->out);
    } else {
        rf_resize_row_h(&d->h, d->vrow, j->out + (size_t)i * size * 3);
    }
}

/* Skip to the first needed row, decode only the needed rows into a ring of v.taps rows, and
 * emit each output row as soon as its last source row is in. */
static int run_rows(rf_decoder *d, xform_job *j, uint32_t y0, rf_err *err)
{
    uint32_t size = j->t->size, taps = d->v.taps, next = 0;
    uint32_t nrows = (uint32_t)d->v.last;
    size_t n = (size_t)d->cinfo.output_width * 3;
    if (y0 > 0 && jpeg_skip_scanlines(&d->cinfo, y0) != y0)
        return rf_seterr(err, RF_EDECODE, "could not skip to scanline %u", y0);
    for (uint32_t r = 0; r < nrows; r++) {
        uint8_t *slot = d->ring + (size_t)(r % taps) * n;
        const uint8_t *src = read_rgb_line(d, slot, err);
        if (!src)
            return err->code;
        if (src != slot)
            memcpy(slot, src, n);
        while (next < size && (uint32_t)d->v.start[next] + taps <= r + 1)
            emit_row(d, j, next++);
    }
    if (next != size)
        return rf_seterr(err, RF_EDECODE, "internal: %u of %u output rows produced", next, size);
    return 0;
}

/* The rule for damage (docs/reliability.md): whatever the crop, every decode checks the marker
 * structure of the whole file (rf_jpeg_scan_check), so a damaged marker, restart markers out of
 * order or missing, or a missing EOI fail the sample in every epoch. A multi-scan file
 * (progressive, or sequential non-interleaved) needs nothing more: jpeg_start_decompress reads
 * all of its scans, to EOI. Damage inside the Huffman bits of MCUs the crop does not decode
 * stays unseen: ringfeed-inspect decodes every image in full to find it. */
static int check_scan(rf_decoder *d, const uint8_t *jpeg, size_t len, rf_err *err)
{
    struct jpeg_decompress_struct *ci = &d->cinfo;
    if (ci->progressive_mode || ci->comps_in_scan < ci->num_components)
        return 0;
    rf_jpeg_geom g;
    rf_jpeg_geom_read(ci, &g);
    uint64_t mcus = (uint64_t)rf_jpeg_mcu_cols(&g) * rf_jpeg_mcu_rows(&g);
    return rf_jpeg_scan_check(jpeg, len, ci->restart_interval, mcus, &d->region, err);
}

/* Header, limits and the crop: what both the CPU decode and a GPU packet start from. */
static int xform_header(rf_decoder *d, xform_job *j, rf_err *err)
{
    int rc = read_header_checked(d, err);
    if (rc || (rc = check_scan(d, j->jpeg, j->len, err)) != 0)
        return rc;
    j->width = d->cinfo.image_width, j->height = d->cinfo.image_height;
    choose_box(j->t, j->width, j->height, j->seed, &j->box);
    return 0;
}

/* Decode with the scale and resize plans already set (a region when the restart markers
 * allow one): the rows, through the resize, into j->out. */
static int xform_rows(rf_decoder *d, xform_job *j, rf_err *err)
{
    uint32_t y0 = 0;
    int rc;
    if ((rc = try_region(d, j, err)) != 0)
        return rc;
    jpeg_start_decompress(&d->cinfo);
    if ((rc = narrow(d, j, &y0, err)) != 0)
        return rc;
    return run_rows(d, j, y0, err);
}

/* After xform_header: the scale, the plans, the region, the rows, into j->out. */
static int xform_decode(rf_decoder *d, xform_job *j, rf_err *err)
{
    j->num = pick_num(d, &j->box, j->t->size);
    set_scale(d, j);
    int rc = plan_axes(d, j, err);
    return rc ? rc : xform_rows(d, j, err);
}

static int xform_run(rf_decoder *d, void *job, rf_err *err)
{
    int rc = xform_header(d, job, err);
    return rc ? rc : xform_decode(d, job, err);
}

static int validate(const rf_transform *t, rf_err *err)
{
    if (t->size == 0 || t->size > 16384)
        return rf_seterr(err, RF_EINVAL, "output size %u out of range 1..16384", t->size);
    if (t->crop == RF_CROP_RANDOM &&
        !(t->scale_min > 0 && t->scale_min <= t->scale_max && t->ratio_min > 0 &&
          t->ratio_min <= t->ratio_max))
        return rf_seterr(err, RF_EINVAL, "invalid RandomResizedCrop scale/ratio range");
    if (t->crop != RF_CROP_RANDOM && t->crop != RF_CROP_CENTER)
        return rf_seterr(err, RF_EINVAL, "unknown crop mode %u", t->crop);
    return 0;
}

static void fill_info(const xform_job *j, rf_decode_info *info)
{
    if (!info)
        return;
    info->width = j->width;
    info->height = j->height;
    info->region = j->region;
    info->crop_x = (uint32_t)py_round(j->box.x), info->crop_y = (uint32_t)py_round(j->box.y);
    info->crop_w = (uint32_t)py_round(j->box.w), info->crop_h = (uint32_t)py_round(j->box.h);
    info->scale_denom = 8 / j->num;
    info->flipped = j->box.flip;
}

int rf_decode_transform(rf_decoder *d, const uint8_t *jpeg, size_t len, const rf_transform *t,
                        uint64_t seed, uint8_t *out, rf_decode_info *info, rf_err *err)
{
    int rc = validate(t, err);
    if (rc)
        return rc;
    xform_job j = {.t = t, .jpeg = jpeg, .len = len, .seed = seed, .out = out};
    rc = guarded(d, jpeg, len, xform_run, &j, err);
    if (rc == 0)
        fill_info(&j, info);
    return rc;
}

/* ---- rf_decode_placed ---------------------------------------------------------------------- */

typedef struct placed_job {
    xform_job x;   /* x.out: placed only when the image is decoded here */
    const rf_decode_place *pl;
    uint32_t bytes;
} placed_job;

static int place_pixels(placed_job *pj, rf_err *err)
{
    size_t n = (size_t)pj->x.t->size * pj->x.t->size * 3;
    if (!(pj->x.out = pj->pl->pixels(pj->pl->ctx, n)))
        return rf_seterr(err, RF_ENOMEM, "no room for a decoded %ux%u sample", pj->x.t->size,
                         pj->x.t->size);
    return 0;
}

static int placed_run(rf_decoder *d, void *job, rf_err *err)
{
    placed_job *pj = job;
    xform_job *j = &pj->x;
    int rc = xform_header(d, j, err);
    if (rc)
        return rc;
    if (d->cmyk || (d->flags & (RF_DECODE_DCT_IFAST | RF_DECODE_NO_FANCY)))
        return place_pixels(pj, err) ? err->code : xform_decode(d, j, err);
    j->num = 8; /* the other engine decodes at full scale */
    set_scale(d, j);
    if ((rc = plan_axes(d, j, err)) != 0)
        return rc;
    rc = pj->pl->pack(pj->pl->ctx, &d->cinfo, j->jpeg, j->len, &d->h, &d->v, j->t, &d->region,
                      &pj->bytes);
    if (rc == 0) {
        j->region = 1;
        return 0;
    }
    if (rc == RF_ENOMEM)
        return rf_seterr(err, RF_ENOMEM, "out of memory for the restart intervals of a %zu-byte "
                         "JPEG", j->len);
    if (place_pixels(pj, err))
        return err->code;
    /* No room for the packet: the CPU decodes at full scale, the bytes the kernels would have
     * given, so where a sample was decoded never shows in the batch. Declined: as the CPU
     * path always does, with the same decompressor. */
    return rc == RF_PLACE_NO_ROOM ? xform_rows(d, j, err) : xform_decode(d, j, err);
}

int rf_decode_placed(rf_decoder *d, const uint8_t *jpeg, size_t len, const rf_transform *t,
                     uint64_t seed, const rf_decode_place *pl, uint32_t *bytes,
                     rf_decode_info *info, rf_err *err)
{
    int rc = validate(t, err);
    if (rc)
        return rc;
    placed_job pj = {.x = {.t = t, .jpeg = jpeg, .len = len, .seed = seed}, .pl = pl};
    rc = guarded(d, jpeg, len, placed_run, &pj, err);
    if (rc)
        return rc;
    *bytes = pj.bytes;
    fill_info(&pj.x, info);
    return 0;
}

/* ---- rf_decode_raw: the host's stand-in for the hardware decoder ------------------------- */

typedef struct raw_job {
    uint32_t ncomp, width, height;
    const rf_decode_plane *planes;
} raw_job;

/* libjpeg's raw output is each component's IDCT samples (islow) before upsampling: what the
 * interval kernel writes and what the hardware decoder's planar output holds, so the packet's
 * own vertical and horizontal passes finish the sample. */
static int raw_run(rf_decoder *d, void *job, rf_err *err)
{
    const raw_job *j = job;
    struct jpeg_decompress_struct *ci = &d->cinfo;
    int rc = read_header_checked(d, err);
    if (rc)
        return rc;
    uint32_t nc = j->ncomp, widest = 0;
    if ((uint32_t)ci->num_components != nc || ci->image_width != j->width ||
        ci->image_height != j->height || nc > 3)
        return rf_seterr(err, RF_EDECODE, "the engine packet does not describe its JPEG");
    for (uint32_t c = 0; c < nc; c++) {
        if (ci->comp_info[c].v_samp_factor > 4)
            return rf_seterr(err, RF_EDECODE, "vertical sampling factor over 4");
        widest = RF_MAX(widest, j->planes[c].width);
    }
    /* Rows past a plane (a grayscale file's iMCU row can be 16 rows, its plane is cut at 8)
     * go to a junk row. */
    if (rf_reserve(&d->line, &d->line_cap, widest, 1))
        return rf_seterr(err, RF_ENOMEM, "out of memory for a %u-sample row", widest);
    ci->raw_data_out = TRUE;
    ci->dct_method = JDCT_ISLOW;
    jpeg_start_decompress(ci);
    JSAMPROW rows[3][4 * DCTSIZE];
    JSAMPARRAY planes[3] = {rows[0], rows[1], rows[2]};
    uint32_t step = (uint32_t)ci->max_v_samp_factor * DCTSIZE;
    for (uint32_t y = 0; ci->output_scanline < ci->output_height; y++) {
        for (uint32_t c = 0; c < nc; c++) {
            const rf_decode_plane *pc = &j->planes[c];
            uint32_t n = (uint32_t)ci->comp_info[c].v_samp_factor * DCTSIZE;
            for (uint32_t r = 0; r < n; r++) {
                uint64_t row = (uint64_t)y * n + r;
                rows[c][r] = row < pc->rows ? pc->base + row * pc->width : d->line;
            }
        }
        if (jpeg_read_raw_data(ci, planes, step) == 0)
            return rf_seterr(err, RF_EDECODE, "libjpeg returned no raw data");
    }
    return 0;
}

int rf_decode_raw(rf_decoder *d, const uint8_t *jpeg, size_t len, uint32_t ncomp, uint32_t width,
                  uint32_t height, const rf_decode_plane *planes, rf_err *err)
{
    raw_job j = {ncomp, width, height, planes};
    return guarded(d, jpeg, len, raw_run, &j, err);
}

/* ---- rf_decode_full and rf_jpeg_probe ---------------------------------------------------- */

typedef struct full_job {
    uint8_t *buf; /* owned here until handed to the caller, so an error can free it */
    uint32_t w, h;
} full_job;

static int full_run(rf_decoder *d, void *job, rf_err *err)
{
    full_job *j = job;
    int rc = read_header_checked(d, err);
    if (rc)
        return rc;
    jpeg_start_decompress(&d->cinfo);
    j->w = d->cinfo.output_width, j->h = d->cinfo.output_height;
    size_t stride = (size_t)j->w * 3;
    if (ensure_line(d, err))
        return err->code;
    if (!(j->buf = malloc(stride * j->h)))
        return rf_seterr(err, RF_ENOMEM, "out of memory for a %ux%u image", j->w, j->h);
    for (uint32_t y = 0; y < j->h; y++) {
        uint8_t *row = j->buf + y * stride;
        const uint8_t *src = read_rgb_line(d, row, err);
        if (!src)
            return err->code;
        if (src != row)
            memcpy(row, src, stride);
    }
    jpeg_finish_decompress(&d->cinfo); /* reads to EOI: trailing corruption is reported too */
    return 0;
}

int rf_decode_full(rf_decoder *d, const uint8_t *jpeg, size_t len, uint8_t **out, uint32_t *width,
                   uint32_t *height, rf_err *err)
{
    full_job j = {0};
    int rc = guarded(d, jpeg, len, full_run, &j, err);
    if (rc) {
        free(j.buf);
        *out = NULL;
        return rc;
    }
    *out = j.buf, *width = j.w, *height = j.h;
    return 0;
}

int rf_jpeg_soi_check(const uint8_t *data, uint64_t len, rf_err *err)
{
    if (len >= 3 && data[0] == 0xFF && data[1] == 0xD8)
        return 0;
    return rf_seterr(err, RF_EDECODE, "not a JPEG (%llu bytes, no SOI marker)",
                     (unsigned long long)len);
}

/* rf_decode_check: the loader's own checks (limits, colour space, marker structure), then
 * every scanline of every scan decoded and the file read to its EOI, one row at a time, so
 * that a clean check means no crop of any epoch can fail. */
typedef struct check_job {
    const uint8_t *jpeg;
    size_t len;
    rf_jpeg_info *info;
} check_job;

static int check_run(rf_decoder *d, void *job, rf_err *err)
{
    check_job *j = job;
    struct jpeg_decompress_struct *ci = &d->cinfo;
    int rc = read_header_checked(d, err);
    if (rc || (rc = check_scan(d, j->jpeg, j->len, err)) != 0)
        return rc;
    rf_jpeg_geom g;
    j->info->width = ci->image_width, j->info->height = ci->image_height;
    j->info->progressive = ci->progressive_mode ? 1 : 0;
    j->info->restart_interval = ci->restart_interval;
    j->info->region_ready = (uint32_t)rf_jpeg_geom_read(ci, &g);
    jpeg_start_decompress(ci);
    if (ensure_line(d, err))
        return err->code;
    while (ci->output_scanline < ci->output_height)
        if (!read_rgb_line(d, d->line, err))
            return err->code;
    jpeg_finish_decompress(ci);
    return 0;
}

int rf_decode_check(rf_decoder *d, const uint8_t *jpeg, size_t len, rf_jpeg_info *info,
                    rf_err *err)
{
    rf_jpeg_info i = {0};
    check_job j = {jpeg, len, &i};
    int rc = guarded(d, jpeg, len, check_run, &j, err);
    *info = rc ? (rf_jpeg_info){0} : i;
    return rc;
}

static int probe_run(rf_decoder *d, void *job, rf_err *err)
{
    (void)err;
    rf_jpeg_info *i = job;
    struct jpeg_decompress_struct *ci = &d->cinfo;
    jpeg_read_header(ci, TRUE);
    rf_jpeg_geom g;
    i->width = ci->image_width, i->height = ci->image_height;
    i->progressive = ci->progressive_mode ? 1 : 0;
    i->restart_interval = ci->restart_interval;
    i->region_ready = (uint32_t)rf_jpeg_geom_read(ci, &g);
    return 0;
}

int rf_jpeg_probe(rf_decoder *d, const uint8_t *jpeg, size_t len, rf_jpeg_info *info,
                  rf_err *err)
{
    rf_jpeg_info i = {0};
    int rc = guarded(d, jpeg, len, probe_run, &i, err);
    *info = rc ? (rf_jpeg_info){0} : i;
    return rc;
}
