/* io_common.c — what both I/O engines share: the completion rules and engine selection.
 *
 * DESIGN
 *  - rf_io_complete() is the single place that decides what an attempt's result means. The
 *    io_uring engine calls it for every CQE, the pread engine for every pread() return, so short
 *    reads, end of file, transient errors, retry limits and fault injection behave identically
 *    whichever engine runs. It touches only the request it is given: no locks, no shared state,
 *    callable from any I/O thread.
 *  - rf_io_select() turns the configured engine kind into an ops table plus a sentence for
 *    rf_stats.io_engine_why. It probes io_uring by creating (and closing) a tiny ring, so it must
 *    run in the process that will run the engine (after any fork, before any seccomp change).
 */
#include "io/io.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* Attempts on one request are bounded without extra state: every RESUBMIT either advanced
 * req->done by at least one byte (at most len of those) or counted one transient error (at most
 * max_retries), and every other outcome finishes the request. So a request sees at most
 * len + max_retries + 1 attempts, even when a fault hook misbehaves.
 *
 * Returns RF_IO_FINISHED (req->result is final: 0 when all len bytes arrived, else -errno:
 * -ENODATA when the file ended before len, -EIO when an attempt claimed more bytes than were
 * asked, or the attempt's own error) or RF_IO_RESUBMIT (read the remaining len - done bytes at
 * offset + done into dst + done). */
int rf_io_complete(const rf_io_source *src, rf_io_req *req, int res, const rf_io_params *p)
{
    if (src && src->fault)
        res = src->fault(src->ctx, req, res);

    uint32_t left = req->len - req->done;
    if (res > 0) {
        if ((uint32_t)res > left) {
            /* The kernel never does this; a buggy hook might. Treat it as a device error rather
             * than advancing past len and corrupting the caller's accounting. */
            req->result = -EIO;
            return RF_IO_FINISHED;
        }
        req->done += (uint32_t)res;
        if (req->done == req->len || (req->need && req->done >= req->need)) {
            req->result = 0;
            return RF_IO_FINISHED;
        }
        return RF_IO_RESUBMIT; /* short read that made progress */
    }
    if (res == 0) {
        /* EOF before len: the shard is shorter than its index or header said (unless only
         * alignment padding past `need` is missing). */
        req->result = req->need && req->done >= req->need ? 0 : -ENODATA;
        return RF_IO_FINISHED;
    }
    if (res == -EAGAIN || res == -EINTR || res == -ECANCELED) {
        uint32_t max = p ? p->max_retries : 0;
        if (req->retries < max) {
            req->retries++;
            return RF_IO_RESUBMIT;
        }
    }
    req->result = res;
    return RF_IO_FINISHED;
}

/* Returns 0 with *ops set and `why` filled; or RF_EINVAL for an unknown kind; or, when io_uring
 * was explicitly requested and cannot be set up, the probe's -errno (-EPERM, -ENOSYS, -ENOMEM,
 * ...) with *ops = NULL and the probe's reason in `why`. */
int rf_io_select(uint32_t requested, const rf_io_ops **ops, char *why, size_t why_len)
{
    char reason[160];
    int rc;

    *ops = NULL;
    switch (requested) {
    case RF_IO_PREAD:
        *ops = &rf_io_pread_ops;
        snprintf(why, why_len, "requested");
        return 0;
    case RF_IO_URING:
        rc = rf_io_uring_probe(reason, sizeof reason);
        if (rc < 0) {
            snprintf(why, why_len, "%s", reason);
            return rc;
        }
        *ops = &rf_io_uring_ops;
        snprintf(why, why_len, "requested");
        return 0;
    case RF_IO_AUTO:
        rc = rf_io_uring_probe(reason, sizeof reason);
        if (rc < 0) {
            *ops = &rf_io_pread_ops;
            snprintf(why, why_len, "io_uring refused: %s", reason);
        } else {
            *ops = &rf_io_uring_ops;
            snprintf(why, why_len, "auto: io_uring available");
        }
        return 0;
    default:
        snprintf(why, why_len, "unknown io_engine %u", requested);
        return RF_EINVAL;
    }
}
