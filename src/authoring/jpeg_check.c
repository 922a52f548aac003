/* jpeg_check.c — image checks for the tools (include/ringfeed_shards.h): rf_jpeg_check (JPEG,
 * PNG or WebP) and rf_jpeg_add_restarts.
 *
 * DESIGN. Both wrap the loader's own code, so that a tool's verdict is the loader's: a check
 * runs the loader's signature test and decoders (rf_decode_check or rf_image_check, decoded in
 * full), and the restart
 * rewrite is the loader's transcoder (decode/jpeg_restart.c). A checker holds one decoder and
 * is used by one thread at a time. */
#include "ringfeed_shards.h"

#include <inttypes.h>
#include <stdlib.h>

#include "authoring/authoring.h"
#include "decode/decode.h"
#include "decode/jpeg_restart.h"

struct rf_jpeg_checker {
    rf_decoder *dec;
};

rf_jpeg_checker *rf_jpeg_checker_create(void)
{
    rf_jpeg_checker *c = calloc(1, sizeof *c);
    /* No limits given: the decoder applies the loader's defaults (decode.h). */
    if (c && !(c->dec = rf_decoder_create(NULL))) {
        free(c);
        c = NULL;
    }
    return c;
}

void rf_jpeg_checker_destroy(rf_jpeg_checker *c)
{
    if (!c)
        return;
    rf_decoder_destroy(c->dec);
    free(c);
}

int rf_jpeg_check_info(rf_jpeg_checker *c, const uint8_t *p, uint64_t len, rf_jpeg_info *ji,
                       rf_err *e)
{
    *ji = (rf_jpeg_info){0};
    uint32_t format;
    int rc = rf_image_magic_check(p, len, &format, e); /* the loader's not_jpeg, in its words */
    if (rc)
        return rc;
    if (len > SIZE_MAX)
        return rf_seterr(e, RF_ELIMIT, "%" PRIu64 " bytes do not fit in memory", len);
    if (format == RF_IMAGE_JPEG)
        return rf_decode_check(c->dec, p, (size_t)len, ji, e);
    return rf_image_check(c->dec, p, (size_t)len, &ji->width, &ji->height, e);
}

int rf_jpeg_check(rf_jpeg_checker *c, const void *data, uint64_t len, uint32_t *width,
                  uint32_t *height, uint32_t *progressive, char *err, size_t err_len)
{
    rf_err e = {0};
    if (!c || (!data && len))
        return rf_err_give(&(rf_err){.code = RF_EINVAL, .msg = "no checker or no data"},
                           err, err_len);
    rf_jpeg_info ji;
    int rc = rf_jpeg_check_info(c, data, len, &ji, &e);
    if (rc)
        return rf_err_give(&e, err, err_len);
    if (width)
        *width = ji.width;
    if (height)
        *height = ji.height;
    if (progressive)
        *progressive = ji.progressive;
    return 0;
}

int rf_jpeg_add_restarts(const void *data, uint64_t len, uint32_t interval, uint32_t optimize,
                         void **out, uint64_t *out_len, char *err, size_t err_len)
{
    rf_err e = {0};
    if (!out || !out_len || (!data && len) || len > SIZE_MAX)
        return rf_err_give(&(rf_err){.code = RF_EINVAL, .msg = "no input or no output pointers"},
                           err,
                    err_len);
    uint8_t *o = NULL;
    size_t n = 0;
    int rc = rf_jpeg_restart_transcode(data, (size_t)len, interval, optimize != 0, &o, &n, &e);
    *out = o, *out_len = n;
    if (rc == RF_JPEG_KEEP) {
        rf_err_give(&e, err, err_len);
        return RF_JPEG_RESTART_KEPT;
    }
    return rc ? rf_err_give(&e, err, err_len) : 0;
}

void rf_free(void *p) { free(p); }
