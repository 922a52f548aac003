/* config.c — a caller's config made the loader's (pl_apply_defaults) and the effective config
 * a created loader reports (rf_loader_config). Defaults, AUTO values and ranges are the rows
 * of the settings table (base/settings.c); this file holds only what a row cannot say: AUTO
 * rules that follow from the config and the machine (config_resolve) and checks across
 * fields. AUTO values that depend on what create finds later (backend, I/O engine, arena) are
 * resolved by the stage that decides them and read back by rf_loader_config. */
#include <stddef.h>
#include <string.h>

#include "base/cpus.h"
#include "base/settings.h"
#include "decode/decode.h"
#include "loaders/tar.h"
#include "pipeline/loader.h"
#include "plan/buckets.h"

/* Resolve *c in place, after its values were checked: a field left AUTO gets its fixed default
 * (rf_settings_resolve), then the AUTO values whose rule depends only on the config and the
 * machine (dct_scaling is resolved with the schedule at create: pl_sched_choose). */
static void config_resolve(rf_config *c, const rf_buckets *bk)
{
    rf_settings_resolve(c);
    int gpu = c->gpu_decode || c->hw_decode_percent;
    if (bk->n && !c->image_height) /* AUTO with size buckets: the largest bucket's */
        for (uint32_t i = 0; i < bk->n; i++)
            c->image_height = RF_MAX(c->image_height, bk->height[i]);
    if (bk->n && !c->image_width)
        for (uint32_t i = 0; i < bk->n; i++)
            c->image_width = RF_MAX(c->image_width, bk->width[i]);
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
    if (c->pad_value[0] < 0) /* AUTO: all three negative (rf_settings_check) */
        for (int k = 0; k < 3; k++)
            c->pad_value[k] = c->crop == RF_CROP_LETTERBOX ? 114.0f : 0.0f;
    if (c->decode_nice == RF_DECODE_NICE_AUTO)
        c->decode_nice = RF_DEFAULT_DECODE_NICE;
    if (c->mask_fill == RF_MASK_FILL_AUTO)
        c->mask_fill = RF_DEFAULT_MASK_FILL;
    if (!c->decode_threads) /* the CPUs this process may use, not the machine's */
        c->decode_threads = RF_MIN(rf_cpu_count(),
                                   (uint32_t)rf_settings_row("decode_threads")->max);
    /* (BALANCE resolved from AUTO at create sets it too: pl_sched_choose) */
    if (!c->prefetch_depth)
        c->prefetch_depth = gpu || c->decode_schedule == RF_SCHEDULE_BALANCE ? PL_DEPTH_GPU : 4;
    if (c->source == RF_SOURCE_TOKENS && !c->token_dtype)
        c->token_dtype = c->token_bytes == 2 ? RF_DTYPE_UINT16 : RF_DTYPE_INT32;
    /* The percentages are the manual mode's; create resolves the rest of AUTO once it knows
     * the backend (schedule.c pl_sched_choose). */
    if (gpu && c->decode_schedule == RF_SCHEDULE_AUTO)
        c->decode_schedule = RF_SCHEDULE_MANUAL;
}

/* Memory-hierarchy fields: the naive baseline's fixed settings, which replace the caller's
 * (before config_resolve, so that they are not AUTO there). */
static void mem_defaults(rf_config *c)
{
    if (c->naive) {
        c->io_engine = RF_IO_PREAD;
        c->io_threads = 1;
        c->io_queue_depth = 1;
        c->prefetch_depth = 1;
        c->warm = c->odirect = c->hugepages = 0;
        c->numa = RF_NUMA_OFF;
    }
}

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

/* NATIVE: each sample at its own size in its H x W slot; what assumes every sample is H x W
 * cannot take it. */
static int native_check(const rf_config *c, rf_err *err)
{
    if (c->source == RF_SOURCE_TOKENS)
        return rf_seterr(err, RF_EINVAL, "crop native applies to images, not tokens");
    if (c->sample_hook)
        return rf_seterr(err, RF_EINVAL, "crop native: a sample_hook (or a Python transform) "
                         "sees H x W images; use another crop with it");
    if (c->dtype != RF_DTYPE_UINT8 && c->layout == RF_LAYOUT_NCHW)
        return rf_seterr(err, RF_EINVAL, "crop native with a float dtype needs layout NHWC: "
                         "the conversion to NCHW assumes H x W samples");
    return 0;
}

/* rf_config.size_buckets: a letterbox into each bucket, on the CPU, one bucket a batch; what
 * assumes every sample is H x W or draws batches otherwise cannot take it. */
static int buckets_check(const rf_config *c, const rf_buckets *bk, rf_err *err)
{
    if (!bk->n)
        return 0;
    if (c->source == RF_SOURCE_TOKENS)
        return rf_seterr(err, RF_EINVAL, "size_buckets applies to images, not tokens");
    if (c->crop != RF_CROP_LETTERBOX)
        return rf_seterr(err, RF_EINVAL, "size_buckets letterboxes each image into its "
                         "bucket: set crop letterbox (crop is %s)",
                         c->crop == RF_CROP_RANDOM       ? "random"
                         : c->crop == RF_CROP_CENTER     ? "center"
                         : c->crop == RF_CROP_CENTER_PAD ? "center_pad"
                                                         : "native");
    for (uint32_t i = 0; i < bk->n; i++)
        if (bk->height[i] > c->image_height || bk->width[i] > c->image_width)
            return rf_seterr(err, RF_EINVAL, "size_buckets entry %u \"%ux%u\" does not fit "
                             "image_height x image_width %ux%u, the slot every sample reserves "
                             "(leave both unset: the largest bucket's)", i + 1, bk->height[i],
                             bk->width[i], c->image_height, c->image_width);
    const char *no = c->multi_crop && *c->multi_crop ? "multi_crop (views have their own sizes)"
                     : c->sample_hook ? "a sample_hook (or a Python transform: it sees H x W "
                                        "images)"
                     : c->on_error == RF_ON_ERROR_SKIP
                         ? "on_error skip (a replacement would come from another bucket)"
                     : c->dtype != RF_DTYPE_UINT8 && c->layout == RF_LAYOUT_NCHW
                         ? "a float dtype with layout NCHW (the conversion to NCHW assumes "
                           "H x W samples; use NHWC)"
                         : NULL;
    if (no)
        return rf_seterr(err, RF_EINVAL, "size_buckets with %s: not supported", no);
    return 0;
}

/* rf_config.mask: an extension a tar member's name can end with, which is not the image's
 * (the image member would be taken for the mask), and a fill its dtype holds. */
static int mask_check(const rf_config *c, rf_err *err)
{
    if (!c->mask)
        return 0;
    if (c->source != RF_SOURCE_TAR)
        return rf_seterr(err, RF_EINVAL, "mask \"%.100s\": masks are tar members (KEY.%.100s); "
                         "a %s source has none", c->mask, c->mask,
                         c->source == RF_SOURCE_FOLDER ? "folder" : "token");
    size_t n = strnlen(c->mask, RF_FIELD_NAME_MAX + 1);
    int ok = n >= 1 && n <= RF_FIELD_NAME_MAX;
    for (size_t i = 0; ok && i < n; i++)
        ok = rf_tar_name_byte_ok((unsigned char)c->mask[i]) && c->mask[i] != '/' &&
             c->mask[i] != ',' && (unsigned char)c->mask[i] <= 0x7e;
    if (!ok)
        return rf_seterr(err, RF_EINVAL, "mask \"%.100s\": an extension is 1..%d printable "
                         "ASCII bytes without space, ',' or '/' (e.g. \"seg.png\")", c->mask,
                         RF_FIELD_NAME_MAX);
    if (rf_tar_ext_in(c->mask, c->image_exts))
        return rf_seterr(err, RF_EINVAL, "mask \"%s\" is one of image_exts \"%s\": the image "
                         "member would be taken for the mask; name the mask member apart "
                         "(KEY.seg.png)", c->mask, c->image_exts);
    if (c->crop == RF_CROP_NATIVE)
        return rf_seterr(err, RF_EINVAL, "mask \"%s\" with crop native: the images are packed "
                         "at their own sizes and the masks are image_height x image_width "
                         "rows; use crop letterbox (the same scale, padded)", c->mask);
    if (c->mask_dtype == RF_DTYPE_UINT8 && c->mask_fill > 255)
        return rf_seterr(err, RF_EINVAL, "mask_fill %u does not fit mask_dtype uint8 (0..255); "
                         "use mask_dtype int32", c->mask_fill);
    return 0;
}

/* The caller's config checked field by field against the settings table, then resolved
 * (the naive baseline's settings, every default), then checked across fields. */
int pl_apply_defaults(rf_config *c, rf_err *err)
{
    if (c->struct_size < offsetof(rf_config, resume_state_bytes) + sizeof(uint64_t) ||
        c->version != RF_CONFIG_VERSION)
        return rf_seterr(err, RF_EINVAL,
                         "config struct_size %u / version %u: fill it with rf_config_init()",
                         c->struct_size, c->version);
    if (!c->shards || c->shard_count == 0)
        return rf_seterr(err, RF_EINVAL, "no shards given");
    /* A struct that ends before pad_value holds zeros there, which are a pad value of their
     * own (black): such a caller asked for the default. */
    if (c->struct_size < offsetof(rf_config, pad_value) + sizeof c->pad_value)
        for (int k = 0; k < 3; k++)
            c->pad_value[k] = RF_PAD_VALUE_AUTO;
    int rc = rf_settings_check(c, err);
    if (rc)
        return rc;
    rf_buckets bk;
    if ((rc = rf_buckets_parse(c->size_buckets, &bk, err)) != 0)
        return rc;
    mem_defaults(c);
    config_resolve(c, &bk);
    if (!(c->scale_min > 0 && c->scale_min <= c->scale_max && c->ratio_min > 0 &&
          c->ratio_min <= c->ratio_max))
        return rf_seterr(err, RF_EINVAL, "invalid scale (%g, %g) or ratio (%g, %g)",
                         c->scale_min, c->scale_max, c->ratio_min, c->ratio_max);
    if (c->label_source == RF_LABEL_JSON && c->source == RF_SOURCE_TAR &&
        rf_json_path_check(c->label_json_path, err))
        return err->code;
    if ((rc = rf_tar_exts_check(c->image_exts, err)) != 0)
        return rc;
    if ((c->gpu_decode || c->hw_decode_percent) && c->decode_schedule != RF_SCHEDULE_MANUAL)
        return rf_seterr(err, RF_EINVAL, "gpu_decode and hw_decode_percent are the manual "
                         "schedule's settings; decode_schedule %s takes neither",
                         c->decode_schedule == RF_SCHEDULE_CPU ? "CPU" : "BALANCE");
    if (c->crop == RF_CROP_NATIVE && (rc = native_check(c, err)) != 0)
        return rc;
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
    int views = c->multi_crop && *c->multi_crop;
    if (views && c->source == RF_SOURCE_TOKENS)
        return rf_seterr(err, RF_EINVAL, "multi_crop cuts images into views; a token source has "
                         "none");
    if (views && c->crop == RF_CROP_NATIVE)
        return rf_seterr(err, RF_EINVAL, "multi_crop: each view has the size its group names; "
                         "crop native (each image at its own size) cannot give it");
    if (views && c->sample_hook)
        return rf_seterr(err, RF_EINVAL, "multi_crop: sample_hook is handed one image per "
                         "sample, and with views a sample has several; unset one of them");
    if (c->multi_label && c->source == RF_SOURCE_TOKENS)
        return rf_seterr(err, RF_EINVAL, "multi_label applies to labelled images; a token "
                         "source has no labels");
    if (c->multi_label == RF_MULTI_LABEL_MULTIHOT && (!c->num_classes || c->num_classes > 65536))
        return rf_seterr(err, RF_EINVAL, "multi_label multihot: each sample's row is "
                         "num_classes wide; set num_classes (1..65536), not %u", c->num_classes);
    if (c->multi_label == RF_MULTI_LABEL_LIST && !c->max_labels)
        return rf_seterr(err, RF_EINVAL, "multi_label list: set max_labels (1..65536), the "
                         "width of each sample's list");
    if (c->source == RF_SOURCE_TOKENS) {
        /* their rows' ranges hold besides AUTO (0: unset), which a token source may not leave */
        if (c->token_bytes != 2 && c->token_bytes != 4)
            return rf_seterr(err, RF_EINVAL, "tokens: token_bytes must be 2 or 4, not %u",
                             c->token_bytes);
        if (c->seq_len == 0)
            return rf_seterr(err, RF_EINVAL, "tokens: seq_len must be in 1..16M, not 0");
        if (c->token_dtype != RF_DTYPE_UINT16 && c->token_dtype != RF_DTYPE_INT32 &&
            c->token_dtype != RF_DTYPE_INT64)
            return rf_seterr(err, RF_EINVAL, "tokens: token_dtype must be UINT16, INT32 or INT64");
        if (c->token_dtype == RF_DTYPE_UINT16 && c->token_bytes == 4)
            return rf_seterr(err, RF_EINVAL, "tokens: 4-byte tokens cannot narrow to UINT16");
    }
    if (c->dtype != RF_DTYPE_UINT8 && c->dtype != RF_DTYPE_FLOAT16 &&
        c->dtype != RF_DTYPE_BFLOAT16 && c->dtype != RF_DTYPE_FLOAT32)
        return rf_seterr(err, RF_EINVAL, "images: dtype must be UINT8, FLOAT16, BFLOAT16 or "
                                         "FLOAT32, not %u", c->dtype);
    for (int i = 0; i < 3; i++)
        if (!(c->std[i] > 0) && !(c->std[i] < 0))
            return rf_seterr(err, RF_EINVAL, "std[%d] must be non-zero", i);
    if ((rc = mask_check(c, err)) != 0 || (rc = buckets_check(c, &bk, err)) != 0)
        return rc;
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
