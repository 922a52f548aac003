/* paths.c — rf_paths (include/ringfeed_shards.h): the loader's own pattern expansion for the
 * tools.
 *
 * DESIGN. rf_paths is a handle over rf_expand_patterns (loaders/dataset.c), not a second
 * expander, so a tool such as ringfeed-inspect sees exactly the shards a loader given the same
 * patterns would open, in the same order. URL patterns are expanded as the loader expands
 * them, s3:// wildcards through the loader's remote client (io/remote.h). */
#include "ringfeed_shards.h"

#include <stdlib.h>

#include "base/common.h"
#ifdef RINGFEED_HAVE_CURL
#include "io/remote.h"
#endif
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
    const rf_remote_ops *ops = NULL; /* without libcurl the expansion refuses s3 wildcards */
#ifdef RINGFEED_HAVE_CURL
    struct rf_remote *r = NULL;
    for (uint32_t i = 0; i < count && !r; i++)
        if (patterns[i] && rf_path_is_url(patterns[i]) &&
            rf_remote_new(5, 30000, &r, &e) == 0) /* rf_config's defaults */
            ops = &r->ops;
#endif
    int rc = rf_expand_patterns_remote(patterns, count, ops, &p->v, &p->n, &e);
#ifdef RINGFEED_HAVE_CURL
    rf_remote_free(r);
#endif
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
