/* buckets.h — size buckets (rf_config.size_buckets): the list of bucket sizes, which bucket an
 * image of a given size goes to, and the epoch's batches of one bucket each. Below plan.c,
 * which owns the epoch order, the cursor and the rank split and calls these.
 *
 * The model (docs/python.md, "Size buckets", tells it for users): each epoch the shuffled
 * order is walked once; every sample joins its bucket's queue, and a queue that reaches
 * batch_size x world_size samples becomes a group: the next batch of every rank (rank r takes
 * the group's entries r, r + world, ...). The leftovers at the epoch's end (under
 * batch_size x world_size per bucket) are dropped with drop_last, else each bucket's is one
 * smaller group at the end, in bucket order, padded to a multiple of world_size by repeating
 * its own first samples (remainder PAD) or cut down to one (remainder DROP). The number and
 * sizes of the groups follow from the buckets' sample counts alone, so they are the same every
 * epoch; only which bucket each full group is changes with the order.
 *
 * What plan/ may include: base/ only. */
#ifndef RF_PLAN_BUCKETS_H
#define RF_PLAN_BUCKETS_H

#include <stdint.h>

#include "base/common.h"

#define RF_BUCKETS_MAX 64         /* entries of size_buckets */
#define RF_BUCKETS_TEXT_MAX 1024  /* bytes of the setting's text */

typedef struct rf_buckets {
    uint32_t n; /* 0: off */
    uint32_t height[RF_BUCKETS_MAX], width[RF_BUCKETS_MAX];
} rf_buckets;

/* Parse "HxW,HxW,..." (rows by columns, each 1..8192, e.g. "384x640,512x512,640x384"; spaces
 * around an entry allowed). NULL or "" gives n = 0 (off). RF_EINVAL naming the entry (its
 * number and text) and what is wrong: not HEIGHTxWIDTH, a side outside 1..8192, an entry
 * repeated, more than RF_BUCKETS_MAX entries or a text over RF_BUCKETS_TEXT_MAX bytes. */
int rf_buckets_parse(const char *text, rf_buckets *b, rf_err *err);

/* The bucket whose aspect ratio (width / height) is nearest an image of w x h, nearness
 * measured as the ratio of the two aspect ratios (the distance of their logarithms), compared
 * exactly in integers; a tie goes to the bucket listed first. An image of unknown size (w or
 * h 0) goes to bucket 0. */
uint32_t rf_bucket_nearest(const rf_buckets *b, uint32_t w, uint32_t h);

/* An epoch's groups (see above). Made once for a dataset: rf_bucket_plan_init counts the
 * buckets' samples and sizes the groups; rf_bucket_plan_epoch arranges one epoch's order. */
#define RF_BUCKET_PAD (1ull << 63) /* an arranged entry that repeats a sample as padding */
typedef struct rf_bucket_plan {
    uint32_t nbuckets;
    uint64_t n;         /* samples */
    uint16_t *of;       /* sample id -> bucket (owned) */
    uint64_t *count;    /* samples per bucket */
    uint64_t ngroups;
    uint64_t *gstart;   /* ngroups + 1: where group g starts in arr (fixed for every epoch) */
    uint16_t *gbucket;  /* group g's bucket, this epoch */
    uint64_t *arr;      /* gstart[ngroups] entries: an order position, | RF_BUCKET_PAD */
    uint64_t *queue;    /* the walk's per-bucket queues (n entries) */
    uint64_t *fill;     /* per bucket: samples queued so far */
} rf_bucket_plan;

/* Take `of` (n samples' buckets, malloc'ed; owned from here on, freed on failure too) and
 * size the groups of `group` = batch_size x world_size samples. Returns 0, RF_ENOMEM. */
int rf_bucket_plan_init(rf_bucket_plan *bp, uint16_t *of, uint64_t n, uint32_t nbuckets,
                        uint32_t group, uint32_t world, uint32_t drop_last, uint32_t pad,
                        rf_err *err);
void rf_bucket_plan_free(rf_bucket_plan *bp);
/* Arrange the epoch: perm maps order position -> sample id (NULL: the identity). */
void rf_bucket_plan_epoch(rf_bucket_plan *bp, const uint64_t *perm, uint32_t group);
/* A hash of the buckets' assignment and groups (never 0): a resume state's cursor counts arranged entries. */
uint64_t rf_bucket_plan_fingerprint(const rf_bucket_plan *bp);

#endif
