/* image.c — which decoder a payload gets, by its magic numbers, never by the member's extension.
 * JPEG is tested first: the fast path and nearly every sample. */
#include "decode/decoder.h"

#include <string.h>
#include <webp/decode.h>

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

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

int rf_image_size(rf_decoder *d, const uint8_t *data, size_t len, uint32_t *w, uint32_t *h,
                  rf_err *err)
{
    int iw = 0, ih = 0, rc = 0;
    rf_jpeg_info ji;
    *w = *h = 0;
    switch (rf_image_sniff(data, len)) {
    case RF_IMAGE_JPEG:
        if ((rc = rf_jpeg_probe(d, data, len, &ji, err)) == 0)
            *w = ji.width, *h = ji.height;
        return rc;
    case RF_IMAGE_PNG:
        if (len < 24 || memcmp(data + 12, "IHDR", 4) != 0)
            return rf_seterr(err, RF_EDECODE, "PNG of %zu bytes has no IHDR chunk first", len);
        *w = be32(data + 16), *h = be32(data + 20);
        return 0;
    case RF_IMAGE_WEBP:
        if (!WebPGetInfo(data, len, &iw, &ih))
            return rf_seterr(err, RF_EDECODE, "WebP header does not parse");
        *w = (uint32_t)iw, *h = (uint32_t)ih;
        return 0;
    default: {
        uint32_t f;
        return rf_image_magic_check(data, len, &f, err);
    }
    }
}

int rf_decode_image_box(rf_decoder *d, const uint8_t *data, size_t len, const rf_transform *t,
                        double x, double y, double w, double h, uint32_t flip, uint8_t *out,
                        rf_decode_info *info, rf_err *err)
{
    d->box_given = 1;
    d->given = (crop_box){.x = x, .y = y, .w = w, .h = h, .flip = flip != 0};
    int rc = rf_decode_image(d, data, len, t, 0, out, info, err);
    d->box_given = 0;
    return rc;
}

/* A JPEG's frame header (SOF0..SOF15 but DHT, JPG and DAC) by walking the marker segments from
 * the SOI: the size without libjpeg, from as many bytes as reach it. */
static int jpeg_peek_size(const uint8_t *p, size_t len, uint32_t *w, uint32_t *h)
{
    size_t i = 2;
    for (;;) {
        while (i < len && p[i] != 0xFF)
            i++; /* not a marker: tolerated, as libjpeg skips it */
        while (i < len && p[i] == 0xFF)
            i++; /* fill bytes */
        if (i + 3 > len)
            return 1;
        uint8_t m = p[i];
        if (m == 0xD9 || m == 0xDA) /* EOI or SOS before any frame header */
            return -1;
        if (m == 0x01 || (m >= 0xD0 && m <= 0xD7)) { /* no length */
            i++;
            continue;
        }
        size_t seg = (size_t)p[i + 1] << 8 | p[i + 2];
        if (seg < 2)
            return -1;
        if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) {
            if (i + 8 > len)
                return 1;
            *h = (uint32_t)p[i + 4] << 8 | p[i + 5];
            *w = (uint32_t)p[i + 6] << 8 | p[i + 7];
            return *w && *h ? 0 : -1;
        }
        i += 1 + seg;
    }
}

int rf_image_peek_size(const uint8_t *data, size_t len, uint32_t *w, uint32_t *h)
{
    int iw = 0, ih = 0;
    *w = *h = 0;
    if (len < 30)
        return 1;
    switch (rf_image_sniff(data, len)) {
    case RF_IMAGE_JPEG: return jpeg_peek_size(data, len, w, h);
    case RF_IMAGE_PNG:
        if (memcmp(data + 12, "IHDR", 4) != 0)
            return -1;
        *w = be32(data + 16), *h = be32(data + 20);
        return *w && *h ? 0 : -1;
    case RF_IMAGE_WEBP:
        if (!WebPGetInfo(data, len, &iw, &ih))
            return -1;
        *w = (uint32_t)iw, *h = (uint32_t)ih;
        return 0;
    default: return -1;
    }
}
