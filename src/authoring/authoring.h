/* authoring.h — what the files of src/authoring share: the dataset-making half of the public
 * API (include/ringfeed_shards.h). All are clients of the formats in loaders/, where the tar
 * parser, the sample grouping and the index live, once. Internal. */
#ifndef RF_AUTHORING_H
#define RF_AUTHORING_H

#include <stdint.h>

#include "base/common.h"
#include "loaders/dataset.h"
#include "decode/decode.h"
#include "ringfeed_shards.h"

/* rf_jpeg_check with an rf_err and the whole rf_jpeg_info, for inspection, which adds the
 * shard, the member and the offset to the message: the loader's own SOI test and decoder
 * judge the bytes, so inspection, pack and the loader cannot disagree. */
int rf_jpeg_check_info(rf_jpeg_checker *c, const uint8_t *p, uint64_t len, rf_jpeg_info *ji,
                       rf_err *e);

#endif
