/* schedule.h — the decode scheduler (rf_config.decode_schedule): where each JPEG is decoded,
 * the hardware decoders, the CUDA kernels or the CPU. Two parts:
 *  - the controller (rf_sched, rf_sched_step): a pure function of the signals the consumer
 *    sees per batch, which moves the shares; tests/test_schedule.c feeds it simulated signals;
 *  - the loader's side (pl_sched, pl_sched_*: schedule.c): the mode resolved at create, the
 *    engines' opener thread, the per-sample route the decode threads ask for, and the step the
 *    consumer takes per batch.
 * Included by pipeline.h; nothing else but the tests includes it. */
#ifndef RF_PL_SCHEDULE_H
#define RF_PL_SCHEDULE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "base/common.h"

#define RF_SCHED_ONE 1000u       /* shares are in permille of the JPEGs */
#define RF_SCHED_START 500u      /* the GPU share a run starts with */
#define RF_SCHED_STEP_MIN 8u     /* the smallest move of the GPU share (permille) */
#define RF_SCHED_STEP_MAX 250u   /* the largest: four moves cross the whole range */
#define RF_SCHED_HW_UP 16u       /* the engines' capacity grows by this when they kept up */
#define RF_SCHED_HW_DOWN 64u     /* ... and shrinks by this when the consumer waited for them */

/* What the consumer saw when it was handed one batch. */
typedef struct rf_sched_in {
    uint32_t ready;          /* batches decoded and waiting behind it (not counting it) */
    uint32_t depth;          /* slots of the ring */
    uint32_t waited;         /* 1: it waited for this batch (the loader is behind) */
    uint32_t engines;        /* enum rf_hw_engines */
    uint32_t engine_samples; /* samples of the batch the engines decoded */
    uint64_t gpu_wait_ns;    /* its wait for the batch's GPU work (kernels and engines) */
    uint64_t period_ns;      /* time since the batch before it was handed out */
} rf_sched_in;

/* The controller's state: the shares the decode threads route by, and what moves them. */
typedef struct rf_sched {
    uint32_t gpu;    /* permille of the JPEGs sent to the GPU (engines and kernels) */
    uint32_t hw;     /* permille sent to the engines, <= gpu: engines first */
    uint32_t hw_cap; /* the engines' capacity as measured so far, permille */
    uint32_t step;   /* the GPU share's next move */
    int32_t last;    /* the direction of the last move: -1, 0, +1 */
} rf_sched;

void rf_sched_init(rf_sched *s);
/* One batch's signals in, the shares moved: behind (the consumer waited, or nothing was
 * ready) raises the GPU share, ahead (every other slot ready: the decode threads will wait for
 * a free slot) lowers it, between holds it; a move in the same direction doubles the step,
 * a reversal halves it (bounded by RF_SCHED_STEP_MIN and _MAX), so it settles instead of
 * swinging. The engines' share is the GPU share up to their capacity, which grows while they
 * keep up and shrinks when the consumer waited for the batch's GPU work; 0 until they are
 * ready. */
void rf_sched_step(rf_sched *s, const rf_sched_in *in);

/* Where one sample goes (pl_sched_route). */
enum pl_route { PL_ROUTE_CPU = 0, PL_ROUTE_KERNELS = 1, PL_ROUTE_ENGINE = 2 };

/* The loader's scheduler: mode set at create; the shares written by the consumer's thread and
 * read by the decode threads (relaxed: a share is a hint, any value routes a sample to a path
 * that gives the same pixels); engines written by the opener (release: the backend's engine
 * state it opened) and read with acquire before an engine packet is placed. */
typedef struct pl_sched {
    uint32_t mode;    /* enum rf_decode_schedule, resolved */
    _Atomic uint32_t gpu, hw, engines;
    rf_sched ctl;     /* the consumer's thread only */
    uint64_t last_ns; /* when the consumer was handed its last batch */
    pthread_t opener;
    int opener_on;
    char engine_why[RF_ERRMSG_MAX]; /* why the engines are out (the opener's error), or "" */
} pl_sched;

#endif
