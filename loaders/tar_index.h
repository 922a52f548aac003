/* tar_index.h — the shard index (DALI text format v1.2): reading it and checking it against its
 * shard, and writing it; the one place that knows the format.
 *
 * After a first line "v1.2 <samples>", one line per WebDataset sample (a run of consecutive
 * members sharing a key), for each regular member "<ext> <offset> <data size> <name>". ringfeed
 * writes as <offset> the member's first header block, extension records included (tarfile's
 * TarInfo.offset); DALI's wds2idx writes the data's offset (offset_data). The reader takes
 * either, the same for every member of one index. */
#ifndef RF_TAR_INDEX_H
#define RF_TAR_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "base/common.h"

#define RF_TAR_INDEX_BYTES_MAX (1ull << 30) /* an index file larger than this is refused */

/* One member of an index, where the shard has it. */
typedef struct rf_tar_index_member {
    const char *name;
    uint64_t hdr;   /* its first header block, extension records included */
    uint64_t data;  /* its data */
    uint64_t size;  /* data bytes */
    uint32_t line;  /* of the index */
} rf_tar_index_member;

typedef struct rf_tar_index_stats {
    uint64_t members, samples; /* in the index */
    uint64_t nonregular;       /* members the index rightly leaves out (every gap is read) */
    uint64_t headers_read;     /* member headers read to check the index */
    uint64_t at;               /* on error: the shard offset it is about, 0 when none */
} rf_tar_index_stats;

/* Called for each member in index order; returns 0 or an error (which ends the read). */
typedef int (*rf_tar_index_fn)(void *ctx, const rf_tar_index_member *m, rf_err *err);

/* Read the index at idx_path and check it against `shard` (fd, `size` bytes): the members, in
 * order, must tile the archive (a gap may hold only non-regular members, read to see), the last
 * followed by the end-of-archive marker (or the file's end) and nothing but zeros. The headers
 * around gaps, of the last member and of a few samples spread over the shard are compared
 * (name, size, regular file); with full, every member's (inspection). fn and st may be NULL.
 * Errors: RF_EINDEX naming index file and line, shard, member, offset and how to fix it;
 * RF_EFORMAT (the scanner's) for data after the end-of-archive marker, the shard's fault
 * whatever its index says; RF_ENOMEM; -errno. */
int rf_tar_index_read(const char *idx_path, const char *shard, int fd, uint64_t size,
                      uint32_t name_max, int full, rf_tar_index_fn fn, void *ctx,
                      rf_tar_index_stats *st, rf_err *err);

/* rf_tar_index_read for an index already in memory (a remote shard's): text[0..len)
 * NUL-terminated, owned (freed here); the shard's headers are read through rd. */
struct rf_byte_reader;
int rf_tar_index_read_text(const char *idx_name, char *text, uint64_t len, const char *shard,
                           const struct rf_byte_reader *rd, uint64_t size, uint32_t name_max,
                           int full, rf_tar_index_fn fn, void *ctx, rf_tar_index_stats *st,
                           rf_err *err);

/* The text of an index, built one member at a time by both writers (rf_tar_write_index and
 * authoring/tarwrite.c), so the format is written in one place. Zero-initialise it. */
typedef struct rf_tar_index_text {
    char *p;             /* the text; after rf_tar_index_finish, the whole index file */
    size_t len;
    uint64_t cap;        /* bytes allocated at p (rf_grow) */
    uint64_t samples;    /* lines begun */
    int line_open;       /* a sample line has members and no newline yet */
} rf_tar_index_text;

/* Append member `name` (first header block hdr, `size` data bytes) to the open sample's line,
 * or begin the next line with new_sample (or before any line). Callers refuse names with
 * whitespace. 0, or -ENOMEM (t keeps what it had). */
int rf_tar_index_add(rf_tar_index_text *t, const char *name, uint64_t hdr, uint64_t size,
                     int new_sample);
/* End the last line and put the "v1.2 <samples>" line in front: t->p[0..len) is then the index
 * file. 0 or -ENOMEM. */
int rf_tar_index_finish(rf_tar_index_text *t);
void rf_tar_index_text_free(rf_tar_index_text *t);

/* Scan `shard` and write its index to idx_path (through a temporary renamed into place).
 * Errors: RF_EFORMAT (shard malformed), RF_EINVAL (a member name this format cannot hold, or
 * a URL), -errno. */
int rf_tar_write_index(const char *shard, const char *idx_path, rf_err *err);

/* The index the loader uses for `shard`: "X.idx" for "X.tar", else "X.tar.idx". 1 with the
 * path in buf, 0 when neither exists (any file type counts: a FIFO is refused when read). */
int rf_tar_find_index(const char *shard, char *buf, size_t cap);

/* The name an index of `shard` is written under: "X.idx" for "X.tar", else "SHARD.idx". 0, or
 * -1 when it does not fit in cap bytes. */
int rf_tar_index_name(const char *shard, char *buf, size_t cap);

/* Open a shard for reading (a regular file only: rf_open_regular), err naming the path. */
int rf_tar_open_shard(const char *path, int *fd, uint64_t *size, rf_err *err);

#endif
