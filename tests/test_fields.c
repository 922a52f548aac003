/* test_fields.c — extra fields (rf_config.fields): members found in a sample's span
 * (rf_tar_locate_fields), delivered byte for byte per batch in batch order at 1, 2 and 4 decode
 * threads with the same output, padding rows empty, a missing member and one over
 * max_field_bytes as errors naming shard, sample or member and offset (or skips whose
 * replacements bring their own fields), the list's checks at create, the copy
 * rf_loader_config reports, and the sample hook's view of them. Shards are written by GNU tar
 * from files, as users pack theirs. */
#include <check.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "loaders/tar.h"
#include "ringfeed.h"
#include "synth.h"
#include "testutil.h"

#define N 13
#define LIMIT 300u   /* max_field_bytes of these tests */
#define EMPTY_TXT 2  /* sample with an empty caption */
#define FULL_TXT 4   /* sample whose caption is exactly LIMIT bytes */
#define NO_TXT 5     /* bad shard: no caption member */
#define BIG_TXT 8    /* bad shard: a caption of LIMIT + 1 bytes */

static char *g_good, *g_bad;
static char g_txt[N][LIMIT + 2], g_json[N][64];
static size_t g_txt_len[N], g_json_len[N];

/* Sample i's caption (UTF-8, of a length that depends on i; empty, exactly LIMIT bytes and one
 * over it for the samples named above) and its JSON metadata. */
static void make_contents(void)
{
    for (uint32_t i = 0; i < N; i++) {
        size_t n = 0;
        if (i == FULL_TXT || i == BIG_TXT) {
            n = i == FULL_TXT ? LIMIT : LIMIT + 1;
            for (size_t k = 0; k < n; k++)
                g_txt[i][k] = (char)('a' + k % 26);
        } else if (i != EMPTY_TXT) {
            for (uint32_t r = 0; r <= i % 3; r++) /* "über café ☕" in UTF-8 */
                n += (size_t)snprintf(g_txt[i] + n, sizeof g_txt[i] - n,
                                      "caption %u: ein Hund \xc3\xbc" "ber caf\xc3\xa9 "
                                      "\xe2\x98\x95; ", i);
        }
        g_txt_len[i] = n;
        g_json_len[i] = (size_t)snprintf(g_json[i], sizeof g_json[i],
                                         "{\"id\": %u, \"w\": 64, \"tags\": [\"t%u\"]}\n", i,
                                         i % 4);
    }
}

/* Members for rf_test_make_member_shard: ctx != NULL makes the bad shard. */
static const void *member(uint32_t i, const char *ext, size_t *len, void *ctx)
{
    int txt = strcmp(ext, "txt") == 0;
    if (txt && (i == NO_TXT && ctx))
        return NULL;
    if (txt && i == BIG_TXT && !ctx) {
        *len = LIMIT - 1; /* the good shard: within the limit */
        return g_txt[i];
    }
    *len = txt ? g_txt_len[i] : g_json_len[i];
    return txt ? (const void *)g_txt[i] : (const void *)g_json[i];
}

static void setup(void)
{
    make_contents();
    static const char *const exts[] = {"txt", "json"};
    char *dir = rf_test_mkdtemp("fields-good"), *bdir = rf_test_mkdtemp("fields-bad");
    g_good = rf_test_make_member_shard(dir, N, exts, 2, member, NULL);
    g_bad = rf_test_make_member_shard(bdir, N, exts, 2, member, (void *)1);
}

static rf_config fields_config(const char **pat, const char *shard, const char *fields)
{
    rf_config c = rf_test_host_config(pat, shard, 16);
    c.batch_size = 5;
    c.decode_threads = 2;
    c.fields = fields;
    c.max_field_bytes = LIMIT;
    c.label_source = RF_LABEL_NONE;
    return c;
}

/* The caption and metadata the good shard holds for the sample called key. */
static void expected(const char *key, int bad_shard, const char **txt, size_t *tlen,
                     const char **json, size_t *jlen)
{
    uint32_t i = (uint32_t)strtoul(key, NULL, 10);
    ck_assert_uint_lt(i, N);
    *txt = member(i, "txt", tlen, bad_shard ? (void *)1 : NULL);
    *json = member(i, "json", jlen, NULL);
}

/* Check every row of batch b against the shard's members: fields in rf_config order, each
 * sample's bytes exact, padding empty. Returns an FNV-1a digest of keys and field bytes in
 * batch order. */
static uint64_t check_batch(const rf_batch *b, int bad_shard, uint64_t h)
{
    ck_assert_uint_eq(b->nfields, 2);
    ck_assert_str_eq(b->fields[0].name, "txt");
    ck_assert_str_eq(b->fields[1].name, "json");
    for (uint32_t i = 0; i < b->count; i++) {
        const char *txt, *json;
        size_t tlen, jlen;
        const rf_field *t = &b->fields[0], *j = &b->fields[1];
        if (b->is_padding[i]) {
            ck_assert_uint_eq(t->lengths[i], 0);
            ck_assert_uint_eq(j->lengths[i], 0);
            continue;
        }
        expected(b->keys[i], bad_shard, &txt, &tlen, &json, &jlen);
        ck_assert_msg(txt != NULL, "sample %s has no caption and was delivered", b->keys[i]);
        ck_assert_uint_eq(t->lengths[i], tlen);
        ck_assert_uint_eq(j->lengths[i], jlen);
        ck_assert(memcmp(t->data + t->offsets[i], txt, tlen) == 0);
        ck_assert(memcmp(j->data + j->offsets[i], json, jlen) == 0);
        for (const char *p = b->keys[i]; *p; p++)
            h = (h ^ (uint8_t)*p) * 1099511628211ull;
        for (size_t k = 0; k < tlen; k++)
            h = (h ^ (uint8_t)txt[k]) * 1099511628211ull;
    }
    return h;
}

/* Run c for `epochs` epochs, checking every batch; returns the digest, and per sample how
 * often it was delivered (not counting padding) through seen. */
static uint64_t run(rf_config c, uint32_t epochs, int bad_shard, uint32_t seen[N], rf_stats *st)
{
    c.epochs = epochs;
    rf_loader *ld = rf_test_create_ok(&c);
    uint64_t h = 1469598103934665603ull;
    rf_batch *b;
    for (int rc; (rc = rf_loader_next(ld, &b)) != RF_DONE;) {
        if (rc == RF_EPOCH_END)
            continue;
        ck_assert_msg(rc == 0, "next: %d %s", rc, rf_last_error(ld));
        h = check_batch(b, bad_shard, h);
        for (uint32_t i = 0; i < b->count; i++)
            if (!b->is_padding[i])
                seen[strtoul(b->keys[i], NULL, 10)]++;
        ck_assert_int_eq(rf_loader_release(ld, b, NULL), 0);
    }
    if (st) {
        rf_stats_init(st);
        ck_assert_int_eq(rf_loader_stats(ld, st), 0);
    }
    rf_loader_destroy(ld);
    return h;
}

START_TEST(locate_finds_each_field_by_exact_extension)
{
    size_t len;
    uint8_t *tar = rf_test_read_file(g_good, &len);
    ck_assert_ptr_nonnull(tar);
    uint64_t end = rf_test_member_offset(g_good, "00000001.jpg");
    uint64_t txt_hdr = rf_test_member_offset(g_good, "00000000.txt");
    static const char *const exts[] = {"txt", "json", "TXT", "cls", "jpg", "tx"};
    rf_tar_span_member img, lbl, f[6];
    rf_err e = {0};
    ck_assert_int_eq(rf_tar_locate_fields(tar, end, "00000000", NULL, NULL, exts, 6, &img, &lbl,
                                          f, &e), 0);
    ck_assert_uint_eq(f[0].hdr, txt_hdr);
    ck_assert_uint_eq(f[0].off, txt_hdr + 512);
    ck_assert_uint_eq(f[0].len, g_txt_len[0]);
    ck_assert(memcmp(tar + f[0].off, g_txt[0], g_txt_len[0]) == 0);
    ck_assert_uint_eq(f[1].len, g_json_len[0]);
    ck_assert(memcmp(tar + f[1].off, g_json[0], g_json_len[0]) == 0);
    ck_assert_uint_eq(f[2].off, 0); /* case-sensitive, as WebDataset */
    ck_assert_uint_eq(f[3].off, 0); /* no label member */
    ck_assert_uint_eq(lbl.off, 0);
    ck_assert_uint_eq(f[4].off, img.off); /* a field may name the image member */
    ck_assert_uint_eq(f[4].len, img.len);
    ck_assert_uint_eq(f[5].off, 0); /* a prefix is not the extension */
    /* rf_tar_locate is the same walk without fields */
    uint32_t doff, dlen, dhdr, loff, llen, lhdr;
    ck_assert_int_eq(rf_tar_locate(tar, end, "00000000", NULL, NULL, &doff, &dlen, &dhdr, &loff,
                                   &llen, &lhdr, &e), 0);
    ck_assert_uint_eq(doff, img.off);
    ck_assert_uint_eq(dlen, img.len);
    /* with label_ext "json" (RF_LABEL_JSON) the one walk finds KEY.json as the label, and a
     * field "json" gets the same member */
    ck_assert_int_eq(rf_tar_locate_fields(tar, end, "00000000", NULL, "json", exts, 6, &img, &lbl,
                                          f, &e), 0);
    ck_assert_uint_eq(lbl.off, f[1].off);
    ck_assert_uint_eq(lbl.len, g_json_len[0]);
    free(tar);
}
END_TEST

static const uint32_t thread_counts[] = {1, 2, 4};

/* Every sample once per epoch with its own caption and metadata, in batch order, and the same
 * batches (keys and bytes) at 1, 2 and 4 decode threads. */
START_TEST(fields_round_trip_at_any_thread_count)
{
    const char *pat;
    rf_config c = fields_config(&pat, g_good, "txt,json");
    c.seed = 11;
    c.decode_threads = 1;
    uint32_t seen1[N] = {0}, seen[N] = {0};
    uint64_t h1 = run(c, 2, 0, seen1, NULL);
    c.decode_threads = thread_counts[_i];
    uint64_t h = run(c, 2, 0, seen, NULL);
    ck_assert_uint_eq(h, h1);
    for (uint32_t i = 0; i < N; i++)
        ck_assert_uint_eq(seen[i], 2);
}
END_TEST

/* A rank padded with repeated samples: their rows are empty, the real rows intact. */
START_TEST(padding_rows_are_empty)
{
    const char *pat;
    uint32_t pads = 0;
    for (uint32_t rank = 0; rank < 2; rank++) {
        rf_config c = fields_config(&pat, g_good, "txt,json");
        c.world_size = 2, c.rank = rank, c.batch_size = 4, c.epochs = 1;
        rf_loader *ld = rf_test_create_ok(&c);
        rf_batch *b;
        for (int rc; (rc = rf_loader_next(ld, &b)) == 0;) {
            check_batch(b, 0, 0);
            for (uint32_t i = 0; i < b->count; i++)
                pads += b->is_padding[i];
            ck_assert_int_eq(rf_loader_release(ld, b, NULL), 0);
        }
        rf_loader_destroy(ld);
    }
    ck_assert_uint_eq(pads, 1); /* 13 samples over 2 ranks: one padding sample */
}
END_TEST

static int next_error(rf_config c, char *msg, size_t n)
{
    rf_loader *ld = rf_test_create_ok(&c);
    rf_batch *b;
    int rc;
    while ((rc = rf_loader_next(ld, &b)) == 0)
        ck_assert_int_eq(rf_loader_release(ld, b, NULL), 0);
    snprintf(msg, n, "%s", rf_last_error(ld));
    rf_loader_destroy(ld);
    return rc;
}

/* Fail mode: the missing caption is RF_EFORMAT naming shard, sample, offset and extension;
 * asking only for json, the same shard is good; a caption over max_field_bytes is RF_ELIMIT
 * naming the member and its offset. */
START_TEST(missing_and_oversized_members_fail_naming_them)
{
    const char *pat;
    char msg[1024], want[1024];
    rf_config c = fields_config(&pat, g_bad, "txt,json");
    c.order = RF_ORDER_NONE;
    ck_assert_int_eq(next_error(c, msg, sizeof msg), RF_EFORMAT);
    snprintf(want, sizeof want, "%s: sample 00000005 at offset %llu has no member 00000005.txt "
             "(rf_config.fields asks for \"txt\")", g_bad,
             (unsigned long long)rf_test_member_offset(g_bad, "00000005.jpg"));
    ck_assert_str_eq(msg, want);

    c = fields_config(&pat, g_bad, "json"); /* json only: every sample of it is good */
    c.epochs = 1;
    rf_loader *ld = rf_test_create_ok(&c);
    rf_test_drain(ld);
    rf_loader_destroy(ld);

    char *dir = rf_test_mkdtemp("fields-big");
    static const char *const exts[] = {"txt"};
    char *big = rf_test_make_member_shard(dir, N, exts, 1, member, NULL);
    c = fields_config(&pat, big, "txt");
    c.max_field_bytes = LIMIT - 2; /* sample 8 has LIMIT - 1 bytes there, 4 has LIMIT */
    c.order = RF_ORDER_NONE;
    ck_assert_int_eq(next_error(c, msg, sizeof msg), RF_ELIMIT);
    snprintf(want, sizeof want, "%s: member 00000004.txt at offset %llu: %u bytes exceed "
             "max_field_bytes %u", big,
             (unsigned long long)rf_test_member_offset(big, "00000004.txt"), LIMIT, LIMIT - 2);
    ck_assert_str_eq(msg, want);
    free(big);
}
END_TEST

/* Skip mode: the sample without a caption counts under RF_SKIP_FIELD, the oversized one under
 * RF_SKIP_TOO_LARGE, neither is delivered, and the samples that replace them bring their own
 * fields (check_batch compares every row with its key's members), at any thread count. */
START_TEST(skip_mode_replaces_bad_samples_with_their_fields)
{
    const char *pat;
    rf_config c = fields_config(&pat, g_bad, "txt,json");
    c.on_error = RF_ON_ERROR_SKIP;
    c.decode_threads = thread_counts[_i];
    c.seed = 3;
    uint32_t seen[N] = {0};
    rf_stats st;
    run(c, 2, 1, seen, &st);
    for (uint32_t i = 0; i < N; i++)
        ck_assert_uint_eq(seen[i], i == NO_TXT || i == BIG_TXT ? 0 : 2);
    ck_assert_uint_eq(st.skipped_by_reason[RF_SKIP_FIELD], 2);
    ck_assert_uint_eq(st.skipped_by_reason[RF_SKIP_TOO_LARGE], 2);
    ck_assert_uint_eq(st.skipped, 4);
}
END_TEST

static void refused(const rf_config *c, const char *words)
{
    rf_loader *ld = NULL;
    char err[512] = "";
    ck_assert_int_eq(rf_loader_create(c, &ld, err, sizeof err), RF_EINVAL);
    ck_assert_ptr_null(ld);
    ck_assert_msg(strstr(err, words) != NULL, "\"%s\" does not say \"%s\"", err, words);
}

START_TEST(create_checks_the_list_and_the_source)
{
    const char *pat;
    static const struct {
        const char *list, *words;
    } bad[] = {
        {"", "fields \"\": entry 1 is not 1..64 printable ASCII bytes without space or '/'"},
        {"txt, json", "entry 2 is not"},
        {"txt,,json", "entry 2 is not"},
        {"txt,a/b", "entry 2 is not"},
        {"txt,json,txt", "\"txt\" is listed twice"},
        {"a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q", "more than 16 entries"},
    };
    rf_config c = fields_config(&pat, g_good, NULL);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        c.fields = bad[i].list;
        refused(&c, bad[i].words);
    }
    c.fields = "txt";
    c.max_field_bytes = (64u << 20) + 1;
    refused(&c, "max_field_bytes 67108865 out of range 1..67108864");

    /* folders and token files have no members to deliver */
    char *dir = rf_test_mkdtemp("fields-folder"), path[4096];
    snprintf(path, sizeof path, "%s/c0", dir);
    mkdir(path, 0755);
    uint8_t rgb[32 * 32 * 3], *jpg;
    size_t len;
    rf_synth_image(1, 32, 32, rgb);
    ck_assert_int_eq(rf_synth_jpeg(rgb, 32, 32, 90, 0, &jpg, &len), 0);
    snprintf(path, sizeof path, "%s/c0/a.jpg", dir);
    rf_test_write_file(path, jpg, len);
    free(jpg);
    c = fields_config(&pat, dir, "txt");
    c.source = RF_SOURCE_FOLDER;
    refused(&c, "fields \"txt\": only tar shards have members to deliver; a folder source has "
                "none");
    uint16_t tokens[1000] = {0};
    snprintf(path, sizeof path, "%s/tokens.bin", dir);
    rf_test_write_file(path, tokens, sizeof tokens);
    c = fields_config(&pat, path, "txt");
    c.source = RF_SOURCE_TOKENS, c.token_bytes = 2, c.seq_len = 16;
    refused(&c, "a token source has none");
}
END_TEST

/* The list is copied at create (the caller's buffer may change), reported as the loader's own
 * copy; without fields a batch has none. */
/* The sample hook sees its sample's fields through the view, named in the list's order and
 * byte for byte as the batch delivers them (a padding repeat's empty); without fields, none.
 * The hook counts mismatches (it may not call check's asserts on a decode thread). */
typedef struct hook_seen {
    _Atomic uint32_t calls, bad;
    uint32_t want;
} hook_seen;

static int fields_hook(const rf_sample_view *v, void *arg)
{
    hook_seen *hs = arg;
    atomic_fetch_add_explicit(&hs->calls, 1, memory_order_relaxed);
    int ok = v->nfields == hs->want;
    if (hs->want == 0) {
        ok = ok && !v->field_names && !v->field_data && !v->field_lengths;
    } else if (ok) {
        const char *txt, *json;
        size_t tlen, jlen;
        expected(v->key, 0, &txt, &tlen, &json, &jlen);
        if (v->is_padding)
            tlen = jlen = 0;
        ok = strcmp(v->field_names[0], "txt") == 0 && strcmp(v->field_names[1], "json") == 0 &&
             v->field_lengths[0] == tlen && v->field_lengths[1] == jlen &&
             memcmp(v->field_data[0], txt, tlen) == 0 && memcmp(v->field_data[1], json, jlen) == 0;
    }
    if (!ok)
        atomic_fetch_add_explicit(&hs->bad, 1, memory_order_relaxed);
    return 0;
}

START_TEST(hook_view_carries_the_samples_fields)
{
    const char *pat;
    for (uint32_t want = 0; want <= 2; want += 2) {
        hook_seen hs = {.want = want};
        for (uint32_t rank = 0; rank < 2; rank++) { /* 13 samples: one padding repeat */
            rf_config c = fields_config(&pat, g_good, want ? "txt,json" : NULL);
            c.world_size = 2, c.rank = rank, c.batch_size = 4, c.epochs = 1;
            c.sample_hook = fields_hook;
            c.sample_hook_ctx = &hs;
            rf_loader *ld = rf_test_create_ok(&c);
            rf_batch *b;
            int rc;
            while ((rc = rf_loader_next(ld, &b)) == 0)
                ck_assert_int_eq(rf_loader_release(ld, b, NULL), 0);
            ck_assert_int_eq(rc, RF_EPOCH_END);
            rf_loader_destroy(ld);
        }
        ck_assert_uint_eq(atomic_load(&hs.calls), N + 1);
        ck_assert_uint_eq(atomic_load(&hs.bad), 0);
    }
}
END_TEST

START_TEST(config_reports_the_loaders_copy)
{
    const char *pat;
    char list[] = "json,txt";
    rf_config c = fields_config(&pat, g_good, list);
    rf_loader *ld = rf_test_create_ok(&c);
    memset(list, 'x', sizeof list - 1);
    rf_config got;
    rf_config_init(&got);
    ck_assert_int_eq(rf_loader_config(ld, &got), 0);
    ck_assert_ptr_ne(got.fields, list);
    ck_assert_str_eq(got.fields, "json,txt");
    ck_assert_uint_eq(got.max_field_bytes, LIMIT);
    rf_batch *b;
    ck_assert_int_eq(rf_loader_next(ld, &b), 0);
    ck_assert_str_eq(b->fields[0].name, "json");
    ck_assert_str_eq(b->fields[1].name, "txt");
    rf_loader_destroy(ld);

    c = fields_config(&pat, g_good, NULL);
    ld = rf_test_create_ok(&c);
    ck_assert_int_eq(rf_loader_next(ld, &b), 0);
    ck_assert_uint_eq(b->nfields, 0);
    ck_assert_ptr_null(b->fields);
    rf_loader_destroy(ld);
}
END_TEST

int main(void)
{
    setup();
    Suite *s = suite_create("fields");
    TCase *tc = tcase_create("fields");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, locate_finds_each_field_by_exact_extension);
    tcase_add_loop_test(tc, fields_round_trip_at_any_thread_count, 0, 3);
    tcase_add_test(tc, padding_rows_are_empty);
    tcase_add_test(tc, missing_and_oversized_members_fail_naming_them);
    tcase_add_loop_test(tc, skip_mode_replaces_bad_samples_with_their_fields, 0, 3);
    tcase_add_test(tc, create_checks_the_list_and_the_source);
    tcase_add_test(tc, config_reports_the_loaders_copy);
    tcase_add_test(tc, hook_view_carries_the_samples_fields);
    suite_add_tcase(s, tc);
    return rf_test_run_suite(s);
}
