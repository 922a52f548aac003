/* io.h — I/O engines: io_uring workers and a pread pool behind one small ops table.
 *
 * An engine runs `threads` I/O threads. Each pulls read requests from the pipeline through
 * rf_io_source.take() and hands each finished one back through done(). Every completion goes
 * through rf_io_complete(), the one place for short reads, res == 0, -EAGAIN, -EINTR,
 * -ECANCELED, bounded retries and fault injection. take() must be thread-safe; the take()/done()
 * contract below says how stopping works.
 *
 * io/ includes base/, and loaders/dataset.h in pagecache.h (warming walks the sample table) and
 * remote.h (the remote client fills loaders' rf_remote_ops). Within io/ the files depend one
 * way: io_uring.c and io_pread.c call io_common.c and io_acct.c; io_select.c, the only file that
 * knows both, calls them; the curl engine (io_curl.c) and create's remote requests
 * (remote_open.c, remote_list.c) call remote.c. The shard cache (shard_cache.h) includes base/
 * only; remote_cache.c uses it and the remote client for remote shards, and the curl engine
 * reads cached copies through it. */
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
    uint32_t need;      /* 0, or: success once `need` bytes arrived, even if the rest (O_DIRECT
                           padding past end of file) never comes */
    const struct rf_remote_file *remote; /* a remote shard's object, read by the curl engine
                           instead of fd; NULL for a file */
    int cached;         /* remote: the shard cache holds a checked copy, read instead */
    uint32_t file;      /* the dataset's file index (for `cached`) */
    const char *why;    /* at done() of a failed request, NULL or the engine's description of
                           the failure; valid during done() only */
} rf_io_req;

/* The pipeline side of an engine. */
typedef struct rf_io_source {
    /* Fill reqs[0..max) with new requests: how many (>= 0), or -1 when the engine must stop.
     * block != 0 waits for at least one (or stop); block == 0 returns 0 at once when none. */
    int (*take)(void *ctx, rf_io_req **reqs, int max, int block);
    /* A request finished (req->result says how). Called on the I/O thread. */
    void (*done)(void *ctx, rf_io_req *req);
    /* Optional fault injection: given an attempt's raw result, return the result to act on.
     * NULL in production; called in rf_io_complete. */
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

/* rf_io_params.flags. RF_IO_ACCOUNT: keep rf_io_stats.storage_bytes (where
 * rf_io_acct_supported()). RF_IO_FORCE_ASYNC, for tests: io_uring sends every read to its
 * workers (IOSQE_ASYNC), so a test can check those are accounted too. */
#define RF_IO_ACCOUNT 0x1u
#define RF_IO_FORCE_ASYNC 0x2u

typedef struct rf_io_engine rf_io_engine;

typedef struct rf_io_stats {
    uint64_t busy_ns;       /* summed over threads: not blocked in take(block=1) */
    uint64_t reads;         /* requests finished */
    uint64_t retries;       /* resubmissions (short reads, EAGAIN, EINTR) */
    uint64_t bytes;         /* bytes read */
    uint64_t storage_bytes; /* bytes the I/O threads (and their io_uring workers) read from
                               storage: 0 without RF_IO_ACCOUNT */
} rf_io_stats;

typedef struct rf_io_ops {
    const char *name;
    /* Start the engine; on failure a negative code explained in err (io_uring: EPERM/ENOSYS at
     * setup mean "refused by the kernel", and the caller falls back). */
    int (*start)(const rf_io_params *p, const rf_io_source *src, rf_io_engine **out, rf_err *err);
    /* Stop as the contract below says; with final != NULL, fill it as stats() would once every
     * thread has finished; free e. */
    void (*stop)(rf_io_engine *e, rf_io_stats *final);
    void (*stats)(rf_io_engine *e, rf_io_stats *st);
    int (*registered)(rf_io_engine *e);  /* 1 when reads go into registered buffers */
} rf_io_ops;

extern const rf_io_ops rf_io_uring_ops;
extern const rf_io_ops rf_io_pread_ops;

/* What the engine does next with a request after an attempt returned `res` (bytes, or -errno);
 * io_common.c says how it decides. */
enum rf_io_action { RF_IO_FINISHED = 0, RF_IO_RESUBMIT = 1 };
int rf_io_complete(const rf_io_source *src, rf_io_req *req, int res, const rf_io_params *p);

/* Probe whether io_uring can be set up here. Returns 0, or -errno with a reason in why. */
int rf_io_uring_probe(char *why, size_t why_len);

/* ---- the engines (io_common.c, io_uring.c, io_pread.c, io_select.c) ---- */

/* start() rejects threads or queue_depth outside 1..max with RF_EINVAL. One attempt reads at
 * most RF_IO_ATTEMPT_BYTES_MAX so its result fits an int (longer requests take several attempts,
 * not counted as retries). */
#define RF_IO_THREADS_MAX 64u
#define RF_IO_QUEUE_DEPTH_MAX 4096u
#define RF_IO_ATTEMPT_BYTES_MAX (1u << 30)

/* The take()/done() contract of both engines.
 *  - Every request take() returned gets exactly one done(), on the I/O thread that took it,
 *    before ops.stop() returns; after done() the engine never touches it again.
 *  - At done(): result == 0 means all len bytes are at dst; else -ENODATA (end of file), the
 *    attempt's -errno (-EAGAIN, -EINTR, -ECANCELED after max_retries), or -ECANCELED for one
 *    that needed another attempt after the engine stopped taking; dst beyond `done` undefined.
 *  - take() returns at most `max`, called with block=1 only by a thread with nothing in flight.
 *    A request taken with done >= len finishes at once with result 0.
 *  - Stopping: the owner makes take() return -1 and wakes any sleeper in it; ops.stop() also
 *    sets an engine flag. io_uring cancels what is in flight (IORING_ASYNC_CANCEL_ANY), so a
 *    read that would never complete ends with -ECANCELED; one the kernel cannot cancel is
 *    waited for.
 *  - start() never calls take() when it fails. */

/* Choose the engine for a config's io_engine and say why in `why` (rf_stats.io_engine_why):
 * AUTO takes io_uring when rf_io_uring_probe() passes, else pread with the probe's reason;
 * URING fails with the probe's -errno when refused; PREAD is taken as asked; anything else is
 * RF_EINVAL. Probing creates and closes a small ring in the calling process. */
int rf_io_select(uint32_t requested, const rf_io_ops **ops, char *why, size_t why_len);

/* ---- storage accounting (io_acct.c): bytes read from storage, per I/O thread ----
 * Each engine thread owns one rf_io_acct: start before its first read, sample after each batch
 * of completions (idle = 1 before waiting for work), finish before it exits; any thread may
 * read the total with rf_io_acct_bytes(). io_acct.c says what it covers. */
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
