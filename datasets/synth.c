/* synth.c — see synth.h.
 *
 * DESIGN: everything derives from the seed through a local PRNG; there is no global state, so
 * any number of threads may render and encode at once. An image is built in an opponent colour
 * space (Y, Cb, Cr as floats) in three layers:
 *   1. a background: a sky/ground split or a linear gradient between two colours;
 *   2. shapes (ellipses, convex polygons, thin bands): a few large ones, then clutter of small
 *      ones, with flat colour plus shading, hard or soft edges, and each its own texture
 *      strength (the "gain" plane). Shapes are drawn by row spans: only the edge band computes
 *      coverage, the inside is a plain fill;
 *   3. noise fields made by a Laplacian-pyramid synthesis: white noise added at every level of
 *      a coarse-to-fine chain of 2x bilinear upsamplings, equal amplitude per octave, which
 *      gives the ~1/f amplitude spectrum of natural images. Coarse levels drive light and
 *      colour variation (L, A, B) and a texture-strength map (T); the four finest levels drive
 *      the fine luminance texture (F), scaled per pixel by gain * (1 + T).
 * Chroma (base colours, A, B) and the smooth fields L, T live at half resolution, as the 4:2:0
 * JPEG will keep chroma anyway; only Y, gain and F are full size. Floats are rounded once, at
 * the RGB conversion. The fine-texture amplitude is calibrated so that quality 90 gives about
 * 110 KB per image at ImageNet-like sizes (datasets/README.md has the figures). */
#include "synth.h"

#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

/* ---- PRNG (wyrand): 64-bit state, one multiply per output ----------------------------------- */

typedef struct {
    uint64_t s;
} synth_rng;

uint64_t rf_synth_mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t rng_next(synth_rng *r)
{
    r->s += 0xa0761d6478bd642full;
    __uint128_t t = (__uint128_t)r->s * (r->s ^ 0xe7037ed1a0b428dbull);
    return (uint64_t)(t >> 64) ^ (uint64_t)t;
}

/* Uniform in [0, 1). */
static double rng_unit(synth_rng *r)
{
    return (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

static double rng_range(synth_rng *r, double lo, double hi)
{
    return lo + (hi - lo) * rng_unit(r);
}

/* Approximately normal (sum of four uniforms, variance-corrected). */
static double rng_normal(synth_rng *r)
{
    double s = rng_unit(r) + rng_unit(r) + rng_unit(r) + rng_unit(r);
    return (s - 2.0) * 1.7320508075688772;
}

/* ---- sizes ------------------------------------------------------------------------------------ */

/* ImageNet's training set: most photos are 500 px on the long side (500x375, 500x333 and their
 * portrait forms); the rest spread over roughly 200..1000 px. The mixture below gives a mean
 * near 400x350 (datasets/README.md quotes the measured figures). */
void rf_synth_size(uint64_t seed, uint32_t *width, uint32_t *height)
{
    synth_rng r = {rf_synth_mix64(seed ^ 0x5153a1e5u)};
    double u = rng_unit(&r);
    double long_side, aspect; /* aspect = short / long */
    if (u < 0.52) {
        long_side = 500;
        double v = rng_unit(&r);
        aspect = v < 0.55 ? 0.75 : v < 0.85 ? 0.666 : rng_range(&r, 0.55, 1.0);
    } else {
        long_side = exp(log(315.0) + 0.42 * rng_normal(&r));
        if (long_side < 200)
            long_side = 200 + rng_unit(&r) * 60;
        if (long_side > 1000)
            long_side = 1000;
        aspect = rng_range(&r, 0.5, 1.0);
        if (rng_unit(&r) < 0.25)
            aspect = 1.0; /* squares are common among the smaller images */
    }
    double short_side = long_side * aspect;
    uint32_t l = (uint32_t)lround(long_side), s = (uint32_t)lround(short_side);
    if (s < 1)
        s = 1;
    if (rng_unit(&r) < 0.22) { /* portrait */
        *width = s;
        *height = l;
    } else {
        *width = l;
        *height = s;
    }
}

/* ---- pyramid noise ------------------------------------------------------------------------- */

#define PYR_LEVELS_MAX 24

/* Add amp * uniform(-1, 1) noise to n floats. */
static void add_noise(float *p, size_t n, float amp, synth_rng *r)
{
    if (amp == 0.0f)
        return;
    const float k = amp * (1.0f / 2147483648.0f);
    size_t i = 0;
    for (; i + 1 < n; i += 2) {
        uint64_t v = rng_next(r);
        p[i] += k * (float)(int32_t)(uint32_t)v;
        p[i + 1] += k * (float)(int32_t)(uint32_t)(v >> 32);
    }
    if (i < n)
        p[i] += k * (float)(int32_t)(uint32_t)rng_next(r);
}

/* 2x bilinear upsampling from iw x ih to ow x oh (ow is 2*iw or 2*iw-1, same for oh): each
 * output pixel weighs its nearest input 9/16, the two side neighbours 3/16, the diagonal 1/16.
 * Separable: a vertical blend of two input rows into `row` (iw + 2 floats, edge-padded), then
 * the horizontal pairs. Noise of amplitude amp is added on the way (one pass over memory). */
static void upsample2(const float *in, uint32_t iw, uint32_t ih, float *out, uint32_t ow,
                      uint32_t oh, float *row, float amp, synth_rng *r)
{
    for (uint32_t y = 0; y < oh; y++) {
        uint32_t i = y >> 1;
        uint32_t j = (y & 1) ? (i + 1 < ih ? i + 1 : i) : (i > 0 ? i - 1 : 0);
        const float *a = in + (size_t)i * iw, *b = in + (size_t)j * iw;
        for (uint32_t x = 0; x < iw; x++)
            row[x + 1] = 0.75f * a[x] + 0.25f * b[x];
        row[0] = row[1];
        row[iw + 1] = row[iw];
        float *o = out + (size_t)y * ow;
        uint32_t pairs = ow / 2;
        for (uint32_t x = 0; x < pairs; x++) {
            o[2 * x] = 0.75f * row[x + 1] + 0.25f * row[x];
            o[2 * x + 1] = 0.75f * row[x + 1] + 0.25f * row[x + 2];
        }
        if (ow & 1)
            o[ow - 1] = 0.75f * row[iw] + 0.25f * row[iw - 1];
        add_noise(o, ow, amp, r);
    }
}

/* One noise field at level `stop` of the pyramid of a w x h image (level k has dimensions
 * ceil(w / 2^k) x ceil(h / 2^k)): white noise of amplitude amp(k) added at every level from
 * the coarsest (about 4 px) down to `stop`, each level upsampled 2x into the next. Equal
 * amplitudes per level give a ~1/f amplitude spectrum. The result lands in out; tmp must hold
 * the level below (ceil(w/2^(stop+1)) x ceil(h/2^(stop+1)) floats), row max(w)+2. */
static void field(uint32_t w, uint32_t h, int stop, const float *amp, synth_rng *r, float *out,
                  float *tmp, float *row)
{
    uint32_t lw[PYR_LEVELS_MAX], lh[PYR_LEVELS_MAX];
    int n = 0;
    lw[0] = w;
    lh[0] = h;
    while (n + 1 < PYR_LEVELS_MAX && (lw[n] > 4 || lh[n] > 4)) {
        lw[n + 1] = (lw[n] + 1) / 2;
        lh[n + 1] = (lh[n] + 1) / 2;
        n++;
    }
    if (stop > n)
        stop = n;
    /* Levels alternate between the two buffers so that level `stop` lands in out. */
    float *cur = ((n - stop) & 1) ? tmp : out;
    size_t cn = (size_t)lw[n] * lh[n];
    memset(cur, 0, cn * sizeof(float));
    add_noise(cur, cn, 2.0f * amp[n < 8 ? n : 7], r);
    for (int k = n - 1; k >= stop; k--) {
        float *nxt = ((k - stop) & 1) ? tmp : out;
        upsample2(cur, lw[k + 1], lh[k + 1], nxt, lw[k], lh[k], row, amp[k < 8 ? k : 7], r);
        cur = nxt;
    }
}

/* ---- shapes ------------------------------------------------------------------------------- */

/* A target for coverage: two float planes of width w, values v0 and v1 blended in by coverage,
 * plus a linear shading term (s0 + x * sx for the row) added to v0. The luminance pass draws
 * (Y, gain) at full resolution; the chroma pass draws (Cb, Cr) at half resolution. */
typedef struct {
    float *p0, *p1;
    uint32_t w, h;
} target;

typedef struct {
    float v0, v1;
    float shade_x, shade_y, shade_c; /* shading = shade_c + x * shade_x + y * shade_y */
} paint;

/* Blend row y over [xa, xb) where coverage is partial (alpha from `cov`), and fill [ia, ib)
 * (inside that range) where it is full. */
static void span(const target *t, const paint *pt, int y, int xa, int xb, int ia, int ib,
                 float (*cov)(const void *, float, float), const void *shape)
{
    float *p0 = t->p0 + (size_t)y * t->w, *p1 = t->p1 + (size_t)y * t->w;
    float sh = pt->shade_c + (float)y * pt->shade_y;
    if (ia < xa)
        ia = xa;
    if (ib > xb)
        ib = xb;
    if (ib < ia)
        ib = ia;
    for (int x = xa; x < xb; x++) {
        if (x == ia) {
            for (; x < ib; x++) {
                p0[x] = pt->v0 + sh + (float)x * pt->shade_x;
                p1[x] = pt->v1;
            }
            if (x >= xb)
                break;
        }
        float a = cov(shape, (float)x, (float)y);
        if (a > 0.0f) {
            p0[x] += a * (pt->v0 + sh + (float)x * pt->shade_x - p0[x]);
            p1[x] += a * (pt->v1 - p1[x]);
        }
    }
}

static float clampf(float v, float lo, float hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static int clampi(double v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : (int)v;
}

typedef struct {
    float cx, cy, ct, st, irx, iry, rmin, isoft, soft;
} ellipse;

static float ellipse_cov(const void *sp, float x, float y)
{
    const ellipse *e = sp;
    float dx = x - e->cx, dy = y - e->cy;
    float u = (dx * e->ct + dy * e->st) * e->irx, v = (-dx * e->st + dy * e->ct) * e->iry;
    float d = (1.0f - sqrtf(u * u + v * v)) * e->rmin; /* approximate signed distance, px */
    return clampf(0.5f + d * e->isoft, 0.0f, 1.0f);
}

/* Solve q(dx) = s^2 for the ellipse row (q = A dx^2 + B dx + C); returns 0 when no solution. */
static int ellipse_row(double A, double B, double C, double s, double *lo, double *hi)
{
    double disc = B * B - 4.0 * A * (C - s * s);
    if (s <= 0.0 || disc < 0.0)
        return 0;
    double sq = sqrt(disc);
    *lo = (-B - sq) / (2.0 * A);
    *hi = (-B + sq) / (2.0 * A);
    return 1;
}

static void draw_ellipse(const target *t, const ellipse *e, const paint *pt)
{
    double ct = e->ct, st = e->st, ix2 = (double)e->irx * e->irx, iy2 = (double)e->iry * e->iry;
    double A = ct * ct * ix2 + st * st * iy2;
    double so = 1.0 + 0.5 * e->soft / e->rmin, si = 1.0 - 0.5 * e->soft / e->rmin;
    double ext = so / (e->irx < e->iry ? e->irx : e->iry);
    int y0 = clampi(ceil(e->cy - ext), 0, (int)t->h), y1 = clampi(floor(e->cy + ext) + 1, 0, (int)t->h);
    for (int y = y0; y < y1; y++) {
        double dy = y - e->cy;
        double B = 2.0 * dy * ct * st * (ix2 - iy2), C = dy * dy * (st * st * ix2 + ct * ct * iy2);
        double lo, hi, ilo = 0, ihi = -1;
        if (!ellipse_row(A, B, C, so, &lo, &hi))
            continue;
        if (!ellipse_row(A, B, C, si, &ilo, &ihi))
            ilo = ihi = 0;
        int xa = clampi(ceil(e->cx + lo), 0, (int)t->w), xb = clampi(floor(e->cx + hi) + 1, 0, (int)t->w);
        int ia = clampi(ceil(e->cx + ilo) + 1, 0, (int)t->w), ib = clampi(floor(e->cx + ihi), 0, (int)t->w);
        span(t, pt, y, xa, xb, ia, ib, ellipse_cov, e);
    }
}

#define POLY_MAX 8

typedef struct {
    int nv;
    float nx[POLY_MAX], ny[POLY_MAX], off[POLY_MAX]; /* inward unit normals, offsets */
    float minx, maxx, miny, maxy, soft, isoft;
} polygon;

static float polygon_cov(const void *sp, float x, float y)
{
    const polygon *p = sp;
    float d = 1e30f;
    for (int i = 0; i < p->nv; i++) {
        float di = p->nx[i] * x + p->ny[i] * y + p->off[i];
        d = di < d ? di : d;
    }
    return clampf(0.5f + d * p->isoft, 0.0f, 1.0f);
}

/* Convex polygon from vertices wound clockwise on screen (y down): inward normals (ey, -ex)
 * point right of each edge, into the polygon. */
static void polygon_init(polygon *p, const float *vx, const float *vy, int nv, float soft)
{
    p->nv = nv;
    p->soft = soft;
    p->isoft = 1.0f / soft;
    p->minx = p->maxx = vx[0];
    p->miny = p->maxy = vy[0];
    for (int i = 0; i < nv; i++) {
        int j = (i + 1) % nv;
        float ex = vx[j] - vx[i], ey = vy[j] - vy[i];
        float len = sqrtf(ex * ex + ey * ey) + 1e-6f;
        p->nx[i] = -ey / len;
        p->ny[i] = ex / len;
        p->off[i] = -(p->nx[i] * vx[i] + p->ny[i] * vy[i]);
        p->minx = vx[i] < p->minx ? vx[i] : p->minx;
        p->maxx = vx[i] > p->maxx ? vx[i] : p->maxx;
        p->miny = vy[i] < p->miny ? vy[i] : p->miny;
        p->maxy = vy[i] > p->maxy ? vy[i] : p->maxy;
    }
}

static void draw_polygon(const target *t, const polygon *p, const paint *pt)
{
    int y0 = clampi(ceil(p->miny - p->soft), 0, (int)t->h);
    int y1 = clampi(floor(p->maxy + p->soft) + 1, 0, (int)t->h);
    for (int y = y0; y < y1; y++) {
        /* Each edge bounds x on one side; intersect the bounds for "any coverage" (d > -soft/2)
         * and "full coverage" (d >= soft/2). */
        double olo = -1e9, ohi = 1e9, ilo = -1e9, ihi = 1e9;
        for (int i = 0; i < p->nv; i++) {
            double c = (double)p->ny[i] * y + p->off[i], nx = p->nx[i];
            double bo = (-0.5 * p->soft - c), bi = (0.5 * p->soft - c);
            if (fabs(nx) < 1e-9) {
                if (bo >= 0)
                    olo = 1e9;
                if (bi > 0)
                    ilo = 1e9;
            } else if (nx > 0) {
                olo = fmax(olo, bo / nx);
                ilo = fmax(ilo, bi / nx);
            } else {
                ohi = fmin(ohi, bo / nx);
                ihi = fmin(ihi, bi / nx);
            }
        }
        if (olo >= ohi)
            continue;
        int xa = clampi(floor(olo), 0, (int)t->w), xb = clampi(ceil(ohi) + 1, 0, (int)t->w);
        int ia = clampi(ceil(ilo) + 1, 0, (int)t->w), ib = clampi(floor(ihi), 0, (int)t->w);
        if (ilo >= ihi)
            ia = ib = 0;
        span(t, pt, y, xa, xb, ia, ib, polygon_cov, p);
    }
}

/* ---- the scene ---------------------------------------------------------------------------- */

/* Colour families of everyday photos as (Cb, Cr) centres, with a weight (how common) and a
 * luminance centre: greys, earth, foliage, sky, skin, reds, yellows, blues, oranges. */
static const struct {
    float cb, cr, y, weight;
} hues[] = {
    {0, 0, 128, 3.0f},    {-14, 12, 95, 3.0f},  {-20, -12, 90, 2.6f},
    {22, -12, 175, 1.5f}, {-10, 18, 160, 1.0f}, {-6, 38, 100, 0.7f},
    {-38, 8, 170, 0.6f},  {30, -4, 80, 0.7f},   {-28, 28, 140, 0.6f},
};
#define NHUES (sizeof hues / sizeof hues[0])
#define PALETTE_MAX 5

typedef struct {
    float y, cb, cr, gain;
} colour;

typedef struct {
    int hue[PALETTE_MAX];
    int n;
    float sat;
} palette;

static int pick_hue(synth_rng *r)
{
    float total = 0;
    for (size_t i = 0; i < NHUES; i++)
        total += hues[i].weight;
    float u = (float)rng_unit(r) * total;
    for (size_t i = 0; i < NHUES; i++) {
        if (u < hues[i].weight)
            return (int)i;
        u -= hues[i].weight;
    }
    return 0;
}

/* A scene uses a few colour families; with classes, the first one is the class's own. */
static void make_palette(palette *p, synth_rng *r, const rf_synth_opts *o)
{
    p->n = 3 + (int)(rng_next(r) % (PALETTE_MAX - 2));
    for (int i = 0; i < p->n; i++)
        p->hue[i] = pick_hue(r);
    if (o && o->classes)
        p->hue[0] = (int)(rf_synth_mix64(o->label * 0x9e3779b97f4a7c15ull + 17) % NHUES);
    p->sat = (float)rng_range(r, 0.45, 1.3);
}

static void random_colour(synth_rng *r, const palette *p, colour *c)
{
    int h = p->hue[rng_next(r) % (uint64_t)p->n];
    c->y = clampf(hues[h].y + (float)rng_normal(r) * 45.0f, 12.0f, 242.0f);
    c->cb = (hues[h].cb + (float)rng_normal(r) * 6.0f) * p->sat;
    c->cr = (hues[h].cr + (float)rng_normal(r) * 6.0f) * p->sat;
    c->gain = (float)exp(rng_range(r, log(0.35), log(1.7)));
}

typedef struct {
    float *Y, *G;   /* full resolution: base luminance, texture gain */
    float *Cb, *Cr; /* half resolution (cw x ch): base chroma */
    uint32_t w, h, cw, ch;
} planes;

/* Fill a plane pair with a linear ramp between a and b: t = clamp(t0 + x*tx + y*ty, 0, 1). */
static void ramp(float *p0, float *p1, uint32_t w, uint32_t h, float a0, float b0, float a1,
                 float b1, float t0, float tx, float ty)
{
    for (uint32_t y = 0; y < h; y++) {
        float *r0 = p0 + (size_t)y * w, *r1 = p1 + (size_t)y * w;
        float ty0 = t0 + (float)y * ty;
        for (uint32_t x = 0; x < w; x++) {
            float t = clampf(ty0 + (float)x * tx, 0.0f, 1.0f);
            r0[x] = a0 + t * (b0 - a0);
            r1[x] = a1 + t * (b1 - a1);
        }
    }
}

/* Background: a sky/ground split (blurred horizon, slightly tilted) or a plain linear gradient
 * between two colours. */
static void background(const planes *p, synth_rng *r, const palette *pal)
{
    colour a, b;
    random_colour(r, pal, &a);
    random_colour(r, pal, &b);
    float t0, tx, ty;
    if (rng_unit(r) < 0.5) {
        a.y = (float)rng_range(r, 140, 235);
        a.cb = (float)rng_range(r, -2, 28) * pal->sat;
        a.cr = (float)rng_range(r, -14, 2) * pal->sat;
        a.gain *= 0.3f;
        b.y = (float)rng_range(r, 40, 150);
        float y0 = (float)rng_range(r, 0.25, 0.75) * (float)p->h;
        float width = (float)exp(rng_range(r, log(1.5), log(40.0)));
        float tilt = (float)rng_range(r, -0.15, 0.15);
        ty = 1.0f / width;
        tx = tilt / width;
        t0 = 0.5f - (y0 - tilt * 0.5f * (float)p->w) / width;
    } else {
        float th = (float)rng_range(r, 0, 6.283185307), diag = (float)(p->w + p->h);
        tx = cosf(th) / diag;
        ty = sinf(th) / diag;
        t0 = 0.5f - 0.5f * ((float)p->w * tx + (float)p->h * ty);
    }
    ramp(p->Y, p->G, p->w, p->h, a.y, b.y, a.gain, b.gain, t0, tx, ty);
    ramp(p->Cb, p->Cr, p->cw, p->ch, a.cb, b.cb, a.cr, b.cr, t0, 2.0f * tx, 2.0f * ty);
}

/* Draw one shape in both passes: luminance and gain at full resolution, chroma at half. */
static void shape(const planes *p, synth_rng *r, const palette *pal, float m, float rmin_frac,
                  float rmax_frac)
{
    colour c;
    random_colour(r, pal, &c);
    float cx = (float)rng_range(r, -0.1, 1.1) * (float)p->w;
    float cy = (float)rng_range(r, -0.1, 1.1) * (float)p->h;
    /* Sizes log-uniform: many small objects, a few large ones. */
    float rad = (float)exp(rng_range(r, log(rmin_frac), log(rmax_frac))) * m;
    rad = rad < 1.5f ? 1.5f : rad;
    float soft = rng_unit(r) < 0.65 ? (float)rng_range(r, 0.7, 1.6)
                                    : (float)exp(rng_range(r, log(3.0), log(25.0)));
    float shading = (float)rng_normal(r) * 30.0f;
    float gth = (float)rng_range(r, 0, 6.283185307);
    float gx = cosf(gth) * shading / rad, gy = sinf(gth) * shading / rad;
    target full = {p->Y, p->G, p->w, p->h}, half = {p->Cb, p->Cr, p->cw, p->ch};
    paint pf = {c.y, c.gain, gx, gy, -(cx * gx + cy * gy)};
    paint ph = {c.cb, c.cr, 0, 0, 0};
    double kind = rng_unit(r);
    if (kind < 0.4) {
        float rx = rad, ry = rad * (float)rng_range(r, 0.3, 1.0), th = (float)rng_range(r, 0, 3.14159265);
        ellipse e = {cx, cy, cosf(th), sinf(th), 1.0f / rx, 1.0f / ry, ry, 1.0f / soft, soft};
        draw_ellipse(&full, &e, &pf);
        float hs = soft * 0.5f < 0.5f ? 0.5f : soft * 0.5f;
        ellipse eh = {cx * 0.5f - 0.25f, cy * 0.5f - 0.25f, e.ct, e.st, 2.0f / rx, 2.0f / ry,
                      ry * 0.5f, 1.0f / hs, hs};
        draw_ellipse(&half, &eh, &ph);
        return;
    }
    float vx[POLY_MAX], vy[POLY_MAX];
    int nv;
    if (kind < 0.85) {
        nv = 3 + (int)(rng_next(r) % 6);
        float a0 = (float)rng_range(r, 0, 6.283185307);
        for (int i = 0; i < nv; i++) { /* increasing angles: convex, clockwise on screen */
            float a = a0 + 6.283185307f * ((float)i + (float)rng_range(r, 0.1, 0.9)) / (float)nv;
            float rr = rad * (float)rng_range(r, 0.6, 1.0);
            vx[i] = cx + rr * cosf(a);
            vy[i] = cy + rr * sinf(a);
        }
    } else { /* a thin band: a pole, a branch, a line on a wall */
        nv = 4;
        float th = (float)rng_range(r, 0, 3.14159265), len = rad * 2.5f;
        float half_w = (float)rng_range(r, 1.0, 0.08 * rad + 1.5);
        float ux = cosf(th), uy = sinf(th);
        static const float px[4] = {-1, 1, 1, -1}, py[4] = {-1, -1, 1, 1};
        for (int i = 0; i < 4; i++) {
            vx[i] = cx + px[i] * len * ux - py[i] * half_w * uy;
            vy[i] = cy + px[i] * len * uy + py[i] * half_w * ux;
        }
    }
    polygon pg;
    polygon_init(&pg, vx, vy, nv, soft);
    draw_polygon(&full, &pg, &pf);
    for (int i = 0; i < nv; i++) {
        vx[i] = vx[i] * 0.5f - 0.25f;
        vy[i] = vy[i] * 0.5f - 0.25f;
    }
    polygon_init(&pg, vx, vy, nv, soft * 0.5f < 0.5f ? 0.5f : soft * 0.5f);
    draw_polygon(&half, &pg, &ph);
}

static uint8_t to_u8(float v)
{
    int i = (int)(v + 0.5f);
    return (uint8_t)(i < 0 ? 0 : i > 255 ? 255 : i);
}

/* Fine-texture amplitude per octave (Y units); tuned so that quality 90 gives about 110 KB at
 * ImageNet-like sizes (see datasets/README.md). */
#define SYNTH_FINE_AMP 168.0f
#define SYNTH_CLUTTER_MAX 160

/* Scratch floats for a w x h image: full-res Y, G, F and F's half-res ping-pong; half-res Cb,
 * Cr, L, T, A, B and their quarter-res ping-pong (shared); one row. */
static size_t scratch_floats(uint32_t w, uint32_t h, size_t *n, size_t *hn, size_t *qn)
{
    *n = (size_t)w * h;
    *hn = (size_t)((w + 1) / 2) * ((h + 1) / 2);
    *qn = (size_t)((w + 3) / 4) * ((h + 3) / 4);
    return 3 * *n + 7 * *hn + *qn + w + 2 + 64;
}

int rf_synth_image_ex(uint64_t seed, uint32_t width, uint32_t height, const rf_synth_opts *opts,
                      uint8_t *rgb)
{
    float texture = opts && opts->texture > 0.0f ? opts->texture : 1.0f;
    synth_rng r = {rf_synth_mix64(seed ^ 0x1a6e5eedu)};
    size_t n, hn, qn;
    float *mem = malloc(scratch_floats(width, height, &n, &hn, &qn) * sizeof(float));
    if (!mem)
        return -1;
    uint32_t cw = (width + 1) / 2, ch = (height + 1) / 2;
    float *F = mem + 2 * n, *hp = mem + 3 * n; /* half-res planes follow the full-res ones */
    planes p = {mem, mem + n, hp, hp + hn, width, height, cw, ch};
    float *L = hp + 2 * hn, *T = hp + 3 * hn, *A = hp + 4 * hn, *B = hp + 5 * hn;
    float *Fh = hp + 6 * hn, *quarter = hp + 7 * hn, *row = quarter + qn;

    palette pal;
    make_palette(&pal, &r, opts);
    float detail = (float)exp(rng_range(&r, log(0.7), log(1.4)));
    background(&p, &r, &pal);
    float m = (float)(width < height ? width : height);
    /* A few large objects, then clutter: many small hard-edged ones (leaves, stones, text). */
    int large = 3 + (int)(rng_next(&r) % 10);
    int small = (int)(rng_next(&r) % (SYNTH_CLUTTER_MAX + 1)) * (int)(rng_next(&r) % 101) / 100;
    for (int s = 0; s < large; s++)
        shape(&p, &r, &pal, m, 0.04f, 0.5f);
    for (int s = 0; s < small; s++)
        shape(&p, &r, &pal, m, 0.006f, 0.05f);

    /* Amplitude per level (index = level, 0 = full resolution). */
    float sat = pal.sat;
    const float amp_l[8] = {0, 7, 9, 10, 11, 12, 12, 12};
    const float amp_t[8] = {0, 0, 0, 0.2f, 0.3f, 0.3f, 0.3f, 0.3f};
    float ct = sat * (1.0f + 2.1f * texture);
    const float amp_c[8] = {0, 2.5f * ct, 2.5f * ct, 3 * sat, 4 * sat, 4 * sat, 4 * sat, 4 * sat};
    float fa = SYNTH_FINE_AMP * detail * texture;
    const float amp_f[8] = {0.5f * fa, fa, fa, 0.8f * fa, 0, 0, 0, 0};
    field(width, height, 1, amp_l, &r, L, quarter, row);
    field(width, height, 1, amp_t, &r, T, quarter, row);
    field(width, height, 1, amp_c, &r, A, quarter, row);
    field(width, height, 1, amp_c, &r, B, quarter, row);
    field(width, height, 0, amp_f, &r, F, Fh, row);

    /* Chroma per half-res pixel, then one pass over full-res rows. */
    for (size_t i = 0; i < hn; i++) {
        p.Cb[i] += A[i];
        p.Cr[i] += B[i];
    }
    for (uint32_t y = 0; y < height; y++) {
        size_t hr = (size_t)(y >> 1) * cw, fr = (size_t)y * width;
        const float *cb = p.Cb + hr, *cr = p.Cr + hr, *l = L + hr, *tt = T + hr;
        uint8_t *o = rgb + fr * 3;
        for (uint32_t x = 0; x < width; x++) {
            uint32_t hx = x >> 1;
            float g = p.G[fr + x] * (1.0f + tt[hx]);
            g = g < 0.0f ? 0.0f : g;
            float yv = p.Y[fr + x] + l[hx] + g * F[fr + x];
            o[3 * x + 0] = to_u8(yv + 1.402f * cr[hx]);
            o[3 * x + 1] = to_u8(yv - 0.344136f * cb[hx] - 0.714136f * cr[hx]);
            o[3 * x + 2] = to_u8(yv + 1.772f * cb[hx]);
        }
    }
    free(mem);
    return 0;
}

void rf_synth_image(uint64_t seed, uint32_t width, uint32_t height, uint8_t *rgb)
{
    if (rf_synth_image_ex(seed, width, height, NULL, rgb) != 0)
        memset(rgb, 128, (size_t)width * height * 3);
}

/* ---- JPEG encoding ------------------------------------------------------------------------ */

struct synth_jerr {
    struct jpeg_error_mgr mgr;
    jmp_buf jump;
};

static void synth_jerr_exit(j_common_ptr cinfo)
{
    struct synth_jerr *e = (struct synth_jerr *)cinfo->err;
    longjmp(e->jump, 1);
}

static void synth_jerr_silent(j_common_ptr cinfo, int level)
{
    (void)cinfo;
    (void)level;
}

/* The encoder writes into libjpeg's own memory destination (jpeg_mem_dest), starting in a
 * buffer of ours sized so that quality-90 photos (under a byte per pixel) fit. A larger image
 * makes libjpeg move the output to a buffer it mallocs, which is then ours to free; libjpeg
 * keeps that buffer to itself until jpeg_finish_compress, so an out-of-memory error after such
 * a move loses it (the only error an in-range encode can raise). */
int rf_synth_jpeg(const uint8_t *rgb, uint32_t width, uint32_t height, int quality, int progressive,
                  uint8_t **out, size_t *len)
{
    struct jpeg_compress_struct ci;
    struct synth_jerr jerr;

    *out = NULL;
    *len = 0;
    if (width == 0 || height == 0 || width > JPEG_MAX_DIMENSION || height > JPEG_MAX_DIMENSION)
        return -1;
    unsigned long cap = (unsigned long)width * height + 65536;
    unsigned char *const first = malloc(cap); /* const: still valid after the longjmp */
    if (!first)
        return -1;
    unsigned char *buf = first;
    ci.err = jpeg_std_error(&jerr.mgr);
    jerr.mgr.error_exit = synth_jerr_exit;
    jerr.mgr.emit_message = synth_jerr_silent;
    if (setjmp(jerr.jump)) {
        jpeg_destroy_compress(&ci);
        free(first);
        return -1;
    }
    jpeg_create_compress(&ci);
    jpeg_mem_dest(&ci, &buf, &cap);
    ci.image_width = width;
    ci.image_height = height;
    ci.input_components = 3;
    ci.in_color_space = JCS_RGB;
    jpeg_set_defaults(&ci);
    jpeg_set_quality(&ci, quality < 1 ? 1 : quality > 100 ? 100 : quality, TRUE);
    /* 4:2:0, as cameras and ImageNet's JPEGs mostly are. */
    ci.comp_info[0].h_samp_factor = 2;
    ci.comp_info[0].v_samp_factor = 2;
    ci.comp_info[1].h_samp_factor = ci.comp_info[1].v_samp_factor = 1;
    ci.comp_info[2].h_samp_factor = ci.comp_info[2].v_samp_factor = 1;
    ci.dct_method = JDCT_ISLOW;
    if (progressive)
        jpeg_simple_progression(&ci);
    jpeg_start_compress(&ci, TRUE);
    while (ci.next_scanline < ci.image_height) {
        JSAMPROW row = (JSAMPROW)(rgb + (size_t)ci.next_scanline * width * 3);
        jpeg_write_scanlines(&ci, &row, 1);
    }
    jpeg_finish_compress(&ci); /* sets buf and cap to the output and its length */
    jpeg_destroy_compress(&ci);
    if (buf != first)
        free(first);
    *out = buf;
    *len = (size_t)cap;
    return 0;
}
