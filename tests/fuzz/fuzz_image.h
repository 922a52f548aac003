/* fuzz_image.h — what fuzz_png.c and fuzz_webp.c share: the input, with its format's magic
 * bytes written over its start (so that mutations explore that decoder rather than the
 * signature test), decoded under small limits (max 2048 px per side, 1 M pixels) through
 * rf_decode_image with a transform the first byte picks, then checked in full with
 * rf_image_check. A header claiming huge dimensions must be refused before any allocation;
 * damage must come back as an error, never a crash, hang or leak. */
#ifndef RF_FUZZ_IMAGE_H
#define RF_FUZZ_IMAGE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "decode/decode.h"
#include "ringfeed.h"

#define FUZZ_IMAGE_MAX (1u << 16)

static void fuzz_image(const uint8_t *data, size_t size, const uint8_t *magic, size_t mlen,
                       size_t at)
{
    static rf_decoder *dec;
    static uint8_t buf[FUZZ_IMAGE_MAX], out[24 * 24 * 3];
    if (!dec) {
        rf_decode_limits lim = {.max_pixels = 1u << 20, .max_dim = 2048, .max_scans = 20};
        if (!(dec = rf_decoder_create(&lim)))
            abort();
    }
    if (size < 1 || size - 1 > FUZZ_IMAGE_MAX)
        return;
    uint8_t sel = data[0];
    size_t n = size - 1;
    memcpy(buf, data + 1, n);
    if (n >= at + mlen)
        memcpy(buf + at, magic, mlen);
    /* an odd length takes the padded crops (RANDOM + 2: LETTERBOX, CENTER + 2: CENTER_PAD) */
    rf_transform t = {.crop = (sel & 1 ? RF_CROP_CENTER : RF_CROP_RANDOM) + (n & 1 ? 2u : 0u),
                      /* 8..23 rows and columns: square and non-square outputs */
                      .height = 8u + (sel >> 4), .width = 8u + ((sel >> 2) & 0xFu),
                      .layout = sel & 2 ? RF_LAYOUT_NCHW : RF_LAYOUT_NHWC,
                      .scale_min = 0.08f, .scale_max = 1.0f,
                      .ratio_min = 0.75f, .ratio_max = 4.0f / 3.0f, .flip_prob = 0.5f,
                      .pad = {114, 114, 114}};
    rf_err e = {0};
    uint32_t w, h;
    rf_decode_image(dec, buf, n, &t, sel, out, NULL, &e);
    rf_image_check(dec, buf, n, &w, &h, &e);
}

#endif
