/* io_select.c — engine selection (rf_io_select): the one file that knows both engines. It
 * probes io_uring with a tiny ring, so it must run in the process that will run the engine
 * (after any fork, before any seccomp change). */
#include "io/io.h"

#include <stdio.h>

static int select_uring(int automatic, const rf_io_ops **ops, char *why, size_t why_len)
{
    char reason[160];
    int rc = rf_io_uring_probe(reason, sizeof reason);
    if (rc < 0 && !automatic) {
        snprintf(why, why_len, "%s", reason);
        return rc;
    }
    if (rc < 0) {
        *ops = &rf_io_pread_ops;
        snprintf(why, why_len, "io_uring refused: %s", reason);
        return 0;
    }
    *ops = &rf_io_uring_ops;
    snprintf(why, why_len, "%s", automatic ? "auto: io_uring available" : "requested");
    return 0;
}

int rf_io_select(uint32_t requested, const rf_io_ops **ops, char *why, size_t why_len)
{
    *ops = NULL;
    switch (requested) {
    case RF_IO_PREAD:
        *ops = &rf_io_pread_ops;
        snprintf(why, why_len, "requested");
        return 0;
    case RF_IO_URING:
    case RF_IO_AUTO:
        return select_uring(requested == RF_IO_AUTO, ops, why, why_len);
    default:
        snprintf(why, why_len, "unknown io_engine %u", requested);
        return RF_EINVAL;
    }
}
