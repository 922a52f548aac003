/* pagecache.h — the loader's view of the page cache: residency of each read at submission,
 * warming ahead of the reads with byte counters, and O_DIRECT descriptors with the alignment
 * their reads need. One object per loader; every call is thread-safe. */
#ifndef RF_PAGECACHE_H
#define RF_PAGECACHE_H

#include <stddef.h>
#include <stdint.h>

#include "loaders/dataset.h"

typedef struct rf_pagecache rf_pagecache;

/* Set up for ds's files (which must outlive the object). With odirect, every file is also
 * opened with O_DIRECT and one aligned read tried; when the file system refuses (tmpfs, some
 * FUSE), O_DIRECT is off and why says so. Returns 0 or RF_ENOMEM. */
int rf_pc_create(const rf_dataset *ds, int odirect, rf_pagecache **out, char *why,
                 size_t why_len);
void rf_pc_destroy(rf_pagecache *pc);

/* Count the bytes of [off, off+len) of `file` resident right now (checked and hit counters).
 * With cachestat a page still being read by readahead or a warm hint counts as resident: this
 * measures how far ahead those run, not what the reads cost (io_acct.c does). fd: any
 * descriptor of the file, or -1; without cachestat the file is mapped on first use and one that
 * cannot be mapped is not counted. */
void rf_pc_check(rf_pagecache *pc, uint32_t file, int fd, uint64_t off, uint64_t len);

/* posix_fadvise(WILLNEED) [off, off+len) of `file` and count the bytes as warmed. */
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
