/* remote.c — what every remote request shares: URLs (s3:// mapping, the printable form),
 * easy-handle options, the response callbacks that place a window's bytes, and the verdict
 * (remote.h's DESIGN). The client and create's requests are remote_open.c's, over this file. */
#include "io/remote.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* ---- URLs ---- */

/* Percent-encode an S3 key for the request path ('/' kept). */
static char *key_path(const char *key)
{
    static const char hex[] = "0123456789ABCDEF";
    char *out = malloc(3 * strlen(key) + 1), *o = out;
    for (const unsigned char *k = (const unsigned char *)key; out && *k; k++) {
        if ((*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z') || (*k >= '0' && *k <= '9') ||
            strchr("-._~/", *k))
            *o++ = (char)*k;
        else
            *o++ = '%', *o++ = hex[*k >> 4], *o++ = hex[*k & 15];
    }
    if (out)
        *o = 0;
    return out;
}

static int s3_url(const rf_remote *r, const char *url, char **req, rf_err *err)
{
    if (r->s3_err[0]) /* S3 settings that cannot be used (s3_profile.c) */
        return rf_seterr(err, RF_EINVAL, "%s: %s", url, r->s3_err);
    const char *bucket = url + 5, *slash = strchr(bucket, '/');
    size_t blen = slash ? (size_t)(slash - bucket) : strlen(bucket);
    if (blen == 0 || blen > 63)
        return rf_seterr(err, RF_EINVAL, "%s: an s3:// URL is s3://BUCKET/KEY", url);
    char *key = key_path(slash ? slash + 1 : "");
    size_t n = strlen(r->endpoint) + blen + strlen(r->region) + (key ? strlen(key) : 0) + 64;
    char *u = key ? malloc(n) : NULL;
    if (!u) {
        free(key);
        return rf_seterr(err, RF_ENOMEM, "no memory");
    }
    /* An endpoint (MinIO, Ceph, moto) is addressed path-style, AWS virtual-hosted style. */
    size_t ep = strlen(r->endpoint);
    while (ep && r->endpoint[ep - 1] == '/')
        ep--;
    if (ep)
        snprintf(u, n, "%.*s/%.*s/%s", (int)ep, r->endpoint, (int)blen, bucket, key);
    else
        snprintf(u, n, "https://%.*s.s3.%s.amazonaws.com/%s", (int)blen, bucket, r->region,
                 key);
    free(key);
    *req = u;
    return 0;
}

int rf_remote_url(const rf_remote *r, const char *url, char **req, char *shown, size_t cap,
                  rf_err *err)
{
    rf_url_shown(url, shown, cap);
    if (strlen(url) >= RF_PATH_BYTES_MAX)
        return rf_seterr(err, RF_EINVAL, "%s: URL longer than %d bytes", shown,
                         RF_PATH_BYTES_MAX - 1);
    if (strncmp(url, "s3://", 5) == 0)
        return s3_url(r, url, req, err);
    const char *host = strstr(url, "://") + 3;
    if (!*host || *host == '/')
        return rf_seterr(err, RF_EINVAL, "%s: URL without a host", shown);
    *req = strdup(url);
    return *req ? 0 : rf_seterr(err, RF_ENOMEM, "no memory");
}

/* ---- responses ---- */

/* "Name: value" when line starts with name (any case); the value without blanks around it. */
static int header_value(const char *line, size_t n, const char *name, char *val, size_t cap)
{
    size_t k = strlen(name);
    if (n <= k || strncasecmp(line, name, k) != 0 || line[k] != ':')
        return 0;
    const char *v = line + k + 1, *end = line + n;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
        end--;
    snprintf(val, cap, "%.*s", (int)(end - v), v);
    return 1;
}

/* "bytes START-END/TOTAL", with an asterisk for TOTAL (length unknown: the bytes are placed
 * all the same) or for START-END (a 416's). Anything else goes to x->bad_range: a 206 without a
 * readable one is refused (x->unplaced), as nothing says where its bytes belong. */
static void content_range(rf_xfer *x, const char *v)
{
    unsigned long long a, b, t;
    int end = 0;
    if (sscanf(v, "bytes %llu-%llu/%llu%n", &a, &b, &t, &end) == 3 && !v[end] && a <= b) {
        x->range_start = a, x->total = t, x->has_range = x->has_total = 1;
    } else if (sscanf(v, "bytes %llu-%llu/*%n", &a, &b, &end) == 2 && end && !v[end] &&
               a <= b) {
        x->range_start = a, x->has_range = 1;
    } else if (sscanf(v, "bytes */%llu%n", &t, &end) == 1 && !v[end]) {
        x->total = t, x->has_total = 1;
    } else {
        snprintf(x->bad_range, sizeof x->bad_range, "%s", v);
    }
}

static size_t on_header(char *line, size_t size, size_t n, void *arg)
{
    rf_xfer *x = arg;
    char v[RF_REMOTE_ETAG_MAX];
    n *= size;
    if (n >= 5 && strncmp(line, "HTTP/", 5) == 0) { /* a new response (after a redirect, too) */
        const char *sp = memchr(line, ' ', n);
        x->status = sp ? strtol(sp + 1, NULL, 10) : 0;
        x->has_total = x->has_length = x->has_range = 0;
        x->etag[0] = x->bad_range[0] = x->bucket_region[0] = 0;
        x->retry_after_ms = 0;
        x->err_page_len = 0;
    } else if (header_value(line, n, "Content-Range", v, sizeof v)) {
        content_range(x, v);
    } else if (header_value(line, n, "Content-Length", v, sizeof v)) {
        x->content_length = strtoull(v, NULL, 10);
        x->has_length = 1;
    } else if (header_value(line, n, "ETag", v, sizeof v)) {
        snprintf(x->etag, sizeof x->etag, "%s", v);
    } else if (header_value(line, n, "x-amz-bucket-region", v, sizeof v)) {
        snprintf(x->bucket_region, sizeof x->bucket_region, "%s", v);
    } else if (header_value(line, n, "Retry-After", v, sizeof v)) {
        unsigned long s = strtoul(v, NULL, 10); /* seconds; an HTTP date counts as 0 */
        x->retry_after_ms = (uint32_t)RF_MIN(s * 1000ul, RF_REMOTE_RETRY_AFTER_MAX_MS);
    }
    return n;
}

/* The first body byte: where it lies in the object, and whether the object is still the one
 * create saw (size and ETag). */
static void headers_done(rf_xfer *x)
{
    x->headers_seen = 1;
    x->at = x->status == 206 && x->has_range ? x->range_start : 0;
    x->unplaced = x->status == 206 && !x->has_range;
    /* A 200 to a ranged GET for less than the whole object: the server ignores Range, and
     * every such read would move the object from its start. Refused, never read that way. */
    uint64_t from = x->off + x->got, to = x->off + x->len; /* what this attempt asked for */
    uint64_t whole = x->status == 200 && x->has_length ? x->content_length
                     : x->file ? x->file->size : 0;
    x->ignored_range = x->status == 200 && !x->grow && (from > 0 || to < whole);
    const rf_remote_file *f = x->file;
    if (!f || !x->check || (x->status != 200 && x->status != 206))
        return;
    uint64_t size = x->has_total ? x->total : x->status == 200 && x->has_length
                                                  ? x->content_length : f->size;
    if (size != f->size || (f->etag[0] && x->etag[0] && strcmp(f->etag, x->etag) != 0))
        x->changed = 1;
}

/* Grow a whole-object fetch's buffer for n more bytes (plus the NUL kept after them). */
static int grow_to(rf_xfer *x, uint64_t need)
{
    if (need + 1 > x->grow_max + 1) {
        x->too_big = 1;
        return -1;
    }
    return rf_grow(x->grow, &x->grow_cap, need + 1, 1);
}

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
    rf_xfer *x = arg;
    n *= size;
    if (!x->headers_seen)
        headers_done(x);
    if (x->changed || x->unplaced || x->ignored_range)
        return 0;
    if (x->status != 200 && x->status != 206) {
        size_t keep = RF_MIN(n, sizeof x->err_page - 1 - x->err_page_len);
        memcpy(x->err_page + x->err_page_len, data, keep); /* S3's error code, for the verdict */
        x->err_page_len += keep;
        x->err_page[x->err_page_len] = 0;
        x->body += n;
        return n; /* an error page: judged by its status */
    }
    if (x->sink)
        return x->sink(x, (const uint8_t *)data, n);
    x->body += n;
    if (x->grow) { /* a whole object */
        if (grow_to(x, x->got + n) != 0)
            return 0;
        memcpy(*x->grow + x->got, data, n);
        x->got += n;
        return n;
    }
    uint64_t from = x->off + x->got, end = x->off + x->len;
    uint64_t at = x->at, skip = from > at ? RF_MIN(from - at, n) : 0;
    x->at += n;
    if (at + skip != from && skip < n) {
        x->overflow = 1; /* a 206 starting past what was asked: refuse it */
        return 0;
    }
    uint64_t take = RF_MIN(n - skip, end - from);
    memcpy(x->dst + (from - x->off), data + skip, take);
    x->got += take;
    if (skip + take < n) { /* bytes past the window */
        if (x->status == 206)
            x->overflow = 1;
        else
            x->window_done = 1; /* a 200 body: the window is complete, stop reading it */
        return 0;
    }
    return n;
}

void rf_remote_easy(const rf_remote *r, CURL *h, const char *url, int s3, rf_xfer *x)
{
    curl_easy_reset(h);
    x->s3 = s3;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    /* libcurl sends a redirected request without the credentials (to another host), that is
     * unsigned: S3's redirects are answers to judge, not to follow. */
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, s3 ? 0L : 1L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    /* No CURLOPT_PIPEWAIT: a transfer waiting for a connection that might multiplex waits
     * behind one whose server never answers, outside every timeout. HTTP/2 streams still share
     * the connections negotiated. */
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)r->timeout_ms);
    /* A transfer that moves less than a byte a second for the timeout is stalled. */
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (long)RF_MAX(1u, r->timeout_ms / 1000u));
    if (r->ca[0])
        curl_easy_setopt(h, CURLOPT_CAINFO, r->ca);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, x->errbuf);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "ringfeed");
}

/* libcurl 7.88 signs the headers it is given but does not add the payload hash S3 requires on
 * every signed request: for a GET, the SHA-256 of nothing. */
static char payload_hash[] =
    "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/* Sign an S3 attempt with the chain's current credentials (SigV4, the session token as
 * x-amz-security-token), or leave it unsigned when the user asked: 0, or -1 with x->no_creds
 * and the reason in x->signer when there are none. */
static int sign(CURL *h, rf_xfer *x)
{
    const rf_remote *r = x->r;
    x->no_creds = 0;
    if (!x->s3)
        return 0;
    if (r->s3_unsigned) {
        snprintf(x->signer, sizeof x->signer, "unsigned, as AWS_NO_SIGN_REQUEST asks");
        return 0;
    }
    rf_s3_key key, *k = &key;
    int rc = rf_s3_creds_get(r->creds, k, x->signer, sizeof x->signer);
    if (rc == RF_S3_CREDS_OK) {
        char userpwd[RF_S3_KEY_ID_MAX + RF_S3_SECRET_MAX + 2];
        snprintf(userpwd, sizeof userpwd, "%s:%s", k->id, k->secret);
        curl_easy_setopt(h, CURLOPT_AWS_SIGV4, r->sigv4);
        curl_easy_setopt(h, CURLOPT_USERPWD, userpwd); /* libcurl keeps a copy */
        memset(userpwd, 0, sizeof userpwd);
        x->s3_hdr[0] = (struct curl_slist){.data = payload_hash};
        if (k->token[0]) {
            snprintf(x->token_line, sizeof x->token_line, "x-amz-security-token: %s", k->token);
            x->s3_hdr[0].next = &x->s3_hdr[1];
            x->s3_hdr[1] = (struct curl_slist){.data = x->token_line};
        }
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, x->s3_hdr);
        /* The key id's type prefix (AKIA long-term, ASIA temporary), never the secret. */
        snprintf(x->signer, sizeof x->signer, "signed with credentials from %s, access key id "
                 "%.4s...", k->source, k->id);
    }
    memset(k, 0, sizeof *k);
    x->no_creds = rc;
    return rc ? -1 : 0;
}

int rf_remote_xfer_start(CURL *h, rf_xfer *x, char *range, size_t cap)
{
    /* A total time, so a server trickling bytes just fast enough for the stall rule cannot hold
     * a request for ever: remote_timeout_ms plus the bytes wanted at RF_REMOTE_RATE_MIN. */
    uint64_t want = x->grow ? x->grow_max : x->len - x->got;
    uint64_t total_ms = x->r->timeout_ms + want / (RF_REMOTE_RATE_MIN / 1000u);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)RF_MIN(total_ms, (uint64_t)INT32_MAX));
    x->status = 0;
    x->headers_seen = x->has_range = x->has_total = x->has_length = 0;
    x->window_done = x->overflow = x->changed = x->too_big = x->unplaced = 0;
    x->ignored_range = 0;
    x->retry_after_ms = 0;
    x->body = 0;
    x->errbuf[0] = 0;
    x->etag[0] = x->bad_range[0] = x->bucket_region[0] = 0;
    x->err_page_len = 0;
    x->err_page[0] = 0;
    if (x->grow) {
        x->got = 0; /* a whole object starts again */
        curl_easy_setopt(h, CURLOPT_RANGE, NULL);
    } else {
        snprintf(range, cap, "%" PRIu64 "-%" PRIu64, x->off + x->got, x->off + x->len - 1);
        curl_easy_setopt(h, CURLOPT_RANGE, range);
    }
    return sign(h, x);
}

/* ---- the verdict ---- */

static uint32_t backoff_ms(uint32_t attempt)
{
    uint32_t d = RF_REMOTE_BACKOFF_BASE_MS << RF_MIN(attempt, 16u);
    d = RF_MIN(d, RF_REMOTE_BACKOFF_MAX_MS);
    /* Jitter: half the step plus a random part of the other half, so that clients that
     * failed together do not come back together. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t seed = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull + (uintptr_t)&ts;
    return d / 2 + (uint32_t)((seed >> 33) % (d / 2 + 1));
}

static int transient(CURLcode c)
{
    switch (c) {
    case CURLE_COULDNT_CONNECT: case CURLE_OPERATION_TIMEDOUT: case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR: case CURLE_PARTIAL_FILE: case CURLE_GOT_NOTHING:
    case CURLE_HTTP2: case CURLE_HTTP2_STREAM: case CURLE_SSL_CONNECT_ERROR:
    case CURLE_COULDNT_RESOLVE_HOST:
        return 1;
    default:
        return 0;
    }
}

/* What an S3 error answer adds to "HTTP N": S3's error code and who signed the request (a 400,
 * 401 or 403: ExpiredToken, SignatureDoesNotMatch, AccessDenied...), or why a redirect was
 * not followed. */
static void s3_detail(const rf_xfer *x, char *why, size_t cap)
{
    size_t n = strlen(why);
    long st = x->status;
    if (st >= 300 && st < 400) {
        if (x->bucket_region[0])
            snprintf(why + n, cap - n, ": S3 redirects to the bucket's region, %s (set "
                     "AWS_REGION=%s); a redirect is not followed, as it would go unsigned",
                     x->bucket_region, x->bucket_region);
        else
            snprintf(why + n, cap - n, ": a redirect, not followed for S3 (it would go "
                     "unsigned): check AWS_REGION and the endpoint");
        return;
    }
    if (st != 400 && st != 401 && st != 403)
        return;
    const char *a = strstr(x->err_page, "<Code>"), *b = a ? strstr(a, "</Code>") : NULL;
    if (a && b && b - a - 6 < 64)
        snprintf(why + n, cap - n, " %.*s", (int)(b - a - 6), a + 6);
    n = strlen(why);
    snprintf(why + n, cap - n, " (%s)", x->signer);
}

static void where(const rf_xfer *x, char *out, size_t cap)
{
    const char *u = x->file ? x->file->shown : "";
    if (x->grow)
        snprintf(out, cap, "GET %s", u);
    else
        snprintf(out, cap, "GET %s bytes %" PRIu64 "-%" PRIu64, u, x->off, x->off + x->len - 1);
}

int rf_remote_verdict(rf_xfer *x, CURLcode code, uint32_t attempt, uint32_t *delay_ms,
                      char *why, size_t cap)
{
    char w[RF_ERRMSG_MAX / 2];
    where(x, w, sizeof w);
    *delay_ms = backoff_ms(attempt);
    long st = x->status;
    if (x->no_creds) { /* nothing was sent: no credentials to sign with */
        snprintf(why, cap, "%s: %s", w, x->signer);
        return x->no_creds == RF_S3_CREDS_STALE ? RF_XFER_RETRY : RF_XFER_FAIL;
    }
    if (x->changed) {
        snprintf(why, cap, "%s: the object changed during the run (size or ETag differs from "
                 "what create saw)", w);
        return RF_XFER_FAIL;
    }
    if (x->ignored_range) {
        snprintf(why, cap, "%s: the server ignores byte ranges (it answered HTTP 200, the whole "
                 "object, to a ranged GET): every sample read would move the object from its "
                 "start, so it is refused; serve the shards from a server that answers ranges "
                 "with 206 (nginx, Apache, S3 and its kind; Python's http.server does not)", w);
        return RF_XFER_FAIL;
    }
    if (x->unplaced) {
        snprintf(why, cap, "%s: the server answered HTTP 206 with %s%s%s, which does not say "
                 "where its bytes lie", w, x->bad_range[0] ? "Content-Range \"" : "no "
                 "Content-Range", x->bad_range, x->bad_range[0] ? "\"" : "");
        return RF_XFER_FAIL;
    }
    if (x->overflow) {
        snprintf(why, cap, "%s: the server answered another byte range (HTTP %ld)", w, st);
        return RF_XFER_FAIL;
    }
    if (x->too_big) {
        snprintf(why, cap, "%s: larger than %" PRIu64 " bytes", w, x->grow_max);
        return RF_XFER_FAIL;
    }
    if (code == CURLE_OK || (code == CURLE_WRITE_ERROR && x->window_done)) {
        if (st == 200 || st == 206) {
            if (x->grow || x->got == x->len)
                return RF_XFER_OK;
            snprintf(why, cap, "%s: short body (%" PRIu64 " of %" PRIu64 " bytes)", w, x->got,
                     x->len);
            return RF_XFER_RETRY;
        }
        snprintf(why, cap, "%s: HTTP %ld", w, st);
        if (x->s3)
            s3_detail(x, why, cap);
        if (st == 429 || st == 503) {
            *delay_ms = RF_MAX(*delay_ms, x->retry_after_ms);
            return RF_XFER_RETRY;
        }
        return st == 408 || st >= 500 ? RF_XFER_RETRY : RF_XFER_FAIL;
    }
    if (code == CURLE_OUT_OF_MEMORY && x->status && !x->headers_seen && !x->errbuf[0]) {
        /* libcurl 7.88 reports a response header line over CURL_MAX_HTTP_HEADER this way */
        snprintf(why, cap, "%s: the answer's headers could not be read (HTTP %ld): a header "
                 "line over libcurl's 100 KiB limit, which libcurl reports as \"Out of memory\"",
                 w, x->status);
        return RF_XFER_FAIL;
    }
    snprintf(why, cap, "%s: %s%s%s%s", w, curl_easy_strerror(code), x->errbuf[0] ? ": " : "",
             x->errbuf, code == CURLE_OPERATION_TIMEDOUT ? " (an attempt may take "
             "remote_timeout_ms, plus 1 s per 16 KiB it asks for)" : "");
    return transient(code) ? RF_XFER_RETRY : RF_XFER_FAIL;
}
