/* io_stage.h — the loader's I/O stage (io_stage.c): the engine create chose for its shards
 * (io_uring, pread, or the curl engine for URLs) with its parameters and the sentence that
 * says why; the counts of engines already stopped; whether the bytes read from storage can be
 * measured. The pipeline feeds it through rf_io_source (take and done). */
#ifndef RF_IO_STAGE_H
#define RF_IO_STAGE_H

#include <stdint.h>

#include "io/io.h"
#include "loaders/dataset.h"
#include "ringfeed.h"

typedef struct rf_io_stage {
    const rf_io_ops *ops;
    rf_io_engine *engine;     /* while the pipeline runs */
    rf_io_params params;
    rf_io_source src;
    uint32_t asked;           /* rf_config.io_engine */
    char why[160];            /* rf_stats.io_engine_why */
    /* Counts of the engines already stopped (each start makes a new one). */
    uint64_t busy_ns, reads, retries, bytes, storage_bytes;
    /* rf_stats.storage_*: measured or why not, and what create's thread read from storage
     * while it opened the shards (the I/O threads' count starts after it). */
    int storage_on;
    char storage_why[128];
    uint64_t storage_create;
} rf_io_stage;

/* What create knows besides the settings when it sets the stage up. */
typedef struct rf_io_env {
    struct rf_remote *remote; /* the client of remote shards (the curl engine), or NULL */
    struct rf_rcache *rcache; /* their shard cache, or NULL */
    const rf_dataset *ds;     /* whose files' storage reads are measured */
    uint8_t *arena;           /* the staging arena io_uring registers */
    uint64_t arena_bytes;
    int gpu_device;           /* GPU decode on the device: more I/O threads when AUTO */
    uint32_t remote_tries;    /* test hook: the curl engine's attempts per request (0: the
                                 remote client's retries + 1) */
    int force_async;          /* test hook: RF_IO_FORCE_ASYNC */
    rf_io_source src;
} rf_io_env;

/* The engine from rf_config.io_engine (the curl engine for URLs), its threads (io_threads
 * AUTO resolved), queue depth and retries, and the storage measurement. 0, or the error of an
 * io_uring asked for that the probe refused. */
int rf_io_stage_init(rf_io_stage *s, const rf_config *c, const rf_io_env *env, rf_err *err);
/* Start the engine (an io_uring that passed the probe but whose workers cannot be set up falls
 * back to pread when the engine was AUTO, and why says so). */
int rf_io_stage_start(rf_io_stage *s, rf_err *err);
/* Stop the engine (the take()s return -1 first) and keep its counts. */
void rf_io_stage_stop(rf_io_stage *s);
/* rf_stats' io_* , read and storage fields. */
void rf_io_stage_stats(const rf_io_stage *s, rf_stats *st);

#endif
