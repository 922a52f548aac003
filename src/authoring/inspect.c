/* inspect.c — shard inspection (rf_shard_inspect, include/ringfeed_shards.h).
 *
 * DESIGN. One pass over the headers with the loader's scanner and grouping; image and label
 * members are read (one at a time, into one buffer that grows up to max_member_bytes) and
 * checked with the loader's checks. An index beside the shard is checked by the loader's own
 * code with every header read, so inspection reports what the loader refuses in the same
 * words, and reads what the loader leaves to read time. Keys that come back after other keys
 * (two samples to the loader) are reported. A malformed header ends the scan; every other
 * problem is reported and the scan goes on. A URL is inspected through the loader's remote
 * client: headers through one streamed reader, members through a second, the index fetched
 * and checked the same way. */
#include "ringfeed_shards.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "authoring/authoring.h"
#ifdef RINGFEED_HAVE_CURL
#include "io/remote.h"
#endif
#include "loaders/dataset.h"
#include "loaders/tar.h"
#include "loaders/tar_index.h"

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
    /* the open sample: the loader's grouping (g) and what inspection found in it (cur) */
    rf_tar_group g;
    rf_inspect_sample cur;
    rf_tar_link link; /* the last link members skipped, for a sample's missing image */
    int broken; /* the scan stopped at a malformed header: the open sample's rest is unknown */
    /* a URL: the client, the object, readers for headers (scan) and members (data) */
    const char *url;
    struct rf_remote *remote;
    const rf_remote_ops *remote_ops;
    void *robj;
    rf_byte_reader rd_scan, rd_data;
    char shown[RF_PATH_BYTES_MAX];
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
    int rc = 0;
    if (in->remote) /* the reader hands out at most RF_TAR_READAHEAD_MAX bytes a call */
        for (size_t g = 1; rc == 0 && got < len && g; got += g) {
            rc = in->rd_data.read(in->rd_data.ctx, in->buf + got,
                                  RF_MIN((size_t)len - got, RF_TAR_READAHEAD_MAX), off + got, &g);
            if (rc)
                return rf_seterr(e, RF_EIO, "%s", in->rd_data.why(in->rd_data.ctx));
        }
    else
        rc = rf_pread_full(in->fd, in->buf, (size_t)len, off, &got);
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
            uint64_t h = rf_key_hash(nm, kl);
            for (h &= cap - 1; q[h] != UINT64_MAX; h = (h + 1) & (cap - 1)) {
            }
            q[h] = in->set[i];
        }
        free(in->set);
        in->set = q;
        in->set_cap = cap;
    }
    const char *name = in->names + name_off;
    uint64_t h = rf_key_hash(name, klen);
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
    if (!in->g.open)
        return;
    in->g.open = 0;
    rf_inspect_sample *s = &in->cur;
    rf_inspect_summary *sum = &in->sum;
    if (!in->g.has_img) {
        char hint[RF_TAR_NAME_MAX + 400];
        if (!rf_tar_no_image(in->g.image_exts, in->g.seen, hint, sizeof hint)) {
            size_t n = strlen(hint);
            rf_tar_link_hint(&in->link, in->g.key, in->g.key_len, hint + n, sizeof hint - n);
        }
        problem(in, RF_EFORMAT, s->offset, in->g.key, "sample %s has no image member%s",
                in->g.key, hint);
    }
    if (!in->g.has_lbl && !in->broken && in->opt.label_source != RF_LABEL_NONE) {
        rf_err e = {0};
        rf_label_missing(in->g.key, rf_label_ext(in->opt.label_source), RF_LABEL_NO_OFFSET, &e);
        problem(in, RF_ELABEL, s->offset, in->g.key, "%s", e.msg);
    }
    sum->samples++;
    if (in->g.has_img) {
        sum->with_image++;
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
        sum->oriented += s->orientation > 1;
        for (uint32_t k = 0; k < RF_RECOVERED_KINDS; k++)
            sum->recovered_by_kind[k] += (s->recovered >> k) & 1;
        sum->images++;
    }
    if (s->label >= 0) {
        if (sum->labeled == 0 || s->label < sum->label_min)
            sum->label_min = s->label;
        if (sum->labeled == 0 || s->label > sum->label_max)
            sum->label_max = s->label;
        sum->labeled++;
    }
    s->key = in->g.key;
    if (in->on_sample && !in->stopped && in->on_sample(in->ctx, s))
        in->stopped = 1;
}

static void check_image(inspector *in, const rf_tar_member *tm)
{
    rf_inspect_sample *s = &in->cur;
    rf_err e = {0};
    s->image_bytes = tm->size;
    if (tm->size > in->opt.max_member_bytes) {
        problem(in, RF_ELIMIT, tm->header_offset, in->g.key, "member %s: %" PRIu64 " bytes, over "
                "the limit %" PRIu64, tm->name, tm->size, in->opt.max_member_bytes);
        return;
    }
    if (!in->opt.check_jpeg)
        return;
    int rc = read_member(in, tm->data_offset, tm->size, &e);
    rf_jpeg_info ji = {0};
    if (rc == 0)
        rc = rf_jpeg_check_info(in->jc, in->buf, tm->size, &ji, &e);
    s->width = ji.width, s->height = ji.height, s->progressive = ji.progressive;
    s->region_ready = ji.region_ready;
    s->recovered = ji.recovered;
    if (rc == 0)
        s->orientation = rf_jpeg_exif_orientation(in->buf, (size_t)tm->size);
    if (rc)
        problem(in, rc, tm->header_offset, in->g.key, "member %s: %s", tm->name, e.msg);
}

/* The sample's first label member, judged as the loader judges it (rf_check_label_as); a
 * member over the label limit is refused unread. */
static void check_label(inspector *in, const rf_tar_member *tm)
{
    rf_err e = {0};
    int32_t label;
    uint32_t src = in->opt.label_source;
    int rc = tm->size > rf_label_bytes_max(src) ? 0
                                                : read_member(in, tm->data_offset, tm->size, &e);
    if (rc)
        problem(in, rc, tm->header_offset, in->g.key, "member %s: %s", tm->name, e.msg);
    else if (rf_check_label_as(src, in->opt.label_json_path, in->g.key, in->buf, tm->size,
                               RF_LABEL_NO_OFFSET, &label, &e) != 0)
        problem(in, RF_ELABEL, tm->header_offset, in->g.key, "%s", e.msg);
    else
        in->cur.label = label;
}

static int remember(inspector *in, const rf_tar_member *tm, uint64_t *name_off)
{
    size_t nl = strlen(tm->name);
    if (in->nm >= INSPECT_MEMBERS_MAX)
        return RF_ELIMIT;
    if (rf_grow(&in->names, &in->ncap, in->nlen + nl + 1, 1))
        return RF_ENOMEM;
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
    int starts = rf_tar_group_starts(&in->g, tm->name);
    int seen = 0;
    if (starts) {
        sample_flush(in);
        if ((seen = key_seen(in, name_off, klen)) < 0)
            return RF_ENOMEM;
    }
    int role = rf_tar_group_add(&in->g, tm->name, tm->header_offset, tm->data_offset, tm->size);
    if (starts) {
        if (seen)
            problem(in, RF_EFORMAT, tm->header_offset, in->g.key, "key %s appears again after "
                    "other keys: its members are not consecutive (read as two samples)",
                    in->g.key);
        in->cur = (rf_inspect_sample){.struct_size = sizeof in->cur, .path = in->path,
                                      .offset = tm->header_offset, .label = -1};
    }
    in->cur.members = in->g.members;
    in->cur.span_bytes = in->g.end - in->g.start;
    if (role == RF_TAR_ROLE_IMAGE)
        check_image(in, tm);
    else if (role == RF_TAR_ROLE_LABEL && in->opt.label_source != RF_LABEL_NONE)
        check_label(in, tm);
    return 0;
}

/* A remote shard's index, X.idx beside X.tar: 1 with it checked (rc in *rc), 0 when the
 * server has none or the URL has a query string (as the loader: docs/remote.md). */
static int check_remote_index(inspector *in, char *idx, rf_tar_index_stats *st, rf_err *e,
                              int *rc)
{
    char url[RF_PATH_BYTES_MAX], *text = NULL;
    uint64_t len = 0;
    if (strchr(in->url, '?') || rf_tar_index_name(in->url, url, sizeof url) ||
        rf_tar_index_name(in->path, idx, RF_PATH_BYTES_MAX))
        return 0;
    const rf_remote_ops *ops = in->remote_ops;
    int found = ops->fetch(ops->ctx, url, RF_TAR_INDEX_BYTES_MAX, &text, &len, e);
    if (found < 0)
        *rc = found;
    else if (found)
        *rc = rf_tar_index_read_text(idx, text, len, in->path, &in->rd_data, in->size, 0, 1,
                                     NULL, NULL, st, e);
    return found != 0;
}

/* The loader's check of the index, with every member's header read. */
static void check_index(inspector *in)
{
    char idx[RF_PATH_BYTES_MAX];
    rf_tar_index_stats st = {0};
    rf_err e = {0};
    int rc = 0;
    if (!in->opt.check_index || (in->remote ? !check_remote_index(in, idx, &st, &e, &rc)
                                            : !rf_tar_find_index(in->path, idx, sizeof idx)))
        return;
    in->sum.has_index = 1;
    if (!in->remote)
        rc = rf_tar_index_read(idx, in->path, in->fd, in->size, 0, 1, NULL, NULL, &st, &e);
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

/* ---- a URL ---- */

#ifdef RINGFEED_HAVE_CURL
/* The loader's client with rf_config's defaults (5 retries, 30 s), the object (its size, its
 * printable name for every message) and the two readers. */
static int remote_open(inspector *in, rf_err *e)
{
    in->url = in->path;
    int rc = rf_remote_new(5, 30000, &in->remote, e);
    if (rc == 0)
        in->remote_ops = &in->remote->ops;
    const rf_remote_ops *ops = in->remote_ops;
    if (rc == 0)
        rc = ops->open(ops->ctx, in->url, &in->robj, &in->size, in->shown, sizeof in->shown, e);
    if (rc == 0)
        in->path = in->shown;
    if (rc == 0 && (rc = ops->reader(ops->ctx, in->robj, 1, &in->rd_scan, e)) == 0 &&
        (rc = ops->reader(ops->ctx, in->robj, 1, &in->rd_data, e)) != 0) {
        ops->reader_close(&in->rd_scan);
        in->rd_scan.ctx = NULL;
    }
    return rc;
}

static void remote_close(inspector *in)
{
    const rf_remote_ops *ops = in->remote_ops;
    if (!ops)
        return;
    if (in->rd_scan.ctx)
        ops->reader_close(&in->rd_scan);
    if (in->rd_data.ctx)
        ops->reader_close(&in->rd_data);
    if (in->robj)
        ops->close(ops->ctx, in->robj);
    rf_remote_free(in->remote);
}
#else
static int remote_open(inspector *in, rf_err *e)
{
    return rf_seterr(e, RF_EINVAL, "%s: this library was built without remote shard support "
                     "(libcurl), so URLs cannot be read", in->path);
}

static void remote_close(inspector *in) { (void)in; }
#endif

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
    sc.reader = in->remote ? &in->rd_scan : NULL;
    int rc = 0, complete = 0;
    uint64_t nonregular = 0;
    while (!in->stopped && (rc = rf_tar_next(&sc, tm, &e)) != 0) {
        if (rc < 0) {
            in->broken = 1;
            sample_flush(in);
            const char *why = in->remote ? in->rd_scan.why(in->rd_scan.ctx) : "";
            problem(in, *why ? RF_EIO : rc, sc.pos, "", "%s%s", *why ? why : e.msg,
                    sc.after_end ? "" : " (the rest of the shard cannot be located)");
            break;
        }
        if (tm->type != RF_TAR_FILE) {
            nonregular++;
            rf_tar_link_note(&in->link, tm);
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
    rf_err pe = {0};
    in->g.image_exts = in->opt.image_exts ? in->opt.image_exts : RF_TAR_IMAGE_EXTS;
    if (in->opt.label_source > RF_LABEL_JSON || rf_tar_exts_check(in->g.image_exts, &pe) ||
        (in->opt.label_source == RF_LABEL_JSON &&
         rf_json_path_check(in->opt.label_json_path, &pe))) {
        free(in);
        return RF_EINVAL;
    }
    in->g.label_ext = rf_label_ext(in->opt.label_source);
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
    int orc = rf_path_is_url(path) ? remote_open(in, &e)
                                   : rf_open_regular(path, "a shard", RF_EFORMAT, &in->fd,
                                                     &in->size, &e);
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
    remote_close(in);
    rf_jpeg_checker_destroy(in->jc);
    free(in->buf);
    free(in->names);
    free(in->set);
    free(in);
    return rc;
}
