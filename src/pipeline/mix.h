/* mix.h — create's side of weighted mixing (mix.c): the sources as spans of the sample table,
 * the loader's copies of the mixing arrays, each tar source's label rule, and the plan
 * switched to mixing (plan/mix.c draws the epochs). Create calls pl_mix_expand, pl_mix_open
 * and pl_mix_setup in that order; the decode pool reads pl_mix_label_rule. */
#ifndef RF_PL_MIX_H
#define RF_PL_MIX_H

#include <stdint.h>

#include "base/common.h"
#include "loaders/dataset.h"
#include "plan/plan.h"
#include "ringfeed.h"

/* A tar sample's label rule: the loader's, or its source's (rf_config.source_labels). */
typedef struct pl_label_rule {
    uint32_t source;       /* enum rf_label_source */
    const char *json_path; /* RF_LABEL_JSON: the label's path */
    const char *ext;       /* the label member's extension (rf_label_ext) */
} pl_label_rule;

typedef struct pl_mix {
    uint32_t nsources;
    uint32_t *file_start;   /* nsources + 1: first path of each source */
    uint64_t *sample_start; /* nsources + 1: first sample of each source (not tokens) */
    /* the loader's copies, which its config points at once created */
    uint32_t *source_shards;
    float *weights, *class_weights, *sample_weights;
    char **labels;        /* source_labels (entries NULL where the caller's were) */
    pl_label_rule *rules; /* nsources, with source_labels; NULL: the loader's rule for all */
    pl_label_rule base;   /* the loader's rule (label_source, label_json_path) */
} pl_mix;

/* The patterns expanded source by source into *paths (the caller frees them, on failure
 * too), after the mixing arrays were copied (c then points at the copies) and checked. */
int pl_mix_expand(pl_mix *m, rf_config *c, const rf_remote_ops *remote, char ***paths,
                  uint32_t *npaths, rf_err *err);
/* The sample table opened source by source (tar shards and folders; token files at once). */
int pl_mix_open(pl_mix *m, const rf_config *c, rf_dataset *ds, char *const *paths,
                uint32_t npaths, rf_err *err);
/* After rf_plan_init: the plan switched to mixing when a mixing setting asks for it, and
 * c->epoch_size and c->replacement resolved. */
int pl_mix_setup(pl_mix *m, rf_config *c, const rf_dataset *ds, rf_plan *plan, rf_err *err);
pl_label_rule pl_mix_label_rule(const pl_mix *m, uint64_t sample_id);
void pl_mix_free(pl_mix *m);

#endif
