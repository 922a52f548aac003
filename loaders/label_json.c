/* label_json.c — labels from a field of the sample's KEY.json member (rf_config.label_source
 * RF_LABEL_JSON, label_json_path "annotations.class_id").
 *
 * DESIGN. A strict JSON reader (RFC 8259) that finds one dotted path without building a tree:
 * one recursive-descent pass with a depth limit, validating the whole document (bad JSON
 * anywhere is a bad label) and remembering only the value at the path. Path keys are compared
 * after their escapes are decoded. A key appearing twice in an object on the path is an error:
 * readers disagree on which wins, so such a label means different things to different tools.
 * The value must be a JSON integer 0..INT32_MAX; anything else is a bad label, saying what it
 * is. Limits: RF_TAR_JSON_LABEL_BYTES_MAX, RF_JSON_DEPTH_MAX, RF_JSON_STRING_MAX, and the path
 * (RF_JSON_PATH_MAX, RF_JSON_PATH_PARTS). Reentrant: used on decode threads. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "loaders/dataset.h"
#include "loaders/tar.h"

#define JSON_KEY_MAX 256 /* a decoded key longer than any path part cannot match one */
#define JSON_STR_(x) #x
#define JSON_STR(x) JSON_STR_(x)

typedef struct jrd {
    const uint8_t *s;
    uint64_t n, i;
    const char *part[RF_JSON_PATH_PARTS];
    size_t part_len[RF_JSON_PATH_PARTS];
    uint32_t parts;
    int found;          /* the path's value was seen */
    uint64_t found_at, found_end; /* its bytes in the member */
    int fault;          /* enum rf_json_fault of the value (0: a valid label) */
    int32_t label;
    uint64_t err_at;    /* the bad byte, when the JSON is bad */
    const char *err;    /* what is wrong with the JSON */
} jrd;

static int bad(jrd *r, const char *what)
{
    if (!r->err) {
        r->err = what;
        r->err_at = r->i;
    }
    return -1;
}

static void skip_ws(jrd *r)
{
    while (r->i < r->n && (r->s[r->i] == ' ' || r->s[r->i] == '\t' || r->s[r->i] == '\n' ||
                           r->s[r->i] == '\r'))
        r->i++;
}

static int hex4(jrd *r, uint32_t *v)
{
    *v = 0;
    for (int k = 0; k < 4; k++, r->i++) {
        uint8_t c = r->i < r->n ? r->s[r->i] : 0;
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return bad(r, "a \\u escape needs 4 hex digits");
        *v = *v * 16 + (uint32_t)d;
    }
    return 0;
}

/* Append code point cp as UTF-8 to key (when there is room: a longer key matches nothing). */
static void put_utf8(char *key, size_t *kl, uint32_t cp)
{
    uint8_t b[4];
    size_t n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    if (n == 1)
        b[0] = (uint8_t)cp;
    else {
        for (size_t k = n - 1; k > 0; k--, cp >>= 6)
            b[k] = (uint8_t)(0x80 | (cp & 0x3f));
        b[0] = (uint8_t)((n == 2 ? 0xc0 : n == 3 ? 0xe0 : 0xf0) | cp);
    }
    for (size_t k = 0; k < n; k++, (*kl)++)
        if (*kl < JSON_KEY_MAX)
            key[*kl] = (char)b[k];
}

/* One escape after its backslash; its character goes to key when key is not NULL. */
static int escape(jrd *r, char *key, size_t *kl)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    uint8_t c = r->i < r->n ? r->s[r->i] : 0;
    const char *p = c ? strchr(from, c) : NULL;
    if (p) {
        r->i++;
        if (key)
            put_utf8(key, kl, (uint8_t)to[p - from]);
        return 0;
    }
    if (c != 'u')
        return bad(r, "an invalid escape in a string");
    r->i++;
    uint32_t cp, lo;
    if (hex4(r, &cp))
        return -1;
    if (cp >= 0xd800 && cp < 0xdc00 && r->i + 1 < r->n && r->s[r->i] == '\\' &&
        r->s[r->i + 1] == 'u') {
        r->i += 2;
        if (hex4(r, &lo))
            return -1;
        if (lo < 0xdc00 || lo > 0xdfff)
            return bad(r, "a \\u escape of a lone surrogate");
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
    } else if (cp >= 0xd800 && cp < 0xe000) {
        return bad(r, "a \\u escape of a lone surrogate");
    }
    if (key)
        put_utf8(key, kl, cp);
    return 0;
}

/* A string at r->i (its opening quote); decoded into key[0..*kl) when key is not NULL. */
static int string(jrd *r, char *key, size_t *kl)
{
    uint64_t start = ++r->i;
    if (kl)
        *kl = 0;
    for (;;) {
        if (r->i >= r->n)
            return bad(r, "the document ends inside a string");
        if (r->i - start > RF_JSON_STRING_MAX)
            return bad(r, "a string over the " JSON_STR(RF_JSON_STRING_MAX) "-byte limit");
        uint8_t c = r->s[r->i];
        if (c == '"') {
            r->i++;
            return 0;
        }
        if (c < 0x20)
            return bad(r, "a control character in a string");
        r->i++;
        if (c == '\\') {
            if (escape(r, key, kl))
                return -1;
        } else if (key) {
            if (*kl < JSON_KEY_MAX)
                key[*kl] = (char)c;
            (*kl)++;
        }
    }
}

static int digits(jrd *r)
{
    uint64_t s = r->i;
    while (r->i < r->n && r->s[r->i] >= '0' && r->s[r->i] <= '9')
        r->i++;
    return r->i > s ? 0 : bad(r, "a number without digits");
}

/* A number; when `target`, judged as the label (r->fault, r->label). */
static int number(jrd *r, int target)
{
    int neg = r->s[r->i] == '-', frac = 0;
    r->i += neg;
    uint64_t first = r->i;
    if (digits(r))
        return -1;
    if (r->s[first] == '0' && r->i - first > 1)
        return r->i = first + 1, bad(r, "a number with a leading zero");
    uint64_t end = r->i;
    if (r->i < r->n && r->s[r->i] == '.') {
        r->i++, frac = 1;
        if (digits(r))
            return -1;
    }
    if (r->i < r->n && (r->s[r->i] == 'e' || r->s[r->i] == 'E')) {
        r->i++, frac = 1;
        if (r->i < r->n && (r->s[r->i] == '+' || r->s[r->i] == '-'))
            r->i++;
        if (digits(r))
            return -1;
    }
    if (!target)
        return 0;
    uint64_t v = 0;
    for (uint64_t k = first; k < end && v <= INT32_MAX; k++)
        v = v * 10 + (uint64_t)(r->s[k] - '0');
    r->fault = frac ? RF_JSON_FAULT_FRACTION : neg && v ? RF_JSON_FAULT_NEGATIVE
               : v > INT32_MAX ? RF_JSON_FAULT_OVERFLOW : 0;
    r->label = r->fault ? -1 : (int32_t)v;
    return 0;
}

static int value(jrd *r, uint32_t depth, uint32_t level, int target);

/* Skip whitespace, then consume c when it comes next (1), else leave it (0). */
static int take(jrd *r, uint8_t c)
{
    skip_ws(r);
    if (r->i < r->n && r->s[r->i] == c)
        return r->i++, 1;
    return 0;
}

/* After an element of an object or array: 1 at a ',' (another follows), 0 at `close` (the
 * container ends), else bad JSON saying `what` was expected. */
static int after_item(jrd *r, uint8_t close, const char *what)
{
    if (take(r, ','))
        return 1;
    return take(r, close) ? 0 : bad(r, what);
}

/* One "key": value of an object that `level` path parts led to; *seen counts the keys equal
 * to the next part (a second one is refused: see DESIGN). */
static int member(jrd *r, uint32_t depth, uint32_t level, int *seen)
{
    char key[JSON_KEY_MAX];
    size_t kl;
    skip_ws(r);
    if (r->i >= r->n || r->s[r->i] != '"')
        return bad(r, "expected a key (a string)");
    uint64_t key_at = r->i;
    int on = level < r->parts;
    if (string(r, on ? key : NULL, &kl))
        return -1;
    int match = on && kl == r->part_len[level] && memcmp(key, r->part[level], kl) == 0;
    if (match && (*seen)++)
        return r->i = key_at, bad(r, "a duplicate key on the label's path");
    if (!take(r, ':'))
        return bad(r, "expected ':' after a key");
    return value(r, depth + 1, match ? level + 1 : r->parts + 1, match && level + 1 == r->parts);
}

/* An object; `level` path parts led to it (r->parts + 1: off the path). */
static int object(jrd *r, uint32_t depth, uint32_t level)
{
    int seen = 0, more;
    r->i++;
    if (take(r, '}'))
        return 0;
    do {
        if (member(r, depth, level, &seen))
            return -1;
    } while ((more = after_item(r, '}', "expected ',' or '}' in an object")) == 1);
    return more;
}

static int array(jrd *r, uint32_t depth)
{
    int more;
    r->i++;
    if (take(r, ']'))
        return 0;
    do {
        if (value(r, depth + 1, r->parts + 1, 0))
            return -1;
    } while ((more = after_item(r, ']', "expected ',' or ']' in an array")) == 1);
    return more;
}

static int literal(jrd *r, const char *word)
{
    size_t n = strlen(word);
    if (r->n - r->i < n || memcmp(r->s + r->i, word, n) != 0)
        return bad(r, "expected a value");
    r->i += n;
    return 0;
}

static int value_at(jrd *r, uint32_t depth, uint32_t level, int target);

/* Any value. `level`: the path parts matched by the keys that led here; `target`: this is the
 * value at the path, whose bytes are remembered for the message. */
static int value(jrd *r, uint32_t depth, uint32_t level, int target)
{
    int rc = value_at(r, depth, level, target);
    if (target)
        r->found_end = r->i;
    return rc;
}

static int value_at(jrd *r, uint32_t depth, uint32_t level, int target)
{
    if (depth > RF_JSON_DEPTH_MAX)
        return bad(r, "nesting deeper than " JSON_STR(RF_JSON_DEPTH_MAX) " levels");
    skip_ws(r);
    if (r->i >= r->n)
        return bad(r, "expected a value");
    uint8_t c = r->s[r->i];
    if (target) {
        r->found = 1, r->found_at = r->i;
        r->fault = c == '"' ? RF_JSON_FAULT_STRING : c == '{' ? RF_JSON_FAULT_OBJECT
                   : c == '[' ? RF_JSON_FAULT_ARRAY : c == 't' || c == 'f' ? RF_JSON_FAULT_BOOL
                   : c == 'n' ? RF_JSON_FAULT_NULL : 0;
    }
    switch (c) {
    case '{': return object(r, depth, level);
    case '[': return array(r, depth);
    case '"': return string(r, NULL, NULL);
    case 't': return literal(r, "true");
    case 'f': return literal(r, "false");
    case 'n': return literal(r, "null");
    default:
        if (c == '-' || (c >= '0' && c <= '9'))
            return number(r, target);
        return bad(r, "expected a value");
    }
}

int rf_json_path_check(const char *path, rf_err *err)
{
    return rf_json_path_check_named("label_json_path", path, err);
}

int rf_json_path_check_named(const char *name, const char *path, rf_err *err)
{
    size_t n = path ? strlen(path) : 0, parts = 1, part = 0;
    if (n == 0 || n > RF_JSON_PATH_MAX)
        return rf_seterr(err, RF_EINVAL, "%s must be 1..%d bytes, a dotted path of keys such "
                         "as \"annotations.class_id\"", name, RF_JSON_PATH_MAX);
    for (size_t i = 0; i <= n; i++, part++) {
        if (i < n && path[i] != '.')
            continue;
        if (part == 0)
            return rf_seterr(err, RF_EINVAL, "%s \"%s\" has an empty key at byte %zu", name,
                             path, i);
        if (i < n && ++parts > RF_JSON_PATH_PARTS)
            return rf_seterr(err, RF_EINVAL, "%s \"%s\" has more than %d keys", name, path,
                             RF_JSON_PATH_PARTS);
        part = (size_t)-1;
    }
    return 0;
}

int rf_json_find_label(const uint8_t *text, uint64_t len, const char *path, int32_t *label,
                       rf_json_result *res)
{
    jrd r = {.s = text, .n = len};
    for (const char *p = path; r.parts < RF_JSON_PATH_PARTS; p++) {
        const char *dot = strchr(p, '.');
        r.part[r.parts] = p;
        r.part_len[r.parts++] = dot ? (size_t)(dot - p) : strlen(p);
        if (!dot)
            break;
        p = dot;
    }
    *res = (rf_json_result){0};
    if (value(&r, 1, 0, r.parts == 0) == 0) {
        skip_ws(&r);
        if (r.i < r.n)
            bad(&r, "something after the document");
    }
    if (r.err) {
        res->syntax = r.err;
        res->at = r.err_at;
        return RF_JSON_FAULT_SYNTAX;
    }
    res->at = r.found_at;
    res->end = r.found_end;
    if (!r.found)
        return RF_JSON_FAULT_MISSING;
    *label = r.label;
    return r.fault;
}

int rf_json_next_item(const uint8_t *text, uint64_t end, uint64_t *pos, uint64_t *at,
                      uint64_t *item_end)
{
    jrd r = {.s = text, .n = end, .i = *pos};
    if (!take(&r, ',') && take(&r, ']'))
        return *pos = r.i, 0;
    skip_ws(&r);
    *at = r.i;
    if (value(&r, 1, 1, 0) != 0) /* parts 0: every value is off the path */
        return -1;
    *item_end = *pos = r.i;
    return 1;
}

/* The digits of text[i..j) into *m (the first 19 significant ones; *drop counts the rest). */
static uint64_t json_digits(const uint8_t *t, uint64_t i, uint64_t j, uint64_t m, int *kept,
                            int *drop)
{
    for (; i < j; i++) {
        if (*kept == 0 && t[i] == '0')
            continue; /* a leading zero */
        if (*kept < 19)
            m = m * 10 + (uint64_t)(t[i] - '0'), (*kept)++;
        else
            (*drop)++;
    }
    return m;
}

int rf_json_number(const uint8_t *text, uint64_t at, uint64_t end, double *v)
{
    jrd r = {.s = text, .n = end, .i = at};
    skip_ws(&r);
    at = r.i;
    if (at >= end || !(text[at] == '-' || (text[at] >= '0' && text[at] <= '9')) ||
        number(&r, 0) != 0)
        return -1;
    /* the grammar holds (number() checked it): [-] int [. frac] [e [+-] exp] */
    uint64_t i = at + (text[at] == '-'), s = i;
    while (i < r.i && text[i] >= '0' && text[i] <= '9')
        i++;
    int kept = 0, drop = 0;
    long frac = 0;
    uint64_t m = json_digits(text, s, i, 0, &kept, &drop);
    if (i < r.i && text[i] == '.') {
        uint64_t f = ++i;
        while (i < r.i && text[i] >= '0' && text[i] <= '9')
            i++;
        m = json_digits(text, f, i, m, &kept, &drop);
        frac = (long)(i - f); /* the value is digits x 10^(drop - frac) */
    }
    long e = 0;
    if (i < r.i && (text[i] == 'e' || text[i] == 'E')) {
        int neg = text[++i] == '-';
        i += text[i] == '-' || text[i] == '+';
        for (; i < r.i && e < 100000; i++)
            e = e * 10 + (text[i] - '0');
        e = neg ? -e : e;
    }
    e += drop - frac;
    double x = (double)m;
    for (; m && e < -300; e += 300) /* 10^-e itself would overflow: divide in steps */
        x /= 1e300;
    if (m && e)
        x = e > 0 ? x * pow(10.0, (double)e) : x / pow(10.0, (double)-e);
    *v = text[at] == '-' ? -x : x;
    return 0;
}
