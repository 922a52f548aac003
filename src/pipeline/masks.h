/* masks.h — segmentation masks (rf_config.mask, masks.c): a tar sample's mask member decoded
 * on the decode thread that took its image, given the image's geometry and written into the
 * sample's row of the slot's masks (ring.c allocates them at create). */
#ifndef RF_PL_MASKS_H
#define RF_PL_MASKS_H

#include <stdint.h>

#include "decode/decode.h"
#include "loaders/dataset.h"
#include "loaders/tar.h"
#include "pipeline/ring.h"

/* Sample sm has no mask member (m->off 0): RF_EFORMAT naming it, *why RF_SKIP_FIELD. */
int pl_mask_missing(const pl_ring *r, const rf_dataset *ds, const rf_sample *sm, uint8_t *why,
                    rf_err *e);
/* The mask member m of sample sm (in its span) into row i of slot s, with the geometry tf and
 * seed give its image, whose decode reported info. An error names the member and its offset
 * (the caller adds the shard) and sets *why (enum rf_skip_reason, or SKIP_FATAL). */
int pl_mask_sample(const pl_ring *r, rf_decoder *dec, const rf_transform *tf, uint64_t seed,
                   const rf_dataset *ds, const rf_sample *sm, uint32_t img_hdr,
                   const uint8_t *span, const rf_tar_span_member *m, const rf_decode_info *info,
                   slot *s, uint32_t i, uint8_t *why, rf_err *e);
/* Row i of slot s all mask_fill: a blank padding sample. */
void pl_mask_blank(const pl_ring *r, slot *s, uint32_t i);

#endif
