/* size_pass.h — the size buckets' pass over the data set at create: every image's size from
 * its header, and so its bucket (rf_config.size_buckets; plan/buckets.h). */
#ifndef RF_PL_SIZE_PASS_H
#define RF_PL_SIZE_PASS_H

#include <stdint.h>

#include "base/common.h"
#include "loaders/dataset.h"
#include "plan/buckets.h"

/* Read each sample's image header (its first 4 KiB, then 64 KiB, then the whole member when
 * the size lies further in) and give it the nearest bucket: *of, ds->nsamples entries,
 * malloc'ed. An image whose header does not parse goes to bucket 0 (its decode fails as it
 * would without buckets). RF_EINVAL for a remote shard (its members would be fetched one by
 * one at create), -errno for a shard or image that cannot be read (named), RF_ENOMEM. */
int pl_size_pass(const rf_dataset *ds, const rf_buckets *bk, uint16_t **of, rf_err *err);

#endif
