/* create.c — rf_loader_create and rf_loader_destroy: open the data set through its format
 * (loaders/: tar, folder, tokens), plan the rank's share (and shard order), take the resume
 * point, choose the backend and the I/O engine, size everything (config.c, ring.c), install
 * the error policy, and start the pipeline (run.c); destroy undoes it in reverse.
 *
 * DESIGN
 * Runs on the caller's thread. Create touches every part of the loader before any other
 * thread exists; destroy stops the threads first (pl_pipeline_stop) and then frees. A loader
 * whose create failed part-way is destroyed the same way, so each step leaves what it made
 * where destroy finds it. Last in pipeline.h's dependency order: it may call any pipeline file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/io.h"
#include "pipeline/pipeline.h"
#ifdef RINGFEED_HAVE_CURL
#include "io/remote.h"
#endif

static int copy_patterns(rf_loader *ld, rf_err *err)
{
    ld->patterns = calloc(ld->cfg.shard_count, sizeof *ld->patterns);
    if (!ld->patterns)
        return rf_seterr(err, RF_ENOMEM, "no memory");
    for (uint32_t i = 0; i < ld->cfg.shard_count; i++) {
        if (!ld->cfg.shards[i] || !(ld->patterns[i] = strdup(ld->cfg.shards[i])))
            return rf_seterr(err, RF_EINVAL, "shard pattern %u is NULL", i);
    }
    ld->cfg.shards = (const char *const *)ld->patterns;
    /* the label's path, like the patterns, must outlive the caller's strings */
    if (ld->cfg.label_json_path &&
        !(ld->cfg.label_json_path = ld->label_json_path = strdup(ld->cfg.label_json_path)))
        return rf_seterr(err, RF_ENOMEM, "no memory");
    if (!(ld->image_exts = strdup(ld->cfg.image_exts)))
        return rf_seterr(err, RF_ENOMEM, "no memory");
    ld->cfg.image_exts = ld->image_exts;
    if (ld->cfg.cache_dir && !(ld->cfg.cache_dir = ld->cache_dir = strdup(ld->cfg.cache_dir)))
        return rf_seterr(err, RF_ENOMEM, "no memory");
    return 0;
}

/* Remote shards and token files (URL patterns) get the loader's client, for the format and
 * the engine. One run reads either files or URLs: the I/O engine is chosen once for all
 * shards, so patterns mixing both are refused. Warming and O_DIRECT work on the page cache,
 * which remote shards do not go through: they are off. */
static int remote_setup(rf_loader *ld, rf_err *err)
{
    uint32_t urls = 0;
    for (uint32_t i = 0; i < ld->cfg.shard_count; i++)
        urls += (uint32_t)rf_path_is_url(ld->cfg.shards[i]);
    if (urls == 0)
        return 0;
    if (urls != ld->cfg.shard_count)
        return rf_seterr(err, RF_EINVAL, "shard patterns mix URLs and local files; one loader "
                         "reads either (%u of %u patterns are URLs)", urls,
                         ld->cfg.shard_count);
    /* A folder source walks a directory tree or reads a list of local paths: neither has a
     * remote form (an http server cannot be listed). Tar shards and token files are objects
     * read by ranges, which the remote client serves. */
    if (ld->cfg.source == RF_SOURCE_FOLDER)
        return rf_seterr(err, RF_EINVAL, "%s: a folder source (RF_SOURCE_FOLDER) reads local "
                         "files only; URLs are read as tar shards or token files",
                         ld->cfg.shards[0]);
#ifdef RINGFEED_HAVE_CURL
    int rc = rf_remote_new(ld->cfg.remote_retries, ld->cfg.remote_timeout_ms, &ld->remote, err);
    if (rc)
        return rc;
    ld->ds.remote = &ld->remote->ops;
    ld->cfg.warm = ld->cfg.odirect = 0;
    return pl_cache_open(ld, err);
#else
    return rf_seterr(err, RF_EINVAL, "%s: this library was built without remote shard "
                     "support (libcurl), so URLs cannot be read", ld->cfg.shards[0]);
#endif
}

static int open_dataset(rf_loader *ld, rf_err *err)
{
    char **paths = NULL;
    uint32_t npaths = 0;
    int rc = remote_setup(ld, err);
    if (rc == 0)
        rc = pl_mix_expand(&ld->mix, &ld->cfg, ld->ds.remote, &paths, &npaths, err);
    if (rc) {
        rf_free_paths(paths, npaths);
        return rc;
    }
    ld->ds.max_name = ld->cfg.max_name_bytes;
    ld->ds.keep_imageless = ld->cfg.on_error == RF_ON_ERROR_SKIP;
    ld->ds.label_ext = rf_label_ext(ld->cfg.label_source);
    ld->ds.tok_seq_len = ld->cfg.seq_len;
    ld->ds.tok_bytes = ld->cfg.token_bytes;
    ld->ds.image_exts = ld->cfg.image_exts;
    rc = pl_mix_open(ld->mix, &ld->cfg, &ld->ds, paths, npaths, err); /* by source */
    rf_free_paths(paths, npaths);
    if (rc)
        return rc;
    if (ld->ds.nsamples == 0)
        return rf_seterr(err, RF_EFORMAT, "the shards hold no samples");
    return 0;
}

/* Shard boundaries for RF_ORDER_SHARD: samples are stored shard after shard. */
static int plan_shards(rf_loader *ld, rf_err *err)
{
    if (ld->cfg.order != RF_ORDER_SHARD)
        return 0;
    uint64_t *starts = calloc((size_t)ld->ds.nfiles + 1, sizeof *starts);
    if (!starts)
        return rf_seterr(err, RF_ENOMEM, "no memory");
    if (ld->tokens) {
        memcpy(starts, ld->ds.tok_first, ((size_t)ld->ds.nfiles + 1) * sizeof *starts);
    } else {
        uint64_t i = 0; /* starts[f]: first sample of file f or later (empty shards allowed) */
        for (uint32_t f = 0; f <= ld->ds.nfiles; f++) {
            while (i < ld->ds.nsamples && ld->ds.samples[i].file < f)
                i++;
            starts[f] = i;
        }
    }
    int rc = rf_plan_set_shards(&ld->plan, starts, ld->ds.nfiles, ld->cfg.shard_window, err);
    free(starts);
    return rc;
}

static int choose_backend(rf_loader *ld, rf_err *err)
{
    uint32_t kind = ld->cfg.device_kind;
    /* CUDA is queried only when it may be used: a host loader never initializes the CUDA
     * runtime, so a process that forks after creating one has no CUDA state to inherit. */
    if (kind == RF_DEVICE_AUTO)
        kind = rf_backend_cuda_count() > 0 ? RF_DEVICE_CUDA : RF_DEVICE_HOST;
    if (kind == RF_DEVICE_CUDA) {
#ifdef RINGFEED_HAVE_CUDA
        ld->bops = ld->cfg.naive ? &rf_backend_cuda_naive : &rf_backend_cuda;
#else
        char why[RF_ERRMSG_MAX / 2];
        rf_backend_cuda_status(why, sizeof why);
        return rf_seterr(err, RF_ENODEV, "device_kind CUDA requested, but %s", why);
#endif
    } else {
        ld->bops = &rf_backend_host;
    }
    int rc = pl_sched_choose(ld, err);
    if (rc || (rc = pl_gpu_choose(ld, err)))
        return rc;
    rc = ld->bops->create(ld->cfg.device_index, ld->depth, &ld->backend, err);
    /* hw_decode_percent: what can be known cheaply is create's error, as before: a backend
     * without hardware decoders, or a libnvjpeg that does not load. The open itself (about
     * 1 s on an H200) is left to the opener thread, as with BALANCE (pl_sched_start). */
    if (rc == 0 && ld->gpu.device && ld->cfg.hw_decode_percent)
        rc = ld->bops->engine_load ? ld->bops->engine_load(err)
                                   : rf_seterr(err, RF_EINVAL, "hw_decode_percent: the %s "
                                               "backend has no hardware JPEG decoder",
                                               ld->bops->name);
    /* The engines open on a thread of their own, off the first batch. */
    if (rc == 0)
        pl_sched_start(ld);
    return rc;
}

/* src/pipeline/testing.h: the test's hook behind the engine's rf_io_complete. */
static int io_fault(void *ctx, const rf_io_req *req, int res)
{
    rf_loader *ld = ctx;
    return ld->hooks.io(ld->hooks.io_ctx, req, res);
}

/* Whether the bytes read from storage can be measured for this data set: the kernel must keep
 * per-thread I/O accounting, and no file may be on a file system it never sees (FUSE). Files
 * opened per read (large folders) are checked through the first one. */
static void storage_setup(rf_loader *ld)
{
    ld->storage_on = rf_io_acct_supported(ld->storage_why, sizeof ld->storage_why);
    for (uint32_t i = 0; ld->storage_on && i < ld->ds.nfiles; i++) {
        const rf_file *f = &ld->ds.files[i];
        if (f->fd >= 0 || i == 0)
            ld->storage_on = rf_io_acct_file_ok(f->fd, f->path, ld->storage_why,
                                                sizeof ld->storage_why);
    }
}

static int choose_io(rf_loader *ld, rf_err *err)
{
    int rc = 0;
#ifdef RINGFEED_HAVE_CURL
    if (ld->remote) {
        ld->iops = &rf_io_curl_ops;
        snprintf(ld->io_why, sizeof ld->io_why, "remote shards: libcurl%s",
                 ld->cfg.io_engine != RF_IO_AUTO ? " (the io_engine asked for reads files)" : "");
    }
#endif
    if (!ld->iops)
        rc = rf_io_select(ld->cfg.io_engine, &ld->iops, ld->io_why, sizeof ld->io_why);
    if (rc)
        return rf_seterr(err, rc, "%s", ld->io_why);
    /* GPU decode reads up to 16 GB/s of JPEG bytes, and one io_uring thread copies ~5 GB/s
     * out of the page cache: one I/O thread per three decode threads, up to 4 (H200: 4 decode
     * threads gave 42k img/s with one, 62k with two; 16 threads 106k with four, 101k with two;
     * 1 decode thread is no faster with a second; docs/gpu-decode.md). */
    if (!ld->cfg.io_threads)
        ld->cfg.io_threads = ld->remote ? 1 : ld->iops != &rf_io_uring_ops ? 4 : !ld->gpu.device ? 1
                                 : RF_MIN(4, (ld->cfg.decode_threads + 2) / 3);
    ld->iop = (rf_io_params){.threads = ld->cfg.io_threads,
                             .queue_depth = ld->cfg.io_queue_depth,
                             .max_retries = !ld->remote ? ld->cfg.io_retries
                                            : ld->hooks.remote_engine_tries
                                                ? ld->hooks.remote_engine_tries - 1
                                                : ld->cfg.remote_retries,
                             .arena = ld->arena,
                             .arena_bytes = ld->arena_bytes,
                             .remote = ld->remote};
    if (ld->remote) {
        ld->storage_on = 0;
        snprintf(ld->storage_why, sizeof ld->storage_why, "remote shards are not read from "
                 "local storage (rf_stats.remote_bytes counts what was fetched)");
    } else {
        storage_setup(ld);
    }
    ld->iop.flags = (ld->storage_on ? RF_IO_ACCOUNT : 0) |
                    (ld->hooks.io_async ? RF_IO_FORCE_ASYNC : 0);
    ld->src = (rf_io_source){.take = pl_io_take, .done = pl_io_done, .ctx = ld,
                             .fault = ld->hooks.io ? io_fault : NULL};
    return 0;
}

static int apply_resume(rf_loader *ld, uint64_t *epoch, uint64_t *base, rf_err *err)
{
    *epoch = ld->cfg.start_epoch;
    *base = 0;
    if (!ld->cfg.resume_state)
        return 0;
    rf_resume r;
    int rc = rf_state_decode(ld->cfg.resume_state, ld->cfg.resume_state_bytes, &r, err);
    if (rc)
        return rc;
    if (r.n != ld->ds.nsamples)
        return rf_seterr(err, RF_ERESUME,
                         "resume state is for a dataset of %llu samples, these shards hold %llu",
                         (unsigned long long)r.n, (unsigned long long)ld->ds.nsamples);
    if (r.order != ld->cfg.order)
        return rf_seterr(err, RF_ERESUME, "resume state was saved with order %u, config has %u",
                         r.order, ld->cfg.order);
    if (r.mix != rf_plan_mix_fingerprint(&ld->plan))
        return rf_seterr(err, RF_ERESUME, "resume state was saved %s: its cursor counts "
                         "positions of another epoch order",
                         !r.mix ? "without mixing, this loader mixes"
                         : !rf_plan_mix_fingerprint(&ld->plan)
                             ? "by a mixing loader, this one does not mix"
                             : "with other sources, weights, epoch_size, replacement or "
                               "class or sample weights");
    if (r.consumed > ld->plan.n)
        return rf_seterr(err, RF_ERESUME, "resume state: consumed %llu > %llu order positions "
                         "per epoch", (unsigned long long)r.consumed,
                         (unsigned long long)ld->plan.n);
    ld->plan.seed = ld->cfg.seed = r.seed;
    *epoch = r.epoch;
    *base = r.consumed;
    return 0;
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
    ld->created_ns = rf_now_ns();
    ld->pid = getpid();
    if (hooks)
        ld->hooks = *hooks;
    memcpy(&ld->cfg, cfg, RF_MIN(sizeof ld->cfg, (size_t)cfg->struct_size));
    ld->depth_auto = !ld->cfg.prefetch_depth;
    pthread_mutex_init(&ld->mu, NULL);
    pthread_cond_init(&ld->cv_io, NULL);
    pthread_cond_init(&ld->cv_dec, NULL);
    /* cv_out on the monotonic clock: next_timeout_ms must not move with the wall clock */
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&ld->cv_out, &ca);
    pthread_condattr_destroy(&ca);
    if ((rc = pl_apply_defaults(&ld->cfg, &err)) || (rc = copy_patterns(ld, &err)) ||
        (rc = pl_fields_setup(ld, &err)))
        goto fail;
    ld->batch = ld->cfg.batch_size;
    ld->depth = ld->cfg.prefetch_depth;
    ld->tokens = ld->cfg.source == RF_SOURCE_TOKENS;
    ld->tf = (rf_transform){.crop = ld->cfg.crop,
                            .height = ld->cfg.image_height,
                            .width = ld->cfg.image_width,
                            .resize_shorter = ld->cfg.resize_shorter,
                            .layout = ld->cfg.layout,
                            .scale_min = ld->cfg.scale_min,
                            .scale_max = ld->cfg.scale_max,
                            .ratio_min = ld->cfg.ratio_min,
                            .ratio_max = ld->cfg.ratio_max,
                            .flip_prob = ld->cfg.flip_prob};
    ld->limits = (rf_decode_limits){.max_pixels = ld->cfg.max_image_pixels,
                                    .max_dim = ld->cfg.max_image_dim,
                                    .max_scans = ld->cfg.max_scans};
    ld->skip = ld->cfg.on_error == RF_ON_ERROR_SKIP;
    ld->policy = ld->skip ? &pl_policy_skip : &pl_policy_fail;
    pl_setup_output(ld);
    /* Scanning tar headers reads from storage (and its readahead takes in more): counted in
     * storage_read_bytes, or the first epoch would show those pages as hits. */
    uint64_t b0 = rf_io_acct_thread_bytes();
    if ((rc = open_dataset(ld, &err)))
        goto fail;
    ld->storage_create = rf_io_acct_thread_bytes() - b0;
#ifdef RINGFEED_HAVE_CURL
    if (ld->remote) { /* relaxed: no other thread counts before the pipeline starts */
        ld->remote_create_requests = atomic_load_explicit(&ld->remote->requests,
                                                          memory_order_relaxed);
        ld->remote_create_bytes = atomic_load_explicit(&ld->remote->bytes, memory_order_relaxed);
    }
#endif
    if ((rc = rf_plan_init(&ld->plan, ld->ds.nsamples, ld->cfg.seed, ld->cfg.order, ld->batch,
                           ld->cfg.drop_last, ld->cfg.remainder, ld->cfg.rank,
                           ld->cfg.world_size, &err)) ||
        (rc = plan_shards(ld, &err)) ||
        (rc = pl_mix_setup(ld->mix, &ld->cfg, &ld->ds, &ld->plan, &err)))
        goto fail;
    uint64_t epoch, base;
    if ((rc = apply_resume(ld, &epoch, &base, &err)) || (rc = choose_backend(ld, &err)) ||
        (rc = pl_mem_setup(ld, &err)) || (rc = pl_alloc_ring_placed(ld, &err)) ||
        (rc = ld->policy->setup(ld, &err)) ||
        (rc = choose_io(ld, &err)) || (rc = pl_cache_setup(ld, &err)) ||
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
    if (pl_forked(ld)) {
        /* A fork() child's copy: deliberately leaked. Its threads do not exist here, `mu` may
         * have been copied locked, and structures may have been copied mid-update by those
         * threads; the io_uring rings and the CUDA context are the parent's. Walking any of it
         * could hang or crash, and closing nothing leaves the parent untouched. The memory is
         * the child's copy-on-write view, returned when the child exits or execs (every
         * descriptor ringfeed opens is O_CLOEXEC). */
        pl_fork_error(ld);
        return;
    }
    pl_pipeline_stop(ld);
    pl_sched_stop(ld); /* before the backend the opener may still be opening engines in */
    if (ld->decs)
        for (uint32_t i = 0; i < ld->cfg.decode_threads; i++)
            rf_decoder_destroy(ld->decs[i]);
    free(ld->decs);
    free(ld->decoders);
    pl_fields_free(ld);
    pl_gpu_free(ld);
    if (ld->slots)
        for (uint32_t i = 0; i < ld->depth; i++) {
            free(ld->slots[i].ids);
            free(ld->slots[i].positions);
            free(ld->slots[i].padding);
            free(ld->slots[i].keys);
        }
    free(ld->slots);
    if (ld->rmem.ptr)
        rf_ringmem_free(ld->bops, ld->backend, &ld->rmem);
    if (ld->backend)
        ld->bops->destroy(ld->backend);
    free(ld->arena);
    free(ld->tasks);
    free(ld->decq);
    free(ld->skst);
    free(ld->skq);
    free(ld->sk_errs);
    rf_pc_destroy(ld->pc); /* before the dataset: it unmaps by file size */
    pl_cache_close(ld);    /* the engine stopped: no read holds a cached copy; before the
                              dataset, whose shards the fills read */
    rf_plan_free(&ld->plan);
    pl_mix_free(ld->mix);
    rf_dataset_free(&ld->ds);
#ifdef RINGFEED_HAVE_CURL
    rf_remote_free(ld->remote); /* after the dataset, whose shards it closed */
#endif
    if (ld->patterns)
        for (uint32_t i = 0; i < ld->cfg.shard_count; i++)
            free(ld->patterns[i]);
    free(ld->patterns);
    free(ld->label_json_path);
    free(ld->image_exts);
    pthread_mutex_destroy(&ld->mu);
    pthread_cond_destroy(&ld->cv_io);
    pthread_cond_destroy(&ld->cv_dec);
    pthread_cond_destroy(&ld->cv_out);
    free(ld);
}
