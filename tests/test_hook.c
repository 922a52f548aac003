/* test_hook.c — rf_config.sample_hook, the user's per-sample augmentation on the decode
 * threads: what the view describes (pixels in the staged layout, key, sample id, position,
 * epoch, a per-sample seed, the label it may overwrite), the same batches at any decode thread
 * count and across runs, a refusing hook as a bad sample under both error policies (the error
 * naming shard, member and byte offset; the skip counted under RF_SKIP_HOOK), padding repeats,
 * and create refusing a hook the configuration could not call (GPU decode, tokens). */
#include <check.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ringfeed.h"
#include "testutil.h"

#define N_SHARDS 2
#define N_PER_SHARD 25
#define N_SAMPLES (N_SHARDS * N_PER_SHARD) /* 50: batch 8 leaves a partial last batch */
#define CLASSES 10
#define SIZE 24
#define EPOCHS 2

static char *g_dir, g_pattern[512];

static void make_data(void)
{
    if (g_dir)
        return;
    g_dir = rf_test_mkdtemp("hook");
    ck_assert_int_eq(rf_test_make_shards(g_dir, N_SHARDS, N_PER_SHARD, CLASSES, 77, 0, 80), 0);
    snprintf(g_pattern, sizeof g_pattern, "%s/shard-*.tar", g_dir);
}

/* What the hook saw of one (epoch, sample id): written by the one decode thread that ran it,
 * read by the test after the batch holding it was handed out (the slot's hand-over orders
 * it). */
typedef struct seen {
    uint64_t seed, position, epoch;
    uint32_t layout, is_padding, calls;
    char key[64];
} seen;

typedef struct ctx {
    seen rec[EPOCHS][N_SAMPLES];
    const char *refuse_key; /* the hook returns -3 for this key */
    _Atomic uint32_t calls, padding_calls;
} ctx;

/* The hook the tests install: adds a seed-derived value (saturating) to every pixel, marks
 * channel 2 of pixel (0, 1) with 7 through the strides, and adds 1000 to the label; records
 * the view. */
static int test_hook(const rf_sample_view *v, void *arg)
{
    ctx *c = arg;
    atomic_fetch_add_explicit(&c->calls, 1, memory_order_relaxed);
    if (v->is_padding)
        atomic_fetch_add_explicit(&c->padding_calls, 1, memory_order_relaxed);
    if (c->refuse_key && strcmp(v->key, c->refuse_key) == 0)
        return -3;
    if (v->struct_size != sizeof(rf_sample_view) || v->channels != 3 || v->height != SIZE ||
        v->width != SIZE || v->epoch >= EPOCHS || v->sample_id >= N_SAMPLES)
        return 99; /* the test then fails on the error, naming this value */
    if (!v->is_padding) {
        seen *r = &c->rec[v->epoch][v->sample_id];
        *r = (seen){.seed = v->seed, .position = v->position, .epoch = v->epoch,
                    .layout = v->layout, .calls = r->calls + 1};
        snprintf(r->key, sizeof r->key, "%s", v->key);
    }
    uint32_t add = (uint32_t)(v->seed & 63);
    for (uint32_t y = 0; y < v->height; y++)
        for (uint32_t x = 0; x < v->width; x++)
            for (uint32_t ch = 0; ch < 3; ch++) {
                uint8_t *p = v->pixels + y * v->row_stride + x * v->pixel_stride +
                             ch * v->channel_stride;
                *p = (uint8_t)(*p + add > 255 ? 255 : *p + add);
            }
    v->pixels[v->pixel_stride + 2 * v->channel_stride] = 7;
    *v->label += 1000;
    return 0;
}

static rf_config hook_config(const char **pat, uint32_t threads, ctx *c)
{
    rf_config cfg = rf_test_host_config(pat, g_pattern, SIZE);
    cfg.seed = 5;
    cfg.batch_size = 8;
    cfg.epochs = EPOCHS;
    cfg.decode_threads = threads;
    cfg.sample_hook = c ? test_hook : NULL;
    cfg.sample_hook_ctx = c;
    return cfg;
}

/* Every epoch's batches, pixels and labels, one after another (N_SAMPLES x (SIZE^2 x 3 bytes
 * + 4) per epoch); with c, each sample's view checked against its batch. */
static uint8_t *run_all(rf_config cfg, ctx *c, size_t *len)
{
    size_t px = (size_t)SIZE * SIZE * 3 * (cfg.dtype == RF_DTYPE_FLOAT32 ? 4 : 1);
    size_t cap = (size_t)EPOCHS * N_SAMPLES * (px + 4), n = 0;
    uint8_t *out = malloc(cap);
    ck_assert_ptr_nonnull(out);
    rf_loader *ld = rf_test_create_ok(&cfg);
    rf_batch *b;
    int rc;
    while ((rc = rf_loader_next(ld, &b)) != RF_DONE) {
        if (rc == RF_EPOCH_END)
            continue;
        ck_assert_msg(rc == 0, "next: %d %s", rc, rf_last_error(ld));
        ck_assert_uint_le(n + b->data_bytes + 4u * b->count, cap);
        memcpy(out + n, b->data, b->data_bytes);
        n += b->data_bytes;
        memcpy(out + n, b->labels, 4u * b->count);
        n += 4u * b->count;
        for (uint32_t i = 0; c && i < b->count; i++) {
            const seen *r = &c->rec[b->epoch][b->sample_ids[i]];
            ck_assert_uint_eq(r->calls, 1);
            ck_assert_str_eq(r->key, b->keys[i]);
            ck_assert_uint_eq(r->position, b->positions[i]);
            ck_assert_uint_eq(r->epoch, b->epoch);
            ck_assert_int_eq(b->labels[i], 1000 + (int32_t)(b->sample_ids[i] % CLASSES));
        }
        ck_assert_int_eq(rf_loader_release(ld, b, NULL), 0);
    }
    rf_loader_destroy(ld);
    *len = n;
    return out;
}

static ctx *new_ctx(void)
{
    ctx *c = calloc(1, sizeof *c);
    ck_assert_ptr_nonnull(c);
    return c;
}

/* The hook's output is a function of the view alone: the same bytes at 1, 2 and 4 decode
 * threads and in a second run, each sample seen once per epoch with its batch's key, id,
 * position and epoch, and the same seed for a sample whatever the threads. */
START_TEST(same_batches_at_any_thread_count)
{
    const char *pat;
    size_t n1, n;
    ctx *c1 = new_ctx();
    uint8_t *ref = run_all(hook_config(&pat, 1, c1), c1, &n1);
    ck_assert_uint_eq(atomic_load(&c1->calls), EPOCHS * N_SAMPLES);
    static const uint32_t threads[] = {2, 4, 4};
    for (size_t k = 0; k < sizeof threads / sizeof threads[0]; k++) {
        ctx *c = new_ctx();
        uint8_t *got = run_all(hook_config(&pat, threads[k], c), c, &n);
        ck_assert_uint_eq(n, n1);
        ck_assert_msg(memcmp(got, ref, n) == 0, "%u decode threads: batches differ",
                      threads[k]);
        for (uint32_t e = 0; e < EPOCHS; e++)
            for (uint32_t id = 0; id < N_SAMPLES; id++)
                ck_assert_uint_eq(c->rec[e][id].seed, c1->rec[e][id].seed);
        free(got);
        free(c);
    }
    /* the seed is per sample and per epoch, not one value */
    uint32_t differ = 0;
    for (uint32_t id = 1; id < N_SAMPLES; id++)
        differ += c1->rec[0][id].seed != c1->rec[0][0].seed &&
                  c1->rec[1][id].seed != c1->rec[0][id].seed;
    ck_assert_uint_ge(differ, N_SAMPLES - 3);
    free(ref);
    free(c1);
}
END_TEST

/* The hook ran on the staged row before the conversion, at the view's strides: each output
 * pixel is the hookless one plus the sample's seed-derived value, channel 2 of pixel (0, 1)
 * is 7, in NHWC and NCHW uint8, and float32 output (NHWC staged, converted after the hook)
 * holds the same values. */
static void check_against_hookless(uint32_t layout, uint32_t dtype)
{
    const char *pat;
    size_t n0, n;
    rf_config plain = hook_config(&pat, 2, NULL);
    plain.layout = layout;
    uint8_t *base = run_all(plain, NULL, &n0);
    ctx *c = new_ctx();
    rf_config cfg = hook_config(&pat, 2, c);
    cfg.layout = layout;
    cfg.dtype = dtype;
    uint8_t *got = run_all(cfg, c, &n);
    size_t px = (size_t)SIZE * SIZE * 3, pos = 0, gpos = 0;
    ck_assert_uint_eq(n, dtype == RF_DTYPE_FLOAT32 ? n0 + 3 * px * EPOCHS * N_SAMPLES : n0);
    /* walk batch by batch: batch of 8 images then 8 labels (the last batch of an epoch: 2) */
    for (uint32_t e = 0; e < EPOCHS; e++)
        for (uint32_t first = 0; first < N_SAMPLES; first += 8) {
            uint32_t cnt = N_SAMPLES - first < 8 ? N_SAMPLES - first : 8;
            for (uint32_t i = 0; i < cnt; i++) {
                const uint8_t *b0 = base + pos + i * px;
                for (size_t k = 0; k < px; k++) {
                    float g;
                    if (dtype == RF_DTYPE_FLOAT32)
                        memcpy(&g, got + gpos + (i * px + k) * 4, 4);
                    else
                        g = got[gpos + i * px + k];
                    size_t mark = layout == RF_LAYOUT_NCHW ? 2 * (size_t)SIZE * SIZE + 1 : 5;
                    if (k == mark) {
                        ck_assert_msg(g == 7.0f, "marked pixel %g", g);
                        continue;
                    }
                    ck_assert_msg(g >= b0[k] && g - b0[k] < 64, "pixel %zu: %g from %u", k, g,
                                  b0[k]);
                }
            }
            pos += cnt * (px + 4);
            gpos += cnt * (px * (dtype == RF_DTYPE_FLOAT32 ? 4 : 1) + 4);
        }
    for (uint32_t id = 0; id < N_SAMPLES; id++) /* uint8: as configured; float: NHWC */
        ck_assert_uint_eq(c->rec[0][id].layout, dtype == RF_DTYPE_UINT8 ? layout : RF_LAYOUT_NHWC);
    free(base);
    free(got);
    free(c);
}

START_TEST(hook_sees_the_staged_row_before_conversion)
{
    check_against_hookless(RF_LAYOUT_NHWC, RF_DTYPE_UINT8);
    check_against_hookless(RF_LAYOUT_NCHW, RF_DTYPE_UINT8);
    check_against_hookless(RF_LAYOUT_NCHW, RF_DTYPE_FLOAT32);
}
END_TEST

/* Non-square output (image_height 24, image_width 40): the view says 24 x 40 with the strides
 * of that shape, so a mark the hook writes at the last row and column, channel 2, lands there
 * in the batch, in NHWC and NCHW. */
#define NS_H 24
#define NS_W 40
static int mark_corner(const rf_sample_view *v, void *arg)
{
    (void)arg;
    if (v->height != NS_H || v->width != NS_W)
        return 98;
    v->pixels[(NS_H - 1) * v->row_stride + (NS_W - 1) * v->pixel_stride + 2 * v->channel_stride] =
        7;
    v->pixels[0] = 9; /* row 0, column 0, channel 0 */
    return 0;
}

START_TEST(non_square_view_has_its_shape_and_strides)
{
    for (uint32_t layout = RF_LAYOUT_NHWC; layout <= RF_LAYOUT_NCHW; layout++) {
        const char *pat;
        rf_config cfg = hook_config(&pat, 2, NULL);
        cfg.image_height = NS_H;
        cfg.image_width = NS_W;
        cfg.layout = layout;
        cfg.epochs = 1;
        cfg.sample_hook = mark_corner;
        rf_loader *ld = rf_test_create_ok(&cfg);
        rf_batch *b;
        int rc, seen_samples = 0;
        size_t px = (size_t)NS_H * NS_W * 3;
        size_t corner = layout == RF_LAYOUT_NCHW
                            ? 2 * (size_t)NS_H * NS_W + (size_t)(NS_H - 1) * NS_W + NS_W - 1
                            : ((size_t)(NS_H - 1) * NS_W + NS_W - 1) * 3 + 2;
        while ((rc = rf_loader_next(ld, &b)) != RF_DONE) {
            if (rc == RF_EPOCH_END)
                continue;
            ck_assert_msg(rc == 0, "next: %d %s", rc, rf_last_error(ld));
            ck_assert_uint_eq(b->data_bytes, b->count * px);
            for (uint32_t i = 0; i < b->count; i++, seen_samples++) {
                const uint8_t *img = (const uint8_t *)b->data + i * px;
                ck_assert_uint_eq(img[corner], 7);
                ck_assert_uint_eq(img[0], 9);
            }
            ck_assert_int_eq(rf_loader_release(ld, b, NULL), 0);
        }
        ck_assert_int_eq(seen_samples, N_SAMPLES);
        rf_loader_destroy(ld);
    }
}
END_TEST

/* ---- a refusing hook, on a shard written by GNU tar ---------------------------------------- */

static char *g_label_shard;

static void make_label_shard(void)
{
    static const char *const labels[] = {"0", "1", "2", "3", "4", "5", "6", "7"};
    if (!g_label_shard)
        g_label_shard = rf_test_make_label_shard(rf_test_mkdtemp("hook-tar"), labels, 8);
}

/* A loader over the GNU tar shard, in dataset order, batches of 3, whose hook refuses sample
 * 00000004. */
static rf_loader *refusing_loader(ctx *c, uint32_t on_error)
{
    make_label_shard();
    const char *pat;
    rf_config cfg = rf_test_host_config(&pat, g_label_shard, SIZE);
    cfg.batch_size = 3;
    cfg.epochs = 1;
    cfg.order = RF_ORDER_NONE;
    cfg.decode_threads = 2;
    cfg.on_error = on_error;
    cfg.sample_hook = test_hook;
    cfg.sample_hook_ctx = c;
    c->refuse_key = "00000004";
    return rf_test_create_ok(&cfg);
}

/* FAIL: the batches before the refused sample's are delivered, then RF_EHOOK names the shard,
 * the member and its byte offset, what the hook returned, the sample id and epoch. */
START_TEST(refusing_hook_fails_naming_the_sample)
{
    ctx *c = new_ctx();
    rf_loader *ld = refusing_loader(c, RF_ON_ERROR_FAIL);
    rf_batch *b;
    int rc;
    ck_assert_int_eq(rf_loader_next(ld, &b), 0); /* samples 0..2 */
    ck_assert_int_eq(rf_loader_release(ld, b, NULL), 0);
    rc = rf_loader_next(ld, &b); /* 3..5 holds the refused sample 4 */
    ck_assert_int_eq(rc, RF_EHOOK);
    char want[1024];
    snprintf(want, sizeof want, "%s: member 00000004.jpg at offset %llu: sample_hook returned "
             "-3 (sample id 4, epoch 0)", g_label_shard,
             (unsigned long long)rf_test_member_offset(g_label_shard, "00000004.jpg"));
    ck_assert_msg(strstr(rf_last_error(ld), want), "error: %s\nwanted: %s", rf_last_error(ld),
                  want);
    ck_assert_int_eq(rf_loader_next(ld, &b), RF_EHOOK); /* sticky */
    rf_loader_destroy(ld);
    free(c);
}
END_TEST

/* SKIP: the refused sample is left out, counted under RF_SKIP_HOOK, batches stay full, and
 * the epoch's counts add up. */
START_TEST(refusing_hook_is_a_counted_skip)
{
    ctx *c = new_ctx();
    rf_loader *ld = refusing_loader(c, RF_ON_ERROR_SKIP);
    rf_batch *b;
    int rc, delivered = 0;
    while ((rc = rf_loader_next(ld, &b)) == 0) {
        for (uint32_t i = 0; i < b->count; i++) {
            ck_assert_str_ne(b->keys[i], "00000004");
            delivered += !b->is_padding[i];
        }
        ck_assert_int_eq(rf_loader_release(ld, b, NULL), 0);
    }
    ck_assert_int_eq(rc, RF_EPOCH_END);
    rf_stats st;
    rf_stats_init(&st);
    ck_assert_int_eq(rf_loader_stats(ld, &st), 0);
    ck_assert_uint_eq(st.skipped, 1);
    ck_assert_uint_eq(st.skipped_by_reason[RF_SKIP_HOOK], 1);
    ck_assert_uint_eq(st.epoch_skipped_by_reason[RF_SKIP_HOOK], 1);
    ck_assert_uint_eq(st.epoch_delivered, 7);
    ck_assert_uint_eq(st.epoch_delivered + st.epoch_skipped, st.epoch_total);
    ck_assert_int_eq(delivered, 7);
    rf_loader_destroy(ld);
    free(c);
}
END_TEST

/* Rank `rank` of 3 over the 50 samples (17 outputs each; rank 2 pads its last with the
 * epoch's first sample, rank 0's): each output's first 64 bytes into img[sample id] (the
 * padding output's into *pad_img), the padding outputs counted into *pads. */
static void collect(uint32_t rank, ctx *c, uint8_t img[N_SAMPLES][64], uint8_t *pad_img,
                    uint64_t *pad_id, uint32_t *pads)
{
    const char *pat;
    rf_config cfg = hook_config(&pat, 2, c);
    cfg.world_size = 3;
    cfg.rank = rank;
    cfg.epochs = 1;
    rf_loader *ld = rf_test_create_ok(&cfg);
    rf_batch *b;
    while (rf_loader_next(ld, &b) == 0) {
        for (uint32_t i = 0; i < b->count; i++) {
            const uint8_t *px = (const uint8_t *)b->data + (size_t)i * SIZE * SIZE * 3;
            if (b->is_padding[i])
                memcpy(pad_img, px, 64), *pad_id = b->sample_ids[i], ++*pads;
            else
                memcpy(img[b->sample_ids[i]], px, 64);
        }
        ck_assert_int_eq(rf_loader_release(ld, b, NULL), 0);
    }
    rf_loader_destroy(ld);
}

/* Padding repeats are decoded like any sample, so the hook sees them (is_padding 1), with
 * their original's seed: rank 2's repeat has the pixels rank 0 delivered for that sample. */
START_TEST(padding_repeats_get_their_originals_pixels)
{
    static uint8_t img[N_SAMPLES][64];
    uint8_t pad_img[64];
    uint64_t pad_id = UINT64_MAX;
    uint32_t pads = 0;
    ctx *c0 = new_ctx(), *c2 = new_ctx();
    collect(0, c0, img, pad_img, &pad_id, &pads);
    ck_assert_uint_eq(pads, 0);
    collect(2, c2, img, pad_img, &pad_id, &pads);
    ck_assert_uint_eq(pads, 1);
    ck_assert_uint_eq(atomic_load(&c2->padding_calls), 1);
    ck_assert_uint_eq(atomic_load(&c2->calls), 17);
    ck_assert_uint_lt(pad_id, N_SAMPLES);
    ck_assert_int_eq(c0->rec[0][pad_id].calls, 1); /* rank 0 delivered the original */
    ck_assert_msg(memcmp(img[pad_id], pad_img, 64) == 0, "the repeat of %llu differs",
                  (unsigned long long)pad_id);
    free(c0);
    free(c2);
}
END_TEST

/* A hook the run could not call is refused at create, saying why. */
START_TEST(hook_refused_with_gpu_decode_and_tokens)
{
    const char *pat;
    ctx *c = new_ctx();
    char err[512];
    rf_loader *ld = NULL;
    for (int k = 0; k < 3; k++) {
        rf_config cfg = hook_config(&pat, 1, c);
        if (k == 0)
            cfg.gpu_decode = 1;
        else if (k == 1)
            cfg.hw_decode_percent = 50;
        else
            cfg.source = RF_SOURCE_TOKENS, cfg.token_bytes = 2, cfg.seq_len = 8;
        ck_assert_int_eq(rf_loader_create(&cfg, &ld, err, sizeof err), RF_EINVAL);
        ck_assert_ptr_null(ld);
        ck_assert_msg(strstr(err, "sample_hook"), "%s", err);
        ck_assert_msg(strstr(err, k < 2 ? "gpu_decode and hw_decode_percent to 0" : "token"),
                      "%s", err);
    }
    ck_assert_uint_eq(atomic_load(&c->calls), 0);
    free(c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hook");
    TCase *tc = tcase_create("hook");
    tcase_set_timeout(tc, 300);
    tcase_add_unchecked_fixture(tc, make_data, NULL);
    tcase_add_test(tc, same_batches_at_any_thread_count);
    tcase_add_test(tc, hook_sees_the_staged_row_before_conversion);
    tcase_add_test(tc, refusing_hook_fails_naming_the_sample);
    tcase_add_test(tc, refusing_hook_is_a_counted_skip);
    tcase_add_test(tc, padding_repeats_get_their_originals_pixels);
    tcase_add_test(tc, hook_refused_with_gpu_decode_and_tokens);
    tcase_add_test(tc, non_square_view_has_its_shape_and_strides);
    suite_add_tcase(s, tc);
    return rf_test_run_suite(s);
}
