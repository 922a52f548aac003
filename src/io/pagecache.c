/* pagecache.c — the loader's view of the page cache (pagecache.h).
 *
 * DESIGN
 *  - Residency: cachestat(2) (6.5+) counts a range's cached pages with no mapping, cheaply
 *    enough to be always on (docs/tuning.md). Without it, each shard gets one read-only shared
 *    mapping, made lazily by the first I/O thread that checks a span (a CAS publishes it; the
 *    loser unmaps its own), and mincore() reads its pages' state; mapping touches no page.
 *  - Warming is a posix_fadvise(WILLNEED) per span: the kernel queues the reads and returns.
 *    What to warm and how far ahead is the loader's business; this file issues and counts.
 *  - O_DIRECT: a second descriptor per file, opened at create. One aligned probe read tells
 *    whether it works (open() alone succeeds on some file systems that fail every read).
 */
#include "io/pagecache.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PC_PAGE 4096u
#define PC_VEC 256u /* pages per mincore call */
#define PC_MAP_FAILED ((void *)1)

struct rf_pagecache {
    const rf_dataset *ds;
    _Atomic(void *) *maps; /* per file: NULL not yet, PC_MAP_FAILED, or the mapping */
    int *dfd;              /* per file O_DIRECT descriptor, or -1 */
    int odirect;
    uint32_t align;
    atomic_int no_cachestat; /* the kernel lacks cachestat(2) (before 6.5) or a filter blocks it */
    _Atomic uint64_t checked, hit, warmed, checks, check_ns;
};

/* Relaxed: the counters are read only for stats and publish no other data. */
static void add(_Atomic uint64_t *c, uint64_t v) { atomic_fetch_add_explicit(c, v, memory_order_relaxed); }

static uint32_t dio_align(int fd)
{
    uint32_t a = PC_PAGE;
#if defined(STATX_DIOALIGN)
    struct statx sx;
    if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 && (sx.stx_mask & STATX_DIOALIGN)) {
        uint32_t m = sx.stx_dio_mem_align > sx.stx_dio_offset_align ? sx.stx_dio_mem_align
                                                                    : sx.stx_dio_offset_align;
        while (a < m && a < (1u << 20))
            a <<= 1;
    }
#else
    (void)fd;
#endif
    return a;
}

/* Open every file with O_DIRECT and try one aligned read; on refusal close them all. */
static void open_direct(rf_pagecache *pc, char *why, size_t why_len)
{
    const rf_dataset *ds = pc->ds;
    for (uint32_t i = 0; i < ds->nfiles; i++)
        if (ds->files[i].fd < 0) { /* opened per read (large folders): no descriptor to spare */
            snprintf(why, why_len, "O_DIRECT: not for files opened per read: buffered reads");
            return;
        }
    for (uint32_t i = 0; i < ds->nfiles; i++) {
        pc->dfd[i] = open(ds->files[i].path, O_RDONLY | O_DIRECT | O_CLOEXEC);
        if (pc->dfd[i] < 0) {
            snprintf(why, why_len, "O_DIRECT refused for %s (%s): buffered reads",
                     ds->files[i].path, strerror(errno));
            goto off;
        }
    }
    pc->align = ds->nfiles ? dio_align(pc->dfd[0]) : PC_PAGE;
    void *buf = NULL;
    if (posix_memalign(&buf, pc->align, pc->align)) {
        snprintf(why, why_len, "no memory for the O_DIRECT probe: buffered reads");
        goto off;
    }
    ssize_t r = ds->nfiles ? pread(pc->dfd[0], buf, pc->align, 0) : 0;
    int e = errno;
    free(buf);
    if (r < 0) {
        snprintf(why, why_len, "O_DIRECT read refused for %s (%s): buffered reads",
                 ds->files[0].path, strerror(e));
        goto off;
    }
    pc->odirect = 1;
    snprintf(why, why_len, "O_DIRECT, %u-byte alignment", pc->align);
    return;
off:
    for (uint32_t i = 0; i < ds->nfiles; i++) {
        if (pc->dfd[i] >= 0)
            close(pc->dfd[i]);
        pc->dfd[i] = -1;
    }
    pc->align = PC_PAGE;
}

int rf_pc_create(const rf_dataset *ds, int odirect, rf_pagecache **out, char *why,
                 size_t why_len)
{
    rf_pagecache *pc = calloc(1, sizeof *pc);
    *out = NULL;
    if (!pc)
        return RF_ENOMEM;
    size_t n = ds->nfiles ? ds->nfiles : 1;
    pc->ds = ds;
    pc->align = PC_PAGE;
    pc->maps = calloc(n, sizeof *pc->maps);
    pc->dfd = malloc(n * sizeof *pc->dfd);
    if (!pc->maps || !pc->dfd) {
        free(pc->maps);
        free(pc->dfd);
        free(pc);
        return RF_ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        pc->dfd[i] = -1;
    if (odirect)
        open_direct(pc, why, why_len);
    *out = pc;
    return 0;
}

void rf_pc_destroy(rf_pagecache *pc)
{
    if (!pc)
        return;
    for (uint32_t i = 0; i < pc->ds->nfiles; i++) {
        /* Relaxed: destroy runs after every thread that maps has been joined, which orders
         * their stores before this load. */
        void *m = atomic_load_explicit(&pc->maps[i], memory_order_relaxed);
        if (m && m != PC_MAP_FAILED)
            munmap(m, pc->ds->files[i].size);
        if (pc->dfd[i] >= 0)
            close(pc->dfd[i]);
    }
    free(pc->maps);
    free(pc->dfd);
    free(pc);
}

static uint8_t *file_map(rf_pagecache *pc, uint32_t file)
{
    assert(file < pc->ds->nfiles); /* maps has one entry per file */
    /* Acquire pairs with the release of the CAS below: a thread that finds a mapping also
     * finds it complete. */
    void *m = atomic_load_explicit(&pc->maps[file], memory_order_acquire);
    if (m)
        return m == PC_MAP_FAILED ? NULL : m;
    const rf_file *f = &pc->ds->files[file];
    void *mine = f->size ? mmap(NULL, f->size, PROT_READ, MAP_SHARED, f->fd, 0) : MAP_FAILED;
    if (mine == MAP_FAILED)
        mine = PC_MAP_FAILED;
    void *expect = NULL;
    /* acq_rel: publishes mine (release); on failure the winner's mapping is read (acquire). */
    if (!atomic_compare_exchange_strong_explicit(&pc->maps[file], &expect, mine,
                                                 memory_order_acq_rel, memory_order_acquire)) {
        if (mine != PC_MAP_FAILED)
            munmap(mine, f->size);
        mine = expect;
    }
    return mine == PC_MAP_FAILED ? NULL : mine;
}

/* cachestat(2), Linux 6.5: the resident bytes of [off, end), counted in the page cache itself
 * at page granularity, or -1 when the call is unavailable. */
#ifndef SYS_cachestat
#define SYS_cachestat 451 /* same number on every architecture */
#endif
static int64_t cachestat_bytes(rf_pagecache *pc, int fd, uint64_t off, uint64_t end)
{
    /* Relaxed: a hint with no data behind it; a thread that misses the store tries the call
     * once more and gets the same answer. */
    if (atomic_load_explicit(&pc->no_cachestat, memory_order_relaxed))
        return -1;
    struct { uint64_t off, len; } range = {off, end - off};
    struct { uint64_t cache, dirty, writeback, evicted, recently_evicted; } cs;
    if (syscall(SYS_cachestat, fd, &range, &cs, 0) != 0) {
        if (errno == ENOSYS || errno == EPERM)
            atomic_store_explicit(&pc->no_cachestat, 1, memory_order_relaxed); /* see above */
        return -1;
    }
    uint64_t pages = (end + PC_PAGE - 1) / PC_PAGE - off / PC_PAGE;
    return cs.cache >= pages ? (int64_t)(end - off)
                             : (int64_t)RF_MIN(end - off, cs.cache * PC_PAGE);
}

void rf_pc_check(rf_pagecache *pc, uint32_t file, int fd, uint64_t off, uint64_t len)
{
    uint64_t t0 = rf_now_ns();
    assert(file < pc->ds->nfiles); /* callers pass a sample's own file */
    const rf_file *f = &pc->ds->files[file];
    if (len == 0 || off >= f->size)
        return;
    uint64_t end = RF_MIN(off + len, f->size), hit = 0;
    int64_t cs = fd >= 0 ? cachestat_bytes(pc, fd, off, end) : -1;
    if (cs >= 0) {
        add(&pc->checked, end - off);
        add(&pc->hit, (uint64_t)cs);
        add(&pc->checks, 1);
        add(&pc->check_ns, rf_now_ns() - t0);
        return;
    }
    uint8_t *map = file_map(pc, file);
    if (!map)
        return;
    unsigned char vec[PC_VEC];
    for (uint64_t p = off / PC_PAGE * PC_PAGE; p < end;) {
        uint64_t chunk = RF_MIN((uint64_t)PC_VEC * PC_PAGE, end - p);
        if (mincore(map + p, chunk, vec) != 0)
            return; /* cannot tell: not counted at all */
        uint64_t pages = (chunk + PC_PAGE - 1) / PC_PAGE;
        assert(pages <= PC_VEC); /* chunk is at most PC_VEC pages: vec holds them all */
        for (uint64_t i = 0; i < pages; i++) {
            if (!(vec[i] & 1))
                continue;
            uint64_t a = RF_MAX(p + i * PC_PAGE, off), b = RF_MIN(p + (i + 1) * PC_PAGE, end);
            hit += b - a;
        }
        p += pages * PC_PAGE;
    }
    add(&pc->checked, end - off);
    add(&pc->hit, hit);
    add(&pc->checks, 1);
    add(&pc->check_ns, rf_now_ns() - t0);
}

void rf_pc_warm(rf_pagecache *pc, uint32_t file, uint64_t off, uint64_t len)
{
    assert(file < pc->ds->nfiles);
    if (posix_fadvise(pc->ds->files[file].fd, (off_t)off, (off_t)len, POSIX_FADV_WILLNEED) == 0)
        add(&pc->warmed, len);
}

int rf_pc_odirect(const rf_pagecache *pc) { return pc && pc->odirect; }
int rf_pc_direct_fd(const rf_pagecache *pc, uint32_t file)
{
    assert(file < pc->ds->nfiles); /* dfd has one entry per file */
    return pc->dfd[file];
}
uint32_t rf_pc_align(const rf_pagecache *pc) { return pc ? pc->align : PC_PAGE; }

void rf_pc_direct_span(const rf_pagecache *pc, uint64_t off, uint32_t len, uint64_t *aoff,
                       uint32_t *alen, uint32_t *skip)
{
    uint64_t a = pc->align, start = off / a * a, end = (off + len + a - 1) / a * a;
    *aoff = start;
    *alen = (uint32_t)(end - start);
    *skip = (uint32_t)(off - start);
}

void rf_pc_stats_get(const rf_pagecache *pc, rf_pc_stats *st)
{
    memset(st, 0, sizeof *st);
    if (!pc)
        return;
    rf_pagecache *p = (rf_pagecache *)pc;
    /* Relaxed: stats only; each counter is exact on its own, not a snapshot of all. */
    st->checked_bytes = atomic_load_explicit(&p->checked, memory_order_relaxed);
    st->hit_bytes = atomic_load_explicit(&p->hit, memory_order_relaxed);
    st->warmed_bytes = atomic_load_explicit(&p->warmed, memory_order_relaxed);
    st->checks = atomic_load_explicit(&p->checks, memory_order_relaxed);
    st->check_ns = atomic_load_explicit(&p->check_ns, memory_order_relaxed);
}
