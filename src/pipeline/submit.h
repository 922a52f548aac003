/* submit.h — the copy stage (submit.c): a finished slot to the backend (copy, conversion, GPU
 * decode kernels) and published; a returned slot released to the backend. Both behind the
 * test hook `backend`. */
#ifndef RF_PL_SUBMIT_H
#define RF_PL_SUBMIT_H

#include "pipeline/counters.h"
#include "pipeline/gpu_decode.h"
#include "pipeline/ring.h"
#include "pipeline/slot.h"
#include "pipeline/state.h"

typedef struct pl_submit {
    pl_core *core;
    pl_ring *ring;
    pl_gpu *gpu;
    const pl_backend *backend;
    pl_counters *counters;
} pl_submit;

/* The batch's last sample is in (the thread that counted it down): enqueue the copy and
 * publish the slot. */
void pl_slot_finish(pl_submit *u, slot *s);
/* The backend's release of slot s (device work ordered on stream). */
int pl_backend_release(pl_submit *u, slot *s, void *stream, rf_err *e);

#endif
