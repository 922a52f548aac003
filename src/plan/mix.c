/* mix.c — weighted mixing of sources, resampling and per-sample weights (mix.h).
 *
 * DESIGN. The epoch stays a materialised array of order positions -> sample ids, built once
 * per epoch from (seed, epoch) alone, so the resume cursor, the rank split and padding in
 * plan.c need no change: only the array's length (the epoch size) and its contents differ.
 *
 * Source of each position: the counts are fixed per epoch (E x w_s / sum w, rounded by largest
 * remainders), and the positions holding them are a seeded shuffle. Fixed counts give the
 * exact proportions every epoch, with no sampling noise between sources; the shuffle spreads
 * them evenly in expectation over batches and ranks.
 *
 * Sample within the source: without replacement, the source's samples in a permutation
 * seeded by (seed, epoch, source, round), a new round each time the source runs out, so a
 * source taking no more positions than it has samples delivers each at most once per epoch.
 * With replacement, independent draws: uniform, or by sample weight through one alias table
 * per source (Vose), O(1) per draw. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plan/mix.h"

struct rf_mix {
    uint32_t nsources;
    uint32_t replacement;
    uint64_t *start;    /* nsources + 1 */
    uint64_t *count;    /* positions per epoch of each source */
    uint64_t *used;     /* draws so far this epoch, per source (scratch of the epoch) */
    uint32_t *which;    /* source of each position (scratch of the epoch) */
    uint64_t *round;    /* without replacement: the current permutation of every source */
    double *prob;       /* with sample weights: alias table, indexed by sample id */
    uint64_t *alias;
    uint64_t fingerprint;
};

void rf_mix_free(rf_mix *m)
{
    if (!m)
        return;
    free(m->start);
    free(m->count);
    free(m->used);
    free(m->which);
    free(m->round);
    free(m->prob);
    free(m->alias);
    free(m);
}

uint64_t rf_mix_positions(const rf_mix *m, uint32_t s)
{
    return s < m->nsources ? m->count[s] : 0;
}

uint64_t rf_mix_fingerprint(const rf_mix *m)
{
    return m->fingerprint;
}

static uint64_t hash_add(uint64_t h, uint64_t v)
{
    return rf_mix64(h ^ rf_mix64(v + 0x632be59bd9b4e019ull));
}

/* The source counts stand for the weights: weights that give the same counts (1:3 and 2:6)
 * give the same order. */
static uint64_t fingerprint(const rf_plan_mix_spec *m, const rf_mix *mx, uint64_t e,
                            uint64_t samples)
{
    uint64_t h = hash_add(hash_add(hash_add(0, m->nsources), e), m->replacement);
    for (uint32_t s = 0; s <= m->nsources; s++)
        h = hash_add(h, m->source_start[s]);
    for (uint32_t s = 0; s < m->nsources; s++)
        h = hash_add(h, mx->count[s]);
    uint32_t bits;
    for (uint64_t i = 0; m->sample_weights && i < samples; i++) {
        memcpy(&bits, &m->sample_weights[i], sizeof bits);
        h = hash_add(h, bits);
    }
    return h ? h : 1;
}

static int bad_weight(float w) { return !isfinite(w) || w < 0; }

/* Largest-remainder rounding of E x w_s / sum(w): counts that sum to E exactly, each within
 * one of its quota. Ties go to the lower source index. */
static void source_counts(rf_mix *m, const double *w, uint64_t e)
{
    double total = 0;
    for (uint32_t s = 0; s < m->nsources; s++)
        total += w[s];
    uint64_t given = 0;
    for (uint32_t s = 0; s < m->nsources; s++) {
        m->count[s] = (uint64_t)floor((double)e * (w[s] / total));
        given += m->count[s];
    }
    while (given > e) { /* rounding of the quotas can overshoot by a position or two */
        uint32_t worst = 0;
        double worst_r = INFINITY;
        for (uint32_t s = 0; s < m->nsources; s++) {
            double r = (double)e * (w[s] / total) - (double)m->count[s];
            if (m->count[s] && r < worst_r) {
                worst_r = r;
                worst = s;
            }
        }
        m->count[worst]--;
        given--;
    }
    while (given < e) {
        uint32_t best = UINT32_MAX;
        double best_r = -1;
        for (uint32_t s = 0; s < m->nsources; s++) {
            if (w[s] <= 0)
                continue;
            double r = (double)e * (w[s] / total) - (double)m->count[s];
            if (r > best_r) {
                best_r = r;
                best = s;
            }
        }
        m->count[best]++;
        given++;
    }
}

/* Vose's alias table over the samples [lo, hi) with weights w (sum > 0). */
static int alias_build(rf_mix *m, const float *w, uint64_t lo, uint64_t hi)
{
    uint64_t n = hi - lo;
    double sum = 0;
    for (uint64_t i = lo; i < hi; i++)
        sum += w[i];
    if (!(sum > 0)) /* a source of weight 0 (checked): never drawn */
        return 0;
    uint64_t *small = malloc(n * sizeof *small), *large = malloc(n * sizeof *large);
    if (!small || !large) {
        free(small);
        free(large);
        return -1;
    }
    uint64_t ns = 0, nl = 0;
    for (uint64_t i = lo; i < hi; i++) {
        m->prob[i] = (double)w[i] * (double)n / sum;
        m->alias[i] = i;
        if (m->prob[i] < 1)
            small[ns++] = i;
        else
            large[nl++] = i;
    }
    while (ns && nl) {
        uint64_t a = small[--ns], b = large[nl - 1];
        m->alias[a] = b;
        m->prob[b] -= 1 - m->prob[a];
        if (m->prob[b] < 1) {
            nl--;
            small[ns++] = b;
        }
    }
    /* what is left is 1 up to rounding */
    while (nl)
        m->prob[large[--nl]] = 1;
    while (ns)
        m->prob[small[--ns]] = 1;
    free(small);
    free(large);
    return 0;
}

static int check_weights(const rf_plan_mix_spec *m, double *w, uint64_t samples, rf_err *err)
{
    for (uint32_t s = 0; s < m->nsources; s++) {
        uint64_t have = m->source_start[s + 1] - m->source_start[s];
        if (m->weights && bad_weight(m->weights[s]))
            return rf_seterr(err, RF_EINVAL, "weights[%u] is %g: each source's weight must be "
                             "a finite number >= 0", s, (double)m->weights[s]);
        w[s] = m->weights ? m->weights[s] : (double)have;
        if (w[s] > 0 && have == 0)
            return rf_seterr(err, RF_EINVAL, "source %u has weight %g in weights but holds no "
                             "samples", s, w[s]);
    }
    double total = 0;
    for (uint32_t s = 0; s < m->nsources; s++)
        total += w[s];
    if (!(total > 0))
        return rf_seterr(err, RF_EINVAL, "weights are all zero: at least one source needs a "
                         "weight above 0");
    if (!m->sample_weights)
        return 0;
    for (uint64_t i = 0; i < samples; i++)
        if (bad_weight(m->sample_weights[i]))
            return rf_seterr(err, RF_EINVAL, "sample_weights[%llu] is %g: each sample's weight "
                             "must be a finite number >= 0", (unsigned long long)i,
                             (double)m->sample_weights[i]);
    for (uint32_t s = 0; s < m->nsources; s++) {
        double sum = 0;
        for (uint64_t i = m->source_start[s]; i < m->source_start[s + 1]; i++)
            sum += m->sample_weights[i];
        if (w[s] > 0 && !(sum > 0))
            return rf_seterr(err, RF_EINVAL, "sample_weights are all zero in source %u, whose "
                             "weight is %g: it has nothing to draw", s, w[s]);
    }
    return 0;
}

static int mix_alloc(rf_mix *m, const rf_plan_mix_spec *spec, uint64_t samples, uint64_t e)
{
    uint32_t ns = spec->nsources;
    m->start = malloc((ns + 1) * sizeof *m->start);
    m->count = calloc(ns, sizeof *m->count);
    m->used = calloc(ns, sizeof *m->used);
    m->which = malloc(e * sizeof *m->which);
    if (!m->start || !m->count || !m->used || !m->which)
        return -1;
    memcpy(m->start, spec->source_start, (ns + 1) * sizeof *m->start);
    if (!m->replacement && !(m->round = malloc(samples * sizeof *m->round)))
        return -1;
    if (spec->sample_weights) {
        m->prob = malloc(samples * sizeof *m->prob);
        m->alias = malloc(samples * sizeof *m->alias);
        if (!m->prob || !m->alias)
            return -1;
        for (uint32_t s = 0; s < ns; s++)
            if (m->start[s + 1] > m->start[s] &&
                alias_build(m, spec->sample_weights, m->start[s], m->start[s + 1]))
                return -1;
    }
    return 0;
}

int rf_mix_create(const rf_plan_mix_spec *spec, uint64_t samples, uint64_t e, rf_mix **out,
                  rf_err *err)
{
    *out = NULL;
    double *w = malloc(spec->nsources * sizeof *w);
    if (!w)
        return rf_seterr(err, RF_ENOMEM, "no memory for the source weights");
    int rc = check_weights(spec, w, samples, err);
    if (rc) {
        free(w);
        return rc;
    }
    rf_mix *m = calloc(1, sizeof *m);
    if (m) {
        m->nsources = spec->nsources;
        m->replacement = spec->replacement;
    }
    if (!m || mix_alloc(m, spec, samples, e)) {
        free(w);
        rf_mix_free(m);
        return rf_seterr(err, RF_ENOMEM, "no memory for an epoch of %llu positions",
                         (unsigned long long)e);
    }
    source_counts(m, w, e);
    free(w);
    m->fingerprint = fingerprint(spec, m, e, samples);
    *out = m;
    return 0;
}

/* Without replacement: the next sample of source s, a new permutation of it (seeded by
 * source and round, so independent of how the sources interleave) when it runs out. */
static uint64_t next_unreplaced(rf_mix *m, uint32_t s, uint64_t seed, uint64_t epoch,
                                int shuffle)
{
    uint64_t lo = m->start[s], n = m->start[s + 1] - lo, k = m->used[s]++;
    uint64_t *a = m->round + lo;
    if (k % n == 0) {
        for (uint64_t i = 0; i < n; i++)
            a[i] = lo + i;
        if (shuffle) {
            rf_rng r;
            rf_rng_seed(&r, rf_mix64(seed ^ 0x2545f4914f6cdd1dull) ^
                                rf_mix64(epoch + 0x9e3779b97f4a7c15ull * (s + 1)) ^
                                rf_mix64(k / n + 0xd1b54a32d192ed03ull));
            for (uint64_t i = n; i > 1; i--) {
                uint64_t j = rf_rng_below(&r, i), t = a[i - 1];
                a[i - 1] = a[j];
                a[j] = t;
            }
        }
    }
    return a[k % n];
}

static uint64_t next_replaced(const rf_mix *m, uint32_t s, rf_rng *r)
{
    uint64_t lo = m->start[s], n = m->start[s + 1] - lo;
    uint64_t i = lo + rf_rng_below(r, n);
    if (m->prob && rf_rng_unit(r) >= m->prob[i])
        i = m->alias[i];
    return i;
}

void rf_mix_epoch(rf_mix *m, uint64_t *perm, uint64_t n, uint64_t seed, uint64_t epoch,
                  int shuffle, rf_rng *r)
{
    uint64_t pos = 0;
    for (uint32_t s = 0; s < m->nsources; s++) {
        for (uint64_t k = 0; k < m->count[s]; k++)
            m->which[pos++] = s;
        m->used[s] = 0;
    }
    if (m->nsources > 1)
        for (uint64_t i = n; i > 1; i--) {
            uint64_t j = rf_rng_below(r, i);
            uint32_t t = m->which[i - 1];
            m->which[i - 1] = m->which[j];
            m->which[j] = t;
        }
    for (uint64_t i = 0; i < n; i++) {
        uint32_t s = m->which[i];
        perm[i] = m->replacement ? next_replaced(m, s, r)
                                 : next_unreplaced(m, s, seed, epoch, shuffle);
    }
}
