/* test_api.c — the stateless public API that bindings read: every error code's name and
 * message, from the one RF_ERRORS list. */
#include <check.h>
#include <errno.h>
#include <string.h>

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
    const int others[] = {0, RF_EPOCH_END, RF_DONE, -ENOENT, -EIO, -999, -1016, -4096, 12345};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++)
        ck_assert_msg(rf_err_name(others[i]) == NULL, "%d: %s", others[i], rf_err_name(others[i]));
    ck_assert_str_eq(rf_strerror(-ENOENT), "No such file or directory");
    ck_assert_str_eq(rf_strerror(-1016), "unknown error");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("api");
    TCase *tc = tcase_create("api");
    tcase_add_test(tc, err_name_for_every_code);
    tcase_add_test(tc, err_name_is_null_for_other_codes);
    suite_add_tcase(s, tc);
    return rf_test_run_suite(s);
}
