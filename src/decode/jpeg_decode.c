/* jpeg_decode.c — the libjpeg-turbo decoder: callbacks, lifetime and size limits, the guarded
 * region every decode runs in, scanline reads, and the whole-image decodes.
 *
 * DESIGN
 *  - An rf_decoder belongs to one thread at a time (the decode pool gives each worker its own)
 *    and owns its decompressor and scratch, which only grows.
 *  - Errors: libjpeg's callbacks must not return; ours longjmp to the single setjmp in
 *    rf_dec_guarded(), which aborts the decompressor for reuse. Warnings (corrupt data,
 *    premature end) are errors: a silently half-grey image is worse than a named bad member.
 *    State under that setjmp lives in the decoder or a job struct, never in rf_dec_guarded()'s
 *    locals, so nothing needs to be volatile.
 */
#include "decode/decoder.h"

#include <stdio.h> /* jpeglib.h needs FILE */
#include <stdlib.h>
#include <string.h>

#include <jerror.h>

/* jpegint.h's DSTATE_INHEADER (libjpeg 6b's ABI, kept by libjpeg-turbo): reading the header's
 * markers, before the first scan. */
#define RF_DSTATE_INHEADER 201

/* Headroom over a full coefficient image (progressive JPEGs buffer all of it) at max_pixels. */
#define MEM_SLACK_BYTES (64ull << 20)

/* ---- libjpeg callbacks ---- */

static int code_for(int msg_code)
{
    switch (msg_code) {
    case JERR_OUT_OF_MEMORY: return RF_ENOMEM;
    case JERR_NO_BACKING_STORE: /* max_memory_to_use exceeded: libjpeg wanted a temp file */
    case JERR_IMAGE_TOO_BIG:
    case JERR_WIDTH_OVERFLOW: return RF_ELIMIT;
    default: return RF_EDECODE;
    }
}

static void fail_jump(j_common_ptr c, const char *what)
{
    rf_jerr *e = (rf_jerr *)c->err;
    char text[JMSG_LENGTH_MAX];
    c->err->format_message(c, text);
    snprintf(e->msg, sizeof e->msg, "%s: %s", what, text);
    e->code = code_for(c->err->msg_code);
    longjmp(e->jb, 1);
}

static void on_error_exit(j_common_ptr c) { fail_jump(c, "libjpeg error"); }

/* The kind of a warning that costs no pixel, or -1. Junk bytes between the header's segments
 * (or a COM/APPn length under 2) decode to the same pixels, as with every other decoder; the
 * other kinds name metadata libjpeg does not need. Bytes left over inside the scan are what
 * damaged entropy-coded data leave too, so there the warning stays an error. */
static int recovered_kind(j_common_ptr c)
{
    switch (c->err->msg_code) {
    case JWRN_EXTRANEOUS_DATA:
        return c->global_state == RF_DSTATE_INHEADER ? RF_RECOVERED_HEADER_BYTES : -1;
    case JWRN_JFIF_MAJOR: return RF_RECOVERED_JFIF_VERSION;
    case JWRN_BOGUS_ICC: return RF_RECOVERED_ICC;
    default: return -1;
    }
}

/* level < 0 is a warning: one that costs no pixel is recorded, any other fails the sample;
 * >= 0 are trace messages. */
static void on_emit_message(j_common_ptr c, int level)
{
    rf_jerr *e = (rf_jerr *)c->err;
    if (level >= 0 || e->lenient)
        return;
    int kind = recovered_kind(c);
    if (kind < 0)
        fail_jump(c, "libjpeg warning");
    e->recovered |= 1u << kind;
}

/* Called between input chunks of a multi-scan image: stops a file of thousands of tiny
 * progressive scans before it burns seconds of CPU. */
static void on_progress(j_common_ptr c)
{
    j_decompress_ptr di = (j_decompress_ptr)c;
    rf_jprogress *p = (rf_jprogress *)c->progress;
    if (!c->is_decompressor || (uint32_t)di->input_scan_number <= p->max_scans)
        return;
    rf_jerr *e = (rf_jerr *)c->err;
    snprintf(e->msg, sizeof e->msg, "progressive JPEG has more than %u scans", p->max_scans);
    e->code = RF_ELIMIT;
    longjmp(e->jb, 1);
}

int rf_dec_check_size(const rf_decoder *d, const char *what, uint64_t w, uint64_t h,
                      rf_err *err)
{
    if (w <= d->lim.max_dim && h <= d->lim.max_dim && w * h <= d->lim.max_pixels)
        return 0;
    return rf_seterr(err, RF_ELIMIT, "%s is %llux%llu: over the limit (max_dim %u, max_pixels "
                     "%llu)", what, (unsigned long long)w, (unsigned long long)h,
                     d->lim.max_dim, (unsigned long long)d->lim.max_pixels);
}

/* ---- decoder lifetime ---- */

/* jpeg_create_decompress itself can fail (out of memory), through error_exit. */
static int init_jpeg(rf_decoder *d)
{
    d->cinfo.err = jpeg_std_error(&d->jerr.pub);
    d->jerr.pub.error_exit = on_error_exit;
    d->jerr.pub.emit_message = on_emit_message;
    if (setjmp(d->jerr.jb)) {
        jpeg_destroy_decompress(&d->cinfo);
        return -1;
    }
    jpeg_create_decompress(&d->cinfo);
    d->cinfo.client_data = d;
    d->progress.pub.progress_monitor = on_progress;
    d->progress.max_scans = d->lim.max_scans;
    d->cinfo.progress = &d->progress.pub;
    uint64_t mem = d->lim.max_pixels > (1ull << 40) ? (1ull << 43) : d->lim.max_pixels * 6;
    d->cinfo.mem->max_memory_to_use = (long)(mem + MEM_SLACK_BYTES);
    return 0;
}

rf_decoder *rf_decoder_create(const rf_decode_limits *lim)
{
    rf_decoder *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    if (lim)
        d->lim = *lim;
    if (!d->lim.max_pixels)
        d->lim.max_pixels = RF_DEFAULT_MAX_IMAGE_PIXELS;
    if (!d->lim.max_dim)
        d->lim.max_dim = RF_DEFAULT_MAX_IMAGE_DIM;
    if (!d->lim.max_scans)
        d->lim.max_scans = RF_DEFAULT_MAX_SCANS;
    d->max_denom = 8;
    if (init_jpeg(d)) {
        free(d);
        return NULL;
    }
    return d;
}

uint32_t rf_decoder_recovered(const rf_decoder *d) { return d->jerr.recovered; }
void rf_decoder_set_recovered(rf_decoder *d, uint32_t mask) { d->jerr.recovered = mask; }

void rf_decoder_set_sync(rf_decoder *d, const struct rf_sync_entry *e)
{
    d->region.sync = e;
    d->region.sync_result = RF_SYNC_UNUSED;
}

uint32_t rf_decoder_sync_result(rf_decoder *d)
{
    uint32_t r = d->region.sync_result;
    d->region.sync = NULL;
    d->region.sync_result = RF_SYNC_UNUSED;
    return r;
}

typedef struct header_job {
    const uint8_t *jpeg;
    size_t len;
    rf_decode_header_fn fn;
    void *ctx;
} header_job;

static int header_run(rf_decoder *d, void *job, rf_err *err)
{
    header_job *j = job;
    int rc = rf_dec_read_header(d, err);
    if (rc || (rc = rf_dec_check_scan(d, j->jpeg, j->len, err)) != 0)
        return rc;
    rc = j->fn(j->ctx, &d->cinfo, j->jpeg, j->len, &d->region);
    return rc ? rf_seterr(err, rc, "%s", rc == RF_ENOMEM ? "out of memory" : "header work failed")
              : 0;
}

int rf_decode_header_then(rf_decoder *d, const uint8_t *jpeg, size_t len, rf_decode_header_fn fn,
                          void *ctx, rf_err *err)
{
    header_job j = {jpeg, len, fn, ctx};
    return rf_dec_guarded(d, jpeg, len, header_run, &j, err);
}

void rf_decoder_destroy(rf_decoder *d)
{
    if (!d)
        return;
    jpeg_destroy_decompress(&d->cinfo);
    rf_axis_free(&d->h);
    rf_axis_free(&d->v);
    for (uint32_t k = 0; k < RF_VIEWS_MAX; k++)
        rf_axis_free(&d->views.ph[k]), rf_axis_free(&d->views.pv[k]);
    free(d->line);
    free(d->rgb);
    free(d->ring);
    free(d->vrow);
    free(d->orow);
    free(d->rows);
    free(d->acc);
    free(d->img);
    free(d->mask_raw);
    free(d->mask_px);
    free(d->mask_cols);
    rf_region_buf_free(&d->region);
    free(d);
}

void rf_decoder_set_max_scale_denom(rf_decoder *d, uint32_t denom)
{
    d->max_denom = denom >= 8 ? 8 : denom >= 4 ? 4 : denom >= 2 ? 2 : 1;
}

void rf_decoder_set_flags(rf_decoder *d, uint32_t flags) { d->flags = flags; }

/* ---- the guarded region ---- */

/* Every image starts from a new decompressor, as djpeg's does: a reused one keeps the previous
 * image's quantization and Huffman tables (abbreviated datastreams rely on that), so a file
 * without its own DQT or DHT would decode with whatever the same thread decoded before, and
 * pixels and skip counts would depend on the thread count. Creating one is cheap next to the
 * cheapest use of it (a header parse). */
static int fresh_jpeg(rf_decoder *d)
{
    jpeg_destroy_decompress(&d->cinfo);
    return init_jpeg(d);
}

/* The only setjmp: runs fn with libjpeg errors turned into a return, and always leaves the
 * decompressor aborted (idle, reusable) whichever way fn ends. */
int rf_dec_guarded(rf_decoder *d, const uint8_t *jpeg, size_t len, rf_dec_job_fn fn, void *job,
                   rf_err *err)
{
    if (!jpeg || len == 0)
        return rf_seterr(err, RF_EDECODE, "empty input: not a JPEG");
    if (fresh_jpeg(d))
        return rf_seterr(err, RF_ENOMEM, "out of memory for a JPEG decompressor");
    d->region.of = d->region.eoi_of = NULL;
    d->jerr.recovered = 0;
    if (setjmp(d->jerr.jb)) {
        jpeg_abort_decompress(&d->cinfo);
        return rf_seterr(err, d->jerr.code, "%s", d->jerr.msg);
    }
    jpeg_mem_src(&d->cinfo, jpeg, (unsigned long)len);
    int rc = fn(d, job, err);
    jpeg_abort_decompress(&d->cinfo);
    return rc;
}

/* Header, limits and output colour space; no image-sized allocation has happened yet. */
int rf_dec_read_header(rf_decoder *d, rf_err *err)
{
    struct jpeg_decompress_struct *ci = &d->cinfo;
    jpeg_read_header(ci, TRUE);
    if (rf_dec_check_size(d, "JPEG", ci->image_width, ci->image_height, err))
        return err->code;
    switch (ci->jpeg_color_space) {
    case JCS_GRAYSCALE: /* libjpeg-turbo replicates gray into RGB itself */
    case JCS_YCbCr:
    case JCS_RGB: ci->out_color_space = JCS_RGB; d->cmyk = 0; return 0;
    case JCS_CMYK:
    case JCS_YCCK: ci->out_color_space = JCS_CMYK; d->cmyk = 1; return 0;
    default:
        return rf_seterr(err, RF_EDECODE, "unsupported JPEG colour space %d with %d components",
                         (int)ci->jpeg_color_space, ci->num_components);
    }
}

/* Naive ink model, enough for the rare CMYK training image. Adobe writers store inverted
 * values (255 = no ink), which is what the multiply below wants. */
static void cmyk_to_rgb(const uint8_t *src, uint8_t *dst, size_t n, int adobe_inverted)
{
    for (size_t i = 0; i < n; i++, src += 4, dst += 3) {
        unsigned c = src[0], m = src[1], y = src[2], k = src[3];
        if (!adobe_inverted) {
            c = 255 - c, m = 255 - m, y = 255 - y, k = 255 - k;
        }
        dst[0] = (uint8_t)((c * k + 127) / 255);
        dst[1] = (uint8_t)((m * k + 127) / 255);
        dst[2] = (uint8_t)((y * k + 127) / 255);
    }
}

const uint8_t *rf_dec_read_rgb_line(rf_decoder *d, uint8_t *direct, rf_err *err)
{
    JSAMPROW row = d->cmyk ? d->line : direct;
    if (jpeg_read_scanlines(&d->cinfo, &row, 1) != 1) {
        rf_seterr(err, RF_EDECODE, "libjpeg returned no scanline");
        return NULL;
    }
    if (!d->cmyk)
        return direct;
    cmyk_to_rgb(d->line, d->rgb, d->cinfo.output_width, d->cinfo.saw_Adobe_marker);
    return d->rgb;
}

int rf_dec_ensure_line(rf_decoder *d, rf_err *err)
{
    size_t w = d->cinfo.output_width;
    if (rf_reserve(&d->line, &d->line_cap, w * 4, 1) ||
        rf_reserve(&d->rgb, &d->rgb_cap, w * 3, 1))
        return rf_seterr(err, RF_ENOMEM, "out of memory for a %zu-pixel scanline", w);
    return 0;
}

/* The rule for damage (docs/reliability.md): every decode checks the whole file's marker
 * structure (rf_jpeg_scan_check), whatever the crop. A multi-scan file needs nothing more:
 * jpeg_start_decompress reads all its scans, to EOI. */
int rf_dec_check_scan(rf_decoder *d, const uint8_t *jpeg, size_t len, rf_err *err)
{
    struct jpeg_decompress_struct *ci = &d->cinfo;
    if (ci->progressive_mode || ci->comps_in_scan < ci->num_components)
        return 0;
    rf_jpeg_geom g;
    rf_jpeg_geom_read(ci, &g);
    uint64_t mcus = (uint64_t)rf_jpeg_mcu_cols(&g) * rf_jpeg_mcu_rows(&g);
    return rf_jpeg_scan_check(jpeg, len, ci->restart_interval, mcus, &d->region, err);
}

/* ---- rf_decode_raw: the host's stand-in for the hardware decoder ---- */

typedef struct raw_job {
    uint32_t ncomp, width, height;
    const rf_decode_plane *planes;
} raw_job;

/* Raw output is each component's islow IDCT samples before upsampling, as the hardware
 * decoder's planar output: the packet's own passes finish the sample. */
static int raw_run(rf_decoder *d, void *job, rf_err *err)
{
    const raw_job *j = job;
    struct jpeg_decompress_struct *ci = &d->cinfo;
    int rc = rf_dec_read_header(d, err);
    if (rc)
        return rc;
    uint32_t nc = j->ncomp, widest = 0;
    if ((uint32_t)ci->num_components != nc || ci->image_width != j->width ||
        ci->image_height != j->height || nc > 3)
        return rf_seterr(err, RF_EDECODE, "the engine packet does not describe its JPEG");
    for (uint32_t c = 0; c < nc; c++) {
        if (ci->comp_info[c].v_samp_factor > 4)
            return rf_seterr(err, RF_EDECODE, "vertical sampling factor over 4");
        widest = RF_MAX(widest, j->planes[c].width);
    }
    /* Rows past a plane (a grayscale file's iMCU row can be 16 rows, its plane is cut at 8)
     * go to a junk row. */
    if (rf_reserve(&d->line, &d->line_cap, widest, 1))
        return rf_seterr(err, RF_ENOMEM, "out of memory for a %u-sample row", widest);
    ci->raw_data_out = TRUE;
    ci->dct_method = JDCT_ISLOW;
    jpeg_start_decompress(ci);
    JSAMPROW rows[3][4 * DCTSIZE];
    JSAMPARRAY planes[3] = {rows[0], rows[1], rows[2]};
    uint32_t step = (uint32_t)ci->max_v_samp_factor * DCTSIZE;
    for (uint32_t y = 0; ci->output_scanline < ci->output_height; y++) {
        for (uint32_t c = 0; c < nc; c++) {
            const rf_decode_plane *pc = &j->planes[c];
            uint32_t n = (uint32_t)ci->comp_info[c].v_samp_factor * DCTSIZE;
            for (uint32_t r = 0; r < n; r++) {
                uint64_t row = (uint64_t)y * n + r;
                rows[c][r] = row < pc->rows ? pc->base + row * pc->width : d->line;
            }
        }
        if (jpeg_read_raw_data(ci, planes, step) == 0)
            return rf_seterr(err, RF_EDECODE, "libjpeg returned no raw data");
    }
    return 0;
}

int rf_decode_raw(rf_decoder *d, const uint8_t *jpeg, size_t len, uint32_t ncomp, uint32_t width,
                  uint32_t height, const rf_decode_plane *planes, rf_err *err)
{
    raw_job j = {ncomp, width, height, planes};
    d->jerr.lenient = 1;
    int rc = rf_dec_guarded(d, jpeg, len, raw_run, &j, err);
    d->jerr.lenient = 0;
    return rc;
}

/* ---- rf_decode_full and rf_jpeg_probe ---- */

typedef struct full_job {
    uint8_t *buf; /* owned here until handed to the caller, so an error can free it */
    uint32_t w, h;
} full_job;

static int full_run(rf_decoder *d, void *job, rf_err *err)
{
    full_job *j = job;
    int rc = rf_dec_read_header(d, err);
    if (rc)
        return rc;
    jpeg_start_decompress(&d->cinfo);
    j->w = d->cinfo.output_width, j->h = d->cinfo.output_height;
    size_t stride = (size_t)j->w * 3;
    if (rf_dec_ensure_line(d, err))
        return err->code;
    if (!(j->buf = malloc(stride * j->h)))
        return rf_seterr(err, RF_ENOMEM, "out of memory for a %ux%u image", j->w, j->h);
    for (uint32_t y = 0; y < j->h; y++) {
        uint8_t *row = j->buf + y * stride;
        const uint8_t *src = rf_dec_read_rgb_line(d, row, err);
        if (!src)
            return err->code;
        if (src != row)
            memcpy(row, src, stride);
    }
    jpeg_finish_decompress(&d->cinfo); /* reads to EOI: trailing corruption is reported too */
    return 0;
}

int rf_decode_full(rf_decoder *d, const uint8_t *jpeg, size_t len, uint8_t **out, uint32_t *width,
                   uint32_t *height, rf_err *err)
{
    full_job j = {0};
    int rc = rf_dec_guarded(d, jpeg, len, full_run, &j, err);
    if (rc) {
        free(j.buf);
        *out = NULL;
        return rc;
    }
    *out = j.buf, *width = j.w, *height = j.h;
    return 0;
}

int rf_jpeg_soi_check(const uint8_t *data, uint64_t len, rf_err *err)
{
    if (rf_jpeg_has_soi(data, len))
        return 0;
    return rf_seterr(err, RF_EDECODE, "not a JPEG (%llu bytes, no SOI marker)",
                     (unsigned long long)len);
}

/* rf_decode_check: the loader's checks, then every scanline decoded and the file read to EOI. */
typedef struct check_job {
    const uint8_t *jpeg;
    size_t len;
    rf_jpeg_info *info;
} check_job;

static int check_run(rf_decoder *d, void *job, rf_err *err)
{
    check_job *j = job;
    struct jpeg_decompress_struct *ci = &d->cinfo;
    int rc = rf_dec_read_header(d, err);
    if (rc || (rc = rf_dec_check_scan(d, j->jpeg, j->len, err)) != 0)
        return rc;
    rf_jpeg_geom g;
    j->info->width = ci->image_width, j->info->height = ci->image_height;
    j->info->progressive = ci->progressive_mode ? 1 : 0;
    j->info->restart_interval = ci->restart_interval;
    j->info->region_ready = (uint32_t)rf_jpeg_geom_read(ci, &g);
    jpeg_start_decompress(ci);
    if (rf_dec_ensure_line(d, err))
        return err->code;
    while (ci->output_scanline < ci->output_height)
        if (!rf_dec_read_rgb_line(d, d->line, err))
            return err->code;
    jpeg_finish_decompress(ci);
    return 0;
}

int rf_decode_check(rf_decoder *d, const uint8_t *jpeg, size_t len, rf_jpeg_info *info,
                    rf_err *err)
{
    rf_jpeg_info i = {0};
    check_job j = {jpeg, len, &i};
    int rc = rf_dec_guarded(d, jpeg, len, check_run, &j, err);
    i.recovered = d->jerr.recovered;
    *info = rc ? (rf_jpeg_info){0} : i;
    return rc;
}

static int probe_run(rf_decoder *d, void *job, rf_err *err)
{
    (void)err;
    rf_jpeg_info *i = job;
    struct jpeg_decompress_struct *ci = &d->cinfo;
    jpeg_read_header(ci, TRUE);
    rf_jpeg_geom g;
    i->width = ci->image_width, i->height = ci->image_height;
    i->progressive = ci->progressive_mode ? 1 : 0;
    i->restart_interval = ci->restart_interval;
    i->region_ready = (uint32_t)rf_jpeg_geom_read(ci, &g);
    return 0;
}

int rf_jpeg_probe(rf_decoder *d, const uint8_t *jpeg, size_t len, rf_jpeg_info *info,
                  rf_err *err)
{
    rf_jpeg_info i = {0};
    int rc = rf_dec_guarded(d, jpeg, len, probe_run, &i, err);
    *info = rc ? (rf_jpeg_info){0} : i;
    return rc;
}
