/* boxes.c — boxes and keypoints that follow the crop (boxes.h).
 *
 * DESIGN. A decode thread reads a sample's annotation member out of the span already read
 * for its image (no extra read), into the sample's own rows of the slot as given
 * (loaders/annotations.h judges what needs no image), decodes the image, then maps the rows in
 * place through rf_sample_geometry of the image's size and the sample's seed: the geometry the
 * pixels were given, so every decode path (CPU, GPU kernels, hardware engines), DCT scale and
 * thread count gives the same rows. With multi_crop each view has its own rows (one block of
 * batch_size rows per view, as the views' crop boxes): the member is read once into view 0's,
 * copied to the others' and each mapped through its view's geometry. Rows are allocated once
 * at create, like the fields'; a row is written only by its sample's decode thread and
 * published with its pixels. */
#include "pipeline/boxes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loaders/annotations.h"
#include "loaders/dataset.h"
#include "pipeline/ring.h"

static int ends_with_npy(const char *ext)
{
    size_t n = strlen(ext);
    return n >= 3 && strcmp(ext + n - 3, "npy") == 0;
}

/* An extension as a member's: 1..RF_FIELD_NAME_MAX printable bytes, no space, '/' or ','. */
static int ext_check(const char *name, const char *ext, rf_err *err)
{
    size_t n = strlen(ext);
    int ok = n > 0 && n <= RF_FIELD_NAME_MAX;
    for (size_t i = 0; ok && i < n; i++)
        ok = ext[i] > ' ' && ext[i] < 0x7f && ext[i] != '/' && ext[i] != ',';
    return ok ? 0 : rf_seterr(err, RF_EINVAL, "%s \"%.80s\" is not a member's extension (1..%d "
                              "printable bytes, no space, '/' or ',')", name, ext,
                              RF_FIELD_NAME_MAX);
}

static int dup(char **to, const char *from, rf_err *err)
{
    if (from && !(*to = strdup(from)))
        return rf_seterr(err, RF_ENOMEM, "no memory");
    return 0;
}

/* "a:b,c:d" into b->swap (each index below max_points, in one pair at most). */
static int parse_pairs(pl_boxes *b, rf_err *err)
{
    if (!(b->swap = malloc((size_t)b->max_points * sizeof *b->swap)))
        return rf_seterr(err, RF_ENOMEM, "no memory");
    for (uint32_t i = 0; i < b->max_points; i++)
        b->swap[i] = i;
    const char *p = b->pairs;
    for (uint32_t nth = 1; *p; nth++) {
        char *end;
        unsigned long x = strtoul(p, &end, 10), y = 0;
        int ok = end != p && *p >= '0' && *p <= '9' && *end == ':';
        if (ok) {
            p = end + 1;
            y = strtoul(p, &end, 10);
            ok = end != p && *p >= '0' && *p <= '9' && (*end == ',' || !*end);
        }
        if (!ok || x >= b->max_points || y >= b->max_points || x == y || b->swap[x] != x ||
            b->swap[y] != y)
            return rf_seterr(err, RF_EINVAL, "keypoint_flip_pairs \"%.200s\": pair %u is not "
                             "two different indexes below max_points %u, each in one pair "
                             "(\"1:2,3:4\")", b->pairs, nth, b->max_points);
        b->swap[x] = (uint32_t)y, b->swap[y] = (uint32_t)x;
        p = *end ? end + 1 : end;
    }
    return 0;
}

static int setup_boxes(pl_boxes *b, rf_config *c, rf_err *err)
{
    const char *ext = c->box_ext ? c->box_ext : "json";
    int rc = ext_check("box_ext", ext, err);
    if (rc || (rc = dup(&b->ext, ext, err)))
        return rc;
    b->npy = ends_with_npy(ext);
    if (!c->max_boxes)
        return rf_seterr(err, RF_EINVAL, "boxes: set max_boxes (1..65536), the width of each "
                         "sample's rows");
    if (b->npy && (c->box_json_path || c->box_class_json_path))
        return rf_seterr(err, RF_EINVAL, "box_json_path and box_class_json_path read JSON; "
                         "box_ext \"%s\" is a .npy member (its fifth column is the class)", ext);
    if (!b->npy && !c->box_json_path)
        return rf_seterr(err, RF_EINVAL, "boxes from the JSON member KEY.%s: set "
                         "box_json_path, the dotted path to the array of boxes", ext);
    if (!b->npy && ((rc = rf_json_path_check_named("box_json_path", c->box_json_path, err)) ||
                    (c->box_class_json_path &&
                     (rc = rf_json_path_check_named("box_class_json_path",
                                                    c->box_class_json_path, err)))))
        return rc;
    if ((rc = dup(&b->path, c->box_json_path, err)) ||
        (rc = dup(&b->class_path, c->box_class_json_path, err)))
        return rc;
    b->boxes = 1;
    return 0;
}

static int setup_points(pl_boxes *b, rf_config *c, rf_err *err)
{
    const char *ext = c->keypoint_ext ? c->keypoint_ext : "json";
    int rc = ext_check("keypoint_ext", ext, err);
    if (rc)
        return rc;
    b->knpy = ends_with_npy(ext);
    if (b->knpy && c->keypoint_json_path)
        return rf_seterr(err, RF_EINVAL, "keypoint_json_path \"%s\" with keypoint_ext \"%s\": "
                         "a .npy member is the array of points itself", c->keypoint_json_path,
                         ext);
    if (!b->knpy && !c->keypoint_json_path)
        return rf_seterr(err, RF_EINVAL, "keypoint_ext \"%s\" is JSON: set keypoint_json_path, "
                         "the dotted path to the array of points", ext);
    if (!c->max_points)
        return rf_seterr(err, RF_EINVAL, "keypoints: set max_points (1..65536), the width of "
                         "each sample's row");
    if ((!b->knpy &&
         (rc = rf_json_path_check_named("keypoint_json_path", c->keypoint_json_path, err))) ||
        (rc = dup(&b->kext, ext, err)) || (rc = dup(&b->kpath, c->keypoint_json_path, err)))
        return rc;
    b->points = 1;
    return 0;
}

int pl_boxes_setup(pl_boxes *b, rf_config *c, rf_err *err)
{
    memset(b, 0, sizeof *b);
    int want_boxes = c->box_ext || c->box_json_path || c->box_class_json_path;
    int want_points = c->keypoint_ext || c->keypoint_json_path || c->keypoint_flip_pairs;
    if ((want_boxes || want_points) && c->source != RF_SOURCE_TAR)
        return rf_seterr(err, RF_EINVAL, "boxes and keypoints are read from a sample's members: "
                         "only tar shards have them, not a %s source",
                         c->source == RF_SOURCE_FOLDER ? "folder" : "token");
    int points_npy = c->keypoint_ext && ends_with_npy(c->keypoint_ext);
    if (want_points && !c->keypoint_json_path && !points_npy)
        return rf_seterr(err, RF_EINVAL, "keypoint_ext and keypoint_flip_pairs need "
                         "keypoint_json_path, the dotted path to the array of points (or "
                         "keypoint_ext naming a .npy member)");
    int rc = want_boxes ? setup_boxes(b, c, err) : 0;
    if (rc || (rc = want_points ? setup_points(b, c, err) : 0))
        return rc;
    b->format = c->box_format, b->normalized = c->box_normalized;
    b->out_normalized = c->box_output_normalized;
    b->min_vis = c->box_min_visibility, b->num_classes = c->num_classes;
    b->max_boxes = b->boxes ? c->max_boxes : 0, b->max_points = b->points ? c->max_points : 0;
    if (b->points && c->keypoint_flip_pairs &&
        ((rc = dup(&b->pairs, c->keypoint_flip_pairs, err)) || (rc = parse_pairs(b, err))))
        return rc;
    /* what rf_loader_config reports: the stage's copies */
    c->box_ext = b->boxes ? b->ext : NULL, c->box_json_path = b->path;
    c->box_class_json_path = b->class_path, c->keypoint_ext = b->kext;
    c->keypoint_json_path = b->kpath, c->keypoint_flip_pairs = b->pairs;
    return 0;
}

int pl_boxes_alloc(pl_boxes *b, pl_ring *r, const pl_core *core, rf_err *err)
{
    b->batch = r->batch, b->nviews = RF_MAX(r->nviews, 1u);
    if (!b->boxes && !b->points)
        return 0;
    size_t B = (size_t)r->batch * b->nviews, nb = B * b->max_boxes, np = B * b->max_points;
    size_t per = nb * 4 * sizeof(float) + nb * sizeof(int32_t) + np * 3 * sizeof(float) + B * 8;
    if (pl_alloc_refused(core, "box rows", per * r->depth))
        return rf_seterr(err, RF_ENOMEM, "cannot allocate %zu bytes of box and keypoint rows: "
                         "out of memory", per * r->depth);
    for (uint32_t i = 0; i < r->depth; i++) {
        slot *s = &r->slots[i];
        int ok = 1;
        if (b->boxes) {
            s->bx = calloc(nb * 4, sizeof *s->bx);
            s->bcls = malloc(nb * sizeof *s->bcls);
            s->bn = calloc(B, sizeof *s->bn);
            ok = s->bx && s->bcls && s->bn;
            if (s->bcls)
                memset(s->bcls, 0xff, nb * sizeof *s->bcls); /* -1 */
        }
        if (b->points) {
            s->pts = calloc(np * 3, sizeof *s->pts);
            s->pn = calloc(B, sizeof *s->pn);
            ok = ok && s->pts && s->pn;
        }
        if (!ok)
            return rf_seterr(err, RF_ENOMEM, "cannot allocate %zu bytes of box and keypoint "
                             "rows for slot %u: out of memory", per, i);
    }
    return 0;
}

void pl_boxes_free(pl_boxes *b, pl_ring *r)
{
    for (uint32_t i = 0; r->slots && i < r->depth; i++) {
        slot *s = &r->slots[i];
        free(s->bx), free(s->bcls), free(s->bn), free(s->pts), free(s->pn);
        s->bx = s->pts = NULL, s->bcls = NULL, s->bn = s->pn = NULL;
    }
    free(b->ext), free(b->path), free(b->class_path);
    free(b->kext), free(b->kpath), free(b->pairs), free(b->swap);
    memset(b, 0, sizeof *b);
}

uint32_t pl_boxes_exts(const pl_boxes *b, const char **exts)
{
    uint32_t n = 0;
    if (b->boxes)
        exts[n++] = b->ext;
    if (b->points)
        exts[n++] = b->kext;
    return n;
}

/* "box member KEY.EXT at offset N" (N: its first header block in the shard). */
static void member_name(char *m, size_t cap, const char *role, const char *key, const char *ext,
                        uint64_t sample_off, const rf_tar_span_member *f)
{
    snprintf(m, cap, "%s member %s.%s at offset %llu", role, key, ext,
             (unsigned long long)(sample_off + f->hdr));
}

int pl_boxes_read(const pl_boxes *b, slot *s, uint32_t index, const char *key,
                  uint64_t sample_off, const uint8_t *span, const rf_tar_span_member *found,
                  rf_err *e)
{
    char what[RF_ERRMSG_MAX / 2];
    int rc = 0;
    if (b->boxes) {
        s->bn[index] = 0;
        rf_annot_sink k = {.vals = s->bx + (size_t)index * b->max_boxes * 4,
                           .classes = s->bcls + (size_t)index * b->max_boxes,
                           .cap = b->max_boxes, .width = 4, .format = b->format,
                           .num_classes = b->num_classes};
        if (!found[0].off)
            return rf_seterr(e, RF_ELABEL, "sample %s at offset %llu has no box member %s.%s "
                             "(a missing annotation)", key, (unsigned long long)sample_off,
                             key, b->ext);
        member_name(what, sizeof what, "box", key, b->ext, sample_off, &found[0]);
        rc = b->npy ? rf_annot_npy_boxes(span + found[0].off, found[0].len, &k, what, e)
                    : rf_annot_json_boxes(span + found[0].off, found[0].len, b->path,
                                          b->class_path, &k, what, e);
        if (rc)
            return rc;
        s->bn[index] = k.n;
        found++;
    }
    if (b->points) {
        s->pn[index] = 0;
        rf_annot_sink k = {.vals = s->pts + (size_t)index * b->max_points * 3,
                           .cap = b->max_points, .width = 3};
        if (!found[0].off)
            return rf_seterr(e, RF_ELABEL, "sample %s at offset %llu has no keypoint member "
                             "%s.%s (a missing annotation)", key,
                             (unsigned long long)sample_off, key, b->kext);
        member_name(what, sizeof what, "keypoint", key, b->kext, sample_off, &found[0]);
        rc = b->knpy ? rf_annot_npy_points(span + found[0].off, found[0].len, &k, what, e)
                     : rf_annot_json_points(span + found[0].off, found[0].len, b->kpath, &k,
                                            what, e);
        if (rc)
            return rc;
        s->pn[index] = k.n;
    }
    return 0;
}

/* A box as given into source pixels, corners x1 y1 x2 y2. */
static void source_xyxy(const pl_boxes *b, const float *v, uint32_t W, uint32_t H, double *o)
{
    double a = v[0], c = v[1], w = v[2], h = v[3];
    if (b->format == RF_BOX_XYXY)
        o[0] = a, o[1] = c, o[2] = w, o[3] = h;
    else if (b->format == RF_BOX_XYWH)
        o[0] = a, o[1] = c, o[2] = a + w, o[3] = c + h;
    else
        o[0] = a - w / 2, o[1] = c - h / 2, o[2] = a + w / 2, o[3] = c + h / 2;
    double fx = b->normalized ? W : 1, fy = b->normalized ? H : 1;
    o[0] *= fx, o[2] *= fx, o[1] *= fy, o[3] *= fy;
}

static int outside(double x, double y, uint32_t W, uint32_t H)
{
    double t = RF_BOX_TOLERANCE_PX;
    return x < -t || y < -t || x > W + t || y > H + t;
}

/* What output pixels are multiplied by on the way out: 1, or 1 / the output's size. */
static void out_scale(const pl_boxes *b, const rf_geometry *g, double *sx, double *sy)
{
    *sx = b->out_normalized ? 1.0 / g->out_width : 1.0;
    *sy = b->out_normalized ? 1.0 / g->out_height : 1.0;
}

/* Row `index` (sample i of view k: k x batch_size + i) mapped in place through g. */
static int map_boxes(const pl_boxes *b, slot *s, uint32_t index, const rf_geometry *g,
                     uint32_t W, uint32_t H, const char *what, rf_err *e)
{
    float *row = s->bx + (size_t)index * b->max_boxes * 4;
    int32_t *cls = s->bcls + (size_t)index * b->max_boxes;
    uint32_t n = s->bn[index], kept = 0;
    double rx0 = g->out_x, ry0 = g->out_y, rx1 = rx0 + g->out_w, ry1 = ry0 + g->out_h;
    double sx, sy;
    out_scale(b, g, &sx, &sy);
    for (uint32_t j = 0; j < n; j++) {
        double o[4], ax, ay, bx, by;
        source_xyxy(b, row + (size_t)j * 4, W, H, o);
        if (outside(o[0], o[1], W, H) || outside(o[2], o[3], W, H))
            return rf_seterr(e, RF_ELABEL, "%s: box %u (x1 %g, y1 %g, x2 %g, y2 %g in pixels) "
                             "lies outside its %ux%u image by more than %g pixel", what, j, o[0],
                             o[1], o[2], o[3], W, H, RF_BOX_TOLERANCE_PX);
        rf_geometry_to_output(g, o[0], o[1], &ax, &ay);
        rf_geometry_to_output(g, o[2], o[3], &bx, &by);
        double x1 = fmin(ax, bx), x2 = fmax(ax, bx), y1 = fmin(ay, by), y2 = fmax(ay, by);
        double area = (x2 - x1) * (y2 - y1);
        x1 = fmax(x1, rx0), y1 = fmax(y1, ry0), x2 = fmin(x2, rx1), y2 = fmin(y2, ry1);
        double seen = x2 > x1 && y2 > y1 ? (x2 - x1) * (y2 - y1) : 0;
        if (!(seen > 0 && seen >= (double)b->min_vis * area))
            continue;
        float *d = row + (size_t)kept * 4; /* kept <= j: the box read is not yet overwritten */
        d[0] = (float)(x1 * sx), d[1] = (float)(y1 * sy), d[2] = (float)(x2 * sx);
        d[3] = (float)(y2 * sy);
        cls[kept++] = cls[j];
    }
    memset(row + (size_t)kept * 4, 0, (size_t)(b->max_boxes - kept) * 4 * sizeof *row);
    for (uint32_t j = kept; j < b->max_boxes; j++)
        cls[j] = -1;
    s->bn[index] = kept;
    return 0;
}

static int map_points(const pl_boxes *b, slot *s, uint32_t index, const rf_geometry *g,
                      uint32_t W, uint32_t H, const char *what, rf_err *e)
{
    float *row = s->pts + (size_t)index * b->max_points * 3;
    uint32_t n = s->pn[index];
    double rx0 = g->out_x, ry0 = g->out_y, rx1 = rx0 + g->out_w, ry1 = ry0 + g->out_h;
    double sx, sy;
    out_scale(b, g, &sx, &sy);
    for (uint32_t j = 0; j < n; j++) {
        float *p = row + (size_t)j * 3;
        if (p[2] == 0) {
            p[0] = p[1] = 0; /* not labelled: no position */
            continue;
        }
        double x = p[0] * (b->normalized ? (double)W : 1), y = p[1] * (b->normalized ? (double)H : 1);
        if (outside(x, y, W, H))
            return rf_seterr(e, RF_ELABEL, "%s: point %u (%g, %g in pixels) lies outside its "
                             "%ux%u image by more than %g pixel", what, j, x, y, W, H,
                             RF_BOX_TOLERANCE_PX);
        double ox, oy;
        rf_geometry_to_output(g, x, y, &ox, &oy);
        p[0] = (float)(ox * sx), p[1] = (float)(oy * sy);
        if (ox < rx0 || ox > rx1 || oy < ry0 || oy > ry1)
            p[2] = 0;
    }
    memset(row + (size_t)n * 3, 0, (size_t)(b->max_points - n) * 3 * sizeof *row);
    if (g->flip && b->swap)
        for (uint32_t j = 0; j < n; j++) {
            uint32_t o = b->swap[j];
            if (o > j && o < n) { /* each pair once; a pair past the member's points stays */
                float t[3];
                memcpy(t, row + (size_t)j * 3, sizeof t);
                memcpy(row + (size_t)j * 3, row + (size_t)o * 3, sizeof t);
                memcpy(row + (size_t)o * 3, t, sizeof t);
            }
        }
    return 0;
}

/* Sample `index`'s rows as read (view 0's) into every other view's, for each to be mapped. */
static void copy_to_views(const pl_boxes *b, slot *s, uint32_t index)
{
    size_t nb = b->max_boxes, np = b->max_points;
    for (uint32_t k = 1; k < b->nviews; k++) {
        uint32_t r = k * b->batch + index;
        if (b->boxes) {
            memcpy(s->bx + r * nb * 4, s->bx + index * nb * 4, nb * 4 * sizeof *s->bx);
            memcpy(s->bcls + r * nb, s->bcls + index * nb, nb * sizeof *s->bcls);
            s->bn[r] = s->bn[index];
        }
        if (b->points) {
            memcpy(s->pts + r * np * 3, s->pts + index * np * 3, np * 3 * sizeof *s->pts);
            s->pn[r] = s->pn[index];
        }
    }
}

int pl_boxes_map(const pl_boxes *b, slot *s, uint32_t index, const rf_geometry *g, uint32_t W,
                 uint32_t H, const char *key, uint64_t sample_off,
                 const rf_tar_span_member *found, rf_err *e)
{
    char bwhat[RF_ERRMSG_MAX / 2], pwhat[RF_ERRMSG_MAX / 2];
    int rc = 0;
    if (b->boxes)
        member_name(bwhat, sizeof bwhat, "box", key, b->ext, sample_off, found++);
    if (b->points)
        member_name(pwhat, sizeof pwhat, "keypoint", key, b->kext, sample_off, found);
    copy_to_views(b, s, index);
    for (uint32_t k = 0; k < RF_MAX(b->nviews, 1u) && rc == 0; k++) {
        uint32_t r = k * b->batch + index;
        if (b->boxes)
            rc = map_boxes(b, s, r, &g[k], W, H, bwhat, e);
        if (rc == 0 && b->points)
            rc = map_points(b, s, r, &g[k], W, H, pwhat, e);
    }
    return rc;
}

static void blank_row(const pl_boxes *b, slot *s, uint32_t index)
{
    if (b->boxes) {
        memset(s->bx + (size_t)index * b->max_boxes * 4, 0, (size_t)b->max_boxes * 4 * 4);
        memset(s->bcls + (size_t)index * b->max_boxes, 0xff, (size_t)b->max_boxes * 4);
        s->bn[index] = 0;
    }
    if (b->points) {
        memset(s->pts + (size_t)index * b->max_points * 3, 0, (size_t)b->max_points * 3 * 4);
        s->pn[index] = 0;
    }
}

void pl_boxes_blank(const pl_boxes *b, slot *s, uint32_t i)
{
    for (uint32_t k = 0; k < RF_MAX(b->nviews, 1u); k++)
        blank_row(b, s, k * b->batch + i);
}

void pl_boxes_view(const pl_boxes *b, const slot *s, uint32_t k, rf_view *v)
{
    size_t r = (size_t)k * b->batch;
    v->boxes = b->boxes ? s->bx + r * b->max_boxes * 4 : NULL;
    v->box_classes = b->boxes ? s->bcls + r * b->max_boxes : NULL;
    v->box_counts = b->boxes ? s->bn + r : NULL;
    v->points = b->points ? s->pts + r * b->max_points * 3 : NULL;
    v->point_counts = b->points ? s->pn + r : NULL;
}

void pl_boxes_batch(const pl_boxes *b, const slot *s, rf_batch *out)
{
    out->boxes = b->boxes ? s->bx : NULL;
    out->box_classes = b->boxes ? s->bcls : NULL;
    out->box_counts = b->boxes ? s->bn : NULL;
    out->points = b->points ? s->pts : NULL;
    out->point_counts = b->points ? s->pn : NULL;
}
