/* warm.c — the page cache around the reads (warm.h), on the I/O threads inside take():
 * pl_warm_plan_locked moves the cursor and collects hints under mu; pl_after_take issues the
 * residency checks and hints after mu is released, so storage latency overlaps the decode. */
#include "pipeline/warm.h"

#include "pipeline/state.h"

void pl_warm_init(pl_warm *w, int warm, uint64_t bytes, const rf_plan *plan,
                  const rf_dataset *ds, rf_pagecache *pc, int tokens, int sequential,
                  uint64_t window_bytes, char *why, size_t why_cap)
{
    *w = (pl_warm){.on = warm && !rf_pc_odirect(pc), .bytes = bytes, .plan = plan, .ds = ds,
                   .pc = pc, .tokens = tokens, .sequential = sequential,
                   .window_bytes = window_bytes};
    if (warm && !w->on)
        pl_why_append(why, why_cap, "warm: off under O_DIRECT (reads bypass the cache)");
}

void pl_warm_restart(pl_warm *w) { w->epoch = UINT64_MAX; }

/* The hints are issued by the caller after unlocking. The cursor stays within the epoch the
 * dispatcher is in (the next epoch's order is not planned yet). */
int pl_warm_plan_locked(pl_warm *w, uint64_t epoch, uint64_t pos, int done, warm_hint *h)
{
    if (!w->on || done)
        return 0;
    if (w->epoch != epoch) {
        w->epoch = epoch;
        w->pos = w->ahead = 0;
    }
    w->pos = RF_MAX(w->pos, pos);
    int nh = 0;
    while (w->ahead < w->bytes && w->pos < w->plan->per_rank) {
        uint64_t id, at, off, len = w->window_bytes;
        uint32_t file;
        uint8_t pad;
        rf_plan_sample(w->plan, w->pos, &id, &at, &pad);
        if (w->tokens) {
            pl_token_window(w->ds, w->plan, w->sequential, id, epoch, &file, &off);
        } else {
            file = w->ds->samples[id].file;
            off = w->ds->samples[id].offset;
            len = w->ds->samples[id].length;
        }
        if (nh > 0 && h[nh - 1].file == file && h[nh - 1].off + h[nh - 1].len == off)
            h[nh - 1].len += len;
        else if (nh == WARM_HINTS_MAX)
            break;
        else
            h[nh++] = (warm_hint){file, off, len};
        w->pos++;
        w->ahead += len;
    }
    return nh;
}

void pl_warm_taken_locked(pl_warm *w, uint64_t epoch, uint64_t pos, uint64_t len)
{
    if (w->on && w->epoch == epoch && pos < w->pos)
        w->ahead -= RF_MIN(w->ahead, len);
}

/* The sample's own bytes are checked, not O_DIRECT padding. */
void pl_after_take(pl_warm *w, rf_io_req **reqs, int n, const warm_hint *h, int nh)
{
    for (int i = 0; i < n; i++) {
        const task *t = reqs[i]->user;
        uint64_t len = reqs[i]->need ? reqs[i]->need - t->skip : reqs[i]->len;
        rf_pc_check(w->pc, t->file, reqs[i]->fd, reqs[i]->offset + t->skip, len);
    }
    for (int i = 0; i < nh; i++)
        rf_pc_warm(w->pc, h[i].file, h[i].off, h[i].len);
}
