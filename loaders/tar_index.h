/* tar_index.h — the shard index (DALI text format v1.2): reading it and checking it against its
 * shard (the loader and inspection), and writing it (loaders/tar_index.c): the one place that
 * knows the format.
 *
 * Format, one line per WebDataset sample after a first line "v1.2 <samples>": for each regular
 * member of the sample, "<ext> <offset> <data size> <member name>", space-separated. Samples are
 * runs of consecutive members sharing a key, exactly as the loader groups them when it scans.
 * ringfeed writes as <offset> the first header block that belongs to the member, extension
 * records (pax 'x', GNU 'L') included — the offset Python's tarfile calls TarInfo.offset.
 * DALI's own writer, wds2idx, and DALI's reader use the offset of the member's data instead
 * (TarInfo.offset_data): the reader takes either, the same for every member of one index. */
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
    uint64_t nonregular;       /* members the index rightly leaves out (all of them, as a scan
                                  counts them: every gap is read) */
    uint64_t headers_read;     /* member headers read to check the index */
    uint64_t at;               /* on error: the shard offset it is about, 0 when none */
} rf_tar_index_stats;

/* Called for each member in index order; returns 0 or an error (which ends the read). */
typedef int (*rf_tar_index_fn)(void *ctx, const rf_tar_index_member *m, rf_err *err);

/* Read the index at idx_path and check it against `shard`, open at fd with `size` bytes: the
 * members, in order, must tile the archive (a gap may hold only non-regular members, which is
 * read to see), the last one must be followed by the end-of-archive marker (or the end of the
 * file, as a scan accepts) and nothing but zeros may follow that; the headers of the members around gaps, of the last one and of a few
 * samples spread over the shard are read and compared (name, size, regular file). With full,
 * every member's header is (inspection: no more reads than a scan). name_max: the limit on long
 * names (0: RF_TAR_NAME_MAX). fn (may be NULL) receives every member; st (may be NULL) the
 * counts. Errors: RF_EINDEX naming the index file and line, the shard, the member and the byte
 * offset, and how to fix it; RF_EFORMAT (the scanner's, naming the shard) for data after the
 * shard's end-of-archive marker, since that is the shard's fault whatever its index says;
 * RF_ENOMEM; -errno. */
int rf_tar_index_read(const char *idx_path, const char *shard, int fd, uint64_t size,
                      uint32_t name_max, int full, rf_tar_index_fn fn, void *ctx,
                      rf_tar_index_stats *st, rf_err *err);

/* rf_tar_index_read for an index already in memory (a remote shard's, fetched whole):
 * text[0..len) NUL-terminated, owned (freed here); idx_name names it in messages; the shard's
 * headers are read through rd. The same checks, `full` and errors as rf_tar_index_read. */
struct rf_byte_reader;
int rf_tar_index_read_text(const char *idx_name, char *text, uint64_t len, const char *shard,
                           const struct rf_byte_reader *rd, uint64_t size, uint32_t name_max,
                           int full, rf_tar_index_fn fn, void *ctx, rf_tar_index_stats *st,
                           rf_err *err);

/* The text of an index, built one member at a time by both of its writers: rf_tar_write_index
 * (from a scan) and the shard writer (src/authoring/tarwrite.c, as it writes), so the format is
 * written in one place. Zero-initialise it; rf_tar_index_text_free releases it. */
typedef struct rf_tar_index_text {
    char *p;             /* the text; after rf_tar_index_finish, the whole index file */
    size_t len;
    uint64_t cap;        /* bytes allocated at p (rf_grow) */
    uint64_t samples;    /* lines begun */
    int line_open;       /* a sample line has members and no newline yet */
} rf_tar_index_text;

/* Append member `name` (its first header block at hdr, `size` data bytes) to the open sample's
 * line, or, with new_sample (or before any line), begin the next line with it. The name is
 * written as given: callers refuse names with whitespace first. 0, or -ENOMEM (t keeps what it
 * had). */
int rf_tar_index_add(rf_tar_index_text *t, const char *name, uint64_t hdr, uint64_t size,
                     int new_sample);
/* End the last line and put the "v1.2 <samples>" line in front: t->p[0..len) is then the index
 * file. 0 or -ENOMEM. */
int rf_tar_index_finish(rf_tar_index_text *t);
void rf_tar_index_text_free(rf_tar_index_text *t);

/* Scan `shard` and write its index to idx_path (through a temporary file renamed into place,
 * so a reader never sees half an index). Errors: RF_EFORMAT (shard malformed), RF_EINVAL (a
 * member name with whitespace or without an extension cannot be written in this format; a
 * URL, beside which nothing can be written), -errno from open/write/rename. */
int rf_tar_write_index(const char *shard, const char *idx_path, rf_err *err);

/* The index the loader uses for `shard`, if any: "X.idx" for "X.tar", else "X.tar.idx".
 * Returns 1 and the path in buf, 0 when neither exists (or buf is too small). Any file type
 * counts: a FIFO or directory by that name is found here and refused when read. */
int rf_tar_find_index(const char *shard, char *buf, size_t cap);

/* The name an index of `shard` is written under: "X.idx" for "X.tar", else "SHARD.idx". 0, or
 * -1 when it does not fit in cap bytes. */
int rf_tar_index_name(const char *shard, char *buf, size_t cap);

/* Open a shard for reading (a regular file only; see rf_open_regular): 0 with *fd and *size,
 * else the code with err->msg naming the path. */
int rf_tar_open_shard(const char *path, int *fd, uint64_t *size, rf_err *err);

#endif
