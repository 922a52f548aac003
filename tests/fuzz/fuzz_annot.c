/* fuzz_annot.c — libFuzzer target for the box and keypoint readers (loaders/annotations.c,
 * loaders/npy.c): the input is read as a JSON member at a plain path, at a path through an
 * array of objects (with class ids), as keypoints, and as a .npy file of boxes and of
 * keypoints, into rows of a few boxes or points, as the decode threads read a sample's member. Any crash, sanitizer report, hang or
 * out-of-bounds write is a bug (the rows are exactly max_boxes wide, so ASan sees an overrun);
 * errors returned are expected, and a success must leave a count within the rows and every
 * box read finite with no negative size. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "loaders/annotations.h"
#include "ringfeed.h"

#define CAP 4

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const rf_annot_sink *k, int rc)
{
    if (rc)
        return;
    if (k->n > k->cap)
        abort();
    for (uint32_t i = 0; k->width == 4 && i < k->n; i++) {
        const float *v = k->vals + (size_t)i * 4;
        for (int c = 0; c < 4; c++)
            if (!isfinite(v[c]))
                abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rf_err e = {0};
    float *vals = malloc(CAP * 4 * sizeof *vals);
    int32_t *cls = malloc(CAP * sizeof *cls);
    static const char *const paths[][2] = {{"b", NULL}, {"a.bbox", "a.c"}, {"x.y.z", "l"}};
    for (uint32_t f = 0; f < 3; f++) {
        for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++) {
            rf_annot_sink k = {.vals = vals, .classes = cls, .cap = CAP, .width = 4,
                               .format = f, .num_classes = p == 2 ? 5 : 0};
            check(&k, rf_annot_json_boxes(data, size, paths[p][0], paths[p][1], &k, "m", &e));
        }
        rf_annot_sink k = {.vals = vals, .classes = cls, .cap = CAP, .width = 4, .format = f};
        check(&k, rf_annot_npy_boxes(data, size, &k, "m", &e));
    }
    float *pts = malloc(CAP * 3 * sizeof *pts);
    rf_annot_sink k = {.vals = pts, .cap = CAP, .width = 3};
    check(&k, rf_annot_json_points(data, size, "k", &k, "m", &e));
    k = (rf_annot_sink){.vals = pts, .cap = CAP, .width = 3};
    check(&k, rf_annot_npy_points(data, size, &k, "m", &e));
    free(vals), free(cls), free(pts);
    return 0;
}
