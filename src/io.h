/* io.h — I/O engines: io_uring workers and a pread pool behind one small ops table.
 *
 * An engine runs `threads` I/O threads. Each thread pulls read requests from the pipeline
 * through rf_io_source.take(), executes them, and hands each finished request back through
 * rf_io_source.done(). Both engines route every completion through rf_io_complete(), the one
 * place that handles short reads, res == 0, -EAGAIN, -EINTR, -ECANCELED with bounded retries,
 * and where fault injection hooks in (so tests reach io_uring completions too).
 *
 * Threads: take() may be called from any I/O thread concurrently; it must be thread-safe.
 * Stopping: rf_io_stop() makes take() return a negative value (the pipeline's stop flag), waits
 * for every in-flight request to complete (io_uring: reaps all CQEs), and joins the threads. */
#ifndef RF_IO_H
#define RF_IO_H

#include <pthread.h>
#include <stdint.h>

#include "common.h"

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
} rf_io_params;

typedef struct rf_io_engine rf_io_engine;

typedef struct rf_io_stats {
    uint64_t busy_ns;       /* summed over threads: not blocked in take(block=1) */
    uint64_t reads;         /* requests finished */
    uint64_t retries;       /* resubmissions (short reads, EAGAIN, EINTR) */
    uint64_t bytes;         /* bytes read */
} rf_io_stats;

typedef struct rf_io_ops {
    const char *name;
    /* Start the engine; on failure return a negative code and explain in err (for io_uring:
     * EPERM/ENOSYS at setup mean "refused by the kernel", the caller then falls back). */
    int (*start)(const rf_io_params *p, const rf_io_source *src, rf_io_engine **out, rf_err *err);
    void (*stop)(rf_io_engine *e);       /* as described above; frees e */
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

/* ---- additions by the I/O engines (io_common.c, io_uring.c, io_pread.c) ------------------- */

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

/* Choose the engine for a config's io_engine (enum rf_io_engine_kind) and explain the choice in
 * why (for rf_stats.io_engine_why):
 *  - RF_IO_AUTO: io_uring when rf_io_uring_probe() passes, else pread with
 *    why = "io_uring refused: <probe's reason>"; always returns 0.
 *  - RF_IO_URING: io_uring with why = "requested"; or the probe's -errno with *ops = NULL and
 *    the probe's reason in why.
 *  - RF_IO_PREAD: pread with why = "requested".
 *  - anything else: RF_EINVAL, *ops = NULL.
 * Probing creates and closes a small ring in the calling process. */
int rf_io_select(uint32_t requested, const rf_io_ops **ops, char *why, size_t why_len);

#endif
