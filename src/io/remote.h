/* remote.h — remote shards (http://, https://, s3://) through libcurl: the settings and the
 * rules every transfer shares (remote.c), create's blocking requests and the formats'
 * rf_remote_ops (remote_open.c), and the read engine (io_curl.c).
 *
 * DESIGN
 *  - One rf_remote per loader, read-only after create but its atomic counters.
 *  - Every response goes through one judgement, rf_remote_verdict, so a fault is treated the
 *    same at create and during an epoch.
 *  - rf_remote_body knows each byte's offset in the object: bytes outside the window are
 *    dropped, never written beyond dst. A 200 to a ranged GET for part of the object (a server
 *    ignoring Range) is refused at its headers, so create's one-byte open fails with the reason.
 *    An object whose size or ETag changed since create is an I/O error naming the URL.
 *  - Credentials live in the client's credential chain (s3_creds.h) and the request URL only;
 *    messages, stats and file names use the printable form (scheme, host, path).
 *  - An s3:// request is signed at each attempt with the chain's current credentials, or not
 *    sent at all: unsigned only when the user asked (AWS_NO_SIGN_REQUEST). Redirects are not
 *    followed for S3, since libcurl would send the redirected request unsigned. */
#ifndef RF_REMOTE_H
#define RF_REMOTE_H

#include <curl/curl.h>
#include <stdatomic.h>

#include "base/common.h"
#include "io/s3_creds.h"
#include "loaders/dataset.h"

#define RF_REMOTE_RETRIES_MAX 100u          /* rf_config.remote_retries */
#define RF_REMOTE_TIMEOUT_MS_MAX 3600000u    /* rf_config.remote_timeout_ms */
#define RF_REMOTE_BACKOFF_BASE_MS 50u        /* first retry waits 25..50 ms, then doubling */
#define RF_REMOTE_BACKOFF_MAX_MS 5000u       /* ... up to this */
#define RF_REMOTE_RETRY_AFTER_MAX_MS 10000u  /* a longer Retry-After waits this long */
#define RF_REMOTE_RATE_MIN 16384u            /* bytes/s: an attempt may take remote_timeout_ms
                                                plus its bytes at this rate, then it is cut */
#define RF_REMOTE_ETAG_MAX 128               /* bytes of an ETag kept; longer ones are cut */
#define RF_REMOTE_LIST_PAGES_MAX 100000u     /* ListObjectsV2 pages of one pattern */
#define RF_REMOTE_LIST_PAGE_BYTES (16u << 20) /* one page's XML */
#define RF_REMOTE_STREAM_BUF (1u << 20)      /* a scan's streamed bytes held at once */
#define RF_REMOTE_STREAM_SKIP_MAX (8u << 20) /* a scan jumping further forward restarts its
                                                stream there instead of reading the gap */

typedef struct rf_remote {
    uint32_t retries, timeout_ms;
    char ca[RF_PATH_BYTES_MAX];      /* SSL_CERT_FILE or CURL_CA_BUNDLE; "" = curl's own */
    char region[64];                 /* AWS_REGION, AWS_DEFAULT_REGION, the profile's, us-east-1 */
    char endpoint[RF_PATH_BYTES_MAX];/* AWS_ENDPOINT_URL_S3, ... (s3_profile.c); "" = AWS */
    char sigv4[96];                  /* "aws:amz:REGION:s3" */
    rf_s3_creds *creds;              /* what S3 requests are signed with */
    int s3_unsigned;                 /* AWS_NO_SIGN_REQUEST: S3 requests go unsigned */
    char s3_err[RF_ERRMSG_MAX];      /* S3 settings that cannot be used: s3:// URLs fail */
    uint32_t list_max_keys;          /* ListObjectsV2 max-keys: 1000, or RF_S3_MAX_KEYS */
    rf_remote_ops ops;               /* the formats' table, ctx = this */
    /* Counted by every thread (relaxed: statistics only). */
    _Atomic uint64_t requests, retried, bytes;
} rf_remote;

/* An opened object (rf_file.remote). */
typedef struct rf_remote_file {
    char *url;      /* the request URL (may hold credentials: never printed) */
    char *shown;    /* printable form */
    uint64_t size;
    int s3;         /* an s3:// object: requests are signed */
    char etag[RF_REMOTE_ETAG_MAX];   /* "" when the server sent none */
} rf_remote_file;

/* One transfer of a byte window [off, off + len) of an object into dst (or a whole object into
 * a growing buffer). Reset before each attempt; got survives, so a retry resumes. */
typedef struct rf_xfer {
    const rf_remote *r;
    const rf_remote_file *file;      /* NULL while opening (no size or ETag to compare yet) */
    uint8_t *dst;
    uint64_t off, len, got;
    /* this response */
    long status;
    int headers_seen, has_range, window_done, overflow, changed;
    int unplaced;                    /* a 206 without a Content-Range that can be read */
    int ignored_range;               /* a 200 to a ranged GET for part of the object */
    uint64_t at;                     /* object offset of the next body byte */
    uint64_t range_start, total;     /* Content-Range: bytes START-END/TOTAL (or / *) */
    int has_total;
    char bad_range[64];              /* a Content-Range that could not be read, cut short */
    uint64_t content_length;
    int has_length;
    char etag[RF_REMOTE_ETAG_MAX];
    uint32_t retry_after_ms;
    uint64_t body;                   /* body bytes of this response, all statuses */
    /* a whole-object fetch: grows *grow up to grow_max instead of writing to dst */
    char **grow;
    uint64_t grow_cap, grow_max;
    int too_big;
    int check;                       /* compare size and ETag with file's (not at open) */
    /* a stream (a scan): takes every body byte at offset `at` instead; returns n, or
     * CURL_WRITEFUNC_PAUSE to have them again later, and advances at and body */
    size_t (*sink)(struct rf_xfer *x, const uint8_t *data, size_t n);
    void *sink_ctx;
    char errbuf[CURL_ERROR_SIZE];
    /* S3: the signature's headers, kept here for the attempt (libcurl does not copy a header
     * list), who signed (or why nothing was sent), and an error answer's first bytes */
    int s3;
    int no_creds;                    /* 0, or RF_S3_CREDS_NONE / _STALE: nothing was sent */
    struct curl_slist s3_hdr[2];
    char token_line[RF_S3_TOKEN_MAX + 32];
    char signer[RF_ERRMSG_MAX];      /* "profile dev in FILE (access key AKIA...)", or why */
    char bucket_region[32];          /* x-amz-bucket-region of a redirect */
    char err_page[512];
    size_t err_page_len;
} rf_xfer;

enum rf_xfer_verdict { RF_XFER_OK = 0, RF_XFER_RETRY = 1, RF_XFER_FAIL = 2 };

/* Make the loader's client: retries and timeout from the config, the rest from the
 * environment (docs/remote.md). RF_EINVAL naming a setting out of range. */
int rf_remote_new(uint32_t retries, uint32_t timeout_ms, rf_remote **out, rf_err *err);
void rf_remote_free(rf_remote *r);

/* The request URL for a user's URL (s3:// becomes the endpoint's path-style URL, or AWS's
 * virtual-hosted one) and its printable form in shown[cap]. Malformed: RF_EINVAL naming the
 * printable form. */
int rf_remote_url(const rf_remote *r, const char *url, char **req, char *shown, size_t cap,
                  rf_err *err);

/* Options every request sets on an easy handle (URL, TLS, timeouts, keep-alive, HTTP/2,
 * x's callbacks); s3: an S3 request, signed at each attempt. */
void rf_remote_easy(const rf_remote *r, CURL *h, const char *url, int s3, rf_xfer *x);
/* Start an attempt of x on h: the Range header for what is left of the window, fresh state,
 * an S3 request's signature. 0, or -1 when the attempt must not be sent (no credentials:
 * x->no_creds): judge it at once with rf_remote_verdict, which says why. */
int rf_remote_xfer_start(CURL *h, rf_xfer *x, char *range, size_t cap);

/* Judge a finished attempt. OK: the window (or object) is complete. RETRY: wait *delay_ms
 * first (backoff with jitter for `attempt`, or Retry-After, capped). FAIL and RETRY: why says
 * what happened, naming x's object and byte range. */
int rf_remote_verdict(rf_xfer *x, CURLcode code, uint32_t attempt, uint32_t *delay_ms,
                      char *why, size_t cap);

/* GET the object at req whole, at most max bytes: 1 with *text (NUL-terminated) and *len, 0 for
 * a 404, else an error naming shown (-EACCES for a 403, else RF_EIO). */
int rf_remote_fetch(rf_remote *r, const char *req, const char *shown, int s3, uint64_t max,
                    char **text, uint64_t *len, rf_err *err);
/* rf_remote_ops.list (remote_list.c). */
int rf_remote_list(void *ctx, const char *pattern,
                   int (*fn)(void *arg, const char *url, rf_err *err), void *arg, rf_err *err);

/* The formats' table over r (remote_open.c). */
void rf_remote_ops_fill(rf_remote *r);

/* The read engine (io_curl.c): io.h's contract, requests carry rf_io_req.remote. */
struct rf_io_ops;
extern const struct rf_io_ops rf_io_curl_ops;

#endif
