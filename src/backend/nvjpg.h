/* nvjpg.h — the GPU's hardware JPEG decoders (the NVJPG engines of A100, A30, H100 and H200)
 * through nvJPEG's hardware backend, for rf_config.hw_decode_percent (docs/gpu-decode.md).
 *
 * Why: the engines decode baseline JPEGs without the CPU and without the SMs a training step
 * needs (7 engines on the H200 machine, ~10k full 230 kpx decodes/s), and they take files with
 * or without restart markers. They decode whole images, so each sample travels as an engine
 * packet (gpujpeg.h): the whole file, the crop's resize plans and the layout of the component
 * planes in the batch's scratch. The engine writes the planes (nvJPEG's planar "unchanged"
 * output: the IDCT's samples, before upsampling), and the GPU decode's own vertical and
 * horizontal passes do libjpeg's upsampling, colour conversion and the resize from there.
 *
 * libnvjpeg is loaded with dlopen when a loader asks for the engines, never linked: ringfeed
 * builds and runs without it, and the CUDA toolkit or the nvidia-nvjpeg wheel supplies it.
 * RINGFEED_NVJPEG names the library file to load; otherwise libnvjpeg.so.13, then
 * libnvjpeg.so, are looked up as the dynamic linker does. */
#ifndef RF_NVJPG_H
#define RF_NVJPG_H

#include <stddef.h>
#include <stdint.h>

#include "base/common.h"

typedef struct rf_nvjpg rf_nvjpg;

/* Load libnvjpeg once per process and find its symbols, without touching the GPU: 0, or
 * RF_ENODEV saying why it did not load (the same message rf_nvjpg_open gives). Cheap after
 * the first call, so create checks it while the open itself runs later (rf_backend_ops
 * engine_load). */
int rf_nvjpg_load(rf_err *err);
/* Load libnvjpeg (rf_nvjpg_load) and open its hardware backend on the current CUDA device,
 * with `states` decode states (one per copy stream) for batches of up to max_batch images.
 * RF_ENODEV with the reason when the library is missing or the GPU has no JPEG engines;
 * RF_ECUDA, RF_ENOMEM for other failures. */
int rf_nvjpg_open(uint32_t states, uint32_t max_batch, rf_nvjpg **out, rf_err *err);
void rf_nvjpg_close(rf_nvjpg *nj);

/* Enqueue on `stream` the hardware decode of a batch's engine packets: the samples whose flag
 * is RF_GJ_ENGINE_PACKET, at staged + offs[i] (staged is the pinned host slot, which stays
 * untouched until the batch's event). Their planes go to the device scratch (scratch_bytes
 * long) at the packets' scratch_at. A file the engine refuses, or a packet that does not fit
 * the scratch, gets its rf_gj_status in the device array status (already zeroed on the
 * stream) and the batch goes on. State k is used by one call at a time (callers on the same
 * copy stream are serialized here); calls with different states run at once. Blocks until the
 * work queued on `stream` before the call is done: the engine does not wait for it. Returns
 * 0, or RF_ECUDA with err set when the decode could not be enqueued at all. */
int rf_nvjpg_decode(rf_nvjpg *nj, uint32_t k, const uint8_t *staged, const uint64_t *offs,
                    const uint8_t *flags, uint32_t count, uint8_t *scratch, size_t scratch_bytes,
                    int32_t *status, void *stream, rf_err *err);

#endif
