/* gpu_verdict.c — the GPU decode stage's verdicts (gpu_decode.h): the check of a batch with
 * late verdicts before it is handed out.
 * pl_gpu_check runs on the stage's thread without mu, on a CHECKING slot no other thread
 * touches; in skip mode it takes mu for the verdicts and for compact_refill, which moves bytes
 * while no thread may place in the slot (it turns FILLING only under the same lock). */
#include <stdlib.h>
#include <string.h>

#include "pipeline/gpu_decode.h"

/* A status no kernel writes: the CPU decode of the sample's file failed, with the error in
 * gpu.redo_err[i] (engine_redo). */
#define PL_GJ_CPU_VERDICT 0x7F

/* A hole's flag between its verdict and compact_refill (no flag the kernels know). */
#define PL_GJ_HOLE 0xFF

/* The error sample i's verdict st (non-zero) stands for, named by file, member and offset as
 * the CPU path names its errors; data_hdr is the located header: the sample decoded, so its
 * span re-validated. */
static int verdict_error(const pl_gpu *g, const slot *s, uint32_t i, int st, rf_err *e)
{
    const rf_sample *sm = &g->ds->samples[s->ids[i]];
    const char *path = g->ds->files[sm->file].path;
    char m[RF_ERRMSG_MAX];
    pl_describe_member(g->ds, sm, sm->data_hdr, m, sizeof m);
    if (st == PL_GJ_CPU_VERDICT)
        return rf_seterr(e, g->redo_err[i].code, "%s: %s: %s", path, m, g->redo_err[i].msg);
    if ((st & 0xFF) == RF_GJ_ENGINE) /* nvJPEG's own status is above the low byte */
        return rf_seterr(e, RF_EDECODE, "%s: %s: %s (nvJPEG status %d)", path, m,
                         rf_gj_status_text(RF_GJ_ENGINE), (st >> 8) & 0xFFFF);
    return rf_seterr(e, RF_EDECODE, "%s: %s: %s (GPU decode)", path, m, rf_gj_status_text(st));
}

/* A placed sample's bytes are gone from the batch (a hole): its packet's GPU-decode count
 * goes with it, so rf_stats counts the GPU-decoded samples that were delivered. */
static void uncount_hole(pl_gpu *g, slot *s, uint32_t i)
{
    uint8_t f = s->gpu.flags[i];
    if (f == RF_GJ_PIXELS || s->gpu.offs[i] == PL_GJ_UNPLACED)
        return;
    pl_gpu_count(g, f == RF_GJ_ENGINE_PACKET, s->stage + s->gpu.offs[i], -1);
}

/* qsort_r: sample indices by their offsets in the stage (offs). */
static int by_offset(const void *a, const void *b, void *offs)
{
    uint64_t x = ((const uint64_t *)offs)[*(const uint64_t *)a];
    uint64_t y = ((const uint64_t *)offs)[*(const uint64_t *)b];
    return (x > y) - (x < y);
}

/* Device layout, before a refill (mu held, the batch's copy and kernels done): the holes'
 * bytes leave the packed stage. The kept samples move down in offset order (their packets are
 * position-independent; their scratch is handed out again in that order), and top and room are
 * set so every hole has room for its replacement's pixels: in skip mode each placed sample
 * spent at least px of the slot's batch x stride bytes and an unplaced one holds px, so the
 * kept bytes plus holes x px fit. A memmove of at most the batch's stage, on a rare batch. */
static void compact_refill(pl_gpu *g, slot *s, uint32_t holes)
{
    uint32_t n = 0, count = s->batch.count;
    uint64_t top = atomic_load_explicit(&s->gpu.top, memory_order_relaxed), *o = s->gpu.order;
    for (uint32_t i = 0; i < count; i++)
        if (s->gpu.offs[i] != PL_GJ_UNPLACED)
            o[n++] = i;
    qsort_r(o, n, sizeof *o, by_offset, s->gpu.offs);
    uint64_t at = 0, scratch = 0;
    uint32_t engine = 0;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t i = (uint32_t)o[k];
        /* a sample's bytes run to the next placed sample's: top only grows by placements */
        uint64_t off = s->gpu.offs[i], end = k + 1 < n ? s->gpu.offs[o[k + 1]] : top;
        if (s->gpu.flags[i] == PL_GJ_HOLE) {
            s->gpu.offs[i] = PL_GJ_UNPLACED;
            continue;
        }
        memmove(s->stage + at, s->stage + off, end - off);
        s->gpu.offs[i] = at;
        if (s->gpu.flags[i] != RF_GJ_PIXELS) {
            rf_gj_packet *p = (rf_gj_packet *)(s->stage + at);
            p->scratch_at = (uint32_t)scratch;
            scratch += (p->scratch + RF_GJ_ALIGN - 1) / RF_GJ_ALIGN;
            engine += s->gpu.flags[i] == RF_GJ_ENGINE_PACKET;
        }
        at += end - off;
    }
    int64_t room = (int64_t)(g->ring->batch * g->ring->stride - at) -
                   (int64_t)holes * (int64_t)g->px;
    assert(room >= 0);
    /* relaxed: mu orders these before the replacements' placements, as at open */
    atomic_store_explicit(&s->gpu.top, at, memory_order_relaxed);
    atomic_store_explicit(&s->gpu.room, room, memory_order_relaxed);
    atomic_store_explicit(&s->gpu.scratch, scratch, memory_order_relaxed);
    atomic_store_explicit(&s->gpu.engine, engine, memory_order_relaxed);
    for (uint32_t i = 0; i < count; i++)
        if (s->gpu.flags[i] == PL_GJ_HOLE)
            s->gpu.flags[i] = RF_GJ_PIXELS;
}

/* The batch is handed out: what libjpeg recovered from in its packets' files (in their
 * headers, which the decode thread read and recorded in the packet), counted once a sample.
 * Samples decoded on the CPU were counted by their decode threads. */
static void count_batch_recovered(pl_gpu *g, const slot *s)
{
    for (uint32_t i = 0; i < s->batch.count && g->device; i++) {
        if (s->gpu.flags[i] == RF_GJ_PIXELS || s->gpu.offs[i] == PL_GJ_UNPLACED)
            continue;
        pl_count_recovered(g->counters,
                           ((const rf_gj_packet *)(s->stage + s->gpu.offs[i]))->recovered);
    }
}

/* Skip mode: every verdict of the batch goes to the skip policy (mu held), a bad one as a
 * corrupt sample. Holes leave the slot FILLING again with one pending sample each; their
 * replacements are decoded on the CPU, the last one submits the slot, and it is checked again.
 * On the device layout the holes' bytes leave the stage first (compact_refill) and the whole
 * batch is submitted again: the kept packets decode to the same pixels. Returns the number of
 * holes, or the loader's sticky error (in e) when another thread failed it meanwhile. */
static int verdicts_skip(pl_gpu *g, slot *s, rf_err *e)
{
    pl_core *k = g->core;
    uint32_t holes = 0, si = (uint32_t)(s - g->ring->slots);
    pl_lock(k);
    for (uint32_t i = 0; i < s->batch.count && !k->err.code; i++) {
        rf_err v = {0};
        if (RF_GJ_FAILURE(s->gpu.status[i]))
            verdict_error(g, s, i, s->gpu.status[i], &v);
        int h = g->policy->late_locked(g->disp, si, i, RF_SKIP_CORRUPT, v.code, v.msg);
        holes += (uint32_t)h;
        if (h && g->device) {
            uncount_hole(g, s, i);
            s->gpu.flags[i] = PL_GJ_HOLE;
        }
    }
    if (!holes) /* handed out as it is */
        count_batch_recovered(g, s);
    for (uint32_t i = 0; i < s->batch.count; i++)
        s->gpu.status[i] = 0; /* given: a refill's check reads only its replacements' */
    int rc = k->err.code ? rf_seterr(e, k->err.code, "%s", k->err.msg) : (int)holes;
    if (holes && !k->err.code) {
        assert(s->state == SLOT_CHECKING); /* CHECKING -> FILLING */
        if (g->device)
            compact_refill(g, s, holes);
        s->state = SLOT_FILLING;
        s->gpu.refill = 1;
        /* relaxed: mu orders it before the replacements' tasks are handed out, as at open */
        atomic_store_explicit(&s->pending, holes, memory_order_relaxed);
    }
    pl_unlock(k);
    return rc;
}

/* The host emulation of the device (test hook gpu_device_layout): what cuda_submit's kernels
 * do with the packed stage, by the kernels' host code: each sample's packet decoded, or its
 * CPU-decoded pixels copied, into its row of the slot's decoded batch, and each packet's
 * status where the device writes it. */
static void emulate_kernels(const pl_gpu *g, slot *s)
{
    uint64_t bytes = g->ring->stage_bytes;
    for (uint32_t i = 0; i < s->batch.count; i++) {
        uint8_t *out = s->gpu.emu + (uint64_t)i * bytes;
        const uint8_t *at = s->stage + s->gpu.offs[i]; /* all placed: pl_gpu_batch_desc */
        s->gpu.status[i] = 0;
        if (s->gpu.flags[i] == RF_GJ_PIXELS)
            memcpy(out, at, bytes);
        else
            s->gpu.status[i] = rf_gj_decode_host(at, s->gpu.emu_scratch, out, NULL);
    }
}

/* A bad Huffman code decides nothing by itself: libjpeg-turbo's fast path reads some such
 * codes as zeros without a warning, and the CPU path's verdict is libjpeg's. So a file in which
 * the check of an engine packet (rf_gj_engine_check) found one is decoded on the CPU, here,
 * from the copy of the file the packet carries: its error is the sample's verdict (status
 * PL_GJ_CPU_VERDICT, the error in gpu.redo_err[i]), or its pixels replace the engine's in the
 * device batch. Rare: damaged files only. Returns 0, or a fatal error (memory, the device). */
static int engine_redo(pl_gpu *g, slot *s, uint32_t i, rf_err *e)
{
    const pl_ring *r = g->ring;
    if (!g->redo)
        g->redo = rf_decode_setup_decoder(g->decode);
    if (!g->redo_px)
        g->redo_px = malloc(r->stage_bytes);
    if (!g->redo_err)
        g->redo_err = calloc(r->batch, sizeof *g->redo_err);
    if (!g->redo || !g->redo_px || !g->redo_err)
        return rf_seterr(e, RF_ENOMEM, "no memory to decode a sample on the CPU again");
    const uint8_t *pkt = s->stage + s->gpu.offs[i];
    const rf_gj_packet *p = (const rf_gj_packet *)pkt;
    rf_err *v = &g->redo_err[i];
    *v = (rf_err){0};
    uint64_t seed = rf_plan_aug_seed(g->plan, s->batch.epoch, s->ids[i], s->positions[i]);
    /* (it stays counted in hw_decoded: a batch refilled later decodes it again, here too) */
    const rf_transform tf =
        rf_decode_setup_transform(g->decode, s->batch.bucket_height, s->batch.bucket_width);
    if (rf_decode_sample(g->redo, pkt + p->off_data, p->data_bytes, &tf, &g->decode->views,
                         seed, g->redo_px, NULL, v) != 0) {
        s->gpu.status[i] = PL_GJ_CPU_VERDICT;
        return 0;
    }
    s->gpu.status[i] = 0;
    ((rf_gj_packet *)pkt)->recovered = rf_decoder_recovered(g->redo); /* the CPU's account */
    const pl_backend *be = g->backend;
    return be->ops->patch(be->b, &s->dev, i, g->redo_px, r->stage_bytes, &r->conv, r->out_bytes,
                          e);
}

void pl_gpu_free(pl_gpu *g)
{
    pl_sync_destroy(g->sync);
    rf_decoder_destroy(g->redo);
    free(g->redo_px);
    free(g->redo_err);
}

/* A batch the CPU decoded whole (most of them while a training step keeps the scheduler's GPU
 * share low) has no verdict: it is handed out as soon as its copy and conversion are enqueued
 * (the consumer's stream waits for them on the device, rf_batch_wait). In skip mode the check
 * also refills samples that failed on the CPU. */
int pl_gpu_needs_check(const pl_gpu *g, const slot *s)
{
    return g->late && !(g->device && !g->emulate && !g->skip && !s->gpu.packets);
}

/* The stage's thread waits, not a decode thread: none ever sits idle on the GPU, and the
 * kernels normally ran while the consumer took the batches before this one. */
int pl_gpu_check(pl_gpu *g, slot *s, rf_err *e)
{
    const pl_backend *be = g->backend;
    char why[RF_ERRMSG_MAX / 2] = "";
    if (be->ops->sync(s->dev.event, why, sizeof why))
        return rf_seterr(e, RF_ECUDA, "waiting for the GPU decode of batch %llu failed: %s",
                         (unsigned long long)s->seq, why);
    if (g->emulate)
        emulate_kernels(g, s);
    for (uint32_t i = 0; i < s->batch.count && be->ops->patch; i++) {
        int rc = s->gpu.flags[i] == RF_GJ_ENGINE_PACKET &&
                         RF_GJ_FAILURE(s->gpu.status[i]) == RF_GJ_BAD_CODE
                     ? engine_redo(g, s, i, e)
                     : 0;
        if (rc)
            return rc;
    }
    if (g->skip) {
        int rc = verdicts_skip(g, s, e);
        return rc > 0 ? PL_GPU_REFILL : rc;
    }
    for (uint32_t i = 0; i < s->batch.count; i++)
        if (RF_GJ_FAILURE(s->gpu.status[i]))
            return verdict_error(g, s, i, s->gpu.status[i], e);
    count_batch_recovered(g, s);
    return 0;
}
