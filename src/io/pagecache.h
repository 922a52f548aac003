/* pagecache.h — the loader's view of the page cache: residency of each read at submission
 * (mincore over a read-only mapping of the shard), warming ahead of the reads
 * (posix_fadvise WILLNEED) with byte counters, and O_DIRECT file descriptors with the
 * alignment their reads need. One object per loader; every call is thread-safe. */
#ifndef RF_PAGECACHE_H
#define RF_PAGECACHE_H

#include <stddef.h>
#include <stdint.h>

#include "loaders/dataset.h"

typedef struct rf_pagecache rf_pagecache;

/* Set up for ds's files (which must outlive the object). With odirect != 0 every file is also
 * opened with O_DIRECT and one aligned read of the first file is tried; when the file system
 * refuses (tmpfs and some FUSE: EINVAL), O_DIRECT is off and why says so (rf_pc_odirect()
 * tells which). Returns 0 or RF_ENOMEM. */
int rf_pc_create(const rf_dataset *ds, int odirect, rf_pagecache **out, char *why,
                 size_t why_len);
void rf_pc_destroy(rf_pagecache *pc);

/* Count the bytes of [off, off+len) of `file` that are resident right now (checked and hit
 * counters). With cachestat a page that readahead or a warm hint is still reading from
 * storage counts as resident: this measures how far ahead of the reads those run, not what
 * the reads cost (io_acct.c measures that). fd: any descriptor of the file (the read's own; -1 when none), used by
 * cachestat(2); without cachestat the file is mapped on first use (no page is touched) and a
 * file that cannot be mapped is not counted. */
void rf_pc_check(rf_pagecache *pc, uint32_t file, int fd, uint64_t off, uint64_t len);

/* Ask the kernel to read [off, off+len) of `file` into the cache (posix_fadvise WILLNEED,
 * which starts the reads and returns) and count the bytes as warmed. */
void rf_pc_warm(rf_pagecache *pc, uint32_t file, uint64_t off, uint64_t len);

/* 1 when reads must use rf_pc_direct_fd and rf_pc_direct_span. */
int rf_pc_odirect(const rf_pagecache *pc);
int rf_pc_direct_fd(const rf_pagecache *pc, uint32_t file);
/* Alignment of O_DIRECT offsets, lengths and buffers (a power of two, at least 4096). */
uint32_t rf_pc_align(const rf_pagecache *pc);
/* The aligned read covering [off, off+len): it starts at *aoff, is *alen bytes long (a
 * multiple of the alignment; it may extend past the end of the file, where the read ends
 * short) and byte `off` is at *skip inside it. */
void rf_pc_direct_span(const rf_pagecache *pc, uint64_t off, uint32_t len, uint64_t *aoff,
                       uint32_t *alen, uint32_t *skip);

typedef struct rf_pc_stats {
    uint64_t checked_bytes, hit_bytes, warmed_bytes;
    uint64_t checks, check_ns; /* residency checks made and time spent in them */
} rf_pc_stats;
void rf_pc_stats_get(const rf_pagecache *pc, rf_pc_stats *st);

#endif
