/* test_config.c — rf_config's defaults and a loader's effective config: rf_config_init writes
 * the default ringfeed.h documents for every field (AUTO where it depends on the machine or
 * the data), and rf_loader_config reports what a created loader resolved them to, with every
 * value the caller set as given. Fields are walked through rf_abi_layout, so a field added to
 * rf_config without a default spelled out here fails the first test. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ringfeed.h"
#include "testutil.h"

static char *shard; /* a GNU tar shard of 6 labelled samples, made in main() */

/* ---- fields through rf_abi_layout ---------------------------------------------------------- */

#define MAX_FIELDS 128

/* The field rows of rf_config in rf_abi_layout's table. */
static uint32_t config_rows(const rf_field_layout *rows[MAX_FIELDS])
{
    uint32_t n = 0, nf = 0;
    const rf_field_layout *t = rf_abi_layout(&n);
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(t[i].struct_name, "rf_config") == 0 && t[i].name[0]) {
            ck_assert_uint_lt(nf, MAX_FIELDS);
            rows[nf++] = &t[i];
        }
    ck_assert_uint_gt(nf, 50);
    return nf;
}

static int listed(const char *name, const char *const *names)
{
    for (; names && *names; names++)
        if (strcmp(*names, name) == 0)
            return 1;
    return 0;
}

/* Every field of a and b, byte for byte, except those named in `skip` (NULL-terminated). */
static void assert_same_fields(const rf_config *a, const rf_config *b, const char *const *skip)
{
    const rf_field_layout *rows[MAX_FIELDS];
    uint32_t n = config_rows(rows);
    for (uint32_t i = 0; i < n; i++)
        if (!listed(rows[i]->name, skip))
            ck_assert_msg(memcmp((const char *)a + rows[i]->offset,
                                 (const char *)b + rows[i]->offset, rows[i]->size) == 0,
                          "rf_config.%s differs", rows[i]->name);
}

/* ---- rf_config_init ------------------------------------------------------------------------ */

enum kind { U, I, F, F3, P, S };

/* ringfeed.h's documented default of every field, in declaration order. */
static const struct {
    const char *name;
    enum kind kind;
    double value;
} documented[] = {
    {"struct_size", U, sizeof(rf_config)}, {"version", U, RF_CONFIG_VERSION},
    {"shards", P, 0}, {"shard_count", U, 0}, {"batch_size", U, 256}, {"image_size", U, 224},
    {"crop", U, RF_CROP_RANDOM}, {"layout", U, RF_LAYOUT_NHWC}, {"resize_shorter", U, RF_AUTO},
    {"scale_min", F, 0.08f}, {"scale_max", F, 1.0f}, {"ratio_min", F, 3.0f / 4.0f},
    {"ratio_max", F, 4.0f / 3.0f}, {"flip_prob", F, RF_FLIP_PROB_AUTO}, {"seed", U, 0},
    {"order", U, RF_ORDER_GLOBAL}, {"drop_last", U, 0}, {"rank", U, 0}, {"world_size", U, 1},
    {"remainder", U, RF_REMAINDER_PAD}, {"epochs", U, 0}, {"start_epoch", U, 0},
    {"decode_threads", U, RF_AUTO}, {"io_threads", U, RF_AUTO}, {"io_engine", U, RF_IO_AUTO},
    {"io_queue_depth", U, 64}, {"prefetch_depth", U, RF_AUTO},
    {"device_kind", U, RF_DEVICE_AUTO}, {"device_index", I, 0}, {"staging_bytes", U, RF_AUTO},
    {"max_sample_bytes", U, 64 << 20}, {"max_image_pixels", U, 100e6},
    {"max_image_dim", U, 32768}, {"io_retries", U, 8}, {"resume_state", P, 0},
    {"resume_state_bytes", U, 0}, {"dtype", U, RF_DTYPE_UINT8}, {"mean", F3, 0},
    {"std", F3, 1}, {"source", U, RF_SOURCE_TAR}, {"token_bytes", U, 0}, {"seq_len", U, 0},
    {"token_windows", U, RF_WINDOWS_RANDOM}, {"token_dtype", U, RF_AUTO},
    {"shard_window", U, 4}, {"on_error", U, RF_ON_ERROR_FAIL},
    {"max_consecutive_skips", U, 100}, {"max_scans", U, 1000}, {"max_name_bytes", U, 4096},
    {"warm", U, 0}, {"warm_bytes", U, 1 << 30}, {"odirect", U, 0}, {"hugepages", U, 0},
    {"numa", U, RF_NUMA_AUTO}, {"naive", U, 0}, {"decode_nice", U, RF_DECODE_NICE_AUTO},
    {"gpu_decode", U, 0},
    {"gpu_decode_percent", U, 100}, {"hw_decode_percent", U, 0}, {"next_timeout_ms", U, 0},
    {"dct_scaling", U, RF_DCT_SCALING_AUTO}, {"label_source", U, RF_LABEL_CLS},
    {"sample_hook", P, 0}, {"sample_hook_ctx", P, 0},
    {"fields", P, 0}, {"max_field_bytes", U, 16 << 10},
    {"image_height", U, RF_AUTO}, {"image_width", U, RF_AUTO},
    {"label_json_path", P, 0},
    {"image_exts", S, 0}, /* the string "jpg,jpeg,png,webp": field_value compares it */
    {"decode_schedule", U, RF_SCHEDULE_AUTO},
    {"remote_retries", U, 5}, {"remote_timeout_ms", U, 30000},
    {"cache_dir", P, 0}, {"cache_bytes", U, 0}, {"num_classes", U, 0},
    {"source_shards", P, 0}, {"source_count", U, 0}, {"weights", P, 0}, {"weight_count", U, 0},
    {"epoch_size", U, RF_AUTO}, {"replacement", U, RF_REPLACEMENT_AUTO},
    {"class_weights", P, 0}, {"class_weight_count", U, 0},
    {"sample_weights", P, 0}, {"sample_weight_count", U, 0}, {"source_labels", P, 0},
    {"sync_index", U, RF_SYNC_INDEX_BUILD},
    {"multi_label", U, RF_MULTI_LABEL_OFF},
    {"max_labels", U, 0},
    {"box_ext", P, 0}, {"box_json_path", P, 0}, {"box_class_json_path", P, 0},
    {"box_format", U, RF_BOX_XYXY}, {"box_normalized", U, 0}, {"box_min_visibility", F, 0.0f},
    {"max_boxes", U, 0}, {"keypoint_ext", P, 0}, {"keypoint_json_path", P, 0},
    {"max_points", U, 0}, {"keypoint_flip_pairs", P, 0},
    {"box_output_normalized", U, 0}, {"pad_value", F3, RF_PAD_VALUE_AUTO},
    {"mask", P, 0}, {"mask_dtype", U, RF_DTYPE_UINT8}, {"mask_fill", U, RF_MASK_FILL_AUTO},
    {"multi_crop", P, 0}, {"size_buckets", P, 0},
};
#define NDOCUMENTED (sizeof documented / sizeof documented[0])

/* The field at row r of cfg as a double (kind F3: its element k). */
static double field_value(const rf_config *cfg, const rf_field_layout *r, enum kind kind, int k)
{
    const char *p = (const char *)cfg + r->offset;
    uint32_t u32;
    uint64_t u64;
    int32_t i32;
    float f;
    void *ptr;
    switch (kind) {
    case U:
        if (r->size == 8)
            return memcpy(&u64, p, 8), (double)u64;
        ck_assert_uint_eq(r->size, 4);
        return memcpy(&u32, p, 4), (double)u32;
    case I:
        ck_assert_uint_eq(r->size, 4);
        return memcpy(&i32, p, 4), (double)i32;
    case F:
    case F3:
        ck_assert_uint_eq(r->size, kind == F ? 4 : 12);
        return memcpy(&f, p + 4 * k, 4), (double)f;
    case P:
        ck_assert_uint_eq(r->size, sizeof ptr);
        return memcpy(&ptr, p, sizeof ptr), ptr ? 1.0 : 0.0;
    case S: /* 0 when it is the documented string */
        ck_assert_uint_eq(r->size, sizeof ptr);
        memcpy(&ptr, p, sizeof ptr);
        return ptr && strcmp(ptr, "jpg,jpeg,png,webp") == 0 ? 0.0 : 1.0;
    }
    return -1;
}

START_TEST(config_init_writes_every_documented_default)
{
    rf_config cfg;
    memset(&cfg, 0xA5, sizeof cfg); /* nothing may be left as it was */
    rf_config_init(&cfg);
    const rf_field_layout *rows[MAX_FIELDS];
    uint32_t n = config_rows(rows);
    ck_assert_uint_eq(n, NDOCUMENTED); /* a new field needs its default spelled out above */
    for (uint32_t i = 0; i < n; i++) {
        ck_assert_str_eq(rows[i]->name, documented[i].name);
        for (int k = 0; k < (documented[i].kind == F3 ? 3 : 1); k++) {
            double got = field_value(&cfg, rows[i], documented[i].kind, k);
            double want = documented[i].kind == F || documented[i].kind == F3
                              ? (double)(float)documented[i].value : documented[i].value;
            ck_assert_msg(got == want, "rf_config_init: %s = %g, documented default %g",
                          rows[i]->name, got, want);
        }
    }
}
END_TEST

/* ---- rf_loader_config ---------------------------------------------------------------------- */

static rf_config reported(const rf_loader *ld)
{
    rf_config out;
    rf_config_init(&out);
    ck_assert_int_eq(rf_loader_config(ld, &out), 0);
    ck_assert_uint_eq(out.struct_size, sizeof out);
    ck_assert_uint_eq(out.version, RF_CONFIG_VERSION);
    return out;
}

/* The fields rf_config_init leaves AUTO, which a created loader reports resolved (dct_scaling
 * only where the schedule turns it off: on a CUDA device by default), and the
 * strings it reports as its own copies (shards, image_exts). */
static const char *const auto_fields[] = {
    "shards", "image_exts", "resize_shorter", "flip_prob", "decode_threads", "io_threads",
    "io_engine", "prefetch_depth", "device_kind", "staging_bytes", "image_height", "image_width",
    "decode_schedule", "dct_scaling", "decode_nice", "epoch_size", "replacement", "pad_value",
    "mask_fill",
    NULL};

START_TEST(created_loader_reports_every_auto_value_resolved)
{
    const char *pat;
    rf_config cfg = rf_test_host_config(&pat, shard, 0);
    cfg.device_kind = RF_DEVICE_AUTO; /* CUDA where a GPU is usable, else the host */
    rf_loader *ld = rf_test_create_ok(&cfg);
    rf_config got = reported(ld);
    rf_stats st;
    rf_stats_init(&st);
    ck_assert_int_eq(rf_loader_stats(ld, &st), 0);
    uint32_t cpus = rf_cpu_count() < 1024 ? rf_cpu_count() : 1024;
    ck_assert_uint_eq(got.decode_threads, cpus);
    ck_assert_uint_eq(got.decode_threads, st.decode_threads);
    ck_assert_uint_eq(got.io_threads, st.io_threads);
    /* A CUDA device's default is the balancing scheduler, with the GPU paths' prefetch_depth
     * and io_uring threads; the host backend decodes on the CPU. */
    int cuda = got.device_kind == RF_DEVICE_CUDA;
    /* io_threads' documented default: 1 for io_uring (with the GPU paths on the device, one
     * per three decode threads, rounded up, at most 4), 4 for pread (the one this kernel or
     * its limits leave: the engine reported is the one reading) */
    uint32_t uring = !cuda ? 1 : (cpus + 2) / 3 < 4 ? (cpus + 2) / 3 : 4;
    if (strcmp(st.io_engine, "io_uring") == 0)
        ck_assert(got.io_engine == RF_IO_URING && got.io_threads == uring);
    else
        ck_assert(strcmp(st.io_engine, "pread") == 0 && got.io_engine == RF_IO_PREAD &&
                  got.io_threads == 4);
    ck_assert_uint_eq(got.prefetch_depth, cuda ? 8 : 4);
    ck_assert_uint_eq(got.prefetch_depth, st.prefetch_depth);
    ck_assert_uint_eq(got.device_kind, rf_cuda_device_count() > 0 ? RF_DEVICE_CUDA
                                                                   : RF_DEVICE_HOST);
    /* six small samples: the formula's 64 MiB floor (already a multiple of 4 KiB) */
    ck_assert_uint_eq(got.staging_bytes, 64ull << 20);
    ck_assert_uint_eq(got.resize_shorter, 256);
    ck_assert(got.image_height == 224 && got.image_width == 224); /* image_size for both */
    ck_assert(got.flip_prob == 0.5f);
    ck_assert(got.pad_value[0] == 0 && got.pad_value[1] == 0 && got.pad_value[2] == 0);
    ck_assert_uint_eq(got.decode_nice, RF_DEFAULT_DECODE_NICE); /* 10 */
    ck_assert_uint_eq(got.mask_fill, RF_DEFAULT_MASK_FILL);      /* 255 */
    ck_assert_uint_eq(got.decode_schedule, cuda ? RF_SCHEDULE_BALANCE : RF_SCHEDULE_CPU);
    ck_assert_uint_eq(st.decode_schedule, got.decode_schedule);
    /* every image at full scale under BALANCE; DCT scaling on the CPU's choice */
    ck_assert_uint_eq(got.dct_scaling, cuda ? RF_DCT_SCALING_OFF : RF_DCT_SCALING_AUTO);
    ck_assert_uint_eq(got.token_dtype, RF_AUTO);             /* not a token source */
    ck_assert_uint_eq(got.epoch_size, rf_loader_num_samples(ld)); /* no mixing: the dataset */
    ck_assert_uint_eq(got.replacement, RF_REPLACEMENT_OFF);
    /* the loader's own copy of the pattern, not the caller's string */
    ck_assert_uint_eq(got.shard_count, 1);
    ck_assert_ptr_ne(got.shards[0], pat);
    ck_assert_str_eq(got.shards[0], shard);
    ck_assert_ptr_ne(got.image_exts, cfg.image_exts);
    ck_assert_str_eq(got.image_exts, "jpg,jpeg,png,webp");
    ck_assert_ptr_null(got.resume_state);
    ck_assert_uint_eq(got.resume_state_bytes, 0);
    /* and every other field as the caller's config had it */
    assert_same_fields(&got, &cfg, auto_fields);
    rf_loader_destroy(ld);
}
END_TEST

/* AUTO values that depend on other fields: flips and the resize with a center crop, the
 * depth and DCT scaling with gpu_decode, and naive's fixed settings over the caller's. */
START_TEST(auto_values_follow_the_fields_they_depend_on)
{
    const char *pat;
    rf_config cfg = rf_test_host_config(&pat, shard, 160);
    cfg.crop = RF_CROP_CENTER;
    cfg.decode_threads = 1;
    rf_loader *ld = rf_test_create_ok(&cfg);
    rf_config got = reported(ld);
    ck_assert(got.flip_prob == 0.0f);
    ck_assert_uint_eq(got.resize_shorter, (160 * 256 + 112) / 224);
    ck_assert(got.image_height == 160 && got.image_width == 160);
    rf_loader_destroy(ld);

    /* the padding: Ultralytics' grey for a letterbox, torchvision's 0 for center_pad; flips
     * off by default for both */
    for (uint32_t crop = RF_CROP_LETTERBOX; crop <= RF_CROP_CENTER_PAD; crop++) {
        cfg.crop = crop;
        ld = rf_test_create_ok(&cfg);
        got = reported(ld);
        float want = crop == RF_CROP_LETTERBOX ? 114.0f : 0.0f;
        for (int k = 0; k < 3; k++)
            ck_assert(got.pad_value[k] == want);
        ck_assert(got.flip_prob == 0.0f);
        rf_loader_destroy(ld);
    }
    cfg.crop = RF_CROP_CENTER;

    /* a non-square output: each side AUTO takes image_size, and the shorter side before a
     * center crop follows the longer output side */
    cfg.image_width = 200;
    ld = rf_test_create_ok(&cfg);
    got = reported(ld);
    ck_assert(got.image_height == 160 && got.image_width == 200);
    ck_assert_uint_eq(got.resize_shorter, (200 * 256 + 112) / 224);
    rf_loader_destroy(ld);
    cfg.image_width = 0, cfg.image_height = 300;
    ld = rf_test_create_ok(&cfg);
    got = reported(ld);
    ck_assert(got.image_height == 300 && got.image_width == 160);
    ck_assert_uint_eq(got.resize_shorter, (300 * 256 + 112) / 224);
    rf_loader_destroy(ld);

    cfg = rf_test_host_config(&pat, shard, 0);
    cfg.decode_threads = 1;
    cfg.gpu_decode = 1; /* the host backend runs GPU decode's integer code on the CPU */
    ld = rf_test_create_ok(&cfg);
    got = reported(ld);
    ck_assert_uint_eq(got.prefetch_depth, 8);
    ck_assert_uint_eq(got.dct_scaling, RF_DCT_SCALING_OFF);
    ck_assert_uint_eq(got.gpu_decode_percent, 100);
    rf_loader_destroy(ld);

    cfg = rf_test_host_config(&pat, shard, 0);
    cfg.decode_threads = 1;
    cfg.naive = 1;
    cfg.io_engine = RF_IO_URING;
    cfg.io_threads = 3;
    cfg.prefetch_depth = 6;
    cfg.warm = 1;
    ld = rf_test_create_ok(&cfg);
    got = reported(ld);
    ck_assert_uint_eq(got.io_engine, RF_IO_PREAD);
    ck_assert_uint_eq(got.io_threads, 1);
    ck_assert_uint_eq(got.io_queue_depth, 1);
    ck_assert_uint_eq(got.prefetch_depth, 1);
    ck_assert_uint_eq(got.warm, 0);
    ck_assert_uint_eq(got.numa, RF_NUMA_OFF);
    rf_loader_destroy(ld);
}
END_TEST

/* A sample hook that keeps every sample as it is (explicit_values_are_reported_unchanged). */
static int keep_sample(const rf_sample_view *v, void *ctx)
{
    (void)v, (void)ctx;
    return 0;
}

START_TEST(explicit_values_are_reported_unchanged)
{
    const char *pat;
    rf_config cfg = rf_test_host_config(&pat, shard, 32);
    cfg.batch_size = 3;
    cfg.crop = RF_CROP_CENTER;
    cfg.layout = RF_LAYOUT_NCHW;
    cfg.resize_shorter = 40;
    cfg.scale_min = 0.25f, cfg.scale_max = 0.75f;
    cfg.ratio_min = 0.5f, cfg.ratio_max = 2.0f;
    cfg.flip_prob = 0.25f;
    cfg.seed = 7;
    cfg.order = RF_ORDER_SHARD;
    cfg.drop_last = 1;
    cfg.rank = 1, cfg.world_size = 2;
    cfg.remainder = RF_REMAINDER_DROP;
    cfg.epochs = 3;
    cfg.start_epoch = 2;
    cfg.decode_threads = 2;
    cfg.io_threads = 3;
    cfg.io_engine = RF_IO_PREAD;
    cfg.io_queue_depth = 8;
    cfg.prefetch_depth = 5;
    cfg.staging_bytes = 8ull << 20; /* a multiple of 4 KiB above 4 x the largest sample */
    cfg.max_sample_bytes = 1 << 20;
    cfg.max_image_pixels = 1000000;
    cfg.max_image_dim = 2000;
    cfg.io_retries = 3;
    cfg.dtype = RF_DTYPE_FLOAT32;
    for (int c = 0; c < 3; c++)
        cfg.mean[c] = 100.0f + c, cfg.std[c] = 50.0f + c;
    cfg.shard_window = 2;
    cfg.on_error = RF_ON_ERROR_SKIP;
    cfg.max_consecutive_skips = 7;
    cfg.max_scans = 50;
    cfg.max_name_bytes = 1000;
    cfg.warm = 1;
    cfg.warm_bytes = 1 << 20;
    cfg.hugepages = 1;
    cfg.numa = RF_NUMA_OFF;
    cfg.decode_nice = 3;
    cfg.gpu_decode_percent = 40;
    cfg.next_timeout_ms = 60000;
    cfg.dct_scaling = RF_DCT_SCALING_OFF;
    cfg.label_source = RF_LABEL_NONE;
    cfg.sample_hook = keep_sample;
    cfg.sample_hook_ctx = &cfg;
    cfg.max_field_bytes = 1000;
    cfg.image_height = 24, cfg.image_width = 40;
    cfg.image_exts = "webp,JPG";
    cfg.decode_schedule = RF_SCHEDULE_CPU;
    cfg.order = RF_ORDER_GLOBAL; /* order shard does not mix */
    cfg.epoch_size = 8;
    cfg.replacement = RF_REPLACEMENT_ON;
    cfg.pad_value[0] = 1, cfg.pad_value[1] = 0, cfg.pad_value[2] = 255;
    cfg.mask_dtype = RF_DTYPE_INT32, cfg.mask_fill = 1000;
    rf_loader *ld = rf_test_create_ok(&cfg);
    rf_config got = reported(ld);
    static const char *const strings[] = {"shards", "image_exts", NULL};
    assert_same_fields(&got, &cfg, strings);
    ck_assert_str_eq(got.shards[0], shard);
    ck_assert_str_eq(got.image_exts, "webp,JPG");
    rf_loader_destroy(ld);
}
END_TEST

/* 0 in a field with a fixed default asks for that default (callers that filled the struct
 * before rf_config_init wrote them), and the loader reports the default it used; decode_nice
 * 0 is no added niceness, what such callers had before it defaulted to 10; mask_fill 0 fills
 * with 0. */
START_TEST(zero_in_a_fixed_default_field_is_that_default)
{
    const char *pat;
    rf_config cfg = rf_test_host_config(&pat, shard, 0), init = cfg;
    cfg.decode_threads = 1;
    cfg.batch_size = cfg.image_size = cfg.world_size = cfg.io_queue_depth = 0;
    cfg.max_sample_bytes = cfg.max_image_pixels = cfg.warm_bytes = 0;
    cfg.max_image_dim = cfg.io_retries = cfg.shard_window = cfg.max_consecutive_skips = 0;
    cfg.max_scans = cfg.max_name_bytes = cfg.gpu_decode_percent = cfg.max_field_bytes = 0;
    cfg.remote_retries = cfg.remote_timeout_ms = 0;
    cfg.image_exts = NULL;
    cfg.flip_prob = -0.5f; /* any negative flip_prob is AUTO */
    cfg.decode_nice = 0;
    cfg.mask_fill = 0;
    rf_loader *ld = rf_test_create_ok(&cfg);
    rf_config got = reported(ld);
    ck_assert(got.flip_prob == 0.5f);
    ck_assert_uint_eq(got.decode_nice, 0);
    ck_assert_uint_eq(got.mask_fill, 0); /* like decode_nice, 0 is a fill of its own */
    assert_same_fields(&got, &init, auto_fields);
    ck_assert_str_eq(got.image_exts, "jpg,jpeg,png,webp");
    rf_loader_destroy(ld);
}
END_TEST

/* remote_retries and remote_timeout_ms over their limits are refused for any loader, local
 * shards too, each by its name. */
START_TEST(remote_limits_are_checked)
{
    for (int i = 0; i < 2; i++) {
        const char *pat;
        rf_config cfg = rf_test_host_config(&pat, shard, 0);
        if (i)
            cfg.remote_timeout_ms = 3600001;
        else
            cfg.remote_retries = 101;
        rf_loader *ld = NULL;
        char msg[512] = "";
        ck_assert_int_eq(rf_loader_create(&cfg, &ld, msg, sizeof msg), RF_EINVAL);
        ck_assert_msg(strstr(msg, i ? "remote_timeout_ms 3600001" : "remote_retries 101") &&
                          strstr(msg, "out of range"), "%s", msg);
    }
}
END_TEST

/* image_exts is a list of 1..8 extensions of 1..15 letters or digits; anything else is
 * refused at create, saying which extension is wrong and how. */
START_TEST(bad_image_exts_are_refused_by_name)
{
    static const struct { const char *exts, *says; } bad[] = {
        {"", "extension 1 is empty"},
        {"jpg,,png", "extension 2 is empty"},
        {"jpg,", "extension 2 is empty"},
        {"jpg,p.ng", "extension 2 has a byte that is not a letter or digit"},
        {"jpg,abcdefghijklmnop", "extension 2 is over 15 bytes"},
        {"a,b,c,d,e,f,g,h,i", "lists more than 8 extensions"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *pat;
        rf_config cfg = rf_test_host_config(&pat, shard, 0);
        cfg.image_exts = bad[i].exts;
        rf_loader *ld = NULL;
        char msg[512] = "";
        ck_assert_int_eq(rf_loader_create(&cfg, &ld, msg, sizeof msg), RF_EINVAL);
        ck_assert_msg(strstr(msg, bad[i].says) && strstr(msg, "image_exts"), "%s: %s",
                      bad[i].exts, msg);
    }
}
END_TEST

START_TEST(token_source_reports_its_dtype_and_arena)
{
    char *dir = rf_test_mkdtemp("config-tokens");
    char path[4096];
    snprintf(path, sizeof path, "%s/tokens.bin", dir);
    uint16_t tokens[1000];
    for (int i = 0; i < 1000; i++)
        tokens[i] = (uint16_t)(i * 7);
    rf_test_write_file(path, tokens, sizeof tokens);
    const char *pat;
    rf_config cfg = rf_test_host_config(&pat, path, 0);
    cfg.source = RF_SOURCE_TOKENS;
    cfg.token_bytes = 2;
    cfg.seq_len = 16;
    cfg.batch_size = 4;
    cfg.decode_threads = 1;
    rf_loader *ld = rf_test_create_ok(&cfg);
    rf_config got = reported(ld);
    ck_assert_uint_eq(got.token_dtype, RF_DTYPE_UINT16); /* as on disk */
    ck_assert_uint_eq(got.staging_bytes, 1u << 20);     /* token datasets: 1 MiB */
    rf_loader_destroy(ld);
}
END_TEST

START_TEST(config_of_a_shorter_struct_and_bad_arguments)
{
    const char *pat;
    rf_config cfg = rf_test_host_config(&pat, shard, 0);
    cfg.decode_threads = 1;
    rf_loader *ld = rf_test_create_ok(&cfg);
    rf_config out;
    ck_assert_int_eq(rf_loader_config(NULL, &out), RF_EINVAL);
    ck_assert_int_eq(rf_loader_config(ld, NULL), RF_EINVAL);
    out.struct_size = 4;
    ck_assert_int_eq(rf_loader_config(ld, &out), RF_EINVAL);
    /* an older caller's struct that ends before next_timeout_ms: nothing written past it */
    memset(&out, 0xA5, sizeof out);
    out.struct_size = (uint32_t)offsetof(rf_config, next_timeout_ms);
    ck_assert_int_eq(rf_loader_config(ld, &out), 0);
    ck_assert_uint_eq(out.struct_size, offsetof(rf_config, next_timeout_ms));
    ck_assert_uint_eq(out.batch_size, 256);
    ck_assert_uint_eq(out.hw_decode_percent, 0);
    ck_assert_uint_eq(out.next_timeout_ms, 0xA5A5A5A5u);
    ck_assert_uint_eq(out.label_source, 0xA5A5A5A5u);
    /* it only reads: still there after rf_loader_stop */
    ck_assert_int_eq(rf_loader_stop(ld), 0);
    ck_assert_uint_eq(reported(ld).decode_threads, 1);
    rf_loader_destroy(ld);
}
END_TEST

int main(void)
{
    static const char *const labels[] = {"0", "1\n", "2", "3", "4", "5"};
    shard = rf_test_make_label_shard(rf_test_mkdtemp("config"), labels, 6);
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("config");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, config_init_writes_every_documented_default);
    tcase_add_test(tc, created_loader_reports_every_auto_value_resolved);
    tcase_add_test(tc, auto_values_follow_the_fields_they_depend_on);
    tcase_add_test(tc, explicit_values_are_reported_unchanged);
    tcase_add_test(tc, zero_in_a_fixed_default_field_is_that_default);
    tcase_add_test(tc, token_source_reports_its_dtype_and_arena);
    tcase_add_test(tc, bad_image_exts_are_refused_by_name);
    tcase_add_test(tc, remote_limits_are_checked);
    tcase_add_test(tc, config_of_a_shorter_struct_and_bad_arguments);
    suite_add_tcase(s, tc);
    return rf_test_run_suite(s);
}
