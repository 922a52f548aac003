/* tar_parse.c — strict tar header parsing: the sequential scanner and the in-memory span walker.
 *
 * DESIGN. One parser, parse_member(), turns the header blocks at an offset (GNU 'L'/'K'
 * records, pax 'x'/'g' headers, then the ustar header) into one rf_tar_member, through a tiny
 * reader interface serving both the scanner (pread through a read-ahead buffer, at create) and
 * rf_tar_locate (a span in memory, on decode threads): two parsers of the same bytes could
 * disagree; one cannot.
 *
 * Input is untrusted: numbers are parsed strictly, sizes and extension records are capped, and
 * every read is bounds-checked against the end of the file or span first, so a lying size can
 * only produce an error. The scanner skips data unread and allocates nothing after init.
 * Threads: a scanner belongs to one thread; rf_tar_locate and the helpers are reentrant. */
#include "loaders/tar_parse.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RA_MIN_BYTES 4096u

/* ---- numeric fields and the header check ---- */

static int is_term(uint8_t c) { return c == 0 || c == ' '; }

int rf_tar_parse_number(const uint8_t *f, size_t n, uint64_t *out)
{
    uint64_t v = 0;
    if (n == 0)
        return -1;
    if (f[0] & 0x80) {
        /* GNU base-256: big-endian two's complement; bit 6 of the first byte is the sign. A
         * negative size or id has no meaning here, so it is refused rather than wrapped. */
        if (f[0] & 0x40)
            return -1;
        v = f[0] & 0x3f;
        for (size_t i = 1; i < n; i++) {
            if (v > (UINT64_MAX >> 8))
                return -1;
            v = (v << 8) | f[i];
        }
        *out = v;
        return 0;
    }
    size_t i = 0;
    while (i < n && f[i] == ' ') /* some writers right-align with leading spaces */
        i++;
    for (; i < n && f[i] >= '0' && f[i] <= '7'; i++) {
        if (v > (UINT64_MAX >> 3))
            return -1;
        v = (v << 3) | (uint64_t)(f[i] - '0');
    }
    for (; i < n; i++) /* after the digits only terminators: "12 3" or "12x" is garbage */
        if (!is_term(f[i]))
            return -1;
    *out = v;
    return 0;
}

static int header_checksum_ok(const uint8_t *blk)
{
    uint64_t stored;
    /* The checksum is octal only; base-256 there would be nonsense. */
    if ((blk[148] & 0x80) || rf_tar_parse_number(blk + 148, 8, &stored) != 0)
        return 0;
    /* Historic tars summed signed chars; both sums are accepted. The signed sum is derived
     * from the unsigned one (each byte >= 0x80 counts 256 less), so the loop stays a plain
     * vectorizable byte sum: this runs once per member on every scan. */
    uint32_t usum = 0, high = 0;
    for (int i = 0; i < RF_TAR_BLOCK; i++) {
        usum += blk[i];
        high += blk[i] >> 7;
    }
    for (int i = 148; i < 156; i++) {
        usum -= blk[i];
        high -= blk[i] >> 7;
    }
    usum += 8 * ' ';
    int64_t ssum = (int64_t)usum - 256 * (int64_t)high;
    return stored == usum || (int64_t)stored == ssum;
}

int rf_tar_check_header(const uint8_t *blk, rf_err *err)
{
    static const struct {
        int off, len;
        const char *name;
    } fields[] = {{100, 8, "mode"}, {108, 8, "uid"}, {116, 8, "gid"}, {124, 12, "size"}};
    uint64_t v;
    if (!header_checksum_ok(blk))
        return rf_seterr(err, RF_EFORMAT, "bad header checksum");
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (rf_tar_parse_number(blk + fields[i].off, (size_t)fields[i].len, &v) != 0)
            return rf_seterr(err, RF_EFORMAT, "bad %s field", fields[i].name);
    if (v > RF_TAR_SIZE_MAX) /* v is the size, the last field checked */
        return rf_seterr(err, RF_EFORMAT, "member size %" PRIu64 " exceeds the limit %llu", v,
                         RF_TAR_SIZE_MAX);
    /* mtime: a pre-1970 file is legitimate (negative base-256), so only the syntax is checked. */
    if (!(blk[136] & 0x80) && rf_tar_parse_number(blk + 136, 12, &v) != 0)
        return rf_seterr(err, RF_EFORMAT, "bad mtime field");
    return 0;
}

/* ---- readers: a file through the scanner's buffer, or a span in memory ---- */

typedef struct reader {
    /* Returns a pointer to [off, off + len) or NULL: *rc = 0 when that range is past the end,
     * -errno on a read error. */
    const uint8_t *(*get)(void *ctx, uint64_t off, size_t len, int *rc);
    void *ctx;
    uint64_t end;
    uint32_t name_max; /* long names and pax paths; <= RF_TAR_NAME_MAX */
} reader;

static const uint8_t *scan_get(void *ctx, uint64_t off, size_t len, int *rc)
{
    rf_tar_scanner *s = ctx;
    *rc = 0;
    if (off >= s->buf_off && off - s->buf_off + len <= s->buf_len) {
        s->ra_hits++;
        return s->buf + (off - s->buf_off);
    }
    if (len > s->buf_cap || off > s->file_size || len > s->file_size - off)
        return NULL;
    /* Adapt the read-ahead: read more when the last read served a header per 4 KiB or better
     * (tiny members), less when under one per 16 KiB (the bytes after a header are data the
     * scan does not want), so large members cost about one small read each. */
    uint64_t served = (uint64_t)s->ra_hits + 1;
    if (s->buf_len && served * RA_MIN_BYTES >= s->buf_len)
        s->ra_bytes = RF_MIN(s->ra_bytes * 2, s->buf_cap); /* <= 4 KiB read per header */
    else if (served * 4 * RA_MIN_BYTES < s->buf_len)
        s->ra_bytes = RF_MAX(s->ra_bytes / 2, RA_MIN_BYTES); /* > 16 KiB read per header */
    s->ra_hits = 0;
    size_t want = RF_MAX(s->ra_bytes, len);
    if (want > s->file_size - off)
        want = (size_t)(s->file_size - off);
    size_t got = 0;
    s->buf_len = 0;
    int r = s->reader ? s->reader->read(s->reader->ctx, s->buf, want, off, &got)
                      : rf_pread_full(s->fd, s->buf, want, off, &got);
    if (r < 0) {
        *rc = r;
        return NULL;
    }
    s->buf_off = off;
    s->buf_len = got;
    return got >= len ? s->buf : NULL;
}

typedef struct span_ctx {
    const uint8_t *p;
    uint64_t len;
} span_ctx;

static const uint8_t *span_get(void *ctx, uint64_t off, size_t len, int *rc)
{
    const span_ctx *sp = ctx;
    *rc = 0;
    if (off > sp->len || len > sp->len - off)
        return NULL;
    return sp->p + off;
}

/* ---- the member parser ---- */

/* Where a parse failed: the reason (no path, no offset) and the offset of the header at fault. */
typedef struct perr {
    rf_err e;
    uint64_t at;
} perr;

static int fail(perr *pe, uint64_t at, int code, const char *what)
{
    pe->at = at;
    return rf_seterr(&pe->e, code, "%s", what);
}

/* The len bytes at off, or NULL with *rc and *pe set: a read error, or `what` (RF_EFORMAT,
 * reason truncated) when the input ends before them. */
static const uint8_t *get_or_fail(const reader *r, uint64_t off, size_t len, uint64_t at,
                                  const char *what, perr *pe, int *rc)
{
    const uint8_t *p = r->get(r->ctx, off, len, rc);
    if (!p) {
        if (*rc < 0) {
            pe->at = at;
            rf_seterr(&pe->e, *rc, "read error (%s)", strerror(-*rc));
        } else {
            *rc = rf_with_reason(&pe->e, RF_REASON_TRUNCATED, fail(pe, at, RF_EFORMAT, what));
        }
    }
    return p;
}

static int all_zero(const uint8_t *b)
{
    for (int i = 0; i < RF_TAR_BLOCK; i++)
        if (b[i])
            return 0;
    return 1;
}

/* A zero block at `off`: the end of the archive if followed by another zero block or by EOF. */
static int check_end(const reader *r, uint64_t off, perr *pe)
{
    uint64_t next = off + RF_TAR_BLOCK;
    if (next == r->end)
        return 0; /* one end block only: tolerated, nothing is lost */
    int rc;
    const uint8_t *b = get_or_fail(r, next, RF_TAR_BLOCK, off, "truncated end-of-archive block",
                                   pe, &rc);
    if (!b)
        return rc;
    if (!all_zero(b))
        return fail(pe, off, RF_EFORMAT, "lone zero block inside the archive");
    return 0;
}

/* Parse a pax extended header body. Records are "<len> key=value\n" where len counts the whole
 * record; anything else (len that does not land on a newline, missing '=', a NUL in a path, an
 * over-long path or a non-decimal size) is an error rather than a guess. */
static int parse_pax(const uint8_t *d, size_t n, uint32_t name_max, rf_tar_member *m,
                     int *have_name, uint64_t *size, int *have_size, const char **why)
{
    size_t pos = 0;
    while (pos < n) {
        size_t len = 0, i = pos;
        for (; i < n && i - pos < 7 && d[i] >= '0' && d[i] <= '9'; i++)
            len = len * 10 + (size_t)(d[i] - '0');
        if (i == pos || i >= n || d[i] != ' ')
            return *why = "bad pax record length", -1;
        if (len < (i - pos) + 4 || len > n - pos || d[pos + len - 1] != '\n')
            return *why = "pax record length does not match its record", -1;
        const uint8_t *key = d + i + 1, *end = d + pos + len - 1;
        const uint8_t *eq = memchr(key, '=', (size_t)(end - key));
        if (!eq || eq == key)
            return *why = "pax record without key=value", -1;
        size_t klen = (size_t)(eq - key), vlen = (size_t)(end - eq - 1);
        const uint8_t *val = eq + 1;
        if (klen == 4 && memcmp(key, "path", 4) == 0) {
            if (vlen == 0 || vlen > name_max || memchr(val, 0, vlen))
                return *why = "bad pax path (empty, too long or with NUL)", -1;
            memcpy(m->name, val, vlen);
            m->name[vlen] = 0;
            *have_name = 2;
        } else if (klen == 4 && memcmp(key, "size", 4) == 0) {
            uint64_t v = 0;
            if (vlen == 0 || vlen > 13)
                return *why = "bad pax size", -1;
            for (size_t k = 0; k < vlen; k++) {
                if (val[k] < '0' || val[k] > '9')
                    return *why = "bad pax size", -1;
                v = v * 10 + (uint64_t)(val[k] - '0');
            }
            if (v > RF_TAR_SIZE_MAX)
                return *why = "pax size exceeds the limit", -1;
            *size = v;
            *have_size = 1;
        } else if (klen > 11 && memcmp(key, "GNU.sparse.", 11) == 0) {
            return *why = "GNU sparse members are not supported", -1;
        }
        pos += len;
    }
    return 0;
}

static int member_type(uint8_t t, const char *name)
{
    switch (t) {
    case '0':
    case 0:
    case '7': {
        size_t n = strlen(name); /* pre-POSIX tars marked directories only by a trailing slash */
        return (n && name[n - 1] == '/') ? RF_TAR_DIR : RF_TAR_FILE;
    }
    case '5':
    case 'D':
        return RF_TAR_DIR;
    case '1':
        return RF_TAR_HARDLINK;
    case '2':
        return RF_TAR_SYMLINK;
    default:
        return RF_TAR_OTHER;
    }
}

/* Types whose size field does not describe data that follows (links, devices, fifos, dirs). */
static int has_no_data(uint8_t t) { return t >= '1' && t <= '6'; }

static void ustar_name(const uint8_t *b, char *out)
{
    size_t nlen = strnlen((const char *)b, 100), plen = 0;
    /* The prefix field only means a prefix under POSIX ustar magic; GNU reuses those bytes. */
    if (memcmp(b + 257, "ustar\0", 6) == 0)
        plen = strnlen((const char *)b + 345, 155);
    if (plen) {
        memcpy(out, b + 345, plen);
        out[plen++] = '/';
    }
    memcpy(out + plen, b, nlen);
    out[plen + nlen] = 0;
}

/* Read the body of an extension record (long name or pax header) into a pointer. */
static const uint8_t *ext_body(const reader *r, uint64_t data, uint64_t size, uint64_t at,
                               perr *pe, int *rc)
{
    return get_or_fail(r, data, (size_t)size, at, "truncated extended header", pe, rc);
}

/* Parse the member whose first header block is at `off`. Returns 1 (member in *m, *next = the
 * offset after its data and padding), 0 at the end of the archive (only when allow_end), or a
 * negative code with *pe set. */
static int parse_member(const reader *r, uint64_t off, int allow_end, rf_tar_member *m,
                        uint64_t *next, perr *pe)
{
    int have_name = 0, have_size = 0, rc;
    uint64_t pax_size = 0;
    m->header_offset = off;
    for (int rec = 0;; rec++) {
        if (rec > RF_TAR_EXT_RECORDS_MAX)
            return fail(pe, off, RF_EFORMAT, "too many extended header records");
        if (off >= r->end && rec == 0 && allow_end)
            return 0; /* clean EOF on a block boundary (or after the final member's data) */
        const uint8_t *b = get_or_fail(r, off, RF_TAR_BLOCK, off, "truncated header", pe, &rc);
        if (!b)
            return rc;
        if (all_zero(b)) {
            if (!allow_end || rec > 0)
                return fail(pe, off, RF_EFORMAT, "unexpected end-of-archive block");
            rc = check_end(r, off, pe);
            return rc < 0 ? rc : 0;
        }
        if (rf_tar_check_header(b, &pe->e) != 0) {
            pe->at = off;
            return RF_EFORMAT;
        }
        uint64_t size, data = off + RF_TAR_BLOCK;
        rf_tar_parse_number(b + 124, 12, &size); /* validated by rf_tar_check_header */
        uint8_t type = b[156];
        if (type == 'L' || type == 'K' || type == 'x' || type == 'g') {
            uint64_t cap = (type == 'L' || type == 'K') ? (uint64_t)r->name_max + 1 : RF_TAR_PAX_MAX;
            if (size > cap)
                return fail(pe, off, RF_EFORMAT, type == 'x' || type == 'g'
                                                     ? "pax header too large"
                                                     : "GNU long name too long");
            if (type == 'L' || type == 'x') {
                const uint8_t *d = ext_body(r, data, size, off, pe, &rc);
                if (!d)
                    return rc;
                if (type == 'L' && have_name < 2) {
                    size_t n = strnlen((const char *)d, (size_t)size);
                    if (n == 0 || n > r->name_max)
                        return fail(pe, off, RF_EFORMAT, "bad GNU long name");
                    memcpy(m->name, d, n);
                    m->name[n] = 0;
                    have_name = 1;
                } else if (type == 'x') {
                    const char *why = NULL;
                    if (parse_pax(d, (size_t)size, r->name_max, m, &have_name, &pax_size,
                                  &have_size, &why))
                        return fail(pe, off, RF_EFORMAT, why);
                }
            } else if (size > r->end - data) {
                return rf_with_reason(&pe->e, RF_REASON_TRUNCATED,
                                      fail(pe, off, RF_EFORMAT, "truncated extended header"));
            }
            off = data + rf_tar_round_block(size);
            continue;
        }
        if (type == 'S')
            return fail(pe, off, RF_EFORMAT, "GNU sparse members are not supported");
        if (!have_name) {
            if (b[0] == 0)
                return fail(pe, off, RF_EFORMAT, "empty member name");
            ustar_name(b, m->name);
        }
        if (have_size)
            size = pax_size;
        if (has_no_data(type))
            size = 0;
        m->type = member_type(type, m->name);
        m->data_offset = data;
        m->size = size;
        if (size > r->end - data) {
            pe->at = m->header_offset;
            return rf_with_reason(&pe->e, RF_REASON_TRUNCATED,
                                  rf_seterr(&pe->e, RF_EFORMAT, "truncated member %s (%" PRIu64
                                            " data bytes, %" PRIu64 " left)", m->name, size,
                                            r->end - data));
        }
        *next = data + rf_tar_round_block(size);
        return 1;
    }
}

/* ---- the scanner ---- */

int rf_tar_scanner_init(rf_tar_scanner *s, int fd, const char *path, uint64_t file_size,
                        rf_err *err)
{
    memset(s, 0, sizeof *s);
    s->fd = fd;
    s->path = path;
    s->file_size = file_size;
    s->buf_cap = RF_TAR_READAHEAD_MAX;
    s->ra_bytes = 4 * RA_MIN_BYTES;
    s->buf = malloc(s->buf_cap);
    if (!s->buf)
        return rf_seterr(err, RF_ENOMEM, "%s: no memory for the tar scanner", path);
    return 0;
}

void rf_tar_scanner_seek(rf_tar_scanner *s, uint64_t offset) { s->pos = offset; }

/* The first byte that is not zero in [from, file end), or the file size when there is none.
 * Reads through the scanner's buffer in chunks of its capacity. Returns 0, -errno, or 1 when
 * the file ended early (it shrank while being read). */
static int first_nonzero(rf_tar_scanner *s, uint64_t from, uint64_t *at)
{
    int rc = 0;
    for (uint64_t off = from; off < s->file_size;) {
        size_t n = (size_t)RF_MIN((uint64_t)s->buf_cap, s->file_size - off);
        const uint8_t *p = scan_get(s, off, n, &rc);
        if (!p) {
            *at = off;
            return rc < 0 ? rc : 1;
        }
        for (size_t i = 0; i < n; i++)
            if (p[i]) {
                *at = off + i;
                return 0;
            }
        off += n;
    }
    *at = s->file_size;
    return 0;
}

/* The archive ended at `end` (its first zero block, or EOF): everything after it must be zero.
 * Members there are invisible to every reader (tar, Python's tarfile, webdataset stop at the
 * marker), so they would be lost without a word: say where they are instead. */
static int check_after_end(rf_tar_scanner *s, uint64_t end, rf_err *err)
{
    uint64_t at = 0;
    int rc = first_nonzero(s, end, &at);
    if (rc < 0)
        return rf_seterr(err, rc, "%s: read error after the end-of-archive marker at offset %"
                         PRIu64 " (%s)", s->path, end, strerror(-rc));
    if (rc > 0)
        return rf_seterr(err, RF_EFORMAT, "%s: the file ended at offset %" PRIu64 " while the "
                         "bytes after its end-of-archive marker were read (%" PRIu64 " bytes at "
                         "open): did it change?", s->path, at, s->file_size);
    if (at == s->file_size)
        return 0;
    /* A member there (what cat of two archives gives) is named, to make the cause plain. */
    char what[256] = "";
    reader r = {scan_get, s, s->file_size, RF_TAR_NAME_MAX};
    rf_tar_member *m = at % RF_TAR_BLOCK == 0 ? malloc(sizeof *m) : NULL;
    perr pe;
    uint64_t next;
    if (m && parse_member(&r, at, 0, m, &next, &pe) == 1)
        snprintf(what, sizeof what, " (a tar header, member %.200s)", m->name);
    free(m);
    s->after_end = 1;
    s->pos = at;
    return rf_seterr(err, RF_EFORMAT, "%s: data after the end-of-archive marker at offset %"
                     PRIu64 ": non-zero bytes at offset %" PRIu64 "%s; readers stop at the "
                     "marker, so all that follows it would be lost. Two archives joined with "
                     "cat? Join them with tar --concatenate, or repack them", s->path, end, at,
                     what);
}

/* A compressed file's name and, after its NUL, the command that undoes it, when the input
 * starts with that format's magic: a .tar.gz read as a tar fails its first header's checksum,
 * which said nothing of the cause. */
static const char *compressed(const reader *r)
{
    static const struct { const char *magic, *what; size_t n; } kinds[] = {
        {"\x1f\x8b", "gzip-compressed (.tar.gz)\0gunzip", 2},
        {"\x28\xb5\x2f\xfd", "zstd-compressed (.tar.zst)\0unzstd", 4},
        {"BZh", "bzip2-compressed (.tar.bz2)\0bunzip2", 3},
        {"\xfd" "7zXZ\x00", "xz-compressed (.tar.xz)\0unxz", 6},
    };
    int rc;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        const uint8_t *p = r->end >= kinds[k].n ? r->get(r->ctx, 0, kinds[k].n, &rc) : NULL;
        if (p && memcmp(p, kinds[k].magic, kinds[k].n) == 0)
            return kinds[k].what;
    }
    return NULL;
}

int rf_tar_next(rf_tar_scanner *s, rf_tar_member *m, rf_err *err)
{
    uint32_t nm = s->name_max && s->name_max < RF_TAR_NAME_MAX ? s->name_max : RF_TAR_NAME_MAX;
    reader r = {scan_get, s, s->file_size, nm};
    perr pe = {{0}, 0};
    uint64_t next = 0;
    s->after_end = 0;
    int rc = parse_member(&r, s->pos, 1, m, &next, &pe);
    const char *packed = rc < 0 && s->pos == 0 ? compressed(&r) : NULL;
    if (packed)
        return rf_seterr(err, RF_EFORMAT, "%s: a %s file, not a tar archive: shards are read "
                         "uncompressed (decompress it, e.g. %s)", s->path, packed,
                         packed + strlen(packed) + 1);
    if (rc < 0)
        return rf_with_reason(err, pe.e.reason, rf_seterr(err, rc, "%s: %s at offset %" PRIu64,
                                                           s->path, pe.e.msg, pe.at));
    if (rc == 0 && (rc = check_after_end(s, s->pos, err)) != 0)
        return rc;
    s->pos = rc == 1 ? next : s->file_size;
    return rc;
}

int rf_tar_no_samples(uint64_t file_size, uint64_t nonregular, rf_err *err)
{
    if (file_size == 0)
        return rf_seterr(err, RF_EFORMAT, "no samples: the file is empty (0 bytes)");
    if (nonregular == 0)
        return rf_seterr(err, RF_EFORMAT, "no samples: an empty archive (%" PRIu64 " bytes, "
                         "all zero)", file_size);
    return rf_seterr(err, RF_EFORMAT, "no samples: the archive's %" PRIu64 " members are "
                     "all directories, links or other non-regular files", nonregular);
}

void rf_tar_scanner_free(rf_tar_scanner *s)
{
    free(s->buf);
    s->buf = NULL;
    s->buf_len = 0;
}

/* ---- WebDataset helpers ---- */

size_t rf_tar_split_key(const char *name, const char **ext)
{
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    const char *dot = strchr(base, '.');
    if (!dot) {
        *ext = name + strlen(name);
        return (size_t)(*ext - name);
    }
    *ext = dot + 1;
    return (size_t)(dot - name);
}

int rf_tar_key_ok(const char *key)
{
    const char *base = strrchr(key, '/');
    base = base ? base + 1 : key;
    if (!*base || strchr(base, '.'))
        return 0;
    for (const char *p = key; *p; p++)
        if (!rf_tar_name_byte_ok((unsigned char)*p))
            return 0;
    return 1;
}

uint32_t rf_tar_ext_rank(const char *ext, const char *exts)
{
    size_t n = strlen(ext);
    uint32_t rank = 1;
    for (const char *p = exts; *p; rank++) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        if (len == n && n > 0 && strncasecmp(p, ext, n) == 0)
            return rank;
        if (!c)
            break;
        p = c + 1;
    }
    return 0;
}

int rf_tar_ext_in(const char *ext, const char *exts) { return rf_tar_ext_rank(ext, exts) != 0; }

int rf_tar_exts_check(const char *exts, rf_err *err)
{
    uint32_t n = 0;
    for (const char *p = exts;; n++) {
        size_t len = strcspn(p, ",");
        if (n >= RF_TAR_IMAGE_EXTS_MAX)
            return rf_seterr(err, RF_EINVAL, "image_exts \"%s\" lists more than %d extensions",
                             exts, RF_TAR_IMAGE_EXTS_MAX);
        if (len == 0 || len > RF_TAR_EXT_BYTES_MAX)
            return rf_seterr(err, RF_EINVAL, "image_exts \"%s\": extension %u is %s", exts,
                             n + 1, len ? "over 15 bytes" : "empty");
        for (size_t i = 0; i < len; i++)
            if (!isalnum((unsigned char)p[i]))
                return rf_seterr(err, RF_EINVAL, "image_exts \"%s\": extension %u has a byte "
                                 "that is not a letter or digit", exts, n + 1);
        if (!p[len])
            return 0;
        p += len + 1;
    }
}

/* The member of each role: the image ranks earliest in image_exts (*img_rank, 0 for none; the
 * first on a tie), the label and each field the first member with their extension. A member
 * may fill several. */
static void locate_roles(const rf_tar_member *m, const char *ext, const char *image_exts,
                         const char *label_ext, const char *const *field_exts, uint32_t nfields,
                         uint32_t *img_rank, rf_tar_span_member *img, rf_tar_span_member *label,
                         rf_tar_span_member *fields)
{
    rf_tar_span_member at = {(uint32_t)m->data_offset, (uint32_t)m->size,
                             (uint32_t)m->header_offset};
    uint32_t rank = rf_tar_ext_rank(ext, image_exts);
    if (rank && (!*img_rank || rank < *img_rank)) {
        *img_rank = rank;
        *img = at;
    } else if (!label->off && strcmp(ext, label_ext) == 0)
        *label = at;
    for (uint32_t f = 0; f < nfields; f++)
        if (!fields[f].off && strcmp(ext, field_exts[f]) == 0)
            fields[f] = at;
}

int rf_tar_locate_fields(const uint8_t *span, size_t span_len, const char *key,
                         const char *image_exts, const char *label_ext,
                         const char *const *field_exts, uint32_t nfields,
                         rf_tar_span_member *img, rf_tar_span_member *label,
                         rf_tar_span_member *fields, rf_err *err)
{
    if (!image_exts)
        image_exts = RF_TAR_IMAGE_EXTS;
    if (!label_ext)
        label_ext = RF_TAR_LABEL_EXT;
    *img = *label = (rf_tar_span_member){0, 0, 0};
    for (uint32_t f = 0; f < nfields; f++)
        fields[f] = (rf_tar_span_member){0, 0, 0};
    if (span_len > UINT32_MAX)
        return rf_seterr(err, RF_ELIMIT, "span of %zu bytes exceeds 4 GiB", span_len);
    span_ctx sc = {span, span_len};
    reader r = {span_get, &sc, span_len, RF_TAR_NAME_MAX};
    size_t key_len = strlen(key);
    uint32_t img_rank = 0;
    rf_tar_member m; /* ~4 KiB on the decode thread's stack; no allocation per sample */
    uint64_t pos = 0;
    char seen[128] = ""; /* the members, named when none is an image */
    for (uint32_t k = 0; pos < span_len; k++) {
        perr pe = {{0}, 0};
        uint64_t next = 0;
        if (k >= RF_TAR_SAMPLE_MEMBERS_MAX)
            return rf_seterr(err, RF_EFORMAT, "more than %d members in one sample",
                             RF_TAR_SAMPLE_MEMBERS_MAX);
        int rc = parse_member(&r, pos, 0, &m, &next, &pe);
        if (rc < 0)
            return rf_with_reason(err, pe.e.reason,
                                  rf_seterr(err, rc, "%s at span offset %" PRIu64, pe.e.msg,
                                            pe.at));
        pos = next;
        if (m.type != RF_TAR_FILE)
            continue;
        const char *ext;
        size_t kl = rf_tar_split_key(m.name, &ext);
        if (kl != key_len || memcmp(m.name, key, kl) != 0)
            return rf_seterr(err, RF_EFORMAT,
                             "member %s at span offset %" PRIu64 " does not belong to sample %s",
                             m.name, m.header_offset, key);
        locate_roles(&m, ext, image_exts, label_ext, field_exts, nfields, &img_rank, img, label,
                     fields);
        size_t n = strlen(seen);
        if (n + 8 < sizeof seen)
            snprintf(seen + n, sizeof seen - n, "%s%.*s", n ? ", " : "",
                     (int)(sizeof seen - n - 8), m.name);
    }
    if (!img_rank)
        return rf_with_reason(err, RF_REASON_NO_IMAGE,
                              rf_seterr(err, RF_EFORMAT, "sample %s has no image member (%s); "
                                        "its members: %s", key, image_exts, seen));
    return 0;
}

int rf_tar_locate(const uint8_t *span, size_t span_len, const char *key, const char *image_exts,
                  const char *label_ext, uint32_t *data_off, uint32_t *data_len,
                  uint32_t *data_hdr, uint32_t *label_off, uint32_t *label_len,
                  uint32_t *label_hdr, rf_err *err)
{
    rf_tar_span_member img, lbl;
    int rc = rf_tar_locate_fields(span, span_len, key, image_exts, label_ext, NULL, 0, &img, &lbl,
                                  NULL, err);
    *label_off = lbl.off, *label_len = lbl.len, *label_hdr = lbl.hdr;
    if (rc == 0)
        *data_off = img.off, *data_len = img.len, *data_hdr = img.hdr;
    return rc;
}
