/* tar_index.h — writing the shard index (DALI text format v1.2) that loaders/tar.c reads.
 *
 * Format, one line per WebDataset sample after a first line "v1.2 <samples>": for each regular
 * member of the sample, "<ext> <header offset> <data size> <member name>", space-separated.
 * <header offset> is the first header block that belongs to the member, extension records (pax
 * 'x', GNU 'L') included — the offset Python's tarfile calls TarInfo.offset. Samples are runs of
 * consecutive members sharing a key, exactly as the loader groups them when it scans. */
#ifndef RF_TAR_INDEX_H
#define RF_TAR_INDEX_H

#include "common.h"

/* Scan `shard` and write its index to idx_path (through a temporary file renamed into place,
 * so a reader never sees half an index). Errors: RF_EFORMAT (shard malformed), RF_EINVAL (a
 * member name with whitespace or without an extension cannot be written in this format),
 * -errno from open/write/rename. */
int rf_tar_write_index(const char *shard, const char *idx_path, rf_err *err);

/* The index the loader uses for `shard`, if any: "X.idx" for "X.tar", else "X.tar.idx".
 * Returns 1 and the path in buf, 0 when neither exists (or buf is too small). Any file type
 * counts: a FIFO or directory by that name is found here and refused when read. */
int rf_tar_find_index(const char *shard, char *buf, size_t cap);

#endif
