/* synth_formats.c — PNG and WebP encodings of synthetic images, for ringfeed-gen --format and
 * the tests of the PNG and WebP decoders. libspng and libwebp write them; nothing is
 * hand-made here. */
#include <spng.h>
#include <stdlib.h>
#include <string.h>
#include <webp/encode.h>

#include "synth.h"

/* The PNG's pixels in the layout kind wants: 8-bit RGB as given, 16-bit RGB (each value v as
 * v * 257, so its high byte is v again), 8-bit gray (the green channel), 8-bit RGBA (opaque)
 * or 8-bit palette indices (3-3-2 bits of RGB, with the matching 256-entry palette). */
static uint8_t *png_pixels(const uint8_t *rgb, size_t px, uint32_t kind, size_t *bytes)
{
    static const size_t per[] = {3, 6, 1, 4, 1};
    uint8_t *p = malloc(px * per[kind]);
    if (!p)
        return NULL;
    for (size_t i = 0; i < px; i++) {
        const uint8_t *s = rgb + 3 * i;
        uint8_t *d = p + per[kind] * i;
        switch (kind) {
        case RF_SYNTH_PNG_RGB16:
            for (int c = 0; c < 3; c++)
                d[2 * c] = d[2 * c + 1] = s[c];
            break;
        case RF_SYNTH_PNG_GRAY8: d[0] = s[1]; break;
        case RF_SYNTH_PNG_RGBA8: memcpy(d, s, 3), d[3] = 255; break;
        case RF_SYNTH_PNG_PALETTE: d[0] = (uint8_t)((s[0] & 0xE0) | (s[1] & 0xE0) >> 3 | s[2] >> 6);
            break;
        default: memcpy(d, s, 3);
        }
    }
    *bytes = px * per[kind];
    return p;
}

static int png_header(spng_ctx *ctx, uint32_t width, uint32_t height, uint32_t kind)
{
    static const uint8_t type[] = {SPNG_COLOR_TYPE_TRUECOLOR, SPNG_COLOR_TYPE_TRUECOLOR,
                                   SPNG_COLOR_TYPE_GRAYSCALE, SPNG_COLOR_TYPE_TRUECOLOR_ALPHA,
                                   SPNG_COLOR_TYPE_INDEXED};
    struct spng_ihdr ih = {.width = width, .height = height,
                           .bit_depth = kind == RF_SYNTH_PNG_RGB16 ? 16 : 8,
                           .color_type = type[kind]};
    if (spng_set_ihdr(ctx, &ih))
        return -1;
    if (kind == RF_SYNTH_PNG_PALETTE) {
        struct spng_plte pl = {.n_entries = 256};
        for (uint32_t i = 0; i < 256; i++)
            pl.entries[i] = (struct spng_plte_entry){.red = (uint8_t)(i & 0xE0),
                                                     .green = (uint8_t)((i << 3) & 0xE0),
                                                     .blue = (uint8_t)((i << 6) & 0xC0)};
        if (spng_set_plte(ctx, &pl))
            return -1;
    }
    return 0;
}

int rf_synth_png(const uint8_t *rgb, uint32_t width, uint32_t height, uint32_t kind,
                 uint8_t **out, size_t *len)
{
    size_t bytes;
    int err = 0;
    if (kind > RF_SYNTH_PNG_PALETTE)
        return -1;
    uint8_t *px = png_pixels(rgb, (size_t)width * height, kind, &bytes);
    spng_ctx *ctx = px ? spng_ctx_new(SPNG_CTX_ENCODER) : NULL;
    *out = NULL;
    if (ctx && spng_set_option(ctx, SPNG_ENCODE_TO_BUFFER, 1) == 0 &&
        png_header(ctx, width, height, kind) == 0 &&
        spng_encode_image(ctx, px, bytes, SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE) == 0)
        *out = spng_get_png_buffer(ctx, len, &err); /* malloc'ed, ours now */
    spng_ctx_free(ctx);
    free(px);
    return *out && !err ? 0 : -1;
}

int rf_synth_webp(const uint8_t *rgb, uint32_t width, uint32_t height, int quality,
                  uint8_t **out, size_t *len)
{
    uint8_t *enc = NULL;
    int stride = (int)width * 3;
    size_t n = quality < 0 ? WebPEncodeLosslessRGB(rgb, (int)width, (int)height, stride, &enc)
                           : WebPEncodeRGB(rgb, (int)width, (int)height, stride,
                                           (float)quality, &enc);
    *out = n ? malloc(n) : NULL; /* the caller frees with free(), as for the other encoders */
    if (*out)
        memcpy(*out, enc, n), *len = n;
    WebPFree(enc);
    return *out ? 0 : -1;
}
