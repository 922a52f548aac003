/* test_settings.c — the settings table (src/base/settings.h, rf_config_settings) against its
 * uses: each row is a field of rf_config where the compiler put it, rf_config_init writes its
 * default, a field left AUTO gets it at create (a zeroed struct gives a loader with every
 * default), and a value out of a row's range is refused naming the field. Walks the rows, so
 * a new setting is covered by its row alone; what its default is and what it does are its
 * own tests (tests/test_config.c spells out the header's documented defaults). */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/settings.h"
#include "decode/decode.h"
#include "loaders/tar_parse.h"
#include "ringfeed.h"
#include "testutil.h"

static char *shard;      /* a tar shard of 6 labelled samples, made in main() */
static char *token_file; /* 1000 uint16 tokens */

static const rf_setting *rows(uint32_t *n)
{
    const rf_setting *t = rf_config_settings(n);
    ck_assert_ptr_nonnull(t);
    ck_assert_ptr_eq(rf_config_settings(NULL), t);
    ck_assert_uint_gt(*n, 70);
    return t;
}

static int is_int(const rf_setting *s)
{
    return s->type == RF_SETTING_BOOL || s->type == RF_SETTING_U32 || s->type == RF_SETTING_I32 ||
           s->type == RF_SETTING_U64 || s->type == RF_SETTING_ENUM;
}

static int is_float(const rf_setting *s)
{
    return s->type == RF_SETTING_F32 || s->type == RF_SETTING_F32X3;
}

static uint64_t int_max_of(const rf_setting *s)
{
    return s->type == RF_SETTING_U64 ? UINT64_MAX : s->type == RF_SETTING_I32 ? INT32_MAX
                                                                               : UINT32_MAX;
}

static void put_u(rf_config *c, const rf_setting *s, uint64_t v)
{
    if (s->size == 8)
        memcpy((char *)c + s->offset, &v, 8);
    else {
        uint32_t w = (uint32_t)v;
        memcpy((char *)c + s->offset, &w, 4);
    }
}

static uint64_t get_u(const rf_config *c, const rf_setting *s)
{
    uint64_t v = 0;
    uint32_t w;
    if (s->size == 8)
        memcpy(&v, (const char *)c + s->offset, 8);
    else
        memcpy(&w, (const char *)c + s->offset, 4), v = w;
    return v;
}

static void put_f(rf_config *c, const rf_setting *s, float f)
{
    for (uint64_t k = 0; k < s->size / 4; k++)
        memcpy((char *)c + s->offset + 4 * k, &f, 4);
}

static float get_f(const rf_config *c, const rf_setting *s, int k)
{
    float f;
    memcpy(&f, (const char *)c + s->offset + 4 * k, 4);
    return f;
}

/* ---- the rows themselves -------------------------------------------------------------------- */

START_TEST(rows_are_the_fields_of_rf_config)
{
    uint32_t n, nl = 0, k = 0;
    const rf_setting *t = rows(&n);
    const rf_field_layout *l = rf_abi_layout(&nl);
    static const char *const stages[] = {"base", "plan", "io", "decode", "backend",
                                         "pipeline", "loaders"};
    uint64_t end = 0;
    for (uint32_t i = 0; i < nl; i++) {
        if (strcmp(l[i].struct_name, "rf_config") != 0 || !l[i].name[0])
            continue;
        ck_assert_uint_lt(k, n);
        const rf_setting *s = &t[k++];
        ck_assert_str_eq(s->name, l[i].name);
        ck_assert_uint_eq(s->offset, l[i].offset);
        ck_assert_uint_eq(s->size, l[i].size);
        ck_assert_uint_ge(s->offset, end); /* in declaration order */
        end = s->offset + s->size;
        /* what the tools print: a doc, a known stage, an enum's names for each value */
        ck_assert_msg(s->doc && strlen(s->doc) > 8 && strlen(s->doc) < 90, "%s: doc", s->name);
        ck_assert_ptr_nonnull(s->unit);
        int known = 0;
        for (size_t j = 0; j < sizeof stages / sizeof stages[0]; j++)
            known |= strcmp(s->stage, stages[j]) == 0;
        ck_assert_msg(known, "%s: stage %s is not a folder", s->name, s->stage);
        ck_assert_uint_le(s->type, RF_SETTING_F32S);
        if (s->type == RF_SETTING_ENUM) {
            uint64_t names = 1;
            for (const char *p = s->values; *p; p++)
                names += *p == ',';
            ck_assert_msg(s->min == 0 && names == s->max + 1, "%s: %llu names for 0..%llu",
                          s->name, (unsigned long long)names, (unsigned long long)s->max);
        } else {
            ck_assert_ptr_null(s->values);
        }
        if (is_int(s))
            ck_assert_msg(s->min <= s->max && s->max <= int_max_of(s), "%s: range", s->name);
        if (is_float(s))
            ck_assert_msg(s->min_f <= s->max_f, "%s: range", s->name);
        if (s->type == RF_SETTING_BOOL)
            ck_assert(s->min == 0 && s->max == 1);
    }
    ck_assert_uint_eq(k, n);
    ck_assert_uint_eq(end <= sizeof(rf_config), 1);
}
END_TEST

/* rf_config_init writes each row's fixed default, or its AUTO value where create decides. */
START_TEST(config_init_writes_each_rows_default)
{
    uint32_t n;
    const rf_setting *t = rows(&n);
    rf_config c;
    memset(&c, 0x5A, sizeof c);
    rf_config_init(&c);
    for (uint32_t i = 0; i < n; i++) {
        const rf_setting *s = &t[i];
        if (s->flags & RF_SETTING_HEADER)
            continue;
        if (is_int(s)) {
            uint64_t want = s->rule ? s->auto_int : s->default_int;
            ck_assert_msg(get_u(&c, s) == (s->size == 8 ? want : (uint32_t)want),
                          "%s = %llu", s->name, (unsigned long long)get_u(&c, s));
        } else if (is_float(s)) {
            for (int k = 0; k < (int)(s->size / 4); k++)
                ck_assert_msg(get_f(&c, s, k) == (float)(s->rule ? s->auto_f : s->default_f),
                              "%s = %g", s->name, (double)get_f(&c, s, k));
        } else {
            const char *p;
            memcpy(&p, (const char *)&c + s->offset, sizeof p);
            if (s->type == RF_SETTING_STR && s->default_str)
                ck_assert_str_eq(p, s->default_str);
            else
                ck_assert_ptr_null(p);
        }
        if (!s->rule)
            continue;
        /* a rule is for the tools to print, and its field holds AUTO meanwhile */
        ck_assert_msg(strlen(s->rule) > 0, "%s", s->name);
    }
    ck_assert_uint_eq(c.struct_size, sizeof c);
    ck_assert_uint_eq(c.version, RF_CONFIG_VERSION);
}
END_TEST

/* Defaults a stage also applies without a config (the decoders called by inspection, the tar
 * grouping) are the table's. */
START_TEST(stage_constants_are_the_rows_defaults)
{
    rf_config c;
    rf_config_init(&c);
    ck_assert_uint_eq(c.max_image_pixels, RF_DEFAULT_MAX_IMAGE_PIXELS);
    ck_assert_uint_eq(c.max_image_dim, RF_DEFAULT_MAX_IMAGE_DIM);
    ck_assert_uint_eq(c.max_scans, RF_DEFAULT_MAX_SCANS);
    ck_assert_uint_eq(c.max_name_bytes, RF_TAR_NAME_MAX);
    ck_assert_str_eq(c.image_exts, RF_TAR_IMAGE_EXTS);
    ck_assert_uint_eq(rf_settings_row("max_name_bytes")->max, RF_TAR_NAME_MAX);
    ck_assert_ptr_null(rf_settings_row("no_such_setting"));
}
END_TEST

/* ---- one rule for defaults ------------------------------------------------------------------ */

/* A config that only says its size, version and shards (every other byte 0) gives a loader
 * with every default: the zeros ask for them, but in flip_prob, decode_nice and mask_fill,
 * where 0 is a setting (no flips, no added niceness, masks filled with 0). */
START_TEST(zeroed_config_gives_every_default)
{
    const char *pat = shard;
    rf_config zero, init;
    memset(&zero, 0, sizeof zero);
    zero.struct_size = sizeof zero;
    zero.version = RF_CONFIG_VERSION;
    zero.shards = &pat;
    zero.shard_count = 1;
    zero.device_kind = RF_DEVICE_HOST;
    zero.decode_threads = 1;
    init = rf_test_host_config(&pat, shard, 0);
    init.decode_threads = 1;
    rf_config got[2];
    char exts[2][64];
    for (int k = 0; k < 2; k++) {
        rf_loader *ld = rf_test_create_ok(k ? &init : &zero);
        rf_config_init(&got[k]);
        ck_assert_int_eq(rf_loader_config(ld, &got[k]), 0);
        snprintf(exts[k], sizeof exts[k], "%s", got[k].image_exts); /* the loader's copy */
        rf_loader_destroy(ld);
    }
    uint32_t n;
    const rf_setting *t = rows(&n);
    for (uint32_t i = 0; i < n; i++) {
        const rf_setting *s = &t[i];
        if (s->type == RF_SETTING_STRS || s->type == RF_SETTING_STR ||
            !strcmp(s->name, "flip_prob") || !strcmp(s->name, "decode_nice") ||
            !strcmp(s->name, "mask_fill"))
            continue;
        ck_assert_msg(!memcmp((char *)&got[0] + s->offset, (char *)&got[1] + s->offset, s->size),
                      "%s differs between a zeroed config and rf_config_init's", s->name);
    }
    ck_assert_str_eq(exts[0], exts[1]);
    ck_assert(got[0].flip_prob == 0.0f && got[1].flip_prob == 0.5f);
    ck_assert(got[0].decode_nice == 0 && got[1].decode_nice == 10);
    ck_assert(got[0].mask_fill == 0 && got[1].mask_fill == 255);
}
END_TEST

/* rf_settings_resolve gives each fixed-default field left AUTO its default, and leaves the
 * fields whose default is a rule for create. */
START_TEST(resolve_fills_fixed_defaults_only)
{
    rf_config c, init;
    memset(&c, 0, sizeof c);
    rf_config_init(&init);
    rf_settings_resolve(&c);
    uint32_t n;
    const rf_setting *t = rows(&n);
    for (uint32_t i = 0; i < n; i++) {
        const rf_setting *s = &t[i];
        if (s->flags & RF_SETTING_HEADER)
            continue;
        if (!s->rule)
            ck_assert_msg(!memcmp((char *)&c + s->offset, (char *)&init + s->offset, s->size),
                          "%s: not its default", s->name);
        else if (is_int(s) && s->auto_int == 0)
            ck_assert_msg(get_u(&c, s) == 0, "%s: a rule's field was filled", s->name);
    }
}
END_TEST

/* ---- ranges --------------------------------------------------------------------------------- */

/* Each row's bounds pass and the values just past them are refused, by the field's name, at
 * rf_loader_create (token rows with a token source). */
static void expect_refused(const rf_config *c, const rf_setting *s, const char *what)
{
    char err[512] = "";
    rf_loader *ld = NULL;
    rf_err e = {0};
    ck_assert_msg(rf_settings_check(c, &e) == RF_EINVAL, "%s %s passed the check", s->name, what);
    ck_assert_msg(strstr(e.msg, s->name) == e.msg, "%s %s: %s", s->name, what, e.msg);
    ck_assert_int_eq(rf_loader_create(c, &ld, err, sizeof err), RF_EINVAL);
    ck_assert_ptr_null(ld);
    ck_assert_msg(strstr(err, s->name), "%s %s: create said %s", s->name, what, err);
}

START_TEST(values_past_a_rows_range_are_refused_by_name)
{
    uint32_t n, tested = 0;
    const rf_setting *t = rows(&n);
    const char *pat;
    for (uint32_t i = 0; i < n; i++) {
        const rf_setting *s = &t[i];
        if (!(is_int(s) || is_float(s)) || (s->flags & RF_SETTING_HEADER))
            continue;
        int tokens = (s->flags & RF_SETTING_TOKENS) != 0;
        rf_config base = rf_test_host_config(&pat, tokens ? token_file : shard, 0);
        if (tokens)
            base.source = RF_SOURCE_TOKENS, base.token_bytes = 2, base.seq_len = 16;
        rf_config c = base;
        rf_err e = {0};
        if (is_int(s)) {
            put_u(&c, s, s->min);
            ck_assert_msg(rf_settings_check(&c, &e) == 0, "%s min: %s", s->name, e.msg);
            put_u(&c, s, s->max);
            ck_assert_msg(rf_settings_check(&c, &e) == 0, "%s max: %s", s->name, e.msg);
            if (s->max < int_max_of(s) && s->max + 1 != s->auto_int) {
                put_u(&c, s, s->max + 1);
                expect_refused(&c, s, "max + 1");
                tested++;
            }
            c = base;
            if (s->min > 0 && s->min - 1 != s->auto_int) {
                put_u(&c, s, s->min - 1);
                expect_refused(&c, s, "min - 1");
                tested++;
            }
        } else {
            put_f(&c, s, (float)s->min_f);
            ck_assert_msg(rf_settings_check(&c, &e) == 0, "%s min: %s", s->name, e.msg);
            put_f(&c, s, (float)s->max_f);
            ck_assert_msg(rf_settings_check(&c, &e) == 0, "%s max: %s", s->name, e.msg);
            put_f(&c, s, NAN);
            expect_refused(&c, s, "NaN");
            tested++;
            if (s->max_f < FLT_MAX) {
                put_f(&c, s, (float)s->max_f * 2 + 1);
                expect_refused(&c, s, "above max");
            }
        }
    }
    ck_assert_uint_gt(tested, 30);
}
END_TEST

/* The words of the refusals: an enum names its values, a flag its two. */
START_TEST(refusals_say_what_a_field_may_be)
{
    const char *pat;
    rf_config c = rf_test_host_config(&pat, shard, 0);
    rf_err e = {0};
    c.crop = 5;
    ck_assert_int_eq(rf_settings_check(&c, &e), RF_EINVAL);
    ck_assert_str_eq(e.msg, "crop must be 0 (random), 1 (center), 2 (letterbox), 3 "
                            "(center_pad) or 4 (native), not 5");
    c = rf_test_host_config(&pat, shard, 0);
    c.decode_schedule = 9;
    ck_assert_int_eq(rf_settings_check(&c, &e), RF_EINVAL);
    ck_assert_str_eq(e.msg,
                     "decode_schedule must be 0 (auto), 1 (cpu), 2 (manual) or 3 (balance), not 9");
    c = rf_test_host_config(&pat, shard, 0);
    c.warm = 2;
    ck_assert_int_eq(rf_settings_check(&c, &e), RF_EINVAL);
    ck_assert_str_eq(e.msg, "warm must be 0 or 1, not 2");
    c = rf_test_host_config(&pat, shard, 0);
    c.device_index = -1;
    ck_assert_int_eq(rf_settings_check(&c, &e), RF_EINVAL);
    ck_assert_str_eq(e.msg, "device_index -1 out of range 0..2147483647");
    c = rf_test_host_config(&pat, shard, 0);
    c.std[1] = INFINITY;
    ck_assert_int_eq(rf_settings_check(&c, &e), RF_EINVAL);
    ck_assert_msg(strstr(e.msg, "std[1] inf out of range"), "%s", e.msg);
    /* AUTO is valid whatever the range: -0.5 in flip_prob, 0 in batch_size */
    c = rf_test_host_config(&pat, shard, 0);
    c.flip_prob = -0.5f;
    c.batch_size = 0;
    ck_assert_int_eq(rf_settings_check(&c, &e), 0);
    /* token rows are a token source's only */
    c.token_bytes = 7;
    ck_assert_int_eq(rf_settings_check(&c, &e), 0);
    c.source = RF_SOURCE_TOKENS;
    ck_assert_int_eq(rf_settings_check(&c, &e), RF_EINVAL);
    ck_assert_str_eq(e.msg, "token_bytes 7 out of range 2..4");
}
END_TEST

int main(void)
{
    static const char *const labels[] = {"0", "1", "2", "3", "4", "5"};
    char *dir = rf_test_mkdtemp("settings");
    shard = rf_test_make_label_shard(dir, labels, 6);
    static char path[4096];
    snprintf(path, sizeof path, "%s/tokens.bin", dir);
    uint16_t tokens[1000];
    for (int i = 0; i < 1000; i++)
        tokens[i] = (uint16_t)i;
    rf_test_write_file(path, tokens, sizeof tokens);
    token_file = path;
    Suite *s = suite_create("settings");
    TCase *tc = tcase_create("settings");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, rows_are_the_fields_of_rf_config);
    tcase_add_test(tc, config_init_writes_each_rows_default);
    tcase_add_test(tc, stage_constants_are_the_rows_defaults);
    tcase_add_test(tc, zeroed_config_gives_every_default);
    tcase_add_test(tc, resolve_fills_fixed_defaults_only);
    tcase_add_test(tc, values_past_a_rows_range_are_refused_by_name);
    tcase_add_test(tc, refusals_say_what_a_field_may_be);
    suite_add_tcase(s, tc);
    return rf_test_run_suite(s);
}
