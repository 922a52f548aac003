/* loader.c — the pipeline: plan -> I/O engine -> decode pool -> copy -> consumer.
 *
 * DESIGN
 * Threads: the I/O engine's threads (io_uring or pread), `decode_threads` decode threads, and
 * the consumer (the caller of rf_loader_next). One mutex `mu` guards the dispatch cursor, the
 * staging arena, the task ring, the decode queue and the slot states; per-sample work (reading,
 * decoding, resizing) happens outside it.
 *
 * Flow, one direction:
 *  1. take() (I/O thread) walks the plan in order: for the next batch it claims ring slot
 *     seq % depth (must be FREE: this is the backpressure), then for each sample it claims a
 *     task (a ring of `ntasks` in dispatch order) and a staging span of the arena, and emits a
 *     read request for the sample's byte span.
 *  2. done() (I/O thread) queues the task for decode, or records the error.
 *  3. A decode thread locates the image and label in the span, decodes/crops/resizes straight
 *     into slot[i] of the batch, frees the staging span (the arena tail advances in dispatch
 *     order over finished tasks), and when it was the batch's last sample submits the copy and
 *     marks the slot READY.
 *  4. rf_loader_next() waits for slot (deliver_seq % depth) to be READY with the expected seq,
 *     leases it; rf_loader_release() returns it (after the backend says the host memory may be
 *     overwritten) and wakes the dispatcher.
 * Who wakes whom: cv_io (dispatcher waits for a FREE slot, a task or arena space), cv_dec
 * (decode threads wait for queued tasks), cv_out (consumer waits for READY or an error).
 * Order is decided by the plan alone, so thread counts and timing never change the batches.
 * Errors on any thread are sticky: the first is kept and every later rf_loader_next returns it.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "convert.h"
#include "dataset.h"
#include "decode.h"
#include "io.h"
#include "plan.h"
#include "tar.h"

enum slot_state { SLOT_FREE, SLOT_FILLING, SLOT_READY, SLOT_LEASED };

typedef struct slot {
    int state;
    uint64_t seq;             /* global batch number (across epochs) */
    _Atomic uint32_t pending; /* samples not yet decoded */
    uint8_t *stage;           /* batch_size * stage_bytes: what decode/reads write (pinned) */
    uint8_t *out;             /* host backend with a conversion: batch_size * out_bytes */
    int32_t *labels;          /* batch_size, pinned (copied to the device) */
    uint64_t *ids, *positions;
    uint8_t *padding;
    const char **keys;
    rf_devbatch dev;
    rf_batch batch;
} slot;

typedef struct task {
    rf_io_req req;
    uint64_t seq;        /* dispatch order: task ring index is seq % ntasks */
    uint64_t sample_id;
    uint64_t aug_seed;
    uint64_t arena_end;  /* virtual arena position after this task's span */
    uint32_t file;       /* for messages */
    int raw;             /* tokens: read straight into the slot, no decode */
    uint32_t slot, index;
    _Atomic int finished;
} task;

struct rf_loader {
    rf_config cfg;
    char **patterns;
    rf_dataset ds;
    rf_plan plan;
    rf_transform tf;
    rf_decode_limits limits;
    uint64_t stage_bytes;  /* one sample as decoded or read (uint8 NHWC image, raw tokens) */
    uint64_t out_bytes;    /* one sample as the consumer sees it */
    rf_convert_desc conv;  /* per-batch conversion (count-dependent fields set per batch) */
    int host_convert;      /* host backend converts per sample on the CPU */
    uint32_t out_dtype;
    int tokens;            /* RF_SOURCE_TOKENS: samples are windows computed on the fly */
    uint64_t *tok_first;   /* tokens: first window id of each file (nfiles + 1 entries) */
    uint32_t batch, depth, ntasks;
    const rf_backend_ops *bops;
    rf_backend *backend;
    const rf_io_ops *iops;
    rf_io_engine *io;
    rf_io_params iop;
    rf_io_source src;
    char io_why[160];

    uint8_t *ring;         /* all slots' images + labels, one allocation */
    size_t ring_bytes;
    int pinned;
    slot *slots;

    uint8_t *arena;        /* staging for reads */
    uint64_t arena_bytes;
    uint64_t arena_head, arena_tail; /* virtual positions (monotonic) */
    task *tasks;
    uint64_t task_head, task_tail;   /* dispatch seq of next new task / oldest live task */
    uint32_t *decq;        /* decode queue of task ring indices, capacity ntasks */
    uint64_t decq_head, decq_tail;

    pthread_mutex_t mu;
    pthread_cond_t cv_io, cv_dec, cv_out;
    int stop;
    pthread_t *decoders;
    uint32_t ndecoders;
    rf_decoder **decs;
    int running;

    /* dispatcher cursor */
    uint64_t d_seq, d_epoch, d_k; /* batch seq, its epoch, batch index in epoch */
    uint32_t d_j, d_count;        /* next sample in the batch, batch size */
    uint64_t d_epochs_left;       /* 0 = forever */
    int d_done;

    /* consumer cursor */
    uint64_t c_seq, c_epoch, c_k, c_base, c_batches;
    uint64_t c_epochs_done;
    int c_done;
    uint32_t leased;

    rf_err err;          /* sticky worker error */
    rf_err last;         /* detail for rf_last_error */

    _Atomic uint64_t decode_ns, copy_ns, decoded, dct_scaled;
    uint64_t wait_ns, delivered, batches_out, created_ns;
    uint64_t io_ns_prev, io_reads_prev, io_retries_prev, io_bytes_prev;
};

/* ---- errors --------------------------------------------------------------------------------*/

/* Record the first worker error; later ones are dropped (the first is the cause). */
static void fail_locked(rf_loader *ld, int code, const char *msg)
{
    if (ld->err.code == 0) {
        ld->err.code = code;
        snprintf(ld->err.msg, sizeof ld->err.msg, "%s", msg);
    }
    pthread_cond_broadcast(&ld->cv_out);
    pthread_cond_broadcast(&ld->cv_io);
    pthread_cond_broadcast(&ld->cv_dec);
}

static void fail(rf_loader *ld, int code, const char *msg)
{
    pthread_mutex_lock(&ld->mu);
    fail_locked(ld, code, msg);
    pthread_mutex_unlock(&ld->mu);
}

static int set_last(rf_loader *ld, const rf_err *e)
{
    ld->last = *e;
    return e->code;
}

/* ---- dispatch (I/O threads) ----------------------------------------------------------------*/

static void plan_next_epoch_locked(rf_loader *ld)
{
    if (ld->d_epochs_left == 1) {
        ld->d_done = 1;
        return;
    }
    if (ld->d_epochs_left > 1)
        ld->d_epochs_left--;
    ld->d_epoch++;
    rf_plan_epoch(&ld->plan, ld->d_epoch, 0);
    ld->d_k = 0;
}

/* Claim the arena span for `len` bytes; returns the physical offset or UINT64_MAX when full. */
static uint64_t arena_alloc_locked(rf_loader *ld, uint32_t len, uint64_t *end)
{
    uint64_t head = ld->arena_head, phys = head % ld->arena_bytes;
    if (phys + len > ld->arena_bytes) { /* no wrap inside a span: skip the tail end */
        head += ld->arena_bytes - phys;
        phys = 0;
    }
    if (head + len - ld->arena_tail > ld->arena_bytes)
        return UINT64_MAX;
    ld->arena_head = head + len;
    *end = head + len;
    return phys;
}

/* Token window `id` of `epoch`: its file and byte offset. Window w of a file starts at w*L
 * (SEQUENTIAL) or at a start drawn uniformly over the file's valid starts from the sample's
 * seed (RANDOM), so windows never cross a file boundary. */
static void token_window(const rf_loader *ld, uint64_t id, uint64_t epoch, uint32_t *file,
                         uint64_t *off)
{
    uint32_t lo = 0, hi = ld->ds.nfiles; /* find f with tok_first[f] <= id < tok_first[f+1] */
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        if (ld->tok_first[mid] <= id)
            lo = mid;
        else
            hi = mid;
    }
    uint64_t L = ld->cfg.seq_len, tb = ld->cfg.token_bytes, start;
    if (ld->cfg.token_windows == RF_WINDOWS_SEQUENTIAL) {
        start = (id - ld->tok_first[lo]) * L;
    } else {
        uint64_t ntok = ld->ds.files[lo].size / tb;
        rf_rng r;
        rf_rng_seed(&r, rf_plan_sample_seed(&ld->plan, epoch, id));
        start = rf_rng_below(&r, ntok - L); /* starts 0 .. ntok-L-1 keep L+1 tokens */
    }
    *file = lo;
    *off = start * tb;
}

/* Prepare the next task of the plan; returns NULL when blocked on a resource or done. */
static task *dispatch_one_locked(rf_loader *ld)
{
    if (ld->d_done || ld->err.code)
        return NULL;
    slot *s = &ld->slots[ld->d_seq % ld->depth];
    if (ld->d_j == 0) {
        if (s->state != SLOT_FREE)
            return NULL;
        ld->d_count = rf_plan_batch_count(&ld->plan, ld->d_k);
    }
    if (ld->task_head - ld->task_tail >= ld->ntasks)
        return NULL;
    uint64_t id, pos, off, end = ld->arena_head;
    uint8_t pad;
    uint32_t len, file;
    rf_plan_sample(&ld->plan, ld->d_k * ld->batch + ld->d_j, &id, &pos, &pad);
    uint8_t *dst;
    if (ld->tokens) {
        token_window(ld, id, ld->d_epoch, &file, &off);
        len = (uint32_t)ld->stage_bytes;
        dst = s->stage + (uint64_t)ld->d_j * ld->stage_bytes;
    } else {
        const rf_sample *sm = &ld->ds.samples[id];
        uint64_t phys = arena_alloc_locked(ld, sm->length, &end);
        if (phys == UINT64_MAX)
            return NULL;
        file = sm->file;
        off = sm->offset;
        len = sm->length;
        dst = ld->arena + phys;
    }
    if (ld->d_j == 0) {
        s->state = SLOT_FILLING;
        s->seq = ld->d_seq;
        atomic_store(&s->pending, ld->d_count);
        s->batch.count = ld->d_count;
        s->batch.epoch = ld->d_epoch;
        s->batch.index = ld->d_k;
    }
    uint32_t i = ld->d_j;
    s->ids[i] = id;
    s->positions[i] = pos;
    s->padding[i] = pad;
    s->keys[i] = ld->tokens ? ld->ds.files[file].path : ld->ds.keys + ld->ds.samples[id].key;
    task *t = &ld->tasks[ld->task_head % ld->ntasks];
    t->seq = ld->task_head++;
    t->sample_id = id;
    t->aug_seed = rf_plan_sample_seed(&ld->plan, ld->d_epoch, id);
    t->arena_end = end;
    t->slot = (uint32_t)(ld->d_seq % ld->depth);
    t->index = i;
    t->file = file;
    t->raw = ld->tokens;
    atomic_store(&t->finished, 0);
    t->req = (rf_io_req){.fd = ld->ds.files[file].fd, .len = len, .offset = off, .dst = dst, .user = t};
    if (++ld->d_j == ld->d_count) {
        ld->d_j = 0;
        ld->d_seq++;
        if (++ld->d_k == ld->plan.batches)
            plan_next_epoch_locked(ld);
    }
    return t;
}

static int io_take(void *ctx, rf_io_req **reqs, int max, int block)
{
    rf_loader *ld = ctx;
    pthread_mutex_lock(&ld->mu);
    int n = 0;
    for (;;) {
        if (ld->stop) {
            n = -1;
            break;
        }
        task *t;
        while (n < max && (t = dispatch_one_locked(ld)))
            reqs[n++] = &t->req;
        if (n > 0 || !block)
            break;
        pthread_cond_wait(&ld->cv_io, &ld->mu);
    }
    pthread_mutex_unlock(&ld->mu);
    return n;
}

/* Free a finished task's arena span; the tail advances over finished tasks in dispatch order
 * so the arena is a simple FIFO even though decodes finish out of order. */
static void task_finish_locked(rf_loader *ld, task *t)
{
    atomic_store(&t->finished, 1);
    int moved = 0;
    while (ld->task_tail < ld->task_head) {
        task *o = &ld->tasks[ld->task_tail % ld->ntasks];
        if (!atomic_load(&o->finished))
            break;
        ld->arena_tail = o->arena_end;
        ld->task_tail++;
        moved = 1;
    }
    if (moved)
        pthread_cond_broadcast(&ld->cv_io);
}

static void describe_task(const rf_loader *ld, const task *t, char *buf, size_t n)
{
    if (ld->tokens)
        snprintf(buf, n, "%s: token window at offset %llu", ld->ds.files[t->file].path,
                 (unsigned long long)t->req.offset);
    else
        snprintf(buf, n, "%s: sample %s at offset %llu", ld->ds.files[t->file].path,
                 ld->ds.keys + ld->ds.samples[t->sample_id].key,
                 (unsigned long long)t->req.offset);
}

static void finish_slot(rf_loader *ld, slot *s);

static void io_done(void *ctx, rf_io_req *req)
{
    rf_loader *ld = ctx;
    task *t = req->user;
    pthread_mutex_lock(&ld->mu);
    if (req->result != 0 && !ld->stop) {
        char where[RF_ERRMSG_MAX / 2], msg[RF_ERRMSG_MAX];
        describe_task(ld, t, where, sizeof where);
        if (req->result == -ENODATA)
            snprintf(msg, sizeof msg, "%s: file ended after %u of %u bytes (truncated?)", where,
                     req->done, req->len);
        else
            snprintf(msg, sizeof msg, "%s: read failed: %s", where, rf_strerror(req->result));
        fail_locked(ld, req->result == -ENODATA ? RF_EFORMAT : RF_EIO, msg);
    }
    if (req->result != 0 || ld->stop) {
        task_finish_locked(ld, t);
    } else if (t->raw) {
        /* Raw path: the bytes already sit in the slot; only the host backend converts here. */
        slot *s = &ld->slots[t->slot];
        s->labels[t->index] = -1;
        task_finish_locked(ld, t);
        pthread_mutex_unlock(&ld->mu);
        if (ld->host_convert)
            rf_widen_tokens_cpu(t->req.dst, s->out + (uint64_t)t->index * ld->out_bytes,
                                ld->cfg.seq_len + 1, ld->cfg.token_bytes, ld->out_dtype);
        if (atomic_fetch_sub(&s->pending, 1) == 1)
            finish_slot(ld, s);
        return;
    } else {
        ld->decq[ld->decq_head++ % ld->ntasks] = (uint32_t)(t->seq % ld->ntasks);
        pthread_cond_signal(&ld->cv_dec);
    }
    pthread_mutex_unlock(&ld->mu);
}

/* ---- decode (decode threads) ---------------------------------------------------------------*/

static int decode_task(rf_loader *ld, rf_decoder *dec, task *t, slot *s, rf_err *e)
{
    const rf_sample *sm = &ld->ds.samples[t->sample_id];
    const uint8_t *span = t->req.dst;
    uint32_t doff = sm->data_off, dlen = sm->data_len, dhdr = sm->data_hdr, loff = sm->label_off,
             llen = sm->label_len;
    int32_t label = sm->label;
    int rc;
    if (sm->flags & RF_SAMPLE_TAR) {
        rc = rf_tar_locate(span, sm->length, ld->ds.keys + sm->key, "jpg,jpeg", &doff, &dlen,
                           &dhdr, &loff, &llen, e);
        if (rc)
            return rc;
    }
    if (llen > 0 && (rc = rf_parse_label(span + loff, llen, &label)) != 0)
        return rf_seterr(e, rc, "label member at offset %llu is not an integer",
                         (unsigned long long)(sm->offset + loff));
    rf_decode_info info;
    uint8_t *img = s->stage + (uint64_t)t->index * ld->stage_bytes;
    rc = rf_decode_transform(dec, span + doff, dlen, &ld->tf, t->aug_seed, img, &info, e);
    if (rc) {
        char m[RF_ERRMSG_MAX];
        snprintf(m, sizeof m, "member %s.%s at offset %llu: %s", ld->ds.keys + sm->key,
                 ld->ds.payload_ext ? ld->ds.payload_ext : "jpg",
                 (unsigned long long)(sm->offset + dhdr), e->msg);
        return rf_seterr(e, rc, "%s", m);
    }
    if (info.scale_denom > 1)
        atomic_fetch_add(&ld->dct_scaled, 1);
    if (ld->host_convert)
        rf_convert_image_cpu(img, s->out + (uint64_t)t->index * ld->out_bytes, ld->conv.h,
                             ld->conv.w, ld->out_dtype, ld->cfg.layout, ld->cfg.mean,
                             ld->cfg.std);
    s->labels[t->index] = label;
    return 0;
}

/* The batch's last sample is in: enqueue the copy and publish the slot. */
static void finish_slot(rf_loader *ld, slot *s)
{
    rf_err e = {0};
    uint64_t t0 = rf_now_ns();
    size_t bytes = (size_t)s->batch.count * ld->stage_bytes;
    rf_convert_desc conv = ld->conv;
    conv.elements = (uint64_t)s->batch.count * (ld->cfg.seq_len + 1);
    conv.out_bytes = (uint64_t)s->batch.count * ld->out_bytes;
    int rc = ld->bops->submit(ld->backend, (uint32_t)(s - ld->slots), s->stage, bytes,
                              s->labels, s->batch.count, &conv, &s->dev, &e);
    atomic_fetch_add(&ld->copy_ns, rf_now_ns() - t0);
    pthread_mutex_lock(&ld->mu);
    if (rc)
        fail_locked(ld, rc, e.msg);
    else {
        s->state = SLOT_READY;
        pthread_cond_broadcast(&ld->cv_out);
    }
    pthread_mutex_unlock(&ld->mu);
}

typedef struct decoder_arg {
    rf_loader *ld;
    rf_decoder *dec;
} decoder_arg;

static void *decoder_main(void *arg)
{
    rf_loader *ld = ((decoder_arg *)arg)->ld;
    rf_decoder *dec = ((decoder_arg *)arg)->dec;
    free(arg);
    for (;;) {
        pthread_mutex_lock(&ld->mu);
        while (!ld->stop && ld->decq_tail == ld->decq_head)
            pthread_cond_wait(&ld->cv_dec, &ld->mu);
        if (ld->stop) {
            pthread_mutex_unlock(&ld->mu);
            return NULL;
        }
        task *t = &ld->tasks[ld->decq[ld->decq_tail++ % ld->ntasks]];
        int failed = ld->err.code != 0;
        pthread_mutex_unlock(&ld->mu);

        slot *s = &ld->slots[t->slot];
        rf_err e = {0};
        int rc = 0;
        if (!failed) {
            uint64_t t0 = rf_now_ns();
            rc = decode_task(ld, dec, t, s, &e);
            atomic_fetch_add(&ld->decode_ns, rf_now_ns() - t0);
            atomic_fetch_add(&ld->decoded, 1);
        }
        pthread_mutex_lock(&ld->mu);
        if (rc) {
            char where[RF_ERRMSG_MAX / 2], msg[RF_ERRMSG_MAX];
            snprintf(where, sizeof where, "%s", ld->ds.files[t->file].path);
            snprintf(msg, sizeof msg, "%s: %s", where, e.msg);
            fail_locked(ld, rc, msg);
        }
        task_finish_locked(ld, t);
        pthread_mutex_unlock(&ld->mu);
        if (!rc && !failed && atomic_fetch_sub(&s->pending, 1) == 1)
            finish_slot(ld, s);
    }
}

/* ---- start / stop ----------------------------------------------------------------------- */

/* Stop every thread and reap in-flight work; the ring keeps its memory. */
static void pipeline_stop(rf_loader *ld)
{
    if (!ld->running)
        return;
    pthread_mutex_lock(&ld->mu);
    ld->stop = 1;
    pthread_cond_broadcast(&ld->cv_io);
    pthread_cond_broadcast(&ld->cv_dec);
    pthread_cond_broadcast(&ld->cv_out);
    pthread_mutex_unlock(&ld->mu);
    if (ld->io) {
        rf_io_stats st;
        ld->iops->stats(ld->io, &st);
        ld->io_ns_prev += st.busy_ns;
        ld->io_reads_prev += st.reads;
        ld->io_retries_prev += st.retries;
        ld->io_bytes_prev += st.bytes;
        ld->iops->stop(ld->io);
        ld->io = NULL;
    }
    for (uint32_t i = 0; i < ld->ndecoders; i++)
        pthread_join(ld->decoders[i], NULL);
    ld->ndecoders = 0;
    /* Batches published but not leased still hold device memory and maybe a copy in flight. */
    for (uint32_t i = 0; i < ld->depth; i++) {
        slot *s = &ld->slots[i];
        if (s->state == SLOT_READY || s->state == SLOT_LEASED) {
            rf_err e = {0};
            ld->bops->release(ld->backend, &s->dev, NULL, &e);
        }
        s->state = SLOT_FREE;
    }
    ld->running = 0;
}

/* (Re)start at consumer batch seq `seq`, planning `epoch` from order position `base`. */
static int pipeline_start(rf_loader *ld, uint64_t epoch, uint64_t base, rf_err *err)
{
    ld->stop = 0;
    ld->arena_head = ld->arena_tail = 0;
    ld->task_head = ld->task_tail = 0;
    ld->decq_head = ld->decq_tail = 0;
    rf_plan_epoch(&ld->plan, epoch, base);
    ld->d_epoch = epoch;
    ld->d_k = 0;
    ld->d_j = 0;
    ld->d_seq = ld->c_seq;
    ld->d_done = 0;
    ld->d_epochs_left = ld->cfg.epochs ? ld->cfg.epochs - ld->c_epochs_done : 0;
    if (ld->plan.batches == 0) /* a resume cursor at the very end of an epoch */
        plan_next_epoch_locked(ld);
    ld->c_epoch = ld->d_epoch;
    ld->c_base = ld->d_epoch == epoch ? base : 0;
    ld->c_batches = ld->plan.batches;
    ld->c_k = 0;

    for (uint32_t i = 0; i < ld->cfg.decode_threads; i++) {
        decoder_arg *a = malloc(sizeof *a);
        if (!a)
            return rf_seterr(err, RF_ENOMEM, "no memory for decode threads");
        a->ld = ld;
        a->dec = ld->decs[i];
        if (pthread_create(&ld->decoders[i], NULL, decoder_main, a)) {
            free(a);
            ld->running = 1;
            return rf_seterr(err, RF_ENOMEM, "cannot start decode thread %u", i);
        }
        ld->ndecoders++;
    }
    ld->running = 1;
    int rc = ld->iops->start(&ld->iop, &ld->src, &ld->io, err);
    if (rc && ld->iops == &rf_io_uring_ops && ld->cfg.io_engine == RF_IO_AUTO) {
        /* io_uring passed the probe but a worker ring could not be set up (memlock, limits):
         * fall back for this loader and say why. */
        snprintf(ld->io_why, sizeof ld->io_why, "io_uring worker setup failed (%s): using pread",
                 err->msg);
        ld->iops = &rf_io_pread_ops;
        rc = ld->iops->start(&ld->iop, &ld->src, &ld->io, err);
    }
    return rc;
}

/* ---- create ------------------------------------------------------------------------------*/

static int apply_defaults(rf_config *c, rf_err *err)
{
    if (c->struct_size < offsetof(rf_config, resume_state_bytes) + sizeof(uint64_t) ||
        c->version != RF_CONFIG_VERSION)
        return rf_seterr(err, RF_EINVAL,
                         "config struct_size %u / version %u: fill it with rf_config_init()",
                         c->struct_size, c->version);
    if (!c->shards || c->shard_count == 0)
        return rf_seterr(err, RF_EINVAL, "no shards given");
    if (!c->batch_size)
        c->batch_size = 256;
    if (!c->image_size)
        c->image_size = 224;
    if (c->image_size > 8192)
        return rf_seterr(err, RF_EINVAL, "image_size %u exceeds 8192", c->image_size);
    if (c->crop > RF_CROP_CENTER || c->layout > RF_LAYOUT_NCHW)
        return rf_seterr(err, RF_EINVAL, "invalid crop %u or layout %u", c->crop, c->layout);
    if (!c->resize_shorter)
        c->resize_shorter = (c->image_size * 256 + 112) / 224;
    if (c->flip_prob < 0)
        c->flip_prob = c->crop == RF_CROP_RANDOM ? 0.5f : 0.0f;
    if (!(c->scale_min > 0 && c->scale_min <= c->scale_max && c->scale_max <= 1.0f &&
          c->ratio_min > 0 && c->ratio_min <= c->ratio_max))
        return rf_seterr(err, RF_EINVAL, "invalid scale (%g, %g) or ratio (%g, %g)",
                         c->scale_min, c->scale_max, c->ratio_min, c->ratio_max);
    if (!c->world_size)
        c->world_size = 1;
    if (!c->decode_threads) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        c->decode_threads = n > 0 ? (uint32_t)n : 1;
    }
    if (c->decode_threads > 1024)
        return rf_seterr(err, RF_EINVAL, "decode_threads %u exceeds 1024", c->decode_threads);
    if (!c->io_queue_depth)
        c->io_queue_depth = 64;
    if (!c->prefetch_depth)
        c->prefetch_depth = 4;
    if (c->prefetch_depth > 64 || c->io_queue_depth > 4096 || c->io_threads > 64)
        return rf_seterr(err, RF_EINVAL, "prefetch_depth (<= 64), io_queue_depth (<= 4096) or "
                                         "io_threads (<= 64) out of range");
    if (!c->max_sample_bytes)
        c->max_sample_bytes = 64ull << 20;
    if (!c->max_image_pixels)
        c->max_image_pixels = 100000000ull;
    if (!c->max_image_dim)
        c->max_image_dim = 32768;
    if (!c->io_retries)
        c->io_retries = 8;
    if (c->device_kind > RF_DEVICE_CUDA || c->io_engine > RF_IO_PREAD)
        return rf_seterr(err, RF_EINVAL, "invalid device_kind %u or io_engine %u",
                         c->device_kind, c->io_engine);
    if (c->order > RF_ORDER_SHARD || c->remainder > RF_REMAINDER_DROP)
        return rf_seterr(err, RF_EINVAL, "invalid order %u or remainder %u", c->order,
                         c->remainder);
    if (c->source == RF_SOURCE_TOKENS) {
        if (c->token_bytes != 2 && c->token_bytes != 4)
            return rf_seterr(err, RF_EINVAL, "tokens: token_bytes must be 2 or 4, not %u",
                             c->token_bytes);
        if (c->seq_len == 0 || c->seq_len > (1u << 24))
            return rf_seterr(err, RF_EINVAL, "tokens: seq_len must be in 1..16M, not %u",
                             c->seq_len);
        if (c->token_windows > RF_WINDOWS_SEQUENTIAL)
            return rf_seterr(err, RF_EINVAL, "tokens: invalid token_windows %u", c->token_windows);
        if (!c->token_dtype)
            c->token_dtype = c->token_bytes == 2 ? RF_DTYPE_UINT16 : RF_DTYPE_INT32;
        if (c->token_dtype != RF_DTYPE_UINT16 && c->token_dtype != RF_DTYPE_INT32 &&
            c->token_dtype != RF_DTYPE_INT64)
            return rf_seterr(err, RF_EINVAL, "tokens: token_dtype must be UINT16, INT32 or INT64");
        if (c->token_dtype == RF_DTYPE_UINT16 && c->token_bytes == 4)
            return rf_seterr(err, RF_EINVAL, "tokens: 4-byte tokens cannot narrow to UINT16");
    } else if (c->source != RF_SOURCE_TAR && c->source != RF_SOURCE_FOLDER) {
        return rf_seterr(err, RF_EINVAL, "invalid source %u", c->source);
    }
    if (c->dtype != RF_DTYPE_UINT8 && c->dtype != RF_DTYPE_FLOAT16 &&
        c->dtype != RF_DTYPE_BFLOAT16 && c->dtype != RF_DTYPE_FLOAT32)
        return rf_seterr(err, RF_EINVAL, "images: dtype must be UINT8, FLOAT16, BFLOAT16 or "
                                         "FLOAT32, not %u", c->dtype);
    for (int i = 0; i < 3; i++)
        if (!(c->std[i] > 0) && !(c->std[i] < 0))
            return rf_seterr(err, RF_EINVAL, "std[%d] must be non-zero", i);
    return 0;
}

/* Bytes per sample before and after conversion, and the conversion the backend runs. */
static void setup_output(rf_loader *ld)
{
    const rf_config *c = &ld->cfg;
    memset(&ld->conv, 0, sizeof ld->conv);
    if (ld->tokens) {
        uint64_t n = (uint64_t)c->seq_len + 1;
        ld->stage_bytes = n * c->token_bytes;
        ld->out_dtype = c->token_dtype;
        ld->out_bytes = n * rf_dtype_bytes(c->token_dtype);
        if (ld->out_bytes != ld->stage_bytes) {
            ld->conv.kind = RF_CONV_TOKENS;
            ld->conv.token_bytes = c->token_bytes;
            ld->conv.dtype = c->token_dtype;
        }
        return;
    }
    uint64_t px = (uint64_t)c->image_size * c->image_size;
    ld->stage_bytes = px * 3;
    ld->out_dtype = c->dtype;
    ld->out_bytes = px * 3 * rf_dtype_bytes(c->dtype);
    if (c->dtype != RF_DTYPE_UINT8) {
        /* decode stages NHWC uint8; the conversion writes the requested layout */
        ld->tf.layout = RF_LAYOUT_NHWC;
        ld->conv = (rf_convert_desc){.kind = RF_CONV_IMAGES, .h = c->image_size,
                                     .w = c->image_size, .dtype = c->dtype, .layout = c->layout};
        memcpy(ld->conv.mean, c->mean, sizeof ld->conv.mean);
        memcpy(ld->conv.std, c->std, sizeof ld->conv.std);
    }
}

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
    return 0;
}

/* Token files: no per-sample records (a corpus has millions of windows); windows are
 * computed from the file sizes (tok_first) when dispatched. */
static int open_tokens(rf_loader *ld, char **paths, uint32_t npaths, rf_err *err)
{
    uint64_t L = ld->cfg.seq_len, tb = ld->cfg.token_bytes;
    ld->tok_first = calloc((size_t)npaths + 1, sizeof *ld->tok_first);
    if (!ld->tok_first)
        return rf_seterr(err, RF_ENOMEM, "no memory");
    for (uint32_t i = 0; i < npaths; i++) {
        int fd = open(paths[i], O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) != 0) {
            int e = errno;
            if (fd >= 0)
                close(fd);
            return rf_seterr(err, -e, "%s: %s", paths[i], strerror(e));
        }
        int rc = rf_dataset_add_file(&ld->ds, paths[i], fd, (uint64_t)st.st_size, err);
        if (rc)
            return rc;
        if ((uint64_t)st.st_size % tb)
            return rf_seterr(err, RF_EFORMAT, "%s: %llu bytes is not a whole number of %llu-byte "
                             "tokens", paths[i], (unsigned long long)st.st_size,
                             (unsigned long long)tb);
        uint64_t ntok = (uint64_t)st.st_size / tb;
        ld->tok_first[i + 1] = ld->tok_first[i] + (ntok > L ? (ntok - 1) / L : 0);
    }
    ld->ds.nsamples = ld->tok_first[npaths];
    ld->ds.max_span = (L + 1) * tb;
    ld->ds.total_bytes = ld->ds.nsamples * ld->ds.max_span;
    if (ld->ds.nsamples == 0)
        return rf_seterr(err, RF_EFORMAT, "no token file holds seq_len + 1 = %llu tokens",
                         (unsigned long long)(L + 1));
    return 0;
}

static int open_dataset(rf_loader *ld, rf_err *err)
{
    char **paths = NULL;
    uint32_t npaths = 0;
    int rc = rf_expand_patterns(ld->cfg.shards, ld->cfg.shard_count, &paths, &npaths, err);
    if (rc)
        return rc;
    if (ld->tokens)
        rc = open_tokens(ld, paths, npaths, err);
    else if (ld->cfg.source == RF_SOURCE_FOLDER)
        rc = rf_format_folder.open(&ld->ds, paths, npaths, ld->cfg.max_sample_bytes, err);
    else
        rc = rf_format_tar.open(&ld->ds, paths, npaths, ld->cfg.max_sample_bytes, err);
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
        memcpy(starts, ld->tok_first, ((size_t)ld->ds.nfiles + 1) * sizeof *starts);
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
    int ncuda = rf_backend_cuda_count();
    if (kind == RF_DEVICE_AUTO)
        kind = ncuda > 0 ? RF_DEVICE_CUDA : RF_DEVICE_HOST;
    if (kind == RF_DEVICE_CUDA) {
#ifdef RINGFEED_HAVE_CUDA
        ld->bops = &rf_backend_cuda;
#else
        return rf_seterr(err, RF_ENODEV, "this build of ringfeed has no CUDA backend");
#endif
    } else {
        ld->bops = &rf_backend_host;
    }
    return ld->bops->create(ld->cfg.device_index, ld->depth, &ld->backend, err);
}

static int alloc_ring(rf_loader *ld, rf_err *err)
{
    uint32_t B = ld->batch;
    /* Per slot, in pinned memory: staged samples, labels (both copied to the device), and on
     * the host backend with a conversion the converted output. */
#define PAGE_UP(x) (((x) + 4095) / 4096 * 4096)
    ld->host_convert = ld->conv.kind != RF_CONV_NONE && ld->bops->device_kind == RF_DEVICE_HOST;
    size_t img = PAGE_UP((size_t)B * ld->stage_bytes);
    size_t lab = PAGE_UP((size_t)B * sizeof(int32_t));
    size_t outb = ld->host_convert ? PAGE_UP((size_t)B * ld->out_bytes) : 0;
    size_t per = img + lab + outb;
    ld->ring_bytes = per * ld->depth;
    ld->ring = ld->bops->host_alloc(ld->backend, ld->ring_bytes, &ld->pinned);
    if (!ld->ring)
        return rf_seterr(err, RF_ENOMEM, "cannot allocate the %zu-byte batch ring",
                         ld->ring_bytes);
    ld->slots = calloc(ld->depth, sizeof *ld->slots);
    if (!ld->slots)
        return rf_seterr(err, RF_ENOMEM, "no memory for slots");
    for (uint32_t i = 0; i < ld->depth; i++) {
        slot *s = &ld->slots[i];
        s->stage = ld->ring + per * i;
        s->labels = (int32_t *)(s->stage + img);
        s->out = ld->host_convert ? s->stage + img + lab : NULL;
        s->ids = calloc(B, sizeof *s->ids);
        s->positions = calloc(B, sizeof *s->positions);
        s->padding = calloc(B, 1);
        s->keys = calloc(B, sizeof *s->keys);
        if (!s->ids || !s->positions || !s->padding || !s->keys)
            return rf_seterr(err, RF_ENOMEM, "no memory for slots");
    }
    /* Staging: enough for every decode thread to have work queued behind it plus a full
     * queue of reads, and never less than a few of the largest samples. */
    uint64_t mean = ld->ds.total_bytes / ld->ds.nsamples + 1;
    uint64_t want = ld->cfg.staging_bytes;
    if (!want)
        want = RF_MAX(64ull << 20, mean * 8 * (ld->cfg.decode_threads + ld->cfg.io_queue_depth));
    want = RF_MAX(want, 4 * ld->ds.max_span);
    if (ld->tokens) /* token windows are read straight into the slots */
        want = 1u << 20;
    ld->arena_bytes = (want + 4095) / 4096 * 4096;
    ld->arena = aligned_alloc(4096, ld->arena_bytes);
    if (!ld->arena)
        return rf_seterr(err, RF_ENOMEM, "cannot allocate the %llu-byte staging arena",
                         (unsigned long long)ld->arena_bytes);
    ld->ntasks = (uint32_t)RF_MIN((uint64_t)B * ld->depth + ld->cfg.io_queue_depth *
                                      RF_MAX(1u, ld->cfg.io_threads) + 64, 1u << 20);
    ld->tasks = calloc(ld->ntasks, sizeof *ld->tasks);
    ld->decq = calloc(ld->ntasks, sizeof *ld->decq);
    ld->decoders = calloc(ld->cfg.decode_threads, sizeof *ld->decoders);
    ld->decs = calloc(ld->cfg.decode_threads, sizeof *ld->decs);
    if (!ld->tasks || !ld->decq || !ld->decoders || !ld->decs)
        return rf_seterr(err, RF_ENOMEM, "no memory for tasks");
    for (uint32_t i = 0; i < ld->cfg.decode_threads; i++)
        if (!(ld->decs[i] = rf_decoder_create(&ld->limits)))
            return rf_seterr(err, RF_ENOMEM, "no memory for decoders");
    return 0;
}

static int choose_io(rf_loader *ld, rf_err *err)
{
    int rc = rf_io_select(ld->cfg.io_engine, &ld->iops, ld->io_why, sizeof ld->io_why);
    if (rc)
        return rf_seterr(err, rc, "%s", ld->io_why);
    if (!ld->cfg.io_threads)
        ld->cfg.io_threads = ld->iops == &rf_io_uring_ops ? 1 : 4;
    ld->iop = (rf_io_params){.threads = ld->cfg.io_threads,
                             .queue_depth = ld->cfg.io_queue_depth,
                             .max_retries = ld->cfg.io_retries,
                             .arena = ld->arena,
                             .arena_bytes = ld->arena_bytes};
    ld->src = (rf_io_source){.take = io_take, .done = io_done, .ctx = ld};
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
    ld->plan.seed = ld->cfg.seed = r.seed;
    *epoch = r.epoch;
    *base = r.consumed;
    return 0;
}

int rf_loader_create(const rf_config *cfg, rf_loader **out, char *out_error, size_t error_len)
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
    memcpy(&ld->cfg, cfg, RF_MIN(sizeof ld->cfg, (size_t)cfg->struct_size));
    pthread_mutex_init(&ld->mu, NULL);
    pthread_cond_init(&ld->cv_io, NULL);
    pthread_cond_init(&ld->cv_dec, NULL);
    pthread_cond_init(&ld->cv_out, NULL);
    if ((rc = apply_defaults(&ld->cfg, &err)) || (rc = copy_patterns(ld, &err)))
        goto fail;
    ld->batch = ld->cfg.batch_size;
    ld->depth = ld->cfg.prefetch_depth;
    ld->tokens = ld->cfg.source == RF_SOURCE_TOKENS;
    ld->tf = (rf_transform){.crop = ld->cfg.crop,
                            .size = ld->cfg.image_size,
                            .resize_shorter = ld->cfg.resize_shorter,
                            .layout = ld->cfg.layout,
                            .scale_min = ld->cfg.scale_min,
                            .scale_max = ld->cfg.scale_max,
                            .ratio_min = ld->cfg.ratio_min,
                            .ratio_max = ld->cfg.ratio_max,
                            .flip_prob = ld->cfg.flip_prob};
    ld->limits = (rf_decode_limits){.max_pixels = ld->cfg.max_image_pixels,
                                    .max_dim = ld->cfg.max_image_dim};
    setup_output(ld);
    if ((rc = open_dataset(ld, &err)))
        goto fail;
    if ((rc = rf_plan_init(&ld->plan, ld->ds.nsamples, ld->cfg.seed, ld->cfg.order, ld->batch,
                           ld->cfg.drop_last, ld->cfg.remainder, ld->cfg.rank,
                           ld->cfg.world_size, &err)) ||
        (rc = plan_shards(ld, &err)))
        goto fail;
    uint64_t epoch, base;
    if ((rc = apply_resume(ld, &epoch, &base, &err)) || (rc = choose_backend(ld, &err)) ||
        (rc = alloc_ring(ld, &err)) || (rc = choose_io(ld, &err)) ||
        (rc = pipeline_start(ld, epoch, base, &err)))
        goto fail;
    *out = ld;
    return 0;
fail:
    rf_loader_destroy(ld);
report:
    if (out_error && error_len)
        snprintf(out_error, error_len, "%s", err.msg);
    return rc;
}

void rf_loader_destroy(rf_loader *ld)
{
    if (!ld)
        return;
    pipeline_stop(ld);
    if (ld->decs)
        for (uint32_t i = 0; i < ld->cfg.decode_threads; i++)
            rf_decoder_destroy(ld->decs[i]);
    free(ld->decs);
    free(ld->decoders);
    if (ld->slots)
        for (uint32_t i = 0; i < ld->depth; i++) {
            free(ld->slots[i].ids);
            free(ld->slots[i].positions);
            free(ld->slots[i].padding);
            free(ld->slots[i].keys);
        }
    free(ld->slots);
    if (ld->ring)
        ld->bops->host_free(ld->backend, ld->ring, ld->ring_bytes);
    if (ld->backend)
        ld->bops->destroy(ld->backend);
    free(ld->arena);
    free(ld->tasks);
    free(ld->decq);
    free(ld->tok_first);
    rf_plan_free(&ld->plan);
    rf_dataset_free(&ld->ds);
    if (ld->patterns)
        for (uint32_t i = 0; i < ld->cfg.shard_count; i++)
            free(ld->patterns[i]);
    free(ld->patterns);
    pthread_mutex_destroy(&ld->mu);
    pthread_cond_destroy(&ld->cv_io);
    pthread_cond_destroy(&ld->cv_dec);
    pthread_cond_destroy(&ld->cv_out);
    free(ld);
}

/* ---- consumer ----------------------------------------------------------------------------*/

static void fill_batch(rf_loader *ld, slot *s)
{
    rf_batch *b = &s->batch;
    int cuda = ld->bops->device_kind == RF_DEVICE_CUDA;
    uint32_t H = ld->cfg.image_size;
    b->struct_size = sizeof *b;
    b->data = cuda ? s->dev.data : ld->host_convert ? s->out : s->stage;
    b->data_bytes = (uint64_t)b->count * ld->out_bytes;
    if (ld->tokens) {
        b->shape[0] = b->count, b->shape[1] = ld->cfg.seq_len + 1, b->shape[2] = 1,
        b->shape[3] = 1;
    } else if (ld->cfg.layout == RF_LAYOUT_NHWC) {
        b->shape[0] = b->count, b->shape[1] = H, b->shape[2] = H, b->shape[3] = 3;
    } else {
        b->shape[0] = b->count, b->shape[1] = 3, b->shape[2] = H, b->shape[3] = H;
    }
    b->dtype = ld->out_dtype;
    b->layout = ld->cfg.layout;
    b->device_kind = ld->bops->device_kind;
    b->device_index = cuda ? ld->cfg.device_index : -1;
    b->labels = s->labels;
    b->labels_device = cuda ? s->dev.labels : NULL;
    b->keys = s->keys;
    b->sample_ids = s->ids;
    b->positions = s->positions;
    b->is_padding = s->padding;
    b->event = s->dev.event;
    b->ndim = ld->tokens ? 2 : 4;
}

int rf_loader_next(rf_loader *ld, rf_batch **out)
{
    if (!ld || !out)
        return RF_EINVAL;
    *out = NULL;
    if (ld->c_done)
        return RF_DONE;
    if (ld->c_k == ld->c_batches) {
        /* The consumer crossed an epoch boundary: say so once, then follow the dispatcher
         * into the next epoch (which always starts at order position 0). */
        ld->c_epochs_done++;
        if (ld->cfg.epochs && ld->c_epochs_done >= ld->cfg.epochs) {
            ld->c_done = 1;
            return RF_EPOCH_END;
        }
        ld->c_epoch++;
        ld->c_base = 0;
        ld->c_k = 0;
        uint64_t per;
        rf_plan_shape(&ld->plan, 0, &per, &ld->c_batches);
        return RF_EPOCH_END;
    }
    uint64_t t0 = rf_now_ns();
    slot *s = &ld->slots[ld->c_seq % ld->depth];
    pthread_mutex_lock(&ld->mu);
    if (s->state == SLOT_LEASED) {
        /* The slot this batch needs is still held by the consumer: waiting would never end. */
        pthread_mutex_unlock(&ld->mu);
        return set_last(ld, &(rf_err){RF_ESTATE, "every prefetch slot is leased: release a "
                                                 "batch before asking for the next one"});
    }
    while (!ld->err.code && !(s->state == SLOT_READY && s->seq == ld->c_seq))
        pthread_cond_wait(&ld->cv_out, &ld->mu);
    int rc = ld->err.code;
    if (rc) {
        ld->last = ld->err;
    } else {
        s->state = SLOT_LEASED;
        ld->leased++;
    }
    pthread_mutex_unlock(&ld->mu);
    ld->wait_ns += rf_now_ns() - t0;
    if (rc)
        return rc;
    fill_batch(ld, s);
    ld->c_seq++;
    ld->c_k++;
    ld->delivered += s->batch.count;
    ld->batches_out++;
    *out = &s->batch;
    return 0;
}

int rf_loader_release(rf_loader *ld, rf_batch *batch, void *stream)
{
    if (!ld || !batch)
        return RF_EINVAL;
    slot *s = NULL;
    for (uint32_t i = 0; i < ld->depth; i++)
        if (&ld->slots[i].batch == batch)
            s = &ld->slots[i];
    rf_err e = {0};
    if (!s || s->state != SLOT_LEASED)
        return set_last(ld, &(rf_err){RF_ESTATE, "batch is not leased from this loader "
                                                 "(released twice?)"});
    int rc = ld->bops->release(ld->backend, &s->dev, stream, &e);
    pthread_mutex_lock(&ld->mu);
    s->state = SLOT_FREE;
    ld->leased--;
    if (rc)
        fail_locked(ld, rc, e.msg);
    pthread_cond_broadcast(&ld->cv_io);
    pthread_mutex_unlock(&ld->mu);
    return rc ? set_last(ld, &e) : 0;
}

int rf_batch_wait(const rf_batch *batch, void *stream)
{
    if (!batch)
        return RF_EINVAL;
    if (batch->device_kind != RF_DEVICE_CUDA)
        return 0;
#ifdef RINGFEED_HAVE_CUDA
    return rf_backend_cuda.wait(batch->event, stream);
#else
    return RF_ENODEV;
#endif
}

int rf_batch_synchronize(const rf_batch *batch)
{
    if (!batch)
        return RF_EINVAL;
    if (batch->device_kind != RF_DEVICE_CUDA)
        return 0;
#ifdef RINGFEED_HAVE_CUDA
    return rf_backend_cuda.sync(batch->event);
#else
    return RF_ENODEV;
#endif
}

const char *rf_last_error(const rf_loader *ld)
{
    if (!ld)
        return "";
    return ld->last.msg;
}

uint64_t rf_loader_batches_per_epoch(const rf_loader *ld)
{
    uint64_t per, batches;
    rf_plan_shape(&ld->plan, 0, &per, &batches);
    return batches;
}

uint64_t rf_loader_num_samples(const rf_loader *ld) { return ld->ds.nsamples; }

int rf_loader_set_epoch(rf_loader *ld, uint64_t epoch)
{
    if (!ld)
        return RF_EINVAL;
    if (ld->leased)
        return set_last(ld, &(rf_err){RF_ESTATE, "release every batch before set_epoch"});
    if (ld->err.code)
        return set_last(ld, &ld->err);
    pipeline_stop(ld);
    ld->c_done = 0;
    ld->c_epochs_done = 0;
    rf_err e = {0};
    int rc = pipeline_start(ld, epoch, 0, &e);
    if (rc) {
        fail(ld, rc, e.msg);
        return set_last(ld, &e);
    }
    return 0;
}

int rf_loader_state(const rf_loader *ld, void *buf, uint64_t cap, uint64_t *len)
{
    if (!ld || !len)
        return RF_EINVAL;
    *len = RF_STATE_BYTES;
    if (!buf)
        return 0;
    if (cap < RF_STATE_BYTES)
        return RF_EINVAL;
    rf_resume r = {.seed = ld->cfg.seed,
                   .n = ld->ds.nsamples,
                   .world = ld->cfg.world_size,
                   .rank = ld->cfg.rank,
                   .order = ld->cfg.order,
                   .batch = ld->batch};
    uint64_t per;
    rf_plan_shape(&ld->plan, ld->c_base, &per, &(uint64_t){0});
    uint64_t taken = ld->c_k * ld->batch; /* samples this rank consumed in the epoch */
    if (ld->c_k >= ld->c_batches || taken >= per) {
        /* The epoch is complete on this rank: resume at the start of the next one. */
        r.epoch = ld->c_epoch + 1;
        r.consumed = 0;
    } else {
        r.epoch = ld->c_epoch;
        r.consumed = RF_MIN(ld->ds.nsamples, ld->c_base + taken * ld->cfg.world_size);
    }
    rf_state_encode(&r, buf);
    return 0;
}

void rf_stats_init(rf_stats *st)
{
    memset(st, 0, sizeof *st);
    st->struct_size = sizeof *st;
}

int rf_loader_stats(const rf_loader *ld, rf_stats *out)
{
    if (!ld || !out || out->struct_size < sizeof(uint32_t))
        return RF_EINVAL;
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
    st.samples_decoded = atomic_load(&((rf_loader *)ld)->decoded);
    st.bytes_read = ld->io_bytes_prev + io.bytes;
    st.reads = ld->io_reads_prev + io.reads;
    st.read_retries = ld->io_retries_prev + io.retries;
    st.io_busy_ns = ld->io_ns_prev + io.busy_ns;
    st.decode_busy_ns = atomic_load(&((rf_loader *)ld)->decode_ns);
    st.copy_busy_ns = atomic_load(&((rf_loader *)ld)->copy_ns);
    st.consumer_wait_ns = ld->wait_ns;
    st.wall_ns = rf_now_ns() - ld->created_ns;
    st.epoch = ld->c_epoch;
    st.pinned_bytes = ld->pinned ? ld->ring_bytes : 0;
    st.dct_scaled = atomic_load(&((rf_loader *)ld)->dct_scaled);
    memcpy(out, &st, RF_MIN((size_t)out->struct_size, sizeof st));
    return 0;
}
