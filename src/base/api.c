/* api.c — the small stateless part of the public API: error strings and version. Config
 * defaults are pipeline/config.c's, the device queries backend/devices.c's: base/ includes
 * nothing above it. */
#include <string.h>

#include "base/common.h"

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

RF_API const char *rf_recovered_name(uint32_t kind)
{
    static const char *const names[RF_RECOVERED_KINDS] = {"header_bytes", "jfif_version", "icc"};
    return kind < RF_RECOVERED_KINDS ? names[kind] : NULL;
}

RF_API const char *rf_skip_reason_name(uint32_t reason)
{
    static const char *const names[RF_SKIP_REASONS] = {
        [RF_SKIP_TAR_HEADER] = "tar_header", [RF_SKIP_TRUNCATED] = "truncated",
        [RF_SKIP_NOT_JPEG] = "not_jpeg",     [RF_SKIP_CORRUPT] = "corrupt",
        [RF_SKIP_TOO_LARGE] = "too_large",   [RF_SKIP_IO] = "io",
        [RF_SKIP_LABEL] = "label",           [RF_SKIP_HOOK] = "hook",
        [RF_SKIP_FIELD] = "field",           [RF_SKIP_MASK] = "mask"};
    return reason < RF_SKIP_REASONS ? names[reason] : NULL;
}

RF_API const char *rf_err_name(int code)
{
    const own_error_row *own = own_error(code);
    return own ? own->name : NULL;
}

/* The header's RF_VERSION_* are the one source of the version (the Python wheel's metadata is
 * read from them too), so the string is spelled from them. */
#define RF_STR_(x) #x
#define RF_STR(x) RF_STR_(x)
RF_API const char *rf_version(void)
{
    return RF_STR(RF_VERSION_MAJOR) "." RF_STR(RF_VERSION_MINOR) "." RF_STR(RF_VERSION_PATCH);
}
