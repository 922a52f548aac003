/* testing.h — internal hooks for tests (not part of the public API, not exported from the
 * shared library: tests link the static library). Hooks are known at create (create starts
 * reading at once), never read from the environment.
 *
 * fault: installed as the loader's rf_io_source.fault, so rf_io_complete() calls it for every
 * attempt of every read, from either engine, with the request and the attempt's raw result
 * (bytes, or -errno); it returns the result to act on (a short count, 0, -EAGAIN / -EINTR:
 * retried up to io_retries, -EIO: the error policy). Runs on I/O threads concurrently. */
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

/* Lifecycle faults (docs/reliability.md, "Lifecycle"):
 * alloc: called before each large allocation of create (what: "batch ring", "staging arena",
 *   ...; bytes: its size); non-zero makes it fail as if the system refused, so a test reaches
 *   every create failure path (RLIMIT_AS cannot live with ASan's shadow memory).
 * backend: called before each backend submit (RF_HOOK_SUBMIT, decode or I/O thread) and
 *   release (RF_HOOK_RELEASE, consumer or destroy) with the batch's sequence number; a
 *   negative return makes that call fail with it, as a CUDA sticky error does. Runs
 *   concurrently on several threads. */
enum rf_hook_op { RF_HOOK_SUBMIT = 0, RF_HOOK_RELEASE = 1 };
typedef struct rf_test_hooks {
    rf_fault_fn io;  /* as rf_loader_create_faulty's fault */
    void *io_ctx;
    int (*alloc)(void *ctx, const char *what, size_t bytes);
    void *alloc_ctx;
    int (*backend)(void *ctx, int op, uint64_t seq);
    void *backend_ctx;
    /* io_async: io_uring hands every read to its worker threads (RF_IO_FORCE_ASYNC), so a
     * test checks that storage_read_bytes still sees them. */
    int io_async;
    /* gpu_late_verdicts: GPU decode on the host backend keeps a packet's verdict in the slot,
     * and the GPU decode stage's check (pl_gpu_check) turns it into the sample's error or skip,
     * as on the CUDA backend: the device's verdict path runs in CI. */
    int gpu_late_verdicts;
    /* gpu_device_layout: GPU decode on the host backend takes the CUDA backend's slot layout
     * (packed stage, late verdicts, the refill's compaction), and the check first decodes the
     * packed batch with the kernels' host code as cuda_submit's kernels would. uint8 output
     * only (create refuses hw_decode_percent and conversions with it). */
    int gpu_device_layout;
    /* sched: the host backend runs the balancing scheduler (AUTO becomes BALANCE, as on
     * CUDA); its engines open on the opener thread after sched_open_ms, or never with
     * sched_no_engines. sched_perturb, when set, is called on the stage's thread once per batch
     * handed out and may overwrite the shares (clamped), as a real run's timing would. */
    int sched;
    int sched_no_engines;
    uint32_t sched_open_ms;
    void (*sched_perturb)(void *ctx, uint64_t seq, uint32_t *gpu, uint32_t *hw);
    void *sched_ctx;
    /* remote_engine_tries: non-zero: the curl engine's attempts per request, while create's
     * requests keep remote_retries, so create gets through faults a sample's reads exhaust. */
    uint32_t remote_engine_tries;
    /* sched_short_windows: a controller window is RF_SCHED_WINDOW batches however short. */
    int sched_short_windows;
    /* sched_open_join: rf_loader_next waits at each batch handed out until the GPU decode
     * stage acted upon it and joined any opener it started, so engines are ready at the next
     * batch whatever the timing. */
    int sched_open_join;
    /* sched_open_at_create: create starts the opener and waits for it, so every sample of the
     * engines' share goes to them (tests of the engines' decoding, tests/test_cuda.c). */
    int sched_open_at_create;
} rf_test_hooks;

/* rf_loader_create with any of the hooks above (hooks NULL or all members NULL: none). */
int rf_loader_create_hooked(const rf_config *cfg, const rf_test_hooks *hooks, rf_loader **out,
                            char *out_error, size_t error_len);

#endif
