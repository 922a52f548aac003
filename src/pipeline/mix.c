/* mix.c — create's side of weighted mixing: the sources as spans of the sample table, the
 * caller's arrays copied and checked by setting name, class weights turned into sample
 * weights, and the plan switched to mixing (plan/mix.c draws the epochs).
 * Each hook (mix.h) is given the parts of the loader it reads, not the loader. With every
 * mixing setting at its default the plan stays the one permutation of all samples. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/mix.h"


void pl_mix_free(pl_mix *m)
{
    free(m->file_start);
    free(m->sample_start);
    free(m->source_shards);
    free(m->weights);
    free(m->class_weights);
    free(m->sample_weights);
    for (uint32_t i = 0; m->labels && i < m->nsources; i++)
        free(m->labels[i]);
    free(m->labels);
    free(m->rules);
    memset(m, 0, sizeof *m);
}

static int copy_array(void **dst, const void *src, uint64_t n, size_t size, const char *name,
                      rf_err *err)
{
    if (!src && n)
        return rf_seterr(err, RF_EINVAL, "%s is NULL with a count of %llu", name,
                         (unsigned long long)n);
    if (src && !n)
        return rf_seterr(err, RF_EINVAL, "%s is set with a count of 0", name);
    if (!src)
        return 0;
    if (n > SIZE_MAX / size || !(*dst = malloc(n * size)))
        return rf_seterr(err, RF_ENOMEM, "no memory for a copy of %s", name);
    memcpy(*dst, src, n * size);
    return 0;
}

pl_label_rule pl_mix_label_rule(const pl_mix *m, uint64_t sample_id)
{
    if (!m->rules || !m->sample_start)
        return m->base;
    uint32_t lo = 0, hi = m->nsources; /* the source s with start[s] <= id < start[s + 1] */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (m->sample_start[mid] <= sample_id)
            lo = mid;
        else
            hi = mid;
    }
    return m->rules[lo];
}

/* source_labels copied and read into one rule per source. */
static int label_rules(pl_mix *m, rf_config *c, rf_err *err)
{
    m->base = (pl_label_rule){c->label_source, c->label_json_path, rf_label_ext(c->label_source)};
    if (!c->source_labels)
        return 0;
    if (c->source != RF_SOURCE_TAR)
        return rf_seterr(err, RF_EINVAL, "source_labels apply to tar shards; folder sources "
                         "take their labels from their own trees or lists");
    if (!(m->labels = calloc(m->nsources, sizeof *m->labels)) ||
        !(m->rules = calloc(m->nsources, sizeof *m->rules)))
        return rf_seterr(err, RF_ENOMEM, "no memory");
    for (uint32_t s = 0; s < m->nsources; s++) {
        const char *t = c->source_labels[s];
        pl_label_rule *r = &m->rules[s];
        *r = m->base;
        if (t && !(m->labels[s] = strdup(t)))
            return rf_seterr(err, RF_ENOMEM, "no memory");
        if (!t || !*t)
            ;
        else if (!strcmp(t, "cls"))
            r->source = RF_LABEL_CLS;
        else if (!strcmp(t, "none"))
            r->source = RF_LABEL_NONE;
        else if (!strncmp(t, "json:", 5)) {
            r->source = RF_LABEL_JSON;
            r->json_path = m->labels[s] + 5;
            rf_err e = {0};
            if (rf_json_path_check(r->json_path, &e))
                return rf_seterr(err, RF_EINVAL, "source_labels[%u]: %s", s, e.msg);
        } else
            return rf_seterr(err, RF_EINVAL, "source_labels[%u] is \"%.64s\": a source's label "
                             "rule is cls, none, json:PATH, or empty for label_source", s, t);
        r->ext = rf_label_ext(r->source);
    }
    c->source_labels = (const char *const *)m->labels;
    return 0;
}

/* The arrays copied (c then points at the copies) and the checks that need no data. */
static int mix_copy(pl_mix *m, rf_config *c, rf_err *err)
{
    int rc;
    if ((rc = copy_array((void **)&m->source_shards, c->source_shards, c->source_count,
                         sizeof *c->source_shards, "source_shards", err)) ||
        (rc = copy_array((void **)&m->weights, c->weights, c->weight_count, sizeof *c->weights,
                         "weights", err)) ||
        (rc = copy_array((void **)&m->class_weights, c->class_weights, c->class_weight_count,
                         sizeof *c->class_weights, "class_weights", err)) ||
        (rc = copy_array((void **)&m->sample_weights, c->sample_weights,
                         c->sample_weight_count, sizeof *c->sample_weights, "sample_weights",
                         err)))
        return rc;
    c->source_shards = m->source_shards;
    c->weights = m->weights;
    c->class_weights = m->class_weights;
    c->sample_weights = m->sample_weights;
    m->nsources = c->source_count ? c->source_count : 1;
    uint64_t sum = 0;
    for (uint32_t s = 0; s < c->source_count; s++) {
        if (m->source_shards[s] == 0)
            return rf_seterr(err, RF_EINVAL, "source_shards[%u] is 0: every source needs a "
                             "pattern", s);
        sum += m->source_shards[s];
    }
    if (c->source_count && sum != c->shard_count)
        return rf_seterr(err, RF_EINVAL, "source_shards add up to %llu patterns, shards has %u",
                         (unsigned long long)sum, c->shard_count);
    if (c->weights && c->weight_count != m->nsources)
        return rf_seterr(err, RF_EINVAL, "weights has %u entries for %u sources", c->weight_count,
                         m->nsources);
    if (c->class_weights && c->sample_weights)
        return rf_seterr(err, RF_EINVAL, "class_weights and sample_weights both set: give one");
    for (uint32_t i = 0; i < c->class_weight_count; i++)
        if (!isfinite(c->class_weights[i]) || c->class_weights[i] < 0)
            return rf_seterr(err, RF_EINVAL, "class_weights[%u] is %g: each class's weight must "
                             "be a finite number >= 0", i, (double)c->class_weights[i]);
    return label_rules(m, c, err);
}

int pl_mix_expand(pl_mix *m, rf_config *c, const rf_remote_ops *remote, char ***paths,
                  uint32_t *npaths, rf_err *err)
{
    int rc = mix_copy(m, c, err);
    if (rc)
        return rc;
    if (!(m->file_start = calloc(m->nsources + 1, sizeof *m->file_start)))
        return rf_seterr(err, RF_ENOMEM, "no memory");
    *paths = NULL;
    *npaths = 0;
    uint32_t first = 0;
    for (uint32_t s = 0; s < m->nsources; s++) {
        uint32_t np = c->source_count ? m->source_shards[s] : c->shard_count;
        char **p = NULL, **all;
        uint32_t n = 0;
        if ((rc = rf_expand_patterns_remote(c->shards + first, np, remote, &p, &n, err)))
            return rc;
        first += np;
        if (!(all = realloc(*paths, ((size_t)*npaths + n) * sizeof *all))) {
            rf_free_paths(p, n);
            return rf_seterr(err, RF_ENOMEM, "no memory");
        }
        memcpy(all + *npaths, p, n * sizeof *p);
        free(p); /* the strings moved to all */
        *paths = all;
        *npaths += n;
        m->file_start[s + 1] = *npaths;
    }
    return 0;
}

int pl_mix_open(pl_mix *m, const rf_config *c, rf_dataset *ds, char *const *paths,
                uint32_t npaths, rf_err *err)
{
    uint32_t fmt = c->source;
    uint64_t max = c->max_sample_bytes;
    /* Token files are one table of windows (tok_first), opened at once; tar shards and
     * folders append to the table, so each source opens on its own: its samples are the
     * span it added, and a folder source (one tree or list each) keeps its own classes. */
    if (fmt == RF_SOURCE_TOKENS || (m->nsources == 1 && !m->rules))
        return rf_format_open(fmt, ds, paths, npaths, max, err);
    if (!(m->sample_start = calloc(m->nsources + 1, sizeof *m->sample_start)))
        return rf_seterr(err, RF_ENOMEM, "no memory");
    const char *ext = ds->label_ext;
    for (uint32_t s = 0; s < m->nsources; s++) {
        uint32_t f = m->file_start[s];
        if (m->rules) /* the scan notes where each sample's label member is */
            ds->label_ext = m->rules[s].ext;
        int rc = rf_format_open(fmt, ds, paths + f, m->file_start[s + 1] - f, max, err);
        ds->label_ext = ext;
        if (rc)
            return rc;
        m->sample_start[s + 1] = ds->nsamples;
    }
    return 0;
}

/* Sample spans of the sources: as each opened, or for token files from their first windows. */
static void source_starts(const pl_mix *m, const rf_dataset *ds, uint64_t *start)
{
    for (uint32_t s = 0; s <= m->nsources; s++)
        start[s] = m->sample_start ? m->sample_start[s]
                   : s == m->nsources ? ds->nsamples
                   : m->nsources == 1 ? 0 : ds->tok_first[m->file_start[s]];
}

/* class_weights as one weight per sample, from labels the table knows without reading. */
static int class_to_samples(pl_mix *m, const rf_config *cfg, const rf_dataset *ds,
                            rf_err *err)
{
    uint64_t n = ds->nsamples;
    if (cfg->source != RF_SOURCE_FOLDER)
        return rf_seterr(err, RF_EINVAL, "class_weights need labels known at create (folder "
                         "sources); tar labels are read with each sample: give sample_weights");
    if (!(m->sample_weights = malloc(n * sizeof *m->sample_weights)))
        return rf_seterr(err, RF_ENOMEM, "no memory for the samples' weights");
    for (uint64_t i = 0; i < n; i++) {
        int32_t c = ds->samples[i].label;
        m->sample_weights[i] =
            c >= 0 && (uint32_t)c < cfg->class_weight_count ? m->class_weights[c] : 0.0f;
    }
    return 0;
}

int pl_mix_setup(pl_mix *m, rf_config *c, const rf_dataset *ds, rf_plan *plan,
                 rf_err *err)
{
    int on = c->weights || c->epoch_size || c->replacement || c->class_weights ||
             c->sample_weights;
    if (!on) {
        c->epoch_size = plan->n;
        c->replacement = RF_REPLACEMENT_OFF;
        return 0;
    }
    if (c->sample_weights && c->sample_weight_count != ds->nsamples)
        return rf_seterr(err, RF_EINVAL, "sample_weights has %llu entries, the dataset has %llu "
                         "samples", (unsigned long long)c->sample_weight_count,
                         (unsigned long long)ds->nsamples);
    int rc;
    if (c->class_weights && (rc = class_to_samples(m, c, ds, err)))
        return rc;
    uint64_t *start = malloc((m->nsources + 1) * sizeof *start);
    if (!start)
        return rf_seterr(err, RF_ENOMEM, "no memory");
    source_starts(m, ds, start);
    uint32_t repl = c->replacement;
    if (repl == RF_REPLACEMENT_AUTO)
        repl = m->sample_weights ? RF_REPLACEMENT_ON : RF_REPLACEMENT_OFF;
    rf_plan_mix_spec spec = {.nsources = m->nsources,
                             .source_start = start,
                             .weights = m->weights,
                             .sample_weights = m->sample_weights,
                             .epoch_size = c->epoch_size,
                             .replacement = repl == RF_REPLACEMENT_ON};
    rc = rf_plan_set_mix(plan, &spec, err);
    free(start);
    if (rc)
        return rc;
    c->epoch_size = plan->n;
    c->replacement = repl;
    return 0;
}
