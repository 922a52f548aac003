/* decode.h — JPEG decode with crop-during-decode, DCT scaling, resize and flip; PNG and WebP
 * through the same crop and resize (rf_decode_image).
 *
 * One rf_decoder per decode thread (libjpeg decompressors are not thread-safe); it is created
 * once and reused for every sample, so our scratch buffers only grow to the largest image seen,
 * then stay; per image only the codecs' own state is made (libjpeg's pools, a libspng
 * context, libwebp's decoder). Every libjpeg error and warning, and every libspng and libwebp
 * error, becomes a returned error with text; nothing here ever calls exit().
 *
 * What decode/ may include: base/ and its own headers, nothing else internal. It knows nothing
 * of the GPU: a sample decoded elsewhere (the GPU decode, backend/gpujpeg_place.c) goes through
 * the placement interface below (rf_decode_place), and the hardware decoder's host stand-in
 * through rf_decode_raw, both in CPU terms. */
#ifndef RF_DECODE_H
#define RF_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "base/common.h"

/* The loader's default limits (rf_config max_image_pixels, max_image_dim, max_scans): also
 * what a decoder created without limits, and so rf_jpeg_check, applies. */
#define RF_DEFAULT_MAX_IMAGE_PIXELS 100000000ull
#define RF_DEFAULT_MAX_IMAGE_DIM 32768u
#define RF_DEFAULT_MAX_SCANS 1000u

typedef struct rf_decode_limits {
    uint64_t max_pixels;   /* width*height from the header, checked before any allocation */
    uint32_t max_dim;      /* each of width and height */
    uint32_t max_scans;    /* progressive scans; 0 = default (1000) */
} rf_decode_limits;

/* What to do to one image. Region selection follows torchvision:
 *  RANDOM: RandomResizedCrop((height, width), scale=(scale_min,scale_max),
 *          ratio=(ratio_min,ratio_max)), 10 attempts then the central fallback crop, exactly as
 *          torchvision does: the box depends on the source image only, never on the output.
 *  CENTER: Resize(shorter side -> resize_shorter) then CenterCrop((height, width)), computed
 *          as one crop of the original image followed by one resize.
 * The crop is resized to height x width with an antialiased triangle (bilinear) filter whose
 * support widens with the downscale factor (torchvision's antialias=True bilinear), each axis
 * with its own factor. */
typedef struct rf_transform {
    uint32_t crop;          /* enum rf_crop */
    uint32_t height, width; /* output rows and columns */
    uint32_t resize_shorter;
    uint32_t layout;        /* enum rf_layout */
    float scale_min, scale_max, ratio_min, ratio_max;
    float flip_prob;
} rf_transform;

typedef struct rf_decoder rf_decoder;

/* Returns NULL on allocation failure. */
rf_decoder *rf_decoder_create(const rf_decode_limits *lim);
void rf_decoder_destroy(rf_decoder *d);

/* Cap the DCT scaling rf_decode_transform may use (8 = default, any of 1/8..1/1; 1 = always
 * decode at full size: the loader's dct_scaling RF_DCT_SCALING_OFF, tests and benchmarks).
 * Values round down to 1, 2, 4 or 8. */
void rf_decoder_set_max_scale_denom(rf_decoder *d, uint32_t denom);

/* What libjpeg recovered from in the decoder's last JPEG decode, one bit per enum
 * rf_recovered kind (ringfeed.h): warnings that cost no pixel, which every decode records
 * instead of failing; 0 for a clean file. */
uint32_t rf_decoder_recovered(const rf_decoder *d);
/* Replace that record: 0 for a sample whose verdict is a failure after all (the GPU decode's
 * host code found its data damaged). */
void rf_decoder_set_recovered(rf_decoder *d, uint32_t mask);

/* The next image's sync-point index entry (NULL: none), for the GPU decode's packer; its
 * member's bytes must be the ones the entry's hash names. rf_decoder_sync_result then says
 * what became of it and forgets the entry. */
enum { RF_SYNC_UNUSED = 0, RF_SYNC_USED = 1, RF_SYNC_STALE = 2 };
struct rf_sync_entry;
void rf_decoder_set_sync(rf_decoder *d, const struct rf_sync_entry *e);
uint32_t rf_decoder_sync_result(rf_decoder *d);

/* Read a JPEG's header and check its markers as every decode does (limits, the scan check),
 * then hand them to fn inside the decoder's guarded region: fn's return is returned, a libjpeg
 * error in either as rf_decode_transform reports it. For work on the whole file that needs its
 * header and no pixels (the sync-point build). */
struct jpeg_decompress_struct;
struct rf_region_buf;
typedef int (*rf_decode_header_fn)(void *ctx, const struct jpeg_decompress_struct *ci,
                                   const uint8_t *jpeg, size_t len, struct rf_region_buf *rb);
int rf_decode_header_then(rf_decoder *d, const uint8_t *jpeg, size_t len, rf_decode_header_fn fn,
                          void *ctx, rf_err *err);

/* Per-sample info reported back (for stats and tests). */
typedef struct rf_decode_info {
    uint32_t width, height;       /* of the JPEG */
    uint32_t crop_x, crop_y, crop_w, crop_h; /* chosen crop, in original pixels */
    uint32_t scale_denom;         /* DCT scaling used: 1, 2, 4 or 8 */
    uint32_t flipped;
    uint32_t region;              /* entropy-decoded only a restart-interval region */
    uint32_t imcu_rows;           /* iMCU rows libjpeg entropy-decoded (of the region, if one) */
} rf_decode_info;

/* Decode jpeg[0..len) and write height*width*3 uint8 to out (layout per t->layout; NHWC rows
 * are width*3 bytes, NCHW planes height*width bytes). All random choices come from `seed` alone.
 * Returns 0, or RF_EDECODE / RF_ELIMIT / RF_ENOMEM with text in err->msg (no file context: the
 * caller prefixes shard/member/offset). info may be NULL. */
int rf_decode_transform(rf_decoder *d, const uint8_t *jpeg, size_t len, const rf_transform *t,
                        uint64_t seed, uint8_t *out, rf_decode_info *info, rf_err *err);

/* ---- every format: JPEG, PNG, WebP ---------------------------------------------------------- */

/* What a payload's first bytes say it is (its extension is not looked at). */
enum rf_image_format { RF_IMAGE_UNKNOWN = 0, RF_IMAGE_JPEG, RF_IMAGE_PNG, RF_IMAGE_WEBP };
uint32_t rf_image_sniff(const uint8_t *data, uint64_t len);
/* 0 with *format set when data[0..len) starts with a JPEG SOI, the PNG signature or a RIFF
 * WEBP header; else RF_EDECODE "not an image (N bytes, no JPEG, PNG or WebP signature)": the
 * loader's not_jpeg skip reason and inspection's first test, in one place. */
int rf_image_magic_check(const uint8_t *data, uint64_t len, uint32_t *format, rf_err *err);
/* rf_decode_transform for any of the three formats, chosen by rf_image_sniff: the same crop
 * (rf_choose_crop), resize, flip and layout. PNG (libspng) and WebP (libwebp) decode at full
 * scale (info->scale_denom 1, region 0), 8- and 16-bit, palette and grayscale to RGB, alpha
 * dropped; a non-interlaced PNG stops after the crop's last row, a WebP decodes only the crop's
 * rectangle. Errors as rf_decode_transform's: RF_ELIMIT for an image over the limits (read
 * from the header, before any allocation) or a chunk over RF_PNG_CHUNK_MAX, RF_EDECODE for
 * damage or an unknown format. */
int rf_decode_image(rf_decoder *d, const uint8_t *data, size_t len, const rf_transform *t,
                    uint64_t seed, uint8_t *out, rf_decode_info *info, rf_err *err);
/* Validate a payload of any format as the loader would, decoding every row (for JPEG:
 * rf_decode_check); *w, *h from its header (0 on error). */
int rf_image_check(rf_decoder *d, const uint8_t *data, size_t len, uint32_t *w, uint32_t *h,
                   rf_err *err);

/* Largest PNG chunk libspng may read, and the total of the ancillary chunks it may keep
 * (libspng wants the second at least the first): a chunk announcing more, or ancillary chunks
 * (iCCP, zTXt, ...) adding up to more, is RF_ELIMIT. 64 MiB is also max_sample_bytes' default,
 * which no chunk of a sample can pass. */
#define RF_PNG_CHUNK_MAX (64u << 20)
#define RF_PNG_CACHE_MAX (64u << 20)

/* ---- placement: the sample may be decoded by another engine ---------------------------- */

struct jpeg_decompress_struct;
struct rf_axis;
struct rf_region_buf;

/* What a placement's pack() answers besides 0 and RF_ENOMEM: the CPU decodes the image. */
enum {
    RF_PLACE_DECLINED = 1, /* not for the other engine: decode it as rf_decode_transform would */
    RF_PLACE_NO_ROOM = 2,  /* no room left there: decode it at full scale, which gives the
                              other engine's exact bytes */
};

/* Where rf_decode_placed puts a sample: given to another engine (pack) or decoded here into
 * pixels(). Implemented by backend/gpujpeg_place.c for the GPU decode. */
typedef struct rf_decode_place {
    /* Called with the header read (ci, nothing more), the crop chosen and the resize planned at
     * full scale in image pixels (h, v: what rf_decode_transform uses with DCT scaling off); rb
     * is the decoder's restart-interval scratch. Returns 0 with *bytes set when the sample was
     * handed over, RF_PLACE_DECLINED, RF_PLACE_NO_ROOM or RF_ENOMEM. */
    int (*pack)(void *ctx, const struct jpeg_decompress_struct *ci, const uint8_t *jpeg,
                size_t len, const struct rf_axis *h, const struct rf_axis *v,
                const rf_transform *t, struct rf_region_buf *rb, uint32_t *bytes);
    /* The buffer for the sample's decoded pixels (height*width*3 bytes); NULL: no memory. */
    uint8_t *(*pixels)(void *ctx, size_t bytes);
    void *ctx;
} rf_decode_place;

/* Read the header, choose the crop with `seed` and plan the resize at full scale exactly as
 * rf_decode_transform does with DCT scaling off, then offer the sample to pl->pack. A sample
 * it does not take (and a CMYK one, any with RF_DECODE_DCT_IFAST / RF_DECODE_NO_FANCY set, and
 * a crop this decoder's max scale denominator lets rf_decode_transform DCT-scale) is decoded
 * right here into pl->pixels() as rf_decode_transform decodes it, with *bytes = 0: its header
 * is read once either way, and its pixels are the CPU path's whichever way it went.
 * info as for rf_decode_transform (scale_denom 1, region 1 when handed over). Returns 0 or an
 * error as rf_decode_transform does. */
int rf_decode_placed(rf_decoder *d, const uint8_t *jpeg, size_t len, const rf_transform *t,
                     uint64_t seed, const rf_decode_place *pl, uint32_t *bytes,
                     rf_decode_info *info, rf_err *err);

/* One component's plane of raw decoder output (its IDCT samples before upsampling): rows of
 * `width` bytes, `rows` of them from base; the decoder's rows past them are dropped. */
typedef struct rf_decode_plane {
    uint8_t *base;
    uint32_t width, rows;
} rf_decode_plane;

/* Decode jpeg[0..len) with libjpeg (islow IDCT, raw output) into planes[0..ncomp): the
 * hardware decoder's planar output, computed on the host (backend's rf_decode_planes). The
 * file must have ncomp (at most 3) components and be width x height, else RF_EDECODE "the
 * engine packet does not describe its JPEG". Damaged entropy-coded data decode without an
 * error (libjpeg's warnings go unreported), as the hardware decoder decodes them: what judges
 * the data is the packet's own check (gpujpeg.h, rf_gj_engine_check). Returns 0 or
 * RF_EDECODE / RF_ENOMEM with text in err->msg. */
int rf_decode_raw(rf_decoder *d, const uint8_t *jpeg, size_t len, uint32_t ncomp, uint32_t width,
                  uint32_t height, const rf_decode_plane *planes, rf_err *err);

/* Only the crop choice of rf_decode_transform (same seed, same result), for tests and planning. */
void rf_choose_crop(const rf_transform *t, uint32_t width, uint32_t height, uint64_t seed,
                    uint32_t *x, uint32_t *y, uint32_t *w, uint32_t *h, uint32_t *flip);

/* Plain full-size decode to RGB (no scaling, no crop): the reference path and the baseline for
 * benchmarks. *out is malloc'ed (caller frees). */
int rf_decode_full(rf_decoder *d, const uint8_t *jpeg, size_t len, uint8_t **out, uint32_t *width,
                   uint32_t *height, rf_err *err);

/* The EXIF orientation tag of a JPEG (1..8; 2..8 say the stored pixels are rotated or
 * mirrored), 0 when it carries none or a malformed one. The decoders do not apply it
 * (decode/exif.c says why). */
uint32_t rf_jpeg_exif_orientation(const uint8_t *jpeg, size_t len);

/* What the header says (nothing else is decoded). */
typedef struct rf_jpeg_info {
    uint32_t width, height;
    uint32_t progressive;      /* 1: progressive */
    uint32_t restart_interval; /* MCUs between restart markers; 0: none */
    uint32_t region_ready;     /* 1: rf_decode_transform can decode crops as regions */
    uint32_t recovered;        /* what libjpeg recovered from: 1 << enum rf_recovered each */
} rf_jpeg_info;

/* 0 when data[0..len) starts with a JPEG SOI marker; else RF_EDECODE "not a JPEG (N bytes, no
 * SOI marker)": the loader's not_jpeg skip reason and rf_jpeg_check's first test, in one
 * place so that both say the same. */
int rf_jpeg_soi_check(const uint8_t *data, uint64_t len, rf_err *err);
/* The SOI test itself (rf_jpeg_soi_check's, and the format sniff's in image.c): the bytes start
 * with FF D8 and there is at least one more. */
static inline int rf_jpeg_has_soi(const uint8_t *data, uint64_t len)
{
    return len >= 3 && data[0] == 0xFF && data[1] == 0xD8;
}

/* Validate jpeg[0..len) as the loader would, then more: the header against d's limits, the
 * marker structure of the whole file (what every decode checks, whatever the crop) and every
 * scanline decoded to the EOI (what a crop may or may not reach). 0 means no crop of any epoch
 * can fail on this file with these limits. info as rf_jpeg_probe's. Errors as
 * rf_decode_transform's. One scanline of scratch: no image-sized buffer. */
int rf_decode_check(rf_decoder *d, const uint8_t *jpeg, size_t len, rf_jpeg_info *info,
                    rf_err *err);

/* Read the header only (no limits, nothing checked past it). On error *info is zeroed. */
int rf_jpeg_probe(rf_decoder *d, const uint8_t *jpeg, size_t len, rf_jpeg_info *info,
                  rf_err *err);

#endif
