/* tar_index.c — the shard index (DALI text format v1.2, tar_index.h): reading it, checking it
 * against its shard, and writing it.
 *
 * DESIGN. An index is trusted only as far as it is checked, and the check must stay cheap (a
 * few header reads, not a scan) yet leave no sample out in silence. After the text is parsed,
 * the members, in index order, must tile the archive: each starts where the previous ended,
 * except across a gap that holds only what an index rightly leaves out (non-regular members,
 * whose headers are read to see it); after the last come the end-of-archive marker and zeros.
 * A member's header is skipped only when the index shows it tight (no extension record fits
 * between its neighbours); those around gaps, the last, and TAR_INDEX_SPOT_CHECKS samples
 * spread over the shard are read and compared. An appended member, a deleted or duplicated
 * line, or another shard's index fails at create with line, member and offset; the rest is
 * checked on every read (rf_tar_locate). Inspection runs the same check reading every header.
 *
 * Offsets: ringfeed writes each member's first header block, wds2idx its data's offset; the
 * first member, always read, tells which, and the rest must agree. Errors say how to fix it:
 * delete the index (the loader then scans) or rebuild it. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loaders/dataset.h"
#include "loaders/tar_parse.h"
#include "loaders/tar_index.h"

#define TAR_INDEX_SAMPLES_MAX (1ull << 32)
#define TAR_INDEX_SPOT_CHECKS 8              /* samples whose headers are read (incl. ends) */
_Static_assert(TAR_INDEX_SPOT_CHECKS >= 2, "the spot checks include the first and last sample");

/* ---- parsing ---- */

/* What an index's offsets point at: not known until the first member is read. */
enum { OFF_UNKNOWN, OFF_HEADER, OFF_DATA };

typedef struct imember {
    uint64_t off, size;   /* as the index says */
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
    uint32_t lines;
} index_t;

static int idx_fail(const index_t *x, uint32_t line, rf_err *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int idx_fail(const index_t *x, uint32_t line, rf_err *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int idx_fail(const index_t *x, uint32_t line, rf_err *err, const char *fmt, ...)
{
    char what[RF_ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return rf_seterr(err, RF_EINDEX, "%s: line %u: %s. The index does not describe its shard "
                     "%s: delete it (the loader then scans the shard) or rebuild it (delete it, "
                     "then ringfeed-inspect --write-index on the shard)", x->idx_path, line, what,
                     x->shard);
}

/* The index as text. Everything wrong with the file itself is RF_EINDEX (too large, shrinking,
 * a NUL byte in it), so that the loader's message names the index and the fix. */
static int read_text(const char *path, char **out, rf_err *err)
{
    char *buf;
    uint64_t len;
    int rc = rf_read_whole(path, "a shard index", RF_EINDEX, RF_TAR_INDEX_BYTES_MAX, &buf, &len, err);
    if (rc == RF_ELIMIT || rc == RF_EIO) {
        rc = RF_EINDEX;
        if (err)
            err->code = rc;
    }
    if (rc)
        return rc;
    if (memchr(buf, 0, (size_t)len)) {
        free(buf);
        return rf_seterr(err, RF_EINDEX, "%s: NUL byte in the index", path);
    }
    *out = buf;
    return 0;
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
        if (parse_dec(tok[1], &im.off) || parse_dec(tok[2], &im.size))
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
        if (im.off % RF_TAR_BLOCK != 0 || im.size > RF_TAR_SIZE_MAX)
            return idx_fail(x, ln, err, "member %s: offset not on a block or size too large",
                            im.name);
        if (prev && im.off < prev->off + RF_TAR_BLOCK + rf_tar_round_block(prev->size))
            return idx_fail(x, ln, err, "member %s: offset %" PRIu64 " overlaps the previous member",
                            im.name, im.off);
        if (im.off + im.size > x->file_size)
            return idx_fail(x, ln, err, "member %s: data ends past the end of the shard (offset %"
                            PRIu64 ")", im.name, im.off);
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
    x->lines = ln;
    if (ln == 0)
        return idx_fail(x, 1, err, "empty index");
    if (x->nsamples != count)
        return idx_fail(x, 1, err, "header says %" PRIu64 " samples but %" PRIu64
                        " sample lines follow", count, x->nsamples);
    return 0;
}

/* ---- checking the index against its shard ---- */

/* The members whose headers are read: every one when full; else the spot-checked samples' and
 * each member the index does not show tight, the last one included. */
static void mark_reads(index_t *x, int full)
{
    for (uint64_t j = 0; j < x->n; j++) {
        const imember *im = &x->m[j];
        uint64_t end = im->off + RF_TAR_BLOCK + rf_tar_round_block(im->size);
        x->m[j].need_read = full || j + 1 == x->n || x->m[j + 1].off != end;
    }
    uint64_t ns = x->nsamples;
    for (uint64_t k = 0; k < TAR_INDEX_SPOT_CHECKS && ns; k++) {
        uint64_t s = k * (ns - 1) / (TAR_INDEX_SPOT_CHECKS - 1);
        uint64_t end = s + 1 < ns ? x->first[s + 1] : x->n;
        for (uint64_t j = x->first[s]; j < end; j++)
            x->m[j].need_read = 1;
    }
}

/* The walk along the archive. pos is a member boundary the walk vouches for: the archive's
 * start, or the end of a member it read or took as tight. */
typedef struct walk {
    index_t *x;
    rf_tar_scanner sc;
    rf_tar_member *tm;
    uint64_t pos;
    int offsets;              /* OFF_*: what the index's offsets point at */
    rf_tar_index_stats *st;
} walk;

static int walk_fail(walk *w, uint32_t line, uint64_t at, rf_err *err, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* idx_fail, noting the shard offset the error is about (inspection reports it). */
static int walk_fail(walk *w, uint32_t line, uint64_t at, rf_err *err, const char *fmt, ...)
{
    char what[RF_ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    w->st->at = at;
    return idx_fail(w->x, line, err, "%s", what);
}

/* Read the member at pos and step past it: 1 (in w->tm), 0 at the archive's end, or an error:
 * the scanner's for data after the end-of-archive marker (the shard's fault), else RF_EINDEX on
 * `line` about member `name` (NULL: what follows the last member). */
static int read_next(walk *w, uint32_t line, const char *name, rf_err *err)
{
    rf_err e = {0};
    uint64_t at = w->pos;
    rf_tar_scanner_seek(&w->sc, at);
    int rc = rf_tar_next(&w->sc, w->tm, &e);
    w->st->headers_read++;
    if (rc < 0 && w->sc.after_end) {
        w->st->at = w->sc.pos;
        return rf_seterr(err, rc, "%s", e.msg);
    }
    if (rc < 0)
        return walk_fail(w, line, at, err, "%s%s: %s", name ? "member " : "after the last member",
                         name ? name : "", e.msg);
    w->pos = w->sc.pos;
    return rc;
}

/* Where tm is in the index's terms. Before the first regular member tells which offsets the
 * index uses, a header offset (a non-regular member is never indexed either way). */
static uint64_t index_offset(const walk *w, const rf_tar_member *tm)
{
    return w->offsets == OFF_DATA ? tm->data_offset : tm->header_offset;
}

/* Find im from pos on: past the non-regular members an index leaves out, to the first regular
 * member, which must be im: at its offset, with its name and size. */
static int find_member(walk *w, const imember *im, rf_tar_index_member *out, rf_err *err)
{
    for (;;) {
        uint64_t at = w->pos;
        int rc = read_next(w, im->line, im->name, err);
        if (rc < 0)
            return rc;
        const rf_tar_member *tm = w->tm;
        if (rc == 0)
            return walk_fail(w, im->line, at, err, "member %s at offset %" PRIu64 ": the "
                             "archive ends at offset %" PRIu64 ", before it", im->name, im->off,
                             at);
        int regular = tm->type == RF_TAR_FILE;
        if (w->offsets == OFF_UNKNOWN && regular)
            w->offsets = im->off == tm->data_offset ? OFF_DATA : OFF_HEADER;
        uint64_t where = index_offset(w, tm);
        if (where < im->off && regular)
            return walk_fail(w, im->line, tm->header_offset, err, "the shard's member %s at "
                             "offset %" PRIu64 " is not in the index (it comes before %s)",
                             tm->name, tm->header_offset, im->name);
        if (where < im->off) {
            w->st->nonregular++;
            continue;
        }
        if (where > im->off || !regular)
            return walk_fail(w, im->line, tm->header_offset, err, "member %s: no regular member "
                             "of the shard is at offset %" PRIu64 " (the shard has %s%s at "
                             "offset %" PRIu64 ")", im->name, im->off, tm->name,
                             regular ? "" : ", not a regular file,", tm->header_offset);
        if (strcmp(tm->name, im->name) != 0)
            return walk_fail(w, im->line, tm->header_offset, err, "member %s: the shard's header "
                             "at offset %" PRIu64 " names %s", im->name, tm->header_offset,
                             tm->name);
        if (tm->size != im->size)
            return walk_fail(w, im->line, tm->header_offset, err, "member %s: the shard's header "
                             "at offset %" PRIu64 " says size %" PRIu64 ", the index %" PRIu64,
                             im->name, tm->header_offset, tm->size, im->size);
        out->hdr = tm->header_offset;
        out->data = tm->data_offset;
        return 0;
    }
}

/* After the last member: nothing but non-regular members, then the end-of-archive marker
 * (which the scanner checks, with the zeros after it). A member appended after indexing shows
 * up here. */
static int walk_end(walk *w, rf_err *err)
{
    uint32_t line = w->x->lines;
    for (;;) {
        int rc = read_next(w, line, NULL, err);
        if (rc <= 0)
            return rc;
        if (w->tm->type == RF_TAR_FILE)
            return walk_fail(w, line, w->tm->header_offset, err, "the shard goes on after the "
                             "index's last member: its member %s at offset %" PRIu64 " is not in "
                             "the index (added after the index was written?)", w->tm->name,
                             w->tm->header_offset);
        w->st->nonregular++;
    }
}

static int walk_members(walk *w, rf_tar_index_fn fn, void *ctx, rf_err *err)
{
    const index_t *x = w->x;
    for (uint64_t j = 0; j < x->n; j++) {
        const imember *im = &x->m[j];
        rf_tar_index_member m = {im->name, w->pos, w->pos + RF_TAR_BLOCK, im->size, im->line};
        uint64_t plain = w->offsets == OFF_DATA ? m.data : m.hdr; /* a member without records */
        int rc = 0;
        if (im->need_read || w->offsets == OFF_UNKNOWN || im->off != plain)
            rc = find_member(w, im, &m, err);
        else
            w->pos = m.data + rf_tar_round_block(im->size);
        if (rc == 0 && fn)
            rc = fn(ctx, &m, err);
        if (rc)
            return rc;
    }
    return walk_end(w, err);
}

/* The walk over an index text x (owned: freed here) against the shard the scanner sc reads. */
static int index_walk(index_t *x, rf_tar_scanner *sc, int full, rf_tar_index_fn fn, void *ctx,
                      rf_tar_index_stats *st, rf_err *err)
{
    rf_tar_index_stats local;
    walk w = {.x = x, .offsets = OFF_UNKNOWN, .st = st ? st : &local, .sc = *sc};
    memset(w.st, 0, sizeof *w.st);
    int rc = parse_index(x, err);
    if (rc == 0 && !(w.tm = malloc(sizeof *w.tm)))
        rc = rf_seterr(err, RF_ENOMEM, "%s: no memory", x->idx_path);
    if (rc == 0) {
        mark_reads(x, full);
        w.st->members = x->n;
        w.st->samples = x->nsamples;
        rc = walk_members(&w, fn, ctx, err);
    }
    rf_tar_scanner_free(&w.sc);
    free(w.tm);
    free(x->m);
    free(x->first);
    free(x->text);
    return rc;
}

int rf_tar_index_read(const char *idx_path, const char *shard, int fd, uint64_t size,
                      uint32_t name_max, int full, rf_tar_index_fn fn, void *ctx,
                      rf_tar_index_stats *st, rf_err *err)
{
    index_t x = {.idx_path = idx_path, .shard = shard, .file_size = size};
    rf_tar_scanner sc;
    if (st)
        memset(st, 0, sizeof *st);
    int rc = read_text(idx_path, &x.text, err);
    if (rc == 0 && (rc = rf_tar_scanner_init(&sc, fd, shard, size, err)) != 0)
        free(x.text);
    if (rc)
        return rc;
    sc.name_max = name_max;
    return index_walk(&x, &sc, full, fn, ctx, st, err);
}

int rf_tar_index_read_text(const char *idx_name, char *text, uint64_t len, const char *shard,
                           const rf_byte_reader *rd, uint64_t size, uint32_t name_max, int full,
                           rf_tar_index_fn fn, void *ctx, rf_tar_index_stats *st, rf_err *err)
{
    index_t x = {.idx_path = idx_name, .shard = shard, .file_size = size, .text = text};
    rf_tar_scanner sc;
    if (st)
        memset(st, 0, sizeof *st);
    int rc = memchr(text, 0, (size_t)len)
                 ? rf_seterr(err, RF_EINDEX, "%s: NUL byte in the index", idx_name)
                 : rf_tar_scanner_init(&sc, -1, shard, size, err);
    if (rc) {
        free(text);
        return rc;
    }
    sc.name_max = name_max;
    sc.reader = rd;
    return index_walk(&x, &sc, full, fn, ctx, st, err);
}

int rf_tar_index_name(const char *shard, char *buf, size_t cap)
{
    size_t n = strlen(shard);
    size_t keep = n > 4 && strcmp(shard + n - 4, ".tar") == 0 ? n - 4 : n;
    if (keep + 5 > cap)
        return -1;
    memcpy(buf, shard, keep);
    memcpy(buf + keep, ".idx", 5);
    return 0;
}

int rf_tar_find_index(const char *shard, char *buf, size_t cap)
{
    size_t n = strlen(shard);
    struct stat st;
    int named = rf_tar_index_name(shard, buf, cap) == 0;
    if (named && stat(buf, &st) == 0)
        return 1;
    if ((named && strlen(buf) == n + 4) || n + 5 > cap)
        return 0; /* the name tried was SHARD.idx already, or that one does not fit */
    memcpy(buf, shard, n);
    memcpy(buf + n, ".idx", 5);
    return stat(buf, &st) == 0;
}

/* ---- writing an index ---- */

#define TAR_INDEX_HEAD_MAX 32 /* "v1.2 " and a uint64_t in decimal, and the newline */

static int text_put(rf_tar_index_text *t, const char *s, size_t n)
{
    if (rf_grow(&t->p, &t->cap, (uint64_t)t->len + n, 1))
        return -ENOMEM;
    memcpy(t->p + t->len, s, n);
    t->len += n;
    return 0;
}

/* "<ext> <hdr> <size> <name>", after a space within a line or a newline between lines. The
 * member is appended whole or not at all, so a failed call leaves t as it was. */
int rf_tar_index_add(rf_tar_index_text *t, const char *name, uint64_t hdr, uint64_t size,
                     int new_sample)
{
    const char *ext;
    rf_tar_split_key(name, &ext);
    int new_line = new_sample || !t->line_open;
    size_t was = t->len;
    char num[64];
    int n = snprintf(num, sizeof num, " %" PRIu64 " %" PRIu64 " ", hdr, size);
    int rc = t->line_open ? text_put(t, new_line ? "\n" : " ", 1) : 0;
    if (rc == 0)
        rc = text_put(t, ext, strlen(ext));
    if (rc == 0)
        rc = text_put(t, num, (size_t)n);
    if (rc == 0)
        rc = text_put(t, name, strlen(name));
    if (rc) {
        t->len = was;
        return rc;
    }
    t->samples += new_line;
    t->line_open = 1;
    return 0;
}

int rf_tar_index_finish(rf_tar_index_text *t)
{
    char head[TAR_INDEX_HEAD_MAX];
    size_t n = (size_t)snprintf(head, sizeof head, "v1.2 %" PRIu64 "\n", t->samples);
    if ((t->line_open && text_put(t, "\n", 1)) || text_put(t, head, n))
        return -ENOMEM;
    t->line_open = 0;
    memmove(t->p + n, t->p, t->len - n);
    memcpy(t->p, head, n);
    return 0;
}

void rf_tar_index_text_free(rf_tar_index_text *t)
{
    free(t->p);
    *t = (rf_tar_index_text){0};
}

/* One member of the scan: a new key begins a new line, as the loader's grouping does. */
static int index_member(rf_tar_index_text *t, const rf_tar_member *m, char *key,
                        size_t *key_len, const char *shard, rf_err *err)
{
    const char *ext;
    size_t klen = rf_tar_split_key(m->name, &ext);
    if (!*ext || strpbrk(m->name, " \t\r\n\v\f"))
        return rf_seterr(err, RF_EINVAL, "%s: member %s at offset %" PRIu64
                         " cannot be indexed (whitespace in its name or no extension)", shard,
                         m->name, m->header_offset);
    int same = t->line_open && klen == *key_len && memcmp(key, m->name, klen) == 0;
    memcpy(key, m->name, klen);
    *key_len = klen;
    if (rf_tar_index_add(t, m->name, m->header_offset, m->size, !same))
        return rf_seterr(err, RF_ENOMEM, "%s: no memory for the index", shard);
    return 0;
}

static int write_all(const char *path, const rf_tar_index_text *t, rf_err *err)
{
    FILE *f = fopen(path, "we");
    if (!f)
        return rf_seterr(err, -errno, "%s: %s", path, strerror(errno));
    /* fsync before the caller renames it into place: the index name must never point at
     * data a crash can still lose (the shard writer does the same for its files). */
    int ok = fwrite(t->p, 1, t->len, f) == t->len && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int e = errno;
    if (fclose(f) != 0 && ok) {
        ok = 0;
        e = errno;
    }
    return ok ? 0 : rf_seterr(err, -e, "%s: write failed: %s", path, strerror(e));
}

int rf_tar_open_shard(const char *path, int *fd_out, uint64_t *size, rf_err *err)
{
    return rf_open_input(path, "a shard", fd_out, size, err);
}

/* The members of the shard at fd, scanned, as index text (finished). */
static int scan_to_text(const char *shard, int fd, uint64_t size, rf_tar_index_text *t,
                        rf_err *err)
{
    rf_tar_scanner sc;
    rf_tar_member *m = malloc(sizeof *m);
    char *key = malloc(RF_TAR_NAME_MAX + 1);
    size_t key_len = 0;
    int rc = (m && key) ? rf_tar_scanner_init(&sc, fd, shard, size, err)
                        : rf_seterr(err, RF_ENOMEM, "no memory");
    if (rc == 0) {
        while ((rc = rf_tar_next(&sc, m, err)) == 1)
            if (m->type == RF_TAR_FILE &&
                (rc = index_member(t, m, key, &key_len, shard, err)) != 0)
                break;
        rf_tar_scanner_free(&sc);
    }
    if (rc == 0 && rf_tar_index_finish(t))
        rc = rf_seterr(err, RF_ENOMEM, "%s: no memory for the index", shard);
    free(key);
    free(m);
    return rc;
}

int rf_tar_write_index(const char *shard, const char *idx_path, rf_err *err)
{
    int fd;
    uint64_t size;
    if (rf_path_is_url(shard)) {
        char shown[RF_PATH_BYTES_MAX];
        rf_url_shown(shard, shown, sizeof shown);
        return rf_seterr(err, RF_EINVAL, "%s: an index cannot be written beside a remote "
                         "shard; write it beside the local file (ringfeed-inspect --write-index) "
                         "and upload both", shown);
    }
    int rc = rf_tar_open_shard(shard, &fd, &size, err);
    if (rc)
        return rc;
    rf_tar_index_text t = {0};
    rc = scan_to_text(shard, fd, size, &t, err);
    if (rc == 0) {
        char tmp[RF_PATH_BYTES_MAX];
        if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%ld", idx_path, (long)getpid()) >= sizeof tmp)
            rc = rf_seterr(err, RF_EINVAL, "%s: path too long", idx_path);
        else if ((rc = write_all(tmp, &t, err)) == 0 && rename(tmp, idx_path) != 0)
            rc = rf_seterr(err, -errno, "%s: rename failed: %s", idx_path, strerror(errno));
        if (rc)
            unlink(tmp);
    }
    rf_tar_index_text_free(&t);
    close(fd);
    return rc;
}
