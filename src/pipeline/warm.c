/* warm.c — the page cache around the reads (see src/io/pagecache.c): the residency of each
 * new read is checked before the engine submits it, and the spans the dispatcher reaches next
 * are hinted into the cache (warm_bytes ahead) so storage latency overlaps the decode.
 *
 * DESIGN
 * Runs on the I/O threads inside take(): pl_warm_plan_locked with mu held moves the warm
 * cursor (warm_epoch, warm_pos, warm_ahead) and collects the hints; pl_after_take issues the
 * checks and hints after mu is released. Reads only the plan and the dataset otherwise. */
#include "pipeline/pipeline.h"

/* Advance the warm cursor over the dispatcher's epoch while fewer than warm_bytes are hinted
 * ahead of the dispatcher; the hints are issued by the caller after unlocking. The cursor
 * stays within the epoch the dispatcher is in (the next epoch's order is not planned yet). */
int pl_warm_plan_locked(rf_loader *ld, warm_hint *h)
{
    PL_ASSERT_LOCKED(ld);
    if (!ld->warm_on || ld->d_done)
        return 0;
    if (ld->warm_epoch != ld->d_epoch) {
        ld->warm_epoch = ld->d_epoch;
        ld->warm_pos = ld->warm_ahead = 0;
    }
    ld->warm_pos = RF_MAX(ld->warm_pos, ld->d_k * ld->batch + ld->d_j);
    int nh = 0;
    while (ld->warm_ahead < ld->cfg.warm_bytes && ld->warm_pos < ld->plan.per_rank) {
        uint64_t id, pos, off, len = ld->stage_bytes;
        uint32_t file;
        uint8_t pad;
        rf_plan_sample(&ld->plan, ld->warm_pos, &id, &pos, &pad);
        if (ld->tokens) {
            pl_token_window(ld, id, ld->d_epoch, &file, &off);
        } else {
            file = ld->ds.samples[id].file;
            off = ld->ds.samples[id].offset;
            len = ld->ds.samples[id].length;
        }
        if (nh > 0 && h[nh - 1].file == file && h[nh - 1].off + h[nh - 1].len == off)
            h[nh - 1].len += len;
        else if (nh == WARM_HINTS_MAX)
            break;
        else
            h[nh++] = (warm_hint){file, off, len};
        ld->warm_pos++;
        ld->warm_ahead += len;
    }
    return nh;
}

/* Outside the lock, before the engine submits: residency of each new read (the sample's own
 * bytes, not O_DIRECT padding), then the warm hints. */
void pl_after_take(rf_loader *ld, rf_io_req **reqs, int n, const warm_hint *h, int nh)
{
    for (int i = 0; i < n; i++) {
        const task *t = reqs[i]->user;
        uint64_t len = reqs[i]->need ? reqs[i]->need - t->skip : reqs[i]->len;
        rf_pc_check(ld->pc, t->file, reqs[i]->fd, reqs[i]->offset + t->skip, len);
    }
    for (int i = 0; i < nh; i++)
        rf_pc_warm(ld->pc, h[i].file, h[i].off, h[i].len);
}
