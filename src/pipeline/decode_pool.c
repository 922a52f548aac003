/* decode_pool.c — the decode threads: each takes a task off the decode queue, locates the
 * image, label and extra fields in the span read for it, decodes, crops and resizes straight
 * into the sample's row of its slot (or fills a blank, in skip mode), and hands the task back.
 *
 * DESIGN
 * Runs on the `decode_threads` decode threads, started and joined by run.c. Each waits on
 * cv_dec under mu for the queue, then decodes without mu, touching only its own sample's row
 * of the slot, its own decoder, and the atomic counters. The outcome goes to pl_task_end
 * (dispatch.c), which applies the error policy, frees the task and counts the slot down; GPU
 * decode's placement is gpu_place.c's. The user's rf_config.sample_hook runs here too, on the
 * decoded row and without mu, between the decode and the host conversion (create refused it
 * with the GPU paths, whose pixels never reach this thread). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pipeline/pipeline.h"

/* The label of a tar sample whose span locate walked: under RF_LABEL_CLS and RF_LABEL_JSON
 * its label member (KEY.cls, KEY.json), which must be there and hold a label
 * (rf_check_label_as: the same check as rf_shard_inspect); under RF_LABEL_NONE -1, unread. */
static int tar_label(const rf_loader *ld, const pl_label_rule *r, const rf_sample *sm,
                     const uint8_t *span, uint32_t loff, uint32_t llen, uint32_t lhdr,
                     int32_t *label, rf_err *e)
{
    *label = -1;
    if (r->source == RF_LABEL_NONE)
        return 0;
    const char *key = ld->ds.keys + sm->key;
    if (!loff)
        return rf_label_missing(key, r->ext, sm->offset, e);
    return rf_check_label_as(r->source, r->json_path, key, span + loff, llen,
                             sm->offset + lhdr, label, e);
}

/* A label the data gave (the sample's member, or its line of a list) against num_classes:
 * outside 0..num_classes-1 it is a bad label, refused before the sample is decoded. */
static int class_check(const rf_loader *ld, const rf_sample *sm, int32_t label, rf_err *e)
{
    uint32_t n = ld->cfg.num_classes;
    if (!n || label < 0 || (uint32_t)label < n)
        return 0;
    return rf_seterr(e, RF_ELABEL, "sample %s at offset %llu: label %d is not below "
                     "num_classes %u", ld->ds.keys + sm->key, (unsigned long long)sm->offset,
                     label, n);
}

/* Hand the decoded row img of task t (slot s) to rf_config.sample_hook, with *label for it
 * to keep or overwrite. The view describes the row as staged (ld->tf.layout: the configured
 * layout for uint8 output, NHWC before a conversion). A non-zero return is a bad sample,
 * named like a decode failure (the caller adds the shard). */
static int run_hook(rf_loader *ld, const task *t, const slot *s, uint8_t *img, int32_t *label,
                    uint32_t dhdr, rf_err *e)
{
    uint32_t h = ld->tf.height, w = ld->tf.width;
    int nchw = ld->tf.layout == RF_LAYOUT_NCHW;
    rf_sample_view v = {
        .struct_size = sizeof v, .layout = ld->tf.layout, .height = h, .width = w,
        .channels = 3, .is_padding = s->padding[t->index], .pixels = img,
        .row_stride = nchw ? w : (uint64_t)w * 3, .pixel_stride = nchw ? 1 : 3,
        .channel_stride = nchw ? (uint64_t)h * w : 1, .sample_id = t->sample_id,
        .position = s->positions[t->index], .epoch = s->batch.epoch,
        .seed = rf_plan_hook_seed(t->aug_seed), .key = s->keys[t->index], .label = label};
    int r = ld->cfg.sample_hook(&v, ld->cfg.sample_hook_ctx);
    if (r == 0)
        return 0;
    char m[RF_ERRMSG_MAX];
    pl_describe_member(ld, &ld->ds.samples[t->sample_id], dhdr, m, sizeof m);
    return rf_seterr(e, RF_EHOOK, "%s: sample_hook returned %d (sample id %llu, epoch %llu)",
                     m, r, (unsigned long long)t->sample_id, (unsigned long long)v.epoch);
}

/* Decode task t's sample into its row of slot s: locate the image, label and extra fields in
 * the span (tar), copy the fields (fields.c), check the image's signature (JPEG, PNG or
 * WebP), decode on the CPU or through GPU decode (gpu_place.c; JPEG only), run the sample hook,
 * convert on the host backend. An error sets t->why, whose fault it is
 * (enum rf_skip_reason, or SKIP_FATAL), and a message that names the member and its offset (the
 * caller adds the shard). */
static int decode_task(rf_loader *ld, rf_decoder *dec, task *t, slot *s, pl_gpu_host *gh,
                       rf_err *e)
{
    const rf_sample *sm = &ld->ds.samples[t->sample_id];
    const uint8_t *span = t->req.dst + t->skip;
    uint32_t doff = sm->data_off, dlen = sm->data_len, dhdr = sm->data_hdr;
    int32_t label = sm->label; /* folder sources: known from the tree or the list */
    int rc;
    if (sm->flags & RF_SAMPLE_TAR) {
        rf_tar_span_member img, lbl, found[RF_FIELDS_MAX];
        pl_label_rule lr = pl_mix_label_rule(ld->mix, t->sample_id); /* its source's */
        rc = rf_tar_locate_fields(span, sm->length, ld->ds.keys + sm->key, ld->ds.image_exts,
                                  lr.ext, ld->fields.names, ld->fields.n, &img, &lbl, found, e);
        doff = img.off, dlen = img.len, dhdr = img.hdr;
        if (rc) {
            /* span offsets in the message are relative to the sample's offset named here */
            t->why = rc == RF_ELIMIT ? RF_SKIP_TOO_LARGE
                     : rc != RF_EFORMAT ? SKIP_FATAL
                     : e->reason == RF_REASON_TRUNCATED ? RF_SKIP_TRUNCATED
                     : e->reason == RF_REASON_NO_IMAGE ? RF_SKIP_NOT_JPEG : RF_SKIP_TAR_HEADER;
            char m[RF_ERRMSG_MAX];
            snprintf(m, sizeof m, "sample %s at offset %llu: %s", ld->ds.keys + sm->key,
                     (unsigned long long)sm->offset, e->msg);
            return rf_seterr(e, rc, "%s", m);
        }
        if ((rc = tar_label(ld, &lr, sm, span, lbl.off, lbl.len, lbl.hdr, &label, e)) != 0) {
            t->why = RF_SKIP_LABEL;
            return rc;
        }
        int why = 0;
        if (s->padding[t->index]) /* a padding sample's fields are empty */
            pl_fields_empty(ld, s, t->index);
        else if ((rc = pl_fields_copy(ld, s, t->index, sm, span, found, &why, e)) != 0)
            return t->why = (uint8_t)why, rc;
    }
    if ((rc = class_check(ld, sm, label, e)) != 0) {
        t->why = RF_SKIP_LABEL;
        return rc;
    }
    rf_decode_info info;
    uint8_t *img = s->stage + (uint64_t)t->index * ld->stride;
    pl_gpu_sample_start(ld, s, t->index);
    uint32_t format;
    if ((rc = rf_image_magic_check(span + doff, dlen, &format, e)) != 0) {
        t->why = RF_SKIP_NOT_JPEG; /* not a JPEG, PNG or WebP at all */
    } else {
        /* a refilled slot's replacements take the CPU path: their verdicts cannot wait */
        rc = ld->gpu.on && !s->gpu.refill
                 ? pl_gpu_decode(ld, dec, t, s, span + doff, dlen, img, &info, gh, e)
                 : rf_decode_image(dec, span + doff, dlen, &ld->tf, t->aug_seed,
                                   pl_gpu_pixels(ld, s, t->index), &info, e);
        t->why = rc == RF_ELIMIT ? RF_SKIP_TOO_LARGE : rc == RF_EDECODE ? RF_SKIP_CORRUPT
                                                                        : SKIP_FATAL;
    }
    if (rc) {
        char m[RF_ERRMSG_MAX];
        pl_describe_member(ld, sm, dhdr, m, sizeof m);
        size_t k = strlen(m);
        snprintf(m + k, sizeof m - k, ": %s", e->msg); /* e->msg is rewritten below */
        return rf_seterr(e, rc, "%s", m);
    }
    if (info.scale_denom > 1)
        atomic_fetch_add_explicit(&ld->dct_scaled, 1, memory_order_relaxed); /* stats only */
    if (info.region)
        atomic_fetch_add_explicit(&ld->region_decoded, 1, memory_order_relaxed); /* stats only */
    if (ld->cfg.sample_hook && (rc = run_hook(ld, t, s, img, &label, dhdr, e)) != 0) {
        t->why = RF_SKIP_HOOK;
        return rc;
    }
    if (ld->host_convert)
        rf_convert_image_cpu(img, s->out + (uint64_t)t->index * ld->out_bytes, ld->conv.h,
                             ld->conv.w, ld->out_dtype, ld->cfg.layout, ld->cfg.mean,
                             ld->cfg.std);
    s->labels[t->index] = label;
    /* a packet on the device is counted with its batch (pl_gpu_check) */
    if (!ld->gpu.device || s->gpu.flags[t->index] == RF_GJ_PIXELS)
        pl_count_recovered(ld, rf_decoder_recovered(dec));
    return 0;
}

/* A blank padding sample (skip mode made the task a blank): zero pixels (or tokens), label
 * -1, empty fields. */
static void fill_blank(rf_loader *ld, const task *t, slot *s)
{
    uint8_t *img = pl_gpu_pixels(ld, s, t->index); /* the device layout places it */
    memset(img, 0, ld->stage_bytes);
    if (ld->host_convert && ld->tokens)
        rf_widen_tokens_cpu(img, s->out + (uint64_t)t->index * ld->out_bytes,
                            ld->cfg.seq_len + 1, ld->cfg.token_bytes, ld->out_dtype);
    else if (ld->host_convert)
        rf_convert_image_cpu(img, s->out + (uint64_t)t->index * ld->out_bytes, ld->conv.h,
                             ld->conv.w, ld->out_dtype, ld->cfg.layout, ld->cfg.mean,
                             ld->cfg.std);
    s->labels[t->index] = -1;
    pl_fields_empty(ld, s, t->index);
}

/* Linux: PRIO_PROCESS with a thread id sets that thread alone. Raising one's own niceness
 * needs no privilege; failure only costs the scheduling preference. */
static void nice_thread(uint32_t more)
{
    id_t tid = (id_t)syscall(SYS_gettid);
    errno = 0;
    int cur = getpriority(PRIO_PROCESS, tid);
    if (errno == 0)
        (void)setpriority(PRIO_PROCESS, tid, RF_MIN(cur + (int)more, 19));
}

/* A decode thread: take the next queued task, decode it (or fill a blank), hand it back. */
void *pl_decoder_main(void *arg)
{
    rf_loader *ld = ((decoder_arg *)arg)->ld;
    rf_decoder *dec = ((decoder_arg *)arg)->dec;
    free(arg);
    if (ld->cfg.decode_nice)
        nice_thread(ld->cfg.decode_nice);
    pl_gpu_host gh = {0};
    if (pl_gpu_host_alloc(ld, &gh))
        pl_fail(ld, RF_ENOMEM, "out of memory for a decode thread's GPU-decode buffers");
    for (;;) {
        pl_lock(ld);
        while (!ld->stop && ld->decq_tail == ld->decq_head)
            pl_wait(ld, &ld->cv_dec);
        if (ld->stop) {
            pl_unlock(ld);
            pl_gpu_host_free(&gh);
            return NULL;
        }
        task *t = &ld->tasks[ld->decq[ld->decq_tail++ % ld->ntasks]];
        t->phase = TASK_DECODING;
        slot *s = &ld->slots[t->slot];
        int failed = ld->err.code != 0;
        /* A sample after the slot's first bad one: the batch is never delivered. */
        int moot = s->bad.code && t->index > s->bad_index;
        pl_unlock(ld);

        rf_err e = {0};
        int rc = 0;
        if (!failed && t->blank) {
            fill_blank(ld, t, s);
        } else if (!failed && !moot) {
            uint64_t t0 = rf_now_ns();
            rc = decode_task(ld, dec, t, s, &gh, &e);
            /* statistics only (rf_stats): relaxed */
            atomic_fetch_add_explicit(&ld->decode_ns, rf_now_ns() - t0, memory_order_relaxed);
            atomic_fetch_add_explicit(&ld->decoded, 1, memory_order_relaxed);
        }
        pl_task_end(ld, t, failed, rc, &e);
    }
}
