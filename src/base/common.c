/* common.c — error formatting, growable arrays, opening and reading user files, and the PRNG
 * used for order and augmentation. */
#include "base/common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int rf_seterr(rf_err *e, int code, const char *fmt, ...)
{
    if (!e)
        return code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    e->code = code;
    e->reason = RF_REASON_NONE;
    return code;
}

void rf_thread_name(pthread_t t, const char *role, int i)
{
    char name[16]; /* the kernel's TASK_COMM_LEN */
    if (i < 0)
        snprintf(name, sizeof name, "%s", role);
    else
        snprintf(name, sizeof name, "%s-%d", role, i);
    (void)pthread_setname_np(t, name);
}

int rf_read_line(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    int ok = fgets(buf, (int)n, f) != NULL;
    fclose(f);
    return ok ? 0 : -1;
}

int rf_grow(void *pp, uint64_t *cap, uint64_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    uint64_t n = *cap ? *cap : 64;
    while (n < need)
        n *= 2;
    size_t have = 0; /* force the realloc to n: the caller's cap is the one that counts */
    if (rf_reserve(pp, &have, (size_t)n, elem))
        return -1;
    *cap = n;
    return 0;
}

int rf_reserve(void *pp, size_t *cap, size_t need, size_t elem)
{
    void **p = pp;
    if (need <= *cap)
        return 0;
    if (elem && need > SIZE_MAX / elem)
        return -1;
    void *q = realloc(*p, need * elem);
    if (!q)
        return -1;
    *p = q;
    *cap = need;
    return 0;
}

/* What a file that is not a regular one is, in words. */
const char *rf_file_kind(mode_t mode)
{
    if (S_ISFIFO(mode))
        return "a FIFO (named pipe)";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISSOCK(mode))
        return "a socket";
    return "a special file";
}

static int not_regular(mode_t mode, const char *what, int code, rf_err *err)
{
    return rf_seterr(err, code, "is %s, not a regular file (%s must be one)", rf_file_kind(mode),
                     what);
}

int rf_open_regular(const char *path, const char *what, int code, int *fd, uint64_t *size,
                    rf_err *err)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return rf_seterr(err, -errno, "%s", strerror(errno));
    if (!S_ISREG(st.st_mode))
        return not_regular(st.st_mode, what, code, err);
    int f = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (f < 0)
        return rf_seterr(err, -errno, "%s", strerror(errno));
    int rc = 0, flags;
    if (fstat(f, &st) != 0)
        rc = rf_seterr(err, -errno, "%s", strerror(errno));
    else if (!S_ISREG(st.st_mode))
        rc = not_regular(st.st_mode, what, code, err);
    else if ((flags = fcntl(f, F_GETFL)) < 0 || fcntl(f, F_SETFL, flags & ~O_NONBLOCK) != 0)
        rc = rf_seterr(err, -errno, "%s", strerror(errno));
    if (rc) {
        close(f);
        return rc;
    }
    *fd = f;
    *size = (uint64_t)st.st_size;
    return 0;
}

int rf_pread_full(int fd, void *dst, size_t len, uint64_t off, size_t *got)
{
    size_t done = 0;
    while (done < len) {
        ssize_t r = pread(fd, (uint8_t *)dst + done, len - done, (off_t)(off + done));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            break;
        done += (size_t)r;
    }
    *got = done;
    return 0;
}

int rf_read_whole(const char *path, const char *what, int code, uint64_t limit, char **out,
                  uint64_t *len, rf_err *err)
{
    int fd;
    uint64_t size;
    rf_err oe = {0};
    int rc = rf_open_regular(path, what, code, &fd, &size, &oe);
    if (rc)
        return rf_seterr(err, rc, "%s: %s", path, oe.msg);
    char *buf = NULL;
    size_t got = 0;
    if (size > limit)
        rc = rf_seterr(err, RF_ELIMIT, "%s: larger than %llu bytes (the limit for %s)", path,
                       (unsigned long long)limit, what);
    else if (!(buf = malloc((size_t)size + 1)))
        rc = rf_seterr(err, RF_ENOMEM, "%s: no memory for %llu bytes", path,
                       (unsigned long long)size);
    else if ((rc = rf_pread_full(fd, buf, (size_t)size, 0, &got)) != 0 || got < size)
        rc = rf_seterr(err, rc ? rc : RF_EIO, "%s: short read at offset %llu: %s", path,
                       (unsigned long long)got, rc ? strerror(-rc) : "the file shrank");
    close(fd);
    if (rc) {
        free(buf);
        return rc;
    }
    buf[got] = 0;
    *out = buf;
    *len = got;
    return 0;
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void rf_rng_seed(rf_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++) {
        seed = rf_mix64(seed);
        r->s[i] = seed;
    }
}

uint64_t rf_rng_next(rf_rng *r)
{
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

uint64_t rf_rng_below(rf_rng *r, uint64_t n)
{
    /* Lemire's multiply-shift with rejection: unbiased and nearly always one multiply. */
    unsigned __int128 m = (unsigned __int128)rf_rng_next(r) * n;
    uint64_t lo = (uint64_t)m;
    if (lo < n) {
        uint64_t t = -n % n;
        while (lo < t) {
            m = (unsigned __int128)rf_rng_next(r) * n;
            lo = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

double rf_rng_unit(rf_rng *r) { return (double)(rf_rng_next(r) >> 11) * 0x1.0p-53; }

/* ---- URLs in messages ---- */

void rf_url_shown(const char *url, char *shown, size_t cap)
{
    const char *p = strstr(url, "://");
    const char *host = p ? p + 3 : url;
    const char *slash = host + strcspn(host, "/?#");
    const char *at = NULL;
    for (const char *q = host; q < slash; q++)
        if (*q == '@')
            at = q; /* userinfo ends at the last '@' before the path */
    if (at)
        host = at + 1;
    size_t path = *slash == '/' ? strcspn(slash, "?#") : 0;
    snprintf(shown, cap, "%.*s%.*s%.*s", (int)(p ? p + 3 - url : 0), url, (int)(slash - host),
             host, (int)path, slash);
}

void rf_url_scrub(char *msg)
{
    char *p = msg;
    while ((p = strstr(p, "://")) != NULL) {
        char *start = p;
        while (start > msg && start[-1] != ' ' && start[-1] != '(' && start[-1] != '"')
            start--;
        size_t len = strcspn(p, " \"");
        char *end = p + len;
        /* a URL quoted before ": ..." keeps its colon */
        int colon = end > p && end[-1] == ':' && (end - p) > 3;
        char url[RF_ERRMSG_MAX], shown[RF_ERRMSG_MAX];
        snprintf(url, sizeof url, "%.*s", (int)(end - start - colon), start);
        rf_url_shown(url, shown, sizeof shown);
        size_t n = strlen(shown), old = (size_t)(end - start - colon);
        if (n <= old) { /* never longer: only userinfo and a query are taken out */
            memmove(start + n, start + old, strlen(start + old) + 1);
            memcpy(start, shown, n);
        }
        p = start + n + (size_t)colon;
        if (p <= start + 2)
            p = start + 3;
    }
}
