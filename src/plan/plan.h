/* plan.h — the epoch order, this rank's share of it, and the resume cursor.
 *
 * Everything here is a pure function of (seed, epoch, dataset size, rank, world, base): the
 * same inputs give the same batches whatever the thread counts or timing. `base` is the number
 * of epoch-order positions consumed before this loader started the epoch (0, or a resume
 * cursor). Rank r's j-th sample of the epoch sits at order position base + r + j*world, so
 * after every rank consumed k batches the consumed positions are exactly [base, base+k*B*world):
 * a resume cursor is one integer and survives a change of world size.
 *
 * Weighted mixing (mix.c) keeps that model: the epoch becomes `n` order positions (the
 * epoch size) whose samples are drawn from the sources by weight, still a pure function of
 * (seed, epoch, sources, weights), so the cursor, the rank split and padding work unchanged.
 *
 * Size buckets (buckets.h) rearrange each epoch's order into groups of batch_size x world_size
 * samples of one bucket, rank r taking entries r, r + world, ... of each group as its batch;
 * the cursor then counts arranged entries and stops only at a group's start.
 *
 * What plan/ may include: base/ only. */
#ifndef RF_PLAN_H
#define RF_PLAN_H

#include <stdint.h>

#include "base/common.h"
#include "plan/buckets.h"
#include "plan/mix.h"

typedef struct rf_plan {
    /* fixed at create */
    uint64_t n;          /* order positions per epoch: the dataset's samples, or the epoch
                            size when mixing */
    uint64_t samples;    /* samples in the dataset */
    uint64_t seed;
    uint32_t order;      /* enum rf_order */
    uint32_t batch;
    uint32_t drop_last;
    uint32_t remainder;  /* enum rf_remainder */
    uint32_t rank, world;
    /* the epoch being planned */
    uint64_t epoch;
    uint64_t base;
    uint64_t per_rank;   /* samples this rank gets this epoch (padding included) */
    uint64_t batches;    /* batches this rank delivers this epoch */
    uint64_t *perm;      /* order position -> sample id; NULL for RF_ORDER_NONE */
    /* RF_ORDER_SHARD: sample ids of shard s are [shard_start[s], shard_start[s+1]) */
    uint64_t *shard_start;
    uint32_t *shard_perm;
    uint32_t nshards, window;
    rf_mix *mix;         /* weighted mixing (rf_plan_set_mix); NULL: one permutation */
    rf_bucket_plan *bk;  /* size buckets (rf_plan_set_buckets); NULL: off */
    uint64_t g0;         /* size buckets: the planned epoch's first group */
    uint64_t real;       /* size buckets: this rank's real samples in the planned epoch */
} rf_plan;

/* Validate and store the fixed part; allocates the permutation buffer (n entries). */
int rf_plan_init(rf_plan *p, uint64_t n, uint64_t seed, uint32_t order, uint32_t batch,
                 uint32_t drop_last, uint32_t remainder, uint32_t rank, uint32_t world,
                 rf_err *err);
void rf_plan_free(rf_plan *p);

/* RF_ORDER_SHARD needs the shard boundaries: starts[0..nshards] (starts[nshards] == n), and
 * how many shards one window mixes. Copies starts. */
int rf_plan_set_shards(rf_plan *p, const uint64_t *starts, uint32_t nshards, uint32_t window,
                       rf_err *err);

/* Weighted mixing (mix.h): validate (errors name the rf_config setting: weights,
 * sample_weights, epoch_size, ...) and switch the plan to mixing; after rf_plan_init, before the first rf_plan_epoch. */
int rf_plan_set_mix(rf_plan *p, const rf_plan_mix_spec *m, rf_err *err);

/* Size buckets: of (one bucket per sample, malloc'ed, owned by the plan from here on, freed
 * on failure too) and nbuckets; after rf_plan_init, before the first rf_plan_epoch. RF_EINVAL
 * with mixing (a position is not a sample there) or when no batch is left on this rank. */
int rf_plan_set_buckets(rf_plan *p, uint16_t *of, uint32_t nbuckets, rf_err *err);

/* Batch k of the planned epoch: its bucket (0 without buckets) and its number within the
 * epoch (rf_batch.index: whole batches before the cursor counted). */
uint32_t rf_plan_batch_bucket(const rf_plan *p, uint64_t k);
uint64_t rf_plan_batch_index(const rf_plan *p, uint64_t k);
/* The cursor after k batches of an epoch that started at `base` (any epoch: no state read):
 * the order positions (with buckets the arranged entries) consumed over all ranks. */
uint64_t rf_plan_cursor(const rf_plan *p, uint64_t base, uint64_t k);

/* A resume cursor this plan can start an epoch at: at most n, and with buckets a group's
 * start. RF_ERESUME saying why not. */
int rf_plan_base_check(const rf_plan *p, uint64_t base, rf_err *err);

/* Positions per epoch that source s takes (0 without mixing). */
uint64_t rf_plan_source_positions(const rf_plan *p, uint32_t s);

/* Samples and batches this rank gets in an epoch that starts at `base` (no state change). */
void rf_plan_shape(const rf_plan *p, uint64_t base, uint64_t *per_rank, uint64_t *batches);

/* Plan `epoch` starting at order position `base` (O(n) for the permutation, independent of
 * base, so resuming costs the same anywhere in the epoch). */
void rf_plan_epoch(rf_plan *p, uint64_t epoch, uint64_t base);

/* This rank's j-th sample of the planned epoch (j < per_rank). */
void rf_plan_sample(const rf_plan *p, uint64_t j, uint64_t *sample_id, uint64_t *position,
                    uint8_t *is_padding);

/* The rank's samples in the planned epoch before batch k: batch k's i-th sample is
 * rf_plan_sample(first + i). k x batch_size, but with size buckets, whose leftover batches
 * are smaller. */
uint64_t rf_plan_first(const rf_plan *p, uint64_t k);

/* Samples in batch k of the planned epoch. */
uint32_t rf_plan_batch_count(const rf_plan *p, uint64_t k);

/* The per-sample augmentation seed: depends on (seed, epoch, sample id) only, so a sample gets
 * the same crop whichever rank or resume position delivers it. */
uint64_t rf_plan_sample_seed(const rf_plan *p, uint64_t epoch, uint64_t sample_id);

/* The augmentation seed of the sample at order `position`: rf_plan_sample_seed, with the
 * position mixed in when mixing, where a sample may come twice in an epoch and should not get
 * the same crop twice. Positions do not depend on rank or resume, so neither does the seed. */
uint64_t rf_plan_aug_seed(const rf_plan *p, uint64_t epoch, uint64_t sample_id,
                          uint64_t position);


/* Where a sample stands for rf_config.gpu_decode_percent (0..99; the GPU takes it below the
 * percent), and the seed rf_config.sample_hook gets: hashes of the augmentation seed of their
 * own, apart from the crop's draws and from each other. */
uint32_t rf_plan_gpu_percentile(uint64_t aug_seed);
uint64_t rf_plan_hook_seed(uint64_t aug_seed);

/* Resume blob (little-endian, fixed size per version). Version 2 is version 1 plus the mixing
 * fingerprint, written only by a mixing loader, so the blobs of every other loader stay as
 * they were and old blobs still load. */
#define RF_STATE_MAGIC 0x31534652u /* "RFS1" */
#define RF_STATE_VERSION 1u
#define RF_STATE_BYTES 64u
#define RF_STATE_VERSION_MIX 2u
#define RF_STATE_BYTES_MIX 72u
#define RF_STATE_BYTES_MAX RF_STATE_BYTES_MIX

typedef struct rf_resume {
    uint64_t seed, epoch, consumed, n;
    uint32_t world, rank, order, batch;
    uint64_t mix; /* rf_plan_mix_fingerprint; 0: not mixing (a version 1 blob) */
} rf_resume;

/* Bytes of r's blob: RF_STATE_BYTES, or RF_STATE_BYTES_MIX with a mixing fingerprint. */
uint32_t rf_state_bytes(const rf_resume *r);
void rf_state_encode(const rf_resume *r, uint8_t out[RF_STATE_BYTES_MAX]);
int rf_state_decode(const void *buf, uint64_t len, rf_resume *r, rf_err *err);

/* A hash of everything that decides a mixing epoch's order besides seed and epoch (sources,
 * weights, epoch size, replacement, sample weights) and of the size buckets' assignment and
 * groups, never 0; 0 without mixing and buckets. A resume
 * state carries it, so that a loader with other mixing settings refuses the cursor instead of
 * continuing in an order the cursor was not counted in. */
uint64_t rf_plan_mix_fingerprint(const rf_plan *p);

#endif
