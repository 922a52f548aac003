/* tarwrite.h — writing WebDataset tar shards and their indexes: the library's one tar writer,
 * behind the public rf_shard_writer (include/ringfeed_shards.h, shard_writer.c) and the tests.
 *
 * Shards are POSIX ustar; longer names use a pax header (or a GNU long-name record with
 * RF_TARW_GNU), so GNU tar, Python's tarfile and webdataset read them. The index `X.idx` beside
 * `X.tar` is loaders/tar_index.h's format.
 *
 * authoring/ includes base/, decode/ and loaders/ (a client of the formats and the decoder's
 * checks); no other stage includes its headers (the tests do). */
#ifndef RF_TARWRITE_H
#define RF_TARWRITE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/common.h"

enum rf_tarw_format { RF_TARW_USTAR_PAX = 0, RF_TARW_GNU = 1 };

typedef struct rf_tarw rf_tarw;

/* Start the shard `path` (and with index_path != NULL its index): both are written to hidden
 * temporaries beside their final names (".NAME.tmp-PID-N", created now) and appear under those
 * names only at a successful rf_tarw_close. Returns NULL on failure, with e (may be NULL)
 * naming the path and the errno. */
rf_tarw *rf_tarw_open(const char *path, const char *index_path, int format, rf_err *e);
/* Start a sample; members added until the next call belong to it (index line grouping). */
int rf_tarw_begin_sample(rf_tarw *w);
/* Append one regular-file member. Returns 0 or -errno (-EINVAL for a name with whitespace or
 * control characters, -ENAMETOOLONG beyond 4096 bytes). */
int rf_tarw_add(rf_tarw *w, const char *name, const void *data, size_t len);
/* Bytes written so far (to decide when a shard is full). */
uint64_t rf_tarw_bytes(const rf_tarw *w);
/* Samples with at least one member so far. */
uint64_t rf_tarw_samples(const rf_tarw *w);
/* Write the two end blocks, flush, fsync; write and fsync the index; rename the index and then
 * the shard into place (replacing files of those names) and fsync their folders. Returns 0 or
 * -errno with e (may be NULL) naming the file, the step and, for a write, the byte offset; on
 * failure both temporaries, and the index if it was already renamed, are removed, so no file
 * named like the shard or its index is left. Frees w; NULL is a no-op. */
int rf_tarw_close(rf_tarw *w, rf_err *e);
/* Give the shard up: remove the temporaries, create nothing, free w. NULL is a no-op. */
void rf_tarw_abort(rf_tarw *w);

#endif
