/* gpujpeg_place.c — the GPU decode's side of decode.h's placement interface: rf_decode_packet
 * offers each sample to rf_gj_pack through rf_decode_placed, and rf_decode_planes turns an
 * engine packet into the plane list rf_decode_raw fills. Everything that reads or writes a
 * packet is here or in gpujpeg.c, so the dependency runs one way, backend/ -> decode/. */
#include "backend/gpujpeg.h"

#include <string.h>

#include "base/hash.h"
#include "loaders/sync_index.h"

/* What rf_decode_packet's caller gave, behind rf_decode_place's ctx. */
typedef struct gj_place_ctx {
    rf_gj_place place;
    void *ctx;
    int engine;
} gj_place_ctx;

static int gj_pack(void *ctx, const struct jpeg_decompress_struct *ci, const uint8_t *jpeg,
                   size_t len, const rf_place_out *outs, uint32_t n, const rf_transform *t,
                   struct rf_region_buf *rb, uint32_t *bytes)
{
    const gj_place_ctx *g = ctx;
    return rf_gj_pack(ci, jpeg, len, outs, n, t, g->engine, rb, g->place, g->ctx, bytes);
}

static uint8_t *gj_pixels(void *ctx, size_t bytes)
{
    const gj_place_ctx *g = ctx;
    return g->place(g->ctx, bytes, 0);
}

int rf_decode_packet(rf_decoder *d, const uint8_t *jpeg, size_t len, const rf_transform *t,
                     const rf_views *v, uint64_t seed, int engine, rf_gj_place place, void *ctx,
                     uint32_t *bytes, rf_decode_info *info, rf_err *err)
{
    gj_place_ctx g = {place, ctx, engine};
    const rf_decode_place pl = {gj_pack, gj_pixels, &g};
    return rf_decode_placed(d, jpeg, len, t, v, seed, &pl, bytes, info, err);
}

int rf_decode_planes(rf_decoder *d, const uint8_t *packet, uint8_t *scratch, rf_err *err)
{
    const rf_gj_packet *p = (const rf_gj_packet *)packet;
    if (p->magic != RF_GJ_MAGIC || !p->engine || p->scratch > RF_GJ_SCRATCH)
        return rf_seterr(err, RF_EINVAL, "not an engine packet");
    /* At most three planes are described; rf_decode_raw refuses other component counts
     * before it reads any. */
    rf_decode_plane planes[3] = {{0}};
    for (uint32_t c = 0; c < 3 && c < p->ncomp; c++)
        planes[c] = (rf_decode_plane){scratch + p->comp[c].plane, p->comp[c].bw * 8,
                                      p->comp[c].bh * 8};
    return rf_decode_raw(d, packet + p->off_data, p->data_bytes, p->ncomp, p->width, p->height,
                         planes, err);
}

static int sync_header(void *ctx, const struct jpeg_decompress_struct *ci, const uint8_t *jpeg,
                       size_t len, struct rf_region_buf *rb)
{
    return rf_gj_sync_build(ci, jpeg, len, rb, ctx);
}

int rf_decode_sync_entry(rf_decoder *d, const uint8_t *jpeg, size_t len, rf_sync_entry *e,
                         rf_err *err)
{
    uint64_t off = e->off;
    memset(e, 0, sizeof *e);
    e->off = off, e->len = len, e->hash = rf_xxh64(jpeg, len);
    e->status = RF_SYNC_NEEDS_NONE;
    if (len < 4 || jpeg[0] != 0xFF || jpeg[1] != 0xD8)
        return 0;
    int rc = rf_decode_header_then(d, jpeg, len, sync_header, e, err);
    if (rc == RF_ENOMEM)
        return rc;
    if (rc)
        e->status = RF_SYNC_UNREADABLE, e->npoints = 0, e->points = NULL;
    return 0;
}
