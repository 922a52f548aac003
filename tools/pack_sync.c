/* pack_sync.c — pack_sync.h's pool: shards queue up, threads take them one at a time and
 * write each one's sidecar with rf_shard_write_sync_index (which keeps the unchanged entries
 * of a sidecar already there). */
#include "pack_sync.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct pack_sync {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char **queue;
    uint64_t n, cap, next;
    int closed, quiet;
    pthread_t *th;
    uint32_t nth;
    pack_sync_totals t;
};

static void *worker(void *arg)
{
    pack_sync *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (s->next == s->n && !s->closed)
            pthread_cond_wait(&s->cv, &s->mu);
        if (s->next == s->n)
            break;
        char *shard = s->queue[s->next++];
        pthread_mutex_unlock(&s->mu);
        rf_sync_summary sum;
        char err[600];
        rf_sync_summary_init(&sum);
        int rc = rf_shard_write_sync_index(shard, NULL, &sum, err, sizeof err);
        if (rc)
            fprintf(stderr, "ringfeed-pack: %s: sync-point index not written: %s\n", shard, err);
        else if (!s->quiet)
            fprintf(stderr, "ringfeed-pack: %s: %" PRIu64 " of %" PRIu64 " JPEGs given sync "
                    "points, the sidecar %.2f%% of the shard\n", shard, sum.indexed, sum.jpegs,
                    sum.shard_bytes ? 100.0 * (double)sum.index_bytes / (double)sum.shard_bytes
                                    : 0.0);
        pthread_mutex_lock(&s->mu);
        s->t.shards++;
        s->t.failed += rc != 0;
        if (rc == 0)
            rf_sync_summary_add(&s->t.sum, &sum);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

pack_sync *pack_sync_start(uint32_t threads, int quiet)
{
    pack_sync *s = calloc(1, sizeof *s);
    if (!s || !(s->th = calloc(threads, sizeof *s->th))) {
        free(s);
        return NULL;
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->quiet = quiet;
    rf_sync_summary_init(&s->t.sum);
    for (; s->nth < threads; s->nth++)
        if (pthread_create(&s->th[s->nth], NULL, worker, s) != 0)
            break;
    return s;
}

int pack_sync_add(pack_sync *s, const char *shard)
{
    char *copy = strdup(shard);
    pthread_mutex_lock(&s->mu);
    if (copy && s->n == s->cap) {
        uint64_t cap = s->cap ? 2 * s->cap : 64;
        char **q = realloc(s->queue, cap * sizeof *q);
        if (q)
            s->queue = q, s->cap = cap;
    }
    int ok = copy && s->n < s->cap;
    if (ok) {
        s->queue[s->n++] = copy;
        pthread_cond_signal(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    if (!ok)
        free(copy);
    return ok ? 0 : -1;
}

uint64_t pack_sync_finish(pack_sync *s, pack_sync_totals *t)
{
    pthread_mutex_lock(&s->mu);
    s->closed = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    for (uint32_t i = 0; i < s->nth; i++)
        pthread_join(s->th[i], NULL);
    if (!s->nth) /* no thread could start: do the work here */
        worker(s);
    *t = s->t;
    for (uint64_t i = 0; i < s->n; i++)
        free(s->queue[i]);
    free(s->queue);
    free(s->th);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    uint64_t failed = t->failed;
    free(s);
    return failed;
}

void pack_sync_print(const pack_sync_totals *t, double seconds, int json)
{
    const rf_sync_summary *m = &t->sum;
    double build_s = (double)m->build_ns / 1e9;
    double pct = m->shard_bytes ? 100.0 * (double)m->index_bytes / (double)m->shard_bytes : 0;
    uint64_t built = m->jpegs - m->reused;
    if (json) {
        printf("{\"shards\": %" PRIu64 ", \"failed\": %" PRIu64 ", \"jpegs\": %" PRIu64
               ", \"indexed\": %" PRIu64 ", \"needs_none\": %" PRIu64 ", \"unsupported\": %"
               PRIu64 ", \"unreadable\": %" PRIu64 ", \"reused\": %" PRIu64 ", \"rebuilt_stale\": %"
               PRIu64 ", \"index_bytes\": %" PRIu64 ", \"shard_bytes\": %" PRIu64
               ", \"index_percent\": %.3f, \"seconds\": %.4f, \"build_seconds\": %.4f, "
               "\"built_per_thread_s\": %.1f}", t->shards, t->failed, m->jpegs, m->indexed,
               m->needs_none, m->unsupported, m->unreadable, m->reused, m->stale, m->index_bytes,
               m->shard_bytes, pct, seconds, build_s, build_s > 0 ? (double)built / build_s : 0);
        return;
    }
    fprintf(stderr, "ringfeed-pack: sync-point indexes: %" PRIu64 " shards (%" PRIu64 " failed), "
            "%" PRIu64 " JPEGs: %" PRIu64 " indexed, %" PRIu64 " need none, %" PRIu64
            " unsupported, %" PRIu64 " unreadable; %" PRIu64 " kept from an index there before, %"
            PRIu64 " stale ones rebuilt; the sidecars %.2f%% of the shards; %.2f s (%.0f images/s "
            "per thread building)\n", t->shards, t->failed, m->jpegs, m->indexed, m->needs_none,
            m->unsupported, m->unreadable, m->reused, m->stale, pct, seconds,
            build_s > 0 ? (double)built / build_s : 0);
}

int pack_sync_only(const char *const *patterns, uint32_t n, uint32_t threads, int quiet,
                   int json)
{
    rf_paths *paths;
    char err[600];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (rf_paths_expand(patterns, n, &paths, err, sizeof err)) {
        fprintf(stderr, "ringfeed-pack: %s\n", err);
        return 2;
    }
    pack_sync *s = pack_sync_start(threads, quiet);
    pack_sync_totals t = {0};
    int rc = s ? 0 : 1;
    for (uint32_t i = 0; s && i < rf_paths_count(paths); i++)
        if (pack_sync_add(s, rf_paths_get(paths, i)))
            rc = 1;
    if (s && pack_sync_finish(s, &t))
        rc = 1;
    rf_paths_free(paths);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double sec = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    if (!quiet)
        pack_sync_print(&t, sec, 0);
    if (json) {
        printf("{\"ok\": %s, \"sync\": ", rc ? "false" : "true");
        pack_sync_print(&t, sec, 1);
        printf("}\n");
    }
    return rc;
}
