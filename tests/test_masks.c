/* test_masks.c — segmentation masks (rf_config.mask, rf_batch.masks; issue 46): each tar
 * sample's KEY.seg.png (8-bit gray, 16-bit gray, palette of 8, 4 and 1 bits, written here with
 * libspng's encoder from a formula of the pixel) delivered with its image's crop, nearest
 * resize and flip, compared value by value with a reference computed here from the formula:
 * PIL's NEAREST over the crop box (the source pixel under each output pixel's centre), then
 * mirrored when the sample is flipped. RANDOM boxes are integral and the batch reports them
 * (test_crop_boxes checks them against the pixels); CENTER's fractional box is computed here
 * as torchvision's Resize + CenterCrop maps onto the source (python/tests/test_masks.py
 * compares with torchvision's resize-then-crop itself). Every path (CPU with and without DCT scaling,
 * gpu_decode, hw_decode_percent = 100 on the host backend's emulation) at 1 and 3 decode
 * threads, uint8 and int32; padding repeats carry their original's mask, blank padding is
 * mask_fill, skip mode's replacements their own. Each bad mask (missing, another size than
 * its image, RGB, 16 bits into uint8, 4-bit gray, not a PNG, damaged) is refused under FAIL
 * with a message naming the shard, the member and its offset, and counted under SKIP by its
 * reason; create refuses a folder source, an image extension, a fill over uint8. */
#include <check.h>
#include <math.h>
#include <spng.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/synth.h"
#include "ringfeed.h"
#include "ringfeed_shards.h"
#include "testutil.h"

#define N 22 /* samples: 4 ranks leave 2 padding repeats */
#define OUT_H 40
#define OUT_W 56

enum kind { GRAY8, PAL8, PAL4, PAL1, GRAY16, NKINDS };
/* What a test does to one sample's mask member (GOOD: as the formula says). */
enum fault { GOOD, MISSING, BIGGER, RGB, GRAY4, NOT_PNG, DAMAGED, WIDE, NFAULTS };

static uint32_t img_w(uint32_t id) { return 101 + (id * 37) % 220; }
static uint32_t img_h(uint32_t id) { return 81 + (id * 53) % 190; }
/* Sample id's mask kind: 16-bit gray only in the int32 data set (wide). */
static uint32_t kind_of(uint32_t id, int wide) { return id % (wide ? NKINDS : NKINDS - 1); }

/* The class value of pixel (x, y) of sample id's mask. */
static uint32_t mask_value(uint32_t id, uint32_t kind, uint32_t x, uint32_t y)
{
    switch (kind) {
    case GRAY8: return (x * 3 + y * 5 + id * 11) & 255;
    case PAL8: return (x + 2 * y + id) % 151;
    case PAL4: return (x / 2 + y + id) & 15;
    case PAL1: return (x / 3 + y / 2 + id) & 1;
    default: return (x * 257 + y * 1031 + id * 7919) & 0xffff;
    }
}

/* A w x h PNG of the kind (PNG_RGB: 8-bit RGB), rows packed as the PNG format wants. */
#define PNG_RGB 100
#define PNG_GRAY4 101
static uint8_t *encode_mask(uint32_t id, uint32_t kind, uint32_t w, uint32_t h, size_t *len)
{
    uint32_t bits = kind == GRAY16 ? 16 : kind == PAL4 || kind == PNG_GRAY4 ? 4 : kind == PAL1 ? 1
                                                                                              : 8;
    uint32_t chans = kind == PNG_RGB ? 3 : 1;
    size_t row = ((size_t)w * bits * chans + 7) / 8;
    uint8_t *px = calloc(row * h, 1);
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++) {
            uint32_t v = mask_value(id, kind == PNG_GRAY4 ? PAL4 : kind, x, y);
            uint8_t *r = px + row * y;
            if (bits == 16)
                ((uint16_t *)(void *)r)[x] = (uint16_t)v; /* host-endian: libspng swaps */
            else if (chans == 3)
                r[3 * x] = r[3 * x + 1] = r[3 * x + 2] = (uint8_t)v;
            else if (bits == 8)
                r[x] = (uint8_t)v;
            else
                r[x * bits / 8] |= (uint8_t)(v << (8 - bits - (x * bits) % 8));
        }
    spng_ctx *ctx = spng_ctx_new(SPNG_CTX_ENCODER);
    struct spng_ihdr ih = {.width = w, .height = h, .bit_depth = (uint8_t)bits};
    ih.color_type = kind == PNG_RGB ? SPNG_COLOR_TYPE_TRUECOLOR
                    : kind == GRAY8 || kind == GRAY16 || kind == PNG_GRAY4
                        ? SPNG_COLOR_TYPE_GRAYSCALE
                        : SPNG_COLOR_TYPE_INDEXED;
    ck_assert_int_eq(spng_set_option(ctx, SPNG_ENCODE_TO_BUFFER, 1), 0);
    ck_assert_int_eq(spng_set_ihdr(ctx, &ih), 0);
    if (ih.color_type == SPNG_COLOR_TYPE_INDEXED) {
        struct spng_plte pl = {.n_entries = 1u << (bits < 8 ? bits : 8)};
        for (uint32_t i = 0; i < pl.n_entries; i++) /* colours unlike the indices */
            pl.entries[i] = (struct spng_plte_entry){.red = (uint8_t)(255 - i),
                                                     .green = (uint8_t)(i * 7), .blue = 9};
        ck_assert_int_eq(spng_set_plte(ctx, &pl), 0);
    }
    ck_assert_int_eq(spng_encode_image(ctx, px, row * h, SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE), 0);
    int err = 0;
    uint8_t *out = spng_get_png_buffer(ctx, len, &err);
    ck_assert(out && !err);
    spng_ctx_free(ctx);
    free(px);
    return out;
}

/* dir/shard-0000.tar: N samples s000.. of a restart-marked JPEG (GPU decode takes it), a
 * label and KEY.seg.png, sample `bad` with the fault `fault`. Returns the shard's path. */
static char *make_shard(const char *dir, int wide, uint32_t bad, uint32_t fault)
{
    char *tar = malloc(strlen(dir) + 32), err[256];
    sprintf(tar, "%s/shard-0000.tar", dir);
    rf_shard_writer *w;
    ck_assert_int_eq(rf_shard_writer_open(tar, NULL, RF_SHARD_PAX, &w, err, sizeof err), 0);
    for (uint32_t id = 0; id < N; id++) {
        uint32_t iw = img_w(id), ih = img_h(id), f = id == bad ? fault : GOOD;
        uint8_t *rgb = malloc((size_t)iw * ih * 3), *jpg, *m;
        size_t jlen, mlen;
        void *rj;
        uint64_t rlen;
        rf_synth_image(300 + id, iw, ih, rgb);
        ck_assert_int_eq(rf_synth_jpeg(rgb, iw, ih, 90, 0, &jpg, &jlen), 0);
        ck_assert_int_eq(rf_jpeg_add_restarts(jpg, jlen, 1, 1, &rj, &rlen, err, sizeof err), 0);
        char key[16];
        snprintf(key, sizeof key, "s%03u", id);
        ck_assert_int_eq(rf_shard_writer_add(w, key, "jpg", rj, rlen, (int32_t)(id % 5)), 0);
        uint32_t kind = f == RGB     ? PNG_RGB
                        : f == GRAY4 ? PNG_GRAY4
                        : f == WIDE  ? GRAY16
                                     : kind_of(id, wide);
        m = f == NOT_PNG ? NULL : encode_mask(id, kind, iw + (f == BIGGER), ih, &mlen);
        if (f == DAMAGED) /* IDAT's data after its first bytes: its CRC no longer holds */
            m[mlen - 12 - 20] ^= 0x5a;
        if (f == NOT_PNG)
            ck_assert_int_eq(rf_shard_writer_add(w, key, "seg.png", jpg, jlen, -1), 0);
        else if (f != MISSING)
            ck_assert_int_eq(rf_shard_writer_add(w, key, "seg.png", m, mlen, -1), 0);
        free(rgb), free(jpg), free(rj), free(m);
    }
    ck_assert_int_eq(rf_shard_writer_close(w, err, sizeof err), 0);
    return tar;
}

/* Python's round(): halves to even. */
static double py_round(double x)
{
    double r = floor(x + 0.5);
    if (r - x == 0.5 && fmod(r, 2.0) != 0)
        r -= 1;
    return r;
}

/* The source box of sample (W x H): RANDOM's the batch reports; CENTER's torchvision's
 * Resize(R) (the longer side truncated) then CenterCrop, on the source, unrounded. */
static void box_of(uint32_t crop, uint32_t W, uint32_t H, const int32_t *reported, double *b)
{
    if (crop == RF_CROP_RANDOM) {
        for (int k = 0; k < 4; k++)
            b[k] = reported[k];
        return;
    }
    double R = 72, nw = W <= H ? R : floor(R * W / H), nh = W <= H ? floor(R * H / W) : R;
    double cw = fmin(OUT_W, nw), ch = fmin(OUT_H, nh);
    double left = py_round((nw - cw) / 2), top = py_round((nh - ch) / 2);
    double sx = W / nw, sy = H / nh;
    b[0] = left * sx, b[1] = top * sy, b[2] = cw * sx, b[3] = ch * sy;
}

typedef struct run_opts {
    const char *pattern;
    int wide; /* int32 masks and the data set with 16-bit ones */
    uint32_t crop, threads, gpu, hw, dct_off, world, rank, on_error, fill;
    uint64_t checked, padded, blanks;
} run_opts;

/* Sample i of batch b against the reference (blank: all fill). */
static void check_sample(const rf_batch *b, uint32_t i, run_opts *o)
{
    size_t px = (size_t)OUT_H * OUT_W;
    uint64_t id = b->sample_ids[i];
    const uint8_t *m8 = (const uint8_t *)b->masks + i * px;
    const int32_t *m32 = (const int32_t *)b->masks + i * px;
    for (uint32_t y = 0; y < OUT_H; y++)
        for (uint32_t x = 0; x < OUT_W; x++) {
            size_t k = (size_t)y * OUT_W + x;
            uint32_t got = o->wide ? (uint32_t)m32[k] : m8[k], want = o->fill;
            if (id != UINT64_MAX) {
                double box[4];
                uint32_t W = img_w((uint32_t)id), H = img_h((uint32_t)id);
                box_of(o->crop, W, H, b->crop_boxes + 4 * (size_t)i, box);
                uint32_t ox = b->flips[i] ? OUT_W - 1 - x : x;
                want = mask_value((uint32_t)id, kind_of((uint32_t)id, o->wide),
                                  rf_test_nearest(box[0], box[2], OUT_W, ox, W),
                                  rf_test_nearest(box[1], box[3], OUT_H, y, H));
            }
            ck_assert_msg(got == want, "sample %llu (padding %u, flip %u, crop %u): mask %u,%u "
                          "is %u, PIL's %u", (unsigned long long)id, b->is_padding[i],
                          b->flips[i], o->crop, x, y, got, want);
        }
    o->checked++;
    o->padded += b->is_padding[i];
    o->blanks += id == UINT64_MAX;
}

/* One epoch, every sample checked; returns the stats. */
static rf_stats run_epoch(run_opts *o)
{
    const char *pat;
    rf_config c = rf_test_host_config(&pat, o->pattern, 0);
    c.image_height = OUT_H, c.image_width = OUT_W, c.layout = RF_LAYOUT_NCHW;
    c.seed = 4242, c.epochs = 1, c.batch_size = 4, c.flip_prob = 0.5f;
    c.crop = o->crop, c.resize_shorter = o->crop == RF_CROP_CENTER ? 72 : 0;
    c.decode_threads = o->threads, c.gpu_decode = o->gpu, c.hw_decode_percent = o->hw;
    c.dct_scaling = o->dct_off ? RF_DCT_SCALING_OFF : RF_DCT_SCALING_AUTO;
    c.world_size = o->world ? o->world : 1, c.rank = o->rank, c.on_error = o->on_error;
    c.mask = "seg.png";
    c.mask_dtype = o->wide ? RF_DTYPE_INT32 : RF_DTYPE_UINT8;
    c.mask_fill = o->fill;
    rf_loader *ld = rf_test_create_ok(&c);
    rf_batch *b;
    int rc;
    while ((rc = rf_loader_next(ld, &b)) == 0 || rc == RF_EPOCH_END) {
        if (rc)
            continue;
        ck_assert_ptr_nonnull(b->masks);
        ck_assert_uint_eq(b->mask_dtype, o->wide ? RF_DTYPE_INT32 : RF_DTYPE_UINT8);
        for (uint32_t i = 0; i < b->count; i++)
            check_sample(b, i, o);
        rf_loader_release(ld, b, NULL);
    }
    ck_assert_msg(rc == RF_DONE, "%d %s", rc, rf_last_error(ld));
    rf_stats st;
    rf_stats_init(&st);
    ck_assert_int_eq(rf_loader_stats(ld, &st), 0);
    rf_loader_destroy(ld);
    return st;
}

static char g_pat8[600], g_pat32[600];

static void make_data(void)
{
    if (g_pat8[0])
        return;
    char *d8 = rf_test_mkdtemp("masks8"), *d32 = rf_test_mkdtemp("masks32");
    free(make_shard(d8, 0, UINT32_MAX, GOOD));
    free(make_shard(d32, 1, UINT32_MAX, GOOD));
    snprintf(g_pat8, sizeof g_pat8, "%s/shard-*.tar", d8);
    snprintf(g_pat32, sizeof g_pat32, "%s/shard-*.tar", d32);
    free(d8), free(d32);
}

/* RANDOM and CENTER, uint8 and int32, on every path at 1 and 3 threads: the reference's
 * values everywhere. */
START_TEST(masks_follow_the_image_on_every_path)
{
    make_data();
    const struct {
        uint32_t threads, gpu, hw, dct_off;
    } paths[] = {{1, 0, 0, 1}, {3, 0, 0, 0}, {1, 1, 0, 0}, {3, 1, 0, 0}, {1, 0, 100, 0},
                 {3, 0, 100, 0}};
    for (int wide = 0; wide <= 1; wide++)
        for (uint32_t crop = RF_CROP_RANDOM; crop <= RF_CROP_CENTER; crop++)
            for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++) {
                run_opts o = {.pattern = wide ? g_pat32 : g_pat8, .wide = wide, .crop = crop,
                              .threads = paths[p].threads, .gpu = paths[p].gpu,
                              .hw = paths[p].hw, .dct_off = paths[p].dct_off, .fill = 255};
                rf_stats st = run_epoch(&o);
                ck_assert_uint_eq(o.checked, N);
                if (paths[p].gpu)
                    ck_assert_uint_gt(st.gpu_decoded, 0);
                if (paths[p].hw)
                    ck_assert_uint_eq(st.hw_decoded, N);
                if (!paths[p].gpu && !paths[p].hw && !paths[p].dct_off && crop == RF_CROP_RANDOM)
                    ck_assert_uint_gt(st.dct_scaled, 0); /* the geometry is still full-scale */
            }
}
END_TEST

/* Padding repeats (4 ranks over 22 samples) carry their original's mask; skip mode's
 * replacement of a sample with a bad mask, or of one whose JPEG the GPU decode's verdict finds
 * damaged (a refill), delivers its own, and the blank padding that tops the epoch up is
 * mask_fill throughout. */
START_TEST(padding_blanks_and_replacements)
{
    make_data();
    for (int wide = 0; wide <= 1; wide++) {
        uint64_t padded = 0, checked = 0;
        for (uint32_t rank = 0; rank < 4; rank++) {
            run_opts o = {.pattern = wide ? g_pat32 : g_pat8, .wide = wide, .threads = 3,
                          .gpu = rank & 1, .world = 4, .rank = rank, .fill = 255};
            run_epoch(&o);
            padded += o.padded, checked += o.checked;
        }
        ck_assert_uint_eq(padded, 2);
        ck_assert_uint_eq(checked, 24);
    }
    char *dir = rf_test_mkdtemp("masks_skip");
    free(make_shard(dir, 1, 7, BIGGER));
    char pattern[600];
    snprintf(pattern, sizeof pattern, "%s/shard-*.tar", dir);
    for (uint32_t gpu = 0; gpu <= 1; gpu++) {
        run_opts o = {.pattern = pattern, .wide = 1, .threads = 3, .gpu = gpu,
                      .on_error = RF_ON_ERROR_SKIP, .fill = 1000};
        rf_stats st = run_epoch(&o);
        ck_assert_uint_eq(st.skipped, 1);
        ck_assert_uint_eq(st.skipped_by_reason[RF_SKIP_MASK], 1);
        ck_assert_uint_eq(o.checked, N); /* the replacement among them */
        ck_assert_uint_eq(o.blanks, 1);
    }
    free(dir);
    dir = rf_test_mkdtemp("masks_refill");
    char *shard = make_shard(dir, 0, UINT32_MAX, GOOD), key[64];
    ck_assert_int_eq(rf_test_damage_entropy(shard, 6, key, sizeof key), 0);
    ck_assert_str_eq(key, "s006");
    snprintf(pattern, sizeof pattern, "%s/shard-*.tar", dir);
    for (uint32_t gpu = 0; gpu <= 1; gpu++) {
        run_opts o = {.pattern = pattern, .threads = 3, .gpu = gpu, .dct_off = 1,
                      .on_error = RF_ON_ERROR_SKIP, .fill = 255};
        rf_stats st = run_epoch(&o);
        ck_assert_uint_eq(st.skipped_by_reason[RF_SKIP_CORRUPT], 1);
        ck_assert_uint_eq(o.checked, N);
        ck_assert_uint_eq(o.blanks, 1);
        if (gpu)
            ck_assert_uint_gt(st.gpu_decoded, 0);
    }
    free(shard);
    free(dir);
}
END_TEST

/* Each bad mask: its error under FAIL (code, words, the member and its offset, the shard)
 * and its reason under SKIP. */
static const struct {
    uint32_t fault, wide;
    int code;
    uint32_t reason;
    const char *want;
} g_bad[] = {
    {MISSING, 0, RF_EFORMAT, RF_SKIP_FIELD, "has no mask member s005.seg.png"},
    {BIGGER, 0, RF_EFORMAT, RF_SKIP_MASK, "must have its image's size"},
    {RGB, 1, RF_EFORMAT, RF_SKIP_MASK, "mask PNG is RGB"},
    {GRAY4, 1, RF_EFORMAT, RF_SKIP_MASK, "4-bit gray"},
    {NOT_PNG, 0, RF_EFORMAT, RF_SKIP_MASK, "not a PNG"},
    {DAMAGED, 0, RF_EDECODE, RF_SKIP_CORRUPT, "mask PNG decode"},
    {WIDE, 0, RF_EFORMAT, RF_SKIP_MASK, "16-bit gray: its values need mask_dtype int32"},
};

START_TEST(bad_masks_are_named_or_counted)
{
    char *dir = rf_test_mkdtemp("masks_bad");
    uint32_t bad = 5;
    char *shard = make_shard(dir, (int)g_bad[_i].wide, bad, g_bad[_i].fault);
    char pattern[600], name[32], at[64];
    snprintf(pattern, sizeof pattern, "%s/shard-*.tar", dir);
    snprintf(name, sizeof name, "s%03u.%s", bad, g_bad[_i].fault == MISSING ? "jpg" : "seg.png");
    uint64_t off = rf_test_member_offset(shard, name);
    ck_assert_uint_ne(off, UINT64_MAX);
    snprintf(at, sizeof at, "%s at offset %llu", g_bad[_i].fault == MISSING ? "s005" : name,
             (unsigned long long)off);
    for (int skip = 0; skip <= 1; skip++) {
        const char *pat;
        rf_config c = rf_test_host_config(&pat, pattern, 32);
        c.epochs = 1, c.batch_size = 4, c.decode_threads = 2, c.mask = "seg.png";
        c.mask_dtype = g_bad[_i].wide ? RF_DTYPE_INT32 : RF_DTYPE_UINT8;
        c.on_error = skip ? RF_ON_ERROR_SKIP : RF_ON_ERROR_FAIL;
        rf_loader *ld = rf_test_create_ok(&c);
        if (skip) {
            rf_stats st = rf_test_drain(ld);
            ck_assert_uint_eq(st.skipped, 1);
            ck_assert_uint_eq(st.skipped_by_reason[g_bad[_i].reason], 1);
        } else {
            ck_assert_int_eq(rf_test_drain_rc(ld), g_bad[_i].code);
            const char *e = rf_last_error(ld);
            ck_assert_msg(strstr(e, g_bad[_i].want) && strstr(e, at) &&
                              strstr(e, "shard-0000.tar"), "%s (want \"%s\", \"%s\")", e,
                          g_bad[_i].want, at);
            if (g_bad[_i].fault == BIGGER) /* both sizes */
                ck_assert_msg(strstr(e, "mask is 287x156") && strstr(e, "s005.jpg") &&
                                  strstr(e, "286x156"), "%s", e);
        }
        rf_loader_destroy(ld);
    }
    free(shard);
    free(dir);
}
END_TEST

START_TEST(refused_at_create)
{
    make_data();
    const char *pat;
    char err[512];
    rf_loader *ld = NULL;
    rf_config c = rf_test_host_config(&pat, g_pat8, 32);
    c.mask = "png"; /* the image's own extension */
    ck_assert_int_eq(rf_loader_create(&c, &ld, err, sizeof err), RF_EINVAL);
    ck_assert_msg(strstr(err, "mask \"png\"") && strstr(err, "image_exts"), "%s", err);
    c.mask = "seg png";
    ck_assert_int_eq(rf_loader_create(&c, &ld, err, sizeof err), RF_EINVAL);
    ck_assert_msg(strstr(err, "mask \"seg png\""), "%s", err);
    c.mask = "seg.png", c.mask_fill = 256;
    ck_assert_int_eq(rf_loader_create(&c, &ld, err, sizeof err), RF_EINVAL);
    ck_assert_msg(strstr(err, "mask_fill 256") && strstr(err, "int32"), "%s", err);
    c.mask_fill = RF_MASK_FILL_AUTO, c.mask_dtype = RF_DTYPE_INT64;
    ck_assert_int_eq(rf_loader_create(&c, &ld, err, sizeof err), RF_EINVAL);
    ck_assert_msg(strstr(err, "mask_dtype"), "%s", err);
    c.mask_dtype = RF_DTYPE_UINT8, c.source = RF_SOURCE_FOLDER;
    ck_assert_int_eq(rf_loader_create(&c, &ld, err, sizeof err), RF_EINVAL);
    ck_assert_msg(strstr(err, "mask \"seg.png\"") && strstr(err, "folder"), "%s", err);
    ck_assert_ptr_null(ld);
    /* off: no masks */
    c = rf_test_host_config(&pat, g_pat8, 32);
    c.epochs = 1;
    ld = rf_test_create_ok(&c);
    rf_batch *b;
    ck_assert_int_eq(rf_loader_next(ld, &b), 0);
    ck_assert_ptr_null(b->masks);
    rf_loader_destroy(ld);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("masks");
    TCase *tc = tcase_create("masks");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, masks_follow_the_image_on_every_path);
    tcase_add_test(tc, padding_blanks_and_replacements);
    tcase_add_loop_test(tc, bad_masks_are_named_or_counted, 0,
                        (int)(sizeof g_bad / sizeof g_bad[0]));
    tcase_add_test(tc, refused_at_create);
    suite_add_tcase(s, tc);
    return rf_test_run_suite(s);
}
