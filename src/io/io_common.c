/* io_common.c — what both I/O engines share: rf_io_complete, the single place that decides
 * what an attempt's result means, so short reads, end of file, transient errors, retries and
 * fault injection behave identically whichever engine runs. It touches only the request it is
 * given: no locks, callable from any I/O thread. */
#include "io/io.h"

#include <assert.h>
#include <errno.h>

/* Attempts are bounded without extra state: every RESUBMIT either advanced req->done by at
 * least one byte or counted one transient error, so a request sees at most len + max_retries + 1
 * attempts, even with a misbehaving fault hook. RESUBMIT means: read the remaining len - done
 * bytes at offset + done into dst + done. */
int rf_io_complete(const rf_io_source *src, rf_io_req *req, int res, const rf_io_params *p)
{
    /* Engines finish a request with nothing left without an attempt. */
    assert(req->done < req->len);
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
        assert(req->done <= req->len); /* res <= left, checked above */
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
            assert(req->retries <= max); /* the bound the comment above relies on */
            return RF_IO_RESUBMIT;
        }
    }
    req->result = res;
    return RF_IO_FINISHED;
}
