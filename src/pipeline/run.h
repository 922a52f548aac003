/* run.h — start and stop of the pipeline's threads (run.c), for create, set_epoch, stop and
 * destroy. */
#ifndef RF_PL_RUN_H
#define RF_PL_RUN_H

#include <stdint.h>

#include "base/common.h"
#include "ringfeed.h"

/* Stop every thread and reap in-flight work; the ring keeps its memory. */
void pl_threads_stop(rf_loader *ld);
/* With the threads stopped: return the published slots to the backend and free them, the
 * leased ones too unless keep_leased. */
void pl_slots_return(rf_loader *ld, int keep_leased);
void pl_pipeline_stop(rf_loader *ld);
/* (Re)start at the consumer's batch, planning `epoch` from order position `base`, the threads
 * placed on the loader's NUMA node. */
int pl_pipeline_start_placed(rf_loader *ld, uint64_t epoch, uint64_t base, rf_err *err);

#endif
