/* jpegutil.c — jpegutil.h's images, encoders, transforms and placement. */
#include "jpegutil.h"

#include <stdio.h>
#include <stdlib.h>

#include <jpeglib.h>

uint32_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(*s >> 33);
}

uint8_t *make_image(uint32_t w, uint32_t h, int comps, uint64_t seed)
{
    uint8_t *p = malloc((size_t)w * h * comps);
    uint64_t s = seed;
    double cx = w * 0.4, cy = h * 0.6, rr = 0.09 * (w * w + h * h) / 4;
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++) {
            int disc = (x - cx) * (x - cx) + (y - cy) * (y - cy) < rr;
            int bar = (x / 7 + y / 11) % 5 == 0;
            for (int c = 0; c < comps; c++) {
                int v = (int)(255.0 * (c == 0 ? (double)x / w : c == 1 ? (double)y / h : 0.5));
                v = disc ? 255 - v : v;
                v = bar ? v / 3 : v;
                v += (int)(lcg(&s) % 21) - 10;
                p[((size_t)y * w + x) * comps + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
        }
    return p;
}



uint8_t *encode_ex(const uint8_t *px, uint32_t w, uint32_t h, enc_opts o, int coding,
                          size_t *len)
{
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr e;
    unsigned char *buf = NULL;
    unsigned long n = 0;
    c.err = jpeg_std_error(&e);
    jpeg_create_compress(&c);
    jpeg_mem_dest(&c, &buf, &n);
    c.image_width = w, c.image_height = h, c.input_components = o.comps;
    c.in_color_space = o.comps == 1 ? JCS_GRAYSCALE : o.comps == 4 ? JCS_CMYK : JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, o.quality, TRUE);
    if (o.comps == 3 && !o.subsample)
        c.comp_info[0].h_samp_factor = c.comp_info[0].v_samp_factor = 1;
    if (o.comps == 3 && o.subsample == 2)
        c.comp_info[0].v_samp_factor = 1;
    if (o.progressive)
        jpeg_simple_progression(&c);
    c.optimize_coding = coding == ENC_OPTIMIZE ? TRUE : FALSE;
    c.arith_code = coding == ENC_ARITH ? TRUE : FALSE;
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < h) {
        JSAMPROW row = (JSAMPROW)(px + (size_t)c.next_scanline * w * o.comps);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    *len = n;
    return buf;
}

uint8_t *encode(const uint8_t *px, uint32_t w, uint32_t h, enc_opts o, size_t *len)
{
    return encode_ex(px, w, h, o, ENC_STANDARD, len);
}

uint8_t *make_jpeg_ex(uint32_t w, uint32_t h, enc_opts o, int coding, uint64_t seed,
                             size_t *len)
{
    uint8_t *px = make_image(w, h, o.comps, seed);
    uint8_t *j = encode_ex(px, w, h, o, coding, len);
    free(px);
    return j;
}

uint8_t *make_jpeg(uint32_t w, uint32_t h, enc_opts o, uint64_t seed, size_t *len)
{
    uint8_t *px = make_image(w, h, o.comps, seed);
    uint8_t *j = encode(px, w, h, o, len);
    free(px);
    return j;
}

rf_transform random_hw(uint32_t height, uint32_t width)
{
    rf_transform t = {.crop = RF_CROP_RANDOM, .height = height, .width = width,
                      .layout = RF_LAYOUT_NHWC, .scale_min = 0.08f, .scale_max = 1.0f,
                      .ratio_min = 3.0f / 4, .ratio_max = 4.0f / 3, .flip_prob = 0.5f};
    return t;
}

rf_transform random_t(uint32_t size) { return random_hw(size, size); }

rf_transform mixed_t(uint64_t seed)
{
    rf_transform t = random_t(seed % 3 == 0 ? 224 : 64);
    if (seed % 11 == 10)
        t = random_hw(160, 224);
    else if (seed % 13 == 12)
        t = random_hw(224, 96);
    if (seed % 5 == 4)
        t.crop = RF_CROP_CENTER, t.flip_prob = -1;
    if (seed % 7 == 6)
        t.layout = RF_LAYOUT_NCHW;
    return t;
}


uint8_t *place_fixed(void *ctx, size_t bytes, int packet)
{
    test_place *p = ctx;
    return !packet ? p->px : bytes <= p->cap ? p->pkt : NULL;
}
