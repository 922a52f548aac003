/* cacheutil.c — helpers of the shard cache's suites (cacheutil.h). */
#include "cacheutil.h"

#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

/* What a test allocated, freed after it. */
static void *g_track[256];
static int g_ntrack;

void *rf_tc_track(void *p)
{
    ck_assert_int_lt(g_ntrack, 256);
    return g_track[g_ntrack++] = p;
}

void rf_tc_free_tracked(void)
{
    while (g_ntrack)
        free(g_track[--g_ntrack]);
}

const char *rf_tc_listing(const char *dir)
{
    return rf_tc_track(rf_test_list_dir(dir));
}

uint8_t *rf_tc_pattern(uint32_t tag, size_t size)
{
    uint8_t *b = rf_tc_track(malloc(size));
    for (size_t i = 0; i < size; i++)
        b[i] = (uint8_t)((i * 131 + tag * 17 + (i >> 9)) & 0xff);
    return b;
}

rf_cache *rf_tc_open_ok(const char *dir, uint64_t budget)
{
    rf_cache *c = NULL;
    rf_err e = {0};
    int rc = rf_cache_open(dir, budget, &c, &e);
    ck_assert_msg(rc == 0, "rf_cache_open(%s): %d %s", dir, rc, e.msg);
    return c;
}

void rf_tc_write_chunks(rf_cache_writer *w, const uint8_t *data, size_t size, size_t chunk,
                         int backwards)
{
    size_t n = (size + chunk - 1) / chunk;
    for (size_t k = 0; k < n; k++) {
        size_t i = backwards ? n - 1 - k : k, off = i * chunk;
        rf_err e = {0};
        int rc = rf_cache_fill_write(w, off, data + off, RF_MIN(chunk, size - off), &e);
        ck_assert_msg(rc == 0, "write at %zu: %d %s", off, rc, e.msg);
    }
}

int rf_tc_fill(rf_cache *c, const char *key, const uint8_t *data, size_t size,
                const char *validator)
{
    rf_cache_writer *w = NULL;
    rf_err e = {0};
    int rc = rf_cache_fill_begin(c, key, size, validator, &w, &e);
    if (rc)
        return rc;
    rf_tc_write_chunks(w, data, size, 777, 1);
    return rf_cache_fill_commit(w, &e);
}

void rf_tc_fill_then_age(rf_cache *c, const char *key, const uint8_t *data, size_t size)
{
    ck_assert_int_eq(rf_tc_fill(c, key, data, size, "v"), 0);
    usleep(20000);
}

void rf_tc_expect_hit(rf_cache *c, const char *key, const uint8_t *data, size_t size,
                       const char *validator, int *keep)
{
    int fd = -1;
    rf_err e = {0};
    ck_assert_int_eq(rf_cache_get(c, key, size, validator, &fd, &e), 1);
    /* the shard's bytes, read and checked against their checksums, then the table: nothing
     * more */
    uint8_t *got = malloc(size + 1), *bounce = malloc(2 * RF_CACHE_SUM_BLOCK);
    rf_cache_sums sums;
    uint64_t bad = 0;
    ck_assert_int_eq(rf_cache_sums_load(fd, size, &sums), 0);
    ck_assert_int_eq(rf_cache_sums_read(&sums, fd, got, size, 0, bounce, &bad), 0);
    ck_assert_msg(memcmp(got, data, size) == 0, "%s: other bytes", key);
    size_t n = 0;
    ck_assert_int_eq(rf_pread_full(fd, got, 1, rf_cache_file_bytes(size), &n), 0);
    ck_assert_uint_eq(n, 0);
    rf_cache_sums_free(&sums);
    free(got);
    free(bounce);
    if (keep)
        *keep = fd;
    else
        rf_cache_release(c, fd);
}

int rf_tc_is_miss(rf_cache *c, const char *key, size_t size, const char *validator)
{
    int fd = 7;
    rf_err e = {0};
    int rc = rf_cache_get(c, key, size, validator, &fd, &e);
    ck_assert_int_eq(fd, rc ? fd : -1);
    if (rc == 1)
        rf_cache_release(c, fd);
    return rc == 0;
}

rf_cache_stats rf_tc_stats(rf_cache *c)
{
    rf_cache_stats st;
    rf_cache_stats_get(c, &st);
    return st;
}

char *rf_tc_entry_path(const char *dir, const char *key, const char *ext)
{
    char pat[4200], want[4200], *out = NULL;
    glob_t g;
    snprintf(pat, sizeof pat, "%s/*.meta", dir);
    snprintf(want, sizeof want, "\nkey %s\n", key);
    ck_assert_int_eq(glob(pat, 0, NULL, &g), 0);
    for (size_t i = 0; i < g.gl_pathc && !out; i++) {
        size_t len;
        char *text = (char *)rf_test_read_file(g.gl_pathv[i], &len);
        if (text && strstr(text, want) && (out = malloc(strlen(g.gl_pathv[i]) + 8)))
            sprintf(out, "%.*s.%s", (int)(strlen(g.gl_pathv[i]) - 5), g.gl_pathv[i], ext);
        free(text);
    }
    globfree(&g);
    ck_assert_msg(out, "no entry of %s in %s", key, dir);
    return rf_tc_track(out);
}
