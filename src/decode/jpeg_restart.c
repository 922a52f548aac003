/* jpeg_restart.c — region JPEGs cut along restart intervals (jpeg_restart.h says why that
 * works), and the lossless transcode that puts restart markers into a file.
 *
 * DESIGN
 *  - rf_jpeg_region is pure byte work: walk the segments to the SOS, find the RSTn markers with
 *    memchr (in entropy-coded data 0xFF is followed by 0x00 or a marker), copy the wanted
 *    intervals renumbered RST0, RST1, ... (libjpeg insists on the sequence).
 *  - Anything unexpected returns 1 and the caller decodes the whole file, so a malformed file
 *    gets libjpeg's own diagnosis and never a half-built region.
 *  - The transcode copies quantized DCT blocks without an IDCT: the same pixels. */
#include "decode/jpeg_restart.h"

#include "decode/jpeg_dest.h"

#include <setjmp.h>
#include <stdio.h> /* jpeglib.h needs FILE */
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>

uint32_t rf_jpeg_mcu_cols(const rf_jpeg_geom *g) { return (g->width + g->mcu_w - 1) / g->mcu_w; }
uint32_t rf_jpeg_mcu_rows(const rf_jpeg_geom *g) { return (g->height + g->mcu_h - 1) / g->mcu_h; }

int rf_jpeg_geom_read(const struct jpeg_decompress_struct *ci, rf_jpeg_geom *g)
{
    /* A single-component scan's MCU is one block; an interleaved one spans the largest
     * sampling factors. */
    uint32_t one = ci->num_components == 1;
    *g = (rf_jpeg_geom){.width = ci->image_width, .height = ci->image_height,
                        .mcu_w = DCTSIZE * (one ? 1u : (uint32_t)ci->max_h_samp_factor),
                        .mcu_h = DCTSIZE * (one ? 1u : (uint32_t)ci->max_v_samp_factor),
                        .restart = ci->restart_interval};
    return g->restart && !ci->progressive_mode && !ci->arith_code &&
           ci->comps_in_scan == ci->num_components && rf_jpeg_mcu_cols(g) % g->restart == 0;
}

uint32_t rf_jpeg_rows_read(const rf_jpeg_geom *g, int context, uint32_t last)
{
    uint32_t rows = rf_jpeg_mcu_rows(g), y = last ? last - 1 : 0, k = y / g->mcu_h + 1;
    /* eight row groups per MCU row at full scale; the last waits for the next MCU row */
    if (context && (y % g->mcu_h) / (g->mcu_h / 8) == 7)
        k++;
    return k < rows ? k : rows;
}

uint32_t rf_jpeg_restart_for_row(uint32_t mcu_cols)
{
    for (uint32_t r = RF_RESTART_MIN_MCUS; r <= RF_RESTART_MAX_MCUS && r <= mcu_cols; r++)
        if (mcu_cols % r == 0)
            return r;
    return 1;
}

void rf_jpeg_region_cover(const rf_jpeg_geom *g, uint32_t num, uint32_t out_w, uint32_t out_h,
                          int32_t x0, int32_t x1, int32_t y0, int32_t y1, uint32_t *c0,
                          uint32_t *c1, uint32_t *r0, uint32_t *r1)
{
    uint32_t cols = rf_jpeg_mcu_cols(g), rows = rf_jpeg_mcu_rows(g), R = g->restart;
    /* MCUs in scaled pixels (whole: MCUs are multiples of 8 pixels, scales are n/8). */
    uint32_t mw = g->mcu_w * num / 8, mh = g->mcu_h * num / 8;
    uint32_t x_lo = (uint32_t)RF_MAX(x0 - 1, 0), x_hi = (uint32_t)RF_MIN(x1 + 1, (int32_t)out_w);
    uint32_t y_lo = (uint32_t)RF_MAX(y0 - 1, 0), y_hi = (uint32_t)RF_MIN(y1 + 1, (int32_t)out_h);
    *c0 = x_lo / mw / R * R;
    *c1 = RF_MIN((RF_MIN((x_hi + mw - 1) / mw, cols) + R - 1) / R * R, cols);
    *r0 = y_lo / mh;
    *r1 = RF_MIN((y_hi + mh - 1) / mh, rows);
}

void rf_region_buf_free(rf_region_buf *b)
{
    if (b->walk)
        b->walk_free(b->walk);
    free(b->jpeg);
    free(b->span);
    memset(b, 0, sizeof *b);
}

static uint32_t be16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }

int rf_jpeg_segment(const uint8_t *j, size_t len, size_t *pos, uint32_t *m, size_t *at)
{
    size_t p = *pos;
    for (;;) {
        /* libjpeg's next_marker: bytes that are no marker are skipped (its "extraneous bytes",
         * which cost no pixel), 0xFF 0x00 too, then the fill bytes before the marker */
        while (p < len && j[p] != 0xFF)
            p++;
        while (p + 1 < len && j[p + 1] == 0xFF)
            p++;
        if (p + 1 >= len)
            return 1;
        uint32_t mk = j[p + 1];
        if (mk == 0x00 || mk == 0x01 || (mk >= 0xD0 && mk <= 0xD7)) {
            p += 2; /* stuffing, or a marker without parameters, which libjpeg passes over */
            continue;
        }
        if (mk == 0xD8 || mk == 0xD9 || p + 4 > len)
            return 1;
        /* A length under 2 (a comment or APPn segment: libjpeg refuses it in the segments it
         * parses) is its length field alone: libjpeg reads on from there. */
        uint32_t seg = RF_MAX(be16(j + p + 2), 2u);
        if (p + 2 + seg > len)
            return 1;
        *m = mk, *at = p, *pos = p + 2 + seg;
        return 0;
    }
}

/* Offsets of the frame header (one SOFn segment of at least 8 bytes; its marker in *sof_m) and
 * of the first entropy byte (end of the first SOS segment). 1 when the segments up to the scan
 * do not parse, or hold a second frame header or a marker that has no business there. */
static int walk_to_scan(const uint8_t *j, size_t len, size_t *sof, uint32_t *sof_m, size_t *data)
{
    if (len < 4 || j[0] != 0xFF || j[1] != 0xD8)
        return 1;
    size_t p = 2, at;
    uint32_t m;
    *sof = 0;
    while (rf_jpeg_segment(j, len, &p, &m, &at) == 0) {
        if (rf_jpeg_is_sof(m)) {
            if (*sof || be16(j + at + 2) < 8)
                return 1;
            *sof = at, *sof_m = m;
        }
        if (m == 0xDA) {
            *data = p;
            return *sof ? 0 : 1;
        }
    }
    return 1;
}

int rf_jpeg_scan_data(const uint8_t *jpeg, size_t len, size_t *data)
{
    size_t sof;
    uint32_t m;
    return walk_to_scan(jpeg, len, &sof, &m, data);
}

/* The same for a file rf_jpeg_region can cut: a baseline or extended Huffman frame (SOF0/1). */
static int walk_header(const uint8_t *j, size_t len, size_t *sof, size_t *data)
{
    uint32_t m;
    return walk_to_scan(j, len, sof, &m, data) || (m != 0xC0 && m != 0xC1);
}

/* Markers libjpeg accepts between the last scan and EOI (it reads them as it would before a
 * scan): tables, DRI, COM and APPn, each a whole length-prefixed segment. */
static int tail_marker_ok(uint32_t m)
{
    return m == 0xC4 || m == 0xDB || m == 0xDD || m == 0xFE || (m >= 0xE0 && m <= 0xEF);
}

/* From the first marker after the entropy-coded data (at `at`, code m) to EOI; *end: the
 * offset just past the EOI. */
static int check_tail(const uint8_t *j, size_t len, size_t at, uint32_t m, size_t *end,
                      rf_err *err)
{
    size_t first = at;
    for (;;) {
        if (m == 0xD9) {
            *end = at + 2;
            return 0;
        }
        if (!tail_marker_ok(m))
            return rf_seterr(err, RF_EDECODE,
                             "corrupt JPEG data: marker 0xFF%02X at byte %zu does not belong in "
                             "the entropy-coded data (damaged or overwritten bytes)", m, at);
        size_t p = at + 2;
        uint32_t seg = p + 2 <= len ? be16(j + p) : 0;
        p += seg;
        while (p + 1 < len && j[p] == 0xFF && j[p + 1] == 0xFF)
            p++;
        if (seg < 2 || p + 2 > len || j[p] != 0xFF)
            return rf_seterr(err, RF_EDECODE,
                             "corrupt JPEG data: marker 0xFF%02X at byte %zu is not followed by "
                             "whole marker segments up to EOI (a marker inside the "
                             "entropy-coded data, or the file is cut short)",
                             (unsigned)j[first + 1], first);
        at = p, m = j[p + 1];
    }
}

int rf_jpeg_scan_check(const uint8_t *jpeg, size_t len, uint32_t restart_interval,
                       uint64_t mcus, rf_region_buf *b, rf_err *err)
{
    size_t sof, data;
    uint32_t sof_m;
    /* libjpeg parsed these segments already: a failure here is a file it read differently */
    if (walk_to_scan(jpeg, len, &sof, &sof_m, &data))
        return rf_seterr(err, RF_EDECODE, "corrupt JPEG: the marker segments before the scan do "
                         "not parse");
    uint64_t R = restart_interval, intervals = R ? (mcus + R - 1) / R : 1, k = 0;
    int keep = b && R && len <= UINT32_MAX;
    if (keep && rf_grow(&b->span, &b->span_cap, 2 * intervals, sizeof *b->span))
        return rf_seterr(err, RF_ENOMEM, "out of memory for %llu restart intervals",
                         (unsigned long long)intervals);
    if (keep)
        b->span[0] = (uint32_t)data;
    for (size_t p = data;;) {
        const uint8_t *ff = memchr(jpeg + p, 0xFF, len - p);
        size_t at = ff ? (size_t)(ff - jpeg) : len;
        for (p = at; p + 1 < len && jpeg[p + 1] == 0xFF;)
            p++;
        if (p + 1 >= len)
            return rf_seterr(err, RF_EDECODE, "Premature end of JPEG file: no EOI marker, the "
                             "entropy-coded data runs to the end of the %zu bytes (truncated?)",
                             len);
        uint32_t m = jpeg[p + 1];
        p += 2;
        if (m == 0x00)
            continue; /* a stuffed 0xFF data byte */
        if (m < 0xD0 || m > 0xD7) {
            size_t end;
            if (m != 0xD9 && !tail_marker_ok(m))
                return check_tail(jpeg, len, p - 2, m, &end, err); /* names the stray marker */
            if (k + 1 != intervals)
                return rf_seterr(err, RF_EDECODE,
                                 "corrupt JPEG data: the entropy-coded data ends at byte %zu "
                                 "(marker 0xFF%02X) after %llu of its %llu restart intervals",
                                 at, m, (unsigned long long)k + 1,
                                 (unsigned long long)intervals);
            if (keep) {
                b->span[2 * k + 1] = (uint32_t)at;
                b->of = jpeg, b->nspans = intervals, b->sof = sof, b->data = data;
            }
            int rc = check_tail(jpeg, len, p - 2, m, &end, err);
            if (rc == 0 && b)
                b->eoi_of = jpeg, b->eoi_end = end, b->data_end = at;
            return rc;
        }
        if (!R)
            return rf_seterr(err, RF_EDECODE, "corrupt JPEG data: restart marker RST%u at byte "
                             "%zu in a file without a restart interval", m - 0xD0, p - 2);
        if (k + 1 >= intervals)
            return rf_seterr(err, RF_EDECODE, "corrupt JPEG data: restart marker RST%u at byte "
                             "%zu where the end of the data was due", m - 0xD0, p - 2);
        if (m - 0xD0 != (k & 7))
            return rf_seterr(err, RF_EDECODE, "corrupt JPEG data: restart marker RST%u at byte "
                             "%zu where RST%u was due", m - 0xD0, p - 2, (unsigned)(k & 7));
        if (keep) {
            b->span[2 * k + 1] = (uint32_t)at;
            b->span[2 * k + 2] = (uint32_t)p;
        }
        k++;
    }
}

int rf_jpeg_spans(const uint8_t *jpeg, size_t len, const rf_jpeg_geom *g, uint64_t last,
                  rf_region_buf *b, size_t *sof, size_t *data)
{
    if (b->of == jpeg && b->nspans > last) { /* rf_jpeg_scan_check walked this image already */
        *sof = b->sof, *data = b->data;
        return 0;
    }
    if (walk_header(jpeg, len, sof, data) || be16(jpeg + *sof + 5) != g->height ||
        be16(jpeg + *sof + 7) != g->width || len > UINT32_MAX)
        return 1;
    if (rf_grow(&b->span, &b->span_cap, 2 * (last + 1), sizeof *b->span))
        return RF_ENOMEM;
    /* Find where each interval up to `last` starts and ends. */
    size_t p = *data;
    uint64_t k = 0;
    b->span[0] = (uint32_t)p;
    while (k <= last) {
        const uint8_t *ff = memchr(jpeg + p, 0xFF, len - p);
        if (!ff)
            return 1; /* ran out before the interval ended: truncated */
        size_t end = (size_t)(ff - jpeg);
        p = end;
        while (p + 1 < len && jpeg[p + 1] == 0xFF)
            p++;
        if (p + 1 >= len)
            return 1;
        uint32_t m = jpeg[p + 1];
        p += 2;
        if (m == 0x00)
            continue; /* a stuffed 0xFF data byte */
        if (m >= 0xD0 && m <= 0xD7) {
            if ((m - 0xD0) != (k & 7))
                return 1;
        } else if (k != last || m != 0xD9) {
            return 1; /* EOI before the last interval we need, or a stray marker */
        }
        b->span[2 * k + 1] = (uint32_t)end;
        if (++k <= last)
            b->span[2 * k] = (uint32_t)p;
    }
    return 0;
}

int rf_jpeg_region(const uint8_t *jpeg, size_t len, const rf_jpeg_geom *g, uint32_t c0,
                   uint32_t c1, uint32_t r0, uint32_t r1, rf_region_buf *b)
{
    uint32_t cols = rf_jpeg_mcu_cols(g), rows = rf_jpeg_mcu_rows(g), R = g->restart;
    if (!R || cols % R || c0 % R || (c1 % R && c1 != cols) || c0 >= c1 || c1 > cols ||
        r0 >= r1 || r1 > rows)
        return 1;
    uint32_t per_row = cols / R, a0 = c0 / R, a1 = (c1 + R - 1) / R;
    uint64_t last = (uint64_t)(r1 - 1) * per_row + a1 - 1; /* last interval we need */
    size_t sof, data;
    int rc = rf_jpeg_spans(jpeg, len, g, last, b, &sof, &data);
    if (rc)
        return rc;
    /* Header with the frame size patched, the intervals, EOI. */
    uint64_t need = data + 2;
    for (uint32_t r = r0; r < r1; r++)
        for (uint32_t a = a0; a < a1; a++) {
            uint64_t i = (uint64_t)r * per_row + a;
            need += b->span[2 * i + 1] - b->span[2 * i] + 2;
        }
    if (rf_reserve(&b->jpeg, &b->cap, need, 1))
        return RF_ENOMEM;
    uint8_t *o = b->jpeg;
    memcpy(o, jpeg, data);
    uint32_t w = RF_MIN(g->width, c1 * g->mcu_w) - c0 * g->mcu_w;
    uint32_t h = RF_MIN(g->height, r1 * g->mcu_h) - r0 * g->mcu_h;
    o[sof + 5] = (uint8_t)(h >> 8), o[sof + 6] = (uint8_t)h;
    o[sof + 7] = (uint8_t)(w >> 8), o[sof + 8] = (uint8_t)w;
    o += data;
    uint32_t n = 0, total = (r1 - r0) * (a1 - a0);
    for (uint32_t r = r0; r < r1; r++)
        for (uint32_t a = a0; a < a1; a++) {
            uint64_t i = (uint64_t)r * per_row + a;
            size_t s = b->span[2 * i], e = b->span[2 * i + 1];
            memcpy(o, jpeg + s, e - s);
            o += e - s;
            if (++n < total)
                *o++ = 0xFF, *o++ = (uint8_t)(0xD0 + ((n - 1) & 7));
        }
    *o++ = 0xFF, *o++ = 0xD9;
    b->len = (size_t)(o - b->jpeg);
    return 0;
}

/* ---- lossless transcode ---- */

typedef struct tc_err {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
} tc_err;

static void tc_error_exit(j_common_ptr c) { longjmp(((tc_err *)c->err)->jb, 1); }

/* Warnings (corrupt data) fail the transcode: packing a damaged image silently is worse. */
static void tc_emit(j_common_ptr c, int level)
{
    if (level < 0)
        longjmp(((tc_err *)c->err)->jb, 1);
}

/* Everything the guarded region touches lives here, so nothing is a modified local at longjmp. */
typedef struct tc_state {
    struct jpeg_decompress_struct src;
    struct jpeg_compress_struct dst;
    tc_err jerr; /* shared: one thread drives both objects */
    rf_jpeg_dest dest;
} tc_state;

/* A progressive file with coefficients never sent or not to full precision (coef_bits per
 * component and coefficient: 0 complete, -1 never sent): jpeg_restart.h says why it is kept. */
static int progressive_incomplete(const struct jpeg_decompress_struct *d)
{
    for (int c = 0; d->progressive_mode && d->coef_bits && c < d->num_components; c++)
        for (int k = 0; k < DCTSIZE2; k++)
            if (d->coef_bits[c][k] != 0)
                return 1;
    return 0;
}

int rf_jpeg_restart_transcode(const uint8_t *jpeg, size_t len, uint32_t interval, int optimize,
                              uint8_t **out, size_t *out_len, rf_err *err)
{
    *out = NULL, *out_len = 0;
    tc_state *s = calloc(1, sizeof *s);
    /* restart markers add ~1%; one doubling covers the rest */
    if (!s || rf_jpeg_dest_init(&s->dest, len + 4096)) {
        free(s);
        return rf_seterr(err, RF_ENOMEM, "out of memory for a %zu-byte JPEG transcode", len);
    }
    s->src.err = s->dst.err = jpeg_std_error(&s->jerr.pub);
    s->jerr.pub.error_exit = tc_error_exit;
    s->jerr.pub.emit_message = tc_emit;
    if (setjmp(s->jerr.jb)) {
        char text[JMSG_LENGTH_MAX];
        s->jerr.pub.format_message((j_common_ptr)&s->src, text);
        int code = s->jerr.pub.msg_code == JERR_OUT_OF_MEMORY ? RF_ENOMEM : RF_EDECODE;
        jpeg_destroy_compress(&s->dst);
        jpeg_destroy_decompress(&s->src);
        free(s->dest.buf);
        free(s);
        return rf_seterr(err, code, "restart transcode: %s", text);
    }
    jpeg_create_decompress(&s->src);
    jpeg_create_compress(&s->dst);
    jpeg_mem_src(&s->src, jpeg, (unsigned long)len);
    jpeg_save_markers(&s->src, JPEG_COM, 0xFFFF);
    for (int m = 1; m < 16; m++)
        if (m != 14) /* JFIF (APP0) and Adobe (APP14) are written by libjpeg to match */
            jpeg_save_markers(&s->src, JPEG_APP0 + m, 0xFFFF);
    jpeg_read_header(&s->src, TRUE);
    jvirt_barray_ptr *coef = jpeg_read_coefficients(&s->src);
    if (progressive_incomplete(&s->src)) {
        jpeg_destroy_compress(&s->dst);
        jpeg_destroy_decompress(&s->src);
        free(s->dest.buf);
        free(s);
        return rf_seterr(err, RF_JPEG_KEEP, "a progressive JPEG whose scans stop before every "
                         "coefficient is complete: libjpeg smooths such an image as it decodes "
                         "it, a baseline rewrite would not, so its pixels would change; kept "
                         "as it is");
    }
    jpeg_copy_critical_parameters(&s->src, &s->dst);
    s->dst.optimize_coding = optimize ? TRUE : FALSE;
    rf_jpeg_geom g; /* the output keeps the input's size and sampling, so its MCU row too */
    rf_jpeg_geom_read(&s->src, &g);
    s->dst.restart_interval = interval ? interval : rf_jpeg_restart_for_row(rf_jpeg_mcu_cols(&g));
    s->dst.dest = &s->dest.pub;
    jpeg_write_coefficients(&s->dst, coef);
    for (jpeg_saved_marker_ptr m = s->src.marker_list; m; m = m->next)
        jpeg_write_marker(&s->dst, m->marker, m->data, m->data_length);
    jpeg_finish_compress(&s->dst);
    jpeg_finish_decompress(&s->src);
    *out = s->dest.buf, *out_len = rf_jpeg_dest_len(&s->dest);
    jpeg_destroy_compress(&s->dst);
    jpeg_destroy_decompress(&s->src);
    free(s);
    return 0;
}
