/* schedule.h — the decode scheduler's controller (decode_schedule BALANCE, schedule.c): the
 * shares of the JPEGs decoded by the engines, the kernels and the CPU, moved by a pure
 * function of one window's measurements, so tests/test_schedule.c can feed it simulated
 * plants. The loader's side of the scheduler is gpu_decode.h's. */
#ifndef RF_PL_SCHEDULE_H
#define RF_PL_SCHEDULE_H

#include <stdint.h>

#include "base/common.h"

#define RF_SCHED_ONE 1000u       /* shares are in permille of the JPEGs */
#define RF_SCHED_WINDOW 16u      /* batches whose mean period one controller step compares */
#define RF_SCHED_WINDOW_NS 250000000u /* and the least time they span (pl_sched_batch) */
#define RF_SCHED_MARGIN 20u      /* permille: a rate within 2% of the last is noise */
#define RF_SCHED_MARGIN_HW 30u   /* and for the engines' part, probed in smaller steps */
#define RF_SCHED_HW_START 300u   /* the engines' part of the GPU share at first (permille) */
#define RF_SCHED_HW_MIN_GPU 500u /* the least GPU share the engines take part in */
#define RF_SCHED_STEP_START 1000u /* the first probe's size: from the CPU alone to all GPU */
#define RF_SCHED_STEP_MIN 16u    /* a coordinate's round ends when its step halves below this */
#define RF_SCHED_STEP_MAX 500u   /* accepted moves double the step up to this */
#define RF_SCHED_STEP_MAX_HW 128u /* and the engines' part's up to this */
#define RF_SCHED_STEP_PROBE 64u  /* the step of a probe after a hold */
#define RF_SCHED_HOLD 16u        /* windows held at a settled point before the next probe, */
#define RF_SCHED_HOLD_DOUBLINGS 2u /* doubled after each hold that ended with no gain, to 64 */
#define RF_SCHED_KEEPS_UP 4u     /* the loader keeps up: the consumer waited for <= 1 in 4 */
#define RF_SCHED_WINDOW_START 4u /* batches that end the first window of a plain loader-bound
                                  * start (rf_sched_window_full) */

/* What the consumer saw over one window of batches, measured at one set of shares. */
typedef struct rf_sched_in {
    uint64_t period_ns; /* the mean time between two batches handed out: training step + waits */
    uint32_t batches;   /* batches in the window */
    uint32_t waited;    /* of them, the ones the consumer waited for */
    uint32_t engines;   /* enum rf_hw_engines at the window's end */
    uint64_t wait_ns;   /* the consumer's waits for its batches, summed over the window */
} rf_sched_in;

/* The controller's state: a hill climb on two coordinates, 0 the GPU share and 1 the engines'
 * part of it (permille of the GPU share), from an accepted point whose period was measured. */
typedef struct rf_sched {
    uint32_t gpu;      /* permille of the JPEGs sent to the GPU (engines and kernels) */
    uint32_t hw;       /* permille sent to the engines, <= gpu: engines first */
    uint32_t at[2];    /* the accepted point */
    uint32_t probe;    /* the probed value of coordinate `coord` while probing */
    uint32_t step[2];  /* each coordinate's next move */
    int32_t dir[2];    /* each coordinate's direction: -1 or +1 */
    uint32_t coord;    /* the coordinate probed now */
    uint32_t probing;  /* 1: the shares are the probe, not the accepted point */
    uint32_t tried;    /* 1: a probe from the accepted point at this step gained nothing */
    uint32_t quiet;    /* coordinates that ended their round with no gain, in a row */
    uint32_t hold;     /* windows left at the accepted point before the next probe */
    uint32_t holds;    /* holds in a row whose probes found no gain (the next hold's doubling) */
    uint32_t engines;  /* the engines' state the last window saw */
    uint64_t ref_ns;   /* the accepted point's period; 0: measure it with the next window */
    uint32_t kept_up;  /* 1: the last window found the loader keeping up (no climb) */
} rf_sched;

void rf_sched_init(rf_sched *s);
/* One window's measurements in, the shares moved to maximize the consumer's rate: a hill climb
 * by coordinate (probe, judge against the accepted point's period, hold when both coordinates
 * gain nothing, re-probe), run only while the loader is the bound; a loader that keeps up
 * lowers the GPU share instead. The rules are schedule.c's, each at the function that applies
 * it; docs/gpu-decode.md "The scheduler" tells them whole. Shares stay within
 * 0..RF_SCHED_ONE and hw <= gpu. */
void rf_sched_step(rf_sched *s, const rf_sched_in *in);

/* Whether window w (period_ns still the sum of its periods) is one controller step:
 * RF_SCHED_WINDOW batches spanning RF_SCHED_WINDOW_NS (fast loops measure more batches per
 * step, against the noise of their short periods), or 8x as many batches; with short_windows
 * (a test hook) RF_SCHED_WINDOW batches however short. The first window of a plainly
 * loader-bound start (first: no step yet) ends after RF_SCHED_WINDOW_START batches all waited
 * for: its first probe (all GPU) is a gain no noise can hide. */
int rf_sched_window_full(const rf_sched_in *w, int first, int short_windows);

#endif
