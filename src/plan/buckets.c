/* buckets.c — size buckets: the setting's list, the nearest bucket of an image, and each
 * epoch's groups of one bucket (buckets.h tells the model). An epoch's arrangement is one walk
 * of the shuffled order, O(n), a pure function of the order and the samples' buckets: the
 * same batches whatever the thread counts, and resuming anywhere costs the same. */
#include "plan/buckets.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One side of an entry: digits only, 1..8192. */
static int side(const char *s, const char *end, uint32_t *v)
{
    if (s == end || end - s > 5)
        return -1;
    uint32_t x = 0;
    for (; s < end; s++) {
        if (!isdigit((unsigned char)*s))
            return -1;
        x = x * 10 + (uint32_t)(*s - '0');
    }
    *v = x;
    return x >= 1 && x <= 8192 ? 0 : -2;
}

static int entry(const char *s, const char *end, uint32_t k, rf_buckets *b, rf_err *err)
{
    while (s < end && *s == ' ')
        s++;
    while (end > s && end[-1] == ' ')
        end--;
    int len = (int)RF_MIN(end - s, 40);
    const char *x = memchr(s, 'x', (size_t)(end - s));
    uint32_t h = 0, w = 0;
    int rh = x ? side(s, x, &h) : -1, rw = x ? side(x + 1, end, &w) : -1;
    if (rh == -1 || rw == -1)
        return rf_seterr(err, RF_EINVAL, "size_buckets entry %u \"%.*s\": a bucket is "
                         "HEIGHTxWIDTH in pixels, e.g. \"384x640\"", k + 1, len, s);
    if (rh || rw)
        return rf_seterr(err, RF_EINVAL, "size_buckets entry %u \"%.*s\": each side must be "
                         "1..8192", k + 1, len, s);
    for (uint32_t i = 0; i < k; i++)
        if (b->height[i] == h && b->width[i] == w)
            return rf_seterr(err, RF_EINVAL, "size_buckets entry %u \"%.*s\" repeats entry %u",
                             k + 1, len, s, i + 1);
    b->height[k] = h, b->width[k] = w;
    return 0;
}

int rf_buckets_parse(const char *text, rf_buckets *b, rf_err *err)
{
    memset(b, 0, sizeof *b);
    if (!text || !*text)
        return 0;
    if (strnlen(text, RF_BUCKETS_TEXT_MAX + 1) > RF_BUCKETS_TEXT_MAX)
        return rf_seterr(err, RF_EINVAL, "size_buckets is longer than %d bytes",
                         RF_BUCKETS_TEXT_MAX);
    uint32_t k = 0;
    for (const char *s = text;; k++) {
        const char *end = strchr(s, ',');
        if (!end)
            end = s + strlen(s);
        if (k == RF_BUCKETS_MAX)
            return rf_seterr(err, RF_EINVAL, "size_buckets: more than %d buckets",
                             RF_BUCKETS_MAX);
        int rc = entry(s, end, k, b, err);
        if (rc)
            return rc;
        if (!*end)
            break;
        s = end + 1;
    }
    b->n = k + 1;
    return 0;
}

uint32_t rf_bucket_nearest(const rf_buckets *b, uint32_t w, uint32_t h)
{
    if (!w || !h)
        return 0;
    /* image w/h against bucket W/H: the ratio q = max(w*H, h*W) / min(w*H, h*W) >= 1; the
     * smaller q the nearer. q1 < q2 compared as hi1 * lo2 < hi2 * lo1 (each below 2^30). */
    uint32_t best = 0;
    uint64_t bhi = 0, blo = 1;
    for (uint32_t i = 0; i < b->n; i++) {
        uint64_t a = (uint64_t)w * b->height[i], c = (uint64_t)h * b->width[i];
        uint64_t hi = RF_MAX(a, c), lo = RF_MIN(a, c);
        if (i == 0 || hi * blo < bhi * lo)
            best = i, bhi = hi, blo = lo;
    }
    return best;
}

void rf_bucket_plan_free(rf_bucket_plan *bp)
{
    free(bp->of);
    free(bp->count);
    free(bp->gstart);
    free(bp->gbucket);
    free(bp->arr);
    free(bp->queue);
    free(bp->fill);
    memset(bp, 0, sizeof *bp);
}

/* A leftover of m samples as a group: a multiple of world, padded up or cut down. */
static uint64_t leftover_size(uint64_t m, uint32_t world, uint32_t pad)
{
    return pad ? (m + world - 1) / world * world : m / world * world;
}

int rf_bucket_plan_init(rf_bucket_plan *bp, uint16_t *of, uint64_t n, uint32_t nbuckets,
                        uint32_t group, uint32_t world, uint32_t drop_last, uint32_t pad,
                        rf_err *err)
{
    memset(bp, 0, sizeof *bp);
    bp->of = of;
    bp->n = n;
    bp->nbuckets = nbuckets;
    bp->count = calloc(nbuckets, sizeof *bp->count);
    bp->fill = calloc(nbuckets, sizeof *bp->fill);
    bp->queue = malloc((n ? n : 1) * sizeof *bp->queue);
    if (!bp->count || !bp->fill || !bp->queue)
        goto nomem;
    for (uint64_t i = 0; i < n; i++)
        bp->count[of[i]]++;
    uint64_t full = 0, left = 0;
    for (uint32_t b = 0; b < nbuckets; b++) {
        full += bp->count[b] / group;
        left += !drop_last && leftover_size(bp->count[b] % group, world, pad) > 0;
    }
    bp->ngroups = full + left;
    bp->gstart = malloc((bp->ngroups + 1) * sizeof *bp->gstart);
    bp->gbucket = calloc(bp->ngroups + 1, sizeof *bp->gbucket);
    if (!bp->gstart || !bp->gbucket)
        goto nomem;
    uint64_t g = 0, at = 0;
    for (; g < full; g++, at += group)
        bp->gstart[g] = at;
    for (uint32_t b = 0; b < nbuckets && !drop_last; b++) {
        uint64_t m = leftover_size(bp->count[b] % group, world, pad);
        if (!m)
            continue;
        bp->gbucket[g] = (uint16_t)b;
        bp->gstart[g++] = at;
        at += m;
    }
    bp->gstart[g] = at;
    bp->arr = malloc((at ? at : 1) * sizeof *bp->arr);
    if (!bp->arr)
        goto nomem;
    return 0;
nomem:
    rf_bucket_plan_free(bp);
    return rf_seterr(err, RF_ENOMEM, "no memory for the size buckets' plan of %llu samples",
                     (unsigned long long)n);
}

void rf_bucket_plan_epoch(rf_bucket_plan *bp, const uint64_t *perm, uint32_t group)
{
    uint64_t qstart[RF_BUCKETS_MAX + 1];
    qstart[0] = 0;
    for (uint32_t b = 0; b < bp->nbuckets; b++) {
        qstart[b + 1] = qstart[b] + bp->count[b];
        bp->fill[b] = 0;
    }
    uint64_t g = 0; /* the next full group */
    for (uint64_t pos = 0; pos < bp->n; pos++) {
        uint32_t b = bp->of[perm ? perm[pos] : pos];
        uint64_t *q = bp->queue + qstart[b];
        q[bp->fill[b]++] = pos;
        if (bp->fill[b] % group == 0) {
            memcpy(bp->arr + bp->gstart[g], q + bp->fill[b] - group, group * sizeof *q);
            bp->gbucket[g++] = (uint16_t)b;
        }
    }
    /* the leftover groups, in bucket order (init fixed their buckets and sizes) */
    for (; g < bp->ngroups; g++) {
        uint32_t b = bp->gbucket[g];
        uint64_t m = bp->fill[b] % group, size = bp->gstart[g + 1] - bp->gstart[g];
        const uint64_t *src = bp->queue + qstart[b] + bp->fill[b] - m;
        uint64_t *dst = bp->arr + bp->gstart[g];
        for (uint64_t t = 0; t < size; t++)
            dst[t] = t < m ? src[t] : src[(t - m) % m] | RF_BUCKET_PAD;
    }
}

uint64_t rf_bucket_plan_fingerprint(const rf_bucket_plan *bp)
{
    uint64_t h = rf_mix64(0x62756b6574730000ull ^ bp->nbuckets);
    for (uint64_t g = 0; g <= bp->ngroups; g++)
        h = rf_mix64(h ^ bp->gstart[g]);
    for (uint64_t i = 0; i < bp->n; i++)
        h = rf_mix64(h ^ ((uint64_t)bp->of[i] << 32 ^ i));
    return h | 1;
}
