/* gpu_place.c — the GPU decode stage's placement (gpu_decode.h): create's choice, the ring's
 * sizes, a slot's reset, one sample's packet or pixels, and the batch's part of the submit.
 * Sizing runs at create, the reset under mu; pl_gpu_decode runs on the decode threads without
 * mu: placement is lock-free (gpu_slot.h's atomics; each sample writes only its own offs and
 * flags entries). */
#include <stdlib.h>
#include <string.h>

#include "pipeline/gpu_decode.h"

void pl_gpu_init(pl_gpu *g, const rf_config *c, pl_core *core, pl_ring *ring,
                 const pl_backend *be, const rf_dataset *ds, const rf_plan *plan,
                 const rf_decode_setup *decode, pl_counters *counters, const pl_policy *policy,
                 struct pl_dispatch *disp)
{
    g->core = core, g->ring = ring, g->backend = be, g->ds = ds, g->plan = plan;
    g->decode = decode, g->counters = counters, g->policy = policy, g->disp = disp;
    g->gpu_decode = c->gpu_decode, g->gpu_percent = c->gpu_decode_percent;
    g->hw_percent = c->hw_decode_percent, g->dtype = c->dtype;
    g->naive = (int)c->naive, g->skip = c->on_error == RF_ON_ERROR_SKIP;
}

/* The configurations that cannot take GPU decode are refused here, at create. */
int pl_gpu_choose(pl_gpu *g, rf_err *err)
{
    const rf_test_hooks *h = &g->core->hooks;
    uint32_t batch = g->ring->batch;
    g->on = g->gpu_decode || g->hw_percent || g->sched.mode == RF_SCHEDULE_BALANCE;
    int cuda = g->backend->ops->device_kind == RF_DEVICE_CUDA;
    g->emulate = g->on && !cuda && h->gpu_device_layout;
    g->device = g->on && (cuda || g->emulate);
    g->late = g->device || (g->on && h->gpu_late_verdicts);
    const char *what = g->gpu_decode   ? "gpu_decode"
                       : g->hw_percent ? "hw_decode_percent"
                                       : "decode_schedule BALANCE";
    if (g->device && batch > RF_GJ_MAX_BATCH)
        return rf_seterr(err, RF_EINVAL, "%s takes batches of at most %u samples (the kernels "
                         "run a CUDA grid row per sample), not %u", what, RF_GJ_MAX_BATCH, batch);
    if (g->device && g->naive)
        return rf_seterr(err, RF_EINVAL, "%s needs the pipelined CUDA backend, not the naive "
                         "baseline", what);
    /* The emulation decodes kernel packets and copies pixels; engine packets and the
     * conversion kernels have no host twin in it. */
    if (g->emulate && (g->hw_percent || g->sched.mode == RF_SCHEDULE_BALANCE ||
                       g->dtype != RF_DTYPE_UINT8))
        return rf_seterr(err, RF_EINVAL, "the test hook gpu_device_layout emulates gpu_decode "
                         "(no engines, no scheduler) with uint8 output only");
    return 0;
}

/* GPU decode on the device: a slot holds batch x max(decoded sample, RF_GJ_AREA) bytes that
 * its packets and CPU-decoded samples share (gj_place_device). Host GPU decode builds packets
 * in a per-thread buffer and writes pixels into the slot. */
uint64_t pl_gpu_stride(pl_gpu *g)
{
    uint64_t stage = g->ring->stage_bytes;
    g->cap = RF_MAX(stage, (uint64_t)RF_GJ_AREA);
    g->px = (stage + RF_GJ_ALIGN - 1) / RF_GJ_ALIGN * RF_GJ_ALIGN;
    return g->device ? RF_MAX(g->px, (uint64_t)RF_GJ_AREA) : stage;
}

/* GPU decode on the device: status, offsets, flags and the compaction's order per sample
 * after the slot's labels; with the host emulation also its decoded batch and scratch. */
size_t pl_gpu_ring_bytes(const pl_gpu *g)
{
    size_t B = g->ring->batch;
    if (!g->device) /* host with late verdicts: the status array alone */
        return g->late ? B * sizeof(int32_t) : 0;
    size_t n = B * (sizeof(int32_t) + sizeof(uint64_t) + 1);
    n = (n + 7) / 8 * 8 + B * sizeof(uint64_t);
    if (g->emulate)
        n = (n + RF_GJ_ALIGN - 1) / RF_GJ_ALIGN * RF_GJ_ALIGN + B * g->ring->stage_bytes +
            RF_GJ_SCRATCH;
    return n;
}

/* The device pool's temporaries per copy stream: RF_GJ_SCRATCH_RESERVE of scratch a sample
 * is reserved, and a batch of larger crops grows the pool once (device_allocs_after_create). */
size_t pl_gpu_temp_bytes(const pl_gpu *g, size_t staged, int convert)
{
    size_t B = g->ring->batch;
    return staged + (convert ? B * g->ring->stage_bytes : 0) +
           B * (RF_GJ_SCRATCH_RESERVE + sizeof(int32_t) + sizeof(uint64_t) + 1);
}

/* Each slot's arrays in the pinned ring, right after its labels (pl_gpu_ring_bytes). */
void pl_gpu_slots_init(pl_gpu *g)
{
    size_t B = g->ring->batch;
    for (uint32_t i = 0; i < g->ring->depth && (g->late || g->device); i++) {
        slot *s = &g->ring->slots[i];
        s->gpu.status = s->labels + B; /* labels are page-aligned: the offsets 8-byte aligned */
        if (!g->device)
            continue;
        s->gpu.offs = (uint64_t *)(s->labels + 2 * B);
        s->gpu.flags = (uint8_t *)(s->gpu.offs + B);
        uintptr_t o = ((uintptr_t)(s->gpu.flags + B) + 7) / 8 * 8;
        s->gpu.order = (uint64_t *)o;
        o = ((uintptr_t)(s->gpu.order + B) + RF_GJ_ALIGN - 1) / RF_GJ_ALIGN * RF_GJ_ALIGN;
        if (g->emulate)
            s->gpu.emu = (uint8_t *)o, s->gpu.emu_scratch = s->gpu.emu + B * g->ring->stage_bytes;
    }
}

/* Slot s opens for the dispatcher's batch of `count` samples: nothing placed, and room held
 * for every sample's pixels. */
void pl_gpu_slot_reset_locked(pl_gpu *g, slot *s, uint32_t count)
{
    PL_ASSERT_LOCKED(g->core);
    s->gpu.refill = 0;
    if (!g->device)
        return;
    /* relaxed: mu orders the reset before any placement in the slot (pl_gpu_slot.room) */
    atomic_store_explicit(&s->gpu.top, 0, memory_order_relaxed);
    atomic_store_explicit(&s->gpu.scratch, 0, memory_order_relaxed);
    atomic_store_explicit(&s->gpu.engine, 0, memory_order_relaxed);
    atomic_store_explicit(&s->gpu.room,
                          (int64_t)(g->ring->batch * g->ring->stride - count * g->px),
                          memory_order_relaxed);
    for (uint32_t i = 0; i < g->ring->batch; i++) /* a sample that fails early places nothing */
        s->gpu.offs[i] = PL_GJ_UNPLACED, s->gpu.flags[i] = RF_GJ_PIXELS;
}

/* The most rows a sample's canvas has: the output's, or with views the tallest view's. */
static uint32_t canvas_rows(const rf_decode_setup *d)
{
    uint32_t rows = d->views.n ? 0 : d->tf.height;
    for (uint32_t k = 0; k < d->views.n; k++)
        rows = RF_MAX(rows, d->views.height[k]);
    return rows;
}

/* By the thread that counted the slot's last sample down. Only the stage bytes the batch's
 * packets and pixels took are copied. */
size_t pl_gpu_batch_desc(pl_gpu *g, slot *s, rf_gj_batch *gj)
{
    /* Skip mode: a sample that failed before placing anything is a hole the batch's check
     * refills; the kernels still read pixels at its offset, so it gets its held bytes, zero. */
    uint32_t packets = 0;
    for (uint32_t i = 0; i < s->batch.count; i++) {
        if (s->gpu.offs[i] == PL_GJ_UNPLACED)
            memset(pl_gpu_pixels(g, s, i), 0, g->ring->stage_bytes);
        packets += s->gpu.flags[i] != RF_GJ_PIXELS;
    }
    s->gpu.packets = packets;
    /* The totals are read relaxed: the acquire of pending's last decrement, which called
     * pl_slot_finish, comes after every sample's claims, so these loads see the final values. */
    gj->offs = s->gpu.offs, gj->flags = s->gpu.flags, gj->status = s->gpu.status;
    gj->sample_bytes = g->ring->stage_bytes, gj->rows = canvas_rows(g->decode);
    gj->scratch = atomic_load_explicit(&s->gpu.scratch, memory_order_relaxed) * RF_GJ_ALIGN;
    gj->engine = atomic_load_explicit(&s->gpu.engine, memory_order_relaxed);
    gj->packets = packets;
    return (size_t)atomic_load_explicit(&s->gpu.top, memory_order_relaxed);
}

/* On the device a sample's flag says pixels (what a sample that fails or is decoded on the
 * CPU leaves) until a packet is placed for it. */
void pl_gpu_sample_start(const pl_gpu *g, slot *s, uint32_t index)
{
    if (g->device)
        s->gpu.flags[index] = 0;
    else if (g->late) /* no verdict until its packet is decoded */
        s->gpu.status[index] = 0;
}

/* Where rf_decode_packet writes one sample (rf_gj_place). */
typedef struct gj_place_ctx {
    pl_gpu *g;
    slot *s;
    uint32_t index;
    uint8_t *img; /* host backend: the sample's pixels */
    pl_gpu_host *gh;
} gj_place_ctx;

/* Device: the next free bytes of the slot's stage. A packet takes them only while every sample
 * not yet placed keeps room for its pixels, so a decoded sample always fits; a packet that
 * does not is decoded on the CPU to the same bytes (rf_decode_packet). Lock-free: one CAS on
 * the room, one add on the top. */
static uint8_t *gj_place_device(void *ctx, size_t bytes, int packet)
{
    gj_place_ctx *c = ctx;
    uint64_t n = (bytes + RF_GJ_ALIGN - 1) / RF_GJ_ALIGN * RF_GJ_ALIGN, px = c->g->px;
    if (packet) {
        /* Skip mode: a packet spends at least its sample's pixels, never gives room back, so
         * that a refill always finds room for its holes' pixels (compact_refill). */
        int64_t need = (int64_t)(c->g->skip ? RF_MAX(n, px) : n) - (int64_t)px;
        /* Relaxed: the room is a budget and carries no data; the CAS alone keeps two claims
         * from spending the same bytes (see pl_gpu_slot.room). */
        int64_t room = atomic_load_explicit(&c->s->gpu.room, memory_order_relaxed);
        do
            if (room < need)
                return NULL;
        while (!atomic_compare_exchange_weak_explicit(&c->s->gpu.room, &room, room - need,
                                                      memory_order_relaxed,
                                                      memory_order_relaxed));
    } else if (c->s->gpu.refill && c->s->gpu.offs[c->index] != PL_GJ_UNPLACED) {
        /* a refill's next candidate for a hole whose replacement failed: the same bytes */
        return c->s->stage + c->s->gpu.offs[c->index];
    } else {
        n = px; /* held for it since the slot opened (or the refill's compaction) */
    }
    /* Relaxed: the add's atomicity gives each sample its own bytes; they are published by
     * pending's acq_rel countdown. */
    uint64_t off = atomic_fetch_add_explicit(&c->s->gpu.top, n, memory_order_relaxed);
    c->s->gpu.offs[c->index] = off;
    return c->s->stage + off;
}

/* Host: pixels go straight to the sample's row; a packet to the thread's own buffer. */
static uint8_t *gj_place_host(void *ctx, size_t bytes, int packet)
{
    gj_place_ctx *c = ctx;
    if (!packet)
        return c->img;
    if (bytes > c->gh->cap) { /* grows a few times, to the largest packet of the data */
        uint8_t *p = realloc(c->gh->packet, bytes);
        if (!p)
            return NULL; /* decoded on the CPU instead: the same bytes */
        c->gh->packet = p, c->gh->cap = bytes;
    }
    return c->gh->packet;
}

uint8_t *pl_gpu_pixels(pl_gpu *g, slot *s, uint32_t index)
{
    if (!g->device)
        return s->stage + (uint64_t)index * g->ring->stride;
    gj_place_ctx c = {g, s, index, NULL, NULL};
    s->gpu.flags[index] = RF_GJ_PIXELS;
    return gj_place_device(&c, g->ring->stage_bytes, 0);
}

uint8_t *pl_gpu_emulated(const slot *s) { return s->gpu.emu; }

/* The counts are of delivered samples: uncount_hole (gpu_verdict.c) takes a hole's back. */
void pl_gpu_count(pl_gpu *g, int engine, const uint8_t *packet, int sign)
{
    /* statistics only: relaxed; -1 is added as 2^64 - 1, which unsigned atomics wrap to a
     * decrement */
    uint64_t d = (uint64_t)(int64_t)sign;
    pl_count(engine ? &g->hw_decoded : &g->decoded, d);
    if (((const rf_gj_packet *)packet)->plain)
        pl_count(&g->plain_decoded, d);
}

/* A packet for the device, or on the host backend the packet decoded right away by the same
 * code (an engine packet's planes by libjpeg); images the kernels or the engine do not take
 * come back decoded by the CPU path. */
int pl_gpu_decode(pl_gpu *g, rf_decoder *dec, const task *t, slot *s, const rf_transform *tf,
                  const uint8_t *jpeg, uint32_t len, uint8_t *img, rf_decode_info *info,
                  pl_gpu_host *gh, rf_err *e)
{
    const rf_views *v = &g->decode->views;
    uint32_t bytes = 0, bad = 0;
    gj_place_ctx c = {g, s, t->index, img, gh};
    int route = pl_sched_route(g, t->aug_seed), engine = route == PL_ROUTE_ENGINE;
    /* PNG and WebP have no GPU decode: they take the CPU path into the same batch, as a JPEG
     * routed to the CPU does. */
    if (rf_image_sniff(jpeg, len) != RF_IMAGE_JPEG || route == PL_ROUTE_CPU) {
        uint8_t *px = g->device ? gj_place_device(&c, g->ring->stage_bytes, 0) : img;
        return rf_decode_sample(dec, jpeg, len, tf, v, t->aug_seed, px, info, e);
    }
    /* A plain JPEG the kernels take starts from its sync-point index entry when it has one
     * (the member's offset: its tar sample's span starts at the sample's offset). */
    rf_sync_entry buf;
    const rf_sync_entry *sync = NULL;
    uint64_t id = s->ids[t->index];
    if (g->sync && !engine) {
        const rf_sample *sm = &g->ds->samples[id];
        uint64_t off = sm->offset + (uint64_t)(jpeg - (t->req.dst + t->skip));
        sync = pl_sync_get(g->sync, dec, sm->file, id, off, jpeg, len, &buf);
        rf_decoder_set_sync(dec, sync);
    }
    int rc = rf_decode_packet(dec, jpeg, len, tf, v, t->aug_seed, engine,
                              g->device ? gj_place_device : gj_place_host, &c, &bytes, info, e);
    if (sync)
        pl_sync_count(g->sync, id, rf_decoder_sync_result(dec));
    if (rc || !bytes)
        return rc;
    if (g->device) { /* the packet's share of the batch's device scratch */
        rf_gj_packet *p = (rf_gj_packet *)(s->stage + s->gpu.offs[t->index]);
        pl_gpu_count(g, engine, (const uint8_t *)p, 1); /* a hole takes it back */
        p->recovered = rf_decoder_recovered(dec); /* counted with the batch: pl_gpu_check */
        /* Relaxed claims, like gpu.top's: the totals are read after pending's acquire. */
        p->scratch_at = (uint32_t)atomic_fetch_add_explicit(
            &s->gpu.scratch, (p->scratch + RF_GJ_ALIGN - 1) / RF_GJ_ALIGN, memory_order_relaxed);
        s->gpu.flags[t->index] = engine ? RF_GJ_ENGINE_PACKET : RF_GJ_KERNELS;
        if (engine)
            atomic_fetch_add_explicit(&s->gpu.engine, 1, memory_order_relaxed);
        return 0;
    }
    uint32_t recovered = rf_decoder_recovered(dec); /* the header's, before the stand-in's */
    if (engine && (rc = rf_decode_planes(dec, gh->packet, gh->scratch, e)) != 0)
        return rc;
    rf_decoder_set_recovered(dec, recovered);
    int st = rf_gj_decode_host(gh->packet, gh->scratch, img, &bad), fail = RF_GJ_FAILURE(st);
    if (engine && fail == RF_GJ_BAD_CODE) /* the CPU decides (engine_redo): at once here */
        return rf_decode_sample(dec, jpeg, len, tf, v, t->aug_seed, img, info, e);
    if (!fail) { /* on the host only a good packet counts: its sample is delivered */
        pl_gpu_count(g, engine, gh->packet, 1);
        return 0;
    }
    rf_decoder_set_recovered(dec, 0); /* not delivered */
    if (g->late) /* the verdict waits for the batch's check, as on the device */
        return s->gpu.status[t->index] = st, 0;
    return rf_seterr(e, RF_EDECODE, "%s (GPU decode, restart interval %u of the crop's "
                     "region)", rf_gj_status_text(st), bad);
}

/* GPU decode on the host backend: the decode thread's packet and scratch buffers. */
int pl_gpu_host_alloc(const pl_gpu *g, pl_gpu_host *gh)
{
    if (!g->on || g->device)
        return 0;
    gh->packet = malloc(g->cap);
    gh->cap = g->cap;
    gh->scratch = malloc(RF_GJ_SCRATCH);
    return gh->packet && gh->scratch ? 0 : -1;
}

void pl_gpu_host_free(pl_gpu_host *gh)
{
    free(gh->packet);
    free(gh->scratch);
}
