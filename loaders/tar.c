/* tar.c — the WebDataset shard format: tar shards become rf_samples, one per sample.
 *
 * DESIGN. At create, every shard is opened once and described as samples: a sample is the run
 * of consecutive regular members sharing a key (rf_tar_split_key), and its span is one
 * contiguous byte range, from the first member's first header block (extension records
 * included) to the end of the last member's data, so the I/O engines read it with a single
 * request. Non-regular members (directories, links, devices) are skipped without ending a run.
 * A key that reappears later, after another key, starts a new sample: merging would need a
 * second, non-contiguous span, and webdataset itself does not merge them either.
 *
 * Members come from one of two sources feeding the same grouper, so both give identical
 * samples: a scan (header blocks only, through the scanner's read-ahead; data is skipped), or
 * an index beside the shard (DALI v1.2 text, see tar_index.h). An index is trusted only after
 * validation: version, counts, increasing in-bounds offsets, names consistent with their line,
 * and the real headers of the first, the last and a few samples in between compared with it.
 * The data offset of a member is header + 512 when the next member starts right after its
 * padded data (no room for extension records); otherwise its headers are read. What is not
 * checked here is checked on every read: the pipeline re-walks each span with rf_tar_locate.
 *
 * Errors name the shard (or index file and line), the sample key and the byte offset. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dataset.h"
#include "tar.h"
#include "tar_index.h"

#define TAR_DEFAULT_SAMPLE_BYTES (64ull << 20)
#define TAR_INDEX_BYTES_MAX (1ull << 30)     /* an index file larger than this is refused */
#define TAR_INDEX_SAMPLES_MAX (1ull << 32)
#define TAR_INDEX_SPOT_CHECKS 8              /* samples whose headers are read (incl. ends) */
#define TAR_PATH_MAX 4096

static uint64_t round_block(uint64_t n) { return (n + RF_TAR_BLOCK - 1) & ~(uint64_t)(RF_TAR_BLOCK - 1); }

/* ---- grouping members into samples ------------------------------------------------------ */

typedef struct mref {
    const char *name;
    uint64_t hdr, data, size;
} mref;

typedef struct grouper {
    rf_dataset *ds;
    const char *path;
    uint32_t file;
    uint64_t max_span;
    int open;
    char key[RF_TAR_NAME_MAX + 1];
    size_t key_len;
    uint64_t start, end;
    uint32_t members;
    int has_img, has_lbl;
    uint64_t img_hdr, img_data, img_size, lbl_data, lbl_size;
} grouper;

static int group_flush(grouper *g, rf_err *err)
{
    if (!g->open)
        return 0;
    g->open = 0;
    if (!g->has_img)
        return rf_seterr(err, RF_EFORMAT, "%s: sample %s at offset %" PRIu64
                         " has no image member (%s)", g->path, g->key, g->start, RF_TAR_IMAGE_EXTS);
    uint64_t span = g->end - g->start;
    if (span > g->max_span)
        return rf_seterr(err, RF_ELIMIT, "%s: sample %s at offset %" PRIu64 " spans %" PRIu64
                         " bytes, over max_sample_bytes %" PRIu64, g->path, g->key, g->start,
                         span, g->max_span);
    rf_sample s = {
        .offset = g->start,
        .length = (uint32_t)span,
        .file = g->file,
        .data_off = (uint32_t)(g->img_data - g->start),
        .data_len = (uint32_t)g->img_size,
        .data_hdr = (uint32_t)(g->img_hdr - g->start),
        .label_off = g->has_lbl ? (uint32_t)(g->lbl_data - g->start) : 0,
        /* A label member over RF_TAR_LABEL_BYTES_MAX is a bad label of this sample, found
         * when it is read (rf_check_label), not a reason to refuse the whole dataset here. */
        .label_len = g->has_lbl ? (uint16_t)RF_MIN(g->lbl_size, UINT16_MAX) : 0,
        .flags = RF_SAMPLE_TAR,
        .label = -1,
    };
    return rf_dataset_add_sample(g->ds, &s, g->key, g->key_len, err);
}

static int group_feed(grouper *g, const mref *m, rf_err *err)
{
    const char *ext;
    size_t klen = rf_tar_split_key(m->name, &ext);
    if (!g->open || klen != g->key_len || memcmp(m->name, g->key, klen) != 0) {
        int rc = group_flush(g, err);
        if (rc)
            return rc;
        memcpy(g->key, m->name, klen);
        g->key[klen] = 0;
        g->key_len = klen;
        g->open = 1;
        g->start = m->hdr;
        g->members = 0;
        g->has_img = g->has_lbl = 0;
    }
    if (++g->members > RF_TAR_SAMPLE_MEMBERS_MAX)
        return rf_seterr(err, RF_ELIMIT, "%s: sample %s at offset %" PRIu64
                         " has more than %d members", g->path, g->key, g->start,
                         RF_TAR_SAMPLE_MEMBERS_MAX);
    g->end = m->data + m->size;
    if (!g->has_img && rf_tar_ext_in(ext, RF_TAR_IMAGE_EXTS)) {
        g->has_img = 1;
        g->img_hdr = m->hdr;
        g->img_data = m->data;
        g->img_size = m->size;
    } else if (!g->has_lbl && strcmp(ext, RF_TAR_LABEL_EXT) == 0) {
        g->has_lbl = 1;
        g->lbl_data = m->data;
        g->lbl_size = m->size;
    }
    return 0;
}

/* ---- scanning --------------------------------------------------------------------------- */

static int scan_shard(grouper *g, int fd, uint64_t size, rf_err *err)
{
    rf_tar_scanner sc;
    rf_tar_member *m = malloc(sizeof *m);
    if (!m)
        return rf_seterr(err, RF_ENOMEM, "%s: no memory", g->path);
    int rc = rf_tar_scanner_init(&sc, fd, g->path, size, err);
    sc.name_max = g->ds->max_name;
    while (rc == 0) {
        rc = rf_tar_next(&sc, m, err);
        if (rc == 0) {
            rc = group_flush(g, err);
            break;
        }
        if (rc < 0)
            break;
        rc = 0;
        if (m->type != RF_TAR_FILE) {
            g->ds->nonregular++; /* directories, links, devices: counted, never followed */
            continue;
        }
        mref r = {m->name, m->header_offset, m->data_offset, m->size};
        rc = group_feed(g, &r, err);
    }
    rf_tar_scanner_free(&sc);
    free(m);
    return rc;
}

/* ---- reading an index ------------------------------------------------------------------- */

typedef struct imember {
    uint64_t hdr, size, data;
    char *name, *ext;
    uint32_t line;
    int need_read;
} imember;

typedef struct index {
    const char *idx_path, *shard;
    uint64_t file_size;
    char *text;
    imember *m;
    uint64_t n, cap;
    uint64_t *first;          /* first member of each sample (line) */
    uint64_t nsamples, scap;
} index_t;

static int idx_fail(const index_t *x, uint32_t line, rf_err *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int idx_fail(const index_t *x, uint32_t line, rf_err *err, const char *fmt, ...)
{
    char what[RF_ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return rf_seterr(err, RF_EINDEX, "%s: line %u: %s", x->idx_path, line, what);
}

static int read_text(const char *path, char **out, rf_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return rf_seterr(err, -errno, "%s: %s", path, strerror(errno));
    struct stat st;
    int rc = 0;
    char *buf = NULL;
    if (fstat(fd, &st) != 0) {
        rc = rf_seterr(err, -errno, "%s: %s", path, strerror(errno));
    } else if ((uint64_t)st.st_size > TAR_INDEX_BYTES_MAX) {
        rc = rf_seterr(err, RF_EINDEX, "%s: index larger than %llu bytes", path,
                       TAR_INDEX_BYTES_MAX);
    } else if (!(buf = malloc((size_t)st.st_size + 1))) {
        rc = rf_seterr(err, RF_ENOMEM, "%s: no memory for the index", path);
    } else {
        size_t got = 0, want = (size_t)st.st_size;
        while (got < want) {
            ssize_t r = pread(fd, buf + got, want - got, (off_t)got);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0) {
                rc = rf_seterr(err, r < 0 ? -errno : RF_EINDEX, "%s: short read", path);
                break;
            }
            got += (size_t)r;
        }
        buf[got] = 0;
        if (rc == 0 && memchr(buf, 0, got))
            rc = rf_seterr(err, RF_EINDEX, "%s: NUL byte in the index", path);
    }
    close(fd);
    if (rc)
        free(buf);
    else
        *out = buf;
    return rc;
}

/* Strict decimal: digits only, no sign, at most 15 of them (offsets and sizes < 2^50). */
static int parse_dec(const char *s, uint64_t *v)
{
    size_t n = strlen(s);
    if (n == 0 || n > 15)
        return -1;
    *v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        *v = *v * 10 + (uint64_t)(s[i] - '0');
    }
    return 0;
}

/* Cut the next space-separated token out of *p in place; NULL when the line is used up. */
static char *next_token(char **p)
{
    char *t = *p;
    if (!t)
        return NULL;
    char *sp = strchr(t, ' ');
    if (sp)
        *sp = 0;
    *p = sp ? sp + 1 : NULL;
    return t;
}

static int parse_header_line(index_t *x, char *line, uint64_t *count, rf_err *err)
{
    char *tok[3], *p = line;
    size_t n = 0;
    while (n < 3 && (tok[n] = next_token(&p)) != NULL)
        n++;
    if (n >= 1 && strcmp(tok[0], "v1.1") == 0)
        return idx_fail(x, 1, err, "index version v1.1 (no member names) is not supported; "
                        "regenerate it as v1.2");
    if (n != 2 || strcmp(tok[0], "v1.2") != 0)
        return idx_fail(x, 1, err, "expected \"v1.2 <samples>\"");
    if (parse_dec(tok[1], count) != 0 || *count > TAR_INDEX_SAMPLES_MAX)
        return idx_fail(x, 1, err, "bad sample count");
    return 0;
}

static int push_member(index_t *x, const imember *im, rf_err *err)
{
    if (rf_grow(&x->m, &x->cap, x->n + 1, sizeof *x->m))
        return rf_seterr(err, RF_ENOMEM, "%s: no memory", x->idx_path);
    x->m[x->n++] = *im;
    return 0;
}

static int push_sample(index_t *x, uint64_t first, rf_err *err)
{
    if (rf_grow(&x->first, &x->scap, x->nsamples + 1, sizeof *x->first))
        return rf_seterr(err, RF_ENOMEM, "%s: no memory", x->idx_path);
    x->first[x->nsamples++] = first;
    return 0;
}

/* One sample line: groups of <ext> <offset> <size> <name>, all names sharing one key that
 * differs from the previous line's (else a scan would have merged the two lines). */
static int parse_sample_line(index_t *x, char *line, uint32_t ln, rf_err *err)
{
    uint64_t first = x->n;
    char *p = line;
    for (size_t i = 0; p; i += 4) {
        char *tok[4];
        for (int k = 0; k < 4; k++)
            if (!(tok[k] = next_token(&p)) || !*tok[k])
                return idx_fail(x, ln, err, "expected groups of <ext> <offset> <size> <name>");
        if (i / 4 >= RF_TAR_SAMPLE_MEMBERS_MAX)
            return idx_fail(x, ln, err, "more than %d members", RF_TAR_SAMPLE_MEMBERS_MAX);
        imember im = {.name = tok[3], .ext = tok[0], .line = ln};
        const char *ext;
        if (parse_dec(tok[1], &im.hdr) || parse_dec(tok[2], &im.size))
            return idx_fail(x, ln, err, "member %s: bad offset or size", im.name);
        size_t klen = rf_tar_split_key(im.name, &ext);
        if (strcmp(ext, im.ext) != 0)
            return idx_fail(x, ln, err, "member %s: extension field %s disagrees with the name",
                            im.name, im.ext);
        const imember *prev = x->n ? &x->m[x->n - 1] : NULL;
        const char *pext;
        int same_key = prev && rf_tar_split_key(prev->name, &pext) == klen &&
                       memcmp(prev->name, im.name, klen) == 0;
        if (i > 0 && !same_key)
            return idx_fail(x, ln, err, "member %s: key differs from the line's first member",
                            im.name);
        if (i == 0 && same_key)
            return idx_fail(x, ln, err, "member %s: same key as the previous line", im.name);
        if (im.hdr % RF_TAR_BLOCK != 0 || im.size > RF_TAR_SIZE_MAX)
            return idx_fail(x, ln, err, "member %s: offset not on a block or size too large",
                            im.name);
        if (prev && im.hdr < prev->hdr + RF_TAR_BLOCK + round_block(prev->size))
            return idx_fail(x, ln, err, "member %s: offset %" PRIu64 " overlaps the previous member",
                            im.name, im.hdr);
        if (im.hdr + RF_TAR_BLOCK + im.size > x->file_size)
            return idx_fail(x, ln, err, "member %s: data ends past the end of the shard (offset %"
                            PRIu64 ")", im.name, im.hdr);
        int rc = push_member(x, &im, err);
        if (rc)
            return rc;
    }
    return push_sample(x, first, err);
}

static int parse_index(index_t *x, rf_err *err)
{
    uint64_t count = 0;
    uint32_t ln = 0;
    char *p = x->text;
    while (*p) {
        char *nl = strchr(p, '\n');
        if (nl)
            *nl = 0;
        ln++;
        if (ln == UINT32_MAX)
            return idx_fail(x, ln, err, "too many lines");
        int rc = ln == 1 ? parse_header_line(x, p, &count, err) : parse_sample_line(x, p, ln, err);
        if (rc)
            return rc;
        if (!nl)
            break;
        p = nl + 1;
    }
    if (ln == 0)
        return idx_fail(x, 1, err, "empty index");
    if (x->nsamples != count)
        return idx_fail(x, 1, err, "header says %" PRIu64 " samples but %" PRIu64
                        " sample lines follow", count, x->nsamples);
    return 0;
}

/* Read the real headers of member j and compare them with its index entry. */
static int check_member(index_t *x, rf_tar_scanner *sc, rf_tar_member *tm, imember *im,
                        rf_err *err)
{
    rf_err e = {0, ""};
    rf_tar_scanner_seek(sc, im->hdr);
    int rc = rf_tar_next(sc, tm, &e);
    if (rc != 1)
        return idx_fail(x, im->line, err, "member %s: no valid member header at offset %" PRIu64
                        " (%s)", im->name, im->hdr, rc < 0 ? e.msg : "end of archive");
    if (strcmp(tm->name, im->name) != 0)
        return idx_fail(x, im->line, err, "member %s: the shard's header at offset %"
                         PRIu64 " names %s", im->name, im->hdr, tm->name);
    if (tm->size != im->size || tm->type != RF_TAR_FILE)
        return idx_fail(x, im->line, err, "member %s: the shard's header at offset %"
                         PRIu64 " says size %" PRIu64 "%s, the index %" PRIu64, im->name, im->hdr, tm->size,
                         tm->type != RF_TAR_FILE ? " (not a regular file)" : "", im->size);
    im->data = tm->data_offset;
    return 0;
}

/* Decide which members need their headers read: the spot-checked samples, and any member not
 * followed directly by the next one (extension records or skipped members may sit there). */
static void mark_reads(index_t *x)
{
    for (uint64_t j = 0; j < x->n; j++) {
        imember *im = &x->m[j];
        uint64_t tight = im->hdr + RF_TAR_BLOCK + round_block(im->size);
        im->need_read = j + 1 == x->n || x->m[j + 1].hdr != tight;
        im->data = im->hdr + RF_TAR_BLOCK;
    }
    uint64_t ns = x->nsamples;
    for (uint64_t k = 0; k < TAR_INDEX_SPOT_CHECKS && ns; k++) {
        uint64_t s = TAR_INDEX_SPOT_CHECKS > 1 ? k * (ns - 1) / (TAR_INDEX_SPOT_CHECKS - 1) : 0;
        uint64_t end = s + 1 < ns ? x->first[s + 1] : x->n;
        for (uint64_t j = x->first[s]; j < end; j++)
            x->m[j].need_read = 1;
    }
}

static int use_index(grouper *g, int fd, uint64_t size, const char *idx_path, rf_err *err)
{
    index_t x = {.idx_path = idx_path, .shard = g->path, .file_size = size};
    rf_tar_scanner sc;
    rf_tar_member *tm = NULL;
    int rc = read_text(idx_path, &x.text, err);
    if (rc == 0)
        rc = parse_index(&x, err);
    if (rc == 0 && !(tm = malloc(sizeof *tm)))
        rc = rf_seterr(err, RF_ENOMEM, "%s: no memory", idx_path);
    if (rc == 0) {
        rc = rf_tar_scanner_init(&sc, fd, g->path, size, err);
        if (rc == 0) {
            mark_reads(&x);
            for (uint64_t j = 0; j < x.n && rc == 0; j++)
                if (x.m[j].need_read)
                    rc = check_member(&x, &sc, tm, &x.m[j], err);
            rf_tar_scanner_free(&sc);
        }
    }
    for (uint64_t j = 0; j < x.n && rc == 0; j++) {
        mref r = {x.m[j].name, x.m[j].hdr, x.m[j].data, x.m[j].size};
        rc = group_feed(g, &r, err);
    }
    if (rc == 0)
        rc = group_flush(g, err);
    free(tm);
    free(x.m);
    free(x.first);
    free(x.text);
    return rc;
}

int rf_tar_find_index(const char *shard, char *buf, size_t cap)
{
    size_t n = strlen(shard);
    struct stat st;
    if (n > 4 && strcmp(shard + n - 4, ".tar") == 0 && n - 4 + 5 <= cap) {
        memcpy(buf, shard, n - 4);
        memcpy(buf + n - 4, ".idx", 5);
        if (stat(buf, &st) == 0 && S_ISREG(st.st_mode))
            return 1;
    }
    if (n + 5 > cap)
        return 0;
    memcpy(buf, shard, n);
    memcpy(buf + n, ".idx", 5);
    return stat(buf, &st) == 0 && S_ISREG(st.st_mode);
}

/* ---- the format ops --------------------------------------------------------------------- */

static int open_shard(const char *path, int *fd_out, uint64_t *size, rf_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return rf_seterr(err, -errno, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return rf_seterr(err, -e, "%s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return rf_seterr(err, RF_EFORMAT, "%s: not a regular file", path);
    }
    *fd_out = fd;
    *size = (uint64_t)st.st_size;
    return 0;
}

static int tar_open(rf_dataset *ds, char *const *paths, uint32_t npaths,
                    uint64_t max_sample_bytes, rf_err *err)
{
    grouper *g = malloc(sizeof *g);
    if (!g)
        return rf_seterr(err, RF_ENOMEM, "no memory");
    char *idx = malloc(TAR_PATH_MAX);
    int rc = idx ? 0 : rf_seterr(err, RF_ENOMEM, "no memory");
    ds->payload_ext = "jpg";
    for (uint32_t i = 0; i < npaths && rc == 0; i++) {
        int fd;
        uint64_t size;
        rc = open_shard(paths[i], &fd, &size, err);
        if (rc)
            break;
        rc = rf_dataset_add_file(ds, paths[i], fd, size, err);
        if (rc) {
            close(fd); /* not owned by ds unless added */
            break;
        }
        memset(g, 0, sizeof *g);
        g->ds = ds;
        g->path = ds->files[ds->nfiles - 1].path;
        g->file = ds->nfiles - 1;
        g->max_span = RF_MIN(max_sample_bytes ? max_sample_bytes : TAR_DEFAULT_SAMPLE_BYTES,
                             (uint64_t)UINT32_MAX);
        if (rf_tar_find_index(paths[i], idx, TAR_PATH_MAX))
            rc = use_index(g, fd, size, idx, err);
        else
            rc = scan_shard(g, fd, size, err);
    }
    free(idx);
    free(g);
    return rc;
}

const rf_format_ops rf_format_tar = {"tar", tar_open};

/* ---- writing an index ------------------------------------------------------------------- */

typedef struct obuf {
    char *p;
    size_t len, cap;
} obuf;

static int obuf_put(obuf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (b->len + n + 1 > cap)
            cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q)
            return -1;
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    return 0;
}

/* Append one member to the line being built; a new key starts a new line. */
static int index_member(obuf *lines, const rf_tar_member *m, char *key, size_t *key_len,
                        uint64_t *samples, const char *shard, rf_err *err)
{
    const char *ext;
    size_t klen = rf_tar_split_key(m->name, &ext);
    if (!*ext || strpbrk(m->name, " \t\r\n\v\f"))
        return rf_seterr(err, RF_EINVAL, "%s: member %s at offset %" PRIu64
                         " cannot be indexed (whitespace in its name or no extension)", shard,
                         m->name, m->header_offset);
    int same = *samples && klen == *key_len && memcmp(key, m->name, klen) == 0;
    char num[64];
    int n = snprintf(num, sizeof num, " %" PRIu64 " %" PRIu64 " ", m->header_offset, m->size);
    int bad = 0;
    if (!same) {
        bad |= *samples ? obuf_put(lines, "\n", 1) : 0;
        memcpy(key, m->name, klen);
        *key_len = klen;
        ++*samples;
    } else {
        bad |= obuf_put(lines, " ", 1);
    }
    bad |= obuf_put(lines, ext, strlen(ext));
    bad |= obuf_put(lines, num, (size_t)n);
    bad |= obuf_put(lines, m->name, strlen(m->name));
    return bad ? rf_seterr(err, RF_ENOMEM, "%s: no memory for the index", shard) : 0;
}

static int write_all(const char *path, const char *head, const obuf *body, rf_err *err)
{
    FILE *f = fopen(path, "we");
    if (!f)
        return rf_seterr(err, -errno, "%s: %s", path, strerror(errno));
    int ok = fputs(head, f) >= 0 && (body->len == 0 || fwrite(body->p, 1, body->len, f) == body->len) &&
             (body->len == 0 || fputc('\n', f) != EOF);
    int e = errno;
    if (fclose(f) != 0 && ok) {
        ok = 0;
        e = errno;
    }
    return ok ? 0 : rf_seterr(err, -e, "%s: write failed: %s", path, strerror(e));
}

int rf_tar_write_index(const char *shard, const char *idx_path, rf_err *err)
{
    int fd;
    uint64_t size, samples = 0;
    int rc = open_shard(shard, &fd, &size, err);
    if (rc)
        return rc;
    rf_tar_scanner sc;
    rf_tar_member *m = malloc(sizeof *m);
    char *key = malloc(RF_TAR_NAME_MAX + 1);
    size_t key_len = 0;
    obuf lines = {0};
    rc = (m && key) ? rf_tar_scanner_init(&sc, fd, shard, size, err)
                    : rf_seterr(err, RF_ENOMEM, "no memory");
    if (rc == 0) {
        while ((rc = rf_tar_next(&sc, m, err)) == 1)
            if (m->type == RF_TAR_FILE &&
                (rc = index_member(&lines, m, key, &key_len, &samples, shard, err)) != 0)
                break;
        rf_tar_scanner_free(&sc);
    }
    if (rc == 0) {
        char head[64], tmp[TAR_PATH_MAX];
        snprintf(head, sizeof head, "v1.2 %" PRIu64 "\n", samples);
        if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%ld", idx_path, (long)getpid()) >= sizeof tmp)
            rc = rf_seterr(err, RF_EINVAL, "%s: path too long", idx_path);
        else if ((rc = write_all(tmp, head, &lines, err)) == 0 && rename(tmp, idx_path) != 0)
            rc = rf_seterr(err, -errno, "%s: rename failed: %s", idx_path, strerror(errno));
        if (rc)
            unlink(tmp);
    }
    free(lines.p);
    free(key);
    free(m);
    close(fd);
    return rc;
}
