/* test_multilabel.c — rf_config.multi_label (issue 46): JSON arrays and .cls lists of class
 * ids delivered as a multi-hot row (count x num_classes) or a padded list (count x
 * max_labels, -1 padded), with label_counts and the first id in labels; blank padding rows
 * zero / -1 / count 0; every bad id (over num_classes, negative, not an integer, too many for
 * max_labels) refused by name under on_error FAIL and counted under SKIP; multihot without
 * num_classes, list without max_labels and a token source refused at create; the same output
 * at 1 and 3 decode threads; a sample_hook's label changing rf_batch.labels only. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ringfeed.h"
#include "testutil.h"

#define NC 20 /* num_classes */
#define W 3   /* max_labels */

/* Good samples: their members and ids (-1 ends). */
static const char *const g_json[] = {
    "{\"labels\": [3, 17]}", "{\"labels\": []}", "{\"labels\": [5]}",
    "{\"labels\": [19, 0, 19]}", "{\"labels\": 7}", "{\"x\": 1, \"labels\": [ 2 , 4 , 6 ]}",
    "{\"labels\": [1,1]}",
};
static const char *const g_cls[] = {"3 17", "", "5\n", "19,0,19", "7", " 2, 4 ,6 ", "1 1"};
static const int32_t g_ids[][4] = {{3, 17, -1}, {-1}, {5, -1}, {19, 0, 19, -1}, {7, -1},
                                   {2, 4, 6, -1}, {1, 1, -1}};
#define NGOOD 7

static rf_config config(const char **pat, const char *dir, uint32_t source, uint32_t mode,
                        uint32_t threads)
{
    static char pattern[600];
    snprintf(pattern, sizeof pattern, "%s/shard-*.tar", dir);
    rf_config c = rf_test_host_config(pat, pattern, 32);
    c.batch_size = 3; /* 7 samples: the last batch padded */
    c.epochs = 1;
    c.decode_threads = threads;
    c.order = RF_ORDER_SHARD;
    c.label_source = source;
    c.label_json_path = source == RF_LABEL_JSON ? "labels" : NULL;
    c.multi_label = mode;
    c.num_classes = NC;
    c.max_labels = W;
    return c;
}

/* Every batch against the expected ids (labels: the first id, or relabel when it is not
 * negative); a hash of all rows in delivery order. */
static uint64_t check_run(rf_loader *ld, uint32_t mode, const int32_t (*want)[4],
                          int32_t relabel)
{
    rf_batch *b;
    int rc;
    uint64_t h = 1469598103934665603ull, seen = 0;
    while ((rc = rf_loader_next(ld, &b)) == 0 || rc == RF_EPOCH_END) {
        if (rc)
            continue;
        ck_assert_ptr_nonnull(b->label_counts);
        ck_assert(mode == RF_MULTI_LABEL_MULTIHOT ? b->label_multihot && !b->label_list
                                                  : b->label_list && !b->label_multihot);
        for (uint32_t i = 0; i < b->count; i++) {
            const int32_t *w = want[b->sample_ids[i]];
            uint8_t hot[NC] = {0};
            int32_t list[W] = {-1, -1, -1};
            uint32_t n = 0, set = 0;
            for (; w[n] >= 0; n++) {
                set += !hot[w[n]];
                hot[w[n]] = 1;
                if (n < W)
                    list[n] = w[n];
            }
            ck_assert_int_eq(b->labels[i], relabel >= 0 ? relabel : w[0]);
            if (mode == RF_MULTI_LABEL_MULTIHOT) {
                ck_assert_uint_eq(b->label_counts[i], set);
                ck_assert_mem_eq(b->label_multihot + (size_t)i * NC, hot, NC);
            } else {
                ck_assert_uint_eq(b->label_counts[i], n);
                ck_assert_mem_eq(b->label_list + (size_t)i * W, list, sizeof list);
            }
            for (uint32_t k = 0; k < (mode == RF_MULTI_LABEL_LIST ? W : NC); k++)
                h = (h ^ (uint64_t)(mode == RF_MULTI_LABEL_LIST
                                        ? b->label_list[(size_t)i * W + k]
                                        : b->label_multihot[(size_t)i * NC + k])) *
                    1099511628211ull;
            seen += !b->is_padding[i];
        }
        ck_assert_int_eq(rf_loader_release(ld, b, NULL), 0);
    }
    ck_assert_msg(rc == RF_DONE, "%d %s", rc, rf_last_error(ld));
    ck_assert_uint_eq(seen, NGOOD);
    return h;
}

static const char *const *members(uint32_t source)
{
    return source == RF_LABEL_JSON ? g_json : g_cls;
}

START_TEST(good_labels)
{
    uint32_t source = _i & 1 ? RF_LABEL_JSON : RF_LABEL_CLS;
    uint32_t mode = _i & 2 ? RF_MULTI_LABEL_LIST : RF_MULTI_LABEL_MULTIHOT;
    char *dir = rf_test_mkdtemp("mlabel");
    free(rf_test_make_label_shard_ext(dir, source == RF_LABEL_JSON ? "json" : "cls",
                                      members(source), NGOOD));
    /* a list of max_labels 3 holds {19, 0, 19}; every id is below 20 */
    uint64_t h[2];
    for (int t = 0; t < 2; t++) {
        const char *pat[1];
        rf_config c = config(pat, dir, source, mode, t ? 3 : 1);
        rf_loader *ld = rf_test_create_ok(&c);
        h[t] = check_run(ld, mode, g_ids, -1);
        rf_loader_destroy(ld);
    }
    ck_assert_uint_eq(h[0], h[1]); /* the same at 1 and 3 decode threads */
    free(dir);
}
END_TEST

/* A sample_hook's label goes to rf_batch.labels only: the multi-label rows keep the data's
 * ids (ringfeed.h, rf_sample_view.label). */
static int relabel_hook(const rf_sample_view *v, void *ctx)
{
    *v->label = *(const int32_t *)ctx;
    return 0;
}

START_TEST(hook_relabels_the_first_id_only)
{
    uint32_t mode = _i ? RF_MULTI_LABEL_LIST : RF_MULTI_LABEL_MULTIHOT;
    char *dir = rf_test_mkdtemp("mlabel-hook");
    free(rf_test_make_label_shard_ext(dir, "cls", g_cls, NGOOD));
    const char *pat[1];
    rf_config c = config(pat, dir, RF_LABEL_CLS, mode, 2);
    int32_t relabel = 11;
    c.sample_hook = relabel_hook;
    c.sample_hook_ctx = &relabel;
    rf_loader *ld = rf_test_create_ok(&c);
    check_run(ld, mode, g_ids, relabel);
    rf_loader_destroy(ld);
    free(dir);
}
END_TEST

/* Bad members: each alone among good ones, refused under FAIL naming the member, counted
 * under SKIP. */
static const struct {
    uint32_t source, mode;
    const char *member, *want;
} g_bad[] = {
    {RF_LABEL_JSON, RF_MULTI_LABEL_MULTIHOT, "{\"labels\": [3, 20]}",
     "id 20 is not below num_classes 20"},
    {RF_LABEL_JSON, RF_MULTI_LABEL_LIST, "{\"labels\": [3, -1]}", "is a negative number"},
    {RF_LABEL_JSON, RF_MULTI_LABEL_LIST, "{\"labels\": [3, 1.5]}", "is not an integer"},
    {RF_LABEL_JSON, RF_MULTI_LABEL_MULTIHOT, "{\"labels\": [\"cat\"]}", "is not an integer"},
    {RF_LABEL_JSON, RF_MULTI_LABEL_LIST, "{\"labels\": [1, 2, 3, 4]}", "more than max_labels 3"},
    {RF_LABEL_JSON, RF_MULTI_LABEL_LIST, "{\"labels\": \"x\"}", "is a string"},
    {RF_LABEL_CLS, RF_MULTI_LABEL_MULTIHOT, "3 25", "id 25 is not below num_classes 20"},
    {RF_LABEL_CLS, RF_MULTI_LABEL_LIST, "3,-2", "is a negative number"},
    {RF_LABEL_CLS, RF_MULTI_LABEL_LIST, "3 cat", "is not an integer"},
    {RF_LABEL_CLS, RF_MULTI_LABEL_LIST, "1,2,3,4", "more than max_labels 3"},
};

START_TEST(bad_labels)
{
    uint32_t source = g_bad[_i].source, mode = g_bad[_i].mode;
    const char *m[NGOOD];
    memcpy(m, members(source), sizeof m);
    m[4] = g_bad[_i].member; /* sample 00000004 */
    char *dir = rf_test_mkdtemp("mlabel_bad");
    char *shard = rf_test_make_label_shard_ext(dir, source == RF_LABEL_JSON ? "json" : "cls",
                                               m, NGOOD);
    char name[32], at[64];
    snprintf(name, sizeof name, "00000004.%s", source == RF_LABEL_JSON ? "json" : "cls");
    snprintf(at, sizeof at, "at offset %llu",
             (unsigned long long)rf_test_member_offset(shard, name));
    const char *pat[1];
    rf_config c = config(pat, dir, source, mode, 2);
    rf_loader *ld = rf_test_create_ok(&c);
    ck_assert_int_eq(rf_test_drain_rc(ld), RF_ELABEL);
    const char *e = rf_last_error(ld);
    ck_assert_msg(strstr(e, name) && strstr(e, at) && strstr(e, g_bad[_i].want) &&
                      strstr(e, "shard-0000.tar"), "%s", e);
    rf_loader_destroy(ld);
    c = config(pat, dir, source, mode, 2);
    c.on_error = RF_ON_ERROR_SKIP;
    ld = rf_test_create_ok(&c);
    rf_stats st = rf_test_drain(ld);
    ck_assert_uint_eq(st.skipped_by_reason[RF_SKIP_LABEL], 1);
    ck_assert_uint_eq(st.skipped, 1);
    rf_loader_destroy(ld);
    free(shard);
    free(dir);
}
END_TEST

START_TEST(refused_at_create)
{
    char *dir = rf_test_mkdtemp("mlabel_cfg");
    free(rf_test_make_label_shard_ext(dir, "json", g_json, NGOOD));
    const char *pat[1];
    char err[512];
    rf_loader *ld = NULL;
    rf_config c = config(pat, dir, RF_LABEL_JSON, RF_MULTI_LABEL_MULTIHOT, 1);
    c.num_classes = 0;
    ck_assert_int_eq(rf_loader_create(&c, &ld, err, sizeof err), RF_EINVAL);
    ck_assert_msg(strstr(err, "multi_label multihot") && strstr(err, "num_classes"), "%s", err);
    c = config(pat, dir, RF_LABEL_JSON, RF_MULTI_LABEL_LIST, 1);
    c.max_labels = 0;
    ck_assert_int_eq(rf_loader_create(&c, &ld, err, sizeof err), RF_EINVAL);
    ck_assert_msg(strstr(err, "multi_label list") && strstr(err, "max_labels"), "%s", err);
    c = config(pat, dir, RF_LABEL_JSON, 3, 1);
    ck_assert_int_eq(rf_loader_create(&c, &ld, err, sizeof err), RF_EINVAL);
    ck_assert_msg(strstr(err, "multi_label"), "%s", err);
    c = config(pat, dir, RF_LABEL_JSON, RF_MULTI_LABEL_LIST, 1);
    c.source = RF_SOURCE_TOKENS;
    c.token_bytes = 2, c.seq_len = 8;
    ck_assert_int_eq(rf_loader_create(&c, &ld, err, sizeof err), RF_EINVAL);
    ck_assert_msg(strstr(err, "multi_label"), "%s", err);
    /* off: no rows */
    c = config(pat, dir, RF_LABEL_JSON, RF_MULTI_LABEL_OFF, 1);
    c.label_json_path = "x";
    c.on_error = RF_ON_ERROR_SKIP;
    ld = rf_test_create_ok(&c);
    rf_batch *b;
    ck_assert_int_eq(rf_loader_next(ld, &b), 0);
    ck_assert(!b->label_multihot && !b->label_list && !b->label_counts);
    ck_assert_int_eq(rf_loader_release(ld, b, NULL), 0);
    rf_loader_destroy(ld);
    free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("multilabel");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, good_labels, 0, 4);
    tcase_add_loop_test(tc, bad_labels, 0, (int)(sizeof g_bad / sizeof g_bad[0]));
    tcase_add_loop_test(tc, hook_relabels_the_first_id_only, 0, 2);
    tcase_add_test(tc, refused_at_create);
    suite_add_tcase(s, tc);
    return rf_test_run_suite(s);
}
