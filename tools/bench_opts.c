/* bench_opts.c — ringfeed-bench's command line: the usage text, the options parsed into opts
 * (an error names the option).
 *
 * Every setting of the library's table (rf_config_settings) is a flag of its own name with
 * dashes (--io-queue-depth 32, --warm), parsed by the row's type and range into opts.cfg, and
 * listed by the usage with its default; a setting the library gains is a flag here without a
 * line of this file. Beside them stand the bench's own options and the short names it has
 * always had (--batch, --threads, --no-shuffle, ...), each one setting's other spelling. */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bench.h"
#include "cli_num.h"

/* A short name of one setting: with value NULL it takes the setting's argument, else it sets
 * that value (an enum's name) and takes none. `old`, when set, is a spelling the short name
 * took before the table named that value `now` ("uring" for io_uring). */
static const struct alias {
    const char *flag, *setting, *value, *help, *old, *now;
} aliases[] = {
    {"batch", "batch_size", NULL, "N", NULL, NULL},
    {"size", "image_size", NULL, "N", NULL, NULL},
    {"threads", "decode_threads", NULL, "N", NULL, NULL},
    {"depth", "prefetch_depth", NULL, "N", NULL, NULL},
    {"io", "io_engine", NULL, "auto|uring|pread", "uring", "io_uring"},
    {"windows", "token_windows", NULL, "random|sequential", NULL, NULL},
    {"hw-decode", "hw_decode_percent", NULL, "N", NULL, NULL},
    {"schedule", "decode_schedule", NULL, "auto|cpu|manual|balance", NULL, NULL},
    {"timeout-ms", "next_timeout_ms", NULL, "N", NULL, NULL},
    {"no-shuffle", "order", "none", "", NULL, NULL},
    {"no-numa", "numa", "off", "", NULL, NULL},
    {"no-labels", "label_source", "none", "", NULL, NULL},
    {"no-dct-scaling", "dct_scaling", "off", "", NULL, NULL},
    {"dct-scaling-always", "dct_scaling", "on", "", NULL, NULL},
};
#define NALIASES (sizeof aliases / sizeof aliases[0])

enum { O_SHARDS = 256, O_FOLDER, O_TOKENS, O_DEVICE, O_RESUME, O_WARMUP, O_EVICT, O_JSON,
       O_SHOWCFG, O_VERSION, O_HELP, O_WEIGHTS, O_CLASS_WEIGHTS, O_SAMPLE_WEIGHTS, O_LABELS,
       O_ALIAS = 512, O_SETTING = 1024 };

static const rf_setting *table;
static uint32_t nrows;

/* Whether row s has a flag: not the struct's header, the inputs (--shards, --resume-at) or a
 * C function. */
static int has_flag(const rf_setting *s)
{
    return !(s->flags & (RF_SETTING_HEADER | RF_SETTING_INPUT | RF_SETTING_C_ONLY));
}

static const rf_setting *row(const char *name)
{
    for (uint32_t i = 0; i < nrows; i++)
        if (!strcmp(table[i].name, name))
            return &table[i];
    return NULL;
}

/* "io_queue_depth" -> "io-queue-depth" */
static void dashed(const char *name, char *out, size_t len)
{
    snprintf(out, len, "%s", name);
    for (char *p = out; *p; p++)
        if (*p == '_')
            *p = '-';
}

/* ---- one setting's value -------------------------------------------------------------------- */

static int is_int(const rf_setting *s)
{
    return s->type == RF_SETTING_BOOL || s->type == RF_SETTING_U32 || s->type == RF_SETTING_I32 ||
           s->type == RF_SETTING_U64 || s->type == RF_SETTING_ENUM;
}

static uint64_t get_int(const rf_config *c, const rf_setting *s)
{
    uint32_t w;
    uint64_t v;
    if (s->size == 8)
        return memcpy(&v, (const char *)c + s->offset, 8), v;
    return memcpy(&w, (const char *)c + s->offset, 4), w;
}

static void put_int(rf_config *c, const rf_setting *s, uint64_t v)
{
    uint32_t w = (uint32_t)v;
    if (s->size == 8)
        memcpy((char *)c + s->offset, &v, 8);
    else
        memcpy((char *)c + s->offset, &w, 4);
}

/* The index of `name` among an enum's names, or -1. */
static int64_t enum_value(const rf_setting *s, const char *name)
{
    const char *n = s->values;
    for (int64_t v = 0; *n; v++) {
        size_t w = strcspn(n, ",");
        if (strlen(name) == w && !strncasecmp(n, name, w))
            return v;
        n += w + (n[w] == ',');
    }
    return -1;
}

static int parse_float(const char *t, const rf_setting *s, float *out)
{
    char *end;
    errno = 0;
    double v = strtod(t, &end);
    if (errno || end == t || (*end && *end != ','))
        return -1;
    *out = (float)v;
    return v >= s->min_f && v <= s->max_f ? (int)(end - t) : -1;
}

/* Parse text into setting s of c: a number in the row's range (or AUTO, where create decides
 * the default), an enum's name, three comma-separated floats, a string. 0 or -1. */
static int parse_setting(const rf_setting *s, const char *text, rf_config *c)
{
    char *at = (char *)c + s->offset;
    if (s->type == RF_SETTING_ENUM) {
        int64_t v = enum_value(s, text);
        return v < 0 ? -1 : (put_int(c, s, (uint64_t)v), 0);
    }
    if (is_int(s)) {
        uint64_t v;
        int in = !cli_parse_u64(text, &v) && ((v >= s->min && v <= s->max) ||
                                               (s->rule && v == s->auto_int));
        if (!in)
            return -1;
        return put_int(c, s, v), 0;
    }
    if (s->type == RF_SETTING_F32 || s->type == RF_SETTING_F32X3) {
        int n = s->type == RF_SETTING_F32X3 ? 3 : 1;
        for (int k = 0; k < n; k++) {
            int used = parse_float(text, s, (float *)at + k);
            if (used < 0 || (k + 1 < n) != (text[used] == ','))
                return -1;
            text += used + (k + 1 < n);
        }
        return 0;
    }
    if (s->type == RF_SETTING_STR)
        return memcpy(at, &text, sizeof text), 0;
    return -1;
}

void format_setting(const rf_setting *s, const rf_config *c, char *buf, size_t len)
{
    const char *at = (const char *)c + s->offset;
    uint64_t auto_value = s->size == 8 ? s->auto_int : (uint32_t)s->auto_int;
    if (s->rule && is_int(s) && get_int(c, s) == auto_value) {
        snprintf(buf, len, "AUTO: %s", s->rule);
    } else if (s->type == RF_SETTING_ENUM) {
        uint64_t v = get_int(c, s);
        const char *n = s->values;
        for (uint64_t i = 0; i < v && *n; i++)
            n += strcspn(n, ",") + (n[strcspn(n, ",")] == ',');
        snprintf(buf, len, "%.*s", (int)strcspn(n, ","), *n ? n : "?");
    } else if (s->type == RF_SETTING_I32) {
        int32_t v;
        snprintf(buf, len, "%d", (memcpy(&v, at, 4), v));
    } else if (is_int(s)) {
        snprintf(buf, len, "%llu", (unsigned long long)get_int(c, s));
    } else if (s->type == RF_SETTING_F32 || s->type == RF_SETTING_F32X3) {
        float f[3];
        memcpy(f, at, s->size);
        if (s->rule && f[0] < 0)
            snprintf(buf, len, "AUTO: %s", s->rule);
        else if (s->type == RF_SETTING_F32)
            snprintf(buf, len, "%g", (double)f[0]);
        else
            snprintf(buf, len, "%g,%g,%g", (double)f[0], (double)f[1], (double)f[2]);
    } else if (s->type == RF_SETTING_STR) {
        const char *p;
        memcpy(&p, at, sizeof p);
        snprintf(buf, len, "%s", p ? p : "none");
    } else {
        snprintf(buf, len, "-");
    }
}

/* ---- usage ---------------------------------------------------------------------------------- */

/* "  --flag ARG   text", the text wrapped at 96 columns and indented under its column. */
static void usage_line(FILE *f, const char *flag, const char *arg, const char *text)
{
    char left[96];
    snprintf(left, sizeof left, "  --%s%s%s", flag, *arg ? " " : "", arg);
    int col = 30, width = 96 - col;
    fprintf(f, "%s", left);
    if ((int)strlen(left) >= col - 1)
        fprintf(f, "\n%*s", col, "");
    else
        fprintf(f, "%*s", col - (int)strlen(left), "");
    for (const char *t = text; *t;) {
        int n = (int)strlen(t);
        if (n > width) {
            n = width;
            while (n > 0 && t[n] != ' ')
                n--;
            if (n == 0)
                n = width;
        }
        fprintf(f, "%.*s\n", n, t);
        t += n;
        while (*t == ' ')
            t++;
        if (*t)
            fprintf(f, "%*s", col, "");
    }
}

/* A setting's argument as the usage shows it: nothing for a flag, an enum's names. */
static void setting_arg(const rf_setting *s, char *buf, size_t len)
{
    if (s->type == RF_SETTING_BOOL)
        snprintf(buf, len, "%s", "");
    else if (s->type == RF_SETTING_ENUM) {
        snprintf(buf, len, "%s", s->values);
        for (char *p = buf; *p; p++)
            *p = *p == ',' ? '|' : *p;
    } else
        snprintf(buf, len, "%s", s->type == RF_SETTING_F32X3 ? "R,G,B"
                                 : s->type == RF_SETTING_F32 ? "X"
                                 : s->type == RF_SETTING_STR ? "TEXT" : "N");
}

static void usage(FILE *f, const rf_config *defaults)
{
    fprintf(f,
            "usage: ringfeed-bench --shards PATTERN [--shards PATTERN ...] [options]\n"
            "  --folder DIR       read an image folder (or a `path label` list) instead of shards\n"
            "  --tokens PATTERN   flat token files instead of image shards (repeatable; paths\n"
            "                     or http(s)://, s3:// URLs: one ranged GET per window)\n"
            "  --device host|cuda|cuda:N  where batches go (cuda when a GPU is present)\n"
            "  --weights W,W,...  mix the patterns by weight, each --shards or --tokens one\n"
            "                     source (rf_config.weights; with --epoch-size, --replacement)\n"
            "  --class-weights W,W,...  weight of each class id (folder labels)\n"
            "  --sample-weights FILE    weight of each sample: numbers, in dataset order\n"
            "  --source-labels R,R,...  each source's label rule: cls, none, json:PATH, or\n"
            "                     empty for --label-source (rf_config.source_labels)\n"
            "  --resume-at F      also time resuming at fraction F of the first epoch\n"
            "  --warmup N         batches excluded from the timed figures (0)\n"
            "  --evict            drop the shards from the page cache first (a cold start)\n"
            "  --show-config      print the configuration the loader runs with, every default\n"
            "                     resolved (rf_loader_config), before running\n"
            "  --json             print one JSON object as the last line\n"
            "  --version          print the library's version and exit\n"
            "  -h, --help         print this text and exit\n"
            "short names of settings:\n");
    char flag[64], text[160];
    for (size_t i = 0; i < NALIASES; i++) {
        const struct alias *a = &aliases[i];
        dashed(a->setting, flag, sizeof flag);
        if (a->value)
            snprintf(text, sizeof text, "--%s %s", flag, a->value);
        else
            snprintf(text, sizeof text, "--%s", flag);
        usage_line(f, a->flag, a->help, text);
    }
    fprintf(f, "settings (rf_config; the bench runs --epochs 1, --next-timeout-ms 60000 and for\n"
               "tokens --token-bytes 2 --seq-len 1024 --token-dtype int64 unless told; float\n"
               "dtypes normalize by ImageNet's mean and std unless --mean and --std say):\n");
    for (uint32_t i = 0; i < nrows; i++) {
        const rf_setting *s = &table[i];
        if (!has_flag(s))
            continue;
        char arg[96], value[160], range[64] = "";
        dashed(s->name, flag, sizeof flag);
        setting_arg(s, arg, sizeof arg);
        format_setting(s, defaults, value, sizeof value);
        if (s->type == RF_SETTING_BOOL)
            snprintf(value, sizeof value, "%s", get_int(defaults, s) ? "on" : "off");
        else if (is_int(s) && !s->rule && get_int(defaults, s) < s->min)
            snprintf(value, sizeof value, "none"); /* unset: 0, below the range */
        uint64_t top = s->type == RF_SETTING_U64 ? UINT64_MAX
                       : s->type == RF_SETTING_I32 ? INT32_MAX : UINT32_MAX;
        const char *sp = *s->unit ? " " : "";
        int number = s->type == RF_SETTING_U32 || s->type == RF_SETTING_U64 ||
                     s->type == RF_SETTING_I32;
        if (number && s->max < top)
            snprintf(range, sizeof range, "%llu..%llu%s%s, ", (unsigned long long)s->min,
                     (unsigned long long)s->max, sp, s->unit);
        else if (number)
            snprintf(range, sizeof range, "%llu or more%s%s, ", (unsigned long long)s->min, sp,
                     s->unit);
        snprintf(text, sizeof text, "%s; %sdefault %s", s->doc, range, value);
        usage_line(f, flag, arg, text);
    }
}

/* ---- parsing ------------------------------------------------------------------------------- */

/* The bench's defaults where they are not the library's: one epoch, a stall that ends the run
 * with the loader's account of where it stood (instead of running until someone kills it),
 * and the token files of tools/token_compare.py. */
static void bench_defaults(rf_config *c)
{
    rf_config_init(c);
    c->epochs = 1;
    c->next_timeout_ms = 60000;
    c->token_bytes = 2;
    c->seq_len = 1024;
    c->token_dtype = RF_DTYPE_INT64;
}

static int parse_device(const char *t, rf_config *c)
{
    uint32_t d = 0;
    if (!strcmp(t, "host"))
        return c->device_kind = RF_DEVICE_HOST, 0;
    if (strcmp(t, "cuda") && (strncmp(t, "cuda:", 5) || cli_parse_u32(t + 5, &d) || d > INT32_MAX))
        return -1;
    c->device_kind = RF_DEVICE_CUDA;
    c->device_index = (int32_t)d;
    return 0;
}

/* "W,W,..." into out (at most max numbers); NaN and negative pass, for the library to refuse
 * by name. The count, or -1 when a number does not parse. */
static long parse_floats(const char *t, float *out, size_t max)
{
    size_t n = 0;
    for (;;) {
        char *end;
        float v = strtof(t, &end);
        if (end == t || n == max)
            return -1;
        out[n++] = v;
        if (*end == '\0')
            return (long)n;
        if (*end != ',')
            return -1;
        t = end + 1;
    }
}

/* A file of numbers separated by white space or commas. */
static int read_weights_file(const char *path, float **out, uint64_t *count)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = 0, cap = 1024;
    float *w = malloc(cap * sizeof *w);
    int bad = !w;
    float v;
    while (!bad && fscanf(f, " %f ,", &v) == 1) {
        if (n == cap && !(w = realloc(w, (cap *= 2) * sizeof *w)))
            bad = 1;
        else
            w[n++] = v;
    }
    bad |= !feof(f) || n == 0;
    fclose(f);
    if (bad) {
        free(w);
        return -1;
    }
    *out = w;
    *count = n;
    return 0;
}

/* "R,R,..." into o->labels, an empty entry NULL (the loader's rule). */
static int parse_labels(opts *o, const char *arg)
{
    free(o->label_text);
    if (!(o->label_text = strdup(arg)))
        return -1;
    o->nlabels = 0;
    for (char *p = o->label_text;; p++) {
        if (o->nlabels == MAX_PATTERNS)
            return -1;
        char *end = strchr(p, ',');
        if (end)
            *end = '\0';
        o->labels[o->nlabels++] = *p ? p : NULL;
        if (!end)
            return 0;
        p = end;
    }
}

static int parse_mix(opts *o, int c, const char *arg)
{
    rf_config *cfg = &o->cfg;
    long n;
    if (c == O_LABELS)
        return parse_labels(o, arg);
    if (c == O_WEIGHTS) {
        if ((n = parse_floats(arg, o->weights, MAX_PATTERNS)) < 0)
            return -1;
        cfg->weights = o->weights;
        cfg->weight_count = (uint32_t)n;
        return 0;
    }
    if (c == O_CLASS_WEIGHTS) {
        free(o->class_weights);
        size_t max = strlen(arg) / 2 + 1;
        if (!(o->class_weights = malloc(max * sizeof(float))) ||
            (n = parse_floats(arg, o->class_weights, max)) < 0)
            return -1;
        cfg->class_weights = o->class_weights;
        cfg->class_weight_count = (uint32_t)n;
        return 0;
    }
    free(o->sample_weights);
    o->sample_weights = NULL;
    if (read_weights_file(arg, &o->sample_weights, &cfg->sample_weight_count))
        return -1;
    cfg->sample_weights = o->sample_weights;
    return 0;
}

static int parse_alias(const struct alias *a, const char *arg, rf_config *c)
{
    const rf_setting *s = row(a->setting);
    const char *text = a->value ? a->value : arg;
    if (a->old && !strcmp(text, a->old))
        text = a->now;
    return s ? parse_setting(s, text, c) : -1;
}

/* After the flags: what the bench adds to a config (ImageNet's normalization for float
 * outputs) and refuses (a run without an end). */
static int finish(opts *o, const int *given)
{
    rf_config *c = &o->cfg;
    if (c->dtype != RF_DTYPE_UINT8) {
        static const float mean[3] = {123.675f, 116.28f, 103.53f};
        static const float sd[3] = {58.395f, 57.12f, 57.375f};
        if (!given[row("mean") - table])
            memcpy(c->mean, mean, sizeof mean);
        if (!given[row("std") - table])
            memcpy(c->std, sd, sizeof sd);
    }
    if (!c->epochs)
        return fprintf(stderr, "ringfeed-bench: bad value for option --epochs: a run has at "
                               "least 1\n"), -1;
    c->shards = o->shards;
    c->shard_count = o->nshards;
    if (c->weights || o->nlabels) { /* each pattern its own source */
        for (uint32_t i = 0; i < o->nshards; i++)
            o->per_source[i] = 1;
        c->source_shards = o->per_source;
        c->source_count = o->nshards;
    }
    if (o->nlabels && o->nlabels != o->nshards)
        return fprintf(stderr, "ringfeed-bench: bad value for option --source-labels: %u "
                               "rules for %u sources\n", o->nlabels, o->nshards), -1;
    if (o->nlabels)
        c->source_labels = o->labels;
    return 0;
}

#define SETTINGS_MAX 256 /* rows the flags have room for */

static const struct option own[] = {
    {"shards", required_argument, 0, O_SHARDS}, {"folder", required_argument, 0, O_FOLDER},
    {"tokens", required_argument, 0, O_TOKENS}, {"device", required_argument, 0, O_DEVICE},
    {"resume-at", required_argument, 0, O_RESUME}, {"warmup", required_argument, 0, O_WARMUP},
    {"evict", no_argument, 0, O_EVICT}, {"json", no_argument, 0, O_JSON},
    {"show-config", no_argument, 0, O_SHOWCFG}, {"version", no_argument, 0, O_VERSION},
    {"help", no_argument, 0, O_HELP}, {"weights", required_argument, 0, O_WEIGHTS},
    {"class-weights", required_argument, 0, O_CLASS_WEIGHTS},
    {"sample-weights", required_argument, 0, O_SAMPLE_WEIGHTS},
    {"source-labels", required_argument, 0, O_LABELS}};
#define NOWN (sizeof own / sizeof own[0])

/* getopt_long's table: the bench's own options, the short names, a flag per setting. */
static const struct option *long_options(void)
{
    static struct option lo[NOWN + NALIASES + SETTINGS_MAX + 1];
    static char names[SETTINGS_MAX][64];
    size_t n = 0;
    for (size_t i = 0; i < NOWN; i++)
        lo[n++] = own[i];
    for (size_t i = 0; i < NALIASES; i++)
        lo[n++] = (struct option){aliases[i].flag,
                                  aliases[i].value ? no_argument : required_argument, 0,
                                  O_ALIAS + (int)i};
    for (uint32_t i = 0; i < nrows; i++) {
        if (!has_flag(&table[i]))
            continue;
        dashed(table[i].name, names[i], sizeof names[i]);
        int arg = table[i].type == RF_SETTING_BOOL ? no_argument : required_argument;
        lo[n++] = (struct option){names[i], arg, 0, O_SETTING + (int)i};
    }
    return lo;
}

/* One option c with its argument into o: 0, or 1 for a bad value. */
static int parse_option(opts *o, int c, const char *arg, int *given)
{
    if (c >= O_SETTING) {
        const rf_setting *s = &table[c - O_SETTING];
        given[c - O_SETTING] = 1;
        return s->type == RF_SETTING_BOOL ? (put_int(&o->cfg, s, 1), 0)
                                          : parse_setting(s, arg, &o->cfg) != 0;
    }
    if (c >= O_ALIAS)
        return parse_alias(&aliases[c - O_ALIAS], arg, &o->cfg) != 0;
    switch (c) {
    case O_SHARDS:
    case O_FOLDER:
    case O_TOKENS:
        if (o->nshards == MAX_PATTERNS)
            return 1;
        o->shards[o->nshards++] = arg;
        if (c != O_SHARDS)
            o->cfg.source = c == O_FOLDER ? RF_SOURCE_FOLDER : RF_SOURCE_TOKENS;
        return 0;
    case O_DEVICE: return parse_device(arg, &o->cfg) != 0;
    case O_WEIGHTS:
    case O_CLASS_WEIGHTS:
    case O_SAMPLE_WEIGHTS:
    case O_LABELS: return parse_mix(o, c, arg) != 0;
    case O_RESUME:
        o->resume_at = strtod(arg, NULL);
        return !(o->resume_at > 0 && o->resume_at < 1);
    case O_WARMUP: return cli_parse_u32(arg, &o->warmup) != 0;
    case O_EVICT: return o->evict = 1, 0;
    case O_JSON: return o->json = 1, 0;
    case O_SHOWCFG: return o->show_config = 1, 0;
    default: return 1;
    }
}

int parse_args(int argc, char **argv, opts *o)
{
    static int given[SETTINGS_MAX]; /* the settings a flag set */
    table = rf_config_settings(&nrows);
    if (nrows > SETTINGS_MAX)
        return fprintf(stderr, "ringfeed-bench: the library has %u settings, more than the "
                               "%d it was built for\n", nrows, SETTINGS_MAX), -1;
    memset(o, 0, sizeof *o);
    bench_defaults(&o->cfg);
    const struct option *lo = long_options();
    int c, at = -1;
    while ((c = getopt_long(argc, argv, "h", lo, &at)) != -1) {
        if (c == 'h' || c == O_HELP || c == O_VERSION) {
            rf_config d;
            bench_defaults(&d);
            if (c == O_VERSION)
                printf("ringfeed-bench %s\n", rf_version());
            else
                usage(stdout, &d);
            exit(0);
        }
        if (parse_option(o, c, optarg, given)) {
            if (at >= 0)
                fprintf(stderr, "ringfeed-bench: bad value for option --%s: %s\n", lo[at].name,
                        optarg ? optarg : "");
            else
                fprintf(stderr, "ringfeed-bench: bad option %s\n", argv[optind - 1]);
            return -1;
        }
        at = -1;
    }
    if (optind < argc || o->nshards == 0) {
        rf_config d;
        bench_defaults(&d);
        usage(stderr, &d);
        return -1;
    }
    return finish(o, given);
}
