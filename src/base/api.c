/* api.c — the small stateless part of the public API: config defaults (and their resolution
 * at create, base/api.h), error strings, version, device count. */
#include <string.h>

#include "base/api.h"
#include "backend/backend.h"
#include "base/common.h"
#include "decode/decode.h"
#include "loaders/tar.h"

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
}

/* The fields whose default is a fixed value, which 0 also asks for (callers that filled the
 * struct before rf_config_init wrote these defaults, or a struct_size ending before them). */
#define RF_FIXED_DEFAULTS(X) \
    X(batch_size) X(image_size) X(world_size) X(io_queue_depth) X(max_sample_bytes) \
    X(max_image_pixels) X(max_image_dim) X(io_retries) X(shard_window) \
    X(max_consecutive_skips) X(max_scans) X(max_name_bytes) X(warm_bytes) \
    X(gpu_decode_percent)

void rf_config_resolve(rf_config *c)
{
    rf_config d;
    rf_config_init(&d);
#define RF_FIXED_DEFAULT_(f) \
    if (!c->f) \
        c->f = d.f;
    RF_FIXED_DEFAULTS(RF_FIXED_DEFAULT_)
#undef RF_FIXED_DEFAULT_
    int gpu = c->gpu_decode || c->hw_decode_percent;
    if (!c->resize_shorter) /* torchvision's Resize(256) before CenterCrop(224), scaled */
        c->resize_shorter = (c->image_size * 256 + 112) / 224;
    if (c->flip_prob < 0)
        c->flip_prob = c->crop == RF_CROP_RANDOM ? 0.5f : 0.0f;
    if (!c->decode_threads) /* the CPUs this process may use, not the machine's */
        c->decode_threads = RF_MIN(rf_cpu_count(), 1024u);
    if (!c->prefetch_depth) /* GPU decode: batches in flight on the copy streams, and more */
        c->prefetch_depth = gpu ? 8 : 4;
    if (c->source == RF_SOURCE_TOKENS && !c->token_dtype)
        c->token_dtype = c->token_bytes == 2 ? RF_DTYPE_UINT16 : RF_DTYPE_INT32;
    /* The GPU paths decode at full scale: so must every other image of their run, or a
     * sample's pixels would depend on where it went (docs/gpu-decode.md). Only AUTO is
     * resolved: a value out of range stays for the caller's check to refuse. */
    if (gpu && c->dct_scaling == RF_DCT_SCALING_AUTO)
        c->dct_scaling = RF_DCT_SCALING_OFF;
}

/* ringfeed's own codes, made from RF_ERRORS (ringfeed.h); -errno goes to strerror's table. */
typedef struct own_error_row {
    int code;
    const char *name;
    const char *text;
} own_error_row;

static const own_error_row own_errors[] = {
#define RF_ERROR_ROW_(name, value, message) {name, #name, message},
    RF_ERRORS(RF_ERROR_ROW_)
#undef RF_ERROR_ROW_
};

/* The row of one of ringfeed's own codes, or NULL for any other code. */
static const own_error_row *own_error(int code)
{
    for (size_t i = 0; i < sizeof own_errors / sizeof own_errors[0]; i++)
        if (own_errors[i].code == code)
            return &own_errors[i];
    return NULL;
}

RF_API const char *rf_strerror(int code)
{
    if (code == 0)
        return "success";
    if (code == RF_EPOCH_END)
        return "end of epoch";
    if (code == RF_DONE)
        return "all epochs delivered";
    const own_error_row *own = own_error(code);
    if (own)
        return own->text;
    if (code < 0 && code > -4096)
        return strerrordesc_np(-code) ? strerrordesc_np(-code) : "unknown error";
    return "unknown error";
}

RF_API const char *rf_err_name(int code)
{
    const own_error_row *own = own_error(code);
    return own ? own->name : NULL;
}

RF_API const char *rf_version(void) { return "0.1.0"; }

RF_API int rf_cuda_device_count(void) { return rf_backend_cuda_count(); }

RF_API int rf_cuda_status(char *msg, size_t len) { return rf_backend_cuda_status(msg, len); }
