/* ringfeed_shards.h — the public API for making and checking datasets: image lists (class
 * folders or `path label` files), a WebDataset shard writer, JPEG header checks, shard
 * inspection and indexes. ringfeed-pack and ringfeed-inspect are built on this header and
 * ringfeed.h only; the Python binding may use it through ctypes.
 *
 * The conventions of ringfeed.h hold here too: fallible calls return 0 or a negative code
 * (-errno or RF_E*), nothing is static inline, variadic or takes a struct by value, public
 * structs use fixed-width types, start with struct_size and are filled by their *_init().
 * There is no handle to ask for error detail here, so calls that can fail with detail take
 * `char *err, size_t err_len` and write a NUL-terminated message naming file and byte offset
 * there (err may be NULL). Every object is used by one thread at a time; distinct objects are
 * independent (one rf_jpeg_checker per thread).
 *
 * WebDataset conventions used throughout: a sample is a run of consecutive tar members sharing
 * a key, the key being the member name up to the first dot of its basename; the image is
 * KEY.jpg and the label KEY.cls (decimal ASCII). */
#ifndef RINGFEED_SHARDS_H
#define RINGFEED_SHARDS_H

#include <stddef.h>
#include <stdint.h>

#include "ringfeed.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- path patterns ----------------------------------------------------------------------- */

typedef struct rf_paths rf_paths;

/* Expand patterns (plain paths, globs, brace ranges `{000..099}` keeping zero padding) exactly
 * as rf_loader_create() does for rf_config.shards: in the order given, glob matches sorted
 * bytewise. *out receives the list (free with rf_paths_free). Errors: RF_ENOFILES (a pattern
 * matched nothing), RF_EINVAL (malformed brace range), RF_ELIMIT, RF_ENOMEM. */
RF_API int rf_paths_expand(const char *const *patterns, uint32_t count, rf_paths **out,
                           char *err, size_t err_len);
RF_API uint32_t rf_paths_count(const rf_paths *p);
/* The i-th path (NULL when i is out of range); owned by the list. */
RF_API const char *rf_paths_get(const rf_paths *p, uint32_t i);
/* rf_paths_free(NULL) is a no-op. */
RF_API void rf_paths_free(rf_paths *p);

/* ---- image lists ------------------------------------------------------------------------- */

/* An image list is the sample table of an unpacked dataset, built once from `input`:
 *  - a directory: the class-folder convention of torchvision's ImageFolder. Every
 *    subdirectory is a class; labels are the subdirectories' indexes in bytewise-sorted name
 *    order (empty ones keep their number). Regular files below a class folder (recursively,
 *    at most RF_IMAGE_LIST_DEPTH_MAX levels) whose extension is jpg, jpeg, png or webp (any case) are
 *    samples, in sorted order (class by class, each folder's entries sorted bytewise,
 *    subfolders in place). Symlinks are followed. Other files, files directly in `input`, and
 *    names starting with '.' are skipped and counted (hidden folders such as
 *    .ipynb_checkpoints are never classes); entries that cannot be read (dangling or looping
 *    symlinks, FIFOs and devices named .jpg) are left out and recorded (see
 *    rf_image_list_unreadable).
 *  - a regular file: lines `path label` (label: the last whitespace-separated field, a
 *    decimal integer >= 0; path: the rest of the line, trimmed, so it may hold spaces). Relative
 *    paths are relative to the list file's folder. Empty lines and lines starting with '#' are
 *    skipped; a line whose file cannot be read is recorded as unreadable. Order is the file's
 *    order.
 * Each entry has its path (as opened), its size (stat at build time), its label, a name (the
 * path relative to `input` or as written in the list, without the extension) and a key: the
 * name made safe as a WebDataset key (see rf_image_list_key). */
#define RF_IMAGE_LIST_FILES_MAX (1ull << 27)
#define RF_IMAGE_LIST_DEPTH_MAX 16

typedef struct rf_image_list rf_image_list;

/* Build the list. Errors: -errno from the file system (`input` itself, a folder that cannot
 * be listed; message names the path), RF_EFORMAT (a list line without a valid label: message
 * names file and line; an input that is neither a directory nor a regular file, such as a FIFO,
 * refused without opening it), RF_ELIMIT (more than RF_IMAGE_LIST_FILES_MAX files, a path longer
 * than 4096 bytes, folders nested deeper than RF_IMAGE_LIST_DEPTH_MAX), RF_ENOFILES (no images),
 * RF_ENOMEM. */
RF_API int rf_image_list_open(const char *input, rf_image_list **out, char *err, size_t err_len);
/* rf_image_list_free(NULL) is a no-op. */
RF_API void rf_image_list_free(rf_image_list *l);
RF_API uint64_t rf_image_list_count(const rf_image_list *l);
/* Accessors for entry i < count (NULL / -1 / 0 when out of range). Strings are owned by l. */
RF_API const char *rf_image_list_path(const rf_image_list *l, uint64_t i);
RF_API const char *rf_image_list_name(const rf_image_list *l, uint64_t i);
/* The WebDataset key of entry i: the name with every byte that would break a key replaced by
 * '_' (whitespace and control bytes anywhere; dots in the basename, because a key ends at the
 * first dot of the basename), '.' and '..' path components and leading '/' removed, and, when
 * two entries would then share a key, "_2", "_3", ... appended to the later ones. */
RF_API const char *rf_image_list_key(const rf_image_list *l, uint64_t i);
RF_API int32_t rf_image_list_label(const rf_image_list *l, uint64_t i);
RF_API uint64_t rf_image_list_size(const rf_image_list *l, uint64_t i);
/* Directory input: the number of classes and the name of class c (sorted order). List-file
 * input: 0 classes (names are NULL); labels are whatever the file says. */
RF_API uint32_t rf_image_list_classes(const rf_image_list *l);
RF_API const char *rf_image_list_class_name(const rf_image_list *l, uint32_t c);
/* Files skipped while walking (not jpg/jpeg/png/webp, outside a class folder, hidden). */
RF_API uint64_t rf_image_list_skipped(const rf_image_list *l);
/* Entries that cannot be read as images and are left out of the list, the walk going on: a
 * path whose stat() fails (a dangling symlink, a symlink loop such as `ln -s x.jpg x.jpg`, a
 * file gone meanwhile: -errno), an image entry or list line that is not a regular file (a
 * FIFO, device or socket, never opened: RF_EFORMAT), and a folder that is a symlink to a
 * folder being walked (-ELOOP, not walked). A root entry whose stat() fails is not a class
 * (the later classes' labels are one lower). They are not samples; what they mean is the
 * caller's choice: ringfeed-pack skips and counts them (an error with --strict), the folder
 * loader refuses the list. At most RF_IMAGE_LIST_FILES_MAX. */
RF_API uint64_t rf_image_list_unreadable(const rf_image_list *l);
/* Unreadable entry i: "PATH: why" (list files: "LIST: line N: PATH: why"), owned by l; NULL
 * when i is out of range. */
RF_API const char *rf_image_list_unreadable_message(const rf_image_list *l, uint64_t i);
/* Its code (above); 0 when i is out of range. */
RF_API int32_t rf_image_list_unreadable_code(const rf_image_list *l, uint64_t i);
/* Keys changed by de-duplication ("_2" suffixes). */
RF_API uint64_t rf_image_list_renamed(const rf_image_list *l);

/* ---- JPEG checks ------------------------------------------------------------------------- */

typedef struct rf_jpeg_checker rf_jpeg_checker;

/* One checker per thread, reused (it holds the loader's JPEG decoder). NULL on no memory. */
RF_API rf_jpeg_checker *rf_jpeg_checker_create(void);
RF_API void rf_jpeg_checker_destroy(rf_jpeg_checker *c);
/* Validate one image with the loader's own decoders and default limits (100 M pixels, 32768 per
 * side, 1000 progressive scans). The format is read from the bytes, as the loader reads it
 * (anything but a JPEG, PNG or WebP is RF_EDECODE "not an image (...)"). A JPEG: everything the
 * loader checks on every decode (header, limits, colour space, quantization tables present, the
 * marker structure of the whole file up to EOI; bytes after the EOI, such as camera trailers,
 * are ignored as the loader ignores them), then every scanline decoded to the EOI, with libjpeg
 * warnings as errors. A PNG: the header against the limits, every row decoded (libspng) and
 * the chunks after the image read to IEND, CRCs checked. A WebP: the header against the
 * limits, the whole picture decoded (libwebp). So a file that passes cannot fail in the loader
 * under default limits whatever the crop, and a file the loader refuses does not pass. Costs a
 * full decode (a few ms for a photo). Any of width/height/progressive may be NULL
 * (progressive is 0 for PNG and WebP). Errors: RF_EDECODE, RF_ELIMIT, RF_ENOMEM (message in
 * err). */
RF_API int rf_jpeg_check(rf_jpeg_checker *c, const void *data, uint64_t len, uint32_t *width,
                         uint32_t *height, uint32_t *progressive, char *err, size_t err_len);

/* ---- restart markers -------------------------------------------------------------------- */

/* Rewrite a JPEG losslessly (the same quantized DCT coefficients, so exactly the same decoded
 * pixels) as a single-scan baseline file with a restart marker every `interval` MCUs; 0 picks
 * the loader's preferred interval (a small divisor of the MCU row, ~1% larger files). The
 * loader then entropy-decodes only the MCUs a crop needs instead of everything above and left
 * of it: RandomResizedCrop decodes ~1.3x faster per core (docs/performance.md). optimize != 0:
 * optimal Huffman tables (usually smaller than the input) instead of the input's own. APPn and
 * COM markers are kept. *out is malloc'ed: release it with rf_free() (or free()). Progressive
 * inputs come out baseline. Returns RF_JPEG_RESTART_KEPT (1), with *out NULL and the reason in
 * err, for a progressive JPEG whose scans stop before every coefficient is complete (cjpeg
 * -scans writes such files): libjpeg smooths those as it decodes them, a baseline file is
 * never smoothed, so a rewrite would change its pixels; keep the file as it is. Errors:
 * RF_EDECODE (not a decodable JPEG; libjpeg's words in err), RF_ENOMEM, RF_EINVAL. */
#define RF_JPEG_RESTART_KEPT 1
RF_API int rf_jpeg_add_restarts(const void *data, uint64_t len, uint32_t interval,
                                uint32_t optimize, void **out, uint64_t *out_len, char *err,
                                size_t err_len);
/* free() for memory this library returned, for bindings that cannot reach the C library's. */
RF_API void rf_free(void *p);

/* ---- shard writer ------------------------------------------------------------------------ */

/* Tar flavour for names over 100 bytes: a pax 'x' record (POSIX) or a GNU 'L' record. Both
 * read back with GNU tar, Python's tarfile and webdataset. Names up to 100 bytes give plain
 * ustar headers either way. Output is reproducible: fixed mtime, owner and mode. */
enum rf_shard_format { RF_SHARD_PAX = 0, RF_SHARD_GNU = 1 };

typedef struct rf_shard_writer rf_shard_writer;

/* Start the shard tar_path; with idx_path != NULL its DALI v1.2 index is written there at
 * close. The writer is atomic: samples go to a hidden temporary beside tar_path
 * (".NAME.tmp-PID-N" in the same folder, created here, as is the index's), and nothing appears
 * under tar_path or idx_path before rf_shard_writer_close succeeds, so readers (and globs such
 * as train-*.tar) see a complete shard or none. Errors: -errno (a temporary cannot be created;
 * message names the path), RF_EINVAL, RF_ENOMEM. */
RF_API int rf_shard_writer_open(const char *tar_path, const char *idx_path, uint32_t format,
                                rf_shard_writer **out, char *err, size_t err_len);
/* Append one sample: KEY.EXT with `len` bytes of data, then, when label >= 0, KEY.cls with
 * the label in decimal (no newline). Samples written without a label (label < 0) are read
 * with rf_config.label_source RF_LABEL_NONE: by default the loader requires a label member.
 * `ext` is without the dot ("jpg"). The key must not hold
 * whitespace or control bytes, nor a dot in its basename (RF_EINVAL): use rf_image_list_key.
 * Errors: RF_EINVAL, -errno from write. A write error is sticky. */
RF_API int rf_shard_writer_add(rf_shard_writer *w, const char *key, const char *ext,
                               const void *data, uint64_t len, int32_t label);
/* Bytes a sample of this key/ext/len (and label, when label >= 0) adds to the shard, headers
 * and padding included: to decide when to start the next shard. */
RF_API uint64_t rf_shard_sample_bytes(const char *key, const char *ext, uint64_t len,
                                      int32_t label, uint32_t format);
/* Bytes written so far, without the 1024-byte end-of-archive marker close adds. */
RF_API uint64_t rf_shard_writer_bytes(const rf_shard_writer *w);
RF_API uint64_t rf_shard_writer_samples(const rf_shard_writer *w);
/* Finish the archive and fsync it, write and fsync the index, rename the index and then the
 * shard to their names (replacing files there) and fsync their folders. Frees w (also on
 * error); NULL is a no-op. Errors: -errno (message names the file, the failed step and, for a
 * write such as ENOSPC, the byte offset), including a write error of an earlier
 * rf_shard_writer_add. On error both temporaries are removed, and so is the index if it was
 * already renamed (a shard of that name from before then stays, without an index), so no
 * file of the failed shard is left. A process killed before or during close leaves at most
 * the hidden temporaries and, killed between the two renames, the new index beside the old
 * shard (or beside none: the loader finds shards by their .tar names). */
RF_API int rf_shard_writer_close(rf_shard_writer *w, char *err, size_t err_len);
/* Give the shard up (after an error, or to stop): remove the temporaries, create nothing, free
 * w. NULL is a no-op. */
RF_API void rf_shard_writer_abort(rf_shard_writer *w);

/* ---- indexes ----------------------------------------------------------------------------- */

/* The index path the loader would use for `shard`: "X.idx" for "X.tar", else "X.tar.idx".
 * Returns 1 when a file of that name exists (of any type: a FIFO there is found, and refused
 * when read), 0 when it does not (buf still receives the preferred path
 * "X.idx" / "X.tar.idx" to write), RF_EINVAL when cap is too small. */
RF_API int rf_shard_index_path(const char *shard, char *buf, size_t cap);
/* Scan `shard` and write its index to idx_path (NULL: the preferred path above), atomically
 * (temporary file renamed into place). Errors: RF_EFORMAT (malformed shard, including data
 * after its end-of-archive marker; message has the offset), RF_EINVAL (a member name that cannot be indexed), -errno. */
RF_API int rf_shard_write_index(const char *shard, const char *idx_path, char *err,
                                size_t err_len);

/* ---- sync-point indexes ------------------------------------------------------------------ */

/* A shard's sync-point index (docs/gpu-decode.md, "Sync-point indexes"): a sidecar SHARD.sync that
 * lets the GPU decode start a plain JPEG's crop rows mid-scan, as restart markers do, without
 * rewriting the shard. Counts of one shard's write or check. */
typedef struct rf_sync_summary {
    uint32_t struct_size;
    uint32_t pad0;
    uint64_t jpegs;        /* JPEG members (by their bytes: FF D8 FF) */
    uint64_t indexed;      /* ... with points */
    uint64_t needs_none;   /* ... that need none: progressive, arithmetic, restart markers */
    uint64_t unsupported;  /* ... that the GPU kernels do not take (CMYK, 12-bit, ...) */
    uint64_t unreadable;   /* ... whose header or data do not decode */
    uint64_t missing;      /* check: JPEG members without an entry (a shard appended to) */
    uint64_t stale;        /* check: entries whose member's bytes changed or are gone;
                              write: such entries of the index there before, rebuilt */
    uint64_t reused;       /* write: entries of the index there before, kept as they were */
    uint64_t index_bytes;  /* the sidecar's size */
    uint64_t shard_bytes;
    uint64_t build_ns;     /* write: time spent building entries (reading excluded) */
} rf_sync_summary;

RF_API void rf_sync_summary_init(rf_sync_summary *s);
/* Add b's counts to a's (totals over shards). */
RF_API void rf_sync_summary_add(rf_sync_summary *a, const rf_sync_summary *b);
/* The sidecar path the loader looks for beside `shard`: "X.tar.sync". 0, or RF_EINVAL when cap
 * is too small. */
RF_API int rf_shard_sync_path(const char *shard, char *buf, size_t cap);
/* Build the sync-point index of a local `shard` and write it to out_path (NULL: beside the
 * shard) atomically; the shard is only read. Entries of an index already at out_path whose
 * member is unchanged are kept without a walk, so a shard appended to is walked only for its
 * new members. summary (may be NULL; struct_size set with rf_sync_summary_init) receives the
 * counts. Errors: RF_EFORMAT (a malformed shard, with the offset), RF_EINVAL, RF_ENOMEM,
 * -errno, with the message in err. */
RF_API int rf_shard_write_sync_index(const char *shard, const char *out_path,
                                     rf_sync_summary *summary, char *err, size_t err_len);
/* Check the sync-point index at path (NULL: beside the shard) against `shard`: coverage and
 * staleness in summary. Returns 0 when it was read (stale entries are counted, not errors),
 * 1 when there is none, RF_EINDEX for a sidecar that is damaged or not one (the message names
 * what and the byte offset), RF_EFORMAT, -errno. */
RF_API int rf_shard_check_sync_index(const char *shard, const char *path,
                                     rf_sync_summary *summary, char *err, size_t err_len);

/* ---- shard inspection -------------------------------------------------------------------- */

typedef struct rf_inspect_options {
    uint32_t struct_size;
    uint32_t check_jpeg;        /* 1 (default): validate every image as rf_jpeg_check does
                                   (decoded in full); 0: structure, labels and index only */
    uint32_t check_index;       /* 1 (default): compare an index beside the shard, if any */
    uint32_t max_problems;      /* problems reported per shard before the rest are only
                                   counted; default 100 */
    uint64_t max_member_bytes;  /* a larger image member is a problem; default 64 MiB */
    uint32_t label_source;      /* enum rf_label_source, as rf_config.label_source: 0
                                   (RF_LABEL_CLS, default) reports every sample the loader
                                   would refuse for its label; RF_LABEL_NONE (unlabelled data)
                                   reads and checks no label member (labeled stays 0);
                                   RF_LABEL_JSON checks the field label_json_path names in
                                   each KEY.json member; another value is RF_EINVAL */
    const char *label_json_path; /* RF_LABEL_JSON: as rf_config.label_json_path (an invalid
                                    path is RF_EINVAL); default NULL */
    const char *image_exts;     /* as rf_config.image_exts: which member is a sample's image
                                   (NULL, the default: "jpg,jpeg,png,webp"); a list the loader
                                   would refuse is RF_EINVAL. A member with an extension later
                                   in the list than the image so far is not checked; one with
                                   an earlier extension becomes the image and is checked too */
} rf_inspect_options;

typedef struct rf_inspect_problem {
    uint32_t struct_size;
    int32_t code;               /* RF_EFORMAT, RF_EDECODE, RF_ELIMIT, RF_ELABEL, RF_EINDEX, -errno */
    const char *path;           /* the shard, or its index file for RF_EINDEX */
    uint64_t offset;            /* byte offset in the shard (the member's first header block) */
    const char *key;            /* the sample key, "" when none */
    const char *message;        /* one line: "<path>: offset <N>: <what>" */
} rf_inspect_problem;

typedef struct rf_inspect_sample {
    uint32_t struct_size;
    uint32_t members;           /* regular members in the sample */
    const char *path;
    const char *key;
    uint64_t offset;            /* first header block of the sample */
    uint64_t span_bytes;        /* first header to end of the last member's data */
    uint64_t image_bytes;       /* 0 when the sample has no image */
    uint32_t width, height;     /* 0 when unknown (no image, header not checked or bad) */
    uint32_t progressive;       /* 1 progressive, 0 baseline/extended sequential */
    int32_t label;              /* -1 when there is no valid label member (or RF_LABEL_NONE) */
    uint32_t region_ready;      /* 1: restart markers let the loader decode only the crop's
                                   MCUs (ringfeed-pack --restart writes such files) */
    uint32_t orientation;       /* a JPEG's EXIF orientation tag (1..8), 0 when none; the
                                   loader decodes the pixels as stored, never rotated */
    uint32_t recovered;         /* what libjpeg recovered from without losing a pixel, which
                                   the loader decodes too: 1 << enum rf_recovered each */
} rf_inspect_sample;

typedef struct rf_inspect_summary {
    uint32_t struct_size;
    uint32_t has_index;         /* an index was found beside the shard */
    uint32_t index_ok;          /* ... and it agrees with the shard */
    uint32_t pad0;
    uint64_t bytes;             /* shard file size */
    uint64_t samples;
    uint64_t members;           /* regular members */
    uint64_t problems;          /* all problems, reported or not */
    uint64_t images;            /* samples whose image header was read successfully */
    uint64_t progressive;
    uint64_t image_bytes;       /* sum over samples with an image */
    uint64_t image_bytes_min, image_bytes_max;
    uint64_t width_sum, height_sum; /* over `images` */
    uint32_t width_min, width_max, height_min, height_max;
    int32_t label_min, label_max;   /* over samples with a label; 0/-1 when none */
    uint64_t labeled;           /* samples with a valid label */
    uint64_t region_ready;      /* images with region_ready (see rf_inspect_sample) */
    uint64_t oriented;          /* images whose EXIF orientation is 2..8 (rotated or mirrored
                                   as stored), which the loader does not turn upright */
    uint64_t with_image;        /* samples with an image member: image_bytes is over these */
    uint64_t recovered_by_kind[RF_RECOVERED_KINDS]; /* images with each enum rf_recovered */
} rf_inspect_summary;

RF_API void rf_inspect_options_init(rf_inspect_options *o);
RF_API void rf_inspect_summary_init(rf_inspect_summary *s);

/* Called for every problem, and for every sample. The pointed-to structs and strings are valid
 * during the call only. Return 0 to continue, nonzero to stop the inspection (-ECANCELED). */
typedef int (*rf_inspect_problem_fn)(void *ctx, const rf_inspect_problem *p);
typedef int (*rf_inspect_sample_fn)(void *ctx, const rf_inspect_sample *s);

/* Validate one shard: tar structure (headers, checksums, sizes, end of archive, nothing but
 * zero bytes after the end-of-archive marker, at least one sample), sample
 * grouping (members sharing a key are consecutive, every member has an extension, every sample
 * has one image), labels (options->label_source RF_LABEL_CLS: every sample has a KEY.cls
 * member holding a label as the loader requires it, judged by the loader's own check in its
 * words: missing, empty, negative, not a decimal integer, over INT32_MAX, over 1 KiB;
 * RF_LABEL_JSON: every sample has a KEY.json member whose field label_json_path holds one, as
 * rf_config.label_json_path says; an RF_ELABEL problem at the member's offset, or the
 * sample's when it has none), every image as
 * rf_jpeg_check does (decoded in full with the loader's decoder; options->check_jpeg), and an
 * index beside the shard (options->check_index) with the loader's own check, every member's
 * header read: the index must cover the whole archive (docs/reliability.md), so inspection
 * refuses every index the loader refuses, with the loader's words, as one RF_EINDEX problem of
 * the index file. A malformed header ends the scan (what follows cannot be located); every
 * other problem is reported and the scan goes on.
 * options may be NULL (defaults); callbacks may be NULL; summary (may be NULL) receives totals
 * (set its struct_size with rf_inspect_summary_init first).
 * Returns 0 when the shard has no problem, else the code of the first problem (the shard's
 * problems are in summary->problems); -ECANCELED when a callback stopped it; RF_EINVAL,
 * RF_ENOMEM when it could not run. A shard that cannot be opened is a problem (-errno); one
 * that is not a regular file (a FIFO, a device, a directory) is an RF_EFORMAT problem, found
 * without opening it, and a non-regular index beside a shard an RF_EINDEX problem. */
RF_API int rf_shard_inspect(const char *path, const rf_inspect_options *options,
                            rf_inspect_problem_fn on_problem, rf_inspect_sample_fn on_sample,
                            void *ctx, rf_inspect_summary *summary);

#ifdef __cplusplus
}
#endif
#endif /* RINGFEED_SHARDS_H */
