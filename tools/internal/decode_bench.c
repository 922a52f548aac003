/* ringfeed-decode-bench — micro-benchmark of the decode stage alone (one thread, or --threads N
 * independent threads decoding the same images at once: the scaling ceiling of the machine's
 * cores with no pipeline around them).
 *
 * Unlike the other tools this one includes INTERNAL headers (src/base/common.h,
 * src/decode/decode.h, src/decode/decode_hooks.h, src/decode/jpeg_restart.h, loaders/tar.h,
 * src/backend/gpujpeg.h for --packets): it
 * benchmarks an internal stage (rf_decode_transform) and its experiment flags
 * (rf_decoder_set_flags), which the public API does not expose. That is why it lives in
 * tools/internal/ (README.md there), apart from the tools built on include/. It is not
 * installed.
 *
 * Loads every JPEG of one or more tar shards (or *.jpg files of a directory) into memory, then
 * times, on one thread, passes over all of them:
 *   ref          plain libjpeg-turbo full decode to RGB with every default (the reference)
 *   rrc          RandomResizedCrop(size) via rf_decode_transform (seed = image index)
 *   rrc-decode   the same rows/columns decoded, resize skipped (RF_DECODE_NO_RESIZE)
 *   center       Resize(size*256/224) + CenterCrop(size)
 *   center-decode  the same without the resize
 * --packets times instead, per image on one thread, what a decode thread does for each engine
 * of gpu_decode (RandomResizedCrop(size), seed = image index): (a) today's CPU decode
 * (rf_decode_transform, DCT scaling as --max-denom allows), (b) the walker and plain packet
 * (rf_decode_packet on the files as they are), (c) the restart packet (the same on a
 * restart-marked copy, --restart's choice), (e) the engine packet (hw_decode_percent: the header,
 * and for a file without restart markers the check of its Huffman codes); medians of --reps
 * passes, the ratio a/b (how many CPU decode threads one walker thread replaces) and the mean
 * packet bytes (the copy's cost).
 * By default the packets' decoder may DCT-scale, as the balancing scheduler runs it, so the
 * crops it would scale are CPU decodes inside (b) and (c); --full-scale turns scaling off for
 * them, as gpu_decode does, and every crop the kernels take is then a packet.
 * Wall times are best of --reps passes (the machine is shared and noisy). For repeatable
 * numbers run one mode under callgrind and count only the timed pass:
 *   valgrind --tool=callgrind --toggle-collect=run_pass ringfeed-decode-bench --mode rrc \
 *            --reps 1 --limit 200 data/train/train-000000.tar
 * and divide the Ir total by the image count printed. */
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jpeglib.h>

#include "ringfeed.h"
#include "base/common.h"
#include "decode/decode.h"
#include "decode/decode_hooks.h"
#include "decode/jpeg_restart.h"
#include "loaders/sync_index.h"
#include "backend/gpujpeg.h"
#include "loaders/tar.h"

typedef struct image {
    uint8_t *data;
    size_t len;
} image;

typedef struct images {
    image *v;
    size_t n, cap;
    size_t limit;
} images;

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcasecmp(s + a - b, suf) == 0;
}

static int push(images *im, uint8_t *data, size_t len)
{
    if (im->n == im->cap) {
        size_t cap = im->cap ? im->cap * 2 : 256;
        image *v = realloc(im->v, cap * sizeof *v);
        if (!v)
            return -1;
        im->v = v, im->cap = cap;
    }
    im->v[im->n++] = (image){data, len};
    return 0;
}

static void images_free(images *im)
{
    for (size_t i = 0; i < im->n; i++)
        free(im->v[i].data);
    free(im->v);
}

static uint8_t *read_at(int fd, uint64_t off, size_t len)
{
    uint8_t *p = malloc(len ? len : 1);
    size_t got = 0;
    while (p && got < len) {
        ssize_t r = pread(fd, p + got, len - got, (off_t)(off + got));
        if (r <= 0) {
            free(p);
            return NULL;
        }
        got += (size_t)r;
    }
    return p;
}

static int load_tar(images *im, const char *path)
{
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        perror(path);
        return -1;
    }
    rf_tar_scanner sc;
    rf_err e = {0};
    rf_tar_member *m = malloc(sizeof *m);
    if (!m || rf_tar_scanner_init(&sc, fd, path, (uint64_t)st.st_size, &e) != 0) {
        fprintf(stderr, "%s: %s\n", path, e.msg);
        return -1;
    }
    int rc;
    while (im->n < im->limit && (rc = rf_tar_next(&sc, m, &e)) > 0) {
        if (m->type != RF_TAR_FILE || !(ends_with(m->name, ".jpg") || ends_with(m->name, ".jpeg")))
            continue;
        uint8_t *p = read_at(fd, m->data_offset, (size_t)m->size);
        if (!p || push(im, p, (size_t)m->size))
            return -1;
    }
    rf_tar_scanner_free(&sc);
    free(m);
    close(fd);
    return 0;
}

static int load_dir(images *im, const char *path)
{
    DIR *dir = opendir(path);
    if (!dir) {
        perror(path);
        return -1;
    }
    struct dirent *de;
    char full[4096];
    while (im->n < im->limit && (de = readdir(dir))) {
        if (!(ends_with(de->d_name, ".jpg") || ends_with(de->d_name, ".jpeg")))
            continue;
        snprintf(full, sizeof full, "%s/%s", path, de->d_name);
        int fd = open(full, O_RDONLY);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) != 0)
            continue;
        uint8_t *p = read_at(fd, 0, (size_t)st.st_size);
        close(fd);
        if (!p || push(im, p, (size_t)st.st_size))
            return -1;
    }
    closedir(dir);
    return 0;
}

/* ---- the passes -------------------------------------------------------------------------- */

enum mode { M_REF, M_RRC, M_RRC_DECODE, M_CENTER, M_CENTER_DECODE, M_COUNT };
static const char *const MODE_NAMES[M_COUNT] = {"ref", "rrc", "rrc-decode", "center",
                                                "center-decode"};

typedef struct bench {
    const images *im;
    rf_decoder *dec;
    struct jpeg_decompress_struct ref;
    struct jpeg_error_mgr ref_err;
    uint8_t *ref_buf;
    size_t ref_cap;
    uint8_t *out;
    uint32_t size, flags;
    uint64_t pixels_in, scaled[9], regions;
} bench;

/* Plain libjpeg, defaults only, RGB out, whole image (what "1 core of libjpeg-turbo" means). */
static int ref_one(bench *b, const image *img)
{
    struct jpeg_decompress_struct *d = &b->ref;
    jpeg_mem_src(d, img->data, (unsigned long)img->len);
    jpeg_read_header(d, TRUE);
    d->out_color_space = JCS_RGB;
    jpeg_start_decompress(d);
    size_t stride = (size_t)d->output_width * 3, need = stride * d->output_height;
    if (need > b->ref_cap) {
        free(b->ref_buf);
        if (!(b->ref_buf = malloc(need)))
            return -1;
        b->ref_cap = need;
    }
    while (d->output_scanline < d->output_height) {
        JSAMPROW row = b->ref_buf + (size_t)d->output_scanline * stride;
        jpeg_read_scanlines(d, &row, 1);
    }
    b->pixels_in += (uint64_t)d->output_width * d->output_height;
    jpeg_finish_decompress(d);
    return 0;
}

/* torchvision's RandomResizedCrop(size) + horizontal flip, NHWC. */
static rf_transform rrc_transform(uint32_t size)
{
    return (rf_transform){.crop = RF_CROP_RANDOM, .height = size, .width = size,
                          .layout = RF_LAYOUT_NHWC, .scale_min = 0.08f, .scale_max = 1.0f,
                          .ratio_min = 3.0f / 4, .ratio_max = 4.0f / 3, .flip_prob = 0.5f};
}

/* The timed pass (callgrind: --toggle-collect=run_pass). */
__attribute__((noinline)) static int run_pass(bench *b, enum mode m)
{
    rf_transform t = rrc_transform(b->size);
    if (m == M_CENTER || m == M_CENTER_DECODE) {
        t.crop = RF_CROP_CENTER;
        t.flip_prob = -1;
    }
    rf_decoder_set_flags(b->dec, b->flags | ((m == M_RRC_DECODE || m == M_CENTER_DECODE)
                                                 ? RF_DECODE_NO_RESIZE
                                                 : 0));
    for (size_t i = 0; i < b->im->n; i++) {
        const image *img = &b->im->v[i];
        if (m == M_REF) {
            if (ref_one(b, img))
                return -1;
            continue;
        }
        rf_err e = {0};
        rf_decode_info info;
        if (rf_decode_transform(b->dec, img->data, img->len, &t, rf_mix64(i), b->out, &info,
                                &e)) {
            fprintf(stderr, "image %zu: %s\n", i, e.msg);
            return -1;
        }
        b->pixels_in += (uint64_t)info.width * info.height;
        b->scaled[info.scale_denom]++;
        b->regions += info.region;
    }
    return 0;
}

/* --restart: the packer's lossless rewrite, applied in memory (interval UINT32_MAX: a row). */
static int transcode_all(images *im, uint32_t interval)
{
    size_t before = 0, after = 0;
    /* one interval per MCU row needs each image's row width */
    rf_decoder *d = interval == UINT32_MAX ? rf_decoder_create(NULL) : NULL;
    if (interval == UINT32_MAX && !d)
        return -1;
    for (size_t i = 0; i < im->n; i++) {
        uint32_t iv = interval;
        rf_jpeg_info ji;
        rf_err e = {0};
        if (d && rf_jpeg_probe(d, im->v[i].data, im->v[i].len, &ji, &e) == 0)
            iv = (ji.width + 15) / 16; /* 4:2:0 MCUs */
        uint8_t *out;
        size_t len;
        if (e.code ||
            rf_jpeg_restart_transcode(im->v[i].data, im->v[i].len, iv, 0, &out, &len, &e)) {
            fprintf(stderr, "image %zu: %s\n", i, e.msg);
            rf_decoder_destroy(d);
            return -1;
        }
        before += im->v[i].len, after += len;
        free(im->v[i].data);
        im->v[i] = (image){out, len};
    }
    rf_decoder_destroy(d);
    printf("restart markers added: %.2f%% larger\n", 100.0 * ((double)after / before - 1));
    return 0;
}

/* ---- --packets ---------------------------------------------------------------------------- */

typedef struct pk_place {
    uint8_t *pkt, *px;
    size_t cap;
} pk_place;

static uint8_t *pk_place_fn(void *ctx, size_t bytes, int packet)
{
    pk_place *p = ctx;
    return !packet ? p->px : bytes <= p->cap ? p->pkt : NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sync-point entries of every image, for mode (d); entries own their points. */
static rf_sync_entry *pk_sync_entries(rf_decoder *d, const images *im, double *sec)
{
    rf_sync_entry *v = calloc(im->n ? im->n : 1, sizeof *v);
    uint64_t t0 = rf_now_ns();
    for (size_t i = 0; v && i < im->n; i++) {
        rf_err e = {0};
        if (rf_decode_sync_entry(d, im->v[i].data, im->v[i].len, &v[i], &e))
            return free(v), NULL;
        uint8_t *p = malloc((size_t)v[i].npoints * RF_SYNC_POINT + 1);
        if (!p)
            return free(v), NULL;
        memcpy(p, v[i].points, (size_t)v[i].npoints * RF_SYNC_POINT);
        v[i].points = p;
    }
    *sec = (rf_now_ns() - t0) * 1e-9;
    return v;
}

/* One pass of mode 0 (CPU decode), 1 (packets), 2 (engine packets) over im, with sync-point
 * entries when ents is set: seconds, packets and their bytes. */
static int pk_pass(rf_decoder *d, const images *im, int packets, const rf_sync_entry *ents,
                   uint32_t size, pk_place *pl, double *sec, uint64_t *npk, uint64_t *pk_bytes)
{
    rf_transform t = rrc_transform(size);
    uint64_t t0 = rf_now_ns();
    *npk = *pk_bytes = 0;
    for (size_t i = 0; i < im->n; i++) {
        rf_err e = {0};
        uint32_t bytes = 0;
        if (ents)
            rf_decoder_set_sync(d, &ents[i]);
        int rc = packets ? rf_decode_packet(d, im->v[i].data, im->v[i].len, &t, NULL, rf_mix64(i),
                                            packets == 2, pk_place_fn, pl, &bytes, NULL, &e)
                         : rf_decode_transform(d, im->v[i].data, im->v[i].len, &t, rf_mix64(i),
                                               pl->px, NULL, &e);
        if (ents)
            rf_decoder_sync_result(d);
        if (rc) {
            fprintf(stderr, "image %zu: %s\n", i, e.msg);
            return -1;
        }
        *npk += bytes > 0, *pk_bytes += bytes;
    }
    *sec = (rf_now_ns() - t0) * 1e-9;
    return 0;
}

/* The median img/s of reps passes of one mode; prints its line. */
static double pk_mode(const char *name, rf_decoder *d, const images *im, int packets,
                      const rf_sync_entry *ents, uint32_t size, uint32_t reps, pk_place *pl)
{
    double *t = calloc(reps, sizeof *t);
    uint64_t npk = 0, bytes = 0;
    for (uint32_t r = 0; t && r < reps; r++)
        if (pk_pass(d, im, packets, ents, size, pl, &t[r], &npk, &bytes)) {
            free(t);
            return -1;
        }
    if (!t)
        return -1;
    qsort(t, reps, sizeof *t, cmp_double);
    double med = reps % 2 ? t[reps / 2] : (t[reps / 2 - 1] + t[reps / 2]) / 2;
    printf("%-22s %9.1f img/s per thread (median of %u; min %.1f, max %.1f)", name, im->n / med,
           reps, im->n / t[reps - 1], im->n / t[0]);
    if (packets)
        printf("  packets %llu of %zu, %.1f KB mean", (unsigned long long)npk, im->n,
               npk ? bytes / 1024.0 / npk : 0.0);
    printf("\n");
    free(t);
    return im->n / med;
}

static int run_packets(images *im, uint32_t size, uint32_t reps, uint32_t max_denom,
                       uint32_t restart, int full_scale)
{
    rf_decoder *cpu = rf_decoder_create(NULL), *gpu = rf_decoder_create(NULL);
    pk_place pl = {malloc(16u << 20), malloc((size_t)size * size * 3), 16u << 20};
    if (!cpu || !gpu || !pl.pkt || !pl.px)
        return 1;
    rf_decoder_set_max_scale_denom(cpu, max_denom);
    if (full_scale)
        rf_decoder_set_max_scale_denom(gpu, 1);
    double a = pk_mode("(a) CPU decode", cpu, im, 0, NULL, size, reps, &pl);
    double b = pk_mode("(b) walker + plain", gpu, im, 1, NULL, size, reps, &pl);
    double en = pk_mode("(e) engine packet", gpu, im, 2, NULL, size, reps, &pl);
    double build_s = 0;
    rf_sync_entry *ents = pk_sync_entries(gpu, im, &build_s);
    if (ents)
        printf("%-22s %9.1f img/s per thread (one pass)\n", "(s) sync-point build",
               im->n / build_s);
    double dd = ents ? pk_mode("(d) indexed plain", gpu, im, 1, ents, size, reps, &pl) : -1;
    for (size_t i = 0; ents && i < im->n; i++)
        free((void *)ents[i].points);
    free(ents);
    int rc = a < 0 || b < 0 || en < 0 || dd < 0 || transcode_all(im, restart);
    double c = rc ? -1 : pk_mode("(c) restart packet", gpu, im, 1, NULL, size, reps, &pl);
    if (c > 0)
        printf("ratio a/b %.2f (CPU decode time / walker time); a/d %.2f; a/c %.2f; a/e %.2f\n",
               b / a, dd / a, c / a, en / a);
    rf_decoder_destroy(cpu), rf_decoder_destroy(gpu);
    free(pl.pkt), free(pl.px);
    return rc || c < 0;
}

/* --threads N: N decoders run RandomResizedCrop over the set `reps` x N times in all, started
 * together. Each takes the next image from one shared counter, as the pipeline's decode threads
 * take the next sample, so a thread the scheduler delays does less work instead of holding the
 * wall time (with a fixed share each, the slowest thread set the figure: 16 threads on 16 CPUs
 * then "scaled" worse than the pipeline did).
 *
 * --spin: the same harness, but each work item is a fixed integer loop (eight independent
 * multiply chains, which fill the multiplier) and touches no memory. Its speed-up over one
 * thread is what the cores give any CPU-bound work: all-core clocks, and how much CPUs that share
 * a physical core slow each other. A decode ceiling below it is caches and memory. */
#define SPIN_STEPS (1u << 18)

typedef struct par_arg {
    const images *im;
    uint32_t size, flags;
    uint64_t total;          /* work items in all */
    _Atomic uint64_t *next;  /* the shared counter */
    int spin;
    uint64_t sink;           /* the spin loop's result, stored so the loop is not dropped */
    pthread_barrier_t *go;
    int rc;
} par_arg;

static uint64_t spin_item(uint64_t seed)
{
    uint64_t x[8];
    for (int k = 0; k < 8; k++)
        x[k] = seed + (uint64_t)k * 0x9E3779B97F4A7C15ull;
    for (uint32_t s = 0; s < SPIN_STEPS; s++)
        for (int k = 0; k < 8; k++)
            x[k] = x[k] * 0xD1342543DE82EF95ull + 1;
    return x[0] ^ x[1] ^ x[2] ^ x[3] ^ x[4] ^ x[5] ^ x[6] ^ x[7];
}

static void *par_main(void *p)
{
    par_arg *a = p;
    rf_decoder *d = a->spin ? NULL : rf_decoder_create(NULL);
    uint8_t *out = a->spin ? NULL : malloc((size_t)a->size * a->size * 3);
    rf_transform t = rrc_transform(a->size);
    a->rc = !a->spin && (!d || !out);
    if (d)
        rf_decoder_set_flags(d, a->flags);
    pthread_barrier_wait(a->go);
    for (uint64_t k; !a->rc && (k = atomic_fetch_add(a->next, 1)) < a->total;) {
        if (a->spin) {
            a->sink ^= spin_item(k);
            continue;
        }
        size_t i = k % a->im->n;
        rf_err e = {0};
        a->rc = rf_decode_transform(d, a->im->v[i].data, a->im->v[i].len, &t, rf_mix64(i), out,
                                    NULL, &e);
    }
    rf_decoder_destroy(d);
    free(out);
    return NULL;
}

static int run_parallel(const images *im, uint32_t threads, uint32_t size, uint32_t flags,
                        uint32_t reps, int spin)
{
    pthread_t *th = calloc(threads, sizeof *th);
    par_arg *args = calloc(threads, sizeof *args);
    pthread_barrier_t go;
    _Atomic uint64_t next = 0;
    /* spin: 500 items (about half a second of one core) per thread */
    uint64_t total = spin ? 500ull * threads : (uint64_t)im->n * reps * threads;
    if (!th || !args || pthread_barrier_init(&go, NULL, threads + 1))
        return 1;
    for (uint32_t i = 0; i < threads; i++) {
        args[i] = (par_arg){.im = im, .size = size, .flags = flags, .total = total,
                            .next = &next, .spin = spin, .go = &go};
        if (pthread_create(&th[i], NULL, par_main, &args[i]))
            return 1;
    }
    pthread_barrier_wait(&go);
    uint64_t t0 = rf_now_ns();
    int rc = 0;
    for (uint32_t i = 0; i < threads; i++) {
        pthread_join(th[i], NULL);
        rc |= args[i].rc;
    }
    double dt = (rf_now_ns() - t0) * 1e-9;
    const char *what = spin ? "spin" : "rrc";
    printf("%s x%-3u threads %9.1f %s/s  (%.1f per thread)\n", what, threads, total / dt,
           spin ? "items" : "img", total / dt / threads);
    printf("{\"threads\": %u, \"%s\": %llu, \"seconds\": %.4f, \"%s_per_s\": %.1f}\n",
           threads, spin ? "items" : "images", (unsigned long long)total, dt,
           spin ? "spin" : "img", total / dt);
    pthread_barrier_destroy(&go);
    free(th);
    free(args);
    return rc;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: ringfeed-decode-bench [options] SHARD.tar|DIR ...\n"
            "  --mode M    ref|rrc|rrc-decode|center|center-decode|all (all)\n"
            "  --reps N    passes per mode, best wall time reported (5)\n"
            "  --limit N   at most N images (all)\n"
            "  --size N    output side (224)\n"
            "  --max-denom N  cap on DCT scaling: 1, 2, 4, 8 (8)\n"
            "  --ifast     JDCT_IFAST (RF_DECODE_DCT_IFAST) on the transform paths\n"
            "  --no-fancy  no fancy upsampling (RF_DECODE_NO_FANCY) on the transform paths\n"
            "  --no-region decode whole files even when restart markers allow a region\n"
            "  --threads N RandomResizedCrop on N threads at once, N x --reps passes over the\n"
            "              images shared between them; prints aggregate img/s and a JSON line\n"
            "  --spin      with --threads: a fixed integer loop instead of decoding (the cores'\n"
            "              own scaling: all-core clocks, shared physical cores)\n"

            "  --packets   time per image (a) the CPU decode, (b) the walker + plain packet,\n"
            "              (e) the engine packet, (c) the restart packet (after --restart's\n"
            "              rewrite), medians of --reps\n"
            "  --full-scale  with --packets: (b) and (c) as gpu_decode makes them, DCT scaling\n"
            "              off, so every crop the kernels take is a packet (default: scaling\n"
            "              allowed, as the balancing scheduler runs; scalable crops are CPU\n"
            "              decodes inside (b) and (c))\n"
            "  --restart N|auto|row  first rewrite every image losslessly with a restart marker\n"
            "              every N MCUs (auto: the packer's choice; row: one per MCU row)\n"
            "  --version   print the library's version and exit\n"
            "  -h, --help  print this text and exit\n");
}

int main(int argc, char **argv)
{
    images im = {.limit = SIZE_MAX};
    int mode = -1;
    uint32_t reps = 5, size = 224, max_denom = 8, flags = 0, restart = 0, threads = 0;
    int transcode = 0, spin = 0, packets = 0, full_scale = 0;
    for (int a = 1; a < argc; a++) {
        const char *s = argv[a];
        if (!strcmp(s, "--mode") && a + 1 < argc) {
            const char *v = argv[++a];
            mode = M_COUNT;
            for (int k = 0; k < M_COUNT; k++)
                if (!strcmp(v, MODE_NAMES[k]))
                    mode = k;
            if (!strcmp(v, "all"))
                mode = -1;
            else if (mode == M_COUNT) {
                usage(stderr);
                return 2;
            }
        } else if (!strcmp(s, "--reps") && a + 1 < argc) {
            reps = (uint32_t)strtoul(argv[++a], NULL, 10);
        } else if (!strcmp(s, "--limit") && a + 1 < argc) {
            im.limit = (size_t)strtoull(argv[++a], NULL, 10);
        } else if (!strcmp(s, "--size") && a + 1 < argc) {
            size = (uint32_t)strtoul(argv[++a], NULL, 10);
        } else if (!strcmp(s, "--max-denom") && a + 1 < argc) {
            max_denom = (uint32_t)strtoul(argv[++a], NULL, 10);
        } else if (!strcmp(s, "--ifast")) {
            flags |= RF_DECODE_DCT_IFAST;
        } else if (!strcmp(s, "--no-fancy")) {
            flags |= RF_DECODE_NO_FANCY;
        } else if (!strcmp(s, "--threads") && a + 1 < argc) {
            threads = (uint32_t)strtoul(argv[++a], NULL, 10);
        } else if (!strcmp(s, "--spin")) {
            spin = 1;
        } else if (!strcmp(s, "--packets")) {
            packets = 1;
        } else if (!strcmp(s, "--full-scale")) {
            full_scale = 1;
        } else if (!strcmp(s, "--no-region")) {
            flags |= RF_DECODE_NO_REGION;
        } else if (!strcmp(s, "--restart") && a + 1 < argc) {
            const char *v = argv[++a];
            restart = !strcmp(v, "auto") ? 0 : !strcmp(v, "row") ? UINT32_MAX
                                                                  : (uint32_t)strtoul(v, NULL, 10);
            transcode = 1;
        } else if (!strcmp(s, "-h") || !strcmp(s, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(s, "--version")) {
            printf("ringfeed-decode-bench %s\n", rf_version());
            return 0;
        } else if (s[0] == '-') {
            usage(stderr);
            return 2;
        } else {
            struct stat st;
            if (stat(s, &st) != 0) {
                perror(s);
                return 1;
            }
            if ((S_ISDIR(st.st_mode) ? load_dir(&im, s) : load_tar(&im, s)) != 0)
                return 1;
        }
    }
    if (spin && threads)
        return run_parallel(&im, threads, size, flags, reps, 1);
    if (im.n == 0 || reps == 0 || size == 0) {
        usage(stderr);
        return 2;
    }
    if (packets) {
        int rc = run_packets(&im, size, reps, max_denom, restart, full_scale);
        images_free(&im); /* a sanitizer build's ctest decode_bench checks for leaks */
        return rc;
    }
    if (transcode && transcode_all(&im, restart))
        return 1;
    size_t bytes = 0;
    for (size_t i = 0; i < im.n; i++)
        bytes += im.v[i].len;
    if (threads)
        return run_parallel(&im, threads, size, flags, reps, 0);
    bench b = {.im = &im, .size = size, .flags = flags};
    b.dec = rf_decoder_create(NULL);
    b.out = malloc((size_t)size * size * 3);
    if (!b.dec || !b.out)
        return 1;
    rf_decoder_set_max_scale_denom(b.dec, max_denom);
    b.ref.err = jpeg_std_error(&b.ref_err);
    jpeg_create_decompress(&b.ref);

    printf("%zu images, %.1f KB mean\n", im.n, bytes / 1024.0 / im.n);
    double best[M_COUNT] = {0};
    for (int m = 0; m < M_COUNT; m++) {
        if (mode >= 0 && m != mode)
            continue;
        double tmin = 1e30;
        for (uint32_t r = 0; r < reps; r++) {
            b.pixels_in = b.regions = 0;
            memset(b.scaled, 0, sizeof b.scaled);
            uint64_t t0 = rf_now_ns();
            if (run_pass(&b, (enum mode)m))
                return 1;
            double dt = (rf_now_ns() - t0) * 1e-9;
            tmin = dt < tmin ? dt : tmin;
        }
        best[m] = tmin;
        printf("%-14s %9.1f img/s  %7.3f ms/img  %6.1f Mpx/s in", MODE_NAMES[m], im.n / tmin,
               tmin * 1e3 / im.n, b.pixels_in / tmin * 1e-6);
        if (m != M_REF)
            printf("  scale 1/1:%llu 1/2:%llu 1/4:%llu 1/8:%llu  region %llu",
                   (unsigned long long)b.scaled[1], (unsigned long long)b.scaled[2],
                   (unsigned long long)b.scaled[4], (unsigned long long)b.scaled[8],
                   (unsigned long long)b.regions);
        printf("\n");
    }
    for (int m = M_RRC; m <= M_CENTER; m += 2)
        if (best[m] > 0 && best[m + 1] > 0)
            printf("%-14s decode %.3f ms/img, resize %.3f ms/img (%.0f%%)\n", MODE_NAMES[m],
                   best[m + 1] * 1e3 / im.n, (best[m] - best[m + 1]) * 1e3 / im.n,
                   100.0 * (best[m] - best[m + 1]) / best[m]);
    if (best[M_REF] > 0 && best[M_RRC] > 0)
        printf("rrc / ref throughput: %.2fx (one core each)\n", best[M_REF] / best[M_RRC]);
    jpeg_destroy_decompress(&b.ref);
    rf_decoder_destroy(b.dec);
    free(b.out);
    free(b.ref_buf);
    images_free(&im);
    return 0;
}
