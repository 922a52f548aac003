/* masks.c — segmentation masks (masks.h). Runs on a decode thread after its sample's image was
 * decoded or placed, from the rf_decode_info every path returns: the geometry is
 * rf_sample_geometry's of the image's full size and the sample's seed, so the mask follows
 * the image whichever engine decodes its pixels, and a padding repeat (the same sample and
 * seed) gets its original's mask. Writes only the sample's own row, published with its
 * pixels by the slot's pending countdown. */
#include "pipeline/masks.h"

#include <stdio.h>
#include <string.h>

#include "pipeline/state.h"

int pl_mask_missing(const pl_ring *r, const rf_dataset *ds, const rf_sample *sm, uint8_t *why,
                    rf_err *e)
{
    const char *key = ds->keys + sm->key;
    *why = RF_SKIP_FIELD;
    return rf_seterr(e, RF_EFORMAT, "sample %s at offset %llu has no mask member %s.%s "
                     "(rf_config.mask asks for \"%s\")", key, (unsigned long long)sm->offset,
                     key, r->mask_ext, r->mask_ext);
}

static uint8_t why_of(int rc)
{
    return rc == RF_EFORMAT  ? RF_SKIP_MASK
           : rc == RF_EDECODE ? RF_SKIP_CORRUPT
           : rc == RF_ELIMIT  ? RF_SKIP_TOO_LARGE
                              : SKIP_FATAL;
}

int pl_mask_sample(const pl_ring *r, rf_decoder *dec, const rf_transform *tf, uint64_t seed,
                   const rf_dataset *ds, const rf_sample *sm, uint32_t img_hdr,
                   const uint8_t *span, const rf_tar_span_member *m, const rf_decode_info *info,
                   slot *s, uint32_t i, uint8_t *why, rf_err *e)
{
    rf_mask mk;
    rf_geometry g;
    int wide = r->mask_dtype == RF_DTYPE_INT32;
    int rc = rf_mask_decode(dec, span + m->off, m->len, wide, &mk, e);
    if (rc == 0 && (mk.width != info->width || mk.height != info->height)) {
        char img[RF_ERRMSG_MAX / 2];
        pl_describe_member(ds, sm, img_hdr, img, sizeof img);
        rc = rf_seterr(e, RF_EFORMAT, "mask is %ux%u, its image (%s) %ux%u: a mask must have "
                       "its image's size", mk.width, mk.height, img, info->width, info->height);
    }
    if (rc == 0) {
        rf_sample_geometry(tf, info->width, info->height, seed, &g);
        rc = rf_mask_resample(dec, &mk, &g, r->mask_dtype, r->mask_fill,
                              s->masks + (uint64_t)i * r->mask_bytes, e);
    }
    if (rc == 0)
        return 0;
    *why = why_of(rc);
    char m2[RF_ERRMSG_MAX];
    snprintf(m2, sizeof m2, "member %s.%s at offset %llu: %s", ds->keys + sm->key, r->mask_ext,
             (unsigned long long)(sm->offset + m->hdr), e->msg);
    return rf_seterr(e, rc, "%s", m2);
}

void pl_mask_blank(const pl_ring *r, slot *s, uint32_t i)
{
    uint8_t *row = s->masks + (uint64_t)i * r->mask_bytes;
    uint64_t n = (uint64_t)r->height * r->width;
    if (r->mask_dtype == RF_DTYPE_INT32)
        for (uint64_t k = 0; k < n; k++)
            ((int32_t *)(void *)row)[k] = (int32_t)r->mask_fill;
    else
        memset(row, (int)r->mask_fill, n);
}
