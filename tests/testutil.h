/* testutil.h — fixtures shared by the Check suites: temporary folders and small generated
 * WebDataset shards. Nothing here creates a CUDA context or an io_uring (Check forks). */
#ifndef RF_TESTUTIL_H
#define RF_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

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

#endif
