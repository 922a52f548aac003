/* consumer.h — the consumer's side of the loader (consumer.c), for the other public calls. */
#ifndef RF_PL_CONSUMER_H
#define RF_PL_CONSUMER_H

#include <stdint.h>

#include "ringfeed.h"

/* Where a state written now resumes: the consumer's epoch and its order positions consumed
 * over all ranks, or the next epoch's start once this rank was handed all of its batches. */
void pl_resume_point(const rf_loader *ld, uint64_t *epoch, uint64_t *consumed);

#endif
