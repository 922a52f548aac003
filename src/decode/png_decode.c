/* png_decode.c — PNG samples through libspng: the header and its limits, then the crop's rows
 * into rf_dec_rows, as JPEG's rows go.
 *
 * DESIGN
 *  - Limits first: the IHDR's size is checked before libspng is given the file, so no buffer
 *    of a bomb's declared size is asked for; chunk limits bound ancillary chunks. Image data is
 *    inflated into rows of the declared width, and nothing after the last row.
 *  - A non-interlaced PNG is decoded row by row, stopping after the last row the taps reach
 *    (damage past it goes unseen, as for JPEG; rf_png_check reads to IEND). An interlaced one
 *    has no complete row before its last pass: decoded whole into d->img.
 *  - SPNG_FMT_RGB8: palette and grayscale expanded, 16-bit samples' high byte, alpha dropped
 *    (no blending, no gamma). */
#include "decode/decoder.h"

#include <spng.h>
#include <string.h>

typedef struct png_src {
    spng_ctx *ctx;
    rf_decoder *d;
    uint32_t width, height, interlaced, x0, y; /* y: image rows delivered or passed */
    size_t row_bytes;
} png_src;

static int png_fail(int rc, const char *what, rf_err *err)
{
    int code = rc == SPNG_EMEM ? RF_ENOMEM
               : rc == SPNG_EUSER_WIDTH || rc == SPNG_EUSER_HEIGHT || rc == SPNG_ECHUNK_LIMITS
                   ? RF_ELIMIT
                   : RF_EDECODE;
    return rf_seterr(err, code, "PNG %s: %s", what, spng_strerror(rc));
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int png_size_check(const rf_decoder *d, const uint8_t *png, size_t len, rf_err *err)
{
    if (len < 24 || memcmp(png + 12, "IHDR", 4) != 0)
        return rf_seterr(err, RF_EDECODE, "PNG of %zu bytes has no IHDR chunk first", len);
    return rf_dec_check_size(d, "PNG", be32(png + 16), be32(png + 20), err);
}

/* A context on png[0..len) with the decoder's limits and its header read and checked. The
 * caller frees s->ctx whatever this returns. */
static int png_open(rf_decoder *d, const uint8_t *png, size_t len, png_src *s, rf_err *err)
{
    struct spng_ihdr ih;
    int rc;
    memset(s, 0, sizeof *s);
    s->d = d;
    if ((rc = png_size_check(d, png, len, err)) != 0)
        return rc;
    if (!(s->ctx = spng_ctx_new(0)))
        return rf_seterr(err, RF_ENOMEM, "out of memory for a PNG decoder");
    if ((rc = spng_set_image_limits(s->ctx, d->lim.max_dim, d->lim.max_dim)) != 0 ||
        (rc = spng_set_chunk_limits(s->ctx, RF_PNG_CHUNK_MAX, RF_PNG_CACHE_MAX)) != 0 ||
        (rc = spng_set_png_buffer(s->ctx, png, len)) != 0)
        return png_fail(rc, "setup", err);
    if ((rc = spng_get_ihdr(s->ctx, &ih)) != 0)
        return png_fail(rc, "header", err);
    s->width = ih.width, s->height = ih.height, s->interlaced = ih.interlace_method != 0;
    s->row_bytes = (size_t)ih.width * 3;
    return 0;
}

static int png_start(png_src *s, rf_err *err)
{
    rf_decoder *d = s->d;
    size_t n = s->row_bytes * s->height;
    int rc;
    if (!s->interlaced) {
        if (rf_reserve(&d->line, &d->line_cap, s->row_bytes + RF_RESIZE_SRC_PAD, 1))
            return rf_seterr(err, RF_ENOMEM, "out of memory for a %u-pixel PNG row", s->width);
        rc = spng_decode_image(s->ctx, NULL, 0, SPNG_FMT_RGB8, SPNG_DECODE_PROGRESSIVE);
        return rc ? png_fail(rc, "decode", err) : 0;
    }
    if (rf_reserve(&d->img, &d->img_cap, n, 1))
        return rf_seterr(err, RF_ENOMEM, "out of memory for a %ux%u interlaced PNG", s->width,
                         s->height);
    rc = spng_decode_image(s->ctx, d->img, n, SPNG_FMT_RGB8, 0);
    return rc ? png_fail(rc, "decode", err) : 0;
}

/* The next image row, whole (x0 = 0) or from column x0 on. */
static const uint8_t *png_row(void *src, uint8_t *slot, rf_err *err)
{
    png_src *s = src;
    const uint8_t *row = s->d->line;
    (void)slot;
    if (s->interlaced) {
        row = s->d->img + s->row_bytes * s->y;
    } else {
        int rc = spng_decode_row(s->ctx, s->d->line, s->row_bytes);
        if (rc != 0 && rc != SPNG_EOI) { /* SPNG_EOI: this was the last row */
            png_fail(rc, "row", err);
            return NULL;
        }
    }
    s->y++;
    return row + (size_t)s->x0 * 3;
}

static int png_transform_run(png_src *s, const rf_transform *t, uint64_t seed, uint8_t *out,
                             rf_decode_info *info, rf_err *err)
{
    rf_decoder *d = s->d;
    crop_box b;
    rf_dec_box(d, t, s->width, s->height, seed, &b);
    int rc = rf_dec_plan_full(d, t, &b, s->width, s->height, err);
    if (rc || (rc = png_start(s, err)) != 0)
        return rc;
    s->x0 = (uint32_t)d->h.first;
    rf_dec_axis_shift(&d->h, d->h.first);
    uint32_t y0 = (uint32_t)d->v.first;
    rf_dec_axis_shift(&d->v, d->v.first);
    if ((rc = rf_dec_scratch(d, (uint32_t)d->h.last, t->width, err)) != 0)
        return rc;
    while (s->y < y0)
        if (!png_row(s, NULL, err))
            return err->code;
    if ((rc = rf_dec_rows(d, t, out, png_row, s, err)) == 0)
        rf_dec_fill_info(s->width, s->height, &b, info);
    return rc;
}

int rf_png_transform(rf_decoder *d, const uint8_t *png, size_t len, const rf_transform *t,
                     uint64_t seed, uint8_t *out, rf_decode_info *info, rf_err *err)
{
    png_src s;
    int rc = rf_dec_validate(t, err);
    if (rc == 0 && (rc = png_open(d, png, len, &s, err)) == 0)
        rc = png_transform_run(&s, t, seed, out, info, err);
    spng_ctx_free(s.ctx);
    return rc;
}

int rf_png_check(rf_decoder *d, const uint8_t *png, size_t len, uint32_t *w, uint32_t *h,
                 rf_err *err)
{
    png_src s;
    int rc = png_open(d, png, len, &s, err);
    if (rc == 0 && (rc = png_start(&s, err)) == 0)
        while (!s.interlaced && s.y < s.height && rc == 0)
            rc = png_row(&s, NULL, err) ? 0 : err->code;
    int crc = rc == 0 ? spng_decode_chunks(s.ctx) : 0; /* the chunks after the image, to IEND */
    if (crc)
        rc = png_fail(crc, "after the image", err);
    if (rc == 0)
        *w = s.width, *h = s.height;
    spng_ctx_free(s.ctx);
    return rc;
}

/* The union's rows and columns c (rf_dec_views_cover) as a rectangle: an interlaced PNG's is
 * the whole image, already in d->img; otherwise its rows are decoded up to the last and the
 * columns copied into d->img. */
static int png_rect(png_src *s, const int32_t c[4], rf_dec_rect *r, rf_err *err)
{
    rf_decoder *d = s->d;
    if (s->interlaced) {
        *r = (rf_dec_rect){d->img, s->row_bytes, 0, 0, s->width, s->height};
        return 0;
    }
    uint32_t cols = (uint32_t)(c[1] - c[0]), rows = (uint32_t)(c[3] - c[2]);
    size_t stride = (size_t)cols * 3;
    if (rf_reserve(&d->img, &d->img_cap, stride * rows, 1))
        return rf_seterr(err, RF_ENOMEM, "out of memory for a %ux%u PNG crop", cols, rows);
    while (s->y < (uint32_t)c[2])
        if (!png_row(s, NULL, err))
            return err->code;
    for (uint32_t y = 0; y < rows; y++) {
        const uint8_t *row = png_row(s, NULL, err);
        if (!row)
            return err->code;
        memcpy(d->img + stride * y, row + (size_t)c[0] * 3, stride);
    }
    *r = (rf_dec_rect){d->img, stride, c[0], c[2], cols, rows};
    return 0;
}

int rf_png_views(rf_decoder *d, const uint8_t *png, size_t len, rf_views_job *j, rf_err *err)
{
    png_src s;
    int32_t c[4];
    rf_dec_rect r;
    int rc = png_open(d, png, len, &s, err);
    if (rc == 0) {
        rf_dec_views_boxes(j, s.width, s.height);
        rc = rf_dec_views_cover(d, j, 8, s.width, s.height, c, err);
    }
    if (rc == 0 && (rc = png_start(&s, err)) == 0 && (rc = png_rect(&s, c, &r, err)) == 0)
        rc = rf_dec_views_cut(d, j, 8, s.width, s.height, &r, err);
    spng_ctx_free(s.ctx);
    return rc;
}
