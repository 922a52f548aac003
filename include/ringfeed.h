/* ringfeed.h — the public C API of ringfeed, and its specification.
 *
 * ringfeed reads dataset shards with io_uring (or a pread pool) into a staging arena, decodes
 * and augments samples on a thread pool straight into a ring of pinned batch slots, and copies
 * finished batches to the GPU on its own streams, several batches ahead of the consumer.
 *
 * Conventions that hold for every function below:
 *  - Fallible calls return int: 0 on success, a negative code on failure. Codes are either
 *    -errno (passed through from the OS) or one of RF_E* below. rf_strerror() names either kind;
 *    rf_err_name() spells an RF_E* code's symbol, and rf_abi_layout() lists the codes with the
 *    layout of the public structs, for bindings to check theirs against.
 *  - Detail for the last failure of a loader (shard, member, byte offset, decoder message) is in
 *    rf_last_error(loader). Errors raised on worker threads are sticky: they surface at the next
 *    rf_loader_next() and every later call returns the same code.
 *  - No function here is static inline, variadic or takes a struct by value, and public structs
 *    use fixed-width types only, so a ctypes (or any FFI) binding reaches everything.
 *  - Structs that may grow start with struct_size and only grow at the end. Fill them with the
 *    matching *_init() function, never with a literal.
 *  - A loader is used by one consumer thread at a time (create/next/release/destroy/stats are not
 *    to be called concurrently on one loader; rf_loader_cancel is the one call another thread
 *    may make meanwhile). Different loaders are fully independent: ringfeed
 *    keeps no global state.
 *  - A loader belongs to the process that created it. After fork(), every call on it from the
 *    child (next, release, set_epoch, state, stats, trim, destroy; rf_batch_wait/synchronize on
 *    its CUDA batches) returns RF_EFORK or, for destroy, returns at once without freeing (the
 *    child's copy is left to the child's exit/exec); the parent is unaffected. A child creates
 *    its own loader. rf_loader_batches_per_epoch/num_samples only read numbers and still work.
 *  - A CUDA error while copying or releasing a batch is sticky and fatal (RF_ECUDA): every
 *    thread of the loader stops, a consumer blocked in rf_loader_next wakes and returns it,
 *    later calls return it, and rf_loader_destroy still completes.
 *  - Streams and events are passed as void* (a cudaStream_t / cudaEvent_t); NULL means the legacy
 *    default stream where a stream is expected.
 */
#ifndef RINGFEED_H
#define RINGFEED_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* RF_API marks exactly what libringfeed.so exports: everything else is hidden, and the version
 * script src/ringfeed.map keeps any other symbol local (ctest "symbols" compares the two). */
#if defined(RINGFEED_BUILDING)
#define RF_API __attribute__((visibility("default")))
#else
#define RF_API
#endif

/* ringfeed's version, in one place: rf_version() spells it, and the Python package's metadata
 * (pyproject.toml) and import-time check (python/ringfeed/_capi.py) read these three lines. */
#define RF_VERSION_MAJOR 0
#define RF_VERSION_MINOR 1
#define RF_VERSION_PATCH 0
/* Version of rf_config's layout; rf_config_init() stamps it. */
#define RF_CONFIG_VERSION 1

/* ---- return codes ------------------------------------------------------------------------ */

/* Positive results of rf_loader_next(): not errors, no batch is returned. */
#define RF_EPOCH_END 1 /* the current epoch has no more batches on this rank; call again for the next */
#define RF_DONE 2      /* the configured number of epochs has been delivered */

/* ringfeed's own error codes, all below any -errno: X(name, value, message) for each, in one
 * list from which the enum below, rf_strerror's messages and rf_err_name's names are all
 * made, so none of them can miss a code. The comment says when a code is returned. */
#define RF_ERRORS(X) \
    /* an argument or config field is invalid (rf_last_error says which) */ \
    X(RF_EINVAL, -1000, "invalid argument or configuration") \
    /* an allocation failed */ \
    X(RF_ENOMEM, -1001, "out of memory") \
    /* the shard patterns matched no file */ \
    X(RF_ENOFILES, -1002, "no shard matched the given patterns") \
    /* a shard is malformed (bad tar header, truncated member, ...) */ \
    X(RF_EFORMAT, -1003, "malformed shard") \
    /* an image could not be decoded (corrupt data, not a JPEG, PNG or WebP) */ \
    X(RF_EDECODE, -1004, "image decode failed") \
    /* a configured limit was exceeded (pixels, member size, ...) */ \
    X(RF_ELIMIT, -1005, "a configured limit was exceeded") \
    /* a read failed after bounded retries */ \
    X(RF_EIO, -1006, "read failed") \
    /* a CUDA runtime call failed; the loader is unusable */ \
    X(RF_ECUDA, -1007, "CUDA runtime error") \
    /* a CUDA device was requested but none is usable */ \
    X(RF_ENODEV, -1008, "no usable CUDA device") \
    /* call not valid in this state (e.g. releasing a batch twice) */ \
    X(RF_ESTATE, -1009, "call not valid in the loader's state") \
    /* a shard index disagrees with its shard */ \
    X(RF_EINDEX, -1010, "shard index disagrees with its shard") \
    /* a resume state is corrupt or does not match the dataset/config */ \
    X(RF_ERESUME, -1011, "resume state is corrupt or does not match") \
    /* the loader is shutting down, or was stopped (rf_loader_stop) */ \
    X(RF_ECLOSED, -1012, "loader is shutting down") \
    /* a label member is missing or not an integer 0..INT32_MAX, or a label is not below \
     * num_classes; or a box or keypoint annotation is missing or bad (rf_config.box_ext) */ \
    X(RF_ELABEL, -1013, "label missing or not an integer 0..2147483647") \
    /* the loader belongs to the process that created it, not a fork() child */ \
    X(RF_EFORK, -1014, "loader used from a fork() child of the process that created it") \
    /* rf_loader_next: no batch within next_timeout_ms (not sticky) */ \
    X(RF_ETIMEDOUT, -1015, "no batch within next_timeout_ms") \
    /* rf_config.sample_hook returned non-zero for a sample */ \
    X(RF_EHOOK, -1016, "the sample hook refused a sample")

enum rf_error {
#define RF_ERROR_ENUM_(name, value, message) name = value,
    RF_ERRORS(RF_ERROR_ENUM_)
#undef RF_ERROR_ENUM_
};

/* ---- enums used in rf_config ------------------------------------------------------------- */

enum rf_device_kind { RF_DEVICE_AUTO = 0, RF_DEVICE_HOST = 1, RF_DEVICE_CUDA = 2 };
enum rf_io_engine_kind { RF_IO_AUTO = 0, RF_IO_URING = 1, RF_IO_PREAD = 2 };
/* How each image becomes the H x W output (rf_config.crop): RANDOM is torchvision's
 * RandomResizedCrop, CENTER Resize(shorter -> resize_shorter) + CenterCrop with a crop larger
 * than the resized image clamped to it (no padding). LETTERBOX is Ultralytics' LetterBox
 * (auto=False, scaleup=True, center=True): the whole image resized with its aspect kept, by
 * r = min(H / h, W / w), to round(w * r) x round(h * r) (Python's round, half to even; at
 * least 1 pixel, at most H x W), placed at left = (W - new width) / 2 and top = (H - new
 * height) / 2 rounded down (Ultralytics' round(d - 0.1)), so an odd slack leaves its extra
 * pixel on the right or bottom. CENTER_PAD is torchvision's Resize(shorter -> resize_shorter)
 * + CenterCrop((H, W)) exactly, per axis: where the resized side n is shorter than the crop's
 * c, (c - n) / 2 rounded down of padding before it and the rest after, else the crop at
 * round((n - c) / 2). Every pixel no image lands on is rf_config.pad_value. The image inside
 * is the library's resize of the box (the whole image for LETTERBOX) to the rectangle's size
 * (antialiased bilinear, as PIL's and torchvision's antialias=True; not OpenCV's INTER_LINEAR
 * that Ultralytics uses, so pixels differ from its own, the geometry not). A flip mirrors the
 * whole output, padding included. NATIVE (ragged) delivers each image at its own size, the
 * whole image untouched when it fits in H x W, else scaled down to its LETTERBOX rectangle
 * (nothing padded, nothing scaled up), packed from its sample's start in a slot of H x W x 3
 * (rf_batch.sizes, sample_offsets; the flip mirrors the image); it refuses a sample_hook and a
 * float dtype with NCHW (RF_EINVAL). Memory: none of them adds any: the ring stays
 * prefetch_depth x batch_size x H x W x 3 (x the dtype's bytes), allocated once at create, so
 * for NATIVE H x W is the bound every sample reserves, the pixels a batch of small images
 * leaves unused included. All three run on every decode path: the GPU decoders
 * (gpu_decode, hw_decode_percent, BALANCE) resize onto the rectangle and pad around it, or
 * pack a NATIVE image at its own size, byte for byte the CPU's full-scale decode. */
enum rf_crop {
    RF_CROP_RANDOM = 0,
    RF_CROP_CENTER = 1,
    RF_CROP_LETTERBOX = 2,
    RF_CROP_CENTER_PAD = 3,
    RF_CROP_NATIVE = 4,
};
enum rf_layout { RF_LAYOUT_NHWC = 0, RF_LAYOUT_NCHW = 1 };
enum rf_dtype {
    RF_DTYPE_UINT8 = 0,
    RF_DTYPE_INT32 = 1,
    RF_DTYPE_INT64 = 2,
    RF_DTYPE_UINT16 = 3,
    RF_DTYPE_FLOAT16 = 4,
    RF_DTYPE_BFLOAT16 = 5,
    RF_DTYPE_FLOAT32 = 6,
};
/* Epoch order, a pure function of (seed, epoch, dataset); see docs/order.md.
 * GLOBAL: a uniform permutation of all samples (any sample can follow any other; reads are
 *   random over the whole dataset: best from page cache or SSD).
 * SHARD: shard order permuted, then samples permuted within each window of `shard_window`
 *   consecutive shards of that order (reads stay inside a few shards at a time: sequential-ish
 *   I/O for cold disks; samples mix only within a window).
 * NONE: dataset order (shards in the order given, members in file order). */
enum rf_order { RF_ORDER_GLOBAL = 0, RF_ORDER_NONE = 1, RF_ORDER_SHARD = 2 };
enum rf_source { RF_SOURCE_TAR = 0, RF_SOURCE_FOLDER = 1, RF_SOURCE_TOKENS = 2 };
/* RANDOM: each epoch draws every window's start uniformly over the file's valid starts (seeded);
 * SEQUENTIAL: non-overlapping windows at multiples of seq_len. Either way an epoch has
 * floor((tokens_in_file - 1) / seq_len) windows per file. */
enum rf_token_windows { RF_WINDOWS_RANDOM = 0, RF_WINDOWS_SEQUENTIAL = 1 };
enum rf_on_error { RF_ON_ERROR_FAIL = 0, RF_ON_ERROR_SKIP = 1 };
/* Where the labels of tar samples come from (rf_config.label_source). */
enum rf_label_source {
    RF_LABEL_CLS = 0,  /* the default: each sample's KEY.cls member, a required integer */
    RF_LABEL_NONE = 1, /* unlabelled data: every label is -1, nothing is read or checked */
    RF_LABEL_JSON = 2, /* an integer field of each sample's KEY.json member (label_json_path) */
};
/* Why a sample was skipped: indexes of rf_stats.skipped_by_reason. */
enum rf_skip_reason {
    RF_SKIP_TAR_HEADER = 0, /* bad tar header inside the sample span */
    RF_SKIP_TRUNCATED = 1,  /* member or file ends early */
    RF_SKIP_NOT_JPEG = 2,   /* payload is not a JPEG, PNG or WebP (no signature of one) */
    RF_SKIP_CORRUPT = 3,    /* corrupt JPEG data, or a libjpeg warning */
    RF_SKIP_TOO_LARGE = 4,  /* a limit: pixels, dimensions, scans, member size */
    RF_SKIP_IO = 5,         /* read error after retries */
    RF_SKIP_LABEL = 6,      /* label member missing, or not an integer 0..INT32_MAX, or a
                               label not below num_classes; or a bad or missing box or
                               keypoint annotation */
    RF_SKIP_HOOK = 7,       /* rf_config.sample_hook returned non-zero */
    RF_SKIP_FIELD = 8,      /* a member rf_config.fields or rf_config.mask asks for is
                               missing */
    RF_SKIP_MASK = 9,       /* the mask member (rf_config.mask) is not a mask the loader
                               takes: not a PNG, RGB or with alpha, gray under 8 bits, 16
                               bits with mask_dtype uint8, or of another size than its image */
    /* Entries of the skipped_by_reason arrays: room for reasons still to come, so adding one
     * does not move rf_stats' later fields again (it grew from 8 when the ninth arrived). */
    RF_SKIP_REASONS = 16
};
/* What libjpeg recovered from in a file it decodes without losing pixels: indexes of
 * rf_stats.recovered_by_kind. Each delivered sample counts once per kind it needed, on every
 * decode path (docs/reliability.md). */
enum rf_recovered {
    RF_RECOVERED_HEADER_BYTES = 0, /* bytes that are no marker between header segments, or a
                                      comment or APPn segment with a length under 2 (skipped
                                      as libjpeg skips them: "extraneous bytes"). Inside the
                                      scan the same warning is corrupt data: damaged data
                                      leave bytes over too */
    RF_RECOVERED_JFIF_VERSION = 1, /* an unknown JFIF revision (metadata only) */
    RF_RECOVERED_ICC = 2,          /* a malformed ICC profile marker (not applied anyway) */
    RF_RECOVERED_KINDS = 8         /* room for kinds to come */
};
/* DCT scaling: decoding an image at 1/2, 1/4 or 1/8 scale when its crop is at least twice the
 * output size in both directions (libjpeg's reduced IDCTs; 2-4x less decode work for such
 * images, other pixels: up to tens of levels at edges and in chroma, docs/gpu-decode.md).
 * AUTO: on for CPU-only runs (decode_schedule CPU), off for every image of a run with
 * gpu_decode, hw_decode_percent or decode_schedule BALANCE, so that a run's pixels never
 * depend on which engine decoded a sample (the GPU paths decode at full scale).
 * OFF: never (a CPU-only run then gives exactly a GPU-decode run's pixels).
 * ON: on for every schedule; with the GPU paths the crops it applies to are always decoded on
 * the CPU, scaled, so that a run's pixels are the CPU schedule's whatever the route, at the
 * cost of keeping those crops (about 1 in 9 of RandomResizedCrop's on photographs) on the
 * CPU. */
enum rf_sync_index_mode { RF_SYNC_INDEX_BUILD = 0, RF_SYNC_INDEX_READ = 1, RF_SYNC_INDEX_OFF = 2 };
/* Labels of several class ids per sample (rf_config.multi_label). */
enum rf_multi_label {
    RF_MULTI_LABEL_OFF = 0,      /* one integer per sample (rf_batch.labels) */
    RF_MULTI_LABEL_MULTIHOT = 1, /* rf_batch.label_multihot: count x num_classes 0/1 */
    RF_MULTI_LABEL_LIST = 2,     /* rf_batch.label_list: count x max_labels ids, -1 padded */
};
/* How a box's four numbers read (rf_config.box_format): corners, corner and size, or centre
 * and size. */
enum rf_box_format { RF_BOX_XYXY = 0, RF_BOX_XYWH = 1, RF_BOX_CXCYWH = 2 };
enum rf_dct_scaling { RF_DCT_SCALING_AUTO = 0, RF_DCT_SCALING_OFF = 1, RF_DCT_SCALING_ON = 2 };
/* Where JPEGs are decoded (rf_config.decode_schedule; docs/gpu-decode.md, "The scheduler").
 * AUTO resolves at create: MANUAL when gpu_decode or hw_decode_percent is set, else BALANCE on
 * the CUDA backend (with prefetch_depth 8 when that is AUTO too) where it can run, and the
 * CPU elsewhere (the host backend, naive, a sample_hook, tokens, batches of more than
 * 65,535 samples). CPU: libjpeg-turbo on the
 * decode threads only.
 * MANUAL: the seeded split of gpu_decode, gpu_decode_percent and hw_decode_percent.
 * BALANCE: the balancing scheduler (CUDA backend only; RF_EINVAL elsewhere; not with
 * naive, a sample_hook, tokens or batches of more than 65,535 samples, which AUTO gives the
 * CPU; on_error SKIP works with it):
 * the hardware
 * decoders (when libnvjpeg and engines are present; none is not an error), the CUDA kernels
 * and the CPU, with shares a controller moves by hill-climbing on the consumer's measured
 * rate (batches handed out per second, training step included), starting from the CPU only
 * once the consumer has its first batch (the ring's first fill, before it, goes to the CUDA
 * kernels: the quickest way to that batch, with no training step on the GPU yet),
 * and only while the loader is the bound (the GPU share goes down while it keeps up), no
 * percentage to tune; every image is decoded at full scale (dct_scaling AUTO resolves to OFF;
 * with ON a crop the CPU would DCT-scale is always decoded on the CPU), so a sample's pixels
 * do not depend on where it went and equal the CPU schedule's at the same dct_scaling (up to
 * the engines' IDCT rounding). */
enum rf_decode_schedule {
    RF_SCHEDULE_AUTO = 0,
    RF_SCHEDULE_CPU = 1,
    RF_SCHEDULE_MANUAL = 2,
    RF_SCHEDULE_BALANCE = 3
};
/* rf_stats.hw_engines: the hardware decoders as the scheduler sees them. UNOPENED: BALANCE
 * has not needed them yet (they open the first time its GPU share reaches half the images). */
enum rf_hw_engines {
    RF_HW_ENGINES_NONE = 0,
    RF_HW_ENGINES_OPENING = 1,
    RF_HW_ENGINES_READY = 2,
    RF_HW_ENGINES_UNOPENED = 3
};
/* Thread and memory placement. AUTO: on the GPU's NUMA node (from sysfs) when the machine has
 * several nodes, nothing on a single-node machine. OFF: never move threads or memory. */
enum rf_numa { RF_NUMA_AUTO = 0, RF_NUMA_OFF = 1 };
/* What a rank does with the samples left over when the epoch does not split evenly. */
enum rf_remainder { RF_REMAINDER_PAD = 0, RF_REMAINDER_DROP = 1 };
/* rf_config.replacement */
enum rf_replacement { RF_REPLACEMENT_AUTO = 0, RF_REPLACEMENT_OFF = 1, RF_REPLACEMENT_ON = 2 };

/* ---- the per-sample hook ----------------------------------------------------------------- */

/* One decoded sample as rf_config.sample_hook sees it: the image already cropped, resized and
 * flipped to its output size, as uint8 in the slot, before any conversion (dtype, mean/std)
 * and before the copy to the device. Channel c of pixel (y, x) is
 * pixels[y * row_stride + x * pixel_stride + c * channel_stride]. */
typedef struct rf_sample_view {
    uint32_t struct_size;     /* sizeof(rf_sample_view) as the library knows it */
    uint32_t layout;          /* enum rf_layout of `pixels`: rf_config.layout when dtype is
                                 RF_DTYPE_UINT8; NHWC for the float dtypes (the conversion
                                 writes the requested layout afterwards) */
    uint32_t height, width;   /* image_size, image_size */
    uint32_t channels;        /* 3 (RGB) */
    uint32_t is_padding;      /* 1: a repeated sample padding this rank (rf_batch.is_padding) */
    uint8_t *pixels;          /* the sample's own bytes, writable, valid during the call only */
    uint64_t row_stride;      /* bytes from row y to y + 1: width * 3 (NHWC), width (NCHW) */
    uint64_t pixel_stride;    /* bytes from column x to x + 1: 3 (NHWC), 1 (NCHW) */
    uint64_t channel_stride;  /* bytes from channel c to c + 1: 1 (NHWC), height * width (NCHW) */
    uint64_t sample_id;       /* as rf_batch.sample_ids: the dataset index */
    uint64_t position;        /* as rf_batch.positions: the place in the epoch order */
    uint64_t epoch;           /* the epoch this sample is delivered in */
    uint64_t seed;            /* a per-sample seed, a function of (rf_config.seed, epoch,
                                 sample_id) only: the same at any thread count, rank or resume
                                 position, and apart from the draws that chose the crop */
    const char *key;          /* as rf_batch.keys: the sample's key, NUL-terminated */
    int32_t *label;           /* the label to be delivered (-1 for RF_LABEL_NONE); the hook may
                                 overwrite it, and any value it writes is delivered as is.
                                 With rf_config.multi_label it is the first id: a value written
                                 changes rf_batch.labels only, never the sample's multi-label
                                 row, which holds the ids its data gave */
    /* The sample's extra fields (rf_config.fields), read-only, in the list's order: field f is
     * named field_names[f] and holds field_lengths[f] bytes at field_data[f], as its row of
     * rf_batch.fields will (a padding repeat's are empty). nfields 0: none asked for, and the
     * three pointers are NULL. A hook built against an older header reads none of them. */
    uint32_t nfields;
    const char *const *field_names;
    const uint8_t *const *field_data;
    const uint32_t *field_lengths;
} rf_sample_view;

/* rf_config.sample_hook: user augmentation at decode speed (colour jitter, noise, ...).
 * Thread: called on the decode threads, up to decode_threads calls at once with the same ctx,
 * each for a different sample, never with the loader's lock held; it must be reentrant (keep
 * per-call state on the stack or derive it from view->seed; shared state in ctx needs the
 * caller's own synchronization). Order: samples are not called in any particular order, so
 * reproducible output must depend only on the view (use view->seed, never a shared random
 * generator). When: once per decoded sample, after the decode and before the host conversion,
 * padding repeats included (they get their original's seed, so the same pixels); not for the
 * blank (zero) samples skip mode pads with, nor for token sources (refused at create).
 * May touch: the view's pixels and *label, and its own ctx; nothing else of the loader (no
 * rf_loader_* call on it: the consumer's thread owns those). The view and its pointers are
 * valid during the call only. Time spent in it counts in rf_stats.decode_busy_ns and delays
 * the batch; it must return (rf_loader_stop and rf_loader_destroy wait for calls in progress).
 * Return 0 to keep the sample; any other value makes the sample bad input under on_error:
 * FAIL raises RF_EHOOK naming the shard, member and byte offset, the value returned, the
 * sample id and epoch; SKIP leaves it out, counted under RF_SKIP_HOOK. */
typedef int (*rf_sample_hook)(const rf_sample_view *view, void *ctx);

/* ---- configuration ----------------------------------------------------------------------- */

/* Defaults: one rule for every field. Each field has a default, and an AUTO value that asks
 * for it: 0 (RF_AUTO, or the enum's *_AUTO) in every field but flip_prob and decode_nice,
 * where 0 is a setting of its own (no flips; no added niceness) and AUTO is RF_FLIP_PROB_AUTO
 * (any negative value) and RF_DECODE_NICE_AUTO. A default is a fixed value, as each field's
 * comment says ("default 256"), or a rule on the machine, the data set, the device or other
 * fields (thread counts, prefetch depth, staging bytes, ...: "default AUTO: ..."), applied at
 * create; a default of "none" (NULL, 0) leaves the field unset. rf_config_init() writes every
 * fixed default and AUTO where the default is a rule; rf_loader_create() gives every field
 * that holds AUTO its default, so the zeros of a caller that filled the struct without
 * rf_config_init() (or of a struct_size that ends before a field) ask for the defaults too,
 * except in flip_prob, decode_nice and pad_value, where they mean no flips, no added
 * niceness and black padding (a struct_size that ends before pad_value asks for its default).
 * rf_loader_config() reports every value a created loader uses. Each field is one row of
 * rf_config_settings() (at the end of this header): its default or rule, AUTO value, valid
 * range, unit and the stage that reads it; create refuses a value out of that range with
 * RF_EINVAL naming the field. */
#define RF_AUTO 0
#define RF_FLIP_PROB_AUTO (-1.0f)
#define RF_PAD_VALUE_AUTO (-1.0f) /* pad_value (all three): 114 for LETTERBOX, else 0 */
#define RF_DECODE_NICE_AUTO 0xFFFFFFFFu /* 10 (RF_DEFAULT_DECODE_NICE) */
#define RF_DEFAULT_DECODE_NICE 10u
#define RF_MASK_FILL_AUTO 0xFFFFFFFFu /* 255 (RF_DEFAULT_MASK_FILL) */
#define RF_DEFAULT_MASK_FILL 255u

typedef struct rf_config {
    uint32_t struct_size; /* sizeof(rf_config) as the caller knows it; set by rf_config_init */
    uint32_t version;     /* RF_CONFIG_VERSION; set by rf_config_init */

    /* Data. `shards` holds shard_count patterns: plain paths, globs (`train-??.tar`, `*.tar`) and brace
     * ranges (`train-{000000..000099}.tar`), expanded and concatenated in the order given.
     * The strings are copied during rf_loader_create(). Tar shards and token files may be
     * URLs instead: http://, https:// or s3://BUCKET/KEY (brace ranges expand as for paths;
     * wildcards only in s3:// patterns, listed with ListObjectsV2; all patterns URLs or none),
     * read with ranged GETs through libcurl (a token window is one GET): docs/remote.md (S3
     * settings from the AWS_* environment, remote_retries, remote_timeout_ms, cache_dir, and
     * rf_stats.remote_*). A FOLDER source reads local files only (a URL is RF_EINVAL). */
    const char *const *shards; /* default: NULL (none; create needs at least one) */
    uint32_t shard_count;      /* default: 0 */

    /* Batch shape. Every image is cropped and resized to H x W x 3 uint8, where H and W are
     * image_height and image_width (at the end of the struct), each image_size when left AUTO:
     * square callers set image_size alone. */
    uint32_t batch_size;     /* default 256 */
    uint32_t image_size;     /* output height = width when image_height / image_width are
                              * AUTO; default 224 */
    uint32_t crop;           /* enum rf_crop; default RF_CROP_RANDOM */
    uint32_t layout;         /* enum rf_layout; default RF_LAYOUT_NHWC */
    uint32_t resize_shorter; /* CENTER, CENTER_PAD: shorter side before the center crop;
                              * default AUTO:
                              * max(H, W) * 256 / 224, rounded to nearest (image_size * 256 /
                              * 224 for square output) */
    float scale_min, scale_max; /* RandomResizedCrop area fraction; default 0.08, 1.0 */
    float ratio_min, ratio_max; /* RandomResizedCrop aspect ratio; default 3/4, 4/3 */
    float flip_prob;            /* horizontal flip probability; default RF_FLIP_PROB_AUTO (any
                                   negative value): 0.5 for RANDOM, 0 for CENTER. 0 disables
                                   flips. */

    /* Order and epochs. */
    uint64_t seed;          /* the whole epoch order and every augmentation derive from it;
                               default 0 */
    uint32_t order;         /* enum rf_order; default RF_ORDER_GLOBAL */
    uint32_t drop_last;     /* 1: drop the last partial batch of each rank's epoch; default 0 */
    uint32_t rank;          /* this process' rank, 0 <= rank < world_size; default 0 */
    uint32_t world_size;    /* number of ranks sharing the epoch; default 1 */
    uint32_t remainder;     /* enum rf_remainder; default RF_REMAINDER_PAD */
    uint32_t epochs;        /* epochs to deliver before RF_DONE; default 0 = forever */
    uint64_t start_epoch;   /* first epoch number (ignored when resuming); default 0 */

    /* Threads and queues. */
    uint32_t decode_threads; /* default AUTO: rf_cpu_count(), at most 1024 */
    uint32_t io_threads;     /* default AUTO: 1 for io_uring (gpu_decode or hw_decode_percent
                              * on CUDA: one per three decode threads, up to 4), 4 for pread,
                              * 1 when naive; at most 64 */
    uint32_t io_engine;      /* enum rf_io_engine_kind; default RF_IO_AUTO: io_uring when the
                              * kernel allows it, else pread (rf_stats.io_engine_why says why) */
    uint32_t io_queue_depth; /* reads in flight per I/O thread; default 64, at most 4096 */
    uint32_t prefetch_depth; /* batch slots in the ring; default AUTO: 4, 8 with gpu_decode,
                              * hw_decode_percent or decode_schedule BALANCE, 1 when naive;
                              * at most 64 */

    /* Device. */
    uint32_t device_kind;  /* enum rf_device_kind; default RF_DEVICE_AUTO: CUDA when a GPU is
                              usable, else host */
    int32_t device_index;  /* CUDA ordinal; default 0 */

    /* Limits on untrusted input. */
    uint64_t staging_bytes;     /* read arena; default AUTO: max(64 MiB, 8 x mean sample bytes
                                 * x (decode_threads + io_queue_depth)); any value is raised to
                                 * 4 x largest sample (odirect: 4 x (largest + 2 alignment
                                 * blocks)) and rounded up to 4 KiB; token datasets: 1 MiB */
    uint64_t max_sample_bytes;  /* default 64 MiB */
    uint64_t max_image_pixels;  /* width*height from the JPEG header; default 100 M */
    uint32_t max_image_dim;     /* each of width and height; default 32768 */
    uint32_t io_retries;        /* retries of a transient read error; default 8 */

    /* Resume: a blob from rf_loader_state(); read during create, not kept. Default NULL: start
     * fresh. */
    const void *resume_state;
    uint64_t resume_state_bytes; /* default 0 */

    /* Output element type: RF_DTYPE_UINT8 (default, pixels as decoded) or FLOAT16, BFLOAT16,
     * FLOAT32 holding (pixel - mean[c]) / std[c], with mean and std in pixel units (0..255;
     * ImageNet: mean 123.675 116.28 103.53, std 58.395 57.12 57.375). On the CUDA backend the
     * conversion is a kernel on the copy stream; on the host backend the decode threads do it.
     * `layout` applies to the converted output (NHWC = channels-last memory). */
    uint32_t dtype;  /* default RF_DTYPE_UINT8 */
    float mean[3];   /* default 0, 0, 0 */
    float std[3];    /* default 1, 1, 1: float output holds the pixel values; never 0 */

    /* What `shards` holds (enum rf_source). TAR: WebDataset tar shards. FOLDER: one entry, a
     * class-folder tree (torchvision ImageFolder: one subfolder per class, labels are the
     * sorted subfolder index) or a text file of `path label` lines; an entry it cannot read
     * (a dangling or looping symlink, a FIFO named .jpg: rf_image_list_unreadable in
     * ringfeed_shards.h) fails create, naming it. TOKENS: flat binary token
     * files (nanoGPT/Megatron .bin): every sample is a window of seq_len + 1 tokens, so
     * x = window[0:L] and y = window[1:L+1] are views of one row; windows never cross a file
     * boundary. Token batches have shape {count, seq_len + 1} and skip the decode stage: the
     * bytes are read straight into the pinned slot. */
    uint32_t source;        /* default RF_SOURCE_TAR */
    uint32_t token_bytes;   /* TOKENS: 2 (uint16) or 4 (uint32) per token on disk; default 0:
                               none, a TOKENS source must set it */
    uint32_t seq_len;       /* TOKENS: L; default 0: none, a TOKENS source must set it */
    uint32_t token_windows; /* TOKENS: enum rf_token_windows; default RF_WINDOWS_RANDOM */
    uint32_t token_dtype;   /* TOKENS: output RF_DTYPE_UINT16 / INT32 / INT64; default AUTO:
                               as on disk (UINT16 for 2 bytes, INT32 for 4). Widening runs on
                               the GPU for the CUDA backend. */
    uint32_t shard_window;  /* RF_ORDER_SHARD: shards mixed together; default 4 */

    /* Bad input (see docs/reliability.md). FAIL: the first bad sample stops the loader with an
     * error naming shard, member, byte offset and cause, raised in batch order: every batch
     * before the one holding it is delivered first. SKIP: the sample is left out and
     * counted by reason (rf_stats.skipped*), batches stay full, and
     * delivered + skipped == total holds for each epoch. */
    uint32_t on_error;              /* enum rf_on_error; default RF_ON_ERROR_FAIL */
    uint32_t max_consecutive_skips; /* SKIP: more skips in a row is an error; default 100 */
    uint32_t max_scans;             /* progressive JPEG scans; default 1000 */
    uint32_t max_name_bytes;        /* tar GNU long names and pax records; default and
                                     * maximum 4096 */

    /* Memory hierarchy (see docs/tuning.md). */
    uint32_t warm;           /* 1: hint upcoming shard bytes into the page cache ahead of
                                reads; default 0 */
    uint64_t warm_bytes;     /* budget of bytes hinted ahead of the reads; default 1 GiB */
    uint32_t odirect;        /* 1: read with O_DIRECT, bypassing the page cache; default 0 */
    uint32_t hugepages;      /* 1: back the ring with 2 MiB pages (hugetlb, else THP);
                                default 0 */
    uint32_t numa;           /* enum rf_numa; default RF_NUMA_AUTO */

    /* 1: the deliberately plain baseline (ringfeed-bench --naive): one pread at a time, one
     * batch slot (no prefetch), a pageable ring, and on CUDA a cudaMalloc + synchronous
     * cudaMemcpy + cudaFree per batch; warm, odirect, hugepages and numa are ignored. Decode
     * threads stay as configured. Same batches as the normal path. For measurement only.
     * Default 0. */
    uint32_t naive;

    /* Niceness the decode threads add to their own (0..19; default RF_DECODE_NICE_AUTO,
     * which is 10; 0 leaves them at the niceness they start with). With every CPU busy
     * decoding, the I/O thread that feeds them, the copy stage and the training loop's own
     * threads then run first when they wake, instead of waiting for a time slice behind
     * decode threads; niceness only orders threads that want the same CPU. ResNet-18 on the
     * H200 from plain photo shards with every CPU decoding trained at 94.0% and 96.5% of its
     * GPU-bound rate with 10, 90.0% and 88.3% with 0 (two interleaved rounds,
     * docs/tuning.md). Affects only ringfeed's decode threads. */
    uint32_t decode_nice;

    /* 1: decode baseline JPEGs on the GPU (CUDA backend; the host backend runs the same
     * integer code on the decode threads). Decode threads then only read the header, choose
     * the crop and copy what it needs with the tables and resize plans into the slot: the
     * restart intervals of a restart-marked file, or for a file without restart markers the
     * destuffed entropy-coded bytes of the crop's MCU rows with where each run of up to 4 MCUs
     * starts and its DC predictors (a walk of the Huffman codes up to the crop's last MCU row,
     * no pixels); kernels on the copy stream do Huffman decoding, IDCT, upsampling, colour and
     * the resize. Pixels are byte-for-byte the CPU path's with DCT scaling off, and every image
     * of the run is decoded at full scale (dct_scaling), wherever it goes. Images with a
     * restart interval that does not divide the MCU row, progressive, arithmetic-coded, 12-bit,
     * CMYK or too large for the per-sample scratch are decoded on the CPU in the same batch
     * (rf_stats.gpu_decoded counts the GPU ones). On the CUDA backend a corrupt
     * interval is only found after its batch was decoded: rf_loader_next waits for the
     * batch's kernels and returns that error naming the member (on_error = FAIL), or with
     * on_error = SKIP replaces the sample and decodes the batch again before handing it out
     * (docs/reliability.md, "Skip with late verdicts"). Device memory: about
     * 1.2 MiB per sample of a batch for each of the 4 copy streams, reserved at create;
     * prefetch_depth 8 and more io_uring threads by default (docs/gpu-decode.md). Default 0.
     * Setting it (or hw_decode_percent) selects decode_schedule MANUAL: the default
     * scheduler of the CUDA backend then stands aside. */
    uint32_t gpu_decode;
    /* With gpu_decode: the percent (1..100; default 100) of eligible images sent to the GPU, the
     * rest decoded on the CPU as without gpu_decode. Which images go where is a function of
     * the seed, epoch and sample, so batches stay reproducible. For training a model that
     * keeps the GPU busy, splitting the work keeps both the CPUs and the GPU below
     * saturation (DALI's hw_decoder_load is the same idea): ResNet-18 on the H200 trained at
     * 95% of its GPU-bound rate with 25 and decode_nice 10, 92% with 100 (docs/tuning.md). */
    uint32_t gpu_decode_percent;
    /* Percent (0..100; default 0) of the images decoded by the GPU's hardware JPEG decoders
     * (the NVJPG engines of A100, A30, H100, H200, through nvJPEG's hardware backend, loaded at
     * run time: libnvjpeg.so.13 from the CUDA toolkit or the nvidia-nvjpeg wheel, or the file
     * RINGFEED_NVJPEG names). They use neither the CPUs nor the SMs and take baseline JPEGs
     * with or without restart markers; the decode threads read the header, choose the crop,
     * check a file without restart markers by walking its Huffman codes (about a CPU decode's
     * cost on dense photographs: docs/gpu-decode.md) and copy the file with its resize plans
     * into the slot, and the resize runs on the copy stream. Chosen per sample from the seed,
     * epoch and sample, before gpu_decode: the lowest hw_decode_percent percentiles go to the
     * engines, the next gpu_decode_percent to the kernels (with gpu_decode), the rest to the
     * CPU. Progressive, CMYK and too-large files stay on the CPU (rf_stats.hw_decoded counts
     * the engine ones). Pixels: the CPU
     * path's with DCT scaling off, up to the engine's IDCT rounding (tests/test_cuda.c bounds
     * it). Create fails with RF_ENODEV when the library does not load; the engines themselves
     * open on a background thread started when the first batch is handed out (about 1 s on an
     * H200: rf_stats.hw_open_ns), not in create, and until they are ready (rf_stats.hw_engines
     * READY) their share is decoded where the split sends the next percentiles: by the kernels
     * with gpu_decode, else by the CPU, to the same pixels up to that rounding. A GPU without
     * engines is not an error: hw_engines becomes NONE and their share stays on those paths
     * for the whole run. The host backend decodes the same packets with libjpeg (nothing to
     * open: READY from create). on_error = SKIP works as with gpu_decode,
     * but a file the engines decode without an error (entropy damage) is never skipped
     * (docs/gpu-decode.md). */
    uint32_t hw_decode_percent;

    /* rf_loader_next waits at most this long for a batch (ms; 0, the default: for ever), as
     * the PyTorch DataLoader's `timeout`. On expiry it returns RF_ETIMEDOUT and rf_last_error
     * says where the pipeline stands: the awaited batch (not started, samples still to come,
     * or being submitted to the backend), the reads, queued samples and decodes in flight,
     * and the oldest unfinished sample by file and offset with what it waits for. Nothing is
     * lost and the error is not sticky: the pipeline keeps working, and the next call waits
     * again. Turns a stuck read (a hung network file system) or a stuck device into a
     * message instead of a silent hang. */
    uint32_t next_timeout_ms;

    /* enum rf_dct_scaling; default RF_DCT_SCALING_AUTO. */
    uint32_t dct_scaling;

    /* Where the labels of tar samples come from (enum rf_label_source). RF_LABEL_CLS (0, the
     * default): from each sample's KEY.cls member, which must hold a decimal integer
     * 0..INT32_MAX, with or without ASCII whitespace around it (WebDataset writers write "5"
     * or "5\n"). A sample whose label member is missing, empty, negative, not a decimal
     * integer, over INT32_MAX or over 1 KiB is bad input like a corrupt JPEG: under
     * on_error FAIL an RF_ELABEL naming the shard, the member (or the sample's key) and its
     * byte offset, and saying which of these it is; under SKIP it is left out and counted
     * under RF_SKIP_LABEL. RF_LABEL_NONE: unlabelled data, asked for explicitly rather than
     * what a missing member gives: every label is -1 and label members are not read.
     * RF_LABEL_JSON: from the field label_json_path names in each sample's KEY.json member
     * (below), with the same errors and skip reason. Folder sources take their labels from
     * the class folders or the list, and token sources have none, whatever this says. */
    uint32_t label_source;

    /* A per-sample hook over each decoded image (see rf_sample_hook above for its contract);
     * default NULL: none. Images decoded on the GPU never reach the decode threads, so create
     * refuses a hook with gpu_decode or hw_decode_percent (RF_EINVAL), and with a token source
     * (nothing is decoded). The Python binding's Loader(transform=fn) installs one that calls
     * fn (docs/python.md, "Per-sample transforms in Python"). */
    rf_sample_hook sample_hook;
    void *sample_hook_ctx; /* passed to every call; must stay valid until rf_loader_destroy
                            * (or rf_loader_stop) returns; default NULL */
    /* Extra fields: the bytes of chosen members of each tar sample, delivered per batch in
     * rf_batch.fields (captions, ids, metadata). A comma-separated list of member extensions,
     * e.g. "txt,json": field f of a sample is the data of its first member named KEY.<ext>
     * with ext equal to the f-th entry (the bytes after the first dot of the basename, compared
     * exactly, case-sensitive, as WebDataset does), copied byte for byte. At most
     * RF_FIELDS_MAX entries, each 1..RF_FIELD_NAME_MAX bytes of printable ASCII other than space,
     * ',' and '/', none twice. Copied during rf_loader_create. Only TAR sources have members:
     * create refuses fields with a FOLDER or TOKENS source (RF_EINVAL). The decode threads
     * copy the fields out of the span already read for the image (no extra read). A sample
     * without one of the members is bad input, as a missing label is (WebDataset fails on a
     * missing required field too): under on_error FAIL an RF_EFORMAT naming the
     * shard, the sample's key, its byte offset and the extension; under SKIP it is left out,
     * counted under RF_SKIP_FIELD, and its replacement's fields fill its place. A member of
     * more than max_field_bytes is RF_ELIMIT (skip: RF_SKIP_TOO_LARGE) naming the member and
     * its offset. An empty member is an empty field. Padding samples (rf_batch.is_padding)
     * have empty fields. Default NULL: none. */
    const char *fields;
    /* Largest member a field accepts (bytes, 1..64 MiB); default 16 KiB. Each ring slot holds
     * batch_size x (number of fields) x max_field_bytes bytes of host memory for them,
     * allocated at create. */
    uint32_t max_field_bytes;
    /* Output height H and width W of every image, 1..8192 each; default AUTO: image_size.
     * With H != W, RANDOM is torchvision's RandomResizedCrop((H, W)): the crop box is drawn
     * on the source image with scale and ratio exactly as for a square output (the ratio is
     * the box's own, not the output's), then resized to H x W; CENTER is Resize(resize_shorter)
     * then CenterCrop((H, W)); LETTERBOX and CENTER_PAD: enum rf_crop. rf_batch.shape
     * carries H and W ({count, H, W, 3} NHWC,
     * {count, 3, H, W} NCHW), and rf_loader_config reports both resolved. */
    uint32_t image_height;
    uint32_t image_width;
    /* RF_LABEL_JSON: the label's field in the KEY.json member, a dotted path of object keys
     * ("class_id", "annotations.class_id"; a key holding a dot cannot be named, nor an array
     * element); 1..256 bytes, at most 16 keys, none empty (else a tar source's create fails
     * with RF_EINVAL saying which). Copied at create.
     * The member must be valid JSON (RFC 8259, checked whole, at most 64 KiB, nesting at most
     * 64 deep, strings at most 4096 bytes) whose value at the path is an integer
     * 0..2147483647 written without fraction or exponent ("5", not "5.0" or "5e0"). A key
     * that appears twice in an object on the path is an error, not first- or last-wins.
     * Every other case (bad JSON and where, the field missing, a float, a negative number, a
     * string, ...) is a bad label as for .cls: RF_ELABEL naming the shard, the member
     * KEY.json, its byte offset and what is wrong, or RF_SKIP_LABEL under on_error SKIP.
     * Ignored unless label_source is RF_LABEL_JSON. Default NULL.
     * Classification with labels in JSON, samples KEY.jpg + KEY.json holding
     * {"annotations": {"class_id": 417}, "caption": "a tabby cat"}:
     *     rf_config cfg; rf_config_init(&cfg);
     *     cfg.shards = patterns; cfg.shard_count = n;
     *     cfg.label_source = RF_LABEL_JSON;
     *     cfg.label_json_path = "annotations.class_id";
     *     cfg.on_error = RF_ON_ERROR_SKIP;   (a sample without the field: skipped, counted)
     *     rf_loader_create(&cfg, &ld, err, sizeof err);   batch->labels[i] is then 417 */
    const char *label_json_path;
    /* Which member of a tar sample is its image: a comma-separated list of extensions, most
     * preferred first, compared without regard to ASCII case (default "jpg,jpeg,png,webp", a
     * pointer to a static string; NULL asks for it too). A sample's image is its member whose
     * extension comes earliest in the list (the first such member on a tie), like
     * WebDataset's "jpg;png"; a sample with none is RF_EFORMAT at create, naming the shard,
     * the key, its offset and the list. 1..8 extensions of 1..15 letters or digits, else
     * RF_EINVAL. The loader keeps its own copy. The image is decoded as what its first bytes
     * say it is, whatever its extension: JPEG (libjpeg-turbo, the fast path, the only one the
     * GPU decode paths take), PNG (libspng: 8- and 16-bit, palette, gray, interlaced) or WebP
     * (libwebp, still images), each to RGB with any alpha dropped, through the same crop,
     * resize, flip, layout and conversion; other bytes are RF_SKIP_NOT_JPEG. Folder sources
     * take .jpg, .jpeg, .png and .webp files whatever this says. */
    const char *image_exts;
    /* enum rf_decode_schedule; default RF_SCHEDULE_AUTO (resolved at create, and
     * rf_loader_config reports the choice; on a CUDA device BALANCE, see the enum). With
     * MANUAL's hw_decode_percent the hardware decoders are opened on a background thread
     * started when the first batch is handed out (about 1 s on an H200: rf_stats.hw_open_ns),
     * beside the next CPU- and kernel-decoded batches; BALANCE starts that thread only when its
     * GPU share first reaches half the images, the least share the engines take part in (the
     * open's driver work would otherwise hold up a training loop's first steps for nothing).
     * Either way they get no sample until they are ready; a missing libnvjpeg or GPU without
     * engines leaves them out
     * (rf_stats.hw_engines; MANUAL refuses a missing libnvjpeg at create, hw_decode_percent
     * says so). gpu_decode or hw_decode_percent set together with CPU or BALANCE
     * is RF_EINVAL: those settings are the MANUAL mode's. */
    uint32_t decode_schedule;
    /* Remote shards (patterns that are http://, https:// or s3:// URLs; docs/remote.md): how
     * often one request is retried after a timeout or a failed connection, a 5xx or 408, a
     * 429/503 (after its Retry-After when longer, at most 10 s), a reset connection or a short
     * body, with exponential backoff and jitter (25-50 ms first, doubling, at most 5 s),
     * before it is an I/O error naming the URL and byte range (RF_SKIP_IO under on_error
     * SKIP). Default 5, at most 100 (more is RF_EINVAL for any loader); 0 asks for 5. A 403 or
     * 404 is never retried. Not used for local shards. */
    uint32_t remote_retries;
    /* Remote shards: the connect timeout, and how long a transfer may move less than a byte a
     * second before it counts as stalled (then retried), in ms. Default 30000 (0 asks for
     * it), at most 3600000 (more is RF_EINVAL); the stall window is counted in whole seconds
     * (at least 1). Not used for local shards. */
    uint32_t remote_timeout_ms;
    /* Remote shards: the local shard cache (docs/remote.md, docs/cache.md), off by default.
     * cache_dir: a directory (made when missing, one level; NULL: no cache; at most 4095
     * bytes; copied at create) where whole shards are kept under cache_bytes bytes of shards,
     * least recently used out first. At create each shard is looked up (its URL without
     * credentials or query, its ETag and size): a hit is read from the local copy for the whole
     * run; a miss is filled in the background with one extra GET of the whole object once
     * this loader reads a sample of it (after the first batch was handed out), and read from
     * disk once complete. A fill that fails (server, disk full, budget) leaves the shard
     * remote and never fails the run: rf_stats.shard_cache_* say what happened. A directory
     * that cannot be made, opened or locked fails create naming it. Several processes (ranks)
     * may share one directory; it belongs on a local file system. Ignored for local shards
     * (rf_stats.shard_cache_why says so). cache_bytes: the budget, > 0 with cache_dir (else
     * RF_EINVAL); ignored without it. Defaults: NULL and 0. */
    const char *cache_dir;
    uint64_t cache_bytes;
    /* The number of classes the labels count: every label a sample delivers must be below it
     * (1..2147483647; default 0: none, any label 0..INT32_MAX). A sample whose label is not
     * (from its KEY.cls or KEY.json member, its line of a `path label` list or its class
     * folder) is bad input as a malformed label is: under on_error FAIL an RF_ELABEL naming
     * the shard, the sample, its offset, the label and num_classes, raised in batch order;
     * under SKIP it is left out and counted under RF_SKIP_LABEL. The training step never sees
     * it: a loss that indexes its logits by label (cross entropy on the GPU) would otherwise
     * stop on a device assert that names no sample. Unlabelled samples (RF_LABEL_NONE: -1)
     * and token sources have nothing to check, and a label a sample_hook writes is its own. */
    uint32_t num_classes;

    /* Weighted mixing and resampling (docs/architecture.md, "Mixing sources"). Off while all
     * of these hold their defaults: the epoch is then one permutation of all samples, each
     * delivered once. A source is a run of consecutive `shards` patterns: source_shards[s]
     * patterns for source s (source_count entries summing to shard_count; NULL / 0: one
     * source of all patterns). Every source has the loader's format; tar sources share its
     * label rule, and a FOLDER source (one tree or list each) numbers its own classes, as it
     * would alone. */
    const uint32_t *source_shards;
    uint32_t source_count;
    /* One weight per source (weight_count == source_count, or one source when source_count is
     * 0), each finite and >= 0, not all 0 (else RF_EINVAL naming `weights`). An epoch's
     * positions take their source in exactly these proportions (rounded by largest
     * remainders), interleaved by the seed. NULL / 0: in proportion to the sources' samples,
     * the plain concatenation. Copied at create. */
    const float *weights;
    uint32_t weight_count;
    /* Order positions per epoch (batches follow from it as from the dataset's size). Default
     * 0: the dataset's samples. A source asked for more positions than it holds wraps into a
     * new permutation of itself (without replacement). */
    uint64_t epoch_size;
    /* enum rf_replacement: whether a source's samples are drawn with replacement (any sample
     * any number of times, independently) or as successive permutations (each sample at most
     * once per epoch while the source takes no more positions than it holds). Default AUTO:
     * ON with class_weights or sample_weights, else OFF; OFF with either is RF_EINVAL. */
    uint32_t replacement;
    /* Per-class weights: a sample of class c is drawn with weight class_weights[c] within its
     * source (class_weight_count entries, each finite and >= 0; a label at or over the count
     * or an unlabelled sample has weight 0). Needs labels known at create: folder sources
     * (class folders or list files); tar labels are read with the sample, so there
     * RF_EINVAL says to use sample_weights. Copied at create. */
    const float *class_weights;
    uint32_t class_weight_count;
    /* Per-sample weights, one per sample in the dataset's order (rf_loader_num_samples;
     * sample_weight_count must equal it): the draw within each source is in proportion to
     * them. Not with class_weights. Copied at create. */
    const float *sample_weights;
    uint64_t sample_weight_count;
    /* Tar sources: each source's label rule, source_count entries (one when source_count is
     * 0; NULL: every source takes label_source and label_json_path). An entry is "cls", "none", "json:PATH" (PATH as
     * label_json_path) or NULL / "" for the loader's rule; anything else, or the array with
     * another source than tar, is RF_EINVAL naming source_labels. Copied at create. */
    const char *const *source_labels;
    /* Sync-point indexes (docs/sync-index.md): the GPU decode of a plain JPEG whose shard has
     * an index entry for it decodes only the crop's rows from the entry's sync points, after
     * checking the member's size and hash against it (a stale entry is counted in
     * rf_stats.sync_stale and the file decoded as without one). enum rf_sync_index_mode; default
     * RF_SYNC_INDEX_BUILD: read the sidecars (beside a local shard, fetched beside a remote
     * one, or in cache_dir), and build the entries of members without one on the decode
     * threads from the second batch on, written at each epoch's end beside the shard when its
     * folder is writable, else into cache_dir, else kept for this run only. READ: use the
     * sidecars, never build or write. OFF: neither. Only tar shards with gpu_decode (or
     * BALANCE) use them; the CPU decode is unchanged. */
    uint32_t sync_index;
    /* Multi-label (enum rf_multi_label; default OFF). On, a sample's label member may hold
     * several class ids: a JSON array at label_json_path ({"labels": [3, 17]}; a lone
     * integer is one id) or a .cls of ids separated by spaces or commas; a folder sample's
     * label is its one id. Each id is checked as a label is (an integer 0..INT32_MAX, below
     * num_classes when set); an empty array or .cls gives no ids. MULTIHOT delivers
     * rf_batch.label_multihot (count x num_classes, 1 where an id was given; duplicates are
     * idempotent) and needs num_classes (at most 65536); LIST delivers rf_batch.label_list (count x
     * max_labels, the ids in their order, duplicates kept, padded with -1) and needs
     * max_labels; more ids than max_labels is a bad label. Both deliver label_counts (ids in
     * the list; classes set in the multi-hot row). A bad id or too many is RF_ELABEL naming
     * the shard, the member and its offset under on_error FAIL, else a skip counted under
     * RF_SKIP_LABEL. rf_batch.labels keeps the first id (-1 when none). Not with a token
     * source (RF_EINVAL naming multi_label). */
    uint32_t multi_label;
    /* RF_MULTI_LABEL_LIST: the width of a sample's row of rf_batch.label_list (1..65536). */
    uint32_t max_labels;
    /* Boxes that follow the crop (docs/python.md, "Boxes and keypoints"). On when box_ext or
     * box_json_path is set (tar shards only; RF_EINVAL otherwise). box_ext: the member of the
     * sample holding them, by extension (default "json": KEY.json, which may be the label's
     * member too); an extension ending in "npy" ("npy", "boxes.npy") is a NumPy .npy file of
     * N x 4 (or N x 5, the fifth column the class id) float32 or float64, little-endian, C
     * order (any other header, dtype or shape is refused naming it); any other extension is
     * JSON read at box_json_path. box_json_path: label_json_path's dotted keys to an array of
     * boxes ("boxes": [[x, y, w, h], ...]); where the path meets an array of objects before
     * its last key, the rest is read in each element ("annotations.bbox" on COCO-style
     * {"annotations": [{"bbox": [...], "category_id": 3}, ...]}). box_class_json_path: the
     * class id of each box the same way ("labels": a parallel array; or
     * "annotations.category_id"), each an integer 0..INT32_MAX below num_classes when set,
     * as many as the boxes; unset (and N x 4 .npy), every class is -1. box_format (enum
     * rf_box_format) says how the four numbers read, box_normalized that they are fractions
     * of the image's width and height (0..1) rather than its pixels (continuous coordinates:
     * pixel i spans [i, i + 1)). A sample's boxes land in rf_batch.boxes as xyxy in output
     * pixels: mapped through the crop, resize and flip the image was given (the same on every
     * decode path), clipped to the output rectangle the crop lands on, then kept when the
     * clipped area is positive and at least box_min_visibility (0..1) of the mapped box's
     * area, in their order; the others are dropped (a box of zero width or height, never
     * positive, always is). A zero-box sample is valid. Refused, naming the shard, the
     * member, its offset and the box's index (RF_ELABEL; under on_error SKIP counted under
     * RF_SKIP_LABEL): a missing member or path, bad JSON or .npy, a number that is not finite,
     * a negative width or height (x2 < x1 or y2 < y1 for xyxy), a box more than
     * RF_BOX_TOLERANCE_PX pixels outside its image, a bad class id, a class count that is not
     * the box count, and more boxes than max_boxes (counts named: nothing is truncated). */
    const char *box_ext;
    const char *box_json_path;
    const char *box_class_json_path;
    uint32_t box_format;
    uint32_t box_normalized;
    float box_min_visibility;
    /* Boxes: the width of a sample's rows of rf_batch.boxes and box_classes (1..65536). */
    uint32_t max_boxes;
    /* Keypoints that follow the crop. On when keypoint_json_path is set (tar shards only):
     * in the member keypoint_ext (default "json"), an array of points [[x, y], ...] or
     * [[x, y, v], ...] (COCO visibility: 0 not labelled, 1 labelled but hidden, 2 visible;
     * without v, 2), pixels or fractions as box_normalized says; or, with a keypoint_ext
     * ending in "npy" and no keypoint_json_path (both is RF_EINVAL), a NumPy .npy of N x 2
     * or N x 3 float32/float64 (the box .npy's rules) holding the same rows. rf_batch.points gets each,
     * in its place (index i stays point i), mapped as the boxes are, as {x, y, v}: v becomes
     * 0 when the mapped point lies outside the output rectangle (its mapped x, y kept), and a
     * point given v 0 is {0, 0, 0}. Refused like a box: a missing member or path, bad JSON,
     * a coordinate that is not finite, v not 0, 1 or 2, a labelled point more than
     * RF_BOX_TOLERANCE_PX outside its image, more points than max_points. */
    const char *keypoint_ext;
    const char *keypoint_json_path;
    /* Keypoints: the width of a sample's row of rf_batch.points (1..65536). */
    uint32_t max_points;
    /* Keypoints: index pairs swapped when the sample is flipped, so that a left point stays
     * a left point ("1:2,3:4" for COCO's eyes and ears ...); each index below max_points and
     * in one pair at most (RF_EINVAL naming the pair). NULL: none. */
    const char *keypoint_flip_pairs;
    /* Boxes and keypoints: deliver their coordinates as fractions of the output's width and
     * height (0..1) rather than output pixels (the boxes still xyxy). */
    uint32_t box_output_normalized;
    /* The value of the output pixels no image lands on (LETTERBOX and CENTER_PAD; the other
     * crops cover the whole output): R, G, B in 0..255, each rounded to the nearest integer
     * and written as decoded pixels are, so a float dtype normalizes it by mean and std like
     * the rest. Default RF_PAD_VALUE_AUTO (all three negative): 114 for LETTERBOX (the
     * Ultralytics grey), 0 for CENTER_PAD (torchvision's CenterCrop fill). */
    float pad_value[3];
    /* Segmentation masks: the extension of each tar sample's mask member, e.g. "seg.png" for
     * KEY.seg.png (matched exactly, as rf_config.fields matches; 1..RF_FIELD_NAME_MAX
     * printable bytes without space, ',' or '/', and none of image_exts, else RF_EINVAL).
     * Default NULL: no masks. Copied at create. Tar sources only: a folder or token source is
     * RF_EINVAL naming mask. The member is a PNG (libspng): 8-bit gray (values 0..255),
     * 16-bit gray (0..65535; needs mask_dtype INT32) or palette of 1..8 bits, delivered as
     * its palette INDICES, as PIL's mode "P" reads it, never as colours; tRNS and gamma are
     * ignored. It must have its image's size. The decode thread that takes the sample
     * decodes the whole mask and checks it (its kind, its size against the size the image's
     * header declares) before the image is decoded or handed to a GPU engine, so a bad mask
     * fails its sample with nothing placed; once the image is decoded or placed, whatever
     * decodes it (CPU, gpu_decode, the hardware engines), the mask gets the image's geometry:
     * the same crop box, resized to image_height x image_width by nearest neighbour (the
     * source pixel under each output pixel's centre, as PIL's NEAREST with the box:
     * Image.resize((W, H), NEAREST, box)), flipped when the image is; output pixels outside
     * the rectangle the box lands on are mask_fill. Delivered in rf_batch.masks. Bad input under on_error FAIL, the message naming the shard, the member
     * and its offset, or skipped and counted under SKIP: no member KEY.<mask> is RF_EFORMAT
     * (RF_SKIP_FIELD); not a PNG, RGB/RGBA/gray+alpha, gray of 1, 2 or 4 bits, 16 bits with
     * mask_dtype UINT8, or a size other than the image's (both sizes named) is RF_EFORMAT
     * (RF_SKIP_MASK); a damaged PNG RF_EDECODE (RF_SKIP_CORRUPT); one over max_image_pixels
     * or max_image_dim RF_ELIMIT (RF_SKIP_TOO_LARGE). Host memory: each ring slot holds
     * batch_size x image_height x image_width x (1 or 4) bytes of masks (with multi_crop the
     * views' sizes summed: one mask per view, rf_view.masks), allocated at create
     * (prefetch_depth slots), and each decode thread keeps scratch of up to 2 bytes per pixel
     * of the largest mask it decoded. */
    const char *mask;
    /* rf_batch.masks' element type: RF_DTYPE_UINT8 (default) or RF_DTYPE_INT32 (needed for
     * 16-bit masks); other values RF_EINVAL. */
    uint32_t mask_dtype;
    /* The value of mask pixels outside the image's output rectangle (LETTERBOX's and
     * CENTER_PAD's border; RANDOM and CENTER fill the output) and of a blank padding sample's
     * mask. crop NATIVE refuses masks (RF_EINVAL): its images are packed at their own sizes,
     * the masks' rows are H x W. Default RF_MASK_FILL_AUTO: 255, torchvision's segmentation references' fill
     * and ignore_index; 0..255 with UINT8, 0..2147483647 with INT32 (else RF_EINVAL). */
    uint32_t mask_fill;
    /* Multi-crop (DINO, iBOT, SwAV style; default NULL: off). Groups of views, comma-separated,
     * each "COUNTxSIZE" (square) or "COUNTxHEIGHTxWIDTH", optionally ":SCALE_MIN-SCALE_MAX"
     * (default: scale_min-scale_max): "2x224:0.4-1,6x96:0.05-0.4" is two 224 x 224 views at
     * scale 0.4..1 and six 96 x 96 at 0.05..0.4, at most 64 views in all (RF_EINVAL naming the
     * group and what is wrong otherwise). Each view k of a sample is its own crop (crop RANDOM:
     * RandomResizedCrop with the group's scale range and ratio_min..ratio_max; CENTER,
     * LETTERBOX, CENTER_PAD: that crop at the view's size, padded with pad_value; NATIVE is
     * refused) and flip (flip_prob), drawn from a seed made of the
     * sample's seed and k: deterministic per (seed, epoch, sample), whatever the thread count,
     * and restored exactly by a resume. The image is decoded once: a JPEG at the smallest DCT
     * scale (as dct_scaling allows) at which every view's crop still has its output's rows and
     * columns, over the union of what the views read; PNG and WebP at full scale; each view is
     * then resized from those pixels with the loader's resampler, so view k's pixels are the
     * single-view loader's for that crop at that scale. With views set the views ARE the
     * sample's images: rf_batch.views has them (nviews entries, in the groups' order),
     * image_size/height/width are not used for the output, and rf_batch.data holds every
     * sample's views one after another (sample i's view k at sample i's row + the sizes of
     * views 0..k-1). The ring holds that per sample: batch_size x sum over views of H x W x 3
     * bytes (x the dtype's size more on the host backend with a conversion) per slot. dtype,
     * layout, mean and std apply to each view. Masks, boxes and keypoints follow each view:
     * every rf_view has its own, from the view's geometry (rf_view; their checks, errors and
     * skips are a single crop's, once per sample); masks take batch_size x sum over views of
     * H x W x (1 or 4) bytes per slot. On every decode path: the GPU paths take a JPEG's
     * views as one packet (the union of what they read decoded once, each view resized from
     * it). RF_EINVAL with sample_hook (it is handed one image), crop NATIVE, a token source,
     * and on the CUDA backend with a dtype other than uint8 (normalize on the device after the
     * copy). */
    const char *multi_crop;
    /* Size buckets (aspect-ratio bucketing, as Ultralytics' rect training and SDXL/kohya
     * bucketing do; default NULL: off). "HxW,HxW,...": each bucket's rows and columns, 1..8192
     * each, at most 64 buckets, e.g. "384x640,512x512,640x384" (RF_EINVAL naming the entry:
     * not HEIGHTxWIDTH, a side out of range, a repeated entry). Needs crop LETTERBOX: each
     * image goes to the bucket whose aspect ratio (width / height) is nearest its own (the
     * smallest ratio between the two; a tie to the bucket listed first; an image whose header
     * does not parse to bucket 0, where its decode fails as it would without buckets) and is
     * letterboxed into that bucket's size with pad_value (rf_batch.letterbox, crop_boxes,
     * boxes, keypoints and masks follow the bucket's geometry). Every batch holds samples of
     * one bucket (rf_batch.bucket, bucket_height, bucket_width): each epoch the shuffled order
     * is walked once and a bucket's batch_size x world_size-th sample closes the next batch
     * of every rank (rank r its samples r, r + world_size, ...); at the epoch's end the
     * buckets' leftovers are dropped with drop_last, else each is one smaller batch per rank,
     * in bucket order, padded by repeating its own first samples (remainder PAD) or cut to a
     * multiple of world_size (remainder DROP). The same batches at any thread count; a resume
     * state counts the batches' samples and resumes at a batch's start with the same
     * batch_size and world_size (another is RF_ERESUME). Create reads every image's header
     * once (its first 4 KiB; 64 KiB, then the whole member, when the size lies further in).
     * image_height x image_width is the slot every sample reserves: left AUTO, they are the
     * largest bucket height and width (image_size is not used); set, every bucket must fit in
     * them (RF_EINVAL naming the bucket). Each
     * sample's Hb x Wb x 3 pixels are packed from its slot's start (rf_batch.sample_offsets;
     * rf_batch.sizes says Hb, Wb), so the ring stays prefetch_depth x batch_size x
     * image_height x image_width x 3 (x the dtype's bytes), allocated once at create, and
     * masks' rows likewise. Every decode path letterboxes into the bucket (the GPU kernels
     * and engines too, byte for byte the CPU's full-scale decode). RF_EINVAL with another
     * crop, a token source, remote shards, multi_crop, a sample_hook, on_error SKIP, weighted
     * mixing (weights, epoch_size, replacement, class or sample weights) and a float dtype
     * with layout NCHW. Copied at create. */
    const char *size_buckets;
} rf_config;

/* How far a box or labelled keypoint may lie outside its image (rounding in the data) before
 * it is refused: pixels of the source image. */
#define RF_BOX_TOLERANCE_PX 1.0

#define RF_FIELDS_MAX 16      /* entries of rf_config.fields */
#define RF_FIELD_NAME_MAX 64  /* bytes of one entry */

/* Fill *cfg with every field's default (see "Defaults" above rf_config), struct_size and
 * version. */
RF_API void rf_config_init(rf_config *cfg);

/* ---- the loader -------------------------------------------------------------------------- */

typedef struct rf_loader rf_loader;

/* A batch leased to the consumer by rf_loader_next(). All pointers are owned by the loader and
 * stay valid until rf_loader_release() on this batch (or rf_loader_destroy()). */
/* One extra field of a batch (rf_config.fields), in host memory. Sample i's bytes are
 * data[offsets[i] .. offsets[i] + lengths[i]), for i < rf_batch.count, in batch order; they
 * are not NUL-terminated and may hold any bytes. Padding samples have length 0.
 * Image + caption (CLIP-style), with cfg.fields = "txt" and cfg.label_source = RF_LABEL_NONE:
 *     const rf_field *cap = &b->fields[0];
 *     for (uint32_t i = 0; i < b->count; i++)
 *         tokenize(i, (const char *)cap->data + cap->offsets[i], cap->lengths[i]);
 *     train_step(b->data, tokens, b->count, stream);
 *     rf_loader_release(ld, b, stream);   (the captions' bytes are not valid after this) */
typedef struct rf_field {
    const char *name;          /* the extension, as given in rf_config.fields */
    const uint8_t *data;
    const uint64_t *offsets;   /* count entries */
    const uint32_t *lengths;   /* count entries */
} rf_field;

/* One view of every sample of a batch (rf_config.multi_crop). Sample i's view is at
 * (uint8_t *)data + i * sample_stride, shape[1..3] of dtype in the batch's layout, contiguous;
 * the samples' views are sample_stride bytes apart (the other views lie between them).
 * crop_boxes (count x 4 int32 {x, y, w, h}) and flips (count flags) as rf_batch's, for this
 * view: its box in the source image's full-resolution pixels and whether it was flipped. A
 * blank padding sample's view is zeros (after the conversion: the normalized zero), box {0, 0,
 * 0, 0}.
 * What belongs to the image follows each view's own geometry (its crop, resize and flip: the
 * view's transform and seed, exactly what its pixels were given), laid out as rf_batch lays
 * it out for a single crop, one contiguous batch per view (NULL where the loader has none):
 * masks (rf_config.mask): count x H x W values of rf_batch.mask_dtype, sample i's at masks +
 * i x H x W elements, the view's crop box with a nearest resize to the view's size and its
 * flip, mask_fill outside the rectangle the box lands on; the mask member is decoded once
 * per sample and resampled per view. boxes, box_classes, box_counts, points, point_counts:
 * rf_batch's boxes and keypoints (count x max_boxes x 4 ...) mapped through this view's
 * geometry, clipped to its output rectangle and kept by box_min_visibility in it, keypoint
 * flip pairs swapped when this view is flipped. A blank padding sample's masks are all
 * mask_fill and its counts 0 in every view; a padding repeat has its original's. */
typedef struct rf_view {
    void *data;              /* on the batch's device, like rf_batch.data */
    uint64_t sample_stride;  /* bytes from sample i's view to sample i + 1's */
    int64_t shape[4];        /* NHWC {count, H, W, 3}; NCHW {count, 3, H, W} */
    const int32_t *crop_boxes; /* host, count x 4 */
    const uint8_t *flips;      /* host, count */
    const void *masks;         /* host, count x H x W of rf_batch.mask_dtype */
    const float *boxes;        /* host, count x max_boxes x 4 */
    const int32_t *box_classes; /* host, count x max_boxes */
    const uint32_t *box_counts; /* host, count */
    const float *points;       /* host, count x max_points x 3 */
    const uint32_t *point_counts; /* host, count */
    const float *letterbox;    /* host, count x 4: the view's rows of rf_batch.letterbox (scale
                                * and pad of the view's box onto its rectangle) */
} rf_view;

typedef struct rf_batch {
    uint32_t struct_size;
    uint32_t count;         /* samples in this batch: batch_size, or fewer for a last partial batch */
    uint64_t epoch;         /* epoch this batch belongs to */
    uint64_t index;         /* batch number within the epoch on this rank, from 0; a resumed
                               epoch counts on from its cursor's whole batches (cursor /
                               (batch_size x world_size)) */

    void *data;             /* images: device pointer (CUDA) or host pointer (host backend) */
    uint64_t data_bytes;    /* bytes at data for `count` samples */
    int64_t shape[4];       /* NHWC: {count, H, W, 3}; NCHW: {count, 3, H, W};
                               tokens: {count, seq_len + 1} (ndim 2) */
    uint32_t dtype;         /* enum rf_dtype (RF_DTYPE_UINT8 for images) */
    uint32_t layout;        /* enum rf_layout */
    uint32_t device_kind;   /* RF_DEVICE_HOST or RF_DEVICE_CUDA: where `data` lives */
    int32_t device_index;

    const int32_t *labels;      /* host, count entries; -1 for padding and RF_LABEL_NONE */
    void *labels_device;        /* the same labels as int32 on the device (NULL on host backend) */
    const char *const *keys;    /* host, count NUL-terminated sample keys (shard-relative names) */
    const uint64_t *sample_ids; /* host, count dataset indices (position in the shard list order) */
    const uint64_t *positions;  /* host, count positions in the epoch order */
    const uint8_t *is_padding;  /* host, count flags: 1 = a repeated sample padding this rank */

    void *event;            /* cudaEvent_t recorded after the copy to the device; NULL on host */
    uint32_t ndim;          /* dimensions used in shape: 4 for images, 2 for tokens */
    uint32_t nfields;       /* entries in fields: those of rf_config.fields, in its order */
    const rf_field *fields; /* host; NULL when nfields is 0. Valid until release, like the rest */
    /* Per sample, the geometry its image was given (images only; NULL for token batches, and
     * for a batch of a struct_size that ends before them). crop_boxes: host, count x 4 int32,
     * sample i's row {x, y, w, h} = crop_boxes[4i .. 4i+3]: the box RandomResizedCrop or
     * Resize+CenterCrop chose, in the source image's own pixels (its full resolution, whatever
     * DCT scaling decoded it at; EXIF orientation is not applied), before the resize to H x W;
     * always inside the image (x + w <= its width, y + h <= its height). CENTER's box is
     * fractional on the source and reported rounded to whole pixels. LETTERBOX's is the whole
     * image; CENTER_PAD's spans the whole image on an axis that is padded. flips: host, count
     * flags, 1 = the crop was flipped left-right after the resize. The same on every path the
     * image takes (CPU, gpu_decode, hw engines) and at any thread count: a function of the
     * sample's seed and its image's size. A padding repeat reports its original's box and
     * flip; a replacement (on_error SKIP) its own; a blank padding sample {0, 0, 0, 0} and
     * 0. */
    const int32_t *crop_boxes;
    const uint8_t *flips;
    /* rf_config.multi_label (host; NULL when OFF, for token batches and for a batch of a
     * struct_size that ends before them): label_multihot, count x num_classes 0/1 (MULTIHOT);
     * label_list, count x max_labels ids padded with -1 (LIST); label_counts, per sample the
     * ids in its list (LIST) or the classes set in its row (MULTIHOT). A blank padding
     * sample's row is zeros (or all -1) and its count 0; a padding repeat has its
     * original's. */
    const uint8_t *label_multihot;
    const int32_t *label_list;
    const uint32_t *label_counts;
    /* Boxes and keypoints (rf_config.box_ext, keypoint_json_path; host; NULL when off, for
     * token batches and for a batch of a struct_size that ends before them). boxes: count x
     * max_boxes x 4 float32, sample i's box j {x1, y1, x2, y2} in output pixels (0..width,
     * 0..height; fractions 0..1 of them with box_output_normalized) at
     * boxes[(i * max_boxes + j) * 4]; box_classes: count x max_boxes int32
     * (-1 where no class was given and in the padding); box_counts: count, the boxes kept
     * (rows past it are 0, classes -1). points: count x max_points x 3 float32 {x, y, v};
     * point_counts: count, the points the member gave (rows past it are 0). A blank padding
     * sample counts 0; a padding repeat has its original's; a skip-mode replacement its
     * own. */
    const float *boxes;
    const int32_t *box_classes;
    const uint32_t *box_counts;
    const float *points;
    const uint32_t *point_counts;
    /* Per sample, where its image landed in the output (images only; NULL for token batches
     * and for a batch of a struct_size that ends before it): host, count x 4 float32, sample
     * i's row {scale_x, scale_y, pad_x, pad_y} = letterbox[4i .. 4i+3]. A point (x, y) of the
     * source image, in its full-resolution pixel coordinates (pixel j spans [j, j + 1)), lands
     * at (x * scale_x + pad_x, y * scale_y + pad_y) of the H x W output before the flip; when
     * flips[i] is 1 the whole output is then mirrored, x -> W - x. So a box detected on the
     * output maps back with (x - pad_x) / scale_x (after undoing the flip). LETTERBOX: scale
     * is the new size over the source size per axis (Ultralytics' ratio r but for the
     * rounding of the new size) and pad the whole pixels of padding on the left and top
     * (Ultralytics' dw, dh are half the slack, fractional; its left is round(dw - 0.1), which
     * this is); the image covers [pad_x, pad_x + round(w * r)) and likewise in y.
     * CENTER_PAD: pad is the padding on an axis the resized image is shorter than the crop
     * on, else minus the crop's offset on the resized image. RANDOM and CENTER: the same
     * affine map of their crop box (pad <= 0). A blank padding sample {0, 0, 0, 0}; a padding
     * repeat its original's. */
    const float *letterbox;
    /* crop NATIVE and size_buckets only (NULL otherwise, for token batches and for a batch
     * of a struct_size that ends before them): each sample's image has its own size (with
     * size_buckets the batch's bucket's), at most the H x W of rf_batch.shape. sizes: host, count x 2 uint32, sample i's {height, width} =
     * sizes[2i .. 2i+1] ({0, 0} for a blank padding sample); sample_offsets: host, count
     * uint64, where sample i starts in data, in elements of dtype (i x H x W x 3: every sample
     * keeps a slot of the largest size). Its height x width x 3 elements are packed from there,
     * rows of width x 3 (NHWC) or three planes of height x width (NCHW); the rest of its slot
     * is unspecified. */
    const uint32_t *sizes;
    const uint64_t *sample_offsets;
    /* rf_config.mask (host; NULL when off, for token batches and for a batch of a struct_size
     * that ends before it): count x H x W values of mask_dtype (H, W: the images' height and
     * width, whatever the layout), sample i's at masks + i x H x W elements; each has its
     * image's crop, nearest resize and flip, mask_fill outside the output rectangle. A padding
     * repeat has its original's mask; a blank padding sample's is all mask_fill. With
     * size_buckets each sample's mask is bucket_height x bucket_width values packed from its
     * row's start, as its image is. */
    const void *masks;
    uint32_t mask_dtype; /* enum rf_dtype: RF_DTYPE_UINT8 or RF_DTYPE_INT32 */
    /* rf_config.multi_crop: nviews views per sample (0 and NULL when off, for token batches
     * and for a batch of a struct_size that ends before them), in the groups' order. With views,
     * data and data_bytes hold every sample's views (what the copy moved), shape is {count,
     * bytes per sample / dtype size} with ndim 2, and crop_boxes, flips, masks, boxes,
     * box_classes, box_counts, points and point_counts are view 0's (each view's in its
     * rf_view). */
    uint32_t nviews;
    const rf_view *views; /* host array of nviews; valid until release */
    /* rf_config.size_buckets (all 0 when off, for token batches and for a batch of a
     * struct_size that ends before them): the batch's bucket (its index in size_buckets) and
     * that bucket's height and width. Every sample's image is bucket_height x bucket_width,
     * packed from its sample's start as crop NATIVE's are (sizes, sample_offsets: a blank
     * padding sample's size is {0, 0}); data and shape still span the H x W slots. */
    uint32_t bucket;
    uint32_t bucket_height, bucket_width;
} rf_batch;

/* Create a loader and start its threads. *out receives the handle on success and NULL on
 * failure. Opens (and validates) every shard before returning; reads and decodes start at once,
 * so the first batch is usually ready soon after. On failure, when out_error is not NULL and
 * error_len > 0, a NUL-terminated message is written there (there is no loader to ask).
 * Errors: RF_EINVAL, RF_ENOFILES, RF_EFORMAT, RF_EINDEX, RF_ERESUME, RF_ENODEV, RF_ECUDA,
 * RF_ENOMEM, -errno from open/read. A shard, index, image list or token file that is not a
 * regular file (a FIFO, a device, a directory, a socket) is RF_EFORMAT (RF_EINDEX for an
 * index) naming the path and what it is, without opening it, so nothing blocks. A shard must
 * hold a sample and nothing but zeros after its end-of-archive marker (RF_EFORMAT); an index
 * beside a shard must cover all of it (RF_EINDEX naming the index and line, the shard, the
 * member and its offset; docs/reliability.md). RF_ENOMEM (batch ring, staging arena, tables, device pool)
 * names what and how many bytes were requested; RF_ENODEV (device_kind CUDA) says whether the
 * driver is missing, too old, or sees no GPU (see rf_cuda_status). A failed create frees
 * everything it made. */
RF_API int rf_loader_create(const rf_config *cfg, rf_loader **out, char *out_error, size_t error_len);

/* The configuration a created loader runs with, into *out (whose struct_size the caller set
 * via rf_config_init; at most that many bytes are written, and struct_size stays).
 * Every AUTO field holds the value the loader resolved: decode_threads and io_threads (the
 * threads started), io_engine (RF_IO_URING or RF_IO_PREAD: the engine reading, after any
 * fallback), prefetch_depth, device_kind (RF_DEVICE_HOST or RF_DEVICE_CUDA), staging_bytes
 * (the arena's bytes, after the raising and rounding described at the field), image_height
 * and image_width, resize_shorter,
 * flip_prob, token_dtype (token sources), decode_schedule (CPU, MANUAL or BALANCE); dct_scaling
 * is RF_DCT_SCALING_OFF when the run decodes at full scale only, and stays AUTO (on)
 * otherwise. A value the caller set is reported as given, except where a field's comment says
 * create changes it (naive's fixed settings, dct_scaling with gpu_decode or hw_decode_percent,
 * staging_bytes' raising), the seed
 * a resume state carries, and 0 in a field with a fixed default (reported as that default).
 * shards points at the loader's own copies of the patterns, fields at its copy of the list
 * (NULL without fields) and label_json_path at its copy of the path, valid until
 * rf_loader_destroy;
 * resume_state is NULL and resume_state_bytes 0 (the blob is read at create and not kept).
 * Works after rf_loader_stop and in a fork() child (it only reads). Errors: RF_EINVAL (NULL
 * arguments, struct_size below 8). */
RF_API int rf_loader_config(const rf_loader *ld, rf_config *out);

/* Lease the next batch, in epoch order. Blocks until it is ready (its copy to the device is
 * enqueued, not necessarily complete: use rf_batch_wait()), or at most next_timeout_ms when
 * that is set (then RF_ETIMEDOUT, the one error that is not sticky). Returns 0 and sets *out;
 * or RF_EPOCH_END once at the end of each epoch (then the next call starts the following
 * epoch); or RF_DONE after the last configured epoch; or a negative code (sticky worker errors
 * too).
 * Batches not yet released count against prefetch_depth: holding all of them stalls the ring. */
RF_API int rf_loader_next(rf_loader *ld, rf_batch **out);

/* Return a batch to the ring. `stream` is the CUDA stream on which the consumer last used the
 * batch's device memory (NULL: the legacy default stream); the memory is recycled in stream
 * order after that work. Releasing a batch twice, or one of another loader, is RF_ESTATE. */
RF_API int rf_loader_release(rf_loader *ld, rf_batch *batch, void *stream);

/* Make `stream` wait (on the device, without blocking the host) until the batch's copy to the
 * device completed. No-op returning 0 on the host backend. Errors: RF_ECUDA. */
RF_API int rf_batch_wait(const rf_batch *batch, void *stream);

/* Block the calling thread until the batch's copy completed. No-op on the host backend. */
RF_API int rf_batch_synchronize(const rf_batch *batch);

/* Stop every thread and reap in-flight reads and copies, but free nothing: the memory of every
 * batch handed out stays readable until rf_loader_destroy, which must still be called (leased
 * batches keep their contents: nothing writes the ring or their device memory any more; a
 * released CUDA batch's device memory is back in the loader's own pool, which keeps it and
 * hands it to nobody). For bindings whose arrays may outlive the loader's close (Python frees the loader
 * when the last array over its memory is gone). Afterwards rf_loader_next and
 * rf_loader_set_epoch return RF_ECLOSED; release, state, stats and destroy work. Idempotent.
 * Errors: RF_EINVAL, RF_EFORK. */
RF_API int rf_loader_stop(rf_loader *ld);

/* The one call any thread may make at any time, also while another thread is inside a call on
 * ld (rf_loader_next waiting for a batch from a stalled server, say): from now on
 * rf_loader_next and rf_loader_set_epoch return RF_ECLOSED ("the loader was closed from
 * another thread"), and a call of rf_loader_next that is waiting returns it at once. It stops
 * nothing and frees nothing: once the consumer's calls returned, rf_loader_stop or
 * rf_loader_destroy follow as usual. For bindings whose close() may come from another thread
 * than the one iterating. Idempotent. Errors: RF_EINVAL, RF_EFORK. */
RF_API int rf_loader_cancel(rf_loader *ld);

/* Stop every thread, reap in-flight reads and copies, free everything. Safe mid-epoch and with
 * leased batches outstanding (their memory is freed: do not touch them afterwards).
 * rf_loader_destroy(NULL) is a no-op. */
RF_API void rf_loader_destroy(rf_loader *ld);

/* Detail for the most recent error of this loader ("" if none). Valid until the next call on
 * the loader. Never NULL. */
RF_API const char *rf_last_error(const rf_loader *ld);

/* A static description of any code returned by ringfeed (own codes and -errno). Never NULL. */
RF_API const char *rf_strerror(int code);
/* The name of an rf_recovered kind ("header_bytes", "jfif_version", "icc"), or NULL for an
 * index that names none. */
RF_API const char *rf_recovered_name(uint32_t kind);
/* The name of an rf_skip_reason ("tar_header", "truncated", "not_jpeg", "corrupt", "too_large",
 * "io", "label", "hook", "field"), or NULL for an index that names none: the bench's JSON and
 * the Python binding key skipped_by_reason by these names. */
RF_API const char *rf_skip_reason_name(uint32_t reason);

/* The symbolic name of one of ringfeed's own error codes (RF_ERRORS): "RF_EINVAL" for
 * RF_EINVAL, and so on. NULL for any other code (0, RF_EPOCH_END, RF_DONE, -errno, unknown). */
RF_API const char *rf_err_name(int code);

/* "MAJOR.MINOR.PATCH" of RF_VERSION_* above, as this library was built: the CMake package's
 * and ringfeed.pc's version too; every command prints it for --version. */
RF_API const char *rf_version(void);

/* ---- epochs and resume ------------------------------------------------------------------- */

/* Number of batches one epoch delivers on this rank (equal on every rank). */
RF_API uint64_t rf_loader_batches_per_epoch(const rf_loader *ld);
/* Number of samples in the dataset (all shards, all ranks). */
RF_API uint64_t rf_loader_num_samples(const rf_loader *ld);

/* Restart the pipeline at the beginning of `epoch`. Outstanding leased batches must have been
 * released (else RF_ESTATE). Discards prefetched work. */
RF_API int rf_loader_set_epoch(rf_loader *ld, uint64_t epoch);

/* Write the consumer's position (the batches handed out by rf_loader_next so far) as a small
 * versioned blob. With buf == NULL or cap too small, only *len is set and RF_EINVAL returned
 * when buf != NULL. The blob is platform-independent (little-endian fixed fields). */
RF_API int rf_loader_state(const rf_loader *ld, void *buf, uint64_t cap, uint64_t *len);

/* ---- statistics -------------------------------------------------------------------------- */

typedef struct rf_stats {
    uint32_t struct_size;
    uint32_t io_threads;
    uint32_t decode_threads;  /* decode threads started: rf_config.decode_threads or its default */
    uint32_t prefetch_depth;
    char io_engine[16];       /* "io_uring" or "pread" */
    char io_engine_why[160];  /* why this engine: "requested", or the reason io_uring was refused */
    char device[32];          /* "host" or "cuda:N" */
    uint32_t registered_buffers; /* 1 when io_uring reads into registered (fixed) buffers */
    uint32_t pinned;          /* 1 when the ring slots are page-locked for DMA */

    uint64_t samples_delivered; /* samples in batches handed to the consumer */
    uint64_t batches_delivered;
    uint64_t samples_decoded;
    uint64_t bytes_read;        /* payload bytes read from shards */
    uint64_t reads;             /* read requests completed */
    uint64_t read_retries;      /* short reads and transient errors retried */

    uint64_t io_busy_ns;        /* summed over I/O threads: time not blocked waiting for work */
    uint64_t decode_busy_ns;    /* summed over decode threads: time spent decoding */
    uint64_t copy_busy_ns;      /* time the copy stage spent enqueuing copies */
    uint64_t consumer_wait_ns;  /* time rf_loader_next() blocked waiting for a batch */
    uint64_t wall_ns;           /* since create */
    uint64_t epoch;             /* the consumer's epoch: of the last batch delivered, the next
                                 * one once RF_EPOCH_END was returned for it (before any batch:
                                 * start_epoch, or the epoch a resume state restored) */
    uint64_t pinned_bytes;      /* page-locked host bytes of the batch ring; 0 when the ring
                                 * is pageable (host backend, naive, hugepages not registered).
                                 * The staging arena is plain memory and is not counted */
    uint64_t dct_scaled;        /* images decoded at 1/2, 1/4 or 1/8 scale */

    uint64_t skipped;           /* samples left out under RF_ON_ERROR_SKIP, all epochs, as they
                                 * fail: prefetched batches included (per epoch: epoch_*) */
    uint64_t skipped_by_reason[RF_SKIP_REASONS]; /* enum rf_skip_reason */
    uint64_t nonregular_members; /* tar members that are not regular files (ignored) */

    uint64_t cache_checked_bytes; /* bytes whose page-cache residency was checked at submit */
    uint64_t cache_hit_bytes;     /* ... of which were in the page cache at submit, counting
                                   * pages that readahead or warm hints were still reading from
                                   * storage: it tells how far ahead of the reads those ran,
                                   * not what came from storage (storage_read_bytes does) */
    uint64_t warmed_bytes;        /* bytes hinted into the page cache ahead of reads */
    uint32_t odirect;             /* 1 when reads bypass the page cache */
    uint32_t hugepages;           /* 0 normal pages, 1 hugetlb 2 MiB, 2 transparent huge pages */
    int32_t numa_node;            /* node threads and ring are placed on; -1 none */
    uint32_t numa_nodes;          /* nodes on this machine */
    uint64_t device_pool_reserved_bytes; /* device memory the pool holds */
    uint64_t device_pool_used_bytes;     /* ... of which batches use now */
    uint64_t device_allocs_after_create; /* cudaMalloc-class calls after create (0 steady) */
    uint64_t host_allocs_after_create;   /* cudaHostAlloc / pinned registrations after create */
    uint64_t ring_register_ns;           /* time to pin (allocate or register) the ring */
    char memory_why[192];     /* what odirect, hugepages and numa got, and why (e.g. a fallback) */
    uint64_t region_decoded;  /* images whose restart markers let decode skip the Huffman data
                               * above and beside the crop (shards packed with --restart) */
    uint64_t gpu_decoded;     /* images decoded by the GPU decode path (rf_config.gpu_decode);
                                 one skipped as bad is not counted */
    uint64_t hw_decoded;      /* images decoded by the hardware JPEG decoders
                                 (rf_config.hw_decode_percent); one skipped as bad is not
                                 counted */
    uint64_t storage_read_bytes; /* bytes read from storage for this loader: the kernel's
                                  * per-thread I/O accounting (read_bytes) of its I/O threads
                                  * and of io_uring's worker threads for them, plus create's
                                  * thread while it opened the shards. Reads that missed the
                                  * page cache, the readahead they started, warm hints and
                                  * O_DIRECT reads count; page-cache hits do not. Over any
                                  * interval the page-cache hit ratio is
                                  * max(0, 1 - storage_read_bytes / bytes_read) of the deltas
                                  * (ringfeed-bench's cache_hit_ratio). 0 when not measured */
    uint32_t storage_measured;   /* 1 when storage_read_bytes is measured; 0 when the kernel
                                  * keeps no per-thread I/O accounting or a shard is on FUSE */
    char storage_why[128];       /* why storage_measured is 0 ("" when it is 1) */

    /* The epoch a state written now (rf_loader_state) resumes in: `epoch`, or the next one
     * once every batch of `epoch` was handed out (its RF_EPOCH_END need not have been seen). A
     * loader created from that state starts there, and its `epoch` is this value. */
    uint64_t resume_epoch;

    /* Counts of one epoch on this rank: counted_epoch is the epoch of the last batch
     * rf_loader_next handed out (before the first one, the epoch the loader starts in, with
     * counts 0). The counts cover the batches of that epoch handed out so far: a skipped sample
     * is counted with the batch whose position it left, so skips of batches not handed out
     * yet (prefetched ones, of this epoch or the next, which `skipped` above already counts)
     * are not in them. They are final once rf_loader_next returned RF_EPOCH_END for the epoch
     * (epoch_final 1, until the first batch of the next epoch is handed out); then
     * epoch_delivered + epoch_skipped == epoch_total, in either on_error mode. After
     * rf_loader_set_epoch they start again; after a resume they cover the rest of the epoch
     * this loader ran. */
    uint64_t counted_epoch;
    uint64_t epoch_delivered;  /* real (non-padding) samples delivered */
    uint64_t epoch_skipped;    /* samples left out under RF_ON_ERROR_SKIP */
    uint64_t epoch_skipped_by_reason[RF_SKIP_REASONS]; /* enum rf_skip_reason */
    uint64_t epoch_total;      /* the epoch's samples on this rank (padding not counted; after
                                  a resume, those of the rest of the epoch) */
    uint32_t epoch_final;      /* 1 once RF_EPOCH_END was returned for counted_epoch */

    uint64_t gpu_plain_decoded; /* of gpu_decoded: files without restart markers (plain
                                 * packets: a decode thread walked their Huffman codes up to
                                 * the crop's last MCU row, about half a CPU decode's work;
                                 * ringfeed-pack --restart takes that away) */
    /* The decode scheduler (rf_config.decode_schedule): the resolved mode, and with BALANCE
     * the shares it sends to the GPU now, in permille of the JPEGs: sched_gpu_permille to the
     * engines and kernels together, sched_hw_permille of those to the engines (both 0 in the
     * other modes); and the engines' state (enum rf_hw_engines: with hw_decode_percent
     * OPENING from create until the open started with the first batch ends, then READY, or
     * NONE when it failed or the backend has none, the reason not reported here; with BALANCE
     * UNOPENED until the first batch whose GPU share is at least half the images, which starts
     * the open (a training loop the CPU keeps fed never opens them), then the same; READY from
     * create on the host backend with hw_decode_percent; NONE otherwise).
     * Where samples went: hw_decoded, gpu_decoded, and the CPU the rest of samples_decoded. */
    uint32_t decode_schedule;
    uint32_t sched_gpu_permille;
    uint32_t sched_hw_permille;
    uint32_t hw_engines;
    uint64_t hw_open_ns; /* how long the hardware decoders took to open (wall clock, on the
                          * opener thread, beside the batches after the first); 0 until they
                          * are open, and on the host backend */
    /* Remote shards (docs/remote.md): HTTP requests made (create's opening, index fetches,
     * scans and listings, every sample's ranged GET, and the shard cache's whole-object GETs
     * for fills, retries included), of them the
     * retries, and the body bytes received. reads, read_retries and bytes_read above count
     * the samples' requests as for local files. All 0 for local shards. */
    uint64_t remote_requests;
    uint64_t remote_retries;
    uint64_t remote_bytes;
    /* The local shard cache (rf_config.cache_dir; docs/remote.md). shard_cache_on: 0 no cache
     * (no cache_dir, or local shards), 1 on, 2 hits still served but fills off after a full
     * disk. hits: shards read from their cached copy (found at create, or later after another
     * process filled them); misses: shards not found at create (stale included); stale: of
     * the misses, cached with another ETag or size (the object changed); bypasses: fills
     * refused because the shard is larger than cache_bytes; fills: shards this loader filled
     * and published; fill_requests: the whole-object GETs it made for fills (also counted in
     * remote_requests and remote_bytes); fill_failures: fills started that did not publish;
     * bytes_written: bytes written into fills; evictions: shards this loader evicted.
     * shard_cache_why: why fills are off (the file, byte offset and error), else the last fill
     * refused or failed and why, else why there is no cache, or "". */
    uint32_t shard_cache_on;
    uint64_t shard_cache_hits;
    uint64_t shard_cache_misses;
    uint64_t shard_cache_stale;
    uint64_t shard_cache_bypasses;
    uint64_t shard_cache_fills;
    uint64_t shard_cache_fill_requests;
    uint64_t shard_cache_fill_failures;
    uint64_t shard_cache_bytes_written;
    uint64_t shard_cache_evictions;
    char shard_cache_why[512];
    /* Why the hardware decoders are out (hw_engines NONE) when BALANCE or hw_decode_percent
     * asked for them: their open's error on the opener thread (a GPU without engines:
     * "hw_decode: this GPU has no hardware JPEG decoder ..."), or that the backend has none;
     * "" while they are not opened yet (BALANCE), opening or ready, or when nothing asked for
     * them. Truncated to fit. */
    char hw_engines_why[256];
    /* Remote shards: of remote_requests and remote_bytes, create's (its opens, listings,
     * indexes and header reads; a shard found in the shard cache is read from its copy, so it
     * adds only its open's request and one byte). docs/remote.md says what create reads. */
    uint64_t remote_create_requests;
    uint64_t remote_create_bytes;
    /* The shard cache: reads of a cached copy whose checksum did not match its bytes, each
     * a miss: the copy is dropped and the read fetched from the server (docs/cache.md). */
    uint64_t shard_cache_corrupt;
    /* Samples delivered although libjpeg recovered from something in their file that costs no
     * pixel (enum rf_recovered: junk bytes skipped, metadata it does not understand), and
     * by kind (a sample counts once in each kind it needed). */
    uint64_t recovered;
    uint64_t recovered_by_kind[RF_RECOVERED_KINDS];
    /* Sync-point indexes (rf_config.sync_index): samples whose GPU packet started from an
     * index entry; entries found stale (the member's size or hash not the entry's, or its
     * geometry not the entry's), each counted once per run; entries the decode threads built
     * this run; entries in the sidecars found at create. */
    uint64_t sync_indexed;
    uint64_t sync_stale;
    uint64_t sync_built;
    uint64_t sync_loaded;
} rf_stats;

RF_API void rf_stats_init(rf_stats *st);
/* Fill *st (whose struct_size the caller set via rf_stats_init). */
RF_API int rf_loader_stats(const rf_loader *ld, rf_stats *st);

/* Return device pool memory above keep_bytes to the driver (cudaMemPoolTrimTo), e.g. between
 * training and evaluation. Not for the hot loop: batches after a trim grow the pool again,
 * and each growth counts in rf_stats.device_allocs_after_create. No-op (0) on the host
 * backend. Errors: RF_EINVAL, RF_ECUDA. */
RF_API int rf_loader_trim(rf_loader *ld, uint64_t keep_bytes);

/* ---- layout, for bindings --------------------------------------------------------------- */

/* One row of rf_abi_layout's table. Rows of a struct: first the struct itself (name "", size
 * and align of the whole struct), then each field in declaration order (offset, size and align
 * from offsetof, sizeof and _Alignof). Rows of the error codes: struct_name "rf_error", name
 * and value of each of RF_ERRORS, offset, size and align 0. */
typedef struct rf_field_layout {
    const char *struct_name; /* "rf_config", "rf_batch", "rf_field", "rf_stats", "rf_setting"
                              * or "rf_error" */
    const char *name;        /* field or error code name; "" on a struct's own row */
    uint64_t offset;         /* byte offset of the field in its struct */
    uint64_t size;           /* bytes of the field (of the struct, on its own row) */
    uint64_t align;          /* alignment of the field (of the struct, on its own row) */
    int64_t value;           /* an error code's value; 0 on struct and field rows */
} rf_field_layout;

/* The library's own view of the structs a binding mirrors (rf_config, rf_batch, rf_field,
 * rf_stats, rf_setting) and of its error codes, so that a binding can check every field's
 * name, offset and size against the library it loaded, and take the codes from it rather than
 * from a copy (the Python binding does both when it loads the library). Static: never freed,
 * the same at every call.
 * *count (when count is not NULL) receives the number of rows. */
RF_API const rf_field_layout *rf_abi_layout(uint32_t *count);

/* ---- the settings table, for bindings and tools ----------------------------------------- */

/* How a setting is held in rf_config (rf_setting.type). */
enum rf_setting_type {
    RF_SETTING_BOOL = 0,  /* uint32_t: 0 or 1 */
    RF_SETTING_U32 = 1,   /* uint32_t */
    RF_SETTING_I32 = 2,   /* int32_t */
    RF_SETTING_U64 = 3,   /* uint64_t */
    RF_SETTING_F32 = 4,   /* float */
    RF_SETTING_F32X3 = 5, /* float[3], one per colour channel */
    RF_SETTING_ENUM = 6,  /* uint32_t: one of the values `values` names */
    RF_SETTING_STR = 7,   /* const char *: a NUL-terminated string, copied at create */
    RF_SETTING_STRS = 8,  /* const char *const *: the shard patterns */
    RF_SETTING_PTR = 9,   /* a pointer create reads (resume_state) or passes on (a hook's ctx) */
    RF_SETTING_FUNC = 10, /* a function pointer (sample_hook) */
    RF_SETTING_U32S = 11, /* const uint32_t *: an array, its count the next field */
    RF_SETTING_F32S = 12, /* const float *: an array, its count the next field */
};
/* rf_setting.flags */
#define RF_SETTING_HEADER 1u /* struct_size and version: the struct's own header */
#define RF_SETTING_INPUT 2u  /* what to read (the shards, a resume state), which a tool or a
                              * binding takes in its own form rather than as a setting */
#define RF_SETTING_C_ONLY 4u /* a C function and its context: no command-line or Python form */
#define RF_SETTING_TOKENS 8u /* read by TOKENS sources only, and checked for them only */

/* One field of rf_config. Integer types (BOOL, U32, I32, U64, ENUM) use the *_int numbers and
 * min/max, F32 and F32X3 (each element) the *_f ones, STR default_str; the others have no
 * default but NULL. A field is valid when it holds auto_int / auto_f (any negative value for
 * flip_prob; all three elements for F32X3) or a value in min..max. */
typedef struct rf_setting {
    const char *name;        /* the field's name */
    const char *doc;         /* what it sets, in one line (the field's comment is the spec) */
    const char *unit;        /* "bytes", "ms", "px", "samples", ...; "" for none */
    const char *stage;       /* the folder of src/ (or "loaders") whose code reads it */
    const char *values;      /* ENUM: its values' names in value order, comma-separated
                              * ("random,center"); NULL otherwise */
    const char *rule;        /* how create decides the default of a field holding AUTO, when
                              * it depends on the machine, the data or other fields (what
                              * rf_config_init writes is then AUTO); NULL: a fixed default */
    const char *default_str; /* STR: the default; NULL: none */
    uint64_t offset;         /* offsetof(rf_config, name) */
    uint64_t size;           /* bytes of the field */
    uint32_t type;           /* enum rf_setting_type */
    uint32_t flags;          /* RF_SETTING_* */
    uint64_t min, max;       /* integers: the valid range (all non-negative) */
    uint64_t default_int;    /* integers: the fixed default */
    uint64_t auto_int;       /* integers: the AUTO value */
    double min_f, max_f;     /* floats: the valid range */
    double default_f;        /* floats: the fixed default */
    double auto_f;           /* floats: the AUTO value */
} rf_setting;

/* Every field of rf_config, in declaration order (as rf_abi_layout lists them): the table that
 * rf_config_init, rf_loader_create's defaults and range checks, the Python binding (its ctypes
 * mirror and keyword arguments) and ringfeed-bench (its flags and usage) are all made from.
 * Static: never freed, the same at every call. *count (when count is not NULL) receives the
 * number of rows. */
RF_API const rf_setting *rf_config_settings(uint32_t *count);

/* CPUs this process may use, the default of rf_config.decode_threads: the CPUs of the calling
 * thread's affinity mask (sched_getaffinity: taskset, numactl, cpusets), capped by the cgroup
 * CPU quota (cgroup v2 cpu.max, v1 cpu.cfs_quota_us / cpu.cfs_period_us) of the process'
 * cgroup and its ancestors, rounded up (a quota of 1.5 CPUs counts 2); the online CPUs when
 * the mask cannot be read. At least 1. Environment variables are not read: a launcher's ranks
 * per node (torchrun's LOCAL_WORLD_SIZE) are the caller's to divide by (the Python binding
 * does). rf_stats.decode_threads says how many decode threads a loader started. */
RF_API uint32_t rf_cpu_count(void);

/* Whether this build has the CUDA backend, and how many devices are usable right now
 * (0 without a driver or GPU). Never creates a context on a device other than querying. */
RF_API int rf_cuda_device_count(void);

/* The same count, and in msg (NUL-terminated, truncated to len) one sentence saying why no
 * device is usable, telling apart: no NVIDIA driver (libcuda.so.1 cannot be loaded), a driver
 * too old for this runtime, a driver without a GPU (cudaErrorNoDevice), a failed driver
 * initialization, and a build without CUDA; or, with devices, how many and which versions.
 * For tools and bindings that fall back to the host backend and should say why. msg may be
 * NULL when len is 0. Like rf_cuda_device_count, it initializes the CUDA runtime: a process
 * that will fork() should call it after forking, in the process that uses the GPU. */
RF_API int rf_cuda_status(char *msg, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* RINGFEED_H */
