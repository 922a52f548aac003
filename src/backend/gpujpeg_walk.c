/* gpujpeg_walk.c — the CPU walker behind plain packets (gpujpeg.h): for a baseline JPEG
 * without restart markers, find where in the entropy-coded data each segment of the crop's
 * region starts, and the DC predictors there, without decoding pixels.
 *
 * DESIGN
 *  - A file without restart markers is one Huffman bit stream, so the walker must go through
 *    every MCU from the first up to the region's last one; it stops there. Nothing below the
 *    region is read. It does the least per symbol that still finds the next code: DC values
 *    are decoded (the predictors are what a segment needs), AC coefficients only skipped; no
 *    dequantization, no coefficient stores.
 *  - The entropy-coded data is destuffed once (memchr for 0xFF; stuffing is rare), then read
 *    through a 64-bit bit buffer refilled by one unaligned big-endian load whenever fewer than
 *    32 bits are left: no per-byte marker checks. 512 zero bytes after the data keep every
 *    load inside the buffer: a block consumes at most 64 codes of 31 bits, and the position is
 *    checked against the data's end after every block.
 *  - AC codes go through one table indexed by the next WALK_BITS bits that gives the code's
 *    length plus its extra bits' length and how far the coefficient index moves (EOB: to the
 *    end), so a coefficient costs one load, one lookup and two adds; longer codes take the
 *    canonical-code slow path rf_gj_symbol uses. Building a table costs ~2k lookups, so the
 *    last few are cached by their rf_gj_huff (most files of a data set share their tables).
 *  - A pattern that is no code, or data that ends before the region's last MCU, makes the
 *    file not eligible: the CPU path then decodes it and gives libjpeg's own error (the class
 *    and message the file gets without gpu_decode), never a packet of wrong bits. */
#include "backend/gpujpeg.h"

#include <stdlib.h>
#include <string.h>

#include "decode/jpeg_restart.h"

#include "base/common.h"

#define WALK_BITS 11
#define WALK_CACHE 4
#define WALK_PAD 512u

typedef struct walk_cache {
    rf_gj_huff key;
    /* (code + extra bits) | (index advance << 5) of the first code, the same of the second
     * << 12 when it too lies within the WALK_BITS bits (0: none); 0: the slow path */
    uint32_t fast[1u << WALK_BITS];
} walk_cache;

typedef struct walk_state {
    walk_cache cache[WALK_CACHE];
    uint32_t ncache, next; /* entries filled; the one replaced next */
    uint8_t *dat;          /* destuffed entropy-coded data + WALK_PAD zero bytes */
    size_t dat_cap;
    rf_gj_seg *seg;
    uint64_t seg_cap;
    uint64_t *row; /* per region row: first bit, end bit */
    uint64_t row_cap;
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

/* The symbol of the code at the top of the WALK_BITS-bit value v in *sym and its length, if
 * it is at most max bits long; else 0. */
static uint32_t prefix(const rf_gj_huff *t, uint32_t v, uint32_t max, uint32_t *sym)
{
    uint32_t e = t->look[v >> (WALK_BITS - RF_GJ_LOOKUP_BITS)], len = e >> 8;
    int32_t s = (int32_t)(e & 0xFF);
    if (!e)
        s = walk_slow(t, (uint64_t)v << (64 - WALK_BITS), RF_GJ_LOOKUP_BITS + 1, &len);
    if (s < 0 || len > max)
        return 0;
    *sym = (uint32_t)s;
    return len;
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

/* The fast AC table of t: every WALK_BITS-bit prefix that starts with a code of at most
 * WALK_BITS bits, and with a second code when the first one's code and extra bits leave room
 * for it: at q75-95 most AC codes and their extra bits are short, so pairs halve the lookups
 * that make up the walker's dependency chain. */
static void fast_build(const rf_gj_huff *t, uint32_t *f)
{
    const uint32_t mask = (1u << WALK_BITS) - 1;
    for (uint32_t v = 0; v <= mask; v++) {
        uint32_t s1, s2, l1 = prefix(t, v, WALK_BITS, &s1), l2 = 0;
        f[v] = l1 ? ac_entry(l1, s1) : 0;
        uint32_t used = f[v] & 31;
        if (l1 && used < WALK_BITS)
            l2 = prefix(t, (v << used) & mask, WALK_BITS - used, &s2);
        if (l2)
            f[v] |= ac_entry(l2, s2) << 12;
    }
}

static const uint32_t *fast_for(walk_state *s, const rf_gj_huff *t)
{
    for (uint32_t i = 0; i < s->ncache; i++)
        if (!memcmp(&s->cache[i].key, t, sizeof *t))
            return s->cache[i].fast;
    walk_cache *c = &s->cache[s->next];
    s->next = (s->next + 1) % WALK_CACHE;
    if (s->ncache < WALK_CACHE)
        s->ncache++;
    memcpy(&c->key, t, sizeof *t);
    fast_build(t, c->fast);
    return c->fast;
}

/* The walker's bit reader over destuffed bytes: the unread bits at the top of buf (n of them,
 * at least 32 after a refill), the next unloaded byte at p. Refilling only below 32 bits keeps
 * the memory load out of most symbols' dependency chain: a symbol is then a table lookup and
 * two shifts. */
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

/* One block: its DC difference added to *pred, its AC codes skipped. 1: a pattern that is no
 * code. A symbol takes at most 31 bits (a 16-bit code and 15 extra bits), so one refill to 32
 * or more covers it. */
static int walk_block(wbits *w, const walk_blk *b, int32_t *pred)
{
    wfill(w);
    uint32_t e = b->dc->look[w->buf >> (64 - RF_GJ_LOOKUP_BITS)], l = e >> 8;
    int32_t s = (int32_t)(e & 0xFF);
    if (!e && (s = walk_slow(b->dc, w->buf, RF_GJ_LOOKUP_BITS + 1, &l)) < 0)
        return 1;
    if (s) {
        uint32_t r = (uint32_t)(w->buf << l >> (64 - s));
        /* unsigned: corrupt data may add up past INT32_MAX, which must not be undefined */
        *pred = (int32_t)((uint32_t)*pred + (r < (1u << (s - 1)) ? r - (1u << s) + 1 : r));
    }
    wskip(w, l + (uint32_t)s);
    for (uint32_t k = 1; k < 64;) {
        wfill(w);
        e = b->fast[w->buf >> (64 - WALK_BITS)];
        if (e) { /* the second code counts only if the first left the block open */
            uint32_t n = e & 31, two = 0u - (uint32_t)(k + (e >> 5 & 127) < 64);
            k += (e >> 5 & 127) + (e >> 17 & two);
            wskip(w, n + (e >> 12 & 31 & two));
            continue;
        }
        int32_t rs = walk_slow(b->ac, w->buf, WALK_BITS + 1, &l);
        if (rs < 0)
            return 1;
        wskip(w, l + ((uint32_t)rs & 15));
        k += ac_advance((uint32_t)rs);
    }
    return 0;
}

/* Copy the entropy-coded data from `from` to its first marker into s->dat without its stuffed
 * zero bytes (0xFF, possibly fill 0xFFs, then 0x00 is one 0xFF data byte), then WALK_PAD
 * zeros; *n is the data's length. Returns 0 or RF_ENOMEM. */
static int destuff(walk_state *s, const uint8_t *j, size_t len, size_t from, size_t *n)
{
    if (rf_reserve(&s->dat, &s->dat_cap, len - from + WALK_PAD, 1))
        return RF_ENOMEM;
    size_t p = from, o = 0;
    while (p < len) {
        const uint8_t *ff = memchr(j + p, 0xFF, len - p);
        size_t k = ff ? (size_t)(ff - j) - p : len - p;
        memcpy(s->dat + o, j + p, k);
        o += k, p += k;
        if (!ff)
            break;
        size_t q = p + 1;
        while (q < len && j[q] == 0xFF)
            q++;
        if (q >= len || j[q] != 0x00)
            break; /* a marker: the end of the scan's data */
        s->dat[o++] = 0xFF;
        p = q + 1;
    }
    memset(s->dat + o, 0, WALK_PAD);
    *n = o;
    return 0;
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
    if (c == in->c0)
        s->row[2 * (r - in->r0)] = pos;
}

int rf_gj_walk(const rf_gj_walk_in *in, rf_region_buf *rb, rf_gj_walked *out)
{
    walk_state *s = state_of(rb);
    size_t data, n;
    if (!s || grow_out(s, in))
        return RF_ENOMEM;
    if (rf_jpeg_scan_data(in->jpeg, in->len, &data))
        return RF_GJ_NOT_ELIGIBLE;
    if (destuff(s, in->jpeg, in->len, data, &n))
        return RF_ENOMEM;
    if (n > (UINT32_MAX >> 3) - WALK_PAD)
        return RF_GJ_NOT_ELIGIBLE; /* segment offsets are 32-bit bit positions */
    walk_blk bl[10];
    uint32_t nb = mcu_blocks(s, in, bl), nseg = 0;
    uint64_t limit = (uint64_t)n * 8;
    int32_t pred[3] = {0, 0, 0};
    wbits w = {0, 0, s->dat};
    for (uint32_t r = 0; r < in->r1; r++) {
        int region = r >= in->r0;
        uint32_t cols = region && r + 1 == in->r1 ? in->c1 : in->cols; /* stop at the last MCU */
        for (uint32_t c = 0; c < cols; c++) {
            if (region && c >= in->c0 && c < in->c1 && (c - in->c0) % RF_GJ_SEG_MCUS == 0)
                seg_add(s, in, &nseg, r, c, wpos(&w, s->dat), pred);
            for (uint32_t b = 0; b < nb; b++)
                if (walk_block(&w, &bl[b], &pred[bl[b].comp]) || wpos(&w, s->dat) > limit)
                    return RF_GJ_NOT_ELIGIBLE;
            if (region && c + 1 == in->c1)
                s->row[2 * (r - in->r0) + 1] = wpos(&w, s->dat);
        }
    }
    out->data = s->dat;
    out->seg = s->seg;
    out->nseg = nseg;
    out->row = s->row;
    return 0;
}
