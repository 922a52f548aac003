/* test_boxes.c — boxes and keypoints that follow the crop (issue 46 item 2): a sample's boxes
 * (KEY.json at a dotted path, through COCO-style arrays of objects, or KEY.boxes.npy) in each
 * box_format, pixels or normalised, and its keypoints, delivered in output pixels. The
 * reference here maps each box by hand through the crop box and flip the batch reports
 * (rf_batch.crop_boxes, flips; CENTER's fractional box computed apart), clips it to the output
 * and applies the visibility rule, on every decode path (CPU, gpu_decode,
 * hw_decode_percent = 100) at 1 and 3 threads; padding repeats carry their original's rows,
 * skip mode's replacement its own and a blank none; each bad input is refused naming the
 * shard, the member, its offset and the box or point, and counted under RF_SKIP_LABEL in skip
 * mode; bad settings are refused at create. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "datasets/synth.h"
#include "loaders/dataset.h"
#include "pipeline/boxes.h"
#include "ringfeed.h"
#include "testutil.h"

#define N 14      /* samples */
#define MAXB 6    /* max_boxes */
#define MAXP 4    /* max_points */
#define OUT_H 40
#define OUT_W 56

/* One sample's annotation in source pixels: boxes xyxy with classes, points x y v. */
typedef struct ann {
    uint32_t w, h, nb, np;
    double b[MAXB][4];
    int32_t cls[MAXB];
    double p[MAXP][3];
} ann;

static ann g_ann[N];

/* Multiples of 1/4: exact in JSON, float and the formats' sums. */
static double q(uint32_t *s, double lo, double hi)
{
    *s = *s * 1103515245u + 12345u;
    return lo + floor((hi - lo) * 4 * ((*s >> 8) % 10007) / 10007.0) / 4;
}

static void make_ann(void)
{
    uint32_t s = 7;
    for (uint32_t i = 0; i < N; i++) {
        ann *a = &g_ann[i];
        a->w = 48 + 8 * (i % 5), a->h = 40 + 6 * (i % 4);
        a->nb = i % 7 == 3 ? 0 : 1 + i % MAXB; /* a zero-box sample among them */
        for (uint32_t j = 0; j < a->nb; j++) {
            double x1 = q(&s, 0, a->w - 2), y1 = q(&s, 0, a->h - 2);
            a->b[j][0] = x1, a->b[j][1] = y1;
            a->b[j][2] = q(&s, x1 + 0.25, a->w), a->b[j][3] = q(&s, y1 + 0.25, a->h);
            a->cls[j] = (int32_t)(i + j) % 9;
        }
        if (i == 5) /* one exactly at the image's edges, one a degenerate line */
            a->b[0][0] = 0, a->b[0][1] = 0, a->b[0][2] = a->w, a->b[0][3] = a->h,
            a->b[1][2] = a->b[1][0];
        a->np = 1 + i % MAXP;
        for (uint32_t j = 0; j < a->np; j++)
            a->p[j][0] = q(&s, 0, a->w), a->p[j][1] = q(&s, 0, a->h), a->p[j][2] = (i + j) % 3;
    }
}

/* The JSON of sample i: every format at its own key, normalised xyxy, COCO objects, classes
 * and points. */
static char *json_of(uint32_t i)
{
    const ann *a = &g_ann[i];
    size_t cap = 8192, n = 0;
    char *t = malloc(cap);
    const char *keys[] = {"xyxy", "xywh", "cxcywh", "norm"};
    n += (size_t)snprintf(t + n, cap - n, "{");
    for (int f = 0; f < 4; f++) {
        n += (size_t)snprintf(t + n, cap - n, "\"%s\": [", keys[f]);
        for (uint32_t j = 0; j < a->nb; j++) {
            const double *b = a->b[j];
            double v[4] = {b[0], b[1], b[2], b[3]};
            if (f == 1)
                v[2] = b[2] - b[0], v[3] = b[3] - b[1];
            if (f == 2)
                v[0] = (b[0] + b[2]) / 2, v[1] = (b[1] + b[3]) / 2, v[2] = b[2] - b[0],
                v[3] = b[3] - b[1];
            if (f == 3)
                v[0] /= a->w, v[1] /= a->h, v[2] /= a->w, v[3] /= a->h;
            n += (size_t)snprintf(t + n, cap - n, "%s[%.17g, %.17g, %.17g, %.17g]",
                                  j ? ", " : "", v[0], v[1], v[2], v[3]);
        }
        n += (size_t)snprintf(t + n, cap - n, "], ");
    }
    n += (size_t)snprintf(t + n, cap - n, "\"cls\": [");
    for (uint32_t j = 0; j < a->nb; j++)
        n += (size_t)snprintf(t + n, cap - n, "%s%d", j ? ", " : "", a->cls[j]);
    n += (size_t)snprintf(t + n, cap - n, "], \"coco\": {\"annotations\": [");
    for (uint32_t j = 0; j < a->nb; j++)
        n += (size_t)snprintf(t + n, cap - n, "%s{\"id\": %u, \"bbox\": [%g, %g, %g, %g], "
                              "\"category_id\": %d}", j ? ", " : "", j, a->b[j][0], a->b[j][1],
                              a->b[j][2] - a->b[j][0], a->b[j][3] - a->b[j][1], a->cls[j]);
    for (int norm = 0; norm < 2; norm++) {
        n += (size_t)snprintf(t + n, cap - n, norm ? "], \"nkp\": [" : "]}, \"kp\": [");
        for (uint32_t j = 0; j < a->np; j++)
            n += (size_t)snprintf(t + n, cap - n, "%s[%.17g, %.17g, %g]", j ? ", " : "",
                                  a->p[j][0] / (norm ? a->w : 1), a->p[j][1] / (norm ? a->h : 1),
                                  a->p[j][2]);
    }
    snprintf(t + n, cap - n, "]}");
    return t;
}

/* A .npy of rows x cols values (v: double), with descr and the fortran flag as given. */
static uint8_t *npy_of(const double *v, uint32_t rows, uint32_t cols, const char *descr,
                       int fortran, size_t *len)
{
    char hdr[256];
    int hl = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': %s, 'shape': (%u, %u), }",
                      descr, fortran ? "True" : "False", rows, cols);
    while ((10 + hl + 1) % 64)
        hdr[hl++] = ' ';
    hdr[hl++] = '\n';
    size_t item = descr[2] == '8' ? 8 : 4;
    *len = 10 + (size_t)hl + (size_t)rows * cols * item;
    uint8_t *o = malloc(*len);
    memcpy(o, "\x93NUMPY\x01\x00", 8);
    o[8] = (uint8_t)hl, o[9] = 0;
    memcpy(o + 10, hdr, (size_t)hl);
    for (size_t k = 0; k < (size_t)rows * cols; k++) {
        float f = (float)v[k];
        if (item == 8)
            memcpy(o + 10 + hl + k * 8, &v[k], 8);
        else if (descr[1] == 'i') {
            int32_t x = (int32_t)v[k];
            memcpy(o + 10 + hl + k * 4, &x, 4);
        } else
            memcpy(o + 10 + hl + k * 4, &f, 4);
    }
    return o;
}

static uint8_t *npy_boxes(uint32_t i, size_t *len)
{
    const ann *a = &g_ann[i];
    double v[MAXB * 5];
    for (uint32_t j = 0; j < a->nb; j++)
        memcpy(v + j * 5, a->b[j], 4 * sizeof *v), v[j * 5 + 4] = a->cls[j];
    return npy_of(v, a->nb, 5, i % 2 ? "<f8" : "<f4", 0, len);
}

/* Sample i's keypoints as KEY.kp.npy: N x 3 float64 (x, y, v) in pixels. */
static uint8_t *npy_points(uint32_t i, size_t *len)
{
    const ann *a = &g_ann[i];
    double v[MAXP * 3];
    memcpy(v, a->p, (size_t)a->np * 3 * sizeof *v);
    return npy_of(v, a->np, 3, "<f8", 0, len);
}

/* A shard of the N samples: KEY.jpg of g_ann's size, KEY.json (json[i] when given, NULL: none),
 * KEY.boxes.npy (npy[i], npy_len[i] when given) and KEY.kp.npy. Returns the shard's path. */
static char *make_shard(const char *dir, char **json, uint8_t **npy, const size_t *npy_len)
{
    char src[600], path[700], list[700], *tar = malloc(700);
    snprintf(src, sizeof src, "%s/src", dir);
    mkdir(src, 0755);
    snprintf(list, sizeof list, "%s/members.txt", dir);
    FILE *lf = fopen(list, "w");
    ck_assert_ptr_nonnull(lf);
    for (uint32_t i = 0; i < N; i++) {
        uint32_t w = g_ann[i].w, h = g_ann[i].h;
        uint8_t *rgb = malloc((size_t)w * h * 3), *jpg;
        size_t len;
        rf_synth_image(300 + i, w, h, rgb);
        ck_assert_int_eq(rf_synth_jpeg(rgb, w, h, 90, 0, &jpg, &len), 0);
        snprintf(path, sizeof path, "%s/%08u.jpg", src, i);
        rf_test_write_file(path, jpg, len);
        fprintf(lf, "%08u.jpg\n", i);
        free(rgb), free(jpg);
        if (json && json[i]) {
            snprintf(path, sizeof path, "%s/%08u.json", src, i);
            rf_test_write_file(path, json[i], strlen(json[i]));
            fprintf(lf, "%08u.json\n", i);
        }
        if (npy && npy[i]) {
            snprintf(path, sizeof path, "%s/%08u.boxes.npy", src, i);
            rf_test_write_file(path, npy[i], npy_len[i]);
            fprintf(lf, "%08u.boxes.npy\n", i);
        }
        size_t kl;
        uint8_t *kp = npy_points(i, &kl);
        snprintf(path, sizeof path, "%s/%08u.kp.npy", src, i);
        rf_test_write_file(path, kp, kl);
        fprintf(lf, "%08u.kp.npy\n", i);
        free(kp);
    }
    fclose(lf);
    snprintf(tar, 700, "%s/shard-0000.tar", dir);
    ck_assert_int_eq(rf_test_shell("tar --format=gnu --no-recursion --owner=0 --group=0 -cf "
                                   "'%s' -C '%s' -T '%s'", tar, src, list), 0);
    return tar;
}

static char *g_dir;
static char *g_json[N];
static uint8_t *g_npy[N];
static size_t g_npy_len[N];

static void make_data(void)
{
    if (g_dir)
        return;
    make_ann();
    g_dir = rf_test_mkdtemp("boxes46");
    for (uint32_t i = 0; i < N; i++)
        g_json[i] = json_of(i), g_npy[i] = npy_boxes(i, &g_npy_len[i]);
    free(make_shard(g_dir, g_json, g_npy, g_npy_len));
}

/* How a run reads the boxes. */
typedef struct variant {
    const char *ext, *path, *cls;
    uint32_t format, normalized;
    float min_vis;
    uint32_t out_norm; /* box_output_normalized */
    const char *kext;  /* keypoint_ext: NULL, the JSON's kp (or nkp); "kp.npy" */
} variant;

static const variant g_var[] = {
    {NULL, "xyxy", "cls", RF_BOX_XYXY, 0, 0, 0, NULL},
    {"json", "xywh", "cls", RF_BOX_XYWH, 0, 0, 0, NULL},
    {NULL, "cxcywh", NULL, RF_BOX_CXCYWH, 0, 0, 0, NULL},
    {NULL, "norm", "cls", RF_BOX_XYXY, 1, 0, 0, NULL},
    {NULL, "coco.annotations.bbox", "coco.annotations.category_id", RF_BOX_XYWH, 0, 0, 0, NULL},
    {"boxes.npy", NULL, NULL, RF_BOX_XYXY, 0, 0, 0, NULL},
    {"boxes.npy", NULL, NULL, RF_BOX_XYXY, 0, 0, 0, "kp.npy"},
    {NULL, "xyxy", "cls", RF_BOX_XYXY, 0, 0.5f, 0, NULL},
    {NULL, "norm", "cls", RF_BOX_XYXY, 1, 0, 1, NULL},
};
#define NVAR (sizeof g_var / sizeof g_var[0])

static const uint32_t g_swap[MAXP] = {1, 0, 2, 3}; /* keypoint_flip_pairs "0:1" */

typedef struct run_opts {
    uint32_t crop, threads, gpu, hw, world, rank, on_error;
    const variant *v;
    uint64_t checked, blanks, kept, dropped, invisible;
    float rows[N][MAXB * 4]; /* the last delivery of each sample (a repeat must agree) */
    uint32_t counts[N];
    int seen[N];
} run_opts;

static rf_config config_of(const char **pat, const char *pattern, const run_opts *o)
{
    rf_config c = rf_test_host_config(pat, pattern, 0);
    c.image_height = OUT_H, c.image_width = OUT_W;
    c.seed = 46, c.epochs = 1, c.batch_size = 4, c.layout = RF_LAYOUT_NHWC;
    c.crop = o->crop, c.resize_shorter = o->crop == RF_CROP_CENTER ? 60 : 0;
    c.flip_prob = 0.5f, c.scale_min = 0.2f;
    c.decode_threads = o->threads, c.gpu_decode = o->gpu, c.hw_decode_percent = o->hw;
    c.world_size = o->world ? o->world : 1, c.rank = o->rank, c.on_error = o->on_error;
    c.label_source = RF_LABEL_NONE;
    c.box_ext = o->v->ext, c.box_json_path = o->v->path, c.box_class_json_path = o->v->cls;
    c.box_format = o->v->format, c.box_normalized = o->v->normalized;
    c.box_min_visibility = o->v->min_vis, c.max_boxes = MAXB;
    c.box_output_normalized = o->v->out_norm;
    c.keypoint_ext = o->v->kext;
    c.keypoint_json_path = o->v->kext ? NULL : o->v->normalized ? "nkp" : "kp";
    c.max_points = MAXP, c.keypoint_flip_pairs = "0:1";
    return c;
}

/* The crop box as a fractional source rectangle: RANDOM's is the reported one; CENTER's is
 * Resize(60) + CenterCrop computed here, unrounded. */
static void crop_of(uint32_t crop, const ann *a, const int32_t *rep, double *cb)
{
    if (crop == RF_CROP_RANDOM) {
        for (int k = 0; k < 4; k++)
            cb[k] = rep[k];
        return;
    }
    double W = a->w, H = a->h, R = 60;
    double nw = W <= H ? R : floor(R * W / H), nh = W <= H ? floor(R * H / W) : R;
    double cw = fmin(OUT_W, nw), ch = fmin(OUT_H, nh);
    double left = nearbyint((nw - cw) / 2), top = nearbyint((nh - ch) / 2);
    cb[0] = left * W / nw, cb[1] = top * H / nh, cb[2] = cw * W / nw, cb[3] = ch * H / nh;
    ck_assert(fabs(cb[0] - rep[0]) <= 0.5 && fabs(cb[2] - rep[2]) <= 0.5);
}

static double map_x(const double *cb, int flip, double x)
{
    double o = (x - cb[0]) * OUT_W / cb[2];
    return flip ? OUT_W - o : o;
}

static double map_y(const double *cb, double y)
{
    return (y - cb[1]) * OUT_H / cb[3];
}

#define CLOSE(a, b) (fabs((double)(a) - (double)(b)) < 2e-3)

/* Sample i of batch b (sample id) against the reference. */
static void check_sample(const rf_batch *b, uint32_t i, run_opts *o)
{
    uint64_t id = b->sample_ids[i];
    const float *row = b->boxes + (size_t)i * MAXB * 4;
    const int32_t *cls = b->box_classes + (size_t)i * MAXB;
    const float *pts = b->points + (size_t)i * MAXP * 3;
    if (id == UINT64_MAX) { /* a blank */
        ck_assert_uint_eq(b->box_counts[i], 0);
        ck_assert_uint_eq(b->point_counts[i], 0);
        for (uint32_t k = 0; k < MAXB; k++)
            ck_assert(cls[k] == -1 && row[4 * k] == 0 && row[4 * k + 3] == 0);
        o->blanks++;
        return;
    }
    const ann *a = &g_ann[id];
    double cb[4];
    int flip = b->flips[i];
    crop_of(o->crop, a, b->crop_boxes + 4 * (size_t)i, cb);
    uint32_t kept = 0;
    for (uint32_t j = 0; j < a->nb; j++) {
        double x1 = map_x(cb, flip, a->b[j][0]), x2 = map_x(cb, flip, a->b[j][2]);
        double y1 = map_y(cb, a->b[j][1]), y2 = map_y(cb, a->b[j][3]);
        if (x1 > x2) {
            double t = x1;
            x1 = x2, x2 = t;
        }
        double area = (x2 - x1) * (y2 - y1);
        x1 = fmax(x1, 0), y1 = fmax(y1, 0), x2 = fmin(x2, OUT_W), y2 = fmin(y2, OUT_H);
        double seen = x2 > x1 && y2 > y1 ? (x2 - x1) * (y2 - y1) : 0;
        if (!(seen > 0 && seen >= o->v->min_vis * area)) {
            o->dropped++;
            continue;
        }
        if (o->v->out_norm)
            x1 /= OUT_W, x2 /= OUT_W, y1 /= OUT_H, y2 /= OUT_H;
        const float *g = row + 4 * kept;
        ck_assert_msg(kept < b->box_counts[i] && CLOSE(g[0], x1) && CLOSE(g[1], y1) &&
                          CLOSE(g[2], x2) && CLOSE(g[3], y2),
                      "sample %llu box %u (crop %g,%g %gx%g flip %d): got %g,%g,%g,%g want "
                      "%g,%g,%g,%g (count %u)", (unsigned long long)id, j, cb[0], cb[1], cb[2],
                      cb[3], flip, g[0], g[1], g[2], g[3], x1, y1, x2, y2, b->box_counts[i]);
        int32_t want_cls = o->v->cls || o->v->ext ? a->cls[j] : -1;
        ck_assert_int_eq(cls[kept], want_cls);
        kept++;
    }
    ck_assert_uint_eq(b->box_counts[i], kept);
    o->kept += kept;
    for (uint32_t k = kept; k < MAXB; k++)
        ck_assert(cls[k] == -1 && row[4 * k] == 0 && row[4 * k + 2] == 0);
    ck_assert_uint_eq(b->point_counts[i], a->np);
    for (uint32_t j = 0; j < a->np; j++) {
        uint32_t src = flip ? g_swap[j] : j; /* the flip pair 0:1 swapped */
        if (src >= a->np)
            src = j;
        const double *p = a->p[src];
        const float *g = pts + 3 * j;
        double x = map_x(cb, flip, p[0]), y = map_y(cb, p[1]);
        int in = x >= 0 && x <= OUT_W && y >= 0 && y <= OUT_H;
        if (o->v->out_norm)
            x /= OUT_W, y /= OUT_H;
        if (p[2] == 0)
            ck_assert(g[0] == 0 && g[1] == 0 && g[2] == 0);
        else
            ck_assert_msg(CLOSE(g[0], x) && CLOSE(g[1], y) && g[2] == (in ? (float)p[2] : 0),
                          "sample %llu point %u: got %g,%g,%g want %g,%g,%g",
                          (unsigned long long)id, j, g[0], g[1], g[2], x, y, in ? p[2] : 0);
        o->invisible += p[2] != 0 && !in;
    }
    if (b->is_padding[i]) {
        ck_assert(o->seen[id] && o->counts[id] == kept);
        ck_assert(memcmp(o->rows[id], row, sizeof o->rows[id]) == 0);
    }
    memcpy(o->rows[id], row, sizeof o->rows[id]);
    o->counts[id] = kept, o->seen[id] = 1;
    o->checked++;
}

static rf_stats run_epoch(const char *pattern, run_opts *o)
{
    const char *pat;
    rf_config c = config_of(&pat, pattern, o);
    rf_loader *ld = rf_test_create_ok(&c);
    rf_batch *b;
    int rc;
    while ((rc = rf_loader_next(ld, &b)) == 0 || rc == RF_EPOCH_END) {
        if (rc)
            continue;
        ck_assert(b->boxes && b->box_classes && b->box_counts && b->points && b->point_counts);
        for (uint32_t i = 0; i < b->count; i++)
            check_sample(b, i, o);
        ck_assert_int_eq(rf_loader_release(ld, b, NULL), 0);
    }
    ck_assert_msg(rc == RF_DONE, "%d %s", rc, rf_last_error(ld));
    rf_stats st;
    rf_stats_init(&st);
    ck_assert_int_eq(rf_loader_stats(ld, &st), 0);
    rf_loader_destroy(ld);
    return st;
}

/* Each variant on every path, RANDOM and CENTER, at 1 and 3 threads. */
START_TEST(boxes_follow_the_crop_on_every_path)
{
    make_data();
    char pattern[600];
    snprintf(pattern, sizeof pattern, "%s/shard-*.tar", g_dir);
    const variant *v = &g_var[_i];
    const struct {
        uint32_t crop, threads, gpu, hw;
    } paths[] = {{RF_CROP_RANDOM, 1, 0, 0}, {RF_CROP_RANDOM, 3, 0, 0}, {RF_CROP_CENTER, 3, 0, 0},
                 {RF_CROP_RANDOM, 1, 1, 0}, {RF_CROP_RANDOM, 3, 1, 0}, {RF_CROP_RANDOM, 1, 0, 100},
                 {RF_CROP_RANDOM, 3, 0, 100}};
    static run_opts o, first;
    for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++) {
        memset(&o, 0, sizeof o);
        o.crop = paths[p].crop, o.threads = paths[p].threads, o.gpu = paths[p].gpu;
        o.hw = paths[p].hw, o.v = v;
        rf_stats st = run_epoch(pattern, &o);
        ck_assert_uint_eq(o.checked, N);
        ck_assert_uint_gt(o.kept, 0);
        if (paths[p].hw)
            ck_assert_uint_eq(st.hw_decoded, N);
        if (paths[p].gpu)
            ck_assert_uint_gt(st.gpu_decoded, 0);
        if (p == 0)
            first = o;
        else if (paths[p].crop == RF_CROP_RANDOM) /* the same rows whatever decoded them */
            ck_assert(memcmp(first.rows, o.rows, sizeof o.rows) == 0);
    }
    ck_assert_uint_gt(first.dropped, 0); /* random crops cut boxes away */
    ck_assert_uint_gt(first.invisible, 0);
}
END_TEST

/* Padding repeats (4 ranks over 14 samples: 2 repeats) carry their original's rows; under
 * skip mode a sample with a bad box is replaced by one with its own rows, and a blank holds
 * none. */
START_TEST(padding_and_replacements)
{
    make_data();
    char pattern[600];
    snprintf(pattern, sizeof pattern, "%s/shard-*.tar", g_dir);
    static run_opts o;
    uint64_t checked = 0;
    for (uint32_t rank = 0; rank < 4; rank++) {
        /* the rows seen are kept across the ranks: a repeat's original is another rank's */
        o.checked = o.blanks = 0;
        o.crop = RF_CROP_RANDOM, o.threads = 3, o.gpu = rank & 1, o.world = 4, o.rank = rank;
        o.v = &g_var[0];
        run_epoch(pattern, &o);
        checked += o.checked;
    }
    ck_assert_uint_eq(checked, 16);
    char *dir = rf_test_mkdtemp("boxes46_skip");
    char *json[N];
    memcpy(json, g_json, sizeof json);
    json[6] = "{\"xyxy\": [[1, 2, 0, 3]], \"kp\": []}";
    free(make_shard(dir, json, NULL, NULL));
    snprintf(pattern, sizeof pattern, "%s/shard-*.tar", dir);
    for (uint32_t gpu = 0; gpu <= 1; gpu++) {
        memset(&o, 0, sizeof o);
        o.crop = RF_CROP_RANDOM, o.threads = 3, o.gpu = gpu, o.on_error = RF_ON_ERROR_SKIP;
        o.v = &g_var[0];
        rf_stats st = run_epoch(pattern, &o);
        ck_assert_uint_eq(st.skipped, 1);
        ck_assert_uint_eq(st.skipped_by_reason[RF_SKIP_LABEL], 1);
        ck_assert_uint_eq(o.checked + o.blanks, N);
        ck_assert_uint_eq(o.checked, N - 1 + (o.blanks == 0));
    }
    free(dir);
}
END_TEST

/* Bad inputs: sample 4's member replaced; refused naming shard, member, offset and what. */
static const struct {
    int var;                /* g_var index */
    const char *json;       /* sample 4's KEY.json (NULL: none) */
    int npy;                /* 0: the good .npy; else a bad one (below) */
    const char *member, *want;
} g_bad[] = {
    {0, "{\"xyxy\": [[0, 0, 500, 10]], \"cls\": [1], \"kp\": []}", 0, "json", "box 0"},
    {0, "{\"xyxy\": [[1, 1, 4, 4], [5, 5, 2, 9]], \"kp\": []}", 0, "json", "box 1"},
    {1, "{\"xywh\": [[1, 1, -2, 3]], \"cls\": [1], \"kp\": []}", 0, "json", "negative width"},
    {0, "{\"xyxy\": [[1, 1, 1e999, 3]], \"cls\": [1], \"kp\": []}", 0, "json", "not finite"},
    {0, NULL, 0, "jpg", "has no box member 00000004.json"},
    {0, "{\"boxes\": [], \"kp\": []}", 0, "json", "no field xyxy"},
    {0, "{\"xyxy\": [[1,1,2,2],[1,1,2,2],[1,1,2,2],[1,1,2,2],[1,1,2,2],[1,1,2,2],[1,1,2,2]], "
        "\"kp\": []}", 0, "json", "7 boxes, more than max_boxes 6"},
    {0, "{\"xyxy\": [[1, 1, 2, 2]], \"cls\": [1, 2], \"kp\": []}", 0, "json",
     "2 class ids at cls for 1 boxes"},
    {0, "{\"xyxy\": [[1, 1, 2, 2]], \"cls\": [1.5], \"kp\": []}", 0, "json", "is not an integer"},
    {0, "{\"xyxy\": [[1, 1, 2]], \"cls\": [1], \"kp\": []}", 0, "json", "not an array of 4"},
    {0, "{\"xyxy\": [{\"b\": [1, 1, 2, 2]}], \"cls\": [1], \"kp\": []}", 0, "json",
     "box 0 is not an array of 4"},
    {0, "{\"xyxy\": [[1, 1, 2, 2]], \"cls\": [1], \"kp\": [[1, 2, 3]]}", 0, "json",
     "visibility 3"},
    {0, "{\"xyxy\": [], \"cls\": [], \"kp\": [[900, 2, 2]]}", 0, "json", "point 0"},
    {0, "{\"xyxy\": [], \"cls\": [], \"kp\": [[1, 2, 2]], }", 0, "json", "not valid JSON"},
    {5, NULL, 1, "boxes.npy", "float32 or float64"},
    {5, NULL, 2, "boxes.npy", "Fortran order"},
    {5, NULL, 3, "boxes.npy", "shape is not (N, 4) or (N, 5)"},
    {5, NULL, 4, "boxes.npy", "not finite"},
    {5, NULL, 5, "boxes.npy", "bytes of data"},
};

START_TEST(bad_inputs_are_named)
{
    make_data();
    char *dir = rf_test_mkdtemp("boxes46_bad");
    char *json[N];
    uint8_t *npy[N];
    size_t nlen[N];
    memcpy(json, g_json, sizeof json);
    memcpy(npy, g_npy, sizeof npy);
    memcpy(nlen, g_npy_len, sizeof nlen);
    double v[10] = {1, 1, 3, 3, 0, 2, 2, NAN, 4, 0};
    uint8_t *bad = NULL;
    if (g_bad[_i].npy == 1)
        bad = npy_of(v, 2, 5, "<i4", 0, &nlen[4]);
    else if (g_bad[_i].npy == 2)
        bad = npy_of(v, 2, 5, "<f4", 1, &nlen[4]);
    else if (g_bad[_i].npy == 3)
        bad = npy_of(v, 2, 3, "<f4", 0, &nlen[4]);
    else if (g_bad[_i].npy == 4)
        bad = npy_of(v, 2, 5, "<f8", 0, &nlen[4]);
    else if (g_bad[_i].npy == 5)
        bad = npy_of(v, 2, 5, "<f4", 0, &nlen[4]), nlen[4] -= 4;
    if (bad)
        npy[4] = bad;
    else
        json[4] = (char *)g_bad[_i].json;
    char *shard = make_shard(dir, json, npy, nlen);
    char name[64], at[64], pattern[600];
    snprintf(name, sizeof name, "00000004.%s", g_bad[_i].member);
    snprintf(at, sizeof at, "at offset %llu",
             (unsigned long long)rf_test_member_offset(shard, name));
    snprintf(pattern, sizeof pattern, "%s/shard-*.tar", dir);
    static run_opts o;
    memset(&o, 0, sizeof o);
    o.crop = RF_CROP_RANDOM, o.threads = 2, o.v = &g_var[g_bad[_i].var];
    const char *pat;
    rf_config c = config_of(&pat, pattern, &o);
    rf_loader *ld = rf_test_create_ok(&c);
    ck_assert_int_eq(rf_test_drain_rc(ld), RF_ELABEL);
    const char *e = rf_last_error(ld);
    int named = g_bad[_i].json || bad ? strstr(e, name) && strstr(e, at)
                                      : strstr(e, "00000004") != NULL;
    ck_assert_msg(named && strstr(e, g_bad[_i].want) && strstr(e, "shard-0000.tar"), "%s", e);
    rf_loader_destroy(ld);
    c.on_error = RF_ON_ERROR_SKIP;
    ld = rf_test_create_ok(&c);
    rf_stats st = rf_test_drain(ld);
    ck_assert_uint_eq(st.skipped_by_reason[RF_SKIP_LABEL], 1);
    ck_assert_uint_eq(st.skipped, 1);
    rf_loader_destroy(ld);
    free(bad), free(shard), free(dir);
}
END_TEST

START_TEST(bad_settings_are_refused)
{
    make_data();
    char pattern[600], err[512];
    snprintf(pattern, sizeof pattern, "%s/shard-*.tar", g_dir);
    static run_opts o;
    o.v = &g_var[0];
    const char *pat;
    rf_loader *ld = NULL;
    const struct {
        int what;
        const char *want;
    } cases[] = {{0, "max_boxes"}, {1, "box_json_path and box_class_json_path"},
                 {2, "box_json_path"}, {3, "keypoint_flip_pairs"},
                 {4, "a .npy member is the array of points itself"},
                 {5, "only tar shards"}, {6, "max_points"}, {7, "box_ext"}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        rf_config c = config_of(&pat, pattern, &o);
        switch (cases[k].what) {
        case 0: c.max_boxes = 0; break;
        case 1: c.box_ext = "boxes.npy"; break;
        case 2: c.box_ext = "json", c.box_json_path = NULL; break;
        case 3: c.keypoint_flip_pairs = "0:1,1:2"; break;
        case 4: c.keypoint_ext = "kp.npy"; break;
        case 5: c.source = RF_SOURCE_FOLDER; break;
        case 6: c.max_points = 0; break;
        case 7: c.box_ext = "a/b"; break;
        }
        ck_assert_int_eq(rf_loader_create(&c, &ld, err, sizeof err), RF_EINVAL);
        ck_assert_msg(strstr(err, cases[k].want), "case %zu: %s", k, err);
    }
    /* off: NULL rows */
    rf_config c = rf_test_host_config(&pat, pattern, 32);
    c.label_source = RF_LABEL_NONE;
    ld = rf_test_create_ok(&c);
    rf_batch *b;
    ck_assert_int_eq(rf_loader_next(ld, &b), 0);
    ck_assert(!b->boxes && !b->box_classes && !b->box_counts && !b->points && !b->point_counts);
    ck_assert_int_eq(rf_loader_release(ld, b, NULL), 0);
    rf_loader_destroy(ld);
}
END_TEST

/* A geometry whose output rectangle does not fill the output (letterbox and pad modes place
 * the crop so): boxes are clipped to the rectangle, not the output, and mirrored inside it;
 * points outside it are not visible. The stage's rows driven directly with such a geometry. */
START_TEST(boxes_clip_to_the_output_rectangle)
{
    pl_boxes b = {.boxes = 1, .points = 1, .format = RF_BOX_XYXY, .max_boxes = 3,
                  .max_points = 3, .ext = "json", .kext = "json"};
    float bx[3 * 4] = {10, 10, 30, 20, /* inside the crop */
                       0, 0, 12, 12,   /* half outside its left edge */
                       50, 50, 60, 60}; /* outside entirely */
    int32_t cls[3] = {1, 2, 3};
    uint32_t bn = 3, pn = 3;
    float pts[3 * 3] = {20, 15, 2, 2, 2, 1, 25, 25, 0};
    slot s = {.bx = bx, .bcls = cls, .bn = &bn, .pts = pts, .pn = &pn};
    /* source box 8,8 32x16 onto the 40x20 rectangle at 4,6 of a 56x40 output, flipped */
    rf_geometry g = {.x = 8, .y = 8, .w = 32, .h = 16, .out_x = 4, .out_y = 6, .out_w = 40,
                     .out_h = 20, .out_width = 56, .out_height = 40, .flip = 1};
    rf_tar_span_member found[2] = {{512, 10, 0}, {512, 10, 0}};
    rf_err e = {0};
    ck_assert_int_eq(pl_boxes_map(&b, &s, 0, &g, 64, 64, "k", 0, found, &e), 0);
    /* x' = 4 + 40 - (x - 8) * 40 / 32, y' = 6 + (y - 8) * 20 / 16 */
    ck_assert_uint_eq(bn, 2);
    const float want[8] = {16.5f, 8.5f, 41.5f, 21, 39, 6, 44, 11}; /* the second clipped */
    for (int k = 0; k < 8; k++)
        ck_assert_msg(fabsf(bx[k] - want[k]) < 1e-4f, "%d: %g, not %g", k, bx[k], want[k]);
    ck_assert(cls[0] == 1 && cls[1] == 2 && cls[2] == -1);
    ck_assert(bx[8] == 0 && bx[11] == 0);
    /* points: (20, 15) -> (29, 14.75) visible; (2, 2) -> (51.5, -1.5) outside: v 0, kept in
     * place; v 0 given -> zeros */
    const float wp[9] = {29, 14.75f, 2, 51.5f, -1.5f, 0, 0, 0, 0};
    for (int k = 0; k < 9; k++)
        ck_assert_msg(fabsf(pts[k] - wp[k]) < 1e-4f, "%d: %g, not %g", k, pts[k], wp[k]);
}
END_TEST

/* The JSON numbers boxes are read with, against strtod. */
START_TEST(json_numbers_read_as_strtod)
{
    const char *nums[] = {"0", "-0", "17", "-3.25", "1e2", "1.25E-1", "0.000001234", "6e-7",
                          "123456789012345678901.5", "0.10000000000000001", "-12.5e+3",
                          "2.2250738585072014e-308", "1.7976931348623157e308"};
    for (size_t k = 0; k < sizeof nums / sizeof nums[0]; k++) {
        double v = 0, want = strtod(nums[k], NULL);
        const uint8_t *t = (const uint8_t *)nums[k];
        ck_assert_int_eq(rf_json_number(t, 0, strlen(nums[k]), &v), 0);
        ck_assert_msg(v == want || fabs(v - want) <= 1e-15 * fabs(want), "%s: %.17g, not %.17g",
                      nums[k], v, want);
    }
    double v;
    ck_assert_int_eq(rf_json_number((const uint8_t *)"\"1\"", 0, 3, &v), -1);
    ck_assert_int_eq(rf_json_number((const uint8_t *)"[1]", 0, 3, &v), -1);
    ck_assert_int_eq(rf_json_number((const uint8_t *)"1e999", 0, 5, &v), 0);
    ck_assert(isinf(v));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("boxes");
    TCase *tc = tcase_create("boxes");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, boxes_follow_the_crop_on_every_path, 0, (int)NVAR);
    tcase_add_test(tc, padding_and_replacements);
    tcase_add_loop_test(tc, bad_inputs_are_named, 0, (int)(sizeof g_bad / sizeof g_bad[0]));
    tcase_add_test(tc, bad_settings_are_refused);
    tcase_add_test(tc, json_numbers_read_as_strtod);
    tcase_add_test(tc, boxes_clip_to_the_output_rectangle);
    suite_add_tcase(s, tc);
    return rf_test_run_suite(s);
}
