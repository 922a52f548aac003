/* state.h — what every stage of the running pipeline shares: the one lock `mu` and its
 * condition variables, the stop flag, the sticky error, the process that owns the loader and
 * the test hooks (pl_core, the loader's first member); the helpers that take mu; the messages
 * that name a sample; the token window of a sample id. state.c calls no other pipeline file.
 *
 * LOCK ORDER
 * There is one lock, `mu`. Nothing in the pipeline takes another lock while holding it, and
 * no thread holds another lock while taking it (the I/O engines call take() and done() with
 * none of their own held). One exception, in that order only: pl_cache_has (dispatch, under
 * mu) takes the shard cache's mutex to queue a fill; the fill thread never takes mu.
 * Four condition variables, each waited on with mu:
 *  - cv_io: I/O threads in take() wait for a FREE slot, a task or arena space (skip mode: also
 *    for the outcomes a phase or epoch boundary needs). Signalled when a slot is released (one
 *    I/O thread passes it on: pl_io_take); broadcast when the task tail advances and the
 *    dispatcher waits for room, on the skip walk's events (walk_may_move_locked and the late
 *    verdicts), on an error and on stop.
 *  - cv_dec: decode threads wait for the decode queue. Signalled per queued task by done();
 *    broadcast on an error and on stop.
 *  - cv_out (CLOCK_MONOTONIC, for next_timeout_ms): the consumer waits for its batch to be
 *    READY or BAD, or for the GPU decode stage to take a handout in. Broadcast when a slot is
 *    published or marked BAD, when handouts were taken in, on an error and on stop.
 *  - cv_gpu: the GPU decode stage's thread waits for a batch to check or a handout. Signalled
 *    by a submit that leaves a slot CHECKING and by each handout; broadcast on stop.
 * With mu held, code touches the cursors, arena, task ring, decode queue, slot states and skip
 * bookkeeping, formats messages (fstat()ing a file whose read failed), and calls the plan,
 * the token window and rf_pc_direct_span/fd, which neither block nor lock. It never calls the
 * backend, the I/O engine, a decoder, rf_pc_check/warm, a test hook, rf_config.sample_hook, or
 * open()/close(). Functions named *_locked, and every pl_policy entry but setup, must be
 * called with mu held.
 * Without mu: slot.pending counts a batch's samples down (pl_slot_finish); statistics and the
 * slot.gpu claims are atomics; the consumer's cursor belongs to its thread; settings, dataset,
 * ring and tables are written at create (or with every thread stopped) and only read after.
 *
 * MEMORY ORDERING
 * mu orders everything written under it, and hands each task from take() to done() to a
 * decode thread (so a read's bytes reach the decoder) and a published slot's rows to the
 * consumer. The atomics carry only what moves outside mu, each with its order and reason where
 * it is declared: slot.pending (acq_rel, slot.h) is the one hand-over; the rest are relaxed
 * except the scheduler's engine state (gpu_decode.h). No code relies on a single order across
 * two atomics, so none keeps seq_cst.
 * Debug builds (without NDEBUG) assert slot state before each transition, cursor and ring
 * bounds, and that a *_locked function's caller holds mu (pl_lock records the holder). */
#ifndef RF_PL_STATE_H
#define RF_PL_STATE_H

#include <assert.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "base/common.h"
#include "loaders/dataset.h"
#include "pipeline/testing.h"
#include "plan/plan.h"

struct slot;
struct task;

typedef struct pl_core {
    pthread_mutex_t mu;
    pthread_cond_t cv_io, cv_dec, cv_out, cv_gpu;
    int stop;
    rf_err err;  /* sticky worker error */
    rf_err last; /* detail for rf_last_error */
    /* fork(): the process that created the loader. Its threads, io_uring rings and CUDA
     * context exist only there, so every call from another process (a fork() child holding a
     * copy of the handle) returns RF_EFORK instead of waiting on threads that do not exist. */
    pid_t pid;
    rf_test_hooks hooks; /* src/pipeline/testing.h: injected faults (tests only; zero otherwise) */
    /* Debug builds: the thread holding mu (mu_held 0: none), written by pl_lock/pl_unlock and
     * the waits with mu held, so the holder reads it race-free (PL_ASSERT_LOCKED). Always
     * present, so the layout does not depend on NDEBUG. */
    pthread_t mu_owner;
    int mu_held;
} pl_core;

/* The lock and its condition variables (cv_out on the monotonic clock: next_timeout_ms must
 * not move with the wall clock), the creating process, a copy of the hooks. */
void pl_core_init(pl_core *k, const rf_test_hooks *hooks);
void pl_core_destroy(pl_core *k);

/* mu, taken and released through these so debug builds know its holder. Release (NDEBUG)
 * builds compile them to the bare pthread calls. */
static inline void pl_mu_own(pl_core *k)
{
#ifndef NDEBUG
    k->mu_owner = pthread_self();
    k->mu_held = 1;
#else
    (void)k;
#endif
}

static inline void pl_mu_disown(pl_core *k)
{
#ifndef NDEBUG
    k->mu_held = 0;
#else
    (void)k;
#endif
}

static inline void pl_lock(pl_core *k)
{
    pthread_mutex_lock(&k->mu);
    pl_mu_own(k);
}

static inline void pl_unlock(pl_core *k)
{
    pl_mu_disown(k);
    pthread_mutex_unlock(&k->mu);
}

/* pthread_cond_wait on cv with mu, which another thread may hold meanwhile. */
static inline void pl_wait(pl_core *k, pthread_cond_t *cv)
{
    pl_mu_disown(k);
    pthread_cond_wait(cv, &k->mu);
    pl_mu_own(k);
}

static inline int pl_timedwait(pl_core *k, pthread_cond_t *cv, const struct timespec *end)
{
    pl_mu_disown(k);
    int rc = pthread_cond_timedwait(cv, &k->mu, end);
    pl_mu_own(k);
    return rc;
}

/* The calling thread holds mu (debug builds; see pl_lock). */
#define PL_ASSERT_LOCKED(k) assert((k)->mu_held && pthread_equal((k)->mu_owner, pthread_self()))

/* The first worker error is kept (later ones are dropped: the first is the cause), and every
 * waiter wakes. */
void pl_fail_locked(pl_core *k, int code, const char *msg);
void pl_fail(pl_core *k, int code, const char *msg);
/* Fail mode: sample `index` of slot s failed (a data error); the slot keeps the lowest index. */
void pl_slot_bad_locked(struct slot *s, uint32_t index, int code, const char *msg);
int pl_set_last(pl_core *k, const rf_err *e);
int pl_forked(const pl_core *k);
int pl_fork_error(const pl_core *k);
int pl_stopped_error(pl_core *k);
/* RF_ECLOSED after rf_loader_cancel, with its detail text. */
int pl_cancelled_error(pl_core *k);
/* Whether the test hook refuses the allocation of `bytes` for `what`. */
int pl_alloc_refused(const pl_core *k, const char *what, size_t bytes);
/* Append a sentence to buf ("; " between sentences): rf_stats.memory_why. */
__attribute__((format(printf, 3, 4))) void pl_why_append(char *buf, size_t cap, const char *fmt,
                                                          ...);
/* "FILE: sample KEY at offset N" (a token window: "FILE: token window at offset N"). */
void pl_describe_task(const rf_dataset *ds, int tokens, const struct task *t, char *buf,
                      size_t n);
/* "member KEY.EXT at offset N": the image member of sample sm, hdr bytes into its span. */
void pl_describe_member(const rf_dataset *ds, const rf_sample *sm, uint32_t hdr, char *buf,
                        size_t n);
/* Token window `id` of `epoch`: its file and byte offset (loaders/tokens.c). */
void pl_token_window(const rf_dataset *ds, const rf_plan *plan, int sequential, uint64_t id,
                     uint64_t epoch, uint32_t *file, uint64_t *off);

#endif
