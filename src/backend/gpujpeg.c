/* gpujpeg.c — the host side of GPU JPEG decode (gpujpeg.h): building packets from a header
 * libjpeg has read, and the host driver that runs the kernels' code on the CPU.
 *
 * DESIGN
 *  - rf_gj_pack trusts nothing it did not check: libjpeg validates Huffman tables only when
 *    decoding starts, so jpeg_make_d_derived_tbl's checks are repeated here; missing tables,
 *    16-bit quantizers above 32767 and anything unusual answer "not eligible" and the CPU path
 *    gives libjpeg's own diagnosis.
 *  - The packet is position independent with 8-byte aligned sections: the device reads it in
 *    place from the staged copy of the slot.
 *  - The host driver runs the three stages in the device's order: the host backend's GPU decode
 *    and the reference for the CUDA results. */
#include "backend/gpujpeg.h"

#include <stdio.h> /* jpeglib.h needs FILE */
#include <string.h>

#include <jpeglib.h>

#include "backend/gpujpeg_core.h"
#include "decode/jpeg_restart.h"
#include "decode/resize.h"
#include "loaders/sync_index.h"

#include "base/common.h"

const char *rf_gj_status_text(int status)
{
    switch (RF_GJ_FAILURE(status)) {
    case RF_GJ_OK: return "ok";
    case RF_GJ_BAD_CODE: return "corrupt JPEG data: bad Huffman code";
    case RF_GJ_PREMATURE: return "corrupt JPEG data: premature end of data segment";
    case RF_GJ_EXTRANEOUS: return "corrupt JPEG data: extraneous bytes before marker";
    case RF_GJ_BAD_PACKET: return "internal: inconsistent GPU decode packet";
    case RF_GJ_ENGINE: return "corrupt JPEG data: the GPU's hardware JPEG decoder refused it";
    default: return "unknown GPU decode status";
    }
}

/* ---- packing ---- */

static size_t align8(size_t v) { return (v + 7) & ~(size_t)7; }

/* jpeg_make_d_derived_tbl's table, in the layout rf_gj_symbol walks. 1: not a valid table. */
static int build_huff(const JHUFF_TBL *t, int dc, rf_gj_huff *o)
{
    uint8_t size[257];
    uint32_t code[257];
    uint32_t n = 0;
    for (int l = 1; l <= 16; l++) {
        if (n + t->bits[l] > 256)
            return 1;
        for (int i = 0; i < t->bits[l]; i++)
            size[n++] = (uint8_t)l;
    }
    size[n] = 0;
    uint32_t c = 0, si = size[0], p = 0;
    while (size[p]) {
        while (size[p] == si)
            code[p++] = c++;
        if (c >= (1u << si))
            return 1;
        c <<= 1;
        si++;
    }
    memset(o, 0, sizeof *o);
    p = 0;
    for (int l = 1; l <= 16; l++) {
        if (t->bits[l]) {
            o->valoff[l] = (int32_t)p - (int32_t)code[p];
            p += t->bits[l];
            o->maxcode[l] = (int32_t)code[p - 1];
        } else {
            o->maxcode[l] = -1;
        }
    }
    o->maxcode[17] = 0xFFFFF;
    for (uint32_t i = 0; i < n; i++) {
        if (dc && t->huffval[i] > 15)
            return 1;
        o->vals[i] = t->huffval[i];
        if (size[i] <= RF_GJ_LOOKUP_BITS) {
            uint32_t shift = RF_GJ_LOOKUP_BITS - size[i], first = code[i] << shift;
            for (uint32_t k = 0; k < (1u << shift); k++)
                o->look[first + k] = (uint16_t)(size[i] << 8 | t->huffval[i]);
        }
    }
    return 0;
}

/* Sampling this decoder reproduces exactly (tests/test_decode.c): gray, 4:4:4, 4:2:2, 4:2:0,
 * chroma 1x1, and chroma at least 3 samples wide (libjpeg box-filters narrower ones). */
static int sampling_ok(const struct jpeg_decompress_struct *ci)
{
    if (ci->num_components == 1)
        return ci->jpeg_color_space == JCS_GRAYSCALE;
    if (ci->num_components != 3 || ci->jpeg_color_space != JCS_YCbCr)
        return 0;
    const jpeg_component_info *c = ci->comp_info;
    int mh = ci->max_h_samp_factor, mv = ci->max_v_samp_factor;
    if (c[0].h_samp_factor != mh || c[0].v_samp_factor != mv || mh > 2 || mv > 2 ||
        (mh == 1 && mv == 2))
        return 0;
    for (int i = 1; i < 3; i++)
        if (c[i].h_samp_factor != 1 || c[i].v_samp_factor != 1)
            return 0;
    return (ci->image_width + mh - 1) / mh > 2;
}

/* 1 when the frame is baseline (SOF0), what the hardware decoder takes: libjpeg's 6b API keeps
 * no such flag. */
static int sof0(const uint8_t *j, size_t len)
{
    size_t p = 2, at;
    uint32_t m;
    while (rf_jpeg_segment(j, len, &p, &m, &at) == 0)
        if (rf_jpeg_is_sof(m))
            return m == 0xC0;
    return 0;
}

/* A file the walker takes (plain packets): one interleaved Huffman scan without restart
 * markers; baseline or extended (SOF0/SOF1), as 8-bit precision and Huffman coding imply. */
static int plain_ok(const struct jpeg_decompress_struct *ci, const rf_jpeg_geom *g)
{
    return g->restart == 0 && !ci->progressive_mode && !ci->arith_code &&
           ci->comps_in_scan == ci->num_components;
}

/* The scan's tables, each distinct one once, and each component's sampling and table indexes
 * in p->comp: the Huffman tables built into ht (*nh of them), the quant tables' packet order in
 * q_of (*nq; none for an engine packet, which reads the file's own); p->ncomp. 1: a table
 * missing or not valid. */
static int scan_tables(const struct jpeg_decompress_struct *ci, int engine, rf_gj_packet *p,
                       rf_gj_huff ht[8], int *nh, int q_of[4], int *nq)
{
    int huff_of[8], nc = ci->num_components;
    memset(huff_of, -1, sizeof huff_of);
    memset(q_of, -1, 4 * sizeof *q_of);
    *nh = *nq = 0;
    for (int i = 0; i < nc; i++) {
        const jpeg_component_info *c = &ci->comp_info[i];
        if (c->dc_tbl_no < 0 || c->dc_tbl_no > 3 || c->ac_tbl_no < 0 || c->ac_tbl_no > 3 ||
            c->quant_tbl_no < 0 || c->quant_tbl_no > 3 || !ci->dc_huff_tbl_ptrs[c->dc_tbl_no] ||
            !ci->ac_huff_tbl_ptrs[c->ac_tbl_no] || !ci->quant_tbl_ptrs[c->quant_tbl_no])
            return 1;
        if (huff_of[c->dc_tbl_no] < 0)
            huff_of[c->dc_tbl_no] = (*nh)++;
        if (huff_of[4 + c->ac_tbl_no] < 0)
            huff_of[4 + c->ac_tbl_no] = (*nh)++;
        if (q_of[c->quant_tbl_no] < 0 && !engine)
            q_of[c->quant_tbl_no] = (*nq)++;
        rf_gj_comp *pc = &p->comp[i];
        pc->h = nc == 1 ? 1 : (uint32_t)c->h_samp_factor;
        pc->v = nc == 1 ? 1 : (uint32_t)c->v_samp_factor;
        pc->dc = (uint32_t)huff_of[c->dc_tbl_no];
        pc->ac = (uint32_t)huff_of[4 + c->ac_tbl_no];
        pc->q = (uint32_t)q_of[c->quant_tbl_no];
    }
    for (int t = 0; t < 8; t++) {
        if (huff_of[t] < 0)
            continue;
        const JHUFF_TBL *src = t < 4 ? ci->dc_huff_tbl_ptrs[t] : ci->ac_huff_tbl_ptrs[t - 4];
        if (build_huff(src, t < 4, &ht[huff_of[t]]))
            return 1;
    }
    p->ncomp = (uint32_t)nc;
    return 0;
}

/* Scan order is frame order (what the kernels and the walker assume). */
static int frame_order(const struct jpeg_decompress_struct *ci)
{
    for (int i = 0; i < ci->num_components; i++)
        if (ci->cur_comp_info[i] != &ci->comp_info[i])
            return 0;
    return 1;
}

int rf_gj_sync_build(const struct jpeg_decompress_struct *ci, const uint8_t *jpeg, size_t len,
                     rf_region_buf *rb, rf_sync_entry *e)
{
    rf_jpeg_geom g;
    rf_jpeg_geom_read(ci, &g);
    e->npoints = 0, e->points = NULL;
    e->status = RF_SYNC_NEEDS_NONE;
    if (g.restart || ci->progressive_mode || ci->arith_code)
        return 0;
    e->status = RF_SYNC_UNSUPPORTED;
    rf_gj_packet p;
    rf_gj_huff ht[8];
    int q_of[4], nh, nq;
    memset(&p, 0, sizeof p);
    uint32_t cols = rf_jpeg_mcu_cols(&g), rows = rf_jpeg_mcu_rows(&g);
    if (ci->data_precision != 8 || !sampling_ok(ci) || !plain_ok(ci, &g) || !frame_order(ci) ||
        cols > UINT16_MAX || rows > UINT16_MAX || len > RF_SYNC_MAX_MEMBER ||
        scan_tables(ci, 1, &p, ht, &nh, q_of, &nq))
        return 0;
    const rf_gj_walk_in wi = {jpeg, len, &p, ht, cols, 0, cols, 0, rows,
                              (uint64_t)rows * cols, rows};
    int rc = rf_gj_sync_walk(&wi, rb, e);
    if (rc == RF_ENOMEM)
        return rc;
    e->status = rc ? RF_SYNC_UNREADABLE : RF_SYNC_POINTS;
    if (rc)
        e->npoints = 0, e->points = NULL;
    return 0;
}

/* Bytes of a plain packet's data: each region row's destuffed bytes from its first segment's
 * start byte to the byte holding its last bit. */
static uint64_t plain_bytes(const rf_gj_walked *w, uint32_t rows)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < rows; i++)
        n += ((w->row[2 * i + 1] + 7) >> 3) - (w->row[2 * i] >> 3);
    return n;
}

/* Copy those rows to d, one after another, and the segments to seg, bit offsets relative to d. */
static void plain_copy(const rf_gj_walked *w, uint32_t rows, uint8_t *d, rf_gj_seg *seg)
{
    uint64_t at = 0;
    uint32_t k = 0;
    for (uint32_t i = 0; i < rows; i++) {
        uint64_t b0 = w->row[2 * i] >> 3, b1 = (w->row[2 * i + 1] + 7) >> 3;
        memcpy(d + at, w->data + b0, b1 - b0);
        for (; k < w->nseg && w->seg[k].mrow == i; k++) {
            seg[k] = w->seg[k];
            seg[k].bit = (uint32_t)(w->seg[k].bit - 8 * b0 + 8 * at);
        }
        at += b1 - b0;
    }
}

/* What the CPU path's libjpeg entropy-decodes of a single-scan file for a crop whose rows end at
 * `vlast` at full scale: through the crop's region (rows [r0, r1)) when the restart intervals
 * divide the MCU row, else `rows` MCU rows from the first. */
typedef struct reach {
    uint32_t rows;
    uint64_t mcus;
} reach;

static void check_reach(const rf_jpeg_geom *g, int restarts, int context, int32_t vlast,
                        uint32_t r0, uint32_t r1, reach *out)
{
    rf_jpeg_geom region = *g;
    uint32_t top = restarts ? r0 * g->mcu_h : 0;
    if (restarts) /* the region JPEG rf_jpeg_region builds: its rows only */
        region.height = RF_MIN((r1 - r0) * g->mcu_h, g->height - top);
    out->rows = rf_jpeg_rows_read(&region, context, (uint32_t)vlast - top);
    out->mcus = (uint64_t)out->rows * rf_jpeg_mcu_cols(g);
}

/* Where output po's plans go from packet offset o: hstart, hcoef, vstart and vcoef each
 * 8-aligned into w (may be NULL); returns the offset after them. */
static size_t plans_at(const rf_place_out *po, size_t o, rf_gj_view *w)
{
    const rf_axis *h = po->h, *v = po->v;
    size_t off[4];
    off[0] = o, o = align8(o + (size_t)h->n_out * sizeof(int32_t));
    off[1] = o, o = align8(o + (size_t)h->n_out * h->taps * sizeof(int16_t));
    off[2] = o, o = align8(o + (size_t)v->n_out * sizeof(int32_t));
    off[3] = o, o = align8(o + (size_t)v->n_out * v->taps * sizeof(int16_t));
    if (w) {
        w->off_hstart = (uint32_t)off[0], w->off_hcoef = (uint32_t)off[1];
        w->off_vstart = (uint32_t)off[2], w->off_vcoef = (uint32_t)off[3];
    }
    return o;
}

/* Output po's scratch for the vertical pass: its out_h rows, each as wide as the columns the
 * horizontal taps read. */
static uint64_t rows_bytes(const rf_place_out *po)
{
    return align8((uint64_t)po->v->n_out * (uint32_t)(po->h->last - po->h->first) * 3);
}

/* The columns [x0, x1) and rows [y0, y1) the outputs' taps read (their union), and the bytes
 * of the outputs' table and plans. 1: an output whose rectangle leaves its canvas (never
 * planned so: the CPU path then says what is wrong), or more outputs than a packet holds. */
static int outs_cover(const rf_place_out *outs, uint32_t n, int32_t *x0, int32_t *x1,
                      int32_t *y0, int32_t *y1, size_t *table)
{
    if (n == 0 || n > RF_VIEWS_MAX)
        return 1;
    *x0 = *y0 = INT32_MAX, *x1 = *y1 = INT32_MIN;
    size_t o = align8((size_t)n * sizeof(rf_gj_view));
    for (uint32_t k = 0; k < n; k++) {
        const rf_axis *h = outs[k].h, *v = outs[k].v;
        const rf_out_rect *r = &outs[k].r;
        if (h->n_out > r->canvas_w || r->x > r->canvas_w - h->n_out || v->n_out > r->canvas_h ||
            r->y > r->canvas_h - v->n_out)
            return 1;
        *x0 = RF_MIN(*x0, h->first), *x1 = RF_MAX(*x1, h->last);
        *y0 = RF_MIN(*y0, v->first), *y1 = RF_MAX(*y1, v->last);
        o = plans_at(&outs[k], o, NULL);
    }
    *table = o;
    return 0;
}

/* Output k's table entry and plans (from packet offset *at on), its vertical pass's rows at
 * scratch offset *inter; both advanced past them. */
static void put_view(uint8_t *out, const rf_gj_packet *p, const rf_place_out *po, uint32_t k,
                     uint64_t *inter, size_t *at)
{
    const rf_axis *h = po->h, *v = po->v;
    rf_gj_view w = {.at = po->at, .out_h = v->n_out, .out_w = h->n_out,
                    .canvas_w = po->r.canvas_w, .canvas_h = po->r.canvas_h, .out_x = po->r.x,
                    .out_y = po->r.y, .htaps = h->taps, .vtaps = v->taps,
                    .xlo = h->first - (int32_t)p->rx, .xhi = h->last - (int32_t)p->rx,
                    .inter = (uint32_t)*inter};
    *inter += rows_bytes(po);
    *at = plans_at(po, *at, &w);
    int32_t *hs = (int32_t *)(out + w.off_hstart), *vs = (int32_t *)(out + w.off_vstart);
    for (uint32_t i = 0; i < w.out_w; i++)
        hs[i] = h->start[i] - (int32_t)p->rx;
    for (uint32_t i = 0; i < w.out_h; i++)
        vs[i] = v->start[i] - (int32_t)p->ry;
    memcpy(out + w.off_hcoef, h->coef, (size_t)w.out_w * h->taps * sizeof(int16_t));
    memcpy(out + w.off_vcoef, v->coef, (size_t)w.out_h * v->taps * sizeof(int16_t));
    memcpy(out + p->off_views + (size_t)k * sizeof w, &w, sizeof w);
}

int rf_gj_pack(const struct jpeg_decompress_struct *ci, const uint8_t *jpeg, size_t len,
               const rf_place_out *outs, uint32_t nout, const rf_transform *t, int engine,
               rf_region_buf *rb, rf_gj_place place, void *ctx, uint32_t *bytes)
{
    int32_t x0, x1, y0, y1;
    size_t table;
    if (outs_cover(outs, nout, &x0, &x1, &y0, &y1, &table))
        return RF_GJ_NOT_ELIGIBLE;
    rf_jpeg_geom g;
    int restarts = rf_jpeg_geom_read(ci, &g);
    if (ci->data_precision != 8 || !sampling_ok(ci))
        return RF_GJ_NOT_ELIGIBLE;
    /* The kernels take restart intervals, or plain files through the walker; the hardware
     * decoder takes baseline (SOF0) files with one interleaved scan, restart markers or not. */
    int plain = !engine && !restarts && plain_ok(ci, &g);
    if (engine ? ci->progressive_mode || ci->arith_code ||
                     ci->comps_in_scan != ci->num_components || !sof0(jpeg, len) ||
                     rb->eoi_of != jpeg
               : !restarts && !plain)
        return RF_GJ_NOT_ELIGIBLE;
    /* The hardware decoder gets the file up to its EOI (found by rf_jpeg_scan_check): it reports
     * no error for a file cut short, and a trailer is not its to read. */
    if (engine)
        len = rb->eoi_end;
    int nc = ci->num_components;
    if (!frame_order(ci))
        return RF_GJ_NOT_ELIGIBLE; /* leave it to libjpeg */
    /* The MCUs whose pixels the taps read, with their upsampling context. */
    if (x1 > (int32_t)g.width || y1 > (int32_t)g.height ||
        RF_MAX(x0 - 1, 0) >= RF_MIN(x1 + 1, (int32_t)g.width) ||
        RF_MAX(y0 - 1, 0) >= RF_MIN(y1 + 1, (int32_t)g.height))
        return RF_GJ_NOT_ELIGIBLE;
    /* The crop's region: what the kernels decode, and what an engine packet's check reads. A
     * plain file's region needs no whole intervals: its columns are the crop's MCUs. */
    uint32_t cols = rf_jpeg_mcu_cols(&g), R = g.restart ? g.restart : 1, c0, c1, r0, r1;
    rf_jpeg_geom cover = g;
    cover.restart = R;
    rf_jpeg_region_cover(&cover, 8, g.width, g.height, x0, x1, y0, y1, &c0, &c1, &r0, &r1);
    uint32_t per_row = cols / R, a0 = c0 / R, a1 = c1 / R;
    uint64_t last = (uint64_t)(r1 - 1) * per_row + a1 - 1;
    /* How far the CPU path's libjpeg decodes this file for this crop: the GPU paths judge the
     * Huffman data that far. */
    reach rc_ = {0};
    check_reach(&g, restarts, nc == 3 && ci->max_v_samp_factor == 2, y1, r0, r1, &rc_);
    uint32_t nint = (a1 - a0) * (r1 - r0);
    if (engine && !restarts)
        nint = g.restart ? (uint32_t)((rc_.mcus - 1) / g.restart + 1) : 1;
    uint32_t ck_r0 = r0;
    if (engine) /* the engine decodes the whole image: its planes are the whole image's */
        c0 = 0, c1 = cols, r0 = 0, r1 = rf_jpeg_mcu_rows(&g);

    /* Tables are checked before the packet is placed, so a refusal wastes no slot room. */
    rf_gj_packet p;
    rf_gj_huff ht[8];
    int q_of[4], nh, nq;
    memset(&p, 0, sizeof p);
    if (scan_tables(ci, engine, &p, ht, &nh, q_of, &nq))
        return RF_GJ_NOT_ELIGIBLE;
    uint32_t planes = 0;
    for (int i = 0; i < nc; i++) {
        rf_gj_comp *pc = &p.comp[i];
        pc->bw = (c1 - c0) * pc->h;
        pc->bh = (r1 - r0) * pc->v;
        pc->plane = planes;
        planes += pc->bw * 8 * pc->bh * 8;
        uint32_t mh = nc == 1 ? 1 : (uint32_t)ci->max_h_samp_factor;
        uint32_t mv = nc == 1 ? 1 : (uint32_t)ci->max_v_samp_factor;
        pc->dw = (g.width * pc->h + mh - 1) / mh;
        pc->dh = (g.height * pc->v + mv - 1) / mv;
        pc->x0 = c0 * 8 * pc->h;
        pc->y0 = r0 * 8 * pc->v;
    }
    /* after the planes, each output's vertically resized rows (put_view) */
    uint64_t inter = align8(planes), scratch = inter;
    for (uint32_t k = 0; k < nout; k++)
        scratch += rows_bytes(&outs[k]);
    if (scratch > RF_GJ_SCRATCH)
        return RF_GJ_NOT_ELIGIBLE;
    rf_gj_walked w = {0};
    /* the walker goes at least as far as libjpeg would, so that it declines what the CPU
     * path finds bad and the CPU path reports it */
    const rf_gj_walk_in wi = {jpeg, len, &p, ht, cols, c0, c1, r0, r1,
                              RF_MAX(rc_.mcus, (uint64_t)(r1 - 1) * cols + c1),
                              rf_jpeg_mcu_rows(&g)};
    size_t scan = 0;
    int rc = plain                     ? rf_gj_walk(&wi, rb, &w)
             : engine && !g.restart    ? rf_jpeg_scan_data(jpeg, len, &scan) != 0
                                         ? RF_GJ_NOT_ELIGIBLE : 0
             : engine && !restarts     ? rb->of != jpeg || rb->nspans < nint
                                         ? RF_GJ_NOT_ELIGIBLE : 0
                                       : rf_jpeg_spans(jpeg, len, &g, last, rb, &(size_t){0},
                                                       &(size_t){0});
    if (rc)
        return rc;
    if (plain)
        nint = w.nseg;
    if (engine && (rc_.mcus > UINT32_MAX || rb->data_end > len || scan > rb->data_end))
        return RF_GJ_NOT_ELIGIBLE;
    uint64_t data = engine ? len : plain ? plain_bytes(&w, r1 - r0) : 0;
    for (uint32_t r = r0; r < r1 && !engine && !plain; r++)
        for (uint32_t a = a0; a < a1; a++) {
            uint64_t i = (uint64_t)r * per_row + a;
            data += rb->span[2 * i + 1] - rb->span[2 * i];
        }
    size_t o = align8(sizeof p);
    p.off_huff = (uint32_t)o, p.nhuff = (uint32_t)nh;
    o += (size_t)nh * sizeof(rf_gj_huff);
    p.off_quant = (uint32_t)(o = align8(o)), p.nquant = (uint32_t)nq;
    o += (size_t)nq * 64 * sizeof(uint16_t);
    p.off_span = (uint32_t)(o = align8(o));
    o += plain    ? (size_t)nint * sizeof(rf_gj_seg)
         : engine ? (size_t)nint * sizeof(rf_gj_unit)
                  : ((size_t)nint + 1) * sizeof(uint32_t);
    p.off_views = (uint32_t)(o = align8(o)), p.nviews = nout;
    o += table;
    p.off_data = (uint32_t)(o = align8(o));
    o += data;
    uint16_t qt[4 * 64];
    for (int q = 0; q < 4; q++) {
        if (q_of[q] < 0)
            continue;
        for (int k = 0; k < 64; k++) {
            uint32_t qv = ci->quant_tbl_ptrs[q]->quantval[k]; /* natural order */
            if (qv > 32767)
                return RF_GJ_NOT_ELIGIBLE; /* libjpeg-turbo's islow multiplies in 16 bits */
            qt[64 * q_of[q] + k] = (uint16_t)qv;
        }
    }
    /* + 8: the decoder reads whole aligned 8-byte words */
    uint8_t *out = o > UINT32_MAX || data * 8 > UINT32_MAX ? NULL : place(ctx, o + 8, 1);
    if (!out)
        return RF_GJ_NO_ROOM;

    p.magic = RF_GJ_MAGIC;
    p.bytes = (uint32_t)o;
    p.ncomp = (uint32_t)nc;
    p.max_h = nc == 1 ? 1 : (uint32_t)ci->max_h_samp_factor;
    p.max_v = nc == 1 ? 1 : (uint32_t)ci->max_v_samp_factor;
    p.interval = plain ? 1 : R;
    p.check_units = rc_.rows * (a1 - a0);
    p.mcu_w = g.mcu_w, p.mcu_h = g.mcu_h;
    p.mcu_cols = c1 - c0, p.mcu_rows = r1 - r0;
    p.nintervals = nint;
    p.width = g.width, p.height = g.height;
    p.rx = c0 * g.mcu_w, p.ry = r0 * g.mcu_h;
    p.layout = t->layout;
    p.pad = t->pad[0] | (uint32_t)t->pad[1] << 8 | (uint32_t)t->pad[2] << 16;
    p.scratch = (uint32_t)scratch;
    p.engine = (uint32_t)engine;
    p.data_bytes = (uint32_t)data;
    p.plain = (uint32_t)plain;

    memcpy(out + p.off_huff, ht, (size_t)nh * sizeof(rf_gj_huff));
    memcpy(out + p.off_quant, qt, (size_t)nq * 64 * sizeof(uint16_t));
    uint32_t *span = (uint32_t *)(out + p.off_span);
    uint8_t *d = out + p.off_data;
    uint32_t at = 0, n = 0;
    if (engine) { /* its file, and the units of its check (set after the header's copy) */
        memcpy(d, jpeg, len);
        rf_gj_unit *u = (rf_gj_unit *)span;
        if (!g.restart) /* the scan from its first MCU */
            u[0] = (rf_gj_unit){(uint32_t)scan, (uint32_t)rb->data_end, (uint32_t)rc_.mcus, 0};
        for (uint32_t r = ck_r0; restarts && r < ck_r0 + rc_.rows; r++) /* the region's */
            for (uint32_t a = a0; a < a1; a++, n++) {
                uint64_t i = (uint64_t)r * per_row + a;
                u[n] = (rf_gj_unit){rb->span[2 * i], rb->span[2 * i + 1], R, RF_GJ_CHECK_END};
            }
        for (uint32_t i = 0; g.restart && !restarts && i < nint; i++, n++) /* from the first */
            u[n] = (rf_gj_unit){rb->span[2 * i], rb->span[2 * i + 1],
                                (uint32_t)RF_MIN(g.restart, rc_.mcus - (uint64_t)i * g.restart),
                                RF_GJ_CHECK_END};
        if (n) /* libjpeg reads no marker after the last interval it decodes */
            u[n - 1].flags = 0;
        p.nintervals = n ? n : 1;
    }
    if (plain)
        plain_copy(&w, r1 - r0, d, (rf_gj_seg *)(out + p.off_span));
    for (uint32_t r = r0; r < r1 && !engine && !plain; r++)
        for (uint32_t a = a0; a < a1; a++) {
            uint64_t i = (uint64_t)r * per_row + a;
            uint32_t s = rb->span[2 * i], e = rb->span[2 * i + 1];
            span[n++] = at;
            memcpy(d + at, jpeg + s, e - s);
            at += e - s;
        }
    if (!plain && !engine)
        span[n] = at;
    size_t plans = p.off_views + align8((size_t)nout * sizeof(rf_gj_view));
    for (uint32_t k = 0; k < nout; k++)
        put_view(out, &p, &outs[k], k, &inter, &plans);
    memcpy(out, &p, sizeof p);
    /* Without restart markers an engine packet's check is one chain of codes over the whole
     * scan, which on the GPU is one thread's walk, far slower than this thread's: checked here,
     * and on the GPU only when found bad, where the check fails again and the verdict takes
     * the CPU's reason (gpu_verdict.c; docs/gpu-decode.md, "The engines' calls and their
     * check"). */
    if (engine && !g.restart && rf_gj_engine_check(out, 0, ht) == RF_GJ_OK)
        ((rf_gj_packet *)out)->nintervals = 0;
    *bytes = p.bytes;
    return 0;
}

/* ---- host driver ---- */

int rf_gj_decode_host(const uint8_t *packet, uint8_t *scratch, uint8_t *out,
                      uint32_t *bad_interval)
{
    const rf_gj_packet *p = (const rf_gj_packet *)packet;
    if (p->magic != RF_GJ_MAGIC || p->scratch > RF_GJ_SCRATCH ||
        !rf_gj_views_ok(packet, UINT32_MAX, UINT64_MAX / 2))
        return RF_GJ_BAD_PACKET;
    const rf_gj_huff *huff = (const rf_gj_huff *)(packet + p->off_huff);
    const uint16_t *quant = (const uint16_t *)(packet + p->off_quant);
    for (uint32_t k = 0; k < p->nintervals; k++) {
        int st = p->engine  ? rf_gj_engine_check(packet, k, huff)
                 : p->plain ? rf_gj_segment(packet, k, scratch, huff, quant)
                            : rf_gj_counted(p, k, rf_gj_interval(packet, k, scratch, huff,
                                                                 quant));
        if (st) {
            if (bad_interval)
                *bad_interval = k;
            return st;
        }
    }
    for (uint32_t k = 0; k < p->nviews; k++) {
        const rf_gj_view *v = rf_gj_view_of(packet, k);
        uint32_t w = (uint32_t)(v->xhi - v->xlo);
        for (uint32_t i = 0; i < v->out_h; i++) {
            uint8_t *row = scratch + v->inter + (size_t)i * w * 3;
            for (uint32_t x = 0; x < w; x++)
                rf_gj_vpass(packet, v, scratch, i, v->xlo + (int32_t)x, row + 3 * x);
        }
        for (uint32_t y = 0; y < v->canvas_h; y++)
            for (uint32_t x = 0; x < v->canvas_w; x++)
                rf_gj_out(packet, v, scratch, y, x, out);
    }
    return RF_GJ_OK;
}
