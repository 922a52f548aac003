/* test_faults.c — the error policy under bad input and I/O faults: a corrupt-data corpus
 * (bad tar headers, truncated members, not-JPEG payloads, corrupt JPEG headers, huge
 * dimensions, bad labels) and injected read faults, run in fail and skip modes with exact
 * counts; determinism and equal batch counts across ranks in skip mode; the consecutive-skip
 * limit; a shard truncated during the epoch; non-regular tar members; files that are not regular
 * files (a FIFO, a directory, a device) refused at once; destroy mid-flight. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loaders/dataset.h"
#include "ringfeed_shards.h"
#include "synth.h"
#include "ringfeed.h"
#include "loaders/tar.h"
#include "pipeline/testing.h"
#include "testutil.h"

#define NSH 2
#define NPER 40
#define NS (NSH * NPER)
#define SIZE 24
#define EPOCHS_SEEN 4

static char *g_clean;
static rf_dataset g_ds; /* the clean shards' sample table: offsets of everything */

static void make_clean(void)
{
    if (g_clean)
        return;
    g_clean = rf_test_mkdtemp("faults");
    ck_assert_int_eq(rf_test_make_shards(g_clean, NSH, NPER, 10, 77, 1, 64), 0);
    char *paths[NSH];
    for (int i = 0; i < NSH; i++) {
        paths[i] = malloc(600);
        snprintf(paths[i], 600, "%s/shard-%04d.tar", g_clean, i);
    }
    rf_err e = {0};
    ck_assert_msg(rf_format_tar.open(&g_ds, paths, NSH, 0, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(g_ds.nsamples, NS);
    for (int i = 0; i < NSH; i++)
        free(paths[i]);
}

/* ---- corrupting copies ------------------------------------------------------------------- */

enum corrupt { C_NOT_JPEG, C_CORRUPT, C_TOO_LARGE, C_TAR_HEADER, C_TRUNCATED, C_LABEL, C_N };
static const int reason_of[C_N] = {RF_SKIP_NOT_JPEG, RF_SKIP_CORRUPT, RF_SKIP_TOO_LARGE,
                                   RF_SKIP_TAR_HEADER, RF_SKIP_TRUNCATED, RF_SKIP_LABEL};
/* Samples of shard 0 to corrupt: none of them is one the index check reads (0,5,11,16,22,...). */
static const uint32_t victim[C_N] = {2, 3, 7, 9, 13, 18};

static void copy_file(const char *from, const char *to)
{
    size_t n;
    uint8_t *b = rf_test_read_file(from, &n);
    ck_assert_ptr_nonnull(b);
    FILE *f = fopen(to, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(b, 1, n, f), n);
    fclose(f);
    free(b);
}

static uint8_t *find_sof(uint8_t *j, uint32_t len)
{
    for (uint32_t i = 2; i + 9 < len; i++)
        if (j[i] == 0xFF && (j[i + 1] == 0xC0 || j[i + 1] == 0xC1 || j[i + 1] == 0xC2))
            return j + i;
    return NULL;
}

/* Apply corruption c to sample `id` of the tar image b (a whole shard in memory). */
static void corrupt(uint8_t *b, uint64_t id, int c)
{
    const rf_sample *s = &g_ds.samples[id];
    uint8_t *span = b + s->offset, *jpg = span + s->data_off;
    uint8_t *sof;
    switch (c) {
    case C_NOT_JPEG:
        memcpy(jpg, "GIF8", 4);
        break;
    case C_CORRUPT: /* height 0: libjpeg refuses the frame header */
        ck_assert_ptr_nonnull(sof = find_sof(jpg, s->data_len));
        sof[5] = sof[6] = 0;
        break;
    case C_TOO_LARGE: /* a 65000 x 65000 header in a tiny file */
        ck_assert_ptr_nonnull(sof = find_sof(jpg, s->data_len));
        sof[5] = sof[7] = 65000 >> 8;
        sof[6] = sof[8] = 65000 & 0xff;
        break;
    case C_TAR_HEADER: /* a flipped name byte: the checksum no longer matches */
        span[s->data_hdr + 3] ^= 0x5a;
        break;
    case C_TRUNCATED: { /* the size field claims more data than the sample span holds */
        uint8_t *h = span + s->data_hdr;
        snprintf((char *)h + 124, 12, "%011o", s->data_len + 100000);
        rf_test_tar_checksum(h);
        break;
    }
    case C_LABEL:
        ck_assert_uint_gt(s->label_len, 0);
        span[s->label_off] = 'x';
        break;
    }
}

/* A copy of the clean shards with corruption kinds `mask` applied to their victims. */
static char *make_corpus(unsigned mask, const char *tag)
{
    char *dir = rf_test_mkdtemp(tag);
    char from[600], to[600];
    for (int i = 0; i < NSH; i++) {
        snprintf(from, sizeof from, "%s/shard-%04d.idx", g_clean, i);
        snprintf(to, sizeof to, "%s/shard-%04d.idx", dir, i);
        copy_file(from, to);
        snprintf(from, sizeof from, "%s/shard-%04d.tar", g_clean, i);
        size_t n;
        uint8_t *b = rf_test_read_file(from, &n);
        ck_assert_ptr_nonnull(b);
        if (i == 0)
            for (int c = 0; c < C_N; c++)
                if (mask & (1u << c))
                    corrupt(b, victim[c], c);
        snprintf(to, sizeof to, "%s/shard-%04d.tar", dir, i);
        FILE *f = fopen(to, "wb");
        ck_assert_uint_eq(fwrite(b, 1, n, f), n);
        fclose(f);
        free(b);
    }
    return dir;
}

/* ---- running loaders --------------------------------------------------------------------- */

typedef struct run {
    int rc;                 /* 0: all epochs delivered; else the error */
    char msg[1024];
    uint64_t batches, samples, real, padding;
    uint64_t *ids;          /* NS * epochs entries, UINT64_MAX for blanks */
    int32_t *labels;
    uint64_t hash;          /* over ids, labels, padding flags and pixels in order */
    uint32_t seen[NS];      /* non-padding deliveries per sample id */
    rf_stats st;
    /* Per epoch (the first EPOCHS_SEEN): real samples delivered, the stats after its last
     * batch (before RF_EPOCH_END) and right after its RF_EPOCH_END. */
    uint32_t epochs_ended;
    uint64_t real_in[EPOCHS_SEEN];
    rf_stats last[EPOCHS_SEEN], ended[EPOCHS_SEEN];
} run;

typedef struct cfgx {
    uint32_t on_error, threads, io, batch, rank, world, order, max_consec, epochs, timeout_ms;
    uint32_t random_crop; /* RandomResizedCrop instead of the center crop */
    rf_fault_fn fault;
    void *fault_ctx;
    int (*backend)(void *ctx, int op, uint64_t seq); /* testing.h's backend hook */
    void *backend_ctx;
    const void *resume; /* rf_loader_state() blob, resume_len bytes */
    uint64_t resume_len;
    uint32_t label_source; /* enum rf_label_source */
    const char *label_json_path;
    uint32_t num_classes;
} cfgx;

/* The loader x describes, over dir's shards. */
static rf_loader *create_loader(const char *dir, const cfgx *x)
{
    char pat[600];
    snprintf(pat, sizeof pat, "%s/shard-*.tar", dir);
    const char *pats[1];
    rf_config c = rf_test_host_config(pats, pat, SIZE);
    c.seed = 5;
    c.crop = x->random_crop ? RF_CROP_RANDOM : RF_CROP_CENTER;
    c.batch_size = x->batch ? x->batch : 8;
    c.decode_threads = x->threads ? x->threads : 2;
    c.io_engine = x->io;
    c.on_error = x->on_error;
    c.rank = x->rank;
    c.world_size = x->world ? x->world : 1;
    c.order = x->order;
    c.max_consecutive_skips = x->max_consec;
    c.epochs = x->epochs ? x->epochs : 1;
    c.resume_state = x->resume;
    c.resume_state_bytes = x->resume_len;
    c.next_timeout_ms = x->timeout_ms;
    c.label_source = x->label_source;
    c.label_json_path = x->label_json_path;
    c.num_classes = x->num_classes;
    rf_loader *ld = NULL;
    char err[512] = "";
    rf_test_hooks hooks = {.io = x->fault, .io_ctx = x->fault_ctx, .backend = x->backend,
                           .backend_ctx = x->backend_ctx};
    int rc = rf_loader_create_hooked(&c, &hooks, &ld, err, sizeof err);
    ck_assert_msg(rc == 0, "create: %d %s", rc, err);
    return ld;
}

static void run_loader(const char *dir, const cfgx *x, run *r)
{
    memset(r, 0, sizeof *r);
    rf_loader *ld = create_loader(dir, x);
    uint32_t epochs = x->epochs ? x->epochs : 1;
    r->ids = calloc((size_t)NS * epochs * 2, sizeof *r->ids);
    r->labels = calloc((size_t)NS * epochs * 2, sizeof *r->labels);
    int rc;
    uint64_t h = 1469598103934665603ull;
    for (;;) {
        rf_batch *b;
        rc = rf_loader_next(ld, &b);
        uint32_t e = r->epochs_ended;
        if (rc == RF_EPOCH_END) {
            if (e < EPOCHS_SEEN)
                rf_stats_init(&r->ended[e]), rf_loader_stats(ld, &r->ended[e]);
            r->epochs_ended++;
            continue;
        }
        if (rc == RF_DONE) {
            rc = 0;
            break;
        }
        if (rc) {
            snprintf(r->msg, sizeof r->msg, "%s", rf_last_error(ld));
            break;
        }
        r->batches++;
        for (uint32_t i = 0; i < b->count; i++) {
            r->ids[r->samples] = b->sample_ids[i];
            r->labels[r->samples] = b->labels[i];
            r->samples++;
            if (b->is_padding[i]) {
                r->padding++;
            } else {
                ck_assert_uint_lt(b->sample_ids[i], NS);
                r->seen[b->sample_ids[i]]++;
                r->real++;
                r->real_in[RF_MIN(e, EPOCHS_SEEN - 1)]++;
            }
            h = (h ^ b->sample_ids[i] ^ ((uint64_t)(uint32_t)b->labels[i] << 20) ^
                 ((uint64_t)b->is_padding[i] << 40)) * 1099511628211ull;
        }
        const uint8_t *px = b->data;
        for (uint64_t k = 0; k < b->data_bytes; k++)
            h = (h ^ px[k]) * 1099511628211ull;
        if (e < EPOCHS_SEEN)
            rf_stats_init(&r->last[e]), rf_loader_stats(ld, &r->last[e]);
        ck_assert_int_eq(rf_loader_release(ld, b, NULL), 0);
    }
    r->rc = rc;
    rf_stats_init(&r->st);
    rf_loader_stats(ld, &r->st);
    r->hash = h;
    rf_loader_destroy(ld);
}

static void run_free(run *r)
{
    free(r->ids);
    free(r->labels);
}

static uint64_t key_of(uint32_t sh, uint32_t i) { return (uint64_t)sh * NPER + i; }

/* ---- fail mode: every kind stops the loader with shard, member and offset ------------------ */

START_TEST(fail_mode_names_shard_member_offset)
{
    static const int codes[C_N] = {RF_EDECODE, RF_EDECODE, RF_ELIMIT, RF_EFORMAT, RF_EFORMAT,
                                   RF_ELABEL};
    int c = _i;
    char *dir = make_corpus(1u << c, "failc");
    run r;
    cfgx x = {.on_error = RF_ON_ERROR_FAIL, .io = RF_IO_PREAD};
    run_loader(dir, &x, &r);
    ck_assert_msg(r.rc == codes[c], "kind %d: rc %d (%s)", c, r.rc, r.msg);
    char key[32];
    snprintf(key, sizeof key, "%08llu", (unsigned long long)key_of(0, victim[c]));
    ck_assert_msg(strstr(r.msg, "shard-0000.tar") && strstr(r.msg, key) &&
                      strstr(r.msg, "offset"),
                  "kind %d: message lacks shard/member/offset: %s", c, r.msg);
    run_free(&r);
    free(dir);
}
END_TEST

/* ---- skip mode: exact counts, full batches, determinism ------------------------------------ */

static void check_skip_accounting(const run *r, uint64_t expect_skipped, unsigned mask)
{
    ck_assert_msg(r->rc == 0, "skip run failed: %d %s", r->rc, r->msg);
    ck_assert_uint_eq(r->st.skipped, expect_skipped);
    ck_assert_uint_eq(r->real + r->st.skipped, NS);
    ck_assert_uint_eq(r->batches, NS / 8);
    ck_assert_uint_eq(r->samples, NS); /* batches stay full: 10 x 8 */
    for (int c = 0; c < C_N; c++)
        if (mask & (1u << c))
            ck_assert_uint_eq(r->seen[key_of(0, victim[c])], 0);
    for (uint32_t i = 0; i < NS; i++)
        ck_assert_uint_le(r->seen[i], 1);
}

START_TEST(skip_mode_counts_each_reason)
{
    int c = _i;
    char *dir = make_corpus(1u << c, "skipc");
    run r;
    cfgx x = {.on_error = RF_ON_ERROR_SKIP, .io = RF_IO_PREAD};
    run_loader(dir, &x, &r);
    check_skip_accounting(&r, 1, 1u << c);
    ck_assert_uint_eq(r.st.skipped_by_reason[reason_of[c]], 1);
    run_free(&r);
    free(dir);
}
END_TEST

/* The skip reason of a tar error is what the parser found, not a word in its message: a
 * member renamed inside a sample's span (the shard rewritten after it was indexed) to a name
 * holding "truncated" is a bad header, and a member cut short is truncated whatever it is
 * called (skip_mode_counts_each_reason). The loader used to search the message for
 * "truncated", and counted this sample as truncated. */
START_TEST(skip_reason_is_the_parsers_not_a_word_in_the_message)
{
    char *dir = make_corpus(0, "rename");
    char path[600];
    snprintf(path, sizeof path, "%s/shard-0000.tar", dir);
    size_t n;
    uint8_t *b = rf_test_read_file(path, &n);
    ck_assert_ptr_nonnull(b);
    uint64_t id = victim[C_TAR_HEADER]; /* a sample the index check does not read */
    const rf_sample *sm = &g_ds.samples[id];
    uint8_t *h = b + sm->offset + sm->data_hdr;
    memset(h, 0, 100); /* the ustar name field */
    memcpy(h, "truncated.jpg", 13);
    rf_test_tar_checksum(h);
    rf_test_write_file(path, b, n);
    free(b);
    run r;
    cfgx x = {.on_error = RF_ON_ERROR_SKIP, .io = RF_IO_PREAD};
    run_loader(dir, &x, &r);
    check_skip_accounting(&r, 1, 0);
    ck_assert_uint_eq(r.seen[id], 0);
    ck_assert_uint_eq(r.st.skipped_by_reason[RF_SKIP_TAR_HEADER], 1);
    ck_assert_uint_eq(r.st.skipped_by_reason[RF_SKIP_TRUNCATED], 0);
    run_free(&r);
    x.on_error = RF_ON_ERROR_FAIL;
    run_loader(dir, &x, &r);
    char want[160];
    snprintf(want, sizeof want, "shard-0000.tar: sample %08llu at offset %llu: member "
             "truncated.jpg at span offset %u does not belong to sample %08llu",
             (unsigned long long)id, (unsigned long long)sm->offset, sm->data_hdr,
             (unsigned long long)id);
    ck_assert_int_eq(r.rc, RF_EFORMAT);
    ck_assert_msg(strstr(r.msg, want), "%s\nlacks %s", r.msg, want);
    run_free(&r);
    free(dir);
}
END_TEST

/* Requests are told apart by (offset, length): the first sample at or after `from` whose pair
 * no other sample shares (shards written by the same generator repeat offsets). */
static uint64_t pick(uint64_t from)
{
    for (uint64_t id = from; id < NS; id++) {
        int dup = 0;
        for (uint64_t k = 0; k < NS && !dup; k++)
            dup = k != id && g_ds.samples[k].offset == g_ds.samples[id].offset &&
                  g_ds.samples[k].length == g_ds.samples[id].length;
        if (!dup)
            return id;
    }
    ck_abort_msg("no sample with a unique span from %llu", (unsigned long long)from);
    return 0;
}

static int is_sample(const rf_io_req *q, uint64_t id)
{
    return q->offset == g_ds.samples[id].offset && q->len == g_ds.samples[id].length;
}

/* -EIO on every attempt at the samples g_eio_id[0..g_neio). */
static uint64_t g_eio_id[4];
static int g_neio;
static int eio_fault(void *ctx, const rf_io_req *q, int res)
{
    for (int i = 0; i < g_neio; i++)
        if (is_sample(q, g_eio_id[i]))
            return -EIO;
    return res;
}

START_TEST(skip_mode_whole_corpus_exact_and_deterministic)
{
    char *dir = make_corpus((1u << C_N) - 1, "corpus");
    uint64_t io_victim = pick(key_of(1, 20)); /* plus an I/O error in shard 1 */
    g_eio_id[0] = io_victim;
    g_neio = 1;
    run a, b, u;
    cfgx x = {.on_error = RF_ON_ERROR_SKIP, .io = RF_IO_PREAD, .threads = 1,
              .fault = eio_fault};
    run_loader(dir, &x, &a);
    check_skip_accounting(&a, C_N + 1, (1u << C_N) - 1);
    for (int c = 0; c < C_N; c++)
        ck_assert_uint_eq(a.st.skipped_by_reason[reason_of[c]], 1);
    ck_assert_uint_eq(a.st.skipped_by_reason[RF_SKIP_IO], 1);
    ck_assert_uint_eq(a.seen[io_victim], 0);
    ck_assert_uint_eq(a.padding, C_N + 1); /* the cursors met: blanks at the end */
    x.threads = 4;
    x.io = RF_IO_AUTO;
    run_loader(dir, &x, &b);
    ck_assert_uint_eq(a.hash, b.hash);
    x.threads = 3;
    x.io = RF_IO_URING;
    char why[160];
    const rf_io_ops *ops;
    if (rf_io_select(RF_IO_URING, &ops, why, sizeof why) == 0) {
        run_loader(dir, &x, &u);
        ck_assert_uint_eq(a.hash, u.hash);
        run_free(&u);
    }
    /* Blanks are flagged padding with label -1. */
    for (uint64_t k = 0; k < a.samples; k++)
        if (a.ids[k] == UINT64_MAX)
            ck_assert_int_eq(a.labels[k], -1);
    run_free(&a);
    run_free(&b);
    free(dir);
}
END_TEST

START_TEST(skip_mode_clean_equals_fail_mode)
{
    run a, b;
    cfgx x = {.on_error = RF_ON_ERROR_FAIL, .threads = 3, .epochs = 2};
    run_loader(g_clean, &x, &a);
    x.on_error = RF_ON_ERROR_SKIP;
    run_loader(g_clean, &x, &b);
    ck_assert_int_eq(a.rc, 0);
    ck_assert_int_eq(b.rc, 0);
    ck_assert_uint_eq(b.st.skipped, 0);
    ck_assert_uint_eq(a.hash, b.hash);
    run_free(&a);
    run_free(&b);
}
END_TEST

/* Per-epoch counts (rf_stats.counted_epoch, epoch_*), over three shuffled epochs of the whole
 * bad corpus: at each RF_EPOCH_END exactly that epoch's own (C_N skips, one per reason, its
 * delivered samples, delivered + skipped == total, final), whatever the next epoch's
 * prefetched batches already skipped (`skipped` counts those as they fail); after the last
 * batch but before the end the same counts, not final yet. */
START_TEST(skip_mode_counts_per_epoch)
{
    char *dir = make_corpus((1u << C_N) - 1, "perepoch");
    run r;
    cfgx x = {.on_error = RF_ON_ERROR_SKIP, .epochs = 3, .threads = 3};
    run_loader(dir, &x, &r);
    ck_assert_msg(r.rc == 0, "%s", r.msg);
    ck_assert_uint_eq(r.epochs_ended, 3);
    for (uint32_t e = 0; e < 3; e++) {
        const rf_stats *end = &r.ended[e], *last = &r.last[e];
        ck_assert_uint_eq(end->counted_epoch, e);
        ck_assert_uint_eq(end->epoch_final, 1);
        ck_assert_uint_eq(end->epoch_skipped, C_N);
        for (int c = 0; c < C_N; c++)
            ck_assert_uint_eq(end->epoch_skipped_by_reason[reason_of[c]], 1);
        ck_assert_uint_eq(end->epoch_delivered, r.real_in[e]);
        ck_assert_uint_eq(end->epoch_total, NS);
        ck_assert_uint_eq(end->epoch_delivered + end->epoch_skipped, end->epoch_total);
        ck_assert_uint_ge(end->skipped, (e + 1) * C_N);
        ck_assert_uint_eq(last->counted_epoch, e);
        ck_assert_uint_eq(last->epoch_final, 0);
        ck_assert_uint_eq(last->epoch_delivered, end->epoch_delivered);
        ck_assert_uint_eq(last->epoch_skipped, C_N);
    }
    ck_assert_uint_eq(r.st.skipped, 3 * C_N);
    run_free(&r);

    /* Fail mode over a rank with padding: 80 samples over 3 ranks, rank 2 has 26 and one
     * repeated sample; the counts leave the repeat out. */
    cfgx f = {.on_error = RF_ON_ERROR_FAIL, .rank = 2, .world = 3, .epochs = 2};
    run_loader(g_clean, &f, &r);
    ck_assert_msg(r.rc == 0, "%s", r.msg);
    for (uint32_t e = 0; e < 2; e++) {
        ck_assert_uint_eq(r.ended[e].counted_epoch, e);
        ck_assert_uint_eq(r.ended[e].epoch_delivered, 26);
        ck_assert_uint_eq(r.ended[e].epoch_total, 26);
        ck_assert_uint_eq(r.ended[e].epoch_skipped, 0);
        ck_assert_uint_eq(r.ended[e].epoch_final, 1);
    }
    ck_assert_uint_eq(r.padding, 2);
    run_free(&r);
    free(dir);
}
END_TEST

START_TEST(skip_mode_ranks_equal_batches)
{
    char *dir = make_corpus((1u << C_N) - 1, "ranks");
    uint32_t world = 3, seen[NS] = {0};
    uint64_t batches[3], skipped = 0, real = 0;
    for (uint32_t rk = 0; rk < world; rk++) {
        run r;
        cfgx x = {.on_error = RF_ON_ERROR_SKIP, .rank = rk, .world = world, .batch = 4,
                  .threads = 1 + rk};
        run_loader(dir, &x, &r);
        ck_assert_msg(r.rc == 0, "rank %u: %s", rk, r.msg);
        batches[rk] = r.batches;
        skipped += r.st.skipped;
        real += r.real;
        for (uint32_t i = 0; i < NS; i++)
            seen[i] += r.seen[i];
        /* per rank: delivered + skipped == the rank's share */
        uint64_t share = (NS - rk + world - 1) / world;
        ck_assert_uint_eq(r.real + r.st.skipped, share);
        run_free(&r);
    }
    ck_assert_uint_eq(batches[0], batches[1]);
    ck_assert_uint_eq(batches[1], batches[2]);
    ck_assert_uint_eq(skipped, C_N);
    ck_assert_uint_eq(real + skipped, NS);
    for (uint32_t i = 0; i < NS; i++) {
        int bad = 0;
        for (int c = 0; c < C_N; c++)
            bad |= i == key_of(0, victim[c]);
        ck_assert_uint_eq(seen[i], bad ? 0 : 1);
    }
    free(dir);
}
END_TEST

/* ---- the consecutive-skip limit ---------------------------------------------------------- */

static int all_eio(void *ctx, const rf_io_req *q, int res) { return -EIO; }

START_TEST(broken_dataset_is_an_error_not_an_empty_epoch)
{
    run r;
    cfgx x = {.on_error = RF_ON_ERROR_SKIP, .max_consec = 5, .fault = all_eio};
    run_loader(g_clean, &x, &r);
    ck_assert_int_eq(r.rc, RF_EIO);
    ck_assert_msg(strstr(r.msg, "6 consecutive samples failed; last:") &&
                      strstr(r.msg, "offset"), "%s", r.msg);
    run_free(&r);
    /* a few failures in a row below the limit are fine */
    uint64_t first = 10;
    while (pick(first) != first || pick(first + 1) != first + 1 || pick(first + 2) != first + 2)
        first++;
    for (int i = 0; i < 3; i++)
        g_eio_id[i] = first + (uint64_t)i;
    g_neio = 3;
    cfgx y = {.on_error = RF_ON_ERROR_SKIP, .max_consec = 3, .order = RF_ORDER_NONE,
              .fault = eio_fault};
    run_loader(g_clean, &y, &r);
    ck_assert_msg(r.rc == 0, "%s", r.msg);
    ck_assert_uint_eq(r.st.skipped_by_reason[RF_SKIP_IO], 3);
    run_free(&r);
    y.max_consec = 2;
    run_loader(g_clean, &y, &r);
    ck_assert_int_eq(r.rc, RF_EIO);
    run_free(&r);
}
END_TEST

/* ---- injected faults: transient ones are retried with identical output ------------------- */

typedef struct flaky {
    int kind; /* 0 short reads, 1 EAGAIN, 2 EINTR, 3 mixed */
    _Atomic uint64_t hits;
} flaky;

static int flaky_fault(void *ctx, const rf_io_req *q, int res)
{
    flaky *f = ctx;
    if (q->retries > 0 || res <= 1)
        return res;
    int kind = f->kind == 3 ? (int)((q->offset / 512 + q->done) % 3) : f->kind;
    if (kind == 0 && q->done == 0) { /* the first attempt delivers half */
        atomic_fetch_add(&f->hits, 1);
        return res / 2;
    }
    if (kind == 1 || kind == 2) {
        atomic_fetch_add(&f->hits, 1);
        return kind == 1 ? -EAGAIN : -EINTR;
    }
    return res;
}

START_TEST(transient_faults_retried_identical_output)
{
    uint32_t io = (_i & 1) ? RF_IO_URING : RF_IO_PREAD;
    if (io == RF_IO_URING) {
        char why[160];
        const rf_io_ops *ops;
        if (rf_io_select(RF_IO_URING, &ops, why, sizeof why) != 0)
            return; /* io_uring refused here; the pread half still runs */
    }
    run clean, r;
    cfgx x = {.on_error = RF_ON_ERROR_FAIL, .io = io, .threads = 2};
    run_loader(g_clean, &x, &clean);
    flaky f = {.kind = _i / 2};
    x.fault = flaky_fault;
    x.fault_ctx = &f;
    run_loader(g_clean, &x, &r);
    ck_assert_msg(r.rc == 0, "%s", r.msg);
    ck_assert_uint_eq(clean.hash, r.hash);
    ck_assert_uint_gt(atomic_load(&f.hits), 0);
    ck_assert_uint_gt(r.st.read_retries, 0);
    run_free(&clean);
    run_free(&r);
}
END_TEST

/* res == 0 (end of file) and persistent -EIO on chosen samples, under both engines. */
static uint64_t g_zero_id = UINT64_MAX;
static int zero_fault(void *ctx, const rf_io_req *q, int res)
{
    if (g_zero_id != UINT64_MAX && is_sample(q, g_zero_id))
        return q->done ? 0 : res / 2; /* a short read, then end of file */
    return eio_fault(ctx, q, res);
}

START_TEST(persistent_faults_follow_policy)
{
    uint32_t io = _i ? RF_IO_URING : RF_IO_PREAD;
    if (io == RF_IO_URING) {
        char why[160];
        const rf_io_ops *ops;
        if (rf_io_select(RF_IO_URING, &ops, why, sizeof why) != 0)
            return;
    }
    g_eio_id[0] = pick(key_of(1, 3));
    g_neio = 1;
    g_zero_id = pick(key_of(0, 30));
    run r;
    cfgx x = {.on_error = RF_ON_ERROR_SKIP, .io = io, .fault = zero_fault};
    run_loader(g_clean, &x, &r);
    check_skip_accounting(&r, 2, 0);
    ck_assert_uint_eq(r.st.skipped_by_reason[RF_SKIP_IO], 1);
    ck_assert_uint_eq(r.st.skipped_by_reason[RF_SKIP_TRUNCATED], 1);
    run_free(&r);
    /* fail mode: the error names the file and the offset */
    g_zero_id = UINT64_MAX;
    x.on_error = RF_ON_ERROR_FAIL;
    run_loader(g_clean, &x, &r);
    ck_assert_int_eq(r.rc, RF_EIO);
    char off[32];
    snprintf(off, sizeof off, "offset %llu", (unsigned long long)g_ds.samples[g_eio_id[0]].offset);
    ck_assert_msg(strstr(r.msg, g_eio_id[0] < NPER ? "shard-0000.tar" : "shard-0001.tar") &&
                      strstr(r.msg, off), "%s", r.msg);
    run_free(&r);
}
END_TEST

/* ---- a shard truncated during the epoch --------------------------------------------------- */

START_TEST(shard_truncated_during_epoch)
{
    for (int skip = 0; skip < 2; skip++) {
        char *dir = make_corpus(0, "trunc");
        char pat[600], path[600];
        snprintf(pat, sizeof pat, "%s/shard-*.tar", dir);
        snprintf(path, sizeof path, "%s/shard-0001.tar", dir);
        const char *pats[1];
        rf_config c = rf_test_host_config(pats, pat, SIZE);
        c.order = RF_ORDER_NONE;
        c.batch_size = 4;
        c.prefetch_depth = 1;
        c.io_queue_depth = 1;
        c.io_threads = 1;
        c.staging_bytes = 1; /* the minimum: a few samples ahead */
        c.io_engine = RF_IO_PREAD;
        c.on_error = skip;
        c.epochs = 1;
        rf_loader *ld = NULL;
        char err[512];
        ck_assert_int_eq(rf_loader_create(&c, &ld, err, sizeof err), 0);
        rf_batch *b;
        ck_assert_int_eq(rf_loader_next(ld, &b), 0);
        ck_assert_int_eq(truncate(path, (off_t)g_ds.samples[key_of(1, 10)].offset), 0);
        ck_assert_int_eq(rf_loader_release(ld, b, NULL), 0);
        int rc;
        uint64_t real = 4;
        while ((rc = rf_loader_next(ld, &b)) == 0) {
            for (uint32_t i = 0; i < b->count; i++)
                real += !b->is_padding[i];
            rf_loader_release(ld, b, NULL);
        }
        if (skip) {
            ck_assert_int_eq(rc, RF_EPOCH_END);
            rf_stats st;
            rf_stats_init(&st);
            rf_loader_stats(ld, &st);
            ck_assert_uint_eq(st.skipped_by_reason[RF_SKIP_TRUNCATED], NPER - 10);
            ck_assert_uint_eq(real + st.skipped, NS);
        } else {
            ck_assert_int_eq(rc, RF_EFORMAT);
            ck_assert_msg(strstr(rf_last_error(ld), "changed during the epoch") &&
                              strstr(rf_last_error(ld), "shard-0001.tar"),
                          "%s", rf_last_error(ld));
        }
        rf_loader_destroy(ld);
        free(dir);
    }
}
END_TEST

/* ---- lifecycle: destroy with faults and replacements in flight --------------------------- */

static int random_eio(void *ctx, const rf_io_req *q, int res)
{
    return (q->offset / 512) % 7 == 3 ? -EIO : res;
}

START_TEST(destroy_mid_flight_with_faults)
{
    for (int k = 0; k < 6; k++) {
        cfgx x = {.on_error = (uint32_t)(k & 1), .io = k < 2 ? RF_IO_PREAD : RF_IO_AUTO,
                  .threads = 3, .batch = 4, .epochs = 0};
        char pat[600];
        snprintf(pat, sizeof pat, "%s/shard-*.tar", g_clean);
        const char *pats[1];
        rf_config c = rf_test_host_config(pats, pat, SIZE);
        c.batch_size = x.batch;
        c.decode_threads = x.threads;
        c.io_engine = x.io;
        c.on_error = x.on_error;
        rf_loader *ld = NULL;
        char err[512];
        ck_assert_int_eq(rf_loader_create_faulty(&c, random_eio, NULL, &ld, err, sizeof err), 0);
        rf_batch *b;
        for (int i = 0; i < k; i++) /* consumer stops after k batches, one still leased */
            if (rf_loader_next(ld, &b) != 0)
                break;
        rf_loader_destroy(ld);
    }
}
END_TEST

/* ---- resume in skip mode: exact when nothing was skipped before the checkpoint ------------ */

static rf_loader *make_resumable(const char *pat, const void *state, uint64_t len)
{
    const char *pats[1];
    rf_config c = rf_test_host_config(pats, pat, SIZE);
    c.batch_size = 8;
    c.seed = 11;
    c.epochs = 1;
    c.on_error = RF_ON_ERROR_SKIP;
    c.resume_state = state;
    c.resume_state_bytes = len;
    rf_loader *ld = NULL;
    char err[512];
    int rc = rf_loader_create_faulty(&c, eio_fault, NULL, &ld, err, sizeof err);
    ck_assert_msg(rc == 0, "%s", err);
    return ld;
}

START_TEST(skip_mode_resume_exact_without_earlier_skips)
{
    char pat[600];
    snprintf(pat, sizeof pat, "%s/shard-*.tar", g_clean);
    g_neio = 1;
    uint32_t seen[NS] = {0};
    rf_loader *ld = make_resumable(pat, NULL, 0);
    rf_batch *b;
    for (int k = 0; k < 2; k++) { /* two batches, then a checkpoint */
        ck_assert_int_eq(rf_loader_next(ld, &b), 0);
        for (uint32_t i = 0; i < b->count; i++)
            seen[b->sample_ids[i]]++;
        rf_loader_release(ld, b, NULL);
    }
    /* the failing sample: one not delivered yet */
    uint64_t victim_id = UINT64_MAX;
    for (uint64_t id = pick(0); id < NS; id = pick(id + 1))
        if (!seen[id]) {
            victim_id = id;
            break;
        }
    ck_assert_uint_ne(victim_id, UINT64_MAX);
    uint8_t blob[256];
    uint64_t len = 0;
    ck_assert_int_eq(rf_loader_state(ld, blob, sizeof blob, &len), 0);
    rf_loader_destroy(ld);
    g_eio_id[0] = victim_id;
    ld = make_resumable(pat, blob, len);
    int rc;
    while ((rc = rf_loader_next(ld, &b)) == 0) {
        for (uint32_t i = 0; i < b->count; i++)
            if (!b->is_padding[i])
                seen[b->sample_ids[i]]++;
        rf_loader_release(ld, b, NULL);
    }
    ck_assert_int_eq(rc, RF_EPOCH_END);
    rf_stats st;
    rf_stats_init(&st);
    rf_loader_stats(ld, &st);
    ck_assert_uint_eq(st.skipped, 1);
    /* the epoch's counts after a resume: the rest of it, 16 samples in */
    ck_assert_uint_eq(st.counted_epoch, 0);
    ck_assert_uint_eq(st.epoch_final, 1);
    ck_assert_uint_eq(st.epoch_total, NS - 16);
    ck_assert_uint_eq(st.epoch_skipped, 1);
    ck_assert_uint_eq(st.epoch_delivered, NS - 16 - 1);
    for (uint32_t i = 0; i < NS; i++)
        ck_assert_uint_eq(seen[i], i == victim_id ? 0 : 1);
    rf_loader_destroy(ld);
}
END_TEST

/* ---- limits and non-regular members ------------------------------------------------------ */

static void put_member(FILE *f, const char *name, char type, const uint8_t *data, size_t n,
                       const char *link)
{
    uint8_t h[512] = {0};
    snprintf((char *)h, 100, "%s", name);
    snprintf((char *)h + 100, 8, "%07o", 0644);
    snprintf((char *)h + 108, 8, "%07o", 0);
    snprintf((char *)h + 116, 8, "%07o", 0);
    snprintf((char *)h + 124, 12, "%011o", (unsigned)n);
    snprintf((char *)h + 136, 12, "%011o", 0);
    h[156] = (uint8_t)type;
    if (link)
        snprintf((char *)h + 157, 100, "%s", link);
    memcpy(h + 257, "ustar\0" "00", 8);
    rf_test_tar_checksum(h);
    fwrite(h, 1, 512, f);
    if (n) {
        fwrite(data, 1, n, f);
        static const uint8_t zero[512];
        fwrite(zero, 1, rf_tar_round_block(n) - n, f);
    }
}

START_TEST(nonregular_members_skipped_and_counted)
{
    char *dir = rf_test_mkdtemp("nonreg");
    char path[600], src[600];
    snprintf(path, sizeof path, "%s/odd.tar", dir);
    snprintf(src, sizeof src, "%s/shard-0000.tar", g_clean);
    size_t n;
    uint8_t *b = rf_test_read_file(src, &n);
    FILE *f = fopen(path, "wb");
    put_member(f, "dir/", '5', NULL, 0, NULL);
    for (int i = 0; i < 3; i++) {
        const rf_sample *s = &g_ds.samples[i];
        char name[64];
        snprintf(name, sizeof name, "k%d.jpg", i);
        put_member(f, name, '0', b + s->offset + s->data_off, s->data_len, NULL);
        snprintf(name, sizeof name, "k%d.cls", i);
        put_member(f, name, '0', (const uint8_t *)"3", 1, NULL);
        if (i == 0)
            put_member(f, "k0.lnk", '2', NULL, 0, "/etc/passwd");
        if (i == 1)
            put_member(f, "dev", '3', NULL, 0, NULL);
    }
    static const uint8_t zero[1024];
    fwrite(zero, 1, sizeof zero, f);
    fclose(f);
    free(b);
    const char *pats[1];
    rf_config c = rf_test_host_config(pats, path, SIZE);
    c.batch_size = 3;
    c.epochs = 1;
    rf_loader *ld = NULL;
    char err[512];
    ck_assert_msg(rf_loader_create(&c, &ld, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(rf_loader_num_samples(ld), 3);
    rf_batch *bt;
    ck_assert_int_eq(rf_loader_next(ld, &bt), 0);
    ck_assert_uint_eq(bt->count, 3);
    ck_assert_int_eq(bt->labels[0], 3);
    rf_stats st;
    rf_stats_init(&st);
    rf_loader_stats(ld, &st);
    ck_assert_uint_eq(st.nonregular_members, 3);
    rf_loader_destroy(ld);
    free(dir);
}
END_TEST

/* Files the user names that are not regular files are refused at once, with the path and what
 * the file is: a FIFO nobody writes to (opening it for reading would wait for ever), a
 * directory, a character device, as a shard, as the index beside a good shard, as a folder
 * source's image list and as a token file; inspection reports the same. This TCase's timeout
 * is what fails a call that blocks. */
static void create_refuses(const char *path, uint32_t source, int code, const char *kind,
                           const char *named)
{
    const char *pats[1];
    rf_config c = rf_test_host_config(pats, path, SIZE);
    c.source = source;
    if (source == RF_SOURCE_TOKENS)
        c.token_bytes = 2, c.seq_len = 16;
    rf_loader *ld = NULL;
    char err[512] = "";
    int rc = rf_loader_create(&c, &ld, err, sizeof err);
    ck_assert_msg(rc == code, "%s: rc %d, want %d (%s)", path, rc, code, err);
    ck_assert_ptr_null(ld);
    ck_assert_msg(strstr(err, named) && strstr(err, kind) && strstr(err, "not a regular file"),
                  "message \"%s\" lacks %s or \"%s\"", err, named, kind);
}

START_TEST(non_regular_files_refused_at_once)
{
    char *dir = rf_test_mkdtemp("fifo");
    char fifo[600], shard[600], idx[600], src[600];
    snprintf(fifo, sizeof fifo, "%s/pipe.tar", dir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    create_refuses(fifo, RF_SOURCE_TAR, RF_EFORMAT, "a FIFO", fifo);
    create_refuses(fifo, RF_SOURCE_FOLDER, RF_EFORMAT, "a FIFO", fifo);
    create_refuses(fifo, RF_SOURCE_TOKENS, RF_EFORMAT, "a FIFO", fifo);
    create_refuses(dir, RF_SOURCE_TAR, RF_EFORMAT, "a directory", dir);
    create_refuses("/dev/null", RF_SOURCE_TAR, RF_EFORMAT, "a character device", "/dev/null");
    /* a good shard whose index is a FIFO: refused, not scanned in silence */
    snprintf(src, sizeof src, "%s/shard-0000.tar", g_clean);
    snprintf(shard, sizeof shard, "%s/good.tar", dir);
    snprintf(idx, sizeof idx, "%s/good.idx", dir);
    copy_file(src, shard);
    ck_assert_int_eq(mkfifo(idx, 0600), 0);
    create_refuses(shard, RF_SOURCE_TAR, RF_EINDEX, "a FIFO", idx);
    /* inspection: the FIFO shard and the FIFO index are problems, reported at once */
    rf_inspect_summary s;
    rf_inspect_summary_init(&s);
    ck_assert_int_eq(rf_shard_inspect(fifo, NULL, NULL, NULL, NULL, &s), RF_EFORMAT);
    ck_assert_uint_eq(s.problems, 1);
    rf_inspect_summary_init(&s);
    ck_assert_int_eq(rf_shard_inspect(shard, NULL, NULL, NULL, NULL, &s), RF_EINDEX);
    ck_assert(s.has_index && !s.index_ok);
    free(dir);
}
END_TEST

START_TEST(config_limits_validated)
{
    char pat[600];
    snprintf(pat, sizeof pat, "%s/shard-*.tar", g_clean);
    const char *pats[1];
    rf_config c = rf_test_host_config(pats, pat, 0);
    rf_loader *ld = NULL;
    char err[512];
    c.on_error = 7;
    ck_assert_int_eq(rf_loader_create(&c, &ld, err, sizeof err), RF_EINVAL);
    c.on_error = RF_ON_ERROR_FAIL;
    c.label_source = RF_LABEL_JSON + 1;
    ck_assert_int_eq(rf_loader_create(&c, &ld, err, sizeof err), RF_EINVAL);
    ck_assert_msg(strstr(err, "label_source must be 0 (cls), 1 (none) or 2 (json), not 3"), "%s",
                  err);
    /* RF_LABEL_JSON needs a path of 1..16 non-empty keys */
    static const struct {
        const char *path, *want;
    } paths[] = {{NULL, "label_json_path must be 1..256 bytes"},
                 {"", "label_json_path must be 1..256 bytes"},
                 {"a..b", "label_json_path \"a..b\" has an empty key at byte 2"},
                 {".a", "has an empty key at byte 0"}, {"a.", "has an empty key at byte 2"},
                 {"a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q", "has more than 16 keys"}};
    c.label_source = RF_LABEL_JSON;
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        c.label_json_path = paths[i].path;
        ck_assert_int_eq(rf_loader_create(&c, &ld, err, sizeof err), RF_EINVAL);
        ck_assert_msg(strstr(err, paths[i].want), "%s", err);
    }
    c.label_json_path = NULL;
    c.label_source = RF_LABEL_CLS;
    c.on_error = RF_ON_ERROR_SKIP;
    c.max_name_bytes = RF_TAR_NAME_MAX + 1;
    ck_assert_int_eq(rf_loader_create(&c, &ld, err, sizeof err), RF_EINVAL);
    /* the limit applies to GNU long names and pax paths; these names are plain ustar */
    c.max_name_bytes = 4;
    ck_assert_int_eq(rf_loader_create(&c, &ld, err, sizeof err), 0);
    rf_loader_destroy(ld);
}
END_TEST

/* ---- a corpus of whole bad members, written with the shard writer ---------------------------
 * Members a tar-level edit cannot make: an empty .jpg, HTML served under .jpg, a JPEG cut to a
 * fifth of its bytes, an EOI marker inside the entropy data, and an oversized SOF, between good
 * samples. Center crops, so every kind is reached whatever the crop. E_SLOW (for the ordering
 * test below): a large noise JPEG cut short, tens of ms of entropy decoding before libjpeg
 * notices. */
enum edge { E_GOOD, E_EMPTY, E_HTML, E_CUT, E_MARKER, E_SOF, E_SLOW, E_NO_DQT, E_LATE_MARK };
static const int edge_kind[] = {E_GOOD, E_EMPTY, E_GOOD, E_HTML, E_CUT, E_GOOD,
                                E_MARKER, E_SOF, E_GOOD, E_GOOD, E_GOOD, E_GOOD,
                                E_GOOD, E_GOOD, E_GOOD, E_GOOD};
#define NEDGE (sizeof edge_kind / sizeof edge_kind[0])

enum { SLOW_SIDE = 1600 };

static uint8_t *slow_jpeg(size_t *len)
{
    uint8_t *rgb = malloc((size_t)SLOW_SIDE * SLOW_SIDE * 3), *jpg;
    uint64_t x = 88172645463325252ull; /* noise: the densest entropy data */
    for (size_t k = 0; k < (size_t)SLOW_SIDE * SLOW_SIDE * 3; k++)
        x ^= x << 13, x ^= x >> 7, x ^= x << 17, rgb[k] = (uint8_t)x;
    ck_assert_int_eq(rf_synth_jpeg(rgb, SLOW_SIDE, SLOW_SIDE, 95, 0, &jpg, len), 0);
    free(rgb);
    *len = *len * 9 / 10;
    return jpg;
}

/* E_LATE_MARK: an invalid marker (0xFF99) planted at 90% of the file, in the entropy-coded data
 * of the bottom rows, which most random crops never decode. */
static void plant_late_marker(uint8_t *j, size_t len)
{
    size_t p = len * 9 / 10;
    while (j[p - 1] == 0xFF || j[p] == 0xFF || j[p + 1] == 0xFF)
        p++;
    j[p] = 0xFF, j[p + 1] = 0x99;
}

/* One shard, shard-0000.tar, in a new directory `name`: sample i is of kinds[i]. */
static char *make_edge_corpus(const char *name, const int *kinds, uint32_t n)
{
    char *dir = rf_test_mkdtemp(name);
    char tar[600], idx[600], err[256];
    snprintf(tar, sizeof tar, "%s/shard-0000.tar", dir);
    snprintf(idx, sizeof idx, "%s/shard-0000.idx", dir);
    rf_shard_writer *w;
    ck_assert_int_eq(rf_shard_writer_open(tar, idx, RF_SHARD_PAX, &w, err, sizeof err), 0);
    uint8_t *rgb = malloc(96 * 80 * 3);
    for (uint32_t i = 0; i < n; i++) {
        uint8_t *jpg;
        size_t len;
        rf_synth_image(1000 + i, 96, 80, rgb);
        ck_assert_int_eq(rf_synth_jpeg(rgb, 96, 80, 90, 0, &jpg, &len), 0);
        static const char html[] = "<!DOCTYPE html><html><body>404 Not Found</body></html>\n";
        const void *data = jpg;
        switch (kinds[i]) {
        case E_EMPTY: len = 0; break;
        case E_HTML: data = html, len = sizeof html - 1; break;
        case E_CUT: len /= 5; break;
        case E_MARKER: jpg[len / 2] = 0xFF, jpg[len / 2 + 1] = 0xD9; break;
        case E_SOF: {
            uint8_t *sof = find_sof(jpg, (uint32_t)len);
            sof[5] = sof[7] = 0xFF; /* 65535 x 65535 */
            sof[6] = sof[8] = 0xFF;
            break;
        }
        case E_SLOW: free(jpg), data = jpg = slow_jpeg(&len); break;
        case E_NO_DQT: rf_test_jpeg_strip(jpg, &len, 0xDB); break; /* no quantization tables */
        case E_LATE_MARK: plant_late_marker(jpg, len); break;
        default: break;
        }
        char key[16];
        snprintf(key, sizeof key, "%08u", i);
        ck_assert_int_eq(rf_shard_writer_add(w, key, "jpg", data, len, (int32_t)i), 0);
        free(jpg);
    }
    free(rgb);
    ck_assert_int_eq(rf_shard_writer_close(w, err, sizeof err), 0);
    return dir;
}

START_TEST(edge_members_fail_and_skip)
{
    char *dir = make_edge_corpus("edge", edge_kind, NEDGE);
    /* fail mode: the first bad sample in dataset order stops the loader, named */
    run r;
    cfgx x = {.on_error = RF_ON_ERROR_FAIL, .order = RF_ORDER_NONE, .batch = 4};
    run_loader(dir, &x, &r);
    ck_assert_int_eq(r.rc, RF_EDECODE);
    ck_assert_msg(strstr(r.msg, "shard-0000.tar") && strstr(r.msg, "00000001.jpg") &&
                      strstr(r.msg, "offset"), "%s", r.msg);
    run_free(&r);
    /* skip mode: every bad one counted under its reason, the rest delivered once */
    x.on_error = RF_ON_ERROR_SKIP;
    run_loader(dir, &x, &r);
    ck_assert_msg(r.rc == 0, "%d %s", r.rc, r.msg);
    ck_assert_uint_eq(r.st.skipped, 5);
    ck_assert_uint_eq(r.st.skipped_by_reason[RF_SKIP_NOT_JPEG], 2);  /* empty, HTML */
    ck_assert_uint_eq(r.st.skipped_by_reason[RF_SKIP_CORRUPT], 2);   /* cut, EOI marker */
    ck_assert_uint_eq(r.st.skipped_by_reason[RF_SKIP_TOO_LARGE], 1); /* oversized SOF */
    ck_assert_uint_eq(r.real, NEDGE - 5);
    for (uint32_t i = 0; i < NEDGE; i++)
        ck_assert_uint_eq(r.seen[i], edge_kind[i] == E_GOOD ? 1 : 0);
    run_free(&r);
    free(dir);
}
END_TEST

/* ---- labels: what WebDataset writers leave, and what a typo leaves ---------------------------
 * Shards written by GNU tar from files (rf_test_make_label_shard). A label is a decimal integer
 * 0..INT32_MAX with or without whitespace around it; a missing, empty, negative, non-numeric,
 * overflowing or oversized one is a bad sample (RF_ELABEL / RF_SKIP_LABEL) unless the user
 * asked for unlabelled data (RF_LABEL_NONE). */
enum lkind { L_GOOD, L_NEWLINE, L_SPACES, L_MAX, L_MISSING, L_EMPTY, L_NEGATIVE, L_WORD, L_FLOAT,
             L_OVER, L_HUGE, L_N };
#define L_FIRST_BAD L_MISSING
static const int32_t label_value[L_FIRST_BAD] = {5, 5, 7, 2147483647};
static const char *const label_why[L_N] = {
    [L_MISSING] = " has no label member (00000005.cls); set label_source RF_LABEL_NONE",
    [L_EMPTY] = " is empty",
    [L_NEGATIVE] = " holds \"-1\", a negative number",
    [L_WORD] = " holds \"cat\", not a decimal integer",
    [L_FLOAT] = " holds \"1.0\", not a decimal integer",
    [L_OVER] = " holds \"2147483648\", a number over 2147483647",
    [L_HUGE] = " is 2000 bytes, over the 1024-byte limit of a label"};

static const char *label_text(int kind)
{
    static char huge[2001];
    static const char *const text[L_N] = {"5", "5\n", " 7 \r\n", "2147483647", NULL, "", "-1",
                                          "cat", "1.0", "2147483648", huge};
    memset(huge, '1', sizeof huge - 1);
    return text[kind];
}

/* dir/shard-0000.tar (GNU tar) with sample i of kinds[i]: its label member KEY.ext holds
 * text(kinds[i]) (none when NULL). */
static char *make_label_corpus(const char *tag, const char *ext, const char *(*text)(int),
                               const int *kinds, uint32_t n)
{
    const char *texts[NS];
    ck_assert_uint_le(n, NS);
    for (uint32_t i = 0; i < n; i++)
        texts[i] = text(kinds[i]);
    char *dir = rf_test_mkdtemp(tag);
    free(rf_test_make_label_shard_ext(dir, ext, texts, n));
    return dir;
}

/* A fail-mode loader over dir's shard (batches of 4, file order) whose sample 5 is bad, at 1
 * and 3 threads: batch 0 is delivered whole with labels first[0..3], then RF_ELABEL names the
 * shard and the member 00000005.ext (or the sample, when `missing`) at its offset, followed
 * by `why`. */
static void expect_label_fail(const char *dir, uint32_t source, const char *json_path,
                              const char *ext, int missing, const char *why,
                              const int32_t *first)
{
    char tar[600], name[64], want[1200];
    snprintf(tar, sizeof tar, "%s/shard-0000.tar", dir);
    snprintf(name, sizeof name, "00000005.%s", missing ? "jpg" : ext);
    uint64_t off = rf_test_member_offset(tar, name);
    ck_assert_uint_ne(off, UINT64_MAX);
    if (missing)
        snprintf(want, sizeof want, "%s: sample 00000005 at offset %llu%s", tar,
                 (unsigned long long)off, why);
    else
        snprintf(want, sizeof want, "%s: label member 00000005.%s at offset %llu%s", tar, ext,
                 (unsigned long long)off, why);
    for (uint32_t threads = 1; threads <= 3; threads += 2) {
        run r;
        cfgx x = {.on_error = RF_ON_ERROR_FAIL, .order = RF_ORDER_NONE, .batch = 4,
                  .threads = threads, .label_source = source, .label_json_path = json_path};
        run_loader(dir, &x, &r);
        ck_assert_msg(r.rc == RF_ELABEL, "rc %d (%s)", r.rc, r.msg);
        ck_assert_msg(strstr(r.msg, want), "\n  got  %s\n  want %s", r.msg, want);
        ck_assert_uint_eq(r.batches, 1);
        for (uint32_t i = 0; i < 4; i++) {
            ck_assert_uint_eq(r.seen[i], 1);
            ck_assert_int_eq(r.labels[i], first[i]);
        }
        run_free(&r);
    }
}

/* Fail mode, one bad kind (loop index + L_FIRST_BAD) at sample 5 of 8 in file order: batch 0 is
 * delivered whole, then RF_ELABEL names the shard, the member (or the sample when there is no
 * member) with its byte offset, and says what is wrong. */
START_TEST(label_faults_fail_naming_member_and_cause)
{
    int bad = L_FIRST_BAD + _i;
    const int kinds[8] = {L_GOOD, L_NEWLINE, L_SPACES, L_MAX, L_GOOD, bad, L_GOOD, L_GOOD};
    char *dir = make_label_corpus("labelfail", "cls", label_text, kinds, 8);
    const int32_t first[4] = {label_value[kinds[0]], label_value[kinds[1]],
                              label_value[kinds[2]], label_value[kinds[3]]};
    expect_label_fail(dir, RF_LABEL_CLS, NULL, "cls", bad == L_MISSING, label_why[bad], first);
    free(dir);
}
END_TEST

/* Every kind in one shard: skip mode leaves each bad one out, counted under `label`, and
 * delivers each good one once with its value, the same batches at 1 and 3 threads;
 * RF_LABEL_NONE delivers every sample once with label -1 and skips nothing. */
static const int label_mix[] = {L_GOOD,  L_MISSING, L_NEWLINE, L_EMPTY, L_SPACES, L_NEGATIVE,
                                L_MAX,   L_WORD,    L_GOOD,    L_FLOAT, L_OVER,   L_GOOD,
                                L_HUGE,  L_GOOD,    L_NEWLINE, L_GOOD};
#define LMIX_N (sizeof label_mix / sizeof label_mix[0])

START_TEST(label_faults_skip_counted_none_unchecked)
{
    char *dir = make_label_corpus("labelmix", "cls", label_text, label_mix, LMIX_N);
    uint32_t nbad = 0;
    for (uint32_t i = 0; i < LMIX_N; i++)
        nbad += label_mix[i] >= L_FIRST_BAD;
    uint64_t hash[2] = {0, 0};
    for (uint32_t none = 0; none < 2; none++) {
        for (uint32_t threads = 1; threads <= 3; threads += 2) {
            run r;
            cfgx x = {.on_error = RF_ON_ERROR_SKIP, .order = RF_ORDER_NONE, .batch = 4,
                      .threads = threads, .label_source = none ? RF_LABEL_NONE : RF_LABEL_CLS};
            run_loader(dir, &x, &r);
            ck_assert_msg(r.rc == 0, "%d %s", r.rc, r.msg);
            ck_assert_uint_eq(r.st.skipped, none ? 0 : nbad);
            ck_assert_uint_eq(r.st.skipped_by_reason[RF_SKIP_LABEL], none ? 0 : nbad);
            ck_assert_uint_eq(r.real, none ? LMIX_N : LMIX_N - nbad);
            ck_assert_uint_eq(r.samples, LMIX_N); /* full batches: padded at the end */
            for (uint64_t k = 0; k < r.samples; k++) {
                if (r.ids[k] == UINT64_MAX)
                    continue; /* blank padding */
                int kind = label_mix[r.ids[k]];
                ck_assert_int_lt(none ? 0 : kind, L_FIRST_BAD);
                ck_assert_int_eq(r.labels[k], none ? -1 : label_value[kind]);
            }
            for (uint32_t i = 0; i < LMIX_N; i++)
                ck_assert_uint_eq(r.seen[i], none || label_mix[i] < L_FIRST_BAD ? 1 : 0);
            if (threads == 1)
                hash[none] = r.hash;
            else
                ck_assert_uint_eq(r.hash, hash[none]);
            run_free(&r);
        }
    }
    free(dir);
}
END_TEST

/* num_classes: a label not below it is a bad label as a malformed one is. Fail mode delivers
 * batch 0 whole, then names the shard, the sample at its offset, the label and num_classes;
 * skip mode leaves each such sample out, counted under `label`; a count above every label
 * changes nothing. */
START_TEST(labels_not_below_num_classes_are_bad)
{
    const int kinds[8] = {L_GOOD, L_NEWLINE, L_GOOD, L_GOOD, L_GOOD, L_MAX, L_SPACES, L_GOOD};
    char *dir = make_label_corpus("classes", "cls", label_text, kinds, 8);
    char tar[600], want[800];
    snprintf(tar, sizeof tar, "%s/shard-0000.tar", dir);
    snprintf(want, sizeof want, "%s: sample 00000005 at offset %llu: label 2147483647 is not "
             "below num_classes 7", tar,
             (unsigned long long)rf_test_member_offset(tar, "00000005.jpg"));
    run r;
    cfgx x = {.on_error = RF_ON_ERROR_FAIL, .order = RF_ORDER_NONE, .batch = 4, .threads = 2,
              .num_classes = 7};
    run_loader(dir, &x, &r);
    ck_assert_msg(r.rc == RF_ELABEL, "rc %d (%s)", r.rc, r.msg);
    ck_assert_msg(strstr(r.msg, want), "\n  got  %s\n  want %s", r.msg, want);
    ck_assert_uint_eq(r.batches, 1);
    run_free(&r);
    for (uint32_t k = 0; k < 2; k++) {
        x.on_error = RF_ON_ERROR_SKIP;
        x.num_classes = k ? 0 : 7; /* 7: samples 5 (label INT32_MAX) and 6 (label 7) */
        run_loader(dir, &x, &r);
        ck_assert_msg(r.rc == 0, "%d %s", r.rc, r.msg);
        ck_assert_uint_eq(r.st.skipped_by_reason[RF_SKIP_LABEL], k ? 0 : 2);
        ck_assert_uint_eq(r.real, k ? 8 : 6);
        for (uint32_t i = 0; i < 8; i++)
            ck_assert_uint_eq(r.seen[i], k || (i != 5 && i != 6) ? 1 : 0);
        run_free(&r);
    }
    free(dir);
}
END_TEST

/* ---- labels from JSON (RF_LABEL_JSON, label_json_path "annotations.class_id") -------------
 * The same corpus shape with KEY.json members, as WebDataset writers leave them: nested,
 * whitespace, escapes and unicode in other keys, a key on the path written with an escape.
 * Every fault is a `label` error naming the member, its offset and what is wrong. */
enum jkind { J_GOOD, J_SPACES, J_ESCKEY, J_MAX, J_MISSING, J_NOFIELD, J_FLOAT, J_EXP, J_NEG,
             J_STRING, J_OVER, J_DUP, J_BAD, J_DEEP, J_HUGE, J_ARRAY, J_N };
#define J_FIRST_BAD J_MISSING
static const int32_t json_value[J_FIRST_BAD] = {5, 7, 9, 2147483647};
static const char *const json_why[J_N] = {
    [J_MISSING] = " has no label member (00000005.json); set label_source RF_LABEL_NONE",
    [J_NOFIELD] = " has no field annotations.class_id; a label is an integer 0..2147483647",
    [J_FLOAT] = ": field annotations.class_id (byte 29 of the member) holds \"5.0\", a number "
                "with a fraction or exponent",
    [J_EXP] = ": field annotations.class_id (byte 29 of the member) holds \"5e0\", a number "
              "with a fraction or exponent",
    [J_NEG] = ": field annotations.class_id (byte 29 of the member) holds \"-3\", a negative "
              "number",
    [J_STRING] = ": field annotations.class_id (byte 29 of the member) is a string; a label is "
                 "an integer 0..2147483647",
    [J_OVER] = ": field annotations.class_id (byte 29 of the member) holds \"2147483648\", a "
               "number over 2147483647",
    [J_DUP] = " is not valid JSON: a duplicate key on the label's path at byte 32 of the member",
    [J_BAD] = " is not valid JSON: expected a key (a string) at byte 31 of the member",
    [J_DEEP] = " is not valid JSON: nesting deeper than 64 levels at byte 101 of the member",
    [J_HUGE] = " is 70000 bytes, over the 65536-byte limit of a JSON label",
    [J_ARRAY] = ": field annotations.class_id (byte 29 of the member) is an array"};

static const char *json_text(int kind)
{
    static char huge[70001], deep[300];
    static const char *const text[J_N] = {
        [J_GOOD] = "{\"annotations\": {\"class_id\": 5}}",
        [J_SPACES] = " \n{ \"caption\" : \"caf\\u00e9 \\ud83d\\ude00 \\\"q\\\" \xc3\xa9\",\r\n"
                     "  \"annotations\" : { \"bbox\" : [1.5, -2e3, {\"x\": null}], \"class_id\""
                     " :\t7 }, \"class_id\": -1, \"other\": {\"class_id\": \"no\"} }\n",
        [J_ESCKEY] = "{\"annotations\": {\"cl\\u0061ss_id\": 9, \"dup\": 1, \"dup\": 2}}",
        [J_MAX] = "{\"annotations\": {\"class_id\": 2147483647}}",
        [J_NOFIELD] = "{\"annotations\": {\"class\": 5}, \"class_id\": 5}",
        [J_FLOAT] = "{\"annotations\": {\"class_id\": 5.0}}",
        [J_EXP] = "{\"annotations\": {\"class_id\": 5e0}}",
        [J_NEG] = "{\"annotations\": {\"class_id\": -3}}",
        [J_STRING] = "{\"annotations\": {\"class_id\": \"5\"}}",
        [J_OVER] = "{\"annotations\": {\"class_id\": 2147483648}}",
        [J_DUP] = "{\"annotations\": {\"class_id\": 1, \"class_id\": 1}}",
        [J_BAD] = "{\"annotations\": {\"class_id\": 5,}}",
        [J_HUGE] = huge, [J_DEEP] = deep,
        [J_ARRAY] = "{\"annotations\": {\"class_id\": [5]}}"};
    /* {"annotations": {"class_id": 5}, "x": [[[[...]]]]} nested 70 deep after the label */
    int n = snprintf(deep, sizeof deep, "{\"annotations\": {\"class_id\": 5}, \"x\": ");
    memset(deep + n, '[', 70), memset(deep + n + 70, ']', 70);
    snprintf(deep + n + 140, sizeof deep - (size_t)n - 140, "}");
    n = snprintf(huge, sizeof huge, "{\"annotations\": {\"class_id\": 5}, \"pad\": \"");
    memset(huge + n, 'a', sizeof huge - 3 - (size_t)n);
    memcpy(huge + sizeof huge - 3, "\"}", 3);
    return text[kind];
}

/* Fail mode, one bad kind at sample 5 of 8: batch 0 is delivered whole with the JSON labels,
 * then RF_ELABEL names the shard, the member (or the sample) with its offset, and what. */
START_TEST(json_label_faults_fail_naming_member_and_cause)
{
    int bad = J_FIRST_BAD + _i;
    const int kinds[8] = {J_GOOD, J_SPACES, J_ESCKEY, J_MAX, J_GOOD, bad, J_GOOD, J_GOOD};
    char *dir = make_label_corpus("jsonfail", "json", json_text, kinds, 8);
    /* kinds[0..3] are J_GOOD..J_MAX in order: json_value holds their labels */
    expect_label_fail(dir, RF_LABEL_JSON, "annotations.class_id", "json", bad == J_MISSING,
                      json_why[bad], json_value);
    free(dir);
}
END_TEST

/* Every kind in one shard under skip: each bad one left out and counted under `label`, each
 * good one delivered once with its value, the same batches at 1 and 3 threads. */
static const int json_mix[] = {J_GOOD, J_MISSING, J_SPACES, J_NOFIELD, J_ESCKEY, J_FLOAT,
                               J_MAX,  J_EXP,     J_NEG,    J_STRING,  J_GOOD,   J_OVER,
                               J_DUP,  J_BAD,     J_DEEP,   J_HUGE,    J_ARRAY,  J_SPACES};
#define JMIX_N (sizeof json_mix / sizeof json_mix[0])

START_TEST(json_label_faults_skip_counted)
{
    char *dir = make_label_corpus("jsonmix", "json", json_text, json_mix, JMIX_N);
    uint32_t nbad = 0;
    for (uint32_t i = 0; i < JMIX_N; i++)
        nbad += json_mix[i] >= J_FIRST_BAD;
    uint64_t hash = 0;
    for (uint32_t threads = 1; threads <= 3; threads += 2) {
        run r;
        cfgx x = {.on_error = RF_ON_ERROR_SKIP, .order = RF_ORDER_NONE, .batch = 4,
                  .threads = threads, .label_source = RF_LABEL_JSON,
                  .label_json_path = "annotations.class_id"};
        run_loader(dir, &x, &r);
        ck_assert_msg(r.rc == 0, "%d %s", r.rc, r.msg);
        ck_assert_uint_eq(r.st.skipped_by_reason[RF_SKIP_LABEL], nbad);
        ck_assert_uint_eq(r.st.skipped, nbad);
        ck_assert_uint_eq(r.real, JMIX_N - nbad);
        for (uint64_t k = 0; k < r.samples; k++)
            if (r.ids[k] != UINT64_MAX)
                ck_assert_int_eq(r.labels[k], json_value[json_mix[r.ids[k]]]);
        for (uint32_t i = 0; i < JMIX_N; i++)
            ck_assert_uint_eq(r.seen[i], json_mix[i] < J_FIRST_BAD ? 1 : 0);
        if (threads == 1)
            hash = r.hash;
        else
            ck_assert_uint_eq(r.hash, hash);
        run_free(&r);
    }
    free(dir);
}
END_TEST

/* Fail mode raises errors in batch order, whatever the thread timing: the batches before the
 * first bad sample are delivered, and the error names that sample. Sample 5 is slow to fail
 * (E_SLOW), 6 is HTML (refused at once), 7's read fails with EIO (at once), 13 is HTML:
 * decoded on two threads, 6 and 7 fail long before 5 does. */
static const int order_kind[] = {E_GOOD, E_GOOD, E_GOOD, E_GOOD, E_GOOD, E_SLOW,
                                 E_HTML, E_GOOD, E_GOOD, E_GOOD, E_GOOD, E_GOOD,
                                 E_GOOD, E_HTML, E_GOOD, E_GOOD};
#define ORD_N (sizeof order_kind / sizeof order_kind[0])

/* -EIO on every attempt at the span ctx points to ({offset, length}). */
static int eio_at_fault(void *ctx, const rf_io_req *q, int res)
{
    const uint64_t *span = ctx;
    return q->offset == span[0] && q->len == span[1] ? -EIO : res;
}

START_TEST(fail_mode_errors_in_batch_order)
{
    char *dir = make_edge_corpus("order-err", order_kind, ORD_N);
    char tar[600], *paths[1] = {tar};
    snprintf(tar, sizeof tar, "%s/shard-0000.tar", dir);
    rf_dataset ds = {0};
    rf_err e = {0};
    ck_assert_msg(rf_format_tar.open(&ds, paths, 1, 0, &e) == 0, "%s", e.msg);
    uint64_t eio_span[2] = {ds.samples[7].offset, ds.samples[7].length};
    rf_dataset_free(&ds);

    for (int rep = 0; rep < 3; rep++) {
        run r;
        cfgx x = {.on_error = RF_ON_ERROR_FAIL, .order = RF_ORDER_NONE, .batch = 4,
                  .fault = eio_at_fault, .fault_ctx = eio_span, .io = rep & 1 ? RF_IO_PREAD : 0};
        run_loader(dir, &x, &r);
        ck_assert_int_eq(r.rc, RF_EDECODE);
        ck_assert_msg(strstr(r.msg, "shard-0000.tar") && strstr(r.msg, "00000005.jpg"), "%s",
                      r.msg);
        ck_assert_uint_eq(r.batches, 1); /* batch 0 delivered, batch 1 holds the bad samples */
        for (uint32_t i = 0; i < ORD_N; i++)
            ck_assert_uint_eq(r.seen[i], i < 4 ? 1 : 0);
        run_free(&r);
    }
    /* The state taken after the error resumes at the bad batch: a skip-mode loader resumed from
     * it delivers every good sample after batch 0 once, and counts the four bad ones. */
    cfgx x = {.on_error = RF_ON_ERROR_FAIL, .order = RF_ORDER_NONE, .batch = 4,
              .fault = eio_at_fault, .fault_ctx = eio_span};
    rf_loader *ld = create_loader(dir, &x);
    rf_batch *b;
    ck_assert_int_eq(rf_loader_next(ld, &b), 0);
    ck_assert_int_eq(rf_loader_release(ld, b, NULL), 0);
    ck_assert_int_eq(rf_loader_next(ld, &b), RF_EDECODE);
    uint8_t blob[256];
    uint64_t len = 0;
    ck_assert_int_eq(rf_loader_state(ld, blob, sizeof blob, &len), 0);
    rf_loader_destroy(ld);
    x.on_error = RF_ON_ERROR_SKIP;
    x.resume = blob, x.resume_len = len;
    run r;
    run_loader(dir, &x, &r);
    ck_assert_msg(r.rc == 0, "%d %s", r.rc, r.msg); /* the epoch runs to its end */
    ck_assert_uint_eq(r.st.skipped, 4);
    for (uint32_t i = 0; i < ORD_N; i++)
        ck_assert_uint_eq(r.seen[i], i >= 4 && i != 5 && i != 6 && i != 7 && i != 13 ? 1 : 0);
    run_free(&r);
    free(dir);
}
END_TEST

/* Something that does not return: the read of sample `id` (a hung network file system: the
 * I/O thread completing it is held) or the backend submit of batch `seq` (a stuck device), until
 * the test releases it (20 s at most, so a failing test ends). */
typedef struct hold {
    uint64_t id, seq;
    _Atomic int released;
} hold;
static void hold_on(hold *h)
{
    for (int ms = 0; !atomic_load(&h->released) && ms < 20000; ms++)
        usleep(1000);
}
static int hold_fault(void *ctx, const rf_io_req *q, int res)
{
    hold *h = ctx;
    if (h->id != UINT64_MAX && is_sample(q, h->id))
        hold_on(h);
    return res;
}
static int hold_submit(void *ctx, int op, uint64_t seq)
{
    hold *h = ctx;
    if (op == RF_HOOK_SUBMIT && seq == h->seq)
        hold_on(h);
    return 0;
}

/* next_timeout_ms: with one read stuck (loops 0, 1: io_uring, pread) or one batch's submit to
 * the backend stuck (loop 2), rf_loader_next delivers every batch before the stuck one, then
 * returns RF_ETIMEDOUT naming the batch and what it waits for, what the pipeline holds and
 * (pread, whose other threads finish every other read) the stuck sample by shard, member and
 * offset; the error is not sticky, and once the operation returns the epoch completes with
 * every sample exactly once. */
START_TEST(stall_times_out_and_loses_nothing)
{
    const uint64_t sample = pick(key_of(0, 21)), stuck_batch = sample / 8; /* dataset order */
    hold h = {.id = _i == 2 ? UINT64_MAX : sample, .seq = _i == 2 ? stuck_batch : UINT64_MAX};
    cfgx x = {.on_error = RF_ON_ERROR_FAIL, .order = RF_ORDER_NONE, .batch = 8,
              .io = _i == 1 ? RF_IO_PREAD : 0, .timeout_ms = 200, .fault = hold_fault,
              .fault_ctx = &h, .backend = hold_submit, .backend_ctx = &h};
    rf_loader *ld = create_loader(g_clean, &x);
    uint32_t seen[NS] = {0};
    uint64_t batches = 0;
    int timeouts = 0, rc;
    rf_batch *b;
    while ((rc = rf_loader_next(ld, &b)) != RF_DONE) {
        if (rc == RF_EPOCH_END)
            continue;
        if (rc == RF_ETIMEDOUT) {
            const char *m = rf_last_error(ld);
            char want[64], where[600];
            snprintf(want, sizeof want, "Batch %llu of epoch 0: ", (unsigned long long)stuck_batch);
            ck_assert_msg(strstr(m, "no batch in 200 ms") && strstr(m, want), "%s", m);
            if (_i == 2) {
                ck_assert_msg(strstr(m, "all 8 samples in, being submitted to the host backend"),
                              "%s", m);
            } else {
                ck_assert_msg(strstr(m, "samples still to come") && strstr(m, "(reading)"), "%s",
                              m);
                snprintf(where, sizeof where, "shard-0000.tar: sample %s at offset %llu "
                         "(reading)", g_ds.keys + g_ds.samples[sample].key,
                         (unsigned long long)g_ds.samples[sample].offset);
                ck_assert_msg(x.io != RF_IO_PREAD || strstr(m, where), "%s\nwants %s", m, where);
            }
            ck_assert_uint_eq(batches, stuck_batch); /* everything before it was delivered */
            if (++timeouts == 2) /* still stuck on the second call: then it returns */
                atomic_store(&h.released, 1);
            continue;
        }
        ck_assert_msg(rc == 0, "%d %s", rc, rf_last_error(ld));
        batches++;
        for (uint32_t i = 0; i < b->count; i++)
            if (!b->is_padding[i])
                seen[b->sample_ids[i]]++;
        ck_assert_int_eq(rf_loader_release(ld, b, NULL), 0);
    }
    atomic_store(&h.released, 1);
    ck_assert_int_eq(timeouts, 2);
    for (uint32_t i = 0; i < NS; i++)
        ck_assert_uint_eq(seen[i], 1);
    rf_loader_destroy(ld);
}
END_TEST

/* Every Nth completion faulted (short read, -EAGAIN, -EINTR in turn), for several N and both
 * engines: every good sample still arrives byte for byte. */
typedef struct nth {
    uint32_t n;
    _Atomic uint64_t count, hits;
} nth;

static int nth_fault(void *ctx, const rf_io_req *q, int res)
{
    nth *f = ctx;
    uint64_t k = atomic_fetch_add(&f->count, 1);
    if (res <= 1 || (k + 1) % f->n != 0 || q->retries >= 4)
        return res;
    atomic_fetch_add(&f->hits, 1);
    switch ((k / f->n) % 3) {
    case 0: return res / 2;
    case 1: return -EAGAIN;
    default: return -EINTR;
    }
}

START_TEST(every_nth_completion_faulted)
{
    uint32_t io = (_i & 1) ? RF_IO_URING : RF_IO_PREAD;
    char why[160];
    const rf_io_ops *ops;
    if (io == RF_IO_URING && rf_io_select(RF_IO_URING, &ops, why, sizeof why) != 0)
        return; /* io_uring refused here; the pread half still runs */
    run clean;
    cfgx x = {.on_error = RF_ON_ERROR_FAIL, .io = io, .threads = 2};
    run_loader(g_clean, &x, &clean);
    static const uint32_t ns[] = {1, 2, 3, 5, 8};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        nth f = {.n = ns[k]};
        run r;
        x.fault = nth_fault;
        x.fault_ctx = &f;
        run_loader(g_clean, &x, &r);
        ck_assert_msg(r.rc == 0, "every %u: %s", ns[k], r.msg);
        ck_assert_uint_eq(r.hash, clean.hash);
        ck_assert_uint_gt(atomic_load(&f.hits), 0);
        run_free(&r);
    }
    run_free(&clean);
}
END_TEST

/* A file without its own DQT, and damage below most crops, are bad in every epoch and at any
 * thread count: the decoder starts each image afresh (no tables left from the image the thread
 * decoded before) and every decode checks the marker structure of the whole file. Before,
 * stripped files borrowed the previous image's tables (skips 0, 1, 1, 4 at 1, 2, 4, 8 threads)
 * and the late marker failed only in epochs whose crop reached it. */
enum { TABLES_N = 64, TABLES_EPOCHS = 3 };

START_TEST(missing_tables_and_late_damage_same_every_epoch_any_threads)
{
    int kinds[TABLES_N];
    uint32_t bad = 0;
    for (uint32_t i = 0; i < TABLES_N; i++) {
        kinds[i] = i % 4 == 1 ? E_NO_DQT : i % 4 == 3 ? E_LATE_MARK : E_GOOD;
        bad += kinds[i] != E_GOOD;
    }
    char *dir = make_edge_corpus("tables", kinds, TABLES_N);
    uint64_t hash = 0;
    static const uint32_t threads[] = {1, 2, 4};
    for (uint32_t k = 0; k < 3; k++) {
        run r;
        cfgx x = {.on_error = RF_ON_ERROR_SKIP, .threads = threads[k], .batch = 8,
                  .epochs = TABLES_EPOCHS, .random_crop = 1};
        run_loader(dir, &x, &r);
        ck_assert_msg(r.rc == 0, "%d %s", r.rc, r.msg);
        ck_assert_uint_eq(r.st.skipped, (uint64_t)bad * TABLES_EPOCHS);
        ck_assert_uint_eq(r.st.skipped_by_reason[RF_SKIP_CORRUPT], (uint64_t)bad * TABLES_EPOCHS);
        for (uint32_t i = 0; i < TABLES_N; i++)
            ck_assert_uint_eq(r.seen[i], kinds[i] == E_GOOD ? TABLES_EPOCHS : 0);
        if (k == 0)
            hash = r.hash;
        ck_assert_msg(r.hash == hash, "%u threads: other batches than with 1", threads[k]);
        run_free(&r);
    }
    /* fail mode names the first one, with libjpeg's words for the missing table */
    run r;
    cfgx x = {.on_error = RF_ON_ERROR_FAIL, .order = RF_ORDER_NONE, .batch = 4, .threads = 2};
    run_loader(dir, &x, &r);
    ck_assert_int_eq(r.rc, RF_EDECODE);
    ck_assert_msg(strstr(r.msg, "00000001.jpg") &&
                      strstr(r.msg, "Quantization table 0x00 was not defined"), "%s", r.msg);
    run_free(&r);
    free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("faults");
    TCase *tc = tcase_create("faults");
    tcase_set_timeout(tc, 300);
    tcase_add_unchecked_fixture(tc, make_clean, NULL);
    tcase_add_loop_test(tc, fail_mode_names_shard_member_offset, 0, C_N);
    tcase_add_loop_test(tc, skip_mode_counts_each_reason, 0, C_N);
    tcase_add_test(tc, skip_reason_is_the_parsers_not_a_word_in_the_message);
    tcase_add_test(tc, skip_mode_whole_corpus_exact_and_deterministic);
    tcase_add_test(tc, skip_mode_clean_equals_fail_mode);
    tcase_add_test(tc, skip_mode_counts_per_epoch);
    tcase_add_test(tc, skip_mode_ranks_equal_batches);
    tcase_add_test(tc, broken_dataset_is_an_error_not_an_empty_epoch);
    tcase_add_loop_test(tc, transient_faults_retried_identical_output, 0, 8);
    tcase_add_loop_test(tc, persistent_faults_follow_policy, 0, 2);
    tcase_add_test(tc, shard_truncated_during_epoch);
    tcase_add_test(tc, destroy_mid_flight_with_faults);
    tcase_add_test(tc, skip_mode_resume_exact_without_earlier_skips);
    tcase_add_test(tc, nonregular_members_skipped_and_counted);
    tcase_add_test(tc, config_limits_validated);
    tcase_add_test(tc, edge_members_fail_and_skip);
    tcase_add_loop_test(tc, label_faults_fail_naming_member_and_cause, 0, L_N - L_FIRST_BAD);
    tcase_add_test(tc, label_faults_skip_counted_none_unchecked);
    tcase_add_test(tc, labels_not_below_num_classes_are_bad);
    tcase_add_loop_test(tc, json_label_faults_fail_naming_member_and_cause, 0,
                        J_N - J_FIRST_BAD);
    tcase_add_test(tc, json_label_faults_skip_counted);
    tcase_add_test(tc, fail_mode_errors_in_batch_order);
    tcase_add_test(tc, missing_tables_and_late_damage_same_every_epoch_any_threads);
    tcase_add_loop_test(tc, every_nth_completion_faulted, 0, 2);
    tcase_add_loop_test(tc, stall_times_out_and_loses_nothing, 0, 3);
    TCase *quick = tcase_create("blocking");
    tcase_set_timeout(quick, 20);
    tcase_add_unchecked_fixture(quick, make_clean, NULL);
    tcase_add_test(quick, non_regular_files_refused_at_once);
    suite_add_tcase(s, tc);
    suite_add_tcase(s, quick);
    return rf_test_run_suite(s);
}
