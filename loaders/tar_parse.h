/* tar_parse.h — strict parsing of tar headers (ustar, GNU long names, pax), the sequential
 * scanner, the walk of a sample's span and the WebDataset key rule, with their limits. The
 * lowest of the tar files: tar_index.h and tar.h build on it. Untrusted input: every field is
 * checked. */
#ifndef RF_TAR_PARSE_H
#define RF_TAR_PARSE_H

#include <stddef.h>
#include <stdint.h>

#include "base/common.h"

#define RF_TAR_BLOCK 512
#define RF_TAR_NAME_MAX 4096 /* limit on GNU/pax long names */

/* n rounded up to whole tar blocks: the space a header announcing n bytes gives them. */
static inline uint64_t rf_tar_round_block(uint64_t n)
{
    return (n + RF_TAR_BLOCK - 1) & ~(uint64_t)(RF_TAR_BLOCK - 1);
}

/* Links are told apart only so that an error can say why a sample lacks its image: none is
 * followed, like every member that is not RF_TAR_FILE. */
enum rf_tar_type {
    RF_TAR_FILE = 0,
    RF_TAR_DIR = 1,
    RF_TAR_OTHER = 2,
    RF_TAR_HARDLINK = 3,
    RF_TAR_SYMLINK = 4
};

/* One member as the scanner sees it (after any long-name/pax records that precede it). */
typedef struct rf_tar_member {
    char name[RF_TAR_NAME_MAX + 1];
    uint64_t header_offset;  /* offset of the first header block that belongs to this member */
    uint64_t data_offset;    /* offset of its data */
    uint64_t size;           /* data bytes */
    int type;                /* enum rf_tar_type */
} rf_tar_member;

/* Where the scanner's bytes come from when not a local file (a remote shard: remote_open.c).
 * read() fills buf with up to `want` bytes at `off`, *got fewer only where the object ends;
 * 0, or -errno with why() describing it (naming the URL, never a credential). Offsets only
 * increase (data is skipped forward), so a reader may stream one response. */
typedef struct rf_byte_reader {
    int (*read)(void *ctx, uint8_t *buf, size_t want, uint64_t off, size_t *got);
    const char *(*why)(void *ctx);
    void *ctx;
} rf_byte_reader;

/* Sequential scanner over a tar file at fd (or `reader` when set): reads headers, skips data
 * unread. Returns 1 with *m for each member, 0 at the end (two zero blocks, or clean EOF on a
 * block boundary), negative with err naming `path` and the byte offset (err->reason as
 * rf_tar_locate's). Anything but zeros after the end-of-archive marker (GNU tar pads its
 * records with zeros) is RF_EFORMAT, with `after_end` set and `pos` at the first such byte:
 * every reader stops at the marker and would drop two archives joined with cat silently. */
typedef struct rf_tar_scanner {
    int fd;
    const char *path;
    uint64_t file_size;
    uint64_t pos;
    uint8_t *buf;            /* read-ahead buffer for headers */
    size_t buf_cap;
    uint64_t buf_off;
    size_t buf_len;
    size_t ra_bytes;         /* current read-ahead: grows while one read serves several
                                headers (small members), shrinks when it serves one */
    uint32_t ra_hits;        /* lookups served by the current buffer after its read */
    uint32_t name_max;       /* limit on GNU long names and pax paths; 0 or over RF_TAR_NAME_MAX:
                                RF_TAR_NAME_MAX */
    int after_end;           /* the last error was data after the end-of-archive marker */
    const rf_byte_reader *reader; /* NULL: pread on fd; else reads go here (set after init) */
} rf_tar_scanner;

int rf_tar_scanner_init(rf_tar_scanner *s, int fd, const char *path, uint64_t file_size,
                        rf_err *err);
int rf_tar_next(rf_tar_scanner *s, rf_tar_member *m, rf_err *err);
void rf_tar_scanner_free(rf_tar_scanner *s);

/* Validate one header block: checksum (signed or unsigned sum), octal or base-256 numbers.
 * 0 or RF_EFORMAT with a reason (no path/offset). */
int rf_tar_check_header(const uint8_t *blk, rf_err *err);

/* 1 when byte c may be part of a member name the tools write and index: not whitespace, a
 * control byte or DEL (the index is space- and line-separated). */
static inline int rf_tar_name_byte_ok(unsigned char c)
{
    return c > ' ' && c != 0x7f;
}

/* 1 when key can be a WebDataset sample key: bytes rf_tar_name_byte_ok accepts, a basename
 * neither empty nor holding a dot (the key ends at the basename's first dot). */
int rf_tar_key_ok(const char *key);

/* Split a member name into key (path up to the first dot of its basename) and extension (after
 * that dot). Returns key length; *ext points into name ("" when no dot). */
size_t rf_tar_split_key(const char *name, const char **ext);

/* Locate the payload and label of a WebDataset sample inside its span (first member's header to
 * the end of the last member's data, read by one request), validating every header (checksum,
 * sizes, each member's key equal to `key`), so a shard changed after indexing is caught here.
 * The payload is the member whose extension ranks first in image_exts (ASCII
 * case-insensitive; NULL: RF_TAR_IMAGE_EXTS), the first on a tie; the label the first member
 * with extension label_ext (NULL: RF_TAR_LABEL_EXT), compared exactly: its data and first
 * header block, relative to the span. *label_off 0 means no label member (a member's data
 * never starts at 0), which tells it from an empty one; rf_check_label judges its text.
 * Errors: RF_EFORMAT or RF_ELIMIT naming the member and its offset in the span (the caller adds
 * path and file offset), err->reason RF_REASON_TRUNCATED when the span ends before something
 * it announces. */
int rf_tar_locate(const uint8_t *span, size_t span_len, const char *key, const char *image_exts,
                  const char *label_ext, uint32_t *data_off, uint32_t *data_len,
                  uint32_t *data_hdr, uint32_t *label_off, uint32_t *label_len,
                  uint32_t *label_hdr, rf_err *err);

/* A member rf_tar_locate_fields found: data (off, len) and first header block (hdr), relative
 * to the span; off 0: none found. */
typedef struct rf_tar_span_member {
    uint32_t off, len, hdr;
} rf_tar_span_member;

/* rf_tar_locate's walk, which also finds for each of `nfields` extensions in field_exts the
 * first member whose extension equals it exactly (case-sensitive, as WebDataset matches):
 * fields[f]. A member may fill several roles. Image and label go to *img and *label as
 * rf_tar_locate chooses them. */
int rf_tar_locate_fields(const uint8_t *span, size_t span_len, const char *key,
                         const char *image_exts, const char *label_ext,
                         const char *const *field_exts, uint32_t nfields,
                         rf_tar_span_member *img, rf_tar_span_member *label,
                         rf_tar_span_member *fields, rf_err *err);

/* ---- limits and helpers of the parser ---- */

#define RF_TAR_SIZE_MAX (1ull << 40)     /* largest member size accepted (1 TiB) */
#define RF_TAR_PAX_MAX (64u * 1024u)     /* largest pax extended header ('x' or 'g') */
#define RF_TAR_EXT_RECORDS_MAX 8         /* long-name/pax records allowed before one member */
#define RF_TAR_SAMPLE_MEMBERS_MAX 4096   /* members in one WebDataset sample */
#define RF_TAR_LABEL_BYTES_MAX 1024u     /* a .cls member larger than this is not a label */
#define RF_TAR_IMAGE_EXTS "jpg,jpeg,png,webp" /* image extensions, most preferred first */
#define RF_TAR_IMAGE_EXTS_MAX 8          /* extensions in an image_exts list */
#define RF_TAR_EXT_BYTES_MAX 15          /* bytes of one extension in that list */
#define RF_TAR_LABEL_EXT "cls"          /* RF_LABEL_CLS's label member (rf_label_ext) */
#define RF_TAR_JSON_LABEL_BYTES_MAX (64u * 1024u) /* a larger RF_LABEL_JSON member is refused */
#define RF_TAR_READAHEAD_MAX (256u * 1024u) /* scanner buffer; >= RF_TAR_PAX_MAX + a block */

/* Position the scanner at `offset` (a header block boundary) for the next rf_tar_next(). */
void rf_tar_scanner_seek(rf_tar_scanner *s, uint64_t offset);

/* Parse one numeric header field (octal, NUL/space terminated, or GNU base-256). Returns 0 and
 * *out, or -1 for garbage, a negative base-256 value or overflow. */
int rf_tar_parse_number(const uint8_t *field, size_t len, uint64_t *out);

/* 1 when ext (a member extension) is in the comma-separated list `exts` (ASCII case-insensitive). */
int rf_tar_ext_in(const char *ext, const char *exts);
/* Its position in that list, from 1 (the most preferred); 0 when it is not there. */
uint32_t rf_tar_ext_rank(const char *ext, const char *exts);
/* 0 when exts is a valid image_exts list: 1..RF_TAR_IMAGE_EXTS_MAX comma-separated extensions
 * of 1..RF_TAR_EXT_BYTES_MAX letters or digits; else RF_EINVAL saying what is wrong. */
int rf_tar_exts_check(const char *exts, rf_err *err);

/* The error for a shard of `file_size` bytes holding no sample (`nonregular` non-regular
 * members, no regular one): RF_EFORMAT saying what it holds, without the path. Shared by the
 * loader and inspection so both refuse the same shards with the same words. */
int rf_tar_no_samples(uint64_t file_size, uint64_t nonregular, rf_err *err);

#endif
