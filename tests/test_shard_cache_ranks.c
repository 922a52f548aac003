/* test_shard_cache_ranks.c — the local shard cache (src/io/shard_cache.h) shared by several
 * processes, as torchrun's ranks share one node's directory: a writer killed mid-fill, two
 * processes filling one key at once, eviction against a reader in another process, the budget
 * held by fills in progress, the directory's lock held too long. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cacheutil.h"
#include "testutil.h"

START_TEST(killed_writer_part)
{
    char *dir = rf_test_mkdtemp("cache-killed");
    uint8_t *data = rf_tc_pattern(6, 8000);
    for (int round = 0; round < 2; round++) {
        /* round 0: open's scan finds the `.part`; round 1: the handle is open already and
         * the fill's start finds it */
        rf_cache *c = round ? rf_tc_open_ok(dir, 8000) : NULL;
        pid_t pid = fork();
        if (pid == 0) {
            rf_cache *cw = rf_tc_open_ok(dir, 1 << 20);
            rf_cache_writer *w;
            rf_err e = {0};
            if (rf_cache_fill_begin(cw, KEY_A, 8000, "v", &w, &e) != 0)
                _exit(2);
            rf_tc_write_chunks(w, data, 4000, 1000, 0);
            raise(SIGKILL);
        }
        int status;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        ck_assert_msg(strstr(rf_tc_listing(dir), ".part\n"), "%s", rf_tc_listing(dir));
        if (!c) {
            c = rf_tc_open_ok(dir, 8000);
            ck_assert_str_eq(rf_tc_listing(dir), ".lock\n");
        }
        ck_assert_uint_eq(rf_tc_stats(c).cleaned, round == 0);
        ck_assert(rf_tc_is_miss(c, KEY_A, 8000, "v"));
        ck_assert_int_eq(rf_tc_fill(c, KEY_A, data, 8000, "v"), 0);
        rf_tc_expect_hit(c, KEY_A, data, 8000, "v", NULL);
        ck_assert_uint_eq(rf_tc_stats(c).cleaned, 1);
        ck_assert_uint_eq(rf_tc_stats(c).bytes_in_use, 8000);
        rf_cache_close(c);
        if (round == 0)
            ck_assert_int_eq(rf_test_shell("rm -f '%s'/*.shard '%s'/*.meta", dir, dir), 0);
    }
}
END_TEST

/* ---- several processes -------------------------------------------------------------------- */

/* Block until the parent writes a byte to the pipe. */
static void wait_go(int fd)
{
    char x;
    ck_assert_int_eq(read(fd, &x, 1), 1);
}

/* A rank: look up, fill when this rank wins (slowly, backwards), else wait for the winner's
 * shard; exits 10 + filled when it read the right bytes. */
static void rank_main(const char *dir, int go, const uint8_t *data, size_t size)
{
    rf_cache *c = rf_tc_open_ok(dir, 1 << 20);
    wait_go(go);
    int fd = -1, filled = 0;
    rf_err e = {0};
    if (rf_cache_get(c, KEY_A, size, "v", &fd, &e) == 0) {
        rf_cache_writer *w;
        if (rf_cache_fill_begin(c, KEY_A, size, "v", &w, &e) == 0) {
            for (size_t off = size; off > 0;) {
                size_t n = RF_MIN((size_t)4096, off);
                off -= n;
                ck_assert_int_eq(rf_cache_fill_write(w, off, data + off, n, &e), 0);
                usleep(1000);
            }
            filled = rf_cache_fill_commit(w, &e) == 0;
        }
        for (int i = 0; i < 2000 && rf_cache_get(c, KEY_A, size, "v", &fd, &e) == 0; i++)
            usleep(5000);
    }
    rf_tc_expect_hit(c, KEY_A, data, size, "v", NULL);
    rf_cache_release(c, fd);
    rf_cache_close(c);
    _exit(10 + filled);
}

START_TEST(two_processes_fill_one_key)
{
    char *dir = rf_test_mkdtemp("cache-ranks");
    const size_t size = 200000;
    uint8_t *data = rf_tc_pattern(8, size);
    for (int round = 0; round < 3; round++) {
        int go[2];
        ck_assert_int_eq(pipe(go), 0);
        pid_t pids[2];
        for (int r = 0; r < 2; r++)
            if ((pids[r] = fork()) == 0)
                rank_main(dir, go[0], data, size);
        ck_assert_int_eq(write(go[1], "gg", 2), 2);
        int fills = 0;
        for (int r = 0; r < 2; r++) {
            int status;
            ck_assert_int_eq(waitpid(pids[r], &status, 0), pids[r]);
            ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) >= 10, "rank %d: %d", r,
                          status);
            fills += WEXITSTATUS(status) - 10;
        }
        ck_assert_int_eq(fills, 1); /* one fill won; both read the right bytes */
        close(go[0]);
        close(go[1]);
        ck_assert_int_eq(rf_test_shell("rm -f '%s'/*.shard '%s'/*.meta", dir, dir), 0);
    }
}
END_TEST

/* A reader in another process holds the least recently used shard: eviction passes over it
 * (its bytes stay readable and whole) and refuses a fill when only it could make room. */
START_TEST(eviction_spares_other_process_reader)
{
    char *dir = rf_test_mkdtemp("cache-evict");
    uint8_t *a = rf_tc_pattern(1, 1000), *b = rf_tc_pattern(2, 1000), *cc = rf_tc_pattern(3, 1000),
            *big = rf_tc_pattern(4, 1500);
    rf_cache *c = rf_tc_open_ok(dir, 2000);
    ck_assert_int_eq(rf_tc_fill(c, KEY_A, a, 1000, "v"), 0);
    int held[2], go[2];
    ck_assert_int_eq(pipe(held), 0);
    ck_assert_int_eq(pipe(go), 0);
    pid_t pid = fork();
    if (pid == 0) {
        rf_cache *rc = rf_tc_open_ok(dir, 2000);
        int fd;
        rf_tc_expect_hit(rc, KEY_A, a, 1000, "v", &fd);
        ck_assert_int_eq(write(held[1], "h", 1), 1);
        wait_go(go[0]);
        uint8_t got[1000];
        size_t n;
        int same = rf_pread_full(fd, got, 1000, 0, &n) == 0 && n == 1000 && !memcmp(got, a, n);
        rf_cache_release(rc, fd);
        rf_cache_close(rc);
        _exit(same ? 0 : 3);
    }
    wait_go(held[0]);
    usleep(20000);
    rf_tc_fill_then_age(c, KEY_B, b, 1000);
    ck_assert_int_eq(rf_tc_fill(c, KEY_C, cc, 1000, "v"), 0); /* A is older, but held: B goes */
    ck_assert(rf_tc_is_miss(c, KEY_B, 1000, "v"));
    rf_cache_writer *w;
    rf_err e = {0};
    ck_assert_int_eq(rf_cache_fill_begin(c, KEY_D, 1500, "v", &w, &e), RF_CACHE_SKIP);
    ck_assert_msg(strstr(e.msg, "1000 of the budget's 2000 bytes are shards in use"), "%s",
                  e.msg);
    ck_assert_uint_eq(rf_tc_stats(c).evictions, 2); /* B, then C for the refused fill */
    ck_assert_int_eq(write(go[1], "g", 1), 1);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_int_eq(WEXITSTATUS(status), 0);
    ck_assert_int_eq(rf_tc_fill(c, KEY_D, big, 1500, "v"), 0); /* released: A goes now */
    ck_assert(rf_tc_is_miss(c, KEY_A, 1000, "v"));
    ck_assert_uint_eq(rf_tc_stats(c).bytes_in_use, 1500);
    rf_cache_close(c);
}
END_TEST

/* A fill in progress holds its shard's full size against the budget for every handle (its
 * `.part` is reserved at the start), so two ranks' fills never overrun it together. */
START_TEST(budget_counts_fills_in_progress)
{
    char *dir = rf_test_mkdtemp("cache-inflight");
    uint8_t *a = rf_tc_pattern(1, 1500), *b = rf_tc_pattern(2, 1000);
    rf_cache *c1 = rf_tc_open_ok(dir, 2000), *c2 = rf_tc_open_ok(dir, 2000);
    rf_cache_writer *w1, *w2;
    rf_err e = {0};
    ck_assert_int_eq(rf_cache_fill_begin(c1, KEY_A, 1500, "v", &w1, &e), 0);
    ck_assert_int_eq(rf_cache_fill_begin(c2, KEY_B, 1000, "v", &w2, &e), RF_CACHE_SKIP);
    ck_assert_msg(strstr(e.msg, "no room for 1000 bytes: 0 of the budget's 2000 bytes are "
                         "shards in use and 1524 are fills in progress"), "%s", e.msg);
    rf_tc_write_chunks(w1, a, 1500, 700, 1);
    ck_assert_int_eq(rf_cache_fill_commit(w1, &e), 0);
    ck_assert_int_eq(rf_tc_fill(c2, KEY_B, b, 1000, "v"), 0); /* A, published and unused, goes */
    ck_assert(rf_tc_is_miss(c1, KEY_A, 1500, "v"));
    rf_tc_expect_hit(c1, KEY_B, b, 1000, "v", NULL);
    ck_assert_uint_eq(rf_tc_stats(c2).evictions, 1);
    rf_cache_close(c1);
    rf_cache_close(c2);
}
END_TEST

/* The directory's lock held by a stuck process: calls give up after RF_CACHE_LOCK_WAIT_MS and
 * answer "not cached" with the reason, never an error. */
START_TEST(lock_held_too_long)
{
    char *dir = rf_test_mkdtemp("cache-lock");
    rf_cache *c = rf_tc_open_ok(dir, 1 << 20);
    char path[4200];
    snprintf(path, sizeof path, "%s/.lock", dir);
    int fd = open(path, O_RDWR);
    ck_assert_int_eq(flock(fd, LOCK_EX), 0); /* another description: as another process */
    rf_cache_writer *w;
    rf_err e = {0};
    uint64_t t0 = rf_now_ns();
    ck_assert_int_eq(rf_cache_fill_begin(c, KEY_A, 10, NULL, &w, &e), RF_CACHE_SKIP);
    ck_assert_uint_ge(rf_now_ns() - t0, (uint64_t)RF_CACHE_LOCK_WAIT_MS * 1000000);
    ck_assert_msg(strstr(e.msg, "/.lock: held by another process for over 10000 ms"), "%s",
                  e.msg);
    close(fd);
    ck_assert_uint_eq(rf_tc_stats(c).skips, 1);
    rf_cache_close(c);
}
END_TEST

static Suite *shard_cache_ranks_suite(void)
{
    Suite *s = suite_create("shard_cache_ranks");
    TCase *tc = tcase_create("shard_cache_ranks");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, NULL, rf_tc_free_tracked);
    tcase_add_test(tc, killed_writer_part);
    tcase_add_test(tc, two_processes_fill_one_key);
    tcase_add_test(tc, eviction_spares_other_process_reader);
    tcase_add_test(tc, budget_counts_fills_in_progress);
    tcase_add_test(tc, lock_held_too_long);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return rf_test_run_suite_mode(shard_cache_ranks_suite(), CK_ENV);
}
