/* formats.c — the registry: the one list of shard formats, and their lookup. The pipeline
 * never names a format; adding one is a file in loaders/ and a line in `formats`. Entries are
 * checked at lookup (rf_format_check). Const, stateless: any thread may use it. */
#include "loaders/dataset.h"

#include <string.h>

/* Every format, once. Sources are unique (an RF_SOURCE_* value names one format). */
static const rf_format_ops *const formats[] = {
    &rf_format_tar,
    &rf_format_folder,
    &rf_format_tokens,
};

#define NFORMATS (sizeof formats / sizeof formats[0])

int rf_format_check(const rf_format_ops *f, rf_err *err)
{
    if (f->abi != RF_FORMAT_ABI)
        return rf_seterr(err, RF_EINVAL, "shard format %s was written for format ops version "
                         "%u; this library has version %u", f->name ? f->name : "(unnamed)",
                         f->abi, RF_FORMAT_ABI);
    if (!f->name || !f->open)
        return rf_seterr(err, RF_EINVAL, "shard format %s has no %s",
                         f->name ? f->name : "(unnamed)", f->name ? "open()" : "name");
    return 0;
}

const rf_format_ops *rf_format_for_source(uint32_t source, rf_err *err)
{
    for (size_t i = 0; i < NFORMATS; i++)
        if (formats[i]->source == source)
            return rf_format_check(formats[i], err) ? NULL : formats[i];
    rf_seterr(err, RF_EINVAL, "no shard format reads source %u", source);
    return NULL;
}

const rf_format_ops *rf_format_by_name(const char *name)
{
    for (size_t i = 0; name && i < NFORMATS; i++)
        if (formats[i]->name && strcmp(formats[i]->name, name) == 0)
            return formats[i];
    return NULL;
}

int rf_format_open(uint32_t source, rf_dataset *ds, char *const *paths, uint32_t npaths,
                   uint64_t max_sample_bytes, rf_err *err)
{
    const rf_format_ops *f = rf_format_for_source(source, err);
    return f ? f->open(ds, paths, npaths, max_sample_bytes, err) : RF_EINVAL;
}
