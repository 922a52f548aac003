/* bench_opts.c — ringfeed-bench's command line: the usage text, the options parsed into opts
 * (an error names the option), and opts turned into the loader's rf_config. */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli_num.h"

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
            "  --tokens PATTERN   flat token files instead of image shards (repeatable; paths\n"
            "                     or http(s)://, s3:// URLs: one ranged GET per window)\n"
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
            "  --decode-nice N    decode threads run N nice levels below the rest (10;\n"
            "                     0: at the niceness the process starts with)\n"
            "  --gpu-decode       decode baseline JPEGs on the GPU, restart-marked or plain\n"
            "                     (rf_config.gpu_decode)\n"
            "  --gpu-decode-percent N  of those, send N%% to the GPU and decode the rest on\n"
            "                     the CPU (rf_config.gpu_decode_percent; 100)\n"
            "  --hw-decode N      send N%% of the images to the GPU's hardware JPEG decoders\n"
            "                     (rf_config.hw_decode_percent; 0)\n"
            "  --schedule auto|cpu|manual|balance  where JPEGs are decoded\n"
            "                     (rf_config.decode_schedule; auto: manual with --gpu-decode or\n"
            "                     --hw-decode, else balance on cuda and cpu elsewhere)\n"
            "  --no-dct-scaling   decode every image at full scale, as the GPU paths do\n"
            "                     (rf_config.dct_scaling OFF; they turn it off themselves)\n"
            "  --dct-scaling-always  keep DCT scaling with the GPU paths too: the crops it\n"
            "                     applies to stay on the CPU (rf_config.dct_scaling ON)\n"
            "  --naive            the plain baseline: one pread at a time, pageable ring,\n"
            "                     cudaMalloc + cudaMemcpy per batch, no prefetch\n"
            "  --evict            drop the shards from the page cache first (a cold start)\n"
            "  --on-error fail|skip  a bad sample stops the run (default) or is skipped and\n"
            "                     counted (JSON: skipped, skipped_by_reason)\n"
            "  --timeout-ms N     end the run when a batch takes longer, saying where the\n"
            "                     pipeline stood (rf_config.next_timeout_ms; 60000, 0: never)\n"
            "  --cache-dir DIR    keep URL shards whole in DIR, read from there once cached\n"
            "                     (rf_config.cache_dir; docs/remote.md); needs --cache-bytes\n"
            "  --cache-bytes N    the cache's budget of shard bytes (rf_config.cache_bytes)\n"
            "  --remote-retries N retries of one request to a URL shard (rf_config.remote_retries;\n"
            "                     default 5, at most 100)\n"
            "  --remote-timeout-ms N  connect timeout and stall window of URL shards' requests\n"
            "                     (rf_config.remote_timeout_ms; default 30000)\n"
            "  --no-labels        unlabelled shards: labels -1, no KEY.cls needed (by default a\n"
            "                     sample without a valid label is bad input; RF_LABEL_NONE)\n"
            "  --show-config      print the configuration the loader runs with, every default\n"
            "                     resolved (rf_loader_config), before running\n"
            "  --json             print one JSON object as the last line\n"
            "  --version          print the library's version and exit\n"
            "  -h, --help         print this text and exit\n");
}

/* --schedule's names, enum rf_decode_schedule's order. */
static int parse_schedule(const char *s, uint32_t *out)
{
    static const char *const names[] = {"auto", "cpu", "manual", "balance"};
    for (uint32_t i = 0; i < 4; i++)
        if (!strcmp(s, names[i]))
            return *out = i, 0;
    return 1;
}

int parse_args(int argc, char **argv, opts *o)
{
    enum { O_SHARDS = 256, O_BATCH, O_EPOCHS, O_SIZE, O_CROP, O_THREADS, O_IOTHREADS, O_DEPTH,
           O_IO, O_DEVICE, O_SEED, O_NOSHUF, O_DROP, O_JSON, O_WARMUP, O_HELP, O_ORDER,
           O_SWIN, O_DTYPE, O_LAYOUT, O_FOLDER, O_TOKENS, O_TBYTES, O_SEQ, O_TDTYPE, O_WINDOWS,
           O_RESUME, O_WARM, O_WARMBYTES, O_ODIRECT, O_HUGE, O_NONUMA, O_NAIVE, O_EVICT, O_NICE, O_GPUDEC,
           O_GPUPCT, O_HWPCT, O_ONERROR, O_TIMEOUT, O_NODCT, O_DCTON, O_NOLABELS,
           O_SHOWCFG, O_VERSION, O_SCHED, O_CACHEDIR, O_CACHEBYTES, O_RRETRIES, O_RTIMEOUT };
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
        {"dct-scaling-always", no_argument, 0, O_DCTON},
        {"schedule", required_argument, 0, O_SCHED},
        {"evict", no_argument, 0, O_EVICT}, {"on-error", required_argument, 0, O_ONERROR},
        {"timeout-ms", required_argument, 0, O_TIMEOUT},
        {"no-labels", no_argument, 0, O_NOLABELS},
        {"show-config", no_argument, 0, O_SHOWCFG},
        {"cache-dir", required_argument, 0, O_CACHEDIR},
        {"cache-bytes", required_argument, 0, O_CACHEBYTES},
        {"remote-retries", required_argument, 0, O_RRETRIES},
        {"remote-timeout-ms", required_argument, 0, O_RTIMEOUT},
        {"version", no_argument, 0, O_VERSION},
        {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    o->batch = 256;
    o->epochs = 1;
    o->decode_nice = RF_DECODE_NICE_AUTO;
    o->size = 224;
    o->order = RF_ORDER_GLOBAL;
    o->token_bytes = 2;
    o->seq_len = 1024;
    o->token_dtype = RF_DTYPE_INT64;
    /* A benchmark that stalls (a hung read, a stuck device) ends with the loader's account of
     * where it stood instead of running until someone kills it. */
    o->timeout_ms = 60000;
    int c, bad = 0;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        switch (c) {
        case O_SHARDS:
            if (o->nshards == MAX_PATTERNS)
                return fprintf(stderr, "too many --shards\n"), -1;
            o->shards[o->nshards++] = optarg;
            break;
        case O_BATCH: bad |= cli_parse_u32(optarg, &o->batch) || !o->batch; break;
        case O_EPOCHS: bad |= cli_parse_u32(optarg, &o->epochs) || !o->epochs; break;
        case O_SIZE: bad |= cli_parse_u32(optarg, &o->size) || !o->size; break;
        case O_THREADS: bad |= cli_parse_u32(optarg, &o->threads); break;
        case O_IOTHREADS: bad |= cli_parse_u32(optarg, &o->io_threads); break;
        case O_DEPTH: bad |= cli_parse_u32(optarg, &o->depth); break;
        case O_WARMUP: bad |= cli_parse_u32(optarg, &o->warmup); break;
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
                uint32_t d = 0; /* parse_u32 sets it on success; bad is set otherwise */
                bad |= cli_parse_u32(optarg + 5, &d);
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
        case O_SWIN: bad |= cli_parse_u32(optarg, &o->shard_window); break;
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
        case O_TBYTES: bad |= cli_parse_u32(optarg, &o->token_bytes); break;
        case O_SEQ: bad |= cli_parse_u32(optarg, &o->seq_len) || !o->seq_len; break;
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
        case O_NICE: bad |= cli_parse_u32(optarg, &o->decode_nice); break;
        case O_GPUDEC: o->gpu_decode = 1; break;
        case O_GPUPCT: bad |= cli_parse_u32(optarg, &o->gpu_pct) || o->gpu_pct > 100; break;
        case O_HWPCT: bad |= cli_parse_u32(optarg, &o->hw_pct) || o->hw_pct > 100; break;
        case O_EVICT: o->evict = 1; break;
        case O_NODCT: o->dct_scaling = RF_DCT_SCALING_OFF; break;
        case O_DCTON: o->dct_scaling = RF_DCT_SCALING_ON; break;
        case O_SCHED: bad |= parse_schedule(optarg, &o->schedule); break;
        case O_TIMEOUT: bad |= cli_parse_u32(optarg, &o->timeout_ms); break;
        case O_NOLABELS: o->label_source = RF_LABEL_NONE; break;
        case O_SHOWCFG: o->show_config = 1; break;
        case O_CACHEDIR: o->cache_dir = optarg; break;
        case O_CACHEBYTES: bad |= cli_parse_u64(optarg, &o->cache_bytes) || !o->cache_bytes; break;
        case O_RRETRIES: bad |= cli_parse_u32(optarg, &o->remote_retries); break;
        case O_RTIMEOUT: bad |= cli_parse_u32(optarg, &o->remote_timeout_ms); break;
        case O_ONERROR:
            if (!strcmp(optarg, "fail")) o->on_error = RF_ON_ERROR_FAIL;
            else if (!strcmp(optarg, "skip")) o->on_error = RF_ON_ERROR_SKIP;
            else bad = 1;
            break;
        case 'h':
        case O_HELP: usage(stdout); exit(0);
        case O_VERSION: printf("ringfeed-bench %s\n", rf_version()); exit(0);
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

void make_config(const opts *o, rf_config *cfg)
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
    cfg->dct_scaling = o->dct_scaling;
    cfg->next_timeout_ms = o->timeout_ms;
    cfg->decode_schedule = o->schedule;
    cfg->cache_dir = o->cache_dir;
    cfg->cache_bytes = o->cache_bytes;
    cfg->remote_retries = o->remote_retries;     /* 0: the library's default */
    cfg->remote_timeout_ms = o->remote_timeout_ms;
}
