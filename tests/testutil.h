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

/* Read a whole file; returns malloc'ed bytes (with a NUL after the last one) or NULL. */
uint8_t *rf_test_read_file(const char *path, size_t *len);

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
int rf_test_make_restart_shards(const char *dir, uint32_t nshards, uint32_t nsamples,
                                uint32_t classes, uint64_t seed, uint32_t max_side);
/* ... of large photos (sides 700-1000, JPEGs of 300-550 KB, 10 classes): GPU-decode packets
 * larger than the average slot area (RF_GJ_AREA). */
int rf_test_make_big_restart_shards(const char *dir, uint32_t nshards, uint32_t nsamples,
                                    uint64_t seed);

/* Damage the entropy-coded data of the nth JPEG (0-based, in file order) of the tar shard at
 * path in place: every byte from its SOS header to EOI becomes 0xA5, except each 0xFF and the
 * byte after it (so restart markers stay and only the Huffman data is wrong). The member's key (its
 * name without ".jpg") goes to key. Returns 0, or -1 when there is no such JPEG. */
int rf_test_damage_entropy(const char *path, uint32_t nth, char *key, size_t keylen);
/* The same JPEG cut short in place: the second half of its entropy-coded data and its EOI
 * become zero bytes (a short read the tar writer padded). */
int rf_test_truncate_jpeg(const char *path, uint32_t nth, char *key, size_t keylen);

/* Write len bytes to path (created or truncated); aborts on failure, so it also serves
 * fixtures built in main() before Check runs any test. */
void rf_test_write_file(const char *path, const void *data, size_t len);

/* Threads of this process now (the Threads: line of /proc/self/status); -1 when unknown. */
int rf_test_threads(void);

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

/* Run every test of s with the given Check print mode and free the runner; returns the
 * process exit code: 0 when all passed, 1 otherwise. */
int rf_test_run_suite_mode(Suite *s, enum print_output mode);

/* rf_test_run_suite_mode(s, CK_NORMAL). */
int rf_test_run_suite(Suite *s);

#endif
