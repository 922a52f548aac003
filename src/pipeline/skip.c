/* skip.c — the skip policy (on_error = SKIP): the table pl_policy_skip that create installs
 * and the dispatch cursor calls for epochs, its own outputs and every sample's outcome.
 *
 * DESIGN
 * Runs on the I/O threads (through take() and done()) and the decode threads (through
 * pl_task_end), always with mu held, except skip_setup, which create calls. It owns the skip
 * bookkeeping (skst, skq, the sk_* cursors, the skip counts) and reaches the cursor only
 * through what dispatch.c exports in pipeline.h (slot claim and advance, sample reads, the next
 * epoch's plan). The algorithm: */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/pipeline.h"

/* Fail mode: the first failed sample is a sticky error naming shard, member, offset and cause.
 * Skip mode: a failed sample leaves a hole at its output position (batch, index) that another
 * sample fills, chosen so that the batches stay a pure function of (seed, epoch, dataset) and
 * of which samples are bad, whatever the threads and timing:
 *  - Outputs o = 0 .. P-1 of the rank's epoch (o = batch * batch_size + index) normally hold
 *    the rank's candidates j = 0 .. R-1 (rf_plan_sample(j)), then the plan's padding [R, P).
 *  - The forward cursor (the ordinary dispatcher) gives output o candidate o. Holes are filled
 *    strictly in output order (the walk sk_a waits at the first output not yet final) by a
 *    replacement cursor that walks the rank's candidates from the END backwards (sk_rtop). A
 *    replacement that fails leaves the hole open and the next candidate is taken.
 *  - The cursors must never take the same candidate, whatever the timing. So the forward cursor
 *    runs in phases: it dispatches outputs below sk_L freely; at sk_L it waits until every
 *    earlier output is final (a drain), then opens the next phase [o, o + min(C, (rtop-o)/2))
 *    with C = max(SK_PHASE_MIN, 8 * batch_size); the candidates above the phase are the reserve
 *    its holes draw from. Phase ends depend only on earlier outcomes: deterministic.
 *  - When no candidate is left (the cursors met), the hole and every output from there to R
 *    become blank padding (zero image, label -1, is_padding 1, key "", sample id and position
 *    UINT64_MAX). A failed padding sample of the plan becomes blank too and is not counted.
 *    So each batch keeps its planned count, every rank the same number of batches, and
 *    delivered (non-padding) + skipped == R for the rank's epoch.
 *  - The dispatcher enters the next epoch only when all outputs of this one are final
 *    (replacements need this epoch's plan).
 *  - Late verdicts (GPU decode: pl_gpu_check gives them with the batch): such a sample is
 *    pending (SK_LATE) until the consumer checks its batch, which then goes back to FILLING
 *    for its holes; phases end at batch boundaries (skip_phase_late_locked).
 * Without failures the outputs are exactly fail mode's. The cost is one drain per phase (a few
 * per epoch and one per SK_PHASE_MIN samples), only in skip mode. */
typedef struct skip_item {
    uint32_t slot, index;
    uint64_t cand; /* candidate j of the rank's epoch, or UINT64_MAX: blank */
} skip_item;

/* SK_LATE (with SK_PENDING): the sample is in, but its GPU decode's verdict comes with its
 * batch (rf_loader.gpu.late): the consumer gives it through skip_late_locked. SK_FAILED with
 * it: the sample failed on its decode thread (counted), and becomes a hole with that verdict,
 * so that holes are still filled in output order when some verdicts come late. */
enum { SK_PENDING = 0, SK_GOOD = 1, SK_HOLE = 2, SK_FINAL = 3, SK_MASK = 3, SK_REP = 0x10,
       SK_PAD = 0x20, SK_LATE = 0x40, SK_FAILED = 0x80 };

/* Task t's sample gets its verdict with its batch: late verdicts, in a slot's first fill (a
 * refill's replacements are decoded on the CPU, verdicts at once). */
static int skip_late_task(const rf_loader *ld, const task *t)
{
    return ld->gpu.late && !t->raw && !t->blank && !ld->slots[t->slot].gpu.refill;
}
#define SK_PHASE_MIN 4096u

static uint8_t *sk_status(rf_loader *ld, uint64_t o)
{
    uint64_t seq = ld->sk_seq0 + o / ld->batch;
    return &ld->skst[(seq % ld->depth) * ld->batch + o % ld->batch];
}

/* Reset the bookkeeping for the dispatcher's newly planned epoch (batch 0 is d_seq). */
static void skip_epoch_locked(rf_loader *ld)
{
    PL_ASSERT_LOCKED(ld);
    const rf_plan *p = &ld->plan;
    ld->sk_P = p->per_rank;
    ld->sk_R = pl_plan_real(p);
    ld->sk_L = 0;
    ld->sk_rtop = ld->sk_R;
    ld->sk_a = 0;
    ld->sk_fwd_run = ld->sk_rep_run = 0;
    ld->sk_met = ld->sk_epoch_wait = ld->sk_waiting = 0;
    ld->sk_seq0 = ld->d_seq;
}

static void skip_queue_locked(rf_loader *ld, uint64_t o, uint64_t cand)
{
    /* one item per slot position at most: the queue never overflows */
    assert(ld->skq_head - ld->skq_tail < ld->skq_cap);
    uint64_t seq = ld->sk_seq0 + o / ld->batch;
    skip_item *q = &ld->skq[ld->skq_head++ % ld->skq_cap];
    q->slot = (uint32_t)(seq % ld->depth);
    q->index = (uint32_t)(o % ld->batch);
    q->cand = cand;
}

/* Where the walk stops: the forward cursor's next output, or at the epoch's end its last. */
static uint64_t walk_front(const rf_loader *ld)
{
    return ld->sk_epoch_wait ? ld->sk_P : ld->d_k * ld->batch + ld->d_j;
}

/* Advance sk_a over final outputs; give the first hole the next replacement (or a blank when
 * none is left); check the consecutive-failure limit. */
static void skip_walk_locked(rf_loader *ld)
{
    uint64_t front = walk_front(ld);
    while (ld->sk_a < front && !ld->err.code) {
        uint8_t *st = sk_status(ld, ld->sk_a);
        int state = *st & SK_MASK;
        if (state == SK_PENDING)
            return;
        if (state != SK_HOLE) {
            if (state == SK_GOOD && !(*st & SK_PAD)) {
                if (*st & SK_REP)
                    ld->sk_rep_run = 0;
                else
                    ld->sk_fwd_run = 0;
            }
            ld->sk_a++;
            continue;
        }
        if (!(*st & SK_PAD)) {
            uint64_t run = (*st & SK_REP) ? ++ld->sk_rep_run : ++ld->sk_fwd_run;
            if (run > ld->cfg.max_consecutive_skips) {
                const rf_err *last = &ld->sk_errs[st - ld->skst]; /* the hole's own */
                char m[RF_ERRMSG_MAX];
                snprintf(m, sizeof m, "%llu consecutive samples failed; last: %s",
                         (unsigned long long)run, last->msg);
                pl_fail_locked(ld, last->code, m);
                return;
            }
            if (!ld->sk_met && ld->sk_rtop > ld->sk_L) {
                *st = SK_PENDING | SK_REP;
                skip_queue_locked(ld, ld->sk_a, --ld->sk_rtop);
                return; /* strict output order: later holes wait for this one */
            }
            ld->sk_met = 1;
        }
        *st = SK_FINAL | SK_PAD;
        skip_queue_locked(ld, ld->sk_a, UINT64_MAX);
        ld->sk_a++;
    }
}

/* A replacement or blank task for one slot position; NULL when out of tasks or arena. */
static task *skip_task_locked(rf_loader *ld, const skip_item *it)
{
    PL_ASSERT_LOCKED(ld);
    if (pl_tasks_full_locked(ld))
        return NULL;
    slot *s = &ld->slots[it->slot];
    uint64_t id = UINT64_MAX, pos = UINT64_MAX;
    uint8_t pad = 1;
    sample_read r = {.end = ld->arena_head,
                     .dst = ld->tokens ? s->stage + (uint64_t)it->index * ld->stage_bytes
                                       : ld->arena};
    int blank = it->cand == UINT64_MAX;
    if (!blank) {
        rf_plan_sample(&ld->plan, it->cand, &id, &pos, &pad);
        if (pl_sample_read_locked(ld, s, it->index, id, &r))
            return NULL;
    }
    uint32_t i = it->index;
    s->ids[i] = id;
    s->positions[i] = pos;
    s->padding[i] = pad;
    s->keys[i] = blank ? "" : ld->tokens ? ld->ds.files[r.file].path
                                         : ld->ds.keys + ld->ds.samples[id].key;
    task *t = &ld->tasks[ld->task_head % ld->ntasks];
    t->seq = ld->task_head++;
    t->sample_id = id;
    t->aug_seed = blank ? 0 : rf_plan_aug_seed(&ld->plan, ld->d_epoch, id, pos);
    t->slot = it->slot;
    t->index = i;
    t->raw = ld->tokens;
    t->rep = !blank;
    t->padout = pad;
    t->blank = (uint8_t)blank;
    t->why = 0;
    assert(ld->task_head - ld->task_tail <= ld->ntasks);
    atomic_store_explicit(&t->finished, 0, memory_order_relaxed); /* under mu */
    pl_task_set_read(ld, t, &r);
    return t;
}

/* Forward output (d_k, d_j) after the cursors met: a blank, with the slot claim and cursor
 * advance of dispatch_one_locked. */
static task *skip_forward_blank_locked(rf_loader *ld)
{
    slot *s = pl_dispatch_slot_locked(ld);
    if (!s)
        return NULL;
    uint32_t si = (uint32_t)(ld->d_seq % ld->depth);
    pl_slot_open_locked(ld, s); /* clears the slot's skip states too (skip_slot_open) */
    skip_item it = {si, ld->d_j, UINT64_MAX};
    task *t = skip_task_locked(ld, &it);
    ld->skst[(uint64_t)si * ld->batch + ld->d_j] = SK_FINAL | SK_PAD;
    pl_dispatch_advance_locked(ld); /* waits for the epoch's outcomes (skip_epoch_end) */
    return t;
}

/* The next phase from output o (a batch's first) with late verdicts (GPU decode): they come
 * for whole batches only (pl_gpu_check), so a drain inside a batch would wait for that batch,
 * which waits for the drain. Phases end at batch boundaries; once `want` is less than a batch,
 * the last phase takes every candidate left and has no reserve: its holes become blank
 * padding, as after the cursors met. Every candidate is still taken once, so an epoch
 * delivers the same samples as with verdicts per sample; only positions may differ. */
static void skip_phase_late_locked(rf_loader *ld, uint64_t o, uint64_t want)
{
    assert(o % ld->batch == 0);
    uint64_t n = want / ld->batch * ld->batch;
    if (n) {
        ld->sk_L = o + n;
    } else {
        ld->sk_L = ld->sk_rtop;
        ld->sk_met = 1;
    }
}

/* Skip mode's part of dispatch. Returns 1 when the call is handled here (*out: a task, or NULL
 * when blocked), 0 when dispatch_one_locked dispatches forward output (d_k, d_j) as usual. */
static int skip_dispatch_locked(rf_loader *ld, task **out)
{
    PL_ASSERT_LOCKED(ld);
    *out = NULL;
    ld->sk_waiting = 0;
    skip_walk_locked(ld);
    if (ld->err.code)
        return 1;
    if (ld->skq_tail < ld->skq_head) {
        if ((*out = skip_task_locked(ld, &ld->skq[ld->skq_tail % ld->skq_cap])))
            ld->skq_tail++;
        return 1;
    }
    if (ld->sk_epoch_wait) {
        if (ld->sk_a < ld->sk_P) {
            ld->sk_waiting = 1;
            return 1;
        }
        pl_plan_next_epoch_locked(ld); /* resets the bookkeeping */
        if (ld->d_done)
            return 1;
    }
    uint64_t o = ld->d_k * ld->batch + ld->d_j;
    if (o >= ld->sk_R || o < ld->sk_L)
        return 0; /* the plan's padding, or a forward output of the open phase */
    if (!ld->sk_met) {
        if (ld->sk_a < o) { /* drain: the next phase depends on every earlier outcome */
            ld->sk_waiting = 1;
            return 1;
        }
        uint64_t left = ld->sk_rtop > o ? ld->sk_rtop - o : 0;
        uint64_t phase = RF_MAX((uint64_t)SK_PHASE_MIN, 8ull * ld->batch);
        if (left == 0)
            ld->sk_met = 1;
        else if (ld->gpu.late)
            skip_phase_late_locked(ld, o, RF_MIN(phase, left / 2));
        else
            ld->sk_L = o + RF_MIN(phase, RF_MAX(1, left / 2));
    }
    if (!ld->sk_met || o < ld->sk_L) /* o < sk_L: the last phase of late verdicts opened */
        return 0;
    *out = skip_forward_blank_locked(ld);
    return 1;
}

/* Position st just got its outcome (or a good late verdict). The walk stops at sk_a, the
 * first output without one, and only that output's outcome lets it move; it runs on the I/O
 * threads, which are woken for it only when its moving matters: a drain or the epoch's end
 * waits for it (sk_waiting), or a hole behind it waits for its replacement (which its batch,
 * and so the slot the cursor may wait for, needs). Other outcomes change nothing the cursor
 * waits for. Every outcome woke them during a drain, and every late verdict always: with a
 * batch's verdicts given on the consumer's thread, a broadcast per sample of every step. */
static void walk_may_move_locked(rf_loader *ld, const uint8_t *st)
{
    if (st != sk_status(ld, ld->sk_a))
        return;
    int wake = ld->sk_waiting;
    uint64_t front = walk_front(ld);
    for (uint64_t o = ld->sk_a + 1; o < front && !wake; o++) /* the open slots' outputs */
        wake = (*sk_status(ld, o) & SK_MASK) == SK_HOLE;
    if (wake)
        pthread_cond_broadcast(&ld->cv_io);
}

/* Outcomes of a sample in skip mode (under mu). */
static void skip_ok_locked(rf_loader *ld, const task *t)
{
    PL_ASSERT_LOCKED(ld);
    uint8_t flags = (uint8_t)((t->rep ? SK_REP : 0) | (t->padout ? SK_PAD : 0));
    uint8_t state = t->blank ? SK_FINAL : skip_late_task(ld, t) ? SK_PENDING | SK_LATE
                                                                 : SK_GOOD;
    uint8_t *st = &ld->skst[(uint64_t)t->slot * ld->batch + t->index];
    *st = (uint8_t)(state | flags);
    walk_may_move_locked(ld, st);
}

/* Position (si, index) failed: a hole, counted (unless a padding output: SK_PAD in flags). */
static void skip_hole_locked(rf_loader *ld, uint32_t si, uint32_t index, uint8_t flags,
                             int reason, int code, const char *msg)
{
    if (!(flags & SK_PAD)) {
        slot *s = &ld->slots[si];
        ld->skipped++;
        ld->skipped_by[reason]++;
        s->skipped++;
        s->skipped_by[reason]++;
    }
    rf_err *last = &ld->sk_errs[(uint64_t)si * ld->batch + index];
    last->code = code;
    snprintf(last->msg, sizeof last->msg, "%s", msg);
    ld->skst[(uint64_t)si * ld->batch + index] = (uint8_t)(SK_HOLE | flags);
    pthread_cond_broadcast(&ld->cv_io);
}

static int skip_failed_locked(rf_loader *ld, const task *t, int reason, int code,
                              const char *msg)
{
    PL_ASSERT_LOCKED(ld);
    uint8_t flags = (uint8_t)((t->rep ? SK_REP : 0) | (t->padout ? SK_PAD : 0));
    skip_hole_locked(ld, t->slot, t->index, flags, reason, code, msg);
    if (!skip_late_task(ld, t))
        return 0; /* a hole: the slot waits for its replacement or blank */
    /* Counted now, a hole once the batch's verdicts come: the walk waits at the first late
     * verdict before it, which comes only when the batch is published, so it counts down. */
    ld->skst[(uint64_t)t->slot * ld->batch + t->index] =
        (uint8_t)(SK_PENDING | SK_LATE | SK_FAILED | flags);
    return 1;
}

/* The late verdict on position (si, index) (GPU decode, from pl_gpu_check): code 0 good,
 * otherwise a hole counted under `reason`, as a sample that failed on its decode thread.
 * A sample that failed on its decode thread in such a batch becomes its hole now, whatever
 * the code. Returns 1 for a hole. A position that waits for no verdict (a blank, a refill's
 * replacement, or one given before the slot was refilled) is left as it is. */
static int skip_late_locked(rf_loader *ld, uint32_t si, uint32_t index, int reason, int code,
                            const char *msg)
{
    PL_ASSERT_LOCKED(ld);
    uint8_t *st = &ld->skst[(uint64_t)si * ld->batch + index];
    if ((*st & SK_MASK) != SK_PENDING || !(*st & SK_LATE))
        return 0;
    uint8_t flags = *st & (SK_REP | SK_PAD);
    if (*st & SK_FAILED) { /* failed on its decode thread, counted then */
        *st = (uint8_t)(SK_HOLE | flags);
        pthread_cond_broadcast(&ld->cv_io);
        return 1;
    }
    if (code) {
        skip_hole_locked(ld, si, index, flags, reason, code, msg);
        return 1;
    }
    *st = (uint8_t)(SK_GOOD | flags);
    walk_may_move_locked(ld, st);
    return 0;
}

static int skip_setup(rf_loader *ld, rf_err *err)
{
    uint64_t n = (uint64_t)ld->depth * ld->batch; /* one entry per slot position */
    if (n + 2 > UINT32_MAX)
        return rf_seterr(err, RF_ENOMEM, "skip mode: prefetch_depth %u x batch %u slot positions "
                         "exceed %u", ld->depth, ld->batch, UINT32_MAX - 2);
    ld->skq_cap = (uint32_t)n + 2;
    size_t errs = (size_t)n * sizeof *ld->sk_errs;
    size_t bytes = (size_t)n + (size_t)ld->skq_cap * sizeof *ld->skq + errs;
    if (!pl_alloc_refused(ld, "skip bookkeeping", bytes)) {
        ld->skst = calloc(n, 1);
        ld->skq = calloc(ld->skq_cap, sizeof *ld->skq);
        ld->sk_errs = calloc(n, sizeof *ld->sk_errs);
    }
    if (!ld->skst || !ld->skq || !ld->sk_errs)
        return rf_seterr(err, RF_ENOMEM, "cannot allocate %zu bytes of skip bookkeeping "
                         "(prefetch_depth %u x batch %u positions): out of memory", bytes,
                         ld->depth, ld->batch);
    return 0;
}

/* The forward cursor passed the epoch's last batch: skip_dispatch_locked plans the next epoch
 * once every output of this one is final (replacements need this epoch's plan). */
static void skip_epoch_end_locked(rf_loader *ld) { ld->sk_epoch_wait = 1; }

/* Slot si opens for a new batch: its positions have no outcome yet. */
static void skip_slot_open_locked(rf_loader *ld, uint32_t si)
{
    memset(ld->skst + (uint64_t)si * ld->batch, 0, ld->batch);
}

const pl_policy pl_policy_skip = {
    .setup = skip_setup,
    .epoch_locked = skip_epoch_locked,
    .epoch_end_locked = skip_epoch_end_locked,
    .dispatch_locked = skip_dispatch_locked,
    .slot_open_locked = skip_slot_open_locked,
    .ok_locked = skip_ok_locked,
    .failed_locked = skip_failed_locked,
    .late_locked = skip_late_locked,
};
