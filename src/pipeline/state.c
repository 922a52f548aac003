/* state.c — what every pipeline file shares: the sticky error and the per-batch bad sample,
 * the fork and stop checks of the public calls, test-hook allocation refusals, the memory
 * sentences of rf_stats, the count of what libjpeg recovered from, the messages that name a
 * sample (shard, key, offset), and the token window of a sample id.
 *
 * DESIGN
 * Runs on any thread: the *_locked functions with mu held, the rest without it. These touch
 * only the loader's error fields (err, last, slot.bad), mem_why and the recovered counters,
 * and read the dataset; they call no other pipeline file (state.c is first in pipeline.h's
 * dependency order). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "loaders/tokens.h"
#include "pipeline/pipeline.h"

/* ---- errors --------------------------------------------------------------------------------*/

/* Record the first worker error; later ones are dropped (the first is the cause). */
void pl_fail_locked(rf_loader *ld, int code, const char *msg)
{
    PL_ASSERT_LOCKED(ld);
    if (ld->err.code == 0) {
        ld->err.code = code;
        snprintf(ld->err.msg, sizeof ld->err.msg, "%s", msg);
    }
    pthread_cond_broadcast(&ld->cv_out);
    pthread_cond_broadcast(&ld->cv_io);
    pthread_cond_broadcast(&ld->cv_dec);
}

void pl_fail(rf_loader *ld, int code, const char *msg)
{
    pl_lock(ld);
    pl_fail_locked(ld, code, msg);
    pl_unlock(ld);
}

/* Fail mode: sample `index` of slot s failed (a data error: this sample's bytes, not the
 * loader). The slot keeps the lowest index; rf_loader_next raises it in batch order. */
void pl_slot_bad_locked(slot *s, uint32_t index, int code, const char *msg)
{
    if (s->bad.code && s->bad_index < index)
        return;
    s->bad.code = code;
    s->bad_index = index;
    snprintf(s->bad.msg, sizeof s->bad.msg, "%s", msg);
}

int pl_set_last(rf_loader *ld, const rf_err *e)
{
    ld->last = *e;
    return e->code;
}

/* A call from a process other than the creator (see rf_loader.pid). */
int pl_forked(const rf_loader *ld) { return getpid() != ld->pid; }

int pl_fork_error(const rf_loader *ld)
{
    rf_err e;
    e.code = RF_EFORK;
    snprintf(e.msg, sizeof e.msg, "this loader belongs to process %d, which created it; process "
             "%d (a fork() child) cannot use it: create a new loader in this process",
             (int)ld->pid, (int)getpid());
    return pl_set_last((rf_loader *)ld, &e);
}

int pl_stopped_error(rf_loader *ld)
{
    return pl_set_last(ld, &(rf_err){.code = RF_ECLOSED,
                                  .msg = "the loader was stopped (rf_loader_stop): it hands "
                                         "out no more batches; destroy it"});
}

int pl_cancelled_error(rf_loader *ld)
{
    return pl_set_last(ld, &(rf_err){.code = RF_ECLOSED,
                                  .msg = "the loader was closed from another thread "
                                         "(rf_loader_cancel): it hands out no more batches"});
}

/* Whether the test hook (src/pipeline/testing.h) refuses the allocation of `bytes` for `what`. */
void pl_count_recovered(rf_loader *ld, uint32_t mask)
{
    if (!mask)
        return;
    /* statistics: relaxed, read only for rf_stats */
    atomic_fetch_add_explicit(&ld->recovered, 1, memory_order_relaxed);
    for (uint32_t k = 0; k < RF_RECOVERED_KINDS; k++)
        if (mask & (1u << k))
            atomic_fetch_add_explicit(&ld->recovered_kind[k], 1, memory_order_relaxed);
}

int pl_alloc_refused(rf_loader *ld, const char *what, size_t bytes)
{
    return ld->hooks.alloc && ld->hooks.alloc(ld->hooks.alloc_ctx, what, bytes);
}

/* Append a sentence to rf_stats.memory_why ("; " between sentences). */
void pl_mem_why(rf_loader *ld, const char *fmt, ...)
{
    size_t n = strlen(ld->mem_why);
    if (n && n + 2 < sizeof ld->mem_why)
        n += (size_t)snprintf(ld->mem_why + n, sizeof ld->mem_why - n, "; ");
    va_list ap;
    va_start(ap, fmt);
    if (n < sizeof ld->mem_why)
        vsnprintf(ld->mem_why + n, sizeof ld->mem_why - n, fmt, ap);
    va_end(ap);
}

void pl_describe_task(const rf_loader *ld, const task *t, char *buf, size_t n)
{
    if (ld->tokens)
        snprintf(buf, n, "%s: token window at offset %llu", ld->ds.files[t->file].path,
                 (unsigned long long)t->req.offset);
    else
        snprintf(buf, n, "%s: sample %s at offset %llu", ld->ds.files[t->file].path,
                 ld->ds.keys + ld->ds.samples[t->sample_id].key,
                 (unsigned long long)t->req.offset);
}

/* "member KEY.png at offset N": the image member of sample sm, whose header is hdr bytes into
 * the sample's span; every per-image decode error starts with it (the thread adds the shard).
 * The extension is the one the sample's image was chosen by (RF_SAMPLE_EXT_RANK in
 * ds.image_exts), as the list spells it. */
void pl_describe_member(const rf_loader *ld, const rf_sample *sm, uint32_t hdr, char *buf,
                            size_t n)
{
    const char *ext = ld->ds.payload_ext ? ld->ds.payload_ext : "jpg";
    int len = (int)strlen(ext);
    uint32_t rank = RF_SAMPLE_EXT_RANK(sm->flags);
    for (const char *p = ld->ds.image_exts; p && rank; rank--) {
        len = (int)strcspn(p, ",");
        ext = p;
        p = p[len] ? p + len + 1 : NULL; /* the ranks were counted on this same list */
    }
    snprintf(buf, n, "member %s.%.*s at offset %llu", ld->ds.keys + sm->key, len, ext,
             (unsigned long long)(sm->offset + hdr));
}

/* ---- token windows (loaders/tokens.c) -------------------------------------------------------*/

/* Token window `id` of `epoch`: its file and byte offset (rf_tokens_window). The sample's seed
 * is drawn from the plan only for RANDOM windows, which start where it says. */
void pl_token_window(const rf_loader *ld, uint64_t id, uint64_t epoch, uint32_t *file,
                     uint64_t *off)
{
    int sequential = ld->cfg.token_windows == RF_WINDOWS_SEQUENTIAL;
    uint64_t seed = sequential ? 0 : rf_plan_sample_seed(&ld->plan, epoch, id);
    rf_tokens_window(&ld->ds, id, sequential, seed, file, off);
}
