/* remote_list.c — wildcards in s3:// patterns: ListObjectsV2 under the pattern's prefix, page
 * after page through continuation tokens; loaders/dataset.c matches the keys.
 *
 * DESIGN. Each page is one GET fetched whole with create's retries, at most
 * RF_REMOTE_LIST_PAGE_BYTES; only <Key>, <IsTruncated> and <NextContinuationToken> are read.
 * Query parameters are written sorted and percent-encoded as SigV4 signs them. At most
 * RF_REMOTE_LIST_PAGES_MAX pages; a page returning the token it was asked with is an error (a
 * server stuck on one page). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "io/remote.h"

/* Percent-encode s (RFC 3986 unreserved kept, and '/' with keep_slash) into out[cap]; -1
 * when it does not fit. */
static int pct(const char *s, int keep_slash, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (n + 4 > cap)
            return -1;
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            strchr("-._~", *p) || (keep_slash && *p == '/'))
            out[n++] = (char)*p;
        else
            out[n++] = '%', out[n++] = hex[*p >> 4], out[n++] = hex[*p & 15];
    }
    out[n] = 0;
    return 0;
}

/* Decode XML entities of text[0..n) in place into out[cap]. */
static void xml_text(const char *text, size_t n, char *out, size_t cap)
{
    static const struct {
        const char *ent, ch;
    } ents[] = {{"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
    size_t o = 0;
    for (size_t i = 0; i < n && o + 1 < cap; i++) {
        char c = text[i];
        for (size_t k = 0; c == '&' && k < sizeof ents / sizeof ents[0]; k++)
            if (strncmp(text + i, ents[k].ent, strlen(ents[k].ent)) == 0) {
                c = ents[k].ch;
                i += strlen(ents[k].ent) - 1;
                break;
            }
        out[o++] = c;
    }
    out[o] = 0;
}

/* The text of the next <tag>...</tag> at or after *p, into out; 0 when there is none. */
static int xml_next(const char **p, const char *tag, char *out, size_t cap)
{
    char open[48], close[48];
    snprintf(open, sizeof open, "<%s>", tag);
    snprintf(close, sizeof close, "</%s>", tag);
    const char *a = strstr(*p, open);
    const char *b = a ? strstr(a, close) : NULL;
    if (!b)
        return 0;
    a += strlen(open);
    xml_text(a, (size_t)(b - a), out, cap);
    *p = b + strlen(close);
    return 1;
}

typedef struct lister {
    rf_remote *r;
    const char *bucket;
    size_t blen;
    char prefix[RF_PATH_BYTES_MAX];  /* the keys' prefix, as in the pattern */
    int keep_slash;                  /* send '/' in the query as it is (see rf_remote_list) */
    char token[RF_PATH_BYTES_MAX * 3];
    char sent[RF_PATH_BYTES_MAX * 3]; /* the token this page was asked with */
    uint32_t page;                    /* this page's number, from 0 */
    char url[RF_PATH_BYTES_MAX * 8];
    char key[RF_PATH_BYTES_MAX];
    char full[RF_PATH_BYTES_MAX + 128];
} lister;

/* One page: its objects to fn; 1 when another page follows (its token in l->token). */
static int list_page(lister *l, int (*fn)(void *, const char *, rf_err *), void *arg,
                     rf_err *err)
{
    char tok[RF_PATH_BYTES_MAX * 3] = "", pre[RF_PATH_BYTES_MAX * 3];
    if ((l->token[0] && pct(l->token, 0, tok, sizeof tok) != 0) ||
        pct(l->prefix, l->keep_slash, pre, sizeof pre) != 0)
        return rf_seterr(err, RF_ELIMIT, "s3://%.*s: continuation token or prefix too long",
                         (int)l->blen, l->bucket);
    /* s3://BUCKET/?query: rf_remote_url maps it like an object whose key is "?query"; the
     * query is appended after mapping the bucket alone. */
    snprintf(l->full, sizeof l->full, "s3://%.*s/", (int)l->blen, l->bucket);
    char *base = NULL, shown[RF_PATH_BYTES_MAX];
    int rc = rf_remote_url(l->r, l->full, &base, shown, sizeof shown, err);
    if (rc)
        return rc;
    snprintf(l->url, sizeof l->url, "%s?%s%s%slist-type=2&max-keys=%u&prefix=%s", base,
             tok[0] ? "continuation-token=" : "", tok, tok[0] ? "&" : "", l->r->list_max_keys,
             pre);
    free(base);
    char *xml = NULL;
    uint64_t len = 0;
    rc = rf_remote_fetch(l->r, l->url, shown, 1, RF_REMOTE_LIST_PAGE_BYTES, &xml, &len, err);
    if (rc == 0)
        rc = rf_seterr(err, RF_ENOFILES, "listing s3://%.*s: no such bucket", (int)l->blen,
                       l->bucket);
    if (rc < 0)
        return rc;
    const char *p = xml;
    rc = 0;
    while (rc == 0 && xml_next(&p, "Key", l->key, sizeof l->key)) {
        snprintf(l->full, sizeof l->full, "s3://%.*s/%s", (int)l->blen, l->bucket, l->key);
        rc = fn(arg, l->full, err);
    }
    char trunc[16] = "";
    p = xml;
    xml_next(&p, "IsTruncated", trunc, sizeof trunc);
    p = xml;
    snprintf(l->sent, sizeof l->sent, "%s", l->token);
    l->token[0] = 0;
    if (rc == 0 && strcmp(trunc, "true") == 0)
        rc = xml_next(&p, "NextContinuationToken", l->token, sizeof l->token) ? 1
             : rf_seterr(err, RF_EIO, "listing s3://%.*s: a truncated page without a "
                         "continuation token", (int)l->blen, l->bucket);
    /* A server that answers a token with itself would be asked the same page for ever. */
    if (rc == 1 && l->sent[0] && strcmp(l->token, l->sent) == 0)
        rc = rf_seterr(err, RF_EIO, "listing s3://%.*s: page %u came back with the "
                       "continuation token it was asked with, so the server would send the same "
                       "page for ever; refused", (int)l->blen, l->bucket, l->page + 1);
    free(xml);
    return rc;
}

int rf_remote_list(void *ctx, const char *pattern,
                   int (*fn)(void *arg, const char *url, rf_err *err), void *arg, rf_err *err)
{
    if (strncmp(pattern, "s3://", 5) != 0)
        return rf_seterr(err, RF_EINVAL, "%s: only s3:// URLs can be listed", pattern);
    lister *l = calloc(1, sizeof *l);
    if (!l)
        return rf_seterr(err, RF_ENOMEM, "no memory");
    l->r = ctx;
    l->bucket = pattern + 5;
    const char *slash = strchr(l->bucket, '/');
    l->blen = slash ? (size_t)(slash - l->bucket) : strlen(l->bucket);
    const char *key = slash ? slash + 1 : "";
    snprintf(l->prefix, sizeof l->prefix, "%.*s", (int)strcspn(key, "*?["), key);
    int rc = 1;
    for (uint32_t page = 0; rc == 1; page++) {
        rc = page >= RF_REMOTE_LIST_PAGES_MAX
                 ? rf_seterr(err, RF_ELIMIT, "listing %s: more than %u pages", pattern,
                             RF_REMOTE_LIST_PAGES_MAX)
                 : (l->page = page, list_page(l, fn, arg, err));
        /* libcurl 7.88 signs the query as sent, and servers disagree on a '/' in it: S3's
         * rule wants %2F (sent first), moto 5.2 checks the literal '/'. A first page refused
         * (403) with a '/' in the prefix is asked once more the other way. */
        if (rc == -EACCES && page == 0 && !l->keep_slash && strchr(l->prefix, '/')) {
            l->keep_slash = 1;
            page--;
            rc = 1;
        }
    }
    free(l);
    return rc;
}
