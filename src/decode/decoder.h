/* decoder.h — private to decode/: the decoder's struct and what jpeg_decode.c (libjpeg, the
 * guarded region, line reads), crop.c (the crop choice) and transform.c (the transform and the
 * placed decode) share. Nothing outside decode/ includes it; the rest of the library sees the
 * decoder through decode.h only. */
#ifndef RF_DECODER_H
#define RF_DECODER_H

#include <math.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h> /* jpeglib.h needs FILE */

#include <jpeglib.h>

#include "decode/decode.h"
#include "decode/jpeg_restart.h"
#include "decode/resize.h"

typedef struct rf_jerr {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    int code;
    char msg[JMSG_LENGTH_MAX + 64];
} rf_jerr;

typedef struct rf_jprogress {
    struct jpeg_progress_mgr pub;
    uint32_t max_scans;
} rf_jprogress;

/* A crop of the original image. Fractional for CENTER (torchvision resizes, then crops whole
 * pixels of the resized image). clamp_box: filter taps stay inside the box (RandomResizedCrop
 * crops, then resizes) rather than inside the image. */
typedef struct crop_box {
    double x, y, w, h;
    int clamp_box;
    uint32_t flip;
} crop_box;

struct rf_decoder {
    struct jpeg_decompress_struct cinfo;
    rf_jerr jerr;
    rf_jprogress progress;
    rf_decode_limits lim;
    uint32_t max_denom;
    uint32_t flags; /* enum rf_decode_flag */
    int cmyk; /* this image is decoded as CMYK and converted per row */
    rf_axis h, v;
    uint8_t *line, *rgb, *ring, *vrow, *orow;
    size_t line_cap, rgb_cap, ring_cap, vrow_cap, orow_cap;
    const uint8_t **rows;
    size_t rows_cap;
    int32_t *acc;
    size_t acc_cap;
    rf_region_buf region;
};

/* Python's round(): half to even, which rint() does in the default rounding mode. */
static inline int64_t rf_py_round(double v) { return (int64_t)rint(v); }

/* ---- jpeg_decode.c ------------------------------------------------------------------------ */

typedef int (*rf_dec_job_fn)(rf_decoder *d, void *job, rf_err *err);

/* The guarded region and what jobs inside it share; each definition says what it does. */
int rf_dec_guarded(rf_decoder *d, const uint8_t *jpeg, size_t len, rf_dec_job_fn fn, void *job,
                   rf_err *err);
int rf_dec_read_header(rf_decoder *d, rf_err *err);
int rf_dec_ensure_line(rf_decoder *d, rf_err *err);
const uint8_t *rf_dec_read_rgb_line(rf_decoder *d, uint8_t *direct, rf_err *err);
int rf_dec_check_scan(rf_decoder *d, const uint8_t *jpeg, size_t len, rf_err *err);

/* ---- crop.c ------------------------------------------------------------------------------- */

/* The crop box and flip for a W x H image, from the sample's seed. */
void rf_dec_choose_box(const rf_transform *t, uint32_t W, uint32_t H, uint64_t seed,
                       crop_box *b);

#endif
