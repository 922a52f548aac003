/* api.h — what api.c offers the library besides the public API: resolving rf_config's
 * defaults at create. rf_config_init (ringfeed.h) writes every default; this is the one place
 * the AUTO values that follow from the config and the machine are resolved.
 * Internal: nothing here is part of the public API. */
#ifndef RF_API_H
#define RF_API_H

#include "ringfeed.h"

/* Resolve *c in place, before it is validated: 0 in a field with a fixed default becomes that
 * default (rf_config_init's value; old callers and short structs leave 0), and the AUTO values
 * that depend only on the config and the machine take their value: resize_shorter,
 * flip_prob, decode_threads (rf_cpu_count, at most 1024), prefetch_depth, token_dtype (token
 * sources), dct_scaling (OFF with gpu_decode or hw_decode_percent). Values out of range are
 * left for the caller to refuse. The AUTO fields that depend on what rf_loader_create finds
 * later are resolved where it finds them, and rf_loader_config reports them: device_kind (the
 * backend chosen), io_engine and io_threads (the engine the probe allows), staging_bytes (the
 * arena sized from the data set). */
void rf_config_resolve(rf_config *c);

#endif /* RF_API_H */
