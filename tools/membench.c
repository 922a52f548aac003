/* ringfeed-membench — the memory-hierarchy figures behind docs/tuning.md, measured with the
 * CUDA runtime directly (this tool measures CUDA itself, so unlike the other tools it does not
 * go through ringfeed.h, which it uses only for rf_version() in --version): host-to-device
 * copy bandwidth from pageable, cudaHostAlloc'ed, cudaHostRegister'ed (4 KiB pages) and
 * huge-page registered buffers; the cost of obtaining pinned memory each way; and a per-batch
 * cudaMalloc+cudaFree against a stream-ordered pool.
 * Built only with the CUDA backend. With --json the last line of stdout is one JSON object. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "ringfeed.h"

#ifndef MAP_HUGE_2MB
#define MAP_HUGE_2MB (21 << 26)
#endif
#define HUGE_2M (2ull << 20)

#define CK(x)                                                                                   \
    do {                                                                                        \
        cudaError_t e_ = (x);                                                                   \
        if (e_ != cudaSuccess) {                                                                \
            fprintf(stderr, "ringfeed-membench: %s: %s\n", #x, cudaGetErrorString(e_));         \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static void touch(uint8_t *p, size_t n)
{
    for (size_t o = 0; o < n; o += 4096)
        p[o] = (uint8_t)o;
}

/* H2D GB/s of `iters` copies of n bytes from src, timed with events on one stream. */
static double h2d_gbs(const void *src, void *dst, size_t n, int iters, cudaStream_t s)
{
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    CK(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, s)); /* warm-up */
    CK(cudaEventRecord(a, s));
    for (int i = 0; i < iters; i++)
        CK(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, s));
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return (double)n * iters / (ms * 1e-3) / 1e9;
}

/* 2 MiB pages: hugetlb, else THP via madvise; *kind 1 or 2 (0: normal pages). */
static uint8_t *map_huge(size_t n, int *kind)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_HUGE_2MB, -1, 0);
    if (p != MAP_FAILED) {
        *kind = 1;
        return p;
    }
    uint8_t *raw = mmap(NULL, n + HUGE_2M, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                        -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
    uint8_t *a = (uint8_t *)(((uintptr_t)raw + HUGE_2M - 1) & ~(uintptr_t)(HUGE_2M - 1));
    *kind = madvise(a, n, MADV_HUGEPAGE) == 0 ? 2 : 0;
    return a; /* the unaligned head and tail stay mapped: a tool, freed at exit */
}

int main(int argc, char **argv)
{
    size_t bytes = 256ull * 224 * 224 * 3; /* one uint8 ImageNet batch: 38.5 MB */
    int iters = 20, dev = 0, json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--bytes") && i + 1 < argc)
            bytes = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
            iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--device") && i + 1 < argc)
            dev = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "--version"))
            return printf("ringfeed-membench %s\n", rf_version()), 0;
        else {
            int help = !strcmp(argv[i], "-h") || !strcmp(argv[i], "--help");
            fprintf(help ? stdout : stderr, "usage: ringfeed-membench [--bytes N] [--iters N] "
                    "[--device N] [--json] [--version] [-h|--help]\n");
            return help ? 0 : 2;
        }
    }
    if (iters < 1 || bytes < 4096)
        return fprintf(stderr, "ringfeed-membench: --iters >= 1, --bytes >= 4096\n"), 2;
    size_t hbytes = (bytes + HUGE_2M - 1) / HUGE_2M * HUGE_2M;
    CK(cudaSetDevice(dev));
    CK(cudaFree(0)); /* context creation is not part of any figure */
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    void *d;
    CK(cudaMalloc(&d, bytes));

    /* pageable */
    uint8_t *pageable = malloc(bytes);
    touch(pageable, bytes);
    double gbs_pageable = h2d_gbs(pageable, d, bytes, iters, s);

    /* cudaHostAlloc: allocation and pinning in one call */
    void *pinned;
    double t0 = now_ms();
    CK(cudaHostAlloc(&pinned, bytes, cudaHostAllocPortable));
    double ms_hostalloc = now_ms() - t0;
    double gbs_pinned = h2d_gbs(pinned, d, bytes, iters, s);

    /* cudaHostRegister of 4 KiB pages (already faulted in: registration alone is timed) */
    uint8_t *small = mmap(NULL, hbytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    madvise(small, hbytes, MADV_NOHUGEPAGE);
    touch(small, hbytes);
    t0 = now_ms();
    CK(cudaHostRegister(small, hbytes, cudaHostRegisterPortable));
    double ms_reg_4k = now_ms() - t0;
    double gbs_reg_4k = h2d_gbs(small, d, bytes, iters, s);

    /* cudaHostRegister of 2 MiB pages */
    int kind = 0;
    uint8_t *huge = map_huge(hbytes, &kind);
    double ms_reg_2m = -1, gbs_reg_2m = 0;
    if (huge) {
        touch(huge, hbytes);
        t0 = now_ms();
        CK(cudaHostRegister(huge, hbytes, cudaHostRegisterPortable));
        ms_reg_2m = now_ms() - t0;
        gbs_reg_2m = h2d_gbs(huge, d, bytes, iters, s);
    }

    /* per batch: cudaMalloc + cudaFree, against a pool that keeps its memory */
    CK(cudaDeviceSynchronize());
    t0 = now_ms();
    for (int i = 0; i < iters; i++) {
        void *p;
        CK(cudaMalloc(&p, bytes));
        CK(cudaFree(p));
    }
    double us_malloc = (now_ms() - t0) * 1e3 / iters;
    cudaMemPool_t pool;
    struct cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = dev;
    CK(cudaMemPoolCreate(&pool, &props));
    uint64_t keep = UINT64_MAX;
    CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    void *p;
    CK(cudaMallocFromPoolAsync(&p, bytes, pool, s)); /* the pool's one growth */
    CK(cudaFreeAsync(p, s));
    CK(cudaStreamSynchronize(s));
    t0 = now_ms();
    for (int i = 0; i < iters; i++) {
        CK(cudaMallocFromPoolAsync(&p, bytes, pool, s));
        CK(cudaFreeAsync(p, s));
    }
    double us_pool = (now_ms() - t0) * 1e3 / iters;
    CK(cudaStreamSynchronize(s));

    printf("ringfeed-membench  device %d  %zu bytes x %d\n", dev, bytes, iters);
    printf("  %-40s %10.2f GB/s\n", "H2D from pageable (malloc)", gbs_pageable);
    printf("  %-40s %10.2f GB/s\n", "H2D from cudaHostAlloc", gbs_pinned);
    printf("  %-40s %10.2f GB/s\n", "H2D from cudaHostRegister, 4 KiB pages", gbs_reg_4k);
    printf("  %-40s %10.2f GB/s  (%s)\n", "H2D from cudaHostRegister, 2 MiB pages", gbs_reg_2m,
           kind == 1 ? "hugetlb" : kind == 2 ? "THP" : "no huge pages");
    printf("  %-40s %10.2f ms\n", "cudaHostAlloc", ms_hostalloc);
    printf("  %-40s %10.2f ms\n", "cudaHostRegister, 4 KiB pages", ms_reg_4k);
    printf("  %-40s %10.2f ms\n", "cudaHostRegister, 2 MiB pages", ms_reg_2m);
    printf("  %-40s %10.1f us\n", "cudaMalloc + cudaFree per batch", us_malloc);
    printf("  %-40s %10.1f us\n", "pool alloc + free per batch", us_pool);
    if (json)
        printf("{\"bytes\": %zu, \"iters\": %d, \"h2d_pageable_gbs\": %.3f, "
               "\"h2d_pinned_gbs\": %.3f, \"h2d_registered_4k_gbs\": %.3f, "
               "\"h2d_registered_2m_gbs\": %.3f, \"huge_kind\": %d, \"host_alloc_ms\": %.3f, "
               "\"register_4k_ms\": %.3f, \"register_2m_ms\": %.3f, \"malloc_free_us\": %.2f, "
               "\"pool_alloc_free_us\": %.2f}\n",
               bytes, iters, gbs_pageable, gbs_pinned, gbs_reg_4k, gbs_reg_2m, kind,
               ms_hostalloc, ms_reg_4k, ms_reg_2m, us_malloc, us_pool);
    cudaHostUnregister(small);
    if (huge)
        cudaHostUnregister(huge);
    cudaFreeHost(pinned);
    cudaMemPoolDestroy(pool);
    cudaFree(d);
    return 0;
}
