/* synth.h — synthetic photo-like images, JPEG encoding, and ImageNet-like size draws.
 * Used by the dataset generator (datasets/ringfeed-gen), by ringfeed-pack's tests and by every
 * test suite that needs images. Deterministic: the same seed gives the same bytes. */
#ifndef RF_SYNTH_H
#define RF_SYNTH_H

#include <stddef.h>
#include <stdint.h>

/* splitmix64, the mixing function behind every seed the generator and the synthesis derive
 * (image seeds, labels, palettes). datasets/ has its own copy of the library's rf_mix64
 * (src/base/common.h) because it builds on the public API; both must stay bit-identical to what
 * they were, or a seed stops naming the same dataset (test_synth gen_draws_pinned). */
uint64_t rf_synth_mix64(uint64_t x);

/* Draw an image size distributed like ImageNet's training set (mean near 400x350, long side
 * mostly 200..1000) from seed. */
void rf_synth_size(uint64_t seed, uint32_t *width, uint32_t *height);

/* Render a w x h RGB image (w*h*3 bytes, row-major) with natural-image statistics: multi-scale
 * structure, edges, texture. Deterministic from seed; thread-safe (no global state). */
void rf_synth_image(uint64_t seed, uint32_t width, uint32_t height, uint8_t *rgb);

/* Options for rf_synth_image_ex(); zero fields mean the defaults. */
typedef struct rf_synth_opts {
    float texture;    /* scale of the fine texture (JPEG size grows with it); 0 = 1.0 */
    uint32_t classes; /* with classes > 0, label in [0, classes) tints the palette and shifts the */
    uint32_t label;   /* mix of shapes a little, so that classes differ in their statistics */
} rf_synth_opts;

/* rf_synth_image with options (opts may be NULL). Returns 0, or -1 when scratch memory (about
 * 40 bytes per pixel) cannot be allocated; rf_synth_image then fills mid-grey. */
int rf_synth_image_ex(uint64_t seed, uint32_t width, uint32_t height, const rf_synth_opts *opts,
                      uint8_t *rgb);

/* Encode RGB to JPEG (4:2:0, the given quality 1..100, baseline or progressive). *out is
 * malloc'ed; returns 0 or -1 on failure. */
int rf_synth_jpeg(const uint8_t *rgb, uint32_t width, uint32_t height, int quality, int progressive,
                  uint8_t **out, size_t *len);

/* PNG layouts rf_synth_png writes (synth_formats.c). */
enum rf_synth_png_kind {
    RF_SYNTH_PNG_RGB8 = 0,
    RF_SYNTH_PNG_RGB16,   /* each value v stored as v * 257: decodes to v at 8 bits */
    RF_SYNTH_PNG_GRAY8,   /* the green channel */
    RF_SYNTH_PNG_RGBA8,   /* opaque alpha */
    RF_SYNTH_PNG_PALETTE, /* 3-3-2 bits of RGB as indices into a 256-entry palette */
};

/* Encode RGB as a PNG of that kind (libspng) or as a WebP (libwebp: quality 0..100, or < 0 for
 * lossless). *out is malloc'ed; returns 0 or -1 on failure. */
int rf_synth_png(const uint8_t *rgb, uint32_t width, uint32_t height, uint32_t kind,
                 uint8_t **out, size_t *len);
int rf_synth_webp(const uint8_t *rgb, uint32_t width, uint32_t height, int quality,
                  uint8_t **out, size_t *len);

#endif
