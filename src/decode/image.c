/* image.c — which decoder a payload gets: the format is read from its first bytes (the magic
 * numbers), never from the member's extension, so a .png member holding a JPEG is decoded as
 * the JPEG it is. JPEG is tested first: it is the fast path and nearly every sample. Also the
 * limits check and the decode info every format shares. */
#include "decode/decoder.h"

#include <string.h>

uint32_t rf_image_sniff(const uint8_t *p, uint64_t len)
{
    static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    if (rf_jpeg_has_soi(p, len))
        return RF_IMAGE_JPEG;
    if (len >= 8 && memcmp(p, png_sig, 8) == 0)
        return RF_IMAGE_PNG;
    if (len >= 12 && memcmp(p, "RIFF", 4) == 0 && memcmp(p + 8, "WEBP", 4) == 0)
        return RF_IMAGE_WEBP;
    return RF_IMAGE_UNKNOWN;
}

int rf_image_magic_check(const uint8_t *p, uint64_t len, uint32_t *format, rf_err *err)
{
    *format = rf_image_sniff(p, len);
    if (*format != RF_IMAGE_UNKNOWN)
        return 0;
    return rf_seterr(err, RF_EDECODE, "not an image (%llu bytes, no JPEG, PNG or WebP "
                     "signature)", (unsigned long long)len);
}

int rf_decode_image(rf_decoder *d, const uint8_t *data, size_t len, const rf_transform *t,
                    uint64_t seed, uint8_t *out, rf_decode_info *info, rf_err *err)
{
    d->jerr.recovered = 0; /* a JPEG decode records its own; PNG and WebP have none */
    switch (rf_image_sniff(data, len)) {
    case RF_IMAGE_JPEG: return rf_decode_transform(d, data, len, t, seed, out, info, err);
    case RF_IMAGE_PNG: return rf_png_transform(d, data, len, t, seed, out, info, err);
    case RF_IMAGE_WEBP: return rf_webp_transform(d, data, len, t, seed, out, info, err);
    default: {
        uint32_t f;
        return rf_image_magic_check(data, len, &f, err);
    }
    }
}

int rf_image_check(rf_decoder *d, const uint8_t *data, size_t len, uint32_t *w, uint32_t *h,
                   rf_err *err)
{
    uint32_t f;
    rf_jpeg_info ji;
    int rc = rf_image_magic_check(data, len, &f, err);
    *w = *h = 0;
    if (rc)
        return rc;
    if (f == RF_IMAGE_PNG)
        return rf_png_check(d, data, len, w, h, err);
    if (f == RF_IMAGE_WEBP)
        return rf_webp_check(d, data, len, w, h, err);
    if ((rc = rf_decode_check(d, data, len, &ji, err)) == 0)
        *w = ji.width, *h = ji.height;
    return rc;
}

int rf_dec_check_size(const rf_decoder *d, const char *what, uint64_t w, uint64_t h,
                      rf_err *err)
{
    if (w <= d->lim.max_dim && h <= d->lim.max_dim && w * h <= d->lim.max_pixels)
        return 0;
    return rf_seterr(err, RF_ELIMIT, "%s is %llux%llu: over the limit (max_dim %u, max_pixels "
                     "%llu)", what, (unsigned long long)w, (unsigned long long)h,
                     d->lim.max_dim, (unsigned long long)d->lim.max_pixels);
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
}
