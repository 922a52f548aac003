/* decode_pool.h — the CPU decode stage (decode_pool.c): `decode_threads` threads, each with its
 * own decoder, taking tasks off the dispatcher's decode queue and writing decoded samples (or,
 * with GPU decode, packets) into their slots' rows, and the settings they read. */
#ifndef RF_PL_DECODE_POOL_H
#define RF_PL_DECODE_POOL_H

#include <pthread.h>
#include <stdint.h>

#include "decode/decode_setup.h"
#include "loaders/dataset.h"
#include "pipeline/counters.h"
#include "pipeline/mix.h"
#include "pipeline/ring.h"
#include "pipeline/state.h"
#include "ringfeed.h"

struct pl_dispatch;
struct pl_boxes;
struct pl_fields;
struct pl_gpu;

typedef struct pl_pool {
    /* Its neighbours (pl_pool_init). */
    pl_core *core;
    struct pl_dispatch *disp;  /* the decode queue, and where a task is handed back */
    pl_ring *ring;
    const rf_dataset *ds;
    const struct pl_fields *fields;
    const struct pl_boxes *boxes; /* boxes and keypoints (set by create after pl_pool_init) */
    struct pl_gpu *gpu;
    pl_counters *counters;
    const rf_decode_setup *decode;
    const pl_mix *mix;         /* each tar source's label rule */
    /* The settings it reads (rf_config). */
    uint32_t nthreads, nice, num_classes;
    rf_sample_hook hook;
    void *hook_ctx;
    float mean[3], std[3];
    /* The threads and their decoders. */
    pthread_t *threads;
    uint32_t started;
    rf_decoder **decs;
} pl_pool;

void pl_pool_init(pl_pool *p, const rf_config *c, pl_core *core, struct pl_dispatch *disp,
                  pl_ring *ring, const rf_dataset *ds, const struct pl_fields *fields,
                  struct pl_gpu *gpu, pl_counters *counters, const rf_decode_setup *decode,
                  const pl_mix *mix);
/* create: the thread table and one decoder per thread. */
int pl_pool_alloc(pl_pool *p, rf_err *err);
void pl_pool_free(pl_pool *p);
/* Start the threads (mu not held; they inherit the caller's NUMA placement). On a failure
 * the threads started so far are running: pl_pool_join stops nothing, it joins them. */
int pl_pool_start(pl_pool *p, rf_err *err);
/* Join the threads, once stop was set and cv_dec broadcast. */
void pl_pool_join(pl_pool *p);

#endif
