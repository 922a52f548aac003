/* decoder.h — private to decode/: the decoder's struct and what its files share. The rest of
 * the library sees the decoder through decode.h only. */
#ifndef RF_DECODER_H
#define RF_DECODER_H

#include <math.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h> /* jpeglib.h needs FILE */

#include <jpeglib.h>

#include "decode/decode.h"
#include "decode/jpeg_restart.h"
#include "decode/resize.h"

typedef struct rf_jerr {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    int code;
    int lenient; /* warnings (corrupt data) go unreported, as by the hardware decoder */
    uint32_t recovered; /* the decode's warnings that cost no pixel: 1 << enum rf_recovered */
    char msg[JMSG_LENGTH_MAX + 64];
} rf_jerr;

typedef struct rf_jprogress {
    struct jpeg_progress_mgr pub;
    uint32_t max_scans;
} rf_jprogress;

/* A crop of the original image. Fractional for CENTER (torchvision resizes, then crops whole
 * pixels of the resized image). clamp_box: filter taps stay inside the box (RandomResizedCrop
 * crops, then resizes) rather than inside the image. The box is resized onto the output
 * rectangle out_x, out_y, out_w, out_h (the whole output but for LETTERBOX and CENTER_PAD),
 * given as before the flip: a flip mirrors the whole output, rectangle and all (rf_dec_out_x).
 * The output is canvas_w x canvas_h: t's width x height, or for NATIVE the image's own size,
 * written packed from the sample's start. */
typedef struct crop_box {
    double x, y, w, h;
    int clamp_box;
    uint32_t flip;
    uint32_t out_x, out_y, out_w, out_h;
    uint32_t canvas_w, canvas_h;
} crop_box;

/* The rectangle's left column in the output as delivered (after the flip). */
static inline uint32_t rf_dec_out_x(const crop_box *b)
{
    return b->flip ? b->canvas_w - b->out_x - b->out_w : b->out_x;
}

/* Columns and rows of the (DCT-scaled) image decoded into memory: px is column x0, row y0. */
typedef struct rf_dec_rect {
    const uint8_t *px;
    size_t stride; /* bytes from a row to the next */
    int32_t x0, y0;
    uint32_t w, h;
} rf_dec_rect;

/* rf_decode_views' state (views.c), in the decoder: it lives across the JPEG decoder's setjmp.
 * Everything before box is reset per image. */
typedef struct rf_views_job {
    const rf_transform *base;
    const rf_views *v;
    const uint8_t *data;
    size_t len;
    uint64_t seed;
    uint8_t *out;
    rf_decode_info *infos;
    uint32_t W, H;          /* the image's full size */
    uint32_t region, imcu_rows;
    crop_box box[RF_VIEWS_MAX];   /* each view's: its crop and where it lands (rf_dec_choose_box) */
    rf_transform t[RF_VIEWS_MAX]; /* each view's (rf_view_transform) */
    rf_axis ph[RF_VIEWS_MAX], pv[RF_VIEWS_MAX]; /* each view's full-scale plans, for a packet */
} rf_views_job;

struct rf_decoder {
    struct jpeg_decompress_struct cinfo;
    rf_jerr jerr;
    rf_jprogress progress;
    rf_decode_limits lim;
    uint32_t max_denom;
    uint32_t flags; /* enum rf_decode_flag */
    int cmyk; /* this image is decoded as CMYK and converted per row */
    rf_axis h, v;
    crop_box box; /* what h and v were planned for: where rf_dec_rows writes */
    uint32_t row_px; /* pixels in each row of the resize ring (rf_dec_scratch) */
    uint8_t *line, *rgb, *ring, *vrow, *orow;
    size_t line_cap, rgb_cap, ring_cap, vrow_cap, orow_cap;
    const uint8_t **rows;
    size_t rows_cap;
    int32_t *acc;
    size_t acc_cap;
    rf_region_buf region;
    uint8_t *img;  /* a WebP crop or an interlaced PNG, decoded whole; the views' rectangle
                      (only grows) */
    size_t img_cap;
    uint8_t *mask_raw, *mask_px; /* a mask as libspng gives it; sub-byte indices unpacked */
    size_t mask_raw_cap, mask_px_cap;
    uint32_t *mask_cols;         /* the source column of each output column */
    size_t mask_cols_cap;
    rf_views_job views;
    int box_given;  /* rf_decode_image_box: this box instead of the seed's */
    crop_box given;
};

/* Python's round(): half to even, which rint() does in the default rounding mode. */
static inline int64_t rf_py_round(double v) { return (int64_t)rint(v); }

/* ---- jpeg_decode.c ---- */

typedef int (*rf_dec_job_fn)(rf_decoder *d, void *job, rf_err *err);

int rf_dec_guarded(rf_decoder *d, const uint8_t *jpeg, size_t len, rf_dec_job_fn fn, void *job,
                   rf_err *err);
int rf_dec_read_header(rf_decoder *d, rf_err *err);
int rf_dec_ensure_line(rf_decoder *d, rf_err *err);
const uint8_t *rf_dec_read_rgb_line(rf_decoder *d, uint8_t *direct, rf_err *err);
int rf_dec_check_scan(rf_decoder *d, const uint8_t *jpeg, size_t len, rf_err *err);

/* ---- transform.c: the rows and the resize, for every format ---- */

/* The next decoded RGB row, written into slot or returned from elsewhere; NULL on failure. */
typedef const uint8_t *(*rf_dec_row_fn)(void *src, uint8_t *slot, rf_err *err);

/* Plan both axes of box b at full scale on a W x H image, relative to its top-left pixel. */
int rf_dec_plan_full(rf_decoder *d, const rf_transform *t, const crop_box *b, uint32_t W,
                     uint32_t H, rf_err *err);
void rf_dec_axis_shift(rf_axis *a, int32_t by);
/* Size the resize scratch for rows of row_px pixels (after the axes were shifted onto the
 * first column and row delivered) and output rows of out_w pixels. */
int rf_dec_scratch(rf_decoder *d, uint32_t row_px, uint32_t out_w, rf_err *err);
/* Pull d->v.last rows from next(src) and write the sample's t->height rows to out. */
int rf_dec_rows(rf_decoder *d, const rf_transform *t, uint8_t *out, rf_dec_row_fn next,
                void *src, rf_err *err);

int rf_dec_validate(const rf_transform *t, rf_err *err);

/* Plan both axes of box b on a W x H image decoded at scale num/8 (W, H the scaled size). */
int rf_dec_plan_scaled(rf_decoder *d, const crop_box *b, uint32_t num, uint32_t W, uint32_t H,
                       rf_err *err);

/* ---- transform.c: the views' part every format shares; each format's part of
 * rf_decode_views (views.c) ---- */

/* Open d's views job for one image: each view's transform checked, the job's per-image state
 * reset. out: where the views are decoded (NULL until a placement says). */
int rf_dec_views_start(rf_decoder *d, const uint8_t *data, size_t len, const rf_transform *base,
                       const rf_views *v, uint64_t seed, uint8_t *out, rf_decode_info *infos,
                       rf_err *err);
/* Each view's box, geometry and transform on a W x H image (j->seed, j->base, j->v). */
void rf_dec_views_boxes(rf_views_job *j, uint32_t W, uint32_t H);
/* The union of the columns c[0]..c[1] and rows c[2]..c[3] the views' filters read, at scale
 * num/8 on the Ws x Hs scaled image. */
int rf_dec_views_cover(rf_decoder *d, const rf_views_job *j, uint32_t num, uint32_t Ws,
                       uint32_t Hs, int32_t c[4], rf_err *err);
/* Resize every view from r into j->out, filling j->infos. */
int rf_dec_views_cut(rf_decoder *d, rf_views_job *j, uint32_t num, uint32_t Ws, uint32_t Hs,
                     const rf_dec_rect *r, rf_err *err);
/* The formats' parts: header, boxes, the rectangle decoded once, the views cut. The JPEG one
 * runs inside rf_dec_guarded (job: the rf_views_job). */
int rf_dec_jpeg_views(rf_decoder *d, void *job, rf_err *err);
int rf_png_views(rf_decoder *d, const uint8_t *png, size_t len, rf_views_job *j, rf_err *err);
int rf_webp_views(rf_decoder *d, const uint8_t *webp, size_t len, rf_views_job *j,
                  rf_err *err);

/* ---- png_decode.c, webp_decode.c: the other formats, through the rows above ---- */

int rf_png_transform(rf_decoder *d, const uint8_t *png, size_t len, const rf_transform *t,
                     uint64_t seed, uint8_t *out, rf_decode_info *info, rf_err *err);
int rf_webp_transform(rf_decoder *d, const uint8_t *webp, size_t len, const rf_transform *t,
                      uint64_t seed, uint8_t *out, rf_decode_info *info, rf_err *err);
/* Every row decoded: 0 means no crop can fail on the file. */
int rf_png_check(rf_decoder *d, const uint8_t *png, size_t len, uint32_t *w, uint32_t *h,
                 rf_err *err);
int rf_webp_check(rf_decoder *d, const uint8_t *webp, size_t len, uint32_t *w, uint32_t *h,
                  rf_err *err);
int rf_dec_check_size(const rf_decoder *d, const char *what, uint64_t w, uint64_t h,
                      rf_err *err);
/* info for a full-scale decode (no DCT scale, no region). */
void rf_dec_fill_info(uint32_t W, uint32_t H, const crop_box *b, rf_decode_info *info);
/* Write t->pad into every pixel of b's canvas outside b's rectangle (flip applied). */
void rf_dec_pad(const rf_transform *t, const crop_box *b, uint8_t *out);

/* ---- crop.c ---- */

void rf_dec_choose_box(const rf_transform *t, uint32_t W, uint32_t H, uint64_t seed,
                       crop_box *b);
/* The decode's box: rf_dec_choose_box's, or the one rf_decode_image_box gave. */
void rf_dec_box(const rf_decoder *d, const rf_transform *t, uint32_t W, uint32_t H,
                uint64_t seed, crop_box *b);

#endif
