/* sizeutil.h — what the size suites share (test_sizes.c, test_sizes_loader.c): the expected
 * output of crop LETTERBOX and CENTER_PAD built from their definitions (Ultralytics' LetterBox
 * rectangle; torchvision's center_crop of the whole image resized), with the library's own
 * resampler, and pictures encoded as PNG, lossless WebP or JPEG with their reference RGB. */
#ifndef RF_TEST_SIZEUTIL_H
#define RF_TEST_SIZEUTIL_H

#include <stddef.h>
#include <stdint.h>

#include "decode/decode.h"

typedef struct rect {
    uint32_t x, y, w, h;
} rect;

/* Ultralytics LetterBox(new_shape=(oh, ow), auto=False, scaleup=True, center=True) of a W x H
 * image: the rectangle it covers. */
rect sz_letterbox_rect(uint32_t W, uint32_t H, uint32_t oh, uint32_t ow);
/* The expected output of t (LETTERBOX, CENTER_PAD or NATIVE) for a W x H source, flip
 * mirroring the whole output, in t->layout; *r gets the rectangle the image covers (before the
 * flip). NATIVE's output is r->w x r->h, packed: the image's size, or its letterbox rectangle
 * in t's height x width when larger. */
void sz_reference(const uint8_t *rgb, uint32_t W, uint32_t H, const rf_transform *t, int flip,
                  uint8_t *out, rect *r);
/* crop to oh x ow in layout: flip_prob 0.5, pad 114, resize_shorter max(oh, ow) * 256 / 224. */
rf_transform sz_transform(uint32_t crop, uint32_t oh, uint32_t ow, uint32_t layout);

/* An encoded picture and the RGB it decodes to at full scale. */
typedef struct pic {
    uint8_t *data, *rgb;
    size_t len;
    uint32_t w, h;
} pic;

enum { SZ_PNG = 0, SZ_WEBP = 1, SZ_JPEG = 2 }; /* WebP lossless; JPEG's RGB: rf_decode_full */
pic sz_make_pic(uint32_t w, uint32_t h, int format, uint64_t seed);
void sz_free_pic(pic *p);

#endif
