/* ring.c — the ring, the slot tables and the memory hierarchy around them (ring.h), made on
 * the creating thread before any pipeline thread exists. Every allocation goes through the
 * test hook (pl_alloc_refused) and a failure says what was asked for and why that large. */
#include "pipeline/ring.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/convert.h"
#include "base/numa.h"
#include "io/io.h"

void pl_ring_shape(pl_ring *r, const rf_config *c, const rf_views *views)
{
    r->batch = c->batch_size;
    r->depth = c->prefetch_depth;
    r->tokens = c->source == RF_SOURCE_TOKENS;
    r->mlabel = r->tokens ? RF_MULTI_LABEL_OFF : c->multi_label;
    r->mlabel_width = r->mlabel == RF_MULTI_LABEL_MULTIHOT ? c->num_classes
                      : r->mlabel == RF_MULTI_LABEL_LIST   ? c->max_labels : 0;
    r->height = c->image_height, r->width = c->image_width, r->layout = c->layout;
    r->views = views;
    r->nviews = r->tokens ? 0 : views->n;
    r->native = !r->tokens && c->crop == RF_CROP_NATIVE;
    memset(&r->buckets, 0, sizeof r->buckets);
    if (!r->tokens) /* checked at create (config.c): it parses */
        rf_buckets_parse(c->size_buckets, &r->buckets, &(rf_err){0});
    r->sample_elems = r->tokens  ? 0
                      : r->nviews ? views->bytes /* every view, one after another */
                                  : (uint64_t)c->image_height * c->image_width * 3;
    r->mask_ext = r->tokens ? NULL : c->mask;
    r->mask_dtype = c->mask_dtype, r->mask_fill = c->mask_fill;
    /* with multi_crop a sample has a mask per view, each at its view's size */
    r->mask_bytes = !r->mask_ext ? 0
                    : (r->nviews ? views->bytes / 3 : (uint64_t)c->image_height * c->image_width) *
                          (c->mask_dtype == RF_DTYPE_INT32 ? 4 : 1);
    r->mask_width = r->nviews ? 0 : c->image_width;
    for (uint32_t k = 0; k < r->nviews; k++)
        r->mask_width = RF_MAX(r->mask_width, views->width[k]);
    r->seq_len = c->seq_len, r->token_bytes = c->token_bytes;
    memset(&r->conv, 0, sizeof r->conv);
    if (r->tokens) {
        uint64_t n = (uint64_t)c->seq_len + 1;
        r->stage_bytes = n * c->token_bytes;
        r->out_dtype = c->token_dtype;
        r->out_bytes = n * rf_dtype_bytes(c->token_dtype);
        if (r->out_bytes != r->stage_bytes) {
            r->conv.kind = RF_CONV_TOKENS;
            r->conv.token_bytes = c->token_bytes;
            r->conv.dtype = c->token_dtype;
        }
    } else {
        uint64_t px = r->nviews ? views->bytes / 3 : (uint64_t)c->image_height * c->image_width;
        r->stage_bytes = px * 3;
        r->out_dtype = c->dtype;
        r->out_bytes = px * 3 * rf_dtype_bytes(c->dtype);
        if (c->dtype != RF_DTYPE_UINT8) { /* decode stages NHWC uint8; the conversion writes
                                           * the requested layout */
            r->conv = (rf_convert_desc){.kind = RF_CONV_IMAGES, .h = c->image_height,
                                        .w = c->image_width, .dtype = c->dtype,
                                        .layout = c->layout};
            memcpy(r->conv.mean, c->mean, sizeof r->conv.mean);
            memcpy(r->conv.std, c->std, sizeof r->conv.std);
        }
    }
    r->stride = r->stage_bytes;
}

/* rf_config.mask: each slot's masks, in host memory (the consumer reads them there). */
static int masks_alloc(pl_ring *r, const pl_core *core, rf_err *err)
{
    size_t per;
    if (!r->mask_bytes)
        return 0;
    if (__builtin_mul_overflow((size_t)r->batch, (size_t)r->mask_bytes, &per) ||
        per > SIZE_MAX / 2 / r->depth || pl_alloc_refused(core, "masks", per * r->depth))
        per = 0;
    for (uint32_t i = 0; per && i < r->depth; i++)
        if (!(r->slots[i].masks = malloc(per)))
            per = 0;
    if (!per)
        return rf_seterr(err, RF_ENOMEM, "cannot allocate the masks' host memory: "
                         "prefetch_depth %u x batch %u x %llu bytes (%ux%u %s): out of memory",
                         r->depth, r->batch, (unsigned long long)r->mask_bytes, r->height,
                         r->width, r->mask_dtype == RF_DTYPE_INT32 ? "int32" : "uint8");
    return 0;
}

int pl_ring_alloc(pl_ring *r, const pl_core *core, const pl_backend *be, size_t extra,
                  int hugepages, int naive, pl_mem *m, rf_err *err)
{
    uint32_t B = r->batch;
    /* Per slot, in pinned memory: staged samples, labels (both copied to the device), and on
     * the host backend with a conversion the converted output. Sizes are checked for
     * overflow: batch_size x image_height x image_width comes from the caller and may not fit. */
#define PAGE_UP(x) (((x) + 4095) / 4096 * 4096)
    r->host_convert = r->conv.kind != RF_CONV_NONE && be->ops->device_kind == RF_DEVICE_HOST;
    size_t img, lab, outb = 0, per, ring;
    const char *kind = be->ops->device_kind == RF_DEVICE_CUDA && !naive ? "pinned" : "host";
    char conv[96] = "";
    if (r->host_convert)
        snprintf(conv, sizeof conv, " + batch %u x %llu bytes converted", B,
                 (unsigned long long)r->out_bytes);
    lab = (size_t)B * sizeof(int32_t) + extra;
    /* img and outb at most half and a quarter of SIZE_MAX, labels below 2^34 bytes: their
     * page-rounded sum cannot wrap, so only the products need checking. */
    if (__builtin_mul_overflow((size_t)B, (size_t)r->stride, &img) || img > SIZE_MAX / 2 ||
        (r->host_convert &&
         (__builtin_mul_overflow((size_t)B, (size_t)r->out_bytes, &outb) || outb > SIZE_MAX / 4)) ||
        __builtin_mul_overflow(PAGE_UP(img) + PAGE_UP(lab) + PAGE_UP(outb), (size_t)r->depth,
                               &ring))
        return rf_seterr(err, RF_ENOMEM, "cannot allocate the %s batch ring: prefetch_depth %u x "
                         "(batch %u x %llu bytes per sample%s + labels) exceeds %zu bytes: out "
                         "of memory", kind, r->depth, B, (unsigned long long)r->stage_bytes,
                         conv, SIZE_MAX);
    img = PAGE_UP(img);
    lab = PAGE_UP(lab);
    outb = PAGE_UP(outb);
    per = img + lab + outb;
    r->bytes = ring;
    char hw[160] = "";
    int rc = RF_ENOMEM;
    if (!pl_alloc_refused(core, "batch ring", r->bytes))
        rc = rf_ringmem_alloc(be->ops, be->b, r->bytes, hugepages, &r->rmem, hw, sizeof hw);
    r->mem = rc ? NULL : r->rmem.ptr;
    r->pinned = r->rmem.pinned;
    if (hw[0])
        pl_why_append(m->why, sizeof m->why, "hugepages: %s", hw);
    if (!r->mem)
        return rf_seterr(err, RF_ENOMEM, "cannot allocate the %zu-byte %s batch ring "
                         "(prefetch_depth %u x (batch %u x %llu bytes per sample%s + labels), "
                         "page-rounded): out of memory", r->bytes, kind, r->depth, B,
                         (unsigned long long)r->stage_bytes, conv);
    /* ids, positions, keys, offset (8 bytes each), letterbox row (16), size (8), padding (1)
     * per sample of every slot, crop box (16) and flip (1) per view (one without multi_crop),
     * multi-label rows (a count, 4, and width bytes or ids), and an rf_view per view */
    size_t mrow = !r->mlabel ? 0
                  : 4 + (size_t)r->mlabel_width * (r->mlabel == RF_MULTI_LABEL_LIST ? 4 : 1);
    size_t nv = RF_MAX(r->nviews, 1u);
    size_t tables = (size_t)r->depth * (sizeof *r->slots + r->nviews * sizeof(rf_view) +
                                        (size_t)B * (57 + 17 * nv + mrow));
    r->slots = pl_alloc_refused(core, "slot tables", tables) ? NULL
                                                             : calloc(r->depth, sizeof *r->slots);
    if (!r->slots)
        return rf_seterr(err, RF_ENOMEM, "cannot allocate %zu bytes of slot tables "
                         "(prefetch_depth %u x batch %u samples): out of memory", tables,
                         r->depth, B);
    for (uint32_t i = 0; i < r->depth; i++) {
        slot *s = &r->slots[i];
        s->stage = r->mem + per * i;
        s->labels = (int32_t *)(s->stage + img);
        s->out = r->host_convert ? s->stage + img + lab : NULL;
        s->ids = calloc(B, sizeof *s->ids);
        s->positions = calloc(B, sizeof *s->positions);
        s->padding = calloc(B, 1);
        s->keys = calloc(B, sizeof *s->keys);
        s->boxes = calloc((size_t)B * 4 * nv, sizeof *s->boxes);
        s->flips = calloc((size_t)B * nv, 1);
        s->views = r->nviews ? calloc(r->nviews, sizeof *s->views) : NULL;
        s->places = calloc((size_t)B * 4 * RF_MAX(r->nviews, 1u), sizeof *s->places);
        s->sizes = calloc((size_t)B * 2, sizeof *s->sizes);
        if ((s->offsets = calloc(B, sizeof *s->offsets)) != NULL)
            for (uint32_t k = 0; k < B; k++) /* in elements: a sample's H x W x 3 apart */
                s->offsets[k] = (uint64_t)k * r->sample_elems;
        if (r->mlabel) {
            size_t n = (size_t)B * r->mlabel_width;
            s->mcounts = calloc(B, sizeof *s->mcounts);
            if (r->mlabel == RF_MULTI_LABEL_LIST && (s->mlist = malloc(n * sizeof *s->mlist)))
                memset(s->mlist, 0xff, n * sizeof *s->mlist); /* -1 */
            else if (r->mlabel == RF_MULTI_LABEL_MULTIHOT)
                s->mhot = calloc(n, 1);
        }
        int mok = !r->mlabel || (s->mcounts && (s->mlist || s->mhot));
        if (!s->ids || !s->positions || !s->padding || !s->keys || !s->boxes || !s->flips ||
            !s->places || !s->sizes || !s->offsets || !mok || (r->nviews && !s->views))
            return rf_seterr(err, RF_ENOMEM, "cannot allocate %zu bytes of slot tables "
                             "(prefetch_depth %u x batch %u samples): out of memory", tables,
                             r->depth, B);
    }
    return masks_alloc(r, core, err);
}

void pl_ring_free(pl_ring *r, const pl_backend *be)
{
    if (r->slots)
        for (uint32_t i = 0; i < r->depth; i++) {
            free(r->slots[i].ids);
            free(r->slots[i].positions);
            free(r->slots[i].padding);
            free(r->slots[i].keys);
            free(r->slots[i].boxes);
            free(r->slots[i].flips);
            free(r->slots[i].views);
            free(r->slots[i].places);
            free(r->slots[i].sizes);
            free(r->slots[i].offsets);
            free(r->slots[i].mhot);
            free(r->slots[i].mlist);
            free(r->slots[i].mcounts);
            free(r->slots[i].masks);
        }
    free(r->slots);
    r->slots = NULL;
    if (r->rmem.ptr)
        rf_ringmem_free(be->ops, be->b, &r->rmem);
}

int pl_mem_cache(pl_mem *m, const rf_dataset *ds, int odirect, int tokens, uint64_t *storage,
                 rf_err *err)
{
    char why[160] = "";
    uint64_t b0 = rf_io_acct_thread_bytes(); /* the O_DIRECT probe reads from storage */
    if (rf_pc_create(ds, odirect && !tokens, &m->pc, why, sizeof why))
        return rf_seterr(err, RF_ENOMEM, "no memory for the page-cache state");
    *storage += rf_io_acct_thread_bytes() - b0;
    if (odirect && tokens)
        pl_why_append(m->why, sizeof m->why,
                      "odirect: not for token files (read straight into the slots)");
    else if (odirect)
        pl_why_append(m->why, sizeof m->why, "odirect: %s", why);
    return 0;
}

void pl_mem_numa(pl_mem *m, uint32_t numa, const pl_backend *be)
{
    m->numa_nodes = rf_numa_nodes();
    m->numa_node = -1;
    if (numa != RF_NUMA_AUTO || m->numa_nodes < 2)
        return;
    int node = be->ops->numa_node(be->b);
    char why[160] = "";
    rf_numa_scope sc;
    if (node < 0) {
        pl_why_append(m->why, sizeof m->why, "numa: %u nodes, device node unknown: no placement",
                      m->numa_nodes);
    } else if (rf_numa_enter(node, &sc, why, sizeof why) == 0) {
        rf_numa_leave(&sc);
        m->numa_node = node;
        pl_why_append(m->why, sizeof m->why, "numa: threads and ring on node %d of %u", node,
                      m->numa_nodes);
    } else {
        pl_why_append(m->why, sizeof m->why, "numa: node %d: %s: no placement", node, why);
    }
}
