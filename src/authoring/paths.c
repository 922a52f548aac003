/* paths.c — rf_paths (include/ringfeed_shards.h): the loader's own pattern expansion for the
 * tools.
 *
 * DESIGN. rf_paths is a handle over rf_expand_patterns (loaders/dataset.c), not a second
 * expander, so a tool such as ringfeed-inspect sees exactly the shards a loader given the same
 * patterns would open, in the same order. */
#include "ringfeed_shards.h"

#include <stdlib.h>

#include "base/common.h"
#include "loaders/dataset.h"

struct rf_paths {
    char **v;
    uint32_t n;
};

int rf_paths_expand(const char *const *patterns, uint32_t count, rf_paths **out, char *err,
                    size_t err_len)
{
    rf_err e = {0};
    *out = NULL;
    rf_paths *p = calloc(1, sizeof *p);
    if (!p)
        return rf_err_give(&(rf_err){.code = RF_ENOMEM, .msg = "no memory"}, err, err_len);
    int rc = rf_expand_patterns(patterns, count, &p->v, &p->n, &e);
    if (rc) {
        free(p);
        return rf_err_give(&e, err, err_len);
    }
    *out = p;
    return 0;
}

uint32_t rf_paths_count(const rf_paths *p) { return p ? p->n : 0; }
const char *rf_paths_get(const rf_paths *p, uint32_t i) { return p && i < p->n ? p->v[i] : NULL; }

void rf_paths_free(rf_paths *p)
{
    if (!p)
        return;
    rf_free_paths(p->v, p->n);
    free(p);
}
