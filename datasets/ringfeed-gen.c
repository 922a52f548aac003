/* ringfeed-gen — write a synthetic ImageNet-like training set as WebDataset shards.
 *
 * DESIGN: a thin command line over rf_gen_run() (datasets/gen.h), which owns the threads: the
 * workers render and encode, the calling thread writes. This file parses flags, draws the
 * progress line on a terminal (from the writer's progress callback, at most 5 times a second)
 * and prints the summary. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gen.h"
#include "ringfeed_shards.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ringfeed-gen --output 'DIR/train-%%06d.tar' --images N [options]\n"
            "\n"
            "Writes a synthetic ImageNet-like training set as WebDataset shards (KEY.jpg, KEY.cls)\n"
            "with a DALI v1.2 index (.idx) beside each shard. Deterministic: the same flags give the\n"
            "same bytes, whatever --threads.\n"
            "\n"
            "  --output PATTERN          shard path with one integer conversion (required)\n"
            "  --images N                samples in total (required)\n"
            "  --classes N               number of labels (default 1000)\n"
            "  --shard-size BYTES        start a new shard before this size; K/M/G suffixes\n"
            "                            (default 64M)\n"
            "  --per-shard N             samples per shard instead of --shard-size\n"
            "  --first-shard N           number of the first shard (default 0)\n"
            "  --seed N                  (default 0)\n"
            "  --quality Q               JPEG and WebP quality 1..100 (default 90)\n"
            "  --texture X               fine-texture scale; JPEG size grows with it (default 1)\n"
            "  --threads N               render threads (default: online CPUs)\n"
            "  --progressive-fraction F  fraction of progressive JPEGs (default 0)\n"
            "  --restart                 restart markers (ringfeed-pack --restart's interval,\n"
            "                            same Huffman tables): the same pixels, decoded faster\n"
            "                            by crops (overrides --progressive-fraction)\n"
            "  --trailer N               N bytes after each JPEG's EOI, as cameras write them\n"
            "                            (the same pixels; default 0)\n"
            "  --format F                image members: jpg (default), png (8-bit RGB), webp\n"
            "                            (lossy at --quality) or mix (jpg, png, webp by index)\n"
            "  --min-side N / --max-side N  fit image sizes (short side >= min, long side <= max)\n"
            "  --class-dirs              keys n%%05u/%%08u (label/index) instead of %%08u (index)\n"
            "  --gnu                     GNU long-name records instead of pax (only for >100 chars)\n"
            "  --no-index                do not write .idx files\n"
            "  --quiet                   no progress line and no summary\n"
            "  --version                 print the library's version and exit\n"
            "  -h, --help                print this text and exit\n");
}

/* "64M", "512K", "1G", "1000": binary multiples. Returns 0 or -1. */
static int parse_bytes(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0)
        return -1;
    double m = 1;
    switch (*end) {
    case 'k': case 'K': m = 1024.0; end++; break;
    case 'm': case 'M': m = 1024.0 * 1024; end++; break;
    case 'g': case 'G': m = 1024.0 * 1024 * 1024; end++; break;
    default: break;
    }
    if (*end == 'i' || *end == 'I')
        end++;
    if (*end == 'b' || *end == 'B')
        end++;
    if (*end)
        return -1;
    *out = (uint64_t)(v * m);
    return 0;
}

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || end == s || *end || s[0] == '-')
        return -1;
    *out = v;
    return 0;
}

static int parse_u32(const char *s, uint32_t *out)
{
    uint64_t v;
    if (parse_u64(s, &v) || v > UINT32_MAX)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

static int parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    *out = strtod(s, &end);
    return errno || end == s || *end ? -1 : 0;
}

typedef struct {
    uint64_t total;
    double last;
    int tty;
} progress_state;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int on_progress(void *ctx, const rf_gen_stats *st)
{
    progress_state *p = ctx;
    double t = now_s();
    if (st->images != p->total && t - p->last < 0.2)
        return 0;
    p->last = t;
    double sec = st->seconds > 0 ? st->seconds : 1e-9;
    double rate = (double)st->images / sec;
    double eta = rate > 0 ? (double)(p->total - st->images) / rate : 0;
    fprintf(stderr, "\r%" PRIu64 "/%" PRIu64 " images (%.1f%%)  %.0f img/s  %.1f MB/s  ETA %.0fs   ",
            st->images, p->total, 100.0 * (double)st->images / (double)p->total, rate,
            (double)st->jpeg_bytes / sec / 1e6, eta);
    if (st->images == p->total)
        fputc('\n', stderr);
    return 0;
}

enum {
    OPT_OUTPUT = 256, OPT_IMAGES, OPT_CLASSES, OPT_SHARD_SIZE, OPT_PER_SHARD, OPT_FIRST_SHARD,
    OPT_SEED, OPT_QUALITY, OPT_TEXTURE, OPT_THREADS, OPT_PROGRESSIVE, OPT_MIN_SIDE, OPT_MAX_SIDE,
    OPT_CLASS_DIRS, OPT_GNU, OPT_NO_INDEX, OPT_QUIET, OPT_RESTART, OPT_FORMAT, OPT_TRAILER, OPT_HELP,
    OPT_VERSION
};

static const struct option options[] = {
    {"output", required_argument, NULL, OPT_OUTPUT},
    {"images", required_argument, NULL, OPT_IMAGES},
    {"classes", required_argument, NULL, OPT_CLASSES},
    {"shard-size", required_argument, NULL, OPT_SHARD_SIZE},
    {"per-shard", required_argument, NULL, OPT_PER_SHARD},
    {"first-shard", required_argument, NULL, OPT_FIRST_SHARD},
    {"seed", required_argument, NULL, OPT_SEED},
    {"quality", required_argument, NULL, OPT_QUALITY},
    {"texture", required_argument, NULL, OPT_TEXTURE},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"progressive-fraction", required_argument, NULL, OPT_PROGRESSIVE},
    {"min-side", required_argument, NULL, OPT_MIN_SIDE},
    {"max-side", required_argument, NULL, OPT_MAX_SIDE},
    {"class-dirs", no_argument, NULL, OPT_CLASS_DIRS},
    {"gnu", no_argument, NULL, OPT_GNU},
    {"no-index", no_argument, NULL, OPT_NO_INDEX},
    {"quiet", no_argument, NULL, OPT_QUIET},
    {"restart", no_argument, NULL, OPT_RESTART},
    {"format", required_argument, NULL, OPT_FORMAT},
    {"trailer", required_argument, NULL, OPT_TRAILER},
    {"help", no_argument, NULL, OPT_HELP},
    {"version", no_argument, NULL, OPT_VERSION},
    {NULL, 0, NULL, 0},
};

/* --format jpg|png|webp|mix (enum rf_gen_format's order). */
static int parse_format(const char *s, int *out)
{
    static const char *const names[] = {"jpg", "png", "webp", "mix"};
    for (int i = 0; i < 4; i++)
        if (strcmp(s, names[i]) == 0)
            return *out = i, 0;
    return -1;
}

/* Apply one flag to cfg; returns 0 or -1 (bad value). */
static int apply(rf_gen_config *cfg, int opt, const char *arg, int *quiet)
{
    uint32_t q;
    double d;
    switch (opt) {
    case OPT_OUTPUT: cfg->output = arg; return 0;
    case OPT_IMAGES: return parse_u64(arg, &cfg->images);
    case OPT_CLASSES: return parse_u32(arg, &cfg->classes);
    case OPT_SHARD_SIZE: return parse_bytes(arg, &cfg->shard_bytes);
    case OPT_PER_SHARD: cfg->shard_bytes = 0; return parse_u32(arg, &cfg->per_shard);
    case OPT_FIRST_SHARD: return parse_u32(arg, &cfg->first_shard);
    case OPT_SEED: return parse_u64(arg, &cfg->seed);
    case OPT_QUALITY:
        if (parse_u32(arg, &q) || q < 1 || q > 100)
            return -1;
        cfg->quality = (int)q;
        return 0;
    case OPT_TEXTURE:
        if (parse_double(arg, &d) || d < 0 || d > 100)
            return -1;
        cfg->texture = (float)d;
        return 0;
    case OPT_THREADS: return parse_u32(arg, &cfg->threads);
    case OPT_PROGRESSIVE: return parse_double(arg, &cfg->progressive_fraction);
    case OPT_MIN_SIDE: return parse_u32(arg, &cfg->min_side);
    case OPT_MAX_SIDE: return parse_u32(arg, &cfg->max_side);
    case OPT_CLASS_DIRS: cfg->key_style = RF_GEN_KEY_CLASS_DIR; return 0;
    case OPT_GNU: cfg->tar_format = RF_SHARD_GNU; return 0;
    case OPT_NO_INDEX: cfg->write_index = 0; return 0;
    case OPT_QUIET: *quiet = 1; return 0;
    case OPT_RESTART: cfg->restart = 1; return 0;
    case OPT_FORMAT: return parse_format(arg, &cfg->format);
    case OPT_TRAILER: return parse_u32(arg, &cfg->trailer_bytes);
    default: return -1;
    }
}

int main(int argc, char **argv)
{
    rf_gen_config cfg;
    rf_gen_config_init(&cfg);
    cfg.shard_bytes = 64ull << 20;
    int quiet = 0, opt, per_shard_set = 0, shard_size_set = 0;
    while ((opt = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        if (opt == 'h' || opt == OPT_HELP) {
            usage(stdout);
            return 0;
        }
        if (opt == OPT_VERSION) {
            printf("ringfeed-gen %s\n", rf_version());
            return 0;
        }
        if (opt == '?') {
            usage(stderr);
            return 2;
        }
        per_shard_set |= opt == OPT_PER_SHARD;
        shard_size_set |= opt == OPT_SHARD_SIZE;
        if (apply(&cfg, opt, optarg, &quiet) != 0) {
            fprintf(stderr, "ringfeed-gen: bad value for --%s: '%s'\n", options[opt - 256].name,
                    optarg);
            return 2;
        }
    }
    if (optind < argc || !cfg.output || cfg.images == 0) {
        fprintf(stderr, "ringfeed-gen: --output and --images are required\n");
        usage(stderr);
        return 2;
    }
    if (per_shard_set && shard_size_set) {
        fprintf(stderr, "ringfeed-gen: give --shard-size or --per-shard, not both\n");
        return 2;
    }

    progress_state ps = {.total = cfg.images, .tty = isatty(STDERR_FILENO)};
    if (!quiet && ps.tty) {
        cfg.progress = on_progress;
        cfg.progress_ctx = &ps;
    }
    rf_gen_stats st;
    char msg[512];
    int rc = rf_gen_run(&cfg, &st, msg, sizeof msg);
    if (rc) {
        fprintf(stderr, "\nringfeed-gen: %s\n", msg);
        return 1;
    }
    if (!quiet) {
        double sec = st.seconds > 0 ? st.seconds : 1e-9, n = (double)st.images;
        printf("images      %" PRIu64 " (%" PRIu64 " progressive), %u classes\n", st.images,
               st.progressive, cfg.classes);
        printf("shards      %" PRIu64 "\n", st.shards);
        printf("bytes       %" PRIu64 " (%.1f MiB)\n", st.bytes, (double)st.bytes / 1048576.0);
        printf("mean JPEG   %.1f KiB (quality %d)\n", (double)st.jpeg_bytes / n / 1024.0,
               cfg.quality);
        printf("mean dims   %.0f x %.0f\n", (double)st.sum_width / n, (double)st.sum_height / n);
        printf("time        %.2f s, %.1f MB/s, %.0f img/s\n", sec, (double)st.bytes / sec / 1e6,
               n / sec);
    }
    return 0;
}
