/* mix.h — weighted mixing's draws, below plan.c (which owns the epoch array, the cursor and
 * the rank split): the sources' shares of an epoch and the sample each position takes. */
#ifndef RF_PLAN_MIX_H
#define RF_PLAN_MIX_H

#include <stdint.h>

#include "base/common.h"

/* Weighted mixing. Sources are consecutive spans of sample ids. Each epoch, positions take
 * their source in exact proportion to the weights (largest remainders), shuffled; the sample
 * within the source comes from a fresh permutation of it, a new one each time it runs out
 * (without replacement), or is drawn by its sample weight (with replacement). */
typedef struct rf_plan_mix_spec {
    uint32_t nsources;
    const uint64_t *source_start; /* nsources + 1 sample ids, the last the dataset's samples */
    const float *weights;         /* nsources; NULL: in proportion to the sources' samples */
    const float *sample_weights;  /* one per sample; NULL: uniform within a source */
    uint64_t epoch_size;          /* order positions per epoch; 0: the dataset's samples */
    uint32_t replacement;         /* draw within a source with replacement */
} rf_plan_mix_spec;

typedef struct rf_mix rf_mix;

/* Check spec's weights against a dataset of `samples` samples (errors name the rf_config
 * setting) and make the draws of epochs of e positions. Returns 0, RF_EINVAL or RF_ENOMEM. */
int rf_mix_create(const rf_plan_mix_spec *spec, uint64_t samples, uint64_t e, rf_mix **out,
                  rf_err *err);
void rf_mix_free(rf_mix *m);
/* Positions per epoch that source s takes. */
uint64_t rf_mix_positions(const rf_mix *m, uint32_t s);
/* What the resume state records of the mixing settings (never 0). */
uint64_t rf_mix_fingerprint(const rf_mix *m);
/* One epoch: perm[0..n) the sample of each position, from r and, for the permutations of a
 * source drawn without replacement, (seed, epoch); shuffle 0 keeps each source in order. */
void rf_mix_epoch(rf_mix *m, uint64_t *perm, uint64_t n, uint64_t seed, uint64_t epoch,
                  int shuffle, rf_rng *r);

#endif
