/* test_pack.c — ringfeed-pack, ringfeed-inspect's library checks and indexes: pack -> inspect
 * -> load round trip (counts, labels, keys, member bytes identical to the input files, output
 * independent of --threads), shards re-made by GNU tar in gnu, pax and ustar formats inspecting
 * and loading identically, an index disagreeing with its shard caught by inspection and by the
 * loader (RF_EINDEX), a bad JPEG reported with file and offset, missing indexes written; the
 * atomic shard writer (nothing under a shard's name before close, nothing of a shard whose
 * writes failed), pack on a full disk (EFBIG from a file-size limit everywhere, ENOSPC from a
 * real tmpfs where a private mount namespace is allowed), and unreadable input entries
 * (dangling and looping symlinks, a FIFO, a device) skipped and counted or refused; label
 * problems reported as the loader refuses them (and the tools' --no-labels).
 * The class trees are made once in main() (before Check forks); nothing here creates a ring. */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ringfeed.h"
#include "ringfeed_shards.h"
#include "synth.h"
#include "loaders/tar.h"
#include "testutil.h"

#define CLASSES 4
#define PER_CLASS 7
#define N_GOOD (CLASSES * PER_CLASS)
#define SIZE 32

static char *g_root, g_tree[512], g_full[512], g_tool[1024];

/* Usable outside a test too (the fixture runs in main, where ck_assert cannot report). */
#define MUST(cond)                                                                            \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "%s:%d: %s failed\n", __FILE__, __LINE__, #cond);                 \
            abort();                                                                          \
        }                                                                                     \
    } while (0)

/* tree/cls_<c>/img_<i>.jpg (every third progressive, one upper-case .JPEG), plus a text file
 * (skipped) and a truncated JPEG (bad) in class 1. */
static void make_tree(void)
{
    snprintf(g_tree, sizeof g_tree, "%s/tree", g_root);
    mkdir(g_tree, 0755);
    for (int c = 0; c < CLASSES; c++) {
        char dir[600], path[700];
        snprintf(dir, sizeof dir, "%s/cls_%d", g_tree, c);
        mkdir(dir, 0755);
        for (int i = 0; i < PER_CLASS; i++) {
            uint32_t w = 40 + (uint32_t)(i * 13 % 50), h = 36 + (uint32_t)(c * 17 % 40);
            uint8_t *rgb = malloc((size_t)w * h * 3), *jpg;
            size_t len;
            rf_synth_image((uint64_t)(c * 100 + i), w, h, rgb);
            MUST(rf_synth_jpeg(rgb, w, h, 90, (c * PER_CLASS + i) % 3 == 0, &jpg, &len) == 0);
            snprintf(path, sizeof path, "%s/img_%d.%s", dir, i, i == 5 ? "JPEG" : "jpg");
            rf_test_write_file(path, jpg, len);
            if (c == 1 && i == 0) {
                snprintf(path, sizeof path, "%s/zz_truncated.jpg", dir);
                rf_test_write_file(path, jpg, len / 2);
            }
            free(rgb);
            free(jpg);
        }
    }
    char path[700];
    snprintf(path, sizeof path, "%s/cls_0/notes.txt", g_tree);
    rf_test_write_file(path, "not an image\n", 13);
}

/* One JPEG of w x h from seed at `quality` written to path. */
static void write_jpeg(const char *path, uint64_t seed, uint32_t w, uint32_t h, int quality)
{
    uint8_t *rgb = malloc((size_t)w * h * 3), *jpg;
    size_t len;
    rf_synth_image(seed, w, h, rgb);
    MUST(rf_synth_jpeg(rgb, w, h, quality, 0, &jpg, &len) == 0);
    rf_test_write_file(path, jpg, len);
    free(rgb);
    free(jpg);
}

/* full/c_<c>/img_<i>.jpg (about 10 KB each, so that --shard-size 64K makes several shards)
 * and one large photo, c_1/m_big.jpg (some 200 KB: a shard of its own, over FULL_LIMIT), for
 * the full-disk tests. */
#define FULL_LIMIT (128u << 10)
static void make_full_tree(void)
{
    snprintf(g_full, sizeof g_full, "%s/full", g_root);
    mkdir(g_full, 0755);
    for (int c = 0; c < 3; c++) {
        char dir[600], path[700];
        snprintf(dir, sizeof dir, "%s/c_%d", g_full, c);
        mkdir(dir, 0755);
        for (int i = 0; i < 6; i++) {
            snprintf(path, sizeof path, "%s/img_%d.jpg", dir, i);
            write_jpeg(path, (uint64_t)(1000 + c * 10 + i), 150, 120, 90);
        }
    }
    char path[700];
    snprintf(path, sizeof path, "%s/c_1/m_big.jpg", g_full);
    write_jpeg(path, 7, 700, 600, 95);
    struct stat st;
    MUST(stat(path, &st) == 0 && (uint64_t)st.st_size > FULL_LIMIT);
}

static void find_tool(void)
{
    char exe[900];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    g_tool[0] = 0;
    if (n <= 0)
        return;
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    *slash = 0;
    snprintf(g_tool, sizeof g_tool, "%s/../tools/ringfeed-pack", exe);
    if (access(g_tool, X_OK) != 0)
        g_tool[0] = 0;
}

static int run_cmd(const char *cmd)
{
    int rc = system(cmd);
    return rc == -1 ? -1 : WEXITSTATUS(rc);
}

/* Pack the tree with the tool into dir/train-%04d.tar. */
static void pack(const char *dir, int threads, const char *extra)
{
    char cmd[3000];
    ck_assert_msg(g_tool[0], "ringfeed-pack not built next to the tests");
    mkdir(dir, 0755);
    snprintf(cmd, sizeof cmd, "%s --input %s --output '%s/train-%%04d.tar' --shard-size 96K "
             "--threads %d --quiet %s 2>%s/pack.err", g_tool, g_tree, dir, threads, extra, dir);
    ck_assert_int_eq(run_cmd(cmd), 0);
}

typedef struct collected {
    uint64_t n;
    char keys[256][128];
    int32_t labels[256];
    uint32_t w[256], h[256];
    uint64_t region_ready;
    char problems[16][600];
    int32_t codes[16];
    uint64_t offsets[16];
    uint32_t nproblems;
} collected;

static int on_sample(void *ctx, const rf_inspect_sample *s)
{
    collected *c = ctx;
    if (c->n < 256) {
        snprintf(c->keys[c->n], sizeof c->keys[0], "%s", s->key);
        c->labels[c->n] = s->label;
        c->w[c->n] = s->width;
        c->h[c->n] = s->height;
    }
    c->region_ready += s->region_ready;
    c->n++;
    return 0;
}

static int on_problem(void *ctx, const rf_inspect_problem *p)
{
    collected *c = ctx;
    if (c->nproblems < 16) {
        snprintf(c->problems[c->nproblems], sizeof c->problems[0], "%s", p->message);
        c->codes[c->nproblems] = p->code;
        c->offsets[c->nproblems] = p->offset;
    }
    c->nproblems++;
    return 0;
}

static void inspect_all(const char *pattern, collected *c, uint64_t *problems)
{
    rf_paths *ps;
    char err[512];
    ck_assert_int_eq(rf_paths_expand(&pattern, 1, &ps, err, sizeof err), 0);
    *problems = 0;
    for (uint32_t i = 0; i < rf_paths_count(ps); i++) {
        rf_inspect_summary s;
        rf_inspect_summary_init(&s);
        rf_shard_inspect(rf_paths_get(ps, i), NULL, on_problem, on_sample, c, &s);
        *problems += s.problems;
    }
    rf_paths_free(ps);
}

/* Load every sample in dataset order; keys, labels and pixels (g_crop, SIZE^2). */
static uint32_t g_crop = RF_CROP_CENTER;

typedef struct loaded {
    uint64_t n;
    uint64_t regions; /* rf_stats.region_decoded */
    uint64_t label_skips; /* rf_stats.skipped_by_reason[RF_SKIP_LABEL] */
    char keys[256][128];
    int32_t labels[256];
    uint8_t *pixels; /* n * SIZE*SIZE*3 */
} loaded;

/* The config load() uses: dataset order, one epoch, SIZE center crops (g_crop). */
static rf_config load_config(const char **pat, const char *pattern, uint32_t source)
{
    rf_config c = rf_test_host_config(pat, pattern, SIZE);
    c.source = source;
    c.crop = g_crop;
    c.order = RF_ORDER_NONE;
    c.batch_size = 5;
    c.epochs = 1;
    c.decode_threads = 2;
    return c;
}

/* Every sample of the epoch (padding left out) into out; destroys ld. */
static void load_epoch(rf_loader *ld, loaded *out)
{
    memset(out, 0, sizeof *out);
    out->pixels = malloc(256 * SIZE * SIZE * 3);
    rf_batch *b;
    int rc;
    while ((rc = rf_loader_next(ld, &b)) == 0) {
        for (uint32_t i = 0; i < b->count; i++) {
            if (b->is_padding[i])
                continue;
            uint64_t k = out->n++;
            ck_assert_uint_lt(k, 256);
            snprintf(out->keys[k], sizeof out->keys[0], "%s", b->keys[i]);
            out->labels[k] = b->labels[i];
            memcpy(out->pixels + k * SIZE * SIZE * 3, (uint8_t *)b->data + (size_t)i * SIZE * SIZE * 3,
                   SIZE * SIZE * 3);
        }
        rf_loader_release(ld, b, NULL);
    }
    ck_assert_msg(rc == RF_EPOCH_END || rc == RF_DONE, "next: %d %s", rc, rf_last_error(ld));
    rf_stats st;
    rf_stats_init(&st);
    ck_assert_int_eq(rf_loader_stats(ld, &st), 0);
    out->regions = st.region_decoded;
    out->label_skips = st.skipped_by_reason[RF_SKIP_LABEL];
    rf_loader_destroy(ld);
}

static int load(const char *pattern, uint32_t source, loaded *out, char *err, size_t err_len)
{
    const char *pat;
    rf_config c = load_config(&pat, pattern, source);
    rf_loader *ld;
    int rc = rf_loader_create(&c, &ld, err, err_len);
    if (rc)
        return rc;
    load_epoch(ld, out);
    return 0;
}

static uint8_t *read_all(const char *path, size_t *len)
{
    uint8_t *p = rf_test_read_file(path, len);
    ck_assert_msg(p != NULL, "cannot read %s", path);
    return p;
}

/* Every image member of the shards (KEY.EXT, EXT as the input file spells it) equals the input
 * file of that key, byte for byte. */
static void check_member_bytes(const char *pattern, const rf_image_list *l, uint64_t want)
{
    rf_paths *ps;
    char err[512];
    ck_assert_int_eq(rf_paths_expand(&pattern, 1, &ps, err, sizeof err), 0);
    uint64_t jpgs = 0;
    for (uint32_t s = 0; s < rf_paths_count(ps); s++) {
        size_t tlen;
        uint8_t *tar = read_all(rf_paths_get(ps, s), &tlen);
        FILE *f = fopen(rf_paths_get(ps, s), "rb");
        rf_tar_scanner sc;
        rf_err e = {0};
        rf_tar_member *m = malloc(sizeof *m);
        ck_assert_int_eq(rf_tar_scanner_init(&sc, fileno(f), rf_paths_get(ps, s), tlen, &e), 0);
        int rc;
        while ((rc = rf_tar_next(&sc, m, &e)) == 1) {
            const char *ext;
            size_t kl = rf_tar_split_key(m->name, &ext);
            if (!rf_tar_ext_in(ext, RF_TAR_IMAGE_EXTS))
                continue;
            uint64_t i = 0;
            while (i < rf_image_list_count(l) &&
                   (strlen(rf_image_list_key(l, i)) != kl ||
                    memcmp(rf_image_list_key(l, i), m->name, kl) != 0))
                i++;
            ck_assert_msg(i < rf_image_list_count(l), "member %s not in the input", m->name);
            const char *path = rf_image_list_path(l, i);
            ck_assert_str_eq(strrchr(path, '.') + 1, ext); /* the file's own extension */
            size_t flen;
            uint8_t *orig = read_all(rf_image_list_path(l, i), &flen);
            ck_assert_uint_eq(flen, m->size);
            ck_assert_int_eq(memcmp(orig, tar + m->data_offset, flen), 0);
            free(orig);
            jpgs++;
        }
        ck_assert_int_eq(rc, 0);
        rf_tar_scanner_free(&sc);
        free(m);
        fclose(f);
        free(tar);
    }
    ck_assert_uint_eq(jpgs, want);
    rf_paths_free(ps);
}

START_TEST(test_image_list_tree)
{
    rf_image_list *l;
    char err[512];
    ck_assert_int_eq(rf_image_list_open(g_tree, &l, err, sizeof err), 0);
    ck_assert_uint_eq(rf_image_list_count(l), N_GOOD + 1); /* the truncated one is a .jpg */
    ck_assert_uint_eq(rf_image_list_classes(l), CLASSES);
    ck_assert_uint_eq(rf_image_list_skipped(l), 1);
    ck_assert_str_eq(rf_image_list_class_name(l, 2), "cls_2");
    ck_assert_str_eq(rf_image_list_key(l, 0), "cls_0/img_0");
    ck_assert_str_eq(rf_image_list_name(l, 5), "cls_0/img_5"); /* .JPEG stripped */
    ck_assert_int_eq(rf_image_list_label(l, PER_CLASS), 1);
    for (uint64_t i = 1; i < rf_image_list_count(l); i++)
        ck_assert_int_ge(rf_image_list_label(l, i), rf_image_list_label(l, i - 1));
    rf_image_list_free(l);

    /* keys: dots in the basename, spaces, "..", duplicates after sanitizing */
    char dir[600], path[700];
    snprintf(dir, sizeof dir, "%s/keys", g_root);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/list.txt", dir);
    const char *list = "a b.c.jpg 3\n# comment\n\n./a_b_c.jpg 4\nsub/../x.y.jpg   7  \n";
    rf_test_write_file(path, list, strlen(list));
    const char *files[] = {"a b.c.jpg", "a_b_c.jpg", "x.y.jpg"};
    mkdir((snprintf(path, sizeof path, "%s/sub", dir), path), 0755);
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        rf_test_write_file(path, "x", 1);
    }
    snprintf(path, sizeof path, "%s/list.txt", dir);
    ck_assert_int_eq(rf_image_list_open(path, &l, err, sizeof err), 0);
    ck_assert_uint_eq(rf_image_list_count(l), 3);
    ck_assert_str_eq(rf_image_list_key(l, 0), "a_b_c");
    ck_assert_str_eq(rf_image_list_key(l, 1), "a_b_c_2");
    ck_assert_str_eq(rf_image_list_key(l, 2), "sub/__/x_y");
    ck_assert_int_eq(rf_image_list_label(l, 2), 7);
    ck_assert_uint_eq(rf_image_list_renamed(l), 1);
    rf_image_list_free(l);
    rf_test_write_file(path, "a b.c.jpg\n", 10);
    ck_assert_int_eq(rf_image_list_open(path, &l, err, sizeof err), RF_EFORMAT);
    ck_assert_msg(strstr(err, "line 1") != NULL, "%s", err);
}
END_TEST

START_TEST(test_pack_roundtrip)
{
    char d1[600], d3[600], pat[700], cmd[2000];
    snprintf(d1, sizeof d1, "%s/rt1", g_root);
    snprintf(d3, sizeof d3, "%s/rt3", g_root);
    pack(d1, 1, "");
    pack(d3, 3, "");
    /* output independent of the thread count */
    snprintf(cmd, sizeof cmd, "cd %s && for f in *.tar *.idx; do cmp -s $f %s/$f || exit 1; done",
             d1, d3);
    ck_assert_int_eq(run_cmd(cmd), 0);
    snprintf(pat, sizeof pat, "%s/train-*.tar", d1);

    rf_image_list *l;
    char err[512];
    ck_assert_int_eq(rf_image_list_open(g_tree, &l, err, sizeof err), 0);
    collected *c = calloc(1, sizeof *c);
    uint64_t problems;
    inspect_all(pat, c, &problems);
    ck_assert_msg(problems == 0, "%s", c->problems[0]);
    ck_assert_uint_eq(c->n, N_GOOD);
    /* keys and labels in input order, the truncated file skipped */
    uint64_t j = 0;
    for (uint64_t i = 0; i < rf_image_list_count(l); i++) {
        if (strstr(rf_image_list_path(l, i), "zz_truncated"))
            continue;
        ck_assert_str_eq(c->keys[j], rf_image_list_key(l, i));
        ck_assert_int_eq(c->labels[j], rf_image_list_label(l, i));
        ck_assert_uint_gt(c->w[j], 0);
        j++;
    }
    check_member_bytes(pat, l, N_GOOD);

    loaded *ld = calloc(1, sizeof *ld);
    ck_assert_int_eq(load(pat, RF_SOURCE_TAR, ld, err, sizeof err), 0);
    ck_assert_uint_eq(ld->n, N_GOOD);
    for (uint64_t i = 0; i < ld->n; i++) {
        ck_assert_str_eq(ld->keys[i], c->keys[i]);
        ck_assert_int_eq(ld->labels[i], c->labels[i]);
    }
    /* the pack log names the bad file */
    size_t len;
    snprintf(cmd, sizeof cmd, "%s/pack.err", d1);
    char *log = (char *)read_all(cmd, &len);
    ck_assert_msg(strstr(log, "zz_truncated.jpg") != NULL, "%s", log);
    free(log);
    /* --strict fails on it */
    snprintf(cmd, sizeof cmd, "%s --input %s --output '%s/strict-%%d.tar' --strict --quiet 2>/dev/null",
             g_tool, g_tree, d1);
    ck_assert_int_eq(run_cmd(cmd), 1);
    free(ld->pixels);
    free(ld);
    free(c);
    rf_image_list_free(l);
}
END_TEST

/* A class tree of all four formats (.jpg, .PNG, .webp, .jpeg) and a truncated PNG: each good
 * file becomes KEY.<its own extension> with its bytes (also with --restart for the PNG and
 * WebP: restart markers are a JPEG's); the bad PNG is reported by name and skipped;
 * inspection validates every image with the loader's decoders and the loader reads all four
 * with their labels. */
START_TEST(test_pack_all_formats)
{
    char tree[600], out[600], cmd[3000], path[700];
    snprintf(tree, sizeof tree, "%s/fmt-tree", g_root);
    snprintf(out, sizeof out, "%s/fmt-out", g_root);
    static const char *const files[] = {"a/one.jpg", "a/two.PNG", "b/three.webp", "b/four.jpeg"};
    uint8_t rgb[50 * 40 * 3], *enc;
    size_t len;
    rf_synth_image(77, 50, 40, rgb);
    mkdir(tree, 0755), mkdir(out, 0755);
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%c", tree, files[i][0]);
        mkdir(path, 0755);
        ck_assert_int_eq(i == 1   ? rf_synth_png(rgb, 50, 40, RF_SYNTH_PNG_RGB16, &enc, &len)
                         : i == 2 ? rf_synth_webp(rgb, 50, 40, -1, &enc, &len)
                                  : rf_synth_jpeg(rgb, 50, 40, 90, 0, &enc, &len), 0);
        snprintf(path, sizeof path, "%s/%s", tree, files[i]);
        rf_test_write_file(path, enc, len);
        if (i == 1) {
            snprintf(path, sizeof path, "%s/a/zz_cut.png", tree);
            rf_test_write_file(path, enc, len / 2);
        }
        free(enc);
    }
    snprintf(cmd, sizeof cmd, "%s --input %s --output '%s/f-%%d.tar' --quiet 2>%s/pack.err && "
             "%s --input %s --output '%s/r-%%d.tar' --restart --quiet 2>/dev/null", g_tool,
             tree, out, out, g_tool, tree, out);
    ck_assert_int_eq(run_cmd(cmd), 0);
    snprintf(path, sizeof path, "%s/pack.err", out);
    char *log = (char *)read_all(path, &len);
    ck_assert_msg(strstr(log, "zz_cut.png: offset 0: bad image: PNG"), "%s", log);
    free(log);
    char pat[700], rpat[700];
    snprintf(pat, sizeof pat, "%s/f-0.tar", out);
    snprintf(rpat, sizeof rpat, "%s/r-0.tar", out);
    rf_image_list *l;
    char err[512];
    ck_assert_int_eq(rf_image_list_open(tree, &l, err, sizeof err), 0);
    ck_assert_uint_eq(rf_image_list_count(l), 5); /* the four and the cut PNG */
    check_member_bytes(pat, l, 4);
    rf_image_list_free(l);
    /* --restart: GNU tar reads the PNG and WebP members back as the files were */
    snprintf(cmd, sizeof cmd, "tar -xOf %s a/two.PNG | cmp -s - %s/a/two.PNG && "
             "tar -xOf %s b/three.webp | cmp -s - %s/b/three.webp", rpat, tree, rpat, tree);
    ck_assert_int_eq(run_cmd(cmd), 0);
    collected *c = calloc(1, sizeof *c);
    uint64_t problems;
    inspect_all(pat, c, &problems);
    ck_assert_msg(problems == 0, "%s", c->problems[0]);
    ck_assert_uint_eq(c->n, 4);
    for (int i = 0; i < 4; i++)
        ck_assert(c->w[i] == 50 && c->h[i] == 40);
    loaded *ld = calloc(1, sizeof *ld);
    ck_assert_int_eq(load(pat, RF_SOURCE_TAR, ld, err, sizeof err), 0);
    ck_assert_uint_eq(ld->n, 4);
    static const int32_t labels[] = {0, 0, 1, 1};
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(ld->labels[i], labels[i]);
    free(ld->pixels), free(ld), free(c);
}
END_TEST

/* --restart rewrites every JPEG (so member bytes change) but not one decoded pixel: the same
 * crops load identically from both packs, while the restart pack takes the region path. */
START_TEST(test_pack_restart)
{
    char plain[600], rst[600], pat[700], cmd[2000];
    snprintf(plain, sizeof plain, "%s/rs_plain", g_root);
    snprintf(rst, sizeof rst, "%s/rs_restart", g_root);
    pack(plain, 2, "");
    pack(rst, 2, "--restart");
    snprintf(cmd, sizeof cmd, "cmp -s %s/train-0000.tar %s/train-0000.tar", plain, rst);
    ck_assert_int_eq(run_cmd(cmd), 1);
    collected *c = calloc(1, sizeof *c);
    uint64_t problems;
    snprintf(pat, sizeof pat, "%s/train-*.tar", rst);
    inspect_all(pat, c, &problems);
    ck_assert_msg(problems == 0, "%s", c->problems[0]);
    ck_assert_uint_eq(c->n, N_GOOD);
    ck_assert_uint_eq(c->region_ready, N_GOOD); /* inspect sees every image region-ready */
    g_crop = RF_CROP_RANDOM;
    loaded *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    char err[512];
    ck_assert_int_eq(load(pat, RF_SOURCE_TAR, b, err, sizeof err), 0);
    snprintf(pat, sizeof pat, "%s/train-*.tar", plain);
    ck_assert_int_eq(load(pat, RF_SOURCE_TAR, a, err, sizeof err), 0);
    g_crop = RF_CROP_CENTER;
    ck_assert_uint_eq(a->n, N_GOOD);
    ck_assert_uint_eq(b->n, N_GOOD);
    for (uint64_t i = 0; i < a->n; i++)
        ck_assert_str_eq(a->keys[i], b->keys[i]);
    ck_assert_int_eq(memcmp(a->pixels, b->pixels, a->n * SIZE * SIZE * 3), 0);
    ck_assert_uint_eq(a->regions, 0);
    ck_assert_uint_gt(b->regions, 0); /* tiny images: most crops need most MCUs */
    /* a bad interval is refused before any file is read */
    snprintf(cmd, sizeof cmd, "%s --input %s --output '%s/x-%%d.tar' --restart=0 --quiet 2>/dev/null",
             g_tool, g_tree, rst);
    ck_assert_int_eq(run_cmd(cmd), 2);
    free(a->pixels), free(b->pixels), free(a), free(b), free(c);
}
END_TEST

/* --sync-index while packing: a sidecar beside every shard, the shards byte for byte those of
 * a pack without it, every baseline JPEG given points, and the check finds none stale;
 * --sync-index on those shards again keeps every entry. */
START_TEST(test_pack_sync_index)
{
    char plain[600], sync[600], pat[700], cmd[2000];
    snprintf(plain, sizeof plain, "%s/sy_plain", g_root);
    snprintf(sync, sizeof sync, "%s/sy_sync", g_root);
    pack(plain, 2, "");
    pack(sync, 3, "--sync-index");
    rf_paths *paths;
    char err[600];
    snprintf(pat, sizeof pat, "%s/train-*.tar", sync);
    const char *pp = pat;
    ck_assert_int_eq(rf_paths_expand(&pp, 1, &paths, err, sizeof err), 0);
    rf_sync_summary all;
    rf_sync_summary_init(&all);
    for (uint32_t i = 0; i < rf_paths_count(paths); i++) {
        const char *shard = rf_paths_get(paths, i);
        snprintf(cmd, sizeof cmd, "cmp -s %s %s/%s", shard, plain, strrchr(shard, '/') + 1);
        ck_assert_int_eq(run_cmd(cmd), 0);
        rf_sync_summary m;
        rf_sync_summary_init(&m);
        ck_assert_int_eq(rf_shard_check_sync_index(shard, NULL, &m, err, sizeof err), 0);
        ck_assert_uint_eq(m.stale + m.missing, 0);
        rf_sync_summary_add(&all, &m);
    }
    ck_assert_uint_eq(all.jpegs, N_GOOD);
    ck_assert_uint_eq(all.indexed + all.needs_none, N_GOOD); /* the tree's progressive ones */
    ck_assert_uint_gt(all.indexed, N_GOOD / 2);
    snprintf(cmd, sizeof cmd, "%s --sync-index '%s' --json --quiet > %s/again.json", g_tool, pat,
             sync);
    ck_assert_int_eq(run_cmd(cmd), 0);
    snprintf(cmd, sizeof cmd, "grep -q '\"reused\": %d,' %s/again.json", N_GOOD, sync);
    ck_assert_int_eq(run_cmd(cmd), 0);
    rf_paths_free(paths);
}
END_TEST

START_TEST(test_gnu_tar_formats)
{
    char d[600], cmd[3000];
    snprintf(d, sizeof d, "%s/gnutar", g_root);
    pack(d, 2, "--shard-size 1G");
    /* unpack the one shard, then re-archive its members in order in each format */
    snprintf(cmd, sizeof cmd, "cd %s && mkdir -p x && tar xf train-0000.tar -C x && "
             "tar tf train-0000.tar > members.txt && for f in gnu pax ustar; do "
             "tar --format=$f -cf $f.tar -C x --no-recursion -T members.txt || exit 1; done", d);
    ck_assert_int_eq(run_cmd(cmd), 0);
    collected *ref = calloc(1, sizeof *ref);
    loaded *lref = calloc(1, sizeof *lref);
    char pat[700], err[512];
    uint64_t problems;
    snprintf(pat, sizeof pat, "%s/train-0000.tar", d);
    inspect_all(pat, ref, &problems);
    ck_assert_uint_eq(problems, 0);
    ck_assert_uint_eq(ref->n, N_GOOD);
    ck_assert_int_eq(load(pat, RF_SOURCE_TAR, lref, err, sizeof err), 0);
    const char *fmts[] = {"gnu", "pax", "ustar"};
    for (int f = 0; f < 3; f++) {
        collected *c = calloc(1, sizeof *c);
        loaded *l = calloc(1, sizeof *l);
        snprintf(pat, sizeof pat, "%s/%s.tar", d, fmts[f]);
        inspect_all(pat, c, &problems);
        ck_assert_msg(problems == 0, "%s: %s", fmts[f], c->problems[0]);
        ck_assert_uint_eq(c->n, ref->n);
        for (uint64_t i = 0; i < c->n; i++) {
            ck_assert_str_eq(c->keys[i], ref->keys[i]);
            ck_assert_int_eq(c->labels[i], ref->labels[i]);
            ck_assert_uint_eq(c->w[i], ref->w[i]);
            ck_assert_uint_eq(c->h[i], ref->h[i]);
        }
        /* an index written for GNU tar's shard agrees with it */
        ck_assert_int_eq(rf_shard_write_index(pat, NULL, err, sizeof err), 0);
        rf_inspect_summary s;
        rf_inspect_summary_init(&s);
        ck_assert_int_eq(rf_shard_inspect(pat, NULL, NULL, NULL, NULL, &s), 0);
        ck_assert(s.has_index && s.index_ok);
        ck_assert_int_eq(load(pat, RF_SOURCE_TAR, l, err, sizeof err), 0);
        ck_assert_uint_eq(l->n, lref->n);
        for (uint64_t i = 0; i < l->n; i++) {
            ck_assert_str_eq(l->keys[i], lref->keys[i]);
            ck_assert_int_eq(l->labels[i], lref->labels[i]);
        }
        ck_assert_int_eq(memcmp(l->pixels, lref->pixels, l->n * SIZE * SIZE * 3), 0);
        free(l->pixels);
        free(l);
        free(c);
    }
    free(lref->pixels);
    free(lref);
    free(ref);
}
END_TEST

START_TEST(test_index_disagrees)
{
    char d[600], tar[700], idx[700], err[512];
    snprintf(d, sizeof d, "%s/badidx", g_root);
    pack(d, 2, "--shard-size 1G");
    snprintf(tar, sizeof tar, "%s/train-0000.tar", d);
    snprintf(idx, sizeof idx, "%s/train-0000.idx", d);
    size_t len;
    char *text = (char *)read_all(idx, &len);
    /* the last member's size (the label of the last sample, "1" byte): make it 2 */
    char *last = strrchr(text, ' ');
    char *p = last - 1;
    while (*p != ' ')
        p--;
    ck_assert(p[1] == '1' && p + 2 == last);
    p[1] = '2';
    rf_test_write_file(idx, text, len);
    free(text);

    collected *c = calloc(1, sizeof *c);
    rf_inspect_summary s;
    rf_inspect_summary_init(&s);
    int rc = rf_shard_inspect(tar, NULL, on_problem, NULL, c, &s);
    ck_assert_int_eq(rc, RF_EINDEX);
    ck_assert(s.has_index && !s.index_ok);
    ck_assert_uint_ge(c->nproblems, 1);
    ck_assert_int_eq(c->codes[0], RF_EINDEX);
    ck_assert_msg(strstr(c->problems[0], "train-0000.idx") && strstr(c->problems[0], "line"),
                  "%s", c->problems[0]);

    const char *pat;
    rf_config cfg = rf_test_host_config(&pat, tar, SIZE);
    rf_loader *ld = NULL;
    ck_assert_int_eq(rf_loader_create(&cfg, &ld, err, sizeof err), RF_EINDEX);
    ck_assert_ptr_null(ld);

    /* rewriting the index fixes it */
    ck_assert_int_eq(rf_shard_write_index(tar, NULL, err, sizeof err), 0);
    rf_inspect_summary_init(&s);
    ck_assert_int_eq(rf_shard_inspect(tar, NULL, NULL, NULL, NULL, &s), 0);
    ck_assert(s.index_ok);
    free(c);
}
END_TEST

START_TEST(test_bad_jpeg_reported)
{
    char d[600], tar[700], err[512], cmd[700];
    snprintf(d, sizeof d, "%s/badjpeg", g_root);
    mkdir(d, 0755);
    snprintf(tar, sizeof tar, "%s/s.tar", d);
    size_t len;
    snprintf(cmd, sizeof cmd, "%s/cls_0/img_1.jpg", g_tree);
    uint8_t *jpg = read_all(cmd, &len);
    rf_shard_writer *w;
    ck_assert_int_eq(rf_shard_writer_open(tar, NULL, RF_SHARD_PAX, &w, err, sizeof err), 0);
    ck_assert_int_eq(rf_shard_writer_add(w, "k/good", "jpg", jpg, len, 1), 0);
    uint64_t bad_off = rf_shard_writer_bytes(w);
    ck_assert_uint_eq(bad_off, rf_shard_sample_bytes("k/good", "jpg", len, 1, RF_SHARD_PAX));
    jpg[len / 2] ^= 0xff; /* corrupt the middle: the header still parses */
    ck_assert_int_eq(rf_shard_writer_add(w, "k/notjpeg", "jpg", "hello world", 11, 2), 0);
    ck_assert_int_eq(rf_shard_writer_add(w, "k/nolabel", "jpg", jpg, len - 100, 3), 0);
    ck_assert_int_eq(rf_shard_writer_add(w, "k/dot.ted", "jpg", jpg, len, 3), RF_EINVAL);
    ck_assert_int_eq(rf_shard_writer_close(w, err, sizeof err), 0);

    collected *c = calloc(1, sizeof *c);
    rf_inspect_summary s;
    rf_inspect_summary_init(&s);
    ck_assert_int_eq(rf_shard_inspect(tar, NULL, on_problem, on_sample, c, &s), RF_EDECODE);
    ck_assert_uint_eq(s.samples, 3);
    ck_assert_uint_eq(s.problems, 2); /* not a JPEG; truncated (no EOI) */
    ck_assert_int_eq(c->codes[0], RF_EDECODE);
    ck_assert_uint_eq(c->offsets[0], bad_off);
    char want[800];
    snprintf(want, sizeof want, "%s: offset %" PRIu64 ": member k/notjpeg.jpg", tar, bad_off);
    ck_assert_msg(strstr(c->problems[0], want) != NULL, "%s", c->problems[0]);
    ck_assert_msg(strstr(c->problems[1], "EOI") != NULL, "%s", c->problems[1]);
    ck_assert_uint_eq(s.images, 1);
    free(c);
    free(jpg);

    /* a shard cut in the middle of a member: a structure problem with its offset */
    snprintf(cmd, sizeof cmd, "head -c 1000 %s > %s/cut.tar", tar, d);
    ck_assert_int_eq(run_cmd(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s/cut.tar", d);
    rf_inspect_summary_init(&s);
    ck_assert_int_eq(rf_shard_inspect(cmd, NULL, NULL, NULL, NULL, &s), RF_EFORMAT);
    ck_assert_uint_eq(s.samples, 0);
    ck_assert_uint_eq(s.problems, 1);
}
END_TEST

/* ---- one validator: inspect, pack and rf_jpeg_check refuse what the loader refuses -------- */

enum { V_GOOD, V_TRAILER, V_BAD, V_GARBAGE = V_BAD, V_ONES, V_MARKER, V_EOI_INSIDE, V_HUGE,
       V_BIG, V_WIDE, V_NO_DQT, V_NO_EOI, V_KINDS };
static const char *const v_name[V_KINDS] = {
    "good", "trailer", "garbage", "ones", "marker", "eoi_inside", "huge", "big", "wide",
    "no_dqt", "no_eoi"};

/* A position in the entropy-coded data at fraction num/den of the file whose neighbours are no
 * 0xFF, so an edit there does not join a marker or a stuffed byte. */
static size_t data_at(const uint8_t *j, size_t len, size_t num, size_t den)
{
    size_t p = len * num / den;
    while (j[p - 1] == 0xFF || j[p] == 0xFF || j[p + 1] == 0xFF || j[p + 2] == 0xFF)
        p++;
    return p;
}

/* The file of kind k made from a good baseline JPEG (into out, at most len + 256 bytes). */
static size_t make_variant(int k, const uint8_t *j, size_t len, uint8_t *out)
{
    memcpy(out, j, len);
    size_t p = data_at(j, len, 1, 2), n = len;
    switch (k) {
    case V_TRAILER: /* a camera's trailer after EOI, markers and all */
        for (size_t i = 0; i < 256; i++)
            out[len + i] = (uint8_t)(i % 4 ? 0xFF : 0xD8 + i % 7);
        return len + 256;
    case V_GARBAGE: /* Huffman data overwritten, markers intact */
        for (size_t i = p; i < len * 3 / 4; i++)
            out[i] = out[i] == 0xFF || out[i - 1] == 0xFF ? out[i] : 0xA5;
        return n;
    case V_ONES: /* all-ones bits (stuffed 0xFF 0x00 pairs): no Huffman code is that long */
        for (size_t i = p; i < p + 32; i += 2)
            out[i] = 0xFF, out[i + 1] = 0x00;
        return n;
    case V_MARKER: p = data_at(j, len, 3, 4), out[p] = 0xFF, out[p + 1] = 0x99; return n;
    case V_EOI_INSIDE: out[p] = 0xFF, out[p + 1] = 0xD9; return n;
    case V_HUGE: rf_test_jpeg_set_size(out, n, 65000, 65000); return n;
    case V_BIG: rf_test_jpeg_set_size(out, n, 20000, 20000); return n;
    case V_WIDE: rf_test_jpeg_set_size(out, n, 32769, 1); return n;
    case V_NO_DQT: rf_test_jpeg_strip(out, &n, 0xDB); return n;
    case V_NO_EOI: return n - 2;
    default: return n;
    }
}

/* Every kind through the loader (default settings but a center crop), rf_jpeg_check,
 * rf_shard_inspect and ringfeed-pack: whatever the loader refuses the three tools refuse (and
 * they decode every image in full, so they also refuse Huffman damage a crop may not reach);
 * what the loader takes they take, a trailer after EOI kept byte for byte by pack. */
START_TEST(test_checks_agree_with_loader)
{
    char d[600], tree[700], path[900], err[512];
    snprintf(d, sizeof d, "%s/agree", g_root);
    snprintf(tree, sizeof tree, "%s/tree/cls_0", d);
    mkdir(d, 0755);
    snprintf(path, sizeof path, "%s/tree", d);
    mkdir(path, 0755);
    mkdir(tree, 0755);
    uint8_t *rgb = malloc(120 * 96 * 3), *jpg, *v = malloc(1 << 20);
    size_t len;
    rf_synth_image(77, 120, 96, rgb);
    ck_assert_int_eq(rf_synth_jpeg(rgb, 120, 96, 90, 0, &jpg, &len), 0);
    rf_jpeg_checker *jc = rf_jpeg_checker_create();
    for (int k = 0; k < V_KINDS; k++) {
        size_t n = make_variant(k, jpg, len, v);
        snprintf(path, sizeof path, "%s/%s.jpg", tree, v_name[k]);
        rf_test_write_file(path, v, n);
        /* the loader over a one-sample shard of it */
        char tar[900], pat[900];
        snprintf(tar, sizeof tar, "%s/%s.tar", d, v_name[k]);
        rf_shard_writer *w;
        ck_assert_int_eq(rf_shard_writer_open(tar, NULL, RF_SHARD_PAX, &w, err, sizeof err), 0);
        ck_assert_int_eq(rf_shard_writer_add(w, v_name[k], "jpg", v, n, 1), 0);
        ck_assert_int_eq(rf_shard_writer_close(w, err, sizeof err), 0);
        snprintf(pat, sizeof pat, "%s", tar);
        loaded *lo = calloc(1, sizeof *lo);
        int lrc = 0;
        {
            const char *pp;
            rf_config c = rf_test_host_config(&pp, pat, SIZE);
            c.crop = RF_CROP_CENTER;
            c.epochs = 1;
            rf_loader *ld;
            ck_assert_int_eq(rf_loader_create(&c, &ld, err, sizeof err), 0);
            rf_batch *b;
            while ((lrc = rf_loader_next(ld, &b)) == 0)
                rf_loader_release(ld, b, NULL);
            if (lrc == RF_EPOCH_END || lrc == RF_DONE)
                lrc = 0;
            rf_loader_destroy(ld);
        }
        free(lo);
        int crc = rf_jpeg_check(jc, v, n, NULL, NULL, NULL, err, sizeof err);
        rf_inspect_summary s;
        rf_inspect_summary_init(&s);
        int irc = rf_shard_inspect(tar, NULL, NULL, NULL, NULL, &s);
        /* the loader refuses what the marker rule covers whatever the crop; Huffman damage
         * only where its crop decodes it, while the tools decode all of it */
        int crop_free = k >= V_MARKER && k != V_EOI_INSIDE;
        ck_assert_msg(k < V_BAD ? lrc == 0 : !crop_free || lrc != 0, "%s: loader %d", v_name[k],
                      lrc);
        ck_assert_msg((crc != 0) == (k >= V_BAD), "%s: rf_jpeg_check %d %s", v_name[k], crc,
                      err);
        ck_assert_msg((irc != 0) == (k >= V_BAD) && (s.problems != 0) == (k >= V_BAD),
                      "%s: inspect %d, %llu problems", v_name[k], irc,
                      (unsigned long long)s.problems);
        if (lrc != 0)
            ck_assert_int_eq(crc, lrc);
    }
    rf_jpeg_checker_destroy(jc);
    /* pack takes the good two, skips the rest, and keeps the trailer */
    char cmd[3000], out[900];
    ck_assert_msg(g_tool[0], "ringfeed-pack not built next to the tests");
    snprintf(out, sizeof out, "%s/packed", d);
    mkdir(out, 0755);
    snprintf(cmd, sizeof cmd, "%s --input %s/tree --output '%s/p-%%04d.tar' --quiet --json "
             "> %s/pack.json 2>/dev/null", g_tool, d, out, out);
    ck_assert_int_eq(run_cmd(cmd), 0);
    snprintf(path, sizeof path, "%s/pack.json", out);
    size_t jl;
    char *js = (char *)read_all(path, &jl);
    char want[64];
    snprintf(want, sizeof want, "\"bad\": %d", V_KINDS - V_BAD);
    ck_assert_msg(strstr(js, want), "%s", js);
    free(js);
    snprintf(path, sizeof path, "%s/p-0000.tar", out);
    rf_inspect_summary s;
    rf_inspect_summary_init(&s);
    ck_assert_int_eq(rf_shard_inspect(path, NULL, NULL, NULL, NULL, &s), 0);
    ck_assert_uint_eq(s.samples, V_BAD);
    size_t tl;
    uint8_t *tar = read_all(path, &tl);
    size_t n = make_variant(V_TRAILER, jpg, len, v);
    int found = 0;
    for (size_t off = 512; off + n <= tl && !found; off += 512)
        found = memcmp(tar + off, v, n) == 0;
    ck_assert_msg(found, "the trailer file is not in the shard byte for byte");
    free(tar), free(v), free(jpg), free(rgb);
}
END_TEST

/* ---- atomic shard writer and a full disk ------------------------------------------------ */

static char *list_dir(const char *dir)
{
    char *ls = rf_test_list_dir(dir);
    ck_assert_msg(ls != NULL, "cannot list %s", dir);
    return ls;
}

/* Nothing appears under the shard's names before close; abort and failed writes leave no file
 * of the shard and keep an older shard of that name as it was. */
START_TEST(test_writer_atomic)
{
    char d[600], tar[700], idx[700], want[400], err[600];
    snprintf(d, sizeof d, "%s/atomic", g_root);
    mkdir(d, 0755);
    snprintf(tar, sizeof tar, "%s/s.tar", d);
    snprintf(idx, sizeof idx, "%s/s.idx", d);
    size_t len, old_len, now_len;
    snprintf(err, sizeof err, "%s/cls_0/img_1.jpg", g_tree);
    uint8_t *jpg = read_all(err, &len);
    rf_shard_writer *w;
    ck_assert_int_eq(rf_shard_writer_open(tar, idx, RF_SHARD_PAX, &w, err, sizeof err), 0);
    ck_assert_int_eq(rf_shard_writer_add(w, "k/a", "jpg", jpg, len, 1), 0);
    snprintf(want, sizeof want, ".s.idx.tmp-%ld-0\n.s.tar.tmp-%ld-0\n", (long)getpid(),
             (long)getpid());
    char *ls = list_dir(d);
    ck_assert_str_eq(ls, want); /* hidden temporaries only */
    free(ls);
    ck_assert_int_eq(rf_shard_writer_close(w, err, sizeof err), 0);
    ck_assert_str_eq((ls = list_dir(d)), "s.idx\ns.tar\n");
    free(ls);
    rf_inspect_summary s;
    rf_inspect_summary_init(&s);
    ck_assert_int_eq(rf_shard_inspect(tar, NULL, NULL, NULL, NULL, &s), 0);
    ck_assert(s.samples == 1 && s.has_index && s.index_ok);
    uint8_t *old = read_all(tar, &old_len), *now;

    /* rewriting s.tar: the old one stays whole until close; abort keeps it */
    ck_assert_int_eq(rf_shard_writer_open(tar, idx, RF_SHARD_PAX, &w, err, sizeof err), 0);
    ck_assert_int_eq(rf_shard_writer_add(w, "k/b", "jpg", jpg, len, 2), 0);
    rf_shard_writer_abort(w);
    ck_assert_str_eq((ls = list_dir(d)), "s.idx\ns.tar\n");
    free(ls);
    now = read_all(tar, &now_len);
    ck_assert(now_len == old_len && memcmp(now, old, old_len) == 0);
    free(now);

    /* writes past a 64 KiB file-size limit fail (EFBIG) in add (a member written around the
     * buffer) or at close (buffered): close names the shard, the offset and the errno, and
     * leaves the older s.tar as it was; a new t.tar leaves nothing */
    uint8_t *big = calloc(1, 2u << 20);
    ck_assert_int_eq(rf_test_limit_file_size(64u << 10), 0);
    char t[700];
    snprintf(t, sizeof t, "%s/t.tar", d);
    for (int pass = 0; pass < 2; pass++) {
        const char *path = pass ? tar : t;
        ck_assert_int_eq(rf_shard_writer_open(path, NULL, RF_SHARD_PAX, &w, err, sizeof err), 0);
        int rc = rf_shard_writer_add(w, "k/big", "jpg", big, pass ? 200u << 10 : 2u << 20, 1);
        ck_assert_int_eq(rc, pass ? 0 : -EFBIG);
        ck_assert_int_eq(rf_shard_writer_close(w, err, sizeof err), -EFBIG);
        snprintf(want, sizeof want, "%s: write failed at byte offset 65536: ", path);
        ck_assert_msg(strstr(err, want) && strstr(err, "(EFBIG)") && strstr(err, "removed"),
                      "%s", err);
    }
    ck_assert_int_eq(rf_test_limit_file_size(0), 0);
    ck_assert_str_eq((ls = list_dir(d)), "s.idx\ns.tar\n");
    free(ls);
    now = read_all(tar, &now_len);
    ck_assert(now_len == old_len && memcmp(now, old, old_len) == 0);
    free(now);

    /* an index in a folder that does not exist: refused at open, before any data */
    snprintf(idx, sizeof idx, "%s/no/such/dir/u.idx", d);
    snprintf(tar, sizeof tar, "%s/u.tar", d);
    ck_assert_int_eq(rf_shard_writer_open(tar, idx, RF_SHARD_PAX, &w, err, sizeof err), -ENOENT);
    ck_assert_msg(strstr(err, idx) && strstr(err, "(ENOENT)"), "%s", err);
    ck_assert_str_eq((ls = list_dir(d)), "s.idx\ns.tar\n");
    free(ls);
    free(big);
    free(old);
    free(jpg);
}
END_TEST

/* Pack g_full into base/out at --shard-size 64K, with writes failing mid-shard (a file-size
 * limit when `limit`, else the caller's full tmpfs at base/out), and check what the failure
 * leaves: exit 1 and a message naming the failed shard and errno_name; no file of that shard
 * (nor of its index, nor a temporary); the shards before it complete, inspecting clean and
 * loading every sample of the input up to them, in order; the JSON counting only those. */
static void check_failed_pack(const char *base, uint64_t limit, const char *errno_name)
{
    char out[600], cmd[3000], path[700];
    snprintf(out, sizeof out, "%s/out", base);
    snprintf(cmd, sizeof cmd, "%s --input %s --output '%s/train-%%04d.tar' --shard-size 64K "
             "--threads 2 --quiet --json >%s/pack.json 2>%s/pack.err", g_tool, g_full, out, base,
             base);
    ck_assert_int_eq(rf_test_limit_file_size(limit), 0);
    int rc = run_cmd(cmd);
    ck_assert_int_eq(rf_test_limit_file_size(0), 0);
    ck_assert_int_eq(rc, 1);
    uint32_t k = 0;
    char want[4096] = "", *ls = list_dir(out);
    for (;; k++) {
        snprintf(path, sizeof path, "%s/train-%04u.tar", out, k);
        if (access(path, F_OK) != 0)
            break;
        snprintf(want + strlen(want), sizeof want - strlen(want),
                 "train-%04u.idx\ntrain-%04u.tar\n", k, k);
    }
    ck_assert_uint_ge(k, 1);
    ck_assert_str_eq(ls, want); /* complete shards only: no temporaries, no index alone */
    size_t len;
    snprintf(cmd, sizeof cmd, "%s/pack.err", base);
    char *log = (char *)read_all(cmd, &len);
    ck_assert_msg(strstr(log, path) && strstr(log, errno_name), "%s", log); /* shard k */

    char pat[700], err[512];
    snprintf(pat, sizeof pat, "%s/train-*.tar", out);
    collected *c = calloc(1, sizeof *c);
    uint64_t problems;
    inspect_all(pat, c, &problems);
    ck_assert_msg(problems == 0, "%s", c->problems[0]);
    loaded *ld = calloc(1, sizeof *ld);
    ck_assert_int_eq(load(pat, RF_SOURCE_TAR, ld, err, sizeof err), 0);
    rf_image_list *l;
    ck_assert_int_eq(rf_image_list_open(g_full, &l, err, sizeof err), 0);
    ck_assert_uint_eq(ld->n, c->n);
    ck_assert_uint_lt(ld->n, rf_image_list_count(l));
    for (uint64_t i = 0; i < ld->n; i++) {
        ck_assert_str_eq(ld->keys[i], rf_image_list_key(l, i));
        ck_assert_int_eq(ld->labels[i], rf_image_list_label(l, i));
    }
    snprintf(cmd, sizeof cmd, "%s/pack.json", base);
    char *json = (char *)read_all(cmd, &len);
    snprintf(want, sizeof want, "{\"ok\": false, \"files\": %" PRIu64 ", \"bad\": 0, "
             "\"unreadable\": 0, \"shards\": %u,", ld->n, k);
    ck_assert_msg(strncmp(json, want, strlen(want)) == 0, "%s", json);
    rf_image_list_free(l);
    free(json);
    free(log);
    free(ld->pixels);
    free(ld);
    free(c);
    free(ls);
}

/* g_root/<tag> and its out folder, for check_failed_pack. */
static void make_base(const char *tag, char *base, size_t base_cap, char *out, size_t out_cap)
{
    snprintf(base, base_cap, "%s/%s", g_root, tag);
    snprintf(out, out_cap, "%s/out", base);
    mkdir(base, 0755);
    mkdir(out, 0755);
}

START_TEST(test_pack_write_fails)
{
    char base[600], out[700];
    make_base("efbig", base, sizeof base, out, sizeof out);
    check_failed_pack(base, FULL_LIMIT, "File too large");
}
END_TEST

/* A real full disk: a 160 KiB tmpfs in a mount namespace of this test's own (when the machine
 * allows one; the file-size test above runs everywhere). */
START_TEST(test_pack_full_disk)
{
    char base[600], out[700];
    make_base("enospc", base, sizeof base, out, sizeof out);
    int rc = rf_test_private_tmpfs(out, 160u << 10);
    if (rc) {
        fprintf(stderr, "test_pack_full_disk: no tmpfs here (%s): skipped; "
                "test_pack_write_fails covers the same with EFBIG\n", strerror(-rc));
        return;
    }
    check_failed_pack(base, 0, "No space left on device");
}
END_TEST

/* ---- unreadable input entries ----------------------------------------------------------- */

/* links/a: img_0..2.jpg and, among them, a dangling symlink, one to itself, two to each other,
 * a FIFO and a device named .jpg, and a symlink back to the root; links/b: img_0..1.jpg. The
 * unreadable entries in walk order: */
static const char *const g_unreadable[] = {"a/back", "a/dangling.jpg", "a/fifo.jpg",
                                           "a/loop_a.jpg", "a/loop_b.jpg", "a/null.jpg",
                                           "a/self.jpg"};
#define N_UNREADABLE 7

static void make_links_tree(char *root, size_t cap)
{
    char path[700], target[700], cmd[2000];
    snprintf(root, cap, "%s/links", g_root);
    snprintf(cmd, sizeof cmd, "mkdir -p %s/a %s/b && cd %s && for i in 0 1 2; do "
             "cp %s/cls_0/img_$i.jpg a/; done && cp %s/cls_1/img_0.jpg %s/cls_1/img_1.jpg b/",
             root, root, root, g_tree, g_tree, g_tree);
    ck_assert_int_eq(run_cmd(cmd), 0);
    const char *links[][2] = {{"a/dangling.jpg", "nowhere.jpg"}, {"a/self.jpg", "self.jpg"},
                              {"a/loop_a.jpg", "loop_b.jpg"}, {"a/loop_b.jpg", "loop_a.jpg"},
                              {"a/null.jpg", "/dev/null"}, {"a/back", ".."}};
    for (size_t i = 0; i < sizeof links / sizeof links[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", root, links[i][0]);
        snprintf(target, sizeof target, "%s", links[i][1]);
        ck_assert_int_eq(symlink(target, path), 0);
    }
    snprintf(path, sizeof path, "%s/a/fifo.jpg", root);
    ck_assert_int_eq(mkfifo(path, 0644), 0);
}

/* The walk records what it cannot read and goes on; so does a `path label` list. */
static void check_unreadable_list(const char *root)
{
    rf_image_list *l;
    char err[512], path[700];
    ck_assert_int_eq(rf_image_list_open(root, &l, err, sizeof err), 0);
    ck_assert_uint_eq(rf_image_list_count(l), 5);
    ck_assert_uint_eq(rf_image_list_classes(l), 2);
    ck_assert_int_eq(rf_image_list_label(l, 3), 1);
    ck_assert_uint_eq(rf_image_list_unreadable(l), N_UNREADABLE);
    const int32_t codes[] = {-ELOOP, -ENOENT, RF_EFORMAT, -ELOOP, -ELOOP, RF_EFORMAT, -ELOOP};
    for (uint64_t i = 0; i < N_UNREADABLE; i++) {
        snprintf(path, sizeof path, "%s/%s: ", root, g_unreadable[i]);
        const char *m = rf_image_list_unreadable_message(l, i);
        ck_assert_msg(strncmp(m, path, strlen(path)) == 0, "%s", m);
        ck_assert_int_eq(rf_image_list_unreadable_code(l, i), codes[i]);
    }
    /* the same words as a FIFO named as a shard or an index (rf_open_regular) */
    ck_assert_msg(strstr(rf_image_list_unreadable_message(l, 2),
                         ": a FIFO (named pipe), not a regular file; not read"),
                  "%s", rf_image_list_unreadable_message(l, 2));
    ck_assert_ptr_null(rf_image_list_unreadable_message(l, N_UNREADABLE));
    rf_image_list_free(l);

    snprintf(path, sizeof path, "%s/list.txt", root);
    const char *list = "a/img_0.jpg 0\na/dangling.jpg 1\na/fifo.jpg 2\n";
    rf_test_write_file(path, list, strlen(list));
    ck_assert_int_eq(rf_image_list_open(path, &l, err, sizeof err), 0);
    ck_assert_uint_eq(rf_image_list_count(l), 1);
    ck_assert_uint_eq(rf_image_list_unreadable(l), 2);
    ck_assert_msg(strstr(rf_image_list_unreadable_message(l, 0), "list.txt: line 2: "),
                  "%s", rf_image_list_unreadable_message(l, 0));
    ck_assert_msg(strstr(rf_image_list_unreadable_message(l, 1), "line 3: ") &&
                  strstr(rf_image_list_unreadable_message(l, 1), "a FIFO (named pipe)"),
                  "%s", rf_image_list_unreadable_message(l, 1));
    rf_image_list_free(l);
}

/* Dangling and looping symlinks, a FIFO and a device in the input: pack skips, names and
 * counts each (summary and JSON) and packs the rest, without blocking on the FIFO; --strict
 * refuses the input naming them, before any shard; the folder loader refuses it at create. */
START_TEST(test_pack_unreadable_entries)
{
    char root[600], out[700], cmd[3000], path[800], err[1024];
    make_links_tree(root, sizeof root);
    check_unreadable_list(root);
    snprintf(out, sizeof out, "%s/out", root);
    for (int strict = 0; strict < 2; strict++) {
        snprintf(cmd, sizeof cmd, "timeout 60 %s --input %s --output '%s/s-%%02d.tar' %s "
                 "--json >%s.json 2>%s.err", g_tool, root, out, strict ? "--strict" : "", out,
                 out);
        ck_assert_int_eq(run_cmd(cmd), strict ? 1 : 0);
        size_t len;
        snprintf(path, sizeof path, "%s.err", out);
        char *log = (char *)read_all(path, &len);
        for (int i = 0; i < N_UNREADABLE; i++) {
            snprintf(path, sizeof path, "ringfeed-pack: %s: %s/%s: ",
                     strict ? "error" : "skipping", root, g_unreadable[i]);
            ck_assert_msg(strstr(log, path), "%s not in\n%s", path, log);
        }
        ck_assert_msg(strstr(log, "7 unreadable"), "%s", log);
        free(log);
        snprintf(path, sizeof path, "%s.json", out);
        char *json = (char *)read_all(path, &len);
        snprintf(path, sizeof path, "{\"ok\": %s, \"files\": %d, \"bad\": 7, "
                 "\"unreadable\": 7, \"shards\": %d,", strict ? "false" : "true",
                 strict ? 0 : 5, strict ? 0 : 1);
        ck_assert_msg(strncmp(json, path, strlen(path)) == 0, "%s", json);
        free(json);
    }
    snprintf(path, sizeof path, "%s/s-*.tar", out); /* the first run's shard: every sample */
    loaded *ld = calloc(1, sizeof *ld);
    ck_assert_int_eq(load(path, RF_SOURCE_TAR, ld, err, sizeof err), 0);
    ck_assert_uint_eq(ld->n, 5);
    ck_assert_str_eq(ld->keys[4], "b/img_1");
    ck_assert_int_eq(ld->labels[4], 1);
    free(ld->pixels);
    ck_assert_int_eq(load(root, RF_SOURCE_FOLDER, ld, err, sizeof err), -ELOOP);
    snprintf(path, sizeof path, "%s/a/back: a symlink to a folder above it", root);
    ck_assert_msg(strstr(err, path) && strstr(err, "7 unreadable entries"), "%s", err);
    free(ld);
}
END_TEST

/* Inspection reports exactly the samples the loader (default settings) refuses for their label,
 * in the loader's words, at the member's offset (the sample's when it has no label member);
 * with label_source RF_LABEL_NONE neither refuses any. The shard is written by GNU tar from
 * files. The tools say the same: ringfeed-inspect and ringfeed-bench fail on it by default and
 * pass with --no-labels. */
/* Inspection chooses each sample's image as the loader does (rf_inspect_options.image_exts):
 * a sample of a good s.jpg and a cut s.png is clean by default (jpg comes first), the cut PNG
 * a problem with "png,jpg", no image at all with "webp"; a bad list is RF_EINVAL. */
START_TEST(test_inspect_image_preference)
{
    char d[600], tar[700], err[256];
    snprintf(d, sizeof d, "%s/prefer", g_root);
    mkdir(d, 0755);
    snprintf(tar, sizeof tar, "%s/p.tar", d);
    uint8_t rgb[40 * 30 * 3], *jpg, *png;
    size_t jn, pn;
    rf_synth_image(3, 40, 30, rgb);
    ck_assert_int_eq(rf_synth_jpeg(rgb, 40, 30, 90, 0, &jpg, &jn), 0);
    ck_assert_int_eq(rf_synth_png(rgb, 40, 30, RF_SYNTH_PNG_RGB8, &png, &pn), 0);
    rf_shard_writer *w;
    ck_assert_int_eq(rf_shard_writer_open(tar, NULL, RF_SHARD_PAX, &w, err, sizeof err), 0);
    ck_assert_int_eq(rf_shard_writer_add(w, "s", "jpg", jpg, jn, -1), 0);
    ck_assert_int_eq(rf_shard_writer_add(w, "s", "png", png, pn / 2, 4), 0);
    ck_assert_int_eq(rf_shard_writer_close(w, err, sizeof err), 0);
    free(jpg), free(png);
    static const struct { const char *exts; int rc; const char *says; } cases[] = {
        {NULL, 0, NULL},
        {"png,jpg", RF_EDECODE, "member s.png: PNG"},
        {"webp", RF_EFORMAT, "sample s has no image member (webp)"},
        {"jp.g", RF_EINVAL, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        collected *c = calloc(1, sizeof *c);
        rf_inspect_options o;
        rf_inspect_options_init(&o);
        o.image_exts = cases[i].exts;
        rf_inspect_summary s;
        rf_inspect_summary_init(&s);
        ck_assert_int_eq(rf_shard_inspect(tar, &o, on_problem, on_sample, c, &s), cases[i].rc);
        if (cases[i].says)
            ck_assert_msg(c->nproblems == 1 && strstr(c->problems[0], cases[i].says), "%s: %s",
                          cases[i].exts, c->problems[0]);
        else if (cases[i].rc == 0)
            ck_assert(s.problems == 0 && s.samples == 1 && c->w[0] == 40);
        free(c);
    }
}
END_TEST

/* A JPEG's bytes with an APP1 segment after the SOI: "Exif\0\0", then a TIFF structure in the
 * byte order `big` whose IFD0 (at `ifd`) holds a Make entry and (tag, type, count, value). */
static uint8_t *with_exif(const uint8_t *j, size_t n, int big, uint16_t tag, uint16_t type,
                          uint32_t count, uint16_t value, uint32_t ifd, size_t *out_n)
{
    uint8_t t[38] = {0};
    memcpy(t, big ? "MM" : "II", 2);
#define PUT16(at, v) (big ? (t[at] = (uint8_t)((v) >> 8), t[(at) + 1] = (uint8_t)(v)) \
                          : (t[at] = (uint8_t)(v), t[(at) + 1] = (uint8_t)((v) >> 8)))
#define PUT32(at, v) (big ? (PUT16(at, (v) >> 16), PUT16((at) + 2, (v) & 0xFFFF)) \
                          : (PUT16(at, (v) & 0xFFFF), PUT16((at) + 2, (v) >> 16)))
    PUT16(2, 42);
    PUT32(4, ifd);
    PUT16(8, 2);                                       /* two entries */
    PUT16(10, 0x010F), PUT16(12, 2), PUT32(14, 4u);    /* Make, ASCII, 4 bytes in the field */
    memcpy(t + 18, "cam", 4);
    PUT16(22, tag), PUT16(24, type), PUT32(26, count); /* the entry under test */
    PUT16(30, value);
#undef PUT16
#undef PUT32
    size_t seg = 2 + 6 + sizeof t;
    uint8_t *o = malloc(n + 2 + seg);
    memcpy(o, j, 2);
    o[2] = 0xFF, o[3] = 0xE1, o[4] = (uint8_t)(seg >> 8), o[5] = (uint8_t)seg;
    memcpy(o + 6, "Exif\0\0", 6);
    memcpy(o + 12, t, sizeof t);
    memcpy(o + 2 + 2 + seg, j + 2, n - 2);
    *out_n = n + 2 + seg;
    return o;
}

static int on_orientation(void *ctx, const rf_inspect_sample *s)
{
    uint32_t *got = ctx;
    got[atoi(s->key)] = s->orientation;
    return 0;
}

/* Inspection reads each JPEG's EXIF orientation tag (either byte order, behind other APP
 * segments; a malformed one is none) and counts the images it rotates or mirrors, which the
 * loader decodes as stored. */
START_TEST(test_inspect_exif_orientation)
{
    char d[600], tar[700], err[256];
    snprintf(d, sizeof d, "%s/exif", g_root);
    mkdir(d, 0755);
    snprintf(tar, sizeof tar, "%s/e.tar", d);
    uint8_t rgb[40 * 30 * 3], *jpg;
    size_t jn;
    rf_synth_image(5, 40, 30, rgb);
    ck_assert_int_eq(rf_synth_jpeg(rgb, 40, 30, 90, 0, &jpg, &jn), 0);
    static const struct { int big; uint16_t tag, type; uint32_t count; uint16_t v; uint32_t ifd;
                          uint32_t want; } cases[] = {
        {1, 0x0112, 3, 1, 6, 8, 6},       /* big-endian, rotate 90 */
        {0, 0x0112, 3, 1, 8, 8, 8},       /* little-endian, rotate 270 */
        {0, 0x0112, 3, 1, 1, 8, 1},       /* upright */
        {1, 0x0112, 3, 1, 9, 8, 0},       /* out of range */
        {0, 0x0112, 4, 1, 6, 8, 0},       /* LONG, not SHORT */
        {1, 0x0112, 3, 1, 3, 4000, 0},    /* IFD0 past the segment's end */
        {0, 0x0110, 3, 1, 6, 8, 0},       /* no orientation tag (Model) */
    };
    enum { N = sizeof cases / sizeof cases[0] };
    rf_shard_writer *w;
    ck_assert_int_eq(rf_shard_writer_open(tar, NULL, RF_SHARD_PAX, &w, err, sizeof err), 0);
    for (int i = 0; i < N + 2; i++) {
        char key[16];
        snprintf(key, sizeof key, "%d", i);
        size_t n = jn;
        uint8_t *b = jpg;
        if (i < N)
            b = with_exif(jpg, jn, cases[i].big, cases[i].tag, cases[i].type, cases[i].count,
                          cases[i].v, cases[i].ifd, &n);
        else if (i == N) { /* an XMP APP1 first, then the Exif one (orientation 5) */
            size_t m;
            uint8_t *e = with_exif(jpg, jn, 0, 0x0112, 3, 1, 5, 8, &m);
            static const char xmp[] = "http://ns.adobe.com/xap/1.0/\0<x:xmpmeta/>";
            size_t seg = 2 + sizeof xmp;
            b = malloc(m + 2 + seg);
            memcpy(b, e, 2);
            b[2] = 0xFF, b[3] = 0xE1, b[4] = (uint8_t)(seg >> 8), b[5] = (uint8_t)seg;
            memcpy(b + 6, xmp, sizeof xmp);
            memcpy(b + 4 + seg, e + 2, m - 2);
            n = m + 2 + seg;
            free(e);
        }
        ck_assert_int_eq(rf_shard_writer_add(w, key, "jpg", b, n, i), 0);
        if (b != jpg)
            free(b);
    }
    ck_assert_int_eq(rf_shard_writer_close(w, err, sizeof err), 0);
    free(jpg);
    uint32_t got[N + 2];
    memset(got, 0xFF, sizeof got);
    rf_inspect_options o;
    rf_inspect_options_init(&o);
    rf_inspect_summary s;
    rf_inspect_summary_init(&s);
    ck_assert_int_eq(rf_shard_inspect(tar, &o, NULL, on_orientation, got, &s), 0);
    ck_assert_uint_eq(s.problems, 0);
    for (int i = 0; i < N; i++)
        ck_assert_msg(got[i] == cases[i].want, "case %d: %u, want %u", i, got[i], cases[i].want);
    ck_assert_uint_eq(got[N], 5);
    ck_assert_uint_eq(got[N + 1], 0); /* no EXIF at all */
    ck_assert_uint_eq(s.oriented, 3); /* 6, 8 and 5 */
}
END_TEST

static int on_recovered(void *ctx, const rf_inspect_sample *s)
{
    ((uint32_t *)ctx)[atoi(s->key)] = s->recovered;
    return 0;
}

/* Files libjpeg decodes without losing a pixel after recovering from something are reported
 * with what (rf_inspect_sample.recovered, the summary's recovered_by_kind), not as problems:
 * bytes that are no marker between the header's segments, a comment whose length field says 0.
 * Junk between the last MCU and the EOI is neither: libjpeg-turbo reads it as the scan's last
 * bits and says nothing. */
START_TEST(test_inspect_recovered)
{
    char d[600], tar[700], err[256];
    snprintf(d, sizeof d, "%s/recovered", g_root);
    mkdir(d, 0755);
    snprintf(tar, sizeof tar, "%s/r.tar", d);
    uint8_t rgb[40 * 30 * 3], *jpg;
    size_t jn;
    rf_synth_image(7, 40, 30, rgb);
    ck_assert_int_eq(rf_synth_jpeg(rgb, 40, 30, 90, 0, &jpg, &jn), 0);
    static const struct {
        size_t at; /* 0: before the EOI */
        const char *ins;
        size_t n;
    } cases[] = {{0, "", 0}, {2, "\x12\x34\x56", 3}, {2, "\xff\xfe\x00\x00a comment", 13},
                 {0, "\x77\x77", 2}};
    enum { N = sizeof cases / sizeof cases[0] };
    rf_shard_writer *w;
    ck_assert_int_eq(rf_shard_writer_open(tar, NULL, RF_SHARD_PAX, &w, err, sizeof err), 0);
    for (int i = 0; i < N; i++) {
        char key[16];
        size_t at = cases[i].at ? cases[i].at : jn - 2, n = jn + cases[i].n;
        uint8_t *b = malloc(n);
        memcpy(b, jpg, at);
        memcpy(b + at, cases[i].ins, cases[i].n);
        memcpy(b + at + cases[i].n, jpg + at, jn - at);
        snprintf(key, sizeof key, "%d", i);
        ck_assert_int_eq(rf_shard_writer_add(w, key, "jpg", b, n, i), 0);
        free(b);
    }
    ck_assert_int_eq(rf_shard_writer_close(w, err, sizeof err), 0);
    free(jpg);
    uint32_t got[N];
    memset(got, 0xFF, sizeof got);
    rf_inspect_options o;
    rf_inspect_options_init(&o);
    rf_inspect_summary s;
    rf_inspect_summary_init(&s);
    ck_assert_int_eq(rf_shard_inspect(tar, &o, NULL, on_recovered, got, &s), 0);
    ck_assert_uint_eq(got[0], 0);
    ck_assert_uint_eq(got[1], 1u << RF_RECOVERED_HEADER_BYTES);
    ck_assert_uint_eq(got[2], 1u << RF_RECOVERED_HEADER_BYTES);
    ck_assert_uint_eq(s.recovered_by_kind[RF_RECOVERED_HEADER_BYTES], 2);
    ck_assert_uint_eq(got[3], 0);
    ck_assert_uint_eq(s.problems, 0);
    ck_assert_str_eq(rf_recovered_name(RF_RECOVERED_HEADER_BYTES), "header_bytes");
    ck_assert_ptr_null(rf_recovered_name(RF_RECOVERED_KINDS));
}
END_TEST

START_TEST(test_inspect_labels_as_loader)
{
    static char huge[2001];
    memset(huge, '7', sizeof huge - 1);
    const char *texts[] = {"5", NULL, "5\n", "", " 7 \r\n", "-1", "2147483647", "cat", "1.0",
                           "2147483648", huge, "3"};
    static const char *const what[] = {
        NULL, "sample 00000001 has no label member (00000001.cls); set label_source", NULL,
        "label member 00000003.cls is empty", NULL,
        "label member 00000005.cls holds \"-1\", a negative number", NULL,
        "label member 00000007.cls holds \"cat\", not a decimal integer",
        "label member 00000008.cls holds \"1.0\", not a decimal integer",
        "label member 00000009.cls holds \"2147483648\", a number over 2147483647",
        "label member 00000010.cls is 2000 bytes, over the 1024-byte limit of a label", NULL};
    static const int32_t value[] = {5, -1, 5, -1, 7, -1, 2147483647, -1, -1, -1, -1, 3};
    enum { N = sizeof texts / sizeof texts[0], NBAD = 7 };
    char d[600], name[64], want[900], cmd[3000];
    snprintf(d, sizeof d, "%s/labels", g_root);
    mkdir(d, 0755);
    char *tar = rf_test_make_label_shard(d, texts, N);

    collected *c = calloc(1, sizeof *c);
    rf_inspect_summary s;
    rf_inspect_summary_init(&s);
    ck_assert_int_eq(rf_shard_inspect(tar, NULL, on_problem, on_sample, c, &s), RF_ELABEL);
    ck_assert_uint_eq(s.samples, N);
    ck_assert_uint_eq(s.problems, NBAD);
    ck_assert_uint_eq(s.labeled, N - NBAD);
    ck_assert_int_eq(s.label_min, 3);
    ck_assert_int_eq(s.label_max, 2147483647);
    for (uint32_t i = 0, k = 0; i < N; i++) {
        ck_assert_int_eq(c->labels[i], value[i]);
        if (!what[i])
            continue;
        snprintf(name, sizeof name, "%08u.%s", i, texts[i] ? "cls" : "jpg");
        uint64_t off = rf_test_member_offset(tar, name);
        snprintf(want, sizeof want, "%s: offset %" PRIu64 ": %s", tar, off, what[i]);
        ck_assert_int_eq(c->codes[k], RF_ELABEL);
        ck_assert_uint_eq(c->offsets[k], off);
        ck_assert_msg(strstr(c->problems[k], want), "\n  got  %s\n  want %s", c->problems[k],
                      want);
        k++;
    }

    /* the loader in skip mode refuses the same samples, under `label` */
    const char *pat;
    rf_config cfg = load_config(&pat, tar, RF_SOURCE_TAR);
    cfg.on_error = RF_ON_ERROR_SKIP;
    loaded *l = malloc(sizeof *l);
    for (uint32_t none = 0; none < 2; none++) {
        cfg.label_source = none ? RF_LABEL_NONE : RF_LABEL_CLS;
        load_epoch(rf_test_create_ok(&cfg), l);
        uint32_t got[N] = {0};
        for (uint64_t k = 0; k < l->n; k++) { /* replacements come from the end: any order */
            uint32_t i = (uint32_t)strtoul(l->keys[k], NULL, 10);
            ck_assert_uint_lt(i, N);
            got[i]++;
            ck_assert_int_eq(l->labels[k], none ? -1 : value[i]);
        }
        for (uint32_t i = 0; i < N; i++)
            ck_assert_uint_eq(got[i], none || !what[i] ? 1 : 0);
        ck_assert_uint_eq(l->label_skips, none ? 0 : NBAD);
        free(l->pixels);
    }
    free(l);

    /* unlabelled data, asked for: nothing to report, no label read */
    rf_inspect_options o;
    rf_inspect_options_init(&o);
    o.label_source = RF_LABEL_NONE;
    rf_inspect_summary_init(&s);
    ck_assert_int_eq(rf_shard_inspect(tar, &o, NULL, NULL, NULL, &s), 0);
    ck_assert_uint_eq(s.problems, 0);
    ck_assert_uint_eq(s.labeled, 0);
    o.label_source = RF_LABEL_JSON + 1;
    ck_assert_int_eq(rf_shard_inspect(tar, &o, NULL, NULL, NULL, &s), RF_EINVAL);

    /* the tools (next to ringfeed-pack) */
    ck_assert_msg(g_tool[0], "ringfeed-pack not built next to the tests");
    char tools[1024];
    snprintf(tools, sizeof tools, "%.*s", (int)(strrchr(g_tool, '/') - g_tool), g_tool);
    snprintf(cmd, sizeof cmd, "%s/ringfeed-inspect %s > %s/inspect.out", tools, tar, d);
    ck_assert_int_eq(run_cmd(cmd), 1);
    snprintf(cmd, sizeof cmd, "grep -c '^problem: .*\\[label missing or not an integer "
             "0..2147483647\\]$' %s/inspect.out | grep -qx %d", d, NBAD);
    ck_assert_msg(run_cmd(cmd) == 0, "ringfeed-inspect did not list %d label problems", NBAD);
    snprintf(cmd, sizeof cmd, "%s/ringfeed-inspect --no-labels %s > /dev/null", tools, tar);
    ck_assert_int_eq(run_cmd(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s/ringfeed-bench --shards %s --batch 4 --size 32 --device host "
             "--no-shuffle 2> %s/bench.err > /dev/null", tools, tar, d);
    ck_assert_int_ne(run_cmd(cmd), 0);
    snprintf(cmd, sizeof cmd, "grep -q '%s: sample 00000001 at offset %" PRIu64 " has no label "
             "member' %s/bench.err", tar, rf_test_member_offset(tar, "00000001.jpg"), d);
    ck_assert_msg(run_cmd(cmd) == 0, "ringfeed-bench did not name the sample without a label");
    snprintf(cmd, sizeof cmd, "%s/ringfeed-bench --shards %s --batch 4 --size 32 --device host "
             "--no-shuffle --no-labels > /dev/null", tools, tar);
    ck_assert_int_eq(run_cmd(cmd), 0);
    free(c);
    free(tar);
}
END_TEST

/* Labels from JSON: inspection with label_source RF_LABEL_JSON refuses the samples the loader
 * refuses, in the loader's words at the member's offset, and ringfeed-inspect --label json:PATH
 * does too (GNU tar shard). */
START_TEST(test_inspect_json_labels_as_loader)
{
    const char *texts[] = {"{\"meta\": {\"cls\": 4}}", NULL, "{\"meta\": {\"cls\": 4.5}}",
                           "{\"meta\": {\"cls\": \"4\"}}", "{\"meta\": {}}", "{\"meta\": {\"cls\": 4}",
                           " {\"x\": \"\\u00e9\", \"meta\" : {\"cls\" : 9}}\n"};
    static const char *const what[] = {
        NULL, "sample 00000001 has no label member (00000001.json)",
        "label member 00000002.json: field meta.cls (byte 17 of the member) holds \"4.5\", a "
        "number with a fraction or exponent",
        "label member 00000003.json: field meta.cls (byte 17 of the member) is a string",
        "label member 00000004.json has no field meta.cls",
        "label member 00000005.json is not valid JSON: expected ',' or '}' in an object at byte "
        "19 of the member", NULL};
    static const int32_t value[] = {4, -1, -1, -1, -1, -1, 9};
    enum { N = sizeof texts / sizeof texts[0], NBAD = 5 };
    char d[600], name[64], want[900], cmd[3000];
    snprintf(d, sizeof d, "%s/jsonlabels", g_root);
    mkdir(d, 0755);
    char *tar = rf_test_make_label_shard_ext(d, "json", texts, N);
    collected *c = calloc(1, sizeof *c);
    rf_inspect_options o;
    rf_inspect_options_init(&o);
    o.label_source = RF_LABEL_JSON;
    o.label_json_path = "meta.cls";
    rf_inspect_summary s;
    rf_inspect_summary_init(&s);
    ck_assert_int_eq(rf_shard_inspect(tar, &o, on_problem, on_sample, c, &s), RF_ELABEL);
    ck_assert_uint_eq(s.problems, NBAD);
    ck_assert_uint_eq(s.labeled, N - NBAD);
    for (uint32_t i = 0, k = 0; i < N; i++) {
        ck_assert_int_eq(c->labels[i], value[i]);
        if (!what[i])
            continue;
        snprintf(name, sizeof name, "%08u.%s", i, texts[i] ? "json" : "jpg");
        snprintf(want, sizeof want, "%s: offset %" PRIu64 ": %s", tar,
                 rf_test_member_offset(tar, name), what[i]);
        ck_assert_msg(strstr(c->problems[k], want), "\n  got  %s\n  want %s", c->problems[k],
                      want);
        k++;
    }
    o.label_json_path = "meta..cls";
    ck_assert_int_eq(rf_shard_inspect(tar, &o, NULL, NULL, NULL, &s), RF_EINVAL);

    char tools[1024];
    snprintf(tools, sizeof tools, "%.*s", (int)(strrchr(g_tool, '/') - g_tool), g_tool);
    snprintf(cmd, sizeof cmd, "%s/ringfeed-inspect --label json:meta.cls %s > %s/inspect.out",
             tools, tar, d);
    ck_assert_int_eq(run_cmd(cmd), 1);
    snprintf(cmd, sizeof cmd, "grep -c '^problem: .*00000002.json: field meta.cls' "
             "%s/inspect.out | grep -qx 1 && grep -c '^problem: ' %s/inspect.out | grep -qx %d",
             d, d, NBAD);
    ck_assert_msg(run_cmd(cmd) == 0, "ringfeed-inspect did not list %d JSON label problems",
                  NBAD);
    snprintf(cmd, sizeof cmd, "%s/ringfeed-inspect --label json: %s 2> /dev/null", tools, tar);
    ck_assert_int_eq(run_cmd(cmd), 2);
    free(c);
    free(tar);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("pack");
    TCase *tc = tcase_create("pack");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_image_list_tree);
    tcase_add_test(tc, test_pack_roundtrip);
    tcase_add_test(tc, test_pack_restart);
    tcase_add_test(tc, test_pack_sync_index);
    tcase_add_test(tc, test_pack_all_formats);
    tcase_add_test(tc, test_inspect_image_preference);
    tcase_add_test(tc, test_inspect_exif_orientation);
    tcase_add_test(tc, test_inspect_recovered);
    tcase_add_test(tc, test_gnu_tar_formats);
    tcase_add_test(tc, test_index_disagrees);
    tcase_add_test(tc, test_bad_jpeg_reported);
    tcase_add_test(tc, test_checks_agree_with_loader);
    tcase_add_test(tc, test_writer_atomic);
    tcase_add_test(tc, test_pack_write_fails);
    tcase_add_test(tc, test_pack_full_disk);
    tcase_add_test(tc, test_pack_unreadable_entries);
    tcase_add_test(tc, test_inspect_labels_as_loader);
    tcase_add_test(tc, test_inspect_json_labels_as_loader);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    g_root = rf_test_mkdtemp("pack");
    make_tree();
    make_full_tree();
    find_tool();
    return rf_test_run_suite(suite());
}
