/* testutil.h — fixtures shared by the Check suites: temporary folders, small generated
 * WebDataset shards, host-backend loader configs, and running a suite. Nothing here creates
 * a CUDA context or an io_uring (Check forks). */
#ifndef RF_TESTUTIL_H
#define RF_TESTUTIL_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

#include "ringfeed.h"

/* A fresh empty directory under $RF_TEST_TMP (or /tmp); the path is static storage per call
 * (malloc'ed, never freed: tests are short-lived). */
char *rf_test_mkdtemp(const char *tag);

/* Read a whole regular file of at most 4 GiB with the library's rf_read_whole; returns
 * malloc'ed bytes (with a NUL after the last one) or NULL. */
uint8_t *rf_test_read_file(const char *path, size_t *len);

/* Bytes of the file resident in the page cache (mincore over a mapping that touches no page),
 * or -1 when it cannot be told (no such file, empty, mapping refused). */
long long rf_test_resident_bytes(const char *path);

/* Drop the file's pages from the page cache (fdatasync, then posix_fadvise DONTNEED: clean
 * pages go without root); returns the bytes still resident afterwards, as
 * rf_test_resident_bytes (0 when the eviction worked). */
long long rf_test_evict(const char *path);

/* Write nshards WebDataset shards `dir/shard-%04u.tar` (0000, 0001, ...) of nsamples samples
 * EACH, with DALI v1.2 indexes `dir/shard-%04u.idx` when write_index, using the generator core
 * (datasets/gen.h) on 2 threads. Sample i (global, 0-based; shard i / nsamples) is the pair
 * "%08u.jpg" (a baseline quality-90 JPEG whose long side is at most max_side px, e.g. 64..160
 * for fast tests; 0 = ImageNet-like sizes) and "%08u.cls" (label i % classes, decimal, no
 * newline). Its pixels are rf_synth_image_ex(rf_gen_image_seed(seed, i), w, h, &opts, rgb)
 * with opts = {.classes = classes, .label = i % classes} and (w, h) from
 * rf_gen_size(seed, i, 0, max_side, ...). Returns 0 or a negative errno. */
int rf_test_make_shards(const char *dir, uint32_t nshards, uint32_t nsamples, uint32_t classes,
                        uint64_t seed, int write_index, uint32_t max_side);

/* The same shards (with indexes) with restart markers in every JPEG (ringfeed-gen --restart):
 * region decode and GPU decode apply to them. */
/* Every sample's KEY.jpg of the tar shards at pattern, read whole, by sample id (the
 * dataset's order): the references the pixel tests decode themselves. */
typedef struct rf_test_jpegs {
    uint64_t n;
    uint8_t **jpeg;
    size_t *len;
} rf_test_jpegs;
void rf_test_jpegs_open(rf_test_jpegs *s, const char *pattern);
void rf_test_jpegs_close(rf_test_jpegs *s);

int rf_test_make_restart_shards(const char *dir, uint32_t nshards, uint32_t nsamples,
                                uint32_t classes, uint64_t seed, uint32_t max_side);
/* ... of large photos (sides 700-1000, JPEGs of 300-550 KB, 10 classes): GPU-decode packets
 * larger than the average slot area (RF_GJ_AREA). */
int rf_test_make_big_restart_shards(const char *dir, uint32_t nshards, uint32_t nsamples,
                                    uint64_t seed);
/* rf_test_make_shards' images (with indexes) with `trailer` bytes after each JPEG's EOI
 * (ringfeed-gen --trailer), as cameras and motion photos write them: the same pixels. */
int rf_test_make_trailer_shards(const char *dir, uint32_t nshards, uint32_t nsamples,
                                uint32_t classes, uint64_t seed, uint32_t max_side,
                                uint32_t trailer);

/* Damage the entropy-coded data of the nth JPEG (0-based, in file order) of the tar shard at
 * path in place: every byte from its SOS header to EOI becomes 0xA5, except each 0xFF and the
 * byte after it (so restart markers stay and only the Huffman data is wrong). The member's key (its
 * name without ".jpg") goes to key. Returns 0, or -1 when there is no such JPEG. */
int rf_test_damage_entropy(const char *path, uint32_t nth, char *key, size_t keylen);
/* The same JPEG cut short in place: the second half of its entropy-coded data and its EOI
 * become zero bytes (a short read the tar writer padded). */
int rf_test_truncate_jpeg(const char *path, uint32_t nth, char *key, size_t keylen);

/* One shard as users pack their own data, written by GNU tar (--format=gnu) from files:
 * dir/shard-0000.tar with n samples, sample i being "%08u.jpg" (a 64x48 baseline JPEG of
 * rf_synth_image(900 + i)) and, unless labels[i] is NULL, "%08u.cls" holding the string
 * labels[i] byte for byte ("5", "5\n", "", "-1", "cat", ...). Returns the shard's path
 * (malloc'ed). Aborts on failure. */
char *rf_test_make_label_shard(const char *dir, const char *const *labels, uint32_t n);
/* The same with the label member "%08u.EXT" (ext "json" for RF_LABEL_JSON's KEY.json). */
char *rf_test_make_label_shard_ext(const char *dir, const char *ext, const char *const *labels,
                                   uint32_t n);

/* The same kind of shard with any members after each JPEG: for sample i, the members
 * "%08u.<ext>" of exts[0..nexts), in that order, holding the bytes member(i, ext, &len, ctx)
 * returns (len bytes; NULL: no such member for that sample). rf_test_make_label_shard(_ext) is
 * this with the one extension "cls" (ext). Returns the shard's path (malloc'ed). Aborts on
 * failure. */
typedef const void *(*rf_test_member_fn)(uint32_t i, const char *ext, size_t *len, void *ctx);
char *rf_test_make_member_shard(const char *dir, uint32_t n, const char *const *exts,
                                uint32_t nexts, rf_test_member_fn member, void *ctx);

/* The first header block of member `name` in the tar at path (the byte offset that error
 * messages name), found with the library's scanner; UINT64_MAX when there is no such member. */
uint64_t rf_test_member_offset(const char *tar, const char *name);

/* Write len bytes to path (created or truncated); aborts on failure, so it also serves
 * fixtures built in main() before Check runs any test. */
void rf_test_write_file(const char *path, const void *data, size_t len);

/* Make every write of this process and of the children it starts fail with EFBIG once a file
 * would grow past `bytes` (the RLIMIT_FSIZE soft limit, with SIGXFSZ ignored so that write()
 * returns the error instead of the signal killing the writer): a file system that fills up in
 * the middle of a file, without privileges. 0 lifts the limit (back to the hard limit).
 * Returns 0 or -errno. */
int rf_test_limit_file_size(uint64_t bytes);

/* Mount a tmpfs of `bytes` at dir in a mount namespace of this process's own (a user namespace
 * too when the process may not make one otherwise), so that a test can fill a real file system
 * (ENOSPC) and the mount disappears when the process exits. Children started afterwards see
 * it. Returns 0, or -errno when this machine allows neither (then skip that check). */
int rf_test_private_tmpfs(const char *dir, uint64_t bytes);

/* The names in dir (hidden ones included, "." and ".." not; at most 1024), sorted, each
 * followed by '\n'; malloc'ed, "" for an empty folder, NULL when dir cannot be read. */
char *rf_test_list_dir(const char *dir);

/* Run a shell command made from a printf format (GNU tar, python3 and friends, to make data as
 * users make it); returns its exit status, -1 when it could not run or was killed. */
int rf_test_shell(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Threads of this process now (the Threads: line of /proc/self/status); -1 when unknown. */
int rf_test_threads(void);

/* This process's threads whose name (/proc/self/task/<tid>/comm) is `name`, or begins with it
 * when prefix is set; *vcsw (when not NULL) gets the sum of their voluntary context switches. */
int rf_test_threads_named(const char *name, int prefix, long *vcsw);

/* Recompute the ustar header checksum of the 512-byte header h (field at 148, 6 octal digits,
 * NUL, space) after a test edited the header. */
void rf_test_tar_checksum(uint8_t *h);

/* rf_config_init's defaults for the host backend over one shard pattern: shards = {pattern}
 * through *pat (which must stay valid until the loader is created), shard_count 1,
 * image_size (0 keeps the default) and device_kind RF_DEVICE_HOST. */
rf_config rf_test_host_config(const char **pat, const char *pattern, uint32_t image_size);

/* rf_loader_create(c) that must succeed: on failure the test fails with the code and the
 * error text. */
rf_loader *rf_test_create_ok(const rf_config *c);

/* PIL's NEAREST with a box (the masks' reference), written from Pillow's ImagingScaleAffine:
 * output pixel o of n samples the source pixel under its centre, box [at, at + size) of a
 * source `extent` pixels long, the centre reached by adding the scale once per pixel in
 * double as Pillow does (so a centre on an edge falls where Pillow's does), clamped. */
uint32_t rf_test_nearest(double at, double size, uint32_t n, uint32_t o, uint32_t extent);

/* Run the loader, releasing every batch, to its first answer that is neither a batch nor
 * RF_EPOCH_END (RF_DONE, or the error under test); returns it. */
int rf_test_drain_rc(rf_loader *ld);
/* Run the loader to RF_DONE, releasing every batch (the test fails on any other outcome, with
 * the loader's error); returns its stats then. */
rf_stats rf_test_drain(rf_loader *ld);

/* ld's stats into *st every 10 ms until done(st, ctx) holds or 30 s passed: whether it held.
 * For counters that settle on a thread of the loader's own (the shard cache's fills, the
 * hardware decoders' opener). */
int rf_test_poll_stats(rf_loader *ld, rf_stats *st, int (*done)(const rf_stats *, const void *),
                       const void *ctx);
/* Wait (rf_test_poll_stats) until ld's hardware decoders are no longer OPENING; the test fails
 * if they still are after 30 s. Returns their state (enum rf_hw_engines). */
uint32_t rf_test_wait_engines(rf_loader *ld);

/* The balancing scheduler's test hook (rf_test_hooks.sched_perturb, src/pipeline/testing.h):
 * shares drawn from the batch's sequence number, so every route takes samples at different
 * times in every run, whatever the controller would have done; counts its calls in
 * *(uint32_t *)ctx when ctx is not NULL. */
void rf_test_sched_perturb(void *ctx, uint64_t seq, uint32_t *gpu, uint32_t *hw);

/* Run every test of s with the given Check print mode and free the runner; returns the
 * process exit code: 0 when all passed, 1 otherwise. */
int rf_test_run_suite_mode(Suite *s, enum print_output mode);

/* rf_test_run_suite_mode(s, CK_NORMAL). */
int rf_test_run_suite(Suite *s);

/* JPEG edits for bad-input tests. Drop every marker segment of type m before the scan (0xDB
 * the quantization tables, 0xC4 the Huffman tables); *len shrinks. */
void rf_test_jpeg_strip(uint8_t *j, size_t *len, uint8_t m);
/* Write w x h into the SOF0 segment of a baseline JPEG (the test fails when it has none). */
void rf_test_jpeg_set_size(uint8_t *j, size_t len, uint16_t w, uint16_t h);

#endif
