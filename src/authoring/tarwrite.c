/* tarwrite.c — the library's one tar writer (tarwrite.h).
 *
 * DESIGN: one writer per shard, used by one thread. Headers and data go through our own 1 MiB
 * buffer; larger members bypass it, so a shard costs one syscall per MiB. Output is a pure
 * function of the calls made: header fields that could vary between runs (mtime, owner, mode)
 * are fixed. The index text (loaders/tar_index.c builds it) is kept in memory and written at
 * close, when every offset is known. The first write error is sticky.
 *
 * Atomicity: a shard cut at a failed write can look like a shorter valid one, so a reader must
 * never see a half-written shard under its name: shard and index are written to hidden
 * temporaries created at open (a bad index folder fails before any data is written) and put in
 * place at close (rf_tarw_close says how), so after a crash a name holds its old file or a
 * complete new one. */
#include "authoring/tarwrite.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loaders/tar.h"
#include "loaders/tar_index.h"

#define TARW_BUF_BYTES (1u << 20)
#define TARW_OCTAL11_MAX 077777777777ull /* largest size an 11-digit octal field holds */
#define TARW_MTIME 1577836800u        /* 2020-01-01T00:00:00Z: fixed, for reproducible shards */
#define TARW_TEMP_TRIES 1000          /* temporary names tried before giving up (EEXIST) */
#define TARW_TEMP_BASE_MAX 200        /* bytes of the final base name kept in the temporary's */

/* An errno's name (ENOSPC), given after its text in messages: the text says what went wrong,
 * the name is what one searches for. */
static const char *ename(int neg_errno)
{
    const char *n = strerrorname_np(-neg_errno);
    return n ? n : "unknown errno";
}

/* One output file: its final name and the temporary that becomes it at close. */
typedef struct tarw_file {
    int fd;              /* -1 once closed */
    char *path, *tmp;    /* tmp is NULL once renamed to path (or never made) */
    int published;       /* renamed into place by this writer */
    uint64_t written;    /* bytes that reached the file: where a failed write stopped */
} tarw_file;

struct rf_tarw {
    tarw_file tar, index; /* index.path is NULL without an index */
    int format;
    int err;             /* first error (negative errno), sticky */
    uint64_t offset;     /* logical bytes written (buffered included) */
    uint8_t *buf;
    size_t buf_len;
    rf_tar_index_text idx; /* the index as it grows (loaders/tar_index.c writes the format) */
    uint64_t samples;    /* samples with at least one member */
    int sample_open;     /* members of the current sample have been written to idx */
    int sample_started;  /* rf_tarw_begin_sample was called and no member followed yet */
};

/* Write all of p to f, counting what reached it so that an error can name the offset. */
static int write_all(tarw_file *f, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t r = write(f->fd, p, n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (r == 0)
            return -EIO;
        p += r;
        n -= (size_t)r;
        f->written += (uint64_t)r;
    }
    return 0;
}

static int flush_buf(rf_tarw *w)
{
    if (w->buf_len == 0)
        return 0;
    int rc = write_all(&w->tar, w->buf, w->buf_len);
    w->buf_len = 0;
    return rc;
}

/* Append bytes to the shard through the buffer (large runs go straight to the file). */
static int put(rf_tarw *w, const void *data, size_t n)
{
    if (w->err)
        return w->err;
    if (n > TARW_BUF_BYTES - w->buf_len) {
        int rc = flush_buf(w);
        if (rc == 0 && n >= TARW_BUF_BYTES)
            rc = write_all(&w->tar, data, n);
        else if (rc == 0) {
            memcpy(w->buf, data, n);
            w->buf_len = n;
        }
        if (rc) {
            w->err = rc;
            return rc;
        }
    } else {
        memcpy(w->buf + w->buf_len, data, n);
        w->buf_len += n;
    }
    w->offset += n;
    return 0;
}

static int put_zeros(rf_tarw *w, size_t n)
{
    static const uint8_t zeros[RF_TAR_BLOCK];
    while (n > 0) {
        size_t k = n < sizeof zeros ? n : sizeof zeros;
        int rc = put(w, zeros, k);
        if (rc)
            return rc;
        n -= k;
    }
    return 0;
}

static int pad_block(rf_tarw *w, uint64_t len)
{
    return put_zeros(w, (size_t)(rf_tar_round_block(len) - len));
}

/* Octal, zero-padded to width-1 digits, NUL-terminated (the ustar convention). */
static void octal(char *field, size_t width, uint64_t v)
{
    field[width - 1] = '\0';
    for (size_t i = width - 1; i-- > 0;) {
        field[i] = (char)('0' + (v & 7));
        v >>= 3;
    }
}

static void checksum(uint8_t *h)
{
    unsigned sum = 0;
    memset(h + 148, ' ', 8);
    for (int i = 0; i < RF_TAR_BLOCK; i++)
        sum += h[i];
    octal((char *)h + 148, 7, sum); /* six digits, NUL, then the space left in place */
}

/* Build one header block. `name` is cut to 100 bytes: callers emit a long-name record first
 * when it does not fit. Sizes beyond 11 octal digits use the base-256 encoding, which GNU tar
 * and Python read; for pax archives a pax `size` record carries them too. */
static void header(uint8_t *h, const char *name, uint64_t size, char type, int gnu)
{
    memset(h, 0, RF_TAR_BLOCK);
    size_t nl = strlen(name);
    memcpy(h, name, nl < 100 ? nl : 100);
    octal((char *)h + 100, 8, 0644);
    octal((char *)h + 108, 8, 0);
    octal((char *)h + 116, 8, 0);
    if (size <= TARW_OCTAL11_MAX) {
        octal((char *)h + 124, 12, size);
    } else {
        h[124] = 0x80;
        for (int i = 11; i >= 4; i--, size >>= 8)
            h[124 + i] = (uint8_t)size;
    }
    octal((char *)h + 136, 12, TARW_MTIME);
    h[156] = (uint8_t)type;
    if (gnu) {
        memcpy(h + 257, "ustar  ", 8); /* GNU magic "ustar " + version " \0" */
    } else {
        memcpy(h + 257, "ustar", 6);
        memcpy(h + 263, "00", 2);
    }
    memcpy(h + 265, "ringfeed", 8);
    memcpy(h + 297, "ringfeed", 8);
    checksum(h);
}

/* A pax record "LEN key=value\n", where LEN counts the whole record including its own digits. */
static size_t pax_record(char *out, size_t cap, const char *key, const char *value)
{
    size_t body = 1 + strlen(key) + 1 + strlen(value) + 1; /* " key=value\n" */
    size_t len = body + 1;
    for (;;) {
        char digits[24];
        size_t d = (size_t)snprintf(digits, sizeof digits, "%zu", len);
        if (d + body == len)
            break;
        len = d + body;
    }
    if (len < cap)
        snprintf(out, cap, "%zu %s=%s\n", len, key, value);
    return len;
}

static int write_long_name(rf_tarw *w, const char *name, uint64_t size)
{
    uint8_t h[RF_TAR_BLOCK];
    size_t nl = strlen(name);
    if (w->format == RF_TARW_GNU) {
        header(h, "././@LongLink", nl + 1, 'L', 1);
        int rc = put(w, h, sizeof h);
        if (rc == 0)
            rc = put(w, name, nl + 1);
        return rc ? rc : pad_block(w, nl + 1);
    }
    char rec[RF_TAR_NAME_MAX + 128];
    size_t len = 0;
    if (nl > 100)
        len += pax_record(rec, sizeof rec, "path", name);
    if (size > TARW_OCTAL11_MAX) {
        char v[24];
        snprintf(v, sizeof v, "%llu", (unsigned long long)size);
        len += pax_record(rec + len, sizeof rec - len, "size", v);
    }
    /* The pax header's own name is informational; keep it short and stable. */
    char pname[101];
    const char *base = strrchr(name, '/');
    snprintf(pname, sizeof pname, "PaxHeaders/%.88s", base ? base + 1 : name);
    header(h, pname, len, 'x', 0);
    int rc = put(w, h, sizeof h);
    if (rc == 0)
        rc = put(w, rec, len);
    return rc ? rc : pad_block(w, len);
}

/* The folder of path ("." when it has none), malloc'ed. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup(".");
    return strndup(path, slash == path ? 1 : (size_t)(slash - path));
}

/* Create f->tmp beside f->path as ".BASE.tmp-PID-N": in the same folder because rename(2) is
 * atomic only within one file system, with a leading dot so that globs such as train-*.tar
 * never match it, and with O_EXCL so that another writer's temporary or a crashed run's
 * leftover is never reused. The mode is what the shard always got: 0644 less the umask. */
static int temp_open(tarw_file *f)
{
    const char *slash = strrchr(f->path, '/');
    const char *base = slash ? slash + 1 : f->path;
    int dirlen = slash ? (int)(slash - f->path + 1) : 0;
    size_t cap = strlen(f->path) + 64;
    if (!*base)
        return -EISDIR;
    if (!(f->tmp = malloc(cap)))
        return -ENOMEM;
    for (int i = 0; i < TARW_TEMP_TRIES; i++) {
        snprintf(f->tmp, cap, "%.*s.%.*s.tmp-%ld-%d", dirlen, f->path, TARW_TEMP_BASE_MAX, base,
                 (long)getpid(), i);
        f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (f->fd >= 0)
            return 0;
        if (errno != EEXIST)
            break;
    }
    int rc = -errno;
    free(f->tmp);
    f->tmp = NULL;
    return rc;
}

/* fsync and close f: the data must be on disk before the name points at it, or a crash after
 * the rename could leave the shard's name on an empty or partial file. */
static int seal(tarw_file *f, rf_err *e)
{
    int rc = fsync(f->fd) != 0 ? -errno : 0;
    if (close(f->fd) != 0 && rc == 0)
        rc = -errno;
    f->fd = -1;
    return rc ? rf_seterr(e, rc, "%s: fsync failed: %s (%s)", f->path, strerror(-rc), ename(rc))
              : 0;
}

/* fsync the folder of path so that a rename into it survives a crash. A file system that
 * cannot sync a folder says EINVAL; its renames are as durable as it makes them. */
static int sync_dir(const char *path, rf_err *e)
{
    char *dir = dir_of(path);
    if (!dir)
        return rf_seterr(e, -ENOMEM, "%s: no memory", path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = fd < 0 ? -errno : (fsync(fd) != 0 && errno != EINVAL) ? -errno : 0;
    if (fd >= 0)
        close(fd);
    if (rc)
        rf_seterr(e, rc, "%s: fsync of its folder %s failed: %s (%s)", path, dir, strerror(-rc),
                  ename(rc));
    free(dir);
    return rc;
}

/* Rename f's sealed temporary to its final name. */
static int publish(tarw_file *f, rf_err *e)
{
    if (rename(f->tmp, f->path) != 0) {
        int rc = -errno;
        return rf_seterr(e, rc, "%s: cannot rename %s into place: %s (%s)", f->path, f->tmp,
                         strerror(-rc), ename(rc));
    }
    free(f->tmp);
    f->tmp = NULL;
    f->published = 1;
    return sync_dir(f->path, e);
}

/* Remove every trace of f: its temporary, or the file this writer already renamed into place
 * (the index, when the shard's own rename then failed). */
static void discard(tarw_file *f)
{
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
    if (f->tmp)
        unlink(f->tmp);
    else if (f->published)
        unlink(f->path);
}

static void free_writer(rf_tarw *w)
{
    free(w->buf);
    rf_tar_index_text_free(&w->idx);
    free(w->tar.path);
    free(w->tar.tmp);
    free(w->index.path);
    free(w->index.tmp);
    free(w);
}

void rf_tarw_abort(rf_tarw *w)
{
    if (!w)
        return;
    discard(&w->index);
    discard(&w->tar);
    free_writer(w);
}

rf_tarw *rf_tarw_open(const char *path, const char *index_path, int format, rf_err *e)
{
    rf_tarw *w = calloc(1, sizeof *w);
    if (!w) {
        rf_seterr(e, -ENOMEM, "%s: no memory for a tar writer", path);
        return NULL;
    }
    w->format = format;
    w->tar.fd = w->index.fd = -1;
    w->buf = malloc(TARW_BUF_BYTES);
    w->tar.path = strdup(path);
    w->index.path = index_path ? strdup(index_path) : NULL;
    int rc = 0;
    if (!w->buf || !w->tar.path || (index_path && !w->index.path))
        rc = rf_seterr(e, -ENOMEM, "%s: no memory for a tar writer", path);
    if (rc == 0 && (rc = temp_open(&w->tar)) != 0)
        rf_seterr(e, rc, "%s: cannot create a temporary file beside it: %s (%s)", path,
                  strerror(-rc), ename(rc));
    if (rc == 0 && index_path && (rc = temp_open(&w->index)) != 0)
        rf_seterr(e, rc, "%s: cannot create a temporary file beside it: %s (%s)", index_path,
                  strerror(-rc), ename(rc));
    if (rc) {
        rf_tarw_abort(w);
        return NULL;
    }
    return w;
}

int rf_tarw_begin_sample(rf_tarw *w)
{
    if (w->err)
        return w->err;
    w->sample_open = 0;
    w->sample_started = 1;
    return 0;
}

int rf_tarw_add(rf_tarw *w, const char *name, const void *data, size_t len)
{
    if (w->err)
        return w->err;
    size_t nl = strlen(name);
    if (nl == 0 || nl > RF_TAR_NAME_MAX)
        return -ENAMETOOLONG;
    /* The index is space- and line-separated: names that would break it are refused. */
    for (size_t i = 0; i < nl; i++)
        if (!rf_tar_name_byte_ok((unsigned char)name[i]))
            return -EINVAL;
    if (!w->sample_open && !w->sample_started) {
        /* Members before any begin_sample form a sample of their own. */
        w->sample_started = 1;
    }
    uint64_t hdr_off = w->offset;
    int rc = 0;
    if (nl > 100 || (len > TARW_OCTAL11_MAX && w->format != RF_TARW_GNU))
        rc = write_long_name(w, name, len);
    uint8_t h[RF_TAR_BLOCK];
    header(h, name, len, '0', w->format == RF_TARW_GNU);
    if (rc == 0)
        rc = put(w, h, sizeof h);
    if (rc == 0 && len)
        rc = put(w, data, len);
    if (rc == 0)
        rc = pad_block(w, len);
    if (rc)
        return w->err = rc;
    if (w->index.path) {
        rc = rf_tar_index_add(&w->idx, name, hdr_off, len, !w->sample_open);
        if (rc)
            return w->err = rc;
    }
    if (!w->sample_open)
        w->samples++;
    w->sample_open = 1;
    w->sample_started = 0;
    return 0;
}

uint64_t rf_tarw_bytes(const rf_tarw *w)
{
    return w->offset;
}

uint64_t rf_tarw_samples(const rf_tarw *w)
{
    return w->samples;
}

static int write_index(rf_tarw *w, rf_err *e)
{
    tarw_file *f = &w->index;
    int rc = rf_tar_index_finish(&w->idx);
    if (rc == 0)
        rc = write_all(f, (const uint8_t *)w->idx.p, w->idx.len);
    if (rc)
        return rf_seterr(e, rc, "%s: write failed at byte offset %" PRIu64 ": %s (%s)", f->path,
                         f->written, strerror(-rc), ename(rc));
    return seal(f, e);
}

/* End the archive and put both files in place: the index first, so that the shard never
 * appears beside a stale index left by an earlier run under the same name. */
static int finish(rf_tarw *w, rf_err *e)
{
    int rc = put_zeros(w, 2 * RF_TAR_BLOCK);
    if (rc == 0)
        rc = flush_buf(w);
    if (rc)
        return rf_seterr(e, rc, "%s: write failed at byte offset %" PRIu64 ": %s (%s)",
                         w->tar.path, w->tar.written, strerror(-rc), ename(rc));
    rc = seal(&w->tar, e);
    if (rc == 0 && w->index.path)
        rc = write_index(w, e);
    if (rc == 0 && w->index.path)
        rc = publish(&w->index, e);
    return rc ? rc : publish(&w->tar, e);
}

int rf_tarw_close(rf_tarw *w, rf_err *e)
{
    if (!w)
        return 0;
    int rc = finish(w, e);
    if (rc && e) {
        size_t n = strlen(e->msg);
        snprintf(e->msg + n, sizeof e->msg - n, " (the unfinished %s removed)",
                 w->index.path ? "shard and its index were" : "shard was");
    }
    if (rc) {
        discard(&w->index);
        discard(&w->tar);
    }
    free_writer(w);
    return rc;
}
