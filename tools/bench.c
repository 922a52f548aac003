/* ringfeed-bench — the standalone benchmark: runs the loader over shards for a number of
 * epochs, as a training loop would consume it, and reports throughput and where time went.
 * Uses the public API only. With --json the last line of stdout is one JSON object. */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ringfeed.h"

#define MAX_PATTERNS 256

typedef struct opts {
    const char *shards[MAX_PATTERNS];
    uint32_t nshards;
    uint32_t batch, epochs, size, threads, io_threads, depth, io_engine, device_kind;
    int device_index;
    uint32_t crop, shuffle, drop_last, json, warmup;
    uint64_t seed;
} opts;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ringfeed-bench --shards PATTERN [--shards PATTERN ...] [options]\n"
            "  --batch N          batch size (256)\n"
            "  --epochs N         epochs to run (1)\n"
            "  --size N           output image side (224)\n"
            "  --crop random|center  RandomResizedCrop or resize+CenterCrop (random)\n"
            "  --threads N        decode threads (all CPUs)\n"
            "  --io-threads N     I/O threads (engine default)\n"
            "  --depth N          prefetch depth in batches (4)\n"
            "  --io auto|uring|pread  I/O engine (auto)\n"
            "  --device host|cuda|cuda:N  where batches go (cuda when a GPU is present)\n"
            "  --seed N           order and augmentation seed (0)\n"
            "  --no-shuffle       dataset order instead of a seeded permutation\n"
            "  --drop-last        drop the last partial batch\n"
            "  --warmup N         batches excluded from the timed figures (0)\n"
            "  --json             print one JSON object as the last line\n");
}

static int parse_u32(const char *s, uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || end == s || *end || v > UINT32_MAX)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

static int parse_args(int argc, char **argv, opts *o)
{
    enum { O_SHARDS = 256, O_BATCH, O_EPOCHS, O_SIZE, O_CROP, O_THREADS, O_IOTHREADS, O_DEPTH,
           O_IO, O_DEVICE, O_SEED, O_NOSHUF, O_DROP, O_JSON, O_WARMUP, O_HELP };
    static const struct option lo[] = {
        {"shards", required_argument, 0, O_SHARDS}, {"batch", required_argument, 0, O_BATCH},
        {"epochs", required_argument, 0, O_EPOCHS}, {"size", required_argument, 0, O_SIZE},
        {"crop", required_argument, 0, O_CROP}, {"threads", required_argument, 0, O_THREADS},
        {"io-threads", required_argument, 0, O_IOTHREADS}, {"depth", required_argument, 0, O_DEPTH},
        {"io", required_argument, 0, O_IO}, {"device", required_argument, 0, O_DEVICE},
        {"seed", required_argument, 0, O_SEED}, {"no-shuffle", no_argument, 0, O_NOSHUF},
        {"drop-last", no_argument, 0, O_DROP}, {"json", no_argument, 0, O_JSON},
        {"warmup", required_argument, 0, O_WARMUP}, {"help", no_argument, 0, O_HELP},
        {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    o->batch = 256;
    o->epochs = 1;
    o->size = 224;
    o->shuffle = 1;
    int c, bad = 0;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case O_SHARDS:
            if (o->nshards == MAX_PATTERNS)
                return fprintf(stderr, "too many --shards\n"), -1;
            o->shards[o->nshards++] = optarg;
            break;
        case O_BATCH: bad |= parse_u32(optarg, &o->batch) || !o->batch; break;
        case O_EPOCHS: bad |= parse_u32(optarg, &o->epochs) || !o->epochs; break;
        case O_SIZE: bad |= parse_u32(optarg, &o->size) || !o->size; break;
        case O_THREADS: bad |= parse_u32(optarg, &o->threads); break;
        case O_IOTHREADS: bad |= parse_u32(optarg, &o->io_threads); break;
        case O_DEPTH: bad |= parse_u32(optarg, &o->depth); break;
        case O_WARMUP: bad |= parse_u32(optarg, &o->warmup); break;
        case O_CROP:
            if (!strcmp(optarg, "random")) o->crop = RF_CROP_RANDOM;
            else if (!strcmp(optarg, "center")) o->crop = RF_CROP_CENTER;
            else bad = 1;
            break;
        case O_IO:
            if (!strcmp(optarg, "auto")) o->io_engine = RF_IO_AUTO;
            else if (!strcmp(optarg, "uring")) o->io_engine = RF_IO_URING;
            else if (!strcmp(optarg, "pread")) o->io_engine = RF_IO_PREAD;
            else bad = 1;
            break;
        case O_DEVICE:
            if (!strcmp(optarg, "host")) o->device_kind = RF_DEVICE_HOST;
            else if (!strcmp(optarg, "cuda")) o->device_kind = RF_DEVICE_CUDA;
            else if (!strncmp(optarg, "cuda:", 5)) {
                uint32_t d;
                bad |= parse_u32(optarg + 5, &d);
                o->device_kind = RF_DEVICE_CUDA;
                o->device_index = (int)d;
            } else bad = 1;
            break;
        case O_SEED: o->seed = strtoull(optarg, NULL, 10); break;
        case O_NOSHUF: o->shuffle = 0; break;
        case O_DROP: o->drop_last = 1; break;
        case O_JSON: o->json = 1; break;
        case O_HELP: usage(stdout); exit(0);
        default: bad = 1;
        }
        if (bad) {
            fprintf(stderr, "ringfeed-bench: bad value for option %s\n", argv[optind - 1]);
            return -1;
        }
    }
    if (optind < argc || o->nshards == 0) {
        usage(stderr);
        return -1;
    }
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void progress(uint64_t done, uint64_t total, double img_s)
{
    int width = 40, fill = total ? (int)(done * width / total) : 0;
    fprintf(stderr, "\r[%.*s%*s] %llu/%llu batches  %.0f img/s ", fill,
            "########################################", width - fill, "",
            (unsigned long long)done, (unsigned long long)total, img_s);
    fflush(stderr);
}

typedef struct result {
    uint64_t images, batches, timed_images, first_batch_us;
    double seconds, timed_seconds;
    rf_stats st;
} result;

static int run(const opts *o, rf_loader *ld, result *r)
{
    int tty = isatty(2) && !o->json;
    uint64_t per_epoch = rf_loader_batches_per_epoch(ld);
    uint64_t total = per_epoch * o->epochs;
    double t0 = now_s(), timed0 = t0;
    uint64_t timed_from = 0;
    for (;;) {
        rf_batch *b;
        int rc = rf_loader_next(ld, &b);
        if (rc == RF_EPOCH_END)
            continue;
        if (rc == RF_DONE)
            break;
        if (rc < 0) {
            if (tty)
                fputc('\n', stderr);
            fprintf(stderr, "ringfeed-bench: %s: %s\n", rf_strerror(rc), rf_last_error(ld));
            return rc;
        }
        /* What a training step needs first: the batch on the device. */
        rf_batch_synchronize(b);
        if (r->batches == 0)
            r->first_batch_us = (uint64_t)((now_s() - t0) * 1e6);
        r->images += b->count;
        r->batches++;
        rf_loader_release(ld, b, NULL);
        if (r->batches == o->warmup) {
            timed0 = now_s();
            timed_from = r->images;
        }
        if (tty && (r->batches % 8 == 0 || r->batches == total))
            progress(r->batches, total, (r->images - timed_from) / (now_s() - timed0 + 1e-9));
    }
    if (tty)
        fputc('\n', stderr);
    double t1 = now_s();
    r->seconds = t1 - t0;
    r->timed_seconds = t1 - timed0;
    r->timed_images = r->images - timed_from;
    rf_stats_init(&r->st);
    rf_loader_stats(ld, &r->st);
    return 0;
}

static void print_table(const opts *o, const result *r)
{
    const rf_stats *s = &r->st;
    double secs = r->timed_seconds > 0 ? r->timed_seconds : 1e-9;
    double wall = s->wall_ns * 1e-9;
    printf("ringfeed-bench  device %s  io %s (%s)\n", s->device, s->io_engine, s->io_engine_why);
    printf("  %u decode threads, %u I/O threads, depth %u, batch %u, %ux%u %s crop\n",
           s->decode_threads, s->io_threads, s->prefetch_depth, o->batch, o->size, o->size,
           o->crop == RF_CROP_RANDOM ? "random" : "center");
    printf("  %-26s %12s\n", "metric", "value");
    printf("  %-26s %12.0f\n", "images/s", r->timed_images / secs);
    printf("  %-26s %12.1f\n", "MB/s read", s->bytes_read / 1e6 / wall);
    printf("  %-26s %12.2f\n", "GB/s to device",
           (double)r->images * o->size * o->size * 3 / 1e9 / secs);
    printf("  %-26s %12llu\n", "images", (unsigned long long)r->images);
    printf("  %-26s %12.3f\n", "seconds", r->timed_seconds);
    printf("  %-26s %12.1f\n", "first batch ms", r->first_batch_us / 1e3);
    printf("  %-26s %11.0f%%\n", "I/O busy (of wall x thr)",
           100.0 * s->io_busy_ns / (wall * 1e9 * (s->io_threads ? s->io_threads : 1)));
    printf("  %-26s %11.0f%%\n", "decode busy (of wall x thr)",
           100.0 * s->decode_busy_ns / (wall * 1e9 * (s->decode_threads ? s->decode_threads : 1)));
    printf("  %-26s %12.1f\n", "decode ms/image",
           s->samples_decoded ? s->decode_busy_ns / 1e6 / s->samples_decoded : 0.0);
    printf("  %-26s %12.1f\n", "copy enqueue ms", s->copy_busy_ns / 1e6);
    printf("  %-26s %12.1f\n", "consumer waited ms", s->consumer_wait_ns / 1e6);
    printf("  %-26s %11.0f%%\n", "DCT-scaled decodes",
           s->samples_decoded ? 100.0 * s->dct_scaled / s->samples_decoded : 0.0);
}

static void print_json(const opts *o, const result *r)
{
    const rf_stats *s = &r->st;
    double secs = r->timed_seconds > 0 ? r->timed_seconds : 1e-9;
    printf("{\"images\": %llu, \"epochs\": %u, \"batches\": %llu, \"seconds\": %.6f, "
           "\"img_per_s\": %.1f, \"io_engine\": \"%s\", \"io_engine_why\": \"%s\", "
           "\"device\": \"%s\", \"batch\": %u, \"size\": %u, \"crop\": \"%s\", "
           "\"decode_threads\": %u, \"io_threads\": %u, \"depth\": %u, "
           "\"bytes_read\": %llu, \"mb_per_s_read\": %.2f, \"gb_per_s_to_device\": %.3f, "
           "\"first_batch_ms\": %.2f, \"io_busy_s\": %.4f, \"decode_busy_s\": %.4f, "
           "\"copy_busy_s\": %.4f, \"consumer_wait_s\": %.4f, \"wall_s\": %.4f, "
           "\"samples_decoded\": %llu, \"dct_scaled\": %llu, \"read_retries\": %llu, "
           "\"registered_buffers\": %u, \"pinned\": %u}\n",
           (unsigned long long)r->images, o->epochs, (unsigned long long)r->batches,
           r->timed_seconds, r->timed_images / secs, s->io_engine, s->io_engine_why, s->device,
           o->batch, o->size, o->crop == RF_CROP_RANDOM ? "random" : "center", s->decode_threads,
           s->io_threads, s->prefetch_depth, (unsigned long long)s->bytes_read,
           s->bytes_read / 1e6 / (s->wall_ns * 1e-9),
           (double)r->timed_images * o->size * o->size * 3 / 1e9 / secs,
           r->first_batch_us / 1e3, s->io_busy_ns * 1e-9, s->decode_busy_ns * 1e-9,
           s->copy_busy_ns * 1e-9, s->consumer_wait_ns * 1e-9, s->wall_ns * 1e-9,
           (unsigned long long)s->samples_decoded, (unsigned long long)s->dct_scaled,
           (unsigned long long)s->read_retries, s->registered_buffers, s->pinned);
}

int main(int argc, char **argv)
{
    opts o;
    if (parse_args(argc, argv, &o))
        return 2;
    rf_config cfg;
    rf_config_init(&cfg);
    cfg.shards = o.shards;
    cfg.shard_count = o.nshards;
    cfg.batch_size = o.batch;
    cfg.image_size = o.size;
    cfg.crop = o.crop;
    cfg.decode_threads = o.threads;
    cfg.io_threads = o.io_threads;
    cfg.prefetch_depth = o.depth;
    cfg.io_engine = o.io_engine;
    cfg.device_kind = o.device_kind;
    cfg.device_index = o.device_index;
    cfg.seed = o.seed;
    cfg.order = o.shuffle ? RF_ORDER_GLOBAL : RF_ORDER_NONE;
    cfg.drop_last = o.drop_last;
    cfg.epochs = o.epochs;
    rf_loader *ld;
    char err[512];
    int rc = rf_loader_create(&cfg, &ld, err, sizeof err);
    if (rc) {
        fprintf(stderr, "ringfeed-bench: %s: %s\n", rf_strerror(rc), err);
        return 1;
    }
    result r;
    memset(&r, 0, sizeof r);
    rc = run(&o, ld, &r);
    rf_loader_destroy(ld);
    if (rc)
        return 1;
    print_table(&o, &r);
    if (o.json)
        print_json(&o, &r);
    return 0;
}
