/* testutil.h — fixtures shared by the Check suites: temporary folders and small generated
 * WebDataset shards. Nothing here creates a CUDA context or an io_uring (Check forks). */
#ifndef RF_TESTUTIL_H
#define RF_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

/* A fresh empty directory under $RF_TEST_TMP (or /tmp); the path is static storage per call
 * (malloc'ed, never freed: tests are short-lived). */
char *rf_test_mkdtemp(const char *tag);

/* Read a whole file; returns malloc'ed bytes or NULL. */
uint8_t *rf_test_read_file(const char *path, size_t *len);

#endif
