/* npy.c — boxes from a NumPy .npy member (annotations.h, rf_annot_npy_boxes).
 *
 * DESIGN. The format (numpy.lib.format): the magic "\x93NUMPY", a major and minor version, the
 * header's length (2 bytes little-endian in version 1, 4 in versions 2 and 3), then the header:
 * a Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (N, 4), } padded
 * with spaces and ending in '\n', then the data. The header is parsed strictly, as numpy
 * writes it (each of the three keys once, nothing else); only what boxes can be is taken —
 * float32 or float64, little-endian, C order, two dimensions with 4 or 5 columns — and the
 * data must be exactly the shape's bytes. Values are read byte by byte, so neither the
 * member's alignment in the span nor the host's byte order matters. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "loaders/annotations.h"

#define NPY_HEADER_MAX 65536u /* numpy writes a few dozen bytes; a larger header is not one */

typedef struct npy_head {
    int descr, fortran, shape; /* seen */
    uint32_t item;             /* 4 or 8 */
    uint64_t dims[2];
    uint32_t ndim;
} npy_head;

typedef struct npy_rd {
    const uint8_t *s;
    uint32_t n, i;
} npy_rd;

static void ws(npy_rd *r)
{
    while (r->i < r->n && (r->s[r->i] == ' ' || r->s[r->i] == '\n' || r->s[r->i] == '\t'))
        r->i++;
}

static int eat(npy_rd *r, char c)
{
    ws(r);
    if (r->i < r->n && r->s[r->i] == (uint8_t)c)
        return r->i++, 1;
    return 0;
}

/* A quoted string ('...' or "...", no escapes: numpy's keys and descrs need none). */
static int str(npy_rd *r, const uint8_t **p, uint32_t *len)
{
    ws(r);
    if (r->i >= r->n || (r->s[r->i] != '\'' && r->s[r->i] != '"'))
        return -1;
    uint8_t q = r->s[r->i++];
    *p = r->s + r->i;
    while (r->i < r->n && r->s[r->i] != q && r->s[r->i] != '\\')
        r->i++;
    if (r->i >= r->n || r->s[r->i] != q)
        return -1;
    *len = (uint32_t)(r->s + r->i - *p);
    r->i++;
    return 0;
}

static int word(npy_rd *r, const char *w)
{
    size_t n = strlen(w);
    ws(r);
    if (r->n - r->i < n || memcmp(r->s + r->i, w, n) != 0)
        return 0;
    r->i += (uint32_t)n;
    return 1;
}

/* (d0, d1, ...): up to 2 dims kept, *ndim counts all. */
static int shape(npy_rd *r, npy_head *h)
{
    if (!eat(r, '('))
        return -1;
    h->ndim = 0;
    while (!eat(r, ')')) {
        ws(r);
        uint64_t v = 0;
        uint32_t s = r->i;
        while (r->i < r->n && r->s[r->i] >= '0' && r->s[r->i] <= '9' && v < (1ull << 40))
            v = v * 10 + (uint64_t)(r->s[r->i++] - '0');
        if (r->i == s)
            return -1;
        if (h->ndim < 2)
            h->dims[h->ndim] = v;
        h->ndim++;
        if (!eat(r, ',') && !(ws(r), r->i < r->n && r->s[r->i] == ')'))
            return -1;
    }
    return 0;
}

/* The dict; a message for the first thing that is not what boxes can be. */
static const char *dict(npy_rd *r, npy_head *h)
{
    if (!eat(r, '{'))
        return "the header is not a dict";
    while (!eat(r, '}')) {
        const uint8_t *k, *v;
        uint32_t kl, vl;
        if (str(r, &k, &kl) || !eat(r, ':'))
            return "the header is not a dict of quoted keys";
        if (kl == 5 && !memcmp(k, "descr", 5) && !h->descr++) {
            if (str(r, &v, &vl))
                return "descr is not a string";
            if (vl != 3 || (memcmp(v, "<f4", 3) && memcmp(v, "<f8", 3)))
                return "its dtype is not float32 or float64 little-endian ('<f4' or '<f8')";
            h->item = v[2] == '4' ? 4 : 8;
        } else if (kl == 13 && !memcmp(k, "fortran_order", 13) && !h->fortran++) {
            if (word(r, "True"))
                return "it is in Fortran order, not C order";
            if (!word(r, "False"))
                return "fortran_order is not False or True";
        } else if (kl == 5 && !memcmp(k, "shape", 5) && !h->shape++) {
            if (shape(r, h))
                return "shape is not a tuple of integers";
        } else {
            return "the header has a key besides descr, fortran_order and shape (once each)";
        }
        if (!eat(r, ',') && !(ws(r), r->i < r->n && r->s[r->i] == '}'))
            return "the header is not a dict";
    }
    ws(r);
    if (r->i != r->n)
        return "something follows the header's dict";
    if (!h->descr || !h->fortran || !h->shape)
        return "the header lacks descr, fortran_order or shape";
    return NULL;
}

/* Little-endian value i of the data, whatever the host's order and the alignment. */
static double value_at(const uint8_t *d, uint32_t item, uint64_t i)
{
    uint64_t u = 0;
    for (uint32_t b = item; b-- > 0;)
        u = u << 8 | d[i * item + b];
    if (item == 8) {
        double x;
        memcpy(&x, &u, 8);
        return x;
    }
    uint32_t u32 = (uint32_t)u;
    float f;
    memcpy(&f, &u32, 4);
    return f;
}

/* A .npy member's table: its data, rows, columns and bytes per value (4 or 8). */
typedef struct npy_table {
    const uint8_t *d;
    uint64_t rows, cols;
    uint32_t item;
} npy_table;

/* A .npy member's table of N x one of the column counts cols[0..2) of '<f4' or '<f8', C
 * order, N at most k->cap (`noun` of the rows, `cap` the setting that bounds them).
 * RF_ELABEL naming `what` otherwise. */
static int npy_rows(const uint8_t *data, uint64_t len, const uint32_t cols[2],
                    const rf_annot_sink *k, const char *noun, const char *cap, const char *what,
                    npy_table *t, rf_err *err)
{
    if (len < 10 || memcmp(data, "\x93NUMPY", 6) != 0)
        return rf_seterr(err, RF_ELABEL, "%s is not a .npy file (no \\x93NUMPY magic)", what);
    uint32_t major = data[6], hl, at;
    if (major == 1)
        hl = data[8] | (uint32_t)data[9] << 8, at = 10;
    else if ((major == 2 || major == 3) && len >= 12)
        hl = data[8] | (uint32_t)data[9] << 8 | (uint32_t)data[10] << 16 |
             (uint32_t)data[11] << 24,
        at = 12;
    else
        return rf_seterr(err, RF_ELABEL, "%s: .npy format version %u.%u is not 1, 2 or 3", what,
                         major, data[7]);
    if (hl > NPY_HEADER_MAX || at + (uint64_t)hl > len)
        return rf_seterr(err, RF_ELABEL, "%s: the .npy header of %u bytes runs past the "
                         "member's %" PRIu64, what, hl, len);
    npy_head h = {0};
    npy_rd r = {data + at, hl, 0};
    const char *bad = dict(&r, &h);
    if (!bad && (h.ndim != 2 || (h.dims[1] != cols[0] && h.dims[1] != cols[1])))
        return rf_seterr(err, RF_ELABEL, "%s: its shape is not (N, %u) or (N, %u) (header "
                         "\"%.*s\")", what, cols[0], cols[1], (int)RF_MIN(hl, 120),
                         (const char *)data + at);
    if (bad)
        return rf_seterr(err, RF_ELABEL, "%s: %s (header \"%.*s\")", what, bad,
                         (int)RF_MIN(hl, 120), (const char *)data + at);
    uint64_t need = h.dims[0] * h.dims[1] * h.item;
    if (len - at - hl != need)
        return rf_seterr(err, RF_ELABEL, "%s: %" PRIu64 " bytes of data, not the %" PRIu64
                         " its shape (%" PRIu64 ", %" PRIu64 ") of %u-byte floats needs",
                         what, len - at - hl, need, h.dims[0], h.dims[1], h.item);
    if (h.dims[0] > k->cap)
        return rf_seterr(err, RF_ELABEL, "%s: %" PRIu64 " %s, more than %s %u", what, h.dims[0],
                         noun, cap, k->cap);
    *t = (npy_table){data + at + hl, h.dims[0], h.dims[1], h.item};
    return 0;
}

int rf_annot_npy_boxes(const uint8_t *data, uint64_t len, rf_annot_sink *k, const char *what,
                       rf_err *err)
{
    static const uint32_t cols_ok[2] = {4, 5};
    npy_table t;
    int rc = npy_rows(data, len, cols_ok, k, "boxes", "max_boxes", what, &t, err);
    if (rc)
        return rc;
    for (uint32_t i = 0; i < k->cap; i++)
        k->classes[i] = -1;
    for (uint32_t i = 0; i < (uint32_t)t.rows; i++) {
        float *o = k->vals + (size_t)i * 4;
        for (uint32_t c = 0; c < 4; c++)
            o[c] = (float)value_at(t.d, t.item, (uint64_t)i * t.cols + c);
        rc = rf_annot_box_check(k->format, o, i, what, err);
        if (!rc && t.cols == 5)
            rc = rf_annot_class_check(value_at(t.d, t.item, (uint64_t)i * t.cols + 4),
                                      k->num_classes, i, what, &k->classes[i], err);
        if (rc)
            return rc;
    }
    k->n = (uint32_t)t.rows;
    return 0;
}

int rf_annot_npy_points(const uint8_t *data, uint64_t len, rf_annot_sink *k, const char *what,
                        rf_err *err)
{
    static const uint32_t cols_ok[2] = {2, 3};
    npy_table t;
    int rc = npy_rows(data, len, cols_ok, k, "points", "max_points", what, &t, err);
    if (rc)
        return rc;
    for (uint32_t i = 0; i < (uint32_t)t.rows; i++) {
        uint64_t at = (uint64_t)i * t.cols;
        double v[3] = {value_at(t.d, t.item, at), value_at(t.d, t.item, at + 1),
                       t.cols == 3 ? value_at(t.d, t.item, at + 2) : 2};
        if ((rc = rf_annot_point(k, v, i, what, err)) != 0)
            return rc;
    }
    k->n = (uint32_t)t.rows;
    return 0;
}
