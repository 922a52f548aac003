/* remote_open.c — the remote client (rf_remote_new: its settings from the config, the
 * environment and the shared AWS files, and its S3 credential chain, s3_creds.h) and create's
 * requests for remote shards, as the rf_remote_ops the formats call:
 * open (a one-byte ranged GET: size, ETag, and whether the server is there), fetch (an index,
 * whole), a reader (for the tar scanner) and list (S3 ListObjectsV2 for wildcards).
 *
 * DESIGN
 *  - Blocking, on create's thread, each with the engine's retries and verdict.
 *  - A reader for scattered reads (an index's spot checks) makes each one a ranged GET.
 *  - A forward reader streams: one GET from the first byte the scanner wants, pulled through a
 *    bounded buffer (RF_REMOTE_STREAM_BUF) by pausing the transfer when it is full. Member data
 *    the scanner skips is dropped; a jump beyond RF_REMOTE_STREAM_SKIP_MAX, or backwards,
 *    restarts the stream at the target, and a failed stream asks for its range again (counted
 *    as a retry).
 */
#include "io/remote.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loaders/tar.h"

static void count(_Atomic uint64_t *c, uint64_t v)
{
    atomic_fetch_add_explicit(c, v, memory_order_relaxed); /* statistics only */
}

static void sleep_ms(uint32_t ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* One blocking transfer, retried as the verdict says. 0, or -ENOENT (a 404: the caller decides
 * what absence means), -EACCES (a 403, or no S3 credentials: nothing sent) or -EIO, with why
 * saying what happened. */
static int perform(rf_remote *r, CURL *h, rf_xfer *x, char *why, size_t cap)
{
    char range[64];
    uint64_t got0 = x->got;
    for (uint32_t attempt = 0;; attempt++) {
        /* A retry asks for the same range again, as the engine's do. */
        x->got = got0;
        CURLcode c = CURLE_OK; /* an attempt not sent is judged as it stands */
        if (rf_remote_xfer_start(h, x, range, sizeof range) == 0) {
            count(&r->requests, 1);
            c = curl_easy_perform(h);
            count(&r->bytes, x->body);
        }
        uint32_t delay;
        int v = rf_remote_verdict(x, c, attempt, &delay, why, cap);
        if (v == RF_XFER_OK)
            return 0;
        if (v == RF_XFER_FAIL || attempt >= r->retries) {
            size_t n = strlen(why);
            if (attempt)
                snprintf(why + n, cap - n, " (after %u retries)", attempt);
            if (x->no_creds || (v == RF_XFER_FAIL && x->status == 403))
                return -EACCES;
            if (v == RF_XFER_FAIL && x->status == 404)
                return -ENOENT;
            return -EIO;
        }
        count(&r->retried, 1);
        sleep_ms(delay);
    }
}

/* ---- the client: its settings from the config and the environment ---- */

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* The S3 settings and the credential chain (s3_profile.c, s3_creds.c). A setting that cannot
 * be used fails s3:// URLs only (r->s3_err), not a loader of http(s) ones. */
static int s3_settings(rf_remote *r, rf_err *err)
{
    rf_s3_settings *s = malloc(sizeof *s);
    if (!s)
        return rf_seterr(err, RF_ENOMEM, "no memory");
    rf_s3_settings_read(s, r->ca, r->timeout_ms);
    snprintf(r->region, sizeof r->region, "%s", s->region[0] ? s->region : "us-east-1");
    snprintf(r->endpoint, sizeof r->endpoint, "%s", s->s3_endpoint);
    snprintf(r->sigv4, sizeof r->sigv4, "aws:amz:%s:s3", r->region);
    snprintf(r->s3_err, sizeof r->s3_err, "%s", s->err);
    r->s3_unsigned = s->anonymous == 1;
    r->creds = rf_s3_creds_new(s);
    return r->creds ? 0 : rf_seterr(err, RF_ENOMEM, "no memory");
}

int rf_remote_new(uint32_t retries, uint32_t timeout_ms, rf_remote **out, rf_err *err)
{
    *out = NULL;
    if (retries > RF_REMOTE_RETRIES_MAX)
        return rf_seterr(err, RF_EINVAL, "remote_retries %u is over %u", retries,
                         RF_REMOTE_RETRIES_MAX);
    if (timeout_ms < 1 || timeout_ms > RF_REMOTE_TIMEOUT_MS_MAX)
        return rf_seterr(err, RF_EINVAL, "remote_timeout_ms %u is outside 1..%u", timeout_ms,
                         RF_REMOTE_TIMEOUT_MS_MAX);
    /* curl_global_init is not thread-safe before 7.84; Debian 12 has 7.88, where it is. */
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return rf_seterr(err, RF_EIO, "libcurl failed to initialise");
    rf_remote *r = calloc(1, sizeof *r);
    if (!r) {
        curl_global_cleanup();
        return rf_seterr(err, RF_ENOMEM, "no memory");
    }
    r->retries = retries;
    r->timeout_ms = timeout_ms;
    const char *ca = env("SSL_CERT_FILE") ? env("SSL_CERT_FILE") : env("CURL_CA_BUNDLE");
    const char *mk = env("RF_S3_MAX_KEYS");
    r->list_max_keys = mk ? (uint32_t)strtoul(mk, NULL, 10) : 1000;
    if (r->list_max_keys < 1 || r->list_max_keys > 1000)
        r->list_max_keys = 1000;
    int rc = 0;
    if (ca && strlen(ca) >= sizeof r->ca)
        rc = rf_seterr(err, RF_EINVAL, "SSL_CERT_FILE is longer than %zu bytes", sizeof r->ca - 1);
    else if (ca)
        memcpy(r->ca, ca, strlen(ca) + 1);
    if (rc == 0)
        rc = s3_settings(r, err);
    if (rc) {
        rf_remote_free(r);
        return rc;
    }
    rf_remote_ops_fill(r);
    *out = r;
    return 0;
}

void rf_remote_free(rf_remote *r)
{
    if (!r)
        return;
    rf_s3_creds_free(r->creds);
    free(r);
    curl_global_cleanup();
}

/* ---- open, fetch ---- */

static void file_free(rf_remote_file *f)
{
    if (f) {
        free(f->url);
        free(f->shown);
        free(f);
    }
}

static int remote_open(void *ctx, const char *url, void **file, uint64_t *size, char *shown,
                       size_t cap, rf_err *err)
{
    rf_remote *r = ctx;
    rf_remote_file *f = calloc(1, sizeof *f);
    if (!f)
        return rf_seterr(err, RF_ENOMEM, "no memory");
    int rc = rf_remote_url(r, url, &f->url, shown, cap, err);
    f->shown = rc ? NULL : strdup(shown);
    f->s3 = strncmp(url, "s3://", 5) == 0;
    CURL *h = rc ? NULL : curl_easy_init();
    if (rc == 0 && (!f->shown || !h))
        rc = rf_seterr(err, RF_ENOMEM, "no memory");
    if (rc == 0) {
        uint8_t byte;
        char why[RF_ERRMSG_MAX - 64];
        rf_xfer x = {.r = r, .file = f, .dst = &byte, .len = 1};
        rf_remote_easy(r, h, f->url, f->s3, &x);
        int p = perform(r, h, &x, why, sizeof why);
        if (p != 0 && x.status == 416 && x.has_total && x.total == 0)
            p = 0; /* an empty object: the format refuses it with its own words */
        if (p == 0 && !x.has_total && !(x.status == 200 && x.has_length))
            rc = rf_seterr(err, RF_EIO, "%s: the server gave no size for it", f->shown);
        else if (p)
            rc = rf_seterr(err, p == -ENOENT ? RF_ENOFILES : p == -EACCES ? p : RF_EIO,
                           "cannot open remote shard: %s", why);
        *size = x.has_total ? x.total : x.content_length;
        f->size = *size;
        snprintf(f->etag, sizeof f->etag, "%s", x.etag);
    }
    if (h)
        curl_easy_cleanup(h);
    if (rc)
        file_free(f);
    else
        *file = f;
    return rc;
}

int rf_remote_fetch(rf_remote *r, const char *req, const char *shown, int s3, uint64_t max,
                    char **text, uint64_t *len, rf_err *err)
{
    rf_remote_file f = {.url = (char *)req, .shown = (char *)shown, .s3 = s3};
    char why[RF_ERRMSG_MAX - 64];
    CURL *h = curl_easy_init();
    *text = NULL;
    if (!h)
        return rf_seterr(err, RF_ENOMEM, "no memory");
    rf_xfer x = {.r = r, .file = &f, .grow = text, .grow_max = max};
    rf_remote_easy(r, h, f.url, f.s3, &x);
    int p = perform(r, h, &x, why, sizeof why);
    int rc = p == -ENOENT ? 0 : p ? rf_seterr(err, p == -EACCES ? p : RF_EIO, "%s", why) : 1;
    if (rc == 1 && !*text && rf_grow(text, &x.grow_cap, 1, 1) != 0)
        rc = rf_seterr(err, RF_ENOMEM, "no memory");
    if (rc == 1) {
        (*text)[x.got] = 0;
        *len = x.got;
    } else {
        free(*text);
        *text = NULL;
    }
    curl_easy_cleanup(h);
    return rc;
}

static int remote_fetch(void *ctx, const char *url, uint64_t max, char **text, uint64_t *len,
                        rf_err *err)
{
    char *req = NULL, shown[RF_PATH_BYTES_MAX];
    int rc = rf_remote_url(ctx, url, &req, shown, sizeof shown, err);
    if (rc == 0)
        rc = rf_remote_fetch(ctx, req, shown, strncmp(url, "s3://", 5) == 0, max, text, len,
                             err);
    free(req);
    return rc;
}

static void remote_close(void *ctx, void *file) { file_free(file); }

/* ---- the streamed reader ---- */

typedef struct stream {
    rf_remote *r;
    const rf_remote_file *f;
    CURLM *m;
    CURL *h;
    rf_xfer x;             /* the current response: off = where it began */
    uint8_t *buf;          /* bytes [pos, pos + len) of the object */
    size_t len;
    uint64_t pos;
    int active, finished, paused;
    int random;            /* each read is one blocking ranged GET (remote_reader's stream 0) */
    CURLcode code;
    uint32_t attempt;
    char range[64];
    char why[RF_ERRMSG_MAX - 64];
} stream;

/* Body bytes at x->at: those before the buffer's end are dropped (a 200 from the start),
 * the rest appended while there is room, else the transfer pauses until the scanner reads. */
static size_t stream_sink(rf_xfer *x, const uint8_t *data, size_t n)
{
    stream *s = x->sink_ctx;
    uint64_t end = s->pos + s->len;
    size_t skip = x->at < end ? (size_t)RF_MIN(end - x->at, n) : 0;
    if (skip < n && x->at + skip != end) {
        x->overflow = 1; /* a 206 starting past the asked offset */
        return 0;
    }
    if (s->len + (n - skip) > RF_REMOTE_STREAM_BUF) {
        s->paused = 1;
        return CURL_WRITEFUNC_PAUSE;
    }
    memcpy(s->buf + s->len, data + skip, n - skip);
    s->len += n - skip;
    x->at += n;
    x->got = x->at > x->off ? x->at - x->off : 0; /* of the range asked, kept or dropped */
    x->body += n;
    return n;
}

/* Start (or restart) the stream's GET at object offset `from` (<= s->pos + s->len: bytes
 * before the buffer's end are dropped as they come). */
static int stream_start(stream *s, uint64_t from)
{
    if (s->active)
        curl_multi_remove_handle(s->m, s->h);
    s->active = s->finished = s->paused = 0;
    count(&s->r->bytes, s->x.body);
    s->x.off = from;
    s->x.len = s->f->size - s->x.off;
    s->x.got = 0;
    if (rf_remote_xfer_start(s->h, &s->x, s->range, sizeof s->range) != 0) {
        s->finished = 1; /* not sent: the verdict says why */
        s->code = CURLE_OK;
        return 0;
    }
    if (curl_multi_add_handle(s->m, s->h) != CURLM_OK)
        return -ENOMEM;
    s->active = 1;
    count(&s->r->requests, 1);
    return 0;
}

/* Drop buffered bytes before off. */
static void stream_drop(stream *s, uint64_t off)
{
    size_t d = off > s->pos ? (size_t)RF_MIN(off - s->pos, s->len) : 0;
    memmove(s->buf, s->buf + d, s->len - d);
    s->len -= d;
    s->pos += d;
}

/* The finished transfer: judge it; a failed one resumes after a backoff, until the retries
 * are spent (then -EIO with why). */
static int stream_finished(stream *s)
{
    uint32_t delay;
    int v = rf_remote_verdict(&s->x, s->code, s->attempt, &delay, s->why, sizeof s->why);
    if (v == RF_XFER_OK)
        return 0;
    if (v == RF_XFER_FAIL || s->attempt >= s->r->retries) {
        size_t n = strlen(s->why);
        if (s->attempt)
            snprintf(s->why + n, sizeof s->why - n, " (after %u retries)", s->attempt);
        return -EIO;
    }
    s->attempt++;
    count(&s->r->retried, 1);
    sleep_ms(delay);
    return stream_start(s, s->x.off); /* the same range again, as the engine does */
}

/* Move the transfer on: resume it when the buffer has room, run it, wait for its socket. */
static int stream_pump(stream *s)
{
    if (s->finished)
        return stream_finished(s);
    if (s->paused && s->len < RF_REMOTE_STREAM_BUF / 2) {
        s->paused = 0;
        curl_easy_pause(s->h, CURLPAUSE_CONT);
    }
    int running = 0;
    if (curl_multi_perform(s->m, &running) != CURLM_OK)
        return -EIO;
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(s->m, &left)))
        if (msg->msg == CURLMSG_DONE) {
            s->finished = 1;
            s->code = msg->data.result;
        }
    if (!s->finished && !s->paused)
        curl_multi_poll(s->m, NULL, 0, 100, NULL);
    return 0;
}

/* A read of its own: one ranged GET of [off, end) into buf, with the usual retries. */
static int random_read(stream *s, uint8_t *buf, uint64_t off, uint64_t end)
{
    rf_xfer x = {.r = s->r, .file = s->f, .dst = buf, .off = off, .len = end - off, .check = 1};
    rf_remote_easy(s->r, s->h, s->f->url, s->f->s3, &x);
    return perform(s->r, s->h, &x, s->why, sizeof s->why) ? -EIO : 0;
}

static int stream_read(void *ctx, uint8_t *buf, size_t want, uint64_t off, size_t *got)
{
    stream *s = ctx;
    *got = 0;
    if (off >= s->f->size)
        return 0;
    uint64_t end = RF_MIN(off + want, s->f->size);
    if (s->random) {
        int rc = random_read(s, buf, off, end);
        *got = rc ? 0 : (size_t)(end - off);
        return rc;
    }
    if (end - off > RF_REMOTE_STREAM_BUF / 2)
        return -EINVAL; /* the scanner reads at most RF_TAR_READAHEAD_MAX */
    if (off < s->pos || off > s->pos + s->len + RF_REMOTE_STREAM_SKIP_MAX) {
        s->pos = off;
        s->len = 0;
        int rc = stream_start(s, off);
        if (rc)
            return rc;
    }
    for (;;) {
        stream_drop(s, off);
        if (s->pos == off && s->pos + s->len >= end)
            break;
        if (s->finished && s->x.got == s->x.len && s->pos + s->len < end)
            return -EIO; /* cannot happen: the object's size was checked */
        int rc = stream_pump(s);
        if (rc)
            return rc;
    }
    memcpy(buf, s->buf, (size_t)(end - off));
    *got = (size_t)(end - off);
    return 0;
}

static const char *stream_why(void *ctx) { return ((stream *)ctx)->why; }

static void stream_free(stream *s)
{
    if (!s)
        return;
    if (s->active)
        curl_multi_remove_handle(s->m, s->h);
    if (s->h)
        curl_easy_cleanup(s->h);
    if (s->m)
        curl_multi_cleanup(s->m);
    free(s->buf);
    free(s);
}

static int remote_reader(void *ctx, void *file, int streamed, rf_byte_reader *rd, rf_err *err)
{
    stream *s = calloc(1, sizeof *s);
    if (!s || !(s->buf = malloc(RF_REMOTE_STREAM_BUF)) || !(s->m = curl_multi_init()) ||
        !(s->h = curl_easy_init())) {
        stream_free(s);
        return rf_seterr(err, RF_ENOMEM, "no memory");
    }
    s->r = ctx;
    s->f = file;
    s->random = !streamed;
    s->x = (rf_xfer){.r = s->r, .file = s->f, .check = 1, .sink = stream_sink, .sink_ctx = s};
    rf_remote_easy(s->r, s->h, s->f->url, s->f->s3, &s->x);
    /* Not started yet: the first read starts it at its offset. */
    s->pos = UINT64_MAX / 2;
    *rd = (rf_byte_reader){.read = stream_read, .why = stream_why, .ctx = s};
    return 0;
}

static void remote_reader_close(rf_byte_reader *rd)
{
    stream *s = rd->ctx;
    if (s)
        count(&s->r->bytes, s->x.body);
    stream_free(s);
    rd->ctx = NULL;
}

/* ---- ListObjectsV2 ---- */

void rf_remote_ops_fill(rf_remote *r)
{
    r->ops = (rf_remote_ops){.ctx = r, .open = remote_open, .fetch = remote_fetch,
                             .reader = remote_reader, .reader_close = remote_reader_close,
                             .close = remote_close, .list = rf_remote_list};
}
