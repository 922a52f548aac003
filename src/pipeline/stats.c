/* stats.c — rf_loader_stats, rf_stats_init, rf_loader_trim.
 *
 * DESIGN
 * Runs on the consumer's thread. Counters the threads update are atomics read without mu; the
 * skip counts are read under mu; the engine's and backend's own statistics are asked for
 * without it. */
#include <stdio.h>
#include <string.h>

#include "pipeline/pipeline.h"
#ifdef RINGFEED_HAVE_CURL
#include "io/remote.h"
#endif

/* A statistics counter: relaxed, as it orders nothing (the threads' counts may be a sample
 * behind; rf_stats promises no snapshot across counters). */
static uint64_t stat_count(_Atomic uint64_t *c)
{
    return atomic_load_explicit(c, memory_order_relaxed);
}

/* The remote client's counters (create's requests and the engine's), 0 for local shards. */
static void remote_stats(const rf_loader *ld, rf_stats *st)
{
#ifdef RINGFEED_HAVE_CURL
    rf_remote *r = ld->remote;
    if (!r)
        return;
    /* relaxed: statistics, like the counters */
    st->remote_requests = atomic_load_explicit(&r->requests, memory_order_relaxed);
    st->remote_retries = atomic_load_explicit(&r->retried, memory_order_relaxed);
    st->remote_bytes = atomic_load_explicit(&r->bytes, memory_order_relaxed);
    st->remote_create_requests = ld->remote_create_requests;
    st->remote_create_bytes = ld->remote_create_bytes;
#else
    (void)ld, (void)st;
#endif
}

void rf_stats_init(rf_stats *st)
{
    memset(st, 0, sizeof *st);
    st->struct_size = sizeof *st;
}

/* The memory-hierarchy fields of rf_stats (docs/tuning.md). */
static void mem_stats(const rf_loader *ld, rf_stats *st)
{
    rf_pc_stats pc;
    rf_pc_stats_get(ld->pc, &pc);
    st->cache_checked_bytes = pc.checked_bytes;
    st->cache_hit_bytes = pc.hit_bytes;
    st->warmed_bytes = pc.warmed_bytes;
    st->odirect = (uint32_t)rf_pc_odirect(ld->pc);
    st->hugepages = (uint32_t)ld->rmem.huge;
    st->numa_node = ld->numa_node;
    st->numa_nodes = ld->numa_nodes;
    rf_backend_stats bs;
    memset(&bs, 0, sizeof bs);
    ld->bops->stats(ld->backend, &bs);
    st->device_pool_reserved_bytes = bs.pool_reserved_bytes;
    st->device_pool_used_bytes = bs.pool_used_bytes;
    st->device_allocs_after_create = bs.device_allocs_after_create;
    st->host_allocs_after_create = bs.host_allocs - ld->host_allocs0;
    st->ring_register_ns = ld->rmem.pin_ns;
    snprintf(st->memory_why, sizeof st->memory_why, "%s", ld->mem_why);
}

int rf_loader_trim(rf_loader *ld, uint64_t keep_bytes)
{
    if (!ld)
        return RF_EINVAL;
    if (pl_forked(ld))
        return pl_fork_error(ld);
    rf_err e = {0};
    int rc = ld->bops->trim(ld->backend, keep_bytes, &e);
    return rc ? pl_set_last(ld, &e) : 0;
}

int rf_loader_stats(const rf_loader *ld, rf_stats *out)
{
    if (!ld || !out || out->struct_size < sizeof(uint32_t))
        return RF_EINVAL;
    if (pl_forked(ld))
        return pl_fork_error(ld);
    rf_stats st;
    rf_stats_init(&st);
    st.io_threads = ld->cfg.io_threads;
    st.decode_threads = ld->cfg.decode_threads;
    st.prefetch_depth = ld->depth;
    snprintf(st.io_engine, sizeof st.io_engine, "%s", ld->iops->name);
    snprintf(st.io_engine_why, sizeof st.io_engine_why, "%s", ld->io_why);
    if (ld->bops->device_kind == RF_DEVICE_CUDA)
        snprintf(st.device, sizeof st.device, "cuda:%d", ld->cfg.device_index);
    else
        snprintf(st.device, sizeof st.device, "host");
    st.pinned = (uint32_t)ld->pinned;
    rf_io_stats io = {0};
    if (ld->io) {
        ld->iops->stats(ld->io, &io);
        st.registered_buffers = (uint32_t)ld->iops->registered(ld->io);
    }
    st.samples_delivered = ld->delivered;
    st.batches_delivered = ld->batches_out;
    st.samples_decoded = stat_count(&((rf_loader *)ld)->decoded);
    st.bytes_read = ld->io_bytes_prev + io.bytes;
    st.reads = ld->io_reads_prev + io.reads;
    st.read_retries = ld->io_retries_prev + io.retries;
    st.io_busy_ns = ld->io_ns_prev + io.busy_ns;
    st.storage_measured = (uint32_t)ld->storage_on;
    if (ld->storage_on)
        st.storage_read_bytes = ld->storage_create + ld->io_storage_prev + io.storage_bytes;
    snprintf(st.storage_why, sizeof st.storage_why, "%s", ld->storage_on ? "" : ld->storage_why);
    st.decode_busy_ns = stat_count(&((rf_loader *)ld)->decode_ns);
    st.copy_busy_ns = stat_count(&((rf_loader *)ld)->copy_ns);
    st.consumer_wait_ns = ld->wait_ns;
    st.wall_ns = rf_now_ns() - ld->created_ns;
    st.epoch = ld->c_epoch;
    st.pinned_bytes = ld->pinned ? ld->ring_bytes : 0;
    st.dct_scaled = stat_count(&((rf_loader *)ld)->dct_scaled);
    st.region_decoded = stat_count(&((rf_loader *)ld)->region_decoded);
    st.recovered = stat_count(&((rf_loader *)ld)->recovered);
    for (uint32_t k = 0; k < RF_RECOVERED_KINDS; k++)
        st.recovered_by_kind[k] = stat_count(&((rf_loader *)ld)->recovered_kind[k]);
    st.gpu_decoded = stat_count(&((rf_loader *)ld)->gpu.decoded);
    st.hw_decoded = stat_count(&((rf_loader *)ld)->gpu.hw_decoded);
    st.gpu_plain_decoded = stat_count(&((rf_loader *)ld)->gpu.plain_decoded);
    st.decode_schedule = ld->sched.mode;
    remote_stats(ld, &st);
    pl_cache_stats(ld, &st);
    /* relaxed: statistics, like the counters */
    st.sched_gpu_permille = atomic_load_explicit(&((rf_loader *)ld)->sched.gpu,
                                                 memory_order_relaxed);
    st.sched_hw_permille = atomic_load_explicit(&((rf_loader *)ld)->sched.hw,
                                                memory_order_relaxed);
    /* acquire: engine_why, which the opener (or start) wrote before publishing NONE */
    st.hw_engines = atomic_load_explicit(&((rf_loader *)ld)->sched.engines,
                                         memory_order_acquire);
    if (st.hw_engines == RF_HW_ENGINES_NONE)
        snprintf(st.hw_engines_why, sizeof st.hw_engines_why, "%s", ld->sched.engine_why);
    st.hw_open_ns = atomic_load_explicit(&((rf_loader *)ld)->sched.open_ns,
                                         memory_order_relaxed);
    pl_lock((rf_loader *)ld);
    st.skipped = ld->skipped;
    memcpy(st.skipped_by_reason, ld->skipped_by, sizeof st.skipped_by_reason);
    pl_unlock((rf_loader *)ld);
    st.nonregular_members = ld->ds.nonregular;
    pl_resume_point(ld, &st.resume_epoch, &(uint64_t){0});
    st.counted_epoch = ld->ep.epoch;
    st.epoch_delivered = ld->ep.delivered;
    st.epoch_skipped = ld->ep.skipped;
    memcpy(st.epoch_skipped_by_reason, ld->ep.skipped_by, sizeof st.epoch_skipped_by_reason);
    st.epoch_total = ld->ep.total;
    st.epoch_final = ld->ep.final;
    mem_stats(ld, &st);
    memcpy(out, &st, RF_MIN((size_t)out->struct_size, sizeof st));
    return 0;
}
