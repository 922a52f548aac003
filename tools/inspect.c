/* ringfeed-inspect — validate WebDataset shards: tar structure, sample grouping, labels, every
 * JPEG (decoded in full by the loader's own decoder, so a clean shard cannot fail in the loader
 * with default limits) and indexes; print totals, a size/dimension summary and every problem
 * with file and byte offset. Uses the public API only (ringfeed.h, ringfeed_shards.h).
 *
 * DESIGN. Shards are inspected one after the other by rf_shard_inspect (the checks live in the
 * library so the Python binding gets the same ones); this file only expands patterns, prints,
 * sums and optionally writes missing indexes (only for shards that inspected clean, so an
 * index never records a broken shard). Exit status: 0 clean, 1 problems found, 2 usage. With
 * --json the last line of stdout is one JSON object. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ringfeed.h"
#include "ringfeed_shards.h"

#define INSPECT_PATTERNS_MAX 4096
#define JSON_PROBLEMS_MAX 20  /* problem texts carried in the JSON line */
#define PATH_CAP 4096

typedef struct totals {
    uint64_t shards, samples, members, bytes, problems, images, progressive, image_bytes;
    uint64_t region_ready, oriented, with_image, recovered[RF_RECOVERED_KINDS];
    uint64_t image_bytes_min, image_bytes_max, width_sum, height_sum, labeled;
    uint64_t with_index, index_bad, indexes_written;
    /* sync-point sidecars: found, damaged, and their coverage summed */
    uint64_t sync_found, sync_bad;
    rf_sync_summary sync;
    uint32_t width_min, width_max, height_min, height_max;
    int32_t label_min, label_max;
    int quiet, json;
    char *problems_json[JSON_PROBLEMS_MAX];
    uint32_t njson;
} totals;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ringfeed-inspect [options] SHARD...\n"
            "  SHARD              paths, globs ('out/*.tar') or brace ranges\n"
            "                     ('train-{0000..0099}.tar'), quoted so the shell leaves them\n"
            "  --json             print one JSON object as the last line of stdout\n"
            "  --write-index      write X.idx for each clean shard that has none\n"
            "  --no-jpeg          do not decode the images (structure, labels and index only;\n"
            "                     by default every image is decoded in full, as a check)\n"
            "  --no-labels        unlabelled shards: do not require or check KEY.cls labels\n"
            "                     (as ringfeed-bench --no-labels; by default every sample the\n"
            "                     loader would refuse for its label is a problem)\n"
            "  --image-exts LIST  which member is a sample's image: extensions, most preferred\n"
            "                     first (default jpg,jpeg,png,webp; the loader's image_exts)\n"
            "  --label SRC        where labels are: cls (default: KEY.cls), json:PATH (the\n"
            "                     integer field PATH, e.g. annotations.class_id, of KEY.json,\n"
            "                     as the loader's label_source RF_LABEL_JSON) or none\n"
            "  --quiet            print problems and the totals only (no per-shard lines)\n"
            "  --version          print the library's version and exit\n"
            "  -h, --help         print this text and exit\n"
            "Exit status: 0 no problem, 1 problems found, 2 usage error.\n");
}

/* JSON string body with the escapes JSON requires. */
static char *json_escape(const char *s)
{
    size_t n = strlen(s);
    char *o = malloc(n * 6 + 1), *p = o;
    if (!o)
        return NULL;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            *p++ = '\\';
            *p++ = (char)c;
        } else if (c < 0x20) {
            p += sprintf(p, "\\u%04x", c);
        } else {
            *p++ = (char)c;
        }
    }
    *p = 0;
    return o;
}

static int on_problem(void *ctx, const rf_inspect_problem *pr)
{
    totals *t = ctx;
    printf("problem: %s [%s]\n", pr->message, rf_strerror(pr->code));
    if (t->json && t->njson < JSON_PROBLEMS_MAX)
        t->problems_json[t->njson++] = json_escape(pr->message);
    return 0;
}

static void add(totals *t, const rf_inspect_summary *s)
{
    t->shards++;
    t->samples += s->samples;
    t->members += s->members;
    t->bytes += s->bytes;
    t->problems += s->problems;
    t->image_bytes += s->image_bytes;
    if (s->image_bytes_max) {
        if (!t->image_bytes_min || s->image_bytes_min < t->image_bytes_min)
            t->image_bytes_min = s->image_bytes_min;
        if (s->image_bytes_max > t->image_bytes_max)
            t->image_bytes_max = s->image_bytes_max;
    }
    if (s->images) {
        if (!t->images || s->width_min < t->width_min)
            t->width_min = s->width_min;
        if (!t->images || s->height_min < t->height_min)
            t->height_min = s->height_min;
        if (s->width_max > t->width_max)
            t->width_max = s->width_max;
        if (s->height_max > t->height_max)
            t->height_max = s->height_max;
    }
    t->images += s->images;
    t->progressive += s->progressive;
    t->region_ready += s->region_ready;
    t->oriented += s->oriented;
    for (uint32_t k = 0; k < RF_RECOVERED_KINDS; k++)
        t->recovered[k] += s->recovered_by_kind[k];
    t->with_image += s->with_image;
    t->width_sum += s->width_sum;
    t->height_sum += s->height_sum;
    if (s->labeled) {
        if (!t->labeled || s->label_min < t->label_min)
            t->label_min = s->label_min;
        if (!t->labeled || s->label_max > t->label_max)
            t->label_max = s->label_max;
    }
    t->labeled += s->labeled;
    t->with_index += s->has_index;
    t->index_bad += s->has_index && !s->index_ok;
}

/* The shard's sync-point sidecar: its coverage and staleness into t, said in words in buf. */
static void sync_one(const char *path, totals *t, char *buf, size_t cap)
{
    rf_sync_summary m;
    char err[600];
    rf_sync_summary_init(&m);
    int rc = rf_shard_check_sync_index(path, NULL, &m, err, sizeof err);
    if (rc == 1) {
        snprintf(buf, cap, "none");
        return;
    }
    if (rc) {
        printf("problem: %s [%s]\n", err, rf_strerror(rc));
        t->problems++, t->sync_bad++;
        snprintf(buf, cap, "DAMAGED");
        return;
    }
    t->sync_found++;
    rf_sync_summary_add(&t->sync, &m);
    snprintf(buf, cap, "%" PRIu64 " of %" PRIu64 " JPEGs indexed%s (%.2f%% of the shard), %"
             PRIu64 " stale, %" PRIu64 " missing", m.indexed, m.jpegs,
             m.needs_none ? ", some need none" : "",
             m.shard_bytes ? 100.0 * (double)m.index_bytes / (double)m.shard_bytes : 0.0, m.stale,
             m.missing);
}

static void inspect_one(const char *path, const rf_inspect_options *o, int write_index,
                        totals *t)
{
    rf_inspect_summary s;
    rf_inspect_summary_init(&s);
    int rc = rf_shard_inspect(path, o, on_problem, NULL, t, &s);
    if (rc == RF_EINVAL || rc == RF_ENOMEM) {
        printf("problem: %s: cannot inspect: %s\n", path, rf_strerror(rc));
        s.problems++;
    }
    add(t, &s);
    char sync[200];
    sync_one(path, t, sync, sizeof sync);
    if (!t->quiet)
        printf("%s: %" PRIu64 " samples, %" PRIu64 " bytes, %" PRIu64 " problems, index %s, "
               "sync index %s\n", path, s.samples, s.bytes, s.problems,
               !s.has_index ? "none" : s.index_ok ? "ok" : "DISAGREES", sync);
    if (write_index && !s.has_index && s.problems == 0) {
        char err[1024];
        if (rf_shard_write_index(path, NULL, err, sizeof err) != 0) {
            printf("problem: %s: writing the index failed: %s\n", path, err);
            t->problems++;
        } else {
            t->indexes_written++;
            if (!t->quiet) {
                char idx[PATH_CAP];
                rf_shard_index_path(path, idx, sizeof idx);
                printf("%s: wrote %s\n", path, idx);
            }
        }
    }
}

static void print_totals(const totals *t)
{
    double n = t->images ? (double)t->images : 1;
    printf("shards %" PRIu64 ", samples %" PRIu64 ", members %" PRIu64 ", bytes %" PRIu64
           " (%.1f MB), problems %" PRIu64 "\n", t->shards, t->samples, t->members, t->bytes,
           (double)t->bytes / 1e6, t->problems);
    if (t->with_image) /* the mean over samples that have an image, as min and max are */
        printf("image bytes: min %" PRIu64 ", mean %.0f, max %" PRIu64 "\n", t->image_bytes_min,
               (double)t->image_bytes / (double)t->with_image, t->image_bytes_max);
    if (t->images)
        printf("dimensions: width %u..%u (mean %.0f), height %u..%u (mean %.0f); %" PRIu64
               " baseline, %" PRIu64 " progressive\n", t->width_min, t->width_max,
               (double)t->width_sum / n, t->height_min, t->height_max, (double)t->height_sum / n,
               t->images - t->progressive, t->progressive);
    if (t->images)
        printf("region decode: %" PRIu64 " of %" PRIu64 " images have restart markers that let "
               "crops skip the rest of the file%s\n", t->region_ready, t->images,
               t->region_ready < t->images ? " (ringfeed-pack --restart adds them)" : "");
    if (t->oriented)
        printf("orientation: %" PRIu64 " of %" PRIu64 " images carry an EXIF orientation that "
               "rotates or mirrors them; the loader decodes the pixels as stored (exiftran -ai or "
               "ImageMagick's -auto-orient turns them upright)\n",
               t->oriented, t->images);
    for (uint32_t k = 0; rf_recovered_name(k); k++)
        if (t->recovered[k])
            printf("recovered: %" PRIu64 " of %" PRIu64 " images need libjpeg's recovery from "
                   "%s, which costs no pixel: the loader decodes them (counted in "
                   "rf_stats.recovered_by_kind)\n", t->recovered[k], t->images,
                   k == RF_RECOVERED_HEADER_BYTES ? "bytes that are no marker between header "
                                                    "segments (or a segment length under 2)"
                   : k == RF_RECOVERED_JFIF_VERSION ? "an unknown JFIF revision"
                                                    : "a malformed ICC profile marker");
    if (t->labeled)
        printf("labels: %" PRIu64 " samples labelled, %d..%d\n", t->labeled, t->label_min,
               t->label_max);
    printf("indexes: %" PRIu64 " present (%" PRIu64 " disagree), %" PRIu64 " written\n",
           t->with_index, t->index_bad, t->indexes_written);
    if (t->sync_found || t->sync_bad)
        printf("sync-point indexes: %" PRIu64 " present (%" PRIu64 " damaged); %" PRIu64 " of %"
               PRIu64 " JPEGs indexed, %" PRIu64 " need none, %" PRIu64 " unsupported, %" PRIu64
               " unreadable, %" PRIu64 " stale, %" PRIu64 " missing (ringfeed-pack --sync-index "
               "rebuilds them); %.2f%% of the shards' bytes\n", t->sync_found, t->sync_bad,
               t->sync.indexed, t->sync.jpegs, t->sync.needs_none, t->sync.unsupported,
               t->sync.unreadable, t->sync.stale, t->sync.missing,
               t->sync.shard_bytes ? 100.0 * (double)t->sync.index_bytes /
                                         (double)t->sync.shard_bytes : 0.0);
}

static void print_json(const totals *t)
{
    printf("{\"shards\": %" PRIu64 ", \"samples\": %" PRIu64 ", \"members\": %" PRIu64
           ", \"bytes\": %" PRIu64 ", \"problems\": %" PRIu64 ", \"images\": %" PRIu64
           ", \"progressive\": %" PRIu64 ", \"region_ready\": %" PRIu64
           ", \"exif_oriented\": %" PRIu64 ", \"image_bytes\": %" PRIu64
           ", \"image_bytes_min\": %" PRIu64 ", \"image_bytes_max\": %" PRIu64
           ", \"width_min\": %u, \"width_max\": %u, \"height_min\": %u, \"height_max\": %u"
           ", \"width_mean\": %.1f, \"height_mean\": %.1f, \"labeled\": %" PRIu64
           ", \"label_min\": %d, \"label_max\": %d, \"indexes\": %" PRIu64
           ", \"indexes_disagree\": %" PRIu64 ", \"indexes_written\": %" PRIu64
           ", \"recovered_header_bytes\": %" PRIu64 ", \"recovered_jfif_version\": %" PRIu64
           ", \"recovered_icc\": %" PRIu64 ", \"sync_indexes\": %" PRIu64
           ", \"sync_damaged\": %" PRIu64 ", \"sync_jpegs\": %" PRIu64 ", \"sync_indexed\": %"
           PRIu64 ", \"sync_stale\": %" PRIu64 ", \"sync_missing\": %" PRIu64
           ", \"sync_index_bytes\": %" PRIu64 ", \"problem_messages\": [",
           t->shards, t->samples, t->members, t->bytes, t->problems, t->images, t->progressive,
           t->region_ready, t->oriented, t->image_bytes, t->image_bytes_min, t->image_bytes_max, t->width_min,
           t->width_max, t->height_min, t->height_max,
           t->images ? (double)t->width_sum / (double)t->images : 0.0,
           t->images ? (double)t->height_sum / (double)t->images : 0.0, t->labeled,
           t->labeled ? t->label_min : 0, t->labeled ? t->label_max : -1, t->with_index,
           t->index_bad, t->indexes_written, t->recovered[RF_RECOVERED_HEADER_BYTES],
           t->recovered[RF_RECOVERED_JFIF_VERSION], t->recovered[RF_RECOVERED_ICC],
           t->sync_found, t->sync_bad, t->sync.jpegs, t->sync.indexed, t->sync.stale,
           t->sync.missing, t->sync.index_bytes);
    for (uint32_t i = 0; i < t->njson; i++)
        printf("%s\"%s\"", i ? ", " : "", t->problems_json[i] ? t->problems_json[i] : "");
    printf("]}\n");
}

/* --label's value: "cls", "none" or "json:PATH" (PATH itself is checked by the inspection,
 * which refuses a malformed one with RF_EINVAL as the loader does). */
static int parse_label(const char *v, rf_inspect_options *o)
{
    if (strcmp(v, "cls") == 0)
        o->label_source = RF_LABEL_CLS;
    else if (strcmp(v, "none") == 0)
        o->label_source = RF_LABEL_NONE;
    else if (strncmp(v, "json:", 5) == 0 && v[5])
        o->label_source = RF_LABEL_JSON, o->label_json_path = v + 5;
    else
        return -1;
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option lo[] = {{"json", 0, 0, 'j'}, {"write-index", 0, 0, 'w'},
                                       {"no-jpeg", 0, 0, 'n'}, {"quiet", 0, 0, 'q'},
                                       {"no-labels", 0, 0, 'L'}, {"label", 1, 0, 'l'},
                                       {"image-exts", 1, 0, 'i'},
                                       {"help", 0, 0, 'h'}, {"version", 0, 0, 'V'},
                                       {0, 0, 0, 0}};
    totals t = {0};
    int write_index = 0, c;
    rf_inspect_options o;
    rf_inspect_options_init(&o);
    while ((c = getopt_long(argc, argv, "jwnqh", lo, NULL)) != -1) {
        switch (c) {
        case 'j': t.json = 1; break;
        case 'w': write_index = 1; break;
        case 'n': o.check_jpeg = 0; break;
        case 'L': o.label_source = RF_LABEL_NONE; break;
        case 'i': o.image_exts = optarg; break;
        case 'l':
            if (parse_label(optarg, &o) != 0) {
                fprintf(stderr, "ringfeed-inspect: --label %s: expected cls, none or json:PATH\n",
                        optarg);
                return 2;
            }
            break;
        case 'q': t.quiet = 1; break;
        case 'h': usage(stdout); return 0;
        case 'V': printf("ringfeed-inspect %s\n", rf_version()); return 0;
        default: usage(stderr); return 2;
        }
    }
    uint32_t np = (uint32_t)(argc - optind);
    if (np == 0 || np > INSPECT_PATTERNS_MAX) {
        usage(stderr);
        return 2;
    }
    rf_paths *paths = NULL;
    char err[1024];
    int rc = rf_paths_expand((const char *const *)argv + optind, np, &paths, err, sizeof err);
    if (rc) {
        printf("problem: %s\n", err);
        t.problems++;
    }
    for (uint32_t i = 0; i < rf_paths_count(paths); i++)
        inspect_one(rf_paths_get(paths, i), &o, write_index, &t);
    rf_paths_free(paths);
    print_totals(&t);
    if (t.json)
        print_json(&t);
    for (uint32_t i = 0; i < t.njson; i++)
        free(t.problems_json[i]);
    return t.problems ? 1 : 0;
}
