/* test_buckets.c — size buckets (rf_config.size_buckets, issue 46 item 4): over a shard of PNG,
 * lossless WebP and JPEG samples of many aspect ratios, each with a box of the whole image
 * (KEY.json) and a mask of its size (KEY.seg.png), every batch holds samples of one bucket
 * (rf_batch.bucket, bucket_height, bucket_width), each sample is the one whose aspect ratio is
 * nearest its bucket's and equals the letterbox reference for that bucket (sizeutil.c) packed
 * from its slot's start (rf_batch.sizes, sample_offsets), its letterbox row, box and mask
 * follow the bucket's geometry; every sample is delivered exactly once per epoch, over one
 * rank and over two; the same batches at 1 and 3 decode threads and on the GPU paths (kernels
 * and engines, the host backend's emulation); a resume mid-epoch gives the
 * remaining batches, a cursor that is no batch start of the new shape is refused; drop_last
 * drops the leftovers; bad settings are refused by name; the sizes come from the headers, a
 * JPEG's past a long EXIF block too. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ringfeed.h"
#include "sizeutil.h"
#include "synth.h"
#include "testutil.h"

#define BUCKETS "24x40,32x32,40x24"
#define N_BUCKETS 3
#define SLOT_H 40 /* AUTO: the largest bucket's height and width */
#define SLOT_W 40
#define N_PICS 29
#define BATCH 3
#define MASK_IN 7 /* every mask pixel's value; mask_fill (255) outside the image */
#define MAX_BATCHES 64

static const uint32_t g_bh[N_BUCKETS] = {24, 32, 40}, g_bw[N_BUCKETS] = {40, 32, 24};
static const uint32_t g_sizes[][2] = {{97, 61}, {61, 97}, {50, 50}, {1, 37}, {37, 1},
                                      {9, 5},   {200, 7}, {56, 40}, {113, 80}, {3, 90},
                                      {40, 40}, {64, 48}, {48, 64}, {40, 20}};
#define N_SIZES (sizeof g_sizes / sizeof g_sizes[0])

static pic g_pics[N_PICS];
static char *g_dir, g_shard[512];

/* An 8-bit gray PNG of w x h, every pixel MASK_IN (rf_synth_png's gray is the green). */
static uint8_t *mask_png(uint32_t w, uint32_t h, size_t *len)
{
    uint8_t *rgb = malloc((size_t)w * h * 3), *out = NULL;
    memset(rgb, MASK_IN, (size_t)w * h * 3);
    ck_assert_int_eq(rf_synth_png(rgb, w, h, RF_SYNTH_PNG_GRAY8, &out, len), 0);
    free(rgb);
    return out;
}

/* p's JPEG with APP1 segments of `extra` bytes in all after its SOI, as a camera's EXIF block
 * with a thumbnail puts the frame header tens of KiB in (malloc'ed). */
static uint8_t *long_exif(const pic *p, size_t extra, size_t *len)
{
    uint8_t *out = malloc(p->len + extra), *at = out + 2;
    memcpy(out, p->data, 2);
    for (size_t left = extra; left > 0;) {
        size_t seg = left > 60000 ? 40000 : left; /* a segment holds at most 65535 bytes */
        at[0] = 0xFF, at[1] = 0xE1, at[2] = (uint8_t)((seg - 2) >> 8), at[3] = (uint8_t)(seg - 2);
        memcpy(at + 4, "Exif\0\0", 6);
        memset(at + 10, 0xA5, seg - 10); /* no 0xFF: nothing here reads as a marker */
        at += seg, left -= seg;
    }
    memcpy(at, p->data + 2, p->len - 2);
    *len = p->len + extra;
    return out;
}

/* One shard: sample i is KEY.png, .webp or .jpg, KEY.cls holding i, KEY.json with one box of
 * the whole image and KEY.seg.png. */
static void make_data(void)
{
    if (g_dir)
        return;
    g_dir = rf_test_mkdtemp("buckets");
    char src[512], file[600];
    snprintf(src, sizeof src, "%s/src", g_dir);
    mkdir(src, 0755);
    static const char *const ext[] = {"png", "webp", "jpg"};
    for (uint32_t i = 0; i < N_PICS; i++) {
        pic *p = &g_pics[i];
        *p = sz_make_pic(g_sizes[i % N_SIZES][0], g_sizes[i % N_SIZES][1], (int)(i % 3), 460 + i);
        snprintf(file, sizeof file, "%s/%08u.%s", src, i, ext[i % 3]);
        size_t len = p->len;
        /* a JPEG whose size lies past the size pass's first read, and one past its second,
         * both of a bucket other than 0 (where an unread size would go) */
        uint8_t *data = i == 2    ? long_exif(p, 30000, &len)
                        : i == 17 ? long_exif(p, 90000, &len) : p->data;
        rf_test_write_file(file, data, len);
        if (data != p->data)
            free(data);
        char text[128];
        snprintf(file, sizeof file, "%s/%08u.cls", src, i);
        rf_test_write_file(file, text, (size_t)snprintf(text, sizeof text, "%u", i));
        snprintf(file, sizeof file, "%s/%08u.json", src, i);
        rf_test_write_file(file, text, (size_t)snprintf(text, sizeof text,
                                                        "{\"b\": [[0, 0, %u, %u]]}", p->w, p->h));
        size_t mlen;
        uint8_t *m = mask_png(p->w, p->h, &mlen);
        snprintf(file, sizeof file, "%s/%08u.seg.png", src, i);
        rf_test_write_file(file, m, mlen);
        free(m);
    }
    snprintf(g_shard, sizeof g_shard, "%s/buckets.tar", g_dir);
    ck_assert_int_eq(rf_test_shell("cd '%s' && tar --format=gnu --owner=0 --group=0 -cf '%s' "
                                   "$(ls | sort)", src, g_shard), 0);
}

/* The bucket an image of w x h belongs to, from the definition: the nearest aspect ratio in
 * log distance, the first listed on a tie. */
static uint32_t nearest(uint32_t w, uint32_t h)
{
    uint32_t best = 0;
    double bd = INFINITY;
    for (uint32_t b = 0; b < N_BUCKETS; b++) {
        double d = fabs(log((double)w / h) - log((double)g_bw[b] / g_bh[b]));
        if (d < bd - 1e-12)
            best = b, bd = d;
    }
    return best;
}

typedef struct run_opts {
    uint32_t threads, world, rank, drop_last, layout, stop_after;
    uint32_t gpu, hw; /* gpu_decode, hw_decode_percent (the host backend's emulation) */
    const void *resume;
    uint64_t resume_len;
} run_opts;

/* What one run delivered: each batch as text (bucket: labels, padding marked), and the
 * non-padding deliveries per picture. */
typedef struct run_log {
    char batch[MAX_BATCHES][160];
    uint32_t nbatches;
    uint32_t seen[N_PICS];
    uint8_t state[256];
    uint64_t state_len;
    uint64_t gpu_decoded, hw_decoded;
} run_log;

static rf_config config(const char **pat)
{
    rf_config c = rf_test_host_config(pat, g_shard, 0);
    c.size_buckets = BUCKETS;
    c.crop = RF_CROP_LETTERBOX;
    c.seed = 46, c.epochs = 1, c.batch_size = BATCH;
    c.flip_prob = 0.5f;
    c.dct_scaling = RF_DCT_SCALING_OFF; /* the JPEG references are full-scale decodes */
    c.box_json_path = "b", c.max_boxes = 2;
    c.mask = "seg.png";
    return c;
}

/* Sample i of batch b against its bucket's letterbox reference: pixels, sizes, offsets,
 * letterbox row, box and mask. */
static void check_sample(const rf_batch *b, uint32_t i, uint32_t layout, uint8_t *want)
{
    uint32_t hb = b->bucket_height, wb = b->bucket_width;
    const pic *p = &g_pics[b->labels[i]];
    ck_assert_uint_eq(nearest(p->w, p->h), b->bucket);
    ck_assert(b->sizes[2 * i] == hb && b->sizes[2 * i + 1] == wb);
    ck_assert_uint_eq(b->sample_offsets[i], (uint64_t)i * SLOT_H * SLOT_W * 3);
    rf_transform t = sz_transform(RF_CROP_LETTERBOX, hb, wb, layout);
    rect r;
    sz_reference(p->rgb, p->w, p->h, &t, b->flips[i], want, &r);
    const uint8_t *img = (const uint8_t *)b->data + b->sample_offsets[i];
    ck_assert_msg(memcmp(want, img, (size_t)hb * wb * 3) == 0,
                  "sample %d (%ux%u) in bucket %ux%u, flip %u: pixels differ", b->labels[i],
                  p->w, p->h, hb, wb, b->flips[i]);
    const float *row = b->letterbox + 4 * (size_t)i;
    ck_assert(fabsf(row[0] - (float)r.w / p->w) < 1e-4f && fabsf(row[1] - (float)r.h / p->h) <
              1e-4f && row[2] == (float)r.x && row[3] == (float)r.y);
    /* the box of the whole image lands on the rectangle, mirrored in the bucket's width */
    ck_assert_uint_eq(b->box_counts[i], 1);
    const float *bx = b->boxes + (size_t)i * 2 * 4;
    float x0 = (float)r.x, x1 = (float)(r.x + r.w);
    if (b->flips[i])
        x0 = (float)wb - x1, x1 = x0 + (float)r.w;
    ck_assert_msg(fabsf(bx[0] - x0) < 1e-3f && fabsf(bx[2] - x1) < 1e-3f &&
                      fabsf(bx[1] - (float)r.y) < 1e-3f && fabsf(bx[3] - (float)(r.y + r.h)) <
                      1e-3f, "sample %d box %g %g %g %g", b->labels[i], (double)bx[0],
                  (double)bx[1], (double)bx[2], (double)bx[3]);
    /* the mask: hb x wb packed from its row's start, MASK_IN on the rectangle */
    const uint8_t *m = (const uint8_t *)b->masks + (size_t)i * SLOT_H * SLOT_W;
    uint32_t mx = b->flips[i] ? wb - r.x - r.w : r.x;
    for (uint32_t y = 0; y < hb; y++)
        for (uint32_t x = 0; x < wb; x++) {
            int in = x >= mx && x < mx + r.w && y >= r.y && y < r.y + r.h;
            ck_assert_msg(m[y * wb + x] == (in ? MASK_IN : 255), "sample %d mask (%u, %u) %u",
                          b->labels[i], x, y, m[y * wb + x]);
        }
}

static void run(const run_opts *o, run_log *log)
{
    const char *pat;
    rf_config c = config(&pat);
    c.decode_threads = o->threads, c.layout = o->layout;
    c.gpu_decode = o->gpu, c.hw_decode_percent = o->hw;
    c.world_size = o->world ? o->world : 1, c.rank = o->rank, c.drop_last = o->drop_last;
    c.resume_state = o->resume, c.resume_state_bytes = o->resume_len;
    memset(log, 0, sizeof *log);
    rf_loader *ld = rf_test_create_ok(&c);
    rf_config got;
    got.struct_size = sizeof got;
    ck_assert_int_eq(rf_loader_config(ld, &got), 0);
    ck_assert_uint_eq(got.image_height, SLOT_H);
    ck_assert_uint_eq(got.image_width, SLOT_W);
    uint8_t *want = malloc((size_t)SLOT_H * SLOT_W * 3);
    rf_batch *b;
    int rc;
    while ((rc = rf_loader_next(ld, &b)) == 0 || rc == RF_EPOCH_END) {
        if (rc == RF_EPOCH_END)
            continue;
        ck_assert_uint_lt(b->bucket, N_BUCKETS);
        ck_assert(b->bucket_height == g_bh[b->bucket] && b->bucket_width == g_bw[b->bucket]);
        ck_assert(b->count >= 1 && b->count <= BATCH);
        if (o->drop_last)
            ck_assert_uint_eq(b->count, BATCH);
        ck_assert_uint_lt(log->nbatches, MAX_BATCHES);
        char *t = log->batch[log->nbatches++];
        int k = snprintf(t, 160, "%u:", b->bucket);
        for (uint32_t i = 0; i < b->count; i++) {
            check_sample(b, i, o->layout, want);
            k += snprintf(t + k, 160 - (size_t)k, " %d%s", b->labels[i],
                          b->is_padding[i] ? "p" : "");
            log->seen[b->labels[i]] += !b->is_padding[i];
        }
        rf_loader_release(ld, b, NULL);
        if (o->stop_after && log->nbatches == o->stop_after) {
            ck_assert_int_eq(rf_loader_state(ld, log->state, sizeof log->state,
                                             &log->state_len), 0);
            break;
        }
    }
    if (!o->stop_after)
        ck_assert_int_eq(rc, RF_DONE);
    rf_stats st;
    rf_stats_init(&st);
    ck_assert_int_eq(rf_loader_stats(ld, &st), 0);
    log->gpu_decoded = st.gpu_decoded, log->hw_decoded = st.hw_decoded;
    free(want);
    rf_loader_destroy(ld);
}

/* Samples per bucket of the shard, from the definition. */
static void bucket_counts(uint32_t *n)
{
    memset(n, 0, N_BUCKETS * sizeof *n);
    for (uint32_t i = 0; i < N_PICS; i++)
        n[nearest(g_pics[i].w, g_pics[i].h)]++;
}

/* One rank, then both ranks of two, at 1 and 3 threads and both layouts: one bucket a batch,
 * every sample on its reference, exactly once; the same batches whatever the threads. */
START_TEST(one_bucket_a_batch_every_sample_once)
{
    make_data();
    uint32_t n[N_BUCKETS];
    bucket_counts(n);
    for (uint32_t b = 0; b < N_BUCKETS; b++) /* the data fills every bucket beyond a batch */
        ck_assert_uint_gt(n[b], BATCH);
    static run_log a, z;
    for (uint32_t world = 1; world <= 2; world++) {
        uint32_t seen[N_PICS] = {0}, batches = 0;
        for (uint32_t rank = 0; rank < world; rank++) {
            run_opts o = {.threads = 1, .world = world, .rank = rank};
            run(&o, &a);
            o.threads = 3, o.layout = rank ? RF_LAYOUT_NHWC : RF_LAYOUT_NCHW;
            run(&o, &z);
            ck_assert_uint_eq(a.nbatches, z.nbatches);
            for (uint32_t k = 0; k < a.nbatches; k++)
                ck_assert_str_eq(a.batch[k], z.batch[k]);
            for (uint32_t i = 0; i < N_PICS; i++)
                seen[i] += a.seen[i];
            batches = a.nbatches;
        }
        for (uint32_t i = 0; i < N_PICS; i++)
            ck_assert_msg(seen[i] == 1, "world %u: picture %u delivered %u times", world, i,
                          seen[i]);
        /* full batches, then one smaller batch per bucket with leftovers */
        uint32_t want = 0, g = BATCH * world;
        for (uint32_t b = 0; b < N_BUCKETS; b++)
            want += n[b] / g + (n[b] % g != 0);
        ck_assert_uint_eq(batches, want);
    }
}
END_TEST

/* The GPU paths: the JPEGs on the kernels, then on the engines (the host backend's emulation),
 * each letterboxed into its batch's bucket and packed from its sample's start: the same
 * batches, every sample on its reference (pixels, box, mask), as on the CPU. */
START_TEST(buckets_on_the_gpu_paths)
{
    make_data();
    static run_log a, g;
    run_opts o = {.threads = 3};
    run(&o, &a);
    for (int k = 0; k < 2; k++) {
        run_opts r = {.threads = k ? 1 : 3, .gpu = !k, .hw = k ? 100 : 0};
        run(&r, &g);
        ck_assert_uint_gt(k ? g.hw_decoded : g.gpu_decoded, 0);
        ck_assert_uint_eq(a.nbatches, g.nbatches);
        for (uint32_t b = 0; b < a.nbatches; b++)
            ck_assert_str_eq(a.batch[b], g.batch[b]);
    }
}
END_TEST

/* drop_last: only full batches of batch_size, the leftovers of every bucket dropped. */
START_TEST(drop_last_drops_each_buckets_leftovers)
{
    make_data();
    uint32_t n[N_BUCKETS], want = 0, got = 0;
    bucket_counts(n);
    static run_log a;
    run_opts o = {.threads = 2, .drop_last = 1};
    run(&o, &a);
    for (uint32_t b = 0; b < N_BUCKETS; b++)
        want += n[b] / BATCH * BATCH;
    for (uint32_t i = 0; i < N_PICS; i++)
        got += a.seen[i];
    ck_assert_uint_eq(got, want);
    ck_assert_uint_eq(a.nbatches, want / BATCH);
}
END_TEST

/* A state saved after k batches resumes with exactly the batches that were left, on one rank
 * and on each of two. */
START_TEST(resume_mid_epoch_gives_the_remaining_batches)
{
    make_data();
    static run_log all, head, tail;
    for (uint32_t world = 1; world <= 2; world++)
        for (uint32_t rank = 0; rank < world; rank++)
            for (uint32_t k = 1; k <= 4; k += 3) {
                run_opts o = {.threads = 2, .world = world, .rank = rank};
                run(&o, &all);
                o.stop_after = k;
                run(&o, &head);
                ck_assert_uint_gt(head.state_len, 0);
                run_opts r = {.threads = 3, .world = world, .rank = rank,
                              .resume = head.state, .resume_len = head.state_len};
                run(&r, &tail);
                ck_assert_uint_eq(k + tail.nbatches, all.nbatches);
                for (uint32_t j = 0; j < tail.nbatches; j++)
                    ck_assert_str_eq(tail.batch[j], all.batch[k + j]);
            }
}
END_TEST

/* A cursor that is no batch start of the resuming loader's groups (one batch of world 1 is
 * half a group of world 2), and a state of a loader without buckets, are refused. */
START_TEST(resume_refuses_another_batch_shape)
{
    make_data();
    static run_log head;
    run_opts o = {.threads = 1, .stop_after = 1};
    run(&o, &head);
    const char *pat;
    rf_config c = config(&pat);
    c.world_size = 2;
    c.resume_state = head.state, c.resume_state_bytes = head.state_len;
    rf_loader *ld = NULL;
    char msg[512] = "";
    ck_assert_int_eq(rf_loader_create(&c, &ld, msg, sizeof msg), RF_ERESUME);
    ck_assert_msg(strstr(msg, "size_buckets") && strstr(msg, "world_size"), "%s", msg);
    /* a state of the same data without buckets */
    c = config(&pat);
    c.size_buckets = NULL;
    ld = rf_test_create_ok(&c);
    rf_batch *b;
    ck_assert_int_eq(rf_loader_next(ld, &b), 0);
    rf_loader_release(ld, b, NULL);
    uint8_t blob[256];
    uint64_t len = 0;
    ck_assert_int_eq(rf_loader_state(ld, blob, sizeof blob, &len), 0);
    rf_loader_destroy(ld);
    c = config(&pat);
    c.resume_state = blob, c.resume_state_bytes = len;
    ck_assert_int_eq(rf_loader_create(&c, &ld, msg, sizeof msg), RF_ERESUME);
    ck_assert_msg(strstr(msg, "size_buckets"), "%s", msg);
}
END_TEST

static int keep(const rf_sample_view *v, void *ctx)
{
    (void)v, (void)ctx;
    return 0;
}

/* Bad settings: RF_EINVAL naming the entry or the setting that cannot go with buckets. */
START_TEST(bad_settings_are_refused_by_name)
{
    make_data();
    static const struct {
        const char *buckets;
        int change;
        const char *why;
    } cases[] = {
        {"384x", 0, "entry 1 \"384x\""},
        {"32x32,abc", 0, "entry 2 \"abc\""},
        {"32x32, 0x5", 0, "entry 2 \"0x5\": each side must be 1..8192"},
        {"9000x10", 0, "1..8192"},
        {"32x32,24x40,32x32", 0, "entry 3 \"32x32\" repeats entry 1"},
        {"32x32,", 0, "entry 2 \"\""},
        {BUCKETS, 1, "set crop letterbox (crop is random)"},
        {BUCKETS, 2, "entry 1 \"24x40\" does not fit image_height x image_width 32x32"},
        {BUCKETS, 3, "on_error skip"},
        {BUCKETS, 4, "sample_hook"},
        {BUCKETS, 5, "layout NCHW"},
        {BUCKETS, 6, "multi_crop"},
        {BUCKETS, 7, "size_buckets with mixing"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const char *pat;
        rf_config c = config(&pat);
        c.size_buckets = cases[k].buckets;
        c.mask = NULL, c.box_json_path = NULL, c.max_boxes = 0;
        float w = 1;
        switch (cases[k].change) {
        case 1: c.crop = RF_CROP_RANDOM; break;
        case 2: c.image_height = c.image_width = 32; break;
        case 3: c.on_error = RF_ON_ERROR_SKIP; break;
        case 4: c.sample_hook = keep; break;
        case 5: c.dtype = RF_DTYPE_FLOAT32, c.layout = RF_LAYOUT_NCHW; break;
        case 6: c.multi_crop = "2x24"; break;
        case 7: c.weights = &w, c.weight_count = 1, c.epoch_size = 10; break;
        default: break;
        }
        rf_loader *ld = NULL;
        char msg[512] = "";
        ck_assert_int_eq(rf_loader_create(&c, &ld, msg, sizeof msg), RF_EINVAL);
        ck_assert_ptr_null(ld);
        ck_assert_msg(strstr(msg, cases[k].why), "case %zu: %s", k, msg);
    }
}
END_TEST

/* The nearest bucket of a header size, the tie to the bucket listed first: a 2:1 image
 * between 1:1 and 4:1 buckets (both a factor of 2 away) goes to whichever comes first. */
START_TEST(ties_go_to_the_first_bucket)
{
    make_data();
    for (int order = 0; order < 2; order++) {
        const char *pat;
        rf_config c = config(&pat);
        c.mask = NULL, c.box_json_path = NULL, c.max_boxes = 0;
        c.size_buckets = order ? "10x40,20x20" : "20x20,10x40";
        c.batch_size = 1;
        rf_loader *ld = rf_test_create_ok(&c);
        rf_batch *b;
        int rc, found = 0;
        while ((rc = rf_loader_next(ld, &b)) == 0 || rc == RF_EPOCH_END) {
            if (rc == RF_EPOCH_END)
                continue;
            const pic *p = &g_pics[b->labels[0]];
            if (p->w == 200 && p->h == 7) /* 28.6:1: nearest 4:1 either way */
                ck_assert_uint_eq(b->bucket_width, 40);
            if (p->w == 50 && p->h == 50)
                ck_assert_uint_eq(b->bucket_width, 20);
            if (p->w == 64 && p->h == 48) /* 4:3: 1:1 is nearer */
                ck_assert_uint_eq(b->bucket_width, 20);
            if (p->w == 40 && p->h == 20) /* 2:1: the tie, to the first listed */
                ck_assert_uint_eq(b->bucket_width, order ? 40 : 20);
            found++;
            rf_loader_release(ld, b, NULL);
        }
        ck_assert_int_eq(found, N_PICS);
        rf_loader_destroy(ld);
    }
}
END_TEST

/* The header sizes the size pass reads: PNG, WebP and JPEG from their first bytes; a JPEG
 * behind a long EXIF block asks for more until its frame header is in; what is no image, or
 * a JPEG without a frame header, is -1. */
START_TEST(peek_size_from_the_headers)
{
    make_data();
    uint32_t w, h;
    for (int f = SZ_PNG; f <= SZ_JPEG; f++) {
        pic p = sz_make_pic(97, 61, f, 9);
        ck_assert_int_eq(rf_image_peek_size(p.data, RF_MIN(p.len, 4096), &w, &h), 0);
        ck_assert(w == 97 && h == 61);
        if (f == SZ_JPEG) {
            size_t len;
            uint8_t *j = long_exif(&p, 30000, &len);
            ck_assert_int_eq(rf_image_peek_size(j, 4096, &w, &h), 1);
            ck_assert_int_eq(rf_image_peek_size(j, 30000, &w, &h), 1);
            ck_assert_int_eq(rf_image_peek_size(j, len, &w, &h), 0);
            ck_assert(w == 97 && h == 61);
            memset(j + 2, 0, 40); /* no marker where the APP1 was: still found by skipping */
            j[2 + 40] = 0xFF, j[2 + 41] = 0xD9;   /* then an EOI before any frame */
            ck_assert_int_eq(rf_image_peek_size(j, len, &w, &h), -1);
            free(j);
        }
        sz_free_pic(&p);
    }
    static const uint8_t junk[64] = "not an image at all, just text that goes on and on";
    ck_assert_int_eq(rf_image_peek_size(junk, sizeof junk, &w, &h), -1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("buckets");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, one_bucket_a_batch_every_sample_once);
    tcase_add_test(tc, buckets_on_the_gpu_paths);
    tcase_add_test(tc, drop_last_drops_each_buckets_leftovers);
    tcase_add_test(tc, resume_mid_epoch_gives_the_remaining_batches);
    tcase_add_test(tc, resume_refuses_another_batch_shape);
    tcase_add_test(tc, bad_settings_are_refused_by_name);
    tcase_add_test(tc, ties_go_to_the_first_bucket);
    tcase_add_test(tc, peek_size_from_the_headers);
    suite_add_tcase(s, tc);
    return rf_test_run_suite(s);
}
