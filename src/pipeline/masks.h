/* masks.h — segmentation masks (rf_config.mask, masks.c): a tar sample's mask member decoded
 * and checked on the decode thread before its image goes to any engine, then given the
 * image's geometry and written into the sample's row of the slot's masks (ring.c allocates
 * them at create). */
#ifndef RF_PL_MASKS_H
#define RF_PL_MASKS_H

#include <stdint.h>

#include "decode/decode.h"
#include "loaders/dataset.h"
#include "loaders/tar.h"
#include "pipeline/ring.h"

/* Sample sm has no mask member: RF_EFORMAT naming it, *why RF_SKIP_FIELD. */
int pl_mask_missing(const pl_ring *r, const rf_dataset *ds, const rf_sample *sm, uint8_t *why,
                    rf_err *e);
/* Before the image img[0..img_len) (its member's header at img_hdr) is decoded or placed:
 * decode the mask member m of sample sm (in its span) into *mk and check it against the size
 * the image's header declares. An error names the member and its offset (the caller adds the
 * shard) and sets *why (enum rf_skip_reason, or SKIP_FATAL); an image header that does not
 * parse is left to the image's decode, which fails on it. */
int pl_mask_read(const pl_ring *r, rf_decoder *dec, const rf_dataset *ds, const rf_sample *sm,
                 uint32_t img_hdr, const uint8_t *img, uint32_t img_len, const uint8_t *span,
                 const rf_tar_span_member *m, rf_mask *mk, uint8_t *why, rf_err *e);
/* After the image's decode reported info: the mask *mk given g, the geometry
 * (rf_sample_geometry) of the image's size, the transform and the sample's seed (with
 * multi_crop view k's transform and rf_view_seed), into sample i's row of view k (0 without
 * multi_crop) in slot s. */
void pl_mask_place(const pl_ring *r, rf_decoder *dec, const rf_geometry *g, const rf_mask *mk,
                   const rf_decode_info *info, slot *s, uint32_t i, uint32_t k);
/* Sample i's rows of slot s (every view's) all mask_fill: a blank padding sample. */
void pl_mask_blank(const pl_ring *r, slot *s, uint32_t i);
/* View k's masks in slot s (rf_view.masks; k 0: rf_batch.masks), NULL without masks. */
const void *pl_mask_view(const pl_ring *r, const slot *s, uint32_t k);

#endif
