/* io_acct.c — the bytes the I/O threads read from storage (rf_io_stats.storage_bytes;
 * docs/tuning.md's first row says what it measures and costs).
 *
 * DESIGN
 *  - The kernel charges read_bytes to the task that submits a read to the block device (a miss,
 *    its readahead, a WILLNEED hint, an O_DIRECT read), nothing for a page-cache hit. Each I/O
 *    thread samples its own (getrusage RUSAGE_THREAD) after every batch of completions. A read
 *    io_uring cannot start without blocking runs on an io-wq worker ("iou-wrk-<tid>") and is
 *    charged there, so the io_uring engine follows its workers' /proc/self/task/<tid>/io too.
 *  - Exact at every done(): the total is published before the batch's done() calls, and each
 *    sample re-reads every followed worker and walks /proc/self/task for new ones whenever the
 *    thread count changed, so any rf_stats of a cold pass has storage bytes >= bytes read. A
 *    walk may meet a worker being born, listed under its creator's name before io-wq names it:
 *    such an io_uring thread (PF_IO_WORKER) is not remembered and the next sample walks again.
 *  - io-wq retires an idle worker after 5 s and its count vanishes; its final count is the one
 *    at its last idle, kept when the thread looks within those 5 s: it walks every
 *    RF_IO_ACCT_SCAN_MS while reading and before each wait that follows reads. An exited
 *    worker leaves its last count in `gone`.
 *  - Limits: RF_IO_ACCT_WORKERS_MAX workers per thread (io-wq runs at most 4 per CPU for file
 *    reads); RF_IO_ACCT_TIDS_MAX threads remembered between scans (others are re-read: slower,
 *    still right).
 */
#include "io/io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#define RF_IO_ACCT_SCAN_MS 50u
#define FUSE_MAGIC 0x65735546
#define RF_PF_IO_WORKER 0x10u /* the kernel's PF_IO_WORKER in /proc/<tid>/stat's flags */

static void publish(rf_io_acct *a)
{
    uint64_t sum = a->own + a->gone;
    for (uint32_t i = 0; i < a->nworkers; i++)
        sum += a->workers[i].bytes;
    /* Relaxed: the total publishes no other data. A reader ordered after this store by other
     * means (the sample's done(), a join) sees this value or a later one: coherence suffices. */
    atomic_store_explicit(&a->total, sum, memory_order_relaxed);
}

/* read_bytes from an open /proc/.../io file; -1 when it cannot be read (the task exited). */
static int64_t io_file_bytes(int fd)
{
    char buf[512];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    const char *p = strstr(buf, "read_bytes: ");
    return p ? (int64_t)strtoull(p + strlen("read_bytes: "), NULL, 10) : -1;
}

int rf_io_acct_supported(char *why, size_t why_len)
{
    int fd = open("/proc/thread-self/io", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, why_len, "no per-thread I/O accounting here (/proc/thread-self/io: %s)",
                 strerror(errno));
        return 0;
    }
    int64_t b = io_file_bytes(fd);
    close(fd);
    if (b < 0) {
        snprintf(why, why_len, "no per-thread I/O accounting here (/proc/thread-self/io has no "
                 "read_bytes)");
        return 0;
    }
    return 1;
}

int rf_io_acct_file_ok(int fd, const char *path, char *why, size_t why_len)
{
    struct statfs sf;
    int rc = fd >= 0 ? fstatfs(fd, &sf) : statfs(path, &sf);
    if (rc == 0 && sf.f_type == FUSE_MAGIC) {
        snprintf(why, why_len, "%s is on a FUSE file system, whose reads the kernel's per-thread "
                 "I/O accounting never sees", path);
        return 0;
    }
    return 1;
}

uint64_t rf_io_acct_thread_bytes(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_THREAD, &ru) == 0 ? (uint64_t)ru.ru_inblock * 512 : 0;
}

void rf_io_acct_start(rf_io_acct *a, int on, int follow_workers)
{
    a->on = on;
    a->follow = on && follow_workers;
    a->tid = (int)syscall(SYS_gettid);
    a->own = a->gone = a->last_scan_ns = 0;
    a->read_since_scan = 0;
    a->nworkers = a->nseen = 0;
    a->task_links = 0;
    a->unsettled = 0;
    /* Kept open for both the walks and the thread count; scan() opens it again if this fails. */
    a->task_dir = a->follow ? opendir("/proc/self/task") : NULL;
    atomic_store_explicit(&a->total, 0, memory_order_relaxed); /* as in publish() */
}

/* /proc/self/task's link count: the process's threads + 2; 0 when it cannot be told. */
static uint64_t task_links(const rf_io_acct *a)
{
    struct stat st;
    return a->task_dir && fstat(dirfd(a->task_dir), &st) == 0 ? (uint64_t)st.st_nlink : 0;
}

/* A walk may find a new worker: the process's thread count changed since the last one (or
 * cannot be told), or that one met an io_uring thread not yet named. */
static int threads_changed(const rf_io_acct *a)
{
    uint64_t links = task_links(a);
    return a->unsettled || links == 0 || links != a->task_links;
}

static int cmp_int(const void *x, const void *y)
{
    int a = *(const int *)x, b = *(const int *)y;
    return (a > b) - (a < b);
}

/* 1 when tid was in the previous scan (its name is known not to be one of our workers'). */
static int seen_before(const rf_io_acct *a, int tid)
{
    return bsearch(&tid, a->seen, a->nseen, sizeof tid, cmp_int) != NULL;
}

static int followed(const rf_io_acct *a, int tid)
{
    for (uint32_t i = 0; i < a->nworkers; i++)
        if (a->workers[i].tid == tid)
            return 1;
    return 0;
}

/* A thread not seen before: follow it when it is one of this thread's io-wq workers. Returns 0
 * while it cannot be told yet (an io_uring thread not yet named, DESIGN), else 1. */
static int classify(rf_io_acct *a, int tid, const char *want)
{
    char path[64], stat[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 1; /* it exited */
    ssize_t n = read(fd, stat, sizeof stat - 1);
    close(fd);
    stat[n > 0 ? n : 0] = 0;
    /* "tid (comm) state ppid pgrp session tty_nr tpgid flags ...": comm may hold anything. */
    char *open_paren = strchr(stat, '('), *close_paren = strrchr(stat, ')');
    if (!open_paren || !close_paren || close_paren < open_paren)
        return 1;
    *close_paren = 0;
    const char *comm = open_paren + 1;
    if (strcmp(comm, want) == 0) {
        snprintf(path, sizeof path, "/proc/self/task/%d/io", tid);
        fd = followed(a, tid) || a->nworkers == RF_IO_ACCT_WORKERS_MAX
                 ? -1
                 : open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0)
            a->workers[a->nworkers++] = (rf_io_acct_worker){.tid = tid, .fd = fd, .bytes = 0};
        return 1;
    }
    if (strncmp(comm, "iou-", 4) == 0)
        return 1; /* another ring's worker or SQ thread */
    unsigned long flags = 0;
    if (sscanf(close_paren + 1, " %*c %*d %*d %*d %*d %*d %lu", &flags) != 1)
        return 1;
    return (flags & RF_PF_IO_WORKER) == 0;
}

/* Re-read every followed worker; one that exited leaves its last count in `gone`. */
static void read_workers(rf_io_acct *a)
{
    for (uint32_t i = 0; i < a->nworkers;) {
        rf_io_acct_worker *w = &a->workers[i];
        int64_t b = io_file_bytes(w->fd);
        if (b >= 0) {
            w->bytes = RF_MAX(w->bytes, (uint64_t)b);
            i++;
            continue;
        }
        a->gone += w->bytes;
        close(w->fd);
        *w = a->workers[--a->nworkers];
    }
}

/* Find new workers among the process's threads, then read them all. */
static void scan(rf_io_acct *a)
{
    if (!a->task_dir)
        a->task_dir = opendir("/proc/self/task");
    else
        rewinddir(a->task_dir); /* procfs lists the threads afresh */
    /* Taken before the walk: a thread started during it changes the count again. */
    a->task_links = task_links(a);
    char want[32];
    snprintf(want, sizeof want, "iou-wrk-%d", a->tid);
    DIR *d = a->task_dir;
    a->unsettled = 0;
    if (d) {
        uint32_t n = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
            if (de->d_name[0] < '0' || de->d_name[0] > '9')
                continue;
            int tid = atoi(de->d_name);
            if (seen_before(a, tid) || classify(a, tid, want)) {
                if (n < RF_IO_ACCT_TIDS_MAX)
                    a->seen_next[n++] = tid;
            } else {
                a->unsettled = 1;
            }
        }
        qsort(a->seen_next, n, sizeof *a->seen_next, cmp_int);
        memcpy(a->seen, a->seen_next, n * sizeof *a->seen);
        a->nseen = n;
    }
    read_workers(a);
}

void rf_io_acct_sample(rf_io_acct *a, int idle)
{
    if (!a->on)
        return;
    a->own = rf_io_acct_thread_bytes();
    if (a->follow) {
        uint64_t now = rf_now_ns();
        a->read_since_scan |= !idle;
        if (now - a->last_scan_ns >= RF_IO_ACCT_SCAN_MS * 1000000ull ||
            (idle && a->read_since_scan)) {
            scan(a);
            a->last_scan_ns = now;
            a->read_since_scan = 0;
        } else if (!idle) { /* completions follow: their workers' counts first */
            if (threads_changed(a))
                scan(a);
            else
                read_workers(a);
        }
    }
    publish(a);
}

void rf_io_acct_finish(rf_io_acct *a)
{
    if (!a->on)
        return;
    a->own = rf_io_acct_thread_bytes();
    if (a->follow)
        scan(a);
    for (uint32_t i = 0; i < a->nworkers; i++) {
        a->gone += a->workers[i].bytes;
        close(a->workers[i].fd);
    }
    a->nworkers = 0;
    if (a->task_dir)
        closedir(a->task_dir);
    a->task_dir = NULL;
    publish(a);
}

uint64_t rf_io_acct_bytes(const rf_io_acct *a)
{
    return atomic_load_explicit(&((rf_io_acct *)a)->total, memory_order_relaxed); /* publish() */
}
