/* test_api.c — the stateless public API that bindings read: every error code's name and
 * message, from the one RF_ERRORS list; the skip reasons' names; rf_abi_layout's table against
 * the structs as ringfeed.h declares them (every field, in order) and as the compiler lays them
 * out. */
#include <check.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/layout.h"
#include "ringfeed.h"
#include "testutil.h"

/* Every own code, spelled out here rather than taken from RF_ERRORS, so that a code dropped
 * from the list (or a value changed) fails this test. Values are the public ABI. */
static const struct {
    int code;
    const char *name;
} codes[] = {
    {-1000, "RF_EINVAL"},  {-1001, "RF_ENOMEM"},   {-1002, "RF_ENOFILES"}, {-1003, "RF_EFORMAT"},
    {-1004, "RF_EDECODE"}, {-1005, "RF_ELIMIT"},   {-1006, "RF_EIO"},      {-1007, "RF_ECUDA"},
    {-1008, "RF_ENODEV"},  {-1009, "RF_ESTATE"},   {-1010, "RF_EINDEX"},   {-1011, "RF_ERESUME"},
    {-1012, "RF_ECLOSED"}, {-1013, "RF_ELABEL"},   {-1014, "RF_EFORK"},    {-1015, "RF_ETIMEDOUT"},
    {-1016, "RF_EHOOK"},
};
#define NCODES (sizeof codes / sizeof codes[0])

START_TEST(err_name_for_every_code)
{
    for (size_t i = 0; i < NCODES; i++) {
        const char *name = rf_err_name(codes[i].code);
        ck_assert_msg(name && strcmp(name, codes[i].name) == 0, "%d: %s, expected %s",
                      codes[i].code, name ? name : "NULL", codes[i].name);
        /* a message of its own, not the fallback for unknown codes */
        ck_assert_str_ne(rf_strerror(codes[i].code), "unknown error");
    }
    /* the enum is the list: as many codes, the same values */
#define COUNT_(name, value, message) +1
    ck_assert_uint_eq(0 RF_ERRORS(COUNT_), NCODES);
#undef COUNT_
    ck_assert_int_eq(RF_EINVAL, -1000);
    ck_assert_int_eq(RF_ETIMEDOUT, -1015);
    /* messages tests and users match on, unchanged */
    ck_assert_str_eq(rf_strerror(RF_EFORMAT), "malformed shard");
    ck_assert_str_eq(rf_strerror(RF_ENOFILES), "no shard matched the given patterns");
    ck_assert_str_eq(rf_strerror(RF_ETIMEDOUT), "no batch within next_timeout_ms");
}
END_TEST

START_TEST(err_name_is_null_for_other_codes)
{
    const int others[] = {0, RF_EPOCH_END, RF_DONE, -ENOENT, -EIO, -999, -1017, -4096, 12345};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++)
        ck_assert_msg(rf_err_name(others[i]) == NULL, "%d: %s", others[i], rf_err_name(others[i]));
    ck_assert_str_eq(rf_strerror(-ENOENT), "No such file or directory");
    ck_assert_str_eq(rf_strerror(-1017), "unknown error");
}
END_TEST

/* ---- rf_abi_layout ----------------------------------------------------------------------- */

#define MAX_FIELDS 128

/* The rows of one struct in rf_abi_layout's table: its own row, then its fields. */
static uint32_t struct_rows(const char *sname, const rf_field_layout **own,
                            const rf_field_layout *fields[MAX_FIELDS])
{
    uint32_t n = 0, nf = 0;
    const rf_field_layout *t = rf_abi_layout(&n);
    *own = NULL;
    for (uint32_t i = 0; i < n; i++) {
        if (strcmp(t[i].struct_name, sname) != 0)
            continue;
        if (!t[i].name[0]) {
            ck_assert_msg(!*own && nf == 0, "%s: its own row is not the first, or twice", sname);
            *own = &t[i];
        } else {
            ck_assert_uint_lt(nf, MAX_FIELDS);
            fields[nf++] = &t[i];
        }
    }
    ck_assert_msg(*own, "%s: no row of its own", sname);
    return nf;
}

/* Drop comments from a C declaration list, in place. */
static void strip_comments(char *s)
{
    char *w = s;
    for (char *r = s; *r;) {
        if (r[0] == '/' && r[1] == '*') {
            char *end = strstr(r + 2, "*/");
            ck_assert_ptr_nonnull(end);
            r = end + 2;
            *w++ = ' ';
        } else {
            *w++ = *r++;
        }
    }
    *w = 0;
}

/* The last identifier in s[0..n), copied to out; "" when there is none. */
static void last_ident(const char *s, size_t n, char *out, size_t cap)
{
    size_t end = n;
    while (end > 0 && !(isalnum((unsigned char)s[end - 1]) || s[end - 1] == '_'))
        end--;
    size_t beg = end;
    while (beg > 0 && (isalnum((unsigned char)s[beg - 1]) || s[beg - 1] == '_'))
        beg--;
    ck_assert_uint_lt(end - beg, cap);
    memcpy(out, s + beg, end - beg);
    out[end - beg] = 0;
}

/* The field names of `typedef struct T { ... } T;` in ringfeed.h, in declaration order: the
 * declarator names of each declaration (several for `float a, b;`, array bounds dropped). */
static uint32_t header_fields(const char *sname, char names[MAX_FIELDS][64])
{
    size_t len;
    char *h = (char *)rf_test_read_file(RF_PUBLIC_HEADER, &len);
    ck_assert_msg(h, "cannot read %s", RF_PUBLIC_HEADER);
    char open[96], close[96];
    snprintf(open, sizeof open, "typedef struct %s {", sname);
    snprintf(close, sizeof close, "} %s;", sname);
    char *body = strstr(h, open), *end = body ? strstr(body, close) : NULL;
    ck_assert_msg(body && end, "%s: not found in %s", sname, RF_PUBLIC_HEADER);
    body += strlen(open);
    *end = 0;
    strip_comments(body);
    uint32_t n = 0;
    for (char *decl = body, *semi; (semi = strchr(decl, ';')) != NULL; decl = semi + 1) {
        *semi = 0;
        for (char *b; (b = strchr(decl, '[')) != NULL;) /* drop array bounds */
            memset(b, ' ', strcspn(b, "]") + 1);
        for (char *part = decl, *comma;; part = comma + 1) {
            comma = strchr(part, ',');
            size_t plen = comma ? (size_t)(comma - part) : strlen(part);
            ck_assert_uint_lt(n, MAX_FIELDS);
            last_ident(part, plen, names[n], sizeof names[n]);
            if (names[n][0])
                n++;
            if (!comma)
                break;
        }
    }
    free(h);
    return n;
}

static const char *const mirrored[] = {"rf_config", "rf_batch", "rf_field", "rf_stats",
                                       "rf_setting", "rf_sample_view", "rf_view"};

START_TEST(layout_lists_every_field_of_the_header)
{
    const char *sname = mirrored[_i];
    char names[MAX_FIELDS][64];
    const rf_field_layout *own, *fields[MAX_FIELDS];
    uint32_t nh = header_fields(sname, names), nt = struct_rows(sname, &own, fields);
    ck_assert_uint_ge(nh, 4); /* the parse found the struct's fields (rf_field has 4) */
    for (uint32_t i = 0; i < nh || i < nt; i++)
        ck_assert_msg(i < nh && i < nt && strcmp(names[i], fields[i]->name) == 0,
                      "%s field %u: ringfeed.h has %s, rf_abi_layout %s", sname, i,
                      i < nh ? names[i] : "nothing", i < nt ? fields[i]->name : "nothing");
}
END_TEST

/* Offsets from offsetof, spelled here from the same field lists. */
#define EXPECT_(T, f)                                                                          \
    {#T, #f, offsetof(T, f), sizeof(((T *)0)->f)},
static const struct {
    const char *sname, *name;
    size_t offset, size;
} expected[] = {
#define EXPECT_STRUCT_(T, fields) fields(EXPECT_)
    RF_LAYOUT_STRUCTS(EXPECT_STRUCT_)
#undef EXPECT_STRUCT_
};

static uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

START_TEST(layout_offsets_are_the_compilers)
{
    const char *sname = mirrored[_i];
    const rf_field_layout *own, *f[MAX_FIELDS];
    uint32_t nt = struct_rows(sname, &own, f), k = 0;
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++) {
        if (strcmp(expected[i].sname, sname) != 0)
            continue;
        ck_assert_uint_lt(k, nt);
        ck_assert_str_eq(f[k]->name, expected[i].name);
        ck_assert_uint_eq(f[k]->offset, expected[i].offset);
        ck_assert_uint_eq(f[k]->size, expected[i].size);
        k++;
    }
    ck_assert_uint_eq(k, nt);
    /* in order and packed: each field where the previous one ends, rounded up to its own
     * alignment, and the struct ends after the last field, rounded up to its alignment */
    uint64_t end = 0;
    for (uint32_t i = 0; i < nt; i++) {
        ck_assert_uint_gt(f[i]->align, 0);
        ck_assert_msg(f[i]->offset == round_up(end, f[i]->align), "%s.%s at %llu, expected %llu",
                      sname, f[i]->name, (unsigned long long)f[i]->offset,
                      (unsigned long long)round_up(end, f[i]->align));
        end = f[i]->offset + f[i]->size;
    }
    ck_assert_uint_eq(own->size, round_up(end, own->align));
    ck_assert_uint_eq(own->offset, 0);
    ck_assert_int_eq(own->value, 0);
}
END_TEST

START_TEST(layout_lists_every_error_code)
{
    uint32_t n = 0, seen = 0;
    const rf_field_layout *t = rf_abi_layout(&n);
    ck_assert_ptr_eq(rf_abi_layout(NULL), t);
    for (uint32_t i = 0; i < n; i++) {
        if (strcmp(t[i].struct_name, "rf_error") != 0)
            continue;
        ck_assert_ptr_nonnull(rf_err_name((int)t[i].value));
        ck_assert_str_eq(rf_err_name((int)t[i].value), t[i].name);
        ck_assert_uint_eq(t[i].offset + t[i].size + t[i].align, 0);
        seen++;
    }
    ck_assert_uint_eq(seen, NCODES);
}
END_TEST

/* Each reason's name spelled out here, not taken from the library's table: they are keys of
 * the bench's JSON and of the Python binding's skipped_by_reason dict, so a renamed or
 * reordered entry fails this test. */
START_TEST(skip_reason_names)
{
    static const struct {
        uint32_t reason;
        const char *name;
    } want[] = {
        {RF_SKIP_TAR_HEADER, "tar_header"}, {RF_SKIP_TRUNCATED, "truncated"},
        {RF_SKIP_NOT_JPEG, "not_jpeg"},     {RF_SKIP_CORRUPT, "corrupt"},
        {RF_SKIP_TOO_LARGE, "too_large"},   {RF_SKIP_IO, "io"},
        {RF_SKIP_LABEL, "label"},           {RF_SKIP_HOOK, "hook"},
        {RF_SKIP_FIELD, "field"},           {RF_SKIP_MASK, "mask"},
    };
    const size_t n = sizeof want / sizeof want[0];
    for (size_t i = 0; i < n; i++) {
        /* dense from 0: the bench and the binding read names until the first NULL */
        ck_assert_uint_eq(want[i].reason, i);
        ck_assert_ptr_nonnull(rf_skip_reason_name(want[i].reason));
        ck_assert_str_eq(rf_skip_reason_name(want[i].reason), want[i].name);
    }
    for (uint32_t r = (uint32_t)n; r <= RF_SKIP_REASONS; r++)
        ck_assert_msg(rf_skip_reason_name(r) == NULL, "%u: %s", r, rf_skip_reason_name(r));
    ck_assert_ptr_null(rf_skip_reason_name(UINT32_MAX));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("api");
    TCase *tc = tcase_create("api");
    tcase_add_test(tc, err_name_for_every_code);
    tcase_add_test(tc, err_name_is_null_for_other_codes);
    tcase_add_loop_test(tc, layout_lists_every_field_of_the_header, 0, 7);
    tcase_add_loop_test(tc, layout_offsets_are_the_compilers, 0, 7);
    tcase_add_test(tc, layout_lists_every_error_code);
    tcase_add_test(tc, skip_reason_names);
    suite_add_tcase(s, tc);
    return rf_test_run_suite(s);
}
