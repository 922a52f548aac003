/* gpujpeg_walk.c — the CPU walker behind plain packets (gpujpeg.h): for a baseline JPEG without
 * restart markers, where each segment of the crop's region starts in the entropy-coded data,
 * with the DC predictors there (docs/gpu-decode.md, "Files without restart markers").
 *
 * DESIGN
 *  - The walk decodes DC values (segments need the predictors) and only skips AC codes, from
 *    the first MCU to the region's last, then stops.
 *  - The data is destuffed once and read through a 64-bit buffer refilled by unaligned loads.
 *    WALK_PAD zero bytes after it keep every load inside (a block takes at most 64 codes of 31
 *    bits; the position is checked against the end after every block).
 *  - A pattern that is no code, or data that end before the region's last MCU, makes the file
 *    not eligible: the CPU path then gives libjpeg's own error, never a packet of wrong bits. */
#include "backend/gpujpeg.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "decode/jpeg_restart.h"
#include "loaders/sync_index.h"

#include "base/common.h"

#define WALK_BITS 11
#define WALK_CACHE 8
#define WALK_PAD 512u

typedef struct walk_cache {
    rf_gj_huff key;
    uint64_t hash; /* key_hash(&key) */
    uint64_t used; /* the walk_state clock at its last use; 0: empty */
    /* (code + extra bits) | (index advance << 5) of the first code, the same of the second
     * << 12 when it too lies within the WALK_BITS bits (0: none); 0: the slow path */
    uint32_t fast[1u << WALK_BITS];
} walk_cache;

typedef struct walk_state {
    walk_cache cache[WALK_CACHE];
    uint64_t clock; /* lookups so far (the cache's recency) */
    uint8_t *dat;          /* destuffed entropy-coded data + WALK_PAD zero bytes */
    size_t dat_cap;
    rf_gj_seg *seg;
    uint64_t seg_cap;
    uint64_t *row; /* per region row: first bit, end bit */
    uint64_t row_cap;
    /* a sync-point build's: where destuffing removed bytes (destuffed offset of the 0xFF data
     * byte, bytes removed up to and including its group), and the points */
    uint64_t *stuff;
    uint64_t stuff_cap, nstuff;
    uint8_t *points;
    size_t points_cap;
} walk_state;

/* One block's tables as the walker uses them. */
typedef struct walk_blk {
    const rf_gj_huff *dc, *ac;
    const uint32_t *fast;
    uint32_t comp;
} walk_blk;

static void walk_free(void *w)
{
    walk_state *s = w;
    free(s->dat);
    free(s->seg);
    free(s->row);
    free(s->stuff);
    free(s->points);
    free(s);
}

/* A code longer than `from - 1` bits at the top of w: its symbol with *len set, or -1. */
static int32_t walk_slow(const rf_gj_huff *t, uint64_t w, uint32_t from, uint32_t *len)
{
    for (uint32_t l = from; l <= 16; l++) {
        int32_t code = (int32_t)(w >> (64 - l));
        if (code <= t->maxcode[l]) {
            *len = l;
            return t->vals[(code + t->valoff[l]) & 0xFF];
        }
    }
    return -1;
}

/* How far an AC symbol moves the coefficient index: past its run and its coefficient, 16
 * zeros for ZRL, to the block's end for EOB. */
static uint32_t ac_advance(uint32_t sym)
{
    uint32_t r = sym >> 4, s = sym & 15;
    return s ? r + 1 : r == 15 ? 16 : 64;
}

/* An AC symbol's entry: its bits (code and extra) and how far the coefficient index moves. */
static uint32_t ac_entry(uint32_t len, uint32_t sym)
{
    return (len + (sym & 15)) | ac_advance(sym) << 5;
}

/* Every WALK_BITS-bit prefix that starts with a code of at most WALK_BITS bits: its entry in
 * one[] and its code's length in len[] (0: a longer code or none). Codes are enumerated in
 * canonical order, so each fills its range of prefixes at once. */
static void fast_singles(const rf_gj_huff *t, uint32_t *one, uint8_t *len)
{
    memset(one, 0, sizeof(uint32_t) << WALK_BITS);
    memset(len, 0, 1u << WALK_BITS);
    int32_t code = 0;
    for (uint32_t l = 1; l <= WALK_BITS; l++, code <<= 1) {
        for (; code <= t->maxcode[l]; code++) {
            uint32_t sym = t->vals[(code + t->valoff[l]) & 0xFF], span = 1u << (WALK_BITS - l);
            uint32_t first = (uint32_t)code << (WALK_BITS - l), e = ac_entry(l, sym);
            for (uint32_t k = 0; k < span; k++)
                one[first + k] = e, len[first + k] = (uint8_t)l;
        }
    }
}

/* The fast AC table of t: per WALK_BITS-bit prefix, a code and, when the first leaves room and
 * is no EOB, a second one: pairs halve the lookups in the walker's dependency chain. An entry
 * holds both codes' bits and advance (bits 0-11, while the block has room for any pair) and the
 * first code's alone (bits 12-23, near the block's end). */
static void fast_build(const rf_gj_huff *t, uint32_t *f)
{
    const uint32_t mask = (1u << WALK_BITS) - 1;
    uint32_t one[1u << WALK_BITS];
    uint8_t len[1u << WALK_BITS];
    fast_singles(t, one, len);
    for (uint32_t v = 0; v <= mask; v++) {
        uint32_t e = one[v], used = e & 31, pair = e;
        if (e && used < WALK_BITS && (e >> 5) != 64) {
            uint32_t v2 = (v << used) & mask;
            if (len[v2] && len[v2] <= WALK_BITS - used)
                pair = (used + (one[v2] & 31)) | ((e >> 5) + (one[v2] >> 5)) << 5;
        }
        f[v] = e ? pair | e << 12 : 0;
    }
}

/* What identifies a table's codes: the canonical code lengths and the symbols. */
#define KEY_AT offsetof(rf_gj_huff, maxcode)
#define KEY_LEN (sizeof(rf_gj_huff) - KEY_AT)

static uint64_t key_hash(const rf_gj_huff *t)
{
    const uint8_t *p = (const uint8_t *)t + KEY_AT;
    uint64_t h = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i + 8 <= KEY_LEN; i += 8) {
        uint64_t v;
        memcpy(&v, p + i, 8);
        h = (h ^ v) * 0xFF51AFD7ED558CCDull;
    }
    return h ^ h >> 29;
}

/* The fast table of t from the cache, built into the least recently used entry when missing:
 * files of one encoder share their tables, and files with optimized tables, each with its own,
 * must not push those out. */
static const uint32_t *fast_for(walk_state *s, const rf_gj_huff *t)
{
    uint64_t h = key_hash(t);
    walk_cache *old = &s->cache[0];
    s->clock++;
    for (uint32_t i = 0; i < WALK_CACHE; i++) {
        walk_cache *c = &s->cache[i];
        if (c->used && c->hash == h && !memcmp((const uint8_t *)&c->key + KEY_AT,
                                               (const uint8_t *)t + KEY_AT, KEY_LEN)) {
            c->used = s->clock;
            return c->fast;
        }
        if (c->used < old->used)
            old = c;
    }
    old->hash = h, old->used = s->clock;
    memcpy(&old->key, t, sizeof *t);
    fast_build(t, old->fast);
    return old->fast;
}

/* The walker's bit reader over destuffed bytes: n unread bits at the top of buf (at least 32
 * after a refill), the next byte at p. Refilling only below 32 bits keeps the load out of most
 * symbols' dependency chain. */
typedef struct wbits {
    uint64_t buf;
    uint32_t n;
    const uint8_t *p;
} wbits;

static inline void wfill(wbits *w)
{
    if (w->n < 32) {
        uint64_t v;
        memcpy(&v, w->p, 8);
        w->buf |= __builtin_bswap64(v) >> w->n;
        w->p += (63 - w->n) >> 3;
        w->n |= 56;
    }
}

static inline void wskip(wbits *w, uint32_t k)
{
    w->buf <<= k;
    w->n -= k;
}

/* Bit position of the next unread bit, from the data's start d. */
static inline uint64_t wpos(const wbits *w, const uint8_t *d)
{
    return (uint64_t)(w->p - d) * 8 - w->n;
}

/* An AC code longer than WALK_BITS bits, skipped by the canonical-code path. 1: no code. */
static inline int walk_ac_slow(wbits *w, const rf_gj_huff *ac, uint32_t *k)
{
    uint32_t l;
    int32_t rs = walk_slow(ac, w->buf, WALK_BITS + 1, &l);
    if (rs < 0)
        return 1;
    wskip(w, l + ((uint32_t)rs & 15));
    *k += ac_advance((uint32_t)rs);
    return 0;
}

/* One block: its DC difference added to *pred, its AC codes skipped. 1: a pattern that is no
 * code. A symbol takes at most 31 bits, so one refill covers it. The reader is copied in and out
 * so it stays in registers (through a pointer it lived in memory, in every code's chain). */
static inline int walk_block(wbits *wp, const walk_blk *b, int32_t *pred)
{
    wbits w = *wp;
    wfill(&w);
    uint32_t e = b->dc->look[w.buf >> (64 - RF_GJ_LOOKUP_BITS)], l = e >> 8;
    int32_t s = (int32_t)(e & 0xFF);
    if (!e && (s = walk_slow(b->dc, w.buf, RF_GJ_LOOKUP_BITS + 1, &l)) < 0)
        return 1;
    if (s) {
        uint32_t r = (uint32_t)(w.buf << l >> (64 - s));
        /* unsigned: corrupt data may add up past INT32_MAX, which must not be undefined */
        *pred = (int32_t)((uint32_t)*pred + (r < (1u << (s - 1)) ? r - (1u << s) + 1 : r));
    }
    wskip(&w, l + (uint32_t)s);
    uint32_t k = 1;
    /* A pair's first code moves the index by 16 at most unless it is an EOB, which has no
     * pair: below index 48 both codes always count, so an entry is two masks and two adds. */
    while (k < 48) {
        wfill(&w);
        e = b->fast[w.buf >> (64 - WALK_BITS)];
        if (!e && walk_ac_slow(&w, b->ac, &k))
            return 1;
        k += e >> 5 & 127;
        wskip(&w, e & 31);
    }
    while (k < 64) { /* near the end: the second code counts only if the first left room */
        wfill(&w);
        e = b->fast[w.buf >> (64 - WALK_BITS)];
        if (!e && walk_ac_slow(&w, b->ac, &k))
            return 1;
        e >>= k + (e >> 17 & 127) < 64 ? 0 : 12;
        k += e >> 5 & 127;
        wskip(&w, e & 31);
    }
    *wp = w;
    return 0;
}

/* Copy the stuffed bytes [from, to) of a scan's entropy-coded data (from: a data byte) to d
 * without their stuffing (0xFF, fill 0xFFs, then 0x00 is one 0xFF data byte); a 0xFF data
 * byte at the end takes its stuffing along, a marker ends the copy. *n: the bytes written.
 * rec (NULL: none): note where bytes were removed (rec->stuff), for a sync-point build's
 * positions. */
static int unstuff(const uint8_t *j, size_t len, size_t from, size_t to, uint8_t *d, size_t *n,
                   walk_state *rec)
{
    size_t p = from, o = 0;
    if (rec)
        rec->nstuff = 0;
    while (p < to) {
        const uint8_t *ff = memchr(j + p, 0xFF, to - p);
        size_t k = ff ? (size_t)(ff - j) - p : to - p;
        memcpy(d + o, j + p, k);
        o += k, p += k;
        if (!ff)
            break;
        size_t q = p + 1;
        while (q < len && j[q] == 0xFF)
            q++;
        if (q >= len || j[q] != 0x00)
            break; /* a marker: the end of the scan's data */
        if (rec) {
            if (rf_grow(&rec->stuff, &rec->stuff_cap, 2 * (rec->nstuff + 1), sizeof *rec->stuff))
                return RF_ENOMEM;
            uint64_t before = rec->nstuff ? rec->stuff[2 * rec->nstuff - 1] : 0;
            rec->stuff[2 * rec->nstuff] = o;
            rec->stuff[2 * rec->nstuff + 1] = before + (q - p);
            rec->nstuff++;
        }
        d[o++] = 0xFF;
        p = q + 1;
    }
    *n = o;
    return 0;
}

/* The entropy-coded data from `from` to its first marker into s->dat without its stuffing,
 * then WALK_PAD zeros; *n its length. record: keep the stuffing's places (unstuff). */
static int destuff(walk_state *s, const uint8_t *j, size_t len, size_t from, size_t *n,
                   int record)
{
    if (rf_reserve(&s->dat, &s->dat_cap, len - from + WALK_PAD, 1))
        return RF_ENOMEM;
    s->nstuff = 0;
    int rc = unstuff(j, len, from, len, s->dat, n, record ? s : NULL);
    if (!rc)
        memset(s->dat + *n, 0, WALK_PAD);
    return rc;
}

static walk_state *state_of(rf_region_buf *rb)
{
    if (!rb->walk) {
        rb->walk = calloc(1, sizeof(walk_state));
        rb->walk_free = walk_free;
    }
    return rb->walk;
}

/* The blocks of one MCU in scan order (component by component, rows of h blocks). */
static uint32_t mcu_blocks(walk_state *s, const rf_gj_walk_in *in, walk_blk *bl)
{
    uint32_t nb = 0;
    for (uint32_t ci = 0; ci < in->p->ncomp; ci++) {
        const rf_gj_comp *c = &in->p->comp[ci];
        walk_blk b = {in->huff + c->dc, in->huff + c->ac, fast_for(s, in->huff + c->ac), ci};
        for (uint32_t k = 0; k < c->h * c->v; k++)
            bl[nb++] = b;
    }
    return nb;
}

static int grow_out(walk_state *s, const rf_gj_walk_in *in)
{
    uint64_t rows = in->r1 - in->r0, per = (in->c1 - in->c0 + RF_GJ_SEG_MCUS - 1) / RF_GJ_SEG_MCUS;
    return rf_grow(&s->seg, &s->seg_cap, rows * per, sizeof *s->seg) ||
           rf_grow(&s->row, &s->row_cap, 2 * rows, sizeof *s->row);
}

/* Record a segment starting at MCU (r, c) of the image, bit pos, with predictors pred. */
static void seg_add(walk_state *s, const rf_gj_walk_in *in, uint32_t *nseg, uint32_t r,
                    uint32_t c, uint64_t pos, const int32_t pred[3])
{
    rf_gj_seg *sg = &s->seg[(*nseg)++];
    sg->bit = (uint32_t)pos; /* data-relative here; the packer makes it packet-relative */
    memcpy(sg->pred, pred, sizeof sg->pred);
    sg->mrow = r - in->r0, sg->mcol = c - in->c0;
    sg->count = RF_MIN(RF_GJ_SEG_MCUS, in->c1 - c);
    sg->skip = 0;
    if (c == in->c0)
        s->row[2 * (r - in->r0)] = pos;
}

/* ---- with a sync-point index ---------------------------------------------------------------- */

/* Stuffed offset, from the data's start, of destuffed byte d (the first byte of its group
 * when it is a 0xFF data byte): d plus the bytes removed before it. */
static uint64_t stuffed_at(const walk_state *s, uint64_t d)
{
    uint64_t lo = 0, hi = s->nstuff;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (s->stuff[2 * mid] < d)
            lo = mid + 1;
        else
            hi = mid;
    }
    return d + (lo ? s->stuff[2 * lo - 1] : 0);
}

/* A span near RF_SYNC_SPAN_BYTES of entropy-coded data, from the whole scan's density. */
static uint32_t span_for(uint64_t data_bytes, uint64_t mcus, uint32_t cols)
{
    uint64_t span = data_bytes ? (RF_SYNC_SPAN_BYTES * mcus + data_bytes / 2) / data_bytes : cols;
    return (uint32_t)RF_MAX(1, RF_MIN(span, (uint64_t)cols));
}

int rf_gj_sync_walk(const rf_gj_walk_in *in, rf_region_buf *rb, rf_sync_entry *e)
{
    walk_state *s = state_of(rb);
    size_t data, n;
    if (!s)
        return RF_ENOMEM;
    if (rf_jpeg_scan_data(in->jpeg, in->len, &data))
        return RF_GJ_NOT_ELIGIBLE;
    if (destuff(s, in->jpeg, in->len, data, &n, 1))
        return RF_ENOMEM;
    uint32_t span = span_for(n, (uint64_t)in->rows * in->cols, in->cols);
    uint32_t per = (in->cols + span - 1) / span;
    uint64_t np = (uint64_t)in->rows * per;
    if (rf_reserve(&s->points, &s->points_cap, (size_t)np * RF_SYNC_POINT, 1))
        return RF_ENOMEM;
    walk_blk bl[10];
    uint32_t nb = mcu_blocks(s, in, bl);
    uint64_t limit = (uint64_t)n * 8, k = 0;
    int32_t pred[3] = {0, 0, 0};
    wbits w = {0, 0, s->dat};
    for (uint32_t r = 0; r < in->rows; r++)
        for (uint32_t c = 0; c < in->cols; c++) {
            if (c % span == 0) {
                uint64_t pos = wpos(&w, s->dat);
                uint64_t bit = (data + stuffed_at(s, pos >> 3)) * 8 + (pos & 7);
                if (bit > UINT32_MAX)
                    return RF_GJ_NOT_ELIGIBLE;
                rf_sync_put_point(s->points + k++ * RF_SYNC_POINT, (uint32_t)bit, pred);
            }
            for (uint32_t b = 0; b < nb; b++)
                if (walk_block(&w, &bl[b], &pred[bl[b].comp]) || wpos(&w, s->dat) > limit)
                    return RF_GJ_NOT_ELIGIBLE;
        }
    e->span = span, e->cols = in->cols, e->rows = in->rows, e->ncomp = in->p->ncomp;
    e->npoints = (uint32_t)np;
    e->points = s->points;
    return 0;
}

/* A point's byte, bounded by the file. */
static uint64_t point_bit(const rf_sync_entry *e, uint32_t k, int32_t pred[3])
{
    uint32_t bit;
    int32_t dummy[3];
    rf_sync_point(e, k, &bit, pred ? pred : dummy);
    return bit;
}

/* The region rows' segments from the entry's points: 0, or 1 when the entry does not fit the
 * file (its grid, its points' bytes), -1 out of memory. */
static int walk_indexed(walk_state *s, const rf_gj_walk_in *in, const rf_sync_entry *e,
                        rf_gj_walked *out)
{
    size_t data;
    if (e->status != RF_SYNC_POINTS || e->len != in->len || e->cols != in->cols ||
        e->rows != in->rows || e->ncomp != in->p->ncomp ||
        rf_jpeg_scan_data(in->jpeg, in->len, &data))
        return 1;
    uint32_t N = e->span, per = rf_sync_per_row(e), k0 = in->c0 / N, k1 = (in->c1 - 1) / N;
    uint32_t rows = in->r1 - in->r0;
    /* the stuffed bytes each row needs: from its first point to the point after its last */
    uint64_t total = 0;
    for (uint32_t r = in->r0; r < in->r1; r++) {
        uint32_t first = r * per + k0, after = r * per + k1 + 1;
        uint64_t b0 = point_bit(e, first, NULL) >> 3;
        uint64_t b1 = after < e->npoints ? (point_bit(e, after, NULL) + 7) >> 3 : in->len;
        if (b0 < data || b0 > b1 || b1 > in->len)
            return 1;
        total += b1 - b0;
    }
    if (rf_reserve(&s->dat, &s->dat_cap, (size_t)total + WALK_PAD, 1) ||
        rf_grow(&s->seg, &s->seg_cap, (uint64_t)rows * (k1 - k0 + 1), sizeof *s->seg) ||
        rf_grow(&s->row, &s->row_cap, 2 * (uint64_t)rows, sizeof *s->row))
        return -1;
    uint64_t o = 0;
    uint32_t nseg = 0;
    for (uint32_t r = in->r0; r < in->r1; r++) {
        uint32_t i = r - in->r0;
        for (uint32_t k = k0; k <= k1; k++) {
            uint32_t idx = r * per + k;
            int32_t pred[3];
            uint64_t bit = point_bit(e, idx, pred);
            uint64_t next = k < k1                  ? point_bit(e, idx + 1, NULL) >> 3
                            : idx + 1 < e->npoints ? (point_bit(e, idx + 1, NULL) + 7) >> 3
                                                    : in->len;
            if ((bit >> 3) > next || next > in->len)
                return 1;
            uint32_t first = RF_MAX(k * N, in->c0), end = RF_MIN((k + 1) * N, in->c1);
            rf_gj_seg *sg = &s->seg[nseg++];
            sg->bit = (uint32_t)(o * 8 + (bit & 7));
            memcpy(sg->pred, pred, sizeof sg->pred);
            sg->mrow = i, sg->mcol = first - in->c0, sg->count = end - first;
            sg->skip = first - k * N;
            if (k == k0)
                s->row[2 * i] = sg->bit;
            size_t got;
            (void)unstuff(in->jpeg, in->len, (size_t)(bit >> 3), (size_t)next, s->dat + o, &got,
                          NULL);
            o += got;
        }
        s->row[2 * i + 1] = o * 8;
    }
    memset(s->dat + o, 0, WALK_PAD);
    out->data = s->dat;
    out->seg = s->seg;
    out->nseg = nseg;
    out->row = s->row;
    return 0;
}

/* ---- the walk -------------------------------------------------------------------------------- */

int rf_gj_walk(const rf_gj_walk_in *in, rf_region_buf *rb, rf_gj_walked *out)
{
    walk_state *s = state_of(rb);
    size_t data, n;
    if (!s || grow_out(s, in))
        return RF_ENOMEM;
    if (rb->sync) {
        int ix = walk_indexed(s, in, rb->sync, out);
        if (ix < 0)
            return RF_ENOMEM;
        rb->sync_result = ix ? RF_SYNC_STALE : RF_SYNC_USED;
        if (!ix)
            return 0;
    }
    if (rf_jpeg_scan_data(in->jpeg, in->len, &data))
        return RF_GJ_NOT_ELIGIBLE;
    if (destuff(s, in->jpeg, in->len, data, &n, 0))
        return RF_ENOMEM;
    if (n > (UINT32_MAX >> 3) - WALK_PAD)
        return RF_GJ_NOT_ELIGIBLE; /* segment offsets are 32-bit bit positions */
    walk_blk bl[10];
    uint32_t nb = mcu_blocks(s, in, bl), nseg = 0;
    uint64_t limit = (uint64_t)n * 8;
    int32_t pred[3] = {0, 0, 0};
    wbits w = {0, 0, s->dat};
    for (uint64_t m = 0; m < in->mcus; m++) {
        uint32_t r = (uint32_t)(m / in->cols), c = (uint32_t)(m % in->cols);
        int region = r >= in->r0 && r < in->r1 && c >= in->c0 && c < in->c1;
        if (region && (c - in->c0) % RF_GJ_SEG_MCUS == 0)
            seg_add(s, in, &nseg, r, c, wpos(&w, s->dat), pred);
        for (uint32_t b = 0; b < nb; b++)
            if (walk_block(&w, &bl[b], &pred[bl[b].comp]) || wpos(&w, s->dat) > limit)
                return RF_GJ_NOT_ELIGIBLE;
        if (region && c + 1 == in->c1)
            s->row[2 * (r - in->r0) + 1] = wpos(&w, s->dat);
    }
    out->data = s->dat;
    out->seg = s->seg;
    out->nseg = nseg;
    out->row = s->row;
    return 0;
}
