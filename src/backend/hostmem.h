/* hostmem.h — the batch ring's host memory: the backend's own pinned allocation
 * (cudaHostAlloc, or plain pages on the host backend), or 2 MiB pages (hugetlb, else
 * transparent huge pages) that the backend then page-locks in place (cudaHostRegister).
 * Says what it got and how long pinning took. */
#ifndef RF_HOSTMEM_H
#define RF_HOSTMEM_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

#define RF_HUGE_NONE 0 /* normal pages (values of rf_stats.hugepages) */
#define RF_HUGE_TLB 1  /* hugetlbfs 2 MiB pages (MAP_HUGETLB) */
#define RF_HUGE_THP 2  /* transparent huge pages (madvise MADV_HUGEPAGE) */

typedef struct rf_ringmem {
    uint8_t *ptr;
    size_t bytes;        /* usable bytes (as asked) */
    size_t mapped;       /* bytes mapped by us (0 when the backend allocated) */
    int pinned;          /* page-locked for DMA */
    int huge;            /* RF_HUGE_* */
    int registered;      /* pinned by host_register (undo at free) */
    uint64_t pin_ns;     /* time to obtain the pinned ring: allocate, fault, register */
    uint64_t huge_bytes; /* THP: bytes the kernel backs with huge pages */
} rf_ringmem;

/* Allocate `bytes` for the ring: want_huge tries hugetlb, THP, then normal pages, faulted in
 * here and registered with the backend; else the backend's host_alloc. why (optional) gets one
 * sentence about what happened. Returns 0 or RF_ENOMEM. */
int rf_ringmem_alloc(const rf_backend_ops *ops, rf_backend *b, size_t bytes, int want_huge,
                     rf_ringmem *m, char *why, size_t why_len);
void rf_ringmem_free(const rf_backend_ops *ops, rf_backend *b, rf_ringmem *m);

/* Bytes of [p, p+bytes) backed by transparent huge pages (smaps' AnonHugePages); 0: unknown. */
uint64_t rf_thp_bytes(const void *p, size_t bytes);

#endif
