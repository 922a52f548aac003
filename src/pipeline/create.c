/* create.c — rf_loader_create and rf_loader_destroy: open the data set, plan the rank's
 * share, take the resume point, choose the backend, wire the stages, allocate them in the
 * NUMA scope, set up the I/O stage and start the pipeline; destroy undoes it in reverse.
 * Runs on the caller's thread, before any other thread exists; destroy stops the threads
 * first. A loader whose create failed part-way is destroyed the same way, so each step leaves
 * what it made where destroy finds it. The one reader of ld->cfg besides config.c's report. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/numa.h"
#include "pipeline/loader.h"
#include "pipeline/run.h"
#include "pipeline/size_pass.h"

/* The caller's strings outlive its config: the loader's config points at its own copies. */
static int copy_strings(rf_loader *ld, rf_err *err)
{
    rf_config *c = &ld->cfg;
    pl_copies *k = &ld->copies;
    k->patterns = calloc(c->shard_count, sizeof *k->patterns);
    if (!k->patterns)
        return rf_seterr(err, RF_ENOMEM, "no memory");
    for (uint32_t i = 0; i < c->shard_count; i++) {
        if (!c->shards[i] || !(k->patterns[i] = strdup(c->shards[i])))
            return rf_seterr(err, RF_EINVAL, "shard pattern %u is NULL", i);
    }
    c->shards = (const char *const *)k->patterns;
    if (c->label_json_path &&
        !(c->label_json_path = k->label_json_path = strdup(c->label_json_path)))
        return rf_seterr(err, RF_ENOMEM, "no memory");
    if (!(k->image_exts = strdup(c->image_exts)))
        return rf_seterr(err, RF_ENOMEM, "no memory");
    c->image_exts = k->image_exts;
    if (c->cache_dir && !(c->cache_dir = k->cache_dir = strdup(c->cache_dir)))
        return rf_seterr(err, RF_ENOMEM, "no memory");
    if (c->mask && !(c->mask = k->mask = strdup(c->mask)))
        return rf_seterr(err, RF_ENOMEM, "no memory");
    if (c->multi_crop && !(c->multi_crop = k->multi_crop = strndup(c->multi_crop,
                                                                   RF_VIEWS_TEXT_MAX + 1)))
        return rf_seterr(err, RF_ENOMEM, "no memory");
    if (c->size_buckets && !(c->size_buckets = k->size_buckets =
                                 strndup(c->size_buckets, RF_BUCKETS_TEXT_MAX + 1)))
        return rf_seterr(err, RF_ENOMEM, "no memory");
    int vrc = rf_decode_setup_views(&ld->decode, c, err);
    if (vrc)
        return vrc;
    /* the fields list: the stage's own copy, once it checked it */
    const char *given = c->fields;
    c->fields = NULL;
    int rc = pl_fields_setup(&ld->fields, given, c->source, c->max_field_bytes, err);
    c->fields = ld->fields.given;
    return rc ? rc : pl_boxes_setup(&ld->boxes, c, err);
}

static int open_dataset(rf_loader *ld, rf_err *err)
{
    rf_config *c = &ld->cfg;
    char **paths = NULL;
    uint32_t npaths = 0;
    int rc = pl_remote_setup(&ld->remote, &ld->ds, c, err);
    /* Warming and O_DIRECT work on the page cache, which remote shards do not go through. */
    if (ld->remote.client)
        c->warm = c->odirect = 0;
    if (rc == 0) /* source by source */
        rc = pl_mix_expand(&ld->mix, c, ld->ds.remote, &paths, &npaths, err);
    if (rc) {
        rf_free_paths(paths, npaths);
        return rc;
    }
    ld->ds.max_name = c->max_name_bytes;
    ld->ds.keep_imageless = c->on_error == RF_ON_ERROR_SKIP;
    ld->ds.label_ext = rf_label_ext(c->label_source);
    ld->ds.tok_seq_len = c->seq_len;
    ld->ds.tok_bytes = c->token_bytes;
    ld->ds.image_exts = c->image_exts;
    rc = pl_mix_open(&ld->mix, c, &ld->ds, paths, npaths, err); /* source by source */
    ld->copies.paths = paths, ld->copies.npaths = npaths;
    if (rc)
        return rc;
    if (ld->ds.nsamples == 0)
        return rf_seterr(err, RF_EFORMAT, "the shards hold no samples");
    pl_remote_opened(&ld->remote);
    return 0;
}

/* Shard boundaries for RF_ORDER_SHARD: samples are stored shard after shard. */
static int plan_shards(rf_loader *ld, rf_err *err)
{
    if (ld->cfg.order != RF_ORDER_SHARD)
        return 0;
    const rf_dataset *ds = &ld->ds;
    uint64_t *starts = calloc((size_t)ds->nfiles + 1, sizeof *starts);
    if (!starts)
        return rf_seterr(err, RF_ENOMEM, "no memory");
    if (ld->ring.tokens) {
        memcpy(starts, ds->tok_first, ((size_t)ds->nfiles + 1) * sizeof *starts);
    } else {
        uint64_t i = 0; /* starts[f]: first sample of file f or later (empty shards allowed) */
        for (uint32_t f = 0; f <= ds->nfiles; f++) {
            while (i < ds->nsamples && ds->samples[i].file < f)
                i++;
            starts[f] = i;
        }
    }
    int rc = rf_plan_set_shards(&ld->plan, starts, ds->nfiles, ld->cfg.shard_window, err);
    free(starts);
    return rc;
}

static int plan(rf_loader *ld, rf_err *err)
{
    const rf_config *c = &ld->cfg;
    int rc = rf_plan_init(&ld->plan, ld->ds.nsamples, c->seed, c->order, ld->ring.batch,
                          c->drop_last, c->remainder, c->rank, c->world_size, err);
    if (rc == 0)
        rc = plan_shards(ld, err);
    if (rc == 0)
        rc = pl_mix_setup(&ld->mix, &ld->cfg, &ld->ds, &ld->plan, err);
    uint16_t *of = NULL;
    if (rc == 0 && ld->ring.buckets.n &&
        (rc = pl_size_pass(&ld->ds, &ld->ring.buckets, &of, err)) == 0)
        rc = rf_plan_set_buckets(&ld->plan, of, ld->ring.buckets.n, err);
    return rc;
}

static int apply_resume(rf_loader *ld, uint64_t *epoch, uint64_t *base, rf_err *err)
{
    rf_config *c = &ld->cfg;
    *epoch = c->start_epoch;
    *base = 0;
    if (!c->resume_state)
        return 0;
    rf_resume r;
    int rc = rf_state_decode(c->resume_state, c->resume_state_bytes, &r, err);
    if (rc)
        return rc;
    if (r.n != ld->ds.nsamples)
        return rf_seterr(err, RF_ERESUME,
                         "resume state is for a dataset of %llu samples, these shards hold %llu",
                         (unsigned long long)r.n, (unsigned long long)ld->ds.nsamples);
    if (r.order != c->order)
        return rf_seterr(err, RF_ERESUME, "resume state was saved with order %u, config has %u",
                         r.order, c->order);
    uint64_t mix = rf_plan_mix_fingerprint(&ld->plan);
    if (r.mix != mix)
        return rf_seterr(err, RF_ERESUME, "resume state was saved %s: its cursor counts "
                         "positions of another epoch order",
                         ld->plan.bk ? "with other size_buckets, images, batch_size, "
                                       "world_size, drop_last or remainder, or without "
                                       "size_buckets"
                         : !r.mix ? "without mixing, this loader mixes"
                         : !mix ? "by a mixing loader (or one with size_buckets), this one "
                                  "does not mix"
                                : "with other sources, weights, epoch_size, replacement or "
                                  "class or sample weights");
    if ((rc = rf_plan_base_check(&ld->plan, r.consumed, err)) != 0)
        return rc;
    ld->plan.seed = c->seed = r.seed;
    *epoch = r.epoch;
    *base = r.consumed;
    return 0;
}

/* The backend, and the GPU decode stage's choices that depend on it. */
static int choose_backend(rf_loader *ld, rf_err *err)
{
    rf_config *c = &ld->cfg;
    pl_backend *be = &ld->backend;
    uint32_t kind = c->device_kind;
    /* CUDA is queried only when it may be used: a host loader never initializes the CUDA
     * runtime, so a process that forks after creating one has no CUDA state to inherit. */
    if (kind == RF_DEVICE_AUTO)
        kind = rf_backend_cuda_count() > 0 ? RF_DEVICE_CUDA : RF_DEVICE_HOST;
    if (kind == RF_DEVICE_CUDA) {
#ifdef RINGFEED_HAVE_CUDA
        be->ops = c->naive ? &rf_backend_cuda_naive : &rf_backend_cuda;
#else
        char why[RF_ERRMSG_MAX / 2];
        rf_backend_cuda_status(why, sizeof why);
        return rf_seterr(err, RF_ENODEV, "device_kind CUDA requested, but %s", why);
#endif
    } else {
        be->ops = &rf_backend_host;
    }
    int rc = pl_sched_choose(&ld->gpu, c, err);
    if (rc || (rc = pl_gpu_choose(&ld->gpu, err)))
        return rc;
    /* the copy moves each sample's views as one row; the conversion kernels know one size */
    if (ld->decode.views.n && be->ops->device_kind == RF_DEVICE_CUDA &&
        c->dtype != RF_DTYPE_UINT8)
        return rf_seterr(err, RF_EINVAL, "multi_crop on the CUDA backend delivers uint8 views; "
                         "set dtype uint8 and normalize on the device (ringfeed.transforms), "
                         "or use the host backend, which converts each view");
    rc = be->ops->create(c->device_index, ld->ring.depth, &be->b, err);
    /* hw_decode_percent: what can be known cheaply (no hardware decoders, a libnvjpeg that
     * does not load) is create's error; the open itself is the opener thread's. */
    if (rc == 0 && ld->gpu.device && c->hw_decode_percent)
        rc = be->ops->engine_load ? be->ops->engine_load(err)
                                  : rf_seterr(err, RF_EINVAL, "hw_decode_percent: the %s "
                                              "backend has no hardware JPEG decoder",
                                              be->ops->name);
    if (rc == 0)
        pl_sched_start(&ld->gpu);
    /* The kernels' packets start from sync-point index entries (the engines take whole files) */
    pl_gpu *g = &ld->gpu;
    if (rc == 0 && c->sync_index != RF_SYNC_INDEX_OFF &&
        (c->gpu_decode || g->sched.mode == RF_SCHEDULE_BALANCE))
        rc = pl_sync_create(&ld->ds, ld->copies.paths, ld->copies.npaths, c->cache_dir,
                            c->sync_index == RF_SYNC_INDEX_BUILD, &g->sync, err);
    return rc;
}

/* The page cache, the warm cursor and the NUMA node, in the order memory_why tells them. */
static int memory_setup(rf_loader *ld, rf_err *err)
{
    const rf_config *c = &ld->cfg;
    pl_mem *m = &ld->mem;
    int rc = pl_mem_cache(m, &ld->ds, (int)c->odirect, ld->ring.tokens, &ld->io.storage_create,
                          err);
    if (rc)
        return rc;
    pl_dispatch_init(&ld->d, c, &ld->core, &ld->ring, &ld->plan, &ld->ds, m->pc, &ld->remote,
                     &ld->gpu, &ld->submit,
                     c->on_error == RF_ON_ERROR_SKIP ? &pl_policy_skip : &pl_policy_fail,
                     &ld->skip);
    pl_warm_init(&ld->d.warm, (int)c->warm, c->warm_bytes, &ld->plan, &ld->ds, m->pc,
                 ld->ring.tokens, ld->d.sequential, ld->ring.stage_bytes, m->why, sizeof m->why);
    pl_mem_numa(m, c->numa, &ld->backend);
    return 0;
}

/* The stages' memory, inside a scope on the NUMA node (inherited placement). The device pool
 * gets two batches of slack beyond the ring (a slow consumer stream delays reuse) and per copy
 * stream the temporaries (pl_gpu_temp_bytes). */
static int alloc_stages(rf_loader *ld, rf_err *err)
{
    pl_ring *r = &ld->ring;
    r->stride = pl_gpu_stride(&ld->gpu);
    int rc = pl_ring_alloc(r, &ld->core, &ld->backend, pl_gpu_ring_bytes(&ld->gpu),
                           (int)ld->cfg.hugepages, (int)ld->cfg.naive, &ld->mem, err);
    if (rc)
        return rc;
    pl_gpu_slots_init(&ld->gpu);
    if ((rc = pl_fields_alloc(&ld->fields, r, &ld->core, err)) ||
        (rc = pl_boxes_alloc(&ld->boxes, r, &ld->core, err)) ||
        (rc = pl_dispatch_alloc(&ld->d, &ld->cfg, err)) || (rc = pl_pool_alloc(&ld->pool, err)))
        return rc;
    uint32_t B = r->batch, depth = r->depth;
    int cv = r->conv.kind != RF_CONV_NONE;
    size_t staged = (size_t)B * r->stride, outs = (size_t)B * (cv ? r->out_bytes : r->stage_bytes);
    size_t temp = ld->gpu.device ? pl_gpu_temp_bytes(&ld->gpu, staged, cv) : cv ? staged : 0;
    const pl_backend *be = &ld->backend;
    if (be->ops->device_kind == RF_DEVICE_CUDA &&
        pl_alloc_refused(&ld->core, "device pool", (size_t)(depth + 2) * outs))
        return rf_seterr(err, RF_ENOMEM, "cannot reserve the %zu-byte device pool on cuda:%d "
                         "(%u batches x %zu bytes): out of memory (refused by a test hook)",
                         (size_t)(depth + 2) * outs, ld->cfg.device_index, depth + 2, outs);
    return be->ops->reserve(be->b, depth + 2, outs, B, temp, err);
}

static int alloc_stages_placed(rf_loader *ld, rf_err *err)
{
    rf_numa_scope sc;
    char why[96];
    rf_numa_enter(ld->mem.numa_node, &sc, why, sizeof why);
    int rc = alloc_stages(ld, err);
    rf_numa_leave(&sc);
    rf_backend_stats bs;
    memset(&bs, 0, sizeof bs);
    ld->backend.ops->stats(ld->backend.b, &bs);
    ld->mem.host_allocs0 = bs.host_allocs;
    return rc;
}

/* src/pipeline/testing.h: the test's hook behind the engine's rf_io_complete (ctx: the
 * dispatcher, the engine's source). */
static int io_fault(void *ctx, const rf_io_req *req, int res)
{
    const rf_test_hooks *h = &((pl_dispatch *)ctx)->core->hooks;
    return h->io(h->io_ctx, req, res);
}

static int io_setup(rf_loader *ld, rf_err *err)
{
    const rf_test_hooks *h = &ld->core.hooks;
    rf_io_env env = {.remote = ld->remote.client,
                     .rcache = ld->remote.cache,
                     .ds = &ld->ds,
                     .arena = ld->d.arena,
                     .arena_bytes = ld->d.arena_bytes,
                     .gpu_device = ld->gpu.device,
                     .remote_tries = h->remote_engine_tries,
                     .force_async = h->io_async,
                     .src = {.take = pl_io_take, .done = pl_io_done, .ctx = &ld->d,
                             .fault = h->io ? io_fault : NULL}};
    int rc = rf_io_stage_init(&ld->io, &ld->cfg, &env, err);
    ld->cfg.io_threads = ld->io.params.threads; /* AUTO resolved, as rf_loader_config says */
    return rc;
}

/* Each stage's own state from the resolved config, and the neighbours it talks to. */
static void init_stages(rf_loader *ld)
{
    const rf_config *c = &ld->cfg;
    pl_ring_shape(&ld->ring, c, &ld->decode.views);
    pl_gpu_init(&ld->gpu, c, &ld->core, &ld->ring, &ld->backend, &ld->ds, &ld->plan,
                &ld->decode, &ld->counters,
                c->on_error == RF_ON_ERROR_SKIP ? &pl_policy_skip : &pl_policy_fail, &ld->d);
    ld->submit = (pl_submit){.core = &ld->core, .ring = &ld->ring, .gpu = &ld->gpu,
                             .backend = &ld->backend, .counters = &ld->counters};
    pl_pool_init(&ld->pool, c, &ld->core, &ld->d, &ld->ring, &ld->ds, &ld->fields, &ld->gpu,
                 &ld->counters, &ld->decode, &ld->mix);
    ld->pool.boxes = &ld->boxes;
    ld->c.epochs = c->epochs;
    ld->c.timeout_ms = c->next_timeout_ms;
    ld->c.device_index = c->device_index;
}

static int create_loader(const rf_config *cfg, const rf_test_hooks *hooks, rf_loader **out,
                         char *out_error, size_t error_len)
{
    rf_err err = {0};
    int rc;
    if (out)
        *out = NULL;
    if (!cfg || !out) {
        rc = rf_seterr(&err, RF_EINVAL, "cfg and out must not be NULL");
        goto report;
    }
    rf_loader *ld = calloc(1, sizeof *ld);
    if (!ld) {
        rc = rf_seterr(&err, RF_ENOMEM, "no memory for the loader");
        goto report;
    }
    ld->counters.created_ns = rf_now_ns();
    pl_core_init(&ld->core, hooks);
    memcpy(&ld->cfg, cfg, RF_MIN(sizeof ld->cfg, (size_t)cfg->struct_size));
    ld->ring.depth_auto = !ld->cfg.prefetch_depth;
    if ((rc = pl_apply_defaults(&ld->cfg, &err)) || (rc = copy_strings(ld, &err)))
        goto fail;
    init_stages(ld);
    /* Scanning tar headers reads from storage (and its readahead takes in more): counted in
     * storage_read_bytes, or the first epoch would show those pages as hits. */
    uint64_t b0 = rf_io_acct_thread_bytes();
    if ((rc = open_dataset(ld, &err)))
        goto fail;
    ld->io.storage_create = rf_io_acct_thread_bytes() - b0;
    uint64_t epoch, base;
    if ((rc = plan(ld, &err)) || (rc = apply_resume(ld, &epoch, &base, &err)) ||
        (rc = choose_backend(ld, &err)))
        goto fail;
    /* the schedule resolved dct_scaling, and with it the decoders' scale */
    rf_decode_setup_init(&ld->decode, &ld->cfg);
    pl_skip_init(&ld->skip, ld->cfg.max_consecutive_skips, ld->gpu.late);
    if ((rc = memory_setup(ld, &err)) || (rc = alloc_stages_placed(ld, &err)) ||
        (rc = ld->d.policy->setup(&ld->d, &err)) || (rc = io_setup(ld, &err)) ||
        (rc = pl_cache_setup(&ld->remote, &ld->ds, &err)) ||
        (rc = pl_pipeline_start_placed(ld, epoch, base, &err)))
        goto fail;
    *out = ld;
    return 0;
fail:
    rf_loader_destroy(ld);
report:
    rf_url_scrub(err.msg); /* no URL's credentials in a message, whichever stage wrote it */
    if (out_error && error_len)
        snprintf(out_error, error_len, "%s", err.msg);
    return rc;
}

int rf_loader_create(const rf_config *cfg, rf_loader **out, char *out_error, size_t error_len)
{
    return create_loader(cfg, NULL, out, out_error, error_len);
}

int rf_loader_create_faulty(const rf_config *cfg, rf_fault_fn fault, void *ctx, rf_loader **out,
                            char *out_error, size_t error_len)
{
    rf_test_hooks h = {.io = fault, .io_ctx = ctx};
    return create_loader(cfg, &h, out, out_error, error_len);
}

int rf_loader_create_hooked(const rf_config *cfg, const rf_test_hooks *hooks, rf_loader **out,
                            char *out_error, size_t error_len)
{
    return create_loader(cfg, hooks, out, out_error, error_len);
}

void rf_loader_destroy(rf_loader *ld)
{
    if (!ld)
        return;
    if (pl_forked(&ld->core)) {
        /* A fork() child's copy: deliberately leaked. Its threads do not exist here, `mu` may
         * have been copied locked mid-update, and the io_uring rings and CUDA context are the
         * parent's: walking any of it could hang or crash. The memory is the child's
         * copy-on-write view; every descriptor ringfeed opens is O_CLOEXEC. */
        pl_fork_error(&ld->core);
        return;
    }
    pl_pipeline_stop(ld);
    pl_sched_stop(&ld->gpu); /* before the backend the opener may still be opening engines in */
    pl_pool_free(&ld->pool);
    pl_fields_free(&ld->fields, &ld->ring);
    pl_boxes_free(&ld->boxes, &ld->ring);
    pl_gpu_free(&ld->gpu);
    pl_ring_free(&ld->ring, &ld->backend);
    if (ld->backend.b)
        ld->backend.ops->destroy(ld->backend.b);
    pl_dispatch_free(&ld->d);
    pl_skip_free(&ld->skip);
    rf_pc_destroy(ld->mem.pc);            /* before the dataset: it unmaps by file size */
    pl_cache_close(&ld->remote, &ld->ds); /* the engine stopped: no read holds a cached copy;
                                             before the dataset, whose shards the fills read */
    rf_plan_free(&ld->plan);
    pl_mix_free(&ld->mix);
    rf_dataset_free(&ld->ds);
    pl_remote_free(&ld->remote); /* after the dataset, whose shards it closed */
    pl_copies *k = &ld->copies;
    if (k->patterns)
        for (uint32_t i = 0; i < ld->cfg.shard_count; i++)
            free(k->patterns[i]);
    free(k->patterns);
    rf_free_paths(k->paths, k->npaths);
    free(k->label_json_path);
    free(k->image_exts);
    free(k->cache_dir);
    free(k->mask);
    free(k->multi_crop);
    free(k->size_buckets);
    pl_core_destroy(&ld->core);
    free(ld);
}
