/* jpeg_restart.h — restart markers: written losslessly by the packer, used by the decoder to
 * entropy-decode only the MCUs a crop needs.
 *
 * A baseline scan is one Huffman bit stream with DC values coded as differences, so reaching
 * row 300 means decoding rows 0-299. Restart markers reset the DC predictors at byte-aligned
 * points, so each interval decodes on its own; when the interval divides the MCU row, a
 * rectangle of interval-aligned MCUs copied behind the original headers is a smaller valid JPEG
 * with the original's pixels (but in the outermost chroma row/column, kept out of the crop). */
#ifndef RF_JPEG_RESTART_H
#define RF_JPEG_RESTART_H

#include <stddef.h>
#include <stdint.h>

#include "base/common.h"

/* The scan geometry the caller read from libjpeg's header parse. */
typedef struct rf_jpeg_geom {
    uint32_t width, height; /* image, pixels */
    uint32_t mcu_w, mcu_h;  /* one MCU, pixels */
    uint32_t restart;       /* MCUs per restart interval (DRI); 0 = none */
} rf_jpeg_geom;

struct jpeg_decompress_struct;

/* After jpeg_read_header: fill *g (restart 0 when none) and return 1 when rf_jpeg_region can cut
 * the file: one interleaved Huffman scan whose restart interval divides the MCU row. */
int rf_jpeg_geom_read(const struct jpeg_decompress_struct *ci, rf_jpeg_geom *g);

/* MCUs per row and MCU rows of g. */
uint32_t rf_jpeg_mcu_cols(const rf_jpeg_geom *g);
uint32_t rf_jpeg_mcu_rows(const rf_jpeg_geom *g);

/* The restart interval the packer writes for a row of mcu_cols MCUs: its smallest divisor from
 * RF_RESTART_MIN_MCUS to RF_RESTART_MAX_MCUS, else 1 (docs/tuning.md, "Restart markers"). */
#define RF_RESTART_MIN_MCUS 2u
#define RF_RESTART_MAX_MCUS 8u
uint32_t rf_jpeg_restart_for_row(uint32_t mcu_cols);

/* The MCUs [c0,c1) x [r0,r1) holding pixels [x0,x1) x [y0,y1) of the image decoded at scale
 * num/8 (out_w x out_h), plus one pixel each side for fancy upsampling, columns widened to
 * whole intervals: the region both the CPU region decode and a GPU packet take. */
void rf_jpeg_region_cover(const rf_jpeg_geom *g, uint32_t num, uint32_t out_w, uint32_t out_h,
                          int32_t x0, int32_t x1, int32_t y0, int32_t y1, uint32_t *c0,
                          uint32_t *c1, uint32_t *r0, uint32_t *r1);

/* The MCU rows libjpeg entropy-decodes from a single-scan file when rows up to `last` are read
 * at full scale: through the row holding last - 1, and one more when `context` (h2v2 fancy
 * upsampling) needs the rows below it. The GPU paths walk as far, so their verdicts match. */
uint32_t rf_jpeg_rows_read(const rf_jpeg_geom *g, int context, uint32_t last);

/* Scratch owned by one decoder: the region JPEG and the interval table, grown once. */
typedef struct rf_region_buf {
    uint8_t *jpeg;
    size_t len, cap;
    uint32_t *span; /* start, end byte offsets of each interval scanned so far */
    uint64_t span_cap;
    /* Set by rf_jpeg_scan_check for image `of`: span[] holds all `nspans` intervals (SOF and
     * first entropy byte at sof and data), so rf_jpeg_spans need not walk it again. The
     * decoder clears `of` for every image. */
    const uint8_t *of;
    uint64_t nspans;
    size_t sof, data;
    /* Also set by rf_jpeg_scan_check (`eoi_of`): the offset just past the EOI (what follows is
     * a trailer the hardware decoder is not given) and where the entropy-coded data end (the
     * engines' check reads up to there). Cleared with `of`. */
    const uint8_t *eoi_of;
    size_t eoi_end, data_end;
    /* The GPU walker's state for files without restart markers (backend/gpujpeg_walk.c owns
     * it); rf_region_buf_free calls `walk_free` on it. */
    void *walk;
    void (*walk_free)(void *walk);
    /* The image's sync-point index entry (loaders/sync_index.h), its member's bytes already
     * checked against its hash; the packer starts the crop's rows from its points instead of
     * walking (RF_SYNC_USED), or finds it does not fit the file (RF_SYNC_STALE). Set and read
     * for one image through rf_decoder_set_sync and rf_decoder_sync_result. */
    const struct rf_sync_entry *sync;
    uint32_t sync_result;
} rf_region_buf;


void rf_region_buf_free(rf_region_buf *b);

/* Step the marker segments before a JPEG's scan as libjpeg does, from *pos (2, after the SOI):
 * junk, fill bytes and RSTn/TEM skipped; the marker in *m, its 0xFF at *at (length at *at + 2,
 * payload at *at + 4); *pos past it (past the length alone when under 2, which libjpeg accepts
 * of COM and APPn). Returns 0; 1 when no whole segment follows. */
int rf_jpeg_segment(const uint8_t *j, size_t len, size_t *pos, uint32_t *m, size_t *at);

/* 1 for a frame header marker (SOF0..SOF15 but DHT, JPG and DAC, which share the range). */
static inline int rf_jpeg_is_sof(uint32_t m)
{
    return m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
}

/* The offset of the first entropy-coded byte of a single-scan file (the end of its first SOS
 * segment) in *data. Returns 0; 1 when the marker segments up to the scan do not parse. */
int rf_jpeg_scan_data(const uint8_t *jpeg, size_t len, size_t *data);

/* Find the entropy-coded bytes of restart intervals 0..last: interval k is
 * [b->span[2k], b->span[2k+1]). *sof and *data: offsets of the SOF0/SOF1 segment and of the
 * first entropy-coded byte. Returns 0; 1 when the file does not have that shape; RF_ENOMEM. */
int rf_jpeg_spans(const uint8_t *jpeg, size_t len, const rf_jpeg_geom *g, uint64_t last,
                  rf_region_buf *b, size_t *sof, size_t *data);

/* Check the marker structure of a single-scan JPEG's entropy-coded data, whole file, one memchr
 * pass: only stuffed 0xFF00, fill bytes and, with restart_interval > 0, RST0..7 in sequence at
 * each interval boundary of the `mcus` MCUs; then segments libjpeg accepts after the last scan;
 * then EOI. Huffman damage shows only where decoded. With b, records the intervals and where
 * the EOI ends. Returns 0, RF_EDECODE with the byte offset, or RF_ENOMEM. */
int rf_jpeg_scan_check(const uint8_t *jpeg, size_t len, uint32_t restart_interval,
                       uint64_t mcus, rf_region_buf *b, rf_err *err);

/* Build in b->jpeg the JPEG of MCU columns [c0,c1) and rows [r0,r1) of a file rf_jpeg_geom_read
 * accepted, c0 and c1 multiples of the interval (c1 may be the row's end). Returns 0; 1 when the
 * bytes do not have the expected shape (the caller decodes the whole file); RF_ENOMEM. Never
 * reads outside jpeg[0..len). */
int rf_jpeg_region(const uint8_t *jpeg, size_t len, const rf_jpeg_geom *g, uint32_t c0,
                   uint32_t c1, uint32_t r0, uint32_t r1, rf_region_buf *b);

/* Rewrite a JPEG losslessly as a single-scan baseline file with a restart marker every
 * `interval` MCUs (0: rf_jpeg_restart_for_row); optimize: optimal Huffman tables. APPn and COM
 * are kept. *out is malloc'ed. RF_JPEG_KEEP (nothing written, err says why) for a progressive
 * file with incomplete coefficients, which libjpeg smooths and a rewrite would not. Errors:
 * RF_EDECODE, RF_ENOMEM. */
#define RF_JPEG_KEEP 1
int rf_jpeg_restart_transcode(const uint8_t *jpeg, size_t len, uint32_t interval, int optimize,
                              uint8_t **out, size_t *out_len, rf_err *err);

#endif
