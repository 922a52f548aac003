/* resize.c — the antialiased triangle resampler behind rf_decode_transform.
 *
 * DESIGN: pure functions over caller-owned rf_axis plans; no threads, no global state.
 * Our own rather than libswscale or stb_image_resize: neither takes a fractional source window
 * with torchvision's clamping or runs a scanline at a time, and ours was faster at the same
 * accuracy (docs/tuning.md, "The CPU decoder"). O3: GCC's -O2 leaves the vertical pass scalar.
 * Fixed point: int16 coefficients times uint8 samples fit int32 for any number of taps and map
 * onto SIMD multiply-adds. The AVX2 paths (run-time dispatch; the build is generic x86-64) do
 * the same integer sums, so they are bit-identical to the scalar loops. */
#pragma GCC optimize("O3")

#include "decode/resize.h"

#include "base/common.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define RF_HAVE_X86 1
#endif

#define ONE (1 << RF_RESIZE_BITS)
#define HALF (1 << (RF_RESIZE_BITS - 1))

static double triangle(double x)
{
    x = fabs(x);
    return x < 1.0 ? 1.0 - x : 0.0;
}

/* floor() without the libm call the generic x86-64 target makes (no SSE4.1 round): exact for
 * |v| < 2^63, which every coordinate here is. */
static inline double ffloor(double v)
{
    double t = (double)(int64_t)v;
    return t > v ? t - 1.0 : t;
}

/* PIL's window for one output: centre +- support, rounded to pixel edges, then clamped. */
static void window(double center, double support, int32_t src_lo, int32_t src_hi, int32_t *xmin,
                   int32_t *xmax)
{
    double a = ffloor(center - support + 0.5), b = ffloor(center + support + 0.5);
    int32_t lo = a < (double)src_lo ? src_lo : (int32_t)a;
    int32_t hi = b > (double)src_hi ? src_hi : (int32_t)b;
    if (hi <= lo) { /* only when the centre falls outside the allowed range: nearest sample */
        double c = ffloor(center);
        lo = c < (double)src_lo ? src_lo : c >= (double)src_hi ? src_hi - 1 : (int32_t)c;
        hi = lo + 1;
    }
    *xmin = lo;
    *xmax = hi;
}

/* Quantize one output's float weights so they sum to exactly ONE: the rounding remainder goes to
 * the largest weight, which keeps flat regions flat and makes overflow past 255 impossible. */
static void quantize(const double *w, int32_t n, double total, int16_t *c)
{
    int32_t sum = 0, big = 0;
    for (int32_t k = 0; k < n; k++) {
        c[k] = (int16_t)lrint(w[k] / total * ONE);
        sum += c[k];
        if (c[k] > c[big])
            big = k;
    }
    c[big] = (int16_t)(c[big] + (ONE - sum));
}

static void plan_one(rf_axis *a, uint32_t i, double center, double fs, int32_t xmin,
                     int32_t xmax, int32_t src_hi, int32_t origin, int flip)
{
    double total = 0;
    for (int32_t x = xmin; x < xmax; x++) {
        a->wtmp[x - xmin] = triangle((x + 0.5 - center) / fs);
        total += a->wtmp[x - xmin];
    }
    if (total <= 0) { /* a window of one sample sitting exactly on the triangle's zero */
        a->wtmp[0] = 1.0;
        total = 1.0;
        xmax = xmin + 1;
    }
    /* Shift the fixed-length window left at the far edge so it never reads past src_hi. */
    int32_t s = xmin < src_hi - (int32_t)a->taps ? xmin : src_hi - (int32_t)a->taps;
    uint32_t slot = flip ? a->n_out - 1 - i : i;
    int16_t *c = a->coef + (size_t)slot * a->taps;
    for (uint32_t k = 0; k < a->taps; k++)
        c[k] = 0;
    quantize(a->wtmp, xmax - xmin, total, c + (xmin - s));
    a->start[slot] = s - origin;
    if (s - origin < a->first)
        a->first = s - origin;
    if (s - origin + (int32_t)a->taps > a->last)
        a->last = s - origin + (int32_t)a->taps;
}

/* The SIMD horizontal layout (see rf_axis.hcoef): per output and group of 4 taps, one 32-byte
 * vector whose low half multiplies the pixel pair (k, k+1) and high half the pair (k+2, k+3). */
static int layout_hcoef(rf_axis *a)
{
    a->groups = (a->taps + 3) / 4;
    size_t need = (size_t)a->n_out * a->groups * 16;
    if (need > a->cap_hcoef) {
        void *m = malloc(need * sizeof(int16_t) + 32);
        if (!m)
            return -1;
        free(a->hcoef_mem);
        a->hcoef_mem = m;
        a->hcoef = (int16_t *)(((uintptr_t)m + 31) & ~(uintptr_t)31);
        a->cap_hcoef = need;
    }
    for (uint32_t i = 0; i < a->n_out; i++) {
        const int16_t *c = a->coef + (size_t)i * a->taps;
        for (uint32_t g = 0; g < a->groups; g++) {
            int16_t *o = a->hcoef + ((size_t)i * a->groups + g) * 16, t[4];
            for (uint32_t k = 0; k < 4; k++)
                t[k] = 4 * g + k < a->taps ? c[4 * g + k] : 0;
            for (int k = 0; k < 4; k++) {
                o[2 * k] = t[0], o[2 * k + 1] = t[1];
                o[8 + 2 * k] = t[2], o[8 + 2 * k + 1] = t[3];
            }
        }
    }
    return 0;
}

int rf_axis_plan(rf_axis *a, double lo, double hi, int32_t src_lo, int32_t src_hi,
                    int32_t origin, uint32_t n_out, int flip)
{
    double scale = (hi - lo) / n_out, fs = scale > 1.0 ? scale : 1.0;
    uint32_t taps = 1;
    if (rf_reserve(&a->win, &a->cap_win, (size_t)n_out * 2, sizeof *a->win))
        return -1;
    for (uint32_t i = 0; i < n_out; i++) { /* first pass: the widest window sets the tap count */
        int32_t *w = a->win + 2 * (size_t)i;
        window(lo + (i + 0.5) * scale, fs, src_lo, src_hi, &w[0], &w[1]);
        if ((uint32_t)(w[1] - w[0]) > taps)
            taps = (uint32_t)(w[1] - w[0]);
    }
    if (rf_reserve(&a->start, &a->cap_out, n_out, sizeof *a->start) ||
        rf_reserve(&a->coef, &a->cap_coef, (size_t)n_out * taps, sizeof *a->coef) ||
        rf_reserve(&a->wtmp, &a->cap_wtmp, taps, sizeof *a->wtmp))
        return -1;
    a->n_out = n_out;
    a->taps = taps;
    a->first = INT32_MAX;
    a->last = INT32_MIN;
    for (uint32_t i = 0; i < n_out; i++)
        plan_one(a, i, lo + (i + 0.5) * scale, fs, a->win[2 * i], a->win[2 * i + 1], src_hi,
                 origin, flip);
    return layout_hcoef(a);
}

void rf_axis_free(rf_axis *a)
{
    free(a->start);
    free(a->coef);
    free(a->wtmp);
    free(a->hcoef_mem);
    free(a->win);
    *a = (rf_axis){0};
}

/* Constant tap counts: the tap loop unrolls into straight multiply-adds. */
static inline __attribute__((always_inline)) void h_pass(const rf_axis *h,
                                                         const uint8_t *restrict src,
                                                         uint8_t *restrict dst, uint32_t taps)
{
    for (uint32_t i = 0; i < h->n_out; i++) {
        const uint8_t *p = src + (size_t)h->start[i] * 3;
        const int16_t *c = h->coef + (size_t)i * taps;
        int32_t r = HALF, g = HALF, b = HALF;
        for (uint32_t k = 0; k < taps; k++) {
            r += p[3 * k] * c[k];
            g += p[3 * k + 1] * c[k];
            b += p[3 * k + 2] * c[k];
        }
        dst[3 * i] = (uint8_t)(r >> RF_RESIZE_BITS);
        dst[3 * i + 1] = (uint8_t)(g >> RF_RESIZE_BITS);
        dst[3 * i + 2] = (uint8_t)(b >> RF_RESIZE_BITS);
    }
}

void rf_resize_row_h_scalar(const rf_axis *h, const uint8_t *src, uint8_t *dst)
{
    switch (h->taps) {
    case 1: h_pass(h, src, dst, 1); break;
    case 2: h_pass(h, src, dst, 2); break;
    case 3: h_pass(h, src, dst, 3); break;
    case 4: h_pass(h, src, dst, 4); break;
    case 5: h_pass(h, src, dst, 5); break;
    case 6: h_pass(h, src, dst, 6); break;
    default: h_pass(h, src, dst, h->taps); break;
    }
}

/* Constant tap count, x innermost: the compiler vectorizes across x. */
static inline __attribute__((always_inline)) void v_pass(const int16_t *c,
                                                         const uint8_t *const *rows, size_t n,
                                                         uint8_t *restrict dst, uint32_t taps)
{
    for (size_t x = 0; x < n; x++) {
        int32_t s = HALF;
        for (uint32_t k = 0; k < taps; k++)
            s += rows[k][x] * c[k];
        dst[x] = (uint8_t)(s >> RF_RESIZE_BITS);
    }
}

/* Any tap count: accumulate one source row at a time into acc. */
static void v_pass_acc(const int16_t *c, uint32_t taps, const uint8_t *const *rows, size_t n,
                       int32_t *restrict acc, uint8_t *restrict dst)
{
    for (size_t x = 0; x < n; x++)
        acc[x] = HALF;
    for (uint32_t k = 0; k < taps; k++) {
        const uint8_t *restrict r = rows[k];
        int32_t ck = c[k];
        if (ck == 0)
            continue;
        for (size_t x = 0; x < n; x++)
            acc[x] += r[x] * ck;
    }
    for (size_t x = 0; x < n; x++)
        dst[x] = (uint8_t)(acc[x] >> RF_RESIZE_BITS);
}

void rf_resize_row_v_scalar(const rf_axis *v, uint32_t i, const uint8_t *const *rows, size_t n,
                            int32_t *acc, uint8_t *dst)
{
    const int16_t *c = v->coef + (size_t)i * v->taps;
    switch (v->taps) {
    case 1: v_pass(c, rows, n, dst, 1); break;
    case 2: v_pass(c, rows, n, dst, 2); break;
    case 3: v_pass(c, rows, n, dst, 3); break;
    case 4: v_pass(c, rows, n, dst, 4); break;
    case 5: v_pass(c, rows, n, dst, 5); break;
    case 6: v_pass(c, rows, n, dst, 6); break;
    default: v_pass_acc(c, v->taps, rows, n, acc, dst); break;
    }
}

/* ---- AVX2 paths: the scalar loops' integer sums in another order ---- */
#ifdef RF_HAVE_X86

/* Horizontal: a 16-byte load covers 4 RGB pixels; one shuffle makes the 16-bit pairs (p0,p1)
 * per channel in the low lane and (p2,p3) in the high lane, one multiply-add with the laid-out
 * coefficients gives both lanes' partial sums, added at the end: (r, g, b, 0) per output. */
__attribute__((target("avx2"))) static inline __m128i h_one(const uint8_t *p, const int16_t *c,
                                                             uint32_t groups, __m256i shuf)
{
    __m256i acc = _mm256_setzero_si256();
    for (uint32_t g = 0; g < groups; g++, p += 12, c += 16) {
        __m256i px = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p));
        px = _mm256_shuffle_epi8(px, shuf);
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(px, _mm256_load_si256((const __m256i *)c)));
    }
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    return _mm_srai_epi32(_mm_add_epi32(s, _mm_set1_epi32(HALF)), RF_RESIZE_BITS);
}

__attribute__((target("avx2"), always_inline)) static inline void
h_avx2_n(const rf_axis *h, const uint8_t *src, uint8_t *dst, uint32_t groups)
{
    const __m256i shuf = _mm256_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1,
                                          6, -1, 9, -1, 7, -1, 10, -1, 8, -1, 11, -1, -1, -1, -1,
                                          -1);
    const __m128i pack = _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
    const int16_t *c = h->hcoef;
    const int32_t *st = h->start;
    uint32_t n = h->n_out, i = 0;
    size_t cstep = (size_t)groups * 16;
    for (; i + 4 <= n; i += 4, c += 4 * cstep, dst += 12) {
        __m128i o0 = h_one(src + (size_t)st[i] * 3, c, groups, shuf);
        __m128i o1 = h_one(src + (size_t)st[i + 1] * 3, c + cstep, groups, shuf);
        __m128i o2 = h_one(src + (size_t)st[i + 2] * 3, c + 2 * cstep, groups, shuf);
        __m128i o3 = h_one(src + (size_t)st[i + 3] * 3, c + 3 * cstep, groups, shuf);
        __m128i b = _mm_packus_epi16(_mm_packs_epi32(o0, o1), _mm_packs_epi32(o2, o3));
        b = _mm_shuffle_epi8(b, pack); /* 12 bytes: r0 g0 b0 r1 ... b3 */
        _mm_storel_epi64((__m128i *)dst, b);
        uint32_t tail = (uint32_t)_mm_extract_epi32(b, 2);
        memcpy(dst + 8, &tail, 4);
    }
    for (; i < n; i++, c += cstep, dst += 3) {
        __m128i o = h_one(src + (size_t)st[i] * 3, c, groups, shuf);
        uint32_t v = (uint32_t)_mm_cvtsi128_si32(_mm_packus_epi16(_mm_packs_epi32(o, o), o));
        dst[0] = (uint8_t)v, dst[1] = (uint8_t)(v >> 8), dst[2] = (uint8_t)(v >> 16);
    }
}

__attribute__((target("avx2"))) static void h_avx2(const rf_axis *h, const uint8_t *src,
                                                   uint8_t *dst)
{
    switch (h->groups) {
    case 1: h_avx2_n(h, src, dst, 1); break;
    case 2: h_avx2_n(h, src, dst, 2); break;
    default: h_avx2_n(h, src, dst, h->groups); break;
    }
}

/* Vertical: pairs of source rows interleaved bytewise, widened to 16 bits, and multiply-added
 * with the (c_k, c_k+1) pair: 32 pixels per step. The lane-wise unpacks permute the order and
 * the lane-wise packs undo it. An odd last row pairs with itself under a zero coefficient. */
__attribute__((target("avx2"), always_inline)) static inline void
v_avx2_n(const int16_t *c, uint32_t taps, const uint8_t *const *rows, size_t n, uint8_t *dst)
{
    const __m256i zero = _mm256_setzero_si256(), half = _mm256_set1_epi32(HALF);
    size_t x = 0;
    for (;; x += 32) {
        /* The last step overlaps the one before (dst is not a source, so recomputing is
         * harmless); only rows shorter than one vector take the scalar loop. */
        if (x + 32 > n) {
            if (n < 32 || x == n)
                break;
            x = n - 32;
        }
        __m256i a0 = half, a1 = half, a2 = half, a3 = half;
        for (uint32_t k = 0; k < taps; k += 2) {
            int last = k + 1 >= taps;
            const uint8_t *r0 = rows[k], *r1 = last ? rows[k] : rows[k + 1];
            uint32_t pair = (uint16_t)c[k] | (uint32_t)(last ? 0 : (uint16_t)c[k + 1]) << 16;
            __m256i cc = _mm256_set1_epi32((int32_t)pair);
            __m256i p = _mm256_loadu_si256((const __m256i *)(r0 + x));
            __m256i q = _mm256_loadu_si256((const __m256i *)(r1 + x));
            __m256i lo = _mm256_unpacklo_epi8(p, q), hi = _mm256_unpackhi_epi8(p, q);
            a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(_mm256_unpacklo_epi8(lo, zero), cc));
            a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(_mm256_unpackhi_epi8(lo, zero), cc));
            a2 = _mm256_add_epi32(a2, _mm256_madd_epi16(_mm256_unpacklo_epi8(hi, zero), cc));
            a3 = _mm256_add_epi32(a3, _mm256_madd_epi16(_mm256_unpackhi_epi8(hi, zero), cc));
        }
        a0 = _mm256_srai_epi32(a0, RF_RESIZE_BITS), a1 = _mm256_srai_epi32(a1, RF_RESIZE_BITS);
        a2 = _mm256_srai_epi32(a2, RF_RESIZE_BITS), a3 = _mm256_srai_epi32(a3, RF_RESIZE_BITS);
        __m256i b = _mm256_packus_epi16(_mm256_packs_epi32(a0, a1), _mm256_packs_epi32(a2, a3));
        _mm256_storeu_si256((__m256i *)(dst + x), b);
        if (x + 32 == n)
            return;
    }
    for (; x < n; x++) {
        int32_t s = HALF;
        for (uint32_t k = 0; k < taps; k++)
            s += rows[k][x] * c[k];
        dst[x] = (uint8_t)(s >> RF_RESIZE_BITS);
    }
}

/* Constant tap counts unroll the row-pair loop. */
__attribute__((target("avx2"))) static void v_avx2(const int16_t *c, uint32_t taps,
                                                   const uint8_t *const *rows, size_t n,
                                                   uint8_t *dst)
{
    switch (taps) {
    case 1: v_avx2_n(c, 1, rows, n, dst); break;
    case 2: v_avx2_n(c, 2, rows, n, dst); break;
    case 3: v_avx2_n(c, 3, rows, n, dst); break;
    case 4: v_avx2_n(c, 4, rows, n, dst); break;
    case 5: v_avx2_n(c, 5, rows, n, dst); break;
    case 6: v_avx2_n(c, 6, rows, n, dst); break;
    default: v_avx2_n(c, taps, rows, n, dst); break;
    }
}

/* libgcc fills the CPU model in a constructor: one load and a test. */
int rf_resize_simd(void) { return __builtin_cpu_supports("avx2") ? 1 : 0; }

void rf_resize_row_h(const rf_axis *h, const uint8_t *src, uint8_t *dst)
{
    if (rf_resize_simd())
        h_avx2(h, src, dst);
    else
        rf_resize_row_h_scalar(h, src, dst);
}

void rf_resize_row_v(const rf_axis *v, uint32_t i, const uint8_t *const *rows, size_t n,
                     int32_t *acc, uint8_t *dst)
{
    if (rf_resize_simd())
        v_avx2(v->coef + (size_t)i * v->taps, v->taps, rows, n, dst);
    else
        rf_resize_row_v_scalar(v, i, rows, n, acc, dst);
}

#else

int rf_resize_simd(void) { return 0; }

void rf_resize_row_h(const rf_axis *h, const uint8_t *src, uint8_t *dst)
{
    rf_resize_row_h_scalar(h, src, dst);
}

void rf_resize_row_v(const rf_axis *v, uint32_t i, const uint8_t *const *rows, size_t n,
                     int32_t *acc, uint8_t *dst)
{
    rf_resize_row_v_scalar(v, i, rows, n, acc, dst);
}

#endif
