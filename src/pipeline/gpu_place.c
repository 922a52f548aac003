/* gpu_place.c — GPU decode (rf_config.gpu_decode, hw_decode_percent) behind the interface the
 * decode pool uses: pl_gj_host_alloc (a decode thread's packet buffers on the host backend),
 * pl_gj_decode (one sample: a packet placed in the slot's stage for the device, or on the
 * host the packet decoded at once), and pl_gj_check (the consumer's wait for a batch's kernels
 * and its verdicts, turned into the error the CPU path would have raised).
 *
 * DESIGN
 * pl_gj_decode runs on the decode threads without mu: the placement in the slot is lock-free
 * (the slot's gj_room, gj_top, gj_scratch and gj_engine are atomics; each sample writes only
 * its own gj_offs and gj_flags entries). pl_gj_check runs on the consumer's thread without mu
 * and calls the backend's sync. Nothing here calls another pipeline stage but state.c's
 * messages. */
#include <stdlib.h>

#include "pipeline/pipeline.h"

/* Where rf_decode_packet writes one sample (rf_gj_place). */
typedef struct gj_place_ctx {
    rf_loader *ld;
    slot *s;
    uint32_t index;
    uint8_t *img; /* host backend: the sample's pixels */
    gj_host *gh;
} gj_place_ctx;

/* Device: the next free bytes of the slot's stage. A packet takes them only while every sample
 * not yet placed keeps room for its pixels, so a decoded sample always fits; a packet that
 * does not is decoded on the CPU to the same bytes (rf_decode_packet). Lock-free: one CAS on
 * the room, one add on the top. */
static uint8_t *gj_place_device(void *ctx, size_t bytes, int packet)
{
    gj_place_ctx *c = ctx;
    uint64_t n = (bytes + RF_GJ_ALIGN - 1) / RF_GJ_ALIGN * RF_GJ_ALIGN;
    if (packet) {
        int64_t need = (int64_t)n - (int64_t)c->ld->gj_px;
        /* Relaxed: the room is a budget and carries no data; the CAS alone keeps two claims
         * from spending the same bytes (see slot.gj_room). */
        int64_t room = atomic_load_explicit(&c->s->gj_room, memory_order_relaxed);
        do
            if (room < need)
                return NULL;
        while (!atomic_compare_exchange_weak_explicit(&c->s->gj_room, &room, room - need,
                                                      memory_order_relaxed,
                                                      memory_order_relaxed));
    } else {
        n = c->ld->gj_px; /* held for it since the slot opened */
    }
    /* Relaxed: the add's atomicity gives each sample its own bytes; they are published by
     * pending's acq_rel countdown. */
    uint64_t off = atomic_fetch_add_explicit(&c->s->gj_top, n, memory_order_relaxed);
    c->s->gj_offs[c->index] = off;
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

/* GPU decode of one sample (rf_config.gpu_decode, hw_decode_percent): a packet for the
 * device, or on the host backend the packet decoded right away by the same code (an engine
 * packet's planes by libjpeg); images the kernels or the engine do not take come back decoded
 * by the CPU path. */
int pl_gj_decode(rf_loader *ld, rf_decoder *dec, const task *t, slot *s, const uint8_t *jpeg,
                 uint32_t len, uint8_t *img, rf_decode_info *info, gj_host *gh, rf_err *e)
{
    uint32_t bytes = 0, bad = 0;
    gj_place_ctx c = {ld, s, t->index, img, gh};
    /* A hash of the sample's own seed (itself one of seed, epoch and sample), apart from the
     * draws that choose its crop, decides: percentiles below hw_decode_percent go to the
     * engine, the next gpu_decode_percent to the kernels, the rest to the CPU. */
    uint32_t pc = rf_plan_gpu_percentile(t->aug_seed), hw = ld->cfg.hw_decode_percent;
    int engine = pc < hw;
    if (!engine && (!ld->cfg.gpu_decode || pc - hw >= ld->cfg.gpu_decode_percent)) {
        uint8_t *px = ld->gj_device ? gj_place_device(&c, ld->stage_bytes, 0) : img;
        return rf_decode_transform(dec, jpeg, len, &ld->tf, t->aug_seed, px, info, e);
    }
    int rc = rf_decode_packet(dec, jpeg, len, &ld->tf, t->aug_seed, engine,
                              ld->gj_device ? gj_place_device : gj_place_host, &c, &bytes,
                              info, e);
    if (rc || !bytes)
        return rc;
    atomic_fetch_add_explicit(engine ? &ld->hw_decoded : &ld->gpu_decoded, 1,
                              memory_order_relaxed); /* statistics only */
    if (ld->gj_device) { /* the packet's share of the batch's device scratch */
        rf_gj_packet *p = (rf_gj_packet *)(s->stage + s->gj_offs[t->index]);
        /* Relaxed claims, like gj_top's: the totals are read after pending's acquire. */
        p->scratch_at = (uint32_t)atomic_fetch_add_explicit(
            &s->gj_scratch, (p->scratch + RF_GJ_ALIGN - 1) / RF_GJ_ALIGN, memory_order_relaxed);
        s->gj_flags[t->index] = engine ? RF_GJ_ENGINE_PACKET : RF_GJ_KERNELS;
        if (engine)
            atomic_fetch_add_explicit(&s->gj_engine, 1, memory_order_relaxed);
        return 0;
    }
    if (engine && (rc = rf_decode_planes(dec, gh->packet, gh->scratch, e)) != 0)
        return rc;
    int st = rf_gj_decode_host(gh->packet, gh->scratch, img, &bad);
    if (st)
        return rf_seterr(e, RF_EDECODE, "%s (GPU decode, restart interval %u of the crop's "
                         "region)", rf_gj_status_text(st), bad);
    return 0;
}

/* GPU decode on the device: wait for the batch's kernels and turn a sample they could not
 * decode into the error the CPU path would have raised (named by file, member and offset),
 * before the batch is handed out. The consumer waits, in rf_loader_next: the kernels ran
 * while the batches before it were consumed, so the wait is normally over at once, and no
 * decode thread ever sits idle on the GPU (one did, for a whole batch's kernels, when the
 * thread that finished the batch waited). */
int pl_gj_check(rf_loader *ld, const slot *s, rf_err *e)
{
    if (ld->bops->sync(s->dev.event))
        return rf_seterr(e, RF_ECUDA, "waiting for the GPU decode of the batch failed");
    for (uint32_t i = 0; i < s->batch.count; i++) {
        if (!s->gj_status[i])
            continue;
        /* data_hdr is the located header: the sample decoded, so its span re-validated */
        const rf_sample *sm = &ld->ds.samples[s->ids[i]];
        char m[RF_ERRMSG_MAX];
        pl_describe_member(ld, sm, sm->data_hdr, m, sizeof m);
        int st = s->gj_status[i];
        if ((st & 0xFF) == RF_GJ_ENGINE) /* nvJPEG's own status is above the low byte */
            return rf_seterr(e, RF_EDECODE, "%s: %s: %s (nvJPEG status %d)",
                             ld->ds.files[sm->file].path, m, rf_gj_status_text(RF_GJ_ENGINE),
                             st >> 8);
        return rf_seterr(e, RF_EDECODE, "%s: %s: %s (GPU decode)", ld->ds.files[sm->file].path,
                         m, rf_gj_status_text(st));
    }
    return 0;
}

/* GPU decode on the host backend: the decode thread's packet and scratch buffers. */
int pl_gj_host_alloc(rf_loader *ld, gj_host *gh)
{
    if (!ld->gj || ld->gj_device)
        return 0;
    gh->packet = malloc(ld->gj_cap);
    gh->cap = ld->gj_cap;
    gh->scratch = malloc(RF_GJ_SCRATCH);
    return gh->packet && gh->scratch ? 0 : -1;
}
