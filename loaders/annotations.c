/* annotations.c — boxes and keypoints from a sample's JSON member (annotations.h).
 *
 * DESIGN. label_json.c's reader does the JSON: rf_json_find_label validates the document whole
 * and locates the value at a dotted path, rf_json_next_item walks an array's elements and
 * rf_json_number reads a number, so a member means the same here as to the label. A path may
 * pass through an array of objects (COCO's "annotations.bbox"): the longest prefix of the path
 * that is present is found, and when it is an array and keys remain, the rest is read in each
 * element (every element must have it: a box without its class is a missing annotation). The
 * numbers go straight into the caller's rows; nothing is allocated. */
#include "loaders/annotations.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "loaders/dataset.h"
#include "ringfeed.h"

/* A value at the path: the nth (from 0) at text[at, end). */
typedef int (*item_fn)(void *ctx, uint32_t nth, const uint8_t *text, uint64_t at, uint64_t end,
                       const char *what, rf_err *err);

static const char *fault_name(int fault)
{
    switch (fault) {
    case RF_JSON_FAULT_STRING: return "a string";
    case RF_JSON_FAULT_OBJECT: return "an object";
    case RF_JSON_FAULT_ARRAY: return "an array";
    case RF_JSON_FAULT_BOOL: return "a boolean";
    case RF_JSON_FAULT_NULL: return "null";
    default: return "a number";
    }
}

/* Each element of the array at text[res->at, res->end) to fn, or with `rest` the value at
 * that path inside each element. *count: the elements. */
static int each_item(const uint8_t *text, const rf_json_result *res, const char *rest,
                     item_fn fn, void *ctx, uint32_t *count, const char *what, rf_err *err)
{
    uint64_t pos = res->at + 1, at, end;
    int more;
    for (*count = 0; (more = rf_json_next_item(text, res->end, &pos, &at, &end)) == 1;
         (*count)++) {
        if (!rest) {
            int rc = fn(ctx, *count, text, at, end, what, err);
            if (rc)
                return rc;
            continue;
        }
        rf_json_result sub;
        int32_t id;
        int f = rf_json_find_label(text + at, end - at, rest, &id, &sub);
        if (f == RF_JSON_FAULT_MISSING || f == RF_JSON_FAULT_SYNTAX)
            return rf_seterr(err, RF_ELABEL, "%s: element %u has no field %s (not an object "
                             "with it)", what, *count, rest);
        int rc = fn(ctx, *count, text, at + sub.at, at + sub.end, what, err);
        if (rc)
            return rc;
    }
    return more < 0 ? rf_seterr(err, RF_ELABEL, "%s: bad JSON in the array", what) : 0;
}

/* The values at `path` in the document (see DESIGN) to fn; *count: how many. */
static int each_at_path(const uint8_t *text, uint64_t len, const char *path, item_fn fn,
                        void *ctx, uint32_t *count, const char *member, rf_err *err)
{
    char prefix[RF_JSON_PATH_MAX + 1], what[RF_ERRMSG_MAX / 2 + RF_JSON_PATH_MAX + 16];
    size_t n = strlen(path);
    snprintf(what, sizeof what, "%s, field %s", member, path);
    if (n > RF_JSON_PATH_MAX)
        return rf_seterr(err, RF_EINVAL, "%s: the path is over %d bytes", what, RF_JSON_PATH_MAX);
    /* prefixes longest first: the whole path, then up to each dot from the right */
    for (size_t k = n; k > 0;) {
        memcpy(prefix, path, k);
        prefix[k] = 0;
        rf_json_result res;
        int32_t id;
        int f = rf_json_find_label(text, len, prefix, &id, &res);
        if (f == RF_JSON_FAULT_SYNTAX)
            return rf_seterr(err, RF_ELABEL, "%s is not valid JSON: %s at byte %" PRIu64,
                             member, res.syntax, res.at);
        if (f != RF_JSON_FAULT_MISSING) {
            const char *rest = k < n ? path + k + 1 : NULL;
            if (f != RF_JSON_FAULT_ARRAY && rest)
                return rf_seterr(err, RF_ELABEL, "%s: %s is %s, with no field %s", what, prefix,
                                 fault_name(f), rest);
            if (f != RF_JSON_FAULT_ARRAY)
                return rf_seterr(err, RF_ELABEL, "%s is %s, not an array", what, fault_name(f));
            return each_item(text, &res, rest, fn, ctx, count, what, err);
        }
        while (k > 0 && path[--k] != '.')
            ;
    }
    return rf_seterr(err, RF_ELABEL, "%s: no field %s (a missing annotation)", member, path);
}

/* The array text[at, end) as up to `max` numbers into v; *got: how many it holds. */
static int numbers(const uint8_t *text, uint64_t at, uint64_t end, double *v, uint32_t max,
                   uint32_t *got)
{
    uint64_t pos = at, a, e;
    while (pos < end && (text[pos] == ' ' || text[pos] == '\t' || text[pos] == '\n' ||
                         text[pos] == '\r'))
        pos++;
    if (pos >= end || text[pos] != '[') /* an object holding an array is not one */
        return -1;
    pos++;
    *got = 0;
    int more;
    while ((more = rf_json_next_item(text, end, &pos, &a, &e)) == 1) {
        double x = 0;
        if (rf_json_number(text, a, e, &x) != 0)
            return -1;
        if (*got < max)
            v[*got] = x;
        (*got)++;
    }
    return more < 0 ? -1 : 0;
}

int rf_annot_box_check(uint32_t format, const float *v, uint32_t nth, const char *what,
                       rf_err *err)
{
    for (int i = 0; i < 4; i++)
        if (!isfinite(v[i]))
            return rf_seterr(err, RF_ELABEL, "%s: box %u [%g, %g, %g, %g] holds a number that "
                             "is not finite", what, nth, v[0], v[1], v[2], v[3]);
    int xyxy = format == RF_BOX_XYXY;
    if (v[2] < (xyxy ? v[0] : 0) || v[3] < (xyxy ? v[1] : 0))
        return rf_seterr(err, RF_ELABEL, "%s: box %u [%g, %g, %g, %g] has a negative %s%s",
                         what, nth, v[0], v[1], v[2], v[3],
                         v[2] < (xyxy ? v[0] : 0) ? "width" : "height",
                         xyxy ? " (x2 < x1 or y2 < y1)" : "");
    return 0;
}

int rf_annot_class_check(double v, uint32_t num_classes, uint32_t nth, const char *what,
                         int32_t *id, rf_err *err)
{
    if (!(v >= 0 && v <= INT32_MAX && v == floor(v)))
        return rf_seterr(err, RF_ELABEL, "%s: the class of box %u (%g) is not an integer "
                         "0..2147483647", what, nth, v);
    if (num_classes && v >= num_classes)
        return rf_seterr(err, RF_ELABEL, "%s: the class of box %u (%g) is not below "
                         "num_classes %u", what, nth, v, num_classes);
    *id = (int32_t)v;
    return 0;
}

static int box_item(void *ctx, uint32_t nth, const uint8_t *text, uint64_t at, uint64_t end,
                    const char *what, rf_err *err)
{
    rf_annot_sink *k = ctx;
    double v[4];
    uint32_t got;
    if (nth >= k->cap)
        return 0; /* counted; the caller names the count */
    if (numbers(text, at, end, v, 4, &got) != 0 || got != 4)
        return rf_seterr(err, RF_ELABEL, "%s: box %u is not an array of 4 numbers (\"%.*s\")",
                         what, nth, (int)RF_MIN(end - at, 40), text + at);
    float *o = k->vals + (size_t)nth * 4;
    for (int i = 0; i < 4; i++)
        o[i] = (float)v[i];
    return rf_annot_box_check(k->format, o, nth, what, err);
}

static int class_item(void *ctx, uint32_t nth, const uint8_t *text, uint64_t at, uint64_t end,
                      const char *what, rf_err *err)
{
    rf_annot_sink *k = ctx;
    double v;
    if (nth >= k->cap)
        return 0;
    if (rf_json_number(text, at, end, &v) != 0)
        return rf_seterr(err, RF_ELABEL, "%s: the class of box %u is not a number (\"%.*s\")",
                         what, nth, (int)RF_MIN(end - at, 40), text + at);
    return rf_annot_class_check(v, k->num_classes, nth, what, &k->classes[nth], err);
}

int rf_annot_json_boxes(const uint8_t *text, uint64_t len, const char *path,
                        const char *class_path, rf_annot_sink *k, const char *what, rf_err *err)
{
    uint32_t n = 0, nc = 0;
    int rc = each_at_path(text, len, path, box_item, k, &n, what, err);
    if (rc)
        return rc;
    if (n > k->cap)
        return rf_seterr(err, RF_ELABEL, "%s, field %s: %u boxes, more than max_boxes %u", what,
                         path, n, k->cap);
    for (uint32_t i = 0; i < k->cap; i++)
        k->classes[i] = -1;
    if (class_path && (rc = each_at_path(text, len, class_path, class_item, k, &nc, what, err)))
        return rc;
    if (class_path && nc != n)
        return rf_seterr(err, RF_ELABEL, "%s: %u class ids at %s for %u boxes at %s", what, nc,
                         class_path, n, path);
    k->n = n;
    return 0;
}

static int point_item(void *ctx, uint32_t nth, const uint8_t *text, uint64_t at, uint64_t end,
                      const char *what, rf_err *err)
{
    rf_annot_sink *k = ctx;
    double v[3] = {0, 0, 2};
    uint32_t got;
    if (nth >= k->cap)
        return 0;
    if (numbers(text, at, end, v, 3, &got) != 0 || got < 2 || got > 3)
        return rf_seterr(err, RF_ELABEL, "%s: point %u is not [x, y] or [x, y, v] (\"%.*s\")",
                         what, nth, (int)RF_MIN(end - at, 40), text + at);
    return rf_annot_point(k, v, nth, what, err);
}

int rf_annot_point(rf_annot_sink *k, const double v[3], uint32_t nth, const char *what,
                   rf_err *err)
{
    if (!isfinite(v[0]) || !isfinite(v[1]))
        return rf_seterr(err, RF_ELABEL, "%s: point %u [%g, %g] holds a number that is not "
                         "finite", what, nth, v[0], v[1]);
    if (!(v[2] == 0 || v[2] == 1 || v[2] == 2))
        return rf_seterr(err, RF_ELABEL, "%s: point %u has visibility %g, not 0, 1 or 2", what,
                         nth, v[2]);
    float *o = k->vals + (size_t)nth * 3;
    o[0] = (float)v[0], o[1] = (float)v[1], o[2] = (float)v[2];
    return 0;
}

int rf_annot_json_points(const uint8_t *text, uint64_t len, const char *path, rf_annot_sink *k,
                         const char *what, rf_err *err)
{
    uint32_t n = 0;
    int rc = each_at_path(text, len, path, point_item, k, &n, what, err);
    if (rc)
        return rc;
    if (n > k->cap)
        return rf_seterr(err, RF_ELABEL, "%s, field %s: %u points, more than max_points %u",
                         what, path, n, k->cap);
    k->n = n;
    return 0;
}
