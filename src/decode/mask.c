/* mask.c — segmentation masks (rf_config.mask): a PNG of class values decoded as stored, then
 * given its image's geometry by nearest-neighbour resampling (decode.h, rf_mask_decode and
 * rf_mask_resample).
 *
 * DESIGN
 *  - A mask holds class ids, not colours: gray values and palette indices are delivered as
 *    stored (SPNG_FMT_PNG), never expanded through the palette, scaled or gamma-corrected,
 *    as PIL's modes "L", "I;16" and "P" read them. What would need a colour rule to become a
 *    class (RGB, alpha, 1..4-bit gray, which PIL scales to 0..255) is refused by name.
 *  - Limits first, as for images: the IHDR's size is checked before libspng allocates.
 *  - The whole mask is decoded (to IEND's data), so damage anywhere is seen: a mask is small
 *    next to its image and a nearest resize may sample any row.
 *  - Resampling only reads, into scratch reserved by the decode: each output column's source
 *    column is found once per mask, each row's once per row, by walking PIL's NEAREST
 *    (rf_nearest) across them. It cannot fail, so the loader decodes and checks a mask before
 *    the image goes to any engine. */
#include "decode/decoder.h"

#include <spng.h>
#include <string.h>

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int mask_fail(int rc, const char *what, rf_err *err)
{
    int code = rc == SPNG_EMEM ? RF_ENOMEM
               : rc == SPNG_EUSER_WIDTH || rc == SPNG_EUSER_HEIGHT || rc == SPNG_ECHUNK_LIMITS
                   ? RF_ELIMIT
                   : RF_EDECODE;
    return rf_seterr(err, code, "mask PNG %s: %s", what, spng_strerror(rc));
}

static const char *color_name(uint32_t ct)
{
    switch (ct) {
    case 0: return "gray";
    case 2: return "RGB";
    case 3: return "palette";
    case 4: return "gray+alpha";
    case 6: return "RGBA";
    default: return "an unknown colour type";
    }
}

/* The IHDR read from the bytes (signature, size against the limits, colour type and depth),
 * so that what is no mask is named before libspng is given the file. */
static int mask_header(const rf_decoder *d, const uint8_t *png, size_t len, int wide, rf_mask *m,
                       rf_err *err)
{
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (len < 8 || memcmp(png, sig, 8) != 0)
        return rf_seterr(err, RF_EFORMAT, "not a PNG (%zu bytes without the PNG signature); a "
                         "mask is a gray or palette PNG", len);
    if (len < 29 || memcmp(png + 12, "IHDR", 4) != 0)
        return rf_seterr(err, RF_EDECODE, "mask PNG of %zu bytes has no IHDR chunk first", len);
    m->width = be32(png + 16), m->height = be32(png + 20);
    m->bit_depth = png[24], m->color_type = png[25];
    int rc = rf_dec_check_size(d, "mask PNG", m->width, m->height, err);
    if (rc)
        return rc;
    uint32_t ct = m->color_type, bd = m->bit_depth;
    if (ct != 0 && ct != 3)
        return rf_seterr(err, RF_EFORMAT, "mask PNG is %s (%u-bit); a mask is a gray (8 or 16 "
                         "bits) or palette PNG of class values", color_name(ct), bd);
    if (ct == 0 && bd < 8)
        return rf_seterr(err, RF_EFORMAT, "mask PNG is %u-bit gray; a gray mask has 8 or 16 "
                         "bits (PIL would scale these values to 0..255)", bd);
    if (ct == 0 && bd == 16 && !wide)
        return rf_seterr(err, RF_EFORMAT, "mask PNG is 16-bit gray: its values need "
                         "mask_dtype int32, not uint8");
    m->bits = bd == 16 ? 16 : 8;
    return 0;
}

/* Palette indices of 1, 2 or 4 bits, packed from the high bits of each row's bytes (rows
 * start on a byte), to one byte each. */
static void unpack_indices(const uint8_t *raw, uint32_t w, uint32_t h, uint32_t bits,
                           uint8_t *out)
{
    size_t row = ((size_t)w * bits + 7) / 8;
    uint32_t per = 8 / bits, mask = (1u << bits) - 1;
    for (uint32_t y = 0; y < h; y++) {
        const uint8_t *r = raw + row * y;
        uint8_t *o = out + (size_t)w * y;
        for (uint32_t x = 0; x < w; x++)
            o[x] = (uint8_t)(r[x / per] >> (8 - bits * (x % per + 1)) & mask);
    }
}

int rf_mask_decode(rf_decoder *d, const uint8_t *png, size_t len, int wide, uint32_t out_w,
                   rf_mask *m, rf_err *err)
{
    memset(m, 0, sizeof *m);
    int rc = mask_header(d, png, len, wide, m, err);
    if (rc)
        return rc;
    if (rf_reserve(&d->mask_cols, &d->mask_cols_cap, RF_MAX(out_w, 1u), sizeof *d->mask_cols))
        return rf_seterr(err, RF_ENOMEM, "out of memory for a mask's %u columns", out_w);
    spng_ctx *ctx = spng_ctx_new(0);
    if (!ctx)
        return rf_seterr(err, RF_ENOMEM, "out of memory for a mask PNG decoder");
    size_t n = 0;
    if ((rc = spng_set_image_limits(ctx, d->lim.max_dim, d->lim.max_dim)) != 0 ||
        (rc = spng_set_chunk_limits(ctx, RF_PNG_CHUNK_MAX, RF_PNG_CACHE_MAX)) != 0 ||
        (rc = spng_set_png_buffer(ctx, png, len)) != 0 ||
        (rc = spng_decoded_image_size(ctx, SPNG_FMT_PNG, &n)) != 0) {
        spng_ctx_free(ctx);
        return mask_fail(rc, "header", err);
    }
    if (rf_reserve(&d->mask_raw, &d->mask_raw_cap, n, 1)) {
        spng_ctx_free(ctx);
        return rf_seterr(err, RF_ENOMEM, "out of memory for a %ux%u mask", m->width, m->height);
    }
    rc = spng_decode_image(ctx, d->mask_raw, n, SPNG_FMT_PNG, 0);
    spng_ctx_free(ctx);
    if (rc)
        return mask_fail(rc, "decode", err);
    if (m->bits == 16) {
        m->px16 = (const uint16_t *)(const void *)d->mask_raw; /* host-endian, 2-byte aligned */
        return 0;
    }
    if (m->bit_depth == 8) {
        m->px8 = d->mask_raw;
        return 0;
    }
    if (rf_reserve(&d->mask_px, &d->mask_px_cap, (size_t)m->width * m->height, 1))
        return rf_seterr(err, RF_ENOMEM, "out of memory for a %ux%u mask", m->width, m->height);
    unpack_indices(d->mask_raw, m->width, m->height, m->bit_depth, d->mask_px);
    m->px8 = d->mask_px;
    return 0;
}

static void put(void *out, uint32_t dtype, size_t i, uint32_t v)
{
    if (dtype == RF_DTYPE_INT32)
        ((int32_t *)out)[i] = (int32_t)v;
    else
        ((uint8_t *)out)[i] = (uint8_t)v;
}

void rf_mask_resample(rf_decoder *d, const rf_mask *m, const rf_geometry *g, uint32_t dtype,
                      uint32_t fill, void *out)
{
    uint32_t W = g->out_width, H = g->out_height, x0 = g->out_x, x1 = g->out_x + g->out_w;
    uint32_t y0 = g->out_y, y1 = g->out_y + g->out_h;
    rf_nearest cols, rows;
    rf_nearest_start(&cols, g->x, g->w, g->out_w, m->width);
    rf_nearest_start(&rows, g->y, g->h, g->out_h, m->height);
    for (uint32_t i = 0; i < g->out_w; i++) /* the resize's columns, then the flip */
        d->mask_cols[g->flip ? g->out_w - 1 - i : i] = rf_nearest_next(&cols);
    for (uint32_t y = 0; y < H; y++) {
        size_t at = (size_t)y * W;
        if (y < y0 || y >= y1 || g->out_w == 0) {
            for (uint32_t x = 0; x < W; x++)
                put(out, dtype, at + x, fill);
            continue;
        }
        size_t src = (size_t)rf_nearest_next(&rows) * m->width;
        for (uint32_t x = 0; x < x0; x++)
            put(out, dtype, at + x, fill);
        for (uint32_t x = x0; x < x1; x++) {
            size_t k = src + d->mask_cols[x - x0];
            put(out, dtype, at + x, m->bits == 16 ? m->px16[k] : m->px8[k]);
        }
        for (uint32_t x = x1; x < W; x++)
            put(out, dtype, at + x, fill);
    }
}
