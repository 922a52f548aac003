/* annotations.h — a sample's boxes and keypoints as its member gives them (annotations.c for
 * JSON, npy.c for .npy), before any geometry: raw numbers checked for what needs no image
 * (syntax, counts, finiteness, signs). The pipeline maps them through the crop
 * (src/pipeline/boxes.c). Reentrant: used on decode threads, writing into the caller's rows. */
#ifndef RF_LOADERS_ANNOTATIONS_H
#define RF_LOADERS_ANNOTATIONS_H

#include <stdint.h>

#include "base/common.h"

/* Where the numbers go: up to cap items of `width` floats each (a box's 4 as given, or a
 * point's x, y, v), and for boxes each one's class id (-1: none given). */
typedef struct rf_annot_sink {
    float *vals;
    int32_t *classes;     /* boxes: cap ids; NULL for points */
    uint32_t cap, width;  /* width 4 (boxes) or 3 (points) */
    uint32_t format;      /* boxes: enum rf_box_format */
    uint32_t num_classes; /* 0: any id 0..INT32_MAX */
    uint32_t n;           /* out: items read */
} rf_annot_sink;

/* The boxes of a JSON member at `path` (rf_config.box_json_path's rules: dotted keys, read in
 * each element where the path meets an array of objects), and when class_path is not NULL
 * their class ids. RF_ELABEL naming `what` (the member and its offset), the field and the
 * box on the first fault. */
int rf_annot_json_boxes(const uint8_t *text, uint64_t len, const char *path,
                        const char *class_path, rf_annot_sink *k, const char *what, rf_err *err);
/* The keypoints of a JSON member at `path`: [[x, y], ...] or [[x, y, v], ...]. */
int rf_annot_json_points(const uint8_t *text, uint64_t len, const char *path, rf_annot_sink *k,
                         const char *what, rf_err *err);
/* The boxes of a .npy member (npy.c): N x 4 or N x 5 (class ids in the last column) '<f4'
 * or '<f8', C order. */
int rf_annot_npy_boxes(const uint8_t *data, uint64_t len, rf_annot_sink *k, const char *what,
                       rf_err *err);
/* The keypoints of a .npy member: N x 2 (x, y; visibility 2) or N x 3 (x, y, v). */
int rf_annot_npy_points(const uint8_t *data, uint64_t len, rf_annot_sink *k, const char *what,
                        rf_err *err);
/* A point as given, {x, y, v}: finite, v 0, 1 or 2; written to k's row nth as floats. */
int rf_annot_point(rf_annot_sink *k, const double v[3], uint32_t nth, const char *what,
                   rf_err *err);
/* A box's four numbers as given: finite, no negative size. RF_ELABEL naming `what` and the
 * box (index nth) otherwise. Shared by the JSON and .npy readers. */
int rf_annot_box_check(uint32_t format, const float *v, uint32_t nth, const char *what,
                       rf_err *err);
/* A class id as given (a double from JSON or .npy): an integer 0..INT32_MAX below
 * num_classes when that is set. */
int rf_annot_class_check(double v, uint32_t num_classes, uint32_t nth, const char *what,
                         int32_t *id, rf_err *err);

#endif
