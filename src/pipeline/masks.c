/* masks.c — segmentation masks (masks.h), on a decode thread. Everything that can fail (the
 * member, the PNG, its kind, its size against the header of its image) is done before the
 * image is decoded or handed to a GPU engine, so a bad mask fails its sample as a bad image
 * does, with nothing placed; the resample after the image's decode cannot fail. Its
 * geometry is rf_sample_geometry's of the image's full size and the sample's seed (the
 * decode thread's, which its boxes share), so the mask follows the image whichever engine
 * decodes its pixels, and a padding repeat (the same sample and seed) gets its original's
 * mask. With multi_crop the mask is decoded once and resampled per view with that view's
 * geometry, into the view's block of the slot's masks (view-major, as the views' crop boxes:
 * each view's masks are then one contiguous batch, rf_view.masks). Writes only the sample's
 * own rows, published with its pixels by the slot's pending countdown. */
#include "pipeline/masks.h"

#include <assert.h>
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

int pl_mask_read(const pl_ring *r, rf_decoder *dec, const rf_dataset *ds, const rf_sample *sm,
                 uint32_t img_hdr, const uint8_t *img, uint32_t img_len, const uint8_t *span,
                 const rf_tar_span_member *m, rf_mask *mk, uint8_t *why, rf_err *e)
{
    uint32_t w, h;
    rf_err ie = {0};
    int rc = rf_mask_decode(dec, span + m->off, m->len, r->mask_dtype == RF_DTYPE_INT32,
                            r->width, mk, e);
    if (rc == 0 && rf_image_size(dec, img, img_len, &w, &h, &ie) == 0 &&
        (mk->width != w || mk->height != h)) {
        char im[RF_ERRMSG_MAX / 2];
        pl_describe_member(ds, sm, img_hdr, im, sizeof im);
        rc = rf_seterr(e, RF_EFORMAT, "mask is %ux%u, its image (%s) %ux%u: a mask must have "
                       "its image's size", mk->width, mk->height, im, w, h);
    }
    if (rc == 0)
        return 0;
    *why = why_of(rc);
    char msg[RF_ERRMSG_MAX];
    snprintf(msg, sizeof msg, "member %s.%s at offset %llu: %s", ds->keys + sm->key,
             r->mask_ext, (unsigned long long)(sm->offset + m->hdr), e->msg);
    return rf_seterr(e, rc, "%s", msg);
}

/* View k's values per sample (k 0 without multi_crop). */
static uint64_t view_values(const pl_ring *r, uint32_t k)
{
    return r->nviews ? (uint64_t)r->views->height[k] * r->views->width[k]
                     : (uint64_t)r->height * r->width;
}

/* Sample i's mask of view k: after views 0..k-1's blocks of batch_size masks. */
static uint8_t *mask_row(const pl_ring *r, const slot *s, uint32_t i, uint32_t k)
{
    uint64_t block = r->nviews ? (uint64_t)r->batch * (r->views->offset[k] / 3) : 0;
    uint32_t es = r->mask_dtype == RF_DTYPE_INT32 ? 4 : 1;
    return s->masks + (block + (uint64_t)i * view_values(r, k)) * es;
}

void pl_mask_place(const pl_ring *r, rf_decoder *dec, const rf_geometry *g, const rf_mask *mk,
                   const rf_decode_info *info, slot *s, uint32_t i, uint32_t k)
{
    /* the decode read the header pl_mask_read measured (rf_mask_resample clamps to the mask
     * all the same) */
    assert(mk->width == info->width && mk->height == info->height);
    (void)info;
    rf_mask_resample(dec, mk, g, r->mask_dtype, r->mask_fill, mask_row(r, s, i, k));
}

void pl_mask_blank(const pl_ring *r, slot *s, uint32_t i)
{
    for (uint32_t k = 0; k < RF_MAX(r->nviews, 1u); k++) {
        uint8_t *row = mask_row(r, s, i, k);
        uint64_t n = view_values(r, k);
        if (r->mask_dtype == RF_DTYPE_INT32)
            for (uint64_t j = 0; j < n; j++)
                ((int32_t *)(void *)row)[j] = (int32_t)r->mask_fill;
        else
            memset(row, (int)r->mask_fill, n);
    }
}

const void *pl_mask_view(const pl_ring *r, const slot *s, uint32_t k)
{
    return s->masks ? mask_row(r, s, 0, k) : NULL;
}
