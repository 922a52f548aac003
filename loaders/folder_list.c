/* folder_list.c — discovery for the folder format: the image list (rf_image_list_*,
 * include/ringfeed_shards.h), the one walker of class folders and `path label` files.
 *
 * DESIGN. ringfeed-pack packs the list and the folder format reads it, so a folder and the
 * shards packed from it have the same files in the same order with the same labels and keys.
 * What cannot be a sample is recorded as unreadable with its reason while the walk goes on: the
 * caller decides what that means. Keys follow the format's key rule (rf_tar_key_ok) and are
 * de-duplicated. All strings live in one arena addressed by offsets, so 1.28 M entries cost a
 * few allocations. Every count is capped (RF_IMAGE_LIST_*, LIST_*). Nothing is shared between
 * threads. */
#include "ringfeed_shards.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "base/common.h"
#include "loaders/dataset.h"
#include "loaders/tar.h"

#define LIST_FILE_BYTES_MAX (1ull << 32)  /* a `path label` file larger than this is refused */
#define LIST_DIR_ENTRIES_MAX (1u << 24)   /* entries in one folder */
#define LIST_CLASSES_MAX (1u << 20)
#define LIST_DEDUP_TRIES_MAX 1000

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
    if (rf_grow(&l->arena, &l->acap, l->alen + n + 1, 1))
        return rf_seterr(e, RF_ENOMEM, "no memory for the image list");
    memcpy(l->arena + l->alen, s, n);
    l->arena[l->alen + n] = 0;
    *off = l->alen;
    l->alen += n + 1;
    return 0;
}

/* An image the loader decodes: .jpg, .jpeg, .png or .webp, any case (RF_TAR_IMAGE_EXTS). */
static int is_image_name(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot && rf_tar_ext_in(dot + 1, RF_TAR_IMAGE_EXTS);
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

/* Record an entry that cannot be a sample, with its message ("PATH: why"); the walk goes on. */
static int add_unreadable(rf_image_list *l, rf_err *e, int32_t code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int add_unreadable(rf_image_list *l, rf_err *e, int32_t code, const char *fmt, ...)
{
    if (l->nbad >= RF_IMAGE_LIST_FILES_MAX)
        return rf_seterr(e, RF_ELIMIT, "more than %llu unreadable entries",
                         RF_IMAGE_LIST_FILES_MAX);
    if (rf_grow(&l->bad, &l->badcap, l->nbad + 1, sizeof *l->bad))
        return rf_seterr(e, RF_ENOMEM, "no memory for the image list");
    char msg[RF_PATH_BYTES_MAX + 256];
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
        if (n >= LIST_DIR_ENTRIES_MAX) {
            rc = rf_seterr(e, RF_ELIMIT, "%s: more than %u entries", dir, LIST_DIR_ENTRIES_MAX);
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
    if ((size_t)snprintf(out, RF_PATH_BYTES_MAX, "%s/%s", a, b) >= RF_PATH_BYTES_MAX)
        return rf_seterr(e, RF_ELIMIT, "%s/%s: path longer than %d bytes", a, b, RF_PATH_BYTES_MAX);
    return 0;
}

/* Sort one entry of a class folder: a sample, a subfolder to walk (*sd), an unreadable entry,
 * or another file to skip. Looked at through stat() (following symlinks), never opened: a FIFO
 * would block. */
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
    if (!is_image_name(name)) {
        l->skipped++;
        return 0;
    }
    if (!S_ISREG(st.st_mode))
        return add_unreadable(l, e, RF_EFORMAT, "%s: %s, not a regular file; not read", path,
                              rf_file_kind(st.st_mode));
    return add_entry(l, path, rel, (uint64_t)st.st_size, label, e);
}

/* Files of a class folder first, then its subfolders, each sorted, recursively: torchvision's
 * sorted os.walk order in all but exotic names. chain[0..depth]: the folders from the root. */
static int walk_class(rf_image_list *l, const char *dir, const char *rel, int32_t label,
                      dir_id *chain, uint32_t depth, rf_err *e)
{
    if (depth > RF_IMAGE_LIST_DEPTH_MAX)
        return rf_seterr(e, RF_ELIMIT, "%s: folders nested deeper than %d", dir,
                         RF_IMAGE_LIST_DEPTH_MAX);
    char **names;
    uint32_t n;
    int rc = read_dir_sorted(dir, &names, &n, e);
    char *path = malloc(RF_PATH_BYTES_MAX), *sub = malloc(RF_PATH_BYTES_MAX);
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
    if (l->nclasses >= LIST_CLASSES_MAX)
        return rf_seterr(e, RF_ELIMIT, "more than %u class folders", LIST_CLASSES_MAX);
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
    char *path = malloc(RF_PATH_BYTES_MAX);
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
        if (strlen(line) >= RF_PATH_BYTES_MAX)
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
    char *text = NULL, *path = malloc(RF_PATH_BYTES_MAX), *dir = strdup(list);
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
    int rc = rf_read_whole(list, "an image list", RF_EFORMAT, LIST_FILE_BYTES_MAX, &text,
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

/* Make a WebDataset key from a name (rf_image_list_key): bytes rf_tar_key_ok refuses and dots
 * in the basename become '_'. Writes at most cap-1 bytes. */
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
                    out[n++] = (!rf_tar_name_byte_ok(c) || (last && c == '.')) ? '_' : (char)c;
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

/* Give every entry its key, unique within the list (open-addressing set of arena offsets). */
static int assign_keys(rf_image_list *l, rf_err *e)
{
    uint64_t cap = 16;
    while (cap < l->n * 2)
        cap *= 2;
    uint64_t *set = malloc((size_t)cap * sizeof *set);
    char *buf = malloc(RF_PATH_BYTES_MAX + 16);
    int rc = (set && buf) ? 0 : rf_seterr(e, RF_ENOMEM, "no memory for keys");
    if (set)
        memset(set, 0xff, (size_t)cap * sizeof *set);
    for (uint64_t i = 0; i < l->n && rc == 0; i++) {
        size_t base = sanitize_key(l->arena + l->e[i].name, buf, RF_PATH_BYTES_MAX);
        for (uint32_t t = 1;; t++) {
            if (t > 1)
                snprintf(buf + base, 16, "_%u", t);
            uint64_t h = rf_key_hash(buf, strlen(buf)) & (cap - 1);
            while (set[h] != UINT64_MAX && strcmp(l->arena + set[h], buf) != 0)
                h = (h + 1) & (cap - 1);
            if (set[h] == UINT64_MAX) {
                rc = arena_put(l, buf, strlen(buf), &l->e[i].key, e);
                set[h] = l->e[i].key;
                l->renamed += t > 1;
                break;
            }
            if (t == LIST_DEDUP_TRIES_MAX) {
                rc = rf_seterr(e, RF_ELIMIT, "%s: more than %d files share the key %.*s",
                               l->arena + l->e[i].path, LIST_DEDUP_TRIES_MAX, (int)base, buf);
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
        return rf_err_give(&(rf_err){.code = RF_EINVAL, .msg = "no input given"}, err, err_len);
    if (stat(input, &st) != 0) {
        rf_seterr(&e, -errno, "%s: %s", input, strerror(errno));
        return rf_err_give(&e, err, err_len);
    }
    rf_image_list *l = calloc(1, sizeof *l);
    if (!l)
        return rf_err_give(&(rf_err){.code = RF_ENOMEM, .msg = "no memory"}, err, err_len);
    int rc = S_ISDIR(st.st_mode) ? walk_root(l, input, &st, &e) : read_list(l, input, &e);
    if (rc == 0 && l->n == 0)
        rc = rf_seterr(&e, RF_ENOFILES, "%s: no jpg/jpeg/png/webp images found%s%s%s", input,
                       S_ISDIR(st.st_mode) ? " in class subfolders" : "",
                       l->nbad ? "; unreadable: " : "", l->nbad ? l->arena + l->bad[0].msg : "");
    if (rc == 0)
        rc = assign_keys(l, &e);
    if (rc) {
        rf_image_list_free(l);
        return rf_err_give(&e, err, err_len);
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
