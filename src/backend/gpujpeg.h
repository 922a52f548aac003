/* gpujpeg.h — JPEG decode on the GPU: the packet a decode thread writes into the pinned slot
 * instead of pixels, and the drivers that turn packets into pixels (docs/gpu-decode.md, "How
 * it works").
 *
 * Restart packets carry the restart intervals a crop needs; plain packets (no markers) carry
 * the region rows' destuffed bytes and the segments the CPU walker (gpujpeg_walk.c) found. The
 * kernels mirror libjpeg-turbo's defaults and ringfeed's resize in integer code
 * (gpujpeg_core.h), so a GPU-decoded sample is byte-for-byte the CPU path's with DCT scaling
 * off. Eligible: single-scan 8-bit Huffman files, restart interval dividing the MCU row or
 * none, gray or YCbCr 4:4:4/4:2:2/4:2:0, scratch within RF_GJ_SCRATCH; anything else, and a
 * packet the slot has no room for, is decoded on the CPU in the same batch. */
#ifndef RF_GPUJPEG_H
#define RF_GPUJPEG_H

#include <stddef.h>
#include <stdint.h>

#include "decode/decode.h"

#define RF_GJ_MAGIC 0x504a4652u /* "RFJP" */
#define RF_GJ_LOOKUP_BITS 9
/* Device scratch of one sample at most (the region's planes and the vertically resized rows):
 * 8 MiB holds a 5-megapixel 4:2:0 image. The device pool reserves RF_GJ_SCRATCH_RESERVE a
 * sample and grows once for a batch of larger ones. */
#define RF_GJ_SCRATCH (8u << 20)
#define RF_GJ_SCRATCH_RESERVE (1u << 20)
/* Slot bytes per sample on average when packets go to the device, shared by the slot's packets
 * in the order written, so small outputs still carry the intervals of ~100 KB photos. */
#define RF_GJ_AREA (192u << 10)
/* Packets start on this boundary in the slot (the decoder reads aligned 8-byte words). */
#define RF_GJ_ALIGN 64u
/* The most samples a GPU-path batch may have: one CUDA grid row per sample (gridDim.y). */
#define RF_GJ_MAX_BATCH 65535u

/* A Huffman table as the decoder walks it: codes of up to RF_GJ_LOOKUP_BITS bits by one
 * lookup, longer ones by the canonical-code comparison libjpeg's slow path uses. */
typedef struct rf_gj_huff {
    uint16_t look[1 << RF_GJ_LOOKUP_BITS]; /* (length << 8) | symbol; 0: code is longer */
    int32_t maxcode[18];  /* largest code of each length (-1: none); [17] is a sentinel */
    int32_t valoff[18];   /* vals index of a code of that length = code + valoff */
    uint8_t vals[256];
} rf_gj_huff;

typedef struct rf_gj_comp {
    uint32_t h, v;       /* sampling factors (1 or 2; 1 for a grayscale file) */
    uint32_t dc, ac, q;  /* indexes of its tables in the packet */
    uint32_t bw, bh;     /* blocks per row and block rows of this component in the region */
    uint32_t plane;      /* offset of its sample plane (bw*8 x bh*8 bytes) in the scratch */
    uint32_t dw, dh;     /* libjpeg's downsampled_width/height for the whole image */
    uint32_t x0, y0;     /* region origin in this component's samples */
} rf_gj_comp;

typedef struct rf_gj_packet {
    uint32_t magic, bytes;    /* RF_GJ_MAGIC; the whole packet */
    uint32_t ncomp, max_h, max_v;
    uint32_t interval;        /* MCUs per restart interval */
    uint32_t mcu_w, mcu_h;    /* one MCU in pixels */
    uint32_t mcu_cols, mcu_rows; /* MCUs of the region */
    uint32_t nintervals;      /* region intervals, row-major (plain packets: segments) */
    uint32_t width, height;   /* the image */
    uint32_t rx, ry;          /* region origin in image pixels */
    uint32_t layout;          /* enum rf_layout */
    uint32_t pad;             /* R | G << 8 | B << 16: the canvases' pixels no rectangle covers */
    uint32_t nviews, off_views; /* rf_gj_view[nviews]: the outputs the region is resized onto */
    uint32_t scratch;         /* scratch bytes this sample uses (<= RF_GJ_SCRATCH) */
    uint32_t scratch_at;      /* where they start in the batch's scratch, in RF_GJ_ALIGN units
                               * (set by whoever places the batch; 0 for the host driver) */
    uint32_t off_huff, nhuff; /* rf_gj_huff[nhuff] */
    uint32_t off_quant, nquant; /* uint16[64] per quant table, natural order */
    uint32_t off_span;        /* uint32[nintervals + 1]: interval k is data[span[k], span[k+1]) */
    uint32_t off_data;
    /* 1: an engine packet: the region is the whole image and data_bytes at off_data the whole
     * file, for the hardware decoder. The engines report no entropy-coded damage, so the packet
     * also carries nintervals rf_gj_unit at off_span for rf_gj_engine_check; nintervals is 0
     * when the packing thread checked the file already (one unit: no restart markers). */
    uint32_t engine;
    uint32_t data_bytes;
    /* 1: a plain packet: off_span holds rf_gj_seg[nintervals], the data the destuffed bytes of
     * the region's MCU rows. */
    uint32_t plain;
    /* Restart packets: damage counts in the first check_units intervals, those the CPU path
     * reads (rf_jpeg_rows_read). */
    uint32_t check_units;
    /* What libjpeg recovered from in the header (1 << enum rf_recovered); not read by kernels. */
    uint32_t recovered;
    rf_gj_comp comp[3];
} rf_gj_packet;

/* One output a packet's region is resized onto: the sample's image, or with multi_crop each
 * view. The out_h x out_w rectangle lands at (out_x, out_y) of a canvas_h x canvas_w canvas
 * (t's size, a NATIVE image's own, a view's) that starts `at` bytes into the sample's output,
 * planes of the canvas's size for NCHW; the rest of the canvas is the packet's pad. */
typedef struct rf_gj_view {
    uint64_t at;
    uint32_t out_h, out_w, canvas_w, canvas_h, out_x, out_y;
    uint32_t htaps, vtaps;
    int32_t xlo, xhi;         /* region columns the vertical pass produces */
    uint32_t inter;           /* offset of the vertically resized rows in the scratch */
    uint32_t off_hstart, off_hcoef; /* int32[out_w] (region columns), int16[out_w * htaps] */
    uint32_t off_vstart, off_vcoef; /* int32[out_h] (region rows), int16[out_h * vtaps] */
    uint32_t reserved;
} rf_gj_view;

/* A stretch of an engine packet's file that the CPU path's libjpeg decodes for the crop: `mcus`
 * MCUs from byte `start` to `end` (the next marker), with RF_GJ_CHECK_END its end checked too. */
typedef struct rf_gj_unit {
    uint32_t start, end, mcus, flags;
} rf_gj_unit;
#define RF_GJ_CHECK_END 1u

/* MCUs per plain-packet segment at most: like a restart interval, one GPU thread's unit. */
#define RF_GJ_SEG_MCUS 4u

/* Where a plain-packet segment starts, as the walker found it; mrow, mcol are region MCUs. */
typedef struct rf_gj_seg {
    uint32_t bit;        /* into the packet's data (destuffed) */
    int32_t pred[3];     /* DC predictor of each component before the segment's first MCU */
    uint32_t mrow, mcol; /* first MCU, region coordinates */
    uint32_t count;      /* MCUs, all in row mrow: up to RF_GJ_SEG_MCUS from the walker, a
                          * sync point's span from an index */
    uint32_t skip;       /* MCUs before mcol decoded and dropped: a segment from a sync point
                          * left of the region (the walker's start on the region: 0) */
} rf_gj_seg;
/* A segment's skip is at most a sync span, which is at most an MCU row (sync_index.h). */
#define RF_GJ_SKIP_MAX 65535u

/* Per-sample result codes the kernels report (0 = decoded). */
enum rf_gj_status {
    RF_GJ_OK = 0,
    RF_GJ_BAD_CODE = 1,     /* a bit pattern that is no code of the Huffman table */
    RF_GJ_PREMATURE = 2,    /* an interval's data ended before its MCUs did */
    RF_GJ_EXTRANEOUS = 3,   /* whole bytes left in an interval after its MCUs */
    RF_GJ_BAD_PACKET = 4,   /* the packet is inconsistent (never written by rf_decode_packet) */
    RF_GJ_ENGINE = 5,       /* the hardware JPEG decoder refused the file (corrupt data);
                             * nvJPEG's status is in the bits above the low byte */
};
#define RF_GJ_FAILURE(st) ((st) & 0xFF)
const char *rf_gj_status_text(int status);

struct jpeg_decompress_struct;
struct rf_axis;
struct rf_region_buf;

/* What the walker needs of a plain file: the packet's components and tables, the image's MCUs
 * per row, the region's MCUs [c0,c1) x [r0,r1), and how many MCUs to walk (at least the CPU
 * path's extent). */
typedef struct rf_gj_walk_in {
    const uint8_t *jpeg;
    size_t len;
    const rf_gj_packet *p;
    const rf_gj_huff *huff;
    uint32_t cols, c0, c1, r0, r1;
    uint64_t mcus;
    uint32_t rows; /* the image's MCU rows */
} rf_gj_walk_in;

/* The walk: data is the destuffed entropy-coded data; segment k starts at bit seg[k].bit;
 * region row i's segments lie in bits [row[2i], row[2i+1]). Owned by the region buffer, valid
 * until its next walk. */
typedef struct rf_gj_walked {
    const uint8_t *data;
    const rf_gj_seg *seg;
    uint32_t nseg;
    const uint64_t *row;
} rf_gj_walked;

/* Walk a plain single-scan Huffman file for in->mcus MCUs, recording each segment's start.
 * Returns 0; RF_GJ_NOT_ELIGIBLE when the data hold no-code patterns or end early (the CPU path
 * then reports libjpeg's error); RF_ENOMEM. */
int rf_gj_walk(const rf_gj_walk_in *in, struct rf_region_buf *rb, rf_gj_walked *out);
/* With rb->sync set (a sync-point index entry for this file, decode.h's rf_decoder_set_sync)
 * rf_gj_walk walks nothing: each region row's segments start at the entry's points, the first
 * of a row skipping to the region's first column, and only those rows' bytes are destuffed.
 * rb->sync_result says whether it did (RF_SYNC_USED) or found the entry does not fit the file
 * and walked (RF_SYNC_STALE). */

/* The sync-point build of one file (sync_index.h): walk every MCU of in (the whole image:
 * region = image, mcus = all), recording a point every e->span MCUs of each row, the span
 * chosen from the data's density. Sets e's span, grid, ncomp and points (valid until the
 * region buffer's next walk). Returns 0, RF_GJ_NOT_ELIGIBLE (a pattern that is no code, data
 * that end early, positions past 32 bits) or RF_ENOMEM. */
struct rf_sync_entry;
int rf_gj_sync_walk(const rf_gj_walk_in *in, struct rf_region_buf *rb, struct rf_sync_entry *e);
/* rf_gj_sync_walk for a file whose header ci has read, deciding first whether it gets points:
 * e->status says (sync_index.h's enum rf_sync_status). Returns 0 or RF_ENOMEM. */
int rf_gj_sync_build(const struct jpeg_decompress_struct *ci, const uint8_t *jpeg, size_t len,
                     struct rf_region_buf *rb, struct rf_sync_entry *e);
/* The entry of one member (a decoder's read of its header, then rf_gj_sync_build): e->off is
 * the caller's; len, hash, status and the rest are set here, the points valid until the
 * decoder's next image. A member that is no JPEG gets RF_SYNC_NEEDS_NONE, one whose header or
 * data do not decode RF_SYNC_UNREADABLE. Returns 0 or RF_ENOMEM. */
int rf_decode_sync_entry(rf_decoder *d, const uint8_t *jpeg, size_t len, struct rf_sync_entry *e,
                         rf_err *err);

/* Where a decode thread's output goes: packet = 1, a buffer for a packet of `bytes` bytes or
 * NULL when there is no room; packet = 0, the sample's pixels (height*width*3), never NULL. */
typedef uint8_t *(*rf_gj_place)(void *ctx, size_t bytes, int packet);

/* rf_gj_pack's answers besides 0 and RF_ENOMEM: decode.h's placement answers. */
enum {
    RF_GJ_NOT_ELIGIBLE = RF_PLACE_DECLINED,
    RF_GJ_NO_ROOM = RF_PLACE_NO_ROOM,
};

/* Write the packet of one image where place(ctx, bytes, 1) says: ci has read the header only,
 * outs[0..n) the outputs with their full-scale resize plans (t's layout and pad; the region
 * decoded is the union of what their taps read), rb the decoder's interval scratch; engine = 1:
 * an engine packet. Returns 0 with *bytes set (8 bytes more are asked for, for word reads),
 * RF_GJ_NOT_ELIGIBLE, RF_GJ_NO_ROOM or RF_ENOMEM. */
int rf_gj_pack(const struct jpeg_decompress_struct *ci, const uint8_t *jpeg, size_t len,
               const rf_place_out *outs, uint32_t n, const rf_transform *t, int engine,
               struct rf_region_buf *rb, rf_gj_place place, void *ctx, uint32_t *bytes);

/* GPU decode of one sample: rf_decode_placed with gpujpeg_place.c's placement (engine = 1: an
 * engine packet; v: multi-crop views, or NULL); an image not taken goes to place(ctx, its
 * sample's bytes, 0) with *bytes = 0. */
int rf_decode_packet(rf_decoder *d, const uint8_t *jpeg, size_t len, const rf_transform *t,
                     const rf_views *v, uint64_t seed, int engine, rf_gj_place place, void *ctx,
                     uint32_t *bytes, rf_decode_info *info, rf_err *err);

/* The host's stand-in for the hardware decoder: decode an engine packet's JPEG with
 * rf_decode_raw into its component planes in scratch, for rf_gj_decode_host to resize. The
 * hardware's own IDCT may differ by a unit here and there. Returns 0, RF_EINVAL "not an engine
 * packet", RF_EDECODE or RF_ENOMEM. */
int rf_decode_planes(rf_decoder *d, const uint8_t *packet, uint8_t *scratch, rf_err *err);

/* Host driver: decode one packet into out (the sample's output: each view's canvas from its
 * `at`, in the packet's layout); scratch holds
 * the packet's `scratch` bytes (an engine packet's planes already there). Returns an
 * rf_gj_status; the first failing interval or segment in *bad_interval (may be NULL). */
int rf_gj_decode_host(const uint8_t *packet, uint8_t *scratch, uint8_t *out,
                      uint32_t *bad_interval);

/* Per-sample flags (slot.gpu.flags, the device's meta): what is at the sample's offset. */
enum { RF_GJ_PIXELS = 0, RF_GJ_KERNELS = 1, RF_GJ_ENGINE_PACKET = 2 };

/* A batch's GPU decode as the backend's submit sees it: staged sample i starts at offs[i] and
 * is a packet when flags[i] says so (else pixels); rf_gj_status values land in status after the
 * batch's event. Pinned host arrays of count entries; flags NULL: no GPU decode. */
typedef struct rf_gj_batch {
    const uint64_t *offs;
    const uint8_t *flags;
    int32_t *status;
    uint64_t scratch; /* device scratch bytes the batch's packets take (scratch_at) */
    uint64_t sample_bytes; /* one decoded sample (uint8): its image, or its views */
    uint32_t rows;    /* the most rows of any canvas of a sample: the kernels' grid */
    uint32_t engine;  /* samples with an engine packet; the staged pointer must stay the slot */
    /* samples with a packet of either kind; 0: the CPU decoded the whole batch and the backend
     * only puts the pixels in order, statuses all 0 */
    uint32_t packets;
} rf_gj_batch;

#ifdef RINGFEED_HAVE_CUDA

/* Device driver, enqueued on `stream`; meta: n uint64 offsets into staged, then n flags. A
 * flagged sample's packet is decoded into out + i*sample_bytes (no canvas of more than `rows`
 * rows) using scratch from its scratch_at on (an engine packet's planes already there); others
 * are copied as they are. status[i] (zeroed, or set by the engine) receives an rf_gj_status;
 * samples with one are left alone. Device pointers. Returns 0 or a cudaError_t value. */
int rf_cuda_gj_decode(const uint8_t *staged, size_t staged_bytes, const uint8_t *meta,
                      uint8_t *out, uint32_t n, uint32_t rows, uint64_t sample_bytes,
                      uint8_t *scratch, size_t scratch_bytes, int32_t *status, void *stream);
#endif

#endif
