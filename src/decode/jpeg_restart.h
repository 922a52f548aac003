/* jpeg_restart.h — restart markers: written losslessly by the packer, used by the decoder to
 * entropy-decode only the MCUs a crop needs.
 *
 * A baseline JPEG is one Huffman bit stream: to reach row 300 a decoder must decode rows 0-299,
 * and to reach column 200 every column left of it, because each block's DC value is coded as a
 * difference from the previous one. Restart markers (RSTn, every `restart_interval` MCUs)
 * byte-align the stream and reset those DC predictors, so every interval decodes on its own.
 * When the interval divides the MCUs of a row, a rectangle of MCUs whose columns start and end
 * on interval boundaries is a list of whole intervals: copying them behind the original headers
 * (with the frame size patched and the markers renumbered) gives a smaller, valid JPEG whose
 * pixels are the original's, except in the outermost chroma-upsampling row/column, which the
 * caller keeps out of its crop. That is what rf_jpeg_region builds. */
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

/* After jpeg_read_header: fill *g from the decompressor (restart 0 when the file has none) and
 * return 1 when rf_jpeg_region can cut the file: one interleaved Huffman scan (baseline or
 * extended) whose restart interval divides the MCU row. */
int rf_jpeg_geom_read(const struct jpeg_decompress_struct *ci, rf_jpeg_geom *g);

/* MCUs per row and MCU rows of g. */
uint32_t rf_jpeg_mcu_cols(const rf_jpeg_geom *g);
uint32_t rf_jpeg_mcu_rows(const rf_jpeg_geom *g);

/* The restart interval the packer writes for an image mcu_cols MCUs wide: the smallest
 * divisor of the row from RF_RESTART_MIN_MCUS to RF_RESTART_MAX_MCUS, else 1. Always divides
 * mcu_cols. Measured (tools/internal/decode_bench.c --restart, ~100 KB 4:2:0 photos, RandomResizedCrop
 * 224, one core): plain 1,223 img/s; interval 1: 1,578 (files +1.9%); this choice: 1,561
 * (+0.8%); one interval per MCU row: ~1,330 (+0.06%, rows only, no column skipping). */
#define RF_RESTART_MIN_MCUS 2u
#define RF_RESTART_MAX_MCUS 8u
uint32_t rf_jpeg_restart_for_row(uint32_t mcu_cols);

/* The MCUs [c0,c1) x [r0,r1) of g that hold pixels [x0,x1) x [y0,y1) of the image as decoded at
 * DCT scale num/8 (out_w x out_h pixels), plus one pixel each side (fancy upsampling reads one
 * chroma sample past a pixel), columns widened to whole restart intervals: the region both the
 * CPU region decode and a GPU packet take. */
void rf_jpeg_region_cover(const rf_jpeg_geom *g, uint32_t num, uint32_t out_w, uint32_t out_h,
                          int32_t x0, int32_t x1, int32_t y0, int32_t y1, uint32_t *c0,
                          uint32_t *c1, uint32_t *r0, uint32_t *r1);

/* The MCU rows of a single-scan file that libjpeg entropy-decodes when rows up to `last`
 * (exclusive) are read at full scale: the row holding row last - 1, and the next one too when
 * `context` (fancy h2v2 upsampling: 4:2:0) and that row is in its MCU row's last row group,
 * which libjpeg-turbo's main controller emits only after reading the rows below it. What the
 * CPU path checks of a plain file's Huffman data (tests/test_decode.c compares it with
 * libjpeg's own count); the GPU paths walk as far, so that their verdicts are its verdicts. */
uint32_t rf_jpeg_rows_read(const rf_jpeg_geom *g, int context, uint32_t last);

/* Scratch owned by one decoder: the region JPEG and the interval table, grown once. */
typedef struct rf_region_buf {
    uint8_t *jpeg;
    size_t len, cap;
    uint32_t *span; /* start, end byte offsets of each interval scanned so far */
    uint64_t span_cap;
    /* Set by rf_jpeg_scan_check for the image it checked: span[] already holds all `nspans`
     * intervals of `of` (whose SOF and first entropy byte are at sof and data), so
     * rf_jpeg_spans need not walk the file again. The decoder clears `of` for every image. */
    const uint8_t *of;
    uint64_t nspans;
    size_t sof, data;
    /* Also set by rf_jpeg_scan_check for the image it checked (`eoi_of`), with or without
     * restart markers: the offset just past its EOI. The bytes after it are a trailer (camera
     * data, an appended video), which the hardware decoder is not given. And where the scan's
     * entropy-coded data end (the marker after them, not RSTn): the engines' check reads the
     * data up to there (gpujpeg.h). Cleared with `of`. */
    const uint8_t *eoi_of;
    size_t eoi_end, data_end;
    /* The GPU decode's walker state for files without restart markers (its destuffed bytes,
     * segments and table cache: backend/gpujpeg_walk.c), one malloc'ed block and what it
     * points to, owned there; rf_region_buf_free calls `walk_free` on it. */
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

/* The marker segments before a JPEG's scan, one at a time, stepped as libjpeg steps them: from
 * *pos (2, just after the SOI), bytes that are no marker, fill bytes and markers without
 * parameters (RSTn, TEM) skipped, the next segment's marker in *m and the offset of its 0xFF
 * in *at (its length field at *at + 2, its payload at *at + 4); *pos moves past it (past the
 * length field alone when the length is under 2, which libjpeg accepts of a comment or APPn
 * segment). Returns 0; 1 when no whole segment follows (the bytes end, or SOI or EOI comes
 * first). The walks of the header (the scan check, the engines' baseline test, the EXIF
 * reader) all step with it. */
int rf_jpeg_segment(const uint8_t *j, size_t len, size_t *pos, uint32_t *m, size_t *at);

/* 1 for a frame header marker (SOF0..SOF15 but DHT, JPG and DAC, which share the range). */
static inline int rf_jpeg_is_sof(uint32_t m)
{
    return m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
}

/* The offset of the first entropy-coded byte of a single-scan file (the end of its first SOS
 * segment) in *data. Returns 0; 1 when the marker segments up to the scan do not parse. */
int rf_jpeg_scan_data(const uint8_t *jpeg, size_t len, size_t *data);

/* Find the entropy-coded bytes of restart intervals 0..last of jpeg[0..len): interval k is
 * [b->span[2k], b->span[2k+1]) (its RSTn marker and fill bytes excluded). *sof and *data: the
 * offsets of the SOF0/SOF1 segment and of the first entropy-coded byte. One memchr pass over
 * the bytes up to the end of interval `last`. Returns 0; 1 when the file does not have that
 * shape (see rf_jpeg_region); RF_ENOMEM. */
int rf_jpeg_spans(const uint8_t *jpeg, size_t len, const rf_jpeg_geom *g, uint64_t last,
                  rf_region_buf *b, size_t *sof, size_t *data);

/* The marker structure of a single-scan JPEG's entropy-coded data, over the whole file, cheap
 * enough for every sample (one memchr pass): after the SOS header, only stuffed 0xFF00 bytes,
 * fill bytes and, when restart_interval > 0, RST0..7 in sequence, exactly one per interval
 * boundary of the `mcus` MCUs; then optionally whole table/misc segments (DHT, DQT, DRI, COM,
 * APPn), which libjpeg accepts after the last scan; then EOI. Bytes after the EOI (camera
 * trailers) are not looked at. Finds, whatever the crop: a marker that does not belong in a
 * scan (a planted or overwritten marker), restart markers out of sequence or too few (data cut
 * out or an EOI inside the data of a restart-marked file), and a missing EOI (a file cut
 * short). What it cannot see is damage to the Huffman bits themselves, which shows only where
 * they are decoded. With b != NULL and restart_interval > 0 it records the intervals in b for
 * rf_jpeg_spans; with b != NULL it records where the EOI ends (b->eoi_of, b->eoi_end).
 * Returns 0, or RF_EDECODE with the byte offset in err; RF_ENOMEM. */
int rf_jpeg_scan_check(const uint8_t *jpeg, size_t len, uint32_t restart_interval,
                       uint64_t mcus, rf_region_buf *b, rf_err *err);

/* Build in b->jpeg the JPEG of MCU columns [c0,c1) and rows [r0,r1) of jpeg[0..len).
 * Requires a single-scan Huffman baseline/extended file (the caller checks that with libjpeg)
 * whose restart interval divides the row, c0 and c1 multiples of it (c1 may be the row's end).
 * Returns 0; 1 when the file's bytes do not have the expected shape (no SOF0/1 before SOS, a
 * marker out of sequence, too few intervals: the caller decodes the whole file, whose own
 * errors then name the problem); RF_ENOMEM. Never reads outside jpeg[0..len). */
int rf_jpeg_region(const uint8_t *jpeg, size_t len, const rf_jpeg_geom *g, uint32_t c0,
                   uint32_t c1, uint32_t r0, uint32_t r1, rf_region_buf *b);

/* Rewrite a JPEG losslessly (same quantized DCT coefficients, so the same decoded pixels) as
 * a single-scan baseline file with a restart marker every `interval` MCUs (0: the packer's
 * choice, rf_jpeg_restart_for_row). optimize: optimal Huffman tables (smaller file) instead of
 * the input's. APPn (other than JFIF/Adobe, which libjpeg writes itself) and COM markers are
 * kept. *out is malloc'ed. RF_JPEG_KEEP, with nothing written and err saying why, for a
 * progressive file whose scans leave coefficients incomplete: libjpeg smooths those as it
 * decodes and a rewrite would lose that, changing pixels. Errors: RF_EDECODE (input not a
 * decodable JPEG), RF_ENOMEM. */
#define RF_JPEG_KEEP 1
int rf_jpeg_restart_transcode(const uint8_t *jpeg, size_t len, uint32_t interval, int optimize,
                              uint8_t **out, size_t *out_len, rf_err *err);

#endif
