/* shard_index.c — the index helpers of include/ringfeed_shards.h: where a shard's index is,
 * and writing one.
 *
 * DESIGN. Both are the loader's own code (loaders/tar_index.c): rf_shard_index_path finds an
 * index as the loader does (rf_tar_find_index, else the name rf_tar_index_name prefers) and rf_shard_write_index writes it with
 * rf_tar_write_index, so an index written here is one the loader reads. */
#include "ringfeed_shards.h"

#include <string.h>

#include "authoring/authoring.h"
#include "loaders/tar_index.h"

int rf_shard_index_path(const char *shard, char *buf, size_t cap)
{
    size_t n = shard ? strlen(shard) : 0;
    if (!shard || !buf || cap < n + 5)
        return RF_EINVAL;
    if (rf_tar_find_index(shard, buf, cap))
        return 1;
    rf_tar_index_name(shard, buf, cap); /* fits: cap was checked above */
    return 0;
}

int rf_shard_write_index(const char *shard, const char *idx_path, char *err, size_t err_len)
{
    rf_err e = {0};
    char def[RF_PATH_BYTES_MAX];
    if (!shard)
        return rf_err_give(&(rf_err){.code = RF_EINVAL, .msg = "no shard path"}, err, err_len);
    if (!idx_path) {
        if (rf_shard_index_path(shard, def, sizeof def) < 0)
            return rf_err_give(&(rf_err){.code = RF_EINVAL, .msg = "shard path too long"},
                               err, err_len);
        idx_path = def;
    }
    int rc = rf_tar_write_index(shard, idx_path, &e);
    return rc ? rf_err_give(&e, err, err_len) : 0;
}
