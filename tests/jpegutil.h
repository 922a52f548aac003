/* jpegutil.h — what the decode suites share: synthetic images, JPEGs encoded from them with
 * libjpeg (every sampling, progressive, optimized and arithmetic coding), the transforms they
 * cycle through and a fixed placement for GPU packets. */
#ifndef RF_TEST_JPEGUTIL_H
#define RF_TEST_JPEGUTIL_H

#include <stddef.h>
#include <stdint.h>

#include "decode/decode.h"

typedef struct enc_opts {
    int comps; /* 1 gray, 3 RGB, 4 CMYK */
    int quality;
    int progressive;
    int subsample; /* 1: 4:2:0, 0: 4:4:4, 2: 4:2:2 */
} enc_opts;

/* What cjpeg's -optimize and -arithmetic change (encode_ex's coding argument). */
enum { ENC_STANDARD = 0, ENC_OPTIMIZE = 1, ENC_ARITH = 2 };

/* rf_gj_place over two fixed buffers: packets up to cap bytes (cap 0: never room), pixels. */
typedef struct test_place {
    uint8_t *pkt, *px;
    size_t cap;
} test_place;

uint32_t lcg(uint64_t *s);
/* Gradients, a disc, a bar and noise: edges and texture so resize errors show. */
uint8_t *make_image(uint32_t w, uint32_t h, int comps, uint64_t seed);
uint8_t *encode_ex(const uint8_t *px, uint32_t w, uint32_t h, enc_opts o, int coding,
                   size_t *len);
uint8_t *encode(const uint8_t *px, uint32_t w, uint32_t h, enc_opts o, size_t *len);
uint8_t *make_jpeg_ex(uint32_t w, uint32_t h, enc_opts o, int coding, uint64_t seed,
                      size_t *len);
uint8_t *make_jpeg(uint32_t w, uint32_t h, enc_opts o, uint64_t seed, size_t *len);
/* Real photographs (Debian's mate-backgrounds, or RINGFEED_PHOTO_SOURCES' glob): two crops
 * of each of the first six, their middles at sizes that are no multiple of 8 or 16 (gray: the
 * green channel), re-encoded as cjpeg would at qualities 75-95, 4:2:0, 4:2:2, 4:4:4 and
 * grayscale, standard and optimized tables in turn; fn gets each file and a name for it.
 * Returns the files made; 0 when there are no photographs, after saying so for `test`. */
typedef void (*photo_crop_fn)(void *ctx, const uint8_t *jpeg, size_t len, enc_opts o,
                              const char *what);
uint32_t photo_crops(const char *test, photo_crop_fn fn, void *ctx);
/* RandomResizedCrop to height x width (torchvision's defaults). */
rf_transform random_hw(uint32_t height, uint32_t width);
rf_transform random_t(uint32_t size);
/* The transforms the region, GPU-packet and damage tests cycle through by seed: sizes 224 and
 * 64, every fifth a center crop without flip, every seventh NCHW; every eleventh is 160x224 and
 * every thirteenth 224x96 (height x width) instead, so that each of those paths also meets
 * outputs wider and taller than they are high. */
rf_transform mixed_t(uint64_t seed);
/* rf_gj_place over the two buffers of a test_place (ctx). */
uint8_t *place_fixed(void *ctx, size_t bytes, int packet);

#endif
