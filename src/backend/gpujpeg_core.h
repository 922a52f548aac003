/* gpujpeg_core.h — the per-thread work of GPU JPEG decode, written once for both sides:
 * gpujpeg.cu compiles it as CUDA device code, gpujpeg.c as plain C for the host backend and the
 * tests. Keep it to the common subset of C11 and C++ (no designated initializers, explicit
 * casts from void *), no libc calls, integer arithmetic only: that keeps host and device
 * outputs identical, and both identical to libjpeg-turbo. Three stages, each a pure function
 * of the packet and the scratch: rf_gj_interval / rf_gj_segment (Huffman, dequantize, islow
 * IDCT), rf_gj_vpass (upsampling, colour, vertical taps), rf_gj_hpass (horizontal taps). */
#ifndef RF_GPUJPEG_CORE_H
#define RF_GPUJPEG_CORE_H

#include "backend/gpujpeg.h"

#ifndef __CUDACC__
#include <string.h> /* memcpy for the host's word loads */
#endif

#ifdef __CUDACC__
#define RF_GJ_FN static __host__ __device__ __forceinline__
#else
#define RF_GJ_FN static inline
#endif

/* Zigzag -> natural order, with 16 extra entries that land on 63 so a run past the end of a
 * corrupt block stays inside it, as in libjpeg's jpeg_natural_order. */
#define RF_GJ_NATURAL_VALUES                                                                    \
    {0,  1,  8,  16, 9,  2,  3,  10, 17, 24, 32, 25, 18, 11, 4,  5,  12, 19, 26, 33,           \
     40, 48, 41, 34, 27, 20, 13, 6,  7,  14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36,           \
     29, 22, 15, 23, 30, 37, 44, 51, 58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54,           \
     47, 55, 62, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63}
static const uint8_t rf_gj_natural_host[80] = RF_GJ_NATURAL_VALUES;
#ifdef __CUDACC__
static __constant__ uint8_t rf_gj_natural_dev[80] = RF_GJ_NATURAL_VALUES;
#endif
#ifdef __CUDA_ARCH__
#define RF_GJ_NATURAL rf_gj_natural_dev
#else
#define RF_GJ_NATURAL rf_gj_natural_host
#endif

/* ---- bit reader over stuffed interval bytes or a plain packet's destuffed ones ---- */

typedef struct rf_gj_bits {
    const uint8_t *p, *end;
    uint64_t acc;   /* the low `n` bits are unread, most significant first */
    int32_t n;
    uint32_t fake;  /* zero bytes supplied past the end (libjpeg does the same, with a warning) */
    const uint8_t *wbase; /* the aligned 8 bytes at wbase are in `word` */
    uint64_t word;
    uint32_t plain; /* 1: the bytes are destuffed already (plain packets): no 0xFF checks */
} rf_gj_bits;

/* Bytes come in aligned 8-byte words: a GPU thread's reads are a chain of dependent global
 * loads, and one load per 8 bytes is most of what the entropy decoder waits for. Packets end
 * >= 8 bytes before their area does, so the last word never leaves it. Little-endian. */
RF_GJ_FN uint32_t rf_gj_byte(rf_gj_bits *b, const uint8_t *p)
{
    const uint8_t *base = (const uint8_t *)((uintptr_t)p & ~(uintptr_t)7);
    if (base != b->wbase) {
#ifdef __CUDA_ARCH__
        b->word = *(const uint64_t *)base;
#else
        memcpy(&b->word, base, 8);
#endif
        b->wbase = base;
    }
    return (uint32_t)(b->word >> (8 * ((uintptr_t)p & 7))) & 0xFF;
}

/* Top up to at least 57 bits. 0xFF is followed by 0x00 (stuffing) inside entropy data, possibly
 * after more 0xFF fill bytes; markers are outside the span. */
RF_GJ_FN void rf_gj_fill(rf_gj_bits *b)
{
    while (b->n <= 56) {
        uint32_t c = 0;
        if (b->p < b->end) {
            c = rf_gj_byte(b, b->p++);
            if (c == 0xFF && !b->plain) {
                while (b->p < b->end && rf_gj_byte(b, b->p) == 0xFF)
                    b->p++;
                if (b->p < b->end)
                    b->p++; /* the 0x00 */
            }
        } else {
            b->fake++;
        }
        b->acc = (b->acc << 8) | c;
        b->n += 8;
    }
}

RF_GJ_FN uint32_t rf_gj_get(rf_gj_bits *b, int32_t s)
{
    if (s == 0)
        return 0;
    if (b->n < s)
        rf_gj_fill(b);
    b->n -= s;
    return (uint32_t)(b->acc >> b->n) & ((1u << s) - 1);
}

/* One Huffman symbol, or -1 for a pattern that is no code. */
RF_GJ_FN int32_t rf_gj_symbol(rf_gj_bits *b, const rf_gj_huff *t)
{
    if (b->n < 16)
        rf_gj_fill(b);
    uint32_t peek = (uint32_t)(b->acc >> (b->n - 16)) & 0xFFFF;
    uint32_t e = t->look[peek >> (16 - RF_GJ_LOOKUP_BITS)];
    if (e) {
        b->n -= (int32_t)(e >> 8);
        return (int32_t)(e & 0xFF);
    }
    for (int32_t l = RF_GJ_LOOKUP_BITS + 1; l <= 16; l++) {
        int32_t code = (int32_t)(peek >> (16 - l));
        if (code <= t->maxcode[l]) {
            b->n -= l;
            return t->vals[(code + t->valoff[l]) & 0xFF];
        }
    }
    return -1;
}

RF_GJ_FN int32_t rf_gj_extend(uint32_t r, int32_t s)
{
    return r < (1u << (s - 1)) ? (int32_t)r - (int32_t)(1u << s) + 1 : (int32_t)r;
}

/* ---- islow IDCT (jidctint.c: LLM, 13-bit constants, 2 extra bits between passes) ---- */

#define RF_GJ_CB 13
#define RF_GJ_P1 2
#define RF_GJ_DESCALE(x, n) (((x) + ((int32_t)1 << ((n) - 1))) >> (n))

/* The even and odd halves shared by both passes: in[0..7] are the 8 inputs of one column or
 * row (already dequantized / scaled), out the 8 sums before the final descale. */
RF_GJ_FN void rf_gj_idct_1d(int32_t i0, int32_t i1, int32_t i2, int32_t i3, int32_t i4,
                            int32_t i5, int32_t i6, int32_t i7, int32_t o[8])
{
    int32_t z1 = (i2 + i6) * 4433;          /* FIX(0.541196100) */
    int32_t tmp2 = z1 + i6 * -15137;        /* FIX(1.847759065) */
    int32_t tmp3 = z1 + i2 * 6270;          /* FIX(0.765366865) */
    int32_t tmp0 = (i0 + i4) * (1 << RF_GJ_CB);
    int32_t tmp1 = (i0 - i4) * (1 << RF_GJ_CB);
    int32_t t10 = tmp0 + tmp3, t13 = tmp0 - tmp3, t11 = tmp1 + tmp2, t12 = tmp1 - tmp2;
    int32_t a0 = i7, a1 = i5, a2 = i3, a3 = i1;
    z1 = a0 + a3;
    int32_t z2 = a1 + a2, z3 = a0 + a2, z4 = a1 + a3;
    int32_t z5 = (z3 + z4) * 9633;          /* FIX(1.175875602) */
    a0 *= 2446;                             /* FIX(0.298631336) */
    a1 *= 16819;                            /* FIX(2.053119869) */
    a2 *= 25172;                            /* FIX(3.072711026) */
    a3 *= 12299;                            /* FIX(1.501321110) */
    z1 *= -7373;                            /* FIX(0.899976223) */
    z2 *= -20995;                           /* FIX(2.562915447) */
    z3 = z3 * -16069 + z5;                  /* FIX(1.961570560) */
    z4 = z4 * -3196 + z5;                   /* FIX(0.390180644) */
    a0 += z1 + z3;
    a1 += z2 + z4;
    a2 += z2 + z3;
    a3 += z1 + z4;
    o[0] = t10 + a3, o[7] = t10 - a3;
    o[1] = t11 + a2, o[6] = t11 - a2;
    o[2] = t12 + a1, o[5] = t12 - a1;
    o[3] = t13 + a0, o[4] = t13 - a0;
}

/* libjpeg's post-IDCT range limit: the value is taken modulo 1024 as a signed 10-bit number,
 * then centred and clamped (what its sample_range_limit table encodes). */
RF_GJ_FN uint8_t rf_gj_limit(int32_t v)
{
    v = ((v + 512) & 1023) - 512 + 128;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* coef: 64 quantized coefficients in natural order; q: the quant table (natural order). */
RF_GJ_FN void rf_gj_idct(const int16_t *coef, const uint16_t *q, uint8_t *out, uint32_t stride)
{
    int32_t ws[64], o[8];
    for (int c = 0; c < 8; c++) {
        const int16_t *in = coef + c;
        if (!(in[8] | in[16] | in[24] | in[32] | in[40] | in[48] | in[56])) {
            int32_t dc = (int32_t)in[0] * q[c] * (1 << RF_GJ_P1);
            for (int r = 0; r < 8; r++)
                ws[r * 8 + c] = dc;
            continue;
        }
        rf_gj_idct_1d(in[0] * q[c], in[8] * q[8 + c], in[16] * q[16 + c], in[24] * q[24 + c],
                      in[32] * q[32 + c], in[40] * q[40 + c], in[48] * q[48 + c],
                      in[56] * q[56 + c], o);
        for (int r = 0; r < 8; r++)
            ws[r * 8 + c] = RF_GJ_DESCALE(o[r], RF_GJ_CB - RF_GJ_P1);
    }
    for (int r = 0; r < 8; r++) {
        const int32_t *w = ws + r * 8;
        uint8_t *dst = out + r * stride;
        if (!(w[1] | w[2] | w[3] | w[4] | w[5] | w[6] | w[7])) {
            uint8_t v = rf_gj_limit(RF_GJ_DESCALE(w[0], RF_GJ_P1 + 3));
            for (int c = 0; c < 8; c++)
                dst[c] = v;
            continue;
        }
        rf_gj_idct_1d(w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7], o);
        for (int c = 0; c < 8; c++)
            dst[c] = rf_gj_limit(RF_GJ_DESCALE(o[c], RF_GJ_CB + RF_GJ_P1 + 3));
    }
}

/* ---- stage 1: one restart interval or one segment ---- */

RF_GJ_FN const uint8_t *rf_gj_at(const uint8_t *pkt, uint32_t off) { return pkt + off; }

/* Decode `count` MCUs of region MCU row mrow from column mcol on, reading b with the DC
 * predictors pred, into the planes in scratch; huff and quant may be copies in faster memory.
 * The IDCT stays in this thread: a kernel of its own was slower (docs/gpu-decode.md, "Where
 * the GPU time goes"). Returns an rf_gj_status. */
RF_GJ_FN int rf_gj_mcus(const rf_gj_packet *p, rf_gj_bits *b, int32_t pred[3], uint32_t mrow,
                        uint32_t mcol, uint32_t count, uint8_t *scratch, const rf_gj_huff *huff,
                        const uint16_t *quant)
{
    int16_t blk[64];
    for (uint32_t m = 0; m < count; m++, mcol++) {
        for (uint32_t ci = 0; ci < p->ncomp; ci++) {
            const rf_gj_comp *c = &p->comp[ci];
            const rf_gj_huff *dc = huff + c->dc, *ac = huff + c->ac;
            const uint16_t *q = quant + 64 * c->q;
            uint32_t stride = c->bw * 8;
            for (uint32_t v = 0; v < c->v; v++)
                for (uint32_t h = 0; h < c->h; h++) {
                    for (int i = 0; i < 64; i++)
                        blk[i] = 0;
                    int32_t s = rf_gj_symbol(b, dc);
                    if (s < 0)
                        return RF_GJ_BAD_CODE;
                    if (s)
                        s = rf_gj_extend(rf_gj_get(b, s), s);
                    pred[ci] += s;
                    blk[0] = (int16_t)pred[ci];
                    for (int32_t kk = 1; kk < 64; kk++) {
                        int32_t rs = rf_gj_symbol(b, ac);
                        if (rs < 0)
                            return RF_GJ_BAD_CODE;
                        int32_t r = rs >> 4;
                        s = rs & 15;
                        if (s) {
                            kk += r;
                            blk[RF_GJ_NATURAL[kk]] = (int16_t)rf_gj_extend(rf_gj_get(b, s), s);
                        } else {
                            if (r != 15)
                                break;
                            kk += 15;
                        }
                    }
                    uint32_t bx = mcol * c->h + h, by = mrow * c->v + v;
                    rf_gj_idct(blk, q, scratch + c->plane + (by * 8) * stride + bx * 8, stride);
                }
        }
    }
    return RF_GJ_OK;
}

RF_GJ_FN void rf_gj_bits_at(rf_gj_bits *b, const uint8_t *p, const uint8_t *end, uint32_t plain)
{
    b->p = p, b->end = end;
    b->acc = 0, b->n = 0, b->fake = 0;
    b->wbase = 0, b->word = 0;
    b->plain = plain;
}

/* The end of an interval as libjpeg checks it: no bits needed past its data (the fake zero
 * bytes are the last ones loaded, so none was used while n >= 8 * fake), and no whole bytes
 * left before the next marker. Returns an rf_gj_status. */
RF_GJ_FN int rf_gj_interval_end(rf_gj_bits *b)
{
    if ((uint32_t)b->n < 8 * b->fake)
        return RF_GJ_PREMATURE;
    uint32_t left = (uint32_t)(b->n - 8 * (int32_t)b->fake) / 8; /* whole real bytes unread */
    while (b->p < b->end) { /* plus the unstuffed bytes never loaded */
        uint32_t c = rf_gj_byte(b, b->p++);
        if (c == 0xFF) {
            while (b->p < b->end && rf_gj_byte(b, b->p) == 0xFF)
                b->p++;
            if (b->p < b->end)
                b->p++;
        }
        left++;
    }
    return left ? RF_GJ_EXTRANEOUS : RF_GJ_OK;
}

/* Entropy-decode `count` MCUs and drop them: every DC and AC code and its extra bits, as
 * libjpeg's decode_mcu reads them, so that a bad code or data ending early shows as it would
 * in a decode; pred (NULL: not kept) gets the DC differences. Returns an rf_gj_status. */
RF_GJ_FN int rf_gj_skip(const rf_gj_packet *p, rf_gj_bits *b, int32_t *pred, uint32_t count,
                        const rf_gj_huff *huff)
{
    for (uint32_t m = 0; m < count; m++)
        for (uint32_t ci = 0; ci < p->ncomp; ci++) {
            const rf_gj_comp *c = &p->comp[ci];
            const rf_gj_huff *dc = huff + c->dc, *ac = huff + c->ac;
            for (uint32_t k = 0; k < c->h * c->v; k++) {
                int32_t s = rf_gj_symbol(b, dc);
                if (s < 0)
                    return RF_GJ_BAD_CODE;
                uint32_t v = rf_gj_get(b, s);
                if (pred && s)
                    pred[ci] += rf_gj_extend(v, s);
                for (int32_t kk = 1; kk < 64; kk++) {
                    int32_t rs = rf_gj_symbol(b, ac);
                    if (rs < 0)
                        return RF_GJ_BAD_CODE;
                    int32_t r = rs >> 4;
                    s = rs & 15;
                    if (s) {
                        kk += r;
                        rf_gj_get(b, s);
                    } else {
                        if (r != 15)
                            break;
                        kk += 15;
                    }
                }
            }
        }
    return RF_GJ_OK;
}

/* Segment k of a plain packet, from its bit offset with the DC predictors the walker or the
 * sync-point index found there, after `skip` MCUs left of the region. The walk or the index's
 * build decoded these codes already, so only a packet damaged after writing can fail. Returns
 * an rf_gj_status. */
RF_GJ_FN int rf_gj_segment(const uint8_t *pkt, uint32_t k, uint8_t *scratch,
                           const rf_gj_huff *huff, const uint16_t *quant)
{
    const rf_gj_packet *p = (const rf_gj_packet *)pkt;
    const rf_gj_seg *sg = (const rf_gj_seg *)rf_gj_at(pkt, p->off_span) + k;
    const uint8_t *data = rf_gj_at(pkt, p->off_data);
    if ((uint64_t)sg->bit > 8 * (uint64_t)p->data_bytes || sg->mrow >= p->mcu_rows ||
        sg->mcol + sg->count > p->mcu_cols || sg->skip > RF_GJ_SKIP_MAX)
        return RF_GJ_BAD_PACKET;
    rf_gj_bits b;
    rf_gj_bits_at(&b, data + sg->bit / 8, data + p->data_bytes, 1);
    rf_gj_get(&b, (int32_t)(sg->bit & 7));
    int32_t pred[3] = {sg->pred[0], sg->pred[1], sg->pred[2]};
    int st = sg->skip ? rf_gj_skip(p, &b, pred, sg->skip, huff) : RF_GJ_OK;
    return st ? st : rf_gj_mcus(p, &b, pred, sg->mrow, sg->mcol, sg->count, scratch, huff, quant);
}

/* Decode restart interval k into the planes, then check its end as libjpeg does. */
RF_GJ_FN int rf_gj_interval(const uint8_t *pkt, uint32_t k, uint8_t *scratch,
                            const rf_gj_huff *huff, const uint16_t *quant)
{
    const rf_gj_packet *p = (const rf_gj_packet *)pkt;
    const uint32_t *span = (const uint32_t *)rf_gj_at(pkt, p->off_span);
    const uint8_t *data = rf_gj_at(pkt, p->off_data);
    uint32_t per_row = p->mcu_cols / p->interval;
    rf_gj_bits b;
    rf_gj_bits_at(&b, data + span[k], data + span[k + 1], 0);
    int32_t pred[3] = {0, 0, 0};
    int st = rf_gj_mcus(p, &b, pred, k / per_row, (k % per_row) * p->interval, p->interval,
                        scratch, huff, quant);
    return st ? st : rf_gj_interval_end(&b);
}

/* Check unit k of an engine packet (rf_gj_unit): its codes read as the CPU path's libjpeg
 * reads them, without decoding pixels. Returns an rf_gj_status. */
RF_GJ_FN int rf_gj_engine_check(const uint8_t *pkt, uint32_t k, const rf_gj_huff *huff)
{
    const rf_gj_packet *p = (const rf_gj_packet *)pkt;
    const rf_gj_unit *u = (const rf_gj_unit *)rf_gj_at(pkt, p->off_span) + k;
    const uint8_t *data = rf_gj_at(pkt, p->off_data);
    if (u->start > u->end || u->end > p->data_bytes)
        return RF_GJ_BAD_PACKET;
    rf_gj_bits b;
    rf_gj_bits_at(&b, data + u->start, data + u->end, 0);
    int st = rf_gj_skip(p, &b, NULL, u->mcus, huff);
    if (st || (u->flags & RF_GJ_CHECK_END))
        return st ? st : rf_gj_interval_end(&b);
    return (uint32_t)b.n < 8 * b.fake ? RF_GJ_PREMATURE : RF_GJ_OK;
}

/* The verdict of restart interval k of a kernel packet: damage the CPU path's libjpeg would not
 * read for the same crop is not this sample's (rf_gj_packet.check_units). */
RF_GJ_FN int rf_gj_counted(const rf_gj_packet *p, uint32_t k, int st)
{
    if (p->engine || p->plain || st == RF_GJ_BAD_PACKET)
        return st;
    if (k >= p->check_units || (k + 1 == p->check_units && st == RF_GJ_EXTRANEOUS))
        return RF_GJ_OK;
    return st;
}

/* ---- stage 2: chroma upsampling, colour, vertical resize ---- */

/* Sample of component c at image pixel (x, y), upsampled as libjpeg-turbo's fancy upsamplers
 * do (h2v1, h1v2, h2v2 triangles; neighbours clamped at the edge, what its edge cases and
 * context rows amount to). */
RF_GJ_FN int32_t rf_gj_chroma(const rf_gj_comp *c, const uint8_t *scratch, uint32_t max_h,
                              uint32_t max_v, int32_t x, int32_t y)
{
    const uint8_t *pl = scratch + c->plane;
    int32_t stride = (int32_t)c->bw * 8, ox = (int32_t)c->x0, oy = (int32_t)c->y0;
    int32_t dw1 = (int32_t)c->dw - 1, dh1 = (int32_t)c->dh - 1;
    int hf = max_h / c->h == 2, vf = max_v / c->v == 2;
    int32_t cx = hf ? x >> 1 : x, cy = vf ? y >> 1 : y;
#define RF_GJ_S(col, row) ((int32_t)pl[((row) - oy) * stride + ((col) - ox)])
    if (!hf && !vf)
        return RF_GJ_S(cx, cy);
    int32_t ny = cy;
    if (vf)
        ny = (y & 1) ? (cy < dh1 ? cy + 1 : dh1) : (cy > 0 ? cy - 1 : 0);
    if (!hf) /* h1v2 */
        return (3 * RF_GJ_S(cx, cy) + RF_GJ_S(cx, ny) + ((y & 1) ? 2 : 1)) >> 2;
    int32_t nx = (x & 1) ? (cx < dw1 ? cx + 1 : dw1) : (cx > 0 ? cx - 1 : 0);
    if (!vf) /* h2v1 */
        return (3 * RF_GJ_S(cx, cy) + RF_GJ_S(nx, cy) + ((x & 1) ? 2 : 1)) >> 2;
    int32_t s0 = 3 * RF_GJ_S(cx, cy) + RF_GJ_S(cx, ny);
    int32_t s1 = 3 * RF_GJ_S(nx, cy) + RF_GJ_S(nx, ny);
#undef RF_GJ_S
    return (3 * s0 + s1 + ((x & 1) ? 7 : 8)) >> 4;
}

RF_GJ_FN uint8_t rf_gj_clamp(int32_t v) { return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v); }

/* RGB of image pixel (x, y): jdcolor.c's ycc_rgb_convert with its 16-bit fixed point tables
 * computed inline (Cr_r = FIX(1.402), Cb_b = FIX(1.772), G from -FIX(0.34414) and
 * -FIX(0.71414)); grayscale replicates Y. */
RF_GJ_FN void rf_gj_rgb(const rf_gj_packet *p, const uint8_t *scratch, int32_t x, int32_t y,
                        int32_t rgb[3])
{
    int32_t Y = rf_gj_chroma(&p->comp[0], scratch, p->max_h, p->max_v, x, y);
    if (p->ncomp == 1) {
        rgb[0] = rgb[1] = rgb[2] = Y;
        return;
    }
    int32_t cb = rf_gj_chroma(&p->comp[1], scratch, p->max_h, p->max_v, x, y) - 128;
    int32_t cr = rf_gj_chroma(&p->comp[2], scratch, p->max_h, p->max_v, x, y) - 128;
    rgb[0] = rf_gj_clamp(Y + ((91881 * cr + 32768) >> 16));
    rgb[1] = rf_gj_clamp(Y + ((-22554 * cb + 32768 - 46802 * cr) >> 16));
    rgb[2] = rf_gj_clamp(Y + ((116130 * cb + 32768) >> 16));
}

#define RF_GJ_RBITS 14

/* The packet's output k (rf_gj_view). */
RF_GJ_FN const rf_gj_view *rf_gj_view_of(const uint8_t *pkt, uint32_t k)
{
    return (const rf_gj_view *)rf_gj_at(pkt, ((const rf_gj_packet *)pkt)->off_views) + k;
}

/* Vertically resized row i of output w, column x (region columns, xlo <= x < xhi): 3 bytes at
 * dst. */
RF_GJ_FN void rf_gj_vpass(const uint8_t *pkt, const rf_gj_view *w, const uint8_t *scratch,
                          uint32_t i, int32_t x, uint8_t *dst)
{
    const rf_gj_packet *p = (const rf_gj_packet *)pkt;
    const int32_t *start = (const int32_t *)rf_gj_at(pkt, w->off_vstart);
    const int16_t *coef = (const int16_t *)rf_gj_at(pkt, w->off_vcoef) + i * w->vtaps;
    int32_t acc[3] = {1 << (RF_GJ_RBITS - 1), 1 << (RF_GJ_RBITS - 1), 1 << (RF_GJ_RBITS - 1)};
    int32_t gx = (int32_t)p->rx + x, gy = (int32_t)p->ry + start[i], rgb[3];
    for (uint32_t k = 0; k < w->vtaps; k++) {
        if (!coef[k])
            continue; /* a zero-padded tap (its row may lie outside the region) */
        rf_gj_rgb(p, scratch, gx, gy + (int32_t)k, rgb);
        acc[0] += rgb[0] * coef[k], acc[1] += rgb[1] * coef[k], acc[2] += rgb[2] * coef[k];
    }
    dst[0] = (uint8_t)(acc[0] >> RF_GJ_RBITS);
    dst[1] = (uint8_t)(acc[1] >> RF_GJ_RBITS);
    dst[2] = (uint8_t)(acc[2] >> RF_GJ_RBITS);
}

/* ---- stage 3: horizontal resize into the output ---- */

/* Every output's rectangle lies in its canvas, and its canvas (at most `rows` rows) in a
 * sample of sample_bytes; the table in the packet. */
RF_GJ_FN int rf_gj_views_ok(const uint8_t *pkt, uint32_t rows, uint64_t sample_bytes)
{
    const rf_gj_packet *p = (const rf_gj_packet *)pkt;
    if (p->nviews == 0 || p->nviews > RF_VIEWS_MAX ||
        (uint64_t)p->off_views + (uint64_t)p->nviews * sizeof(rf_gj_view) > p->bytes)
        return 0;
    for (uint32_t k = 0; k < p->nviews; k++) {
        const rf_gj_view *w = rf_gj_view_of(pkt, k);
        if (w->canvas_h > rows || (uint64_t)w->out_x + w->out_w > w->canvas_w ||
            (uint64_t)w->out_y + w->out_h > w->canvas_h ||
            w->at + (uint64_t)w->canvas_w * w->canvas_h * 3 > sample_bytes)
            return 0;
    }
    return 1;
}

/* One pixel of output w: 3 bytes at (y, x) of its canvas, in the packet's layout. */
RF_GJ_FN void rf_gj_put(const rf_gj_packet *p, const rf_gj_view *w, uint8_t *out, uint32_t y,
                        uint32_t x, uint32_t r, uint32_t g, uint32_t b)
{
    uint64_t o = (uint64_t)y * w->canvas_w + x;
    out += w->at;
    if (p->layout == 1 /* RF_LAYOUT_NCHW */) {
        uint64_t plane = (uint64_t)w->canvas_h * w->canvas_w;
        out[o] = (uint8_t)r, out[plane + o] = (uint8_t)g, out[2 * plane + o] = (uint8_t)b;
    } else {
        out[3 * o] = (uint8_t)r, out[3 * o + 1] = (uint8_t)g, out[3 * o + 2] = (uint8_t)b;
    }
}

/* Pixel (i, j) of output w's rectangle: the horizontal taps over its vertically resized row
 * i. */
RF_GJ_FN void rf_gj_hpass(const uint8_t *pkt, const rf_gj_view *w, const uint8_t *scratch,
                          uint32_t i, uint32_t j, uint8_t *out)
{
    const int32_t *start = (const int32_t *)rf_gj_at(pkt, w->off_hstart);
    const int16_t *coef = (const int16_t *)rf_gj_at(pkt, w->off_hcoef) + j * w->htaps;
    const uint8_t *row = scratch + w->inter + (uint64_t)i * (uint32_t)(w->xhi - w->xlo) * 3;
    int32_t acc[3] = {1 << (RF_GJ_RBITS - 1), 1 << (RF_GJ_RBITS - 1), 1 << (RF_GJ_RBITS - 1)};
    for (uint32_t k = 0; k < w->htaps; k++) {
        if (!coef[k])
            continue;
        const uint8_t *s = row + (start[j] + (int32_t)k - w->xlo) * 3;
        acc[0] += s[0] * coef[k], acc[1] += s[1] * coef[k], acc[2] += s[2] * coef[k];
    }
    rf_gj_put((const rf_gj_packet *)pkt, w, out, w->out_y + i, w->out_x + j,
              (uint32_t)(acc[0] >> RF_GJ_RBITS) & 0xFF, (uint32_t)(acc[1] >> RF_GJ_RBITS) & 0xFF,
              (uint32_t)(acc[2] >> RF_GJ_RBITS) & 0xFF);
}

/* Pixel (y, x) of output w's canvas: the rectangle's, else the pad (letterbox, center_pad). */
RF_GJ_FN void rf_gj_out(const uint8_t *pkt, const rf_gj_view *w, const uint8_t *scratch,
                        uint32_t y, uint32_t x, uint8_t *out)
{
    const rf_gj_packet *p = (const rf_gj_packet *)pkt;
    if (y - w->out_y < w->out_h && x - w->out_x < w->out_w) /* unsigned: below wraps */
        rf_gj_hpass(pkt, w, scratch, y - w->out_y, x - w->out_x, out);
    else
        rf_gj_put(p, w, out, y, x, p->pad & 0xFF, (p->pad >> 8) & 0xFF, (p->pad >> 16) & 0xFF);
}

#endif
