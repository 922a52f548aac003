/* tar_parse.h — strict parsing of tar headers (ustar, GNU long names, pax), the sequential
 * scanner, the walk of a sample's span and the WebDataset key rule (loaders/tar_parse.c); the
 * limits on all of it. The lowest of the tar files: the index (tar_index.h) and the grouping
 * of members into samples (tar.h) build on it. Untrusted input: every field is checked, with
 * limits. */
#ifndef RF_TAR_PARSE_H
#define RF_TAR_PARSE_H

#include <stddef.h>
#include <stdint.h>

#include "base/common.h"

#define RF_TAR_BLOCK 512
#define RF_TAR_NAME_MAX 4096 /* limit on GNU/pax long names */

/* n rounded up to a whole number of tar blocks: the space a header announcing n bytes of data
 * (or a long-name record of n bytes) gives them, and so the step from one header to the next. */
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

/* Where the scanner's bytes come from when they are not a local file: a remote shard
 * (src/io/remote_open.c implements it over HTTP). read() fills buf with up to `want` bytes
 * at `off` and sets *got (fewer only where the object ends); it returns 0, or a negative
 * -errno with why() describing the failure (naming the URL, never a credential). The scanner
 * asks for increasing offsets (it skips data forward), so a reader may stream one response. */
typedef struct rf_byte_reader {
    int (*read)(void *ctx, uint8_t *buf, size_t want, uint64_t off, size_t *got);
    const char *(*why)(void *ctx);
    void *ctx;
} rf_byte_reader;

/* Sequential scanner over a tar file open at fd (or read through `reader` when set). Reads headers with pread and skips data
 * without reading it. Returns 1 and fills *m for each member, 0 at the end of the archive
 * (two zero blocks, or clean EOF on a block boundary), negative on error with err->msg naming
 * `path` and the byte offset, and err->reason as rf_tar_locate gives it. At the end it also reads what follows the end-of-archive marker:
 * anything but zero bytes there (GNU tar pads with zeros to its 10240-byte records) is
 * RF_EFORMAT, because every reader stops at the marker and would drop it without a word (two
 * archives joined with cat); then `after_end` is set and `pos` is the first such byte. */
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
    uint32_t name_max;       /* limit on GNU long names and pax paths (bytes); 0 or more than
                                RF_TAR_NAME_MAX means RF_TAR_NAME_MAX */
    int after_end;           /* the last error was data after the end-of-archive marker */
    const rf_byte_reader *reader; /* NULL: pread on fd; else reads go here (set after init) */
} rf_tar_scanner;

int rf_tar_scanner_init(rf_tar_scanner *s, int fd, const char *path, uint64_t file_size,
                        rf_err *err);
int rf_tar_next(rf_tar_scanner *s, rf_tar_member *m, rf_err *err);
void rf_tar_scanner_free(rf_tar_scanner *s);

/* Validate one 512-byte header block: checksum (signed and unsigned sums accepted), octal or
 * base-256 numeric fields. Returns 0 or RF_EFORMAT with a reason (no path/offset). */
int rf_tar_check_header(const uint8_t *blk, rf_err *err);

/* 1 when byte c may be part of a member name the tools write and index: not whitespace, a
 * control byte or DEL (the index is space- and line-separated). */
static inline int rf_tar_name_byte_ok(unsigned char c)
{
    return c > ' ' && c != 0x7f;
}

/* 1 when key can be a WebDataset sample key: names bytes rf_tar_name_byte_ok accepts, and a
 * basename that is not empty and holds no dot (the key ends at the first dot of the basename,
 * rf_tar_split_key). The shard writer refuses other keys; the image list makes its keys so. */
int rf_tar_key_ok(const char *key);

/* Split a member name into key (path up to the first dot of its basename) and extension (after
 * that dot). Returns key length; *ext points into name ("" when no dot). */
size_t rf_tar_split_key(const char *name, const char **ext);

/* Locate the payload and label of a WebDataset sample inside its span: the bytes from the
 * first member's header to the end of the last member's data, as read by one request. Walks
 * the member headers inside the span (validating each: checksum, sizes, that every member's key
 * equals `key`), so a shard changed after indexing is caught here. The payload is the member
 * whose extension comes first in image_exts (comma-separated, most preferred first, ASCII
 * case-insensitive; NULL: RF_TAR_IMAGE_EXTS), the first such member on a tie; the label the
 * first member with extension label_ext (the config's rf_label_ext; NULL = RF_TAR_LABEL_EXT,
 * "cls"), compared exactly: its data (*label_off, *label_len)
 * and first header block (*label_hdr), all relative to the span. Without a label member
 * *label_off is 0 (a member's data never starts at 0: its header is there), which tells it
 * from an empty one. The label's text is not looked at here: rf_check_label judges it.
 * On error returns RF_EFORMAT (or RF_ELIMIT) with err->msg naming the member and its offset
 * relative to the span (the caller adds shard path and the span's file offset), and
 * err->reason RF_REASON_TRUNCATED when the span ends before a header, an extended header or a
 * member's data that it announces (RF_REASON_NONE for every other error). */
int rf_tar_locate(const uint8_t *span, size_t span_len, const char *key, const char *image_exts,
                  const char *label_ext, uint32_t *data_off, uint32_t *data_len,
                  uint32_t *data_hdr, uint32_t *label_off, uint32_t *label_len,
                  uint32_t *label_hdr, rf_err *err);

/* One member that rf_tar_locate_fields found in a span: its data (off, len) and first header
 * block (hdr), relative to the span. off 0 means none was found (a member's data never starts
 * at 0: its header is there), which tells a missing member from an empty one. */
typedef struct rf_tar_span_member {
    uint32_t off, len, hdr;
} rf_tar_span_member;

/* rf_tar_locate's walk (the same checks and errors), which also finds, for each of `nfields`
 * extensions in field_exts, the first member whose extension equals it exactly (bytes after
 * the first dot of the basename, case-sensitive, as WebDataset matches them): fields[f]. A
 * member can fill several roles: a field "cls" (or the label_ext in use, e.g. "json") or
 * "jpg" gets the label's or image's bytes. The image (chosen by image_exts' ranks, as
 * rf_tar_locate does) and label (extension label_ext; NULL =
 * RF_TAR_LABEL_EXT) go to *img and *label. rf_tar_locate is this with no fields. */
int rf_tar_locate_fields(const uint8_t *span, size_t span_len, const char *key,
                         const char *image_exts, const char *label_ext,
                         const char *const *field_exts, uint32_t nfields,
                         rf_tar_span_member *img, rf_tar_span_member *label,
                         rf_tar_span_member *fields, rf_err *err);

/* ---- limits and helpers of the parser -------------------------------------------------- */

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

/* Position the scanner at `offset` (a header block boundary, e.g. from an index) so that the
 * next rf_tar_next() parses the member whose first header block is there. */
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

/* The error for a shard that holds no sample, one of `file_size` bytes whose scan found
 * `nonregular` members and no regular one: RF_EFORMAT, err->msg saying what the file holds,
 * without the path (the caller prefixes it). The loader and inspection both call it, so they
 * refuse the same shards with the same words. */
int rf_tar_no_samples(uint64_t file_size, uint64_t nonregular, rf_err *err);

#endif
