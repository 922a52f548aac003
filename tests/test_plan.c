/* test_plan.c — epoch order, rank partition and resume cursor, without any I/O.
 * The loader's exactly-once and resume guarantees rest on these properties. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"
#include "testutil.h"

static rf_plan mk(uint64_t n, uint32_t batch, uint32_t rank, uint32_t world, uint32_t order,
                  uint32_t drop_last, uint32_t remainder)
{
    rf_plan p;
    rf_err e = {0};
    ck_assert_int_eq(rf_plan_init(&p, n, 42, order, batch, drop_last, remainder, rank, world, &e), 0);
    return p;
}

START_TEST(permutation_is_full_and_seeded)
{
    rf_plan p = mk(1000, 7, 0, 1, RF_ORDER_GLOBAL, 0, RF_REMAINDER_PAD);
    rf_plan_epoch(&p, 3, 0);
    uint8_t *seen = calloc(1000, 1);
    uint64_t *first = malloc(1000 * sizeof *first);
    for (uint64_t i = 0; i < 1000; i++) {
        uint64_t id = p.perm[i];
        ck_assert_uint_lt(id, 1000);
        ck_assert_int_eq(seen[id], 0);
        seen[id] = 1;
        first[i] = id;
    }
    int moved = 0;
    for (uint64_t i = 0; i < 1000; i++)
        moved += first[i] != i;
    ck_assert_int_gt(moved, 900); /* a real shuffle, not the identity */
    rf_plan_epoch(&p, 4, 0);
    ck_assert_int_ne(memcmp(first, p.perm, 1000 * sizeof *first), 0); /* epochs differ */
    rf_plan_epoch(&p, 3, 0);
    ck_assert_int_eq(memcmp(first, p.perm, 1000 * sizeof *first), 0); /* and repeat */
    free(seen);
    free(first);
    rf_plan_free(&p);
}
END_TEST

/* Every (samples, batch, world) shape: ranks are disjoint and complete, with equal batches. */
static void check_partition(uint64_t n, uint32_t batch, uint32_t world, uint32_t remainder,
                            uint32_t drop_last)
{
    uint32_t *count = calloc(n, sizeof *count);
    uint64_t batches0 = UINT64_MAX, real = 0;
    for (uint32_t r = 0; r < world; r++) {
        rf_plan p = mk(n, batch, r, world, RF_ORDER_GLOBAL, drop_last, remainder);
        rf_plan_epoch(&p, 1, 0);
        if (batches0 == UINT64_MAX)
            batches0 = p.batches;
        ck_assert_uint_eq(p.batches, batches0);
        uint64_t got = 0;
        for (uint64_t k = 0; k < p.batches; k++)
            got += rf_plan_batch_count(&p, k);
        for (uint64_t j = 0; j < got; j++) {
            uint64_t id, pos;
            uint8_t pad;
            rf_plan_sample(&p, j, &id, &pos, &pad);
            ck_assert_uint_eq(id, p.perm[pos]);
            if (!pad) {
                count[id]++;
                real++;
            }
        }
        rf_plan_free(&p);
    }
    for (uint64_t i = 0; i < n; i++)
        ck_assert_uint_le(count[i], 1);
    if (remainder == RF_REMAINDER_PAD && !drop_last)
        ck_assert_uint_eq(real, n); /* complete */
    else
        ck_assert_uint_ge(real + (uint64_t)world * batch + world, n); /* drops < one batch/rank */
    free(count);
}

START_TEST(ranks_disjoint_complete_equal)
{
    static const uint64_t ns[] = {1, 2, 7, 10, 97, 256, 1000, 1001};
    static const uint32_t bs[] = {1, 3, 8, 32};
    static const uint32_t ws[] = {1, 2, 3, 7, 8};
    for (size_t a = 0; a < 8; a++)
        for (size_t b = 0; b < 4; b++)
            for (size_t c = 0; c < 5; c++) {
                if (ns[a] < ws[c])
                    continue;
                check_partition(ns[a], bs[b], ws[c], RF_REMAINDER_PAD, 0);
                if (ns[a] >= (uint64_t)ws[c] * bs[b]) {
                    check_partition(ns[a], bs[b], ws[c], RF_REMAINDER_DROP, 0);
                    check_partition(ns[a], bs[b], ws[c], RF_REMAINDER_PAD, 1);
                }
            }
}
END_TEST

/* Rank r consumed k batches in world w => positions [0, k*B*w) consumed; re-partitioning the
 * rest over w2 ranks covers exactly the remaining positions. */
START_TEST(resume_cursor_survives_world_change)
{
    const uint64_t n = 103;
    const uint32_t B = 4;
    const uint32_t w1s[] = {2, 3, 1}, w2s[] = {3, 1, 2};
    for (int t = 0; t < 3; t++) {
        uint32_t w1 = w1s[t], w2 = w2s[t];
        rf_plan p0 = mk(n, B, 0, w1, RF_ORDER_GLOBAL, 0, RF_REMAINDER_PAD);
        rf_plan_epoch(&p0, 0, 0);
        for (uint64_t k = 0; k < p0.batches; k++) {
            uint64_t consumed = k * B * w1;
            if (consumed >= n)
                break;
            uint32_t *seen = calloc(n, sizeof *seen);
            for (uint32_t r = 0; r < w1; r++) { /* before the save */
                rf_plan p = mk(n, B, r, w1, RF_ORDER_GLOBAL, 0, RF_REMAINDER_PAD);
                rf_plan_epoch(&p, 0, 0);
                for (uint64_t j = 0; j < k * B; j++) {
                    uint64_t id, pos;
                    uint8_t pad;
                    rf_plan_sample(&p, j, &id, &pos, &pad);
                    ck_assert_uint_lt(pos, consumed);
                    seen[id]++;
                }
                rf_plan_free(&p);
            }
            for (uint32_t r = 0; r < w2; r++) { /* after the resume */
                rf_plan p = mk(n, B, r, w2, RF_ORDER_GLOBAL, 0, RF_REMAINDER_PAD);
                rf_plan_epoch(&p, 0, consumed);
                for (uint64_t j = 0; j < p.per_rank; j++) {
                    uint64_t id, pos;
                    uint8_t pad;
                    rf_plan_sample(&p, j, &id, &pos, &pad);
                    if (!pad) {
                        ck_assert_uint_ge(pos, consumed);
                        seen[id]++;
                    }
                }
                rf_plan_free(&p);
            }
            for (uint64_t i = 0; i < n; i++)
                ck_assert_uint_eq(seen[i], 1);
            free(seen);
        }
        rf_plan_free(&p0);
    }
}
END_TEST

START_TEST(state_blob_roundtrip_and_corruption)
{
    rf_resume r = {.seed = 7, .epoch = 3, .consumed = 99, .n = 1000, .world = 2, .rank = 1,
                   .order = 0, .batch = 32},
              back;
    uint8_t blob[RF_STATE_BYTES_MAX];
    rf_state_encode(&r, blob);
    rf_err e = {0};
    ck_assert_int_eq(rf_state_decode(blob, RF_STATE_BYTES, &back, &e), 0);
    ck_assert_uint_eq(back.seed, 7);
    ck_assert_uint_eq(back.epoch, 3);
    ck_assert_uint_eq(back.consumed, 99);
    ck_assert_uint_eq(back.world, 2);
    blob[20] ^= 1;
    ck_assert_int_eq(rf_state_decode(blob, RF_STATE_BYTES, &back, &e), RF_ERESUME);
    ck_assert_ptr_nonnull(strstr(e.msg, "checksum"));
    ck_assert_int_eq(rf_state_decode(blob, 10, &back, &e), RF_ERESUME);
    ck_assert_uint_eq(rf_state_bytes(&r), RF_STATE_BYTES);
    ck_assert_uint_eq(back.mix, 0);

    /* a mixing loader's blob: version 2, its fingerprint after the version 1 fields */
    uint8_t mixed[RF_STATE_BYTES_MAX];
    r.mix = 0x1234567890abcdefull;
    ck_assert_uint_eq(rf_state_bytes(&r), RF_STATE_BYTES_MIX);
    rf_state_encode(&r, mixed);
    ck_assert_int_eq(rf_state_decode(mixed, RF_STATE_BYTES_MIX, &back, &e), 0);
    ck_assert_uint_eq(back.mix, r.mix);
    ck_assert_uint_eq(back.consumed, 99);
    ck_assert_int_eq(rf_state_decode(mixed, RF_STATE_BYTES, &back, &e), RF_ERESUME);
    mixed[60] ^= 1;
    ck_assert_int_eq(rf_state_decode(mixed, RF_STATE_BYTES_MIX, &back, &e), RF_ERESUME);
    ck_assert_ptr_nonnull(strstr(e.msg, "checksum"));
}
END_TEST

/* Size buckets over 1000 samples in 5 buckets of uneven sizes, for 1 and 3 ranks, both
 * remainders and drop_last: every batch of one bucket, its padding repeats of that bucket,
 * each sample once per epoch over the ranks (all of them but what drop_last or remainder DROP
 * leave out), every rank as many batches, the same groups whatever the epoch's order, and
 * rf_plan_first/rf_plan_cursor agreeing with the batches' counts. */
START_TEST(size_buckets_batches_of_one_bucket)
{
    enum { N = 1000, NB = 5, B = 4 };
    for (uint32_t world = 1; world <= 3; world += 2)
        for (uint32_t mode = 0; mode < 3; mode++) {
            uint32_t drop_last = mode == 2, rem = mode == 1 ? RF_REMAINDER_DROP
                                                            : RF_REMAINDER_PAD;
            uint32_t seen[N] = {0}, batches = 0, count[NB] = {0};
            for (uint32_t rank = 0; rank < world; rank++) {
                rf_plan p = mk(N, B, rank, world, RF_ORDER_GLOBAL, drop_last, rem);
                uint16_t *of = malloc(N * sizeof *of);
                for (uint32_t i = 0; i < N; i++) /* bucket b holds about (b + 1) / 15 */
                    of[i] = (uint16_t)(i % 15 < 1 ? 0 : i % 15 < 3 ? 1 : i % 15 < 6 ? 2
                                       : i % 15 < 10 ? 3 : 4);
                if (rank == 0)
                    for (uint32_t i = 0; i < N; i++)
                        count[of[i]]++;
                rf_err e = {0};
                ck_assert_int_eq(rf_plan_set_buckets(&p, of, NB, &e), 0);
                rf_plan_epoch(&p, 2, 0);
                uint64_t j = 0;
                for (uint64_t k = 0; k < p.batches; k++) {
                    ck_assert_uint_eq(rf_plan_first(&p, k), j);
                    uint32_t n = rf_plan_batch_count(&p, k), b = rf_plan_batch_bucket(&p, k);
                    ck_assert(n >= 1 && n <= B);
                    ck_assert(!drop_last || n == B);
                    for (uint32_t i = 0; i < n; i++, j++) {
                        uint64_t id, pos;
                        uint8_t pad;
                        rf_plan_sample(&p, j, &id, &pos, &pad);
                        ck_assert_uint_eq(p.bk->of[id], b);
                        seen[id] += !pad;
                    }
                    /* the cursor after batch k, counted over every rank */
                    ck_assert_uint_eq(rf_plan_cursor(&p, 0, k + 1) -
                                          rf_plan_cursor(&p, 0, k), (uint64_t)n * world);
                }
                ck_assert_uint_eq(j, p.per_rank);
                if (rank == 0)
                    batches = (uint32_t)p.batches;
                ck_assert_uint_eq(p.batches, batches);
                rf_plan_free(&p);
            }
            uint32_t want = 0, got = 0, g = B * world;
            for (uint32_t b = 0; b < NB; b++)
                want += drop_last ? count[b] / g * g
                        : rem == RF_REMAINDER_DROP ? count[b] / world * world : count[b];
            for (uint32_t i = 0; i < N; i++) {
                ck_assert_uint_le(seen[i], 1);
                got += seen[i];
            }
            ck_assert_uint_eq(got, want);
        }
}
END_TEST

START_TEST(invalid_shapes_are_errors)
{
    rf_plan p;
    rf_err e = {0};
    ck_assert_int_eq(rf_plan_init(&p, 0, 1, 0, 8, 0, 0, 0, 1, &e), RF_EINVAL);
    ck_assert_int_eq(rf_plan_init(&p, 10, 1, 0, 8, 0, 0, 2, 2, &e), RF_EINVAL);
    ck_assert_int_eq(rf_plan_init(&p, 5, 1, 0, 8, 1, 0, 0, 1, &e), RF_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, "drop_last"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("plan");
    TCase *tc = tcase_create("plan");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, permutation_is_full_and_seeded);
    tcase_add_test(tc, ranks_disjoint_complete_equal);
    tcase_add_test(tc, resume_cursor_survives_world_change);
    tcase_add_test(tc, state_blob_roundtrip_and_corruption);
    tcase_add_test(tc, invalid_shapes_are_errors);
    tcase_add_test(tc, size_buckets_batches_of_one_bucket);
    suite_add_tcase(s, tc);
    return rf_test_run_suite(s);
}
