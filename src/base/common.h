/* common.h — small helpers shared by every stage: error text, clocks, checked allocation,
 * opening the files a user names. Internal. base/ includes nothing internal (include/ringfeed.h
 * only), so every stage builds on it without a cycle. */
#ifndef RF_COMMON_H
#define RF_COMMON_H

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>

#include "ringfeed.h"

#define RF_ERRMSG_MAX 512
/* The longest path ringfeed builds or accepts (index names, folder and list entries, shard
 * names): one limit for loaders/ and authoring/, so a path one accepts the other can use. */
#define RF_PATH_BYTES_MAX 4096

/* What an error means beyond its code, set where it is raised, for callers that tell kinds
 * apart (the loader's skip reasons) by this rather than by words in the message. */
enum rf_err_reason {
    RF_REASON_NONE = 0,      /* nothing more to say than the code */
    RF_REASON_TRUNCATED = 1, /* the input ends before what its own structure announces */
    RF_REASON_NO_IMAGE = 2,  /* a sample without a member of the image types asked for */
};

/* An error code with its detail text and reason, filled by the stage that failed. */
typedef struct rf_err {
    int code;
    char msg[RF_ERRMSG_MAX];
    int reason; /* enum rf_err_reason */
} rf_err;

/* Set e->code, format e->msg and clear e->reason; returns code so callers can
 * `return rf_seterr(...)`. A NULL e is allowed (the code is still returned). */
int rf_seterr(rf_err *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Name thread t "<role>-<i>" (or "<role>" when i < 0) for top -H, perf and /proc (the kernel
 * keeps 15 bytes). Best effort. */
void rf_thread_name(pthread_t t, const char *role, int i);

/* Set e->reason (when e is not NULL) and return code: `return rf_with_reason(e, why,
 * rf_seterr(e, ...))` raises an error with its reason, as arguments are evaluated first. */
static inline int rf_with_reason(rf_err *e, int reason, int code)
{
    if (e)
        e->reason = reason;
    return code;
}

/* Copy e's message to a caller's (err, err_len) buffer, which may be NULL, and return e's
 * code: the public API of ringfeed_shards.h reports errors as text in the caller's buffer. */
static inline int rf_err_give(const rf_err *e, char *err, size_t err_len)
{
    if (err && err_len)
        snprintf(err, err_len, "%s", e->msg);
    return e->code;
}

static inline uint64_t rf_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The first line of a small file (sysfs, procfs) into buf, NUL-terminated and cut at n - 1
 * bytes; 0, or -1 when the file cannot be opened or is empty. */
int rf_read_line(const char *path, char *buf, size_t n);

#define RF_MIN(a, b) ((a) < (b) ? (a) : (b))
#define RF_MAX(a, b) ((a) > (b) ? (a) : (b))

/* Growable arrays. rf_grow: at least `need` elements, doubling (from 64), for tables built at
 * open. rf_reserve: exactly `need` when more is needed, for scratch that grows to the largest
 * input seen. Both keep *p and *cap on failure (-1). `pp` is a T**. */
int rf_grow(void *pp, uint64_t *cap, uint64_t need, size_t elem);
int rf_reserve(void *pp, size_t *cap, size_t need, size_t elem);

/* Open a file the user named for reading, accepting only a regular file and never blocking: a
 * FIFO, device, directory or socket is refused after stat(), unopened (opening a FIFO waits for
 * a writer, some devices have side effects). The open is O_NONBLOCK and checked again with
 * fstat(), so a FIFO swapped in after the stat() cannot hang it either; O_NONBLOCK is then
 * cleared, as io_uring fails reads of an O_NONBLOCK file with -EAGAIN. `what` is the file's role
 * with its article ("a shard"). Returns 0 with *fd and *size, -errno, or `code` for a file that
 * is not regular; err->msg gets the reason WITHOUT the path, for the caller to prefix. */
int rf_open_regular(const char *path, const char *what, int code, int *fd, uint64_t *size,
                    rf_err *err);

/* pread until len bytes are read at off, retrying EINTR and short reads: 0 with *got = len, or
 * *got < len when the file ends first; -errno on a read error. */
int rf_pread_full(int fd, void *dst, size_t len, uint64_t off, size_t *got);

/* URLs in messages: rf_url_shown writes url's printable form (scheme://host[:port]/path, no
 * userinfo, no query string) to shown[cap]; rf_url_scrub rewrites every URL inside msg to that
 * form in place, so a message quoting a pattern names no credential. */
void rf_url_shown(const char *url, char *shown, size_t cap);
void rf_url_scrub(char *msg);

/* A whole file the user named as a NUL-terminated string, opened with rf_open_regular and read
 * only when it has at most `limit` bytes. Returns 0 with *out (free it) and *len; otherwise
 * err->msg starts with the path: `code` for a file that is not regular, RF_ELIMIT, RF_ENOMEM,
 * -errno, or RF_EIO for one that ends early (it shrank), naming the byte offset. */

int rf_read_whole(const char *path, const char *what, int code, uint64_t limit, char **out,
                  uint64_t *len, rf_err *err);

/* What a non-regular file is, with its article ("a FIFO (named pipe)", "a directory", ...):
 * one wording for every refusal. */
const char *rf_file_kind(mode_t mode);

/* splitmix64: the one mixing function behind every per-epoch and per-sample seed, so order and
 * augmentation depend only on (seed, epoch, sample), never on timing. */
static inline uint64_t rf_mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* A small fast PRNG (xoshiro256**-style state seeded through splitmix). */
typedef struct rf_rng {
    uint64_t s[4];
} rf_rng;

void rf_rng_seed(rf_rng *r, uint64_t seed);
uint64_t rf_rng_next(rf_rng *r);
/* Uniform in [0, n) without modulo bias. */
uint64_t rf_rng_below(rf_rng *r, uint64_t n);
/* Uniform double in [0, 1). */
double rf_rng_unit(rf_rng *r);

#endif
