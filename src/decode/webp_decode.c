/* webp_decode.c — WebP samples through libwebp: the header and its limits, the crop's
 * rectangle decoded by libwebp itself (use_cropping), then its rows into rf_dec_rows.
 * use_scaling is not used: libwebp's rescaler is an area average, so a picture stored as PNG
 * and as lossless WebP would give different batches. Animated WebP is refused. */
#include "decode/decoder.h"

#include <string.h>
#include <webp/decode.h>

/* Pixels decoded beyond the crop's rectangle on each side: one 4:2:0 chroma sample is two. */
#define WEBP_CROP_MARGIN 2

typedef struct webp_src {
    const uint8_t *px;
    size_t stride;
    uint32_t y;
} webp_src;

static int webp_fail(VP8StatusCode st, const char *what, rf_err *err)
{
    static const char *const text[] = {"ok", "out of memory", "invalid parameter",
                                       "bitstream error", "unsupported feature", "suspended",
                                       "user abort", "not enough data (truncated)"};
    const char *why = (unsigned)st < sizeof text / sizeof text[0] ? text[st] : "unknown error";
    return rf_seterr(err, st == VP8_STATUS_OUT_OF_MEMORY ? RF_ENOMEM : RF_EDECODE,
                     "WebP %s: %s (status %d)", what, why, (int)st);
}

/* The header: size and features, against the limits. */
static int webp_open(rf_decoder *d, const uint8_t *webp, size_t len, WebPDecoderConfig *c,
                     rf_err *err)
{
    if (!WebPInitDecoderConfig(c))
        return rf_seterr(err, RF_EDECODE, "WebP decoder version mismatch");
    VP8StatusCode st = WebPGetFeatures(webp, len, &c->input);
    if (st != VP8_STATUS_OK)
        return webp_fail(st, "header", err);
    if (c->input.has_animation)
        return rf_seterr(err, RF_EDECODE, "WebP is animated: not supported");
    return rf_dec_check_size(d, "WebP", (uint64_t)c->input.width, (uint64_t)c->input.height,
                             err);
}

static int webp_decode_rect(rf_decoder *d, const uint8_t *webp, size_t len,
                            WebPDecoderConfig *c, int x0, int y0, int x1, int y1, rf_err *err)
{
    size_t stride = (size_t)(x1 - x0) * 3, n = stride * (size_t)(y1 - y0);
    if (rf_reserve(&d->img, &d->img_cap, n, 1))
        return rf_seterr(err, RF_ENOMEM, "out of memory for a %dx%d WebP crop", x1 - x0,
                         y1 - y0);
    c->options.use_cropping = 1;
    c->options.crop_left = x0, c->options.crop_top = y0;
    c->options.crop_width = x1 - x0, c->options.crop_height = y1 - y0;
    c->output.colorspace = MODE_RGB;
    c->output.is_external_memory = 1;
    c->output.u.RGBA.rgba = d->img;
    c->output.u.RGBA.stride = (int)stride;
    c->output.u.RGBA.size = n;
    VP8StatusCode st = WebPDecode(webp, len, c);
    WebPFreeDecBuffer(&c->output);
    return st == VP8_STATUS_OK ? 0 : webp_fail(st, "decode", err);
}

static const uint8_t *webp_row(void *src, uint8_t *slot, rf_err *err)
{
    webp_src *s = src;
    (void)slot, (void)err;
    return s->px + s->stride * s->y++;
}

int rf_webp_transform(rf_decoder *d, const uint8_t *webp, size_t len, const rf_transform *t,
                      uint64_t seed, uint8_t *out, rf_decode_info *info, rf_err *err)
{
    WebPDecoderConfig c;
    crop_box b;
    int rc = rf_dec_validate(t, err);
    if (rc || (rc = webp_open(d, webp, len, &c, err)) != 0)
        return rc;
    uint32_t W = (uint32_t)c.input.width, H = (uint32_t)c.input.height;
    rf_dec_box(d, t, W, H, seed, &b);
    if ((rc = rf_dec_plan_full(d, t, &b, W, H, err)) != 0)
        return rc;
    /* WEBP_CROP_MARGIN pixels beyond what the taps read, on every side the picture has:
     * libwebp's fancy upsampling repeats the edge of a cropped output instead of interpolating,
     * so without the margin a lossy crop's edges differ from a whole decode's (by up to 27
     * levels). libwebp also moves a lossy crop's origin down to even coordinates; starting
     * there ourselves keeps the rectangle where the plans say. */
    int x0 = RF_MAX(d->h.first - WEBP_CROP_MARGIN, 0) & ~1;
    int y0 = RF_MAX(d->v.first - WEBP_CROP_MARGIN, 0) & ~1;
    int x1 = RF_MIN(d->h.last + WEBP_CROP_MARGIN, (int)W);
    int y1 = RF_MIN(d->v.last + WEBP_CROP_MARGIN, (int)H);
    rf_dec_axis_shift(&d->h, x0);
    rf_dec_axis_shift(&d->v, y0);
    if ((rc = webp_decode_rect(d, webp, len, &c, x0, y0, x1, y1, err)) != 0 ||
        (rc = rf_dec_scratch(d, (uint32_t)(x1 - x0), t->width, err)) != 0)
        return rc;
    webp_src s = {d->img, (size_t)(x1 - x0) * 3, 0};
    if ((rc = rf_dec_rows(d, t, out, webp_row, &s, err)) == 0)
        rf_dec_fill_info(W, H, &b, info);
    return rc;
}

int rf_webp_check(rf_decoder *d, const uint8_t *webp, size_t len, uint32_t *w, uint32_t *h,
                  rf_err *err)
{
    WebPDecoderConfig c;
    int rc = webp_open(d, webp, len, &c, err);
    if (rc == 0)
        rc = webp_decode_rect(d, webp, len, &c, 0, 0, c.input.width, c.input.height, err);
    if (rc == 0)
        *w = (uint32_t)c.input.width, *h = (uint32_t)c.input.height;
    return rc;
}

/* Every view from one decode of the rectangle that covers them all, with the margin and the
 * even origin rf_webp_transform keeps for one crop. */
int rf_webp_views(rf_decoder *d, const uint8_t *webp, size_t len, rf_views_job *j, rf_err *err)
{
    WebPDecoderConfig c;
    int32_t u[4];
    int rc = webp_open(d, webp, len, &c, err);
    if (rc)
        return rc;
    uint32_t W = (uint32_t)c.input.width, H = (uint32_t)c.input.height;
    rf_dec_views_boxes(j, W, H);
    if ((rc = rf_dec_views_cover(d, j, 8, W, H, u, err)) != 0)
        return rc;
    int x0 = RF_MAX(u[0] - WEBP_CROP_MARGIN, 0) & ~1;
    int y0 = RF_MAX(u[2] - WEBP_CROP_MARGIN, 0) & ~1;
    int x1 = RF_MIN(u[1] + WEBP_CROP_MARGIN, (int)W);
    int y1 = RF_MIN(u[3] + WEBP_CROP_MARGIN, (int)H);
    if ((rc = webp_decode_rect(d, webp, len, &c, x0, y0, x1, y1, err)) != 0)
        return rc;
    rf_dec_rect r = {d->img, (size_t)(x1 - x0) * 3, x0, y0, (uint32_t)(x1 - x0),
                     (uint32_t)(y1 - y0)};
    return rf_dec_views_cut(d, j, 8, W, H, &r, err);
}
