/* skip.c — the skip policy (on_error = SKIP): the table pl_policy_skip that create installs
 * and the dispatch cursor calls for epochs, its own outputs and every sample's outcome.
 * Always called with mu held (but skip_setup, at create); owns pl_skip and reaches the cursor
 * only through dispatch.h. The algorithm: */
#include "pipeline/skip.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/dispatch.h"

/* A failed sample leaves a hole at its output position that another sample fills, so that
 * the batches stay a pure function of (seed, epoch, dataset, which samples are bad), whatever
 * the timing (docs/reliability.md tells it for users):
 *  - Outputs o = 0 .. P-1 of the rank's epoch (o = batch * batch_size + index) hold the rank's
 *    candidates j = 0 .. R-1 (rf_plan_sample(j)), then the plan's padding [R, P). The forward
 *    cursor gives output o candidate o; holes are filled strictly in output order (the walk
 *    sk->a) by a replacement cursor walking the candidates from the END backwards (sk->rtop).
 *  - So the cursors never take the same candidate, the forward cursor runs in phases: outputs
 *    below sk->L go freely; at sk->L it drains (every earlier output final), then opens
 *    [o, o + min(C, (rtop-o)/2)), C = max(SK_PHASE_MIN, 8 * batch_size); the candidates above
 *    are the phase's reserve. Phase ends depend only on earlier outcomes.
 *  - When the cursors met, the hole and every output from there to R become blank padding
 *    (zero image, label -1, is_padding 1, key "", id and position UINT64_MAX); a failed
 *    padding sample becomes blank, uncounted. So delivered + skipped == R for the rank's epoch.
 *  - The next epoch starts only when every output of this one is final.
 *  - Late verdicts: such a sample is pending (SK_LATE) until its batch is checked; phases end
 *    at batch boundaries (skip_phase_late_locked).
 * Without failures the outputs are exactly fail mode's. */
typedef struct skip_item {
    uint32_t slot, index;
    uint64_t cand; /* candidate j of the rank's epoch, or UINT64_MAX: blank */
} skip_item;

/* SK_LATE (with SK_PENDING): the sample is in, but its GPU decode's verdict comes with its
 * batch (pl_gpu.late): the batch's check gives it through skip_late_locked. SK_FAILED with
 * it: the sample failed on its decode thread (counted), and becomes a hole with that verdict,
 * so that holes are still filled in output order when some verdicts come late. */
enum { SK_PENDING = 0, SK_GOOD = 1, SK_HOLE = 2, SK_FINAL = 3, SK_MASK = 3, SK_REP = 0x10,
       SK_PAD = 0x20, SK_LATE = 0x40, SK_FAILED = 0x80 };

/* Task t's sample gets its verdict with its batch: late verdicts, in a slot's first fill (a
 * refill's replacements are decoded on the CPU, verdicts at once). */
static int skip_late_task(const pl_dispatch *d, const task *t)
{
    return d->skip->late && !t->raw && !t->blank && !d->ring->slots[t->slot].gpu.refill;
}
#define SK_PHASE_MIN 4096u

static uint8_t *sk_status(pl_dispatch *d, uint64_t o)
{
    uint64_t seq = d->skip->seq0 + o / d->ring->batch;
    return &d->skip->st[(seq % d->ring->depth) * d->ring->batch + o % d->ring->batch];
}

/* Reset the bookkeeping for the dispatcher's newly planned epoch (batch 0 is d->seq). */
static void skip_epoch_locked(pl_dispatch *d)
{
    PL_ASSERT_LOCKED(d->core);
    pl_skip *sk = d->skip;
    const rf_plan *p = d->plan;
    sk->P = p->per_rank;
    sk->R = pl_plan_real(p);
    sk->L = 0;
    sk->rtop = sk->R;
    sk->a = 0;
    sk->fwd_run = sk->rep_run = 0;
    sk->met = sk->epoch_wait = sk->waiting = 0;
    sk->seq0 = d->seq;
}

static void skip_queue_locked(pl_dispatch *d, uint64_t o, uint64_t cand)
{
    pl_skip *sk = d->skip;
    /* one item per slot position at most: the queue never overflows */
    assert(sk->q_head - sk->q_tail < sk->q_cap);
    uint64_t seq = sk->seq0 + o / d->ring->batch;
    skip_item *q = &sk->q[sk->q_head++ % sk->q_cap];
    q->slot = (uint32_t)(seq % d->ring->depth);
    q->index = (uint32_t)(o % d->ring->batch);
    q->cand = cand;
}

/* Where the walk stops: the forward cursor's next output, or at the epoch's end its last. */
static uint64_t walk_front(const pl_dispatch *d)
{
    return d->skip->epoch_wait ? d->skip->P : d->k * d->ring->batch + d->j;
}

/* Advance sk->a over final outputs; give the first hole the next replacement (or a blank when
 * none is left); check the consecutive-failure limit. */
static void skip_walk_locked(pl_dispatch *d)
{
    pl_skip *sk = d->skip;
    uint64_t front = walk_front(d);
    while (sk->a < front && !d->core->err.code) {
        uint8_t *st = sk_status(d, sk->a);
        int state = *st & SK_MASK;
        if (state == SK_PENDING)
            return;
        if (state != SK_HOLE) {
            if (state == SK_GOOD && !(*st & SK_PAD)) {
                if (*st & SK_REP)
                    sk->rep_run = 0;
                else
                    sk->fwd_run = 0;
            }
            sk->a++;
            continue;
        }
        if (!(*st & SK_PAD)) {
            uint64_t run = (*st & SK_REP) ? ++sk->rep_run : ++sk->fwd_run;
            if (run > sk->max_run) {
                const rf_err *last = &sk->errs[st - sk->st]; /* the hole's own */
                char m[RF_ERRMSG_MAX];
                snprintf(m, sizeof m, "%llu consecutive samples failed; last: %s",
                         (unsigned long long)run, last->msg);
                pl_fail_locked(d->core, last->code, m);
                return;
            }
            if (!sk->met && sk->rtop > sk->L) {
                *st = SK_PENDING | SK_REP;
                skip_queue_locked(d, sk->a, --sk->rtop);
                return; /* strict output order: later holes wait for this one */
            }
            sk->met = 1;
        }
        *st = SK_FINAL | SK_PAD;
        skip_queue_locked(d, sk->a, UINT64_MAX);
        sk->a++;
    }
}

/* A replacement or blank task for one slot position; NULL when out of tasks or arena. */
static task *skip_task_locked(pl_dispatch *d, const skip_item *it)
{
    PL_ASSERT_LOCKED(d->core);
    if (pl_tasks_full_locked(d))
        return NULL;
    slot *s = &d->ring->slots[it->slot];
    uint64_t id = UINT64_MAX, pos = UINT64_MAX;
    uint8_t pad = 1;
    sample_read r = {.end = d->arena_head,
                     .dst = d->ring->tokens ? s->stage + (uint64_t)it->index * d->ring->stage_bytes
                                       : d->arena};
    int blank = it->cand == UINT64_MAX;
    if (!blank) {
        rf_plan_sample(d->plan, it->cand, &id, &pos, &pad);
        if (pl_sample_read_locked(d, s, it->index, id, &r))
            return NULL;
    }
    uint32_t i = it->index;
    s->ids[i] = id;
    s->positions[i] = pos;
    s->padding[i] = pad;
    s->keys[i] = blank ? "" : d->ring->tokens ? d->ds->files[r.file].path
                                         : d->ds->keys + d->ds->samples[id].key;
    task *t = &d->tasks[d->task_head % d->ntasks];
    t->seq = d->task_head++;
    t->sample_id = id;
    t->aug_seed = blank ? 0 : rf_plan_aug_seed(d->plan, d->epoch, id, pos);
    t->slot = it->slot;
    t->index = i;
    t->raw = d->ring->tokens;
    t->rep = !blank;
    t->padout = pad;
    t->blank = (uint8_t)blank;
    t->why = 0;
    assert(d->task_head - d->task_tail <= d->ntasks);
    atomic_store_explicit(&t->finished, 0, memory_order_relaxed); /* under mu */
    pl_task_set_read(d, t, &r);
    return t;
}

/* Forward output (d_k, d_j) after the cursors met: a blank, with the slot claim and cursor
 * advance of dispatch_one_locked. */
static task *skip_forward_blank_locked(pl_dispatch *d)
{
    slot *s = pl_dispatch_slot_locked(d);
    if (!s)
        return NULL;
    uint32_t si = (uint32_t)(d->seq % d->ring->depth);
    pl_slot_open_locked(d, s); /* clears the slot's skip states too (skip_slot_open) */
    skip_item it = {si, d->j, UINT64_MAX};
    task *t = skip_task_locked(d, &it);
    d->skip->st[(uint64_t)si * d->ring->batch + d->j] = SK_FINAL | SK_PAD;
    pl_dispatch_advance_locked(d); /* waits for the epoch's outcomes (skip_epoch_end) */
    return t;
}

/* The next phase from output o (a batch's first) with late verdicts (GPU decode): they come
 * for whole batches only (pl_gpu_check), so a drain inside a batch would wait for that batch,
 * which waits for the drain. Phases end at batch boundaries; once `want` is less than a batch,
 * the last phase takes every candidate left and has no reserve: its holes become blank
 * padding, as after the cursors met. Every candidate is still taken once, so an epoch
 * delivers the same samples as with verdicts per sample; only positions may differ. */
static void skip_phase_late_locked(pl_dispatch *d, uint64_t o, uint64_t want)
{
    pl_skip *sk = d->skip;
    assert(o % d->ring->batch == 0);
    uint64_t n = want / d->ring->batch * d->ring->batch;
    if (n) {
        sk->L = o + n;
    } else {
        sk->L = sk->rtop;
        sk->met = 1;
    }
}

/* Skip mode's part of dispatch. Returns 1 when the call is handled here (*out: a task, or NULL
 * when blocked), 0 when dispatch_one_locked dispatches forward output (d_k, d_j) as usual. */
static int skip_dispatch_locked(pl_dispatch *d, task **out)
{
    PL_ASSERT_LOCKED(d->core);
    pl_skip *sk = d->skip;
    *out = NULL;
    sk->waiting = 0;
    skip_walk_locked(d);
    if (d->core->err.code)
        return 1;
    if (sk->q_tail < sk->q_head) {
        if ((*out = skip_task_locked(d, &sk->q[sk->q_tail % sk->q_cap])))
            sk->q_tail++;
        return 1;
    }
    if (sk->epoch_wait) {
        if (sk->a < sk->P) {
            sk->waiting = 1;
            return 1;
        }
        pl_plan_next_epoch_locked(d); /* resets the bookkeeping */
        if (d->done)
            return 1;
    }
    uint64_t o = d->k * d->ring->batch + d->j;
    if (o >= sk->R || o < sk->L)
        return 0; /* the plan's padding, or a forward output of the open phase */
    if (!sk->met) {
        if (sk->a < o) { /* drain: the next phase depends on every earlier outcome */
            sk->waiting = 1;
            return 1;
        }
        uint64_t left = sk->rtop > o ? sk->rtop - o : 0;
        uint64_t phase = RF_MAX((uint64_t)SK_PHASE_MIN, 8ull * d->ring->batch);
        if (left == 0)
            sk->met = 1;
        else if (sk->late)
            skip_phase_late_locked(d, o, RF_MIN(phase, left / 2));
        else
            sk->L = o + RF_MIN(phase, RF_MAX(1, left / 2));
    }
    if (!sk->met || o < sk->L) /* o < sk->L: the last phase of late verdicts opened */
        return 0;
    *out = skip_forward_blank_locked(d);
    return 1;
}

/* Position st just got its outcome (or a good late verdict). The walk stops at sk->a, the
 * first output without one, and only that output's outcome lets it move; the I/O threads are
 * woken for it only when its moving matters: a drain or the epoch's end waits for it
 * (sk->waiting), or a hole behind it waits for its replacement. A broadcast per outcome would
 * wake them once per sample of every batch checked. */
static void walk_may_move_locked(pl_dispatch *d, const uint8_t *st)
{
    pl_skip *sk = d->skip;
    if (st != sk_status(d, sk->a))
        return;
    int wake = sk->waiting;
    uint64_t front = walk_front(d);
    for (uint64_t o = sk->a + 1; o < front && !wake; o++) /* the open slots' outputs */
        wake = (*sk_status(d, o) & SK_MASK) == SK_HOLE;
    if (wake)
        pthread_cond_broadcast(&d->core->cv_io);
}

/* Outcomes of a sample in skip mode (under mu). */
static void skip_ok_locked(pl_dispatch *d, const task *t)
{
    PL_ASSERT_LOCKED(d->core);
    uint8_t flags = (uint8_t)((t->rep ? SK_REP : 0) | (t->padout ? SK_PAD : 0));
    uint8_t state = t->blank ? SK_FINAL : skip_late_task(d, t) ? SK_PENDING | SK_LATE
                                                                 : SK_GOOD;
    uint8_t *st = &d->skip->st[(uint64_t)t->slot * d->ring->batch + t->index];
    *st = (uint8_t)(state | flags);
    walk_may_move_locked(d, st);
}

/* Position (si, index) failed: a hole, counted (unless a padding output: SK_PAD in flags). */
static void skip_hole_locked(pl_dispatch *d, uint32_t si, uint32_t index, uint8_t flags,
                             int reason, int code, const char *msg)
{
    pl_skip *sk = d->skip;
    if (!(flags & SK_PAD)) {
        slot *s = &d->ring->slots[si];
        sk->skipped++;
        sk->skipped_by[reason]++;
        s->skipped++;
        s->skipped_by[reason]++;
    }
    rf_err *last = &sk->errs[(uint64_t)si * d->ring->batch + index];
    last->code = code;
    snprintf(last->msg, sizeof last->msg, "%s", msg);
    sk->st[(uint64_t)si * d->ring->batch + index] = (uint8_t)(SK_HOLE | flags);
    pthread_cond_broadcast(&d->core->cv_io);
}

static int skip_failed_locked(pl_dispatch *d, const task *t, int reason, int code,
                              const char *msg)
{
    PL_ASSERT_LOCKED(d->core);
    uint8_t flags = (uint8_t)((t->rep ? SK_REP : 0) | (t->padout ? SK_PAD : 0));
    skip_hole_locked(d, t->slot, t->index, flags, reason, code, msg);
    if (!skip_late_task(d, t))
        return 0; /* a hole: the slot waits for its replacement or blank */
    /* Counted now, a hole once the batch's verdicts come: the walk waits at the first late
     * verdict before it, which comes only when the batch is published, so it counts down. */
    d->skip->st[(uint64_t)t->slot * d->ring->batch + t->index] =
        (uint8_t)(SK_PENDING | SK_LATE | SK_FAILED | flags);
    return 1;
}

/* pl_policy.late_locked. A sample that failed on its decode thread in such a batch becomes
 * its hole now, whatever the code. A position that waits for no verdict (a blank, a refill's
 * replacement, or one given before the slot was refilled) is left as it is. */
static int skip_late_locked(pl_dispatch *d, uint32_t si, uint32_t index, int reason, int code,
                            const char *msg)
{
    PL_ASSERT_LOCKED(d->core);
    uint8_t *st = &d->skip->st[(uint64_t)si * d->ring->batch + index];
    if ((*st & SK_MASK) != SK_PENDING || !(*st & SK_LATE))
        return 0;
    uint8_t flags = *st & (SK_REP | SK_PAD);
    if (*st & SK_FAILED) { /* failed on its decode thread, counted then */
        *st = (uint8_t)(SK_HOLE | flags);
        pthread_cond_broadcast(&d->core->cv_io);
        return 1;
    }
    if (code) {
        skip_hole_locked(d, si, index, flags, reason, code, msg);
        return 1;
    }
    *st = (uint8_t)(SK_GOOD | flags);
    walk_may_move_locked(d, st);
    return 0;
}

void pl_skip_init(pl_skip *sk, uint64_t max_run, int late)
{
    sk->max_run = max_run;
    sk->late = late;
}

void pl_skip_restart(pl_skip *sk) { sk->q_head = sk->q_tail = 0; }

void pl_skip_free(pl_skip *sk)
{
    free(sk->st);
    free(sk->q);
    free(sk->errs);
}

static int skip_setup(pl_dispatch *d, rf_err *err)
{
    pl_skip *sk = d->skip;
    uint64_t n = (uint64_t)d->ring->depth * d->ring->batch; /* one entry per slot position */
    if (n + 2 > UINT32_MAX)
        return rf_seterr(err, RF_ENOMEM, "skip mode: prefetch_depth %u x batch %u slot positions "
                         "exceed %u", d->ring->depth, d->ring->batch, UINT32_MAX - 2);
    sk->q_cap = (uint32_t)n + 2;
    size_t errs = (size_t)n * sizeof *sk->errs;
    size_t bytes = (size_t)n + (size_t)sk->q_cap * sizeof *sk->q + errs;
    if (!pl_alloc_refused(d->core, "skip bookkeeping", bytes)) {
        sk->st = calloc(n, 1);
        sk->q = calloc(sk->q_cap, sizeof *sk->q);
        sk->errs = calloc(n, sizeof *sk->errs);
    }
    if (!sk->st || !sk->q || !sk->errs)
        return rf_seterr(err, RF_ENOMEM, "cannot allocate %zu bytes of skip bookkeeping "
                         "(prefetch_depth %u x batch %u positions): out of memory", bytes,
                         d->ring->depth, d->ring->batch);
    return 0;
}

/* The forward cursor passed the epoch's last batch: skip_dispatch_locked plans the next epoch
 * once every output of this one is final (replacements need this epoch's plan). */
static void skip_epoch_end_locked(pl_dispatch *d) { d->skip->epoch_wait = 1; }

/* Slot si opens for a new batch: its positions have no outcome yet. */
static void skip_slot_open_locked(pl_dispatch *d, uint32_t si)
{
    memset(d->skip->st + (uint64_t)si * d->ring->batch, 0, d->ring->batch);
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
