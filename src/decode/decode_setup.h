/* decode_setup.h — the decode stage's settings, read from the config once at create
 * (decode_setup.c): the transform every sample gets, the limits every decoder checks, and
 * whether DCT scaling is off; and the decoders made with them, for the decode threads and for
 * the GPU decode stage's CPU decodes. */
#ifndef RF_DECODE_SETUP_H
#define RF_DECODE_SETUP_H

#include "decode/decode.h"
#include "ringfeed.h"

typedef struct rf_decode_setup {
    rf_transform tf;
    rf_decode_limits limits;
    int full_scale; /* rf_config.dct_scaling OFF, as create resolved it */
    rf_views views; /* rf_config.multi_crop, parsed at create (rf_decode_setup_views) */
} rf_decode_setup;

/* From the resolved config: the crop and output size, NHWC before a conversion (the
 * conversion writes the layout asked for), the image limits. */
void rf_decode_setup_init(rf_decode_setup *d, const rf_config *c);
/* rf_config.multi_crop into d->views (n = 0 when unset), before the stages are shaped by it;
 * RF_EINVAL for bad text. rf_decode_setup_init keeps them. */
int rf_decode_setup_views(rf_decode_setup *d, const rf_config *c, rf_err *err);
/* The transform of a batch's samples: d's, with size buckets (bucket_h > 0) letterboxed into
 * the batch's bucket (its image then packed from the sample's start, as NATIVE's are), so that
 * the image, its mask, boxes and points all take the bucket's geometry, on every path. */
rf_transform rf_decode_setup_transform(const rf_decode_setup *d, uint32_t bucket_h,
                                       uint32_t bucket_w);
/* A decoder with the limits (and full scale when DCT scaling is off); NULL without memory. */
rf_decoder *rf_decode_setup_decoder(const rf_decode_setup *d);

#endif
