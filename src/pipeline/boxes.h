/* boxes.h — boxes and keypoints that follow the crop (rf_config.box_ext, box_json_path,
 * keypoint_json_path ...; boxes.c): the settings as the stage keeps them, each slot's rows,
 * and the two steps a decode thread takes per sample: read its member into its rows as given
 * (before the decode), then map them through the geometry its image was given (after it,
 * with the image's size from rf_decode_info), whichever path decoded it. */
#ifndef RF_PL_BOXES_H
#define RF_PL_BOXES_H

#include <stdint.h>

#include "decode/decode.h"
#include "loaders/tar.h"
#include "pipeline/slot.h"
#include "pipeline/state.h"

struct pl_ring;

typedef struct pl_boxes {
    int boxes, points, npy, knpy; /* on; boxes, keypoints from a .npy member */
    char *ext, *path, *class_path; /* the stage's copies of box_ext (resolved), the paths */
    char *kext, *kpath, *pairs;    /* keypoint_ext (resolved), keypoint_json_path, flip pairs */
    uint32_t format, normalized, max_boxes, max_points, num_classes;
    uint32_t out_normalized; /* box_output_normalized */
    float min_vis;
    uint32_t *swap;               /* max_points: the point a flip puts at index i */
    uint32_t batch, nviews;       /* rows: nviews blocks (1 without multi_crop; 0 reads 1) of
                                   * batch */
} pl_boxes;

/* create: the settings checked (RF_EINVAL naming the setting) and copied; c's strings are
 * pointed at the stage's copies, as rf_loader_config reports them. */
int pl_boxes_setup(pl_boxes *b, rf_config *c, rf_err *err);
/* create, the ring allocated: each slot's rows. */
int pl_boxes_alloc(pl_boxes *b, struct pl_ring *r, const pl_core *core, rf_err *err);
void pl_boxes_free(pl_boxes *b, struct pl_ring *r);
/* The member extensions the stage reads (0..2 entries into exts): boxes', then keypoints'. */
uint32_t pl_boxes_exts(const pl_boxes *b, const char **exts);
/* Before the decode: sample `index`'s members (found[0..], in pl_boxes_exts' order, in span)
 * read into its rows as given. RF_ELABEL naming the member and its offset (sample_off + its
 * header) on a missing or bad one. */
int pl_boxes_read(const pl_boxes *b, slot *s, uint32_t index, const char *key,
                  uint64_t sample_off, const uint8_t *span, const rf_tar_span_member *found,
                  rf_err *e);
/* After the decode: the rows mapped through g (the image W x H), clipped and dropped by the
 * rules (ringfeed.h); with multi_crop g holds every view's geometry (view k's transform and
 * rf_view_seed) and view k's rows are the rows as read mapped through g[k]. RF_ELABEL naming
 * the sample for a box or point outside its image. */
int pl_boxes_map(const pl_boxes *b, slot *s, uint32_t index, const rf_geometry *g, uint32_t W,
                 uint32_t H, const char *key, uint64_t sample_off,
                 const rf_tar_span_member *found, rf_err *e);
/* A blank padding sample: no boxes, no points (in every view). */
void pl_boxes_blank(const pl_boxes *b, slot *s, uint32_t index);
/* multi_crop: view k's rows into its rf_view (NULL when off). */
void pl_boxes_view(const pl_boxes *b, const slot *s, uint32_t k, rf_view *v);
void pl_boxes_batch(const pl_boxes *b, const slot *s, rf_batch *out);

#endif
