/* decode.h — JPEG decode with crop-during-decode, DCT scaling, resize and flip; PNG and WebP
 * through the same crop and resize.
 *
 * One rf_decoder per decode thread, reused: scratch grows to the largest image seen. Every codec
 * error and warning becomes a returned error; nothing here calls exit(). decode/ knows nothing
 * of the GPU: the GPU decode plugs in through rf_decode_place and rf_decode_raw. */
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

/* What to do to one image, as torchvision does: RANDOM is RandomResizedCrop (10 attempts,
 * then the central fallback; the box depends on the source only), CENTER is Resize(shorter ->
 * resize_shorter) + CenterCrop as one crop and one resize. LETTERBOX and CENTER_PAD resize a
 * box onto a rectangle of the output and fill the rest with pad (crop.c says where). The crop
 * is resized with an antialiased triangle filter (antialias=True bilinear). */
typedef struct rf_transform {
    uint32_t crop;          /* enum rf_crop */
    uint32_t height, width; /* output rows and columns */
    uint32_t resize_shorter;
    uint32_t layout;        /* enum rf_layout */
    float scale_min, scale_max, ratio_min, ratio_max;
    float flip_prob;
    uint8_t pad[3];         /* R, G, B of the output pixels outside the image's rectangle */
} rf_transform;

typedef struct rf_decoder rf_decoder;

/* Returns NULL on allocation failure. */
rf_decoder *rf_decoder_create(const rf_decode_limits *lim);
void rf_decoder_destroy(rf_decoder *d);

/* Cap the DCT scaling rf_decode_transform may use: 8 (default) .. 1 (full size, the loader's
 * RF_DCT_SCALING_OFF); rounds down to 1, 2, 4 or 8. */
void rf_decoder_set_max_scale_denom(rf_decoder *d, uint32_t denom);

/* What libjpeg recovered from in the last JPEG decode: one bit per enum rf_recovered
 * (ringfeed.h); 0 for a clean file. */
uint32_t rf_decoder_recovered(const rf_decoder *d);
/* Replace that record (0 for a sample the GPU decode's host check found damaged after all). */
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

typedef struct rf_decode_info {
    uint32_t width, height;       /* of the JPEG */
    uint32_t crop_x, crop_y, crop_w, crop_h; /* chosen crop, in original pixels */
    uint32_t scale_denom;         /* DCT scaling used: 1, 2, 4 or 8 */
    uint32_t flipped;
    float place[4];               /* scale_x, scale_y, pad_x, pad_y: rf_batch.letterbox's row */
    uint32_t out_w, out_h;        /* the sample's output: t's, or NATIVE's own size */
    uint32_t region;              /* entropy-decoded only a restart-interval region */
    uint32_t imcu_rows;           /* iMCU rows libjpeg entropy-decoded (of the region, if one) */
} rf_decode_info;

/* Decode jpeg[0..len) and write height*width*3 uint8 to out in t->layout. All random choices
 * come from `seed` alone. Returns 0, or RF_EDECODE / RF_ELIMIT / RF_ENOMEM with text in
 * err->msg (the caller prefixes shard/member/offset). info may be NULL. */
int rf_decode_transform(rf_decoder *d, const uint8_t *jpeg, size_t len, const rf_transform *t,
                        uint64_t seed, uint8_t *out, rf_decode_info *info, rf_err *err);

/* ---- every format: JPEG, PNG, WebP ---- */

/* What a payload's first bytes say it is (its extension is not looked at). */
enum rf_image_format { RF_IMAGE_UNKNOWN = 0, RF_IMAGE_JPEG, RF_IMAGE_PNG, RF_IMAGE_WEBP };
uint32_t rf_image_sniff(const uint8_t *data, uint64_t len);
/* 0 with *format set when data starts with a JPEG SOI, the PNG signature or a RIFF WEBP
 * header; else RF_EDECODE "not an image (...)", the loader's not_jpeg skip reason. */
int rf_image_magic_check(const uint8_t *data, uint64_t len, uint32_t *format, rf_err *err);
/* rf_decode_transform for any of the three formats (by rf_image_sniff): the same crop, resize,
 * flip and layout. PNG and WebP decode at full scale (scale_denom 1, region 0) to RGB, alpha
 * dropped. RF_ELIMIT for an image over the limits (checked from the header, before any
 * allocation) or a chunk over RF_PNG_CHUNK_MAX; RF_EDECODE for damage or an unknown format. */
int rf_decode_image(rf_decoder *d, const uint8_t *data, size_t len, const rf_transform *t,
                    uint64_t seed, uint8_t *out, rf_decode_info *info, rf_err *err);
/* Validate a payload of any format as the loader would, decoding every row; *w, *h from its
 * header (0 on error). */
int rf_image_check(rf_decoder *d, const uint8_t *data, size_t len, uint32_t *w, uint32_t *h,
                   rf_err *err);

/* Largest PNG chunk libspng may read, and the total of ancillary chunks it may keep (libspng
 * wants the second at least the first); more is RF_ELIMIT. 64 MiB is max_sample_bytes'
 * default, which no chunk of a sample can pass anyway. */
#define RF_PNG_CHUNK_MAX (64u << 20)
#define RF_PNG_CACHE_MAX (64u << 20)

/* ---- placement: the sample may be decoded by another engine ---- */

struct jpeg_decompress_struct;
struct rf_axis;
struct rf_region_buf;

/* What a placement's pack() answers besides 0 and RF_ENOMEM: the CPU decodes the image. */
enum {
    RF_PLACE_DECLINED = 1, /* not for the other engine: decode it as rf_decode_transform would */
    RF_PLACE_NO_ROOM = 2,  /* no room left there: decode it at full scale, which gives the
                              other engine's exact bytes */
};

/* Where the resized rectangle of a sample handed to another engine lands: the sample's output
 * is canvas_w x canvas_h (t's width x height, or NATIVE's own size packed from the sample's
 * start), the rectangle (the axes' n_out columns and rows) has its top-left at column x and
 * row y as delivered (after any flip), and every other pixel is the transform's pad. */
typedef struct rf_out_rect {
    uint32_t x, y, canvas_w, canvas_h;
} rf_out_rect;

/* One output a handed-over image is resized onto: the full-scale plans h and v (relative to
 * the image's top-left pixel) onto rectangle r of a canvas that starts `at` bytes into the
 * sample's output (a multi-crop view's offset; 0 for the image). */
typedef struct rf_place_out {
    const struct rf_axis *h, *v;
    rf_out_rect r;
    uint64_t at;
} rf_place_out;

/* Where rf_decode_placed puts a sample: handed to another engine (pack) or decoded here into
 * pixels(). backend/gpujpeg_place.c implements it. */
typedef struct rf_decode_place {
    /* Called with the header read, the crops chosen and the resize planned at full scale onto
     * outs[0..n) (one, or each multi-crop view); rb is the decoder's restart-interval scratch.
     * Returns 0 with *bytes set when the sample was handed over, RF_PLACE_DECLINED,
     * RF_PLACE_NO_ROOM or RF_ENOMEM. */
    int (*pack)(void *ctx, const struct jpeg_decompress_struct *ci, const uint8_t *jpeg,
                size_t len, const rf_place_out *outs, uint32_t n, const rf_transform *t,
                struct rf_region_buf *rb, uint32_t *bytes);
    /* The buffer for the sample's decoded pixels (height*width*3 bytes, or the views' bytes);
     * NULL: no memory. */
    uint8_t *(*pixels)(void *ctx, size_t bytes);
    void *ctx;
} rf_decode_place;

/* Read the header, choose the crop and plan the resize at full scale, then offer the sample to
 * pl->pack. One it does not take (or that is CMYK, or could be DCT-scaled) is decoded here into
 * pl->pixels() with *bytes = 0: the pixels are the CPU path's either way. info as
 * rf_decode_transform's (region 1 when handed over). With v (multi-crop views, n > 0) every
 * view is offered in one packet and info holds v->n entries, as rf_decode_views'. */
struct rf_views;
int rf_decode_placed(rf_decoder *d, const uint8_t *jpeg, size_t len, const rf_transform *t,
                     const struct rf_views *v, uint64_t seed, const rf_decode_place *pl,
                     uint32_t *bytes, rf_decode_info *info, rf_err *err);

/* One component's plane of raw decoder output (its IDCT samples before upsampling): rows of
 * `width` bytes, `rows` of them from base; the decoder's rows past them are dropped. */
typedef struct rf_decode_plane {
    uint8_t *base;
    uint32_t width, rows;
} rf_decode_plane;

/* Decode with libjpeg (islow IDCT, raw output) into planes[0..ncomp): the hardware decoder's
 * planar output, on the host. The file must be ncomp (≤ 3) components of width x height, else
 * RF_EDECODE. Damaged entropy data decode without an error, as on the hardware
 * (rf_gj_engine_check judges the data). */
int rf_decode_raw(rf_decoder *d, const uint8_t *jpeg, size_t len, uint32_t ncomp, uint32_t width,
                  uint32_t height, const rf_decode_plane *planes, rf_err *err);

/* rf_decode_image with the box {x, y, w, h} (source pixels) and flip given instead of drawn
 * from a seed: a crop reported by a batch decoded again, as the loader decodes it (the same
 * DCT scale rule and cap, region and resize; the output rectangle the transform gives a seed
 * of 0, the whole output for RANDOM and CENTER). */
int rf_decode_image_box(rf_decoder *d, const uint8_t *data, size_t len, const rf_transform *t,
                        double x, double y, double w, double h, uint32_t flip, uint8_t *out,
                        rf_decode_info *info, rf_err *err);

/* Only the crop choice of rf_decode_transform (same seed, same result), for tests and planning. */
void rf_choose_crop(const rf_transform *t, uint32_t width, uint32_t height, uint64_t seed,
                    uint32_t *x, uint32_t *y, uint32_t *w, uint32_t *h, uint32_t *flip);

/* The geometry a sample's image is given, for what belongs to it (a mask, boxes, points):
 * the source box (fractional, in the image's full-resolution pixels, whatever DCT scale
 * decoded it), the rectangle of the output it is resized onto, and the flip. A pure function
 * of the transform, the image's size and the sample's seed, like the image's own crop. A
 * source point p maps to out + (p - box) * out_size / box_size, mirrored inside the output
 * rectangle when flipped; an output pixel's centre maps back the same way (what a nearest
 * resize samples). */
typedef struct rf_geometry {
    double x, y, w, h;                   /* the source box */
    uint32_t out_x, out_y, out_w, out_h; /* where it lands in the output */
    uint32_t out_width, out_height;      /* the output (t's, or NATIVE's own size) */
    uint32_t flip;                       /* mirrored left-right after the resize */
} rf_geometry;
void rf_sample_geometry(const rf_transform *t, uint32_t width, uint32_t height, uint64_t seed,
                        rf_geometry *g);
/* A source point (continuous coordinates: pixel i spans [i, i + 1)) in output coordinates. */
void rf_geometry_to_output(const rf_geometry *g, double sx, double sy, double *ox, double *oy);
/* The source pixel an output pixel (ox, oy) of the rectangle samples under nearest resizing
 * (PIL's NEAREST: the source pixel under the output pixel's centre, as rf_nearest walks to
 * it), clamped to the image. */
void rf_geometry_nearest(const rf_geometry *g, uint32_t width, uint32_t height, uint32_t ox,
                         uint32_t oy, uint32_t *sx, uint32_t *sy);

/* PIL's NEAREST along one axis, bit for bit (Pillow's ImagingScaleAffine, which
 * Image.resize(..., NEAREST, box=(box, .., box + size, ..)) runs): output i samples source
 * floor(box + step / 2 + i steps), the steps added one at a time in double with step =
 * ((box + size) - box) / n, clamped to [0, extent). Its roundings are PIL's: where a centre
 * lands on a pixel edge the sum may fall just short of it, and then so does this. Walk the
 * outputs in order: rf_nearest_start, then rf_nearest_next once per output. */
typedef struct rf_nearest {
    double v, step;
    uint32_t extent;
} rf_nearest;
void rf_nearest_start(rf_nearest *s, double box, double size, uint32_t n, uint32_t extent);
uint32_t rf_nearest_next(rf_nearest *s);

/* ---- segmentation masks (mask.c) ---- */

/* A mask PNG decoded: one value per pixel, row-major, 8-bit (gray, palette indices: px8) or
 * 16-bit (gray: px16, host-endian). Points into the decoder's scratch, valid until its next
 * mask. */
typedef struct rf_mask {
    const uint8_t *px8;
    const uint16_t *px16;
    uint32_t width, height;
    uint32_t bits;         /* 8 or 16: which of px8 and px16 */
    uint32_t color_type;   /* the IHDR's: 0 gray, 3 palette */
    uint32_t bit_depth;    /* the IHDR's */
} rf_mask;
/* Decode png[0..len) as a mask: 8- or 16-bit gray, or palette of 1, 2, 4 or 8 bits (its
 * indices). wide: 16-bit masks are accepted (the caller delivers int32). out_w: the widest
 * output rectangle it will be resampled to (its scratch is reserved here, so that the
 * resample cannot fail). RF_EFORMAT for what is no mask (not a PNG, RGB, RGBA, gray with
 * alpha, gray under 8 bits, 16-bit when !wide), the message saying what it is and what a mask
 * may be; RF_ELIMIT over the decoder's limits (before any allocation); RF_EDECODE for damage;
 * RF_ENOMEM. */
int rf_mask_decode(rf_decoder *d, const uint8_t *png, size_t len, int wide, uint32_t out_w,
                   rf_mask *m, rf_err *err);
/* The mask resampled with the geometry g of its image (rf_sample_geometry on m's size, the
 * rectangle at most rf_mask_decode's out_w wide): g->out_height x g->out_width values of
 * dtype (RF_DTYPE_UINT8 or RF_DTYPE_INT32) into out, each output pixel of the rectangle the
 * source pixel rf_geometry_nearest gives, every other pixel `fill`. */
void rf_mask_resample(rf_decoder *d, const rf_mask *m, const rf_geometry *g, uint32_t dtype,
                      uint32_t fill, void *out);
/* The full size an image's header declares (JPEG, PNG or WebP, by its bytes), without
 * decoding it: for what must agree with the image before any engine takes it. An error
 * (a header that does not parse) is the decoder's; the image's decode would fail too. */
int rf_image_size(rf_decoder *d, const uint8_t *data, size_t len, uint32_t *w, uint32_t *h,
                  rf_err *err);

/* The size an image's header declares, from its first len bytes, without a decoder: 0 with *w
 * and *h set; 1 when the bytes end before the size (a JPEG's frame header may follow tens of
 * KiB of EXIF: read more); -1 when they are no JPEG, PNG or WebP, or their header does not
 * parse. For the size buckets' pass over every image at create. */
int rf_image_peek_size(const uint8_t *data, size_t len, uint32_t *w, uint32_t *h);

/* ---- multi-crop: K views of one image, decoded once (views.c) ---- */

/* Views per sample (rf_config.multi_crop), and the longest text the setting may hold. */
#define RF_VIEWS_MAX 64
#define RF_VIEWS_TEXT_MAX 1024

/* The views every sample is cut into, in order: view k is RandomResizedCrop (or the loader's
 * CENTER crop) to height[k] x width[k] with its group's scale range, the loader's ratio range
 * and flip probability; its bytes start at offset[k] of the sample's row (uint8, in the
 * decode layout: sample-major, the views one after another). */
typedef struct rf_views {
    uint32_t n, ngroups;
    uint32_t height[RF_VIEWS_MAX], width[RF_VIEWS_MAX];
    float scale_min[RF_VIEWS_MAX], scale_max[RF_VIEWS_MAX];
    uint64_t offset[RF_VIEWS_MAX];
    uint64_t bytes; /* one sample's views: sum of height x width x 3 */
} rf_views;

/* Parse "COUNTxSIZE[xWIDTH][:SMIN-SMAX],..." ("2x224:0.4-1,6x96:0.05-0.4": two 224 x 224 views
 * at scale 0.4..1, six 96 x 96 at 0.05..0.4; "1x160x128" one view 160 rows by 128 columns at
 * the loader's scale range scale_min..scale_max). NULL or "" gives n = 0 (off). RF_EINVAL
 * naming the group and what is wrong: a count of 0 or a total over RF_VIEWS_MAX, a side
 * outside 1..8192, a scale range not within (0, 1] with min <= max, other text. */
int rf_views_parse(const char *text, float scale_min, float scale_max, rf_views *v,
                   rf_err *err);
/* View k's transform: base (the loader's) with the view's size and scale range. */
void rf_view_transform(const rf_transform *base, const rf_views *v, uint32_t k,
                       rf_transform *t);
/* View k's seed: a function of the sample's augmentation seed and k alone. */
uint64_t rf_view_seed(uint64_t seed, uint32_t k);

/* Decode data[0..len) once and cut every view of v from it into out (v->bytes: view k at
 * out + v->offset[k], height[k] x width[k] x 3 uint8 in base->layout), each view's box, flip
 * and output rectangle the ones rf_sample_geometry gives for its own transform and seed (a
 * letterbox view padded with base->pad as an image is). A JPEG is decoded at the smallest DCT scale (1/8,
 * 1/4, 1/2 or full, capped as rf_decoder_set_max_scale_denom says) at which every view's crop
 * still has at least its output's rows and columns, over the union of what the views' filters
 * read; PNG and WebP at full scale. View k's pixels are those rf_decode_image gives for the
 * view's transform and seed with the decoder capped at that scale. infos: v->n entries (each
 * view's box, flip, scale and whether a region decode served it), or NULL. Errors as
 * rf_decode_image's. */
int rf_decode_views(rf_decoder *d, const uint8_t *data, size_t len, const rf_transform *base,
                    const rf_views *v, uint64_t seed, uint8_t *out, rf_decode_info *infos,
                    rf_err *err);

/* One sample: rf_decode_views when v has views (info: v->n entries), else rf_decode_image
 * (info: one entry). */
int rf_decode_sample(rf_decoder *d, const uint8_t *data, size_t len, const rf_transform *t,
                     const rf_views *v, uint64_t seed, uint8_t *out, rf_decode_info *info,
                     rf_err *err);

/* Plain full-size decode to RGB: the reference path. *out is malloc'ed (caller frees). */
int rf_decode_full(rf_decoder *d, const uint8_t *jpeg, size_t len, uint8_t **out, uint32_t *width,
                   uint32_t *height, rf_err *err);

/* The EXIF orientation tag of a JPEG (1..8), 0 when absent or malformed. Not applied by the
 * decoders (exif.c says why). */
uint32_t rf_jpeg_exif_orientation(const uint8_t *jpeg, size_t len);

/* What the header says (nothing else is decoded). */
typedef struct rf_jpeg_info {
    uint32_t width, height;
    uint32_t progressive;      /* 1: progressive */
    uint32_t restart_interval; /* MCUs between restart markers; 0: none */
    uint32_t region_ready;     /* 1: rf_decode_transform can decode crops as regions */
    uint32_t recovered;        /* what libjpeg recovered from: 1 << enum rf_recovered each */
} rf_jpeg_info;

/* 0 when data starts with a JPEG SOI marker; else RF_EDECODE "not a JPEG (...)": the loader's
 * not_jpeg skip reason and rf_jpeg_check's first test. */
int rf_jpeg_soi_check(const uint8_t *data, uint64_t len, rf_err *err);
/* FF D8 and at least one more byte. */
static inline int rf_jpeg_has_soi(const uint8_t *data, uint64_t len)
{
    return len >= 3 && data[0] == 0xFF && data[1] == 0xD8;
}

/* Validate as the loader would, and decode every scanline to the EOI: 0 means no crop of any
 * epoch can fail on this file with these limits. One scanline of scratch. */
int rf_decode_check(rf_decoder *d, const uint8_t *jpeg, size_t len, rf_jpeg_info *info,
                    rf_err *err);

/* Read the header only (no limits, nothing checked past it). On error *info is zeroed. */
int rf_jpeg_probe(rf_decoder *d, const uint8_t *jpeg, size_t len, rf_jpeg_info *info,
                  rf_err *err);

#endif
