/* test_synth.c — the dataset generator: synthesis, JPEG encoding, tar/index writing, and the
 * generator core (determinism whatever the thread count). Uses GNU tar and Python's tarfile as
 * independent readers of what we write. */
#include <check.h>
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>

#include <jpeglib.h>

#include "gen.h"
#include "synth.h"
#include "loaders/tar.h"
#include "authoring/tarwrite.h"
#include "testutil.h"
#include "ringfeed_shards.h"

/* ---- helpers ------------------------------------------------------------------------------ */

struct jerr {
    struct jpeg_error_mgr mgr;
    jmp_buf jump;
};

static void jerr_exit(j_common_ptr c)
{
    longjmp(((struct jerr *)c->err)->jump, 1);
}

/* Decode a JPEG to RGB; returns malloc'ed pixels or NULL. */
static uint8_t *decode(const uint8_t *jpg, size_t len, uint32_t *w, uint32_t *h)
{
    struct jpeg_decompress_struct d;
    struct jerr e;
    uint8_t *volatile px = NULL;
    d.err = jpeg_std_error(&e.mgr);
    e.mgr.error_exit = jerr_exit;
    if (setjmp(e.jump)) {
        jpeg_destroy_decompress(&d);
        free(px);
        return NULL;
    }
    jpeg_create_decompress(&d);
    jpeg_mem_src(&d, jpg, (unsigned long)len);
    jpeg_read_header(&d, TRUE);
    d.out_color_space = JCS_RGB;
    jpeg_start_decompress(&d);
    *w = d.output_width;
    *h = d.output_height;
    px = malloc((size_t)*w * *h * 3);
    while (d.output_scanline < d.output_height) {
        JSAMPROW row = px + (size_t)d.output_scanline * *w * 3;
        jpeg_read_scanlines(&d, &row, 1);
    }
    jpeg_finish_decompress(&d);
    jpeg_destroy_decompress(&d);
    return px;
}

/* Luminance std-dev and horizontal neighbour correlation of an RGB image. */
static void stats(const uint8_t *rgb, uint32_t w, uint32_t h, double *sd, double *corr)
{
    double s = 0, ss = 0, sxy = 0, sx = 0, sy = 0, sxx = 0, syy = 0;
    size_t n = 0, m = 0;
    for (uint32_t y = 0; y < h; y++) {
        for (uint32_t x = 0; x < w; x++) {
            const uint8_t *p = rgb + ((size_t)y * w + x) * 3;
            double l = 0.299 * p[0] + 0.587 * p[1] + 0.114 * p[2];
            s += l;
            ss += l * l;
            n++;
            if (x + 1 < w) {
                const uint8_t *q = p + 3;
                double r = 0.299 * q[0] + 0.587 * q[1] + 0.114 * q[2];
                sx += l;
                sy += r;
                sxx += l * l;
                syy += r * r;
                sxy += l * r;
                m++;
            }
        }
    }
    double mean = s / (double)n;
    *sd = sqrt(ss / (double)n - mean * mean);
    double cov = sxy / (double)m - (sx / (double)m) * (sy / (double)m);
    double vx = sxx / (double)m - (sx / (double)m) * (sx / (double)m);
    double vy = syy / (double)m - (sy / (double)m) * (sy / (double)m);
    *corr = cov / sqrt(vx * vy);
}

static int files_equal(const char *a, const char *b)
{
    size_t la, lb;
    uint8_t *pa = rf_test_read_file(a, &la), *pb = rf_test_read_file(b, &lb);
    int eq = pa && pb && la == lb && memcmp(pa, pb, la) == 0;
    free(pa);
    free(pb);
    return eq;
}

static int g_restart; /* gen_small: rf_gen_config.restart */
static int g_format;  /* gen_small: rf_gen_config.format */
static int g_trailer;  /* gen_small: rf_gen_config.trailer_bytes */

static int gen_small(const char *dir, uint32_t threads, uint64_t seed, double progressive)
{
    char pattern[1024];
    snprintf(pattern, sizeof pattern, "%s/train-%%03d.tar", dir);
    rf_gen_config c;
    rf_gen_config_init(&c);
    c.output = pattern;
    c.images = 40;
    c.per_shard = 16;
    c.classes = 7;
    c.seed = seed;
    c.threads = threads;
    c.max_side = 96;
    c.progressive_fraction = progressive;
    c.restart = g_restart;
    c.format = g_format;
    c.trailer_bytes = (uint32_t)g_trailer;
    char msg[256];
    int rc = rf_gen_run(&c, NULL, msg, sizeof msg);
    if (rc)
        fprintf(stderr, "rf_gen_run: %s\n", msg);
    return rc;
}

/* ---- synthesis ---------------------------------------------------------------------------- */

START_TEST(image_deterministic)
{
    uint32_t w = 123, h = 77;
    uint8_t *a = malloc(w * h * 3), *b = malloc(w * h * 3), *c = malloc(w * h * 3);
    rf_synth_image(42, w, h, a);
    rf_synth_image(42, w, h, b);
    rf_synth_image(43, w, h, c);
    ck_assert(memcmp(a, b, w * h * 3) == 0);
    ck_assert(memcmp(a, c, w * h * 3) != 0);
    uint8_t *j1, *j2;
    size_t l1, l2;
    ck_assert_int_eq(rf_synth_jpeg(a, w, h, 90, 0, &j1, &l1), 0);
    ck_assert_int_eq(rf_synth_jpeg(b, w, h, 90, 0, &j2, &l2), 0);
    ck_assert(l1 == l2 && memcmp(j1, j2, l1) == 0);
    free(j1);
    free(j2);
    free(a);
    free(b);
    free(c);
}
END_TEST

/* The generator's draws are splitmix64 of (seed, index): the values below were printed by the
 * generator before its mixing function moved into synth.h, so a dataset made with a given seed
 * stays the same dataset (same images, labels, progressive JPEGs) across releases. */
START_TEST(gen_draws_pinned)
{
    static const uint32_t labels[16] = {816, 714, 308, 907, 233, 167, 324, 615,
                                        641, 422, 380, 613, 919, 490, 544, 725};
    static const char progressive[] = "0100100000011010";
    ck_assert_uint_eq(rf_gen_image_seed(0, 0), 0x6fe700871f4c185cull);
    ck_assert_uint_eq(rf_gen_image_seed(42, 1000003), 0xe4cf2fb3b6a80334ull);
    for (uint64_t i = 0; i < 16; i++) {
        ck_assert_uint_eq(rf_gen_label(7, i, 1000), labels[i]);
        ck_assert_int_eq(rf_gen_progressive(7, i, 0.3), progressive[i] - '0');
    }
}
END_TEST

START_TEST(size_statistics)
{
    double sw = 0, sh = 0;
    const int n = 600;
    for (int i = 0; i < n; i++) {
        uint32_t w, h;
        rf_synth_size((uint64_t)i * 977 + 5, &w, &h);
        uint32_t l = w > h ? w : h, s = w > h ? h : w;
        ck_assert_uint_ge(l, 200);
        ck_assert_uint_le(l, 1000);
        ck_assert_uint_ge(s * 2, l); /* aspect within [1/2, 2] */
        sw += w;
        sh += h;
    }
    ck_assert(sw / n > 360 && sw / n < 450);
    ck_assert(sh / n > 310 && sh / n < 390);
}
END_TEST

/* Natural-image statistics after a JPEG round trip: not flat, not white noise. */
START_TEST(images_natural)
{
    for (uint64_t seed = 1; seed <= 12; seed++) {
        uint32_t w, h, dw, dh;
        rf_synth_size(seed, &w, &h);
        uint8_t *rgb = malloc((size_t)w * h * 3), *jpg;
        size_t len;
        rf_synth_image(seed, w, h, rgb);
        ck_assert_int_eq(rf_synth_jpeg(rgb, w, h, 90, (int)(seed & 1), &jpg, &len), 0);
        uint8_t *px = decode(jpg, len, &dw, &dh);
        ck_assert_ptr_nonnull(px);
        ck_assert_uint_eq(dw, w);
        ck_assert_uint_eq(dh, h);
        double sd, corr;
        stats(px, w, h, &sd, &corr);
        ck_assert_msg(sd > 15.0, "seed %llu: flat image (sd %.1f)", (unsigned long long)seed, sd);
        ck_assert_msg(corr > 0.5, "seed %llu: noise-like image (corr %.2f)",
                      (unsigned long long)seed, corr);
        free(px);
        free(jpg);
        free(rgb);
    }
}
END_TEST

/* ---- tar writing -------------------------------------------------------------------------- */

START_TEST(tar_long_names)
{
    const char *dir = rf_test_mkdtemp("synth-tar");
    char tar[1024], idx[1024], name[400];
    for (int fmt = 0; fmt < 2; fmt++) {
        snprintf(tar, sizeof tar, "%s/t%d.tar", dir, fmt);
        snprintf(idx, sizeof idx, "%s/t%d.idx", dir, fmt);
        rf_tarw *w = rf_tarw_open(tar, idx, fmt, NULL);
        ck_assert_ptr_nonnull(w);
        memset(name, 'd', 180);
        strcpy(name + 180, "/k0001.jpg");
        ck_assert_int_eq(rf_tarw_begin_sample(w), 0);
        ck_assert_int_eq(rf_tarw_add(w, name, "abc", 3), 0);
        ck_assert_int_eq(rf_tarw_add(w, "k0001.cls", "5", 1), 0);
        ck_assert_int_eq(rf_tarw_add(w, "bad name.jpg", "x", 1), -EINVAL);
        ck_assert_int_eq(rf_tarw_close(w, NULL), 0);
        /* GNU tar lists both members with the full long name. */
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "tar -tf '%s' | grep -q '^%s$'", tar, name);
        ck_assert_msg(system(cmd) == 0, "tar does not list the long name (format %d)", fmt);
        snprintf(cmd, sizeof cmd,
                 "python3 -c \"import tarfile,sys; t=tarfile.open('%s'); m=t.getmembers(); "
                 "sys.exit(not (len(m)==2 and m[0].name=='%s' and t.extractfile(m[0]).read()==b'abc' "
                 "and m[0].offset==0))\"",
                 tar, name);
        ck_assert_msg(system(cmd) == 0, "python tarfile disagrees (format %d)", fmt);
    }
}
END_TEST

/* Check every index line against the tar: the header at each offset names the member and
 * holds its size; Python's tarfile sees the same offsets and sizes. */
static void check_index(const char *tar, const char *idx, uint32_t expect_samples)
{
    size_t tl, il;
    uint8_t *t = rf_test_read_file(tar, &tl);
    char *ix = (char *)rf_test_read_file(idx, &il);
    ck_assert_ptr_nonnull(t);
    ck_assert_ptr_nonnull(ix);
    ix = realloc(ix, il + 1);
    ix[il] = '\0';
    unsigned samples;
    ck_assert_int_eq(sscanf(ix, "v1.2 %u", &samples), 1);
    ck_assert_uint_eq(samples, expect_samples);
    char *save, *line = strtok_r(ix, "\n", &save);
    unsigned lines = 0;
    while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
        lines++;
        char ext[16], name[256];
        unsigned long long off, size;
        int used, pos = 0, members = 0;
        while (sscanf(line + pos, "%15s %llu %llu %255s%n", ext, &off, &size, name, &used) == 4) {
            pos += used;
            members++;
            ck_assert(off + 512 + size <= tl);
            ck_assert(strncmp((const char *)t + off, name, 100) == 0);
            ck_assert_uint_eq(strtoull((const char *)t + off + 124, NULL, 8), size);
            ck_assert_str_eq(strrchr(name, '.') + 1, ext);
        }
        ck_assert_int_eq(members, 2);
    }
    ck_assert_uint_eq(lines, samples);
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "python3 -c \"import tarfile,sys\n"
             "t=tarfile.open('%s'); got=[(m.offset,m.size,m.name) for m in t.getmembers()]\n"
             "want=[]\n"
             "for l in open('%s').read().split(chr(10))[1:]:\n"
             "  f=l.split()\n"
             "  want+=[(int(f[i+1]),int(f[i+2]),f[i+3]) for i in range(0,len(f),4)]\n"
             "sys.exit(got!=want)\"",
             tar, idx);
    ck_assert_msg(system(cmd) == 0, "python tarfile offsets differ from %s", idx);
    free(t);
    free(ix);
}

/* ---- the generator ------------------------------------------------------------------------ */

START_TEST(gen_threads_identical)
{
    const char *d1 = rf_test_mkdtemp("synth-g1"), *d2 = rf_test_mkdtemp("synth-g3");
    ck_assert_int_eq(gen_small(d1, 1, 9, 0.3), 0);
    ck_assert_int_eq(gen_small(d2, 3, 9, 0.3), 0);
    for (int s = 0; s < 3; s++) {
        char a[1024], b[1024];
        snprintf(a, sizeof a, "%s/train-%03d.tar", d1, s);
        snprintf(b, sizeof b, "%s/train-%03d.tar", d2, s);
        ck_assert_msg(files_equal(a, b), "shard %d differs between 1 and 3 threads", s);
        snprintf(a, sizeof a, "%s/train-%03d.idx", d1, s);
        snprintf(b, sizeof b, "%s/train-%03d.idx", d2, s);
        ck_assert(files_equal(a, b));
    }
    char extra[1024];
    snprintf(extra, sizeof extra, "%s/train-003.tar", d1);
    ck_assert(access(extra, F_OK) != 0); /* 40 samples at 16 per shard: 3 shards */
}
END_TEST

START_TEST(gen_readable)
{
    const char *d = rf_test_mkdtemp("synth-read");
    ck_assert_int_eq(gen_small(d, 2, 3, 0.5), 0);
    char tar[1024], idx[1024], cmd[2048];
    for (int s = 0; s < 3; s++) {
        snprintf(tar, sizeof tar, "%s/train-%03d.tar", d, s);
        snprintf(idx, sizeof idx, "%s/train-%03d.idx", d, s);
        snprintf(cmd, sizeof cmd, "tar -tvf '%s' > /dev/null", tar);
        ck_assert_msg(system(cmd) == 0, "GNU tar rejects %s", tar);
        check_index(tar, idx, s < 2 ? 16 : 8);
    }
    /* Members pair up as KEY.jpg, KEY.cls with the label of the sample. */
    snprintf(tar, sizeof tar, "%s/train-001.tar", d);
    snprintf(cmd, sizeof cmd,
             "python3 -c \"import tarfile,sys\n"
             "t=tarfile.open('%s'); m=t.getmembers()\n"
             "ok=len(m)==32 and m[0].name=='00000016.jpg' and m[1].name=='00000016.cls'\n"
             "ok=ok and t.extractfile(m[0]).read(2)==bytes([255,216])\n"
             "ok=ok and 0<=int(t.extractfile(m[1]).read())<7\n"
             "sys.exit(not ok)\"",
             tar);
    ck_assert(system(cmd) == 0);
    /* Labels and sizes as gen.h documents them. */
    size_t len;
    uint8_t *t = rf_test_read_file(tar, &len);
    ck_assert_ptr_nonnull(t);
    uint64_t jsize = strtoull((const char *)t + 124, NULL, 8);
    const uint8_t *cls_hdr = t + RF_TAR_BLOCK + rf_tar_round_block(jsize);
    ck_assert_str_eq((const char *)cls_hdr, "00000016.cls");
    char label[16] = {0};
    memcpy(label, cls_hdr + 512, strtoull((const char *)cls_hdr + 124, NULL, 8));
    ck_assert_uint_eq(strtoul(label, NULL, 10), rf_gen_label(3, 16, 7));
    uint32_t w, h, ew, eh;
    uint8_t *px = decode(t + 512, jsize, &w, &h);
    ck_assert_ptr_nonnull(px);
    rf_gen_size(3, 16, 0, 96, &ew, &eh);
    ck_assert_uint_eq(w, ew);
    ck_assert_uint_eq(h, eh);
    ck_assert_uint_le(w > h ? w : h, 96);
    free(px);
    free(t);
}
END_TEST

/* --format mix: samples cycle KEY.jpg, KEY.png, KEY.webp by index (each holding that format,
 * JPEGs still restart-marked with --restart), the same bytes at any thread count, and every
 * image passes inspection with the loader's decoders. */
START_TEST(gen_format_mix)
{
    const char *d1 = rf_test_mkdtemp("synth-mix1"), *d2 = rf_test_mkdtemp("synth-mix2");
    g_format = RF_GEN_MIX;
    g_restart = 1;
    ck_assert_int_eq(gen_small(d1, 1, 5, 0), 0);
    ck_assert_int_eq(gen_small(d2, 3, 5, 0), 0);
    char cmd[4096], tar[1024];
    snprintf(cmd, sizeof cmd, "cmp -s %s/train-001.tar %s/train-001.tar", d1, d2);
    ck_assert(system(cmd) == 0);
    snprintf(cmd, sizeof cmd,
             "python3 -c \"import tarfile,sys\n"
             "t=tarfile.open('%s/train-001.tar'); m=t.getmembers()[0::2]\n"
             "magic={'jpg':bytes([255,216]),'png':bytes([137,80]),'webp':b'RI'}\n"
             "ext=['jpg','png','webp']\n"
             "ok=len(m)==16 and all(x.name==f'{16+i:08d}.'+ext[(16+i)%%3] and "
             "t.extractfile(x).read(2)==magic[ext[(16+i)%%3]] for i,x in enumerate(m))\n"
             "sys.exit(not ok)\"", d1);
    ck_assert(system(cmd) == 0);
    for (int s = 0; s < 3; s++) {
        snprintf(tar, sizeof tar, "%s/train-%03d.tar", d1, s);
        rf_inspect_summary sum;
        rf_inspect_summary_init(&sum);
        ck_assert_int_eq(rf_shard_inspect(tar, NULL, NULL, NULL, NULL, &sum), 0);
        ck_assert_uint_eq(sum.problems, 0);
        ck_assert_uint_eq(sum.samples, s < 2 ? 16 : 8);
    }
}
END_TEST

/* gen_small's plain run and the run `vary` changes (seed 5, progressive 0.5): each of the first
 * 16 samples' image members (KEY.jpg then KEY.cls) of both, side by side, to check. */
typedef void (*image_pair_fn)(int m, const uint8_t *a, uint64_t la, const uint8_t *b,
                              uint64_t lb);

static void each_image_pair(int *vary, int value, image_pair_fn check)
{
    const char *d1 = rf_test_mkdtemp("synth-plain"), *d2 = rf_test_mkdtemp("synth-varied");
    ck_assert_int_eq(gen_small(d1, 2, 5, 0.5), 0);
    *vary = value;
    ck_assert_int_eq(gen_small(d2, 2, 5, 0.5), 0);
    *vary = 0;
    char a[1024], b[1024];
    snprintf(a, sizeof a, "%s/train-000.tar", d1);
    snprintf(b, sizeof b, "%s/train-000.tar", d2);
    size_t la, lb;
    uint8_t *ta = rf_test_read_file(a, &la), *tb = rf_test_read_file(b, &lb);
    ck_assert(ta && tb);
    size_t oa = 0, ob = 0;
    for (int m = 0; m < 16; m++) {
        check(m, ta + oa + 512, strtoull((const char *)ta + oa + 124, NULL, 8), tb + ob + 512,
              strtoull((const char *)tb + ob + 124, NULL, 8));
        for (int k = 0; k < 2; k++) { /* past the .jpg and the .cls member */
            oa += RF_TAR_BLOCK + rf_tar_round_block(strtoull((const char *)ta + oa + 124, NULL, 8));
            ob += RF_TAR_BLOCK + rf_tar_round_block(strtoull((const char *)tb + ob + 124, NULL, 8));
        }
    }
    free(ta), free(tb);
}

static void same_pixels_with_dri(int m, const uint8_t *pa, uint64_t ja, const uint8_t *pb,
                                 uint64_t jb)
{
    int dri = 0;
    for (uint64_t i = 2; i + 1 < jb && !(pb[i] == 0xFF && pb[i + 1] == 0xDA); i++)
        dri |= pb[i] == 0xFF && pb[i + 1] == 0xDD;
    ck_assert_msg(dri, "sample %d has no DRI marker", m);
    uint32_t wa, ha, wb, hb;
    uint8_t *xa = decode(pa, ja, &wa, &ha), *xb = decode(pb, jb, &wb, &hb);
    ck_assert(xa && xb && wa == wb && ha == hb);
    ck_assert_int_eq(memcmp(xa, xb, (size_t)wa * ha * 3), 0);
    free(xa), free(xb);
}

/* --restart: the same images (pixel for pixel), now with a DRI marker and baseline. */
START_TEST(gen_restart_same_pixels) { each_image_pair(&g_restart, 1, same_pixels_with_dri); }
END_TEST

static void same_bytes_then_trailer(int m, const uint8_t *pa, uint64_t ja, const uint8_t *pb,
                                    uint64_t jb)
{
    ck_assert_msg(jb == ja + 3000, "sample %d: %llu bytes, want %llu", m,
                  (unsigned long long)jb, (unsigned long long)ja + 3000);
    ck_assert_int_eq(memcmp(pa, pb, ja), 0);
    ck_assert(pb[ja] == 0xFF && pb[ja + 1] == 0xD8);
}

/* --trailer N: each JPEG is the plain run's file byte for byte, then N bytes starting 0xFF 0xD8
 * (as a camera's preview or gain map does), so its pixels are the same. */
START_TEST(gen_trailer_appended) { each_image_pair(&g_trailer, 3000, same_bytes_then_trailer); }
END_TEST

/* Defaults, then `images` images of at most max_side px into d/s-%02d.tar (pattern holds the
 * pattern, which must outlive the config). */
static void gen_config(rf_gen_config *c, char *pattern, size_t cap, const char *d,
                       uint64_t images, uint32_t max_side)
{
    snprintf(pattern, cap, "%s/s-%%02d.tar", d);
    rf_gen_config_init(c);
    c->output = pattern;
    c->images = images;
    c->max_side = max_side;
}

START_TEST(gen_shard_bytes)
{
    const char *d = rf_test_mkdtemp("synth-bytes");
    char pattern[1024], tar[1024];
    rf_gen_config c;
    gen_config(&c, pattern, sizeof pattern, d, 30, 120);
    c.shard_bytes = 64 * 1024;
    c.write_index = 0;
    rf_gen_stats st;
    ck_assert_int_eq(rf_gen_run(&c, &st, NULL, 0), 0);
    ck_assert_uint_eq(st.images, 30);
    ck_assert_uint_ge(st.shards, 2);
    uint64_t total = 0;
    for (uint64_t s = 0; s < st.shards; s++) {
        snprintf(tar, sizeof tar, "%s/s-%02d.tar", d, (int)s);
        size_t len;
        uint8_t *t = rf_test_read_file(tar, &len);
        ck_assert_ptr_nonnull(t);
        ck_assert_uint_le(len, 64 * 1024);
        total += len;
        free(t);
    }
    ck_assert_uint_eq(total, st.bytes);
    snprintf(tar, sizeof tar, "%s/s-00.idx", d);
    ck_assert(access(tar, F_OK) != 0);
    c.output = "no-conversion.tar";
    ck_assert_int_eq(rf_gen_run(&c, NULL, NULL, 0), -EINVAL);
}
END_TEST

/* Labels go into the shard as int32_t (rf_shard_writer_add), and the tar format is one of
 * ringfeed_shards.h's two: a config outside either is refused before anything is written. */
START_TEST(gen_config_limits)
{
    const char *d = rf_test_mkdtemp("synth-limits");
    char pattern[1024], msg[512];
    rf_gen_config c;
    gen_config(&c, pattern, sizeof pattern, d, 4, 64);
    c.classes = 2147483648u;
    ck_assert_int_eq(rf_gen_run(&c, NULL, msg, sizeof msg), -EINVAL);
    ck_assert_msg(strstr(msg, "classes <= 2147483647"), "%s", msg);
    c.classes = 2147483647u;
    c.tar_format = 2;
    ck_assert_int_eq(rf_gen_run(&c, NULL, msg, sizeof msg), -EINVAL);
    ck_assert_msg(strstr(msg, "tar format pax or gnu"), "%s", msg);
    c.tar_format = RF_SHARD_PAX;
    c.trailer_bytes = GEN_TRAILER_MAX + 1;
    ck_assert_int_eq(rf_gen_run(&c, NULL, msg, sizeof msg), -EINVAL);
    ck_assert_msg(strstr(msg, "trailer <= 16777216 bytes"), "%s", msg);
    c.trailer_bytes = 0;
    char *ls = rf_test_list_dir(d);
    ck_assert_str_eq(ls, "");
    free(ls);
    c.tar_format = RF_SHARD_GNU;
    ck_assert_int_eq(rf_gen_run(&c, NULL, msg, sizeof msg), 0);
    ck_assert_str_eq((ls = rf_test_list_dir(d)), "s-00.idx\ns-00.tar\n");
    free(ls);
}
END_TEST

static int stop_after_6(void *ctx, const rf_gen_stats *st)
{
    (void)ctx;
    return st->images == 6;
}

/* A run that stops in the middle of a shard (cancelled, or a write that fails: EFBIG past a
 * file-size limit) gives that shard up: the shards before it stay complete with their indexes,
 * and no file of the unfinished one is left, not even a temporary. */
START_TEST(gen_stopped_leaves_no_partial_shard)
{
    const char *d = rf_test_mkdtemp("synth-stop");
    char pattern[1024], msg[512];
    rf_gen_config c;
    gen_config(&c, pattern, sizeof pattern, d, 12, 96);
    c.per_shard = 4;
    c.threads = 2;
    c.progress = stop_after_6;
    ck_assert_int_eq(rf_gen_run(&c, NULL, msg, sizeof msg), -ECANCELED);
    char *ls = rf_test_list_dir(d);
    ck_assert_str_eq(ls, "s-00.idx\ns-00.tar\n");
    free(ls);
    char tar[1100], idx[1100];
    snprintf(tar, sizeof tar, "%s/s-00.tar", d);
    snprintf(idx, sizeof idx, "%s/s-00.idx", d);
    check_index(tar, idx, 4);

    c.progress = NULL;
    c.per_shard = 6;
    c.max_side = 400; /* six such samples pass 128 KiB */
    ck_assert_int_eq(rf_test_limit_file_size(128u << 10), 0);
    int rc = rf_gen_run(&c, NULL, msg, sizeof msg);
    ck_assert_int_eq(rf_test_limit_file_size(0), 0);
    ck_assert_int_eq(rc, -EFBIG);
    ck_assert_msg(strstr(msg, tar) && strstr(msg, "EFBIG"), "%s", msg); /* s-00.tar again */
    ck_assert_str_eq((ls = rf_test_list_dir(d)), "s-00.idx\ns-00.tar\n");
    free(ls);
    check_index(tar, idx, 4); /* the earlier shard of that name, untouched */
}
END_TEST

START_TEST(fixture_shards)
{
    const char *d = rf_test_mkdtemp("synth-fixture");
    ck_assert_int_eq(rf_test_make_shards(d, 2, 5, 3, 11, 1, 64), 0);
    char tar[1024], idx[1024];
    snprintf(tar, sizeof tar, "%s/shard-0001.tar", d);
    snprintf(idx, sizeof idx, "%s/shard-0001.idx", d);
    check_index(tar, idx, 5);
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "python3 -c \"import tarfile,sys\n"
             "t=tarfile.open('%s'); m=t.getmembers()\n"
             "sys.exit(not (m[0].name=='00000005.jpg' and t.extractfile(m[1]).read()==b'2'))\"",
             tar);
    ck_assert(system(cmd) == 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("synth");
    TCase *t = tcase_create("synth");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, image_deterministic);
    tcase_add_test(t, gen_draws_pinned);
    tcase_add_test(t, size_statistics);
    tcase_add_test(t, images_natural);
    tcase_add_test(t, tar_long_names);
    tcase_add_test(t, gen_threads_identical);
    tcase_add_test(t, gen_readable);
    tcase_add_test(t, gen_format_mix);
    tcase_add_test(t, gen_shard_bytes);
    tcase_add_test(t, gen_config_limits);
    tcase_add_test(t, gen_restart_same_pixels);
    tcase_add_test(t, gen_trailer_appended);
    tcase_add_test(t, fixture_shards);
    tcase_add_test(t, gen_stopped_leaves_no_partial_shard);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return rf_test_run_suite(suite());
}
