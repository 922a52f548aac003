/* resize.h — separable antialiased triangle ("bilinear, antialias=True") resampling in 14-bit
 * fixed point, built so the decoder can feed it one decoded scanline at a time.
 *
 * Geometry follows PIL/torchvision: output sample i of an axis reads the continuous source
 * window [lo, hi) at centre lo + (i + 0.5) * scale, scale = (hi - lo) / n_out, with a triangle
 * of support max(1, scale) and weights normalized to one. Source indices are clamped to an
 * allowed integer range (the crop for RandomResizedCrop, the whole image for CENTER). */
#ifndef RF_RESIZE_H
#define RF_RESIZE_H

#include <stddef.h>
#include <stdint.h>

#define RF_RESIZE_BITS 14

/* The filter of one axis: output i = sum_k coef[i*taps + k] * src[start[i] + k]. Every output
 * reads exactly `taps` samples (short windows are zero-padded) so the inner loops have one trip
 * count. The arrays belong to the axis and only grow. */
typedef struct rf_axis {
    uint32_t n_out, taps;
    int32_t *start;       /* n_out entries, relative to the origin given to rf_axis_plan */
    int16_t *coef;        /* n_out * taps, non-negative, each row sums to 1 << RF_RESIZE_BITS */
    double *wtmp;         /* one row of float weights while planning */
    size_t cap_out, cap_coef, cap_wtmp;
    int32_t first, last;  /* smallest start and largest start + taps, relative to origin */
} rf_axis;

/* Plan one axis: window [lo, hi) in source pixels, sources clamped to [src_lo, src_hi), indices
 * reported relative to `origin`. flip reverses the output order (output i takes the place of
 * n_out - 1 - i). Returns 0 or -1 on allocation failure; src_hi > src_lo is required. */
int rf_axis_plan(rf_axis *a, double lo, double hi, int32_t src_lo, int32_t src_hi, int32_t origin,
                 uint32_t n_out, int flip);
void rf_axis_free(rf_axis *a);

/* Horizontal pass on one interleaved RGB row: src points at origin column, dst gets n_out*3. */
void rf_resize_row_h(const rf_axis *h, const uint8_t *src, uint8_t *dst);

/* Vertical pass for output row i: rows[k] is source row start[i] + k, each n bytes; the
 * weighted sum lands in dst (n bytes). acc is n int32 of scratch. */
void rf_resize_row_v(const rf_axis *v, uint32_t i, const uint8_t *const *rows, size_t n,
                     int32_t *acc, uint8_t *dst);

#endif
