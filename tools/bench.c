/* ringfeed-bench — the standalone benchmark: runs the loader over shards for a number of
 * epochs, as a training loop would consume it, and reports throughput and where time went.
 * Uses the public API only. With --json the last line of stdout is one JSON object. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ringfeed.h"
#include "ringfeed_shards.h"

#define MAX_PATTERNS 256

typedef struct opts {
    const char *shards[MAX_PATTERNS];
    uint32_t nshards;
    uint32_t batch, epochs, size, threads, io_threads, depth, io_engine, device_kind;
    int device_index;
    uint32_t crop, order, drop_last, json, warmup, shard_window, dtype, layout;
    uint64_t seed;
    uint32_t source, token_bytes, seq_len, token_dtype, windows;
    double resume_at; /* > 0: measure resuming at this fraction of the first epoch */
    /* memory hierarchy (docs/tuning.md) */
    uint32_t warm, odirect, hugepages, naive, no_numa, evict, decode_nice, gpu_decode, gpu_pct;
    uint32_t hw_pct;
    uint32_t no_dct_scaling;
    uint64_t warm_bytes;
    uint32_t on_error; /* enum rf_on_error */
    uint32_t timeout_ms;
    uint32_t label_source; /* enum rf_label_source */
    uint32_t show_config;  /* print the loader's effective config (rf_loader_config) */
} opts;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ringfeed-bench --shards PATTERN [--shards PATTERN ...] [options]\n"
            "  --batch N          batch size (256)\n"
            "  --epochs N         epochs to run (1)\n"
            "  --size N           output image side (224)\n"
            "  --crop random|center  RandomResizedCrop or resize+CenterCrop (random)\n"
            "  --threads N        decode threads (the CPUs this process may use)\n"
            "  --io-threads N     I/O threads (engine default)\n"
            "  --depth N          prefetch depth in batches (4)\n"
            "  --io auto|uring|pread  I/O engine (auto)\n"
            "  --device host|cuda|cuda:N  where batches go (cuda when a GPU is present)\n"
            "  --seed N           order and augmentation seed (0)\n"
            "  --no-shuffle       dataset order instead of a seeded permutation\n"
            "  --order global|shard|none  epoch order (global)\n"
            "  --shard-window N   shards mixed together in shard order (4)\n"
            "  --dtype uint8|float16|bfloat16|float32  output type (float: ImageNet mean/std)\n"
            "  --layout nhwc|nchw output layout (nhwc)\n"
            "  --folder DIR       read an image folder (or a `path label` list) instead of shards\n"
            "  --tokens PATTERN   flat token files instead of image shards (repeatable)\n"
            "  --token-bytes N    2 or 4 (2)\n"
            "  --seq-len N        tokens per window (1024)\n"
            "  --token-dtype uint16|int32|int64  output token type (int64)\n"
            "  --windows random|sequential  token windows (random)\n"
            "  --resume-at F      also time resuming at fraction F of the first epoch\n"
            "  --drop-last        drop the last partial batch\n"
            "  --warmup N         batches excluded from the timed figures (0)\n"
            "  --warm             hint upcoming shard bytes into the page cache\n"
            "  --warm-bytes N     how far ahead --warm hints, in bytes (1 GiB)\n"
            "  --odirect          read with O_DIRECT (bypass the page cache)\n"
            "  --hugepages        back the pinned ring with 2 MiB pages\n"
            "  --no-numa          never move threads or memory to the GPU's NUMA node\n"
            "  --decode-nice N    decode threads run N nice levels below the rest (0)\n"
            "  --gpu-decode       decode restart-marked JPEGs on the GPU (rf_config.gpu_decode)\n"
            "  --gpu-decode-percent N  of those, send N%% to the GPU and decode the rest on\n"
            "                     the CPU (rf_config.gpu_decode_percent; 100)\n"
            "  --hw-decode N      send N%% of the images to the GPU's hardware JPEG decoders\n"
            "                     (rf_config.hw_decode_percent; 0)\n"
            "  --no-dct-scaling   decode every image at full scale, as the GPU paths do\n"
            "                     (rf_config.dct_scaling OFF; they turn it off themselves)\n"
            "  --naive            the plain baseline: one pread at a time, pageable ring,\n"
            "                     cudaMalloc + cudaMemcpy per batch, no prefetch\n"
            "  --evict            drop the shards from the page cache first (a cold start)\n"
            "  --on-error fail|skip  a bad sample stops the run (default) or is skipped and\n"
            "                     counted (JSON: skipped, skipped_by_reason)\n"
            "  --timeout-ms N     end the run when a batch takes longer, saying where the\n"
            "                     pipeline stood (rf_config.next_timeout_ms; 60000, 0: never)\n"
            "  --no-labels        unlabelled shards: labels -1, no KEY.cls needed (by default a\n"
            "                     sample without a valid label is bad input; RF_LABEL_NONE)\n"
            "  --show-config      print the configuration the loader runs with, every default\n"
            "                     resolved (rf_loader_config), before running\n"
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
           O_IO, O_DEVICE, O_SEED, O_NOSHUF, O_DROP, O_JSON, O_WARMUP, O_HELP, O_ORDER,
           O_SWIN, O_DTYPE, O_LAYOUT, O_FOLDER, O_TOKENS, O_TBYTES, O_SEQ, O_TDTYPE, O_WINDOWS,
           O_RESUME, O_WARM, O_WARMBYTES, O_ODIRECT, O_HUGE, O_NONUMA, O_NAIVE, O_EVICT, O_NICE, O_GPUDEC,
           O_GPUPCT, O_HWPCT, O_ONERROR, O_TIMEOUT, O_NODCT, O_NOLABELS,
           O_SHOWCFG };
    static const struct option lo[] = {
        {"shards", required_argument, 0, O_SHARDS}, {"batch", required_argument, 0, O_BATCH},
        {"epochs", required_argument, 0, O_EPOCHS}, {"size", required_argument, 0, O_SIZE},
        {"crop", required_argument, 0, O_CROP}, {"threads", required_argument, 0, O_THREADS},
        {"io-threads", required_argument, 0, O_IOTHREADS}, {"depth", required_argument, 0, O_DEPTH},
        {"io", required_argument, 0, O_IO}, {"device", required_argument, 0, O_DEVICE},
        {"seed", required_argument, 0, O_SEED}, {"no-shuffle", no_argument, 0, O_NOSHUF},
        {"drop-last", no_argument, 0, O_DROP}, {"json", no_argument, 0, O_JSON},
        {"warmup", required_argument, 0, O_WARMUP}, {"help", no_argument, 0, O_HELP},
        {"order", required_argument, 0, O_ORDER}, {"shard-window", required_argument, 0, O_SWIN},
        {"dtype", required_argument, 0, O_DTYPE}, {"layout", required_argument, 0, O_LAYOUT},
        {"folder", required_argument, 0, O_FOLDER}, {"tokens", required_argument, 0, O_TOKENS},
        {"token-bytes", required_argument, 0, O_TBYTES}, {"seq-len", required_argument, 0, O_SEQ},
        {"token-dtype", required_argument, 0, O_TDTYPE},
        {"windows", required_argument, 0, O_WINDOWS},
        {"resume-at", required_argument, 0, O_RESUME},
        {"warm", no_argument, 0, O_WARM}, {"warm-bytes", required_argument, 0, O_WARMBYTES},
        {"odirect", no_argument, 0, O_ODIRECT}, {"hugepages", no_argument, 0, O_HUGE},
        {"no-numa", no_argument, 0, O_NONUMA}, {"naive", no_argument, 0, O_NAIVE},
        {"decode-nice", required_argument, 0, O_NICE},
        {"gpu-decode", no_argument, 0, O_GPUDEC},
        {"gpu-decode-percent", required_argument, 0, O_GPUPCT},
        {"hw-decode", required_argument, 0, O_HWPCT},
        {"no-dct-scaling", no_argument, 0, O_NODCT},
        {"evict", no_argument, 0, O_EVICT}, {"on-error", required_argument, 0, O_ONERROR},
        {"timeout-ms", required_argument, 0, O_TIMEOUT},
        {"no-labels", no_argument, 0, O_NOLABELS},
        {"show-config", no_argument, 0, O_SHOWCFG},
        {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    o->batch = 256;
    o->epochs = 1;
    o->size = 224;
    o->order = RF_ORDER_GLOBAL;
    o->token_bytes = 2;
    o->seq_len = 1024;
    o->token_dtype = RF_DTYPE_INT64;
    /* A benchmark that stalls (a hung read, a stuck device) ends with the loader's account of
     * where it stood instead of running until someone kills it. */
    o->timeout_ms = 60000;
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
        case O_NOSHUF: o->order = RF_ORDER_NONE; break;
        case O_ORDER:
            if (!strcmp(optarg, "global")) o->order = RF_ORDER_GLOBAL;
            else if (!strcmp(optarg, "shard")) o->order = RF_ORDER_SHARD;
            else if (!strcmp(optarg, "none")) o->order = RF_ORDER_NONE;
            else bad = 1;
            break;
        case O_SWIN: bad |= parse_u32(optarg, &o->shard_window); break;
        case O_DTYPE:
            if (!strcmp(optarg, "uint8")) o->dtype = RF_DTYPE_UINT8;
            else if (!strcmp(optarg, "float16")) o->dtype = RF_DTYPE_FLOAT16;
            else if (!strcmp(optarg, "bfloat16")) o->dtype = RF_DTYPE_BFLOAT16;
            else if (!strcmp(optarg, "float32")) o->dtype = RF_DTYPE_FLOAT32;
            else bad = 1;
            break;
        case O_LAYOUT:
            if (!strcmp(optarg, "nhwc")) o->layout = RF_LAYOUT_NHWC;
            else if (!strcmp(optarg, "nchw")) o->layout = RF_LAYOUT_NCHW;
            else bad = 1;
            break;
        case O_FOLDER:
        case O_TOKENS:
            if (o->nshards == MAX_PATTERNS)
                return fprintf(stderr, "too many inputs\n"), -1;
            o->shards[o->nshards++] = optarg;
            o->source = c == O_FOLDER ? RF_SOURCE_FOLDER : RF_SOURCE_TOKENS;
            break;
        case O_TBYTES: bad |= parse_u32(optarg, &o->token_bytes); break;
        case O_SEQ: bad |= parse_u32(optarg, &o->seq_len) || !o->seq_len; break;
        case O_TDTYPE:
            if (!strcmp(optarg, "uint16")) o->token_dtype = RF_DTYPE_UINT16;
            else if (!strcmp(optarg, "int32")) o->token_dtype = RF_DTYPE_INT32;
            else if (!strcmp(optarg, "int64")) o->token_dtype = RF_DTYPE_INT64;
            else bad = 1;
            break;
        case O_WINDOWS:
            if (!strcmp(optarg, "random")) o->windows = RF_WINDOWS_RANDOM;
            else if (!strcmp(optarg, "sequential")) o->windows = RF_WINDOWS_SEQUENTIAL;
            else bad = 1;
            break;
        case O_RESUME:
            o->resume_at = strtod(optarg, NULL);
            bad |= !(o->resume_at > 0 && o->resume_at < 1);
            break;
        case O_DROP: o->drop_last = 1; break;
        case O_JSON: o->json = 1; break;
        case O_WARM: o->warm = 1; break;
        case O_WARMBYTES: o->warm_bytes = strtoull(optarg, NULL, 10); bad |= !o->warm_bytes; break;
        case O_ODIRECT: o->odirect = 1; break;
        case O_HUGE: o->hugepages = 1; break;
        case O_NONUMA: o->no_numa = 1; break;
        case O_NAIVE: o->naive = 1; break;
        case O_NICE: bad |= parse_u32(optarg, &o->decode_nice); break;
        case O_GPUDEC: o->gpu_decode = 1; break;
        case O_GPUPCT: bad |= parse_u32(optarg, &o->gpu_pct) || o->gpu_pct > 100; break;
        case O_HWPCT: bad |= parse_u32(optarg, &o->hw_pct) || o->hw_pct > 100; break;
        case O_EVICT: o->evict = 1; break;
        case O_NODCT: o->no_dct_scaling = 1; break;
        case O_TIMEOUT: bad |= parse_u32(optarg, &o->timeout_ms); break;
        case O_NOLABELS: o->label_source = RF_LABEL_NONE; break;
        case O_SHOWCFG: o->show_config = 1; break;
        case O_ONERROR:
            if (!strcmp(optarg, "fail")) o->on_error = RF_ON_ERROR_FAIL;
            else if (!strcmp(optarg, "skip")) o->on_error = RF_ON_ERROR_SKIP;
            else bad = 1;
            break;
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
    /* The stats when the timed window opened: busy times and decoded samples inside the
     * window leave out create and the start-up (pinning the ring alone can be a tenth of a
     * short run, and would read as decode threads waiting). */
    rf_stats at_warmup;
    uint64_t bytes, timed_bytes; /* delivered to the device (or host), as the consumer sees */
    double seconds, timed_seconds;
    double fresh_ms, resume_ms;  /* --resume-at: create + first batch, fresh vs resumed */
    double create_ms;            /* rf_loader_create of the measured run */
    uint64_t resume_batch;
    rf_stats st;
    /* per epoch: seconds, images, bytes read from storage (-1: not measured), the page-cache
     * hit ratio (-1: not measured; set when the run ends) and the share of the bytes read
     * resident at submit */
    uint32_t nep;
    double ep_s[64], ep_sto[64], ep_hit[64], ep_res[64], ep_rss_mb[64];
    uint32_t ep_fds[64];
    uint64_t ep_img[64];
    double mark_t;
    uint64_t mark_img;
    rf_stats mark; /* the stats when the epoch began (zero at create) */
} result;

/* The page-cache hit ratio between two snapshots: the share of the bytes read that did not
 * come from storage (rf_stats.storage_read_bytes), or -1 when that is not measured or nothing
 * was read. Readahead and warm hints count as storage reads when they happen, so a cold
 * epoch gives about 0 however far ahead they ran. */
static double hit_ratio(const rf_stats *from, const rf_stats *to)
{
    uint64_t rd = to->bytes_read - from->bytes_read;
    uint64_t sto = to->storage_read_bytes - from->storage_read_bytes;
    if (!to->storage_measured || rd == 0)
        return -1.0;
    return sto >= rd ? 0.0 : 1.0 - (double)sto / rd;
}

/* The share of the bytes checked at submit that were in the page cache then, in flight from
 * storage included (rf_stats.cache_hit_bytes); -1 when nothing was checked. */
static double resident_ratio(const rf_stats *from, const rf_stats *to)
{
    uint64_t chk = to->cache_checked_bytes - from->cache_checked_bytes;
    return chk ? (double)(to->cache_hit_bytes - from->cache_hit_bytes) / chk : -1.0;
}

/* A ratio for the table: "-" when unknown (-1). */
static const char *table_ratio(double v, char *buf, size_t n)
{
    snprintf(buf, n, v < 0 ? "-" : "%.3f", v);
    return buf;
}

/* A ratio for the JSON: null when unknown (-1). */
static void json_ratio(const char *key, double v)
{
    if (v < 0)
        printf("\"%s\": null", key);
    else
        printf("\"%s\": %.4f", key, v);
}

/* Resident set size of this process in MiB (VmRSS; 0 when unreadable). */
static double rss_mib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6))
            kb = strtod(line + 6, NULL);
    if (f)
        fclose(f);
    return kb / 1024.0;
}

/* Open file descriptors of this process (entries of /proc/self/fd, minus the one opendir uses). */
static uint32_t open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    uint32_t n = 0;
    if (!d)
        return 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n > 3 ? n - 3 : 0; /* ".", ".." and the directory's own descriptor */
}

/* An epoch ended: record its time, images, hit ratio (deltas since the last mark), the
 * process' resident set and open descriptors, which must stay flat over epochs. */
static void epoch_mark(rf_loader *ld, result *r, double t)
{
    rf_stats st;
    rf_stats_init(&st);
    rf_loader_stats(ld, &st);
    if (r->nep < 64) {
        r->ep_s[r->nep] = t - r->mark_t;
        r->ep_img[r->nep] = r->images - r->mark_img;
        r->ep_sto[r->nep] = st.storage_measured
                                ? (double)(st.storage_read_bytes - r->mark.storage_read_bytes)
                                : -1.0;
        r->ep_res[r->nep] = resident_ratio(&r->mark, &st);
        r->ep_rss_mb[r->nep] = rss_mib();
        r->ep_fds[r->nep] = open_fds();
        r->nep++;
    }
    r->mark_t = t;
    r->mark_img = r->images;
    r->mark = st;
}

/* The hit ratio of each epoch: the storage bytes read between its end and the previous one,
 * over the bytes one epoch reads (every epoch reads the same spans: the run's bytes_read over
 * its epochs). Not the bytes read in that time: by an epoch's end the I/O threads have read
 * the next epoch's first batches (prefetch_depth of them), and after a cold epoch those are
 * hits that would dilute it (a 3000-image cold epoch gave 0.11 so, against 0.00). */
static void epoch_hit_ratios(const opts *o, result *r)
{
    double per = o->epochs ? (double)r->st.bytes_read / o->epochs : 0.0;
    for (uint32_t i = 0; i < r->nep; i++)
        r->ep_hit[i] = r->ep_sto[i] < 0 || per <= 0 ? -1.0
                       : r->ep_sto[i] >= per        ? 0.0
                                                    : 1.0 - r->ep_sto[i] / per;
}

static int run(const opts *o, rf_loader *ld, result *r)
{
    int tty = isatty(2) && !o->json;
    uint64_t per_epoch = rf_loader_batches_per_epoch(ld);
    uint64_t total = per_epoch * o->epochs;
    double t0 = now_s(), timed0 = t0;
    uint64_t timed_from = 0;
    r->mark_t = t0;
    rf_stats_init(&r->at_warmup);
    rf_loader_stats(ld, &r->at_warmup);
    for (;;) {
        rf_batch *b;
        int rc = rf_loader_next(ld, &b);
        if (rc == RF_EPOCH_END) {
            epoch_mark(ld, r, now_s());
            continue;
        }
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
        r->bytes += b->data_bytes;
        r->batches++;
        rf_loader_release(ld, b, NULL);
        if (r->batches == o->warmup) {
            timed0 = now_s();
            timed_from = r->images;
            r->timed_bytes = r->bytes;
            rf_stats_init(&r->at_warmup);
            rf_loader_stats(ld, &r->at_warmup);
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
    r->timed_bytes = r->bytes - r->timed_bytes;
    rf_stats_init(&r->st);
    rf_loader_stats(ld, &r->st);
    epoch_hit_ratios(o, r);
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
    if (o->source == RF_SOURCE_TOKENS) {
        printf("  %-26s %12.0f\n", "windows/s", r->timed_images / secs);
        printf("  %-26s %12.0f\n", "batches/s", r->timed_images / secs / o->batch);
        printf("  %-26s %12.3g\n", "tokens/s", (double)r->timed_images * o->seq_len / secs);
    } else {
        printf("  %-26s %12.0f\n", "images/s", r->timed_images / secs);
    }
    printf("  %-26s %12.1f\n", "MB/s read", s->bytes_read / 1e6 / wall);
    printf("  %-26s %12.2f\n", "GB/s to device", r->timed_bytes / 1e9 / secs);
    printf("  %-26s %12llu\n", "images", (unsigned long long)r->images);
    printf("  %-26s %12.3f\n", "seconds", r->timed_seconds);
    printf("  %-26s %12.1f\n", "create ms", r->create_ms);
    printf("  %-26s %12.1f\n", "first batch ms after create", r->first_batch_us / 1e3);
    const rf_stats *w = &r->at_warmup; /* the busy times are the timed window's */
    printf("  %-26s %11.0f%%\n", "I/O busy (of secs x thr)",
           100.0 * (s->io_busy_ns - w->io_busy_ns) /
               (secs * 1e9 * (s->io_threads ? s->io_threads : 1)));
    printf("  %-26s %11.0f%%\n", "decode busy (of secs x thr)",
           100.0 * (s->decode_busy_ns - w->decode_busy_ns) /
               (secs * 1e9 * (s->decode_threads ? s->decode_threads : 1)));
    printf("  %-26s %12.1f\n", "decode ms/image",
           s->samples_decoded ? s->decode_busy_ns / 1e6 / s->samples_decoded : 0.0);
    printf("  %-26s %12.1f\n", "copy enqueue ms in secs",
           (s->copy_busy_ns - w->copy_busy_ns) / 1e6);
    printf("  %-26s %12.1f\n", "consumer waited ms in secs",
           (s->consumer_wait_ns - w->consumer_wait_ns) / 1e6);
    printf("  %-26s %11.0f%%\n", "DCT-scaled decodes",
           s->samples_decoded ? 100.0 * s->dct_scaled / s->samples_decoded : 0.0);
    printf("  %-26s %11.0f%%\n", "region decodes (restarts)",
           s->samples_decoded ? 100.0 * s->region_decoded / s->samples_decoded : 0.0);
    if (o->gpu_decode)
        printf("  %-26s %11.0f%%\n", "decoded on the GPU",
               s->samples_decoded ? 100.0 * s->gpu_decoded / s->samples_decoded : 0.0);
    if (o->hw_pct)
        printf("  %-26s %11.0f%%\n", "hardware JPEG decoder",
               s->samples_decoded ? 100.0 * s->hw_decoded / s->samples_decoded : 0.0);
    rf_stats zero;
    memset(&zero, 0, sizeof zero);
    char b1[16], b2[16];
    printf("  %-26s %12s%s%s%s\n", "page-cache hit ratio",
           table_ratio(hit_ratio(&zero, s), b1, sizeof b1), s->storage_measured ? "" : " (",
           s->storage_why, s->storage_measured ? "" : ")");
    printf("  %-26s %12.1f\n", "MB read from storage", s->storage_read_bytes / 1e6);
    printf("  %-26s %12s\n", "resident at submit",
           table_ratio(resident_ratio(&zero, s), b1, sizeof b1));
    for (uint32_t i = 0; i < r->nep && r->nep > 1; i++)
        printf("  epoch %-20u %8.0f img/s, hit ratio %s, resident at submit %s\n", i,
               r->ep_s[i] > 0 ? r->ep_img[i] / r->ep_s[i] : 0.0,
               table_ratio(r->ep_hit[i], b1, sizeof b1), table_ratio(r->ep_res[i], b2, sizeof b2));
    printf("  %-26s %12s\n", "memory", s->memory_why[0] ? s->memory_why : "defaults");
    printf("  %-26s %12.1f\n", "ring pin ms", s->ring_register_ns / 1e6);
    printf("  %-26s %12llu\n", "device allocs after create",
           (unsigned long long)s->device_allocs_after_create);
    if (o->resume_at > 0) {
        printf("  %-26s %12.1f\n", "fresh create+1st batch ms", r->fresh_ms);
        printf("  %-26s %12.1f\n", "resume create+1st batch ms", r->resume_ms);
    }
}

/* The memory-hierarchy fields, closing the JSON object. */
static void print_json_memory(const opts *o, const result *r)
{
    const rf_stats *s = &r->st;
    rf_stats zero;
    memset(&zero, 0, sizeof zero);
    json_ratio("cache_hit_ratio", hit_ratio(&zero, s));
    printf(", ");
    json_ratio("resident_at_submit_ratio", resident_ratio(&zero, s));
    printf(", \"storage_read_bytes\": %llu, \"storage_measured\": %u, \"storage_why\": \"%s\", ",
           (unsigned long long)s->storage_read_bytes, s->storage_measured, s->storage_why);
    printf("\"naive\": %u, \"cache_checked_bytes\": %llu, "
           "\"warm\": %u, \"warmed_bytes\": %llu, \"odirect\": %u, \"hugepages\": %u, "
           "\"numa_node\": %d, \"numa_nodes\": %u, \"pinned_bytes\": %llu, "
           "\"device_pool_reserved_bytes\": %llu, \"device_pool_used_bytes\": %llu, "
           "\"device_allocs_after_create\": %llu, \"host_allocs_after_create\": %llu, "
           "\"ring_register_ms\": %.3f, \"memory_why\": \"%s\", \"per_epoch\": [",
           o->naive, (unsigned long long)s->cache_checked_bytes, o->warm, (unsigned long long)s->warmed_bytes, s->odirect, s->hugepages, s->numa_node,
           s->numa_nodes, (unsigned long long)s->pinned_bytes,
           (unsigned long long)s->device_pool_reserved_bytes,
           (unsigned long long)s->device_pool_used_bytes,
           (unsigned long long)s->device_allocs_after_create,
           (unsigned long long)s->host_allocs_after_create, s->ring_register_ns / 1e6,
           s->memory_why);
    for (uint32_t i = 0; i < r->nep; i++) {
        printf("%s{\"epoch\": %u, \"seconds\": %.4f, \"img_per_s\": %.1f, ", i ? ", " : "", i,
               r->ep_s[i], r->ep_s[i] > 0 ? r->ep_img[i] / r->ep_s[i] : 0.0);
        json_ratio("cache_hit_ratio", r->ep_hit[i]);
        printf(", ");
        json_ratio("resident_at_submit_ratio", r->ep_res[i]);
        printf(", \"rss_mb\": %.1f, \"open_fds\": %u}", r->ep_rss_mb[i], r->ep_fds[i]);
    }
    printf("]}\n");
}

static void print_json(const opts *o, const result *r)
{
    const rf_stats *s = &r->st;
    double secs = r->timed_seconds > 0 ? r->timed_seconds : 1e-9;
    printf("{\"create_ms\": %.2f, ", r->create_ms);
    /* Images decoded inside the timed window: unlike img_per_s, not inflated by the batches
     * already prefetched when it opened (up to depth x batch), which matters in short runs. */
    printf("\"decode_img_per_s\": %.1f, ",
           (double)(s->samples_decoded - r->at_warmup.samples_decoded) / secs);
    /* The busy times inside the timed window ("seconds"); the *_busy_s below are since create. */
    const rf_stats *w = &r->at_warmup;
    printf("\"io_busy_timed_s\": %.4f, \"decode_busy_timed_s\": %.4f, "
           "\"copy_busy_timed_s\": %.4f, \"consumer_wait_timed_s\": %.4f, ",
           (s->io_busy_ns - w->io_busy_ns) * 1e-9, (s->decode_busy_ns - w->decode_busy_ns) * 1e-9,
           (s->copy_busy_ns - w->copy_busy_ns) * 1e-9,
           (s->consumer_wait_ns - w->consumer_wait_ns) * 1e-9);
    printf("\"images\": %llu, \"epochs\": %u, \"batches\": %llu, \"seconds\": %.6f, "
           "\"img_per_s\": %.1f, \"io_engine\": \"%s\", \"io_engine_why\": \"%s\", "
           "\"device\": \"%s\", \"batch\": %u, \"size\": %u, \"crop\": \"%s\", "
           "\"decode_threads\": %u, \"io_threads\": %u, \"depth\": %u, "
           "\"bytes_read\": %llu, \"mb_per_s_read\": %.2f, \"gb_per_s_to_device\": %.3f, "
           "\"first_batch_ms\": %.2f, \"io_busy_s\": %.4f, \"decode_busy_s\": %.4f, "
           "\"copy_busy_s\": %.4f, \"consumer_wait_s\": %.4f, \"wall_s\": %.4f, "
           "\"samples_decoded\": %llu, \"dct_scaled\": %llu, \"region_decoded\": %llu, "
           "\"gpu_decoded\": %llu, \"hw_decoded\": %llu, "
           "\"read_retries\": %llu, "
           "\"registered_buffers\": %u, \"pinned\": %u, \"bytes_to_device\": %llu, "
           "\"tokens_per_s\": %.1f, \"batches_per_s\": %.2f, \"fresh_ms\": %.3f, "
           "\"resume_ms\": %.3f, \"resume_at\": %.3f, \"resume_position\": %llu, "
           "\"samples\": %llu, \"order\": \"%s\", ",
           (unsigned long long)r->images, o->epochs, (unsigned long long)r->batches,
           r->timed_seconds, r->timed_images / secs, s->io_engine, s->io_engine_why, s->device,
           o->batch, o->size, o->crop == RF_CROP_RANDOM ? "random" : "center", s->decode_threads,
           s->io_threads, s->prefetch_depth, (unsigned long long)s->bytes_read,
           s->bytes_read / 1e6 / (s->wall_ns * 1e-9),
           r->timed_bytes / 1e9 / secs,
           r->first_batch_us / 1e3, s->io_busy_ns * 1e-9, s->decode_busy_ns * 1e-9,
           s->copy_busy_ns * 1e-9, s->consumer_wait_ns * 1e-9, s->wall_ns * 1e-9,
           (unsigned long long)s->samples_decoded, (unsigned long long)s->dct_scaled,
           (unsigned long long)s->region_decoded, (unsigned long long)s->gpu_decoded,
           (unsigned long long)s->hw_decoded, (unsigned long long)s->read_retries, s->registered_buffers, s->pinned,
           (unsigned long long)r->bytes,
           o->source == RF_SOURCE_TOKENS ? (double)r->timed_images * o->seq_len / secs : 0.0,
           r->timed_images / secs / o->batch, r->fresh_ms, r->resume_ms, o->resume_at,
           (unsigned long long)r->resume_batch, (unsigned long long)r->timed_images,
           o->order == RF_ORDER_GLOBAL ? "global" : o->order == RF_ORDER_SHARD ? "shard" : "none");
    static const char *const reasons[RF_SKIP_REASONS] = {
        "tar_header", "truncated", "not_jpeg", "corrupt", "too_large", "io", "label", "other"};
    printf("\"on_error\": \"%s\", \"skipped\": %llu, \"nonregular_members\": %llu, "
           "\"skipped_by_reason\": {", o->on_error == RF_ON_ERROR_SKIP ? "skip" : "fail",
           (unsigned long long)s->skipped, (unsigned long long)s->nonregular_members);
    for (int i = 0; i < RF_SKIP_LABEL + 1; i++)
        printf("%s\"%s\": %llu", i ? ", " : "", reasons[i],
               (unsigned long long)s->skipped_by_reason[i]);
    printf("}, ");
    print_json_memory(o, r);
}

static void make_config(const opts *o, rf_config *cfg)
{
    rf_config_init(cfg);
    cfg->shards = o->shards;
    cfg->shard_count = o->nshards;
    cfg->source = o->source;
    cfg->batch_size = o->batch;
    cfg->image_size = o->size;
    cfg->crop = o->crop;
    cfg->decode_threads = o->threads;
    cfg->io_threads = o->io_threads;
    cfg->prefetch_depth = o->depth;
    cfg->io_engine = o->io_engine;
    cfg->device_kind = o->device_kind;
    cfg->device_index = o->device_index;
    cfg->seed = o->seed;
    cfg->order = o->order;
    cfg->shard_window = o->shard_window;
    cfg->drop_last = o->drop_last;
    cfg->epochs = o->epochs;
    cfg->dtype = o->dtype;
    cfg->layout = o->layout;
    if (o->dtype != RF_DTYPE_UINT8) { /* ImageNet normalization, in pixel units */
        const float mean[3] = {123.675f, 116.28f, 103.53f}, sd[3] = {58.395f, 57.12f, 57.375f};
        memcpy(cfg->mean, mean, sizeof mean);
        memcpy(cfg->std, sd, sizeof sd);
    }
    cfg->token_bytes = o->token_bytes;
    cfg->seq_len = o->seq_len;
    cfg->token_dtype = o->token_dtype;
    cfg->token_windows = o->windows;
    cfg->warm = o->warm;
    cfg->warm_bytes = o->warm_bytes;
    cfg->odirect = o->odirect;
    cfg->hugepages = o->hugepages;
    cfg->numa = o->no_numa ? RF_NUMA_OFF : RF_NUMA_AUTO;
    cfg->on_error = o->on_error;
    cfg->label_source = o->label_source;
    cfg->naive = o->naive;
    cfg->decode_nice = o->decode_nice;
    cfg->gpu_decode = o->gpu_decode;
    cfg->gpu_decode_percent = o->gpu_pct;
    cfg->hw_decode_percent = o->hw_pct;
    cfg->dct_scaling = o->no_dct_scaling ? RF_DCT_SCALING_OFF : RF_DCT_SCALING_AUTO;
    cfg->next_timeout_ms = o->timeout_ms;
}

/* --show-config: the loader's effective config, a few fields a line (enums as their numbers,
 * as in ringfeed.h), so that a run records what every default resolved to. */
static int print_config(const rf_loader *ld)
{
    rf_config c;
    rf_config_init(&c);
    int rc = rf_loader_config(ld, &c);
    if (rc)
        return fprintf(stderr, "ringfeed-bench: rf_loader_config: %s\n", rf_strerror(rc)), rc;
    printf("config  shards %u (first %s), source %u, batch_size %u, image_size %u, crop %u, "
           "layout %u, resize_shorter %u, dtype %u\n", c.shard_count, c.shards[0], c.source,
           c.batch_size, c.image_size, c.crop, c.layout, c.resize_shorter, c.dtype);
    printf("config  scale %g..%g, ratio %g..%g, flip_prob %g, mean %g %g %g, std %g %g %g\n",
           c.scale_min, c.scale_max, c.ratio_min, c.ratio_max, c.flip_prob, c.mean[0], c.mean[1],
           c.mean[2], c.std[0], c.std[1], c.std[2]);
    printf("config  seed %llu, order %u, shard_window %u, drop_last %u, rank %u of %u, "
           "remainder %u, epochs %u, start_epoch %llu\n", (unsigned long long)c.seed, c.order,
           c.shard_window, c.drop_last, c.rank, c.world_size, c.remainder, c.epochs,
           (unsigned long long)c.start_epoch);
    printf("config  decode_threads %u, io_threads %u, io_engine %u, io_queue_depth %u, "
           "prefetch_depth %u, device_kind %u, device_index %d, decode_nice %u\n",
           c.decode_threads, c.io_threads, c.io_engine, c.io_queue_depth, c.prefetch_depth,
           c.device_kind, c.device_index, c.decode_nice);
    printf("config  staging_bytes %llu, max_sample_bytes %llu, max_image_pixels %llu, "
           "max_image_dim %u, max_scans %u, max_name_bytes %u, io_retries %u\n",
           (unsigned long long)c.staging_bytes, (unsigned long long)c.max_sample_bytes,
           (unsigned long long)c.max_image_pixels, c.max_image_dim, c.max_scans,
           c.max_name_bytes, c.io_retries);
    printf("config  on_error %u, max_consecutive_skips %u, label_source %u, next_timeout_ms %u, "
           "token_bytes %u, seq_len %u, token_windows %u, token_dtype %u\n", c.on_error,
           c.max_consecutive_skips, c.label_source, c.next_timeout_ms, c.token_bytes, c.seq_len,
           c.token_windows, c.token_dtype);
    printf("config  warm %u, warm_bytes %llu, odirect %u, hugepages %u, numa %u, naive %u, "
           "gpu_decode %u, gpu_decode_percent %u, hw_decode_percent %u, dct_scaling %u\n",
           c.warm, (unsigned long long)c.warm_bytes, c.odirect, c.hugepages, c.numa, c.naive,
           c.gpu_decode, c.gpu_decode_percent, c.hw_decode_percent, c.dct_scaling);
    return 0;
}

/* --evict: ask the kernel to drop the shards' cached pages (clean pages go; no root needed,
 * unlike drop_caches), so the run starts from a cold cache. */
static int evict(const opts *o)
{
    rf_paths *p;
    char err[512];
    int rc = rf_paths_expand(o->shards, o->nshards, &p, err, sizeof err);
    if (rc)
        return fprintf(stderr, "ringfeed-bench: --evict: %s\n", err), rc;
    for (uint32_t i = 0; i < rf_paths_count(p); i++) {
        int fd = open(rf_paths_get(p, i), O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            fdatasync(fd);
            posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
            close(fd);
        }
    }
    rf_paths_free(p);
    return 0;
}

/* Time to the first batch: fresh, and resumed at `at` of the first epoch. The position is
 * reached by consuming batches first (not timed); the resume itself must not replay them. */
static int time_resume(const opts *o, const rf_config *base, result *r)
{
    rf_config c = *base;
    c.epochs = 0;
    char err[512];
    rf_loader *ld;
    rf_batch *b;
    double t0 = now_s();
    int rc = rf_loader_create(&c, &ld, err, sizeof err);
    if (rc || (rc = rf_loader_next(ld, &b)) < 0)
        return fprintf(stderr, "ringfeed-bench: resume: %s\n", rc ? err : ""), 1;
    r->fresh_ms = (now_s() - t0) * 1e3;
    uint64_t k = (uint64_t)(o->resume_at * rf_loader_batches_per_epoch(ld));
    rf_loader_release(ld, b, NULL);
    for (uint64_t i = 1; i < k && rf_loader_next(ld, &b) == 0; i++)
        rf_loader_release(ld, b, NULL);
    uint8_t blob[256];
    uint64_t len = 0;
    rf_loader_state(ld, blob, sizeof blob, &len);
    rf_loader_destroy(ld);
    c.resume_state = blob;
    c.resume_state_bytes = len;
    t0 = now_s();
    if ((rc = rf_loader_create(&c, &ld, err, sizeof err)) || (rc = rf_loader_next(ld, &b)) < 0)
        return fprintf(stderr, "ringfeed-bench: resume: %s\n", rc ? err : ""), 1;
    r->resume_ms = (now_s() - t0) * 1e3;
    r->resume_batch = b->positions[0]; /* epoch-order position where the resumed run starts */
    rf_loader_destroy(ld);
    return 0;
}

int main(int argc, char **argv)
{
    opts o;
    if (parse_args(argc, argv, &o))
        return 2;
    rf_config cfg;
    make_config(&o, &cfg);
    if (o.evict && evict(&o))
        return 1;
    result r;
    memset(&r, 0, sizeof r);
    if (o.resume_at > 0 && time_resume(&o, &cfg, &r))
        return 1;
    rf_loader *ld;
    char err[512];
    double tc = now_s();
    int rc = rf_loader_create(&cfg, &ld, err, sizeof err);
    r.create_ms = (now_s() - tc) * 1e3;
    if (rc) {
        fprintf(stderr, "ringfeed-bench: %s: %s\n", rf_strerror(rc), err);
        return 1;
    }
    rc = o.show_config ? print_config(ld) : 0;
    if (!rc)
        rc = run(&o, ld, &r);
    rf_loader_destroy(ld);
    if (rc)
        return 1;
    print_table(&o, &r);
    if (o.json)
        print_json(&o, &r);
    return 0;
}
