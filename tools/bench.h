/* bench.h — what the three files of ringfeed-bench share: the parsed options, the result of a
 * run, and the functions one file calls in another. bench.c runs the loader and times it,
 * bench_opts.c parses the command line into opts (a flag for every row of the library's
 * settings table, rf_config_settings), bench_report.c prints the report (table, --json,
 * --show-config). */
#ifndef RF_TOOLS_BENCH_H
#define RF_TOOLS_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "ringfeed.h"

#define MAX_PATTERNS 256

/* The command line: the loader's config, which every setting's flag writes, and the bench's own
 * options. */
typedef struct opts {
    rf_config cfg;                    /* cfg.shards points at `shards` */
    const char *shards[MAX_PATTERNS]; /* --shards, --folder and --tokens, in order */
    uint32_t nshards;
    uint32_t json, warmup, evict;
    uint32_t show_config;  /* print the loader's effective config (rf_loader_config) */
    double resume_at;      /* > 0: measure resuming at this fraction of the first epoch */
    /* --weights (each pattern one source), --class-weights, --sample-weights FILE: the
     * arrays cfg's mixing fields point at */
    float weights[MAX_PATTERNS];
    uint32_t per_source[MAX_PATTERNS];
    float *class_weights, *sample_weights;
    const char *labels[MAX_PATTERNS]; /* --source-labels, split (into label_text) */
    uint32_t nlabels;
    char *label_text;
} opts;

/* One epoch of a run: seconds, images, bytes read from storage (-1: not measured), the
 * page-cache hit ratio (-1: not measured; set when the run ends), the share of the bytes read
 * resident at submit, the process' resident set and open descriptors at its end. */
typedef struct epoch_row {
    double s, sto, hit, res, rss_mb;
    uint32_t fds;
    uint64_t img;
} epoch_row;

#define BENCH_EPOCH_ROWS_MAX 100000u /* per-epoch rows kept (a soak runs thousands) */

typedef struct result {
    uint64_t images, batches, timed_images, first_batch_us;
    /* The first batch split in two: handed out by rf_loader_next after first_next_us, on the
     * device after first_batch_us; at_first, the stats just after (what was decoded, read and
     * busy by then, and where), to tell a slow decode from a slow copy or device. */
    uint64_t first_next_us;
    rf_stats at_first;
    /* The stats when the timed window opened: busy times and decoded samples inside the
     * window leave out create and the start-up (pinning the ring alone can be a tenth of a
     * short run, and would read as decode threads waiting). */
    rf_stats at_warmup;
    uint64_t bytes, timed_bytes; /* delivered to the device (or host), as the consumer sees */
    double seconds, timed_seconds;
    double fresh_ms, resume_ms;  /* --resume-at: create + first batch, fresh vs resumed */
    double create_ms;            /* rf_loader_create of the measured run */
    uint64_t resume_batch;
    rf_stats st;
    /* per epoch (up to BENCH_EPOCH_ROWS_MAX rows; later epochs are counted in nep_omitted) */
    uint32_t nep, nep_cap;
    uint64_t nep_omitted;
    epoch_row *ep;
    double mark_t;
    uint64_t mark_img;
    rf_stats mark; /* the stats when the epoch began (zero at create) */
} result;

/* bench_opts.c */
int parse_args(int argc, char **argv, opts *o);
/* Setting s's value in c as the flags spell it: a number, an enum's name, "a,b,c" for three
 * floats, a string or "none"; for a field holding AUTO whose default is a rule, the rule. */
void format_setting(const rf_setting *s, const rf_config *c, char *buf, size_t len);

/* bench_report.c */
double resident_ratio(const rf_stats *from, const rf_stats *to);
void print_table(const opts *o, const result *r);
void print_json(const opts *o, const result *r);
int print_config(const rf_loader *ld);

#endif
