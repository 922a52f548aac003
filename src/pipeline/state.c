/* state.c — what every pipeline file shares (state.h). Runs on any thread (*_locked with mu
 * held); touches only the core's error fields, slot.bad and the buffer it is given, and calls
 * no other pipeline file. */
#include "pipeline/state.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "loaders/tokens.h"
#include "pipeline/slot.h"

void pl_core_init(pl_core *k, const rf_test_hooks *hooks)
{
    k->pid = getpid();
    if (hooks)
        k->hooks = *hooks;
    pthread_mutex_init(&k->mu, NULL);
    pthread_cond_init(&k->cv_io, NULL);
    pthread_cond_init(&k->cv_dec, NULL);
    pthread_cond_init(&k->cv_gpu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&k->cv_out, &ca);
    pthread_condattr_destroy(&ca);
}

void pl_core_destroy(pl_core *k)
{
    pthread_mutex_destroy(&k->mu);
    pthread_cond_destroy(&k->cv_io);
    pthread_cond_destroy(&k->cv_dec);
    pthread_cond_destroy(&k->cv_out);
    pthread_cond_destroy(&k->cv_gpu);
}

/* ---- errors --------------------------------------------------------------------------------*/

void pl_fail_locked(pl_core *k, int code, const char *msg)
{
    PL_ASSERT_LOCKED(k);
    if (k->err.code == 0) {
        k->err.code = code;
        snprintf(k->err.msg, sizeof k->err.msg, "%s", msg);
    }
    pthread_cond_broadcast(&k->cv_out);
    pthread_cond_broadcast(&k->cv_io);
    pthread_cond_broadcast(&k->cv_dec);
}

void pl_fail(pl_core *k, int code, const char *msg)
{
    pl_lock(k);
    pl_fail_locked(k, code, msg);
    pl_unlock(k);
}

/* A data error: this sample's bytes, not the loader. rf_loader_next raises it in batch order. */
void pl_slot_bad_locked(slot *s, uint32_t index, int code, const char *msg)
{
    if (s->bad.code && s->bad_index < index)
        return;
    s->bad.code = code;
    s->bad_index = index;
    snprintf(s->bad.msg, sizeof s->bad.msg, "%s", msg);
}

int pl_set_last(pl_core *k, const rf_err *e)
{
    k->last = *e;
    return e->code;
}

/* A call from a process other than the creator (see pl_core.pid). */
int pl_forked(const pl_core *k) { return getpid() != k->pid; }

int pl_fork_error(const pl_core *k)
{
    rf_err e;
    e.code = RF_EFORK;
    snprintf(e.msg, sizeof e.msg, "this loader belongs to process %d, which created it; process "
             "%d (a fork() child) cannot use it: create a new loader in this process",
             (int)k->pid, (int)getpid());
    return pl_set_last((pl_core *)k, &e);
}

int pl_stopped_error(pl_core *k)
{
    return pl_set_last(k, &(rf_err){.code = RF_ECLOSED,
                                    .msg = "the loader was stopped (rf_loader_stop): it hands "
                                           "out no more batches; destroy it"});
}

int pl_cancelled_error(pl_core *k)
{
    return pl_set_last(k, &(rf_err){.code = RF_ECLOSED,
                                    .msg = "the loader was closed from another thread "
                                           "(rf_loader_cancel): it hands out no more batches"});
}

int pl_alloc_refused(const pl_core *k, const char *what, size_t bytes)
{
    return k->hooks.alloc && k->hooks.alloc(k->hooks.alloc_ctx, what, bytes);
}

void pl_why_append(char *buf, size_t cap, const char *fmt, ...)
{
    size_t n = strlen(buf);
    if (n && n + 2 < cap)
        n += (size_t)snprintf(buf + n, cap - n, "; ");
    va_list ap;
    va_start(ap, fmt);
    if (n < cap)
        vsnprintf(buf + n, cap - n, fmt, ap);
    va_end(ap);
}

void pl_describe_task(const rf_dataset *ds, int tokens, const task *t, char *buf, size_t n)
{
    if (tokens)
        snprintf(buf, n, "%s: token window at offset %llu", ds->files[t->file].path,
                 (unsigned long long)t->req.offset);
    else
        snprintf(buf, n, "%s: sample %s at offset %llu", ds->files[t->file].path,
                 ds->keys + ds->samples[t->sample_id].key, (unsigned long long)t->req.offset);
}

/* Every per-image decode error starts with this (the thread adds the shard). The extension is
 * the one the sample's image was chosen by (RF_SAMPLE_EXT_RANK in ds.image_exts), as the list
 * spells it. */
void pl_describe_member(const rf_dataset *ds, const rf_sample *sm, uint32_t hdr, char *buf,
                        size_t n)
{
    const char *ext = ds->payload_ext ? ds->payload_ext : "jpg";
    int len = (int)strlen(ext);
    uint32_t rank = RF_SAMPLE_EXT_RANK(sm->flags);
    for (const char *p = ds->image_exts; p && rank; rank--) {
        len = (int)strcspn(p, ",");
        ext = p;
        p = p[len] ? p + len + 1 : NULL; /* the ranks were counted on this same list */
    }
    snprintf(buf, n, "member %s.%.*s at offset %llu", ds->keys + sm->key, len, ext,
             (unsigned long long)(sm->offset + hdr));
}

/* ---- token windows (loaders/tokens.c) -------------------------------------------------------*/

/* The sample's seed is drawn from the plan only for RANDOM windows, which start where it says. */
void pl_token_window(const rf_dataset *ds, const rf_plan *plan, int sequential, uint64_t id,
                     uint64_t epoch, uint32_t *file, uint64_t *off)
{
    uint64_t seed = sequential ? 0 : rf_plan_sample_seed(plan, epoch, id);
    rf_tokens_window(ds, id, sequential, seed, file, off);
}
