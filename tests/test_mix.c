/* test_mix.c — weighted mixing, resampling and class or sample weights (plan/mix.c,
 * src/pipeline/mix.c): realised proportions within binomial bounds, class-balanced draws,
 * at most once per epoch without replacement, the rank split, exact resume mid-epoch,
 * determinism across decode thread counts, and bad input refused naming the setting.
 * Plan-level checks run without I/O; loader-level ones read small generated shards and a
 * class-folder tree. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "plan/plan.h"
#include "ringfeed.h"
#include "synth.h"
#include "testutil.h"

/* Within 4 standard deviations of n x p: a bound a correct draw almost never breaks, and a
 * draw ignoring the weights breaks every time here. */
static void assert_binomial(uint64_t got, uint64_t n, double p, const char *what)
{
    double mean = (double)n * p, sd = sqrt((double)n * p * (1 - p));
    ck_assert_msg(fabs((double)got - mean) <= 4 * sd + 1e-9,
                  "%s: %llu of %llu, expected %.1f +- %.1f (4 sigma)", what,
                  (unsigned long long)got, (unsigned long long)n, mean, 4 * sd);
}

static rf_plan mk(uint64_t n, uint32_t batch, uint32_t rank, uint32_t world, uint32_t order)
{
    rf_plan p;
    rf_err e = {0};
    ck_assert_int_eq(rf_plan_init(&p, n, 42, order, batch, 0, RF_REMAINDER_PAD, rank, world, &e),
                     0);
    return p;
}

/* Three sources of 1000, 300 and 50 samples. */
static const uint64_t starts3[] = {0, 1000, 1300, 1350};
static const float w3[] = {5, 3, 2};

static uint32_t source_of(uint64_t id)
{
    return id < 1000 ? 0 : id < 1300 ? 1 : 2;
}

static void check_proportions(uint32_t replacement)
{
    const uint64_t e = 6000;
    rf_plan_mix_spec m = {.nsources = 3, .source_start = starts3, .weights = w3,
                          .epoch_size = e, .replacement = replacement};
    for (uint32_t world = 1; world <= 4; world += 3) {
        rf_plan p = mk(1350, 10, 0, world, RF_ORDER_GLOBAL);
        rf_err err = {0};
        ck_assert_int_eq(rf_plan_set_mix(&p, &m, &err), 0);
        ck_assert_uint_eq(p.n, e);
        rf_plan_epoch(&p, 2, 0);
        uint64_t count[3] = {0}, id, pos;
        uint8_t pad;
        for (uint64_t j = 0; j < p.per_rank; j++) {
            rf_plan_sample(&p, j, &id, &pos, &pad);
            ck_assert_uint_lt(id, 1350);
            count[source_of(id)]++;
        }
        char what[64];
        for (int s = 0; s < 3; s++) {
            snprintf(what, sizeof what, "source %d of %u ranks' rank 0", s, world);
            assert_binomial(count[s], p.per_rank, w3[s] / 10.0, what);
            if (world == 1) /* the whole epoch: exact counts */
                ck_assert_uint_eq(count[s], (uint64_t)(e * w3[s] / 10));
        }
        rf_plan_free(&p);
    }
}

START_TEST(source_proportions_follow_the_weights)
{
    check_proportions(0);
    check_proportions(1);
}
END_TEST

/* Without replacement a source's samples come in permutations: a source taking no more
 * positions than it holds gives each at most once; one taking more wraps, each sample then
 * coming floor or ceil of (positions / samples) times. */
START_TEST(without_replacement_each_sample_once_per_round)
{
    rf_plan_mix_spec m = {.nsources = 3, .source_start = starts3, .weights = w3,
                          .epoch_size = 1500};
    rf_plan p = mk(1350, 10, 0, 1, RF_ORDER_GLOBAL);
    rf_err err = {0};
    ck_assert_int_eq(rf_plan_set_mix(&p, &m, &err), 0);
    rf_plan_epoch(&p, 0, 0);
    uint32_t *seen = calloc(1350, sizeof *seen);
    for (uint64_t i = 0; i < p.n; i++)
        seen[p.perm[i]]++;
    for (uint64_t id = 0; id < 1350; id++) {
        uint32_t s = source_of(id);
        uint64_t have = starts3[s + 1] - starts3[s], took = rf_plan_source_positions(&p, s);
        ck_assert_uint_ge(seen[id], took / have);
        ck_assert_uint_le(seen[id], (took + have - 1) / have);
    }
    ck_assert_uint_eq(rf_plan_source_positions(&p, 0), 750); /* 750 of 1000: each once */
    free(seen);
    rf_plan_free(&p);
}
END_TEST

/* Class-balanced sampling through sample weights (1 / class size) on imbalanced classes, and
 * the alias table's per-sample frequencies on unequal weights. */
START_TEST(sample_weights_balance_classes)
{
    enum { N = 1000, E = 3000 };
    float *w = malloc(N * sizeof *w);
    uint32_t size[3] = {900, 90, 10};
    for (int i = 0; i < N; i++)
        w[i] = 1.0f / (float)size[i < 900 ? 0 : i < 990 ? 1 : 2];
    uint64_t all[] = {0, N};
    rf_plan_mix_spec m = {.nsources = 1, .source_start = all, .sample_weights = w,
                          .epoch_size = E, .replacement = 1};
    rf_plan p = mk(N, 10, 0, 1, RF_ORDER_GLOBAL);
    rf_err err = {0};
    ck_assert_int_eq(rf_plan_set_mix(&p, &m, &err), 0);
    rf_plan_epoch(&p, 1, 0);
    uint64_t c[3] = {0};
    for (uint64_t i = 0; i < E; i++)
        c[p.perm[i] < 900 ? 0 : p.perm[i] < 990 ? 1 : 2]++;
    for (int k = 0; k < 3; k++)
        assert_binomial(c[k], E, 1.0 / 3, "class-balanced class");
    rf_plan_free(&p);
    free(w);

    float w4[] = {1, 2, 3, 4, 0};
    uint64_t five[] = {0, 5};
    m = (rf_plan_mix_spec){.nsources = 1, .source_start = five, .sample_weights = w4,
                           .epoch_size = 20000, .replacement = 1};
    p = mk(5, 10, 0, 1, RF_ORDER_NONE);
    ck_assert_int_eq(rf_plan_set_mix(&p, &m, &err), 0);
    rf_plan_epoch(&p, 0, 0);
    uint64_t f[5] = {0};
    for (uint64_t i = 0; i < p.n; i++)
        f[p.perm[i]]++;
    for (int i = 0; i < 5; i++)
        assert_binomial(f[i], p.n, w4[i] / 10.0, "alias-table sample");
    ck_assert_uint_eq(f[4], 0);
    rf_plan_free(&p);
}
END_TEST

/* The epoch is a pure function of its inputs: the same again, another for the next epoch, and
 * the same positions from any resume base; ranks split it disjointly with equal batches. */
START_TEST(mixed_epoch_is_pure_and_rank_split)
{
    rf_plan_mix_spec m = {.nsources = 3, .source_start = starts3, .weights = w3,
                          .epoch_size = 1001, .replacement = 1};
    rf_plan a = mk(1350, 7, 0, 1, RF_ORDER_GLOBAL), b = mk(1350, 7, 0, 1, RF_ORDER_GLOBAL);
    rf_err err = {0};
    ck_assert_int_eq(rf_plan_set_mix(&a, &m, &err), 0);
    ck_assert_int_eq(rf_plan_set_mix(&b, &m, &err), 0);
    rf_plan_epoch(&a, 3, 0);
    rf_plan_epoch(&b, 3, 350);
    ck_assert_int_eq(memcmp(a.perm, b.perm, a.n * sizeof *a.perm), 0);
    rf_plan_epoch(&b, 4, 0);
    ck_assert_int_ne(memcmp(a.perm, b.perm, a.n * sizeof *a.perm), 0);
    /* the augmentation seed changes with the position, so a repeat gets another crop */
    ck_assert_uint_ne(rf_plan_aug_seed(&a, 3, 5, 0), rf_plan_aug_seed(&a, 3, 5, 1));
    rf_plan_free(&b);

    enum { WORLD = 3 };
    uint8_t *hit = calloc(a.n, 1);
    uint64_t batches = UINT64_MAX;
    for (uint32_t r = 0; r < WORLD; r++) {
        rf_plan q = mk(1350, 7, r, WORLD, RF_ORDER_GLOBAL);
        ck_assert_int_eq(rf_plan_set_mix(&q, &m, &err), 0);
        rf_plan_epoch(&q, 3, 0);
        if (batches == UINT64_MAX)
            batches = q.batches;
        ck_assert_uint_eq(q.batches, batches); /* equal batches on every rank */
        for (uint64_t j = 0; j < q.per_rank; j++) {
            uint64_t id, pos;
            uint8_t pad;
            rf_plan_sample(&q, j, &id, &pos, &pad);
            ck_assert_uint_eq(id, a.perm[pos]); /* the single-rank epoch's sample there */
            if (!pad) {
                ck_assert_int_eq(hit[pos], 0); /* disjoint by position */
                hit[pos] = 1;
            }
        }
        rf_plan_free(&q);
    }
    for (uint64_t i = 0; i < a.n; i++)
        ck_assert_int_eq(hit[i], 1); /* and complete */
    free(hit);
    rf_plan_free(&a);
}
END_TEST

/* ---- the loader ---------------------------------------------------------------------------*/

static char *g_dir_a, *g_dir_b, *g_tree, *g_tree2;
static char g_pat_a[600], g_pat_b[600];
#define NA 60 /* source a: 2 shards of 30 */
#define NB 20 /* source b: 1 shard of 20 */
#define SIZE 16

static rf_config mix_config(const char **pats, const uint32_t *per, const float *w)
{
    pats[0] = g_pat_a;
    pats[1] = g_pat_b;
    rf_config c;
    rf_config_init(&c);
    c.shards = pats;
    c.shard_count = 2;
    c.source_shards = per;
    c.source_count = 2;
    c.weights = w;
    c.weight_count = 2;
    c.device_kind = RF_DEVICE_HOST;
    c.image_size = SIZE;
    c.batch_size = 9;
    c.epoch_size = 200;
    c.epochs = 2;
    c.decode_threads = 1;
    return c;
}

typedef struct run {
    uint64_t n, ids[512], pos[512], pix[512];
} run;

static uint64_t fnv(const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* Batches from ld until RF_DONE, or `stop` batches (then *state gets a resume state). */
static void collect(rf_loader *ld, run *out, uint64_t stop, uint8_t *state, uint64_t *len)
{
    rf_batch *b;
    int rc;
    uint64_t k = 0;
    while ((rc = rf_loader_next(ld, &b)) == 0 || rc == RF_EPOCH_END) {
        if (rc)
            continue;
        size_t per = b->data_bytes / b->count;
        for (uint32_t i = 0; i < b->count; i++, out->n++) {
            ck_assert_uint_lt(out->n, 512);
            out->ids[out->n] = b->sample_ids[i];
            out->pos[out->n] = b->positions[i];
            out->pix[out->n] = fnv((const uint8_t *)b->data + i * per, per);
        }
        ck_assert_int_eq(rf_loader_release(ld, b, NULL), 0);
        if (++k == stop) {
            ck_assert_int_eq(rf_loader_state(ld, state, 256, len), 0);
            return;
        }
    }
    ck_assert_msg(rc == RF_DONE, "rf_loader_next: %d %s", rc, rf_last_error(ld));
}

START_TEST(loader_mixes_resumes_and_ignores_threads)
{
    const char *pats[2];
    uint32_t per[] = {1, 1};
    float w[] = {1, 3}; /* source b, a third of a's size, takes three quarters */
    rf_config c = mix_config(pats, per, w);
    rf_loader *ld = rf_test_create_ok(&c);
    rf_config got;
    rf_config_init(&got);
    ck_assert_int_eq(rf_loader_config(ld, &got), 0);
    ck_assert_uint_eq(got.epoch_size, 200);
    ck_assert_uint_eq(got.replacement, RF_REPLACEMENT_OFF);
    static run full, threads, head, tail;
    collect(ld, &full, 0, NULL, NULL);
    rf_loader_destroy(ld);
    ck_assert_uint_eq(full.n, 400); /* 2 epochs of 200 positions */
    uint64_t in_b = 0;
    for (uint64_t i = 0; i < 200; i++)
        in_b += full.ids[i] >= NA;
    ck_assert_uint_eq(in_b, 150);

    c.decode_threads = 3;
    ld = rf_test_create_ok(&c);
    collect(ld, &threads, 0, NULL, NULL);
    rf_loader_destroy(ld);
    ck_assert_int_eq(memcmp(&full, &threads, sizeof full), 0); /* ids, positions, pixels */

    /* stop after 7 batches (mid-epoch 0), resume from the state: the same following batches */
    uint8_t state[256];
    uint64_t len = 0;
    c.decode_threads = 2;
    ld = rf_test_create_ok(&c);
    collect(ld, &head, 7, state, &len);
    rf_loader_destroy(ld);
    ck_assert_uint_eq(head.n, 63);
    c.resume_state = state;
    c.resume_state_bytes = len;
    ld = rf_test_create_ok(&c);
    collect(ld, &tail, 0, NULL, NULL);
    rf_loader_destroy(ld);
    ck_assert_uint_eq(head.n + tail.n, full.n);
    ck_assert_int_eq(memcmp(full.ids + head.n, tail.ids, tail.n * sizeof *tail.ids), 0);
    ck_assert_int_eq(memcmp(full.pos + head.n, tail.pos, tail.n * sizeof *tail.pos), 0);
    ck_assert_int_eq(memcmp(full.pix + head.n, tail.pix, tail.n * sizeof *tail.pix), 0);

    /* the state carries the mixing settings: other weights, or none, refuse the cursor */
    char err[512] = "";
    float other[] = {1, 1};
    c.weights = other;
    ck_assert_int_eq(rf_loader_create(&c, &ld, err, sizeof err), RF_ERESUME);
    ck_assert_msg(strstr(err, "other sources, weights") != NULL, "%s", err);
    c.weights = NULL, c.weight_count = 0, c.epoch_size = 0;
    ck_assert_int_eq(rf_loader_create(&c, &ld, err, sizeof err), RF_ERESUME);
    ck_assert_msg(strstr(err, "this one does not mix") != NULL, "%s", err);
    float same[] = {2, 6}; /* the same counts: the same order */
    c.weights = same, c.weight_count = 2, c.epoch_size = 200;
    ld = rf_test_create_ok(&c);
    rf_loader_destroy(ld);
}
END_TEST

static void refused(rf_config *c, const char *word)
{
    rf_loader *ld = NULL;
    char err[512] = "";
    ck_assert_int_eq(rf_loader_create(c, &ld, err, sizeof err), RF_EINVAL);
    ck_assert_ptr_null(ld);
    ck_assert_msg(strstr(err, word) != NULL, "'%s' does not name %s", err, word);
}

START_TEST(bad_mixing_input_is_refused_by_name)
{
    const char *pats[2];
    uint32_t per[] = {1, 1}, per_bad[] = {1, 2};
    float neg[] = {1, -1}, nan[] = {NAN, 1}, inf[] = {1, INFINITY}, zero[] = {0, 0},
          three[] = {1, 1, 1}, ok[] = {1, 1};
    rf_config c = mix_config(pats, per, neg);
    refused(&c, "weights[1] is -1");
    c.weights = nan;
    refused(&c, "weights[0] is nan");
    c.weights = inf;
    refused(&c, "weights[1] is inf");
    c.weights = zero;
    refused(&c, "weights are all zero");
    c.weights = three;
    c.weight_count = 3;
    refused(&c, "weights has 3 entries for 2 sources");
    c = mix_config(pats, per_bad, ok);
    refused(&c, "source_shards add up to 3");
    c = mix_config(pats, per, ok);
    float sw[NA + NB];
    for (int i = 0; i < NA + NB; i++)
        sw[i] = 1;
    c.sample_weights = sw;
    c.sample_weight_count = NA;
    refused(&c, "sample_weights has 60 entries");
    c.sample_weight_count = NA + NB;
    sw[3] = -2;
    refused(&c, "sample_weights[3] is -2");
    sw[3] = 1;
    c.replacement = RF_REPLACEMENT_OFF;
    refused(&c, "replacement off");
    c.replacement = RF_REPLACEMENT_AUTO;
    c.sample_weights = NULL, c.sample_weight_count = 0;
    c.class_weights = ok, c.class_weight_count = 2;
    refused(&c, "class_weights need labels known at create");
    c.class_weights = neg;
    refused(&c, "class_weights[1] is -1");
    c.class_weights = NULL, c.class_weight_count = 0;
    c.order = RF_ORDER_SHARD;
    refused(&c, "order shard");
    c.order = RF_ORDER_GLOBAL;
    c.epoch_size = UINT64_MAX;
    refused(&c, "epoch_size 18446744073709551615");
}
END_TEST

/* class_weights on a class-folder tree of 40, 8 and 2 images: 1 / class size balances them. */
START_TEST(class_weights_balance_a_folder)
{
    const char *pat = g_tree;
    rf_config c = rf_test_host_config(&pat, g_tree, SIZE);
    c.source = RF_SOURCE_FOLDER;
    float cw[] = {1.0f / 40, 1.0f / 8, 1.0f / 2};
    c.class_weights = cw;
    c.class_weight_count = 3;
    c.epoch_size = 1500;
    c.batch_size = 50;
    c.epochs = 1;
    c.decode_threads = 2;
    rf_loader *ld = rf_test_create_ok(&c);
    rf_config got;
    rf_config_init(&got);
    ck_assert_int_eq(rf_loader_config(ld, &got), 0);
    ck_assert_uint_eq(got.replacement, RF_REPLACEMENT_ON);
    uint64_t count[3] = {0}, n = 0;
    rf_batch *b;
    int rc;
    while ((rc = rf_loader_next(ld, &b)) == 0 || rc == RF_EPOCH_END) {
        if (rc)
            continue;
        for (uint32_t i = 0; i < b->count; i++, n++) {
            ck_assert(b->labels[i] >= 0 && b->labels[i] < 3);
            count[b->labels[i]]++;
        }
        rf_loader_release(ld, b, NULL);
    }
    ck_assert_int_eq(rc, RF_DONE);
    rf_loader_destroy(ld);
    ck_assert_uint_eq(n, 1500);
    for (int k = 0; k < 3; k++)
        assert_binomial(count[k], n, 1.0 / 3, "class-balanced folder class");
}
END_TEST

/* Two folder sources, each its own tree and classes: the tree of 50 and one of 4 images
 * (classes 0 and 1, two each), weighted 1:1 over 400 positions without replacement. */
START_TEST(folder_sources_mix_with_their_own_labels)
{
    const char *pats[2] = {g_tree, g_tree2};
    uint32_t per[] = {1, 1};
    float w[] = {1, 1};
    rf_config c = rf_test_host_config(&pats[0], g_tree, SIZE);
    c.shards = pats;
    c.shard_count = 2;
    c.source = RF_SOURCE_FOLDER;
    c.source_shards = per;
    c.source_count = 2;
    c.weights = w;
    c.weight_count = 2;
    c.epoch_size = 400;
    c.batch_size = 40;
    c.epochs = 1;
    rf_loader *ld = rf_test_create_ok(&c);
    ck_assert_uint_eq(rf_loader_num_samples(ld), 54);
    uint64_t second[4] = {0}, n = 0;
    rf_batch *b;
    int rc;
    while ((rc = rf_loader_next(ld, &b)) == 0 || rc == RF_EPOCH_END) {
        for (uint32_t i = 0; rc == 0 && i < b->count; i++, n++)
            if (b->sample_ids[i] >= 50) {
                ck_assert_int_eq(b->labels[i], (int32_t)(b->sample_ids[i] - 50) / 2);
                second[b->sample_ids[i] - 50]++;
            }
        if (rc == 0)
            rf_loader_release(ld, b, NULL);
    }
    ck_assert_int_eq(rc, RF_DONE);
    rf_loader_destroy(ld);
    ck_assert_uint_eq(n, 400);
    for (int i = 0; i < 4; i++) /* 200 positions over 4 images: 50 rounds, each once a round */
        ck_assert_uint_eq(second[i], 50);
}
END_TEST

/* Tar sources with their own label rules: KEY.cls in one, KEY.json in another, none in a
 * third; and a rule that is none of these refused by name. */
START_TEST(tar_sources_keep_their_own_label_rules)
{
    static const char *const cls[] = {"1", "1", "1", "1"};
    static const char *const js[] = {"{\"y\": 9}", "{\"y\": 9}", "{\"y\": 9}", "{\"y\": 9}"};
    char *a = rf_test_make_label_shard(rf_test_mkdtemp("mix-cls"), cls, 4);
    char *b = rf_test_make_label_shard_ext(rf_test_mkdtemp("mix-json"), "json", js, 4);
    char *n = rf_test_make_label_shard_ext(rf_test_mkdtemp("mix-none"), "txt", js, 4);
    const char *pats[3] = {a, b, n}, *labels[3] = {NULL, "json:y", "none"};
    uint32_t per[] = {1, 1, 1};
    rf_config c = rf_test_host_config(&pats[0], a, SIZE);
    c.shards = pats;
    c.shard_count = 3;
    c.source_shards = per;
    c.source_count = 3;
    c.source_labels = labels;
    c.batch_size = 4;
    c.epochs = 1;
    rf_loader *ld = rf_test_create_ok(&c);
    rf_batch *b2;
    int rc, seen[3] = {0};
    while ((rc = rf_loader_next(ld, &b2)) == 0 || rc == RF_EPOCH_END) {
        for (uint32_t i = 0; rc == 0 && i < b2->count; i++) {
            uint64_t src = b2->sample_ids[i] / 4;
            static const int32_t want[3] = {1, 9, -1};
            ck_assert_int_eq(b2->labels[i], want[src]);
            seen[src]++;
        }
        if (rc == 0)
            rf_loader_release(ld, b2, NULL);
    }
    ck_assert_int_eq(rc, RF_DONE);
    rf_loader_destroy(ld);
    ck_assert(seen[0] == 4 && seen[1] == 4 && seen[2] == 4);
    labels[1] = "xml";
    refused(&c, "source_labels[1] is \"xml\"");
    labels[1] = "json:";
    refused(&c, "source_labels[1]");
    free(a);
    free(b);
    free(n);
}
END_TEST

static void make_tree(const char *root, const int *sizes, int nclasses)
{
    char dir[700], path[800];
    for (int k = 0; k < nclasses; k++) {
        snprintf(dir, sizeof dir, "%s/c%d", root, k);
        mkdir(dir, 0755);
        for (int i = 0; i < sizes[k]; i++) {
            uint8_t rgb[20 * 20 * 3], *jpg;
            size_t len;
            rf_synth_image((uint64_t)(k * 100 + i), 20, 20, rgb);
            if (rf_synth_jpeg(rgb, 20, 20, 80, 0, &jpg, &len) != 0)
                abort();
            snprintf(path, sizeof path, "%s/i%02d.jpg", dir, i);
            rf_test_write_file(path, jpg, len);
            free(jpg);
        }
    }
}

int main(void)
{
    g_dir_a = rf_test_mkdtemp("mix-a");
    g_dir_b = rf_test_mkdtemp("mix-b");
    g_tree = rf_test_mkdtemp("mix-tree");
    if (rf_test_make_shards(g_dir_a, 2, NA / 2, 5, 1, 1, 24) ||
        rf_test_make_shards(g_dir_b, 1, NB, 5, 2, 1, 24))
        return 1;
    snprintf(g_pat_a, sizeof g_pat_a, "%s/shard-{0000..0001}.tar", g_dir_a);
    snprintf(g_pat_b, sizeof g_pat_b, "%s/shard-0000.tar", g_dir_b);
    static const int sizes[3] = {40, 8, 2}, sizes2[2] = {2, 2};
    make_tree(g_tree, sizes, 3);
    g_tree2 = rf_test_mkdtemp("mix-tree2");
    make_tree(g_tree2, sizes2, 2);
    Suite *s = suite_create("mix");
    TCase *tc = tcase_create("mix");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, source_proportions_follow_the_weights);
    tcase_add_test(tc, without_replacement_each_sample_once_per_round);
    tcase_add_test(tc, sample_weights_balance_classes);
    tcase_add_test(tc, mixed_epoch_is_pure_and_rank_split);
    tcase_add_test(tc, loader_mixes_resumes_and_ignores_threads);
    tcase_add_test(tc, bad_mixing_input_is_refused_by_name);
    tcase_add_test(tc, class_weights_balance_a_folder);
    tcase_add_test(tc, folder_sources_mix_with_their_own_labels);
    tcase_add_test(tc, tar_sources_keep_their_own_label_rules);
    suite_add_tcase(s, tc);
    return rf_test_run_suite(s);
}
