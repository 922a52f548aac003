/* test_lateskip.c — on_error = SKIP when a sample's verdict comes after its batch was decoded:
 * GPU decode's kernels on the CUDA backend report bad entropy data only when the consumer
 * checks the batch (pl_gpu_check). The host backend runs that path here through the test hook
 * gpu_late_verdicts (src/pipeline/testing.h): the packet's status is kept in the slot and the
 * consumer turns it into a skip, and the skip policy refills the batch before it is handed
 * out. Each run is compared with the same data under verdicts on the decode thread (the
 * reference: the host backend's GPU decode as it runs by default, a bad sample skipped by its
 * decode thread like any CPU-path failure; test_loader checks its pixels against direct
 * full-scale decodes):
 * the same samples per epoch, the same pixels and labels, the same skip counts and reasons, at
 * 1, 2 and 4 decode threads; the consecutive-skip limit; a resume after a refilled batch.
 * With the hook gpu_device_layout as well, the same runs take the CUDA backend's slot layout
 * (packets and pixels packed at offsets, the refill compacting the holes' bytes out, the whole
 * batch decoded again by the emulated kernels), plus a batch with 7 holes among large packets
 * where the replacements' pixels fit only after the compaction. The
 * data: restart-marked JPEGs (ringfeed-gen --restart's core) in a shard of the generator and
 * one rewritten by Python's tarfile, with the Huffman data of some members overwritten and
 * their markers intact, so that only the packet decode finds the damage. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/io.h"
#include "pipeline/testing.h"
#include "ringfeed.h"
#include "testutil.h"

#define NSH 2
#define NPER 40
#define NS (NSH * NPER)
#define CLASSES 7
#define SIZE 32
#define PX (SIZE * SIZE * 3)
#define EPOCHS 2
#define MAXRUN (NS * EPOCHS)

/* Damaged members: shard 0's 5th and 6th (adjacent in file order), its 30th, shard 1's 17th
 * (written by tarfile). Their sample ids are their global indexes. */
static const uint32_t g_bad[] = {5, 6, 30, NPER + 17};
#define NBAD (sizeof g_bad / sizeof g_bad[0])
static char g_dir[600], g_pat[700];

static int is_bad(uint64_t id)
{
    for (uint32_t k = 0; k < NBAD; k++)
        if (g_bad[k] == id)
            return 1;
    return 0;
}

/* The corpus, once per process: two restart-marked shards, the second rewritten by Python's
 * tarfile (PAX format, as users' scripts write them), then the damage. */
static void make_corpus(void)
{
    char *gen = rf_test_mkdtemp("lateskip-gen"), *dir = rf_test_mkdtemp("lateskip");
    ck_assert_int_eq(rf_test_make_restart_shards(gen, NSH, NPER, CLASSES, 17, 160), 0);
    ck_assert_int_eq(rf_test_shell("cp '%s/shard-0000.tar' '%s/' && python3 -c \"import tarfile,"
                                   "sys; i=tarfile.open(sys.argv[1]); o=tarfile.open(sys.argv[2],"
                                   "'w',format=tarfile.PAX_FORMAT)\n[o.addfile(m,i.extractfile(m)"
                                   ") for m in i.getmembers()]\no.close()\" '%s/shard-0001.tar' "
                                   "'%s/shard-0001.tar'", gen, dir, gen, dir), 0);
    char shard[700], key[64];
    for (uint32_t k = 0; k < NBAD; k++) {
        snprintf(shard, sizeof shard, "%s/shard-%04u.tar", dir, g_bad[k] / NPER);
        ck_assert_int_eq(rf_test_damage_entropy(shard, g_bad[k] % NPER, key, sizeof key), 0);
        ck_assert_uint_eq(strtoul(key, NULL, 10), g_bad[k]);
    }
    snprintf(g_dir, sizeof g_dir, "%s", dir);
    snprintf(g_pat, sizeof g_pat, "%s/shard-*.tar", dir);
}

/* "member KEY.jpg at offset N" for sample id, N its header's offset in its shard: how error
 * messages name it. */
static void member_at(uint32_t id, char *buf, size_t n)
{
    char shard[700], name[32];
    snprintf(shard, sizeof shard, "%s/shard-%04u.tar", g_dir, id / NPER);
    snprintf(name, sizeof name, "%08u.jpg", id);
    uint64_t off = rf_test_member_offset(shard, name);
    ck_assert_uint_ne(off, UINT64_MAX);
    snprintf(buf, n, "member %s at offset %llu", name, (unsigned long long)off);
}

/* A read fault (testing.h's io hook): every read of the sample span starting at g_eio_off
 * fails with EIO (UINT64_MAX: none). */
static uint64_t g_eio_off = UINT64_MAX;

static int eio_fault(void *ctx, const rf_io_req *q, int res)
{
    (void)ctx;
    return q->offset == g_eio_off ? -EIO : res;
}

typedef struct opts {
    int late;          /* the gpu_late_verdicts hook; 2: with gpu_device_layout too */
    uint32_t threads, max_consec, order, batches; /* batches: stop after so many (0: all) */
    const void *resume;
    uint64_t resume_len;
} opts;

/* What a run delivered: per delivery its epoch, sample id, label, padding flag and pixels. */
typedef struct run {
    int rc;
    char msg[1024];
    uint32_t n, batches;
    uint64_t ids[MAXRUN], epoch[MAXRUN];
    int32_t labels[MAXRUN];
    uint8_t pad[MAXRUN];
    uint8_t *px;
    rf_stats st;
    uint8_t state[256];
    uint64_t state_len;
} run;

static rf_loader *create(const opts *o)
{
    const char *pats[1];
    rf_config c = rf_test_host_config(pats, g_pat, SIZE);
    c.seed = 3;
    c.crop = RF_CROP_RANDOM;
    c.batch_size = 8;
    c.epochs = EPOCHS;
    c.gpu_decode = 1;
    c.on_error = RF_ON_ERROR_SKIP;
    c.decode_threads = o->threads ? o->threads : 2;
    c.max_consecutive_skips = o->max_consec;
    c.order = o->order;
    c.resume_state = o->resume;
    c.resume_state_bytes = o->resume_len;
    rf_test_hooks h = {.gpu_late_verdicts = o->late != 0, .gpu_device_layout = o->late == 2,
                       .io = eio_fault};
    rf_loader *ld = NULL;
    char err[512] = "";
    int rc = rf_loader_create_hooked(&c, &h, &ld, err, sizeof err);
    ck_assert_msg(rc == 0, "create: %d %s", rc, err);
    return ld;
}

/* One run into r: every batch full (8 samples), each real sample's label the one the
 * generator wrote for its key; the loader's error, if any, in r->rc and r->msg; with
 * o->batches, the state after that many batches in r->state. */
static void collect(const opts *o, run *r)
{
    memset(r, 0, sizeof *r);
    r->px = malloc((size_t)MAXRUN * PX);
    rf_loader *ld = create(o);
    uint64_t epoch = 0;
    rf_batch *b;
    int rc;
    while ((rc = rf_loader_next(ld, &b)) != RF_DONE) {
        if (rc == RF_EPOCH_END) {
            epoch++;
            continue;
        }
        if (rc) {
            r->rc = rc;
            snprintf(r->msg, sizeof r->msg, "%s", rf_last_error(ld));
            break;
        }
        ck_assert_uint_eq(b->count, 8);
        for (uint32_t i = 0; i < b->count; i++, r->n++) {
            ck_assert_uint_lt(r->n, MAXRUN);
            r->ids[r->n] = b->sample_ids[i], r->epoch[r->n] = epoch;
            r->labels[r->n] = b->labels[i], r->pad[r->n] = b->is_padding[i];
            memcpy(r->px + (size_t)r->n * PX, (const uint8_t *)b->data + (size_t)i * PX, PX);
            if (!b->is_padding[i])
                ck_assert_int_eq(b->labels[i], (int32_t)(strtoul(b->keys[i], NULL, 10) %
                                                         CLASSES));
        }
        ck_assert_int_eq(rf_loader_release(ld, b, NULL), 0);
        if (++r->batches == o->batches) {
            ck_assert_int_eq(rf_loader_state(ld, r->state, sizeof r->state, &r->state_len), 0);
            break;
        }
    }
    rf_stats_init(&r->st);
    rf_loader_stats(ld, &r->st);
    rf_loader_destroy(ld);
}

/* Delivery k of run a holds sample (epoch, id): its index, or -1. */
static int64_t find(const run *a, uint64_t epoch, uint64_t id)
{
    for (uint32_t k = 0; k < a->n; k++)
        if (!a->pad[k] && a->epoch[k] == epoch && a->ids[k] == id)
            return k;
    return -1;
}

/* Run b delivered what run a delivered, sample for sample per epoch (positions may differ):
 * each at most once, none of the damaged ones, with the same label and pixels. */
static void same_samples(const run *a, const run *b)
{
    uint32_t real_a = 0, real_b = 0;
    for (uint32_t k = 0; k < b->n; k++) {
        if (b->pad[k])
            continue;
        real_b++;
        ck_assert_msg(!is_bad(b->ids[k]), "damaged sample %llu delivered",
                      (unsigned long long)b->ids[k]);
        ck_assert_int_eq(find(b, b->epoch[k], b->ids[k]), k); /* at most once per epoch */
        int64_t j = find(a, b->epoch[k], b->ids[k]);
        ck_assert_msg(j >= 0, "sample %llu of epoch %llu not in the reference",
                      (unsigned long long)b->ids[k], (unsigned long long)b->epoch[k]);
        ck_assert_int_eq(a->labels[j], b->labels[k]);
        ck_assert_msg(memcmp(a->px + (size_t)j * PX, b->px + (size_t)k * PX, PX) == 0,
                      "sample %llu: other pixels", (unsigned long long)b->ids[k]);
    }
    for (uint32_t k = 0; k < a->n; k++)
        real_a += !a->pad[k];
    ck_assert_uint_eq(real_a, real_b);
}

/* Every epoch: the good samples once each, the damaged ones skipped and counted as corrupt
 * (once per epoch), blanks in their place; at 1, 2 and 4 threads the same deliveries in the
 * same order as each other, and the same samples as with verdicts on the decode thread. */
static void skip_like_decode_thread_verdicts(int late)
{
    run *ref = malloc(sizeof *ref), *r = malloc(sizeof *r), *first = malloc(sizeof *first);
    collect(&(opts){.late = 0}, ref);
    ck_assert_msg(ref->rc == 0, "%s", ref->msg);
    ck_assert_uint_eq(ref->n, MAXRUN);
    static const uint32_t threads[] = {1, 2, 4};
    for (uint32_t t = 0; t < 3; t++) {
        collect(&(opts){.late = late, .threads = threads[t]}, r);
        ck_assert_msg(r->rc == 0, "%u threads: %d %s", threads[t], r->rc, r->msg);
        ck_assert_uint_eq(r->n, MAXRUN); /* every batch full, padding where samples failed */
        ck_assert_uint_eq(r->st.skipped, NBAD * EPOCHS);
        ck_assert_uint_eq(r->st.skipped_by_reason[RF_SKIP_CORRUPT], NBAD * EPOCHS);
        ck_assert_uint_eq(r->st.skipped, ref->st.skipped);
        ck_assert_uint_eq(r->st.epoch_skipped, NBAD);
        ck_assert_uint_eq(r->st.epoch_delivered + r->st.epoch_skipped, NS);
        ck_assert_uint_eq(r->st.epoch_final, 1);
        /* only delivered samples count as GPU-decoded, never a bad packet */
        ck_assert_uint_le(r->st.gpu_decoded, (NS - NBAD) * EPOCHS);
        same_samples(ref, r);
        if (t == 0) {
            *first = *r;
            first->px = malloc((size_t)MAXRUN * PX);
            memcpy(first->px, r->px, (size_t)MAXRUN * PX);
        } else {
            ck_assert_mem_eq(first->ids, r->ids, sizeof r->ids);
            ck_assert_mem_eq(first->pad, r->pad, sizeof r->pad);
            ck_assert_int_eq(memcmp(first->px, r->px, (size_t)MAXRUN * PX), 0);
        }
        free(r->px);
    }
    free(first->px), free(ref->px);
    free(first), free(r), free(ref);
}

START_TEST(late_verdicts_skip_like_decode_thread_verdicts)
{
    skip_like_decode_thread_verdicts(1);
}
END_TEST

/* The same on the CUDA backend's slot layout (test hook gpu_device_layout): packets and pixels
 * packed in the stage, the holes' bytes compacted out before the refill, the replacements'
 * pixels placed at new offsets and the whole batch decoded again by the emulated kernels; the
 * bad packets are not counted as GPU-decoded. */
START_TEST(device_layout_skip_like_decode_thread_verdicts)
{
    skip_like_decode_thread_verdicts(2);
    run *r = malloc(sizeof *r);
    collect(&(opts){.late = 2}, r);
    /* every delivered sample is a kept packet or a CPU-decoded replacement: the bad packets,
     * counted when placed, are taken back (154 > 152 without that) */
    ck_assert_uint_le(r->st.gpu_decoded, (NS - NBAD) * EPOCHS);
    ck_assert_uint_gt(r->st.gpu_decoded, 0);
    free(r->px), free(r);
}
END_TEST

/* A batch with more holes than good samples, of large photos whose packets take most of a
 * slot (rf_test_make_big_restart_shards: packets can exceed the slot's 192 KiB per sample):
 * order NONE, batch 0 holds samples 0-7, and 0-6 have their Huffman data overwritten. On the
 * device layout the refill must find room for 7 replacements' pixels after the one kept
 * packet, with the other packets' bytes compacted out; the samples, pixels and counts equal
 * the reference's (verdicts on the decode thread) at 1 and 4 threads. */
#define BIG_N 16
#define BIG_BAD 7
#define BIG_PX (224 * 224 * 3)
typedef struct big_run {
    uint32_t n;
    uint64_t ids[BIG_N];
    uint8_t pad[BIG_N];
    uint8_t *px;
    rf_stats st;
} big_run;

static void big_collect(const char *pattern, int late, uint32_t threads, big_run *r)
{
    const char *pats[1];
    rf_config c = rf_test_host_config(pats, pattern, 224);
    c.batch_size = 8, c.epochs = 1, c.gpu_decode = 1, c.order = RF_ORDER_NONE;
    c.on_error = RF_ON_ERROR_SKIP, c.decode_threads = threads;
    rf_test_hooks h = {.gpu_late_verdicts = late != 0, .gpu_device_layout = late == 2};
    rf_loader *ld = NULL;
    char err[512] = "";
    ck_assert_msg(rf_loader_create_hooked(&c, &h, &ld, err, sizeof err) == 0, "%s", err);
    memset(r, 0, sizeof *r);
    r->px = malloc((size_t)BIG_N * BIG_PX);
    rf_batch *b;
    int rc;
    while ((rc = rf_loader_next(ld, &b)) != RF_DONE) {
        if (rc == RF_EPOCH_END)
            continue;
        ck_assert_msg(rc == 0, "%d %s", rc, rf_last_error(ld));
        for (uint32_t i = 0; i < b->count; i++, r->n++) {
            ck_assert_uint_lt(r->n, BIG_N);
            r->ids[r->n] = b->sample_ids[i], r->pad[r->n] = b->is_padding[i];
            memcpy(r->px + (size_t)r->n * BIG_PX, (const uint8_t *)b->data + (size_t)i * BIG_PX,
                   BIG_PX);
        }
        ck_assert_int_eq(rf_loader_release(ld, b, NULL), 0);
    }
    rf_stats_init(&r->st);
    rf_loader_stats(ld, &r->st);
    rf_loader_destroy(ld);
}

START_TEST(device_layout_batch_of_holes)
{
    char *dir = rf_test_mkdtemp("lateskip-big"), shard[700], pat[700], key[64];
    ck_assert_int_eq(rf_test_make_big_restart_shards(dir, 1, BIG_N, 29), 0);
    snprintf(shard, sizeof shard, "%s/shard-0000.tar", dir);
    snprintf(pat, sizeof pat, "%s/shard-*.tar", dir);
    for (uint32_t k = 0; k < BIG_BAD; k++)
        ck_assert_int_eq(rf_test_damage_entropy(shard, k, key, sizeof key), 0);
    big_run *ref = malloc(sizeof *ref), *r = malloc(sizeof *r);
    big_collect(pat, 0, 2, ref);
    ck_assert_uint_eq(ref->st.skipped_by_reason[RF_SKIP_CORRUPT], BIG_BAD);
    static const uint32_t threads[] = {1, 4};
    for (uint32_t t = 0; t < 2; t++) {
        big_collect(pat, 2, threads[t], r);
        ck_assert_uint_eq(r->n, BIG_N);
        ck_assert_uint_eq(r->st.skipped, BIG_BAD);
        ck_assert_uint_eq(r->st.skipped_by_reason[RF_SKIP_CORRUPT], BIG_BAD);
        ck_assert_uint_le(r->st.gpu_decoded, BIG_N - BIG_BAD);
        uint32_t real = 0;
        for (uint32_t k = 0; k < r->n; k++) {
            if (r->pad[k])
                continue;
            real++;
            ck_assert_uint_ge(r->ids[k], BIG_BAD); /* no damaged one */
            uint32_t j = 0;
            while (j < ref->n && (ref->pad[j] || ref->ids[j] != r->ids[k]))
                j++;
            ck_assert_msg(j < ref->n, "sample %llu not in the reference",
                          (unsigned long long)r->ids[k]);
            ck_assert_msg(memcmp(ref->px + (size_t)j * BIG_PX, r->px + (size_t)k * BIG_PX,
                                 BIG_PX) == 0, "sample %llu: other pixels",
                          (unsigned long long)r->ids[k]);
        }
        ck_assert_uint_eq(real, BIG_N - BIG_BAD);
        free(r->px);
    }
    free(ref->px), free(ref), free(r);
}
END_TEST

/* A sample whose read fails (an io skip, on the I/O thread, before any verdict) in a batch whose
 * other verdicts come late: counted at once, a hole when its batch is checked, filled in
 * output order like the damaged ones; the same samples as with verdicts on the decode thread. */
static void io_failure_in_the_batch(int late)
{
    char shard[700];
    snprintf(shard, sizeof shard, "%s/shard-0000.tar", g_dir);
    g_eio_off = rf_test_member_offset(shard, "00000012.jpg");
    ck_assert_uint_ne(g_eio_off, UINT64_MAX);
    run *ref = malloc(sizeof *ref), *r = malloc(sizeof *r);
    collect(&(opts){.late = 0}, ref);
    collect(&(opts){.late = late}, r);
    g_eio_off = UINT64_MAX;
    ck_assert_msg(ref->rc == 0 && r->rc == 0, "%s / %s", ref->msg, r->msg);
    ck_assert_uint_eq(r->n, MAXRUN);
    ck_assert_uint_eq(r->st.skipped_by_reason[RF_SKIP_IO], EPOCHS);
    ck_assert_uint_eq(r->st.skipped_by_reason[RF_SKIP_CORRUPT], NBAD * EPOCHS);
    ck_assert_uint_eq(r->st.skipped, (NBAD + 1) * EPOCHS);
    ck_assert_uint_eq(r->st.epoch_delivered + r->st.epoch_skipped, NS);
    ck_assert_int_eq(find(r, 0, 12), -1);
    same_samples(ref, r);
    free(ref->px), free(r->px);
    free(ref), free(r);
}

START_TEST(late_verdicts_with_io_failure_in_the_batch)
{
    io_failure_in_the_batch(1);
}
END_TEST

/* The device layout: the failed read placed nothing, so the first submit gives its row zero
 * pixels at held bytes (pl_gpu_batch_desc) and the refill compacts them out with the bad
 * packets. */
START_TEST(device_layout_with_io_failure_in_the_batch)
{
    io_failure_in_the_batch(2);
}
END_TEST

/* Two damaged members in a row (plan order NONE: file order) over max_consecutive_skips 1: the
 * error of the CPU path's skip, naming the shard and the second member with its offset. */
START_TEST(late_verdicts_consecutive_limit)
{
    run *r = malloc(sizeof *r), *ref = malloc(sizeof *ref);
    opts o = {.late = 1, .max_consec = 1, .order = RF_ORDER_NONE};
    collect(&o, r);
    o.late = 0;
    collect(&o, ref);
    ck_assert_int_eq(ref->rc, RF_EDECODE);
    ck_assert_int_eq(r->rc, RF_EDECODE);
    char member[96];
    member_at(g_bad[1], member, sizeof member);
    ck_assert_msg(strstr(r->msg, "2 consecutive samples failed; last: ") &&
                      strstr(r->msg, "shard-0000.tar") && strstr(r->msg, member),
                  "%s", r->msg);
    ck_assert_msg(strstr(ref->msg, "2 consecutive samples failed") && strstr(ref->msg, member),
                  "%s", ref->msg);
    /* the batches before the failure arrived, the same ones */
    ck_assert_uint_eq(r->batches, ref->batches);
    ck_assert_mem_eq(r->ids, ref->ids, sizeof(uint64_t) * r->n);
    free(r->px), free(ref->px);
    free(r), free(ref);
}
END_TEST

/* A state saved after a batch that was refilled (sample 5 and 6 replaced, order NONE) resumes
 * where the CPU path's skip resumes: the rest of the epoch, the same samples as the
 * reference's resume, each once, and the samples before the checkpoint not again. */
static void resume_after_refilled_batch(int late)
{
    run *a = malloc(sizeof *a), *b = malloc(sizeof *b), *ra = malloc(sizeof *ra),
        *rb = malloc(sizeof *rb);
    opts o = {.late = late, .order = RF_ORDER_NONE, .batches = 2};
    collect(&o, a);
    ck_assert_uint_eq(a->st.epoch_skipped, 2); /* batch 0 held both */
    o.late = 0;
    collect(&o, b);
    ck_assert_uint_eq(b->st.epoch_skipped, 2);
    ck_assert_mem_eq(a->state, b->state, a->state_len);
    opts resume = {.late = late, .order = RF_ORDER_NONE, .resume = a->state,
                   .resume_len = a->state_len};
    collect(&resume, ra);
    resume.late = 0;
    collect(&resume, rb);
    ck_assert_msg(ra->rc == 0 && rb->rc == 0, "%s / %s", ra->msg, rb->msg);
    same_samples(rb, ra);
    uint32_t seen[NS] = {0};
    for (uint32_t k = 0; k < ra->n; k++)
        if (!ra->pad[k] && ra->epoch[k] == 0)
            seen[ra->ids[k]]++;
    for (uint32_t id = 0; id < NS; id++)
        ck_assert_uint_le(seen[id], 1);
    for (uint32_t id = 16; id < NS; id++) /* after the checkpoint: each good one */
        ck_assert_uint_eq(seen[id], !is_bad(id));
    free(a->px), free(b->px), free(ra->px), free(rb->px);
    free(a), free(b), free(ra), free(rb);
}

START_TEST(late_verdicts_resume_after_refilled_batch)
{
    resume_after_refilled_batch(1);
}
END_TEST

START_TEST(device_layout_resume_after_refilled_batch)
{
    resume_after_refilled_batch(2);
}
END_TEST

/* Fail mode with late verdicts: the error of the batch check, naming shard, member and offset,
 * the same member the decode thread's verdict names. */
START_TEST(late_verdicts_fail_mode_names_member)
{
    const char *pats[1];
    rf_config c = rf_test_host_config(pats, g_pat, SIZE);
    c.gpu_decode = 1;
    c.order = RF_ORDER_NONE;
    c.batch_size = 8;
    c.epochs = 1;
    rf_test_hooks h = {.gpu_late_verdicts = 1};
    rf_loader *ld;
    char err[512];
    ck_assert_int_eq(rf_loader_create_hooked(&c, &h, &ld, err, sizeof err), 0);
    rf_batch *b;
    ck_assert_int_eq(rf_loader_next(ld, &b), RF_EDECODE);
    char member[96];
    member_at(g_bad[0], member, sizeof member);
    const char *msg = rf_last_error(ld);
    ck_assert_msg(strstr(msg, "shard-0000.tar") && strstr(msg, member) &&
                      strstr(msg, "(GPU decode)"), "%s", msg);
    ck_assert_int_eq(rf_loader_next(ld, &b), RF_EDECODE); /* sticky */
    rf_loader_destroy(ld);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("lateskip");
    TCase *tc = tcase_create("lateskip");
    tcase_set_timeout(tc, 300);
    tcase_add_unchecked_fixture(tc, make_corpus, NULL);
    tcase_add_test(tc, late_verdicts_skip_like_decode_thread_verdicts);
    tcase_add_test(tc, late_verdicts_with_io_failure_in_the_batch);
    tcase_add_test(tc, late_verdicts_consecutive_limit);
    tcase_add_test(tc, late_verdicts_resume_after_refilled_batch);
    tcase_add_test(tc, late_verdicts_fail_mode_names_member);
    tcase_add_test(tc, device_layout_skip_like_decode_thread_verdicts);
    tcase_add_test(tc, device_layout_resume_after_refilled_batch);
    tcase_add_test(tc, device_layout_batch_of_holes);
    tcase_add_test(tc, device_layout_with_io_failure_in_the_batch);
    suite_add_tcase(s, tc);
    return rf_test_run_suite(s);
}
