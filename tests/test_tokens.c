/* test_tokens.c — the raw path: token windows read straight into the slot. Windows are
 * contiguous runs of the file, y is x shifted by one (one row of seq_len + 1 tokens), windows
 * never cross a file boundary, every sequential window comes exactly once per epoch, random
 * windows are seeded, and widening gives the same values. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loaders/dataset.h"
#include "loaders/tokens.h"
#include "ringfeed.h"
#include "testutil.h"

#define L 16
static char *g_dir, g_pat[512];
static const uint32_t g_tokens[3] = {1000, 17, 333}; /* the middle file holds one window */

/* Token value encodes (file, position) so a test can tell where every token came from. */
static uint32_t token_at(uint32_t file, uint32_t pos) { return (file << 12) | pos; }

static void make_tokens(void)
{
    g_dir = rf_test_mkdtemp("tokens");
    for (uint32_t f = 0; f < 3; f++) {
        char path[600];
        snprintf(path, sizeof path, "%s/tok-%u.bin", g_dir, f);
        FILE *fp = fopen(path, "wb");
        for (uint32_t i = 0; i < g_tokens[f]; i++) {
            uint16_t v = (uint16_t)token_at(f, i);
            fwrite(&v, 2, 1, fp);
        }
        fclose(fp);
    }
    snprintf(g_pat, sizeof g_pat, "%s/tok-{0..2}.bin", g_dir);
}

/* The token files of g_pat, host backend, windows of L tokens of token_bytes each. */
static rf_config token_config(const char **pat, uint32_t token_bytes)
{
    rf_config c = rf_test_host_config(pat, g_pat, 0);
    c.source = RF_SOURCE_TOKENS;
    c.token_bytes = token_bytes;
    c.seq_len = L;
    return c;
}

static rf_loader *open_tokens(uint32_t windows, uint32_t dtype, uint32_t order, uint32_t epochs)
{
    const char *pat;
    rf_config c = token_config(&pat, 2);
    c.token_windows = windows;
    c.token_dtype = dtype;
    c.order = order;
    c.batch_size = 5;
    c.epochs = epochs;
    c.seed = 3;
    return rf_test_create_ok(&c);
}

static uint64_t tok(const rf_batch *b, uint32_t row, uint32_t j)
{
    uint64_t k = (uint64_t)row * (L + 1) + j;
    switch (b->dtype) {
    case RF_DTYPE_UINT16: return ((const uint16_t *)b->data)[k];
    case RF_DTYPE_INT32: return (uint64_t)((const int32_t *)b->data)[k];
    default: return (uint64_t)((const int64_t *)b->data)[k];
    }
}

/* Each row: one file, consecutive positions; returns (file, start). */
static void check_row(const rf_batch *b, uint32_t row, uint32_t *file, uint32_t *start)
{
    uint64_t first = tok(b, row, 0);
    *file = (uint32_t)(first >> 12);
    *start = (uint32_t)(first & 0xfff);
    ck_assert_uint_lt(*file, 3);
    ck_assert_uint_le(*start + L + 1, g_tokens[*file]);
    for (uint32_t j = 0; j <= L; j++)
        ck_assert_uint_eq(tok(b, row, j), token_at(*file, *start + j)); /* x then y = x + 1 */
}

START_TEST(sequential_windows_exactly_once)
{
    make_tokens();
    static const uint32_t dtypes[] = {0, RF_DTYPE_INT32, RF_DTYPE_INT64};
    for (int d = 0; d < 3; d++) {
        rf_loader *ld = open_tokens(RF_WINDOWS_SEQUENTIAL, dtypes[d], RF_ORDER_GLOBAL, 2);
        /* (1000-1)/16 = 62, (17-1)/16 = 1, (333-1)/16 = 20 windows */
        ck_assert_uint_eq(rf_loader_num_samples(ld), 83);
        for (int e = 0; e < 2; e++) {
            uint8_t seen[3][64] = {{0}};
            rf_batch *b;
            int rc, n = 0;
            while ((rc = rf_loader_next(ld, &b)) == 0) {
                ck_assert_uint_eq(b->ndim, 2);
                ck_assert_ptr_null(b->crop_boxes); /* no image, no crop (issue 46) */
                ck_assert_ptr_null(b->flips);
                ck_assert_int_eq(b->shape[1], L + 1);
                ck_assert_uint_eq(b->dtype, dtypes[d] ? dtypes[d] : RF_DTYPE_UINT16);
                for (uint32_t r = 0; r < b->count; r++) {
                    uint32_t f, st;
                    check_row(b, r, &f, &st);
                    ck_assert_uint_eq(st % L, 0);
                    ck_assert_int_eq(seen[f][st / L]++, 0);
                    ck_assert_ptr_nonnull(strstr(b->keys[r], "tok-"));
                    n++;
                }
                rf_loader_release(ld, b, NULL);
            }
            ck_assert_int_eq(rc, RF_EPOCH_END);
            ck_assert_int_eq(n, 83);
        }
        rf_loader_destroy(ld);
    }
}
END_TEST

START_TEST(random_windows_seeded_and_in_range)
{
    make_tokens();
    uint32_t starts[2][83];
    for (int run = 0; run < 2; run++) {
        rf_loader *ld = open_tokens(RF_WINDOWS_RANDOM, RF_DTYPE_INT64, RF_ORDER_NONE, 1);
        rf_batch *b;
        int n = 0, unaligned = 0;
        while (rf_loader_next(ld, &b) == 0) {
            for (uint32_t r = 0; r < b->count; r++, n++) {
                uint32_t f, st;
                check_row(b, r, &f, &st);
                starts[run][n] = st | f << 16;
                unaligned += st % L != 0;
            }
            rf_loader_release(ld, b, NULL);
        }
        ck_assert_int_eq(n, 83);
        ck_assert_int_gt(unaligned, 40); /* uniform starts, not the sequential grid */
        rf_loader_destroy(ld);
    }
    ck_assert_int_eq(memcmp(starts[0], starts[1], sizeof starts[0]), 0);
}
END_TEST

START_TEST(token_errors)
{
    make_tokens();
    const char *pat;
    rf_config c = token_config(&pat, 3);
    rf_loader *ld;
    char err[512];
    ck_assert_int_eq(rf_loader_create(&c, &ld, err, sizeof err), RF_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "token_bytes"));
    c.token_bytes = 4; /* 1000 uint16 = 500 uint32: fine; 17 uint16 = 34 bytes: not whole */
    ck_assert_int_eq(rf_loader_create(&c, &ld, err, sizeof err), RF_EFORMAT);
    ck_assert_ptr_nonnull(strstr(err, "tok-1.bin"));
    c.token_bytes = 2;
    c.seq_len = 5000;
    ck_assert_int_eq(rf_loader_create(&c, &ld, err, sizeof err), RF_EFORMAT);
    ck_assert_ptr_nonnull(strstr(err, "seq_len"));
}
END_TEST

/* The format alone (loaders/tokens.c), as the loader opens it: rf_format_tokens.open counts
 * each file's windows, and rf_tokens_window puts window ids where the files hold them. */
static int open_format(rf_dataset *ds, uint64_t token_bytes, rf_err *e)
{
    char *paths[3];
    for (uint32_t f = 0; f < 3; f++) {
        paths[f] = malloc(600);
        snprintf(paths[f], 600, "%s/tok-%u.bin", g_dir, f);
    }
    memset(ds, 0, sizeof *ds);
    ds->tok_seq_len = L;
    ds->tok_bytes = token_bytes;
    int rc = rf_format_tokens.open(ds, paths, 3, 0, e);
    for (uint32_t f = 0; f < 3; f++)
        free(paths[f]);
    return rc;
}

START_TEST(format_ops_open_and_windows)
{
    make_tokens();
    ck_assert_str_eq(rf_format_tokens.name, "tokens");
    rf_dataset ds;
    rf_err e = {0};
    ck_assert_msg(open_format(&ds, 2, &e) == 0, "%s", e.msg);
    /* N tokens hold (N - 1) / L windows of L + 1 tokens: 62, 1 and 20 */
    ck_assert_uint_eq(ds.nfiles, 3);
    ck_assert_uint_eq(ds.nsamples, 83);
    ck_assert_uint_eq(ds.tok_first[1], 62);
    ck_assert_uint_eq(ds.tok_first[2], 63);
    ck_assert_uint_eq(ds.tok_first[3], 83);
    ck_assert_uint_eq(ds.max_span, (L + 1) * 2);
    uint32_t file;
    uint64_t off;
    static const struct { uint64_t id; uint32_t file; uint64_t off; } seq[] = {
        {0, 0, 0}, {61, 0, 61 * L * 2}, {62, 1, 0}, {63, 2, 0}, {82, 2, 19 * L * 2}};
    for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++) {
        rf_tokens_window(&ds, seq[i].id, 1, 0, &file, &off);
        ck_assert_uint_eq(file, seq[i].file);
        ck_assert_uint_eq(off, seq[i].off);
    }
    /* random windows: the same seed the same start, any start keeps L + 1 tokens in the file */
    for (uint64_t id = 0; id < ds.nsamples; id++) {
        uint64_t off2;
        uint32_t file2;
        rf_tokens_window(&ds, id, 0, 1000 + id, &file, &off);
        rf_tokens_window(&ds, id, 0, 1000 + id, &file2, &off2);
        ck_assert_uint_eq(file, file2);
        ck_assert_uint_eq(off, off2);
        ck_assert_uint_eq(off % 2, 0);
        ck_assert_uint_le(off / 2 + L + 1, g_tokens[file]);
        ck_assert_uint_eq(file, id < 62 ? 0 : id < 63 ? 1 : 2);
    }
    rf_dataset_free(&ds);
    ck_assert_ptr_null(ds.tok_first);
    /* 17 uint16 tokens are 34 bytes: not whole 4-byte tokens, named with the file */
    ck_assert_int_eq(open_format(&ds, 4, &e), RF_EFORMAT);
    char want[700];
    snprintf(want, sizeof want, "%s/tok-1.bin: 34 bytes is not a whole number of 4-byte tokens",
             g_dir);
    ck_assert_str_eq(e.msg, want);
    rf_dataset_free(&ds);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tokens");
    TCase *tc = tcase_create("tokens");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, sequential_windows_exactly_once);
    tcase_add_test(tc, random_windows_seeded_and_in_range);
    tcase_add_test(tc, token_errors);
    tcase_add_test(tc, format_ops_open_and_windows);
    suite_add_tcase(s, tc);
    return rf_test_run_suite(s);
}
