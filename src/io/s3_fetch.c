/* s3_fetch.c — the credential sources that answer over HTTP (s3_sources.h): STS's
 * AssumeRoleWithWebIdentity (EKS's IRSA), the container endpoint (ECS, EKS Pod Identity) and
 * the EC2 instance metadata service (IMDSv2), as botocore asks them.
 *
 * DESIGN
 *  - Each fetch is a few blocking requests on the thread that asks (the chain's, s3_creds.c),
 *    on an easy handle of its own: no redirect is followed (a credential comes from the
 *    address configured or not at all), every request has a total time, and answers are
 *    bounded (RF_S3_ANSWER_BYTES_MAX).
 *  - Timeouts and attempts are botocore's: instance metadata 1 s and one attempt (a machine
 *    without IMDS pays that once), the container endpoint 2 s and three, STS the client's
 *    remote_timeout_ms and three on a 5xx, 429 or a failed connection.
 *  - Messages name the source, its URL and what happened; the tokens sent and the keys
 *    received never appear in them.
 */
#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "io/s3_sources.h"

#define STS_ATTEMPTS 3u
#define RETRY_PAUSE_MS 1000u     /* between attempts, as botocore's container fetcher */

static void pause_ms(uint32_t ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- one request ---- */

typedef struct answer {
    char *buf;
    size_t len;
    int too_big;
} answer;

static size_t take(char *data, size_t size, size_t n, void *arg)
{
    answer *a = arg;
    n *= size;
    if (a->len + n > RF_S3_ANSWER_BYTES_MAX) {
        a->too_big = 1;
        return 0;
    }
    char *b = realloc(a->buf, a->len + n + 1);
    if (!b)
        return 0;
    memcpy(b + a->len, data, n);
    a->buf = b;
    a->len += n;
    b[a->len] = 0;
    return n;
}

/* method (GET, PUT or POST with body) of url: 0 with *status and the answer, or -1 with what
 * went wrong in err (the connection, a timeout, an answer too large). */
static int request(const rf_s3_settings *s, const char *method, const char *url,
                   struct curl_slist *headers, const char *body, uint32_t timeout_ms,
                   long *status, answer *a, char *err, size_t cap)
{
    CURL *h = curl_easy_init();
    char errbuf[CURL_ERROR_SIZE] = "";
    free(a->buf);
    *a = (answer){0};
    *status = 0;
    if (!h) {
        snprintf(err, cap, "no memory");
        return -1;
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)timeout_ms);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "ringfeed");
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, take);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, a);
    if (s->ca[0])
        curl_easy_setopt(h, CURLOPT_CAINFO, s->ca);
    if (headers)
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    if (body)
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    else if (strcmp(method, "PUT") == 0)
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "PUT");
    CURLcode c = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
    curl_easy_cleanup(h);
    if (c == CURLE_OK)
        return 0;
    if (a->too_big)
        snprintf(err, cap, "an answer over %u bytes", RF_S3_ANSWER_BYTES_MAX);
    else
        snprintf(err, cap, "%s%s%s", curl_easy_strerror(c), errbuf[0] ? ": " : "", errbuf);
    return -1;
}

/* ---- answers ---- */

/* "2024-05-01T12:34:56Z", with optional fractional seconds and a +hh:mm offset instead of Z:
 * Unix time in ms, or -1. */
static int64_t iso_ms(const char *v)
{
    struct tm tm = {0};
    int n = 0;
    if (sscanf(v, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
               &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6)
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    int64_t ms = (int64_t)timegm(&tm) * 1000;
    const char *p = v + n;
    if (*p == '.') {
        int scale = 100;
        for (p++; *p >= '0' && *p <= '9'; p++, scale /= 10)
            ms += (*p - '0') * scale;
    }
    int oh, om;
    if (*p == '+' || *p == '-') {
        if (sscanf(p + 1, "%2d:%2d", &oh, &om) != 2)
            return -1;
        ms -= (*p == '+' ? 1 : -1) * ((int64_t)oh * 3600 + om * 60) * 1000;
    } else if (*p != 'Z' && *p) {
        return -1;
    }
    return ms;
}

/* A JSON string at p into out[cap] (\" \\ \/ \n \t unescaped, \u refused): the byte after
 * its closing quote, or NULL. out may be NULL (skip it). */
static const char *json_string(const char *p, char *out, size_t cap)
{
    size_t n = 0;
    if (*p++ != '"')
        return NULL;
    for (; *p && *p != '"'; p++) {
        char c = *p;
        if (c == '\\') {
            p++;
            c = *p == 'n' ? '\n' : *p == 't' ? '\t' : *p;
            if (!*p || *p == 'u')
                return NULL;
        }
        if (out && n + 1 < cap)
            out[n++] = c;
        else if (out)
            return NULL; /* too long for its field */
    }
    if (out)
        out[n] = 0;
    return *p == '"' ? p + 1 : NULL;
}

static const char *blanks(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
        p++;
    return p;
}

/* Past one JSON value that is not a string (a number, true, an object or array, whose strings
 * are skipped as strings): NULL when it does not end. */
static const char *json_skip(const char *p)
{
    int depth = 0;
    for (; *p; p++) {
        if (*p == '"') {
            p = json_string(p, NULL, 0);
            if (!p)
                return NULL;
            p--;
        } else if (*p == '{' || *p == '[') {
            depth++;
        } else if (*p == '}' || *p == ']') {
            if (depth-- == 0)
                return p;
        } else if (*p == ',' && depth == 0) {
            return p;
        }
    }
    return NULL;
}

/* The top-level string members of a JSON object the sources answer with. */
typedef struct field {
    const char *name;
    char *out;
    size_t cap;
} field;

/* 0 when doc is one JSON object (each of fields found in it is filled), else -1. */
static int json_fields(const char *doc, field *fields, size_t nfields)
{
    const char *p = blanks(doc);
    if (*p++ != '{')
        return -1;
    for (p = blanks(p); *p != '}';) {
        char name[64];
        if (!(p = json_string(p, name, sizeof name)) || *(p = blanks(p)) != ':')
            return -1;
        p = blanks(p + 1);
        field *f = NULL;
        for (size_t i = 0; i < nfields; i++)
            if (strcmp(fields[i].name, name) == 0)
                f = &fields[i];
        p = *p == '"' ? json_string(p, f ? f->out : NULL, f ? f->cap : 0) : json_skip(p);
        if (!p)
            return -1;
        p = blanks(p);
        if (*p == ',')
            p = blanks(p + 1);
        else if (*p != '}')
            return -1;
    }
    return 0;
}

/* The text of the first <tag>...</tag> in an XML document, entities unescaped: 0, or -1. */
static int xml_text(const char *doc, const char *tag, char *out, size_t cap)
{
    char open[48], close[48];
    snprintf(open, sizeof open, "<%s>", tag);
    snprintf(close, sizeof close, "</%s>", tag);
    const char *a = strstr(doc, open), *b;
    if (!a || !(b = strstr(a += strlen(open), close)))
        return -1;
    static const char *const ent[][2] = {{"&amp;", "&"}, {"&lt;", "<"}, {"&gt;", ">"},
                                         {"&quot;", "\""}, {"&apos;", "'"}};
    size_t n = 0;
    while (a < b && n + 1 < cap) {
        size_t i = 0;
        while (i < 5 && strncmp(a, ent[i][0], strlen(ent[i][0])) != 0)
            i++;
        out[n++] = i < 5 ? ent[i][1][0] : *a;
        a += i < 5 ? strlen(ent[i][0]) : 1;
    }
    out[n] = 0;
    return a < b ? -1 : 0;
}

/* Keys out of the fields read: -1 with why when one is missing or the expiry does not read. */
static int key_done(rf_s3_key *k, const char *expiry, int expires, const char *what,
                    char *why, size_t cap)
{
    if (!k->id[0] || !k->secret[0]) {
        snprintf(why, cap, "%s: the answer has no AccessKeyId or SecretAccessKey", what);
        return -1;
    }
    k->expires_ms = expiry[0] ? iso_ms(expiry) : 0;
    if (k->expires_ms < 0 || (expires && !k->expires_ms)) {
        snprintf(why, cap, "%s: the answer's Expiration \"%.40s\" is not an ISO 8601 time",
                 what, expiry);
        return -1;
    }
    return 0;
}

/* The credentials of a JSON answer (the container endpoint's, instance metadata's). */
static int json_key(const char *doc, rf_s3_key *k, const char *what, char *why, size_t cap)
{
    char expiry[64] = "", code[32] = "";
    field f[] = {{"AccessKeyId", k->id, sizeof k->id},
                 {"SecretAccessKey", k->secret, sizeof k->secret},
                 {"Token", k->token, sizeof k->token},
                 {"Expiration", expiry, sizeof expiry},
                 {"Code", code, sizeof code}};
    if (json_fields(doc, f, sizeof f / sizeof f[0]) != 0) {
        snprintf(why, cap, "%s: the answer is not the JSON object of credentials expected "
                 "(or a value is too long)", what);
        return -1;
    }
    if (code[0] && strcmp(code, "Success") != 0) {
        snprintf(why, cap, "%s: the answer's Code is %s", what, code);
        return -1;
    }
    return key_done(k, expiry, 0, what, why, cap);
}

static int transient(int rc, long status)
{
    return rc != 0 || status == 429 || status >= 500;
}

/* ---- web identity ---- */

static char *sts_body(const rf_s3_settings *s, const char *token)
{
    CURL *h = curl_easy_init();
    char *arn = h ? curl_easy_escape(h, s->role_arn, 0) : NULL;
    char *name = h ? curl_easy_escape(h, s->session_name, 0) : NULL;
    char *tok = h ? curl_easy_escape(h, token, 0) : NULL;
    char *body = NULL;
    if (arn && name && tok) {
        size_t n = strlen(arn) + strlen(name) + strlen(tok) + 128;
        if ((body = malloc(n)))
            snprintf(body, n, "Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn=%s"
                     "&RoleSessionName=%s&WebIdentityToken=%s", arn, name, tok);
    }
    if (tok)
        memset(tok, 0, strlen(tok));
    curl_free(arn);
    curl_free(name);
    curl_free(tok);
    if (h)
        curl_easy_cleanup(h);
    return body;
}

static int sts_answer(const answer *a, long status, rf_s3_key *k, const char *what, char *why,
                      size_t cap)
{
    char expiry[64] = "";
    if (status != 200) {
        char code[64] = "", msg[200] = "";
        if (a->buf) {
            xml_text(a->buf, "Code", code, sizeof code);
            xml_text(a->buf, "Message", msg, sizeof msg);
        }
        snprintf(why, cap, "%s: HTTP %ld%s%s%s%s", what, status, code[0] ? " " : "", code,
                 msg[0] ? ": " : "", msg);
        return -1;
    }
    const char *c = a->buf ? strstr(a->buf, "<Credentials>") : NULL;
    if (!c || xml_text(c, "AccessKeyId", k->id, sizeof k->id) ||
        xml_text(c, "SecretAccessKey", k->secret, sizeof k->secret) ||
        xml_text(c, "SessionToken", k->token, sizeof k->token) ||
        xml_text(c, "Expiration", expiry, sizeof expiry)) {
        snprintf(why, cap, "%s: the answer holds no credentials that can be read", what);
        return -1;
    }
    return key_done(k, expiry, 1, what, why, cap);
}

int rf_s3_fetch_web_identity(const rf_s3_settings *s, rf_s3_key *k, char *why, size_t cap)
{
    char url[RF_PATH_BYTES_MAX], what[RF_PATH_BYTES_MAX + RF_S3_NAME_MAX];
    if (s->sts_endpoint[0])
        snprintf(url, sizeof url, "%s", s->sts_endpoint);
    else /* the regional endpoint, botocore's default */
        snprintf(url, sizeof url, "https://sts.%s.amazonaws.com/",
                 s->region[0] ? s->region : "us-east-1");
    snprintf(what, sizeof what, "web identity role %s: AssumeRoleWithWebIdentity at %s",
             s->role_arn, url);
    char *token = NULL;
    if (rf_s3_read_token(s->wi_token_file, &token, why, cap) != 0)
        return -1; /* read at each fetch: the token file is rotated */
    char *body = sts_body(s, token);
    memset(token, 0, strlen(token));
    free(token);
    if (!body) {
        snprintf(why, cap, "no memory");
        return -1;
    }
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: "
                                               "application/x-www-form-urlencoded");
    answer a = {0};
    long status = 0;
    char err[CURL_ERROR_SIZE + 64];
    int rc = -1;
    for (uint32_t i = 0; i < STS_ATTEMPTS; i++) {
        if (i)
            pause_ms(RETRY_PAUSE_MS / 4 << i);
        rc = request(s, "POST", url, hdr, body, s->timeout_ms, &status, &a, err, sizeof err);
        if (!transient(rc, status))
            break;
    }
    memset(body, 0, strlen(body));
    free(body);
    curl_slist_free_all(hdr);
    if (rc)
        snprintf(why, cap, "%s: %s", what, err);
    else
        rc = sts_answer(&a, status, k, what, why, cap);
    if (rc == 0)
        snprintf(k->source, sizeof k->source, "web identity role %s", s->role_arn);
    free(a.buf);
    return rc;
}

/* ---- the container endpoint ---- */

int rf_s3_fetch_container(const rf_s3_settings *s, rf_s3_key *k, char *why, size_t cap)
{
    char what[RF_PATH_BYTES_MAX + 64], line[RF_S3_TOKEN_MAX + 32];
    snprintf(what, sizeof what, "the container endpoint %s", s->container_url);
    struct curl_slist *hdr = NULL;
    const char *auth = s->container_auth;
    char *text = NULL;
    if (s->container_auth_file[0]) { /* read at each fetch: EKS Pod Identity rotates it */
        if (rf_s3_read_token(s->container_auth_file, &text, why, cap) != 0)
            return -1;
        auth = text;
    }
    if (auth[0] && strlen(auth) + 16 >= sizeof line) {
        snprintf(why, cap, "%s: the authorization token is over %u bytes", what,
                 RF_S3_TOKEN_MAX - 16);
        free(text);
        return -1;
    }
    if (auth[0]) {
        snprintf(line, sizeof line, "Authorization: %s", auth);
        hdr = curl_slist_append(NULL, line);
        memset(line, 0, sizeof line);
    }
    free(text);
    answer a = {0};
    long status = 0;
    char err[CURL_ERROR_SIZE + 64];
    int rc = -1;
    for (uint32_t i = 0; i < RF_S3_CONTAINER_ATTEMPTS; i++) {
        if (i)
            pause_ms(RETRY_PAUSE_MS);
        rc = request(s, "GET", s->container_url, hdr, NULL, RF_S3_CONTAINER_TIMEOUT_MS,
                     &status, &a, err, sizeof err);
        if (rc == 0 && status == 200)
            break;
    }
    curl_slist_free_all(hdr);
    if (rc)
        snprintf(why, cap, "%s: %s", what, err);
    else if (status != 200)
        snprintf(why, cap, "%s: HTTP %ld", what, status);
    else
        rc = json_key(a.buf ? a.buf : "", k, what, why, cap);
    rc = rc || status != 200 ? -1 : 0;
    if (rc == 0)
        snprintf(k->source, sizeof k->source, "the container endpoint %s", s->container_url);
    free(a.buf);
    return rc;
}

/* ---- instance metadata ---- */

/* GET (or PUT for the token) base + path with IMDS's timeout and attempts. */
static int imds_request(const rf_s3_settings *s, const char *method, const char *path,
                        struct curl_slist *hdr, long *status, answer *a, char *err, size_t cap)
{
    char url[RF_PATH_BYTES_MAX + 128];
    size_t n = strlen(s->imds_endpoint);
    while (n && s->imds_endpoint[n - 1] == '/')
        n--;
    snprintf(url, sizeof url, "%.*s%s", (int)n, s->imds_endpoint, path);
    int rc = -1;
    for (uint32_t i = 0; i < s->imds_attempts && (rc || *status >= 500); i++)
        rc = request(s, method, url, hdr, NULL, s->imds_timeout_ms, status, a, err, cap);
    return rc;
}

/* The session token of IMDSv2: 0 with tok (or tok "" when the service only speaks v1 and v1
 * is allowed, as botocore falls back), -1 with why. */
static int imds_token(const rf_s3_settings *s, char *tok, size_t tcap, const char *what,
                      char *why, size_t cap)
{
    struct curl_slist *hdr = curl_slist_append(NULL, "x-aws-ec2-metadata-token-ttl-seconds: 21600");
    answer a = {0};
    long status = 0;
    char err[CURL_ERROR_SIZE + 64];
    int rc = imds_request(s, "PUT", "/latest/api/token", hdr, &status, &a, err, sizeof err);
    curl_slist_free_all(hdr);
    tok[0] = 0;
    if (rc)
        snprintf(why, cap, "%s: no answer (%s)", what, err);
    else if (status == 200 && a.buf && a.len < tcap)
        snprintf(tok, tcap, "%s", a.buf);
    else if ((status == 403 || status == 404 || status == 405) && !s->imds_v1_off)
        rc = 0; /* IMDSv1 only */
    else
        rc = -1, snprintf(why, cap, "%s: PUT /latest/api/token: HTTP %ld%s", what, status,
                          s->imds_v1_off ? " (and AWS_EC2_METADATA_V1_DISABLED is set)" : "");
    free(a.buf);
    return rc;
}

int rf_s3_fetch_imds(const rf_s3_settings *s, rf_s3_key *k, char *why, size_t cap)
{
    char what[RF_PATH_BYTES_MAX + 64], tok[256], line[320], role[RF_S3_NAME_MAX], path[400];
    snprintf(what, sizeof what, "instance metadata at %s", s->imds_endpoint);
    if (imds_token(s, tok, sizeof tok, what, why, cap) != 0)
        return -1;
    snprintf(line, sizeof line, "x-aws-ec2-metadata-token: %s", tok);
    struct curl_slist *hdr = tok[0] ? curl_slist_append(NULL, line) : NULL;
    answer a = {0};
    long status = 0;
    char err[CURL_ERROR_SIZE + 64];
    const char *base = "/latest/meta-data/iam/security-credentials/";
    int rc = imds_request(s, "GET", base, hdr, &status, &a, err, sizeof err);
    size_t n = rc == 0 && status == 200 && a.buf ? strcspn(a.buf, "\r\n") : 0;
    if (rc)
        snprintf(why, cap, "%s: %s: %s", what, base, err);
    else if (status == 404 || (status == 200 && n == 0))
        snprintf(why, cap, "%s: no IAM role is attached to this instance", what);
    else if (status != 200 || n >= sizeof role)
        snprintf(why, cap, "%s: GET %s: HTTP %ld", what, base, status);
    else
        snprintf(role, sizeof role, "%.*s", (int)n, a.buf);
    rc = rc || status != 200 || n == 0 || n >= sizeof role ? -1 : 0;
    if (rc == 0) {
        snprintf(path, sizeof path, "%s%s", base, role);
        rc = imds_request(s, "GET", path, hdr, &status, &a, err, sizeof err);
        if (rc)
            snprintf(why, cap, "%s: GET %s: %s", what, path, err);
        else if (status != 200)
            snprintf(why, cap, "%s: GET %s: HTTP %ld", what, path, status);
        else
            rc = json_key(a.buf ? a.buf : "", k, what, why, cap);
        rc = rc || status != 200 ? -1 : 0;
    }
    curl_slist_free_all(hdr);
    free(a.buf);
    if (rc == 0)
        snprintf(k->source, sizeof k->source, "instance metadata role %s", role);
    return rc;
}
