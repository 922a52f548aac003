/* test_sizes_loader.c — crop LETTERBOX and CENTER_PAD in a loader (issue 46 item 4): over a
 * shard of PNG, lossless WebP and JPEG samples of odd sizes (wide, tall, 1 x N, N x 1, smaller
 * than the output), every delivered sample equals the reference built from the crop's
 * definition (sizeutil.c) for the flip the batch reports, with pad_value around it, at 1 and 3
 * decode threads in both layouts; rf_batch.letterbox gives each sample's scale and padding and
 * crop_boxes the box (the whole image for LETTERBOX); padding repeats carry their original's,
 * skip mode's replacements their own and its blanks zeros. NATIVE the same way, each image at
 * its own size (rf_batch.sizes) packed from its offset (rf_batch.sample_offsets). The GPU paths
 * (gpu_decode, hw_decode_percent = 100, on the host backend's emulation) deliver the same
 * samples. NATIVE refuses a sample_hook and a float NCHW output. Decode-level pixels, geometry,
 * DCT scaling and the GPU packets: test_sizes.c. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ringfeed.h"
#include "sizeutil.h"
#include "testutil.h"

#define N_PICS 23
#define OUT_H 40
#define OUT_W 56
#define BAD_PIC 7 /* truncated in the damaged shard */

static const uint32_t g_sizes[][2] = {{97, 61}, {61, 97}, {50, 50}, {1, 37}, {37, 1},
                                      {9, 5},   {200, 7}, {56, 40}, {113, 80}, {3, 90}};
#define N_SIZES (sizeof g_sizes / sizeof g_sizes[0])

static pic g_pics[N_PICS];
static char *g_dir, g_good[512], g_bad[512];

/* One shard of the pictures (sample i: KEY.png, .webp or .jpg and KEY.cls holding i), the
 * BAD_PIC-th cut to half its bytes when damaged. */
static void write_shard(const char *name, int damaged, char *path, size_t cap)
{
    char src[512], file[600];
    snprintf(src, sizeof src, "%s/%s-src", g_dir, name);
    mkdir(src, 0755);
    static const char *const ext[] = {"png", "webp", "jpg"};
    for (uint32_t i = 0; i < N_PICS; i++) {
        const pic *p = &g_pics[i];
        size_t len = damaged && i == BAD_PIC ? p->len / 2 : p->len;
        snprintf(file, sizeof file, "%s/%08u.%s", src, i, ext[i % 3]);
        rf_test_write_file(file, p->data, len);
        char label[16];
        snprintf(file, sizeof file, "%s/%08u.cls", src, i);
        rf_test_write_file(file, label, (size_t)snprintf(label, sizeof label, "%u", i));
    }
    snprintf(path, cap, "%s/%s.tar", g_dir, name);
    ck_assert_int_eq(rf_test_shell("cd '%s' && tar --format=gnu --owner=0 --group=0 -cf '%s' "
                                   "$(ls | sort)", src, path), 0);
}

static void make_data(void)
{
    if (g_dir)
        return;
    g_dir = rf_test_mkdtemp("sizes");
    for (uint32_t i = 0; i < N_PICS; i++)
        g_pics[i] = sz_make_pic(g_sizes[i % N_SIZES][0], g_sizes[i % N_SIZES][1], (int)(i % 3),
                                300 + i);
    write_shard("good", 0, g_good, sizeof g_good);
    write_shard("bad", 1, g_bad, sizeof g_bad);
}

typedef struct run_opts {
    const char *pattern;
    uint32_t crop, threads, layout, world, rank, on_error, resize_shorter;
    uint32_t gpu, hw; /* gpu_decode, hw_decode_percent */
    float pad[3];
} run_opts;

typedef struct run_seen {
    uint64_t delivered, repeats, blanks, flipped;
} run_seen;

/* What rf_batch.letterbox must say for picture p under t: LETTERBOX's rectangle over the
 * whole image; CENTER_PAD's scale of the resize and its padding or minus its crop offset. */
static void expect_place(const pic *p, const rf_transform *t, const rect *r, float *want)
{
    if (t->crop != RF_CROP_CENTER_PAD) { /* LETTERBOX, NATIVE: the whole image */
        want[0] = (float)((double)r->w / p->w), want[1] = (float)((double)r->h / p->h);
        want[2] = (float)r->x, want[3] = (float)r->y;
        return;
    }
    uint32_t R = t->resize_shorter, W = p->w, H = p->h;
    double nw = W <= H ? R : floor((double)R * W / H), nh = W <= H ? floor((double)R * H / W) : R;
    nw = fmax(nw, 1), nh = fmax(nh, 1);
    want[0] = (float)(nw / W), want[1] = (float)(nh / H);
    want[2] = t->width > nw ? (float)r->x : -(float)rint((nw - t->width) / 2);
    want[3] = t->height > nh ? (float)r->y : -(float)rint((nh - t->height) / 2);
}

/* One sample of a batch against its reference. */
static void check_sample(const rf_batch *b, uint32_t i, const rf_transform *t, uint8_t *want,
                         run_seen *seen)
{
    size_t n = (size_t)OUT_H * OUT_W * 3;
    const float *row = b->letterbox + 4 * (size_t)i;
    const int32_t *box = b->crop_boxes + 4 * (size_t)i;
    int native = t->crop == RF_CROP_NATIVE;
    ck_assert(native ? b->sizes && b->sample_offsets : !b->sizes && !b->sample_offsets);
    if (native) /* every sample keeps a slot of the largest size */
        ck_assert_uint_eq(b->sample_offsets[i], (uint64_t)i * n);
    if (b->sample_ids[i] == UINT64_MAX) { /* skip mode's blank */
        for (int k = 0; k < 4; k++)
            ck_assert(row[k] == 0 && box[k] == 0);
        if (native)
            ck_assert(b->sizes[2 * i] == 0 && b->sizes[2 * i + 1] == 0);
        seen->blanks++;
        return;
    }
    ck_assert_int_ge(b->labels[i], 0);
    ck_assert_int_lt(b->labels[i], N_PICS);
    const pic *p = &g_pics[b->labels[i]];
    rect r;
    sz_reference(p->rgb, p->w, p->h, t, b->flips[i], want, &r);
    if (native) { /* packed at its own size from its offset */
        ck_assert(b->sizes[2 * i] == r.h && b->sizes[2 * i + 1] == r.w);
        n = (size_t)r.w * r.h * 3;
    }
    ck_assert_msg(memcmp(want, (const uint8_t *)b->data + i * (size_t)OUT_H * OUT_W * 3, n) == 0,
                  "crop %u sample %d (%ux%u, flip %u, padding %u): pixels differ", t->crop,
                  b->labels[i], p->w, p->h, b->flips[i], b->is_padding[i]);
    float place[4];
    expect_place(p, t, &r, place);
    for (int k = 0; k < 4; k++)
        ck_assert_msg(fabsf(row[k] - place[k]) < 1e-4f, "sample %d letterbox[%d] %g, not %g",
                      b->labels[i], k, (double)row[k], (double)place[k]);
    if (t->crop != RF_CROP_CENTER_PAD)
        ck_assert(box[0] == 0 && box[1] == 0 && (uint32_t)box[2] == p->w &&
                  (uint32_t)box[3] == p->h);
    seen->delivered++;
    seen->repeats += b->is_padding[i];
    seen->flipped += b->flips[i];
}

static rf_stats run_epoch(const run_opts *o, run_seen *seen)
{
    const char *pat;
    rf_config c = rf_test_host_config(&pat, o->pattern, 0);
    c.image_height = OUT_H, c.image_width = OUT_W;
    c.seed = 46, c.epochs = 1, c.batch_size = 5, c.layout = o->layout;
    c.crop = o->crop, c.flip_prob = 0.5f, c.decode_threads = o->threads;
    c.resize_shorter = o->resize_shorter;
    c.dct_scaling = RF_DCT_SCALING_OFF; /* the JPEG references are full-scale decodes */
    c.world_size = o->world ? o->world : 1, c.rank = o->rank, c.on_error = o->on_error;
    c.gpu_decode = o->gpu, c.hw_decode_percent = o->hw;
    memcpy(c.pad_value, o->pad, sizeof c.pad_value);
    rf_loader *ld = rf_test_create_ok(&c);
    rf_config got;
    got.struct_size = sizeof got;
    ck_assert_int_eq(rf_loader_config(ld, &got), 0);
    rf_transform t = sz_transform(o->crop, OUT_H, OUT_W, o->layout);
    t.resize_shorter = got.resize_shorter;
    for (int k = 0; k < 3; k++)
        t.pad[k] = (uint8_t)lrintf(got.pad_value[k]);
    uint8_t *want = malloc((size_t)OUT_H * OUT_W * 3);
    rf_batch *b;
    int rc;
    while ((rc = rf_loader_next(ld, &b)) == 0 || rc == RF_EPOCH_END) {
        if (rc == RF_EPOCH_END)
            continue;
        ck_assert_ptr_nonnull(b->letterbox);
        for (uint32_t i = 0; i < b->count; i++)
            check_sample(b, i, &t, want, seen);
        rf_loader_release(ld, b, NULL);
    }
    ck_assert_int_eq(rc, RF_DONE);
    free(want);
    rf_stats st;
    rf_stats_init(&st);
    ck_assert_int_eq(rf_loader_stats(ld, &st), 0);
    rf_loader_destroy(ld);
    return st;
}

/* Both crops, 1 and 3 threads, both layouts, both ranks of two (23 samples: one padding
 * repeat on rank 1), AUTO and per-channel pad values; on the CPU, then with the JPEGs on the
 * kernels (gpu_decode) and on the engines (hw_decode_percent 100). */
static void every_sample(uint32_t crop, uint32_t resize_shorter)
{
    make_data();
    for (uint32_t path = 0; path < 3; path++) {
        run_seen all = {0};
        for (uint32_t k = 0; k < 4; k++) {
            run_opts o = {.pattern = g_good, .crop = crop, .threads = k & 1 ? 3 : 1,
                          .layout = k & 2 ? RF_LAYOUT_NCHW : RF_LAYOUT_NHWC, .world = 2,
                          .rank = k & 1, .resize_shorter = resize_shorter, .gpu = path == 1,
                          .hw = path == 2 ? 100 : 0,
                          .pad = {RF_PAD_VALUE_AUTO, RF_PAD_VALUE_AUTO, RF_PAD_VALUE_AUTO}};
            if (k >= 2)
                o.pad[0] = 10, o.pad[1] = 200.4f, o.pad[2] = 76.6f; /* rounded: 10, 200, 77 */
            run_seen seen = {0};
            rf_stats st = run_epoch(&o, &seen);
            ck_assert_uint_eq(seen.delivered, (N_PICS + 1) / 2);
            ck_assert_uint_eq(seen.repeats, o.rank ? 1 : 0);
            if (o.gpu) /* the JPEGs a packet can carry (not 1 x N and the like) */
                ck_assert_uint_gt(st.gpu_decoded, 0);
            if (o.hw)
                ck_assert_uint_gt(st.hw_decoded, 0);
            all.delivered += seen.delivered, all.flipped += seen.flipped;
        }
        ck_assert(all.flipped > 0 && all.flipped < all.delivered);
    }
}

START_TEST(letterbox_delivers_every_sample_on_the_reference)
{
    every_sample(RF_CROP_LETTERBOX, 0);
}
END_TEST

START_TEST(center_pad_delivers_every_sample_on_the_reference)
{
    every_sample(RF_CROP_CENTER_PAD, 0);  /* AUTO: 64, padding the narrow pictures */
    every_sample(RF_CROP_CENTER_PAD, 30); /* shorter than both output sides */
}
END_TEST

START_TEST(native_delivers_every_sample_at_its_own_size)
{
    every_sample(RF_CROP_NATIVE, 0);
}
END_TEST

/* A damaged sample under on_error SKIP: counted, its place taken by a replacement (checked
 * like every sample) or a blank (zeros), at 1 and 3 threads. */
START_TEST(skip_mode_replacements_and_blanks)
{
    make_data();
    for (uint32_t threads = 1; threads <= 3; threads += 2)
        for (uint32_t crop = RF_CROP_LETTERBOX; crop <= RF_CROP_NATIVE; crop++) {
            run_opts o = {.pattern = g_bad, .crop = crop, .threads = threads,
                          .on_error = RF_ON_ERROR_SKIP,
                          .pad = {RF_PAD_VALUE_AUTO, RF_PAD_VALUE_AUTO, RF_PAD_VALUE_AUTO}};
            run_seen seen = {0};
            rf_stats st = run_epoch(&o, &seen);
            ck_assert_uint_eq(st.skipped, 1);
            ck_assert_uint_eq(seen.delivered + seen.blanks, N_PICS);
        }
}
END_TEST

static int keep(const rf_sample_view *v, void *ctx)
{
    (void)v, (void)ctx;
    return 0;
}

/* NATIVE's samples are not H x W: a sample_hook, and a float conversion to NCHW, which assume
 * they are, are refused by name. */
START_TEST(native_refuses_what_assumes_h_x_w)
{
    make_data();
    static const char *const why[] = {"sample_hook", "needs layout NHWC", "with crop native"};
    for (int k = 0; k < 3; k++) {
        const char *pat;
        rf_config c = rf_test_host_config(&pat, g_good, 32);
        c.crop = RF_CROP_NATIVE;
        if (k == 0)
            c.sample_hook = keep;
        else if (k == 1)
            c.dtype = RF_DTYPE_FLOAT32, c.layout = RF_LAYOUT_NCHW;
        else
            c.mask = "seg.png"; /* masks are H x W rows */
        rf_loader *ld = NULL;
        char msg[512] = "";
        ck_assert_int_eq(rf_loader_create(&c, &ld, msg, sizeof msg), RF_EINVAL);
        ck_assert_msg(strstr(msg, why[k]), "%s", msg);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sizes_loader");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, letterbox_delivers_every_sample_on_the_reference);
    tcase_add_test(tc, center_pad_delivers_every_sample_on_the_reference);
    tcase_add_test(tc, native_delivers_every_sample_at_its_own_size);
    tcase_add_test(tc, skip_mode_replacements_and_blanks);
    tcase_add_test(tc, native_refuses_what_assumes_h_x_w);
    suite_add_tcase(s, tc);
    return rf_test_run_suite(s);
}
