/* resize.h — separable antialiased triangle resampling in 14-bit fixed point, fed one decoded
 * scanline at a time.
 *
 * Geometry follows PIL/torchvision: output i of an axis reads the source window [lo, hi) at
 * centre lo + (i + 0.5) * scale with a triangle of support max(1, scale), weights normalized;
 * source indices are clamped to the crop (RandomResizedCrop) or the image (CENTER). */
#ifndef RF_RESIZE_H
#define RF_RESIZE_H

#include <stddef.h>
#include <stdint.h>

#define RF_RESIZE_BITS 14

/* The filter of one axis: output i = sum_k coef[i*taps + k] * src[start[i] + k], every output
 * `taps` samples long (zero-padded). The arrays belong to the axis and only grow. */
typedef struct rf_axis {
    uint32_t n_out, taps;
    int32_t *start;       /* n_out entries, relative to the origin given to rf_axis_plan */
    int16_t *coef;        /* n_out * taps, non-negative, each row sums to 1 << RF_RESIZE_BITS */
    double *wtmp;         /* one row of float weights while planning */
    size_t cap_out, cap_coef, cap_wtmp;
    int32_t first, last;  /* smallest start and largest start + taps, relative to origin */
    /* The same coefficients laid out for the SIMD horizontal pass: per output, `groups` groups
     * of 4 taps (zero-padded), each 16 int16 = (c0,c1) x4 then (c2,c3) x4, 32-byte aligned. */
    int16_t *hcoef;
    void *hcoef_mem;
    size_t cap_hcoef;
    uint32_t groups;
    int32_t *win;         /* planning scratch: each output's clamped window [xmin, xmax) */
    size_t cap_win;
} rf_axis;

/* Readable slack the horizontal pass may read after the last source byte a tap uses (weighted
 * by zero): callers size their source rows with it. */
#define RF_RESIZE_SRC_PAD 64

/* Plan one axis: window [lo, hi) in source pixels, sources clamped to [src_lo, src_hi), indices
 * reported relative to `origin`. flip reverses the output order (output i takes the place of
 * n_out - 1 - i). Returns 0 or -1 on allocation failure; src_hi > src_lo is required. */
int rf_axis_plan(rf_axis *a, double lo, double hi, int32_t src_lo, int32_t src_hi, int32_t origin,
                 uint32_t n_out, int flip);
void rf_axis_free(rf_axis *a);

/* Horizontal pass on one interleaved RGB row: src points at the origin column, dst gets n_out*3
 * bytes. The AVX2 path (chosen at run time) reads up to RF_RESIZE_SRC_PAD bytes past the last
 * tap and is bit-identical to the scalar one. */
void rf_resize_row_h(const rf_axis *h, const uint8_t *src, uint8_t *dst);
void rf_resize_row_h_scalar(const rf_axis *h, const uint8_t *src, uint8_t *dst);

/* Vertical pass for output row i: rows[k] is source row start[i] + k, each n bytes; the
 * weighted sum lands in dst (n bytes). acc is n int32 of scratch. */
void rf_resize_row_v(const rf_axis *v, uint32_t i, const uint8_t *const *rows, size_t n,
                     int32_t *acc, uint8_t *dst);
void rf_resize_row_v_scalar(const rf_axis *v, uint32_t i, const uint8_t *const *rows, size_t n,
                            int32_t *acc, uint8_t *dst);

/* Whether rf_resize_row_h/v take the AVX2 path on this CPU (for benchmarks and tests). */
int rf_resize_simd(void);

#endif
