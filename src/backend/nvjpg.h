/* nvjpg.h — the GPU's hardware JPEG decoders (the NVJPG engines of A100, A30, H100 and H200)
 * through nvJPEG's hardware backend, for rf_config.hw_decode_percent (docs/gpu-decode.md).
 *
 * The engines decode whole baseline JPEGs, restart markers or not, without the CPU or the SMs
 * a training step needs. Each sample travels as an engine packet (gpujpeg.h): the engine writes
 * the component planes (nvJPEG's planar output, before upsampling) and the GPU decode's own
 * passes do libjpeg's upsampling, colour conversion and the resize from there.
 *
 * libnvjpeg is loaded with dlopen, never linked. RINGFEED_NVJPEG names the file to load;
 * otherwise libnvjpeg.so.13, then libnvjpeg.so, as the dynamic linker finds them. */
#ifndef RF_NVJPG_H
#define RF_NVJPG_H

#include <stddef.h>
#include <stdint.h>

#include "base/common.h"

typedef struct rf_nvjpg rf_nvjpg;

/* Load libnvjpeg once per process and find its symbols, without touching the GPU: 0, or
 * RF_ENODEV saying why (as rf_nvjpg_open would). Cheap after the first call. */
int rf_nvjpg_load(rf_err *err);
/* Load libnvjpeg (rf_nvjpg_load) and open its hardware backend on the current CUDA device,
 * with `states` decode states (one per copy stream) for batches of up to max_batch images.
 * RF_ENODEV with the reason when the library is missing or the GPU has no JPEG engines;
 * RF_ECUDA, RF_ENOMEM for other failures. */
int rf_nvjpg_open(uint32_t states, uint32_t max_batch, rf_nvjpg **out, rf_err *err);
void rf_nvjpg_close(rf_nvjpg *nj);

/* Enqueue on `stream` the hardware decode of the batch's samples flagged RF_GJ_ENGINE_PACKET, at
 * staged + offs[i] (the pinned slot, untouched until the batch's event), planes into the
 * scratch at the packets' scratch_at. A refused file, or a packet that does not fit, gets its
 * rf_gj_status in the device array status and the batch goes on. State k serves one call at a
 * time; different states run at once. Blocks until the work queued on `stream` before the call
 * is done. Returns 0, or RF_ECUDA with err set when nothing could be enqueued. */
int rf_nvjpg_decode(rf_nvjpg *nj, uint32_t k, const uint8_t *staged, const uint64_t *offs,
                    const uint8_t *flags, uint32_t count, uint8_t *scratch, size_t scratch_bytes,
                    int32_t *status, void *stream, rf_err *err);

#endif
