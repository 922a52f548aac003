/* shard_writer.c — the public shard writer (rf_shard_writer_*, include/ringfeed_shards.h).
 *
 * DESIGN. A thin face over rf_tarw (src/authoring/tarwrite.c, the library's one tar writer):
 * it checks the caller's keys with the format's own rule (rf_tar_key_ok, loaders/tar.h), writes
 * one sample as KEY.EXT and KEY.cls, and turns rf_tarw's errors into the public API's messages.
 * Atomic publication, index writing and error stickiness are rf_tarw's. */
#include "ringfeed_shards.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "authoring/authoring.h"
#include "authoring/tarwrite.h"
#include "loaders/tar.h"

/* The public face of rf_tarw, whose errors it turns into messages. */
struct rf_shard_writer {
    rf_tarw *tw;
};

int rf_shard_writer_open(const char *tar_path, const char *idx_path, uint32_t format,
                         rf_shard_writer **out, char *err, size_t err_len)
{
    rf_err e = {0};
    *out = NULL;
    if (!tar_path || format > RF_SHARD_GNU) {
        rf_seterr(&e, RF_EINVAL, "no shard path or invalid format %u", format);
        return rf_err_give(&e, err, err_len);
    }
    rf_shard_writer *w = calloc(1, sizeof *w);
    if (!w)
        return rf_err_give(&(rf_err){.code = RF_ENOMEM, .msg = "no memory"}, err, err_len);
    w->tw = rf_tarw_open(tar_path, idx_path,
                         format == RF_SHARD_GNU ? RF_TARW_GNU : RF_TARW_USTAR_PAX, &e);
    if (!w->tw) {
        if (e.code == -ENOMEM) /* the public API's code for it */
            e.code = RF_ENOMEM;
        free(w);
        return rf_err_give(&e, err, err_len);
    }
    *out = w;
    return 0;
}

int rf_shard_writer_add(rf_shard_writer *w, const char *key, const char *ext, const void *data,
                        uint64_t len, int32_t label)
{
    if (!w || !key || !ext || !*ext || strchr(ext, '/') || !rf_tar_key_ok(key) || (!data && len) ||
        len > SIZE_MAX)
        return RF_EINVAL;
    size_t kl = strlen(key), el = strlen(ext);
    if (kl + el + 5 > RF_PATH_BYTES_MAX)
        return RF_EINVAL;
    char name[RF_PATH_BYTES_MAX];
    memcpy(name, key, kl);
    name[kl] = '.';
    memcpy(name + kl + 1, ext, el + 1);
    int rc = rf_tarw_begin_sample(w->tw);
    if (rc == 0)
        rc = rf_tarw_add(w->tw, name, data, (size_t)len);
    if (rc == 0 && label >= 0) {
        char num[16];
        int n = snprintf(num, sizeof num, "%d", label);
        memcpy(name + kl + 1, RF_TAR_LABEL_EXT, sizeof RF_TAR_LABEL_EXT);
        rc = rf_tarw_add(w->tw, name, num, (size_t)n);
    }
    return rc;
}

static uint64_t member_bytes(size_t name_len, uint64_t len, uint32_t format)
{
    uint64_t b = RF_TAR_BLOCK + rf_tar_round_block(len);
    if (name_len > 100) /* long-name record: a header and the name (pax: ~ name + 16 bytes) */
        b += RF_TAR_BLOCK +
             rf_tar_round_block(format == RF_SHARD_GNU ? name_len + 1 : name_len + 16);
    return b;
}

uint64_t rf_shard_sample_bytes(const char *key, const char *ext, uint64_t len, int32_t label,
                               uint32_t format)
{
    size_t kl = strlen(key);
    uint64_t b = member_bytes(kl + 1 + strlen(ext), len, format);
    if (label >= 0)
        b += member_bytes(kl + 4, 11, format);
    return b;
}

uint64_t rf_shard_writer_bytes(const rf_shard_writer *w) { return w ? rf_tarw_bytes(w->tw) : 0; }
uint64_t rf_shard_writer_samples(const rf_shard_writer *w) { return w ? rf_tarw_samples(w->tw) : 0; }

int rf_shard_writer_close(rf_shard_writer *w, char *err, size_t err_len)
{
    if (!w)
        return 0;
    rf_err e = {0};
    int rc = rf_tarw_close(w->tw, &e);
    free(w);
    return rc ? rf_err_give(&e, err, err_len) : 0;
}

void rf_shard_writer_abort(rf_shard_writer *w)
{
    if (!w)
        return;
    rf_tarw_abort(w->tw);
    free(w);
}
