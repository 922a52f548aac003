// convert.cu — device output conversions (see convert.h), enqueued on the copy stream right
// after a batch's host-to-device copy so they overlap the consumer's work like the copy does.
// Memory-bound: one thread per output pixel (3 channels) so reads of the uint8 source are
// contiguous across a warp; float math, then the output type's own rounding.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "backend/convert.h"
#include "ringfeed.h"
}

struct rf_norm {
    float scale[3], bias[3];
};

template <typename T> __device__ inline T cvt(float v);
template <> __device__ inline float cvt<float>(float v) { return v; }
template <> __device__ inline __half cvt<__half>(float v) { return __float2half_rn(v); }
template <> __device__ inline __nv_bfloat16 cvt<__nv_bfloat16>(float v)
{
    return __float2bfloat16_rn(v);
}

template <typename T>
__global__ void convert_images(const uint8_t *__restrict__ src, const uint64_t *__restrict__ offs,
                               T *__restrict__ dst, uint64_t pixels, uint64_t plane, int nchw,
                               rf_norm nm)
{
    uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= pixels)
        return;
    uint64_t img = i / plane, p = i % plane;
    const uint8_t *s = offs ? src + offs[img] + p * 3 : src + i * 3;
    for (int c = 0; c < 3; c++) {
        float v = s[c] * nm.scale[c] + nm.bias[c];
        uint64_t o = nchw ? (img * 3 + c) * plane + p : i * 3 + c;
        dst[o] = cvt<T>(v);
    }
}

// Sample i's bytes from src + offs[i] to dst + i * words, in words of W (grid: chunks x samples).
template <typename W>
__global__ void gather(const uint8_t *__restrict__ src, const uint64_t *__restrict__ offs,
                       uint8_t *__restrict__ dst, uint64_t words)
{
    uint32_t i = blockIdx.y;
    const W *s = (const W *)(src + offs[i]);
    W *d = (W *)dst + (uint64_t)i * words;
    for (uint64_t k = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; k < words;
         k += (uint64_t)gridDim.x * blockDim.x)
        d[k] = s[k];
}

template <typename S, typename D>
__global__ void widen(const S *__restrict__ src, D *__restrict__ dst, uint64_t n)
{
    uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        dst[i] = (D)src[i];
}

static unsigned blocks(uint64_t n, unsigned threads) { return (unsigned)((n + threads - 1) / threads); }

extern "C" int rf_cuda_convert_images(const uint8_t *src, const uint64_t *offs, void *dst,
                                      uint32_t n, uint32_t h, uint32_t w, uint32_t dtype,
                                      uint32_t layout, const float mean[3], const float std[3],
                                      void *stream)
{
    rf_norm nm;
    for (int c = 0; c < 3; c++) {
        nm.scale[c] = 1.0f / std[c];
        nm.bias[c] = -mean[c] / std[c];
    }
    uint64_t plane = (uint64_t)h * w, pixels = plane * n;
    if (pixels == 0)
        return 0;
    cudaStream_t s = (cudaStream_t)stream;
    const unsigned T = 256;
    int nchw = layout == RF_LAYOUT_NCHW;
    if (dtype == RF_DTYPE_FLOAT32)
        convert_images<float><<<blocks(pixels, T), T, 0, s>>>(src, offs, (float *)dst, pixels, plane, nchw, nm);
    else if (dtype == RF_DTYPE_FLOAT16)
        convert_images<__half><<<blocks(pixels, T), T, 0, s>>>(src, offs, (__half *)dst, pixels, plane, nchw, nm);
    else
        convert_images<__nv_bfloat16>
            <<<blocks(pixels, T), T, 0, s>>>(src, offs, (__nv_bfloat16 *)dst, pixels, plane, nchw, nm);
    return (int)cudaGetLastError();
}

extern "C" int rf_cuda_gather_samples(const uint8_t *src, const uint64_t *offs, void *dst,
                                      uint32_t n, uint64_t sample_bytes, void *stream)
{
    if (n == 0 || sample_bytes == 0)
        return 0;
    cudaStream_t s = (cudaStream_t)stream;
    const unsigned T = 256;
    // 16-byte words when every sample starts 16-aligned on both sides: the offsets are
    // multiples of RF_GJ_ALIGN, and dst's sample i starts at i * sample_bytes.
    uint64_t words = sample_bytes % 16 == 0 ? sample_bytes / 16 : sample_bytes;
    unsigned chunks = blocks(words, T);
    dim3 grid(chunks < 64 ? chunks : 64, n);
    if (sample_bytes % 16 == 0)
        gather<uint4><<<grid, T, 0, s>>>(src, offs, (uint8_t *)dst, words);
    else
        gather<uint8_t><<<grid, T, 0, s>>>(src, offs, (uint8_t *)dst, words);
    return (int)cudaGetLastError();
}

extern "C" int rf_cuda_widen_tokens(const void *src, void *dst, uint64_t n, uint32_t src_bytes,
                                    uint32_t dtype, void *stream)
{
    if (n == 0)
        return 0;
    cudaStream_t s = (cudaStream_t)stream;
    const unsigned T = 256;
    unsigned b = blocks(n, T);
    if (src_bytes == 2) {
        const uint16_t *p = (const uint16_t *)src;
        if (dtype == RF_DTYPE_INT64) widen<<<b, T, 0, s>>>(p, (int64_t *)dst, n);
        else if (dtype == RF_DTYPE_INT32) widen<<<b, T, 0, s>>>(p, (int32_t *)dst, n);
        else widen<<<b, T, 0, s>>>(p, (uint16_t *)dst, n);
    } else {
        const uint32_t *p = (const uint32_t *)src;
        if (dtype == RF_DTYPE_INT64) widen<<<b, T, 0, s>>>(p, (int64_t *)dst, n);
        else widen<<<b, T, 0, s>>>(p, (int32_t *)dst, n);
    }
    return (int)cudaGetLastError();
}
