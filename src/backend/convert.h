/* convert.h — output conversions after decode/read: uint8 pixels (NHWC) to normalized
 * float16/bfloat16/float32 in NCHW or NHWC, and token widening (uint16/uint32 to int32/int64).
 * The CPU versions run per sample on the host backend (in the decode or I/O thread that
 * produced the sample); the CUDA versions run per batch on the copy stream. */
#ifndef RF_CONVERT_H
#define RF_CONVERT_H

#include <stddef.h>
#include <stdint.h>

/* Bytes per element of an rf_dtype (0 for an unknown one). */
uint32_t rf_dtype_bytes(uint32_t dtype);

/* One image: src is h*w*3 uint8 NHWC; dst receives (src - mean[c]) / std[c] as `dtype` in
 * `layout` (NCHW: 3 planes; NHWC: interleaved). */
void rf_convert_image_cpu(const uint8_t *src, void *dst, uint32_t h, uint32_t w, uint32_t dtype,
                          uint32_t layout, const float mean[3], const float std[3]);

/* n tokens of src_bytes (2 or 4, unsigned) to dtype (UINT16, INT32 or INT64). */
void rf_widen_tokens_cpu(const void *src, void *dst, uint64_t n, uint32_t src_bytes,
                         uint32_t dtype);

/* float -> IEEE half / bfloat16 bits, round to nearest even (NaN stays NaN). */
uint16_t rf_f32_to_f16(float f);
uint16_t rf_f32_to_bf16(float f);

#ifdef RINGFEED_HAVE_CUDA
/* The same on the device, enqueued on `stream` (a cudaStream_t). n images / n tokens.
 * Return 0 or a cudaError_t value (positive) from the launch. Images: offs NULL, image i
 * is at src + i * h * w * 3; else (device memory, n entries) at src + offs[i]. */
int rf_cuda_convert_images(const uint8_t *src, const uint64_t *offs, void *dst, uint32_t n,
                           uint32_t h, uint32_t w, uint32_t dtype, uint32_t layout,
                           const float mean[3], const float std[3], void *stream);
/* n samples of sample_bytes from src + offs[i] (device memory, each offset a multiple of 16) to
 * dst + i * sample_bytes: a batch the CPU decoded whole, put in order. */
int rf_cuda_gather_samples(const uint8_t *src, const uint64_t *offs, void *dst, uint32_t n,
                           uint64_t sample_bytes, void *stream);
int rf_cuda_widen_tokens(const void *src, void *dst, uint64_t n, uint32_t src_bytes,
                         uint32_t dtype, void *stream);
#endif

#endif
