/* test_folder.c — the folder format (loaders/folder.c): its sample table for a class tree and
 * for a `path label` list, errors, and end to end against the tar loader: the same images
 * packed (rf_shard_writer, in image-list order) and read unpacked give identical keys, labels
 * and pixels. The end-to-end part runs once rf_config.source = RF_SOURCE_FOLDER is wired in
 * src/pipeline/create.c; until then it says so and checks nothing more. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loaders/dataset.h"
#include "ringfeed.h"
#include "ringfeed_shards.h"
#include "synth.h"
#include "testutil.h"

#define CLASSES 3
#define PER_CLASS 9
#define N (CLASSES * PER_CLASS)
#define SIZE 24

#define MUST(cond)                                                                            \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "%s:%d: %s failed\n", __FILE__, __LINE__, #cond);                 \
            abort();                                                                          \
        }                                                                                     \
    } while (0)

static char *g_root, g_tree[512], g_list[512], g_shard[512];

/* tree/c<k>/i<j>.jpg, a list file naming the same files (in reverse order, other labels), and
 * a shard of the tree packed in image-list order. */
static void make_data(void)
{
    snprintf(g_tree, sizeof g_tree, "%s/tree", g_root);
    snprintf(g_list, sizeof g_list, "%s/list.txt", g_root);
    snprintf(g_shard, sizeof g_shard, "%s/packed.tar", g_root);
    mkdir(g_tree, 0755);
    FILE *lf = fopen(g_list, "w");
    MUST(lf != NULL);
    for (int c = 0; c < CLASSES; c++) {
        char dir[600], path[700];
        snprintf(dir, sizeof dir, "%s/c%d", g_tree, c);
        mkdir(dir, 0755);
        for (int i = 0; i < PER_CLASS; i++) {
            uint32_t w = 30 + (uint32_t)(7 * i), h = 28 + (uint32_t)(5 * c);
            uint8_t *rgb = malloc((size_t)w * h * 3), *jpg;
            size_t len;
            rf_synth_image((uint64_t)(c * 31 + i), w, h, rgb);
            MUST(rf_synth_jpeg(rgb, w, h, 85, i % 2, &jpg, &len) == 0);
            snprintf(path, sizeof path, "%s/i%d.jpg", dir, i);
            rf_test_write_file(path, jpg, len);
            free(rgb);
            free(jpg);
        }
    }
    for (int k = N - 1; k >= 0; k--)
        fprintf(lf, "tree/c%d/i%d.jpg %d\n", k / PER_CLASS, k % PER_CLASS, 100 + k);
    fclose(lf);

    rf_image_list *l;
    char err[512];
    MUST(rf_image_list_open(g_tree, &l, err, sizeof err) == 0);
    rf_shard_writer *w;
    MUST(rf_shard_writer_open(g_shard, NULL, RF_SHARD_PAX, &w, err, sizeof err) == 0);
    for (uint64_t i = 0; i < rf_image_list_count(l); i++) {
        size_t len;
        uint8_t *data = rf_test_read_file(rf_image_list_path(l, i), &len);
        MUST(data != NULL);
        MUST(rf_shard_writer_add(w, rf_image_list_key(l, i), "jpg", data, len,
                                 rf_image_list_label(l, i)) == 0);
        free(data);
    }
    MUST(rf_shard_writer_close(w, err, sizeof err) == 0);
    rf_image_list_free(l);
}

START_TEST(test_folder_table_tree)
{
    rf_dataset ds = {0};
    rf_err e = {0};
    char *paths[1] = {g_tree};
    ck_assert_int_eq(rf_format_folder.open(&ds, paths, 1, 0, &e), 0);
    ck_assert_uint_eq(ds.nsamples, N);
    ck_assert_uint_eq(ds.nfiles, N);
    for (uint64_t i = 0; i < ds.nsamples; i++) {
        const rf_sample *s = &ds.samples[i];
        char key[64];
        snprintf(key, sizeof key, "c%u/i%u", (unsigned)(i / PER_CLASS), (unsigned)(i % PER_CLASS));
        ck_assert_str_eq(ds.keys + s->key, key);
        ck_assert_int_eq(s->label, (int32_t)(i / PER_CLASS));
        ck_assert_uint_eq(s->offset, 0);
        ck_assert_uint_eq(s->data_off, 0);
        ck_assert_uint_eq(s->label_len, 0);
        ck_assert_uint_eq(s->flags & RF_SAMPLE_TAR, 0);
        ck_assert_uint_eq(s->length, ds.files[s->file].size);
        ck_assert_uint_eq(s->data_len, s->length);
        /* files stay closed until read: 1.28 M images would not fit RLIMIT_NOFILE */
        ck_assert_int_eq(ds.files[s->file].fd, -1);
        struct stat st;
        ck_assert_int_eq(stat(ds.files[s->file].path, &st), 0);
        ck_assert_uint_eq((uint64_t)st.st_size, s->length);
    }
    rf_dataset_free(&ds);
}
END_TEST

START_TEST(test_folder_table_list)
{
    rf_dataset ds = {0};
    rf_err e = {0};
    char *paths[1] = {g_list};
    ck_assert_int_eq(rf_format_folder.open(&ds, paths, 1, 0, &e), 0);
    ck_assert_uint_eq(ds.nsamples, N);
    /* list order (reversed), list labels, names as written without the extension */
    ck_assert_str_eq(ds.keys + ds.samples[0].key, "tree/c2/i8");
    ck_assert_int_eq(ds.samples[0].label, 100 + N - 1);
    ck_assert_int_eq(ds.samples[N - 1].label, 100);
    rf_dataset_free(&ds);

    /* errors name the file: a missing image, a sample over max_sample_bytes, two entries */
    char bad[700];
    snprintf(bad, sizeof bad, "%s/bad.txt", g_root);
    rf_test_write_file(bad, "tree/c0/i0.jpg 1\nnope.jpg 2\n", 28);
    paths[0] = bad;
    ck_assert_int_lt(rf_format_folder.open(&ds, paths, 1, 0, &e), 0);
    ck_assert_msg(strstr(e.msg, "line 2") && strstr(e.msg, "nope.jpg"), "%s", e.msg);
    rf_dataset_free(&ds);
    paths[0] = g_tree;
    ck_assert_int_eq(rf_format_folder.open(&ds, paths, 1, 100, &e), RF_ELIMIT);
    ck_assert_msg(strstr(e.msg, "max_sample_bytes") != NULL, "%s", e.msg);
    rf_dataset_free(&ds);
    char *two[2] = {g_tree, g_list};
    ck_assert_int_eq(rf_format_folder.open(&ds, two, 2, 0, &e), RF_EINVAL);
    rf_dataset_free(&ds);
}
END_TEST

typedef struct loaded {
    uint64_t n;
    char keys[N][64];
    int32_t labels[N];
    uint8_t pixels[N][SIZE * SIZE * 3];
} loaded;

static int load(const char *input, uint32_t source, uint32_t order, loaded *out, char *err,
                size_t err_len)
{
    const char *pat;
    rf_config c = rf_test_host_config(&pat, input, SIZE);
    c.source = source;
    c.order = order;
    c.seed = 7;
    c.batch_size = 4;
    c.epochs = 1;
    c.decode_threads = 3;
    rf_loader *ld;
    int rc = rf_loader_create(&c, &ld, err, err_len);
    if (rc)
        return rc;
    out->n = 0;
    rf_batch *b;
    while ((rc = rf_loader_next(ld, &b)) == 0) {
        for (uint32_t i = 0; i < b->count; i++) {
            if (b->is_padding[i])
                continue;
            uint64_t k = out->n++;
            ck_assert_uint_lt(k, N);
            snprintf(out->keys[k], sizeof out->keys[0], "%s", b->keys[i]);
            out->labels[k] = b->labels[i];
            memcpy(out->pixels[k], (uint8_t *)b->data + (size_t)i * SIZE * SIZE * 3,
                   SIZE * SIZE * 3);
        }
        rf_loader_release(ld, b, NULL);
    }
    ck_assert_msg(rc == RF_EPOCH_END || rc == RF_DONE, "next: %d %s", rc, rf_last_error(ld));
    rf_loader_destroy(ld);
    return 0;
}

/* Folder and packed shard, in dataset order and in a seeded global order (random crops and
 * flips included): same keys, labels and pixels. Keys here need no sanitizing, so the
 * folder's names equal the packed keys. */
START_TEST(test_folder_equals_tar)
{
    static loaded f, t;
    char err[512];
    for (uint32_t order = RF_ORDER_GLOBAL; order <= RF_ORDER_NONE; order++) {
        int rc = load(g_tree, RF_SOURCE_FOLDER, order, &f, err, sizeof err);
        if (rc == RF_EINVAL && strstr(err, "not available")) {
            fprintf(stderr, "test_folder_equals_tar: RF_SOURCE_FOLDER not wired in create.c "
                            "yet (%s); end-to-end comparison skipped\n", err);
            return;
        }
        ck_assert_msg(rc == 0, "folder: %d %s", rc, err);
        ck_assert_int_eq(load(g_shard, RF_SOURCE_TAR, order, &t, err, sizeof err), 0);
        ck_assert_uint_eq(f.n, N);
        ck_assert_uint_eq(t.n, N);
        for (uint64_t i = 0; i < N; i++) {
            ck_assert_str_eq(f.keys[i], t.keys[i]);
            ck_assert_int_eq(f.labels[i], t.labels[i]);
            ck_assert_msg(memcmp(f.pixels[i], t.pixels[i], sizeof f.pixels[i]) == 0,
                          "pixels differ for %s (order %u)", f.keys[i], order);
        }
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("folder");
    TCase *tc = tcase_create("folder");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_folder_table_tree);
    tcase_add_test(tc, test_folder_table_list);
    tcase_add_test(tc, test_folder_equals_tar);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    g_root = rf_test_mkdtemp("folder");
    make_data();
    return rf_test_run_suite(suite());
}
