/* dataset.h — the flat sample table every shard format produces, and the format ops table.
 *
 * A format opens the user's shard patterns once, at create, and describes every sample as one
 * contiguous byte span of one file, read with a single request; the payload and the label text
 * are located inside it by relative offsets. The plan, the I/O engines and the decode pool then
 * need nothing format-specific. Every format is listed once, in loaders/formats.c. */
#ifndef RF_DATASET_H
#define RF_DATASET_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/common.h"

/* rf_sample.flags */
/* The span is a run of tar members (WebDataset sample). Its data and label fields are hints
 * from the scan or the index: after reading the span the pipeline must use
 * rf_tar_locate_fields' results, which re-validate the bytes actually read (a shard changed
 * since is then an error, not garbage decoded). The label member is checked with
 * rf_check_label_as; a sample without one is refused (rf_label_missing), but under
 * RF_LABEL_NONE, where the label is -1. */
#define RF_SAMPLE_TAR 0x1
/* Bits 4..7: the position (from 1) of the image's extension in rf_dataset.image_exts, for
 * messages naming the member (0: payload_ext). */
#define RF_SAMPLE_EXT(rank) ((uint32_t)(rank) << 4)
#define RF_SAMPLE_EXT_RANK(flags) (((uint32_t)(flags) >> 4) & 0xFu)

typedef struct rf_sample {
    uint64_t offset;     /* span start in the file */
    uint64_t key;        /* offset of the NUL-terminated key in rf_dataset.keys */
    uint32_t length;     /* span bytes */
    uint32_t file;       /* index into rf_dataset.files */
    uint32_t data_off;   /* payload (image) start within the span */
    uint32_t data_len;   /* payload bytes */
    uint32_t label_off;  /* tar: label text within the span, 0 when there is no label member */
    uint16_t label_len;  /* tar: its bytes (capped at UINT16_MAX: a hint); other formats: 0,
                            the label is `label` (known without reading) */
    uint16_t flags;      /* RF_SAMPLE_* */
    int32_t label;       /* label when label_len == 0; -1 when the sample has none */
    uint32_t data_hdr;   /* payload member's header offset relative to span (for messages) */
} rf_sample;

typedef struct rf_file {
    char *path;          /* a URL's printable form for a remote shard (rf_remote_ops.open) */
    int fd;              /* open for reading (O_RDONLY | O_CLOEXEC); -1 for a remote shard */
    uint64_t size;       /* at open; a different size later is an error */
    void *remote;        /* a remote shard's handle (rf_remote_ops.open), NULL for a file */
} rf_file;

/* ---- remote shards ----
 * A shard pattern may be a URL (rf_path_is_url). loaders/ includes base/ only, so the client
 * (src/io/remote*.c) reaches the formats through this table, set in rf_dataset.remote before
 * rf_format_open and kept until rf_dataset_free; without it a URL is refused, saying so.
 * Messages name the URL's printable form, never a credential. */
struct rf_byte_reader;
typedef struct rf_remote_ops {
    void *ctx;
    /* Open the object at url: its size, a handle for reads (rf_file.remote) and its printable
     * form in shown[cap]; an error naming the URL otherwise. */
    int (*open)(void *ctx, const char *url, void **file, uint64_t *size, char *shown,
                size_t cap, rf_err *err);
    /* The object at url whole, at most `max` bytes: 1 with *text (malloc'ed, NUL-terminated)
     * and *len; 0 for a 404; else an error. */
    int (*fetch)(void *ctx, const char *url, uint64_t max, char **text, uint64_t *len,
                 rf_err *err);
    /* A reader over an opened object, closed with reader_close. stream != 0: one streamed GET
     * for reading forward (a scan, a fill); stream == 0: each read one ranged GET (an index's
     * spot checks). */
    int (*reader)(void *ctx, void *file, int stream, struct rf_byte_reader *rd, rf_err *err);
    void (*reader_close)(struct rf_byte_reader *rd);
    void (*close)(void *ctx, void *file);
    /* Globbing: fn for every object URL under `pattern`'s prefix (before its first wildcard),
     * in the server's order; RF_EINVAL for a scheme that cannot list. */
    int (*list)(void *ctx, const char *pattern, int (*fn)(void *arg, const char *url, rf_err *err),
                void *arg, rf_err *err);
} rf_remote_ops;

/* 1 when path is a URL ringfeed reads remotely: http://, https:// or s3://. */
static inline int rf_path_is_url(const char *path)
{
    return strncmp(path, "http://", 7) == 0 || strncmp(path, "https://", 8) == 0 ||
           strncmp(path, "s3://", 5) == 0;
}

typedef struct rf_dataset {
    rf_file *files;
    uint32_t nfiles;
    rf_sample *samples;
    uint64_t nsamples;
    char *keys;          /* arena of NUL-terminated keys */
    uint64_t keys_len, keys_cap;
    uint64_t max_span;   /* largest sample span */
    uint64_t total_bytes;
    const char *payload_ext; /* for messages ("member KEY.jpg") when a sample has no EXT rank */
    /* Image extensions, most preferred first (rf_config.image_exts; NULL: RF_TAR_IMAGE_EXTS),
     * set by the caller before open: the tar grouping and rf_tar_locate pick each sample's image
     * by it, RF_SAMPLE_EXT_RANK indexes it. Not owned. */
    const char *image_exts;
    uint64_t samples_cap;    /* allocated entries (append helpers) */
    uint64_t files_cap;
    uint64_t nonregular;     /* tar members that are not regular files (skipped, never followed) */
    /* Set by the caller before open: */
    uint32_t max_name;       /* limit on tar long names / pax paths; 0 = RF_TAR_NAME_MAX */
    int keep_imageless;      /* tar: keep a sample without an image member (on_error SKIP skips
                                its read as RF_REASON_NO_IMAGE) instead of failing open */
    const char *label_ext;   /* tar: the label member's extension; NULL = RF_TAR_LABEL_EXT */
    /* Token files: tokens per window and bytes per token; open fills tok_first, the first
     * window id of each file (nfiles + 1 entries), freed by rf_dataset_free. */
    uint64_t tok_seq_len, tok_bytes;
    uint64_t *tok_first;
    const rf_remote_ops *remote; /* the client for URLs; NULL: URLs are refused. Not owned */
} rf_dataset;

/* FNV-1a of a key's n bytes, for the sets that find duplicate keys (folder_list.c, inspection). */
static inline uint64_t rf_key_hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

/* Append helpers for formats (arrays grow geometrically; used at open only). */
int rf_dataset_add_file(rf_dataset *ds, const char *path, int fd, uint64_t size, rf_err *err);
int rf_dataset_add_sample(rf_dataset *ds, const rf_sample *s, const char *key, size_t key_len,
                          rf_err *err);
/* rf_open_regular(path, what, RF_EFORMAT) with the path first in the message. */
int rf_open_input(const char *path, const char *what, int *fd, uint64_t *size, rf_err *err);
/* Open the input at path and append it to ds->files, its size in *size: a local file must be
 * a regular one (`what` names its role in the message), a URL is opened through ds->remote.
 * Errors name path. */
int rf_dataset_open_file(rf_dataset *ds, const char *path, const char *what, uint64_t *size,
                         rf_err *err);
void rf_dataset_free(rf_dataset *ds);

/* Expand patterns (paths, globs, brace ranges {a..b} keeping zero padding) into paths sorted
 * per pattern; *out a malloc'ed array of malloc'ed strings. RF_ENOFILES names a pattern that
 * matched nothing; RF_EINVAL a malformed brace range. */
int rf_expand_patterns(const char *const *patterns, uint32_t n, char ***out, uint32_t *count,
                       rf_err *err);
/* The same with URLs: braces expand as a path's; a wildcard is listed through remote->list
 * (s3://), else RF_EINVAL saying such URLs need brace ranges. */
int rf_expand_patterns_remote(const char *const *patterns, uint32_t n,
                              const rf_remote_ops *remote, char ***out, uint32_t *count,
                              rf_err *err);
void rf_free_paths(char **paths, uint32_t count);

/* Why label text is not a label (rf_parse_label). */
enum rf_label_fault {
    RF_LABEL_FAULT_EMPTY = 1,   /* nothing, or only whitespace */
    RF_LABEL_FAULT_NEGATIVE,    /* a minus sign before the digits */
    RF_LABEL_FAULT_NOT_INTEGER, /* anything but decimal digits (a '+', a '.', letters, ...) */
    RF_LABEL_FAULT_OVERFLOW,    /* digits worth more than INT32_MAX */
};

/* Parse label text strictly: a decimal integer 0..INT32_MAX, with or without ASCII whitespace
 * around it ("17", "17\n", " 17 ", "007"). Returns 0 and *label, or an rf_label_fault. */
int rf_parse_label(const uint8_t *text, uint64_t len, int32_t *label);

/* The one check of a WebDataset sample's label under RF_LABEL_CLS, shared by the loader and
 * rf_shard_inspect so both refuse the same samples with the same words. rf_check_label: the
 * KEY.cls member holds text[0..len) (not read, may be NULL, when len is over
 * RF_TAR_LABEL_BYTES_MAX). rf_label_missing: the sample has no KEY.ext member. Both return
 * RF_ELABEL saying what is wrong and naming the member (or sample) and `offset` (none when
 * RF_LABEL_NO_OFFSET); the caller adds the shard's path. */
#define RF_LABEL_NO_OFFSET UINT64_MAX
int rf_check_label(const char *key, const uint8_t *text, uint64_t len, uint64_t offset,
                   int32_t *label, rf_err *err);
int rf_label_missing(const char *key, const char *ext, uint64_t offset, rf_err *err);

/* ---- labels from JSON (label_json.c; rf_config.label_source RF_LABEL_JSON) ---- */

#define RF_JSON_DEPTH_MAX 64     /* nesting of objects and arrays in a label member */
#define RF_JSON_STRING_MAX 4096  /* bytes of one string or key, as written (escapes undecoded) */
#define RF_JSON_PATH_MAX 256     /* bytes of label_json_path */
#define RF_JSON_PATH_PARTS 16    /* keys in label_json_path */

/* Why a JSON member holds no label at the path (rf_json_find_label). */
enum rf_json_fault {
    RF_JSON_FAULT_SYNTAX = 1, /* not valid JSON, or over a limit (res->syntax says what) */
    RF_JSON_FAULT_MISSING,    /* no value at the path (a key missing, or not an object there) */
    RF_JSON_FAULT_FRACTION,   /* a number with a fraction or exponent */
    RF_JSON_FAULT_NEGATIVE,
    RF_JSON_FAULT_OVERFLOW,   /* an integer over INT32_MAX */
    RF_JSON_FAULT_STRING,
    RF_JSON_FAULT_OBJECT,
    RF_JSON_FAULT_ARRAY,
    RF_JSON_FAULT_BOOL,
    RF_JSON_FAULT_NULL,
};
typedef struct rf_json_result {
    const char *syntax; /* RF_JSON_FAULT_SYNTAX: what is wrong, at byte `at` */
    uint64_t at, end;   /* the value's bytes [at, end) in the member (at: the bad byte) */
} rf_json_result;

/* 0 when path is a label_json_path: 1..RF_JSON_PATH_MAX bytes, at most RF_JSON_PATH_PARTS
 * keys separated by dots, none empty; else RF_EINVAL saying which. */
int rf_json_path_check(const char *path, rf_err *err);
/* The same check of another setting's path, the message naming `name`. */
int rf_json_path_check_named(const char *name, const char *path, rf_err *err);
/* Validate the JSON document text[0..len) whole and find the value at `path` (checked by
 * rf_json_path_check). Returns 0 and *label when it is an integer 0..INT32_MAX, else an
 * rf_json_fault with *res saying where. */
int rf_json_find_label(const uint8_t *text, uint64_t len, const char *path, int32_t *label,
                       rf_json_result *res);

/* The elements of a JSON array whose value rf_json_find_label located: *pos starts just after
 * its '[' (res.at + 1) and end is its res.end. Returns 1 and the next element's bytes
 * [*at, *item_end), 0 at the array's end, -1 on bad JSON (not met in a document
 * rf_json_find_label validated). Reentrant. */
int rf_json_next_item(const uint8_t *text, uint64_t end, uint64_t *pos, uint64_t *at,
                      uint64_t *item_end);
/* The JSON number at text[at..end) (leading whitespace allowed) as a double (correct to about
 * 1e-15 relative; beyond the double range it is +-inf or 0). -1 when the value there is not a
 * number. */
int rf_json_number(const uint8_t *text, uint64_t at, uint64_t end, double *v);

/* The label member of a label source, as the loader and inspection find and judge it: its
 * extension (NULL for RF_LABEL_NONE), the size over which it is refused unread, and the
 * judgement (rf_check_label for CLS; for JSON the field at json_path, with the same RF_ELABEL
 * messages). */
const char *rf_label_ext(uint32_t source);
uint64_t rf_label_bytes_max(uint32_t source);
int rf_check_label_as(uint32_t source, const char *json_path, const char *key,
                      const uint8_t *text, uint64_t len, uint64_t offset, int32_t *label,
                      rf_err *err);

/* Multi-label (rf_config.multi_label): where a sample's ids go. hot: a row of `classes`
 * bytes (MULTIHOT) or NULL; list: a row of `width` ids (LIST) or NULL; classes: num_classes
 * (0: none); *count: the ids listed, or the classes set. */
typedef struct rf_label_sink {
    uint8_t *hot;
    int32_t *list;
    uint32_t classes, width;
    uint32_t *count;
    int32_t first; /* the first id, -1 when none */
} rf_label_sink;
/* Clear the sink's row (zeros, or -1s) and count. */
void rf_label_sink_clear(rf_label_sink *k);
/* Add one id to the sink: RF_ELABEL naming `what` when it is not below classes, or the list
 * is full. */
int rf_label_sink_add(rf_label_sink *k, int32_t id, const char *what, rf_err *err);
/* The ids of a label member as multi_label reads them (rf_check_label_as's rules for each;
 * a JSON array of integers at json_path or a lone integer; .cls ids separated by spaces or
 * commas; none is allowed) into the sink, cleared first. RF_ELABEL naming the member and
 * offset on the first bad id. */
int rf_check_labels_as(uint32_t source, const char *json_path, const char *key,
                       const uint8_t *text, uint64_t len, uint64_t offset, rf_label_sink *k,
                       rf_err *err);

/* ---- shard formats ---- */

/* The version of rf_format_ops: the registry refuses a format written for another, with its
 * name, at create. Raise it whenever a member is added, removed or changes meaning. */
#define RF_FORMAT_ABI 1

/* A shard format: a way to describe the user's files as rf_samples. */
typedef struct rf_format_ops {
    uint32_t abi;        /* RF_FORMAT_ABI when the format was written */
    const char *name;    /* "tar", "folder": in messages and for rf_format_by_name */
    uint32_t source;     /* the rf_config.source (enum rf_source) that selects it */
    /* Append the files and samples of `paths` (expanded) to ds, at create. Samples over
     * max_sample_bytes (0: the format's default) are refused. Errors name file and offset. */
    int (*open)(rf_dataset *ds, char *const *paths, uint32_t npaths, uint64_t max_sample_bytes,
                rf_err *err);
} rf_format_ops;

extern const rf_format_ops rf_format_tar;    /* loaders/tar.c: WebDataset tar shards */
extern const rf_format_ops rf_format_folder; /* loaders/folder.c: class folders or `path label` list */
extern const rf_format_ops rf_format_tokens; /* loaders/tokens.c: raw token files, windows */

/* The registry: the format of rf_config.source `source`; NULL with RF_EINVAL naming the source,
 * or the format and both versions when its abi is not RF_FORMAT_ABI. */
const rf_format_ops *rf_format_for_source(uint32_t source, rf_err *err);
/* The format called `name`, or NULL. */
const rf_format_ops *rf_format_by_name(const char *name);
/* 0 when f was written for RF_FORMAT_ABI and has an open(), else RF_EINVAL naming it. */
int rf_format_check(const rf_format_ops *f, rf_err *err);
int rf_format_open(uint32_t source, rf_dataset *ds, char *const *paths, uint32_t npaths,
                   uint64_t max_sample_bytes, rf_err *err);

#endif
