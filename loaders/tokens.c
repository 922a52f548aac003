/* tokens.c — token files as a shard format: open (rf_format_tokens) and the window of a sample
 * id (rf_tokens_window); tokens.h says what a window is.
 *
 * DESIGN. open runs once, at create: it refuses a file that is not a whole number of tokens and
 * counts its windows ((N - 1) / seq_len of a file of N tokens). A URL is opened through the
 * caller's rf_remote_ops; its windows are ranged GETs of the I/O engine. rf_tokens_window runs
 * on the I/O threads under the pipeline's lock and only reads the dataset: a binary search
 * over tok_first and, for random windows, one draw. */
#include <stdlib.h>

#include "loaders/tokens.h"

/* No per-sample records: windows are computed from tok_first when dispatched. max_sample_bytes
 * does not apply: the config's own limits bound a window. */
static int tokens_open(rf_dataset *ds, char *const *paths, uint32_t npaths,
                       uint64_t max_sample_bytes, rf_err *err)
{
    (void)max_sample_bytes;
    uint64_t L = ds->tok_seq_len, tb = ds->tok_bytes;
    ds->tok_first = calloc((size_t)npaths + 1, sizeof *ds->tok_first);
    if (!ds->tok_first)
        return rf_seterr(err, RF_ENOMEM, "no memory");
    for (uint32_t i = 0; i < npaths; i++) {
        uint64_t size;
        int rc = rf_dataset_open_file(ds, paths[i], "a token file", &size, err);
        if (rc)
            return rc;
        if (size % tb) /* the file table's name: a URL without its credentials */
            return rf_seterr(err, RF_EFORMAT, "%s: %llu bytes is not a whole number of %llu-byte "
                             "tokens", ds->files[ds->nfiles - 1].path, (unsigned long long)size,
                             (unsigned long long)tb);
        uint64_t ntok = size / tb;
        ds->tok_first[i + 1] = ds->tok_first[i] + (ntok > L ? (ntok - 1) / L : 0);
    }
    ds->nsamples = ds->tok_first[npaths];
    ds->max_span = (L + 1) * tb;
    ds->total_bytes = ds->nsamples * ds->max_span;
    if (ds->nsamples == 0)
        return rf_seterr(err, RF_EFORMAT, "no token file holds seq_len + 1 = %llu tokens",
                         (unsigned long long)(L + 1));
    return 0;
}

const rf_format_ops rf_format_tokens = {
    .abi = RF_FORMAT_ABI, .name = "tokens", .source = RF_SOURCE_TOKENS, .open = tokens_open};

void rf_tokens_window(const rf_dataset *ds, uint64_t id, int sequential, uint64_t seed,
                      uint32_t *file, uint64_t *off)
{
    uint32_t lo = 0, hi = ds->nfiles; /* find f with tok_first[f] <= id < tok_first[f+1] */
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        if (ds->tok_first[mid] <= id)
            lo = mid;
        else
            hi = mid;
    }
    uint64_t L = ds->tok_seq_len, tb = ds->tok_bytes, start;
    if (sequential) {
        start = (id - ds->tok_first[lo]) * L;
    } else {
        uint64_t ntok = ds->files[lo].size / tb;
        rf_rng r;
        rf_rng_seed(&r, seed);
        start = rf_rng_below(&r, ntok - L); /* starts 0 .. ntok-L-1 keep L+1 tokens */
    }
    *file = lo;
    *off = start * tb;
}
