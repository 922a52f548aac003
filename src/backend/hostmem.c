/* hostmem.c — the batch ring's host memory (hostmem.h).
 *
 * DESIGN
 *  - Huge pages: a ring of 224x224 batches of 256 is tens of thousands of 4 KiB pages, each
 *    walked and locked by cudaHostRegister, and decode threads writing all over the ring miss
 *    the TLB far less with 2 MiB pages.
 *  - MAP_HUGETLB first (needs vm.nr_hugepages; fails at once when short), then a 2 MiB-aligned
 *    mapping with madvise(MADV_HUGEPAGE) (whether THP was granted is read back from smaps),
 *    then normal pages; the result says what was obtained.
 *  - Pages are faulted in here, one byte per 4 KiB: registration pins them anyway, and faulting
 *    here puts them on the NUMA node of the caller's scope.
 */
#include "backend/hostmem.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif
#ifndef MAP_HUGE_2MB
#define MAP_HUGE_2MB (21 << MAP_HUGE_SHIFT)
#endif

#define HUGE_2M (2u << 20)

static void fault_in(uint8_t *p, size_t bytes)
{
    for (size_t o = 0; o < bytes; o += 4096)
        ((volatile uint8_t *)p)[o] = 0;
}

uint64_t rf_thp_bytes(const void *p, size_t bytes)
{
    FILE *f = fopen("/proc/self/smaps", "re");
    if (!f)
        return 0;
    uintptr_t lo = (uintptr_t)p, hi = lo + bytes;
    char line[512];
    int inside = 0;
    uint64_t kb_total = 0;
    while (fgets(line, sizeof line, f)) {
        uintptr_t a, b;
        unsigned long long kb;
        if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " ", &a, &b) == 2) /* a mapping's header */
            inside = a < hi && b > lo;
        else if (inside && sscanf(line, "AnonHugePages: %llu kB", &kb) == 1)
            kb_total += kb;
    }
    fclose(f);
    return kb_total * 1024;
}

/* A 2 MiB-aligned anonymous mapping of `len` (a multiple of 2 MiB). */
static uint8_t *map_aligned(size_t len)
{
    uint8_t *raw = mmap(NULL, len + HUGE_2M, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                        -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
    uintptr_t a = ((uintptr_t)raw + HUGE_2M - 1) & ~(uintptr_t)(HUGE_2M - 1);
    size_t head = a - (uintptr_t)raw, tail = HUGE_2M - head;
    if (head)
        munmap(raw, head);
    if (tail)
        munmap((uint8_t *)a + len, tail);
    return (uint8_t *)a;
}

static int map_huge(size_t len, rf_ringmem *m, char *why, size_t why_len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_HUGE_2MB, -1, 0);
    if (p != MAP_FAILED) {
        m->ptr = p;
        m->huge = RF_HUGE_TLB;
        snprintf(why, why_len, "hugetlb 2 MiB pages");
        return 0;
    }
    int tlb_errno = errno;
    uint8_t *a = map_aligned(len);
    if (!a)
        return RF_ENOMEM;
    m->ptr = a;
    if (madvise(a, len, MADV_HUGEPAGE) != 0) {
        snprintf(why, why_len, "no hugetlb pool (%s) and madvise(MADV_HUGEPAGE) refused (%s): "
                 "normal pages", strerror(tlb_errno), strerror(errno));
        return 0;
    }
    fault_in(a, len);
    m->huge_bytes = rf_thp_bytes(a, len);
    if (m->huge_bytes) {
        m->huge = RF_HUGE_THP;
        snprintf(why, why_len, "transparent huge pages (%llu of %zu bytes; no hugetlb pool: %s)",
                 (unsigned long long)m->huge_bytes, len, strerror(tlb_errno));
    } else {
        snprintf(why, why_len, "no hugetlb pool (%s) and the kernel granted no transparent huge "
                 "pages (see /sys/kernel/mm/transparent_hugepage/enabled): normal pages",
                 strerror(tlb_errno));
    }
    return 0;
}

int rf_ringmem_alloc(const rf_backend_ops *ops, rf_backend *b, size_t bytes, int want_huge,
                     rf_ringmem *m, char *why, size_t why_len)
{
    char tmp[2];
    if (!why || !why_len)
        why = tmp, why_len = sizeof tmp;
    memset(m, 0, sizeof *m);
    m->bytes = bytes;
    uint64_t t0 = rf_now_ns();
    if (!want_huge) {
        m->ptr = ops->host_alloc(b, bytes, &m->pinned);
        m->pin_ns = rf_now_ns() - t0;
        why[0] = 0;
        return m->ptr ? 0 : RF_ENOMEM;
    }
    size_t len = (bytes + HUGE_2M - 1) / HUGE_2M * HUGE_2M;
    int rc = map_huge(len, m, why, why_len);
    if (rc)
        return rc;
    m->mapped = len;
    if (m->huge != RF_HUGE_THP)
        fault_in(m->ptr, len);
    if (ops->host_register) {
        if (ops->host_register(b, m->ptr, len) == 0) {
            m->pinned = m->registered = 1;
        } else {
            size_t n = strlen(why);
            snprintf(why + n, why_len - n, "; registering it for DMA failed: pageable");
        }
    }
    m->pin_ns = rf_now_ns() - t0;
    return 0;
}

void rf_ringmem_free(const rf_backend_ops *ops, rf_backend *b, rf_ringmem *m)
{
    if (!m->ptr)
        return;
    if (m->mapped) {
        if (m->registered)
            ops->host_unregister(b, m->ptr);
        munmap(m->ptr, m->mapped);
    } else {
        ops->host_free(b, m->ptr, m->bytes);
    }
    memset(m, 0, sizeof *m);
}
