/* decode_setup.c — the decode stage's settings from the config (decode_setup.h). Runs on the
 * creating thread; the decoders it makes belong to the thread that asked. */
#include "decode/decode_setup.h"

#include <math.h>

void rf_decode_setup_init(rf_decode_setup *d, const rf_config *c)
{
    int convert = c->source != RF_SOURCE_TOKENS && c->dtype != RF_DTYPE_UINT8;
    d->tf = (rf_transform){.crop = c->crop,
                           .height = c->image_height,
                           .width = c->image_width,
                           .resize_shorter = c->resize_shorter,
                           .layout = convert ? RF_LAYOUT_NHWC : c->layout,
                           .scale_min = c->scale_min,
                           .scale_max = c->scale_max,
                           .ratio_min = c->ratio_min,
                           .ratio_max = c->ratio_max,
                           .flip_prob = c->flip_prob};
    for (int k = 0; k < 3; k++) /* resolved at create: 0..255 */
        d->tf.pad[k] = (uint8_t)lrintf(c->pad_value[k]);
    d->limits = (rf_decode_limits){.max_pixels = c->max_image_pixels,
                                   .max_dim = c->max_image_dim,
                                   .max_scans = c->max_scans};
    d->full_scale = c->dct_scaling == RF_DCT_SCALING_OFF;
}

int rf_decode_setup_views(rf_decode_setup *d, const rf_config *c, rf_err *err)
{
    return rf_views_parse(c->source == RF_SOURCE_TOKENS ? NULL : c->multi_crop, c->scale_min,
                          c->scale_max, &d->views, err);
}

rf_decoder *rf_decode_setup_decoder(const rf_decode_setup *d)
{
    rf_decoder *dec = rf_decoder_create(&d->limits);
    if (dec && d->full_scale)
        rf_decoder_set_max_scale_denom(dec, 1);
    return dec;
}

rf_transform rf_decode_setup_transform(const rf_decode_setup *d, uint32_t bucket_h,
                                       uint32_t bucket_w)
{
    rf_transform tf = d->tf;
    if (bucket_h)
        tf.height = bucket_h, tf.width = bucket_w;
    return tf;
}
