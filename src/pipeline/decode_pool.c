/* decode_pool.c — the decode threads (decode_pool.h). Each waits on cv_dec under mu for the
 * queue, then decodes without mu into its own sample's row (or fills a blank), touching only
 * that row, its own decoder and the atomic counters, and hands the task to pl_task_end.
 * rf_config.sample_hook runs here, without mu, between decode and host conversion (create
 * refuses it with the GPU paths, whose pixels never reach this thread). */
#include "pipeline/decode_pool.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backend/convert.h"
#include "pipeline/boxes.h"
#include "pipeline/dispatch.h"
#include "pipeline/fields.h"
#include "pipeline/gpu_decode.h"
#include "pipeline/masks.h"

/* The label of a tar sample whose span locate walked: under RF_LABEL_CLS and RF_LABEL_JSON
 * its label member (KEY.cls, KEY.json), which must be there and hold a label
 * (rf_check_label_as: the same check as rf_shard_inspect); under RF_LABEL_NONE -1, unread. */
static int tar_label(const pl_pool *p, const pl_label_rule *r, const rf_sample *sm,
                     const uint8_t *span, uint32_t loff, uint32_t llen, uint32_t lhdr,
                     int32_t *label, rf_err *e)
{
    *label = -1;
    if (r->source == RF_LABEL_NONE)
        return 0;
    const char *key = p->ds->keys + sm->key;
    if (!loff)
        return rf_label_missing(key, r->ext, sm->offset, e);
    return rf_check_label_as(r->source, r->json_path, key, span + loff, llen,
                             sm->offset + lhdr, label, e);
}

/* Sample i's multi-label row of slot s (rf_config.multi_label) as a sink; k.count NULL when
 * off. */
static rf_label_sink mlabel_sink(const pl_pool *p, slot *s, uint32_t i)
{
    rf_label_sink k = {.classes = p->num_classes, .width = p->ring->mlabel_width, .first = -1};
    if (!p->ring->mlabel)
        return k;
    k.count = s->mcounts + i;
    if (p->ring->mlabel == RF_MULTI_LABEL_MULTIHOT)
        k.hot = s->mhot + (size_t)i * k.width;
    else
        k.list = s->mlist + (size_t)i * k.width;
    return k;
}

/* multi_label: the ids of the sample's label member (a tar sample's) or its one label (a
 * folder sample's, -1: none) into its row; *label becomes the first id (-1: none). */
static int tar_labels(const pl_pool *p, const pl_label_rule *r, const rf_sample *sm, slot *s,
                      uint32_t i, const uint8_t *span, const rf_tar_span_member *lbl,
                      int32_t *label, rf_err *e)
{
    rf_label_sink k = mlabel_sink(p, s, i);
    const char *key = p->ds->keys + sm->key;
    int rc = 0;
    rf_label_sink_clear(&k);
    if (!(sm->flags & RF_SAMPLE_TAR)) {
        if (*label >= 0) {
            char what[RF_ERRMSG_MAX / 2];
            snprintf(what, sizeof what, "sample %s at offset %llu", key,
                     (unsigned long long)sm->offset);
            rc = rf_label_sink_add(&k, *label, what, e);
        }
    } else if (r->source != RF_LABEL_NONE) {
        rc = !lbl->off ? rf_label_missing(key, r->ext, sm->offset, e)
                       : rf_check_labels_as(r->source, r->json_path, key, span + lbl->off,
                                            lbl->len, sm->offset + lbl->hdr, &k, e);
    }
    *label = k.first;
    return rc;
}

/* A label the data gave (the sample's member, or its line of a list) against num_classes:
 * outside 0..num_classes-1 it is a bad label, refused before the sample is decoded. */
static int class_check(const pl_pool *p, const rf_sample *sm, int32_t label, rf_err *e)
{
    uint32_t n = p->num_classes;
    if (!n || label < 0 || (uint32_t)label < n)
        return 0;
    return rf_seterr(e, RF_ELABEL, "sample %s at offset %llu: label %d is not below "
                     "num_classes %u", p->ds->keys + sm->key, (unsigned long long)sm->offset,
                     label, n);
}

/* Hand the decoded row img of task t to rf_config.sample_hook, with *label for it to keep or
 * overwrite; the view describes the row as staged (NHWC before a conversion). A non-zero
 * return is a bad sample, named like a decode failure. */
static int run_hook(pl_pool *p, const task *t, const slot *s, uint8_t *img, int32_t *label,
                    uint32_t dhdr, rf_err *e)
{
    uint32_t h = p->decode->tf.height, w = p->decode->tf.width;
    int nchw = p->decode->tf.layout == RF_LAYOUT_NCHW;
    const uint8_t *fdata[RF_FIELDS_MAX];
    uint32_t flen[RF_FIELDS_MAX];
    uint32_t nf = pl_fields_row(p->fields, s, t->index, fdata, flen);
    rf_sample_view v = {
        .struct_size = sizeof v, .layout = p->decode->tf.layout, .height = h, .width = w,
        .channels = 3, .is_padding = s->padding[t->index], .pixels = img,
        .row_stride = nchw ? w : (uint64_t)w * 3, .pixel_stride = nchw ? 1 : 3,
        .channel_stride = nchw ? (uint64_t)h * w : 1, .sample_id = t->sample_id,
        .position = s->positions[t->index], .epoch = s->batch.epoch,
        .seed = rf_plan_hook_seed(t->aug_seed), .key = s->keys[t->index], .label = label,
        .nfields = nf, .field_names = nf ? p->fields->names : NULL,
        .field_data = nf ? fdata : NULL, .field_lengths = nf ? flen : NULL};
    int r = p->hook(&v, p->hook_ctx);
    if (r == 0)
        return 0;
    char m[RF_ERRMSG_MAX];
    pl_describe_member(p->ds, &p->ds->samples[t->sample_id], dhdr, m, sizeof m);
    return rf_seterr(e, RF_EHOOK, "%s: sample_hook returned %d (sample id %llu, epoch %llu)",
                     m, r, (unsigned long long)t->sample_id, (unsigned long long)v.epoch);
}

/* Sample i's crop box and flip in a slot's tables (rf_batch.crop_boxes, flips): info's, in
 * the source image's full-resolution pixels whatever the path, kept inside the image (a CENTER
 * box is fractional, its corner and size rounded apart); NULL: a blank, {0, 0, 0, 0}
 * unflipped. */
static void put_box(int32_t *boxes, uint8_t *flips, float *places, uint32_t i,
                    const rf_decode_info *info)
{
    int32_t *b = boxes + (size_t)i * 4;
    memset(b, 0, 4 * sizeof *b);
    memset(places + (size_t)i * 4, 0, 4 * sizeof *places);
    flips[i] = 0;
    if (!info)
        return;
    memcpy(places + (size_t)i * 4, info->place, 4 * sizeof *places);
    uint32_t x = RF_MIN(info->crop_x, info->width), y = RF_MIN(info->crop_y, info->height);
    b[0] = (int32_t)x, b[1] = (int32_t)y;
    b[2] = (int32_t)RF_MIN(info->crop_w, info->width - x);
    b[3] = (int32_t)RF_MIN(info->crop_h, info->height - y);
    flips[i] = (uint8_t)(info->flipped != 0);
}

/* Sample i's size (rf_batch.sizes: info's, view 0's with views; NULL: a blank, all zeros) and
 * placement (rf_batch.letterbox), box and flip, with multi_crop per view (infos: one each,
 * NULL for a blank): view k's rows are the k-th batch_size rows of the slot's tables
 * (rf_view.crop_boxes, flips, letterbox). */
static void set_box(const pl_pool *p, slot *s, uint32_t i, const rf_decode_info *info,
                    const rf_decode_info *infos)
{
    size_t B = p->ring->batch;
    s->sizes[2 * (size_t)i] = info ? info->out_h : 0;
    s->sizes[2 * (size_t)i + 1] = info ? info->out_w : 0;
    if (!p->ring->nviews)
        put_box(s->boxes, s->flips, s->places, i, info);
    for (uint32_t k = 0; k < p->ring->nviews; k++)
        put_box(s->boxes + k * B * 4, s->flips + k * B, s->places + k * B * 4, i,
                infos ? &infos[k] : NULL);
}

/* The host backend's conversion of sample i's row (img, as decoded) into its row of s->out:
 * the image (info's size, a NATIVE image's own, packed from the row's start; NULL: a blank,
 * the whole row), or with multi_crop each view at its own size. */
static void convert_row(const pl_pool *p, const slot *s, uint32_t i, const uint8_t *img,
                        const rf_decode_info *info)
{
    const pl_ring *r = p->ring;
    uint8_t *out = s->out + (uint64_t)i * r->out_bytes;
    if (!r->nviews) {
        rf_convert_image_cpu(img, out, info ? info->out_h : r->conv.h,
                             info ? info->out_w : r->conv.w, r->out_dtype, r->layout, p->mean,
                             p->std);
        return;
    }
    uint32_t es = rf_dtype_bytes(r->out_dtype);
    for (uint32_t k = 0; k < r->nviews; k++)
        rf_convert_image_cpu(img + r->views->offset[k], out + r->views->offset[k] * es,
                             r->views->height[k], r->views->width[k], r->out_dtype, r->layout,
                             p->mean, p->std);
}

/* The sample's image, or with multi_crop its views (info: one per view), on the CPU. */
static int decode_pixels(pl_pool *p, rf_decoder *dec, const task *t, slot *s,
                         const rf_transform *tf, const uint8_t *data, uint32_t len,
                         rf_decode_info *info, rf_err *e)
{
    uint8_t *img = pl_gpu_pixels(p->gpu, s, t->index);
    return rf_decode_sample(dec, data, len, tf, p->ring->views, t->aug_seed, img, info, e);
}

/* The geometry (rf_sample_geometry) of an image info describes under the sample's seed and
 * transform tf: one, or with multi_crop each view's, from the view's transform and seed as its
 * pixels had them (rf_decode_views). Returns how many. */
static uint32_t geometries(const pl_pool *p, const rf_transform *tf, const rf_decode_info *info,
                           uint64_t seed, rf_geometry *g)
{
    const rf_views *v = p->ring->views;
    if (!p->ring->nviews) {
        rf_sample_geometry(tf, info->width, info->height, seed, g);
        return 1;
    }
    for (uint32_t k = 0; k < v->n; k++) {
        rf_transform vt;
        rf_view_transform(tf, v, k, &vt);
        rf_sample_geometry(&vt, info->width, info->height, rf_view_seed(seed, k), &g[k]);
    }
    return v->n;
}

/* Decode task t's sample into its row of slot s. An error sets t->why, whose fault it is
 * (enum rf_skip_reason, or SKIP_FATAL), and a message that names the member and its offset
 * (the caller adds the shard). */
static int decode_task(pl_pool *p, rf_decoder *dec, task *t, slot *s, pl_gpu_host *gh,
                       rf_err *e)
{
    const rf_sample *sm = &p->ds->samples[t->sample_id];
    const uint8_t *span = t->req.dst + t->skip;
    uint32_t doff = sm->data_off, dlen = sm->data_len, dhdr = sm->data_hdr;
    int32_t label = sm->label; /* folder sources: known from the tree or the list */
    rf_tar_span_member found[RF_FIELDS_MAX + 3];
    uint32_t nf = 0, nb = 0; /* fields, and box and keypoint members, in found[] */
    int rc;
    rf_tar_span_member mask = {0, 0, 0}; /* rf_config.mask's member (tar sources only) */
    if (sm->flags & RF_SAMPLE_TAR) {
        rf_tar_span_member img, lbl;
        pl_label_rule lr = pl_mix_label_rule(p->mix, t->sample_id); /* its source's */
        /* the fields' members, then the boxes' and keypoints' (after the fields': found[]),
         * then the mask's */
        const char *exts[RF_FIELDS_MAX + 3];
        nf = p->fields->n;
        memcpy(exts, p->fields->names, nf * sizeof *exts);
        nb = pl_boxes_exts(p->boxes, exts + nf);
        uint32_t nm = p->ring->mask_ext != NULL;
        exts[nf + nb] = p->ring->mask_ext;
        rc = rf_tar_locate_fields(span, sm->length, p->ds->keys + sm->key, p->ds->image_exts,
                                  lr.ext, exts, nf + nb + nm, &img, &lbl, found, e);
        doff = img.off, dlen = img.len, dhdr = img.hdr;
        mask = nm ? found[nf + nb] : mask;
        if (rc) {
            /* span offsets in the message are relative to the sample's offset named here */
            t->why = rc == RF_ELIMIT ? RF_SKIP_TOO_LARGE
                     : rc != RF_EFORMAT ? SKIP_FATAL
                     : e->reason == RF_REASON_TRUNCATED ? RF_SKIP_TRUNCATED
                     : e->reason == RF_REASON_NO_IMAGE ? RF_SKIP_NOT_JPEG : RF_SKIP_TAR_HEADER;
            char m[RF_ERRMSG_MAX];
            snprintf(m, sizeof m, "sample %s at offset %llu: %s", p->ds->keys + sm->key,
                     (unsigned long long)sm->offset, e->msg);
            return rf_seterr(e, rc, "%s", m);
        }
        if (p->ring->mask_ext && !mask.off)
            return pl_mask_missing(p->ring, p->ds, sm, &t->why, e);
        if ((rc = p->ring->mlabel
                      ? tar_labels(p, &lr, sm, s, t->index, span, &lbl, &label, e)
                      : tar_label(p, &lr, sm, span, lbl.off, lbl.len, lbl.hdr, &label, e)) != 0) {
            t->why = RF_SKIP_LABEL;
            return rc;
        }
        if (nb && (rc = pl_boxes_read(p->boxes, s, t->index, p->ds->keys + sm->key, sm->offset,
                                      span, found + nf, e)) != 0) {
            t->why = RF_SKIP_LABEL;
            return rc;
        }
        int why = 0;
        if (s->padding[t->index]) /* a padding sample's fields are empty */
            pl_fields_empty(p->fields, s, t->index);
        else if ((rc = pl_fields_copy(p->fields, s, t->index, p->ds->keys + sm->key, sm, span,
                                      found, &why, e)) != 0)
            return t->why = (uint8_t)why, rc;
    } else if (p->ring->mlabel && (rc = tar_labels(p, NULL, sm, s, t->index, span, NULL,
                                                    &label, e)) != 0) {
        t->why = RF_SKIP_LABEL;
        return rc;
    }
    if ((rc = class_check(p, sm, label, e)) != 0) {
        t->why = RF_SKIP_LABEL;
        return rc;
    }
    rf_mask mk; /* checked before the image goes to any engine: nothing is placed for a bad one */
    if (p->ring->mask_ext && (rc = pl_mask_read(p->ring, dec, p->ds, sm, dhdr, span + doff, dlen,
                                                span, &mask, &mk, &t->why, e)) != 0)
        return rc;
    rf_decode_info info, infos[RF_VIEWS_MAX];
    const rf_transform tf =
        rf_decode_setup_transform(p->decode, s->batch.bucket_height, s->batch.bucket_width);
    uint8_t *img = s->stage + (uint64_t)t->index * p->ring->stride;
    pl_gpu_sample_start(p->gpu, s, t->index);
    uint32_t format;
    if ((rc = rf_image_magic_check(span + doff, dlen, &format, e)) != 0) {
        t->why = RF_SKIP_NOT_JPEG; /* not a JPEG, PNG or WebP at all */
    } else {
        /* a refilled slot's replacements take the CPU path: their verdicts cannot wait */
        rf_decode_info *di = p->ring->nviews ? infos : &info; /* with views: one each */
        rc = p->gpu->on && !s->gpu.refill
                 ? pl_gpu_decode(p->gpu, dec, t, s, &tf, span + doff, dlen, img, di, gh, e)
                 : decode_pixels(p, dec, t, s, &tf, span + doff, dlen, di, e);
        if (rc == 0 && p->ring->nviews)
            info = infos[0];
        t->why = rc == RF_ELIMIT ? RF_SKIP_TOO_LARGE : rc == RF_EDECODE ? RF_SKIP_CORRUPT
                                                                        : SKIP_FATAL;
    }
    if (rc) {
        char m[RF_ERRMSG_MAX];
        pl_describe_member(p->ds, sm, dhdr, m, sizeof m);
        size_t k = strlen(m);
        snprintf(m + k, sizeof m - k, ": %s", e->msg); /* e->msg is rewritten below */
        return rf_seterr(e, rc, "%s", m);
    }
    /* the boxes and the mask follow one geometry per view, the image's: computed once for
     * both */
    rf_geometry g[RF_VIEWS_MAX];
    uint32_t ng = nb || p->ring->mask_ext ? geometries(p, &tf, &info, t->aug_seed, g) : 0;
    if (nb && (rc = pl_boxes_map(p->boxes, s, t->index, g, info.width, info.height,
                                 p->ds->keys + sm->key, sm->offset, found + nf, e)) != 0) {
        t->why = RF_SKIP_LABEL;
        return rc;
    }
    for (uint32_t k = 0; p->ring->mask_ext && k < ng; k++)
        pl_mask_place(p->ring, dec, &g[k], &mk, &info, s, t->index, k);
    if (info.scale_denom > 1)
        pl_count(&p->counters->dct_scaled, 1);
    if (info.region)
        pl_count(&p->counters->region_decoded, 1);
    if (p->hook && (rc = run_hook(p, t, s, img, &label, dhdr, e)) != 0) {
        t->why = RF_SKIP_HOOK;
        return rc;
    }
    /* a NATIVE or bucket image is info's size, packed from its sample's start */
    if (p->ring->host_convert)
        convert_row(p, s, t->index, img, &info);
    s->labels[t->index] = label;
    set_box(p, s, t->index, &info, infos);
    /* a packet on the device is counted with its batch (pl_gpu_check) */
    if (!p->gpu->device || s->gpu.flags[t->index] == RF_GJ_PIXELS)
        pl_count_recovered(p->counters, rf_decoder_recovered(dec));
    return 0;
}

/* A blank padding sample (skip mode made the task a blank): zero pixels (or tokens), label
 * -1, empty fields. */
static void fill_blank(pl_pool *p, const task *t, slot *s)
{
    uint8_t *img = pl_gpu_pixels(p->gpu, s, t->index); /* the device layout places it */
    memset(img, 0, p->ring->stage_bytes);
    if (p->ring->host_convert && p->ring->tokens)
        rf_widen_tokens_cpu(img, s->out + (uint64_t)t->index * p->ring->out_bytes,
                            p->ring->seq_len + 1, p->ring->token_bytes, p->ring->out_dtype);
    else if (p->ring->host_convert)
        convert_row(p, s, t->index, img, NULL);
    s->labels[t->index] = -1;
    set_box(p, s, t->index, NULL, NULL);
    rf_label_sink k = mlabel_sink(p, s, t->index);
    if (k.count)
        rf_label_sink_clear(&k);
    if (p->ring->mask_ext)
        pl_mask_blank(p->ring, s, t->index);
    pl_fields_empty(p->fields, s, t->index);
    pl_boxes_blank(p->boxes, s, t->index);
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

/* What pl_pool_start hands a decode thread. */
typedef struct decoder_arg {
    pl_pool *p;
    rf_decoder *dec;
} decoder_arg;

/* A decode thread: take the next queued task, decode it (or fill a blank), hand it back. */
static void *decoder_main(void *arg)
{
    pl_pool *p = ((decoder_arg *)arg)->p;
    rf_decoder *dec = ((decoder_arg *)arg)->dec;
    free(arg);
    if (p->nice)
        nice_thread(p->nice);
    pl_gpu_host gh = {0};
    if (pl_gpu_host_alloc(p->gpu, &gh))
        pl_fail(p->core, RF_ENOMEM, "out of memory for a decode thread's GPU-decode buffers");
    int failed, moot;
    task *t;
    while ((t = pl_task_next_decode(p->disp, &failed, &moot))) {
        slot *s = &p->ring->slots[t->slot];
        rf_err e = {0};
        int rc = 0;
        if (!failed && t->blank) {
            fill_blank(p, t, s);
        } else if (!failed && !moot) {
            uint64_t t0 = rf_now_ns();
            rc = decode_task(p, dec, t, s, &gh, &e);
            pl_count(&p->counters->decode_ns, rf_now_ns() - t0);
            pl_count(&p->counters->decoded, 1);
        }
        pl_task_end(p->disp, t, failed, rc, &e);
    }
    pl_gpu_host_free(&gh);
    return NULL;
}

void pl_pool_init(pl_pool *p, const rf_config *c, pl_core *core, struct pl_dispatch *disp,
                  pl_ring *ring, const rf_dataset *ds, const struct pl_fields *fields,
                  struct pl_gpu *gpu, pl_counters *counters, const rf_decode_setup *decode,
                  const pl_mix *mix)
{
    p->core = core, p->disp = disp, p->ring = ring, p->ds = ds, p->fields = fields;
    p->gpu = gpu, p->counters = counters, p->decode = decode, p->mix = mix;
    p->nthreads = c->decode_threads, p->nice = c->decode_nice;
    p->num_classes = c->num_classes;
    p->hook = c->sample_hook, p->hook_ctx = c->sample_hook_ctx;
    memcpy(p->mean, c->mean, sizeof p->mean);
    memcpy(p->std, c->std, sizeof p->std);
}

int pl_pool_alloc(pl_pool *p, rf_err *err)
{
    p->threads = calloc(p->nthreads, sizeof *p->threads);
    p->decs = calloc(p->nthreads, sizeof *p->decs);
    if (!p->threads || !p->decs)
        return rf_seterr(err, RF_ENOMEM, "cannot allocate the tables for %u decode threads: out "
                         "of memory", p->nthreads);
    for (uint32_t i = 0; i < p->nthreads; i++)
        if (pl_alloc_refused(p->core, "decoder", 0) ||
            !(p->decs[i] = rf_decode_setup_decoder(p->decode)))
            return rf_seterr(err, RF_ENOMEM, "cannot create JPEG decoder %u of %u: out of memory",
                             i + 1, p->nthreads);
    return 0;
}

void pl_pool_free(pl_pool *p)
{
    if (p->decs)
        for (uint32_t i = 0; i < p->nthreads; i++)
            rf_decoder_destroy(p->decs[i]);
    free(p->decs);
    free(p->threads);
}

int pl_pool_start(pl_pool *p, rf_err *err)
{
    for (uint32_t i = 0; i < p->nthreads; i++) {
        decoder_arg *a = malloc(sizeof *a);
        if (!a)
            return rf_seterr(err, RF_ENOMEM, "no memory for decode threads");
        a->p = p;
        a->dec = p->decs[i];
        /* (the hook reaches the teardown of a half-started pipeline) */
        if (pl_alloc_refused(p->core, "decode thread", 0) ||
            pthread_create(&p->threads[i], NULL, decoder_main, a)) {
            free(a);
            return rf_seterr(err, RF_ENOMEM, "cannot start decode thread %u of %u: out of memory",
                             i + 1, p->nthreads);
        }
        rf_thread_name(p->threads[i], "rf-decode", (int)i);
        p->started++;
    }
    return 0;
}

void pl_pool_join(pl_pool *p)
{
    for (uint32_t i = 0; i < p->started; i++)
        pthread_join(p->threads[i], NULL);
    p->started = 0;
}
