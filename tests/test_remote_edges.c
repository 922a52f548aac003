/* test_remote_edges.c — remote shards against servers that misbehave on purpose (the fault
 * proxy's silent, rangestar, bighdr, listloop and noranges items, docs/testing.md), run by
 * ctest `remote_edges` under tests/servers/servers.py over the data `--make-data DIR` wrote.
 *
 * What must hold (docs/remote.md): a 206 whose Content-Range has no total gives the right
 * bytes; a listing that repeats its continuation token ends with an error naming it; one
 * silent connection holds no other transfer back and stalls time out in parallel; a server
 * that ignores Range is refused at create with the reason; create reads a few header bytes of
 * an indexed shard, not the shard; unclear URLs and answers are named for what they are; and
 * rf_loader_cancel from another thread wakes a next() blocked on a stalled server. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pipeline/testing.h"
#include "remoteutil.h"
#include "ringfeed.h"
#include "testutil.h"

static const char *data; /* the served root */

static void arm(void)
{
    ck_assert_int_eq(rf_test_shell("curl -sf -X POST %s/_arm >/dev/null",
                                   rt_env("RF_TEST_FAULT")), 0);
}

/* Every batch of ld (created already) into r; the run must end without an error. */
static void drain(rf_loader *ld, run *r)
{
    memset(r, 0, sizeof *r);
    rf_batch *b;
    int rc;
    while ((rc = rf_loader_next(ld, &b)) == 0 || rc == RF_EPOCH_END)
        if (rc == 0)
            rt_take(ld, b, r);
    ck_assert_msg(rc == RF_DONE, "%d %s", rc, rf_last_error(ld));
    rf_loader_stats(ld, &r->st);
}

/* rel read through the proxy with `spec` armed once the loader was created equals the local
 * file. */
static void armed_equals_local(const char *spec, const char *rel)
{
    char local[1024], url[1024];
    snprintf(local, sizeof local, "%s/%s", data, rel);
    snprintf(url, sizeof url, "%s/f/armed,%s/%s", rt_env("RF_TEST_FAULT"), spec, rel);
    static run lr, rr;
    opts o = {0};
    rt_collect(local, &o, &lr);
    rt_reset_log();
    rf_loader *ld = rt_create_url(url, &o);
    arm();
    drain(ld, &rr);
    rf_loader_destroy(ld);
    rt_same_run(&rr, &lr, url);
    ck_assert_uint_eq(rr.st.remote_retries, 0);
    free(lr.px);
    free(rr.px);
    rt_reset_log();
}

/* ---- Content-Range ------------------------------------------------------------------------ */

/* A 206 whose Content-Range gives an asterisk for the total: the server does not say the
 * object's length, the bytes are where the range says. */
START_TEST(content_range_without_total)
{
    armed_equals_local("rangestar", "gen/shard-0000.tar");
}
END_TEST

/* ---- the data, and the suite ------------------------------------------------------------- */

static int make_data(const char *dir)
{
    char p[1024];
    int rc = 0;
#define SUB(x) (snprintf(p, sizeof p, "%s/%s", dir, x), p)
    rc |= rf_test_make_shards(SUB("gen"), 2, N_GEN, 10, 1, 1, 96);
    rc |= rf_test_make_shards(SUB("noidx"), 2, N_GEN, 10, 1, 0, 96);
#undef SUB
    return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
    TCase *tc;
    int rc = rt_main_args(argc, argv, "remote_edges", make_data, &data, &tc);
    if (rc >= 0)
        return rc;
    tcase_add_test(tc, content_range_without_total);
    return rt_run("remote_edges", tc);
}
