/* tokens.h — token files as a shard format (loaders/tokens.c, rf_format_tokens in dataset.h).
 *
 * A token file is a flat array of tok_bytes-wide tokens. Its samples are windows of
 * tok_seq_len + 1 tokens that are never stored: open records, per file, the id of its first
 * window (rf_dataset.tok_first; a corpus has millions of windows), and the dispatcher asks
 * rf_tokens_window where window `id` starts when it reads it. rf_dataset.samples stays empty;
 * nsamples is the number of windows. */
#ifndef RF_TOKENS_H
#define RF_TOKENS_H

#include <stdint.h>

#include "loaders/dataset.h"

/* Window `id` of a token dataset: its file and byte offset. Window w of a file starts at
 * w * seq_len tokens when `sequential` (RF_WINDOWS_SEQUENTIAL); otherwise (RF_WINDOWS_RANDOM)
 * at a start drawn uniformly over the file's valid starts from `seed` (the sample's seed for
 * the epoch), so windows never cross a file boundary. */
void rf_tokens_window(const rf_dataset *ds, uint64_t id, int sequential, uint64_t seed,
                      uint32_t *file, uint64_t *off);

#endif
