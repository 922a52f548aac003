/* sync_index.h — a shard's sync-point index (docs/gpu-decode.md, "Sync-point indexes"): for each
 * baseline JPEG member without restart markers, where in its entropy-coded data every
 * `span`-th MCU of each MCU row starts and the DC predictors there, so that the GPU decode can
 * start a crop's rows mid-scan, as it does at restart markers, without walking the Huffman
 * codes before them.
 *
 * DESIGN
 *  - A sidecar file beside the shard (SHARD.sync) or in the cache folder, never inside it:
 *    the shard's bytes stay the user's. Little-endian, versioned, a 64-byte header whose own
 *    hash and the hash of everything after it are checked at load: a damaged sidecar is
 *    refused whole.
 *  - An entry names its member by offset and size in the shard and by the XXH64 of the
 *    member's bytes; whoever uses it hashes the bytes it read and compares first, so a member
 *    rewritten, a shard rewritten, cut or replaced by another file of the same name can never
 *    lend its points to other bytes (a stale entry: the member is decoded as without one).
 *  - Every JPEG member (by its bytes) gets an entry, its status saying why one has no points
 *    (it needs none or cannot have any), so a second build skips what the first judged and
 *    inspect reports coverage.
 *  - Points are fixed records (RF_SYNC_POINT bytes): the bit position from the member's first
 *    byte in its stuffed bytes (what a reader can seek to without destuffing what precedes
 *    it) and the three DC predictors. A member's span is chosen so that a point comes every
 *    RF_SYNC_SPAN_BYTES of entropy-coded data on average.
 * Includes base/ only. */
#ifndef RF_LOADERS_SYNC_INDEX_H
#define RF_LOADERS_SYNC_INDEX_H

#include <stddef.h>
#include <stdint.h>

#define RF_SYNC_EXT ".sync"
#define RF_SYNC_MAGIC "RFSYNC\r\n" /* 8 bytes, no NUL */
#define RF_SYNC_VERSION 1u
#define RF_SYNC_HEADER 64u
#define RF_SYNC_ENTRY 48u
#define RF_SYNC_POINT 10u
#define RF_SYNC_SPAN_BYTES 1024u
/* Positions are 32-bit bit offsets: members up to 512 MiB have points. */
#define RF_SYNC_MAX_MEMBER ((uint64_t)1 << 29)

/* Why an entry has points or not (its status). */
enum rf_sync_status {
    RF_SYNC_POINTS = 0,      /* indexed */
    RF_SYNC_NEEDS_NONE = 1,  /* progressive, arithmetic-coded, restart markers, not a JPEG:
                              * the GPU decode starts these without an index or not at all */
    RF_SYNC_UNSUPPORTED = 2, /* a plain baseline JPEG the GPU kernels do not take (sampling,
                              * precision, scan order, size) */
    RF_SYNC_UNREADABLE = 3,  /* its header or entropy-coded data does not decode: the CPU
                              * judges it each time, as without an index */
    RF_SYNC_STATUSES = 4,
};

/* One member's entry, as rf_sync_find returns it: the points stay in the index's buffer. */
typedef struct rf_sync_entry {
    uint64_t off, len, hash; /* the member's bytes in the shard, their XXH64 */
    uint32_t status;         /* enum rf_sync_status */
    uint32_t ncomp, span;    /* components in the scan; MCUs from one point to the next */
    uint32_t cols, rows;     /* the image's MCU grid */
    uint32_t npoints;        /* rows * ceil(cols / span) when status is RF_SYNC_POINTS */
    const uint8_t *points;   /* npoints records */
} rf_sync_entry;

/* Point k of an entry: its bit position from the member's first byte and the predictors. */
void rf_sync_point(const rf_sync_entry *e, uint32_t k, uint32_t *bit, int32_t pred[3]);
/* Write one record at dst. */
void rf_sync_put_point(uint8_t *dst, uint32_t bit, const int32_t pred[3]);
/* Points per MCU row. */
static inline uint32_t rf_sync_per_row(const rf_sync_entry *e)
{
    return (e->cols + e->span - 1) / e->span;
}

/* A loaded sidecar: entries sorted by offset, checked for size, hashes and bounds. */
typedef struct rf_sync_index {
    uint8_t *buf; /* the whole file */
    size_t len;
    uint64_t shard_bytes; /* the shard's size when it was written */
    uint64_t entries, points;
    int mapped;   /* buf is a read-only mapping of the file (rf_sync_load_file) */
} rf_sync_index;

/* Take buf[len] (malloc'ed; owned by the index from here on, freed on failure too) as a
 * sidecar. Returns 0, or -1 with why[cap] naming what is wrong and the offset. */
int rf_sync_load(uint8_t *buf, size_t len, rf_sync_index *out, char *why, size_t cap);
/* Map and load the file at path: 0, 1 when there is none (ENOENT), -1 with why. */
int rf_sync_load_file(const char *path, rf_sync_index *out, char *why, size_t cap);
void rf_sync_free(rf_sync_index *ix);
/* Entry i (0 <= i < entries), or the one of the member at shard offset off: 1 found, 0 not. */
void rf_sync_entry_at(const rf_sync_index *ix, uint64_t i, rf_sync_entry *out);
int rf_sync_find(const rf_sync_index *ix, uint64_t off, rf_sync_entry *out);

/* Entries as a build collects them, in any order, members at most once. */
typedef struct rf_sync_builder {
    uint8_t *ent, *pts;
    uint64_t nent, npts;
    uint64_t ent_cap, pts_cap;
} rf_sync_builder;

/* Add e, copying its points; e->points holds e->npoints records (NULL when none). 0 or -1
 * (out of memory). */
int rf_sync_builder_add(rf_sync_builder *b, const rf_sync_entry *e);
/* Every entry of ix, for a build that extends an index (stale entries left out by the
 * caller's choice through keep, NULL: all). */
int rf_sync_builder_merge(rf_sync_builder *b, const rf_sync_index *ix,
                          int (*keep)(void *ctx, const rf_sync_entry *e), void *ctx);
/* The sidecar's bytes (malloc'ed, *len set): entries sorted, a later duplicate of an offset
 * replacing the earlier. 0 or -1. */
int rf_sync_builder_bytes(rf_sync_builder *b, uint64_t shard_bytes, uint8_t **out, size_t *len);
/* Write the sidecar to path atomically (a temporary beside it, renamed). 0, or -errno. */
int rf_sync_builder_write(rf_sync_builder *b, uint64_t shard_bytes, const char *path);
void rf_sync_builder_free(rf_sync_builder *b);

/* The sidecar path beside a shard: 0, or -1 when it does not fit cap. */
int rf_sync_path(const char *shard, char *buf, size_t cap);
const char *rf_sync_status_name(uint32_t status);

#endif
