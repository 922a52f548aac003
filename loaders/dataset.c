/* dataset.c — the flat sample table, shard pattern expansion and label checks.
 *
 * DESIGN. Formats fill the table once, at create; afterwards it is read-only and shared by
 * every thread without locks. Arrays are capped (RF_DATASET_*_MAX) so a runaway pattern cannot
 * exhaust memory silently.
 *
 * Patterns expand braces first (our own expander: glob(3)'s GLOB_BRACE knows no numeric ranges
 * and drops zero padding), then glob(3). Order is the user's: patterns as given, brace
 * alternatives as written, glob matches sorted bytewise (not by locale), so a dataset numbers
 * its samples the same on every machine. A URL goes through the same braces; a wildcard in an
 * s3:// pattern is replaced by the listing's matching keys (fnmatch as glob, sorted the same
 * way); an error quoting a URL is scrubbed of credentials (rf_url_scrub). */
#include "loaders/dataset.h"

#include <errno.h>
#include <fnmatch.h>
#include <glob.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loaders/tar.h"

#define RF_DATASET_FILES_MAX (1u << 24)
#define RF_DATASET_SAMPLES_MAX (1ull << 36)
#define RF_DATASET_KEYS_BYTES_MAX (1ull << 36)
#define RF_EXPAND_PATHS_MAX (1u << 22)  /* paths one call may produce */
#define RF_EXPAND_DEPTH_MAX 16          /* nested/sequential braces per pattern */
#define RF_PATTERN_BYTES_MAX 4096

/* ---- the table ---- */

int rf_dataset_add_file(rf_dataset *ds, const char *path, int fd, uint64_t size, rf_err *err)
{
    if (ds->nfiles >= RF_DATASET_FILES_MAX)
        return rf_seterr(err, RF_ELIMIT, "more than %u shard files", RF_DATASET_FILES_MAX);
    if (rf_grow(&ds->files, &ds->files_cap, (uint64_t)ds->nfiles + 1, sizeof *ds->files))
        return rf_seterr(err, RF_ENOMEM, "no memory for shard %s", path);
    char *copy = strdup(path);
    if (!copy)
        return rf_seterr(err, RF_ENOMEM, "no memory for shard %s", path);
    ds->files[ds->nfiles++] = (rf_file){.path = copy, .fd = fd, .size = size};
    return 0;
}

int rf_open_input(const char *path, const char *what, int *fd, uint64_t *size, rf_err *err)
{
    rf_err e = {0};
    int rc = rf_open_regular(path, what, RF_EFORMAT, fd, size, &e);
    return rc ? rf_seterr(err, rc, "%s: %s", path, e.msg) : 0;
}

/* One opener for every format whose inputs may be URLs, so a remote input is opened, named and
 * owned the same way whatever reads it. */
int rf_dataset_open_file(rf_dataset *ds, const char *path, const char *what, uint64_t *size,
                         rf_err *err)
{
    if (!rf_path_is_url(path)) {
        int fd;
        int rc = rf_open_input(path, what, &fd, size, err);
        if (rc == 0 && (rc = rf_dataset_add_file(ds, path, fd, *size, err)) != 0)
            close(fd); /* not owned by ds unless added */
        return rc;
    }
    if (!ds->remote)
        return rf_seterr(err, RF_EINVAL, "%s: this library was built without remote shard "
                         "support (libcurl), so URLs cannot be read", path);
    void *h = NULL;
    char shown[RF_PATH_BYTES_MAX];
    int rc = ds->remote->open(ds->remote->ctx, path, &h, size, shown, sizeof shown, err);
    if (rc == 0 && (rc = rf_dataset_add_file(ds, shown, -1, *size, err)) != 0)
        ds->remote->close(ds->remote->ctx, h);
    if (rc == 0)
        ds->files[ds->nfiles - 1].remote = h;
    return rc;
}

int rf_dataset_add_sample(rf_dataset *ds, const rf_sample *s, const char *key, size_t key_len,
                          rf_err *err)
{
    if (ds->nsamples >= RF_DATASET_SAMPLES_MAX)
        return rf_seterr(err, RF_ELIMIT, "more than %llu samples", RF_DATASET_SAMPLES_MAX);
    if (ds->keys_len + key_len + 1 > RF_DATASET_KEYS_BYTES_MAX)
        return rf_seterr(err, RF_ELIMIT, "sample keys exceed %llu bytes",
                         RF_DATASET_KEYS_BYTES_MAX);
    if (rf_grow(&ds->samples, &ds->samples_cap, ds->nsamples + 1, sizeof *ds->samples))
        return rf_seterr(err, RF_ENOMEM, "no memory for %" PRIu64 " samples", ds->nsamples + 1);
    if (rf_grow(&ds->keys, &ds->keys_cap, ds->keys_len + key_len + 1, 1) != 0)
        return rf_seterr(err, RF_ENOMEM, "no memory for sample keys");
    rf_sample *d = &ds->samples[ds->nsamples++];
    *d = *s;
    d->key = ds->keys_len;
    memcpy(ds->keys + ds->keys_len, key, key_len);
    ds->keys[ds->keys_len + key_len] = 0;
    ds->keys_len += key_len + 1;
    ds->max_span = RF_MAX(ds->max_span, (uint64_t)s->length);
    ds->total_bytes += s->length;
    return 0;
}

void rf_dataset_free(rf_dataset *ds)
{
    if (!ds)
        return;
    for (uint32_t i = 0; i < ds->nfiles; i++) {
        if (ds->files[i].fd >= 0)
            close(ds->files[i].fd);
        if (ds->files[i].remote && ds->remote)
            ds->remote->close(ds->remote->ctx, ds->files[i].remote);
        free(ds->files[i].path);
    }
    free(ds->files);
    free(ds->samples);
    free(ds->keys);
    free(ds->tok_first);
    memset(ds, 0, sizeof *ds);
}

/* ---- pattern expansion ---- */

typedef struct plist {
    char **v;
    uint64_t n, cap;
} plist;

static int plist_push(plist *l, char *s, rf_err *err)
{
    if (l->n >= RF_EXPAND_PATHS_MAX) {
        free(s);
        return rf_seterr(err, RF_ELIMIT, "shard patterns expand to more than %u paths",
                         RF_EXPAND_PATHS_MAX);
    }
    if (rf_grow(&l->v, &l->cap, l->n + 1, sizeof *l->v) != 0) {
        free(s);
        return rf_seterr(err, RF_ENOMEM, "no memory expanding shard patterns");
    }
    l->v[l->n++] = s;
    return 0;
}

static char *concat3(const char *a, size_t alen, const char *b, size_t blen, const char *c)
{
    size_t clen = strlen(c);
    char *s = malloc(alen + blen + clen + 1);
    if (s) {
        memcpy(s, a, alen);
        memcpy(s + alen, b, blen);
        memcpy(s + alen + blen, c, clen + 1);
    }
    return s;
}

/* Parse "N..M" (decimal, optional '-') into the range and the zero-pad width (bash rule: when
 * either end has a leading zero, every number is padded to the wider end). */
static int parse_range(const char *s, size_t len, int64_t *a, int64_t *b, int *width)
{
    const char *dots = NULL;
    for (size_t i = 0; i + 1 < len; i++)
        if (s[i] == '.' && s[i + 1] == '.') {
            dots = s + i;
            break;
        }
    if (!dots)
        return -1;
    const char *part[2] = {s, dots + 2};
    size_t plen[2] = {(size_t)(dots - s), len - (size_t)(dots - s) - 2};
    int64_t v[2];
    int pad = 0, w = 0;
    for (int k = 0; k < 2; k++) {
        const char *p = part[k];
        size_t n = plen[k], i = 0;
        int neg = n > 0 && p[0] == '-';
        i += (size_t)neg;
        if (i == n || n - i > 15)
            return -1;
        if (p[i] == '0' && n - i > 1)
            pad = 1;
        int64_t x = 0;
        for (; i < n; i++) {
            if (p[i] < '0' || p[i] > '9')
                return -1;
            x = x * 10 + (p[i] - '0');
        }
        v[k] = neg ? -x : x;
        w = RF_MAX(w, (int)n);
    }
    *a = v[0];
    *b = v[1];
    *width = pad ? w : 0;
    return 0;
}

static int expand_braces(const char *pat, int depth, plist *out, rf_err *err);

/* Expand pre + alternative + post for one alternative. */
static int expand_alt(const char *pre, size_t prelen, const char *alt, size_t altlen,
                      const char *post, int depth, plist *out, rf_err *err)
{
    char *s = concat3(pre, prelen, alt, altlen, post);
    if (!s)
        return rf_seterr(err, RF_ENOMEM, "no memory expanding shard patterns");
    int rc = expand_braces(s, depth + 1, out, err);
    free(s);
    return rc;
}

static int expand_range(const char *pat, const char *open, const char *close, int depth,
                        plist *out, rf_err *err)
{
    int64_t a, b;
    int width;
    if (parse_range(open + 1, (size_t)(close - open - 1), &a, &b, &width) != 0)
        return rf_seterr(err, RF_EINVAL, "malformed brace expression in pattern %s", pat);
    if ((a > b ? a - b : b - a) >= (int64_t)RF_EXPAND_PATHS_MAX)
        return rf_seterr(err, RF_ELIMIT, "brace range in %s has more than %u values", pat,
                         RF_EXPAND_PATHS_MAX);
    int64_t step = a <= b ? 1 : -1;
    for (int64_t x = a;; x += step) {
        char num[32];
        int n = width ? snprintf(num, sizeof num, "%0*" PRId64, width, x)
                      : snprintf(num, sizeof num, "%" PRId64, x);
        int rc = expand_alt(pat, (size_t)(open - pat), num, (size_t)n, close + 1, depth, out, err);
        if (rc)
            return rc;
        if (x == b)
            break;
    }
    return 0;
}

/* Expand the first top-level {...} of pat, recursing for the rest; a pattern without braces is
 * pushed as is. */
static int expand_braces(const char *pat, int depth, plist *out, rf_err *err)
{
    if (depth > RF_EXPAND_DEPTH_MAX)
        return rf_seterr(err, RF_EINVAL, "too many braces in shard pattern");
    const char *open = strchr(pat, '{');
    if (!open) {
        if (strchr(pat, '}'))
            return rf_seterr(err, RF_EINVAL, "unmatched '}' in pattern %s", pat);
        char *s = strdup(pat);
        return s ? plist_push(out, s, err)
                 : rf_seterr(err, RF_ENOMEM, "no memory expanding shard patterns");
    }
    const char *close = NULL, *commas[1] = {NULL};
    int level = 0;
    for (const char *p = open; *p; p++) {
        if (*p == '{')
            level++;
        else if (*p == '}' && --level == 0) {
            close = p;
            break;
        } else if (*p == ',' && level == 1 && !commas[0])
            commas[0] = p;
    }
    if (!close)
        return rf_seterr(err, RF_EINVAL, "unmatched '{' in pattern %s", pat);
    if (!commas[0])
        return expand_range(pat, open, close, depth, out, err);
    /* A list: split at top-level commas; each alternative may hold braces of its own. */
    const char *start = open + 1;
    level = 0;
    for (const char *p = open + 1; p <= close; p++) {
        if (*p == '{')
            level++;
        else if (*p == '}' && p != close)
            level--;
        else if ((*p == ',' && level == 0) || p == close) {
            int rc = expand_alt(pat, (size_t)(open - pat), start, (size_t)(p - start), close + 1,
                                depth, out, err);
            if (rc)
                return rc;
            start = p + 1;
        }
    }
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Turn one brace-free path into files: glob it when it has a wildcard, else require it to exist. */
/* A directory that does not exist simply matches nothing (GLOB_NOMATCH, reported as "matched
 * no file"); any other error (permissions, I/O) aborts the expansion and is reported. */
static _Thread_local int glob_errno;
static int glob_error(const char *epath, int eerrno)
{
    if (eerrno == ENOENT || eerrno == ENOTDIR)
        return 0;
    glob_errno = eerrno;
    return 1;
}

static int expand_glob(const char *path, const char *pattern, plist *out, rf_err *err)
{
    if (!strpbrk(path, "*?[")) {
        struct stat st;
        if (stat(path, &st) != 0)
            return rf_seterr(err, RF_ENOFILES, "shard %s (from pattern %s): %s", path, pattern,
                             strerror(errno));
        char *s = strdup(path);
        return s ? plist_push(out, s, err) : rf_seterr(err, RF_ENOMEM, "no memory");
    }
    glob_t g;
    glob_errno = 0;
    int rc = glob(path, GLOB_NOSORT, glob_error, &g);
    if (rc == GLOB_NOMATCH)
        return rf_seterr(err, RF_ENOFILES, "pattern %s matched no file", pattern);
    if (rc != 0) {
        globfree(&g);
        return rf_seterr(err, rc == GLOB_NOSPACE ? RF_ENOMEM : -glob_errno,
                         "pattern %s: glob failed (%s)", pattern,
                         rc == GLOB_ABORTED ? strerror(glob_errno) : "no memory");
    }
    qsort(g.gl_pathv, g.gl_pathc, sizeof *g.gl_pathv, cmp_str);
    for (size_t i = 0; i < g.gl_pathc && rc == 0; i++) {
        char *s = strdup(g.gl_pathv[i]);
        rc = s ? plist_push(out, s, err) : rf_seterr(err, RF_ENOMEM, "no memory");
    }
    globfree(&g);
    return rc;
}

/* ---- URLs ---- */

typedef struct url_match {
    const char *pattern;
    plist found;
} url_match;

static int url_listed(void *arg, const char *url, rf_err *err)
{
    url_match *m = arg;
    if (fnmatch(m->pattern, url, FNM_PATHNAME) != 0)
        return 0;
    char *s = strdup(url);
    return s ? plist_push(&m->found, s, err) : rf_seterr(err, RF_ENOMEM, "no memory");
}

/* A brace-free URL: itself (it is checked when opened), or with a wildcard the listing's
 * matches, sorted bytewise as glob's are. */
static int expand_url(const char *url, const char *pattern, const rf_remote_ops *remote,
                      plist *out, rf_err *err)
{
    /* In an http(s) URL '?' begins the query, never a wildcard, and the host (a bracketed
     * IPv6 literal: http://[::1]:8000/) is no part of a pattern; only the path is looked at. */
    int s3 = strncmp(url, "s3://", 5) == 0;
    size_t end = s3 ? strlen(url) : strcspn(url, "?#");
    size_t path = s3 ? 5 : strstr(url, "://") + 3 - url;
    path += strcspn(url + path, "/");
    const char *frag = s3 ? NULL : strchr(url, '#');
    if (frag)
        return rf_seterr(err, RF_EINVAL, "%s: a URL's fragment (%.64s) never reaches the server, "
                         "so it names no object: remove it (a '#' in a path is written %%23)",
                         pattern, frag);
    if (path >= end || path + strcspn(url + path, s3 ? "*?[" : "*[") >= end) {
        char *s = strdup(url);
        return s ? plist_push(out, s, err) : rf_seterr(err, RF_ENOMEM, "no memory");
    }
    if (!s3 || !remote)
        return rf_seterr(err, RF_EINVAL, "pattern %s: %s", pattern,
                         remote ? "an http(s) server cannot be listed: name its shards with "
                                  "brace ranges ({0000..0099}) instead of wildcards"
                                : "this library was built without remote shard support "
                                  "(libcurl), so URLs cannot be read");
    url_match m = {.pattern = url};
    int rc = remote->list(remote->ctx, url, url_listed, &m, err);
    if (rc == 0 && m.found.n == 0)
        rc = rf_seterr(err, RF_ENOFILES, "pattern %s matched no object", pattern);
    if (rc == 0)
        qsort(m.found.v, m.found.n, sizeof *m.found.v, cmp_str);
    for (uint64_t i = 0; i < m.found.n; i++) {
        if (rc == 0)
            rc = plist_push(out, m.found.v[i], err);
        else
            free(m.found.v[i]);
    }
    free(m.found.v);
    return rc;
}

static void plist_free(plist *l)
{
    for (uint64_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static int expand_one(const char *pattern, const rf_remote_ops *remote, plist *out,
                      rf_err *err)
{
    if (!pattern || !*pattern)
        return rf_seterr(err, RF_EINVAL, "empty shard pattern");
    if (strlen(pattern) > RF_PATTERN_BYTES_MAX)
        return rf_seterr(err, RF_EINVAL, "shard pattern longer than %d bytes",
                         RF_PATTERN_BYTES_MAX);
    plist braced = {0};
    int rc = expand_braces(pattern, 0, &braced, err);
    for (uint64_t i = 0; i < braced.n && rc == 0; i++)
        rc = rf_path_is_url(braced.v[i]) ? expand_url(braced.v[i], pattern, remote, out, err)
                                         : expand_glob(braced.v[i], pattern, out, err);
    plist_free(&braced);
    return rc;
}

int rf_expand_patterns(const char *const *patterns, uint32_t n, char ***out, uint32_t *count,
                       rf_err *err)
{
    return rf_expand_patterns_remote(patterns, n, NULL, out, count, err);
}

int rf_expand_patterns_remote(const char *const *patterns, uint32_t n,
                              const rf_remote_ops *remote, char ***out, uint32_t *count,
                              rf_err *err)
{
    *out = NULL;
    *count = 0;
    if (n == 0)
        return rf_seterr(err, RF_ENOFILES, "no shard patterns given");
    plist all = {0};
    for (uint32_t i = 0; i < n; i++) {
        int rc = expand_one(patterns[i], remote, &all, err);
        if (rc && err)
            rf_url_scrub(err->msg); /* a URL pattern quoted as given may hold credentials */
        if (rc) {
            plist_free(&all);
            return rc;
        }
    }
    *out = all.v;
    *count = (uint32_t)all.n;
    return 0;
}

void rf_free_paths(char **paths, uint32_t count)
{
    if (!paths)
        return;
    for (uint32_t i = 0; i < count; i++)
        free(paths[i]);
    free(paths);
}

/* ---- labels ---- */

#define LABEL_QUOTE_MAX 24 /* label bytes a message shows */

/* ASCII whitespace (isspace() in the C locale): WebDataset writers leave "5\n" as well as "5". */
static int is_space(uint8_t c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

int rf_parse_label(const uint8_t *text, uint64_t len, int32_t *label)
{
    uint64_t i = 0, end = len;
    while (i < end && is_space(text[i]))
        i++;
    while (end > i && is_space(text[end - 1]))
        end--;
    if (i == end)
        return RF_LABEL_FAULT_EMPTY;
    int neg = text[i] == '-';
    i += (uint64_t)neg;
    if (i == end)
        return RF_LABEL_FAULT_NOT_INTEGER;
    int64_t v = 0;
    for (; i < end; i++) {
        if (text[i] < '0' || text[i] > '9')
            return RF_LABEL_FAULT_NOT_INTEGER;
        if (v <= INT32_MAX) /* stops growing once too large: no int64 overflow, any length */
            v = v * 10 + (text[i] - '0');
    }
    if (neg)
        return RF_LABEL_FAULT_NEGATIVE;
    if (v > INT32_MAX)
        return RF_LABEL_FAULT_OVERFLOW;
    *label = (int32_t)v;
    return 0;
}

/* The first LABEL_QUOTE_MAX bytes of text for a message: printable ASCII as it is, anything
 * else (a newline, a NUL, UTF-8) as \xNN, and "..." when there is more. */
static void quote_label(const uint8_t *text, uint64_t len, char *out, size_t cap)
{
    size_t n = 0;
    for (uint64_t i = 0; i < len && i < LABEL_QUOTE_MAX && n + 5 < cap; i++) {
        uint8_t c = text[i];
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
            out[n++] = (char)c;
        else
            n += (size_t)snprintf(out + n, cap - n, "\\x%02x", c);
    }
    if (len > LABEL_QUOTE_MAX && n + 4 <= cap)
        memcpy(out + n, "...", 3), n += 3;
    out[n] = 0;
}

static void offset_text(uint64_t offset, char *out, size_t cap)
{
    if (offset == RF_LABEL_NO_OFFSET)
        out[0] = 0;
    else
        snprintf(out, cap, " at offset %" PRIu64, offset);
}

int rf_check_label(const char *key, const uint8_t *text, uint64_t len, uint64_t offset,
                   int32_t *label, rf_err *err)
{
    static const char *const why[] = {
        [RF_LABEL_FAULT_EMPTY] = "only whitespace",
        [RF_LABEL_FAULT_NEGATIVE] = "a negative number",
        [RF_LABEL_FAULT_NOT_INTEGER] = "not a decimal integer",
        [RF_LABEL_FAULT_OVERFLOW] = "a number over 2147483647",
    };
    char at[48], q[LABEL_QUOTE_MAX * 4 + 4];
    offset_text(offset, at, sizeof at);
    if (len > RF_TAR_LABEL_BYTES_MAX)
        return rf_seterr(err, RF_ELABEL, "label member %s.%s%s is %" PRIu64 " bytes, over the "
                         "%u-byte limit of a label", key, RF_TAR_LABEL_EXT, at, len,
                         RF_TAR_LABEL_BYTES_MAX);
    if (len == 0)
        return rf_seterr(err, RF_ELABEL, "label member %s.%s%s is empty; a label is a decimal "
                         "integer 0..2147483647", key, RF_TAR_LABEL_EXT, at);
    int fault = rf_parse_label(text, len, label);
    if (!fault)
        return 0;
    quote_label(text, len, q, sizeof q);
    return rf_seterr(err, RF_ELABEL, "label member %s.%s%s holds \"%s\", %s; a label is a "
                     "decimal integer 0..2147483647", key, RF_TAR_LABEL_EXT, at, q, why[fault]);
}

int rf_label_missing(const char *key, const char *ext, uint64_t offset, rf_err *err)
{
    char at[48];
    offset_text(offset, at, sizeof at);
    return rf_seterr(err, RF_ELABEL, "sample %s%s has no label member (%s.%s); set label_source "
                     "RF_LABEL_NONE (Python label=None, --no-labels) for unlabelled data", key,
                     at, key, ext);
}

const char *rf_label_ext(uint32_t source)
{
    return source == RF_LABEL_CLS ? RF_TAR_LABEL_EXT : source == RF_LABEL_JSON ? "json" : NULL;
}

uint64_t rf_label_bytes_max(uint32_t source)
{
    return source == RF_LABEL_JSON ? RF_TAR_JSON_LABEL_BYTES_MAX : RF_TAR_LABEL_BYTES_MAX;
}

/* The label at json_path of the member KEY.json holding text[0..len), as rf_check_label
 * judges a .cls member: every fault is RF_ELABEL naming the member, its offset and what. */
static int check_label_json(const char *json_path, const char *key, const uint8_t *text,
                            uint64_t len, uint64_t offset, int32_t *label, rf_err *err)
{
    static const char *const why[] = {
        [RF_JSON_FAULT_FRACTION] = "a number with a fraction or exponent",
        [RF_JSON_FAULT_NEGATIVE] = "a negative number",
        [RF_JSON_FAULT_OVERFLOW] = "a number over 2147483647",
        [RF_JSON_FAULT_STRING] = "a string", [RF_JSON_FAULT_OBJECT] = "an object",
        [RF_JSON_FAULT_ARRAY] = "an array", [RF_JSON_FAULT_BOOL] = "a boolean",
        [RF_JSON_FAULT_NULL] = "null",
    };
    char at[48], q[LABEL_QUOTE_MAX * 4 + 4];
    offset_text(offset, at, sizeof at);
    if (len > RF_TAR_JSON_LABEL_BYTES_MAX)
        return rf_seterr(err, RF_ELABEL, "label member %s.json%s is %" PRIu64 " bytes, over the "
                         "%u-byte limit of a JSON label", key, at, len,
                         RF_TAR_JSON_LABEL_BYTES_MAX);
    rf_json_result res;
    int fault = rf_json_find_label(text, len, json_path, label, &res);
    if (fault == RF_JSON_FAULT_SYNTAX)
        return rf_seterr(err, RF_ELABEL, "label member %s.json%s is not valid JSON: %s at byte "
                         "%" PRIu64 " of the member", key, at, res.syntax, res.at);
    if (fault == RF_JSON_FAULT_MISSING)
        return rf_seterr(err, RF_ELABEL, "label member %s.json%s has no field %s; a label is "
                         "an integer 0..2147483647", key, at, json_path);
    if (!fault)
        return 0;
    if (fault >= RF_JSON_FAULT_STRING)
        return rf_seterr(err, RF_ELABEL, "label member %s.json%s: field %s (byte %" PRIu64 " of "
                         "the member) is %s; a label is an integer 0..2147483647", key, at,
                         json_path, res.at, why[fault]);
    quote_label(text + res.at, res.end - res.at, q, sizeof q);
    return rf_seterr(err, RF_ELABEL, "label member %s.json%s: field %s (byte %" PRIu64 " of the "
                     "member) holds \"%s\", %s; a label is an integer 0..2147483647", key, at,
                     json_path, res.at, q, why[fault]);
}

int rf_check_label_as(uint32_t source, const char *json_path, const char *key,
                      const uint8_t *text, uint64_t len, uint64_t offset, int32_t *label,
                      rf_err *err)
{
    if (source == RF_LABEL_JSON)
        return check_label_json(json_path, key, text, len, offset, label, err);
    return rf_check_label(key, text, len, offset, label, err);
}
