/* config.c — rf_config's defaults (rf_config_init), their resolution and checks at create
 * (config_resolve, mem_defaults, apply_defaults), and the effective config a created loader
 * reports (rf_loader_config).
 *
 * DESIGN
 * One home for every default: rf_config_init writes each fixed default, and config_resolve is
 * the one place the AUTO values that follow from the config and the machine are resolved; the
 * AUTO values that depend on what create finds later (device_kind: the backend chosen;
 * io_engine and io_threads: what the probe allows; staging_bytes: the arena sized from the
 * data set) are resolved by the stage that decides them (create.c, ring.c), and
 * rf_loader_config reads them back from the loader. Runs on the creating thread (and
 * rf_loader_config on any), before anything is allocated; touches only the loader's own copy
 * of the config. */
#include <stddef.h>
#include <string.h>

#include "base/cpus.h"
#include "decode/decode.h"
#include "loaders/tar.h"
#include "pipeline/loader.h"

RF_API void rf_config_init(rf_config *cfg)
{
    if (!cfg)
        return;
    /* Every field not written below defaults to 0: the enums' first values (TAR, GLOBAL,
     * RANDOM crop, NHWC, UINT8, FAIL, RF_LABEL_CLS, every *_AUTO), the flags off, and the
     * AUTO values (RF_AUTO) that rf_loader_create resolves. */
    memset(cfg, 0, sizeof *cfg);
    cfg->struct_size = sizeof *cfg;
    cfg->version = RF_CONFIG_VERSION;
    cfg->batch_size = 256;
    cfg->image_size = 224;
    /* torchvision's RandomResizedCrop defaults */
    cfg->scale_min = 0.08f;
    cfg->scale_max = 1.0f;
    cfg->ratio_min = 3.0f / 4.0f;
    cfg->ratio_max = 4.0f / 3.0f;
    cfg->flip_prob = RF_FLIP_PROB_AUTO; /* 0 is a legal value: no flips */
    cfg->world_size = 1;
    cfg->io_queue_depth = 64;
    cfg->max_sample_bytes = 64ull << 20;
    cfg->max_image_pixels = RF_DEFAULT_MAX_IMAGE_PIXELS;
    cfg->max_image_dim = RF_DEFAULT_MAX_IMAGE_DIM;
    cfg->io_retries = 8;
    for (int c = 0; c < 3; c++)
        cfg->std[c] = 1.0f; /* mean 0, std 1: float output holds the raw pixel values */
    cfg->shard_window = 4;
    cfg->max_consecutive_skips = 100;
    cfg->max_scans = RF_DEFAULT_MAX_SCANS;
    cfg->max_name_bytes = RF_TAR_NAME_MAX;
    cfg->warm_bytes = 1ull << 30;
    cfg->gpu_decode_percent = 100;
    cfg->decode_nice = RF_DECODE_NICE_AUTO; /* 0 is a legal value: no added niceness */
    cfg->max_field_bytes = 16u << 10;
    cfg->image_exts = RF_TAR_IMAGE_EXTS;
    cfg->remote_retries = 5;
    cfg->remote_timeout_ms = 30000;
}

/* The fields whose default is a fixed value, which 0 also asks for (callers that filled the
 * struct before rf_config_init wrote these defaults, or a struct_size ending before them). */
#define RF_FIXED_DEFAULTS(X) \
    X(batch_size) X(image_size) X(world_size) X(io_queue_depth) X(max_sample_bytes) \
    X(max_image_pixels) X(max_image_dim) X(io_retries) X(shard_window) \
    X(max_consecutive_skips) X(max_scans) X(max_name_bytes) X(warm_bytes) \
    X(gpu_decode_percent) X(max_field_bytes) X(remote_retries) X(remote_timeout_ms)

/* Resolve *c in place, before it is validated: 0 in a field with a fixed default becomes that
 * default (rf_config_init's value; old callers and short structs leave 0), and the AUTO values
 * that depend only on the config and the machine take their value: image_height and
 * image_width (image_size), resize_shorter, flip_prob, decode_nice,
 * decode_threads (rf_cpu_count, at most 1024), prefetch_depth, token_dtype (token sources),
 * decode_schedule (MANUAL with gpu_decode or hw_decode_percent; dct_scaling is resolved with
 * the schedule, at create: schedule.c pl_sched_choose). Values out of range are left for apply_defaults to refuse. */
static void config_resolve(rf_config *c)
{
    rf_config d;
    rf_config_init(&d);
#define RF_FIXED_DEFAULT_(f) \
    if (!c->f) \
        c->f = d.f;
    RF_FIXED_DEFAULTS(RF_FIXED_DEFAULT_)
#undef RF_FIXED_DEFAULT_
    int gpu = c->gpu_decode || c->hw_decode_percent;
    if (!c->image_height)
        c->image_height = c->image_size;
    if (!c->image_width)
        c->image_width = c->image_size;
    /* torchvision's Resize(256) before CenterCrop(224), scaled by the longer output side so
     * that the center crop fits inside the resized image in both directions */
    if (!c->resize_shorter)
        c->resize_shorter = (RF_MAX(c->image_height, c->image_width) * 256 + 112) / 224;
    if (c->flip_prob < 0)
        c->flip_prob = c->crop == RF_CROP_RANDOM ? 0.5f : 0.0f;
    if (c->decode_nice == RF_DECODE_NICE_AUTO)
        c->decode_nice = RF_DEFAULT_DECODE_NICE;
    if (!c->decode_threads) /* the CPUs this process may use, not the machine's */
        c->decode_threads = RF_MIN(rf_cpu_count(), 1024u);
    /* (BALANCE resolved from AUTO at create sets it too: pl_sched_choose) */
    if (!c->prefetch_depth)
        c->prefetch_depth = gpu || c->decode_schedule == RF_SCHEDULE_BALANCE ? PL_DEPTH_GPU : 4;
    if (c->source == RF_SOURCE_TOKENS && !c->token_dtype)
        c->token_dtype = c->token_bytes == 2 ? RF_DTYPE_UINT16 : RF_DTYPE_INT32;
    /* The percentages are the manual mode's; create resolves the rest of AUTO once it knows
     * the backend (schedule.c pl_sched_choose). */
    if (gpu && c->decode_schedule == RF_SCHEDULE_AUTO)
        c->decode_schedule = RF_SCHEDULE_MANUAL;
    if (!c->image_exts) /* a struct_size ending before it, or NULL: the default */
        c->image_exts = d.image_exts;
}

/* Memory-hierarchy fields: the naive baseline's fixed settings, which replace the caller's
 * (before config_resolve, so that they are not AUTO there). */
static int mem_defaults(rf_config *c, rf_err *err)
{
    if (c->numa > RF_NUMA_OFF)
        return rf_seterr(err, RF_EINVAL, "invalid numa %u", c->numa);
    if (c->naive) {
        c->io_engine = RF_IO_PREAD;
        c->io_threads = 1;
        c->io_queue_depth = 1;
        c->prefetch_depth = 1;
        c->warm = c->odirect = c->hugepages = 0;
        c->numa = RF_NUMA_OFF;
    }
    return 0;
}

/* The caller's config, resolved (config_resolve: every fixed default and the AUTO values
 * that follow from the config and the machine) and then checked. */
/* The shard cache's settings: a budget is required rather than guessed, since any default
 * could fill a small disk or be too small to hold one shard. */
static int cache_check(const rf_config *c, rf_err *err)
{
    if (!c->cache_dir)
        return 0;
    size_t n = strnlen(c->cache_dir, RF_PATH_BYTES_MAX);
    if (n == 0 || n >= RF_PATH_BYTES_MAX)
        return rf_seterr(err, RF_EINVAL, "cache_dir must be a directory path of 1..%d bytes "
                         "(NULL: no cache)", RF_PATH_BYTES_MAX - 1);
    if (c->cache_bytes == 0)
        return rf_seterr(err, RF_EINVAL, "cache_bytes must be > 0 with cache_dir %s: the "
                         "cache's budget of shard bytes", c->cache_dir);
    return 0;
}

int pl_apply_defaults(rf_config *c, rf_err *err)
{
    if (c->struct_size < offsetof(rf_config, resume_state_bytes) + sizeof(uint64_t) ||
        c->version != RF_CONFIG_VERSION)
        return rf_seterr(err, RF_EINVAL,
                         "config struct_size %u / version %u: fill it with rf_config_init()",
                         c->struct_size, c->version);
    if (!c->shards || c->shard_count == 0)
        return rf_seterr(err, RF_EINVAL, "no shards given");
    int mrc = mem_defaults(c, err);
    if (mrc)
        return mrc;
    config_resolve(c);
    if (c->image_size > 8192)
        return rf_seterr(err, RF_EINVAL, "image_size %u exceeds 8192", c->image_size);
    if (c->image_height > 8192 || c->image_width > 8192)
        return rf_seterr(err, RF_EINVAL, "image_height %u or image_width %u exceeds 8192",
                         c->image_height, c->image_width);
    if (c->crop > RF_CROP_CENTER || c->layout > RF_LAYOUT_NCHW)
        return rf_seterr(err, RF_EINVAL, "invalid crop %u or layout %u", c->crop, c->layout);
    if (!(c->scale_min > 0 && c->scale_min <= c->scale_max && c->scale_max <= 1.0f &&
          c->ratio_min > 0 && c->ratio_min <= c->ratio_max))
        return rf_seterr(err, RF_EINVAL, "invalid scale (%g, %g) or ratio (%g, %g)",
                         c->scale_min, c->scale_max, c->ratio_min, c->ratio_max);
    if (c->decode_threads > 1024)
        return rf_seterr(err, RF_EINVAL, "decode_threads %u exceeds 1024", c->decode_threads);
    if (c->decode_nice > 19)
        return rf_seterr(err, RF_EINVAL, "decode_nice %u out of range 0..19", c->decode_nice);
    if (c->prefetch_depth > 64 || c->io_queue_depth > 4096 || c->io_threads > 64)
        return rf_seterr(err, RF_EINVAL, "prefetch_depth (<= 64), io_queue_depth (<= 4096) or "
                                         "io_threads (<= 64) out of range");
    if (c->on_error > RF_ON_ERROR_SKIP)
        return rf_seterr(err, RF_EINVAL, "invalid on_error %u (0 fail, 1 skip)", c->on_error);
    if (c->label_source > RF_LABEL_JSON)
        return rf_seterr(err, RF_EINVAL, "invalid label_source %u (0 RF_LABEL_CLS, 1 "
                         "RF_LABEL_NONE, 2 RF_LABEL_JSON)", c->label_source);
    if (c->label_source == RF_LABEL_JSON && c->source == RF_SOURCE_TAR &&
        rf_json_path_check(c->label_json_path, err))
        return err->code;
    if (c->max_field_bytes > RF_FIELD_BYTES_MAX)
        return rf_seterr(err, RF_EINVAL, "max_field_bytes %u exceeds %u", c->max_field_bytes,
                         RF_FIELD_BYTES_MAX);
    int erc = rf_tar_exts_check(c->image_exts, err);
    if (erc)
        return erc;
    if (c->max_name_bytes > RF_TAR_NAME_MAX)
        return rf_seterr(err, RF_EINVAL, "max_name_bytes %u exceeds %u", c->max_name_bytes,
                         RF_TAR_NAME_MAX);
    if (c->device_kind > RF_DEVICE_CUDA || c->io_engine > RF_IO_PREAD)
        return rf_seterr(err, RF_EINVAL, "invalid device_kind %u or io_engine %u",
                         c->device_kind, c->io_engine);
    if (c->order > RF_ORDER_SHARD || c->remainder > RF_REMAINDER_DROP)
        return rf_seterr(err, RF_EINVAL, "invalid order %u or remainder %u", c->order,
                         c->remainder);
    if (c->gpu_decode > 1)
        return rf_seterr(err, RF_EINVAL, "gpu_decode must be 0 or 1, not %u", c->gpu_decode);
    if (c->gpu_decode_percent > 100)
        return rf_seterr(err, RF_EINVAL, "gpu_decode_percent %u out of range 0..100 (0: all)",
                         c->gpu_decode_percent);
    if (c->hw_decode_percent > 100)
        return rf_seterr(err, RF_EINVAL, "hw_decode_percent %u out of range 0..100",
                         c->hw_decode_percent);
    if (c->decode_schedule > RF_SCHEDULE_BALANCE)
        return rf_seterr(err, RF_EINVAL, "decode_schedule must be 0 (auto), 1 (cpu), 2 (manual) "
                         "or 3 (balance), not %u", c->decode_schedule);
    /* The remote client's limits (io/remote.h), checked for every loader so that a config
     * means the same whether its shards are files or URLs. */
    if (c->remote_retries > 100 || c->remote_timeout_ms > 3600000)
        return rf_seterr(err, RF_EINVAL, "remote_retries %u (at most 100) or remote_timeout_ms "
                         "%u (at most 3600000) out of range", c->remote_retries,
                         c->remote_timeout_ms);
    if ((c->gpu_decode || c->hw_decode_percent) && c->decode_schedule != RF_SCHEDULE_MANUAL)
        return rf_seterr(err, RF_EINVAL, "gpu_decode and hw_decode_percent are the manual "
                         "schedule's settings; decode_schedule %s takes neither",
                         c->decode_schedule == RF_SCHEDULE_CPU ? "CPU" : "BALANCE");
    if (c->dct_scaling > RF_DCT_SCALING_ON)
        return rf_seterr(err, RF_EINVAL, "dct_scaling must be 0 (auto), 1 (off) or 2 (on), not %u",
                         c->dct_scaling);
    if ((c->gpu_decode || c->hw_decode_percent) && c->source == RF_SOURCE_TOKENS)
        return rf_seterr(err, RF_EINVAL, "gpu_decode and hw_decode_percent apply to JPEG "
                         "sources, not tokens");
    if (c->sample_hook && (c->gpu_decode || c->hw_decode_percent))
        return rf_seterr(err, RF_EINVAL, "sample_hook: images decoded on the GPU never reach "
                         "the decode threads that call the hook; set gpu_decode and "
                         "hw_decode_percent to 0 to use a sample_hook");
    if (c->sample_hook && c->source == RF_SOURCE_TOKENS)
        return rf_seterr(err, RF_EINVAL, "sample_hook applies to images; a token source "
                         "decodes nothing to call it with");
    if (c->source == RF_SOURCE_TOKENS) {
        if (c->token_bytes != 2 && c->token_bytes != 4)
            return rf_seterr(err, RF_EINVAL, "tokens: token_bytes must be 2 or 4, not %u",
                             c->token_bytes);
        if (c->seq_len == 0 || c->seq_len > (1u << 24))
            return rf_seterr(err, RF_EINVAL, "tokens: seq_len must be in 1..16M, not %u",
                             c->seq_len);
        if (c->token_windows > RF_WINDOWS_SEQUENTIAL)
            return rf_seterr(err, RF_EINVAL, "tokens: invalid token_windows %u", c->token_windows);
        if (c->token_dtype != RF_DTYPE_UINT16 && c->token_dtype != RF_DTYPE_INT32 &&
            c->token_dtype != RF_DTYPE_INT64)
            return rf_seterr(err, RF_EINVAL, "tokens: token_dtype must be UINT16, INT32 or INT64");
        if (c->token_dtype == RF_DTYPE_UINT16 && c->token_bytes == 4)
            return rf_seterr(err, RF_EINVAL, "tokens: 4-byte tokens cannot narrow to UINT16");
    } else if (c->source != RF_SOURCE_TAR && c->source != RF_SOURCE_FOLDER) {
        return rf_seterr(err, RF_EINVAL, "invalid source %u", c->source);
    }
    if (c->dtype != RF_DTYPE_UINT8 && c->dtype != RF_DTYPE_FLOAT16 &&
        c->dtype != RF_DTYPE_BFLOAT16 && c->dtype != RF_DTYPE_FLOAT32)
        return rf_seterr(err, RF_EINVAL, "images: dtype must be UINT8, FLOAT16, BFLOAT16 or "
                                         "FLOAT32, not %u", c->dtype);
    for (int i = 0; i < 3; i++)
        if (!(c->std[i] > 0) && !(c->std[i] < 0))
            return rf_seterr(err, RF_EINVAL, "std[%d] must be non-zero", i);
    return cache_check(c, err);
}

/* ld->cfg holds what apply_defaults resolved (and the resume state's seed); what create chose
 * afterwards for the remaining AUTO fields is read from the loader: the engine reading now
 * (an io_uring that failed its worker setup fell back to pread), the backend, the arena. */
int rf_loader_config(const rf_loader *ld, rf_config *out)
{
    if (!ld || !out || out->struct_size < 2 * sizeof(uint32_t))
        return RF_EINVAL;
    rf_config c = ld->cfg;
    c.struct_size = out->struct_size;
    c.io_engine = ld->io.ops == &rf_io_uring_ops ? RF_IO_URING : RF_IO_PREAD;
    c.device_kind = ld->backend.ops->device_kind;
    c.prefetch_depth = ld->ring.depth;
    c.staging_bytes = ld->d.arena_bytes;
    c.resume_state = NULL; /* the caller's blob, read at create and not kept */
    c.resume_state_bytes = 0;
    memcpy(out, &c, RF_MIN((size_t)out->struct_size, sizeof c));
    return 0;
}
