/* io.h — I/O engines: io_uring workers and a pread pool behind one small ops table.
 *
 * An engine runs `threads` I/O threads. Each thread pulls read requests from the pipeline
 * through rf_io_source.take(), executes them, and hands each finished request back through
 * rf_io_source.done(). Both engines route every completion through rf_io_complete(), the one
 * place that handles short reads, res == 0, -EAGAIN, -EINTR, -ECANCELED with bounded retries,
 * and where fault injection hooks in (so tests reach io_uring completions too).
 *
 * Threads: take() may be called from any I/O thread concurrently; it must be thread-safe.
 * Stopping: the owner makes take() return a negative value (the pipeline's stop flag); ops.stop()
 * then waits for every in-flight request to complete (io_uring: reaps all CQEs) and joins the
 * threads (the contract below says what is cancelled).
 *
 * What io/ may include: base/, and loaders/dataset.h in pagecache.h (warming walks the sample
 * table) and in remote.h (the remote client fills loaders' rf_remote_ops; remote_open.c the tar
 * scanner's rf_byte_reader from loaders/tar.h). Within io/ the files depend one way: io_uring.c
 * and io_pread.c call io_common.c (rf_io_complete) and io_acct.c; io_select.c, the only file
 * that knows both file engines, calls them; the curl engine (io_curl.c, for remote shards,
 * chosen by the pipeline when the shards are URLs) and create's remote requests
 * (remote_open.c, remote_list.c) call remote.c; no engine calls another file's engine code.
 * The local shard cache (shard_cache.h over shard_cache.c and shard_cache_dir.c) includes base/
 * only and calls nothing else of io/; remote_cache.c (a loader's use of it for remote shards)
 * calls it and the remote client's reader (remote_open.c, through rf_remote_ops); the curl
 * engine reads cached copies through it (rf_rcache_read: checked against their checksums). */
#ifndef RF_IO_H
#define RF_IO_H

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base/common.h"

typedef struct rf_io_req {
    int fd;
    uint32_t len;       /* bytes wanted */
    uint64_t offset;    /* file offset of byte 0 */
    uint8_t *dst;       /* destination of byte 0 (inside the registered arena when registered) */
    uint32_t done;      /* bytes already read (short reads advance this) */
    uint32_t retries;   /* transient errors retried so far */
    int result;         /* final: 0, or -errno / RF_EIO when it failed */
    void *user;         /* the pipeline's per-request context */
    uint32_t need;      /* 0, or: the request succeeds once `need` bytes arrived, even if the
                           rest (O_DIRECT alignment padding past end of file) never comes */
    const struct rf_remote_file *remote; /* a remote shard's object (io/remote.h): the curl
                           engine reads it instead of fd; NULL for a file */
    int cached;         /* remote: the shard cache holds a copy of it (io/remote_cache.h): the
                           curl engine reads that, checked, else `remote` */
    uint32_t file;      /* the dataset's file index (for `cached`) */
    const char *why;    /* at done() of a failed request, NULL or the engine's description of
                           the failure (the curl engine: the URL, byte range and what the server
                           did); valid during done() only */
} rf_io_req;

/* The pipeline side of an engine. */
typedef struct rf_io_source {
    /* Fill reqs[0..max) with new requests; return how many (>= 0), or -1 when the engine must
     * stop. With block != 0 wait until at least one is available (or stop); with block == 0
     * return 0 at once when none is. */
    int (*take)(void *ctx, rf_io_req **reqs, int max, int block);
    /* A request finished (req->result says how). Called on the I/O thread. */
    void (*done)(void *ctx, rf_io_req *req);
    /* Optional fault injection: given the raw result of an attempt, return the result to act on.
     * NULL in production. Called in rf_io_complete, for both engines. */
    int (*fault)(void *ctx, const rf_io_req *req, int res);
    void *ctx;
} rf_io_source;

typedef struct rf_io_params {
    uint32_t threads;
    uint32_t queue_depth;   /* reads in flight per thread (io_uring) */
    uint32_t max_retries;   /* per request, for short reads that make progress and EAGAIN/EINTR */
    uint8_t *arena;         /* optional buffer to register with io_uring (fixed buffers) */
    uint64_t arena_bytes;
    uint32_t flags;         /* RF_IO_ACCOUNT, RF_IO_FORCE_ASYNC */
    struct rf_remote *remote; /* the curl engine's client (io/remote.h); NULL otherwise */
    struct rf_rcache *rcache; /* the shard cache of remote shards (io/remote_cache.h), or NULL */
} rf_io_params;

/* rf_io_params.flags.
 * RF_IO_ACCOUNT: keep rf_io_stats.storage_bytes (rf_io_acct below); set it only where
 *   rf_io_acct_supported() said yes.
 * RF_IO_FORCE_ASYNC: for tests: io_uring sends every read to its worker threads
 *   (IOSQE_ASYNC), as the kernel itself does with a read it cannot start without blocking,
 *   so a test can check that those reads are accounted too. The pread engine ignores it. */
#define RF_IO_ACCOUNT 0x1u
#define RF_IO_FORCE_ASYNC 0x2u

typedef struct rf_io_engine rf_io_engine;

typedef struct rf_io_stats {
    uint64_t busy_ns;       /* summed over threads: not blocked in take(block=1) */
    uint64_t reads;         /* requests finished */
    uint64_t retries;       /* resubmissions (short reads, EAGAIN, EINTR) */
    uint64_t bytes;         /* bytes read */
    uint64_t storage_bytes; /* of the storage device's bytes, those the I/O threads (and
                               io_uring's workers for them) had read: 0 without RF_IO_ACCOUNT */
} rf_io_stats;

typedef struct rf_io_ops {
    const char *name;
    /* Start the engine; on failure return a negative code and explain in err (for io_uring:
     * EPERM/ENOSYS at setup mean "refused by the kernel", the caller then falls back). */
    int (*start)(const rf_io_params *p, const rf_io_source *src, rf_io_engine **out, rf_err *err);
    /* As described above; then, with final != NULL, fills it as stats() would once every
     * thread has finished (reads completed while stopping and each thread's last storage
     * sample included); frees e. */
    void (*stop)(rf_io_engine *e, rf_io_stats *final);
    void (*stats)(rf_io_engine *e, rf_io_stats *st);
    int (*registered)(rf_io_engine *e);  /* 1 when reads go into registered buffers */
} rf_io_ops;

extern const rf_io_ops rf_io_uring_ops;
extern const rf_io_ops rf_io_pread_ops;

/* What the engine must do next with a request after an attempt returned `res` (bytes, or
 * -errno). Applies src->fault first when set. */
enum rf_io_action { RF_IO_FINISHED = 0, RF_IO_RESUBMIT = 1 };
int rf_io_complete(const rf_io_source *src, rf_io_req *req, int res, const rf_io_params *p);

/* Probe whether io_uring can be set up here. Returns 0, or -errno with a reason in why. */
int rf_io_uring_probe(char *why, size_t why_len);

/* ---- additions by the I/O engines (io_common.c, io_uring.c, io_pread.c, io_select.c) ------ */

/* Limits. start() rejects threads or queue_depth outside 1..max with RF_EINVAL. One attempt reads
 * at most RF_IO_ATTEMPT_BYTES_MAX bytes so that its result fits an int (longer requests simply
 * take several attempts, like short reads, without counting as retries). */
#define RF_IO_THREADS_MAX 64u
#define RF_IO_QUEUE_DEPTH_MAX 4096u
#define RF_IO_ATTEMPT_BYTES_MAX (1u << 30)

/* The take()/done() contract of both engines.
 *  - Every request returned by take() gets exactly one done() call, on the I/O thread that took
 *    it, before ops.stop() returns; no request gets done() without having been taken. After
 *    done() the engine never touches the request again (the pipeline may reuse it at once).
 *  - At done(): result == 0 means all len bytes are at dst (done == len). Otherwise result is
 *    -ENODATA (end of file before len), the attempt's -errno (-EIO, -EBADF, ...; -EAGAIN,
 *    -EINTR or -ECANCELED once max_retries of them were retried), or -ECANCELED for a request
 *    that would have needed another attempt after the engine stopped taking. dst bytes beyond
 *    `done` are unspecified for a failed request.
 *  - take() must not return more than `max`. It is called with block=1 only when the calling
 *    thread has nothing in flight.
 *  - A request taken with done >= len is finished at once with result 0 and no I/O.
 *  - Stopping: before or while ops.stop() runs, the owner makes take() return -1 and wakes any
 *    thread sleeping in take(block=1); an engine cannot wake a sleeper inside the source.
 *    ops.stop() also sets an engine flag, so threads stop calling take() even if the source
 *    would still hand out work. io_uring cancels what is in flight (IORING_ASYNC_CANCEL_ANY),
 *    so a read that would never complete (a pipe, a stalled FIFO) ends with -ECANCELED instead
 *    of hanging stop(); a read the kernel cannot cancel (a pread, or io_uring on a hung network
 *    file system) is waited for.
 *  - start() never calls take() when it fails. */

/* Choose the engine (io_select.c) for a config's io_engine (enum rf_io_engine_kind) and explain the choice in
 * why (for rf_stats.io_engine_why):
 *  - RF_IO_AUTO: io_uring when rf_io_uring_probe() passes, else pread with
 *    why = "io_uring refused: <probe's reason>"; always returns 0.
 *  - RF_IO_URING: io_uring with why = "requested"; or the probe's -errno with *ops = NULL and
 *    the probe's reason in why.
 *  - RF_IO_PREAD: pread with why = "requested".
 *  - anything else: RF_EINVAL, *ops = NULL.
 * Probing creates and closes a small ring in the calling process. */
int rf_io_select(uint32_t requested, const rf_io_ops **ops, char *why, size_t why_len);

/* ---- storage accounting (io_acct.c): bytes read from storage, per I/O thread -------------
 * Each engine thread owns one rf_io_acct: rf_io_acct_start() on the thread before its first
 * read, rf_io_acct_sample() after each batch of completions (idle = 1 when it is about to
 * wait for work), rf_io_acct_finish() before it exits; any thread may read the running total
 * with rf_io_acct_bytes(). The total is the thread's own read_bytes plus, with follow_workers
 * (io_uring), those of the io-wq workers named after it; io_acct.c says what each covers. */
#define RF_IO_ACCT_WORKERS_MAX 256u
#define RF_IO_ACCT_TIDS_MAX 2048u

typedef struct rf_io_acct_worker {
    int tid, fd;            /* fd: its /proc/self/task/<tid>/io, open while it lives */
    uint64_t bytes;         /* its read_bytes at the last look */
} rf_io_acct_worker;

typedef struct rf_io_acct {
    int on, follow, tid;
    int read_since_scan;    /* completions sampled since the last scan: look before waiting */
    DIR *task_dir;          /* /proc/self/task (its link count is the process's threads + 2) */
    int unsettled;          /* the last walk met an io_uring thread not yet named: walk again */
    uint64_t task_links;    /* that count at the last scan: a change means a thread came or went */
    uint64_t own, gone;     /* this thread's read_bytes; last counts of workers that exited */
    uint64_t last_scan_ns;
    uint32_t nworkers, nseen;
    rf_io_acct_worker workers[RF_IO_ACCT_WORKERS_MAX];
    int seen[RF_IO_ACCT_TIDS_MAX], seen_next[RF_IO_ACCT_TIDS_MAX]; /* threads of the last scan */
    _Atomic uint64_t total; /* own + gone + workers, published for rf_io_acct_bytes */
} rf_io_acct;

/* 1 when this kernel keeps per-thread I/O accounting (/proc/thread-self/io has read_bytes);
 * else 0 with the reason in why. */
int rf_io_acct_supported(char *why, size_t why_len);
/* 0 with the reason in why when the file (fd, or path when fd < 0) lives on a file system
 * whose reads the accounting never sees (FUSE); else 1. */
int rf_io_acct_file_ok(int fd, const char *path, char *why, size_t why_len);
/* The calling thread's read_bytes so far (0 without accounting). */
uint64_t rf_io_acct_thread_bytes(void);
void rf_io_acct_start(rf_io_acct *a, int on, int follow_workers);
void rf_io_acct_sample(rf_io_acct *a, int idle);
void rf_io_acct_finish(rf_io_acct *a);
uint64_t rf_io_acct_bytes(const rf_io_acct *a);

#endif
