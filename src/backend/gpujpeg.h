/* gpujpeg.h — JPEG decode on the GPU (docs/gpu-decode.md): the packet a decode thread writes
 * into the pinned slot instead of pixels, and the drivers that turn packets into pixels.
 *
 * Plain packets: a file without restart markers is one bit stream, so a CPU walker
 * (gpujpeg_walk.c) goes through its Huffman codes up to the region's last MCU (DC values
 * decoded, AC codes skipped, no pixels) and records where each segment of up to
 * RF_GJ_SEG_MCUS region MCUs starts, with the DC predictors there; the packet carries the
 * region rows' destuffed bytes and those segments, which the kernels decode like intervals.
 *
 * Why packets: on the CPU ~74% of a RandomResizedCrop decode is Huffman decoding, which is
 * sequential within a file, so 16 cores top out near 16k img/s. Restart markers (ringfeed-pack
 * --restart) cut the entropy-coded data into intervals of 2-8 MCUs that each decode on their
 * own, so one GPU thread per interval can do it. A decode thread still reads the header with
 * libjpeg (limits, tables, geometry), picks the crop and the resize plans exactly as the CPU
 * path would at full scale, finds the restart intervals the crop needs (one memchr pass), and
 * copies them with the tables and plans into a packet (~20-150 KB), placed in the slot's
 * staging area at the next free offset: packets are as long as they need to be, and the copy
 * moves only the bytes the batch used. The copy stage then moves the
 * batch to the device and three kernels finish it: entropy decode + dequantize + IDCT per
 * interval, vertical resize with chroma upsampling and colour conversion fused in, horizontal
 * resize into the output.
 *
 * Exactness: the kernels are integer code that mirrors libjpeg-turbo's defaults (islow IDCT,
 * fancy upsampling, its YCbCr tables) and ringfeed's fixed-point resize, so a GPU-decoded sample
 * is byte-for-byte what the CPU path gives with DCT scaling off (tests/test_decode.c through the
 * host driver, tests/test_cuda.c on the device). The same functions (gpujpeg_core.h) run on the
 * host for the host backend and the tests.
 *
 * What takes the GPU path: single-scan Huffman baseline/extended 8-bit files with a restart
 * interval dividing the MCU row (restart packets) or none (plain packets), grayscale or YCbCr
 * with 4:4:4, 4:2:2 or 4:2:0 chroma, whose scratch fits RF_GJ_SCRATCH. Anything else is
 * decoded on the CPU as before, in the same batch.
 * A packet the slot has no room left for is decoded on the CPU at full scale, which gives the
 * kernels' exact bytes: where a sample was decoded never changes what the batch holds. */
#ifndef RF_GPUJPEG_H
#define RF_GPUJPEG_H

#include <stddef.h>
#include <stdint.h>

#include "decode/decode.h"

#define RF_GJ_MAGIC 0x504a4652u /* "RFJP" */
#define RF_GJ_LOOKUP_BITS 9
/* Device scratch of one sample at most: the decoded component planes of the region (an engine
 * packet's: the whole image) and the vertically resized rows. 8 MiB holds a 5-megapixel 4:2:0
 * or a 2.6-megapixel 4:4:4 image; larger ones decode on the CPU (2 MiB sent a tenth of a
 * dense photo set, its largest images, to the CPU at full scale: docs/gpu-decode.md). A
 * batch's samples share one scratch, each taking what its packet says (~0.2-0.6 MiB for 224
 * crops of ImageNet-sized photos); the device pool reserves RF_GJ_SCRATCH_RESERVE a sample
 * and grows once for a batch of larger ones. */
#define RF_GJ_SCRATCH (8u << 20)
#define RF_GJ_SCRATCH_RESERVE (1u << 20)
/* Slot bytes per sample when packets go to the device, on average: a slot holds batch x the
 * larger of this and the decoded sample, shared by its packets in the order they are written,
 * so that small outputs (160x160 is 75 KB) still carry the intervals of ~100 KB photos and one
 * sample may take a 400 KB packet when others are small. */
#define RF_GJ_AREA (192u << 10)
/* Packets start on this boundary in the slot (the decoder reads aligned 8-byte words). */
#define RF_GJ_ALIGN 64u
/* The most samples a batch of the GPU paths may have: the kernels run one CUDA grid row per
 * sample (gridDim.y, whose limit this is). */
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
    uint32_t out_h, out_w;    /* output: out_h x out_w x 3 uint8 */
    uint32_t layout;          /* enum rf_layout */
    uint32_t htaps, vtaps;
    int32_t xlo, xhi;         /* region columns the vertical pass produces */
    uint32_t scratch;         /* scratch bytes this sample uses (<= RF_GJ_SCRATCH) */
    uint32_t scratch_at;      /* where they start in the batch's scratch, in RF_GJ_ALIGN units
                               * (set by whoever places the batch; 0 for the host driver) */
    uint32_t inter;           /* offset of the vertically resized rows in the scratch */
    uint32_t off_huff, nhuff; /* rf_gj_huff[nhuff] */
    uint32_t off_quant, nquant; /* uint16[64] per quant table, natural order */
    uint32_t off_span;        /* uint32[nintervals + 1]: interval k is data[span[k], span[k+1]) */
    uint32_t off_data;
    uint32_t off_hstart, off_hcoef; /* int32[out_w] (region columns), int16[out_w * htaps] */
    uint32_t off_vstart, off_vcoef; /* int32[out_h] (region rows), int16[out_h * vtaps] */
    /* 1: an engine packet (rf_gj_pack with engine = 1): the region is the whole image and
     * data_bytes at off_data are the whole JPEG file, which the GPU's hardware JPEG decoder
     * (nvjpg.h) decodes into the component planes before the vertical pass. The engines
     * report no damage inside entropy-coded data, so the packet also carries, with its
     * Huffman tables, what the CPU path's libjpeg reads of the file for this crop:
     * nintervals rf_gj_unit at off_span, each checked by rf_gj_engine_check. */
    uint32_t engine;
    uint32_t data_bytes;
    /* 1: a plain packet (a file without restart markers, gpujpeg_walk.c): off_span holds
     * rf_gj_seg[nintervals] instead of interval offsets, and the data are the destuffed
     * entropy-coded bytes of the region's MCU rows, each row from its first segment's start
     * byte to the byte holding its last region MCU's last bit. */
    uint32_t plain;
    /* Restart packets: the intervals whose damage counts, the first check_units of them: the
     * rows the CPU path's libjpeg reads of the same region (rf_jpeg_rows_read), the last one
     * without its extraneous-bytes check (libjpeg reads no marker after it). */
    uint32_t check_units;
    /* What libjpeg recovered from in the file's header as the decode thread read it (1 << enum
     * rf_recovered), written by the pipeline after the packet is placed, counted when its
     * batch is handed out (the kernels never read it). */
    uint32_t recovered;
    rf_gj_comp comp[3];
} rf_gj_packet;

/* A stretch of an engine packet's file that the CPU path's libjpeg decodes for the packet's
 * crop at full scale, and how: `mcus` MCUs from byte `start`, the data ending at `end` (the
 * next marker), and with RF_GJ_CHECK_END the interval's end checked too (no whole bytes left:
 * libjpeg reads the marker after it). A plain file's scan is one unit; a restart-marked
 * file's units are restart intervals. */
typedef struct rf_gj_unit {
    uint32_t start, end, mcus, flags;
} rf_gj_unit;
#define RF_GJ_CHECK_END 1u

/* MCUs per segment of a plain packet at most: like a restart interval, the unit one GPU thread
 * decodes (a 224 crop of an ImageNet-sized 4:2:0 photo: ~40-80 segments). */
#define RF_GJ_SEG_MCUS 4u

/* Where a segment of a plain packet starts: the CPU walker (gpujpeg_walk.c) found its bit
 * position and the DC predictors there; mrow, mcol are region MCUs. */
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
/* A status's rf_gj_status (an engine's carries nvJPEG's own above the low byte). */
#define RF_GJ_FAILURE(st) ((st) & 0xFF)
const char *rf_gj_status_text(int status);

struct jpeg_decompress_struct;
struct rf_axis;
struct rf_region_buf;

/* What the walker (gpujpeg_walk.c) needs of a plain file: the packet's components and tables
 * as rf_gj_pack made them, the image's MCUs per row, the region's MCUs [c0,c1) x [r0,r1), and
 * how many MCUs from the first to walk (at least to the region's last: the CPU path's extent,
 * so that data the CPU path would find bad are not made a packet). */
typedef struct rf_gj_walk_in {
    const uint8_t *jpeg;
    size_t len;
    const rf_gj_packet *p;
    const rf_gj_huff *huff;
    uint32_t cols, c0, c1, r0, r1;
    uint64_t mcus;
    uint32_t rows; /* the image's MCU rows */
} rf_gj_walk_in;

/* The walk: data is the file's destuffed entropy-coded data; segment k starts at bit
 * seg[k].bit of it; region row i's segments lie in bits [row[2i], row[2i+1]). All owned by
 * the region buffer the walk was given, valid until its next walk. */
typedef struct rf_gj_walked {
    const uint8_t *data;
    const rf_gj_seg *seg;
    uint32_t nseg;
    const uint64_t *row;
} rf_gj_walked;

/* Walk a plain (no restart markers) single-scan Huffman file from its first MCU for in->mcus
 * MCUs, recording each segment's start (RF_GJ_SEG_MCUS MCUs of a region row). Returns 0;
 * RF_GJ_NOT_ELIGIBLE when the data has a pattern that is no code or ends before those MCUs do
 * (the CPU path then decodes it and reports libjpeg's error); RF_ENOMEM. */
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

/* Where a decode thread's output goes (rf_gj_pack, rf_decode_packet): with packet = 1 a buffer
 * for a packet of `bytes` bytes, or NULL when there is no room for it; with packet = 0 the
 * buffer for the sample's decoded pixels (height*width*3 bytes), never NULL. */
typedef uint8_t *(*rf_gj_place)(void *ctx, size_t bytes, int packet);

/* rf_gj_pack's answers besides 0 and RF_ENOMEM: what the CPU does with the image instead
 * (decode.h's placement answers, which rf_decode_placed acts on). */
enum {
    RF_GJ_NOT_ELIGIBLE = RF_PLACE_DECLINED, /* not for the kernels: decode it as
                                               rf_decode_transform would */
    RF_GJ_NO_ROOM = RF_PLACE_NO_ROOM,       /* place() had no room: decode it at full scale,
                                               the kernels' bytes */
};

/* Write the packet of one image where place(ctx, bytes, 1) says: ci has read the header (and
 * nothing more), h and v are the resize plans at full scale in image pixels (as
 * rf_decode_transform makes them with DCT scaling off; their n_out are the output's width and
 * height), rb the decoder's interval scratch.
 * engine = 1: an engine packet (the whole file, for the hardware decoder): baseline files of
 * any restart interval, or none, whose planes fit the scratch. Returns 0 with *bytes set (the
 * packet; the buffer asked for is 8 bytes longer, for the decoder's word reads),
 * RF_GJ_NOT_ELIGIBLE, RF_GJ_NO_ROOM or RF_ENOMEM. */
int rf_gj_pack(const struct jpeg_decompress_struct *ci, const uint8_t *jpeg, size_t len,
               const struct rf_axis *h, const struct rf_axis *v, uint32_t layout, int engine,
               struct rf_region_buf *rb, rf_gj_place place, void *ctx, uint32_t *bytes);

/* GPU decode of one sample (gpujpeg_place.c, through decode.h's rf_decode_placed): read the
 * header, choose the crop with the same seed and plan the resize at full scale exactly as
 * rf_decode_transform does with DCT scaling off, then write the packet the GPU kernels decode
 * where place(ctx, bytes, 1) says and set *bytes (info as for rf_decode_transform, scale_denom
 * 1, region 1). engine = 1 writes an engine packet (the whole file, for the hardware decoder)
 * instead. An image the kernels or the engine do not take, or whose packet place() has no room
 * for, is decoded right there into place(ctx, height*width*3, 0), with *bytes = 0: its header is
 * read once either way. Returns 0 or an error as rf_decode_transform does. */
int rf_decode_packet(rf_decoder *d, const uint8_t *jpeg, size_t len, const rf_transform *t,
                     uint64_t seed, int engine, rf_gj_place place, void *ctx, uint32_t *bytes,
                     rf_decode_info *info, rf_err *err);

/* The host's stand-in for the hardware JPEG decoder: decode an engine packet's JPEG with
 * libjpeg (islow IDCT, raw output: decode.h's rf_decode_raw) into the packet's component
 * planes in scratch, which rf_gj_decode_host then resizes. The result is byte-for-byte the CPU
 * path's with DCT scaling off; the hardware's own IDCT may differ by a unit here and there.
 * Returns 0, RF_EINVAL "not an engine packet", or RF_EDECODE / RF_ENOMEM with text in
 * err->msg. */
int rf_decode_planes(rf_decoder *d, const uint8_t *packet, uint8_t *scratch, rf_err *err);

/* Host driver: decode one packet into out (out_h*out_w*3 bytes, the packet's layout). scratch
 * holds at least the packet's `scratch` bytes; for an engine packet its component planes are
 * there already (rf_decode_planes) and only the resize runs. Returns an rf_gj_status; on error
 * the first failing interval (or segment) is in *bad_interval (may be NULL). */
int rf_gj_decode_host(const uint8_t *packet, uint8_t *scratch, uint8_t *out,
                      uint32_t *bad_interval);

/* Per-sample flags (the loader's slot.gpu.flags, the device's meta): what is at the sample's offset
 * in the staged bytes. */
enum { RF_GJ_PIXELS = 0, RF_GJ_KERNELS = 1, RF_GJ_ENGINE_PACKET = 2 };

/* A batch's GPU decode as the backend's submit sees it (rf_convert_desc.gj), before any
 * conversion: staged sample i starts at offs[i] and is a packet when flags[i] is 1 (else
 * decoded pixels); per-sample rf_gj_status values land in status after the batch's event.
 * Pinned host arrays of count entries; flags NULL: no GPU decode. */
typedef struct rf_gj_batch {
    const uint64_t *offs;
    const uint8_t *flags;
    int32_t *status;
    uint64_t scratch; /* device scratch bytes the batch's packets take (scratch_at) */
    uint32_t height, width; /* of a decoded sample */
    uint32_t engine;  /* samples with an engine packet (flag 2), for the hardware decoder
                       * (nvjpg.h); the staged pointer must stay the pinned slot */
    /* samples with a packet of either kind; 0: the CPU decoded the whole batch (BALANCE while
     * a training step keeps its GPU share at 0), and the backend only puts the samples' pixels
     * in order, without the decode kernels, the statuses all 0 */
    uint32_t packets;
} rf_gj_batch;

#ifdef RINGFEED_HAVE_CUDA

/* Device driver, enqueued on `stream`. meta holds n uint64 offsets into staged (staged_bytes
 * long) and then n flag bytes. For each sample whose flag is set, decode the packet at staged +
 * offset[i] into out + i * height * width * 3 (the packet's layout), using scratch (scratch_bytes
 * long) from the packet's scratch_at on; an engine packet's planes must be in the scratch
 * already (rf_nvjpg_decode, enqueued before). Samples without the flag hold decoded pixels at
 * staged + offset[i] and are copied to out as they are. status[i], zeroed by the caller (or
 * set by the engine), receives an rf_gj_status; samples with a status are left alone. All
 * pointers are device memory. Returns 0 or a cudaError_t value. */
int rf_cuda_gj_decode(const uint8_t *staged, size_t staged_bytes, const uint8_t *meta,
                      uint8_t *out, uint32_t n, uint32_t height, uint32_t width,
                      uint8_t *scratch, size_t scratch_bytes, int32_t *status, void *stream);
#endif

#endif
