/* io_stage.c — the loader's I/O stage (io_stage.h): the engine's choice at create, its start
 * (and pread fallback) and stop, and its part of rf_stats.
 *
 * DESIGN
 * Runs on the creating thread (init), the thread that starts or stops the pipeline (start,
 * stop: no I/O thread runs then), and the consumer's (stats, while the engine runs: the
 * engine's stats are its own to make safe). Calls io_select.c, the engines' ops and io_acct.c. */
#include "io/io_stage.h"

#include <stdio.h>

#ifdef RINGFEED_HAVE_CURL
#include "io/remote.h"
#endif

/* Whether the bytes read from storage can be measured for this data set: the kernel must keep
 * per-thread I/O accounting, and no file may be on a file system it never sees (FUSE). Files
 * opened per read (large folders) are checked through the first one. */
static void storage_setup(rf_io_stage *s, const rf_dataset *ds)
{
    s->storage_on = rf_io_acct_supported(s->storage_why, sizeof s->storage_why);
    for (uint32_t i = 0; s->storage_on && i < ds->nfiles; i++) {
        const rf_file *f = &ds->files[i];
        if (f->fd >= 0 || i == 0)
            s->storage_on = rf_io_acct_file_ok(f->fd, f->path, s->storage_why,
                                               sizeof s->storage_why);
    }
}

int rf_io_stage_init(rf_io_stage *s, const rf_config *c, const rf_io_env *env, rf_err *err)
{
    int rc = 0;
    s->asked = c->io_engine;
#ifdef RINGFEED_HAVE_CURL
    if (env->remote) {
        s->ops = &rf_io_curl_ops;
        snprintf(s->why, sizeof s->why, "remote shards: libcurl%s",
                 c->io_engine != RF_IO_AUTO ? " (the io_engine asked for reads files)" : "");
    }
#endif
    if (!s->ops)
        rc = rf_io_select(c->io_engine, &s->ops, s->why, sizeof s->why);
    if (rc)
        return rf_seterr(err, rc, "%s", s->why);
    /* GPU decode reads up to 16 GB/s of JPEG bytes, and one io_uring thread copies ~5 GB/s
     * out of the page cache: one I/O thread per three decode threads, up to 4
     * (docs/gpu-decode.md). */
    uint32_t threads = c->io_threads;
    if (!threads)
        threads = env->remote ? 1 : s->ops != &rf_io_uring_ops ? 4 : !env->gpu_device ? 1
                  : RF_MIN(4, (c->decode_threads + 2) / 3);
    s->params = (rf_io_params){.threads = threads,
                               .queue_depth = c->io_queue_depth,
                               .max_retries = !env->remote ? c->io_retries
                                              : env->remote_tries ? env->remote_tries - 1
                                                                  : c->remote_retries,
                               .arena = env->arena,
                               .arena_bytes = env->arena_bytes,
                               .remote = env->remote,
                               .rcache = env->rcache};
    if (env->remote) {
        s->storage_on = 0;
        snprintf(s->storage_why, sizeof s->storage_why, "remote shards are not read from "
                 "local storage (rf_stats.remote_bytes counts what was fetched)");
    } else {
        storage_setup(s, env->ds);
    }
    s->params.flags = (s->storage_on ? RF_IO_ACCOUNT : 0) |
                      (env->force_async ? RF_IO_FORCE_ASYNC : 0);
    s->src = env->src;
    return 0;
}

int rf_io_stage_start(rf_io_stage *s, rf_err *err)
{
    int rc = s->ops->start(&s->params, &s->src, &s->engine, err);
    if (rc && s->ops == &rf_io_uring_ops && s->asked == RF_IO_AUTO) {
        /* io_uring passed the probe but a worker ring could not be set up (memlock, limits):
         * fall back for this loader and say why. */
        snprintf(s->why, sizeof s->why, "io_uring worker setup failed (%s): using pread",
                 err->msg);
        s->ops = &rf_io_pread_ops;
        rc = s->ops->start(&s->params, &s->src, &s->engine, err);
    }
    return rc;
}

void rf_io_stage_stop(rf_io_stage *s)
{
    if (!s->engine)
        return;
    rf_io_stats st; /* after the threads finished: what they did while stopping counts */
    s->ops->stop(s->engine, &st);
    s->engine = NULL;
    s->busy_ns += st.busy_ns;
    s->reads += st.reads;
    s->retries += st.retries;
    s->bytes += st.bytes;
    s->storage_bytes += st.storage_bytes;
}

void rf_io_stage_stats(const rf_io_stage *s, rf_stats *st)
{
    st->io_threads = s->params.threads;
    snprintf(st->io_engine, sizeof st->io_engine, "%s", s->ops->name);
    snprintf(st->io_engine_why, sizeof st->io_engine_why, "%s", s->why);
    rf_io_stats io = {0};
    if (s->engine) {
        s->ops->stats(s->engine, &io);
        st->registered_buffers = (uint32_t)s->ops->registered(s->engine);
    }
    st->bytes_read = s->bytes + io.bytes;
    st->reads = s->reads + io.reads;
    st->read_retries = s->retries + io.retries;
    st->io_busy_ns = s->busy_ns + io.busy_ns;
    st->storage_measured = (uint32_t)s->storage_on;
    if (s->storage_on)
        st->storage_read_bytes = s->storage_create + s->storage_bytes + io.storage_bytes;
    snprintf(st->storage_why, sizeof st->storage_why, "%s", s->storage_on ? "" : s->storage_why);
}
