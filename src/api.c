/* api.c — the small stateless part of the public API: config defaults, error strings,
 * version, device count. */
#include <string.h>

#include "backend.h"
#include "common.h"

RF_API void rf_config_init(rf_config *cfg)
{
    if (!cfg)
        return;
    memset(cfg, 0, sizeof *cfg);
    cfg->struct_size = sizeof *cfg;
    cfg->version = RF_CONFIG_VERSION;
    /* torchvision's RandomResizedCrop defaults */
    cfg->scale_min = 0.08f;
    cfg->scale_max = 1.0f;
    cfg->ratio_min = 3.0f / 4.0f;
    cfg->ratio_max = 4.0f / 3.0f;
    cfg->flip_prob = -1.0f; /* "default": 0.5 for random crops, 0 for center crops */
    cfg->world_size = 1;
    for (int c = 0; c < 3; c++)
        cfg->std[c] = 1.0f; /* mean 0, std 1: float output holds the raw pixel values */
}

/* One table for ringfeed's own codes; -errno goes to strerror's table. */
static const struct {
    int code;
    const char *text;
} own_errors[] = {
    {RF_EINVAL, "invalid argument or configuration"},
    {RF_ENOMEM, "out of memory"},
    {RF_ENOFILES, "no shard matched the given patterns"},
    {RF_EFORMAT, "malformed shard"},
    {RF_EDECODE, "image decode failed"},
    {RF_ELIMIT, "a configured limit was exceeded"},
    {RF_EIO, "read failed"},
    {RF_ECUDA, "CUDA runtime error"},
    {RF_ENODEV, "no usable CUDA device"},
    {RF_ESTATE, "call not valid in the loader's state"},
    {RF_EINDEX, "shard index disagrees with its shard"},
    {RF_ERESUME, "resume state is corrupt or does not match"},
    {RF_ECLOSED, "loader is shutting down"},
    {RF_ELABEL, "label missing or not an integer 0..2147483647"},
    {RF_EFORK, "loader used from a fork() child of the process that created it"},
    {RF_ETIMEDOUT, "no batch within next_timeout_ms"},
};

RF_API const char *rf_strerror(int code)
{
    if (code == 0)
        return "success";
    if (code == RF_EPOCH_END)
        return "end of epoch";
    if (code == RF_DONE)
        return "all epochs delivered";
    for (size_t i = 0; i < sizeof own_errors / sizeof own_errors[0]; i++)
        if (own_errors[i].code == code)
            return own_errors[i].text;
    if (code < 0 && code > -4096)
        return strerrordesc_np(-code) ? strerrordesc_np(-code) : "unknown error";
    return "unknown error";
}

RF_API const char *rf_version(void) { return "0.1.0"; }

RF_API int rf_cuda_device_count(void) { return rf_backend_cuda_count(); }

RF_API int rf_cuda_status(char *msg, size_t len) { return rf_backend_cuda_status(msg, len); }
