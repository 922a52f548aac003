/* testing.h — internal hooks for tests (not part of the public API, not exported from the
 * shared library: tests link the static library).
 *
 * Fault injection at ringfeed's own completion layer: `fault` is installed as the loader's
 * rf_io_source.fault, so rf_io_complete() calls it for every attempt of every read, from either
 * engine (io_uring CQEs and pread returns alike). It receives the request (fd, offset, len,
 * done, retries) and the attempt's raw result (bytes, or -errno) and returns the result to act
 * on: e.g. a short count, 0 (end of file), -EAGAIN / -EINTR (retried up to io_retries), -EIO
 * (persistent: follows the error policy). It runs on I/O threads, concurrently: keep any state
 * it uses thread-safe. The hook must be known before the first read, hence a create variant
 * rather than a setter (create starts reading at once); no environment variable is involved. */
#ifndef RF_TESTING_H
#define RF_TESTING_H

#include <stddef.h>
#include <stdint.h>

#include "io/io.h"
#include "ringfeed.h"

typedef int (*rf_fault_fn)(void *ctx, const rf_io_req *req, int res);

/* rf_loader_create with a fault hook (NULL: none, the same as rf_loader_create). */
int rf_loader_create_faulty(const rf_config *cfg, rf_fault_fn fault, void *ctx, rf_loader **out,
                            char *out_error, size_t error_len);

/* Lifecycle faults (docs/reliability.md, "Lifecycle"), in the same style: hooks known at
 * create, no environment variable.
 *
 * alloc: called before each large allocation that create makes for the pipeline (what: "batch
 *   ring", "staging arena", "slot tables", "task ring", "device pool", ...; bytes: the size
 *   asked for); returning non-zero makes that allocation fail as if the system refused it, so
 *   a test reaches every create failure path deterministically (no RLIMIT_AS, which ASan's
 *   shadow memory cannot live with).
 * backend: called before each backend submit (op RF_HOOK_SUBMIT, from a decode or I/O thread)
 *   and release (op RF_HOOK_RELEASE, from the consumer or destroy) with the batch's global
 *   sequence number; returning a negative code makes that call fail with it, as a CUDA
 *   backend does on a sticky error (RF_ECUDA: the loader becomes unusable). Runs concurrently
 *   on several threads: keep its state thread-safe. */
enum rf_hook_op { RF_HOOK_SUBMIT = 0, RF_HOOK_RELEASE = 1 };
typedef struct rf_test_hooks {
    rf_fault_fn io;  /* as rf_loader_create_faulty's fault */
    void *io_ctx;
    int (*alloc)(void *ctx, const char *what, size_t bytes);
    void *alloc_ctx;
    int (*backend)(void *ctx, int op, uint64_t seq);
    void *backend_ctx;
    /* io_async: io_uring hands every read to its worker threads (RF_IO_FORCE_ASYNC), which
     * the kernel otherwise does only with reads it cannot start without blocking; a test then
     * checks that storage_read_bytes still sees them. */
    int io_async;
    /* gpu_late_verdicts: GPU decode on the host backend keeps a packet's verdict (the status
     * its decode by the kernels' host code returned) in the slot instead of failing the sample
     * on the decode thread, and the GPU decode stage turns it into the sample's error or skip
     * when it checks the batch (pl_gpu_check), as on the CUDA backend, where the verdicts come
     * from the kernels after the batch was submitted. So the device's verdict path runs in
     * CI. */
    int gpu_late_verdicts;
    /* gpu_device_layout: GPU decode on the host backend takes the CUDA backend's slot layout
     * (gpu.device: packets and CPU-decoded pixels packed in the stage at offsets, gj_place_device
     * and its room, late verdicts, the refill's compaction), and the GPU decode stage's check
     * first decodes the packed batch with the kernels' host code the way cuda_submit's kernels
     * do (pl_gpu_check), into a buffer the batch points at. gpu_decode with uint8 output only
     * (create refuses hw_decode_percent and conversions with it). So the device placement,
     * refill and re-submit run in CI. */
    int gpu_device_layout;
    /* sched: the host backend runs the balancing scheduler (rf_config.decode_schedule AUTO
     * becomes BALANCE, as asking for it does on the CUDA backend): kernel packets decoded by
     * the kernels' host code, engine packets by the host stand-in rf_decode_planes, as gpu_decode and
     * hw_decode_percent on the host do. Its engines open on the opener thread after
     * sched_open_ms, or never with sched_no_engines; so do hw_decode_percent's (MANUAL),
     * which without this hook are ready from create on the host (the stand-in has nothing to
     * open). sched_perturb, when set, is called on the GPU decode stage's thread after each
     * controller step, once for each batch handed out, with the batch's sequence number, and
     * may overwrite the shares (permille; clamped to 1000 and hw <= gpu), so a test moves
     * the route of samples over time as a real run's timing would. */
    int sched;
    int sched_no_engines;
    uint32_t sched_open_ms;
    void (*sched_perturb)(void *ctx, uint64_t seq, uint32_t *gpu, uint32_t *hw);
    void *sched_ctx;
    /* remote_engine_tries: when non-zero, the curl engine makes at most this many attempts
     * per request (remote_retries + 1 otherwise) while create's requests keep
     * remote_retries, so a test can let create through faults that a sample's reads then
     * exhaust (the fault proxy fails every range alike). */
    uint32_t remote_engine_tries;
    /* sched_short_windows: a controller window is RF_SCHED_WINDOW batches however short they
     * took, so a test's short run of fast batches gets controller steps. */
    int sched_short_windows;
    /* sched_open_join: rf_loader_next waits, at each batch handed out, until the GPU decode
     * stage acted upon it and joined any opener it started (with the first batch, or with
     * BALANCE the first batch whose GPU share needs the engines), so a test's short run has
     * its engines ready from the next batch on, whatever the timing. */
    int sched_open_join;
    /* sched_open_at_create: create starts the opener and waits for it, so the engines are
     * READY (or NONE) before the first sample is decoded: for tests of the engines' decoding
     * itself, which need every sample of the engines' share on them (tests/test_cuda.c). */
    int sched_open_at_create;
} rf_test_hooks;

/* rf_loader_create with any of the hooks above (hooks NULL or all members NULL: none). */
int rf_loader_create_hooked(const rf_config *cfg, const rf_test_hooks *hooks, rf_loader **out,
                            char *out_error, size_t error_len);

#endif
