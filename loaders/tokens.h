/* tokens.h — token files as a shard format (tokens.c). A token file is a flat array of tokens;
 * its samples are windows of tok_seq_len + 1 tokens, never stored: open records each file's
 * first window id (rf_dataset.tok_first) and the dispatcher asks rf_tokens_window where a
 * window starts. rf_dataset.samples stays empty; nsamples counts the windows. */
#ifndef RF_TOKENS_H
#define RF_TOKENS_H

#include <stdint.h>

#include "loaders/dataset.h"

/* Window `id`: its file and byte offset. Sequential windows start at w * seq_len tokens; random
 * ones at a start drawn from `seed` over the file's valid starts, never crossing its end. */
void rf_tokens_window(const rf_dataset *ds, uint64_t id, int sequential, uint64_t seed,
                      uint32_t *file, uint64_t *off);

#endif
