/* ring.c — the memory create sizes: the batch ring (pinned on the CUDA backend), the slot
 * tables, the extra fields' rows (fields.c), the staging arena, the task ring and decoders, the
 * backend's device pool; the page cache state and the NUMA node the ring and threads are
 * placed on.
 *
 * DESIGN
 * Runs on the creating thread, before any pipeline thread exists. Every allocation goes
 * through the test hook (pl_alloc_refused) and fails with a message saying what was asked for
 * and why it is that large. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/io.h"
#include "pipeline/pipeline.h"

static int alloc_ring(rf_loader *ld, rf_err *err)
{
    uint32_t B = ld->batch;
    /* Per slot, in pinned memory: staged samples, labels (both copied to the device), and on
     * the host backend with a conversion the converted output. Sizes are checked for
     * overflow: batch_size x image_height x image_width comes from the caller and may not fit. */
#define PAGE_UP(x) (((x) + 4095) / 4096 * 4096)
    ld->host_convert = ld->conv.kind != RF_CONV_NONE && ld->bops->device_kind == RF_DEVICE_HOST;
    size_t img, lab, outb = 0, per, ring;
    const char *kind = ld->bops->device_kind == RF_DEVICE_CUDA && !ld->cfg.naive ? "pinned"
                                                                                  : "host";
    char conv[96] = "";
    if (ld->host_convert)
        snprintf(conv, sizeof conv, " + batch %u x %llu bytes converted", B,
                 (unsigned long long)ld->out_bytes);
    /* GPU decode on the device takes more per sample, and its arrays after the labels. */
    ld->stride = pl_gpu_stride(ld);
    lab = (size_t)B * sizeof(int32_t) + pl_gpu_ring_bytes(ld);
    /* img and outb at most half and a quarter of SIZE_MAX, labels below 2^34 bytes: their
     * page-rounded sum cannot wrap, so only the products need checking. */
    if (__builtin_mul_overflow((size_t)B, (size_t)ld->stride, &img) || img > SIZE_MAX / 2 ||
        (ld->host_convert &&
         (__builtin_mul_overflow((size_t)B, (size_t)ld->out_bytes, &outb) || outb > SIZE_MAX / 4)) ||
        __builtin_mul_overflow(PAGE_UP(img) + PAGE_UP(lab) + PAGE_UP(outb), (size_t)ld->depth,
                               &ring))
        return rf_seterr(err, RF_ENOMEM, "cannot allocate the %s batch ring: prefetch_depth %u x "
                         "(batch %u x %llu bytes per sample%s + labels) exceeds %zu bytes: out "
                         "of memory", kind, ld->depth, B, (unsigned long long)ld->stage_bytes,
                         conv, SIZE_MAX);
    img = PAGE_UP(img);
    lab = PAGE_UP(lab);
    outb = PAGE_UP(outb);
    per = img + lab + outb;
    ld->ring_bytes = ring;
    char hw[160] = "";
    int rc = RF_ENOMEM;
    if (!pl_alloc_refused(ld, "batch ring", ld->ring_bytes))
        rc = rf_ringmem_alloc(ld->bops, ld->backend, ld->ring_bytes, (int)ld->cfg.hugepages,
                              &ld->rmem, hw, sizeof hw);
    ld->ring = rc ? NULL : ld->rmem.ptr;
    ld->pinned = ld->rmem.pinned;
    if (hw[0])
        pl_mem_why(ld, "hugepages: %s", hw);
    if (!ld->ring)
        return rf_seterr(err, RF_ENOMEM, "cannot allocate the %zu-byte %s batch ring "
                         "(prefetch_depth %u x (batch %u x %llu bytes per sample%s + labels), "
                         "page-rounded): out of memory", ld->ring_bytes, kind, ld->depth, B,
                         (unsigned long long)ld->stage_bytes, conv);
    /* ids, positions, keys (8 bytes each) and padding (1) per sample of every slot */
    size_t tables = (size_t)ld->depth * (sizeof *ld->slots + (size_t)B * 25);
    ld->slots = pl_alloc_refused(ld, "slot tables", tables) ? NULL
                                                         : calloc(ld->depth, sizeof *ld->slots);
    if (!ld->slots)
        return rf_seterr(err, RF_ENOMEM, "cannot allocate %zu bytes of slot tables "
                         "(prefetch_depth %u x batch %u samples): out of memory", tables,
                         ld->depth, B);
    for (uint32_t i = 0; i < ld->depth; i++) {
        slot *s = &ld->slots[i];
        s->stage = ld->ring + per * i;
        s->labels = (int32_t *)(s->stage + img);
        pl_gpu_slot_init(ld, s);
        s->out = ld->host_convert ? s->stage + img + lab : NULL;
        s->ids = calloc(B, sizeof *s->ids);
        s->positions = calloc(B, sizeof *s->positions);
        s->padding = calloc(B, 1);
        s->keys = calloc(B, sizeof *s->keys);
        if (!s->ids || !s->positions || !s->padding || !s->keys)
            return rf_seterr(err, RF_ENOMEM, "cannot allocate %zu bytes of slot tables "
                             "(prefetch_depth %u x batch %u samples): out of memory", tables,
                             ld->depth, B);
    }
    int frc = pl_fields_alloc(ld, err);
    if (frc)
        return frc;
    /* Staging: enough for every decode thread to have work queued behind it plus a full
     * queue of reads, and never less than a few of the largest samples. */
    uint64_t mean = ld->ds.total_bytes / ld->ds.nsamples + 1;
    uint64_t want = ld->cfg.staging_bytes;
    if (!want)
        want = RF_MAX(64ull << 20, mean * 8 * (ld->cfg.decode_threads + ld->cfg.io_queue_depth));
    want = RF_MAX(want, 4 * ld->ds.max_span);
    if (rf_pc_odirect(ld->pc)) /* aligned reads are up to two blocks longer than the span */
        want = RF_MAX(want, 4 * (ld->ds.max_span + 2 * rf_pc_align(ld->pc)));
    if (ld->tokens) /* token windows are read straight into the slots */
        want = 1u << 20;
    ld->arena_bytes = (want + 4095) / 4096 * 4096;
    if (ld->arena_bytes > SIZE_MAX || pl_alloc_refused(ld, "staging arena", ld->arena_bytes))
        ld->arena = NULL;
    else
        ld->arena = aligned_alloc(4096, ld->arena_bytes);
    if (!ld->arena)
        return rf_seterr(err, RF_ENOMEM, "cannot allocate the %llu-byte staging arena for reads "
                         "(%s; largest sample %llu bytes): out of memory",
                         (unsigned long long)ld->arena_bytes,
                         ld->cfg.staging_bytes ? "staging_bytes as configured"
                                               : "the default: set staging_bytes to choose",
                         (unsigned long long)ld->ds.max_span);
    ld->ntasks = (uint32_t)RF_MIN((uint64_t)B * ld->depth + ld->cfg.io_queue_depth *
                                      RF_MAX(1u, ld->cfg.io_threads) + 64, 1u << 20);
    size_t tbytes = (size_t)ld->ntasks * (sizeof *ld->tasks + sizeof *ld->decq);
    if (!pl_alloc_refused(ld, "task ring", tbytes)) {
        ld->tasks = calloc(ld->ntasks, sizeof *ld->tasks);
        ld->decq = calloc(ld->ntasks, sizeof *ld->decq);
        ld->decoders = calloc(ld->cfg.decode_threads, sizeof *ld->decoders);
        ld->decs = calloc(ld->cfg.decode_threads, sizeof *ld->decs);
    }
    if (!ld->tasks || !ld->decq || !ld->decoders || !ld->decs)
        return rf_seterr(err, RF_ENOMEM, "cannot allocate the %zu-byte task ring (%u tasks) "
                         "and tables for %u decode threads: out of memory", tbytes, ld->ntasks,
                         ld->cfg.decode_threads);
    for (uint32_t i = 0; i < ld->cfg.decode_threads; i++)
        if (pl_alloc_refused(ld, "decoder", 0) || !(ld->decs[i] = rf_decoder_create(&ld->limits)))
            return rf_seterr(err, RF_ENOMEM, "cannot create JPEG decoder %u of %u: out of memory",
                             i + 1, ld->cfg.decode_threads);
        else if (ld->cfg.dct_scaling == RF_DCT_SCALING_OFF)
            rf_decoder_set_max_scale_denom(ld->decs[i], 1);
    /* Two batches of slack beyond the ring: a slow consumer stream delays reuse. Per copy
     * stream, temporaries: the staged copy a conversion or GPU decode reads, and for GPU
     * decode its scratch, status and flags, plus the decoded batch when a conversion follows. */
    int cv = ld->conv.kind != RF_CONV_NONE;
    size_t staged = (size_t)B * ld->stride, outs = (size_t)B * (cv ? ld->out_bytes : ld->stage_bytes);
    size_t temp = ld->gpu.device ? pl_gpu_temp_bytes(ld, staged, cv) : cv ? staged : 0;
    if (ld->bops->device_kind == RF_DEVICE_CUDA &&
        pl_alloc_refused(ld, "device pool", (size_t)(ld->depth + 2) * outs))
        return rf_seterr(err, RF_ENOMEM, "cannot reserve the %zu-byte device pool on cuda:%d "
                         "(%u batches x %zu bytes): out of memory (refused by a test hook)",
                         (size_t)(ld->depth + 2) * outs, ld->cfg.device_index, ld->depth + 2,
                         outs);
    return ld->bops->reserve(ld->backend, ld->depth + 2, outs, B, temp, err);
}

/* Page-cache state (O_DIRECT descriptors, residency maps) and the NUMA node to use. */
int pl_mem_setup(rf_loader *ld, rf_err *err)
{
    char why[160] = "";
    uint64_t b0 = rf_io_acct_thread_bytes(); /* the O_DIRECT probe reads from storage */
    if (rf_pc_create(&ld->ds, ld->cfg.odirect && !ld->tokens, &ld->pc, why, sizeof why))
        return rf_seterr(err, RF_ENOMEM, "no memory for the page-cache state");
    ld->storage_create += rf_io_acct_thread_bytes() - b0;
    if (ld->cfg.odirect && ld->tokens)
        pl_mem_why(ld, "odirect: not for token files (read straight into the slots)");
    else if (ld->cfg.odirect)
        pl_mem_why(ld, "odirect: %s", why);
    ld->warm_on = ld->cfg.warm && !rf_pc_odirect(ld->pc);
    if (ld->cfg.warm && !ld->warm_on)
        pl_mem_why(ld, "warm: off under O_DIRECT (reads bypass the cache)");
    ld->numa_nodes = rf_numa_nodes();
    ld->numa_node = -1;
    if (ld->cfg.numa != RF_NUMA_AUTO || ld->numa_nodes < 2)
        return 0;
    int node = ld->bops->numa_node(ld->backend);
    rf_numa_scope sc;
    if (node < 0) {
        pl_mem_why(ld, "numa: %u nodes, device node unknown: no placement", ld->numa_nodes);
    } else if (rf_numa_enter(node, &sc, why, sizeof why) == 0) {
        rf_numa_leave(&sc);
        ld->numa_node = node;
        pl_mem_why(ld, "numa: threads and ring on node %d of %u", node, ld->numa_nodes);
    } else {
        pl_mem_why(ld, "numa: node %d: %s: no placement", node, why);
    }
    return 0;
}

/* Ring and threads are created inside a scope on the NUMA node (inherited placement). */
int pl_alloc_ring_placed(rf_loader *ld, rf_err *err)
{
    rf_numa_scope sc;
    char why[96];
    rf_numa_enter(ld->numa_node, &sc, why, sizeof why);
    int rc = alloc_ring(ld, err);
    rf_numa_leave(&sc);
    rf_backend_stats bs;
    memset(&bs, 0, sizeof bs);
    ld->bops->stats(ld->backend, &bs);
    ld->host_allocs0 = bs.host_allocs;
    return rc;
}
