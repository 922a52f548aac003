/* test_multicrop_targets.c — multi_crop with masks, boxes and keypoints (issue 46): every view
 * of every sample carries its own mask and its own boxes and points, each given that view's
 * crop, resize and flip (the box and flip the view reports). Masks are compared value by
 * value with PIL's NEAREST over the view's box (rf_test_nearest), mirrored when the view is
 * flipped; boxes and points with a reference mapping of the member's numbers through the
 * view's box (clipped to the view, kept by box_min_visibility, keypoint flip pairs swapped).
 * At 1 and 3 decode threads the views' masks and boxes are the same, and so after a resume
 * and with the images on the GPU paths (the host's emulation of the kernels and engines);
 * a mask of another size than its image and a box outside its image are named under FAIL and
 * counted under SKIP, as without views, skip mode's replacement with views of its own and its
 * blank padding with every view's mask mask_fill and no boxes or points. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/synth.h"
#include "ringfeed.h"
#include "ringfeed_shards.h"
#include "testutil.h"

#define N 22
#define VIEWS "2x48x40:0.4-1,3x16:0.1-0.4"
#define NV 5
#define MAXB 3
#define MAXP 3
#define MIN_VIS 0.25f

static const uint32_t VH[NV] = {48, 48, 16, 16, 16}, VW[NV] = {40, 40, 16, 16, 16};

static uint32_t img_w(uint32_t id) { return 101 + (id * 37) % 220; }
static uint32_t img_h(uint32_t id) { return 81 + (id * 53) % 190; }
static uint32_t mask_value(uint32_t id, uint32_t x, uint32_t y)
{
    return (x * 3 + y * 5 + id * 11) & 255;
}

/* Sample id's boxes (xyxy pixels of its W x H image) and points {x, y, v}. */
static void boxes_of(uint32_t id, double b[MAXB][4], double p[MAXP][3])
{
    double W = img_w(id), H = img_h(id);
    const double f[MAXB][4] = {{0.1, 0.2, 0.6, 0.7}, {0.5, 0.1, 0.95, 0.4}, {0.3, 0.5, 0.36, 0.56}};
    const double q[MAXP][3] = {{0.2, 0.3, 2}, {0.8, 0.35, 2}, {0.5, 0.9, 1}};
    for (int j = 0; j < MAXB; j++)
        for (int c = 0; c < 4; c++)
            b[j][c] = round(f[j][c] * (c % 2 ? H : W) * 8) / 8; /* exact in JSON and float */
    for (int j = 0; j < MAXP; j++)
        p[j][0] = round(q[j][0] * W * 8) / 8, p[j][1] = round(q[j][1] * H * 8) / 8,
        p[j][2] = q[j][2];
}

enum fault { GOOD, BIG_MASK, BOX_OUT };

/* dir/shard-0000.tar: N samples of a JPEG, KEY.seg.png (8-bit gray: the green channel of
 * an image of mask_value) and KEY.json with boxes, their classes and points; sample `bad`
 * with `fault`. */
static void make_shard(const char *dir, uint32_t bad, enum fault fault)
{
    char tar[600], err[256];
    snprintf(tar, sizeof tar, "%s/shard-0000.tar", dir);
    rf_shard_writer *w;
    ck_assert_int_eq(rf_shard_writer_open(tar, NULL, RF_SHARD_PAX, &w, err, sizeof err), 0);
    for (uint32_t id = 0; id < N; id++) {
        uint32_t iw = img_w(id), ih = img_h(id), f = id == bad ? fault : GOOD;
        uint32_t mw = iw + (f == BIG_MASK);
        uint8_t *rgb = calloc((size_t)mw * ih, 3), *jpg, *png;
        size_t jlen, plen;
        rf_synth_image(500 + id, iw, ih, rgb);
        ck_assert_int_eq(rf_synth_jpeg(rgb, iw, ih, 90, 0, &jpg, &jlen), 0);
        for (uint32_t y = 0; y < ih; y++)
            for (uint32_t x = 0; x < mw; x++)
                rgb[((size_t)y * mw + x) * 3 + 1] = (uint8_t)mask_value(id, x, y);
        ck_assert_int_eq(rf_synth_png(rgb, mw, ih, RF_SYNTH_PNG_GRAY8, &png, &plen), 0);
        double b[MAXB][4], p[MAXP][3];
        boxes_of(id, b, p);
        if (f == BOX_OUT)
            b[1][2] = iw + 5;
        char js[1024], key[16];
        snprintf(js, sizeof js, "{\"boxes\": [[%.3f, %.3f, %.3f, %.3f], [%.3f, %.3f, %.3f, %.3f], "
                 "[%.3f, %.3f, %.3f, %.3f]], \"classes\": [%u, 7, 2], \"points\": [[%.3f, "
                 "%.3f, %.0f], [%.3f, %.3f, %.0f], [%.3f, %.3f, %.0f]]}", b[0][0], b[0][1],
                 b[0][2], b[0][3], b[1][0], b[1][1], b[1][2], b[1][3], b[2][0], b[2][1], b[2][2],
                 b[2][3], id % 5, p[0][0], p[0][1], p[0][2], p[1][0], p[1][1], p[1][2], p[2][0],
                 p[2][1], p[2][2]);
        snprintf(key, sizeof key, "s%03u", id);
        ck_assert_int_eq(rf_shard_writer_add(w, key, "jpg", jpg, jlen, (int32_t)(id % 5)), 0);
        ck_assert_int_eq(rf_shard_writer_add(w, key, "seg.png", png, plen, -1), 0);
        ck_assert_int_eq(rf_shard_writer_add(w, key, "json", js, strlen(js), -1), 0);
        free(rgb), free(jpg), free(png);
    }
    ck_assert_int_eq(rf_shard_writer_close(w, err, sizeof err), 0);
}

/* A source point through view k's box {x, y, w, h} and flip, in its output pixels. */
static void to_view(const int32_t *box, uint32_t flip, uint32_t k, double sx, double sy,
                    double *ox, double *oy)
{
    double x = (sx - box[0]) * VW[k] / box[2];
    *ox = flip ? VW[k] - x : x;
    *oy = (sy - box[1]) * VH[k] / box[3];
}

/* Sample i's mask, boxes and points in view k against the references. */
static void check_view(const rf_batch *b, uint32_t i, uint32_t k)
{
    const rf_view *v = &b->views[k];
    uint32_t id = (uint32_t)b->sample_ids[i], W = img_w(id), H = img_h(id), fl = v->flips[i];
    const int32_t *box = v->crop_boxes + 4 * (size_t)i;
    const uint8_t *m = (const uint8_t *)v->masks + (size_t)i * VH[k] * VW[k];
    for (uint32_t y = 0; y < VH[k]; y++)
        for (uint32_t x = 0; x < VW[k]; x++) {
            uint32_t ox = fl ? VW[k] - 1 - x : x;
            uint32_t want = mask_value(id, rf_test_nearest(box[0], box[2], VW[k], ox, W),
                                       rf_test_nearest(box[1], box[3], VH[k], y, H));
            ck_assert_msg(m[(size_t)y * VW[k] + x] == want, "sample %u view %u (box %d,%d "
                          "%dx%d flip %u): mask %u,%u is %u, PIL's %u", id, k, box[0], box[1],
                          box[2], box[3], fl, x, y, m[(size_t)y * VW[k] + x], want);
        }
    double bs[MAXB][4], ps[MAXP][3];
    boxes_of(id, bs, ps);
    uint32_t kept = 0;
    const float *got = v->boxes + (size_t)i * MAXB * 4;
    for (uint32_t j = 0; j < MAXB; j++) {
        double ax, ay, bx, by;
        to_view(box, fl, k, bs[j][0], bs[j][1], &ax, &ay);
        to_view(box, fl, k, bs[j][2], bs[j][3], &bx, &by);
        double x1 = fmin(ax, bx), x2 = fmax(ax, bx), y1 = fmin(ay, by), y2 = fmax(ay, by);
        double area = (x2 - x1) * (y2 - y1);
        x1 = fmax(x1, 0), y1 = fmax(y1, 0), x2 = fmin(x2, VW[k]), y2 = fmin(y2, VH[k]);
        double seen = x2 > x1 && y2 > y1 ? (x2 - x1) * (y2 - y1) : 0;
        if (!(seen > 0 && seen >= MIN_VIS * area))
            continue;
        const double want[4] = {x1, y1, x2, y2};
        for (int c = 0; c < 4; c++)
            ck_assert_msg(fabs(got[kept * 4 + c] - want[c]) < 1e-3, "sample %u view %u box %u "
                          "coordinate %d: %g, not %g", id, k, j, c, got[kept * 4 + c], want[c]);
        ck_assert_int_eq(v->box_classes[(size_t)i * MAXB + kept], j == 0 ? (int)(id % 5)
                                                                  : j == 1 ? 7 : 2);
        kept++;
    }
    ck_assert_msg(v->box_counts[i] == kept, "sample %u view %u: %u boxes kept, not %u", id, k,
                  v->box_counts[i], kept);
    ck_assert_uint_eq(v->point_counts[i], MAXP);
    for (uint32_t j = 0; j < MAXP; j++) {
        uint32_t from = fl && j < 2 ? 1 - j : j; /* keypoint_flip_pairs "0:1" */
        double ox, oy;
        to_view(box, fl, k, ps[from][0], ps[from][1], &ox, &oy);
        double vis = ox < 0 || ox > VW[k] || oy < 0 || oy > VH[k] ? 0 : ps[from][2];
        const float *q = v->points + ((size_t)i * MAXP + j) * 3;
        ck_assert_msg(fabs(q[0] - ox) < 1e-3 && fabs(q[1] - oy) < 1e-3 && q[2] == vis,
                      "sample %u view %u point %u: %g,%g,%g not %g,%g,%g", id, k, j, q[0], q[1],
                      q[2], ox, oy, vis);
    }
}

static uint32_t g_gpu, g_hw; /* gpu_decode, hw_decode_percent (the host's emulation) */

static rf_config targets_config(const char **pat, const char *pattern, uint32_t threads)
{
    rf_config c = rf_test_host_config(pat, pattern, 0);
    c.gpu_decode = g_gpu, c.hw_decode_percent = g_hw;
    c.seed = 9191, c.epochs = 1, c.batch_size = 4, c.flip_prob = 0.5f;
    c.multi_crop = VIEWS, c.decode_threads = threads, c.mask = "seg.png";
    c.box_json_path = "boxes", c.box_class_json_path = "classes", c.max_boxes = MAXB;
    c.box_min_visibility = MIN_VIS, c.keypoint_json_path = "points", c.max_points = MAXP;
    c.keypoint_flip_pairs = "0:1", c.num_classes = 10;
    return c;
}

/* What sample id's views carry (masks, boxes and points, counts) into out[id]; a batch's
 * samples checked against the references. */
static size_t targets_bytes(void)
{
    size_t n = 0;
    for (uint32_t k = 0; k < NV; k++)
        n += (size_t)VH[k] * VW[k] + (MAXB * 4 + MAXP * 3) * 4 + 8;
    return n;
}

static void take_batch(const rf_batch *b, uint8_t *out, uint32_t *seen, uint64_t *flipped)
{
    ck_assert_uint_eq(b->nviews, NV);
    ck_assert(b->masks == b->views[0].masks && b->boxes == b->views[0].boxes &&
              b->points == b->views[0].points);
    for (uint32_t i = 0; i < b->count; i++) {
        uint64_t id = b->sample_ids[i];
        uint8_t *o = out + id * targets_bytes();
        for (uint32_t k = 0; k < NV; k++) {
            const rf_view *v = &b->views[k];
            check_view(b, i, k);
            *flipped += v->flips[i];
            size_t mb = (size_t)VH[k] * VW[k];
            memcpy(o, (const uint8_t *)v->masks + i * mb, mb), o += mb;
            memcpy(o, v->boxes + (size_t)i * MAXB * 4, MAXB * 16), o += MAXB * 16;
            memcpy(o, v->points + (size_t)i * MAXP * 3, MAXP * 12), o += MAXP * 12;
            memcpy(o, v->box_counts + i, 4), memcpy(o + 4, v->point_counts + i, 4), o += 8;
        }
        seen[id] += !b->is_padding[i];
    }
}

static char g_dir[600];

static void run(uint32_t threads, uint32_t stop_after, uint8_t *out)
{
    char pattern[700];
    snprintf(pattern, sizeof pattern, "%s/shard-*.tar", g_dir);
    const char *pat;
    rf_config c = targets_config(&pat, pattern, threads);
    rf_loader *ld = rf_test_create_ok(&c);
    uint32_t seen[N] = {0};
    uint64_t flipped = 0;
    uint8_t blob[256];
    uint64_t len = 0;
    rf_batch *b;
    int rc;
    for (uint32_t got = 0; (rc = rf_loader_next(ld, &b)) == 0 || rc == RF_EPOCH_END;) {
        if (rc)
            continue;
        take_batch(b, out, seen, &flipped);
        rf_loader_release(ld, b, NULL);
        if (++got == stop_after) { /* stop here and go on from the state */
            ck_assert_int_eq(rf_loader_state(ld, blob, sizeof blob, &len), 0);
            rf_loader_destroy(ld);
            c.resume_state = blob, c.resume_state_bytes = len;
            ld = rf_test_create_ok(&c);
        }
    }
    ck_assert_msg(rc == RF_DONE, "%d %s", rc, rf_last_error(ld));
    rf_stats st;
    rf_stats_init(&st);
    ck_assert_int_eq(rf_loader_stats(ld, &st), 0);
    ck_assert(g_gpu ? st.gpu_decoded > 0 : g_hw ? st.hw_decoded > 0 : 1); /* that path ran */
    rf_loader_destroy(ld);
    for (uint32_t id = 0; id < N; id++)
        ck_assert_msg(seen[id] == 1, "sample %u delivered %u times", id, seen[id]);
    ck_assert_uint_gt(flipped, N); /* views of both kinds were met */
    ck_assert_uint_lt(flipped, N * NV - N);
}

START_TEST(each_view_has_its_masks_boxes_and_points)
{
    char *dir = rf_test_mkdtemp("multicrop_targets");
    snprintf(g_dir, sizeof g_dir, "%s", dir);
    make_shard(dir, UINT32_MAX, GOOD);
    size_t n = N * targets_bytes();
    uint8_t *one = calloc(1, n), *three = calloc(1, n), *resumed = calloc(1, n);
    run(1, 0, one);
    run(3, 0, three);
    ck_assert(memcmp(one, three, n) == 0); /* the thread count changes nothing */
    run(3, 2, resumed);
    ck_assert(memcmp(one, resumed, n) == 0); /* nor a resume */
    g_gpu = 1; /* nor the GPU paths, which take the images; the decode threads the targets */
    run(3, 0, three);
    ck_assert(memcmp(one, three, n) == 0);
    g_gpu = 0, g_hw = 100;
    run(1, 0, three);
    ck_assert(memcmp(one, three, n) == 0);
    g_hw = 0;
    free(one), free(three), free(resumed), free(dir);
}
END_TEST

/* A mask of another size than its image and a box outside its image: named under FAIL,
 * counted under SKIP by their reasons. */
START_TEST(bad_targets_are_named_or_counted)
{
    const struct {
        enum fault f;
        const char *says;
        int reason;
    } cases[] = {{BIG_MASK, "a mask must have its image's size", RF_SKIP_MASK},
                 {BOX_OUT, "lies outside its", RF_SKIP_LABEL}};
    for (size_t c = 0; c < 2; c++) {
        char *dir = rf_test_mkdtemp("multicrop_bad"), pattern[700];
        make_shard(dir, 5, cases[c].f);
        snprintf(pattern, sizeof pattern, "%s/shard-*.tar", dir);
        const char *pat;
        rf_config cfg = targets_config(&pat, pattern, 2);
        rf_loader *ld = rf_test_create_ok(&cfg);
        ck_assert_int_ne(rf_test_drain_rc(ld), RF_DONE);
        ck_assert_msg(strstr(rf_last_error(ld), "s005") &&
                      strstr(rf_last_error(ld), cases[c].says), "%s", rf_last_error(ld));
        rf_loader_destroy(ld);
        cfg.on_error = RF_ON_ERROR_SKIP;
        ld = rf_test_create_ok(&cfg);
        uint32_t blanks = 0, checked = 0;
        rf_batch *b;
        int rc;
        while ((rc = rf_loader_next(ld, &b)) == 0 || rc == RF_EPOCH_END) {
            for (uint32_t i = 0; rc == 0 && i < b->count; i++, checked++)
                for (uint32_t k = 0; k < NV; k++) {
                    const rf_view *v = &b->views[k];
                    if (b->sample_ids[i] != UINT64_MAX) { /* a replacement: views of its own */
                        check_view(b, i, k);
                        continue;
                    }
                    /* blank padding: every view's mask mask_fill, no boxes or points */
                    blanks += k == 0;
                    const uint8_t *m = (const uint8_t *)v->masks + (size_t)i * VH[k] * VW[k];
                    for (size_t p = 0; p < (size_t)VH[k] * VW[k]; p++)
                        ck_assert_uint_eq(m[p], 255);
                    ck_assert(v->box_counts[i] == 0 && v->point_counts[i] == 0);
                }
            if (rc == 0)
                rf_loader_release(ld, b, NULL);
        }
        ck_assert_int_eq(rc, RF_DONE);
        ck_assert_uint_eq(checked, N);
        ck_assert_uint_eq(blanks, 1);
        rf_stats st;
        rf_stats_init(&st);
        ck_assert_int_eq(rf_loader_stats(ld, &st), 0);
        ck_assert_uint_eq(st.skipped, 1);
        ck_assert_uint_eq(st.skipped_by_reason[cases[c].reason], 1);
        rf_loader_destroy(ld);
        free(dir);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("multicrop_targets");
    TCase *tc = tcase_create("multicrop_targets");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, each_view_has_its_masks_boxes_and_points);
    tcase_add_test(tc, bad_targets_are_named_or_counted);
    suite_add_tcase(s, tc);
    return rf_test_run_suite(s);
}
