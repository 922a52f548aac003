/* stats.c — rf_loader_stats, rf_stats_init, rf_loader_trim, on the consumer's thread:
 * atomics read without mu, skip counts under mu, engine and backend statistics without it. */
#include <stdio.h>
#include <string.h>

#include "pipeline/consumer.h"
#include "pipeline/loader.h"

/* A statistics counter: relaxed, as it orders nothing (the threads' counts may be a sample
 * behind; rf_stats promises no snapshot across counters). */
static uint64_t stat_count(const _Atomic uint64_t *c)
{
    return atomic_load_explicit((_Atomic uint64_t *)c, memory_order_relaxed);
}

void rf_stats_init(rf_stats *st)
{
    memset(st, 0, sizeof *st);
    st->struct_size = sizeof *st;
}

/* The memory-hierarchy fields of rf_stats (docs/tuning.md). */
static void mem_stats(const rf_loader *ld, rf_stats *st)
{
    const pl_mem *m = &ld->mem;
    rf_pc_stats pc;
    rf_pc_stats_get(m->pc, &pc);
    st->cache_checked_bytes = pc.checked_bytes;
    st->cache_hit_bytes = pc.hit_bytes;
    st->warmed_bytes = pc.warmed_bytes;
    st->odirect = (uint32_t)rf_pc_odirect(m->pc);
    st->hugepages = (uint32_t)ld->ring.rmem.huge;
    st->numa_node = m->numa_node;
    st->numa_nodes = m->numa_nodes;
    rf_backend_stats bs;
    memset(&bs, 0, sizeof bs);
    ld->backend.ops->stats(ld->backend.b, &bs);
    st->device_pool_reserved_bytes = bs.pool_reserved_bytes;
    st->device_pool_used_bytes = bs.pool_used_bytes;
    st->device_allocs_after_create = bs.device_allocs_after_create;
    st->host_allocs_after_create = bs.host_allocs - m->host_allocs0;
    st->ring_register_ns = ld->ring.rmem.pin_ns;
    snprintf(st->memory_why, sizeof st->memory_why, "%s", m->why);
}

/* The decode stages' counts and the scheduler's state. */
static void decode_stats(const rf_loader *ld, rf_stats *st)
{
    const pl_counters *n = &ld->counters;
    const pl_gpu *g = &ld->gpu;
    st->samples_decoded = stat_count(&n->decoded);
    st->decode_busy_ns = stat_count(&n->decode_ns);
    st->copy_busy_ns = stat_count(&n->copy_ns);
    st->dct_scaled = stat_count(&n->dct_scaled);
    st->region_decoded = stat_count(&n->region_decoded);
    st->recovered = stat_count(&n->recovered);
    for (uint32_t k = 0; k < RF_RECOVERED_KINDS; k++)
        st->recovered_by_kind[k] = stat_count(&n->recovered_kind[k]);
    st->gpu_decoded = stat_count(&g->decoded);
    st->hw_decoded = stat_count(&g->hw_decoded);
    st->gpu_plain_decoded = stat_count(&g->plain_decoded);
    st->decode_schedule = g->sched.mode;
    /* relaxed: statistics, like the counters */
    st->sched_gpu_permille = atomic_load_explicit((_Atomic uint32_t *)&g->sched.gpu,
                                                  memory_order_relaxed);
    st->sched_hw_permille = atomic_load_explicit((_Atomic uint32_t *)&g->sched.hw,
                                                 memory_order_relaxed);
    /* acquire: engine_why, which the opener (or start) wrote before publishing NONE */
    st->hw_engines = atomic_load_explicit((_Atomic uint32_t *)&g->sched.engines,
                                          memory_order_acquire);
    if (st->hw_engines == RF_HW_ENGINES_NONE)
        snprintf(st->hw_engines_why, sizeof st->hw_engines_why, "%s", g->sched.engine_why);
    st->hw_open_ns = atomic_load_explicit((_Atomic uint64_t *)&g->sched.open_ns,
                                          memory_order_relaxed);
    pl_sync_counts sc;
    pl_sync_counts_get(g->sync, &sc);
    st->sync_indexed = sc.indexed, st->sync_stale = sc.stale;
    st->sync_built = sc.built, st->sync_loaded = sc.loaded;
}

int rf_loader_trim(rf_loader *ld, uint64_t keep_bytes)
{
    if (!ld)
        return RF_EINVAL;
    if (pl_forked(&ld->core))
        return pl_fork_error(&ld->core);
    rf_err e = {0};
    int rc = ld->backend.ops->trim(ld->backend.b, keep_bytes, &e);
    return rc ? pl_set_last(&ld->core, &e) : 0;
}

int rf_loader_stats(const rf_loader *ld, rf_stats *out)
{
    if (!ld || !out || out->struct_size < sizeof(uint32_t))
        return RF_EINVAL;
    if (pl_forked(&ld->core))
        return pl_fork_error(&ld->core);
    const pl_consumer *c = &ld->c;
    rf_stats st;
    rf_stats_init(&st);
    st.decode_threads = ld->pool.nthreads;
    st.prefetch_depth = ld->ring.depth;
    if (ld->backend.ops->device_kind == RF_DEVICE_CUDA)
        snprintf(st.device, sizeof st.device, "cuda:%d", c->device_index);
    else
        snprintf(st.device, sizeof st.device, "host");
    st.pinned = (uint32_t)ld->ring.pinned;
    rf_io_stage_stats(&ld->io, &st);
    st.samples_delivered = c->delivered;
    st.batches_delivered = c->batches_out;
    st.consumer_wait_ns = c->wait_ns;
    st.wall_ns = rf_now_ns() - ld->counters.created_ns;
    st.epoch = c->epoch;
    st.pinned_bytes = ld->ring.pinned ? ld->ring.bytes : 0;
    decode_stats(ld, &st);
    pl_remote_stats(&ld->remote, &st);
    pl_lock((pl_core *)&ld->core);
    st.skipped = ld->skip.skipped;
    memcpy(st.skipped_by_reason, ld->skip.skipped_by, sizeof st.skipped_by_reason);
    pl_unlock((pl_core *)&ld->core);
    st.nonregular_members = ld->ds.nonregular;
    pl_resume_point(ld, &st.resume_epoch, &(uint64_t){0});
    st.counted_epoch = c->ep.epoch;
    st.epoch_delivered = c->ep.delivered;
    st.epoch_skipped = c->ep.skipped;
    memcpy(st.epoch_skipped_by_reason, c->ep.skipped_by, sizeof st.epoch_skipped_by_reason);
    st.epoch_total = c->ep.total;
    st.epoch_final = c->ep.final;
    mem_stats(ld, &st);
    memcpy(out, &st, RF_MIN((size_t)out->struct_size, sizeof st));
    return 0;
}
