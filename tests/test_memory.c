/* test_memory.c — the memory hierarchy through the host backend: page-cache residency at
 * submit (hit ratio 1 after reading the files, below 1 after evicting them), warming within
 * its budget, O_DIRECT and huge-page rings delivering the same batches as the defaults, the
 * naive baseline too, NUMA discovery, the CPUs the process may use (affinity mask, cgroup
 * quota: the default decode threads), the stats fields, and the cost of a residency check.
 * GPU-side checks (pool accounting, cudaHostRegister, trim) live in test_cuda.c. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/common.h"
#include "base/cpus.h"
#include "io/io.h"
#include "base/numa.h"
#include "io/pagecache.h"
#include "ringfeed.h"
#include "testutil.h"

#define N_SHARDS 3
#define N_PER_SHARD 30
#define N_SAMPLES (N_SHARDS * N_PER_SHARD)
#define SIZE 32

/* A fresh data set per test (eviction state must not leak between tests). */
static void make_data_n(char *pattern, size_t n, uint64_t seed, uint32_t per_shard,
                        uint32_t max_side)
{
    char *dir = rf_test_mkdtemp("memory");
    ck_assert_int_eq(rf_test_make_shards(dir, N_SHARDS, per_shard, 10, seed, 1, max_side), 0);
    snprintf(pattern, n, "%s/shard-*.tar", dir);
}

static void make_data(char *pattern, size_t n, uint64_t seed)
{
    make_data_n(pattern, n, seed, N_PER_SHARD, 160);
}

static void shard_path(const char *pattern, uint32_t i, char *out, size_t n)
{
    snprintf(out, n, "%.*s%04u.tar", (int)(strlen(pattern) - strlen("*.tar")), pattern, i);
}

static void read_all(const char *pattern)
{
    for (uint32_t i = 0; i < N_SHARDS; i++) {
        char p[600];
        shard_path(pattern, i, p, sizeof p);
        size_t len;
        free(rf_test_read_file(p, &len));
    }
}

/* Drop the shards from the page cache; returns the bytes still resident afterwards. */
static long long evict_all(const char *pattern)
{
    long long left = 0;
    for (uint32_t i = 0; i < N_SHARDS; i++) {
        char p[600];
        shard_path(pattern, i, p, sizeof p);
        long long r = rf_test_evict(p);
        ck_assert_int_ge(r, 0);
        left += r;
    }
    return left;
}

static rf_config config(const char **pat, const char *pattern)
{
    rf_config c = rf_test_host_config(pat, pattern, SIZE);
    c.batch_size = 8;
    c.seed = 5;
    c.epochs = 1;
    c.decode_threads = 2;
    return c;
}


/* Two loaders deliver byte-identical batches (pixels, labels, keys, ids). */
static void same_batches(const rf_config *a, const rf_config *b, rf_stats *sa, rf_stats *sb)
{
    rf_loader *la = rf_test_create_ok(a), *lb = rf_test_create_ok(b);
    rf_batch *x, *y;
    int ra, rb, n = 0;
    for (;;) {
        ra = rf_loader_next(la, &x);
        rb = rf_loader_next(lb, &y);
        ck_assert_int_eq(ra, rb);
        if (ra == RF_EPOCH_END)
            continue;
        if (ra != 0)
            break;
        ck_assert_uint_eq(x->count, y->count);
        ck_assert_uint_eq(x->data_bytes, y->data_bytes);
        ck_assert_int_eq(memcmp(x->data, y->data, x->data_bytes), 0);
        ck_assert_int_eq(memcmp(x->labels, y->labels, x->count * sizeof(int32_t)), 0);
        ck_assert_int_eq(memcmp(x->sample_ids, y->sample_ids, x->count * sizeof(uint64_t)), 0);
        for (uint32_t i = 0; i < x->count; i++)
            ck_assert_str_eq(x->keys[i], y->keys[i]);
        rf_loader_release(la, x, NULL);
        rf_loader_release(lb, y, NULL);
        n++;
    }
    ck_assert_int_eq(ra, RF_DONE);
    ck_assert_int_gt(n, 0);
    rf_stats_init(sa);
    rf_stats_init(sb);
    rf_loader_stats(la, sa);
    rf_loader_stats(lb, sb);
    rf_loader_destroy(la);
    rf_loader_destroy(lb);
}

START_TEST(hit_ratio_is_one_when_resident)
{
    char pattern[512];
    const char *pat;
    make_data(pattern, sizeof pattern, 1);
    read_all(pattern);
    rf_config c = config(&pat, pattern);
    rf_loader *ld = rf_test_create_ok(&c);
    rf_stats st = rf_test_drain(ld);
    ck_assert_uint_gt(st.cache_checked_bytes, 0);
    ck_assert_uint_eq(st.cache_checked_bytes, st.bytes_read); /* buffered: spans exactly */
    /* all of it, short of a page or two that memory pressure from other processes on a busy
     * machine may evict between reading the files and the loader's reads */
    ck_assert_uint_ge(st.cache_hit_bytes, st.cache_checked_bytes / 100 * 98);
    rf_loader_destroy(ld);
}
END_TEST

START_TEST(hit_ratio_below_one_after_eviction_then_one)
{
    char pattern[512];
    const char *pat;
    /* Shards of a few MB: create reads a few headers of each, and the kernel's read-ahead
     * around them must not cover whole shards. */
    make_data_n(pattern, sizeof pattern, 2, 200, 320);
    read_all(pattern);
    long long left = evict_all(pattern);
    if (left != 0) {
        printf("eviction kept %lld bytes resident on this file system: skipping\n", left);
        return;
    }
    rf_config c = config(&pat, pattern);
    c.epochs = 2;
    c.io_engine = RF_IO_PREAD;
    rf_loader *ld = rf_test_create_ok(&c);
    rf_batch *b;
    int rc;
    while ((rc = rf_loader_next(ld, &b)) == 0)
        rf_loader_release(ld, b, NULL);
    ck_assert_int_eq(rc, RF_EPOCH_END);
    rf_stats e1;
    rf_stats_init(&e1);
    rf_loader_stats(ld, &e1);
    rf_stats e2 = rf_test_drain(ld);
    /* The first epoch found (some of) its bytes on disk: the very first read cannot hit. */
    ck_assert_uint_gt(e1.cache_checked_bytes, 0);
    ck_assert_uint_lt(e1.cache_hit_bytes, e1.cache_checked_bytes);
    /* By the second epoch everything was read once: all hits (nothing evicts in between). The
     * second epoch's reads may overlap the end of the first one's, hence the deltas. */
    uint64_t chk = e2.cache_checked_bytes - e1.cache_checked_bytes;
    uint64_t hit = e2.cache_hit_bytes - e1.cache_hit_bytes;
    ck_assert_uint_gt(chk, 0);
    ck_assert_msg(hit * 100 >= chk * 99, "second epoch hit %llu of %llu", (unsigned long long)hit,
                  (unsigned long long)chk);
    printf("hit ratio: cold epoch %.3f, second epoch %.3f\n",
           (double)e1.cache_hit_bytes / e1.cache_checked_bytes, (double)hit / chk);
    rf_loader_destroy(ld);
}
END_TEST

START_TEST(warm_hints_every_sample_with_a_large_budget)
{
    char pattern[512];
    const char *pat;
    make_data(pattern, sizeof pattern, 3);
    evict_all(pattern);
    rf_config c = config(&pat, pattern);
    c.warm = 1;
    c.order = RF_ORDER_NONE; /* contiguous spans: the first hints cover whole shards */
    c.io_engine = RF_IO_PREAD; /* one read taken at a time: only the very first is not hinted */
    c.io_threads = 1;
    c.io_queue_depth = 1;
    rf_loader *ld = rf_test_create_ok(&c);
    rf_stats st = rf_test_drain(ld);
    ck_assert_uint_le(st.warmed_bytes, st.cache_checked_bytes);
    ck_assert_uint_ge(st.warmed_bytes, st.cache_checked_bytes - st.cache_checked_bytes / 20);
    rf_loader_destroy(ld);
}
END_TEST

START_TEST(warm_stays_within_a_small_budget)
{
    char pattern[512];
    const char *pat;
    make_data(pattern, sizeof pattern, 4);
    evict_all(pattern);
    rf_config c = config(&pat, pattern);
    c.warm = 1;
    c.warm_bytes = 64 << 10;
    c.epochs = 2;
    rf_loader *ld = rf_test_create_ok(&c);
    rf_stats st = rf_test_drain(ld);
    ck_assert_uint_gt(st.warmed_bytes, 0);
    /* each sample is hinted at most once per epoch */
    ck_assert_uint_le(st.warmed_bytes, st.cache_checked_bytes);
    rf_loader_destroy(ld);

    c.warm = 0;
    ld = rf_test_create_ok(&c);
    st = rf_test_drain(ld);
    ck_assert_uint_eq(st.warmed_bytes, 0);
    rf_loader_destroy(ld);
}
END_TEST

static void odirect_equals_buffered(uint32_t engine)
{
    char pattern[512];
    const char *pa, *pb;
    make_data(pattern, sizeof pattern, 5);
    rf_config a = config(&pa, pattern), b = config(&pb, pattern);
    a.io_engine = b.io_engine = engine;
    a.epochs = b.epochs = 2;
    b.odirect = 1;
    rf_stats sa, sb;
    same_batches(&a, &b, &sa, &sb);
    ck_assert_uint_eq(sa.odirect, 0);
    if (!sb.odirect) {
        printf("O_DIRECT not available here (%s): compared the fallback\n", sb.memory_why);
        ck_assert_str_ne(sb.memory_why, "");
        return;
    }
    ck_assert_msg(strstr(sb.memory_why, "O_DIRECT") != NULL, "%s", sb.memory_why);
    /* aligned reads: at least the spans, whole blocks */
    ck_assert_uint_ge(sb.bytes_read, sa.bytes_read);
    ck_assert_uint_eq(sb.cache_checked_bytes, sa.cache_checked_bytes);
}

START_TEST(odirect_equals_buffered_pread) { odirect_equals_buffered(RF_IO_PREAD); }
END_TEST
START_TEST(odirect_equals_buffered_auto) { odirect_equals_buffered(RF_IO_AUTO); }
END_TEST

/* The completion rule O_DIRECT relies on: end of file after `need` bytes is success. */
START_TEST(io_need_accepts_eof_after_needed_bytes)
{
    uint8_t buf[8192];
    rf_io_req r = {.fd = -1, .len = 8192, .dst = buf, .need = 5000};
    rf_io_params p = {.max_retries = 2};
    ck_assert_int_eq(rf_io_complete(NULL, &r, 4096, &p), RF_IO_RESUBMIT);
    ck_assert_int_eq(rf_io_complete(NULL, &r, 1000, &p), RF_IO_FINISHED);
    ck_assert_int_eq(r.result, 0);
    rf_io_req q = {.fd = -1, .len = 8192, .dst = buf, .need = 5000};
    ck_assert_int_eq(rf_io_complete(NULL, &q, 4096, &p), RF_IO_RESUBMIT);
    ck_assert_int_eq(rf_io_complete(NULL, &q, 0, &p), RF_IO_FINISHED);
    ck_assert_int_eq(q.result, -ENODATA); /* EOF before the needed bytes: truncated */
    rf_io_req z = {.fd = -1, .len = 8192, .dst = buf}; /* need 0: all of len */
    ck_assert_int_eq(rf_io_complete(NULL, &z, 6000, &p), RF_IO_RESUBMIT);
    ck_assert_int_eq(rf_io_complete(NULL, &z, 0, &p), RF_IO_FINISHED);
    ck_assert_int_eq(z.result, -ENODATA);
}
END_TEST

START_TEST(hugepages_equal_normal_pages)
{
    char pattern[512];
    const char *pa, *pb;
    make_data(pattern, sizeof pattern, 6);
    rf_config a = config(&pa, pattern), b = config(&pb, pattern);
    a.batch_size = b.batch_size = 32; /* ring above 2 MiB: 32 x 32x32x3 x 4 slots ... */
    a.image_size = b.image_size = 96;
    b.hugepages = 1;
    rf_stats sa, sb;
    same_batches(&a, &b, &sa, &sb);
    ck_assert_uint_eq(sa.hugepages, 0);
    ck_assert_uint_le(sb.hugepages, 2);
    ck_assert_str_ne(sb.memory_why, ""); /* says what it got */
    printf("hugepages: got %u (%s)\n", sb.hugepages, sb.memory_why);
    ck_assert_uint_gt(sb.ring_register_ns, 0);
}
END_TEST

START_TEST(naive_equals_default)
{
    char pattern[512];
    const char *pa, *pb;
    make_data(pattern, sizeof pattern, 7);
    rf_config a = config(&pa, pattern), b = config(&pb, pattern);
    b.naive = 1;
    b.warm = 1; /* ignored by the baseline */
    rf_stats sa, sb;
    same_batches(&a, &b, &sa, &sb);
    ck_assert_uint_eq(sb.prefetch_depth, 1);
    ck_assert_uint_eq(sb.io_threads, 1);
    ck_assert_str_eq(sb.io_engine, "pread");
    ck_assert_uint_eq(sb.warmed_bytes, 0);
}
END_TEST

/* NUMA detection from a sysfs fixture of a two-node machine with the GPU on node 1. */
START_TEST(numa_reads_sysfs_fixture)
{
    char *root = rf_test_mkdtemp("sysfs");
    char path[900];
    const char *dirs[] = {"devices", "devices/system", "devices/system/node",
                          "devices/system/node/node0", "devices/system/node/node1", "bus",
                          "bus/pci", "bus/pci/devices", "bus/pci/devices/0000:3b:00.0"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", root, dirs[i]);
        ck_assert_int_eq(mkdir(path, 0755), 0);
    }
    static const struct { const char *file, *text; } files[] = {
        {"devices/system/node/online", "0-1\n"},
        {"devices/system/node/node0/cpulist", "0-7,16-23\n"},
        {"devices/system/node/node1/cpulist", "8-15,24-31\n"},
        {"bus/pci/devices/0000:3b:00.0/numa_node", "1\n"},
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", root, files[i].file);
        rf_test_write_file(path, files[i].text, strlen(files[i].text));
    }
    ck_assert_uint_eq(rf_numa_nodes_in(root), 2);
    ck_assert_int_eq(rf_numa_node_of_pci_in(root, "0000:3B:00.0"), 1); /* any case */
    ck_assert_int_eq(rf_numa_node_of_pci_in(root, "0000:af:00.0"), -1); /* absent device */
    cpu_set_t cpus;
    ck_assert_int_eq(rf_numa_node_cpus_in(root, 1, &cpus), 0);
    ck_assert_int_eq(CPU_COUNT(&cpus), 16);
    ck_assert(CPU_ISSET(8, &cpus) && CPU_ISSET(31, &cpus) && !CPU_ISSET(0, &cpus));
    ck_assert_int_eq(rf_numa_node_cpus_in(root, 2, &cpus), -ENOENT);
    snprintf(path, sizeof path, "%s/bus/pci/devices/0000:3b:00.0/numa_node", root);
    rf_test_write_file(path, "-1\n", 3); /* what VMs and single-node machines report */
    ck_assert_int_eq(rf_numa_node_of_pci_in(root, "0000:3b:00.0"), -1);
    /* no sysfs at all: one node */
    ck_assert_uint_eq(rf_numa_nodes_in("/nonexistent"), 1);
}
END_TEST

START_TEST(numa_lists_and_nodes)
{
    uint8_t set[64];
    ck_assert_int_eq(rf_numa_parse_list("0\n", set, 64), 1);
    ck_assert_int_eq(rf_numa_parse_list("0-3,8-11", set, 64), 8);
    ck_assert(set[9] && !set[4]);
    ck_assert_int_eq(rf_numa_parse_list("0,2", set, 64), 2);
    ck_assert_int_eq(rf_numa_parse_list("3-1", set, 64), -1);
    ck_assert_int_eq(rf_numa_parse_list("x", set, 64), -1);
    ck_assert_int_eq(rf_numa_parse_list("70", set, 64), -1);
    ck_assert_int_eq(rf_numa_node_of_pci("ffff:ff:1f.7"), -1);
    uint32_t nodes = rf_numa_nodes();
    ck_assert_uint_ge(nodes, 1);

    /* A scope on node 0 changes the thread's placement and gives it back. */
    cpu_set_t before, after;
    pthread_getaffinity_np(pthread_self(), sizeof before, &before);
    rf_numa_scope sc;
    char why[128] = "";
    int rc = rf_numa_enter(0, &sc, why, sizeof why);
    if (rc == 0)
        rf_numa_leave(&sc);
    else
        printf("numa scope refused here: %s\n", why);
    pthread_getaffinity_np(pthread_self(), sizeof after, &after);
    ck_assert(CPU_EQUAL(&before, &after));

    char pattern[512];
    const char *pat;
    make_data(pattern, sizeof pattern, 8);
    rf_config c = config(&pat, pattern);
    rf_loader *ld = rf_test_create_ok(&c);
    rf_stats st = rf_test_drain(ld);
    ck_assert_uint_eq(st.numa_nodes, nodes);
    ck_assert_int_eq(st.numa_node, -1); /* host backend: no device to be near */
    rf_loader_destroy(ld);
}
END_TEST

/* The default decode threads are the CPUs this process may use: under a one-CPU affinity mask
 * (Check runs the test in its own process) rf_cpu_count() is 1 and a loader with
 * decode_threads 0 starts one, where the machine's online count would start one per CPU. */
START_TEST(default_decode_threads_follow_affinity)
{
    cpu_set_t all, mask;
    ck_assert_int_eq(sched_getaffinity(0, sizeof all, &all), 0);
    uint32_t n = (uint32_t)CPU_COUNT(&all), quota = rf_cpus_quota_in("", NULL, 0);
    ck_assert_uint_eq(rf_cpus_affinity(), n);
    ck_assert_uint_eq(rf_cpu_count(), quota && quota < n ? quota : n);
    char pattern[512];
    const char *pat;
    make_data_n(pattern, sizeof pattern, 11, 4, 64);
    uint32_t want[2] = {1, 2};
    for (int k = 0; k < 2 && want[k] <= n; k++) {
        CPU_ZERO(&mask);
        for (int c = 0, took = 0; c < CPU_SETSIZE && took < (int)want[k]; c++)
            if (CPU_ISSET(c, &all))
                CPU_SET(c, &mask), took++;
        ck_assert_int_eq(sched_setaffinity(0, sizeof mask, &mask), 0);
        uint32_t expect = quota && quota < want[k] ? quota : want[k];
        ck_assert_uint_eq(rf_cpu_count(), expect);
        rf_config c = config(&pat, pattern);
        c.decode_threads = 0;
        rf_loader *ld = rf_test_create_ok(&c);
        rf_stats st = rf_test_drain(ld);
        ck_assert_uint_eq(st.decode_threads, expect);
        ck_assert_uint_eq(st.samples_delivered, N_SHARDS * 4);
        rf_loader_destroy(ld);
    }
    ck_assert_int_eq(sched_setaffinity(0, sizeof all, &all), 0);
}
END_TEST

/* root/rel with text, creating the folders on the way. */
static void put_file(const char *root, const char *rel, const char *text)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    for (char *p = path + strlen(root) + 1; (p = strchr(p, '/')) != NULL; p++) {
        *p = 0;
        ck_assert_msg(mkdir(path, 0755) == 0 || errno == EEXIST, "mkdir %s", path);
        *p = '/';
    }
    rf_test_write_file(path, text, strlen(text));
}

/* The cgroup quota from fixture trees of /proc/self and /sys/fs/cgroup: v2 and v1, the
 * tightest of the cgroup and its ancestors, rounded up, a container's mount of its own
 * cgroup, an escaped mount point, and everything that means "no quota". */
START_TEST(cgroup_quota_from_fixture_trees)
{
    const char *v2mount = "30 1 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n";
    char why[1200];
    char *r = rf_test_mkdtemp("cgv2");
    put_file(r, "proc/self/cgroup", "0::/job.slice/step\n");
    put_file(r, "proc/self/mountinfo", v2mount);
    ck_assert_uint_eq(rf_cpus_quota_in(r, why, sizeof why), 0); /* no cpu.max anywhere */
    ck_assert_str_eq(why, "");
    put_file(r, "sys/fs/cgroup/job.slice/step/cpu.max", "max 100000\n");
    put_file(r, "sys/fs/cgroup/job.slice/cpu.max", "150000 100000\n");
    ck_assert_uint_eq(rf_cpus_quota_in(r, why, sizeof why), 2); /* the parent's 1.5, up */
    ck_assert_msg(strstr(why, "job.slice/cpu.max: 150000 100000") != NULL, "%s", why);
    put_file(r, "sys/fs/cgroup/job.slice/step/cpu.max", "50000 100000\n");
    ck_assert_uint_eq(rf_cpus_quota_in(r, why, sizeof why), 1); /* the tighter child */
    put_file(r, "sys/fs/cgroup/job.slice/step/cpu.max", "garbage\n");
    ck_assert_uint_eq(rf_cpus_quota_in(r, NULL, 0), 2); /* malformed: no quota there */

    /* A container: its own cgroup /pod/c1 mounted at /sys/fs/cgroup (root field), the mount
     * point written with mountinfo's octal escape for a space. */
    r = rf_test_mkdtemp("cgns");
    put_file(r, "proc/self/cgroup", "0::/pod/c1\n");
    put_file(r, "proc/self/mountinfo",
             "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"
             "30 22 0:26 /pod/c1 /sys/fs/my\\040cg rw shared:9 - cgroup2 cgroup2 rw\n");
    put_file(r, "sys/fs/my cg/cpu.max", "400000 100000\n");
    ck_assert_uint_eq(rf_cpus_quota_in(r, NULL, 0), 4);

    /* v1: the hierarchy with the cpu controller (not cpuacct alone), -1 meaning none; with
     * a v2 quota too, the tighter one wins. */
    r = rf_test_mkdtemp("cgv1");
    put_file(r, "proc/self/cgroup", "5:cpuacct:/x\n4:cpu,cpuacct:/batch/7\n0::/\n");
    put_file(r, "proc/self/mountinfo",
             "33 31 0:30 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct\n"
             "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
             "41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n");
    put_file(r, "sys/fs/cgroup/cpuacct/x/cpu.cfs_quota_us", "100000\n");
    put_file(r, "sys/fs/cgroup/cpuacct/x/cpu.cfs_period_us", "100000\n");
    put_file(r, "sys/fs/cgroup/cpu,cpuacct/batch/7/cpu.cfs_quota_us", "-1\n");
    put_file(r, "sys/fs/cgroup/cpu,cpuacct/batch/7/cpu.cfs_period_us", "100000\n");
    ck_assert_uint_eq(rf_cpus_quota_in(r, NULL, 0), 0);
    put_file(r, "sys/fs/cgroup/cpu,cpuacct/batch/cpu.cfs_quota_us", "250000\n");
    put_file(r, "sys/fs/cgroup/cpu,cpuacct/batch/cpu.cfs_period_us", "100000\n");
    ck_assert_uint_eq(rf_cpus_quota_in(r, why, sizeof why), 3);
    ck_assert_msg(strstr(why, "cpu,cpuacct/batch/cpu.cfs_quota_us: 250000") != NULL, "%s", why);
    put_file(r, "sys/fs/cgroup/unified/cpu.max", "200000 100000\n");
    ck_assert_uint_eq(rf_cpus_quota_in(r, NULL, 0), 2);

    ck_assert_uint_eq(rf_cpus_quota_in("/nonexistent", why, sizeof why), 0);
    ck_assert_str_eq(why, "");
}
END_TEST

START_TEST(stats_fields_sane_on_host)
{
    char pattern[512];
    const char *pat;
    make_data(pattern, sizeof pattern, 9);
    rf_config c = config(&pat, pattern);
    rf_loader *ld = rf_test_create_ok(&c);
    rf_stats st = rf_test_drain(ld);
    ck_assert_uint_eq(st.pinned, 0);
    ck_assert_uint_eq(st.pinned_bytes, 0);
    ck_assert_uint_eq(st.device_pool_reserved_bytes, 0);
    ck_assert_uint_eq(st.device_pool_used_bytes, 0);
    ck_assert_uint_eq(st.device_allocs_after_create, 0);
    ck_assert_uint_eq(st.host_allocs_after_create, 0);
    ck_assert_uint_eq(st.odirect, 0);
    ck_assert_uint_eq(st.hugepages, 0);
    ck_assert_uint_gt(st.ring_register_ns, 0);
    ck_assert_uint_le(st.cache_hit_bytes, st.cache_checked_bytes);
    ck_assert_str_eq(st.memory_why, "");
    ck_assert_int_eq(rf_loader_trim(ld, 0), 0);
    ck_assert_int_eq(rf_loader_trim(NULL, 0), RF_EINVAL);
    rf_loader_destroy(ld);

    c.numa = 7;
    char err[256];
    ck_assert_int_eq(rf_loader_create(&c, &ld, err, sizeof err), RF_EINVAL);
}
END_TEST

/* The residency check runs once per read: it must stay far below a read's own cost. */
START_TEST(residency_check_is_cheap)
{
    char pattern[512], path[600];
    make_data(pattern, sizeof pattern, 10);
    read_all(pattern);
    shard_path(pattern, 0, path, sizeof path);
    rf_dataset ds;
    memset(&ds, 0, sizeof ds);
    int fd = open(path, O_RDONLY);
    struct stat stt;
    fstat(fd, &stt);
    rf_err e = {0};
    ck_assert_int_eq(rf_dataset_add_file(&ds, path, fd, (uint64_t)stt.st_size, &e), 0);
    rf_pagecache *pc;
    char why[160];
    ck_assert_int_eq(rf_pc_create(&ds, 0, &pc, why, sizeof why), 0);
    const uint64_t span = 110 << 10; /* an ImageNet-sized sample: ~28 pages */
    uint64_t size = (uint64_t)stt.st_size, n = 20000;
    for (uint64_t i = 0; i < n; i++)
        rf_pc_check(pc, 0, fd, (i * 7919) % (size > span ? size - span : 1), RF_MIN(span, size));
    rf_pc_stats st;
    rf_pc_stats_get(pc, &st);
    ck_assert_uint_eq(st.checks, n);
    ck_assert_uint_ge(st.hit_bytes, st.checked_bytes / 100 * 99); /* others may evict a page */
    double ns = (double)st.check_ns / st.checks;
    printf("residency check: %.0f ns per %llu-byte span\n", ns,
           (unsigned long long)RF_MIN(span, size));
    ck_assert_msg(ns < 50000, "%.0f ns per check", ns);
    rf_pc_destroy(pc);
    rf_dataset_free(&ds);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("memory");
    TCase *tc = tcase_create("memory");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, hit_ratio_is_one_when_resident);
    tcase_add_test(tc, hit_ratio_below_one_after_eviction_then_one);
    tcase_add_test(tc, warm_hints_every_sample_with_a_large_budget);
    tcase_add_test(tc, warm_stays_within_a_small_budget);
    tcase_add_test(tc, odirect_equals_buffered_pread);
    tcase_add_test(tc, odirect_equals_buffered_auto);
    tcase_add_test(tc, io_need_accepts_eof_after_needed_bytes);
    tcase_add_test(tc, hugepages_equal_normal_pages);
    tcase_add_test(tc, naive_equals_default);
    tcase_add_test(tc, numa_lists_and_nodes);
    tcase_add_test(tc, numa_reads_sysfs_fixture);
    tcase_add_test(tc, default_decode_threads_follow_affinity);
    tcase_add_test(tc, cgroup_quota_from_fixture_trees);
    tcase_add_test(tc, stats_fields_sane_on_host);
    tcase_add_test(tc, residency_check_is_cheap);
    suite_add_tcase(s, tc);
    return rf_test_run_suite(s);
}
