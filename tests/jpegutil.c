/* jpegutil.c — jpegutil.h's images, encoders, transforms and placement. */
#include "jpegutil.h"

#include <glob.h>
#include <stdio.h>
#include <stdlib.h>

#include <jpeglib.h>

#include "testutil.h"

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

uint32_t photo_crops(const char *test, photo_crop_fn fn, void *ctx)
{
    const char *pat = getenv("RINGFEED_PHOTO_SOURCES");
    glob_t g;
    if (glob(pat ? pat : "/usr/share/backgrounds/mate/nature/*.jpg", 0, NULL, &g) || !g.gl_pathc) {
        fprintf(stderr, "%s: no photographs (tools/deps.sh installs mate-backgrounds): not "
                        "run\n", test);
        return 0;
    }
    static const enc_opts OPTS[] = {
        {3, 75, 0, 1}, {3, 90, 0, 1}, {3, 95, 0, 2}, {3, 85, 0, 0}, {1, 80, 0, 0}, {3, 92, 0, 1},
    };
    static const uint32_t SIDES[][2] = {{333, 251}, {517, 389}, {803, 451}, {199, 601}};
    rf_decoder *d = rf_decoder_create(NULL);
    rf_decoder_set_max_scale_denom(d, 1);
    uint32_t files = 0;
    for (size_t f = 0; f < g.gl_pathc && f < 6; f++) {
        size_t len, n;
        uint8_t *src = rf_test_read_file(g.gl_pathv[f], &len), *rgb = NULL;
        uint32_t W, H;
        rf_err e = {0};
        if (!src || rf_decode_full(d, src, len, &rgb, &W, &H, &e) != 0) {
            fprintf(stderr, "%s: %s: %s\n", test, g.gl_pathv[f], src ? e.msg : "unreadable");
            abort();
        }
        for (size_t k = 0; k < 2; k++) {
            const uint32_t *sd = SIDES[(f + k) % 4];
            uint32_t w = RF_MIN(sd[0], W), h = RF_MIN(sd[1], H);
            enc_opts o = OPTS[(2 * f + k) % 6];
            uint8_t *px = malloc((size_t)w * h * o.comps);
            uint32_t x0 = (W - w) / 2, y0 = (H - h) / 2; /* the middle: textures, not sky */
            for (uint32_t y = 0; y < h; y++)
                for (uint32_t x = 0; x < w; x++)
                    for (int c = 0; c < o.comps; c++)
                        px[((size_t)y * w + x) * o.comps + c] =
                            rgb[((size_t)(y0 + y) * W + x0 + x) * 3 + (o.comps == 1 ? 1 : c)];
            int coding = (f + k) % 2 ? ENC_OPTIMIZE : ENC_STANDARD;
            uint8_t *j = encode_ex(px, w, h, o, coding, &n);
            char what[300];
            snprintf(what, sizeof what, "%s %ux%u q%d coding %d", g.gl_pathv[f], w, h,
                     o.quality, coding);
            fn(ctx, j, n, o, what);
            files++;
            free(px), free(j);
        }
        free(rgb), free(src);
    }
    globfree(&g);
    rf_decoder_destroy(d);
    return files;
}
