/* views.c — multi-crop (rf_config.multi_crop): the views' text, and rf_decode_views, which
 * decodes an image once and cuts every view from it (each view's transform and seed: crop.c;
 * the boxes, their union and the cuts every format shares: transform.c).
 *
 * DESIGN
 *  - Each view is the single-view decode's crop and resize with a transform of its own (size,
 *    scale range) and a seed of its own (rf_view_seed), so its box and flip are a pure
 *    function of the sample's seed, k and the image's size: the same at any thread count and
 *    after a resume, and its pixels those rf_decode_image gives for that transform and seed at
 *    the same DCT scale.
 *  - The format's part (transform.c for JPEG, png_decode.c, webp_decode.c) reads the header,
 *    asks rf_dec_views_boxes for the boxes and rf_dec_views_cover for the union of the rows and
 *    columns the views' filters read, decodes that rectangle once into d->img (decoded pixels
 *    of a rectangle equal the whole image's there: the margins the single-view paths keep
 *    apply to the union), and hands it to rf_dec_views_cut, which resizes each view from it
 *    through the same rows (rf_dec_rows) as a single view. */
#include "decode/decoder.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ---- the text ---- */

static const char *skip_space(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

static int read_u32(const char **p, uint32_t *out)
{
    char *end;
    if (**p < '0' || **p > '9')
        return -1;
    errno = 0;
    unsigned long v = strtoul(*p, &end, 10);
    if (errno || v > UINT32_MAX)
        return -1;
    *out = (uint32_t)v, *p = end;
    return 0;
}

static int read_f32(const char **p, float *out)
{
    char *end;
    if ((**p < '0' || **p > '9') && **p != '.')
        return -1;
    errno = 0;
    float v = strtof(*p, &end);
    if (errno || end == *p)
        return -1;
    *out = v, *p = end;
    return 0;
}

/* One group "COUNTxH[xW][:SMIN-SMAX]" at *p, up to a ',' or the end. */
static int parse_group(const char **pp, uint32_t g, float smin, float smax, rf_views *v,
                       rf_err *err)
{
    const char *p = skip_space(*pp), *start = p;
    uint32_t count, h, w;
    if (read_u32(&p, &count) || *p++ != 'x' || read_u32(&p, &h))
        goto bad;
    w = h;
    if (*p == 'x' && (p++, read_u32(&p, &w)))
        goto bad;
    if (*p == ':' && (p++, read_f32(&p, &smin) || *p++ != '-' || read_f32(&p, &smax)))
        goto bad;
    p = skip_space(p);
    if (*p != ',' && *p != '\0')
        goto bad;
    if (count == 0 || count > RF_VIEWS_MAX - v->n)
        return rf_seterr(err, RF_EINVAL, "multi_crop group %u (\"%.*s\"): %u views; the groups "
                         "may hold 1..%u views in all", g + 1, (int)(p - start), start, count,
                         RF_VIEWS_MAX);
    if (h == 0 || h > 8192 || w == 0 || w > 8192)
        return rf_seterr(err, RF_EINVAL, "multi_crop group %u (\"%.*s\"): size %ux%u (height x "
                         "width) out of range 1..8192", g + 1, (int)(p - start), start, h, w);
    if (!(smin > 0 && smin <= smax && smax <= 1))
        return rf_seterr(err, RF_EINVAL, "multi_crop group %u (\"%.*s\"): scale range %g-%g "
                         "must satisfy 0 < min <= max <= 1", g + 1, (int)(p - start), start,
                         (double)smin, (double)smax);
    for (uint32_t i = 0; i < count; i++, v->n++) {
        v->height[v->n] = h, v->width[v->n] = w;
        v->scale_min[v->n] = smin, v->scale_max[v->n] = smax;
        v->offset[v->n] = v->bytes;
        v->bytes += (uint64_t)h * w * 3;
    }
    *pp = p;
    return 0;
bad:;
    size_t n = strcspn(start, ",");
    return rf_seterr(err, RF_EINVAL, "multi_crop group %u (\"%.*s\") is not COUNTxSIZE, "
                     "COUNTxHEIGHTxWIDTH, either followed by :SCALE_MIN-SCALE_MAX (e.g. "
                     "\"2x224:0.4-1,6x96:0.05-0.4\")", g + 1, (int)RF_MIN(n, 64), start);
}

int rf_views_parse(const char *text, float scale_min, float scale_max, rf_views *v,
                   rf_err *err)
{
    memset(v, 0, sizeof *v);
    if (!text || !*skip_space(text))
        return 0;
    if (strnlen(text, RF_VIEWS_TEXT_MAX + 1) > RF_VIEWS_TEXT_MAX)
        return rf_seterr(err, RF_EINVAL, "multi_crop is longer than %d bytes",
                         RF_VIEWS_TEXT_MAX);
    const char *p = text;
    for (;; p++) {
        int rc = parse_group(&p, v->ngroups, scale_min, scale_max, v, err);
        if (rc) {
            memset(v, 0, sizeof *v);
            return rc;
        }
        v->ngroups++;
        if (*p == '\0')
            return 0;
    }
}

/* ---- the decode ---- */

int rf_decode_views(rf_decoder *d, const uint8_t *data, size_t len, const rf_transform *base,
                    const rf_views *v, uint64_t seed, uint8_t *out, rf_decode_info *infos,
                    rf_err *err)
{
    int rc = rf_dec_views_start(d, data, len, base, v, seed, out, infos, err);
    if (rc)
        return rc;
    switch (rf_image_sniff(data, len)) {
    case RF_IMAGE_JPEG: return rf_dec_guarded(d, data, len, rf_dec_jpeg_views, &d->views, err);
    case RF_IMAGE_PNG: return rf_png_views(d, data, len, &d->views, err);
    case RF_IMAGE_WEBP: return rf_webp_views(d, data, len, &d->views, err);
    default: {
        uint32_t f;
        return rf_image_magic_check(data, len, &f, err);
    }
    }
}

int rf_decode_sample(rf_decoder *d, const uint8_t *data, size_t len, const rf_transform *t,
                     const rf_views *v, uint64_t seed, uint8_t *out, rf_decode_info *info,
                     rf_err *err)
{
    return v && v->n ? rf_decode_views(d, data, len, t, v, seed, out, info, err)
                     : rf_decode_image(d, data, len, t, seed, out, info, err);
}
