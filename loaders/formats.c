/* formats.c — the registry: the one list of shard formats, and their lookup.
 *
 * DESIGN. The pipeline never names a format: it asks here for the one of rf_config.source
 * and calls its open(). Adding a format is one file in loaders/ and one line in `formats`
 * below. Each entry is checked when it is looked up (rf_format_check): a format written for
 * another version of rf_format_ops is refused with its name instead of being called. The list
 * is const and the lookups keep no state, so any thread may use them. */
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
