/* sync_write.c — a shard's sync-point index, written beside it or checked against it
 * (include/ringfeed_shards.h, loaders/sync_index.h).
 *
 * DESIGN. The shard is scanned with the loader's scanner and each JPEG member read whole and
 * given its entry by the GPU decode's own build (rf_decode_sync_entry), so an index written
 * here is the one the loader would build, and a check judges staleness as the loader does:
 * by the member's offset, size and hash. */
#include "ringfeed_shards.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "authoring/authoring.h"
#include "backend/gpujpeg.h"
#include "base/hash.h"
#include "loaders/sync_index.h"
#include "loaders/tar_index.h"
#include "loaders/tar_parse.h"

void rf_sync_summary_init(rf_sync_summary *s)
{
    if (s)
        *s = (rf_sync_summary){.struct_size = sizeof *s};
}

void rf_sync_summary_add(rf_sync_summary *a, const rf_sync_summary *b)
{
    a->jpegs += b->jpegs, a->indexed += b->indexed, a->needs_none += b->needs_none;
    a->unsupported += b->unsupported, a->unreadable += b->unreadable;
    a->missing += b->missing, a->stale += b->stale, a->reused += b->reused;
    a->index_bytes += b->index_bytes, a->shard_bytes += b->shard_bytes;
    a->build_ns += b->build_ns;
}

int rf_shard_sync_path(const char *shard, char *buf, size_t cap)
{
    return shard && buf && rf_sync_path(shard, buf, cap) == 0 ? 0 : RF_EINVAL;
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* One JPEG member's bytes, as each pass sees them. */
typedef int (*member_fn)(void *ctx, uint64_t off, const uint8_t *data, uint64_t len, rf_err *err);

static int pread_all(int fd, uint8_t *p, uint64_t len, uint64_t off)
{
    while (len) {
        ssize_t n = pread(fd, p, (size_t)RF_MIN(len, (uint64_t)1 << 30), (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -errno : -ENODATA;
        p += n, len -= (uint64_t)n, off += (uint64_t)n;
    }
    return 0;
}

/* Every regular member whose bytes start as a JPEG does (FF D8 FF), read whole, to fn. */
static int each_jpeg(const char *shard, int fd, uint64_t size, member_fn fn, void *ctx,
                     rf_err *err)
{
    rf_tar_scanner sc;
    rf_tar_member *m = malloc(sizeof *m);
    uint8_t *buf = NULL;
    size_t cap = 0;
    int rc = m ? rf_tar_scanner_init(&sc, fd, shard, size, err)
               : rf_seterr(err, RF_ENOMEM, "no memory");
    if (rc) {
        free(m);
        return rc;
    }
    while ((rc = rf_tar_next(&sc, m, err)) == 1) {
        uint8_t sig[3];
        if (m->type != RF_TAR_FILE || m->size < 4 || m->size > RF_SYNC_MAX_MEMBER)
            continue;
        if ((rc = pread_all(fd, sig, 3, m->data_offset)) != 0 ||
            (sig[0] == 0xFF && sig[1] == 0xD8 && sig[2] == 0xFF &&
             (rc = rf_reserve(&buf, &cap, (size_t)m->size, 1) ? RF_ENOMEM : 0) == 0 &&
             (rc = pread_all(fd, buf, m->size, m->data_offset)) == 0 &&
             (rc = fn(ctx, m->data_offset, buf, m->size, err)) != 0)) {
            if (!err->code)
                rf_seterr(err, rc, "%s: offset %llu: %s", shard,
                          (unsigned long long)m->data_offset,
                          rc == RF_ENOMEM ? "out of memory" : strerror(-rc));
            break;
        }
        rc = 0;
    }
    rf_tar_scanner_free(&sc);
    free(m);
    free(buf);
    return rc;
}

/* Copy s to the caller's summary as far as its struct_size reaches (0: all of it). */
static void give_summary(rf_sync_summary *out, rf_sync_summary *s)
{
    if (!out)
        return;
    uint32_t n = RF_MIN(out->struct_size ? out->struct_size : (uint32_t)sizeof *out,
                        (uint32_t)sizeof *s);
    s->struct_size = n;
    memcpy(out, s, n);
}

static void count_status(rf_sync_summary *s, uint32_t status)
{
    s->jpegs++;
    s->indexed += status == RF_SYNC_POINTS;
    s->needs_none += status == RF_SYNC_NEEDS_NONE;
    s->unsupported += status == RF_SYNC_UNSUPPORTED;
    s->unreadable += status == RF_SYNC_UNREADABLE;
}

/* ---- writing --------------------------------------------------------------------------------- */

typedef struct write_job {
    rf_decoder *dec;
    rf_sync_builder b;
    const rf_sync_index *old; /* the index there before, or entries = 0 */
    rf_sync_summary sum;
} write_job;

static int write_member(void *ctx, uint64_t off, const uint8_t *data, uint64_t len, rf_err *err)
{
    write_job *w = ctx;
    rf_sync_entry e = {.off = off};
    if (rf_sync_find(w->old, off, &e)) {
        if (e.len == len && e.hash == rf_xxh64(data, (size_t)len)) {
            w->sum.reused++;
            count_status(&w->sum, e.status);
            return rf_sync_builder_add(&w->b, &e) ? RF_ENOMEM : 0;
        }
        w->sum.stale++;
        e = (rf_sync_entry){.off = off};
    }
    uint64_t t0 = now_ns();
    int rc = rf_decode_sync_entry(w->dec, data, (size_t)len, &e, err);
    w->sum.build_ns += now_ns() - t0;
    if (rc)
        return rc;
    count_status(&w->sum, e.status);
    return rf_sync_builder_add(&w->b, &e) ? RF_ENOMEM : 0;
}

int rf_shard_write_sync_index(const char *shard, const char *out_path, rf_sync_summary *summary,
                              char *err, size_t err_len)
{
    rf_err e = {0};
    char def[RF_PATH_BYTES_MAX], why[200];
    if (!shard)
        return rf_err_give(&(rf_err){.code = RF_EINVAL, .msg = "no shard path"}, err, err_len);
    if (rf_path_is_url(shard))
        return rf_err_give(&(rf_err){.code = RF_EINVAL, .msg = "a sync-point index is written "
                                     "beside a local shard; write it there and upload both"},
                           err, err_len);
    if (!out_path && rf_sync_path(shard, def, sizeof def))
        return rf_err_give(&(rf_err){.code = RF_EINVAL, .msg = "shard path too long"}, err,
                           err_len);
    out_path = out_path ? out_path : def;
    int fd;
    uint64_t size;
    int rc = rf_tar_open_shard(shard, &fd, &size, &e);
    if (rc)
        return rf_err_give(&e, err, err_len);
    write_job w = {.dec = rf_decoder_create(NULL)};
    rf_sync_index old = {0};
    /* an index there before that cannot be read is simply rebuilt */
    if (rf_sync_load_file(out_path, &old, why, sizeof why) != 0)
        old = (rf_sync_index){0};
    w.old = &old;
    rc = w.dec ? each_jpeg(shard, fd, size, write_member, &w, &e)
               : rf_seterr(&e, RF_ENOMEM, "no memory for a decoder");
    close(fd);
    if (rc == 0) {
        int wr = rf_sync_builder_write(&w.b, size, out_path);
        if (wr)
            rc = rf_seterr(&e, wr, "%s: cannot write: %s", out_path, strerror(-wr));
    }
    struct stat st;
    w.sum.shard_bytes = size;
    w.sum.index_bytes = rc == 0 && stat(out_path, &st) == 0 ? (uint64_t)st.st_size : 0;
    give_summary(summary, &w.sum);
    rf_sync_free(&old);
    rf_sync_builder_free(&w.b);
    rf_decoder_destroy(w.dec);
    return rc ? rf_err_give(&e, err, err_len) : 0;
}

/* ---- checking -------------------------------------------------------------------------------- */

typedef struct check_job {
    const rf_sync_index *ix;
    uint64_t matched;
    rf_sync_summary sum;
} check_job;

static int check_member(void *ctx, uint64_t off, const uint8_t *data, uint64_t len, rf_err *err)
{
    check_job *c = ctx;
    rf_sync_entry e;
    (void)err;
    if (!rf_sync_find(c->ix, off, &e)) {
        c->sum.jpegs++;
        c->sum.missing++;
    } else if (e.len != len || e.hash != rf_xxh64(data, (size_t)len)) {
        c->sum.jpegs++;
        c->sum.stale++;
        c->matched++;
    } else {
        count_status(&c->sum, e.status);
        c->matched++;
    }
    return 0;
}

int rf_shard_check_sync_index(const char *shard, const char *path, rf_sync_summary *summary,
                              char *err, size_t err_len)
{
    rf_err e = {0};
    char def[RF_PATH_BYTES_MAX], why[200];
    if (!shard || (!path && rf_sync_path(shard, def, sizeof def)))
        return rf_err_give(&(rf_err){.code = RF_EINVAL, .msg = "no shard path, or too long"}, err,
                           err_len);
    path = path ? path : def;
    rf_sync_index ix;
    int lr = rf_sync_load_file(path, &ix, why, sizeof why);
    if (lr == 1)
        return 1;
    if (lr) {
        rf_seterr(&e, RF_EINDEX, "%s: %s", path, why);
        return rf_err_give(&e, err, err_len);
    }
    int fd;
    uint64_t size;
    int rc = rf_tar_open_shard(shard, &fd, &size, &e);
    check_job c = {.ix = &ix};
    if (rc == 0) {
        rc = each_jpeg(shard, fd, size, check_member, &c, &e);
        close(fd);
    }
    c.sum.stale += ix.entries - c.matched; /* entries of members that are gone */
    c.sum.shard_bytes = size;
    c.sum.index_bytes = ix.len;
    give_summary(summary, &c.sum);
    rf_sync_free(&ix);
    return rc ? rf_err_give(&e, err, err_len) : 0;
}
