/* tar.c — the WebDataset shard format: tar shards become rf_samples, one per sample.
 *
 * DESIGN. At create every shard is opened once and described as samples (tar.h's grouping).
 * A sample's span runs from its first member's first header block to the end of its last
 * member's data, so one request reads it; non-regular members are skipped without ending a
 * run. A key that reappears after another starts a new sample: merging would need a second,
 * non-contiguous span, and webdataset does not merge them either.
 *
 * Members come from a scan (headers only, data skipped) or from an index beside the shard,
 * checked against it by tar_index.c; both feed the same grouper, so both give the same samples,
 * and inspection drives it too. What create does not check is checked on every read
 * (rf_tar_locate). A shard without a sample is refused.
 * A URL is opened, its index fetched and its headers scanned through rf_remote_ops, the scanner
 * reading an rf_byte_reader, so a remote shard gives exactly the samples the same file gives.
 * The shard cache is not used here: create opens every shard remotely (size and ETag are the
 * cache's validator) and the pipeline reads a cached copy afterwards.
 *
 * Errors name the shard (or index file and line), the sample key and the byte offset. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "loaders/dataset.h"
#include "loaders/tar.h"
#include "loaders/tar_index.h"

#define TAR_DEFAULT_SAMPLE_BYTES (64ull << 20)

/* ---- grouping members into samples ---- */

int rf_tar_group_starts(const rf_tar_group *g, const char *name)
{
    const char *ext;
    size_t klen = rf_tar_split_key(name, &ext);
    return !g->open || klen != g->key_len || memcmp(name, g->key, klen) != 0;
}

int rf_tar_group_add(rf_tar_group *g, const char *name, uint64_t hdr, uint64_t data,
                     uint64_t size)
{
    const char *ext;
    size_t klen = rf_tar_split_key(name, &ext);
    if (rf_tar_group_starts(g, name)) {
        memcpy(g->key, name, klen);
        g->key[klen] = 0;
        g->key_len = klen;
        g->open = 1;
        g->start = hdr;
        g->members = 0;
        g->has_img = g->has_lbl = 0;
        g->seen[0] = 0;
    }
    g->members++;
    size_t n = strlen(g->seen);
    if (n + 8 < sizeof g->seen)
        snprintf(g->seen + n, sizeof g->seen - n, "%s%.*s", n ? ", " : "",
                 (int)(sizeof g->seen - n - 8), ext);
    g->end = data + size;
    uint32_t rank = rf_tar_ext_rank(ext, g->image_exts ? g->image_exts : RF_TAR_IMAGE_EXTS);
    if (rank && (!g->has_img || rank < g->img_rank)) {
        g->has_img = 1, g->img_rank = rank;
        g->img_hdr = hdr, g->img_data = data, g->img_size = size;
        return RF_TAR_ROLE_IMAGE;
    }
    if (!g->has_lbl && strcmp(ext, g->label_ext ? g->label_ext : RF_TAR_LABEL_EXT) == 0) {
        g->has_lbl = 1;
        g->lbl_hdr = hdr, g->lbl_data = data, g->lbl_size = size;
        return RF_TAR_ROLE_LABEL;
    }
    return RF_TAR_ROLE_OTHER;
}

/* Image types a sample may hold that ringfeed does not decode. */
static const char *const undecoded[] = {"gif", "bmp", "tif", "tiff", "heic", "heif", "avif",
                                        "jp2", "jxl", "ico", "ppm", "pgm", "pnm"};

int rf_tar_no_image(const char *image_exts, const char *seen, char *out, size_t cap)
{
    int n = snprintf(out, cap, " (%s); its members have the extensions %s", image_exts,
                     *seen ? seen : "(none)");
    char ext[16];
    for (const char *p = seen; *p; p += strspn(p, ", ")) {
        size_t len = strcspn(p, ", ");
        snprintf(ext, sizeof ext, "%.*s", (int)RF_MIN(len, sizeof ext - 1), p);
        p += len;
        for (size_t i = 0; i < sizeof undecoded / sizeof undecoded[0]; i++)
            if (strcasecmp(ext, undecoded[i]) == 0) {
                snprintf(out + n, cap - (size_t)RF_MIN((size_t)n, cap), "; %s images are not "
                         "decoded (JPEG, PNG and WebP are): convert them, or on_error skip "
                         "leaves such samples out", ext);
                return 1;
            }
        if (rf_tar_ext_rank(ext, RF_TAR_IMAGE_EXTS) && !rf_tar_ext_rank(ext, image_exts)) {
            snprintf(out + n, cap - (size_t)RF_MIN((size_t)n, cap), "; %s is not among the "
                     "image extensions asked for: add it (rf_config.image_exts, Python "
                     "image=)", ext);
            return 1;
        }
    }
    return 0;
}

/* ---- link members, for a sample left without its image ---- */

void rf_tar_link_note(rf_tar_link *l, const rf_tar_member *m)
{
    if (m->type != RF_TAR_HARDLINK && m->type != RF_TAR_SYMLINK)
        return;
    uint32_t i = l->n++ % RF_TAR_LINKS_KEPT;
    memcpy(l->e[i].name, m->name, strlen(m->name) + 1);
    l->e[i].hdr = m->header_offset, l->e[i].type = m->type;
}

int rf_tar_link_hint(const rf_tar_link *l, const char *key, size_t key_len, char *out,
                     size_t cap)
{
    const char *ext;
    *out = 0;
    uint32_t kept = l->n < RF_TAR_LINKS_KEPT ? l->n : RF_TAR_LINKS_KEPT;
    for (uint32_t k = 0; k < kept; k++) {
        const char *name = l->e[k].name;
        if (rf_tar_split_key(name, &ext) != key_len || memcmp(name, key, key_len) != 0)
            continue;
        int hard = l->e[k].type == RF_TAR_HARDLINK;
        snprintf(out, cap, "; its member %s at offset %" PRIu64 " is a %s link, which is not "
                 "followed (write the shard with tar %s)", name, l->e[k].hdr,
                 hard ? "hard" : "symbolic", hard ? "--hard-dereference" : "--dereference");
        return 1;
    }
    return 0;
}

/* ---- samples for the dataset ---- */

typedef struct mref {
    const char *name;
    uint64_t hdr, data, size;
} mref;

/* One shard's grouping into ds. */
typedef struct grouper {
    rf_dataset *ds;
    const char *path;        /* the shard's name in messages (a URL's printable form) */
    const char *url;         /* as the user gave it (a URL with any credentials in it) */
    uint32_t file;
    uint64_t max_span;
    rf_tar_group tg;
    rf_tar_link link; /* the last link members skipped, for a sample's missing image */
} grouper;

/* Why a sample lacks its image, after "has no image member": its members (and an image type
 * not decoded, or not asked for, among them), else a link member of its key, else members
 * that are not consecutive (GNU tar stores a folder in directory order). */
static void no_image_hint(const grouper *g, char *out, size_t cap)
{
    int n = 0;
    if (rf_tar_no_image(g->ds->image_exts, g->tg.seen, out, cap))
        return;
    n = (int)strlen(out);
    if (!rf_tar_link_hint(&g->link, g->tg.key, g->tg.key_len, out + n, cap - (size_t)n))
        snprintf(out + n, cap - (size_t)n, "; a sample's members must be consecutive (GNU tar "
                 "stores a folder in directory order without --sort=name; ringfeed-inspect "
                 "names keys that come back after other keys)");
}

/* The complete sample in g->tg becomes an rf_sample (or an error naming it). */
static int group_flush(grouper *g, rf_err *err)
{
    rf_tar_group *t = &g->tg;
    if (!t->open)
        return 0;
    t->open = 0;
    if (!t->has_img && !g->ds->keep_imageless) {
        char hint[RF_TAR_NAME_MAX + 400];
        no_image_hint(g, hint, sizeof hint);
        return rf_seterr(err, RF_EFORMAT, "%s: sample %s at offset %" PRIu64
                         " has no image member%s", g->path, t->key, t->start, hint);
    }
    /* keep_imageless: the sample's read finds no image and is skipped, with the reason */
    uint64_t span = t->end - t->start;
    if (span > g->max_span)
        return rf_seterr(err, RF_ELIMIT, "%s: sample %s at offset %" PRIu64 " spans %" PRIu64
                         " bytes, over max_sample_bytes %" PRIu64, g->path, t->key, t->start,
                         span, g->max_span);
    rf_sample s = {
        .offset = t->start,
        .length = (uint32_t)span,
        .file = g->file,
        .data_off = t->has_img ? (uint32_t)(t->img_data - t->start) : 0,
        .data_len = t->has_img ? (uint32_t)t->img_size : 0,
        .data_hdr = t->has_img ? (uint32_t)(t->img_hdr - t->start) : 0,
        .label_off = t->has_lbl ? (uint32_t)(t->lbl_data - t->start) : 0,
        /* A label member over its limit (rf_label_bytes_max) is a bad label of this sample,
         * found when it is read (rf_check_label_as), not a reason to refuse the dataset here. */
        .label_len = t->has_lbl ? (uint16_t)RF_MIN(t->lbl_size, UINT16_MAX) : 0,
        .flags = (uint16_t)(RF_SAMPLE_TAR | RF_SAMPLE_EXT(t->has_img ? t->img_rank : 0)),
        .label = -1,
    };
    return rf_dataset_add_sample(g->ds, &s, t->key, t->key_len, err);
}

static int group_feed(grouper *g, const mref *m, rf_err *err)
{
    if (rf_tar_group_starts(&g->tg, m->name)) {
        int rc = group_flush(g, err);
        if (rc)
            return rc;
    }
    rf_tar_group_add(&g->tg, m->name, m->hdr, m->data, m->size);
    if (g->tg.members > RF_TAR_SAMPLE_MEMBERS_MAX)
        return rf_seterr(err, RF_ELIMIT, "%s: sample %s at offset %" PRIu64
                         " has more than %d members", g->path, g->tg.key, g->tg.start,
                         RF_TAR_SAMPLE_MEMBERS_MAX);
    return 0;
}

/* ---- scanning ---- */

/* Scan the shard at fd, or through rd when it is not NULL (a remote shard). */
static int scan_shard(grouper *g, int fd, const rf_byte_reader *rd, uint64_t size, rf_err *err)
{
    rf_tar_scanner sc;
    rf_tar_member *m = malloc(sizeof *m);
    if (!m)
        return rf_seterr(err, RF_ENOMEM, "%s: no memory", g->path);
    int rc = rf_tar_scanner_init(&sc, fd, g->path, size, err);
    sc.name_max = g->ds->max_name;
    sc.reader = rd;
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
            rf_tar_link_note(&g->link, m);
            continue;
        }
        mref r = {m->name, m->header_offset, m->data_offset, m->size};
        rc = group_feed(g, &r, err);
    }
    rf_tar_scanner_free(&sc);
    free(m);
    return rc;
}

/* ---- reading an index ---- */

static int index_feed(void *ctx, const rf_tar_index_member *m, rf_err *err)
{
    mref r = {m->name, m->hdr, m->data, m->size};
    return group_feed(ctx, &r, err);
}

static int use_index(grouper *g, int fd, uint64_t size, const char *idx_path, rf_err *err)
{
    rf_tar_index_stats st;
    int rc = rf_tar_index_read(idx_path, g->path, fd, size, g->ds->max_name, 0, index_feed, g,
                               &st, err);
    g->ds->nonregular += st.nonregular;
    return rc ? rc : group_flush(g, err);
}

/* ---- remote shards ---- */

/* A remote shard's members: from its index (X.idx beside X.tar, fetched once, headers
 * spot-checked with ranged reads) or, on a 404, one streamed GET through the same scanner. A
 * presigned URL (a query string) has no nameable index beside it, so it is scanned. A failed
 * read reports the reader's message (URL, what the server did), not the scanner's errno. */
static int remote_members(grouper *g, uint64_t size, char *idx, rf_err *err)
{
    const rf_remote_ops *r = g->ds->remote;
    const rf_file *f = &g->ds->files[g->file];
    char *text = NULL, shown[RF_PATH_BYTES_MAX];
    uint64_t len = 0;
    int found = 0;
    if (!strchr(g->url, '?') && rf_tar_index_name(g->url, idx, RF_PATH_BYTES_MAX) == 0 &&
        rf_tar_index_name(g->path, shown, sizeof shown) == 0)
        found = r->fetch(r->ctx, idx, RF_TAR_INDEX_BYTES_MAX, &text, &len, err);
    if (found < 0)
        return found;
    /* An index is checked by a few header reads, each its own small request; a scan reads the
     * shard forward through one stream. */
    rf_byte_reader rd;
    int rc = r->reader(r->ctx, f->remote, !found, &rd, err);
    if (rc) {
        free(text);
        return rc;
    }
    if (found) {
        rf_tar_index_stats st;
        rc = rf_tar_index_read_text(shown, text, len, g->path, &rd, size, g->ds->max_name, 0,
                                    index_feed, g, &st, err);
        g->ds->nonregular += st.nonregular;
        rc = rc ? rc : group_flush(g, err);
    } else {
        rc = scan_shard(g, -1, &rd, size, err);
    }
    const char *why = rd.why(rd.ctx);
    if (rc && why && *why)
        rc = rf_seterr(err, RF_EIO, "%s", why);
    r->reader_close(&rd);
    return rc;
}

/* ---- the format ops ---- */

/* A shard without a sample is refused even among others: an empty file or an empty archive
 * is what a failed or interrupted write leaves, and its samples would be missing in silence. */
static int no_samples(const char *path, uint64_t size, uint64_t nonregular, rf_err *err)
{
    rf_err e = {0};
    int rc = rf_tar_no_samples(size, nonregular, &e);
    return rf_seterr(err, rc, "%s: %s", path, e.msg);
}

static int tar_open(rf_dataset *ds, char *const *paths, uint32_t npaths,
                    uint64_t max_sample_bytes, rf_err *err)
{
    grouper *g = malloc(sizeof *g);
    if (!g)
        return rf_seterr(err, RF_ENOMEM, "no memory");
    char *idx = malloc(RF_PATH_BYTES_MAX);
    int rc = idx ? 0 : rf_seterr(err, RF_ENOMEM, "no memory");
    if (!ds->image_exts)
        ds->image_exts = RF_TAR_IMAGE_EXTS;
    for (uint32_t i = 0; i < npaths && rc == 0; i++) {
        uint64_t size;
        rc = rf_dataset_open_file(ds, paths[i], "a shard", &size, err);
        if (rc)
            break;
        const rf_file *f = &ds->files[ds->nfiles - 1];
        memset(g, 0, sizeof *g);
        g->ds = ds;
        g->tg.image_exts = ds->image_exts;
        g->tg.label_ext = ds->label_ext;
        g->path = f->path;
        g->url = paths[i];
        g->file = ds->nfiles - 1;
        g->max_span = RF_MIN(max_sample_bytes ? max_sample_bytes : TAR_DEFAULT_SAMPLE_BYTES,
                             (uint64_t)UINT32_MAX);
        uint64_t samples = ds->nsamples, nonregular = ds->nonregular;
        if (f->remote)
            rc = remote_members(g, size, idx, err);
        else if (rf_tar_find_index(paths[i], idx, RF_PATH_BYTES_MAX))
            rc = use_index(g, f->fd, size, idx, err);
        else
            rc = scan_shard(g, f->fd, NULL, size, err);
        if (rc == 0 && ds->nsamples == samples)
            rc = no_samples(g->path, size, ds->nonregular - nonregular, err);
    }
    free(idx);
    free(g);
    return rc;
}

const rf_format_ops rf_format_tar = {
    .abi = RF_FORMAT_ABI, .name = "tar", .source = RF_SOURCE_TAR, .open = tar_open};

