/* bench_report.c — ringfeed-bench's output: the table, the --json object (its last line of
 * stdout) and the --show-config lines, from a finished run's result and stats. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"

/* The page-cache hit ratio between two snapshots: the share of the bytes read that did not
 * come from storage (rf_stats.storage_read_bytes), or -1 when that is not measured or nothing
 * was read. Readahead and warm hints count as storage reads when they happen, so a cold
 * epoch gives about 0 however far ahead they ran. */
static double hit_ratio(const rf_stats *from, const rf_stats *to)
{
    uint64_t rd = to->bytes_read - from->bytes_read;
    uint64_t sto = to->storage_read_bytes - from->storage_read_bytes;
    if (!to->storage_measured || rd == 0)
        return -1.0;
    return sto >= rd ? 0.0 : 1.0 - (double)sto / rd;
}

/* The share of the bytes checked at submit that were in the page cache then, in flight from
 * storage included (rf_stats.cache_hit_bytes); -1 when nothing was checked. */
double resident_ratio(const rf_stats *from, const rf_stats *to)
{
    uint64_t chk = to->cache_checked_bytes - from->cache_checked_bytes;
    return chk ? (double)(to->cache_hit_bytes - from->cache_hit_bytes) / chk : -1.0;
}

/* A ratio for the table: "-" when unknown (-1). */
static const char *table_ratio(double v, char *buf, size_t n)
{
    snprintf(buf, n, v < 0 ? "-" : "%.3f", v);
    return buf;
}

/* A ratio for the JSON: null when unknown (-1). */
static void json_ratio(const char *key, double v)
{
    if (v < 0)
        printf("\"%s\": null", key);
    else
        printf("\"%s\": %.4f", key, v);
}

#define RF_BUCKET_TEXT_SHOWN 160 /* the size buckets named in the table's header, cut there */

/* The crop mode's name, from its settings row (every mode the library has). */
static const char *crop_name(const rf_config *c, char *buf, size_t len)
{
    uint32_t n = 0;
    const rf_setting *rows = rf_config_settings(&n);
    snprintf(buf, len, "?");
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(rows[i].name, "crop") == 0)
            format_setting(&rows[i], c, buf, len);
    return buf;
}

void print_table(const opts *o, const result *r)
{
    char crop[32];
    const rf_stats *s = &r->st;
    double secs = r->timed_seconds > 0 ? r->timed_seconds : 1e-9;
    double wall = s->wall_ns * 1e-9;
    printf("ringfeed-bench  device %s  io %s (%s)\n", s->device, s->io_engine, s->io_engine_why);
    /* the output: image_height x image_width when set, else image_size square; with size
     * buckets the buckets (each batch one of them) */
    char size[RF_BUCKET_TEXT_SHOWN];
    const rf_config *c = &o->cfg;
    if (c->size_buckets && *c->size_buckets)
        snprintf(size, sizeof size, "buckets %s", c->size_buckets);
    else
        snprintf(size, sizeof size, "%ux%u", c->image_height ? c->image_height : c->image_size,
                 c->image_width ? c->image_width : c->image_size);
    printf("  %u decode threads, %u I/O threads, depth %u, batch %u, %s %s crop\n",
           s->decode_threads, s->io_threads, s->prefetch_depth, c->batch_size, size,
           crop_name(c, crop, sizeof crop));
    printf("  %-26s %12s\n", "metric", "value");
    if (o->cfg.source == RF_SOURCE_TOKENS) {
        printf("  %-26s %12.0f\n", "windows/s", r->timed_images / secs);
        printf("  %-26s %12.0f\n", "batches/s", r->timed_images / secs / o->cfg.batch_size);
        printf("  %-26s %12.3g\n", "tokens/s", (double)r->timed_images * o->cfg.seq_len / secs);
    } else {
        printf("  %-26s %12.0f\n", "images/s", r->timed_images / secs);
    }
    printf("  %-26s %12.1f\n", "MB/s read", s->bytes_read / 1e6 / wall);
    printf("  %-26s %12.2f\n", "GB/s to device", r->timed_bytes / 1e9 / secs);
    printf("  %-26s %12llu\n", "images", (unsigned long long)r->images);
    printf("  %-26s %12.3f\n", "seconds", r->timed_seconds);
    printf("  %-26s %12.1f\n", "create ms", r->create_ms);
    printf("  %-26s %12.1f\n", "first batch ms after create", r->first_batch_us / 1e3);
    printf("  %-26s %12.1f\n", "  of which handed out at", r->first_next_us / 1e3);
    const rf_stats *w = &r->at_warmup; /* the busy times are the timed window's */
    printf("  %-26s %11.0f%%\n", "I/O busy (of secs x thr)",
           100.0 * (s->io_busy_ns - w->io_busy_ns) /
               (secs * 1e9 * (s->io_threads ? s->io_threads : 1)));
    printf("  %-26s %11.0f%%\n", "decode busy (of secs x thr)",
           100.0 * (s->decode_busy_ns - w->decode_busy_ns) /
               (secs * 1e9 * (s->decode_threads ? s->decode_threads : 1)));
    printf("  %-26s %12.1f\n", "decode ms/image",
           s->samples_decoded ? s->decode_busy_ns / 1e6 / s->samples_decoded : 0.0);
    printf("  %-26s %12.1f\n", "copy enqueue ms in secs",
           (s->copy_busy_ns - w->copy_busy_ns) / 1e6);
    printf("  %-26s %12.1f\n", "consumer waited ms in secs",
           (s->consumer_wait_ns - w->consumer_wait_ns) / 1e6);
    printf("  %-26s %11.0f%%\n", "DCT-scaled decodes",
           s->samples_decoded ? 100.0 * s->dct_scaled / s->samples_decoded : 0.0);
    printf("  %-26s %11.0f%%\n", "region decodes (restarts)",
           s->samples_decoded ? 100.0 * s->region_decoded / s->samples_decoded : 0.0);
    if (s->gpu_decoded)
        printf("  %-26s %11.0f%%\n", "decoded on the GPU",
               s->samples_decoded ? 100.0 * s->gpu_decoded / s->samples_decoded : 0.0);
    if (s->sync_indexed || s->sync_stale || s->sync_built)
        printf("  %-26s %11.0f%% (%llu stale, %llu built)\n", "from sync-point indexes",
               s->samples_decoded ? 100.0 * s->sync_indexed / s->samples_decoded : 0.0,
               (unsigned long long)s->sync_stale, (unsigned long long)s->sync_built);
    if (s->hw_decoded)
        printf("  %-26s %11.0f%%\n", "hardware JPEG decoder",
               s->samples_decoded ? 100.0 * s->hw_decoded / s->samples_decoded : 0.0);
    if (s->decode_schedule == RF_SCHEDULE_BALANCE)
        printf("  %-26s %7.1f%% / %.1f%% (engines %s)\n", "scheduler GPU / engines now",
               s->sched_gpu_permille / 10.0, s->sched_hw_permille / 10.0,
               s->hw_engines == RF_HW_ENGINES_READY      ? "ready"
               : s->hw_engines == RF_HW_ENGINES_OPENING  ? "opening"
               : s->hw_engines == RF_HW_ENGINES_UNOPENED ? "not needed yet"
                                                         : "none");
    if (s->hw_open_ns)
        printf("  %-26s %9.1f ms\n", "hardware decoders opened in", s->hw_open_ns / 1e6);
    rf_stats zero;
    memset(&zero, 0, sizeof zero);
    char b1[16], b2[16];
    printf("  %-26s %12s%s%s%s\n", "page-cache hit ratio",
           table_ratio(hit_ratio(&zero, s), b1, sizeof b1), s->storage_measured ? "" : " (",
           s->storage_why, s->storage_measured ? "" : ")");
    printf("  %-26s %12.1f\n", "MB read from storage", s->storage_read_bytes / 1e6);
    if (s->shard_cache_on || s->shard_cache_why[0])
        printf("  %-26s %llu hits, %llu misses, %llu filled, %llu bypassed%s%s\n",
               "shard cache", (unsigned long long)s->shard_cache_hits,
               (unsigned long long)s->shard_cache_misses, (unsigned long long)s->shard_cache_fills,
               (unsigned long long)s->shard_cache_bypasses, s->shard_cache_why[0] ? ": " : "",
               s->shard_cache_why);
    printf("  %-26s %12s\n", "resident at submit",
           table_ratio(resident_ratio(&zero, s), b1, sizeof b1));
    for (uint32_t i = 0; i < r->nep && r->nep > 1; i++)
        printf("  epoch %-20u %8.0f img/s, hit ratio %s, resident at submit %s\n", i,
               r->ep[i].s > 0 ? r->ep[i].img / r->ep[i].s : 0.0,
               table_ratio(r->ep[i].hit, b1, sizeof b1), table_ratio(r->ep[i].res, b2, sizeof b2));
    if (r->nep_omitted)
        printf("  epochs after %-13u %llu more, not listed (%u rows are kept)\n", r->nep,
               (unsigned long long)r->nep_omitted, BENCH_EPOCH_ROWS_MAX);
    printf("  %-26s %12s\n", "memory", s->memory_why[0] ? s->memory_why : "defaults");
    printf("  %-26s %12.1f\n", "ring pin ms", s->ring_register_ns / 1e6);
    printf("  %-26s %12llu\n", "device allocs after create",
           (unsigned long long)s->device_allocs_after_create);
    if (o->resume_at > 0) {
        printf("  %-26s %12.1f\n", "fresh create+1st batch ms", r->fresh_ms);
        printf("  %-26s %12.1f\n", "resume create+1st batch ms", r->resume_ms);
    }
}

/* The memory-hierarchy fields, closing the JSON object. */
static void print_json_memory(const opts *o, const result *r)
{
    const rf_stats *s = &r->st;
    rf_stats zero;
    memset(&zero, 0, sizeof zero);
    json_ratio("cache_hit_ratio", hit_ratio(&zero, s));
    printf(", ");
    json_ratio("resident_at_submit_ratio", resident_ratio(&zero, s));
    printf(", \"storage_read_bytes\": %llu, \"storage_measured\": %u, \"storage_why\": \"%s\", ",
           (unsigned long long)s->storage_read_bytes, s->storage_measured, s->storage_why);
    printf("\"shard_cache_on\": %u, \"shard_cache_hits\": %llu, \"shard_cache_misses\": %llu, "
           "\"shard_cache_fills\": %llu, \"shard_cache_bypasses\": %llu, "
           "\"shard_cache_fill_failures\": %llu, ", s->shard_cache_on,
           (unsigned long long)s->shard_cache_hits, (unsigned long long)s->shard_cache_misses,
           (unsigned long long)s->shard_cache_fills, (unsigned long long)s->shard_cache_bypasses,
           (unsigned long long)s->shard_cache_fill_failures);
    printf("\"naive\": %u, \"cache_checked_bytes\": %llu, "
           "\"warm\": %u, \"warmed_bytes\": %llu, \"odirect\": %u, \"hugepages\": %u, "
           "\"numa_node\": %d, \"numa_nodes\": %u, \"pinned_bytes\": %llu, "
           "\"device_pool_reserved_bytes\": %llu, \"device_pool_used_bytes\": %llu, "
           "\"device_allocs_after_create\": %llu, \"host_allocs_after_create\": %llu, "
           "\"ring_register_ms\": %.3f, \"memory_why\": \"%s\", \"per_epoch\": [",
           o->cfg.naive, (unsigned long long)s->cache_checked_bytes, o->cfg.warm, (unsigned long long)s->warmed_bytes, s->odirect, s->hugepages, s->numa_node,
           s->numa_nodes, (unsigned long long)s->pinned_bytes,
           (unsigned long long)s->device_pool_reserved_bytes,
           (unsigned long long)s->device_pool_used_bytes,
           (unsigned long long)s->device_allocs_after_create,
           (unsigned long long)s->host_allocs_after_create, s->ring_register_ns / 1e6,
           s->memory_why);
    for (uint32_t i = 0; i < r->nep; i++) {
        const epoch_row *e = &r->ep[i];
        printf("%s{\"epoch\": %u, \"seconds\": %.4f, \"img_per_s\": %.1f, ", i ? ", " : "", i,
               e->s, e->s > 0 ? e->img / e->s : 0.0);
        json_ratio("cache_hit_ratio", e->hit);
        printf(", ");
        json_ratio("resident_at_submit_ratio", e->res);
        printf(", \"rss_mb\": %.1f, \"open_fds\": %u}", e->rss_mb, e->fds);
    }
    printf("], \"per_epoch_omitted\": %llu}\n", (unsigned long long)r->nep_omitted);
}

void print_json(const opts *o, const result *r)
{
    char crop[32];
    const rf_stats *s = &r->st;
    double secs = r->timed_seconds > 0 ? r->timed_seconds : 1e-9;
    printf("{\"create_ms\": %.2f, ", r->create_ms);
    /* The first batch's breakdown: handed out (next_ms) and on the device (first_batch_ms
     * below), and the loader's counters just after it. */
    const rf_stats *f = &r->at_first;
    printf("\"first_batch\": {\"next_ms\": %.2f, \"loader_ms\": %.2f, \"decoded\": %llu, "
           "\"gpu_decoded\": %llu, \"hw_decoded\": %llu, \"bytes_read\": %llu, "
           "\"io_busy_ms\": %.2f, \"decode_busy_ms\": %.2f, \"copy_busy_ms\": %.2f, "
           "\"consumer_wait_ms\": %.2f}, ",
           r->first_next_us / 1e3, f->wall_ns / 1e6, (unsigned long long)f->samples_decoded,
           (unsigned long long)f->gpu_decoded, (unsigned long long)f->hw_decoded,
           (unsigned long long)f->bytes_read, f->io_busy_ns / 1e6, f->decode_busy_ns / 1e6,
           f->copy_busy_ns / 1e6, f->consumer_wait_ns / 1e6);
    /* Images decoded inside the timed window: unlike img_per_s, not inflated by the batches
     * already prefetched when it opened (up to depth x batch), which matters in short runs. */
    printf("\"decode_img_per_s\": %.1f, ",
           (double)(s->samples_decoded - r->at_warmup.samples_decoded) / secs);
    /* The busy times inside the timed window ("seconds"); the *_busy_s below are since create. */
    const rf_stats *w = &r->at_warmup;
    printf("\"io_busy_timed_s\": %.4f, \"decode_busy_timed_s\": %.4f, "
           "\"copy_busy_timed_s\": %.4f, \"consumer_wait_timed_s\": %.4f, ",
           (s->io_busy_ns - w->io_busy_ns) * 1e-9, (s->decode_busy_ns - w->decode_busy_ns) * 1e-9,
           (s->copy_busy_ns - w->copy_busy_ns) * 1e-9,
           (s->consumer_wait_ns - w->consumer_wait_ns) * 1e-9);
    printf("\"images\": %llu, \"epochs\": %u, \"batches\": %llu, \"seconds\": %.6f, "
           "\"img_per_s\": %.1f, \"io_engine\": \"%s\", \"io_engine_why\": \"%s\", "
           "\"device\": \"%s\", \"batch\": %u, \"size\": %u, \"crop\": \"%s\", "
           "\"decode_threads\": %u, \"io_threads\": %u, \"depth\": %u, "
           "\"bytes_read\": %llu, \"mb_per_s_read\": %.2f, \"gb_per_s_to_device\": %.3f, "
           "\"first_batch_ms\": %.2f, \"io_busy_s\": %.4f, \"decode_busy_s\": %.4f, "
           "\"copy_busy_s\": %.4f, \"consumer_wait_s\": %.4f, \"wall_s\": %.4f, "
           "\"samples_decoded\": %llu, \"dct_scaled\": %llu, \"region_decoded\": %llu, "
           "\"gpu_decoded\": %llu, \"hw_decoded\": %llu, \"decode_schedule\": %u, "
           "\"sched_gpu_permille\": %u, \"sched_hw_permille\": %u, \"hw_engines\": %u, "
           "\"hw_open_ms\": %.2f, \"read_retries\": %llu, "
           "\"registered_buffers\": %u, \"pinned\": %u, \"bytes_to_device\": %llu, "
           "\"tokens_per_s\": %.1f, \"batches_per_s\": %.2f, \"fresh_ms\": %.3f, "
           "\"resume_ms\": %.3f, \"resume_at\": %.3f, \"resume_position\": %llu, "
           "\"samples\": %llu, \"order\": \"%s\", ",
           (unsigned long long)r->images, o->cfg.epochs, (unsigned long long)r->batches,
           r->timed_seconds, r->timed_images / secs, s->io_engine, s->io_engine_why, s->device,
           o->cfg.batch_size, o->cfg.image_size,
           crop_name(&o->cfg, crop, sizeof crop), s->decode_threads,
           s->io_threads, s->prefetch_depth, (unsigned long long)s->bytes_read,
           s->bytes_read / 1e6 / (s->wall_ns * 1e-9),
           r->timed_bytes / 1e9 / secs,
           r->first_batch_us / 1e3, s->io_busy_ns * 1e-9, s->decode_busy_ns * 1e-9,
           s->copy_busy_ns * 1e-9, s->consumer_wait_ns * 1e-9, s->wall_ns * 1e-9,
           (unsigned long long)s->samples_decoded, (unsigned long long)s->dct_scaled,
           (unsigned long long)s->region_decoded, (unsigned long long)s->gpu_decoded,
           (unsigned long long)s->hw_decoded, s->decode_schedule, s->sched_gpu_permille,
           s->sched_hw_permille, s->hw_engines, s->hw_open_ns / 1e6,
           (unsigned long long)s->read_retries,
           s->registered_buffers, s->pinned,
           (unsigned long long)r->bytes,
           o->cfg.source == RF_SOURCE_TOKENS ? (double)r->timed_images * o->cfg.seq_len / secs
                                             : 0.0,
           r->timed_images / secs / o->cfg.batch_size, r->fresh_ms, r->resume_ms, o->resume_at,
           (unsigned long long)r->resume_batch, (unsigned long long)r->timed_images,
           o->cfg.order == RF_ORDER_GLOBAL   ? "global"
           : o->cfg.order == RF_ORDER_SHARD ? "shard"
                                            : "none");
    printf("\"on_error\": \"%s\", \"skipped\": %llu, \"nonregular_members\": %llu, "
           "\"skipped_by_reason\": {", o->cfg.on_error == RF_ON_ERROR_SKIP ? "skip" : "fail",
           (unsigned long long)s->skipped, (unsigned long long)s->nonregular_members);
    for (uint32_t i = 0; rf_skip_reason_name(i); i++)
        printf("%s\"%s\": %llu", i ? ", " : "", rf_skip_reason_name(i),
               (unsigned long long)s->skipped_by_reason[i]);
    printf("}, \"recovered\": %llu, \"recovered_by_kind\": {",
           (unsigned long long)s->recovered);
    for (uint32_t i = 0; rf_recovered_name(i); i++)
        printf("%s\"%s\": %llu", i ? ", " : "", rf_recovered_name(i),
               (unsigned long long)s->recovered_by_kind[i]);
    printf("}, \"sync_indexed\": %llu, \"sync_stale\": %llu, \"sync_built\": %llu, "
           "\"sync_loaded\": %llu, ",
           (unsigned long long)s->sync_indexed, (unsigned long long)s->sync_stale,
           (unsigned long long)s->sync_built, (unsigned long long)s->sync_loaded);
    print_json_memory(o, r);
}

/* --show-config: the loader's effective config, every setting of the library's table as
 * "name value" (the value as its flag takes it), a few a line, so that a run records what
 * every default resolved to. */
int print_config(const rf_loader *ld)
{
    rf_config c;
    rf_config_init(&c);
    int rc = rf_loader_config(ld, &c);
    if (rc)
        return fprintf(stderr, "ringfeed-bench: rf_loader_config: %s\n", rf_strerror(rc)), rc;
    printf("config  shards %u (first %s)", c.shard_count, c.shards[0]);
    int col = 100; /* past the line's end: the next item starts a line */
    uint32_t n;
    const rf_setting *t = rf_config_settings(&n);
    for (uint32_t i = 0; i < n; i++) {
        if (t[i].flags & (RF_SETTING_HEADER | RF_SETTING_INPUT | RF_SETTING_C_ONLY))
            continue;
        char v[192];
        format_setting(&t[i], &c, v, sizeof v);
        int w = (int)(strlen(t[i].name) + strlen(v) + 3);
        if (col + w > 98) {
            printf("\nconfig  %s %s", t[i].name, v);
            col = 8 + w - 2;
        } else {
            printf(", %s %s", t[i].name, v);
            col += w;
        }
    }
    printf("\n");
    return 0;
}
