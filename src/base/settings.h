/* settings.h — rf_config's settings, one row each, in declaration order: the one home of a
 * setting's type, default, valid range, unit, owning stage and one-line doc.
 * Internal: nothing here is part of the public API; rf_config_settings() exports the rows.
 *
 * DESIGN
 * Everything else about a setting is made from its row. settings.c turns the rows into the
 * table rf_config_settings() returns, and from that table rf_config_init writes the defaults,
 * rf_settings_resolve gives a field left AUTO its fixed default and rf_settings_check refuses a
 * value out of range by name; layout.h lists rf_config's fields for rf_abi_layout from the same
 * rows. The Python binding builds its ctypes mirror and the checks of its keyword arguments
 * from the exported table, and ringfeed-bench its flags, usage and --show-config lines, so a
 * new setting is its row here, its field in include/ringfeed.h (the spec, which
 * tests/test_api.c holds the rows against) and the code that reads it (docs/architecture.md,
 * "How to add a setting").
 *
 * One rule for defaults (include/ringfeed.h, "Defaults"): a field holding its AUTO value asks
 * for its default. AUTO is 0 except where a row names another (flip_prob, decode_nice: 0 is a
 * setting of theirs); a default is a fixed value, or a rule create applies, kept here as the
 * text the tools print.
 *
 * A row: X(A, name, type, default, range, unit, stage, flags, doc), A passed through for the
 * caller, where
 *   type     BOOL, U32, I32, U64, F32, F32X3, ENUM, STR, STRS, PTR, FUNC, U32S or F32S
 *            (enum rf_setting_type);
 *   default  DEF(integer), DEF_F(float), DEF_S(string): fixed, AUTO being 0 (NULL);
 *            AUTO_RULE(auto value, "rule"), AUTO_RULE_F(...): decided at create;
 *   range    RANGE(min, max), RANGE_F(min, max): the valid values besides AUTO;
 *            NAMES(max, "names"): an enum's values 0..max, named in value order; NO_RANGE;
 *   unit     "" when none; stage: the src/ folder (or loaders) whose code reads it;
 *   flags    0 or RF_SETTING_* (include/ringfeed.h). */
#ifndef RF_SETTINGS_H
#define RF_SETTINGS_H

#include <float.h>
#include <stdint.h>

#include "base/common.h"
#include "ringfeed.h"

/* enum rf_dtype's names; for token_dtype, whose 0 is AUTO, the first is "auto" */
#define RF_DTYPE_NAMES "uint8,int32,int64,uint16,float16,bfloat16,float32"
#define RF_TOKEN_DTYPE_NAMES "auto,int32,int64,uint16,float16,bfloat16,float32"

/* clang-format off */
#define RF_SETTINGS(X, A)                                                                          \
    X(A, struct_size, U32, AUTO_RULE(0, "sizeof(rf_config) as the caller knows it"), NO_RANGE,     \
      "bytes", "pipeline", RF_SETTING_HEADER, "the struct's size, set by rf_config_init")          \
    X(A, version, U32, AUTO_RULE(0, "RF_CONFIG_VERSION"), NO_RANGE, "", "pipeline",                \
      RF_SETTING_HEADER, "the struct's layout version, set by rf_config_init")                     \
    X(A, shards, STRS, DEF_S(NULL), NO_RANGE, "", "loaders", RF_SETTING_INPUT,                     \
      "shard patterns: paths, globs, brace ranges or URLs")                                        \
    X(A, shard_count, U32, DEF(0), RANGE(1, UINT32_MAX), "patterns", "loaders", RF_SETTING_INPUT,  \
      "patterns in shards")                                                                        \
    X(A, batch_size, U32, DEF(256), RANGE(1, UINT32_MAX), "samples", "plan", 0,                    \
      "samples per batch")                                                                         \
    X(A, image_size, U32, DEF(224), RANGE(1, 8192), "px", "decode", 0,                             \
      "output side: height and width when they are AUTO")                                          \
    X(A, crop, ENUM, DEF(RF_CROP_RANDOM),                                                          \
      NAMES(RF_CROP_NATIVE, "random,center,letterbox,center_pad,native"), "", "decode", 0,         \
      "RandomResizedCrop, Resize + CenterCrop, letterbox, CenterCrop padded, or native size")      \
    X(A, layout, ENUM, DEF(RF_LAYOUT_NHWC), NAMES(RF_LAYOUT_NCHW, "nhwc,nchw"), "", "decode", 0,   \
      "memory layout of the output")                                                               \
    X(A, resize_shorter, U32, AUTO_RULE(0, "max(height, width) * 256 / 224, rounded"),             \
      RANGE(1, UINT32_MAX), "px", "decode", 0, "center, center_pad: shorter side, then crop")      \
    X(A, scale_min, F32, DEF_F(0.08), RANGE_F(0, 1), "", "decode", 0,                              \
      "RandomResizedCrop: least area fraction")                                                    \
    X(A, scale_max, F32, DEF_F(1.0), RANGE_F(0, 1), "", "decode", 0,                               \
      "RandomResizedCrop: largest area fraction")                                                  \
    X(A, ratio_min, F32, DEF_F(3.0 / 4.0), RANGE_F(0, FLT_MAX), "", "decode", 0,                   \
      "RandomResizedCrop: least aspect ratio")                                                     \
    X(A, ratio_max, F32, DEF_F(4.0 / 3.0), RANGE_F(0, FLT_MAX), "", "decode", 0,                   \
      "RandomResizedCrop: largest aspect ratio")                                                   \
    X(A, flip_prob, F32, AUTO_RULE_F(RF_FLIP_PROB_AUTO, "0.5 for RANDOM, 0 for CENTER"),           \
      RANGE_F(0, 1), "", "decode", 0, "horizontal flip probability; any negative value is AUTO")   \
    X(A, seed, U64, DEF(0), RANGE(0, UINT64_MAX), "", "plan", 0,                                   \
      "seed of the epoch order and every augmentation")                                            \
    X(A, order, ENUM, DEF(RF_ORDER_GLOBAL), NAMES(RF_ORDER_SHARD, "global,none,shard"), "",        \
      "plan", 0, "epoch order")                                                                    \
    X(A, drop_last, BOOL, DEF(0), RANGE(0, 1), "", "plan", 0,                                      \
      "drop the last partial batch of each rank's epoch")                                          \
    X(A, rank, U32, DEF(0), RANGE(0, UINT32_MAX - 1), "", "plan", 0, "this process' rank")         \
    X(A, world_size, U32, DEF(1), RANGE(1, UINT32_MAX), "ranks", "plan", 0,                        \
      "ranks sharing the epoch")                                                                   \
    X(A, remainder, ENUM, DEF(RF_REMAINDER_PAD), NAMES(RF_REMAINDER_DROP, "pad,drop"), "", "plan", \
      0, "what a rank does with the samples left over")                                            \
    X(A, epochs, U32, DEF(0), RANGE(0, UINT32_MAX), "epochs", "plan", 0,                           \
      "epochs before RF_DONE, 0 for ever")                                                         \
    X(A, start_epoch, U64, DEF(0), RANGE(0, UINT64_MAX), "", "plan", 0,                            \
      "first epoch number, unless resuming")                                                       \
    X(A, decode_threads, U32, AUTO_RULE(0, "rf_cpu_count(), at most 1024"), RANGE(1, 1024),        \
      "threads", "pipeline", 0, "decode threads")                                                  \
    X(A, io_threads, U32,                                                                          \
      AUTO_RULE(0, "io_uring 1 (GPU decode: 1 per 3 decode threads, up to 4), pread 4"),           \
      RANGE(1, 64), "threads", "io", 0, "I/O threads")                                             \
    X(A, io_engine, ENUM, AUTO_RULE(RF_IO_AUTO, "io_uring when the kernel allows it, else pread"), \
      NAMES(RF_IO_PREAD, "auto,io_uring,pread"), "", "io", 0, "read engine")                       \
    X(A, io_queue_depth, U32, DEF(64), RANGE(1, 4096), "reads", "io", 0,                           \
      "reads in flight per I/O thread")                                                            \
    X(A, prefetch_depth, U32, AUTO_RULE(0, "4; 8 with GPU decode or BALANCE; 1 when naive"),       \
      RANGE(1, 64), "batches", "pipeline", 0, "batch slots in the ring")                           \
    X(A, device_kind, ENUM, AUTO_RULE(RF_DEVICE_AUTO, "cuda when a GPU is usable, else host"),     \
      NAMES(RF_DEVICE_CUDA, "auto,host,cuda"), "", "backend", 0, "where batches go")               \
    X(A, device_index, I32, DEF(0), RANGE(0, INT32_MAX), "", "backend", 0, "CUDA device ordinal")  \
    X(A, staging_bytes, U64,                                                                       \
      AUTO_RULE(0, "max(64 MiB, 8 x mean sample x (threads + queue)); tokens 1 MiB"),              \
      RANGE(1, UINT64_MAX), "bytes", "pipeline", 0,                                                \
      "bytes of the read arena, at least 4 x the largest sample")                                  \
    X(A, max_sample_bytes, U64, DEF(64ull << 20), RANGE(1, UINT64_MAX), "bytes", "loaders", 0,     \
      "largest sample")                                                                            \
    X(A, max_image_pixels, U64, DEF(100000000), RANGE(1, UINT64_MAX), "px", "decode", 0,           \
      "largest width x height of an image")                                                        \
    X(A, max_image_dim, U32, DEF(32768), RANGE(1, UINT32_MAX), "px", "decode", 0,                  \
      "largest width or height of an image")                                                       \
    X(A, io_retries, U32, DEF(8), RANGE(1, UINT32_MAX), "retries", "io", 0,                        \
      "retries of a transient read error")                                                         \
    X(A, resume_state, PTR, DEF(0), NO_RANGE, "", "plan", RF_SETTING_INPUT,                        \
      "a state from rf_loader_state to resume from")                                               \
    X(A, resume_state_bytes, U64, DEF(0), RANGE(0, UINT64_MAX), "bytes", "plan", RF_SETTING_INPUT, \
      "bytes of resume_state")                                                                     \
    X(A, dtype, ENUM, DEF(RF_DTYPE_UINT8), NAMES(RF_DTYPE_FLOAT32, RF_DTYPE_NAMES), "", "backend", \
      0, "output element type of images: uint8, or float normalized by mean and std")              \
    X(A, mean, F32X3, DEF_F(0), RANGE_F(-FLT_MAX, FLT_MAX), "pixel", "backend", 0,                 \
      "per-channel mean subtracted from float outputs (0..255 units)")                             \
    X(A, std, F32X3, DEF_F(1), RANGE_F(-FLT_MAX, FLT_MAX), "pixel", "backend", 0,                  \
      "per-channel divisor of float outputs (0..255 units; never 0)")                              \
    X(A, source, ENUM, DEF(RF_SOURCE_TAR), NAMES(RF_SOURCE_TOKENS, "tar,folder,tokens"), "",       \
      "loaders", 0, "what shards holds")                                                           \
    X(A, token_bytes, U32, DEF(0), RANGE(2, 4), "bytes", "loaders", RF_SETTING_TOKENS,             \
      "TOKENS: bytes per token on disk, 2 or 4, required")                                         \
    X(A, seq_len, U32, DEF(0), RANGE(1, 1u << 24), "tokens", "loaders", RF_SETTING_TOKENS,         \
      "TOKENS: tokens per window (plus one), required")                                            \
    X(A, token_windows, ENUM, DEF(RF_WINDOWS_RANDOM),                                              \
      NAMES(RF_WINDOWS_SEQUENTIAL, "random,sequential"), "", "loaders", RF_SETTING_TOKENS,         \
      "TOKENS: where windows start")                                                               \
    X(A, token_dtype, ENUM, AUTO_RULE(0, "as on disk: uint16 for 2 bytes, int32 for 4"),           \
      NAMES(RF_DTYPE_FLOAT32, RF_TOKEN_DTYPE_NAMES), "", "backend", RF_SETTING_TOKENS,             \
      "TOKENS: output type, uint16, int32 or int64")                                               \
    X(A, shard_window, U32, DEF(4), RANGE(1, UINT32_MAX), "shards", "plan", 0,                     \
      "shards mixed together under order shard")                                                   \
    X(A, on_error, ENUM, DEF(RF_ON_ERROR_FAIL), NAMES(RF_ON_ERROR_SKIP, "fail,skip"), "",          \
      "pipeline", 0, "a bad sample stops the loader, or is skipped and counted")                   \
    X(A, max_consecutive_skips, U32, DEF(100), RANGE(1, UINT32_MAX), "samples", "pipeline", 0,     \
      "on_error skip: more skips in a row is an error")                                            \
    X(A, max_scans, U32, DEF(1000), RANGE(1, UINT32_MAX), "scans", "decode", 0,                    \
      "most scans of a progressive JPEG")                                                          \
    X(A, max_name_bytes, U32, DEF(4096), RANGE(1, 4096), "bytes", "loaders", 0,                    \
      "longest tar GNU long name or pax record")                                                   \
    X(A, warm, BOOL, DEF(0), RANGE(0, 1), "", "pipeline", 0,                                       \
      "hint upcoming shard bytes into the page cache")                                             \
    X(A, warm_bytes, U64, DEF(1ull << 30), RANGE(1, UINT64_MAX), "bytes", "pipeline", 0,           \
      "how far ahead warm hints")                                                                  \
    X(A, odirect, BOOL, DEF(0), RANGE(0, 1), "", "io", 0,                                          \
      "read with O_DIRECT, bypassing the page cache")                                              \
    X(A, hugepages, BOOL, DEF(0), RANGE(0, 1), "", "backend", 0, "back the ring with 2 MiB pages") \
    X(A, numa, ENUM, DEF(RF_NUMA_AUTO), NAMES(RF_NUMA_OFF, "auto,off"), "", "backend", 0,          \
      "place threads and ring on the GPU's NUMA node")                                             \
    X(A, naive, BOOL, DEF(0), RANGE(0, 1), "", "pipeline", 0,                                      \
      "the plain baseline, for measurement: no prefetch, one read at a time")                      \
    X(A, decode_nice, U32, AUTO_RULE(RF_DECODE_NICE_AUTO, "10"), RANGE(0, 19), "", "pipeline", 0,  \
      "niceness the decode threads add to their own")                                              \
    X(A, gpu_decode, BOOL, DEF(0), RANGE(0, 1), "", "pipeline", 0,                                 \
      "decode baseline JPEGs on the GPU")                                                          \
    X(A, gpu_decode_percent, U32, DEF(100), RANGE(1, 100), "%", "pipeline", 0,                     \
      "with gpu_decode: share of eligible images sent to the GPU")                                 \
    X(A, hw_decode_percent, U32, DEF(0), RANGE(0, 100), "%", "pipeline", 0,                        \
      "share of images for the GPU's hardware JPEG decoders")                                      \
    X(A, next_timeout_ms, U32, DEF(0), RANGE(0, UINT32_MAX), "ms", "pipeline", 0,                  \
      "longest wait for a batch, 0 for ever")                                                      \
    X(A, dct_scaling, ENUM, DEF(RF_DCT_SCALING_AUTO), NAMES(RF_DCT_SCALING_ON, "auto,off,on"), "", \
      "decode", 0, "decode at 1/2..1/8 scale when the crop allows")                                \
    X(A, label_source, ENUM, DEF(RF_LABEL_CLS), NAMES(RF_LABEL_JSON, "cls,none,json"), "",         \
      "loaders", 0, "where tar samples' labels come from")                                         \
    X(A, sample_hook, FUNC, DEF(0), NO_RANGE, "", "pipeline", RF_SETTING_C_ONLY,                   \
      "a function called on every decoded image")                                                  \
    X(A, sample_hook_ctx, PTR, DEF(0), NO_RANGE, "", "pipeline", RF_SETTING_C_ONLY,                \
      "passed to every call of sample_hook")                                                       \
    X(A, fields, STR, DEF_S(NULL), NO_RANGE, "", "pipeline", 0,                                    \
      "extra members delivered per batch: extensions, comma-separated")                            \
    X(A, max_field_bytes, U32, DEF(16u << 10), RANGE(1, 64u << 20), "bytes", "pipeline", 0,        \
      "largest member a field accepts")                                                            \
    X(A, image_height, U32, AUTO_RULE(0, "image_size"), RANGE(1, 8192), "px", "decode", 0,         \
      "output height")                                                                             \
    X(A, image_width, U32, AUTO_RULE(0, "image_size"), RANGE(1, 8192), "px", "decode", 0,          \
      "output width")                                                                              \
    X(A, label_json_path, STR, DEF_S(NULL), NO_RANGE, "", "loaders", 0,                            \
      "label json: the label's dotted path in KEY.json")                                           \
    X(A, image_exts, STR, DEF_S("jpg,jpeg,png,webp"), NO_RANGE, "", "loaders", 0,                  \
      "a tar sample's image member: extensions, most preferred first")                             \
    X(A, decode_schedule, ENUM, DEF(RF_SCHEDULE_AUTO),                                             \
      NAMES(RF_SCHEDULE_BALANCE, "auto,cpu,manual,balance"), "", "pipeline", 0,                    \
      "where JPEGs are decoded")                                                                   \
    X(A, remote_retries, U32, DEF(5), RANGE(1, 100), "retries", "io", 0,                           \
      "URL shards: retries of one request")                                                        \
    X(A, remote_timeout_ms, U32, DEF(30000), RANGE(1, 3600000), "ms", "io", 0,                     \
      "URL shards: connect timeout and stall window")                                              \
    X(A, cache_dir, STR, DEF_S(NULL), NO_RANGE, "", "io", 0,                                       \
      "URL shards: the local shard cache's directory")                                             \
    X(A, cache_bytes, U64, DEF(0), RANGE(1, UINT64_MAX), "bytes", "io", 0,                         \
      "the shard cache's budget (required with cache_dir)")                                        \
    X(A, num_classes, U32, DEF(0), RANGE(1, INT32_MAX), "classes", "pipeline", 0,                  \
      "classes the labels count: each must be below it")                                         \
    X(A, source_shards, U32S, DEF(0), NO_RANGE, "patterns", "plan", RF_SETTING_INPUT,              \
      "patterns of each source, in shards' order")                                                 \
    X(A, source_count, U32, DEF(0), RANGE(0, UINT32_MAX), "sources", "plan", RF_SETTING_INPUT,     \
      "entries in source_shards")                                                                  \
    X(A, weights, F32S, DEF(0), NO_RANGE, "", "plan", RF_SETTING_INPUT,                            \
      "each source's share of an epoch's positions")                                               \
    X(A, weight_count, U32, DEF(0), RANGE(0, UINT32_MAX), "sources", "plan", RF_SETTING_INPUT,     \
      "entries in weights")                                                                        \
    X(A, epoch_size, U64, AUTO_RULE(0, "the dataset's samples"), RANGE(1, UINT64_MAX), "samples",  \
      "plan", 0, "order positions per epoch (resampling)")                                        \
    X(A, replacement, ENUM, AUTO_RULE(RF_REPLACEMENT_AUTO, "on with class or sample weights"),    \
      NAMES(RF_REPLACEMENT_ON, "auto,off,on"), "", "plan", 0,                                      \
      "draw a source's samples with replacement")                                                  \
    X(A, class_weights, F32S, DEF(0), NO_RANGE, "", "plan", RF_SETTING_INPUT,                      \
      "weight of each class id within its source")                                                 \
    X(A, class_weight_count, U32, DEF(0), RANGE(0, UINT32_MAX), "classes", "plan",                 \
      RF_SETTING_INPUT, "entries in class_weights")                                                \
    X(A, sample_weights, F32S, DEF(0), NO_RANGE, "", "plan", RF_SETTING_INPUT,                     \
      "weight of each sample within its source")                                                   \
    X(A, sample_weight_count, U64, DEF(0), RANGE(0, UINT64_MAX), "samples", "plan",                \
      RF_SETTING_INPUT, "entries in sample_weights")                                              \
    X(A, source_labels, STRS, DEF_S(NULL), NO_RANGE, "", "pipeline", RF_SETTING_INPUT,             \
      "tar: each source's label rule (source_count entries)")                                      \
    X(A, sync_index, ENUM, DEF(RF_SYNC_INDEX_BUILD), NAMES(RF_SYNC_INDEX_OFF, "build,read,off"),   \
      "", "pipeline", 0, "sync-point indexes for plain JPEGs' GPU decode: build, read or off") \
    X(A, multi_label, ENUM, DEF(RF_MULTI_LABEL_OFF),                                               \
      NAMES(RF_MULTI_LABEL_LIST, "off,multihot,list"), "", "pipeline", 0,                          \
      "several class ids per label: a multi-hot row or a padded list")                             \
    X(A, max_labels, U32, DEF(0), RANGE(1, 65536), "ids", "pipeline", 0,                           \
      "multi_label list: the list's width")                                                        \
    X(A, box_ext, STR, DEF_S(NULL), NO_RANGE, "", "pipeline", 0,                                   \
      "boxes: their member's extension, json (default) or one ending in npy")                      \
    X(A, box_json_path, STR, DEF_S(NULL), NO_RANGE, "", "pipeline", 0,                             \
      "boxes: the dotted path to the array of boxes in their JSON member")                         \
    X(A, box_class_json_path, STR, DEF_S(NULL), NO_RANGE, "", "pipeline", 0,                       \
      "boxes: the dotted path to each box's class id")                                             \
    X(A, box_format, ENUM, DEF(RF_BOX_XYXY), NAMES(RF_BOX_CXCYWH, "xyxy,xywh,cxcywh"), "",         \
      "pipeline", 0, "boxes: how a box's four numbers read")                                       \
    X(A, box_normalized, BOOL, DEF(0), RANGE(0, 1), "", "pipeline", 0,                             \
      "boxes and keypoints: fractions of the image's size, not pixels")                            \
    X(A, box_min_visibility, F32, DEF_F(0.0), RANGE_F(0, 1), "", "pipeline", 0,                    \
      "boxes: the least fraction of a box's area left by the crop to keep it")                     \
    X(A, max_boxes, U32, DEF(0), RANGE(1, 65536), "boxes", "pipeline", 0,                          \
      "boxes: the width of a sample's rows")                                                       \
    X(A, keypoint_ext, STR, DEF_S(NULL), NO_RANGE, "", "pipeline", 0,                              \
      "keypoints: their JSON member's extension (default json)")                                   \
    X(A, keypoint_json_path, STR, DEF_S(NULL), NO_RANGE, "", "pipeline", 0,                        \
      "keypoints: the dotted path to the array of points")                                         \
    X(A, max_points, U32, DEF(0), RANGE(1, 65536), "points", "pipeline", 0,                        \
      "keypoints: the width of a sample's row")                                                    \
    X(A, keypoint_flip_pairs, STR, DEF_S(NULL), NO_RANGE, "", "pipeline", 0,                       \
      "keypoints: index pairs a flip swaps, \"1:2,3:4\"")                                      \
    X(A, box_output_normalized, BOOL, DEF(0), RANGE(0, 1), "", "pipeline", 0,                      \
      "boxes and keypoints out as fractions of the output's size, not pixels")                     \
    X(A, pad_value, F32X3, AUTO_RULE_F(RF_PAD_VALUE_AUTO, "114 for letterbox, 0 for center_pad"),  \
      RANGE_F(0, 255), "pixel", "decode", 0, "letterbox, center_pad: R, G, B of the padding")      \
    X(A, mask, STR, DEF_S(NULL), NO_RANGE, "", "pipeline", 0,                                      \
      "segmentation masks: the mask member's extension (seg.png), PNG")                            \
    X(A, mask_dtype, ENUM, DEF(RF_DTYPE_UINT8), NAMES(RF_DTYPE_INT32, "uint8,int32"), "",          \
      "pipeline", 0, "masks' element type; 16-bit masks need int32")                               \
    X(A, mask_fill, U32, AUTO_RULE(RF_MASK_FILL_AUTO, "255"), RANGE(0, INT32_MAX), "", "pipeline", \
      0, "mask value outside the image's output rectangle and of blank samples")                   \
    X(A, multi_crop, STR, DEF_S(NULL), NO_RANGE, "", "decode", 0,                                  \
      "views per sample, decoded once (2x224:0.4-1,6x96:0.05-0.4)")                            \
    X(A, size_buckets, STR, DEF_S(NULL), NO_RANGE, "", "plan", 0,                                  \
      "crop letterbox: batches of one aspect-ratio bucket (384x640,512x512,640x384)")
/* clang-format on */

/* The row of the field `name`, or NULL: for code that reads a row's own numbers (a limit a
 * rule must stay within) rather than copying them. */
const rf_setting *rf_settings_row(const char *name);

/* Give every field that holds its AUTO value its fixed default (a row without a rule): the
 * zeros of a caller that filled the struct without rf_config_init, or of a struct_size that
 * ends before a field. Fields whose default is a rule keep AUTO for create to decide. */
void rf_settings_resolve(rf_config *c);

/* 0 when every field holds its AUTO value or a value in its row's range (TOKENS rows only for
 * a token source); otherwise RF_EINVAL, the message naming the first field out of range, its
 * value and what it may be. The checks between fields are create's (src/pipeline/config.c). */
int rf_settings_check(const rf_config *c, rf_err *err);

#endif
