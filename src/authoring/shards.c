/* shards.c — the public dataset-making API (include/ringfeed_shards.h): pattern expansion,
 * image lists, JPEG checks, the shard writer and index helpers. Shard inspection is in
 * the second half of this file.
 *
 * DESIGN. Everything here wraps one internal implementation so that tools, tests and the
 * loader agree byte for byte: patterns go through rf_expand_patterns (the loader's expander),
 * shards through rf_tarw (src/authoring/tarwrite.c, the only tar writer), indexes through
 * rf_tar_write_index, JPEGs through the loader's decoder (rf_decode_check), tar parsing
 * through rf_tar_scanner.
 * The image list is the one walker of class folders and `path label` files: ringfeed-pack
 * packs it and the folder loader (loaders/folder.c) reads it, so both see the same files in
 * the same order with the same labels. Lists keep all strings in one arena addressed by
 * offsets (it grows by realloc), so 1.28 M ImageNet entries cost a few allocations.
 * No object here is shared between threads; none keeps global state. */
#include "ringfeed_shards.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/common.h"
#include "loaders/dataset.h"
#include "decode/decode.h"
#include "decode/jpeg_restart.h"
#include "loaders/tar.h"
#include "loaders/tar_index.h"
#include "authoring/tarwrite.h"

#define SH_PATH_MAX 4096
#define SH_LIST_FILE_BYTES_MAX (1ull << 32)  /* a `path label` file larger than this is refused */
#define SH_DIR_ENTRIES_MAX (1u << 24)         /* entries in one folder */
#define SH_CLASSES_MAX (1u << 20)
#define SH_DEDUP_TRIES_MAX 1000

/* Copy an rf_err's text to the caller's buffer (which may be NULL); returns the code. */
static int give(const rf_err *e, char *err, size_t err_len)
{
    if (err && err_len)
        snprintf(err, err_len, "%s", e->msg);
    return e->code;
}

/* ---- paths ------------------------------------------------------------------------------ */

struct rf_paths {
    char **v;
    uint32_t n;
};

int rf_paths_expand(const char *const *patterns, uint32_t count, rf_paths **out, char *err,
                    size_t err_len)
{
    rf_err e = {0};
    *out = NULL;
    rf_paths *p = calloc(1, sizeof *p);
    if (!p)
        return give(&(rf_err){.code = RF_ENOMEM, .msg = "no memory"}, err, err_len);
    int rc = rf_expand_patterns(patterns, count, &p->v, &p->n, &e);
    if (rc) {
        free(p);
        return give(&e, err, err_len);
    }
    *out = p;
    return 0;
}

uint32_t rf_paths_count(const rf_paths *p) { return p ? p->n : 0; }
const char *rf_paths_get(const rf_paths *p, uint32_t i) { return p && i < p->n ? p->v[i] : NULL; }

void rf_paths_free(rf_paths *p)
{
    if (!p)
        return;
    rf_free_paths(p->v, p->n);
    free(p);
}

/* ---- image lists ------------------------------------------------------------------------ */

typedef struct entry {
    uint64_t path, name, key; /* arena offsets */
    uint64_t size;
    int32_t label;
} entry;

typedef struct unreadable {
    uint64_t msg;             /* arena offset of "PATH: why" */
    int32_t code;
} unreadable;

/* A folder's identity, to notice a symlink that leads back to a folder being walked. */
typedef struct dir_id {
    dev_t dev;
    ino_t ino;
} dir_id;

/* What pass one of walk_class found for an entry that pass two walks into. */
typedef struct subdir {
    dir_id id;
    int walk;
} subdir;

struct rf_image_list {
    entry *e;
    uint64_t n, cap;
    char *arena;
    uint64_t alen, acap;
    uint64_t *classes;        /* arena offsets of class names */
    uint32_t nclasses, ccap;
    uint64_t skipped, renamed;
    unreadable *bad;          /* entries that cannot be samples (rf_image_list_unreadable) */
    uint64_t nbad, badcap;
};

static int arena_put(rf_image_list *l, const char *s, size_t n, uint64_t *off, rf_err *e)
{
    if (l->alen + n + 1 > l->acap) {
        uint64_t cap = l->acap ? l->acap : 1 << 16;
        while (cap < l->alen + n + 1)
            cap *= 2;
        char *q = realloc(l->arena, (size_t)cap);
        if (!q)
            return rf_seterr(e, RF_ENOMEM, "no memory for the image list");
        l->arena = q;
        l->acap = cap;
    }
    memcpy(l->arena + l->alen, s, n);
    l->arena[l->alen + n] = 0;
    *off = l->alen;
    l->alen += n + 1;
    return 0;
}

static int is_jpeg_name(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot && (strcasecmp(dot + 1, "jpg") == 0 || strcasecmp(dot + 1, "jpeg") == 0);
}

/* The name of an entry: its relative path without the extension (after the last dot of the
 * basename, if any). */
static size_t strip_ext(const char *rel)
{
    const char *base = strrchr(rel, '/');
    base = base ? base + 1 : rel;
    const char *dot = strrchr(base, '.');
    return dot && dot != base ? (size_t)(dot - rel) : strlen(rel);
}

static int add_entry(rf_image_list *l, const char *path, const char *rel, uint64_t size,
                     int32_t label, rf_err *e)
{
    if (l->n >= RF_IMAGE_LIST_FILES_MAX)
        return rf_seterr(e, RF_ELIMIT, "more than %llu images", RF_IMAGE_LIST_FILES_MAX);
    if (rf_grow(&l->e, &l->cap, l->n + 1, sizeof *l->e))
        return rf_seterr(e, RF_ENOMEM, "no memory for the image list");
    entry *en = &l->e[l->n];
    en->size = size;
    en->label = label;
    int rc = arena_put(l, path, strlen(path), &en->path, e);
    if (rc == 0)
        rc = arena_put(l, rel, strip_ext(rel), &en->name, e);
    if (rc == 0)
        l->n++;
    return rc;
}

/* Record an entry that cannot be a sample, with its message ("PATH: why"); the walk goes on.
 * The list's callers decide what an unreadable entry means (pack skips or fails, the folder
 * loader refuses), so the walker itself never stops on one. */
static int add_unreadable(rf_image_list *l, rf_err *e, int32_t code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int add_unreadable(rf_image_list *l, rf_err *e, int32_t code, const char *fmt, ...)
{
    if (l->nbad >= RF_IMAGE_LIST_FILES_MAX)
        return rf_seterr(e, RF_ELIMIT, "more than %llu unreadable entries",
                         RF_IMAGE_LIST_FILES_MAX);
    if (rf_grow(&l->bad, &l->badcap, l->nbad + 1, sizeof *l->bad))
        return rf_seterr(e, RF_ENOMEM, "no memory for the image list");
    char msg[SH_PATH_MAX + 256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t len = n < 0 ? 0 : RF_MIN((size_t)n, sizeof msg - 1);
    l->bad[l->nbad].code = code;
    int rc = arena_put(l, msg, len, &l->bad[l->nbad].msg, e);
    if (rc == 0)
        l->nbad++;
    return rc;
}

/* 1 when the folder st is one of the depth+1 folders being walked (chain[0] is the root): a
 * symlink back to it would be walked for ever. */
static int loops_back(const dir_id *chain, uint32_t depth, const struct stat *st)
{
    for (uint32_t k = 0; k <= depth; k++)
        if (chain[k].dev == st->st_dev && chain[k].ino == st->st_ino)
            return 1;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names of a folder's entries (without "." and ".."). */
static int read_dir_sorted(const char *dir, char ***names, uint32_t *count, rf_err *e)
{
    *names = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (!d)
        return rf_seterr(e, -errno, "%s: %s", dir, strerror(errno));
    char **v = NULL;
    uint32_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (errno = 0, de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (n >= SH_DIR_ENTRIES_MAX) {
            rc = rf_seterr(e, RF_ELIMIT, "%s: more than %u entries", dir, SH_DIR_ENTRIES_MAX);
            break;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **q = realloc(v, cap * sizeof *q);
            if (!q) {
                rc = rf_seterr(e, RF_ENOMEM, "no memory reading %s", dir);
                break;
            }
            v = q;
        }
        if (!(v[n] = strdup(de->d_name)))
            rc = rf_seterr(e, RF_ENOMEM, "no memory reading %s", dir);
        else
            n++;
    }
    if (rc == 0 && errno != 0)
        rc = rf_seterr(e, -errno, "%s: %s", dir, strerror(errno));
    closedir(d);
    if (v)
        qsort(v, n, sizeof *v, cmp_str);
    *names = v;
    *count = n;
    return rc;
}

static void free_names(char **v, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static int join(char *out, const char *a, const char *b, rf_err *e)
{
    if ((size_t)snprintf(out, SH_PATH_MAX, "%s/%s", a, b) >= SH_PATH_MAX)
        return rf_seterr(e, RF_ELIMIT, "%s/%s: path longer than %d bytes", a, b, SH_PATH_MAX);
    return 0;
}

/* Sort one entry of a class folder (pass one of walk_class): a sample, a subfolder to walk
 * (*sd), an unreadable entry, or another file to skip. Entries are looked at through
 * stat(), which follows symlinks, and a file is never opened here: a FIFO would block. */
static int examine(rf_image_list *l, const char *path, const char *rel, const char *name,
                   int32_t label, const dir_id *chain, uint32_t depth, subdir *sd, rf_err *e)
{
    struct stat st;
    if (stat(path, &st) != 0) /* dangling, a loop of links (ELOOP), gone since readdir */
        return add_unreadable(l, e, -errno, "%s: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode)) {
        if (loops_back(chain, depth, &st))
            return add_unreadable(l, e, -ELOOP, "%s: a symlink to a folder above it (a loop); "
                                  "not walked", path);
        *sd = (subdir){{st.st_dev, st.st_ino}, 1};
        return 0;
    }
    if (!is_jpeg_name(name)) {
        l->skipped++;
        return 0;
    }
    if (!S_ISREG(st.st_mode))
        return add_unreadable(l, e, RF_EFORMAT, "%s: %s, not a regular file; not read", path,
                              rf_file_kind(st.st_mode));
    return add_entry(l, path, rel, (uint64_t)st.st_size, label, e);
}

/* Files of a class folder first (sorted), then its subfolders (sorted), recursively: the order
 * torchvision's sorted os.walk gives in all but exotic names. `rel` is relative to the root;
 * chain[0..depth] are the folders from the root down to `dir`. */
static int walk_class(rf_image_list *l, const char *dir, const char *rel, int32_t label,
                      dir_id *chain, uint32_t depth, rf_err *e)
{
    if (depth > RF_IMAGE_LIST_DEPTH_MAX)
        return rf_seterr(e, RF_ELIMIT, "%s: folders nested deeper than %d", dir,
                         RF_IMAGE_LIST_DEPTH_MAX);
    char **names;
    uint32_t n;
    int rc = read_dir_sorted(dir, &names, &n, e);
    char *path = malloc(SH_PATH_MAX), *sub = malloc(SH_PATH_MAX);
    subdir *sds = calloc(n ? n : 1, sizeof *sds);
    if (rc == 0 && (!path || !sub || !sds))
        rc = rf_seterr(e, RF_ENOMEM, "no memory walking %s", dir);
    for (int pass = 0; pass < 2 && rc == 0; pass++) {
        for (uint32_t i = 0; i < n && rc == 0; i++) {
            if (names[i][0] == '.') {
                l->skipped += pass == 0;
                continue;
            }
            if ((rc = join(path, dir, names[i], e)) || (rc = join(sub, rel, names[i], e)))
                break;
            if (pass == 0) {
                rc = examine(l, path, sub, names[i], label, chain, depth, &sds[i], e);
            } else if (sds[i].walk) {
                chain[depth + 1] = sds[i].id;
                rc = walk_class(l, path, sub, label, chain, depth + 1, e);
            }
        }
    }
    free(sds);
    free(sub);
    free(path);
    free_names(names, n);
    return rc;
}

static int add_class(rf_image_list *l, const char *name, rf_err *e)
{
    if (l->nclasses >= SH_CLASSES_MAX)
        return rf_seterr(e, RF_ELIMIT, "more than %u class folders", SH_CLASSES_MAX);
    if (l->nclasses == l->ccap) {
        uint32_t cap = l->ccap ? l->ccap * 2 : 64;
        uint64_t *q = realloc(l->classes, cap * sizeof *q);
        if (!q)
            return rf_seterr(e, RF_ENOMEM, "no memory for class names");
        l->classes = q;
        l->ccap = cap;
    }
    return arena_put(l, name, strlen(name), &l->classes[l->nclasses++], e);
}

/* The root's entries: every folder is a class (labels by sorted name); files beside them and
 * hidden entries are skipped; an entry whose stat fails may have been a class and is recorded
 * as unreadable. */
static int walk_root(rf_image_list *l, const char *root, const struct stat *root_st, rf_err *e)
{
    char **names;
    uint32_t n;
    int rc = read_dir_sorted(root, &names, &n, e);
    char *path = malloc(SH_PATH_MAX);
    dir_id chain[RF_IMAGE_LIST_DEPTH_MAX + 2] = {{root_st->st_dev, root_st->st_ino}};
    if (rc == 0 && !path)
        rc = rf_seterr(e, RF_ENOMEM, "no memory");
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        struct stat st;
        if ((rc = join(path, root, names[i], e)))
            break;
        if (names[i][0] != '.' && stat(path, &st) != 0) {
            rc = add_unreadable(l, e, -errno, "%s: %s (not counted as a class)", path,
                                strerror(errno));
        } else if (names[i][0] == '.' || !S_ISDIR(st.st_mode)) {
            l->skipped++; /* files beside the class folders, hidden entries */
        } else if (loops_back(chain, 0, &st)) {
            rc = add_unreadable(l, e, -ELOOP, "%s: a symlink to the input folder itself (a "
                                "loop); not a class", path);
        } else if ((rc = add_class(l, names[i], e)) == 0) {
            chain[1] = (dir_id){st.st_dev, st.st_ino};
            rc = walk_class(l, path, names[i], (int32_t)(l->nclasses - 1), chain, 1, e);
        }
    }
    free(path);
    free_names(names, n);
    return rc;
}

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

/* One `path label` line (already NUL-terminated, no newline). */
static int list_line(rf_image_list *l, const char *list, const char *dir, char *line,
                     uint64_t ln, char *path, rf_err *e)
{
    char *end = line + strlen(line);
    while (end > line && is_blank(end[-1]))
        *--end = 0;
    while (is_blank(*line))
        line++;
    if (!*line || *line == '#')
        return 0;
    char *sp = end;
    while (sp > line && !is_blank(sp[-1]))
        sp--;
    int32_t label;
    if (sp == line || rf_parse_label((const uint8_t *)sp, strlen(sp), &label) != 0)
        return rf_seterr(e, RF_EFORMAT, "%s: line %" PRIu64 ": expected `path label` with "
                         "an integer label 0..2147483647", list, ln);
    while (sp > line && is_blank(sp[-1]))
        *--sp = 0;
    if (line[0] == '/') {
        if (strlen(line) >= SH_PATH_MAX)
            return rf_seterr(e, RF_ELIMIT, "%s: line %" PRIu64 ": path too long", list, ln);
        strcpy(path, line);
    } else if (join(path, dir, line, e)) {
        return rf_seterr(e, RF_ELIMIT, "%s: line %" PRIu64 ": path too long", list, ln);
    }
    struct stat st;
    if (stat(path, &st) != 0)
        return add_unreadable(l, e, -errno, "%s: line %" PRIu64 ": %s: %s", list, ln, path,
                              strerror(errno));
    if (!S_ISREG(st.st_mode))
        return add_unreadable(l, e, RF_EFORMAT, "%s: line %" PRIu64 ": %s: %s, not a regular "
                              "file; not read", list, ln, path, rf_file_kind(st.st_mode));
    const char *rel = line;
    while (rel[0] == '.' && rel[1] == '/')
        rel += 2;
    return add_entry(l, path, rel, (uint64_t)st.st_size, label, e);
}

static int read_list(rf_image_list *l, const char *list, rf_err *e)
{
    char *text = NULL, *path = malloc(SH_PATH_MAX), *dir = strdup(list);
    uint64_t len = 0;
    if (!path || !dir) {
        free(path);
        free(dir);
        return rf_seterr(e, RF_ENOMEM, "no memory");
    }
    char *slash = strrchr(dir, '/');
    if (slash)
        slash == dir ? (void)(dir[1] = 0) : (void)(*slash = 0);
    else
        strcpy(dir, ".");
    int rc = rf_read_whole(list, "an image list", RF_EFORMAT, SH_LIST_FILE_BYTES_MAX, &text,
                           &len, e);
    if (rc == 0 && memchr(text, 0, len))
        rc = rf_seterr(e, RF_EFORMAT, "%s: NUL byte in a text file", list);
    char *p = rc == 0 ? text : NULL;
    for (uint64_t ln = 1; p && *p && rc == 0; ln++) {
        char *nl = strchr(p, '\n');
        if (nl)
            *nl = 0;
        rc = list_line(l, list, dir, p, ln, path, e);
        p = nl ? nl + 1 : NULL;
    }
    free(text);
    free(path);
    free(dir);
    return rc;
}

/* Make a WebDataset key from a name: see rf_image_list_key. Writes at most cap-1 bytes. */
static size_t sanitize_key(const char *name, char *out, size_t cap)
{
    size_t n = 0;
    const char *p = name;
    while (*p && n + 4 < cap) {
        const char *slash = strchr(p, '/');
        size_t clen = slash ? (size_t)(slash - p) : strlen(p);
        int last = slash == NULL;
        if (clen == 0 || (clen == 1 && p[0] == '.')) {
            /* empty or "." component: dropped */
        } else {
            if (n)
                out[n++] = '/';
            if (clen == 2 && p[0] == '.' && p[1] == '.') {
                out[n++] = '_', out[n++] = '_';
            } else {
                for (size_t i = 0; i < clen && n + 2 < cap; i++) {
                    unsigned char c = (unsigned char)p[i];
                    out[n++] = (c <= ' ' || c == 0x7f || (last && c == '.')) ? '_' : (char)c;
                }
            }
        }
        p += clen + (slash ? 1 : 0);
    }
    if (n == 0)
        out[n++] = '_';
    out[n] = 0;
    return n;
}

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

/* Give every entry its key, unique within the list (open-addressing set of arena offsets). */
static int assign_keys(rf_image_list *l, rf_err *e)
{
    uint64_t cap = 16;
    while (cap < l->n * 2)
        cap *= 2;
    uint64_t *set = malloc((size_t)cap * sizeof *set);
    char *buf = malloc(SH_PATH_MAX + 16);
    int rc = (set && buf) ? 0 : rf_seterr(e, RF_ENOMEM, "no memory for keys");
    if (set)
        memset(set, 0xff, (size_t)cap * sizeof *set);
    for (uint64_t i = 0; i < l->n && rc == 0; i++) {
        size_t base = sanitize_key(l->arena + l->e[i].name, buf, SH_PATH_MAX);
        for (uint32_t t = 1;; t++) {
            if (t > 1)
                snprintf(buf + base, 16, "_%u", t);
            uint64_t h = hash_str(buf) & (cap - 1);
            while (set[h] != UINT64_MAX && strcmp(l->arena + set[h], buf) != 0)
                h = (h + 1) & (cap - 1);
            if (set[h] == UINT64_MAX) {
                rc = arena_put(l, buf, strlen(buf), &l->e[i].key, e);
                set[h] = l->e[i].key;
                l->renamed += t > 1;
                break;
            }
            if (t == SH_DEDUP_TRIES_MAX) {
                rc = rf_seterr(e, RF_ELIMIT, "%s: more than %d files share the key %.*s",
                               l->arena + l->e[i].path, SH_DEDUP_TRIES_MAX, (int)base, buf);
                break;
            }
        }
    }
    free(buf);
    free(set);
    return rc;
}

int rf_image_list_open(const char *input, rf_image_list **out, char *err, size_t err_len)
{
    rf_err e = {0};
    *out = NULL;
    struct stat st;
    if (!input || !*input)
        return give(&(rf_err){.code = RF_EINVAL, .msg = "no input given"}, err, err_len);
    if (stat(input, &st) != 0) {
        rf_seterr(&e, -errno, "%s: %s", input, strerror(errno));
        return give(&e, err, err_len);
    }
    rf_image_list *l = calloc(1, sizeof *l);
    if (!l)
        return give(&(rf_err){.code = RF_ENOMEM, .msg = "no memory"}, err, err_len);
    int rc = S_ISDIR(st.st_mode) ? walk_root(l, input, &st, &e) : read_list(l, input, &e);
    if (rc == 0 && l->n == 0)
        rc = rf_seterr(&e, RF_ENOFILES, "%s: no jpg/jpeg images found%s%s%s", input,
                       S_ISDIR(st.st_mode) ? " in class subfolders" : "",
                       l->nbad ? "; unreadable: " : "", l->nbad ? l->arena + l->bad[0].msg : "");
    if (rc == 0)
        rc = assign_keys(l, &e);
    if (rc) {
        rf_image_list_free(l);
        return give(&e, err, err_len);
    }
    *out = l;
    return 0;
}

void rf_image_list_free(rf_image_list *l)
{
    if (!l)
        return;
    free(l->e);
    free(l->arena);
    free(l->classes);
    free(l->bad);
    free(l);
}

uint64_t rf_image_list_count(const rf_image_list *l) { return l ? l->n : 0; }

const char *rf_image_list_path(const rf_image_list *l, uint64_t i)
{
    return l && i < l->n ? l->arena + l->e[i].path : NULL;
}

const char *rf_image_list_name(const rf_image_list *l, uint64_t i)
{
    return l && i < l->n ? l->arena + l->e[i].name : NULL;
}

const char *rf_image_list_key(const rf_image_list *l, uint64_t i)
{
    return l && i < l->n ? l->arena + l->e[i].key : NULL;
}

int32_t rf_image_list_label(const rf_image_list *l, uint64_t i)
{
    return l && i < l->n ? l->e[i].label : -1;
}

uint64_t rf_image_list_size(const rf_image_list *l, uint64_t i)
{
    return l && i < l->n ? l->e[i].size : 0;
}

uint32_t rf_image_list_classes(const rf_image_list *l) { return l ? l->nclasses : 0; }

const char *rf_image_list_class_name(const rf_image_list *l, uint32_t c)
{
    return l && c < l->nclasses ? l->arena + l->classes[c] : NULL;
}

uint64_t rf_image_list_skipped(const rf_image_list *l) { return l ? l->skipped : 0; }
uint64_t rf_image_list_renamed(const rf_image_list *l) { return l ? l->renamed : 0; }
uint64_t rf_image_list_unreadable(const rf_image_list *l) { return l ? l->nbad : 0; }

const char *rf_image_list_unreadable_message(const rf_image_list *l, uint64_t i)
{
    return l && i < l->nbad ? l->arena + l->bad[i].msg : NULL;
}

int32_t rf_image_list_unreadable_code(const rf_image_list *l, uint64_t i)
{
    return l && i < l->nbad ? l->bad[i].code : 0;
}

/* ---- JPEG checks ----------------------------------------------------------------------- */

struct rf_jpeg_checker {
    rf_decoder *dec;
};

rf_jpeg_checker *rf_jpeg_checker_create(void)
{
    rf_jpeg_checker *c = calloc(1, sizeof *c);
    /* No limits given: the decoder applies the loader's defaults (decode.h). */
    if (c && !(c->dec = rf_decoder_create(NULL))) {
        free(c);
        c = NULL;
    }
    return c;
}

void rf_jpeg_checker_destroy(rf_jpeg_checker *c)
{
    if (!c)
        return;
    rf_decoder_destroy(c->dec);
    free(c);
}

/* The check with rf_err, for inspection (which adds file and offset): the loader's own decoder
 * validates (rf_decode_check), so inspect, pack and the loader cannot disagree. */
static int jpeg_check(rf_jpeg_checker *c, const uint8_t *p, uint64_t len, rf_jpeg_info *ji,
                      rf_err *e)
{
    *ji = (rf_jpeg_info){0};
    int rc = rf_jpeg_soi_check(p, len, e); /* the loader's not_jpeg, in its words */
    if (rc)
        return rc;
    if (len > SIZE_MAX)
        return rf_seterr(e, RF_ELIMIT, "%" PRIu64 " bytes do not fit in memory", len);
    return rf_decode_check(c->dec, p, (size_t)len, ji, e);
}

int rf_jpeg_check(rf_jpeg_checker *c, const void *data, uint64_t len, uint32_t *width,
                  uint32_t *height, uint32_t *progressive, char *err, size_t err_len)
{
    rf_err e = {0};
    if (!c || (!data && len))
        return give(&(rf_err){.code = RF_EINVAL, .msg = "no checker or no data"}, err, err_len);
    rf_jpeg_info ji;
    int rc = jpeg_check(c, data, len, &ji, &e);
    if (rc)
        return give(&e, err, err_len);
    if (width)
        *width = ji.width;
    if (height)
        *height = ji.height;
    if (progressive)
        *progressive = ji.progressive;
    return 0;
}

int rf_jpeg_add_restarts(const void *data, uint64_t len, uint32_t interval, uint32_t optimize,
                         void **out, uint64_t *out_len, char *err, size_t err_len)
{
    rf_err e = {0};
    if (!out || !out_len || (!data && len) || len > SIZE_MAX)
        return give(&(rf_err){.code = RF_EINVAL, .msg = "no input or no output pointers"}, err,
                    err_len);
    uint8_t *o = NULL;
    size_t n = 0;
    int rc = rf_jpeg_restart_transcode(data, (size_t)len, interval, optimize != 0, &o, &n, &e);
    *out = o, *out_len = n;
    return rc ? give(&e, err, err_len) : 0;
}

void rf_free(void *p) { free(p); }

/* ---- shard writer ----------------------------------------------------------------------- */

/* The public face of rf_tarw, whose errors it turns into messages. */
struct rf_shard_writer {
    rf_tarw *tw;
};

int rf_shard_writer_open(const char *tar_path, const char *idx_path, uint32_t format,
                         rf_shard_writer **out, char *err, size_t err_len)
{
    rf_err e = {0};
    *out = NULL;
    if (!tar_path || format > RF_SHARD_GNU) {
        rf_seterr(&e, RF_EINVAL, "no shard path or invalid format %u", format);
        return give(&e, err, err_len);
    }
    rf_shard_writer *w = calloc(1, sizeof *w);
    if (!w)
        return give(&(rf_err){.code = RF_ENOMEM, .msg = "no memory"}, err, err_len);
    w->tw = rf_tarw_open(tar_path, idx_path,
                         format == RF_SHARD_GNU ? RF_TARW_GNU : RF_TARW_USTAR_PAX, &e);
    if (!w->tw) {
        if (e.code == -ENOMEM) /* the public API's code for it */
            e.code = RF_ENOMEM;
        free(w);
        return give(&e, err, err_len);
    }
    *out = w;
    return 0;
}

static int valid_key(const char *key)
{
    const char *base = strrchr(key, '/');
    base = base ? base + 1 : key;
    if (!*base || strchr(base, '.'))
        return 0;
    for (const char *p = key; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f)
            return 0;
    return 1;
}

int rf_shard_writer_add(rf_shard_writer *w, const char *key, const char *ext, const void *data,
                        uint64_t len, int32_t label)
{
    if (!w || !key || !ext || !*ext || strchr(ext, '/') || !valid_key(key) || (!data && len) ||
        len > SIZE_MAX)
        return RF_EINVAL;
    size_t kl = strlen(key), el = strlen(ext);
    if (kl + el + 5 > SH_PATH_MAX)
        return RF_EINVAL;
    char name[SH_PATH_MAX];
    memcpy(name, key, kl);
    name[kl] = '.';
    memcpy(name + kl + 1, ext, el + 1);
    int rc = rf_tarw_begin_sample(w->tw);
    if (rc == 0)
        rc = rf_tarw_add(w->tw, name, data, (size_t)len);
    if (rc == 0 && label >= 0) {
        char num[16];
        int n = snprintf(num, sizeof num, "%d", label);
        memcpy(name + kl + 1, RF_TAR_LABEL_EXT, sizeof RF_TAR_LABEL_EXT);
        rc = rf_tarw_add(w->tw, name, num, (size_t)n);
    }
    return rc;
}

static uint64_t member_bytes(size_t name_len, uint64_t len, uint32_t format)
{
    uint64_t b = RF_TAR_BLOCK + rf_tar_round_block(len);
    if (name_len > 100) /* long-name record: a header and the name (pax: ~ name + 16 bytes) */
        b += RF_TAR_BLOCK +
             rf_tar_round_block(format == RF_SHARD_GNU ? name_len + 1 : name_len + 16);
    return b;
}

uint64_t rf_shard_sample_bytes(const char *key, const char *ext, uint64_t len, int32_t label,
                               uint32_t format)
{
    size_t kl = strlen(key);
    uint64_t b = member_bytes(kl + 1 + strlen(ext), len, format);
    if (label >= 0)
        b += member_bytes(kl + 4, 11, format);
    return b;
}

uint64_t rf_shard_writer_bytes(const rf_shard_writer *w) { return w ? rf_tarw_bytes(w->tw) : 0; }
uint64_t rf_shard_writer_samples(const rf_shard_writer *w) { return w ? rf_tarw_samples(w->tw) : 0; }

int rf_shard_writer_close(rf_shard_writer *w, char *err, size_t err_len)
{
    if (!w)
        return 0;
    rf_err e = {0};
    int rc = rf_tarw_close(w->tw, &e);
    free(w);
    return rc ? give(&e, err, err_len) : 0;
}

void rf_shard_writer_abort(rf_shard_writer *w)
{
    if (!w)
        return;
    rf_tarw_abort(w->tw);
    free(w);
}

/* ---- indexes ---------------------------------------------------------------------------- */

int rf_shard_index_path(const char *shard, char *buf, size_t cap)
{
    size_t n = shard ? strlen(shard) : 0;
    if (!shard || !buf || cap < n + 5)
        return RF_EINVAL;
    if (rf_tar_find_index(shard, buf, cap))
        return 1;
    if (n > 4 && strcmp(shard + n - 4, ".tar") == 0) {
        memcpy(buf, shard, n - 4);
        memcpy(buf + n - 4, ".idx", 5);
    } else {
        memcpy(buf, shard, n);
        memcpy(buf + n, ".idx", 5);
    }
    return 0;
}

int rf_shard_write_index(const char *shard, const char *idx_path, char *err, size_t err_len)
{
    rf_err e = {0};
    char def[SH_PATH_MAX];
    if (!shard)
        return give(&(rf_err){.code = RF_EINVAL, .msg = "no shard path"}, err, err_len);
    if (!idx_path) {
        if (rf_shard_index_path(shard, def, sizeof def) < 0)
            return give(&(rf_err){.code = RF_EINVAL, .msg = "shard path too long"}, err, err_len);
        idx_path = def;
    }
    int rc = rf_tar_write_index(shard, idx_path, &e);
    return rc ? give(&e, err, err_len) : 0;
}

/* ---- shard inspection ------------------------------------------------------------------- *
 *
 * One pass over the headers with the loader's scanner, grouping members into samples exactly
 * as loaders/tar.c does; image and label members are read (pread, one member at a time, into
 * one buffer that grows up to max_member_bytes) and checked. An index beside the shard is then
 * checked by the loader's own code (rf_tar_index_read) with every member's header read, so
 * inspection and the loader never disagree about an index: what the loader refuses, inspection
 * reports in the same words, and inspection reads the headers the loader leaves to read time.
 * Member names are remembered to find keys that come back after other keys. */

#define INSPECT_MEMBERS_MAX (1ull << 26)

typedef struct inspector {
    const char *path;
    rf_inspect_options opt;
    rf_inspect_problem_fn on_problem;
    rf_inspect_sample_fn on_sample;
    void *ctx;
    rf_inspect_summary sum;
    int first_code, stopped;
    int fd;
    uint64_t size;
    rf_jpeg_checker *jc;
    uint8_t *buf;
    uint64_t buf_cap;
    const char *idx_path;     /* the index being checked: the path of RF_EINDEX problems */
    /* member names */
    uint64_t nm;
    char *names;
    uint64_t nlen, ncap;
    /* keys seen (offsets of names, whose key part is compared) */
    uint64_t *set, set_cap, set_n;
    /* the open sample */
    int open;
    rf_inspect_sample cur;
    char key[RF_TAR_NAME_MAX + 1];
    size_t key_len;
    int has_img, has_lbl;
    int broken; /* the scan stopped at a malformed header: the open sample's rest is unknown */
} inspector;

static void problem(inspector *in, int code, uint64_t offset, const char *key, const char *fmt,
                    ...) __attribute__((format(printf, 5, 6)));

static void problem(inspector *in, int code, uint64_t offset, const char *key, const char *fmt,
                    ...)
{
    in->sum.problems++;
    if (!in->first_code)
        in->first_code = code;
    if (in->sum.problems > in->opt.max_problems || !in->on_problem || in->stopped)
        return;
    char what[RF_ERRMSG_MAX], msg[RF_ERRMSG_MAX + 64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    const char *path = code == RF_EINDEX && in->idx_path ? in->idx_path : in->path;
    /* Messages from the loader's code start with the path, which the prefix already gives. */
    size_t n = strlen(path);
    const char *text = strncmp(what, path, n) == 0 && what[n] == ':' && what[n + 1] == ' '
                           ? what + n + 2 : what;
    snprintf(msg, sizeof msg, "%s: offset %" PRIu64 ": %s", path, offset, text);
    rf_inspect_problem p = {sizeof p, code, path, offset, key ? key : "", msg};
    if (in->on_problem(in->ctx, &p))
        in->stopped = 1;
}

static int read_member(inspector *in, uint64_t off, uint64_t len, rf_err *e)
{
    if (len > in->buf_cap) {
        uint8_t *q = realloc(in->buf, (size_t)len);
        if (!q)
            return rf_seterr(e, RF_ENOMEM, "no memory for a %" PRIu64 "-byte member", len);
        in->buf = q;
        in->buf_cap = len;
    }
    size_t got = 0;
    int rc = rf_pread_full(in->fd, in->buf, (size_t)len, off, &got);
    if (rc || got < len)
        return rf_seterr(e, rc ? rc : RF_EFORMAT, "read of %" PRIu64 " bytes at offset %" PRIu64
                         " failed: %s", len, off, rc ? strerror(-rc) : "end of file");
    return 0;
}

/* 1 when the key of a member was seen before in this shard (then also reported by caller);
 * inserts it otherwise. Returns -1 on no memory. */
static int key_seen(inspector *in, uint64_t name_off, size_t klen)
{
    if (in->set_n * 2 >= in->set_cap) {
        uint64_t cap = in->set_cap ? in->set_cap * 2 : 1024;
        uint64_t *q = malloc((size_t)cap * sizeof *q);
        if (!q)
            return -1;
        memset(q, 0xff, (size_t)cap * sizeof *q);
        for (uint64_t i = 0; i < in->set_cap; i++) {
            if (in->set[i] == UINT64_MAX)
                continue;
            const char *ext;
            const char *nm = in->names + in->set[i];
            size_t kl = rf_tar_split_key(nm, &ext);
            uint64_t h = 1469598103934665603ull;
            for (size_t j = 0; j < kl; j++)
                h = (h ^ (uint8_t)nm[j]) * 1099511628211ull;
            for (h &= cap - 1; q[h] != UINT64_MAX; h = (h + 1) & (cap - 1)) {
            }
            q[h] = in->set[i];
        }
        free(in->set);
        in->set = q;
        in->set_cap = cap;
    }
    const char *name = in->names + name_off;
    uint64_t h = 1469598103934665603ull;
    for (size_t j = 0; j < klen; j++)
        h = (h ^ (uint8_t)name[j]) * 1099511628211ull;
    for (h &= in->set_cap - 1; in->set[h] != UINT64_MAX; h = (h + 1) & (in->set_cap - 1)) {
        const char *ext;
        const char *o = in->names + in->set[h];
        if (rf_tar_split_key(o, &ext) == klen && memcmp(o, name, klen) == 0)
            return 1;
    }
    in->set[h] = name_off;
    in->set_n++;
    return 0;
}

static void sample_flush(inspector *in)
{
    if (!in->open)
        return;
    in->open = 0;
    rf_inspect_sample *s = &in->cur;
    rf_inspect_summary *sum = &in->sum;
    if (!in->has_img)
        problem(in, RF_EFORMAT, s->offset, in->key, "sample %s has no image member (%s)",
                in->key, RF_TAR_IMAGE_EXTS);
    if (!in->has_lbl && !in->broken && in->opt.label_source == RF_LABEL_CLS) {
        rf_err e = {0};
        rf_label_missing(in->key, RF_LABEL_NO_OFFSET, &e);
        problem(in, RF_ELABEL, s->offset, in->key, "%s", e.msg);
    }
    sum->samples++;
    if (in->has_img) {
        sum->image_bytes += s->image_bytes;
        if (sum->image_bytes_min == 0 || s->image_bytes < sum->image_bytes_min)
            sum->image_bytes_min = s->image_bytes;
        sum->image_bytes_max = RF_MAX(sum->image_bytes_max, s->image_bytes);
    }
    if (s->width) {
        if (sum->images == 0 || s->width < sum->width_min)
            sum->width_min = s->width;
        if (sum->images == 0 || s->height < sum->height_min)
            sum->height_min = s->height;
        sum->width_max = RF_MAX(sum->width_max, s->width);
        sum->height_max = RF_MAX(sum->height_max, s->height);
        sum->width_sum += s->width;
        sum->height_sum += s->height;
        sum->progressive += s->progressive;
        sum->region_ready += s->region_ready;
        sum->images++;
    }
    if (s->label >= 0) {
        if (sum->labeled == 0 || s->label < sum->label_min)
            sum->label_min = s->label;
        if (sum->labeled == 0 || s->label > sum->label_max)
            sum->label_max = s->label;
        sum->labeled++;
    }
    s->key = in->key;
    if (in->on_sample && !in->stopped && in->on_sample(in->ctx, s))
        in->stopped = 1;
}

static void check_image(inspector *in, const rf_tar_member *tm)
{
    rf_inspect_sample *s = &in->cur;
    rf_err e = {0};
    s->image_bytes = tm->size;
    if (tm->size > in->opt.max_member_bytes) {
        problem(in, RF_ELIMIT, tm->header_offset, in->key, "member %s: %" PRIu64 " bytes, over "
                "the limit %" PRIu64, tm->name, tm->size, in->opt.max_member_bytes);
        return;
    }
    if (!in->opt.check_jpeg)
        return;
    int rc = read_member(in, tm->data_offset, tm->size, &e);
    rf_jpeg_info ji = {0};
    if (rc == 0)
        rc = jpeg_check(in->jc, in->buf, tm->size, &ji, &e);
    s->width = ji.width, s->height = ji.height, s->progressive = ji.progressive;
    s->region_ready = ji.region_ready;
    if (rc)
        problem(in, rc, tm->header_offset, in->key, "member %s: %s", tm->name, e.msg);
}

/* The sample's first label member, judged as the loader judges it (rf_check_label); a member
 * over the label limit is refused unread. */
static void check_label(inspector *in, const rf_tar_member *tm)
{
    rf_err e = {0};
    int32_t label;
    in->has_lbl = 1;
    int rc = tm->size > RF_TAR_LABEL_BYTES_MAX ? 0 : read_member(in, tm->data_offset, tm->size, &e);
    if (rc)
        problem(in, rc, tm->header_offset, in->key, "member %s: %s", tm->name, e.msg);
    else if (rf_check_label(in->key, in->buf, tm->size, RF_LABEL_NO_OFFSET, &label, &e) != 0)
        problem(in, RF_ELABEL, tm->header_offset, in->key, "%s", e.msg);
    else
        in->cur.label = label;
}

static int remember(inspector *in, const rf_tar_member *tm, uint64_t *name_off)
{
    size_t nl = strlen(tm->name);
    if (in->nm >= INSPECT_MEMBERS_MAX)
        return RF_ELIMIT;
    if (in->nlen + nl + 1 > in->ncap) {
        uint64_t cap = in->ncap ? in->ncap : 1 << 16;
        while (cap < in->nlen + nl + 1)
            cap *= 2;
        char *q = realloc(in->names, (size_t)cap);
        if (!q)
            return RF_ENOMEM;
        in->names = q;
        in->ncap = cap;
    }
    memcpy(in->names + in->nlen, tm->name, nl + 1);
    *name_off = in->nlen;
    in->nm++;
    in->nlen += nl + 1;
    return 0;
}

static int feed_member(inspector *in, const rf_tar_member *tm)
{
    const char *ext;
    size_t klen = rf_tar_split_key(tm->name, &ext);
    uint64_t name_off;
    int rc = remember(in, tm, &name_off);
    if (rc)
        return rc;
    in->sum.members++;
    if (!*ext)
        problem(in, RF_EFORMAT, tm->header_offset, "", "member %s has no extension (a "
                "WebDataset member is KEY.EXT)", tm->name);
    if (!in->open || klen != in->key_len || memcmp(tm->name, in->key, klen) != 0) {
        sample_flush(in);
        int seen = key_seen(in, name_off, klen);
        if (seen < 0)
            return RF_ENOMEM;
        memcpy(in->key, tm->name, klen);
        in->key[klen] = 0;
        in->key_len = klen;
        if (seen)
            problem(in, RF_EFORMAT, tm->header_offset, in->key, "key %s appears again after "
                    "other keys: its members are not consecutive (read as two samples)",
                    in->key);
        in->open = 1;
        in->has_img = in->has_lbl = 0;
        in->cur = (rf_inspect_sample){.struct_size = sizeof in->cur, .path = in->path,
                                      .offset = tm->header_offset, .label = -1};
    }
    in->cur.members++;
    in->cur.span_bytes = tm->data_offset + tm->size - in->cur.offset;
    if (!in->has_img && rf_tar_ext_in(ext, RF_TAR_IMAGE_EXTS)) {
        in->has_img = 1;
        check_image(in, tm);
    } else if (!in->has_lbl && strcmp(ext, RF_TAR_LABEL_EXT) == 0 &&
               in->opt.label_source == RF_LABEL_CLS) {
        check_label(in, tm);
    }
    return 0;
}

/* The loader's check of the index, with every member's header read. */
static void check_index(inspector *in)
{
    char idx[SH_PATH_MAX];
    if (!in->opt.check_index || !rf_tar_find_index(in->path, idx, sizeof idx))
        return;
    in->sum.has_index = 1;
    rf_tar_index_stats st;
    rf_err e = {0};
    int rc = rf_tar_index_read(idx, in->path, in->fd, in->size, 0, 1, NULL, NULL, &st, &e);
    in->idx_path = idx;
    if (rc)
        problem(in, rc, st.at, "", "%s", e.msg);
    in->idx_path = NULL;
    in->sum.index_ok = rc == 0;
}

void rf_inspect_options_init(rf_inspect_options *o)
{
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->check_jpeg = 1;
    o->check_index = 1;
    o->max_problems = 100;
    o->max_member_bytes = 64ull << 20;
}

void rf_inspect_summary_init(rf_inspect_summary *s)
{
    memset(s, 0, sizeof *s);
    s->struct_size = sizeof *s;
    s->label_max = -1;
}

static void scan(inspector *in)
{
    rf_tar_scanner sc;
    rf_err e = {0};
    rf_tar_member *tm = malloc(sizeof *tm);
    if (!tm || rf_tar_scanner_init(&sc, in->fd, in->path, in->size, &e) != 0) {
        free(tm);
        problem(in, RF_ENOMEM, 0, "", "no memory for the scanner");
        return;
    }
    int rc = 0, complete = 0;
    uint64_t nonregular = 0;
    while (!in->stopped && (rc = rf_tar_next(&sc, tm, &e)) != 0) {
        if (rc < 0) {
            in->broken = 1;
            sample_flush(in);
            problem(in, rc, sc.pos, "", "%s%s", e.msg,
                    sc.after_end ? "" : " (the rest of the shard cannot be located)");
            break;
        }
        if (tm->type != RF_TAR_FILE) {
            nonregular++;
            continue;
        }
        if ((rc = feed_member(in, tm)) != 0) {
            problem(in, rc, tm->header_offset, "", "%s", rc == RF_ENOMEM ? "no memory" :
                    "too many members");
            break;
        }
    }
    if (rc == 0) {
        sample_flush(in);
        complete = 1;
        if (in->sum.samples == 0 && rf_tar_no_samples(in->size, nonregular, &e))
            problem(in, e.code, 0, "", "%s", e.msg);
    }
    rf_tar_scanner_free(&sc);
    free(tm);
    if (complete && !in->stopped)
        check_index(in);
}

int rf_shard_inspect(const char *path, const rf_inspect_options *options,
                     rf_inspect_problem_fn on_problem, rf_inspect_sample_fn on_sample, void *ctx,
                     rf_inspect_summary *summary)
{
    if (!path)
        return RF_EINVAL;
    inspector *in = calloc(1, sizeof *in);
    if (!in)
        return RF_ENOMEM;
    rf_inspect_options_init(&in->opt);
    if (options)
        memcpy(&in->opt, options, RF_MIN(options->struct_size, (uint32_t)sizeof in->opt));
    if (in->opt.label_source > RF_LABEL_NONE) {
        free(in);
        return RF_EINVAL;
    }
    if (!in->opt.max_problems)
        in->opt.max_problems = 100;
    if (!in->opt.max_member_bytes)
        in->opt.max_member_bytes = 64ull << 20;
    in->path = path;
    in->on_problem = on_problem;
    in->on_sample = on_sample;
    in->ctx = ctx;
    rf_inspect_summary_init(&in->sum);
    in->fd = -1;
    rf_err e = {0};
    int orc = rf_open_regular(path, "a shard", RF_EFORMAT, &in->fd, &in->size, &e);
    if (orc)
        problem(in, orc, 0, "", "cannot inspect: %s", e.msg);
    else if (!(in->jc = rf_jpeg_checker_create()))
        problem(in, RF_ENOMEM, 0, "", "no memory for a JPEG decoder");
    else {
        in->sum.bytes = in->size;
        scan(in);
    }
    int rc = in->stopped ? -ECANCELED : in->first_code;
    if (summary) {
        uint32_t n = RF_MIN(summary->struct_size ? summary->struct_size : (uint32_t)sizeof *summary,
                            (uint32_t)sizeof in->sum);
        in->sum.struct_size = n;
        memcpy(summary, &in->sum, n);
    }
    if (in->fd >= 0)
        close(in->fd);
    rf_jpeg_checker_destroy(in->jc);
    free(in->buf);
    free(in->names);
    free(in->set);
    free(in);
    return rc;
}
