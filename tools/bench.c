/* ringfeed-bench — the standalone benchmark: runs the loader over shards for a number of
 * epochs, as a training loop would consume it, and reports throughput and where time went.
 * Uses the public API only. With --json the last line of stdout is one JSON object. This file
 * runs and times the loader; bench_opts.c parses the command line, bench_report.c prints. */
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ringfeed.h"
#include "ringfeed_shards.h"

#include "bench.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void progress(uint64_t done, uint64_t total, double img_s)
{
    int width = 40, fill = total ? (int)(done * width / total) : 0;
    fprintf(stderr, "\r[%.*s%*s] %llu/%llu batches  %.0f img/s ", fill,
            "########################################", width - fill, "",
            (unsigned long long)done, (unsigned long long)total, img_s);
    fflush(stderr);
}

/* Resident set size of this process in MiB (VmRSS; 0 when unreadable). */
static double rss_mib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6))
            kb = strtod(line + 6, NULL);
    if (f)
        fclose(f);
    return kb / 1024.0;
}

/* Open file descriptors of this process (entries of /proc/self/fd, minus the one opendir uses). */
static uint32_t open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    uint32_t n = 0;
    if (!d)
        return 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n > 3 ? n - 3 : 0; /* ".", ".." and the directory's own descriptor */
}

/* An epoch ended: record its time, images, hit ratio (deltas since the last mark), the
 * process' resident set and open descriptors, which must stay flat over epochs. */
static void epoch_mark(rf_loader *ld, result *r, double t)
{
    rf_stats st;
    rf_stats_init(&st);
    rf_loader_stats(ld, &st);
    if (r->nep == r->nep_cap && r->nep < BENCH_EPOCH_ROWS_MAX) {
        uint32_t cap = r->nep_cap ? (2 * r->nep_cap < BENCH_EPOCH_ROWS_MAX ? 2 * r->nep_cap : BENCH_EPOCH_ROWS_MAX) : 64;
        epoch_row *ep = realloc(r->ep, cap * sizeof *ep);
        if (ep)
            r->ep = ep, r->nep_cap = cap;
    }
    if (r->nep < r->nep_cap) {
        epoch_row *e = &r->ep[r->nep++];
        e->s = t - r->mark_t;
        e->img = r->images - r->mark_img;
        e->sto = st.storage_measured
                     ? (double)(st.storage_read_bytes - r->mark.storage_read_bytes)
                     : -1.0;
        e->res = resident_ratio(&r->mark, &st);
        e->rss_mb = rss_mib();
        e->fds = open_fds();
    } else {
        r->nep_omitted++; /* past the rows kept (or no memory for more): said in the report */
    }
    r->mark_t = t;
    r->mark_img = r->images;
    r->mark = st;
}

/* The hit ratio of each epoch: the storage bytes read between its end and the previous one,
 * over the bytes one epoch reads (every epoch reads the same spans: the run's bytes_read over
 * its epochs). Not the bytes read in that time: by an epoch's end the I/O threads have read
 * the next epoch's first batches (prefetch_depth of them), and after a cold epoch those are
 * hits that would dilute it (a 3000-image cold epoch gave 0.11 so, against 0.00). */
static void epoch_hit_ratios(const opts *o, result *r)
{
    double per = o->cfg.epochs ? (double)r->st.bytes_read / o->cfg.epochs : 0.0;
    for (uint32_t i = 0; i < r->nep; i++) {
        epoch_row *e = &r->ep[i];
        e->hit = e->sto < 0 || per <= 0 ? -1.0 : e->sto >= per ? 0.0 : 1.0 - e->sto / per;
    }
}

static int run(const opts *o, rf_loader *ld, result *r)
{
    int tty = isatty(2) && !o->json;
    uint64_t per_epoch = rf_loader_batches_per_epoch(ld);
    uint64_t total = per_epoch * o->cfg.epochs;
    double t0 = now_s(), timed0 = t0;
    uint64_t timed_from = 0;
    r->mark_t = t0;
    rf_stats_init(&r->at_warmup);
    rf_loader_stats(ld, &r->at_warmup);
    for (;;) {
        rf_batch *b;
        int rc = rf_loader_next(ld, &b);
        if (rc == RF_EPOCH_END) {
            epoch_mark(ld, r, now_s());
            continue;
        }
        if (rc == RF_DONE)
            break;
        if (rc < 0) {
            if (tty)
                fputc('\n', stderr);
            fprintf(stderr, "ringfeed-bench: %s: %s\n", rf_strerror(rc), rf_last_error(ld));
            return rc;
        }
        if (r->batches == 0)
            r->first_next_us = (uint64_t)((now_s() - t0) * 1e6);
        /* What a training step needs first: the batch on the device. */
        rf_batch_synchronize(b);
        if (r->batches == 0) {
            r->first_batch_us = (uint64_t)((now_s() - t0) * 1e6);
            rf_stats_init(&r->at_first);
            rf_loader_stats(ld, &r->at_first);
        }
        r->images += b->count;
        r->bytes += b->data_bytes;
        r->batches++;
        rf_loader_release(ld, b, NULL);
        if (r->batches == o->warmup) {
            timed0 = now_s();
            timed_from = r->images;
            r->timed_bytes = r->bytes;
            rf_stats_init(&r->at_warmup);
            rf_loader_stats(ld, &r->at_warmup);
        }
        if (tty && (r->batches % 8 == 0 || r->batches == total))
            progress(r->batches, total, (r->images - timed_from) / (now_s() - timed0 + 1e-9));
    }
    if (tty)
        fputc('\n', stderr);
    double t1 = now_s();
    r->seconds = t1 - t0;
    r->timed_seconds = t1 - timed0;
    r->timed_images = r->images - timed_from;
    r->timed_bytes = r->bytes - r->timed_bytes;
    rf_stats_init(&r->st);
    rf_loader_stats(ld, &r->st);
    epoch_hit_ratios(o, r);
    return 0;
}

/* --evict: ask the kernel to drop the shards' cached pages (clean pages go; no root needed,
 * unlike drop_caches), so the run starts from a cold cache. */
static int evict(const opts *o)
{
    rf_paths *p;
    char err[512];
    int rc = rf_paths_expand(o->shards, o->nshards, &p, err, sizeof err);
    if (rc)
        return fprintf(stderr, "ringfeed-bench: --evict: %s\n", err), rc;
    for (uint32_t i = 0; i < rf_paths_count(p); i++) {
        int fd = open(rf_paths_get(p, i), O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            fdatasync(fd);
            posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
            close(fd);
        }
    }
    rf_paths_free(p);
    return 0;
}

/* Time to the first batch: fresh, and resumed at `at` of the first epoch. The position is
 * reached by consuming batches first (not timed); the resume itself must not replay them. */
static int time_resume(const opts *o, const rf_config *base, result *r)
{
    rf_config c = *base;
    c.epochs = 0;
    char err[512];
    rf_loader *ld;
    rf_batch *b;
    double t0 = now_s();
    int rc = rf_loader_create(&c, &ld, err, sizeof err);
    if (rc || (rc = rf_loader_next(ld, &b)) < 0)
        return fprintf(stderr, "ringfeed-bench: resume: %s\n", rc ? err : ""), 1;
    r->fresh_ms = (now_s() - t0) * 1e3;
    uint64_t k = (uint64_t)(o->resume_at * rf_loader_batches_per_epoch(ld));
    rf_loader_release(ld, b, NULL);
    for (uint64_t i = 1; i < k && rf_loader_next(ld, &b) == 0; i++)
        rf_loader_release(ld, b, NULL);
    uint8_t blob[256];
    uint64_t len = 0;
    rf_loader_state(ld, blob, sizeof blob, &len);
    rf_loader_destroy(ld);
    c.resume_state = blob;
    c.resume_state_bytes = len;
    t0 = now_s();
    if ((rc = rf_loader_create(&c, &ld, err, sizeof err)) || (rc = rf_loader_next(ld, &b)) < 0)
        return fprintf(stderr, "ringfeed-bench: resume: %s\n", rc ? err : ""), 1;
    r->resume_ms = (now_s() - t0) * 1e3;
    r->resume_batch = b->positions[0]; /* epoch-order position where the resumed run starts */
    rf_loader_destroy(ld);
    return 0;
}

int main(int argc, char **argv)
{
    opts o;
    if (parse_args(argc, argv, &o))
        return 2;
    rf_config cfg = o.cfg;
    if (o.evict && evict(&o))
        return 1;
    result r;
    memset(&r, 0, sizeof r);
    if (o.resume_at > 0 && time_resume(&o, &cfg, &r))
        return 1;
    rf_loader *ld;
    char err[512];
    double tc = now_s();
    int rc = rf_loader_create(&cfg, &ld, err, sizeof err);
    r.create_ms = (now_s() - tc) * 1e3;
    if (rc) {
        fprintf(stderr, "ringfeed-bench: %s: %s\n", rf_strerror(rc), err);
        return 1;
    }
    rc = o.show_config ? print_config(ld) : 0;
    if (!rc)
        rc = run(&o, ld, &r);
    rf_loader_destroy(ld);
    if (!rc) {
        print_table(&o, &r);
        if (o.json)
            print_json(&o, &r);
    }
    free(r.ep);
    return rc ? 1 : 0;
}