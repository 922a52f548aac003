// gpujpeg.cu — the device side of GPU JPEG decode (gpujpeg.h): three kernels over a staged
// batch, enqueued on the copy stream right after the batch's host-to-device copy.
//
//  1. intervals: one CUDA block per sample, one thread per restart interval or plain-packet
//     segment: Huffman decode, IDCT, samples into the planes in the scratch. Each thread is one
//     serial chain, latency-bound (docs/gpu-decode.md, "Where the GPU time goes"). Engine
//     packets, whose planes the hardware decoder wrote, are only checked here
//     (rf_gj_engine_check): the engines decode damaged entropy-coded data without an error;
//  2. vpass: one block per (output row, sample), threads across the row's source columns, for
//     each of the packet's outputs (the image, or each multi-crop view);
//  3. hpass: one block per (output row, sample), threads across output pixels, each output's
//     rectangle resized and the rest of its canvas padded; samples the CPU decoded (flag 0)
//     are copied through by the same blocks.
// The per-thread code is gpujpeg_core.h, shared with the host driver.
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "backend/gpujpeg.h"
}
#include "backend/gpujpeg_core.h"

// meta: n uint64 offsets into the staged bytes, then n flags (gpujpeg.h).
static __device__ const uint8_t *sample_of(const uint8_t *staged, const uint8_t *meta, uint32_t i)
{
    return staged + ((const uint64_t *)meta)[i];
}

// What sample i of n is: RF_GJ_PIXELS (decoded on the CPU already), RF_GJ_KERNELS or
// RF_GJ_ENGINE_PACKET (gpujpeg.h).
static __device__ uint8_t is_packet(const uint8_t *meta, uint32_t n, uint32_t i)
{
    return meta[8 * (size_t)n + i];
}

// The packet's Huffman and quant tables go to shared memory first: every symbol is one or two
// table lookups, and from global memory those were much of the kernel's time.
#define GJ_MAX_HUFF 8 // 4 DC + 4 AC
#define GJ_MAX_QUANT 4

__global__ void gj_intervals(const uint8_t *__restrict__ staged, size_t staged_bytes,
                             const uint8_t *__restrict__ meta, uint8_t *scratch,
                             size_t scratch_bytes, int32_t *status, uint32_t rows,
                             uint64_t sample_bytes)
{
    __shared__ rf_gj_huff huff[GJ_MAX_HUFF];
    __shared__ uint16_t quant[GJ_MAX_QUANT * 64];
    uint32_t i = blockIdx.x, n = gridDim.x;
    uint8_t kind = is_packet(meta, n, i);
    if (!kind)
        return;
    const uint8_t *pkt = sample_of(staged, meta, i);
    const rf_gj_packet *p = (const rf_gj_packet *)pkt;
    uint32_t nq = p->nquant;
    if (p->magic != RF_GJ_MAGIC || p->scratch > RF_GJ_SCRATCH ||
        (kind == RF_GJ_ENGINE_PACKET) != (p->engine != 0) ||
        (size_t)(pkt - staged) + p->bytes + 8 > staged_bytes ||
        (size_t)p->scratch_at * RF_GJ_ALIGN + p->scratch > scratch_bytes ||
        p->nhuff > GJ_MAX_HUFF || nq > GJ_MAX_QUANT || !rf_gj_views_ok(pkt, rows, sample_bytes)) {
        if (threadIdx.x == 0)
            status[i] = RF_GJ_BAD_PACKET;
        return;
    }
    const uint32_t *hs = (const uint32_t *)(pkt + p->off_huff);
    uint32_t *hd = (uint32_t *)huff;
    for (uint32_t w = threadIdx.x; w < p->nhuff * sizeof(rf_gj_huff) / 4; w += blockDim.x)
        hd[w] = hs[w];
    const uint16_t *qs = (const uint16_t *)(pkt + p->off_quant);
    for (uint32_t w = threadIdx.x; w < nq * 64; w += blockDim.x)
        quant[w] = qs[w];
    __syncthreads();
    uint8_t *scr = scratch + (size_t)p->scratch_at * RF_GJ_ALIGN;
    for (uint32_t k = threadIdx.x; k < p->nintervals; k += blockDim.x) {
        // an engine packet's planes came from the hardware decoder: only its check runs here
        int st = p->engine  ? rf_gj_engine_check(pkt, k, huff)
                 : p->plain ? rf_gj_segment(pkt, k, scr, huff, quant)
                            : rf_gj_counted(p, k, rf_gj_interval(pkt, k, scr, huff, quant));
        // A relaxed device atomic is enough: the first failing interval's status wins, and
        // the host reads status only after the batch's event, which orders the kernel first.
        if (st)
            atomicCAS(&status[i], 0, st);
    }
}

__global__ void gj_vpass(const uint8_t *__restrict__ staged, const uint8_t *__restrict__ meta,
                         uint8_t *scratch, const int32_t *status)
{
    uint32_t row = blockIdx.x, i = blockIdx.y, n = gridDim.y;
    if (!is_packet(meta, n, i) || status[i])
        return;
    const uint8_t *pkt = sample_of(staged, meta, i);
    const rf_gj_packet *p = (const rf_gj_packet *)pkt;
    uint8_t *scr = scratch + (size_t)p->scratch_at * RF_GJ_ALIGN;
    for (uint32_t k = 0; k < p->nviews; k++) {
        const rf_gj_view *v = rf_gj_view_of(pkt, k);
        if (row >= v->out_h)
            continue;
        uint32_t w = (uint32_t)(v->xhi - v->xlo);
        uint8_t *dst = scr + v->inter + (size_t)row * w * 3;
        for (uint32_t x = threadIdx.x; x < w; x += blockDim.x)
            rf_gj_vpass(pkt, v, scr, row, v->xlo + (int32_t)x, dst + 3 * x);
    }
}

__global__ void gj_hpass(const uint8_t *__restrict__ staged, const uint8_t *__restrict__ meta,
                         const uint8_t *scratch, const int32_t *status, uint8_t *out,
                         uint64_t sample_bytes)
{
    uint32_t row = blockIdx.x, i = blockIdx.y, n = gridDim.y, rows = gridDim.x;
    uint8_t *o = out + (size_t)i * sample_bytes;
    if (!is_packet(meta, n, i)) { // decoded on the CPU: this block copies its share
        size_t share = (sample_bytes + rows - 1) / rows, lo = (size_t)row * share;
        size_t hi = lo + share < sample_bytes ? lo + share : sample_bytes;
        const uint8_t *s = sample_of(staged, meta, i);
        for (size_t x = lo + threadIdx.x; x < hi; x += blockDim.x)
            o[x] = s[x];
        return;
    }
    if (status[i])
        return;
    const uint8_t *pkt = sample_of(staged, meta, i);
    const rf_gj_packet *p = (const rf_gj_packet *)pkt;
    const uint8_t *scr = scratch + (size_t)p->scratch_at * RF_GJ_ALIGN;
    for (uint32_t k = 0; k < p->nviews; k++) {
        const rf_gj_view *v = rf_gj_view_of(pkt, k);
        if (row >= v->canvas_h) // a NATIVE image's canvas is its own size, a view's its own
            continue;
        for (uint32_t j = threadIdx.x; j < v->canvas_w; j += blockDim.x)
            rf_gj_out(pkt, v, scr, row, j, o);
    }
}

extern "C" int rf_cuda_gj_decode(const uint8_t *staged, size_t staged_bytes, const uint8_t *meta,
                                 uint8_t *out, uint32_t n, uint32_t rows, uint64_t sample_bytes,
                                 uint8_t *scratch, size_t scratch_bytes, int32_t *status,
                                 void *stream)
{
    if (n == 0)
        return 0;
    cudaStream_t s = (cudaStream_t)stream;
    gj_intervals<<<n, 128, 0, s>>>(staged, staged_bytes, meta, scratch, scratch_bytes, status,
                                   rows, sample_bytes);
    // one block per output row of every sample: the vertical pass's rows, then the pixels
    gj_vpass<<<dim3(rows, n), 128, 0, s>>>(staged, meta, scratch, status);
    gj_hpass<<<dim3(rows, n), 128, 0, s>>>(staged, meta, scratch, status, out, sample_bytes);
    return (int)cudaGetLastError();
}
