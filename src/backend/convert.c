/* convert.c — CPU output conversions (see convert.h). Run per sample on the host backend, so
 * they parallelize over the decode threads; the CUDA backend uses convert.cu instead. */
#include "backend/convert.h"

#include <string.h>

#include "ringfeed.h"

uint32_t rf_dtype_bytes(uint32_t dtype)
{
    switch (dtype) {
    case RF_DTYPE_UINT8: return 1;
    case RF_DTYPE_UINT16:
    case RF_DTYPE_FLOAT16:
    case RF_DTYPE_BFLOAT16: return 2;
    case RF_DTYPE_INT32:
    case RF_DTYPE_FLOAT32: return 4;
    case RF_DTYPE_INT64: return 8;
    default: return 0;
    }
}

uint16_t rf_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, exp = (x >> 23) & 0xffu, man = x & 0x7fffffu;
    if (exp == 0xffu) /* inf or NaN (keep NaN quiet) */
        return (uint16_t)(sign | 0x7c00u | (man ? 0x200u : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 0x1f)
        return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) { /* subnormal half, or zero */
        if (e < -10)
            return (uint16_t)sign;
        man |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t h = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1)))
            h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1)))
        h++; /* may carry into the exponent, which is the correct rounding */
    return (uint16_t)(sign | h);
}

uint16_t rf_f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

void rf_convert_image_cpu(const uint8_t *src, void *dst, uint32_t h, uint32_t w, uint32_t dtype,
                          uint32_t layout, const float mean[3], const float std[3])
{
    float scale[3], bias[3];
    for (int c = 0; c < 3; c++) {
        scale[c] = 1.0f / std[c];
        bias[c] = -mean[c] / std[c];
    }
    uint64_t plane = (uint64_t)h * w;
    for (uint64_t p = 0; p < plane; p++)
        for (int c = 0; c < 3; c++) {
            float v = src[p * 3 + c] * scale[c] + bias[c];
            uint64_t o = layout == RF_LAYOUT_NCHW ? c * plane + p : p * 3 + c;
            if (dtype == RF_DTYPE_FLOAT32)
                ((float *)dst)[o] = v;
            else if (dtype == RF_DTYPE_FLOAT16)
                ((uint16_t *)dst)[o] = rf_f32_to_f16(v);
            else
                ((uint16_t *)dst)[o] = rf_f32_to_bf16(v);
        }
}

void rf_widen_tokens_cpu(const void *src, void *dst, uint64_t n, uint32_t src_bytes,
                         uint32_t dtype)
{
    for (uint64_t i = 0; i < n; i++) {
        uint64_t v = src_bytes == 2 ? ((const uint16_t *)src)[i] : ((const uint32_t *)src)[i];
        if (dtype == RF_DTYPE_INT64)
            ((int64_t *)dst)[i] = (int64_t)v;
        else if (dtype == RF_DTYPE_INT32)
            ((int32_t *)dst)[i] = (int32_t)v;
        else
            ((uint16_t *)dst)[i] = (uint16_t)v;
    }
}
