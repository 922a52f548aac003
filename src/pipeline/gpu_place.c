/* gpu_place.c — GPU decode (rf_config.gpu_decode, hw_decode_percent) behind the interface
 * gpu_place.h declares, the one place that writes slot.gpu and rf_loader.gpu (other files read
 * only the loader's on and device flags, and stats.c its two counters): create's choice and
 * the ring's sizes (pl_gpu_choose, pl_gpu_stride, pl_gpu_ring_bytes, pl_gpu_temp_bytes,
 * pl_gpu_slot_init), a slot's reset when it opens (pl_gpu_slot_reset_locked),
 * pl_gpu_host_alloc/free (a decode thread's packet buffers on the host backend),
 * pl_gpu_sample_start and pl_gpu_decode (one sample: a packet placed in the slot's stage for
 * the device, or on the host the packet decoded at once), pl_gpu_batch_desc (the batch's part
 * of the convert desc at submit) and pl_gpu_check (the consumer's wait for a batch's kernels
 * and its verdicts, turned into the error the CPU path would have raised).
 *
 * DESIGN
 * Sizing and slot_init run on the creating thread; slot_reset_locked on an I/O thread with mu
 * held. pl_gpu_decode runs on the decode threads without mu: the placement in the slot is
 * lock-free (the slot's gpu.room, gpu.top, gpu.scratch and gpu.engine are atomics; each sample
 * writes only its own gpu.offs and gpu.flags entries). pl_gpu_batch_desc runs on the thread
 * that counted the slot's last sample down, without mu. pl_gpu_check runs on the consumer's
 * thread without mu and calls the backend's sync; in skip mode it takes mu for the verdicts,
 * and on the device layout for compact_refill, which moves the kept samples' bytes while no
 * other thread may place in the slot (it is LEASED until the state turns FILLING under the
 * same lock). Nothing here calls another pipeline stage but state.c's messages. */
#include <stdlib.h>
#include <string.h>

#include "pipeline/pipeline.h"

/* Whether samples may become packets and whether they go to the device, once the backend is
 * chosen; the configurations that cannot take GPU decode are refused here, at create. */
int pl_gpu_choose(rf_loader *ld, rf_err *err)
{
    ld->gpu.on = ld->cfg.gpu_decode || ld->cfg.hw_decode_percent ||
                 ld->sched.mode == RF_SCHEDULE_BALANCE;
    int cuda = ld->bops->device_kind == RF_DEVICE_CUDA;
    ld->gpu.emulate = ld->gpu.on && !cuda && ld->hooks.gpu_device_layout;
    ld->gpu.device = ld->gpu.on && (cuda || ld->gpu.emulate);
    ld->gpu.late = ld->gpu.device || (ld->gpu.on && ld->hooks.gpu_late_verdicts);
    const char *what = ld->cfg.gpu_decode          ? "gpu_decode"
                       : ld->cfg.hw_decode_percent ? "hw_decode_percent"
                                                   : "decode_schedule BALANCE";
    if (ld->gpu.device && ld->cfg.batch_size > RF_GJ_MAX_BATCH)
        return rf_seterr(err, RF_EINVAL, "%s takes batches of at most %u samples (the kernels "
                         "run a CUDA grid row per sample), not %u", what, RF_GJ_MAX_BATCH,
                         ld->cfg.batch_size);
    if (ld->gpu.device && ld->cfg.naive)
        return rf_seterr(err, RF_EINVAL, "%s needs the pipelined CUDA backend, not the naive "
                         "baseline", what);
    /* The emulation decodes kernel packets and copies pixels; engine packets and the
     * conversion kernels have no host twin in it. */
    if (ld->gpu.emulate && (ld->cfg.hw_decode_percent || ld->sched.mode == RF_SCHEDULE_BALANCE ||
                            ld->cfg.dtype != RF_DTYPE_UINT8))
        return rf_seterr(err, RF_EINVAL, "the test hook gpu_device_layout emulates gpu_decode "
                         "(no engines, no scheduler) with uint8 output only");
    return 0;
}

/* GPU decode on the device: a slot holds batch x max(decoded sample, RF_GJ_AREA) bytes that
 * its packets and CPU-decoded samples share (gj_place_device). Host GPU decode builds packets
 * in a per-thread buffer and writes pixels into the slot. Returns the slot bytes per sample. */
uint64_t pl_gpu_stride(rf_loader *ld)
{
    ld->gpu.cap = RF_MAX(ld->stage_bytes, (uint64_t)RF_GJ_AREA);
    ld->gpu.px = (ld->stage_bytes + RF_GJ_ALIGN - 1) / RF_GJ_ALIGN * RF_GJ_ALIGN;
    return ld->gpu.device ? RF_MAX(ld->gpu.px, (uint64_t)RF_GJ_AREA) : ld->stage_bytes;
}

/* GPU decode on the device: status, offsets, flags and the compaction's order per sample
 * after the slot's labels; with the host emulation also its decoded batch and scratch. */
size_t pl_gpu_ring_bytes(const rf_loader *ld)
{
    if (!ld->gpu.device) /* host with late verdicts: the status array alone */
        return ld->gpu.late ? (size_t)ld->batch * sizeof(int32_t) : 0;
    size_t B = ld->batch, n = B * (sizeof(int32_t) + sizeof(uint64_t) + 1);
    n = (n + 7) / 8 * 8 + B * sizeof(uint64_t);
    if (ld->gpu.emulate)
        n = (n + RF_GJ_ALIGN - 1) / RF_GJ_ALIGN * RF_GJ_ALIGN + B * ld->stage_bytes +
            RF_GJ_SCRATCH;
    return n;
}

/* The device pool's temporaries per copy stream with GPU decode on the device: the staged
 * copy the kernels read, the decoded batch when a conversion follows, and the scratch, status
 * and flags. GPU decode's scratch is what the batch's packets take (~0.2-0.6 MiB each for 224
 * crops of ImageNet-sized photos): RF_GJ_SCRATCH_RESERVE a sample is reserved, and a batch of
 * larger crops grows the pool once (counted in device_allocs_after_create). */
size_t pl_gpu_temp_bytes(const rf_loader *ld, size_t staged, int convert)
{
    size_t B = ld->batch;
    return staged + (convert ? B * ld->stage_bytes : 0) +
           B * (RF_GJ_SCRATCH_RESERVE + sizeof(int32_t) + sizeof(uint64_t) + 1);
}

/* Slot s's arrays in the pinned ring, right after its labels (pl_gpu_ring_bytes). */
void pl_gpu_slot_init(const rf_loader *ld, slot *s)
{
    size_t B = ld->batch;
    if (ld->gpu.late && !ld->gpu.device)
        s->gpu.status = s->labels + B;
    if (!ld->gpu.device)
        return;
    s->gpu.status = s->labels + B; /* labels are page-aligned, so the offsets are 8-byte aligned */
    s->gpu.offs = (uint64_t *)(s->labels + 2 * B);
    s->gpu.flags = (uint8_t *)(s->gpu.offs + B);
    uintptr_t o = ((uintptr_t)(s->gpu.flags + B) + 7) / 8 * 8;
    s->gpu.order = (uint64_t *)o;
    o = ((uintptr_t)(s->gpu.order + B) + RF_GJ_ALIGN - 1) / RF_GJ_ALIGN * RF_GJ_ALIGN;
    if (ld->gpu.emulate)
        s->gpu.emu = (uint8_t *)o, s->gpu.emu_scratch = s->gpu.emu + B * ld->stage_bytes;
}

/* Slot s opens for the dispatcher's batch of d_count samples: nothing placed, and room held
 * for every sample's pixels. */
void pl_gpu_slot_reset_locked(rf_loader *ld, slot *s)
{
    PL_ASSERT_LOCKED(ld);
    s->gpu.refill = 0;
    if (!ld->gpu.device)
        return;
    /* relaxed: mu orders the reset before any placement in the slot (pl_gpu_slot.room) */
    atomic_store_explicit(&s->gpu.top, 0, memory_order_relaxed);
    atomic_store_explicit(&s->gpu.scratch, 0, memory_order_relaxed);
    atomic_store_explicit(&s->gpu.engine, 0, memory_order_relaxed);
    atomic_store_explicit(&s->gpu.room,
                          (int64_t)(ld->batch * ld->stride - ld->d_count * ld->gpu.px),
                          memory_order_relaxed);
    for (uint32_t i = 0; i < ld->batch; i++) /* a sample that fails early places nothing */
        s->gpu.offs[i] = PL_GJ_UNPLACED, s->gpu.flags[i] = RF_GJ_PIXELS;
}

/* The batch's GPU decode for the backend's submit (rf_convert_desc.gj), by the thread that
 * counted the slot's last sample down. Returns the stage bytes the batch's packets and pixels
 * took: only those are copied. */
size_t pl_gpu_batch_desc(rf_loader *ld, slot *s, rf_gj_batch *gj)
{
    /* Skip mode: a sample that failed before placing anything is a hole the batch's check
     * refills; the kernels still read pixels at its offset, so it gets its held bytes, zero. */
    uint32_t packets = 0;
    for (uint32_t i = 0; i < s->batch.count; i++) {
        if (s->gpu.offs[i] == PL_GJ_UNPLACED)
            memset(pl_gpu_pixels(ld, s, i), 0, ld->stage_bytes);
        packets += s->gpu.flags[i] != RF_GJ_PIXELS;
    }
    s->gpu.packets = packets;
    /* The totals are read relaxed: the acquire of pending's last decrement, which called
     * pl_slot_finish, comes after every sample's claims, so these loads see the final values. */
    gj->offs = s->gpu.offs, gj->flags = s->gpu.flags, gj->status = s->gpu.status;
    gj->height = ld->tf.height, gj->width = ld->tf.width;
    gj->scratch = atomic_load_explicit(&s->gpu.scratch, memory_order_relaxed) * RF_GJ_ALIGN;
    gj->engine = atomic_load_explicit(&s->gpu.engine, memory_order_relaxed);
    gj->packets = packets;
    return (size_t)atomic_load_explicit(&s->gpu.top, memory_order_relaxed);
}

/* Before a sample is decoded: on the device its flag says pixels (what a sample that fails or
 * is decoded on the CPU leaves) until a packet is placed for it. */
void pl_gpu_sample_start(const rf_loader *ld, slot *s, uint32_t index)
{
    if (ld->gpu.device)
        s->gpu.flags[index] = 0;
    else if (ld->gpu.late) /* no verdict until its packet is decoded */
        s->gpu.status[index] = 0;
}

/* Where rf_decode_packet writes one sample (rf_gj_place). */
typedef struct gj_place_ctx {
    rf_loader *ld;
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
    uint64_t n = (bytes + RF_GJ_ALIGN - 1) / RF_GJ_ALIGN * RF_GJ_ALIGN;
    if (packet) {
        /* Skip mode: a packet spends at least its sample's pixels, never gives room back, so
         * that a refill always finds room for its holes' pixels (compact_refill). */
        int64_t need = (int64_t)(c->ld->skip ? RF_MAX(n, c->ld->gpu.px) : n) -
                       (int64_t)c->ld->gpu.px;
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
        n = c->ld->gpu.px; /* held for it since the slot opened (or the refill's compaction) */
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

uint8_t *pl_gpu_pixels(rf_loader *ld, slot *s, uint32_t index)
{
    if (!ld->gpu.device)
        return s->stage + (uint64_t)index * ld->stride;
    gj_place_ctx c = {ld, s, index, NULL, NULL};
    s->gpu.flags[index] = RF_GJ_PIXELS;
    return gj_place_device(&c, ld->stage_bytes, 0);
}

uint8_t *pl_gpu_emulated(const slot *s) { return s->gpu.emu; }

/* A hole's flag between its verdict and compact_refill (no flag the kernels know). */
#define PL_GJ_HOLE 0xFF

/* rf_stats.gpu_decoded / hw_decoded and gpu_plain_decoded for a GPU-decoded packet: +1 when
 * it is decoded, -1 when its sample becomes a hole (uncount_hole), so the counts are of
 * delivered samples. */
static void count_gpu(rf_loader *ld, int engine, const uint8_t *packet, int sign)
{
    /* statistics only: relaxed; -1 is added as 2^64 - 1, which unsigned atomics wrap to a
     * decrement */
    uint64_t d = (uint64_t)(int64_t)sign;
    atomic_fetch_add_explicit(engine ? &ld->gpu.hw_decoded : &ld->gpu.decoded, d,
                              memory_order_relaxed);
    if (((const rf_gj_packet *)packet)->plain)
        atomic_fetch_add_explicit(&ld->gpu.plain_decoded, d, memory_order_relaxed);
}

/* GPU decode of one sample (rf_config.gpu_decode, hw_decode_percent): a packet for the
 * device, or on the host backend the packet decoded right away by the same code (an engine
 * packet's planes by libjpeg); images the kernels or the engine do not take come back decoded
 * by the CPU path. */
int pl_gpu_decode(rf_loader *ld, rf_decoder *dec, const task *t, slot *s, const uint8_t *jpeg,
                  uint32_t len, uint8_t *img, rf_decode_info *info, pl_gpu_host *gh, rf_err *e)
{
    uint32_t bytes = 0, bad = 0;
    gj_place_ctx c = {ld, s, t->index, img, gh};
    /* The scheduler decides (schedule.c): a hash of the sample's own seed against the manual
     * percentages, or against the balancing scheduler's shares of the moment. */
    int route = pl_sched_route(ld, t->aug_seed), engine = route == PL_ROUTE_ENGINE;
    /* PNG and WebP have no GPU decode: they take the CPU path into the same batch, as a JPEG
     * routed to the CPU does. */
    if (rf_image_sniff(jpeg, len) != RF_IMAGE_JPEG || route == PL_ROUTE_CPU) {
        uint8_t *px = ld->gpu.device ? gj_place_device(&c, ld->stage_bytes, 0) : img;
        return rf_decode_image(dec, jpeg, len, &ld->tf, t->aug_seed, px, info, e);
    }
    int rc = rf_decode_packet(dec, jpeg, len, &ld->tf, t->aug_seed, engine,
                              ld->gpu.device ? gj_place_device : gj_place_host, &c, &bytes,
                              info, e);
    if (rc || !bytes)
        return rc;
    if (ld->gpu.device) { /* the packet's share of the batch's device scratch */
        rf_gj_packet *p = (rf_gj_packet *)(s->stage + s->gpu.offs[t->index]);
        count_gpu(ld, engine, (const uint8_t *)p, 1); /* a hole takes it back */
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
        return rf_decode_image(dec, jpeg, len, &ld->tf, t->aug_seed, img, info, e);
    if (!fail) { /* on the host only a good packet counts: its sample is delivered */
        count_gpu(ld, engine, gh->packet, 1);
        return 0;
    }
    rf_decoder_set_recovered(dec, 0); /* not delivered */
    if (ld->gpu.late) /* the verdict waits for the batch's check, as on the device */
        return s->gpu.status[t->index] = st, 0;
    return rf_seterr(e, RF_EDECODE, "%s (GPU decode, restart interval %u of the crop's "
                     "region)", rf_gj_status_text(st), bad);
}

/* A status no kernel writes: the consumer's CPU decode of the sample's file failed, with the
 * error in gpu.redo_err[i] (engine_redo). */
#define PL_GJ_CPU_VERDICT 0x7F

/* The error sample i's verdict st (non-zero) stands for, named by file, member and offset as
 * the CPU path names its errors; data_hdr is the located header: the sample decoded, so its
 * span re-validated. */
static int verdict_error(const rf_loader *ld, const slot *s, uint32_t i, int st, rf_err *e)
{
    const rf_sample *sm = &ld->ds.samples[s->ids[i]];
    const char *path = ld->ds.files[sm->file].path;
    char m[RF_ERRMSG_MAX];
    pl_describe_member(ld, sm, sm->data_hdr, m, sizeof m);
    if (st == PL_GJ_CPU_VERDICT)
        return rf_seterr(e, ld->gpu.redo_err[i].code, "%s: %s: %s", path, m,
                         ld->gpu.redo_err[i].msg);
    if ((st & 0xFF) == RF_GJ_ENGINE) /* nvJPEG's own status is above the low byte */
        return rf_seterr(e, RF_EDECODE, "%s: %s: %s (nvJPEG status %d)", path, m,
                         rf_gj_status_text(RF_GJ_ENGINE), (st >> 8) & 0xFFFF);
    return rf_seterr(e, RF_EDECODE, "%s: %s: %s (GPU decode)", path, m, rf_gj_status_text(st));
}

/* A placed sample's bytes are gone from the batch (a hole): its packet's GPU-decode count
 * goes with it, so rf_stats counts the GPU-decoded samples that were delivered. */
static void uncount_hole(rf_loader *ld, slot *s, uint32_t i)
{
    uint8_t f = s->gpu.flags[i];
    if (f == RF_GJ_PIXELS || s->gpu.offs[i] == PL_GJ_UNPLACED)
        return;
    count_gpu(ld, f == RF_GJ_ENGINE_PACKET, s->stage + s->gpu.offs[i], -1);
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
static void compact_refill(rf_loader *ld, slot *s, uint32_t holes)
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
    int64_t room = (int64_t)(ld->batch * ld->stride - at) - (int64_t)holes * (int64_t)ld->gpu.px;
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
static void count_batch_recovered(rf_loader *ld, const slot *s)
{
    for (uint32_t i = 0; i < s->batch.count && ld->gpu.device; i++) {
        if (s->gpu.flags[i] == RF_GJ_PIXELS || s->gpu.offs[i] == PL_GJ_UNPLACED)
            continue;
        pl_count_recovered(ld, ((const rf_gj_packet *)(s->stage + s->gpu.offs[i]))->recovered);
    }
}

/* Skip mode: every verdict of the batch goes to the skip policy (mu held), a bad one as a
 * corrupt sample, counted and logged as the CPU path's libjpeg error would be. Holes leave the
 * slot FILLING again with one pending sample each: the policy's replacement cursor fills them
 * in output order (decode threads, the CPU path: pl_gpu_pixels), the last one publishes the
 * slot, and the consumer checks it again. On the device layout the holes' bytes leave the
 * stage first (compact_refill) and the whole batch is submitted again: the kept packets decode
 * to the same pixels. Returns the number of holes, or the loader's sticky error (in e) when
 * another thread failed it meanwhile. */
static int verdicts_skip(rf_loader *ld, slot *s, rf_err *e)
{
    uint32_t holes = 0, si = (uint32_t)(s - ld->slots);
    pl_lock(ld);
    for (uint32_t i = 0; i < s->batch.count && !ld->err.code; i++) {
        rf_err v = {0};
        if (RF_GJ_FAILURE(s->gpu.status[i]))
            verdict_error(ld, s, i, s->gpu.status[i], &v);
        int h = ld->policy->late_locked(ld, si, i, RF_SKIP_CORRUPT, v.code, v.msg);
        holes += (uint32_t)h;
        if (h && ld->gpu.device) {
            uncount_hole(ld, s, i);
            s->gpu.flags[i] = PL_GJ_HOLE;
        }
    }
    if (!holes) /* handed out as it is */
        count_batch_recovered(ld, s);
    for (uint32_t i = 0; i < s->batch.count; i++)
        s->gpu.status[i] = 0; /* given: a refill's check reads only its replacements' */
    int rc = ld->err.code ? rf_seterr(e, ld->err.code, "%s", ld->err.msg) : (int)holes;
    if (holes && !ld->err.code) {
        assert(s->state == SLOT_LEASED && ld->leased > 0); /* LEASED -> FILLING */
        if (ld->gpu.device)
            compact_refill(ld, s, holes);
        s->state = SLOT_FILLING;
        s->gpu.refill = 1;
        ld->leased--;
        /* relaxed: mu orders it before the replacements' tasks are handed out, as at open */
        atomic_store_explicit(&s->pending, holes, memory_order_relaxed);
    }
    pl_unlock(ld);
    return rc;
}

/* The host emulation of the device (test hook gpu_device_layout), on the consumer's thread:
 * what cuda_submit's kernels do with the packed stage, by the kernels' host code: each
 * sample's packet decoded, or its CPU-decoded pixels copied, into its row of the slot's
 * decoded batch, and each packet's status where the device writes it. */
static void emulate_kernels(const rf_loader *ld, slot *s)
{
    for (uint32_t i = 0; i < s->batch.count; i++) {
        uint8_t *out = s->gpu.emu + (uint64_t)i * ld->stage_bytes;
        const uint8_t *at = s->stage + s->gpu.offs[i]; /* all placed: pl_gpu_batch_desc */
        s->gpu.status[i] = 0;
        if (s->gpu.flags[i] == RF_GJ_PIXELS)
            memcpy(out, at, ld->stage_bytes);
        else
            s->gpu.status[i] = rf_gj_decode_host(at, s->gpu.emu_scratch, out, NULL);
    }
}

/* A bad Huffman code decides nothing by itself: libjpeg-turbo's fast path reads some such
 * codes as zeros without a warning, and the CPU path's verdict is libjpeg's. So a file in which
 * the check of an engine packet (rf_gj_engine_check) found one is decoded on the CPU, here
 * on the consumer's thread, from the copy of the file the packet carries: its error is the
 * sample's verdict (status PL_GJ_CPU_VERDICT, the error in gpu.redo_err[i]), or its pixels
 * replace the engine's in the device batch. Rare: damaged files only. Returns 0, or a fatal
 * error (memory, the device). */
static int engine_redo(rf_loader *ld, slot *s, uint32_t i, rf_err *e)
{
    pl_gpu *g = &ld->gpu;
    if (!g->redo && (g->redo = rf_decoder_create(&ld->limits)) != NULL &&
        ld->cfg.dct_scaling == RF_DCT_SCALING_OFF)
        rf_decoder_set_max_scale_denom(g->redo, 1);
    if (!g->redo_px)
        g->redo_px = malloc(ld->stage_bytes);
    if (!g->redo_err)
        g->redo_err = calloc(ld->batch, sizeof *g->redo_err);
    if (!g->redo || !g->redo_px || !g->redo_err)
        return rf_seterr(e, RF_ENOMEM, "no memory to decode a sample on the CPU again");
    const uint8_t *pkt = s->stage + s->gpu.offs[i];
    const rf_gj_packet *p = (const rf_gj_packet *)pkt;
    rf_err *v = &g->redo_err[i];
    *v = (rf_err){0};
    uint64_t seed = rf_plan_aug_seed(&ld->plan, s->batch.epoch, s->ids[i], s->positions[i]);
    /* (it stays counted in hw_decoded: a batch refilled later decodes it again, here too) */
    if (rf_decode_image(g->redo, pkt + p->off_data, p->data_bytes, &ld->tf, seed, g->redo_px,
                        NULL, v) != 0) {
        s->gpu.status[i] = PL_GJ_CPU_VERDICT;
        return 0;
    }
    s->gpu.status[i] = 0;
    ((rf_gj_packet *)pkt)->recovered = rf_decoder_recovered(g->redo); /* the CPU's account */
    return ld->bops->patch(ld->backend, &s->dev, i, g->redo_px, ld->stage_bytes, &ld->conv,
                           ld->out_bytes, e);
}

void pl_gpu_free(rf_loader *ld)
{
    rf_decoder_destroy(ld->gpu.redo);
    free(ld->gpu.redo_px);
    free(ld->gpu.redo_err);
}

/* GPU decode with late verdicts (on the device, or the host with the test hook): wait for the
 * batch's kernels and turn a sample they could not decode into the error the CPU path would
 * have raised (fail mode), or into a hole the skip policy fills (skip mode: PL_GPU_REFILL,
 * the batch is not handed out until its samples are final), before the batch is handed out.
 * The consumer waits, in rf_loader_next: the kernels ran while the batches before it were
 * consumed, so the wait is normally over at once, and no decode thread ever sits idle on the
 * GPU (one did, for a whole batch's kernels, when the thread that finished the batch waited). */
int pl_gpu_check(rf_loader *ld, slot *s, rf_err *e)
{
    /* A batch the CPU decoded whole (most of them while a training step keeps the scheduler's
     * GPU share low) has no verdict: the training loop's thread is not held up until its copy
     * and conversion are done (the consumer's stream waits for them on the device,
     * rf_batch_wait). In skip mode the check also refills samples that failed on the CPU. */
    if (ld->gpu.device && !ld->gpu.emulate && !ld->skip && !s->gpu.packets)
        return 0;
    char why[RF_ERRMSG_MAX / 2] = "";
    if (ld->bops->sync(s->dev.event, why, sizeof why))
        return rf_seterr(e, RF_ECUDA, "waiting for the GPU decode of batch %llu failed: %s",
                         (unsigned long long)s->seq, why);
    if (ld->gpu.emulate)
        emulate_kernels(ld, s);
    for (uint32_t i = 0; i < s->batch.count && ld->bops->patch; i++) {
        int rc = s->gpu.flags[i] == RF_GJ_ENGINE_PACKET &&
                         RF_GJ_FAILURE(s->gpu.status[i]) == RF_GJ_BAD_CODE
                     ? engine_redo(ld, s, i, e)
                     : 0;
        if (rc)
            return rc;
    }
    if (ld->skip) {
        int rc = verdicts_skip(ld, s, e);
        return rc > 0 ? PL_GPU_REFILL : rc;
    }
    for (uint32_t i = 0; i < s->batch.count; i++)
        if (RF_GJ_FAILURE(s->gpu.status[i]))
            return verdict_error(ld, s, i, s->gpu.status[i], e);
    count_batch_recovered(ld, s);
    return 0;
}

/* GPU decode on the host backend: the decode thread's packet and scratch buffers. */
int pl_gpu_host_alloc(rf_loader *ld, pl_gpu_host *gh)
{
    if (!ld->gpu.on || ld->gpu.device)
        return 0;
    gh->packet = malloc(ld->gpu.cap);
    gh->cap = ld->gpu.cap;
    gh->scratch = malloc(RF_GJ_SCRATCH);
    return gh->packet && gh->scratch ? 0 : -1;
}

void pl_gpu_host_free(pl_gpu_host *gh)
{
    free(gh->packet);
    free(gh->scratch);
}
