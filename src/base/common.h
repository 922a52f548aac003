/* common.h — small helpers shared by every stage: error text, clocks, checked allocation,
 * opening the files a user names.
 * Internal: nothing here is part of the public API.
 *
 * What base/ may include: nothing internal (include/ringfeed.h only), so every stage can build
 * on it without a cycle. The device queries of the public API are therefore the backend's
 * (backend/devices.c), not api.c's. */
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

/* Name thread t "<role>-<i>" (or "<role>" when i < 0) for top -H, perf and /proc/<pid>/task:
 * every thread the loader starts is told apart from the caller's (the kernel keeps 15 bytes
 * of the name, longer ones are cut). Best effort: a name that cannot be set changes nothing
 * else. */
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

/* Growable arrays. rf_grow: at least `need` elements of `elem` bytes, doubling (from 64) so
 * appends stay amortized O(1); for tables built at open. rf_reserve: exactly `need` when more
 * is needed, for scratch that grows to the largest input seen and then stays. Both keep *p and
 * *cap unchanged on failure (-1: no memory or a size that overflows). `pp` is a T** . */
int rf_grow(void *pp, uint64_t *cap, uint64_t need, size_t elem);
int rf_reserve(void *pp, size_t *cap, size_t need, size_t elem);

/* Open a file the user named (a shard, an index, an image list, a token file) for reading,
 * accepting only a regular file and never blocking. A FIFO, a device, a directory or a socket
 * is refused after stat(), without being opened: opening a FIFO for reading waits for a writer
 * (for ever when there is none) and opening some devices has side effects. The open itself is
 * O_NONBLOCK and checked again with fstat(), so a FIFO swapped in after the stat() cannot hang
 * it either; O_NONBLOCK is cleared before returning because io_uring fails reads of an
 * O_NONBLOCK file with -EAGAIN instead of waiting for the disk. `what` is the file's role,
 * with its article ("a shard", "an index"). Returns 0 with *fd and *size (bytes), -errno, or `code` for a file that
 * is not a regular one. err->msg gets the reason WITHOUT the path, e.g. "is a FIFO (named
 * pipe), not a regular file (a shard must be one)", for the caller to prefix. */
int rf_open_regular(const char *path, const char *what, int code, int *fd, uint64_t *size,
                    rf_err *err);

/* pread until len bytes are read from offset off, retrying EINTR and short reads. Returns 0
 * with *got = len, or *got < len when the file ends first (it may shrink while read: the
 * caller names that); -errno on a read error. */
int rf_pread_full(int fd, void *dst, size_t len, uint64_t off, size_t *got);

/* A whole file the user named (an image list, a shard index) as a NUL-terminated string:
 * opened with rf_open_regular(path, what, code) and read only when it has at most `limit`
 * bytes, so a huge file is refused before any memory is taken. Returns 0 with *out (free it)
 * and *len; otherwise err->msg starts with the path: `code` for a file that is not a regular
 * one, RF_ELIMIT over the limit, RF_ENOMEM, -errno for a failed read and RF_EIO for one that
 * ends early (the file shrank), both naming the byte offset. */
/* URLs in messages (remote shards): rf_url_shown writes url's printable form to shown[cap]:
 * scheme://host[:port]/path, without userinfo ("user:password@") or query string (a
 * presigned URL's X-Amz-Signature). rf_url_scrub rewrites every URL inside msg (a token
 * holding "://", up to the next blank) to that form in place, so a message that quoted a
 * pattern as given names no credential. */
void rf_url_shown(const char *url, char *shown, size_t cap);
void rf_url_scrub(char *msg);

int rf_read_whole(const char *path, const char *what, int code, uint64_t limit, char **out,
                  uint64_t *len, rf_err *err);

/* What a file that is not a regular one is, with its article, for messages: "a FIFO (named
 * pipe)", "a character device", "a block device", "a directory", "a socket" or "a special
 * file". One wording for every refusal (rf_open_regular, the image list's unreadable entries). */
const char *rf_file_kind(mode_t mode);

/* splitmix64: the one mixing function used to derive every per-epoch and per-sample seed, so
 * that order and augmentation depend only on (seed, epoch, sample) and never on timing. */
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
